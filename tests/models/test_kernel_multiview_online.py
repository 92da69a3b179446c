"""Online kernel multi-view mixtures: exact feature sums merged over batches, a support sampled from every
observation, ``kernel_multiview.update`` equal to one update on all the observations, save/load mid-stream, and
``SpectralKernelMultiView.partial_fit``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from specinit.align import match_components
from specinit.engine.views import ViewSums
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralKernelMultiView
from specinit.models import kernel_multiview as km
from tests.models.test_kernel_multiview import errors, sample_planted


@pytest.fixture(scope="module")
def planted():
    return sample_planted(6000, seed=1)


def _streamed(views, splits, **options):
    estimate = None
    for rows in splits:
        estimate = km.update([v[rows] for v in views], estimate, **options)
    return estimate


def test_merged_sums_equal_the_sums_of_all_observations(planted):
    """Three uneven batches: pair and triple sums of the features equal those of all the rows under the first
    batch's maps, and the support is the ``max_support`` rows with the smallest keys of all the rows."""
    views, _ = planted
    splits = [np.arange(0, 700), np.arange(700, 701), np.arange(701, 6000)]
    estimate = _streamed(views, splits, k=3, rank=24, max_support=500, seed=3)
    stored = km.KernelSums.from_arrays({key[len("moments/"):]: value for key, value in estimate.state.items()
                                        if key.startswith("moments/")})
    scaled = [v / unit for v, unit in zip(views, stored.units)]
    whole = ViewSums.from_views([fm.transform(x) for fm, x in zip(stored.features, scaled)], 3)
    assert stored.sums.n == 6000 and estimate.diagnostics["n_observations"] == 6000
    for key, value in whole.pairs.items():
        np.testing.assert_allclose(stored.sums.pairs[key], value, rtol=0, atol=1e-10 * np.abs(value).max())
    for key, value in whole.triples.items():
        np.testing.assert_allclose(stored.sums.triples[key], value, rtol=0, atol=1e-10 * np.abs(value).max())
    # the keys every batch drew: the support is the 500 rows with the smallest, in key order, the same in every view
    keys = np.concatenate([np.random.default_rng(3).spawn(b + 1)[-1].random(rows.size)
                           for b, rows in enumerate(splits, start=1)])
    chosen = np.argsort(keys)[:500]
    np.testing.assert_array_equal(stored.keys, keys[chosen])
    for v in range(3):
        np.testing.assert_array_equal(stored.support[v], scaled[v][chosen])


def test_reservoir_of_batches_is_the_reservoir_of_everything():
    rng = np.random.default_rng(0)
    keys, rows = rng.random(300), np.arange(300.0)
    kept_keys, (kept,) = km.reservoir(keys[:120], [rows[:120]], 50)
    merged_keys, (merged,) = km.reservoir(np.concatenate([kept_keys, keys[120:]]),
                                          [np.concatenate([kept, rows[120:]])], 50)
    once_keys, (once,) = km.reservoir(keys, [rows], 50)
    np.testing.assert_array_equal(merged, once)
    assert np.all(np.diff(once_keys) > 0) and once_keys.size == 50
    small_keys, (small,) = km.reservoir(keys[:10], [rows[:10]], 50)  # fewer rows than the size: all, by key
    np.testing.assert_array_equal(small, rows[:10][np.argsort(keys[:10])])


def test_updates_end_at_one_update_on_all_observations(planted):
    """With the bandwidth given, the feature maps do not depend on the first batch: five batches give the weights
    and conditional embeddings of one update on all the observations (the same moments to rounding)."""
    views, _ = planted
    options = dict(rank=32, bandwidth=[0.6, 0.6, 0.6], max_support=500, seed=0)
    streamed = _streamed(views, np.array_split(np.arange(6000), 5), k=3, **options)
    once = km.update(views, k=3, **options)
    order = match_components(streamed.state["embedding_0"], once.state["embedding_0"])
    np.testing.assert_allclose(streamed.params["weights"], once.params["weights"][order], rtol=1e-8)
    for v in range(3):
        expected = once.state[f"embedding_{v}"][order]
        np.testing.assert_allclose(streamed.state[f"embedding_{v}"], expected, rtol=0,
                                   atol=1e-8 * np.abs(expected).max())
    assert streamed.diagnostics["n_batches"] == 5 and once.diagnostics["n_batches"] == 1


