"""Real English corpora available offline: Python docstrings and Unix manual pages.

Topic models must be judged on real text, and the tests and tutorials may
not download anything. Two corpora are always at hand on a machine that runs
specinit:

* :func:`load_python_docs` -- the docstrings of installed Python packages
  (by default the standard library), split into paragraphs. Needs nothing
  but Python; the source files are parsed with :mod:`ast`, never imported.
  The standard library alone gives tens of thousands of paragraphs.
* :func:`load_man_pages` -- the manual pages under ``/usr/share/man``
  (Debian packages ``manpages``, ``manpages-dev`` and every package's own
  pages), read from the roff source, split into paragraphs or sections.
* :func:`load_docstring_summaries` -- short texts with known categories: the
  one-sentence summaries that open the docstrings of installed packages,
  labelled by package (3-8 tokens a document after pruning).

For sequence models, :func:`load_letter_sequences` turns docstrings into
sequences of letters (27 symbols).

Both are deterministic (files sorted, documents in file order), lowercase,
drop :data:`~specinit.corpus.text_files.ENGLISH_STOP_WORDS`, prune the
vocabulary by document frequency and keep documents with at least
``min_tokens`` tokens after pruning.
"""

from __future__ import annotations

import ast
import os
import importlib.util
import re
import sysconfig
from pathlib import Path
from typing import Collection, Literal, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_choice, check_int
from specinit._files import check_max_bytes, check_path, read_held
from specinit.corpus.containers import Corpus, as_strings
from specinit.corpus.text_files import ENGLISH_STOP_WORDS

__all__ = ["load_python_docs", "load_man_pages", "load_docstring_summaries", "load_letter_sequences", "corpus_from_texts",
           "LETTERS", "LETTER_MODULES", "SUMMARY_PACKAGES"]

_TOKEN = re.compile(r"[a-z][a-z]+")
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
# Stdlib directories that are not documentation of the library itself (tests, vendored or generated code).
_STDLIB_SKIP = ("test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__", "ensurepip",
                "turtledemo", "pydoc_data")


def _check_fraction(value, name, func) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
        raise bad_argument(name, func, "a fraction in (0, 1]", value)
    return float(value)


