"""Properties every family keeps, checked by Hypothesis (derandomized: the same examples in every run).

* scale: data in other units (times 1e-150 .. 1e150) give the rescaled estimate, to round-off;
* permutation: reordering documents or observations changes nothing but round-off;
* chunking: a corpus as row chunks gives the in-memory estimate;
* support: whatever the data, every returned value is finite and inside its site's support;
* degenerate data (k = 1, N < k, constant or duplicated columns, constant sequences, unused symbols,
  huge counts): a valid estimate or a ValueError naming the argument -- never LinAlgError, never NaN.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specinit.models import factors, gaussian_hmm, gmm, hmm, kernel_multiview, lda, single_topic
from specinit.models import multiview as mv

PROFILE = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return func(*args, **kwargs)


def _blobs(seed, n=400, d=4, k=3):
    rng = np.random.default_rng(seed)
    loc = 4.0 * rng.standard_normal((k, d))
    return loc[rng.choice(k, n)] + rng.standard_normal((n, d))


def _in_support(estimate):
    for name, value in estimate.params.items():
        assert np.all(np.isfinite(value)), name
        support = estimate.sites[name].support
        if support in ("simplex", "positive"):
            assert np.all(value > 0), name
        if support == "simplex":
            np.testing.assert_allclose(value.sum(axis=-1), 1.0, atol=1e-9)


# ----------------------------------------------------------------------------- scale
@PROFILE
@given(power=st.integers(-150, 150), seed=st.integers(0, 2**16))
def test_gmm_is_scale_free(power, seed):
    x = _blobs(seed)
    s = 10.0**power
    a = _quiet(gmm.spectral, x, 3, covariance="spherical", seed=0)
    b = _quiet(gmm.spectral, x * s, 3, covariance="spherical", seed=0)
    np.testing.assert_allclose(b.params["loc"] / s, a.params["loc"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(b.params["scale"] / s, a.params["scale"], rtol=1e-7)
    np.testing.assert_allclose(b.params["weights"], a.params["weights"], rtol=1e-7)
    r = _quiet(gmm.refine, x * s, b, max_iter=5)
    _in_support(r.estimate)
    np.testing.assert_allclose(r.estimate.params["loc"] / s, _quiet(gmm.refine, x, a, max_iter=5).params["loc"],
                               rtol=1e-6, atol=1e-8)


@PROFILE
@given(power=st.integers(-150, 150))
def test_factors_are_scale_free(power):
    rng = np.random.default_rng(3)
    shape = np.array([1.0, 4.0])
    h = rng.gamma(shape, 1 / np.sqrt(shape), size=(2000, 2)) - np.sqrt(shape)
    x = h @ rng.normal(size=(2, 4)) + 0.3 * rng.normal(size=(2000, 4))
    s = 10.0**power
    a = _quiet(factors.spectral, x, 2, seed=0, scores=False)
    b = _quiet(factors.spectral, x * s, 2, seed=0, scores=False)
    for name, unit in (("loadings", s), ("loc", s), ("noise", s), ("shape", 1.0)):
        np.testing.assert_allclose(b.params[name] / unit, a.params[name], rtol=1e-7, atol=1e-9)


@PROFILE
@given(power=st.integers(-150, 150))
def test_gaussian_views_and_sequences_are_scale_free(power):
    rng = np.random.default_rng(5)
    s = 10.0**power
    h = rng.choice(2, 1500)
    views = [h + rng.integers(0, 2, 1500), np.array([[-2.0, 1.0], [2.0, 0.0]])[h] + rng.normal(size=(1500, 2)),
             2 * h + rng.integers(0, 2, 1500)]
    a = _quiet(mv.spectral, views, 2, seed=0)
    b = _quiet(mv.spectral, [views[0], views[1] * s, views[2]], 2, seed=0)
    np.testing.assert_allclose(b.params["loc_1"] / s, a.params["loc_1"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(b.params["scale_1"] / s, a.params["scale_1"], rtol=1e-7)
    seq = np.array([-2.0, 2.0])[(np.arange(3000) // 7) % 2] + rng.normal(size=3000)
    c = _quiet(gaussian_hmm.spectral, seq, 2, seed=0)
    d = _quiet(gaussian_hmm.spectral, seq * s, 2, seed=0)
    np.testing.assert_allclose(d.params["loc"] / s, c.params["loc"], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(d.params["transition"], c.params["transition"], rtol=1e-7)


#: The extreme units: every square (1e300) and cube of raw data would overflow or underflow on the way.
EXTREMES = st.sampled_from([1e150, 1e-150])


def _recorded(call):
    """``call()``'s result and the (category, message) of every warning it issued."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, [(w.category, str(w.message)) for w in caught]


