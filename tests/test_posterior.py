"""Tests for specinit.posterior on a tiny warm-started LDA run, on either ArviZ generation (0.x on Python 3.11,
1.x on Python >= 3.12): every test here crosses the NumPyro/ArviZ boundary."""

from __future__ import annotations

import os
import subprocess
import sys

import arviz as az
import jax
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib import pyplot
from matplotlib.colors import to_rgb
from matplotlib.image import imread
from numpyro.infer import MCMC, NUTS, log_likelihood
from scipy import stats
from specinit.models import lda

from specinit import posterior
from specinit.estimate import SpectralEstimate

K, V, N = 2, 20, 40


@pytest.fixture(scope="module")
def fit():
    rng = np.random.default_rng(0)
    alpha = np.array([0.5, 0.5])
    beta = rng.dirichlet(np.full(V, 0.3), K)
    theta = rng.dirichlet(alpha, N)
    X = np.stack([rng.multinomial(60, t @ beta) for t in theta]).astype(np.float32)
    estimate = lda.spectral(X, K, alpha.sum())
    key = jax.random.PRNGKey(0)
    init = estimate.init_params(lda.model, 2, key, spread=0.1, model_args=(X,), model_kwargs={"k": K})
    # max_tree_depth keeps compilation and sampling of this smoke run short.
    mcmc = MCMC(NUTS(lda.model, max_tree_depth=3), num_warmup=30, num_samples=30, num_chains=2,
                chain_method="sequential", progress_bar=False)
    mcmc.run(key, X, k=K, init_params=init)
    return mcmc, estimate, posterior.to_inference_data(mcmc, estimate)


def test_groups_dims_and_stored_estimate(fit):
    mcmc, estimate, idata = fit
    assert {"posterior", "log_likelihood", "spectral", "sample_stats"} <= set(posterior.group_names(idata))
    log_lik, draws, spectral = (posterior.group(idata, g) for g in ("log_likelihood", "posterior", "spectral"))
    assert log_lik["counts"].dims == ("chain", "draw", "documents")
    assert log_lik["counts"].shape == (2, 30, N)
    assert draws["beta"].dims == ("chain", "draw", "topics", "word")
    assert draws["theta"].dims == ("chain", "draw", "documents", "topics")
    for name, value in estimate.params.items():
        np.testing.assert_array_equal(spectral[name].values[0, 0], value)
    assert spectral.attrs["model"] == "lda"


def test_posterior_is_aligned_to_the_estimate(fit):
    mcmc, estimate, idata = fit
    raw = mcmc.get_samples(group_by_chain=True)
    draws = posterior.group(idata, "posterior")
    beta = draws["beta"].values
    ref = estimate.params["beta"]
    for c, d in np.ndindex(2, 30):
        aligned = np.abs(beta[c, d] - ref).sum()
        swapped = np.abs(beta[c, d][::-1] - ref).sum()
        assert aligned <= swapped
        # relabelling is a permutation of the raw draw, applied to every site
        order = [0, 1] if np.allclose(beta[c, d], raw["beta"][c, d]) else [1, 0]
        np.testing.assert_array_equal(draws["alpha"].values[c, d], np.asarray(raw["alpha"][c, d])[order])
        np.testing.assert_array_equal(draws["theta"].values[c, d], np.asarray(raw["theta"][c, d])[:, order])


def test_arviz_summary_accepts_the_result(fit):
    _, _, idata = fit
    summary = az.summary(idata, var_names=["alpha"])
    assert list(summary.index) == ["alpha[0]", "alpha[1]"]
    assert np.isfinite(posterior.max_rhat(idata, ["alpha", "beta"]))


