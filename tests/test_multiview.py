"""Tests for specinit.multiview (general multi-view estimator) and models.multiview."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
import scipy.sparse as sp
from numpyro.infer import Predictive, log_likelihood
from scipy.optimize import linear_sum_assignment
from scipy.stats import norm

from specinit.models import multiview as mv
from specinit.multiview import (
    ViewMoments,
    conditional_means,
    fit_multiview,
    multiview_population,
)
from specinit.population import FactoredMoments
from specinit.recovery import fit_exchangeable


def match(estimated, truth):
    """Hungarian matching of rows by Euclidean distance: (est_rows, true_rows)."""
    cost = np.linalg.norm(estimated[:, None, :] - truth[None, :, :], axis=2)
    return linear_sum_assignment(cost)


def random_params(rng, k, dims):
    weights = rng.dirichlet(np.full(k, 5.0))
    return weights, [rng.normal(size=(k, d)) for d in dims]


def sample_gaussian_views(rng, weights, means, n, noise=1.0):
    h = rng.choice(len(weights), size=n, p=weights)
    return [m[h] + noise * rng.standard_normal((n, m.shape[1])) for m in means]


def max_error(fit, weights, means):
    r, c = match(fit.means[0], means[0])
    return max(np.abs(fit.weights[r] - weights[c]).max(), *(np.abs(m[r] - t[c]).max() for m, t in zip(fit.means, means)))


# exact recovery ---------------------------------------------------------------------------------
@pytest.mark.parametrize("target", [-1, 0, 1, 3])
@pytest.mark.parametrize("method", ["tpm", "eca"])
def test_exact_recovery_from_population(target, method):
    rng = np.random.default_rng(0)
    weights, means = random_params(rng, 4, (5, 30, 7, 12))
    fit = fit_multiview(multiview_population(means, weights), 4, target=target, method=method, seed=1)
    # Exact moments: only floating-point error of k x k solves remains.
    assert max_error(fit, weights, means) < 1e-8
    assert fit.diagnostics["target"] == target % 4
    assert np.isfinite(fit.diagnostics["pair_condition_number_ab"])


def test_exact_recovery_sparse_onehot_equals_dense():
    rng = np.random.default_rng(3)
    n, k = 400, 2
    codes = [rng.integers(0, 5, size=n) for _ in range(3)]
    dense = [np.eye(5)[c] for c in codes]
    sparse = [sp.csr_matrix(d) for d in dense]
    a, b = fit_multiview(dense, k, seed=0), fit_multiview(sparse, k, seed=0)
    for ma, mb in zip(a.means, b.means):
        np.testing.assert_allclose(ma, mb, atol=1e-10)


def test_conditional_means_exact():
    rng = np.random.default_rng(4)
    weights, means = random_params(rng, 3, (4, 6, 5))
    pop = multiview_population(means, weights)
    np.testing.assert_allclose(conditional_means(pop, 1, 2, means[2], weights), means[1], atol=1e-10)


# finite samples ---------------------------------------------------------------------------------
def test_error_shrinks_with_n():
    rng = np.random.default_rng(5)
    weights, means = random_params(rng, 3, (6, 8, 10))
    errors = []
    for n in (2_000, 50_000):
        views = sample_gaussian_views(np.random.default_rng(n), weights, means, n)
        errors.append(max_error(fit_multiview(views, 3, seed=0), weights, means))
    # Errors scale like N^(-1/2): a 25x larger sample should give ~5x smaller error; 2x leaves
    # room for the randomness of a single draw.
    assert errors[0] / errors[1] > 2.0, errors


def test_agrees_with_exchangeable_path_when_views_share_parameters():
    rng = np.random.default_rng(6)
    k, d = 3, 7
    weights = rng.dirichlet(np.full(k, 5.0))
    b = rng.normal(size=(k, d))
    fit = fit_multiview(multiview_population([b, b, b], weights), k, seed=0)
    exch = fit_exchangeable(FactoredMoments(b, weights, weights), k, seed=0)
    exch_means = exch.components * exch.eigenvalues[:, None]
    r, c = match(fit.means[0], exch_means)
    np.testing.assert_allclose(fit.means[0][r], exch_means[c], atol=1e-8)
    np.testing.assert_allclose(fit.weights[r], 1 / exch.eigenvalues[c] ** 2, atol=1e-8)


# approach="jennrich" (observable operators) -----------------------------------------------------
@pytest.mark.parametrize("target", [-1, 0, 1, 3])
def test_jennrich_exact_recovery_from_population(target):
    rng = np.random.default_rng(0)
    weights, means = random_params(rng, 4, (5, 30, 7, 12))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # exact moments: no warning about imaginary parts or conditioning
        fit = fit_multiview(multiview_population(means, weights), 4, target=target, approach="jennrich", seed=1)
    assert max_error(fit, weights, means) < 1e-8
    d = fit.diagnostics
    assert d["approach"] == "jennrich" and d["target"] == target % 4
    assert d["jennrich_imaginary_ratio"] < 1e-10 and d["jennrich_weights_offdiagonal"] < 1e-8
    assert 1 <= d["jennrich_condition_number"] < 1e3


def test_jennrich_error_shrinks_with_n():
    rng = np.random.default_rng(5)
    weights, means = random_params(rng, 3, (6, 8, 10))
    errors = []
    for n in (2_000, 50_000):
        views = sample_gaussian_views(np.random.default_rng(n), weights, means, n)
        errors.append(max_error(fit_multiview(views, 3, approach="jennrich", seed=0), weights, means))
    # Same N^(-1/2) argument as test_error_shrinks_with_n.
    assert errors[0] / errors[1] > 2.0 and errors[1] < 0.1, errors


def test_jennrich_bad_approach_and_options():
    pop = multiview_population(*random_params(np.random.default_rng(0), 2, (3, 3, 3))[::-1])
    with pytest.raises(ValueError, match="'approach' argument of fit_multiview must be one of 'symmetric', 'jennrich'"):
        fit_multiview(pop, 2, approach="eig")
    with pytest.raises(TypeError, match="approach='jennrich'"):
        fit_multiview(pop, 2, approach="jennrich", n_restarts=3)


# bad input --------------------------------------------------------------------------------------
def test_bad_input():
    x = np.zeros((10, 4))
    with pytest.raises(ValueError, match="at least 3 views"):
        fit_multiview([x, x], 2)
    with pytest.raises(ValueError, match="same number of observations"):
        fit_multiview([x, x, np.zeros((9, 4))], 2)
    bad = x.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        fit_multiview([x, bad, x], 2)
    with pytest.raises(ValueError, match="'k' argument of fit_multiview must be <= the smallest dimension"):
        fit_multiview([x, x, np.zeros((10, 2))], 3)
    with pytest.raises(ValueError, match="'target'"):
        fit_multiview([x, x, x], 2, target=3)
    with pytest.raises(TypeError, match="list of"):
        ViewMoments(x)
    with pytest.raises(ValueError, match="'weights' argument of multiview_population"):
        multiview_population([x[:2]] * 3, [0.5, 0.6])


def test_model_bad_input():
    codes = np.array([0, 1, 2, 1])
    g = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"'views\[0\]' argument of multiview.spectral must be category codes in \[0, 2\)"):
        mv.spectral([codes, codes, g], 2, dims=(2, 3, 2))
    with pytest.raises(ValueError, match="same number of observations"):
        mv.spectral([codes, codes[:3], g], 2)
    with pytest.raises(ValueError, match="at least 3 views"):
        mv.spectral([codes, g], 2)
    with pytest.raises(ValueError, match="integer category codes"):
        mv.spectral([codes + 0.5, codes, g], 2, kinds=("categorical", "categorical", "gaussian"))
    with pytest.raises(ValueError, match="kinds"):
        mv.spectral([codes, codes, g], 2, kinds=("categorical", "poisson", "gaussian"))


# the NumPyro model ------------------------------------------------------------------------------
KINDS = ("categorical", "categorical", "gaussian")


def mixed_params(rng, k):
    return {
        "weights": np.array([0.2, 0.3, 0.5])[:k] / np.array([0.2, 0.3, 0.5])[:k].sum(),
        "beta_0": rng.dirichlet(np.full(6, 0.3), size=k),
        "beta_1": rng.dirichlet(np.full(8, 0.3), size=k),
        "loc_2": 2.0 * rng.normal(size=(k, 4)),
        "scale_2": rng.uniform(0.5, 1.5, size=(k, 4)),
    }


def sample_mixed(rng, p, n):
    k = p["weights"].size
    h = rng.choice(k, size=n, p=p["weights"])
    u0, u1 = rng.random(n), rng.random(n)
    x0 = (u0[:, None] > np.cumsum(p["beta_0"][h], axis=1)).sum(axis=1)
    x1 = (u1[:, None] > np.cumsum(p["beta_1"][h], axis=1)).sum(axis=1)
    x2 = p["loc_2"][h] + p["scale_2"][h] * rng.standard_normal((n, 4))
    return [x0, x1, x2]


def test_log_likelihood_matches_bruteforce():
    rng = np.random.default_rng(7)
    p = mixed_params(rng, 3)
    views = sample_mixed(rng, p, 5)
    samples = {name: value[None] for name, value in p.items()}
    ll = log_likelihood(mv.model, samples, views, k=3, kinds=KINDS, dims=(6, 8, 4))["views"][0]
    expected = []
    for n in range(5):
        per_class = [
            np.log(p["weights"][i]) + np.log(p["beta_0"][i, views[0][n]]) + np.log(p["beta_1"][i, views[1][n]])
            + norm.logpdf(views[2][n], p["loc_2"][i], p["scale_2"][i]).sum()
            for i in range(3)
        ]
        expected.append(np.logaddexp.reduce(per_class))
    np.testing.assert_allclose(np.asarray(ll), expected, rtol=1e-5)


def test_predictive_shapes():
    out = Predictive(mv.model, num_samples=2)(jax.random.PRNGKey(0), None, k=3, kinds=KINDS, n=7, dims=(6, 8, 4))
    assert out["x_0"].shape == (2, 7) and out["x_1"].shape == (2, 7) and out["x_2"].shape == (2, 7, 4)
    assert out["beta_1"].shape == (2, 3, 8) and out["scale_2"].shape == (2, 3, 4) and out["weights"].shape == (2, 3)
    assert int(out["x_1"].max()) < 8


def test_spectral_recovers_mixed_views_and_warm_start():
    rng = np.random.default_rng(8)
    p = mixed_params(rng, 3)
    views = sample_mixed(rng, p, 30_000)
    est = mv.spectral(views, 3, dims=(6, 8, 4), seed=0)
    r, c = match(est.params["loc_2"], p["loc_2"])
    # Sampling error at N = 30000 is ~1e-2 for weights and probabilities; tolerances are a few x that.
    assert np.abs(est.params["weights"][r] - p["weights"][c]).max() < 0.03
    assert np.abs(est.params["beta_0"][r] - p["beta_0"][c]).max() < 0.05
    assert np.abs(est.params["loc_2"][r] - p["loc_2"][c]).max() < 0.3
    assert np.abs(est.params["scale_2"][r] - p["scale_2"][c]).max() < 0.6
    np.testing.assert_allclose(est.params["beta_1"].sum(axis=1), 1.0)
    small = [v[:50] for v in views]
    init = est.init_params(mv.model, 2, jax.random.PRNGKey(0), model_args=(small,),
                           model_kwargs={"k": 3, "kinds": KINDS, "dims": (6, 8, 4)})
    assert init["loc_2"].shape == (2, 3, 4)
    assert all(np.all(np.isfinite(np.asarray(v))) for v in init.values())
