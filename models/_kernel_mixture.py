"""Input checks and the summed-out NumPyro likelihood of :mod:`specinit.models.kernel_multiview`.

``check_views`` validates real-valued views; :class:`KernelMixture` is the
mixture over classes of per-view Gaussian mixtures (class and inner
component summed out, one log-density per observation).
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp

from specinit._validation import (
    bad_argument,
)
from specinit.engine.kernel_features import (
    check_no_constant_columns,
)

__all__ = ["KernelMixture", "check_views", "stack_views"]


def check_views(views, func: str = "kernel_multiview.check_views"):
    """Validate real-valued views: at least 3, same number of rows, finite, no constant column.

    Parameters
    ----------
    views : sequence of arrays
        Each (N,) or (N, d_v); 1-D views become (N, 1).
    func : str
        Function named in error messages.

    Returns
    -------
    list of ndarray
        float64 arrays of shape (N, d_v).

    Raises
    ------
    TypeError
        ``views`` not a list, or a non-numeric view.
    ValueError
        Fewer than 3 views, different numbers of rows, NaN/inf, fewer than 2
        rows, or a constant column.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 2 (multi-view model: l >= 3
    views of the same observations).
    """
    if views is None or isinstance(views, np.ndarray) or not hasattr(views, "__len__"):
        raise bad_argument("views", func, "a list of per-view (N, d_v) arrays", views, kind=TypeError)
    views = list(views)
    if len(views) < 3:
        raise bad_argument("views", func, "a list of at least 3 views", f"{len(views)} views", describe=False)
    arrays = []
    for i, v in enumerate(views):
        a = np.asarray(v)
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise bad_argument(f"views[{i}]", func, "a numeric array", a, kind=TypeError)
        a = a.astype(np.float64)
        if a.ndim == 1:
            a = a[:, None]
        if a.ndim != 2 or a.shape[1] == 0:
            raise bad_argument(f"views[{i}]", func, "an (N,) or (N, d) array", a)
        arrays.append(a)
    rows = [a.shape[0] for a in arrays]
    if len(set(rows)) != 1:
        raise bad_argument("views", func, "views with the same number of observations (rows)", f"row counts {rows}",
                           describe=False)
    for i, a in enumerate(arrays):
        if not np.all(np.isfinite(a)):
            n_bad = int(a.size - np.count_nonzero(np.isfinite(a)))
            raise bad_argument(f"views[{i}]", func, "finite", f"{n_bad} NaN or infinite entries", describe=False)
        check_no_constant_columns(a, f"views[{i}]", func)
    return arrays


def stack_views(views):
    return np.concatenate([np.asarray(v, dtype=np.float64).reshape(len(v), -1) for v in views], axis=1)


class KernelMixture(dist.Distribution):
    """``sum_h w_h prod_v sum_j mix_{v,h,j} N(x_v; loc_{v,h,j}, diag(scale_{v,h,j}^2))`` on stacked views."""

    support = dist.constraints.real_vector

    def __init__(self, weights, params, n_obs):
        self.weights, self.params = weights, params
        width = sum(p[1].shape[-1] for p in params)
        super().__init__(batch_shape=(n_obs,), event_shape=(width,))

    def log_prob(self, value):
        logp = jnp.log(self.weights)
        start = 0
        for mix, loc, scale in self.params:
            d = loc.shape[-1]
            x = value[..., None, None, start:start + d]
            inner = jnp.log(mix) + dist.Normal(loc, scale).log_prob(x).sum(-1)
            logp = logp + logsumexp(inner, axis=-1)
            start += d
        return logsumexp(logp, axis=-1)
