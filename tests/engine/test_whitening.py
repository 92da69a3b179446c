"""Tests of specinit.engine.whitening.whiten (randomized, matrix-free, signed eigenvalues).

For a rank-k FactoredMoments the range finder with k + oversample columns
captures the range of M2 exactly (up to round-off), so W^T M2 W = I holds to
round-off ~1e-13 times the condition number (<= ~1e3 here); 1e-8 is a safe
bound that still catches any wrong scaling (O(1) errors).
"""

from __future__ import annotations

import numpy as np
import pytest
from specinit.models import lda

from specinit.engine.population import FactoredMoments
from specinit.engine.whitening import IndefiniteMomentError, krylov_eigenspace, whiten


def factored(k=4, d=30, seed=0):
    rng = np.random.default_rng(seed)
    b = rng.dirichlet(np.ones(d), size=k)
    w = rng.dirichlet(np.ones(k) * 2)
    return FactoredMoments(b, w, w)


class DenseMoments:
    """A minimal moments object around an explicit symmetric matrix (may be indefinite)."""

    def __init__(self, m2, m3=None):
        self.m2 = np.asarray(m2, dtype=np.float64)
        self.m3 = m3
        self.n_features = self.m2.shape[0]

    def m2_matmat(self, Q):
        return self.m2 @ Q

    def whitened_m3(self, W):
        return np.einsum("abc,ai,bj,cl->ijl", self.m3, W, W, W)


