"""Low-rank kernel features, KernelSVD, the whitened third-order embedding and the density helpers (seed 004)."""

from __future__ import annotations

import numpy as np
import pytest

from specinit.engine.kernel_densities import (
    cv_bandwidth,
    fit_weighted_gmm,
    positive_part_mass,
    silverman_bandwidth,
    weighted_kde,
)
from specinit.engine.kernel_features import (
    NystromFeatures,
    RandomFourierFeatures,
    check_bandwidth,
    check_no_constant_columns,
    kernel_features,
    median_bandwidth,
)
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.kernels import ExchangeableViews, whitened_third_embedding
from specinit.engine.views import multiview_population
from specinit.engine.whitening import IndefiniteMomentError, whiten
from tests.conftest import best_permutation


def _rbf(x, y, bandwidth):
    return np.exp(-0.5 * np.sum(((x[:, None, :] - y[None, :, :]) / bandwidth) ** 2, axis=-1))


def test_random_fourier_features_approximate_the_rbf_kernel():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 2))
    bandwidth = np.array([0.8, 1.5])
    exact = _rbf(x, x, bandwidth)
    errors = []
    for rank in (64, 4096):
        phi = RandomFourierFeatures(2, bandwidth, rank, seed=1).transform(x)
        errors.append(np.abs(phi @ phi.T - exact).max())
    # Monte Carlo error of r/2 frequency pairs ~ r^(-1/2): 64 -> ~0.2, 4096 -> ~0.03 (max over 1600 pairs).
    assert errors[1] < 0.06 and errors[1] < errors[0] / 3


@pytest.mark.parametrize("kind", ["rff", "nystrom"])
def test_gaussian_embedding_is_the_mean_of_the_features(kind):
    rng = np.random.default_rng(1)
    loc, scale = np.array([0.5, -1.0]), np.array([0.7, 0.3])
    sample = loc + scale * rng.standard_normal((200_000, 2))
    fm = kernel_features(sample[:3000], features=kind, rank=32, seed=2)
    closed = fm.gaussian_embedding(loc, scale)
    monte_carlo = fm.transform(sample).mean(axis=0)
    # features are bounded by ~1 / sqrt(r/2) (rff) or O(1) (nystrom); MC error ~ 1/sqrt(2e5) ~ 2e-3 per entry.
    np.testing.assert_allclose(closed, monte_carlo, atol=1e-2)
    # batched (k, m, d) parameters broadcast
    assert fm.gaussian_embedding(np.zeros((3, 2, 2)), np.ones((3, 2, 2))).shape == (3, 2, fm.rank)


def test_nystrom_is_exact_on_its_landmarks():
    x = np.random.default_rng(3).normal(size=(300, 1))
    fm = NystromFeatures(x, 1.0, rank=20, seed=0)
    phi = fm.transform(fm.landmarks)
    np.testing.assert_allclose(phi @ phi.T, _rbf(fm.landmarks, fm.landmarks, np.ones(1)), atol=1e-8)


def test_median_bandwidth_follows_column_scales_and_rejects_constant_columns():
    x = np.random.default_rng(4).normal(size=(500, 2))
    b = median_bandwidth(x, seed=0)
    b_scaled = median_bandwidth(x * np.array([1.0, 10.0]), seed=0)
    np.testing.assert_allclose(b_scaled, b * np.array([1.0, 10.0]), rtol=1e-10)
    # standard normal pairs in 2-D: median distance sqrt(2 * 2 ln 2) ~ 1.67, halved by default
    assert 0.7 < b[0] < 0.95
    np.testing.assert_allclose(median_bandwidth(x, factor=1.0, seed=0), 2 * b)
    with pytest.raises(ValueError, match="constant columns \\[1\\]"):
        median_bandwidth(np.column_stack([x[:, 0], np.full(500, 3.0)]))


@pytest.mark.parametrize("bad", [0.0, -1.0, np.nan, [1.0, -2.0], [1.0, 2.0, 3.0]])
def test_bandwidth_must_be_positive(bad):
    with pytest.raises(ValueError, match="bandwidth"):
        check_bandwidth(bad, 2, "bandwidth", "test")
    with pytest.raises(ValueError, match="bandwidth"):
        RandomFourierFeatures(2, bad, 8)


