"""One-call comparisons of spectral (warm) and default (cold) starts.

* :func:`compare_nuts` -- MCMC (NUTS, or the model's own kernel) from the
  estimate's per-chain initial values, spread by the estimate's
  uncertainty and optionally with its mass matrix, vs NumPyro's default
  ``init_to_uniform``: wall time, max split R-hat, bulk ESS (per second) and
  mean tree size (leapfrog steps per draw).
* :func:`compare_svi` -- SVI with ``AutoNormal``/``AutoDelta`` whose
  ``init_loc_fn`` is the estimate vs ``init_to_uniform``: loss traces, wall
  time and how many steps the warm run needs to reach the cold run's final
  loss.

Both runs of a comparison use the same data, PRNG seed, kernel/optimizer
and settings; only the initialization (and, with ``mass=True``, the
initial mass matrix) differs. Both take ``sites=`` for the user's own
models (:mod:`specinit.warmstart`). Wall times include JAX
compilation (each run compiles its own functions), as a user experiences
them.

Chains run with ``chain_method="sequential"`` by default: on a machine with
few CPU cores (or one accelerator) parallel chains need one device each.
Gibbs composite kernels (``lda.kernel``) run vectorized instead: NumPyro's
``Gibbs`` recompiles its step for every sequential chain (8 s a chain on
``lda.model`` with 150 documents) and refuses ``"vectorized"``, so their
chains are mapped with ``jax.vmap``, one compiled program for all.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Literal, Mapping, Sequence

import jax
import numpy as np
from numpyro import handlers
from numpyro.infer import MCMC, NUTS, SVI, Trace_ELBO, TraceEnum_ELBO, init_to_uniform
from numpyro.infer.autoguide import AutoDelta, AutoNormal
from numpyro.infer.hmc import HMC
from numpyro.optim import Adam

from specinit._validation import bad_argument, check_choice, check_int, check_positive
from specinit.conditional import check_structure, exact_kernel, find_structure
from specinit.posterior import convergence
from specinit.warmstart import (init_params, init_strategy, laplace, map_sites, site_info,
                                unconstrained_sites)

if TYPE_CHECKING:
    from numpyro.infer.mcmc import MCMCKernel

    from specinit.estimate import SpectralEstimate

__all__ = ["NutsComparison", "SviComparison", "compare_nuts", "compare_svi", "local_sites"]


def local_sites(model: Callable[..., Any], model_args: Sequence[Any] = (),
                model_kwargs: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """Latent sites local to the data: inside a plate that holds an observed site.

    Parameters
    ----------
    model : callable
        A NumPyro model.
    model_args, model_kwargs
        Arguments the model is called with (with observed data).

    Returns
    -------
    tuple of str
        Sorted names, e.g. ``("theta",)`` for LDA (per-document topic
        proportions in the ``documents`` plate).
    """
    sites = site_info(model, model_args, model_kwargs)
    data_plates = {plate for site in sites.values() if site.observed for plate in site.plates}
    return tuple(sorted(name for name, site in sites.items() if not site.observed and data_plates.intersection(site.plates)))


@dataclass
class NutsComparison:
    """Result of :func:`compare_nuts`.

    Attributes
    ----------
    warm, cold : numpyro.infer.MCMC
        The spectral-init and default-init runs (samples grouped by chain
        with ``get_samples(group_by_chain=True)``).
    warm_time, cold_time : float
        Wall-clock seconds of ``MCMC.run`` (warm-up, sampling, compilation).
    preparation_time : float
        Wall-clock seconds of the warm run's preparation: the Laplace
        Gaussian, the mass matrix and the chains' starts. The first call of
        NumPyro's ``initialize_model`` on a model runs it op by op and
        compiles each operation (16 s on ``lda.model`` with 150 documents);
        the preparation pays that once, and the runs after it find the
        operations compiled, so a run alone in a fresh process costs that
        much more than its ``*_time`` here.
    warm_rhat, cold_rhat : dict of str -> float
        Largest rank-normalized split R-hat of every latent site, per-document
        sites included (:func:`specinit.posterior.convergence`, the one
        R-hat of specinit).
    warm_ess, cold_ess : dict of str -> float
        Smallest bulk effective sample size of every latent site.
    global_sites : tuple of str
        The model's sites (with values from the estimate) outside the data
        plates; :meth:`summary` reports R-hat and ESS over these.
    warm_mean_steps, cold_mean_steps : float
        Mean number of leapfrog steps per sampling iteration (tree size) of
        NUTS (of the NUTS block of an :class:`specinit.conditional.ExactGibbs`
        kernel); NaN for another Gibbs composite.
    preparation_time : float
        See above.
    warm_divergences, cold_divergences : int
        Divergent transitions among the draws (all chains; -1 where the
        kernel does not report them).
    warm_max_depth, cold_max_depth : float
        Fraction of draws whose tree reached the maximal depth (NaN where
        not reported).
    warm_metric : str
        The warm run's initial inverse mass matrix: ``"identity"``
        (NumPyro's), ``"laplace"`` (the estimate's curvature), ``"laplace,
        identity on coupled sites: ..."`` (the curvature where it is
        trusted) or ``"identity after warm-up check: ..."`` (the estimate's
        metric was dropped, with the reason).
    sampler : str
        The kernel of both runs: ``"NUTS"``, ``"ExactGibbs(...)"`` with the
        sites drawn exactly, or the kernel's class name.
    """

    warm: MCMC
    cold: MCMC
    warm_time: float
    cold_time: float
    warm_rhat: dict
    cold_rhat: dict
    warm_ess: dict
    cold_ess: dict
    global_sites: tuple
    warm_mean_steps: float
    cold_mean_steps: float
    preparation_time: float
    warm_divergences: int = -1
    cold_divergences: int = -1
    warm_max_depth: float = float("nan")
    cold_max_depth: float = float("nan")
    warm_metric: str = "identity"
    sampler: str = "NUTS"

    def summary(self) -> dict[str, Any]:
        """Headline numbers over the global sites.

        Returns
        -------
        dict
            ``warm_time_s``, ``cold_time_s``, ``warm_preparation_s``
            (seconds); ``warm_max_rhat``, ``cold_max_rhat`` (largest
            rank-normalized split R-hat); ``warm_min_ess``, ``cold_min_ess``
            (smallest bulk ESS) and ``warm_ess_per_s``, ``cold_ess_per_s``
            (divided by the run's time); ``warm_mean_num_steps``,
            ``cold_mean_num_steps`` (leapfrog steps per draw);
            ``warm_divergences``, ``cold_divergences``;
            ``warm_max_depth_fraction``, ``cold_max_depth_fraction``;
            ``warm_metric`` and ``sampler`` (strings, see the attributes).
        """
        warm_ess = min(self.warm_ess[name] for name in self.global_sites)
        cold_ess = min(self.cold_ess[name] for name in self.global_sites)
        return {
            "warm_time_s": self.warm_time,
            "cold_time_s": self.cold_time,
            "warm_preparation_s": self.preparation_time,
            "warm_max_rhat": max(self.warm_rhat[name] for name in self.global_sites),
            "cold_max_rhat": max(self.cold_rhat[name] for name in self.global_sites),
            "warm_min_ess": warm_ess,
            "cold_min_ess": cold_ess,
            "warm_ess_per_s": warm_ess / self.warm_time,
            "cold_ess_per_s": cold_ess / self.cold_time,
            "warm_mean_num_steps": self.warm_mean_steps,
            "cold_mean_num_steps": self.cold_mean_steps,
            "warm_divergences": self.warm_divergences,
            "cold_divergences": self.cold_divergences,
            "warm_max_depth_fraction": self.warm_max_depth,
            "cold_max_depth_fraction": self.cold_max_depth,
            "warm_metric": self.warm_metric,
            "sampler": self.sampler,
        }


#: Warm-up check of an estimated metric (:func:`compare_nuts`): the largest fraction of divergent transitions in
#: the second half of the warm-up (beyond ``CHECK_MIN_DIVERGENT`` of them), and of trees at the maximal depth, before
#: the metric is dropped.
CHECK_DIVERGENT = 0.05
CHECK_MIN_DIVERGENT = 2
CHECK_DEEP = 0.5


def _kernel_factory(model, kernel, model_args, model_kwargs, exact: bool) -> tuple:
    """``make(**nuts_kwargs)`` building a fresh kernel of the runs, and the sampler's name.

    The user's factory, the model's declared kernel, the exact conditional
    sampler of a structure found in the model, or NUTS.
    """
    if kernel is not None:
        return kernel, "user kernel"
    declared = getattr(model, "kernel", None)
    if declared is not None:
        return (lambda **kw: declared(*model_args, **model_kwargs, **kw)), f"{model.__name__}.kernel"
    structure = find_structure(model, model_args, model_kwargs) if exact else None
    if structure is None:
        return (lambda **kw: NUTS(model, **kw)), "NUTS"
    check_structure(structure, model, model_args, model_kwargs)  # once; the kernels below skip it
    return ((lambda **kw: exact_kernel(model, model_args, model_kwargs, structure=structure, check=False, **kw)),
            f"ExactGibbs({', '.join(structure.gibbs_sites)})")


def _statistics(mcmc, max_tree_depth: int) -> tuple[int, float, float]:
    """Divergences, mean tree size and fraction of maximal trees of a run's draws (-1 / NaN where not recorded)."""
    fields = mcmc.get_extra_fields()
    divergences = int(np.sum(np.asarray(fields["diverging"]))) if "diverging" in fields else -1
    if "num_steps" not in fields:
        return divergences, float("nan"), float("nan")
    steps = np.asarray(fields["num_steps"])
    return divergences, float(np.mean(steps)), float(np.mean(steps >= 2 ** max_tree_depth - 1))


@contextlib.contextmanager
def _vectorized_runs(vectorized: bool):
    """Where chains run under ``jax.vmap``: NumPyro's draw collection donates buffers that JAX cannot reuse there,
    and JAX says so on every compilation (memory reuse only; the values are unaffected)."""
    with warnings.catch_warnings():
        if vectorized:
            warnings.filterwarnings("ignore", "Some donated buffers were not usable", UserWarning)
        yield


def _fields(kernel) -> tuple:
    return ("num_steps", "diverging") if isinstance(kernel, HMC) else ()  # ExactGibbs records both by default


def _nuts_run(kernel, init_params, key, model_args, model_kwargs, settings, max_tree_depth: int):
    mcmc = MCMC(kernel, **settings)
    start = time.perf_counter()
    mcmc.run(key, *model_args, init_params=init_params, extra_fields=_fields(kernel), **model_kwargs)
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    return _finished(mcmc, samples, time.perf_counter() - start, max_tree_depth)


def _finished(mcmc, samples, elapsed, max_tree_depth):
    table = convergence(samples)
    divergences, steps, deep = _statistics(mcmc, max_tree_depth)
    return mcmc, elapsed, table["r_hat"].to_dict(), table["ess_bulk"].to_dict(), steps, divergences, deep


def _checked_run(kernel, identity, init_params, key, model_args, model_kwargs, settings, max_tree_depth: int):
    """The warm run of ``kernel`` (with an estimated metric), checked in warm-up: ``identity()`` if it misbehaves.

    The warm-up runs with the metric; if the second half of it has more
    than ``CHECK_DIVERGENT`` divergent transitions (and more than
    ``CHECK_MIN_DIVERGENT``), or more than ``CHECK_DEEP`` of its trees at
    the maximal depth, the warm-up is run again from the same starts with the identity (NumPyro's
    adaptation). Both warm-ups count in the run's time.
    """
    start = time.perf_counter()
    mcmc = MCMC(kernel, **settings)
    mcmc.warmup(key, *model_args, init_params=init_params, extra_fields=("num_steps", "diverging"),
                collect_warmup=True, **model_kwargs)
    fields = mcmc.get_extra_fields(group_by_chain=True)
    half = settings["num_warmup"] // 2
    divergent = np.asarray(fields["diverging"])[:, half:] if "diverging" in fields else np.zeros(1, bool)
    deep = (float(np.mean(np.asarray(fields["num_steps"])[:, half:] >= 2 ** max_tree_depth - 1))
            if "num_steps" in fields else 0.0)
    reason = None
    if (np.mean(divergent) > CHECK_DIVERGENT and np.sum(divergent) > CHECK_MIN_DIVERGENT) or deep > CHECK_DEEP:
        reason = (f"identity after warm-up check: the estimate's metric gave {np.mean(divergent):.0%} divergent "
                  f"transitions and {deep:.0%} trees at the maximal depth in the second half of warm-up")
        kernel = identity()
        mcmc = MCMC(kernel, **settings)
        mcmc.warmup(key, *model_args, init_params=init_params, **model_kwargs)
    mcmc.run(jax.random.fold_in(key, 1), *model_args, extra_fields=_fields(kernel), **model_kwargs)
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    return _finished(mcmc, samples, time.perf_counter() - start, max_tree_depth), reason


def compare_nuts(
    model: Callable[..., Any],
    estimate: SpectralEstimate,
    model_args: Sequence[Any] = (),
    model_kwargs: Mapping[str, Any] | None = None,
    *,
    sites: Sequence[str] | Mapping[str, str | Callable[..., Any]] | None = None,
    fallback: Collection[str] = (),
    num_chains: int = 4,
    num_warmup: int = 500,
    num_samples: int = 500,
    spread: float | Literal["laplace"] = "laplace",
    mass: bool | None = None,
    kernel: Callable[..., MCMCKernel] | None = None,
    exact: bool = True,
    seed: int = 0,
    progress_bar: bool = False,
    chain_method: Literal["sequential", "parallel", "vectorized"] | None = None,
    nuts_kwargs: Mapping[str, Any] | None = None,
) -> NutsComparison:
    """Run MCMC from the spectral estimate and from NumPyro's default init, with the same kernel.

    Parameters
    ----------
    model : callable
        The NumPyro model (the library's or the user's own, with enumerated
        discrete sites if it has any).
    estimate : SpectralEstimate
    model_args, model_kwargs
        Arguments of the model (with the observed data), as for ``MCMC.run``.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources in the estimate
        (:func:`specinit.warmstart.init_params`).
    fallback : collection of str
        Model sites left to NumPyro's default initialisation in the warm run.
    num_chains, num_warmup, num_samples : int
        As for ``numpyro.infer.MCMC``; both runs use the same values.
    spread : float or "laplace"
        How the warm chains' starts scatter around the estimate
        (:func:`specinit.warmstart.init_params`): ``"laplace"`` draws them
        from the estimate's own uncertainty; a float is a fixed standard
        deviation in the unconstrained space.
    mass : bool, optional
        The warm run's initial inverse mass matrix. ``None`` (default): the
        covariance of :func:`specinit.warmstart.laplace` over the sites
        NUTS moves, with the coordinates of coupled sites (simplexes,
        Cholesky factors: :attr:`specinit.warmstart.SiteInfo.coupled`) at
        NumPyro's identity (the identity itself when every site is
        coupled); ``True``: the whole covariance; ``False``: the
        identity. ``None`` is ``False`` for a Gibbs composite kernel, whose
        NUTS block moves its sites given Gibbs-drawn ones (the Laplace
        Gaussian is conditional on those at the estimate, where the chains
        never are). An estimated metric is checked in warm-up (more than
        ``CHECK_DIVERGENT`` divergent or ``CHECK_DEEP`` deep trees in its
        second half): if it fails, the warm-up is rerun with the identity and
        ``warm_metric`` says why. ``benchmarks/RESULTS.md`` has the
        measurements (the whole covariance pushed NUTS to 455-1,009 leapfrog
        steps per draw on an LKJ mixture and NumPyro's ``scan`` HMM).
    kernel : callable, optional
        ``kernel(**nuts_kwargs) -> numpyro.infer.MCMCKernel``, a fresh kernel
        for each run. Default: the model's own kernel when it declares one
        (``model.kernel(*model_args, **model_kwargs, **nuts_kwargs)``;
        ``lda.model`` declares exact conjugate Gibbs updates of ``beta`` and
        ``theta`` with NUTS for ``alpha``, see :func:`specinit.models.lda.kernel`),
        else, with ``exact=True``, the exact conditional sampler of a
        structure found in the model (:func:`specinit.conditional.exact_kernel`:
        the user's LDA or mixture of multinomials), otherwise
        ``NUTS(model, **nuts_kwargs)``.
    exact : bool
        Look for a conjugate structure in the model
        (:func:`specinit.conditional.find_structure`) and sample its sites
        exactly. A model with the structure's sites but another log density
        is a ``ValueError`` (pass ``exact=False`` for NUTS on every site).
    seed : int
        Seeds the spread and both runs (the same sampling key).
    progress_bar : bool
        NumPyro's progress bar; none where a Gibbs composite's chains run
        vectorized (NumPyro has none for chains under ``jax.vmap``).
    chain_method : {"sequential", "parallel", "vectorized"}, optional
        As for ``numpyro.infer.MCMC``; ``"vectorized"`` runs a Gibbs
        composite's chains under ``jax.vmap``. Default: ``"vectorized"``
        for a Gibbs composite kernel, ``"sequential"`` otherwise (see the
        module notes).
    nuts_kwargs : dict, optional
        Keyword arguments of both runs' NUTS (e.g. ``max_tree_depth``).

    Returns
    -------
    NutsComparison

    Raises
    ------
    ValueError
        Bad settings, a site mapping that does not match the model (from
        :func:`specinit.warmstart.init_params`), or a model whose
        structure's log density does not check
        (:func:`specinit.conditional.check_structure`).
    """
    func = "compare_nuts"
    num_chains = check_int(num_chains, "num_chains", func, minimum=1)
    settings = {
        "num_warmup": check_int(num_warmup, "num_warmup", func, minimum=1),
        "num_samples": check_int(num_samples, "num_samples", func, minimum=4),
        "num_chains": num_chains,
        "progress_bar": bool(progress_bar),
    }
    if chain_method is not None:
        check_choice(chain_method, "chain_method", func, ("sequential", "parallel", "vectorized"))
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    nuts_kwargs = dict(nuts_kwargs or {})
    max_tree_depth = nuts_kwargs.get("max_tree_depth", 10)
    max_tree_depth = max_tree_depth if isinstance(max_tree_depth, int) else max(max_tree_depth)
    init_key, run_key = jax.random.split(jax.random.PRNGKey(check_int(seed, "seed", func, minimum=0)))
    start = time.perf_counter()
    make, sampler = _kernel_factory(model, kernel, model_args, model_kwargs, bool(exact))
    cold_kernel = make(**nuts_kwargs)
    gibbs = not isinstance(cold_kernel, HMC)  # a composite whose NUTS block moves some sites
    chain_method = chain_method or ("vectorized" if gibbs else "sequential")
    settings["chain_method"] = jax.vmap if gibbs and chain_method == "vectorized" else chain_method
    vectorized = callable(settings["chain_method"]) and num_chains > 1
    if vectorized:
        settings["progress_bar"] = False  # NumPyro has no bar for chains under jax.vmap (and warns when asked)
    info = site_info(model, model_args, model_kwargs)
    over = unconstrained_sites(cold_kernel, [name for name, site in info.items()
                                             if not site.observed and not site.discrete])
    by_laplace = isinstance(spread, str) and spread == "laplace"
    mass = False if mass is None and gibbs else mass  # a Gibbs block's Laplace is conditional on the estimate
    gaussian = None
    if over and (mass is not False or by_laplace):
        gaussian = laplace(estimate, model, sites=sites, fallback=fallback, model_args=model_args,
                           model_kwargs=model_kwargs, over=over)
    metric, warm_metric = {}, "identity"
    coupled = [name for name in over if info[name].coupled] if mass is None else []
    if mass is not False and gaussian is not None and len(coupled) < len(over):
        matrix = gaussian.decoupled(coupled).covariance
        metric = {"inverse_mass_matrix": matrix, "dense_mass": matrix.ndim == 2}
        warm_metric = f"laplace, identity on coupled sites: {', '.join(coupled)}" if coupled else "laplace"
    if by_laplace and gaussian is not None:
        spread = gaussian  # the same Gaussian, not computed again
    warm_kernel = make(**nuts_kwargs, **metric) if metric else cold_kernel
    init = init_params(estimate, model, num_chains, init_key, spread=spread, sites=sites, fallback=fallback,
                       model_args=model_args, model_kwargs=model_kwargs, kernel=warm_kernel)
    preparation = time.perf_counter() - start
    with _vectorized_runs(vectorized):
        if metric:
            warm, reason = _checked_run(warm_kernel, lambda: make(**nuts_kwargs), init, run_key, model_args,
                                        model_kwargs, settings, max_tree_depth)
            warm_metric = reason or warm_metric
        else:
            warm = _nuts_run(warm_kernel, init, run_key, model_args, model_kwargs, settings, max_tree_depth)
        cold = _nuts_run(make(**nuts_kwargs), None, run_key, model_args, model_kwargs, settings, max_tree_depth)
    local = set(local_sites(model, model_args, model_kwargs))
    mapped = map_sites(estimate, sites, func=func)
    global_sites = tuple(name for name in mapped.params if name not in local and name in warm[2])
    if not global_sites:
        raise bad_argument("estimate", func, "an estimate with at least one global site of the model", sorted(mapped.params))
    return NutsComparison(warm[0], cold[0], warm[1], cold[1], warm[2], cold[2], warm[3], cold[3], global_sites,
                          warm[4], cold[4], preparation, warm[5], cold[5], warm[6], cold[6], warm_metric, sampler)


def _smooth(losses: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average (partial windows at the start) over the finite losses.

    A non-finite step (a Monte Carlo ELBO sample that overflowed) is left out
    of every window it falls in rather than turning the average into NaN;
    :meth:`SviComparison.summary` reports how many there were.
    """
    finite = np.isfinite(losses)
    csum = np.cumsum(np.concatenate([[0.0], np.where(finite, losses, 0.0)]))
    ccount = np.cumsum(np.concatenate([[0], finite.astype(np.int64)]))
    ends = np.arange(1, losses.size + 1)
    starts = np.maximum(ends - window, 0)
    counts = ccount[ends] - ccount[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, (csum[ends] - csum[starts]) / np.maximum(counts, 1), np.nan)


@dataclass
class SviComparison:
    """Result of :func:`compare_svi`.

    Attributes
    ----------
    warm_losses, cold_losses : ndarray, shape (num_steps,)
        Loss (negative ELBO) per step of the spectral-init and the
        ``init_to_uniform`` runs.
    warm_time, cold_time : float
        Wall-clock seconds of ``SVI.run`` (compilation included).
    warm_params, cold_params : dict
        Final variational parameters of each run.
    guide : str
        ``"normal"`` (``AutoNormal``) or ``"delta"`` (``AutoDelta``).
    window : int
        Moving-average window of the smoothed losses.
    """

    warm_losses: np.ndarray
    cold_losses: np.ndarray
    warm_time: float
    cold_time: float
    warm_params: dict = field(repr=False)
    cold_params: dict = field(repr=False)
    guide: str = "normal"
    window: int = 50

    def smoothed(self, which: str = "warm") -> np.ndarray:
        """Trailing moving average of a run's losses over ``window`` steps."""
        check_choice(which, "which", "SviComparison.smoothed", ("warm", "cold"))
        losses = self.warm_losses if which == "warm" else self.cold_losses
        return _smooth(np.asarray(losses, dtype=np.float64), self.window)

    def steps_to_reach(self, target: float | None = None) -> int | None:
        """Steps the warm run needs until its smoothed loss is <= ``target``.

        Parameters
        ----------
        target : float, optional
            Loss level; by default the cold run's final smoothed loss.

        Returns
        -------
        int or None
            The number of steps taken (1-based) when the warm run's smoothed
            loss first reaches ``target``; ``None`` if it never does.
        """
        target = self.smoothed("cold")[-1] if target is None else float(target)
        reached = np.flatnonzero(self.smoothed("warm") <= target)
        return int(reached[0]) + 1 if reached.size else None

    def summary(self) -> dict[str, Any]:
        """Headline numbers; ``steps_to_reach`` is NaN when never reached."""
        steps = self.steps_to_reach()
        return {
            "warm_time_s": self.warm_time,
            "cold_time_s": self.cold_time,
            "warm_initial_loss": float(self.warm_losses[0]),
            "cold_initial_loss": float(self.cold_losses[0]),
            "warm_final_loss": float(self.smoothed("warm")[-1]),
            "cold_final_loss": float(self.smoothed("cold")[-1]),
            "steps_to_reach": float("nan") if steps is None else float(steps),
            "warm_nonfinite_steps": int(np.sum(~np.isfinite(self.warm_losses))),
            "cold_nonfinite_steps": int(np.sum(~np.isfinite(self.cold_losses))),
        }


_GUIDES = {"normal": AutoNormal, "delta": AutoDelta}


def _svi_run(model, guide_cls, init_loc_fn, lr, num_steps, key, model_args, model_kwargs):
    # enumerated discrete sites: the guide covers the continuous sites only, the ELBO sums the discrete ones out
    discrete = [name for name, site in site_info(model, model_args, model_kwargs).items()
                if site.discrete and not site.observed]
    guide = guide_cls(handlers.block(model, hide=discrete) if discrete else model, init_loc_fn=init_loc_fn)
    svi = SVI(model, guide, Adam(lr), TraceEnum_ELBO() if discrete else Trace_ELBO())
    start = time.perf_counter()
    result = svi.run(key, num_steps, *model_args, progress_bar=False, **model_kwargs)
    losses = np.asarray(jax.block_until_ready(result.losses), dtype=np.float64)
    return losses, time.perf_counter() - start, result.params


def compare_svi(
    model: Callable[..., Any],
    estimate: SpectralEstimate,
    model_args: Sequence[Any] = (),
    model_kwargs: Mapping[str, Any] | None = None,
    *,
    sites: Sequence[str] | Mapping[str, str | Callable[..., Any]] | None = None,
    fallback: Collection[str] = (),
    guide: Literal["normal", "delta"] = "normal",
    num_steps: int = 2000,
    lr: float = 0.01,
    seed: int = 0,
    window: int = 50,
) -> SviComparison:
    """Run SVI with the guide initialised at the estimate and at ``init_to_uniform``.

    Parameters
    ----------
    model : callable
        The NumPyro model. With discrete latent sites (enumerated), the
        guide covers the continuous sites and ``TraceEnum_ELBO`` sums the
        discrete ones out.
    estimate : SpectralEstimate
    model_args, model_kwargs
        Arguments of the model (with the observed data).
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources in the estimate
        (:func:`specinit.warmstart.init_strategy`).
    fallback : collection of str
        Model sites left to ``init_to_uniform`` in the warm run too (any
        other site without a value is an error).
    guide : {"normal", "delta"}
        ``AutoNormal`` (mean-field) or ``AutoDelta`` (MAP).
    num_steps : int
        Optimization steps of each run.
    lr : float
        Step size of ``numpyro.optim.Adam`` (same for both runs).
    seed : int
        PRNG seed shared by both runs.
    window : int
        Moving-average window for :meth:`SviComparison.steps_to_reach`.

    Returns
    -------
    SviComparison

    Raises
    ------
    ValueError
        Unknown ``guide`` or bad step settings.
    """
    func = "compare_svi"
    guide_cls = _GUIDES[check_choice(guide, "guide", func, tuple(_GUIDES))]
    num_steps = check_int(num_steps, "num_steps", func, minimum=1)
    lr = check_positive(lr, "lr", func)
    window = check_int(window, "window", func, minimum=1)
    key = jax.random.PRNGKey(check_int(seed, "seed", func, minimum=0))
    model_args = tuple(model_args)
    model_kwargs = dict(model_kwargs or {})
    warm = _svi_run(model, guide_cls, init_strategy(estimate, sites, fallback=fallback), lr, num_steps, key, model_args, model_kwargs)
    cold = _svi_run(model, guide_cls, init_to_uniform, lr, num_steps, key, model_args, model_kwargs)
    return SviComparison(warm[0], cold[0], warm[1], cold[1], warm[2], cold[2], guide, window)
