"""The reference backend: NumPy/SciPy passes over row chunks on a thread pool.

SciPy's sparse products release the GIL, so the row chunks of one pass run
in parallel on ``n_threads`` threads; at most ``2 * n_threads`` chunks are
in flight (streams are not read ahead further). Dense intermediates are
bounded to one chunk's (rows, k) products and about 64 MB blocks.

The per-chunk sums (:func:`first_order_stats`, :func:`m2_partial`,
:func:`whitened_stats`, :func:`cross3`) are the definitions every other
backend reproduces; the Dask backend runs them on its workers.

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1 and Thm 3 (pooled and per-document estimators).
"""

from __future__ import annotations

import os
from collections import deque
from contextlib import nullcontext
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Literal, TypeVar

import numpy as np
import scipy.sparse as sp

from specinit._validation import check_int
from specinit.engine.backends import PASSES, FirstOrderStats, Passes, WhitenedStats, one_blas_thread
from specinit.engine.sources import transpose_view

if TYPE_CHECKING:
    from specinit.engine.sources import CountSource, ViewSource

_T = TypeVar("_T")
_R = TypeVar("_R")

__all__ = ["NumpyPasses", "cross3", "document_weights", "first_order_stats", "in_order", "m2_partial",
           "pair_products", "usable_documents", "weighted_cubes", "whitened_stats"]

_CHUNK_BYTES = 64 * 2**20  # bound on any dense intermediate built per chunk
# bound on the (rows, width) products of a count pass's chunk: two chunks a thread are in flight, each also holding
# its (V, width) result
_PRODUCT_BYTES = 16 * 2**20


