"""Mixture likelihoods with the component summed out: one distribution for every mixture family.

:class:`MixtureLikelihood` is ``sum_h w_h p(x | h)`` for any per-component
log-density given as a function of the observed value: the NumPyro programs
of the multi-view, kernel multi-view and single-topic families observe their
data through it, and the same per-component function (the family's
``component_log_prob``) gives the E-step of EM, predictions and scores, so
the likelihood is written once per family.

Also here: the per-component log-densities the families share (diagonal
Gaussians, mixtures of diagonal Gaussians; compiled, so EM's E-steps cost
a fused kernel each) and :func:`stack_views`, the observed value of a
multi-view model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp

if TYPE_CHECKING:
    from jax.typing import ArrayLike

__all__ = ["MixtureLikelihood", "gaussian_components", "gaussian_components_host", "gaussian_mixture_components",
           "stack_views"]


def stack_views(views: Sequence[ArrayLike]) -> np.ndarray:
    """All views as one (N, D) float array: one column per 1-D view, ``d_v`` columns per (N, d_v) view.

    Parameters
    ----------
    views : sequence of arrays
        Validated views with the same rows.

    Returns
    -------
    ndarray, shape (N, D)
        The observed value of a multi-view model's ``views`` site.
    """
    return np.concatenate([np.asarray(v, dtype=np.float64).reshape(len(v), -1) for v in views], axis=1)


@jax.jit
def gaussian_components(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> jax.Array:
    """``log N(x_n | loc_h, diag(scale_h^2))`` for every row and component, shape (N, k).

    Parameters
    ----------
    x : array, shape (N, d)
    loc, scale : arrays, shape (k, d) (``scale`` may broadcast: (k, 1) or scalar)

    Returns
    -------
    array, shape (N, k)
    """
    return dist.Normal(loc, scale).log_prob(x[..., None, :]).sum(-1)


def gaussian_components_host(x: np.ndarray, loc: np.ndarray, scale: np.ndarray,
                             x_squared: np.ndarray | None = None) -> np.ndarray:
    """:func:`gaussian_components` in NumPy float64, by three matrix products (no (N, k, d) array, no dispatch).

    ``-1/2 sum_j (x_j^2 - 2 x_j loc_hj + loc_hj^2) / scale_hj^2 - sum_j log scale_hj - d/2 log 2 pi``: what
    EM's E-step on small or moderate data needs, where compiling and dispatching a JAX kernel for every shape
    costs more than the arithmetic (scikit-learn's ``GaussianMixture`` computes the same expansion). Where
    the expansion overflows (scales far below the data's magnitude) the differences are formed first.

    Parameters
    ----------
    x : ndarray, shape (N, d)
    loc : ndarray, shape (k, d)
    scale : ndarray, shape (k, d), (k, 1) or ()
        Positive standard deviations.
    x_squared : ndarray, shape (N, d), optional
        ``x * x``, when the caller keeps it (EM evaluates the same rows at every step).

    Returns
    -------
    ndarray, shape (N, k)
    """
    x, loc = np.asarray(x, dtype=np.float64), np.asarray(loc, dtype=np.float64)
    full = np.empty(loc.shape)
    full[...] = scale  # broadcast ((k, 1) or scalar); np.broadcast_to costs more than the E-step's arithmetic here
    scale = full
    # Formed as (k, N) and returned transposed (Fortran order): the E-step's reductions over each row's k
    # entries are then fast (:func:`specinit.refine.normalized_rows`).
    with np.errstate(over="ignore", invalid="ignore"):
        precision = scale**-2
        quadratic = precision @ (x * x if x_squared is None else x_squared).T - 2.0 * ((loc * precision) @ x.T)
        quadratic += (loc * loc * precision).sum(axis=1)[:, None]
        expanded = np.isfinite(quadratic.sum()) or np.isfinite(quadratic).all()  # a finite sum has finite terms
    if not expanded:  # scales far below the data's magnitude: differences first
        with np.errstate(over="ignore"):
            quadratic = np.sum(((x[None, :, :] - loc[:, None, :]) / scale[:, None, :]) ** 2, axis=2)
    constant = np.log(scale).sum(axis=1) + 0.5 * loc.shape[1] * np.log(2.0 * np.pi)
    quadratic *= -0.5
    quadratic -= constant[:, None]
    return quadratic.T


@jax.jit
def gaussian_mixture_components(x: ArrayLike, mix: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> jax.Array:
    """``log sum_j mix_hj N(x_n | loc_hj, diag(scale_hj^2))`` for every row and component, shape (N, k).

    Parameters
    ----------
    x : array, shape (N, d)
    mix : array, shape (k, m)
    loc, scale : arrays, shape (k, m, d)

    Returns
    -------
    array, shape (N, k)
    """
    inner = jnp.log(mix) + dist.Normal(loc, scale).log_prob(x[..., None, None, :]).sum(-1)
    return logsumexp(inner, axis=-1)


class MixtureLikelihood(dist.Distribution):
    """``sum_h weights_h exp(component_log_prob(x)[h])``, the component summed out (log-prob only).

    Parameters
    ----------
    weights : array, shape (k,)
        Mixing weights.
    component_log_prob : callable
        ``value (N, ...) -> (N, k)`` log-densities of each component.
    n_obs : int
        Batch size (the observations plate).
    event_shape : tuple
        Shape of one observation.
    support : numpyro constraint
        Support of one observation.
    """

    def __init__(self, weights: ArrayLike, component_log_prob: Callable, n_obs: int, event_shape: tuple,
                 support: dist.constraints.Constraint = dist.constraints.real_vector) -> None:
        self.weights, self.component_log_prob = weights, component_log_prob
        self._support = support
        super().__init__(batch_shape=(n_obs,), event_shape=tuple(event_shape))

    @property
    def support(self) -> dist.constraints.Constraint:
        return self._support

    def log_prob(self, value: ArrayLike) -> jax.Array:
        return logsumexp(jnp.log(self.weights) + self.component_log_prob(value), axis=-1)
