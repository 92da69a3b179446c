"""Corpus input and output for topic models.

A :class:`Corpus` holds an (N, V) sparse matrix of word counts (documents x
vocabulary) with an optional vocabulary and optional document names. It is
built from an in-memory matrix (:func:`from_matrix`, e.g. the output of
scikit-learn's ``CountVectorizer``), a directory of plain-text files
(:func:`from_text_files`), the UCI bag-of-words format (:func:`load_uci_bow`),
the LDA-C format (:func:`load_ldac`) or the Reuters subset shipped with the
``lda`` package (:func:`load_reuters`). Errors in files name the file, the
line number and what was wrong.
"""

from __future__ import annotations

import codecs
import gzip
import numbers
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_count_matrix

__all__ = [
    "ENGLISH_STOP_WORDS",
    "Corpus",
    "from_matrix",
    "from_text_files",
    "load_ldac",
    "load_reuters",
    "load_uci_bow",
    "save_ldac",
    "save_uci_bow",
]

ENGLISH_STOP_WORDS = frozenset(
    """
    a about above after again against all almost also although always am among an and another any
    anyone anything are around as at be because been before being below between both but by can
    cannot could did do does doing done down during each either else enough even ever every few
    for from further get gets got had has have having he her here hers herself him himself his how
    however i if in into is it its itself just least less like made make many may me might more
    most much must my myself neither no nor not now of off often on once one only or other others
    our ours ourselves out over own per perhaps please rather same see seem seemed seems several
    shall she should since so some something still such than that the their theirs them themselves
    then there therefore these they this those though through thus to too toward under until up
    upon us very was we well were what whatever when where whether which while who whom whose why
    will with within without would yet you your yours yourself yourselves
    """.split()
)
"""Built-in English stop words used by ``from_text_files(stop_words="english")``."""


@dataclass(frozen=True, eq=False)
class Corpus:
    """A bag-of-words corpus.

    Parameters
    ----------
    counts : scipy.sparse matrix or array-like of shape (N, V)
        Non-negative integer word counts, one row per document. Stored as a
        CSR matrix of ``int64``.
    vocabulary : sequence of str of length V, optional
        The word of each column. Stored as a tuple.
    names : sequence of str of length N, optional
        The name of each document. Stored as a tuple.

    Raises
    ------
    ValueError
        If ``counts`` is not a valid count matrix, or ``vocabulary`` /
        ``names`` do not have one entry per column / row.
    TypeError
        If an entry of ``vocabulary`` or ``names`` is not a string.
    """

    counts: sp.csr_matrix
    vocabulary: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None

    def __post_init__(self):
        counts, vocabulary, names = _validated_fields(self.counts, self.vocabulary, self.names, "Corpus")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "vocabulary", vocabulary)
        object.__setattr__(self, "names", names)

    def __repr__(self) -> str:
        n_docs, n_words = self.counts.shape
        return (
            f"Corpus({n_docs} documents, {n_words} words, {int(self.counts.sum())} tokens, "
            f"vocabulary={'yes' if self.vocabulary is not None else 'no'}, "
            f"names={'yes' if self.names is not None else 'no'})"
        )


def _validated_fields(counts, vocabulary, names, func):
    matrix = check_count_matrix(counts, "counts", func).astype(np.int64)
    n_docs, n_words = matrix.shape
    vocabulary = _as_strings(vocabulary, "vocabulary", func, n_words, "words (one per column of counts)")
    names = _as_strings(names, "names", func, n_docs, "document names (one per row of counts)")
    return matrix, vocabulary, names


def _as_strings(values, name, func, length, what):
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise bad_argument(name, func, f"a sequence of {length} strings", values, kind=TypeError)
    values = tuple(values)
    if len(values) != length:
        raise bad_argument(name, func, f"a sequence of {length} {what}", f"{len(values)} entries", describe=False)
    for value in values:
        if not isinstance(value, str):
            raise bad_argument(name, func, "a sequence of strings", f"an entry {value!r}", kind=TypeError, describe=False)
    return tuple(str(value) for value in values)