def test_plot_forest_with_spectral_marks_the_estimate(fit, tmp_path):
    # Both ArviZ generations: matplotlib axes (0.x) and arviz-plots' PlotCollection (1.x). The spectral values are
    # drawn as crosses in matplotlib's "C3" red, a colour no other element of the forest uses: count those pixels.
    _, estimate, idata = fit
    open_figures = pyplot.get_fignums()
    path = posterior.plot_forest_with_spectral(idata, estimate, ["alpha"], tmp_path / "forest.png")
    assert pyplot.get_fignums() == open_figures  # no figure left open
    image = imread(path)[..., :3]
    red = np.all(np.abs(image - np.array(to_rgb("C3"))) < 0.05, axis=-1)
    assert red.sum() > 20
    with pytest.raises(ValueError, match="'hdi_prob'"):
        posterior.plot_forest_with_spectral(idata, estimate, ["alpha"], tmp_path / "f.png", hdi_prob=1.5)


@pytest.mark.filterwarnings(
    # 60 draws are far too few for PSIS; ArviZ rightly warns about the Pareto k diagnostic.
    "ignore:Estimated shape parameter of Pareto distribution:UserWarning"
)
def test_loo_uses_per_document_log_likelihood(fit):
    result = posterior.loo(fit[2], pointwise=True)
    assert isinstance(result, posterior.LooResult)
    assert result.loo_i.shape == result.pareto_k.shape == (N,)
    assert result.loo_i.dims == ("documents",)
    assert result.n_data_points == N and result.n_samples == 60
    # PSIS-LOO: elpd is the sum of the pointwise values; p_loo = lppd - elpd_loo.
    assert result.elpd_loo == pytest.approx(float(result.loo_i.sum()), rel=1e-12)
    log_lik = posterior.group(fit[2], "log_likelihood")["counts"].values.reshape(60, N).astype(np.float64)
    lppd = np.sum(np.log(np.mean(np.exp(log_lik - log_lik.max(0)), axis=0)) + log_lik.max(0))
    # the log-likelihood group is float32 (NumPyro's default), and ArviZ sums it in that precision
    assert result.p_loo == pytest.approx(lppd - result.elpd_loo, rel=1e-5)
    assert posterior.loo(fit[2]).loo_i is None


@pytest.fixture(scope="module")
def gibbs_fit(fit):
    """The README's run: lda.kernel (exact Gibbs draws of beta and theta, NUTS for alpha), chains under jax.vmap."""
    mcmc, estimate, _ = fit
    X = np.asarray(mcmc._args[0])
    kernel = lda.kernel(X, k=K, max_tree_depth=3)
    init = estimate.init_params(lda.model, 2, jax.random.PRNGKey(1), spread=0.05, kernel=kernel, model_args=(X,),
                                model_kwargs={"k": K})
    run = MCMC(kernel, num_warmup=20, num_samples=30, num_chains=2, chain_method=jax.vmap, progress_bar=False)
    run.run(jax.random.PRNGKey(2), X, k=K, init_params=init)
    return run, estimate, posterior.to_inference_data(run, estimate)


@pytest.mark.filterwarnings("ignore:Estimated shape parameter of Pareto distribution:UserWarning")
def test_gibbs_within_nuts_run_reaches_arviz_whole(gibbs_fit, fit):
    run, estimate, idata = gibbs_fit
    assert {"posterior", "log_likelihood", "sample_stats", "observed_data", "spectral"} <= set(
        posterior.group_names(idata))
    stats = posterior.group(idata, "sample_stats")
    assert stats["diverging"].shape == (2, 30) and stats["diverging"].dtype == bool
    steps = [name for name in stats.data_vars if "step" in name]
    assert steps, f"no step statistics among {list(stats.data_vars)}"
    np.testing.assert_array_equal(posterior.group(idata, "observed_data")["counts"].values, run._args[0])
    log_lik = posterior.group(idata, "log_likelihood")["counts"]
    assert log_lik.dims == ("chain", "draw", "documents") and np.all(np.isfinite(log_lik.values))
    # what a user calls next: ArviZ's own LOO, comparison with the NUTS run and summary
    assert np.isfinite(posterior.loo(idata).elpd_loo)
    table = az.compare({"gibbs": idata, "nuts": fit[2]})
    assert sorted(table.index) == ["gibbs", "nuts"]
    assert list(az.summary(idata, var_names=["alpha"]).index) == ["alpha[0]", "alpha[1]"]


