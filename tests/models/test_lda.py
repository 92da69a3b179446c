"""LDA with alpha0 chosen from the data: the reused passes, the criterion, the diagnostics, bad input."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from specinit.models import _topics, lda

from specinit.engine.anchors import fit_anchor
from specinit.engine.moments import CountMoments
from specinit.engine.whitening import IndefiniteMomentError
from tests.conftest import SHORT_TOPICS, best_permutation, random_instance, sample_lda, short_documents

K, V = 3, 30


@pytest.fixture(scope="module")
def planted():
    beta, _ = random_instance(K, V, 3, conc=0.2)
    alpha = np.array([0.4, 0.3, 0.2])
    X, _ = sample_lda(beta, alpha, 4000, 50, 7)
    return beta, alpha, sp.csr_matrix(X)


@pytest.fixture(scope="module")
def default_fit(planted):
    _, _, X = planted
    return lda.spectral(X, K, method="tpm", seed=0)


class ExactRaw:
    """Exact uncorrected moments E2, E3 of an LDA model, with the CountMoments interface."""

    def __init__(self, beta, alpha):
        a0 = alpha.sum()
        s2 = (np.diag(alpha) + np.outer(alpha, alpha)) / (a0 * (a0 + 1))
        s3 = np.einsum("i,j,l->ijl", alpha, alpha, alpha)
        eye = np.eye(len(alpha))
        s3 += np.einsum("ij,i,l->ijl", eye, alpha, alpha) + np.einsum("il,i,j->ijl", eye, alpha, alpha)
        s3 += np.einsum("jl,j,i->ijl", eye, alpha, alpha) + 2 * np.einsum("ijl,i->ijl", eye[:, :, None] * eye[None], alpha)
        s3 /= a0 * (a0 + 1) * (a0 + 2)
        self.e2 = beta.T @ s2 @ beta
        self.e3 = np.einsum("ijl,ia,jb,lc->abc", s3, beta, beta, beta)
        self.m1 = beta.T @ alpha / a0
        self.n_features, self.n_documents, self.n_dropped = beta.shape[1], 10**6, 0

    def m2_matmat(self, Q):
        return self.e2 @ Q

    def whitened_m3(self, W):
        return np.einsum("abc,ai,bj,cl->ijl", self.e3, W, W, W)


@pytest.mark.parametrize("n_iter", [1, 8])
def test_grid_whitening_equals_the_direct_corrected_moments(planted, n_iter):
    """The alpha0 grid reuses one set of passes: M3(a0)(W, W, W) from E2(Q,Q), E3(Q,Q,Q), Q^T m1 equals the
    direct corrected moment of CountMoments(alpha0=a0) at the same W (float64 round-off only: 1e-9 relative).
    With 9 passes the Krylov space is restarted on its top Ritz vectors, which may drop m1's direction: it is
    put back (with its own pass if needed), so the identity still holds."""
    _, _, X = planted
    sub = _topics.raw_subspace(CountMoments(X), K, n_iter=n_iter, seed=0)
    assert sub.passes >= n_iter + 1
    np.testing.assert_allclose(sub.Q @ sub.q, CountMoments(X).m1, atol=1e-12)  # m1 lies in span(Q)
    for a0 in (0.05, 0.9, 4.0):
        _, A, s, T = _topics._lda_whitened(sub, a0, K)
        W = sub.Q @ A
        direct = CountMoments(X, alpha0=a0)
        np.testing.assert_allclose(W.T @ direct.m2_matmat(W), np.eye(K), atol=1e-8)
        ref = direct.whitened_m3(W)
        np.testing.assert_allclose(T, ref, atol=1e-9 * np.abs(ref).max())


def test_moment_fit_is_zero_at_the_truth_and_the_grid_recovers_exact_parameters():
    beta, _ = random_instance(K, 8, 0)
    alpha = np.array([0.5, 0.3, 0.2])
    raw = ExactRaw(beta, alpha)
    sub = _topics.raw_subspace(raw, K, seed=0)
    assert max(_topics.lda_moment_fit(sub, beta, alpha)) < 1e-12  # exact moments, exact parameters
    assert min(_topics.lda_moment_fit(sub, beta, alpha * 3)) > 1e-2  # a wrong concentration misfits
    # a grid holding the true alpha0: the fit there is exact
    pairs = (np.array([0, 1]), np.array([1, 0]), np.array([1.0, 1.0]))
    b, a, report = _topics.fit_lda_grid(raw, K, [1.0], pairs, func="t", method="tpm", seed=0, floor=1e-12,
                                        decompose_options=None, alpha_sum=1.0)
    perm = best_permutation(beta, b)
    np.testing.assert_allclose(b[perm], beta, atol=1e-6)
    np.testing.assert_allclose(report["alpha_sum_tensor"], 1.0, rtol=1e-6)  # self-consistent at the truth
    np.testing.assert_allclose(a[perm], alpha, rtol=1e-6)


def test_pair_log_likelihood_by_hand():
    beta = np.array([[0.5, 0.5], [0.9, 0.1]])
    alpha = np.array([1.0, 1.0])
    # E[theta theta^T] for Dirichlet(1, 1): diag 1/3, off-diagonal 1/6
    sigma = np.array([[1 / 3, 1 / 6], [1 / 6, 1 / 3]])
    pairs = (np.array([0, 0, 1]), np.array([1, 0, 1]), np.array([2.0, 1.0, 1.0]))
    p = [beta[:, w] @ sigma @ beta[:, v] for w, v in zip(*pairs[:2])]
    expected = (2 * np.log(p[0]) + np.log(p[1]) + np.log(p[2])) / 4
    assert _topics.pair_log_likelihood(pairs, beta, alpha) == pytest.approx(expected, rel=1e-12)


def test_word_pairs_counts_ordered_token_pairs():
    X = sp.csr_matrix(np.array([[2, 1, 0], [0, 0, 0], [0, 1, 1]]))
    first, second, weight = _topics.word_pairs(X, seed=0)
    table = {(int(a), int(b)): 0.0 for a, b in zip(first, second)}
    for a, b, w in zip(first, second, weight):
        table[int(a), int(b)] += w
    # doc 0: (0,0): 2*1 = 2, (0,1) and (1,0): 2 each; doc 2: (1,2), (2,1): 1 each
    assert table == {(0, 0): 2.0, (0, 1): 2.0, (1, 0): 2.0, (1, 2): 1.0, (2, 1): 1.0}


def test_default_spectral_chooses_alpha0_and_recovers_topics(planted, default_fit):
    beta, alpha, _ = planted
    est, d = default_fit, default_fit.diagnostics
    assert d["alpha0_selected"] and d["alpha0"] in d["alpha0_grid"]
    assert len(d["alpha0_grid"]) == len(d["alpha0_criterion"]) == len(d["alpha0_feasible"]) == len(d["alpha0_tied"])
    # the rule: candidates within PAIR_TIE of the best pair likelihood are tied; among them the best moment fit
    crit, tied, misfit = d["alpha0_criterion"], d["alpha0_tied"], d["alpha0_moment_misfit"]
    np.testing.assert_array_equal(tied, np.nanmax(crit) - np.nan_to_num(crit, nan=-np.inf) <= _topics.PAIR_TIE)
    chosen = list(d["alpha0_grid"]).index(d["alpha0"])
    assert misfit[chosen] == np.min(misfit[tied])
    # data drawn from LDA: the pair likelihood is flat (all candidates reproduce E2), the third order decides,
    # and the choice is the grid value nearest the true alpha0 = 0.9
    assert tied.sum() >= 3 and d["alpha0"] == pytest.approx(0.72, abs=0.01)
    perm = best_permutation(beta, est.params["beta"])
    # 4,000 documents of 50 tokens: per-topic L1 error ~0.04 at the true alpha0, ~0.1 at the grid value 0.72
    assert np.abs(est.params["beta"][perm] - beta).sum(axis=1).max() < 0.2
    assert est.params["alpha"].sum() == pytest.approx(1.0)  # alpha_sum default
    # the tensor's relative weights order the topics as the truth does (0.4 > 0.3 > 0.2)
    assert np.argmax(est.params["alpha"][perm]) == 0
    assert d["k_supported"] >= K and d["m2_eigenvalues"][:K].min() > 0
    assert np.all(np.isfinite(d["m2_eigengaps"]))


def test_alpha_sum_and_grid_arguments(planted):
    _, _, X = planted
    est = lda.spectral(X, K, method="tpm", seed=0, alpha_sum=2.5, alpha0_grid=[0.5, 1.0])
    assert est.params["alpha"].sum() == pytest.approx(2.5)
    np.testing.assert_array_equal(est.diagnostics["alpha0_grid"], [0.5, 1.0])
    with pytest.raises(ValueError, match="alpha_sum"):
        lda.spectral(X, K, alpha_sum=0.0)
    with pytest.raises(ValueError, match="alpha0_grid"):
        lda.spectral(X, K, method="tpm", alpha0_grid=[-1.0])


def test_same_seed_same_estimate(planted, default_fit):
    _, _, X = planted
    again = lda.spectral(X, K, method="tpm", seed=0)
    np.testing.assert_array_equal(again.params["beta"], default_fit.params["beta"])


def test_given_alpha0_keeps_the_classical_path(planted):
    _, alpha, X = planted
    est = lda.spectral(X, K, alpha0=alpha.sum(), seed=0)
    assert est.diagnostics["alpha0"] == alpha.sum() and "alpha0_grid" not in est.diagnostics


def test_doc_topics_auto_only_for_small_corpora(planted, default_fit):
    _, _, X = planted
    assert default_fit.params["theta"].shape == (X.shape[0], K) and default_fit.diagnostics["doc_topics"]
    big = sp.vstack([X, X[:1001]]).tocsr()  # 5,001 documents
    est = lda.spectral(big, K, method="tpm", seed=0, alpha0_grid=[1.0])
    assert "theta" not in est.params and not est.diagnostics["doc_topics"]
    forced = lda.spectral(X[:50], K, method="tpm", seed=0, alpha0_grid=[1.0], doc_topics=False)
    assert "theta" not in forced.params


# ----------------------------------------------------------------------------- bad input
def test_short_and_empty_documents_are_dropped_and_counted(planted):
    _, _, X = planted
    short = sp.csr_matrix(np.array([[0] * V, [1] + [0] * (V - 1), [1, 1] + [0] * (V - 2)]))
    est = lda.spectral(sp.vstack([X, short]).tocsr(), K, seed=0, doc_topics=False)
    assert est.diagnostics["n_dropped"] == 3 and est.diagnostics["n_documents"] == X.shape[0]


def test_duplicate_rows_are_fine(planted):
    _, _, X = planted
    doubled = sp.vstack([X[:1500], X[:1500]]).tocsr()
    est = lda.spectral(doubled, K, seed=0, doc_topics=False)
    assert np.all(np.isfinite(est.params["beta"])) and est.diagnostics["n_documents"] == 3000


def test_vocabulary_of_one_word():
    X = np.full((10, 1), 5)
    with pytest.raises(ValueError, match=r"'k' argument of lda.spectral must be smaller than the vocabulary size V=1"):
        lda.spectral(X, 1)


def test_non_integer_float_counts():
    with pytest.raises(ValueError, match="integer-valued counts"):
        lda.spectral(np.array([[1.5, 2.0, 3.0], [1.0, 1.0, 1.0]]), 1)
    # integer-valued floats are counts
    est = lda.spectral(np.array([[3.0, 2.0, 0.0, 1.0], [1.0, 4.0, 2.0, 0.0], [0.0, 1.0, 3.0, 2.0]]), 1,
                       method="tpm", alpha0_grid=[1.0])
    assert est.params["beta"].shape == (1, 4)


def test_more_topics_than_documents():
    X = np.array([[3, 2, 0, 1, 0], [1, 4, 2, 0, 1]])
    with pytest.raises(ValueError, match=r"at most the number of usable documents \(2"):
        lda.spectral(X, 3)


def test_k_beyond_what_the_data_support_says_what_to_try():
    """Documents drawn from ONE topic over 5 words: E2 has rank 1 plus noise of both signs, with only 2
    positive eigenvalues for this seed, so k = 4 is not supported (the top-k positive eigenspace does not exist)."""
    rng = np.random.default_rng(0)
    X = rng.multinomial(4, rng.dirichlet(np.ones(5)), size=400)
    for method in ("anchor", "tpm"):
        with pytest.raises(IndefiniteMomentError, match=r"only 2 positive eigenvalue.*Try k <= 2"):
            lda.spectral(X, 4, method=method)


def test_very_short_documents_fit_and_error_shrinks_with_n():
    """Documents of 3-4 tokens (one topic each, the alpha0 -> 0 end of LDA): with 2,000 of them a negative noise
    eigenvalue of E2 is among its top 6 by magnitude, where the alpha0 grid used to find every M2(alpha0)
    indefinite and refuse; the top-6 positive eigenspace fits (the skipped eigenvalue reported), and the
    topic error shrinks with N: 50x the documents, expected ratio ~7, required 2; absolute bound 0.3 at
    N = 100,000 (measured ~0.07)."""
    beta, weights = SHORT_TOPICS
    errors = []
    for N, seed in ((2_000, 2), (100_000, 10)):
        est = lda.spectral(short_documents(beta, weights, N, seed), 6, method="tpm", seed=0, doc_topics=False,
                           em_sweeps=0)
        perm = best_permutation(beta, est.params["beta"])
        errors.append(np.abs(est.params["beta"][perm] - beta).sum(1).max())
        if N == 2_000:
            assert est.diagnostics["m2_negative_skipped"] == 1
    assert errors[1] < errors[0] / 2
    assert errors[1] < 0.3
    # The default (anchor words on the top-6 positive eigenspace) fits the same corpus and counts the cut.
    anchor = lda.spectral(short_documents(beta, weights, 2_000, 2), 6, seed=0, doc_topics=False)
    assert anchor.diagnostics["method"] == "anchor" and anchor.diagnostics["anchor_negative_eigenvalues_cut"] >= 1


def test_noisy_topics_are_reported_not_handed_out_silently():
    """Exact E2 and a third moment drowned in symmetric noise (as large as the moment itself): the recovered
    topics have much negative mass; they are repaired (strictly inside the simplex) and the user is told."""
    beta, _ = random_instance(K, 8, 0)
    raw = ExactRaw(beta, np.array([0.5, 0.3, 0.2]))
    noise = np.random.default_rng(0).standard_normal(raw.e3.shape)
    noise = sum(noise.transpose(p) for p in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]) / 6
    raw.e3 = raw.e3 + np.abs(raw.e3).max() * noise
    pairs = (np.array([0, 1]), np.array([1, 0]), np.array([1.0, 1.0]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b, _, report = _topics.fit_lda_grid(raw, K, [1.0], pairs, func="lda.spectral", method="tpm", seed=0,
                                            floor=1e-3, decompose_options=None)
    messages = [str(w.message) for w in caught]
    assert any(re.search(r"negative total mass.*mass negative.*try a smaller k", m) for m in messages), messages
    # a non-converged decomposition is reported too (the noise tensor has no orthogonal structure)
    assert any("did not converge" in m for m in messages) == (not report["decomposition/converged"].all())
    assert report["sign_flips"] > 0 or report["negative_mass"].max() > 0.25
    assert np.all(b > 0) and np.allclose(b.sum(axis=1), 1.0)


# ----------------------------------------------------------------------------- anchor words
class PopulationPairs:
    """Exact LDA pair moment (``lda.population_moments``' M2) and first moment, as the anchor step reads them,
    optionally with extra symmetric terms ``sum_j c_j v_j v_j^T`` (noise directions)."""

    def __init__(self, beta, alpha, extra=()):
        self.pop = lda.population_moments(beta, alpha)
        self.m1 = beta.T @ alpha / alpha.sum()
        self.n_features = beta.shape[1]
        self.extra = list(extra)

    def m2_matmat(self, Q):
        out = self.pop.m2_matmat(Q)
        for c, v in self.extra:
            out = out + c * np.outer(v, v @ Q)
        return out


def separable_instance(k=3, V=12, seed=4):
    """Topics in which word i < k belongs to topic i alone (an anchor word)."""
    beta, _ = random_instance(k, V, seed)
    beta[:, :k] = 0.0
    beta[np.arange(k), np.arange(k)] = 0.2
    return beta / beta.sum(axis=1, keepdims=True), np.array([0.5, 0.3, 0.2])[:k]


def test_anchor_recovery_is_exact_on_population_moments():
    """Separable topics and exact LDA moments: the top-k positive eigenspace is the row space of beta, RecoverL2 on
    its exact embedding gives the topics and p(topic) = alpha / alpha0 back. Terms outside the row space -- a
    negative eigenvalue as large as the topics' own and a small positive one, as sampling noise would add -- are
    cut. The convex weights come from accelerated projected gradient run to convergence (no weight moving by
    1e-10): 1e-8 is its accuracy."""
    beta, alpha = separable_instance()
    rng = np.random.default_rng(0)
    noise = np.linalg.qr(np.column_stack([beta.T, rng.standard_normal((beta.shape[1], 2))]))[0][:, K:]
    s = np.linalg.eigvalsh(lda.population_moments(beta, alpha).dense()[0])[::-1]
    for extra in ([], [(-2 * s[0], noise[:, 0]), (0.5 * s[K - 1], noise[:, 1])]):
        b, a, _, report = fit_anchor(PopulationPairs(beta, alpha, extra), K, func="t", seed=0, floor=1e-14,
                                     n_iter=5000)
        perm = best_permutation(beta, b)
        assert sorted(report["anchors"]) == [0, 1, 2]
        np.testing.assert_allclose(b[perm], beta, atol=1e-8)
        np.testing.assert_allclose(a[perm], alpha / alpha.sum(), atol=1e-8)
        np.testing.assert_allclose(np.sort(report["anchor_eigenvalues"])[::-1], s[:K], rtol=1e-10)
        assert report["anchor_negative_eigenvalues_cut"] == len(extra) // 2


def test_anchor_step_refuses_k_beyond_the_positive_spectrum():
    """Exact moments of 3 topics have 3 positive eigenvalues: 4 anchors cannot be found, and the error says so."""
    beta, alpha = separable_instance()
    with pytest.raises(IndefiniteMomentError, match=r"only 3 positive eigenvalues.*do not support k=4.*Try k <= 3"):
        fit_anchor(PopulationPairs(beta, alpha), 4, func="t", seed=0)


def test_closing_sweeps_are_em_and_keep_a_fixed_point():
    """close_topics is EM for the topics: the training log-likelihood per token rises sweep by sweep, topics of a
    document collection that uses each topic's words alone are a fixed point up to the eta smoothing, and
    sum(alpha) is kept."""
    from specinit.engine.sources import CountSource

    _, _, X = (None, None, sp.csr_matrix(sample_lda(*separable_instance(), 500, 40, 1)[0]))
    est = lda.spectral(X, K, seed=0, em_sweeps=0, doc_topics=False)
    beta, alpha, report = _topics.close_topics(CountSource(X), est.params["beta"], est.params["alpha"], 6,
                                               floor=1e-3)
    ll = report["closing_log_likelihood"]
    assert ll.shape == (6,) and np.all(np.diff(ll) > 0)
    assert alpha.sum() == pytest.approx(est.params["alpha"].sum()) and np.allclose(beta.sum(axis=1), 1.0)
    # topics on disjoint sets of words and one document per topic with counts proportional to it: the topics are
    # EM's fixed point up to eta / (tokens of the topic) per word
    truth = np.kron(np.eye(K), np.arange(1.0, 5.0))
    truth /= truth.sum(axis=1, keepdims=True)
    counts = sp.csr_matrix(truth * 1e6)
    fixed, _, _ = _topics.close_topics(CountSource(counts), truth, np.full(K, 1.0 / K), 2, floor=1e-12)
    np.testing.assert_allclose(fixed, truth, atol=1e-6)


def test_closing_sweeps_stop_on_convergence():
    """closing_tol stops the sweeps once the training log-likelihood per token rises by less than it: on a collection
    EM converges on, 9 of at most 40 sweeps at 1e-5; the topics then within 0.03 L1 of the 40 sweeps' (measured
    0.018), the weights within 0.005 (measured 0.0022), the likelihood trace the first 9 values of theirs."""
    X = sp.csr_matrix(sample_lda(*separable_instance(), 500, 40, 1)[0])
    fixed = lda.spectral(X, K, seed=0, em_sweeps=40, closing_tol=0.0, doc_topics=False)
    early = lda.spectral(X, K, seed=0, em_sweeps=40, closing_tol=1e-5, doc_topics=False)
    n = early.diagnostics["closing_sweeps"]
    assert fixed.diagnostics["closing_sweeps"] == 40 and 2 < n < 20
    ll = fixed.diagnostics["closing_log_likelihood"]
    np.testing.assert_allclose(early.diagnostics["closing_log_likelihood"], ll[:n], rtol=1e-12)
    assert ll[n - 1] - ll[n - 2] < 1e-5 * abs(ll[n - 1]) <= ll[n - 2] - ll[n - 3]
    assert np.abs(early.params["beta"] - fixed.params["beta"]).sum(axis=1).max() < 0.03
    np.testing.assert_allclose(early.params["alpha"], fixed.params["alpha"], atol=5e-3)
    assert lda.spectral(X, K, seed=0, doc_topics=False).diagnostics["closing_sweeps"] == lda.EM_SWEEPS
    with pytest.raises(ValueError, match=r"'closing_tol' argument of lda.spectral must be"):
        lda.spectral(X, K, closing_tol=-1.0)


def test_anchor_method_on_planted_lda(planted):
    beta, alpha, X = planted
    est = lda.spectral(X, K, method="anchor", seed=0, doc_topics=False)
    perm = best_permutation(beta, est.params["beta"])
    # sparse planted topics have (near-)anchor words; 4,000 x 50 tokens: per-topic L1 error ~0.02
    assert np.abs(est.params["beta"][perm] - beta).sum(axis=1).max() < 0.1
    np.testing.assert_allclose(est.params["alpha"][perm], alpha / alpha.sum(), atol=0.05)
    assert len(est.diagnostics["anchors"]) == K
    with pytest.raises(ValueError, match="method='anchor' uses none of them"):
        lda.spectral(X, K, alpha0=1.0, method="anchor")
    with pytest.raises(ValueError, match="method='anchor' uses none of them"):
        lda.spectral(X, K, alpha0_grid=[1.0])


def test_em_sweeps_argument(planted):
    _, _, X = planted
    with pytest.raises(ValueError, match=r"'em_sweeps' argument of lda.spectral must be an integer >= 0"):
        lda.spectral(X, K, em_sweeps=-1)
    with pytest.raises(TypeError, match=r"'em_sweeps' argument of lda.spectral must be an integer"):
        lda.spectral(X, K, em_sweeps=1.5)
    est = lda.spectral(X, K, em_sweeps=2, doc_topics=False)
    assert est.diagnostics["closing_sweeps"] == 2 and est.diagnostics["closing_log_likelihood"].shape == (2,)
    assert "closing_sweeps" not in lda.spectral(X, K, em_sweeps=0, doc_topics=False).diagnostics


def test_fold_in_and_closing_sweeps_stream_bounded_blocks(planted, monkeypatch):
    """The closing EM sweeps compiled and in NumPy agree; in small blocks of documents they give the same result."""
    from specinit.engine.sources import CountSource

    beta, alpha, X = planted
    X = X[:400]
    theta = _topics.document_topics(X, beta, alpha, n_iter=5, tol=0.0)
    compiled = _topics.close_topics(CountSource(X), beta, alpha, 2, floor=1e-3)
    assert _topics.numba_kernel("closing_sweep") is not None  # the test extra installs Numba
    monkeypatch.setattr(_topics, "numba_kernel", lambda name: None)
    closed = _topics.close_topics(CountSource(X), beta, alpha, 2, floor=1e-3)
    for c, r in zip(compiled[:2], closed[:2]):  # the compiled sweep equals the NumPy one to round-off
        np.testing.assert_allclose(c, r, rtol=1e-10)
    np.testing.assert_allclose(compiled[2]["closing_log_likelihood"], closed[2]["closing_log_likelihood"], rtol=1e-12)
    monkeypatch.setattr(_topics, "TOKEN_BLOCK_BYTES", 8 * K * 60)  # at most 60 non-zeros (a few documents) a block
    blocks = list(_topics._token_blocks(X, K))
    assert len(blocks) > 50 and all(b.nnz <= 60 or b.shape[0] == 1 for b in blocks)
    assert sum(b.shape[0] for b in blocks) == X.shape[0]
    np.testing.assert_allclose(_topics.document_topics(X, beta, alpha, n_iter=5, tol=0.0), theta, rtol=1e-12)
    blocked = _topics.close_topics(CountSource(X), beta, alpha, 2, floor=1e-3)
    for whole, part in zip(closed[:2], blocked[:2]):
        np.testing.assert_allclose(part, whole, rtol=1e-12)
    np.testing.assert_allclose(blocked[2]["closing_log_likelihood"], closed[2]["closing_log_likelihood"], rtol=1e-12)


def test_document_topics_stop_per_document(planted):
    """Each document stops on its own criterion: folded in alone, in pairs or with the whole corpus, a document
    gets the same proportions; with tol = 0 every document takes n_iter steps."""
    beta, alpha, X = planted
    X = X[:300]
    whole = _topics.document_topics(X, beta, alpha)
    alone = np.vstack([_topics.document_topics(X[d:d + 1], beta, alpha) for d in range(X.shape[0])])
    pairs = np.vstack([_topics.document_topics(X[d:d + 2], beta, alpha) for d in range(0, X.shape[0], 2)])
    np.testing.assert_allclose(alone, whole, rtol=0, atol=1e-14)
    np.testing.assert_allclose(pairs, whole, rtol=0, atol=1e-14)
    steps = np.vstack([_topics.document_topics(X[d:d + 1], beta, alpha, n_iter=4, tol=0.0) for d in range(20)])
    np.testing.assert_allclose(_topics.document_topics(X[:20], beta, alpha, n_iter=4, tol=0.0), steps, atol=1e-14)
    converged = _topics.document_topics(X, beta, alpha, n_iter=500, tol=1e-13)
    assert 1e-6 < np.abs(whole - converged).max() < 1e-2  # the default stops near, not at, the fixed point


# ----- pointwise log-likelihood with theta integrated out (PSIS-LOO) -------------------------------------------


def _draws(k, V, chains, draws, seed, alpha_scale=0.5):
    rng = np.random.default_rng(seed)
    return {"alpha": (alpha_scale + rng.random((chains, draws, k))).astype(np.float32),
            "beta": rng.dirichlet(np.full(V, 0.5), size=(chains, draws, k)).astype(np.float32),
            "theta": np.full((chains, draws, 7, k), np.nan, np.float32)}  # ignored: theta is integrated out


def _multinomial_logpmf(c, p):
    from scipy.special import gammaln

    return gammaln(c.sum() + 1) - gammaln(c + 1).sum() + np.sum(c * np.log(p))


def test_pointwise_log_likelihood_is_exact_for_one_topic():
    # k = 1: theta = 1, the integral is the multinomial of beta[0] whatever the particles.
    samples = _draws(1, 8, 2, 3, seed=1)
    X, _ = sample_lda(samples["beta"][0, 0], np.ones(1), 5, 12, 2)
    out = lda.pointwise_log_likelihood(samples, sp.csr_matrix(X), k=1, num_particles=3)
    assert out.shape == (2, 3, 5)
    expected = np.array([[[_multinomial_logpmf(x, samples["beta"][c, d, 0].astype(np.float64)) for x in X]
                          for d in range(3)] for c in range(2)])
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_pointwise_log_likelihood_matches_quadrature_for_two_topics():
    # k = 2: theta = (t, 1 - t), t ~ Beta(alpha_0, alpha_1); the integral by adaptive quadrature. The Monte Carlo
    # standard deviation of the log estimate is about 0.35 / sqrt(S) on these documents (measured over 20 seeds),
    # so 2 / sqrt(S) is > 5 standard deviations and shrinks with S.
    import jax
    import jax.numpy as jnp
    from scipy import integrate, stats

    from specinit.distributions.counts import lda_marginal_loglik

    samples = _draws(2, 5, 1, 2, seed=3, alpha_scale=0.3)
    X = np.array([[2, 0, 1, 3, 0], [0, 1, 0, 0, 4], [1, 1, 1, 1, 1]], dtype=np.float64)
    expected = np.empty((2, 3))
    for d in range(2):
        alpha, beta = samples["alpha"][0, d].astype(np.float64), samples["beta"][0, d].astype(np.float64)
        for i, x in enumerate(X):
            def density(t):
                return np.exp(_multinomial_logpmf(x, t * beta[0] + (1 - t) * beta[1])
                              + stats.beta.logpdf(t, alpha[0], alpha[1]))

            # the Beta density is singular at 0 and 1 (alpha < 1): split the interval there
            value = sum(integrate.quad(density, a, b, limit=200)[0] for a, b in ((0, 1e-3), (1e-3, 0.999), (0.999, 1)))
            expected[d, i] = np.log(value)
    for S in (64, 4096):
        out = lda.pointwise_log_likelihood(samples, X, k=2, num_particles=S, seed=5)
        assert np.max(np.abs(out[0] - expected)) < 2 / np.sqrt(S), S
    # several particle blocks, the last one partly masked
    blocked = lda_marginal_loglik(jax.random.PRNGKey(0), jnp.asarray(samples["alpha"][0, 0]),
                                  jnp.asarray(samples["beta"][0, 0]), jnp.asarray(X, jnp.float32), 1000, block=96)
    assert np.max(np.abs(np.asarray(blocked) - expected[0])) < 2 / np.sqrt(1000)


def test_pointwise_log_likelihood_sparse_and_dense_agree():
    samples = _draws(3, 20, 2, 3, seed=4)
    X, _ = sample_lda(samples["beta"][0, 0], np.full(3, 0.3), 7, 30, 5)
    sparse = lda.model.pointwise_log_likelihood(samples, sp.csr_matrix(X), k=3, num_particles=32, seed=2)
    dense = lda.pointwise_log_likelihood(samples, X.astype(np.float32), k=3, vocab_size=20, num_particles=32, seed=2)
    assert sparse.shape == dense.shape == (2, 3, 7)
    assert np.all(np.isfinite(sparse))
    np.testing.assert_allclose(sparse, dense, rtol=1e-5, atol=1e-3)
    again = lda.pointwise_log_likelihood({"alpha": samples["alpha"], "beta": samples["beta"]}, sp.csr_matrix(X), k=3,
                                         num_particles=32, seed=2)
    np.testing.assert_array_equal(sparse, again)
    other = lda.pointwise_log_likelihood(samples, sp.csr_matrix(X), k=3, num_particles=32, seed=3)
    assert not np.array_equal(sparse, other) and np.max(np.abs(sparse - other)) < 0.5


def test_pointwise_log_likelihood_bad_inputs():
    samples = _draws(3, 20, 2, 3, seed=4)
    X = sp.csr_matrix(np.ones((4, 20)))
    with pytest.raises(ValueError, match="'samples'.*'beta'"):
        lda.pointwise_log_likelihood({"alpha": samples["alpha"]}, X, k=3)
    with pytest.raises(ValueError, match="'samples'.*'beta' of shape"):
        lda.pointwise_log_likelihood(samples, sp.csr_matrix(np.ones((4, 21))), k=3)
    with pytest.raises(ValueError, match="'samples'.*'alpha' of shape"):
        lda.pointwise_log_likelihood(samples, X, k=2)
    with pytest.raises(ValueError, match="'samples'.*'beta' of shape"):
        lda.pointwise_log_likelihood({**samples, "beta": samples["beta"][0]}, X, k=3)
    with pytest.raises(ValueError, match="'samples'.*positive"):
        lda.pointwise_log_likelihood({**samples, "alpha": -samples["alpha"]}, X, k=3)
    with pytest.raises(TypeError, match="'samples'"):
        lda.pointwise_log_likelihood([samples["alpha"], samples["beta"]], X, k=3)
    with pytest.raises(ValueError, match="'counts'"):
        lda.pointwise_log_likelihood(samples, None, k=3)
    with pytest.raises(ValueError, match="'num_particles'"):
        lda.pointwise_log_likelihood(samples, X, k=3, num_particles=0)
    with pytest.raises(ValueError, match="'counts'"):
        lda.pointwise_log_likelihood(samples, X, k=3, vocab_size=19)
