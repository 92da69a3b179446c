"""Tests of the single-topic and LDA models: spectral recovery, diagnostics,
the SpectralEstimate and the NumPyro hand-off.

Exact (population) recovery uses tolerance 1e-6: the pipeline is exact in
exact arithmetic; round-off is amplified by the whitening (sqrt of the M2
condition number, ~1e2 here) and by the unwhitening with lambda_i ~ 1/sqrt(w_i),
so errors are ~1e-11; 1e-6 is far above that and far below any real error.
``floor=1e-12`` keeps the simplex floor (floor / V) from moving entries.
"""

from __future__ import annotations

import jax
import numpy as np
import numpyro
import pytest
import scipy.sparse as sp
from numpyro.infer import Predictive
from numpyro.infer.util import initialize_model
from scipy.optimize import linear_sum_assignment
from sklearn.metrics import adjusted_rand_score

from specinit.models import lda, single_topic
from specinit.decompose import METHODS
from specinit.estimate import SpectralEstimate
from specinit.whitening import IndefiniteMomentError


def match(beta_hat, beta):
    """Permutation of beta_hat rows matching beta rows (Hungarian on L1 distance)."""
    cost = np.abs(beta_hat[:, None, :] - beta[None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(len(cols), dtype=int)
    perm[cols] = rows
    return perm  # beta_hat[perm] ~ beta


def random_instance(k, V, seed, conc=0.5):
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(V, conc), size=k)
    weights = rng.dirichlet(np.full(k, 5.0))
    return beta, weights


def sample_single_topic(beta, weights, N, length, seed):
    rng = np.random.default_rng(seed)
    z = rng.choice(len(weights), size=N, p=weights)
    X = rng.multinomial(length, beta[z])  # vectorized over rows
    return X, z


def sample_lda(beta, alpha, N, length, seed):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(alpha, size=N)
    probs = theta @ beta
    X = rng.multinomial(length, probs / probs.sum(1, keepdims=True))
    return X, theta


# ----------------------------------------------------------------------------- exact recovery
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", range(4))
def test_single_topic_population_recovery(method, seed):
    k, V = 4, 25
    beta, weights = random_instance(k, V, seed)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), k, method=method, seed=seed, floor=1e-12)
    perm = match(est.params["beta"], beta)
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
    perm = match(est.params["beta"], beta)
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
        perm = match(est.params["beta"], beta)
        errors.append(np.abs(est.params["beta"][perm] - beta).sum(1).max())
    err_small, err_large = errors
    assert err_large < err_small / 2
    assert err_large < 0.15


def test_lda_error_shrinks_with_n():
    """Same 1/sqrt(N) argument for LDA (expected ratio 5, required 2)."""
    k, V = 3, 60
    rng = np.random.default_rng(8)
    beta = rng.dirichlet(np.full(V, 0.1), size=k)
    alpha = np.array([0.2, 0.2, 0.2])
    errors = []
    for N, seed in ((2_000, 3), (50_000, 4)):
        X, _ = sample_lda(beta, alpha, N, 30, seed)
        est = lda.spectral(X, k, alpha0=alpha.sum(), doc_topics=False, seed=0)
        perm = match(est.params["beta"], beta)
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
    perm = match(est.params["beta"], beta)
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


# ----------------------------------------------------------------------------- SpectralEstimate
def test_save_load_round_trip(tmp_path, lda_fit):
    *_, est = lda_fit
    est = SpectralEstimate(est.model, dict(est.params), dict(est.diagnostics), vocabulary=[f"w{i}" for i in range(50)])
    path = est.save(tmp_path / "fit.npz")
    back = SpectralEstimate.load(path)
    assert back.model == "lda" and back.vocabulary == est.vocabulary
    assert back.params.keys() == est.params.keys()
    for name in est.params:
        np.testing.assert_array_equal(back.params[name], est.params[name])
        assert back.params[name].dtype == np.float64
    assert back.diagnostics.keys() == est.diagnostics.keys()
    for key, value in est.diagnostics.items():
        if isinstance(value, str):
            assert back.diagnostics[key] == value
        else:
            np.testing.assert_array_equal(np.asarray(back.diagnostics[key]), np.asarray(value))
    assert back.k == 3


def test_estimate_rejects_non_finite():
    with pytest.raises(ValueError, match="non-finite entries in 'beta'"):
        SpectralEstimate("lda", {"beta": np.array([[np.nan, 1.0]])})


# ----------------------------------------------------------------------------- NumPyro hand-off
# JAX compiles every primitive for every new shape (~0.3 s each on the shared CI cores), so all
# hand-off tests share ONE small LDA instance and the same number of chains: later calls hit the cache.
N_CHAINS = 2


@pytest.fixture(scope="module")
def small_lda():
    k, V, N = 3, 12, 20
    rng = np.random.default_rng(14)
    beta = rng.dirichlet(np.full(V, 0.3), size=k)
    alpha = np.full(k, 0.5)
    X, _ = sample_lda(beta, alpha, N, 40, 15)
    est = lda.spectral(X, k, alpha0=alpha.sum(), seed=0, method="svtd")
    return X, est


@pytest.fixture(scope="module")
def jittered_chains(small_lda):
    X, est = small_lda
    return est.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(0), jitter=0.1, model_kwargs=dict(counts=X, k=3))