def _in_both_units(unscaled, scaled):
    """Both results; a scale-free fit warns about the same things in any unit (no overflow or underflow)."""
    a, said = _recorded(unscaled)
    b, said_scaled = _recorded(scaled)
    assert said_scaled == said
    return a, b


def _assert_rescaled(scaled, estimate, s, units):
    """Every site of ``scaled`` is the site of ``estimate`` times ``s ** units[name]`` (0 when not listed), to
    1e-8 of the site's largest entry."""
    assert scaled.params.keys() == estimate.params.keys()
    for name, value in estimate.params.items():
        np.testing.assert_allclose(scaled.params[name] / s ** units.get(name, 0), value, rtol=1e-8,
                                   atol=1e-8 * np.abs(value).max(), err_msg=name)


@PROFILE
@given(s=EXTREMES, seed=st.integers(0, 2**16), covariance=st.sampled_from(["common", "spherical", "diag"]))
def test_gmm_at_extreme_scales_equals_the_unscaled_fit_mapped_back(s, seed, covariance):
    x = _blobs(seed)
    a, b = _in_both_units(lambda: gmm.spectral(x, 3, covariance=covariance, seed=0),
                          lambda: gmm.spectral(x * s, 3, covariance=covariance, seed=0))
    units = {"loc": 1, "scale": 1}
    _assert_rescaled(b, a, s, units)
    c, d = _in_both_units(lambda: gmm.refine(x, a, max_iter=3, tol=1e9, split_merge=1).estimate,
                          lambda: gmm.refine(x * s, b, max_iter=3, tol=1e9, split_merge=1).estimate)
    _assert_rescaled(d, c, s, units)


def _mixed_views(seed, n=600):
    rng = np.random.default_rng(seed)
    loc = 3.0 * rng.standard_normal((3, 4))
    h = rng.choice(3, n)
    return [loc[h, :3] + rng.standard_normal((n, 3)), rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1]) + h,
            loc[h] + rng.standard_normal((n, 4))]


@PROFILE
@given(s=EXTREMES, seed=st.integers(0, 2**16))
def test_multiview_at_extreme_scales_equals_the_unscaled_fit_mapped_back(s, seed):
    views = _mixed_views(seed)
    scaled = [views[0] * s, views[1], views[2] / s]  # two Gaussian views in opposite units, a categorical one
    a, b = _in_both_units(lambda: mv.spectral(views, 3, seed=0), lambda: mv.spectral(scaled, 3, seed=0))
    units = {"loc_0": 1, "scale_0": 1, "loc_2": -1, "scale_2": -1}
    _assert_rescaled(b, a, s, units)
    c, d = _in_both_units(lambda: mv.refine(views, a, max_iter=3, tol=1e9).estimate,
                          lambda: mv.refine(scaled, b, max_iter=3, tol=1e9).estimate)
    _assert_rescaled(d, c, s, units)


