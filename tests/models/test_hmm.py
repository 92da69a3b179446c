"""Tests for specinit.models.hmm: forward algorithm, exact inference, spectral recovery, warm start."""

from __future__ import annotations

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpyro import handlers
from numpyro.infer import log_likelihood
from specinit.models import gaussian_hmm, hmm

from specinit.corpus import load_letter_sequences

from specinit.engine.whitening import IndefiniteMomentError
from tests.conftest import best_permutation


def random_hmm(seed, k, n_symbols):
    """A well-conditioned HMM: sticky chain (diagonal >= 0.7), sparse-ish distinct emission rows."""
    rng = np.random.default_rng(seed)
    init = rng.dirichlet(np.full(k, 2.0))
    transition = 0.7 * np.eye(k) + 0.3 * rng.dirichlet(np.ones(k), size=k)
    emission = rng.dirichlet(np.full(n_symbols, 0.5), size=k)
    return {"init": init, "transition": transition, "emission": emission}


def matched_errors(estimate, truth):
    """Max abs errors of (emission, transition, init) after Hungarian matching on emission L1."""
    perm = best_permutation(truth["emission"], estimate["emission"])  # perm[j] = estimated state matched to true state j
    return (
        np.abs(estimate["emission"][perm] - truth["emission"]).max(),
        np.abs(estimate["transition"][np.ix_(perm, perm)] - truth["transition"]).max(),
        np.abs(estimate["init"][perm] - truth["init"]).max(),
    )


def brute_force(x, params):
    """log p(x), posterior marginals and the best path by enumerating all k^T state paths."""
    init, trans, emis = (np.asarray(params[n], dtype=np.float64) for n in ("init", "transition", "emission"))
    k, T = init.size, len(x)
    total, best, best_path = 0.0, -1.0, None
    marginals = np.zeros((T, k))
    for path in itertools.product(range(k), repeat=T):
        p = init[path[0]] * emis[path[0], x[0]]
        for t in range(1, T):
            p *= trans[path[t - 1], path[t]] * emis[path[t], x[t]]
        total += p
        marginals[np.arange(T), path] += p
        if p > best:
            best, best_path = p, np.array(path)
    return np.log(total), marginals / total, best_path


# ----------------------------------------------------------------------------- forward algorithm


def test_log_prob_matches_brute_force_with_padding():
    params = random_hmm(0, 3, 4)
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 4, size=n) for n in (5, 3, 1)]
    padded, lengths = hmm.pad_sequences(seqs)
    assert padded.shape == (3, 5) and lengths.tolist() == [5, 3, 1]
    padded[1, 3:] = 3  # padding values must not matter
    dist = hmm.CategoricalHMM(params["init"], params["transition"], params["emission"], 5, lengths)
    expected = [brute_force(s, params)[0] for s in seqs]
    # float32 forward pass: ~1e-6 relative error on log-likelihoods of order 1-10.
    np.testing.assert_allclose(np.asarray(dist.log_prob(padded)), expected, rtol=1e-5)
    assert dist.batch_shape == (3,) and dist.event_shape == (5,)


def test_gaussian_log_prob_matches_brute_force():
    init, trans = np.array([0.6, 0.4]), np.array([[0.9, 0.1], [0.3, 0.7]])
    loc, scale = np.array([-1.0, 2.0]), np.array([0.5, 1.5])
    x = np.array([0.3, -1.2, 2.5, 1.0])
    dens = np.exp(-0.5 * ((x[:, None] - loc) / scale) ** 2) / (scale * np.sqrt(2 * np.pi))
    total = 0.0
    for path in itertools.product(range(2), repeat=4):
        p = init[path[0]] * dens[0, path[0]]
        for t in range(1, 4):
            p *= trans[path[t - 1], path[t]] * dens[t, path[t]]
        total += p
    dist = gaussian_hmm.GaussianHMM(init, trans, loc, scale, 4)
    np.testing.assert_allclose(float(dist.log_prob(x)), np.log(total), rtol=1e-5)


