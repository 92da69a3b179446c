"""The engine and corpus layers import no JAX, NumPyro or ArviZ; old import paths still work, with a warning."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_engine_and_corpus_import_no_jax_numpyro_or_arviz():
    code = (
        "import sys, specinit.engine, specinit.corpus\n"
        "heavy = sorted(m for m in ('jax', 'numpyro', 'arviz') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the engine imported {out.stdout.strip()}"


@pytest.mark.parametrize("old, name", [("specinit.moments", "CountMoments"), ("specinit.recovery", "project_to_simplex"),
                                       ("specinit.data", "load_uci_bow"), ("specinit.diagnostics", "to_inference_data")])
def test_old_paths_warn_and_resolve(old, name):
    code = (
        "import warnings\n"
        "warnings.simplefilter('error')\n"
        f"try:\n    import {old}\nexcept DeprecationWarning as exc:\n    print(exc)\n"
        "warnings.simplefilter('ignore')\n"
        f"import importlib; module = importlib.import_module({old!r}); print(hasattr(module, {name!r}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert f"{old} moved to" in out and out.strip().endswith("True"), out
