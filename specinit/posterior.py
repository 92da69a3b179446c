"""ArviZ diagnostics: spectral estimates beside NumPyro posteriors.

This is the ONLY module of specinit that imports ArviZ. Two generations are
supported: ArviZ 0.2x (``arviz.InferenceData``; the release installed on
Python 3.11) and ArviZ 1.x (``xarray.DataTree``, with the computations in
arviz-stats and the plots in arviz-plots; Python >= 3.12). The difference is
confined to the private helpers under "ArviZ generation boundary" below;
everything else works on plain ``xarray.Dataset`` groups and returns the same
names on both generations (the ``r_hat`` and ``ess_bulk`` columns, the
:class:`LooResult` fields ``elpd_loo``, ``p_loo``, ``loo_i``).

Layout of the returned object (:func:`to_inference_data`):

* ``posterior`` -- NumPyro draws (of the library's models or the user's own,
  with ``sites=`` mapping them onto the estimate), relabelled to the
  spectral estimate's component labels when ``align=True`` (:func:`specinit.align.align_draws`;
  attribute ``aligned_to = "spectral"``);
* ``log_likelihood`` -- one value per observation row, so :func:`loo` works:
  per document with the topic proportions integrated out for ``lda.model``,
  the marginal over the enumerated discrete sites for models that NumPyro
  enumerates (:func:`specinit.pointwise.row_log_likelihood`), NumPyro's
  per-site log-likelihood otherwise;
* ``sample_stats``, ``observed_data`` -- as ArviZ builds them;
* ``spectral`` -- the estimate as a single chain with a single draw, with
  the posterior's variable names, dims and coords (attributes: the model
  name and the estimate's scalar diagnostics). ``az.summary`` and
  ``az.plot_forest`` read ``posterior`` and ignore it; use
  :func:`compare_table` and :func:`plot_forest_with_spectral` for the side
  by side view.

The object is ArviZ's own, so it is saved and read back as ArviZ users do:
``idata.to_netcdf("run.nc")`` and ``arviz.from_netcdf("run.nc")`` (the
HDF5 engine, h5netcdf, is a dependency of specinit), on either generation.

Convergence is reported with one definition everywhere in specinit
(:func:`convergence`, :func:`max_rhat`, :func:`compare_table` and
:mod:`specinit.compare`): ArviZ's rank-normalized split R-hat with the bulk
effective sample size beside it (Vehtari et al. 2021).

Figures are saved as PNG files; each plotting helper returns the path
written and keeps no figure open.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence, TypeAlias

# NumPyro before ArviZ: ArviZ 1.x registers ``numpyro`` as a lazily loaded module when it is imported first
# (see _bind_numpyro_submodules).
import numpyro
import arviz as az  # noqa: I001
import jax
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from specinit._validation import bad_argument, check_int, check_positive, warn
from specinit.align import align_draws
from specinit.pointwise import row_log_likelihood
from specinit.warmstart import SiteMap, map_sites

if TYPE_CHECKING:
    import os

    from numpy.typing import ArrayLike
    from numpyro.infer import MCMC

    from specinit.estimate import SpectralEstimate

#: An ArviZ container of either generation: ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x).
ArvizData: TypeAlias = "az.InferenceData | xr.DataTree"

__all__ = [
    "LooResult",
    "group",
    "group_names",
    "to_inference_data",
    "estimate_to_inference_data",
    "compare_table",
    "convergence",
    "max_rhat",
    "loo",
    "plot_forest_with_spectral",
    "plot_topic_heatmap",
    "plot_elbo_traces",
]

_ARVIZ_1 = int(az.__version__.split(".")[0]) >= 1


@dataclass(frozen=True)
class LooResult:
    """PSIS-LOO of a posterior, with the same names on both ArviZ generations.

    Attributes
    ----------
    elpd_loo : float
        Expected log pointwise predictive density (log scale).
    se : float
        Standard error of ``elpd_loo`` (as the installed ArviZ computes it).
    p_loo : float
        Effective number of parameters.
    n_samples, n_data_points : int
        Posterior draws (all chains) and observations (documents).
    warning : bool
        Some Pareto k above ``good_k``: the estimate is unreliable.
    good_k : float
        Threshold on the Pareto k diagnostic.
    loo_i, pareto_k : xarray.DataArray or None
        Pointwise ELPD and Pareto k per observation (``pointwise=True``).
    """

    elpd_loo: float
    se: float
    p_loo: float
    n_samples: int
    n_data_points: int
    warning: bool
    good_k: float
    loo_i: xr.DataArray | None = None
    pareto_k: xr.DataArray | None = None


# ArviZ generation boundary -------------------------------------------------------------------------
def _make(groups: dict):
    """An ArviZ container of ``xarray.Dataset`` groups."""
    if _ARVIZ_1:
        return xr.DataTree.from_dict(groups)
    return az.InferenceData(**groups)


def group_names(data: ArvizData) -> list[str]:
    """Names of the groups of an ArviZ object, for either ArviZ generation.

    Parameters
    ----------
    data : arviz.InferenceData or xarray.DataTree
        An ArviZ container.

    Returns
    -------
    list of str
        ``data.groups()`` (0.x) or the DataTree's children (1.x).
    """
    return list(data.children) if _ARVIZ_1 else list(data.groups())


def group(data: ArvizData, name: str) -> xr.Dataset:
    """Group ``name`` of an ArviZ object as an ``xarray.Dataset``, for either ArviZ generation.

    Parameters
    ----------
    data : arviz.InferenceData or xarray.DataTree
        An ArviZ container.
    name : str
        The group (``"posterior"``, ``"log_likelihood"``, ``"spectral"``, ...).

    Returns
    -------
    xarray.Dataset

    Raises
    ------
    ValueError
        If the group is absent.
    """
    names = group_names(data)
    if name not in names:
        raise bad_argument("idata", "specinit.posterior", f"an ArviZ object with a {name!r} group", f"groups {names}", describe=False)
    return data[name].to_dataset() if _ARVIZ_1 else data[name]


def _put(data, name: str, dataset: xr.Dataset) -> None:
    """Add or replace group ``name`` in place."""
    if _ARVIZ_1:
        data[name] = dataset
    elif name in data.groups():
        setattr(data, name, dataset)
    else:
        data.add_groups({name: dataset})


def _bind_numpyro_submodules() -> None:
    """Bind every imported ``numpyro`` submodule on its parent package, as the import system does.

    ArviZ 1.x puts a lazily loaded ``numpyro`` in ``sys.modules`` when it is
    imported. If the first import that touches it is a submodule's (``from
    numpyro.infer import MCMC`` after ``import arviz``), ``numpyro.infer`` is
    executed twice and the copy left in ``sys.modules`` lacks the
    submodule attributes (``numpyro.infer.initialization``) that ArviZ's
    NumPyro converter reads.
    """
    for name, module in list(sys.modules.items()):
        parent, _, child = name.rpartition(".")
        if parent.startswith("numpyro") and module is not None and parent in sys.modules:
            if getattr(sys.modules[parent], child, None) is not module:
                setattr(sys.modules[parent], child, module)


def _from_numpyro(mcmc, log_likelihood: bool, coords, event_dims):
    """``az.from_numpyro`` (either generation)."""
    if _ARVIZ_1:
        _bind_numpyro_submodules()
    return az.from_numpyro(mcmc, log_likelihood=log_likelihood, coords=coords, extra_event_dims=event_dims)


def _summary(data, var_names, hdi_prob: float) -> pd.DataFrame:
    """Unrounded ``az.summary`` with columns ``mean, hdi_low, hdi_high, r_hat, ess_bulk``."""
    if _ARVIZ_1:
        table = az.summary(data, var_names=var_names, ci_prob=hdi_prob, ci_kind="hdi", round_to="none")
        low, high = [c for c in table.columns if c.endswith("_lb")][0], [c for c in table.columns if c.endswith("_ub")][0]
    else:
        table = az.summary(data, var_names=var_names, hdi_prob=hdi_prob, round_to="none")
        low, high = [c for c in table.columns if c.startswith("hdi_")]
    return table.rename(columns={low: "hdi_low", high: "hdi_high"})[["mean", "hdi_low", "hdi_high", "r_hat", "ess_bulk"]]


def _rhat_ess(draws: xr.Dataset) -> tuple[xr.Dataset, xr.Dataset]:
    """Rank-normalized split R-hat and bulk ESS of every element (dims ``chain``, ``draw`` first).

    An element constant within every split chain has no within-chain
    variance: its R-hat is ``inf`` where the chains sit at different values
    (they are stuck) and NaN where all draws are equal; both are named in a
    warning instead of ArviZ's division warnings.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        rhat, ess = az.rhat(draws, method="rank"), az.ess(draws, method="bulk")
    stuck = [name for name in draws.data_vars if np.isinf(rhat[name].values).any()]
    if stuck:
        warn(f"the chains of {', '.join(stuck)} did not move (each chain constant, the chains apart): R-hat is inf; "
             "lengthen the warm-up or lower the initial step size")
    return rhat, ess


