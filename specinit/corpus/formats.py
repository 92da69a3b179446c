"""Corpus file formats: UCI bag of words, LDA-C, and corpora shipped inside packages.

Errors in files name the file, the line number and what was wrong.
"""

from __future__ import annotations

import gzip
import os
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from specinit._files import (
    ENTRY_BYTES,
    ROW_BYTES,
    WORD_BYTES,
    FileError,
    check_budget,
    check_max_bytes,
    check_path,
    check_target,
    file_error,
    read_text,
)
from specinit._validation import _MAX_COUNT, bad_argument, optional_import
from specinit.corpus.containers import Corpus, check_corpus, duplicate_words

__all__ = ["read_vocabulary", "write_vocabulary", "load_ldac", "load_reuters", "load_uci_bow", "save_ldac", "save_uci_bow"]


def read_vocabulary(vocab_path: str | os.PathLike[str], func: str = "read_vocabulary", *,
                    max_bytes: int | None = None) -> tuple[str, ...]:
    """Read a vocabulary file, one distinct word per line (gzip for ``.gz`` names).

    Parameters
    ----------
    vocab_path : str or os.PathLike
        The file to read: a regular file (FIFOs, devices and directories are
        refused before they are opened).
    func : str
        The public function named in errors (the caller's, when it reads a
        vocabulary on behalf of a loader).
    max_bytes : int, optional
        Memory budget (default :func:`specinit.memory_limit`):
        the text read, the longest line (``max_bytes // 16``) and the words
        held are bounded by it.

    Returns
    -------
    tuple of str
        The words, in file order.

    Raises
    ------
    ValueError
        Naming the file (and the line): an empty line, a word that repeats
        an earlier line's, an empty file, a file that is not regular,
        undecodable text or a damaged gzip stream, or the budget exceeded.
    TypeError
        If ``vocab_path`` is not a path.
    """
    path = check_path(vocab_path, "vocab_path", func)
    max_bytes = check_max_bytes(max_bytes, func)
    words = []
    with read_text(path, "vocab_path", func, max_bytes) as reader:
        for line in reader:
            word = line.strip()
            if not word:
                raise file_error(path, reader.line_number, "empty line; the vocabulary file needs one word per line.")
            words.append(word)
            check_budget(path, len(words) * WORD_BYTES, max_bytes, f"{len(words)} words", func)
    if not words:
        raise ValueError(f"{path}: the vocabulary file is empty.")
    repeated = duplicate_words(words)
    if repeated is not None:
        first, second = repeated
        raise file_error(path, second + 1, f"the word {words[second]!r} repeats line {first + 1}; a vocabulary "
                                           "names each column once.")
    return tuple(words)


def write_vocabulary(corpus: Corpus, vocab_path: str | os.PathLike[str], func: str = "write_vocabulary") -> None:
    """Write ``corpus.vocabulary``, one word per line (gzip for ``.gz`` names).

    Parameters
    ----------
    corpus : Corpus
        A corpus with a vocabulary.
    vocab_path : str or os.PathLike
        The file to write.
    func : str
        The public function named in errors.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        If the corpus has no vocabulary, or a word is empty, has surrounding
        whitespace or a line break.
    """
    path = check_target(vocab_path, "vocab_path", func)
    if corpus.vocabulary is None:
        raise bad_argument("corpus", func, "a Corpus with a vocabulary when vocab_path is given", corpus)
    for word in corpus.vocabulary:
        if not word or word != word.strip() or "\n" in word or "\r" in word:
            raise bad_argument(
                "corpus", func, "a Corpus whose words are non-empty without surrounding whitespace or line breaks",
                f"the word {word!r}", describe=False,
            )
    with _write_text(path) as handle:
        handle.writelines(word + "\n" for word in corpus.vocabulary)


def _write_text(path: Path):
    """Open ``path`` (checked by :func:`~specinit._files.check_target`) for writing text, gzip for ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "wt", encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def read_uci_header(reader, path) -> tuple[int, int, int]:
    """The header ``(D, W, NNZ)`` of a docword file from the reader's first three lines (text or bytes).

    Parameters
    ----------
    reader : LineReader or file object
        Positioned at the start of the file.
    path : str or os.PathLike
        The file, named in errors.

    Returns
    -------
    tuple of int

    Raises
    ------
    FileError
        Naming the file and the line: a line that is not one integer, ``D`` or ``W`` below 1 (a corpus has a
        document and a word), a negative ``NNZ``.
    """
    header = []
    labels = (("D (number of documents)", 1), ("W (vocabulary size)", 1), ("NNZ (number of entries)", 0))
    for line_number, (label, least) in enumerate(labels, 1):
        line = reader.readline()
        text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
        try:
            value = int(text)
        except ValueError:
            raise file_error(path, line_number, f"expected the header integer {label}, found "
                                                f"{text.strip()!r}.") from None
        if value < least:
            at_least = "non-negative" if least == 0 else "at least 1 (a corpus has a document and a word)"
            raise file_error(path, line_number, f"the header {label} must be {at_least}, found {value}.")
        header.append(value)
    return tuple(header)


def _uci_entry_lines(reader, path, n_entries: int):
    """The entry lines of a docword file, refusing one beyond the header's NNZ before it is held."""
    seen = 0
    for line in reader:
        if line.strip():
            seen += 1
            if seen > n_entries:
                raise file_error(path, reader.line_number, f"an entry beyond the header's NNZ={n_entries} (line 3); "
                                                           "a truncated header or an edited file?")
        yield line


