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
from itertools import combinations
from typing import TYPE_CHECKING, Any, Iterable, Literal, Mapping, Sequence, TypeAlias

import numpy as np
import scipy.sparse as sp

from specinit._validation import (
    as_generator,
    bad_argument,
    bad_stored,
    check_allocation,
    check_choice,
    check_int,
    checked_by_caller,
    current_entry,
    public,
    stored_array,
    warn,
)
from specinit.engine.backends import OnBackend, Passes
from specinit.engine.backends.numpy import cross3
from specinit.engine.decompose import check_options
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.jennrich import jennrich_projected_means
from specinit.engine.sources import ViewSource
from specinit.engine.whitening import IndefiniteMomentError

if TYPE_CHECKING:
    import dask.array
    from numpy.typing import ArrayLike

    #: One view: rows are observations.
    View: TypeAlias = ArrayLike | sp.sparray | sp.spmatrix | dask.array.Array

#: The passes a multi-view model needs from its backend.
VIEW_PASSES = frozenset({"gram", "triples"})

__all__ = [
    "VIEW_PASSES",
    "MultiViewFit",
    "pair_misfit",
    "pair_spectrum",
    "MultiViewPopulation",
    "SummedViews",
    "ViewMoments",
    "ViewSums",
    "conditional_means",
    "conditional_variances",
    "with_squares",
    "fit_multiview",
    "multiview_population",
]


class ViewMoments(OnBackend):
    """Empirical cross moments of ``l >= 3`` views (one pass per operator product).

    Parameters
    ----------
    views : sequence of arrays or scipy.sparse matrices, each (N, d_v)
        Row ``n`` of every view is the same observation. Every view may
        instead be a ``dask.array`` of row blocks (the same row chunks in
        every view; scipy.sparse or dense chunks): the passes then run where
        the blocks live and only (d_v, r)- and (k, k, k)-sized sums travel.
    backend : {"numpy", "jax", "dask"}, Passes or None
        Where the passes run (:mod:`specinit.engine.backends`): ``"jax"``
        moves the views once to JAX's default device and runs every pass
        there in float64; ``"dask"`` (Dask views) computes the partial sums
        where the blocks live; ``None`` picks Dask for Dask views, JAX when
        an accelerator is present, NumPy otherwise.

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

    @public
    def __init__(self, views: Sequence[View] | ViewSource,
                 backend: str | Passes | None = None) -> None:
        source = views if isinstance(views, ViewSource) else ViewSource(views)
        self._run_on(backend, source.kind, VIEW_PASSES)
        self.source = source
        self.n_observations = source.n_observations
        self._placed = self.passes.place_views(source)

    @property
    def views(self) -> list:
        """The validated views (float64 arrays / CSR matrices, or Dask arrays)."""
        return self.source.views

    @property
    def n_views(self) -> int:
        return len(self.source.views)

    @property
    def dims(self) -> tuple[int, ...]:
        return self.source.dims

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``E[x_a x_b^T] @ Q`` for a (d_b, r) matrix, as ``X_a^T (X_b Q) / N``."""
        return self.passes.gram(self._placed, a, b, np.asarray(Q, dtype=np.float64)) / self.n_observations

    def projected_triples(self, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray, Uc: np.ndarray) -> np.ndarray:
        """``E[(Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)]`` as a (ka, kb, kc) array, in bounded blocks."""
        Ua, Ub, Uc = (np.asarray(U, dtype=np.float64) for U in (Ua, Ub, Uc))
        return self.passes.triples(self._placed, a, b, c, Ua, Ub, Uc) / self.n_observations