def test_init_params_shapes_and_finite(small_lda, jittered_chains):
    X, est = small_lda
    N, V = X.shape
    chains = jittered_chains
    # unconstrained: Dirichlet rows lose one dim (stick-breaking), positive alpha keeps its shape
    assert set(chains) == {"alpha", "beta", "theta"}
    assert chains["beta"].shape == (N_CHAINS, 3, V - 1)
    assert chains["theta"].shape == (N_CHAINS, N, 3 - 1)
    assert chains["alpha"].shape == (N_CHAINS, 3)
    for value in chains.values():
        assert np.all(np.isfinite(np.asarray(value)))
    # jitter (sd 0.1) makes chains differ
    assert np.abs(np.asarray(chains["beta"][0]) - np.asarray(chains["beta"][1])).max() > 1e-2


def test_init_params_zero_jitter_identical_chains(small_lda, jittered_chains):
    X, est = small_lda
    chains = est.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(1), jitter=0.0, model_kwargs=dict(counts=X, k=3))
    for value in chains.values():
        value = np.asarray(value)
        np.testing.assert_array_equal(value[1], value[0])
    # alpha is log-transformed; float32 at the boundary, so relative 1e-5 (~100 ulp)
    np.testing.assert_allclose(np.exp(np.asarray(chains["alpha"][0])), est.params["alpha"], rtol=1e-5)
    # jittered chains are centred on the same point: deviation ~ 0.1 * N(0, 1), bounded by 1 (10 sd)
    assert np.abs(np.asarray(jittered_chains["alpha"]) - np.asarray(chains["alpha"])).max() < 1.0


def test_init_params_missing_sites(small_lda, jittered_chains):
    X, est = small_lda
    partial = SpectralEstimate("lda", {k: v for k, v in est.params.items() if k != "theta"})
    with pytest.raises(ValueError, match=r"'model' argument.*\['theta'\]"):
        partial.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(0), model_kwargs=dict(counts=X, k=3))


def test_init_params_bad_arguments(small_lda):
    X, est = small_lda
    with pytest.raises(ValueError, match="'num_chains'"):
        est.init_params(lda.model, 0, jax.random.PRNGKey(0), model_kwargs=dict(counts=X, k=3))
    with pytest.raises(ValueError, match="'jitter'"):
        est.init_params(lda.model, 2, jax.random.PRNGKey(0), jitter=-1.0, model_kwargs=dict(counts=X, k=3))


def test_init_strategy_with_initialize_model(small_lda, jittered_chains):
    X, est = small_lda
    info = initialize_model(jax.random.PRNGKey(3), lda.model, init_strategy=est.init_strategy(),
                            model_kwargs=dict(counts=X, k=3))
    z = info.param_info.z
    # the unconstrained start IS the estimate: alpha (positive) is log-transformed; float32 at the
    # boundary, so relative 1e-5 (~100 ulp); no further JAX calls (each new op costs a compilation)
    np.testing.assert_allclose(np.exp(np.asarray(z["alpha"])), est.params["alpha"], rtol=1e-5)
    assert z["beta"].shape == (3, X.shape[1] - 1) and z["theta"].shape == (X.shape[0], 2)
    assert np.isfinite(float(info.param_info.potential_energy))
    assert np.all(np.isfinite(np.asarray(info.param_info.z_grad["beta"])))


def test_condition_predictive(small_lda):
    X, est = small_lda
    k, V = 3, X.shape[1]
    point = SpectralEstimate("single_topic", {"beta": est.params["beta"], "weights": est.params["alpha"] / est.params["alpha"].sum()})
    lengths = np.full(5, 17)
    draws = Predictive(point.condition(single_topic.model), num_samples=2)(jax.random.PRNGKey(0), k=k, vocab_size=V, doc_lengths=lengths)
    counts = np.asarray(draws["counts"])
    assert counts.shape == (2, 5, V)
    np.testing.assert_array_equal(counts.sum(-1), 17)
    # words outside the support of every topic are impossible: the point estimate (floored) is used,
    # so no check on values beyond shape and totals is possible without many draws
    with pytest.raises(ValueError, match="'sites'"):
        point.condition(lda.model, sites=["theta"])


# ----------------------------------------------------------------------------- more estimate checks
@pytest.mark.parametrize("method", METHODS)
def test_save_load_round_trip_every_method(tmp_path, method):
    """Every method's diagnostics (bool/int arrays, floats, strings) survive save/load exactly."""
    beta, weights = random_instance(3, 15, 2)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), 3, method=method)
    back = SpectralEstimate.load(est.save(tmp_path / f"{method}.npz"))
    assert back.model == "single_topic" and back.vocabulary is None
    for name in est.params:
        np.testing.assert_array_equal(back.params[name], est.params[name])
    assert back.diagnostics.keys() == est.diagnostics.keys()
    for key, value in est.diagnostics.items():
        if isinstance(value, str):
            assert back.diagnostics[key] == value
        else:
            np.testing.assert_array_equal(np.asarray(back.diagnostics[key]), np.asarray(value))


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
    """Row-chunks give the same moments, hence (same seed) the same estimate to round-off.
    (doc_topics needs the documents in memory; see report: chunks + doc_topics=True fails.)"""
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
