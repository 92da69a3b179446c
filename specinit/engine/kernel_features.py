"""Low-rank kernel features for the nonparametric multi-view estimator: O(N r) memory, never N x N.

Random Fourier features (default, rank 128) and Nystrom features with
pivoted-Cholesky landmarks for the Gaussian RBF kernel; the default
bandwidth (half the median distance on standardized columns) and input
checks. Both feature maps give the mean embedding of a Gaussian in closed
form, which is what makes exact population moments possible
(:mod:`specinit.engine.kernels`).

References
----------
.. [1] Song, Anandkumar, Dai, Xie, "Nonparametric estimation of multi-view
   latent variable models", ICML 2014, Alg. 1.
.. [2] Rahimi, Recht, "Random features for large-scale kernel machines", NIPS 2007.
"""

from __future__ import annotations
from typing import TYPE_CHECKING, Literal, Mapping

import numpy as np

from specinit._validation import (
    as_generator,
    bad_argument,
    bad_stored,
    check_choice,
    check_int,
    check_positive,
    stored_array,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = [
    "FEATURES",
    "NystromFeatures",
    "RandomFourierFeatures",
    "check_bandwidth",
    "check_no_constant_columns",
    "feature_map_from_arrays",
    "kernel_features",
    "median_bandwidth",
]

FEATURES = ("rff", "nystrom")
_CHUNK_BYTES = 32 * 2**20  # bound on per-chunk intermediates (N_chunk x r or N_chunk x k^2)
_MEDIAN_POINTS = 1000



def _check_matrix(x, name: str, func: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == object or x.dtype.kind not in "biuf":
        raise bad_argument(name, func, "a numeric (N, d) array", x, kind=TypeError)
    x = x.astype(np.float64, copy=False)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise bad_argument(name, func, "a non-empty (N,) or (N, d) array", x)
    if not np.all(np.isfinite(x)):
        n_bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        raise bad_argument(name, func, "finite", f"{n_bad} NaN or infinite entries", describe=False)
    return x


def check_bandwidth(bandwidth: float | ArrayLike, dim: int, name: str, func: str) -> np.ndarray:
    """A scalar or per-column bandwidth as a positive (dim,) vector.

    Parameters
    ----------
    bandwidth : float or array of shape (dim,)
        Gaussian kernel length scale(s) ``sigma_j``.
    dim : int
        Number of columns of the view.
    name, func : str
        Argument and function named in the error message.

    Returns
    -------
    ndarray, shape (dim,)

    Raises
    ------
    ValueError
        A value ``<= 0``, NaN or infinite, or the wrong length.

    References
    ----------
    Song et al., ICML 2014, Sec. 3 (Gaussian RBF kernel embeddings).
    """
    value = np.asarray(bandwidth, dtype=np.float64) if not isinstance(bandwidth, (str, bytes)) else None
    if value is None or value.ndim > 1 or (value.ndim == 1 and value.size != dim):
        raise bad_argument(name, func, f"a positive number or a vector of {dim} positive numbers", bandwidth)
    if not np.all(np.isfinite(value)) or np.any(value <= 0):
        raise bad_argument(name, func, "> 0 and finite (a Gaussian kernel length scale)", bandwidth)
    return np.broadcast_to(value, (dim,)).astype(np.float64)


def check_no_constant_columns(x: np.ndarray, name: str, func: str) -> np.ndarray:
    """Column standard deviations of ``x``, after checking that no column is constant.

    Parameters
    ----------
    x : array, shape (N, d) or (N,)
    name, func : str
        Argument and function named in the error message.

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    ValueError
        Fewer than 2 rows, non-finite values, or a constant column (it
        carries no information about the class and a Gaussian kernel cannot
        scale it).

    References
    ----------
    Song et al., ICML 2014, Sec. 3 (Gaussian RBF kernel embeddings).
    """
    x = _check_matrix(x, name, func)
    if x.shape[0] < 2:
        raise bad_argument(name, func, "at least 2 observations", f"{x.shape[0]} rows", describe=False)
    size = np.abs(x).max(axis=0)  # relative test, computed in the column's own unit: scale-free
    unit = np.where(size > 0, size, 1.0)
    std = unit * (x / unit).std(axis=0)
    constant = np.flatnonzero(std <= 1e-12 * size)
    if constant.size:
        raise bad_argument(name, func, "free of constant columns (a constant column carries no information; "
                           "drop it)", f"constant columns {constant.tolist()}", describe=False)
    return std


def median_bandwidth(x: ArrayLike, *, factor: float = 0.5, max_points: int = _MEDIAN_POINTS,
                     seed: int | np.random.Generator = 0, name: str = "x",
                     func: str = "median_bandwidth") -> np.ndarray:
    """Median-heuristic Gaussian kernel bandwidth, one length scale per column.

    Columns are standardized by their standard deviation; the bandwidth is
    ``sigma_j = factor * std_j * median ||(x_n - x_n') / std||`` over the
    pairs of a random subsample of at most ``max_points`` rows. It adapts to
    the scale and dimension of every view and needs no tuning. The default
    ``factor = 0.5`` (half the median distance): with the full median
    distance the embeddings of k = 5 components of one-dimensional views were
    too similar to separate (the 5th eigenvalue of the second-order
    embedding drowned in noise at N <= 10^4 in the benchmark), while half is
    as accurate for k <= 3 (weights and density errors within noise of
    factor 1 and 0.3).

    Parameters
    ----------
    x : array, shape (N, d) or (N,)
        One view.
    factor : float
        Multiplier of the median distance (> 0).
    max_points : int
        Size of the subsample used for the pairwise distances.
    seed : int or numpy.random.Generator
        Chooses the subsample.
    name, func : str
        Argument and function named in error messages.

    Returns
    -------
    ndarray, shape (d,)

    Raises
    ------
    ValueError
        Non-finite values, fewer than 2 rows, or a constant column (zero
        standard deviation: a Gaussian kernel cannot scale it, and it carries
        no information about the class).

    References
    ----------
    Song, Anandkumar, Dai, Xie, "Nonparametric Estimation of Multi-View
    Latent Variable Models" (Gaussian RBF kernel embeddings); the median
    heuristic of Schoelkopf and Smola, "Learning with Kernels".
    """
    x = _check_matrix(x, name, func)
    factor = check_positive(factor, "factor", func)
    max_points = check_int(max_points, "max_points", func, minimum=2)
    std = check_no_constant_columns(x, name, func)
    rng = as_generator(seed, func)
    sub = x if x.shape[0] <= max_points else x[rng.choice(x.shape[0], max_points, replace=False)]
    z = sub / std
    sq = np.sum(z**2, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * z @ z.T, 0.0)
    iu = np.triu_indices(z.shape[0], 1)
    med = float(np.sqrt(np.median(d2[iu])))
    if med <= 0:
        raise bad_argument(name, func, "not made of (nearly) identical rows", "a median pairwise distance of 0",
                           describe=False)
    return factor * std * med


def _check_columns(x, dim: int, func: str) -> np.ndarray:
    """``x`` as a finite (N, dim) float64 array (the input check of every feature map's ``transform``)."""
    x = _check_matrix(x, "x", func)
    if x.shape[1] != dim:
        raise bad_argument("x", func, f"an array with {dim} columns", x)
    return x


class RandomFourierFeatures:
    """Random Fourier features of the Gaussian RBF kernel (rank ``r``, even).

    ``phi(x) = r^(-1/2) [cos(Omega^T x), sin(Omega^T x)]`` with the ``r / 2``
    columns of ``Omega`` drawn from ``N(0, diag(bandwidth)^(-2))``, so that
    ``E[phi(x)^T phi(y)] = exp(-sum_j (x_j - y_j)^2 / (2 bandwidth_j^2))``.

    Parameters
    ----------
    dim : int
        Number of columns of the view.
    bandwidth : float or array of shape (dim,)
        Kernel length scale(s), > 0.
    rank : int
        Number of features ``r`` (even, >= 2).
    seed : int or numpy.random.Generator
        Draws the frequencies.

    Raises
    ------
    ValueError
        ``rank`` odd or < 2, a bandwidth <= 0.

    References
    ----------
    Rahimi, Recht, "Random features for large-scale kernel machines", NIPS 2007;
    used for the kernel embeddings of Song et al., ICML 2014, eqs. 34-35.
    """

    kind = "rff"

    def __init__(self, dim: int, bandwidth: float | ArrayLike, rank: int = 128,
                 seed: int | np.random.Generator = 0) -> None:
        func = "RandomFourierFeatures"
        self.dim = check_int(dim, "dim", func, minimum=1)
        self.bandwidth = check_bandwidth(bandwidth, self.dim, "bandwidth", func)
        self.rank = check_int(rank, "rank", func, minimum=2)
        if self.rank % 2:
            raise bad_argument("rank", func, "an even integer (cos and sin pairs)", rank)
        rng = as_generator(seed, func)
        self.omega = rng.standard_normal((self.dim, self.rank // 2)) / self.bandwidth[:, None]

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays that :func:`feature_map_from_arrays` reads back (an online estimate's ``state`` keeps them)."""
        return {"bandwidth": self.bandwidth, "omega": self.omega}

    def transform(self, x: ArrayLike) -> np.ndarray:
        """Features of the rows of ``x`` (N, dim) -> (N, r).

        Parameters
        ----------
        x : array, shape (N, dim) or (N,)

        Returns
        -------
        ndarray, shape (N, r)

        Raises
        ------
        ValueError
            Non-finite values or a number of columns other than ``dim``.

        References
        ----------
        Rahimi, Recht, NIPS 2007 (random features); Williams, Seeger, NIPS 2001
        (Nystrom); used as the low-rank factor of Song et al., ICML 2014, Alg. 1.
        """
        proj = _check_columns(x, self.dim, "RandomFourierFeatures.transform") @ self.omega
        return np.concatenate([np.cos(proj), np.sin(proj)], axis=1) / np.sqrt(self.rank // 2)

    def gaussian_embedding(self, loc: ArrayLike, scale: ArrayLike) -> np.ndarray:
        """Mean embedding ``E[phi(x)]`` of ``x ~ N(loc, diag(scale^2))`` (closed form).

        Parameters
        ----------
        loc, scale : arrays of shape (..., dim)

        Returns
        -------
        ndarray, shape (..., r)

        Raises
        ------
        ValueError
            ``loc`` and ``scale`` whose last axis is not ``dim`` (shape mismatch).

        References
        ----------
        Song et al., ICML 2014, eqs. 34-35 (population kernel embeddings); for
        Gaussians under a Gaussian kernel the embedding is a Gaussian convolution.
        """
        loc, scale = np.asarray(loc, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        proj = loc @ self.omega
        damp = np.exp(-0.5 * (scale**2) @ self.omega**2)
        return np.concatenate([damp * np.cos(proj), damp * np.sin(proj)], axis=-1) / np.sqrt(self.rank // 2)


def _scaled_sq_distances(x, z, bandwidth) -> np.ndarray:
    """``sum_j ((x_j - z_j) / bandwidth_j)^2`` of every pair of rows of ``x`` and ``z``."""
    a, b = x / bandwidth, z / bandwidth
    if a.shape[1] <= 3:  # direct differences: fewer temporaries for low-dimensional views
        d2 = np.subtract(a[:, None, 0], b[None, :, 0])
        d2 *= d2
        for j in range(1, a.shape[1]):
            d2 += (a[:, None, j] - b[None, :, j]) ** 2
        return d2
    return np.maximum(np.sum(a**2, 1)[:, None] + np.sum(b**2, 1)[None, :] - 2 * a @ b.T, 0.0)


def _gauss_kernel(x, z, bandwidth):
    d2 = _scaled_sq_distances(x, z, bandwidth)
    d2 *= -0.5
    return np.exp(d2, out=d2)


class NystromFeatures:
    """Nystrom features of the Gaussian RBF kernel on landmarks chosen by pivoted Cholesky.

    ``phi(x) = K_mm^(-1/2) k(z, x)`` where the ``r`` landmarks ``z`` are the
    pivots of an incomplete (pivoted) Cholesky factorization of the kernel
    matrix of a random subsample of the data (at most ``max_candidates``
    rows); ``phi(x)^T phi(y)`` is the Nystrom approximation of ``k(x, y)``.
    Directions of ``K_mm`` with eigenvalue below ``1e-10`` times the largest
    are dropped, so the final rank can be smaller than requested (``rank``).

    Parameters
    ----------
    x : array, shape (N, dim)
        Data from which landmarks are chosen.
    bandwidth : float or array of shape (dim,)
        Kernel length scale(s), > 0.
    rank : int
        Number of landmarks requested.
    seed : int or numpy.random.Generator
        Chooses the candidate subsample.
    max_candidates : int
        Size of the candidate subsample.

    Raises
    ------
    ValueError
        A bandwidth <= 0, ``rank < 1``.

    References
    ----------
    Fine, Scheinberg, "Efficient SVM training using low-rank kernel
    representations", JMLR 2001 (incomplete Cholesky), as suggested by Song
    et al., ICML 2014, Sec. 3.
    """

    kind = "nystrom"

    def __init__(self, x: ArrayLike, bandwidth: float | ArrayLike, rank: int = 128, seed: int | np.random.Generator = 0,
                 max_candidates: int = 5000) -> None:
        func = "NystromFeatures"
        x = _check_matrix(x, "x", func)
        self.dim = x.shape[1]
        self.bandwidth = check_bandwidth(bandwidth, self.dim, "bandwidth", func)
        rank = check_int(rank, "rank", func, minimum=1)
        max_candidates = check_int(max_candidates, "max_candidates", func, minimum=1)
        rng = as_generator(seed, func)
        cand = x if x.shape[0] <= max_candidates else x[rng.choice(x.shape[0], max_candidates, replace=False)]
        diag = np.ones(cand.shape[0])
        L = np.zeros((cand.shape[0], min(rank, cand.shape[0])))
        pivots = []
        for j in range(L.shape[1]):
            p = int(np.argmax(diag))
            if diag[p] <= 1e-10:
                break
            pivots.append(p)
            col = _gauss_kernel(cand, cand[p:p + 1], self.bandwidth)[:, 0] - L[:, :j] @ L[p, :j]
            L[:, j] = col / np.sqrt(diag[p])
            diag = np.maximum(diag - L[:, j] ** 2, 0.0)
        self.landmarks = cand[pivots]
        s, V = np.linalg.eigh(_gauss_kernel(self.landmarks, self.landmarks, self.bandwidth))
        keep = s > 1e-10 * s.max()
        self.projection = V[:, keep] / np.sqrt(s[keep])
        self.rank = int(keep.sum())

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays that :func:`feature_map_from_arrays` reads back (an online estimate's ``state`` keeps them)."""
        return {"bandwidth": self.bandwidth, "landmarks": self.landmarks, "projection": self.projection}

    def transform(self, x: ArrayLike) -> np.ndarray:
        """Features of the rows of ``x`` (N, dim) -> (N, r).

        Parameters
        ----------
        x : array, shape (N, dim) or (N,)

        Returns
        -------
        ndarray, shape (N, r)

        Raises
        ------
        ValueError
            Non-finite values or a number of columns other than ``dim``.

        References
        ----------
        Rahimi, Recht, NIPS 2007 (random features); Williams, Seeger, NIPS 2001
        (Nystrom); used as the low-rank factor of Song et al., ICML 2014, Alg. 1.
        """
        x = _check_columns(x, self.dim, "NystromFeatures.transform")
        return _gauss_kernel(x, self.landmarks, self.bandwidth) @ self.projection

    def gaussian_embedding(self, loc: ArrayLike, scale: ArrayLike) -> np.ndarray:
        """Mean embedding ``E[phi(x)]`` of ``x ~ N(loc, diag(scale^2))`` (closed form).

        ``E[k(z, x)] = prod_j (sigma_j^2 / (sigma_j^2 + s_j^2))^(1/2)
        exp(-(m_j - z_j)^2 / (2 (sigma_j^2 + s_j^2)))``.

        Parameters
        ----------
        loc, scale : arrays of shape (..., dim)

        Returns
        -------
        ndarray, shape (..., r)

        Raises
        ------
        ValueError
            ``loc`` and ``scale`` whose last axis is not ``dim`` (shape mismatch).

        References
        ----------
        Song et al., ICML 2014, eqs. 34-35 (population kernel embeddings); for
        Gaussians under a Gaussian kernel the embedding is a Gaussian convolution.
        """
        loc, scale = np.asarray(loc, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        var = self.bandwidth**2 + scale**2  # (..., dim)
        factor = np.prod(np.sqrt(self.bandwidth**2 / var), axis=-1)[..., None]
        diff = loc[..., None, :] - self.landmarks  # (..., m, dim)
        k = factor * np.exp(-0.5 * np.sum(diff**2 / var[..., None, :], axis=-1))
        return k @ self.projection


def feature_map_from_arrays(arrays: Mapping[str, np.ndarray],
                            name: str = "estimate") -> RandomFourierFeatures | NystromFeatures:
    """The feature map saved by ``to_arrays`` (random Fourier or Nystrom features, by the arrays present).

    Parameters
    ----------
    arrays : dict of str -> ndarray
        ``bandwidth`` and either ``omega`` (random Fourier features) or ``landmarks`` and ``projection`` (Nystrom).
    name : str
        The argument named in errors.

    Returns
    -------
    RandomFourierFeatures or NystromFeatures

    Raises
    ------
    ValueError
        Missing arrays, inconsistent shapes, a bandwidth <= 0 or non-finite values.
    """
    what = "feature maps"
    if "omega" in arrays:
        feature_map = RandomFourierFeatures.__new__(RandomFourierFeatures)
        feature_map.omega = stored_array(arrays, "omega", what, name, ndim=2)
        feature_map.dim, half = feature_map.omega.shape
        feature_map.rank = 2 * half
    else:
        feature_map = NystromFeatures.__new__(NystromFeatures)
        feature_map.landmarks = stored_array(arrays, "landmarks", what, name, ndim=2)
        feature_map.dim = feature_map.landmarks.shape[1]
        feature_map.projection = stored_array(arrays, "projection", what, name, ndim=2)
        if feature_map.projection.shape[0] != feature_map.landmarks.shape[0]:
            raise bad_stored(name, what, "projection", f"{feature_map.landmarks.shape[0]} rows (one per row of "
                             "'landmarks')", f"shape {feature_map.projection.shape}")
        feature_map.rank = feature_map.projection.shape[1]
    feature_map.bandwidth = stored_array(arrays, "bandwidth", what, name, shape=(feature_map.dim,))
    if not np.all(feature_map.bandwidth > 0):
        raise bad_stored(name, what, "bandwidth", "> 0", f"minimum {feature_map.bandwidth.min():g}")
    return feature_map


def kernel_features(x: ArrayLike, *, features: Literal["rff", "nystrom"] = "rff", rank: int = 128,
                    bandwidth: float | ArrayLike | None = None, seed: int | np.random.Generator = 0, name: str = "x",
                    func: str = "kernel_features") -> RandomFourierFeatures | NystromFeatures:
    """A feature map for one view (bandwidth by the median heuristic unless given).

    Parameters
    ----------
    x : array, shape (N, d) or (N,)
        The view (used for the bandwidth and, for Nystrom, the landmarks).
    features : {"rff", "nystrom"}
        Random Fourier features (default) or Nystrom with pivoted Cholesky landmarks.
    rank : int
        Number of features.
    bandwidth : float or array of shape (d,), optional
        Kernel length scale(s); default :func:`median_bandwidth`.
    seed : int or numpy.random.Generator
    name, func : str
        Argument and function named in error messages.

    Returns
    -------
    RandomFourierFeatures or NystromFeatures

    Raises
    ------
    ValueError
        Constant columns, bandwidth <= 0, non-finite data.

    References
    ----------
    Song et al., ICML 2014, Sec. 3 (low-rank kernel approximations) and Alg. 1;
    Rahimi, Recht, NIPS 2007.
    """
    features = check_choice(features, "features", func, FEATURES)
    x = _check_matrix(x, name, func)
    rng = as_generator(seed, func)
    if bandwidth is None:
        bandwidth = median_bandwidth(x, seed=rng, name=name, func=func)
    else:
        bandwidth = check_bandwidth(bandwidth, x.shape[1], "bandwidth", func)
        check_no_constant_columns(x, name, func)
    if features == "rff":
        if rank % 2:
            rank += 1
        return RandomFourierFeatures(x.shape[1], bandwidth, rank, seed=rng)
    return NystromFeatures(x, bandwidth, rank, seed=rng)