def from_matrix(counts: Any, vocabulary=None, names=None) -> Corpus:
    """Build a corpus from an in-memory count matrix.

    Parameters
    ----------
    counts : scipy.sparse matrix or array-like of shape (N, V)
        Non-negative integer counts (any sparse format, or dense).
    vocabulary : sequence of str of length V, optional
        A list, tuple or NumPy array of words, e.g.
        ``CountVectorizer.get_feature_names_out()``.
    names : sequence of str of length N, optional
        Document names.

    Returns
    -------
    Corpus

    Raises
    ------
    ValueError, TypeError
        If ``counts``, ``vocabulary`` or ``names`` are invalid (the message
        names the argument).

    Examples
    --------
    >>> corpus = from_matrix([[1, 0, 2], [0, 3, 0]], vocabulary=["a", "b", "c"])
    >>> corpus.counts.shape
    (2, 3)
    """
    return Corpus(*_validated_fields(counts, vocabulary, names, "from_matrix"))


def _check_path(path, name, func) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise bad_argument(name, func, "a path (str or os.PathLike)", path, kind=TypeError)
    return Path(path)


def _open_text(path: Path, mode: str, encoding: str = "utf-8"):
    """Open ``path`` as text, through gzip when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding=encoding)
    return open(path, mode, encoding=encoding)


def _file_error(path, line_number, problem) -> ValueError:
    return ValueError(f"{path}, line {line_number}: {problem}")


# ----------------------------------------------------------------------------- text files


def _df_limit(value, name, n_docs, func) -> float:
    """Document-count bound from an int (absolute) or a float (fraction of ``n_docs``)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise bad_argument(name, func, "an int (documents) or a float in [0, 1] (fraction)", value, kind=TypeError)
    if isinstance(value, numbers.Integral):
        if value < 0:
            raise bad_argument(name, func, "a non-negative int", value)
        return float(value)
    if not 0.0 <= value <= 1.0:
        raise bad_argument(name, func, "a fraction in [0, 1] when a float", value)
    return float(value) * n_docs


def _stop_word_set(stop_words, lowercase, func) -> frozenset:
    if stop_words is None:
        return frozenset()
    if isinstance(stop_words, str):
        if stop_words != "english":
            raise bad_argument("stop_words", func, "None, 'english' or an iterable of words", stop_words)
        return ENGLISH_STOP_WORDS
    if not hasattr(stop_words, "__iter__"):
        raise bad_argument("stop_words", func, "None, 'english' or an iterable of words", stop_words, kind=TypeError)
    words = tuple(stop_words)
    words = _as_strings(words, "stop_words", func, len(words), "words")
    return frozenset(word.lower() if lowercase else word for word in words)


