"""Warm starts on models written the way NumPyro's examples write them: the user's site names, enumerated sites.

The models (:mod:`specinit.examples`) are the user's, not the library's: site names of their own (``locs``,
``probs_x``), discrete assignments marked for enumeration, an HMM written with ``scan`` and a mask for sequences of
unequal length.
"""

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
import scipy.stats as st
from numpyro import handlers
from numpyro.distributions.transforms import biject_to
from numpyro.infer import MCMC, NUTS, HMCGibbs, Predictive, initialize_model

from specinit import SpectralEstimate
from specinit.compare import compare_nuts, compare_svi
from specinit.examples import MIXTURE_SITES, enumerated_hmm, enumerated_mixture
from specinit.models import gmm, hmm
from specinit.pointwise import row_log_likelihood
from specinit.posterior import group, loo, to_inference_data
from specinit.warmstart import (Laplace, condition, init_params, init_strategy, inverse_mass_matrix, laplace,
                                latent_sites, map_sites)

K = 3
mixture = enumerated_mixture
letters_hmm = enumerated_hmm
MAPPING = MIXTURE_SITES


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    centres = np.array([[-4.0, 0.0, 0.0], [0.0, 4.0, 0.0], [4.0, 0.0, 1.0]])
    labels = rng.integers(0, K, 300)
    x = centres[labels] + rng.normal(size=(300, 3))
    return x, gmm.spectral(x, K, seed=0)


@pytest.fixture(scope="module")
def sequences():
    rng = np.random.default_rng(1)
    transition = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    emission = rng.dirichlet(np.full(6, 0.3), size=3)
    lengths = rng.integers(20, 41, size=30)
    padded = np.zeros((30, 40), dtype=np.int32)
    for row, length in enumerate(lengths):
        state = rng.integers(3)
        for t in range(length):
            padded[row, t] = rng.choice(6, p=emission[state])
            state = rng.choice(3, p=transition[state])
    seqs = [padded[row, :length] for row, length in enumerate(lengths)]
    return padded, lengths, hmm.spectral(seqs, 3, n_symbols=6, seed=0)


# --- the mapping ------------------------------------------------------------------------------------------------

def test_map_sites_renames_derives_and_carries_component_axes(blobs):
    _, est = blobs
    mapped = map_sites(est, MAPPING)
    assert sorted(mapped.params) == ["locs", "scale", "weights"]
    np.testing.assert_array_equal(mapped.params["locs"], est.params["loc"])
    assert mapped.params["scale"] == pytest.approx(np.sqrt(np.mean(est.params["scale"] ** 2)))
    assert mapped.sites["locs"].axes == est.sites["loc"].axes == (0,)
    assert mapped.sites["scale"].axes == () and mapped.match_site in ("locs", "weights")
    # a list keeps the estimate's own names; None is the estimate itself
    assert sorted(map_sites(est, ["weights", "loc"]).params) == ["loc", "weights"]
    assert map_sites(est) is est


@pytest.mark.parametrize("sites, message", [
    ({"weights": "weights", "locz": "loc", "scale": "scale"}, r"'sites'.*continuous latent sites \(\['locs', 'scale', 'weights'\]\).*\['locz'\], not among them"),
    ({"weights": "weights", "locs": "loc"}, r"'sites'.*covers every one.*no value for \['scale'\]"),
    ({"weights": "weights", "locs": "weights", "scale": "scale"}, r"'sites'.*model's shapes \('locs': \(3, 3\)\).*shape \(3,\) for 'locs'"),
    ({"weights": "weights", "locs": "loc", "scale": lambda p: -1.0}, r"'sites'.*inside each site's support.*'scale'"),
    ({"weights": "weights", "locs": "lox", "scale": "scale"}, r"'sites'.*estimate's parameters.*'locs': 'lox'"),
    ({"weights": "weights", "locs": "loc", "scale": lambda p: p["sigma"]}, r"'sites'.*raised KeyError"),
    ({"weights": "weights", "locs": "loc", "scale": lambda p: np.nan}, r"'sites'.*non-finite values for 'scale'"),
])
def test_mapping_errors_name_the_site(blobs, sites, message):
    x, est = blobs
    with pytest.raises(ValueError, match=message):
        init_params(est, mixture, 2, jax.random.PRNGKey(0), sites=sites, model_args=(x,))


