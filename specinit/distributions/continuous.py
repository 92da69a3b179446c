"""Continuous building blocks: the exponential-power factor family, the additive log-ratio map of the simplex.

Unit-variance factors with shape ``power`` (2: Gaussian; < 2: heavier tails,
positive excess kurtosis; > 2: lighter tails, down to -1.2), the NumPyro
distribution and the conversions between ``power`` and excess kurtosis
(:mod:`specinit.models.factors`); the additive log-ratio coordinates of the
simplex and point-mass guide sites in them (the topic models' SVI); the
Dirichlet in centred log-ratio coordinates (the topic models' NUTS).
"""

from __future__ import annotations
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints
from numpyro.distributions.transforms import ExpTransform, Transform, ZeroSumTransform, biject_to
from scipy.optimize import brentq
from scipy.special import gammaln

if TYPE_CHECKING:
    from jax.typing import ArrayLike

__all__ = ["ALR", "ALRSoftmaxTransform", "CenteredLogRatioTransform", "LogRatioDirichlet", "TRANSFORMS", "UnitExponentialPower", "excess_kurtosis_of_power",
           "point_mass", "power_of_excess_kurtosis"]

_POWER_RANGE = (0.1, 100.0)      # exponential-power shape: excess kurtosis from ~-1.19 to ~4e4


# --- the exponential-power family ---------------------------------------------------------------------------------

def excess_kurtosis_of_power(power: float | np.ndarray) -> np.ndarray:
    """Excess kurtosis of the exponential-power (generalized normal) distribution with shape ``power``.

    Parameters
    ----------
    power : float or array
        Shape ``beta > 0`` (1: Laplace, 2: Gaussian, large: nearly uniform).

    Returns
    -------
    ndarray
        ``Gamma(5/beta) Gamma(1/beta) / Gamma(3/beta)^2 - 3`` (decreasing in
        ``beta``, from infinity to -1.2).
    """
    b = np.asarray(power, dtype=np.float64)
    return np.exp(gammaln(5 / b) + gammaln(1 / b) - 2 * gammaln(3 / b)) - 3.0


def power_of_excess_kurtosis(kurtosis: float | np.ndarray) -> np.ndarray:
    """Inverse of :func:`excess_kurtosis_of_power`, clipped to the shapes ``[0.1, 100]``.

    Parameters
    ----------
    kurtosis : float or array
        Excess kurtosis; values at or below the family's lower limit (-1.2,
        the uniform distribution) map to the largest shape 100.

    Returns
    -------
    ndarray
        The shape ``beta`` with that excess kurtosis (root of a monotone
        function, found to 1e-14 relative accuracy in ``log beta``).
    """
    values = np.atleast_1d(np.asarray(kurtosis, dtype=np.float64))
    lo, hi = np.log(_POWER_RANGE[0]), np.log(_POWER_RANGE[1])
    k_lo, k_hi = excess_kurtosis_of_power(_POWER_RANGE[0]), excess_kurtosis_of_power(_POWER_RANGE[1])
    out = np.empty_like(values)
    for i, kappa in enumerate(values):
        if kappa >= k_lo:
            out[i] = _POWER_RANGE[0]
        elif kappa <= k_hi:
            out[i] = _POWER_RANGE[1]
        else:
            out[i] = np.exp(brentq(lambda t: excess_kurtosis_of_power(np.exp(t)) - kappa, lo, hi, xtol=1e-14, rtol=1e-14))
    return out.reshape(np.shape(kurtosis))


class UnitExponentialPower(dist.Distribution):
    """Zero-mean, unit-variance exponential-power distribution with shape ``power``.

    Parameters
    ----------
    power : array
        Shape (2: Gaussian; < 2: heavier tails; > 2: lighter tails), positive.
    validate_args : bool, optional
        NumPyro's argument validation.
    """

    arg_constraints = {"power": constraints.positive}
    support = constraints.real
    reparametrized_params = ["power"]

    def __init__(self, power: ArrayLike, *, validate_args: bool | None = None) -> None:
        self.power = power
        super().__init__(batch_shape=jnp.shape(power), validate_args=validate_args)

    def _scale(self):
        return jnp.exp(0.5 * (jax.scipy.special.gammaln(1 / self.power) - jax.scipy.special.gammaln(3 / self.power)))

    def sample(self, key: jax.Array, sample_shape: tuple[int, ...] = ()) -> jax.Array:
        shape = sample_shape + self.batch_shape
        k_gamma, k_sign = jax.random.split(key)
        g = jax.random.gamma(k_gamma, jnp.broadcast_to(1 / self.power, shape))
        sign = jax.random.rademacher(k_sign, shape, dtype=g.dtype)
        return sign * self._scale() * g ** (1 / self.power)

    def log_prob(self, value: ArrayLike) -> jax.Array:
        scale = self._scale()
        return (jnp.log(self.power) - jnp.log(2.0) - jnp.log(scale) - jax.scipy.special.gammaln(1 / self.power)
                - (jnp.abs(value) / scale) ** self.power)

    @property
    def mean(self) -> jax.Array:
        return jnp.zeros(self.batch_shape)

    @property
    def variance(self) -> jax.Array:
        return jnp.ones(self.batch_shape)


