"""Tests of the single-topic and LDA models (the shared count-model path): spectral recovery and diagnostics.

Exact (population) recovery uses tolerance 1e-6: the pipeline is exact in
exact arithmetic; round-off is amplified by the whitening (sqrt of the M2
condition number, ~1e2 here) and by the unwhitening with lambda_i ~ 1/sqrt(w_i),
so errors are ~1e-11; 1e-6 is far above that and far below any real error.
``floor=1e-12`` keeps the simplex floor (floor / V) from moving entries.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import adjusted_rand_score
from specinit.models import lda, single_topic

from specinit.engine.decompose import METHODS
from specinit.engine.moments import CountMoments
from specinit.engine.whitening import IndefiniteMomentError, whiten
from tests.conftest import (
    best_permutation,
    SHORT_TOPICS,
    random_instance,
    sample_lda,
    sample_single_topic,
    short_documents,
)


# ----------------------------------------------------------------------------- exact recovery
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(4))
def test_single_topic_population_recovery(method, seed):
    k, V = 4, 25
    beta, weights = random_instance(k, V, seed)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), k, method=method, seed=seed, floor=1e-12)
    perm = best_permutation(beta, est.params["beta"])
    np.testing.assert_allclose(est.params["beta"][perm], beta, atol=1e-6)
    np.testing.assert_allclose(est.params["weights"][perm], weights, atol=1e-6)
    np.testing.assert_allclose(est.diagnostics["weights_sum_before_normalization"], 1.0, atol=1e-6)
    assert est.diagnostics["sign_flips"] == 0


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(4))
def test_lda_population_recovery(method, seed):
    k, V = 4, 25
    beta, _ = random_instance(k, V, seed)
    alpha = np.random.default_rng(100 + seed).uniform(0.1, 1.0, size=k)
    est = lda.spectral_from_moments(lda.population_moments(beta, alpha), k, alpha0=alpha.sum(), method=method, seed=seed, floor=1e-12)
    perm = best_permutation(beta, est.params["beta"])
    np.testing.assert_allclose(est.params["beta"][perm], beta, atol=1e-6)
    np.testing.assert_allclose(est.params["alpha"][perm], alpha, rtol=1e-6)
    # alpha_sum diagnostic equals alpha0 for a correctly specified model
    np.testing.assert_allclose(est.diagnostics["alpha_sum"], alpha.sum(), rtol=1e-6)
    assert est.diagnostics["alpha0"] == alpha.sum()


def test_default_floor_keeps_params_inside_simplex():
    """With the default floor (1e-3 / V) zero-probability words get a positive value."""
    k, V = 3, 20
    beta, weights = random_instance(k, V, 0)
    beta[:, :5] = 0.0
    beta /= beta.sum(1, keepdims=True)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), k)
    b = est.params["beta"]
    assert b.min() > 0 and b.min() >= 1e-3 / V * 0.99  # floor / V, renormalization shrinks it by < 1e-3
    np.testing.assert_allclose(b.sum(1), 1.0, atol=1e-12)
    assert est.params["weights"].min() > 0
    np.testing.assert_allclose(est.params["weights"].sum(), 1.0, atol=1e-12)


# ----------------------------------------------------------------------------- sampled corpora
@pytest.fixture(scope="module")
def single_topic_instance():
    k, V = 4, 100
    rng = np.random.default_rng(7)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    weights = np.array([0.3, 0.3, 0.2, 0.2])
    return beta, weights


def test_single_topic_error_shrinks_with_n(single_topic_instance):
    """Moment estimators are averages over documents, so their error (and, by
    the delta method, the error of the spectral estimate) scales as 1/sqrt(N):
    50,000 vs 2,000 documents gives an expected ratio sqrt(25) = 5. We require
    a ratio > 2 (room for the randomness of two single draws) and an absolute
    bound: with 50,000 documents of 30 words the L1 error per topic is
    ~0.05 (measured ~0.02-0.05 across seeds), so 0.15 catches a wrong estimator."""
    beta, weights = single_topic_instance
    k = len(weights)
    errors = []
    for N, seed in ((2_000, 1), (50_000, 2)):
        X, _ = sample_single_topic(beta, weights, N, 30, seed)
        est = single_topic.spectral(sp.csr_matrix(X), k, seed=0)
        perm = best_permutation(beta, est.params["beta"])
        errors.append(np.abs(est.params["beta"][perm] - beta).sum(1).max())
    err_small, err_large = errors
    assert err_large < err_small / 2
    assert err_large < 0.15


def test_single_topic_fits_very_short_documents_and_error_shrinks_with_n():
    """Documents of 3-4 tokens: the pooled pair moment is the topics' rank-6 PSD part plus sampling noise of
    both signs. With 2,000 documents (this seed) a negative noise eigenvalue (about -0.0018) is larger in
    magnitude than the smallest topic's (about 0.0017): the top-6 by magnitude are indefinite, and whitening
    with them is refused. The top-6 positive eigenspace is whitened instead (the skipped eigenvalue counted,
    with a warning), and the error shrinks as 1/sqrt(N): 50x the documents, expected ratio ~7, required 2;
    absolute bound 0.3 at N = 100,000 (measured ~0.07)."""
    beta, weights = SHORT_TOPICS
    k = len(weights)
    small = short_documents(beta, weights, 2_000, 2)
    with pytest.raises(IndefiniteMomentError, match="top 6 eigenvectors"):
        whiten(CountMoments(small), k, seed=0, eigenspace="magnitude")
    with pytest.warns(RuntimeWarning, match=r"1 negative eigenvalue\(s\) .*\(skipped"):
        est_small = single_topic.spectral(small, k, seed=0)
    assert est_small.diagnostics["m2_negative_skipped"] == 1
    errors = []
    for est in (est_small, single_topic.spectral(short_documents(beta, weights, 100_000, 10), k, seed=0)):
        perm = best_permutation(beta, est.params["beta"])
        errors.append(np.abs(est.params["beta"][perm] - beta).sum(1).max())
    assert errors[1] < errors[0] / 2
    assert errors[1] < 0.3


def test_single_topic_k_beyond_the_positive_eigenvalues_says_how_many():
    """Documents from ONE topic over 5 words: the pair moment is rank one plus noise, with fewer than 4
    positive eigenvalues for this seed, so k = 4 is refused with the number the data support."""
    rng = np.random.default_rng(0)
    X = rng.multinomial(4, rng.dirichlet(np.ones(5)), size=400)
    with pytest.raises(IndefiniteMomentError, match=r"single_topic.spectral: .*only \d eigenvalue\(s\) that are positive.*"
                                                    r"than k=4.*at most k=\d"):
        single_topic.spectral(X, 4)


def test_lda_error_shrinks_with_n():
    """Same 1/sqrt(N) argument for LDA's moment estimate (expected ratio 5, required 2; no closing EM sweeps)."""
    k, V = 3, 60
    rng = np.random.default_rng(8)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    alpha = np.array([0.2, 0.2, 0.2])
    errors = []
    for N, seed in ((2_000, 3), (50_000, 4)):
        X, _ = sample_lda(beta, alpha, N, 30, seed)
        est = lda.spectral(X, k, alpha0=alpha.sum(), doc_topics=False, seed=0, em_sweeps=0)
        perm = best_permutation(beta, est.params["beta"])
        errors.append(np.abs(est.params["beta"][perm] - beta).sum(1).max())
    assert errors[1] < errors[0] / 2
    # absolute bound: measured ~0.05 at N=50,000; 0.2 still catches a wrong correction
    assert errors[1] < 0.2


