"""The unconstrained coordinates NUTS sees for the topic models' simplex sites.

``lda.model`` samples ``beta`` and ``theta`` from :class:`LogRatioDirichlet`:
the Dirichlet density on the simplex, mapped to R^(V-1) by centred log-ratios
(:class:`CenteredLogRatioTransform`) in place of stick-breaking. The checks are
exact identities, run in float64 (scoped ``enable_x64``): the transform's
log-Jacobian against autodiff, the model's potential energy against the
Dirichlet and multinomial densities written out by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import pytest
from numpyro.distributions.transforms import biject_to
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import potential_energy
from scipy.stats import dirichlet, gamma, multinomial
from specinit.models import lda

from specinit.distributions.continuous import CenteredLogRatioTransform, LogRatioDirichlet


@pytest.mark.parametrize("size", [2, 3, 7])
def test_centered_log_ratio_is_a_bijection_with_the_stated_jacobian(size):
    with jax.enable_x64():
        x = jnp.asarray(np.random.default_rng(size).normal(scale=2.0, size=(4, size - 1)))
        transform = CenteredLogRatioTransform()
        p = transform(x)
        np.testing.assert_allclose(np.sum(p, axis=-1), 1.0, rtol=1e-14)
        np.testing.assert_allclose(transform.inv(p), x, atol=1e-12)
        # the centred log-ratios: log p minus its mean, whatever the point
        log_p = np.log(np.asarray(p))
        np.testing.assert_allclose(np.sum(transform.inv(p) ** 2, -1), np.sum((log_p - log_p.mean(-1, keepdims=True)) ** 2, -1),
                                   rtol=1e-12)
        for row in x:
            jacobian = jax.jacobian(lambda v: transform(v)[:-1])(row)  # the simplex's first V-1 coordinates
            np.testing.assert_allclose(transform.log_abs_det_jacobian(row, transform(row)),
                                       np.linalg.slogdet(np.asarray(jacobian))[1], rtol=1e-12)
        assert transform.forward_shape((4, size - 1)) == (4, size)
        assert transform.inverse_shape((4, size)) == (4, size - 1)


def test_log_ratio_dirichlet_is_the_dirichlet_with_other_coordinates():
    with jax.enable_x64():
        concentration = jnp.array([0.1, 0.3, 2.0, 0.7])
        ours, numpyros = LogRatioDirichlet(concentration), dist.Dirichlet(concentration)
        value = jnp.array([0.05, 0.15, 0.6, 0.2])
        assert float(ours.log_prob(value)) == pytest.approx(dirichlet.logpdf(np.asarray(value), np.asarray(concentration)),
                                                            rel=1e-12)
        assert float(ours.log_prob(value)) == float(numpyros.log_prob(value))
        assert isinstance(biject_to(ours.support), CenteredLogRatioTransform)
        np.testing.assert_array_equal(ours.sample(jax.random.PRNGKey(0), (3,)), numpyros.sample(jax.random.PRNGKey(0), (3,)))


def test_lda_potential_energy_is_the_dirichlet_model_in_log_ratio_coordinates():
    k, V, N = 3, 6, 4
    rng = np.random.default_rng(3)
    X = rng.poisson(2.0, size=(N, V)).astype(float)
    with jax.enable_x64():
        z = {"alpha": jnp.asarray(rng.normal(size=k)), "beta": jnp.asarray(rng.normal(size=(k, V - 1))),
             "theta": jnp.asarray(rng.normal(size=(N, k - 1)))}
        energy = float(potential_energy(lda.model, (X,), {"k": k}, z))
        clr = CenteredLogRatioTransform()
        alpha, beta, theta = np.exp(np.asarray(z["alpha"])), np.asarray(clr(z["beta"])), np.asarray(clr(z["theta"]))
        log_joint = (gamma.logpdf(alpha, 1.0).sum() + np.log(alpha).sum()
                     + sum(dirichlet.logpdf(row, np.full(V, 0.1)) for row in beta)
                     + sum(dirichlet.logpdf(row, alpha) for row in theta)
                     + sum(multinomial.logpmf(X[d], X[d].sum(), theta[d] @ beta) for d in range(N)))
        # log-Jacobians of the centred log-ratio map: sum of log p plus log(size) / 2 for every simplex row
        log_joint += np.log(beta).sum() + k * 0.5 * np.log(V) + np.log(theta).sum() + N * 0.5 * np.log(k)
        assert energy == pytest.approx(-log_joint, rel=1e-10)


def test_short_lda_nuts_from_the_warm_start_has_finite_energy():
    k, V, N = 2, 10, 12
    rng = np.random.default_rng(5)
    beta = rng.dirichlet(np.full(V, 0.3), size=k)
    X = np.stack([rng.multinomial(30, rng.dirichlet([0.5, 0.5]) @ beta) for _ in range(N)]).astype(np.float32)
    estimate = lda.spectral(X, k, alpha0=1.0, seed=0, method="svtd")
    init = estimate.init_params(lda.model, 2, jax.random.PRNGKey(0), spread=0.05, model_args=(X,), model_kwargs={"k": k})
    mcmc = MCMC(NUTS(lda.model, max_tree_depth=4), num_warmup=30, num_samples=10, num_chains=2,
                chain_method="sequential", progress_bar=False)
    mcmc.run(jax.random.PRNGKey(1), X, init_params=init, extra_fields=("potential_energy", "diverging"), k=k)
    extra = mcmc.get_extra_fields()
    assert np.all(np.isfinite(np.asarray(extra["potential_energy"])))
    beta_draws = np.asarray(mcmc.get_samples()["beta"])
    assert beta_draws.shape == (20, k, V)
    np.testing.assert_allclose(beta_draws.sum(-1), 1.0, rtol=1e-5)
