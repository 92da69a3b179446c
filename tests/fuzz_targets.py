"""Fuzz targets, each run by ``tests/test_fuzz.py`` in a child process under an address-space limit.

``python -m tests.fuzz_targets TARGET MAX_EXAMPLES ADDRESS_SPACE`` limits the process's address space to
``ADDRESS_SPACE`` bytes, then feeds ``MAX_EXAMPLES`` Hypothesis examples (derandomized: the same examples on
every run) to one target. Every example must end in a result or in a clear error: a
``ValueError`` (never NumPy's ``LinAlgError``), ``TypeError`` or ``MemoryError`` whose message names the public
function called (or the file read). Anything else -- another exception, an unclear message -- fails the example
(Hypothesis shrinks it and the child exits non-zero); a crash, a hang or an allocation over the limit kills the
child, which the parent reports. The last line printed is ``TARGET: N examples, A results, R clear errors``.

``python -m tests.fuzz_targets saves ROUNDS ADDRESS_SPACE`` kills writers in the middle of
:meth:`~specinit.estimate.SpectralEstimate.save` instead (:func:`saves`) and prints ``saves: ROUNDS rounds, ...``.
"""

from __future__ import annotations

import functools
import gzip
import os
import resource
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CLEAR = (ValueError, TypeError, MemoryError)
OUTCOMES: Counter = Counter()


