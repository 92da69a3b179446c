"""LDA posterior sampling: ``lda.kernel`` (Gibbs-within-NUTS) against NUTS on ``lda.model``.

Corpora drawn from LDA with N = V = 150, k = 4, alpha = 0.3, beta ~
Dirichlet(0.1), 80 words a document (``sample_lda(150, 150, 4, alpha=0.3,
doc_length=80, seed=seed)``), dense counts, the model's defaults (eta = 0.1);
4 chains x (300 warm-up + 300 draws), ``lda.kernel``'s chains under ``jax.vmap`` (as ``compare_nuts`` runs a
Gibbs composite; NumPyro's sequential chains recompile the Gibbs step for every chain), NUTS's sequential. The
spectral estimate is ``lda.spectral(X, 4, alpha0=1.2, seed=0)``. Per seed:

* ``gibbs, spectral``: ``lda.kernel`` from the spectral start (per-chain
  ``init_params`` with spread 0.05 in unconstrained space; ``alpha``
  unconstrained, ``beta`` and ``theta`` constrained);
* ``gibbs, default``: ``lda.kernel`` without ``init_params`` (prior draws of
  ``beta`` and ``theta``, NumPyro's default for ``alpha``);
* ``nuts, spectral``: NUTS on ``lda.model`` from the same spectral start;
* ``short``: ``lda.kernel`` from starts drawn by ``init_params(..., spread="laplace")`` with a third of the
  warm-up (100 steps at the full size); its time adds the spectral fit and ``init_params`` to ``mcmc.run``
  (after one ``initialize_model`` call, as for ``compare``);
* ``long``: ``lda.kernel`` from NumPyro's default start with ``--long`` times the warm-up and the draws (does the
  default start get there with more steps?);
* ``compare``: ``compare_nuts(lda.model, estimate)`` with its defaults (``lda.kernel``; the warm run from starts
  drawn from the Laplace Gaussian over ``alpha`` at the estimate, the cold run from NumPyro's default), two rows;
  the warm row's time adds the spectral fit and ``compare_nuts``'s own preparation (Laplace step, starts) to
  ``mcmc.run``. Before timing, one ``initialize_model`` call on the corpus runs the model op by op, as the first
  of either run would in a fresh process (16 s on these corpora): both rows then find its operations compiled.
  Before the first corpus, one unreported ``compare_nuts`` call with 4 + 4 steps pays the process's one-time
  compilations (the model run op by op, the kernel's jitted updates, the spectral fit, the Laplace step), which
  would otherwise fall on whichever side runs first.

Reported: wall time of ``mcmc.run`` (with compilation), max rank-normalized
split R-hat over ``alpha`` and ``beta`` and their smallest bulk ESS
(:func:`specinit.posterior.convergence`, no relabelling), bulk ESS per
second, and the number of ``beta`` entries with R-hat above 1.1.

Run: ``python benchmarks/bench_lda_gibbs.py [--seeds 11,12,13] [--runs gibbs,default,nuts,short,long,compare]
[--sweeps 5] [--long 5] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import numpy as np
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import initialize_model

from _common import machine, table
from specinit.compare import compare_nuts
from specinit.models import lda
from specinit.posterior import _draws, _rhat_ess, convergence
from specinit.synthetic import sample_lda

RUNS = {"gibbs": "gibbs, spectral", "default": "gibbs, default", "nuts": "nuts, spectral",
        "short": "gibbs, spectral (Laplace spread), 1/3 warm-up", "long": "gibbs, default, {long}x the steps"}


def corpus_of(seed: int, sizes: dict):
    return sample_lda(sizes["n"], sizes["n"], sizes["k"], alpha=0.3, doc_length=80, seed=seed)


def row(label: str, seed: int, sweeps, seconds: float, draws) -> list:
    draws = {site: np.asarray(draws[site], np.float64) for site in ("alpha", "beta")}
    conv = convergence(draws)
    rhat_beta = np.asarray(_rhat_ess(_draws({"beta": draws["beta"]}, None, "bench_lda_gibbs"))[0]["beta"])
    ess = float(conv.ess_bulk.min())
    return [label, seed, sweeps, seconds, float(conv.r_hat.max()), ess, ess / seconds, int((rhat_beta > 1.1).sum())]


def run(name: str, seed: int, sizes: dict, sweeps: int) -> list:
    if name == "compare":
        return compare(seed, sizes, sweeps)
    k = sizes["k"]
    corpus = corpus_of(seed, sizes)
    X = corpus.counts.toarray().astype(np.float32)
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    init = None
    kernel = NUTS(lda.model) if name == "nuts" else lda.kernel(X, k=k, gibbs_sweeps=sweeps)
    if name == "short":
        initialize_model(jax.random.PRNGKey(seed), lda.model, model_args=(X,), model_kwargs={"k": k})
    start = time.perf_counter()
    if name not in ("default", "long"):
        estimate = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=0)
        init = estimate.init_params(lda.model, 4, init_key, spread="laplace" if name == "short" else 0.05,
                                    kernel=kernel, model_args=(X,), model_kwargs={"k": k})
    if name != "short":  # only the short run's time counts the spectral fit and the starts
        start = time.perf_counter()
    num_warmup, num_samples = sizes["warmup"], sizes["draws"]
    if name == "short":
        num_warmup //= 3
    elif name == "long":
        num_warmup, num_samples = num_warmup * sizes["long"], num_samples * sizes["long"]
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples, num_chains=4,
                chain_method="sequential" if name == "nuts" else jax.vmap, progress_bar=False)
    mcmc.run(run_key, X, init_params=init, k=k)
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    seconds = time.perf_counter() - start
    return [row(RUNS[name].format(long=sizes["long"]), seed, sweeps if name != "nuts" else "-", seconds, draws)]


def compare_run(seed: int, sizes: dict, sweeps: int):
    """``(spectral fit seconds, NutsComparison)``: the spectral fit and ``compare_nuts`` with its defaults."""
    k = sizes["k"]
    corpus = corpus_of(seed, sizes)
    X = corpus.counts.toarray().astype(np.float32)
    initialize_model(jax.random.PRNGKey(seed), lda.model, model_args=(X,), model_kwargs={"k": k})
    start = time.perf_counter()
    estimate = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=0)
    fit_seconds = time.perf_counter() - start
    return fit_seconds, compare_nuts(lda.model, estimate, model_args=(X,), model_kwargs={"k": k}, num_chains=4,
                                     num_warmup=sizes["warmup"], num_samples=sizes["draws"], seed=seed,
                                     nuts_kwargs={"gibbs_sweeps": sweeps})


def compare(seed: int, sizes: dict, sweeps: int) -> list:
    """``compare_nuts`` with its defaults: the warm row's time is spectral fit + preparation + ``mcmc.run``."""
    fit_seconds, result = compare_run(seed, sizes, sweeps)
    print(f"seed {seed}: spectral fit {fit_seconds:.2f} s, compare_nuts's preparation {result.preparation_time:.2f} s")
    return [row("compare_nuts, spectral (Laplace spread)", seed, sweeps,
                fit_seconds + result.preparation_time + result.warm_time, result.warm.get_samples(group_by_chain=True)),
            row("compare_nuts, default start", seed, sweeps, result.cold_time,
                result.cold.get_samples(group_by_chain=True))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="11,12,13")
    parser.add_argument("--runs", default="gibbs,default,nuts")
    parser.add_argument("--sweeps", type=int, default=5)
    parser.add_argument("--long", type=int, default=5, help="the long run's multiple of the warm-up and draws")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = ({"n": 40, "k": 2, "warmup": 30, "draws": 30} if args.quick
             else {"n": 150, "k": 4, "warmup": 300, "draws": 300})
    sizes["long"] = args.long
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}")
    headers = ["sampler, start", "seed", "Gibbs sweeps / step", "time (s)", "max R-hat (alpha, beta)",
               "min bulk ESS (alpha, beta)", "bulk ESS / s", "beta entries R-hat > 1.1"]
    rows = []
    seeds = [int(s) for s in args.seeds.split(",")]
    if "compare" in args.runs.split(","):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compare_run(seeds[0], {**sizes, "warmup": 4, "draws": 4}, args.sweeps)  # one-time compilations
    for seed in seeds:
        for name in args.runs.split(","):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                new = run(name, seed, sizes, args.sweeps)
            rows.extend(new)
            print(table(headers, new), flush=True)
    print(table(headers, rows))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
