"""The Poisson mixture: factorial moments against their definition, exact and sampled recovery, EM, the NumPyro
program's density, and the refusals of bad counts and k."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import numpyro.distributions as dist
import pytest
import scipy.sparse as sp
from numpyro.infer.util import log_density, log_likelihood as numpyro_log_likelihood

from specinit.engine.whitening import IndefiniteMomentError
from specinit.models import poisson_mixture as pm
from tests.conftest import best_permutation

RATES = np.array([[1.0, 6.0, 2.0, 0.5, 3.0, 1.0], [5.0, 1.0, 0.5, 3.0, 1.0, 2.0], [1.0, 1.0, 5.0, 2.0, 0.5, 6.0]])
WEIGHTS = np.array([0.5, 0.3, 0.2])


def _sample(n, seed):
    rng = np.random.default_rng(seed)
    labels = rng.choice(len(WEIGHTS), n, p=WEIGHTS)
    return rng.poisson(RATES[labels]), labels


def _rate_error(estimate):
    perm = best_permutation(RATES, estimate.params["rates"])
    return float(np.abs(estimate.params["rates"][perm] - RATES).max())


def _factorial_moments(x):
    """The slow obvious M2 (d, d) and M3 (d, d, d): raw moments minus their diagonal corrections."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    m1, raw2 = x.mean(axis=0), x.T @ x / n
    raw3 = np.einsum("ni,nj,nl->ijl", x, x, x) / n
    eye = np.eye(d)
    m3 = raw3 - np.einsum("ij,il->ijl", eye, raw2) - np.einsum("il,ij->ijl", eye, raw2) \
        - np.einsum("jl,ij->ijl", eye, raw2) + 2.0 * np.einsum("ij,jl,i->ijl", eye, eye, m1)
    return raw2 - np.diag(m1), m3


def test_moments_equal_their_definition_on_every_backend():
    x, _ = _sample(500, 0)
    m2, m3 = _factorial_moments(x)
    rng = np.random.default_rng(1)
    Q, W = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    expected = np.einsum("ijl,ia,jb,lc->abc", m3, W, W, W)
    for backend in ("numpy", "jax"):
        for counts in (x, sp.csr_matrix(x)):
            moments = pm.PoissonMoments(counts, backend=backend)
            assert moments.backend == backend
            np.testing.assert_allclose(moments.m2_matmat(Q), m2 @ Q, rtol=1e-12, atol=1e-10)
            np.testing.assert_allclose(moments.whitened_m3(W), expected, rtol=1e-12, atol=1e-9)


