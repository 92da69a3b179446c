"""LDA on real text, offline: lda.spectral against anchortopics, scikit-learn, gensim and tomotopy in one run.

Corpora (nothing downloaded):
* ``python``: paragraphs of the docstrings of the Python standard library (:func:`load_python_docs`; short
  technical text);
* ``man``: sections of the manual pages under /usr/share/man (:func:`load_man_pages`, Debian packages), a seeded
  random subset of ``--man-docs`` documents (longer technical text);
* ``reuters``: the 395 Reuters news articles shipped with the ``lda`` package (:func:`load_reuters`; long
  documents, few of them).

Protocol (the same for every method): ``--test-docs`` documents (at most a fifth of the corpus) held out at
random (seeded); each method fits
on the rest; held-out document-completion perplexity (:func:`specinit.corpus.document_completion`: half of
each held-out document's tokens fold theta in with 50 EM steps given the method's topics and Dirichlet prior,
the other half is scored); UMass coherence of the top 10 words of each topic on the training counts (mean
over topics); wall time of the fit alone (the conversion of the counts to gensim/tomotopy input is not timed).
Methods without a Dirichlet prior of their own (anchortopics) are scored with ``alpha = 1/k`` per topic, the
prior of ``lda.spectral`` and scikit-learn's default.

    python benchmarks/bench_lda_real.py                    # all three corpora, k = 20
    python benchmarks/bench_lda_real.py --corpus python --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _common import machine, table, timed  # noqa: E402

from specinit.corpus import document_completion, load_man_pages, load_python_docs, load_reuters, umass_coherence  # noqa: E402
from specinit.engine.support import project_to_simplex  # noqa: E402
from specinit.models import lda  # noqa: E402


def load(name: str, man_docs: int, seed: int):
    if name == "python":
        corpus = load_python_docs(("stdlib",))
        return corpus.counts, list(corpus.vocabulary)
    if name == "reuters":
        corpus = load_reuters()
        return corpus.counts, list(corpus.vocabulary)
    corpus = load_man_pages(unit="section")
    rows = np.sort(np.random.default_rng(seed).permutation(corpus.counts.shape[0])[:man_docs])
    X = corpus.counts[rows]
    used = np.flatnonzero(np.asarray(X.sum(axis=0)).ravel() >= 5)
    return X[:, used], [corpus.vocabulary[j] for j in used]


def split(X, n_test: int, seed: int):
    perm = np.random.default_rng(seed).permutation(X.shape[0])
    return X[perm[n_test:]], X[perm[:n_test]]


def as_token_lists(X, vocabulary):
    X = sp.csr_matrix(X)
    return [[vocabulary[j] for j, c in zip(X.indices[X.indptr[d]:X.indptr[d + 1]], X.data[X.indptr[d]:X.indptr[d + 1]])
             for _ in range(int(c))] for d in range(X.shape[0])]


def spectral(train, k, seed, **options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est, seconds = timed(lda.spectral, train, k, seed=seed, doc_topics=False, **options)
    d = est.diagnostics
    note = f"{d['method']}, {d['weighting']} weighting"
    note += f", alpha0={d['alpha0']:.3g}" if "alpha0" in d else f", {d['anchor_negative_eigenvalues_cut']} negative eigenvalues cut"
    note += f", {d.get('closing_sweeps', 0)} EM sweeps"
    if caught:
        note += f"; {len(caught)} warning(s): " + "; ".join(str(w.message)[:90] for w in caught[:2])
    return est.params["beta"], est.params["alpha"], seconds, note


def anchortopics_otfr(train, k):
    from anchortopics import OTFR

    model, seconds = timed(OTFR(n_topics=k).fit, train)
    beta, _ = project_to_simplex(model.components_, 1e-3)  # the floor lda.spectral uses
    return beta, np.full(k, 1.0 / k), seconds, "on-the-fly rectified anchor words, alpha = 1/k"


def sklearn_lda(train, k, seed, method):
    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(k, max_iter=10, learning_method=method, random_state=seed)
    _, seconds = timed(model.fit, train)
    beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
    return beta, np.full(k, model.doc_topic_prior_), seconds, "max_iter=10"


def gensim_lda(train, k, seed, vocabulary):
    from gensim.models import LdaModel

    X = sp.csr_matrix(train)
    bow = [list(zip(X.indices[X.indptr[d]:X.indptr[d + 1]].tolist(), X.data[X.indptr[d]:X.indptr[d + 1]].astype(int).tolist()))
           for d in range(X.shape[0])]
    id2word = dict(enumerate(vocabulary))
    model, seconds = timed(LdaModel, bow, num_topics=k, id2word=id2word, passes=1, iterations=50, random_state=seed,
                           chunksize=2000)
    beta = model.get_topics()
    beta = beta / beta.sum(axis=1, keepdims=True)
    return beta, np.asarray(model.alpha, dtype=np.float64), seconds, "passes=1, iterations=50"


def tomotopy_lda(train, k, seed, vocabulary, iterations, word_priors=None):
    """tomotopy's LDA; ``word_priors`` (word -> per-topic prior) seeds it through ``set_word_prior``."""
    import tomotopy as tp

    model = tp.LDAModel(k=k, seed=seed)
    for word, prior in (word_priors or {}).items():
        model.set_word_prior(word, prior)
    for words in as_token_lists(train, vocabulary):
        if words:
            model.add_doc(words)

    def fit():
        model.train(iterations, workers=2)

    _, seconds = timed(fit)
    index = {w: i for i, w in enumerate(model.used_vocabs)}
    order = np.array([index.get(w, -1) for w in vocabulary])
    beta = np.full((k, len(vocabulary)), 1e-12)
    for t in range(k):
        dist = np.asarray(model.get_topic_word_dist(t), dtype=np.float64)
        beta[t, order >= 0] = dist[order[order >= 0]]
    beta /= beta.sum(axis=1, keepdims=True)
    return beta, np.asarray(model.alpha, dtype=np.float64), seconds, f"{iterations} Gibbs sweeps, 2 threads"