def test_streamed_densities_recover_the_planted_components(planted):
    """Non-Gaussian planted components streamed in four batches: weights and densities as close to the truth as
    one fit on all the observations (measured: weights 0.006 / 0.007, density L1 0.11 / 0.11), labels kept."""
    views, _ = planted
    estimates = []
    for rows in np.array_split(np.arange(6000), 4):
        estimates.append(km.update([v[rows] for v in views], estimates[-1] if estimates else None, k=3, seed=0))
    w_streamed, l1_streamed = errors(estimates[-1])
    w_once, l1_once = errors(km.spectral(views, 3, seed=0))
    assert w_streamed < 0.03 and l1_streamed < l1_once + 0.03 and l1_streamed < 0.2
    # labels kept: each component's density in view 0 stays closest to the one it had a batch before
    grid = np.linspace(-6.0, 8.0, 701)
    before, after = (km.conditional_density(e, 0, grid).T for e in estimates[-2:])
    distances = np.abs(before[:, None] - after[None]).sum(axis=2)
    assert np.all(np.argmin(distances, axis=1) == np.arange(3))


def test_updates_continue_after_save_and_load(planted, tmp_path):
    views, _ = planted
    first = km.update([v[:2000] for v in views], k=3, rank=32, features="nystrom", max_support=500)
    rest = [v[2000:] for v in views]
    resumed = km.update(rest, SpectralEstimate.load(first.save(tmp_path / "online.npz")))
    direct = km.update(rest, first)
    np.testing.assert_array_equal(resumed.params["loc_1"], direct.params["loc_1"])
    np.testing.assert_array_equal(resumed.state["density_weights_2"], direct.state["density_weights_2"])


def test_exchangeable_views_stream():
    """Exchangeable views (one shared map, the symmetric estimator) streamed: the same weights as one update."""
    rng = np.random.default_rng(0)
    h = rng.integers(0, 2, 4000)
    views = [rng.normal(np.where(h == 1, 3.0, 0.0), 1.0)[:, None] for _ in range(3)]
    options = dict(rank=32, bandwidth=1.0, exchangeable=True, max_support=500, seed=0)
    streamed = _streamed(views, np.array_split(np.arange(4000), 4), k=2, **options)
    once = km.update(views, k=2, **options)
    np.testing.assert_allclose(np.sort(streamed.params["weights"]), np.sort(once.params["weights"]), rtol=1e-8)
    np.testing.assert_allclose(np.sort(streamed.params["weights"]), np.sort([np.mean(h == 0), np.mean(h == 1)]),
                               atol=0.05)


