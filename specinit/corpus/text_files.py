"""Plain-text documents to a :class:`~specinit.corpus.Corpus`: tokenize, count, prune the vocabulary."""

from __future__ import annotations

import codecs
import numbers
import os
import re
import stat
from pathlib import Path
from typing import Collection, Literal

import numpy as np
import scipy.sparse as sp

from specinit._files import check_max_bytes, check_path, file_error, file_kind, read_held
from specinit._validation import bad_argument
from specinit.corpus.containers import Corpus, as_strings

__all__ = ["ENGLISH_STOP_WORDS", "from_text_files"]

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
    words = as_strings(words, "stop_words", func, len(words), "words")
    return frozenset(word.lower() if lowercase else word for word in words)


def _matched_files(directory, pattern, follow_symlinks, func) -> list[Path]:
    """The files ``pattern`` matches under ``directory``, sorted; directories skipped, links checked."""
    root = check_path(directory, "directory", func)
    if not root.exists():
        raise bad_argument("directory", func, "an existing directory", str(root), kind=FileNotFoundError)
    if not root.is_dir():
        raise bad_argument("directory", func, "a directory", f"the file {str(root)!r}", kind=NotADirectoryError, describe=False)
    if not isinstance(pattern, str):
        raise bad_argument("pattern", func, "a glob pattern string", pattern, kind=TypeError)
    if not isinstance(follow_symlinks, bool):
        raise bad_argument("follow_symlinks", func, "a bool", follow_symlinks, kind=TypeError)
    real_root = os.path.realpath(root)
    files = sorted((p for p in root.glob(pattern) if not p.is_dir()), key=lambda p: p.relative_to(root).as_posix())
    if not files:
        raise bad_argument("pattern", func, f"a glob pattern matching at least one file in {str(root)!r}", pattern)
    for path in files:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise file_error(path, None, f"a {file_kind(mode)}, not a regular file; {func} reads regular files only "
                                         "(narrow the pattern to leave it out).")
        real = os.path.realpath(path)
        if not follow_symlinks and os.path.commonpath([real_root, real]) != real_root:
            raise file_error(path, None, f"a symbolic link to {real!r}, outside the directory {str(root)!r}; pass "
                                         f"follow_symlinks=True to {func} to read files wherever links point.")
    return files


def _read_document(path: Path, encoding: str, max_bytes: int, func: str) -> str:
    """The text of one file, refused beyond ``max_bytes // 16`` bytes."""
    data = read_held(path, "directory", func, max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise file_error(path, None, f"cannot be decoded with encoding={encoding!r} ({exc.reason} at byte "
                                     f"{exc.start}).") from None


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


def _count_tokens(files: list[Path], tokenize, encoding: str, max_bytes: int, func: str):
    """(documents x words) counts in order of first appearance, and those words; the text read bounded."""
    index: dict[str, int] = {}
    rows, total = [], 0
    for path in files:
        text = _read_document(path, encoding, max_bytes, func)
        total += len(text)
        if total > max_bytes:
            raise file_error(path, None, f"the files up to this one hold more than max_bytes={max_bytes} bytes of "
                                         f"text; pass a larger max_bytes to {func}.")
        tokens = tokenize(text)
        ids = np.fromiter((index.setdefault(token, len(index)) for token in tokens), dtype=np.int64, count=len(tokens))
        rows.append(np.unique(ids, return_counts=True))
    indptr = np.cumsum([0] + [len(ids) for ids, _ in rows])
    indices = np.concatenate([ids for ids, _ in rows])
    data = np.concatenate([count for _, count in rows]).astype(np.int64)
    counts = sp.csr_matrix((data, indices, indptr), shape=(len(files), len(index)))
    return counts, np.array(list(index), dtype=object)


def from_text_files(
    directory: str | os.PathLike[str],
    pattern: str = "*.txt",
    min_df: int | float = 1,
    max_df: int | float = 1.0,
    stop_words: Literal["english"] | Collection[str] | None = None,
    lowercase: bool = True,
    token_pattern: str = r"(?u)\b[a-zA-Z][a-zA-Z]+\b",
    encoding: str = "utf-8",
    *,
    follow_symlinks: bool = False,
    max_bytes: int | None = None,
) -> Corpus:
    """Build a corpus from a directory of plain-text files, one document per file.

    Files are sorted by their path relative to ``directory``; that path is the
    document name. The vocabulary is sorted alphabetically. Only regular
    files are read (a FIFO, device or socket the pattern matches is refused;
    directories are skipped), and by default only files inside
    ``directory``: a symbolic link that resolves outside it is refused.

    Parameters
    ----------
    directory : str or os.PathLike
        The directory holding the files.
    pattern : str, default ``"*.txt"``
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
    follow_symlinks : bool, default False
        Read matched links that resolve outside ``directory`` (refused when
        False).
    max_bytes : int, optional
        Memory budget (default :func:`specinit.memory_limit`):
        each file may hold ``max_bytes // 16`` bytes, all of them together
        ``max_bytes``.

    Returns
    -------
    Corpus
        With the vocabulary and the file names as ``names``.

    Raises
    ------
    FileNotFoundError, NotADirectoryError
        If ``directory`` does not exist or is not a directory.
    ValueError
        If no file matches ``pattern``, a file (named) cannot be decoded, is
        not a regular file, is a link leading outside ``directory`` or
        exceeds the budget, an argument is invalid, or no word survives the
        filters.
    """
    func = "from_text_files"
    max_bytes = check_max_bytes(max_bytes, func)
    files = _matched_files(directory, pattern, follow_symlinks, func)
    tokenize = _tokenizer(token_pattern, lowercase, _stop_word_set(stop_words, lowercase, func), func)
    try:
        codecs.lookup(encoding)
    except (TypeError, LookupError) as exc:
        raise bad_argument("encoding", func, "a text encoding known to Python", encoding) from exc
    min_count = _df_limit(min_df, "min_df", len(files), func)
    max_count = _df_limit(max_df, "max_df", len(files), func)
    if max_count < min_count:
        raise bad_argument("max_df", func, f"at least min_df ({min_count:g} documents)", f"{max_count:g} documents", describe=False)

    counts, words = _count_tokens(files, tokenize, encoding, max_bytes, func)
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