def test_responsibilities_cluster_well(single_topic_instance):
    """Well-separated topics (Dirichlet(0.1) over 100 words) and 30-word
    documents: the MAP topic is almost always right, ARI ~0.99; 0.9 is a safe bound."""
    beta, weights = single_topic_instance
    X, z = sample_single_topic(beta, weights, 3_000, 30, 11)
    est = single_topic.spectral(X, 4, seed=0)
    resp, labels = single_topic.responsibilities(X, est)
    assert resp.shape == (3_000, 4)
    np.testing.assert_allclose(resp.sum(1), 1.0, atol=1e-12)
    assert adjusted_rand_score(z, labels) > 0.9
    with pytest.raises(ValueError, match="'counts'.*100 columns"):
        single_topic.responsibilities(X[:, :50], est)


@pytest.fixture(scope="module")
def lda_fit():
    """LDA corpus with long documents (400 words) so theta is well determined."""
    k, V, N = 3, 50, 3_000
    rng = np.random.default_rng(9)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    alpha = np.array([0.3, 0.3, 0.3])
    X, theta = sample_lda(beta, alpha, N, 400, 10)
    est = lda.spectral(X, k, alpha0=alpha.sum(), seed=0)
    return X, beta, alpha, theta, est


def test_lda_params_inside_simplex(lda_fit):
    X, beta, alpha, theta, est = lda_fit
    b, a, th = est.params["beta"], est.params["alpha"], est.params["theta"]
    assert b.shape == beta.shape and a.shape == alpha.shape
    assert b.min() > 0 and a.min() > 0 and th.min() > 0
    np.testing.assert_allclose(b.sum(1), 1.0, atol=1e-12)
    assert th.shape == (X.shape[0], 3)
    np.testing.assert_allclose(th.sum(1), 1.0, atol=1e-12)
    assert np.all(np.isfinite(b)) and np.all(np.isfinite(a)) and np.all(np.isfinite(th))