def test_marginals_and_viterbi_match_brute_force():
    params = random_hmm(2, 3, 5)
    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, 5, size=n) for n in (6, 2)]
    marginals = hmm.posterior_marginals(seqs, params)
    paths = hmm.viterbi(seqs, params)
    for seq, post, path in zip(seqs, marginals, paths):
        _, post_bf, path_bf = brute_force(seq, params)
        assert post.shape == (seq.size, 3)
        np.testing.assert_allclose(post.sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(post, post_bf, atol=1e-5)
        np.testing.assert_array_equal(path, path_bf)
    single = hmm.posterior_marginals(seqs[0], params)
    np.testing.assert_allclose(single, marginals[0])
    assert hmm.viterbi(seqs[0], params).shape == (6,)


def test_gaussian_marginals_sum_to_one():
    params = {"init": np.array([0.5, 0.5]), "transition": np.array([[0.9, 0.1], [0.2, 0.8]]),
              "loc": np.array([-2.0, 2.0]), "scale": np.array([1.0, 1.0])}
    x = np.array([-2.1, -1.5, 2.2, 1.9, 2.5])
    post = hmm.posterior_marginals(x, params)
    np.testing.assert_allclose(post.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(hmm.viterbi(x, params), [0, 0, 1, 1, 1])


# ----------------------------------------------------------------------------- NumPyro model


def test_model_generates_and_scores_per_sequence():
    # k = 2, V = 6 as in the warm-start test, so the compiled Dirichlet samplers are shared (an
    # unbatched trace is what Predictive runs per draw; Predictive's vmap would compile them again).
    lengths = np.array([4, 7, 2])
    draws = handlers.trace(handlers.seed(hmm.model, 0)).get_trace(k=2, n_symbols=6, lengths=lengths)
    draws = {name: site["value"] for name, site in draws.items() if site["type"] == "sample"}
    assert draws["observations"].shape == (3, 7)
    assert draws["transition"].shape == (2, 2) and draws["emission"].shape == (2, 6)
    obs = np.asarray(draws["observations"])
    assert np.all(obs[0, 4:] == 0) and np.all(obs[2, 2:] == 0) and obs.max() < 6
    post = {name: draws[name][None] for name in ("init", "transition", "emission")}
    ll = log_likelihood(hmm.model, post, obs, k=2, n_symbols=6, lengths=lengths)["observations"]
    assert ll.shape == (1, 3)
    dist = hmm.CategoricalHMM(post["init"][0], post["transition"][0], post["emission"][0], 7, lengths)
    np.testing.assert_allclose(ll[0], dist.log_prob(obs), rtol=1e-6)
    gauss = handlers.trace(handlers.seed(gaussian_hmm.model, 1)).get_trace(obs, k=2, lengths=lengths)
    assert gauss["observations"]["fn"].batch_shape == (3,) and gauss["loc"]["value"].shape == (2,)


# ----------------------------------------------------------------------------- spectral recovery


@pytest.mark.parametrize("k, n_symbols, seed", [(2, 6, 0), (3, 10, 1), (5, 30, 2)])
def test_exact_recovery_from_population_moments(k, n_symbols, seed):
    truth = random_hmm(seed, k, n_symbols)
    moments = hmm.population_moments(**truth)
    # floor=1e-12 keeps the interior projection from moving exact probabilities.
    estimate = hmm.spectral_from_moments(moments, k, seed=seed, floor=1e-12)
    assert estimate.model == "hmm"
    # Exact moments: only float64 round-off through whitening/decomposition (~1e-12); 1e-6 is generous.
    assert max(matched_errors(estimate.params, truth)) < 1e-6


@pytest.mark.parametrize("k, n_symbols, seed", [(2, 6, 0), (3, 10, 1), (5, 30, 2)])
def test_jennrich_exact_recovery_from_population_moments(k, n_symbols, seed):
    truth = random_hmm(seed, k, n_symbols)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = hmm.spectral_from_moments(hmm.population_moments(**truth), k, approach="jennrich", seed=seed,
                                             floor=1e-12)
    assert estimate.diagnostics["approach"] == "jennrich"
    assert max(matched_errors(estimate.params, truth)) < 1e-6


def test_recovery_error_shrinks_with_length():
    truth = random_hmm(0, 3, 10)
    dist = hmm.CategoricalHMM(truth["init"], truth["transition"], truth["emission"], 400_000)
    x = np.asarray(dist.sample(jax.random.PRNGKey(0)))
    for approach in ("symmetric", "jennrich"):
        short = matched_errors(hmm.spectral(x[:20_000], 3, 10, approach=approach).params, truth)
        long = matched_errors(hmm.spectral(x, 3, 10, approach=approach).params, truth)
        # Moment errors scale as 1/sqrt(T): 20x more data -> ~sqrt(20) = 4.5x smaller parameter
        # errors; require 2.5x for emission and transition (init has a single first symbol: not tested).
        assert long[0] < short[0] / 2.5 and long[1] < short[1] / 2.5, (approach, short, long)
        assert long[0] < 0.05 and long[1] < 0.02, (approach, long)




def test_real_letters_fall_back_by_default_and_refine_improves():
    # Raw English letters are far from a 2-state HMM: the symmetrized moment is indefinite. approach="symmetric"
    # refuses; the default ("auto") falls back to the Jennrich path with a warning and says so in the
    # diagnostics; Baum-Welch from there raises the likelihood monotonically.
    sequences = load_letter_sequences()[:150]
    with pytest.raises(IndefiniteMomentError, match="top 2"):
        hmm.spectral(sequences, 2, 27, approach="symmetric")
    with pytest.warns(RuntimeWarning) as record:  # the fallback, and the Jennrich path's misfit warnings
        estimate = hmm.spectral(sequences, 2, 27)
    assert any("fell back to approach='jennrich'" in str(w.message) for w in record)
    assert estimate.diagnostics["fallback"].startswith("jennrich") and estimate.diagnostics["approach"] == "jennrich"
    with pytest.warns(RuntimeWarning, match="did not converge"):
        result = hmm.refine(sequences, estimate, max_iter=5)
    assert result.log_likelihood.size == 6 and result.diagnostics["decreases"] == 0
    # the start and 6 perturbed copies race for at most max_iter steps, then split-merge moves of as many steps;
    # every step is counted
    steps = result.diagnostics["restart_steps"]
    assert steps.shape == (7,) and steps[result.diagnostics["chosen_restart"]] == 5 and steps.max() == 5
    assert result.diagnostics["restart_iterations"] == steps.sum() - 5
    assert result.n_iter == 5 + result.diagnostics["restart_iterations"] + result.diagnostics["split_merge_iterations"]
    assert np.all(np.diff(result.log_likelihood) > 0)
    assert result.estimate.params["emission"].shape == (2, 27)


def test_refine_matches_hmmlearn_on_a_tiny_case():
    from hmmlearn import hmm as hmmlearn

    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, 4, size=n) for n in (6, 9, 3, 1)]
    start = random_hmm(4, 2, 4)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        ours = hmm.refine(seqs, start, max_iter=3, restarts=0, accelerate=False)
    model = hmmlearn.CategoricalHMM(2, n_iter=3, tol=0.0, init_params="", params="ste", n_features=4)
    model.startprob_, model.transmat_, model.emissionprob_ = start["init"], start["transition"], start["emission"]
    X, lengths = np.concatenate(seqs)[:, None], [len(s) for s in seqs]
    np.testing.assert_allclose(ours.log_likelihood[0], model.score(X, lengths), rtol=1e-10)
    model.fit(X, lengths)
    # same Baum-Welch updates in float64 (hmmlearn's default priors add nothing): round-off apart
    np.testing.assert_allclose(ours.params["transition"], model.transmat_, rtol=1e-8)
    np.testing.assert_allclose(ours.params["emission"], model.emissionprob_, rtol=1e-8)
    np.testing.assert_allclose(ours.params["init"], model.startprob_, rtol=1e-8)
    np.testing.assert_allclose(ours.log_likelihood[-1], model.score(X, lengths), rtol=1e-10)