def test_mapping_type_errors(blobs):
    x, est = blobs
    with pytest.raises(TypeError, match="'sites'"):
        map_sites(est, "loc")
    with pytest.raises(TypeError, match="'sites'.*'locs': 3"):
        map_sites(est, {"locs": 3})
    with pytest.raises(TypeError, match="'fallback'"):
        init_params(est, mixture, 2, jax.random.PRNGKey(0), sites=MAPPING, fallback="scale", model_args=(x,))


def test_nothing_is_left_to_numpyros_default_silently(blobs):
    x, est = blobs
    strategy = init_strategy(est, {"weights": "weights", "locs": "loc"})
    with pytest.raises(ValueError, match=r"'sites'.*covers the model's site 'scale'"):
        initialize_model(jax.random.PRNGKey(0), mixture, init_strategy=strategy, model_args=(x,))
    # named in fallback, the site starts from init_to_uniform; the others from the estimate
    strategy = init_strategy(est, {"weights": "weights", "locs": "loc"}, fallback=("scale",))
    z = initialize_model(jax.random.PRNGKey(0), mixture, init_strategy=strategy, model_args=(x,)).param_info.z
    np.testing.assert_allclose(np.asarray(z["locs"]), est.params["loc"], rtol=1e-5, atol=1e-6)
    assert -2 <= float(z["scale"]) <= 2  # init_to_uniform's interval in the unconstrained space
    with pytest.raises(ValueError, match=r"'fallback'.*\['sigma'\], not among them"):
        init_params(est, mixture, 2, jax.random.PRNGKey(0), sites=MAPPING, fallback=("sigma",), model_args=(x,))


