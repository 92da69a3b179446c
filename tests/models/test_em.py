"""Tests for models/_em.py: the shared EM loop, Gaussian densities, scaled HMM forward-backward."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import norm
from specinit.models._em import (
    SequenceBatch,
    em_loop,
    gaussian_log_density,
    hmm_forward_backward,
    responsibilities,
)


def test_gaussian_log_density_and_responsibilities():
    rng = np.random.default_rng(0)
    x, loc, var = rng.normal(size=(7, 3)), rng.normal(size=(2, 3)), rng.uniform(0.5, 2.0, size=(2, 3))
    expected = np.stack([norm.logpdf(x, loc[i], np.sqrt(var[i])).sum(axis=1) for i in range(2)], axis=1)
    got = gaussian_log_density(x, loc, var)
    np.testing.assert_allclose(got, expected, rtol=1e-12)  # same float64 formula, reordered: round-off only
    resp, ll = responsibilities(got + np.log([0.3, 0.7]))
    np.testing.assert_allclose(resp.sum(axis=1), 1.0)
    np.testing.assert_allclose(ll, np.logaddexp(expected[:, 0] + np.log(0.3), expected[:, 1] + np.log(0.7)).sum())


def brute_force_counts(seqs, init, A, E):
    k, V = E.shape
    ll, IC, TC, EC = 0.0, np.zeros(k), np.zeros((k, k)), np.zeros((k, V))
    for s in seqs:
        paths = list(itertools.product(range(k), repeat=len(s)))
        probs = []
        for h in paths:
            p = init[h[0]] * E[h[0], s[0]]
            for t in range(1, len(s)):
                p *= A[h[t - 1], h[t]] * E[h[t], s[t]]
            probs.append(p)
        Z = sum(probs)
        ll += np.log(Z)
        for h, p in zip(paths, probs):
            IC[h[0]] += p / Z
            for t in range(len(s)):
                EC[h[t], s[t]] += p / Z
                if t:
                    TC[h[t - 1], h[t]] += p / Z
    return IC, TC, EC, ll


def test_forward_backward_matches_brute_force_on_ragged_sequences():
    rng = np.random.default_rng(1)
    k, V = 3, 4
    init, A, E = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k), size=k), rng.dirichlet(np.ones(V), size=k)
    seqs = [rng.integers(0, V, size=n) for n in (5, 1, 3, 5, 2)]
    got = hmm_forward_backward(SequenceBatch(seqs, V), init, A, E)
    for g, e in zip(got, brute_force_counts(seqs, init, A, E)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)  # exact enumeration: round-off only


def test_em_loop_stops_on_tol_and_warns_on_max_iter():
    # a contraction toward 1: "log-likelihood" -(p - 1)^2 rises monotonically
    def estep(p):
        return p, -(p - 1.0) ** 2

    def mstep(p):
        return 0.5 * (p + 1.0)

    p, trace, n_iter, converged, decreases = em_loop(estep, mstep, 0.0, max_iter=100, tol=1e-6, n_observations=1,
                                                    func="test")
    assert converged and decreases == 0 and np.all(np.diff(trace) > 0) and n_iter == trace.size - 1
    with pytest.warns(RuntimeWarning, match="did not converge in max_iter=2"):
        em_loop(estep, mstep, 0.0, max_iter=2, tol=1e-12, n_observations=1, func="test")
