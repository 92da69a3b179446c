"""Noise-corrected moments of rows drawn from a Gaussian mixture: standardized, centred, augmented.

The rows are standardized once (centred, divided by their largest column
range), so data in any unit -- scaled by 1e-150 or 1e150 -- give the same
moments; callers map the recovered means and scales back with
:attr:`RowMoments.shift` and :attr:`RowMoments.unit`. A constant coordinate
is appended (centred or standardized data need no shift, the odd-order sign
is fixed) and the noise is either isotropic (the smallest covariance
eigenvalues, [1]_ Thm 3.2/3.3) or per-coordinate, from factor-analysis
iterations. The passes run on any backend that implements ``gram`` and
``triples`` (:mod:`specinit.engine.backends`).

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Thm 3.2, Thm 3.3.
"""

from __future__ import annotations

import numpy as np

from specinit._validation import bad_argument, public
from specinit.engine.backends import OnBackend
from specinit.engine.sources import ViewSource

__all__ = ["ROW_PASSES", "RowMoments", "effective_rank", "unit_of"]

#: The passes a row model needs from its backend.
ROW_PASSES = frozenset({"gram", "triples"})


def unit_of(*arrays) -> float:
    """The largest absolute entry of ``arrays``: the unit that brings data of any scale to O(1) (1.0 when all are 0).

    Dividing data by it (and multiplying locations and scales back) makes a
    fit scale-free: ``unit_of(s * x)`` is ``s * unit_of(x)`` to one rounding,
    so data in other units (times 1e-150 .. 1e150) are standardized to the
    same values, and no square or cube of the standardized data overflows or
    underflows.

    Parameters
    ----------
    *arrays : ndarray
        Finite arrays.

    Returns
    -------
    float
    """
    unit = max((float(np.max(np.abs(a))) for a in arrays if np.size(a)), default=0.0)
    return unit if unit > 0 else 1.0


def effective_rank(eigvals: np.ndarray) -> int:
    """Number of covariance eigenvalues above round-off (constant / duplicated columns give zeros).

    Parameters
    ----------
    eigvals : ndarray
        Eigenvalues in ascending order.

    Returns
    -------
    int
    """
    top = max(float(eigvals[-1]), np.finfo(float).tiny)
    return int(np.count_nonzero(eigvals > top * eigvals.size * 1e-12))


