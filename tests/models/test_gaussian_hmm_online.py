"""Online Gaussian HMMs: bin sums over the first batch's edges merged exactly, ``gaussian_hmm.update`` equal to the
moment estimate on all sequences binned alike, save/load mid-stream, and ``SpectralGaussianHMM.partial_fit``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specinit.align import match_components
from specinit.engine.sequences import as_sequences
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralGaussianHMM
from specinit.models import gaussian_hmm
from specinit.models.gaussian_hmm import BinnedSums, binned_moments, quantile_edges

LOC = np.array([-3.0, 0.0, 3.0])


def _sequences(n_sequences, seed, offset=100.0, lengths=(2, 300)):
    """A sticky three-state chain far from zero (the sums of x^2 carry a large mean), lengths 2-300 (some too short
    for a triple)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sequences):
        n = int(rng.integers(*lengths))
        states = np.cumsum(rng.random(n) < 0.1) % 3
        out.append(rng.normal(LOC[states], 1.0) + offset)
    return out


def _one_shot(seqs, first_batch, k=3, seed=0):
    """The moment estimate on all ``seqs`` binned by the quantiles of ``first_batch``."""
    edges = quantile_edges(as_sequences(first_batch, categorical=False), k, None)
    return gaussian_hmm.spectral_from_moments(binned_moments(as_sequences(seqs, categorical=False), edges), k,
                                              seed=seed)


def test_merged_bin_sums_give_the_one_shot_moments():
    """Uneven batches, one of a single short sequence and one shifted beyond the first batch's range: the moments
    read from the merged sums equal those of all the sequences binned by the first batch's edges."""
    seqs = _sequences(50, 0)
    seqs[40:] = [s + 7.0 for s in seqs[40:]]  # outside the first batch's range: the outer bins, exact x sums
    seqs[20] = seqs[20][:2]
    valid = as_sequences(seqs, categorical=False)
    edges = quantile_edges(valid[:20], 3, None)
    merged = BinnedSums.from_sequences(valid[:20], edges)
    for part in (valid[20:21], valid[21:40], valid[40:]):
        merged = merged + BinnedSums.from_sequences(part, edges)
    ours, once = merged.moments(), binned_moments(valid, edges)
    rng = np.random.default_rng(1)
    dims = once.chain.views.dims
    Q = rng.normal(size=(dims[2], 3))
    U = [rng.normal(size=(d, 3)) for d in dims]
    for got, expected in ((ours.extended.pairs_matmat(3, 2, Q), once.extended.pairs_matmat(3, 2, Q)),
                          (ours.chain.views.pairs_matmat(0, 2, Q), once.chain.views.pairs_matmat(0, 2, Q)),
                          (ours.chain.views.projected_triples(0, 1, 2, *U),
                           once.chain.views.projected_triples(0, 1, 2, *U)),
                          (ours.chain.first_mean, once.chain.first_mean)):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    assert ours.variance == pytest.approx(once.variance, rel=1e-12)
    assert ours.chain.counts == once.chain.counts and ours.n_bins == once.n_bins == 10


def test_updates_end_at_the_moment_estimate_on_all_sequences():
    seqs = _sequences(60, 2)
    estimate = None
    for part in (seqs[:20], seqs[20:21], seqs[21:45], seqs[45:]):
        estimate = gaussian_hmm.update(part, estimate, k=3, seed=0)
        assert estimate.k == 3 and np.isfinite(gaussian_hmm.log_likelihood(seqs[:5], estimate)).all()
    once = _one_shot(seqs, seqs[:20])
    order = match_components(estimate.params["loc"], once.params["loc"])
    np.testing.assert_allclose(estimate.params["loc"], once.params["loc"][order], rtol=1e-10)
    np.testing.assert_allclose(estimate.params["scale"], once.params["scale"][order], rtol=1e-8)
    np.testing.assert_allclose(estimate.params["transition"], once.params["transition"][np.ix_(order, order)],
                               atol=1e-10)
    assert estimate.diagnostics["n_batches"] == 4
    np.testing.assert_allclose(np.sort(estimate.params["loc"]), LOC + 100.0, atol=0.3)  # and near the truth