def test_init_params_on_an_enumerated_mixture(blobs):
    x, est = blobs
    chains = est.init_params(mixture, 4, jax.random.PRNGKey(0), sites=MAPPING, model_args=(x,))
    # the enumerated assignment is left to NumPyro; every continuous site starts at the estimate
    assert sorted(chains) == ["locs", "scale", "weights"] == sorted(latent_sites(mixture, (x,)))
    np.testing.assert_allclose(np.asarray(chains["locs"][2]), est.params["loc"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.exp(np.asarray(chains["scale"])), MAPPING["scale"](est.params), rtol=1e-5)
    assert chains["weights"].shape == (4, K - 1)


def test_condition_follows_the_mapping_and_checks_names(blobs):
    x, est = blobs
    point = condition(est, mixture, {"weights": "weights", "locs": "loc", "scale": MAPPING["scale"]})
    draws = Predictive(point, num_samples=3)(jax.random.PRNGKey(0), x)
    assert draws["obs"].shape == (3, *x.shape)
    with pytest.raises(ValueError, match=r"'sites'.*latent sites of the model.*\['locz'\], not among them"):
        handlers.seed(condition(est, mixture, {"locz": "loc"}), 0)(x)
    with pytest.raises(ValueError, match=r"'sites'.*model's shapes \('locs': \(3, 3\)\)"):
        handlers.seed(condition(est, mixture, {"locs": "weights"}), 0)(x)


# --- spread and mass from the estimate's uncertainty ------------------------------------------------------------

def gaussian_means(y):
    mu = numpyro.sample("mu", dist.Normal(jnp.zeros(2), 10.0).to_event(1))
    with numpyro.plate("rows", y.shape[0]):
        numpyro.sample("y", dist.MultivariateNormal(mu, jnp.array([[1.0, 0.6], [0.6, 1.0]])), obs=y)


@pytest.fixture(scope="module")
def conjugate():
    y = np.random.default_rng(2).normal(size=(40, 2)) + np.array([1.0, -1.0])
    precision = 40 * np.linalg.inv(np.array([[1.0, 0.6], [0.6, 1.0]])) + np.eye(2) / 100
    est = SpectralEstimate("user", {"mu": y.mean(0)}, k=1)
    return y, est, np.linalg.inv(precision)


def test_laplace_is_the_exact_posterior_of_a_gaussian_model(conjugate):
    y, est, covariance = conjugate
    dense = laplace(est, gaussian_means, model_args=(y,))
    assert dense.dense and dense.sites == ("mu",)
    # the log posterior is quadratic: its Hessian is the posterior precision (float32 arithmetic: 1e-4)
    np.testing.assert_allclose(dense.covariance, covariance, rtol=1e-4)
    diagonal = laplace(est, gaussian_means, model_args=(y,), dense=False)
    np.testing.assert_allclose(diagonal.covariance, 1 / np.diag(np.linalg.inv(covariance)), rtol=1e-4)
    # no coordinate wider than max_variance
    capped = laplace(est, gaussian_means, model_args=(y,), max_variance=1e-3)
    assert np.all(np.linalg.eigvalsh(capped.covariance) <= 1e-3 * (1 + 1e-6))


@pytest.mark.parametrize("num", [400, 6400])
def test_laplace_spread_draws_from_the_covariance(conjugate, num):
    y, est, covariance = conjugate
    chains = init_params(est, gaussian_means, num, jax.random.PRNGKey(num), spread="laplace", model_args=(y,))
    draws = np.asarray(chains["mu"], dtype=np.float64)
    # sampling error of a covariance entry ~ sigma^2 * sqrt(2 / num): 5 standard errors
    tolerance = 5 * np.sqrt(2 / num) * covariance.diagonal().max()
    np.testing.assert_allclose(np.cov(draws.T), covariance, atol=tolerance)
    np.testing.assert_allclose(draws.mean(0), est.params["mu"], atol=5 * np.sqrt(covariance.diagonal().max() / num))


def test_inverse_mass_matrix_is_accepted_by_nuts(conjugate):
    y, est, covariance = conjugate
    matrix = inverse_mass_matrix(est, gaussian_means, model_args=(y,))
    np.testing.assert_allclose(matrix, covariance, rtol=1e-4)
    mcmc = MCMC(NUTS(gaussian_means, inverse_mass_matrix=matrix, dense_mass=matrix.ndim == 2, adapt_mass_matrix=False),
                num_warmup=100, num_samples=400, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), y, init_params=init_params(est, gaussian_means, 1, jax.random.PRNGKey(1),
                                                                 model_args=(y,)))
    # with the exact covariance as mass matrix, NUTS needs 1-3 leapfrog steps per draw
    draws = np.asarray(mcmc.get_samples()["mu"])
    np.testing.assert_allclose(np.cov(draws.T), covariance, rtol=0.35)


@pytest.fixture
def weights_by_gibbs():
    """NUTS on the mixture's ``locs`` and ``scale``, a (trivial) Gibbs step on ``weights``."""

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        return gibbs_sites

    return HMCGibbs(NUTS(mixture), gibbs_fn=gibbs_fn, gibbs_sites=["weights"])


def test_gibbs_composites_take_constrained_values_for_their_gibbs_sites(blobs, weights_by_gibbs):
    x, est = blobs
    chains = init_params(est, mixture, 2, jax.random.PRNGKey(0), sites=MAPPING, model_args=(x,),
                         kernel=weights_by_gibbs)
    np.testing.assert_allclose(np.asarray(chains["weights"][0]), est.params["weights"], rtol=1e-5)  # on the simplex
    np.testing.assert_allclose(np.exp(np.asarray(chains["scale"][0])), MAPPING["scale"](est.params), rtol=1e-5)


