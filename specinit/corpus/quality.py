"""Topic-quality tools for a topic-word matrix.

Every function takes ``beta`` of shape (k, V), one topic per row on the
probability simplex, as estimated by the topic models of :mod:`specinit`.
Top words (ties broken by the lower word index), UMass coherence (Mimno et
al., 2011) and relevance (Sievert and Shirley, 2014) follow their use in the
seed paper 003, Sec. 4.3.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_count_matrix, check_int, check_positive
from specinit.corpus.containers import Corpus

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["relevance", "top_relevant_words", "top_words", "umass_coherence"]

_SIMPLEX_TOL = 1e-6


def _check_beta(beta: Any, func: str) -> np.ndarray:
    array = np.asarray(beta)
    if array.dtype.kind not in "biuf":
        raise bad_argument("beta", func, "a numeric (k, V) array", array, kind=TypeError)
    array = array.astype(np.float64, copy=False)
    if array.ndim != 2 or 0 in array.shape:
        raise bad_argument("beta", func, "a non-empty 2-D (k topics, V words) array", array)
    if not np.all(np.isfinite(array)):
        raise bad_argument("beta", func, "finite", "NaN or infinite entries", describe=False)
    if np.any(array < 0):
        raise bad_argument("beta", func, "non-negative", f"minimum {array.min():g}", describe=False)
    worst = np.max(np.abs(array.sum(axis=1) - 1.0))
    if worst > _SIMPLEX_TOL:
        raise bad_argument(
            "beta", func, f"row-stochastic (each topic summing to 1 within {_SIMPLEX_TOL:g})",
            f"a row sum off by {worst:.3g}", describe=False,
        )
    return array


def _check_vocabulary(vocabulary, n_words: int, func: str) -> tuple[str, ...]:
    if vocabulary is None:
        return tuple(str(i) for i in range(n_words))
    if isinstance(vocabulary, (str, bytes)) or not hasattr(vocabulary, "__iter__"):
        raise bad_argument("vocabulary", func, f"a sequence of {n_words} words", vocabulary, kind=TypeError)
    words = tuple(str(word) for word in vocabulary)
    if len(words) != n_words:
        raise bad_argument(
            "vocabulary", func, f"a sequence of V={n_words} words (one per column of beta)", f"{len(words)} words", describe=False
        )
    return words


def _top_indices(scores: np.ndarray, n: int) -> np.ndarray:
    """(k, n) column indices of the ``n`` largest scores per row; ties go to the lower index."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :n]


def _ranked_words(scores, vocabulary, n, func) -> list[list[str]]:
    n = min(check_int(n, "n", func, minimum=1), scores.shape[1])
    words = _check_vocabulary(vocabulary, scores.shape[1], func)
    return [[words[i] for i in row] for row in _top_indices(scores, n)]


def top_words(beta: Any, vocabulary: Sequence[str] | None = None, n: int = 10) -> list[list[str]]:
    """The ``n`` most probable words of each topic, most probable first.

    Parameters
    ----------
    beta : array-like of shape (k, V)
        Topic-word probabilities, rows on the simplex.
    vocabulary : sequence of str of length V, optional
        Word strings; the word indices (as str) when omitted.
    n : int, default 10
        Words per topic (at least 1; at most V are returned).

    Returns
    -------
    list of list of str
        ``k`` lists of ``min(n, V)`` words.

    Raises
    ------
    ValueError, TypeError
        If ``beta``, ``vocabulary`` or ``n`` are invalid.

    Examples
    --------
    >>> top_words([[0.1, 0.6, 0.3]], ["a", "b", "c"], n=2)
    [['b', 'c']]
    """
    return _ranked_words(_check_beta(beta, "top_words"), vocabulary, n, "top_words")


def _counts_matrix(counts, func: str) -> sp.csr_matrix:
    if isinstance(counts, Corpus):
        return counts.counts
    return check_count_matrix(counts, "counts", func)


def umass_coherence(beta: Any, counts: Corpus | ArrayLike | sp.sparray | sp.spmatrix, n: int = 10, *,
                    smoothing: float = 1.0) -> np.ndarray:
    r"""UMass coherence of each topic's ``n`` top words: the mean over ranked word pairs.

    .. math::

        C(t) = \binom{n}{2}^{-1} \sum_{j=2}^{n} \sum_{i=1}^{j-1}
               \log \frac{D(w_i, w_j) + \epsilon}{D(w_i)}

    with :math:`w_1, \dots, w_n` the topic's top words (most probable first),
    :math:`D(w)` the number of documents containing :math:`w`,
    :math:`D(w_i, w_j)` the number containing both and :math:`\epsilon` the
    ``smoothing``. Mimno et al. define the sum with :math:`\epsilon = 1`;
    the mean over pairs is gensim's ``CoherenceModel(coherence="u_mass")``
    convention, so scores are comparable across ``n``. gensim smooths the
    probability instead of the count (:math:`\epsilon = 10^{-12} N` for
    N documents gives its numbers exactly). Only the columns of the top
    words are read (never a V x V matrix).

    Parameters
    ----------
    beta : array-like of shape (k, V)
        Topic-word probabilities, rows on the simplex.
    counts : Corpus or (N, V) count matrix
        The reference corpus.
    n : int, default 10
        Top words per topic (at least 1, at most V are used; ``n=1`` gives 0).
    smoothing : float, default 1.0
        Added to every co-document frequency (positive).

    Returns
    -------
    numpy.ndarray of shape (k,)
        Mean coherence per topic (<= 0 up to the smoothing; higher is better).

    Raises
    ------
    ValueError
        If the inputs are invalid, V differs between ``beta`` and ``counts``,
        or a top word that is ranked above another occurs in no document.

    References
    ----------
    Mimno, Wallach, Talley, Leenders and McCallum (2011), Optimizing semantic
    coherence in topic models, EMNLP; seed paper 003, Sec. 4.3.
    Roeder, Both and Hinneburg (2015), Exploring the space of topic coherence
    measures, WSDM (the mean aggregation).
    """
    func = "umass_coherence"
    beta = _check_beta(beta, func)
    matrix = _counts_matrix(counts, func)
    if matrix.shape[1] != beta.shape[1]:
        raise bad_argument("counts", func, f"a matrix with V={beta.shape[1]} columns like beta", matrix)
    n = min(check_int(n, "n", func, minimum=1), beta.shape[1])
    smoothing = check_positive(smoothing, "smoothing", func)
    top = _top_indices(beta, n)
    used, position = np.unique(top, return_inverse=True)
    present = (matrix[:, used] > 0).astype(np.float64).tocsc()
    doc_freq = np.asarray(present.sum(axis=0)).ravel()
    upper_i, upper_j = np.triu_indices(n, k=1)
    coherence = np.zeros(len(top))
    for topic, columns in enumerate(position.reshape(top.shape)):
        if np.any(doc_freq[columns[:-1]] == 0):
            word = int(top[topic, np.argmax(doc_freq[columns[:-1]] == 0)])
            raise bad_argument(
                "counts", func, "a corpus in which every top word occurs in some document",
                f"word {word} (a top word of topic {topic}) in no document", describe=False,
            )
        if n > 1:
            block = present[:, columns]
            co_freq = (block.T @ block).toarray()
            coherence[topic] = np.mean(np.log((co_freq[upper_i, upper_j] + smoothing) / doc_freq[columns[upper_i]]))
    return coherence