def test_lda_theta_close_to_truth(lda_fit):
    """With 400 words per document, posterior-mean theta has sd ~ sqrt(theta(1-theta)/400) < 0.025 per
    entry; with the estimated beta (L1 error ~0.1) the mean L1 error per document measured is ~0.05.
    We require < 0.15: a wrong theta (e.g. the prior mean) gives ~0.6."""
    X, beta, alpha, theta, est = lda_fit
    perm = best_permutation(beta, est.params["beta"])
    th = est.params["theta"][:, perm]
    err = np.abs(th - theta).sum(1).mean()
    assert err < 0.15
    baseline = np.abs(alpha / alpha.sum() - theta).sum(1).mean()
    assert baseline > 3 * err


def test_lda_document_topics_bad_input(lda_fit):
    X, _, _, _, est = lda_fit
    with pytest.raises(ValueError, match="'counts'.*50 columns"):
        lda.document_topics(X[:, :10], est.params["beta"], est.params["alpha"])


# ----------------------------------------------------------------------------- bad input
@pytest.fixture(scope="module")
def small_corpus():
    beta, weights = random_instance(3, 10, 0)
    X, _ = sample_single_topic(beta, weights, 60, 10, 0)
    return X


@pytest.mark.parametrize("fit", [
    lambda X, k: single_topic.spectral(X, k),
    lambda X, k: lda.spectral(X, k, alpha0=1.0),
])
def test_bad_k(fit, small_corpus):
    X = small_corpus
    with pytest.raises(ValueError, match=r"'k' argument .* >= 1"):
        fit(X, 0)
    with pytest.raises(ValueError, match=r"'k' argument .*vocabulary size V=10"):
        fit(X, 10)
    with pytest.raises(TypeError, match=r"'k' argument"):
        fit(X, 2.5)
    with pytest.raises(TypeError, match=r"'k' argument"):
        fit(X, "3")
    few = X[:3]
    with pytest.raises(ValueError, match=r"'k' argument .*usable documents \(3 with >= 3 tokens\)"):
        fit(few, 4)


@pytest.mark.parametrize("alpha0", [0.0, -2.0, np.inf, np.nan])
def test_bad_alpha0(alpha0, small_corpus):
    with pytest.raises(ValueError, match=r"'alpha0' argument"):
        lda.spectral(small_corpus, 2, alpha0=alpha0)
    with pytest.raises(ValueError, match=r"'alpha0' argument"):
        lda.spectral_from_moments(lda.population_moments(np.eye(3, 10) + 0.1, np.ones(3)), 2, alpha0=alpha0)


def test_wrong_types(small_corpus):
    with pytest.raises(TypeError, match=r"'counts' argument"):
        single_topic.spectral("counts", 2)
    with pytest.raises(TypeError, match=r"'counts' argument"):
        lda.spectral(None, 2)
    with pytest.raises(TypeError, match=r"'alpha0' argument"):
        lda.spectral(small_corpus, 2, alpha0="1")
    with pytest.raises(ValueError, match=r"'method'.*'tpm', 'svtd', 'eca', 'als'"):
        single_topic.spectral(small_corpus, 2, method="nmf")
    with pytest.raises(ValueError, match=r"'weighting'"):
        lda.spectral(small_corpus, 2, weighting="tfidf")
    with pytest.raises(ValueError, match=r"'counts' argument.*non-negative"):
        single_topic.spectral(-small_corpus, 2)


