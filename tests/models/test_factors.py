"""Independent-factor models: exact recovery, planted recovery shrinking with N, bad input, NumPyro warm start."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import gammaln
from specinit.models import factors
from specinit.distributions.continuous import UnitExponentialPower

from specinit.warmstart import latent_sites
from tests.conftest import best_permutation

_K, _D = 3, 6
_RNG = np.random.default_rng(0)
_LOADINGS = _RNG.normal(size=(_K, _D))
_SHAPE = np.array([1.0, 4.0, 9.0])          # skewness 2, 1, 2/3
_POWER = np.array([0.8, 1.2, 8.0])          # excess kurtosis ~5.6, ~1.7, ~-1.1 (mixed signs)
_LOC = np.linspace(-1.0, 2.0, _D)


def _sample(loadings, cumulant, params, n, noise, seed, loc=None):
    """Planted data: unit-variance Gamma (skew) or exponential-power (kurtosis) factors, isotropic noise."""
    rng = np.random.default_rng(seed)
    k = loadings.shape[0]
    if cumulant == "skew":
        h = rng.gamma(params, 1 / np.sqrt(params), size=(n, k)) - np.sqrt(params)
    else:
        scale = np.exp(0.5 * (gammaln(1 / params) - gammaln(3 / params)))
        h = rng.choice([-1.0, 1.0], size=(n, k)) * scale * rng.gamma(1 / params, size=(n, k)) ** (1 / params)
    x = h @ loadings + noise * rng.normal(size=(n, loadings.shape[1]))
    return x if loc is None else x + loc


def _kurtosis_sign(loadings):
    """The documented sign rule for kurtotic factors: the entry of largest magnitude of each row is positive."""
    biggest = np.argmax(np.abs(loadings), axis=1)
    return loadings * np.sign(loadings[np.arange(len(loadings)), biggest])[:, None]


def _matched(truth, estimate):
    perm = best_permutation(truth, estimate.params["loadings"])
    return {name: (value[perm] if name in ("loadings", "shape", "power") else value)
            for name, value in estimate.params.items()}, perm


# --- exact recovery ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["tpm", "svtd", "eca", "als"])
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_exact_recovery_skew(method, noise):
    moments = factors.population_moments(_LOADINGS, cumulant="skew", shape=_SHAPE, noise=noise, loc=_LOC)
    est = factors.spectral_from_moments(moments, _K, method=method, seed=0)
    got, perm = _matched(_LOADINGS, est)
    # exact moments: only round-off separates the estimate from the truth
    np.testing.assert_allclose(got["loadings"], _LOADINGS, atol=1e-8)
    np.testing.assert_allclose(got["shape"], _SHAPE, rtol=1e-8)
    np.testing.assert_allclose(est.diagnostics["skewness"][perm], 2 / np.sqrt(_SHAPE), atol=1e-8)
    np.testing.assert_allclose(got["loc"], _LOC, atol=1e-12)
    if noise:
        np.testing.assert_allclose(got["noise"], noise, atol=1e-8)
    assert est.facts == factors.FACTS and est.model == "factors"


@pytest.mark.parametrize("method", ["tpm", "eca"])
@pytest.mark.parametrize("noise", [0.0, 0.5])
def test_exact_recovery_kurtosis_with_sign_rule(method, noise):
    moments = factors.population_moments(_LOADINGS, cumulant="kurtosis", power=_POWER, noise=noise)
    est = factors.spectral_from_moments(moments, _K, method=method, seed=0)
    truth = _kurtosis_sign(_LOADINGS)
    got, perm = _matched(truth, est)
    np.testing.assert_allclose(got["loadings"], truth, atol=1e-8)
    np.testing.assert_allclose(got["power"], _POWER, rtol=1e-8)
    np.testing.assert_allclose(est.diagnostics["excess_kurtosis"][perm], factors.excess_kurtosis_of_power(_POWER), atol=1e-8)
    assert (est.diagnostics["excess_kurtosis"] < 0).sum() == 1  # the sub-Gaussian factor keeps its sign
    assert est.facts == factors.FACTS_KURTOSIS


def test_d_equal_k_and_noise_none_are_noise_free():
    square = _LOADINGS[:, :_K] + 3 * np.eye(_K)
    moments = factors.population_moments(square, cumulant="skew", shape=_SHAPE)
    est = factors.spectral_from_moments(moments, _K)
    got, _ = _matched(square, est)
    np.testing.assert_allclose(got["loadings"], square, atol=1e-8)
    assert est.diagnostics["noise_variance"] == 0.0 and est.params["noise"] > 0  # floored site value
    noisy = factors.population_moments(_LOADINGS, cumulant="skew", shape=_SHAPE, noise=0.5)
    # ignoring real noise biases the loadings: the option is honoured, not second-guessed
    biased = factors.spectral_from_moments(noisy, _K, noise="none")
    assert biased.diagnostics["noise_variance"] == 0.0
    assert np.max(np.abs(_matched(_LOADINGS, biased)[0]["loadings"] - _LOADINGS)) > 1e-3


def test_gaussian_factor_in_population_is_not_identifiable():
    moments = factors.population_moments(_LOADINGS, cumulant="kurtosis", power=np.array([1.0, 2.0, 6.0]))
    with pytest.raises(ValueError, match="Gaussian factors are not identifiable"):
        factors.spectral_from_moments(moments, _K)


# --- planted data -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cumulant, params", [("skew", _SHAPE), ("kurtosis", _POWER)])
def test_planted_error_shrinks_with_n(cumulant, params):
    truth = _LOADINGS if cumulant == "skew" else _kurtosis_sign(_LOADINGS)
    target = 2 / np.sqrt(params) if cumulant == "skew" else factors.excess_kurtosis_of_power(params)
    stat = "skewness" if cumulant == "skew" else "excess_kurtosis"
    errors, stat_errors = [], []
    for n in (2_000, 200_000):
        per_seed, per_seed_stat = [], []
        for seed in (1, 2):
            x = _sample(_LOADINGS, cumulant, params, n, 0.3, seed, loc=_LOC)
            est = factors.spectral(x, _K, cumulant, seed=0, scores=False)
            got, perm = _matched(truth, est)
            per_seed.append(factors.amari_index(_LOADINGS, est.params["loadings"]))
            # kurtotic factors: compare up to sign (the largest-entry sign rule is tested on exact moments; on data
            # two entries of nearly equal magnitude can flip it)
            signs = np.sign(np.sum(got["loadings"] * truth, axis=1))[:, None]
            per_seed.append(np.max(np.abs(signs * got["loadings"] - truth)) / np.max(np.abs(truth)))
            per_seed_stat.append(np.max(np.abs(est.diagnostics[stat][perm] - target) / np.abs(target)))
        errors.append(np.mean(per_seed))
        stat_errors.append(np.mean(per_seed_stat))
    # sampling error ~ N^(-1/2): a factor 10 from 2e3 to 2e5; require 3 (heavy-tailed 4th moments converge slowly)
    assert errors[1] < errors[0] / 3 and errors[1] < 0.05, errors
    assert stat_errors[1] < stat_errors[0] and stat_errors[1] < 0.25, stat_errors


def test_sign_convention_positive_skewness():
    x = _sample(_LOADINGS, "skew", _SHAPE, 20_000, 0.1, seed=3)
    est = factors.spectral(x, _K, "skew", scores=False)
    flipped = factors.spectral(-x, _K, "skew", scores=False)
    # -x has negatively skewed factors along o_i, i.e. positively skewed ones along -o_i
    np.testing.assert_allclose(flipped.params["loadings"], -est.params["loadings"], atol=1e-8)
    assert np.all(est.diagnostics["skewness"] > 0)
    got, _ = _matched(_LOADINGS, est)
    assert np.max(np.abs(got["loadings"] - _LOADINGS)) < 0.2


# --- bad input --------------------------------------------------------------------------------------------------------

def test_bad_input():
    x = _sample(_LOADINGS, "skew", _SHAPE, 500, 0.3, seed=4)
    with pytest.raises(ValueError, match="'k' argument of factors.spectral must be at most"):
        factors.spectral(x, _D + 1)
    with pytest.raises(ValueError, match="'k' argument"):
        factors.spectral_from_moments(factors.population_moments(_LOADINGS, shape=_SHAPE), _D + 1)
    const = x.copy()
    const[:, 2] = 7.0
    with pytest.raises(ValueError, match=r"constant columns \[2\]"):
        factors.spectral(const, _K)
    nan = x.copy()
    nan[[5, 9], 1] = np.nan
    with pytest.raises(ValueError, match=r"2 row\(s\): row 5, 9"):
        factors.spectral(nan, _K)
    with pytest.raises(ValueError, match="'cumulant' argument"):
        factors.spectral(x, _K, "variance")
    with pytest.raises(ValueError, match="'method' argument"):
        factors.spectral(x, _K, "kurtosis", method="svtd")
    with pytest.raises(TypeError, match="decompose_options"):
        factors.spectral(x, _K, decompose_options={"bogus": 1})
    with pytest.raises(TypeError, match="'x' argument"):
        factors.spectral("data", _K)
    with pytest.raises(ValueError, match="'shape' argument"):
        factors.population_moments(_LOADINGS, cumulant="skew")
    with pytest.raises(ValueError, match="'loadings' argument"):
        factors.population_moments(_LOADINGS.T, shape=np.ones(_D))
    estimate = factors.spectral(x, _K, seed=0)
    with pytest.raises(ValueError, match="'num_steps' argument of factors.refine must be an integer >= 1; got 0"):
        factors.refine(x, estimate, num_steps=0)
    with pytest.raises(ValueError, match="'lr' argument of factors.refine must be a finite number > 0; got -0.1"):
        factors.refine(x, estimate, lr=-0.1)
    with pytest.raises(TypeError, match="'seed' argument of factors.refine must be an integer >= 0; got 1.5"):
        factors.refine(x, estimate, seed=1.5)
    with pytest.raises(ValueError, match="'method' argument"):
        factors.refine(x, estimate, method="em")


@pytest.mark.parametrize("cumulant", ["skew", "kurtosis"])
def test_gaussian_factors_warn_not_identifiable(cumulant):
    x = np.random.default_rng(5).normal(size=(3_000, _K)) @ _LOADINGS
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = factors.spectral(x, _K, cumulant, scores=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert any("not identifiable" in m for m in messages), messages
    assert est.diagnostics["gaussian_like"].any()


def test_no_warning_for_clearly_non_gaussian_factors():
    x = _sample(_LOADINGS, "skew", _SHAPE, 5_000, 0.3, seed=6)
    est = factors.spectral(x, _K)  # filterwarnings=error: any warning fails the test
    assert not est.diagnostics["gaussian_like"].any()


# --- the exponential-power family and helpers ------------------------------------------------------------------------

def test_exponential_power_family():
    np.testing.assert_allclose(factors.excess_kurtosis_of_power([1.0, 2.0]), [3.0, 0.0], atol=1e-12)
    kappa = np.array([-1.1, -0.5, 0.0, 0.7, 3.0, 20.0])
    np.testing.assert_allclose(factors.excess_kurtosis_of_power(factors.power_of_excess_kurtosis(kappa)), kappa, atol=1e-10)
    assert factors.power_of_excess_kurtosis(-1.5) == 100.0  # below the family's limit (uniform): clipped
    dist = UnitExponentialPower(jax.numpy.array(0.8))
    density = lambda t: float(np.exp(dist.log_prob(t)))  # noqa: E731
    # a proper unit-variance density (quadrature to 1e-6)
    assert abs(2 * quad(density, 0, np.inf)[0] - 1) < 1e-6  # symmetric, with a cusp at 0
    assert abs(2 * quad(lambda t: t * t * density(t), 0, np.inf)[0] - 1) < 1e-6
    draws = np.asarray(dist.sample(jax.random.PRNGKey(0), (20_000,)))
    assert abs(draws.var() - 1) < 0.1  # 20k draws of a heavy-tailed variable: sd of the variance ~0.04


def test_amari_index():
    rng = np.random.default_rng(7)
    A = rng.normal(size=(4, 9))
    scaled = A[[2, 0, 3, 1]] * np.array([[-2.0], [0.5], [3.0], [-1.0]])
    assert factors.amari_index(A, scaled) < 1e-12
    assert factors.amari_index(A, rng.normal(size=(4, 9))) > 0.1
    with pytest.raises(ValueError, match="estimated_loadings"):
        factors.amari_index(A, A[:3])


# --- NumPyro ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cumulant, params", [("skew", _SHAPE), ("kurtosis", _POWER)])
def test_warm_start_has_finite_potential(cumulant, params):
    n = 300 if cumulant == "skew" else 1_000  # kurtosis needs more data to stand out of the sampling noise
    x = _sample(_LOADINGS, cumulant, params, n, 0.3, seed=8, loc=_LOC)
    est = factors.spectral(x, _K, cumulant)
    kwargs = {"x": x, "k": _K, "cumulant": cumulant}
    shapes = latent_sites(factors.model, model_kwargs=kwargs)
    assert {name: value.shape for name, value in est.params.items()} == {name: tuple(s) for name, s in shapes.items()}
    if cumulant == "skew":
        assert np.all(est.params["factors"] > 0)  # Gamma variables strictly inside their support
    # init_params raises unless the potential energy and its gradient are finite at every chain's start
    init = est.init_params(factors.model, 2, jax.random.PRNGKey(0), spread=0.01, model_kwargs=kwargs)
    assert init["loadings"].shape == (2, _K, _D) and init["factors"].shape == (2, n, _K)


def test_model_generates_data():
    from numpyro.infer import Predictive

    draws = Predictive(factors.model, num_samples=2)(jax.random.PRNGKey(0), k=2, dim=4, n=5, cumulant="kurtosis")
    assert draws["x"].shape == (2, 5, 4) and draws["factors"].shape == (2, 5, 2) and np.all(np.isfinite(draws["x"]))
    with pytest.raises(ValueError, match="'n' argument"):
        factors.model(k=2)
