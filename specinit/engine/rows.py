"""Noise-corrected moments of rows drawn from a Gaussian mixture: standardized, centred, augmented.

The rows are standardized once (centred, divided by their largest column
range), so data in any unit -- scaled by 1e-150 or 1e150 -- give the same
moments; callers map the recovered means and scales back with the
``shift`` and ``unit`` of :class:`RowMoments`. A constant coordinate
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

from itertools import combinations
from typing import TYPE_CHECKING, Literal, Mapping

import numpy as np

from specinit._validation import bad_argument, bad_stored, check_allocation, public, stored_array
from specinit.engine.backends import OnBackend, Passes, numba_kernel
from specinit.engine.backends.numpy import pair_products
from specinit.engine.cumulants import fourth_power_sum
from specinit.engine.sources import ViewSource, check_rows

if TYPE_CHECKING:
    import scipy.sparse as sp
    from numpy.typing import ArrayLike

__all__ = ["ROW_PASSES", "RowMoments", "RowSums", "effective_rank", "unit_of"]

#: The passes a row model needs from its backend.
ROW_PASSES = frozenset({"gram", "triples"})


def unit_of(*arrays: np.ndarray) -> float:
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


def _shifted_power_sums(n: int, powers: tuple, a: float, b: np.ndarray) -> tuple:
    """The power sums of ``a y + b`` from those of ``y`` (``powers[p - 1] = sum_n y_n^(x)p``), by the binomial
    expansion of every symmetric power: the term with ``j`` factors ``b`` is ``a^(p-j) s_(p-j) (x) b^(x)j`` placed
    at each of the ``C(p, j)`` choices of ``b``'s axes (``s_0 = n``)."""
    sums = (np.asarray(float(n)), *powers)
    shifted = []
    for p in range(1, len(sums)):
        total = np.zeros((b.size,) * p)
        for j in range(p + 1):
            term = a ** (p - j) * sums[p - j]
            for _ in range(j):
                term = np.multiply.outer(term, b)
            for places in combinations(range(p), j):  # the axes that carry b
                rest = [axis for axis in range(p) if axis not in places]
                total += np.transpose(term, np.argsort(rest + list(places)))
        shifted.append(total)
    return tuple(shifted)


