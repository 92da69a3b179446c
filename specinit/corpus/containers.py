"""The corpus container: an (N, V) sparse count matrix with its vocabulary.

A :class:`Corpus` holds an (N, V) sparse matrix of word counts (documents x
vocabulary) with an optional vocabulary and optional document names. It is
built from an in-memory matrix (:func:`from_matrix`, e.g. the output of
scikit-learn's ``CountVectorizer``), a directory of plain-text files
(:func:`specinit.corpus.from_text_files`) or a file format
(:mod:`specinit.corpus.formats`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_count_matrix

__all__ = ["Corpus", "from_matrix"]


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
    labels : sequence of str of length N, optional
        A known category of each document (e.g. the package of a docstring),
        to judge clusterings against. Stored as a tuple.

    Raises
    ------
    ValueError
        If ``counts`` is not a valid count matrix, ``vocabulary`` /
        ``names`` / ``labels`` do not have one entry per column / row, or a
        word of ``vocabulary`` repeats.
    TypeError
        If an entry of ``vocabulary`` or ``names`` is not a string.
    """

    counts: sp.csr_matrix
    vocabulary: tuple[str, ...] | None = None
    names: tuple[str, ...] | None = None
    labels: tuple[str, ...] | None = None

    def __post_init__(self):
        counts, vocabulary, names = _validated_fields(self.counts, self.vocabulary, self.names, "Corpus")
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "vocabulary", vocabulary)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "labels", as_strings(self.labels, "labels", "Corpus", counts.shape[0],
                                                      "document labels (one per row of counts)"))

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
    vocabulary = as_strings(vocabulary, "vocabulary", func, n_words, "words (one per column of counts)")
    repeated = None if vocabulary is None else duplicate_words(vocabulary)
    if repeated is not None:
        raise bad_argument("vocabulary", func, "distinct words (one per column of counts)",
                           f"{vocabulary[repeated[1]]!r} at positions {repeated[0]} and {repeated[1]}", describe=False)
    names = as_strings(names, "names", func, n_docs, "document names (one per row of counts)")
    return matrix, vocabulary, names


def duplicate_words(words) -> tuple[int, int] | None:
    """Positions ``(first, second)`` of the first word that repeats an earlier one, or None."""
    seen: dict[str, int] = {}
    for position, word in enumerate(words):
        first = seen.setdefault(word, position)
        if first != position:
            return first, position
    return None


def as_strings(values, name, func, length, what):
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


def from_matrix(counts: Any, vocabulary: Sequence[str] | None = None, names: Sequence[str] | None = None) -> Corpus:
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
        If ``counts``, ``vocabulary`` or ``names`` are invalid, or a word of
        ``vocabulary`` repeats (the message names the argument).

    Examples
    --------
    >>> corpus = from_matrix([[1, 0, 2], [0, 3, 0]], vocabulary=["a", "b", "c"])
    >>> corpus.counts.shape
    (2, 3)
    """
    return Corpus(*_validated_fields(counts, vocabulary, names, "from_matrix"))




def check_corpus(corpus, func) -> Corpus:
    if not isinstance(corpus, Corpus):
        raise bad_argument("corpus", func, "a specinit.corpus.Corpus", corpus, kind=TypeError)
    return corpus
