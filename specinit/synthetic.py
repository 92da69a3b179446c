"""Corpora drawn from the topic models themselves (NumPy, vectorized, seeded).

Used by the demo, the tutorials, the benchmarks and the tests: sampling is
token by token through inverse CDFs, in chunks of documents, so corpora with
millions of documents never need an (N, V) probability matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from specinit._validation import as_generator, bad_argument, check_int, check_positive

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["SyntheticCorpus", "sample_lda", "sample_single_topic"]

_DOCS_PER_CHUNK = 50_000


@dataclass(frozen=True)
class SyntheticCorpus:
    """A sampled corpus and the parameters it was drawn from.

    Attributes
    ----------
    counts : scipy.sparse.csr_matrix, shape (N, V), int64
    beta : ndarray (k, V)
        Topics.
    weights : ndarray (k,)
        ``alpha`` for LDA, mixing weights for the single-topic model.
    theta : ndarray (N, k)
        Per-document topic proportions (LDA) or one-hot topics (single topic).
    """

    counts: sp.csr_matrix
    beta: np.ndarray
    weights: np.ndarray
    theta: np.ndarray


def _sample_counts(theta, beta, lengths, rng) -> sp.csr_matrix:
    """Counts of documents with topic proportions ``theta`` and lengths ``lengths``.

    Per block of documents: topic counts ``~ Multinomial(n_d, theta_d)``, then
    for each topic the words of all its tokens by inverse-CDF draws; memory
    stays proportional to the tokens of one block.
    """
    n_docs, vocab = theta.shape[0], beta.shape[1]
    beta_cdf = np.cumsum(beta, axis=1)
    blocks = []
    for start in range(0, n_docs, _DOCS_PER_CHUNK):
        stop = min(n_docs, start + _DOCS_PER_CHUNK)
        topic_counts = rng.multinomial(lengths[start:stop], theta[start:stop])
        docs, words = [], []
        for topic in range(beta.shape[0]):
            doc = np.repeat(np.arange(stop - start), topic_counts[:, topic])
            docs.append(doc)
            words.append(np.minimum(np.searchsorted(beta_cdf[topic], rng.random(doc.size), side="right"), vocab - 1))
        doc, word = np.concatenate(docs), np.concatenate(words)
        block = sp.csr_matrix((np.ones(doc.size, dtype=np.int64), (doc, word)), shape=(stop - start, vocab))
        block.sum_duplicates()
        blocks.append(block)
    return sp.vstack(blocks, format="csr")


def _common(n_docs, vocab_size, k, doc_length, beta_concentration, seed, func):
    n_docs = check_int(n_docs, "n_docs", func, minimum=1)
    vocab_size = check_int(vocab_size, "vocab_size", func, minimum=2)
    k = check_int(k, "k", func, minimum=1)
    doc_length = check_int(doc_length, "doc_length", func, minimum=1)
    beta_concentration = check_positive(beta_concentration, "beta_concentration", func)
    rng = as_generator(seed, func)
    beta = rng.dirichlet(np.full(vocab_size, beta_concentration), size=k)
    lengths = rng.poisson(doc_length, size=n_docs).astype(np.int64)
    return n_docs, k, rng, beta, lengths


def sample_lda(n_docs: int, vocab_size: int, k: int, *, alpha: float | ArrayLike = 0.1, doc_length: int = 100,
               beta_concentration: float = 0.1, seed: int | np.random.Generator = 0) -> SyntheticCorpus:
    """Draw a corpus from LDA.

    Parameters
    ----------
    n_docs, vocab_size, k : int
        Documents, vocabulary size and topics.
    alpha : float or array of shape (k,)
        Dirichlet parameter of the topic proportions (a float means a
        symmetric prior).
    doc_length : int
        Mean document length (lengths are Poisson).
    beta_concentration : float
        Symmetric Dirichlet concentration the topics are drawn from.
    seed : int or numpy.random.Generator
        Randomness of the draw.

    Returns
    -------
    SyntheticCorpus
        The counts (CSR) and the true ``beta``, ``alpha`` and ``theta``.
    """
    func = "sample_lda"
    n_docs, k, rng, beta, lengths = _common(n_docs, vocab_size, k, doc_length, beta_concentration, seed, func)
    alpha = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (k,)).copy()
    if not np.all(np.isfinite(alpha)) or np.any(alpha <= 0):
        raise bad_argument("alpha", func, "positive and finite", alpha)
    theta = rng.dirichlet(alpha, size=n_docs)
    return SyntheticCorpus(_sample_counts(theta, beta, lengths, rng), beta, alpha, theta)


def sample_single_topic(n_docs: int, vocab_size: int, k: int, *, weights: ArrayLike | None = None,
                        doc_length: int = 100, beta_concentration: float = 0.1,
                        seed: int | np.random.Generator = 0) -> SyntheticCorpus:
    """Draw a corpus from the single-topic model (one topic per document).

    Parameters
    ----------
    n_docs, vocab_size, k : int
        Documents, vocabulary size and topics.
    weights : array of shape (k,), optional
        Topic probabilities (default: uniform).
    doc_length : int
        Mean document length (lengths are Poisson).
    beta_concentration : float
        Symmetric Dirichlet concentration the topics are drawn from.
    seed : int or numpy.random.Generator
        Randomness of the draw.

    Returns
    -------
    SyntheticCorpus
        The counts (CSR), the true ``beta`` and ``weights`` and each
        document's topic.
    """
    func = "sample_single_topic"
    n_docs, k, rng, beta, lengths = _common(n_docs, vocab_size, k, doc_length, beta_concentration, seed, func)
    weights = np.full(k, 1.0 / k) if weights is None else np.asarray(weights, dtype=np.float64)
    if weights.shape != (k,) or np.any(weights <= 0) or not np.isclose(weights.sum(), 1.0):
        raise bad_argument("weights", func, f"a ({k},) probability vector with positive entries", weights)
    theta = np.eye(k)[rng.choice(k, size=n_docs, p=weights)]
    return SyntheticCorpus(_sample_counts(theta, beta, lengths, rng), beta, weights, theta)
