"""Online mixture of unigrams: merged pair moments, warm-started anchor words, stable labels, save/load
mid-stream, ``SpectralTopicMixture.partial_fit``, and the stored start block both topic updates read."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine.moments import PairSums
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralTopicMixture
from specinit.models import lda, single_topic
from tests.conftest import best_permutation

WEIGHTS = np.array([0.4, 0.3, 0.2, 0.1])


def separable_topics(k: int, V: int, seed: int) -> np.ndarray:
    """Topics with an anchor word each (word i occurs in topic i alone), the rest Dirichlet(0.5)."""
    beta = np.zeros((k, V))
    beta[:, k:] = 0.85 * np.random.default_rng(seed).dirichlet(np.full(V - k, 0.5), size=k)
    beta[np.arange(k), np.arange(k)] = 0.15
    return beta


def sample_documents(beta, weights, n_docs: int, length: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    topics = rng.choice(len(weights), size=n_docs, p=weights)
    return sp.csr_matrix(np.vstack([rng.multinomial(length, beta[i]) for i in topics]))


def _batches(X, n_batches):
    size = X.shape[0] // n_batches
    return [X[i * size: (i + 1) * size] for i in range(n_batches)]


@pytest.fixture(scope="module")
def documents():
    beta = separable_topics(4, 40, seed=0)
    return beta, sample_documents(beta, WEIGHTS, 4000, 20, seed=1)


def test_updates_are_consistent_as_documents_arrive():
    """Four batches of separable topics: the error of the topics and weights after all batches shrinks as the
    documents grow (4,000 -> 64,000)."""
    beta = separable_topics(4, 40, seed=0)
    errors = []
    for n_docs in (4000, 64000):
        estimate = None
        for batch in _batches(sample_documents(beta, WEIGHTS, n_docs, 20, seed=1), 4):
            estimate = single_topic.update(batch, estimate, k=4, seed=0)
        order = best_permutation(beta, estimate.params["beta"])
        errors.append((np.abs(beta - estimate.params["beta"][order]).sum(axis=1).max(),
                       np.abs(WEIGHTS - estimate.params["weights"][order]).max()))
        np.testing.assert_allclose(estimate.params["weights"].sum(), 1.0, atol=1e-12)
        assert estimate.diagnostics["n_batches"] == 4 and estimate.diagnostics["n_documents"] == n_docs
    (coarse, coarse_weights), (fine, fine_weights) = errors
    assert fine < coarse / 2.5 and fine < 0.02
    assert fine_weights < coarse_weights / 2.5 and fine_weights < 0.005


def test_the_merged_moments_are_the_one_shot_moments_and_labels_stay(documents):
    """The stored summary after four batches equals the pair sums of all documents; the topics stay closest to
    themselves from batch to batch and end within 1e-2 of the fit of everything as one batch."""
    _, X = documents
    estimate, previous = None, None
    for batch in _batches(X, 4):
        estimate = single_topic.update(batch, estimate, k=4, seed=0)
        if previous is not None:
            assert np.all(best_permutation(previous, estimate.params["beta"]) == np.arange(4))
        previous = estimate.params["beta"]
    stored = PairSums.from_arrays({key.split("/", 1)[1]: value for key, value in estimate.state.items()
                                   if key.startswith("moments/")})
    once = PairSums.from_counts(X)
    Q = np.random.default_rng(0).normal(size=(X.shape[1], 5))
    expected = once.m2_matmat(Q)
    np.testing.assert_allclose(stored.m2_matmat(Q), expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    one_batch = single_topic.update(X, k=4, seed=0)
    order = best_permutation(one_batch.params["beta"], estimate.params["beta"])
    assert np.abs(one_batch.params["beta"] - estimate.params["beta"][order]).sum(axis=1).max() < 1e-2


def test_updates_continue_after_save_and_load(documents, tmp_path):
    _, X = documents
    first = single_topic.update(X[:2000], k=4, seed=0, vocabulary=[f"w{i}" for i in range(40)])
    resumed = single_topic.update(X[2000:], SpectralEstimate.load(first.save(tmp_path / "online.npz")), seed=0)
    direct = single_topic.update(X[2000:], first, seed=0)
    np.testing.assert_array_equal(resumed.params["beta"], direct.params["beta"])
    np.testing.assert_array_equal(resumed.params["weights"], direct.params["weights"])
    assert resumed.vocabulary == first.vocabulary and resumed.model == "single_topic"


def test_update_errors_name_the_argument(documents):
    _, X = documents
    with pytest.raises(ValueError, match=r"'k' argument of single_topic.update must be given for the first batch"):
        single_topic.update(X[:200])
    for option, value in (("floor", 2.0), ("weighting", "mean")):
        with pytest.raises(ValueError, match=rf"'{option}' argument of single_topic.update"):
            single_topic.update(X[:200], k=4, **{option: value})
    with pytest.raises(ValueError, match=r"'counts' argument of single_topic.update"):
        single_topic.update(-X[:200], k=4)
    first = single_topic.update(X[:500], k=4, seed=0)
    with pytest.raises(ValueError, match=r"'k' argument of single_topic.update must be None or the estimate's k = 4"):
        single_topic.update(X[500:], first, k=3)
    with pytest.raises(ValueError, match=r"'estimate' argument of single_topic.update must be an estimate that "
                                         r"keeps its moments"):
        single_topic.update(X[500:], single_topic.spectral(X[:500], 4, seed=0))
    with pytest.raises(ValueError, match=r"'counts' argument of single_topic.update must be documents over the "
                                         r"same 40"):
        single_topic.update(X[500:, :30], first)


def test_partial_fit_answers_after_every_batch(documents):
    _, X = documents
    model = SpectralTopicMixture(4, random_state=0)
    direct = None
    for batch in _batches(X[:3000], 3):
        model.partial_fit(batch)
        direct = single_topic.update(batch, direct, k=4, seed=0)
        np.testing.assert_allclose(model.predict_proba(X[:20]).sum(axis=1), 1.0)
        assert np.isfinite(model.score(X[:20])) and model.labels_.shape == (batch.shape[0],)
    np.testing.assert_array_equal(model.components_, direct.params["beta"])
    np.testing.assert_array_equal(model.weights_, direct.params["weights"])
    with pytest.raises(ValueError, match="SpectralTopicMixture.partial_fit continues a model built by partial_fit"):
        SpectralTopicMixture(4, random_state=0).fit(X[:500]).partial_fit(X[500:1000])


def test_partial_fit_streamed_without_reads_recovers_once(documents):
    """Unread batches are only merged; the first read recovers from all of them (labels of the last batch)."""
    _, X = documents
    batches = _batches(X[:3000], 3)
    model = SpectralTopicMixture(4, random_state=0)
    stream = None
    for batch in batches:
        model.partial_fit(batch)
        assert "estimate_" not in vars(model)
    for batch in batches[:-1]:
        stream = single_topic.FAMILY.defer(batch, stream, 4, weighting="pooled")
    direct = single_topic.update(batches[-1], stream, seed=0)
    assert model.labels_.shape == (batches[-1].shape[0],)  # a fitted attribute read first recovers
    np.testing.assert_array_equal(model.components_, direct.params["beta"])
    assert model.estimate_.diagnostics["n_batches"] == 3 and model.estimate_.diagnostics["n_documents"] == 3000


@pytest.mark.parametrize("family", [single_topic, lda], ids=["single_topic", "lda"])
@pytest.mark.parametrize("damage", ["missing", "rows", "vector", "nan", "text"])
def test_a_damaged_stored_start_block_is_named(documents, family, damage):
    """The eigensolver's start block kept in the state (e.g. from an edited .npz) is checked before it is read."""
    _, X = documents
    first = family.update(X[:500], k=4, seed=0)
    state = dict(first.state)
    space = state.pop("eigenspace")
    damaged = {"rows": space[:-1], "vector": space[:, 0], "nan": np.where(space > 0, np.nan, space),
               "text": space.astype(str)}
    if damage != "missing":
        state["eigenspace"] = damaged[damage]
    with pytest.raises(ValueError, match=rf"'estimate' argument of {family.__name__.rsplit('.', 1)[-1]}.update must "
                                         r"be an estimate whose state holds the eigensolver's finite \(V, <= k \+ 10\) "
                                         r"= \(40, <= 14\) start block"):
        family.update(X[500:1000], replace(first, state=state), seed=0)


def test_partial_fit_chooses_auto_components_on_the_first_batch(documents):
    """``n_components="auto"``: the first batch's k by the rule ``fit`` follows, kept for the later batches."""
    _, X = documents
    model = SpectralTopicMixture("auto", random_state=0)
    model.partial_fit(X[:2000])
    chosen = single_topic.spectral(X[:2000], "auto", seed=0).k
    assert chosen == 4 and model.estimate_.k == chosen and model.n_components == "auto"
    model.partial_fit(X[2000:])
    assert model.estimate_.k == chosen and model.estimate_.diagnostics["n_batches"] == 2
