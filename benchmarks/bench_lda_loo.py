"""PSIS-LOO of LDA: per-document log-likelihood with theta sampled vs theta integrated out.

Corpora ``sample_lda(n_docs=150, vocab_size=150, k=4, alpha=0.3,
doc_length=80, seed=s)``, dense counts, ``lda.model`` with its defaults,
warm-started from ``lda.spectral(X, 4, alpha0=1.2, seed=0)`` (per-chain
``init_params`` with spread 0.05); 4 chains x (300 warm-up + 300 draws),
``chain_method="sequential"``. On the same draws, ``az.loo`` with two
pointwise log-likelihoods:

* ``theta sampled``: what ``az.from_numpyro`` records, ``log p(c_d | theta_d, beta)``
  at each draw's own ``theta_d`` (the document's own latent variable, so
  leaving the document out moves its ``theta_d`` far: PSIS fails);
* ``theta integrated``: :func:`specinit.models.lda.pointwise_log_likelihood`,
  ``log p(c_d | alpha, beta)`` by importance sampling with S particles,
  for several S, and at the default S with two sampler seeds.

Reported per corpus and log-likelihood: the fraction of documents with
Pareto k < 0.7, p_loo, elpd_loo (with its SE), the time to compute the
log-likelihood (all 1,200 draws x 150 documents, compilation included),
and, for the integrated one, the largest change of elpd_loo and of a
document's ``loo_i`` between two sampler seeds.

Run: ``python benchmarks/bench_lda_loo.py [--seeds 0,1,2] [--particles 16,64,256] [--cache DIR] [--quick]``.
With ``--cache``, the NUTS draws of each corpus are saved there and reused by later runs.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import numpy as np

from _common import machine, table
from specinit.models import lda
from specinit.posterior import loo
from specinit.synthetic import sample_lda

K = 4


def corpus(seed: int, quick: bool):
    n_docs, vocab = (60, 60) if quick else (150, 150)
    return sample_lda(n_docs=n_docs, vocab_size=vocab, k=K, alpha=0.3, doc_length=80, seed=seed).counts


def nuts_draws(seed: int, quick: bool, cache: str | None) -> dict:
    """Posterior draws (chain, draw, ...) of alpha, beta, theta and az.from_numpyro's log-likelihood."""
    path = None if cache is None else os.path.join(cache, f"lda_loo_seed{seed}{'_quick' if quick else ''}.npz")
    if path is not None and os.path.exists(path):
        with np.load(path) as saved:
            return dict(saved)
    import arviz as az
    from numpyro.infer import MCMC, NUTS

    X = corpus(seed, quick).toarray().astype(np.float32)
    warmup, draws = (100, 100) if quick else (300, 300)
    est = lda.spectral(X, K, alpha0=1.2, seed=0)
    init = est.init_params(lda.model, 4, jax.random.PRNGKey(seed), spread=0.05, model_args=(X,), model_kwargs={"k": K})
    mcmc = MCMC(NUTS(lda.model), num_warmup=warmup, num_samples=draws, num_chains=4, chain_method="sequential",
                progress_bar=False)
    start = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(100 + seed), X, init_params=init, k=K)
    seconds = time.perf_counter() - start
    samples = {name: np.asarray(value) for name, value in mcmc.get_samples(group_by_chain=True).items()}
    start = time.perf_counter()
    loglik = np.asarray(az.from_numpyro(mcmc).log_likelihood["counts"])
    out = {**samples, "loglik_sampled": loglik, "seconds_loglik_sampled": time.perf_counter() - start,
           "seconds_nuts": seconds}
    if path is not None:
        os.makedirs(cache, exist_ok=True)
        np.savez(path, **out)
    return out


def loo_row(name: str, draws: dict, loglik: np.ndarray, seconds: float) -> tuple[list, np.ndarray]:
    import arviz as az

    idata = az.from_dict(posterior={"alpha": draws["alpha"]}, log_likelihood={"counts": loglik},
                         dims={"counts": ["documents"]})
    result = loo(idata, pointwise=True)
    pareto_k = np.asarray(result.pareto_k)
    return ([name, f"{np.mean(pareto_k < 0.7):.0%}", f"{np.max(pareto_k):.2f}", f"{result.p_loo:.1f}",
             f"{result.elpd_loo:.1f}", f"{result.se:.1f}", f"{seconds:.0f}"], np.asarray(result.loo_i))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--particles", default="64,128,256", help="particle counts S")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--nuts-only", action="store_true", help="only run (and cache) the NUTS draws")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    particles = [int(s) for s in args.particles.split(",")]
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", UserWarning)  # ArviZ: "shape parameter of Pareto distribution greater than 0.68", shown as k
    print(machine(), f"load {os.getloadavg()[0]:.1f}", flush=True)
    rows, stability = [], []
    for seed in seeds:
        draws = nuts_draws(seed, args.quick, args.cache)
        if args.nuts_only:
            print(f"seed {seed}: NUTS {float(draws['seconds_nuts']):.0f} s", flush=True)
            continue
        X = corpus(seed, args.quick)
        row, _ = loo_row("theta sampled (az.from_numpyro)", draws, draws["loglik_sampled"],
                         float(draws["seconds_loglik_sampled"]))
        rows.append([seed, *row])
        runs = [(S, 0) for S in particles] + [(lda.NUM_PARTICLES, 1)]
        loo_i = {}
        for S, sampler_seed in runs:
            start = time.perf_counter()
            loglik = lda.pointwise_log_likelihood(draws, X, k=K, num_particles=S, seed=sampler_seed)
            row, loo_i[S, sampler_seed] = loo_row(f"theta integrated, S = {S}, seed {sampler_seed}", draws, loglik,
                                                  time.perf_counter() - start)
            rows.append([seed, *row])
            print(table(["corpus", "log-likelihood", "k < 0.7", "max k", "p_loo", "elpd_loo", "SE", "seconds"],
                        rows[-1:]).splitlines()[-1], flush=True)
        a, b = loo_i[lda.NUM_PARTICLES, 1], loo_i.get((lda.NUM_PARTICLES, 0))
        if b is None:
            continue
        stability.append([seed, lda.NUM_PARTICLES, f"{abs(a.sum() - b.sum()):.2f}", f"{np.max(np.abs(a - b)):.3f}",
                          f"{np.mean(np.abs(a - b)):.3f}"])
    if args.nuts_only:
        return
    draws_per = "4 x 100" if args.quick else "4 x 300"
    print(f"\nPSIS-LOO of LDA on sample_lda corpora (seed = corpus), NUTS {draws_per} draws warm-started "
          "from lda.spectral; seconds: the log-likelihood of all draws (compilation included)")
    print(table(["corpus", "log-likelihood", "k < 0.7", "max k", "p_loo", "elpd_loo", "SE", "seconds"], rows))
    print(f"\nMonte Carlo stability: two sampler seeds of theta integrated at the default S = {lda.NUM_PARTICLES}")
    print(table(["corpus", "S", "change of elpd_loo", "max change of loo_i", "mean change of loo_i"], stability))


if __name__ == "__main__":
    main()
