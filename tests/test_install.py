"""Without the optional extras every public module imports, and what needs an extra says which one to install."""

import json
import subprocess
import sys
import textwrap

#: Packages that only the extras bring ([dask], [fast], [data]), hidden from a child interpreter.
OPTIONAL = ("dask", "distributed", "numba", "lda")

_CHILD = textwrap.dedent("""
    import importlib, json, pkgutil, sys, tempfile
    for name in sys.argv[1].split(","):
        sys.modules[name] = None  # any import of it raises ImportError, as when it is not installed
    import specinit, specinit.models
    failures = {}
    for package in (specinit, specinit.models):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if module.name.endswith(".__main__"):  # runs the command line
                continue
            try:
                importlib.import_module(module.name)
            except Exception as exc:
                failures[module.name] = f"{type(exc).__name__}: {exc}"
    from specinit.corpus import load_reuters
    from specinit.corpus.shards import read_npz_shards
    calls = {"load_reuters": load_reuters, "read_npz_shards": lambda: read_npz_shards(tempfile.gettempdir())}
    for name, call in calls.items():
        try:
            call()
        except Exception as exc:
            failures[name] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(failures))
""")


def test_public_modules_import_without_the_extras_and_name_the_extra_where_needed(tmp_path):
    done = subprocess.run([sys.executable, "-c", _CHILD, ",".join(OPTIONAL)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)  # the installed package, not a source folder in the working dir
    assert done.returncode == 0, done.stderr[-4000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    # Only the Numba backend's module needs its extra at import; the estimators need no extra (scikit-learn is a
    # base dependency).
    assert set(failures) == {"specinit.engine.backends.numba", "load_reuters", "read_npz_shards"}, failures
    expected = {"specinit.engine.backends.numba": "fast", "load_reuters": "data", "read_npz_shards": "dask"}
    for name, extra in expected.items():
        assert failures[name].startswith("ImportError") and f'pip install "specinit[{extra}]"' in failures[name]


def test_the_backend_argument_names_the_extra_of_a_missing_backend(tmp_path):
    child = ("import sys; sys.modules['numba'] = None\n"
             "import numpy as np; from specinit.models import lda\n"
             "try:\n    lda.spectral(np.ones((20, 6)), 2, backend='numba')\n"
             "except ValueError as exc:\n    print(exc)")
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert 'pip install "specinit[fast]"' in done.stdout, done.stdout + done.stderr[-2000:]
