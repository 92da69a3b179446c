"""SpectralEstimate: validation and exact save/load round trips (params, diagnostics, model facts)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
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



# ----------------------------------------------------------------------------- files: 0.2, faults, atomic saves
DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name, model, k", [("lda_estimate_0.2.npz", "lda", 3), ("hmm_estimate_0.2.npz", "hmm", 2)])
def test_files_saved_by_0_2_still_load(name, model, k):
    est = SpectralEstimate.load(DATA / name)
    assert est.model == model and est.k == k and est.match_site in est.params
    with np.load(DATA / name, allow_pickle=False) as raw:
        for key in raw.files:
            if key.startswith("param/"):
                np.testing.assert_array_equal(est.params[key[6:]], raw[key])


def test_flat_typed_diagnostics_are_enforced():
    beta, weights = random_instance(2, 5, 0)
    with pytest.raises(TypeError, match="'diagnostics' argument of SpectralEstimate must be flat values"):
        SpectralEstimate("single_topic", {"beta": beta, "weights": weights}, {"spectral": {"nested": 1}})
    with pytest.raises(TypeError, match="dtype object"):
        SpectralEstimate("single_topic", {"beta": beta, "weights": weights}, {"mixed": np.array([1, "a"], object)})
    est = SpectralEstimate("single_topic", {"beta": beta, "weights": weights}, {"tuple": (1, 2), "n": np.int64(3)})
    assert isinstance(est.diagnostics["tuple"], np.ndarray) and est.diagnostics["n"] == 3 and est.k == 2


def _saved(tmp_path) -> Path:
    beta, weights = random_instance(3, 20, 4)
    est = single_topic.spectral_from_moments(single_topic.population_moments(beta, weights), 3)
    return est.save(tmp_path / "good.npz")


def test_load_names_the_file_for_every_kind_of_bad_file(tmp_path):
    good = _saved(tmp_path)
    data = good.read_bytes()
    cases = {
        "empty.npz": b"",
        "text.npz": b"not an estimate at all\n",
        "json.npz": b'{"model": "lda"}',
    }
    for cut in (10, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1):
        cases[f"truncated_{cut}.npz"] = data[:cut]
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ValueError, match=re.escape(repr(str(path)))):
            SpectralEstimate.load(path)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, a=np.arange(3))
    with pytest.raises(ValueError, match="not a specinit estimate"):
        SpectralEstimate.load(foreign)
    with pytest.raises(FileNotFoundError):
        SpectralEstimate.load(tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="must be a regular file .* got the directory"):
        SpectralEstimate.load(tmp_path)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.data())
def test_byte_flips_are_detected_or_harmless(data):
    """A flipped byte either raises the error that names the file or loads the very same estimate."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        good = _saved(Path(tmp))
        original = SpectralEstimate.load(good)
        raw = bytearray(good.read_bytes())
        position = data.draw(st.integers(0, len(raw) - 1))
        raw[position] ^= data.draw(st.integers(1, 255))
        good.write_bytes(bytes(raw))
        try:
            back = SpectralEstimate.load(good)
        except ValueError as exc:
            assert repr(str(good)) in str(exc)
        else:
            for name, value in original.params.items():
                np.testing.assert_array_equal(back.params[name], value)


def test_a_newer_format_is_refused_with_what_to_do(tmp_path):
    good = _saved(tmp_path)
    with np.load(good, allow_pickle=False) as raw:
        arrays = {key: raw[key] for key in raw.files}
    meta = json.loads(str(arrays["meta"]))
    meta["format"] = 99
    arrays["meta"] = np.array(json.dumps(meta))
    newer = tmp_path / "newer.npz"
    np.savez(newer, **arrays)
    with pytest.raises(ValueError, match="written by a newer specinit .* upgrade specinit"):
        SpectralEstimate.load(newer)


def test_a_save_that_fails_midway_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    good = _saved(tmp_path)
    before = good.read_bytes()
    est = SpectralEstimate.load(good)

    def disk_full(handle, **arrays):
        handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez_compressed", disk_full)
    with pytest.raises(OSError, match="could not save the estimate to .*good.npz.*No space left"):
        est.save(good)
    assert good.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["good.npz"]  # no temporary file left behind


def test_save_below_a_regular_file_names_the_target(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    est = SpectralEstimate.load(_saved(tmp_path))
    with pytest.raises(OSError):
        est.save(blocker / "estimate.npz")


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_save_gives_a_new_file_the_umask_mode_and_keeps_an_existing_files_mode(tmp_path, umask):
    import os
    import stat

    est = SpectralEstimate.load(_saved(tmp_path))
    previous = os.umask(umask)
    try:
        est.save(tmp_path / "new.npz")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.npz").stat().st_mode) == 0o666 & ~umask
    (tmp_path / "new.npz").chmod(0o640)
    est.save(tmp_path / "new.npz")  # rewritten, as open(path, "w") would: its mode stays
    assert stat.S_IMODE((tmp_path / "new.npz").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.npz", "new.npz"]


def test_a_vocabulary_of_another_length_than_the_word_axis_is_refused_at_the_fit():
    X = np.random.default_rng(0).poisson(1.0, (50, 20))
    with pytest.raises(ValueError, match=r"'vocabulary' argument of lda.spectral must be 20 words \(the axis 'word' "
                                         r"of 'beta'\); got 1 words"):
        lda.spectral(X, 2, vocabulary=["a"])
