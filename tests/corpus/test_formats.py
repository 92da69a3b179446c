"""Tests for specinit.corpus: Corpus, text files, UCI / LDA-C round trips and errors, Reuters."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.corpus import (
    ENGLISH_STOP_WORDS,
    Corpus,
    from_matrix,
    from_text_files,
    load_ldac,
    load_reuters,
    load_uci_bow,
    save_ldac,
    save_uci_bow,
)


def random_corpus(seed=0, n_docs=12, n_words=9):
    """A small seeded corpus with an empty document and a used last column."""
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.8, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < 0.5)
    dense[3] = 0
    dense[0, -1] = 2
    vocabulary = [f"w{j}" for j in range(n_words)]
    return from_matrix(dense, vocabulary=vocabulary)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- Corpus / from_matrix


def test_corpus_coerces_to_csr_int64_and_tuples():
    corpus = Corpus([[1, 0], [0, 2]], vocabulary=np.array(["a", "b"]), names=["d1", "d2"])
    assert sp.issparse(corpus.counts) and corpus.counts.format == "csr"
    assert corpus.counts.dtype == np.int64
    np.testing.assert_array_equal(corpus.counts.toarray(), [[1, 0], [0, 2]])
    assert corpus.vocabulary == ("a", "b") and type(corpus.vocabulary[0]) is str
    assert corpus.names == ("d1", "d2")
    assert repr(corpus) == "Corpus(2 documents, 2 words, 3 tokens, vocabulary=yes, names=yes)"


def test_corpus_vocabulary_length_mismatch_names_both_numbers():
    with pytest.raises(ValueError, match=r"'vocabulary' argument of Corpus must be a sequence of 3 words.*got 2 entries"):
        Corpus(np.ones((2, 3), dtype=int), vocabulary=["a", "b"])


def test_corpus_names_length_mismatch():
    with pytest.raises(ValueError, match=r"'names' argument of Corpus must be a sequence of 2 document names.*got 3 entries"):
        Corpus(np.ones((2, 3), dtype=int), names=["a", "b", "c"])


def test_corpus_rejects_non_string_words_and_single_string():
    with pytest.raises(TypeError, match=r"'vocabulary' argument of Corpus must be a sequence of strings; got an entry 3"):
        Corpus(np.ones((1, 2), dtype=int), vocabulary=["a", 3])
    with pytest.raises(TypeError, match=r"'vocabulary' argument of Corpus must be a sequence of 2 strings"):
        Corpus(np.ones((1, 2), dtype=int), vocabulary="ab")


def test_corpus_rejects_bad_counts():
    with pytest.raises(ValueError, match=r"'counts' argument of Corpus must be non-negative counts"):
        Corpus([[1, -1]])
    with pytest.raises(ValueError, match=r"'counts' argument of from_matrix must be integer-valued"):
        from_matrix([[1.5, 0.0]])


def test_from_matrix_accepts_countvectorizer_output():
    from sklearn.feature_extraction.text import CountVectorizer

    docs = ["the cat sat on the mat", "the dog sat", "cat and dog"]
    vectorizer = CountVectorizer()
    matrix = vectorizer.fit_transform(docs)
    corpus = from_matrix(matrix, vocabulary=vectorizer.get_feature_names_out(), names=["a", "b", "c"])
    np.testing.assert_array_equal(corpus.counts.toarray(), matrix.toarray())
    assert corpus.vocabulary == tuple(vectorizer.get_feature_names_out())
    assert corpus.counts[0, corpus.vocabulary.index("the")] == 2


def test_from_matrix_accepts_coo_and_sums_duplicates():
    coo = sp.coo_matrix(([1, 2, 3], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    np.testing.assert_array_equal(from_matrix(coo).counts.toarray(), [[0, 3], [3, 0]])


def test_from_matrix_errors_name_from_matrix():
    with pytest.raises(ValueError, match=r"'vocabulary' argument of from_matrix must be a sequence of 2 words"):
        from_matrix([[1, 2]], vocabulary=["a"])


# ----------------------------------------------------------------------------- text files


@pytest.fixture
def text_dir(tmp_path):
    write(tmp_path / "b.txt", "The cat sat on the mat. The CAT purred!")
    write(tmp_path / "a.txt", "A dog and a cat; the dog barked at 3 cats.")
    write(tmp_path / "c.txt", "Dog dog DOG, x y zz")
    write(tmp_path / "notes.md", "cat cat cat")
    return tmp_path


def count_of(corpus, name, word):
    return corpus.counts[corpus.names.index(name), corpus.vocabulary.index(word)]


def test_from_text_files_exact_counts(text_dir):
    corpus = from_text_files(text_dir)
    assert corpus.names == ("a.txt", "b.txt", "c.txt")
    assert list(corpus.vocabulary) == sorted(corpus.vocabulary)
    assert count_of(corpus, "b.txt", "cat") == 2
    assert count_of(corpus, "b.txt", "the") == 3
    assert count_of(corpus, "a.txt", "dog") == 2
    assert count_of(corpus, "c.txt", "dog") == 3
    assert count_of(corpus, "a.txt", "cats") == 1
    # single letters and digits are not tokens with the default pattern
    assert "a" not in corpus.vocabulary and "x" not in corpus.vocabulary and "3" not in corpus.vocabulary
    assert int(corpus.counts.sum()) == 8 + 9 + 4


def test_from_text_files_lowercase_false_and_pattern(text_dir):
    corpus = from_text_files(text_dir, pattern="*.md", lowercase=False)
    assert corpus.names == ("notes.md",) and corpus.vocabulary == ("cat",)
    cased = from_text_files(text_dir, lowercase=False)
    assert count_of(cased, "b.txt", "cat") == 1 and count_of(cased, "b.txt", "CAT") == 1


def test_from_text_files_document_frequency_filters(text_dir):
    in_two = from_text_files(text_dir, min_df=2)
    assert set(in_two.vocabulary) == {"cat", "dog", "the"}
    assert from_text_files(text_dir, min_df=0.6).vocabulary == in_two.vocabulary
    at_most_one = from_text_files(text_dir, max_df=1)
    assert "cat" not in at_most_one.vocabulary and "mat" in at_most_one.vocabulary
    two_thirds = from_text_files(text_dir, max_df=0.5)
    assert "the" not in two_thirds.vocabulary and "zz" in two_thirds.vocabulary


def test_from_text_files_stop_words(text_dir):
    english = from_text_files(text_dir, stop_words="english")
    assert "the" in ENGLISH_STOP_WORDS and "the" not in english.vocabulary and "and" not in english.vocabulary
    assert count_of(english, "b.txt", "cat") == 2
    custom = from_text_files(text_dir, stop_words=["CAT", "Dog"])
    assert "cat" not in custom.vocabulary and "dog" not in custom.vocabulary and "the" in custom.vocabulary


def test_from_text_files_errors(tmp_path, text_dir):
    with pytest.raises(FileNotFoundError, match=r"'directory' argument of from_text_files must be an existing directory"):
        from_text_files(tmp_path / "missing")
    with pytest.raises(NotADirectoryError, match=r"'directory' argument of from_text_files must be a directory"):
        from_text_files(text_dir / "a.txt")
    with pytest.raises(ValueError, match=r"'pattern' argument of from_text_files must be a glob pattern matching"):
        from_text_files(text_dir, pattern="*.csv")
    with pytest.raises(ValueError, match=r"kept no word: 12 distinct words in 3 files .* min_df=1.0"):
        from_text_files(text_dir, min_df=1.0)
    with pytest.raises(ValueError, match=r"'max_df' argument of from_text_files must be at least min_df"):
        from_text_files(text_dir, min_df=2, max_df=1)
    with pytest.raises(ValueError, match=r"'max_df' argument of from_text_files must be a fraction in \[0, 1\]"):
        from_text_files(text_dir, max_df=1.5)
    with pytest.raises(TypeError, match=r"'min_df' argument of from_text_files"):
        from_text_files(text_dir, min_df="2")
    with pytest.raises(ValueError, match=r"'stop_words' argument of from_text_files must be None, 'english'"):
        from_text_files(text_dir, stop_words="french")
    with pytest.raises(ValueError, match=r"'token_pattern' argument of from_text_files must be a valid regular"):
        from_text_files(text_dir, token_pattern="(")
    with pytest.raises(ValueError, match=r"'encoding' argument of from_text_files must be a text encoding"):
        from_text_files(text_dir, encoding="no-such-codec")


def test_from_text_files_undecodable_file_names_it(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9 latte")
    with pytest.raises(ValueError, match=r"bad\.txt: cannot be decoded with encoding='utf-8'"):
        from_text_files(tmp_path)
    assert from_text_files(tmp_path, encoding="latin-1").vocabulary == ("latte",)
    unicode_words = from_text_files(tmp_path, encoding="latin-1", token_pattern=r"(?u)\b\w\w+\b")
    assert unicode_words.vocabulary == ("café", "latte")


# ----------------------------------------------------------------------------- round trips


def assert_same_corpus(loaded, original, vocabulary=True):
    assert loaded.counts.shape == original.counts.shape
    np.testing.assert_array_equal(loaded.counts.toarray(), original.counts.toarray())
    assert loaded.counts.dtype == np.int64
    assert loaded.vocabulary == (original.vocabulary if vocabulary else None)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_ldac_round_trip(tmp_path, suffix):
    corpus = random_corpus(seed=1)
    save_ldac(corpus, tmp_path / f"c.ldac{suffix}", vocab_path=tmp_path / f"vocab.txt{suffix}")
    assert_same_corpus(load_ldac(tmp_path / f"c.ldac{suffix}", vocab_path=tmp_path / f"vocab.txt{suffix}"), corpus)
    assert_same_corpus(load_ldac(str(tmp_path / f"c.ldac{suffix}")), corpus, vocabulary=False)


def test_ldac_file_content(tmp_path):
    save_ldac(from_matrix([[2, 0, 1], [0, 0, 0]]), tmp_path / "c.ldac")
    assert (tmp_path / "c.ldac").read_text() == "2 0:2 2:1\n0\n"


def test_ldac_without_vocabulary_infers_v_and_with_vocabulary_keeps_unused_columns(tmp_path):
    write(tmp_path / "c.ldac", "1 1:4\n\n2 0:1 1:2\n")
    write(tmp_path / "vocab.txt", "x\ny\nz\n")
    np.testing.assert_array_equal(load_ldac(tmp_path / "c.ldac").counts.toarray(), [[0, 4], [1, 2]])
    with_vocab = load_ldac(tmp_path / "c.ldac", vocab_path=tmp_path / "vocab.txt")
    np.testing.assert_array_equal(with_vocab.counts.toarray(), [[0, 4, 0], [1, 2, 0]])
    assert with_vocab.vocabulary == ("x", "y", "z")


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_uci_round_trip(tmp_path, suffix):
    corpus = random_corpus(seed=2)
    docword, vocab = tmp_path / f"docword.t.txt{suffix}", tmp_path / f"vocab.t.txt{suffix}"
    save_uci_bow(corpus, docword, vocab_path=vocab)
    assert_same_corpus(load_uci_bow(docword, vocab_path=vocab), corpus)
    assert_same_corpus(load_uci_bow(docword), corpus, vocabulary=False)
    if suffix:
        with gzip.open(docword, "rt") as handle:
            assert handle.readline() == f"{corpus.counts.shape[0]}\n"


def test_uci_file_content_and_blank_lines(tmp_path):
    save_uci_bow(from_matrix([[2, 0, 1], [0, 0, 0]]), tmp_path / "d.txt")
    assert (tmp_path / "d.txt").read_text() == "2\n3\n2\n1 1 2\n1 3 1\n"
    write(tmp_path / "e.txt", "2\n3\n2\n1 1 2\n\n2 3 1\n")
    np.testing.assert_array_equal(load_uci_bow(tmp_path / "e.txt").counts.toarray(), [[2, 0, 0], [0, 0, 1]])


# ----------------------------------------------------------------------------- file errors


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2\n3\n2\n1 1 2\n2 3\n", r"d\.txt, line 5: expected 3 fields 'docID wordID count', found 2"),
        ("2\n3\n2\n1 1 2\n2 x 1\n", r"d\.txt, line 5: expected int64 integers 'docID wordID count', found '2 x 1'"),
        ("2\n3\n2\n1 1 2\n2 1 99999999999999999999\n", r"d\.txt, line 5: expected int64 integers"),
        ("2\n3\n2\n1 1 2.5\n2 1 1\n", r"d\.txt, line 4: expected int64 integers"),
        ("2\n3\n2\n1 1 2\n3 1 1\n", r"d\.txt, line 5: docID must be in 1\.\.D=2, found the entry '3 1 1'"),
        ("2\n3\n2\n1 1 2\n\n2 4 1\n", r"d\.txt, line 6: wordID must be in 1\.\.W=3, found the entry '2 4 1'"),
        ("2\n3\n2\n0 1 2\n2 1 1\n", r"d\.txt, line 4: docID must be in 1\.\.D=2"),
        ("2\n3\n2\n1 1 0\n2 1 1\n", r"d\.txt, line 4: count must be a positive integer"),
        ("2\nthree\n2\n1 1 1\n", r"d\.txt, line 2: expected the header integer W \(vocabulary size\), found 'three'"),
        ("2\n3\n", r"d\.txt, line 3: expected the header integer NNZ"),
        ("2\n3\n-1\n", r"d\.txt, line 3: the header NNZ \(number of entries\) must be non-negative"),
        ("2\n3\n3\n1 1 2\n2 1 1\n", r"d\.txt: the header \(line 3\) gives NNZ=3 but the file has 2 entries"),
        ("2\n3\n3\n", r"d\.txt: the header \(line 3\) gives NNZ=3 but the file has 0 entries"),
        ("0\n3\n0\n", r"d\.txt, line 1: the header D \(number of documents\) must be at least 1"),
        ("2\n0\n0\n", r"d\.txt, line 2: the header W \(vocabulary size\) must be at least 1"),
        ("-2\n3\n0\n", r"d\.txt, line 1: the header D \(number of documents\) must be at least 1 .*, found -2"),
        ("2\n3\n1\n1 1 -4\n", r"d\.txt, line 4: count must be a positive integer, found the entry '1 1 -4'"),
        ("2 3\n3\n1\n1 1 1\n", r"d\.txt, line 1: expected the header integer D \(number of documents\), found '2 3'"),
        ("", r"d\.txt, line 1: expected the header integer D"),
        ("99999999999999999999999\n3\n1\n1 1 1\n", r"d\.txt: reading it needs about .* \(D=9+, W=3 and NNZ=1 in "
                                                   r"its header\), more than the memory budget"),
    ],
)
def test_uci_errors_name_file_and_line(tmp_path, text, message):
    write(tmp_path / "d.txt", text)
    with pytest.raises(ValueError, match=message):
        load_uci_bow(tmp_path / "d.txt")


def test_uci_empty_body_with_zero_nnz_is_valid(tmp_path):
    write(tmp_path / "d.txt", "2\n3\n0\n")
    corpus = load_uci_bow(tmp_path / "d.txt")
    assert corpus.counts.shape == (2, 3) and corpus.counts.nnz == 0


def test_uci_vocabulary_errors(tmp_path):
    write(tmp_path / "d.txt", "1\n3\n1\n1 1 2\n")
    write(tmp_path / "short.txt", "a\nb\n")
    write(tmp_path / "blank.txt", "a\n\nc\n")
    with pytest.raises(ValueError, match=r"short\.txt: has 2 words but .*d\.txt declares W=3"):
        load_uci_bow(tmp_path / "d.txt", vocab_path=tmp_path / "short.txt")
    with pytest.raises(ValueError, match=r"blank\.txt, line 2: empty line"):
        load_uci_bow(tmp_path / "d.txt", vocab_path=tmp_path / "blank.txt")
    with pytest.raises(FileNotFoundError):
        load_uci_bow(tmp_path / "missing.txt")
    with pytest.raises(TypeError, match=r"'docword_path' argument of load_uci_bow must be a path"):
        load_uci_bow(3)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2 0:1 1:1\n3 0:1 1:1\n", r"c\.ldac, line 2: M=3 but the line has 2 term:count pairs"),
        ("1 0:1\n1 a:1\n", r"c\.ldac, line 2: expected 'M term:count \.\.\.' with int64 integers"),
        ("1 0:1\n1 2\n", r"c\.ldac, line 2: expected 'M term:count"),
        ("1 0:1\n1 2:1:1\n", r"c\.ldac, line 2: expected 'M term:count"),
        ("x 0:1\n", r"c\.ldac, line 1: expected 'M term:count"),
        ("1 99999999999999999999:1\n", r"c\.ldac, line 1: expected 'M term:count \.\.\.' with int64 integers"),
        ("1 -1:1\n", r"c\.ldac, line 1: term ids must be non-negative, found -1"),
        ("\n1 0:0\n", r"c\.ldac, line 2: counts must be positive integers, found 0"),
        ("", r"c\.ldac: the file holds no document"),
        ("0\n0\n", r"c\.ldac: no document has a term, so the vocabulary size is unknown; pass vocab_path"),
    ],
)
def test_ldac_errors_name_file_and_line(tmp_path, text, message):
    write(tmp_path / "c.ldac", text)
    with pytest.raises(ValueError, match=message):
        load_ldac(tmp_path / "c.ldac")


def test_ldac_term_outside_vocabulary(tmp_path):
    write(tmp_path / "c.ldac", "1 0:1\n2 1:1 3:2\n")
    write(tmp_path / "v.txt", "a\nb\nc\n")
    with pytest.raises(ValueError, match=r"c\.ldac, line 2: term id 3 is outside the vocabulary of 3 words"):
        load_ldac(tmp_path / "c.ldac", vocab_path=tmp_path / "v.txt")


def test_save_errors(tmp_path):
    with pytest.raises(TypeError, match=r"'corpus' argument of save_ldac must be a specinit\.corpus\.Corpus"):
        save_ldac(np.ones((2, 2)), tmp_path / "c.ldac")
    with pytest.raises(ValueError, match=r"'corpus' argument of save_uci_bow must be a Corpus with a vocabulary"):
        save_uci_bow(from_matrix([[1]]), tmp_path / "d.txt", vocab_path=tmp_path / "v.txt")
    with pytest.raises(ValueError, match=r"'corpus' argument of save_ldac must be a Corpus whose words .* got the word ' a'"):
        save_ldac(from_matrix([[1, 1]], vocabulary=["c", " a"]), tmp_path / "c.ldac", vocab_path=tmp_path / "v.txt")


# ----------------------------------------------------------------------------- Reuters


def test_load_reuters_matches_the_lda_package():
    import lda
    import lda.datasets
    import lda.utils

    corpus = load_reuters()
    assert corpus.counts.shape == (395, 4258)
    assert len(corpus.vocabulary) == 4258 and corpus.vocabulary == lda.datasets.load_reuters_vocab()
    assert corpus.names == lda.datasets.load_reuters_titles()
    with open(Path(lda.__file__).parent / "tests" / "reuters.ldac", encoding="utf-8") as handle:
        expected = lda.utils.ldac2dtm(handle, offset=0)
    np.testing.assert_array_equal(corpus.counts.toarray(), expected)


def test_load_reuters_without_lda_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "lda", None)
    with pytest.raises(ImportError, match=r'pip install "specinit\[data\]"'):
        load_reuters()
