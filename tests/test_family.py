"""The family contract, over every registered family of specinit.models.

For each family: the same public faces; exact parameters -> ``population_moments`` -> ``spectral_from_moments``
recovers them (up to the label permutation) with ``k`` and every site inside its support; the estimate's sites
are latent sites of the NumPyro program with component axes of length k; an estimate saves and loads exactly
after ``spectral`` and after ``refine``; ``log_likelihood`` scores every observation; the JAX backend equals
NumPy on the same data, a backend that lacks a pass the family needs is refused by name.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.estimate import SpectralEstimate
from specinit.family import Family, family
from specinit.models import FAMILIES
from specinit.warmstart import latent_sites
from tests.conftest import best_permutation, sample_lda, sample_single_topic

_rng = np.random.default_rng(0)
K = 3
_BETA = _rng.dirichlet(np.full(8, 0.5), size=K)
_WEIGHTS = np.array([0.5, 0.3, 0.2])
_TRANSITION = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]])
_LOC = _rng.normal(size=(K, 5)) * 3
_KERNEL = {"weights": _WEIGHTS, **{f"{site}_{v}": value for v in range(3) for site, value in (
    ("mix", np.full((K, 2), 0.5)),  # per view: two 2-D Gaussians at +-_LOC[:, v:v+2]
    ("loc", np.stack([_LOC[:, v:v + 2], -_LOC[:, v:v + 2]], axis=1)),
    ("scale", np.full((K, 2, 2), 0.6)))}}
_MULTIVIEW = {"weights": _WEIGHTS, "beta_0": _BETA, "loc_1": _LOC, "scale_1": np.full((K, 5), 0.5),
              "beta_2": _BETA[::-1]}
_RATES = _rng.gamma(2.0, 2.0, size=(K, 6))

#: name -> (true params, population moments, spectral_from_moments kwargs, model kwargs)
CASES = {
    "lda": ({"beta": _BETA, "alpha": _WEIGHTS}, lambda m: m.population_moments(_BETA, _WEIGHTS),
            {"alpha0": 1.0, "floor": 1e-12}, {"k": K, "counts": np.ones((4, 8), dtype=np.int64)}),
    "single_topic": ({"beta": _BETA, "weights": _WEIGHTS}, lambda m: m.population_moments(_BETA, _WEIGHTS),
                     {"floor": 1e-12}, {"k": K, "counts": np.ones((4, 8), dtype=np.int64)}),
    "hmm": ({"init": _WEIGHTS, "transition": _TRANSITION, "emission": _BETA},
            lambda m: m.population_moments(_WEIGHTS, _TRANSITION, _BETA), {"floor": 1e-12},
            {"k": K, "sequences": np.zeros((2, 5), dtype=np.int64), "n_symbols": 8}),
    "gaussian_hmm": ({"init": _WEIGHTS, "transition": _TRANSITION, "loc": np.array([-3.0, 0.0, 3.0]),
                      "scale": np.array([0.5, 1.0, 0.7])},
                     lambda m: m.population_moments(_WEIGHTS, _TRANSITION, np.array([-3.0, 0.0, 3.0]),
                                                    np.array([0.5, 1.0, 0.7]), n_bins=12),
                     {"floor": 1e-12}, {"k": K, "sequences": np.zeros((2, 5))}),
    "gmm": ({"weights": _WEIGHTS, "loc": _LOC, "scale": np.array(0.7)}, lambda m: m.population_moments(_LOC, _WEIGHTS, 0.7),
            {}, {"k": K, "x": np.zeros((4, 5))}),
    "multiview": (_MULTIVIEW, lambda m: m.population_moments(_MULTIVIEW, ["categorical", "gaussian", "categorical"]),
                  {"floor": 1e-12},
                  {"k": K, "views": [np.zeros(4, dtype=np.int64), np.zeros((4, 5)), np.zeros(4, dtype=np.int64)],
                   "kinds": ["categorical", "gaussian", "categorical"], "dims": [8, 5, 8]}),
    "factors": ({"loadings": _LOC, "shape": np.array([1.0, 4.0, 9.0]), "noise": np.array(0.5), "loc": _LOC[0]},
                lambda m: m.population_moments(_LOC, cumulant="skew", shape=np.array([1.0, 4.0, 9.0]), noise=0.5,
                                               loc=_LOC[0]), {}, {"k": K, "x": np.zeros((4, 5))}),
    # Exact RFF embeddings of Gaussian-mixture components (closed form): the weights and the conditional embeddings
    # are recovered to round-off; the densities need data, so only "weights" is a parameter of a population estimate.
    "kernel_multiview": ({"weights": _WEIGHTS}, lambda m: m.population_moments(_KERNEL, rank=32), {},
                         {"k": K, "m": 2, "views": [np.zeros((4, 2)) + np.arange(4)[:, None]] * 3}),
    "poisson_mixture": ({"weights": _WEIGHTS, "rates": _RATES}, lambda m: m.population_moments(_RATES, _WEIGHTS),
                        {"floor": 1e-12}, {"k": K, "counts": np.zeros((4, 6), dtype=np.int64)}),
}


def _markov(init, transition, n, rng):
    states = np.empty(n, dtype=np.int64)
    states[0] = rng.choice(len(init), p=init)
    for t in range(1, n):
        states[t] = rng.choice(len(init), p=transition[states[t - 1]])
    return states


def _data(name):
    """A small seeded data set drawn from the family's model, and the keyword arguments of its spectral fit."""
    rng = np.random.default_rng(1)
    if name == "lda":
        return sp.csr_matrix(sample_lda(_BETA, _WEIGHTS, 400, 40, 1)[0]), {"alpha0": 1.0}
    if name == "single_topic":
        return sp.csr_matrix(sample_single_topic(_BETA, _WEIGHTS, 400, 30, 1)[0]), {}
    if name == "hmm":
        states = _markov(_WEIGHTS, _TRANSITION, 3000, rng)
        return [np.array([rng.choice(8, p=_BETA[s]) for s in states])], {"n_symbols": 8}
    if name == "gaussian_hmm":
        states = _markov(_WEIGHTS, _TRANSITION, 3000, rng)
        return [np.array([-3.0, 0.0, 3.0])[states] + np.array([0.5, 1.0, 0.7])[states] * rng.normal(size=3000)], {}
    h = rng.choice(K, 1500, p=_WEIGHTS)
    if name == "poisson_mixture":
        return rng.poisson(_RATES[h]), {}
    if name == "gmm":
        return _LOC[h] + 0.7 * rng.normal(size=(1500, 5)), {}
    if name == "multiview":
        cat = [np.array([rng.choice(8, p=row) for row in beta[h]]) for beta in (_BETA, _BETA[::-1])]
        return [cat[0], _LOC[h] + 0.5 * rng.normal(size=(1500, 5)), cat[1]], {}
    if name == "factors":
        shape = np.array([1.0, 4.0, 9.0])
        factors = rng.gamma(shape, 1 / np.sqrt(shape), size=(1500, K)) - np.sqrt(shape)
        return factors @ _LOC + 0.5 * rng.normal(size=(1500, 5)), {}
    if name == "kernel_multiview":
        sign = rng.choice([-1.0, 1.0], size=(1500, 3))
        return [sign[:, v, None] * _LOC[h, v:v + 2] + 0.6 * rng.normal(size=(1500, 2)) for v in range(3)], {"rank": 32}
    raise KeyError(f"no contract data for the family {name!r}: add it to _data")


