"""Hostile input at the boundary: malformed sparse structure, integer symbols that would wrap or truncate, sizes
beyond the memory budget, out-of-range arguments, streams that change between passes, estimates changed in place.
Each gets a clear error naming the argument before anything is allocated or handed to compiled code."""

from __future__ import annotations

import jax
import numpy as np
import pytest
import scipy.sparse as sp

import specinit
from specinit.engine.sources import CountSource
from specinit.models import factors, gaussian_hmm, gmm, hmm, kernel_multiview, lda, multiview, single_topic
from specinit.synthetic import sample_lda


@pytest.fixture(scope="module")
def counts():
    return sample_lda(n_docs=80, vocab_size=15, k=2, alpha=0.3, doc_length=40, seed=0).counts.tocsr()


def _corrupted(matrix, how: str):
    """``matrix`` (CSR) with its index arrays changed in place after construction, as a damaged file leaves them."""
    bad = matrix.copy()
    bad.indices, bad.indptr, bad.data = bad.indices.copy(), bad.indptr.copy(), bad.data.copy()
    if how == "column beyond V":
        bad.indices[3] = bad.shape[1] + 40
    elif how == "negative column":
        bad.indices[3] = -3
    elif how == "decreasing indptr":
        bad.indptr[2], bad.indptr[3] = bad.indptr[3], bad.indptr[2]
    elif how == "indptr past the data":
        bad.indptr[-1] = bad.indptr[-1] + 7
    elif how == "short data":
        bad.data = bad.data[:-5]
    return bad


CORRUPTIONS = ["column beyond V", "negative column", "decreasing indptr", "indptr past the data", "short data"]
FITS = {
    "lda": lambda X: lda.spectral(X, 2, alpha0=1.0, seed=0),
    "single_topic": lambda X: single_topic.spectral(X, 2, seed=0),
    "gmm": lambda X: gmm.spectral(X, 2, seed=0),
}


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("family", sorted(FITS))
def test_malformed_csr_is_refused_before_compiled_code(counts, family, how):
    name = "x" if family == "gmm" else "counts"
    with pytest.raises(ValueError, match=rf"'{name}' argument of {family}\.spectral must be a (sparse|CSR) matrix"):
        FITS[family](_corrupted(counts, how))


@pytest.mark.parametrize("how", CORRUPTIONS)
@pytest.mark.parametrize("module", [lda, single_topic], ids=["lda", "single_topic"])
def test_malformed_csr_is_refused_by_the_online_updates(counts, module, how):
    """A first batch, and a batch joining stored pair sums that are held dense (whose sums a compiled kernel adds
    in place), are checked before they are read."""
    family = module.__name__.rsplit(".", 1)[-1]
    earlier = module.update(counts, k=2, seed=0)
    assert isinstance(earlier.state["moments/pairs"], np.ndarray)  # 15 words: the pair sums are held dense
    for estimate, k in ((None, 2), (earlier, None)):
        with pytest.raises(ValueError, match=rf"'counts' argument of {family}\.update must be a (sparse|CSR) matrix"):
            module.update(_corrupted(counts, how), estimate, k=k, seed=0)


@pytest.mark.parametrize("fmt", ["csc", "coo", "bsr", "lil"])
def test_every_sparse_format_is_checked(counts, fmt):
    matrix = counts.asformat(fmt)
    # the same corruption in each format's own index arrays
    if fmt == "csc":
        matrix.indices = matrix.indices.copy()
        matrix.indices[0] = counts.shape[0] + 5
    elif fmt == "coo":
        matrix.col = matrix.col.copy()
        matrix.col[0] = -1
    elif fmt == "bsr":
        matrix.indices = matrix.indices.copy()
        matrix.indices[0] = counts.shape[1] + 5
    else:
        matrix.rows[0] = [counts.shape[1] + 5]
        matrix.data[0] = [1.0]
    with pytest.raises(ValueError, match="'counts' argument of lda.spectral must be a sparse matrix with"):
        lda.spectral(matrix, 2, alpha0=1.0)


def test_valid_sparse_formats_give_the_csr_estimate(counts):
    reference = single_topic.spectral(counts, 2, seed=0).params["beta"]
    for fmt in ("csc", "coo", "bsr", "lil", "dok", "dia"):
        np.testing.assert_allclose(single_topic.spectral(counts.asformat(fmt), 2, seed=0).params["beta"], reference,
                                   rtol=1e-12, atol=0)


