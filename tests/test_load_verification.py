"""SpectralEstimate.load verifies a file against its family's declaration; save leaves no temporary behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from specinit.estimate import SpectralEstimate
from specinit.models import gmm, hmm, lda
from specinit.synthetic import sample_lda
from tests.fuzz_targets import check_loaded

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def online(tmp_path_factory):
    """An LDA estimate from ``lda.update`` (it keeps its pair sums and eigenspace), saved."""
    corpus = sample_lda(n_docs=600, vocab_size=40, k=3, alpha=0.3, doc_length=40, seed=0)
    estimate = lda.update(corpus.counts, None, k=3, seed=0, vocabulary=[f"w{i}" for i in range(40)])
    return estimate, estimate.save(tmp_path_factory.mktemp("online") / "lda.npz")


@pytest.fixture(scope="module")
def fits(online):
    """Saved estimates of three families: LDA with online state, a Gaussian mixture, an HMM."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 1.0], [0.0, 6.0, -1.0]])
    x = centres[rng.integers(0, 3, 900)] + rng.normal(size=(900, 3))
    emission = rng.dirichlet(np.ones(6), size=2)
    transition = np.array([[0.8, 0.2], [0.3, 0.7]])
    chain = hmm.population_moments(np.array([0.5, 0.5]), transition, emission)
    return {"lda": online[0], "gmm": gmm.spectral(x, 3, seed=0), "hmm": hmm.spectral_from_moments(chain, 2)}


def read(path):
    with np.load(path, allow_pickle=False) as raw:
        arrays = {name: raw[name] for name in raw.files}
    return json.loads(str(arrays.pop("meta"))), arrays


def write(path, meta, arrays):
    """A doctored file, its metadata's record of shapes rewritten so that only the doctored field is wrong."""
    meta = dict(meta, arrays={name: {"shape": list(np.shape(v)), "dtype": np.asarray(v).dtype.str}
                              for name, v in arrays.items()})
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
    return path


def refused(path, member):
    with pytest.raises(ValueError) as info:
        SpectralEstimate.load(path)
    message = str(info.value)
    assert repr(str(path)) in message and member in message, message
    return message


def test_the_family_named_in_the_file_declares_the_sites(online, tmp_path):
    meta, arrays = read(online[1])
    refused(write(tmp_path / "other.npz", dict(meta, model="single_topic"), arrays), "sites/alpha")
    refused(write(tmp_path / "unknown.npz", dict(meta, model="no_such_family"), arrays), "metadata 'model'")
    sites = json.loads(json.dumps(meta["sites"]))
    sites["beta"]["support"] = "real"
    beta = arrays["param/beta"].copy()
    beta[0, 0] = -0.5
    doctored = {**arrays, "param/beta": beta}
    message = refused(write(tmp_path / "real.npz", dict(meta, sites=sites), doctored), "metadata 'sites/beta'")
    assert "'real'" in message and "'simplex'" in message
    refused(write(tmp_path / "negative.npz", meta, doctored), "member 'param/beta'")
    refused(write(tmp_path / "short_vocabulary.npz", dict(meta, vocabulary=meta["vocabulary"][:-1]), arrays),
            "metadata 'vocabulary'")
    refused(write(tmp_path / "nope.npz", dict(meta, match_site="nope"), arrays), "metadata 'match_site'")
    refused(write(tmp_path / "evil.npz", meta, {**arrays, "param/../../evil": arrays["param/alpha"]}),
            "member 'param/../../evil'")
    refused(write(tmp_path / "k.npz", dict(meta, k=4), arrays), "member 'param/")
    refused(write(tmp_path / "format.npz", dict(meta, format="two"), arrays), "metadata 'format'")
    missing = {name: value for name, value in arrays.items() if name != "param/alpha"}
    refused(write(tmp_path / "no_alpha.npz", meta, missing), "member 'param/alpha'")


def _pairs_member(arrays):
    return "state/moments/pairs" if "state/moments/pairs" in arrays else "state/moments/pairs_data"


@pytest.mark.parametrize("case, member", [
    ("weighting 7", "state/moments/weighting"),
    ("negative scalars", "state/moments/scalars"),
    ("short scalars", "state/moments/scalars"),
    ("asymmetric pairs", "state/moments/pairs"),
    ("nan word counts", "state/moments/word_counts"),
    ("no m1_sum", "state/moments/m1_sum"),
    ("eigenspace of another V", "eigenspace"),
])
def test_edited_online_state_is_refused_naming_the_member(online, tmp_path, case, member):
    meta, arrays = read(online[1])
    if case == "weighting 7":
        arrays["state/moments/weighting"] = np.asarray(7)
    elif case == "negative scalars":
        arrays["state/moments/scalars"] = -arrays["state/moments/scalars"]
    elif case == "short scalars":
        arrays["state/moments/scalars"] = arrays["state/moments/scalars"][:3]
    elif case == "asymmetric pairs":
        key = _pairs_member(arrays)
        pairs = arrays[key].copy()
        pairs.flat[1] += 10.0 * np.abs(pairs).max()
        arrays[key] = pairs
    elif case == "nan word counts":
        arrays["state/moments/word_counts"] = np.where(np.arange(40) == 3, np.nan, arrays["state/moments/word_counts"])
    elif case == "no m1_sum":
        del arrays["state/moments/m1_sum"]
    else:
        arrays["state/eigenspace"] = arrays["state/eigenspace"][:-1]
    refused(write(tmp_path / "state.npz", meta, arrays), member)


