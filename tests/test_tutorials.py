"""Every tutorial runs at small size (SPECINIT_TUTORIAL_SMALL=1), so none can rot."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIALS = sorted((Path(__file__).parent.parent / "tutorials").glob("*.py"))


def test_tutorials_exist():
    assert len(TUTORIALS) >= 3


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(path, tmp_path):
    env = dict(os.environ, SPECINIT_TUTORIAL_SMALL="1", MPLBACKEND="Agg", PYTHONWARNINGS="error::RuntimeWarning")
    result = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