def _loo(data, pointwise: bool) -> LooResult:
    """``az.loo`` under one set of names."""
    result = az.loo(data, pointwise=pointwise)
    names = ("se", "n_samples", "n_data_points", "warning", "good_k", "pareto_k")
    if _ARVIZ_1:
        fields = {"elpd_loo": result.elpd, "p_loo": result.p, "loo_i": result.elpd_i,
                  **{name: getattr(result, name) for name in names}}
    else:
        fields = {name: result.get(name) for name in ("elpd_loo", "p_loo", "loo_i", *names)}
    return LooResult(
        elpd_loo=float(fields["elpd_loo"]), se=float(fields["se"]), p_loo=float(fields["p_loo"]),
        n_samples=int(fields["n_samples"]), n_data_points=int(fields["n_data_points"]),
        warning=bool(fields["warning"]), good_k=float(fields["good_k"]),
        loo_i=fields["loo_i"] if pointwise else None, pareto_k=fields["pareto_k"] if pointwise else None,
    )


def _forest(data, names: list, spectral: xr.Dataset, hdi_prob: float, path: Path) -> None:
    """Forest plot of ``names`` (one combined HDI per scalar) with the spectral values marked, saved to ``path``."""
    legend = f"x: spectral estimate; o: posterior mean; lines: {hdi_prob:.0%} HDI"
    if _ARVIZ_1:
        from arviz_plots.visuals import scatter_x
        from matplotlib import pyplot

        inner = 0.5 if hdi_prob > 0.5 else hdi_prob / 2
        plots = az.plot_forest(data, var_names=names, combined=True, point_estimate="mean", ci_kind="hdi",
                               ci_probs=(inner, hdi_prob), backend="matplotlib")
        plots.map(scatter_x, "spectral", data=spectral, coords={"column": "forest"}, ignore_aes={"alpha", "overlay"},
                  color="C3", marker="x")
        plots.add_title(legend + f" (thick: {inner:.0%})", size=9)
        figure = plots.get_viz("figure")
        try:
            _save(figure, path)
        finally:
            pyplot.close(figure)
        return
    values = np.concatenate([spectral[n].values.ravel() for n in names])
    fig = Figure(figsize=(6, 1 + 0.25 * values.size))
    ax = fig.add_subplot()
    az.plot_forest(data, var_names=names, combined=True, hdi_prob=hdi_prob, ax=ax)
    rows = sorted((tick.get_position()[1] for tick in ax.get_yticklabels()), reverse=True)
    ax.scatter(values, rows, marker="x", color="C3", zorder=3, label="spectral")
    ax.legend(loc="upper right")
    ax.set_title(legend, fontsize=9)
    _save(fig, path)


