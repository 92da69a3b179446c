"""scikit-learn faces of the families users treat as estimators: topic models and Gaussian mixtures.

Thin wrappers: ``fit`` calls the family's ``spectral`` (and, when asked, its
``refine``), keeps the :class:`~specinit.estimate.SpectralEstimate` as
``estimate_`` and exposes it under scikit-learn's names, so a spectral topic
model goes in a ``Pipeline`` after ``CountVectorizer`` and in
``GridSearchCV`` over ``n_components``, and a mixture answers ``predict``,
``predict_proba``, ``score`` and ``bic`` like ``GaussianMixture``. The
estimate still warm-starts NumPyro (``model.estimate_.init_params(...)``).

Requires scikit-learn (``pip install "specinit[data]"``).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, DensityMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from specinit._validation import bad_argument, check_count_matrix, warn

__all__ = ["SpectralGaussianMixture", "SpectralLDA", "SpectralTopicMixture"]


def _counts(estimator, X, reset: bool):
    """``X`` as validated counts (CSR float64), with scikit-learn's feature bookkeeping."""
    X = validate_data(estimator, X, accept_sparse="csr", dtype=np.float64, reset=reset, ensure_min_samples=1)
    check_non_negative(X, type(estimator).__name__)
    return check_count_matrix(X, "X")


class _TopicModel(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """What the two topic faces share: counts in, topics as ``components_``, documents scored."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.requires_fit = True
        return tags

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def score(self, X, y=None) -> float:
        """Held-out log-likelihood of the documents' tokens (higher is better; what ``GridSearchCV`` maximizes).

        A quantity that does not grow with ``n_components`` on documents the model was not fitted to, and
        the one ``n_components="auto"`` scores (:meth:`specinit.family.Family.choose_k`), so both pick the
        same k. No multinomial coefficient: tokens are scored as a sequence. :class:`SpectralLDA` scores
        document completion (:func:`specinit.corpus.document_completion`: every document's topic
        proportions are folded in on half of its tokens, drawn with ``random_state``, and the other half is
        scored); :class:`SpectralTopicMixture` scores every document's tokens with its topic summed out (no
        per-document parameter is fitted).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts.
        y : ignored

        Returns
        -------
        float
            Finite, or ``-inf`` (with a warning) where a scored word has probability zero.
        """
        check_is_fitted(self)
        value = self._held_out(_counts(self, X, reset=False))
        if not np.isfinite(value):
            warn(f"{type(self).__name__}.score: the held-out log-likelihood is not finite; scored as -inf.")
            return -np.inf
        return value

    def perplexity(self, X) -> float:
        """``exp(-log-likelihood / number of tokens)`` of the documents (lower is better).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        X = _counts(self, X, reset=False)
        return float(np.exp(-np.sum(self._module.log_likelihood(X, self.estimate_)) / max(float(X.sum()), 1.0)))