#: Refinement settings that keep the contract fast (the drivers themselves are tested per family).
REFINE = {"lda": {"num_steps": 5}, "factors": {"num_steps": 5}}


def _quiet(func, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # non-convergence of the short refinements
        return func(*args, **kwargs)


def _module(name):
    return family(name).faces


def test_every_family_has_a_contract_case():
    assert set(FAMILIES) == set(CASES)
    for name in FAMILIES:
        _data(name)


@pytest.mark.parametrize("name", FAMILIES)
def test_faces(name):
    module = _module(name)
    assert isinstance(module.FAMILY, Family) and module.FAMILY.name == name
    faces = ["model", "spectral", "spectral_from_moments", "population_moments", "refine", "log_likelihood"]
    if hasattr(module.FAMILY, "component_log_prob") and name not in ("hmm", "gaussian_hmm", "lda", "factors"):
        faces.append("predict")
    for attr in faces:
        assert callable(getattr(module, attr)), f"{name}.{attr}"
        assert attr in module.__all__, f"{name}.__all__ lacks {attr}"
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.{attr}"


@pytest.mark.parametrize("name", FAMILIES)
def test_population_round_trip_supports_and_sites(name):
    module = _module(name)
    truth, population, options, model_kwargs = CASES[name]
    estimate = module.spectral_from_moments(population(module), K, seed=0, **options)
    assert isinstance(estimate, SpectralEstimate) and estimate.k == K and estimate.model == name
    match = estimate.match_site
    perm = best_permutation(truth[match], estimate.params[match])
    for site, value in truth.items():
        got = estimate.params[site]
        for axis in estimate.sites[site].axes:
            got = np.take(got, perm, axis=axis)
        # exact moments: only round-off (and the numerical bin edges of gaussian_hmm) separate got from truth
        np.testing.assert_allclose(got, value, atol=1e-6, err_msg=f"{name}: {site}")
    shapes = latent_sites(module.model, model_kwargs=model_kwargs)
    for site, value in estimate.params.items():
        support = estimate.sites[site].support
        assert np.all(np.isfinite(value))
        if support in ("simplex", "positive"):
            assert np.all(value > 0), (name, site)
        if support == "simplex":
            np.testing.assert_allclose(value.sum(axis=-1), 1.0, atol=1e-12)
        assert site in shapes, f"{name}: estimate site {site!r} is not a latent site of the model {sorted(shapes)}"
        assert tuple(shapes[site]) == value.shape, (name, site)
        for axis in estimate.sites[site].axes:
            assert value.shape[axis] == K, (name, site, axis)


def _same(a: SpectralEstimate, b: SpectralEstimate):
    assert (a.model, a.k, a.sites, a.match_site, a.vocabulary) == (b.model, b.k, b.sites, b.match_site, b.vocabulary)
    for group in ("params", "state"):
        x, y = getattr(a, group), getattr(b, group)
        assert set(x) == set(y)
        for key in x:
            np.testing.assert_array_equal(x[key], y[key])
    assert set(a.diagnostics) == set(b.diagnostics)
    for key, value in a.diagnostics.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, b.diagnostics[key])
        elif isinstance(value, float) and np.isnan(value):
            assert np.isnan(b.diagnostics[key])
        else:
            assert value == b.diagnostics[key], key