class RowSums:
    """The exact additive summary of rows: their count, column ranges and the sums of their first powers.

    The sums ``s1 = sum_n y_n``, ``s2 = sum_n y_n y_n^T``, ``s3 = sum_n
    y_n^(x)3`` (and ``s4 = sum_n y_n^(x)4`` with ``order=4``) are kept for ``y
    = (x - origin) / scale`` in the frame of the first batch (its mean and
    largest column range): two summaries of disjoint batches add up (``+``,
    the second re-expressed in the first's frame by the binomial expansion)
    to the summary of their union (up to the lower order of the two), and
    the central moments read from it (:meth:`standardized`,
    :meth:`projected_central`; :class:`RowMoments`) equal those of all the
    rows at once (to rounding), so rows can arrive in batches. Memory: about
    six (d,) * order float arrays while summaries merge and are read (refused
    over the memory budget, :func:`specinit.memory_limit`).

    Parameters
    ----------
    n : int
    low, high : ndarray, shape (d,)
        Column minima and maxima.
    origin : ndarray, shape (d,)
    scale : float
    *powers : ndarray
        ``s1, s2, s3`` (and ``s4``), shapes (d,), (d, d), (d, d, d), (d, d, d, d).
    """

    def __init__(self, n: int, low: ArrayLike, high: ArrayLike, origin: ArrayLike, scale: float,
                 *powers: ArrayLike) -> None:
        self.n, self.scale = int(n), float(scale)
        self.low, self.high, self.origin = (np.asarray(a, dtype=np.float64) for a in (low, high, origin))
        self.powers = tuple(np.asarray(a, dtype=np.float64) for a in powers)

    @property
    def n_features(self) -> int:
        return self.origin.size

    @property
    def order(self) -> int:
        """The highest power summed (3 or 4)."""
        return len(self.powers)

    @classmethod
    def from_rows(cls, x: ArrayLike | sp.sparray | sp.spmatrix, name: str = "x", order: Literal[3, 4] = 3,
                  frame: "RowSums | None" = None) -> "RowSums":
        """The summary of a batch of rows.

        Parameters
        ----------
        x : array-like, shape (N, d)
            Finite rows (N >= 1).
        name : str
            The argument named in errors.
        order : {3, 4}
            The highest power summed.
        frame : RowSums, optional
            A summary whose frame (origin and scale) the sums are taken in, so that adding the two needs no
            change of frame; None: the batch's own mean and largest column range.

        Returns
        -------
        RowSums

        Raises
        ------
        ValueError
            Rows that are not finite, or not a 2-D array.
        MemoryError
            The (d,) * order sums over the memory budget.
        """
        x = check_rows(x, name, min_rows=1)
        n, d = x.shape
        check_allocation(6 * 8.0 * d**order, name, f"the {'(d, d, d)' if order == 3 else '(d, d, d, d)'} sums of "
                         f"the rows' powers up to {order} (about six such arrays while they are merged and read)")
        if frame is not None and frame.n_features != d:
            raise bad_argument(name, None, f"rows of {frame.n_features} columns (the summary's)", f"{d} columns",
                               describe=False)
        low, high = x.min(axis=0), x.max(axis=0)
        origin, scale = (x.mean(axis=0), unit_of(high - low)) if frame is None else (frame.origin, frame.scale)
        y = (x - origin) / scale
        powers = (y.sum(axis=0), y.T @ y, pair_products(y, y))
        return cls(n, low, high, origin, scale, *powers, *((fourth_power_sum(y),) if order == 4 else ()))

    def __add__(self, other: "RowSums") -> "RowSums":
        if not isinstance(other, RowSums):
            return NotImplemented
        if other.n_features != self.n_features:
            raise bad_argument("x", None, f"rows of {self.n_features} columns (the summary's)",
                               f"{other.n_features} columns", describe=False)
        order = min(self.order, other.order)
        if other.scale == self.scale and np.array_equal(other.origin, self.origin):  # the same frame
            shifted = other.powers[:order]
        else:  # other's rows in this frame: y = a y_other + b
            a, b = other.scale / self.scale, (other.origin - self.origin) / self.scale
            shifted = _shifted_power_sums(other.n, other.powers[:order], a, b)
        return RowSums(self.n + other.n, np.minimum(self.low, other.low), np.maximum(self.high, other.high),
                       self.origin, self.scale, *(mine + theirs for mine, theirs in zip(self.powers, shifted)))

    def standardized(self, order: int = 3) -> tuple[np.ndarray, float, tuple]:
        """``(shift, unit, central)`` of the standardized rows ``z = (x - shift) / unit`` (``shift`` the mean,
        ``unit`` the largest column range): ``central`` holds ``E[z^(x)p]`` for ``p = 2 .. order``
        (``E[z z^T]``, ``E[z^(x)3]``: what :class:`RowMoments` computes from the rows themselves)."""
        mean = self.powers[0] / self.n
        unit = unit_of(self.high - self.low)
        ratio = self.scale / unit
        central = _shifted_power_sums(self.n, self.powers[:order], 1.0, -mean)[1:]
        return self.origin + self.scale * mean, unit, tuple(ratio**p * total / self.n
                                                            for p, total in enumerate(central, 2))

    def projected_central(self, W: np.ndarray, order: int | None = None) -> tuple:
        """``E[u^(x)p]`` for ``p = 2 .. order`` of ``u = W^T z`` (``z`` the standardized rows of
        :meth:`standardized`), each (k,) * p: the sums are contracted with ``W`` before the shift to the mean, so
        no (d,) * order central tensor is formed.

        Parameters
        ----------
        W : ndarray, shape (d, k)
        order : int, optional
            The highest power read (default: every power summed).

        Returns
        -------
        tuple of ndarray
        """
        ratio = self.scale / unit_of(self.high - self.low)
        projected = []
        for power in self.powers[:order]:
            for _ in range(power.ndim):  # contract the leading axis; the new one goes last
                power = np.tensordot(power, W, axes=(0, 0))
            projected.append(power)
        central = _shifted_power_sums(self.n, tuple(projected), 1.0, -projected[0] / self.n)
        return tuple(ratio**p * total / self.n for p, total in enumerate(central[1:], 2))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them)."""
        return {"n": np.asarray(self.n), "low": self.low, "high": self.high, "origin": self.origin,
                "scale": np.asarray(self.scale), **{f"s{p}": power for p, power in enumerate(self.powers, 1)}}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], name: str = "estimate") -> "RowSums":
        """The summary saved by :meth:`to_arrays`, every array checked (:func:`~specinit._validation.stored_array`:
        a :class:`~specinit._validation.StoredArrayError` names the damaged one)."""
        d = stored_array(arrays, "origin", "row sums", name, ndim=1).shape[0]
        shapes = cls._shapes(d, 4 if "s4" in arrays else 3)
        parts = {key: stored_array(arrays, key, "row sums", name, shape=shape) for key, shape in shapes.items()}
        if not (parts["n"] >= 1 and parts["n"] == np.round(parts["n"])):
            raise bad_stored(name, "row sums", "n", "the number of rows summed (a whole number >= 1)", parts["n"])
        if not parts["scale"] > 0:
            raise bad_stored(name, "row sums", "scale", "> 0", parts["scale"])
        low, high, origin = parts["low"], parts["high"], parts["origin"]
        with np.errstate(over="ignore", invalid="ignore"):
            ranges = high - low
            reach = np.max(np.maximum(high - origin, origin - low), initial=0.0) / parts["scale"]
        if not np.all(np.isfinite(ranges) & (ranges >= 0)):
            raise bad_stored(name, "row sums", "low", "at most 'high' in every column, by a range float64 holds",
                             f"ranges {np.array2string(ranges, threshold=8)}")
        if np.any((origin < low) | (origin > high)):
            raise bad_stored(name, "row sums", "origin", "within ['low', 'high'] in every column (the mean of the "
                             "first batch)", f"columns {np.flatnonzero((origin < low) | (origin > high)).tolist()} "
                             "outside")
        powers = [parts[key] for key in shapes if key.startswith("s") and key != "scale"]
        slack = 1.0 + 1e-6 + 8 * parts["n"] * np.finfo(np.float64).eps  # the rounding of n terms
        for p, power in enumerate(powers, 1):  # every row is within 'reach' of the origin, in units of 'scale'
            with np.errstate(over="ignore"):
                bound = parts["n"] * reach**p * slack
            if np.max(np.abs(power), initial=0.0) > bound:
                raise bad_stored(name, "row sums", f"s{p}", f"at most n times the rows' largest distance from "
                                 f"'origin' to the power {p} ({bound:.3g}) in absolute value",
                                 f"{np.max(np.abs(power)):.3g}")
        return cls(int(parts["n"]), parts["low"], parts["high"], parts["origin"], float(parts["scale"]), *powers)

    @staticmethod
    def _shapes(d: int, order: int) -> dict:
        return {"n": (), "low": (d,), "high": (d,), "origin": (d,), "scale": (),
                **{f"s{p}": (d,) * p for p in range(1, order + 1)}}


def factor_noise_iterations(cov: np.ndarray, noise: np.ndarray, k: int, n_iter: int,
                            tol: float) -> tuple[np.ndarray, int, bool]:
    """Principal-axis factoring of a covariance: the per-coordinate noise ``D`` of ``cov = L L^T + D``, rank k - 1.

    Each iteration takes the top k - 1 eigenpairs of ``cov - D`` as ``L L^T`` and sets ``D`` to what is left of
    the diagonal, floored at 1e-3 of the mean variance and at most each coordinate's variance (0 for constant
    coordinates); it stops once no entry moves by more than ``tol`` times the largest variance. Plain NumPy that
    Numba also compiles (:func:`specinit.engine.backends.numba.factor_noise_iterations`).

    Parameters
    ----------
    cov : ndarray, shape (d, d), C-contiguous float64
    noise : ndarray, shape (d,)
        The start.
    k : int
        Number of components (``2 <= k <= d``).
    n_iter : int
        Most iterations.
    tol : float

    Returns
    -------
    noise : ndarray, shape (d,)
    iterations : int
    converged : bool
    """
    d = cov.shape[0]
    diag = np.diag(cov).copy()
    tiny = np.finfo(np.float64).tiny
    floor = 1e-3 * max(diag.mean(), tiny)
    bound = tol * max(diag.max(), tiny)
    it, done = 0, False
    for it in range(1, n_iter + 1):
        values, vectors = np.linalg.eigh(cov - np.diag(noise))
        top = vectors[:, d - (k - 1):] * np.sqrt(np.maximum(values[d - (k - 1):], 0.0))
        new = np.maximum(diag - np.sum(top**2, axis=1), floor)
        new = np.where(diag > 0, np.minimum(new, diag), 0.0)
        done = np.max(np.abs(new - noise)) < bound
        noise = new
        if done:
            break
    return noise, it, done


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
    x : (N, d) array, Dask array of dense row blocks, ViewSource, or RowSums
        The rows (finite), or their summary (:class:`RowSums`: the same
        moments from its sums, no pass over rows).
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
    def __init__(self, x: ArrayLike | sp.sparray | sp.spmatrix | RowSums, k: int,
                 covariance: Literal["common", "spherical", "diag"], noise: Literal["factor", "isotropic"] = "factor",
                 backend: str | Passes | None = None) -> None:
        summed = isinstance(x, RowSums)
        if summed:  # the moments from the summary's sums: no pass over rows
            self._run_on("numpy", "numpy", ROW_PASSES)
            n, d = x.n, x.n_features
            self.shift, self.unit, (cov, third) = x.standardized()
            ptp = x.high - x.low
        else:
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
        P = eigvecs[:, bottom]
        if summed:  # E[a a^T] and E[a^(x)3] of a = (z, c), E[z] = 0
            self._placed = None
            self._m2 = np.zeros((d + 1, d + 1))
            self._m2[:d, :d], self._m2[d, d] = cov, c * c
            self._m3 = np.zeros((d + 1,) * 3)
            self._m3[:d, :d, :d] = third
            self._m3[:d, :d, d] = self._m3[:d, d, :d] = self._m3[d, :d, :d] = c * cov
            self._m3[d, d, d] = c**3
            if covariance == "spherical":  # E[a ||P^T z||^2] / m
                self.m1 = np.einsum("ijk,jk->i", self._m3[:, :d, :d], P @ P.T) / m
                self.m3_weights = np.ones(d)
        else:
            augmented = z.map(lambda block: np.hstack([block, np.full((block.shape[0], 1), c)]), d + 1)
            if covariance == "spherical":
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
        noise = np.minimum(np.full_like(diag, self.sigma2), diag)
        if not self.factor_identified:  # the iterations would drift along a family of equal fits
            return noise
        iterate = numba_kernel("factor_noise_iterations") or factor_noise_iterations  # compiled with [fast]
        noise, it, done = iterate(np.ascontiguousarray(cov, dtype=np.float64), noise, k, n_iter, tol)
        self.factor_iterations, self.factor_converged = int(it), bool(done)
        return noise

    @property
    def n_features(self) -> int:
        """``d + 1`` (the constant coordinate included)."""
        return self.shift.size + 1

    def m2_matmat(self, Q: ArrayLike) -> np.ndarray:
        """``M2 @ Q`` (one pass)."""
        Q = np.asarray(Q, dtype=np.float64)
        out = self._m2 @ Q if self._placed is None else self.passes.gram(self._placed, 0, 0, Q) / self.n
        out[:-1] -= self.noise[:, None] * Q[:-1]
        return out

    def whitened_m3(self, W: ArrayLike) -> np.ndarray:
        """``M3(W, W, W)`` (one pass)."""
        W = np.asarray(W, dtype=np.float64)
        if self._placed is None:
            T = np.einsum("ijk,ia,jb,kc->abc", self._m3, W, W, W, optimize=True)
        else:
            T = self.passes.triples(self._placed, 0, 0, 0, W, W, W) / self.n
        a, B = W.T @ self.m1, (W[:-1] * self.m3_weights[:, None]).T @ W[:-1]
        return T - (np.einsum("a,bc->abc", a, B) + np.einsum("b,ac->abc", a, B) + np.einsum("c,ab->abc", a, B))
