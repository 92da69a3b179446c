"""Figures of the benchmark summary, drawn from the tables of ``benchmarks/RESULTS.md`` (no number is retyped).

Each function draws one figure for the documentation's ``.. plot::`` directive from the first tables
of one section of RESULTS.md, located by the start of its heading. ``python docs/benchmark_plots.py``
draws them all into ``benchmark_*.png`` in the working directory.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "RESULTS.md"
SPECINIT = "C3"
PEER = "C0"


def section(heading: str, text: str | None = None) -> str:
    """The text of the ``## `` section whose heading starts with ``heading``, up to its first sub-section."""
    text = RESULTS.read_text() if text is None else text
    match = re.search(rf"^## {re.escape(heading)}.*?\n(.*?)(?=^##)", text, flags=re.S | re.M)
    if match is None:
        raise ValueError(f"{RESULTS} has no section starting '## {heading}'")
    return match.group(1)


def tables(text: str) -> list[tuple[str, list[dict[str, str]]]]:
    """The Markdown tables of ``text``: (the paragraph before the table, rows as header -> cell)."""
    found = []
    for match in re.finditer(r"((?:^[^|\n].*\n)*)\n?((?:^\|.*\|\n)+)", text, flags=re.M):
        lines = match.group(2).strip().splitlines()
        header = [cell.strip() for cell in lines[0].strip("|").split("|")]
        rows = [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]
        found.append((" ".join(match.group(1).split()), rows))
    return found


def number(cell: str) -> float:
    """A table cell as a number: emphasis, thousands separators and units dropped."""
    cleaned = re.sub(r"[*`,x]|\s", "", cell)
    return float(re.match(r"-?[0-9.]+(e-?[0-9]+)?", cleaned).group(0))


def label(cell: str) -> str:
    """A method's name without its parenthesised notes (``lda.spectral(em_sweeps=0)`` keeps its arguments)."""
    return re.sub(r"\s+\(.*", "", cell.replace("`", "")).strip()


def is_specinit(method: str) -> bool:
    return "spectral" in method or "specinit" in method


def real_text_lda():
    """Held-out perplexity against fit time on three real corpora: specinit's LDA and its peers."""
    found = tables(section("Real text: spectral LDA vs variational Bayes and Gibbs"))[:3]
    fig, axes = plt.subplots(1, len(found), figsize=(4.4 * len(found), 4.6), layout="constrained")
    for ax, (caption, rows) in zip(axes, found):
        for row in rows:
            method = label(row["method"])
            ax.scatter(number(row["fit time (s)"]), number(row["held-out perplexity"]),
                       color=SPECINIT if is_specinit(method) else PEER)
            ax.annotate(method, (number(row["fit time (s)"]), number(row["held-out perplexity"])), fontsize=6,
                        xytext=(3, 3), textcoords="offset points")
        ax.set(xscale="log", xlabel="fit time (s, log)", ylabel="held-out perplexity",
               title=caption.split(" (")[0][:40])
    fig.suptitle("Real text, k = 20: specinit (red) and peers (blue)")
    return fig


def synthetic_lda():
    """Topic error against time on a synthetic LDA corpus (N = 20,000, V = 5,000, k = 20)."""
    _, rows = tables(section("Topic models"))[0]
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    for row in rows:
        if row["mean L1 topic error"] in ("-", ""):
            continue
        method = label(row["method"]).replace("specinit ", "")
        x, y = number(row["time (s)"]), number(row["mean L1 topic error"])
        ax.scatter(x, y, color=SPECINIT if is_specinit(row["method"]) else PEER)
        ax.annotate(method, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set(xscale="log", xlabel="time (s, log)", ylabel="mean L1 topic error (lower is better)",
           title="Synthetic LDA: specinit (red) and scikit-learn (blue)")
    return fig


def hmm_and_gmm():
    """Time of the spectral fit against EM from its default start: categorical HMMs (hmmlearn) and spherical GMMs."""
    _, hmm_rows = tables(section("Hidden Markov models"))[0]
    _, gmm_rows = tables(section("Gaussian mixtures"))[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    names = [f"k={r['k']}, V={r['V']}, T={r['T']}" for r in hmm_rows]
    positions = range(len(hmm_rows))
    left.barh([p + 0.2 for p in positions], [number(r["spectral (s)"]) for r in hmm_rows], 0.4, color=SPECINIT,
              label="spectral")
    left.barh([p - 0.2 for p in positions], [number(r["EM default init (s)"]) for r in hmm_rows], 0.4, color=PEER,
              label="hmmlearn EM, default init")
    left.set(yticks=list(positions), yticklabels=names, xscale="log", xlabel="seconds (log)",
             title="Categorical HMM")
    left.legend(fontsize=8)
    spectral = [number(r["spectral (s)"]) for r in gmm_rows]
    em = [number(r["EM k-means init (s)"]) for r in gmm_rows]
    right.scatter(em, spectral, color=SPECINIT)
    for r, x, y in zip(gmm_rows, em, spectral):
        right.annotate(f"d={r['d']}, k={r['k']}, N={r['N']}", (x, y), fontsize=6, xytext=(3, -3),
                       textcoords="offset points")
    low, high = min(spectral + em) / 2, max(spectral + em) * 2
    right.plot([low, high], [low, high], color="grey", linestyle=":", label="equal time")
    right.set(xscale="log", yscale="log", xlabel="scikit-learn k-means + EM (s)", ylabel="spectral (s)",
              title="Spherical Gaussian mixture")
    right.legend(fontsize=8)
    return fig


if __name__ == "__main__":
    for draw in (real_text_lda, synthetic_lda, hmm_and_gmm):
        draw().savefig(f"benchmark_{draw.__name__}.png", dpi=90)
