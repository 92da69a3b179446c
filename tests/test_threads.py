"""The warm-start entry points called from several threads at once (NumPyro's handler stack is global)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np
from specinit.models import lda

from specinit import warmstart
from tests.conftest import sample_lda

N_THREADS = 4


def _small_lda():
    k, V, N = 3, 12, 20
    rng = np.random.default_rng(14)
    beta = rng.dirichlet(np.full(V, 0.3), size=k)
    X, _ = sample_lda(beta, np.full(k, 0.5), N, 40, 15)
    return X, lda.spectral(X, k, alpha0=1.5, seed=0, method="svtd")


def test_init_params_and_inverse_mass_matrix_from_four_threads_match_one_thread():
    X, est = _small_lda()
    kwargs = dict(counts=X, k=3)

    def work(seed):
        chains = est.init_params(lda.model, 2, jax.random.PRNGKey(seed), spread=0.1, model_kwargs=kwargs)
        by_laplace = warmstart.init_params(est, lda.model, 2, jax.random.PRNGKey(seed), spread="laplace",
                                           model_kwargs=kwargs)
        mass = est.inverse_mass_matrix(lda.model, model_kwargs=kwargs)
        sites = warmstart.latent_sites(lda.model, model_kwargs=kwargs)
        return chains, by_laplace, mass, sites

    seeds = list(range(N_THREADS))
    alone = [work(seed) for seed in seeds]
    with ThreadPoolExecutor(max_workers=N_THREADS) as pool:
        together = list(pool.map(work, seeds))
    for (chains, by_laplace, mass, sites), (chains_t, by_laplace_t, mass_t, sites_t) in zip(alone, together):
        for expected, got in ((chains, chains_t), (by_laplace, by_laplace_t)):
            assert set(got) == set(expected)
            for name in expected:
                np.testing.assert_array_equal(np.asarray(got[name]), np.asarray(expected[name]))
        np.testing.assert_array_equal(mass_t, mass)
        assert sites_t == sites
    # different keys give different starts: the threads did not all return one call's result
    assert np.abs(np.asarray(alone[0][0]["beta"]) - np.asarray(alone[1][0]["beta"])).max() > 1e-3


def test_the_lock_is_reentrant_and_free_after_each_call():
    X, est = _small_lda()
    with warmstart.TRACE_LOCK:  # a caller may hold it around several calls
        chains = est.init_params(lda.model, 2, jax.random.PRNGKey(0), model_kwargs=dict(counts=X, k=3))
    assert set(chains) == {"alpha", "beta", "theta"}
    with ThreadPoolExecutor(max_workers=1) as pool:  # another thread finds it free
        assert pool.submit(lambda: warmstart.TRACE_LOCK.acquire(blocking=False)
                           and (warmstart.TRACE_LOCK.release() is None)).result()
