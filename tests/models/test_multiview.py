"""Tests of specinit.models.multiview: the NumPyro mixture, the spectral estimate, fallback and refine."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from numpyro.infer import Predictive, log_likelihood
from scipy.stats import norm
from specinit.models import multiview as mv

from specinit.engine.views import (
    ViewMoments,
    fit_multiview,
    multiview_population,
)
from tests.conftest import best_permutation


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
    r, c = best_permutation(p["loc_2"], est.params["loc_2"], "l2"), slice(None)
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


# fallback and refinement ----------------------------------------------------------------------------------------
def inconsistent_views(n=2000, seed=0):
    """Three 2-d views whose second coordinates have pairwise correlations -0.3, 0.3, 0.3: no k-class
    multi-view mixture has them, and the symmetrized second moment has a negative eigenvalue (~ -0.3)."""
    rng = np.random.default_rng(seed)
    c1 = rng.multivariate_normal(np.zeros(3), np.full((3, 3), 0.5) + 0.5 * np.eye(3), size=n)
    c2 = rng.multivariate_normal(np.zeros(3), [[1, -0.3, 0.3], [-0.3, 1, 0.3], [0.3, 0.3, 1]], size=n)
    return [np.stack([c1[:, v], c2[:, v]], axis=1) + np.array([1.0, 0.5]) for v in range(3)]


def test_indefinite_views_fall_back_by_default():
    from specinit.engine.whitening import IndefiniteMomentError

    views = inconsistent_views()
    with pytest.raises(IndefiniteMomentError, match="approach='jennrich'"):
        mv.spectral(views, 2, approach="symmetric")
    with pytest.warns(RuntimeWarning) as record:  # the fallback, and the Jennrich path's misfit warnings
        est = mv.spectral(views, 2)
    assert any("fell back to approach='jennrich'" in str(w.message) for w in record)
    assert est.diagnostics["fallback"].startswith("jennrich") and est.diagnostics["approach"] == "jennrich"
    assert all(np.all(np.isfinite(v)) for v in est.params.values())
    with pytest.warns(RuntimeWarning, match="did not converge"):
        result = mv.refine(views, est, max_iter=3, tol=1e-12)
    assert np.all(np.diff(result.log_likelihood) > 0)


def test_refine_monotone_and_log_likelihood_matches_the_model():
    rng = np.random.default_rng(9)
    p = mixed_params(rng, 3)
    views = sample_mixed(rng, p, 3000)
    est = mv.spectral(views, 3, dims=(6, 8, 4), seed=0)
    assert est.diagnostics["fallback"] is None
    result = mv.refine(views, est, dims=(6, 8, 4), max_iter=500, tol=1e-8)
    trace = result.log_likelihood
    assert result.converged and result.diagnostics["decreases"] == 0
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1]))  # EM: monotone up to round-off
    # the trace is the model's log-likelihood: the NumPyro program scores the refined parameters the same
    # (float32 in JAX: relative 1e-5)
    samples = {name: value[None] for name, value in result.params.items()}
    ll = log_likelihood(mv.model, samples, views, k=3, kinds=KINDS, dims=(6, 8, 4))["views"][0]
    np.testing.assert_allclose(float(np.sum(ll)), trace[-1], rtol=1e-5)
    assert trace[-1] > trace[0]


def test_refine_bad_input():
    rng = np.random.default_rng(10)
    p = mixed_params(rng, 3)
    views = sample_mixed(rng, p, 50)
    with pytest.raises(ValueError, match="same number of observations"):
        mv.refine([views[0], views[1][:40], views[2]], p, dims=(6, 8, 4))
    with pytest.raises(ValueError, match=r"'loc_2' of shape \(3, 4\)"):
        mv.refine(views, {**p, "loc_2": p["loc_2"][:, :2]}, dims=(6, 8, 4))
    bad = views[2].copy()
    bad[4, 0] = np.nan
    with pytest.raises(ValueError, match=r"NaN or infinite entries in 1 row\(s\): row 4"):
        mv.refine([views[0], views[1], bad], p, dims=(6, 8, 4))


def test_the_conditional_independence_of_the_views_is_checked():
    """On data from the model the cross moments match the fit; on image bands (neighbouring pixels depend on each
    other beyond the digit) they do not, and the fit says so."""
    from sklearn.datasets import load_digits

    rng = np.random.default_rng(2)
    h = rng.choice(3, 3000, p=[0.5, 0.3, 0.2])
    means = [2.0 * rng.normal(size=(3, d)) for d in (4, 5, 6)]
    views = [m[h] + rng.normal(size=(3000, m.shape[1])) for m in means]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning on data that follow the model
        est = mv.spectral(views, 3, seed=0)
    assert est.diagnostics["independence_holds"] and est.diagnostics["independence_misfit"].shape == (3,)
    assert np.max(est.diagnostics["independence_misfit"]) < est.diagnostics["independence_level"]
    x = load_digits().data
    x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1.0)
    bands = [x[:, :24], x[:, 24:48], x[:, 48:]]
    with pytest.warns(RuntimeWarning) as record:  # the Jennrich fallback, and the independence check
        est = mv.spectral(bands, 10, seed=0)
    assert any("not conditionally independent given the 10 estimated classes" in str(w.message) for w in record)
    assert not est.diagnostics["independence_holds"]
