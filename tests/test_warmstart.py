"""The NumPyro hand-off: per-chain unconstrained init_params, init_to_value, condition."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from numpyro.infer import Predictive
from numpyro.infer.util import initialize_model
from specinit.models import lda, single_topic

from specinit.estimate import SpectralEstimate
from tests.conftest import sample_lda

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
    return est.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(0), spread=0.1, model_kwargs=dict(counts=X, k=3))


def test_init_params_shapes_and_finite(small_lda, jittered_chains):
    X, est = small_lda
    N, V = X.shape
    chains = jittered_chains
    # unconstrained: Dirichlet rows lose one dim (centred log-ratios), positive alpha keeps its shape
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
    chains = est.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(1), spread=0.0, model_kwargs=dict(counts=X, k=3))
    for value in chains.values():
        value = np.asarray(value)
        np.testing.assert_array_equal(value[1], value[0])
    # alpha is log-transformed; float32 at the boundary, so relative 1e-5 (~100 ulp)
    np.testing.assert_allclose(np.exp(np.asarray(chains["alpha"][0])), est.params["alpha"], rtol=1e-5)
    # jittered chains are centred on the same point: deviation ~ 0.1 * N(0, 1), bounded by 1 (10 sd)
    assert np.abs(np.asarray(jittered_chains["alpha"]) - np.asarray(chains["alpha"])).max() < 1.0


def test_init_params_single_chain_has_no_chain_axis(small_lda):
    """MCMC.run with num_chains=1 takes unbatched init_params (NumPyro's convention)."""
    X, est = small_lda
    one = est.init_params(lda.model, 1, jax.random.PRNGKey(1), model_kwargs=dict(counts=X, k=3))
    two = est.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(1), model_kwargs=dict(counts=X, k=3))
    for name, value in one.items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(two[name][0]))


def test_init_params_runs_the_model_as_often_as_initialize_model_alone(small_lda, jittered_chains):
    """The model is traced once, inside NumPyro's ``initialize_model`` (its trace gives the sites the mapping is
    checked against); a spread adds one evaluation of the chains' starts, whatever their number."""
    X, est = small_lda
    calls = []

    def model(counts, k):  # a user's model, counting its runs
        calls.append(k)
        lda.model(counts=counts, k=k)

    kwargs = dict(counts=X, k=3)
    initialize_model(jax.random.PRNGKey(0), model, init_strategy=est.init_strategy(), model_kwargs=kwargs)
    alone = len(calls)
    for num_chains, spread, evaluations in ((1, 0.0, 0), (N_CHAINS, 0.0, 0), (1, 0.1, 1), (N_CHAINS, 0.1, 1)):
        calls.clear()
        est.init_params(model, num_chains, jax.random.PRNGKey(0), spread=spread, model_kwargs=kwargs)
        assert len(calls) == alone + evaluations, (num_chains, spread)


def test_init_params_missing_sites(small_lda, jittered_chains):
    X, est = small_lda
    partial = SpectralEstimate("lda", {k: v for k, v in est.params.items() if k != "theta"})
    with pytest.raises(ValueError, match=r"'sites' argument.*covers every one.*no value for \['theta'\]"):
        partial.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(0), model_kwargs=dict(counts=X, k=3))
    # an explicit fallback is the only way to leave a site to NumPyro's default
    chains = partial.init_params(lda.model, N_CHAINS, jax.random.PRNGKey(0), fallback=("theta",),
                                 model_kwargs=dict(counts=X, k=3))
    assert chains["theta"].shape == (N_CHAINS, X.shape[0], 2)


def test_init_params_bad_arguments(small_lda):
    X, est = small_lda
    with pytest.raises(ValueError, match="'num_chains'"):
        est.init_params(lda.model, 0, jax.random.PRNGKey(0), model_kwargs=dict(counts=X, k=3))
    with pytest.raises(ValueError, match="'spread'"):
        est.init_params(lda.model, 2, jax.random.PRNGKey(0), spread=-1.0, model_kwargs=dict(counts=X, k=3))


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



def test_coupled_sites_are_those_mapped_jointly():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from specinit.warmstart import site_info

    def model():
        numpyro.sample("w", dist.Dirichlet(jnp.ones(3)))
        numpyro.sample("corr", dist.LKJCholesky(3, 2.0))
        numpyro.sample("scale", dist.HalfNormal(1.0).expand([3]).to_event(1))
        numpyro.sample("loc", dist.Normal(0.0, 1.0))
        numpyro.sample("p", dist.Beta(2.0, 2.0))

    info = site_info(model)
    assert {name for name, site in info.items() if site.coupled} == {"w", "corr"}


@pytest.mark.parametrize("dense", [True, False])
def test_decoupled_laplace_keeps_the_trusted_block(dense):
    from specinit.warmstart import Laplace

    mean = {"a": jax.numpy.zeros(2), "b": jax.numpy.zeros(3)}
    rng = np.random.default_rng(0)
    root = rng.normal(size=(5, 5))
    covariance = root @ root.T + np.eye(5) if dense else rng.uniform(0.1, 2.0, 5)
    gaussian = Laplace(("a", "b"), mean, covariance)
    out = gaussian.decoupled(["b"]).covariance
    if dense:
        np.testing.assert_array_equal(out[:2, :2], covariance[:2, :2])
        np.testing.assert_array_equal(out[2:, 2:], np.eye(3))
        assert not out[:2, 2:].any() and not out[2:, :2].any()
    else:
        np.testing.assert_array_equal(out, np.r_[covariance[:2], np.ones(3)])
    assert gaussian.decoupled([]) is gaussian
    np.testing.assert_array_equal(gaussian.covariance, covariance)  # the original is left as it was
