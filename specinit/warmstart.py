"""The NumPyro boundary: spectral estimates as initial values, spreads, mass matrices and point estimates.

* :func:`init_strategy` -- an init strategy with the estimate's constrained
  values (for ``NUTS(init_strategy=...)`` and a guide's ``init_loc_fn``);
* :func:`init_params` -- per-chain UNCONSTRAINED values with a leading chain
  axis, for ``MCMC.run(key, init_params=...)``, spread around the estimate
  by a fixed amount or by the estimate's own uncertainty (:func:`laplace`);
  the potential energy and its gradient are checked to be finite at every
  chain's point;
* :func:`inverse_mass_matrix` -- an initial (diagonal or dense) inverse mass
  matrix for ``NUTS(inverse_mass_matrix=...)`` from the same uncertainty, so
  that warm-up adapts from the right scale;
* :func:`condition` -- the model with the estimate plugged in (a point
  estimate; use with ``numpyro.infer.Predictive`` or ``log_likelihood``).

**The user's model, the user's names.** Every function takes ``sites``, the
model's sites and where their values come from:

* ``None`` -- every parameter of the estimate, under its own name (the
  library's own models);
* a list of names -- those parameters of the estimate, under their own names;
* a mapping ``{model site: source}``, where the source is the name of an
  estimate parameter or a callable that takes the estimate's parameters (a
  dict of NumPy arrays) and returns the site's value, e.g.
  ``{"weights": "weights", "locs": "loc",
  "scale": lambda p: np.sqrt(np.mean(p["scale"] ** 2))}``.

:func:`map_sites` resolves it once: the result is an estimate whose
parameters are the model's sites (a site mapped by name keeps the source
parameter's component axes, so posterior draws are aligned through the
mapping). Where the model is known, every named site must be a continuous
latent site of the model, every continuous latent site must have a value
(sites left to NumPyro's ``init_to_uniform`` are listed in ``fallback``:
the only way to leave one out), and each value must have the site's shape
and lie in its support; anything else is a ``ValueError`` naming the site
and listing the model's sites. Discrete latent sites (NumPyro enumerates
them, ``infer={"enumerate": "parallel"}``) are never initialised: NumPyro
sums them out.

Values are cast to JAX's default float dtype (float32 unless the user
enabled x64) only here, at the boundary.

**Threads.** NumPyro keeps its stack of effect handlers in one global list
(``numpyro.primitives._PYRO_STACK``), shared by every thread: two threads
tracing models at once see each other's sites. The functions here that trace
the model (:func:`site_info`, :func:`latent_sites`, :func:`init_params`,
:func:`laplace`, :func:`inverse_mass_matrix`, and the
:class:`~specinit.SpectralEstimate` methods that call them) hold
:data:`TRACE_LOCK` while they do, so they may be called from several threads
at once: the calls run one after another and each returns what it returns
alone. Running the user's model elsewhere (``MCMC``, ``Predictive``, the model
:func:`condition` returns) in several threads at once is NumPyro's concern,
not made safe here.
"""

from __future__ import annotations

import functools
import numbers
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, ParamSpec, TypeAlias, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions import constraints
from numpyro.infer import init_to_uniform
from numpyro.infer.gibbs import Gibbs
from numpyro.infer.hmc import HMC
from numpyro.distributions.transforms import biject_to
from numpyro.primitives import Messenger
from numpyro.infer.util import initialize_model

from specinit._validation import bad_argument, check_int, check_positive, warn
from specinit.estimate import Site, SpectralEstimate

if TYPE_CHECKING:
    from numpyro.infer.mcmc import MCMCKernel

#: A model's sites and their sources: the estimate's names, or model site -> parameter name (str) or callable (a
#: dict literal mixing both is inferred as ``dict[str, object]``, which this accepts).
SiteMap: TypeAlias = Sequence[str] | Mapping[str, object] | None

__all__ = [
    "Laplace",
    "SiteInfo",
    "condition",
    "init_params",
    "init_strategy",
    "inverse_mass_matrix",
    "laplace",
    "latent_sites",
    "map_sites",
    "site_info",
    "unconstrained_sites",
]

#: Above this many unconstrained coordinates :func:`laplace` keeps the diagonal of the Hessian only.
DENSE_LIMIT = 2000


