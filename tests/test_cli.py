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


def test_fit_with_seed_words_names_the_seeded_topics(capsys):
    """--seed-words takes the Python literal of lda.spectral's seed_words; the seeded topics print their names."""
    assert main(["fit", "lda", "reuters", "--k", "8", "--top", "4",
                 "--seed-words", "{'music': ['elvis', 'music'], 'royal': ['queen', 'royal']}"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("topic ")]
    assert lines[0].startswith("topic  0 (music)") and "elvis" in lines[0]
    assert lines[1].startswith("topic  1 (royal)") and "(" not in lines[2]


def test_fit_single_topic_from_ldac_file(tmp_path, capsys):
    corpus = sample_lda(300, 50, 3, alpha=0.1, seed=3)
    path = tmp_path / "corpus.ldac"
    save_ldac(from_matrix(corpus.counts), path)
    assert main(["fit", "single-topic", str(path), "--k", "3", "--method", "svtd"]) == 0
    assert "single_topic: k=3, 300 documents, V=50" in capsys.readouterr().out


def test_fit_reports_bad_k_without_traceback(tmp_path, capsys):
    corpus = sample_lda(50, 20, 2, seed=0)
    path = tmp_path / "c.ldac"
    save_ldac(from_matrix(corpus.counts), path)
    assert main(["fit", "lda", str(path), "--k", "25"]) == 2
    assert "'k'" in capsys.readouterr().err


def test_fit_missing_file_is_an_error(capsys):
    assert main(["fit", "lda", "/nonexistent/corpus.ldac", "--k", "3"]) == 2
    err = capsys.readouterr().err
    assert "/nonexistent/corpus.ldac does not exist" in err and err.count("\n") == 1


def _family_files(tmp_path):
    """One small data file per family, in the format `specinit fit` documents for its data kind."""
    rng = np.random.default_rng(0)
    files = {}
    corpus = sample_lda(300, 30, 3, alpha=0.2, seed=2)
    files["lda"] = files["single_topic"] = (tmp_path / "c.ldac", [])
    save_ldac(from_matrix(corpus.counts), files["lda"][0])
    params = {"init": np.full(2, 0.5), "transition": np.array([[0.9, 0.1], [0.2, 0.8]]),
              "emission": np.array([[0.6, 0.3, 0.05, 0.05], [0.05, 0.05, 0.3, 0.6]])}
    seqs = []
    for _ in range(20):
        state, seq = rng.choice(2, p=params["init"]), []
        for _ in range(200):
            seq.append(rng.choice(4, p=params["emission"][state]))
            state = rng.choice(2, p=params["transition"][state])
        seqs.append(seq)
    path = tmp_path / "seqs.txt"
    path.write_text("\n".join(" ".join(map(str, s)) for s in seqs) + "\n")
    files["hmm"] = (path, ["--option", "n_symbols=4"])
    path = tmp_path / "real.txt"
    path.write_text("\n".join(" ".join(f"{v:.4f}" for v in rng.normal(size=300) + 3 * (rng.random(300) < 0.5))
                              for _ in range(10)) + "\n")
    files["gaussian_hmm"] = (path, [])
    centres = np.array([[0.0, 0, 0, 0, 0], [4, 4, 0, 0, 0], [0, 0, 4, 4, 4]])
    x = centres[rng.integers(0, 3, 600)] + rng.normal(size=(600, 5))
    np.save(tmp_path / "rows.npy", x)
    files["gmm"] = (tmp_path / "rows.npy", [])
    np.savetxt(tmp_path / "rows.csv", rng.gamma(2.0, size=(2000, 4)) @ rng.normal(size=(4, 6)), delimiter=",")
    files["factors"] = (tmp_path / "rows.csv", ["--option", "noise='isotropic'"])
    labels = rng.integers(0, 3, 900)
    views = {f"view{v}": centres[labels][:, :4] + rng.normal(size=(900, 4)) for v in range(3)}
    np.savez(tmp_path / "views.npz", **views)
    files["multiview"] = (tmp_path / "views.npz", ["--option", "kinds=('gaussian', 'gaussian', 'gaussian')"])
    files["kernel_multiview"] = (tmp_path / "views.npz", ["--option", "rank=32"])
    return files


@pytest.mark.parametrize("name", ["lda", "single_topic", "hmm", "gaussian_hmm", "gmm", "factors", "multiview",
                                  "kernel_multiview"])
def test_fit_every_family_from_its_file_format_with_json(tmp_path, capsys, name):
    import json
    import warnings

    path, extra = _family_files(tmp_path)[name]
    out = tmp_path / f"{name}.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fallbacks and repairs on tiny data are reported in the diagnostics
        status = main(["fit", name, str(path), "--k", "2" if "hmm" in name else "3", "--json", "--out", str(out),
                       *extra])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    report = json.loads(captured.out)
    assert report["family"] == name and report["k"] == (2 if "hmm" in name else 3)
    assert isinstance(report["diagnostics"], dict) and report["diagnostics"]
    loaded = SpectralEstimate.load(out)
    for site, value in report["params"].items():
        np.testing.assert_allclose(loaded.params[site], np.asarray(value))


def test_version_and_module_entry_point(tmp_path):
    import subprocess
    import sys

    import specinit

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    # cwd: the installed package, not the source folder of an unpacked sdist
    done = subprocess.run([sys.executable, "-m", "specinit", "--version"], capture_output=True, text=True, check=True,
                          cwd=tmp_path)
    assert done.stdout.strip() == f"specinit {specinit.__version__}"


@pytest.mark.parametrize("case", ["out_is_dir", "out_below_file", "out_missing_dir", "dir_format_on_file",
                                  "truncated_npz", "not_utf8_sequences", "bad_option", "bad_k", "unknown_family",
                                  "alpha0_for_gmm"])
def test_fit_failures_are_one_line_with_exit_2(tmp_path, capsys, case):
    corpus = sample_lda(50, 20, 2, seed=0)
    ldac = tmp_path / "c.ldac"
    save_ldac(from_matrix(corpus.counts), ldac)
    argv = {
        "out_is_dir": ["fit", "lda", str(ldac), "--k", "2", "--out", str(tmp_path)],
        "out_below_file": ["fit", "lda", str(ldac), "--k", "2", "--out", str(ldac / "e.npz")],
        "out_missing_dir": ["fit", "lda", str(ldac), "--k", "2", "--out", str(tmp_path / "no" / "e.npz")],
        "dir_format_on_file": ["fit", "lda", str(ldac), "--k", "2", "--format", "dir"],
        "truncated_npz": ["fit", "gmm", str(tmp_path / "t.npz"), "--k", "2"],
        "not_utf8_sequences": ["fit", "hmm", str(tmp_path / "s.txt"), "--k", "2", "--option", "n_symbols=3"],
        "bad_option": ["fit", "lda", str(ldac), "--k", "2", "--option", "no-equals"],
        "bad_k": ["fit", "lda", str(ldac), "--k", "two"],
        "unknown_family": ["fit", "nonsense", str(ldac), "--k", "2"],
        "alpha0_for_gmm": ["fit", "gmm", str(ldac), "--k", "2", "--alpha0", "1"],
    }[case]
    np.savez(tmp_path / "t.npz", x=np.ones((50, 3)))
    (tmp_path / "t.npz").write_bytes((tmp_path / "t.npz").read_bytes()[:60])
    (tmp_path / "s.txt").write_bytes(b"0 1 2\n\xff\xfe 1\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("specinit: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_fit_unsupported_by_the_data_exits_3(tmp_path, capsys, monkeypatch):
    from specinit.engine.whitening import IndefiniteMomentError
    from specinit.models import lda

    path = tmp_path / "c.ldac"
    save_ldac(from_matrix(sample_lda(40, 12, 2, seed=1).counts), path)

    def indefinite(*args, **kwargs):
        raise IndefiniteMomentError("M2 is indefinite on its top 2 eigenvectors.\nTry k <= 1.")

    monkeypatch.setattr(lda, "spectral", indefinite)
    assert main(["fit", "lda", str(path), "--k", "2"]) == 3
    assert capsys.readouterr().err == "specinit: error: M2 is indefinite on its top 2 eigenvectors. Try k <= 1.\n"


def test_errors_about_the_data_name_the_file(tmp_path, capsys):
    sequences = tmp_path / "seq.txt"
    sequences.write_text("0 1 2 5 1\n1 2 0 1 2 1 0\n")
    assert main(["fit", "hmm", str(sequences), "--k", "2", "--option", "n_symbols=3"]) == 2
    assert capsys.readouterr().err == (f"specinit: error: {sequences}: The 'sequences' argument of hmm.spectral must "
                                       "be symbols in 0..2 (n_symbols = 3); got the symbol 5 instead.\n")
    # an error about another argument is not attributed to the file
    assert main(["fit", "hmm", str(sequences), "--k", "2", "--option", "n_symbols=0"]) == 2
    assert capsys.readouterr().err.startswith("specinit: error: The 'n_symbols' argument of hmm.spectral")


def test_sizes_over_the_memory_budget_exit_2(tmp_path, capsys, monkeypatch):
    sequences = tmp_path / "seq.txt"
    sequences.write_text("0 1 2 1 1\n1 2 0 1 2 1 0\n")
    monkeypatch.setenv("SPECINIT_MEMORY_LIMIT", str(2**20))
    assert main(["fit", "hmm", str(sequences), "--k", "2", "--option", "n_symbols=100000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("specinit: error: The 'n_symbols' argument of hmm.spectral asks for about 6.1 MiB")
    assert "over the memory budget of 1 MiB" in err and "SPECINIT_MEMORY_LIMIT" in err and err.count("\n") == 1
    monkeypatch.setenv("SPECINIT_MEMORY_LIMIT", "lots")
    assert main(["fit", "hmm", str(sequences), "--k", "2", "--option", "n_symbols=3"]) == 2
    assert "The environment variable SPECINIT_MEMORY_LIMIT must be a number of bytes" in capsys.readouterr().err


def test_top_must_be_positive(capsys):
    with pytest.raises(SystemExit) as info:
        main(["fit", "lda", "reuters", "--k", "2", "--top", "0"])
    assert info.value.code == 2
    assert "argument --top: must be a positive integer; got '0'" in capsys.readouterr().err


def test_every_spectral_argument_has_a_flag_that_reaches_the_family(tmp_path, capsys):
    import json

    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0, 0, 0], [5, 5, 0, 0], [0, 0, 5, 5]])
    np.save(tmp_path / "rows.npy", centres[rng.integers(0, 3, 600)] + rng.normal(size=(600, 4)))
    status = main(["fit", "gmm", str(tmp_path / "rows.npy"), "--k", "3", "--covariance", "diag", "--assign-steps",
                   "2", "--json"])
    assert status == 0
    report = json.loads(capsys.readouterr().out)
    assert np.shape(report["params"]["scale"]) == (3, 4) and report["diagnostics"]["assign_steps"] == 2
    sequences, _ = _family_files(tmp_path)["hmm"]
    assert main(["fit", "hmm", str(sequences), "--k", "2", "--n-symbols", "4", "--approach", "symmetric",
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert np.shape(report["params"]["emission"]) == (2, 4)
    # a flag of another family is refused by name, on one line
    assert main(["fit", "gmm", str(tmp_path / "rows.npy"), "--k", "3", "--n-symbols", "4"]) == 2
    err = capsys.readouterr().err
    assert "--n-symbols applies to hmm only, not gmm" in err and err.count("\n") == 1
    # a bad value is the family's own error, naming the argument
    assert main(["fit", "gmm", str(tmp_path / "rows.npy"), "--k", "3", "--covariance", "full"]) == 2
    assert "'covariance'" in capsys.readouterr().err


def test_fit_help_lists_each_family_argument_from_its_declaration(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--n-symbols VALUE hmm: V, the number of distinct symbols (int)" in out
    assert "--covariance VALUE gmm:" in out and "--em-sweeps VALUE lda: Most EM sweeps over the corpus" in out
