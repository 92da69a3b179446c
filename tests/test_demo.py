"""`specinit demo --quick` (the main job at tiny size) runs end to end and shows the warm-start effect."""

from pathlib import Path

from specinit.cli import main
from specinit.demo import run_demo


def test_demo_quick(tmp_path, capsys):
    lines = []
    results = run_demo(tmp_path, size="quick", seed=0, log=lines.append)
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
    assert (tmp_path / "estimate.npz").exists()
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
