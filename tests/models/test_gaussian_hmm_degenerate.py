"""Degenerate HMM estimates: the transition of a sticky chain, the checks of ``hmm.degeneracy`` (diagnostics and one
warning) after ``spectral`` and ``refine`` of both HMM families, and refine's variance floor on real returns."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from specinit.engine.sequences import stationary
from specinit.engine.views import conditional_means
from specinit.estimate import SpectralEstimate
from specinit.models import gaussian_hmm, hmm


def _goog():
    """Google's daily adjusted closing prices 2004-08-19 to 2008-10-14 (1,047 days; matplotlib's sample data)."""
    cbook = pytest.importorskip("matplotlib.cbook")
    return np.asarray(cbook.get_sample_data("goog.npz")["price_data"]["adj_close"], dtype=np.float64)


def _sticky_gaussian(n_sequences, length, seed, offset=0.0):
    """A sticky three-state chain (stays with probability 0.9) emitting N(-3, 1), N(0, 1), N(3, 1) plus offset."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sequences):
        states = np.cumsum(rng.random(length) < 0.1) % 3
        out.append(rng.normal(np.array([-3.0, 0.0, 3.0])[states], 1.0) + offset)
    return out


def _messages(record) -> list:
    return [str(w.message) for w in record]


# ----------------------------------------------------------------------------- the transition of a sticky chain


def test_operator_transition_is_exact_where_the_regression_passes_the_identity():
    """The cause of the identity transition: emission rows estimated 10% too close to their mean. The regression
    T O = E[x_{t+1} | h_t] then has a diagonal above 1 (the simplex projection made it the identity); the observable
    operator of the lag-one and lag-two pairs is exact (k = 2: the shrink only conjugates it)."""
    T = np.array([[0.97, 0.03], [0.06, 0.94]])
    O = np.array([[0.5, 0.3, 0.1, 0.1], [0.1, 0.1, 0.3, 0.5]])
    moments = hmm.population_moments(np.array([0.5, 0.5]), T, O)
    w = stationary(T)
    shrunk = 0.9 * O + 0.1 * (w @ O)
    regression, _ = hmm.solve_rows(shrunk, conditional_means(moments.views, 2, 1, shrunk, w))
    assert np.all(np.diag(regression) > 1.0)  # past the identity: projected onto it
    np.testing.assert_allclose(hmm.operator_transition(moments.views, shrunk), T, atol=1e-12)
    np.testing.assert_allclose(hmm.operator_transition(moments.views, O), T, atol=1e-12)


