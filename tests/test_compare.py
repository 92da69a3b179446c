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
                          nuts_kwargs={"max_tree_depth": 3})
    assert isinstance(result, NutsComparison)
    assert result.global_sites == ("weights", "beta")
    summary = result.summary()
    assert set(summary) == {"warm_time_s", "cold_time_s", "warm_preparation_s", "warm_max_rhat", "cold_max_rhat",
                            "warm_min_ess", "cold_min_ess", "warm_ess_per_s", "cold_ess_per_s", "warm_mean_num_steps",
                            "cold_mean_num_steps"}
    assert all(np.isfinite(v) for v in summary.values())
    assert summary["warm_ess_per_s"] == pytest.approx(summary["warm_min_ess"] / summary["warm_time_s"])
    assert summary["warm_min_ess"] == min(result.warm_ess[name] for name in ("weights", "beta"))
    assert 1 <= summary["warm_mean_num_steps"] <= 2**3
    assert result.warm.get_samples(group_by_chain=True)["beta"].shape == (2, 20, 2, 20)


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