class RowMoments(OnBackend):
    """Noise-corrected moments of mixture rows with a constant coordinate appended ([1]_ Thm 3.2/3.3).

    The standardized rows ``z = (x - shift) / unit`` get a constant
    coordinate ``c``: ``a = (z, c)``. Its conditional means ``(mu_i, c)``
    are linearly independent whenever the means are affinely independent,
    so ``d >= k`` suffices. The noise only touches the first ``d``
    coordinates: ``M2 = E[a a^T] - diag(D, 0)`` and ``M3 = E[a^(x)3] -
    sum_j D'_j sym(m (x) e_j (x) e_j)``. ``D`` is ``sigma_bar^2`` (the mean
    of the ``r - k + 1`` smallest non-zero covariance eigenvalues; ``r`` the
    rank, so constant or duplicated columns do not drag it to zero) for
    isotropic noise, and a per-coordinate noise from principal-axis factor
    iterations ``D = diag(C - L L^T)`` (``L`` the top ``k - 1`` factors of
    ``C - D``) otherwise, where the covariance identifies it (``(r - k +
    1)^2 >= r + k - 1``, Ledermann's bound; below it, e.g. d = 4 and k = 3,
    every noise of a family fits the covariance equally and the iterations
    drift towards a variance of zero, so the iterations' start is kept:
    ``sigma_bar^2``, capped at each coordinate's variance). ``m`` is ``E[a] = c e_{d+1}`` (shared noise) or
    ``M1' = E[a ||V^T z||^2] / (r - k + 1)`` (per-component spherical
    variances, [1]_ Thm 3.3, with ``noise="isotropic"``).

    Parameters
    ----------
    x : (N, d) array, Dask array of dense row blocks, or ViewSource
        The rows (finite).
    k : int
        Number of components.
    covariance : {"common", "spherical", "diag"}
        The mixture's covariance kind.
    noise : {"factor", "isotropic"}
        Noise correction (always per-coordinate for ``"diag"``).
    backend : str, Passes or None
        Where the passes run (:func:`specinit.engine.backends.resolve_backend`).

    Attributes
    ----------
    shift, unit : ndarray (d,), float
        The standardization: ``x = shift + unit * z``.
    sigma2, noise, c, m1, m1_variances : as above, in standardized units.
    eigenvalues : ndarray
        Covariance eigenvalues of ``z`` (ascending).
    rank, n_constant, factor_iterations : int
    factor_identified : bool
        Whether the covariance identifies a per-coordinate noise (``(r - k + 1)^2 >= r + k - 1``).
    noise_kind : {"factor", "isotropic"}
        The noise model: shared by the components (``"factor"``) or the ``M1'`` correction of Thm 3.3.
    factor_converged : bool
        The principal-axis iterations met their tolerance within their cap of 50 (always True for isotropic
        noise). They converge linearly, sometimes slowly (where a noise variance heads for its floor).

    Raises
    ------
    ValueError
        A covariance of rank < k.
    """

    @public
    def __init__(self, x, k: int, covariance: str, noise: str = "factor", backend=None):
        source = x if isinstance(x, ViewSource) else ViewSource([x], "x", minimum=1)
        self._run_on(backend, source.kind, ROW_PASSES)
        n, d = source.n_observations, source.dims[0]
        _, self.shift, ptp = source.summary()
        self.unit = float(np.max(ptp)) if np.max(ptp) > 0 else 1.0
        shift, unit = self.shift, self.unit
        z = source.map(lambda block: (block - shift) / unit, d)
        cov = self.passes.gram(self.passes.place_views(z), 0, 0, np.eye(d)) / n
        cov = 0.5 * (cov + cov.T)
        eigvals, eigvecs = np.linalg.eigh(cov)
        rank = effective_rank(eigvals)
        if rank < k:
            raise bad_argument("x", None, f"data whose covariance has rank >= k = {k} (constant or duplicated "
                               "columns add no rank)", f"rank {rank} with {d} columns", describe=False)
        m = rank - k + 1
        bottom = slice(d - rank, d - rank + m)  # the m smallest NON-ZERO eigenvalues
        self.sigma2 = float(eigvals[bottom].mean())
        signal = np.maximum(eigvals[d - k + 1:] - self.sigma2, 0.0).sum() if k > 1 else 0.0
        self.c = c = float(np.sqrt(signal)) if signal > 0 else float(np.sqrt(max(eigvals[-1], 1.0)))
        self.n = n
        self.covariance = covariance
        self.noise = np.full(d, self.sigma2)
        self.m3_weights = self.noise
        self.m1 = np.zeros(d + 1)
        self.m1[d] = c
        self.factor_iterations, self.factor_converged = 0, True
        augmented = z.map(lambda block: np.hstack([block, np.full((block.shape[0], 1), c)]), d + 1)
        if covariance == "spherical":
            P = eigvecs[:, bottom]
            weight = z.map(lambda block: np.sum((block @ P) ** 2, axis=1, keepdims=True), 1)
            placed = self.passes.place_views(augmented.join(weight))
            self.m1 = self.passes.gram(placed, 0, 1, np.ones((1, 1)))[:, 0] / (n * m)
            self.m3_weights = np.ones(d)
        else:
            placed = self.passes.place_views(augmented)
        self._placed = placed
        self.m1_variances = self.m1  # M1' of Thm 3.3 (spherical): the component variances are solved from it
        # k - 1 factors and a diagonal are identified by an r x r covariance only when (r - k + 1)^2 >= r + k - 1
        # (Ledermann's bound); below it the factor iterations drift along a family of equal fits
        self.factor_identified = (rank - k + 1) ** 2 >= rank + k - 1
        self.noise_kind = "factor" if (covariance == "diag" or noise == "factor") and k > 1 else "isotropic"
        if self.noise_kind == "factor":
            self.noise = self._factor_noise(cov, k)
            self.m3_weights = self.noise
            self.m1 = np.zeros(d + 1)
            self.m1[d] = c
        self.eigenvalues = eigvals
        self.rank = rank
        self.n_constant = int(np.count_nonzero(ptp == 0))

    def _factor_noise(self, cov, k, n_iter=50, tol=1e-6):
        """Per-coordinate noise of a rank-(k-1) + diagonal covariance (principal-axis factoring); where that is not
        identified, the iterations' start: ``sigma_bar^2``, at most each coordinate's variance."""
        diag = np.diag(cov).copy()
        floor = 1e-3 * max(float(diag.mean()), np.finfo(float).tiny)
        noise = np.minimum(np.full_like(diag, self.sigma2), diag)
        if not self.factor_identified:  # the iterations would drift along a family of equal fits
            return noise
        for it in range(1, n_iter + 1):
            values, vectors = np.linalg.eigh(cov - np.diag(noise))
            top = vectors[:, -(k - 1):] * np.sqrt(np.maximum(values[-(k - 1):], 0.0))
            new = np.clip(diag - np.sum(top**2, axis=1), floor, None)
            new = np.where(diag > 0, np.minimum(new, diag), 0.0)
            done = np.max(np.abs(new - noise)) < tol * max(float(diag.max()), np.finfo(float).tiny)
            noise = new
            if done:
                break
        self.factor_iterations, self.factor_converged = it, bool(done)
        return noise

    @property
    def n_features(self) -> int:
        """``d + 1`` (the constant coordinate included)."""
        return self.shift.size + 1

    def m2_matmat(self, Q):
        """``M2 @ Q`` (one pass)."""
        Q = np.asarray(Q, dtype=np.float64)
        out = self.passes.gram(self._placed, 0, 0, Q) / self.n
        out[:-1] -= self.noise[:, None] * Q[:-1]
        return out

    def whitened_m3(self, W):
        """``M3(W, W, W)`` (one pass)."""
        W = np.asarray(W, dtype=np.float64)
        T = self.passes.triples(self._placed, 0, 0, 0, W, W, W) / self.n
        a, B = W.T @ self.m1, (W[:-1] * self.m3_weights[:, None]).T @ W[:-1]
        return T - (np.einsum("a,bc->abc", a, B) + np.einsum("b,ac->abc", a, B) + np.einsum("c,ab->abc", a, B))
