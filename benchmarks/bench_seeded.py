"""Seeded topics on real text with known categories: lda.spectral(seed_words=...) against the seeded peers.

Corpora (nothing downloaded), each document with a known category:

* ``man``: the manual pages under /usr/share/man (Debian packages), one document per page, ``--pages`` pages
  drawn at random (seeded) from each of the sections 1, 2, 3, 5, 7 and 8; a page's category is its section. The
  seed words of a section come from its name in man(1) ("Executable programs or shell commands", "System calls
  (functions provided by the kernel)", ...).
* ``python``: the docstring paragraphs of eight standard-library packages (:func:`load_python_docs`); a
  paragraph's category is its package. The seed words of a package are its name and the words of its one-line
  title in the library reference ("email -- An email and MIME handling package", ...).

k equals the number of categories, so topic i is meant to be category i's; seed words not in the vocabulary are
dropped (and listed).

Protocol (the same for every method): a quarter of each category's documents held out at random (seeded); each
method fits on the rest; every held-out document is assigned to the topic of largest proportion (theta folded in
given the method's topics and Dirichlet prior, :func:`lda.document_topics`; CorEx: its own ``transform``). For
seeded methods topic i is seed group i's; unseeded spectral is scored with the best one-to-one matching of its
topics to the categories (Hungarian, on the held-out documents: a bound no user gets without labels). Reported:
per-category precision and recall of "assigned to topic i" for "in category i" (macro F1 over categories), NMI
between the assignment and the categories, held-out document-completion perplexity
(:func:`specinit.corpus.document_completion`; not defined for CorEx), mean UMass coherence of the top 10 words,
and fit time (the fastest of ``--repeat`` fits: a shared machine's load inflates single runs).

    python benchmarks/bench_seeded.py
    python benchmarks/bench_seeded.py --corpus python --only spectral
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

from specinit.corpus import document_completion, load_man_pages, load_python_docs, umass_coherence  # noqa: E402
from specinit.models import lda  # noqa: E402
from specinit.models._topics import SEED_ANCHORS  # noqa: E402

#: The manual's sections and their names in man(1); the seed words are taken from the names.
SECTIONS = {
    "1": ("Executable programs or shell commands", ["program", "shell", "command", "commands", "executable"]),
    "2": ("System calls (functions provided by the kernel)", ["system", "call", "calls", "kernel"]),
    "3": ("Library calls (functions within program libraries)", ["library", "libraries", "function", "functions"]),
    "5": ("File formats and conventions", ["file", "format", "formats", "conventions"]),
    "7": ("Miscellaneous (including macro packages and conventions)", ["miscellaneous", "macro", "packages"]),
    "8": ("System administration commands (usually only for root)", ["administration", "root"]),
}

#: Standard-library packages and their titles in the library reference; the seed words are taken from them.
PACKAGES = {
    "email": ("An email and MIME handling package", ["email", "mime", "handling"]),
    "asyncio": ("Asynchronous I/O", ["asyncio", "asynchronous"]),
    "unittest": ("Unit testing framework", ["unittest", "unit", "testing", "framework"]),
    "xml": ("XML Processing Modules", ["xml", "processing"]),
    "tkinter": ("Python interface to Tcl/Tk", ["tkinter", "tcl", "tk", "interface"]),
    "http": ("HTTP modules", ["http"]),
    "logging": ("Logging facility for Python", ["logging", "facility"]),
    "multiprocessing": ("Process-based parallelism", ["multiprocessing", "process", "parallelism"]),
}


def load_man(pages: int, seed: int):
    """Pages of each section (a seeded sample), one document per page: counts, vocabulary, categories."""
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


def load_python():
    """Docstring paragraphs of the packages of :data:`PACKAGES`: counts, vocabulary, categories."""
    corpus = load_python_docs(tuple(PACKAGES))
    package = np.array([name.split("/")[0] for name in corpus.names])
    return sp.csr_matrix(corpus.counts, dtype=np.float64), list(corpus.vocabulary), package


def split(categories, names, seed: int):
    rng = np.random.default_rng(seed)
    test = np.concatenate([rng.permutation(np.flatnonzero(categories == c))[: np.sum(categories == c) // 4]
                           for c in names])
    return np.setdiff1d(np.arange(len(categories)), test), np.sort(test)


def spectral(train, k, seed, seeds, vocabulary, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est, seconds = timed(lda.spectral, train, k, seed=seed, doc_topics=False, vocabulary=vocabulary,
                             seed_words=seeds, **options)
    note = f"{est.diagnostics.get('closing_sweeps', 0)} EM sweeps"
    if seeds is not None:
        note += f"; support {np.array2string(est.diagnostics['seed/support'], precision=2)}"
    note += "".join(f"; {str(w.message)[:100]}" for w in caught[:1])
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


def scores(assigned, categories, names, n_topics, matched: bool):
    from sklearn.metrics import normalized_mutual_info_score

    truth = np.array([names.index(c) for c in categories])
    contingency = np.zeros((n_topics, len(names)))
    np.add.at(contingency, (assigned, truth), 1)
    topic_of = np.arange(len(names))
    if matched:  # the best one-to-one map of topics to categories
        rows, cols = linear_sum_assignment(-contingency)
        topic_of = np.empty(len(names), dtype=int)
        topic_of[cols] = rows
    hits = contingency[topic_of, np.arange(len(names))]
    precision = hits / np.maximum(contingency[topic_of].sum(axis=1), 1)
    recall = hits / np.maximum(contingency.sum(axis=0), 1)
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    return precision, recall, float(f1.mean()), float(normalized_mutual_info_score(truth, assigned))


def run(name, args):
    X, vocabulary, categories = load_man(args.pages, args.seed) if name == "man" else load_python()
    table_of = SECTIONS if name == "man" else PACKAGES
    names = list(table_of)
    train_rows, test_rows = split(categories, names, args.seed)
    train, test = X[train_rows], X[test_rows]
    present = set(vocabulary)
    seeds = {category: [w for w in words if w in present] for category, (_, words) in table_of.items()}
    k = len(names)
    print(f"\n## {name}: {train.shape[0]} training + {test.shape[0]} held-out documents, V = {X.shape[1]}, "
          f"{np.asarray(X.sum(axis=1)).mean():.0f} tokens per document, k = {k}\n")
    for category, (title, words) in table_of.items():
        missing = sorted(set(words) - present)
        print(f"* {category} ({title}): {np.sum(categories == category)} documents, seeds {' '.join(seeds[category])}"
              + (f" (not in the vocabulary: {' '.join(missing)})" if missing else ""))
    methods = [
        ("lda.spectral, unseeded (best matching)", lambda: spectral(train, k, args.seed, None, vocabulary), True),
        (f"lda.spectral, unseeded, em_sweeps={lda.SEEDED_SWEEPS} (best matching)",
         lambda: spectral(train, k, args.seed, None, vocabulary, em_sweeps=lda.SEEDED_SWEEPS), True),
        ("lda.spectral, seed_words", lambda: spectral(train, k, args.seed, seeds, vocabulary), False),
        (f"lda.spectral, seed_words, em_sweeps={lda.EM_SWEEPS}",
         lambda: spectral(train, k, args.seed, seeds, vocabulary, em_sweeps=lda.EM_SWEEPS), False),
        *[(f"lda.spectral, seed_words, seed_anchor='{how}'",
           lambda how=how: spectral(train, k, args.seed, seeds, vocabulary, seed_anchor=how), False)
          for how in SEED_ANCHORS if how != lda.FAMILY.options["seed_anchor"].default],
        ("lda.spectral, seed_words, seed_prior=0",
         lambda: spectral(train, k, args.seed, seeds, vocabulary, seed_prior=0.0), False),
        ("tomotopy LDAModel, seeded word priors",
         lambda: tomotopy_seeded(train, k, args.seed, seeds, vocabulary, args.tomotopy_iterations), False),
        ("anchored CorEx", lambda: corex_anchored(train, k, args.seed, seeds, vocabulary, 3.0), False),
    ]
    if args.only:
        methods = [m for m in methods if any(word in m[0] for word in args.only.split(","))]
    rows = []
    for label, fit, matched in methods:
        try:
            results = [fit() for _ in range(args.repeat)]
        except Exception as exc:  # a peer that is not installed or fails is reported, not fatal
            rows.append([label, "-", "-", "-", "-", "-", "-", "-", f"failed: {type(exc).__name__}: {str(exc)[:80]}"])
            continue
        result = results[0]
        fastest = min(r[-2] for r in results)  # the fit time of every method is its second-to-last result
        if "CorEx" in label:
            model, _, note = result
            seconds = fastest
            proportions = model.transform(sp.csr_matrix((test > 0).astype(np.int8)), details=True)[0]
            assigned = np.argmax(proportions, axis=1)
            perplexity, coherence = "-", "-"
        else:
            beta, alpha, _, note = result
            seconds = fastest
            assigned = np.argmax(lda.document_topics(test, beta, alpha), axis=1)
            perplexity = f"{document_completion(test, beta, alpha, seed=args.seed).perplexity:.0f}"
            coherence = f"{np.mean(umass_coherence(beta, train, n=10)):.2f}"
        precision, recall, f1, nmi = scores(assigned, categories[test_rows], names, k, matched)
        rows.append([label, f"{seconds:.2f}", np.array2string(precision, precision=2),
                     np.array2string(recall, precision=2), f"{f1:.3f}", f"{nmi:.3f}", perplexity, coherence, note])
        print(f"  {label}: {seconds:.2f} s, macro F1 {f1:.3f}, NMI {nmi:.3f}, perplexity {perplexity}", flush=True)
    print()
    print(table(["method", "fit time (s)", "precision by category", "recall by category", "macro F1", "NMI",
                 "held-out perplexity", "UMass (top 10)", "notes"], rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=["man", "python", "all"], default="all")
    parser.add_argument("--pages", type=int, default=400, help="man: pages per section")
    parser.add_argument("--tomotopy-iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3, help="fits of each method; the fastest one's time is reported "
                        "(the scores are the first fit's)")
    parser.add_argument("--only", default="", help="comma-separated words: run only the methods whose label has one")
    args = parser.parse_args(argv)
    print(f"# Seeded topics on real text with known categories\n\nMachine: {machine()}; load average at start "
          f"{os.getloadavg()[0]:.1f}")
    for name in (["python", "man"] if args.corpus == "all" else [args.corpus]):
        run(name, args)


if __name__ == "__main__":
    main()
