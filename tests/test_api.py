"""Every exported name resolves, and the public contract of DESIGN.md exists."""

import importlib

import pytest

MODULES = [
    "specinit", "specinit.decompose", "specinit.moments", "specinit.population", "specinit.whitening",
    "specinit.recovery", "specinit.estimate", "specinit.warmstart", "specinit.data", "specinit.text",
    "specinit.synthetic", "specinit.models.lda", "specinit.models.single_topic",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_resolve(name):
    module = importlib.import_module(name)
    assert module.__all__, name
    for attr in module.__all__:
        assert hasattr(module, attr), f"{name}.{attr}"


@pytest.mark.parametrize("name", ["lda", "single_topic"])
def test_models_have_program_and_moment_map(name):
    module = importlib.import_module(f"specinit.models.{name}")
    for attr in ("model", "spectral", "spectral_from_moments", "population_moments"):
        assert callable(getattr(module, attr))
