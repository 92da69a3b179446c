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

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields

import numpy as np
import scipy.sparse as sp

from specinit._validation import (
    bad_argument,
    check_choice,
    check_count_matrix,
    check_int,
    check_positive,
)
from specinit.engine.chunks import count_chunks, resolve_backend

__all__ = ["CountMoments", "FirstOrderStats", "WhitenedStats"]


WEIGHTINGS = ("pooled", "per-document")
_CHUNK_BYTES = 64 * 2**20  # bound on any dense intermediate built per chunk


class _Additive:
    """Dataclass mix-in: partial sums merge field by field with ``+``."""

    def __add__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass
class FirstOrderStats(_Additive):
    """Sums over documents from the first pass (all additive).

    ``a_d`` and ``b_d`` are the per-document weights of the second- and
    third-order estimators: 1 for the pooled estimator, 1 / (n(n-1)) and
    1 / (n(n-1)(n-2)) for the per-document average.

    Attributes
    ----------
    n_documents, n_dropped : int
        Documents used (>= 3 tokens) and dropped.
    m1_sum : ndarray, shape (V,)
        Sum of the counts of the documents used.
    m1_norm : float
        Their total number of tokens.
    word_a : ndarray, shape (V,)
        ``sum_d a_d c_d`` (the same-token correction of the second moment).
    norm2 : float
        ``sum_d a_d n_d (n_d - 1)``.
    word_b : ndarray, shape (V,)
        ``sum_d b_d c_d`` (the same-token corrections of the third moment).
    norm3 : float
        ``sum_d b_d n_d (n_d - 1) (n_d - 2)``.
    """

    n_documents: int  # documents used (n_d >= 3)
    n_dropped: int  # documents with fewer than 3 tokens
    m1_sum: np.ndarray  # (V,) sum_d c_d (pooled) or sum_d c_d / n_d (per-document)
    m1_norm: float  # sum_d n_d (pooled) or number of documents (per-document)
    word_a: np.ndarray  # (V,) sum_d a_d c_d: diagonal correction of E2
    norm2: float  # sum_d n_d (n_d - 1) (pooled) or number of documents
    word_b: np.ndarray  # (V,) sum_d b_d c_d: diagonal term of E3
    norm3: float  # sum_d n_d (n_d - 1)(n_d - 2) (pooled) or number of documents


@dataclass
class WhitenedStats(_Additive):
    """Sums over documents of the whitened pass, for a fixed whitening ``W``.

    Attributes
    ----------
    y3 : ndarray, shape (k, k, k)
        ``sum_d b_d y_d^(x)3`` with ``y_d = W^T c_d``.
    y2 : ndarray, shape (k, k)
        ``sum_d b_d y_d y_d^T`` (weighted like the third-order estimator).
    word_by : ndarray, shape (V, k)
        ``sum_d b_d c_d y_d^T`` (per-word totals of the same-token corrections).
    """

    y3: np.ndarray  # (k, k, k) sum_d b_d y_d^(x)3
    y2: np.ndarray  # (k, k) sum_d a_d y_d y_d^T
    word_by: np.ndarray  # (V, k) sum_d b_d c_d y_d^T  = X^T (b * Y)


