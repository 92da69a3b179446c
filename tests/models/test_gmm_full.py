"""Tests for full-covariance Gaussian mixtures: gmm.refine(covariance="full") and the site mappings of
gmm.lkj_sites / gmm.scale_tril_sites."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro.distributions import constraints
from numpyro.distributions.transforms import biject_to
from specinit import examples
from specinit.estimate import SpectralEstimate
from specinit.models import gmm
from specinit.warmstart import init_params

from tests.conftest import best_permutation

WEIGHTS = np.array([0.5, 0.3, 0.2])

#: Per dimension: well-separated means, per-coordinate standard deviations and strong correlations.
TRUTH = {
    2: (np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]]), np.array([[1.0, 0.5], [0.7, 1.2], [1.5, 0.6]]),
        [[[1, 0.9], [0.9, 1]], [[1, -0.85], [-0.85, 1]], [[1, 0.6], [0.6, 1]]]),
    3: (np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 3.0]]),
        np.array([[1.0, 0.5, 1.5], [0.7, 1.2, 0.6], [1.0, 1.0, 0.4]]),
        [[[1, 0.9, 0.5], [0.9, 1, 0.6], [0.5, 0.6, 1]], [[1, -0.8, 0], [-0.8, 1, 0.3], [0, 0.3, 1]],
         [[1, 0.7, -0.6], [0.7, 1, -0.5], [-0.6, -0.5, 1]]]),
}


def truth(d):
    loc, sd, corr = TRUTH[d]
    return loc, sd[:, :, None] * np.asarray(corr, dtype=float) * sd[:, None, :]


def draw(rng, loc, covariance, n):
    h = rng.choice(len(WEIGHTS), size=n, p=WEIGHTS)
    return loc[h] + np.einsum("nij,nj->ni", np.linalg.cholesky(covariance)[h], rng.standard_normal((n, loc.shape[1])))


def iris():
    from sklearn.datasets import load_iris

    x = load_iris().data
    return (x - x.mean(axis=0)) / x.std(axis=0)


def full_fit(x, **options):
    return gmm.refine(x, gmm.spectral(x, 3, covariance="diag", seed=0), covariance="full", **options)


@pytest.mark.parametrize("d", [2, 3])
def test_full_em_recovers_correlated_covariances_and_the_error_falls_with_n(d):
    loc, covariance = truth(d)
    errors = []
    for n in (1000, 16000):
        result = full_fit(draw(np.random.default_rng(d), loc, covariance, n))
        assert result.converged and result.diagnostics["decreases"] == 0
        perm = best_permutation(loc, result.params["loc"], "l2")
        got = result.params["covariance"][perm]
        errors.append(max(np.linalg.norm(got[i] - covariance[i]) / np.linalg.norm(covariance[i]) for i in range(3)))
        np.testing.assert_allclose(result.params["weights"][perm], WEIGHTS, atol=0.03)
        np.testing.assert_allclose(result.params["scale"], np.sqrt(np.diagonal(result.params["covariance"], axis1=1,
                                                                               axis2=2)), rtol=1e-12)
    # relative Frobenius error of the worst component: measured 0.089 -> 0.015 (d = 2), 0.093 -> 0.029 (d = 3)
    assert errors[0] < 0.15 and errors[1] < 0.05
    assert errors[1] < 0.6 * errors[0]


def test_full_em_equals_sklearn_from_the_same_start_and_reaches_its_optimum_on_iris():
    from sklearn.mixture import GaussianMixture

    x = iris()
    start = gmm.spectral(x, 3, covariance="diag", seed=0)
    reg = 1e-6 * float(np.mean(np.var(x, axis=0)))  # reg is relative to the data's variance, reg_covar absolute
    precisions = np.eye(4) / start.params["scale"][:, None, :] ** 2  # the start's diagonal matrices, inverted
    sk = GaussianMixture(3, covariance_type="full", weights_init=start.params["weights"],
                         means_init=start.params["loc"], precisions_init=precisions, max_iter=2000, tol=1e-12,
                         reg_covar=reg).fit(x)
    ours = gmm.refine(x, start, covariance="full", split_merge=0, tol=1e-12, max_iter=2000)
    assert ours.converged and ours.diagnostics["decreases"] == 0
    perm = best_permutation(sk.means_, ours.params["loc"], "l2")
    np.testing.assert_allclose(ours.mean_log_likelihood, sk.score(x), atol=1e-9)
    np.testing.assert_allclose(ours.params["loc"][perm], sk.means_, atol=1e-6)
    np.testing.assert_allclose(ours.params["covariance"][perm], sk.covariances_, atol=1e-6)
    # the scoring faces read the full covariance: scikit-learn's per-row log-likelihood and posteriors at its fit
    fitted = {"weights": sk.weights_, "loc": sk.means_, "covariance": sk.covariances_,
              "scale": np.sqrt(np.diagonal(sk.covariances_, axis1=1, axis2=2))}
    np.testing.assert_allclose(gmm.log_likelihood(x, fitted), sk.score_samples(x), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(gmm.predict(x, fitted)[0], sk.predict_proba(x), atol=1e-10)
    # the default refine (split-merge moves) from the spectral start is at least as good as scikit-learn's k-means
    # starts: measured -1.936874 against -1.936926 (best of 5 starts)
    default = full_fit(x)
    best_sklearn = GaussianMixture(3, covariance_type="full", n_init=5, random_state=0).fit(x).score(x)
    assert default.mean_log_likelihood >= best_sklearn - 1e-9


def test_restarts_and_acceleration_read_perturbed_covariances():
    """Perturbed restarts and SQUAREM extrapolations move a covariance out of the positive definite cone; the
    E-step reads it repaired, and every kept iterate is an M-step's (positive definite)."""
    loc, covariance = truth(2)
    x = draw(np.random.default_rng(1), loc, covariance, 900)
    plain = full_fit(x, restarts=0)
    for options in ({"restarts": 6}, {"accelerate": True}):
        result = full_fit(x, **options)
        assert np.all(np.isfinite(result.log_likelihood)) and result.diagnostics["decreases"] == 0
        assert np.all(np.linalg.eigvalsh(result.params["covariance"]) > 0)
        assert result.mean_log_likelihood >= plain.mean_log_likelihood - 1e-6
    non_positive = np.array([[[1.0, 2.0], [2.0, 1.0]], [[-1.0, 0.0], [0.0, 2.0]]])
    tril = gmm._cholesky(non_positive, 1e-6)
    assert np.all(np.isfinite(tril)) and np.all(np.diagonal(tril, axis1=1, axis2=2) > 0)
    # eigenvalues 3, -1 and -1, 2 read as their magnitudes
    np.testing.assert_allclose(tril @ tril.transpose(0, 2, 1), [[[2.0, 1.0], [1.0, 2.0]], np.diag([1.0, 2.0])],
                               atol=1e-12)