@settings(PROFILE, max_examples=4)
@given(s=EXTREMES, seed=st.integers(0, 2**16))
def test_kernel_multiview_at_extreme_scales_equals_the_unscaled_fit_mapped_back(s, seed):
    """Bandwidths (median heuristic, cross-validated densities) follow the unit: the estimate, its density
    state and its conditional densities are the unscaled ones mapped back; a column of spread 1e-150 is data,
    not a constant column."""
    rng = np.random.default_rng(seed)
    h = rng.choice(2, 500)
    views = [np.array([[-2.0], [2.0]])[h] + rng.normal(size=(500, 1)) for _ in range(3)]
    a, b = _in_both_units(lambda: kernel_multiview.spectral(views, 2, seed=0, rank=32),
                          lambda: kernel_multiview.spectral([v * s for v in views], 2, seed=0, rank=32))
    _assert_rescaled(b, a, s, {f"{site}_{v}": 1 for site in ("loc", "scale") for v in range(3)})
    for v in range(3):
        for key, unit in (("bandwidth", 1), ("density_support", 1), ("density_bandwidth", 1), ("density_weights", 0)):
            np.testing.assert_allclose(b.state[f"{key}_{v}"] / s**unit, a.state[f"{key}_{v}"], rtol=1e-8, atol=0)
    points = np.linspace(-4.0, 4.0, 9)[:, None]
    np.testing.assert_allclose(kernel_multiview.conditional_density(b, 1, points * s) * s,
                               kernel_multiview.conditional_density(a, 1, points), rtol=1e-8, atol=1e-300)


# ----------------------------------------------------------------------------- permutation and chunking
def _corpus(seed, n=300, V=25):
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(V, 0.3), size=3)
    z = rng.choice(3, n)
    return sp.csr_matrix(np.stack([rng.multinomial(rng.integers(5, 40), beta[i]) for i in z]))


@PROFILE
@given(seed=st.integers(0, 2**16), cut=st.integers(1, 299))
def test_document_order_and_chunking_change_nothing(seed, cut):
    X = _corpus(seed)
    perm = np.random.default_rng(seed + 1).permutation(X.shape[0])
    a = _quiet(single_topic.spectral, X, 3, seed=0)
    b = _quiet(single_topic.spectral, X[perm], 3, seed=0)
    c = _quiet(single_topic.spectral, [X[:cut], X[cut:]], 3, seed=0)
    d = _quiet(lda.spectral, X, 3, alpha0=0.5, seed=0)
    e = _quiet(lda.spectral, X[perm], 3, alpha0=0.5, seed=0)
    for x, y in ((a, b), (a, c), (d, e)):
        for site in ("beta",):
            np.testing.assert_allclose(y.params[site], x.params[site], rtol=1e-8, atol=1e-10)
        _in_support(y)


# ----------------------------------------------------------------------------- support
@PROFILE
@given(seed=st.integers(0, 2**16), k=st.integers(1, 4))
def test_every_returned_value_is_inside_its_support(seed, k):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(rng.poisson(rng.uniform(0.2, 3.0), size=(120, 15)))
    seq = rng.integers(0, 6, 600)
    x = rng.standard_normal((150, 5)) * rng.uniform(0.1, 10.0, 5)
    fits = [
        lambda: lda.spectral(X, k, seed=seed),
        lambda: lda.spectral(X, k, method="anchor", seed=seed),
        lambda: single_topic.spectral(X, k, seed=seed),
        lambda: hmm.spectral(seq, k, 6, seed=seed),
        lambda: gmm.spectral(x, k, covariance="diag", seed=seed),
        lambda: mv.spectral([seq[:150], x, seq[150:300]], k, seed=seed),
    ]
    for fit in fits:
        try:
            estimate = _quiet(fit)
        except ValueError as exc:  # the data may not support k components: a refusal naming the entry and what to try
            assert ".spectral" in str(exc) and ("k" in str(exc) or "argument of" in str(exc)), exc
            continue
        _in_support(estimate)


# ----------------------------------------------------------------------------- degenerate data
_rng = np.random.default_rng(0)
_X = sp.csr_matrix(_rng.poisson(1.0, size=(50, 20)))
_SEQ = _rng.integers(0, 4, 500)
_ROWS = _rng.normal(size=(200, 5))
_VIEWS = [_rng.integers(0, 4, 100), _rng.normal(size=(100, 3)), _rng.integers(0, 5, 100)]
_KVIEWS = [_rng.normal(size=(300, 1)) for _ in range(3)]

