"""Seeded topics on real text with known categories: lda.spectral(seed_words=...) against the seeded peers.

Corpus (nothing downloaded): the manual pages under /usr/share/man (Debian packages), one document per page,
``--pages`` pages drawn at random (seeded) from each of the sections 1, 2, 3, 5, 7 and 8; a page's category is its
section. The seed words of each section come from the section's own name in man(1) ("Executable programs or shell
commands", "System calls (functions provided by the kernel)", ...), keeping the words of the vocabulary. k equals
the number of sections, so topic i is meant to be section i's.

Protocol (the same for every method): ``--test-pages`` pages per section held out at random (seeded); each method
fits on the rest; every held-out page is assigned to the topic of largest proportion (theta folded in given the
method's topics and Dirichlet prior, :func:`lda.document_topics`; CorEx: its own ``transform``). For seeded
methods topic i is seed group i's; unseeded spectral is scored with the best one-to-one matching of its topics to
the sections (Hungarian, on the held-out pages: a bound no user gets without labels). Reported: per-section
precision and recall of "assigned to topic i" for "in section i" (macro F1 over sections), NMI between the
assignment and the sections, held-out document-completion perplexity (:func:`specinit.corpus.document_completion`;
not defined for CorEx), mean UMass coherence of the top 10 words, and fit time.

    python benchmarks/bench_seeded.py
    python benchmarks/bench_seeded.py --pages 150 --only spectral
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

sys.path.insert(0, os.path.dirname(__file__))
from _common import machine, table, timed  # noqa: E402
from bench_lda_real import tomotopy_lda  # noqa: E402

from specinit.corpus import document_completion, load_man_pages, umass_coherence  # noqa: E402
from specinit.models import lda  # noqa: E402

#: The manual's sections and their names in man(1); the seed words are taken from the names.
SECTIONS = {
    "1": ("Executable programs or shell commands", ["program", "shell", "command", "commands", "executable"]),
    "2": ("System calls (functions provided by the kernel)", ["system", "call", "calls", "kernel"]),
    "3": ("Library calls (functions within program libraries)", ["library", "libraries", "function", "functions"]),
    "5": ("File formats and conventions", ["file", "format", "formats", "conventions"]),
    "7": ("Miscellaneous (including macro packages and conventions)", ["miscellaneous", "macro", "packages"]),
    "8": ("System administration commands (usually only for root)", ["administration", "root"]),
}


def load(pages: int, seed: int):
    """Pages of each section (a seeded sample), one document per page; returns counts, vocabulary, sections."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as root:
        for section in SECTIONS:
            files = sorted(p for p in Path(f"/usr/share/man/man{section}").glob("*") if p.is_file())
            (Path(root) / f"man{section}").mkdir()
            for path in rng.sample(files, min(len(files), 3 * pages)):  # some are .so links, skipped by the reader
                (Path(root) / f"man{section}" / path.name).symlink_to(path)
        corpus = load_man_pages(root, sections=tuple(SECTIONS), unit="section", min_df=5, max_df=0.5,
                                max_words=10_000)
    page = np.array([name.split("#")[0] for name in corpus.names])
    pages_found, row = np.unique(page, return_inverse=True)
    by_page = sp.csr_matrix((np.ones(len(row)), (row, np.arange(len(row)))), shape=(len(pages_found), len(row)))
    X = by_page @ corpus.counts
    section = np.array([name.split("/")[0] for name in pages_found])
    keep = []
    for s in SECTIONS:
        rows = list(np.flatnonzero(section == s))
        keep.extend(sorted(rng.sample(rows, min(pages, len(rows)))))
    keep = np.asarray(keep)
    return sp.csr_matrix(X[keep], dtype=np.float64), list(corpus.vocabulary), section[keep]


def split(sections, test_pages: int, seed: int):
    rng = np.random.default_rng(seed)
    test = np.concatenate([rng.permutation(np.flatnonzero(sections == s))[:test_pages] for s in SECTIONS])
    return np.setdiff1d(np.arange(len(sections)), test), np.sort(test)


