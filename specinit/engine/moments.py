"""Empirical moments of count data (single-topic model and LDA), matrix-free.

The second- and third-order moments of a V-word vocabulary are V x V and
V x V x V; they are never formed. Instead a :class:`CountMoments` object
exposes the two things the spectral pipeline needs:

* ``m2_matmat(Q)``: the product ``M2 @ Q`` for a thin (V, r) matrix ``Q``
  (one sparse pass per call), used by the randomized whitening;
* ``whitened_m3(W)``: the (k, k, k) tensor ``M3(W, W, W)``, built from the
  whitened documents ``Y = X W`` and per-word totals in bounded chunks.

Both passes are sums over documents of partial results
(:class:`FirstOrderStats`, :class:`WhitenedStats`) that merge by addition, so
row-chunks, streams and distributed partitions give the same moments as the
whole batch.

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1 and Thm 3 (pooled unbiased all-word estimators).
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for latent
   Dirichlet allocation", Lemma 3 (Dirichlet moments Pairs/Triples).
"""

from __future__ import annotations

import functools
import operator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import scipy.sparse as sp

from specinit._validation import (
    bad_argument,
    bad_stored,
    stored_array,
    check_allocation,
    check_choice,
    check_positive,
    checked_sparse,
    memory_limit,
    public,
)
from specinit.engine.backends import FirstOrderStats, OnBackend, WhitenedStats, namespace, numba_kernel
from specinit.engine.backends.numpy import document_weights, first_order_stats, usable_documents
from specinit.engine.sources import Counts, CountSource

if TYPE_CHECKING:
    import jax

    from specinit.engine.backends import Passes

__all__ = ["COUNT_PASSES", "CountMoments", "FirstOrderStats", "PairSums", "WhitenedStats"]


WEIGHTINGS = ("pooled", "per-document")

#: The passes a count model needs from its backend.
COUNT_PASSES = frozenset({"count_first", "count_m2", "count_whitened"})


def _operand(A):
    """A device array (array API, not NumPy) as it is; anything else as a float64 NumPy array."""
    return A if hasattr(A, "__array_namespace__") and not isinstance(A, np.ndarray) else np.asarray(A, np.float64)


class _FirstOrder:
    """What a summary holding :class:`FirstOrderStats` as ``stats`` answers."""

    @property
    def n_documents(self) -> int:
        return self.stats.n_documents

    @property
    def n_dropped(self) -> int:
        return self.stats.n_dropped

    @property
    def m1(self) -> np.ndarray:
        """First moment: the expected word distribution (V,)."""
        return self.stats.m1_sum / self.stats.m1_norm


