"""The command line: `specinit fit` on shipped and written corpora, errors, and the demo."""

import numpy as np
import pytest

from specinit.cli import main
from specinit.corpus import from_matrix, save_ldac
from specinit.estimate import SpectralEstimate
from specinit.synthetic import sample_lda


def test_fit_reuters_prints_topics_and_saves_estimate(tmp_path, capsys):
    out = tmp_path / "est.npz"
    # Reuters stories are close to single-topic: sum(alpha_hat) comes out well below any alpha0
    # tried, and the fit says so instead of renormalizing alpha silently.
    with pytest.warns(RuntimeWarning, match="alpha0 is probably misspecified"):
        assert main(["fit", "lda", "reuters", "--k", "4", "--alpha0", "1.0", "--top", "5", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "395 documents" in text and text.count("topic ") == 4
    loaded = SpectralEstimate.load(out)
    assert loaded.model == "lda" and loaded.params["beta"].shape == (4, 4258)
    assert loaded.vocabulary is not None and len(loaded.vocabulary) == 4258


def test_fit_single_topic_from_ldac_file(tmp_path, capsys):
    corpus = sample_lda(300, 50, 3, alpha=0.1, seed=3)
    path = tmp_path / "corpus.ldac"
    save_ldac(from_matrix(corpus.counts), path)
    assert main(["fit", "single-topic", str(path), "--k", "3", "--method", "svtd"]) == 0
    assert "single-topic: k=3, 300 documents, V=50" in capsys.readouterr().out


def test_fit_reports_bad_k_without_traceback(tmp_path, capsys):
    corpus = sample_lda(50, 20, 2, seed=0)
    path = tmp_path / "c.ldac"
    save_ldac(from_matrix(corpus.counts), path)
    assert main(["fit", "lda", str(path), "--k", "25"]) == 2
    assert "'k'" in capsys.readouterr().err


def test_fit_missing_file_is_an_error(capsys):
    assert main(["fit", "lda", "/nonexistent/corpus.ldac", "--k", "3"]) == 2
    assert "error" in capsys.readouterr().err


def test_saved_estimate_loads_back_exactly(tmp_path):
    corpus = sample_lda(400, 40, 3, alpha=0.2, seed=1)
    from specinit.models import lda

    est = lda.spectral(corpus.counts, 3, alpha0=0.6)
    loaded = SpectralEstimate.load(est.save(tmp_path / "e.npz"))
    for name, value in est.params.items():
        np.testing.assert_array_equal(loaded.params[name], value)
    assert loaded.diagnostics["alpha0"] == est.diagnostics["alpha0"]
    np.testing.assert_array_equal(loaded.diagnostics["m2_eigenvalues"], est.diagnostics["m2_eigenvalues"])


@pytest.mark.parametrize("argv", [["fit"], ["demo", "--seed", "x"], ["nonsense"]])
def test_bad_command_lines_exit_with_usage(argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
