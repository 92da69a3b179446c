"""Spherical Gaussian mixtures: spectral estimate vs scikit-learn's EM.

For each (d, k, N): draw a spherical mixture (means about 4 noise standard
deviations apart, unequal weights, common unit variance), then measure in the same run

* the spectral estimate (:func:`specinit.models.gmm.spectral`, Thm 3.2 of
  Anandkumar et al. 2014): wall time and mean location error after Hungarian
  matching;
* ``GaussianMixture(covariance_type="spherical", init_params="kmeans")``:
  wall time, mean location error, EM iterations, final average log-likelihood;
* the same EM started from the spectral estimate (``means_init``,
  ``weights_init``, ``precisions_init``): iterations and final log-likelihood.

Prints a markdown table. ``--quick`` runs a reduced grid.

Usage: ``python benchmarks/bench_gmm.py [--quick] [--seed 0]``
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.mixture import GaussianMixture
from specinit.models import gmm


def draw(rng, d, k, n):
    weights = rng.dirichlet(np.full(k, 5.0))
    loc = rng.normal(size=(k, d)) * 4.0 / np.sqrt(2 * d)  # pairwise distances ~4 noise standard deviations
    h = rng.choice(k, size=n, p=weights)
    return loc[h] + rng.standard_normal((n, d)), loc, weights


def loc_error(estimated, loc):
    cost = np.linalg.norm(estimated[:, None] - loc[None], axis=2)
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].mean())


def run(d, k, n, seed):
    x, loc, weights = draw(np.random.default_rng(seed), d, k, n)
    t0 = time.perf_counter()
    est = gmm.spectral(x, k, seed=seed)
    t_spec = time.perf_counter() - t0

    t0 = time.perf_counter()
    em = GaussianMixture(k, covariance_type="spherical", init_params="kmeans", random_state=seed, max_iter=500).fit(x)
    t_em = time.perf_counter() - t0

    t0 = time.perf_counter()
    warm = GaussianMixture(k, covariance_type="spherical", means_init=est.params["loc"],
                           weights_init=est.params["weights"],
                           precisions_init=np.full(k, 1.0 / float(est.params["scale"]) ** 2),
                           random_state=seed, max_iter=500).fit(x)
    t_warm = time.perf_counter() - t0
    return {
        "d": d, "k": k, "N": n,
        "spec_s": t_spec, "spec_err": loc_error(est.params["loc"], loc),
        "em_s": t_em, "em_err": loc_error(em.means_, loc), "em_iter": em.n_iter_, "em_ll": em.score(x),
        "warm_s": t_warm, "warm_err": loc_error(warm.means_, loc), "warm_iter": warm.n_iter_, "warm_ll": warm.score(x),
    }


def nuts_comparison(seed, d=5, k=3, n=500):
    """NUTS, 4 chains, a small mixture: max split-R-hat with the spectral vs the default init."""
    from specinit.compare import compare_nuts

    x, _, _ = draw(np.random.default_rng(seed), d, k, n)
    est = gmm.spectral(x, k, seed=seed)
    result = compare_nuts(gmm.model, est, model_args=(x.astype(np.float32),), model_kwargs={"k": k},
                          num_chains=4, num_warmup=500, num_samples=500, seed=seed)
    return result.summary()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d in (10,), k in (3,), N in (10000,) plus one larger case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nuts", action="store_true", help="only the NUTS warm-vs-default comparison")
    args = parser.parse_args(argv)
    if args.nuts:
        print("NUTS, 4 chains x (500 + 500), spherical GMM d=5, k=3, N=500")
        for key, value in nuts_comparison(args.seed).items():
            print(f"| {key} | {value:.3f} |")
        return
    grid = ([(10, 3, 10_000), (50, 10, 10_000)] if args.quick
            else list(itertools.product((10, 50), (3, 10), (10_000, 100_000))))
    rows = [run(d, k, n, args.seed) for d, k, n in grid if d >= k]
    print("| d | k | N | spectral s | spectral err | EM(k-means) s | EM err | EM iters | EM loglik "
          "| EM(spectral) s | err | iters | loglik |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['d']} | {r['k']} | {r['N']} | {r['spec_s']:.3f} | {r['spec_err']:.3f} | {r['em_s']:.3f} | "
              f"{r['em_err']:.3f} | {r['em_iter']} | {r['em_ll']:.4f} | {r['warm_s']:.3f} | {r['warm_err']:.3f} | "
              f"{r['warm_iter']} | {r['warm_ll']:.4f} |")
    print("\nerr: mean Euclidean distance between matched estimated and true means; "
          "loglik: average per-observation log-likelihood; EM(spectral): EM started at the spectral estimate. "
          "Times include EM's k-means initialization.")


if __name__ == "__main__":
    main()
