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
        est = gmm.spectral(sample(np.random.default_rng(n), weights, loc, scale, n), 3, common_scale=False, seed=0,
                           noise="isotropic")  # Thm 3.3's M1' correction: consistent for differing variances
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


@pytest.mark.parametrize("method", ["tpm", "svtd"])
def test_axis_aligned_at_extreme_scales_equals_the_unscaled_fit_mapped_back(method):
    """The fit runs on the data over their largest magnitude: at 1e-150 and 1e150 (whose cubes underflow or
    overflow) the estimate is the unscaled one with loc, scale and the coordinate variances scaled back."""
    rng = np.random.default_rng(3)
    weights, loc = mixture(rng, 3, 12, spread=2.0)
    x = sample(rng, weights, loc, rng.uniform(0.5, 1.5, size=(3, 12)), 1500)
    plain = gmm.spectral_axis_aligned(x, 3, seed=0, method=method)
    for s in (1e-150, 1.0, 1e150):
        scaled = gmm.spectral_axis_aligned(x * s, 3, seed=0, method=method)
        # the standardized data differ from the unscaled ones by a rounding per entry: 1e-8 is round-off
        np.testing.assert_allclose(scaled.params["weights"], plain.params["weights"], rtol=1e-8)
        np.testing.assert_allclose(scaled.params["loc"] / s, plain.params["loc"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(scaled.params["scale"] / s, plain.params["scale"], rtol=1e-8)
        np.testing.assert_allclose(scaled.diagnostics["coordinate_variances"] / s**2,
                                   plain.diagnostics["coordinate_variances"], rtol=1e-7, atol=1e-10)


def test_bad_input():
    x = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match=r"'k' argument of gmm.spectral must be at most 10 when x has fewer"):
        gmm.spectral(x, 11)
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


# real-data paths: centred data, covariance kinds, refine --------------------------------------------------------
def test_centred_data_need_no_shift_and_never_refuse():
    # Centred means are linearly DEPENDENT (they average to 0); the appended constant coordinate makes the moment
    # problem identifiable anyway. N = 20000 well-separated points: means within 0.15 (several sigma of the noise).
    rng = np.random.default_rng(6)
    weights, loc = np.full(3, 1 / 3), np.array([[4.0, 0, 0, 0], [-4.0, 0, 0, 0], [0, 4.0, 0, 0]])
    x = sample(rng, weights, loc, 1.0, 20_000)
    x = x - x.mean(axis=0)
    est = gmm.spectral(x, 3, seed=0)
    err, r, c = loc_error(est, loc - (weights @ loc))
    assert err < 0.15, err
    assert est.diagnostics["covariance_rank"] == 4 and est.diagnostics["sign_flips"] >= 0
    np.testing.assert_allclose(est.diagnostics["constant_coordinate_ratio"], 1.0, atol=0.1)


def test_diag_covariance_and_assign_steps():
    rng = np.random.default_rng(7)
    k, d = 3, 6
    weights, loc = mixture(rng, k, d)
    sd = rng.uniform(0.5, 1.5, size=(k, d))
    x = sample(rng, weights, loc, sd, 20_000)
    est = gmm.spectral(x, k, covariance="diag", assign_steps=3, seed=0)
    assert est.params["scale"].shape == (k, d) and est.diagnostics["assign_steps"] == 3
    err, r, c = loc_error(est, loc)
    # three EM steps from the moment estimate on separated clusters: per-coordinate sd within 0.1 (N = 20000)
    assert err < 0.1, err
    assert np.abs(est.params["scale"][r] - sd[c]).max() < 0.1
    init = est.init_params(gmm.model, 2, jax.random.PRNGKey(0), model_args=(x[:30],),
                           model_kwargs={"k": k, "covariance": "diag"})
    assert init["scale"].shape == (2, k, d)


def test_factor_noise_convergence_is_reported():
    from sklearn.datasets import load_iris, load_wine

    def standardized(x):
        return (x - x.mean(axis=0)) / x.std(axis=0)

    # wine (d = 13, k = 3): the principal-axis iterations meet their tolerance (24 steps)
    wine = gmm.spectral(standardized(load_wine().data), 3, seed=0).diagnostics
    assert wine["factor_converged"] and wine["factor_iterations"] < 50
    assert wine["factor_identified"]
    # iris (d = 4, k = 3: a rank-2 + diagonal covariance is not identified, (4 - 2)^2 < 4 + 2): the factor
    # iterations would drift (two noise variances reach the floor after about 500 steps); the iterations' start
    # is kept, for both covariance kinds, and the diagnostics say so
    x = standardized(load_iris().data)
    sigma2 = np.sort(np.linalg.eigvalsh(np.cov(x.T, bias=True)))[:2].mean()
    for covariance in ("spherical", "diag"):
        iris = gmm.spectral(x, 3, covariance=covariance, seed=0)
        assert not iris.diagnostics["factor_identified"]
        assert iris.diagnostics["factor_converged"] and iris.diagnostics["factor_iterations"] == 0
        np.testing.assert_allclose(iris.params["scale"], np.sqrt(sigma2), rtol=1e-10)  # the shared noise


def test_constant_and_duplicated_columns_do_not_bias_the_noise():
    rng = np.random.default_rng(8)
    weights, loc = mixture(rng, 2, 4)
    x = sample(rng, weights, loc, 1.0, 20_000)
    padded = np.hstack([x, np.full((x.shape[0], 2), 5.0), x[:, :2]])  # two constant and two duplicated columns
    est = gmm.spectral(padded, 2, seed=0)
    assert est.diagnostics["constant_columns"] == 2 and est.diagnostics["covariance_rank"] == 4
    # the zero eigenvalues of constant/duplicated columns are left out: sigma^2 = 1 within sampling error
    # (duplicated columns double the noise of 2 coordinates in the covariance: 1.5 on average over them)
    assert 0.8 < est.diagnostics["sigma2_bar"] < 1.6
    with pytest.raises(ValueError, match="rank >= k = 5"):
        gmm.spectral(padded, 5)


def test_nan_rows_are_named():
    x = np.random.default_rng(0).normal(size=(20, 4))
    x[3, 1] = np.nan
    x[11, 0] = -np.inf
    with pytest.raises(ValueError, match=r"2 row\(s\): row 3, 11"):
        gmm.spectral(x, 2)
    with pytest.raises(ValueError, match="covariance"):
        gmm.spectral(x[[0, 1]] * 0 + 1, 1, covariance="full")


@pytest.mark.parametrize("covariance", ["common", "spherical", "diag"])
def test_refine_is_monotone_and_matches_sklearn_one_step(covariance):
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    rng = np.random.default_rng(9)
    weights, loc = mixture(rng, 3, 4, spread=1.5)
    x = sample(rng, weights, loc, 1.0, 300)
    est = gmm.spectral(x, 3, covariance=covariance, seed=0)
    result = gmm.refine(x, est, max_iter=200, tol=1e-8, restarts=0)
    trace = result.log_likelihood
    assert result.converged and result.diagnostics["decreases"] == 0
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1]))  # EM never lowers the likelihood (round-off)
    assert result.estimate.params["scale"].shape == est.params["scale"].shape
    # one EM step equals scikit-learn's (same E/M formulas); "common" has no sklearn analogue
    if covariance != "common":
        var = np.broadcast_to(np.asarray(est.params["scale"]).reshape(3, -1) ** 2, (3, 4))
        precisions = 1 / (var[:, 0] if covariance == "spherical" else var)
        # reg is relative to the data's mean variance (scale-free); scikit-learn's reg_covar is absolute
        sk = GaussianMixture(3, covariance_type=covariance, weights_init=est.params["weights"],
                             means_init=est.params["loc"], precisions_init=precisions, max_iter=1, tol=0,
                             reg_covar=1e-6 * float(np.mean(np.var(x, axis=0))))
        with pytest.warns(ConvergenceWarning):
            sk.fit(x)
        with pytest.warns(RuntimeWarning, match="did not converge"):
            one = gmm.refine(x, est, max_iter=1, tol=1e-12, restarts=0, split_merge=0)
        np.testing.assert_allclose(one.params["loc"], sk.means_, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(one.params["weights"], sk.weights_, rtol=1e-8)
        sk_scale = np.sqrt(sk.covariances_)
        np.testing.assert_allclose(one.params["scale"], sk_scale, rtol=1e-8)
        np.testing.assert_allclose(one.mean_log_likelihood, sk.score(x), rtol=1e-10)


def test_fewer_dimensions_than_components_use_the_lifted_moments():
    """d < k: the one-dimensional method of moments on the principal axis (Hermite-corrected moments of the
    lifted features [1, t, t^2, ...], their Hankel matrix singular at the common variance) instead of a
    refusal; consistent (the error shrinks with N) and k="auto" finds the three clusters of 1-D data."""
    loc, weights = np.array([-4.0, 0.0, 5.0]), np.array([0.3, 0.5, 0.2])
    errors = []
    for n, seed in [(2_000, 0), (200_000, 1)]:
        rng = np.random.default_rng(seed)
        x = (loc[rng.choice(3, n, p=weights)] + rng.standard_normal(n))[:, None]
        est = gmm.spectral(x, 3)
        order = np.argsort(est.params["loc"][:, 0])
        errors.append(max(np.abs(est.params["loc"][order, 0] - loc).max(), np.abs(est.params["weights"][order]
                                                                                   - weights).max(),
                          abs(float(est.params["scale"]) - 1.0)))
        assert est.diagnostics["lifted"] and est.diagnostics["lifted_imaginary"] < 1e-6
    # 0.08 at N = 2,000 and 0.007 at N = 200,000 (measured): moment errors shrink like 1 / sqrt(N)
    assert errors[0] < 0.2 and errors[1] < errors[0] / 3
    auto = gmm.spectral(x[:5_000], "auto")
    assert auto.k == 3 and auto.diagnostics["k_auto/candidates"].max() == 10
    # more than one dimension: means off the principal axis come from a linear solve
    rng = np.random.default_rng(2)
    means = np.array([[0.0, 0.0], [6.0, 1.0], [12.0, -1.0], [18.0, 0.5]])
    x2 = means[rng.choice(4, 100_000)] + 0.5 * rng.standard_normal((100_000, 2))
    est = gmm.spectral(x2, 4, covariance="spherical")
    order = np.argsort(est.params["loc"][:, 0])
    assert np.abs(est.params["loc"][order] - means).max() < 0.05 and est.params["scale"].shape == (4,)  # 0.01 measured