def _parse_uci_lines(path, n_entries: int, max_bytes: int, func: str) -> tuple[np.ndarray, np.ndarray]:
    """Slow line-by-line parse of the entries; returns them and their line numbers."""
    entries, line_numbers = [], []
    with read_text(path, "docword_path", func, max_bytes) as reader:
        read_uci_header(reader, path)
        for line in _uci_entry_lines(reader, path, n_entries):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 3:
                raise file_error(path, reader.line_number, f"expected 3 fields 'docID wordID count', found {len(fields)}.")
            try:
                entries.append(np.array([int(field) for field in fields], dtype=np.int64))
            except (ValueError, OverflowError):
                raise file_error(path, reader.line_number, "expected int64 integers 'docID wordID count', found "
                                                           f"{line.strip()!r}.") from None
            line_numbers.append(reader.line_number)
    return np.array(entries, dtype=np.int64).reshape(-1, 3), np.array(line_numbers, dtype=np.int64)


def _first_bad_uci_entry(entries: np.ndarray, n_docs: int, n_words: int):
    checks = (
        ((entries[:, 0] < 1) | (entries[:, 0] > n_docs), f"docID must be in 1..D={n_docs}"),
        ((entries[:, 1] < 1) | (entries[:, 1] > n_words), f"wordID must be in 1..W={n_words}"),
        (entries[:, 2] < 1, "count must be a positive integer"),
        (entries[:, 2] > _MAX_COUNT, "count must be at most 2**53 (larger integers are not exact in float64)"),
    )
    for bad, problem in checks:
        if bad.any():
            row = int(np.argmax(bad))
            return row, f"{problem}, found the entry {' '.join(map(str, entries[row]))!r}."
    return None


def load_uci_bow(docword_path: str | os.PathLike[str], vocab_path: str | os.PathLike[str] | None = None, *,
                 max_bytes: int | None = None) -> Corpus:
    """Read a corpus in the UCI bag-of-words format.

    ``docword.*.txt`` starts with three header lines D (documents), W
    (vocabulary size) and NNZ (entries), followed by NNZ lines
    ``docID wordID count`` with 1-based ids. ``vocab.*.txt`` has one word per
    line. Either file is read through gzip when its name ends in ``.gz``.
    Repeated (docID, wordID) pairs are summed.

    Parameters
    ----------
    docword_path : str or os.PathLike
        The docword file (a regular file; FIFOs, devices and directories are
        refused before they are opened).
    vocab_path : str or os.PathLike, optional
        The vocabulary file (W distinct words).
    max_bytes : int, optional
        Memory budget (default :func:`specinit.memory_limit`):
        the header's D, W and NNZ are checked against it before anything is
        allocated (about 64 bytes an entry and a word, 16 a document), and
        the decompressed text read may not exceed it.

    Returns
    -------
    Corpus
        Of shape (D, W); without document names.

    Raises
    ------
    ValueError
        Naming the file and line for a malformed header (D and W must be at
        least 1, NNZ non-negative), a line without
        exactly three integers, an id out of range, a count that is not a
        positive integer below 2**53, an entry beyond NNZ, undecodable text
        or a damaged gzip stream; naming the file when NNZ differs from the
        number of entries, the vocabulary does not have W distinct words, the
        file is not a regular file, or the budget is exceeded.

    References
    ----------
    https://archive.ics.uci.edu/dataset/164/bag+of+words
    """
    func = "load_uci_bow"
    path = check_path(docword_path, "docword_path", func)
    max_bytes = check_max_bytes(max_bytes, func)
    vocabulary = None if vocab_path is None else read_vocabulary(vocab_path, func, max_bytes=max_bytes)
    with read_text(path, "docword_path", func, max_bytes) as reader:
        n_docs, n_words, n_entries = read_uci_header(reader, path)
        check_budget(path, n_entries * ENTRY_BYTES + n_docs * ROW_BYTES + n_words * WORD_BYTES, max_bytes,
                     f"D={n_docs}, W={n_words} and NNZ={n_entries} in its header", func)
        if vocabulary is not None and len(vocabulary) != n_words:
            raise ValueError(f"{vocab_path}: has {len(vocabulary)} words but {path} declares W={n_words}.")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                entries = np.loadtxt(_uci_entry_lines(reader, path, n_entries), dtype=np.int64, ndmin=2,
                                     comments=None)
            line_numbers = None
        except FileError:
            raise
        except (ValueError, UserWarning):
            entries = line_numbers = None
    if entries is None or entries.shape[1] != 3:
        entries, line_numbers = _parse_uci_lines(path, n_entries, max_bytes, func)
    bad = _first_bad_uci_entry(entries, n_docs, n_words)
    if bad is not None:
        if line_numbers is None:
            entries, line_numbers = _parse_uci_lines(path, n_entries, max_bytes, func)
        raise file_error(path, int(line_numbers[bad[0]]), bad[1])
    if len(entries) != n_entries:
        raise ValueError(f"{path}: the header (line 3) gives NNZ={n_entries} but the file has {len(entries)} entries.")
    counts = sp.coo_matrix((entries[:, 2], (entries[:, 0] - 1, entries[:, 1] - 1)), shape=(n_docs, n_words))
    return Corpus(counts, vocabulary)


