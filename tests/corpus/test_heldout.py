"""Held-out document completion: token split, fold-in, perplexity."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.corpus import document_completion, fold_in, split_tokens
from tests.conftest import random_instance, sample_lda


def test_split_keeps_every_token_and_half_of_each_document():
    X, _ = sample_lda(*random_instance(3, 20, 0), 50, 31, 1)
    observed, scored = split_tokens(X, seed=3)
    np.testing.assert_array_equal((observed + scored).toarray(), X)
    assert observed.min() >= 0 and scored.min() >= 0
    np.testing.assert_array_equal(np.asarray(observed.sum(axis=1)).ravel(), np.floor(X.sum(axis=1) / 2))
    again, _ = split_tokens(X, seed=3)
    np.testing.assert_array_equal(again.toarray(), observed.toarray())
    other, _ = split_tokens(X, seed=4)
    assert np.any(other.toarray() != observed.toarray())


def test_fold_in_fixed_point_by_hand():
    beta = np.array([[0.5, 0.5], [0.9, 0.1]])
    alpha = np.array([1.0, 1.0])
    counts = np.array([[2, 0]])
    np.testing.assert_allclose(fold_in(counts, beta, alpha, n_iter=0), [[0.5, 0.5]])
    # one step from theta = (1/2, 1/2): p(w0) = 0.7; expected counts 2 * (0.25, 0.45) / 0.7; theta = (1 + e) / (2 + 2)
    e = 2 * np.array([0.25, 0.45]) / 0.7
    np.testing.assert_allclose(fold_in(counts, beta, alpha, n_iter=1), [(1 + e) / 4], rtol=1e-12)


def test_perplexity_exact_on_a_hand_computable_case():
    """Documents of 2 tokens: one observed, one scored; with n_iter=0 theta = alpha / alpha0."""
    beta = np.array([[0.5, 0.5], [0.9, 0.1]])
    alpha = np.array([1.0, 3.0])
    counts = sp.csr_matrix(np.array([[2, 0], [0, 2]]))
    result = document_completion(counts, beta, alpha, n_iter=0)
    p = np.array([0.25, 0.75]) @ beta  # (0.8, 0.2)
    assert result.n_tokens == 2 and result.n_documents == 2 and result.n_skipped == 0
    assert result.log_likelihood == pytest.approx(np.log(p[0]) + np.log(p[1]), rel=1e-12)
    assert result.perplexity == pytest.approx(np.exp(-(np.log(p[0]) + np.log(p[1])) / 2), rel=1e-12)


def test_true_parameters_beat_perturbed_ones():
    """Planted LDA, 400 held-out documents of 60 tokens: the truth scores best. The gaps (several percent of
    perplexity) are far above the sampling noise of 12,000 scored tokens (about 1%)."""
    beta, _ = random_instance(4, 50, 2, conc=0.2)
    alpha = np.full(4, 0.3)
    X, _ = sample_lda(beta, alpha, 400, 60, 5)
    truth = document_completion(X, beta, alpha, seed=0).perplexity
    rng = np.random.default_rng(0)
    blurred = 0.6 * beta + 0.4 * rng.dirichlet(np.ones(50), size=4)
    assert document_completion(X, blurred, alpha, seed=0).perplexity > 1.03 * truth
    uniform = np.full_like(beta, 1 / 50)
    assert document_completion(X, uniform, alpha, seed=0).perplexity > 1.5 * truth
    # a wrong concentration for theta hurts too (flat theta when documents are nearly single-topic)
    assert document_completion(X, beta, alpha * 100, seed=0).perplexity > 1.03 * truth


def test_short_documents_skipped_and_bad_arguments():
    beta = np.array([[0.5, 0.5], [0.9, 0.1]])
    result = document_completion(np.array([[1, 0], [3, 1], [0, 0]]), beta, np.ones(2))
    assert result.n_skipped == 2 and result.n_documents == 1
    with pytest.raises(ValueError, match="at least one document with 2 or more tokens"):
        document_completion(np.array([[1, 0]]), beta, np.ones(2))
    with pytest.raises(ValueError, match="'beta' argument"):
        document_completion(np.array([[1, 1, 1]]), beta, np.ones(2))
    with pytest.raises(ValueError, match="'alpha' argument"):
        document_completion(np.array([[2, 1]]), beta, np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="'fraction' argument"):
        split_tokens(np.array([[2, 1]]), fraction=1.0)
