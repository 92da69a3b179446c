"""Command line: ``specinit demo`` and ``specinit fit``."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

__all__ = ["main"]

_FORMATS = ("auto", "ldac", "uci", "npz", "dir", "reuters")


def _load_corpus(path: str, fmt: str, vocab: str | None):
    from specinit import corpus as data

    if fmt == "reuters" or path == "reuters":
        return data.load_reuters()
    p = Path(path)
    if fmt == "auto":
        if p.is_dir():
            fmt = "dir"
        elif p.suffix == ".npz":
            fmt = "npz"
        elif p.name.startswith("docword"):
            fmt = "uci"
        else:
            fmt = "ldac"
    if fmt == "dir":
        return data.from_text_files(p, stop_words="english")
    if fmt == "uci":
        return data.load_uci_bow(p, vocab)
    if fmt == "npz":
        import scipy.sparse as sp

        return data.from_matrix(sp.load_npz(p), vocabulary=data.read_vocabulary(vocab, "specinit fit") if vocab else None)
    return data.load_ldac(p, vocab)


def _fit(args) -> int:
    from specinit.corpus import top_words, umass_coherence
    from specinit.models import lda, single_topic

    corpus = _load_corpus(args.data, args.format, args.vocab)
    start = time.perf_counter()
    if args.model == "lda":
        estimate = lda.spectral(corpus.counts, args.k, args.alpha0, method=args.method, seed=args.seed, vocabulary=corpus.vocabulary)
    else:
        estimate = single_topic.spectral(corpus.counts, args.k, method=args.method, seed=args.seed, vocabulary=corpus.vocabulary)
    elapsed = time.perf_counter() - start
    n_docs, n_words = corpus.counts.shape
    print(f"{args.model}: k={args.k}, {n_docs} documents, V={n_words}, {corpus.counts.nnz} non-zeros; fit in {elapsed:.2f} s")
    d = estimate.diagnostics
    print(f"documents used {d['n_documents']}, dropped (< 3 tokens) {d['n_dropped']}; "
          f"M2 condition number {d['m2_condition_number']:.3g}; decomposition residual {d['decomposition_residual']:.3g}")
    weights = estimate.params["alpha" if args.model == "lda" else "weights"]
    if args.model == "lda":
        chosen = " chosen from the data" if d.get("alpha0_selected") else ""
        print(f"sum(alpha_hat) = {d['alpha_sum']:.3g} (alpha0 = {d['alpha0']:.3g}{chosen})")
    coherence = umass_coherence(estimate.params["beta"], corpus.counts, n=args.top)
    for i, words in enumerate(top_words(estimate.params["beta"], corpus.vocabulary, n=args.top)):
        print(f"topic {i:2d}  weight {weights[i]:.3f}  coherence {coherence[i]:7.1f}  {' '.join(words)}")
    if args.out:
        print(f"estimate saved to {estimate.save(args.out)}")
    return 0


def _demo(args) -> int:
    from specinit.demo import run_demo

    run_demo(out_dir=Path(args.out), quick=args.quick, seed=args.seed, log=lambda msg: print(msg, flush=True))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specinit", description="Spectral (method-of-moments) estimates for NumPyro models.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="spectral fit, warm vs default NUTS and SVI on a corpus drawn from LDA")
    demo.add_argument("--out", default="specinit-demo", help="folder for plots and the saved estimate")
    demo.add_argument("--quick", action="store_true", help="tiny sizes (seconds), as run by the tests")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(handler=_demo)
    fit = sub.add_parser("fit", help="fit a topic model to a corpus and print its top words")
    fit.add_argument("model", choices=("lda", "single-topic"))
    fit.add_argument("data", help="LDA-C file, UCI docword file, .npz sparse matrix, directory of .txt files, or 'reuters'")
    fit.add_argument("--k", type=int, required=True, help="number of topics")
    fit.add_argument("--alpha0", type=float, default=None,
                     help="LDA: sum of the Dirichlet parameters used in the moments (default: chosen from the data)")
    fit.add_argument("--method", default="tpm", choices=("tpm", "svtd", "eca", "als"))
    fit.add_argument("--format", default="auto", choices=_FORMATS)
    fit.add_argument("--vocab", default=None, help="vocabulary file, one word per line")
    fit.add_argument("--top", type=int, default=10, help="top words per topic")
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--out", default=None, help="save the estimate (.npz; SpectralEstimate.load reads it)")
    fit.set_defaults(handler=_fit)
    return parser


def main(argv=None) -> int:
    """Run the ``specinit`` command line.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status (0 on success).
    """
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (ValueError, TypeError, FileNotFoundError, ImportError) as exc:
        print(f"specinit: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
