"""Online independent-factor fits: power sums of three or four orders merged over batches, ``factors.update`` equal
to one fit on all the rows, save/load mid-stream, and ``SpectralFactors.partial_fit``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_wine

from specinit.align import match_components
from specinit.engine.rows import RowSums
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralFactors
from specinit.models import factors
from specinit.models.factors import _DataMoments, _SummedMoments


@pytest.fixture(scope="module")
def wine():
    x = load_wine().data
    return x[np.random.default_rng(0).permutation(x.shape[0])]


def _summed(x, cuts, order):
    bounds = [0, *cuts, x.shape[0]]
    parts = [RowSums.from_rows(x[a:b], order=order) for a, b in zip(bounds[:-1], bounds[1:])]
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


@pytest.mark.parametrize("cumulant", ["skew", "kurtosis"])
def test_merged_power_sums_give_the_one_shot_cumulants(wine, cumulant):
    """Batches of uneven sizes, the later ones shifted and spread wider than the first (its frame): the mean,
    covariance and whitened cumulant from the merged sums equal those of all the rows at once, in the data's own
    units (features from 0.1 to 1,680)."""
    x = wine.copy()
    x[100:] = 3.0 * x[100:] + 50.0
    once = _DataMoments(x, cumulant)
    merged = _SummedMoments(_summed(x, [7, 100, 101], 3 if cumulant == "skew" else 4), cumulant)
    W = np.random.default_rng(1).normal(size=(x.shape[1], 4))
    for ours, expected in ((merged.mean, once.mean), (merged.unit**2 * merged.covariance(),
                                                      once.unit**2 * once.covariance()),
                           (merged.whitened_cumulant(W * merged.unit), once.whitened_cumulant(W * once.unit))):
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    assert merged.n_samples == once.n_samples == x.shape[0]


def test_fourth_power_sums_also_serve_the_third_cumulant(wine):
    fourth, third = _summed(wine, [60], 4), _summed(wine, [60], 3)
    W = np.random.default_rng(2).normal(size=(wine.shape[1], 3))
    expected = _SummedMoments(third, "skew").whitened_cumulant(W)
    np.testing.assert_allclose(_SummedMoments(fourth, "skew").whitened_cumulant(W), expected, rtol=0,
                               atol=1e-12 * np.abs(expected).max())
    assert (fourth + third).order == 3 and fourth.order == 4


def _factor_rows(cumulant, n=6000, d=8, k=3, seed=0):
    rng = np.random.default_rng(seed)
    loadings = rng.normal(size=(k, d))
    h = rng.gamma(2.0, 1 / np.sqrt(2), (n, k)) - np.sqrt(2) if cumulant == "skew" else rng.laplace(size=(n, k))
    return h @ loadings + 0.3 * rng.normal(size=(n, d)) + 10.0


@pytest.mark.parametrize("cumulant", ["skew", "kurtosis"])
def test_updates_end_at_the_one_fit_on_all_rows(cumulant):
    x = _factor_rows(cumulant)
    estimate = None
    for batch in np.array_split(x, 5):
        estimate = factors.update(batch, estimate, k=3, cumulant=cumulant, seed=0)
        assert estimate.k == 3 and "factors" not in estimate.params
    once = factors.spectral(x, 3, cumulant=cumulant, scores=False, seed=0)
    order = match_components(estimate.params["loadings"], once.params["loadings"])
    extra = "shape" if cumulant == "skew" else "power"
    for name in ("loadings", extra):
        np.testing.assert_allclose(estimate.params[name], once.params[name][order], rtol=1e-8,
                                   atol=1e-8 * np.abs(once.params[name]).max())
    for name in ("loc", "noise"):
        np.testing.assert_allclose(estimate.params[name], once.params[name], rtol=1e-10)
    assert estimate.diagnostics["n_batches"] == 5 and estimate.diagnostics["n_observations"] == x.shape[0]


def test_factors_keep_their_labels_and_a_later_batch_may_ask_another_k():
    x = _factor_rows("skew", seed=1)
    previous, estimate = None, None
    for batch in np.array_split(x, 4):
        estimate = factors.update(batch, estimate, k=3, seed=0)
        if previous is not None:
            np.testing.assert_array_equal(match_components(previous, estimate.params["loadings"]), np.arange(3))
        previous = estimate.params["loadings"]
    fewer = factors.update(x[:10], estimate, k=2, seed=0)
    assert fewer.k == 2 and fewer.diagnostics["n_batches"] == 5


def test_updates_continue_after_save_and_load(tmp_path):
    x = _factor_rows("kurtosis", seed=2)
    first = factors.update(x[:2000], k=3, cumulant="kurtosis")
    resumed = factors.update(x[2000:], SpectralEstimate.load(first.save(tmp_path / "online.npz")),
                             cumulant="kurtosis")
    direct = factors.update(x[2000:], first, cumulant="kurtosis")
    np.testing.assert_array_equal(resumed.params["loadings"], direct.params["loadings"])
    np.testing.assert_array_equal(resumed.params["noise"], direct.params["noise"])


def test_update_errors_name_the_argument():
    x = _factor_rows("skew", seed=4)
    with pytest.raises(ValueError, match=r"'k' argument of factors.update must be given for the first batch"):
        factors.update(x[:500])
    first = factors.update(x[:500], k=3)
    with pytest.raises(ValueError, match=r"'estimate' argument of factors.update must be an estimate that keeps its "
                                         r"moments"):
        factors.update(x[500:], factors.spectral(x[:500], 3))
    with pytest.raises(TypeError, match=r"'estimate' argument of factors.update must be a 'factors' SpectralEstimate"):
        factors.update(x[500:], {"loadings": np.zeros((3, 8))})
    with pytest.raises(ValueError, match=r"'cumulant' argument of factors.update must be 'skew' \(the stored sums "
                                         r"have powers up to 3"):
        factors.update(x[500:], first, cumulant="kurtosis")
    with pytest.raises(ValueError, match=r"'x' argument of factors.update must be rows of 8 columns"):
        factors.update(x[500:, :7], first)
    bad = x[500:].copy()
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match=r"'x' argument of factors.update"):
        factors.update(bad, first)
    with pytest.raises(ValueError, match=r"'k' argument of factors.update"):
        factors.update(x[500:], first, k=9)
    flat = x.copy()
    flat[:, 4] = 2.5  # constant over the rows seen: no factor, and the noise estimate would be biased
    with pytest.raises(ValueError, match=r"'x' argument of factors.update must be free of constant columns .*got "
                                         r"constant columns \[4\]"):
        factors.update(flat[:600], k=3)
    assert factors.update(flat[600:], factors.update(x[:600], k=3)).diagnostics["n_batches"] == 2  # constant in one
    with pytest.raises(ValueError, match=r"'estimate' argument of factors.update must be an estimate whose stored "
                                         r"row sums are whole: 'moments/s3' must be a 3-d numeric array; got "
                                         r"shape \(8, 8\)"):
        factors.update(x[500:], replace(first, state={**first.state, "moments/s3": np.zeros((8, 8))}))


def test_update_refuses_sums_over_the_memory_budget(one_mib_budget):
    with pytest.raises(MemoryError, match=r"'x' argument .*\(d, d, d, d\) sums"):
        factors.update(np.random.default_rng(0).normal(size=(100, 20)), k=2, cumulant="kurtosis")


def test_partial_fit_answers_after_every_batch():
    x = _factor_rows("skew", seed=3)
    model = SpectralFactors(3, random_state=0)
    direct = None
    for batch in np.array_split(x, 3):
        model.partial_fit(batch)
        direct = factors.update(batch, direct, k=3, seed=0)
        assert model.transform(x[:10]).shape == (10, 3) and np.isfinite(model.score(x))
    np.testing.assert_array_equal(model.components_, direct.params["loadings"])
    fitted = SpectralFactors(3, random_state=0).fit(x)
    order = match_components(model.components_, fitted.components_)
    np.testing.assert_allclose(model.components_, fitted.components_[order], atol=1e-8)
    with pytest.raises(ValueError, match="X has 7 features"):
        model.partial_fit(x[:10, :7])
    with pytest.raises(ValueError, match="SpectralFactors.partial_fit continues a model built by partial_fit"):
        SpectralFactors(3, random_state=0).fit(x).partial_fit(x[:20])
