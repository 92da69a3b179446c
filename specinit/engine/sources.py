"""Data in, validated once per kind: count matrices, rows, views; in memory, as chunks, streams or Dask blocks.

Every pass over data reads it through a source built here at the public
entry, so each data set is checked once (numeric, finite, the right shape;
counts non-negative integers) whatever backend runs the passes:

* :class:`CountSource` -- an (N, V) count matrix (scipy.sparse, dense, a JAX
  array), a list of row chunks, a callable returning an iterator of chunks
  (streams read from disk), or a ``dask.array`` of row blocks;
* :class:`ViewSource` -- ``l >= 1`` views with the same rows, (N, d_v)
  dense or scipy.sparse each, or all ``dask.array`` of row blocks with the
  same row chunks.

A source is re-iterable: each pass asks it for fresh chunks. Dask sources
are validated block by block where the blocks are computed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeAlias

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_count_matrix, check_magnitude, checked_sparse

if TYPE_CHECKING:
    import dask.array
    import jax
    from numpy.typing import ArrayLike

#: An (N, V) matrix of counts, or one of its row chunks.
CountMatrix: TypeAlias = "ArrayLike | sp.sparray | sp.spmatrix | jax.Array"
#: Every form of count corpus the engine reads (:class:`CountSource`).
Counts: TypeAlias = ("CountMatrix | dask.array.Array | Sequence[CountMatrix] | Callable[[], Iterator[CountMatrix]] "
                     "| CountSource")

__all__ = ["CountSource", "ViewSource", "as_float_block", "check_row_blocks", "check_rows", "from_jax",
           "is_dask_array", "is_jax_array", "row_ranges", "row_view", "transpose_view"]

_ROWS_PER_CHUNK = 65_536  # documents per pass-chunk of an in-memory matrix (bounds the (rows, k) products)
_BLOCK_BYTES = 64 * 2**20  # bound on the dense row blocks of an in-memory view pass
_PRODUCT_WIDTH = 128  # the widest product X @ Q a pass forms from a sparse view block (k + oversample columns)


def is_dask_array(value: object) -> bool:
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


def is_jax_array(value: object) -> bool:
    """True for a JAX array (checked without importing JAX).

    Parameters
    ----------
    value : object
        Anything.

    Returns
    -------
    bool
    """
    return type(value).__module__.split(".")[0] in ("jax", "jaxlib") and hasattr(value, "__array__")


def _compressed_view(cls, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape) -> sp.spmatrix:
    """A CSR/CSC matrix on the given arrays, without the copy SciPy's constructor makes of a small view.

    SciPy's constructor copies ``data`` and ``indices`` when they view less
    than half of a larger array (``scipy._lib._util._prune_array``): every
    row chunk of a pass would copy its share of the corpus. The arrays are
    set on an empty matrix of the same shape instead (they are consistent
    by construction: slices of a valid matrix).
    """
    out = cls(shape, dtype=data.dtype)
    out.data, out.indices, out.indptr = data, indices, indptr
    return out


def row_view(matrix: sp.csr_matrix, start: int, stop: int) -> sp.csr_matrix:
    """Rows ``start:stop`` of a CSR matrix sharing its data and indices (no copy).

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix
    start, stop : int

    Returns
    -------
    scipy.sparse.csr_matrix
    """
    lo, hi = matrix.indptr[start], matrix.indptr[stop]
    indptr = matrix.indptr[start : stop + 1] - lo
    return _compressed_view(sp.csr_matrix, matrix.data[lo:hi], matrix.indices[lo:hi], indptr,
                            (stop - start, matrix.shape[1]))


def row_ranges(indptr: np.ndarray, max_nnz: int, max_rows: int | None = None) -> Iterator[tuple[int, int]]:
    """Consecutive row ranges of a CSR matrix with at most ``max_nnz`` non-zeros and ``max_rows`` rows.

    A single row with more than ``max_nnz`` non-zeros gets a range of its own.

    Parameters
    ----------
    indptr : ndarray
        The CSR row pointer.
    max_nnz : int
    max_rows : int, optional
        Default: no bound on the rows.

    Yields
    ------
    (int, int)
        ``(start, stop)`` covering every row once, in order.
    """
    n = indptr.size - 1
    max_rows = n if max_rows is None else max_rows
    start = 0
    while start < n:
        stop = int(np.searchsorted(indptr, indptr[start] + max_nnz, side="right")) - 1
        stop = min(max(stop, start + 1), start + max_rows, n)
        yield start, stop
        start = stop


def transpose_view(matrix: sp.csr_matrix) -> sp.csc_matrix:
    """``matrix.T`` as a CSC matrix on the same arrays (no copy, also for a :func:`row_view`).

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix

    Returns
    -------
    scipy.sparse.csc_matrix
    """
    return _compressed_view(sp.csc_matrix, matrix.data, matrix.indices, matrix.indptr, matrix.shape[::-1])


def from_jax(counts: jax.Array, name: str, func: str | None = None) -> np.ndarray:
    """A JAX array of counts as a NumPy array, refusing integer counts that may have overflowed.

    JAX stores integers in int32 unless x64 is enabled, and counts built in
    a narrow integer type wrap around silently. An entry at the dtype's
    maximum (saturation) or a negative entry (wrap-around) is refused with
    that explanation.

    Parameters
    ----------
    counts : jax.Array
        (N, V) counts.
    name : str
        Argument named in the error message.
    func : str, optional
        Function named in the error message (default: the public entry).

    Returns
    -------
    numpy.ndarray
        The counts on the host.

    Raises
    ------
    ValueError
        Integer counts at the dtype's maximum or negative.
    """
    array = np.asarray(counts)
    if array.dtype.kind in "iu" and array.size:
        top = np.iinfo(array.dtype).max
        if array.max() >= top:
            raise bad_argument(
                name, func,
                f"counts below the maximum of their integer dtype {array.dtype} ({top}): an entry at the maximum "
                "means the counts have probably overflowed; build them as int64 or float64 (with NumPy, or "
                "inside jax.enable_x64(True))",
                f"an entry equal to {top}", describe=False)
        if array.min() < 0:
            raise bad_argument(
                name, func,
                f"non-negative counts (negative entries in a JAX {array.dtype} array usually mean integer overflow; "
                "build the counts as int64 or float64)", f"minimum {array.min()}", describe=False)
    return array


def check_row_blocks(array: dask.array.Array, name: str, func: str | None = None) -> dask.array.Array:
    """Check that a Dask array is an (N, d) array of row blocks with known sizes.

    Parameters
    ----------
    array : dask.array.Array
    name : str
        Argument named in the error messages.
    func : str, optional
        Function named in the error messages (default: the public entry).

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