def test_an_untouched_online_file_loads_and_updates(online):
    estimate, path = online
    back = SpectralEstimate.load(path)
    assert back.state.keys() == estimate.state.keys() and back.vocabulary == estimate.vocabulary
    corpus = sample_lda(n_docs=300, vocab_size=40, k=3, alpha=0.3, doc_length=40, seed=1)
    assert lda.update(corpus.counts, back, seed=0).k == 3


def _doctor(rng, meta, arrays):
    """One field of a saved estimate changed at random: a parameter, a state array or a metadata field."""
    name = rng.choice(sorted(arrays) + ["meta:k", "meta:match_site", "meta:model", "meta:vocabulary", "meta:sites"])
    if name.startswith("meta:"):
        field = name[5:]
        value = {"k": lambda: int(rng.integers(0, 6)), "match_site": lambda: rng.choice(["nope", "alpha", "init"]),
                 "model": lambda: rng.choice(["lda", "single_topic", "gmm", "hmm", "x"]),
                 "vocabulary": lambda: ["w"] * int(rng.integers(0, 50)),
                 "sites": lambda: {s: dict(d, support=rng.choice(["real", "positive", "simplex"]))
                                   for s, d in meta["sites"].items()}}[field]()
        return dict(meta, **{field: value}), arrays
    value = np.array(arrays[name])
    how = rng.integers(0, 6)
    if value.size == 0 or how == 0:
        del arrays[name]
    elif how == 1:
        arrays[name] = ~value if value.dtype.kind == "b" else -value
    elif how == 2 and value.dtype.kind == "f":
        value.flat[rng.integers(value.size)] = rng.choice([np.nan, np.inf, -1.0, 0.0, 1e300])
        arrays[name] = value
    elif how == 3:
        arrays[name] = value.reshape(-1)[:-1]
    elif how == 4:
        arrays[name] = value.astype(np.int64) if value.dtype.kind == "f" else value + 7
    else:
        value.flat[rng.integers(value.size)] *= 1.5
        arrays[name] = value
    return meta, arrays


@pytest.mark.parametrize("family", ["lda", "gmm", "hmm"])
def test_a_doctored_file_is_refused_naming_it_or_loads_a_valid_estimate(fits, tmp_path, family):
    good = fits[family].save(tmp_path / f"{family}.npz")
    rng = np.random.default_rng(59)
    for round_ in range(25):
        meta, arrays = _doctor(rng, *read(good))
        path = write(tmp_path / f"doctored_{round_}.npz", meta, arrays)
        try:
            back = SpectralEstimate.load(path)
        except ValueError as exc:
            assert repr(str(path)) in str(exc)
            continue
        check_loaded(back)


def test_stale_temporaries_of_dead_writers_are_removed_by_the_next_save(fits, tmp_path):
    target = tmp_path / "fit.npz"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".fit.npz.{int(gone.stdout)}.0123456789ab.tmp"
    mine = tmp_path / f".fit.npz.{os.getpid()}.0123456789ab.tmp"
    other = tmp_path / f".other.npz.{int(gone.stdout)}.0123456789ab.tmp"
    for path in (stale, mine, other):
        path.write_bytes(b"partial")
    fits["gmm"].save(target)
    assert not stale.exists() and mine.exists() and other.exists()
    SpectralEstimate.load(target)


CHILD = """
import sys
import numpy as np
from specinit.estimate import SpectralEstimate
rng = np.random.default_rng(int(sys.argv[2]))
beta = rng.dirichlet(np.ones(400_000), size=3)
estimate = SpectralEstimate("single_topic", {"beta": beta, "weights": np.full(3, 1 / 3)})
print("ready", flush=True)
while True:
    estimate.save(sys.argv[1])
"""


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigterm_during_save_leaves_a_complete_file_and_no_temporary(tmp_path, seed):
    target = tmp_path / "big.npz"
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.ones(50), size=3)
    SpectralEstimate("single_topic", {"beta": beta, "weights": np.full(3, 1 / 3)}).save(target)
    with subprocess.Popen([sys.executable, "-c", CHILD, str(target), str(seed)], stdout=subprocess.PIPE, text=True,
                          cwd=ROOT) as child:
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(float(rng.uniform(0.05, 1.5)))
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=60) == -signal.SIGTERM
        finally:
            if child.poll() is None:
                child.kill()
    assert [path.name for path in tmp_path.iterdir()] == ["big.npz"]
    back = SpectralEstimate.load(target)
    assert back.model == "single_topic" and back.params["beta"].shape[1] in (50, 400_000)


