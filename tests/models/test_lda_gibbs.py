"""``lda.kernel``: the data-augmentation update of (beta, theta) is exact, the sampler targets lda.model's posterior."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from numpyro.diagnostics import effective_sample_size
from numpyro.infer import MCMC, NUTS
from scipy.special import digamma, polygamma

from specinit.distributions.counts import from_csr
from specinit.models import lda
from specinit.distributions.counts import _dirichlet_draw, _gumbel, _topic_counts
from specinit.synthetic import sample_lda
from tests.conftest import best_permutation

DRAWS = 20_000

# N = 3 documents over V = 4 words, k = 2 topics.
COUNTS = np.array([[3, 0, 1, 2], [0, 5, 2, 0], [1, 1, 0, 4]])
BETA = np.array([[0.5, 0.1, 0.3, 0.1], [0.05, 0.6, 0.05, 0.3]])
THETA = np.array([[0.7, 0.3], [0.2, 0.8], [0.5, 0.5]])


def _tokens(counts):
    rows, cols = np.nonzero(counts)
    reps = counts[rows, cols]
    return jnp.asarray(np.repeat(rows, reps)), jnp.asarray(np.repeat(cols, reps))


def test_topic_split_has_the_conditional_moments():
    """E[n_dk] = sum_w c_dw p_kdw and E[n_kw] = sum_d c_dw p_kdw with p_kdw = theta_dk beta_kw / sum_j theta_dj beta_jw;
    each token is a Bernoulli(p) for topic 0 (k = 2), so the variance of a sum is sum c p (1 - p): the means of 20,000
    draws are checked to 5 standard errors."""
    token_doc, token_word = _tokens(COUNTS)
    keys = jax.random.split(jax.random.PRNGKey(0), DRAWS)
    split = jax.jit(jax.vmap(lambda key: _topic_counts(key, jnp.asarray(THETA, jnp.float32),
                                                       jnp.asarray(BETA, jnp.float32), token_doc, token_word)))
    n_dk, n_kw = (np.asarray(a, np.float64) for a in split(keys))
    assert np.all(n_dk.sum(-1) == COUNTS.sum(1)) and np.all(n_kw.sum(1) == COUNTS.sum(0))
    p = THETA[:, :, None] * BETA[None]                      # (d, k, w)
    p /= p.sum(1, keepdims=True)
    mean_dk, var_dk = np.einsum("dw,dkw->dk", COUNTS, p), np.einsum("dw,dkw->dk", COUNTS, p * (1 - p))
    mean_kw, var_kw = np.einsum("dw,dkw->kw", COUNTS, p), np.einsum("dw,dkw->kw", COUNTS, p * (1 - p))
    np.testing.assert_array_less(np.abs(n_dk.mean(0) - mean_dk), 5 * np.sqrt(var_dk / DRAWS) + 1e-9)
    np.testing.assert_array_less(np.abs(n_kw.mean(0) - mean_kw), 5 * np.sqrt(var_kw / DRAWS) + 1e-9)
    np.testing.assert_allclose(n_dk.var(0), var_dk, rtol=0.1, atol=1e-9)


def test_topic_split_draws_topics_far_below_float32_resolution():
    """Tokens whose topic probabilities are 1e-30 apart in value (log beta -70 vs -1: the product theta * beta
    is below float32 normal range for one topic) are split by their log probabilities: the rare topic is chosen
    with probability ~e^-69 (never in 20,000 draws), the split stays exact for the ordinary tokens."""
    counts = np.array([[4, 0], [0, 3]])
    beta = jnp.asarray([[np.exp(-70.0), 1 - np.exp(-70.0)], [0.5, 0.5]], jnp.float32)
    theta = jnp.asarray([[1e-30, 1.0 - 1e-30], [0.5, 0.5]], jnp.float32)
    token_doc, token_word = _tokens(counts)
    keys = jax.random.split(jax.random.PRNGKey(1), DRAWS)
    n_dk, _ = jax.jit(jax.vmap(lambda key: _topic_counts(key, theta, beta, token_doc, token_word)))(keys)
    n_dk = np.asarray(n_dk, np.float64)
    assert np.all(n_dk[:, 0, 0] == 0)                       # topic 0 for word 0 in doc 0: probability ~1e-60
    p = 0.5 * (1 - np.exp(-70.0)) / (0.5 * (1 - np.exp(-70.0)) + 0.5 * 0.5)
    assert abs(n_dk[:, 1, 1].mean() - 3 * (1 - p)) < 5 * np.sqrt(3 * p * (1 - p) / DRAWS)


def test_gumbel_tail():
    """The Gumbels of the topic draw: P(G > g) = 1 - exp(-exp(-g)); 4e6 draws: the mean and variance to 5
    standard errors, the tail above 10 within 5 Poisson standard deviations; finite everywhere."""
    g = np.asarray(_gumbel(jax.random.PRNGKey(2), (4_000_000,)), np.float64)
    assert np.all(np.isfinite(g))
    assert abs(g.mean() - np.euler_gamma) < 5 * np.sqrt(np.pi**2 / 6 / g.size)
    assert abs(g.var() - np.pi**2 / 6) < 0.02
    expected = g.size * -np.expm1(-np.exp(-10.0))
    assert abs((g > 10).sum() - expected) < 5 * np.sqrt(expected)


def test_dirichlet_draw_moments_and_log_tail():
    """Dirichlet(eta + n) draws: means (eta + n_w) / sum to 5 standard errors, and E[log p_w] = psi(a_w) - psi(a_0)
    (with a_w = 0.1: about -10 - psi(a_0), whose Gamma variable underflows float32 one time in ~10^4; a draw by
    normalized Gammas would give log 0 = -inf). Every value is > 0."""
    n = np.zeros(50)
    n[:5] = [40, 7, 3, 1, 1]
    conc = 0.1 + n
    p = np.asarray(_dirichlet_draw(jax.random.PRNGKey(3), jnp.broadcast_to(jnp.asarray(conc, jnp.float32),
                                                                           (DRAWS, conc.size))), np.float64)
    assert np.all(p > 0) and np.all(np.isfinite(np.log(p)))
    a0 = conc.sum()
    mean, var = conc / a0, conc * (a0 - conc) / (a0**2 * (a0 + 1))
    np.testing.assert_array_less(np.abs(p.mean(0) - mean), 5 * np.sqrt(var / DRAWS))
    log_mean, log_var = digamma(conc) - digamma(a0), polygamma(1, conc) - polygamma(1, a0)
    np.testing.assert_array_less(np.abs(np.log(p).mean(0) - log_mean), 5 * np.sqrt(log_var / DRAWS) + 0.01)


def _invariants(samples):
    """Label-free functionals: each document's word distribution theta_d @ beta, sum(alpha), sum_k beta_kw^2."""
    doc_words = np.einsum("sdk,skw->sdw", samples["theta"], samples["beta"]).reshape(len(samples["beta"]), -1)
    return np.column_stack([doc_words, samples["alpha"].sum(-1), (samples["beta"] ** 2).sum(1)])