def corpus_from_texts(texts: Sequence[str], names: Sequence[str] | None = None, *, min_df: int = 5, max_df: float = 0.5,
                      max_words: int = 10_000, min_tokens: int = 5, stop_words: Collection[str] = ENGLISH_STOP_WORDS,
                      max_documents: int | None = None, labels: Sequence[str] | None = None) -> Corpus:
    """Tokenize texts and build a pruned bag-of-words :class:`Corpus`.

    Tokens are lowercase runs of at least two ASCII letters, minus
    ``stop_words``. The vocabulary keeps the ``max_words`` words of largest
    document frequency among those in ``[min_df, max_df * N]`` (ties broken
    alphabetically) and is sorted alphabetically; documents with fewer than
    ``min_tokens`` tokens left are dropped.

    Parameters
    ----------
    texts : sequence of str
        The documents.
    names : sequence of str, optional
        One name per text (kept for the documents that survive).
    min_df : int, default 5
        Minimum number of documents a word must occur in.
    max_df : float, default 0.5
        Maximum fraction of documents a word may occur in.
    max_words : int, default 10000
        Vocabulary size cap.
    min_tokens : int, default 5
        Documents with fewer kept tokens are dropped.
    stop_words : collection of str
        Words removed before counting.
    max_documents : int, optional
        Keep only the first ``max_documents`` surviving documents.
    labels : sequence of str, optional
        One category per text (kept for the documents that survive).

    Returns
    -------
    Corpus
        Counts, vocabulary, document names (and labels when given).

    Raises
    ------
    ValueError
        Bad arguments, or no word / no document survives the pruning.
    """
    func = "corpus_from_texts"
    min_df = check_int(min_df, "min_df", func, minimum=1)
    max_df = _check_fraction(max_df, "max_df", func)
    max_words = check_int(max_words, "max_words", func, minimum=1)
    min_tokens = check_int(min_tokens, "min_tokens", func, minimum=1)
    if max_documents is not None:
        max_documents = check_int(max_documents, "max_documents", func, minimum=1)
    texts = list(texts)
    names = [f"doc{i}" for i in range(len(texts))] if names is None else list(names)
    if len(names) != len(texts):
        raise bad_argument("names", func, f"one name per text ({len(texts)})", f"{len(names)} names", describe=False)
    if labels is not None:
        labels = as_strings(labels, "labels", func, len(texts), "labels (one per text)")
    stop = frozenset(stop_words)
    index: dict[str, int] = {}
    indptr, indices = [0], []
    for text in texts:
        ids = [index.setdefault(tok, len(index)) for tok in _TOKEN.findall(text.lower()) if tok not in stop]
        indices.extend(ids)
        indptr.append(len(indices))
    words = np.array(list(index), dtype=object)
    counts = sp.csr_matrix((np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                           shape=(len(texts), len(words)))
    counts.sum_duplicates()
    doc_freq = np.bincount(counts.indices, minlength=len(words))
    ok = np.flatnonzero((doc_freq >= min_df) & (doc_freq <= max_df * len(texts)))
    if ok.size == 0:
        raise ValueError(f"{func}: no word occurs in at least min_df={min_df} and at most max_df={max_df} of the "
                         f"{len(texts)} documents; loosen min_df/max_df or give more text.")
    # Largest document frequency first, ties alphabetical; then the kept words sorted alphabetically.
    order = sorted(ok.tolist(), key=lambda j: (-doc_freq[j], words[j]))[:max_words]
    kept = np.array(sorted(order, key=lambda j: words[j]), dtype=np.int64)
    counts = counts[:, kept].tocsr()
    lengths = np.asarray(counts.sum(axis=1)).ravel()
    rows = np.flatnonzero(lengths >= min_tokens)
    if max_documents is not None:
        rows = rows[:max_documents]
    if rows.size == 0:
        raise ValueError(f"{func}: no document keeps min_tokens={min_tokens} tokens after pruning; lower min_tokens.")
    counts = counts[rows]
    used = np.flatnonzero(np.asarray(counts.sum(axis=0)).ravel() > 0)
    return Corpus(counts[:, used].astype(np.int64), tuple(words[kept][used]), tuple(names[i] for i in rows),
                  None if labels is None else tuple(labels[i] for i in rows))


def _stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    return [p for p in root.rglob("*.py") if not set(p.relative_to(root).parts[:-1]) & set(_STDLIB_SKIP)]


def _package_files(package: str, func: str) -> list[Path]:
    if not isinstance(package, str) or not package:
        raise bad_argument("packages", func, "a sequence of importable package names", package, kind=TypeError)
    if package == "stdlib":
        return _stdlib_files()
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise ImportError(f"{func}: the package {package!r} is not installed; pip install it, or leave it out of "
                          "packages (packages=('stdlib',) needs nothing).")
    roots = list(spec.submodule_search_locations or [])
    if not roots and spec.origin and spec.origin.endswith(".py"):
        return [Path(spec.origin)]
    return [p for root in roots for p in Path(root).rglob("*.py") if "tests" not in p.parts and "test" not in p.parts]


def _docstring_paragraphs(path: Path, label: str):
    """Docstring paragraphs of a source file; a file that is not regular, too large or unparsable gives none."""
    try:
        source = read_held(path, "packages", "specinit.corpus", check_max_bytes(None, "specinit.corpus")).decode("utf-8")
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return
    nodes = [(label, tree)]
    while nodes:
        name, node = nodes.pop(0)
        doc = ast.get_docstring(node, clean=True)
        if doc:
            for i, para in enumerate(_PARAGRAPH.split(doc)):
                yield f"{name}#{i}", para
        children = [c for c in ast.iter_child_nodes(node)
                    if isinstance(c, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
        nodes[:0] = [(f"{name}.{c.name}", c) for c in children]


def _package_docstrings(packages, func: str):
    """``(package, name, paragraph)`` for every docstring paragraph of ``packages``, files in sorted order.

    Raises the errors of the loaders: ``packages`` not a sequence of names, a package not installed, no
    docstring at all.
    """
    if isinstance(packages, str) or not hasattr(packages, "__iter__"):
        raise bad_argument("packages", func, "a sequence of package names such as ('stdlib', 'numpy')", packages,
                           kind=TypeError)
    found = False
    for package in packages:
        files = _package_files(package, func)
        root = Path(sysconfig.get_paths()["stdlib"]) if package == "stdlib" else None
        for path in sorted(files, key=lambda p: p.as_posix()):
            rel = path.relative_to(root).as_posix() if root else path.name
            for name, para in _docstring_paragraphs(path, f"{package}/{rel}:"):
                found = True
                yield package, name, para
    if not found:
        raise ValueError(f"{func}: no docstring found in packages={tuple(packages)!r}.")


def load_python_docs(packages: Sequence[str] = ("stdlib",), *, min_df: int = 5, max_df: float = 0.5,
                     max_words: int = 10_000, min_tokens: int = 5, max_documents: int | None = None) -> Corpus:
    """Paragraphs of the docstrings of installed Python packages as a corpus.

    Every ``.py`` file of each package is parsed with :mod:`ast` (nothing is
    imported or executed); the docstrings of modules, classes and functions
    are split at blank lines, one document per paragraph. Files are read in
    sorted order, so the corpus is the same on every run with the same
    installed versions. ``"stdlib"`` stands for the Python standard library
    (without its tests, idlelib and lib2to3): about 50,000 paragraphs, about
    25,000 of them with 5 or more tokens after pruning (Python 3.11).

    Parameters
    ----------
    packages : sequence of str, default ("stdlib",)
        ``"stdlib"`` and/or names of installed packages (``"numpy"``, ...).
    min_df, max_df, max_words, min_tokens, max_documents
        Vocabulary and document pruning, as for :func:`corpus_from_texts`.

    Returns
    -------
    Corpus
        Names are ``"<package>/<file>:<qualified name>#<paragraph>"``.

    Raises
    ------
    ImportError
        A named package is not installed.
    TypeError
        ``packages`` is not a sequence of names.
    ValueError
        Bad pruning arguments, or nothing survives them.

    References
    ----------
    Used as the real-text corpus of the topic-model benchmarks, judged by
    held-out document completion (Wallach, Murray, Salakhutdinov, Mimno,
    "Evaluation methods for topic models", ICML 2009, Sec. 5).
    """
    func = "load_python_docs"
    texts, names = [], []
    for _, name, para in _package_docstrings(packages, func):
        names.append(name)
        texts.append(para)
    return corpus_from_texts(texts, names, min_df=min_df, max_df=max_df, max_words=max_words, min_tokens=min_tokens,
                             max_documents=max_documents)


SUMMARY_PACKAGES = ("stdlib", "numpy", "scipy", "jax", "pandas", "matplotlib")
"""The packages :func:`load_docstring_summaries` reads by default (the standard library and dependencies of specinit)."""


def load_docstring_summaries(packages: Sequence[str] = SUMMARY_PACKAGES, *, min_df: int = 5, max_df: float = 0.5,
                             max_words: int = 5_000, min_tokens: int = 3, max_documents: int | None = None) -> Corpus:
    """One-sentence summaries of the docstrings of installed packages, labelled by package: short texts.

    Every module, class and function docstring of each package (parsed with
    :mod:`ast` from the sorted source files, never imported) contributes its
    summary: the first sentence of its first paragraph (PEP 257's summary
    line, e.g. "Return the cumulative sum of the elements along a given
    axis."). Each document is labelled by the package it comes from, a known
    category to judge clusterings against. With the default packages and
    pruning: about 23,000 documents of 3 or more tokens, 5.6 tokens on
    average (median 5), V about 3,300 (Python 3.11, NumPy 2.4, SciPy 1.17).

    Parameters
    ----------
    packages : sequence of str, default :data:`SUMMARY_PACKAGES`
        ``"stdlib"`` and/or names of installed packages; each is one label.
    min_df, max_df, max_words, min_tokens, max_documents
        Vocabulary and document pruning, as for :func:`corpus_from_texts`.

    Returns
    -------
    Corpus
        With ``labels`` (the package of each document); names are
        ``"<package>/<file>:<qualified name>"``.

    Raises
    ------
    ImportError
        A named package is not installed.
    TypeError
        ``packages`` is not a sequence of names.
    ValueError
        Bad pruning arguments, or nothing survives them.
    """
    func = "load_docstring_summaries"
    texts, names, labels = [], [], []
    for package, name, para in _package_docstrings(packages, func):
        if name.endswith("#0"):
            names.append(name[:-2])
            texts.append(_SENTENCE_END.split(para, maxsplit=1)[0])
            labels.append(package)
    return corpus_from_texts(texts, names, min_df=min_df, max_df=max_df, max_words=max_words, min_tokens=min_tokens,
                             max_documents=max_documents, labels=labels)


LETTERS = "abcdefghijklmnopqrstuvwxyz "
"""The 27 symbols of :func:`load_letter_sequences`: symbol ``i`` is ``LETTERS[i]`` (26 is the space)."""

_LETTER_INDEX = np.zeros(128, dtype=np.int64)
_LETTER_INDEX[np.frombuffer(LETTERS.encode("ascii"), dtype=np.uint8)] = np.arange(len(LETTERS))

LETTER_MODULES = ("argparse", "textwrap", "collections", "json", "inspect", "unittest", "logging", "pathlib",
                  "difflib", "random", "statistics", "decimal", "fractions", "calendar")
"""The standard-library modules whose docstrings :func:`load_letter_sequences` reads by default."""


def load_letter_sequences(modules: Sequence[str] = LETTER_MODULES, *, max_letters: int | None = None,
                          min_length: int = 3) -> list[np.ndarray]:
    """Real English as letter sequences: one sequence per docstring paragraph, 27 symbols.

    The docstrings of the named modules (parsed with :mod:`ast` from their
    source files, in sorted file order, never imported) are lowercased,
    every run of characters outside a-z becomes one space, and each
    paragraph becomes a sequence of symbol indices into :data:`LETTERS`:
    the classic test bed of hidden Markov models on text (two states
    separate vowels from consonants).

    Parameters
    ----------
    modules : sequence of str, default :data:`LETTER_MODULES`
        Importable module or package names.
    max_letters : int, optional
        Stop adding paragraphs once this many letters are collected.
    min_length : int, default 3
        Shortest paragraph kept (in symbols).

    Returns
    -------
    list of numpy.ndarray of int
        The sequences, in file order.

    Raises
    ------
    ImportError
        A named module is not installed.
    ValueError
        Bad arguments, or no paragraph survives ``min_length``.
    """
    func = "load_letter_sequences"
    if isinstance(modules, str) or not hasattr(modules, "__iter__"):
        raise bad_argument("modules", func, "a sequence of module names such as ('argparse',)", modules, kind=TypeError)
    min_length = check_int(min_length, "min_length", func, minimum=1)
    if max_letters is not None:
        max_letters = check_int(max_letters, "max_letters", func, minimum=1)
    sequences, total = [], 0
    for module in modules:
        for path in sorted(_package_files(module, func), key=lambda p: p.as_posix()):
            for _, paragraph in _docstring_paragraphs(path, module):
                letters = re.sub(r"[^a-z]+", " ", paragraph.lower()).strip()
                if len(letters) < min_length:
                    continue
                if max_letters is not None and total >= max_letters:
                    return sequences
                sequences.append(_LETTER_INDEX[np.frombuffer(letters.encode("ascii"), dtype=np.uint8)])
                total += len(letters)
    if not sequences:
        raise ValueError(f"{func}: no docstring paragraph of {min_length} or more letters in modules={tuple(modules)!r}.")
    return sequences


# roff: font and size escapes, named characters, strings, zero-width and other escapes.
_ROFF_ESCAPES = re.compile(r"\\f(\[[^\]]*\]|\(..|.)|\\s[+-]?\d+|\\\((..)|\\\[[^\]]*\]|\\\*(\(..|\[[^\]]*\]|.)|\\[&|^%:{}\"]|\\e|\\-|\\.")
_SECTION = re.compile(r"^\.(SH|SS|Sh|Ss)\b", re.IGNORECASE)
_BREAK = re.compile(r"^\.(PP|P|LP|TP|IP|HP|Pp|Bl|It|sp|br)\b")
_FONT_MACRO = re.compile(r"^\.(B|I|BR|BI|IB|IR|RB|RI|SM|SB|Nm|Ar|Fl|Cm|Xr|Pa|Em|Sy|Dv|Ev|Va|Fn|Fa)\s+(.*)$")


def _roff_documents(text: str, unit: str):
    """Yield plain-text paragraphs (``unit="paragraph"``) or sections of a roff page."""
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith(('.\\"', "'\\\"", '.\\\\"')):
            continue
        if _SECTION.match(line) or (unit == "paragraph" and (_BREAK.match(line) or not line.strip())):
            if current:
                yield " ".join(current)
            current = []
            continue
        macro = _FONT_MACRO.match(line)
        if macro:
            line = macro.group(2).replace('"', " ")
        elif line.startswith((".", "'")):
            continue
        current.append(_ROFF_ESCAPES.sub(" ", line))
    if current:
        yield " ".join(current)


def load_man_pages(root: str | os.PathLike[str] = "/usr/share/man", *,
                   sections: Sequence[str] = ("1", "2", "3", "4", "5", "6", "7", "8"),
                   unit: Literal["paragraph", "section"] = "paragraph", min_df: int = 5, max_df: float = 0.5,
                   max_words: int = 10_000, min_tokens: int = 5, max_documents: int | None = None,
                   max_pages: int | None = None) -> Corpus:
    """The English manual pages installed under ``root`` as a corpus.

    Reads ``root/man<s>/*`` (plain or ``.gz`` roff source; the language
    subdirectories such as ``root/de`` are not read), drops comments and
    macro lines, keeps the text of font macros (``.B``, ``.BR``, ...), removes
    roff escapes, and splits each page into paragraphs or sections. Pages
    that only include another (``.so``) are skipped, and so are pages that
    are unreadable, not regular files, or larger than 256 MiB once inflated
    (:func:`specinit.memory_limit` ``// 16``). Files are read in sorted order. A Debian system with ``manpages`` and ``manpages-dev`` installed
    gives well over 20,000 paragraphs.

    Parameters
    ----------
    root : str or os.PathLike, default "/usr/share/man"
        The manual tree.
    sections : sequence of str, default "1" to "8"
        Manual sections to read.
    unit : {"paragraph", "section"}
        One document per paragraph or per ``.SH`` section.
    min_df, max_df, max_words, min_tokens, max_documents
        As for :func:`corpus_from_texts`.
    max_pages : int, optional
        Read at most this many pages (the first in sorted order).

    Returns
    -------
    Corpus
        Names are ``"<section>/<page>#<document>"``.

    Raises
    ------
    FileNotFoundError
        ``root`` holds no manual page in ``sections`` (install them with
        ``apt-get install man-db manpages manpages-dev``).
    ValueError
        Bad arguments, or nothing survives the pruning.

    References
    ----------
    Held-out evaluation as in Wallach et al., "Evaluation methods for topic
    models", ICML 2009, Sec. 5.
    """
    func = "load_man_pages"
    base = check_path(root, "root", func)
    unit = check_choice(unit, "unit", func, ("paragraph", "section"))
    if max_pages is not None:
        max_pages = check_int(max_pages, "max_pages", func, minimum=1)
    files = sorted((p for s in sections for p in (base / f"man{s}").glob("*") if p.is_file()), key=lambda p: p.as_posix())
    if not files:
        raise FileNotFoundError(
            f"{func}: no manual page under {str(base)!r} in sections {tuple(sections)!r}; on Debian/Ubuntu run "
            "'apt-get install man-db manpages manpages-dev' (and unminimize a minimal image), or pass root=.")
    texts, names = [], []
    for path in files[:max_pages]:
        try:
            raw = read_held(path, "root", func, check_max_bytes(None, func), gunzip=path.suffix == ".gz")
        except (OSError, ValueError):
            continue
        text = raw.decode("utf-8", errors="replace")
        if text.lstrip().startswith(".so "):
            continue
        page = path.name[:-3] if path.suffix == ".gz" else path.name
        for i, doc in enumerate(_roff_documents(text, unit)):
            names.append(f"{path.parent.name[3:]}/{page}#{i}")
            texts.append(doc)
    if not texts:
        raise FileNotFoundError(f"{func}: the manual pages under {str(base)!r} hold no text (only .so links?).")
    return corpus_from_texts(texts, names, min_df=min_df, max_df=max_df, max_words=max_words, min_tokens=min_tokens,
                             max_documents=max_documents)