def test_update_errors_name_the_argument(planted, one_mib_budget):
    views, _ = planted
    with pytest.raises(ValueError, match=r"'k' argument of kernel_multiview.update must be given for the first"):
        km.update([v[:100] for v in views])
    first = km.update([v[:1000] for v in views], k=3, rank=16)
    batch = [v[1000:2000] for v in views]
    with pytest.raises(ValueError, match=r"'views' argument of kernel_multiview.update must be the estimate's 3 "
                                         r"views of dimensions \[1, 1, 1\]; got 4 views"):
        km.update(batch + [batch[0]], first)
    with pytest.raises(ValueError, match=r"'views' argument .* got 3 views of dimensions \[2, 1, 1\]"):
        km.update([np.hstack([batch[0], batch[1]]), *batch[1:]], first)
    for name, value, kept in (("rank", 32, "16"), ("features", "nystrom", "'rff'"), ("exchangeable", True, "False"),
                              ("max_support", 10, "4000")):
        with pytest.raises(ValueError, match=rf"'{name}' argument of kernel_multiview.update must be None or the "
                                             rf"first batch's {kept}"):
            km.update(batch, first, **{name: value})
    with pytest.raises(ValueError, match=r"'bandwidth' argument of kernel_multiview.update must be None or the "
                                         r"first batch's bandwidths"):
        km.update(batch, first, bandwidth=0.5)
    fixed = km.update([v[:1000] for v in views], k=3, rank=16, bandwidth=[0.5, 0.6, 0.7])
    assert km.update(batch, fixed, bandwidth=[0.5, 0.6, 0.7]).diagnostics["n_batches"] == 2
    with pytest.raises(ValueError, match=r"'estimate' argument of kernel_multiview.update must be an estimate that "
                                         r"keeps"):
        km.update(batch, km.spectral([v[:1000] for v in views], 3, rank=16))
    for damaged in ("moments/support_1", "moments/features_2/omega", "moments/sums/triple_0_1_2"):
        with pytest.raises(ValueError, match=r"'estimate' argument of kernel_multiview.update must be an estimate "
                                             r"whose stored"):
            km.update(batch, replace(first, state={key: value for key, value in first.state.items()
                                                   if key != damaged}))
    bad = dict(first.state)
    bad["moments/features_0/bandwidth"] = -bad["moments/features_0/bandwidth"]
    with pytest.raises(ValueError, match=r"stored feature maps are whole: 'moments/features_0/bandwidth' must be "
                                         r"> 0"):
        km.update(batch, replace(first, state=bad))
    with pytest.raises(MemoryError, match=r"'rank' argument .*\(N, rank\) = \(3000, 16\) features for 3 views"):
        km.update([v[:3000] for v in views], first)  # a later batch's features, checked as the one fit's are
    with pytest.raises(MemoryError, match=r"'rank' argument .*sums of the views' pairs and triples"):
        km.update([v[:100] for v in views], k=2, rank=64)  # features within the budget, the r^3 sums over it


def test_partial_fit_answers_after_every_batch(planted):
    views, h = planted
    model = SpectralKernelMultiView(3, rank=32, max_support=1000, random_state=0)
    direct = None
    for rows in np.array_split(np.arange(6000), 3):
        batch = [v[rows] for v in views]
        model.partial_fit(batch)
        direct = km.update(batch, direct, k=3, rank=32, max_support=1000, seed=0)
        assert model.predict([v[:10] for v in views]).shape == (10,)
        assert np.isfinite(model.score([v[:10] for v in views]))
    np.testing.assert_array_equal(model.estimate_.params["loc_1"], direct.params["loc_1"])
    assert adjusted_rand_score(h, model.predict(views)) > 0.5
    with pytest.raises(ValueError, match="SpectralKernelMultiView.partial_fit continues a model built by partial_fit"):
        SpectralKernelMultiView(3, rank=32, max_support=300, random_state=0).fit(batch).partial_fit(batch)


def test_partial_fit_defers_the_recovery_until_the_model_is_read(planted):
    """Batches streamed in without reading the model are merged only; the first read recovers from all of them:
    the estimate of ``update`` on the last batch after ``defer`` took in the others, which is that of the batches
    given one by one to ``update`` (up to the labels, which the unread stream had no fit to match)."""
    views, _ = planted
    batches = [[v[rows] for v in views] for rows in np.array_split(np.arange(3000), 4)]
    model = SpectralKernelMultiView(3, rank=32, max_support=500, random_state=0)
    for batch in batches:
        model.partial_fit(batch)
        assert "estimate_" not in vars(model) and "labels_" not in vars(model)
    stream = None
    for batch in batches[:-1]:
        stream = km.FAMILY.defer(batch, stream, 3, rank=32, max_support=500, seed=0)
    assert (stream.n_batches, stream.previous) == (3, None)
    direct = km.update(batches[-1], stream, seed=0)
    np.testing.assert_array_equal(model.estimate_.params["weights"], direct.params["weights"])
    assert model.estimate_.diagnostics["n_batches"] == 4 and model.labels_.shape == (750,)
    one_by_one = _streamed([v[:3000] for v in views], np.array_split(np.arange(3000), 4), k=3, rank=32,
                           max_support=500, seed=0)
    order = match_components(one_by_one.state["embedding_0"], direct.state["embedding_0"])
    np.testing.assert_allclose(one_by_one.params["weights"], direct.params["weights"][order], rtol=1e-10)
    np.testing.assert_allclose(one_by_one.state["density_weights_1"], direct.state["density_weights_1"][order],
                               rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match=r"'k' argument .* must be None or the stream's k = 3"):
        km.update(batches[-1], stream, k=2)
