"""Moment passes over a Dask array of row blocks, computed where the blocks live.

Every pass of the engine is a sum over rows of partial results that merge by
addition. For a ``dask.array.Array`` whose chunks are row blocks (one chunk
along the columns; scipy.sparse or dense NumPy chunks), each block's partial
sum is computed by a task next to the block, the partials are added in a
binary tree of tasks, and only the final k-sized / (V, k)-sized result comes
back to the client. The current ``distributed`` client is used when one
exists (Dask's default scheduler otherwise). Dask is imported lazily.

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1: the pooled estimators are sums over documents, so
   partial sums of row blocks merge by addition.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from specinit._validation import bad_argument

__all__ = ["is_dask_array", "check_row_blocks", "reduce_blocks", "iter_blocks"]


def is_dask_array(value) -> bool:
    """True for a ``dask.array.Array`` (checked without importing Dask).

    Parameters
    ----------
    value : object
        Anything.

    Returns
    -------
    bool
    """
    return type(value).__module__.startswith("dask.array") and hasattr(value, "to_delayed")


def check_row_blocks(array, name: str, func: str):
    """Check that a Dask array is an (N, d) array of row blocks with known sizes.

    Parameters
    ----------
    array : dask.array.Array
    name, func : str
        Argument and function named in the error messages.

    Returns
    -------
    dask.array.Array
        The same array.

    Raises
    ------
    ValueError
        Not two-dimensional, chunked along the columns (with how to rechunk),
        or with unknown chunk sizes (with how to compute them).
    TypeError
        A non-numeric dtype.
    """
    if array.ndim != 2:
        raise bad_argument(name, func, "a two-dimensional (N, d) Dask array of row blocks", f"{array.ndim} dimensions",
                           describe=False)
    if any(math.isnan(c) for c in array.chunks[0]) or any(math.isnan(c) for c in array.chunks[1]):
        raise bad_argument(name, func, "a Dask array with known chunk sizes (call x.compute_chunk_sizes() first)",
                           "unknown (NaN) chunk sizes", describe=False)
    if array.numblocks[1] != 1:
        raise bad_argument(
            name, func,
            "a Dask array of ROW blocks, each holding every column (rechunk with x.rechunk({1: -1}), or build the "
            "blocks by rows: every pass sums over rows, so a block must hold whole rows)",
            f"{array.numblocks[1]} chunks along the columns {array.chunks[1]}", describe=False)
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise bad_argument(name, func, "a numeric Dask array", f"dtype {array.dtype}", kind=TypeError, describe=False)
    return array


def _tree_sum(parts):
    import dask

    parts = list(parts)
    while len(parts) > 1:
        nxt = [dask.delayed(operator.add)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            nxt.append(parts[-1])
        parts = nxt
    return parts[0]


def _share(arg: np.ndarray):
    """A moment-sized argument sent once: broadcast to the workers of a distributed client, else a graph key."""
    import dask

    if arg.nbytes > 2**20:
        try:
            from distributed import get_client

            client = get_client()
        except (ImportError, ValueError):
            client = None
        if client is not None:
            return client.scatter(arg, broadcast=True)
    return dask.delayed(arg)


def reduce_blocks(arrays, fn, *args):
    """``sum_blocks fn(block_1, ..., block_m, *args)`` over aligned row blocks, computed on the cluster.

    Parameters
    ----------
    arrays : list of dask.array.Array
        Checked row-block arrays with the same row chunks.
    fn : callable
        A module-level function (picklable) returning an additive partial result.
    *args
        Extra arguments (moment-sized arrays); each enters the graph once.

    Returns
    -------
    object
        The sum of the partial results (computed).
    """
    import dask

    rows = arrays[0].chunks[0]
    for other in arrays[1:]:
        if other.chunks[0] != rows:
            raise ValueError(
                f"The views must have the same row chunks (got {rows} and {other.chunks[0]}); rechunk them alike, "
                f"e.g. y = y.rechunk({{0: x.chunks[0]}}).")
    shared = [_share(arg) if isinstance(arg, np.ndarray) else arg for arg in args]
    per_array = [a.to_delayed().ravel() for a in arrays]
    parts = [dask.delayed(fn)(*blocks, *shared) for blocks in zip(*per_array)]
    return dask.compute(_tree_sum(parts))[0]


def iter_blocks(array):
    """Yield the row blocks of a Dask array one at a time (computed; at most one in memory).

    Parameters
    ----------
    array : dask.array.Array
        Row blocks.

    Yields
    ------
    ndarray or scipy.sparse matrix
        One computed block.
    """
    for block in array.to_delayed().ravel():
        yield block.compute()


# ----------------------------------------------------------------------------- partial sums of dense/sparse views
# Module-level (picklable) functions run on the workers; each checks its block (finite, numeric).


def as_float_block(block, name: str = "views (Dask block)", func: str = "ViewMoments"):
    """A Dask block as float64 (CSR or ndarray), refusing NaN/inf.

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix
        One row block.
    name, func : str
        Argument and function named in the error message.

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix

    Raises
    ------
    ValueError
        NaN or infinite entries.
    """
    import scipy.sparse as sp

    if sp.issparse(block):
        block = sp.csr_matrix(block, dtype=np.float64)
        values = block.data
    else:
        block = np.asarray(block, dtype=np.float64)
        values = block
    if not np.all(np.isfinite(values)):
        raise bad_argument(name, func, "finite", f"{int(np.size(values) - np.count_nonzero(np.isfinite(values)))} "
                           "NaN or infinite entries", describe=False)
    return block


def gram_partial(xa, xb, Q: np.ndarray) -> np.ndarray:
    """``X_a^T (X_b Q)`` of one row block.

    Parameters
    ----------
    xa, xb : ndarray or scipy.sparse matrix
        The same rows of two views.
    Q : ndarray, shape (d_b, r)

    Returns
    -------
    ndarray, shape (d_a, r)
    """
    xa, xb = as_float_block(xa), as_float_block(xb)
    return np.asarray(xa.T @ np.asarray(xb @ Q))


def cross3(Za: np.ndarray, Zb: np.ndarray, Zc: np.ndarray, block_bytes: int = 64 * 2**20) -> np.ndarray:
    """``sum_r Za[r] (x) Zb[r] (x) Zc[r]`` as a (ka, kb, kc) array, in bounded row blocks.

    Parameters
    ----------
    Za, Zb, Zc : ndarray, shapes (n, ka), (n, kb), (n, kc)
    block_bytes : int
        Bound on the (rows, ka * kb) intermediate.

    Returns
    -------
    ndarray, shape (ka, kb, kc)
    """
    ka, kb = Za.shape[1], Zb.shape[1]
    out = np.zeros((ka * kb, Zc.shape[1]))
    step = max(1, block_bytes // (8 * ka * kb))
    for start in range(0, Za.shape[0], step):
        stop = start + step
        out += (Za[start:stop, :, None] * Zb[start:stop, None, :]).reshape(-1, ka * kb).T @ Zc[start:stop]
    return out.reshape(ka, kb, Zc.shape[1])


def triples_partial(xa, xb, xc, Ua: np.ndarray, Ub: np.ndarray, Uc: np.ndarray) -> np.ndarray:
    """``sum_r (Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)`` over one row block.

    Parameters
    ----------
    xa, xb, xc : ndarray or scipy.sparse matrix
        The same rows of three views.
    Ua, Ub, Uc : ndarray
        Projections, (d_v, k_v).

    Returns
    -------
    ndarray, shape (ka, kb, kc)
    """
    Za, Zb, Zc = (np.asarray(as_float_block(x) @ U) for x, U in ((xa, Ua), (xb, Ub), (xc, Uc)))
    return cross3(Za, Zb, Zc)


# ----------------------------------------------------------------------------- one long sequence as three views


def _window(block, following, need: int):
    """``block`` followed by the first ``need`` symbols of the next block(s) (the triples crossing the boundary)."""
    tail = np.concatenate([np.asarray(f) for f in following])[:need] if following else np.zeros(0, dtype=np.int64)
    return np.concatenate([np.asarray(block), tail])


def _one_hot_shift(window, shift: int, n_rows: int, n_symbols: int):
    """One-hot rows of ``window[shift : shift + n_rows]`` (CSR), refusing symbols outside ``0..n_symbols-1``."""
    import scipy.sparse as sp

    symbols = np.asarray(window[shift : shift + n_rows])
    if symbols.dtype.kind not in "iu":
        if symbols.dtype.kind != "f" or np.any(symbols != np.round(symbols)):
            raise bad_argument("sequences", "hmm.spectral", "integer symbols", f"dtype {symbols.dtype}", kind=TypeError,
                               describe=False)
        symbols = symbols.astype(np.int64)
    if symbols.size and (symbols.min() < 0 or symbols.max() >= n_symbols):
        raise bad_argument("sequences", "hmm.spectral", f"symbols in 0..{n_symbols - 1}",
                           f"symbols from {symbols.min()} to {symbols.max()}", describe=False)
    return sp.csr_matrix((np.ones(n_rows), symbols, np.arange(n_rows + 1)), shape=(n_rows, n_symbols))


def sliding_one_hot_views(symbols, n_symbols: int, func: str = "hmm.spectral"):
    """The three one-hot views of all sliding triples of ONE long sequence held as a 1-D Dask array.

    Block ``j`` of view ``i`` holds the one-hot rows of ``x_{t+i}`` for the
    triples starting in block ``j`` of the sequence; the two symbols that a
    block's last triples need from the next block are read by that block's
    task, so no symbol is duplicated on the client and the views share the
    row chunks of the sequence (minus the last two positions).

    Parameters
    ----------
    symbols : dask.array.Array
        1-D integer symbols ``0..n_symbols-1`` of length T >= 3.
    n_symbols : int
        V.
    func : str
        Function named in error messages.

    Returns
    -------
    views : list of 3 dask.array.Array
        (T - 2, V) CSR row blocks.
    first : ndarray, shape (V,)
        One-hot first symbol.
    n_triples : int
        T - 2.

    Raises
    ------
    ValueError
        Not one-dimensional, shorter than 3, or unknown chunk sizes.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
       learning latent variable models", JMLR 2014, Prop. 3.4 (triples of an HMM as three views).
    """
    import dask
    import dask.array as da
    import scipy.sparse as sp

    if symbols.ndim != 1:
        raise bad_argument("sequences", func, "a one-dimensional Dask array (one long sequence)",
                           f"{symbols.ndim} dimensions", describe=False)
    sizes = symbols.chunks[0]
    if any(math.isnan(s) for s in sizes):
        raise bad_argument("sequences", func, "a Dask array with known chunk sizes (call compute_chunk_sizes())",
                           "unknown chunk sizes", describe=False)
    T = int(sum(sizes))
    if T < 3:
        raise bad_argument("sequences", func, "a sequence of length >= 3 (for the triples)", f"length {T}",
                           describe=False)
    blocks = list(symbols.to_delayed().ravel())
    starts = np.concatenate([[0], np.cumsum(sizes)])
    meta = sp.csr_matrix((0, n_symbols))
    views = [[], [], []]
    for j, block in enumerate(blocks):
        n_rows = min(int(starts[j + 1]), T - 2) - int(starts[j])
        if n_rows <= 0:
            continue
        # The (at most two) symbols after this block may span several tiny blocks.
        following, have, m = [], 0, j + 1
        while have < 2 and m < len(blocks):
            following.append(blocks[m])
            have += sizes[m]
            m += 1
        window = dask.delayed(_window)(block, following, 2)
        for i in range(3):
            views[i].append(da.from_delayed(dask.delayed(_one_hot_shift)(window, i, n_rows, n_symbols),
                                            shape=(n_rows, n_symbols), dtype=np.float64, meta=meta))
    views = [da.concatenate(v) if len(v) > 1 else v[0] for v in views]
    first_symbol = int(symbols[0].compute())
    if not 0 <= first_symbol < n_symbols:
        raise bad_argument("sequences", func, f"symbols in 0..{n_symbols - 1}", f"first symbol {first_symbol}",
                           describe=False)
    first = np.zeros(n_symbols)
    first[first_symbol] = 1.0
    return views, first, T - 2


# ----------------------------------------------------------------------------- dense data with a constant column (GMM)


class _RowStats:
    """Count, sum, min and max of dense row blocks (min/max merge by min/max)."""

    def __init__(self, n, total, low, high):
        self.n, self.total, self.low, self.high = n, total, low, high

    def __add__(self, other):
        return _RowStats(self.n + other.n, self.total + other.total, np.minimum(self.low, other.low),
                         np.maximum(self.high, other.high))


def _row_stats_partial(x):
    x = np.asarray(as_float_block(x, "x (Dask block)", "gmm.spectral"))
    return _RowStats(x.shape[0], x.sum(axis=0), x.min(axis=0), x.max(axis=0))


def _centred_gram_partial(x, mean):
    xc = np.asarray(x, dtype=np.float64) - mean
    return xc.T @ xc


def centred_stats(x):
    """``(n, mean, centred covariance, per-column range)`` of a dense Dask array, in two passes on the workers.

    Parameters
    ----------
    x : dask.array.Array
        (N, d) dense row blocks (checked).

    Returns
    -------
    (int, ndarray (d,), ndarray (d, d), ndarray (d,))
        The covariance divides by N; centring before the second pass keeps
        it as accurate as the in-memory two-pass formula.
    """
    stats = reduce_blocks([x], _row_stats_partial)
    mean = stats.total / stats.n
    cov = reduce_blocks([x], _centred_gram_partial, mean) / stats.n
    return int(stats.n), mean, cov, stats.high - stats.low


def _augment(x, mean, c):
    x = np.asarray(x, dtype=np.float64)
    return np.hstack([x - mean, np.full((x.shape[0], 1), c)])


def augmented_gram_partial(x, mean: np.ndarray, c: float, Q: np.ndarray) -> np.ndarray:
    """``A^T (A Q)`` of one block of ``A = [x - mean, c]`` (the GMM moments' centred data with a constant column).

    Parameters
    ----------
    x : ndarray
        A dense row block.
    mean : ndarray, shape (d,)
    c : float
    Q : ndarray, shape (d + 1, r)

    Returns
    -------
    ndarray, shape (d + 1, r)
    """
    a = _augment(x, mean, c)
    return a.T @ (a @ Q)


def augmented_cube_partial(x, mean: np.ndarray, c: float, W: np.ndarray) -> np.ndarray:
    """``sum_r (W^T a_r)^(x)3`` of one block of ``A = [x - mean, c]``.

    Parameters
    ----------
    x : ndarray
    mean : ndarray, shape (d,)
    c : float
    W : ndarray, shape (d + 1, k)

    Returns
    -------
    ndarray, shape (k, k, k)
    """
    Y = _augment(x, mean, c) @ W
    return cross3(Y, Y, Y)


def augmented_m1_partial(x, mean: np.ndarray, c: float, P: np.ndarray) -> np.ndarray:
    """``sum_r a_r ||P^T (x_r - mean)||^2`` of one block (the ``M1'`` moment of Anandkumar et al. 2014, Thm 3.3).

    Parameters
    ----------
    x : ndarray
    mean : ndarray, shape (d,)
    c : float
    P : ndarray, shape (d, m)

    Returns
    -------
    ndarray, shape (d + 1,)
    """
    a = _augment(x, mean, c)
    return a.T @ np.sum((a[:, :-1] @ P) ** 2, axis=1)
