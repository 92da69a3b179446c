"""Online LDA: exact merged pair moments, anchor words warm-started from the previous fit, incremental closing
sweeps, stable topic labels, save/load mid-stream, and ``SpectralLDA.partial_fit``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import specinit
from specinit.engine.anchors import OVERSAMPLE, positive_eigenspace
from specinit.engine import moments as moments_module
from specinit.engine.moments import CountMoments, PairSums
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralLDA
from specinit.models import lda
from specinit.synthetic import sample_lda
from tests.conftest import best_permutation


@pytest.fixture(scope="module")
def corpus():
    return sample_lda(n_docs=3000, vocab_size=60, k=4, alpha=0.3, doc_length=60, seed=0)


def _batches(X, size):
    return [X[i: i + size] for i in range(0, X.shape[0], size)]


@pytest.mark.parametrize("storage", ["dense", "sparse", "mixed"])
@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
def test_merged_pair_moments_equal_the_one_shot_moments(corpus, weighting, storage, monkeypatch):
    """The 60-word corpus's pair sums are dense enough to be held dense; a threshold above 1 keeps them sparse;
    "mixed" merges a sparse summary into a dense one."""
    X = corpus.counts
    once = CountMoments(X, weighting=weighting)
    if storage != "dense":
        monkeypatch.setattr(moments_module, "DENSE_PAIRS", 2.0)
    first = PairSums.from_counts(X[:700], weighting)
    rest = PairSums.from_counts(_batches(X[700:], 450), weighting)
    assert isinstance(rest.pairs, np.ndarray) == (storage == "dense")
    if storage == "mixed":
        monkeypatch.setattr(moments_module, "DENSE_PAIRS", 0.25)
        first = PairSums.from_counts(X[:700], weighting)
    assert isinstance(first.pairs, np.ndarray) == (storage != "sparse")
    merged = first + rest
    assert isinstance(merged.pairs, np.ndarray) == (storage != "sparse")
    Q = np.random.default_rng(0).normal(size=(X.shape[1], 6))
    expected = once.m2_matmat(Q)
    np.testing.assert_allclose(merged.m2_matmat(Q), expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_allclose(merged.m1, once.m1, rtol=1e-12, atol=0)
    assert (merged.n_documents, merged.n_dropped) == (once.n_documents, once.n_dropped)
    np.testing.assert_array_equal(merged.word_counts, np.asarray(X.sum(axis=0)).ravel())
    restored = PairSums.from_arrays(merged.to_arrays())
    np.testing.assert_array_equal(restored.m2_matmat(Q), merged.m2_matmat(Q))
    assert restored.weighting == weighting
    assert isinstance(restored.pairs, np.ndarray) == (storage != "sparse")


@pytest.mark.parametrize("compiled", [True, False])
def test_sparse_pair_sums_of_a_stream_stay_pending_within_their_bound(corpus, compiled, monkeypatch):
    """Twelve batches' sparse summaries added one by one keep their pair sums as parts (never more entries than
    PENDING_PAIRS times the largest part's, plus the newest part) and add them up when read: the pair moment of the
    one-shot moments, compiled (one threaded pass) or with SciPy's additions."""
    X = corpus.counts
    monkeypatch.setattr(moments_module, "DENSE_PAIRS", 2.0)
    if not compiled:
        monkeypatch.setattr(moments_module, "numba_kernel", lambda name: None)
    summary, pending = None, []
    for batch in _batches(X, 250):
        part = PairSums.from_counts(batch, "per-document")
        summary = part if summary is None else summary + part
        sizes = [piece.nnz for piece in summary._pairs]
        pending.append(len(sizes))
        assert sum(sizes) <= moments_module.PENDING_PAIRS * max(sizes) + part.pairs.nnz
    assert max(pending) >= 2
    Q = np.random.default_rng(1).normal(size=(X.shape[1], 5))
    expected = CountMoments(X, weighting="per-document").m2_matmat(Q)
    np.testing.assert_allclose(summary.m2_matmat(Q), expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    assert sp.issparse(summary.pairs) and len(summary._pairs) == 1


@pytest.mark.parametrize("compiled", [True, False])
def test_pair_sums_summed_dense_equal_the_sparse_sums(corpus, compiled, monkeypatch):
    """``dense=True`` (a batch joining a dense summary) sums the pairs straight into a (V, V) array, compiled with
    Numba or through the sparse product without it: the same sums, chunk by chunk."""
    X = corpus.counts
    monkeypatch.setattr(moments_module, "DENSE_PAIRS", 2.0)  # the reference stays sparse
    sparse = PairSums.from_counts(_batches(X[:1000], 300), "per-document")
    if not compiled:
        monkeypatch.setattr(moments_module, "numba_kernel", lambda name: None)
    dense = PairSums.from_counts(_batches(X[:1000], 300), "per-document", dense=True)
    assert sp.issparse(sparse.pairs) and isinstance(dense.pairs, np.ndarray)
    expected = sparse.pairs.toarray()
    np.testing.assert_allclose(dense.pairs, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_array_equal(dense.word_counts, sparse.word_counts)
    assert dense.n_documents == sparse.n_documents


def test_stored_dense_pair_sums_are_checked(corpus):
    arrays = PairSums.from_counts(corpus.counts[:500]).to_arrays()
    assert arrays["pairs"].shape == (60, 60)
    for bad in (arrays["pairs"][:, :59], np.where(np.eye(60, dtype=bool), np.nan, arrays["pairs"])):
        with pytest.raises(ValueError, match=r"'estimate' argument .*stored pair sums .*'pairs' must be (of shape "
                           r"\(V, V\) = \(60, 60\)|finite)"):
            PairSums.from_arrays({**arrays, "pairs": bad})


def test_pair_sums_refuse_other_vocabularies_and_the_budget(corpus):
    X = corpus.counts
    with pytest.raises(ValueError, match=r"'counts' argument .*documents over the same 60 words"):
        PairSums.from_counts(X[:100]) + PairSums.from_counts(X[100:200, :50])
    specinit.set_memory_limit(2**20)
    try:
        big = sample_lda(n_docs=400, vocab_size=2000, k=3, alpha=0.3, doc_length=400, seed=1).counts
        with pytest.raises(MemoryError, match=r"'counts' argument .*sparse \(V, V\) word-pair sums"):
            PairSums.from_counts(big)
        with pytest.raises(MemoryError, match=r"'counts' argument .*dense \(V, V\) word-pair sums"):
            PairSums.from_counts(big, dense=True)
    finally:
        specinit.set_memory_limit(None)


def test_the_first_batch_is_the_anchor_fit(corpus):
    X = corpus.counts
    once = lda.spectral(X, 4, method="anchor", em_sweeps=0, seed=0)
    first = lda.update(X, k=4, em_sweeps=0, seed=0)
    np.testing.assert_allclose(first.params["beta"], once.params["beta"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(first.params["alpha"], once.params["alpha"], rtol=0, atol=1e-6)
    # the warm start kept for the next batch: the eigensolver's whole leading block, orthonormal
    space = first.state["eigenspace"]
    assert first.diagnostics["n_batches"] == 1 and space.shape == (X.shape[1], 4 + OVERSAMPLE)
    np.testing.assert_allclose(space.T @ space, np.eye(4 + OVERSAMPLE), atol=1e-10)
    assert not any(key.startswith("state") or key == "eigenspace" for key in first.diagnostics)


def test_batches_approach_the_one_fit_with_stable_labels(corpus):
    X = corpus.counts
    estimate, previous = None, None
    for batch in _batches(X, 1000):
        estimate = lda.update(batch, estimate, k=4, seed=0)
        if previous is not None:  # labels are kept: each topic stays closest to itself
            assert np.all(best_permutation(previous, estimate.params["beta"]) == np.arange(4))
        previous = estimate.params["beta"]
    assert estimate.diagnostics["n_batches"] == 3 and estimate.diagnostics["n_documents"] == 3000
    once = lda.spectral(X, 4, method="anchor", seed=0)
    to_once = np.abs(once.params["beta"] - estimate.params["beta"][best_permutation(once.params["beta"],
                                                                                  estimate.params["beta"])])
    assert to_once.sum(axis=1).max() < 0.05
    truth = corpus.beta
    online = np.abs(truth - estimate.params["beta"][best_permutation(truth, estimate.params["beta"])]).sum(1).max()
    single = np.abs(truth - once.params["beta"][best_permutation(truth, once.params["beta"])]).sum(1).max()
    assert online < single + 0.01


def test_batches_are_as_close_to_the_truth_as_one_fit_on_ten_topics():
    """Ten batches of a 10-topic corpus: the online topics are as close to the true ones as one fit on everything
    (mean matched L1). Counts left by earlier batches' sweeps, computed under earlier topics, would pull the sweeps
    back (0.156 against 0.129 for the one fit); the earlier documents' word counts under the current topics do not
    (0.115)."""
    corpus = sample_lda(n_docs=10_000, vocab_size=500, k=10, alpha=0.3, doc_length=60, seed=1)
    X, truth = corpus.counts, corpus.beta
    estimate = None
    for batch in _batches(X, 1000):
        estimate = lda.update(batch, estimate, k=10, seed=0)
    once = lda.spectral(X, 10, seed=0, doc_topics=False)

    def error(beta):
        return np.abs(truth - beta[best_permutation(truth, beta)]).sum(axis=1).mean()

    assert error(estimate.params["beta"]) < error(once.params["beta"]) + 0.01


def test_the_warm_start_leads_the_eigensolver():
    # an operator with a slowly decaying spectrum, started from its exact top eigenvectors: the Ritz residual is
    # at round-off after the fewest passes; from a random start it is not
    rng = np.random.default_rng(3)
    basis = np.linalg.qr(rng.normal(size=(200, 200)))[0]
    spectrum = np.concatenate([[3.0, 2.9, 2.8], 2.7 * 0.99 ** np.arange(197)])
    operator = type("Operator", (), {"n_features": 200,
                                     "m2_matmat": staticmethod(lambda Q: (basis * spectrum) @ (basis.T @ Q))})()
    *_, cold = positive_eigenspace(operator, 3, seed=0, oversample=0, max_passes=2)
    *_, warm = positive_eigenspace(operator, 3, seed=0, oversample=0, max_passes=2, start=basis[:, :3])
    assert warm.residual < 1e-10 < cold.residual


def test_warm_updates_stop_at_the_sampling_noise(monkeypatch):
    """Short documents (15 tokens, V = 300, k = 10): the pair moment's negative Ritz values are 0.4 of its k-th
    positive one. Warm-started updates stop once the residual is a tenth of that noise: fewer passes than the
    relative rule alone, and the same topic error to the truth."""
    corpus = sample_lda(n_docs=4000, vocab_size=300, k=10, alpha=0.3, doc_length=15, seed=2)
    X = sp.csr_matrix(corpus.counts)

    def run():
        estimate, passes = None, []
        for batch in _batches(X, 1000):
            estimate = lda.update(batch, estimate, k=10, seed=0)
            passes.append(estimate.diagnostics["m2_passes"])
        beta = estimate.params["beta"]
        return passes, np.abs(corpus.beta - beta[best_permutation(corpus.beta, beta)]).sum(axis=1).mean()

    passes, error = run()
    monkeypatch.setattr(lda, "WARM_NOISE_TOL", 0.0)
    strict_passes, strict_error = run()
    assert passes[0] == strict_passes[0]  # the first batch is a cold start: the relative rule alone
    assert sum(passes[1:]) < sum(strict_passes[1:])
    assert abs(error - strict_error) < 0.005


def test_updates_continue_after_save_and_load(corpus, tmp_path):
    X = corpus.counts
    first = lda.update(X[:1000], k=4, seed=0, vocabulary=[f"w{i}" for i in range(60)])
    path = first.save(tmp_path / "online.npz")
    resumed = lda.update(X[1000:2000], SpectralEstimate.load(path), seed=0)
    direct = lda.update(X[1000:2000], first, seed=0)
    np.testing.assert_array_equal(resumed.params["beta"], direct.params["beta"])
    assert resumed.vocabulary == first.vocabulary


def test_update_errors_name_the_argument(corpus):
    X = corpus.counts
    with pytest.raises(ValueError, match=r"'k' argument of lda.update must be given for the first batch"):
        lda.update(X[:200])
    for option, value in (("em_sweeps", -1), ("floor", 2.0), ("alpha_sum", 0.0), ("weighting", "mean")):
        with pytest.raises(ValueError, match=rf"'{option}' argument of lda.update"):
            lda.update(X[:200], k=4, **{option: value})
    first = lda.update(X[:500], k=4, seed=0)
    with pytest.raises(ValueError, match=r"'k' argument of lda.update must be None or the estimate's k = 4"):
        lda.update(X[500:], first, k=3)
    with pytest.raises(ValueError, match=r"'estimate' argument of lda.update must be an estimate that keeps its "
                                         r"moments"):
        lda.update(X[500:], lda.spectral(X[:500], 4, seed=0))
    with pytest.raises(ValueError, match=r"'counts' argument of lda.update must be documents over the same 60"):
        lda.update(X[500:, :50], first)
    with pytest.raises(ValueError, match=r"'vocabulary' argument of lda.update must be the estimate's vocabulary"):
        lda.update(X[500:], lda.update(X[:500], k=4, vocabulary=[f"w{i}" for i in range(60)]),
                   vocabulary=[f"v{i}" for i in range(60)])


def test_partial_fit_answers_after_every_batch(corpus):
    X = corpus.counts
    model = SpectralLDA(4, random_state=0)
    for batch in _batches(X[:1500], 500):
        model.partial_fit(batch)
        proportions = model.transform(X[:20])
        np.testing.assert_allclose(proportions.sum(axis=1), 1.0)
        assert np.isfinite(model.score(X[:20]))
    assert model.estimate_.diagnostics["n_batches"] == 3
    direct = None
    for batch in _batches(X[:1500], 500):
        direct = lda.update(batch, direct, k=4, seed=0)
    np.testing.assert_array_equal(model.components_, direct.params["beta"])
    with pytest.raises(ValueError, match="X has 50 features"):
        model.partial_fit(X[:10, :50])
    with pytest.raises(ValueError, match="SpectralLDA.partial_fit continues a model built by partial_fit"):
        SpectralLDA(4, random_state=0).fit(X[:500]).partial_fit(X[500:1000])


def test_the_first_batch_fixes_the_weighting(corpus):
    """Later batches are weighted as the stored sums, whatever ``weighting`` they are given."""
    X = corpus.counts
    first = lda.update(X[:500], k=4, weighting="pooled", seed=0)
    once = CountMoments(X[:1000], weighting="pooled")
    Q = np.random.default_rng(2).normal(size=(X.shape[1], 4))
    expected = once.m2_matmat(Q)
    for weighting in ("per-document", "pooled"):
        later = lda.update(X[500:1000], first, weighting=weighting, seed=0)
        assert later.diagnostics["weighting"] == "pooled"
        merged = PairSums.from_arrays({key[len("moments/"):]: value for key, value in later.state.items()
                                       if key.startswith("moments/")})
        np.testing.assert_allclose(merged.m2_matmat(Q), expected, rtol=0, atol=1e-10 * np.abs(expected).max())


def test_partial_fit_defers_the_recovery_until_the_topics_are_read(corpus, tmp_path, monkeypatch):
    """Batches streamed in without reading the model are merged only; the first read recovers from all of them
    with the last batch's closing sweeps: the merged moments are the one-shot moments, the estimate is that of
    ``update`` on the last batch after ``defer`` took in the others, and it continues after save and load."""
    import pickle

    X = corpus.counts
    batches = _batches(X[:2000], 400)
    model = SpectralLDA(4, random_state=0)
    for batch in batches:
        model.partial_fit(batch)
        assert "estimate_" not in vars(model) and "components_" not in vars(model)
    snapshot = pickle.loads(pickle.dumps(model))  # a pending model travels (and recovers on the other side)
    stream = None
    for batch in batches[:-1]:
        stream = lda.FAMILY.defer(batch, stream, 4, weighting="per-document")
    assert (stream.n_batches, stream.previous) == (4, None)
    direct = lda.update(batches[-1], stream, seed=0)
    np.testing.assert_array_equal(model.components_, direct.params["beta"])  # the first read recovers
    np.testing.assert_array_equal(snapshot.estimate_.params["beta"], direct.params["beta"])
    assert model.estimate_.diagnostics["n_batches"] == 5
    merged = PairSums.from_arrays({key[len(specinit.family.MOMENTS_STATE):]: value
                                   for key, value in model.estimate_.state.items()
                                   if key.startswith(specinit.family.MOMENTS_STATE)})
    once = CountMoments(X[:2000], weighting="per-document")
    Q = np.random.default_rng(1).normal(size=(X.shape[1], 5))
    expected = once.m2_matmat(Q)
    np.testing.assert_allclose(merged.m2_matmat(Q), expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    truth = corpus.beta
    error = np.abs(model.components_[best_permutation(truth, model.components_)] - truth).sum(axis=1).mean()
    assert error < 0.08, error  # one fit on the same 2,000 documents: 0.048
    # after a read, later batches are deferred again from the recovered estimate (its eigenspace, its labels)
    model.partial_fit(X[2000:2500])
    assert "estimate_" not in vars(model)
    continued = lda.update(X[2000:2500], direct, seed=0)
    np.testing.assert_array_equal(model.transform(X[:5]), lda.document_topics(X[:5], continued.params["beta"],
                                                                               continued.params["alpha"]))
    path = tmp_path / "stream.npz"
    model.estimate_.save(path)
    resumed = lda.update(X[2500:], SpectralEstimate.load(path), seed=0)
    assert resumed.diagnostics["n_documents"] == X.shape[0] and resumed.diagnostics["n_batches"] == 7
    # a recovery that fails keeps the stream (the next read tries again)
    failing = SpectralLDA(4, random_state=0)
    for batch in batches[:2]:
        failing.partial_fit(batch)
    def interrupted(*args, **kwargs):
        raise RuntimeError("interrupted")

    with monkeypatch.context() as patch:
        patch.setattr(lda, "update", interrupted)
        with pytest.raises(RuntimeError, match="interrupted"):
            failing.components_
    assert "_deferred" in vars(failing)
    assert failing.estimate_.diagnostics["n_batches"] == 2
    # fit replaces a pending stream; a stream keeps its k
    refit = SpectralLDA(4, random_state=0)
    refit.partial_fit(X[:500])
    refit.fit(X[:800])
    assert "_deferred" not in vars(refit) and refit.estimate_.diagnostics.get("n_batches") is None
    with pytest.raises(ValueError, match=r"'k' argument of lda.update must be None or the stream's k = 4"):
        lda.update(X[2000:], stream, k=3)