# conversion ---------------------------------------------------------------------------------------
def _site_dims(name: str, ndim: int, facts) -> list:
    dims = facts.dims.get(name)
    return list(dims) if dims is not None and len(dims) == ndim else [f"{name}_dim_{i}" for i in range(ndim)]


def estimate_to_inference_data(estimate: SpectralEstimate) -> ArvizData:
    """The estimate as an ArviZ object with one chain and one draw.

    Parameters
    ----------
    estimate : SpectralEstimate

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
        A ``posterior`` group with one variable per site, dims named after
        the model's plates (``topics``, ``documents``) and the vocabulary
        (``word``, with the estimate's vocabulary as coordinates), and the
        model name and scalar diagnostics as attributes.
    """
    variables = {
        name: (["chain", "draw", *_site_dims(name, value.ndim, estimate.facts)], value[None, None])
        for name, value in estimate.params.items()
    }
    dataset = xr.Dataset(variables, coords=_coords(estimate), attrs=_attrs(estimate))
    return _make({"posterior": dataset})


def _coords(estimate) -> dict:
    """The vocabulary as ``word`` coordinates; a seeded fit's topic names (then ``topic i``) as ``topics``."""
    coords = {"word": list(estimate.vocabulary)} if estimate.vocabulary is not None else {}
    names = estimate.diagnostics.get("seed/names")
    if names is not None and estimate.k is not None:
        coords["topics"] = [str(name) for name in names] + [f"topic {i}" for i in range(len(names), estimate.k)]
    return coords


