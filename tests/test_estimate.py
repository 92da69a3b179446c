"""SpectralEstimate: validation and exact save/load round trips (params, diagnostics, model facts)."""

from __future__ import annotations

import numpy as np
import pytest
from specinit.models import lda, single_topic

from specinit.engine.decompose import METHODS
from specinit.estimate import SpectralEstimate
from tests.conftest import random_instance


def test_save_load_round_trip(tmp_path):
    beta, weights = random_instance(3, 50, 9)
    est = lda.spectral_from_moments(lda.population_moments(beta, weights), 3, weights.sum())
    est = SpectralEstimate(est.model, dict(est.params), dict(est.diagnostics), vocabulary=[f"w{i}" for i in range(50)],
                           facts=est.facts)
    path = est.save(tmp_path / "fit.npz")
    back = SpectralEstimate.load(path)
    assert back.model == "lda" and back.vocabulary == est.vocabulary and back.facts == est.facts
    assert back.params.keys() == est.params.keys()
    for name in est.params:
        np.testing.assert_array_equal(back.params[name], est.params[name])
        assert back.params[name].dtype == np.float64
    assert back.diagnostics.keys() == est.diagnostics.keys()
    for key, value in est.diagnostics.items():
        if isinstance(value, str):
            assert back.diagnostics[key] == value
        else:
            np.testing.assert_array_equal(np.asarray(back.diagnostics[key]), np.asarray(value))
    assert back.k == 3


def test_estimate_rejects_non_finite():
    with pytest.raises(ValueError, match="non-finite entries in 'beta'"):
        SpectralEstimate("lda", {"beta": np.array([[np.nan, 1.0]])})



@pytest.mark.parametrize("method", METHODS)
def test_save_load_round_trip_every_method(tmp_path, method):
    """Every method's diagnostics (bool/int arrays, floats, strings) survive save/load exactly."""
    beta, weights = random_instance(3, 15, 2)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), 3, method=method)
    back = SpectralEstimate.load(est.save(tmp_path / f"{method}.npz"))
    assert back.model == "single_topic" and back.vocabulary is None
    for name in est.params:
        np.testing.assert_array_equal(back.params[name], est.params[name])
    assert back.diagnostics.keys() == est.diagnostics.keys()
    for key, value in est.diagnostics.items():
        if isinstance(value, str):
            assert back.diagnostics[key] == value
        else:
            np.testing.assert_array_equal(np.asarray(back.diagnostics[key]), np.asarray(value))