def test_states_keep_their_labels_from_batch_to_batch():
    seqs = _sequences(80, 3)
    previous, estimate = None, None
    for part in np.array_split(np.arange(80), 4):
        estimate = gaussian_hmm.update([seqs[i] for i in part], estimate, k=3, seed=0)
        if previous is not None:
            np.testing.assert_array_equal(match_components(previous, estimate.params["loc"]), np.arange(3))
        previous = estimate.params["loc"]


def test_updates_continue_after_save_and_load(tmp_path):
    seqs = _sequences(40, 4)
    first = gaussian_hmm.update(seqs[:20], k=3, n_bins=12, seed=0)
    resumed = gaussian_hmm.update(seqs[20:], SpectralEstimate.load(first.save(tmp_path / "online.npz")), seed=0)
    direct = gaussian_hmm.update(seqs[20:], first, seed=0)
    for name in ("loc", "scale", "transition"):
        np.testing.assert_array_equal(resumed.params[name], direct.params[name])
    assert resumed.diagnostics["n_bins"] == 12


def test_update_errors_name_the_argument():
    seqs = _sequences(30, 5)
    with pytest.raises(ValueError, match=r"'k' argument of gaussian_hmm.update must be given for the first batch"):
        gaussian_hmm.update(seqs[:10])
    first = gaussian_hmm.update(seqs[:10], k=3, seed=0)
    with pytest.raises(ValueError, match=r"'n_bins' argument of gaussian_hmm.update must be None or the "
                                         r"estimate's n_bins = 10"):
        gaussian_hmm.update(seqs[10:], first, n_bins=12)
    with pytest.raises(ValueError, match=r"'estimate' argument of gaussian_hmm.update must be an estimate that "
                                         r"keeps its moments"):
        gaussian_hmm.update(seqs[10:], gaussian_hmm.spectral(seqs[:10], 3))
    with pytest.raises(TypeError, match=r"'estimate' argument of gaussian_hmm.update must be a 'gaussian_hmm' "
                                        r"SpectralEstimate"):
        gaussian_hmm.update(seqs[10:], {"loc": np.zeros(3)})
    bad = [s.copy() for s in seqs[10:]]
    bad[2][5] = np.nan
    with pytest.raises(ValueError, match=r"'sequences' argument of gaussian_hmm.update"):
        gaussian_hmm.update(bad, first)
    with pytest.raises(ValueError, match=r"'k' argument of gaussian_hmm.update"):
        gaussian_hmm.update(seqs[10:], first, k=11)
    with pytest.raises(ValueError, match=r"'sequences' argument of gaussian_hmm.update must be at least one "
                                         r"sequence of length >= 3"):
        gaussian_hmm.update([np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0, 6.0])[:2]], k=1, n_bins=2)
    with pytest.raises(ValueError, match=r"'estimate' argument of gaussian_hmm.update must be an estimate whose "
                                         r"stored bin sums are whole: 'moments/edges' must be of shape \(9,\); "
                                         r"got shape \(4,\)"):
        gaussian_hmm.update(seqs[10:], replace(first, state={**first.state, "moments/edges": np.zeros(4)}))
    with pytest.raises(ValueError, match=r"'estimate' argument of gaussian_hmm.update must be an estimate whose "
                                         r"stored triple counts"):
        gaussian_hmm.update(seqs[10:], replace(first, state={**first.state, "moments/chain/first": -np.ones(10)}))


def test_update_refuses_counts_over_the_memory_budget(one_mib_budget):
    with pytest.raises(MemoryError, match=r"counts of symbol triples"):
        gaussian_hmm.update(_sequences(5, 6), k=2, n_bins=60)


def test_partial_fit_answers_after_every_batch():
    seqs = _sequences(60, 7)
    model = SpectralGaussianHMM(3, random_state=0)
    direct = None
    for part in (seqs[:20], seqs[20:40], seqs[40:]):
        model.partial_fit(part)
        direct = gaussian_hmm.update(part, direct, k=3, seed=0)
        assert model.predict(seqs[:3])[0].shape == seqs[0].shape and np.isfinite(model.score(seqs[:3]))
    np.testing.assert_array_equal(model.means_, direct.params["loc"])
    assert model.estimate_.diagnostics["n_batches"] == 3
    with pytest.raises(ValueError, match="SpectralGaussianHMM.partial_fit continues a model built by partial_fit"):
        SpectralGaussianHMM(3, random_state=0, max_iter=0).fit(seqs).partial_fit(seqs[:5])