def _attrs(estimate) -> dict:
    scalars = {k: v for k, v in estimate.diagnostics.items() if isinstance(v, (bool, int, float, str))}
    return {"model": estimate.model, **{k: int(v) if isinstance(v, bool) else v for k, v in scalars.items()}}


def _check_shapes(posterior: xr.Dataset, estimate, func: str) -> None:
    for name, value in estimate.params.items():
        if name not in posterior:
            raise bad_argument(
                "estimate", func, f"an estimate whose sites are posterior variables ({sorted(posterior.data_vars)})",
                f"the site {name!r}", describe=False,
            )
        shape = posterior[name].shape[2:]
        if tuple(shape) != value.shape:
            raise bad_argument(
                "estimate", func, f"an estimate of the posterior's shape {tuple(shape)} for {name!r}",
                f"shape {value.shape}", describe=False,
            )


def to_inference_data(mcmc: MCMC, estimate: SpectralEstimate | None = None, *, sites: SiteMap = None,
                      align: bool = True, log_likelihood: bool = True) -> ArvizData:
    """Convert a NumPyro MCMC run to ArviZ, with the spectral estimate beside it.

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
        A run (``mcmc.run`` already called) of a specinit model or of the
        user's own model.
    estimate : SpectralEstimate, optional
        Stored as the ``spectral`` group, and the labelling the posterior is
        aligned to.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources in the estimate, as for
        :func:`specinit.warmstart.init_params` (a site mapped to an estimate
        parameter by name carries that parameter's component axes, so it is
        relabelled with the others).
    align : bool
        Relabel every draw's components to the estimate's labels
        (:func:`specinit.align.align_draws`, with the component axes and
        matching site of the (mapped) estimate). Ignored without
        ``estimate``.
    log_likelihood : bool
        Compute the pointwise log-likelihood, one value per observation row
        (:func:`specinit.pointwise.row_log_likelihood`): per document for
        the topic models (``lda.model``: theta integrated out), per row of
        the data plate with enumerated discrete sites summed out for models
        written with ``infer={"enumerate": "parallel"}``, NumPyro's per-site
        log-likelihood otherwise. It is invariant to the relabelling.

    Returns
    -------
    arviz.InferenceData (ArviZ 0.x) or xarray.DataTree (ArviZ 1.x)
        See the module notes for the groups.

    Raises
    ------
    ValueError
        If an estimate site is not a posterior variable or its shape differs
        from the posterior's per-draw shape, a bad ``sites`` mapping, or
        ``align=True`` for a model without a known component layout.
    """
    func = "to_inference_data"
    if estimate is not None:
        estimate = map_sites(estimate, sites, func=func)
    coords = _coords(estimate) if estimate is not None else None
    event_dims = {k: list(v) for k, v in estimate.facts.event_dims.items()} if estimate is not None else None
    rows = None
    if log_likelihood:
        samples = jax.device_get(mcmc.get_samples(group_by_chain=True))
        rows = row_log_likelihood(mcmc.sampler.model, samples, mcmc._args, mcmc._kwargs)
    data = _from_numpyro(mcmc, bool(log_likelihood) and rows is None, coords, event_dims or None)
    if rows is not None:
        _put(data, "log_likelihood", xr.Dataset({rows.name: (["chain", "draw", rows.dim], rows.values)}))
    if estimate is None:
        return data
    posterior = group(data, "posterior")
    _check_shapes(posterior, estimate, func)
    if align:
        if not estimate.facts.component_axes:
            raise bad_argument("align", func, "False for an estimate without component axes (estimate.facts)",
                               estimate.model)
        aligned = align_draws({name: posterior[name].values for name in posterior.data_vars}, estimate)
        posterior = posterior.assign({name: (posterior[name].dims, value) for name, value in aligned.items()})
        posterior.attrs["aligned_to"] = "spectral"
        _put(data, "posterior", posterior)
    spectral = _spectral_values(posterior, estimate, list(estimate.params)).expand_dims(chain=[0], draw=[0])
    spectral.attrs.update(_attrs(estimate))
    _put(data, "spectral", spectral)
    return data


