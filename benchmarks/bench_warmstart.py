"""Where chains start and how NUTS scales its steps: the estimate's spread and mass matrix against the defaults.

For each model and data set (real data, and one LDA corpus drawn from the model; the user-written models of
:mod:`specinit.examples` through a site mapping, and the library's own models), NUTS runs with 4 chains x
(``--warmup`` + ``--draws``), ``chain_method="sequential"``, from:

* ``default``: NumPyro's ``init_to_uniform``, identity inverse mass matrix;
* ``jitter``: the estimate (spectral then refine), every chain displaced by N(0, 0.05^2) per unconstrained
  coordinate (the fixed spread of earlier releases);
* ``laplace``: the estimate, each chain's start drawn from the Laplace Gaussian at the estimate
  (``init_params(spread="laplace")``);
* ``laplace+mass``: as ``laplace``, and NUTS's initial inverse mass matrix from the same Gaussian
  (``inverse_mass_matrix``);
* ``laplace+mass+short``: as ``laplace+mass`` with a third of the warm-up (``laplace+mass+short``).

Reported per run: time of the start (the spectral fit and refinement are shared and reported once; the
Laplace step per run), NUTS wall time (compilation included), max rank-normalized split R-hat and min bulk ESS
over the model's global sites (no relabelling), and min bulk ESS per second of (start + NUTS) time.

``lda`` runs ``lda.model``'s own kernel (exact Gibbs updates of ``beta`` and ``theta``, NUTS for ``alpha``, whose
mass matrix is then the conditional one) from the raw spectral estimate.

Run: ``python benchmarks/bench_warmstart.py [--cases mixture,hmm_user,gmm,hmm,lda] [--warmup 300] [--draws 300]
[--letters 40,60]``.
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
from specinit.compare import local_sites
from specinit.corpus import load_letter_sequences
from specinit.examples import HMM_SITES, MIXTURE_SITES, enumerated_hmm, enumerated_mixture
from specinit.models import gmm, hmm, lda
from specinit.posterior import convergence
from specinit.synthetic import sample_lda
from specinit.warmstart import init_params, inverse_mass_matrix, latent_sites, unconstrained_sites

CONFIGS = ("default", "jitter", "laplace", "laplace+mass", "laplace+mass+short")


def standardized(loader):
    from sklearn import datasets

    x = getattr(datasets, loader)().data
    return ((x - x.mean(0)) / x.std(0)).astype(np.float32)


def letters(n_sequences: int, length: int):
    return [s[:length] for s in load_letter_sequences()][:n_sequences]


def case(name: str, n_sequences: int, length: int):
    """``(label, model, model_args, model_kwargs, estimate, sites, start seconds)`` of a named case."""
    start = time.perf_counter()
    if name == "lda":
        corpus = sample_lda(150, 150, 4, alpha=0.3, doc_length=80, seed=11)
        estimate = lda.spectral(corpus.counts, 4, alpha0=1.2, seed=0)
        return ("lda.model (its kernel: Gibbs for beta, theta; NUTS for alpha), sample_lda(150, 150, 4, seed=11)",
                lda.model, (corpus.counts.toarray().astype(np.float32),), {"k": 4}, estimate, None,
                time.perf_counter() - start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # real data are not exact k-component models
        if name in ("mixture", "gmm"):
            x = standardized("load_iris")
            estimate = gmm.refine(x, gmm.spectral(x, 3, seed=0)).estimate
            elapsed = time.perf_counter() - start
            if name == "mixture":
                return ("user mixture (enumerated), iris", enumerated_mixture, (x,), {}, estimate, MIXTURE_SITES,
                        elapsed)
            return "gmm.model, iris", gmm.model, (x,), {"k": 3}, estimate, None, elapsed
        sequences = letters(n_sequences, length)
        estimate = hmm.refine(sequences, hmm.spectral(sequences, 3, 27, seed=0), max_iter=50).estimate
        elapsed = time.perf_counter() - start
        padded, lengths = hmm.pad_sequences(sequences)
        if name == "hmm_user":
            return ("user HMM (scan, enumerated), letters", enumerated_hmm, (padded, lengths, 3, 27), {}, estimate,
                    HMM_SITES, elapsed)
        return ("hmm.model, letters", hmm.model, (padded,), {"k": 3, "n_symbols": 27, "lengths": lengths}, estimate,
                None, elapsed)


def run(config, model, args, kwargs, estimate, sites, warmup, draws, seed):
    def make(**nuts):  # the model's own kernel where it declares one (lda.model), NUTS otherwise
        declared = getattr(model, "kernel", None)
        return declared(*args, **kwargs, **nuts) if declared is not None else NUTS(model, **nuts)

    init_key, run_key = jax.random.split(jax.random.PRNGKey(seed))
    start = time.perf_counter()
    init, nuts = None, {}
    if config != "default":
        spread = 0.05 if config == "jitter" else "laplace"
        if "mass" in config:
            matrix = inverse_mass_matrix(estimate, model, sites=sites, model_args=args, model_kwargs=kwargs,
                                         over=unconstrained_sites(make(), latent_sites(model, args, kwargs)))
            nuts = {"inverse_mass_matrix": matrix, "dense_mass": matrix.ndim == 2}
        init = init_params(estimate, model, 4, init_key, spread=spread, sites=sites, model_args=args,
                           model_kwargs=kwargs, kernel=make(**nuts))
    t_start = time.perf_counter() - start
    mcmc = MCMC(make(**nuts), num_warmup=warmup // 3 if "short" in config else warmup, num_samples=draws,
                num_chains=4, chain_method="sequential", progress_bar=False)
    start = time.perf_counter()
    mcmc.run(run_key, *args, init_params=init, **kwargs)
    samples = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    t_run = time.perf_counter() - start
    local = set(local_sites(model, args, kwargs))
    table_ = convergence({k: v for k, v in samples.items() if k not in local})
    ess = float(table_["ess_bulk"].min())
    return [config, f"{t_start:.1f}", f"{t_run:.1f}", f"{table_['r_hat'].max():.3f}", f"{ess:.0f}",
            f"{ess / (t_start + t_run):.2f}"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="mixture,hmm_user,gmm,hmm")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--draws", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--letters", default="40,60", help="paragraphs and letters per paragraph of the HMM cases")
    args = parser.parse_args()
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d')}")
    for name in args.cases.split(","):
        label, model, model_args, model_kwargs, estimate, sites, t_fit = case(name, *map(int, args.letters.split(",")))
        rows = [run(config, model, model_args, model_kwargs, estimate, sites, args.warmup, args.draws, args.seed)
                for config in args.configs.split(",")]
        print(f"\n{label}: spectral + refine {t_fit:.1f} s; 4 chains x ({args.warmup} + {args.draws})\n")
        print(table(["start", "start time (s)", "NUTS time (s)", "max R-hat (global)", "min bulk ESS",
                     "ESS / s"], rows))
        print(flush=True)


if __name__ == "__main__":
    main()
