"""Short texts: one-sentence documents with known categories (docstring summaries labelled by package).

Corpus: :func:`specinit.corpus.load_docstring_summaries` over nine installed packages (the first sentence of
every docstring, 3-8 tokens a document), documents split 80/20 into train and test (seeded). For each k, fitted
on the training documents:

* ``single_topic.spectral`` (the top-k positive eigenspace of the pair moment, tensor power method);
* ``single_topic.refine`` with its defaults (MAP-EM, pseudo-count 0.1, from the spectral estimate, then
  split-merge moves until 2 fail in a row; time includes the spectral step), the same without the moves
  (``split_merge=0``: plain MAP-EM from the spectral estimate), also stopped after 20 steps (time to quality),
  with 6 perturbed restarts racing instead of the moves (``restarts=6, split_merge=0``), and with
  ``pseudo_count`` 0 (maximum likelihood), 0.01, 0.03, 0.3 and 1 (``split_merge=0``; the sweep behind the
  default);
* the default with SQUAREM (``accelerate=True``; see :func:`specinit.refine.em`);
* best-of-3 random EM: plain MAP-EM (``single_topic.refine``, ``split_merge=0``, default pseudo-count) from 3
  random starts (topics = the smoothed word frequencies of a random partition of the documents), the best
  training objective kept; time for all 3;
* k-means (scikit-learn ``KMeans``, 3 inits) on l2-normalized tf-idf rows: a clustering, no likelihood;
* ``lda.spectral`` alone (its default method).

Columns: held-out log-likelihood of the test documents under the single-topic model (nats per word, topic
summed out, multinomial coefficient included), held-out document-completion perplexity
(:func:`specinit.corpus.document_completion`: half of each test document's tokens fold in the topic
proportions, the other half are scored; the single-topic estimates are scored with ``alpha = weights``), NMI
of the training documents' clusters (MAP topic, argmax of the LDA document topics, k-means labels) against the
packages, wall and CPU time (all threads; the steadier measure on a shared machine), and the number of distinct
warnings the fit emitted.

With ``--splits n``, only the two arms of the target (the default ``single_topic.refine`` and the best of 3
random EM starts) on n seeded train/test splits (seeds 0 .. n-1, each split's seed also seeding both fits): the
held-out nats/word and wall time of each per split, the difference of their training objectives (the MAP
objective both maximize), and over the splits how often the default is at least the
peer and the mean difference (one split's comparison is within the spread of the split itself).

With ``--online``, the training documents arrive in ``--batches`` batches (a seeded random order):
``single_topic.update`` after each batch (exact merged pair sums, anchor words warm-started from the previous
batch; no EM) against ``MiniBatchKMeans.partial_fit`` on the same batches' l2-normalized tf-idf rows (the idf of
the first batch: an online clustering sees no later document frequencies), and against one
``single_topic.spectral`` (tensor method) and one anchor-word fit (``single_topic.update`` on all training
documents as one batch) on everything; held-out nats/word, NMI of the training documents' MAP clusters, the time
of all updates (the one fits: their own time), and the matched L1 distance of the streamed topics to the
one-batch anchor fit.

Run: ``python benchmarks/bench_short_text.py [--k 10 25] [--seed 0] [--splits 5] [--online [--batches 10]]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from _common import machine, table
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.metrics import normalized_mutual_info_score
from specinit.models import lda, single_topic

from specinit.corpus import document_completion, load_docstring_summaries

PACKAGES = ("stdlib", "numpy", "scipy", "sklearn", "jax", "pandas", "matplotlib", "sympy", "networkx")


def held_out_per_word(test, estimate) -> str:
    return f"{np.sum(single_topic.log_likelihood(test, estimate)) / test.sum():.4f}"


def random_start(train, k: int, rng: np.random.Generator) -> dict:
    """Topics from a random partition of the documents (word frequencies, add-one smoothed), uniform weights."""
    assign = rng.integers(k, size=train.shape[0])
    beta = np.vstack([np.asarray(train[assign == i].sum(axis=0)).ravel() + 1.0 for i in range(k)])
    return {"weights": np.full(k, 1.0 / k), "beta": beta / beta.sum(axis=1, keepdims=True)}


def best_of_random_em(train, k: int, seed: int, n_starts: int = 3):
    rng = np.random.default_rng(seed)
    runs = [single_topic.refine(train, random_start(train, k, rng), split_merge=0) for _ in range(n_starts)]
    return max(runs, key=lambda run: run.log_likelihood[-1])


def run(train, test, labels, k: int, seed: int) -> list[list]:
    rows = []

    def add(name, fit, topics=None):
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = fit()
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        notes = len({str(w.message) for w in caught})
        if topics is None:  # a clustering only
            rows.append([k, name, "-", "-", normalized_mutual_info_score(labels, out), seconds, cpu, notes])
            return out
        beta, alpha, clusters, per_word = topics(out)
        perplexity = document_completion(test, beta, alpha, seed=seed).perplexity
        rows.append([k, name, per_word, perplexity, normalized_mutual_info_score(labels, clusters), seconds, cpu,
                     notes])
        return out

    def single(estimate):
        return (estimate.params["beta"], estimate.params["weights"], single_topic.predict(train, estimate)[1],
                held_out_per_word(test, estimate))

    def refined(result):
        return single(result.estimate)

    def lda_topics(estimate):
        theta = lda.document_topics(train, estimate.params["beta"], estimate.params["alpha"])
        return estimate.params["beta"], estimate.params["alpha"], theta.argmax(axis=1), "-"  # not a mixture likelihood

    add("single_topic.spectral", lambda: single_topic.spectral(train, k, seed=seed), single)
    add("single_topic.refine", lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed),
                                                           seed=seed), refined)
    add("single_topic.refine, accelerate=True",
        lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed), seed=seed, accelerate=True),
        refined)
    add("single_topic.refine, split_merge=0",
        lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed), split_merge=0), refined)
    add("single_topic.refine, restarts=6, split_merge=0",
        lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed), restarts=6, split_merge=0,
                                    seed=seed), refined)
    add("single_topic.refine, split_merge=0, max_iter=20",
        lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed), split_merge=0, max_iter=20),
        refined)
    for pseudo_count in (0.0, 0.01, 0.03, 0.3, 1.0):
        add(f"single_topic.refine, split_merge=0, pseudo_count={pseudo_count:g}",
            lambda: single_topic.refine(train, single_topic.spectral(train, k, seed=seed), split_merge=0,
                                        pseudo_count=pseudo_count), refined)
    add("EM, best of 3 random starts", lambda: best_of_random_em(train, k, seed), refined)
    tfidf = TfidfTransformer().fit_transform(train)
    add("k-means (tf-idf, 3 inits)", lambda: KMeans(k, n_init=3, random_state=seed).fit_predict(tfidf))
    add("lda.spectral", lambda: lda.spectral(train, k, seed=seed, doc_topics=False), lda_topics)
    return rows


def split(X, seed: int):
    order = np.random.default_rng(seed).permutation(X.shape[0])
    cut = X.shape[0] // 5
    return np.sort(order[cut:]), np.sort(order[:cut])


def over_splits(X, ks, n_splits: int) -> None:
    rows, summary = [], []
    for k in ks:
        gaps, wins, ours_time, peer_time = [], 0, 0.0, 0.0
        for seed in range(n_splits):
            train_rows, test_rows = split(X, seed)
            train, test = X[train_rows], X[test_rows]
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the spectral step's notes on the pair moment's negative eigenvalues
                ours = single_topic.refine(train, single_topic.spectral(train, k, seed=seed), seed=seed)
            middle = time.perf_counter()
            peer = best_of_random_em(train, k, seed)
            end = time.perf_counter()
            a, b = float(held_out_per_word(test, ours.estimate)), float(held_out_per_word(test, peer.estimate))
            objectives = ours.log_likelihood[-1] - peer.log_likelihood[-1]
            gaps.append(a - b)
            wins += a >= b
            ours_time, peer_time = ours_time + middle - start, peer_time + end - middle
            rows.append([k, seed, f"{a:.4f}", f"{middle - start:.2f}", f"{b:.4f}", f"{end - middle:.2f}",
                         f"{a - b:+.4f}", f"{objectives:+.1f}"])
        summary.append([k, f"{wins} of {n_splits}", f"{np.mean(gaps):+.4f}", f"{np.min(gaps):+.4f} .. "
                        f"{np.max(gaps):+.4f}", f"{ours_time / peer_time:.2f}"])
    print(table(["k", "split seed", "single_topic.refine nats/word", "its wall (s)", "best of 3 random EM nats/word",
                 "its wall (s)", "difference", "training objective, ours - peer's"], rows))
    print()
    print(table(["k", "default at least the peer", "mean difference (nats/word)", "range", "time, ours / peer's"],
                summary))


def online(X, labels, ks, seed: int, n_batches: int) -> None:
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.preprocessing import normalize

    from _common import matched_l1

    train_rows, test_rows = split(X, seed)
    train, test, truth = X[train_rows], X[test_rows], labels[train_rows]
    batches = np.array_split(np.random.default_rng(seed).permutation(train.shape[0]), n_batches)
    idf = TfidfTransformer().fit(train[batches[0]])
    rows = []
    for k in ks:
        single_topic.update(train[batches[0]], k=k, seed=seed)  # warm: the compiled kernels load here
        estimate, seconds = None, 0.0
        for batch in batches:
            start = time.perf_counter()
            estimate = single_topic.update(train[batch], estimate, k=k, seed=seed)
            seconds += time.perf_counter() - start
        start = time.perf_counter()
        one_batch = single_topic.update(train, k=k, seed=seed)
        one_seconds = time.perf_counter() - start
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tensor method's notes on the pair moment's negative eigenvalues
            start = time.perf_counter()
            tensor = single_topic.spectral(train, k, seed=seed)
            tensor_seconds = time.perf_counter() - start
        for name, fit, spent, distance in (
                (f"single_topic.update, {n_batches} batches", estimate, seconds,
                 f"{matched_l1(one_batch.params['beta'], estimate.params['beta']):.4f}"),
                ("anchor words on everything (single_topic.update, one batch)", one_batch, one_seconds, "0"),
                ("single_topic.spectral on everything (tensor)", tensor, tensor_seconds, "-")):
            clusters = single_topic.predict(train, fit)[1]
            rows.append([k, name, held_out_per_word(test, fit), f"{normalized_mutual_info_score(truth, clusters):.3f}",
                         f"{spent:.2f}", distance])
        model, seconds = MiniBatchKMeans(k, random_state=seed, n_init=3), 0.0
        for batch in batches:
            start = time.perf_counter()
            model.partial_fit(normalize(idf.transform(train[batch])))
            seconds += time.perf_counter() - start
        clusters = model.predict(normalize(idf.transform(train)))
        rows.append([k, f"MiniBatchKMeans.partial_fit (tf-idf), {n_batches} batches", "-",
                     f"{normalized_mutual_info_score(truth, clusters):.3f}", f"{seconds:.2f}", "-"])
    print(table(["k", "method", "held-out nats/word", "NMI vs package", "seconds (all batches)",
                 "matched L1 to the one-batch anchor fit"], rows))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--k", type=int, nargs="+", default=[10, 25])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--splits", type=int, default=0, help="only the target's two arms, on this many splits")
    parser.add_argument("--online", action="store_true", help="documents in batches: single_topic.update")
    parser.add_argument("--batches", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    corpus = load_docstring_summaries(PACKAGES)
    X, labels = corpus.counts, np.asarray(corpus.labels)
    lengths = np.asarray(X.sum(axis=1)).ravel()
    if args.online:
        print(f"corpus: {X.shape[0]} docstring summaries, V={X.shape[1]}; 80/20 split, training documents in "
              f"{args.batches} batches\n")
        return online(X, labels, args.k, args.seed, args.batches)
    if args.splits:
        print(f"corpus: {X.shape[0]} docstring summaries, V={X.shape[1]}; {args.splits} splits 80/20\n")
        return over_splits(X, args.k, args.splits)
    train_rows, test_rows = split(X, args.seed)
    train, test = X[train_rows], X[test_rows]
    print(f"corpus: {X.shape[0]} docstring summaries of {len(PACKAGES)} packages, V={X.shape[1]}, "
          f"{lengths.mean():.1f} tokens a document (median {np.median(lengths):.0f}); train {train.shape[0]}, "
          f"test {test.shape[0]}; loaded in {time.perf_counter() - start:.0f} s\n")
    rows = [row for k in args.k for row in run(train, test, labels[train_rows], k, args.seed)]
    headers = ["k", "method", "held-out nats/word", "completion perplexity", "NMI vs package", "wall (s)",
               "CPU (s)", "warnings"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
