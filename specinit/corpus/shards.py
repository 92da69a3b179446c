"""Out-of-core corpora: files on disk read as a Dask array of row blocks.

Each reader returns a ``dask.array.Array`` of scipy.sparse CSR row blocks
(documents x vocabulary, float64) whose blocks are read by the task that
needs them, so a corpus larger than memory streams through the moment passes
(:class:`specinit.engine.moments.CountMoments`, ``lda.spectral``,
``single_topic.spectral``) one block per worker thread at a time. The client
only scans the text formats once for the byte offsets of block boundaries
(memory: one integer per block). Dask is imported lazily (``pip install
"specinit[dask]"``).

* :func:`read_npz_shards`: a folder of ``.npz`` CSR shards (scipy.sparse.save_npz),
  written e.g. by :func:`save_npz_shards`;
* :func:`read_uci_blocks`: a UCI bag-of-words ``docword`` file (sorted by docID);
* :func:`read_ldac_blocks`: an LDA-C file (one document per line).

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1: the moments are sums over documents, so row blocks
   can be reduced separately.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from specinit._files import (
    ENTRY_BYTES,
    ROW_BYTES,
    WORD_BYTES,
    LineReader,
    check_budget,
    check_max_bytes,
    check_path,
    check_target,
    file_error,
    npz_members,
    open_regular,
)
from specinit._validation import _MAX_COUNT, bad_argument, check_count_matrix, check_int, optional_import
from specinit.corpus.formats import read_uci_header

if TYPE_CHECKING:
    import dask.array
    from numpy.typing import ArrayLike

__all__ = ["read_ldac_blocks", "read_npz_shards", "read_uci_blocks", "save_npz_shards"]

#: Bytes of the Dask graph a block of rows takes on the client (its task, key and chunk entry).
TASK_BYTES = 256


def save_npz_shards(counts: ArrayLike | sp.sparray | sp.spmatrix, folder: str | os.PathLike[str],
                    rows_per_shard: int = 100_000) -> list[Path]:
    """Write an (N, V) count matrix as CSR ``.npz`` shards of at most ``rows_per_shard`` rows.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer counts.
    folder : str or os.PathLike
        Created if missing; shards are named ``shard_00000.npz``, ... in row order.
    rows_per_shard : int
        Rows per shard.

    Returns
    -------
    list of pathlib.Path
        The shard files written.

    Raises
    ------
    ValueError
        Bad counts or ``rows_per_shard < 1``.
    """
    func = "save_npz_shards"
    matrix = check_count_matrix(counts, "counts", func)
    rows_per_shard = check_int(rows_per_shard, "rows_per_shard", func, minimum=1)
    folder = check_path(folder, "folder", func)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, start in enumerate(range(0, matrix.shape[0], rows_per_shard)):
        path = check_target(folder / f"shard_{i:05d}.npz", "folder", func)
        sp.save_npz(path, matrix[start : start + rows_per_shard], compressed=False)
        paths.append(path)
    return paths


def _npz_shape(path: Path, max_bytes: int, func: str) -> tuple[int, int]:
    """The (rows, columns) of a shard, its members' sizes checked against ``max_bytes`` from their headers."""
    with open_regular(path, "folder", func) as handle:
        members = npz_members(handle, path, max_bytes, func)
        if "shape" not in members or "format" not in members or members["shape"][0] != (2,):
            raise file_error(path, None, "not a scipy.sparse .npz file (no 'shape'/'format' members).")
        with np.load(handle, allow_pickle=False) as archive:  # inflates only the two-integer "shape" member
            shape = tuple(int(s) for s in archive["shape"])
    check_budget(path, shape[0] * ROW_BYTES + shape[1] * WORD_BYTES, max_bytes,
                 f"a block of {shape[0]} rows and {shape[1]} columns", func)
    return shape


def _load_npz(path: str, shape: tuple) -> sp.csr_matrix:
    """The shard at ``path`` as float64 CSR: the shape its scan read, well-formed, counts only (named if not)."""
    with open_regular(path, "folder", "read_npz_shards") as handle:
        try:
            matrix = sp.csr_matrix(sp.load_npz(handle), dtype=np.float64)
            matrix.check_format(full_check=True)
        except (ValueError, TypeError, KeyError, OSError, zipfile.BadZipFile, zlib.error) as exc:
            raise file_error(path, None, f"a damaged sparse matrix ({type(exc).__name__}: {exc}).") from None
    if matrix.shape != shape:
        raise file_error(path, None, f"holds a matrix of shape {matrix.shape}, not the {shape} it declared when the "
                                     "folder was read (was it rewritten since?).")
    data = matrix.data
    bad = ~np.isfinite(data) | (data < 0) | (data != np.round(data)) | (data > _MAX_COUNT)
    if bad.any():
        raise file_error(path, None, "must hold counts (non-negative integers of at most 2**53); found "
                                     f"{float(data[np.argmax(bad)]):g}.")
    return matrix