# ----------------------------------------------------------------------------- misspecification
def test_alpha0_misspecified_warns():
    """Population moments of LDA with alpha0 = 1 fitted with alpha0 = 100:
    lambda_i^2 = 4 a0 (a0+1) / ((a0+2)^2 alpha_i) with the TRUE a0 = 1, so
    sum(alpha_hat) = a (a+1)/(a+2)^2 * (a0+2)^2/(a0 (a0+1)) * a0 = 0.971 * 4.5 = 4.37 for a = 100,
    a factor ~23 below 100."""
    k, V = 3, 20
    beta, _ = random_instance(k, V, 1)
    alpha = np.array([0.2, 0.3, 0.5])
    with pytest.warns(RuntimeWarning, match="misspecified") as record:
        est = lda.spectral_from_moments(lda.population_moments(beta, alpha), k, alpha0=100.0)
    assert "alpha0 = 100" in str(record[0].message)
    np.testing.assert_allclose(est.diagnostics["alpha_sum"], 100 * 101 / 102**2 * 9 / 2 * alpha.sum(), rtol=1e-6)


def test_alpha0_misspecified_sampled():
    """On sampled data a far-off alpha0 shows up either as the sum(alpha_hat) warning or as an
    indefinite M2 (both are documented outcomes)."""
    k, V = 3, 40
    rng = np.random.default_rng(12)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    X, _ = sample_lda(beta, np.full(k, 0.1), 3_000, 30, 13)
    with pytest.raises((RuntimeWarning, IndefiniteMomentError)):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lda.spectral(X, k, alpha0=50.0, doc_topics=False)



def test_lda_short_documents_get_theta_and_are_reported():
    """Documents with < 3 tokens are dropped from the moments (and counted) but still get a theta row."""
    k, V = 2, 20
    rng = np.random.default_rng(16)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    X, _ = sample_lda(beta, np.full(k, 0.5), 1_000, 30, 17)
    X[:4] = 0
    X[1, 0] = 1
    X[2, 3] = 2
    est = lda.spectral(X, k, alpha0=1.0, seed=0)
    assert est.diagnostics["n_dropped"] == 4 and est.diagnostics["n_documents"] == 996
    theta = est.params["theta"]
    assert theta.shape == (1_000, k) and theta.min() > 0
    # an empty document's posterior mean is the prior mean alpha / alpha0
    np.testing.assert_allclose(theta[0], est.params["alpha"] / est.params["alpha"].sum(), atol=1e-12)


def test_lda_chunked_input_equals_whole():
    """Row-chunks give the same moments, hence (same seed) the same estimate to round-off."""
    k, V = 3, 30
    rng = np.random.default_rng(18)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    X, _ = sample_lda(beta, np.full(k, 0.3), 2_000, 30, 19)
    Xs = sp.csr_matrix(X)
    whole = lda.spectral(Xs, k, alpha0=0.9, seed=0, doc_topics=False)
    chunked = lda.spectral([Xs[:700], Xs[700:1500], Xs[1500:]], k, alpha0=0.9, seed=0, doc_topics=False)
    # identical up to the summation order of float64 partial sums (~1e-15 relative), amplified by the
    # whitening/decomposition (~1e3 at most): 1e-9
    np.testing.assert_allclose(chunked.params["beta"], whole.params["beta"], atol=1e-9)
    np.testing.assert_allclose(chunked.params["alpha"], whole.params["alpha"], rtol=1e-9)


def test_k_auto_spectrum_counts_positive_eigenvalues_past_negative_noise():
    """The k='auto' bound reads the spectrum the topic families whiten with: on 2,000 documents of 3-4 tokens a
    negative noise eigenvalue (about -0.0018) is the 6th largest in magnitude, yet the positive values go on
    (the smallest topic's is about 0.0017), so the candidate bound is not cut at the first negative value; with
    100,000 documents the eigengap finds the 6 planted topics."""
    beta, weights = SHORT_TOPICS
    rng = np.random.default_rng(0)
    _, small = single_topic.FAMILY.spectrum_k(CountMoments(short_documents(beta, weights, 2_000, 2)), 10, rng)
    assert small["k_auto/positive"] >= 6
    assert np.all(np.diff(small["k_auto/spectrum"][: small["k_auto/positive"]]) <= 0)
    k, large = single_topic.FAMILY.spectrum_k(CountMoments(short_documents(beta, weights, 100_000, 10)), 10, rng)
    assert k == 6 and large["k_auto/positive"] >= 6