def test_sites_save_load_free_parameters_and_kind_changes(tmp_path):
    loc, covariance = truth(3)
    x = draw(np.random.default_rng(3), loc, covariance, 1500)
    refined = full_fit(x).estimate
    site = refined.sites["covariance"]
    assert site.axes == (0,) and site.dims == ("components", "dim", "dim2")
    assert refined.params["covariance"].shape == (3, 3, 3) and refined.params["scale"].shape == (3, 3)
    np.testing.assert_array_equal(refined.params["covariance"], refined.params["covariance"].transpose(0, 2, 1))
    loaded = SpectralEstimate.load(refined.save(tmp_path / "full.npz"))
    assert loaded.sites == refined.sites and set(loaded.params) == set(refined.params)
    for name, value in refined.params.items():
        np.testing.assert_array_equal(loaded.params[name], value)
    np.testing.assert_array_equal(gmm.log_likelihood(x, loaded), gmm.log_likelihood(x, refined))
    assert gmm.FAMILY.n_free_parameters(refined) == 2 + 3 * 3 + 3 * 6  # weights, means, lower triangles
    # an estimate with "covariance" refines as full by default; another kind drops it
    assert "covariance" in gmm.refine(x, refined, max_iter=5).params
    diag = gmm.refine(x, refined, covariance="diag", max_iter=5)
    assert "covariance" not in diag.params and diag.params["scale"].shape == (3, 3)


