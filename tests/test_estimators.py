"""The scikit-learn faces: check_estimator, a Pipeline after CountVectorizer, GridSearchCV over n_components."""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.mixture import GaussianMixture
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from specinit.estimators import SpectralGaussianMixture, SpectralLDA, SpectralTopicMixture


def _failures(estimator) -> dict:
    failed = {}

    def record(*, estimator, check_name, exception, status, expected_to_fail, expected_to_fail_reason):
        if status == "failed":
            failed[check_name] = f"{type(exception).__name__}: {exception}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_estimator(estimator, on_fail=None, callback=record)
    return failed


def test_gaussian_mixture_passes_check_estimator():
    """Every check but one: ``check_fit_score_takes_y`` calls ``partial_fit`` on the fitted estimator, which
    continues only a model built by ``partial_fit`` (``fit`` keeps no row sums to merge with) and says so."""
    failed = _failures(SpectralGaussianMixture(2, max_iter=5))
    assert list(failed) == ["check_fit_score_takes_y"]
    assert failed["check_fit_score_takes_y"].startswith("ValueError: SpectralGaussianMixture.partial_fit continues "
                                                        "a model built by partial_fit")


#: The checks scikit-learn feeds with real-valued or negative X: the topic faces take word COUNTS (non-negative
#: integers, as CountVectorizer gives them) and refuse anything else with a message naming the problem.
COUNT_ONLY = "scikit-learn generates real-valued or negative X; the topic faces take non-negative integer counts"


@pytest.mark.parametrize("estimator", [SpectralLDA(2), SpectralTopicMixture(2, max_iter=5)],
                         ids=["SpectralLDA", "SpectralTopicMixture"])
def test_topic_faces_pass_every_check_that_uses_counts(estimator):
    failed = _failures(estimator)
    sparse_checks = {"check_estimator_sparse_tag", "check_estimator_sparse_array", "check_estimator_sparse_matrix"}
    for check, message in failed.items():
        if check in sparse_checks:  # scikit-learn's wrapper message around the same refusal of real-valued data
            continue
        assert "integer-valued counts" in message or "Negative values in data" in message, (check, message)
    # the checks that run on count-like data all pass: fitting, cloning, params, tags, feature names
    for passing in ("check_get_params_invariance", "check_set_params", "check_no_attributes_set_in_init",
                    "check_parameters_default_constructible", "check_positive_only_tag_during_fit"):
        assert passing not in failed, COUNT_ONLY


@pytest.fixture(scope="module")
def texts():
    """Paragraphs of the docstrings of a few standard-library modules (real text, shipped with Python)."""
    paragraphs = []
    for name in ("argparse", "json", "logging", "pathlib", "subprocess", "textwrap", "unittest", "collections",
                 "datetime", "email.message", "http.client", "tarfile", "zipfile", "decimal", "shutil"):
        module = importlib.import_module(name)
        for obj in [module, *vars(module).values()]:
            doc = inspect.getdoc(obj) if callable(obj) or obj is module else None
            paragraphs.extend(p for p in (doc or "").split("\n\n") if len(p.split()) >= 5)
    return list(dict.fromkeys(paragraphs))


