"""The public API as a type checker sees it: mypy (the test extra) checks tests/typing/check_public_api.py and the
README's code blocks (settings and strictness: pyproject.toml's [tool.mypy])."""

import os
import re
import subprocess
import sys
from pathlib import Path

import specinit
import specinit.models

HERE = Path(__file__).parent
CHECKED = HERE / "typing" / "check_public_api.py"


def _search_path(tmp_path) -> dict:
    """The environment under which mypy finds the installed package, ``specinit.models`` inside ``specinit``.

    A regular install has that layout and a ``py.typed``: mypy finds it in site-packages. A checkout installed with
    ``pip install -e`` maps ``models/`` to ``specinit.models`` by an import hook that mypy does not follow: a
    folder of links in that layout goes on ``MYPYPATH``.
    """
    package = Path(specinit.__file__).parent
    models = Path(specinit.models.__file__).parent
    if models.parent == package:
        return dict(os.environ)
    tree = tmp_path / "path" / "specinit"
    tree.mkdir(parents=True)
    for entry in package.iterdir():
        if entry.name != "__pycache__":
            (tree / entry.name).symlink_to(entry)
    (tree / "models").symlink_to(models)
    return dict(os.environ, MYPYPATH=str(tree.parent))


def test_public_calls_and_the_readme_blocks_type_check(tmp_path):
    root = HERE.parent
    blocks = re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), flags=re.S)
    assert blocks
    files = [str(CHECKED)]
    for number, block in enumerate(blocks):
        (tmp_path / f"readme_block_{number}.py").write_text(block)
        files.append(str(tmp_path / f"readme_block_{number}.py"))
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"), "--cache-dir",
                           str(tmp_path / "cache"), *files], cwd=tmp_path, env=_search_path(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
