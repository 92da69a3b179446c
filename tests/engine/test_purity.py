"""The engine and corpus layers import no JAX, NumPyro or ArviZ; old import paths still work, with a warning."""

from __future__ import annotations

import subprocess
import sys



def test_engine_and_corpus_import_no_jax_numpyro_or_arviz():
    code = (
        "import sys, specinit.engine, specinit.corpus\n"
        "heavy = sorted(m for m in ('jax', 'numpyro', 'arviz') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the engine imported {out.stdout.strip()}"