def _spectral_values(posterior: xr.Dataset, estimate, names: list) -> xr.Dataset:
    """The estimate's values of ``names`` with the posterior's per-draw dims and coords."""
    return xr.Dataset(
        {name: (posterior[name].dims[2:], estimate.params[name]) for name in names},
        coords={dim: posterior.coords[dim] for name in names for dim in posterior[name].dims[2:] if dim in posterior.coords},
    )


# tables -------------------------------------------------------------------------------------------
def _var_names(posterior: xr.Dataset, estimate, var_names, func: str) -> list:
    names = [n for n in estimate.params if n in posterior] if var_names is None else [var_names] if isinstance(var_names, str) else list(var_names)
    missing = [n for n in names if n not in estimate.params or n not in posterior]
    if missing or not names:
        raise bad_argument(
            "var_names", func, f"sites of both the estimate ({sorted(estimate.params)}) and the posterior", missing or names
        )
    return names


def _check_prob(hdi_prob, func: str) -> float:
    hdi_prob = check_positive(hdi_prob, "hdi_prob", func)
    if hdi_prob >= 1:
        raise bad_argument("hdi_prob", func, "a probability in (0, 1)", hdi_prob)
    return hdi_prob


def compare_table(idata: ArvizData, estimate: SpectralEstimate, var_names: str | Sequence[str] | None = None,
                  hdi_prob: float = 0.94) -> pd.DataFrame:
    """Spectral values against posterior summaries, one row per scalar parameter.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        From :func:`to_inference_data` (aligned to ``estimate``).
    estimate : SpectralEstimate
    var_names : str or list of str, optional
        Sites to compare; default: every estimate site in the posterior.
    hdi_prob : float
        Probability mass of the highest-density interval.

    Returns
    -------
    pandas.DataFrame
        Indexed like ``az.summary`` (``"beta[0, 3]"``), with columns
        ``spectral``, ``mean``, ``hdi_low``, ``hdi_high``, ``inside``
        (``hdi_low <= spectral <= hdi_high``), ``r_hat`` (rank-normalized
        split R-hat, as :func:`convergence`), ``ess_bulk``; unrounded.

    Raises
    ------
    ValueError
        Unknown ``var_names``, ``hdi_prob`` outside (0, 1), or an estimate
        whose shapes differ from the posterior's.
    """
    func = "compare_table"
    hdi_prob = _check_prob(hdi_prob, func)
    posterior = group(idata, "posterior")
    _check_shapes(posterior, estimate, func)
    names = _var_names(posterior, estimate, var_names, func)
    table = _summary(idata, names, hdi_prob)
    table.insert(0, "spectral", np.concatenate([estimate.params[n].ravel() for n in names]))
    table.insert(4, "inside", (table["hdi_low"] <= table["spectral"]) & (table["spectral"] <= table["hdi_high"]))
    return table


def _draws(data, var_names, func: str) -> xr.Dataset:
    """Posterior draws as a Dataset with dims ``(chain, draw, ...)``, from an ArviZ object or a dict of arrays."""
    if isinstance(data, dict):
        if not data:
            raise bad_argument("data", func, "a non-empty dict of site -> draws", data)
        variables = {}
        for name, value in data.items():
            value = np.asarray(value)
            if value.ndim < 2 or value.shape[0] < 2 or value.shape[1] < 4:
                raise bad_argument("data", func, "draws with leading (chain, draw) axes, >= 2 chains and >= 4 draws",
                                   f"shape {value.shape} for {name!r}", describe=False)
            variables[name] = (["chain", "draw", *(f"{name}_dim_{i}" for i in range(value.ndim - 2))], value)
        draws = xr.Dataset(variables)
    else:
        draws = group(data, "posterior")
    if var_names is None:
        return draws
    names = [var_names] if isinstance(var_names, str) else list(var_names)
    missing = [n for n in names if n not in draws]
    if missing or not names:
        raise bad_argument("var_names", func, f"variables of the posterior ({sorted(draws.data_vars)})", missing or names)
    return draws[names]