def spectrum_matrix(values, d=12, seed=0):
    U = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))[0]
    full = np.zeros(d)
    full[: len(values)] = values
    return U @ np.diag(full) @ U.T


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 3, 6])
def test_whitens_factored_moments(seed, k):
    fm = factored(k=k, seed=seed)
    m2, _ = fm.dense()
    wh = whiten(fm, k, seed=seed)
    assert wh.W.shape == (fm.n_features, k) and wh.U.shape == (fm.n_features, k)
    np.testing.assert_allclose(wh.W.T @ m2 @ wh.W, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(wh.U.T @ wh.U, np.eye(k), atol=1e-10)
    assert np.all(wh.U[np.argmax(np.abs(wh.U), axis=0), np.arange(k)] > 0)  # sign convention: largest entry > 0
    # eigenvalues: the top-k of the dense M2, descending, positive (relative 1e-10: exact range, round-off only)
    exact = np.sort(np.linalg.eigvalsh(m2))[::-1][:k]
    np.testing.assert_allclose(wh.eigenvalues, exact, rtol=1e-10)
    assert np.all(np.diff(wh.eigenvalues) <= 0)
    # (W^T)^+ = U diag(s)^(1/2) is a left inverse of W^T on the range: W^T unwhiten = I
    np.testing.assert_allclose(wh.W.T @ wh.unwhiten, np.eye(k), atol=1e-10)
    # and it reproduces M2 = unwhiten unwhiten^T (rank k)
    np.testing.assert_allclose(wh.unwhiten @ wh.unwhiten.T, m2, atol=1e-10 * np.abs(m2).max())
    # condition number diagnostic is the exact eigenvalue ratio, and agrees with FactoredMoments.conditioning
    np.testing.assert_allclose(wh.diagnostics["condition_number"], exact[0] / exact[-1], rtol=1e-8)
    np.testing.assert_allclose(fm.conditioning()["condition_number"], exact[0] / exact[-1], rtol=1e-8)
    np.testing.assert_allclose(fm.conditioning()["eigenvalues"], exact, rtol=1e-10)
    assert wh.diagnostics["ritz_residual"] < 1e-8


def test_deterministic_given_seed():
    fm = factored(k=3, seed=1)
    a, b = whiten(fm, 3, seed=4), whiten(fm, 3, seed=4)
    np.testing.assert_array_equal(a.W, b.W)


def test_signed_eigenvalues_kept_with_sign():
    """Top-2 by magnitude are 5 and 3 (positive: whitening succeeds); -2 is
    reported WITH its sign among the Ritz values and defines the spectral gap."""
    m2 = spectrum_matrix([5.0, 3.0, -2.0, 0.5])
    wh = whiten(DenseMoments(m2), 2, oversample=10, n_iter=3, seed=0)
    signed = wh.diagnostics["signed_eigenvalues"]
    np.testing.assert_allclose(signed[:4], [5.0, 3.0, -2.0, 0.5], atol=1e-8)
    np.testing.assert_allclose(wh.eigenvalues, [5.0, 3.0], rtol=1e-10)
    np.testing.assert_allclose(wh.diagnostics["spectral_gap"], 3.0 / 2.0, rtol=1e-8)
    np.testing.assert_allclose(wh.diagnostics["condition_number"], 5.0 / 3.0, rtol=1e-10)


def test_negative_eigenvalue_raises_naming_k():
    m2 = spectrum_matrix([5.0, 3.0, -2.0, 0.5])
    with pytest.raises(IndefiniteMomentError, match=r"top 3 eigenvectors.*smaller k") as info:
        whiten(DenseMoments(m2), 3, seed=0)
    assert "-2" in str(info.value)  # the signed eigenvalue is shown
    assert isinstance(info.value, ValueError)


def test_positive_eigenspace_skips_larger_negative_eigenvalues():
    """Spectrum 5, 3, -2, 0.5: the top 3 by magnitude are indefinite; eigenspace="positive" whitens with 5, 3,
    0.5 exactly (W^T M2 W = I on the positive eigenvectors), counts the skipped -2 and warns."""
    m2 = spectrum_matrix([5.0, 3.0, -2.0, 0.5])
    with pytest.warns(RuntimeWarning, match=r"1 negative eigenvalue\(s\).*1 of the k kept eigenvalues"):
        wh = whiten(DenseMoments(m2), 3, oversample=10, n_iter=3, seed=0, eigenspace="positive")
    np.testing.assert_allclose(wh.eigenvalues, [5.0, 3.0, 0.5], rtol=1e-10)
    np.testing.assert_allclose(wh.W.T @ m2 @ wh.W, np.eye(3), atol=1e-10)
    assert wh.diagnostics["negative_skipped"] == 1
    np.testing.assert_allclose(wh.diagnostics["signed_eigenvalues"][:4], [5.0, 3.0, -2.0, 0.5], atol=1e-8)
    assert wh.diagnostics["spectral_gap"] > 1e10  # only round-off after 0.5


@pytest.mark.parametrize("k", [1, 3, 6])
def test_positive_eigenspace_equals_magnitude_on_psd_moments(k):
    """Exact rank-k PSD moments: both choices keep the same pairs, nothing is skipped, no warning."""
    fm = factored(k=k, seed=k)
    a, b = whiten(fm, k, seed=1), whiten(fm, k, seed=1, eigenspace="positive")
    np.testing.assert_allclose(b.eigenvalues, a.eigenvalues, rtol=1e-10)
    np.testing.assert_allclose(np.abs(b.U.T @ a.U), np.eye(k), atol=1e-8)
    assert b.diagnostics["negative_skipped"] == 0


def test_positive_eigenspace_with_too_few_positive_eigenvalues_says_how_many():
    m2 = spectrum_matrix([5.0, -3.0, -2.0, 0.5])
    with pytest.raises(IndefiniteMomentError, match=r"only 2 eigenvalue\(s\) that are positive.*fewer than k=3.*at most "
                                                    r"k=2"):
        whiten(DenseMoments(m2), 3, seed=0, eigenspace="positive")


def test_bad_eigenspace_and_order():
    with pytest.raises(ValueError, match=r"eigenspace.*'magnitude', 'positive'.*'largest'"):
        whiten(factored(), 2, eigenspace="largest")
    with pytest.raises(ValueError, match=r"order.*'magnitude', 'positive'.*'algebraic'"):
        krylov_eigenspace(lambda Q: Q, np.eye(4)[:, :2], 1, order="algebraic")


def test_zero_eigenvalue_raises():
    """Rank-2 M2 whitened to k = 3: the third eigenvalue is numerically zero."""
    fm = factored(k=2, seed=3)
    with pytest.raises(IndefiniteMomentError, match="numerically zero"):
        whiten(fm, 3, seed=0)


def test_lda_indefinite_error_names_alpha0():
    """Through the LDA path (top-k positive eigenspace) one positive eigenvalue for k = 2 is refused, and the
    error carries the alpha0 hint."""
    d = 12
    rng = np.random.default_rng(0)
    m2 = spectrum_matrix([5.0, -3.0, -1.0], d=d)
    m3 = rng.standard_normal((d, d, d))
    with pytest.raises(IndefiniteMomentError, match=r"only 1 eigenvalue\(s\) that are positive.*alpha0 may be "
                                                    r"misspecified"):
        lda.spectral_from_moments(DenseMoments(m2, m3), 2, alpha0=1.0)


def test_lda_population_m2_stays_psd_for_any_alpha0():
    """Why the indefinite error needs sampling noise or a wrong k, not only a wrong alpha0.

    In topic coordinates E2 = (alpha alpha^T + diag alpha) / (a0 (a0+1)) and
    M1 = alpha / a0, so E2 - c M1 M1^T is PSD for every c in [0, 1] (c = 1 is a
    multinomial covariance); c = a_fit / (a_fit + 1) < 1 for every a_fit > 0.
    """
    rng = np.random.default_rng(2)
    k, d = 3, 15
    beta = rng.dirichlet(np.full(d, 0.3), size=k)
    alpha = np.full(k, 0.1)
    a0 = alpha.sum()
    m1 = alpha / a0 @ beta
    e2 = beta.T @ np.diag(alpha / ((a0 + 1) * a0)) @ beta + a0 / (a0 + 1) * np.outer(m1, m1)
    for a_fit in (1e-3, 0.3, 1e3):
        wrong = e2 - a_fit / (a_fit + 1) * np.outer(m1, m1)
        wh = whiten(DenseMoments(wrong), k, seed=0)
        assert np.all(wh.eigenvalues > 0)


def test_lda_sampled_k_too_large_is_within_the_noise():
    """Sampled LDA corpus with 2 true topics, fitted with k = 3: the third positive eigenvalue of the empirical
    M2 is sampling noise, smaller in magnitude than two negative ones for this seed. The top-3 positive
    eigenspace is whitened, the two skipped eigenvalues are counted, and the warning says the smaller kept
    eigenvalues are within the noise and to try a smaller k."""
    rng = np.random.default_rng(0)
    k, V, N = 2, 30, 400
    beta = rng.dirichlet(np.full(V, 0.2), size=k)
    theta = rng.dirichlet(np.full(k, 0.5), size=N)
    X = np.stack([rng.multinomial(20, t @ beta) for t in theta])
    with pytest.warns(RuntimeWarning, match=r"2 negative eigenvalue\(s\).*within the moment's sampling noise.*"
                                            r"smaller k"):
        est = lda.spectral(X, 3, alpha0=1.0)
    assert est.diagnostics["m2_negative_skipped"] == 2


@pytest.mark.parametrize("k", [0, 31])
def test_bad_k(k):
    with pytest.raises(ValueError, match=r"'k' argument of whiten"):
        whiten(factored(), k)


def test_bad_options():
    with pytest.raises(ValueError, match="'oversample'"):
        whiten(factored(), 2, oversample=-1)
    with pytest.raises(ValueError, match="'n_iter'"):
        whiten(factored(), 2, n_iter=-1)
    with pytest.raises(TypeError, match="'seed'"):
        whiten(factored(), 2, seed="zero")


def test_unconverged_eigensolver_warns():
    """A slowly decaying spectrum, no oversampling and one pass after the first: the Ritz pairs stay poor
    and the residual check warns."""
    d = 200
    m2 = spectrum_matrix(1.0 / np.arange(1, d + 1) ** 0.1, d=d, seed=1)
    with pytest.warns(RuntimeWarning, match=r"not converge"):
        wh = whiten(DenseMoments(m2), 5, oversample=0, n_iter=0, max_iter=1, seed=0)
    assert wh.diagnostics["ritz_residual"] > 1e-2


@pytest.mark.parametrize("exponent", [0.1, 0.5, 1.0])
def test_block_krylov_converges_in_few_passes(exponent):
    """Eigenvalues decaying like 1/i^exponent (gap s_5/s_6 = 1.02 for exponent 0.1): the Krylov space reaches
    the residual tolerance in at most 7 passes (block power iteration with the same block needs 15-53 here),
    and the eigenvalues are then accurate to 1e-3 relative."""
    d = 200
    m2 = spectrum_matrix(1.0 / np.arange(1, d + 1) ** exponent, d=d, seed=1)
    wh = whiten(DenseMoments(m2), 5, oversample=0, n_iter=0, seed=0)
    assert wh.diagnostics["ritz_residual"] < 1e-2 and wh.diagnostics["power_iterations"] + 1 <= 7
    exact = np.sort(np.linalg.eigvalsh(m2))[::-1][:5]
    np.testing.assert_allclose(wh.eigenvalues, exact, rtol=1e-3)
    np.testing.assert_allclose(wh.U.T @ wh.U, np.eye(5), atol=1e-10)


def test_krylov_restart_bounds_the_space():
    """With a thick restart after 2 blocks the space never holds more than 2 blocks, and it still converges."""
    d = 150
    m2 = spectrum_matrix(1.0 / np.arange(1, d + 1) ** 0.5, d=d, seed=2)
    rng = np.random.default_rng(0)
    space = krylov_eigenspace(lambda Q: m2 @ Q, rng.standard_normal((d, 6)), 4, max_passes=40, max_blocks=2)
    assert space.basis.shape[1] <= 12 and space.residual < 1e-2
    np.testing.assert_allclose(space.image, m2 @ space.basis, atol=1e-12)
    np.testing.assert_allclose(space.basis.T @ space.basis, np.eye(space.basis.shape[1]), atol=1e-10)


def test_factored_moments_validation():
    with pytest.raises(ValueError, match="'omega'"):
        FactoredMoments(np.ones((2, 3)), np.array([1.0, -1.0]), np.ones(2))
    with pytest.raises(ValueError, match="'kappa'"):
        FactoredMoments(np.ones((2, 3)), np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="'components'"):
        FactoredMoments(np.ones(3), np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="'components'"):
        FactoredMoments(np.array([[np.nan, 1.0]]), np.ones(1), np.ones(1))


def test_krylov_forced_passes_on_a_space_already_full():
    """The start block spans the whole space and more passes are asked for: a thick restart rotates the basis,
    no block can be added, and the Ritz pairs reported are those of the rotated space (exact)."""
    m2 = spectrum_matrix([4.0, 3.0, 2.0, 1.0], d=4, seed=3)
    space = krylov_eigenspace(lambda Q: m2 @ Q, np.random.default_rng(0).standard_normal((4, 4)), 2, min_passes=3)
    assert space.residual < 1e-12
    np.testing.assert_allclose(space.ritz[:2], [4.0, 3.0], rtol=1e-12)
    top = space.basis @ space.vectors[:, :2]
    np.testing.assert_allclose(m2 @ top, top * [4.0, 3.0], atol=1e-12)


@pytest.mark.parametrize("tail", [0.0, 1e-6, 1e-2])
def test_krylov_basis_stays_orthonormal_when_the_space_is_nearly_invariant(tail):
    """A rank-8 operator plus a tail of size ``tail``: once the space holds the rank-8 part, each new direction
    keeps only about ``tail`` of its norm after the projections (1e-6: kept, and its round-off along the basis
    amplified 1e6 by the normalization, which the extra projection removes; 0: dropped, the space is invariant;
    1e-2: an ordinary block). The basis stays orthonormal to 1e-12 in every case."""
    d = 120
    rng = np.random.default_rng(5)
    low = spectrum_matrix(np.concatenate([np.arange(8, 0, -1.0), np.zeros(d - 8)]), d=d, seed=4)
    noise = rng.standard_normal((d, d))
    m2 = low + tail * (noise + noise.T) / np.sqrt(2 * d)
    space = krylov_eigenspace(lambda Q: m2 @ Q, rng.standard_normal((d, 6)), 4, min_passes=5, max_passes=5,
                              max_blocks=6)
    np.testing.assert_allclose(space.basis.T @ space.basis, np.eye(space.basis.shape[1]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(space.image, m2 @ space.basis, rtol=0, atol=1e-12)
    np.testing.assert_allclose(space.ritz[:4], np.linalg.eigvalsh(m2)[::-1][:4], rtol=1e-9)


def test_krylov_noise_rule_stops_at_the_sampling_noise():
    """A rank-4 signal plus symmetric noise (negative eigenvalues): with ``noise_tol`` the iteration stops once the
    wanted pairs' absolute residual is within that fraction of the most negative Ritz value, earlier than the
    relative rule alone; on the signal without noise (positive semi-definite) the rule never fires."""
    d = 300
    rng = np.random.default_rng(6)
    signal = spectrum_matrix(np.concatenate([[4.0, 3.5, 3.0, 2.5], np.zeros(d - 4)]), d=d, seed=7)
    noise = rng.standard_normal((d, d))
    m2 = signal + 1.2 * (noise + noise.T) / np.sqrt(2 * d)  # noise spectral norm ~ 2 * 1.2 / sqrt(2) ~ 1.7
    start = rng.standard_normal((d, 8))
    strict = krylov_eigenspace(lambda Q: m2 @ Q, start, 4, tol=1e-8, max_passes=30)
    noisy = krylov_eigenspace(lambda Q: m2 @ Q, start, 4, tol=1e-8, noise_tol=0.1, max_passes=30)
    assert noisy.passes < strict.passes
    wanted = noisy.basis @ noisy.vectors[:, :4]
    absolute = np.linalg.norm(m2 @ wanted - wanted * noisy.ritz[:4], axis=0)
    assert absolute.max() <= 0.1 * -noisy.ritz.min() + 1e-8
    assert -noisy.ritz.min() <= -np.linalg.eigvalsh(m2)[0] + 1e-12  # the Ritz value bounds the noise from below
    exact = krylov_eigenspace(lambda Q: signal @ Q, start, 4, tol=1e-8, noise_tol=0.1, max_passes=30)
    assert exact.passes == krylov_eigenspace(lambda Q: signal @ Q, start, 4, tol=1e-8, max_passes=30).passes
    assert exact.residual < 1e-8
