"""NUTS on small LDA corpora: warm (spectral + ``lda.refine``) vs default start, and the simplex coordinates.

The setting of ``specinit demo``: a corpus drawn from LDA with N = V = 120,
k = 4, alpha = 0.3, beta ~ Dirichlet(0.1), 100 words a document
(``sample_lda(..., seed=seed + 1)``), dense counts, ``lda.model`` with its
defaults; 4 chains x (300 warm-up + 300 draws), ``chain_method="sequential"``.
Per seed, three runs:

* ``warm``: ``lda.spectral`` then ``lda.refine`` (400 steps), per-chain
  ``init_params`` with jitter 0.05 (what the demo runs);
* ``default``: NumPyro's ``init_to_uniform``;
* ``warm, stick-breaking``: the warm start on the same model with the
  simplex sites mapped to R^(V-1) by NumPyro's default stick-breaking
  transform instead of centred log-ratios (the same density on the simplex;
  only the coordinates NUTS moves in differ).

Reported: start time (spectral + refine), NUTS wall time (with compilation),
max rank-normalized split R-hat over ``alpha`` and ``beta`` and the smallest
bulk ESS (:func:`specinit.posterior.convergence`, no relabelling), the worst
R-hat over ``theta``, divergent transitions among the 1,200 draws, mean
leapfrog steps per draw, and the number of ``beta`` entries with R-hat above
1.1 with the corpus counts of their words.

Run: ``python benchmarks/bench_nuts.py [--seeds 0,7,8,9] [--runs warm,default,stick] [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import numpy as np
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from numpyro.primitives import Messenger

from _common import machine, table
from specinit.distributions.continuous import LogRatioDirichlet
from specinit.models import lda
from specinit.posterior import _draws, _rhat_ess, convergence
from specinit.synthetic import sample_lda

RUNS = {"warm": "spectral + refine", "default": "default (init_to_uniform)",
        "stick": "spectral + refine, stick-breaking coordinates"}


class _StickBreaking(Messenger):
    """Samples every ``LogRatioDirichlet`` site from NumPyro's ``Dirichlet`` (stick-breaking coordinates)."""

    def process_message(self, msg):
        fn = msg["fn"] if msg["type"] == "sample" else None
        base = getattr(fn, "base_dist", fn)
        if isinstance(base, LogRatioDirichlet):
            msg["fn"] = dist.Dirichlet(base.concentration).expand(fn.batch_shape)


def stick_breaking_model(*args, **kwargs):
    with _StickBreaking():
        return lda.model(*args, **kwargs)


def run(name: str, seed: int, sizes: dict):
    n, k = sizes["n"], sizes["k"]
    corpus = sample_lda(n, n, k, alpha=0.3, doc_length=100, seed=seed + 1)
    X = corpus.counts.toarray().astype(np.float32)
    model = stick_breaking_model if name == "stick" else lda.model
    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    start = time.perf_counter()
    init = None
    if name != "default":
        spectral = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=seed)
        refined = lda.refine(corpus.counts, spectral, num_steps=400, seed=seed).estimate
        init = refined.init_params(model, 4, init_key, spread=0.05, model_args=(X,), model_kwargs={"k": k})
    t_start = time.perf_counter() - start
    mcmc = MCMC(NUTS(model), num_warmup=sizes["warmup"], num_samples=sizes["draws"], num_chains=4,
                chain_method="sequential", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(run_key, X, init_params=init, extra_fields=("num_steps", "diverging"), k=k)
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    t_nuts = time.perf_counter() - start
    draws = {site: np.asarray(value, np.float64) for site, value in draws.items()}
    conv = convergence({site: draws[site] for site in ("alpha", "beta")})
    rhat_beta = np.asarray(_rhat_ess(_draws({"beta": draws["beta"]}, None, "bench_nuts"))[0]["beta"])
    counts = X.sum(axis=0)
    slow_words = sorted({int(counts[w]) for w in np.argwhere(rhat_beta > 1.1)[:, 1]})
    extra = mcmc.get_extra_fields()
    return [RUNS[name], seed, t_start if init is not None else "-", t_nuts, float(conv.r_hat.max()),
            float(conv.ess_bulk.min()), float(convergence({"theta": draws["theta"]}).r_hat.iloc[0]),
            int(np.sum(extra["diverging"])), float(np.mean(extra["num_steps"])), int((rhat_beta > 1.1).sum()),
            ",".join(map(str, slow_words[:8])) or "-"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", default="0,7,8,9")
    parser.add_argument("--runs", default="warm,default,stick")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = ({"n": 30, "k": 2, "warmup": 30, "draws": 30} if args.quick
             else {"n": 120, "k": 4, "warmup": 300, "draws": 300})
    print(f"machine: {machine()}; load average at start {os.getloadavg()[0]:.1f}")
    headers = ["start", "seed", "start time (s)", "NUTS time (s)", "max R-hat (alpha, beta)", "min bulk ESS (alpha, beta)",
               "max R-hat theta", "divergences", "leapfrog steps / draw", "beta entries R-hat > 1.1",
               "counts of their words"]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for name in args.runs.split(","):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rows.append(run(name, seed, sizes))
            print(table(headers, rows[-1:]), flush=True)
    print(table(headers, rows))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