def test_moments_read_in_row_blocks_equal_those_read_at_once(monkeypatch):
    import specinit.engine.sources as sources

    x, _ = _sample(500, 12)
    rng = np.random.default_rng(3)
    Q, W = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    whole = pm.PoissonMoments(sp.csr_matrix(x))
    expected = whole.m2_matmat(Q), whole.whitened_m3(W)
    # 800 bytes per block of the views a pass reads (two or three views of 6 columns): 5 to 8 rows per block
    monkeypatch.setattr(sources, "_BLOCK_BYTES", 800)
    blocked = pm.PoissonMoments(sp.csr_matrix(x))
    np.testing.assert_allclose(blocked.m2_matmat(Q), expected[0], rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(blocked.whitened_m3(W), expected[1], rtol=1e-12, atol=1e-9)


def test_population_moments_equal_the_mixture_of_factorial_moments():
    # M2 and M3 of the population: sum_i w_i l_i l_i^T and sum_i w_i l_i^(x)3, the limits of the data moments
    m2, m3 = pm.population_moments(RATES, WEIGHTS).dense()
    np.testing.assert_allclose(m2, np.einsum("i,ia,ib->ab", WEIGHTS, RATES, RATES), rtol=1e-14)
    np.testing.assert_allclose(m3, np.einsum("i,ia,ib,ic->abc", WEIGHTS, RATES, RATES, RATES), rtol=1e-14)


def test_exact_recovery_from_population_moments():
    estimate = pm.spectral_from_moments(pm.population_moments({"rates": RATES, "weights": WEIGHTS}), 3, seed=0,
                                        floor=1e-12)
    perm = best_permutation(RATES, estimate.params["rates"])
    np.testing.assert_allclose(estimate.params["rates"][perm], RATES, atol=1e-8)
    np.testing.assert_allclose(estimate.params["weights"][perm], WEIGHTS, atol=1e-8)
    assert estimate.diagnostics["sign_flips"] == 0


def test_recovery_from_samples_improves_with_n():
    # the moment estimator's error is O(N^-1/2): 16 times the rows should give about a quarter of the error; the
    # bounds are about twice the errors seen over seeds 0-4 (0.10-0.20 at 4,000 rows, 0.028-0.045 at 64,000)
    small = _rate_error(pm.spectral(_sample(4_000, 0)[0], 3, seed=0))
    large = _rate_error(pm.spectral(_sample(64_000, 0)[0], 3, seed=0))
    assert small < 0.4 and large < 0.09
    assert large < 0.5 * small


def test_sparse_counts_give_the_dense_estimate_scores_and_refinement():
    x, _ = _sample(2_000, 2)
    dense, sparse = pm.spectral(x, 3, seed=0), pm.spectral(sp.csr_matrix(x), 3, seed=0)
    for site in dense.params:
        np.testing.assert_allclose(sparse.params[site], dense.params[site], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(pm.log_likelihood(sp.csr_matrix(x), dense), pm.log_likelihood(x, dense), rtol=1e-12)
    np.testing.assert_array_equal(pm.predict(sp.csr_matrix(x), dense)[1], pm.predict(x, dense)[1])
    a, b = pm.refine(x, dense), pm.refine(sp.csr_matrix(x), dense)
    np.testing.assert_allclose(b.log_likelihood, a.log_likelihood, rtol=1e-12)


def test_em_refine_raises_the_log_likelihood_and_clusters_the_rows():
    x, labels = _sample(3_000, 3)
    estimate = pm.spectral(x, 3, seed=0)
    result = pm.refine(x, estimate, restarts=2, seed=0)
    assert result.converged
    assert np.all(np.diff(result.log_likelihood) >= -1e-9 * np.abs(result.log_likelihood[1:]))
    start, final = pm.log_likelihood(x, estimate).sum(), pm.log_likelihood(x, result.estimate).sum()
    assert final > start
    np.testing.assert_allclose(final, result.log_likelihood[-1], rtol=1e-12)
    assert np.all(result.estimate.params["rates"] > 0)
    # the refined rates are the maximum-likelihood ones: within a few standard errors of the truth
    assert _rate_error(result.estimate) < 0.5
    _, predicted = pm.predict(x, result.estimate)
    assert np.mean(predicted == best_permutation(RATES, result.estimate.params["rates"])[labels]) > 0.9


def test_numpyro_model_density_equals_log_likelihood():
    x, _ = _sample(200, 4)
    estimate = pm.refine(x, pm.spectral(x, 3, seed=0)).estimate
    params = {name: jax.numpy.asarray(value) for name, value in estimate.params.items()}
    rows = pm.log_likelihood(x, estimate)
    per_row = numpyro_log_likelihood(pm.model, {name: value[None] for name, value in params.items()}, counts=x,
                                     k=3)["counts"]
    np.testing.assert_allclose(np.asarray(per_row[0]), rows, rtol=1e-5)
    joint, _ = log_density(pm.model, (), {"counts": x, "k": 3}, params)
    prior = dist.Dirichlet(np.ones(3)).log_prob(params["weights"]) \
        + dist.Exponential(0.1).log_prob(params["rates"]).sum()
    np.testing.assert_allclose(float(joint), rows.sum() + float(prior), rtol=1e-5)


@pytest.mark.parametrize("bad, problem", [(-1, "non-negative counts"), (0.5, "integer-valued counts"),
                                          (np.nan, "finite counts")])
def test_bad_counts_are_refused_naming_the_argument(bad, problem):
    x, _ = _sample(100, 5)
    x = x.astype(np.float64)
    x[3, 2] = bad
    estimate = pm.spectral(_sample(500, 5)[0], 3, seed=0)
    for func, args in ((pm.spectral, (x, 3)), (pm.log_likelihood, (x, estimate)), (pm.predict, (x, estimate)),
                       (pm.refine, (x, estimate))):
        with pytest.raises(ValueError, match=rf"'counts' argument of poisson_mixture\.{func.__name__} must be "
                                             rf"{problem}"):
            func(*args)


def test_counts_of_another_width_are_refused():
    x, _ = _sample(500, 6)
    estimate = pm.spectral(x, 3, seed=0)
    with pytest.raises(ValueError, match=r"'counts' argument of poisson_mixture\.log_likelihood must be rows of "
                                         r"d = 6 counts"):
        pm.log_likelihood(x[:, :5], estimate)


def test_k_above_d_is_refused():
    x, _ = _sample(500, 7)
    with pytest.raises(ValueError, match=r"'k' argument of poisson_mixture\.spectral must be at most the number of "
                                         r"features d = 6 .*got 7"):
        pm.spectral(x, 7)


def test_k_beyond_the_components_is_refused_or_warned():
    # exact moments of two components have two positive eigenvalues: k=3 is refused with the family's advice
    with pytest.raises(IndefiniteMomentError, match=r"poisson_mixture\.spectral_from_moments: .*fewer than k=3.*"
                                                    r"rates must be linearly independent"):
        pm.spectral_from_moments(pm.population_moments(RATES[:2], np.array([0.6, 0.4])), 3, seed=0)
    # on data the noise's eigenvalues have both signs: the negative ones above the kept positive ones are skipped
    rng = np.random.default_rng(8)
    x = rng.poisson(RATES[:2][rng.choice(2, 3_000)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimate = pm.spectral(x, 4, seed=0)
    assert estimate.diagnostics["m2_negative_skipped"] == 1
    assert any("negative eigenvalue(s) of the second moment" in str(w.message) for w in caught)


def test_rates_at_zero_are_floored_inside_the_support_with_a_warning():
    x, _ = _sample(2_000, 9)
    x = np.hstack([x, np.zeros((x.shape[0], 1), dtype=x.dtype)])  # a feature no component emits
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimate = pm.spectral(x, 3, seed=0)
    rates = estimate.params["rates"]
    assert np.all(rates > 0) and np.all(rates[:, -1] <= 1e-3 * rates.max() * (1 + 1e-12))
    assert estimate.diagnostics["floored_rates"] >= 1
    assert any("'rates' were not positive and were floored" in str(w.message) for w in caught)


def test_moments_of_the_row_sums_equal_those_of_the_rows():
    from specinit.engine.rows import RowSums

    x, _ = _sample(700, 10)
    halves = RowSums.from_rows(x[:300].astype(np.float64))
    summed = pm.PoissonMoments(halves + RowSums.from_rows(x[300:].astype(np.float64), frame=halves))
    rows = pm.PoissonMoments(x)
    rng = np.random.default_rng(2)
    Q, W = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    np.testing.assert_allclose(summed.m2_matmat(Q), rows.m2_matmat(Q), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(summed.whitened_m3(W), rows.whitened_m3(W), rtol=1e-10, atol=1e-8)


def test_update_in_batches_equals_one_fit_and_continues_after_save(tmp_path):
    from specinit.align import match_components
    from specinit.estimate import SpectralEstimate

    x, _ = _sample(3_000, 11)
    once = pm.spectral(x, 3, seed=0)
    first = pm.update(sp.csr_matrix(x[:1_000]), k=3, seed=0)
    second = pm.update(x[1_000:1_700], SpectralEstimate.load(first.save(tmp_path / "first.npz")), seed=0)
    last = pm.update(x[1_700:], second, seed=0)
    assert (last.diagnostics["n_batches"], last.diagnostics["n_observations"]) == (3, 3_000)
    # the components keep the first batch's labels
    np.testing.assert_array_equal(match_components(first.params["rates"], last.params["rates"]), np.arange(3))
    order = match_components(last.params["rates"], once.params["rates"])
    for site in ("weights", "rates"):
        np.testing.assert_allclose(once.params[site][order], last.params[site], rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match=r"'counts' argument of poisson_mixture\.update must be non-negative counts"):
        pm.update(-x[:10], last)