def test_laplace_spread_under_a_gibbs_composite_covers_the_hmc_block_only(blobs, weights_by_gibbs):
    x, est = blobs
    chains = init_params(est, mixture, 3, jax.random.PRNGKey(0), spread="laplace", sites=MAPPING, model_args=(x,),
                         kernel=weights_by_gibbs)
    # the Gibbs site is drawn exactly by the kernel's first step: every chain starts at the estimate
    np.testing.assert_allclose(np.asarray(chains["weights"]), np.broadcast_to(est.params["weights"], (3, 3)),
                               rtol=1e-5)
    # the HMC block's sites scatter by the Laplace Gaussian: three different starts
    locs = np.asarray(chains["locs"]).reshape(3, -1)
    assert np.all(np.abs(locs[1:] - locs[0]).max(axis=1) > 1e-4)


def recording(make):
    """A ``compare_nuts`` kernel factory that records the keyword arguments of every kernel it makes."""
    calls = []

    def factory(**kwargs):
        calls.append(kwargs)
        return make(**kwargs)

    return factory, calls


def test_compare_nuts_gives_nuts_the_laplace_mass_matrix(conjugate):
    y, est, covariance = conjugate
    factory, calls = recording(lambda **kwargs: NUTS(gaussian_means, **kwargs))
    result = compare_nuts(gaussian_means, est, (y,), kernel=factory, num_chains=2, num_warmup=20, num_samples=10)
    cold, warm, cold_run = calls
    np.testing.assert_allclose(warm["inverse_mass_matrix"], covariance, rtol=1e-4)
    assert warm["dense_mass"] and "inverse_mass_matrix" not in cold and "inverse_mass_matrix" not in cold_run
    assert result.summary()["warm_preparation_s"] == result.preparation_time > 0


def test_compare_nuts_leaves_a_gibbs_composite_at_the_identity_mass(blobs):
    x, est = blobs

    def weights_near(rng_key, gibbs_sites, hmc_sites):
        return {"weights": jax.random.dirichlet(rng_key, 300 * gibbs_sites["weights"])}

    factory, calls = recording(lambda **kwargs: HMCGibbs(NUTS(mixture, **kwargs), gibbs_fn=weights_near,
                                                         gibbs_sites=["weights"]))
    result = compare_nuts(mixture, est, (x.astype(np.float32),), sites=MAPPING, kernel=factory, num_chains=2,
                          num_warmup=10, num_samples=5)
    assert calls == [{}, {}]  # one kernel for each run, neither with a mass matrix
    assert result.warm.get_samples()["weights"].shape == (10, K)


# --- enumerated models: the marginal log-likelihood and ArviZ ------------------------------------------------

def test_marginal_log_likelihood_of_a_mixture_by_hand(blobs):
    x, est = blobs
    rng = np.random.default_rng(3)
    weights, scale, locs = rng.dirichlet(np.ones(K), size=(2, 3)), rng.uniform(0.5, 2, (2, 3)), rng.normal(size=(2, 3, K, 3))
    rows = row_log_likelihood(mixture, {"weights": weights, "scale": scale, "locs": locs}, (x[:20],))
    assert (rows.name, rows.dim, rows.values.shape) == ("obs", "data", (2, 3, 20))
    c, d = 1, 2
    by_hand = np.log(sum(weights[c, d, j] * st.multivariate_normal(locs[c, d, j], scale[c, d] ** 2 * np.eye(3)).pdf(x[:20])
                         for j in range(K)))
    np.testing.assert_allclose(rows.values[c, d], by_hand, rtol=1e-5)