class SpectralLDA(_TopicModel):
    """Latent Dirichlet allocation by the method of moments (:func:`specinit.models.lda.spectral`).

    Parameters
    ----------
    n_components : int or "auto"
        Number of topics; ``"auto"``: chosen from the data by the rule of ``lda.spectral(X, "auto")``
        (:meth:`specinit.family.Family.choose_k`: the eigengap above the noise threshold of the second
        moment's spectrum bounds it, the held-out score :meth:`score` reports picks it).
    alpha0 : float, optional
        ``sum(alpha)``; ``None`` chooses it from the data.
    method : {"anchor", "tpm", "svtd", "eca", "als"} or None
        Recovery of :func:`specinit.models.lda.spectral`; ``None``: its default (anchor words closed by EM
        sweeps; the tensor power method when ``alpha0`` is given), so ``SpectralLDA(k).fit(X)`` and
        ``lda.spectral(X, k)`` give the same topics.
    refine_steps : int
        Variational-EM steps after the spectral estimate (:func:`specinit.models.lda.refine`); 0: none.
    random_state : int, optional
        Seed.

    Attributes
    ----------
    estimate_ : SpectralEstimate
        The fitted estimate (``beta``, ``alpha``; NumPyro warm starts).
    components_ : ndarray, shape (n_components, n_features)
        Topic-word probabilities (rows sum to one; scikit-learn's LDA keeps unnormalized pseudo-counts).
    doc_topic_prior_ : ndarray, shape (n_components,)
        ``alpha``.
    n_features_in_ : int
    """

    def __init__(self, n_components: int = 10, *, alpha0: float | None = None, method: str | None = None,
                 refine_steps: int = 0, random_state: int | None = None):
        self.n_components = n_components
        self.alpha0 = alpha0
        self.method = method
        self.refine_steps = refine_steps
        self.random_state = random_state

    @property
    def _module(self):
        from specinit.models import lda

        return lda

    def fit(self, X, y=None):
        """Fit the topics to the counts ``X``.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts (non-negative integers), e.g. ``CountVectorizer`` output.
        y : ignored

        Returns
        -------
        self
        """
        X = _counts(self, X, reset=True)
        seed = 0 if self.random_state is None else self.random_state
        estimate = self._module.spectral(X, self.n_components, self.alpha0, method=self.method, seed=seed,
                                         doc_topics=False)
        if self.refine_steps:
            estimate = self._module.refine(X, estimate, num_steps=self.refine_steps, seed=seed).estimate
        return self._keep(estimate)

    def partial_fit(self, X, y=None):
        """Add a batch of documents to the topics (online; :func:`specinit.models.lda.update`).

        The first call fits the batch; each later call merges the batch's
        pair moments with those kept in ``estimate_`` exactly, recovers the
        topics from everything seen by anchor words (warm-started), then runs
        the closing EM sweeps over the batch (``method``, ``alpha0`` and
        ``refine_steps`` are those of :meth:`fit` only). The model answers
        ``transform`` and ``score`` after every batch; ``estimate_.save``
        keeps the moments, so a loaded estimate continues
        (``lda.update(X_next, estimate)``).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts of the new documents.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        ValueError
            A model fitted by :meth:`fit` (it keeps no moments to merge with), or a batch with another number of
            words.
        """
        fitted = hasattr(self, "estimate_")
        if fitted and not any(key.startswith(self._module.MOMENTS_STATE) for key in self.estimate_.state):
            raise ValueError("SpectralLDA.partial_fit continues a model built by partial_fit; this one was fitted "
                             "by fit, which keeps no moments to merge with (call partial_fit on a new SpectralLDA).")
        X = _counts(self, X, reset=not fitted)
        seed = 0 if self.random_state is None else self.random_state
        estimate = self._module.update(X, self.estimate_ if fitted else None, k=self.n_components, seed=seed)
        return self._keep(estimate)

    def _keep(self, estimate):
        self.estimate_ = estimate
        self.components_ = estimate.params["beta"]
        self.doc_topic_prior_ = estimate.params["alpha"]
        return self

    def _held_out(self, X) -> float:
        from specinit.corpus import document_completion

        if not np.any(np.asarray(X.sum(axis=1)) >= 2):
            raise bad_argument("X", "SpectralLDA.score", "at least one document with 2 or more tokens", "none",
                               describe=False)
        seed = 0 if self.random_state is None else self.random_state
        return document_completion(X, self.components_, self.doc_topic_prior_, seed=seed).log_likelihood

    def transform(self, X):
        """Topic proportions of every document (the fixed-topic posterior mean).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts.

        Returns
        -------
        ndarray, shape (n_samples, n_components)
            Rows sum to one.
        """
        check_is_fitted(self)
        X = _counts(self, X, reset=False)
        return self._module.document_topics(X, self.components_, self.doc_topic_prior_)


class SpectralTopicMixture(ClusterMixin, _TopicModel):
    """The mixture of unigrams (one topic per document) by the method of moments, then EM.

    Parameters
    ----------
    n_components : int or "auto"
        Number of topics; ``"auto"``: chosen from the data by the rule of ``single_topic.spectral(X, "auto")``
        (:meth:`specinit.family.Family.choose_k`, scored by the held-out quantity :meth:`score` reports).
    method : str
        Tensor decomposition.
    max_iter : int
        Most MAP-EM iterations after the spectral estimate (:func:`specinit.models.single_topic.refine` with its
        defaults, which stop earlier on its relative-gain rule); 0: none.
    random_state : int, optional
        Seed.

    Attributes
    ----------
    estimate_ : SpectralEstimate
    components_ : ndarray, shape (n_components, n_features)
        Topic-word probabilities.
    weights_ : ndarray, shape (n_components,)
    labels_ : ndarray, shape (n_samples,)
        Most probable topic of every training document.
    n_features_in_ : int
    """

    def __init__(self, n_components: int = 10, *, method: str = "tpm", max_iter: int = 500,
                 random_state: int | None = None):
        self.n_components = n_components
        self.method = method
        self.max_iter = max_iter
        self.random_state = random_state

    @property
    def _module(self):
        from specinit.models import single_topic

        return single_topic

    def fit(self, X, y=None):
        """Fit the topics to the counts ``X``.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts.
        y : ignored

        Returns
        -------
        self
        """
        X = _counts(self, X, reset=True)
        seed = 0 if self.random_state is None else self.random_state
        estimate = self._module.spectral(X, self.n_components, method=self.method, seed=seed)
        if self.max_iter:
            estimate = self._module.refine(X, estimate, max_iter=self.max_iter).estimate
        self.estimate_ = estimate
        self.components_ = estimate.params["beta"]
        self.weights_ = estimate.params["weights"]
        self.labels_ = self.predict(X)
        return self

    def _held_out(self, X) -> float:
        return self._module.FAMILY.token_log_likelihood(X, self.estimate_)

    def predict_proba(self, X):
        """Posterior topic probabilities of every document.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples, n_components)
        """
        check_is_fitted(self)
        return self._module.predict(_counts(self, X, reset=False), self.estimate_)[0]

    def predict(self, X):
        """Most probable topic of every document.

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray of int, shape (n_samples,)
        """
        return self.predict_proba(X).argmax(axis=1)

    transform = predict_proba