class CountMoments(_FirstOrder, OnBackend):
    """Matrix-free moments of a corpus for the single-topic model and LDA.

    With ``alpha0=None`` the moments are the all-word cross moments
    ``M2 = E2`` and ``M3 = E3`` of the single-topic model. With a positive
    ``alpha0`` they are the Dirichlet-corrected LDA moments

    .. math::

        M_2 = E_2 - \\frac{\\alpha_0}{\\alpha_0 + 1} M_1 \\otimes M_1,

        M_3 = E_3 - \\frac{\\alpha_0}{\\alpha_0 + 2}
              (E_2 \\otimes M_1 + \\text{perm.}) +
              \\frac{2 \\alpha_0^2}{(\\alpha_0 + 2)(\\alpha_0 + 1)} M_1^{\\otimes 3}.

    Parameters
    ----------
    counts : array-like, sparse matrix, list of chunks, callable, Dask array or CountSource
        (N, V) non-negative integer counts; see :class:`specinit.engine.sources.CountSource`.
    alpha0 : float, optional
        Dirichlet concentration sum(alpha) (:math:`\\alpha_0` in [2]);
        ``None`` for the single-topic model.
    weighting : {"pooled", "per-document"}
        Pooled unbiased estimators of [1] (default) or the average of
        per-document unbiased estimators.
    chunk_rows : int, optional
        Rows per pass-chunk of an in-memory matrix (default: the rows split
        evenly over the threads, at most 65,536 per chunk; bounds the dense
        (rows, k) intermediates of each pass).
    n_threads : int, optional
        Threads that process chunks in parallel (default: all cores; NumPy and Numba backends).
    backend : {"numpy", "numba", "jax", "dask"}, Passes or None
        Where the passes run (:mod:`specinit.engine.backends`). ``"numpy"``:
        SciPy sparse products on ``n_threads`` threads over row chunks.
        ``"numba"``: fused multi-threaded CSR kernels (optional extra
        ``[fast]``), one read of the non-zeros per pass. ``"jax"``: the
        corpus is moved once to JAX's default device as padded row blocks and
        every pass runs there in float64. ``"dask"``: the partial sums of a
        ``dask.array``'s blocks are computed where the blocks live. ``None``
        (default): Dask for Dask input, JAX when an accelerator (GPU/TPU) is
        present, else NumPy.

    Raises
    ------
    ValueError
        Invalid counts, no document with 3 or more tokens, a bad
        ``weighting``, ``alpha0``, ``n_threads`` or ``backend``, a Dask array
        chunked along the columns, or Dask blocks of mixed types (sparse and dense).
    TypeError
        Non-numeric counts or a one-shot iterator.

    Notes
    -----
    The first pass (at construction) computes :class:`FirstOrderStats`;
    each ``m2_matmat`` call and each ``whitened_m3`` call is one more pass.
    Documents with fewer than 3 tokens cannot inform third moments; they are
    dropped from every moment and counted in ``n_dropped``.

    With a ``dask.array.Array`` of row blocks (scipy.sparse or dense chunks),
    each pass runs where the blocks live (the current ``distributed`` client
    if any) and only the (V,)-, (V, r)- and (k, k, k)-sized partial sums
    travel (:mod:`specinit.engine.backends.dask`).

    References
    ----------
    .. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
       variable models", Thm 1 and Thm 3.
    .. [2] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for
       latent Dirichlet allocation", Lemma 3.
    """

    @public
    def __init__(
        self,
        counts: Counts,
        alpha0: float | None = None,
        weighting: Literal["pooled", "per-document"] = "pooled",
        chunk_rows: int | None = None,
        n_threads: int | None = None,
        backend: Literal["numpy", "numba", "jax", "dask"] | Passes | None = None,
    ) -> None:
        self.weighting = check_choice(weighting, "weighting", None, WEIGHTINGS)
        self.alpha0 = None if alpha0 is None else check_positive(alpha0, "alpha0")
        source = counts if isinstance(counts, CountSource) else CountSource(counts)
        self._run_on(backend, source.kind, COUNT_PASSES, n_threads=n_threads, chunk_rows=chunk_rows)
        self.source = source
        self._placed = self.passes.place_counts(source, self.weighting)
        stats = self.passes.count_first(self._placed)
        if stats is None:
            raise bad_argument("counts", None, "at least one chunk of documents", "an empty sequence", describe=False)
        if stats.n_documents == 0:
            raise bad_argument(
                "counts", None, "at least one document with 3 or more tokens",
                f"{stats.n_dropped} documents, all shorter", describe=False,
            )
        self.stats = stats
        self.n_features = stats.m1_sum.shape[0]

    def _shift(self) -> float:
        return 0.0 if self.alpha0 is None else self.alpha0 / (self.alpha0 + 1.0)

    def resident(self, A: np.ndarray) -> np.ndarray | jax.Array:
        """``A`` where the passes run (a device array for ``backend="jax"``, ``A`` itself on CPU backends).

        :meth:`m2_matmat`, :meth:`whitened_stats` and the tall intermediates
        of :meth:`whitened_m3` keep such an array where it is.
        """
        return self.passes.resident(A)

    def scope(self) -> AbstractContextManager[Any]:
        """Context for arithmetic on :meth:`resident` arrays (float64 on a JAX device)."""
        return self.passes.scope()

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q`` for a (V, r) matrix, in one pass over the documents (an array of ``Q``'s kind)."""
        s = self.stats
        Q = _operand(Q)
        xp = namespace(Q)
        raw = self.passes.count_m2(self._placed, Q)
        e2q = (raw - xp.asarray(s.word_a)[:, None] * Q) / s.norm2
        m1 = xp.asarray(self.m1)
        return e2q - self._shift() * m1[:, None] * (m1 @ Q)[None, :]

    def whitened_stats(self, W: np.ndarray) -> WhitenedStats:
        """One pass: the additive sums of the whitened third moment (``word_by`` of ``W``'s kind)."""
        return self.passes.count_whitened(self._placed, _operand(W))

    def whitened_m3(self, W: np.ndarray, stats: WhitenedStats | None = None) -> np.ndarray:
        """The (k, k, k) tensor ``M3(W, W, W)`` for a (V, k) whitening matrix (a host array)."""
        stats = self.whitened_stats(W) if stats is None else stats
        W = _operand(W)
        xp = namespace(W)
        s = self.stats
        k = W.shape[1]
        # G[i, j, l] = sum_v W_vi W_vj Z_vl and H = sum_v f_v W_v^(x)3 in one pass over the words, where the
        # passes run.
        word_b, word_a = xp.asarray(s.word_b), xp.asarray(s.word_a)
        GH = np.asarray(self.passes.pair_products(W, xp.concatenate([stats.word_by, word_b[:, None] * W], axis=1)))
        G, H = GH[:, :, :k], GH[:, :, k:]
        y3 = np.asarray(stats.y3)
        e3 = (y3 - (G + G.transpose(0, 2, 1) + G.transpose(2, 0, 1)) + 2.0 * H) / s.norm3
        if self.alpha0 is None:
            return e3
        a0 = self.alpha0
        m = np.asarray(W.T @ xp.asarray(self.m1))
        e2 = (np.asarray(stats.y2) - np.asarray((W * word_a[:, None]).T @ W)) / s.norm2
        cross = np.einsum("ij,l->ijl", e2, m)
        cross = cross + cross.transpose(0, 2, 1) + cross.transpose(2, 0, 1)
        cube = np.einsum("i,j,l->ijl", m, m, m)
        return e3 - a0 / (a0 + 2.0) * cross + 2.0 * a0**2 / ((a0 + 2.0) * (a0 + 1.0)) * cube


#: Fraction of the V^2 word pairs that must be non-zero for :class:`PairSums` to hold its pair sums dense.
DENSE_PAIRS = 0.25

#: Sparse pair sums of batches are kept as separate parts until they are read or their entries exceed this multiple
#: of the largest part's: each entry is then added once per few batches, not at every batch (a stream of summaries
#: costs about its own size, not the growing sum's size times the batches), in at most this factor of the memory.
PENDING_PAIRS = 2.0


def _sum_sparse(parts: list):
    """The sum of sparse (V, V) parts: a few threaded passes when compiled (extra ``[fast]``), else SciPy's additions,
    two at a time."""
    if len(parts) == 1:
        return parts[0].tocsr()
    compiled = numba_kernel("sum_csr")
    return (functools.reduce(operator.add, parts) if compiled is None else compiled(parts)).tocsr()


def _bounded(parts: list) -> list:
    """Sparse parts still pending, or their sum once their entries exceed :data:`PENDING_PAIRS` times the largest's."""
    sizes = [part.nnz for part in parts]
    return [_sum_sparse(parts)] if sum(sizes) > PENDING_PAIRS * max(sizes) else parts


class PairSums(_FirstOrder):
    """The exact additive second-order summary of a corpus: first-order sums and the word-pair sums.

    ``pairs = sum_d a_d c_d c_d^T`` (sparse V x V, ``a_d`` the second-order
    weight of :func:`~specinit.engine.backends.numpy.document_weights`) is kept,
    so :meth:`m2_matmat` is a product in memory, not a pass over documents,
    and two summaries of disjoint batches add up (``+``) to the summary of
    their union exactly: documents can arrive in batches and the pair moment
    ``E2`` of everything seen is available at any time. The object has the
    interface of :class:`CountMoments` (``alpha0=None``) that the second-order
    recoveries (anchor words) read. Memory: the non-zeros of ``pairs``, at
    most ``sum_d nnz_d^2`` and at most V^2; summaries added up keep their
    sparse pair sums as parts, added up when read or past
    :data:`PENDING_PAIRS` times the largest part. Pair sums with at least
    :data:`DENSE_PAIRS` of the V^2 entries non-zero (a moderate vocabulary)
    are held as a dense array within the memory budget: the eigensolver's
    products and the merges then run as dense BLAS, several times faster than
    the sparse kernels at that density, in at most 2.7x the sparse memory.

    Parameters
    ----------
    stats : FirstOrderStats
    pairs : scipy.sparse matrix or ndarray, shape (V, V)
    weighting : {"pooled", "per-document"}
    word_counts : ndarray, shape (V,)
        Tokens of every word in all the documents (short ones included).
    """

    alpha0 = None

    def __init__(self, stats: FirstOrderStats,
                 pairs: sp.sparray | sp.spmatrix | np.ndarray | list[sp.sparray | sp.spmatrix],
                 weighting: Literal["pooled", "per-document"], word_counts: np.ndarray) -> None:
        self.stats, self.weighting = stats, weighting
        self.word_counts = np.asarray(word_counts, dtype=np.float64)
        self.n_features = stats.m1_sum.shape[0]
        if isinstance(pairs, np.ndarray):
            self._pairs = pairs
            return
        self._pairs = _bounded([part.tocsr() for part in (pairs if isinstance(pairs, list) else [pairs])])
        if len(self._pairs) == 1:
            self._merge()

    def _merge(self) -> None:
        """Add up the pending sparse parts (:data:`PENDING_PAIRS`): one CSR matrix, or a dense array past
        :data:`DENSE_PAIRS`."""
        pairs = _sum_sparse(self._pairs)
        V = self.n_features
        self._pairs = pairs.toarray() if pairs.nnz >= DENSE_PAIRS * V * V and 8.0 * V * V <= memory_limit() \
            else [pairs]

    @property
    def pairs(self) -> np.ndarray | sp.sparray | sp.spmatrix:
        """The word-pair sums: a dense (V, V) array or a CSR matrix (the pending parts added up on first read)."""
        if isinstance(self._pairs, np.ndarray):
            return self._pairs
        if len(self._pairs) > 1:
            self._merge()
        return self._pairs if isinstance(self._pairs, np.ndarray) else self._pairs[0]

    @property
    def dense(self) -> bool:
        """Whether the pair sums are held as a dense array (without adding up pending parts)."""
        return isinstance(self._pairs, np.ndarray)

    @classmethod
    def from_counts(cls, counts: Counts, weighting: Literal["pooled", "per-document"] = "pooled", name: str = "counts",
                    *, dense: bool = False) -> PairSums:
        """The summary of a batch of documents, in one pass over its chunks.

        Parameters
        ----------
        counts : array-like, sparse matrix, list of chunks, callable or CountSource
            (N, V) non-negative integer counts.
        weighting : {"pooled", "per-document"}
        name : str
            The argument named in errors.
        dense : bool, default False
            Sum the pairs into a dense (V, V) array from the start (compiled
            with the ``[fast]`` extra), e.g. for a batch that joins a dense
            summary; otherwise they are summed sparse and held dense only when
            :data:`DENSE_PAIRS` of the entries are non-zero.

        Returns
        -------
        PairSums

        Raises
        ------
        MemoryError
            Pair sums over the memory budget (:func:`specinit.memory_limit`).
        ValueError
            Invalid counts, or no document with 3 or more tokens.
        """
        check_choice(weighting, "weighting", None, WEIGHTINGS)
        source = counts if isinstance(counts, CountSource) else CountSource(counts, name)
        stats, pairs, word_counts = None, None, 0.0
        add_dense = numba_kernel("add_pair_sums") if dense else None
        product = numba_kernel("product_csr") or (lambda A, B: A @ B)  # on every core when compiled
        for chunk in source.chunks():
            word_counts = word_counts + np.asarray(chunk.sum(axis=0)).ravel()
            usable, lengths, _ = usable_documents(chunk)
            a = document_weights(lengths, weighting)[1]
            first = first_order_stats(chunk, weighting)
            stats = first if stats is None else stats + first
            if add_dense is not None:
                if pairs is None:
                    check_allocation(8.0 * chunk.shape[1] ** 2, name, "the dense (V, V) word-pair sums")
                    pairs = np.zeros((chunk.shape[1], chunk.shape[1]))
                add_dense(usable, a, pairs)
                continue
            unique = np.diff(usable.indptr).astype(np.float64)
            planned = 12.0 * min(float(unique @ unique), float(chunk.shape[1]) ** 2)
            check_allocation(planned + 12.0 * sum(part.nnz for part in pairs or []), name,
                             "the sparse (V, V) word-pair sums of the documents")
            weighted = usable.copy()
            weighted.data *= np.repeat(a, np.diff(usable.indptr))  # rows scaled by a_d
            # one CSR product (no CSC round trips)
            pairs = _bounded((pairs or []) + [product(usable.T.tocsr(), weighted)])
        if dense and isinstance(pairs, list):
            check_allocation(8.0 * pairs[0].shape[0] ** 2, name, "the dense (V, V) word-pair sums")
            pairs = _sum_sparse(pairs).toarray()
        if stats is None or stats.n_documents == 0:
            raise bad_argument(name, None, "at least one document with 3 or more tokens", "none", describe=False)
        return cls(stats, pairs, weighting, word_counts)

    def __add__(self, other: "PairSums") -> "PairSums":
        if not isinstance(other, PairSums):
            return NotImplemented
        if other.n_features != self.n_features or other.weighting != self.weighting:
            raise bad_argument("counts", None, f"documents over the same {self.n_features} words, weighted "
                               f"{self.weighting!r}", f"{other.n_features} words weighted {other.weighting!r}",
                               describe=False)
        if self.dense or other.dense:  # SciPy returns np.matrix for a sparse + dense sum
            pairs = np.asarray(self.pairs + other.pairs)
        else:  # pending until read or until they outgrow PENDING_PAIRS
            pairs = self._pairs + other._pairs
        return PairSums(self.stats + other.stats, pairs, self.weighting, self.word_counts + other.word_counts)

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``E2 @ Q`` for a (V, r) matrix: the same values as :meth:`CountMoments.m2_matmat` on the documents."""
        Q = np.asarray(Q, dtype=np.float64)
        threaded = numba_kernel("csr_matmat") if sp.issparse(self.pairs) else None  # SciPy's product: one thread
        product = np.asarray(self.pairs @ Q) if threaded is None else threaded(self.pairs, Q)
        return (product - self.stats.word_a[:, None] * Q) / self.stats.norm2

    def to_arrays(self) -> dict:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them): the pair sums as
        ``pairs`` when held dense, else as the CSR parts ``pairs_data``, ``pairs_indices``, ``pairs_indptr``."""
        s = self.stats
        scalars = [s.n_documents, s.n_dropped, s.m1_norm, s.norm2, s.norm3]
        if isinstance(self.pairs, np.ndarray):
            pairs = {"pairs": self.pairs}
        else:
            pairs = {"pairs_data": self.pairs.data, "pairs_indices": self.pairs.indices.astype(np.int64),
                     "pairs_indptr": self.pairs.indptr.astype(np.int64)}
        return {**pairs, "m1_sum": s.m1_sum, "word_a": s.word_a, "word_b": s.word_b, "word_counts": self.word_counts,
                "scalars": np.asarray(scalars, dtype=np.float64),
                "weighting": np.asarray(WEIGHTINGS.index(self.weighting))}

    @classmethod
    def from_arrays(cls, arrays: dict, name: str = "estimate") -> "PairSums":
        """The summary saved by :meth:`to_arrays`, every array checked before it is used.

        Parameters
        ----------
        arrays : dict of str -> ndarray
            What :meth:`to_arrays` wrote.
        name : str
            The argument named in errors.

        Returns
        -------
        PairSums

        Raises
        ------
        specinit._validation.StoredArrayError
            A ValueError naming the array: missing, of the wrong kind or shape, not finite, negative, a weighting
            code out of range, pair sums that are not symmetric or not a valid CSR structure.
        """
        def member(key, ndim, integer=False):
            return stored_array(arrays, key, "pair sums", name, ndim=ndim, integer=integer, nonnegative=not integer)

        m1_sum = member("m1_sum", 1)
        V = m1_sum.shape[0]
        vectors = {key: member(key, 1) for key in ("word_a", "word_b", "word_counts")}
        for key, value in vectors.items():
            if value.shape != (V,):
                raise bad_stored(name, "pair sums", key, f"of shape (V,) = ({V},) like 'm1_sum'",
                                 f"shape {value.shape}")
        scalars = member("scalars", 1)
        if scalars.shape != (5,) or np.any(scalars[[0, 2, 3, 4]] <= 0) or np.any(scalars[:2] != np.round(scalars[:2])):
            raise bad_stored(name, "pair sums", "scalars", "5 numbers: the documents used (>= 1) and dropped (whole "
                             "numbers), then three positive norms", np.array2string(scalars, threshold=8))
        weighting = member("weighting", 0, integer=True)
        if not 0 <= int(weighting) < len(WEIGHTINGS):
            raise bad_stored(name, "pair sums", "weighting", f"a code in 0..{len(WEIGHTINGS) - 1} ({WEIGHTINGS})",
                             int(weighting))
        if "pairs" in arrays:
            pairs = member("pairs", 2)
            if pairs.shape != (V, V):
                raise bad_stored(name, "pair sums", "pairs", f"of shape (V, V) = ({V}, {V})", f"shape {pairs.shape}")
            asymmetry = float(np.max(np.abs(pairs - pairs.T), initial=0.0))
        else:
            data, indices, indptr = member("pairs_data", 1), member("pairs_indices", 1, True), \
                member("pairs_indptr", 1, True)
            if indptr.shape != (V + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != data.size:
                raise bad_stored(name, "pair sums", "pairs_indptr", f"V + 1 = {V + 1} non-decreasing offsets from 0 to "
                                 f"the {data.size} stored pair sums", f"{indptr.size} offsets")
            if indices.shape != data.shape or np.any(indices < 0) or np.any(indices >= V):
                raise bad_stored(name, "pair sums", "pairs_indices", f"{data.size} column indices in 0..{V - 1}",
                                 f"{indices.size} indices" + (f" from {indices.min()} to {indices.max()}"
                                                              if indices.size else ""))
            pairs = sp.csr_matrix((V, V))
            pairs.data, pairs.indices, pairs.indptr = data, indices, indptr
            pairs = checked_sparse(pairs, name)
            difference = abs(pairs - pairs.T)
            asymmetry = float(difference.max()) if difference.nnz else 0.0
        largest = float(np.max(np.abs(pairs.data if sp.issparse(pairs) else pairs), initial=0.0))
        if not asymmetry <= 1e-9 * largest:
            raise bad_stored(name, "pair sums", "pairs" if "pairs" in arrays else "pairs_data", "symmetric (the sums "
                             "of c_d c_d^T)", f"entries (i, j) and (j, i) that differ by up to {asymmetry:.3g}")
        n_documents, n_dropped, m1_norm, norm2, norm3 = scalars
        stats = FirstOrderStats(int(n_documents), int(n_dropped), m1_sum, m1_norm, vectors["word_a"], norm2,
                                vectors["word_b"], norm3)
        return cls(stats, pairs, WEIGHTINGS[int(weighting)], vectors["word_counts"])
