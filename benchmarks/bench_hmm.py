"""Spectral HMM vs hmmlearn's CategoricalHMM EM, and EM warm-started from the spectral estimate.

For each (k, V, T): one synthetic categorical HMM (sticky chain, distinct
emission rows), one sequence of length T. Reported per configuration:

* spectral: time and emission L1 error (mean over states after Hungarian matching);
* hmmlearn EM with its default initialization (n_iter=100, tol=1e-4): time,
  error, final log-likelihood, iterations (``monitor_.iter``);
* hmmlearn EM initialized from the spectral estimate (``init_params=""`` and
  ``startprob_`` / ``transmat_`` / ``emissionprob_`` set): same columns.

Usage: ``python benchmarks/bench_hmm.py [--quick]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import machine, matched_l1, timed
from hmmlearn.hmm import CategoricalHMM
from specinit.models import hmm


def synthetic(k: int, n_symbols: int, seed: int):
    rng = np.random.default_rng(seed)
    init = rng.dirichlet(np.full(k, 2.0))
    transition = 0.7 * np.eye(k) + 0.3 * rng.dirichlet(np.ones(k), size=k)
    emission = rng.dirichlet(np.full(n_symbols, 0.3), size=k)
    return init, transition, emission


def sample(init, transition, emission, length: int, seed: int) -> np.ndarray:
    """One sequence by inverse-CDF sampling in NumPy (fast for 1e6 steps, no compilation)."""
    rng = np.random.default_rng(seed)
    cum_t, cum_e = np.cumsum(transition, axis=1), np.cumsum(emission, axis=1)
    u = rng.random(length)
    states = np.empty(length, dtype=np.int64)
    states[0] = np.searchsorted(np.cumsum(init), u[0], side="right")
    for t in range(1, length):
        states[t] = np.searchsorted(cum_t[states[t - 1]], u[t], side="right")
    v = rng.random(length)
    symbols = np.minimum((v[:, None] >= cum_e[states]).sum(axis=1), emission.shape[1] - 1)
    return symbols


def run_em(x, k, n_symbols, start=None, seed=0):
    model = CategoricalHMM(k, n_iter=100, tol=1e-4, random_state=seed, n_features=n_symbols,
                           init_params="" if start else "ste")
    if start:
        model.startprob_, model.transmat_, model.emissionprob_ = start["init"], start["transition"], start["emission"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, seconds = timed(model.fit, x[:, None])
    return model, seconds


def nuts_comparison(seed=0, k=3, n_symbols=8, n_seq=20, length=100):
    """NUTS, 4 chains, a small HMM: max split-R-hat with the spectral vs the default init."""
    from specinit.compare import compare_nuts

    init, transition, emission = synthetic(k, n_symbols, seed=seed)
    seqs = np.stack([sample(init, transition, emission, length, seed=seed + i) for i in range(n_seq)])
    est = hmm.spectral(list(seqs), k, n_symbols, seed=seed)
    result = compare_nuts(hmm.model, est, model_args=(seqs,), model_kwargs={"k": k, "n_symbols": n_symbols},
                          num_chains=4, num_warmup=500, num_samples=500, seed=seed)
    return result.summary()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (about a minute)")
    parser.add_argument("--config", nargs=3, type=int, action="append", metavar=("K", "V", "T"),
                        help="run only these (k, V, T) configurations (repeatable)")
    parser.add_argument("--nuts", action="store_true", help="only the NUTS warm-vs-default comparison")
    args = parser.parse_args()
    if args.nuts:
        print("NUTS, 4 chains x (500 + 500), categorical HMM k=3, V=8, 20 sequences of length 100")
        for key, value in nuts_comparison().items():
            print(f"| {key} | {value:.3f} |")
        return
    if args.config:
        configs = [tuple(c) for c in args.config]
    elif args.quick:
        configs = [(4, 20, 100_000), (10, 200, 100_000)]
    else:
        configs = [(k, V, T) for k in (4, 10) for V in (20, 200) for T in (100_000, 1_000_000)]
    print(f"machine: {machine()}\n")
    print("| k | V | T | spectral s | spectral L1 | EM s | EM L1 | EM iters | EM loglik "
          "| spec+EM s | spec+EM L1 | spec+EM iters | spec+EM loglik |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k, V, T in configs:
        init, transition, emission = synthetic(k, V, seed=k * 1000 + V)
        x = sample(init, transition, emission, T, seed=T)
        estimate, spec_s = timed(hmm.spectral, x, k, V)
        default, em_s = run_em(x, k, V)
        warm, warm_s = run_em(x, k, V, start=estimate.params)
        spec_err = matched_l1(emission, estimate.params["emission"])
        print(f"| {k} | {V} | {T:,} | {spec_s:.2f} | {spec_err:.3f} | {em_s:.1f} "
              f"| {matched_l1(emission, default.emissionprob_):.3f} | {default.monitor_.iter} "
              f"| {default.score(x[:, None]):.1f} | {spec_s + warm_s:.1f} | {matched_l1(emission, warm.emissionprob_):.3f} "
              f"| {warm.monitor_.iter} | {warm.score(x[:, None]):.1f} |", flush=True)


if __name__ == "__main__":
    main()