def run(name, args):
    X, vocabulary = load(name, args.man_docs, args.seed)
    X = sp.csr_matrix(X, dtype=np.float64)
    train, test = split(X, min(args.test_docs, X.shape[0] // 5), args.seed)
    k = args.k
    lengths = np.asarray(X.sum(axis=1)).ravel()
    print(f"\n## {name}: {train.shape[0]} training + {test.shape[0]} held-out documents, V = {X.shape[1]}, "
          f"{lengths.mean():.1f} tokens per document, k = {k}\n", flush=True)
    methods = [
        ("lda.spectral (default)", lambda: spectral(train, k, args.seed)),
        ("lda.spectral, em_sweeps=0", lambda: spectral(train, k, args.seed, em_sweeps=0)),
        ("lda.spectral, method='tpm'", lambda: spectral(train, k, args.seed, method="tpm", em_sweeps=0)),
        ("anchortopics OTFR", lambda: anchortopics_otfr(train, k)),
        ("scikit-learn LDA batch", lambda: sklearn_lda(train, k, args.seed, "batch")),
        ("scikit-learn LDA online", lambda: sklearn_lda(train, k, args.seed, "online")),
        ("gensim LdaModel", lambda: gensim_lda(train, k, args.seed, vocabulary)),
        ("tomotopy LDAModel", lambda: tomotopy_lda(train, k, args.seed, vocabulary, args.tomotopy_iterations)),
    ]
    if args.quick:
        methods = [m for m in methods if "online" not in m[0] and "gensim" not in m[0]]
    if args.only:
        methods = [m for m in methods if any(word in m[0] for word in args.only.split(","))]
    rows, results = [], {}
    for label, fit in methods:
        try:
            beta, alpha, seconds, note = fit()
        except Exception as exc:  # a peer that is not installed or fails is reported, not fatal
            rows.append([label, "-", "-", "-", f"failed: {type(exc).__name__}: {str(exc)[:80]}"])
            continue
        held = document_completion(test, beta, alpha, seed=args.seed)
        coherence = float(np.mean(umass_coherence(beta, train, n=10)))
        results[label] = (seconds, held.perplexity)
        rows.append([label, f"{seconds:.2f}", f"{held.perplexity:.0f}", f"{coherence:.2f}", note])
        print(f"  {label}: {seconds:.2f} s, perplexity {held.perplexity:.0f}, UMass {coherence:.2f}", flush=True)
    print()
    print(table(["method", "fit time (s)", "held-out perplexity", "UMass coherence (top 10)", "notes"], rows))
    spec = results.get("lda.spectral (default)")
    for peer, targets in (("anchortopics OTFR", "targets <= 0.95 and <= 2"), ("scikit-learn LDA batch",
                                                                              "targets <= 1.15 and <= 0.02")):
        if spec and peer in results:
            print(f"\nlda.spectral (default) / {peer}: perplexity ratio {spec[1] / results[peer][1]:.3f}, "
                  f"time ratio {spec[0] / results[peer][0]:.3f} ({targets})")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", choices=["python", "man", "reuters", "all"], default="all")
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--test-docs", type=int, default=2000)
    parser.add_argument("--man-docs", type=int, default=40000, help="documents drawn from the man-page sections")
    parser.add_argument("--tomotopy-iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="spectral, anchortopics, sklearn batch and tomotopy only")
    parser.add_argument("--only", default="", help="comma-separated words: run only the methods whose label has one")
    args = parser.parse_args(argv)
    print(f"# LDA on real text\n\nMachine: {machine()}; OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}; "
          f"load average at start {os.getloadavg()[0]:.1f}")
    for name in (["python", "man", "reuters"] if args.corpus == "all" else [args.corpus]):
        run(name, args)


if __name__ == "__main__":
    main()