@pytest.mark.parametrize("name", FAMILIES)
def test_spectral_refine_save_load_and_score(name, tmp_path):
    module = _module(name)
    data, options = _data(name)
    estimate = _quiet(module.spectral, data, K, seed=0, **options)
    assert estimate.k == K
    _same(estimate, SpectralEstimate.load(estimate.save(tmp_path / "spectral.npz")))
    result = _quiet(module.refine, data, estimate, **REFINE.get(name, {"max_iter": 3}))
    refined = result.estimate
    assert refined.k == K and refined.diagnostics["refine/method"] == result.method
    assert np.all(np.isfinite(result.log_likelihood))
    for key, value in estimate.diagnostics.items():  # the spectral diagnostics are kept, flat, beside refine/*
        assert key in refined.diagnostics
    _same(refined, SpectralEstimate.load(refined.save(tmp_path / "refined.npz")))
    scores = module.log_likelihood(data, refined)
    assert scores.ndim == 1 and np.all(np.isfinite(scores))


#: Families whose passes run on a backend, and the data passed to both backends.
BACKEND_FAMILIES = ["lda", "single_topic", "hmm", "gaussian_hmm", "gmm", "multiview", "kernel_multiview",
                    "poisson_mixture"]


@pytest.mark.parametrize("name", BACKEND_FAMILIES)
def test_jax_backend_equals_numpy(name):
    module = _module(name)
    data, options = _data(name)
    a = _quiet(module.spectral, data, K, seed=0, backend="numpy", **options)
    b = _quiet(module.spectral, data, K, seed=0, backend="jax", **options)
    for site in a.params:
        # the same float64 sums in another order: the moments agree to ~1e-13; the decomposition (same seed,
        # same start) amplifies that by the tensor's conditioning, here < 1e3
        np.testing.assert_allclose(b.params[site], a.params[site], rtol=1e-9, atol=1e-11, err_msg=f"{name}: {site}")