def _from_blocks(tasks, shapes, n_cols: int):
    import dask
    import dask.array as da

    meta = sp.csr_matrix((0, n_cols))
    parts = [da.from_delayed(dask.delayed(fn)(*args), shape=(rows, n_cols), dtype=np.float64, meta=meta)
             for (fn, args), rows in zip(tasks, shapes)]
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=0)


def read_npz_shards(folder: str | os.PathLike[str], pattern: str = "*.npz", *,
                    max_bytes: int | None = None) -> dask.array.Array:
    """A folder of scipy.sparse ``.npz`` shards as one Dask array of row blocks (one block per shard).

    Parameters
    ----------
    folder : str or os.PathLike
        Shards are taken in sorted file-name order (row order); each must be
        a regular file.
    pattern : str
        Glob pattern of the shard files.
    max_bytes : int, optional
        Memory budget of one shard (default
        :func:`specinit.memory_limit`), checked against the
        sizes its members declare before any is inflated.

    Returns
    -------
    dask.array.Array
        (N, V) float64, chunks = shards (scipy.sparse CSR); nothing is read
        but each shard's shape.

    Raises
    ------
    ValueError
        No shard, shards with different numbers of columns, or a shard
        (named) that is not a regular file, is damaged or exceeds the budget;
        when a block is computed, a shard (named) whose matrix is damaged,
        holds anything but counts or has another shape than it had when the
        folder was read.
    ImportError
        Dask is not installed (``pip install "specinit[dask]"``).
    """
    func = "read_npz_shards"
    optional_import("dask.array", "dask", func)
    folder = check_path(folder, "folder", func)
    max_bytes = check_max_bytes(max_bytes, func)
    paths = sorted(folder.glob(pattern))
    if not paths:
        raise bad_argument("folder", func, f"a folder holding {pattern!r} shards", str(folder))
    shapes = [_npz_shape(p, max_bytes, func) for p in paths]
    widths = {s[1] for s in shapes}
    if len(widths) != 1:
        raise bad_argument("folder", func, "shards with the same number of columns", sorted(widths))
    return _from_blocks([(_load_npz, (str(p), s)) for p, s in zip(paths, shapes)], [s[0] for s in shapes],
                        widths.pop())


# ----------------------------------------------------------------------------- UCI docword


def _nonnegative_int(field: bytes) -> int:
    """An integer count or id of a text format (``int`` accepts bytes); ValueError for anything else."""
    value = int(field)
    if value < 0:
        raise ValueError(field)
    return value


def _count(field: bytes) -> int:
    """A count of a text format: a non-negative integer of at most 2**53 (exact in float64)."""
    value = _nonnegative_int(field)
    if value > _MAX_COUNT:
        raise ValueError(field)
    return value


def _check_block(path, entries: int, rows: int, n_words: int, max_bytes: int, func: str) -> None:
    check_budget(path, entries * ENTRY_BYTES + rows * ROW_BYTES + n_words * WORD_BYTES, max_bytes,
                 f"a block of {rows} documents with {entries} entries over {n_words} words", func)


