"""Tests of the multi-view engine (specinit.engine.views): exact and finite-sample recovery, Jennrich."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.population import FactoredMoments
from specinit.engine.views import (
    conditional_means,
    fit_multiview,
    multiview_population,
)
from tests.conftest import best_permutation


def random_params(rng, k, dims):
    weights = rng.dirichlet(np.full(k, 5.0))
    return weights, [rng.normal(size=(k, d)) for d in dims]


def sample_gaussian_views(rng, weights, means, n, noise=1.0):
    h = rng.choice(len(weights), size=n, p=weights)
    return [m[h] + noise * rng.standard_normal((n, m.shape[1])) for m in means]


def max_error(fit, weights, means):
    r, c = best_permutation(means[0], fit.means[0], "l2"), slice(None)
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
    r, c = best_permutation(exch_means, fit.means[0], "l2"), slice(None)
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
    with pytest.raises(ValueError, match="'approach' argument of fit_multiview must be one of 'auto', 'symmetric', 'jennrich'"):
        fit_multiview(pop, 2, approach="eig")
    with pytest.raises(TypeError, match="approach='jennrich'"):
        fit_multiview(pop, 2, approach="jennrich", decompose_options={"n_restarts": 3})