# --- the NumPyro program --------------------------------------------------------------------------------------------


# --- the simplex in additive log-ratio coordinates --------------------------------------------------------------

class _LogRatioTransform(Transform):
    """What the log-ratio bijections R^(V-1) -> open simplex share: domain, codomain, shapes, no parameters."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def forward_shape(self, shape):
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return shape[:-1] + (shape[-1] - 1,)

    def tree_flatten(self):
        return (), ((), {})

    def __eq__(self, other):
        return type(other) is type(self)


class ALRSoftmaxTransform(_LogRatioTransform):
    """``x (..., V-1) -> softmax([x, 0]) (..., V)``: additive log-ratio coordinates of the simplex.

    A bijection from R^(V-1) onto the open simplex with
    ``log|det J| = sum_{w=1}^{V} log p_w`` (computed from ``x`` by
    ``log_softmax``, so it is exact in float32 even where ``p`` underflows).
    Outputs are floored at the smallest normal float.
    """

    @staticmethod
    def _extend(x):
        return jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.maximum(jax.nn.softmax(self._extend(x), axis=-1), jnp.finfo(x.dtype).tiny)

    def _inverse(self, y):
        log_y = jnp.log(y)
        return log_y[..., :-1] - log_y[..., -1:]

    def log_abs_det_jacobian(self, x: jax.Array, y: jax.Array, intermediates: Any = None) -> jax.Array:
        return jnp.sum(jax.nn.log_softmax(self._extend(x), axis=-1), axis=-1)



ALR = ALRSoftmaxTransform()


class CenteredLogRatioTransform(_LogRatioTransform):
    """``x (..., V-1) -> softmax(H x) (..., V)``: isometric log-ratio coordinates of the simplex.

    ``H`` is the orthonormal basis of the zero-sum vectors of NumPyro's
    ``ZeroSumTransform``, so ``H x`` are the centred log-ratios
    ``log p_w - mean_v log p_v`` (no word is the reference of the others;
    ``x`` are their coordinates in that basis).
    A bijection from R^(V-1) onto the open simplex with
    ``log|det J| = sum_{w=1}^{V} log p_w + log(V) / 2``. Outputs are floored
    at the smallest normal float.
    """

    def __call__(self, x: jax.Array) -> jax.Array:
        return jnp.maximum(jax.nn.softmax(ZeroSumTransform()(x), axis=-1), jnp.finfo(x.dtype).tiny)

    def _inverse(self, y):
        log_y = jnp.log(y)
        return ZeroSumTransform().inv(log_y - jnp.mean(log_y, axis=-1, keepdims=True))

    def log_abs_det_jacobian(self, x: jax.Array, y: jax.Array, intermediates: Any = None) -> jax.Array:
        log_p = jax.nn.log_softmax(ZeroSumTransform()(x), axis=-1)
        return jnp.sum(log_p, axis=-1) + 0.5 * jnp.log(log_p.shape[-1])



class _LogRatioSimplex(constraints._Simplex):
    """The simplex, mapped to unconstrained space by :class:`CenteredLogRatioTransform`."""


log_ratio_simplex = _LogRatioSimplex()
biject_to.register(_LogRatioSimplex, lambda constraint: CenteredLogRatioTransform())


class LogRatioDirichlet(dist.Dirichlet):
    """NumPyro's ``Dirichlet`` whose unconstrained coordinates are centred log-ratios.

    The same density on the simplex (``log_prob``, ``sample`` and the
    moments are the Dirichlet's); only the bijection that NUTS, SVI
    autoguides and ``init_to_value`` use for the site differs: the softmax of
    zero-sum coordinates (:class:`CenteredLogRatioTransform`) in place of
    stick-breaking. In those coordinates a ``Dirichlet(c)`` has density
    ``prod_w p_w^c_w`` times a constant: log-concave.

    Parameters
    ----------
    concentration : array, shape (..., V)
        As for ``numpyro.distributions.Dirichlet``.
    validate_args : bool, optional
    """

    support = log_ratio_simplex
#: The unconstrained coordinates of the topic models' global sites.
TRANSFORMS = {"alpha": ExpTransform(), "beta": ALR, "weights": ALR}


def point_mass(name: str, init: ArrayLike, transform: Transform) -> jax.Array:
    """A guide's global point-mass site in unconstrained coordinates (log-Jacobian included in its density).

    Parameters
    ----------
    name : str
        Site name (its parameter is ``<name>_unconstrained``).
    init : array
        Starting unconstrained value.
    transform : numpyro Transform
        Unconstrained -> constrained.

    Returns
    -------
    array
        The constrained value.
    """
    x = numpyro.param(f"{name}_unconstrained", init)  # unconstrained: SVI.init's init_params are used as given
    return numpyro.sample(name, dist.TransformedDistribution(dist.Delta(x, event_dim=1), transform))