def test_marginal_log_likelihood_of_a_scan_hmm_by_the_forward_algorithm(sequences):
    padded, lengths, _ = sequences
    rng = np.random.default_rng(4)
    px, py = rng.dirichlet(np.ones(3), size=(1, 2, 3)), rng.dirichlet(np.ones(6), size=(1, 2, 3))
    rows = row_log_likelihood(letters_hmm, {"probs_x": px, "probs_y": py}, (padded[:5], lengths[:5], 3, 6))
    assert (rows.name, rows.dim, rows.values.shape) == ("y", "sequences", (1, 2, 5))
    for row in range(5):
        forward = px[0, 1][0] * py[0, 1][:, padded[row, 0]]  # x_0 ~ probs_x[0], as the model's x_init = 0
        for t in range(1, lengths[row]):  # masked steps past the end count for nothing
            forward = (forward @ px[0, 1]) * py[0, 1][:, padded[row, t]]
        assert rows.values[0, 1, row] == pytest.approx(np.log(forward.sum()), rel=1e-5)


def test_rows_must_be_independent_given_the_continuous_sites():
    def global_switch(data):
        z = numpyro.sample("z", dist.Bernoulli(0.5), infer={"enumerate": "parallel"})
        with numpyro.plate("data", data.shape[0]):
            numpyro.sample("obs", dist.Normal(2.0 * z, 1.0), obs=data)

    with pytest.raises(ValueError, match=r"'model'.*inside the rows' plate 'data'.*'z' outside it"):
        row_log_likelihood(global_switch, {}, (np.zeros(3),))


