"""Online multi-view mixtures: exact view sums merged over batches, ``multiview.update`` equal to one fit on all
the observations, save/load mid-stream, and ``SpectralMultiView.partial_fit``."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations

import numpy as np
import pytest
from sklearn.datasets import load_wine

from specinit.align import match_components
from specinit.engine.views import ViewMoments, ViewSums, with_squares
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralMultiView
from specinit.models import multiview


@pytest.fixture(scope="module")
def mixed():
    """Three classes seen through a categorical view (6 symbols) and two Gaussian views (3 coordinates each)."""
    rng = np.random.default_rng(0)
    h = rng.integers(0, 3, size=3000)
    symbols = np.array([[0.6, 0.2, 0.1, 0.05, 0.03, 0.02], [0.05, 0.1, 0.6, 0.2, 0.03, 0.02],
                        [0.02, 0.03, 0.05, 0.1, 0.2, 0.6]])
    codes = np.array([rng.choice(6, p=symbols[c]) for c in h])
    means = 4.0 * np.eye(3)
    return [codes, rng.normal(means[h], 1.0), 100.0 + rng.normal(2.0 * means[h], 0.5)]


def test_merged_sums_give_the_view_moments():
    """Wine's chemistry in three Gaussian views plus a categorical fourth (a binned feature), in three uneven
    batches: every pair product (squares included) and every projected triple equal those of all the rows."""
    x = load_wine().data
    x = x[np.random.default_rng(0).permutation(x.shape[0])]
    codes = np.digitize(x[:, 0], np.quantile(x[:, 0], [0.25, 0.5, 0.75]))
    views, kinds, sizes = multiview.check_views([x[:, 1:5], x[:, 5:9], x[:, 9:13], codes])
    numeric = multiview._numeric_views(views, kinds, sizes)
    units = [np.abs(v).max() for v in views[:3]] + [1.0]
    scaled = [v / u for v, u in zip(numeric, units)]
    full = with_squares(scaled, [0, 1, 2])
    base = ViewMoments(scaled)

    def sums(rows):
        part = [v[rows] for v in numeric]
        return ViewSums.from_views(part + [p ** 2 for p in part[:3]], 4)

    merged = sums(slice(0, 40)) + sums(slice(40, 41)) + sums(slice(41, None))
    scales = units + [u ** 2 for u in units[:3]]
    rng = np.random.default_rng(1)
    read = merged.moments(scales)
    for a, b in [*combinations(range(7), 2), (3, 0), (6, 1)]:
        Q = rng.normal(size=(read.dims[b], 3))
        expected = full.pairs_matmat(a, b, Q)
        np.testing.assert_allclose(read.pairs_matmat(a, b, Q), expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    read = merged.moments(scales, 4)
    for a, b, c in [*combinations(range(4), 3), (3, 1, 0)]:
        U = [rng.normal(size=(read.dims[v], 2)) for v in (a, b, c)]
        expected = base.projected_triples(a, b, c, *U)
        np.testing.assert_allclose(read.projected_triples(a, b, c, *U), expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())
    assert merged.n == x.shape[0] and read.dims == base.dims


def test_updates_end_at_the_one_fit_on_all_observations(mixed):
    estimate = None
    for rows in np.array_split(np.arange(3000), 5):
        estimate = multiview.update([v[rows] for v in mixed], estimate, k=3, seed=0)
    once = multiview.spectral(mixed, 3, seed=0)
    order = match_components(estimate.params["loc_2"], once.params["loc_2"])
    for name, value in estimate.params.items():
        np.testing.assert_allclose(value, once.params[name][order], rtol=1e-8,
                                   atol=1e-8 * np.abs(once.params[name]).max())
    assert estimate.diagnostics["n_batches"] == 5 and estimate.diagnostics["n_observations"] == 3000


def test_updates_continue_after_save_and_load(mixed, tmp_path):
    first = multiview.update([v[:1000] for v in mixed], k=3)
    rest = [v[1000:] for v in mixed]
    resumed = multiview.update(rest, SpectralEstimate.load(first.save(tmp_path / "online.npz")))
    direct = multiview.update(rest, first)
    np.testing.assert_array_equal(resumed.params["beta_0"], direct.params["beta_0"])
    np.testing.assert_array_equal(resumed.params["scale_2"], direct.params["scale_2"])


def test_update_errors_name_the_argument(mixed, one_mib_budget):
    with pytest.raises(ValueError, match=r"'k' argument of multiview.update must be given for the first batch"):
        multiview.update([v[:100] for v in mixed])
    first = multiview.update([v[:1000] for v in mixed], k=3)
    codes = mixed[0][1000:2000].copy()
    codes[0] = 6
    with pytest.raises(ValueError, match=r"'views\[0\]' argument of multiview.update"):
        multiview.update([codes, *[v[1000:2000] for v in mixed[1:]]], first)
    with pytest.raises(ValueError, match=r"'views' argument of multiview.update must be the estimate's 3 views; "
                                         r"got 4 views"):
        multiview.update([v[1000:2000] for v in mixed] + [mixed[1][1000:2000]], first)
    with pytest.raises(ValueError, match=r"'views' argument of multiview.update must be views of sizes"):
        multiview.update([v[1000:2000] for v in mixed], first, dims=[7, 3, 3])
    with pytest.raises(ValueError, match=r"'estimate' argument of multiview.update must be an estimate that keeps"):
        multiview.update([v[1000:] for v in mixed], multiview.spectral([v[:1000] for v in mixed], 3))
    with pytest.raises(ValueError, match=r"'estimate' argument of multiview.update must be an estimate whose stored "
                                         r"view sums"):
        multiview.update([v[1000:] for v in mixed], replace(first, state={
            key: value for key, value in first.state.items() if key != "moments/triple_0_1_2"}))
    with pytest.raises(MemoryError, match=r"'views' argument .*sums of the views' pairs and triples"):
        multiview.update([np.random.default_rng(0).normal(size=(50, 60)) for _ in range(3)], k=2)


def test_partial_fit_answers_after_every_batch(mixed):
    """The model answers on a few observations that show fewer categories than the fit (sizes from the estimate)."""
    assert mixed[0][:10].max() < 5
    model = SpectralMultiView(3, random_state=0)
    direct = None
    for rows in np.array_split(np.arange(3000), 3):
        batch = [v[rows] for v in mixed]
        model.partial_fit(batch)
        direct = multiview.update(batch, direct, k=3, seed=0)
        assert model.predict([v[:10] for v in mixed]).shape == (10,)
        assert np.isfinite(model.score([v[:10] for v in mixed]))
    np.testing.assert_array_equal(model.estimate_.params["loc_1"], direct.params["loc_1"])
    with pytest.raises(ValueError, match="SpectralMultiView.partial_fit continues a model built by partial_fit"):
        SpectralMultiView(3, random_state=0).fit(mixed).partial_fit(mixed)