def _population(exchangeable: bool):
    """Three views, k = 3, each component a 2-Gaussian mixture per view; exact RFF embeddings."""
    rng = np.random.default_rng(5)
    weights = np.array([0.5, 0.3, 0.2])
    views = 1 if exchangeable else 3
    comps = [(rng.dirichlet([2, 2], size=3), rng.normal(scale=2.0, size=(3, 2, 1)), rng.uniform(0.3, 1.0, (3, 2, 1)))
             for _ in range(views)]
    maps = [RandomFourierFeatures(1, 1.5, 64, seed=10 + v) for v in range(views)]
    emb = [np.einsum("hj,hjr->hr", mix, fm.gaussian_embedding(loc, scale)) for fm, (mix, loc, scale) in zip(maps, comps)]
    if exchangeable:
        emb = emb * 3
    return weights, emb, multiview_population(emb, weights)


def test_kernel_svd_and_third_embedding_are_exact_on_population_moments():
    weights, emb, pop = _population(True)
    wh = whiten(ExchangeableViews(pop), 3, seed=0)
    W = wh.W
    # whitened embeddings v_i = sqrt(w_i) W^T mu_i are orthonormal, and T = sum_i w_i^(-1/2) v_i^(x)3
    V = (np.sqrt(weights)[:, None] * emb[0] @ W).T
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-8)
    T = whitened_third_embedding(pop, W)
    expected = np.einsum("i,ai,bi,ci->abc", weights**-0.5, V, V, V)
    np.testing.assert_allclose(T, expected, atol=1e-8)
    ritz = wh.diagnostics["signed_eigenvalues"]
    assert abs(ritz[3]) < 1e-10 * ritz[0]


def test_fit_exchangeable_views_recovers_weights_and_embeddings_exactly():
    weights, emb, pop = _population(True)
    fit = fit_exchangeable(ExchangeableViews(pop), 3, seed=0)
    lam = fit.eigenvalues
    embeddings = lam[:, None] * fit.components
    perm = best_permutation(emb[0], embeddings, "l2")
    # exact moments: only round-off (TPM tolerance 1e-10) separates the fit from the truth
    np.testing.assert_allclose(1.0 / lam[perm] ** 2, weights, atol=1e-8)
    np.testing.assert_allclose(embeddings[perm], emb[0], atol=1e-8)


def test_k_larger_than_rank_or_indefinite_embedding_is_reported():
    _, _, pop = _population(True)
    with pytest.raises(ValueError, match="'k' argument .* <= 64"):
        fit_exchangeable(ExchangeableViews(pop), 65)
    with pytest.raises(IndefiniteMomentError, match="not positive definite on its top 4"):
        fit_exchangeable(ExchangeableViews(pop), 4)


def test_weighted_kde_integrates_to_one_and_clips_signed_densities():
    rng = np.random.default_rng(6)
    support = rng.normal(size=(200, 1))
    weights = np.vstack([np.full(200, 1 / 200), np.where(support[:, 0] > 0, 2.0, -1.0) / 200])
    band = np.array([[0.3], [0.3]])
    grid = np.linspace(-8, 8, 4001)
    plain = weighted_kde(grid[:, None], support, weights[:1], band[:1])[:, 0]
    assert abs(np.trapezoid(plain, grid) - 1.0) < 1e-8
    norm = positive_part_mass(support, weights, band)
    dens = weighted_kde(grid[:, None], support, weights, band, norm)
    assert np.all(dens >= 0)
    # Z comes from a 1024-point trapezoidal rule, second order at the kinks of max(s, 0): ~1e-5 here
    np.testing.assert_allclose(np.trapezoid(dens, grid, axis=0), 1.0, atol=1e-4)


def test_positive_part_mass_in_two_dimensions_matches_a_grid():
    rng = np.random.default_rng(7)
    support = rng.normal(size=(150, 2))
    weights = (np.where(support[:, 0] > 0.3, 1.5, -0.5) / 150)[None, :]
    band = np.array([[0.4, 0.5]])
    z = positive_part_mass(support, weights, band, seed=0)[0]
    g = np.linspace(-6, 6, 241)
    pts = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    grid_mass = np.maximum(weighted_kde(pts, support, weights, band)[:, 0], 0).sum() * (g[1] - g[0]) ** 2
    # importance sampling with 10000 draws: relative error ~1e-2 here
    assert abs(z / grid_mass - 1) < 0.02


