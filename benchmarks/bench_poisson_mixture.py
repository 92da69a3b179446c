"""Poisson mixtures on real counts: scikit-learn's digits against EM with random restarts and GaussianMixture.

Each of the 64 features of ``load_digits`` counts the set pixels of a 4 x 4 block (0..16); the three features that
are zero in every image are left out (no model learns anything from them, and a Gaussian's variance would collapse
there). For each of three seeded splits (80% training rows, 20% held out), k = 10 components:

* ``poisson_mixture.spectral`` (method of moments from factorial moments);
* spectral then EM (``poisson_mixture.refine`` with its defaults), and with ``restarts=9`` (EM's raced perturbed
  copies of the spectral start);
* EM for the Poisson mixture written here in NumPy, the recipe users of count mixtures run: k-means++ starts
  (``sklearn.cluster.kmeans_plusplus`` on the counts, rates floored at 1e-3, equal weights), 10 restarts, the best
  training log-likelihood kept, each run stopped when the relative gain falls under 1e-6 (``refine``'s default rule
  is of the same size);
* scikit-learn's ``GaussianMixture`` on the same counts (full and diagonal covariances, k-means init, best of 10
  ``n_init``).

Reported: held-out log-likelihood per row (for the Poisson models a log-probability; for ``GaussianMixture`` the
log-density at the integer points, which approximates the log-probability of the unit cell around each point only
where the density is smooth at unit scale), adjusted Rand index of the held-out rows' clusters against the digit
labels, and wall time of the fit (one BLAS thread for every method; the spectral fit is warmed up once first).
pomegranate (whose 1.x Poisson mixtures are the usual library peer) is not in the table: it requires PyTorch.

Usage: ``python benchmarks/bench_poisson_mixture.py``.
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table  # noqa: E402

from scipy.special import gammaln, logsumexp  # noqa: E402
from sklearn.cluster import kmeans_plusplus  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from specinit.models import poisson_mixture as pm  # noqa: E402

K = 10
SPLITS = (0, 1, 2)


def poisson_em(x, k, seed, max_iter=1000, rtol=1e-6):
    """EM for a Poisson mixture from a k-means++ start: ``(weights, rates, training log-likelihood, iterations)``."""
    centers, _ = kmeans_plusplus(x.astype(np.float64), k, random_state=seed)
    weights, rates = np.full(k, 1.0 / k), np.maximum(centers, 1e-3)
    log_factorials = gammaln(x + 1.0).sum(axis=1)
    previous = -np.inf
    for iteration in range(1, max_iter + 1):
        joint = x @ np.log(rates).T - rates.sum(axis=1) + np.log(weights) - log_factorials[:, None]
        rows = logsumexp(joint, axis=1)
        total = float(rows.sum())
        if total - previous <= rtol * abs(total):
            break
        previous = total
        resp = np.exp(joint - rows[:, None])
        mass = resp.sum(axis=0) + 1e-12
        weights, rates = mass / mass.sum(), np.maximum(resp.T @ x / mass[:, None], 1e-10)
    return weights, rates, total, iteration


def poisson_scores(x, weights, rates):
    """Per-row log-likelihood and most probable component under a Poisson mixture."""
    joint = x @ np.log(rates).T - rates.sum(axis=1) + np.log(weights) - gammaln(x + 1.0).sum(axis=1)[:, None]
    return logsumexp(joint, axis=1), joint.argmax(axis=1)


def best_of_restarts(x, k, n_restarts):
    runs = [poisson_em(x, k, seed) for seed in range(n_restarts)]
    weights, rates, _, _ = max(runs, key=lambda run: run[2])
    return weights, rates, sum(run[3] for run in runs)


def fits(train):
    """``{method: (fit seconds, scorer(x) -> (log-likelihood per row, labels), note)}`` on one training set."""
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        spectral = pm.spectral(train, K, seed=0)
        t_spectral = time.perf_counter() - start
    floored, size = spectral.diagnostics["floored_rates"], spectral.params["rates"].size
    note = f"{len(caught)} RuntimeWarning(s); {floored} of {size} rates floored"
    out["poisson_mixture.spectral"] = (t_spectral, lambda x: (pm.log_likelihood(x, spectral),
                                                              pm.predict(x, spectral)[1]), note)
    for restarts in (0, 9):
        start = time.perf_counter()
        result = pm.refine(train, spectral, restarts=restarts, seed=0)
        elapsed = t_spectral + time.perf_counter() - start
        out[f"spectral + EM (refine, restarts={restarts})"] = (
            elapsed, lambda x, e=result.estimate: (pm.log_likelihood(x, e), pm.predict(x, e)[1]),
            f"{result.n_iter} EM steps")
    start = time.perf_counter()
    weights, rates, steps = best_of_restarts(train, K, 10)
    out["EM, k-means++ starts, best of 10 (NumPy)"] = (time.perf_counter() - start,
                                                       lambda x: poisson_scores(x, weights, rates),
                                                       f"{steps} EM steps in all")
    for covariance in ("full", "diag"):
        start = time.perf_counter()
        gm = GaussianMixture(K, covariance_type=covariance, n_init=10, random_state=0, max_iter=500).fit(train)
        out[f"sklearn GaussianMixture ({covariance}, n_init=10)"] = (
            time.perf_counter() - start, lambda x, g=gm: (g.score_samples(x), g.predict(x)),
            "log-density, not a probability")
    return out


def main():
    digits = load_digits()
    x, labels = digits.data.astype(np.float64), digits.target
    x = x[:, x.max(axis=0) > 0]
    results = {}
    with threadpool_limits(1):
        pm.spectral(x, K, seed=0)  # warm-up: imports and compilation are not timed
        for seed in SPLITS:
            order = np.random.default_rng(seed).permutation(len(x))
            train, test = order[: int(0.8 * len(x))], order[int(0.8 * len(x)):]
            for method, (seconds, score, note) in fits(x[train]).items():
                held, predicted = score(x[test])
                results.setdefault(method, []).append((float(np.mean(held)), adjusted_rand_score(labels[test],
                                                                                                 predicted),
                                                       seconds, note))
                print(method, seed, results[method][-1], flush=True)
    rows = []
    for method, runs in results.items():
        ll, ari, seconds = (np.array([run[i] for run in runs]) for i in range(3))
        rows.append([method, f"{ll.mean():.2f} [{ll.min():.2f}, {ll.max():.2f}]",
                     f"{ari.mean():.3f} [{ari.min():.3f}, {ari.max():.3f}]", f"{seconds.mean():.3f}", runs[0][3]])
    print(f"\n{machine()}\nload_digits: {x.shape[0]} images, d = {x.shape[1]} block counts, k = {K}, "
          f"splits {SPLITS} (80/20); mean [min, max] over the splits; time: fit on the training rows, one BLAS "
          "thread; notes from split 0\n")
    print(table(["method", "held-out log-lik / row", "held-out ARI", "fit time (s)", "notes"], rows))


if __name__ == "__main__":
    main()
