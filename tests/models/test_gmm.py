"""Tests for models.gmm: spherical (common / differing variances) and axis-aligned mixtures."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from numpyro.infer import Predictive, log_likelihood
from scipy.special import logsumexp
from scipy.stats import norm
from specinit.models import gmm

from tests.conftest import best_permutation


def mixture(rng, k, d, spread=3.0):
    return rng.dirichlet(np.full(k, 5.0)), spread * rng.normal(size=(k, d))


def sample(rng, weights, loc, scale, n):
    """``scale``: scalar, (k,) or (k, d)."""
    h = rng.choice(len(weights), size=n, p=weights)
    scale = np.broadcast_to(np.asarray(scale, dtype=float).reshape(-1, 1) if np.ndim(scale) == 1 else scale,
                            loc.shape)
    return loc[h] + scale[h] * rng.standard_normal((n, loc.shape[1]))


def loc_error(est, loc):
    r, c = best_permutation(loc, est.params["loc"], "l2"), slice(None)
    return np.linalg.norm(est.params["loc"][r] - loc[c], axis=1).mean(), r, c


@pytest.mark.parametrize("method", ["tpm", "svtd"])
def test_exact_recovery_from_population_moments(method):
    rng = np.random.default_rng(0)
    weights, loc = mixture(rng, 4, 9)
    scale = np.array([1.0, 1.5, 2.0, 0.5])
    est = gmm.spectral_from_moments(gmm.population_moments(loc, weights, scale), 4, common_scale=False, method=method,
                                    seed=0)
    mu = est.params["loc"]
    r, c = best_permutation(loc, mu, "l2"), slice(None)
    np.testing.assert_allclose(mu[r], loc[c], atol=1e-8)
    np.testing.assert_allclose(est.params["weights"][r], weights[c], atol=1e-8)
    np.testing.assert_allclose(est.params["scale"][r], scale[c], atol=1e-8)


def test_common_scale_error_shrinks_with_n():
    rng = np.random.default_rng(1)
    weights, loc = mixture(rng, 3, 10)
    errors, scales = [], []
    for n in (2_000, 50_000):
        est = gmm.spectral(sample(np.random.default_rng(n), weights, loc, 1.0, n), 3, seed=0)
        errors.append(loc_error(est, loc)[0])
        scales.append(abs(float(est.params["scale"]) - 1.0))
    # Moment errors scale like N^(-1/2) (25x more data -> ~5x smaller); 2x leaves room for one draw's luck.
    assert errors[0] / errors[1] > 2.0, errors
    assert scales[1] < 0.02
    assert est.params["scale"].shape == ()


def test_differing_scales_recovered():
    rng = np.random.default_rng(2)
    weights, loc = mixture(rng, 3, 10)
    scale = np.array([0.5, 1.0, 1.5])
    errors = []
    for n in (2_000, 50_000):
        est = gmm.spectral(sample(np.random.default_rng(n), weights, loc, scale, n), 3, common_scale=False, seed=0)
        err, r, c = loc_error(est, loc)
        errors.append(err)
    assert errors[0] / errors[1] > 2.0, errors
    # N = 50000: the variance solve is ~1e-2 accurate, so 0.05 on the scale is several sigma.
    np.testing.assert_allclose(est.params["scale"][r], scale[c], atol=0.05)
    np.testing.assert_allclose(est.params["weights"][r], weights[c], atol=0.02)


def test_axis_aligned_recovers_loc_and_coordinate_variances():
    rng = np.random.default_rng(3)
    k, d = 3, 30
    weights, loc = mixture(rng, k, d, spread=2.0)
    sd = rng.uniform(0.5, 1.5, size=(k, d))
    errors = []
    for n in (2_000, 50_000):
        est = gmm.spectral_axis_aligned(sample(np.random.default_rng(n), weights, loc, sd, n), k, seed=0)
        err, r, c = loc_error(est, loc)
        errors.append(err)
    assert errors[0] / errors[1] > 2.0, errors
    var = est.diagnostics["coordinate_variances"][r]
    # Mean absolute error of ~0.02 at N = 50000 (measured); 0.06 is a 3x margin.
    assert np.abs(var - sd[c] ** 2).mean() < 0.06
    assert sorted(np.bincount(est.diagnostics["partition"])) == [10, 10, 10]


def test_bad_input():
    x = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match=r"'x' argument of gmm.spectral must be an array with d >= k columns"):
        gmm.spectral(x, 4)
    bad = x.copy()
    bad[1, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        gmm.spectral(bad, 2)
    with pytest.raises(ValueError, match="d >= 3 k"):
        gmm.spectral_axis_aligned(x, 2)
    with pytest.raises(TypeError, match="numeric"):
        gmm.spectral(np.array([["a", "b"]] * 3), 1)
    with pytest.raises(ValueError, match="two-dimensional"):
        gmm.spectral(x[:, 0], 1)


@pytest.mark.parametrize("common", [True, False])
def test_log_likelihood_matches_bruteforce(common):
    rng = np.random.default_rng(4)
    weights, loc = mixture(rng, 3, 2)
    scale = np.float64(0.8) if common else np.array([0.5, 1.0, 2.0])
    x = sample(rng, weights, loc, scale, 6)
    samples = {"weights": weights[None], "loc": loc[None], "scale": np.asarray(scale)[None]}
    ll = log_likelihood(gmm.model, samples, x, k=3, common_scale=common)["x"][0]
    s = np.broadcast_to(scale, (3,))
    per = np.log(weights) + np.stack([norm.logpdf(x, loc[i], s[i]).sum(axis=1) for i in range(3)], axis=1)
    np.testing.assert_allclose(np.asarray(ll), logsumexp(per, axis=1), rtol=1e-5)


def test_predictive_shapes_and_warm_start():
    out = Predictive(gmm.model, num_samples=2)(jax.random.PRNGKey(0), None, k=3, n=5, dim=4, common_scale=False)
    assert out["x"].shape == (2, 5, 4) and out["loc"].shape == (2, 3, 4) and out["scale"].shape == (2, 3)
    rng = np.random.default_rng(5)
    weights, loc = mixture(rng, 2, 4)
    x = sample(rng, weights, loc, 1.0, 400)
    est = gmm.spectral(x, 2)
    init = est.init_params(gmm.model, 2, jax.random.PRNGKey(0), model_args=(x[:50],), model_kwargs={"k": 2})
    assert init["loc"].shape == (2, 2, 4) and init["scale"].shape == (2,)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in init.values())