def test_kernel_targets_the_model_posterior():
    """Gibbs-within-NUTS and NUTS on lda.model (k = 2, V = 3, 6 short documents) agree on label-free posterior
    means (documents' word distributions, sum(alpha), sum_k beta_kw^2) within 5 combined Monte Carlo standard
    errors (from each run's effective sample size). A data-augmentation step with a wrong prior (eta or alpha
    replaced by 1 in a Dirichlet) moves some of these means by 7 to 9 standard errors."""
    X = np.array([[6, 1, 0], [5, 0, 2], [0, 4, 3], [1, 6, 0], [0, 2, 5], [3, 3, 1]], np.float32)
    args, kwargs = (X,), {"k": 2, "eta": 0.5, "alpha_prior": (2.0, 2.0)}
    means, errors = [], []
    for kernel in (lda.kernel(*args, **kwargs, gibbs_sweeps=2), NUTS(lda.model, target_accept_prob=0.9)):
        mcmc = MCMC(kernel, num_warmup=500, num_samples=4000, num_chains=1, progress_bar=False)
        mcmc.run(jax.random.PRNGKey(4), *args, **kwargs)
        f = _invariants({name: np.asarray(v, np.float64) for name, v in mcmc.get_samples().items()})
        ess = np.array([effective_sample_size(f[None, :, j]) for j in range(f.shape[1])])
        means.append(f.mean(0))
        errors.append(f.std(0) / np.sqrt(np.maximum(ess, 1.0)))
    np.testing.assert_array_less(np.abs(means[0] - means[1]), 5 * np.hypot(*errors) + 1e-3)


