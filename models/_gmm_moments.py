"""Moments of Gaussian-mixture data for :mod:`specinit.models.gmm`: centred, augmented, noise-corrected.

The data are centred and a constant column appended (so centred or
standardized data need no shift and the odd-order sign is fixed); the noise
is either isotropic (the smallest covariance eigenvalues, [1]_ Thm 3.2/3.3)
or per-coordinate, from factor-analysis iterations. The passes run in NumPy,
through JAX (``backend="jax"``) or on the blocks of a Dask array.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Thm 3.2, Thm 3.3.
"""

from __future__ import annotations

import numpy as np

from specinit._validation import bad_argument
from specinit.engine.chunks import resolve_backend
from specinit.engine.moments import pair_products

__all__ = ["DataMoments", "effective_rank"]


def effective_rank(eigvals: np.ndarray) -> int:
    """Number of covariance eigenvalues above round-off (constant / duplicated columns give zeros)."""
    top = max(float(eigvals[-1]), np.finfo(float).tiny)
    return int(np.count_nonzero(eigvals > top * eigvals.size * 1e-12))


class DataMoments:
    """Noise-corrected moments of mixture data with a constant coordinate appended ([1]_ Thm 3.2/3.3).

    The data are centred and a constant coordinate ``c`` is appended:
    ``a = (x - E x, c)``. Its conditional means ``(mu_i - E x, c)`` are
    linearly independent whenever the means are affinely independent, so
    centred or standardized data (whose means are linearly DEPENDENT) need no
    shift, and ``d >= k`` suffices. The noise only touches the first ``d``
    coordinates: ``M2 = E[a a^T] - diag(D, 0)`` and ``M3 = E[a^(x)3] -
    sum_j D'_j sym(m (x) e_j (x) e_j)``. ``D`` is ``sigma_bar^2`` (the mean
    of the ``r - k + 1`` smallest non-zero covariance eigenvalues; ``r`` the
    rank, so constant or duplicated columns do not drag it to zero) for
    spherical mixtures, and a per-coordinate noise from principal-axis factor
    iterations ``D = diag(C - L L^T)`` (``L`` the top ``k - 1`` factors of
    ``C - D``) for diagonal ones. ``m`` is ``E[a] = c e_{d+1}`` (common noise)
    or ``M1' = E[a ||V^T (x - E x)||^2] / (r - k + 1)`` (per-component
    spherical variances, [1]_ Thm 3.3, with ``noise="isotropic"``; with
    ``noise="factor"`` the moment step corrects the shared per-coordinate
    noise for every covariance kind and ``M1'`` only yields the component
    variances).
    """

    def __init__(self, x: np.ndarray, k: int, covariance: str, func: str, backend=None, noise: str = "factor"):
        from specinit.engine import dask_passes

        n, d = x.shape
        self._lazy, self._device = dask_passes.is_dask_array(x), None  # Dask: passes where the blocks live
        if self._lazy:
            self.x = x
            n, self.mean, cov, ptp = dask_passes.centred_stats(x)
        else:
            self.mean = x.mean(axis=0)
            xc = x - self.mean
            cov = xc.T @ xc / n
        eigvals, eigvecs = np.linalg.eigh(cov)
        rank = effective_rank(eigvals)
        if rank < k:
            raise bad_argument("x", func, f"data whose covariance has rank >= k = {k} (constant or duplicated "
                               "columns add no rank)", f"rank {rank} with {d} columns", describe=False)
        m = rank - k + 1
        bottom = slice(d - rank, d - rank + m)  # the m smallest NON-ZERO eigenvalues
        self.sigma2 = float(eigvals[bottom].mean())
        signal = np.maximum(eigvals[d - k + 1:] - self.sigma2, 0.0).sum() if k > 1 else 0.0
        self.c = float(np.sqrt(signal)) if signal > 0 else float(np.sqrt(max(eigvals[-1], 1.0)))
        self.a = None if self._lazy else np.hstack([xc, np.full((n, 1), self.c)])
        self.n = n
        self.covariance = covariance
        self.noise = np.full(d, self.sigma2)
        self.m3_weights = self.noise
        self.m1 = np.zeros(d + 1)
        self.m1[d] = self.c
        self.factor_iterations = 0
        if covariance == "spherical" and self._lazy:
            self.m1 = dask_passes.reduce_blocks([x], dask_passes.augmented_m1_partial, self.mean, self.c,
                                                eigvecs[:, bottom]) / (n * m)
            self.m3_weights = np.ones(d)
        elif covariance == "spherical":
            proj = xc @ eigvecs[:, bottom]
            self.m1 = self.a.T @ np.sum(proj**2, axis=1) / (n * m)
            self.m3_weights = np.ones(d)
        self.m1_variances = self.m1  # M1' of Thm 3.3 (spherical): the component variances are solved from it
        self.noise_kind = "factor" if (covariance == "diag" or noise == "factor") and k > 1 else "isotropic"
        if self.noise_kind == "factor":
            self.noise = self._factor_noise(cov, k)
            self.m3_weights = self.noise
            self.m1 = np.zeros(d + 1)
            self.m1[d] = self.c
        self.eigenvalues = eigvals
        self.rank = rank
        self.n_constant = int(np.count_nonzero((ptp if self._lazy else np.ptp(x, axis=0)) == 0))
        if not self._lazy and resolve_backend(backend, func) == "jax":
            from specinit.engine.jax_passes import DeviceRows

            self._device = DeviceRows([self.a])

    def _factor_noise(self, cov, k, n_iter=50, tol=1e-6):
        """Per-coordinate noise of a rank-(k-1) + diagonal covariance (principal-axis factoring)."""
        diag = np.diag(cov).copy()
        floor = 1e-3 * max(float(diag.mean()), np.finfo(float).tiny)
        noise = np.minimum(np.full_like(diag, self.sigma2), diag)
        for it in range(1, n_iter + 1):
            values, vectors = np.linalg.eigh(cov - np.diag(noise))
            top = vectors[:, -(k - 1):] * np.sqrt(np.maximum(values[-(k - 1):], 0.0))
            new = np.clip(diag - np.sum(top**2, axis=1), floor, None)
            new = np.where(diag > 0, np.minimum(new, diag), 0.0)
            done = np.max(np.abs(new - noise)) < tol * max(float(diag.max()), np.finfo(float).tiny)
            noise = new
            if done:
                break
        self.factor_iterations = it
        return noise

    @property
    def n_features(self) -> int:
        return self.mean.size + 1

    def _gram(self, Q):
        """``A^T (A Q)`` on the backend holding the data."""
        from specinit.engine import dask_passes

        if self._lazy:
            return dask_passes.reduce_blocks([self.x], dask_passes.augmented_gram_partial, self.mean, self.c, Q)
        if self._device is not None:
            return self._device.gram(0, 0, Q)
        return self.a.T @ (self.a @ Q)

    def m2_matmat(self, Q):
        out = self._gram(np.asarray(Q, dtype=np.float64)) / self.n
        out[:-1] -= self.noise[:, None] * Q[:-1]
        return out

    def whitened_m3(self, W):
        from specinit.engine import dask_passes

        W = np.asarray(W, dtype=np.float64)
        if self._lazy:
            T = dask_passes.reduce_blocks([self.x], dask_passes.augmented_cube_partial, self.mean, self.c, W) / self.n
        elif self._device is not None:
            T = self._device.cube(0, W) / self.n
        else:
            Y = self.a @ W
            T = pair_products(Y, Y) / Y.shape[0]
        a, B = W.T @ self.m1, (W[:-1] * self.m3_weights[:, None]).T @ W[:-1]
        return T - (np.einsum("a,bc->abc", a, B) + np.einsum("b,ac->abc", a, B) + np.einsum("c,ab->abc", a, B))
