"""The Dask backend: moment passes over a Dask array of row blocks, computed where the blocks live.

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

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_count_matrix
from specinit.engine.backends import PASSES, FirstOrderStats, Passes, WhitenedStats
from specinit.engine.backends.numpy import NumpyPasses, cross3, first_order_stats, m2_partial, whitened_stats
from specinit.engine.sources import as_float_block

if TYPE_CHECKING:
    import dask.array

    from specinit.engine.sources import CountSource, ViewSource

__all__ = ["DaskPasses", "reduce_blocks"]


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


def reduce_blocks(arrays: Sequence[dask.array.Array], fn: Callable[..., Any], *args: Any) -> Any:
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



# ----------------------------------------------------------------------------- count blocks


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
    return _TaggedStats(first_order_stats(check_count_matrix(block, "counts (Dask block)"), weighting),
                        frozenset([_block_kind(block)]))


def _checked_m2_partial(block, weighting: str, Q: np.ndarray) -> np.ndarray:
    return m2_partial(check_count_matrix(block, "counts (Dask block)"), weighting, Q)


def _checked_whitened_stats(block, W: np.ndarray, weighting: str) -> WhitenedStats:
    return whitened_stats(check_count_matrix(block, "counts (Dask block)"), W, weighting)


@dataclass(frozen=True)
class _PlacedDask:
    arrays: list
    weighting: str | None = None


class DaskPasses(Passes):
    """Passes as Dask tasks next to the row blocks; partial sums added in a binary tree of tasks.

    Parameters
    ----------
    n_threads, chunk_rows : optional
        Accepted for a uniform backend signature (the cluster decides).
    """

    name = "dask"
    implements = PASSES

    def __init__(self, n_threads: int | None = None, chunk_rows: int | None = None) -> None:
        pass

    #: The host's kernel: the whitened arrays it multiplies are on the client.
    pair_products = NumpyPasses.pair_products

    def place_counts(self, source: CountSource, weighting: str) -> _PlacedDask:
        return _PlacedDask([source.dask], weighting)

    def count_first(self, placed: _PlacedDask) -> FirstOrderStats:
        tagged = reduce_blocks(placed.arrays, _tagged_first_order, placed.weighting)
        if len(tagged.kinds) > 1:
            raise bad_argument("counts", None, "a Dask array whose blocks are all scipy.sparse or all dense",
                               f"blocks of types {sorted(tagged.kinds)}", describe=False)
        return tagged.stats

    def count_m2(self, placed: _PlacedDask, Q: np.ndarray) -> np.ndarray:
        return reduce_blocks(placed.arrays, _checked_m2_partial, placed.weighting, Q)

    def count_whitened(self, placed: _PlacedDask, W: np.ndarray) -> WhitenedStats:
        return reduce_blocks(placed.arrays, _checked_whitened_stats, W, placed.weighting)

    def place_views(self, source: ViewSource) -> _PlacedDask:
        return _PlacedDask(list(source.views))

    def gram(self, placed: _PlacedDask, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        return reduce_blocks([placed.arrays[a], placed.arrays[b]], gram_partial, Q)

    def triples(self, placed: _PlacedDask, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray,
                Uc: np.ndarray) -> np.ndarray:
        return reduce_blocks([placed.arrays[v] for v in (a, b, c)], triples_partial, Ua, Ub, Uc)
