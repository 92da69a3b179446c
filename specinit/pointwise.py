"""Pointwise log-likelihood of posterior draws: one value per observation row, what PSIS-LOO needs.

:func:`row_log_likelihood` picks, from the model itself, the log-likelihood
that leave-one-out cross-validation can use:

* a model that declares its own (an attribute
  ``model.pointwise_log_likelihood(samples, *model_args, **model_kwargs)``
  returning ``(chain, draw, rows)``): ``lda.model`` integrates each
  document's topic proportions out by importance sampling, since a
  likelihood conditioned on a per-document parameter that each draw samples
  makes every document look influential;
* a model with discrete latent sites that NumPyro enumerates
  (``infer={"enumerate": "parallel"}``, in plates, ``scan`` or
  ``markov``): the marginal log-likelihood of each row of the observed
  sites' outermost plate, the discrete sites summed out by funsor's
  variable elimination (a forward algorithm along ``scan``/``markov``
  chains) -- the log density NUTS samples, split by row;
* otherwise ``None``: NumPyro's per-site ``log_likelihood`` (what
  ``az.from_numpyro`` computes) is already per row.

Enumerated sites under a mask (padding of sequences of unequal length) are
counted as absent: the masked steps contribute nothing, where NumPyro's own
log density adds ``log(cardinality)`` for each (a constant that does not
move the posterior but would move the ELPD).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from numpy.typing import ArrayLike
from numpyro import distributions as dist
from numpyro import handlers

from specinit._validation import bad_argument
from specinit.warmstart import site_info

__all__ = ["RowLogLikelihood", "enumerable", "row_log_likelihood", "enumerated_log_likelihood"]


class RowLogLikelihood(NamedTuple):
    """Pointwise log-likelihood of each draw.

    Attributes
    ----------
    name : str
        The observed site (or, for several observed sites in one row, the
        row plate's name).
    dim : str
        The row dimension (the plate's name).
    values : numpy.ndarray, shape (chain, draw, rows)
    """

    name: str
    dim: str
    values: np.ndarray


def _row_plate(info: dict, func: str) -> tuple[str, list]:
    """The outermost plate shared by every observed site, and the observed sites."""
    observed = [name for name, site in info.items() if site.observed]
    shared = [plate for plate in info[observed[0]].plates if all(plate in info[o].plates for o in observed)] \
        if observed else []
    if not shared:
        raise bad_argument("model", func, "a model whose observed sites share a plate (the rows that LOO leaves "
                           "out)", f"observed sites {observed} without a common plate", describe=False)
    plate = shared[0]
    for name, site in info.items():
        if site.discrete and not site.observed and plate not in site.plates:
            raise bad_argument("model", func, f"enumerated sites inside the rows' plate {plate!r} (rows must be "
                               "independent given the continuous sites)", f"the site {name!r} outside it",
                               describe=False)
    return plate, observed


def enumerable(model: Callable[..., Any], model_args: Sequence[Any] = (),
               model_kwargs: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """``model`` under NumPyro's ``enum`` handler, its enumeration dims allocated left of its plates.

    Parameters
    ----------
    model : callable
        A NumPyro model whose discrete latent sites can be enumerated.
    model_args, model_kwargs
        Arguments the model is called with.

    Returns
    -------
    callable
        ``enum(config_enumerate(model), first_available_dim)``: what funsor's
        variable elimination (``numpyro.contrib.funsor.log_density``) reads.
    """
    from numpyro.contrib.funsor import config_enumerate, enum

    plain = handlers.trace(handlers.seed(model, jax.random.PRNGKey(0))).get_trace(*model_args, **(model_kwargs or {}))
    nesting = -min((f.dim for site in plain.values() if site["type"] == "sample"
                    for f in site["cond_indep_stack"] if f.dim is not None), default=0)
    return enum(config_enumerate(model), -nesting - 1)


def enumerated_log_likelihood(model: Callable[..., Any], params: Mapping[str, ArrayLike],
                              model_args: Sequence[Any] = (), model_kwargs: Mapping[str, Any] | None = None, *,
                              plate: str) -> jax.Array:
    """Marginal log-likelihood of each row of ``plate`` at one value of the continuous sites.

    Parameters
    ----------
    model : callable
        A NumPyro model with enumerable discrete latent sites.
    params : dict of str -> array
        Constrained values of every continuous latent site.
    model_args, model_kwargs
        Arguments the model is called with (with the observed data).
    plate : str
        The plate whose rows are scored; every discrete site lies inside it.

    Returns
    -------
    jax.Array, shape (rows,)
        ``log sum_z p(x_row, z_row | params)`` for each row.
    """
    import funsor
    from numpyro.contrib.funsor.enum_messenger import trace as packed_trace
    from numpyro.contrib.funsor.infer_util import (_get_shift, _shift_name, compute_markov_factors,
                                                   plate_to_enum_plate)

    funsor.set_backend("jax")
    model_kwargs = model_kwargs or {}
    substituted = handlers.substitute(model, data=params)
    enumerated = enumerable(substituted, model_args, model_kwargs)
    with plate_to_enum_plate():
        trace = packed_trace(enumerated).get_trace(*model_args, **model_kwargs)
    factors, sum_vars, prod_vars, history = [], frozenset(), frozenset(), 0
    time_factors, time_init_vars, time_markov_dims = defaultdict(list), defaultdict(frozenset), defaultdict(frozenset)
    for site in trace.values():
        if site["type"] != "sample" or plate not in {f.name for f in site["cond_indep_stack"]}:
            continue
        log_prob = site["fn"].log_prob(site["value"])
        if not site["is_observed"] and isinstance(site["fn"], dist.MaskedDistribution):
            size = site["fn"].base_dist.enumerate_support(expand=False).shape[0]
            log_prob = jnp.where(site["fn"]._mask, log_prob, -jnp.log(size))
        if site["scale"] is not None:
            log_prob = site["scale"] * log_prob
        dim_to_name = site["infer"]["dim_to_name"]
        factor = funsor.to_funsor(log_prob, output=funsor.Real, dim_to_name=dim_to_name)
        time_dim = None
        for dim, name in dim_to_name.items():
            if name.startswith("_time"):
                time_dim = funsor.Variable(name, funsor.Bint[log_prob.shape[dim]])
                history = max(history, max(_get_shift(s) for s in dim_to_name.values()))
                if history == 0:
                    factors.append(factor)
                    prod_vars |= frozenset({name})
                else:
                    time_factors[time_dim].append(factor)
                time_init_vars[time_dim] |= frozenset(s for s in dim_to_name.values() if s.startswith("_PREV_"))
                break
        if time_dim is None:
            factors.append(factor)
        if not site["is_observed"]:
            sum_vars |= frozenset({site["name"]})
        prod_vars |= frozenset(f.name for f in site["cond_indep_stack"] if f.dim is not None)
    for time_dim, init_vars in time_init_vars.items():
        for var in init_vars:
            names = trace[_shift_name(var, -_get_shift(var))]["infer"]["dim_to_name"].values()
            if var in names:
                time_markov_dims[time_dim] |= frozenset(names)
    if time_factors:
        factors += compute_markov_factors(time_factors, time_init_vars, time_markov_dims, sum_vars, prod_vars, history,
                                          funsor.ops.logaddexp, funsor.ops.add)
    with funsor.interpretations.lazy:
        lazy = funsor.sum_product.sum_product(funsor.ops.logaddexp, funsor.ops.add, factors,
                                              eliminate=(sum_vars | prod_vars) - {plate}, plates=prod_vars)
    return funsor.optimizer.apply_optimizer(lazy).data


def row_log_likelihood(model: Callable[..., Any], samples: Mapping[str, ArrayLike], model_args: Sequence[Any] = (),
                       model_kwargs: Mapping[str, Any] | None = None, *,
                       batch_size: int = 64) -> RowLogLikelihood | None:
    """The pointwise log-likelihood LOO can use, chosen from the model (module notes).

    Parameters
    ----------
    model : callable
        The NumPyro model the draws come from.
    samples : dict of str -> array
        Draws of the continuous latent sites with leading ``(chain, draw)``
        axes (``mcmc.get_samples(group_by_chain=True)``).
    model_args, model_kwargs
        Arguments the model was run with (with the observed data).
    batch_size : int
        Draws evaluated at once (memory: ``batch_size`` times one
        evaluation of the model).

    Returns
    -------
    RowLogLikelihood or None
        ``None`` for a model without enumerated sites or a declared
        log-likelihood (NumPyro's per-site log-likelihood applies).

    Raises
    ------
    ValueError
        Observed sites without a common plate, or enumerated sites outside
        it.
    """
    func = "to_inference_data"
    model_kwargs = dict(model_kwargs or {})
    declared = getattr(model, "pointwise_log_likelihood", None)
    info = site_info(model, model_args, model_kwargs)
    if declared is None and not any(site.discrete and not site.observed for site in info.values()):
        return None
    plate, observed = _row_plate(info, func)
    name = observed[0] if len(observed) == 1 else plate
    if declared is not None:
        return RowLogLikelihood(name, plate, np.asarray(declared(samples, *model_args, **model_kwargs)))
    lead = next(iter(samples.values())).shape[:2]
    flat = {key: jnp.reshape(jnp.asarray(value), (-1, *jnp.shape(value)[2:])) for key, value in samples.items()}

    def one(params):
        return enumerated_log_likelihood(model, params, model_args, model_kwargs, plate=plate)

    values = jax.jit(lambda draws: jax.lax.map(one, draws, batch_size=batch_size))(flat)
    return RowLogLikelihood(name, plate, np.asarray(values, dtype=np.float64).reshape(*lead, -1))