def test_real_price_levels_get_a_sticky_transition_not_the_identity():
    """500 daily price levels, k = 2: the regression leaves the simplex past the identity (before the fix the
    estimate was the identity, no warning); the kept operator estimate is sticky but moves, as hmmlearn's fit of
    the same series (diagonal 0.984, 0.987)."""
    levels = _goog()[-500:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # healthy: no warning
        estimate = gaussian_hmm.spectral(levels, 2, seed=0)
    diagnostics = estimate.diagnostics
    assert diagnostics["transition_estimator"] == "operator"
    assert diagnostics["transition_repair_regression"] > diagnostics["transition_repair_operator"]
    diagonal = np.diag(estimate.params["transition"])
    assert np.all((diagonal > 0.97) & (diagonal < 0.999)), diagonal
    assert not diagnostics["degenerate/any"] and diagnostics["degenerate/identity_distance"] > 2e-3


def test_a_chain_that_never_moves_is_reported_as_an_identity_transition():
    """Each sequence stays in one state: nothing in the data says how the chain moves."""
    rng = np.random.default_rng(0)
    seqs = [rng.normal(2.0 if i % 2 else -2.0, 1.0, 100) for i in range(20)]
    with pytest.warns(RuntimeWarning) as record:
        estimate = gaussian_hmm.spectral(seqs, 2, seed=0)
    assert any("gaussian_hmm.spectral: degenerate estimate for k=2: the transition matrix is the identity" in m
               and "diagnostics['degenerate/transition_identity']" in m and "try a smaller k" in m
               for m in _messages(record))
    assert estimate.diagnostics["degenerate/transition_identity"] is True
    assert estimate.diagnostics["degenerate/transition_point_mass"].tolist() == [0, 1]
    assert estimate.diagnostics["degenerate/identity_distance"] < 2e-3


# ----------------------------------------------------------------------------- the checks after spectral


def _gaussian_floor_case():
    """Exact moments of a two-state chain whose second state's scale (0.01) is below the floor's (~0.067)."""
    params = {"init": np.array([0.5, 0.5]), "transition": np.array([[0.9, 0.1], [0.2, 0.8]]),
              "loc": np.array([-2.0, 2.0]), "scale": np.array([1.0, 0.01])}
    return gaussian_hmm.population_moments(params, n_bins=10), 2, "loc", 1


def _emission_floor_case():
    """Exact moments of a categorical HMM whose third state emits symbol 0 only (its other 9 entries below floor/V)."""
    emission = np.array([[0.02, 0.3, 0.3, 0.2, 0.1, 0.02, 0.02, 0.02, 0.01, 0.01],
                         [0.01, 0.01, 0.02, 0.02, 0.02, 0.1, 0.2, 0.3, 0.3, 0.02],
                         np.r_[1.0 - 9e-6, np.full(9, 1e-6)]])
    transition = 0.7 * np.eye(3) + 0.1
    return hmm.population_moments(np.full(3, 1 / 3), transition, emission), 3, "emission", 2


def _empty_state_case():
    """Exact moments of a categorical HMM whose third state holds 0.05% of the stationary law."""
    transition = np.array([[0.9, 0.0999, 1e-4], [0.1, 0.8999, 1e-4], [0.5, 0.3, 0.2]])
    emission = np.array([[0.4, 0.4, 0.1, 0.05, 0.05], [0.05, 0.05, 0.1, 0.4, 0.4], [0.1, 0.1, 0.6, 0.1, 0.1]])
    return hmm.population_moments(np.full(3, 1 / 3), transition, emission), 3, "emission", 2


@pytest.mark.parametrize("case, module, key, message", [
    (_gaussian_floor_case, gaussian_hmm, "degenerate/scale_at_floor", "have their scale at the floor"),
    (_emission_floor_case, hmm, "degenerate/emission_at_floor",
     "have all but one symbol of their emission row at the floor"),
    (_empty_state_case, hmm, "degenerate/empty_states", "have (nearly) zero weight"),
])
def test_spectral_reports_the_degenerate_state(case, module, key, message):
    moments, k, match_site, degenerate = case()
    with pytest.warns(RuntimeWarning) as record:
        estimate = module.spectral_from_moments(moments, k, seed=0)
    # the state that is degenerate by construction, found by its (exactly recovered) match site
    truth = moments.extended.means[3][:, 0] if module is gaussian_hmm else moments.views.means[1]
    found = int(np.argmin(np.abs(estimate.params[match_site] - truth[degenerate]).reshape(k, -1).sum(axis=1)))
    assert estimate.diagnostics[key].tolist() == [found]
    assert estimate.diagnostics["degenerate/any"] is True
    expected = f"{module.__name__.split('.')[-1]}.spectral_from_moments: degenerate estimate for k={k}: state(s) " \
               f"[{found}] {message} (diagnostics['{key}'])"
    assert any(m.startswith(expected) and "try a smaller k" in m for m in _messages(record))
    others = [name for name in ("degenerate/scale_at_floor", "degenerate/emission_at_floor",
                                "degenerate/transition_point_mass", "degenerate/empty_states")
              if name != key and name in estimate.diagnostics]
    assert all(estimate.diagnostics[name].size == 0 for name in others)


def test_healthy_estimates_carry_empty_reports_and_no_warning(tmp_path):
    """A sticky three-state chain far from zero (the state variances read about the data's mean), categorical too;
    the reports save and load with the estimate."""
    seqs = _sticky_gaussian(30, 200, 0, offset=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        estimate = gaussian_hmm.spectral(seqs, 3, seed=0)
        refined = gaussian_hmm.refine(seqs, estimate, restarts=0, split_merge=0)
        symbols = [np.digitize(s - 100.0, [-1.5, 1.5]) for s in seqs]
        categorical = hmm.spectral(symbols, 3, 3, seed=0)
    np.testing.assert_allclose(np.sort(estimate.params["loc"]), [97.0, 100.0, 103.0], atol=0.3)
    np.testing.assert_allclose(estimate.params["scale"], 1.0, atol=0.2)
    for fit in (estimate, refined.estimate, categorical):
        report = {key: value for key, value in fit.diagnostics.items() if key.startswith("degenerate/")}
        assert report["degenerate/any"] is False and report["degenerate/transition_identity"] is False
        assert all(value.size == 0 for value in report.values() if isinstance(value, np.ndarray))
    assert "degenerate/scale_at_floor" in estimate.diagnostics and "degenerate/emission_at_floor" in \
        categorical.diagnostics
    estimate.save(tmp_path / "fit.npz")
    loaded = SpectralEstimate.load(tmp_path / "fit.npz")
    for key, value in estimate.diagnostics.items():
        if key.startswith("degenerate/"):
            np.testing.assert_array_equal(loaded.diagnostics[key], value)


# ----------------------------------------------------------------------------- refine


def test_refine_keeps_every_scale_off_the_floor_on_real_returns():
    """The first 500 daily log returns of GOOG, k = 3, from the spectral estimate (whose third state is already at
    the floor, 83% below every return): with the old defaults (variance floor 1e-6 of the data's, no moves) EM
    squeezes that state onto a single return (scale 0.1% of the data's) -- reported; the defaults (floor 1e-3,
    split-merge moves) keep every scale off it, at a higher log-likelihood (hmmlearn's best of 5 starts:
    -1098.19)."""
    returns = 100.0 * np.diff(np.log(_goog()))[:500]
    variance = returns.var()
    with pytest.warns(RuntimeWarning):
        start = gaussian_hmm.spectral(returns, 3, seed=0)
    assert start.diagnostics["degenerate/scale_at_floor"].size == 1
    with pytest.warns(RuntimeWarning) as record:
        old = gaussian_hmm.refine(returns, start, reg=1e-6, split_merge=0, max_iter=40)
    collapsed = old.estimate.diagnostics["degenerate/scale_at_floor"]
    assert collapsed.size == 1 and old.params["scale"][collapsed[0]] < 1e-2 * np.sqrt(variance)
    assert any(f"gaussian_hmm.refine: degenerate estimate for k=3: state(s) [{collapsed[0]}] have their scale at "
               "the floor" in m and "a larger reg" in m for m in _messages(record))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = gaussian_hmm.refine(returns, start)
    assert np.all(new.params["scale"] ** 2 > 2 * gaussian_hmm.REFINE_REG * variance)
    assert np.all(new.params["scale"] > 0.3 * np.sqrt(variance))
    assert not new.estimate.diagnostics["degenerate/any"]
    assert new.log_likelihood[-1] > old.log_likelihood[-1]
    assert new.log_likelihood[-1] > -1099.0  # hmmlearn: -1098.19


def test_refine_replaces_the_start_report_with_its_own():
    """The start's report describes the start; the refined estimate's keys describe the refined values."""
    seqs = _sticky_gaussian(10, 100, 1)
    start = gaussian_hmm.spectral(seqs, 3, seed=0)
    squeezed = {**start.params, "scale": np.array([1.0, 1.0, 1e-3])}
    degenerate = gaussian_hmm.FAMILY.estimate(3, squeezed, {**start.diagnostics, "degenerate/any": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gaussian_hmm.refine(seqs, degenerate, restarts=0, split_merge=0)
    assert result.estimate.diagnostics["degenerate/any"] is False
    assert np.all(result.params["scale"] > 0.5)