def save_uci_bow(corpus: Corpus, docword_path: str | os.PathLike[str],
                 vocab_path: str | os.PathLike[str] | None = None) -> None:
    """Write ``corpus`` in the UCI bag-of-words format (gzip for ``.gz`` names).

    Parameters
    ----------
    corpus : Corpus
    docword_path : str or os.PathLike
        The docword file to write.
    vocab_path : str or os.PathLike, optional
        Where to write the vocabulary, one word per line.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``corpus`` is not a :class:`Corpus`.
    ValueError
        If ``vocab_path`` is given but the corpus has no vocabulary, or a
        word cannot be written on one line.
    """
    func = "save_uci_bow"
    corpus = check_corpus(corpus, func)
    path = check_target(docword_path, "docword_path", func)
    if vocab_path is not None:
        write_vocabulary(corpus, vocab_path, func)
    coo = corpus.counts.tocoo()
    n_docs, n_words = coo.shape
    with _write_text(path) as handle:
        handle.write(f"{n_docs}\n{n_words}\n{coo.nnz}\n")
        handle.writelines(f"{d + 1} {w + 1} {c}\n" for d, w, c in zip(coo.row, coo.col, coo.data))


# ----------------------------------------------------------------------------- LDA-C


def _parse_ldac_line(line: str, path, line_number: int) -> tuple[np.ndarray, np.ndarray]:
    fields = line.split()
    try:
        n_terms = int(fields[0])
        pairs = np.array([(int(t), int(c)) for t, c in (field.split(":") for field in fields[1:])], dtype=np.int64)
    except (ValueError, OverflowError):
        raise file_error(path, line_number, "expected 'M term:count ...' with int64 integers M, term and count.") from None
    terms, counts = pairs.reshape(-1, 2).T
    if n_terms != len(terms):
        raise file_error(path, line_number, f"M={n_terms} but the line has {len(terms)} term:count pairs.")
    if terms.min(initial=0) < 0:
        raise file_error(path, line_number, f"term ids must be non-negative, found {terms.min()}.")
    if counts.min(initial=1) < 1:
        raise file_error(path, line_number, f"counts must be positive integers, found {counts.min()}.")
    if counts.max(initial=1) > _MAX_COUNT:
        raise file_error(path, line_number, f"counts must be at most 2**53 (larger integers are not exact in "
                                            f"float64), found {counts.max()}.")
    return terms, counts