#: name -> (call, None for a valid estimate or the start of the expected error message)
DEGENERATE = {
    "lda k=1": (lambda: lda.spectral(_X, 1, alpha0=1.0), None),
    "lda, default alpha0, k=1": (lambda: lda.spectral(_X, 1), None),
    "lda N < k": (lambda: lda.spectral(_X[:3], 5, alpha0=1.0), "The 'k' argument of lda.spectral"),
    "lda anchor N < k": (lambda: lda.spectral(_X[:3], 5, method="anchor"), "The 'k' argument of lda.spectral"),
    "lda empty words": (lambda: lda.spectral(sp.hstack([_X, sp.csr_matrix((50, 3))]).tocsr(), 3, alpha0=1.0), None),
    "lda duplicated words": (lambda: lda.spectral(sp.hstack([_X, _X[:, :3]]).tocsr(), 3), None),
    "lda counts of 1e150": (lambda: lda.spectral(_X * 1e150, 3), "The 'counts' argument of lda.spectral"),
    "single_topic k=1": (lambda: single_topic.spectral(_X, 1), None),
    "single_topic identical documents": (lambda: single_topic.spectral(sp.csr_matrix(np.tile([3, 2, 1, 0], (30, 1))), 2),
                                         "single_topic.spectral: The second moment has only 1 eigenvalue(s)"),
    "hmm k=1": (lambda: hmm.spectral(_SEQ, 1, 4), None),
    "hmm constant sequence": (lambda: hmm.spectral(np.zeros(100, int), 2, 3),
                              "The 'k' argument of hmm.spectral must be at most the number of symbols observed (1 of"),
    "hmm one triple": (lambda: hmm.spectral(np.array([0, 1, 2]), 2, 3), "hmm.spectral: The cross moment"),
    "hmm k above the symbols used": (lambda: hmm.spectral(_rng.integers(0, 2, 300), 3, 5),
                                     "The 'k' argument of hmm.spectral must be at most the number of symbols observed"),
    "hmm refine on a constant sequence": (lambda: hmm.refine(np.zeros(100, int), hmm.spectral(_SEQ, 2, 4)).estimate,
                                          None),
    "gaussian_hmm constant sequence": (lambda: gaussian_hmm.spectral(np.ones(200), 2),
                                       "The 'k' argument of gaussian_hmm.spectral must be <= the smallest dimension"),
    "gaussian_hmm k=1": (lambda: gaussian_hmm.spectral(_rng.normal(size=300), 1), None),
    "gmm k=1": (lambda: gmm.spectral(_ROWS, 1), None),
    "gmm N < k": (lambda: gmm.spectral(_ROWS[:3], 4), "The 'x' argument of gmm.spectral"),
    "gmm constant column": (lambda: gmm.spectral(np.hstack([_ROWS, np.ones((200, 1))]), 2), None),
    "gmm constant data": (lambda: gmm.spectral(np.ones((200, 3)), 2), "The 'x' argument of gmm.spectral"),
    "gmm refine on constant data": (lambda: gmm.refine(np.ones((200, 5)), gmm.spectral(_ROWS, 2)).estimate, None),
    "multiview k=1": (lambda: mv.spectral(_VIEWS, 1), None),
    "multiview N < k": (lambda: mv.spectral([v[:2] for v in _VIEWS], 3), "The 'k' argument of multiview.spectral"),
    "multiview constant Gaussian view": (lambda: mv.spectral([_VIEWS[0], np.ones((100, 3)), _VIEWS[2]], 2),
                                         "multiview.spectral: The cross moment"),
    "factors k=1": (lambda: factors.spectral(_rng.gamma(2, size=(300, 3)), 1), None),
    "factors k=d": (lambda: factors.spectral(_rng.gamma(2, size=(300, 3)), 3), None),
    "factors constant column": (lambda: factors.spectral(np.hstack([_ROWS, np.ones((200, 1))]), 2),
                                "The 'x' argument of factors.spectral"),
    "kernel_multiview k=1": (lambda: kernel_multiview.spectral(_KVIEWS, 1), None),
    "kernel_multiview five observations": (lambda: kernel_multiview.spectral([v[:5] for v in _KVIEWS], 2), None),
}


@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_degenerate_data_give_an_estimate_or_a_clear_error(case):
    call, error = DEGENERATE[case]
    if error is None:
        _in_support(_quiet(call))
    else:
        with pytest.raises(ValueError) as info:
            _quiet(call)
        assert str(info.value).startswith(error), str(info.value)