@pytest.mark.parametrize("symbols, message", [
    (np.array([0, 1, 2, 1, 0, 2**64 - 1] * 20, dtype=np.uint64), r"symbols below 9\.22e\+18; got the value 1\.84467e\+19"),
    (np.array([0, 1, 2, 1, 0, 1e20] * 20), r"symbols below 9\.01e\+15; got the value 1e\+20"),
    (np.array([0, 1, 2, 1, 0, 1.5] * 20), r"integer symbols; got the value 1\.5"),
    (np.array([0, 1, 2, 1, 0, -1] * 20, dtype=np.int8), r"non-negative symbols; got the value -1"),
    (np.array([0, 1, 2, 1, 0, np.nan] * 20), r"finite symbols; got NaN or inf"),
])
def test_symbols_are_checked_before_any_cast(symbols, message):
    with pytest.raises(ValueError, match=rf"'sequences' argument of hmm.spectral must be {message}"):
        hmm.spectral(symbols, 2, n_symbols=3)


def test_huge_category_codes_are_refused():
    rng = np.random.default_rng(0)
    views = [rng.integers(0, 3, 60).astype(float) for _ in range(3)]
    views[1][4] = 1e20
    with pytest.raises(ValueError, match=r"'views\[1\]' argument of multiview.spectral must be category codes below"):
        multiview.spectral(views, 2, kinds=["categorical"] * 3)