def test_topic_model_log_likelihood_integrates_theta_out(fit):
    mcmc, _, idata = fit
    samples = mcmc.get_samples(group_by_chain=True)
    recorded = posterior.group(idata, "log_likelihood")["counts"].values
    # the declared per-document marginal of lda.model (theta integrated out), not the one at each draw's theta
    np.testing.assert_array_equal(recorded, lda.pointwise_log_likelihood(samples, mcmc._args[0], k=K))
    conditional = log_likelihood(lda.model, mcmc.get_samples(), mcmc._args[0], k=K)["counts"]
    # integrating theta out costs what fitting it to each document gained (about (k - 1) / 2 log n nats a document)
    assert float(np.mean(recorded)) < float(np.mean(np.asarray(conditional)))


def _split(x):
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])


def _z_scale(x):
    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    return stats.norm.ppf((ranks - 0.375) / (x.size + 0.25))


def _rhat(x):
    n = x.shape[1]
    between, within = n * np.var(x.mean(axis=1), ddof=1), np.mean(np.var(x, axis=1, ddof=1))
    return np.sqrt((between / within + n - 1) / n)


def rank_normalized_split_rhat(x):
    """Vehtari et al. (2021), eqs. 3-4 and Sec. 4: max of the bulk and folded (tail) split R-hat of z-scored ranks."""
    split = _split(x)
    return max(_rhat(_z_scale(split)), _rhat(_z_scale(np.abs(split - np.median(split)))))


def test_one_rhat_everywhere(fit):
    # convergence, max_rhat and compare_table report the same number, and it is the rank-normalized split R-hat
    # of the paper (computed here from its formulas), not the classic split R-hat.
    _, estimate, idata = fit
    draws = {name: posterior.group(idata, "posterior")[name].values for name in ("alpha", "beta")}
    table = posterior.convergence(idata, ["alpha", "beta"])
    assert list(table.columns) == ["r_hat", "ess_bulk"] and list(table.index) == ["alpha", "beta"]
    pd.testing.assert_frame_equal(posterior.convergence(draws), table, rtol=1e-12, atol=0)
    oracle = max(rank_normalized_split_rhat(draws["alpha"][..., i]) for i in range(K))
    assert table.loc["alpha", "r_hat"] == pytest.approx(oracle, rel=1e-12)
    compared = posterior.compare_table(idata, estimate, var_names=["alpha"])
    assert compared["r_hat"].max() == pytest.approx(oracle, rel=1e-12)
    assert compared["ess_bulk"].min() == pytest.approx(table.loc["alpha", "ess_bulk"], rel=1e-12)
    assert posterior.max_rhat(idata, ["alpha", "beta"]) == table["r_hat"].max()
    with pytest.raises(ValueError, match="'data' argument of convergence"):
        posterior.convergence({"alpha": draws["alpha"][:1]})
    with pytest.raises(ValueError, match="'var_names' argument of convergence"):
        posterior.convergence(idata, ["gamma"])


def test_stuck_chains_give_infinite_rhat_and_a_warning():
    moving = np.random.default_rng(0).normal(size=(2, 20))
    draws = {"stuck": np.stack([np.full(20, 0.3), np.full(20, 0.4)]), "constant": np.ones((2, 20)), "moving": moving}
    with pytest.warns(RuntimeWarning, match="the chains of stuck did not move") as record:
        table = posterior.convergence(draws)
    assert len(record) == 1
    assert table.loc["stuck", "r_hat"] == np.inf
    assert np.isnan(table.loc["constant", "r_hat"])
    assert table.loc["moving", "r_hat"] == pytest.approx(rank_normalized_split_rhat(moving), rel=1e-12)


