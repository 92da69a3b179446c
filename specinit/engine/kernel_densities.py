"""Conditional densities from kernel embeddings: signed coefficients, bandwidths, KDE, projection.

Per-observation coefficients unbiased for each component's conditional
density, the weighted Silverman and cross-validated bandwidths, the signed
kernel density clipped pointwise and renormalized by the mass of its
positive part, and the projection onto a small Gaussian mixture
(the parametric family of Sec. 7 of [1]_).

References
----------
.. [1] Song, Anandkumar, Dai, Xie, "Nonparametric estimation of multi-view
   latent variable models", ICML 2014, eq. 40 and Sec. 7.
"""

from __future__ import annotations
from typing import Sequence

import numpy as np

from specinit._validation import as_generator, bad_argument
from specinit.engine.kernel_features import _CHUNK_BYTES, _scaled_sq_distances

__all__ = [
    "cv_bandwidth",
    "density_coefficients",
    "fit_weighted_gmm",
    "positive_part_mass",
    "silverman_bandwidth",
    "weighted_kde",
]


def density_coefficients(features: Sequence[np.ndarray], embeddings: Sequence[np.ndarray], weights: np.ndarray,
                         view: int) -> np.ndarray:
    """Per-observation coefficients ``c`` (k, N) with ``sum_n c_{i,n} g(x_{v,n}) ~= E[g(x_v) | h = i]``.

    For each anchor view ``t != view`` with orthonormal basis ``Q`` of the
    rows of ``embeddings[t]``: ``c = diag(w)^(-1) (mu_t Q)^(-T) (Z_t Q)^T / N``
    (the empirical cross moment ``E[g(x_v) phi(x_t)^T] Q`` solved for the
    conditional expectations, as in :func:`specinit.engine.views.conditional_means`);
    the anchors are averaged. Unbiased for every ``g`` under conditional
    independence; single coefficients can be negative.

    Parameters
    ----------
    features : list of ndarray, each (N, r_t)
        Feature matrices of all views.
    embeddings : list of ndarray, each (k, r_t)
        Conditional embeddings of all views.
    weights : array, shape (k,)
    view : int
        The view whose observations get the coefficients.

    Returns
    -------
    ndarray, shape (k, N)

    References
    ----------
    Song et al., ICML 2014, eq. 40 (conditional embeddings as weighted sums of
    data features); Anandkumar et al., JMLR 2014, Sec. 3.3.

    Raises
    ------
    numpy.linalg.LinAlgError
        If an anchor's embeddings are linearly dependent (singular ``mu_t Q``).
    """
    weights = np.asarray(weights, dtype=np.float64)
    n_obs = features[0].shape[0]
    total = np.zeros((weights.size, n_obs))
    anchors = [t for t in range(len(features)) if t != view]
    for t in anchors:
        Q = np.linalg.qr(embeddings[t].T)[0]
        A = embeddings[t] @ Q  # (k, k)
        total += np.linalg.solve(A.T, (features[t] @ Q).T) / weights[:, None]
    return total / (len(anchors) * n_obs)


def _exp32(d2, factor: float, out=None) -> np.ndarray:
    """``exp(factor * d2)`` in float32: kernel values to 6e-8 relative, far below the densities' sampling error,
    at a quarter of the float64 exponential's time (its SIMD form); sums over the support stay in float64."""
    out = np.multiply(d2, factor, out=out if out is not None else np.empty(d2.shape, np.float32), casting="same_kind")
    return np.exp(out, out=out)


def _unit_rows(weights) -> np.ndarray:
    """``weights`` (k, N) with every row divided by its sum, after checking it is non-negative with a positive sum."""
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    sums = weights.sum(axis=1, keepdims=True)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or not np.all(sums > 0):
        raise bad_argument("weights", None, "finite and non-negative, with a positive sum in every row",
                           "negative, non-finite or all-zero rows", describe=False)
    return weights / sums


def _weighted_quantile(values, weights, q):
    order = np.argsort(values)
    cdf = np.cumsum(weights[order])
    return values[order][np.minimum(np.searchsorted(cdf, q * cdf[-1]), values.size - 1)]


