"""Online Gaussian mixtures: exact row sums merged over batches, ``gmm.update`` equal to one fit on all the rows,
save/load mid-stream, and ``SpectralGaussianMixture.partial_fit``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_wine

from specinit.align import match_components
from specinit.engine.rows import RowMoments, RowSums
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralGaussianMixture
from specinit.models import gmm


@pytest.fixture(scope="module")
def wine():
    x = load_wine().data
    return x[np.random.default_rng(0).permutation(x.shape[0])]


def _summed(x, cuts):
    bounds = [0, *cuts, x.shape[0]]
    parts = [RowSums.from_rows(x[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


@pytest.mark.parametrize("covariance", ["common", "spherical", "diag"])
def test_merged_row_sums_give_the_one_shot_moments(wine, covariance):
    """Batches of uneven sizes, the later ones shifted and spread wider than the first (its frame): the moments from
    the merged sums equal those of all the rows at once, in units of the data's own scale (features from 0.1 to
    1,680)."""
    x = wine.copy()
    x[100:] = 3.0 * x[100:] + 50.0  # later rows far from the first batch's mean and range
    once = RowMoments(x, 3, covariance)
    merged = RowMoments(_summed(x, [7, 100, 101]), 3, covariance)
    rng = np.random.default_rng(1)
    Q, W = rng.normal(size=(x.shape[1] + 1, 5)), rng.normal(size=(x.shape[1] + 1, 3))
    for ours, expected in ((merged.m2_matmat(Q), once.m2_matmat(Q)), (merged.whitened_m3(W), once.whitened_m3(W)),
                           (merged.shift, once.shift), (merged.noise, once.noise), (merged.m1, once.m1),
                           (merged.eigenvalues, once.eigenvalues)):
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    assert (merged.unit, merged.n, merged.rank, merged.sigma2) == pytest.approx((once.unit, once.n, once.rank,
                                                                                 once.sigma2), rel=1e-10)


@pytest.mark.parametrize("covariance", ["spherical", "diag"])
def test_updates_end_at_the_one_fit_on_all_rows(wine, covariance):
    estimate = None
    for batch in np.array_split(wine, 5):
        estimate = gmm.update(batch, estimate, k=3, covariance=covariance, seed=0)
        assert estimate.k == 3 and np.isfinite(gmm.log_likelihood(wine, estimate)).all()
    once = gmm.spectral(wine, 3, covariance=covariance, seed=0)
    order = match_components(estimate.params["loc"], once.params["loc"])
    for name in ("loc", "weights", "scale"):
        np.testing.assert_allclose(estimate.params[name], once.params[name][order], rtol=1e-8,
                                   atol=1e-8 * np.abs(once.params[name]).max())
    assert estimate.diagnostics["n_batches"] == 5 and estimate.diagnostics["n_observations"] == wine.shape[0]


def test_components_keep_their_labels_from_batch_to_batch(wine):
    previous, estimate = None, None
    for batch in np.array_split(wine, 4):
        estimate = gmm.update(batch, estimate, k=3, covariance="spherical", seed=0)
        if previous is not None:
            np.testing.assert_array_equal(match_components(previous, estimate.params["loc"]), np.arange(3))
        previous = estimate.params["loc"]


def test_updates_continue_after_save_and_load(wine, tmp_path):
    first = gmm.update(wine[:90], k=3, covariance="diag")
    resumed = gmm.update(wine[90:], SpectralEstimate.load(first.save(tmp_path / "online.npz")), covariance="diag")
    direct = gmm.update(wine[90:], first, covariance="diag")
    np.testing.assert_array_equal(resumed.params["loc"], direct.params["loc"])
    np.testing.assert_array_equal(resumed.params["scale"], direct.params["scale"])


def test_update_errors_name_the_argument(wine):
    with pytest.raises(ValueError, match=r"'k' argument of gmm.update must be given for the first batch"):
        gmm.update(wine[:50])
    first = gmm.update(wine[:50], k=3)
    with pytest.raises(ValueError, match=r"'estimate' argument of gmm.update must be an estimate that keeps its "
                                         r"moments"):
        gmm.update(wine[50:], gmm.spectral(wine[:50], 3))
    with pytest.raises(TypeError, match=r"'estimate' argument of gmm.update must be a 'gmm' SpectralEstimate"):
        gmm.update(wine[50:], {"loc": np.zeros((3, 13))})
    with pytest.raises(ValueError, match=r"'x' argument of gmm.update must be rows of 13 columns"):
        gmm.update(wine[50:, :12], first)
    bad = wine[50:].copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"'x' argument of gmm.update"):
        gmm.update(bad, first)
    with pytest.raises(ValueError, match=r"'k' argument of gmm.update"):
        gmm.update(wine[50:], first, k=0)
    with pytest.raises(ValueError, match=r"'estimate' argument of gmm.update must be an estimate whose stored row "
                                         r"sums are whole: 'moments/s3' must be a 3-d numeric array; got shape "
                                         r"\(13, 13\)"):
        gmm.update(wine[50:], replace(first, state={**first.state, "moments/s3": np.zeros((13, 13))}))


def test_update_refuses_sums_over_the_memory_budget(one_mib_budget):
    with pytest.raises(MemoryError, match=r"'x' argument .*\(d, d, d\) sums"):
        gmm.update(np.random.default_rng(0).normal(size=(100, 60)), k=2)


def test_partial_fit_answers_after_every_batch(wine):
    model = SpectralGaussianMixture(3, covariance_type="diag", random_state=0)
    direct = None
    for batch in np.array_split(wine, 3):
        model.partial_fit(batch)
        direct = gmm.update(batch, direct, k=3, covariance="diag", seed=0)
        assert model.predict(wine[:10]).shape == (10,) and np.isfinite(model.score(wine))
        assert model.converged_ and model.n_iter_ == 0
    np.testing.assert_array_equal(model.means_, direct.params["loc"])
    assert model.estimate_.diagnostics["n_batches"] == 3
    with pytest.raises(ValueError, match="X has 12 features"):
        model.partial_fit(wine[:10, :12])
    with pytest.raises(ValueError, match="SpectralGaussianMixture.partial_fit continues a model built by "
                                         "partial_fit"):
        SpectralGaussianMixture(3, random_state=0).fit(wine).partial_fit(wine[:20])
