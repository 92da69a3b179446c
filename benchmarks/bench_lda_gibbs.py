"""LDA posterior sampling: ``lda.kernel`` (Gibbs-within-NUTS) against NUTS on ``lda.model``.

Corpora drawn from LDA with N = V = 150, k = 4, alpha = 0.3, beta ~
Dirichlet(0.1), 80 words a document (``sample_lda(150, 150, 4, alpha=0.3,
doc_length=80, seed=seed)``), dense counts, the model's defaults (eta = 0.1);
4 chains x (300 warm-up + 300 draws), ``chain_method="sequential"``. The
spectral estimate is ``lda.spectral(X, 4, alpha0=1.2, seed=0)``. Per seed:

* ``gibbs, spectral``: ``lda.kernel`` from the spectral start (per-chain
  ``init_params`` with spread 0.05 in unconstrained space; ``alpha``
  unconstrained, ``beta`` and ``theta`` constrained);
* ``gibbs, default``: ``lda.kernel`` without ``init_params`` (prior draws of
  ``beta`` and ``theta``, NumPyro's default for ``alpha``);
* ``nuts, spectral``: NUTS on ``lda.model`` from the same spectral start.

Reported: wall time of ``mcmc.run`` (with compilation), max rank-normalized
split R-hat over ``alpha`` and ``beta`` and their smallest bulk ESS
(:func:`specinit.posterior.convergence`, no relabelling), bulk ESS per
second, and the number of ``beta`` entries with R-hat above 1.1.

Run: ``python benchmarks/bench_lda_gibbs.py [--seeds 11,12,13] [--runs gibbs,default,nuts] [--sweeps 5] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS

from _common import machine, table
from specinit.models import lda
from specinit.posterior import _draws, _rhat_ess, convergence
from specinit.synthetic import sample_lda

RUNS = {"gibbs": "gibbs, spectral", "default": "gibbs, default", "nuts": "nuts, spectral"}


def run(name: str, seed: int, sizes: dict, sweeps: int):
    n, k = sizes["n"], sizes["k"]
    corpus = sample_lda(n, n, k, alpha=0.3, doc_length=80, seed=seed)
    X = corpus.counts.toarray().astype(np.float32)
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    init = None
    kernel = NUTS(lda.model) if name == "nuts" else lda.kernel(X, k=k, gibbs_sweeps=sweeps)
    if name != "default":
        estimate = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=0)
        init = estimate.init_params(lda.model, 4, init_key, spread=0.05, kernel=kernel, model_args=(X,),
                                    model_kwargs={"k": k})
    mcmc = MCMC(kernel, num_warmup=sizes["warmup"], num_samples=sizes["draws"], num_chains=4,
                chain_method="sequential", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(run_key, X, init_params=init, k=k)
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    seconds = time.perf_counter() - start
    draws = {site: np.asarray(draws[site], np.float64) for site in ("alpha", "beta")}
    conv = convergence(draws)
    rhat_beta = np.asarray(_rhat_ess(_draws({"beta": draws["beta"]}, None, "bench_lda_gibbs"))[0]["beta"])
    ess = float(conv.ess_bulk.min())
    return [RUNS[name], seed, sweeps if name != "nuts" else "-", seconds, float(conv.r_hat.max()), ess, ess / seconds,
            int((rhat_beta > 1.1).sum())]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="11,12,13")
    parser.add_argument("--runs", default="gibbs,default,nuts")
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = ({"n": 40, "k": 2, "warmup": 30, "draws": 30} if args.quick
             else {"n": 150, "k": 4, "warmup": 300, "draws": 300})
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}")
    headers = ["sampler, start", "seed", "Gibbs sweeps / step", "time (s)", "max R-hat (alpha, beta)",
               "min bulk ESS (alpha, beta)", "bulk ESS / s", "beta entries R-hat > 1.1"]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in args.runs.split(","):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows.append(run(name, seed, sizes, args.sweeps))
            print(table(headers, rows[-1:]), flush=True)
    print(table(headers, rows))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
