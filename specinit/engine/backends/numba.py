"""The Numba backend: fused multi-threaded CSR kernels for the count passes (``pip install "specinit[fast]"``).

It also holds two compiled E-steps used when Numba is installed: the HMM
forward-backward (:func:`forward_backward`; the NumPy version is one
vectorized step per time step, a Python loop of T steps that dominates on a
few long sequences), and the per-document fold-in of LDA's closing sweeps
(:func:`closing_sweep`; the NumPy version gathers (non-zeros, k) arrays);
and the anchor weights' projected-gradient step (:func:`anchor_weights_step`:
gradient point, projection onto the simplex and momentum in one pass over the
rows; the NumPy version sorts, cumsums and combines whole (V, k) arrays).

SciPy computes ``X^T (a * (X Q))`` as two single-threaded sparse products
(a gather over the non-zeros, then a scatter through a transposed copy of the
index structure). These Numba kernels fuse both into one read of the CSR
arrays: for each document ``d``, ``y = a_d sum_j x_dj Q[j]`` and then
``out[j] += x_dj y`` for its words, in parallel over document ranges
(``numba.prange``) with one (V, r) accumulator per range, summed at the end.
Dense intermediates: one (V, r) array per thread; nothing of size (N, r).
Accumulation is in float64, in the order SciPy uses within a document.

A compiled loop cannot be interrupted, so every kernel runs over blocks of
documents of bounded work (:data:`CALL_WORK`, a fraction of a second), with
Ctrl-C held while a block runs (:func:`interrupts_between_calls`): the
KeyboardInterrupt arrives between two blocks, as a plain KeyboardInterrupt
(not an exception raised inside the compiled code), and nothing of the
interrupted pass is returned.

:class:`NumbaPasses` overrides the two heavy count passes of the NumPy
reference and implements nothing else (views are refused by
:func:`specinit.engine.backends.resolve_backend`). Imported lazily.

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1 (the sums ``sum_d a_d c_d c_d^T Q``).
"""

from __future__ import annotations

import math
import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import optional_import
from specinit.engine.backends import WhitenedStats
from specinit.engine.backends.numpy import NumpyPasses, PlacedCounts, document_weights, usable_documents, weighted_cubes
from specinit.engine.rows import factor_noise_iterations as _factor_noise_iterations
from specinit.engine.sources import row_ranges

if TYPE_CHECKING:
    from specinit.engine.sequences import SequenceBatch

numba = optional_import("numba", "fast", "the Numba backend (backend=\"numba\")")

__all__ = ["CALL_WORK", "GAUSSIAN_BLOCK", "GAUSSIAN_KINDS", "NumbaPasses", "SUM_ARITY", "anchor_weights_step",
           "closing_sweep", "csr_matmat", "factor_noise_iterations", "forward_backward", "gaussian_e_step",
           "gaussian_em_step", "interrupts_between_calls", "power_iterate", "product_csr", "sum_csr"]

#: Work of one compiled call (non-zeros times the multiply-adds per non-zero): about 0.1 s on one core, so
#: Ctrl-C is answered within a fraction of a second.
CALL_WORK = 2**27


