"""`specinit demo` (the main job) runs end to end, shows the warm-start effect, warns nothing and lists its files."""

import os
import stat
import warnings
from pathlib import Path

from specinit.cli import main
from specinit.demo import DEMO_SIZES, run_demo


def test_demo_default_run_at_quick_sizes(tmp_path, monkeypatch):
    # The default run's code at the sizes of --quick (the sizes are all that differs between the runs).
    monkeypatch.setitem(DEMO_SIZES, "default", DEMO_SIZES["quick"])
    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning, also those pyproject's filterwarnings ignores
        results = run_demo(tmp_path, seed=0, log=lines.append)
    assert [f"{w.category.__name__}: {w.message} ({w.filename})" for w in caught] == []
    # 1,000 documents of ~80 tokens, k=4: the spectral topics are within 0.2 in mean L1 of the truth
    # (measured 0.055; 0.2 leaves room for platform differences, and a wrong moment breaks it).
    assert results["fit_topic_l1"] < 0.2
    # Chains started at the spectral estimate share one labelling; default-initialized chains do
    # not (label switching), so their R-hat is far larger. Both are seeded.
    assert results["nuts_warm_max_rhat"] < results["nuts_cold_max_rhat"]
    # SVI started at the estimate begins below the default start's final loss after 100 steps.
    assert results["svi_warm_initial_loss"] < results["svi_cold_final_loss"]
    for path in results["plots"]:
        assert Path(path).stat().st_size > 1000
    # Every file written is in the "wrote" line, with the mode the umask gives (the tests run under the user's).
    written = sorted(p for p in tmp_path.iterdir())
    assert [p.name for p in written] == sorted(["estimate.npz", "forest_alpha.png", "topics_spectral.png", "elbo.png"])
    assert sorted(map(Path, results["files"])) == written
    wrote = next(line for line in lines if line.lstrip().startswith("wrote "))
    assert all(str(p) in wrote for p in written)
    umask = os.umask(0)
    os.umask(umask)
    assert {stat.S_IMODE(p.stat().st_mode) for p in written} == {0o666 & ~umask}
    assert any("[4/4]" in line for line in lines)


def test_cli_demo_writes_to_out_folder(tmp_path, monkeypatch):
    seen = {}

    def fake_run_demo(out_dir, *, size, seed, log):
        seen.update(out_dir=out_dir, size=size, seed=seed)
        log("ok")
        return {}

    monkeypatch.setattr("specinit.demo.run_demo", fake_run_demo)
    assert main(["demo", "--quick", "--out", str(tmp_path / "d"), "--seed", "3"]) == 0
    assert seen == {"out_dir": tmp_path / "d", "size": "quick", "seed": 3}
    assert main(["demo", "--full", "--out", str(tmp_path / "e")]) == 0
    assert seen["size"] == "full"
    assert main(["demo", "--out", str(tmp_path / "f")]) == 0
    assert seen["size"] == "default"


def test_demo_refuses_unknown_size_and_a_file_as_out_folder(tmp_path, capsys):
    import pytest

    with pytest.raises(ValueError, match="'size' argument of run_demo"):
        run_demo(tmp_path, size="huge")
    (tmp_path / "file").write_text("x")
    assert main(["demo", "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