def load_ldac(path: str | os.PathLike[str], vocab_path: str | os.PathLike[str] | None = None, *,
              max_bytes: int | None = None) -> Corpus:
    """Read a corpus in the LDA-C format.

    Each non-blank line is one document ``M term_1:count_1 ... term_M:count_M``
    with 0-based term ids (blank lines are skipped). Repeated term ids in a
    line are summed. Either file is read through gzip when its name ends in
    ``.gz``.

    Parameters
    ----------
    path : str or os.PathLike
        The LDA-C file (a regular file; FIFOs, devices and directories are
        refused before they are opened).
    vocab_path : str or os.PathLike, optional
        The vocabulary file, one distinct word per line; it fixes V, and
        every term id must be below its length.
    max_bytes : int, optional
        Memory budget (default :func:`specinit.memory_limit`).
        Without a vocabulary, V is the largest term id + 1: a term id whose
        vocabulary (about 64 bytes a word) together with the entries read so
        far (64 bytes each) exceeds the budget is refused at its line. The
        decompressed text read may not exceed the budget either.

    Returns
    -------
    Corpus
        With V = the vocabulary length, or the largest term id + 1.

    Raises
    ------
    ValueError
        Naming the file and line for a malformed line, M different from the
        number of pairs, a negative id, a count that is not a positive
        integer below 2**53, a term id outside the vocabulary or beyond the
        budget, undecodable text or a damaged gzip stream; naming the file
        if it holds no document or is not a regular file.
    """
    func = "load_ldac"
    path = check_path(path, "path", func)
    max_bytes = check_max_bytes(max_bytes, func)
    vocabulary = None if vocab_path is None else read_vocabulary(vocab_path, func, max_bytes=max_bytes)
    cols, vals = [], []
    n_entries, n_words = 0, 0 if vocabulary is None else len(vocabulary)
    with read_text(path, "path", func, max_bytes) as reader:
        for line in reader:
            if not line.strip():
                continue
            terms, counts = _parse_ldac_line(line, path, reader.line_number)
            largest = int(terms.max(initial=-1))
            if vocabulary is not None and largest >= len(vocabulary):
                raise file_error(path, reader.line_number, f"term id {largest} is outside the vocabulary of "
                                                           f"{len(vocabulary)} words ({vocab_path}).")
            n_entries, n_words = n_entries + len(terms), max(n_words, largest + 1)
            check_budget(path, n_entries * ENTRY_BYTES + len(cols) * ROW_BYTES + n_words * WORD_BYTES, max_bytes,
                         f"{n_entries} entries up to line {reader.line_number} and a vocabulary of {n_words} words "
                         f"(the largest term id + 1)", func)
            cols.append(terms)
            vals.append(counts)
    if not cols:
        raise ValueError(f"{path}: the file holds no document.")
    if n_words == 0:
        raise ValueError(f"{path}: no document has a term, so the vocabulary size is unknown; pass vocab_path.")
    rows = np.repeat(np.arange(len(cols)), [len(c) for c in cols])
    counts = sp.coo_matrix((np.concatenate(vals), (rows, np.concatenate(cols))), shape=(len(cols), n_words))
    return Corpus(counts, vocabulary)


def save_ldac(corpus: Corpus, path: str | os.PathLike[str], vocab_path: str | os.PathLike[str] | None = None) -> None:
    """Write ``corpus`` in the LDA-C format (gzip for ``.gz`` names).

    Trailing vocabulary columns without any count are only recovered by
    :func:`load_ldac` when the vocabulary is saved too.

    Parameters
    ----------
    corpus : Corpus
        The corpus to write.
    path : str or os.PathLike
        The LDA-C file to write.
    vocab_path : str or os.PathLike, optional
        Where to write the vocabulary, one word per line.

    Returns
    -------
    None

    Raises
    ------
    TypeError
        If ``corpus`` is not a :class:`Corpus`.
    ValueError
        If ``vocab_path`` is given but the corpus has no vocabulary, or a
        word cannot be written on one line.

    Examples
    --------
    >>> save_ldac(from_matrix([[1, 0, 2]]), "corpus.ldac")  # doctest: +SKIP
    """
    func = "save_ldac"
    corpus = check_corpus(corpus, func)
    path = check_target(path, "path", func)
    if vocab_path is not None:
        write_vocabulary(corpus, vocab_path, func)
    counts = corpus.counts
    with _write_text(path) as handle:
        for start, stop in zip(counts.indptr[:-1], counts.indptr[1:]):
            pairs = " ".join(f"{t}:{c}" for t, c in zip(counts.indices[start:stop], counts.data[start:stop]))
            handle.write(f"{stop - start} {pairs}".rstrip() + "\n")



def load_reuters() -> Corpus:
    """Load the 395-document Reuters subset shipped with the ``lda`` package.

    Returns
    -------
    Corpus
        Of shape (395, 4258), with the vocabulary and the article titles as
        document names.

    Raises
    ------
    ImportError
        If ``lda`` is not installed (``pip install "specinit[data]"``).

    Examples
    --------
    >>> load_reuters().counts.shape  # doctest: +SKIP
    (395, 4258)
    """
    lda = optional_import("lda", "data", "load_reuters")
    folder = Path(lda.__file__).parent / "tests"
    corpus = load_ldac(folder / "reuters.ldac", vocab_path=folder / "reuters.tokens")
    with open(folder / "reuters.titles", encoding="utf-8") as handle:
        titles = tuple(line.strip() for line in handle)
    return Corpus(corpus.counts, corpus.vocabulary, titles)