def spectral(train, k, seed, seeds, vocabulary, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est, seconds = timed(lda.spectral, train, k, seed=seed, doc_topics=False, vocabulary=vocabulary,
                             seed_words=seeds, **options)
    note = "; ".join(str(w.message)[:100] for w in caught[:1])
    if seeds is not None:
        support = np.array2string(est.diagnostics["seed/support"], precision=2)
        note = f"support {support}" + (f"; {note}" if note else "")
    return est.params["beta"], est.params["alpha"], seconds, note


def tomotopy_seeded(train, k, seed, seeds, vocabulary, iterations):
    # tomotopy's documented seeding: a larger prior on the word in its topic
    priors = {word: [1.0 if t == i else 0.1 for t in range(k)] for i, words in enumerate(seeds.values())
              for word in words}
    beta, alpha, seconds, _ = tomotopy_lda(train, k, seed, vocabulary, iterations, word_priors=priors)
    return beta, alpha, seconds, f"{iterations} Gibbs sweeps, 2 threads, word priors 1.0 / 0.1"


def corex_anchored(train, k, seed, seeds, vocabulary, strength):
    from corextopic import corextopic as ct

    model = ct.Corex(n_hidden=k, seed=seed)
    binary = sp.csr_matrix((train > 0).astype(np.int8))
    _, seconds = timed(model.fit, binary, words=vocabulary, anchors=[list(g) for g in seeds.values()],
                       anchor_strength=strength)
    return model, seconds, f"anchor_strength={strength}, binary counts"


def scores(assigned, sections, n_topics, matched: bool):
    from sklearn.metrics import normalized_mutual_info_score

    names = list(SECTIONS)
    truth = np.array([names.index(s) for s in sections])
    contingency = np.zeros((n_topics, len(names)))
    np.add.at(contingency, (assigned, truth), 1)
    topic_of = np.arange(len(names))
    if matched:  # the best one-to-one map of topics to sections
        rows, cols = linear_sum_assignment(-contingency)
        topic_of = np.empty(len(names), dtype=int)
        topic_of[cols] = rows
    hits = contingency[topic_of, np.arange(len(names))]
    precision = hits / np.maximum(contingency[topic_of].sum(axis=1), 1)
    recall = hits / np.maximum(contingency.sum(axis=0), 1)
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    return precision, recall, float(f1.mean()), float(normalized_mutual_info_score(truth, assigned))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=400, help="pages per section")
    parser.add_argument("--test-pages", type=int, default=100, help="held-out pages per section")
    parser.add_argument("--tomotopy-iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated words: run only the methods whose label has one")
    args = parser.parse_args(argv)
    print(f"# Seeded topics on manual pages by section\n\nMachine: {machine()}; load average at start "
          f"{os.getloadavg()[0]:.1f}")
    X, vocabulary, sections = load(args.pages, args.seed)
    train_rows, test_rows = split(sections, args.test_pages, args.seed)
    train, test = X[train_rows], X[test_rows]
    present = set(vocabulary)
    seeds = {name: [w for w in words if w in present] for name, (_, words) in SECTIONS.items()}
    k = len(SECTIONS)
    print(f"\n{train.shape[0]} training + {test.shape[0]} held-out pages ({args.pages} per section), V = {X.shape[1]}, "
          f"{np.asarray(X.sum(axis=1)).mean():.0f} tokens per page, k = {k}")
    for name, (title, words) in SECTIONS.items():
        print(f"  section {name} ({title}): seeds {' '.join(seeds[name])}"
              + (f" (not in the vocabulary: {' '.join(sorted(set(words) - present))})" if set(words) - present else ""))
    methods = [
        ("lda.spectral, unseeded (best matching)", lambda: spectral(train, k, args.seed, None, vocabulary), True),
        ("lda.spectral, seed_words (pooled anchors)", lambda: spectral(train, k, args.seed, seeds, vocabulary), False),
        ("lda.spectral, seed_words, seed_anchor='farthest'",
         lambda: spectral(train, k, args.seed, seeds, vocabulary, seed_anchor="farthest"), False),
        ("lda.spectral, seed_words, seed_prior=0",
         lambda: spectral(train, k, args.seed, seeds, vocabulary, seed_prior=0.0), False),
        ("lda.spectral, seed_words, seed_prior=10",
         lambda: spectral(train, k, args.seed, seeds, vocabulary, seed_prior=10.0), False),
        ("tomotopy LDAModel, seeded word priors",
         lambda: tomotopy_seeded(train, k, args.seed, seeds, vocabulary, args.tomotopy_iterations), False),
        ("anchored CorEx", lambda: corex_anchored(train, k, args.seed, seeds, vocabulary, 3.0), False),
    ]
    if args.only:
        methods = [m for m in methods if any(word in m[0] for word in args.only.split(","))]
    rows = []
    for label, fit, matched in methods:
        try:
            result = fit()
        except Exception as exc:  # a peer that is not installed or fails is reported, not fatal
            rows.append([label, "-", "-", "-", "-", "-", "-", f"failed: {type(exc).__name__}: {str(exc)[:80]}"])
            continue
        if "CorEx" in label:
            model, seconds, note = result
            proportions = model.transform(sp.csr_matrix((test > 0).astype(np.int8)), details=True)[0]
            assigned = np.argmax(proportions, axis=1)
            perplexity, coherence = "-", "-"
        else:
            beta, alpha, seconds, note = result
            assigned = np.argmax(lda.document_topics(test, beta, alpha), axis=1)
            perplexity = f"{document_completion(test, beta, alpha, seed=args.seed).perplexity:.0f}"
            coherence = f"{np.mean(umass_coherence(beta, train, n=10)):.2f}"
        precision, recall, f1, nmi = scores(assigned, sections[test_rows], k, matched)
        rows.append([label, f"{seconds:.2f}", np.array2string(precision, precision=2),
                     np.array2string(recall, precision=2), f"{f1:.3f}", f"{nmi:.3f}", perplexity, coherence, note])
        print(f"  {label}: {seconds:.2f} s, macro F1 {f1:.3f}, NMI {nmi:.3f}, perplexity {perplexity}", flush=True)
    print()
    print(table(["method", "fit time (s)", "precision by section", "recall by section", "macro F1", "NMI",
                 "held-out perplexity", "UMass (top 10)", "notes"], rows))


if __name__ == "__main__":
    main()
