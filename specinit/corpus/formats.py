"""Corpus file formats: UCI bag of words, LDA-C, and corpora shipped inside packages.

Errors in files name the file, the line number and what was wrong.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument
from specinit.corpus._files import check_path, file_error, open_text
from specinit.corpus.containers import Corpus, check_corpus

__all__ = ["read_vocabulary", "write_vocabulary", "load_ldac", "load_reuters", "load_uci_bow", "save_ldac", "save_uci_bow"]


def read_vocabulary(vocab_path, func: str = "read_vocabulary") -> tuple[str, ...]:
    """Read a vocabulary file, one word per line (gzip for ``.gz`` names).

    Parameters
    ----------
    vocab_path : str or os.PathLike
        The file to read.
    func : str
        The public function named in errors (the caller's, when it reads a
        vocabulary on behalf of a loader).

    Returns
    -------
    tuple of str
        The words, in file order.

    Raises
    ------
    ValueError
        An empty line (named by file and line number) or an empty file.
    TypeError
        If ``vocab_path`` is not a path.
    """
    path = check_path(vocab_path, "vocab_path", func)
    words = []
    with open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            word = line.strip()
            if not word:
                raise file_error(path, line_number, "empty line; the vocabulary file needs one word per line.")
            words.append(word)
    if not words:
        raise ValueError(f"{path}: the vocabulary file is empty.")
    return tuple(words)


def write_vocabulary(corpus: Corpus, vocab_path, func: str = "write_vocabulary") -> None:
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
    path = check_path(vocab_path, "vocab_path", func)
    if corpus.vocabulary is None:
        raise bad_argument("corpus", func, "a Corpus with a vocabulary when vocab_path is given", corpus)
    for word in corpus.vocabulary:
        if not word or word != word.strip() or "\n" in word or "\r" in word:
            raise bad_argument(
                "corpus", func, "a Corpus whose words are non-empty without surrounding whitespace or line breaks",
                f"the word {word!r}", describe=False,
            )
    with open_text(path, "w") as handle:
        handle.writelines(word + "\n" for word in corpus.vocabulary)



def _read_uci_header(handle, path) -> tuple[int, int, int]:
    header = []
    for line_number, label in enumerate(("D (number of documents)", "W (vocabulary size)", "NNZ (number of entries)"), 1):
        line = handle.readline()
        try:
            value = int(line)
        except ValueError:
            raise file_error(path, line_number, f"expected the header integer {label}, found {line.strip()!r}.") from None
        if value < 0:
            raise file_error(path, line_number, f"the header {label} must be non-negative, found {value}.")
        header.append(value)
    return tuple(header)


def _parse_uci_lines(path) -> tuple[np.ndarray, np.ndarray]:
    """Slow line-by-line parse of the entries; returns them and their line numbers."""
    entries, line_numbers = [], []
    with open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split()
            if line_number <= 3 or not fields:
                continue
            if len(fields) != 3:
                raise file_error(path, line_number, f"expected 3 fields 'docID wordID count', found {len(fields)}.")
            try:
                entries.append(np.array([int(field) for field in fields], dtype=np.int64))
            except (ValueError, OverflowError):
                raise file_error(path, line_number, f"expected int64 integers 'docID wordID count', found {line.strip()!r}.") from None
            line_numbers.append(line_number)
    return np.array(entries, dtype=np.int64).reshape(-1, 3), np.array(line_numbers, dtype=np.int64)


def _first_bad_uci_entry(entries: np.ndarray, n_docs: int, n_words: int):
    checks = (
        ((entries[:, 0] < 1) | (entries[:, 0] > n_docs), f"docID must be in 1..D={n_docs}"),
        ((entries[:, 1] < 1) | (entries[:, 1] > n_words), f"wordID must be in 1..W={n_words}"),
        (entries[:, 2] < 1, "count must be a positive integer"),
    )
    for bad, problem in checks:
        if bad.any():
            row = int(np.argmax(bad))
            return row, f"{problem}, found the entry {' '.join(map(str, entries[row]))!r}."
    return None


def load_uci_bow(docword_path, vocab_path=None) -> Corpus:
    """Read a corpus in the UCI bag-of-words format.

    ``docword.*.txt`` starts with three header lines D (documents), W
    (vocabulary size) and NNZ (entries), followed by NNZ lines
    ``docID wordID count`` with 1-based ids. ``vocab.*.txt`` has one word per
    line. Either file is read through gzip when its name ends in ``.gz``.
    Repeated (docID, wordID) pairs are summed.

    Parameters
    ----------
    docword_path : str or os.PathLike
        The docword file.
    vocab_path : str or os.PathLike, optional
        The vocabulary file (W words).

    Returns
    -------
    Corpus
        Of shape (D, W); without document names.

    Raises
    ------
    ValueError
        Naming the file and line for a malformed header, a line without
        exactly three integers, an id out of range or a non-positive count;
        naming the file when NNZ differs from the number of entries or the
        vocabulary does not have W words.

    References
    ----------
    https://archive.ics.uci.edu/dataset/164/bag+of+words
    """
    func = "load_uci_bow"
    path = check_path(docword_path, "docword_path", func)
    with open_text(path, "r") as handle:
        n_docs, n_words, n_entries = _read_uci_header(handle, path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                entries = np.loadtxt(handle, dtype=np.int64, ndmin=2, comments=None)
            line_numbers = None
        except (ValueError, UserWarning):
            entries = line_numbers = None
    if entries is None or entries.shape[1] != 3:
        entries, line_numbers = _parse_uci_lines(path)
    bad = _first_bad_uci_entry(entries, n_docs, n_words)
    if bad is not None:
        if line_numbers is None:
            entries, line_numbers = _parse_uci_lines(path)
        raise file_error(path, int(line_numbers[bad[0]]), bad[1])
    if len(entries) != n_entries:
        raise ValueError(f"{path}: the header (line 3) gives NNZ={n_entries} but the file has {len(entries)} entries.")
    vocabulary = None
    if vocab_path is not None:
        vocabulary = read_vocabulary(vocab_path, func)
        if len(vocabulary) != n_words:
            raise ValueError(f"{vocab_path}: has {len(vocabulary)} words but {path} declares W={n_words}.")
    counts = sp.coo_matrix((entries[:, 2], (entries[:, 0] - 1, entries[:, 1] - 1)), shape=(n_docs, n_words))
    return Corpus(counts, vocabulary)


def save_uci_bow(corpus: Corpus, docword_path, vocab_path=None) -> None:
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
    path = check_path(docword_path, "docword_path", func)
    if vocab_path is not None:
        write_vocabulary(corpus, vocab_path, func)
    coo = corpus.counts.tocoo()
    n_docs, n_words = coo.shape
    with open_text(path, "w") as handle:
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
    return terms, counts


def load_ldac(path, vocab_path=None) -> Corpus:
    """Read a corpus in the LDA-C format.

    Each non-blank line is one document ``M term_1:count_1 ... term_M:count_M``
    with 0-based term ids (blank lines are skipped). Repeated term ids in a
    line are summed. Either file is read through gzip when its name ends in
    ``.gz``.

    Parameters
    ----------
    path : str or os.PathLike
        The LDA-C file.
    vocab_path : str or os.PathLike, optional
        The vocabulary file, one word per line; it fixes V.

    Returns
    -------
    Corpus
        With V = the vocabulary length, or the largest term id + 1.

    Raises
    ------
    ValueError
        Naming the file and line for a malformed line, M different from the
        number of pairs, a negative id or non-positive count, or a term id
        outside the vocabulary; if the file holds no document.
    """
    func = "load_ldac"
    path = check_path(path, "path", func)
    vocabulary = None if vocab_path is None else read_vocabulary(vocab_path, func)
    cols, vals = [], []
    with open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            terms, counts = _parse_ldac_line(line, path, line_number)
            if vocabulary is not None and terms.max(initial=-1) >= len(vocabulary):
                raise file_error(
                    path, line_number, f"term id {terms.max()} is outside the vocabulary of {len(vocabulary)} words ({vocab_path})."
                )
            cols.append(terms)
            vals.append(counts)
    if not cols:
        raise ValueError(f"{path}: the file holds no document.")
    terms = np.concatenate(cols)
    if vocabulary is None and terms.size == 0:
        raise ValueError(f"{path}: no document has a term, so the vocabulary size is unknown; pass vocab_path.")
    n_words = len(vocabulary) if vocabulary is not None else int(terms.max()) + 1
    rows = np.repeat(np.arange(len(cols)), [len(c) for c in cols])
    counts = sp.coo_matrix((np.concatenate(vals), (rows, terms)), shape=(len(cols), n_words))
    return Corpus(counts, vocabulary)


def save_ldac(corpus: Corpus, path, vocab_path=None) -> None:
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
    path = check_path(path, "path", func)
    if vocab_path is not None:
        write_vocabulary(corpus, vocab_path, func)
    counts = corpus.counts
    with open_text(path, "w") as handle:
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
    try:
        import lda
    except ImportError as exc:
        raise ImportError('load_reuters needs the optional package "lda"; install it with pip install "specinit[data]".') from exc
    folder = Path(lda.__file__).parent / "tests"
    corpus = load_ldac(folder / "reuters.ldac", vocab_path=folder / "reuters.tokens")
    with open(folder / "reuters.titles", encoding="utf-8") as handle:
        titles = tuple(line.strip() for line in handle)
    return Corpus(corpus.counts, corpus.vocabulary, titles)