def _ends_clearly(call, *names: str) -> None:
    """Run ``call``; a result, or a clear error naming one of ``names``, is a pass."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = call()
    except CLEAR as exc:
        message = str(exc)
        if isinstance(exc, np.linalg.LinAlgError):
            raise AssertionError(f"raw LinAlgError: {message}") from exc
        if not any(name in message for name in names):
            raise AssertionError(f"unclear {type(exc).__name__} (names none of {names}): {message}") from exc
        OUTCOMES["clear errors"] += 1
        return
    params = getattr(result, "params", None)
    for name, value in (params or {}).items():
        assert np.all(np.isfinite(value)), f"non-finite {name} in a result"
    OUTCOMES["results"] += 1


# --- malformed sparse matrices ---------------------------------------------------------------------------------
@st.composite
def corrupted_csr(draw):
    rows, cols = draw(st.integers(1, 12)), draw(st.integers(1, 10))
    dense = draw(st.lists(st.integers(0, 4), min_size=rows * cols, max_size=rows * cols))
    matrix = sp.csr_matrix(np.asarray(dense, dtype=np.float64).reshape(rows, cols))
    indices, indptr, data = matrix.indices.copy(), matrix.indptr.copy(), matrix.data.copy()
    huge = st.integers(-(2**31), 2**31 - 1)
    how = draw(st.sampled_from(["index", "indptr", "truncate indices", "truncate data", "swap indptr", "none",
                                "index dtype", "data"]))
    if how == "index" and indices.size:
        indices[draw(st.integers(0, indices.size - 1))] = draw(st.one_of(st.integers(-3, cols + 3), huge))
    elif how == "indptr":
        indptr[draw(st.integers(0, indptr.size - 1))] = draw(st.one_of(st.integers(-3, indices.size + 3), huge))
    elif how == "truncate indices":
        indices = indices[: draw(st.integers(0, indices.size))]
    elif how == "truncate data":
        data = data[: draw(st.integers(0, data.size))]
    elif how == "swap indptr" and rows > 1:
        i = draw(st.integers(0, rows - 1))
        indptr[i], indptr[i + 1] = indptr[i + 1], indptr[i]
    elif how == "index dtype":
        indices = indices.astype(draw(st.sampled_from([np.int8, np.uint64, np.float64])))
    elif how == "data" and data.size:
        data[draw(st.integers(0, data.size - 1))] = draw(st.sampled_from([-1.0, 0.5, np.nan, np.inf, 2.0**60]))
    # SciPy checks the arrays it is built from; a matrix damaged after construction (as a corrupt file or a bug
    # leaves it) is what reaches the library.
    matrix.indices, matrix.indptr, matrix.data = indices, indptr, data
    return draw(st.sampled_from(["csr", "csc", "coo"])), matrix


def sparse(max_examples: int) -> None:
    from specinit.models import gmm, lda, single_topic

    fits = {
        "lda.spectral": lambda X, k: lda.spectral(X, k, alpha0=1.0, seed=0, em_sweeps=0),
        "single_topic.spectral": lambda X, k: single_topic.spectral(X, k, seed=0),
        "gmm.spectral": lambda X, k: gmm.spectral(X, k, seed=0),
    }

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(corrupted_csr(), st.sampled_from(sorted(fits)), st.integers(1, 3))
    def run(case, name, k):
        fmt, matrix = case
        if fmt != "csr":
            # the other formats' own index arrays, damaged the same way
            converted = {"csc": sp.csc_matrix, "coo": sp.coo_matrix}[fmt]((matrix.shape[1], matrix.shape[0]))
            if fmt == "csc":
                converted.indices, converted.indptr, converted.data = matrix.indices, matrix.indptr, matrix.data
                converted._shape = (matrix.shape[0], matrix.shape[1])
            else:
                n = min(matrix.indices.size, matrix.data.size)
                converted = sp.coo_matrix(matrix.shape)
                converted.data, converted.row = matrix.data[:n], np.resize(np.arange(matrix.shape[0]), n)
                converted.col = matrix.indices[:n]
            matrix = converted
        _ends_clearly(lambda: fits[name](matrix, k), name)

    run()


# --- sequences of symbols ----------------------------------------------------------------------------------------
EXTREMES = [0, 1, 2, -1, 0.5, 1e20, -1e20, np.nan, np.inf, 2.0**53, 2.0**63, 2**63 - 1]


@st.composite
def symbol_sequences(draw):
    dtype = draw(st.sampled_from([np.int8, np.int64, np.uint64, np.float32, np.float64, np.bool_]))
    length = draw(st.integers(0, 30))
    values = draw(st.lists(st.one_of(st.integers(0, 4), st.sampled_from(EXTREMES)), min_size=length,
                           max_size=length))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dtype is np.uint64:
            values = [2**64 - 1 if (isinstance(v, float) and not np.isfinite(v)) or v < 0 else v for v in values]
            array = np.array([int(v) % 2**64 for v in values], dtype=np.uint64)
        else:
            array = np.array(values, dtype=np.float64).astype(dtype)
    return array


def sequences(max_examples: int) -> None:
    from specinit.models import hmm

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(symbol_sequences(), st.integers(1, 3), st.one_of(st.integers(1, 12), st.sampled_from([10**7, 10**13,
                                                                                                 2**63 - 1])))
    def run(sequence, k, n_symbols):
        _ends_clearly(lambda: hmm.spectral(sequence, k, n_symbols=n_symbols, seed=0), "hmm.spectral")

    run()


# --- damaged files -----------------------------------------------------------------------------------------------
def _in_scratch_folder(target):
    """``target(folder, *args)`` run in a fresh temporary folder, removed when it returns or raises."""
    @functools.wraps(target)
    def run(*args):
        with tempfile.TemporaryDirectory(prefix="specinit-fuzz-") as name:
            return target(Path(name), *args)
    return run


def _valid_files(folder: Path) -> dict:
    """Small valid files of every format, by name: the bytes each reader is fuzzed from."""
    from specinit.corpus import from_matrix, save_ldac, save_uci_bow
    from specinit.models import gmm
    from specinit.synthetic import sample_lda

    corpus = from_matrix(sample_lda(n_docs=6, vocab_size=7, k=2, alpha=0.5, doc_length=8, seed=0).counts,
                         vocabulary=[f"w{i}" for i in range(7)])
    save_ldac(corpus, folder / "c.ldac", folder / "vocab.txt")
    save_uci_bow(corpus, folder / "docword.txt")
    (folder / "docword.txt.gz").write_bytes(gzip.compress((folder / "docword.txt").read_bytes(), mtime=0))
    rng = np.random.default_rng(0)
    blobs = np.concatenate([rng.normal(-3.0, 1.0, size=(50, 2)), rng.normal(3.0, 1.0, size=(50, 2))])
    gmm.spectral(blobs, 2, seed=0).save(folder / "estimate.npz")
    return {name: (folder / name).read_bytes() for name in ("c.ldac", "vocab.txt", "docword.txt", "docword.txt.gz",
                                                            "estimate.npz")}


def _readers(folder: Path) -> dict:
    from specinit.corpus import load_ldac, load_uci_bow, read_vocabulary
    from specinit.estimate import SpectralEstimate

    return {
        "c.ldac": lambda path: load_ldac(path, folder / "vocab.txt"),
        "vocab.txt": lambda path: load_ldac(folder / "c.ldac", path),
        "docword.txt": lambda path: load_uci_bow(path),
        "docword.txt.gz": lambda path: load_uci_bow(path),
        "estimate.npz": lambda path: SpectralEstimate.load(path),
        "read_vocabulary": lambda path: read_vocabulary(path),
    }


def _read_damaged(folder: Path, name: str, content: bytes, reader) -> None:
    damaged = folder / f"damaged-{name}"
    damaged.write_bytes(content)
    _ends_clearly(lambda: reader(damaged), str(damaged))


@_in_scratch_folder
def files(folder: Path, max_examples: int) -> None:
    valid = _valid_files(folder)
    readers = _readers(folder)
    # every truncation of every file
    for name, content in valid.items():
        for offset in range(len(content)):
            _read_damaged(folder, name, content[:offset], readers[name])

    numbers = st.sampled_from([b"-1", b"0", b"18446744073709551616", b"99999999999999999999", b"1e300", b"nan",
                               b"9007199254740993", b"4294967296", b"\xff\xfe", b"", b" ", b"\n\n", b":"])

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(valid)), st.data())
    def run(name, data):
        content = bytearray(valid[name])
        how = data.draw(st.sampled_from(["flip", "insert", "replace token", "repeat line"]))
        offset = data.draw(st.integers(0, len(content) - 1))
        if how == "flip":
            content[offset] ^= data.draw(st.integers(1, 255))
        elif how == "insert":
            content[offset:offset] = data.draw(numbers)
        elif how == "replace token":
            tokens = bytes(content).split(b" ")
            i = data.draw(st.integers(0, len(tokens) - 1))
            tokens[i] = data.draw(numbers)
            content = bytearray(b" ".join(tokens))
        else:
            lines = bytes(content).split(b"\n")
            i = data.draw(st.integers(0, len(lines) - 1))
            content = bytearray(b"\n".join(lines[: i + 1] + lines[i:]))
        _read_damaged(folder, name, bytes(content), readers["read_vocabulary" if name == "vocab.txt" and
                                                            data.draw(st.booleans()) else name])

    run()


# --- real-valued rows and views --------------------------------------------------------------------------------
@st.composite
def rows(draw):
    n, d = draw(st.integers(1, 40)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    array = rng.normal(size=(n, d)) * 10.0 ** draw(st.integers(-300, 300))
    how = draw(st.sampled_from(["none", "entry", "column", "dtype"]))
    if how == "entry":
        array[draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = draw(st.sampled_from(
            [np.nan, np.inf, -np.inf, 1e308, -1e308, 5e-324, 0.0]))
    elif how == "column":
        array[:, draw(st.integers(0, d - 1))] = draw(st.sampled_from([0.0, 1e300, -5e-324]))
    elif how == "dtype":
        array = array.astype(draw(st.sampled_from([np.float32, np.float16, np.int64, np.complex128])))
    return array


def views(max_examples: int) -> None:
    from specinit.models import gmm, multiview

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(rows(), st.integers(1, 3), st.booleans())
    def run(x, k, as_views):
        if as_views:
            _ends_clearly(lambda: multiview.spectral([x, x[:, ::-1], np.cumsum(x, axis=1)], k, seed=0),
                          "multiview.spectral")
        else:
            _ends_clearly(lambda: gmm.spectral(x, k, seed=0), "gmm.spectral")

    run()


# --- doctored saved estimates -------------------------------------------------------------------------------------
def check_loaded(estimate) -> None:
    """Assert that a loaded estimate satisfies what a fresh fit does: its family's sites, the match site among them,
    every parameter in its support with ``k`` entries along component axes, one word per column of the
    vocabulary's axis, a stored state that the family's check passes."""
    from specinit.estimate import check_site_values
    from specinit.family import family

    sites, _ = family(estimate.model).site_table(estimate.params)
    assert estimate.sites == sites and estimate.match_site in estimate.params
    check_site_values(estimate.params, sites, estimate.k)
    if estimate.vocabulary is not None and "beta" in estimate.params:
        assert len(estimate.vocabulary) == estimate.params["beta"].shape[1]
    if estimate.state:
        family(estimate.model).check_state(estimate)


def _saved_fits(folder: Path) -> dict:
    """Small fits of six families saved in ``folder`` (the online ones with their stored sums), by family: the file,
    and a call that continues a loaded estimate (a further batch, or a density of the fitted state)."""
    from specinit.models import gaussian_hmm, gmm, hmm, kernel_multiview, lda, multiview
    from specinit.synthetic import sample_lda

    rng = np.random.default_rng(0)
    counts = sample_lda(n_docs=160, vocab_size=12, k=2, alpha=0.5, doc_length=20, seed=0).counts
    x = np.concatenate([rng.normal(-3.0, 1.0, size=(60, 3)), rng.normal(3.0, 1.0, size=(60, 3))])
    h = rng.integers(0, 2, 200)
    views = [np.array([[3.0, 0.0], [0.0, 3.0]])[h] + rng.normal(size=(200, 2)) for _ in range(3)]
    symbols = rng.integers(0, 4, 400)
    real = np.array([-2.0, 2.0])[(np.arange(400) // 7) % 2] + rng.normal(size=400)
    fits = {
        "lda": (lambda: lda.update(counts[:80], None, k=2, seed=0, vocabulary=[f"w{i}" for i in range(12)]),
                lambda e: lda.update(counts[80:], e, seed=0)),
        "gmm": (lambda: gmm.update(x[::2], None, k=2, seed=0), lambda e: gmm.update(x[1::2], e, seed=0)),
        "hmm": (lambda: hmm.update(symbols[:200], None, k=2, n_symbols=4, seed=0),
                lambda e: hmm.update(symbols[200:], e, seed=0)),
        "multiview": (lambda: multiview.update([v[:100] for v in views], None, k=2, seed=0),
                      lambda e: multiview.update([v[100:] for v in views], e, seed=0)),
        "kernel_multiview": (lambda: kernel_multiview.spectral(views, 2, seed=0, rank=8),
                             lambda e: kernel_multiview.conditional_density(e, 1, np.zeros((3, 2)))),
        "gaussian_hmm": (lambda: gaussian_hmm.update(real[:200], None, k=2, seed=0),
                         lambda e: gaussian_hmm.update(real[200:], e, seed=0)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: (fit().save(folder / f"{name}.npz"), go_on) for name, (fit, go_on) in fits.items()}


#: Values a doctored metadata field takes.
JSON_VALUES = [None, -1, 0, 1, 3, 2**63, 1.5, float("nan"), "", "x", "gmm", [], [1, 2], {}, {"a": 1}, True]
#: Names a doctored member takes.
MEMBER_NAMES = ["param/x", "param/../evil", "state/../x", "diag/a b", "Param/beta", "param/loc/extra", ".hidden",
                "meta2", "state/moments/extra", "param/", "state/", "diag/", "param/weights"]


def _json_fields(value, path=()):
    """The paths of every field of a JSON value, nested ones included."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _json_fields(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value[:3]):
            yield from _json_fields(item, (*path, i))


