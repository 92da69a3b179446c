"""Tests of specinit.engine.moments.CountMoments against slow, obvious dense oracles.

The oracle builds the V x V and V x V x V arrays of DESIGN.md "Formulas"
document by document with explicit loops (tiny V only). Comparisons of the
matrix-free products with the oracle use a relative tolerance of 1e-10: both
sides are exact float64 evaluations of the same finite sums (a few hundred
terms of O(1) magnitude), so they differ by round-off ~1e-14; 1e-10 leaves
margin without hiding any wrong coefficient (those give O(1) relative errors).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from specinit.models import lda, single_topic

from specinit._validation import check_count_matrix
from specinit.engine.backends.numpy import first_order_stats, whitened_stats
from specinit.engine.moments import CountMoments, FirstOrderStats, WhitenedStats

RTOL = 1e-10


# ----------------------------------------------------------------------------- oracle
def dense_moments(counts, alpha0=None, weighting="pooled"):
    """Dense (M1, M2, M3) of DESIGN.md by explicit per-document loops."""
    C = np.asarray(counts, dtype=np.float64)
    V = C.shape[1]
    I = np.eye(V)
    docs = [c for c in C if c.sum() >= 3]
    m1 = np.zeros(V)
    e2 = np.zeros((V, V))
    e3 = np.zeros((V, V, V))
    n1 = n2 = n3 = 0.0
    for c in docs:
        n = c.sum()
        d2 = np.outer(c, c) - np.diag(c)
        d3 = np.einsum("a,b,c->abc", c, c, c)
        for i in range(V):
            d3 -= c[i] * (
                np.einsum("a,b,c->abc", I[i], I[i], c)
                + np.einsum("a,b,c->abc", I[i], c, I[i])
                + np.einsum("a,b,c->abc", c, I[i], I[i])
            )
            d3[i, i, i] += 2 * c[i]
        if weighting == "pooled":
            m1 += c
            e2 += d2
            e3 += d3
            n1 += n
            n2 += n * (n - 1)
            n3 += n * (n - 1) * (n - 2)
        else:
            m1 += c / n
            e2 += d2 / (n * (n - 1))
            e3 += d3 / (n * (n - 1) * (n - 2))
            n1 += 1
            n2 += 1
            n3 += 1
    m1, e2, e3 = m1 / n1, e2 / n2, e3 / n3
    if alpha0 is None:
        return m1, e2, e3
    a0 = alpha0
    m2 = e2 - a0 / (a0 + 1) * np.outer(m1, m1)
    cross = (
        np.einsum("ab,c->abc", e2, m1) + np.einsum("ac,b->abc", e2, m1) + np.einsum("bc,a->abc", e2, m1)
    )
    m3 = e3 - a0 / (a0 + 2) * cross + 2 * a0**2 / ((a0 + 2) * (a0 + 1)) * np.einsum("a,b,c->abc", m1, m1, m1)
    return m1, m2, m3


def random_counts(n_docs=40, V=6, seed=0, max_len=9, include_short=True):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0 if include_short else 3, max_len + 1, size=n_docs)
    probs = rng.dirichlet(np.ones(V), size=n_docs)
    return np.stack([rng.multinomial(n, p) for n, p in zip(lengths, probs)]).astype(np.int64)


def assert_rel(a, b, rtol=RTOL):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    scale = max(np.max(np.abs(b)), 1e-300)
    assert np.max(np.abs(a - b)) <= rtol * scale, np.max(np.abs(a - b)) / scale


CASES = [(None, "pooled"), (None, "per-document"), (0.7, "pooled"), (3.0, "per-document")]


# ----------------------------------------------------------------------------- implicit == dense
@pytest.mark.parametrize("alpha0,weighting", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_implicit_equals_dense(alpha0, weighting, seed):
    X = random_counts(seed=seed)
    m1, m2, m3 = dense_moments(X, alpha0, weighting)
    mom = CountMoments(sp.csr_matrix(X), alpha0=alpha0, weighting=weighting)
    rng = np.random.default_rng(100 + seed)
    Q = rng.standard_normal((X.shape[1], 4))
    W = rng.standard_normal((X.shape[1], 3))
    assert_rel(mom.m1, m1)
    assert_rel(mom.m2_matmat(Q), m2 @ Q)
    assert_rel(mom.m2_matmat(np.eye(X.shape[1])), m2)
    assert_rel(mom.whitened_m3(W), np.einsum("abc,ai,bj,cl->ijl", m3, W, W, W))
    # full-rank W = I gives M3 itself
    assert_rel(mom.whitened_m3(np.eye(X.shape[1])), m3)


def test_oracle_is_symmetric_and_pooled_differs_from_per_document():
    """Guard against a vacuous oracle: M3 symmetric, and the two weightings differ when lengths differ."""
    X = random_counts(seed=4)
    _, m2p, m3p = dense_moments(X)
    _, m2d, _ = dense_moments(X, weighting="per-document")
    for p in itertools.permutations(range(3)):
        np.testing.assert_allclose(m3p.transpose(p), m3p, atol=1e-15)
    np.testing.assert_allclose(m2p, m2p.T)
    assert np.max(np.abs(m2p - m2d)) > 1e-3


# ----------------------------------------------------------------------------- chunks and streams
@pytest.mark.parametrize("alpha0,weighting", CASES)
def test_chunked_equals_whole(alpha0, weighting):
    X = random_counts(n_docs=57, seed=5)
    Xs = sp.csr_matrix(X)
    rng = np.random.default_rng(6)
    Q = rng.standard_normal((X.shape[1], 3))
    W = rng.standard_normal((X.shape[1], 3))
    whole = CountMoments(Xs, alpha0=alpha0, weighting=weighting)
    chunks = [Xs[0:10], X[10:11], sp.coo_matrix(X[11:40]), Xs[40:57]]
    variants = [
        CountMoments(chunks, alpha0=alpha0, weighting=weighting),
        CountMoments(tuple(chunks), alpha0=alpha0, weighting=weighting),
        CountMoments(lambda: iter(chunks), alpha0=alpha0, weighting=weighting),
        CountMoments(lambda: (Xs[i : i + 7] for i in range(0, 57, 7)), alpha0=alpha0, weighting=weighting),
        CountMoments(Xs, alpha0=alpha0, weighting=weighting, chunk_rows=5),
        CountMoments(X, alpha0=alpha0, weighting=weighting, chunk_rows=1),
    ]
    for mom in variants:
        assert mom.n_documents == whole.n_documents and mom.n_dropped == whole.n_dropped
        assert_rel(mom.m1, whole.m1)
        assert_rel(mom.m2_matmat(Q), whole.m2_matmat(Q))
        assert_rel(mom.whitened_m3(W), whole.whitened_m3(W))


@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
def test_stats_merge_by_addition(weighting):
    X = check_count_matrix(random_counts(n_docs=30, seed=7), "counts", "test")
    a, b = X[:13], X[13:]
    W = np.random.default_rng(0).standard_normal((X.shape[1], 3))
    whole = first_order_stats(X, weighting)
    merged = first_order_stats(a, weighting) + first_order_stats(b, weighting)
    assert isinstance(merged, FirstOrderStats)
    for name in ("n_documents", "n_dropped"):
        assert getattr(merged, name) == getattr(whole, name)
    for name in ("m1_sum", "m1_norm", "word_a", "norm2", "word_b", "norm3"):
        assert_rel(getattr(merged, name), getattr(whole, name))
    wm = whitened_stats(a, W, weighting) + whitened_stats(b, W, weighting)
    ww = whitened_stats(X, W, weighting)
    assert isinstance(wm, WhitenedStats)
    for name in ("y3", "y2", "word_by"):
        assert_rel(getattr(wm, name), getattr(ww, name))
    # merging with an unrelated type is refused
    with pytest.raises(TypeError):
        whole + wm


def test_whitened_m3_accepts_precomputed_stats():
    X = random_counts(seed=8)
    mom = CountMoments(X, alpha0=1.0)
    W = np.random.default_rng(1).standard_normal((X.shape[1], 2))
    stats = mom.whitened_stats(W)
    np.testing.assert_array_equal(mom.whitened_m3(W, stats), mom.whitened_m3(W))


# ----------------------------------------------------------------------------- short documents
@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
def test_short_documents_dropped_and_counted(weighting):
    X = random_counts(n_docs=20, seed=9, include_short=False)
    short = np.zeros((4, X.shape[1]), dtype=np.int64)
    short[1, 0] = 1
    short[2, 3] = 2
    short[3, [1, 2]] = 1  # lengths 0, 1, 2, 2
    Xall = np.concatenate([short[:2], X[:10], short[2:], X[10:]])
    full, clean = CountMoments(Xall, weighting=weighting), CountMoments(X, weighting=weighting)
    assert full.n_dropped == 4 and full.n_documents == 20 and clean.n_dropped == 0
    Q = np.random.default_rng(2).standard_normal((X.shape[1], 2))
    assert_rel(full.m1, clean.m1)
    assert_rel(full.m2_matmat(Q), clean.m2_matmat(Q))
    assert_rel(full.whitened_m3(Q), clean.whitened_m3(Q))


def test_all_documents_too_short():
    with pytest.raises(ValueError, match=r"at least one document with 3 or more tokens.*3 documents"):
        CountMoments(np.array([[1, 1, 0], [0, 0, 2], [0, 0, 0]]))


# ----------------------------------------------------------------------------- input formats
@pytest.mark.parametrize("alpha0", [None, 1.5])
def test_sparse_formats_and_dense_identical(alpha0):
    X = random_counts(seed=10)
    Q = np.random.default_rng(3).standard_normal((X.shape[1], 3))
    ref = CountMoments(X, alpha0=alpha0)
    for form in (sp.csr_matrix(X), sp.csc_matrix(X), sp.coo_matrix(X), sp.csr_array(X), X.astype(np.float32),
                 X.astype(np.uint16), X.tolist()):
        mom = CountMoments(form, alpha0=alpha0)
        np.testing.assert_array_equal(mom.m1, ref.m1)
        np.testing.assert_allclose(mom.m2_matmat(Q), ref.m2_matmat(Q), rtol=0, atol=1e-14)
        np.testing.assert_allclose(mom.whitened_m3(Q), ref.whitened_m3(Q), rtol=0, atol=1e-13)


def test_coo_duplicates_are_summed():
    X = random_counts(seed=11, include_short=False)
    coo = sp.coo_matrix(X)
    # split every entry into two duplicates that sum to the original count
    half = np.floor(coo.data / 2)
    dup = sp.coo_matrix(
        (np.concatenate([half, coo.data - half]), (np.tile(coo.row, 2), np.tile(coo.col, 2))), shape=X.shape
    )
    Q = np.eye(X.shape[1])
    assert_rel(CountMoments(dup).m2_matmat(Q), CountMoments(X).m2_matmat(Q))


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "counts,match",
    [
        (np.array([[1, -1, 3]]), "non-negative"),
        (np.array([[1.5, 1, 3]]), "integer-valued"),
        (np.array([[np.nan, 1, 3]]), "finite"),
        (np.array([[np.inf, 1, 3]]), "finite"),
        (sp.csr_matrix(np.array([[1.0, -2, 3]])), "non-negative"),
        (sp.csr_matrix(np.array([[np.nan, 1, 3]])), "finite"),
        (np.zeros((0, 4)), "non-empty"),
        (np.zeros((3, 0)), "non-empty"),
        (np.array([1, 2, 3]), "two-dimensional"),
        (np.ones((2, 2, 2)), "two-dimensional"),
        ([], "'counts'"),
    ],
)
def test_bad_counts_value_error(counts, match):
    with pytest.raises(ValueError, match=match) as info:
        CountMoments(counts)
    assert "'counts" in str(info.value)


@pytest.mark.parametrize("counts", ["abc", b"abc", None, np.array([["a", "b", "c"]]), np.array([[1, None, 2]], dtype=object)])
def test_bad_counts_type_error(counts):
    with pytest.raises(TypeError, match=r"'counts' argument"):
        CountMoments(counts)


def test_one_shot_generator_rejected():
    X = sp.csr_matrix(random_counts(seed=12))
    with pytest.raises(TypeError, match="one-shot iterator"):
        CountMoments(X[i : i + 5] for i in range(0, X.shape[0], 5))
    with pytest.raises(TypeError, match="one-shot iterator"):
        CountMoments(iter([X]))


def test_chunks_with_different_widths():
    with pytest.raises(ValueError, match=r"same number of columns.*\[3, 4\]"):
        CountMoments([np.ones((2, 3), dtype=int) * 2, np.ones((2, 4), dtype=int) * 2])


def test_bad_chunk_inside_list_names_chunk():
    with pytest.raises(ValueError, match=r"'counts \(chunk 1\)'.*non-negative"):
        CountMoments([np.full((2, 3), 2), np.full((2, 3), -1)])


@pytest.mark.parametrize("alpha0", [0.0, -1.0, np.nan, np.inf])
def test_bad_alpha0(alpha0):
    with pytest.raises(ValueError, match=r"'alpha0' argument"):
        CountMoments(random_counts(seed=0), alpha0=alpha0)


def test_alpha0_wrong_type():
    with pytest.raises(TypeError, match=r"'alpha0' argument"):
        CountMoments(random_counts(seed=0), alpha0="1")


def test_bad_weighting():
    with pytest.raises(ValueError, match=r"'weighting'.*'pooled', 'per-document'"):
        CountMoments(random_counts(seed=0), weighting="average")


# ----------------------------------------------------------------------------- population moments
def _enumerate_corpus(beta, topic_seq_prob, n_tokens=3):
    """A 'perfect sample': every possible count vector of an n-token document,
    repeated in exact proportion to its probability (probabilities are exact
    Fractions, so the repetitions are integers after scaling by the LCD).

    beta: (k, V) Fractions; topic_seq_prob(z) -> Fraction, probability of the
    per-token topic sequence z (length n_tokens).
    """
    k, V = len(beta), len(beta[0])
    probs: dict[tuple, Fraction] = {}
    for z in itertools.product(range(k), repeat=n_tokens):
        pz = topic_seq_prob(z)
        for w in itertools.product(range(V), repeat=n_tokens):
            p = pz
            for zt, wt in zip(z, w):
                p *= beta[zt][wt]
            c = tuple(np.bincount(w, minlength=V))
            probs[c] = probs.get(c, Fraction(0)) + p
    assert sum(probs.values()) == 1
    lcd = 1
    for p in probs.values():
        lcd = lcd * p.denominator // np.gcd(lcd, p.denominator)
    rows = []
    for c, p in probs.items():
        rows += [c] * int(p * lcd)
    return np.array(rows, dtype=np.int64)


BETA_Q = [[Fraction(1, 2), Fraction(1, 4), Fraction(1, 4)], [Fraction(0), Fraction(1, 4), Fraction(3, 4)]]


def test_single_topic_population_equals_estimator_expectation():
    """Unbiasedness, verified exactly by enumeration (no Monte Carlo tolerance).

    All documents have 3 tokens, so the pooled estimator of a corpus is the
    average of per-document estimators; on a corpus that contains each count
    vector in exact proportion to its probability that average IS the
    expectation. So CountMoments of this corpus must equal the population
    moments to round-off (1e-12 relative: sums of ~10^3 terms of O(1)).
    """
    weights = [Fraction(1, 3), Fraction(2, 3)]
    X = _enumerate_corpus(BETA_Q, lambda z: weights[z[0]] if len(set(z)) == 1 else Fraction(0))
    beta = np.array(BETA_Q, dtype=float)
    pop = single_topic.population_moments(beta, np.array(weights, dtype=float))
    m2, m3 = pop.dense()
    for weighting in ("pooled", "per-document"):
        emp = CountMoments(X, weighting=weighting)
        assert_rel(emp.m2_matmat(np.eye(3)), m2, 1e-12)
        assert_rel(emp.whitened_m3(np.eye(3)), m3, 1e-12)
        assert_rel(emp.m1, np.array(weights, dtype=float) @ beta, 1e-12)
    # and the population operators agree with their own dense form
    Q = np.random.default_rng(0).standard_normal((3, 2))
    assert_rel(pop.m2_matmat(Q), m2 @ Q)
    assert_rel(pop.whitened_m3(Q), np.einsum("abc,ai,bj,cl->ijl", m3, Q, Q, Q))


def test_lda_population_equals_estimator_expectation():
    """Same exact check for LDA with the Dirichlet correction (Lemma 3).

    Per-token topics of an LDA document follow the Polya urn of Dirichlet(alpha):
    P(z_1..z_n) = prod_i alpha_i^(rising m_i) / alpha0^(rising n), rational for
    rational alpha. E2, M1 and E3 of the perfect corpus are then exact, and so
    are the corrected M2 and M3.
    """
    alpha = [Fraction(1, 2), Fraction(3, 2)]
    a0 = sum(alpha)

    def rising(x, m):
        out = Fraction(1)
        for j in range(m):
            out *= x + j
        return out

    def polya(z):
        num = Fraction(1)
        for i, a in enumerate(alpha):
            num *= rising(a, z.count(i))
        return num / rising(a0, len(z))

    X = _enumerate_corpus(BETA_Q, polya)
    beta = np.array(BETA_Q, dtype=float)
    pop = lda.population_moments(beta, np.array(alpha, dtype=float))
    m2, m3 = pop.dense()
    emp = CountMoments(X, alpha0=float(a0))
    assert_rel(emp.m2_matmat(np.eye(3)), m2, 1e-12)
    assert_rel(emp.whitened_m3(np.eye(3)), m3, 1e-12)
    # the uncorrected moments are NOT the LDA population moments (the correction matters)
    raw = CountMoments(X)
    assert np.max(np.abs(raw.m2_matmat(np.eye(3)) - m2)) > 1e-2


@pytest.mark.parametrize("alpha0", [None, 2.0])
def test_bounded_blocks_equal_single_block(monkeypatch, alpha0):
    """Force many tiny row blocks in the dense intermediates (documents and words): same result."""
    import specinit.engine.backends.numpy as moments_module

    X = random_counts(n_docs=50, seed=13)
    W = np.random.default_rng(4).standard_normal((X.shape[1], 3))
    _, _, m3 = dense_moments(X, alpha0)
    ref = CountMoments(X, alpha0=alpha0).whitened_m3(W)
    monkeypatch.setattr(moments_module, "_CHUNK_BYTES", 8 * 9 * 2)  # a couple of rows per block
    small = CountMoments(X, alpha0=alpha0).whitened_m3(W)
    assert_rel(small, ref)
    assert_rel(small, np.einsum("abc,ai,bj,cl->ijl", m3, W, W, W))


def test_count_validation_never_modifies_the_callers_matrix_and_copies_only_when_needed(monkeypatch):
    import specinit._validation as validation

    monkeypatch.setattr(validation, "_VALUE_BLOCK", 7)  # many blocks of values
    X = sp.csr_matrix(random_counts(n_docs=40, seed=3), dtype=np.float64)
    canonical = check_count_matrix(X, "counts")
    assert np.shares_memory(canonical.data, X.data)  # a canonical float64 CSR is used as it is, not copied
    # unsorted indices, a duplicate, an explicit zero, integer dtype: the result is canonical, the input untouched
    messy = sp.csr_matrix((np.array([2, 1, 0, 3, 1]), np.array([4, 1, 2, 0, 0]), np.array([0, 3, 5])), shape=(2, 6))
    before = (messy.data.copy(), messy.indices.copy(), messy.indptr.copy())
    out = check_count_matrix(messy, "counts")
    for array, saved in zip((messy.data, messy.indices, messy.indptr), before):
        np.testing.assert_array_equal(array, saved)
    assert out.has_canonical_format and out.dtype == np.float64 and out.nnz == 3
    np.testing.assert_array_equal(out.toarray(), [[0, 1, 0, 0, 2, 0], [4, 0, 0, 0, 0, 0]])
    bad = X.copy()
    bad.data[-1] = 2.5  # found in the last block
    with pytest.raises(ValueError, match="integer-valued counts; got the value 2.5"):
        check_count_matrix(bad, "counts")
