"""Held-out document completion: perplexity of any topic model given as (beta, alpha).

Protocol (Wallach, Murray, Salakhutdinov, Mimno 2009, Sec. 5 "document
completion"; the evaluation of Asuncion et al. 2009): the tokens of each
held-out document are split at random into two halves; the document's topic
proportions ``theta_d`` are folded in on the first half with ``beta`` and
``alpha`` fixed; the second half is scored with ``p(w) = theta_d @ beta[:, w]``.
The fold-in is the same for every method (a fixed number of EM fixed-point
steps), so methods are compared on their topics and prior alone:

.. math::

    \\theta_d \\leftarrow \\frac{\\alpha + \\theta_d \\odot
    \\big(\\sum_w c_{dw}\\, \\beta_{:w} / (\\theta_d^T \\beta_{:w})\\big)}{n_d + \\alpha_0}

(the posterior mean of ``theta_d`` given the expected topic counts of its
observed words). Perplexity is ``exp(-sum log p(w) / #scored tokens)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from specinit._validation import (
    as_generator,
    bad_argument,
    check_count_matrix,
    check_int,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["HeldoutResult", "split_tokens", "fold_in", "document_completion"]


@dataclass(frozen=True)
class HeldoutResult:
    """Result of :func:`document_completion`.

    Attributes
    ----------
    perplexity : float
        ``exp(-log_likelihood / n_tokens)`` over the scored halves.
    log_likelihood : float
        Sum of ``log p(w)`` over the scored tokens.
    n_tokens : int
        Tokens scored (the second halves).
    n_documents : int
        Documents evaluated (those with at least 2 tokens).
    n_skipped : int
        Documents with fewer than 2 tokens (cannot be split).
    per_document : ndarray, shape (n_documents,)
        Log-likelihood of each evaluated document's scored half.
    theta : ndarray, shape (n_documents, k)
        The folded-in topic proportions.
    """

    perplexity: float
    log_likelihood: float
    n_tokens: int
    n_documents: int
    n_skipped: int
    per_document: np.ndarray
    theta: np.ndarray


def split_tokens(counts: ArrayLike | sp.sparray | sp.spmatrix, fraction: float = 0.5,
                 seed: int | np.random.Generator = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Split each document's tokens at random into an observed part and a scored part.

    Each document with ``n`` tokens keeps ``floor(fraction * n)`` of them,
    drawn without replacement (a multivariate hypergeometric draw over its
    words), in the observed part; the rest are scored.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer counts.
    fraction : float, default 0.5
        Share of each document's tokens that is observed, in (0, 1).
    seed : int or numpy.random.Generator
        Randomness of the split.

    Returns
    -------
    observed, scored : scipy.sparse.csr_matrix, shape (N, V)
        ``observed + scored == counts``.

    Raises
    ------
    ValueError
        Bad counts or ``fraction``.
    """
    func = "split_tokens"
    X = check_count_matrix(counts, "counts", func)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 < fraction < 1.0:
        raise bad_argument("fraction", func, "a number in (0, 1)", fraction)
    rng = as_generator(seed, func)
    reps = X.data.astype(np.int64)
    doc_of_entry = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    token_doc = np.repeat(doc_of_entry, reps)
    token_entry = np.repeat(np.arange(X.data.size), reps)
    order = np.lexsort((rng.random(token_doc.size), token_doc))  # tokens grouped by document, random within
    lengths = np.bincount(token_doc, minlength=X.shape[0])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    rank = np.empty(token_doc.size, dtype=np.int64)
    rank[order] = np.arange(token_doc.size) - np.repeat(starts, lengths)
    keep = rank < np.floor(fraction * lengths[token_doc])
    observed_data = np.bincount(token_entry[keep], minlength=X.data.size).astype(np.float64)
    observed = sp.csr_matrix((observed_data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
    scored = sp.csr_matrix((X.data - observed_data, X.indices.copy(), X.indptr.copy()), shape=X.shape)
    observed.eliminate_zeros()
    scored.eliminate_zeros()
    return observed, scored


def _check_topics(beta, alpha, n_words, func):
    beta = np.asarray(beta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if beta.ndim != 2 or beta.shape[1] != n_words:
        raise bad_argument("beta", func, f"a (k, {n_words}) array of topics (one column per word of counts)", beta)
    if not np.all(np.isfinite(beta)) or np.any(beta < 0) or not np.allclose(beta.sum(axis=1), 1.0, atol=1e-6):
        raise bad_argument("beta", func, "rows on the probability simplex (non-negative, summing to 1)", beta)
    if alpha.shape != (beta.shape[0],) or not np.all(np.isfinite(alpha)) or np.any(alpha <= 0):
        raise bad_argument("alpha", func, f"a ({beta.shape[0]},) array of positive numbers", alpha)
    return beta, alpha


def fold_in(counts: ArrayLike | sp.sparray | sp.spmatrix, beta: np.ndarray, alpha: np.ndarray, *,
            n_iter: int = 50) -> np.ndarray:
    """Topic proportions of documents given fixed topics and prior (EM fixed point).

    Runs exactly ``n_iter`` steps of the update in the module docstring from
    ``theta = alpha / alpha0`` (no early stop, so every method gets the same
    fold-in). Vectorized over documents: one gather and one sparse product
    per step.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        The observed tokens.
    beta : ndarray, shape (k, V)
        Topics, rows on the simplex.
    alpha : ndarray, shape (k,)
        Dirichlet parameters, positive.
    n_iter : int, default 50
        Fixed-point steps.

    Returns
    -------
    theta : ndarray, shape (N, k)
        Rows on the simplex (``alpha / alpha0`` for empty documents).

    Raises
    ------
    ValueError
        Bad counts, topics or prior.
    """
    func = "fold_in"
    X = check_count_matrix(counts, "counts", func)
    beta, alpha = _check_topics(beta, alpha, X.shape[1], func)
    n_iter = check_int(n_iter, "n_iter", func, minimum=0)
    tiny = np.finfo(np.float64).tiny
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    beta_t = np.ascontiguousarray(beta.T)
    word_topics = beta_t[X.indices]  # (nnz, k), fixed across steps
    lengths = np.asarray(X.sum(axis=1)).ravel()
    theta = np.tile(alpha / alpha.sum(), (X.shape[0], 1))
    ratio = X.copy()
    for _ in range(n_iter):
        probs = np.einsum("ek,ek->e", theta[rows], word_topics)
        ratio.data = X.data / np.maximum(probs, tiny)
        theta = (alpha + theta * np.asarray(ratio @ beta_t)) / (lengths[:, None] + alpha.sum())
    return theta / theta.sum(axis=1, keepdims=True)


def document_completion(counts: ArrayLike | sp.sparray | sp.spmatrix, beta: np.ndarray, alpha: np.ndarray, *,
                        fraction: float = 0.5, n_iter: int = 50, seed: int | np.random.Generator = 0) -> HeldoutResult:
    """Held-out document-completion perplexity of topics ``beta`` with prior ``alpha``.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Held-out documents (not used to fit ``beta``/``alpha``).
    beta : ndarray, shape (k, V)
        Topics, rows on the simplex (zeros allowed; a scored word with
        probability 0 gives infinite perplexity).
    alpha : ndarray, shape (k,)
        Dirichlet parameters of the topic proportions (for a method without
        a Dirichlet prior, pass its mean proportions times a concentration).
    fraction : float, default 0.5
        Share of each document's tokens used for the fold-in.
    n_iter : int, default 50
        Fold-in steps (:func:`fold_in`).
    seed : int or numpy.random.Generator
        Randomness of the token split (:func:`split_tokens`); use the same
        seed for every method compared.

    Returns
    -------
    HeldoutResult

    Raises
    ------
    ValueError
        Bad counts, topics, prior or ``fraction``, or no document with at
        least 2 tokens.

    References
    ----------
    Wallach, Murray, Salakhutdinov, Mimno, "Evaluation methods for topic
    models", ICML 2009, Sec. 5 (document completion).
    """
    func = "document_completion"
    X = check_count_matrix(counts, "counts", func)
    beta, alpha = _check_topics(beta, alpha, X.shape[1], func)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    usable = np.flatnonzero(lengths >= 2)
    if usable.size == 0:
        raise bad_argument("counts", func, "at least one document with 2 or more tokens", "none", describe=False)
    observed, scored = split_tokens(X[usable], fraction, seed)
    theta = fold_in(observed, beta, alpha, n_iter=n_iter)
    rows = np.repeat(np.arange(scored.shape[0]), np.diff(scored.indptr))
    with np.errstate(divide="ignore"):
        logp = np.log(np.einsum("ek,ke->e", theta[rows], beta[:, scored.indices]))
    per_document = np.bincount(rows, weights=scored.data * logp, minlength=scored.shape[0])
    n_tokens = int(scored.sum())
    total = float(per_document.sum())
    return HeldoutResult(
        perplexity=float(np.exp(-total / n_tokens)) if n_tokens else float("nan"),
        log_likelihood=total,
        n_tokens=n_tokens,
        n_documents=int(usable.size),
        n_skipped=int(X.shape[0] - usable.size),
        per_document=per_document,
        theta=theta,
    )