@pytest.mark.parametrize("name", ["hmm", "gaussian_hmm", "gmm", "multiview", "kernel_multiview", "poisson_mixture"])
def test_a_backend_without_the_passes_is_refused(name):
    module = _module(name)
    data, options = _data(name)
    with pytest.raises(ValueError, match=rf"'backend' argument of {name}.spectral must be a backend implementing "
                                         r"the passes this model needs .*'numba', which lacks gram, triples"):
        module.spectral(data, K, seed=0, backend="numba", **options)


def _as_dask(name, data):
    import dask.array as da

    if name in ("lda", "single_topic"):
        return da.from_array(data, chunks=(150, -1), asarray=False)
    if name == "hmm":
        return da.from_array(data[0], chunks=700)
    return da.from_array(data, chunks=(400, -1))


@pytest.mark.parametrize("name", ["lda", "single_topic", "hmm", "gmm"])
def test_dask_backend_equals_numpy(name):
    import dask

    module = _module(name)
    data, options = _data(name)
    a = _quiet(module.spectral, data, K, seed=0, **options)
    with dask.config.set(scheduler="synchronous"):
        b = _quiet(module.spectral, _as_dask(name, data), K, seed=0, **options)
    for site in a.params:  # block partial sums added in a tree: the same sums in another order
        np.testing.assert_allclose(b.params[site], a.params[site], rtol=1e-9, atol=1e-11, err_msg=f"{name}: {site}")


@pytest.mark.parametrize("name", ["lda", "single_topic"])
def test_numba_backend_equals_numpy(name):
    module = _module(name)
    data, options = _data(name)
    a = _quiet(module.spectral, data, K, seed=0, backend="numpy", **options)
    b = _quiet(module.spectral, data, K, seed=0, backend="numba", **options)
    for site in a.params:
        np.testing.assert_allclose(b.params[site], a.params[site], rtol=1e-9, atol=1e-11, err_msg=f"{name}: {site}")


def test_factors_refuse_a_device_backend():
    data, _ = _data("factors")
    with pytest.raises(ValueError, match="'backend' argument of factors.spectral must be None or 'numpy'"):
        _module("factors").spectral(data, K, backend="jax")


@pytest.mark.parametrize("method", ["anchor", "tpm"])
def test_lda_default_paths_are_the_same_for_memory_chunks_streams_shards_and_dask(method, tmp_path):
    """The anchor path (with its closing EM sweeps), the tensor path's alpha0 choice and the document-topic
    proportions do not depend on how the documents are stored: in memory, as row chunks, as a stream of chunks,
    as .npz shards read block by block, or as a Dask array. Blocks of 37 and 50 rows give the fold-in blocks whose
    documents converge at different steps, so a stopping rule shared by a block would move theta by ~1e-4."""
    import dask
    import dask.array as da

    from specinit.corpus import read_npz_shards, save_npz_shards

    data, _ = _data("lda")
    lda = _module("lda")
    a = _quiet(lda.spectral, data, K, seed=0, method=method)
    chunks = [data[i:i + 37] for i in range(0, data.shape[0], 37)]
    save_npz_shards(data, tmp_path, rows_per_shard=50)
    others = {"chunks": _quiet(lda.spectral, chunks, K, seed=0, method=method),
              "stream": _quiet(lda.spectral, lambda: iter(chunks), K, seed=0, method=method)}
    with dask.config.set(scheduler="synchronous"):
        others["dask"] = _quiet(lda.spectral, da.from_array(data, chunks=(37, -1), asarray=False), K, seed=0,
                                method=method)
        others["shards"] = _quiet(lda.spectral, read_npz_shards(tmp_path), K, seed=0, method=method)
    assert a.params["theta"].shape == (data.shape[0], K)
    for path, other in others.items():
        assert other.diagnostics.get("alpha0") == a.diagnostics.get("alpha0"), path
        np.testing.assert_array_equal(other.diagnostics.get("anchors"), a.diagnostics.get("anchors"), err_msg=path)
        # the same float64 sums in another order (~1e-16), the same per-document fold-in
        for site in ("alpha", "beta", "theta"):
            np.testing.assert_allclose(other.params[site], a.params[site], rtol=0, atol=1e-10, err_msg=path)