def test_spectral_start_recovers_planted_topics():
    """Sparse counts, the spectral start, 2 chains run sequentially: the posterior mean topics match the planted
    ones (mean L1 distance per topic < 0.25) and the chains keep one labelling (their topic means agree to 0.1)."""
    corpus = sample_lda(n_docs=150, vocab_size=30, k=3, alpha=0.3, doc_length=60, seed=5)
    estimate = lda.spectral(corpus.counts, 3, alpha0=0.9, seed=0)
    X = corpus.counts
    kernel = lda.model.kernel(X, k=3)
    # for the Gibbs composite, init_params gives alpha unconstrained and beta, theta constrained (on the simplex)
    init = estimate.init_params(lda.model, 2, jax.random.PRNGKey(5), spread=0.05, kernel=kernel, model_args=(X,),
                                model_kwargs={"k": 3})
    np.testing.assert_allclose(np.asarray(init["beta"]).sum(-1), 1.0, rtol=1e-5)
    mcmc = MCMC(kernel, num_warmup=80, num_samples=80, num_chains=2, chain_method="sequential",
                progress_bar=False)
    mcmc.run(jax.random.PRNGKey(6), X, k=3, init_params=init)
    beta = np.asarray(mcmc.get_samples(group_by_chain=True)["beta"], np.float64)
    assert np.all(beta > 0) and np.all(np.isfinite(beta))
    chain_means = beta.mean(1)
    assert np.abs(chain_means[0] - chain_means[1]).sum(-1).max() < 0.1
    mean = beta.mean((0, 1))
    perm = best_permutation(corpus.beta, mean)
    assert np.abs(mean[perm] - corpus.beta).sum(-1).mean() < 0.25


def test_kernel_is_the_models_attribute():
    assert lda.model.kernel is lda.kernel
    assert "kernel" in lda.__all__


def test_kernel_rejects_bad_arguments():
    X = COUNTS.astype(np.float32)
    with pytest.raises(ValueError, match="'subsample_size' argument of lda.kernel"):
        lda.kernel(X, k=2, subsample_size=2)
    with pytest.raises(ValueError, match="'counts' argument of lda.kernel"):
        lda.kernel(None, k=2, vocab_size=4, doc_lengths=[3, 3])
    with pytest.raises(ValueError, match="'counts'"):
        lda.kernel(X + 0.5, k=2)
    with pytest.raises(ValueError, match="'counts'"):
        lda.kernel(X, k=2, vocab_size=5)
    with pytest.raises(ValueError, match="'gibbs_sweeps'"):
        lda.kernel(X, k=2, gibbs_sweeps=0)
    with pytest.raises(TypeError, match="'k'"):
        lda.kernel(X, k=2.0)
    minibatch = from_csr(sp.csr_matrix(COUNTS))
    minibatch.num_documents = 30
    with pytest.raises(ValueError, match="whole corpus"):
        lda.kernel(minibatch, k=2)

