"""Tests for specinit.corpus: top words, UMass coherence, relevance."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.corpus import (
    from_matrix,
    relevance,
    top_relevant_words,
    top_words,
    umass_coherence,
)


def random_beta(rng, k, n_words):
    beta = rng.gamma(0.5, size=(k, n_words))
    return beta / beta.sum(axis=1, keepdims=True)


def coherence_oracle(beta, dense_counts, n):
    """Direct double loop over ranked word pairs on the dense binary matrix: the mean of the pair scores."""
    present = np.asarray(dense_counts) > 0
    scores = []
    for row in np.asarray(beta):
        ranked = sorted(range(len(row)), key=lambda w: (-row[w], w))[:n]
        pairs = []
        for j in range(1, n):
            for i in range(j):
                both = np.sum(present[:, ranked[i]] & present[:, ranked[j]])
                pairs.append(np.log((both + 1) / np.sum(present[:, ranked[i]])))
        scores.append(np.mean(pairs))
    return np.array(scores)


# ----------------------------------------------------------------------------- top words


def test_top_words_order_ties_and_default_vocabulary():
    beta = np.array([[0.1, 0.4, 0.1, 0.4], [0.7, 0.1, 0.15, 0.05]])
    assert top_words(beta, ["a", "b", "c", "d"], n=3) == [["b", "d", "a"], ["a", "c", "b"]]
    assert top_words(beta, n=2) == [["1", "3"], ["0", "2"]]
    assert top_words(beta, np.array(["a", "b", "c", "d"]), n=4)[1] == ["a", "c", "b", "d"]


def test_top_words_errors():
    beta = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match=r"'vocabulary' argument of top_words must be a sequence of V=3 words.*got 2 words"):
        top_words(beta, ["a", "b"])
    with pytest.raises(ValueError, match=r"'n' argument of top_words must be an integer >= 1; got 0"):
        top_words(beta, n=0)
    assert top_words(beta, ["a", "b", "c"], n=4) == [["a", "b", "c"]] * 2  # at most V words
    with pytest.raises(TypeError, match=r"'n' argument of top_words must be an integer"):
        top_words(beta, n=2.0)


@pytest.mark.parametrize(
    ("beta", "message", "kind"),
    [
        (np.full(3, 1 / 3), r"'beta' argument of top_words must be a non-empty 2-D", ValueError),
        (np.zeros((2, 0)), r"'beta' argument of top_words must be a non-empty 2-D", ValueError),
        (np.array([[1.2, -0.2]]), r"'beta' argument of top_words must be non-negative; got minimum -0.2", ValueError),
        (np.array([[0.5, 0.4]]), r"'beta' argument of top_words must be row-stochastic .*got a row sum off by 0.1", ValueError),
        (np.array([[np.nan, 1.0]]), r"'beta' argument of top_words must be finite", ValueError),
        (np.array([["a", "b"]]), r"'beta' argument of top_words must be a numeric", TypeError),
    ],
)
def test_beta_validation(beta, message, kind):
    with pytest.raises(kind, match=message):
        top_words(beta, n=1)


def test_beta_rows_within_tolerance_are_accepted():
    beta = np.array([[0.5, 0.5 + 5e-7]])
    assert top_words(beta, n=1) == [["1"]]


# ----------------------------------------------------------------------------- coherence


def test_umass_coherence_hand_computed():
    # documents: {a, b}, {a}, {b, c}, {a, b, c}; D(a)=3, D(b)=3, D(a,b)=2, D(a,c)=1, D(b,c)=2
    counts = np.array([[1, 2, 0], [3, 0, 0], [0, 1, 1], [1, 1, 4]])
    beta = np.array([[0.5, 0.3, 0.2]])
    # pairs (a,b), (a,c), (b,c) with the higher-ranked word's frequency below: 3/3, 2/3, 3/3; their mean
    np.testing.assert_allclose(umass_coherence(beta, counts, n=3), [np.log(2 / 3) / 3], rtol=1e-12)
    np.testing.assert_allclose(umass_coherence(beta, counts, n=1), [0.0])
    np.testing.assert_allclose(umass_coherence(beta, counts), [np.log(2 / 3) / 3], rtol=1e-12)  # n=10 > V: all V
    # pairs (a,b), (a,c) with smoothing 0.5: log(2.5/3), log(1.5/3)
    np.testing.assert_allclose(umass_coherence(beta, counts, n=3, smoothing=0.5),
                               [(np.log(2.5 / 3) + np.log(1.5 / 3) + np.log(2.5 / 3)) / 3], rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_umass_coherence_equals_gensim(seed):
    # gensim's u_mass smooths the probability by 1e-12, i.e. the co-document count by 1e-12 * N; with that smoothing
    # the two agree to round-off on every topic.
    from gensim.corpora import Dictionary
    from gensim.models.coherencemodel import CoherenceModel

    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.8, size=(60, 25))
    dense[:, dense.sum(axis=0) == 0] = 1
    beta = random_beta(rng, 5, 25)
    words = [f"w{v}" for v in range(25)]
    texts = [[words[v] for v in np.flatnonzero(row) for _ in range(row[v])] for row in dense]
    dictionary = Dictionary(texts)
    topics = [[words[v] for v in np.argsort(-row, kind="stable")[:7]] for row in beta]
    gensim = CoherenceModel(topics=topics, corpus=[dictionary.doc2bow(t) for t in texts], dictionary=dictionary,
                            coherence="u_mass", topn=7).get_coherence_per_topic()
    ours = umass_coherence(beta, dense, n=7, smoothing=1e-12 * dense.shape[0])
    np.testing.assert_allclose(ours, gensim, rtol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_umass_coherence_matches_oracle(seed):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.7, size=(30, 15))
    dense[:, dense.sum(axis=0) == 0] = 1  # every word occurs somewhere
    beta = random_beta(rng, 4, 15)
    expected = coherence_oracle(beta, dense, n=6)
    np.testing.assert_allclose(umass_coherence(beta, dense, n=6), expected, rtol=1e-12)
    np.testing.assert_allclose(umass_coherence(beta, from_matrix(dense), n=6), expected, rtol=1e-12)
    np.testing.assert_allclose(umass_coherence(beta, sp.csc_matrix(dense), n=6), expected, rtol=1e-12)


def test_umass_coherence_errors():
    beta = np.array([[0.5, 0.3, 0.2]])
    with pytest.raises(ValueError, match=r"'counts' argument of umass_coherence must be a matrix with V=3 columns"):
        umass_coherence(beta, np.ones((4, 2)))
    unused_top_word = np.array([[0, 1, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match=r"every top word occurs in some document; got word 0 \(a top word of topic 0\)"):
        umass_coherence(beta, unused_top_word, n=2)
    # the lowest-ranked word only appears in numerators, so it may be absent: 2/2, 1/2, 1/1
    np.testing.assert_allclose(umass_coherence(np.array([[0.2, 0.5, 0.3]]), unused_top_word, n=3), [np.log(1 / 2) / 3])
    with pytest.raises(ValueError, match=r"'smoothing' argument of umass_coherence must be a finite number > 0; got 0.0"):
        umass_coherence(beta, np.ones((4, 3)), smoothing=0.0)
    with pytest.raises(ValueError, match=r"'counts' argument of umass_coherence must be non-negative"):
        umass_coherence(beta, -np.ones((2, 3)))


# ----------------------------------------------------------------------------- relevance


def test_relevance_extremes_and_formula():
    rng = np.random.default_rng(3)
    beta = random_beta(rng, 3, 8)
    beta[0, 2] = 0.0
    beta[0] /= beta[0].sum()
    freq = rng.integers(1, 20, size=8)
    p_word = freq / freq.sum()
    with np.errstate(divide="ignore"):
        log_beta = np.log(beta)
    np.testing.assert_array_equal(relevance(beta, freq, lam=1.0), log_beta)
    assert relevance(beta, freq, lam=1.0)[0, 2] == -np.inf
    np.testing.assert_allclose(relevance(beta, freq, lam=0.0)[1:], np.log(beta[1:] / p_word), rtol=1e-12)
    expected = 0.6 * np.log(beta[1:]) + 0.4 * np.log(beta[1:] / p_word)
    np.testing.assert_allclose(relevance(beta, freq)[1:], expected, rtol=1e-12)


def test_relevance_term_frequency_from_corpus_or_matrix():
    counts = np.array([[1, 3, 0], [2, 1, 5]])
    beta = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    from_vector = relevance(beta, counts.sum(axis=0), lam=0.3)
    np.testing.assert_allclose(relevance(beta, from_matrix(counts), lam=0.3), from_vector, rtol=1e-12)
    np.testing.assert_allclose(relevance(beta, sp.csr_matrix(counts), lam=0.3), from_vector, rtol=1e-12)


def test_top_relevant_words_prefers_specific_words():
    # word "common" is most probable in topic 0 but frequent everywhere; "rare" is specific
    beta = np.array([[0.5, 0.3, 0.2], [0.6, 0.01, 0.39]])
    freq = np.array([100.0, 1.0, 30.0])
    vocab = ["common", "rare", "mid"]
    assert top_relevant_words(beta, freq, vocab, n=1, lam=1.0) == top_words(beta, vocab, n=1) == [["common"], ["common"]]
    # lift beta / p(w): topic 0 (0.66, 39.3, 0.87), topic 1 (0.79, 1.31, 1.70)
    assert top_relevant_words(beta, freq, vocab, n=2, lam=0.0) == [["rare", "mid"], ["mid", "rare"]]
    assert top_relevant_words(beta, freq, n=1, lam=0.0) == [["1"], ["2"]]


def test_relevance_errors():
    beta = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"'lam' argument of relevance must be a real number in \[0, 1\]; got 1.5"):
        relevance(beta, [1, 1], lam=1.5)
    with pytest.raises(ValueError, match=r"'lam' argument of relevance must be a real number in \[0, 1\]; got -0.1"):
        relevance(beta, [1, 1], lam=-0.1)
    with pytest.raises(TypeError, match=r"'lam' argument of relevance"):
        relevance(beta, [1, 1], lam=True)
    with pytest.raises(ValueError, match=r"'term_frequency' argument of relevance must be finite and positive .*got 1 zero"):
        relevance(beta, [1, 0])
    with pytest.raises(ValueError, match=r"'term_frequency' argument of relevance must be V=2 frequencies .*got 3 frequencies"):
        relevance(beta, [1, 2, 3])
    with pytest.raises(ValueError, match=r"'n' argument of top_relevant_words must be an integer >= 1"):
        top_relevant_words(beta, [1, 1], n=0)
    with pytest.raises(ValueError, match=r"'beta' argument of top_relevant_words must be row-stochastic"):
        top_relevant_words(np.array([[0.5, 0.6]]), [1, 1])
