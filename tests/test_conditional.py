"""specinit.conditional: structures found in user-written models, their log-density check, and exact draws."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.contrib.funsor import config_enumerate
from numpyro.infer import MCMC

from specinit.conditional import ExactGibbs, check_structure, exact_kernel, find_structure


def user_lda(counts, k=2, eta=None):
    """An LDA written as users write it: Dirichlet topics and proportions, a multinomial of their product."""
    n, v = counts.shape
    eta = 0.1 * jnp.ones((k, v)) if eta is None else eta
    topics = numpyro.sample("topics", dist.Dirichlet(eta).to_event(1))
    with numpyro.plate("docs", n):
        doc_topics = numpyro.sample("doc_topics", dist.Dirichlet(jnp.array([0.5, 2.0])))
        numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=doc_topics @ topics), obs=counts)


def token_lda(words, docs, n_docs, vocab_size, k=2):
    """The same model with a categorical per token (Stan's form)."""
    topics = numpyro.sample("phi", dist.Dirichlet(0.1 * jnp.ones((k, vocab_size))).to_event(1))
    with numpyro.plate("d", n_docs):
        theta = numpyro.sample("theta", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("tokens", len(words)):
        numpyro.sample("w", dist.Categorical(probs=(theta @ topics)[docs]), obs=words)


def hyper_lda(counts, k=2):
    """LDA with a Gamma hyperprior on the proportions' concentration: NUTS moves it."""
    n, v = counts.shape
    alpha = numpyro.sample("alpha", dist.Gamma(2.0, 2.0).expand([k]).to_event(1))
    topics = numpyro.sample("topics", dist.Dirichlet(0.1 * jnp.ones((k, v))).to_event(1))
    with numpyro.plate("docs", n):
        doc_topics = numpyro.sample("doc_topics", dist.Dirichlet(alpha))
        numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=doc_topics @ topics), obs=counts)


@config_enumerate
def user_mixture(counts, k=2, a=None, eta=None):
    """A mixture of multinomials with an enumerated assignment per row."""
    n, v = counts.shape
    weights = numpyro.sample("mix", dist.Dirichlet(jnp.ones(k) if a is None else a))
    with numpyro.plate("components", k):
        probs = numpyro.sample("word_probs", dist.Dirichlet(0.1 * jnp.ones(v) if eta is None else eta))
    with numpyro.plate("rows", n):
        z = numpyro.sample("z", dist.Categorical(weights))
        numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=probs[z]), obs=counts)


@config_enumerate
def tempered_mixture(counts, k=2):
    """Not a mixture of multinomials: the likelihood is tempered."""
    with numpyro.handlers.scale(scale=0.5):
        user_mixture(counts, k)


def gaussian_mixture(x, k=2):
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([k]).to_event(1))
    with numpyro.plate("rows", len(x)):
        z = numpyro.sample("z", dist.Categorical(weights), infer={"enumerate": "parallel"})
        numpyro.sample("obs", dist.Normal(locs[z], 1.0), obs=x)


def _counts(seed=0, n=12, v=6):
    return np.random.default_rng(seed).poisson(3.0, (n, v)).astype(np.float32)


def test_roles_are_found_by_value_not_by_name():
    counts = _counts()
    structure = find_structure(user_lda, (counts,))
    assert structure.kind == "admixture"
    assert structure.roles == {"topics": "topics", "proportions": "doc_topics"}
    assert structure.observed == "obs"
    np.testing.assert_array_equal(structure.dense_counts(counts.shape[1]), counts)
    mixture = find_structure(user_mixture, (counts,))
    assert mixture.kind == "mixture"
    assert mixture.roles == {"weights": "mix", "components": "word_probs", "assignment": "z"}
    assert mixture.gibbs_sites == ("mix", "word_probs")
    assert find_structure(gaussian_mixture, (np.zeros(5, np.float32),)) is None


def test_tokens_of_a_categorical_likelihood_are_given_their_documents():
    rng = np.random.default_rng(1)
    docs = rng.integers(0, 7, 60)
    words = rng.integers(0, 5, 60)
    structure = find_structure(token_lda, (jnp.asarray(words), jnp.asarray(docs), 7, 5))
    assert structure.kind == "admixture" and structure.roles == {"topics": "phi", "proportions": "theta"}
    np.testing.assert_array_equal(structure.doc, docs)
    np.testing.assert_array_equal(structure.word, words)
    check_structure(structure, token_lda, (jnp.asarray(words), jnp.asarray(docs), 7, 5))


