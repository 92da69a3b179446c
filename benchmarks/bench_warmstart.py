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

The user-written models (``--cases user_lda,user_mixture,user_lkj,user_ghmm``: an LDA with sites ``topics``,
``doc_topics`` on 150 stdlib docstring paragraphs, V = 300, K = 4; a mixture of multinomials with sites ``mix``,
``word_probs`` and an enumerated assignment on 500 paragraphs, K = 5; a full-covariance Gaussian mixture with
LKJ correlations on iris, mapped by ``gmm.lkj_sites()``; a Gaussian HMM with ``scan`` on 500 daily returns of
matplotlib's GOOG sample, K = 3) run through :func:`specinit.compare.compare_nuts` with the recommended call
(its defaults) instead: NumPyro's default (NUTS from ``init_to_uniform``) and NUTS from the estimate
(``exact=False``), and for the count models the exact conditional sampler from NumPyro's default start and
from the estimate (the recommended call). Reported: max R-hat and min bulk ESS over the global sites, ESS per
second of run time, divergences, mean tree size and the warm run's metric.

Run: ``python benchmarks/bench_warmstart.py [--cases mixture,hmm_user,gmm,hmm,lda,user_lda,user_mixture,user_lkj,
user_ghmm] [--warmup 300] [--draws 300] [--letters 40,60]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.contrib.control_flow import scan
from numpyro.contrib.funsor import config_enumerate
from numpyro.infer import MCMC, NUTS

from _common import machine, table
from specinit.compare import compare_nuts, local_sites
from specinit.conditional import find_structure
from specinit.corpus import load_letter_sequences, load_python_docs
from specinit.examples import HMM_SITES, MIXTURE_SITES, enumerated_hmm, enumerated_mixture, lkj_mixture
from specinit.models import gaussian_hmm, gmm, hmm, lda, single_topic
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


def user_lda(counts, k=4):
    """An LDA as users write it (Dirichlet topics and proportions, a multinomial of their product)."""
    n, v = counts.shape
    topics = numpyro.sample("topics", dist.Dirichlet(0.1 * jnp.ones((k, v))).to_event(1))
    with numpyro.plate("docs", n):
        doc_topics = numpyro.sample("doc_topics", dist.Dirichlet(0.5 * jnp.ones(k)))
        numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=doc_topics @ topics), obs=counts)


@config_enumerate
def user_mixture(counts, k=5):
    """A mixture of multinomials as users write it (enumerated assignment per document)."""
    n, v = counts.shape
    mix = numpyro.sample("mix", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("components", k):
        word_probs = numpyro.sample("word_probs", dist.Dirichlet(0.1 * jnp.ones(v)))
    with numpyro.plate("docs", n):
        z = numpyro.sample("z", dist.Categorical(mix))
        numpyro.sample("obs", dist.Multinomial(counts.sum(-1), probs=word_probs[z]), obs=counts)


def user_gaussian_hmm(y, k=3):
    """A Gaussian HMM as users write it (``scan`` over time, enumerated state; the chain starts from state 0)."""
    trans = numpyro.sample("trans", dist.Dirichlet(jnp.ones((k, k)) + 4.0 * jnp.eye(k)).to_event(1))
    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([k]).to_event(1))
    sigma = numpyro.sample("sigma", dist.HalfNormal(5.0).expand([k]).to_event(1))

    def step(state, y_t):
        state = numpyro.sample("state", dist.Categorical(trans[state]), infer={"enumerate": "parallel"})
        numpyro.sample("y", dist.Normal(mu[state], sigma[state]), obs=y_t)
        return state, None

    scan(step, 0, y)


def goog_returns(n: int = 500) -> np.ndarray:
    """Daily log returns (percent) of matplotlib's sample GOOG prices, from 2004."""
    from matplotlib import cbook

    close = cbook.get_sample_data("goog.npz")["price_data"]["adj_close"]
    return (100 * np.diff(np.log(close))[:n]).astype(np.float32)