class SiteInfo(NamedTuple):
    """What a trace of the model says about one sample site.

    Attributes
    ----------
    shape : tuple of int
        The value's shape (plates included).
    observed : bool
        An observed (data) site.
    plates : tuple of str
        Names of the enclosing plates, outermost first.
    discrete : bool
        A discrete latent site (NumPyro enumerates it; it is never initialised).
    support : numpyro.distributions.constraints.Constraint
        The site's support.
    """

    shape: tuple[int, ...]
    observed: bool
    plates: tuple[str, ...]
    discrete: bool
    support: constraints.Constraint

    @property
    def coupled(self) -> bool:
        """Whether NumPyro's unconstrained coordinates of the site map to its values jointly.

        A simplex (stick-breaking), a Cholesky factor or an ordered vector:
        the transform acts on whole rows or matrices, entries near the
        support's boundary (small probabilities) sit far out in the
        coordinates, and the curvature at one point says little about the
        next. Reals, positives and intervals are mapped entry by entry.
        """
        support = self.support
        while isinstance(support, constraints.independent):
            support = support.base_constraint
        return not self.discrete and biject_to(support).domain.event_dim > 0


#: Held while a function of this module traces the user's model under NumPyro's handlers (module notes: Threads).
TRACE_LOCK = threading.RLock()


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _one_trace_at_a_time(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` run while holding :data:`TRACE_LOCK` (NumPyro's handler stack is shared by every thread)."""

    @functools.wraps(func)
    def serialized(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with TRACE_LOCK:
            return func(*args, **kwargs)

    return serialized


@_one_trace_at_a_time
def site_info(model: Callable[..., Any], model_args: Sequence[Any] = (),
              model_kwargs: Mapping[str, Any] | None = None) -> dict[str, SiteInfo]:
    """Every sample site of ``model``, traced abstractly (``jax.eval_shape``: nothing is computed).

    Parameters
    ----------
    model : callable
        A NumPyro model.
    model_args : tuple
        Its positional arguments.
    model_kwargs : dict, optional
        Its keyword arguments.

    Returns
    -------
    dict of str -> SiteInfo
        Shape, whether observed, the enclosing plates, whether discrete and
        the support.

    Notes
    -----
    Safe to call from several threads at once: the model is traced while
    holding :data:`TRACE_LOCK`, so concurrent calls run one after another
    (NumPyro's handler stack is global; module notes, Threads).
    """
    model_kwargs = model_kwargs or {}
    flags = {}

    def values():
        trace = handlers.trace(handlers.seed(model, jax.random.PRNGKey(0))).get_trace(*model_args, **model_kwargs)
        sites = {name: site for name, site in trace.items() if site["type"] == "sample"}
        flags.update({
            name: (bool(site["is_observed"]), tuple(f.name for f in reversed(site["cond_indep_stack"])),
                   bool(site["fn"].support.is_discrete), site["fn"].support)
            for name, site in sites.items()
        })
        return {name: site["value"] for name, site in sites.items()}

    shapes = jax.eval_shape(values)
    return {name: SiteInfo(tuple(shapes[name].shape), *flags[name]) for name in shapes}


def latent_sites(model: Callable[..., Any], model_args: Sequence[Any] = (),
                 model_kwargs: Mapping[str, Any] | None = None) -> dict[str, tuple[int, ...]]:
    """Shapes of the continuous latent sites of ``model``: the sites an estimate gives values to.

    Parameters
    ----------
    model : callable
        A NumPyro model.
    model_args : tuple
        Its positional arguments.
    model_kwargs : dict, optional
        Its keyword arguments.

    Returns
    -------
    dict of str -> tuple
        Site name -> shape, for every non-observed, non-discrete sample site.

    Notes
    -----
    Safe to call from several threads at once: the model is traced while
    holding :data:`TRACE_LOCK`, so concurrent calls run one after another
    (NumPyro's handler stack is global; module notes, Threads).
    """
    return {name: info.shape for name, info in site_info(model, model_args, model_kwargs).items()
            if not info.observed and not info.discrete}


# --- the site mapping ---------------------------------------------------------------------------------------------

def _source_value(estimate, site: str, source, func: str) -> tuple[np.ndarray, Site | None]:
    """The value of a model site and, when it is an estimate parameter, that parameter's facts."""
    if isinstance(source, str):
        if source not in estimate.params:
            raise bad_argument("sites", func, f"a mapping onto the estimate's parameters ({sorted(estimate.params)})",
                               f"{site!r}: {source!r}", describe=False)
        return estimate.params[source], estimate.sites.get(source)
    if not callable(source):
        raise bad_argument("sites", func, "a mapping of model site -> estimate parameter name or callable",
                           f"{site!r}: {source!r}", kind=TypeError, describe=False)
    try:
        value = np.asarray(source({name: value.copy() for name, value in estimate.params.items()}), dtype=np.float64)
    except (TypeError, ValueError, KeyError) as exc:
        raise bad_argument("sites", func, "callables that take the estimate's parameters (a dict of NumPy arrays "
                           f"{sorted(estimate.params)}) and return a numeric array",
                           f"{site!r}: a callable that raised {type(exc).__name__}: {exc}", describe=False) from None
    if not np.all(np.isfinite(value)):
        raise bad_argument("sites", func, "callables that return finite values",
                           f"non-finite values for {site!r}", describe=False)
    return value, None


def map_sites(estimate: SpectralEstimate, sites: SiteMap = None, *, func: str = "map_sites") -> SpectralEstimate:
    """The estimate with its parameters renamed (or derived) to a model's sites.

    Parameters
    ----------
    estimate : SpectralEstimate
        The source.
    sites : None, list of str, or dict of str -> str or callable
        ``None``: every parameter under its own name; a list: those
        parameters under their own names; a dict: model site -> estimate
        parameter name, or a callable ``params -> value`` (see the module
        notes).
    func : str
        The public function named in errors.

    Returns
    -------
    SpectralEstimate
        Parameters keyed by model site. A site mapped by name keeps that
        parameter's support and component axes (so
        :func:`specinit.align.align_draws` relabels it; its ArviZ dims are
        the model's own, read from its plates, unless the list form keeps
        the estimate's names); a derived site has none (support
        ``"real"``). The matching site is the model's name of the
        estimate's matching site when it is mapped by name, otherwise the
        first mapped site with one component axis.

    Raises
    ------
    ValueError
        An estimate changed in place out of its sites' supports, an unknown
        estimate parameter, or a callable that fails or returns non-finite
        values.
    TypeError
        ``sites`` of another type.
    """
    if not isinstance(estimate, SpectralEstimate):
        raise bad_argument("estimate", func, "a SpectralEstimate", estimate, kind=TypeError)
    estimate.check_values("estimate", func)
    if sites is None:
        return estimate
    if isinstance(sites, str) or not isinstance(sites, (Mapping, list, tuple)):
        raise bad_argument("sites", func, "None, a list of estimate parameters, or a dict of model site -> estimate "
                           "parameter name or callable", sites, kind=TypeError)
    mapping = dict(sites) if isinstance(sites, Mapping) else {name: name for name in sites}
    if not mapping:
        raise bad_argument("sites", func, "a non-empty list or mapping", sites)
    params, facts = {}, {}
    for site, source in mapping.items():
        if not isinstance(site, str):
            raise bad_argument("sites", func, "a mapping keyed by model site names (str)", site, kind=TypeError)
        params[site], fact = _source_value(estimate, site, source, func)
        renamed = isinstance(sites, Mapping) and fact is not None
        facts[site] = Site(fact.support, fact.axes) if renamed else fact or Site("real")
    by_name = {source: site for site, source in mapping.items() if isinstance(source, str)}
    match = by_name.get(estimate.match_site) or next(
        (site for site, fact in facts.items() if len(fact.axes) == 1), None)
    return SpectralEstimate(estimate.model, params, estimate.diagnostics, estimate.vocabulary, k=estimate.k,
                            sites=facts, match_site=match, state=estimate.state)


def _fallback(fallback, func: str) -> frozenset:
    if isinstance(fallback, str) or not isinstance(fallback, (list, tuple, set, frozenset)):
        raise bad_argument("fallback", func, "a collection of model site names", fallback, kind=TypeError)
    return frozenset(fallback)


def _check_model(mapped: SpectralEstimate, fallback: frozenset, latent: Mapping[str, tuple], func: str) -> None:
    """Check the mapped values against the model's continuous latent sites (name -> shape)."""
    listing = f"the model's continuous latent sites ({sorted(latent)})"
    for name, values in (("sites", mapped.params), ("fallback", fallback)):
        unknown = sorted(set(values) - set(latent))
        if unknown:
            raise bad_argument(name, func, f"a mapping onto {listing}", f"{unknown}, not among them", describe=False)
    missing = sorted(set(latent) - set(mapped.params) - fallback)
    if missing:
        raise bad_argument("sites", func, f"a mapping that covers every one of {listing}; list sites left to "
                           "NumPyro's default initialisation in 'fallback'", f"no value for {missing}", describe=False)
    for name, value in mapped.params.items():
        if value.shape != tuple(latent[name]):
            raise bad_argument("sites", func, f"values of the model's shapes ({name!r}: {tuple(latent[name])})",
                               f"shape {value.shape} for {name!r}", describe=False)


def _init_to_estimate(site=None, *, values, fallback, func, problems=None):
    """NumPyro init strategy: the estimate's value, ``init_to_uniform`` for fallback and discrete sites.

    With ``problems`` (a dict), a site without a value, with a value of another shape or outside its support is
    recorded there (site name -> the error) and given ``init_to_uniform``'s value instead, so that the model runs
    on and its trace lists every site (:func:`_start` raises after it); without, such a site raises at once.
    """
    if site is None:
        return partial(_init_to_estimate, values=values, fallback=fallback, func=func, problems=problems)
    if site["type"] != "sample" or site["is_observed"]:
        return None
    name = site["name"]
    if name not in values:
        if site["fn"].support.is_discrete or name in fallback:
            return init_to_uniform(site)
        error = bad_argument("sites", func, f"a mapping that covers the model's site {name!r} (mapped: "
                             f"{sorted(values)}; list sites left to NumPyro's default initialisation in 'fallback')",
                             f"no value for {name!r}", describe=False)
    else:
        value = values[name]
        if problems is not None and value.shape != site["fn"].shape(site["kwargs"].get("sample_shape", ())):
            error = None  # reported by _check_model, which lists the model's shapes
        else:
            inside = site["fn"].support(value)
            if isinstance(inside, jax.core.Tracer) or bool(np.all(np.asarray(inside))):
                return _representable(value, site["fn"].support)
            finite = bool(np.all(np.isfinite(np.asarray(value))))
            error = bad_argument("sites", func, f"values inside each site's support ({name!r}: "
                                 f"{site['fn'].support})", f"values outside it for {name!r}"
                                 f"{'' if finite else ' (NaN or infinite entries)'}", describe=False)
    if problems is None:
        raise error
    problems.setdefault(name, error)
    return init_to_uniform(site)


def _representable(value, support):
    """Simplex values that survive NumPyro's stick-breaking round trip in float32 (floored, renormalised).

    In float32 the stick-breaking transform loses entries below about the
    float's resolution times the mass left in the stick (the inverse maps
    them to unconstrained values whose image is exactly 0, and a Dirichlet
    density is NaN there). Entries are floored at ``min(1e-6, 0.01 / size)``
    (at most 1% of a row's mass moves); the log-ratio simplex of the topic
    models and float64 keep their values.
    """
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    if value.dtype != jnp.float32 or type(support) is not type(constraints.simplex) or value.shape[-1] < 2:
        return value
    floored = np.maximum(np.asarray(value, dtype=np.float64), min(1e-6, 0.01 / value.shape[-1]))
    return jnp.asarray(floored / floored.sum(axis=-1, keepdims=True), dtype=value.dtype)


def _as_jax(params: Mapping) -> dict:
    dtype = jnp.result_type(float)
    return {name: jnp.asarray(value, dtype=dtype) for name, value in params.items()}


def init_strategy(estimate: SpectralEstimate, sites: SiteMap = None, *,
                  fallback: Collection[str] = ()) -> Callable[..., Any]:
    """An init strategy with the estimate's constrained values.

    Parameters
    ----------
    estimate : SpectralEstimate
        The values.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources (module notes).
    fallback : collection of str
        Model sites left to NumPyro's ``init_to_uniform``. Any other
        continuous latent site without a value is an error when NumPyro asks
        for it.

    Returns
    -------
    callable
        A NumPyro init strategy for ``NUTS(init_strategy=...)`` or a guide's
        ``init_loc_fn``. Discrete sites go to ``init_to_uniform``.

    Raises
    ------
    ValueError
        When NumPyro calls it: a site without a value (not in ``fallback``),
        or a value outside its site's support. At once: a bad ``sites``.
    """
    func = "init_strategy"
    mapped = map_sites(estimate, sites, func=func)
    return _init_to_estimate(values=_as_jax(mapped.params), fallback=_fallback(fallback, func), func=func)


class _Start(NamedTuple):
    """The estimate in the model's unconstrained space, with the model's potential energy."""

    z: dict
    potential_fn: Callable
    model_trace: dict


def _raise_first(problems: Mapping) -> None:
    """Raise the first error recorded by :func:`_init_to_estimate` (a shape's is None: :func:`_check_model`'s)."""
    for error in problems.values():
        if error is not None:
            raise error


def _start(estimate, model, sites, fallback, model_args, model_kwargs, func: str) -> _Start:
    """The estimate's start in the model: the model traced once, by NumPyro's ``initialize_model``, whose trace
    gives the sites the mapping is checked against (a value the model could not run on is replaced by
    ``init_to_uniform``'s while the model runs, and reported after)."""
    mapped = map_sites(estimate, sites, func=func)
    fallback = _fallback(fallback, func)
    model_kwargs = dict(model_kwargs or {})
    problems: dict = {}
    strategy = _init_to_estimate(values=_as_jax(mapped.params), fallback=fallback, func=func, problems=problems)
    try:
        info = initialize_model(jax.random.PRNGKey(0), model, init_strategy=strategy, model_args=tuple(model_args),
                                model_kwargs=model_kwargs)
    except RuntimeError as exc:
        if problems:  # the mapping's error, named against the model's sites (a trace on this error path only)
            _check_model(mapped, fallback, latent_sites(model, model_args, model_kwargs), func)
            _raise_first(problems)
        raise bad_argument("estimate", func, "values at which the model's potential energy and its gradient are "
                           "finite", f"{exc} (check the floor of the estimate and the sites' values)",
                           describe=False) from None
    latent = {name: tuple(jnp.shape(site["value"])) for name, site in info.model_trace.items()
              if site["type"] == "sample" and not site["is_observed"] and not site["fn"].support.is_discrete}
    _check_model(mapped, fallback, latent, func)
    _raise_first(problems)
    return _Start(info.param_info.z, info.potential_fn, info.model_trace)


def unconstrained_sites(kernel: MCMCKernel | None, z: Collection[str]) -> tuple[str, ...]:
    """The sites a kernel moves in the unconstrained space: all but those of a Gibbs composite's non-HMC blocks.

    Parameters
    ----------
    kernel : numpyro.infer.MCMCKernel or None
        The kernel (``None``: NUTS on every site).
    z : collection of str
        The model's continuous latent sites.

    Returns
    -------
    tuple of str
        Sorted names.
    """
    if not isinstance(kernel, Gibbs):
        return tuple(sorted(z))
    others = set()
    for block, spec in kernel.blocks:
        if not isinstance(block, HMC) and spec is not None and not callable(spec):
            others.update(spec)
    return tuple(sorted(set(z) - others))


def _check_finite(potential_fn, chains: dict, num_chains: int, func: str) -> None:
    """Raise unless every chain's start has a finite potential energy and gradient.

    The chains are evaluated at once (``jax.vmap``: the model runs once whatever their number), compiled: op by
    op, JAX compiles every operation of the potential and its gradient on its own, none of them long enough for
    the persistent compilation cache, in every process (a fresh process, 4 chains: 13.2 s against 2.0 s compiled
    for ``lda.model`` on 20 documents, 38.8 s against 5.4 s for an enumerated ``scan`` HMM).
    """
    energy, grads = jax.jit(jax.vmap(jax.value_and_grad(potential_fn)))(chains)
    bad = ~np.isfinite(np.asarray(energy))
    for g in jax.tree_util.tree_leaves(grads):
        bad |= ~np.all(np.isfinite(np.asarray(g)).reshape(num_chains, -1), axis=1)
    if bad.any():
        raise bad_argument(
            "estimate", func, "a point with finite potential energy and gradient",
            f"non-finite values for chains {np.flatnonzero(bad).tolist()} (reduce the spread, or check the floor "
            "of the estimate)", describe=False,
        )


@_one_trace_at_a_time
def init_params(estimate: SpectralEstimate, model: Callable[..., Any], num_chains: int, key: jax.Array, *,
                spread: float | Literal["laplace"] | Laplace = 0.0, sites: SiteMap = None,
                fallback: Collection[str] = (), model_args: Sequence[Any] = (),
                model_kwargs: Mapping[str, Any] | None = None, kernel: MCMCKernel | None = None) -> dict[str, Any]:
    """Per-chain unconstrained initial values for ``MCMC.run(..., init_params=...)``.

    Parameters
    ----------
    estimate : SpectralEstimate
        The starting values (constrained).
    model : callable
        The NumPyro model.
    num_chains : int
        Number of chains: the leading axis of every returned array when > 1.
        For one chain the arrays have no chain axis, as ``MCMC.run`` expects
        with ``num_chains=1``.
    key : jax.random.PRNGKey
        Used for the spread.
    spread : float, "laplace" or Laplace
        How the chains' starts scatter around the estimate in the
        unconstrained space: a float is the standard deviation of
        independent Gaussian noise per coordinate (0: every chain starts at
        the estimate); ``"laplace"`` draws each start from the estimate's
        own uncertainty, the Gaussian of :func:`laplace`, so precise
        coordinates move little and vague ones a lot. With a Gibbs
        composite ``kernel``, the Gaussian covers the sites its HMC block
        moves (conditional on the others at the estimate); the sites its
        Gibbs steps draw exactly start at the estimate, and their first
        conditional draw spreads them. A :class:`Laplace` already computed
        (e.g. the one whose covariance is the kernel's inverse mass matrix)
        is used as it is: the starts of its sites are drawn from it, the
        other sites start at the estimate.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources (module notes).
    fallback : collection of str
        Model sites left to NumPyro's ``init_to_uniform`` (one draw shared
        by the chains, then spread like the others).
    model_args, model_kwargs
        Arguments the model is called with (as for ``MCMC.run``).
    kernel : numpyro.infer.MCMCKernel, optional
        The kernel the values are for. A Gibbs composite
        (``numpyro.infer.HMCGibbs``, ``numpyro.infer.Gibbs``) takes
        constrained values for the sites of its non-HMC blocks: those are
        returned constrained (the spread is applied in the unconstrained
        space first).

    Returns
    -------
    dict
        Site name -> array of shape ``(num_chains, *shape)`` (``shape``
        alone when ``num_chains == 1``), for every continuous latent site.

    Raises
    ------
    ValueError
        A site mapping that does not match the model (module notes), a bad
        ``spread``, or a potential energy or gradient that is not finite at
        a chain's start.

    Notes
    -----
    Safe to call from several threads at once: the model is traced while
    holding :data:`TRACE_LOCK`, so concurrent calls run one after another
    (NumPyro's handler stack is global; module notes, Threads).
    """
    func = "init_params"
    num_chains = check_int(num_chains, "num_chains", func, minimum=1)
    by_laplace = isinstance(spread, Laplace) or (isinstance(spread, str) and spread == "laplace")
    if not by_laplace and (isinstance(spread, (bool, str)) or not isinstance(spread, numbers.Real)
                           or not np.isfinite(spread) or spread < 0):
        raise bad_argument("spread", func, "a finite number >= 0, 'laplace' or a Laplace", spread)
    start = _start(estimate, model, sites, fallback, model_args, model_kwargs, func)
    _warn_degenerate(estimate)
    unconstrained = unconstrained_sites(kernel, start.z)
    if isinstance(spread, Laplace) and not set(spread.sites) <= set(unconstrained):
        raise bad_argument("spread", func, f"a Laplace over sites the kernel moves unconstrained "
                           f"({list(unconstrained)})", f"a Laplace over {list(spread.sites)}", describe=False)
    if by_laplace:
        chains = {name: jnp.broadcast_to(value, (num_chains, *value.shape)) for name, value in start.z.items()}
        if isinstance(spread, Laplace):
            chains.update(spread.sample(key, num_chains))
        elif unconstrained:
            chains.update(_laplace(start, unconstrained).sample(key, num_chains))
    else:
        keys = jax.random.split(key, len(start.z))
        chains = {name: value[None] + spread * jax.random.normal(k_, (num_chains, *value.shape), value.dtype)
                  for (name, value), k_ in zip(sorted(start.z.items()), keys)}
    if by_laplace or spread > 0:  # at the estimate itself, initialize_model found both finite
        _check_finite(start.potential_fn, chains, num_chains, func)
    chains = {name: value if name in unconstrained else biject_to(start.model_trace[name]["fn"].support)(value)
              for name, value in chains.items()}
    return chains if num_chains > 1 else {name: value[0] for name, value in chains.items()}


def _warn_degenerate(estimate) -> None:
    """Warn when the estimate's family reported degenerate components (``diagnostics["degenerate/any"]``)."""
    if not estimate.diagnostics.get("degenerate/any", False):
        return
    parts = [f"{key.split('/', 1)[1]} {np.asarray(value).tolist()}"
             for key, value in sorted(estimate.diagnostics.items())
             if key.startswith("degenerate/") and np.size(value) and np.asarray(value).dtype.kind in "iu"]
    warn(f"the estimate has degenerate states ({'; '.join(parts) or 'an identity transition'}): chains started "
         "there can stay trapped at the floor; refine it with restarts, try another k, or leave those sites to "
         "NumPyro's default start (fallback=...)")


# --- the estimate's uncertainty ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Laplace:
    """A Gaussian in NumPyro's unconstrained space centred at the estimate.

    The precision is the Hessian of the model's potential energy at the
    estimate, made positive definite: each eigenvalue (or, for the diagonal
    form, each diagonal entry) is replaced by its absolute value and floored
    at ``1 / max_variance`` (no coordinate wider than that; at a point that
    is not a mode, the directions of negative curvature get the curvature's
    magnitude, as the SoftAbs metric does).

    Attributes
    ----------
    sites : tuple of str
        The sites covered, in NumPyro's (sorted) order of the flat vector.
    mean : dict of str -> jax.Array
        The estimate, unconstrained.
    covariance : numpy.ndarray
        ``(d,)`` variances (diagonal form) or the ``(d, d)`` covariance.
    """

    sites: tuple[str, ...]
    mean: dict[str, jax.Array]
    covariance: np.ndarray

    @property
    def dense(self) -> bool:
        """Whether the covariance is a full matrix."""
        return self.covariance.ndim == 2

    def decoupled(self, sites: Collection[str]) -> Laplace:
        """The Gaussian with the coordinates of ``sites`` independent, of unit variance (NumPyro's default there).

        Parameters
        ----------
        sites : collection of str
            Sites whose curvature is not trusted (e.g. the
            :attr:`SiteInfo.coupled` ones: a Laplace metric at a simplex
            with small entries sends NUTS's first draws off its tail).

        Returns
        -------
        Laplace
            The same centre; the other coordinates keep their covariance
            (their block, for the dense form).
        """
        sizes = [int(np.size(self.mean[name])) for name in self.sites]
        mask = np.repeat([name in set(sites) for name in self.sites], sizes)
        if not mask.any():
            return self
        covariance = self.covariance.copy()
        if self.dense:
            covariance[mask, :] = 0.0
            covariance[:, mask] = 0.0
            covariance[mask, mask] = 1.0
        else:
            covariance[mask] = 1.0
        return Laplace(self.sites, self.mean, covariance)

    def sample(self, key: jax.Array, num: int) -> dict[str, jax.Array]:
        """``num`` draws, a dict of arrays with a leading axis of length ``num``."""
        flat, unravel = ravel_pytree({name: self.mean[name] for name in self.sites})
        noise = np.asarray(jax.random.normal(key, (num, flat.size)), dtype=np.float64)
        if self.dense:
            values, vectors = np.linalg.eigh(self.covariance)
            noise = noise @ (vectors * np.sqrt(np.maximum(values, 0.0))).T
        else:
            noise = noise * np.sqrt(self.covariance)
        draws = np.asarray(flat, dtype=np.float64)[None] + noise
        return jax.vmap(unravel)(jnp.asarray(draws, dtype=flat.dtype))


def _hessian(potential, flat, dense: bool) -> np.ndarray:
    if dense:
        return np.asarray(jax.jit(jax.hessian(potential))(flat), dtype=np.float64)
    hvp = jax.jit(jax.vmap(lambda e: jnp.vdot(e, jax.jvp(jax.grad(potential), (flat,), (e,))[1])))
    eye = np.eye(flat.size, dtype=flat.dtype)
    return np.concatenate([np.asarray(hvp(eye[i:i + 256]), dtype=np.float64) for i in range(0, flat.size, 256)])


def _laplace(start: _Start, over: tuple, *, dense=None, max_variance: float = 1.0) -> Laplace:
    rest = {name: value for name, value in start.z.items() if name not in over}
    flat, unravel = ravel_pytree({name: start.z[name] for name in over})
    dense = flat.size <= DENSE_LIMIT if dense is None else bool(dense)

    def potential(x):
        return start.potential_fn({**rest, **unravel(x)})

    hessian = _hessian(potential, flat, dense)
    if not np.all(np.isfinite(hessian)):
        raise bad_argument("estimate", "laplace", "a point where the potential energy has a finite Hessian",
                           "non-finite second derivatives (check the floor of the estimate)", describe=False)
    floor = 1.0 / max_variance
    if dense:
        values, vectors = np.linalg.eigh(0.5 * (hessian + hessian.T))
        covariance = (vectors / np.maximum(np.abs(values), floor)) @ vectors.T
        covariance = 0.5 * (covariance + covariance.T)
    else:
        covariance = 1.0 / np.maximum(np.abs(hessian), floor)
    return Laplace(over, {name: start.z[name] for name in over}, covariance)


@_one_trace_at_a_time
def laplace(estimate: SpectralEstimate, model: Callable[..., Any], *, sites: SiteMap = None,
            fallback: Collection[str] = (), model_args: Sequence[Any] = (),
            model_kwargs: Mapping[str, Any] | None = None, over: Collection[str] | None = None,
            dense: bool | None = None, max_variance: float = 1.0) -> Laplace:
    """The estimate's uncertainty: a Gaussian from the curvature of the posterior at the estimate.

    In NumPyro's unconstrained coordinates (where NUTS moves and where its
    mass matrix acts), the potential energy ``U = -log p(z | data)`` (with
    the log-Jacobians, and discrete sites summed out by enumeration) is
    expanded to second order at the estimate: the Gaussian with precision
    ``H = d^2 U`` is the Laplace approximation of the posterior. A refined
    estimate (``refine``) sits close to the posterior mode, where ``H`` is
    positive definite; elsewhere the Hessian is made positive definite as
    :class:`Laplace` describes.

    Parameters
    ----------
    estimate : SpectralEstimate
        The centre.
    model : callable
        The NumPyro model.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources (module notes).
    fallback : collection of str
        Model sites left to NumPyro's ``init_to_uniform``.
    model_args, model_kwargs
        Arguments the model is called with.
    over : collection of str, optional
        Sites to cover (default: every continuous latent site). The others
        stay at the estimate: the Gaussian is then the conditional one (the
        Hessian's block), what a Gibbs block that moves only these sites
        needs.
    dense : bool, optional
        Full covariance (``d^2`` memory, ``d`` gradient evaluations through
        forward-over-reverse differentiation) or its diagonal (``d``
        Hessian-vector products, in batches); default: dense up to
        ``DENSE_LIMIT`` (2,000) coordinates.
    max_variance : float
        Floor ``1 / max_variance`` on the curvature: no coordinate is wider
        than this (NumPyro's default inverse mass matrix is the identity,
        variance 1).

    Returns
    -------
    Laplace

    Raises
    ------
    ValueError
        A site mapping that does not match the model, unknown ``over``
        sites, or non-finite second derivatives at the estimate.

    Notes
    -----
    Safe to call from several threads at once: the model is traced while
    holding :data:`TRACE_LOCK`, so concurrent calls run one after another
    (NumPyro's handler stack is global; module notes, Threads).
    """
    func = "laplace"
    max_variance = check_positive(max_variance, "max_variance", func)
    start = _start(estimate, model, sites, fallback, model_args, model_kwargs, func)
    over = tuple(sorted(start.z)) if over is None else tuple(sorted(over))
    unknown = sorted(set(over) - set(start.z))
    if unknown or not over:
        raise bad_argument("over", func, f"continuous latent sites of the model ({sorted(start.z)})", unknown or over)
    return _laplace(start, over, dense=dense, max_variance=max_variance)


@_one_trace_at_a_time
def inverse_mass_matrix(estimate: SpectralEstimate, model: Callable[..., Any], *, sites: SiteMap = None,
                        fallback: Collection[str] = (), model_args: Sequence[Any] = (),
                        model_kwargs: Mapping[str, Any] | None = None, over: Collection[str] | None = None,
                        dense: bool | None = None, max_variance: float = 1.0, coupled: bool = False) -> np.ndarray:
    """An initial inverse mass matrix for NUTS from the estimate's uncertainty (:func:`laplace`).

    Hamiltonian Monte Carlo moves efficiently when its inverse mass matrix
    is the posterior covariance; NumPyro starts warm-up from the identity
    and adapts it in windows. Starting from the Laplace covariance at the
    estimate, the first window already samples at the right scale.

    Parameters
    ----------
    estimate, model, sites, fallback, model_args, model_kwargs, over, dense, max_variance
        As for :func:`laplace`.
    coupled : bool
        Keep the curvature of coupled sites too (simplexes, Cholesky
        factors: :attr:`SiteInfo.coupled`). By default their coordinates
        get NumPyro's identity (:meth:`Laplace.decoupled`): at a simplex
        with small entries the curvature at one point sent NUTS to 455-1,009
        leapfrog steps per draw or made nearly every draw diverge
        (``benchmarks/RESULTS.md``).

    Returns
    -------
    numpy.ndarray
        ``(d,)`` (diagonal) or ``(d, d)`` (dense), over the sites in
        NumPyro's flattening order (sorted site names): pass it as
        ``NUTS(model, inverse_mass_matrix=m, dense_mass=m.ndim == 2)``.

    Raises
    ------
    ValueError
        As for :func:`laplace`.

    Notes
    -----
    Safe to call from several threads at once: the model is traced while
    holding :data:`TRACE_LOCK`, so concurrent calls run one after another
    (NumPyro's handler stack is global; module notes, Threads).
    """
    gaussian = laplace(estimate, model, sites=sites, fallback=fallback, model_args=model_args,
                       model_kwargs=model_kwargs, over=over, dense=dense, max_variance=max_variance)
    if not coupled:
        info = site_info(model, model_args, model_kwargs)
        gaussian = gaussian.decoupled([name for name in gaussian.sites if info[name].coupled])
    return gaussian.covariance


# --- point estimates ------------------------------------------------------------------------------------------------

def condition(estimate: SpectralEstimate, model: Callable[..., Any], sites: SiteMap = None) -> Callable[..., Any]:
    """The model with the estimate's values fixed (``numpyro.handlers.condition``; a point estimate).

    Parameters
    ----------
    estimate : SpectralEstimate
        The values.
    model : callable
        A NumPyro model.
    sites : None, list of str, or dict of str -> str or callable
        The model's sites and their sources (module notes). Sites not
        listed are sampled as the model says.

    Returns
    -------
    callable
        The conditioned model (use with ``numpyro.infer.Predictive`` or
        ``log_likelihood``). Each call checks that every fixed site is a
        latent site of the model with the value's shape: a ``ValueError``
        names the site otherwise.
    """
    func = "condition"
    values = _as_jax(map_sites(estimate, sites, func=func).params)

    def conditioned(*args, **kwargs):
        seen = _SeenSites()
        with handlers.condition(data=values), seen:
            result = model(*args, **kwargs)
        latent = {name: shape for name, (observed, shape) in seen.sites.items() if not observed}
        unknown = sorted(set(values) - set(latent))
        if unknown:
            raise bad_argument("sites", func, f"latent sites of the model ({sorted(latent)})",
                               f"{unknown}, not among them", describe=False)
        for name, value in values.items():
            if tuple(value.shape) != latent[name]:
                raise bad_argument("sites", func, f"values of the model's shapes ({name!r}: {latent[name]})",
                                   f"shape {tuple(value.shape)} for {name!r}", describe=False)
        return result

    return conditioned


class _SeenSites(Messenger):
    """Records every sample site as the model declares it (before an enclosing ``condition`` fixes it)."""

    def __init__(self):
        super().__init__()
        self.sites = {}

    def process_message(self, msg):
        if msg["type"] == "sample":
            self.sites[msg["name"]] = (bool(msg["is_observed"]), tuple(msg["fn"].shape(msg["kwargs"]["sample_shape"])))