def test_a_model_with_another_log_density_is_refused_by_name():
    counts = _counts()
    structure = find_structure(tempered_mixture, (counts,))
    assert structure is not None and structure.kind == "mixture"
    with pytest.raises(ValueError, match=r"'model' argument of check_structure.*\['mix', 'word_probs'\].*'obs'"):
        check_structure(structure, tempered_mixture, (counts,))
    with pytest.raises(ValueError, match="exact=False"):
        exact_kernel(tempered_mixture, (counts,))
    with pytest.raises(ValueError, match="'model' argument of exact_kernel"):
        exact_kernel(gaussian_mixture, (np.zeros(5, np.float32),))


def _draws(model, args, init, num_samples, seed=0, **kwargs):
    kernel = exact_kernel(model, args, kwargs)
    assert isinstance(kernel, ExactGibbs) and kernel.model is model
    mcmc = MCMC(kernel, num_warmup=20, num_samples=num_samples, num_chains=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), *args, init_params=init, **kwargs)
    return mcmc


def test_without_data_the_draws_are_the_priors_with_their_concentrations_in_place():
    """Empty documents: the conditionals are the priors, so the draws' means are the concentrations' shares."""
    counts = np.zeros((3, 4), np.float32)
    eta = jnp.array([[5.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 9.0]])
    init = {"topics": jnp.full((2, 4), 0.25), "doc_topics": jnp.full((3, 2), 0.5)}
    mcmc = _draws(user_lda, (counts,), init, 4000, k=2, eta=eta)
    samples = mcmc.get_samples()
    # Dirichlet(5, 1, 1, 1): sd of the first share 0.16; 4,000 exact draws: standard error 0.0025
    np.testing.assert_allclose(samples["topics"].mean(0), eta / eta.sum(-1, keepdims=True), atol=0.015)
    np.testing.assert_allclose(samples["doc_topics"].mean(0), np.tile([0.2, 0.8], (3, 1)), atol=0.015)
    assert set(mcmc.get_extra_fields()) == {"diverging", "potential_energy"}
    assert not np.any(mcmc.get_extra_fields()["diverging"])


def test_separated_mixture_draws_follow_the_exact_posterior():
    """Rows whose words no other component can produce: the assignment is certain, the posterior is conjugate."""
    counts = np.zeros((30, 4), np.float32)
    counts[:20, :2] = np.random.default_rng(2).poisson(20.0, (20, 2)) + 1
    counts[20:, 2:] = np.random.default_rng(3).poisson(20.0, (10, 2)) + 1
    eta = jnp.array([[1.0, 1.0, 1e-3, 1e-3], [1e-3, 1e-3, 1.0, 1.0]])
    a = jnp.array([1.0, 2.0])
    rows = np.array([[0.5, 0.5, 1e-6, 1e-6], [1e-6, 1e-6, 0.5, 0.5]])
    init = {"mix": jnp.array([0.6, 0.4]), "word_probs": jnp.asarray(rows / rows.sum(1, keepdims=True))}
    samples = _draws(user_mixture, (counts,), init, 3000, k=2, a=a, eta=eta).get_samples()
    np.testing.assert_allclose(samples["mix"].mean(0), [21 / 33, 12 / 33], atol=0.01)
    first = counts[:20, :2].sum(0) + 1.0
    np.testing.assert_allclose(samples["word_probs"][:, 0, :2].mean(0), first / first.sum(), atol=0.005)


def test_hyperparameters_are_moved_by_nuts_and_read_at_their_current_value():
    counts = _counts(seed=4, n=20, v=8)
    kernel = exact_kernel(hyper_lda, (counts,), max_tree_depth=4)
    assert kernel.default_fields[0] == "z" and "num_steps" in kernel.default_fields
    init = {"alpha": jnp.zeros((2, 2)), "topics": jnp.full((2, 2, 8), 1 / 8), "doc_topics": jnp.full((2, 20, 2), 0.5)}
    mcmc = MCMC(kernel, num_warmup=30, num_samples=30, num_chains=2, chain_method=jax.vmap, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(0), counts, init_params=init)
    samples = mcmc.get_samples()
    assert samples["alpha"].shape == (60, 2) and np.all(samples["alpha"] > 0)
    assert np.all(np.isfinite(mcmc.get_extra_fields()["num_steps"]))
    np.testing.assert_allclose(samples["doc_topics"].sum(-1), 1.0, atol=1e-5)