def _uci_offsets(path: Path, rows_per_block: int, max_bytes: int, func: str) -> tuple[int, int, list]:
    """Header (D, W) and the byte offsets where each block of documents starts.

    One scan checks every line, so the blocks read later hold every entry of the file: each entry is three
    non-negative integers with ``1 <= docID <= D`` (sorted), ``1 <= wordID <= W``, a count of at most 2**53,
    and the number of entries equals the header's NNZ; each block fits in ``max_bytes``.
    """
    with open_regular(path, "docword_path", func) as handle:
        reader = LineReader(handle, path, max_bytes, func, total=False)
        n_docs, n_words, n_entries = read_uci_header(reader, path)
        check_budget(path, -(-n_docs // rows_per_block) * TASK_BYTES, max_bytes,
                     f"the Dask graph of D={n_docs} documents (its header) in blocks of {rows_per_block}", func)
        _check_block(path, 0, min(rows_per_block, n_docs), n_words, max_bytes, func)
        offsets = [(0, handle.tell())]  # (first doc index of the block, byte offset)
        next_start, entries, in_block, previous = rows_per_block, 0, 0, 0
        while True:
            position = handle.tell()
            line = reader.readline()
            if not line:
                break
            line_number = reader.line_number
            fields = line.split()
            if not fields:
                continue
            text = line.decode("utf-8", errors="replace").strip()
            try:
                if len(fields) != 3:
                    raise ValueError
                doc, word, _ = _nonnegative_int(fields[0]), _nonnegative_int(fields[1]), _count(fields[2])
            except ValueError:
                raise file_error(path, line_number, "expected 'docID wordID count' (non-negative integers) with a "
                                                    f"count of at most 2**53, found {text!r}.") from None
            if not (1 <= doc <= n_docs and 1 <= word <= n_words):
                raise file_error(path, line_number, f"entry {text!r} outside the header's D={n_docs}, "
                                                    f"W={n_words}.")
            if doc < previous:
                raise file_error(path, line_number, f"docID {doc} after docID {previous}: the file is not sorted "
                                                    "by docID (sort it or use load_uci_bow).")
            while doc - 1 >= next_start:
                offsets.append((next_start, position))
                next_start, in_block = next_start + rows_per_block, 0
            previous, entries, in_block = doc, entries + 1, in_block + 1
            _check_block(path, in_block, rows_per_block, n_words, max_bytes, func)
    if entries != n_entries:
        raise file_error(path, 3, f"the header gives NNZ={n_entries} but the file has {entries} entries (a "
                                  "truncated or edited file?).")
    return n_docs, n_words, offsets


def _read_uci_block(path: str, start_doc: int, stop_doc: int, offset: int, n_words: int) -> sp.csr_matrix:
    rows, cols, vals = [], [], []
    with open(path, "rb") as handle:
        handle.seek(offset)
        for line in handle:
            fields = line.split()
            if not fields:
                continue
            doc, word, count = (int(f) for f in fields)  # checked by the scan of _uci_offsets
            if doc - 1 >= stop_doc:
                break
            rows.append(doc - 1 - start_doc)
            cols.append(word - 1)
            vals.append(count)
    matrix = sp.coo_matrix((np.asarray(vals, dtype=np.float64), (np.asarray(rows, dtype=np.int64),
                           np.asarray(cols, dtype=np.int64))), shape=(stop_doc - start_doc, n_words)).tocsr()
    matrix.sum_duplicates()
    return matrix


def read_uci_blocks(docword_path: str | os.PathLike[str], rows_per_block: int = 100_000, *,
                    max_bytes: int | None = None) -> dask.array.Array:
    """A UCI bag-of-words ``docword`` file as a Dask array of row blocks, read block by block.

    Parameters
    ----------
    docword_path : str or os.PathLike
        ``docword.*.txt`` (uncompressed: blocks seek to byte offsets), three
        header lines ``D``, ``W``, ``NNZ`` then ``docID wordID count`` lines
        with 1-based ids, sorted by docID (as the UCI files are).
    rows_per_block : int
        Documents per block.
    max_bytes : int, optional
        Memory budget of one block (default
        :func:`specinit.memory_limit`): about 64 bytes an entry
        and a word, 16 a document; lines are at most ``max_bytes // 16``
        bytes.

    Returns
    -------
    dask.array.Array
        (D, W) float64 with scipy.sparse CSR blocks. The client scans the file
        once for block offsets; each block is parsed by its task.

    Raises
    ------
    ValueError
        A malformed header or line (named with its number; D and W must be
        at least 1), an entry outside the header's D and W, a count above 2**53, docIDs out of order, a
        number of entries that differs from the header's NNZ, a block beyond
        the budget, a file that is not regular, a gzip file,
        ``rows_per_block < 1``.
    ImportError
        Dask is not installed (``pip install "specinit[dask]"``).
    """
    func = "read_uci_blocks"
    optional_import("dask.array", "dask", func)
    path = check_path(docword_path, "docword_path", func)
    rows_per_block = check_int(rows_per_block, "rows_per_block", func, minimum=1)
    max_bytes = check_max_bytes(max_bytes, func)
    if path.suffix == ".gz":
        raise bad_argument("docword_path", func, "an uncompressed file (blocks are read from byte offsets)", str(path))
    n_docs, n_words, offsets = _uci_offsets(path, rows_per_block, max_bytes, func)
    starts = list(range(0, n_docs, rows_per_block))
    by_start = dict(offsets)
    tasks, shapes, last = [], [], path.stat().st_size
    for start in reversed(starts):  # a block with no entries starts where the next one does
        last = by_start.get(start, last)
        stop = min(start + rows_per_block, n_docs)
        tasks.append((_read_uci_block, (str(path), start, stop, last, n_words)))
        shapes.append(stop - start)
    return _from_blocks(tasks[::-1], shapes[::-1], n_words)


# ----------------------------------------------------------------------------- LDA-C


def _ldac_offsets(path: Path, rows_per_block: int, vocab_size: int, max_bytes: int, func: str) -> list:
    """Byte offsets and row counts of the blocks; one scan checks every line (``M`` pairs ``term:count`` of
    non-negative integers, ``term < vocab_size``, counts at most 2**53), so the blocks read later hold every
    count of the file; each block fits in ``max_bytes``."""
    offsets, n, in_block = [], 0, 0
    with open_regular(path, "path", func) as handle:
        reader = LineReader(handle, path, max_bytes, func, total=False)
        while True:
            position = handle.tell()
            line = reader.readline()
            if not line:
                break
            line_number = reader.line_number
            fields = line.split()
            if not fields:
                continue
            try:
                n_pairs = _nonnegative_int(fields[0])
                pairs = [field.split(b":") for field in fields[1:]]
                if any(len(pair) != 2 for pair in pairs):
                    raise ValueError
                terms = [_nonnegative_int(term) for term, _ in pairs]
                for _, count in pairs:
                    _count(count)
            except ValueError:
                raise file_error(path, line_number, "expected 'M term:count ...' with non-negative integer terms "
                                                    f"and counts, counts at most 2**53, found {line.decode('utf-8', errors='replace').strip()[:80]!r}.") from None
            if n_pairs != len(pairs):
                raise file_error(path, line_number, f"M={n_pairs} but the line has {len(pairs)} term:count pairs.")
            if terms and max(terms) >= vocab_size:
                raise file_error(path, line_number, f"term id {max(terms)} outside 0..{vocab_size - 1} "
                                                    f"(vocab_size={vocab_size}).")
            if n % rows_per_block == 0:
                offsets.append([position, 0])
                in_block = 0
            offsets[-1][1] += 1
            n, in_block = n + 1, in_block + len(pairs)
            _check_block(path, in_block, rows_per_block, vocab_size, max_bytes, func)
    return offsets


def _read_ldac_block(path: str, offset: int, n_rows: int, n_cols: int) -> sp.csr_matrix:
    indptr, cols, vals = [0], [], []
    with open(path, "rb") as handle:
        handle.seek(offset)
        while len(indptr) <= n_rows:
            fields = handle.readline().split()
            if not fields:
                continue
            for field in fields[1:]:  # checked by the scan of _ldac_offsets
                term, count = field.split(b":")
                cols.append(int(term))
                vals.append(int(count))
            indptr.append(len(cols))
    matrix = sp.csr_matrix((np.asarray(vals, dtype=np.float64), np.asarray(cols, dtype=np.int64), np.asarray(indptr)),
                           shape=(n_rows, n_cols))
    matrix.sum_duplicates()
    return matrix


def read_ldac_blocks(path: str | os.PathLike[str], vocab_size: int, rows_per_block: int = 100_000, *,
                     max_bytes: int | None = None) -> dask.array.Array:
    """An LDA-C file as a Dask array of row blocks, read block by block.

    Parameters
    ----------
    path : str or os.PathLike
        Uncompressed LDA-C file: one document per non-blank line
        ``M term:count ...`` with 0-based term ids.
    vocab_size : int
        V (the format does not store it).
    rows_per_block : int
        Documents per block.
    max_bytes : int, optional
        Memory budget of one block (default
        :func:`specinit.memory_limit`): about 64 bytes an entry
        and a word of ``vocab_size``, 16 a document; lines are at most
        ``max_bytes // 16`` bytes.

    Returns
    -------
    dask.array.Array
        (N, V) float64 with scipy.sparse CSR blocks.

    Raises
    ------
    ValueError
        A gzip file, an empty file, a file that is not regular, bad
        ``vocab_size`` / ``rows_per_block``, a block beyond the budget, or a
        malformed line (named with its number: bad ``M``, a negative,
        fractional or too large count, a term id outside the vocabulary).
    ImportError
        Dask is not installed (``pip install "specinit[dask]"``).
    """
    func = "read_ldac_blocks"
    optional_import("dask.array", "dask", func)
    path = check_path(path, "path", func)
    vocab_size = check_int(vocab_size, "vocab_size", func, minimum=1)
    rows_per_block = check_int(rows_per_block, "rows_per_block", func, minimum=1)
    max_bytes = check_max_bytes(max_bytes, func)
    if path.suffix == ".gz":
        raise bad_argument("path", func, "an uncompressed file (blocks are read from byte offsets)", str(path))
    offsets = _ldac_offsets(path, rows_per_block, vocab_size, max_bytes, func)
    if not offsets:
        raise bad_argument("path", func, "a file with at least one document", str(path))
    tasks = [(_read_ldac_block, (str(path), offset, rows, vocab_size)) for offset, rows in offsets]
    return _from_blocks(tasks, [rows for _, rows in offsets], vocab_size)
