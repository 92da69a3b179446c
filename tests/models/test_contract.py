"""The model contract: every module of specinit.models exposes the same four functions and its facts.

For each model, exact parameters -> ``population_moments`` ->
``spectral_from_moments`` recovers them (up to the label permutation), the
estimate is a :class:`SpectralEstimate` whose :class:`ModelFacts` name real
sites of the NumPyro program with component axes of length k, and the
estimate's sites are latent sites of ``model`` with the same shapes.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
import specinit.models

from specinit.estimate import ModelFacts, SpectralEstimate
from specinit.warmstart import latent_sites
from tests.conftest import best_permutation

MODEL_MODULES = sorted(m.name for m in pkgutil.iter_modules(specinit.models.__path__) if not m.name.startswith("_"))

_rng = np.random.default_rng(0)
_K = 3
_BETA = _rng.dirichlet(np.full(8, 0.5), size=_K)
_WEIGHTS = np.array([0.5, 0.3, 0.2])
_TRANSITION = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7]])
_LOC = _rng.normal(size=(_K, 5)) * 3

#: name -> (params, population_moments(...), spectral_from_moments kwargs, model kwargs)
CASES = {
    "lda": (
        {"beta": _BETA, "alpha": _WEIGHTS},
        lambda m: m.population_moments(_BETA, _WEIGHTS),
        {"alpha0": 1.0, "floor": 1e-12},
        {"k": _K, "counts": np.ones((4, 8), dtype=np.int64)},
    ),
    "single_topic": (
        {"beta": _BETA, "weights": _WEIGHTS},
        lambda m: m.population_moments(_BETA, _WEIGHTS),
        {"floor": 1e-12},
        {"k": _K, "counts": np.ones((4, 8), dtype=np.int64)},
    ),
    "hmm": (
        {"init": _WEIGHTS, "transition": _TRANSITION, "emission": _BETA},
        lambda m: m.population_moments(_WEIGHTS, _TRANSITION, _BETA),
        {"floor": 1e-12},
        {"k": _K, "sequences": np.zeros((2, 5), dtype=np.int64), "n_symbols": 8},
    ),
    "gaussian_hmm": (
        {"init": _WEIGHTS, "transition": _TRANSITION, "loc": np.array([-3.0, 0.0, 3.0]), "scale": np.array([0.5, 1.0, 0.7])},
        lambda m: m.population_moments(_WEIGHTS, _TRANSITION, np.array([-3.0, 0.0, 3.0]), np.array([0.5, 1.0, 0.7]), n_bins=12),
        {"floor": 1e-12},
        {"k": _K, "sequences": np.zeros((2, 5))},
    ),
    "gmm": (
        {"weights": _WEIGHTS, "loc": _LOC, "scale": np.array(0.7)},
        lambda m: m.population_moments(_LOC, _WEIGHTS, 0.7),
        {},
        {"k": _K, "x": np.zeros((4, 5))},
    ),
    "multiview": (
        {"weights": _WEIGHTS, "beta_0": _BETA, "loc_1": _LOC, "scale_1": np.full((_K, 5), 0.5), "beta_2": _BETA[::-1]},
        lambda m: m.population_moments(
            {"weights": _WEIGHTS, "beta_0": _BETA, "loc_1": _LOC, "scale_1": np.full((_K, 5), 0.5), "beta_2": _BETA[::-1]},
            ["categorical", "gaussian", "categorical"]),
        {"floor": 1e-12},
        {"k": _K, "views": [np.zeros(4, dtype=np.int64), np.zeros((4, 5)), np.zeros(4, dtype=np.int64)],
         "kinds": ["categorical", "gaussian", "categorical"], "dims": [8, 5, 8]},
    ),
    "factors": (
        {"loadings": _LOC, "shape": np.array([1.0, 4.0, 9.0]), "noise": np.array(0.5), "loc": _LOC[0]},
        lambda m: m.population_moments(_LOC, cumulant="skew", shape=np.array([1.0, 4.0, 9.0]), noise=0.5, loc=_LOC[0]),
        {},
        {"k": _K, "x": np.zeros((4, 5))},
    ),
    # Exact RFF embeddings of Gaussian-mixture components (closed form): weights and conditional embeddings are
    # recovered to round-off; the density and its Gaussian-mixture projection need data, so only "weights" is
    # a parameter of a population estimate (it is also the match site then).
    "kernel_multiview": (
        {"weights": _WEIGHTS},
        lambda m: m.population_moments(
            {"weights": _WEIGHTS, **{f"{site}_{v}": value for v in range(3) for site, value in (
                ("mix", np.full((_K, 2), 0.5)),  # per view: two 2-D Gaussians at +-_LOC[:, v:v+2]
                ("loc", np.stack([_LOC[:, v:v + 2], -_LOC[:, v:v + 2]], axis=1)),
                ("scale", np.full((_K, 2, 2), 0.6)))}},
            rank=32),
        {},
        {"k": _K, "m": 2, "views": [np.zeros((4, 2)) + np.arange(4)[:, None]] * 3},
    ),
}


def test_every_model_module_has_a_contract_case():
    assert MODEL_MODULES and set(MODEL_MODULES) <= set(CASES), sorted(set(MODEL_MODULES) - set(CASES))


@pytest.mark.parametrize("name", MODEL_MODULES)
def test_contract_functions_and_facts(name):
    module = importlib.import_module(f"specinit.models.{name}")
    for attr in ("model", "spectral", "spectral_from_moments", "population_moments"):
        assert callable(getattr(module, attr)), f"{name}.{attr}"
        assert attr in module.__all__, f"{name}.__all__ lacks {attr}"
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.{attr}"


@pytest.mark.parametrize("name", MODEL_MODULES)
def test_population_round_trip_and_facts_match_the_program(name):
    module = importlib.import_module(f"specinit.models.{name}")
    truth, population, options, model_kwargs = CASES[name]
    estimate = module.spectral_from_moments(population(module), _K, seed=0, **options)
    assert isinstance(estimate, SpectralEstimate) and isinstance(estimate.facts, ModelFacts)
    facts = estimate.facts
    assert facts.match_site in estimate.params
    perm = best_permutation(truth[facts.match_site], estimate.params[facts.match_site])
    for site, value in truth.items():
        got = estimate.params[site]
        for axis in np.atleast_1d(facts.component_axes.get(site, ())) if got.ndim else ():
            got = np.take(got, perm, axis=int(axis))
        # exact moments: only round-off (and the numerical bin edges of gaussian_hmm) separate got from truth
        np.testing.assert_allclose(got, value, atol=1e-6, err_msg=f"{name}: {site}")
    shapes = latent_sites(module.model, model_kwargs=model_kwargs)
    for site, value in estimate.params.items():
        assert site in shapes, f"{name}: estimate site {site!r} is not a latent site of the model {sorted(shapes)}"
        assert tuple(shapes[site]) == value.shape, (name, site)
        for axis in np.atleast_1d(facts.component_axes.get(site, ())) if value.ndim else ():
            assert value.shape[int(axis)] == _K, (name, site, axis)
