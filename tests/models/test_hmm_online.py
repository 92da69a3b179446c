"""Online HMMs: exact triple counts merged over batches, ``hmm.update`` equal to one fit on all the sequences,
save/load mid-stream, and ``SpectralHMM.partial_fit``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from specinit.align import match_components
from specinit.corpus import LETTERS, load_letter_sequences
from specinit.engine.sequences import TripleCounts, as_sequences, triple_views
from specinit.engine.views import ViewMoments
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralHMM
from specinit.models import hmm


@pytest.fixture(scope="module")
def letters():
    """Real English: letters of 312 standard-library docstring paragraphs (27 symbols), a seeded order."""
    sequences = load_letter_sequences(max_letters=40_000)
    order = np.random.default_rng(0).permutation(len(sequences))
    return [sequences[i] for i in order], len(LETTERS)


def test_merged_counts_give_the_views_moments(letters):
    """Counts of four uneven batches (one symbol never seen, short sequences in the last) against the one-hot views
    of all the sequences over the observed symbols: the same pair products, projected triples and first-symbol
    law."""
    seqs, V = letters
    seqs = [s[s != 5] for s in seqs] + [np.array([3, 4]), np.array([7])]
    batches = [seqs[:40], seqs[40:41], seqs[41:90], seqs[90:]]
    total = TripleCounts.from_sequences(batches[0], V)
    for batch in batches[1:]:
        total = total + TripleCounts.from_sequences(batch, V)
    merged, once = total.chain_views(), triple_views(as_sequences(seqs, categorical=True), V)
    views = ViewMoments(once.views)
    rng = np.random.default_rng(1)
    o = views.dims[0]
    assert merged.views.dims == views.dims and merged.counts == once.counts
    for a, b in ((0, 1), (1, 0), (2, 1), (0, 2)):
        Q = rng.normal(size=(o, 4))
        expected = views.pairs_matmat(a, b, Q)
        np.testing.assert_allclose(merged.views.pairs_matmat(a, b, Q), expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())
    U = [rng.normal(size=(o, 3)) for _ in range(3)]
    for order in ((0, 1, 2), (1, 0, 2), (2, 1, 0)):
        expected = views.projected_triples(*order, *U)
        np.testing.assert_allclose(merged.views.projected_triples(*order, *U), expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(merged.first_mean, once.first_mean, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(merged.symbols, once.symbols)
    assert merged.symbols.size == V - 1 and merged.n_symbols == V


def _sticky_chain(n_sequences, length, seed):
    """Sequences of a sticky two-state chain over six symbols (states switch with probability 0.1)."""
    rng = np.random.default_rng(seed)
    emission = np.array([[0.5, 0.3, 0.1, 0.05, 0.03, 0.02], [0.02, 0.03, 0.05, 0.1, 0.3, 0.5]])
    states = [np.cumsum(rng.random(length) < 0.1) % 2 for _ in range(n_sequences)]
    return [np.array([rng.choice(6, p=emission[h]) for h in path]) for path in states]


@pytest.fixture(scope="module")
def chain():
    return _sticky_chain(120, 60, seed=0), 6


def test_updates_end_at_the_one_fit_on_all_sequences(chain):
    seqs, V = chain
    estimate = None
    for batch in np.array_split(np.arange(len(seqs)), 4):
        estimate = hmm.update([seqs[i] for i in batch], estimate, k=2, n_symbols=V, seed=0)
    once = hmm.spectral(seqs, 2, V, seed=0)
    order = match_components(estimate.params["emission"], once.params["emission"])
    np.testing.assert_allclose(estimate.params["emission"], once.params["emission"][order], rtol=0, atol=1e-8)
    np.testing.assert_allclose(estimate.params["transition"], once.params["transition"][np.ix_(order, order)],
                               rtol=0, atol=1e-8)
    np.testing.assert_allclose(estimate.params["init"], once.params["init"][order], rtol=0, atol=1e-8)
    assert estimate.diagnostics["n_batches"] == 4
    assert estimate.diagnostics["n_triples"] == once.diagnostics["n_triples"]


def test_updates_continue_after_save_and_load(chain, tmp_path):
    seqs, V = chain
    first = hmm.update(seqs[:60], k=2, n_symbols=V)
    resumed = hmm.update(seqs[60:], SpectralEstimate.load(first.save(tmp_path / "online.npz")))
    direct = hmm.update(seqs[60:], first)
    np.testing.assert_array_equal(resumed.params["emission"], direct.params["emission"])


def test_update_errors_name_the_argument(chain):
    seqs, V = chain
    for missing, given in (("k", {"n_symbols": V}), ("n_symbols", {"k": 2})):
        with pytest.raises(ValueError, match=rf"'{missing}' argument of hmm.update must be given for the first batch"):
            hmm.update(seqs[:10], **given)
    first = hmm.update(seqs[:30], k=2, n_symbols=V)
    with pytest.raises(ValueError, match=rf"'n_symbols' argument of hmm.update must be None or the estimate's "
                                         rf"n_symbols = {V}"):
        hmm.update(seqs[30:], first, n_symbols=V + 1)
    with pytest.raises(ValueError, match=r"'sequences' argument of hmm.update must be symbols in 0\.\.5"):
        hmm.update([np.array([1, 2, 30, 4])], first)
    with pytest.raises(ValueError, match=r"'estimate' argument of hmm.update must be an estimate that keeps its "
                                         r"moments"):
        hmm.update(seqs[30:], hmm.spectral(seqs[:30], 2, V))
    with pytest.raises(ValueError, match=r"'sequences' argument of hmm.update must be at least one sequence of "
                                         r"length >= 3"):
        hmm.update([np.array([1, 2])], k=2, n_symbols=V)
    with pytest.raises(ValueError, match=r"'estimate' argument of hmm.update must be an estimate whose stored "
                                         r"triple counts"):
        hmm.update(seqs[30:], replace(first, state={**first.state, "moments/first": -first.state["moments/first"]}))


def test_update_refuses_counts_over_the_memory_budget(chain, one_mib_budget):
    with pytest.raises(MemoryError, match=r"'sequences' argument .*counts of symbol triples"):
        hmm.update(chain[0][:10], k=2, n_symbols=100)


def test_partial_fit_answers_after_every_batch(chain):
    seqs, V = chain
    model = SpectralHMM(2, random_state=0)  # n_symbols read off the first batch
    direct = None
    for batch in (seqs[:30], seqs[30:60], seqs[60:]):
        model.partial_fit(batch)
        direct = hmm.update(batch, direct, k=2, n_symbols=V, seed=0)
        assert len(model.predict(seqs[:3])) == 3 and np.isfinite(model.score(seqs[:5]))
    np.testing.assert_array_equal(model.emissionprob_, direct.params["emission"])
    assert model.estimate_.diagnostics["n_batches"] == 3
    with pytest.raises(ValueError, match="SpectralHMM.partial_fit continues a model built by partial_fit"):
        SpectralHMM(2, random_state=0).fit(seqs[:30]).partial_fit(seqs[30:60])