@pytest.mark.parametrize("name", FAMILIES)
def test_k_auto_is_exact_on_population_moments(name):
    module = _module(name)
    _, population, options, _ = CASES[name]
    estimate = module.FAMILY.spectral_from_moments(population(module), "auto", seed=0, **options)
    # exact moments: no negative value (a zero noise threshold), at least K signal values (exactly K but for
    # moments with a noise floor, as the factors' covariance), and the eigengap falls after the K-th
    assert estimate.k == K and estimate.diagnostics["k_auto/eigengap_k"] == K
    assert estimate.diagnostics["k_auto/signal"] >= K
    assert estimate.diagnostics["k_auto/signal"] == K or name == "factors"
    assert estimate.diagnostics["k_auto/noise_level"] < 1e-8 * estimate.diagnostics["k_auto/spectrum"][0]


@pytest.mark.parametrize("name", ["lda", "gaussian_hmm", "gmm", "multiview", "factors"])
def test_k_auto_on_samples_with_a_clear_eigengap(name):
    module = _module(name)
    data, options = _data(name)
    options = {key: value for key, value in options.items() if key != "alpha0"}
    if name == "lda":  # data drawn from LDA, topics without anchor words: the tensor path is the consistent one
        options["method"] = "tpm"
    estimate = _quiet(module.spectral, data, "auto", seed=0, **options)
    assert estimate.k == K and estimate.diagnostics["k_auto/chosen"] == K
    assert estimate.diagnostics["k_auto/spectrum"].ndim == 1


def test_noise_edge_sets_isolated_negative_spikes_aside():
    from specinit.family import noise_edge

    assert noise_edge([]) == 0.0 and noise_edge([0.3]) == 0.3
    # one spike (the docstrings' per-document pair moment, relative to its top eigenvalue), a cluster of three
    # (man pages), and a bulk without one (drawn from LDA)
    assert noise_edge([0.297, 0.101, 0.088, 0.074, 0.071, 0.067, 0.064, 0.063]) == 0.101
    assert noise_edge([0.312, 0.296, 0.287, 0.139, 0.093, 0.068, 0.056, 0.051]) == 0.139
    assert noise_edge([0.010, 0.008, 0.008, 0.007, 0.007, 0.006, 0.006, 0.005]) == 0.010
    # a drop deep in the bulk is not a spike boundary (only the first half is read)
    assert noise_edge([0.10, 0.09, 0.08, 0.07, 0.06, 0.05, 0.02, 0.01]) == 0.10


def test_topic_spectrum_counts_signal_past_a_negative_spike():
    """A pair moment whose noise has one large negative direction: the signal values above the rest of the
    noise count, where the largest negative magnitude alone would hide all but the first."""
    from specinit.models import lda

    rng = np.random.default_rng(4)
    V, k = 60, 5
    beta = rng.dirichlet(np.full(V, 0.2), size=k)
    m2 = beta.T @ np.diag([0.4, 0.25, 0.15, 0.12, 0.08]) @ beta
    top = np.linalg.eigvalsh(m2)[-1]
    noise = rng.standard_normal((V, V)) * 1e-3 * top
    spike = rng.standard_normal(V)
    spike /= np.linalg.norm(spike)
    noisy = m2 + (noise + noise.T) / 2 - 0.5 * top * np.outer(spike, spike)

    class Moments:
        n_features = V

        def m2_matmat(self, Q):
            return noisy @ Q

    signal_values = np.sort(np.linalg.eigvalsh(m2))[::-1][:k]
    assert signal_values[-1] < 2 * 0.5 * top  # the spike alone would call the smaller topics noise
    _, report = lda.FAMILY.spectrum_k(Moments(), 10, np.random.default_rng(0))
    assert report["k_auto/signal"] == k
    assert 0 < report["k_auto/noise_level"] < signal_values[-1] < 0.5 * top  # the bulk's edge, not the spike's


