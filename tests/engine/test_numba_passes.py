"""The fused Numba CSR kernels give the SciPy sums (backend="numba"), in blocks that Ctrl-C can stop between."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine.moments import CountMoments
from tests.conftest import random_instance, sample_lda

# Same float64 products summed in another order (per thread, then across threads): a few ulps.
RTOL = 1e-10


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(a).max())


@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("call_work", [None, 50])
def test_numba_backend_equals_scipy(weighting, n_threads, call_work, monkeypatch):
    """Also when every compiled call covers only a few documents (``CALL_WORK = 50``: hundreds of blocks)."""
    from specinit.engine.backends import numba as backend

    if call_work is not None:
        monkeypatch.setattr(backend, "CALL_WORK", call_work)
    beta, weights = random_instance(3, 40, seed=1)
    X, _ = sample_lda(beta, 3 * weights, N=400, length=20, seed=2)
    X[3] = 0  # dropped document
    X = sp.csr_matrix(X)
    ref = CountMoments(X, alpha0=1.5, weighting=weighting, backend="numpy")
    fast = CountMoments(X, alpha0=1.5, weighting=weighting, backend="numba", n_threads=n_threads, chunk_rows=150)
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((40, 7))
    assert _rel(ref.m2_matmat(Q), fast.m2_matmat(Q)) < RTOL
    W = rng.standard_normal((40, 3))
    assert _rel(ref.whitened_m3(W), fast.whitened_m3(W)) < RTOL


def test_closing_sweep_in_small_blocks_equals_one_call(monkeypatch):
    from specinit.engine.backends import numba as backend

    beta, weights = random_instance(3, 40, seed=3)
    X = sp.csr_matrix(sample_lda(beta, weights, N=300, length=25, seed=4)[0])
    theta = np.full((300, 3), 1 / 3)
    whole = backend.closing_sweep(X, beta, weights, theta, 4)
    monkeypatch.setattr(backend, "CALL_WORK", 3 * 6 * 10)  # at most 10 non-zeros a block
    blocked = backend.closing_sweep(X, beta, weights, theta, 4)
    np.testing.assert_array_equal(theta, 1 / 3)  # the caller's proportions are not written to
    np.testing.assert_array_equal(blocked[0], whole[0])  # per document: the same steps in the same order
    np.testing.assert_allclose(blocked[1], whole[1], rtol=RTOL)
    np.testing.assert_allclose(blocked[2], whole[2], rtol=RTOL)


def test_closing_sweep_takes_one_shared_prior_row_or_one_per_document():
    """A shared alpha is read as one row (no (n, k) copy per chunk): the same sweep as the prior repeated per
    document; a prior with another number of rows is refused, not read past its end."""
    from specinit.engine.backends import numba as backend

    beta, weights = random_instance(3, 40, seed=3)
    X = sp.csr_matrix(sample_lda(beta, weights, N=300, length=25, seed=4)[0])
    theta = np.full((300, 3), 1 / 3)
    shared = backend.closing_sweep(X, beta, weights, theta, 3)
    repeated = backend.closing_sweep(X, beta, np.tile(weights, (300, 1)), theta, 3)
    np.testing.assert_array_equal(shared[0], repeated[0])
    np.testing.assert_array_equal(shared[1], repeated[1])
    with pytest.raises(ValueError, match=r"alpha of shape \(2, 3\) for proportions of shape \(300, 3\)"):
        backend.closing_sweep(X, beta, np.tile(weights, (2, 1)), theta, 3)


def test_closing_sweep_keeps_float32_proportions_in_float32():
    """The warm start kept between sweeps is float32: it goes in and comes out float32 (no float64 copy of the
    chunk's proportions), with each document's steps in float64 -- the float64 sweep's result, rounded once."""
    from specinit.engine.backends import numba as backend

    beta, weights = random_instance(3, 40, seed=3)
    X = sp.csr_matrix(sample_lda(beta, weights, N=300, length=25, seed=4)[0])
    start = np.random.default_rng(8).dirichlet(np.ones(3), size=300).astype(np.float32)
    single = backend.closing_sweep(X, beta, weights, start, 3)
    double = backend.closing_sweep(X, beta, weights, start.astype(np.float64), 3)
    assert single[0].dtype == np.float32 and double[0].dtype == np.float64
    np.testing.assert_array_equal(single[0], double[0].astype(np.float32))
    np.testing.assert_array_equal(single[1], double[1])
    assert single[2] == double[2]


@pytest.mark.parametrize("seed_groups", [(), (np.array([0, 1]), np.array([5]))])
def test_compiled_closing_sweeps_equal_the_numpy_sweeps(seed_groups, monkeypatch):
    """The compiled kernel (batched dot products, reassociated sums) is the same EM as the NumPy blocks, also with
    the seeded sweeps' per-document priors."""
    from specinit.engine.sources import CountSource
    from specinit.models import _topics

    beta, weights = random_instance(4, 60, seed=5)
    X = sp.csr_matrix(sample_lda(beta, weights, N=500, length=30, seed=6)[0])
    start = np.random.default_rng(7).dirichlet(np.ones(60), size=4)
    compiled = _topics.close_topics(CountSource([X[:170], X[170:340], X[340:]]), start, weights, 3, floor=1e-3,
                                    seed_groups=seed_groups)
    monkeypatch.setattr(_topics, "numba_kernel", lambda name: None)
    reference = _topics.close_topics(CountSource([X[:170], X[170:340], X[340:]]), start, weights, 3, floor=1e-3,
                                     seed_groups=seed_groups)
    for ours, theirs in zip(compiled[:2], reference[:2]):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    np.testing.assert_allclose(compiled[2]["closing_log_likelihood"], reference[2]["closing_log_likelihood"],
                               rtol=1e-12)


def test_compiled_power_iterations_equal_the_numpy_loop(monkeypatch):
    """An exact tensor (every restart converges), a noisy one and one that is not orthogonally decomposable (restarts
    given up as hopeless, some after the first stall test): the same iterations, flags and, to round-off, iterates;
    the decomposition of a small tensor takes the compiled loop."""
    from specinit.engine import decompose as module
    from specinit.engine.backends.numba import power_iterate
    from tests.engine.test_decompose import random_odeco, symmetric_noise

    exact, _, _ = random_odeco(10, 1)
    for T in (exact, exact + 0.5 * symmetric_noise(10, 2), symmetric_noise(8, 3)):
        start = np.random.default_rng(0).standard_normal((T.shape[0], 10))
        start /= np.linalg.norm(start, axis=0)
        compiled = power_iterate(T, start, 100, 1e-10, max(module.STALL_WINDOW, 100 // 10), module.STALL_WINDOW)
        with monkeypatch.context() as patch:
            patch.setattr(module, "numba_kernel", lambda name: None)
            reference = module._power_iterate(T, start, 100, 1e-10)
        for mine, theirs in zip(compiled[1:], reference[1:]):
            np.testing.assert_array_equal(mine, theirs)
        # converged iterates agree to round-off; a restart given up while still moving carries the round-off's growth
        done = reference[2]
        np.testing.assert_allclose(compiled[0][:, done], reference[0][:, done], rtol=0, atol=1e-12)
        np.testing.assert_allclose(compiled[0][:, ~done], reference[0][:, ~done], rtol=0, atol=1e-8)
    assert reference[3].any() and reference[1].max() > module.STALL_WINDOW
    called = []
    monkeypatch.setattr(module, "numba_kernel", lambda name: called.append(name) or power_iterate)
    module.decompose(exact, 10, seed=0)
    assert called and set(called) == {"power_iterate"}


def test_compiled_anchor_step_equals_the_numpy_step(monkeypatch):
    """Gradient points far from, near and on the simplex, with ties, and a NaN: the compiled step moves Y and C as
    the NumPy step does and reports the same largest move; the anchor fit that uses it is unchanged."""
    from specinit.engine import anchors
    from specinit.engine.backends.numba import anchor_weights_step

    rng = np.random.default_rng(8)
    Y = np.vstack([rng.normal(scale=scale, size=(200, 7)) for scale in (0.01, 1.0, 30.0)]
                  + [rng.dirichlet(np.ones(7), size=50), np.full((3, 7), 0.5), np.eye(7)])
    product, H, C = rng.normal(size=Y.shape), rng.normal(size=Y.shape), rng.dirichlet(np.ones(7), size=Y.shape[0])
    for lipschitz, momentum in ((1e6, 0.0), (3.0, 0.4), (0.2, 0.9)):
        ours, reference = (Y.copy(), C.copy()), (Y.copy(), C.copy())
        moved = anchor_weights_step(ours[0], product, H, ours[1], lipschitz, momentum)
        expected = anchors.anchor_weights_step(reference[0], product, H, reference[1], lipschitz, momentum)
        assert moved == pytest.approx(expected, abs=1e-14) and moved > 0
        for mine, theirs in zip(ours, reference):
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-13)
        np.testing.assert_allclose(ours[1].sum(axis=1), 1.0, atol=1e-13)
        assert ours[1].min() >= 0.0
    poisoned = product.copy()
    poisoned[300, 2] = np.nan
    assert np.isnan(anchor_weights_step(Y.copy(), poisoned, H, C.copy(), 3.0, 0.4))
    import numba

    threads = numba.get_num_threads()
    split = []  # the rows split over one thread and over every thread: the same iterates, bit for bit
    for n_threads in (1, numba.config.NUMBA_NUM_THREADS):
        numba.set_num_threads(n_threads)
        state = (Y.copy(), C.copy())
        split.append((anchor_weights_step(state[0], product, H, state[1], 3.0, 0.4), *state))
    numba.set_num_threads(threads)
    assert split[0][0] == split[1][0]
    for one, every in zip(split[0][1:], split[1][1:]):
        np.testing.assert_array_equal(one, every)

    beta, weights = random_instance(4, 60, seed=5)
    moments = CountMoments(sp.csr_matrix(sample_lda(beta, weights, N=500, length=30, seed=6)[0]))
    compiled = anchors.fit_anchor(moments, 4, func="t", seed=0)
    monkeypatch.setattr(anchors, "numba_kernel", lambda name: None)
    plain = anchors.fit_anchor(moments, 4, func="t", seed=0)
    np.testing.assert_allclose(compiled[0], plain[0], rtol=0, atol=1e-12)


def test_threaded_csr_product_equals_scipy_and_serves_stored_pair_sums(monkeypatch, small_blocks=7):
    """Rows with no entries, int32 and int64 indices, row blocks smaller than the matrix: the threaded product
    equals SciPy's bit for bit; the online topic models' stored pair sums multiply through it, to the same values
    as SciPy's product."""
    from specinit.engine import moments as module
    from specinit.engine.backends import numba as kernels
    from specinit.engine.backends.numba import csr_matmat
    from specinit.engine.moments import PairSums

    rng = np.random.default_rng(9)
    keep = np.ones(300)
    keep[[3, 50, 299]] = 0.0
    A = (sp.diags(keep) @ sp.random(300, 200, density=0.05, random_state=2, format="csr")).tocsr()
    A.eliminate_zeros()
    assert np.count_nonzero(np.diff(A.indptr) == 0) >= 3
    Q = rng.standard_normal((200, 6))
    wide = sp.csr_matrix(A)
    wide.indices, wide.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
    for work in (kernels.CALL_WORK, small_blocks * Q.shape[1]):
        with monkeypatch.context() as patch:
            patch.setattr(kernels, "CALL_WORK", work)
            for matrix in (A, wide):
                np.testing.assert_array_equal(csr_matmat(matrix, Q), A @ Q)
    beta, weights = random_instance(4, 2000, seed=5)
    sums = PairSums.from_counts(sp.csr_matrix(sample_lda(beta, weights, N=300, length=30, seed=6)[0]))
    assert sp.issparse(sums.pairs)
    Q = rng.standard_normal((2000, 5))
    threaded = sums.m2_matmat(Q)
    monkeypatch.setattr(module, "numba_kernel", lambda name: None)
    np.testing.assert_array_equal(threaded, sums.m2_matmat(Q))


def test_summed_and_multiplied_csr_equal_scipy_bit_for_bit(monkeypatch, small_blocks=5):
    """Empty rows, rows in any column order (SciPy's products), int32 and int64 indices, one or several row blocks,
    one part, a few and more than one pass takes (SUM_ARITY): the threaded sum equals adding the parts one after
    another with SciPy (within a pass; groups of passes are added after), the threaded product SciPy's product, bit
    for bit once both have their rows sorted (same entries, no duplicates)."""
    from specinit.engine.backends import numba as kernels
    from specinit.engine.backends.numba import SUM_ARITY, product_csr, sum_csr

    def rows(density, seed):
        return sp.random(80, 64, density=density, random_state=seed, format="csr")

    unsorted = (rows(0.3, 1).T.tocsr() @ rows(0.3, 9)).tocsr()
    assert not unsorted.has_sorted_indices
    wide = sp.random(64, 64, density=0.6, random_state=2, format="csr")
    wide.indices, wide.indptr = wide.indices.astype(np.int64), wide.indptr.astype(np.int64)
    parts = [sp.random(64, 64, density=0.02, random_state=0, format="csr"), unsorted, sp.csr_matrix((64, 64)), wide]
    many = [sp.random(64, 64, density=0.1, random_state=10 + i, format="csr") for i in range(2 * SUM_ARITY + 1)]

    def added(group):
        total = group[0]
        for part in group[1:]:
            total = total + part
        return total

    cases = [(sum_csr, [unsorted], unsorted), (sum_csr, parts, added(parts)),
             (sum_csr, many, added([added(many[i: i + SUM_ARITY]) for i in range(0, len(many), SUM_ARITY)])),
             (product_csr, (rows(0.1, 3).T.tocsr(), rows(0.2, 4)), rows(0.1, 3).T.tocsr() @ rows(0.2, 4)),
             (product_csr, (unsorted, wide), unsorted @ wide)]
    for work in (kernels.CALL_WORK, small_blocks):
        monkeypatch.setattr(kernels, "CALL_WORK", work)
        for kernel, arguments, expected in cases:
            result = kernel(arguments) if kernel is sum_csr else kernel(*arguments)
            result.sort_indices()
            expected = expected.tocsr(copy=True)  # sorted apart: the inputs keep their order for the next cases
            expected.sort_indices()
            np.testing.assert_array_equal(result.indptr, expected.indptr)
            np.testing.assert_array_equal(result.indices, expected.indices)
            np.testing.assert_array_equal(result.data, expected.data)


def test_compiled_gaussian_em_step_equals_the_numpy_step(monkeypatch):
    """Three covariance kinds, one block of rows and several (with a short last block): the fused compiled step
    (M-step, projection, E-step) gives the NumPy step's parameters, responsibilities and log-likelihood to
    round-off, the same bits on one thread and on every thread; the compiled E-step alone equals the mixture
    E-step; a refine that uses them ends where the NumPy refine ends."""
    import numba

    from specinit.engine.backends.numba import GAUSSIAN_BLOCK
    from specinit.engine.support import project
    from specinit.family import Family
    from specinit.models import gmm
    from specinit.models.gmm import FAMILY, RowData
    from specinit.refine import mixture_e_step

    rng = np.random.default_rng(3)
    loc = rng.normal(scale=3.0, size=(4, 5))
    for n in (GAUSSIAN_BLOCK // 3, 2 * GAUSSIAN_BLOCK + 37):
        x = loc[rng.integers(0, 4, n)] + rng.normal(scale=rng.uniform(0.5, 2.0, 5), size=(n, 5)) + 100.0
        for kind, scale in (("common", np.asarray(1.5)), ("spherical", rng.uniform(1, 2, 4)),
                            ("diag", rng.uniform(1, 2, (4, 5)))):
            params = {"weights": rng.dirichlet(np.ones(4)), "loc": loc + 100.0, "scale": scale}
            data = RowData(x, kind, float(np.mean(np.var(x, axis=0))))
            sites = FAMILY.site_table(params)[0]
            resp, ll = FAMILY.e_step(params, data)
            reference_resp, reference_ll = mixture_e_step(FAMILY, params, data)
            # the reference expands |x - mu|^2 = |x|^2 - 2 x.mu + |mu|^2 with |x|^2 ~ 5e4 (data offset by 100): its
            # rounding, ~5e4 x 1e-16 x 1 / scale^2 <= 4, is ~1e-11 in the log-densities (1.8e-12 measured on an Intel
            # Xeon, under 1e-12 on an AMD EPYC)
            np.testing.assert_allclose(resp, reference_resp, rtol=0, atol=1e-11)
            assert ll == pytest.approx(reference_ll, rel=1e-13)
            expected, _ = project(FAMILY.m_step(data, resp, params, reg=1e-4), sites, 0.05)
            expected_resp, expected_ll = mixture_e_step(FAMILY, expected, data)
            threads, steps = numba.get_num_threads(), []
            for n_threads in (1, numba.config.NUMBA_NUM_THREADS):
                numba.set_num_threads(n_threads)
                steps.append(FAMILY.em_step(data, resp, params, sites, 0.05, reg=1e-4))
            numba.set_num_threads(threads)
            (ours, ours_resp, ours_ll), (every, every_resp, every_ll) = steps
            assert ours_ll == every_ll and np.array_equal(ours_resp, every_resp)
            for name in expected:
                assert ours[name].shape == expected[name].shape, name
                # E[x^2] - loc^2 at an offset of 100: the round-off of both sums grows by (100 / scale)^2
                np.testing.assert_allclose(ours[name], expected[name], rtol=1e-9, atol=0, err_msg=name)
                np.testing.assert_array_equal(ours[name], every[name])
            np.testing.assert_allclose(ours_resp, expected_resp, rtol=0, atol=1e-10)
            assert ours_ll == pytest.approx(expected_ll, rel=1e-12)
    x = np.vstack([rng.normal(size=(60, 3)) + shift for shift in (0.0, 4.0, 8.0)])
    start = gmm.spectral(x, 3, covariance="diag", seed=0)
    compiled = gmm.refine(x, start, seed=0)
    monkeypatch.setattr(gmm, "numba_kernel", lambda name: None)
    monkeypatch.setattr(gmm.GaussianMixture, "em_step", Family.em_step)
    plain = gmm.refine(x, start, seed=0)
    assert compiled.n_iter == plain.n_iter
    np.testing.assert_allclose(compiled.log_likelihood, plain.log_likelihood, rtol=1e-12)


def test_compiled_gaussian_em_step_names_a_non_finite_site():
    """Responsibilities with a NaN (a broken E-step upstream) give non-finite means: the fused step raises the
    projection's error naming the site, as the NumPy step does, instead of handing NaN to the next step."""
    from specinit.models.gmm import FAMILY, RowData

    rng = np.random.default_rng(4)
    x = rng.normal(size=(40, 2))
    params = {"weights": np.full(2, 0.5), "loc": rng.normal(size=(2, 2)), "scale": np.ones(2)}
    resp = rng.dirichlet(np.ones(2), size=40)
    resp[5, 1] = np.nan
    with pytest.raises(FloatingPointError, match="'weights' has non-finite entries"):
        FAMILY.em_step(RowData(x, "spherical", 1.0), resp, params, FAMILY.site_table(params)[0], 1e-3)


def test_compiled_factor_iterations_equal_the_numpy_loop():
    """Principal-axis factoring of a rank-2 + diagonal covariance and of a sample covariance: the compiled loop takes
    the NumPy loop's iterations and gives its noise to round-off, recovering the exact noise."""
    from specinit.engine.backends.numba import factor_noise_iterations as compiled
    from specinit.engine.rows import factor_noise_iterations

    rng = np.random.default_rng(5)
    loadings, noise = rng.normal(size=(9, 2)), rng.uniform(0.2, 1.0, 9)
    exact = loadings @ loadings.T + np.diag(noise)
    sample = np.cov(rng.multivariate_normal(np.zeros(9), exact, size=300).T, bias=True)
    for cov in (exact, sample):
        start = np.minimum(np.full(9, np.trace(cov) / 9), np.diag(cov))
        ours, reference = compiled(cov, start, 3, 500, 1e-10), factor_noise_iterations(cov, start, 3, 500, 1e-10)
        assert ours[1:] == reference[1:] and reference[2]
        np.testing.assert_allclose(ours[0], reference[0], rtol=1e-9)
    np.testing.assert_allclose(compiled(exact, np.diag(exact).copy(), 3, 500, 1e-12)[0], noise, rtol=1e-6)


_INTERRUPTED = textwrap.dedent("""
    import faulthandler, signal
    import numpy as np, scipy.sparse as sp
    from specinit.engine.backends.numba import closing_sweep
    from specinit.engine.sources import CountSource
    from specinit.models._topics import close_topics

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal, whatever the parent ignores
    rng = np.random.default_rng(0)
    n, V, k, per = 20000, 2000, 50, 80
    X = sp.csr_matrix((rng.integers(1, 3, n * per).astype(float), rng.integers(0, V, n * per),
                       np.arange(n + 1) * per), shape=(n, V))
    beta, alpha = rng.dirichlet(np.ones(V), size=k), np.full(k, 0.1)
    small = X[:50]
    reference = closing_sweep(small, beta, alpha, np.full((50, k), 1 / k), 3)
    close_topics(CountSource(small), beta, alpha, 1, floor=1e-3)  # compiled for the source's chunks before the clock
    print("ready", flush=True)
    faulthandler.dump_traceback_later(45, exit=True)  # a hang ends with every thread's traceback on stderr
    try:
        close_topics(CountSource(X), beta, alpha, 100_000, floor=1e-3)  # hours of closing sweeps
    except KeyboardInterrupt:
        again = closing_sweep(small, beta, alpha, np.full((50, k), 1 / k), 3)
        same = all(np.array_equal(a, b) for a, b in zip(reference, again))
        print("kernels after the interrupt:", "same" if same else "different", flush=True)
        raise
""")


def test_ctrl_c_during_a_compiled_sweep_is_a_clean_keyboard_interrupt(tmp_path):
    """SIGINT one second into the closing sweeps of a large corpus: the process ends by KeyboardInterrupt (no
    SystemError from inside Numba) long before the sweeps would end (hours; 30 s leaves room for a loaded machine),
    and the kernels still give the same results."""
    child = subprocess.Popen([sys.executable, "-c", _INTERRUPTED], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=tmp_path)  # the installed package, not an unpacked sdist's source folder
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        time.sleep(1.0)
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        waited = time.perf_counter() - sent
    finally:
        child.kill()
        child.communicate()  # closes the pipes also when the child had to be killed
    assert "kernels after the interrupt: same" in out, err
    assert err.rstrip().endswith("KeyboardInterrupt") and "SystemError" not in err, err
    assert child.returncode in (-signal.SIGINT, 1, 130)
    assert waited < 30.0, waited
