"""Topic-model benchmarks against peers (issue: topic models end to end).

1. Synthetic LDA, N=20,000, V=5,000, k=20: specinit's default call
   (``lda.spectral(X, k)``) as the first call of a fresh process (loading the compiled kernels included) and as
   a later call of a process, its anchor step alone, one closing sweep and the
   tensor paths vs scikit-learn's LatentDirichletAllocation (online,
   max_iter=10; and batch) in the same run: time, time in bare sparse passes
   (``X^T (X Q)``), mean L1 topic error after Hungarian matching, speed-up
   over the online peer.
2. NUTS, 4 chains, small LDA (N=300, V=300, k=5): max split-R-hat of beta
   with the spectral init (no relabelling) vs NumPyro's default init, and
   the time of both.
3. SVI (AutoNormal): steps for the warm start to reach the default start's
   final ELBO.

Run: ``python benchmarks/bench_lda.py [--quick] [--skip-nuts] [--skip-svi]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _common import machine, matched_l1, table, timed
from specinit.models import lda

from specinit.synthetic import sample_lda


def bare_pass_seconds(X, k: int, repeats: int = 5) -> float:
    """The unit of the pass counts: ``X^T (X Q)`` with SciPy for a (V, k) block, best of ``repeats``."""
    Q = np.random.default_rng(0).standard_normal((X.shape[1], k))
    best = np.inf
    for _ in range(repeats):
        _, seconds = timed(lambda: X.T @ (X @ Q))
        best = min(best, seconds)
    return best


#: The first call of a fresh process: load the corpus, then time ``lda.spectral`` (imports and corpus not timed).
_FIRST_CALL = r"""
import sys, time, numpy as np, scipy.sparse as sp
from specinit.models import lda
X = sp.load_npz(sys.argv[1]); k = int(sys.argv[2])
t = time.perf_counter()
est = lda.spectral(X, k, doc_topics=False, seed=int(sys.argv[3]))
seconds = time.perf_counter() - t
np.save(sys.argv[4], est.params["beta"])
print(seconds)
"""


def first_call(X, k: int, seed: int):
    """``(beta, seconds)`` of the default call as the first call of a fresh Python process."""
    with tempfile.TemporaryDirectory(prefix="bench_lda_") as tmp:
        path, beta_path = os.path.join(tmp, "corpus.npz"), os.path.join(tmp, "beta.npy")
        sp.save_npz(path, sp.csr_matrix(X), compressed=False)
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL, path, str(k), str(seed), beta_path],
                             capture_output=True, text=True, check=True)
        return np.load(beta_path), float(out.stdout.strip().splitlines()[-1])


def bench_sklearn(n_docs, vocab, k, seed=0):
    """specinit's default call, its parts and the tensor path against scikit-learn's LDA on one corpus.

    The default call is timed twice: as the first call of a fresh process (what a script that fits once pays,
    loading the compiled kernels from Numba's disk cache included) and, after the kernels are warmed on a slice in
    this process, as a later call, as are the other rows."""
    from sklearn.decomposition import LatentDirichletAllocation
    from specinit.engine.sources import CountSource
    from specinit.models._topics import close_topics

    corpus = sample_lda(n_docs, vocab, k, alpha=0.1, doc_length=90, seed=seed)
    X = corpus.counts
    bare = bare_pass_seconds(X, k)
    beta, seconds = first_call(X, k, seed)
    rows = [["specinit default, first call of a fresh process", seconds, seconds / bare,
             matched_l1(corpus.beta, beta)]]
    lda.spectral(X[: n_docs // 10], k, seed=seed, doc_topics=False)  # compile (or load) the kernels
    fits = [("specinit default (a later call): anchor words + closing sweeps", {}),
            ("specinit anchor words alone (em_sweeps=0)", {"em_sweeps": 0}),
            ("specinit tensor power method (alpha0 given)", {"alpha0": 0.1 * k, "method": "tpm"}),
            ("specinit SVTD (alpha0 given)", {"alpha0": 0.1 * k, "method": "svtd"})]
    for name, options in fits:
        est, seconds = timed(lda.spectral, X, k, doc_topics=False, seed=seed, **options)
        rows.append([name, seconds, seconds / bare, matched_l1(corpus.beta, est.params["beta"])])
        if not options:
            start = est
    source = CountSource(X)  # validated once, as in the default call (whose sweeps read the same source)
    _, sweep = timed(close_topics, source, start.params["beta"], start.params["alpha"], 1, floor=1e-3)
    rows.append(["one closing sweep (from the default fit's topics)", sweep, sweep / bare, "-"])
    for learning in ("online", "batch"):
        model = LatentDirichletAllocation(
            n_components=k, learning_method=learning, max_iter=10, doc_topic_prior=0.1, random_state=seed
        )
        _, seconds = timed(model.fit, X)
        beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
        rows.append([f"scikit-learn LDA ({learning}, max_iter=10)", seconds, seconds / bare,
                     matched_l1(corpus.beta, beta)])
    online = rows[-2][1]
    return [row + [online / row[1]] for row in rows], bare


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
    parser.add_argument("--skip-svi", action="store_true")
    args = parser.parse_args()
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f} (1 min), "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    size = (2_000, 1_000, 10) if args.quick else (20_000, 5_000, 20)
    print(f"1. LDA topic recovery, N={size[0]}, V={size[1]}, k={size[2]}")
    rows, bare = bench_sklearn(*size)
    print(f"one bare pass X^T (X Q), Q of width k: {bare:.4f} s")
    print(table(["method", "time (s)", "bare passes", "mean L1 topic error", "speed-up vs scikit-learn online"],
                rows))
    if not args.skip_nuts:
        n, warm, samp = (60, 100, 100) if args.quick else (300, 500, 500)
        print(f"\n2. NUTS, 4 chains, LDA N={n}, V={n}, k=5 ({warm} warmup + {samp} draws)")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            summary = bench_nuts(n, n, 5, warm, samp)
        print(table(["quantity", "value"], [[key, value] for key, value in summary.items()]))
    if args.skip_svi:
        return
    steps = 300 if args.quick else 3000
    print(f"\n3. SVI (AutoNormal), LDA N=300, V=300, k=5, {steps} steps")
    summary = bench_svi(300, 300, 5, steps)
    print(table(["quantity", "value"], [[key, value] for key, value in summary.items()]))


if __name__ == "__main__":
    main()
