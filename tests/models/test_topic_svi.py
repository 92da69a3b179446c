"""Sparse NumPyro topic models and their minibatch SVI (lda.svi, single_topic.svi).

Tolerances: the sparse (segment-sum over nonzeros) and dense (N x V matmul)
log densities are the same sums in a different order, so they agree to a
few float32 ulps of the total (|log p| ~ 1e2 here: 1e-5 relative) and to
1e-10 relative in float64 (scoped ``enable_x64``).
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import pytest
import scipy.sparse as sp
from numpyro.infer import Predictive, log_likelihood
from numpyro.infer.util import log_density
from specinit.models import lda, single_topic
from specinit.distributions.counts import DocumentCounts, from_csr

from specinit.synthetic import sample_lda

K, V, N = 3, 15, 8


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    X = rng.poisson(0.6, size=(N, V))
    X[0] = 0
    X[0, 3] = 2  # a one-word document
    beta = rng.dirichlet(np.ones(V), size=K)
    theta = rng.dirichlet(np.ones(K), size=N)
    alpha = np.array([0.5, 0.3, 0.2])
    return X, beta, theta, alpha


def _lda_params(beta, theta, alpha, dtype):
    return {"beta": jnp.asarray(beta, dtype), "theta": jnp.asarray(theta, dtype), "alpha": jnp.asarray(alpha, dtype)}


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_and_dense_lda_log_density_agree_float32(small, fmt):
    X, beta, theta, alpha = small
    params = _lda_params(beta, theta, alpha, jnp.float32)
    dense, _ = log_density(lda.model, (X,), {"k": K}, params)
    sparse, _ = log_density(lda.model, (sp.csr_matrix(X).asformat(fmt),), {"k": K}, params)
    np.testing.assert_allclose(float(sparse), float(dense), rtol=1e-5)


def test_sparse_and_dense_log_density_agree_float64(small):
    X, beta, theta, alpha = small
    with jax.enable_x64(True):
        params = _lda_params(beta, theta, alpha, jnp.float64)
        dense, _ = log_density(lda.model, (X,), {"k": K}, params)
        sparse, _ = log_density(lda.model, (sp.csr_matrix(X),), {"k": K}, params)
        np.testing.assert_allclose(float(sparse), float(dense), rtol=1e-10)
        p2 = {"beta": params["beta"], "weights": params["alpha"]}
        dense, _ = log_density(single_topic.model, (X,), {"k": K}, p2)
        sparse, _ = log_density(single_topic.model, (sp.csr_matrix(X),), {"k": K}, p2)
        np.testing.assert_allclose(float(sparse), float(dense), rtol=1e-10)


def test_sparse_and_dense_single_topic_log_density_agree_float32(small):
    X, beta, _, alpha = small
    params = {"beta": jnp.asarray(beta, jnp.float32), "weights": jnp.asarray(alpha, jnp.float32)}
    dense, _ = log_density(single_topic.model, (X,), {"k": K}, params)
    sparse, _ = log_density(single_topic.model, (sp.csr_matrix(X),), {"k": K}, params)
    np.testing.assert_allclose(float(sparse), float(dense), rtol=1e-5)


def test_sparse_log_density_matches_scipy_multinomial(small):
    """The sparse LDA likelihood is the multinomial of theta_d @ beta (independent reference)."""
    from scipy.stats import multinomial

    X, beta, theta, alpha = small
    params = _lda_params(beta, theta, alpha, jnp.float32)
    model = numpyro.handlers.substitute(numpyro.handlers.seed(lda.model, 0), params)
    trace = numpyro.handlers.trace(model).get_trace(sp.csr_matrix(X), k=K)
    got = np.asarray(trace["counts"]["fn"].log_prob(trace["counts"]["value"]))
    probs = theta @ beta
    want = [multinomial.logpmf(x, x.sum(), p / p.sum()) for x, p in zip(X, probs)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_minibatch_scales_to_the_corpus(small):
    """A minibatch with num_documents = 4 x its rows weighs its document terms by 4."""
    X, beta, theta, alpha = small
    params = _lda_params(beta, theta, alpha, jnp.float32)
    full, trace = log_density(lda.model, (from_csr(sp.csr_matrix(X)),), {"k": K}, params)
    batch = from_csr(sp.csr_matrix(X), num_documents=4 * N, pad=200)  # padding entries add nothing
    scaled, _ = log_density(lda.model, (batch,), {"k": K}, params)
    glob = sum(float(jnp.sum(trace[name]["fn"].log_prob(params[name]))) for name in ("alpha", "beta"))
    np.testing.assert_allclose(float(scaled) - glob, 4 * (float(full) - glob), rtol=1e-5)


def test_per_document_log_likelihood_and_predictive(small):
    X, beta, theta, alpha = small
    draws = {name: jnp.stack([value, value]) for name, value in _lda_params(beta, theta, alpha, jnp.float32).items()}
    ll = log_likelihood(lda.model, draws, sp.csr_matrix(X), k=K)
    assert set(ll) == {"counts"} and ll["counts"].shape == (2, N)
    dense_ll = log_likelihood(lda.model, draws, X, k=K)["counts"]
    np.testing.assert_allclose(ll["counts"], dense_ll, rtol=1e-5)
    st = log_likelihood(single_topic.model, {"beta": draws["beta"], "weights": draws["alpha"]}, sp.csr_matrix(X), k=K)
    assert st["counts"].shape == (2, N)
    generated = Predictive(lda.model, num_samples=2)(jax.random.PRNGKey(0), k=K, vocab_size=V, doc_lengths=np.full(4, 10))
    assert generated["counts"].shape == (2, 4, V)
    np.testing.assert_array_equal(generated["counts"].sum(-1), 10)


def test_contractions_request_highest_precision(small):
    """Every dot product in the traced log density asks for HIGHEST precision (no TF32 on GPUs)."""
    X, beta, theta, alpha = small
    params = _lda_params(beta, theta, alpha, jnp.float32)
    for counts in (X, sp.csr_matrix(X)):
        jaxpr = str(jax.make_jaxpr(lambda p: log_density(lda.model, (counts,), {"k": K}, p)[0])(params))
        dots = jaxpr.count("dot_general")
        assert dots > 0 and jaxpr.count("precision=(Precision.HIGHEST, Precision.HIGHEST)") == dots


# ----------------------------------------------------------------------------- SVI
@pytest.fixture(scope="module")
def corpus():
    c = sample_lda(400, 60, K, alpha=0.2, doc_length=60, seed=1)
    return c


@pytest.fixture(scope="module")
def runs(corpus):
    est = lda.spectral(corpus.counts, K, alpha0=0.6, doc_topics=False, seed=0)
    warm = lda.svi(corpus.counts, K, init=est, num_steps=150, batch_size=64, seed=0, snapshot_every=50)
    cold = lda.svi(corpus.counts, K, init=None, num_steps=150, batch_size=64, seed=0)
    return est, warm, cold


def test_svi_reduces_loss_and_params_inside_support(runs, corpus):
    _, warm, cold = runs
    for result in (warm, cold):
        assert result.losses.shape == (150,) and np.all(np.isfinite(result.losses))
        assert result.n_steps == 150 and result.stop_reason == "num_steps" and np.isnan(result.improvement)
        beta, alpha = result.params["beta"], result.params["alpha"]
        assert beta.shape == (K, 60) and alpha.shape == (K,)
        assert beta.min() > 0 and alpha.min() > 0
        np.testing.assert_allclose(beta.sum(1), 1.0, atol=1e-6)
        assert set(result.guide_params) == {"alpha_unconstrained", "beta_unconstrained"}
    # The cold start is far off: its loss must drop a lot (minibatch noise is ~1% here).
    assert cold.losses[-20:].mean() < 0.9 * cold.losses[:5].mean()
    # The warm start begins near the optimum: lower than the cold start's beginning.
    assert warm.losses[:5].mean() < cold.losses[:5].mean()
    assert [step for step, _ in warm.snapshots] == [50, 100, 150]


def test_svi_recovers_topics(runs, corpus):
    """400 docs x 60 tokens, V = 60: both runs find the topics (mean L1 < 0.3; a random guess is ~1.2)."""
    from tests.conftest import best_permutation

    _, warm, cold = runs
    for result in (warm, cold):
        perm = best_permutation(corpus.beta, result.params["beta"])
        assert np.abs(result.params["beta"][perm] - corpus.beta).sum(1).mean() < 0.3


def test_refine_moves_the_spectral_topics_toward_the_truth(corpus):
    """lda.refine (full-batch variational EM from the spectral estimate): the ELBO rises, the topics get closer
    to the truth than the spectral ones, and the result holds every latent site of lda.model (NUTS-ready)."""
    from tests.conftest import best_permutation

    from specinit.warmstart import init_params

    est = lda.spectral(corpus.counts, K, alpha0=0.6, doc_topics=False, seed=0)
    result = lda.refine(corpus.counts, est, num_steps=200)
    assert result.method == "svi" and result.log_likelihood.shape == (200,)
    assert result.log_likelihood[-20:].mean() > result.log_likelihood[:5].mean()
    refined = result.estimate

    def error(beta):
        return np.abs(beta[best_permutation(corpus.beta, beta)] - corpus.beta).sum(1).mean()

    assert error(refined.params["beta"]) < error(est.params["beta"])
    assert refined.params["theta"].shape == (400, K) and refined.diagnostics["refine/method"] == "svi"
    assert all(np.array_equal(refined.diagnostics[key], value) for key, value in est.diagnostics.items())
    start = init_params(refined, lda.model, 2, jax.random.PRNGKey(0), spread=0.05, model_args=(corpus.counts,),
                        model_kwargs={"k": K})
    assert set(start) == {"alpha", "beta", "theta"} and start["theta"].shape[0] == 2


def test_refine_bad_estimate(corpus):
    with pytest.raises(ValueError, match=r"'estimate' argument of lda.refine must be the sites .* missing \['alpha'\]"):
        lda.refine(corpus.counts, {"beta": np.ones((K, 60)) / 60})
    with pytest.raises(TypeError, match="'estimate' argument of lda.refine"):
        lda.refine(corpus.counts, None)
    start = {"beta": np.ones((K, 60)) / 60, "alpha": np.ones(K)}
    for value in (0.0, -1e-3, float("nan")):  # refused at the entry, before any step runs
        with pytest.raises(ValueError, match="'tol' argument of lda.refine must be a finite number > 0"):
            lda.refine(corpus.counts, start, tol=value)


def test_float32_large_vocabulary_is_finite():
    """V = 50,000 in float32 with validation on: finite losses, no simplex validation error."""
    rng = np.random.default_rng(0)
    n_docs, vocab = 12, 50_000
    rows = np.repeat(np.arange(n_docs), 30)
    cols = rng.integers(0, vocab, size=rows.size)
    X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, vocab))
    assert jnp.result_type(float) == jnp.float32
    with numpyro.validation_enabled():
        result = lda.svi(X, 2, num_steps=3, batch_size=4, seed=0)
    assert np.all(np.isfinite(result.losses))
    assert result.params["beta"].min() > 0


def test_single_topic_svi(corpus):
    est = single_topic.spectral(corpus.counts, K, seed=0)
    result = single_topic.svi(corpus.counts, K, init=est, num_steps=30, batch_size=100, seed=0)
    assert np.all(np.isfinite(result.losses))
    assert set(result.params) == {"beta", "weights"}
    np.testing.assert_allclose(result.params["weights"].sum(), 1.0, atol=1e-6)
    assert result.params["weights"].min() > 0 and result.params["beta"].min() > 0


def test_svi_progress_goes_to_the_logger_not_stdout(corpus, capsys, caplog):
    with caplog.at_level(logging.INFO, logger="specinit"):
        single_topic.svi(corpus.counts, K, num_steps=4, batch_size=50, progress=2)
    lines = [record.getMessage() for record in caplog.records if record.name == "specinit"]
    assert len(lines) == 3 and lines[1].startswith("single_topic.svi: step 4/4")
    assert lines[2].startswith("single_topic.svi: stopped after 4 steps (num_steps")
    assert capsys.readouterr().out == ""


def test_svi_progress_bar_only_when_asked(corpus, capsys):
    """progress=True draws a tqdm bar on stderr; the default draws none when stderr is not a terminal (pytest)."""
    lda.svi(corpus.counts, K, num_steps=3, batch_size=64, progress=True)
    assert "lda.svi" in capsys.readouterr().err
    lda.svi(corpus.counts, K, num_steps=3, batch_size=64)
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- stopping and compilation
def test_svi_stops_on_a_plateau_and_reports_why(corpus):
    """From the spectral start on an easy corpus the check loss levels off long before the cap: the run stops at
    the first pair of consecutive checks (every 25 steps, from step 100) where the last quarter of the run gained
    less than tol per word; the check losses fall on the whole (the start is far from the optimum)."""
    from specinit.models._svi import _plateau_gain

    est = lda.spectral(corpus.counts, K, alpha0=0.6, doc_topics=False, seed=0)
    result = lda.svi(corpus.counts, K, init=est, batch_size=64, seed=0, max_steps=2000, tol=2e-3)
    n, checks = result.n_steps, [tuple(c) for c in result.checks]
    assert result.stop_reason == "plateau" and 125 <= n < 2000 and n % 25 == 0
    assert result.losses.shape == (n,) and [c[0] for c in checks] == list(range(25, n + 1, 25))
    # Two checks in a row below tol, and never two in a row before.
    gains = [_plateau_gain(checks[:i]) for i in range(4, len(checks) + 1)]
    assert result.improvement == gains[-1] < 2e-3 and gains[-2] < 2e-3
    assert not any(a < 2e-3 and b < 2e-3 for a, b in zip(gains[:-2], gains[1:-1]))
    assert checks[-1][1] < checks[0][1]
    assert result.diagnostics["stop_reason"] == "plateau" and result.diagnostics["n_steps"] == n
    assert result.diagnostics["check_loss"] == checks[-1][1]
    # A looser tolerance stops no later.
    assert lda.svi(corpus.counts, K, init=est, batch_size=64, seed=0, tol=0.05).n_steps <= n


def test_svi_max_steps_is_a_cap_and_warns(corpus):
    with pytest.warns(RuntimeWarning, match=r"single_topic.svi reached max_steps=30 .* step 100 on"):
        result = single_topic.svi(corpus.counts, K, max_steps=30, batch_size=50, seed=0)
    assert result.n_steps == 30 and result.losses.shape == (30,) and result.stop_reason == "max_steps"
    with pytest.warns(RuntimeWarning, match=r"lda.svi reached max_steps=125 .* gained"):
        result = lda.svi(corpus.counts, K, max_steps=125, batch_size=64, seed=0, tol=1e-9)
    assert result.n_steps == 125 and result.stop_reason == "max_steps" and np.isfinite(result.improvement)


def test_second_run_of_the_same_shapes_compiles_nothing(corpus):
    """Counted with JAX's compile events: a second run (another start and seed, same corpus and settings) reuses
    every compiled function, the update step included."""
    X = corpus.counts[:200]
    compiles = []

    def listener(event, seconds, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        first = single_topic.svi(X, K, num_steps=5, batch_size=40, seed=0)
        n_first = len(compiles)
        second = single_topic.svi(X, K, init=first, num_steps=5, batch_size=40, seed=3)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    assert n_first > 0 and len(compiles) == n_first and second.n_steps == 5


@pytest.mark.parametrize("module, sites", [(lda, {"alpha_unconstrained": (K,)}), (single_topic, {"weights_unconstrained": (K - 1,)})])
def test_sorted_elbo_is_trace_elbo_summed_in_a_fixed_order(small, module, sites):
    """The ELBO of the compiled update is Trace_ELBO's (same key, same random numbers) up to float32 rounding."""
    from numpyro.infer import Trace_ELBO

    from specinit.models._svi import _SortedTraceELBO

    batch = from_csr(sp.csr_matrix(small[0]), num_documents=20)
    rng = np.random.default_rng(0)
    params = {name: jnp.asarray(rng.normal(size=shape), jnp.float32)
              for name, shape in {**sites, "beta_unconstrained": (K, V - 1)}.items()}
    key = jax.random.PRNGKey(3)
    ours = _SortedTraceELBO().loss(key, params, module.model, module.guide, batch, k=K)
    theirs = Trace_ELBO().loss(key, params, module.model, module.guide, batch, k=K)
    np.testing.assert_allclose(float(ours), float(theirs), rtol=1e-6)


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs(corpus, small):
    X = corpus.counts
    with pytest.raises(ValueError, match="'batch_size' argument of lda.svi must be at most the number of documents N=400"):
        lda.svi(X, K, batch_size=401)
    with pytest.raises(ValueError, match="'batch_size' argument of single_topic.svi"):
        single_topic.svi(X, K, batch_size=1000)
    with pytest.raises(TypeError, match="'counts' argument of lda.svi"):
        lda.svi("not counts", K)
    with pytest.raises(ValueError, match="'init' argument of lda.svi"):
        lda.svi(X, K, init={"beta": np.full((K, 7), 1 / 7), "alpha": np.ones(K)})
    with pytest.raises(ValueError, match="'local' argument of lda.svi"):
        lda.svi(X, K, local="adam")
    with pytest.raises(ValueError, match="'max_steps' argument of lda.svi must be an integer >= 1; got 0"):
        lda.svi(X, K, max_steps=0)
    with pytest.raises(TypeError, match="'max_steps' argument of single_topic.svi must be an integer >= 1; got 10.5"):
        single_topic.svi(X, K, max_steps=10.5)
    with pytest.raises(ValueError, match="'tol' argument of lda.svi must be a finite number > 0; got 0.0"):
        lda.svi(X, K, tol=0)
    with pytest.raises(TypeError, match="'tol' argument of single_topic.svi must be a finite number > 0; got 'x'"):
        single_topic.svi(X, K, tol="x")
    with pytest.raises(ValueError, match="'num_steps' argument of lda.svi must be an integer >= 1 or None; got 0"):
        lda.svi(X, K, num_steps=0)
    with pytest.raises(ValueError, match="'progress' argument of lda.svi"):
        lda.svi(X, K, progress=-1)
    dense = small[0]
    with pytest.raises(ValueError, match="'counts' argument of lda.model must be counts over the vocabulary of size V=9"):
        numpyro.handlers.seed(lda.model, 0)(sp.csr_matrix(dense), k=K, vocab_size=9)
    with pytest.raises(ValueError, match="'subsample_size' argument of single_topic.model"):
        numpyro.handlers.seed(single_topic.model, 0)(sp.csr_matrix(dense), k=K, subsample_size=2)
    with pytest.raises(TypeError, match="'counts' argument of lda.model"):
        numpyro.handlers.seed(lda.model, 0)("counts", k=K)
    with pytest.raises(ValueError, match="non-negative counts"):
        numpyro.handlers.seed(lda.model, 0)(sp.csr_matrix(-np.ones((2, 3))), k=K)
    with pytest.raises(ValueError, match="two-dimensional"):
        numpyro.handlers.seed(lda.model, 0)(np.ones(5), k=K)
    assert isinstance(from_csr(sp.csr_matrix(dense)), DocumentCounts)


@pytest.mark.parametrize("module", [lda, single_topic])
def test_model_arguments_are_checked_at_the_entry_from_their_one_declaration(module, small):
    """The topic models' arguments are declared once (``_topics.MODEL_ARGUMENTS``): every face that takes them
    checks them against that declaration, with the same message."""
    X = sp.csr_matrix(small[0])
    name = module.__name__.rsplit(".", 1)[-1]
    faces = [("model", lambda **kw: numpyro.handlers.seed(module.model, 0)(X, **kw)),
             ("guide", lambda **kw: numpyro.handlers.seed(module.guide, 0)(X, **kw)),
             ("svi", lambda **kw: module.svi(X, num_steps=1, batch_size=2, progress=False, **kw))]
    for face, call in faces:
        with pytest.raises(ValueError, match=f"'k' argument of {name}.{face} must be an integer >= 1; got 0"):
            call(k=0)
        with pytest.raises(TypeError, match=f"'k' argument of {name}.{face} must be an integer >= 1; got 2.5"):
            call(k=2.5)
        with pytest.raises(ValueError, match=f"'eta' argument of {name}.{face} must be a finite number > 0; got -1"):
            call(k=K, eta=-1.0)