def _doctor_meta(meta: dict, data) -> dict:
    """``meta`` with one field (nested ones included) replaced or removed."""
    import copy

    meta = copy.deepcopy(meta)
    path = data.draw(st.sampled_from([p for p in _json_fields(meta) if p]))
    *outer, last = path
    holder = meta
    for key in outer:
        holder = holder[key]
    if isinstance(holder, dict) and data.draw(st.booleans()):
        del holder[last]
    else:
        holder[last] = data.draw(st.sampled_from(JSON_VALUES))
    return meta


def _doctor_member(arrays: dict, data) -> dict:
    """``arrays`` with one member changed: a value (NaN, inf, a sign, a huge or zero entry, a row off the simplex),
    its shape, its dtype, its name, or removed."""
    name = data.draw(st.sampled_from(sorted(arrays)))
    value = np.array(arrays[name])
    how = data.draw(st.sampled_from(["entry", "scale row", "shape", "dtype", "rename", "remove", "copy"]))
    if how == "entry" and value.size:
        value = value.astype(np.float64)
        value.flat[data.draw(st.integers(0, value.size - 1))] = data.draw(st.sampled_from(
            [np.nan, np.inf, -np.inf, -1.0, 0.0, 1e308, -1e-300, 0.5, 7.0]))
    elif how == "scale row" and value.ndim:
        value = value * data.draw(st.sampled_from([-1.0, 0.0, 0.5, 2.0, 1e300]))
    elif how == "shape":
        value = data.draw(st.sampled_from([value.reshape(-1)[:-1] if value.size else value, value.T, value[None],
                                           np.concatenate([value.reshape(-1), value.reshape(-1)]),
                                           value.reshape(-1), np.zeros((0,) + value.shape[1:])]))
    elif how == "dtype":
        kind = data.draw(st.sampled_from([np.int64, np.uint8, np.bool_, np.complex128, np.float16, "<U3", object]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = value.astype(kind)
    elif how in ("rename", "copy"):
        new = data.draw(st.sampled_from(MEMBER_NAMES))
        arrays = {**arrays, new: value}
        if how == "rename":
            del arrays[name]
        return arrays
    elif how == "remove":
        return {key: item for key, item in arrays.items() if key != name}
    return {**arrays, name: value}


@_in_scratch_folder
def estimates(folder: Path, max_examples: int) -> None:
    import json

    from specinit.estimate import SpectralEstimate

    saved = _saved_fits(folder)

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(saved)), st.sampled_from(["meta", "member", "both"]), st.booleans(), st.data())
    def run(family, where, recorded, data):
        path, go_on = saved[family]
        with np.load(path, allow_pickle=False) as raw:
            arrays = {name: raw[name] for name in raw.files}
        meta = json.loads(str(arrays.pop("meta")))
        if where != "meta":
            arrays = _doctor_member(arrays, data)
            if recorded and isinstance(meta.get("arrays"), dict):  # the record of shapes rewritten to match
                meta["arrays"] = {name: {"shape": list(np.shape(v)), "dtype": np.asarray(v).dtype.str}
                                  for name, v in arrays.items()}
        if where != "member":
            meta = _doctor_meta(meta, data)
        doctored = folder / f"doctored-{family}.npz"
        np.savez(doctored, meta=np.array(json.dumps(meta)), **arrays)
        loaded = []

        def load():
            loaded.append(SpectralEstimate.load(doctored))
            check_loaded(loaded[0])
            return loaded[0]

        _ends_clearly(load, repr(str(doctored)))
        if loaded:  # what loads is used as a fresh fit is: a further batch, or the fitted densities
            _ends_clearly(lambda: go_on(loaded[0]), f"{family}.", "'estimate'")

    run()