@pytest.mark.boundary
def test_nuts_on_an_enumerated_mixture_from_the_mapping_with_loo(blobs):
    x, est = blobs
    init = est.init_params(mixture, 2, jax.random.PRNGKey(0), spread="laplace", sites=MAPPING, model_args=(x,))
    mcmc = MCMC(NUTS(mixture), num_warmup=100, num_samples=100, num_chains=2, chain_method="sequential",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(1), x, init_params=init)
    idata = to_inference_data(mcmc, est, sites=MAPPING)
    # the posterior is aligned through the mapping and the estimate sits beside it under the model's names
    assert sorted(group(idata, "spectral").data_vars) == ["locs", "scale", "weights"]
    assert group(idata, "posterior").attrs["aligned_to"] == "spectral"
    # one marginal log-likelihood per row; LOO works on it
    assert group(idata, "log_likelihood")["obs"].shape == (2, 100, len(x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's notice when some Pareto k exceeds its threshold
        result = loo(idata, pointwise=True)
    assert np.isfinite(result.elpd_loo) and result.n_data_points == len(x)
    assert float(np.mean(np.asarray(result.pareto_k) < 0.7)) > 0.9
    summary = az.summary(group(idata, "posterior"), var_names=["locs"])
    assert summary["r_hat"].max() < 1.05


@pytest.mark.boundary
def test_nuts_on_a_scan_hmm_from_the_estimate_with_loo(sequences):
    padded, lengths, est = sequences
    mapping = {"probs_x": "transition", "probs_y": "emission"}
    args = (padded, lengths, 3, 6)
    init = est.init_params(letters_hmm, 2, jax.random.PRNGKey(0), spread="laplace", sites=mapping, model_args=args)
    mcmc = MCMC(NUTS(letters_hmm), num_warmup=60, num_samples=60, num_chains=2, chain_method="sequential",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(1), *args, init_params=init)
    idata = to_inference_data(mcmc, est, sites=mapping)
    assert group(idata, "log_likelihood")["y"].shape == (2, 60, len(lengths))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 120 draws: ArviZ's Pareto-k threshold is 0.52
        assert np.isfinite(loo(idata).elpd_loo)
    # the transition rows carry the estimate's labels on both axes
    np.testing.assert_allclose(group(idata, "spectral")["probs_x"].values[0, 0], est.params["transition"])


def test_tiny_simplex_entries_survive_float32_stick_breaking():
    def categorical(y):
        probs = numpyro.sample("probs", dist.Dirichlet(jnp.ones((1, 27))).to_event(1))[0]
        with numpyro.plate("rows", y.shape[0]):
            numpyro.sample("y", dist.Categorical(probs), obs=y)

    probs = np.full(27, 1e-11)
    probs[:3] = [0.5, 0.3, 0.2 - 24e-11]  # refined estimates (EM) leave entries near 0
    est = SpectralEstimate("user", {"probs": probs[None]}, k=1)
    y = np.array([0, 1, 2, 0])
    chains = init_params(est, categorical, 2, jax.random.PRNGKey(0), model_args=(y,))
    start = np.asarray(biject_to(dist.constraints.simplex)(chains["probs"][0, 0]))
    # floored at 1e-6 and renormalised: at most 27e-6 of the mass moves, and no entry is exactly 0 in float32
    assert start.min() > 0 and np.abs(start - probs).max() < 3e-5


def test_a_computed_laplace_is_the_spread_as_it_is(conjugate):
    y, est, _ = conjugate
    gaussian = laplace(est, gaussian_means, model_args=(y,))
    key = jax.random.PRNGKey(5)
    given = init_params(est, gaussian_means, 4, key, spread=gaussian, model_args=(y,))
    computed = init_params(est, gaussian_means, 4, key, spread="laplace", model_args=(y,))
    np.testing.assert_array_equal(np.asarray(given["mu"]), np.asarray(computed["mu"]))
    # a wider Gaussian is used as given, not recomputed
    wide = Laplace(gaussian.sites, gaussian.mean, 100 * gaussian.covariance)
    spread = np.asarray(init_params(est, gaussian_means, 4, key, spread=wide, model_args=(y,))["mu"])
    np.testing.assert_allclose(spread - est.params["mu"], 10 * (np.asarray(given["mu"]) - est.params["mu"]),
                               rtol=1e-4, atol=1e-5)


def test_a_laplace_over_a_gibbs_drawn_site_is_refused(blobs, weights_by_gibbs):
    x, est = blobs
    gaussian = laplace(est, mixture, sites=MAPPING, model_args=(x,))
    with pytest.raises(ValueError, match=r"'spread' argument of init_params.*kernel moves unconstrained"):
        init_params(est, mixture, 2, jax.random.PRNGKey(0), spread=gaussian, sites=MAPPING, model_args=(x,),
                    kernel=weights_by_gibbs)


@pytest.mark.parametrize("spread", ["gaussian", True, float("nan"), -0.1])
def test_bad_spread_is_named(conjugate, spread):
    y, est, _ = conjugate
    with pytest.raises(ValueError, match="'spread' argument of init_params must be a finite number >= 0, 'laplace' "
                                         "or a Laplace"):
        init_params(est, gaussian_means, 2, jax.random.PRNGKey(0), spread=spread, model_args=(y,))


def test_laplace_over_unknown_sites_and_bad_variance(conjugate):
    y, est, _ = conjugate
    with pytest.raises(ValueError, match=r"'over' argument of laplace.*\['mu'\]"):
        laplace(est, gaussian_means, model_args=(y,), over=("sigma",))
    with pytest.raises(ValueError, match="'max_variance'"):
        laplace(est, gaussian_means, model_args=(y,), max_variance=0.0)


def test_compare_svi_on_an_enumerated_mixture_through_the_mapping(blobs):
    x, est = blobs
    result = compare_svi(mixture, est, (x.astype(np.float32),), sites=MAPPING, guide="delta", num_steps=60, window=10)
    # the warm guide starts at the estimate: its first loss is far below the default start's
    assert np.all(np.isfinite(result.warm_losses)) and result.warm_losses[0] < result.cold_losses[0]
    with pytest.raises(ValueError, match=r"'sites'.*covers the model's site 'scale'"):
        compare_svi(mixture, est, (x.astype(np.float32),), sites={"weights": "weights", "locs": "loc"}, num_steps=2)
