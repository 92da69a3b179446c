"""Fused multi-threaded CSR kernels for the count-moment passes (optional: ``pip install "specinit[fast]"``).

SciPy computes ``X^T (a * (X Q))`` as two single-threaded sparse products
(a gather over the non-zeros, then a scatter through a transposed copy of the
index structure). These Numba kernels fuse both into one read of the CSR
arrays: for each document ``d``, ``y = a_d sum_j x_dj Q[j]`` and then
``out[j] += x_dj y`` for its words, in parallel over document ranges
(``numba.prange``) with one (V, r) accumulator per range, summed at the end.
Dense intermediates: one (V, r) array per thread; nothing of size (N, r).
Accumulation is in float64, in the order SciPy uses within a document.

Imported lazily by :mod:`specinit.engine.moments` when Numba is installed.

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1 (the sums ``sum_d a_d c_d c_d^T Q``).
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["m2_sum", "whitened_sums"]


@numba.njit(parallel=True, cache=True, fastmath=False)
def _m2_kernel(indptr, indices, data, a, Q, n_parts):  # pragma: no cover - compiled
    n_rows = indptr.size - 1
    V, r = Q.shape
    out = np.zeros((n_parts, V, r))
    step = (n_rows + n_parts - 1) // n_parts
    for p in numba.prange(n_parts):
        acc = out[p]
        y = np.empty(r)
        for d in range(p * step, min((p + 1) * step, n_rows)):
            for c in range(r):
                y[c] = 0.0
            for jj in range(indptr[d], indptr[d + 1]):
                x = data[jj]
                j = indices[jj]
                for c in range(r):
                    y[c] += x * Q[j, c]
            ad = a[d]
            for c in range(r):
                y[c] *= ad
            for jj in range(indptr[d], indptr[d + 1]):
                x = data[jj]
                j = indices[jj]
                for c in range(r):
                    acc[j, c] += x * y[c]
    total = out[0]
    for p in range(1, n_parts):
        total += out[p]
    return total


@numba.njit(parallel=True, cache=True, fastmath=False)
def _rmatmat_kernel(indptr, indices, data, Z, V, n_parts):  # pragma: no cover - compiled
    n_rows = indptr.size - 1
    r = Z.shape[1]
    out = np.zeros((n_parts, V, r))
    step = (n_rows + n_parts - 1) // n_parts
    for p in numba.prange(n_parts):
        acc = out[p]
        for d in range(p * step, min((p + 1) * step, n_rows)):
            for jj in range(indptr[d], indptr[d + 1]):
                x = data[jj]
                j = indices[jj]
                for c in range(r):
                    acc[j, c] += x * Z[d, c]
    total = out[0]
    for p in range(1, n_parts):
        total += out[p]
    return total


@numba.njit(parallel=True, cache=True, fastmath=False)
def _matmat_kernel(indptr, indices, data, Q):  # pragma: no cover - compiled
    n_rows = indptr.size - 1
    r = Q.shape[1]
    out = np.zeros((n_rows, r))
    for d in numba.prange(n_rows):
        for jj in range(indptr[d], indptr[d + 1]):
            x = data[jj]
            j = indices[jj]
            for c in range(r):
                out[d, c] += x * Q[j, c]
    return out


def _parts(n_threads: int) -> int:
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    return numba.get_num_threads()


def m2_sum(chunk, a: np.ndarray, Q: np.ndarray, n_threads: int) -> np.ndarray:
    """``X^T (a * (X Q))`` of a CSR chunk on ``n_threads`` threads (one fused read of the non-zeros).

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
        Validated float64 CSR (sorted, no duplicates).
    a : ndarray, shape (N,)
        Per-document weights.
    Q : ndarray, shape (V, r)
        Right-hand side.
    n_threads : int
        Threads (and per-thread (V, r) accumulators).

    Returns
    -------
    ndarray, shape (V, r)
    """
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    return _m2_kernel(chunk.indptr, chunk.indices, chunk.data, np.asarray(a, dtype=np.float64), Q, _parts(n_threads))


def whitened_sums(chunk, W: np.ndarray, b: np.ndarray, n_threads: int) -> tuple[np.ndarray, np.ndarray]:
    """``Y = X W`` (N, k) and ``X^T (b * Y)`` (V, k) of a CSR chunk, multi-threaded.

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix
        Validated float64 CSR.
    W : ndarray, shape (V, k)
        Whitening matrix.
    b : ndarray, shape (N,)
        Per-document third-order weights.
    n_threads : int
        Threads.

    Returns
    -------
    (ndarray (N, k), ndarray (V, k))
    """
    W = np.ascontiguousarray(W, dtype=np.float64)
    parts = _parts(n_threads)
    Y = _matmat_kernel(chunk.indptr, chunk.indices, chunk.data, W)
    return Y, _rmatmat_kernel(chunk.indptr, chunk.indices, chunk.data, Y * b[:, None], W.shape[0], parts)