# --- interrupted saves ----------------------------------------------------------------------------------------------
def _temporaries(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _saver(target: Path, estimates: tuple, go: int, started: int) -> None:
    """A forked writer: once told to go, save the estimates in turn to ``target`` until a signal ends it."""
    if not os.read(go, 1):
        os._exit(0)  # the parent is gone
    os.write(started, b"s")
    while True:
        for estimate in estimates:
            estimate.save(target)


@_in_scratch_folder
def saves(folder: Path, rounds: int) -> None:
    """Writers killed by SIGKILL or SIGTERM at random points of ``save``: the target is always one of the two
    estimates they write, whole; SIGTERM leaves no temporary, and the next save removes the one SIGKILL leaves.

    The writers are forked before anything starts a thread (JAX, which :meth:`SpectralEstimate.load` imports,
    must not be forked), each waiting until its round.
    """
    from specinit.estimate import SpectralEstimate

    rng = np.random.default_rng(7)
    target = folder / "fit.npz"
    pair = tuple(SpectralEstimate("single_topic", {"beta": rng.dirichlet(np.ones(size), size=3),
                                                   "weights": np.full(3, 1 / 3)}) for size in (150_000, 100_000))
    started_at = time.perf_counter()
    pair[0].save(target)
    duration = time.perf_counter() - started_at  # the delays span a few saves
    writers = []
    for _ in range(rounds):
        go, tell = os.pipe()
        hear, started = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                _saver(target, pair, go, started)
            finally:
                os._exit(1)
        os.close(go)
        os.close(started)
        writers.append((pid, tell, hear))
    counts = Counter()
    for i, (pid, tell, hear) in enumerate(writers):
        os.write(tell, b"g")
        assert os.read(hear, 1) == b"s"
        time.sleep(float(rng.uniform(0.0, 3.0 * duration)))
        signum = signal.SIGKILL if i % 2 else signal.SIGTERM
        os.kill(pid, signum)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signum, f"writer ended with status {status}"
        left = _temporaries(folder)
        assert signum == signal.SIGKILL or not left, f"SIGTERM left {left}"
        counts["killed mid-write"] += bool(left)
        back = SpectralEstimate.load(target)
        same = [j for j, estimate in enumerate(pair) if back.params["beta"].shape == estimate.params["beta"].shape
                and np.array_equal(back.params["beta"], estimate.params["beta"])]
        assert same, "the target is neither estimate"
        counts[f"estimate {same[0]}"] += 1
        pair[i % 2].save(target)
        assert not _temporaries(folder), f"the next save left {_temporaries(folder)}"
        counts[signal.Signals(signum).name] += 1
    print(f"saves: {rounds} rounds, {counts['SIGTERM']} SIGTERM, {counts['SIGKILL']} SIGKILL, "
          f"{counts['killed mid-write']} killed mid-write, {counts['estimate 0']} + {counts['estimate 1']} complete")


TARGETS = {"sparse": sparse, "sequences": sequences, "files": files, "views": views, "estimates": estimates}
#: Examples of each target (every one run by the fuzz suite).
EXAMPLES = {"sparse": 400, "sequences": 400, "files": 400, "views": 400, "estimates": 300}


def main(argv: list[str]) -> int:
    target, max_examples, address_space = argv[0], int(argv[1]), int(argv[2])
    # set here rather than by the parent between fork and exec: JAX, loaded in the parent, refuses to be forked
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    if target == "saves":
        saves(max_examples)
        return 0
    TARGETS[target](max_examples)
    total = OUTCOMES["results"] + OUTCOMES["clear errors"]
    print(f"{target}: {total} examples, {OUTCOMES['results']} results, {OUTCOMES['clear errors']} clear errors")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