# ----------------------------------------------------------------------------- MAP-EM of the single-topic model
def _quiet(func, *args, **kwargs):
    """``func`` with the spectral fit's warnings about short documents silenced (they are in its diagnostics)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return func(*args, **kwargs)


def test_single_topic_map_refine_generalizes_to_held_out_short_documents():
    """Short documents (3-4 tokens) leave many words unseen in a cluster. With the pseudo-count ``a`` every word
    keeps at least ``a / (n_i + V a)`` in a topic with ``n_i`` expected tokens (five padded words never seen in
    training included), so the refined topics beat the spectral start on held-out documents, and beat
    maximum-likelihood EM (which drives unseen words to the floor) there."""
    beta, weights = SHORT_TOPICS
    pad = sp.csr_matrix((3_000, 5))
    train = sp.hstack([short_documents(beta, weights, 3_000, 2), pad], format="csr")
    test = sp.hstack([short_documents(beta, weights, 1_000, 3), pad[:1_000]], format="csr")
    start = _quiet(single_topic.spectral, train, 6, seed=0)
    result = single_topic.refine(train, start, restarts=0)
    lowest = 0.1 / (train.sum() + 125 * 0.1)
    assert result.params["beta"][:, -5:].min() > 0.99 * lowest
    held_out = {name: float(np.sum(single_topic.log_likelihood(test, est)))
                for name, est in [("spectral", start), ("map", result.estimate),
                                  ("ml", single_topic.refine(train, start, restarts=0, pseudo_count=0.0).estimate)]}
    assert held_out["map"] > held_out["spectral"] and held_out["map"] > held_out["ml"]
    # MAP-EM raises its objective at every step (up to round-off)
    assert result.converged and np.all(np.diff(result.log_likelihood) > -1e-9 * np.abs(result.log_likelihood[1:]))


def test_single_topic_map_refine_with_zero_pseudo_count_is_maximum_likelihood():
    beta, weights = SHORT_TOPICS
    train = short_documents(beta, weights, 1_000, 4)
    start = _quiet(single_topic.spectral, train, 6, seed=0)
    with pytest.warns(RuntimeWarning, match="did not converge in max_iter=3"):
        ml = single_topic.refine(train, start, restarts=0, pseudo_count=0.0, max_iter=3, tol=1e-12, window=1)
    # the trace is then the log-likelihood itself
    np.testing.assert_allclose(ml.log_likelihood[-1], np.sum(single_topic.log_likelihood(train, ml.estimate)),
                               rtol=1e-9)
    with pytest.raises(ValueError, match="pseudo_count"):
        single_topic.refine(train, start, pseudo_count=-0.1)


def test_single_topic_split_merge_escapes_a_merged_and_a_duplicated_topic():
    """Three topics on disjoint words; the start merges the first two into one topic and gives the third twice.
    EM alone stays in that optimum; the split-merge moves (the duplicate leaves, the merged topic is split along
    its documents' principal axis) recover the three topics and a higher objective."""
    beta = np.kron(np.eye(3), np.full(10, 0.1))
    X = sp.csr_matrix(sample_single_topic(beta, np.full(3, 1 / 3), 900, 8, 5)[0])
    start = {"weights": np.array([0.6, 0.2, 0.2]),
             "beta": np.vstack([(beta[0] + beta[1]) / 2, beta[2], beta[2]]) * 0.97 + 0.03 / 30}
    plain = single_topic.refine(X, start, split_merge=0)
    moved = single_topic.refine(X, start, split_merge=2)
    assert moved.log_likelihood[-1] > plain.log_likelihood[-1] + 100
    assert moved.estimate.diagnostics["refine/split_merge_accepted"] >= 1
    error = np.abs(moved.params["beta"][best_permutation(beta, moved.params["beta"])] - beta).sum(axis=1).max()
    assert error < 0.1
    assert np.abs(plain.params["beta"][best_permutation(beta, plain.params["beta"])] - beta).sum(axis=1).max() > 0.5