def document_weights(lengths: np.ndarray,
                     weighting: Literal["pooled", "per-document"]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-document weights ``(w1, a, b)`` of the first-, second- and third-order estimators.

    Parameters
    ----------
    lengths : ndarray, shape (N,)
        Tokens per document (all >= 3).
    weighting : {"pooled", "per-document"}

    Returns
    -------
    tuple of ndarray
        Ones for ``"pooled"``; ``1/n``, ``1/(n(n-1))``, ``1/(n(n-1)(n-2))`` otherwise.
    """
    n = lengths
    if weighting == "pooled":
        one = np.ones_like(n)
        return one, one, one
    return 1.0 / n, 1.0 / (n * (n - 1)), 1.0 / (n * (n - 1) * (n - 2))


def usable_documents(chunk: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray, int]:
    """The documents with 3 or more tokens, their lengths, and how many were dropped.

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix

    Returns
    -------
    (scipy.sparse.csr_matrix, ndarray, int)
    """
    lengths = np.asarray(chunk.sum(axis=1)).ravel()
    keep = lengths >= 3
    n_dropped = int(np.count_nonzero(~keep))
    if n_dropped:
        chunk = chunk[keep]
        lengths = lengths[keep]
    return chunk, lengths, n_dropped


def first_order_stats(chunk: sp.csr_matrix, weighting: Literal["pooled", "per-document"]) -> FirstOrderStats:
    """First-order sums of one validated CSR chunk (documents x vocabulary).

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
    weighting : {"pooled", "per-document"}

    Returns
    -------
    FirstOrderStats
    """
    chunk, n, n_dropped = usable_documents(chunk)
    w1, a, b = document_weights(n, weighting)
    pooled = weighting == "pooled"
    count = float(chunk.shape[0])
    m1_sum, word_a, word_b = (transpose_view(chunk) @ np.column_stack([w1, a, b])).T
    return FirstOrderStats(
        n_documents=chunk.shape[0],
        n_dropped=n_dropped,
        m1_sum=m1_sum,
        m1_norm=float(n.sum()) if pooled else count,
        word_a=word_a,
        norm2=float((n * (n - 1)).sum()) if pooled else count,
        word_b=word_b,
        norm3=float((n * (n - 1) * (n - 2)).sum()) if pooled else count,
    )


def in_order(func: Callable[[_T], _R], items: Iterable[_T], workers: int) -> Iterator[_R]:
    """``func(item)`` for each item, in order, on ``workers`` threads, at most two items per thread in flight.

    With several workers each runs its dense products on one BLAS thread
    (the items' sparse products and gathers release the GIL).

    Parameters
    ----------
    func : callable
    items : iterable
        Consumed lazily (a stream of chunks is never held whole).
    workers : int

    Yields
    ------
    object
        ``func(item)``, in the order of ``items``.
    """
    with ThreadPoolExecutor(max_workers=workers) as pool, one_blas_thread() if workers > 1 else nullcontext():
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(func, item))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _row_block_sum(n: int, width: int, block_sum, n_threads: int):
    """``sum(block_sum(start, stop))`` over row blocks of at most about 64 MB of ``width`` columns.

    With ``n_threads > 1`` there is at least one block per thread and the
    blocks are summed on that many threads, each on one BLAS thread.
    """
    step = max(1, min(_CHUNK_BYTES // (8 * width), -(-n // n_threads)))
    starts = range(0, max(n, 1), step)
    if n_threads > 1 and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=n_threads) as pool, one_blas_thread():
            return sum(pool.map(lambda start: block_sum(start, start + step), starts))
    return sum(block_sum(start, start + step) for start in starts)


def pair_products(A: np.ndarray, rhs: np.ndarray, n_threads: int = 1) -> np.ndarray:
    """``sum_r A[r, i] A[r, j] rhs[r, m]`` as a (k, k, m) array, symmetric in (i, j).

    Only the k(k+1)/2 pairs ``i <= j`` are computed: for each ``i`` one GEMM
    ``(A[:, i:] * A[:, [i]])^T rhs`` of ((k - i), n) by (n, m), over blocks of
    rows whose temporaries stay below about 64 MB.

    Parameters
    ----------
    A : ndarray, shape (n, k)
    rhs : ndarray, shape (n, m)
    n_threads : int
        With more than one, the row blocks (at least one per thread) are
        summed on that many threads, each on one BLAS thread.

    Returns
    -------
    ndarray, shape (k, k, m)
    """
    k, m = A.shape[1], rhs.shape[1]

    def block_sum(start, stop):
        out = np.zeros((k, k, m))
        block, right = A[start:stop], rhs[start:stop]
        for i in range(k):
            out[i, i:] = (block[:, i:] * block[:, i : i + 1]).T @ right
        return out

    out = _row_block_sum(A.shape[0], k, block_sum, n_threads)
    iu, ju = np.triu_indices(k, 1)
    out[ju, iu] = out[iu, ju]
    return out


def weighted_cubes(Y: np.ndarray, weights: np.ndarray, n_threads: int = 1) -> np.ndarray:
    """``sum_r weights[r] Y[r] (x) Y[r] (x) Y[r]`` as a symmetric (k, k, k) array.

    Only the entries ``i <= j, i <= l`` are computed, one GEMM
    ``(w Y[:, i] Y[:, i:])^T Y[:, i:]`` of ((k - i), n) by (n, (k - i)) per
    ``i`` (``n k^3 / 3`` multiply-adds, a third of the full Khatri-Rao
    product), over blocks of rows whose temporaries stay below about 64 MB;
    the rest is filled by symmetry.

    Parameters
    ----------
    Y : ndarray, shape (n, k)
    weights : ndarray, shape (n,)
    n_threads : int
        As for :func:`pair_products`.

    Returns
    -------
    ndarray, shape (k, k, k)
    """
    k = Y.shape[1]

    def block_sum(start, stop):
        out = np.zeros((k, k, k))
        block = Y[start:stop]
        weighted = block * weights[start:stop, None]
        for i in range(k):
            out[i, i:, i:] = (block[:, i:] * weighted[:, i : i + 1]).T @ block[:, i:]
        return out

    out = _row_block_sum(Y.shape[0], k, block_sum, n_threads)
    return out[tuple(np.sort(np.indices((k, k, k)), axis=0))]


def cross3(Za: np.ndarray, Zb: np.ndarray, Zc: np.ndarray) -> np.ndarray:
    """``sum_r Za[r] (x) Zb[r] (x) Zc[r]`` as a (ka, kb, kc) array, in bounded row blocks.

    Parameters
    ----------
    Za, Zb, Zc : ndarray, shapes (n, ka), (n, kb), (n, kc)

    Returns
    -------
    ndarray, shape (ka, kb, kc)
    """
    if Za is Zb:
        return pair_products(Za, Zc)
    ka, kb = Za.shape[1], Zb.shape[1]
    out = np.zeros((ka * kb, Zc.shape[1]))
    step = max(1, _CHUNK_BYTES // (8 * ka * kb))
    for start in range(0, Za.shape[0], step):
        stop = start + step
        out += (Za[start:stop, :, None] * Zb[start:stop, None, :]).reshape(-1, ka * kb).T @ Zc[start:stop]
    return out.reshape(ka, kb, Zc.shape[1])


def m2_partial(chunk: sp.csr_matrix, weighting: Literal["pooled", "per-document"], Q: np.ndarray) -> np.ndarray:
    """``sum_d a_d c_d (c_d^T Q)`` over one validated CSR chunk (documents with >= 3 tokens only).

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
    weighting : {"pooled", "per-document"}
    Q : ndarray, shape (V, r)

    Returns
    -------
    ndarray, shape (V, r)
    """
    chunk, n, _ = usable_documents(chunk)
    _, a, _ = document_weights(n, weighting)
    products = np.asarray(chunk @ Q)
    products *= a[:, None]  # in place: one (rows, r) array per chunk (58 MB at 65,536 rows, r = 110)
    return np.asarray(transpose_view(chunk) @ products)


def whitened_stats(chunk: sp.csr_matrix, W: np.ndarray, weighting: Literal["pooled", "per-document"]) -> WhitenedStats:
    """The whitened sums of one validated CSR chunk.

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
    W : ndarray, shape (V, k)
    weighting : {"pooled", "per-document"}

    Returns
    -------
    WhitenedStats
    """
    chunk, n, _ = usable_documents(chunk)
    _, a, b = document_weights(n, weighting)
    Y = np.asarray(chunk @ W)
    return WhitenedStats(y3=weighted_cubes(Y, b), y2=(Y * a[:, None]).T @ Y,
                         word_by=np.asarray(transpose_view(chunk) @ (Y * b[:, None])))


@dataclass(frozen=True)
class PlacedCounts:
    """A count source with its estimator weighting (what the NumPy-family backends place)."""

    source: object
    weighting: str


class NumpyPasses(Passes):
    """NumPy/SciPy passes over row chunks, on a thread pool.

    Parameters
    ----------
    n_threads : int, optional
        Threads that process chunks in parallel (default: all cores).
    chunk_rows : int, optional
        Rows per chunk of an in-memory count matrix (default: the rows split
        evenly over the threads, at most 65,536 per chunk).
    """

    name = "numpy"
    implements = PASSES

    def __init__(self, n_threads: int | None = None, chunk_rows: int | None = None) -> None:
        self.n_threads = check_int(n_threads or os.cpu_count() or 1, "n_threads", minimum=1)
        self.chunk_rows = None if chunk_rows is None else check_int(chunk_rows, "chunk_rows", minimum=1)

    def pair_products(self, A: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        """:func:`pair_products` on every core."""
        return pair_products(A, rhs, n_threads=os.cpu_count() or 1)

    # counts -------------------------------------------------------------------------------------------------
    def place_counts(self, source: CountSource, weighting: str) -> PlacedCounts:
        return PlacedCounts(source, weighting)

    def _chunks(self, placed: PlacedCounts, width: int | None = None):
        """The chunks of a pass; with ``width``, an in-memory matrix's chunks keep their (rows, width) dense
        products within ``_PRODUCT_BYTES`` (unless ``chunk_rows`` says otherwise)."""
        rows = self.chunk_rows
        if rows is None and width:
            rows = max(1, _PRODUCT_BYTES // (8 * width))
        return placed.source.chunks(rows, self._splits())

    def _splits(self) -> int:
        return self.n_threads

    def _reduce(self, chunks, partial, workers: int | None = None):
        """Sum ``partial(chunk)`` over all chunks (one pass) on ``workers`` threads; None for no chunk."""
        total = None
        for part in in_order(partial, chunks, workers or self.n_threads):
            if total is None:
                total = part
            else:
                total += part  # in place for arrays (a part is its pass's own), else ``+``
        return total

    def count_first(self, placed: PlacedCounts) -> FirstOrderStats | None:
        return self._reduce(self._chunks(placed), lambda chunk: first_order_stats(chunk, placed.weighting))

    def count_m2(self, placed: PlacedCounts, Q: np.ndarray) -> np.ndarray:
        return self._reduce(self._chunks(placed, Q.shape[1]), lambda chunk: m2_partial(chunk, placed.weighting, Q))

    def count_whitened(self, placed: PlacedCounts, W: np.ndarray) -> WhitenedStats:
        return self._reduce(self._chunks(placed, W.shape[1]),
                            lambda chunk: whitened_stats(chunk, W, placed.weighting))

    # views --------------------------------------------------------------------------------------------------
    def place_views(self, source: ViewSource) -> ViewSource:
        return source

    def gram(self, placed: ViewSource, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        total = np.zeros((placed.dims[a], Q.shape[1]))
        for xa, xb in placed.blocks((a, b)):
            total += np.asarray(xa.T @ np.asarray(xb @ Q))
        return total

    def triples(self, placed: ViewSource, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray,
                Uc: np.ndarray) -> np.ndarray:
        total = np.zeros((Ua.shape[1], Ub.shape[1], Uc.shape[1]))
        for xa, xb, xc in placed.blocks((a, b, c)):
            Za, Zb, Zc = (np.asarray(x @ U) for x, U in ((xa, Ua), (xb, Ub), (xc, Uc)))
            total += cross3(Za, Za if a == b and Ua is Ub else Zb, Zc)
        return total