def test_silverman_bandwidth_and_weighted_gmm_projection():
    rng = np.random.default_rng(8)
    x = np.concatenate([rng.normal(-2, 0.5, 3000), rng.normal(2, 0.5, 1000)])[:, None]
    w = np.full((1, x.shape[0]), 1 / x.shape[0])
    h = silverman_bandwidth(x, w)
    assert 0.05 < h[0, 0] < 0.5
    mix, loc, scale = fit_weighted_gmm(x, w[0], h[0], 2, seed=0)
    order = np.argsort(loc[:, 0])
    # 4000 points: sampling error of the mixture parameters ~ 1e-2; the kernel adds h^2 to the variances
    np.testing.assert_allclose(mix[order], [0.75, 0.25], atol=0.03)
    np.testing.assert_allclose(loc[order, 0], [-2, 2], atol=0.06)
    np.testing.assert_allclose(scale[order, 0], np.sqrt(0.25 + h[0, 0] ** 2), atol=0.05)


def test_bandwidths_normalize_the_weight_rows_and_are_scale_equivariant():
    """Rows of weights are normalized before use (a row times 7 gives the same bandwidth); points in other units
    (times 1e150 or 1e-150) give the bandwidth in those units, without overflow or underflow warnings."""
    rng = np.random.default_rng(10)
    x = rng.permutation(np.concatenate([rng.normal(-2, 0.4, 400), rng.normal(1, 0.6, 400)]))[:, None]
    w = rng.random((2, x.shape[0]))
    unit = w / w.sum(axis=1, keepdims=True)
    for rule in (silverman_bandwidth, cv_bandwidth):
        h = rule(x, unit)
        np.testing.assert_allclose(rule(x, 7.0 * w), h, rtol=1e-13)
        for scale in (1e150, 1e-150):
            np.testing.assert_allclose(rule(x * scale, w) / scale, h, rtol=1e-12)
    for bad in (-unit, np.zeros_like(unit), np.where(unit > 0.001, np.nan, unit)):
        with pytest.raises(ValueError, match="'weights' argument .* must be finite and non-negative, with a positive"):
            silverman_bandwidth(x, bad)


def test_constant_columns_are_found_in_the_data_unit():
    """A column of spread 1e-150 is not constant (the test is relative to the column's size); a truly constant
    column is, at any scale."""
    x = np.random.default_rng(11).normal(size=(200, 2))
    for scale in (1.0, 1e150, 1e-150):
        np.testing.assert_allclose(check_no_constant_columns(x * scale, "x", "test") / scale, x.std(axis=0),
                                   rtol=1e-12)
        with pytest.raises(ValueError, match="constant columns \\[1\\]"):
            check_no_constant_columns(np.column_stack([x[:, 0], np.full(200, 3.0)]) * scale, "x", "test")


def test_cv_bandwidth_undersmooths_a_bimodal_density_less_than_silverman():
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.normal(-2, 0.3, 1500), rng.normal(2, 0.3, 1500)])
    x = rng.permutation(x)[:, None]
    w = np.full((1, x.shape[0]), 1 / x.shape[0])
    silverman, cv = silverman_bandwidth(x, w), cv_bandwidth(x, w)
    grid = np.linspace(-4, 4, 801)
    truth = 0.5 * (np.exp(-0.5 * ((grid + 2) / 0.3) ** 2) + np.exp(-0.5 * ((grid - 2) / 0.3) ** 2)) / (0.3 * np.sqrt(2 * np.pi))
    l1 = [np.abs(weighted_kde(grid[:, None], x, w, h)[:, 0] - truth).sum() * (grid[1] - grid[0]) for h in (silverman, cv)]
    # modes 4 apart with sd 0.3: the normal-reference rule oversmooths (h ~ 0.45); CV picks a fraction of it
    assert cv[0, 0] < silverman[0, 0] and l1[1] < 0.5 * l1[0]