class SummedViews:
    """Cross moments of views read from stored sums (no pass over rows): the interface of :class:`ViewMoments`.

    Each view ``v`` is taken divided by ``scales[v]`` (its unit), so a pair
    product is ``pairs[(a, b)] / (n s_a s_b)`` and a triple
    ``triples[(a, b, c)] / (n s_a s_b s_c)``.

    Parameters
    ----------
    n_observations : int
    dims : tuple of int
    pairs : dict of (a, b) -> ndarray (d_a, d_b), a < b
        ``sum_n x_a x_b^T`` of every pair of distinct views.
    triples : dict of (a, b, c) -> ndarray (d_a, d_b, d_c), a < b < c
        ``sum_n x_a (x) x_b (x) x_c`` of the triples the fit reads.
    scales : sequence of float, optional
        Default: 1 for every view.
    """

    def __init__(self, n_observations: int, dims: Sequence[int], pairs: dict, triples: dict,
                 scales: Sequence[float] | np.ndarray | None = None) -> None:
        self.n_observations, self.dims = int(n_observations), tuple(int(d) for d in dims)
        self.pairs, self.triples = pairs, triples
        self.scales = np.ones(len(self.dims)) if scales is None else np.asarray(scales, dtype=np.float64)

    @property
    def n_views(self) -> int:
        return len(self.dims)

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``E[x_a x_b^T] @ Q`` for distinct views."""
        if a == b:
            raise ValueError("SummedViews keeps the cross sums of distinct views only")
        table = self.pairs[(a, b)] if a < b else self.pairs[(b, a)].T
        return table @ np.asarray(Q, dtype=np.float64) / (self.n_observations * self.scales[a] * self.scales[b])

    def projected_triples(self, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray, Uc: np.ndarray) -> np.ndarray:
        """``E[(Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)]`` for three distinct views."""
        order = sorted((a, b, c))
        table = np.transpose(self.triples[tuple(order)], [order.index(view) for view in (a, b, c)])
        Ua, Ub, Uc = (np.asarray(U, dtype=np.float64) for U in (Ua, Ub, Uc))
        scale = self.n_observations * self.scales[a] * self.scales[b] * self.scales[c]
        return np.einsum("ijk,ia,jb,kc->abc", table, Ua, Ub, Uc, optimize=True) / scale


#: Bytes of the dense rows of three views a block of :meth:`ViewSums.from_views` forms at once.
_BLOCK_BYTES = 64 * 2**20


def _dense(a) -> np.ndarray:
    return np.asarray(a.toarray() if sp.issparse(a) else a, dtype=np.float64)


class ViewSums:
    """The exact additive summary of views: rows, peaks, column sums, pair sums and the base views' triple sums.

    For views ``x_0 .. x_{m-1}`` (the first ``n_base`` of them the model's,
    the others derived, e.g. squares of Gaussian views) it keeps the row
    count, every view's largest ``|x|`` and column sums, ``sum_n x_a x_b^T``
    of every pair and ``sum_n x_a (x) x_b (x) x_c`` of every triple of base
    views. Two summaries of disjoint rows add up (``+``) to that of their
    union, and :meth:`moments` reads the same cross moments as
    :class:`ViewMoments` on all the rows, so views can arrive in batches.

    Parameters
    ----------
    n : int
    n_base : int
    peaks : ndarray, shape (m,)
    firsts : list of ndarray (d_v,)
    pairs, triples : dict
        As for :class:`SummedViews`.
    """

    def __init__(self, n: int, n_base: int, peaks: ArrayLike, firsts: list, pairs: dict, triples: dict) -> None:
        self.n, self.n_base = int(n), int(n_base)
        self.peaks = np.asarray(peaks, dtype=np.float64)
        self.firsts, self.pairs, self.triples = [np.asarray(f, dtype=np.float64) for f in firsts], pairs, triples

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(f.size for f in self.firsts)

    @classmethod
    def from_views(cls, views: list, n_base: int, name: str = "views") -> "ViewSums":
        """The summary of validated views (dense arrays or sparse matrices with the same rows).

        Raises
        ------
        MemoryError
            The pair and triple sums over the memory budget.
        """
        dims = [v.shape[1] for v in views]
        triple_keys = list(combinations(range(n_base), 3))
        check_allocation(8.0 * (sum(dims[a] * dims[b] for a, b in combinations(range(len(views)), 2))
                                + 3 * sum(dims[a] * dims[b] * dims[c] for a, b, c in triple_keys)), name,
                         "the sums of the views' pairs and triples")
        peaks = [float(abs(v).max()) if v.shape[0] else 0.0 for v in views]
        firsts = [np.asarray(v.sum(axis=0)).ravel() for v in views]
        pairs = {(a, b): _dense(views[a].T @ views[b]) for a, b in combinations(range(len(views)), 2)}
        triples = {}
        for a, b, c in triple_keys:  # sparse (one-hot) views made dense a block of rows at a time
            total = np.zeros((dims[a], dims[b], dims[c]))
            rows = max(1, _BLOCK_BYTES // (8 * (dims[a] + dims[b] + dims[c])))
            for start in range(0, views[0].shape[0], rows):
                total += cross3(*(_dense(v[start: start + rows]) for v in (views[a], views[b], views[c])))
            triples[(a, b, c)] = total
        return cls(views[0].shape[0], n_base, peaks, firsts, pairs, triples)

    def __add__(self, other: "ViewSums") -> "ViewSums":
        if not isinstance(other, ViewSums):
            return NotImplemented
        if other.dims != self.dims or other.n_base != self.n_base:
            raise bad_argument("views", None, f"views of sizes {self.dims} (the summary's)", f"sizes {other.dims}",
                               describe=False)
        return ViewSums(self.n + other.n, self.n_base, np.maximum(self.peaks, other.peaks),
                        [f + g for f, g in zip(self.firsts, other.firsts)],
                        {key: value + other.pairs[key] for key, value in self.pairs.items()},
                        {key: value + other.triples[key] for key, value in self.triples.items()})

    def moments(self, scales: Sequence[float] | np.ndarray, n_views: int | None = None) -> SummedViews:
        """The cross moments of the first ``n_views`` views (default: all), each divided by its scale."""
        m = len(self.dims) if n_views is None else n_views
        return SummedViews(self.n, self.dims[:m], {key: value for key, value in self.pairs.items() if key[1] < m},
                           {key: value for key, value in self.triples.items() if key[2] < m}, list(scales)[:m])

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them)."""
        out = {"counts": np.asarray([self.n, self.n_base]), "peaks": self.peaks}
        out.update({f"first_{v}": f for v, f in enumerate(self.firsts)})
        out.update({"pair_" + "_".join(map(str, key)): value for key, value in self.pairs.items()})
        out.update({"triple_" + "_".join(map(str, key)): value for key, value in self.triples.items()})
        return out

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], name: str = "estimate") -> "ViewSums":
        """The summary saved by :meth:`to_arrays`, every array checked (:func:`~specinit._validation.stored_array`:
        a :class:`~specinit._validation.StoredArrayError` names the damaged one)."""
        what = "view sums"
        counts = stored_array(arrays, "counts", what, name, shape=(2,), integer=True)
        peaks = stored_array(arrays, "peaks", what, name, ndim=1, nonnegative=True)
        n, n_base = (int(c) for c in counts)
        if n < 1 or not 3 <= n_base <= peaks.size:
            raise bad_stored(name, what, "counts", f"the rows (>= 1) and the model's views (3 to {peaks.size}, the "
                             "views of 'peaks')", counts.tolist())
        # a base view enters sums of triple products, a derived one sums of pair products: float64 must hold them
        for v, peak in enumerate(peaks):
            order = 3 if v < n_base else 2
            largest = (np.finfo(np.float64).max / n) ** (1.0 / order)
            if peak > largest:
                raise bad_stored(name, what, "peaks", f"largest entries whose products of {order} over the n = {n} "
                                 f"rows float64 holds (at most {largest:.3g} for view {v})", f"{peak:.3g}")
        firsts = [stored_array(arrays, f"first_{v}", what, name, ndim=1) for v in range(peaks.size)]
        dims = [f.size for f in firsts]
        pairs = {key: stored_array(arrays, "pair_%d_%d" % key, what, name, shape=tuple(dims[v] for v in key))
                 for key in combinations(range(peaks.size), 2)}
        triples = {key: stored_array(arrays, "triple_%d_%d_%d" % key, what, name, shape=tuple(dims[v] for v in key))
                   for key in combinations(range(n_base), 3)}
        slack = 1.0 + 1e-6 + 8 * n * np.finfo(np.float64).eps  # the rounding of n terms
        sums = {f"first_{v}": ((v,), f) for v, f in enumerate(firsts)}
        sums.update({"pair_%d_%d" % key: (key, value) for key, value in pairs.items()})
        sums.update({"triple_%d_%d_%d" % key: (key, value) for key, value in triples.items()})
        for key, (views, value) in sums.items():  # each row adds at most the product of its views' peaks
            bound = n * float(np.prod(peaks[list(views)])) * slack
            if np.max(np.abs(value), initial=0.0) > bound:
                raise bad_stored(name, what, key, f"at most n = {n} times the product of its views' peaks in "
                                 f"absolute value ({bound:.3g})", f"{np.max(np.abs(value)):.3g}")
        return cls(n, n_base, peaks, firsts, pairs, triples)


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
    def dims(self) -> tuple[int, ...]:
        return tuple(m.shape[1] for m in self.means)

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``sum_i w_i mu_{a,i} (mu_{b,i}^T Q)`` (``a != b``)."""
        return self.means[a].T @ (self.weights[:, None] * (self.means[b] @ Q))

    def projected_triples(self, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray, Uc: np.ndarray) -> np.ndarray:
        """``sum_i w_i (Ua^T mu_{a,i}) (x) (Ub^T mu_{b,i}) (x) (Uc^T mu_{c,i})``."""
        pa, pb, pc = self.means[a] @ Ua, self.means[b] @ Ub, self.means[c] @ Uc
        return np.einsum("i,ia,ib,ic->abc", self.weights, pa, pb, pc)


@public
def multiview_population(means: Sequence[ArrayLike], weights: ArrayLike) -> MultiViewPopulation:
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
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 1 or not np.all(np.isfinite(weights)) or np.any(weights <= 0) or abs(weights.sum() - 1) > 1e-8:
        raise bad_argument("weights", None, "a (k,) vector of positive probabilities summing to 1", weights)
    if len(means) < 3:
        raise bad_argument("means", None, "a list of at least 3 (k, d_v) arrays", f"{len(means)} views", describe=False)
    arrays = []
    for i, m in enumerate(means):
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] != weights.size or not np.all(np.isfinite(m)):
            raise bad_argument(f"means[{i}]", None, f"a finite ({weights.size}, d_v) array", m)
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


@public
def pair_misfit(moments: ViewMoments | SummedViews | MultiViewPopulation, weights: np.ndarray,
                means: Sequence[np.ndarray], seed: int | np.random.Generator = 0, rank: int = 10) -> np.ndarray:
    """How far each cross moment of the data is from what a fitted multi-view mixture implies.

    Under the model the views are conditionally independent given the class, so
    ``Pairs_{a,b} = sum_i w_i mu_{a,i} mu_{b,i}^T`` for every pair of views. The
    misfit of a pair is ``||(Pairs_{a,b} - M_a^T diag(w) M_b) Q|| / ||Pairs_{a,b} Q||``
    on a random orthonormal probe ``Q`` of ``rank`` columns (one pass per pair): near
    the sampling noise when the model holds, large when the views depend on each
    other beyond the classes.

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
    weights : array, shape (k,)
    means : sequence of arrays, each (k, d_v)
        The fitted class means of every view.
    seed : int or numpy.random.Generator
    rank : int
        Columns of the probe.

    Returns
    -------
    ndarray, shape (n_pairs,)
        One misfit per pair ``(a, b)``, ``a < b``, in lexicographic order.
    """
    rng = as_generator(seed)
    weights = np.asarray(weights, dtype=np.float64)
    out = []
    for a in range(moments.n_views):
        for b in range(a + 1, moments.n_views):
            Q = np.linalg.qr(rng.standard_normal((moments.dims[b], min(rank, moments.dims[b]))))[0]
            data = moments.pairs_matmat(a, b, Q)
            model = np.asarray(means[a]).T @ (weights[:, None] * (np.asarray(means[b]) @ Q))
            out.append(float(np.linalg.norm(data - model) / max(np.linalg.norm(data), np.finfo(float).tiny)))
    return np.asarray(out)


def pair_spectrum(moments: ViewMoments | SummedViews | MultiViewPopulation, r: int, seed: int | np.random.Generator = 0,
                  target: int = -1) -> np.ndarray:
    """The top ``r`` singular values of the cross moment of the target view and the first other view.

    Under a k-class multi-view model the cross moments have rank k: the
    spectrum tells how many classes the views support.

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
    r : int
        How many.
    seed : int or numpy.random.Generator
    target : int
        The target view.

    Returns
    -------
    ndarray, shape (r,)
    """
    t = target % moments.n_views
    a = next(v for v in range(moments.n_views) if v != t)
    return _top_left_basis(moments, t, a, r, as_generator(seed), 10, 2)[1]


def conditional_means(moments: ViewMoments | SummedViews | MultiViewPopulation, view: int, anchor: int,
                      anchor_means: np.ndarray, weights: np.ndarray) -> np.ndarray:
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
    if view == anchor:
        raise bad_argument("anchor", None, "a view other than 'view' (conditionally independent of it)", anchor)
    anchor_means = np.asarray(anchor_means, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    Q = np.linalg.qr(anchor_means.T)[0]
    C = moments.pairs_matmat(view, anchor, Q)
    # Least squares: off the model (real data) the anchor means can be nearly dependent and a weight can vanish;
    # the result stays finite (the fit's diagnostics and warnings report the degeneracy).
    solution = np.linalg.lstsq((anchor_means @ Q).T, C.T, rcond=None)[0]
    tiny = np.finfo(float).eps * max(float(np.abs(weights).max()), np.finfo(float).tiny)
    return solution / np.where(np.abs(weights) > tiny, weights, tiny)[:, None]


_APPROACHES = ("auto", "symmetric", "jennrich")


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


@public
def fit_multiview(views: Sequence[View] | ViewMoments | SummedViews | MultiViewPopulation, k: int, *, target: int = -1,
                  method: Literal["tpm", "svtd", "eca", "als"] = "tpm",
                  approach: Literal["symmetric", "jennrich", "auto"] = "symmetric", seed: int | np.random.Generator = 0,
                  oversample: int = 10, n_power_iter: int = 2,
                  decompose_options: Mapping[str, Any] | None = None) -> MultiViewFit:
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
    approach : {"symmetric", "jennrich", "auto"}
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
        ``"auto"``: ``"symmetric"``, and on an indefinite symmetrized moment a
        RuntimeWarning and ``"jennrich"`` on the same projected moments (no
        further pass over the data), recorded in ``diagnostics["fallback"]``
        (None when no fallback was needed).
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
    specinit.engine.whitening.IndefiniteMomentError
        A cross moment of rank < k (whatever the approach), or with
        ``approach="symmetric"`` an indefinite symmetrized second moment.

    Warns
    -----
    RuntimeWarning
        With ``approach="auto"``, when the fallback was taken.
    TypeError
        ``decompose_options`` given with ``approach="jennrich"``, or naming a
        keyword the decomposition does not take.

    References
    ----------
    [1]_ Thm 3.6 (symmetrized multi-view moments), [2]_ Prop. 1, [3]_ Alg. B.
    """
    approach = check_choice(approach, "approach", None, _APPROACHES)
    if approach == "jennrich" and decompose_options:
        raise bad_argument("decompose_options", None, "empty with approach='jennrich' (they configure the tensor "
                           "decomposition of approach='symmetric')", sorted(decompose_options), kind=TypeError)
    options = check_options(method, decompose_options, None)
    moments = views if hasattr(views, "pairs_matmat") else ViewMoments(views)
    n_views = moments.n_views
    target = check_int(target, "target", None, minimum=-n_views, maximum=n_views - 1) % n_views
    a, b = [v for v in range(3) if v != target][:2]
    t = target
    used_dims = [moments.dims[v] for v in (a, b, t)]
    if not checked_by_caller():
        k = check_int(k, "k", None, minimum=1)
        if k > min(used_dims):
            raise bad_argument("k", None, f"<= the smallest dimension of the views used ({min(used_dims)})", k)
    oversample = check_int(oversample, "oversample", None, minimum=0)
    n_power_iter = check_int(n_power_iter, "n_power_iter", None, minimum=0)
    rng = as_generator(seed, None)

    U_t, s_ta = _top_left_basis(moments, t, a, k, rng, oversample, n_power_iter)
    U_a, s_ab = _top_left_basis(moments, a, b, k, rng, oversample, n_power_iter)
    U_b, s_bt = _top_left_basis(moments, b, t, k, rng, oversample, n_power_iter)
    for name, values in (("ta", s_ta), ("ab", s_ab), ("bt", s_bt)):
        support = int(np.count_nonzero(values > 1e-10 * max(float(values[0]), np.finfo(float).tiny)))
        if support < k:
            pair = {"ta": (t, a), "ab": (a, b), "bt": (b, t)}[name]
            raise IndefiniteMomentError(
                f"The cross moment of views {pair[0]} and {pair[1]} has rank {support} < k = {k} (top singular values "
                f"{np.array2string(values, precision=3)}): the data support at most {support} component(s) with "
                f"linearly independent means (constant views or sequences, unused symbols, too few observations).")
    bases = {a: U_a, b: U_b, t: U_t}

    def projected_pair(x, y):
        return bases[x].T @ moments.pairs_matmat(x, y, bases[y])

    pairs = {"ab": projected_pair(a, b), "ta": projected_pair(t, a), "tb": projected_pair(t, b)}
    triples = moments.projected_triples(a, b, t, U_a, U_b, U_t)
    fallback = None
    if approach != "jennrich":
        try:
            weights, projected_means, approach_diagnostics = _symmetric_projected_means(
                k, pairs, triples, rng, method, oversample, n_power_iter, options)
        except IndefiniteMomentError as exc:
            if approach == "symmetric":
                raise
            # Real data are rarely an exact k-class multi-view mixture: the symmetrized moment can be indefinite.
            # The observable-operator (Jennrich) path takes no square root of a moment and still gives a start.
            fallback = f"jennrich (symmetrized second moment indefinite: {str(exc).split(' Likely')[0]})"
            warn(f"{current_entry()}: the symmetrized second moment is indefinite for k = {k} (the data are "
                 f"not exactly a {k}-class multi-view mixture); fell back to approach='jennrich' (see "
                 "diagnostics['fallback']). Refine the estimate, or try a smaller k.")
        else:
            approach = "symmetric"
    if approach == "jennrich" or fallback is not None:
        approach = "jennrich"
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
        "fallback": fallback,
        **approach_diagnostics,
    }
    return MultiViewFit(weights=weights, means=means, diagnostics=diagnostics)


def with_squares(views: Sequence[View], indices: Iterable[int],
                 backend: str | Passes | None = None) -> ViewMoments:
    """Moments of ``views`` followed by the elementwise squares of ``views[indices]``.

    Parameters
    ----------
    views : sequence of (N, d_v) arrays or sparse matrices
        The views given to :func:`fit_multiview`.
    indices : iterable of int
        Dense numeric views whose squares are appended, in this order.
    backend : str, Passes or None
        Where the passes run (as for :class:`ViewMoments`).

    Returns
    -------
    ViewMoments
        Input for :func:`conditional_variances`.
    """
    base = list(views)
    return ViewMoments(base + [np.asarray(base[v], dtype=np.float64) ** 2 for v in indices], backend=backend)


def conditional_variances(moments: ViewMoments | SummedViews | MultiViewPopulation, fit: MultiViewFit,
                          indices: Iterable[int]) -> dict:
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