def user_case(name: str):
    """``(label, model, model_args, estimate, sites, start seconds)`` of a user-written model on real data."""
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # real data are not exact k-component models
        if name == "user_lkj":
            x = standardized("load_iris")
            estimate = gmm.refine(x, gmm.spectral(x, 3, seed=0), covariance="full").estimate
            return ("user full-covariance mixture (weights, locs, scales, LKJ corr), iris", lkj_mixture, (x,),
                    estimate, gmm.lkj_sites(), time.perf_counter() - start)
        if name == "user_ghmm":
            y = goog_returns()
            estimate = gaussian_hmm.refine([y], gaussian_hmm.spectral([y], 3, seed=0)).estimate
            return ("user Gaussian HMM (trans, mu, sigma; scan), 500 GOOG daily returns, K = 3", user_gaussian_hmm,
                    (y,), estimate, {"trans": "transition", "mu": "loc", "sigma": "scale"},
                    time.perf_counter() - start)
        corpus = load_python_docs(max_words=300)
        counts = corpus.counts[np.asarray(corpus.counts.sum(1)).ravel() >= 10]
        if name == "user_lda":
            x = counts[:150]
            estimate = lda.refine(x, lda.spectral(x, 4, seed=0, doc_topics=True)).estimate
            return ("user LDA (topics, doc_topics), 150 docstring paragraphs, V = 300, K = 4", user_lda,
                    (x.toarray().astype(np.float32),), estimate, {"topics": "beta", "doc_topics": "theta"},
                    time.perf_counter() - start)
        x = counts[:500]
        estimate = single_topic.refine(x, single_topic.spectral(x, 5, seed=0)).estimate
        return ("user mixture of multinomials (mix, word_probs, enumerated z), 500 paragraphs, V = 300, K = 5",
                user_mixture, (x.toarray().astype(np.float32),), estimate, {"mix": "weights", "word_probs": "beta"},
                time.perf_counter() - start)


def user_rows(model, model_args, estimate, sites, warmup, draws, seed):
    """The arms of a user-model case (module notes): two calls of compare_nuts, the second where a structure is
    sampled exactly."""
    rows = []
    for exact in (False, True) if find_structure(model, model_args) is not None else (False,):
        result = compare_nuts(model, estimate, model_args, sites=sites, num_warmup=warmup, num_samples=draws,
                              seed=seed, exact=exact)
        summary = result.summary()
        for start, side in (("default start", "cold"), ("estimate", "warm")):
            ess = summary[f"{side}_min_ess"]
            rows.append([f"{summary['sampler']}, {start}", f"{summary[f'{side}_time_s']:.1f}",
                         f"{summary[f'{side}_max_rhat']:.3f}", f"{ess:.0f}", f"{summary[f'{side}_ess_per_s']:.2f}",
                         str(summary[f"{side}_divergences"]), f"{summary[f'{side}_mean_num_steps']:.0f}",
                         summary["warm_metric"] if side == "warm" else "identity"])
    return rows


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
        if name.startswith("user_"):
            label, model, model_args, estimate, sites, t_fit = user_case(name)
            rows = user_rows(model, model_args, estimate, sites, args.warmup, args.draws, args.seed)
            print(f"\n{label}: spectral + refine {t_fit:.1f} s; 4 chains x ({args.warmup} + {args.draws})\n")
            print(table(["sampler, start", "time (s)", "max R-hat (global)", "min bulk ESS", "ESS / s", "divergences",
                         "tree size", "metric"], rows))
            print(flush=True)
            continue
        label, model, model_args, model_kwargs, estimate, sites, t_fit = case(name, *map(int, args.letters.split(",")))
        rows = [run(config, model, model_args, model_kwargs, estimate, sites, args.warmup, args.draws, args.seed)
                for config in args.configs.split(",")]
        print(f"\n{label}: spectral + refine {t_fit:.1f} s; 4 chains x ({args.warmup} + {args.draws})\n")
        print(table(["start", "start time (s)", "NUTS time (s)", "max R-hat (global)", "min bulk ESS",
                     "ESS / s"], rows))
        print(flush=True)


if __name__ == "__main__":
    main()
