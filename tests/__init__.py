"""The test suite, a package (``from tests.conftest import ...``).

From an unpacked sdist, the folder ``specinit/`` beside ``tests/`` is on ``sys.path`` first (pytest's rootdir,
``python -m``'s working directory) and would shadow the installed package: ``models/`` installs as
``specinit.models`` (pyproject.toml's ``package-dir``), which that folder lacks. The installed package is imported
first, so that every test runs against it (in a checkout installed with ``pip install -e``, it is the checkout).
"""

import importlib
import os
import sys


def _import_installed_specinit() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    saved = sys.path[:]
    sys.path[:] = [entry for entry in saved if os.path.abspath(entry or os.curdir) != root]
    try:
        importlib.import_module("specinit")
    except ImportError:  # not installed: the source folder, as Python finds it
        pass
    finally:
        sys.path[:] = saved


_import_installed_specinit()
