"""The NumPyro boundary: spectral estimates as initial values or point estimates.

* :func:`init_strategy` -- ``numpyro.infer.init_to_value`` with the
  estimate's constrained values (for ``NUTS(init_strategy=...)`` and for
  ``AutoNormal(init_loc_fn=...)``/``AutoDelta``); sites the estimate lacks fall
  back to NumPyro's default (``init_to_uniform``).
* :func:`init_params` -- per-chain UNCONSTRAINED values with a leading chain
  axis, for ``MCMC.run(key, init_params=...)``, optionally jittered in the
  unconstrained space; the potential energy and its gradient are checked to
  be finite at every chain's point.
* :func:`condition` -- the model with the estimate plugged in (point
  estimate; use with ``numpyro.infer.Predictive`` or ``log_likelihood``).

Values are cast to JAX's default float dtype (float32 unless the user
enabled x64) only here, at the boundary.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numpyro import handlers
from numpyro.infer import init_to_value
from numpyro.infer.util import potential_energy, unconstrain_fn

from specinit._validation import bad_argument, check_int

__all__ = ["init_strategy", "init_params", "condition", "constrained_values", "latent_sites", "site_info"]


def constrained_values(estimate, sites=None) -> dict:
    """The estimate's parameters as JAX arrays in the default float dtype.

    Parameters
    ----------
    estimate : SpectralEstimate
        The values (constrained, float64).
    sites : list of str, optional
        Sites to return (default: all of the estimate's).

    Returns
    -------
    dict of str -> jax.Array
        Cast to JAX's default float dtype (float32 unless x64 is enabled).

    Raises
    ------
    ValueError
        If a requested site is not in the estimate.
    """
    names = list(estimate.params) if sites is None else list(sites)
    missing = [name for name in names if name not in estimate.params]
    if missing:
        raise bad_argument("sites", "constrained_values", f"sites of the estimate ({sorted(estimate.params)})", missing)
    dtype = jnp.result_type(float)
    return {name: jnp.asarray(estimate.params[name], dtype=dtype) for name in names}


def init_strategy(estimate, sites=None):
    """``init_to_value`` with the estimate's constrained values.

    Parameters
    ----------
    estimate : SpectralEstimate
        The values.
    sites : list of str, optional
        Sites to initialise (default: all of the estimate's); other sites
        fall back to NumPyro's default (``init_to_uniform``).

    Returns
    -------
    callable
        A NumPyro init strategy for ``NUTS(init_strategy=...)`` or a guide's
        ``init_loc_fn``.
    """
    return init_to_value(values=constrained_values(estimate, sites))


def site_info(model, model_args=(), model_kwargs=None) -> dict:
    """Every sample site of ``model``: ``{name: (shape, is_observed, plate names)}``.

    The model is traced abstractly (``jax.eval_shape``): nothing is sampled
    or compiled op by op.

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
    dict of str -> (tuple, bool, tuple of str)
        Shape, whether observed, and the names of the enclosing plates.
    """
    model_kwargs = model_kwargs or {}
    flags = {}

    def values():
        trace = handlers.trace(handlers.seed(model, jax.random.PRNGKey(0))).get_trace(*model_args, **model_kwargs)
        sites = {name: site for name, site in trace.items() if site["type"] == "sample"}
        flags.update({name: (site["is_observed"], tuple(f.name for f in site["cond_indep_stack"])) for name, site in sites.items()})
        return {name: site["value"] for name, site in sites.items()}

    shapes = jax.eval_shape(values)
    return {name: (tuple(shapes[name].shape), *flags[name]) for name in shapes}


def latent_sites(model, model_args=(), model_kwargs=None) -> dict:
    """Shapes of the latent (non-observed) sample sites of ``model``.

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
        Site name -> shape, for every latent sample site.
    """
    return {name: shape for name, (shape, observed, _) in site_info(model, model_args, model_kwargs).items() if not observed}


def _check_sites(estimate, model, model_args, model_kwargs, func):
    shapes = latent_sites(model, model_args, model_kwargs)
    missing = sorted(set(shapes) - set(estimate.params))
    if missing:
        raise bad_argument(
            "model", func, f"a model whose latent sites the estimate covers (estimate has {sorted(estimate.params)})",
            f"a model with sites {missing} the estimate lacks", describe=False,
        )
    for name, shape in shapes.items():
        if tuple(estimate.params[name].shape) != tuple(shape):
            raise bad_argument(
                "model", func, f"a model whose site {name!r} has the estimate's shape {estimate.params[name].shape}",
                f"shape {tuple(shape)}", describe=False,
            )
    return shapes


def init_params(estimate, model, num_chains: int, key, *, jitter: float = 0.0, model_args=(), model_kwargs=None) -> dict:
    """Per-chain unconstrained initial values for ``MCMC.run(..., init_params=...)``.

    Parameters
    ----------
    estimate : SpectralEstimate
        The starting values (constrained).
    model : callable
        The NumPyro model (its latent sites must all be in the estimate).
    num_chains : int
        Number of chains: the leading axis of every returned array when > 1.
        For one chain the arrays have no chain axis, as ``MCMC.run`` expects
        with ``num_chains=1``.
    key : jax.random.PRNGKey
        Used for the jitter.
    jitter : float
        Standard deviation of Gaussian noise added in the unconstrained
        space, independently per chain (0: every chain starts at the
        estimate). A little jitter makes R-hat meaningful.
    model_args, model_kwargs
        Arguments the model is called with (as for ``MCMC.run``).

    Returns
    -------
    dict
        Site name -> array of shape ``(num_chains, *unconstrained_shape)``
        (``unconstrained_shape`` alone when ``num_chains == 1``).

    Raises
    ------
    ValueError
        If the model has latent sites the estimate lacks, shapes differ, or
        the potential energy or its gradient is not finite at a chain's start.
    """
    func = "init_params"
    num_chains = check_int(num_chains, "num_chains", func, minimum=1)
    if not np.isfinite(jitter) or jitter < 0:
        raise bad_argument("jitter", func, "a finite number >= 0", jitter)
    model_kwargs = model_kwargs or {}
    _check_sites(estimate, model, model_args, model_kwargs, func)
    seeded = handlers.seed(model, jax.random.PRNGKey(0))
    values = constrained_values(estimate)
    z = jax.jit(lambda v: unconstrain_fn(seeded, model_args, model_kwargs, v))(values)
    keys = jax.random.split(key, len(z))
    chains = {
        name: value[None] + jitter * jax.random.normal(k_, (num_chains, *value.shape), value.dtype)
        for (name, value), k_ in zip(sorted(z.items()), keys)
    }
    energy_fn = jax.value_and_grad(lambda params: potential_energy(seeded, model_args, model_kwargs, params))
    energy, grads = jax.jit(jax.vmap(energy_fn))(chains)
    bad = ~np.isfinite(np.asarray(energy))
    for g in jax.tree_util.tree_leaves(grads):
        bad |= ~np.all(np.isfinite(np.asarray(g)).reshape(num_chains, -1), axis=1)
    if bad.any():
        raise bad_argument(
            "estimate", func, "a point with finite potential energy and gradient",
            f"non-finite values for chains {np.flatnonzero(bad).tolist()} (reduce jitter, or check the floor of the estimate)",
            describe=False,
        )
    return chains if num_chains > 1 else {name: value[0] for name, value in chains.items()}


def condition(estimate, model, sites=None):
    """``numpyro.handlers.condition`` of ``model`` on the estimate (a point estimate).

    Parameters
    ----------
    estimate : SpectralEstimate
        The values.
    model : callable
        A NumPyro model whose sites include the estimate's.
    sites : list of str, optional
        Sites to fix (default: all of the estimate's).

    Returns
    -------
    callable
        The conditioned model (use with ``numpyro.infer.Predictive`` or
        ``numpyro.infer.log_likelihood``).
    """
    return handlers.condition(model, data=constrained_values(estimate, sites))