def test_refine_bad_input():
    start = random_hmm(4, 2, 4)
    with pytest.raises(ValueError, match="symbols in 0..3"):
        hmm.refine([np.array([0, 1, 4])], start)
    with pytest.raises(ValueError, match="'estimate' argument of hmm.refine must be the sites .* missing"):
        hmm.refine([np.array([0, 1, 2])], {"init": start["init"]})
    with pytest.raises(ValueError, match="'tol' argument of hmm.refine"):
        hmm.refine([np.array([0, 1, 2])], start, tol=0)


@pytest.fixture(scope="module")
def ragged():
    """400 sequences of lengths 1..200 from one 2-state HMM (one compiled sampler shared by two tests)."""
    truth = random_hmm(4, 2, 6)
    lengths = np.random.default_rng(0).integers(1, 201, 400)
    dist = hmm.CategoricalHMM(truth["init"], truth["transition"], truth["emission"], 200, lengths)
    padded = np.asarray(dist.sample(jax.random.PRNGKey(4)))
    return truth, padded, lengths


def test_spectral_ragged_short_sequences_and_simplex(ragged):
    truth, padded, lengths = ragged
    seqs = [row[:n] for row, n in zip(padded, lengths)]
    estimate = hmm.spectral(seqs, 2, 6)
    d = estimate.diagnostics
    assert d["n_sequences"] == 400 and d["n_short_sequences"] == int(np.sum(lengths < 3))
    assert d["n_triples"] == int(np.sum(np.maximum(lengths - 2, 0)))
    for name in ("init", "transition", "emission"):
        value = estimate.params[name]
        assert np.all(value > 0)
        np.testing.assert_allclose(value.sum(axis=-1), 1.0)
    # 400 sequences, ~40k triples: loose finite-sample tolerance.
    errors = matched_errors(estimate.params, truth)
    assert errors[0] < 0.1 and errors[1] < 0.1 and errors[2] < 0.15


