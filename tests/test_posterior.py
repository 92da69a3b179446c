"""Tests for specinit.posterior on a tiny warm-started LDA run."""

from __future__ import annotations

import arviz as az
import jax
import numpy as np
import pytest
from matplotlib.figure import Figure
from numpyro.infer import MCMC, NUTS
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
    init = estimate.init_params(lda.model, 2, key, jitter=0.1, model_args=(X,), model_kwargs={"k": K})
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


# ArviZ tiers: 0.x (InferenceData, Python 3.11) draws forests on matplotlib axes; 1.x (DataTree, Python >= 3.12)
# plots through PlotCollection. Exactly one of the two tests below runs, whichever generation is installed.
@pytest.mark.skipif(posterior._ARVIZ_1, reason="ArviZ 0.x API (matplotlib axes); the 1.x tier runs instead")
def test_arviz_0x_plot_forest_accepts_the_result(fit, tmp_path):
    _, estimate, idata = fit
    fig = Figure()
    az.plot_forest(idata, var_names=["alpha"], combined=True, ax=fig.add_subplot())
    assert posterior.plot_forest_with_spectral(idata, estimate, ["alpha"], tmp_path / "f.png").stat().st_size > 0


@pytest.mark.skipif(not posterior._ARVIZ_1, reason="ArviZ 1.x API (PlotCollection); the 0.x tier runs instead")
def test_arviz_1x_plot_forest_accepts_the_result(fit):
    _, _, idata = fit
    assert az.plot_forest(idata, var_names=["alpha"]) is not None


@pytest.mark.filterwarnings(
    # 60 draws are far too few for PSIS; ArviZ rightly warns about the Pareto k diagnostic.
    "ignore:Estimated shape parameter of Pareto distribution:UserWarning"
)
def test_loo_uses_per_document_log_likelihood(fit):
    result = posterior.loo(fit[2], pointwise=True)
    assert result["loo_i"].shape == (N,)
    assert np.isfinite(result["elpd_loo"])


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
        posterior.plot_forest_with_spectral(idata, estimate, ["alpha"], tmp_path / "forest.png"),
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