def test_spectral_lda_in_a_pipeline_and_grid_search(texts):
    pipe = make_pipeline(CountVectorizer(min_df=3, stop_words="english"), SpectralLDA(5, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # real text: some topics need repair (in diagnostics)
        theta = pipe.fit_transform(texts)
    assert theta.shape == (len(texts), 5) and np.allclose(theta.sum(axis=1), 1.0)
    lda = pipe[-1]
    vocab = pipe[0].get_feature_names_out()
    assert lda.components_.shape == (5, vocab.size) and np.allclose(lda.components_.sum(axis=1), 1.0)
    assert list(lda.get_feature_names_out()) == [f"spectrallda{i}" for i in range(5)]
    assert lda.estimate_.k == 5 and np.isfinite(lda.perplexity(pipe[0].transform(texts)))
    search = GridSearchCV(make_pipeline(CountVectorizer(min_df=3, stop_words="english"), SpectralLDA(random_state=0)),
                          {"spectrallda__n_components": [3, 6]}, cv=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        search.fit(texts)
    assert search.best_params_["spectrallda__n_components"] in (3, 6)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_gaussian_mixture_face_agrees_with_scikit_learn():
    rng = np.random.default_rng(0)
    loc = 5.0 * rng.standard_normal((3, 4))
    x = loc[rng.choice(3, 900)] + rng.standard_normal((900, 4))
    ours = SpectralGaussianMixture(3, covariance_type="diag", random_state=0).fit(x)
    theirs = GaussianMixture(3, covariance_type="diag", random_state=0).fit(x)
    # well-separated blobs: the same clustering and log-likelihood up to EM's tolerance
    assert abs(ours.score(x) - theirs.score(x)) < 1e-2
    assert abs(ours.bic(x) - theirs.bic(x)) < 1e-2 * abs(theirs.bic(x))
    np.testing.assert_allclose(ours.predict_proba(x).sum(axis=1), 1.0)
    assert ours.estimate_.k == 3 and ours.converged_


# ----------------------------------------------------------------------------- choosing the number of topics
def _lda_corpus(k: int, n_docs: int = 1_500):
    """An LDA corpus: ``k`` sparse topics over 100 words, alpha = 0.3, documents of 30 tokens."""
    import scipy.sparse as sp

    from tests.conftest import sample_lda

    beta = np.random.default_rng(k).dirichlet(np.full(100, 0.1), size=k)
    return sp.csr_matrix(sample_lda(beta, np.full(k, 0.3), n_docs, 30, k + 1)[0])


def _single_topic_corpus(k: int):
    import scipy.sparse as sp

    from tests.conftest import sample_single_topic

    beta = np.random.default_rng(k).dirichlet(np.full(100, 0.1), size=k)
    return sp.csr_matrix(sample_single_topic(beta, np.full(k, 1.0 / k), 1_500, 10, k)[0])


def _grid(estimator, X, grid):
    search = GridSearchCV(estimator, {"n_components": grid}, cv=3, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # noisy extra topics are repaired (in diagnostics)
        return search.fit(X)


@pytest.mark.parametrize("k", [3, 5, 7])
def test_lda_grid_search_picks_the_true_k_and_agrees_with_auto(k):
    """The held-out score peaks at the true k and falls past it (the old in-sample score grew with k, so
    GridSearchCV picked the largest k offered); n_components="auto" follows the same rule and agrees."""
    X = _lda_corpus(k)
    search = _grid(SpectralLDA(random_state=0), X, list(range(k - 1, k + 3)))
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["n_components"] == k
    assert np.all(np.isfinite(scores)) and np.all(scores[2:] < scores[1])  # below the truth's score past it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        auto = SpectralLDA("auto", random_state=0).fit(X)
    assert auto.estimate_.k == k and auto.components_.shape == (k, 100)
    assert auto.estimate_.diagnostics["k_auto/signal"] == k


def test_gaussian_mixture_default_is_gmm_refine_default_and_picks_k():
    """The face's default fit is gmm.refine(X, gmm.spectral(X, k, covariance=...)) (the relative stopping rule,
    split-merge); on well-separated blobs GridSearchCV over its score, BIC and n_components="auto" pick the true k."""
    from sklearn.datasets import make_blobs

    from specinit.models import gmm

    X, _ = make_blobs(900, n_features=2, centers=3, cluster_std=1.0, random_state=0)
    face = SpectralGaussianMixture(3, random_state=0).fit(X)
    refined = gmm.refine(X, gmm.spectral(X, 3, covariance="spherical", seed=0)).estimate
    for name in ("weights", "loc", "scale"):
        np.testing.assert_array_equal(face.estimate_.params[name], refined.params[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        search = GridSearchCV(SpectralGaussianMixture(random_state=0), {"n_components": [1, 2, 3, 4, 5]}, cv=3).fit(X)
        bics = [SpectralGaussianMixture(k, random_state=0).fit(X).bic(X) for k in range(1, 6)]
        auto = SpectralGaussianMixture("auto", random_state=0).fit(X)
    assert search.best_params_["n_components"] == 3 and int(np.argmin(bics)) + 1 == 3 and auto.estimate_.k == 3


def test_spectral_lda_default_is_lda_spectral_default():
    """One library, one answer: the estimator's default fit is the functional face's default fit."""
    from specinit.models import lda

    X = _lda_corpus(3, 400)
    face = SpectralLDA(3, random_state=0).fit(X)
    estimate = lda.spectral(X, 3, seed=0)
    assert face.estimate_.diagnostics["method"] == estimate.diagnostics["method"] == "anchor"
    np.testing.assert_array_equal(face.components_, estimate.params["beta"])
    np.testing.assert_array_equal(face.doc_topic_prior_, estimate.params["alpha"])


@pytest.mark.parametrize("k", [3, 6])
def test_topic_mixture_grid_search_picks_the_true_k_and_agrees_with_auto(k):
    X = _single_topic_corpus(k)
    search = _grid(SpectralTopicMixture(random_state=0), X, list(range(k - 2, k + 3)))
    assert search.best_params_["n_components"] == k
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        auto = SpectralTopicMixture("auto", random_state=0).fit(X)
    assert auto.estimate_.k == k


def test_topic_scores_are_held_out_and_never_nan():
    """``score`` is the held-out token log-likelihood (no multinomial coefficient): finite, below the
    in-sample log-likelihood ``log_likelihood`` reports plus the coefficients, and a k beyond what the data
    support is refused by the tensor path's fit with a message (not a NaN score); anchor words fit it, finite."""
    from specinit.engine.whitening import IndefiniteMomentError

    X = _lda_corpus(3, 600)
    train, test = X[:400], X[400:]
    for face in (SpectralLDA(3, random_state=0), SpectralTopicMixture(3, random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            face.fit(train)
        value = face.score(test)
        assert np.isfinite(value) and value < 0
    # the mixture's score is its marginal log-likelihood less the multinomial coefficients
    from scipy.special import gammaln

    from specinit.models import single_topic

    coefficient = gammaln(np.asarray(test.sum(axis=1)).ravel() + 1).sum() - gammaln(test.data + 1).sum()
    np.testing.assert_allclose(face.score(test), single_topic.log_likelihood(test, face.estimate_).sum() - coefficient,
                               rtol=1e-10)
    with pytest.raises(IndefiniteMomentError, match="k=40"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        SpectralLDA(40, method="tpm", random_state=0).fit(train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isfinite(SpectralLDA(40, random_state=0).fit(train).score(test))  # anchors: 40 topics, finite


def test_one_estimator_class_serves_every_face():
    """Each public estimator is SpectralEstimator specialised by its Face: no method of its own, its signature
    and its Parameters section from the face's declarations."""
    from numpydoc.docscrape import ClassDoc

    from specinit import estimators

    from specinit.models import FAMILIES

    faces = [getattr(estimators, name) for name in estimators.__all__
             if name.startswith("Spectral") and name != "SpectralEstimator"]
    assert len(faces) == len(FAMILIES)  # one face per built-in family
    for cls in faces:
        assert issubclass(cls, estimators.SpectralEstimator)
        own = {name for name, value in vars(cls).items() if callable(value) or isinstance(value, property)}
        assert own == {"__init__"} and isinstance(cls.face, estimators.Face)
        names = list(inspect.signature(cls).parameters)
        assert names == list(cls.face.parameters) and names[0] == "n_components"
        documented = [p.name for p in ClassDoc(cls)["Parameters"]]
        assert documented == names


def test_factor_face_recovers_the_loadings_and_passes_check_estimator():
    from specinit.estimators import SpectralFactors

    rng = np.random.default_rng(0)
    loadings = rng.normal(size=(3, 6))
    errors = []
    for n in (4_000, 64_000):
        h = (rng.gamma(2.0, size=(n, 3)) - 2.0) / np.sqrt(2.0)  # unit-variance skewed factors (the model's scale)
        X = 1.0 + h @ loadings + 0.1 * rng.normal(size=(n, 6))
        face = SpectralFactors(3, random_state=0).fit(X)
        fitted = face.components_
        # columns matched by absolute cosine; skewed factors fix the sign
        cos = (fitted / np.linalg.norm(fitted, axis=1, keepdims=True)) @ (
            loadings / np.linalg.norm(loadings, axis=1, keepdims=True)).T
        order = np.argmax(np.abs(cos), axis=1)
        assert sorted(order) == [0, 1, 2]
        errors.append(np.max(np.abs(fitted - loadings[order])) / np.max(np.abs(loadings)))
        assert face.transform(X[:5]).shape == (5, 3) and np.isfinite(face.score(X))
    assert errors[1] < errors[0] / 2 and errors[1] < 0.05, errors
    failed = _failures(SpectralFactors(2))  # as for the Gaussian mixture: partial_fit continues only partial_fit
    assert list(failed) == ["check_fit_score_takes_y"]
    assert failed["check_fit_score_takes_y"].startswith("ValueError: SpectralFactors.partial_fit continues a model "
                                                        "built by partial_fit")


def _chain(rng, params, n_sequences, length, emit):
    sequences = []
    for _ in range(n_sequences):
        state, sequence = rng.choice(2, p=params["init"]), []
        for _ in range(length):
            sequence.append(emit(state))
            state = rng.choice(2, p=params["transition"][state])
        sequences.append(np.array(sequence))
    return sequences


def test_hmm_faces_recover_the_chain_and_answer_like_hmmlearn():
    from specinit.distributions.hmm import posterior_marginals, viterbi
    from specinit.estimators import SpectralGaussianHMM, SpectralHMM
    from specinit.models import hmm

    rng = np.random.default_rng(0)
    truth = {"init": np.array([0.6, 0.4]), "transition": np.array([[0.9, 0.1], [0.2, 0.8]]),
             "emission": np.array([[0.6, 0.3, 0.05, 0.05], [0.05, 0.05, 0.3, 0.6]])}
    errors = []
    for n_sequences in (20, 160):
        sequences = _chain(rng, truth, n_sequences, 200, lambda state: rng.choice(4, p=truth["emission"][state]))
        face = SpectralHMM(2, random_state=0).fit(sequences)
        order = np.argsort(face.emissionprob_[:, 0])[::-1]
        errors.append(max(np.abs(face.transmat_[np.ix_(order, order)] - truth["transition"]).max(),
                          np.abs(face.emissionprob_[order] - truth["emission"]).max()))
    assert errors[1] < errors[0] and errors[1] < 0.03, errors
    assert face.emissionprob_.shape == (2, 4)  # n_symbols read off the data
    assert face.score(sequences) == pytest.approx(float(np.sum(hmm.log_likelihood(sequences, face.estimate_))))
    for path, expected in zip(face.predict(sequences[:3]), viterbi(sequences[:3], face.estimate_)):
        np.testing.assert_array_equal(path, expected)
    marginals = face.predict_proba(sequences[:2])
    np.testing.assert_allclose(marginals[0], posterior_marginals(sequences[:2], face.estimate_)[0])
    assert face.score_samples(sequences[:5]).shape == (5,)

    means = np.array([0.0, 4.0])
    real = _chain(rng, truth, 40, 200, lambda state: rng.normal(means[state], 1.0))
    gaussian = SpectralGaussianHMM(2, random_state=0).fit(real)
    np.testing.assert_allclose(np.sort(gaussian.means_), means, atol=0.1)
    np.testing.assert_allclose(gaussian.covars_, 1.0, atol=0.15)


def test_view_faces_cluster_the_observations_and_bic_picks_k():
    from sklearn.metrics import adjusted_rand_score

    from specinit.estimators import SpectralKernelMultiView, SpectralMultiView

    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0, 0, 0], [4, 4, 0, 0], [0, 0, 4, 4]])
    labels = rng.integers(0, 3, 1500)
    views = [centres[labels] + rng.normal(size=(1500, 4)) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # fallbacks and repairs of the wrong k are diagnosed
        bics = [SpectralMultiView(k, kinds=("gaussian",) * 3, random_state=0).fit(views).bic(views)
                for k in (1, 2, 3, 4)]
        face = SpectralMultiView(3, kinds=("gaussian",) * 3, random_state=0).fit(views)
        kernel = SpectralKernelMultiView(3, rank=32, random_state=0).fit(views)
    assert int(np.argmin(bics)) + 1 == 3
    assert adjusted_rand_score(labels, face.labels_) > 0.99 and adjusted_rand_score(labels, kernel.labels_) > 0.99
    np.testing.assert_allclose(face.predict_proba(views).sum(axis=1), 1.0)
    assert face.score_samples(views).shape == (1500,) and np.isfinite(kernel.score(views))