def test_gaussian_spectral_recovers_means():
    init, trans = np.array([0.5, 0.3, 0.2]), np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.2, 0.2, 0.6]])
    loc, scale = np.array([-2.0, 0.0, 2.5]), np.array([0.5, 0.8, 0.6])
    x = np.asarray(gaussian_hmm.GaussianHMM(init, trans, loc, scale, 100_000).sample(jax.random.PRNGKey(0)))
    estimate = gaussian_hmm.spectral(x, 3)
    order = np.argsort(estimate.params["loc"])
    # 1e5 draws: mean errors ~0.02, variance errors a few percent; tolerances ~5x that.
    np.testing.assert_allclose(estimate.params["loc"][order], loc, atol=0.1)
    np.testing.assert_allclose(estimate.params["scale"][order], scale, atol=0.15)
    np.testing.assert_allclose(estimate.params["transition"][np.ix_(order, order)], trans, atol=0.05)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "sequences, k, n_symbols, kind, pattern",
    [
        (np.array([0, 1, 5, 2]), 2, 5, ValueError, "symbols in 0..4"),
        (np.array([0, -1, 2, 2]), 2, 5, ValueError, "non-negative"),
        (np.array([0.0, 1.5, 2.0]), 2, 5, ValueError, "integer symbols"),
        (np.array([], dtype=int), 2, 5, ValueError, "length >= 1"),
        ([], 2, 5, ValueError, "non-empty"),
        ([np.array([0, 1])], 2, 5, ValueError, "length >= 3"),
        (np.array([0, 1, 2, 3]), 6, 5, ValueError, "'k'"),
        (np.array([np.array([0, 1, 2]), np.array([1, 2])], dtype=object), 2, 5, TypeError, "list/tuple"),
        ("0123", 2, 5, TypeError, "list/tuple"),
        ([[0, 1, 2], "ab"], 2, 5, TypeError, "item 1"),
        ([np.zeros((2, 3), dtype=int)], 2, 5, TypeError, "item 0"),
    ],
)
def test_bad_input_names_the_argument(sequences, k, n_symbols, kind, pattern):
    with pytest.raises(kind, match=pattern) as info:
        hmm.spectral(sequences, k, n_symbols)
    assert "hmm.spectral" in str(info.value)


def test_bad_params_for_inference():
    with pytest.raises(TypeError, match="'params'"):
        hmm.viterbi(np.array([0, 1]), {"emission": np.ones((2, 2)) / 2})
    params = random_hmm(0, 2, 3)
    with pytest.raises(ValueError, match="symbols in 0..2"):
        hmm.posterior_marginals(np.array([0, 3]), params)


# ----------------------------------------------------------------------------- warm start


def test_init_params_finite_at_spectral_estimate(ragged):
    _, padded, lengths = ragged
    estimate = hmm.spectral([row[:n] for row, n in zip(padded, lengths)], 2, 6)
    kwargs = {"k": 2, "n_symbols": 6, "lengths": lengths}
    chains = estimate.init_params(hmm.model, 2, jax.random.PRNGKey(0), spread=0.1, model_args=(padded,), model_kwargs=kwargs)
    assert set(chains) == {"init", "transition", "emission"}
    assert all(v.shape[0] == 2 and bool(jnp.all(jnp.isfinite(v))) for v in chains.values())


def _three_blocks():
    """4,000 symbols of a 3-state HMM (each state emits its own pair of the 6 symbols), a start with one state the
    chain never enters (its transitions in and its initial probability at the floor), and the truth."""
    rng = np.random.default_rng(0)
    truth = {"init": np.full(3, 1 / 3), "transition": 0.8 * np.eye(3) + 0.2 / 3,
             "emission": np.kron(np.eye(3), [0.4, 0.4]) + 0.05 * np.kron(1 - np.eye(3), [1.0, 1.0])}
    cum_t, cum_e = np.cumsum(truth["transition"], axis=1), np.cumsum(truth["emission"], axis=1)
    seqs = []
    for _ in range(20):
        h, s = rng.integers(3), np.empty(200, dtype=np.int64)
        for t in range(200):
            h = np.searchsorted(cum_t[h], rng.random(), side="right") if t else h
            s[t] = min(np.searchsorted(cum_e[h], rng.random(), side="right"), 5)
        seqs.append(s)
    tiny = 1e-10
    dead = {"init": np.array([0.5, 0.5 - tiny, tiny]),
            "transition": np.array([[0.6, 0.4 - tiny, tiny], [0.4, 0.6 - tiny, tiny], [0.5, 0.5 - tiny, tiny]]),
            "emission": np.array([[0.3, 0.3, 0.2, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.2, 0.3, 0.3],
                                  np.full(6, 1 / 6)])}
    return seqs, dead, truth


