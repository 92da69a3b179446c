"""The refinement drivers: the one likelihood per family against SciPy oracles, the HMM E-step by enumeration,
EM's stopping rule, estimate checks, and refined estimates that save and load."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import norm
from specinit.models import gaussian_hmm, gmm, hmm, single_topic

from specinit.distributions.hmm import CategoricalHMM, GaussianHMM, pad_sequences
from specinit.engine.backends.jax import x64
from specinit.engine import sequences
from specinit.engine.sequences import SequenceBatch, forward_backward
from specinit.family import Family
from specinit.refine import StoppingRule, mixture_e_step
from tests.conftest import sample_single_topic


def test_gaussian_mixture_likelihood_equals_scipy():
    rng = np.random.default_rng(0)
    x, loc, scale = rng.normal(size=(7, 3)), rng.normal(size=(2, 3)), rng.uniform(0.5, 2.0, size=(2, 3))
    expected = np.stack([norm.logpdf(x, loc[i], scale[i]).sum(axis=1) for i in range(2)], axis=1)
    params = {"weights": np.array([0.3, 0.7]), "loc": loc, "scale": scale}
    resp, per_row = mixture_e_step(gmm.FAMILY, params, gmm.FAMILY.refine_data(x, gmm.FAMILY.estimate(2, params, {})),
                                   per_observation=True)
    np.testing.assert_allclose(resp.sum(axis=1), 1.0)
    # the same float64 densities evaluated by JAX and SciPy: round-off only
    np.testing.assert_allclose(per_row, np.logaddexp(expected[:, 0] + np.log(0.3), expected[:, 1] + np.log(0.7)),
                               rtol=1e-12)


def test_host_gaussian_densities_equal_scipy_also_where_the_expansion_overflows():
    from specinit.distributions.mixtures import gaussian_components_host

    rng = np.random.default_rng(1)
    x, loc = rng.normal(size=(6, 3)), rng.normal(size=(2, 3))
    scale = rng.uniform(0.5, 2.0, size=(2, 3))
    expected = np.stack([norm.logpdf(x, loc[i], scale[i]).sum(axis=1) for i in range(2)], axis=1)
    np.testing.assert_allclose(gaussian_components_host(x, loc, scale), expected, rtol=1e-12)
    # scales 1e-160 (collapsed components): x^2 / scale^2 overflows, the differences do not
    tiny, points = np.full((2, 1), 1e-160), loc[[0, 1, 0]]
    got = gaussian_components_host(points, loc, tiny)
    own = -3 * np.log(1e-160) - 1.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(got[[0, 1, 2], [0, 1, 0]], own, rtol=1e-12)
    assert np.all(got[[0, 1, 2], [1, 0, 1]] == -np.inf)


def brute_force_counts(seqs, init, A, E):
    k, V = E.shape
    ll, IC, TC, EC = 0.0, np.zeros(k), np.zeros((k, k)), np.zeros((k, V))
    for s in seqs:
        paths = list(itertools.product(range(k), repeat=len(s)))
        probs = []
        for h in paths:
            p = init[h[0]] * E[h[0], s[0]]
            for t in range(1, len(s)):
                p *= A[h[t - 1], h[t]] * E[h[t], s[t]]
            probs.append(p)
        Z = sum(probs)
        ll += np.log(Z)
        for h, p in zip(paths, probs):
            IC[h[0]] += p / Z
            for t in range(len(s)):
                EC[h[t], s[t]] += p / Z
                if t:
                    TC[h[t - 1], h[t]] += p / Z
    return IC, TC, EC, ll


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "numpy"])
def test_forward_backward_matches_brute_force_on_ragged_sequences(compiled, monkeypatch):
    if not compiled:
        monkeypatch.setattr(sequences, "numba_kernel", lambda name: None)
    rng = np.random.default_rng(1)
    k, V = 3, 4
    init, A, E = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k), size=k), rng.dirichlet(np.ones(V), size=k)
    seqs = [rng.integers(0, V, size=n) for n in (5, 1, 3, 5, 2)]
    batch = SequenceBatch(seqs)
    for rank, i in enumerate(np.argsort([-len(s) for s in seqs], kind="stable")):  # time-major, longest first
        np.testing.assert_array_equal(batch.values[batch.offsets[: len(seqs[i])] + rank], seqs[i])
    init_c, trans_c, gamma, ll = forward_backward(batch, init, A, E.T[batch.values])
    emit_c = np.stack([gamma[batch.values == v].sum(axis=0) for v in range(V)], axis=1)
    for g, e in zip((init_c, trans_c, emit_c, ll), brute_force_counts(seqs, init, A, E)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)  # exact enumeration: round-off only


def test_compiled_and_numpy_forward_backward_agree_on_long_sequences(monkeypatch):
    rng = np.random.default_rng(4)
    k, V = 4, 6
    init, A, E = rng.dirichlet(np.ones(k)), rng.dirichlet(np.ones(k), size=k), rng.dirichlet(np.ones(V), size=k)
    batch = SequenceBatch([rng.integers(0, V, size=n) for n in (3000, 10, 1, 2500)])
    compiled = forward_backward(batch, init, A, E.T[batch.values])
    monkeypatch.setattr(sequences, "numba_kernel", lambda name: None)
    reference = forward_backward(batch, init, A, E.T[batch.values])
    for c, r in zip(compiled, reference):
        np.testing.assert_allclose(c, r, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("module", [hmm, gaussian_hmm], ids=["hmm", "gaussian_hmm"])
def test_numpy_e_step_and_jax_forward_give_the_same_likelihood(module):
    # Baum-Welch runs the NumPy recursion (time-major, no padding); scoring and NumPyro run the JAX forward.
    rng = np.random.default_rng(2)
    k, lengths = 3, (40, 7, 1, 25)
    params = {"init": rng.dirichlet(np.ones(k)), "transition": rng.dirichlet(np.ones(k), size=k)}
    if module is hmm:
        params["emission"] = rng.dirichlet(np.ones(5), size=k)
        seqs = [rng.integers(0, 5, size=n) for n in lengths]
    else:
        params.update(loc=np.array([-2.0, 0.0, 3.0]), scale=np.array([0.5, 1.0, 2.0]))
        seqs = [3.0 * rng.standard_normal(n) for n in lengths]
    estimate = module.FAMILY.estimate(k, params, {})
    _, total = module.FAMILY.e_step(params, module.FAMILY.refine_data(seqs, estimate))
    padded, mask = pad_sequences(seqs, categorical=module is hmm)
    with x64():
        distribution = (CategoricalHMM(params["init"], params["transition"], params["emission"], padded.shape[1], mask)
                        if module is hmm else GaussianHMM(params["init"], params["transition"], params["loc"],
                                                          params["scale"], padded.shape[1], mask))
        per_sequence = np.asarray(distribution.log_prob(jnp.asarray(padded)))
    np.testing.assert_allclose(per_sequence.sum(), total, rtol=1e-12)
    np.testing.assert_allclose(module.log_likelihood(seqs, estimate), per_sequence, rtol=1e-12)


def _blobs(seed=0, n=600):
    rng = np.random.default_rng(seed)
    loc = 4.0 * rng.standard_normal((3, 4))
    return loc[rng.choice(3, n, p=[0.2, 0.3, 0.5])] + rng.standard_normal((n, 4))


def test_em_increases_the_likelihood_stops_on_tol_and_warns_on_max_iter():
    x = _blobs()
    start = gmm.spectral(x, 3, covariance="spherical", seed=0)
    result = gmm.refine(x, start, tol=1e-8, max_iter=500, restarts=0, split_merge=0)
    assert result.converged and result.diagnostics["decreases"] == 0
    assert np.all(np.diff(result.log_likelihood) > -1e-9 * abs(result.log_likelihood[0]))
    assert result.n_iter == result.log_likelihood.size - 1
    assert result.estimate.diagnostics["refine/n_iter"] == result.n_iter
    with pytest.warns(RuntimeWarning, match="did not converge in max_iter=1"):
        gmm.refine(x, start, tol=1e-12, max_iter=1, restarts=0, split_merge=0)


def test_em_relative_windowed_stopping_rule():
    """``window``: the relative rule reads the mean gain of the last ``window`` steps. Where a run stops that
    gain is at most ``rtol * max(|L|, n)``; at no earlier step with a full window were both it and Aitken's
    extrapolation of it that small."""
    from specinit.refine import StoppingRule, em

    x = _blobs()
    start = gmm.spectral(x, 3, covariance="spherical", seed=0)
    rtol, w = 1e-7, 4
    result = em(gmm.FAMILY, x, start, max_iter=500, tol=None, rtol=rtol, window=w, covariance="spherical")
    trace = list(result.log_likelihood)
    rule = StoppingRule(x.shape[0], None, rtol, w, gmm.FAMILY.unit_offset(gmm.FAMILY.refine_data(x, start)))
    assert result.converged and result.n_iter >= w
    assert (trace[-1] - trace[-1 - w]) / w <= rule.threshold(trace[-1])
    assert not any(rule.converged(trace[: i + 1]) for i in range(w, len(trace) - 1))
    with pytest.raises(ValueError, match="'window' argument"):
        em(gmm.FAMILY, x, start, window=0)


def test_refine_checks_its_start_and_never_repairs_it_silently():
    x = _blobs()
    start = gmm.spectral(x, 3, seed=0)
    with pytest.raises(ValueError, match="an estimate of the 'gmm' model"):
        gmm.refine(x, hmm.FAMILY.estimate(2, {"init": [0.5, 0.5], "transition": np.eye(2) * 0.8 + 0.1,
                                              "emission": [[0.5, 0.5], [0.1, 0.9]]}, {}))
    with pytest.raises(TypeError, match="'estimate' argument of gmm.refine"):
        gmm.refine(x, None)
    with pytest.raises(ValueError, match="missing \\['scale'\\]"):
        gmm.refine(x, {"weights": start.params["weights"], "loc": start.params["loc"]})
    bad = {**start.params, "weights": np.array([0.5, 0.6, -0.1])}
    with pytest.raises(ValueError, match="values > 0 for the simplex site 'weights'"):
        gmm.refine(x, bad)
    nan = {**start.params, "loc": np.full_like(start.params["loc"], np.nan)}
    with pytest.raises(ValueError, match="finite values"):
        gmm.refine(x, nan)
    with pytest.raises(ValueError, match="'loc' of shape \\(3, 5\\)"):
        gmm.refine(np.hstack([x, x[:, :1]]), start)


def test_restarts_keep_the_best_candidate_and_never_lose_to_the_plain_start():
    x = _blobs(seed=3)
    start = gmm.spectral(x, 3, covariance="diag", seed=0)
    plain = gmm.refine(x, start, restarts=0, tol=1e-6, max_iter=500)
    several = gmm.refine(x, start, restarts=4, tol=1e-6, max_iter=500)
    lls = several.diagnostics["restart_log_likelihoods"]
    assert lls.shape == (5,) and several.diagnostics["chosen_restart"] == int(np.argmax(lls))
    assert several.estimate.diagnostics["refine/chosen_restart"] == several.diagnostics["chosen_restart"]
    # EM from the best candidate after 20 steps: at least the plain run's likelihood up to its tolerance
    assert several.log_likelihood[-1] >= plain.log_likelihood[-1] - 1e-6 * x.shape[0]
    again = gmm.refine(x, start, restarts=4, tol=1e-6, max_iter=500)
    np.testing.assert_array_equal(again.params["loc"], several.params["loc"])  # seeded


def _planted_local_optimum():
    """Three separated clusters and a start with two components on the first and one wide over the others."""
    rng = np.random.default_rng(5)
    centres = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0]])
    x = centres[rng.choice(3, 900)] + rng.standard_normal((900, 2))
    start = gmm.FAMILY.estimate(3, {"weights": np.array([1 / 6, 1 / 6, 2 / 3]),
                                    "loc": np.array([[-0.5, 0.0], [0.5, 0.0], [6.0, 6.0]]),
                                    "scale": np.array([1.0, 1.0, 6.0])}, {})
    return x, centres, start


def test_split_merge_leaves_the_optimum_with_two_components_on_one_cluster():
    x, centres, start = _planted_local_optimum()
    plain = gmm.refine(x, start, restarts=0, split_merge=0, tol=1e-6, max_iter=500)
    # plain EM keeps a wide component over two clusters
    assert np.min(np.linalg.norm(plain.params["loc"] - centres[1], axis=1)) > 3.0
    moved = gmm.refine(x, start, restarts=0, split_merge=2, tol=1e-6, max_iter=500)
    assert moved.diagnostics["split_merge_accepted"] >= 1
    assert moved.diagnostics["split_merge_moves"] == moved.diagnostics["split_merge_accepted"] + 2
    # one component per cluster, at the cluster's mean up to sampling error (900 rows, unit noise)
    perm = [int(np.argmin(np.linalg.norm(moved.params["loc"] - c, axis=1))) for c in centres]
    assert sorted(perm) == [0, 1, 2]
    np.testing.assert_allclose(moved.params["loc"][perm], centres, atol=0.2)
    truth = gmm.FAMILY.estimate(3, {"weights": np.ones(3) / 3, "loc": centres, "scale": np.ones(3)}, {})
    best = gmm.refine(x, truth, restarts=0, split_merge=0, tol=1e-6, max_iter=500)
    assert moved.mean_log_likelihood == pytest.approx(best.mean_log_likelihood, abs=1e-5)
    assert moved.mean_log_likelihood > plain.mean_log_likelihood + 1.0
    # every step is counted: the kept run's, the replaced run's and the failed moves'
    assert moved.n_iter == moved.log_likelihood.size - 1 + moved.diagnostics["split_merge_iterations"]
    assert moved.estimate.diagnostics["refine/split_merge_accepted"] == moved.diagnostics["split_merge_accepted"]


def test_split_merge_tries_each_distinct_move_once():
    """A Gaussian or single-topic move is set by which component leaves and which is split: with k components
    there are k - 1 of them, and the moves stop there even when ``split_merge`` allows more failures."""
    rng = np.random.default_rng(2)
    x = np.array([[0.0, 0.0], [10.0, 0.0]])[rng.choice(2, 400)] + rng.standard_normal((400, 2))
    result = gmm.refine(x, gmm.spectral(x, 2, covariance="spherical", seed=0), split_merge=4)
    assert result.diagnostics["split_merge_accepted"] == 0
    assert result.diagnostics["split_merge_moves"] == 1
    data = gmm.FAMILY.refine_data(x, result.estimate)
    resp, _ = gmm.FAMILY.e_step(result.params, data)
    assert gmm.FAMILY.split_merge(result.params, data, resp, rng, attempt=0) is not None
    assert gmm.FAMILY.split_merge(result.params, data, resp, rng, attempt=1) is None
    beta = np.kron(np.eye(3), np.full(4, 0.2)) + 0.05 / 3  # each topic: four words of its own, the rest shared
    counts = sp.csr_matrix(sample_single_topic(beta, np.full(3, 1 / 3), 600, 20, 1)[0])
    fit = single_topic.refine(counts, single_topic.spectral(counts, 3, seed=0), split_merge=0).estimate
    data = single_topic.FAMILY.refine_data(counts, fit)
    resp, _ = single_topic.FAMILY.e_step(fit.params, data)
    assert [single_topic.FAMILY.split_merge(fit.params, data, resp, rng, attempt=a) is None
            for a in range(4)] == [False, False, True, True]


def test_split_moves_see_negligible_responsibilities_as_zeros_and_move_as_before(monkeypatch):
    """A component's responsibilities of 1e-307 (subnormal once multiplied by the data) are zeros in the split's
    power iteration: the same move, bit for bit, as with the responsibilities as they were."""
    from specinit import refine

    weights = np.array([1.0, 1e-250, 1e-300, 5e-306, 0.0, 5e-201, 1e-200])
    flushed = refine.without_negligible(weights)
    np.testing.assert_array_equal(flushed, [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1e-200])
    assert flushed.sum() == weights.sum()
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [60.0, 0.0], [0.0, 60.0]])  # far apart: responsibilities down to exp(-700)
    x = centres[rng.choice(3, 600)] + rng.standard_normal((600, 2))
    fit = gmm.refine(x, gmm.spectral(x, 3, covariance="spherical", seed=0), split_merge=0).estimate
    data = gmm.FAMILY.refine_data(x, fit)
    resp, _ = gmm.FAMILY.e_step(fit.params, data)
    assert np.any((resp > 0) & (resp < 1e-300)), "the planted fit has negligible responsibilities"
    moves = []
    for flush in (refine.without_negligible, np.asarray):
        monkeypatch.setattr(refine, "without_negligible", flush)
        moves.append(gmm.FAMILY.split_merge(fit.params, data, resp, np.random.default_rng(0)))
    for name in moves[0]:
        np.testing.assert_array_equal(moves[0][name], moves[1][name])


def test_split_direction_is_the_same_principal_axis_at_any_width(monkeypatch):
    """Rows of at most ``DENSE_AXIS_MAX`` columns take the split component's principal axis from its dense
    covariance, wider ones from power iteration: on a component stretched along one direction both give the same
    move (the two new means swap places when the axis' sign differs), along that direction."""
    rng = np.random.default_rng(6)
    direction = np.array([3.0, 4.0, 0.0, 0.0]) / 5
    x = np.vstack([0.3 * rng.standard_normal((500, 4)) + 4.0 * rng.standard_normal((500, 1)) * direction,
                   rng.standard_normal((300, 4)) + 20.0])
    start = gmm.FAMILY.estimate(3, {"weights": np.array([0.6, 0.3, 0.1]), "loc": np.array(
        [np.zeros(4), np.full(4, 20.0), np.full(4, 21.0)]), "scale": np.array([2.0, 1.0, 1.0])}, {})
    data = gmm.FAMILY.refine_data(x, start)
    resp, _ = gmm.FAMILY.e_step(start.params, data)
    dense = gmm.FAMILY.split_merge(start.params, data, resp, np.random.default_rng(0))
    monkeypatch.setattr(gmm, "DENSE_AXIS_MAX", 0)
    iterated = gmm.FAMILY.split_merge(start.params, data, resp, np.random.default_rng(0))
    moved = np.flatnonzero(np.any(dense["loc"] != start.params["loc"], axis=1))
    assert moved.size == 2 and 0 in moved
    offset = dense["loc"][moved[0]] - dense["loc"][moved[1]]
    assert abs(offset @ direction) / np.linalg.norm(offset) > 0.999
    swapped = iterated["loc"][moved[::-1]]
    same = min(np.abs(iterated["loc"][moved] - dense["loc"][moved]).max(), np.abs(swapped - dense["loc"][moved]).max())
    assert same < 1e-6
    for name in ("weights", "scale"):
        np.testing.assert_array_equal(dense[name], iterated[name])


def test_restarts_race_by_successive_halving():
    x, _, start = _planted_local_optimum()
    # tol=1e-9: no candidate converges in the race, so every stop is a cut; 5 candidates: rounds of 20 steps
    # after which the better 3, then 2, then 1 stay in
    result = gmm.refine(x, start, restarts=4, split_merge=0, tol=1e-9, max_iter=3000)
    steps, lls = result.diagnostics["restart_steps"], result.diagnostics["restart_log_likelihoods"]
    assert sorted(steps) == [20, 20, 40, 60, 60]
    chosen = result.diagnostics["chosen_restart"]
    assert chosen == int(np.argmax(lls)) and steps[chosen] == 60
    # EM never decreases: a candidate cut earlier ended below every one that stayed longer
    for a, b in itertools.permutations(range(5), 2):
        if steps[a] < steps[b]:
            assert lls[a] <= lls[b]
    assert result.diagnostics["restart_iterations"] == steps.sum() - steps[chosen]
    assert result.n_iter == result.log_likelihood.size - 1 + result.diagnostics["restart_iterations"]
    # the kept run goes on from where its race ended: its trace starts at its own start
    assert result.log_likelihood.size - 1 >= steps[chosen]


def test_relative_stopping_rule_lets_a_climb_finish():
    rule = StoppingRule(100, None, 1e-6)
    base = -1e4
    assert rule.threshold(base) == pytest.approx(1e-2)
    # a log-likelihood near 0 (densities of continuous data): the threshold is rtol per observation
    assert rule.threshold(0.5) == pytest.approx(1e-4)

    def climb(gains):
        return list(base + np.concatenate([[0.0], np.cumsum(gains)]))

    assert not rule.converged(climb([1.0, 0.5]))  # gains above the threshold
    assert not rule.converged(climb([1e-4, 2e-4, 4e-4]))  # small gains that grow: EM leaving a saddle
    assert not rule.converged(climb([1e-3]))  # one small gain: its rate is not known yet
    assert rule.converged(climb([1e-3, 0.0]))  # a fixed point
    # a slow geometric climb (rate 0.99): its last gain is a tenth of the threshold, the ~0.1 still to come is not
    slow = 1e-3 * 0.99 ** np.arange(5)
    assert not rule.converged(climb(slow))
    assert rule.converged(climb(1e-2 * 0.5 ** np.arange(5)))  # last gain and the gain to come: 6.25e-4 each
    # the absolute rule (tol given) reads the last gain per observation only
    absolute = StoppingRule(100, 1e-5)
    assert absolute.converged(climb(slow)) and not absolute.converged(climb([1.0, 2e-3]))


def test_relative_rule_finishes_the_climb_where_an_absolute_tolerance_stops():
    from sklearn.datasets import load_iris

    x = load_iris().data
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    start = gmm.spectral(x, 3, covariance="spherical", seed=0)
    # from this start EM's gains per row fall to 6e-4, then grow to 2e-3 before the climb ends
    absolute = gmm.refine(x, start, tol=1e-3, split_merge=0)
    relative = gmm.refine(x, start, split_merge=0)
    optimum = gmm.refine(x, start, tol=1e-12, max_iter=5000, split_merge=0)
    assert optimum.converged and relative.converged
    assert optimum.mean_log_likelihood - absolute.mean_log_likelihood > 5e-3
    assert optimum.mean_log_likelihood - relative.mean_log_likelihood < 1e-5
    # the run stopped at the first step where the rule held, and at no earlier one
    offset = gmm.FAMILY.unit_offset(gmm.FAMILY.refine_data(x, start))  # the unit-free log-likelihood's shift
    rule = StoppingRule(x.shape[0], None, 1e-6, offset=offset)
    trace = list(relative.log_likelihood)
    assert [rule.converged(trace[: t + 1]) for t in range(1, len(trace))] == [False] * (len(trace) - 2) + [True]


def test_gmm_refine_checks_the_new_options():
    x = _blobs(n=60)
    start = gmm.spectral(x, 3, seed=0)
    for name, value in (("rtol", 0.0), ("rtol", 2.0), ("restart_iter", 0), ("split_merge", -1), ("tol", -1.0)):
        with pytest.raises(ValueError, match=f"'{name}' argument of gmm.refine"):
            gmm.refine(x, start, **{name: value})
    with pytest.raises(TypeError, match="'rtol' argument of gmm.refine"):
        gmm.refine(x, start, rtol=[1e-6])


def test_default_gmm_refine_leaves_the_planted_optimum_for_the_best_of_random_restarts():
    x, centres, start = _planted_local_optimum()
    default = gmm.refine(x, start)
    # the baseline: EM without moves from 3 random rows as means (a forgy start), and from the truth
    rng = np.random.default_rng(0)
    runs = [gmm.refine(x, {"weights": np.ones(3) / 3, "loc": x[rng.choice(len(x), 3, replace=False)],
                           "scale": np.ones(3)}, split_merge=0) for _ in range(3)]
    runs.append(gmm.refine(x, {"weights": np.ones(3) / 3, "loc": centres, "scale": np.ones(3)}, split_merge=0))
    best = max(run.mean_log_likelihood for run in runs)
    assert default.converged
    assert default.mean_log_likelihood >= best - 1e-6 * abs(best)
    assert default.mean_log_likelihood > gmm.refine(x, start, split_merge=0).mean_log_likelihood + 1.0


class _GivenLogProb:
    """A family whose component log-densities are the data themselves."""

    def component_log_prob(self, params, data):
        return data


@pytest.mark.parametrize("scale", [1e-2, 1.0, 30.0, 3e3])
def test_least_needed_component_is_the_merge_with_the_highest_log_likelihood(scale):
    from scipy.special import logsumexp

    from specinit.refine import least_needed_component

    rng = np.random.default_rng(int(scale * 100))
    for n, k in [(1, 2), (7, 2), (300, 3), (500, 8)]:
        log_prob = scale * rng.standard_normal((n, k))
        log_prob[: n // 2, -1] = log_prob[: n // 2, 0]  # ties between components on half the rows
        weights = rng.dirichlet(np.ones(k))
        joint = log_prob + np.log(weights)
        # the direct computation: each component removed, the others' weights renormalized
        scores = [logsumexp(np.delete(joint, j, axis=1), axis=1).sum() - n * np.log1p(-weights[j]) for j in range(k)]
        assert least_needed_component(_GivenLogProb(), {"weights": weights}, log_prob) == int(np.argmax(scores))


class _Halving:
    """A toy EM map ``x -> x / 2`` (a fixed point at 0, linear rate 1/2) with log-likelihood ``-|x|^2``; the
    log-likelihood is NaN within ``poison`` of the fixed point."""

    def __init__(self, poison: float = 0.0):
        self.poison = poison

    def e_step(self, params, prepared):
        x = params["x"]
        return None, (np.nan if np.abs(x).max() < self.poison else -float(np.sum(x**2)))

    def m_step(self, prepared, stats, params):
        return {"x": params["x"] / 2}

    em_step = Family.em_step  # the default: the projected M-step, then the E-step


def _toy_run(family, accelerate=True):
    from specinit.refine import _start_run

    return _start_run(family, None, {"x": np.array([1.0, -2.0])}, accelerate)


def test_squarem_step_lands_on_the_fixed_point_of_a_linear_map():
    from specinit.refine import _accelerated

    run = _toy_run(_Halving())
    _accelerated(_Halving(), None, run, {}, 1e-10, StoppingRule(1, None, 1e-12), {})
    # two EM steps (x/2, x/4); the extrapolation of a linear map's iterates is its fixed point, and an EM step
    # from it stays there
    assert run.extrapolations == 1 and run.rejected == 0
    assert run.trace == [-5.0, -1.25, -0.3125, 0.0]
    np.testing.assert_array_equal(run.params["x"], [0.0, 0.0])
    assert run.n_iter == 3


def test_squarem_step_that_does_not_improve_is_dropped():
    from specinit.refine import _accelerated

    family = _Halving(poison=1e-3)
    run = _toy_run(family)
    _accelerated(family, None, run, {}, 1e-10, StoppingRule(1, None, 1e-12), {})
    # the extrapolated point scores NaN: the run stays at the second EM iterate, the step length shrinks
    assert run.extrapolations == 1 and run.rejected == 1 and run.step_max == 1.0
    assert run.trace == [-5.0, -1.25, -0.3125]
    np.testing.assert_array_equal(run.params["x"], [0.25, -0.5])


def test_extrapolation_stays_in_the_supports():
    from specinit.estimate import Site
    from specinit.refine import _extrapolate

    sites = {"w": Site("simplex"), "s": Site("positive"), "m": Site("real")}
    iterates = [{"w": np.array([0.6, 0.3, 0.1]), "s": np.array([1.0]), "m": np.array([0.0])},
                {"w": np.array([0.5, 0.3, 0.2]), "s": np.array([0.5]), "m": np.array([1.0])},
                {"w": np.array([0.45, 0.3, 0.25]), "s": np.array([0.3]), "m": np.array([1.4])}]
    point, step = _extrapolate(*iterates, sites, step_max=64.0)
    assert 1.0 < step <= 64.0
    assert np.all(point["w"] > 0) and point["w"].sum() == pytest.approx(1.0) and point["s"][0] > 0
    # far beyond the last iterate along the direction of travel, in log coordinates for w and s
    assert point["w"][2] > 0.25 and point["s"][0] < 0.3 and point["m"][0] > 1.4
    # iterates that do not move: no extrapolation
    same, step = _extrapolate(iterates[2], iterates[2], iterates[2], sites, step_max=64.0)
    assert step == 1.0 and same is iterates[2]


def test_squarem_reaches_em_optimum_in_fewer_steps():
    from sklearn.datasets import load_iris

    x = load_iris().data
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    start = gmm.spectral(x, 3, covariance="spherical", seed=0)
    plain = gmm.refine(x, start, split_merge=0, rtol=1e-10)
    fast = gmm.refine(x, start, split_merge=0, rtol=1e-10, accelerate=True)
    assert plain.converged and fast.converged and fast.diagnostics["extrapolations"] > 0
    assert fast.n_iter < 0.6 * plain.n_iter
    assert np.all(np.diff(fast.log_likelihood) >= 0)
    assert fast.log_likelihood[-1] == pytest.approx(plain.log_likelihood[-1], abs=1e-6 * x.shape[0])
    np.testing.assert_allclose(np.sort(fast.params["loc"], axis=0), np.sort(plain.params["loc"], axis=0), atol=1e-4)
