"""Seed paper 003's single-topic experiments (Ruffini, Casanellas, Gavalda, Sec. 4.1 and 4.2).

4.1  Pooled vs per-document unbiased estimators: Err2 = ||M2_hat - M2||_F and
     Err3 = ||M3_hat - M3||_F against the population moments, as N grows.
4.2  V = 100, k = 5, N = 50 ... 1000, 10 repetitions: topic reconstruction error
     (mean L1 after matching), adjusted Rand index of the MAP clustering, and time,
     for SVTD, TPM, ECA and ALS.

Run: ``python benchmarks/bench_single_topic.py [--quick]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import machine, matched_l1, table, timed
from sklearn.metrics import adjusted_rand_score
from specinit.models import single_topic

from specinit.engine.moments import CountMoments
from specinit.synthetic import sample_single_topic

V, K = 100, 5


def dense_moments(counts, weighting):
    moments = CountMoments(counts, weighting=weighting)
    eye = np.eye(V)
    return moments.m2_matmat(eye), moments.whitened_m3(eye)


def experiment_41(sizes, reps):
    rows = []
    for n in sizes:
        errs = {w: ([], []) for w in ("pooled", "per-document")}
        for rep in range(reps):
            corpus = sample_single_topic(n, V, K, doc_length=20, beta_concentration=0.5, seed=rep)
            m2, m3 = single_topic.population_moments(corpus.beta, corpus.weights).dense()
            for weighting, (e2, e3) in errs.items():
                m2_hat, m3_hat = dense_moments(corpus.counts, weighting)
                e2.append(np.linalg.norm(m2_hat - m2))
                e3.append(np.linalg.norm(m3_hat - m3))
        rows.append([n] + [float(np.mean(v)) for w in errs for v in errs[w]])
    return rows


def experiment_42(sizes, reps):
    rows = []
    for n in sizes:
        for method in ("svtd", "tpm", "eca", "als"):
            errors, aris, times = [], [], []
            for rep in range(reps):
                corpus = sample_single_topic(n, V, K, doc_length=20, beta_concentration=0.5, seed=100 + rep)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    try:
                        est, seconds = timed(single_topic.spectral, corpus.counts, K, method=method, seed=rep)
                    except ValueError:  # indefinite moments at tiny N: counted as a failure
                        continue
                labels = single_topic.responsibilities(corpus.counts, est)[1]
                errors.append(matched_l1(corpus.beta, est.params["beta"]))
                aris.append(adjusted_rand_score(corpus.theta.argmax(axis=1), labels))
                times.append(seconds)
            rows.append([n, method, len(errors), float(np.mean(errors)), float(np.mean(aris)), float(np.mean(times))])
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    reps = 3 if args.quick else 10
    print(f"4.1 Estimator error vs N (V={V}, k={K}, 20 tokens per document, {reps} repetitions)")
    headers = ["N", "Err2 pooled", "Err3 pooled", "Err2 per-doc", "Err3 per-doc"]
    print(table(headers, experiment_41((100, 1000) if args.quick else (100, 300, 1000, 3000), reps)), flush=True)
    print(f"\n4.2 Recovery vs N (V={V}, k={K}, {reps} repetitions)")
    headers = ["N", "method", "fits ok", "mean L1 topic error", "ARI of MAP clustering", "time (s)"]
    print(table(headers, experiment_42((100, 1000) if args.quick else (50, 100, 300, 1000), reps)))


if __name__ == "__main__":
    main()