def test_split_merge_move_revives_a_state_the_chain_never_enters():
    seqs, dead, _ = _three_blocks()
    batch = hmm.FAMILY.refine_data(seqs, hmm.FAMILY.estimate(None, dead, {}))
    stats, _ = hmm.FAMILY.e_step(dead, batch)
    moved = hmm.FAMILY.split_merge(dead, batch, stats, np.random.default_rng(0))
    for name in ("init", "transition", "emission"):
        np.testing.assert_allclose(moved[name].sum(axis=-1), 1.0, rtol=1e-12)
    # the unreachable state 2 leaves; the most visited state 0 is split: its outgoing row copied, the moves into it
    # (and its initial probability) shared half and half, its emission row tilted both ways
    np.testing.assert_allclose(moved["transition"][2], moved["transition"][0])
    np.testing.assert_allclose(moved["transition"][:, 0], moved["transition"][:, 2])
    np.testing.assert_allclose(moved["transition"][:2, 0] * 2,
                               dead["transition"][:2, 0] / (1 - dead["transition"][:2, 2]))
    np.testing.assert_allclose(moved["init"], [0.25, 0.5, 0.25], atol=1e-9)
    np.testing.assert_array_equal(moved["emission"][1], dead["emission"][1])
    assert not np.allclose(moved["emission"][0], moved["emission"][2])
    assert hmm.FAMILY.split_merge({"init": [1.0], "transition": [[1.0]], "emission": [dead["emission"][0]]}, batch,
                                  (None, None, stats[2][:1]), np.random.default_rng(0)) is None


def test_default_refine_leaves_an_unreachable_state_and_reaches_the_restart_baseline():
    seqs, dead, truth = _three_blocks()
    # plain EM keeps the state it never enters: it only leaves at once (a point-mass row), and is reported
    with pytest.warns(RuntimeWarning, match=r"hmm.refine: degenerate estimate for k=3: the transition row\(s\) of "
                                            r"state\(s\) \[2\] are \(nearly\) a point mass"):
        plain = hmm.refine(seqs, dead, restarts=0, split_merge=0)
    assert plain.estimate.diagnostics["degenerate/transition_point_mass"].tolist() == [2]
    default = hmm.refine(seqs, dead)
    assert not default.estimate.diagnostics["degenerate/any"]
    moves_only = hmm.refine(seqs, dead, restarts=0)
    assert moves_only.diagnostics["split_merge_accepted"] >= 1
    # the baseline: the best of 3 random starts, plain EM run to the same rule (or its cap: some creep)
    baseline = []
    for seed in range(3):
        rng = np.random.default_rng(100 + seed)
        start = {"init": rng.dirichlet(np.ones(3)), "transition": rng.dirichlet(np.ones(3), size=3),
                 "emission": rng.dirichlet(np.ones(6), size=3)}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            baseline.append(hmm.refine(seqs, start, restarts=0, split_merge=0).log_likelihood[-1])
    # and EM from the parameters that drew the data
    best = max(baseline + [hmm.refine(seqs, truth, restarts=0, split_merge=0).log_likelihood[-1]])
    slack = 1e-7 * abs(best)  # the stopping rule's own tolerance (rtol)
    assert plain.log_likelihood[-1] < best - 100.0  # two states for three blocks of symbols
    assert default.log_likelihood[-1] >= best - slack and moves_only.log_likelihood[-1] >= best - slack
    assert default.log_likelihood[-1] > max(baseline) + 100.0  # random starts end in poorer optima here
    assert default.converged and default.diagnostics["decreases"] == 0


def test_refine_checks_the_new_options():
    start = random_hmm(4, 2, 4)
    seqs = [np.array([0, 1, 2, 3, 1])]
    for name, value in (("rtol", 0.0), ("rtol", 1.0), ("restart_iter", 0), ("split_merge", -1), ("max_iter", -1)):
        with pytest.raises(ValueError, match=f"'{name}' argument of hmm.refine"):
            hmm.refine(seqs, start, **{name: value})
    with pytest.raises(TypeError, match="'rtol' argument of hmm.refine"):
        hmm.refine(seqs, start, rtol="tight")