def test_toy_family_in_the_family_docstring_runs():
    """The Family docstring builds a complete new family and fits it: 'where a new model goes' is executable."""
    import doctest

    import specinit.family

    result = doctest.testmod(specinit.family, optionflags=doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted >= 15 and result.failed == 0


def _k_checks(call) -> list:
    """Where ``call`` checks an argument named ``k`` (the validation helpers called with ``name="k"``)."""
    import sys

    from specinit import _validation

    seen = []

    def profile(frame, event, arg):
        if (event == "call" and frame.f_code.co_filename == _validation.__file__
                and frame.f_code.co_name in ("check_int", "check") and frame.f_locals.get("name") == "k"):
            seen.append(f"{frame.f_back.f_code.co_filename}:{frame.f_back.f_lineno}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_k_is_validated_once_along_a_call_and_the_engine_still_checks_its_own_entry():
    from specinit.engine.decompose import decompose
    from specinit.models import gmm, hmm, lda

    rng = np.random.default_rng(0)
    from specinit.synthetic import sample_lda as draw_lda

    X = draw_lda(300, 40, 3, alpha=0.3, doc_length=40, seed=0).counts
    x = np.concatenate([rng.normal(size=(200, 4)) + 4 * i for i in range(3)])
    sequences = rng.integers(0, 5, size=(20, 50))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in (lambda: lda.spectral(X, 3), lambda: lda.spectral(X, 3, method="tpm"),
                     lambda: hmm.spectral(sequences, 2, 5), lambda: gmm.spectral(x, 3)):
            assert 1 <= len(_k_checks(call)) <= 2
    # called by the user, an engine function checks k itself
    with pytest.raises(ValueError, match="The 'k' argument of tensor_power_method must be at most the tensor size 3"):
        decompose(np.zeros((3, 3, 3)), 4)
    with pytest.raises(TypeError, match="'k'"):
        decompose(np.zeros((3, 3, 3)), "2")


def test_a_family_lacking_a_required_hook_fails_when_defined_and_abstract_bases_are_exempt():
    from specinit.family import REQUIRED_HOOKS

    assert REQUIRED_HOOKS == (("moments",), ("population_moments",), ("unwhiten", "recover"))

    class Base(Family):  # no name of its own: an abstract base, neither checked nor registered
        def moments(self, data, *, k, backend):
            return data

    with pytest.raises(TypeError, match=r"The family Incomplete \('incomplete_test'\) must implement "
                                        r"population_moments, unwhiten or recover"):
        type("Incomplete", (Base,), {"name": "incomplete_test"})
    with pytest.raises(ValueError, match="'incomplete_test'"):
        family("incomplete_test")


@pytest.mark.parametrize("name", FAMILIES)
def test_what_the_engine_fits_follows_the_moment_protocols(name):
    from specinit.engine.protocols import ExchangeableMoments, MultiViewMoments

    module = _module(name)
    _, population, options, _ = CASES[name]
    fit_moments = module.FAMILY.fit_input(population(module), K, **{key: value for key, value in options.items()
                                                                     if key in module.FAMILY.options})
    protocol = MultiViewMoments if module.FAMILY.kind_of() == "multiview" else ExchangeableMoments
    assert isinstance(fit_moments, protocol)


def test_a_misspelled_option_is_a_type_error_naming_it_at_every_level(tmp_path, capsys):
    from specinit.cli import EXIT_INPUT, main
    from specinit.estimators import SpectralLDA

    lda = _module("lda")
    data, _ = _data("lda")
    with pytest.raises(TypeError, match=r"LDA.spectral got an unexpected keyword argument 'alpah0' \(the options of "
                                        r"the family 'lda': alpha0, "):
        lda.FAMILY.spectral(data, K, alpah0=1.0)
    with pytest.raises(TypeError, match="LDA.spectral_from_moments got an unexpected keyword argument 'alpah0'"):
        lda.FAMILY.spectral_from_moments(CASES["lda"][1](lda), K, alpha0=1.0, alpah0=1.0)
    with pytest.raises(TypeError, match="lda.spectral got an unexpected keyword argument 'alpah0'"):
        lda.spectral(data, K, alpah0=1.0)
    with pytest.raises(TypeError, match="'alpah0'"):
        SpectralLDA(K, alpah0=1.0)
    path = tmp_path / "counts.npz"
    sp.save_npz(path, data)
    assert main(["fit", "lda", str(path), "--k", "3", "--option", "alpah0=1.0"]) == EXIT_INPUT
    assert "lda.spectral got an unexpected keyword argument 'alpah0'" in capsys.readouterr().err


def test_a_family_and_its_public_spectral_take_the_same_default_path():
    lda = _module("lda")
    data, _ = _data("lda")
    a = _quiet(lda.spectral, data, K, seed=0)
    b = _quiet(lda.FAMILY.spectral, data, K, seed=0)
    assert a.diagnostics["method"] == b.diagnostics["method"] == "anchor"
    for site in a.params:
        np.testing.assert_array_equal(a.params[site], b.params[site])