def test_save_refuses_names_that_load_would_refuse(fits, tmp_path):
    estimate = fits["gmm"]
    odd = SpectralEstimate(estimate.model, estimate.params, {"../up": np.arange(3)})
    with pytest.raises(ValueError, match=re.escape("'../up'")):
        odd.save(tmp_path / "odd.npz")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def online_files(tmp_path_factory):
    """Saved estimates of the other families that keep fitted state: online updates and kernel densities."""
    from specinit.models import factors, gaussian_hmm, kernel_multiview, multiview

    folder = tmp_path_factory.mktemp("states")
    rng = np.random.default_rng(0)
    h = rng.choice(2, 300)
    views = [np.array([[3.0, 0.0], [0.0, 3.0]])[h] + rng.normal(size=(300, 2)) for _ in range(3)]
    states = (np.arange(600) // 7) % 2  # a chain that stays 7 steps in each state
    real = np.array([-2.0, 2.0])[states] + rng.normal(size=600)
    symbols = np.where(rng.random(600) < 0.8, np.array([0, 3])[states], rng.integers(0, 4, 600))
    sources = rng.exponential(size=(600, 2)) - 1.0
    fits = {
        "gmm": lambda: gmm.update(views[0], None, k=2, seed=0),
        "factors": lambda: factors.update(sources @ rng.normal(size=(2, 4)) + 0.1 * rng.normal(size=(600, 4)), None,
                                          k=2, cumulant="skew", seed=0),
        "hmm": lambda: hmm.update(symbols, None, k=2, n_symbols=4, seed=0),
        "multiview": lambda: multiview.update(views, None, k=2, seed=0),
        "gaussian_hmm": lambda: gaussian_hmm.update(real, None, k=2, seed=0),
        "kernel_multiview": lambda: kernel_multiview.spectral(views, 2, seed=0, rank=8),
        "kernel_multiview.update": lambda: kernel_multiview.update(views, None, k=2, seed=0, rank=8),
    }
    with warnings.catch_warnings():  # small fits: what they warn about is not what is tested here
        warnings.simplefilter("ignore")
        return {name: fit().save(folder / f"{name}.npz") for name, fit in fits.items()}


@pytest.mark.parametrize("file, member, value, problem", [
    ("gmm", "state/moments/s2", np.ones((2, 3)), r"must be of shape \(2, 2\); got shape \(2, 3\)"),
    ("gmm", "state/moments/n", np.asarray(0), r"must be the number of rows summed \(a whole number >= 1\)"),
    ("factors", "state/moments/low", np.full(4, 1e9), r"must be at most 'high' in every column"),
    ("hmm", "state/moments/seen", -np.ones(4), r"must be non-negative; got minimum -1"),
    ("multiview", "state/moments/counts", np.array([300, 1]), r"must be the rows \(>= 1\) and the model's views"),
    ("multiview", "state/moments/triple_0_1_2", np.ones((2, 2)), r"must be a 3-d numeric array"),
    ("gaussian_hmm", "state/moments/edges", np.arange(9.0)[::-1], r"must be non-decreasing bin edges"),
    ("gaussian_hmm", "state/moments/chain/seen", np.ones(3), r"must be of shape \(10,\)"),
    ("kernel_multiview", "state/density_weights_1", np.ones((2, 5)), r"must be of shape \(2, 300\)"),
    ("kernel_multiview", "state/bandwidth_0", -np.ones(2), r"must be > 0"),
    ("kernel_multiview", "state/embedding_2", np.ones((3, 8)), r"must be of 2 rows \(k\)"),
    ("kernel_multiview.update", "state/moments/units", -np.ones(3), r"must be > 0"),
    ("kernel_multiview.update", "state/moments/sums/pair_0_1", np.ones((3, 3)), r"must be of shape \(8, 8\)"),
    ("kernel_multiview.update", "state/moments/features_1/bandwidth", np.ones(3), r"must be of shape \(2,\)"),
    # finite sums that no rows within the stored peaks or ranges give (an update would overflow on them)
    ("multiview", "state/moments/triple_0_1_2", lambda a: a * 1e300,
     r"must be at most n = 300 times the product of its views' peaks in absolute value"),
    ("multiview", "state/moments/peaks", lambda a: a * 1e300, r"must be largest entries whose products of 3 over "
                                                              r"the n = 300 rows float64 holds"),
    ("gmm", "state/moments/origin", lambda a: a + 1e308, r"must be within \['low', 'high'\] in every column"),
    ("gmm", "state/moments/s3", lambda a: a * 1e300, r"must be at most n times the rows' largest distance from "
                                                    r"'origin' to the power 3"),
])
def test_every_kept_summary_names_the_damaged_array(online_files, tmp_path, file, member, value, problem):
    meta, arrays = read(online_files[file])
    assert member in arrays
    value = value(arrays[member]) if callable(value) else value
    path = write(tmp_path / "state.npz", meta, {**arrays, member: value})
    message = refused(path, f"member {member!r}")
    assert re.search(problem, message), message
