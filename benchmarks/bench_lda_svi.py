"""Refinement benchmark (issue 9, rows 2 and 3): spectral + ``lda.svi`` vs scikit-learn online LDA; NUTS R-hat.

1. Real corpus: paragraphs of the Python standard library's docstrings
   (:func:`specinit.corpus.shipped.load_python_docs`, offline, shipped with
   Python), 2,000 documents held out at random. Held-out document-completion
   perplexity (:func:`specinit.corpus.heldout.document_completion`: theta
   folded in on half of each held-out document's tokens, the other half
   scored; the same fold-in and split for every method) and wall time of:
   the spectral fit; ``lda.svi`` started from it (warm) and from NumPyro's
   default start (cold); scikit-learn's ``LatentDirichletAllocation``
   (online, max_iter=10). Warm vs cold: steps the warm run needs to reach the
   cold run's final held-out perplexity (perplexity measured every
   ``num_steps / 20`` steps; evaluation time is not counted in the runs).
2. NUTS, 4 chains x (500 warm-up + 500 draws), LDA N = V = 300, k = 5
   (the README's setting), warm (spectral ``init_params``) vs default init:
   max split-R-hat over ``beta`` and ``alpha`` and wall times, with sparse
   counts.

Run: ``python benchmarks/bench_lda_svi.py [--quick] [--skip-nuts] [--steps S] [--k K]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import machine, table
from specinit.models import lda

from specinit.corpus.heldout import document_completion
from specinit.corpus.shipped import load_python_docs


def split_rows(X, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    return X[np.sort(order[n_test:])], X[np.sort(order[:n_test])]


def perplexity(test, beta, alpha) -> float:
    return document_completion(test, beta, alpha, seed=0).perplexity


def bench_real(k: int, num_steps: int, batch_size: int, quick: bool, seed: int = 0):
    from sklearn.decomposition import LatentDirichletAllocation

    corpus = load_python_docs(max_documents=3_000 if quick else None)
    X = corpus.counts.tocsr()
    train, test = split_rows(X, 300 if quick else 2_000, seed)
    print(f"corpus: Python stdlib docstring paragraphs, N = {X.shape[0]:,} ({train.shape[0]:,} train, "
          f"{test.shape[0]:,} held out), V = {X.shape[1]:,}, {int(X.sum()):,} tokens; k = {k}\n")
    rows, curves = [], {}

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = lda.spectral(train, k, seed=seed, doc_topics=False)
    t_spec = time.perf_counter() - start
    p_spec = perplexity(test, est.params["beta"], est.params["alpha"])
    rows.append(["lda.spectral (alpha0 from the data)", "-", t_spec, p_spec])
    if caught:
        print("spectral warnings: " + " | ".join(str(w.message)[:120] for w in caught))

    every = max(num_steps // 20, 1)
    # Compile the SVI step once (same shapes for both runs) and report it apart: both runs below are compiled.
    start = time.perf_counter()
    lda.svi(train, k, init=None, num_steps=1, batch_size=batch_size, seed=seed)
    t_compile = time.perf_counter() - start
    rows.append(["lda.svi JIT compilation (once per shape; not in the rows below)", 1, t_compile, "-"])
    times = {}
    for name, init in (("warm", est), ("cold", None)):
        result = lda.svi(train, k, init=init, num_steps=num_steps, batch_size=batch_size, seed=seed,
                         snapshot_every=every, progress=max(num_steps // 5, 1))
        curve = [(step, perplexity(test, p["beta"], p["alpha"])) for step, p in result.snapshots]
        curves[name] = curve
        label = f"lda.svi {name} ({'spectral init' if init is not None else 'NumPyro default init'})"
        total = result.seconds + (t_spec if init is not None else 0.0)
        times[name] = result.seconds
        rows.append([label + (", time incl. spectral" if init is not None else ""), num_steps, total, curve[-1][1]])

    model = LatentDirichletAllocation(n_components=k, learning_method="online", max_iter=10, random_state=seed)
    start = time.perf_counter()
    model.fit(train)
    t_sk = time.perf_counter() - start
    beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
    p_sk = perplexity(test, beta, np.full(k, model.doc_topic_prior_))
    rows.append(["scikit-learn LDA online, max_iter=10", "-", t_sk, p_sk])
    print(table(["method", "SVI steps", "time (s)", "held-out perplexity"], rows))

    target = curves["cold"][-1][1]
    reached = next((step for step, p in curves["warm"] if p <= target), None)
    print(f"\nwarm vs cold: the cold run's final perplexity {target:.1f} is reached by the warm run after "
          f"{reached if reached is not None else 'never (within the run)'} of {num_steps} steps"
          + (f" ({reached / num_steps:.2f} of the run; target <= 0.2)" if reached else ""))
    beat = next((step for step, p in curves["warm"] if p <= p_sk), None)
    if beat is not None:
        print(f"the warm run reaches scikit-learn online's perplexity {p_sk:.1f} after {beat} steps, i.e. about "
              f"{t_spec + times['warm'] * beat / num_steps:.1f} s including the spectral fit (scikit-learn: {t_sk:.1f} s)")
    else:
        print(f"the warm run does not reach scikit-learn online's perplexity {p_sk:.1f} within {num_steps} steps")
    print(table(["step", "warm perplexity", "cold perplexity"],
                [[s, w, c] for (s, w), (_, c) in zip(curves["warm"], curves["cold"])]))


def bench_nuts(num_warmup: int, num_samples: int, n: int, seed: int = 0):
    from specinit.compare import compare_nuts
    from specinit.synthetic import sample_lda

    k = 5
    corpus = sample_lda(n, n, k, alpha=0.3, doc_length=100, beta_concentration=0.1, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=seed)
        result = compare_nuts(lda.model, est, model_args=(corpus.counts,), model_kwargs={"k": k}, num_chains=4,
                              num_warmup=num_warmup, num_samples=num_samples, seed=seed)
    from specinit import posterior

    s = result.summary()
    # ArviZ's rank-normalized split R-hat (Vehtari et al. 2021) beside NumPyro's classic one; no relabelling.
    rank = [posterior.max_rhat(posterior.to_inference_data(run, est, align=False, log_likelihood=False), ["alpha", "beta"])
            for run in (result.warm, result.cold)]
    rows = [["spectral (init_params, jitter 0.05)", s["warm_time_s"], s["warm_max_rhat"], rank[0], s["warm_mean_num_steps"]],
            ["NumPyro default (init_to_uniform)", s["cold_time_s"], s["cold_max_rhat"], rank[1], s["cold_mean_num_steps"]]]
    print(table(["init", "wall time (s)", "max split-R-hat (NumPyro) over beta, alpha",
                 "max rank-normalized split-R-hat (ArviZ)", "mean tree size"], rows))
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--k", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    if not args.skip_real:
        steps = args.steps or (100 if args.quick else 2000)
        print(f"1. spectral + lda.svi vs scikit-learn online LDA ({steps} SVI steps of {args.batch_size} documents)")
        bench_real(args.k, steps, args.batch_size, args.quick)
    if not args.skip_nuts:
        n, warm, samp = (60, 100, 100) if args.quick else (300, 500, 500)
        print(f"\n2. NUTS, 4 chains x ({warm} warm-up + {samp} draws), LDA N = V = {n}, k = 5, sparse counts")
        bench_nuts(warm, samp, n)


if __name__ == "__main__":
    main()
