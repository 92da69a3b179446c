"""Online LDA on real text: ``lda.update`` batch by batch against scikit-learn's ``partial_fit`` (online VB)
and against one ``lda.spectral`` fit on everything, in one run.

Corpus (nothing downloaded): paragraphs of the docstrings of the Python standard library
(:func:`specinit.corpus.load_python_docs`; ``--corpus man`` for a seeded sample of Debian manual-page sections,
loaded as ``bench_lda_real.py`` loads them), ``--test-docs`` of them held out at random (seeded); the rest
arrives in ``--batches`` batches in a seeded random order. After every batch each online method is scored by
held-out document-completion perplexity (:func:`specinit.corpus.document_completion`: half of each held-out
document's tokens fold theta in, the other half is scored); the table gives the perplexity after the first and
the last batch, the total time of the updates, and the matched L1 distance of the final topics to the one fit.
``SpectralLDA.partial_fit`` is timed as a stream that is read once, after the last batch (its recovery waits for
the first read); read after every batch it returns the ``lda.update`` estimates.
The ``lda`` arms are timed warm (an untimed call of each on the first batches loads the compiled kernels).

With ``--synthetic``, corpora drawn from LDA (``sample_lda``, alpha = 0.3, 60 tokens a document, seed 1) arrive in
batches of the given size; the table gives the matched L1 distance of the online topics to the one fit and of
both to the truth, and the time of all updates against the one fit (both warm); then the same for
``SpectralLDA.partial_fit`` read once, after the last batch.

    python benchmarks/bench_lda_online.py
    python benchmarks/bench_lda_online.py --batches 5 --k 10
    python benchmarks/bench_lda_online.py --synthetic
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from _common import machine, matched_l1, table, timed  # noqa: E402

from bench_lda_real import load  # noqa: E402
from specinit.corpus import document_completion  # noqa: E402
from specinit.models import lda  # noqa: E402


def perplexity(test, beta, alpha) -> float:
    return float(document_completion(test, beta, alpha).perplexity)


#: Synthetic corpora of ``--synthetic``: documents, vocabulary, topics, batch size.
SYNTHETIC = [(3_000, 60, 4, 1_000), (3_000, 60, 4, 300), (10_000, 500, 10, 1_000), (20_000, 2_000, 20, 2_000)]


def stream_once(batches, k: int, seed: int):
    """``SpectralLDA.partial_fit`` on every batch, then one read (where its deferred recovery runs): the model and
    the seconds of all of it."""
    from specinit.estimators import SpectralLDA

    model, seconds = SpectralLDA(k, random_state=seed), 0.0
    for batch in batches:
        seconds += timed(model.partial_fit, batch)[1]
    return model, seconds + timed(getattr, model, "components_")[1]


def synthetic() -> None:
    from specinit.synthetic import sample_lda

    print(f"# Online LDA on synthetic corpora, {machine()}\n", flush=True)
    rows = []
    for n, vocab, k, size in SYNTHETIC:
        corpus = sample_lda(n, vocab, k, alpha=0.3, doc_length=60, seed=1)
        X = sp.csr_matrix(corpus.counts, dtype=np.float64)
        batches = [X[start: start + size] for start in range(0, n, size)]
        lda.spectral(batches[0], k, seed=0, doc_topics=False)  # warm: the compiled kernels load here
        lda.update(batches[0], k=k, seed=0)
        stream_once(batches[:3], k, seed=0)
        once, once_seconds = timed(lda.spectral, X, k, seed=0, doc_topics=False)
        estimate, seconds = None, 0.0
        for batch in batches:
            estimate, spent = timed(lda.update, batch, estimate, k=k, seed=0)
            seconds += spent
        model, streamed = stream_once(batches, k, seed=0)
        truth, online, one = corpus.beta, estimate.params["beta"], once.params["beta"]
        rows.append([f"{n:,}, {vocab:,}, {k}, {size:,}", f"{matched_l1(one, online):.3f}",
                     f"{matched_l1(truth, online):.3f}", f"{matched_l1(truth, one):.3f}", f"{once_seconds:.3f}",
                     f"{seconds:.3f}", f"{seconds / once_seconds:.1f}",
                     f"{matched_l1(one, model.components_):.3f}", f"{matched_l1(truth, model.components_):.3f}",
                     f"{streamed:.3f}", f"{streamed / once_seconds:.1f}"])
    print(table(["corpus (N, V, k, batch)", "online to one fit", "online to truth", "one fit to truth",
                 "one fit (s)", "all updates (s)", "updates / one fit", "streamed to one fit", "streamed to truth",
                 "streamed, read once (s)", "streamed / one fit"], rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--test-docs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--synthetic", action="store_true", help="the synthetic corpora instead of real text")
    parser.add_argument("--corpus", default="python", choices=("python", "man"),
                        help="docstrings or manual-page sections (as bench_lda_real.py loads them)")
    parser.add_argument("--man-docs", type=int, default=20_000, help="manual-page sections drawn (--corpus man)")
    args = parser.parse_args()
    if args.synthetic:
        return synthetic()

    counts, _ = load(args.corpus, args.man_docs, args.seed)
    X = sp.csr_matrix(counts, dtype=np.float64)
    order = np.random.default_rng(args.seed).permutation(X.shape[0])
    test, train = X[order[: args.test_docs]], X[order[args.test_docs:]]
    batches = np.array_split(np.arange(train.shape[0]), args.batches)
    k = args.k
    print(f"# Online LDA, {machine()}\n\n{args.corpus}: {train.shape[0]} training documents in "
          f"{args.batches} batches, {test.shape[0]} held out, V = {X.shape[1]}, k = {k}\n", flush=True)

    # Every arm is timed warm: one untimed call of each on the first batches loads the compiled kernels first.
    lda.spectral(train[batches[0]], k, seed=args.seed, doc_topics=False)
    lda.update(train[batches[0]], k=k, seed=args.seed)
    stream_once([train[batch] for batch in batches[:3]], k, seed=args.seed)
    once, once_seconds = timed(lda.spectral, train, k, seed=args.seed, doc_topics=False)
    rows = [["lda.spectral on everything (one fit)", "", f"{perplexity(test, once.params['beta'], once.params['alpha']):.0f}",
             f"{once_seconds:.2f}", "0"]]

    estimate, seconds, first = None, 0.0, None
    for batch in batches:
        estimate, spent = timed(lda.update, train[batch], estimate, k=k, seed=args.seed)
        seconds += spent
        first = first or perplexity(test, estimate.params["beta"], estimate.params["alpha"])
    last = perplexity(test, estimate.params["beta"], estimate.params["alpha"])
    rows.append(["lda.update per batch", f"{first:.0f}", f"{last:.0f}", f"{seconds:.2f}",
                 f"{matched_l1(once.params['beta'], estimate.params['beta']):.3f}"])

    model, seconds = stream_once([train[batch] for batch in batches], k, seed=args.seed)
    rows.append(["SpectralLDA.partial_fit per batch, read after the last", "",
                 f"{perplexity(test, model.components_, model.doc_topic_prior_):.0f}", f"{seconds:.2f}",
                 f"{matched_l1(once.params['beta'], model.components_):.3f}"])

    from sklearn.decomposition import LatentDirichletAllocation

    model = LatentDirichletAllocation(k, learning_method="online", random_state=args.seed,
                                      total_samples=train.shape[0])
    seconds, first = 0.0, None
    for batch in batches:
        _, spent = timed(model.partial_fit, train[batch])
        seconds += spent
        beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
        alpha = np.full(k, model.doc_topic_prior_)
        first = first or perplexity(test, beta, alpha)
    rows.append(["scikit-learn LatentDirichletAllocation.partial_fit (online VB)", f"{first:.0f}",
                 f"{perplexity(test, beta, alpha):.0f}", f"{seconds:.2f}",
                 f"{matched_l1(once.params['beta'], beta):.3f}"])
    print(table(["method", "held-out perplexity after batch 1", "after the last batch", "seconds (all batches)",
                 "matched L1 to the one fit (mean over topics)"], rows))


if __name__ == "__main__":
    main()
