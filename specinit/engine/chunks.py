"""Count input for the moment passes: validated CSR chunks from matrices, chunk lists, streams or JAX arrays.

Every pass of :class:`specinit.engine.moments.CountMoments` reads its input
through :func:`count_chunks` (re-iterable, row views of an in-memory matrix
so that passes can run on threads), after :func:`resolve_backend` picked the
arithmetic backend.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_choice, check_count_matrix

__all__ = ["BACKENDS", "count_chunks", "from_jax", "resolve_backend"]

BACKENDS = ("numpy", "numba", "jax")
_ROWS_PER_CHUNK = 65_536  # documents per pass-chunk of an in-memory matrix (bounds the (rows, k) products)


def _row_view(matrix: sp.csr_matrix, start: int, stop: int) -> sp.csr_matrix:
    """Rows ``start:stop`` of a CSR matrix sharing its data and indices (no copy)."""
    lo, hi = matrix.indptr[start], matrix.indptr[stop]
    indptr = matrix.indptr[start : stop + 1] - lo
    return sp.csr_matrix((matrix.data[lo:hi], matrix.indices[lo:hi], indptr), shape=(stop - start, matrix.shape[1]), copy=False)


def resolve_backend(backend: str | None, func: str) -> str:
    """``"numpy"`` or ``"jax"``; ``None`` picks JAX when its default device is an accelerator (GPU/TPU).

    Parameters
    ----------
    backend : {"numpy", "numba", "jax"} or None
        The requested backend.
    func : str
        Function named in the error message.

    Returns
    -------
    str
        ``"numpy"``, ``"numba"`` or ``"jax"``.

    Raises
    ------
    ValueError
        An unknown backend name, or ``"numba"`` without Numba installed.
    """
    if backend is None:
        from specinit.engine import (
            jax_passes,  # lazy: the engine does not import JAX at module level
        )

        return "jax" if jax_passes.accelerator_present() else "numpy"
    backend = check_choice(backend, "backend", func, BACKENDS)
    if backend == "numba":
        try:
            import numba  # noqa: F401
        except ImportError:
            raise bad_argument("backend", func, "'numpy' or 'jax' (backend='numba' needs Numba: "
                               "pip install \"specinit[fast]\")", backend) from None
    return backend


def _is_jax_array(value) -> bool:
    return type(value).__module__.split(".")[0] in ("jax", "jaxlib") and hasattr(value, "__array__")


def from_jax(counts, name: str, func: str) -> np.ndarray:
    """A JAX array of counts as a NumPy array, refusing integer counts that may have overflowed.

    JAX stores integers in int32 unless x64 is enabled, and counts built in
    a narrow integer type wrap around silently. An entry at the dtype's
    maximum (saturation) or a negative entry (wrap-around) is refused with
    that explanation. The moments themselves are always accumulated in
    float64, so large documents (``n (n-1) (n-2)`` beyond int32) are safe.

    Parameters
    ----------
    counts : jax.Array
        (N, V) counts.
    name, func : str
        Argument and function named in the error message.

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


def count_chunks(counts: Any, func: str, max_rows: int | None = None, n_splits: int = 1) -> Callable[[], Iterator[sp.csr_matrix]]:
    """Normalise count input to a re-iterable source of validated CSR chunks.

    ``counts`` is an (N, V) matrix (scipy.sparse or dense), a sequence of
    such row-chunks, or a zero-argument callable returning an iterator of
    chunks (for streams read from disk; it is called once per pass). A bare
    iterator or generator cannot be read twice and is rejected. An
    in-memory matrix is cut into ``n_splits`` or more row views (at most
    ``max_rows`` rows each), so that a pass can run on several threads.

    Parameters
    ----------
    counts : matrix, JAX array, Dask array, sequence of matrices, or callable
        The input, as above.
    func : str
        The public function named in errors.
    max_rows : int, optional
        Largest number of rows in one chunk of an in-memory matrix.
    n_splits : int
        Smallest number of chunks an in-memory matrix is cut into.

    Returns
    -------
    callable
        Each call returns a fresh iterator over validated CSR chunks.

    Raises
    ------
    TypeError
        A bare iterator or generator, or a non-numeric input.
    ValueError
        Chunks with different numbers of columns, bad counts, a Dask array
        chunked along the columns, or JAX integer counts that overflowed.

    Notes
    -----
    A JAX array is copied to the host (:func:`from_jax`); a ``dask.array``
    of row blocks is read one block at a time (computed where it lives).
    """
    from specinit.engine.dask_passes import check_row_blocks, is_dask_array, iter_blocks

    if _is_jax_array(counts):
        counts = from_jax(counts, "counts", func)
    if is_dask_array(counts):
        array = check_row_blocks(counts, "counts", func)

        def blocks() -> Iterator[sp.csr_matrix]:
            for i, block in enumerate(iter_blocks(array)):
                yield check_count_matrix(block, f"counts (Dask block {i})", func)

        return blocks
    if sp.issparse(counts) or isinstance(counts, np.ndarray):
        matrix = check_count_matrix(counts, "counts", func)
        rows = max_rows or max(1, min(_ROWS_PER_CHUNK, -(-matrix.shape[0] // n_splits)))

        def whole() -> Iterator[sp.csr_matrix]:
            for start in range(0, matrix.shape[0], rows):
                yield _row_view(matrix, start, min(start + rows, matrix.shape[0]))

        return whole
    if callable(counts):

        def stream() -> Iterator[sp.csr_matrix]:
            for i, chunk in enumerate(counts()):
                yield check_count_matrix(chunk, f"counts (chunk {i})", func)

        return stream
    if isinstance(counts, Iterator):
        raise bad_argument(
            "counts", func,
            "an (N, V) matrix, a list of row-chunks or a callable returning an iterator of chunks "
            "(a one-shot iterator cannot be read in the two passes the method needs)",
            type(counts).__name__, kind=TypeError, describe=False,
        )
    if isinstance(counts, (list, tuple)) and counts and all(
        sp.issparse(c) or (isinstance(c, np.ndarray) and c.ndim == 2) for c in counts
    ):
        chunks = [check_count_matrix(c, f"counts (chunk {i})", func) for i, c in enumerate(counts)]
        widths = {c.shape[1] for c in chunks}
        if len(widths) != 1:
            raise bad_argument("counts", func, "chunks with the same number of columns", sorted(widths))
        return lambda: iter(chunks)
    matrix = check_count_matrix(counts, "counts", func)
    return lambda: iter([matrix])
