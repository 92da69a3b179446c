"""Tests of specinit.engine.decompose on symmetric orthogonally decomposable tensors.

Every test is seeded. Exact-recovery tolerances are 1e-8: the tensors are
exactly orthogonally decomposable with lambdas in [1, 5], so every method is
exact in exact arithmetic and float64 round-off of the O(k^3) contractions and
eigen-solvers is ~1e-13; 1e-8 leaves five orders of magnitude of slack for
the conditioning of nearby eigenvalues while still catching any real error
(a wrong or mixed component gives errors of order 1).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specinit.engine.decompose import (
    METHODS,
    cp_als,
    decompose,
    eca,
    reconstruct,
    svtd,
    tensor_power_method,
)
from tests.conftest import best_permutation

SEEDS = list(range(10))
KS = (2, 5, 12)


def random_odeco(k: int, seed: int, low: float = 1.0, high: float = 5.0):
    """T = sum_i lambda_i v_i^(x)3 with a random orthonormal V (Haar via QR) and lambda in [low, high]."""
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((k, k)))
    V = q * np.sign(np.diag(r))
    lam = rng.uniform(low, high, size=k)
    return reconstruct(lam, V), lam, V


def match_error(lam_hat, V_hat, lam, V):
    """Max errors of weights and vectors after the best permutation (vectors are unit, sign fixed by lambda>0)."""
    perm = best_permutation(V.T, V_hat.T, "abs_cosine")
    vec_err = np.max(np.abs(V_hat[:, perm] - V))
    lam_err = np.max(np.abs(lam_hat[perm] - lam))
    return lam_err, vec_err


def symmetric_noise(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    E = rng.standard_normal((k, k, k))
    perms = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    E = sum(E.transpose(p) for p in perms) / 6.0
    return E / np.linalg.norm(E)


# ----------------------------------------------------------------------------- exact recovery
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("seed", SEEDS)
def test_exact_recovery(method, k, seed):
    T, lam, V = random_odeco(k, 1000 + seed)
    dec = decompose(T, k, method, seed=seed)
    assert dec.weights.shape == (k,) and dec.vectors.shape == (k, k)
    lam_err, vec_err = match_error(dec.weights, dec.vectors, lam, V)
    assert lam_err < 1e-8
    assert vec_err < 1e-8
    # weights are reported positive and sorted decreasingly
    assert np.all(dec.weights > 0) and np.all(np.diff(dec.weights) <= 0)
    # reconstruction residual and orthogonality diagnostics are consistent with exactness
    assert dec.diagnostics["method"] == method
    assert dec.diagnostics["residual"] < 1e-8
    assert dec.diagnostics["orthogonality"] < 1e-8


@pytest.mark.parametrize("k", (3, 6))
def test_fewer_components_than_size_tpm(k):
    """k components of an n > k tensor: tpm deflation finds the k largest."""
    rng = np.random.default_rng(7)
    n = k + 3
    V = np.linalg.qr(rng.standard_normal((n, n)))[0][:, :k]
    lam = np.linspace(5.0, 1.0, k)
    T = reconstruct(lam, V)
    dec = tensor_power_method(T, k, seed=3)
    lam_err, vec_err = match_error(dec.weights, dec.vectors, lam, V)
    assert lam_err < 1e-8 and vec_err < 1e-8


# ----------------------------------------------------------------------------- robustness to noise
@pytest.mark.parametrize("method", METHODS)
def test_noise_robustness(method):
    """Error grows (about linearly) with the size of a symmetric perturbation.

    For an ODECO tensor with eigengaps of order 1 the perturbation bounds of
    Anandkumar et al. (JMLR 2014, Thm 5.1) give errors O(||E||); the constant
    here is at most ~10 (lambda_min = 1, k = 5), so we allow 100 * eps. The
    errors must also increase across three decades of eps (the smallest one
    must be at least 10x smaller than the largest).
    """
    k = 5
    T, lam, V = random_odeco(k, 42)
    E = symmetric_noise(k, 43)
    errors = []
    for eps in (1e-6, 1e-4, 1e-2):
        dec = decompose(T + eps * E, k, method, seed=0)
        lam_err, vec_err = match_error(dec.weights, dec.vectors, lam, V)
        err = max(lam_err, vec_err)
        assert err < 100 * eps
        errors.append(err)
    assert errors[0] < errors[2] / 10


# ----------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("method", METHODS)
def test_deterministic_given_seed(method):
    T, _, _ = random_odeco(5, 3)
    T = T + 1e-3 * symmetric_noise(5, 4)
    a = decompose(T, 5, method, seed=11)
    b = decompose(T, 5, method, seed=11)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_array_equal(a.vectors, b.vectors)


def test_generator_seed_accepted():
    T, lam, V = random_odeco(4, 5)
    dec = tensor_power_method(T, 4, seed=np.random.default_rng(0))
    assert max(match_error(dec.weights, dec.vectors, lam, V)) < 1e-8


# ----------------------------------------------------------------------------- warnings
def test_tpm_nonconvergence_warns():
    T, _, _ = random_odeco(5, 8)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        dec = tensor_power_method(T, 5, n_iter=1, seed=0)
    assert not np.all(dec.diagnostics["converged"])


def test_tpm_exact_components_stop_early():
    """On an exact tensor every component converges (quadratically) long before n_iter; none is given up."""
    T, lam, V = random_odeco(12, 21)
    dec = tensor_power_method(T, 12, n_iter=100, seed=0)
    assert max(match_error(dec.weights, dec.vectors, lam, V)) < 1e-8
    assert dec.diagnostics["converged"].all() and not dec.diagnostics["stalled"].any()
    assert dec.diagnostics["n_iter"].max() < 60


def test_tpm_gives_up_hopeless_components():
    """A random symmetric tensor (not orthogonally decomposable): iterates that do not converge, or converge too
    slowly to reach tol within n_iter, are given up after max(20, n_iter // 10) steps instead of running 2 n_iter;
    the converged ones are fixed points T(I, u, u) = lambda u of the deflated tensors."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((8, 8, 8))
    T = sum(A.transpose(p) for p in ((0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0))) / 6
    with pytest.warns(RuntimeWarning, match="given up early"):
        dec = tensor_power_method(T, 8, n_iter=300, tol=1e-12, seed=3)
    converged, stalled, iters = (dec.diagnostics[key] for key in ("converged", "stalled", "n_iter"))
    assert stalled.any() and converged.any()
    assert not (converged & stalled).any()
    assert np.all(iters[stalled] < 300)  # each phase stopped long before its 300 steps


def test_tpm_reads_no_uninitialized_memory(monkeypatch):
    """The stall test compares each move with the move STALL_WINDOW iterations earlier, which does not exist at
    the first test: the result must not depend on what freshly allocated memory holds (it did, so one process
    gave up a slow restart at iteration 20 and another kept it: different estimates of the same tensor)."""
    from specinit.engine import decompose as module
    from specinit.engine.decompose import STALL_WINDOW, _power_iterate

    T = symmetric_noise(8, 3)  # not orthogonally decomposable: restarts that converge slowly or never
    monkeypatch.setattr(module, "numba_kernel", lambda name: None)  # the NumPy loop (compiled: test_numba_passes)
    start = np.random.default_rng(7).standard_normal((8, 10))
    start /= np.linalg.norm(start, axis=0)
    empty = np.empty
    results = []
    for fill in (0.0, 1e300, 1e-320, np.nan):
        monkeypatch.setattr(module.np, "empty", lambda *args, fill=fill, **kwargs: np.full(*args, fill, **kwargs)
                            if not kwargs and len(args) == 1 else empty(*args, **kwargs))
        results.append(_power_iterate(T, start, 100, 1e-10))
        monkeypatch.setattr(module.np, "empty", empty)
    assert results[0][1].max() > STALL_WINDOW  # some restart runs past the first stall test
    for other in results[1:]:
        for mine, theirs in zip(results[0], other):
            np.testing.assert_array_equal(mine, theirs)


def test_tpm_restarts_stop_one_by_one():
    """A restart started on an exact component stops after one step; the random restart beside it goes on."""
    from specinit.engine.decompose import _power_iterate

    T, _, V = random_odeco(6, 9)
    start = np.column_stack([V[:, 0], np.random.default_rng(0).standard_normal(6)])
    U, iterations, converged, stalled = _power_iterate(T, start / np.linalg.norm(start, axis=0), 100, 1e-10)
    assert converged.all() and not stalled.any()
    assert iterations[0] == 1 and iterations[1] > 1
    np.testing.assert_allclose(np.abs(U[:, 0] @ V[:, 0]), 1.0, atol=1e-12)


def test_svtd_repeated_eigenvalues_warns():
    """V = I and equal lambdas: the slice along any axis e_r is lambda e_r e_r^T,
    whose top-k eigenvalues (lambda, 0, ..., 0) repeat 0 -> relative gap 0."""
    k = 4
    T = reconstruct(np.full(k, 2.0), np.eye(k))
    with pytest.warns(RuntimeWarning, match="nearly repeated eigenvalues"):
        svtd(T, k)


def test_eca_repeated_eigenvalues_warns():
    """Two components symmetric about ECA's random direction theta.

    eca draws theta = normalize(default_rng(seed).standard_normal(n)); with
    v1, v2 the rotations of theta by +-45 degrees (orthonormal) and equal
    lambdas, the slice eigenvalues lambda <v_i, theta> are exactly equal.
    """
    seed = 5
    theta = np.random.default_rng(seed).standard_normal(2)
    theta /= np.linalg.norm(theta)
    perp = np.array([-theta[1], theta[0]])
    V = np.stack([(theta + perp) / np.sqrt(2), (theta - perp) / np.sqrt(2)], axis=1)
    T = reconstruct(np.array([3.0, 3.0]), V)
    with pytest.warns(RuntimeWarning, match="nearly repeated eigenvalues"):
        eca(T, 2, seed=seed)


def test_svtd_explicit_degenerate_direction_warns():
    """A single candidate direction equally aligned with both components (equal lambdas)."""
    V = np.linalg.qr(np.random.default_rng(0).standard_normal((2, 2)))[0]
    T = reconstruct(np.array([2.0, 2.0]), V)
    direction = (V[:, 0] + V[:, 1])[:, None]
    with pytest.warns(RuntimeWarning, match="nearly repeated"):
        svtd(T, 2, directions=direction)


def test_als_nonconvergence_warns():
    T, _, _ = random_odeco(5, 9)
    with pytest.warns(RuntimeWarning, match="cp_als did not converge"):
        cp_als(T + 1e-2 * symmetric_noise(5, 1), 5, init="random", n_iter=1)


def test_eigengap_diagnostics_well_separated():
    lam = np.array([5.0, 3.0, 1.0])
    T = reconstruct(lam, np.eye(3))
    dec = tensor_power_method(T, 3, seed=0)
    # gaps relative to the largest: (5-3)/5, min(2,2)/5, (3-1)/5
    np.testing.assert_allclose(dec.diagnostics["eigengaps"], [0.4, 0.4, 0.4], atol=1e-10)


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("func", [tensor_power_method, svtd, eca, cp_als])
def test_non_cubic_tensor(func):
    with pytest.raises(ValueError, match=r"'T' argument .* cubic"):
        func(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match=r"'T' argument .* cubic"):
        func(np.zeros((3, 3)))


@pytest.mark.parametrize("func", [tensor_power_method, svtd, eca, cp_als])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_tensor(func, bad):
    T, _, _ = random_odeco(3, 0)
    T[0, 1, 2] = bad
    with pytest.raises(ValueError, match=r"'T' argument .* finite"):
        func(T)


@pytest.mark.parametrize("func", [tensor_power_method, svtd, eca, cp_als])
def test_k_too_large(func):
    T, _, _ = random_odeco(3, 0)
    with pytest.raises(ValueError, match=r"'k' argument .* at most the tensor size 3"):
        func(T, 4)
    with pytest.raises(ValueError, match=r"'k' argument"):
        func(T, 0)
    with pytest.raises(TypeError, match=r"'k' argument"):
        func(T, 2.0)


def test_bad_method_lists_options():
    T, _, _ = random_odeco(3, 0)
    with pytest.raises(ValueError, match=r"'method'.*'tpm', 'svtd', 'eca', 'als'.*'power'") as info:
        decompose(T, 3, "power")
    for name in METHODS:
        assert repr(name) in str(info.value)


def test_n_restarts_must_be_positive():
    T, _, _ = random_odeco(3, 0)
    with pytest.raises(ValueError, match=r"'n_restarts' argument .* >= 1"):
        tensor_power_method(T, n_restarts=0)
    with pytest.raises(ValueError, match=r"'n_iter'"):
        tensor_power_method(T, n_iter=0)
    with pytest.raises(ValueError, match=r"'tol'"):
        tensor_power_method(T, tol=0.0)
    with pytest.raises(ValueError, match=r"'seed'"):
        tensor_power_method(T, seed=-1)


def test_svtd_bad_directions():
    T, _, _ = random_odeco(3, 0)
    with pytest.raises(ValueError, match=r"'directions'"):
        svtd(T, directions=np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"'directions'.*non-zero"):
        svtd(T, directions=np.zeros((3, 2)))


def test_als_bad_init():
    T, _, _ = random_odeco(3, 0)
    with pytest.raises(ValueError, match=r"'init'.*'svd', 'random'"):
        cp_als(T, init="hosvd")


# ----------------------------------------------------------------------------- property test
@settings(max_examples=30, deadline=None)
@given(k=st.integers(min_value=1, max_value=6), seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_tpm_reconstructs_property(k, seed):
    T, lam, V = random_odeco(k, seed)
    dec = tensor_power_method(T, k, seed=seed)
    # reconstruction error relative to ||T||_F; see module docstring for 1e-8
    assert np.linalg.norm(reconstruct(dec.weights, dec.vectors) - T) <= 1e-8 * np.linalg.norm(T)
    lam_err, vec_err = match_error(dec.weights, dec.vectors, lam, V)
    assert lam_err < 1e-8 and vec_err < 1e-8