def _term_probabilities(term_frequency, n_words: int, func: str) -> np.ndarray:
    if isinstance(term_frequency, Corpus) or sp.issparse(term_frequency) or np.ndim(term_frequency) == 2:
        totals = np.asarray(_counts_matrix(term_frequency, func).sum(axis=0)).ravel()
    else:
        totals = np.asarray(term_frequency)
        if totals.dtype.kind not in "biuf" or totals.ndim != 1:
            expected = "a 1-D array of word frequencies, a Corpus or a count matrix"
            raise bad_argument("term_frequency", func, expected, totals, kind=TypeError)
    totals = totals.astype(np.float64, copy=False)
    if totals.shape != (n_words,):
        expected = f"V={n_words} frequencies (one per column of beta)"
        raise bad_argument("term_frequency", func, expected, f"{totals.shape[0]} frequencies", describe=False)
    if not np.all(np.isfinite(totals)) or np.any(totals <= 0):
        n_bad = int(np.sum(~(np.isfinite(totals) & (totals > 0))))
        raise bad_argument(
            "term_frequency", func, "finite and positive for every word (drop words that never occur)",
            f"{n_bad} zero, negative or non-finite entries", describe=False,
        )
    return totals / totals.sum()


def _check_lam(lam, func: str) -> float:
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real):
        raise bad_argument("lam", func, "a real number in [0, 1]", lam, kind=TypeError)
    if not 0.0 <= lam <= 1.0:
        raise bad_argument("lam", func, "a real number in [0, 1]", lam)
    return float(lam)


def _relevance(beta, term_frequency, lam, func) -> np.ndarray:
    beta = _check_beta(beta, func)
    p_word = _term_probabilities(term_frequency, beta.shape[1], func)
    lam = _check_lam(lam, func)
    with np.errstate(divide="ignore"):
        return np.log(beta) - (1.0 - lam) * np.log(p_word)


def relevance(beta: Any, term_frequency: ArrayLike | Corpus | sp.sparray | sp.spmatrix, lam: float = 0.6) -> np.ndarray:
    r"""Relevance of every word to every topic (Sievert and Shirley, 2014).

    .. math::

        r(w, t) = \lambda \log \beta_{t w} + (1 - \lambda) \log \frac{\beta_{t w}}{p(w)}

    with :math:`p(w)` the corpus frequency of word :math:`w`. ``lam=1`` ranks
    by probability; smaller values favour words specific to the topic. Words
    with :math:`\beta_{tw} = 0` get :math:`-\infty`.

    Parameters
    ----------
    beta : array-like of shape (k, V)
        Topic-word probabilities, rows on the simplex.
    term_frequency : array-like of shape (V,), Corpus or (N, V) count matrix
        Word counts or frequencies (normalised here); for a corpus or matrix,
        its column totals. Every entry must be positive.
    lam : float in [0, 1], default 0.6
        The weight :math:`\lambda`.

    Returns
    -------
    numpy.ndarray of shape (k, V)

    Raises
    ------
    ValueError, TypeError
        If an argument is invalid or its length differs from V.

    References
    ----------
    Sievert and Shirley (2014), LDAvis: a method for visualizing and
    interpreting topics; seed paper 003, Sec. 4.3.
    """
    return _relevance(beta, term_frequency, lam, "relevance")


def top_relevant_words(beta: Any, term_frequency: ArrayLike | Corpus | sp.sparray | sp.spmatrix,
                       vocabulary: Sequence[str] | None = None, n: int = 10, lam: float = 0.6) -> list[list[str]]:
    """The ``n`` most relevant words of each topic, most relevant first.

    Parameters
    ----------
    beta, term_frequency, lam
        As in :func:`relevance`.
    vocabulary : sequence of str of length V, optional
        Word strings; the word indices (as str) when omitted.
    n : int, default 10
        Words per topic (at least 1; at most V are returned).

    Returns
    -------
    list of list of str

    Raises
    ------
    ValueError, TypeError
        If an argument is invalid.
    """
    func = "top_relevant_words"
    return _ranked_words(_relevance(beta, term_frequency, lam, func), vocabulary, n, func)
