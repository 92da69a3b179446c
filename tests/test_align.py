"""Tests for specinit.align: Hungarian matching and per-draw relabelling."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from specinit.models import hmm, lda

from specinit.align import align_draws, draw_permutations, match_components, topic_error
from specinit.estimate import SpectralEstimate


def brute_force_cost(reference, candidate):
    """Smallest total L1 distance over all k! relabellings."""
    k = reference.shape[0]
    return min(np.abs(reference - candidate[list(p)]).sum() for p in itertools.permutations(range(k)))


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_match_components_is_optimal(k):
    rng = np.random.default_rng(k)
    for _ in range(20):
        reference, candidate = rng.dirichlet(np.ones(7), k), rng.dirichlet(np.ones(7), k)
        perm = match_components(reference, candidate)
        assert sorted(perm.tolist()) == list(range(k))
        assert np.abs(reference - candidate[perm]).sum() == pytest.approx(brute_force_cost(reference, candidate), rel=1e-12)


def test_match_components_recovers_planted_permutation_l2():
    rng = np.random.default_rng(0)
    reference = rng.dirichlet(np.ones(10), 5)
    planted = rng.permutation(5)
    candidate = np.empty_like(reference)
    candidate[planted] = reference  # reference row i sits at candidate row planted[i]
    np.testing.assert_array_equal(match_components(reference, candidate + 1e-3, metric="l2"), planted)


def test_topic_error_zero_for_relabelled_topics_and_positive_otherwise():
    rng = np.random.default_rng(1)
    beta = rng.dirichlet(np.ones(12), 4)
    assert topic_error(beta, beta[[2, 0, 3, 1]]) == pytest.approx(0.0, abs=1e-15)
    other = rng.dirichlet(np.ones(12), 4)
    perm = match_components(beta, other)
    assert topic_error(beta, other) == pytest.approx(np.abs(beta - other[perm]).sum(axis=1).mean())


def planted_draws(rng, k=3, n_docs=6, chains=2, draws=5):
    beta = rng.dirichlet(np.ones(8), k)
    alpha = rng.gamma(2.0, size=k)
    theta = rng.dirichlet(np.ones(k), n_docs)
    perms = np.stack([[rng.permutation(k) for _ in range(draws)] for _ in range(chains)])
    samples = {"beta": np.empty((chains, draws, k, 8)), "alpha": np.empty((chains, draws, k)),
               "theta": np.empty((chains, draws, n_docs, k)), "other": rng.normal(size=(chains, draws, 4))}
    for c, d in np.ndindex(chains, draws):
        p = perms[c, d]
        samples["beta"][c, d, p] = beta + rng.normal(scale=1e-4, size=beta.shape)
        samples["alpha"][c, d, p] = alpha
        samples["theta"][c, d][:, p] = theta
    return SpectralEstimate("lda", {"alpha": alpha, "beta": beta, "theta": theta}, facts=lda.FACTS), samples, perms


def test_align_draws_recovers_planted_permutation_per_draw():
    estimate, samples, perms = planted_draws(np.random.default_rng(2))
    np.testing.assert_array_equal(draw_permutations(samples, estimate), perms)
    aligned = align_draws(samples, estimate)
    np.testing.assert_allclose(aligned["beta"], np.broadcast_to(estimate.params["beta"], aligned["beta"].shape), atol=1e-3)
    np.testing.assert_array_equal(aligned["alpha"], np.broadcast_to(estimate.params["alpha"], aligned["alpha"].shape))
    np.testing.assert_array_equal(aligned["theta"], np.broadcast_to(estimate.params["theta"], aligned["theta"].shape))
    np.testing.assert_array_equal(aligned["other"], samples["other"])


def test_align_draws_permutes_both_axes_of_a_transition_matrix():
    rng = np.random.default_rng(3)
    emission, transition = rng.dirichlet(np.ones(6), 3), rng.dirichlet(np.ones(3), 3)
    p = np.array([2, 0, 1])
    inv = np.argsort(p)
    # draw component j is reference component inv[j]
    samples = {"emission": emission[inv][None, None], "transition": transition[np.ix_(inv, inv)][None, None]}
    aligned = align_draws(samples, {"emission": emission}, component_axes=hmm.FACTS.component_axes, match_on="emission")
    np.testing.assert_array_equal(aligned["transition"][0, 0], transition)
    np.testing.assert_array_equal(aligned["emission"][0, 0], emission)


def test_errors_name_the_argument():
    rng = np.random.default_rng(4)
    estimate, samples, _ = planted_draws(rng)
    with pytest.raises(ValueError, match="'candidate' argument of match_components"):
        match_components(np.ones((3, 4)), np.ones((3, 5)))
    with pytest.raises(ValueError, match="'metric'"):
        match_components(np.ones((3, 4)), np.ones((3, 4)), metric="cosine")
    with pytest.raises(ValueError, match=r"shape \(chain, draw, \*\(3, 8\)\)"):
        align_draws({"beta": samples["beta"][..., :5]}, estimate)
    with pytest.raises(ValueError, match="'match_on'"):
        align_draws(samples, estimate, match_on="gamma")
    with pytest.raises(ValueError, match="'component_axes'.*axis 0 of 'other'"):
        align_draws(samples, estimate, component_axes={"beta": 0, "other": 0})
    with pytest.raises(ValueError, match="'component_axes'"):
        align_draws(samples, {"beta": estimate.params["beta"]})
    with pytest.raises(TypeError, match="'reference'"):
        align_draws(samples, [1, 2])
    with pytest.raises(ValueError, match="'estimated_beta'"):
        topic_error(np.ones((2, 3)), np.ones((3, 3)))