def test_unobserved_symbols_cost_nothing_and_get_the_floor():
    # The same chain written with 10 symbols, and with those symbols spread over n_symbols = 10**6: the views keep
    # the observed symbols only, so the fits agree and the unobserved symbols get the floor.
    rng = np.random.default_rng(1)
    small = rng.integers(0, 10, 3000)
    spread = small * 100_003
    n_symbols = 10**6
    a = hmm.spectral(small, 2, n_symbols=10, seed=0, floor=1e-12)
    b = hmm.spectral(spread, 2, n_symbols=n_symbols, seed=0, floor=1e-12)
    used = np.arange(10) * 100_003
    assert b.params["emission"].shape == (2, n_symbols)
    np.testing.assert_allclose(b.params["emission"][:, used], a.params["emission"], rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(b.params["transition"], a.params["transition"], rtol=1e-8, atol=1e-12)
    unobserved = np.delete(b.params["emission"], used, axis=1)
    assert unobserved.max() <= 1e-12 / n_symbols * (1 + 1e-9)
    with pytest.raises(ValueError, match=r"'k' argument of hmm.spectral must be at most the number of symbols "
                                         r"observed \(10 of n_symbols = 1000000\)"):
        hmm.spectral(spread, 11, n_symbols=n_symbols)


def test_sizes_over_the_memory_budget_are_refused_before_allocating():
    rng = np.random.default_rng(0)
    sequence = rng.integers(0, 200, 200)
    with pytest.raises(MemoryError, match=r"'n_symbols' argument of hmm.spectral asks for about 582 TiB"):
        hmm.spectral(sequence, 2, n_symbols=10**13)
    previous = specinit.set_memory_limit(2**20)
    try:
        assert specinit.memory_limit() == 2**20
        with pytest.raises(MemoryError, match=r"over the memory budget of 1 MiB.*specinit.set_memory_limit\(n_bytes\) "
                                              r"or the SPECINIT_MEMORY_LIMIT environment variable"):
            hmm.spectral(sequence, 2, n_symbols=10**5)
        views = [rng.normal(size=(100, 2)) for _ in range(3)]
        with pytest.raises(MemoryError, match=r"'rank' argument of kernel_multiview.spectral"):
            kernel_multiview.spectral(views, 2, rank=2048)
        codes = [rng.integers(0, 3, 100) for _ in range(3)]
        with pytest.raises(MemoryError, match=r"'dims' argument of multiview.spectral"):
            multiview.spectral(codes, 2, dims=[10**5] * 3)
    finally:
        specinit.set_memory_limit(None)
    assert specinit.memory_limit() == previous
    with pytest.raises(ValueError, match="'n_bytes' argument of specinit.set_memory_limit"):
        specinit.set_memory_limit(10)
    with pytest.raises(ValueError, match=r"'n_bins' argument of gaussian_hmm.spectral must be an integer >= 2 and "
                                         r"<= 300"):
        gaussian_hmm.spectral(rng.normal(size=300), 2, n_bins=10**12)


@pytest.mark.parametrize("call, error, message", [
    (lambda X: lda.spectral(X, 10**20, alpha0=1.0), ValueError, r"'k' argument of lda.spectral"),
    (lambda X: single_topic.spectral(X, 10**20), ValueError, r"'k' argument of single_topic.spectral"),
    (lambda X: lda.spectral(X, 2, alpha0=1e300), ValueError, r"'alpha0' argument of lda.spectral must be a finite "
                                                             r"number > 0 and <= 1e\+08"),
    (lambda X: lda.spectral(X, 2, alpha0=10**400), ValueError, r"'alpha0' argument of lda.spectral"),
    (lambda X: lda.spectral(X, 2, alpha_sum=1e300), ValueError, r"'alpha_sum' argument of lda.spectral"),
    (lambda X: lda.spectral(X, 2, alpha0_grid="abc"), TypeError, r"'alpha0_grid' argument of lda.spectral must be "
                                                                 r"a sequence of numbers"),
    (lambda X: lda.spectral(X, 2, alpha0_grid=[0.5, np.nan]), ValueError, r"'alpha0_grid' argument"),
    (lambda X: lda.spectral(X, 2, alpha0_grid=[]), ValueError, r"'alpha0_grid' argument"),
    (lambda X: gmm.spectral(X.toarray(), 10**20), ValueError, r"'k' argument of gmm.spectral must be at most 10 "
                                                               r"when x has fewer columns than k"),
])
def test_out_of_range_arguments_name_the_argument(counts, call, error, message):
    with pytest.raises(error, match=message):
        call(counts)


def test_a_stream_must_give_the_same_documents_on_every_pass(counts):
    passes = []

    def growing():
        passes.append(None)
        return iter([counts[:40], counts[40: 40 + 10 * len(passes)]])

    with pytest.raises(ValueError, match=r"'counts' argument of lda.spectral must be a stream that yields the same "
                                         r"documents on every pass \(50 rows on the first\); got 60 rows"):
        lda.spectral(growing, 2, alpha0=1.0)

    def wider():
        return iter([counts[:40], sp.hstack([counts[40:], counts[40:, :1]]).tocsr()])

    with pytest.raises(ValueError, match=r"chunks with the same number of columns \(15\); got chunk 1 with 16"):
        lda.spectral(wider, 2, alpha0=1.0)


def test_dask_blocks_must_keep_the_declared_width(counts):
    da = pytest.importorskip("dask.array")
    dense = counts.toarray()
    lying = da.from_array(dense, chunks=(40, 15)).map_blocks(lambda b: np.hstack([b, b[:, :1]]), dtype=dense.dtype)
    source = CountSource(lying)
    with pytest.raises(ValueError, match=r"chunks with the same number of columns \(15\); got Dask block 0 with 16"):
        list(source.chunks())


def test_an_estimate_changed_in_place_is_refused_by_the_hand_off(counts):
    X = counts.toarray()
    est = single_topic.spectral(counts, 2, seed=0)
    est.params["beta"][0, 0] = -0.5
    with pytest.raises(ValueError, match=r"'estimate' argument of init_params must be values > 0 for the simplex "
                                         r"site 'beta'; got minimum -0.5"):
        est.init_params(single_topic.model, 2, jax.random.PRNGKey(0), model_args=(X,), model_kwargs={"k": 2})
    est.params["beta"][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"'estimate' argument of init_strategy must be finite values; got "
                                         r"non-finite entries in 'beta'"):
        est.init_strategy()


def test_refine_names_the_caller_for_an_invalid_start():
    sequence = np.random.default_rng(0).integers(0, 3, 300)
    start = {"init": [0.5, 0.5], "transition": [[0.5, 0.5], [0.5, 0.5]], "emission": [[0.5, 0.6, -0.1], [0.3, 0.3, 0.4]]}
    with pytest.raises(ValueError, match=r"^The 'estimate' argument of hmm.refine must be values > 0 for the simplex "
                                         r"site 'emission'; got minimum -0.1 instead\.$"):
        hmm.refine(sequence, start)


def test_values_whose_squares_overflow_are_refused():
    x = np.random.default_rng(0).normal(size=(50, 2))
    with pytest.raises(ValueError, match=r"'x' argument of gmm.spectral must be values of at most 6\.7e\+153 in "
                                         r"absolute value .*change the unit\); got max \|value\| = 2\.\d+e\+200"):
        gmm.spectral(x * 1e200, 2)
    # up to the bound the fit is the unscaled one mapped back
    scaled = gmm.spectral(x * 1e150, 1, seed=0)
    np.testing.assert_allclose(scaled.params["loc"], gmm.spectral(x, 1, seed=0).params["loc"] * 1e150, rtol=1e-8)


def test_extreme_units_where_a_fit_keeps_raw_powers_are_refused_naming_the_argument():
    """multiview.update keeps raw sums of fourth powers of its Gaussian views and factors.refine runs its log joint
    in JAX's float32: at 1e+-150 both say which argument to rescale (the spectral fits are free of the unit)."""
    rng = np.random.default_rng(0)
    h = rng.choice(2, 400)
    views = [np.array([[3.0, 0.0], [0.0, 3.0]])[h] + rng.normal(size=(400, 2)) for _ in range(3)]
    x = rng.exponential(size=(400, 2)) @ rng.normal(size=(2, 4))
    for s in (1e-150, 1e150):
        with pytest.raises(ValueError, match=r"^The 'views\[0\]' argument of multiview.update must be a Gaussian view "
                                             r"whose largest \|value\| lies between .* change the unit; got max"):
            multiview.update([v * s for v in views], k=2)
        with pytest.raises(ValueError, match=r"^The 'x' argument of factors.refine must be of a magnitude whose "
                                             r"square float32 holds .*rescale x"):
            factors.refine(x * s, factors.spectral(x * s, 2, "skew", seed=0), num_steps=2)