class SpectralGaussianMixture(ClusterMixin, DensityMixin, BaseEstimator):
    """A Gaussian mixture started from the method-of-moments estimate, then EM (:mod:`specinit.models.gmm`).

    Parameters
    ----------
    n_components : int or "auto"
        Number of components (more than the number of features: the lifted moments of
        :func:`specinit.models.gmm.lifted_fit`); ``"auto"``: chosen by ``gmm.spectral(X, "auto")``
        (:meth:`specinit.family.Family.choose_k`).
    covariance_type : {"spherical", "diag", "common"}
        One variance per component, per component and coordinate, or one for all.
    max_iter : int
        EM iterations after the spectral estimate; 0: the spectral estimate alone.
    tol : float, optional
        EM stops when the mean log-likelihood gain is below ``tol`` (scikit-learn's rule). Default None:
        the relative rule of :func:`specinit.models.gmm.refine` (with its split-merge moves), so the face's
        fit is ``gmm.refine(X, gmm.spectral(X, k, covariance=covariance_type))``.
    reg_covar : float
        Added to every variance, relative to the data's mean variance.
    random_state : int, optional
        Seed.

    Attributes
    ----------
    estimate_ : SpectralEstimate
    weights_ : ndarray, shape (n_components,)
    means_ : ndarray, shape (n_components, n_features)
    covariances_ : ndarray
        Variances: (n_components,) spherical, (n_components, n_features) diag, () common.
    converged_ : bool
    n_iter_ : int
    lower_bound_ : float
        Final mean log-likelihood per sample.
    n_features_in_ : int
    """

    def __init__(self, n_components: int = 1, *, covariance_type: str = "spherical", max_iter: int = 500,
                 tol: float | None = None, reg_covar: float = 1e-6, random_state: int | None = None):
        self.n_components = n_components
        self.covariance_type = covariance_type
        self.max_iter = max_iter
        self.tol = tol
        self.reg_covar = reg_covar
        self.random_state = random_state

    def fit(self, X, y=None):
        """Fit the mixture to the rows of ``X``.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self
        """
        from specinit.models import gmm

        X = validate_data(self, X, dtype=np.float64, reset=True, ensure_min_samples=2)
        seed = 0 if self.random_state is None else self.random_state
        estimate = gmm.spectral(X, self.n_components, covariance=self.covariance_type, seed=seed)
        self.converged_, self.n_iter_ = True, 0
        if self.max_iter:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                result = gmm.refine(X, estimate, max_iter=self.max_iter, tol=self.tol, reg=self.reg_covar)
            for warning in caught:
                warnings.warn(warning.message, warning.category, stacklevel=2)
            estimate, self.converged_, self.n_iter_ = result.estimate, result.converged, result.n_iter
        self.estimate_ = estimate
        self.weights_ = estimate.params["weights"]
        self.means_ = estimate.params["loc"]
        self.covariances_ = estimate.params["scale"] ** 2
        self.lower_bound_ = self.score(X)
        self.labels_ = self.predict(X)
        return self

    def score_samples(self, X):
        """Log-likelihood of every row.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples,)
        """
        from specinit.models import gmm

        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return gmm.log_likelihood(X, self.estimate_)

    def score(self, X, y=None) -> float:
        """Mean log-likelihood per row (scikit-learn's ``GaussianMixture.score``).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        float
        """
        return float(np.mean(self.score_samples(X)))

    def predict_proba(self, X):
        """Posterior component probabilities of every row.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples, n_components)
        """
        from specinit.models import gmm

        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return gmm.predict(X, self.estimate_)[0]

    def predict(self, X):
        """Most probable component of every row.

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        ndarray of int, shape (n_samples,)
        """
        return self.predict_proba(X).argmax(axis=1)

    def _n_parameters(self) -> int:
        k, d = self.means_.shape
        variances = {"common": 1, "spherical": k, "diag": k * d}[self.covariance_type]
        return (k - 1) + k * d + variances

    def bic(self, X) -> float:
        """Bayesian information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        n = np.shape(X)[0]
        return float(-2 * self.score(X) * n + self._n_parameters() * np.log(n))

    def aic(self, X) -> float:
        """Akaike information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        return float(-2 * self.score(X) * np.shape(X)[0] + 2 * self._n_parameters())