def test_saved_to_netcdf_and_read_back(fit, tmp_path):
    # As a user saves an ArviZ object, on either generation (h5netcdf is a dependency of specinit).
    _, estimate, idata = fit
    idata.to_netcdf(tmp_path / "run.nc")
    loaded = az.from_netcdf(tmp_path / "run.nc")
    assert set(posterior.group_names(idata)) <= set(posterior.group_names(loaded))
    for name in ("posterior", "log_likelihood", "spectral"):
        xr.testing.assert_identical(posterior.group(loaded, name).load(), posterior.group(idata, name))
    assert posterior.group(loaded, "spectral").attrs["model"] == "lda"
    pd.testing.assert_frame_equal(posterior.compare_table(loaded, estimate), posterior.compare_table(idata, estimate))


IMPORT_ARVIZ_FIRST = """
import arviz as az  # first, as many users write it
from numpyro.infer import MCMC, NUTS
import jax
import numpy as np
from specinit import posterior
from specinit.models import lda

X = np.random.default_rng(0).poisson(2.0, size=(20, 10)).astype(np.float32)
estimate = lda.spectral(X, 2, 1.0)
mcmc = MCMC(NUTS(lda.model, max_tree_depth=2), num_warmup=5, num_samples=5, progress_bar=False)
mcmc.run(jax.random.PRNGKey(0), X, k=2)
data = posterior.to_inference_data(mcmc, estimate)
print(sorted(posterior.group_names(data)))
"""


