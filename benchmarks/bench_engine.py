"""Engine benchmarks (issue: spectral engine).

1. Decompositions on the same random orthogonally decomposable tensors with
   noise: TPM, SVTD, ECA, our CP-ALS and tensorly's CP (ALS and symmetric
   power iteration), k = 5 ... 100: time and recovery error.
2. Moments + whitening + decomposition on synthetic LDA corpora
   (N=20,000, V=5,000, k=20 and N=1,000,000, V=50,000, k=100), with the
   time of one bare sparse pass ``X.T @ (X @ Q)`` as the floor.

Run: ``python benchmarks/bench_engine.py [--quick] [--skip-large]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import machine, matched_l1, peak_rss_gb, table, timed
from specinit.models import lda

from specinit.engine.decompose import decompose, reconstruct
from specinit.synthetic import sample_lda


def tensorly_runs(T, k):
    import tensorly as tl
    from tensorly.decomposition import parafac, symmetric_parafac_power_iteration

    def als():
        cp = parafac(tl.tensor(T), rank=k, init="svd", n_iter_max=500, tol=1e-12)
        vecs = cp.factors[0] / np.linalg.norm(cp.factors[0], axis=0)
        return vecs

    def power():
        weights, factor = symmetric_parafac_power_iteration(tl.tensor(T), rank=k, n_repeat=10, n_iteration=100)
        return factor / np.linalg.norm(factor, axis=0)

    runs = {"tensorly parafac (ALS)": als}
    if k <= 20:  # tensorly's pure-Python symmetric power iteration takes minutes beyond k = 20
        runs["tensorly symmetric power"] = power
    return runs


def bench_decompositions(ks, noise=1e-3, seed=0):
    rows = []
    for k in ks:
        rng = np.random.default_rng(seed + k)
        V = np.linalg.qr(rng.standard_normal((k, k)))[0]
        lam = rng.uniform(1.0, 5.0, k)
        E = rng.standard_normal((k, k, k))
        E = sum(E.transpose(p) for p in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]) / 6
        T = reconstruct(lam, V) + noise * E / np.linalg.norm(E) * np.linalg.norm(reconstruct(lam, V))
        runs = {m: (lambda m=m: decompose(T, k, m, seed=seed).vectors) for m in ("tpm", "svtd", "eca", "als")}
        runs.update(tensorly_runs(T, k))
        for name, run in runs.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                vecs, seconds = timed(run)
            signs = np.sign(np.sum(vecs * V[:, np.argmax(np.abs(V.T @ vecs), axis=0)], axis=0))
            err = max(np.min(np.linalg.norm(V[:, [i]] - vecs * signs, axis=0)) for i in range(k))
            rows.append([k, name, seconds, err])
    return rows


def bare_pass(X, k):
    Q = np.random.default_rng(0).standard_normal((X.shape[1], k))
    return timed(lambda: X.T @ (X @ Q))[1]


def bench_pipeline(configs, seed=0):
    rows = []
    for n_docs, vocab, k in configs:
        corpus, t_sample = timed(sample_lda, n_docs, vocab, k, alpha=0.1, doc_length=90, seed=seed)
        X = corpus.counts
        floor = bare_pass(X, k)
        est, seconds = timed(lda.spectral, X, k, alpha0=0.1 * k, doc_topics=False, seed=seed)
        rows.append([n_docs, vocab, k, X.nnz, seconds, floor, matched_l1(corpus.beta, est.params["beta"]), peak_rss_gb(), t_sample])
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-large", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    ks = (5, 10) if args.quick else (5, 20, 50, 100)
    print("Decompositions (noise 1e-3 relative; error = max ||v - v_hat|| after matching)")
    print(table(["k", "method", "time (s)", "error"], bench_decompositions(ks)), flush=True)
    configs = [(2_000, 1_000, 10)] if args.quick else [(20_000, 5_000, 20)]
    if not (args.quick or args.skip_large):
        configs.append((1_000_000, 50_000, 100))
    print("\nLDA moments + whitening + decomposition (TPM), doc_topics=False")
    headers = ["N", "V", "k", "nnz", "fit (s)", "bare X.T@(X@Q) (s)", "mean L1 topic error", "peak RSS (GB)", "sampling (s)"]
    print(table(headers, bench_pipeline(configs)))


if __name__ == "__main__":
    main()