def _weights(lengths: np.ndarray, weighting: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-document weights (m1, a, b) for documents with >= 3 tokens."""
    n = lengths
    if weighting == "pooled":
        one = np.ones_like(n)
        return one, one, one
    return 1.0 / n, 1.0 / (n * (n - 1)), 1.0 / (n * (n - 1) * (n - 2))


def _usable(chunk: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, int]:
    lengths = np.asarray(chunk.sum(axis=1)).ravel()
    keep = lengths >= 3
    n_dropped = int(np.count_nonzero(~keep))
    if n_dropped:
        chunk = chunk[keep]
        lengths = lengths[keep]
    return chunk, lengths, n_dropped


def first_order_stats(chunk: sp.csr_matrix, weighting: str) -> FirstOrderStats:
    """Partial sums of one validated CSR chunk (documents x vocabulary)."""
    chunk, n, n_dropped = _usable(chunk)
    w1, a, b = _weights(n, weighting)
    pooled = weighting == "pooled"
    return FirstOrderStats(
        n_documents=chunk.shape[0],
        n_dropped=n_dropped,
        m1_sum=chunk.T @ w1,
        m1_norm=float(n.sum()) if pooled else float(chunk.shape[0]),
        word_a=chunk.T @ a,
        norm2=float((n * (n - 1)).sum()) if pooled else float(chunk.shape[0]),
        word_b=chunk.T @ b,
        norm3=float((n * (n - 1) * (n - 2)).sum()) if pooled else float(chunk.shape[0]),
    )


def pair_products(A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``sum_r A[r, i] A[r, j] rhs[r, m]`` as a (k, k, m) array, symmetric in (i, j).

    Only the k(k+1)/2 pairs ``i <= j`` are computed (one GEMM of
    (p, n_block) by (n_block, m) per block of rows), halving the flops of the
    full Khatri-Rao product; intermediates are bounded to about 64 MB.
    """
    k, m = A.shape[1], rhs.shape[1]
    iu, ju = np.triu_indices(k)
    upper = np.zeros((iu.size, m))
    step = max(1, _CHUNK_BYTES // (8 * iu.size))
    for start in range(0, A.shape[0], step):
        block = A[start : start + step]
        upper += (block[:, iu] * block[:, ju]).T @ rhs[start : start + step]
    out = np.empty((k, k, m))
    out[iu, ju] = upper
    out[ju, iu] = upper
    return out


def m2_partial(chunk: sp.csr_matrix, weighting: str, Q: np.ndarray, numba_threads: int = 0) -> np.ndarray:
    """``sum_d a_d c_d (c_d^T Q)`` over one validated CSR chunk (documents with >= 3 tokens only).

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
        Validated counts.
    weighting : {"pooled", "per-document"}
        Estimator weights.
    Q : ndarray, shape (V, r)
        Right-hand side.
    numba_threads : int
        0: SciPy products; otherwise the fused Numba kernel on that many threads.

    Returns
    -------
    ndarray, shape (V, r)
    """
    chunk, n, _ = _usable(chunk)
    _, a, _ = _weights(n, weighting)
    if numba_threads:
        from specinit.engine.numba_passes import m2_sum

        return m2_sum(chunk, a, Q, numba_threads)
    return np.asarray(chunk.T @ (a[:, None] * np.asarray(chunk @ Q)))


def whitened_stats(chunk: sp.csr_matrix, W: np.ndarray, weighting: str, numba_threads: int = 0) -> WhitenedStats:
    """Partial sums of the whitened pass for one validated CSR chunk (``numba_threads``: as :func:`m2_partial`)."""
    chunk, n, _ = _usable(chunk)
    _, a, b = _weights(n, weighting)
    if numba_threads:
        from specinit.engine.numba_passes import whitened_sums

        Y, word_by = whitened_sums(chunk, W, b, numba_threads)
        return WhitenedStats(y3=pair_products(Y, Y * b[:, None]), y2=(Y * a[:, None]).T @ Y, word_by=word_by)
    Y = np.asarray(chunk @ W)
    return WhitenedStats(y3=pair_products(Y, Y * b[:, None]), y2=(Y * a[:, None]).T @ Y, word_by=np.asarray(chunk.T @ (Y * b[:, None])))


@dataclass
class _TaggedStats:
    """First-order stats of Dask blocks with the set of block types seen (mixed types are refused)."""

    stats: FirstOrderStats
    kinds: frozenset

    def __add__(self, other):
        return _TaggedStats(self.stats + other.stats, self.kinds | other.kinds)


def _block_kind(block) -> str:
    return "scipy.sparse" if sp.issparse(block) else type(block).__module__.split(".")[0] + "." + type(block).__name__


def _tagged_first_order(block, weighting: str) -> _TaggedStats:
    kind = _block_kind(block)
    return _TaggedStats(first_order_stats(check_count_matrix(block, "counts (Dask block)", "CountMoments"), weighting),
                        frozenset([kind]))


def _checked_m2_partial(block, weighting: str, Q: np.ndarray) -> np.ndarray:
    return m2_partial(check_count_matrix(block, "counts (Dask block)", "CountMoments"), weighting, Q)


def _checked_whitened_stats(block, W: np.ndarray, weighting: str) -> WhitenedStats:
    return whitened_stats(check_count_matrix(block, "counts (Dask block)", "CountMoments"), W, weighting)


class CountMoments:
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
    counts : array-like, sparse matrix, list of chunks or callable
        (N, V) non-negative integer counts; see :func:`count_chunks`.
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
        Threads that process chunks in parallel (default: all cores; NumPy backend).
    backend : {"numpy", "numba", "jax"} or None
        Where the passes run. ``"numpy"``: SciPy sparse products on
        ``n_threads`` threads over row chunks. ``"numba"``: fused
        multi-threaded CSR kernels (:mod:`specinit.engine.numba_passes`;
        optional extra ``[fast]``), one read of the non-zeros per pass. ``"jax"``: the corpus is moved
        once to JAX's default device as padded row blocks and every pass runs
        there in float64 (:mod:`specinit.engine.jax_passes`). ``None``
        (default): JAX when an accelerator (GPU/TPU) is present, else NumPy.
        A Dask array is always reduced with NumPy on the Dask workers.

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
    travel (:mod:`specinit.engine.dask_passes`).

    References
    ----------
    .. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
       variable models", Thm 1 and Thm 3.
    .. [2] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for
       latent Dirichlet allocation", Lemma 3.
    """

    def __init__(
        self,
        counts,
        alpha0: float | None = None,
        weighting: str = "pooled",
        chunk_rows: int | None = None,
        n_threads: int | None = None,
        backend: str | None = None,
    ):
        from specinit.engine.dask_passes import (
            check_row_blocks,
            is_dask_array,
            reduce_blocks,
        )

        func = "CountMoments"
        self.weighting = check_choice(weighting, "weighting", func, WEIGHTINGS)
        self.alpha0 = None if alpha0 is None else check_positive(alpha0, "alpha0", func)
        n_threads = check_int(n_threads or os.cpu_count() or 1, "n_threads", func, minimum=1)
        self._dask = None
        self._device = None
        self.n_threads = n_threads
        if is_dask_array(counts):
            if backend == "jax":
                raise bad_argument("backend", func, "'numpy' or None with a Dask array (its blocks are reduced with "
                                   "NumPy/SciPy on the Dask workers)", backend)
            self.backend = "numpy"
            self._dask = check_row_blocks(counts, "counts", func)
            tagged = reduce_blocks([self._dask], _tagged_first_order, self.weighting)
            if len(tagged.kinds) > 1:
                raise bad_argument("counts", func, "a Dask array whose blocks are all scipy.sparse or all dense",
                                   f"blocks of types {sorted(tagged.kinds)}", describe=False)
            stats = tagged.stats
        else:
            self.backend = resolve_backend(backend, func)
            self._chunks = count_chunks(counts, func, chunk_rows, 1 if self.backend == "numba" else n_threads)
            if self.backend == "jax":
                stats = self._to_device()
            else:
                stats = self._reduce(lambda chunk: first_order_stats(chunk, self.weighting))
        if stats is None:
            raise bad_argument("counts", func, "at least one chunk of documents", "an empty sequence", describe=False)
        if stats.n_documents == 0:
            raise bad_argument(
                "counts", func, "at least one document with 3 or more tokens",
                f"{stats.n_dropped} documents, all shorter", describe=False,
            )
        self.stats = stats
        self.n_features = stats.m1_sum.shape[0]

    def _to_device(self) -> FirstOrderStats | None:
        """First pass of the JAX backend: move the usable documents to the device, sum on the device."""
        from specinit.engine.jax_passes import DeviceCounts

        device = None
        totals = [0, 0, 0.0, 0.0, 0.0]  # documents, dropped, m1_norm, norm2, norm3
        pooled = self.weighting == "pooled"
        for chunk in self._chunks():
            if device is None:
                device = DeviceCounts(chunk.shape[1])
            chunk, n, dropped = _usable(chunk)
            w1, a, b = _weights(n, self.weighting)
            device.add(chunk, w1, a, b)
            totals[0] += chunk.shape[0]
            totals[1] += dropped
            totals[2] += float(n.sum()) if pooled else float(chunk.shape[0])
            totals[3] += float((n * (n - 1)).sum()) if pooled else float(chunk.shape[0])
            totals[4] += float((n * (n - 1) * (n - 2)).sum()) if pooled else float(chunk.shape[0])
        if device is None:
            return None
        self._device = device
        m1_sum, word_a, word_b = device.first_order()
        return FirstOrderStats(n_documents=totals[0], n_dropped=totals[1], m1_sum=m1_sum, m1_norm=totals[2],
                               word_a=word_a, norm2=totals[3], word_b=word_b, norm3=totals[4])

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

    def _shift(self) -> float:
        return 0.0 if self.alpha0 is None else self.alpha0 / (self.alpha0 + 1.0)

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q`` for a (V, r) matrix, in one pass over the documents."""
        s = self.stats
        Q = np.asarray(Q, dtype=np.float64)
        if self._dask is not None:
            from specinit.engine.dask_passes import reduce_blocks

            raw = reduce_blocks([self._dask], _checked_m2_partial, self.weighting, Q)
        elif self._device is not None:
            raw = self._device.m2_sum(Q)
        else:
            raw = self._reduce(lambda chunk: m2_partial(chunk, self.weighting, Q, self._numba_threads()))
        e2q = (raw - s.word_a[:, None] * Q) / s.norm2
        m1 = self.m1
        return e2q - self._shift() * np.outer(m1, m1 @ Q)

    def whitened_stats(self, W: np.ndarray) -> WhitenedStats:
        """One pass: the additive sums of the whitened third moment."""
        W = np.asarray(W, dtype=np.float64)
        if self._dask is not None:
            from specinit.engine.dask_passes import reduce_blocks

            return reduce_blocks([self._dask], _checked_whitened_stats, W, self.weighting)
        if self._device is not None:
            y3, y2, word_by = self._device.whitened_sums(W)
            return WhitenedStats(y3=y3, y2=y2, word_by=word_by)
        return self._reduce(lambda chunk: whitened_stats(chunk, W, self.weighting, self._numba_threads()))

    def _numba_threads(self) -> int:
        """Threads inside a Numba kernel (0: SciPy products, threads over chunks)."""
        return self.n_threads if self.backend == "numba" else 0

    def _reduce(self, partial):
        """Sum ``partial(chunk)`` over all chunks: one pass, on ``n_threads`` threads.

        SciPy's sparse products release the GIL, so row-chunks run in
        parallel; at most ``2 * n_threads`` chunks are in flight (streams are
        not read ahead further). Returns None for an empty source.
        """
        total = None
        workers = 1 if self.backend == "numba" else self.n_threads  # Numba kernels thread inside a chunk
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: deque = deque()
            for chunk in self._chunks():
                pending.append(pool.submit(partial, chunk))
                if len(pending) >= 2 * workers:
                    part = pending.popleft().result()
                    total = part if total is None else total + part
            for future in pending:
                part = future.result()
                total = part if total is None else total + part
        return total

    def whitened_m3(self, W: np.ndarray, stats: WhitenedStats | None = None) -> np.ndarray:
        """The (k, k, k) tensor ``M3(W, W, W)`` for a (V, k) whitening matrix."""
        stats = self.whitened_stats(W) if stats is None else stats
        s = self.stats
        k = W.shape[1]
        # G[i, j, l] = sum_v W_vi W_vj Z_vl and H = sum_v f_v W_v^(x)3 in one pass over the words.
        GH = pair_products(W, np.concatenate([stats.word_by, s.word_b[:, None] * W], axis=1))
        G, H = GH[:, :, :k], GH[:, :, k:]
        e3 = (stats.y3 - (G + G.transpose(0, 2, 1) + G.transpose(2, 0, 1)) + 2.0 * H) / s.norm3
        if self.alpha0 is None:
            return e3
        a0 = self.alpha0
        m = W.T @ self.m1
        e2 = (stats.y2 - (W * s.word_a[:, None]).T @ W) / s.norm2
        cross = np.einsum("ij,l->ijl", e2, m)
        cross = cross + cross.transpose(0, 2, 1) + cross.transpose(2, 0, 1)
        cube = np.einsum("i,j,l->ijl", m, m, m)
        return e3 - a0 / (a0 + 2.0) * cross + 2.0 * a0**2 / ((a0 + 2.0) * (a0 + 1.0)) * cube