def test_to_inference_data_when_arviz_is_imported_before_numpyro(tmp_path):
    # ArviZ 1.x registers numpyro as a lazy module; `from numpyro.infer import ...` right after `import arviz` used to
    # leave numpyro.infer without its submodule attributes, and ArviZ's converter raised AttributeError.
    # cwd: the installed package, not the source folder of an unpacked sdist.
    result = subprocess.run([sys.executable, "-c", IMPORT_ARVIZ_FIRST], capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONWARNINGS="error::RuntimeWarning"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "'log_likelihood'" in result.stdout and "'spectral'" in result.stdout


def test_compare_table(fit):
    _, estimate, idata = fit
    table = posterior.compare_table(idata, estimate, var_names=["alpha", "beta"])
    assert list(table.columns) == ["spectral", "mean", "hdi_low", "hdi_high", "inside", "r_hat", "ess_bulk"]
    assert len(table) == K + K * V
    assert table.index[0] == "alpha[0]" and table.index[K] == "beta[0, 0]"
    np.testing.assert_allclose(table["spectral"].values, np.concatenate([estimate.params["alpha"], estimate.params["beta"].ravel()]))
    expected = (table["hdi_low"] <= table["spectral"]) & (table["spectral"] <= table["hdi_high"])
    assert table["inside"].dtype == bool and (table["inside"] == expected).all()
    assert (table["hdi_low"] <= table["hdi_high"]).all()


def test_plots_are_written(fit, tmp_path):
    _, estimate, idata = fit
    paths = [
        posterior.plot_topic_heatmap(estimate.params["beta"], tmp_path / "topics.png",
                                       vocabulary=[f"w{i}" for i in range(V)], top_n=5),
        posterior.plot_elbo_traces({"warm": np.linspace(3, 1, 50), "cold": np.linspace(5, 2, 50)}, tmp_path / "elbo.png"),
    ]
    for path in paths:
        assert path.exists() and path.stat().st_size > 1000
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_estimate_to_inference_data():
    estimate = SpectralEstimate("lda", {"alpha": [0.3, 0.7], "beta": [[0.2, 0.8], [0.6, 0.4]]}, {"alpha_sum": 1.0},
                                vocabulary=["a", "b"], facts=lda.FACTS)
    idata = estimate.to_inference_data()
    draws = posterior.group(idata, "posterior")
    assert draws["beta"].dims == ("chain", "draw", "topics", "word")
    assert draws["beta"].shape == (1, 1, 2, 2)
    assert list(draws["word"].values) == ["a", "b"]
    assert draws.attrs["alpha_sum"] == 1.0


def test_shape_mismatch_names_both_shapes(fit):
    mcmc, estimate, idata = fit
    short = estimate.params["beta"][:, :10]
    wrong = SpectralEstimate("lda", {"alpha": estimate.params["alpha"], "beta": short / short.sum(1, keepdims=True)},
                             facts=lda.FACTS)
    with pytest.raises(ValueError, match=r"posterior's shape \(2, 20\) for 'beta'; got shape \(2, 10\)"):
        posterior.to_inference_data(mcmc, wrong)
    with pytest.raises(ValueError, match=r"\(2, 20\).*\(2, 10\)"):
        posterior.compare_table(idata, wrong)
    with pytest.raises(ValueError, match="'var_names'"):
        posterior.compare_table(idata, estimate, var_names=["gamma"])
    with pytest.raises(ValueError, match="'vocabulary'"):
        posterior.plot_topic_heatmap(estimate.params["beta"], "unused.png", vocabulary=["a"])
    with pytest.raises(ValueError, match="'topic_names' argument of plot_topic_heatmap must be at most 2 names"):
        posterior.plot_topic_heatmap(estimate.params["beta"], "unused.png", topic_names=["a", "b", "c"])


# Every model's estimate round-trips through to_inference_data with alignment: the component axes, the
# matching site and the dims come from estimate.facts, so no model is special-cased in specinit.posterior.
def _gaussian_hmm_case():
    from specinit.models import gaussian_hmm

    init, transition = np.array([0.6, 0.4]), np.array([[0.9, 0.1], [0.2, 0.8]])
    x = np.asarray(gaussian_hmm.GaussianHMM(init, transition, np.array([-2.0, 2.0]), np.array([0.5, 0.5]), 60)
                   .sample(jax.random.PRNGKey(1), (4,)))
    estimate = gaussian_hmm.spectral(x, 2, seed=0)
    return gaussian_hmm.model, {"sequences": x, "k": 2}, estimate


def _multiview_case():
    from specinit.models import multiview

    rng = np.random.default_rng(2)
    h = rng.integers(0, 2, 300)
    views = [np.where(h == 0, rng.integers(0, 3, 300), rng.integers(2, 5, 300)),
             np.array([[-2.0, 0.0], [0.0, 2.0]])[h] + 0.5 * rng.standard_normal((300, 2)),
             np.where(h == 0, rng.integers(0, 3, 300), rng.integers(2, 5, 300))]
    kinds = ["categorical", "gaussian", "categorical"]
    estimate = multiview.spectral(views, 2, kinds, dims=[5, 2, 5], seed=0)
    return multiview.model, {"views": views, "k": 2, "kinds": kinds, "dims": [5, 2, 5]}, estimate


@pytest.mark.parametrize("case", [_gaussian_hmm_case, _multiview_case], ids=["gaussian_hmm", "multiview"])
def test_other_models_round_trip_with_alignment(case):
    model, kwargs, estimate = case()
    init = estimate.init_params(model, 1, jax.random.PRNGKey(0), model_kwargs=kwargs)
    mcmc = MCMC(NUTS(model, max_tree_depth=2), num_warmup=5, num_samples=5, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), init_params=init, **kwargs)
    idata = posterior.to_inference_data(mcmc, estimate)
    draws = posterior.group(idata, "posterior")
    assert draws.attrs["aligned_to"] == "spectral"
    match = estimate.facts.match_site
    for name, value in estimate.params.items():
        assert draws[name].shape[2:] == value.shape
        if name in estimate.facts.dims:
            assert draws[name].dims[2:] == estimate.facts.dims[name]
    # aligned draws are no farther from the estimate than any relabelling of them
    for d in range(5):
        drawn = draws[match].values[0, d]
        aligned = np.abs(drawn - estimate.params[match]).sum()
        assert aligned <= np.abs(drawn[::-1] - estimate.params[match]).sum() + 1e-12
