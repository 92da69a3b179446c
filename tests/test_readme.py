"""The README's quickstart runs as pasted, and its two commands are what CI runs."""

import re
import warnings
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()


@pytest.mark.boundary
def test_quickstart_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert blocks, "README has no python block"
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's note on large Pareto k for 100 draws
        exec(compile(blocks[0], "README quickstart", "exec"), namespace)
    est = namespace["est"]
    assert est.k == 3 and est.params["beta"].shape == (3, 50)
    assert namespace["mcmc"].get_samples()["beta"].shape == (100, 3, 50)
    idata = namespace["idata"]
    from specinit.posterior import group, group_names

    assert {"posterior", "log_likelihood", "sample_stats", "observed_data", "spectral"} <= set(group_names(idata))
    assert group(idata, "sample_stats")["diverging"].shape == (2, 50)
    assert group(idata, "log_likelihood")["counts"].shape == (2, 50, 100)
    import arviz as az

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert len(az.compare({"warm": idata, "again": idata})) == 2


@pytest.mark.boundary
def test_your_own_model_block_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    namespace: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ArviZ's note on large Pareto k for 400 draws
        exec(compile(blocks[1], "README: your own model", "exec"), namespace)
    assert sorted(namespace["init"]) == ["locs", "scale", "weights"]
    assert namespace["mcmc"].get_samples()["locs"].shape == (400, 3, 4)


def test_ci_runs_the_readme_test_command():
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    command = 'pip install -e ".[test]" && python -m pytest -q'
    assert command in README and command in ci
