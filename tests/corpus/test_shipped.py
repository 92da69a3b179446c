"""Offline real corpora: Python docstrings (tested on the real standard library) and manual pages (on a tiny
roff tree made here, so no Debian package is needed)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from specinit.corpus import (
    ENGLISH_STOP_WORDS,
    LETTERS,
    Corpus,
    corpus_from_texts,
    load_docstring_summaries,
    load_letter_sequences,
    load_man_pages,
    load_python_docs,
)


@pytest.fixture(scope="module")
def stdlib_slice():
    # json, email and logging of the standard library: real text, a few thousand paragraphs, parsed in < 1 s
    return load_python_docs(("json", "email", "logging"), min_df=3)


def test_python_docs_is_a_real_deterministic_corpus(stdlib_slice):
    corpus = stdlib_slice
    n, v = corpus.counts.shape
    assert n > 300 and v > 300
    assert np.asarray(corpus.counts.sum(axis=1)).min() >= 5  # min_tokens
    assert list(corpus.vocabulary) == sorted(corpus.vocabulary)
    assert not set(corpus.vocabulary) & ENGLISH_STOP_WORDS
    assert "json" in corpus.vocabulary and "logger" in corpus.vocabulary
    assert corpus.names[0].startswith("json/")
    again = load_python_docs(("json", "email", "logging"), min_df=3)
    assert again.vocabulary == corpus.vocabulary and (again.counts != corpus.counts).nnz == 0


def test_python_docs_defaults_to_the_standard_library():
    corpus = load_python_docs(max_documents=20)
    assert corpus.counts.shape[0] == 20
    assert corpus.names[0].split("/")[0] == "stdlib"


def test_python_docs_pruning_and_errors():
    small = load_python_docs(("json",), min_df=2, max_words=50, max_documents=20)
    assert small.counts.shape[0] == 20 and small.counts.shape[1] <= 50
    with pytest.raises(ImportError, match="not installed"):
        load_python_docs(("no_such_package_xyz",))
    with pytest.raises(TypeError, match="'packages' argument"):
        load_python_docs("json")


def test_letter_sequences_are_the_docstrings_letters():
    import json

    sequences = load_letter_sequences(("json",))
    text = [" ".join("".join(c if c.isascii() and c.isalpha() else " " for c in json.__doc__.lower().split("\n\n")[0])
                     .split())]
    assert "".join(LETTERS[i] for i in sequences[0]) == text[0]  # the module docstring's first paragraph comes first
    assert all(s.dtype == np.int64 and s.min() >= 0 and s.max() < 27 and s.size >= 3 for s in sequences)
    assert all(s[0] != 26 and s[-1] != 26 for s in sequences)  # stripped of spaces
    vowels = np.isin(np.concatenate(sequences), [LETTERS.index(c) for c in "aeiou"]).mean()
    assert 0.25 < vowels < 0.45  # English text
    capped = load_letter_sequences(("json", "textwrap"), max_letters=1000)
    assert 1000 <= sum(s.size for s in capped) < 1000 + max(s.size for s in capped)
    assert all(np.array_equal(a, b) for a, b in zip(capped, sequences))
    with pytest.raises(ImportError, match="not installed"):
        load_letter_sequences(("no_such_package_xyz",))
    with pytest.raises(TypeError, match="'modules' argument"):
        load_letter_sequences("json")
    with pytest.raises(ValueError, match="no docstring paragraph of 100000 or more letters"):
        load_letter_sequences(("json",), min_length=100_000)


def test_corpus_from_texts_counts_and_prunes():
    texts = ["alpha beta beta gamma", "beta gamma delta the", "gamma alpha", "x"]
    corpus = corpus_from_texts(texts, min_df=2, max_df=1.0, min_tokens=2)
    assert corpus.vocabulary == ("alpha", "beta", "gamma")  # delta (df 1) and 'the' (stop word) gone
    np.testing.assert_array_equal(corpus.counts.toarray(), [[1, 2, 1], [0, 1, 1], [1, 0, 1]])
    assert corpus.names == ("doc0", "doc1", "doc2")
    with pytest.raises(ValueError, match="no word occurs"):
        corpus_from_texts(texts, min_df=10)


ROFF = r""".\" a comment that must not be read
.TH FROB 1
.SH NAME
frob \- frobnicate the widget
.SH DESCRIPTION
.B frob
reads a \fBwidget\fR file and frobnicates the widget
quickly.
.PP
Every widget has a \fIknob\fP; the knob is turned
clockwise by the widget daemon.
.SH OPTIONS
.TP
.BR \-k ", " \-\-knob
turn the knob of the widget
"""


def write_tree(root):
    (root / "man1").mkdir(parents=True)
    (root / "man1" / "frob.1.gz").write_bytes(gzip.compress(ROFF.encode()))
    (root / "man1" / "frobnicate.1").write_text(".so man1/frob.1\n")
    (root / "man5").mkdir()
    (root / "man5" / "widget.5").write_text(".TH WIDGET 5\n.SH DESCRIPTION\nA widget file holds one knob per line.\n")
    (root / "de" / "man1").mkdir(parents=True)
    (root / "de" / "man1" / "frob.1").write_text(".SH BESCHREIBUNG\nDas Widget wird frobniziert.\n")


def test_man_pages_from_a_roff_tree(tmp_path):
    write_tree(tmp_path)
    corpus = load_man_pages(tmp_path, min_df=1, max_df=1.0, min_tokens=2)
    text = {name: {w for w, c in zip(corpus.vocabulary, row) if c} for name, row in zip(corpus.names, corpus.counts.toarray())}
    # paragraphs: NAME, DESCRIPTION (2 paragraphs), OPTIONS; .so links and other languages skipped
    assert set(text) == {"1/frob.1#0", "1/frob.1#1", "1/frob.1#2", "1/frob.1#3", "5/widget.5#0"}
    assert {"frob", "reads", "widget", "frobnicates", "quickly"} <= text["1/frob.1#1"]
    assert "comment" not in corpus.vocabulary and "fbwidget" not in corpus.vocabulary and "th" not in corpus.vocabulary
    assert "knob" in text["1/frob.1#3"] and "das" not in corpus.vocabulary
    sections = load_man_pages(tmp_path, unit="section", min_df=1, max_df=1.0, min_tokens=2)
    assert len(sections.names) == 4  # NAME, DESCRIPTION, OPTIONS of frob; DESCRIPTION of widget
    only5 = load_man_pages(tmp_path, sections=("5",), min_df=1, max_df=1.0, min_tokens=2)
    assert only5.names == ("5/widget.5#0",)


def test_man_pages_missing_tree_names_what_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install man-db manpages manpages-dev"):
        load_man_pages(tmp_path / "nothing")


def test_docstring_summaries_are_short_labelled_documents():
    """One document per docstring: its first sentence, labelled by the package it comes from."""
    packages = ("json", "email", "logging")
    corpus = load_docstring_summaries(packages, min_df=3)
    lengths = np.asarray(corpus.counts.sum(axis=1)).ravel()
    assert corpus.counts.shape[0] > 200 and lengths.min() >= 3 and 3 <= np.median(lengths) <= 8
    assert set(corpus.labels) == set(packages) and len(corpus.labels) == corpus.counts.shape[0]
    assert all(name.startswith(label + "/") for name, label in zip(corpus.names, corpus.labels))
    # json/decoder.py's JSONDecoder.decode: "Return the Python representation of ``s`` (a ``str`` instance
    # containing a JSON document)." -- one sentence, stop words dropped
    row = corpus.names.index("json/decoder.py:.JSONDecoder.decode")
    words = {corpus.vocabulary[j] for j in corpus.counts[row].indices}
    assert {"python", "representation", "json", "document"} <= words
    again = load_docstring_summaries(packages, min_df=3)
    assert again.labels == corpus.labels and (again.counts != corpus.counts).nnz == 0


def test_docstring_summaries_and_labels_bad_input():
    with pytest.raises(TypeError, match="packages"):
        load_docstring_summaries("json")
    with pytest.raises(ImportError, match="not installed"):
        load_docstring_summaries(("no_such_package_xyz",))
    with pytest.raises(ValueError, match=r"labels.*3 labels \(one per text\).*2 entries"):
        corpus_from_texts(["a b", "c d", "e f"], labels=["x", "y"], min_df=1, min_tokens=1)
    with pytest.raises(ValueError, match=r"labels.*2 document labels.*1 entries"):
        Corpus([[1, 0], [0, 2]], labels=["x"])
    with pytest.raises(TypeError, match="labels"):
        Corpus([[1, 0], [0, 2]], labels=["x", 3])
