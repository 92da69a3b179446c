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
    """True for a ``dask.array.Array`` (checked without importing Dask)."""
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
    shared = [dask.delayed(arg) if isinstance(arg, np.ndarray) else arg for arg in args]
    per_array = [a.to_delayed().ravel() for a in arrays]
    parts = [dask.delayed(fn)(*blocks, *shared) for blocks in zip(*per_array)]
    return dask.compute(_tree_sum(parts))[0]


def iter_blocks(array):
    """Yield the row blocks of a Dask array one at a time (computed; at most one in memory)."""
    for block in array.to_delayed().ravel():
        yield block.compute()
