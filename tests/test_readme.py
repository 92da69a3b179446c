"""The README's quickstart runs as pasted, and its two commands are what CI runs."""

import re
from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text()


def test_quickstart_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}
    exec(compile(blocks[0], "README quickstart", "exec"), namespace)
    est = namespace["est"]
    assert est.k == 3 and est.params["beta"].shape == (3, 50)
    assert namespace["mcmc"].get_samples()["beta"].shape == (100, 3, 50)


def test_ci_runs_the_readme_test_command():
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    command = 'pip install -e ".[test]" && python -m pytest -q'
    assert command in README and command in ci