def silverman_bandwidth(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Silverman's robust rule per component and column with the effective sample size.

    ``h_{i,j} = (4 / (d + 2))^(1 / (d + 4)) A_{i,j} n_eff,i^(-1 / (d + 4))``
    with ``A = min(sd, IQR / 1.349)`` (weighted standard deviation and
    interquartile range; the IQR keeps multimodal densities from being
    oversmoothed) and ``n_eff = 1 / sum c^2`` for the weights ``c`` of a row
    normalized to sum to one.

    Parameters
    ----------
    points : array, shape (N, d)
    weights : array, shape (k, N)
        Non-negative, each row with a positive sum; rows are normalized here
        (any positive multiple of a row gives the same bandwidth).

    Returns
    -------
    ndarray, shape (k, d)

    References
    ----------
    Silverman, "Density Estimation for Statistics and Data Analysis", 1986,
    eqs. 3.30-3.31 and 4.14.

    Raises
    ------
    ValueError
        ``weights`` whose rows do not match the points (shape mismatch), or a
        negative entry, or a row without positive weight.
    """
    points = np.asarray(points, dtype=np.float64)
    weights = _unit_rows(weights)
    d = points.shape[1]
    mean = weights @ points
    sd = np.sqrt(np.maximum(weights @ points**2 - mean**2, 0.0))
    iqr = np.array([[_weighted_quantile(points[:, j], w, 0.75) - _weighted_quantile(points[:, j], w, 0.25)
                     for j in range(d)] for w in weights]) / 1.349
    spread = np.where(iqr > 0, np.minimum(sd, iqr), sd)
    n_eff = 1.0 / np.maximum(np.sum(weights**2, axis=1), np.finfo(float).tiny)
    floor = 1e-3 * np.maximum(points.std(axis=0), np.finfo(float).tiny)
    return np.maximum((4.0 / (d + 2)) ** (1.0 / (d + 4)) * spread * n_eff[:, None] ** (-1.0 / (d + 4)), floor)


def cv_bandwidth(points: np.ndarray, weights: np.ndarray, *, multipliers: Sequence[float] = (0.25, 0.35, 0.5, 0.7, 1.0),
                 n_eval: int = 1000) -> np.ndarray:
    """Per-component bandwidth by weighted leave-one-out likelihood cross-validation.

    Candidates are ``multipliers`` times :func:`silverman_bandwidth` (the
    normal-reference rule oversmooths multimodal and skewed densities); the
    chosen one maximizes ``sum_n c_n log p_(-n)(x_n)`` over the first
    ``n_eval`` points (pass them in random order), where ``p_(-n)`` is the
    weighted kernel density without point ``n``. On the planted mixtures of
    the tests it lowers the mean L1 error from 0.18 to 0.11 at N = 10^4.

    Parameters
    ----------
    points : array, shape (N, d)
    weights : array, shape (k, N)
        Non-negative, each row with a positive sum; rows are normalized here.
    multipliers : sequence of float
        Candidate factors of Silverman's bandwidth.
    n_eval : int
        Points at which the leave-one-out likelihood is evaluated (cost
        ``O(n_eval N k len(multipliers))``).

    Returns
    -------
    ndarray, shape (k, d)

    Raises
    ------
    ValueError
        Shapes that do not match, a negative entry, or a row without positive
        weight.

    References
    ----------
    Silverman, "Density Estimation for Statistics and Data Analysis", 1986,
    Sec. 3.4.4 (likelihood cross-validation); Song et al., ICML 2014, eq. 40.
    """
    points = np.asarray(points, dtype=np.float64)
    weights = _unit_rows(weights)
    base = silverman_bandwidth(points, weights)
    m = min(int(n_eval), points.shape[0])
    held = points[:m]
    out = base.copy()
    for i in range(weights.shape[0]):
        best = -np.inf
        distances = _scaled_sq_distances(held, points, base[i])  # every candidate's is this over factor^2
        K = np.empty(distances.shape, dtype=np.float32)
        for factor in multipliers:
            h = base[i] * float(factor)
            _exp32(distances, -0.5 / float(factor) ** 2, K)
            K[np.arange(m), np.arange(m)] = 0.0
            dens = (K @ weights[i].astype(np.float32)).astype(np.float64) / (
                np.prod(np.sqrt(2 * np.pi) * h) * np.maximum(1.0 - weights[i, :m], 1e-12))
            score = float(weights[i, :m] @ np.log(np.maximum(dens, 1e-300)))
            if score > best:
                best, out[i] = score, h
    return out


def weighted_kde(points: np.ndarray, support: np.ndarray, weights: np.ndarray, bandwidth: np.ndarray,
                 norm: np.ndarray | None = None) -> np.ndarray:
    """Gaussian kernel densities ``max(sum_n c_{i,n} N(y; x_n, diag(h_i^2)), 0) / Z_i`` at ``points``.

    With non-negative rows of ``weights`` summing to one and ``norm=None``
    this is an ordinary weighted kernel density. Signed coefficients (the
    unbiased ones of :func:`density_coefficients`) give a signed density
    that is clipped at 0 pointwise and divided by its integral ``Z_i``
    (``norm``, from :func:`positive_part_mass`), so that each column is
    non-negative and integrates to one.

    Parameters
    ----------
    points : array, shape (n_points, d)
    support : array, shape (N, d)
    weights : array, shape (k, N)
    bandwidth : array, shape (k, d)
    norm : array, shape (k,), optional
        Integral of the positive part of each signed density (default: no clipping or division).

    Returns
    -------
    ndarray, shape (n_points, k)

    Raises
    ------
    ValueError
        Shapes that do not match (points and support columns, weights and support rows).

    References
    ----------
    Song et al., ICML 2014, eq. 40 (embeddings as weighted sums of data features);
    Silverman 1986, Ch. 4 (kernel density estimation).
    """
    points = np.asarray(points, dtype=np.float64)
    support = np.asarray(support, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    out = np.empty((points.shape[0], weights.shape[0]))
    step = max(1, _CHUNK_BYTES // (8 * max(1, support.shape[0])))
    # components with the same bandwidth share one kernel matrix
    _, first, groups = np.unique(bandwidth, axis=0, return_index=True, return_inverse=True)
    groups = np.asarray(groups).reshape(-1)
    for g, i0 in enumerate(first):
        members = np.flatnonzero(groups == g)
        h = bandwidth[i0]
        scale = np.prod(np.sqrt(2 * np.pi) * h)
        for start in range(0, points.shape[0], step):
            d2 = _scaled_sq_distances(points[start:start + step], support, h)
            out[start:start + step, members] = (_exp32(d2, -0.5) @ weights[members].T) / scale
    if norm is not None:
        out = np.maximum(out, 0.0) / np.asarray(norm, dtype=np.float64)
    return out


def positive_part_mass(support: np.ndarray, weights: np.ndarray, bandwidth: np.ndarray, *, n_grid: int = 1024,
                       n_samples: int = 10000, seed: int | np.random.Generator = 0) -> np.ndarray:
    """``Z_i = integral of max(sum_n c_{i,n} N(y; x_n, diag(h_i^2)), 0) dy`` per component.

    One-dimensional views: trapezoidal rule on ``n_grid`` points spanning the
    support +- 8 bandwidths (second order at the kinks where the signed
    density crosses 0: relative error below 1e-4 in the tests). Higher dimensions: importance sampling from the mixture
    with weights ``|c_n| / sum |c|`` (``n_samples`` draws, fixed ``seed``;
    relative error about ``sd(max(s, 0)/q) / sqrt(n_samples)``, about 1 %
    in our tests), exact in expectation.

    Parameters
    ----------
    support : array, shape (N, d)
    weights : array, shape (k, N)
        Signed coefficients.
    bandwidth : array, shape (k, d)
    n_grid : int
        Grid size for d = 1.
    n_samples : int
        Importance samples for d > 1.
    seed : int or numpy.random.Generator

    Returns
    -------
    ndarray, shape (k,)

    Raises
    ------
    ValueError
        Shapes that do not match, or (d > 1) a component whose coefficients are all 0.

    References
    ----------
    Song et al., ICML 2014, eq. 40; Robert, Casella, "Monte Carlo Statistical
    Methods", Ch. 3 (importance sampling).
    """
    support = np.asarray(support, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    bandwidth = np.asarray(bandwidth, dtype=np.float64)
    k, d = weights.shape[0], support.shape[1]
    out = np.empty(k)
    if d == 1:
        for i in range(k):
            h = bandwidth[i, 0]
            grid = np.linspace(support.min() - 8 * h, support.max() + 8 * h, n_grid)
            dens = np.maximum(weighted_kde(grid[:, None], support, weights[i:i + 1], bandwidth[i:i + 1])[:, 0], 0.0)
            out[i] = np.trapezoid(dens, grid)
        return out
    rng = as_generator(seed, "positive_part_mass")
    for i in range(k):
        a = np.abs(weights[i])
        q_weights = a / a.sum()
        centres = support[rng.choice(support.shape[0], n_samples, p=q_weights)]
        y = centres + rng.standard_normal((n_samples, d)) * bandwidth[i]
        # one kernel pass for the signed density and the proposal density (same bandwidth)
        both = weighted_kde(y, support, np.vstack([weights[i], q_weights]), np.vstack([bandwidth[i], bandwidth[i]]))
        out[i] = float(np.mean(np.maximum(both[:, 0], 0.0) / both[:, 1]))
    return out


def fit_weighted_gmm(support: np.ndarray, weights: np.ndarray, bandwidth: np.ndarray, m: int, *, n_iter: int = 100,
                     tol: float = 1e-8,
                     seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Project a weighted kernel density onto an ``m``-component diagonal Gaussian mixture (EM).

    EM on the support points with fixed weights ``c_n``; each component's
    variance gets the kernel variance ``h^2`` added, so the mixture fits the
    smoothed density ``sum_n c_n N(x_n, h^2)`` ([1]_ Sec. 7: projection of
    the nonparametric estimate onto a parametric family). Initialized at
    weighted quantiles of the first principal direction.

    Parameters
    ----------
    support : array, shape (N, d)
    weights : array, shape (N,)
        Non-negative, summing to one.
    bandwidth : array, shape (d,)
        Kernel bandwidth ``h`` of the density.
    m : int
        Number of Gaussians.
    n_iter : int
        Maximum EM iterations.
    tol : float
        Stop when the weighted log-likelihood improves by less than this.
    seed : int or numpy.random.Generator
        Breaks ties of the initialization with a small jitter.

    Returns
    -------
    mix : ndarray, shape (m,)
    loc : ndarray, shape (m, d)
    scale : ndarray, shape (m, d)

    Raises
    ------
    ValueError
        ``weights`` with no positive entry, or shapes that do not match.

    References
    ----------
    .. [1] Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 7 (projection to a parametric family);
       Dempster, Laird, Rubin, JRSS B 1977 (EM).
    """
    rng = as_generator(seed, "fit_weighted_gmm")
    support = np.asarray(support, dtype=np.float64)
    keep = weights > 0
    x, c = support[keep], weights[keep] / weights[keep].sum()
    d = x.shape[1]
    mean = c @ x
    centred = x - mean
    cov = (centred * c[:, None]).T @ centred
    direction = np.linalg.eigh(cov)[1][:, -1]
    proj = centred @ direction
    order = np.argsort(proj)
    cdf = np.cumsum(c[order])
    quantiles = (np.arange(m) + 0.5) / m
    idx = order[np.minimum(np.searchsorted(cdf, quantiles), len(order) - 1)]
    loc = x[idx] + 1e-6 * rng.standard_normal((m, d)) * np.sqrt(np.diag(cov))
    var = np.tile(np.diag(cov) / m**2 + bandwidth**2, (m, 1))
    mix = np.full(m, 1.0 / m)
    previous = -np.inf
    floor = bandwidth**2
    for _ in range(n_iter):
        logp = (np.log(mix) - 0.5 * np.sum(np.log(2 * np.pi * var), axis=1)
                - 0.5 * np.sum((x[:, None, :] - loc) ** 2 / var, axis=2))
        top = logp.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(logp - top).sum(axis=1))
        resp = np.exp(logp - lse[:, None]) * c[:, None]
        mass = np.maximum(resp.sum(axis=0), np.finfo(float).tiny)
        mix = np.maximum(mass / mass.sum(), 1e-8)
        mix /= mix.sum()
        loc = (resp.T @ x) / mass[:, None]
        var = np.maximum((resp.T @ x**2) / mass[:, None] - loc**2, 0.0) + floor
        ll = float(c @ lse)
        if ll - previous < tol:
            break
        previous = ll
    return mix, loc, np.sqrt(var)