def _check_helpers(estimate, covariance):
    params = {name: np.array(value) for name, value in estimate.params.items()}
    lkj, tril_sites = gmm.lkj_sites(), gmm.scale_tril_sites(loc="mu", scale_tril="L", weights=None)
    assert lkj["locs"] == "loc" and lkj["weights"] == "weights" and set(tril_sites) == {"mu", "L"}
    scales, corr, tril = lkj["scales"](params), lkj["corr"](params), tril_sites["L"](params)
    assert bool(jnp.all(constraints.corr_cholesky.check(jnp.asarray(corr))))
    assert bool(jnp.all(constraints.lower_cholesky.check(jnp.asarray(tril))))
    assert bool(jnp.all(constraints.positive.check(jnp.asarray(scales))))
    rebuilt = scales[:, :, None] * corr
    np.testing.assert_allclose(rebuilt @ rebuilt.transpose(0, 2, 1), covariance, rtol=0, atol=1e-10)
    np.testing.assert_allclose(tril @ tril.transpose(0, 2, 1), covariance, rtol=0, atol=1e-10)
    return corr


def test_site_helpers_lie_in_the_supports_and_reproduce_the_covariance():
    loc, covariance = truth(3)
    x = draw(np.random.default_rng(4), loc, covariance, 1500)
    full = full_fit(x).estimate
    _check_helpers(full, full.params["covariance"])
    # estimates without "covariance": diagonal matrices, identity correlations
    diagonal = gmm.spectral(x, 3, covariance="diag", seed=0)
    corr = _check_helpers(diagonal, np.eye(3) * diagonal.params["scale"][:, None, :] ** 2)
    np.testing.assert_array_equal(corr, np.broadcast_to(np.eye(3), (3, 3, 3)))
    common = gmm.spectral(x, 3, seed=0)
    _check_helpers(common, np.broadcast_to(np.eye(3) * common.params["scale"] ** 2, (3, 3, 3)))


def test_bad_covariance_values_and_names_are_refused():
    loc, covariance = truth(2)
    x = draw(np.random.default_rng(5), loc, covariance, 300)
    start = gmm.spectral(x, 3, covariance="diag", seed=0)
    with pytest.raises(ValueError, match=r"'covariance' argument of gmm.refine must be one of 'common', 'spherical', "
                                         r"'diag', 'full'; got 'dense'"):
        gmm.refine(x, start, covariance="dense")
    with pytest.raises(ValueError, match=r"'covariance' argument of gmm.spectral .*gmm.refine\(x, estimate, "
                                         r"covariance='full'\)"):
        gmm.spectral(x, 3, covariance="full")
    not_definite = {**start.params, "covariance": np.array([[[1.0, 2.0], [2.0, 1.0]]] * 3)}
    with pytest.raises(ValueError, match=r"'estimate' argument of gmm.refine .*symmetric positive definite.*"
                                         r"components \[0, 1, 2\]"):
        gmm.refine(x, not_definite, covariance="full")
    with pytest.raises(ValueError, match=r"'estimate' argument of gmm.log_likelihood .*shape \(3, 2, 2\)"):
        gmm.log_likelihood(x, {**start.params, "covariance": np.ones((3, 2, 3))})
    with pytest.raises(TypeError, match="'corr' argument of gmm.lkj_sites must be a model site name"):
        gmm.lkj_sites(corr=3)


def test_init_params_on_the_lkj_model_with_iris():
    """init_params checks that the potential energy and its gradient are finite at the start (it raises if not);
    the unconstrained start maps back to the estimate's correlation factors."""
    x = iris()
    estimate = full_fit(x).estimate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # NumPyro's notes on enumeration
        start = init_params(estimate, examples.lkj_mixture, 1, jax.random.PRNGKey(0), sites=gmm.lkj_sites(),
                            model_args=(jnp.asarray(x),))
    assert set(start) == {"weights", "locs", "scales", "corr"}
    corr = np.asarray(biject_to(constraints.corr_cholesky)(start["corr"]))
    np.testing.assert_allclose(corr, gmm.lkj_sites()["corr"](estimate.params), atol=1e-5)
    np.testing.assert_allclose(np.asarray(start["locs"]), estimate.params["loc"], atol=1e-5)