def _matched_files(directory, pattern, func) -> list[Path]:
    root = _check_path(directory, "directory", func)
    if not root.exists():
        raise bad_argument("directory", func, "an existing directory", str(root), kind=FileNotFoundError)
    if not root.is_dir():
        raise bad_argument("directory", func, "a directory", f"the file {str(root)!r}", kind=NotADirectoryError, describe=False)
    if not isinstance(pattern, str):
        raise bad_argument("pattern", func, "a glob pattern string", pattern, kind=TypeError)
    files = sorted((p for p in root.glob(pattern) if p.is_file()), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise bad_argument("pattern", func, f"a glob pattern matching at least one file in {str(root)!r}", pattern)
    return files


def _read_document(path: Path, encoding: str) -> str:
    try:
        return path.read_text(encoding=encoding)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: cannot be decoded with encoding={encoding!r} ({exc.reason} at byte {exc.start}).") from exc


def _tokenizer(token_pattern, lowercase: bool, stop: frozenset, func: str):
    """A function mapping a text to its tokens (regex matches, minus stop words)."""
    try:
        regex = re.compile(token_pattern)
    except (TypeError, re.error) as exc:
        raise bad_argument("token_pattern", func, "a valid regular expression", token_pattern) from exc

    def tokenize(text: str) -> list[str]:
        matches = (m.group(0) for m in regex.finditer(text.lower() if lowercase else text))
        return [token for token in matches if token not in stop]

    return tokenize


def _count_tokens(files: list[Path], tokenize, encoding: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """(documents x words) counts in order of first appearance, and those words."""
    index: dict[str, int] = {}
    rows = []
    for path in files:
        tokens = tokenize(_read_document(path, encoding))
        ids = np.fromiter((index.setdefault(token, len(index)) for token in tokens), dtype=np.int64, count=len(tokens))
        rows.append(np.unique(ids, return_counts=True))
    indptr = np.cumsum([0] + [len(ids) for ids, _ in rows])
    indices = np.concatenate([ids for ids, _ in rows])
    data = np.concatenate([count for _, count in rows]).astype(np.int64)
    counts = sp.csr_matrix((data, indices, indptr), shape=(len(files), len(index)))
    return counts, np.array(list(index), dtype=object)


def from_text_files(
    directory,
    pattern: str = "*.txt",
    min_df=1,
    max_df=1.0,
    stop_words=None,
    lowercase: bool = True,
    token_pattern: str = r"(?u)\b[a-zA-Z][a-zA-Z]+\b",
    encoding: str = "utf-8",
) -> Corpus:
    """Build a corpus from a directory of plain-text files, one document per file.

    Files are sorted by their path relative to ``directory``; that path is the
    document name. The vocabulary is sorted alphabetically.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory holding the files.
    pattern : str, default "*.txt"
        Glob pattern selecting the files (``"**/*.txt"`` recurses).
    min_df, max_df : int or float, default 1 and 1.0
        Keep words whose document frequency lies in ``[min_df, max_df]``; an
        int counts documents, a float in [0, 1] is a fraction of them.
    stop_words : None, "english" or iterable of str, optional
        Words to drop; ``"english"`` uses :data:`ENGLISH_STOP_WORDS`. With
        ``lowercase=True`` the given words are lowercased too.
    lowercase : bool, default True
        Lowercase the text before tokenising.
    token_pattern : str
        Regular expression whose matches are the tokens.
    encoding : str, default "utf-8"
        Text encoding of the files.

    Returns
    -------
    Corpus
        With the vocabulary and the file names as ``names``.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        If ``directory`` does not exist or is not a directory.
    ValueError
        If no file matches ``pattern``, a file cannot be decoded, an argument
        is invalid, or no word survives the filters.
    """
    func = "from_text_files"
    files = _matched_files(directory, pattern, func)
    tokenize = _tokenizer(token_pattern, lowercase, _stop_word_set(stop_words, lowercase, func), func)
    try:
        codecs.lookup(encoding)
    except (TypeError, LookupError) as exc:
        raise bad_argument("encoding", func, "a text encoding known to Python", encoding) from exc
    min_count = _df_limit(min_df, "min_df", len(files), func)
    max_count = _df_limit(max_df, "max_df", len(files), func)
    if max_count < min_count:
        raise bad_argument("max_df", func, f"at least min_df ({min_count:g} documents)", f"{max_count:g} documents", describe=False)

    counts, words = _count_tokens(files, tokenize, encoding)
    doc_freq = np.bincount(counts.indices, minlength=len(words))
    kept = np.flatnonzero((doc_freq >= min_count) & (doc_freq <= max_count))
    if kept.size == 0:
        raise ValueError(
            f"{func} kept no word: {len(words)} distinct words in {len(files)} files under {str(directory)!r}, "
            f"none within min_df={min_df!r} and max_df={max_df!r} after stop words; loosen the filters."
        )
    kept = kept[np.argsort(words[kept], kind="stable")]
    names = [p.relative_to(Path(directory)).as_posix() for p in files]
    return Corpus(counts[:, kept], tuple(words[kept]), tuple(names))


# ----------------------------------------------------------------------------- vocabulary files


def _read_vocabulary(vocab_path, func) -> tuple[str, ...]:
    path = _check_path(vocab_path, "vocab_path", func)
    words = []
    with _open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            word = line.strip()
            if not word:
                raise _file_error(path, line_number, "empty line; the vocabulary file needs one word per line.")
            words.append(word)
    if not words:
        raise ValueError(f"{path}: the vocabulary file is empty.")
    return tuple(words)


def _write_vocabulary(corpus: Corpus, vocab_path, func) -> None:
    path = _check_path(vocab_path, "vocab_path", func)
    if corpus.vocabulary is None:
        raise bad_argument("corpus", func, "a Corpus with a vocabulary when vocab_path is given", corpus)
    for word in corpus.vocabulary:
        if not word or word != word.strip() or "\n" in word or "\r" in word:
            raise bad_argument(
                "corpus", func, "a Corpus whose words are non-empty without surrounding whitespace or line breaks",
                f"the word {word!r}", describe=False,
            )
    with _open_text(path, "w") as handle:
        handle.writelines(word + "\n" for word in corpus.vocabulary)


def _check_corpus(corpus, func) -> Corpus:
    if not isinstance(corpus, Corpus):
        raise bad_argument("corpus", func, "a specinit.data.Corpus", corpus, kind=TypeError)
    return corpus


# ----------------------------------------------------------------------------- UCI bag of words


def _read_uci_header(handle, path) -> tuple[int, int, int]:
    header = []
    for line_number, label in enumerate(("D (number of documents)", "W (vocabulary size)", "NNZ (number of entries)"), 1):
        line = handle.readline()
        try:
            value = int(line)
        except ValueError:
            raise _file_error(path, line_number, f"expected the header integer {label}, found {line.strip()!r}.") from None
        if value < 0:
            raise _file_error(path, line_number, f"the header {label} must be non-negative, found {value}.")
        header.append(value)
    return tuple(header)


def _parse_uci_lines(path) -> tuple[np.ndarray, np.ndarray]:
    """Slow line-by-line parse of the entries; returns them and their line numbers."""
    entries, line_numbers = [], []
    with _open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            fields = line.split()
            if line_number <= 3 or not fields:
                continue
            if len(fields) != 3:
                raise _file_error(path, line_number, f"expected 3 fields 'docID wordID count', found {len(fields)}.")
            try:
                entries.append(np.array([int(field) for field in fields], dtype=np.int64))
            except (ValueError, OverflowError):
                raise _file_error(path, line_number, f"expected int64 integers 'docID wordID count', found {line.strip()!r}.") from None
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
    path = _check_path(docword_path, "docword_path", func)
    with _open_text(path, "r") as handle:
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
        raise _file_error(path, int(line_numbers[bad[0]]), bad[1])
    if len(entries) != n_entries:
        raise ValueError(f"{path}: the header (line 3) gives NNZ={n_entries} but the file has {len(entries)} entries.")
    vocabulary = None
    if vocab_path is not None:
        vocabulary = _read_vocabulary(vocab_path, func)
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

    Raises
    ------
    TypeError
        If ``corpus`` is not a :class:`Corpus`.
    ValueError
        If ``vocab_path`` is given but the corpus has no vocabulary, or a
        word cannot be written on one line.
    """
    func = "save_uci_bow"
    corpus = _check_corpus(corpus, func)
    path = _check_path(docword_path, "docword_path", func)
    if vocab_path is not None:
        _write_vocabulary(corpus, vocab_path, func)
    coo = corpus.counts.tocoo()
    n_docs, n_words = coo.shape
    with _open_text(path, "w") as handle:
        handle.write(f"{n_docs}\n{n_words}\n{coo.nnz}\n")
        handle.writelines(f"{d + 1} {w + 1} {c}\n" for d, w, c in zip(coo.row, coo.col, coo.data))


# ----------------------------------------------------------------------------- LDA-C


def _parse_ldac_line(line: str, path, line_number: int) -> tuple[np.ndarray, np.ndarray]:
    fields = line.split()
    try:
        n_terms = int(fields[0])
        pairs = np.array([(int(t), int(c)) for t, c in (field.split(":") for field in fields[1:])], dtype=np.int64)
    except (ValueError, OverflowError):
        raise _file_error(path, line_number, "expected 'M term:count ...' with int64 integers M, term and count.") from None
    terms, counts = pairs.reshape(-1, 2).T
    if n_terms != len(terms):
        raise _file_error(path, line_number, f"M={n_terms} but the line has {len(terms)} term:count pairs.")
    if terms.min(initial=0) < 0:
        raise _file_error(path, line_number, f"term ids must be non-negative, found {terms.min()}.")
    if counts.min(initial=1) < 1:
        raise _file_error(path, line_number, f"counts must be positive integers, found {counts.min()}.")
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
    path = _check_path(path, "path", func)
    vocabulary = None if vocab_path is None else _read_vocabulary(vocab_path, func)
    cols, vals = [], []
    with _open_text(path, "r") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            terms, counts = _parse_ldac_line(line, path, line_number)
            if vocabulary is not None and terms.max(initial=-1) >= len(vocabulary):
                raise _file_error(
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
    path : str or os.PathLike
        The LDA-C file to write.
    vocab_path : str or os.PathLike, optional
        Where to write the vocabulary, one word per line.

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
    corpus = _check_corpus(corpus, func)
    path = _check_path(path, "path", func)
    if vocab_path is not None:
        _write_vocabulary(corpus, vocab_path, func)
    counts = corpus.counts
    with _open_text(path, "w") as handle:
        for start, stop in zip(counts.indptr[:-1], counts.indptr[1:]):
            pairs = " ".join(f"{t}:{c}" for t, c in zip(counts.indices[start:stop], counts.data[start:stop]))
            handle.write(f"{stop - start} {pairs}".rstrip() + "\n")


# ----------------------------------------------------------------------------- bundled data


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
