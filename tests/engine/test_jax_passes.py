"""The JAX pass backend equals the NumPy path to float64 round-off, compiles once per bucket, and fails clearly."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from specinit.models import lda, single_topic

from specinit.engine.backends import accelerator_present, resolve_backend
from specinit.engine.backends import jax as jax_passes
from specinit.engine.moments import COUNT_PASSES
from specinit.engine.moments import CountMoments
from specinit.engine.views import ViewMoments, fit_multiview
from tests.conftest import random_instance, sample_lda

# Both backends accumulate the same float64 sums in different orders: the results agree to a few
# ulps of the largest entry (observed <= 2e-15); 1e-10 leaves room for other BLAS builds.
RTOL = 1e-10


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(a)).max())


@pytest.fixture(scope="module")
def corpus():
    beta, weights = random_instance(4, 60, seed=3)
    X, _ = sample_lda(beta, 0.5 * weights * 4, N=700, length=25, seed=4)
    X[5] = 0  # documents with < 3 tokens are dropped by both backends
    X[6] = 0
    X[6, :2] = [1, 1]
    return sp.csr_matrix(X)


@pytest.mark.parametrize("alpha0", [None, 0.7])
@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
def test_count_moments_equal_numpy(corpus, alpha0, weighting):
    rng = np.random.default_rng(0)
    ref = CountMoments(corpus, alpha0=alpha0, weighting=weighting, backend="numpy")
    dev = CountMoments(corpus, alpha0=alpha0, weighting=weighting, backend="jax")
    assert dev.backend == "jax" and dev.n_dropped == ref.n_dropped == 2
    assert _rel(ref.m1, dev.m1) < RTOL
    Q = rng.standard_normal((corpus.shape[1], 9))
    assert _rel(ref.m2_matmat(Q), dev.m2_matmat(Q)) < RTOL
    W = rng.standard_normal((corpus.shape[1], 5))
    assert _rel(ref.whitened_m3(W), dev.whitened_m3(W)) < RTOL


def test_no_recompile_for_new_data_in_the_same_bucket():
    beta, weights = random_instance(3, 50, seed=0)
    X1, _ = sample_lda(beta, weights * 3, N=1100, length=30, seed=1)
    X2, _ = sample_lda(beta, weights * 3, N=1500, length=30, seed=2)
    X1, X2 = sp.csr_matrix(X1), sp.csr_matrix(X2)
    # Precondition of the check: both corpora fall in the same (rows, nnz) buckets (one block each).
    assert jax_passes.bucket(X1.nnz, 1024) == jax_passes.bucket(X2.nnz, 1024) and X2.nnz < jax_passes.DEFAULT_MAX_NNZ
    assert jax_passes.bucket(1100, 256) == jax_passes.bucket(1500, 256)
    Q, W = np.ones((50, 7)), np.ones((50, 3))
    first = CountMoments(X1, backend="jax")
    first.m2_matmat(Q), first.whitened_m3(W)
    before = dict(jax_passes.TRACE_COUNTS)
    second = CountMoments(X2, backend="jax")
    second.m2_matmat(Q), second.whitened_m3(W)
    assert dict(jax_passes.TRACE_COUNTS) == before
    assert before["m2_pass"] >= 1 and before["whitened_pass"] >= 1


def test_blocks_are_bounded_and_padded():
    X = sp.random(300, 40, density=0.3, random_state=0, format="csr")
    X.data = np.ceil(X.data * 5)
    dev = jax_passes.DeviceCounts(40, max_nnz=1000, max_rows=64)
    dev.add(X, *(np.ones(300),) * 3)
    assert sum(b.n_real for b in dev.blocks) == 300 and sum(b.nnz for b in dev.blocks) == X.nnz
    assert all(b.nnz <= 1000 and b.n_real <= 64 for b in dev.blocks)
    assert {int(b.vals.shape[0]) for b in dev.blocks} == {1024} and {b.n_rows for b in dev.blocks} == {256}


def test_block_bounds_follow_the_platform(monkeypatch):
    cpu = jax_passes.JaxPasses()
    assert (cpu.max_nnz, cpu.max_rows) == (jax_passes.DEFAULT_MAX_NNZ, jax_passes.DEFAULT_MAX_ROWS)

    class Gpu:
        platform = "gpu"

    monkeypatch.setattr(jax_passes.jax, "devices", lambda *args: [Gpu()])
    gpu = jax_passes.JaxPasses()
    assert (gpu.max_nnz, gpu.max_rows) == (jax_passes.ACCELERATOR_MAX_NNZ, jax_passes.ACCELERATOR_MAX_ROWS)
    assert jax_passes.JaxPasses(max_nnz=5000, max_rows=300).max_nnz == 5000


def test_lda_and_single_topic_spectral_backend_jax(corpus):
    a = lda.spectral(corpus, 4, alpha0=2.0, seed=1, doc_topics=False, backend="numpy")
    b = lda.spectral(corpus, 4, alpha0=2.0, seed=1, doc_topics=False, backend="jax")
    # Same moments to ~1e-15 and the same seed: the decompositions follow the same path.
    assert _rel(a.params["beta"], b.params["beta"]) < 1e-8 and _rel(a.params["alpha"], b.params["alpha"]) < 1e-8
    c = single_topic.spectral(corpus, 4, seed=1, backend="numpy")
    d = single_topic.spectral(corpus, 4, seed=1, backend="jax")
    assert _rel(c.params["beta"], d.params["beta"]) < 1e-8
    # The alpha0 grid (screening power methods, then the chosen alpha0) with the power method on the device.
    e = lda.spectral(corpus, 4, method="tpm", seed=1, doc_topics=False, backend="numpy")
    f = lda.spectral(corpus, 4, method="tpm", seed=1, doc_topics=False, backend="jax")
    assert e.diagnostics["alpha0"] == f.diagnostics["alpha0"] and _rel(e.params["beta"], f.params["beta"]) < 1e-8


def test_tensor_fit_keeps_the_tall_arrays_on_the_device(corpus, monkeypatch):
    """The Krylov space, the whitening and the same-token corrections of a JAX fit never come to the host; the
    power method runs on the device."""
    seen = []
    for name in ("m2_sum", "whitened_sums"):
        original = getattr(jax_passes.DeviceCounts, name)

        def spy(self, A, original=original):
            seen.append(isinstance(A, jax.Array))
            return original(self, A)

        monkeypatch.setattr(jax_passes.DeviceCounts, name, spy)
    decomposed = []
    power_method = jax_passes.JaxPasses.power_method

    def spy_power_method(self, *args):
        decomposed.append(args[0].shape)
        return power_method(self, *args)

    monkeypatch.setattr(jax_passes.JaxPasses, "power_method", spy_power_method)
    dev = lda.spectral(corpus, 4, alpha0=2.0, seed=1, doc_topics=False, backend="jax")
    ref = lda.spectral(corpus, 4, alpha0=2.0, seed=1, doc_topics=False, backend="numpy")
    assert len(seen) == dev.diagnostics["m2_passes"] + 1 and all(seen)
    assert decomposed == [(4, 4, 4)]  # the power method ran where the passes ran
    assert _rel(ref.params["beta"], dev.params["beta"]) < RTOL and _rel(ref.params["alpha"], dev.params["alpha"]) < RTOL
    assert not jax.config.jax_enable_x64


def test_default_fit_runs_on_the_device(corpus, monkeypatch):
    """The default call (anchor words on the pair moment, closing sweeps): every pass of its eigensolver gets a
    device block, the anchor weights and every closing sweep are computed on the device, and the topics equal
    those of the NumPy backend."""
    seen, sweeps, weights = [], [], []
    original = jax_passes.DeviceCounts.m2_sum
    sweep, anchor_weights = jax_passes.DeviceDocuments.sweep, jax_passes.JaxPasses.anchor_weights

    def spy(self, A):
        seen.append(isinstance(A, jax.Array))
        return original(self, A)

    monkeypatch.setattr(jax_passes.DeviceCounts, "m2_sum", spy)
    monkeypatch.setattr(jax_passes.DeviceDocuments, "sweep", lambda self, *a: sweeps.append(1) or sweep(self, *a))
    monkeypatch.setattr(jax_passes.JaxPasses, "anchor_weights",
                        lambda self, *a: weights.append(1) or anchor_weights(self, *a))
    assert not jax_passes.JaxPasses().recovers_on_device  # on JAX's CPU device: the host's kernels by default
    host = lda.spectral(corpus, 4, seed=1, doc_topics=False, backend="jax")
    assert not sweeps and not weights and len(seen) == host.diagnostics["m2_passes"]
    seen.clear()
    dev = lda.spectral(corpus, 4, seed=1, doc_topics=False, backend=jax_passes.JaxPasses(recovers_on_device=True))
    ref = lda.spectral(corpus, 4, seed=1, doc_topics=False, backend="numpy")
    assert dev.diagnostics["method"] == "anchor" and len(seen) == dev.diagnostics["m2_passes"] and all(seen)
    assert len(sweeps) == dev.diagnostics["closing_sweeps"] >= 2 and len(weights) == 1
    assert _rel(ref.params["beta"], host.params["beta"]) < RTOL
    assert _rel(ref.params["beta"], dev.params["beta"]) < RTOL and _rel(ref.params["alpha"], dev.params["alpha"]) < RTOL
    np.testing.assert_allclose(dev.diagnostics["closing_log_likelihood"], ref.diagnostics["closing_log_likelihood"],
                               rtol=RTOL)
    assert dev.diagnostics["anchor_recovery_steps"] == ref.diagnostics["anchor_recovery_steps"]
    assert not jax.config.jax_enable_x64


def test_seeded_sweeps_on_the_device_over_many_blocks_equal_the_host():
    """Seeded topics (each document's allowed topics worked out on the device), documents too short for the
    moments (placed again for the sweeps), and many small device blocks: the topics of the NumPy backend."""
    beta, weights = random_instance(5, 80, seed=7)
    X, _ = sample_lda(beta, 0.3 * weights * 5, N=900, length=20, seed=8)
    X[::9] = 0
    X[1::9, 4:] = 0
    X = sp.csr_matrix(X)
    words = [f"w{i}" for i in range(80)]
    own = beta / beta.sum(axis=0)  # p(topic | word) under uniform weights: the words that name each topic
    seeds = {"first": [words[i] for i in np.argsort(-own[0])[:3]], "fourth": [words[int(np.argmax(own[3]))]]}
    small = jax_passes.JaxPasses(max_nnz=2048, max_rows=256, recovers_on_device=True)
    dev = lda.spectral(X, 5, seed=2, doc_topics=False, vocabulary=words, seed_words=seeds, backend=small)
    ref = lda.spectral(X, 5, seed=2, doc_topics=False, vocabulary=words, seed_words=seeds, backend="numpy")
    assert dev.diagnostics["closing_sweeps"] == ref.diagnostics["closing_sweeps"] >= 2
    assert _rel(ref.params["beta"], dev.params["beta"]) < RTOL and _rel(ref.params["alpha"], dev.params["alpha"]) < RTOL
    assert len(small._placed[1].blocks) > 4


def test_sweeps_reuse_the_moments_blocks_when_no_document_was_dropped():
    beta, weights = random_instance(3, 40, seed=1)
    X, _ = sample_lda(beta, weights * 3, N=300, length=20, seed=2)
    moments = CountMoments(sp.csr_matrix(X), backend="jax")
    assert moments.n_dropped == 0
    assert moments.passes.place_documents(moments.source).counts is moments.passes._placed[1]
    X[0] = 0
    moments = CountMoments(sp.csr_matrix(X), backend="jax")
    documents = moments.passes.place_documents(moments.source)
    assert documents.counts is not moments.passes._placed[1] and documents.tokens == X.sum()


def test_anchor_weights_on_the_device_equal_the_host_steps():
    """The compiled FISTA loop against the host steps of :func:`specinit.engine.anchors.anchor_weights_step`."""
    from specinit.engine.anchors import anchor_weights_step

    rng = np.random.default_rng(3)
    rows = rng.dirichlet(np.ones(30), size=6)
    X = rng.dirichlet(np.ones(6), size=200) @ rows + 1e-3 * rng.standard_normal((200, 30))
    H, G = X @ rows.T, rows @ rows.T
    L = 2.0 * np.linalg.eigvalsh(G)[-1]
    C, Y, t = np.full((200, 6), 1 / 6), np.full((200, 6), 1 / 6), 1.0
    for steps in range(1, 41):
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        move = anchor_weights_step(Y, Y @ G, H, C, L, (t - 1.0) / t_new)
        t = t_new
        if move < 1e-6:
            break
    device, device_steps = jax_passes.JaxPasses().anchor_weights(H, G, L, 40, 1e-6)
    assert device_steps == steps and _rel(C, device) < RTOL
    np.testing.assert_allclose(device.sum(axis=1), 1.0, rtol=1e-12)


def _noisy_odeco(n, k, noise, seed):
    """A symmetric n^3 tensor: k orthogonal components with distinct weights plus symmetric noise."""
    rng = np.random.default_rng(seed)
    V = np.linalg.qr(rng.standard_normal((n, n)))[0][:, :k]
    T = np.einsum("i,ai,bi,ci->abc", np.linspace(3.0, 1.0, k), V, V, V) + noise * rng.standard_normal((n, n, n))
    return sum(T.transpose(p) for p in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))) / 6


@pytest.mark.parametrize("options", [{}, {"tol": 1e-6, "n_iter": 300, "n_restarts": 4}])
def test_power_method_on_the_device_equals_the_host(options):
    from specinit.engine.decompose import tensor_power_method

    passes = jax_passes.JaxPasses()
    T = _noisy_odeco(12, 10, 0.02, seed=0)
    host = tensor_power_method(T, 10, seed=5, **options)
    device = tensor_power_method(T, 10, seed=5, passes=passes, **options)
    # Each power step agrees to round-off and the iterates contract towards the components: the decompositions
    # agree to round-off (observed <= 3e-14); the step counts of the polishing may differ by one or two.
    assert _rel(host.vectors, device.vectors) < RTOL and _rel(host.weights, device.weights) < RTOL
    for key in ("converged", "stalled"):
        np.testing.assert_array_equal(host.diagnostics[key], device.diagnostics[key])
    assert host.diagnostics["converged"].all()
    traced = jax_passes.TRACE_COUNTS["power_method"]
    again = tensor_power_method(_noisy_odeco(12, 10, 0.02, seed=1), 10, seed=6, passes=passes, **options)
    assert jax_passes.TRACE_COUNTS["power_method"] == traced  # a tensor of the same shape: no recompilation
    assert again.diagnostics["converged"].all()


def test_whitening_of_device_moments_is_float64_on_the_device(corpus):
    from specinit.engine.whitening import whiten

    dev = whiten(CountMoments(corpus, alpha0=0.7, backend="jax"), 4, seed=0)
    ref = whiten(CountMoments(corpus, alpha0=0.7, backend="numpy"), 4, seed=0)
    assert isinstance(dev.W, jax.Array) and dev.W.dtype == jnp.float64
    assert _rel(ref.W, dev.W) < RTOL and _rel(ref.eigenvalues, dev.eigenvalues) < RTOL


def test_outputs_are_float64_and_global_x64_untouched(corpus):
    assert not jax.config.jax_enable_x64
    dev = CountMoments(corpus, backend="jax")
    out = dev.m2_matmat(np.ones((corpus.shape[1], 2)))
    assert out.dtype == np.float64 and not jax.config.jax_enable_x64
    assert jnp.ones(1).dtype == jnp.float32


def test_integer_jax_counts_are_exact_and_overflow_is_refused():
    rng = np.random.default_rng(0)
    # Documents of 2,000 tokens: n (n-1) (n-2) ~ 8e9 overflows int32, the float64 moments do not.
    X = rng.multinomial(2000, np.full(20, 1 / 20), size=30)
    ref = CountMoments(X.astype(np.int64))
    dev = CountMoments(jnp.asarray(X, dtype=jnp.int32), backend="jax")
    assert dev.stats.norm3 == ref.stats.norm3 > 2**31
    W = rng.standard_normal((20, 3))
    assert _rel(ref.whitened_m3(W), dev.whitened_m3(W)) < RTOL
    wrapped = jnp.asarray(X, dtype=jnp.int16).at[0, 0].set(-3)
    with pytest.raises(ValueError, match="overflow"):
        CountMoments(wrapped)
    saturated = jnp.asarray(X, dtype=jnp.int8).at[0, 0].set(127)
    with pytest.raises(ValueError, match="overflowed"):
        CountMoments(saturated)


def test_out_of_memory_block_is_halved_then_refused(corpus, monkeypatch):
    ref = CountMoments(corpus, backend="numpy")
    dev = CountMoments(corpus, backend="jax", n_threads=1)  # one chunk, whatever the core count
    assert max(b.nnz for b in dev._placed.blocks) > 2000  # precondition: a block the small device refuses
    original = jax_passes._m2_pass
    calls = {"refused": 0}

    def small_device(rows, cols, vals, a, Q, n_rows, n_cols):
        if int(np.count_nonzero(np.asarray(vals))) > 2000:  # this "device" holds 2,000 non-zeros at most
            calls["refused"] += 1
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return original(rows, cols, vals, a, Q, n_rows=n_rows, n_cols=n_cols)

    monkeypatch.setattr(jax_passes, "_m2_pass", small_device)
    Q = np.random.default_rng(1).standard_normal((corpus.shape[1], 4))
    n_blocks = len(dev._placed.blocks)
    assert _rel(ref.m2_matmat(Q), dev.m2_matmat(Q)) < RTOL
    assert calls["refused"] >= 1 and len(dev._placed.blocks) > n_blocks

    def no_device(*args, **kwargs):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory")

    monkeypatch.setattr(jax_passes, "_m2_pass", no_device)
    with pytest.raises(MemoryError, match="distinct words"):
        dev.m2_matmat(Q)


def test_views_equal_numpy_dense_and_sparse():
    rng = np.random.default_rng(0)
    N = 900
    h = rng.choice(3, size=N, p=[0.2, 0.3, 0.5])  # a 3-class multi-view mixture: 2 Gaussian views, 1 categorical
    symbols = np.array([rng.choice(25, p=p) for p in rng.dirichlet(np.full(25, 0.3), size=3)[h]])
    views = [rng.normal(3 * rng.standard_normal((3, 6))[h]), sp.csr_matrix((np.ones(N), (np.arange(N), symbols)),
             shape=(N, 25)), rng.normal(3 * rng.standard_normal((3, 8))[h])]
    ref, dev = ViewMoments(views, backend="numpy"), ViewMoments(views, backend="jax")
    for a, b in [(0, 1), (1, 2), (2, 0), (1, 1)]:
        Q = rng.standard_normal((views[b].shape[1], 4))
        assert _rel(ref.pairs_matmat(a, b, Q), dev.pairs_matmat(a, b, Q)) < RTOL
    U = [rng.standard_normal((v.shape[1], 3)) for v in views]
    assert _rel(ref.projected_triples(0, 1, 2, *U), dev.projected_triples(0, 1, 2, *U)) < RTOL
    fa, fb = fit_multiview(ref, 3, seed=0), fit_multiview(dev, 3, seed=0)
    assert _rel(fa.weights, fb.weights) < 1e-8


def test_backend_choice():
    assert resolve_backend(None, "matrix", COUNT_PASSES).name == ("jax" if accelerator_present() else "numpy")
    with pytest.raises(ValueError, match="'backend' argument of CountMoments"):
        CountMoments(np.ones((3, 4)) * 2, backend="cuda")


def test_gmm_backend_jax_equals_numpy():
    from specinit.models import gmm

    rng = np.random.default_rng(0)
    loc = 4 * rng.standard_normal((3, 6))
    x = loc[rng.choice(3, 1500, p=[0.2, 0.3, 0.5])] + rng.standard_normal((1500, 6))
    a = gmm.spectral(x, 3, covariance="spherical", seed=0, backend="numpy")
    b = gmm.spectral(x, 3, covariance="spherical", seed=0, backend="jax")
    for site in ("weights", "loc", "scale"):
        assert _rel(a.params[site], b.params[site]) < 1e-8
