"""Topic-model benchmarks against peers (issue: topic models end to end).

1. Synthetic LDA, N=20,000, V=5,000, k=20: specinit's spectral fit vs
   scikit-learn's LatentDirichletAllocation (online, max_iter=10; and batch)
   in the same run: time and mean L1 topic error after Hungarian matching.
2. NUTS, 4 chains, small LDA (N=300, V=300, k=5): max split-R-hat of beta
   with the spectral init (no relabelling) vs NumPyro's default init, and
   the time of both.
3. SVI (AutoNormal): steps for the warm start to reach the default start's
   final ELBO.

Run: ``python benchmarks/bench_lda.py [--quick] [--skip-nuts]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import machine, matched_l1, table, timed
from specinit.models import lda

from specinit.synthetic import sample_lda


def bench_sklearn(n_docs, vocab, k, seed=0):
    from sklearn.decomposition import LatentDirichletAllocation

    corpus = sample_lda(n_docs, vocab, k, alpha=0.1, doc_length=90, seed=seed)
    X = corpus.counts
    rows = []
    for method in ("tpm", "svtd"):
        est, seconds = timed(lda.spectral, X, k, alpha0=0.1 * k, method=method, doc_topics=False, seed=seed)
        rows.append([f"specinit spectral ({method})", seconds, matched_l1(corpus.beta, est.params["beta"])])
    for learning in ("online", "batch"):
        model = LatentDirichletAllocation(
            n_components=k, learning_method=learning, max_iter=10, doc_topic_prior=0.1, random_state=seed
        )
        _, seconds = timed(model.fit, X)
        beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
        rows.append([f"sklearn LDA ({learning}, max_iter=10)", seconds, matched_l1(corpus.beta, beta)])
    return rows


def bench_nuts(n_docs, vocab, k, num_warmup, num_samples, seed=0):
    from specinit.compare import compare_nuts

    corpus = sample_lda(n_docs, vocab, k, alpha=0.3, doc_length=100, beta_concentration=0.1, seed=seed)
    X = corpus.counts.toarray().astype(np.float32)
    est = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=seed)
    result = compare_nuts(lda.model, est, model_args=(X,), model_kwargs={"k": k}, num_chains=4,
                          num_warmup=num_warmup, num_samples=num_samples, seed=seed)
    return result.summary()


def bench_svi(n_docs, vocab, k, num_steps, seed=0):
    from specinit.compare import compare_svi

    corpus = sample_lda(n_docs, vocab, k, alpha=0.3, doc_length=100, seed=seed)
    X = corpus.counts.toarray().astype(np.float32)
    est = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=seed)
    result = compare_svi(lda.model, est, model_args=(X,), model_kwargs={"k": k}, num_steps=num_steps, seed=seed)
    return result.summary()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-nuts", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    size = (2_000, 1_000, 10) if args.quick else (20_000, 5_000, 20)
    print(f"1. LDA topic recovery, N={size[0]}, V={size[1]}, k={size[2]}")
    print(table(["method", "time (s)", "mean L1 topic error"], bench_sklearn(*size)))
    if not args.skip_nuts:
        n, warm, samp = (60, 100, 100) if args.quick else (300, 500, 500)
        print(f"\n2. NUTS, 4 chains, LDA N={n}, V={n}, k=5 ({warm} warmup + {samp} draws)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary = bench_nuts(n, n, 5, warm, samp)
        print(table(["quantity", "value"], [[key, value] for key, value in summary.items()]))
    steps = 300 if args.quick else 3000
    print(f"\n3. SVI (AutoNormal), LDA N=300, V=300, k=5, {steps} steps")
    summary = bench_svi(300, 300, 5, steps)
    print(table(["quantity", "value"], [[key, value] for key, value in summary.items()]))


if __name__ == "__main__":
    main()
