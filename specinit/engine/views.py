"""Multi-view mixtures by symmetrization in projected coordinates.

A hidden class ``h`` with ``Pr[h = i] = w_i`` and ``l >= 3`` views
``x_1, ..., x_l`` that are conditionally independent given ``h`` with
``E[x_v | h = i] = mu_{v,i}`` (a "naive Bayes" model; views may have different
dimensions and distributions). The cross moments are

.. math::

    \\mathrm{Pairs}_{a,b} = E[x_a x_b^T] = \\sum_i w_i \\mu_{a,i} \\mu_{b,i}^T,
    \\qquad
    \\mathrm{Triples}_{a,b,c} = \\sum_i w_i \\mu_{a,i} \\otimes \\mu_{b,i} \\otimes \\mu_{c,i}.

The estimator never forms a ``d_a x d_b`` matrix:

1. a randomized range finder on the operator ``Q -> Pairs_{v,u} Q`` gives an
   orthonormal basis ``U_v`` (``d_v x k``) of ``span{mu_{v,i}}`` for each of
   the three views used (the target ``t`` and two others ``a``, ``b``);
2. in the projected coordinates ``z_v = U_v^T x_v`` the views are symmetrized
   onto the target ([2]_ Prop. 1, [1]_ Thm 3.6):
   ``z~_a = P_{t,b} P_{a,b}^{-1} z_a``, ``z~_b = P_{t,a} P_{b,a}^{-1} z_b`` with
   the ``k x k`` matrices ``P_{x,y} = U_x^T Pairs_{x,y} U_y``, so that
   ``M2 = E[z~_a z~_b^T] = sum_i w_i m_i m_i^T`` and
   ``M3 = E[z~_a (x) z~_b (x) z_t] = sum_i w_i m_i^(x)3`` with
   ``m_i = U_t^T mu_{t,i}``;
3. these exchangeable k-dimensional moments go through
   :func:`specinit.engine.exchangeable.fit_exchangeable` (tensor eigenvalues
   ``lambda_i = w_i^(-1/2)``), giving ``w_i = 1/lambda_i^2`` and
   ``mu_{t,i} = U_t m_i``;
4. every other view follows from the linear map
   ``Pairs_{v,t} U_t = mu_v^T diag(w) M_t^T`` (:func:`conditional_means`).

The symmetrized ``M2`` is positive semi-definite under the model but not
always on real data (which is then not a k-class multi-view mixture).
``approach="jennrich"`` replaces steps 2-3 by the observable-operator form of
[3]_ Algorithm B (Jennrich's simultaneous diagonalization; ECA for
non-symmetric views): ``B(eta) = (U_a^T Triples_{a,b,t}(eta) U_b) P_ab^{-1}
= R diag(M_t^T eta) R^{-1}`` with ``R`` the projected view-``a`` means; the
eigenvectors ``R`` of one well-separated random ``B(eta)`` diagonalize every
``B(U_t e_j)``, whose eigenvalues are the coordinates of the projected target
means. No square root of a moment is taken, so nothing needs to be PSD.

Moments are accessed through a small protocol (``n_views``, ``dims``,
``pairs_matmat(a, b, Q)``, ``projected_triples(a, b, c, Ua, Ub, Uc)``)
implemented from data (:class:`ViewMoments`) and from parameters
(:class:`MultiViewPopulation`, via :func:`multiview_population`), so exact
recovery can be checked through the same code path that fits data.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Sec. 3.3, Thm 3.6, Prop. 3.2.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu, "A spectral algorithm for latent
   Dirichlet allocation" / multi-view mixtures, Prop. 1 (view symmetrization).
.. [3] Anandkumar, Hsu, Kakade, "A method of moments for mixture models and
   hidden Markov models", COLT 2012, Algorithm B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from specinit._validation import (
    as_generator,
    bad_argument,
    check_choice,
    check_int,
)
from specinit.engine.decompose import check_options
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.jennrich import jennrich_projected_means

_BLOCK_BYTES = 64 * 2**20  # bound on the (rows x ka*kb) intermediate of projected_triples

__all__ = [
    "MultiViewFit",
    "MultiViewPopulation",
    "ViewMoments",
    "conditional_means",
    "conditional_variances",
    "with_squares",
    "fit_multiview",
    "multiview_population",
]


def _check_view(value, index: int, func: str):
    name = f"views[{index}]"
    if sp.issparse(value):
        matrix = sp.csr_matrix(value, dtype=np.float64)
        values = matrix.data
    else:
        if value is None or isinstance(value, (str, bytes)):
            raise bad_argument(name, func, "an (N, d) array or scipy.sparse matrix", value, kind=TypeError)
        matrix = np.asarray(value)
        if matrix.dtype == object or matrix.dtype.kind not in "biuf":
            raise bad_argument(name, func, "a numeric (N, d) array", matrix, kind=TypeError)
        matrix = matrix.astype(np.float64, copy=False)
        values = matrix
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise bad_argument(name, func, "a non-empty two-dimensional (N, d) array", matrix)
    if not np.all(np.isfinite(values)):
        n_bad = int(values.size - np.count_nonzero(np.isfinite(values)))
        raise bad_argument(name, func, "finite", f"{n_bad} NaN or infinite entries", describe=False)
    return matrix


class ViewMoments:
    """Empirical cross moments of ``l >= 3`` views (one pass per operator product).

    Parameters
    ----------
    views : sequence of arrays or scipy.sparse matrices, each (N, d_v)
        Row ``n`` of every view is the same observation. Every view may
        instead be a ``dask.array`` of row blocks (the same row chunks in
        every view; scipy.sparse or dense chunks): the passes then run where
        the blocks live and only (d_v, r)- and (k, k, k)-sized sums travel.
    backend : {"numpy", "jax"} or None
        Where the passes of in-memory views run: ``"jax"`` moves the views
        once to JAX's default device and runs every pass there in float64
        (:mod:`specinit.engine.jax_passes`); ``None`` picks JAX when an
        accelerator is present. Dask views always use NumPy on the workers.

    Raises
    ------
    ValueError
        Fewer than 3 views, different numbers of rows, empty or non-finite
        views, Dask views chunked along columns or with different row chunks,
        or ``backend="jax"`` with Dask views.
    TypeError
        Non-numeric views, or a mix of Dask and in-memory views.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
       learning latent variable models", JMLR 2014, Sec. 3.3 (Pairs, Triples).
    """

    def __init__(self, views, backend: str | None = None):
        from specinit.engine.chunks import resolve_backend
        from specinit.engine.dask_passes import check_row_blocks, is_dask_array

        func = "ViewMoments"
        if isinstance(views, np.ndarray) or sp.issparse(views) or is_dask_array(views) or not hasattr(views, "__len__"):
            raise bad_argument("views", func, "a list of (N, d_v) arrays (one per view)", views, kind=TypeError)
        if len(views) < 3:
            raise bad_argument("views", func, "a list of at least 3 views", f"{len(views)} views", describe=False)
        lazy = [is_dask_array(v) for v in views]
        self._dask = all(lazy)
        if any(lazy) and not self._dask:
            raise bad_argument("views", func, "all Dask arrays or all in-memory arrays",
                               f"Dask views at positions {[i for i, x in enumerate(lazy) if x]} only",
                               kind=TypeError, describe=False)
        if self._dask:
            if backend == "jax":
                raise bad_argument("backend", func, "'numpy' or None with Dask views (their blocks are reduced with "
                                   "NumPy/SciPy on the Dask workers)", backend)
            self.backend = "numpy"
            self.views = [check_row_blocks(v, f"views[{i}]", func) for i, v in enumerate(views)]
        else:
            self.backend = resolve_backend(backend, func)
            self.views = [_check_view(v, i, func) for i, v in enumerate(views)]
        rows = [v.shape[0] for v in self.views]
        if len(set(rows)) != 1:
            raise bad_argument("views", func, "views with the same number of observations (rows)", f"row counts {rows}", describe=False)
        if self._dask and len({v.chunks[0] for v in self.views}) != 1:
            raise bad_argument("views", func, "Dask views with the same row chunks (rechunk them alike, e.g. "
                               "y = y.rechunk({0: x.chunks[0]}))", [v.chunks[0] for v in self.views], describe=False)
        self.n_observations = rows[0]
        self._device = None
        if self.backend == "jax":
            from specinit.engine.jax_passes import DeviceRows

            self._device = DeviceRows(self.views)

    @property
    def n_views(self) -> int:
        return len(self.views)

    @property
    def dims(self) -> tuple:
        return tuple(v.shape[1] for v in self.views)

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``E[x_a x_b^T] @ Q`` for a (d_b, r) matrix, as ``X_a^T (X_b Q) / N``."""
        Q = np.asarray(Q, dtype=np.float64)
        if self._dask:
            from specinit.engine.dask_passes import gram_partial, reduce_blocks

            return reduce_blocks([self.views[a], self.views[b]], gram_partial, Q) / self.n_observations
        if self._device is not None:
            return self._device.gram(a, b, Q) / self.n_observations
        return np.asarray(self.views[a].T @ np.asarray(self.views[b] @ Q)) / self.n_observations

    def projected_triples(self, a: int, b: int, c: int, Ua, Ub, Uc) -> np.ndarray:
        """``E[(Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)]`` as a (ka, kb, kc) array, in bounded blocks."""
        Ua, Ub, Uc = (np.asarray(U, dtype=np.float64) for U in (Ua, Ub, Uc))
        if self._dask:
            from specinit.engine.dask_passes import reduce_blocks, triples_partial

            views = [self.views[v] for v in (a, b, c)]
            return reduce_blocks(views, triples_partial, Ua, Ub, Uc) / self.n_observations
        if self._device is not None:
            return self._device.triples(a, b, c, Ua, Ub, Uc) / self.n_observations
        Za, Zb, Zc = (np.asarray(self.views[v] @ U) for v, U in ((a, Ua), (b, Ub), (c, Uc)))
        out = np.zeros((Za.shape[1] * Zb.shape[1], Zc.shape[1]))
        step = max(1, _BLOCK_BYTES // (8 * Za.shape[1] * Zb.shape[1]))
        for start in range(0, self.n_observations, step):
            stop = start + step
            rows = (Za[start:stop, :, None] * Zb[start:stop, None, :]).reshape(-1, out.shape[0])
            out += rows.T @ Zc[start:stop]
        return out.reshape(Za.shape[1], Zb.shape[1], Zc.shape[1]) / self.n_observations


@dataclass(frozen=True)
class MultiViewPopulation:
    """Exact cross moments of a multi-view mixture (see :func:`multiview_population`).

    Attributes
    ----------
    means : tuple of ndarray, shape (k, d_v) each
        Conditional means ``E[x_v | h = i]`` of every view (rows).
    weights : ndarray, shape (k,)
        Mixing weights.
    """

    means: tuple
    weights: np.ndarray

    @property
    def n_views(self) -> int:
        return len(self.means)

    @property
    def dims(self) -> tuple:
        return tuple(m.shape[1] for m in self.means)

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``sum_i w_i mu_{a,i} (mu_{b,i}^T Q)`` (``a != b``)."""
        return self.means[a].T @ (self.weights[:, None] * (self.means[b] @ Q))

    def projected_triples(self, a: int, b: int, c: int, Ua, Ub, Uc) -> np.ndarray:
        """``sum_i w_i (Ua^T mu_{a,i}) (x) (Ub^T mu_{b,i}) (x) (Uc^T mu_{c,i})``."""
        pa, pb, pc = self.means[a] @ Ua, self.means[b] @ Ub, self.means[c] @ Uc
        return np.einsum("i,ia,ib,ic->abc", self.weights, pa, pb, pc)


def multiview_population(means, weights) -> MultiViewPopulation:
    """Population cross moments of a multi-view mixture from its parameters.

    Parameters
    ----------
    means : sequence of arrays, each (k, d_v)
        Row ``i`` of ``means[v]`` is ``E[x_v | h = i]``; at least 3 views.
    weights : array, shape (k,)
        Class probabilities (positive, summing to one).

    Returns
    -------
    MultiViewPopulation
        Consumed by :func:`fit_multiview` in place of data.
    """
    func = "multiview_population"
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or not np.all(np.isfinite(weights)) or np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-8:
        raise bad_argument("weights", func, "a (k,) vector of positive probabilities summing to 1", weights)
    if len(means) < 3:
        raise bad_argument("means", func, "a list of at least 3 (k, d_v) arrays", f"{len(means)} views", describe=False)
    arrays = []
    for i, m in enumerate(means):
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != weights.size or not np.all(np.isfinite(m)):
            raise bad_argument(f"means[{i}]", func, f"a finite ({weights.size}, d_v) array", m)
        arrays.append(m)
    return MultiViewPopulation(tuple(arrays), weights)


@dataclass(frozen=True)
class _ProjectedMoments:
    """Dense k-dimensional exchangeable moments (the protocol of :func:`fit_exchangeable`)."""

    m2: np.ndarray
    m3: np.ndarray

    @property
    def n_features(self) -> int:
        return self.m2.shape[0]

    def m2_matmat(self, Q):
        return self.m2 @ Q

    def whitened_m3(self, W):
        return np.einsum("abc,ai,bj,ck->ijk", self.m3, W, W, W)


@dataclass(frozen=True)
class MultiViewFit:
    """Output of :func:`fit_multiview`.

    Attributes
    ----------
    weights : ndarray, shape (k,)
        Class probabilities ``w_i = 1 / lambda_i^2`` (not floored or renormalized).
    means : list of ndarray, each (k, d_v)
        Row ``i`` of ``means[v]`` estimates ``E[x_v | h = i]``; classes
        ordered by decreasing tensor eigenvalue (increasing weight) for
        ``approach="symmetric"``, in eigenvalue order of ``numpy.linalg.eig``
        for ``"jennrich"``.
    diagnostics : dict
        ``approach``, ``target``, ``views_used`` (a, b, t), ``pair_condition_number_ab``,
        ``_ta``, ``_tb`` (of the projected ``k x k`` pair matrices ``P_{a,b}``,
        ``P_{t,a}``, ``P_{t,b}``), ``pair_singular_values_ta``, ``_ab``, ``_bt``
        (top-k singular values of the cross moments used for the bases), ``weights_sum``, and the
        whitening / decomposition diagnostics of the exchangeable fit (``"symmetric"``) or
        ``jennrich_imaginary_ratio`` (largest imaginary part of the eigenvalues over the largest
        real part), ``jennrich_condition_number`` (of the eigenvector matrix ``R``),
        ``jennrich_eigen_separation`` (smallest eigenvalue gap of the chosen ``B(eta)`` over its
        largest eigenvalue) and ``jennrich_weights_offdiagonal`` (relative off-diagonal part of
        ``M^{-1} M2 M^{-T}``, zero under the model) (``"jennrich"``).
    """

    weights: np.ndarray
    means: list
    diagnostics: dict


def _top_left_basis(moments, v: int, u: int, k: int, rng, oversample: int, n_iter: int):
    """Top-k left singular vectors and values of ``Pairs_{v,u}`` (randomized, [Halko et al. 2011, Alg. 4.4])."""
    d_v, d_u = moments.dims[v], moments.dims[u]
    r = min(d_v, d_u, k + oversample)
    Y = moments.pairs_matmat(v, u, rng.standard_normal((d_u, r)))
    for _ in range(n_iter):
        Q = np.linalg.qr(Y)[0]
        Y = moments.pairs_matmat(v, u, np.linalg.qr(moments.pairs_matmat(u, v, Q))[0])
    Q = np.linalg.qr(Y)[0]
    B = moments.pairs_matmat(u, v, Q).T  # (r, d_u) = Q^T Pairs_{v,u}
    left, s, _ = np.linalg.svd(B, full_matrices=False)
    return Q @ left[:, :k], s[:k]


def conditional_means(moments, view: int, anchor: int, anchor_means, weights) -> np.ndarray:
    """``E[x_view | h]`` from the cross moment with an already estimated anchor view.

    With ``Q`` an orthonormal basis of the row space of ``anchor_means``,
    ``Pairs_{view,anchor} Q = mu_view^T diag(w) (mu_anchor Q)``; the ``k x k``
    matrix ``mu_anchor Q`` is invertible when the anchor means are linearly
    independent, so ``mu_view = diag(w)^(-1) (mu_anchor Q)^(-T) (Pairs Q)^T``.
    Requires ``x_view`` and ``x_anchor`` conditionally independent given ``h``
    ([1]_ Sec. 3.3).

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
    view, anchor : int
        Distinct view indices.
    anchor_means : array, shape (k, d_anchor)
    weights : array, shape (k,)

    Returns
    -------
    ndarray, shape (k, d_view)
    """
    func = "conditional_means"
    if view == anchor:
        raise bad_argument("anchor", func, "a view other than 'view' (conditionally independent of it)", anchor)
    anchor_means = np.asarray(anchor_means, dtype=np.float64)
    Q = np.linalg.qr(anchor_means.T)[0]
    C = moments.pairs_matmat(view, anchor, Q)
    return np.linalg.solve((anchor_means @ Q).T, C.T) / np.asarray(weights, dtype=np.float64)[:, None]


_APPROACHES = ("symmetric", "jennrich")


def _symmetric_projected_means(k, pairs, triples, rng, method, oversample, n_power_iter, options):
    """Symmetrize onto the target view and decompose the exchangeable moments (weights, rows ``U_t^T mu_{t,i}``)."""
    P_ab, P_ta, P_tb = pairs["ab"], pairs["ta"], pairs["tb"]
    # z~_a = P_tb P_ab^{-1} z_a and z~_b = P_ta P_ba^{-1} z_b (P_ba = P_ab^T).
    map_a = np.linalg.solve(P_ab.T, P_tb.T).T
    map_b = np.linalg.solve(P_ab, P_ta.T).T
    m2 = map_a @ P_ab @ map_b.T
    m2 = 0.5 * (m2 + m2.T)
    m3 = np.einsum("xyz,ix,jy->ijz", triples, map_a, map_b)
    m3 = (m3 + m3.transpose(0, 2, 1) + m3.transpose(1, 0, 2) + m3.transpose(1, 2, 0)
          + m3.transpose(2, 0, 1) + m3.transpose(2, 1, 0)) / 6.0
    fit = fit_exchangeable(_ProjectedMoments(m2, m3), k, method=method, seed=rng, oversample=oversample,
                           n_power_iter=n_power_iter, decompose_options=options)
    lam = fit.eigenvalues
    return 1.0 / lam**2, fit.components * lam[:, None], dict(fit.diagnostics)


def fit_multiview(views, k: int, *, target: int = -1, method: str = "tpm", approach: str = "symmetric", seed=0,
                  oversample: int = 10, n_power_iter: int = 2, decompose_options: dict | None = None) -> MultiViewFit:
    """Estimate the weights and every view's conditional means of a multi-view mixture.

    Parameters
    ----------
    views : sequence of (N, d_v) arrays / scipy.sparse matrices, or a moments object
        At least 3 views with the same rows (observations), or a
        :class:`ViewMoments` / :class:`MultiViewPopulation` (exact moments).
    k : int
        Number of classes, ``1 <= k <= min(d_v)`` over the three views used.
    target : int
        The view whose means are estimated first (the others follow by
        :func:`conditional_means`). The estimate uses the target and two other
        views among the first three (the first two views when the target is
        not among the first three).
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition (:mod:`specinit.engine.decompose`); ``approach="symmetric"`` only.
    approach : {"symmetric", "jennrich"}
        ``"symmetric"`` (default): symmetrize the views onto the target and
        whiten the symmetrized second moment, which must be positive
        semi-definite (otherwise :class:`specinit.engine.whitening.IndefiniteMomentError`;
        it is PSD under the model, not always on real data).
        ``"jennrich"``: simultaneous diagonalization of the non-symmetric
        observable operators ``B(eta) = (U_a^T Triples_{a,b,t}(eta) U_b)
        (U_a^T Pairs_{a,b} U_b)^{-1}`` ([3]_ Alg. B); needs no PSD moment.
        Real parts are kept; ``diagnostics`` reports the largest imaginary
        part relative to the real parts and the condition number of the
        eigenvector matrix, and a RuntimeWarning is issued when they are
        large or a weight is not positive.
    seed : int or numpy.random.Generator
        Drives the range finders, the whitening and the decomposition (or the
        random directions of ``"jennrich"``).
    oversample, n_power_iter : int
        Randomized range finder settings.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition (``"symmetric"`` only;
        an error with ``"jennrich"``).

    Returns
    -------
    MultiViewFit

    Raises
    ------
    ValueError
        Fewer than 3 views, different numbers of observations, NaN/inf,
        ``k`` larger than a view's dimension, target out of range, unknown
        approach.
    TypeError
        ``decompose_options`` given with ``approach="jennrich"``, or naming a
        keyword the decomposition does not take.

    References
    ----------
    [1]_ Thm 3.6 (symmetrized multi-view moments), [2]_ Prop. 1, [3]_ Alg. B.
    """
    func = "fit_multiview"
    approach = check_choice(approach, "approach", func, _APPROACHES)
    if approach == "jennrich" and decompose_options:
        raise bad_argument("decompose_options", func, "empty with approach='jennrich' (they configure the tensor "
                           "decomposition of approach='symmetric')", sorted(decompose_options), kind=TypeError)
    options = check_options(method, decompose_options, func)
    moments = views if hasattr(views, "pairs_matmat") else ViewMoments(views)
    n_views = moments.n_views
    target = check_int(target, "target", func, minimum=-n_views, maximum=n_views - 1) % n_views
    a, b = [v for v in range(3) if v != target][:2]
    t = target
    used_dims = [moments.dims[v] for v in (a, b, t)]
    k = check_int(k, "k", func, minimum=1)
    if k > min(used_dims):
        raise bad_argument("k", func, f"<= the smallest dimension of the views used ({min(used_dims)})", k)
    oversample = check_int(oversample, "oversample", func, minimum=0)
    n_power_iter = check_int(n_power_iter, "n_power_iter", func, minimum=0)
    rng = as_generator(seed, func)

    U_t, s_ta = _top_left_basis(moments, t, a, k, rng, oversample, n_power_iter)
    U_a, s_ab = _top_left_basis(moments, a, b, k, rng, oversample, n_power_iter)
    U_b, s_bt = _top_left_basis(moments, b, t, k, rng, oversample, n_power_iter)
    bases = {a: U_a, b: U_b, t: U_t}

    def projected_pair(x, y):
        return bases[x].T @ moments.pairs_matmat(x, y, bases[y])

    pairs = {"ab": projected_pair(a, b), "ta": projected_pair(t, a), "tb": projected_pair(t, b)}
    triples = moments.projected_triples(a, b, t, U_a, U_b, U_t)
    if approach == "symmetric":
        weights, projected_means, approach_diagnostics = _symmetric_projected_means(
            k, pairs, triples, rng, method, oversample, n_power_iter, options)
    else:
        weights, projected_means, approach_diagnostics = jennrich_projected_means(k, pairs, triples, rng)
    target_means = projected_means @ U_t.T
    means = [target_means if v == t else conditional_means(moments, v, t, target_means, weights) for v in range(n_views)]
    diagnostics = {
        "approach": approach,
        "target": t,
        "views_used": (a, b, t),
        **{f"pair_condition_number_{name}": float(np.linalg.cond(P)) for name, P in pairs.items()},
        **{f"pair_singular_values_{name}": s for name, s in (("ta", s_ta), ("ab", s_ab), ("bt", s_bt))},
        "weights_sum": float(weights.sum()),
        **approach_diagnostics,
    }
    return MultiViewFit(weights=weights, means=means, diagnostics=diagnostics)


def with_squares(views, indices) -> ViewMoments:
    """Moments of ``views`` followed by the elementwise squares of ``views[indices]``.

    Parameters
    ----------
    views : sequence of (N, d_v) arrays or sparse matrices
        The views given to :func:`fit_multiview`.
    indices : iterable of int
        Dense numeric views whose squares are appended, in this order.

    Returns
    -------
    ViewMoments
        Input for :func:`conditional_variances`.
    """
    base = list(views)
    return ViewMoments(base + [np.asarray(base[v], dtype=np.float64) ** 2 for v in indices])


def conditional_variances(moments, fit: MultiViewFit, indices) -> dict:
    """Per-class, per-coordinate variances ``Var[x_v | h]`` of dense views.

    ``E[x_v^2 | h]`` (elementwise square) is the conditional mean of the view
    ``x_v^2``, which is conditionally independent of every OTHER view; it is
    estimated by :func:`conditional_means` against the other view whose
    estimated means are best conditioned (smallest ``sigma_1 / sigma_k``, as
    the k x k solve amplifies noise by it), then ``mu_v^2`` is subtracted.
    Values are not floored (noise can make them negative; callers floor them).

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
        The fitted views followed by the squares of ``views[indices]``
        (:func:`with_squares` for data; exact means of the squares for
        population moments).
    fit : MultiViewFit
        The fit of the first ``len(fit.means)`` views.
    indices : iterable of int
        The views whose variances are wanted, in the order of the appended squares.

    Returns
    -------
    dict
        ``{v: ndarray (k, d_v)}``.
    """
    indices = list(indices)
    n_base = len(fit.means)
    k = fit.weights.size
    conditioning = [np.linalg.cond(m) if m.shape[1] >= k else np.inf for m in fit.means]
    out = {}
    for j, v in enumerate(indices):
        anchor = min((u for u in range(n_base) if u != v), key=lambda u: conditioning[u])
        second = conditional_means(moments, n_base + j, anchor, fit.means[anchor], fit.weights)
        out[v] = second - fit.means[v] ** 2
    return out
