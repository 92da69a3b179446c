"""PSIS-LOO of LDA: per-document log-likelihood with theta sampled vs theta integrated out.

Corpora ``sample_lda(n_docs=150, vocab_size=150, k=4, alpha=0.3,
doc_length=80, seed=s)``, dense counts, ``lda.model`` with its defaults,
warm-started from ``lda.spectral(X, 4, alpha0=1.2, seed=0)`` (per-chain
``init_params`` with jitter 0.05); 4 chains x (300 warm-up + 300 draws),
``chain_method="sequential"``. On the same draws, ``az.loo`` with two
pointwise log-likelihoods:

* ``theta sampled``: what ``az.from_numpyro`` records, ``log p(c_d | theta_d, beta)``
  at each draw's own ``theta_d`` (the document's own latent variable, so
  leaving the document out moves its ``theta_d`` far: PSIS fails);
* ``theta integrated``: :func:`specinit.models.lda.pointwise_log_likelihood`,
  ``log p(c_d | alpha, beta)`` by importance sampling with S particles,
  for several S and two sampler seeds.

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
    init = est.init_params(lda.model, 4, jax.random.PRNGKey(seed), jitter=0.05, model_args=(X,), model_kwargs={"k": K})
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--particles", default="16,64,256")
    parser.add_argument("--cache", default=None)
    parser.add_argument("--nuts-only", action="store_true", help="only run (and cache) the NUTS draws")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    warnings.simplefilter("ignore", FutureWarning)
    for seed in seeds:
        draws = nuts_draws(seed, args.quick, args.cache)
        print(f"seed {seed}: NUTS {float(draws['seconds_nuts']):.0f} s", flush=True)
    if args.nuts_only:
        return


if __name__ == "__main__":
    main()