def convergence(data: ArvizData | Mapping[str, ArrayLike],
                var_names: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Worst rank-normalized split R-hat and bulk ESS of each variable.

    The one convergence measure of specinit (ArviZ's ``rhat`` with
    ``method="rank"`` and ``ess`` with ``method="bulk"``): the split R-hat
    of the rank-normalized draws and of the folded draws, whichever is
    larger [1]_. Values below 1.01 (with bulk ESS above 100 per chain) are
    the usual bar for pooled chains.

    Parameters
    ----------
    data : arviz.InferenceData, xarray.DataTree or dict of str -> array-like
        An ArviZ object with a ``posterior`` group, or draws with leading
        ``(chain, draw)`` axes (``mcmc.get_samples(group_by_chain=True)``;
        at least 2 chains of 4 draws).
    var_names : str or list of str, optional
        Variables to include (default: all).

    Returns
    -------
    pandas.DataFrame
        One row per variable, columns ``r_hat`` (the largest over the
        variable's entries) and ``ess_bulk`` (the smallest). NaN where a
        variable is constant over all draws (R-hat undefined); ``inf``, with
        a warning, where every chain is constant but the chains differ (the
        chains are stuck).

    Raises
    ------
    ValueError
        Unknown ``var_names``, or draws without a chain and a draw axis.

    References
    ----------
    .. [1] Vehtari, Gelman, Simpson, Carpenter, Buerkner, "Rank-normalization,
       folding, and localization: an improved R-hat for assessing convergence
       of MCMC", Bayesian Analysis 16(2), 2021.
    """
    draws = _draws(data, var_names, "convergence")
    rhat, ess = _rhat_ess(draws)
    names = list(draws.data_vars)
    return pd.DataFrame(
        {"r_hat": [float(np.max(rhat[n].values)) for n in names], "ess_bulk": [float(np.min(ess[n].values)) for n in names]},
        index=pd.Index(names, name="variable"),
    )


def max_rhat(idata: ArvizData | Mapping[str, ArrayLike], var_names: str | Sequence[str] | None = None) -> float:
    """Largest rank-normalized split R-hat over ``var_names``.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or dict of str -> array-like
        With a ``posterior`` group of several chains, or draws as for
        :func:`convergence`.
    var_names : str or list of str, optional
        Variables to include (default: all posterior variables).

    Returns
    -------
    float
        The maximum of :func:`convergence`'s ``r_hat`` column (the same
        values as :func:`compare_table`'s ``r_hat``).
    """
    return float(convergence(idata, var_names)["r_hat"].max())


def loo(idata: ArvizData, *, pointwise: bool = False) -> LooResult:
    """PSIS-LOO of the per-document log-likelihood (``az.loo``).

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        With a ``log_likelihood`` group (:func:`to_inference_data`).
    pointwise : bool
        Also return the pointwise values and Pareto k diagnostics.

    Returns
    -------
    LooResult
        ``elpd_loo``, ``se``, ``p_loo``, ... and, with ``pointwise=True``,
        ``loo_i`` and ``pareto_k`` (one entry per document), under these
        names on both ArviZ generations.

    Raises
    ------
    ValueError
        If ``idata`` has no ``log_likelihood`` group.
    """
    group(idata, "log_likelihood")
    return _loo(idata, bool(pointwise))


# plots ----------------------------------------------------------------------------------------------
def _save(fig: Figure, path) -> Path:
    path = Path(path)
    fig.savefig(path, format="png", dpi=100, bbox_inches="tight")
    return path


def plot_forest_with_spectral(idata: ArvizData, estimate: SpectralEstimate, var_names: str | Sequence[str],
                              path: str | os.PathLike[str], *, hdi_prob: float = 0.94) -> Path:
    """Forest plot of the posterior (``az.plot_forest``) with the spectral values marked.

    One row per scalar parameter: the posterior mean, its highest-density
    interval (chains combined) and the spectral value as a red cross. Drawn
    with ArviZ 0.x's matplotlib ``plot_forest`` or arviz-plots'
    ``plot_forest`` (a ``PlotCollection``, matplotlib backend) on ArviZ 1.x.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        From :func:`to_inference_data` (aligned to ``estimate``).
    estimate : SpectralEstimate
    var_names : str or list of str
        Sites to plot (keep them small: one row per scalar).
    path : str or Path
        PNG file to write.
    hdi_prob : float
        Probability mass of the interval, in (0, 1).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        Unknown ``var_names``, ``hdi_prob`` outside (0, 1), or an estimate
        whose shapes differ from the posterior's.
    """
    func = "plot_forest_with_spectral"
    hdi_prob = _check_prob(hdi_prob, func)
    posterior = group(idata, "posterior")
    _check_shapes(posterior, estimate, func)
    names = _var_names(posterior, estimate, var_names, func)
    path = Path(path)
    _forest(idata, names, _spectral_values(posterior, estimate, names), hdi_prob, path)
    return path


def plot_topic_heatmap(beta: ArrayLike, path: str | os.PathLike[str], vocabulary: Sequence[str] | None = None,
                       top_n: int = 10, topic_names: Sequence[str] | None = None) -> Path:
    """Heat map of topic-word probabilities over each topic's top words.

    Parameters
    ----------
    beta : array-like, shape (k, V)
        Topics (rows).
    path : str or Path
        PNG file to write.
    vocabulary : sequence of str, optional
        Word labels (default: word indices).
    top_n : int
        Words per topic; the columns are the union of the topics' top words.
    topic_names : sequence of str, optional
        Labels of the first topics (e.g. a seeded fit's ``diagnostics["seed/names"]``); the others are
        ``topic i``.

    Returns
    -------
    Path
    """
    func = "plot_topic_heatmap"
    beta = np.asarray(beta, dtype=np.float64)
    if beta.ndim != 2 or 0 in beta.shape:
        raise bad_argument("beta", func, "a non-empty (k, V) array", beta)
    top_n = check_int(top_n, "top_n", func, minimum=1)
    words = [str(w) for w in vocabulary] if vocabulary is not None else [str(i) for i in range(beta.shape[1])]
    if len(words) != beta.shape[1]:
        raise bad_argument("vocabulary", func, f"{beta.shape[1]} words (the columns of beta)", f"{len(words)} words", describe=False)
    ranked = np.argsort(-beta, axis=1, kind="stable")[:, :top_n]
    columns = list(dict.fromkeys(ranked.ravel().tolist()))
    fig = Figure(figsize=(1 + 0.3 * len(columns), 1 + 0.4 * beta.shape[0]))
    ax = fig.add_subplot()
    image = ax.imshow(beta[:, columns], aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(columns)), [words[c] for c in columns], rotation=90)
    names = [str(name) for name in (() if topic_names is None else topic_names)]
    if len(names) > beta.shape[0]:
        raise bad_argument("topic_names", func, f"at most {beta.shape[0]} names (the rows of beta)",
                           f"{len(names)} names", describe=False)
    ax.set_yticks(range(beta.shape[0]), names + [f"topic {i}" for i in range(len(names), beta.shape[0])])
    fig.colorbar(image, ax=ax, label="P(word | topic)")
    return _save(fig, path)


def plot_elbo_traces(traces: Mapping[str, ArrayLike], path: str | os.PathLike[str]) -> Path:
    """Loss (negative ELBO) per step of several SVI runs on one axis.

    Parameters
    ----------
    traces : dict of str -> array-like
        Label -> one-dimensional loss trace (e.g. ``"spectral"``,
        ``"uniform"`` from :class:`specinit.compare.SviComparison`).
    path : str or Path
        PNG file to write.

    Returns
    -------
    Path
    """
    func = "plot_elbo_traces"
    if not isinstance(traces, dict) or not traces:
        raise bad_argument("traces", func, "a non-empty dict of label -> loss trace", traces, kind=TypeError)
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for label, trace in traces.items():
        values = np.asarray(trace, dtype=np.float64)
        if values.ndim != 1 or values.size == 0:
            raise bad_argument("traces", func, "one-dimensional, non-empty loss traces", f"shape {values.shape} for {label!r}", describe=False)
        ax.plot(np.arange(1, values.size + 1), values, label=str(label))
    ax.set_xlabel("step")
    ax.set_ylabel("loss (negative ELBO)")
    ax.legend()
    return _save(fig, path)