def as_float_block(block: np.ndarray | sp.sparray | sp.spmatrix, name: str = "views (Dask block)",
                   func: str | None = None) -> np.ndarray | sp.csr_matrix:
    """A row block as float64 (CSR or ndarray), refusing NaN/inf.

    Parameters
    ----------
    block : ndarray or scipy.sparse matrix
        One row block.
    name : str
        Argument named in the error message.
    func : str, optional
        Function named in the error message (default: the public entry).

    Returns
    -------
    ndarray or scipy.sparse.csr_matrix

    Raises
    ------
    ValueError
        NaN or infinite entries.
    """
    if sp.issparse(block):
        block = checked_sparse(block, name, func).astype(np.float64)
        values = block.data
    else:
        block = np.asarray(block, dtype=np.float64)
        values = block
    if not np.all(np.isfinite(values)):
        raise bad_argument(name, func, "finite", f"{int(np.size(values) - np.count_nonzero(np.isfinite(values)))} "
                           "NaN or infinite entries", describe=False)
    return block


def _iter_dask_blocks(array) -> Iterator:
    for block in array.to_delayed().ravel():
        yield block.compute()


class CountSource:
    """An (N, V) count corpus, validated once, read chunk by chunk by every pass.

    Parameters
    ----------
    counts : matrix, JAX array, Dask array, sequence of matrices, or callable
        An (N, V) matrix (scipy.sparse or dense; a JAX array is copied to
        the host after an overflow check), a sequence of such row chunks, a
        zero-argument callable returning an iterator of chunks (called once
        per pass: streams read from disk), or a ``dask.array`` of row blocks
        (validated block by block where computed). A bare iterator cannot be
        read twice and is refused.
    name : str
        The argument named in errors.

    Attributes
    ----------
    kind : {"matrix", "chunks", "stream", "dask"}
    matrix : scipy.sparse.csr_matrix or None
        The validated matrix (``kind == "matrix"``).
    dask : dask.array.Array or None
        The row blocks (``kind == "dask"``).

    Raises
    ------
    TypeError
        A bare iterator, or non-numeric counts.
    ValueError
        Bad counts (negative, non-integer, NaN), chunks of different widths,
        a Dask array chunked along the columns.
    """

    def __init__(self, counts: Any, name: str = "counts") -> None:
        self.name = name
        self.matrix = self.dask = None
        self._chunks: list | None = None
        self._stream: Callable | None = None
        self._stream_rows: int | None = None
        if is_jax_array(counts):
            counts = from_jax(counts, name)
        if is_dask_array(counts):
            self.kind, self.dask = "dask", check_row_blocks(counts, name)
            self._width = counts.shape[1]
        elif sp.issparse(counts) or isinstance(counts, np.ndarray):
            self.kind, self.matrix = "matrix", check_count_matrix(counts, name)
            self._width = self.matrix.shape[1]
        elif isinstance(counts, Iterator):
            raise bad_argument(
                name, None,
                "an (N, V) matrix, a list of row-chunks or a callable returning an iterator of chunks "
                "(a one-shot iterator cannot be read in the passes the method needs)",
                type(counts).__name__, kind=TypeError, describe=False)
        elif callable(counts):
            self.kind, self._stream, self._width = "stream", counts, None
        elif isinstance(counts, (list, tuple)) and counts and all(
                sp.issparse(c) or (isinstance(c, np.ndarray) and c.ndim == 2) for c in counts):
            self.kind = "chunks"
            self._chunks = [check_count_matrix(c, f"{name} (chunk {i})") for i, c in enumerate(counts)]
            widths = {c.shape[1] for c in self._chunks}
            if len(widths) != 1:
                raise bad_argument(name, None, "chunks with the same number of columns", sorted(widths))
            self._width = widths.pop()
        else:
            self.kind, self.matrix = "matrix", check_count_matrix(counts, name)
            self._width = self.matrix.shape[1]

    @property
    def in_memory(self) -> bool:
        """Whether the counts are one matrix held here."""
        return self.kind == "matrix"

    @property
    def n_features(self) -> int | None:
        """V (None for a stream not yet read)."""
        return self._width

    def chunks(self, max_rows: int | None = None, n_splits: int = 1) -> Iterator[sp.csr_matrix]:
        """A fresh iterator over validated CSR chunks (one pass).

        An in-memory matrix is cut into ``n_splits`` or more row views of at
        most ``max_rows`` rows (no copy), so a pass can run on several threads.

        Parameters
        ----------
        max_rows : int, optional
            Largest number of rows in one chunk of an in-memory matrix.
        n_splits : int
            Smallest number of chunks an in-memory matrix is cut into.

        Yields
        ------
        scipy.sparse.csr_matrix
        """
        if self.kind == "matrix":
            matrix = self.matrix
            rows = max_rows or max(1, min(_ROWS_PER_CHUNK, -(-matrix.shape[0] // n_splits)))
            for start in range(0, matrix.shape[0], rows):
                yield row_view(matrix, start, min(start + rows, matrix.shape[0]))
        elif self.kind == "chunks":
            yield from self._chunks
        elif self.kind == "dask":
            for i, block in enumerate(_iter_dask_blocks(self.dask)):
                yield self._same_width(check_count_matrix(block, f"{self.name} (Dask block {i})"), f"Dask block {i}")
        else:
            n_rows = 0
            for i, chunk in enumerate(self._stream()):
                chunk = check_count_matrix(chunk, f"{self.name} (chunk {i})")
                if self._width is None:
                    self._width = chunk.shape[1]
                n_rows += chunk.shape[0]
                yield self._same_width(chunk, f"chunk {i}")
            if self._stream_rows is None:
                self._stream_rows = n_rows
            elif n_rows != self._stream_rows:
                raise bad_argument(self.name, None, f"a stream that yields the same documents on every pass "
                                   f"({self._stream_rows} rows on the first)", f"{n_rows} rows on a later pass",
                                   describe=False)

    def _same_width(self, chunk: sp.csr_matrix, where: str) -> sp.csr_matrix:
        """``chunk``, refused when its number of columns is not the source's."""
        if chunk.shape[1] != self._width:
            raise bad_argument(self.name, None, f"chunks with the same number of columns ({self._width})",
                               f"{where} with {chunk.shape[1]}", describe=False)
        return chunk

    def rows(self, indices: np.ndarray) -> sp.csr_matrix:
        """The documents at the sorted global row ``indices``, whatever the chunking (a Dask array reads only their blocks).

        Parameters
        ----------
        indices : sorted int array

        Returns
        -------
        scipy.sparse.csr_matrix
        """
        indices = np.asarray(indices, dtype=np.int64)
        if self.kind == "matrix":
            return self.matrix[indices]
        if self.kind == "dask":
            return self._same_width(check_count_matrix(self.dask[indices].compute(), f"{self.name} (Dask rows)"),
                                    "the Dask rows")
        parts, offset = [], 0
        for chunk in self.chunks():
            stop = offset + chunk.shape[0]
            lo, hi = np.searchsorted(indices, [offset, stop])
            if hi > lo:
                parts.append(chunk[indices[lo:hi] - offset])
            offset = stop
        return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, self._width or 0))


def _check_view(value, name: str):
    if sp.issparse(value):
        matrix = checked_sparse(value, name).astype(np.float64)
        values = matrix.data
    else:
        if value is None or isinstance(value, (str, bytes)):
            raise bad_argument(name, None, "an (N, d) array or scipy.sparse matrix", value, kind=TypeError)
        matrix = np.asarray(value)
        if matrix.dtype == object or matrix.dtype.kind not in "biuf":
            raise bad_argument(name, None, "a numeric (N, d) array", matrix, kind=TypeError)
        matrix = matrix.astype(np.float64, copy=False)
        values = matrix
    if matrix.ndim != 2 or matrix.shape[0] == 0 or matrix.shape[1] == 0:
        raise bad_argument(name, None, "a non-empty two-dimensional (N, d) array", matrix)
    finite = np.isfinite(values)
    if not np.all(finite):
        if isinstance(matrix, np.ndarray) and matrix.ndim == 2:
            rows = np.flatnonzero(~finite.all(axis=1))
            listed = ", ".join(str(r) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
            found = f"NaN or infinite values in {rows.size} row(s): row {listed}"
        else:
            found = f"{int(values.size - np.count_nonzero(finite))} NaN or infinite entries"
        raise bad_argument(name, None, "finite (drop or impute rows with NaN or infinite values)", found,
                           describe=False)
    return matrix


class ViewSource:
    """Views with the same rows (observations), validated once.

    Parameters
    ----------
    views : sequence of arrays, scipy.sparse matrices or Dask arrays, each (N, d_v)
        All in memory (dense or sparse), or all ``dask.array`` of row blocks
        with the same row chunks (scipy.sparse or dense chunks).
    name : str
        The argument named in errors (``"views"``).
    minimum : int
        Fewest views accepted.

    Attributes
    ----------
    views : list
        float64 arrays / CSR matrices, or the Dask arrays.
    kind : {"memory", "dask"}

    Raises
    ------
    ValueError
        Too few views, different numbers of rows, empty or non-finite views,
        Dask views chunked along columns or with different row chunks.
    TypeError
        Non-numeric views, a bare array instead of a list, or a mix of Dask
        and in-memory views.
    """

    def __init__(self, views: Sequence[ArrayLike | sp.sparray | sp.spmatrix | dask.array.Array], name: str = "views",
                 minimum: int = 3) -> None:
        self.name = name
        if isinstance(views, np.ndarray) or sp.issparse(views) or is_dask_array(views) or not hasattr(views, "__len__"):
            raise bad_argument(name, None, "a list of (N, d_v) arrays (one per view)", views, kind=TypeError)
        if len(views) < minimum:
            raise bad_argument(name, None, f"a list of at least {minimum} views", f"{len(views)} views", describe=False)
        lazy = [is_dask_array(v) for v in views]
        if any(lazy) and not all(lazy):
            raise bad_argument(name, None, "all Dask arrays or all in-memory arrays",
                               f"Dask views at positions {[i for i, x in enumerate(lazy) if x]} only",
                               kind=TypeError, describe=False)
        self.kind = "dask" if lazy and all(lazy) else "memory"
        if self.kind == "dask":
            single = len(views) == 1 and minimum == 1
            self.views = [check_row_blocks(v, name if single else f"{name}[{i}]") for i, v in enumerate(views)]
        else:
            single = len(views) == 1 and minimum == 1
            self.views = [_check_view(v, name if single else f"{name}[{i}]") for i, v in enumerate(views)]
        rows = [v.shape[0] for v in self.views]
        if len(set(rows)) != 1:
            raise bad_argument(name, None, "views with the same number of observations (rows)", f"row counts {rows}",
                               describe=False)
        if self.kind == "dask" and len({v.chunks[0] for v in self.views}) != 1:
            raise bad_argument(name, None, "Dask views with the same row chunks (rechunk them alike, e.g. "
                               "y = y.rechunk({0: x.chunks[0]}))", [v.chunks[0] for v in self.views], describe=False)
        self.n_observations = int(rows[0])

    @property
    def dims(self) -> tuple[int, ...]:
        """Number of columns of every view."""
        return tuple(int(v.shape[1]) for v in self.views)

    def blocks(self, indices: Sequence[int]) -> Iterator[tuple]:
        """Aligned row blocks of ``views[i] for i in indices`` (in memory: bounded dense slices; Dask: computed blocks).

        Parameters
        ----------
        indices : sequence of int
            The views wanted.

        Yields
        ------
        tuple
            One float64 block per index, the same rows.
        """
        chosen = [self.views[i] for i in indices]
        if self.kind == "dask":
            for parts in zip(*(_iter_dask_blocks(v) for v in chosen)):
                yield tuple(as_float_block(p) for p in parts)
            return
        # Dense views are sliced, and the products of a sparse block with the pass's (d, r) matrix are dense.
        width = sum(min(v.shape[1], _PRODUCT_WIDTH) if sp.issparse(v) else v.shape[1] for v in chosen)
        step = max(1, _BLOCK_BYTES // (8 * max(width, 1)))
        if step >= self.n_observations:
            yield tuple(chosen)
            return
        for start in range(0, self.n_observations, step):
            stop = min(start + step, self.n_observations)
            yield tuple(row_view(v, start, stop) if sp.issparse(v) else v[start:stop] for v in chosen)

    def map(self, fn: Callable, width: int) -> "ViewSource":
        """A one-view source of ``fn(block)`` for the row blocks of the first view (lazy for Dask views).

        Parameters
        ----------
        fn : callable
            ``(n, d) float array -> (n, width) float array``, row by row.
        width : int
            Columns of the result.

        Returns
        -------
        ViewSource
        """
        x = self.views[0]
        if self.kind == "dask":
            out = x.map_blocks(lambda block: fn(np.asarray(as_float_block(block, "x (Dask block)"))),
                               chunks=(x.chunks[0], (width,)), dtype=np.float64)
        else:
            out = fn(x.toarray() if sp.issparse(x) else x)
        return ViewSource([out], self.name, minimum=1)

    def join(self, *others: "ViewSource") -> "ViewSource":
        """The views of this source followed by those of ``others`` (same rows).

        Parameters
        ----------
        *others : ViewSource

        Returns
        -------
        ViewSource
        """
        return ViewSource([v for s in (self, *others) for v in s.views], self.name, minimum=1)

    def summary(self) -> tuple[float, np.ndarray, np.ndarray]:
        """``(max |x|, column means, column ranges)`` of the first view (one reduction; Dask on the cluster).

        Returns
        -------
        (float, ndarray, ndarray)
        """
        x = self.views[0]
        if self.kind == "dask":
            import dask

            top, low, high = dask.compute(abs(x).max(), x.min(axis=0), x.max(axis=0))
            scale = float(top) if top > 0 else 1.0
            mean = np.asarray((x / scale).mean(axis=0).compute()) * scale
            return float(top), mean, np.asarray(high - low)
        dense = x.toarray() if sp.issparse(x) else x
        top = float(np.max(np.abs(dense)))
        scale = top if top > 0 else 1.0
        return top, (dense / scale).mean(axis=0) * scale, np.ptp(dense, axis=0)


def check_rows(x: ArrayLike | sp.sparray | sp.spmatrix, name: str = "x", min_columns: int = 1, columns: str = "k",
               min_rows: int = 2) -> np.ndarray:
    """``x`` as a finite dense float64 (N, d) array with N >= ``min_rows`` and at least ``min_columns`` columns.

    Parameters
    ----------
    x : array-like or scipy.sparse matrix
    name : str
        The argument named in errors.
    min_columns : int
        Fewest columns (named ``columns`` in the error: ``"k"``, ``"3 k"``).
    columns : str
    min_rows : int
        Fewest rows (2 to fit, 1 to score).

    Returns
    -------
    ndarray

    Raises
    ------
    TypeError
        Not numeric.
    ValueError
        Not two-dimensional, fewer than ``min_rows`` rows or ``min_columns`` columns, NaN or infinite values (rows
        named).
    """
    if x is None or isinstance(x, (str, bytes)):
        raise bad_argument(name, None, "an (N, d) numeric array", x, kind=TypeError)
    x = ViewSource([x], name, minimum=1).views[0]
    if x.shape[0] < min_rows:
        raise bad_argument(name, None, f"an (N, d) array with N >= {min_rows} rows", x)
    if x.shape[1] < min_columns:
        raise bad_argument(name, None, f"an array with d >= {columns} columns ({columns} = {min_columns})", x)
    x = np.asarray(x.toarray() if sp.issparse(x) else x)
    check_magnitude(x, name)
    return x
