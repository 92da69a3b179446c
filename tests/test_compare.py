"""Tests for specinit.compare: warm (spectral) vs cold (default) starts."""

from __future__ import annotations

import numpy as np
import pytest
from specinit.models import lda, single_topic

from specinit.compare import (
    NutsComparison,
    SviComparison,
    compare_nuts,
    compare_svi,
    local_sites,
)


def planted_counts(seed=0, n_docs=40, n_words=20, k=2):
    rng = np.random.default_rng(seed)
    alpha = np.array([0.5, 0.5])
    beta = rng.dirichlet(np.full(n_words, 0.3), k)
    theta = rng.dirichlet(alpha, n_docs)
    return np.stack([rng.multinomial(60, t @ beta) for t in theta]).astype(np.float32)


def planted_lda(seed=0):
    X = planted_counts(seed)
    return X, lda.spectral(X, 2, 1.0)


def test_local_sites_are_the_per_document_sites():
    X = planted_counts()
    assert local_sites(lda.model, (X,), {"k": 2}) == ("theta",)
    assert local_sites(single_topic.model, (X,), {"k": 2}) == ()


def test_compare_nuts_returns_finite_numbers():
    X = planted_counts(seed=1)
    estimate = single_topic.spectral(X, 2)
    result = compare_nuts(single_topic.model, estimate, (X,), {"k": 2}, num_chains=2, num_warmup=60, num_samples=20,
                          nuts_kwargs={"max_tree_depth": 5})
    assert isinstance(result, NutsComparison)
    assert result.global_sites == ("weights", "beta")
    summary = result.summary()
    numbers = {"warm_time_s", "cold_time_s", "warm_preparation_s", "warm_max_rhat", "cold_max_rhat", "warm_min_ess",
               "cold_min_ess", "warm_ess_per_s", "cold_ess_per_s", "warm_mean_num_steps", "cold_mean_num_steps",
               "warm_divergences", "cold_divergences", "warm_max_depth_fraction", "cold_max_depth_fraction"}
    assert set(summary) == numbers | {"warm_metric", "sampler"}
    assert all(np.isfinite(summary[name]) for name in numbers)
    assert summary["sampler"] == "NUTS"
    # single_topic.model: weights and beta are simplexes, so the estimate's curvature is used for neither
    assert summary["warm_metric"] == "identity"
    assert 0 <= summary["warm_divergences"] <= 40 and 0 <= summary["warm_max_depth_fraction"] <= 1
    assert summary["warm_ess_per_s"] == pytest.approx(summary["warm_min_ess"] / summary["warm_time_s"])
    assert summary["warm_min_ess"] == min(result.warm_ess[name] for name in ("weights", "beta"))
    assert 1 <= summary["warm_mean_num_steps"] <= 2**5
    assert result.warm.get_samples(group_by_chain=True)["beta"].shape == (2, 20, 2, 20)


def test_a_metric_that_fails_its_warm_up_check_is_dropped_and_said(monkeypatch):
    from specinit import compare

    X = planted_counts(seed=3)
    estimate = single_topic.spectral(X, 2)
    monkeypatch.setattr(compare, "CHECK_DIVERGENT", -1.0)  # every warm-up fails the check
    monkeypatch.setattr(compare, "CHECK_MIN_DIVERGENT", -1)
    result = compare_nuts(single_topic.model, estimate, (X,), {"k": 2}, num_chains=2, num_warmup=40, num_samples=20,
                          mass=True, nuts_kwargs={"max_tree_depth": 3})
    assert result.warm_metric.startswith("identity after warm-up check: the estimate's metric gave")
    adapted = result.warm.last_state.adapt_state.inverse_mass_matrix
    assert all(np.all(np.isfinite(np.asarray(m))) for m in adapted.values())
    assert result.warm.get_samples(group_by_chain=True)["beta"].shape == (2, 20, 2, 20)


def test_user_count_model_gets_the_exact_sampler():
    from numpyro.contrib.funsor import config_enumerate
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    @config_enumerate
    def mixture(counts, k=2):
        weights = numpyro.sample("mix", dist.Dirichlet(jnp.ones(k)))
        with numpyro.plate("components", k):
            probs = numpyro.sample("word_probs", dist.Dirichlet(0.5 * jnp.ones(counts.shape[1])))
        with numpyro.plate("rows", counts.shape[0]):
            z = numpyro.sample("z", dist.Categorical(weights))
            numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=probs[z]), obs=counts)

    X = planted_counts(seed=4)
    estimate = single_topic.spectral(X, 2)
    sites = {"mix": "weights", "word_probs": "beta"}
    result = compare_nuts(mixture, estimate, (X,), sites=sites, num_chains=2, num_warmup=20, num_samples=20)
    summary = result.summary()
    assert summary["sampler"] == "ExactGibbs(mix, word_probs)"
    assert summary["warm_divergences"] == summary["cold_divergences"] == 0
    assert result.warm.get_samples(group_by_chain=True)["word_probs"].shape == (2, 20, 2, 20)
    plain = compare_nuts(mixture, estimate, (X,), sites=sites, num_chains=2, num_warmup=20, num_samples=20,
                         exact=False, nuts_kwargs={"max_tree_depth": 3})
    assert plain.summary()["sampler"] == "NUTS"


@pytest.mark.parametrize("guide", ["normal", "delta"])
def test_compare_svi_warm_start_begins_lower(guide):
    X, estimate = planted_lda(seed=2)
    result = compare_svi(lda.model, estimate, (X,), {"k": 2}, guide=guide, num_steps=150, lr=0.01, window=20)
    assert isinstance(result, SviComparison)
    summary = result.summary()
    for name in ("warm_time_s", "cold_time_s", "warm_initial_loss", "cold_initial_loss", "warm_final_loss", "cold_final_loss"):
        assert np.isfinite(summary[name])
    assert result.warm_losses.shape == result.cold_losses.shape == (150,)
    assert summary["warm_initial_loss"] < summary["cold_initial_loss"]
    steps = result.steps_to_reach()
    assert steps is not None and 1 <= steps <= 150
    assert result.steps_to_reach(-np.inf) is None


def test_smoothing_and_errors():
    result = SviComparison(np.array([4.0, 2.0, 0.0, 0.0]), np.array([5.0, 5.0, 3.0, 1.0]), 0.0, 0.0, {}, {}, window=2)
    np.testing.assert_allclose(result.smoothed("warm"), [4.0, 3.0, 1.0, 0.0])
    assert result.steps_to_reach() == 3  # cold final smoothed loss is 2.0
    _, estimate = planted_lda()
    with pytest.raises(ValueError, match="'guide'"):
        compare_svi(lda.model, estimate, guide="laplace")
    with pytest.raises(ValueError, match="'num_samples'"):
        compare_nuts(lda.model, estimate, num_samples=2)
    with pytest.raises(ValueError, match="'chain_method'"):
        compare_nuts(lda.model, estimate, chain_method="threads")