@contextmanager
def interrupts_between_calls() -> Iterator[None]:
    """Hold SIGINT while a compiled call runs, and deliver it to the previous handler when the call is over.

    A signal that arrives during a Numba call would otherwise raise
    KeyboardInterrupt inside a Python callback of the compiled code (a
    ``SystemError``), or only after the whole loop. Off the main thread
    (where no handler can be installed) the call runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            if callable(previous):
                previous(signal.SIGINT, received[0])  # the default handler raises KeyboardInterrupt here
            else:
                signal.raise_signal(signal.SIGINT)


def _in_blocks(indptr: np.ndarray, work_per_nonzero: int, call) -> None:
    """``call(start, stop)`` over consecutive row blocks of about :data:`CALL_WORK` work, Ctrl-C between blocks."""
    for start, stop in row_ranges(indptr, max(1, CALL_WORK // max(1, int(work_per_nonzero)))):
        with interrupts_between_calls():
            call(start, stop)


@numba.njit(parallel=True, cache=True, fastmath=False)
def _m2_kernel(indptr, indices, data, a, Q, start, stop, out):  # pragma: no cover - compiled
    n_parts = out.shape[0]
    r = Q.shape[1]
    step = (stop - start + n_parts - 1) // n_parts
    for p in numba.prange(n_parts):
        acc = out[p]
        y = np.empty(r)
        for d in range(start + p * step, min(start + (p + 1) * step, stop)):
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


@numba.njit(parallel=True, cache=True, fastmath=False)
def _rmatmat_kernel(indptr, indices, data, Z, start, stop, out):  # pragma: no cover - compiled
    n_parts = out.shape[0]
    r = Z.shape[1]
    step = (stop - start + n_parts - 1) // n_parts
    for p in numba.prange(n_parts):
        acc = out[p]
        for d in range(start + p * step, min(start + (p + 1) * step, stop)):
            for jj in range(indptr[d], indptr[d + 1]):
                x = data[jj]
                j = indices[jj]
                for c in range(r):
                    acc[j, c] += x * Z[d, c]


@numba.njit(parallel=True, cache=True, fastmath=False)
def _matmat_kernel(indptr, indices, data, Q, start, stop, out):  # pragma: no cover - compiled
    r = Q.shape[1]
    for d in numba.prange(start, stop):
        for jj in range(indptr[d], indptr[d + 1]):
            x = data[jj]
            j = indices[jj]
            for c in range(r):
                out[d, c] += x * Q[j, c]


def _blocked_sum(indptr, work_per_nonzero: int, kernel, out: np.ndarray) -> np.ndarray:
    """Run ``kernel(start, stop, out)`` over row blocks (:func:`_in_blocks`) and add up its per-thread parts."""
    _in_blocks(indptr, work_per_nonzero, lambda start, stop: kernel(start, stop, out))
    return out.sum(axis=0)


def _bound(kernel, chunk, *arrays, out=None):
    """``kernel`` bound to the CSR arrays of ``chunk`` and ``arrays``: a function of ``(start, stop[, out])``."""
    if out is not None:
        return lambda start, stop: kernel(chunk.indptr, chunk.indices, chunk.data, *arrays, start, stop, out)
    return lambda start, stop, acc: kernel(chunk.indptr, chunk.indices, chunk.data, *arrays, start, stop, acc)


def _parts(n_threads: int) -> int:
    numba.set_num_threads(max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS)))
    return numba.get_num_threads()


def csr_matmat(matrix: sp.csr_array | sp.csr_matrix, Q: np.ndarray) -> np.ndarray:
    """``matrix @ Q`` for a CSR matrix and a dense (n, r) ``Q``, rows split over Numba's threads.

    SciPy's product runs on one thread; this one is the gather half of the
    count passes (each output row is its own sum, in SciPy's order: the same
    values), in row blocks of bounded work with Ctrl-C between them. Used for
    the stored word-pair sums of online topic models, whose products are the
    eigensolver's passes.

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix, shape (m, n)
    Q : ndarray, shape (n, r)

    Returns
    -------
    ndarray, shape (m, r)
    """
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    out = np.zeros((matrix.shape[0], Q.shape[1]))
    _in_blocks(matrix.indptr, Q.shape[1], _bound(_matmat_kernel, matrix, Q, out=out))
    return out


@numba.njit(cache=True)
def _accumulate(indices, data, lo, hi, scale, r, seen, met, acc, u, fill):  # pragma: no cover - compiled
    """Add ``scale`` times the entries ``lo:hi`` of a CSR row into row ``r``'s dense accumulator ``acc`` (a column's
    first value is set: SciPy's bits); ``seen[c] == r`` marks the columns met, listed in ``met[:u]``. Returns the
    new ``u``; without ``fill`` only the columns are counted."""
    for jj in range(lo, hi):
        c = indices[jj]
        if seen[c] != r:
            seen[c] = r
            met[u] = c
            u += 1
            acc[c] = scale * data[jj]
        elif fill:
            acc[c] += scale * data[jj]
    return u


@numba.njit(cache=True)
def _write_row(acc, met, u, at, out_indices, out_data):  # pragma: no cover - compiled
    """Write the ``u`` columns ``met[:u]`` of a row (in the order they were met) and their values in ``acc`` from
    ``at``."""
    for t in range(u):
        out_indices[at + t] = met[t]
        out_data[at + t] = acc[met[t]]


#: Matrices added in one pass by :func:`sum_csr` (a fixed arity: one compiled signature for any number of parts).
SUM_ARITY = 8


# Rows [start, stop) in n_blocks ranges, each with its own scratch (:func:`_accumulate`). Output row r adds the parts'
# rows r in the parts' order (the bits of adding the matrices one after another with SciPy). Without ``fill`` only the
# row lengths are written.
@numba.njit(parallel=True, cache=True, fastmath=False)
def _sum_csr_kernel(indptrs, indices, datas, n_cols, n_blocks, start, stop, out_indptr, out_indices, out_data,
                    fill):  # pragma: no cover - compiled
    for b in numba.prange(n_blocks):
        acc, met = np.zeros(n_cols), np.empty(n_cols, dtype=np.int64)
        seen = np.full(n_cols, -1, dtype=np.int64)
        for r in range(start + (stop - start) * b // n_blocks, start + (stop - start) * (b + 1) // n_blocks):
            u = 0
            for p in range(len(indptrs)):  # 1.0 * x is x: the bits of adding the values
                u = _accumulate(indices[p], datas[p], indptrs[p][r], indptrs[p][r + 1], 1.0, r, seen, met, acc, u, fill)
            if fill:
                _write_row(acc, met, u, out_indptr[r], out_indices, out_data)
            else:
                out_indptr[r + 1] = u


# The product A @ B of two CSR matrices, Gustavson's row by row: output row r adds A[r, i] * B[i] over the entries
# of A's row r in their order, and each B row's entries in theirs (SciPy's order: the same values).
@numba.njit(parallel=True, cache=True, fastmath=False)
def _product_csr_kernel(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, n_cols, n_blocks, start, stop,
                        out_indptr, out_indices, out_data, fill):  # pragma: no cover - compiled
    for b in numba.prange(n_blocks):
        acc, met = np.zeros(n_cols), np.empty(n_cols, dtype=np.int64)
        seen = np.full(n_cols, -1, dtype=np.int64)
        for r in range(start + (stop - start) * b // n_blocks, start + (stop - start) * (b + 1) // n_blocks):
            u = 0
            for ii in range(a_indptr[r], a_indptr[r + 1]):
                i = a_indices[ii]
                u = _accumulate(b_indices, b_data, b_indptr[i], b_indptr[i + 1], a_data[ii], r, seen, met, acc, u, fill)
            if fill:
                _write_row(acc, met, u, out_indptr[r], out_indices, out_data)
            else:
                out_indptr[r + 1] = u


def _two_phase(shape, work: np.ndarray, kernel, upper: int):
    """A CSR result built by ``kernel(start, stop, out_indptr, out_indices, out_data, fill)`` over row blocks of
    ``work`` (cumulative entries read): the rows' lengths first, then their entries (no duplicates; each row's
    columns in the order met, unsorted as SciPy's products; a sum that cancels to zero is kept, where SciPy drops
    it)."""
    m, n = shape
    index = np.int64 if max(upper, n) >= np.iinfo(np.int32).max else np.int32
    out_indptr = np.zeros(m + 1, dtype=np.int64)

    def run(out_indices, out_data, fill):  # an entry's accumulation costs a few multiply-adds: work 4
        _in_blocks(work, 4, lambda start, stop: kernel(start, stop, out_indptr, out_indices, out_data, fill))

    run(np.empty(0, dtype=index), np.empty(0), False)
    np.cumsum(out_indptr, out=out_indptr)
    out_indices, out_data = np.empty(out_indptr[-1], dtype=index), np.empty(out_indptr[-1])
    run(out_indices, out_data, True)
    return sp.csr_matrix((out_data, out_indices, out_indptr.astype(index, copy=False)), shape=(m, n))


def sum_csr(parts: Sequence[sp.csr_array | sp.csr_matrix]) -> sp.csr_matrix:
    """The sum of CSR matrices of one shape on Numba's threads, :data:`SUM_ARITY` of them in each pass.

    SciPy adds two sparse matrices at a time on one thread, so adding ``p``
    matrices one after another reads the growing sum ``p - 1`` times. Here
    each output row is built once from the rows of up to :data:`SUM_ARITY`
    parts (a dense accumulator per thread), the values added in the parts'
    order: SciPy's values for ``parts[0] + parts[1] + ...`` (more parts are
    added in groups, then the groups' sums). The word-pair sums of online
    topic models (:class:`specinit.engine.moments.PairSums`) merge their
    batches this way. In row blocks of bounded work, Ctrl-C between them.

    Parameters
    ----------
    parts : non-empty sequence of scipy.sparse.csr_matrix, each of shape (m, n)
        Rows in any column order (e.g. SciPy's products); duplicate entries
        are added up.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (m, n)
        No duplicate entries, each row's columns in the order met (unsorted,
        as SciPy's products); index arrays int64 where the non-zeros need it.
    """
    parts = list(parts)
    while len(parts) > SUM_ARITY:
        parts = [sum_csr(parts[i: i + SUM_ARITY]) for i in range(0, len(parts), SUM_ARITY)]
    m, n = parts[0].shape
    same = np.result_type(*(part.indices for part in parts), *(part.indptr for part in parts))
    empty = sp.csr_matrix((m, n))  # pads the parts to the compiled arity: rows without entries
    padded = [*parts, *[empty] * (SUM_ARITY - len(parts))]
    indptrs, indices = ((tuple(getattr(part, name).astype(same, copy=False) for part in padded))
                        for name in ("indptr", "indices"))
    datas = tuple(np.asarray(part.data, dtype=np.float64) for part in padded)
    work = np.sum([part.indptr.astype(np.int64) for part in parts], axis=0)  # the rows' entries over all the parts
    n_blocks = 4 * numba.get_num_threads()
    return _two_phase((m, n), work, lambda start, stop, *out: _sum_csr_kernel(
        indptrs, indices, datas, n, n_blocks, start, stop, *out), int(work[-1]))


def product_csr(A: sp.csr_array | sp.csr_matrix, B: sp.csr_array | sp.csr_matrix) -> sp.csr_matrix:
    """The sparse product ``A @ B`` of two CSR matrices on Numba's threads.

    SciPy's product runs on one thread; this one is the same row-by-row
    algorithm (Gustavson's: each output row accumulates the rows of ``B``
    that its entries select, in SciPy's order: the same values) on every
    core. The word-pair sums ``C^T diag(a) C`` of a batch of
    documents (:class:`specinit.engine.moments.PairSums`) are such a product.
    In row blocks of bounded work, Ctrl-C between them.

    Parameters
    ----------
    A : scipy.sparse.csr_matrix, shape (m, l)
    B : scipy.sparse.csr_matrix, shape (l, n)

    Returns
    -------
    scipy.sparse.csr_matrix, shape (m, n)
        As SciPy's product: no duplicate entries, each row's columns in the
        order met.
    """
    # entries read for each row of A: the lengths of the rows of B it selects
    work = np.concatenate([[0], np.cumsum(np.diff(B.indptr).astype(np.int64)[A.indices])])[A.indptr]
    n_blocks = 4 * numba.get_num_threads()
    a_data, b_data = np.asarray(A.data, dtype=np.float64), np.asarray(B.data, dtype=np.float64)
    return _two_phase((A.shape[0], B.shape[1]), work, lambda start, stop, *out: _product_csr_kernel(
        A.indptr, A.indices, a_data, B.indptr, B.indices, b_data, B.shape[1], n_blocks, start, stop, *out),
        int(work[-1]))


class NumbaPasses(NumpyPasses):
    """Count passes as fused CSR kernels; threads run inside a kernel (one chunk at a time).

    Parameters
    ----------
    n_threads : int, optional
        Threads of the kernels (default: all cores).
    chunk_rows : int, optional
        Rows per chunk of an in-memory count matrix.
    """

    name = "numba"
    implements = frozenset({"count_first", "count_m2", "count_whitened"})

    def _splits(self) -> int:
        return 1

    def count_m2(self, placed: PlacedCounts, Q: np.ndarray) -> np.ndarray:
        Q = np.ascontiguousarray(Q, dtype=np.float64)

        def partial(chunk):
            chunk, n, _ = usable_documents(chunk)
            _, a, _ = document_weights(n, placed.weighting)
            return _blocked_sum(chunk.indptr, 2 * Q.shape[1], _bound(_m2_kernel, chunk, a, Q),
                                np.zeros((_parts(self.n_threads), *Q.shape)))

        return self._reduce(self._chunks(placed), partial, workers=1)

    def count_whitened(self, placed: PlacedCounts, W: np.ndarray) -> WhitenedStats:
        W = np.ascontiguousarray(W, dtype=np.float64)

        def partial(chunk):
            chunk, n, _ = usable_documents(chunk)
            _, a, b = document_weights(n, placed.weighting)
            Y = np.zeros((chunk.shape[0], W.shape[1]))
            _in_blocks(chunk.indptr, W.shape[1], _bound(_matmat_kernel, chunk, W, out=Y))
            word_by = _blocked_sum(chunk.indptr, W.shape[1], _bound(_rmatmat_kernel, chunk, Y * b[:, None]),
                                   np.zeros((_parts(self.n_threads), *W.shape)))
            return WhitenedStats(y3=weighted_cubes(Y, b, self.n_threads), y2=(Y * a[:, None]).T @ Y,
                                 word_by=word_by)

        return self._reduce(self._chunks(placed), partial, workers=1)


# Row i of the sums takes, in document order, the pairs of the documents that hold word i (the transposed block
# lists them): each row stays in cache while it is summed and is written by one thread, so the entries add up in
# document order whatever the number of threads.
@numba.njit(parallel=True, cache=True, fastmath=False)
def _pair_sums_kernel(word_ptr, word_docs, word_data, indptr, indices, data, a, out):  # pragma: no cover - compiled
    for i in numba.prange(out.shape[0]):
        row = out[i]
        for p in range(word_ptr[i], word_ptr[i + 1]):
            d = word_docs[p]
            x = a[d] * word_data[p]
            for jj in range(indptr[d], indptr[d + 1]):
                row[indices[jj]] += x * data[jj]


def add_pair_sums(chunk: sp.csr_array | sp.csr_matrix, a: np.ndarray, out: np.ndarray) -> None:
    """Add ``sum_d a_d c_d c_d^T`` over the rows of a CSR chunk to a dense (V, V) array, in place, compiled.

    The word-pair sums of :class:`specinit.engine.moments.PairSums` held
    dense: ``sum_d nnz_d^2`` multiply-adds straight into ``out``, where the
    sparse route (a CSR product, then its conversion to a dense array) builds
    the sparse (V, V) product first. In parallel over the rows of ``out``,
    each row summed whole from the documents that hold its word (a
    transposed copy of each block of rows lists them), so that the writes
    stay in one row of ``out`` at a time.

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix, shape (n, V)
        Word counts (canonical: no duplicate entries in a row).
    a : ndarray, shape (n,)
        Per-document weights.
    out : ndarray, shape (V, V), C-contiguous float64
        The sums so far; overwritten.
    """
    a = np.asarray(a, dtype=np.float64)
    mean_unique = max(1, chunk.nnz // max(1, chunk.shape[0]))

    def add(start, stop):
        block = sp.csr_matrix(chunk[start:stop], dtype=np.float64)
        words = block.T.tocsr()  # (V, n): the documents of each word, in document order
        words.sort_indices()
        _pair_sums_kernel(words.indptr, words.indices, words.data, block.indptr, block.indices, block.data,
                          a[start:stop], out)

    _in_blocks(chunk.indptr, mean_unique, add)


@numba.njit(cache=True)
def _forward_backward_kernel(active, offsets, init, transition, likelihood):  # pragma: no cover - compiled
    n, k = likelihood.shape
    T = active.size
    tiny = np.finfo(np.float64).tiny
    alpha = np.empty((n, k))
    scale = np.empty(n)
    for t in range(T):
        m, o = active[t], offsets[t]
        for i in range(m):
            total = 0.0
            for j in range(k):
                if t == 0:
                    a = init[j] * likelihood[o + i, j]
                else:
                    p = offsets[t - 1] + i
                    a = 0.0
                    for h in range(k):
                        a += alpha[p, h] * transition[h, j]
                    a *= likelihood[o + i, j]
                alpha[o + i, j] = a
                total += a
            scale[o + i] = total
            norm = max(total, tiny)
            for j in range(k):
                alpha[o + i, j] /= norm
    log_likelihood = 0.0
    for i in range(n):
        log_likelihood += np.log(max(scale[i], tiny))
    trans_counts = np.zeros((k, k))
    beta = np.ones((active[0], k))
    eb = np.empty(k)
    for t in range(T - 1, -1, -1):
        m, o = active[t], offsets[t]
        ending = active[t + 1] if t + 1 < T else 0
        for i in range(ending, m):  # sequences whose last step is t
            beta[i, :] = 1.0
        for i in range(m):
            if t:
                for j in range(k):
                    eb[j] = likelihood[o + i, j] * beta[i, j] / scale[o + i]
                p = offsets[t - 1] + i
                for h in range(k):
                    for j in range(k):
                        trans_counts[h, j] += transition[h, j] * alpha[p, h] * eb[j]
            for j in range(k):
                alpha[o + i, j] *= beta[i, j]
            if t:
                for h in range(k):
                    total = 0.0
                    for j in range(k):
                        total += eb[j] * transition[h, j]
                    beta[i, h] = total
    return alpha[: active[0]].sum(axis=0), trans_counts, alpha, log_likelihood


def forward_backward(batch: SequenceBatch, init: np.ndarray, transition: np.ndarray,
                     likelihood: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """:func:`specinit.engine.sequences.forward_backward`, compiled: one loop over time steps and sequences.

    The same recursions in the same order (scaled forward pass, backward pass
    accumulating the transition counts), so the results equal the NumPy
    version to float64 round-off. CTRL-C is held during the compiled call and
    raised when it returns.

    Parameters
    ----------
    batch : specinit.engine.sequences.SequenceBatch
    init : ndarray, shape (k,)
    transition : ndarray, shape (k, k)
    likelihood : ndarray, shape (T, k)
        ``p(x_t | h_t = j)`` of every observation of the batch.

    Returns
    -------
    init_counts : ndarray, shape (k,)
    trans_counts : ndarray, shape (k, k)
    gamma : ndarray, shape (T, k)
        Posterior state probabilities.
    log_likelihood : float
    """
    with interrupts_between_calls():
        init_counts, trans_counts, gamma, log_likelihood = _forward_backward_kernel(
            batch.active, batch.offsets, np.ascontiguousarray(init, dtype=np.float64),
            np.ascontiguousarray(transition, dtype=np.float64), np.ascontiguousarray(likelihood, dtype=np.float64))
    return init_counts, trans_counts, gamma, float(log_likelihood)


# Each document's topic-word rows are gathered once into a (k, tokens) buffer that every step reads contiguously:
# a step's dot products run over the tokens for one topic at a time (SIMD lanes over tokens, no horizontal sums),
# then the ratios, then one accumulation per topic; reassociation lets the sums use SIMD lanes (round-off changes
# only; every value is finite and positive). The last pass scores the tokens and scatters the expected counts with
# the final proportions.
@numba.njit(parallel=True, cache=True, fastmath={"reassoc", "contract"})
def _closing_kernel(indptr, indices, data, beta_t, theta, alpha, steps, start, stop, stats,
                    totals):  # pragma: no cover - compiled
    k = theta.shape[1]
    n_parts = stats.shape[0]
    step = (stop - start + n_parts - 1) // n_parts
    longest = 0
    for d in range(start, stop):
        longest = max(longest, indptr[d + 1] - indptr[d])
    for p in numba.prange(n_parts):
        th = np.empty(k)
        ratio = np.empty(longest)
        rows = np.empty((k, longest))
        counts = stats[p]
        for d in range(start + p * step, min(stop, start + (p + 1) * step)):
            prior = alpha[d] if alpha.shape[0] > 1 else alpha[0]
            lo, hi = indptr[d], indptr[d + 1]
            n = hi - lo
            length = 0.0
            for i in range(n):
                length += data[lo + i]
                row = beta_t[indices[lo + i]]
                for j in range(k):
                    rows[j, i] = row[j]
            a0 = 0.0
            for j in range(k):
                th[j] = theta[d, j]
                a0 += prior[j]
            for s in range(steps + 1):
                for i in range(n):
                    ratio[i] = 0.0
                for j in range(k):
                    weight = th[j]
                    topic = rows[j]
                    for i in range(n):
                        ratio[i] += weight * topic[i]
                if s == steps:
                    total = 0.0
                    for i in range(n):
                        total += data[lo + i] * np.log(ratio[i])
                    totals[p] += total
                for i in range(n):
                    ratio[i] = data[lo + i] / ratio[i]
                if s == steps:
                    for i in range(n):
                        out = counts[indices[lo + i]]
                        r = ratio[i]
                        for j in range(k):
                            out[j] += th[j] * r
                else:
                    for j in range(k):
                        topic = rows[j]
                        acc = 0.0
                        for i in range(n):
                            acc += ratio[i] * topic[i]
                        th[j] = (prior[j] + th[j] * acc) / (length + a0)
            for j in range(k):
                theta[d, j] = th[j]


def closing_sweep(chunk: sp.csr_array | sp.csr_matrix, beta: np.ndarray, alpha: np.ndarray, theta: np.ndarray,
                  steps: int) -> tuple[np.ndarray, np.ndarray, float]:
    """One closing EM sweep over a CSR chunk, compiled: fold-in steps per document, then its expected counts.

    The unit of :func:`specinit.models._topics.close_topics`: ``steps``
    fixed-point steps of each document's proportions from ``theta`` (a copy
    is updated), then ``stats[i, w] = sum_d theta_di c_dw / (theta_d . beta_w)``
    and ``sum c_dw log(theta_d . beta_w)``, in parallel over documents with
    no per-non-zero temporaries.

    Parameters
    ----------
    chunk : scipy.sparse.csr_matrix, shape (n, V)
        Word counts of the chunk's documents.
    beta : ndarray, shape (k, V)
        Topics.
    alpha : ndarray, shape (k,) or (n, k)
        Dirichlet parameters of the proportions, shared or one row per
        document (a zero keeps that document's proportion of the topic at
        zero when ``theta`` starts there).
    theta : ndarray, shape (n, k)
        Starting proportions (the previous sweep's); float64 ones are
        returned in float64, others in float32 (the steps of each document
        run in float64).
    steps : int
        Fixed-point steps per document.

    Returns
    -------
    theta : ndarray, shape (n, k)
    stats : ndarray, shape (k, V)
    log_likelihood : float
        Sum over the chunk's tokens.
    """
    # proportions below float64 (a warm start kept between sweeps) come back float32: each document's steps run in
    # float64
    theta = np.array(theta, dtype=np.float64 if np.asarray(theta).dtype == np.float64 else np.float32)
    beta_t = np.ascontiguousarray(beta.T)
    n_parts = max(1, min(numba.get_num_threads(), chunk.shape[0]))
    stats, totals = np.zeros((n_parts, *beta_t.shape)), np.zeros(n_parts)
    data = np.asarray(chunk.data, dtype=np.float64)
    # one row shared by every document, or one per document: never broadcast (an (n, k) copy per chunk)
    alpha = np.ascontiguousarray(np.atleast_2d(np.asarray(alpha, dtype=np.float64)))
    if alpha.shape not in ((1, theta.shape[1]), theta.shape):
        raise ValueError(f"closing_sweep: alpha of shape {alpha.shape} for proportions of shape {theta.shape}")
    _in_blocks(chunk.indptr, beta_t.shape[1] * (int(steps) + 2),
               lambda start, stop: _closing_kernel(chunk.indptr, chunk.indices, data, beta_t, theta, alpha,
                                                   int(steps), start, stop, stats, totals))
    for part in stats[1:]:  # the threads' partial counts, summed into the first (no (V, k) temporary)
        stats[0] += part
    return theta, stats[0].T, float(totals.sum())


@numba.njit(cache=True, error_model="numpy")
def _power_kernel(T, U, n_iter, tol, patience, window, out, iterations, converged, stalled):  # pragma: no cover
    n, m = U.shape
    u, v, moves = np.empty(n), np.empty(n), np.empty(n_iter + 1)
    for c in range(m):
        for i in range(n):
            u[i] = U[i, c]
        moves[0] = np.inf
        for it in range(1, n_iter + 1):
            norm = 0.0
            for i in range(n):
                total = 0.0
                for j in range(n):
                    for k in range(n):
                        total += T[i, j, k] * (u[j] * u[k])
                v[i] = total
                norm += total * total
            norm = np.sqrt(norm)
            dot = 0.0
            for i in range(n):
                if norm > 0:
                    v[i] /= norm
                dot += v[i] * u[i]
            sign = math.copysign(1.0, dot)
            step = 0.0
            for i in range(n):
                delta = v[i] - sign * u[i]
                step += delta * delta
                u[i] = v[i]
            step = np.sqrt(step)
            moves[it] = step
            done = step < tol
            hopeless = False
            if it >= patience and not done:
                rate = (step / moves[it - window]) ** (1.0 / window)
                hopeless = rate >= 1.0 or it + np.log(tol / step) / np.log(rate) > n_iter
            if done or hopeless or it == n_iter:
                for i in range(n):
                    out[i, c] = u[i]
                iterations[c], converged[c], stalled[c] = it, done, hopeless
                break


def power_iterate(T: np.ndarray, U: np.ndarray, n_iter: int, tol: float, patience: int,
                  window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The power iterations of :func:`specinit.engine.decompose._power_iterate` for a third-order tensor, compiled.

    Each column iterates on its own, ``T(I, u, u)`` as a triple loop (the
    same products as the NumPy version's one matrix product, summed in
    another order): no per-iteration array operations, which is what the
    NumPy version's time is on the small tensors of mixtures and HMMs (a
    10 x 10 x 10 tensor: about 25 us an iteration of NumPy calls). The same
    stopping rule.

    Parameters
    ----------
    T : ndarray, shape (n, n, n)
    U : ndarray, shape (n, m)
        Unit starting columns.
    n_iter : int
    tol : float
    patience : int
        The first iteration at which a column may be given up.
    window : int
        Iterations over which a move's shrinking is measured
        (:data:`specinit.engine.decompose.STALL_WINDOW`).

    Returns
    -------
    U, iterations, converged, stalled
        As :func:`specinit.engine.decompose._power_iterate`.
    """
    T = np.ascontiguousarray(T, dtype=np.float64)
    U = np.ascontiguousarray(U, dtype=np.float64)
    m = U.shape[1]
    out, iterations = U.copy(), np.zeros(m, dtype=np.int64)
    converged, stalled = np.zeros(m, dtype=np.bool_), np.zeros(m, dtype=np.bool_)
    _power_kernel(T, U, int(n_iter), float(tol), int(patience), int(window), out, iterations, converged, stalled)
    return out, iterations, converged, stalled


# Branch-free sums over a row (a 0/1 mask times the entry) vectorize; the data-dependent branch of each entry
# would be mispredicted half the time.
@numba.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")  # a NaN row gives NaN, not an error
def _project_row(row, out):  # pragma: no cover - compiled
    k = row.size
    total = 0.0
    for j in range(k):
        total += row[j]
    theta = (total - 1.0) / k
    for _ in range(k):  # Michelot: the threshold only grows, and stops once no entry leaves (at most k rounds)
        total, count = 0.0, 0.0
        for j in range(k):
            kept = 1.0 if row[j] > theta else 0.0
            total += kept * row[j]
            count += kept
        new = (total - 1.0) / count
        if new <= theta:
            break
        theta = new
    for j in range(k):
        out[j] = max(row[j] - theta, 0.0)


# The gradient step and the momentum are written as NumPy evaluates them (no contraction into fused multiply-adds),
# so the compiled step gives the NumPy step's iterates.
@numba.njit(parallel=True, cache=True)
def _anchor_step_kernel(Y, product, H, C, lipschitz, momentum, moves):  # pragma: no cover - compiled
    n, k = Y.shape
    n_parts = moves.size
    rows = (n + n_parts - 1) // n_parts
    for p in numba.prange(n_parts):
        point, new = np.empty(k), np.empty(k)
        move = 0.0
        for i in range(p * rows, min((p + 1) * rows, n)):
            for j in range(k):
                point[j] = Y[i, j] - (2.0 * (product[i, j] - H[i, j])) / lipschitz
            _project_row(point, new)
            for j in range(k):
                delta = new[j] - C[i, j]
                size = abs(delta)
                if size > move or size != size:  # NaN propagates, as in np.max
                    move = size
                Y[i, j] = new[j] + momentum * delta
                C[i, j] = new[j]
        moves[p] = move


def anchor_weights_step(Y: np.ndarray, product: np.ndarray, H: np.ndarray, C: np.ndarray, lipschitz: float,
                        momentum: float) -> float:
    """One accelerated projected-gradient step of the anchor weights, in place, compiled and fused.

    The step of :func:`specinit.engine.anchors.anchor_weights_step` in one
    pass over the rows: the gradient point, its projection onto the simplex
    (Michelot's algorithm per row: the threshold ``(sum of the kept entries -
    1) / their number`` grows until no kept entry falls below it; no sort),
    the move and the momentum, with no (V, k) temporary; the rows are split
    over Numba's threads (each row's step is independent, so the iterates do
    not depend on the split). The same iterates as the NumPy step up to the
    order of the projection's sums. A step over (V, k) = (3,000, 20) takes
    about 0.17 ms on two threads, 0.28 ms on one (the NumPy step 1.9 ms).

    Parameters
    ----------
    Y, C : ndarray, shape (V, k), C-contiguous float64
        The momentum point and the weights; both overwritten.
    product, H : ndarray, shape (V, k)
        ``Y @ G`` and the targets ``H``.
    lipschitz, momentum : float

    Returns
    -------
    float
        The largest move of a weight.
    """
    product, H = (np.ascontiguousarray(a, dtype=np.float64) for a in (product, H))
    moves = np.zeros(max(1, min(numba.get_num_threads(), Y.shape[0])))
    _anchor_step_kernel(Y, product, H, C, float(lipschitz), float(momentum), moves)
    return float(moves.max())


#: Rows per block of the Gaussian-mixture EM kernels. The blocks are fixed by the row count alone and their
#: partial sums are added in block order, so the results do not depend on the number of threads.
GAUSSIAN_BLOCK = 512

#: Covariance kinds of :func:`gaussian_em_step`, by their code in the compiled kernels.
GAUSSIAN_KINDS = ("common", "spherical", "diag")

# float64's machine epsilon and smallest normal number as plain floats: compile-time constants of the kernels
_EPS, _TINY = float(np.finfo(np.float64).eps), float(np.finfo(np.float64).tiny)


# Differences first, scaled, then squared: no cancellation, no overflow of x^2 (the expansion of
# :func:`specinit.distributions.mixtures.gaussian_components_host` needs a fallback for both). Exponents below
# -700 (subnormal results) are raised to it, as :func:`specinit.refine.normalized_rows` does.
@numba.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _gaussian_e_rows(x, constant, loc, inverse_scale, start, stop, resp, row_ll):  # pragma: no cover - compiled
    d, k = x.shape[1], loc.shape[0]
    values = np.empty(k)
    for i in range(start, stop):
        top = -np.inf
        for h in range(k):
            quadratic = 0.0
            for j in range(d):
                z = (x[i, j] - loc[h, j]) * inverse_scale[h, j]
                quadratic += z * z
            values[h] = constant[h] - 0.5 * quadratic
            top = max(top, values[h])
        total = 0.0
        for h in range(k):
            values[h] = np.exp(max(values[h] - top, -700.0))
            total += values[h]
        for h in range(k):
            resp[i, h] = values[h] / total
        row_ll[i] = top + np.log(total)


@numba.njit(cache=True, fastmath={"reassoc", "contract"}, error_model="numpy")
def _gaussian_sums_rows(x, resp, start, stop, out):  # pragma: no cover - compiled
    d, k = x.shape[1], resp.shape[1]
    for i in range(start, stop):
        for h in range(k):
            r = resp[i, h]
            out[h, 0] += r
            for j in range(d):
                weighted = r * x[i, j]
                out[h, 1 + j] += weighted
                out[h, 1 + d + j] += weighted * x[i, j]


# The loops over blocks are called from Python only: a cached compiled function that calls a parallel one crashes
# when it is loaded from Numba's cache (numba issue 8578).
@numba.njit(parallel=True, cache=True)
def _gaussian_e_blocks(x, constant, loc, inverse_scale, resp, row_ll):  # pragma: no cover - compiled
    n = x.shape[0]
    for b in numba.prange((n + GAUSSIAN_BLOCK - 1) // GAUSSIAN_BLOCK):
        _gaussian_e_rows(x, constant, loc, inverse_scale, b * GAUSSIAN_BLOCK, min(n, (b + 1) * GAUSSIAN_BLOCK), resp,
                         row_ll)


@numba.njit(parallel=True, cache=True)
def _gaussian_sums_blocks(x, resp, partial):  # pragma: no cover - compiled
    n = x.shape[0]
    for b in numba.prange(partial.shape[0]):
        _gaussian_sums_rows(x, resp, b * GAUSSIAN_BLOCK, min(n, (b + 1) * GAUSSIAN_BLOCK), partial[b])


@numba.njit(cache=True, error_model="numpy")
def _gaussian_e_terms(weights, scale):  # pragma: no cover - compiled
    inverse_scale = 1.0 / scale  # finite where 1 / scale^2 overflows (scales far below the data's magnitude)
    constant = np.log(weights) - 0.5 * scale.shape[1] * np.log(2.0 * np.pi) - np.log(scale).sum(axis=1)
    return constant, inverse_scale


@numba.njit(cache=True, error_model="numpy")
def _gaussian_parameters(sums, kind, reg, variance, floor):  # pragma: no cover - compiled
    k, d = sums.shape[0], (sums.shape[1] - 1) // 2
    counts = sums[:, 0] + 10.0 * _EPS
    weights = np.maximum(counts / counts.sum(), floor / k)
    weights /= weights.sum()
    loc = sums[:, 1:1 + d] / np.expand_dims(counts, 1)
    var = np.maximum(sums[:, 1 + d:] / np.expand_dims(counts, 1) - loc * loc, 0.0)
    if kind == 0:
        var[:, :] = (counts @ (var.sum(axis=1) / d)) / counts.sum()
    elif kind == 1:
        for h in range(k):
            var[h, :] = var[h].sum() / d
    scale = np.sqrt(var + reg * variance)
    scale = np.maximum(scale, floor * max(scale.max(), _TINY))
    return weights, loc, scale, np.isfinite(weights.sum() + loc.sum() + scale.sum())  # finite sum: finite terms


# One block runs on the calling thread: a parallel region costs more than the arithmetic of a few hundred rows.
def _gaussian_e(x, weights, loc, scale, resp) -> float:
    constant, inverse_scale = _gaussian_e_terms(weights, scale)
    row_ll = np.empty(x.shape[0])
    if x.shape[0] <= GAUSSIAN_BLOCK:
        _gaussian_e_rows(x, constant, loc, inverse_scale, 0, x.shape[0], resp, row_ll)
    else:
        _gaussian_e_blocks(x, constant, loc, inverse_scale, resp, row_ll)
    return float(row_ll.sum())


def _gaussian_sums(x, resp) -> np.ndarray:
    (n, d), k = x.shape, resp.shape[1]
    if n <= GAUSSIAN_BLOCK:
        sums = np.zeros((k, 2 * d + 1))
        _gaussian_sums_rows(x, resp, 0, n, sums)
        return sums
    partial = np.zeros(((n + GAUSSIAN_BLOCK - 1) // GAUSSIAN_BLOCK, k, 2 * d + 1))
    _gaussian_sums_blocks(x, resp, partial)
    return partial.sum(axis=0)  # in block order


def gaussian_e_step(x: np.ndarray, weights: np.ndarray, loc: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, float]:
    """The E-step of a Gaussian mixture with diagonal covariances, compiled: responsibilities and log-likelihood.

    One pass over the rows in blocks of :data:`GAUSSIAN_BLOCK` (split over
    Numba's threads): for each row the log densities of the components from
    the differences to their means, their log-sum-exp and the normalized
    responsibilities. What :func:`specinit.refine.mixture_e_step` computes
    from :func:`specinit.distributions.mixtures.gaussian_components_host`, to
    round-off, without its (k, N) temporaries and calls.

    Parameters
    ----------
    x : ndarray, shape (N, d), C-contiguous float64
    weights : ndarray, shape (k,)
        Positive mixing weights.
    loc, scale : ndarray, shape (k, d)
        Means and positive standard deviations.

    Returns
    -------
    resp : ndarray, shape (N, k)
    log_likelihood : float
        Total over the rows.
    """
    resp = np.empty((x.shape[0], loc.shape[0]))
    return resp, _gaussian_e(x, *(np.ascontiguousarray(a, dtype=np.float64) for a in (weights, loc, scale)), resp)


def gaussian_em_step(x: np.ndarray, resp: np.ndarray, covariance: str, reg: float, variance: float,
                     floor: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """One EM step of a Gaussian mixture, compiled and fused: M-step, projection, then the E-step at the result.

    The M-step of :meth:`specinit.models.gmm.GaussianMixture.m_step` (weighted
    counts, means and variances from one pass over the rows, pooled per
    ``covariance``, plus ``reg`` times ``variance``), the projection of
    :func:`specinit.engine.support.project` (weights floored at ``floor / k``
    on the simplex, scales at ``floor`` times the largest), and
    :func:`gaussian_e_step`: about 20 us a step on iris (150 x 4, k = 3),
    where the NumPy step makes some sixty calls (0.15-0.25 ms).

    Parameters
    ----------
    x : ndarray, shape (N, d), C-contiguous float64
    resp : ndarray, shape (N, k)
        Responsibilities of the previous E-step.
    covariance : {'common', 'spherical', 'diag'}
    reg, variance : float
        Variance added to every component: ``reg`` in units of ``variance``.
    floor : float
        Relative floor of the weights and scales.

    Returns
    -------
    weights : ndarray, shape (k,)
    loc : ndarray, shape (k, d)
    scale : ndarray, shape (k, d)
        Scales broadcast to every coordinate (equal within a component for ``"spherical"``, everywhere for
        ``"common"``).
    finite : bool
        Whether every parameter is finite (the E-step at non-finite ones is not).
    resp : ndarray, shape (N, k)
    log_likelihood : float
    """
    weights, loc, scale, finite = _gaussian_parameters(_gaussian_sums(x, np.ascontiguousarray(resp, dtype=np.float64)),
                                                       GAUSSIAN_KINDS.index(covariance), float(reg), float(variance),
                                                       float(floor))
    new_resp = np.empty(resp.shape)
    return weights, loc, scale, bool(finite), new_resp, _gaussian_e(x, weights, loc, scale, new_resp)


#: :func:`specinit.engine.rows.factor_noise_iterations` compiled: the iterations' eigendecompositions are of a
#: (d, d) covariance, cheaper than NumPy's calls around them at the dimensions of tabular data.
factor_noise_iterations = numba.njit(cache=True)(_factor_noise_iterations)
