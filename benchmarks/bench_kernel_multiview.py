"""Nonparametric multi-view mixtures (seed 004) vs parametric Gaussian estimators on non-Gaussian components.

Planted multi-view mixtures whose conditional densities are Gamma, Beta,
Laplace and bimodal (1-2 dimensions per view, k = 2-5, N = 10^3-10^5). For
each, in the same run:

* ``kernel_multiview.spectral`` (random Fourier features of rank 128,
  median pairwise distance as bandwidth, no tuning);
* the parametric Gaussian multi-view estimator ``multiview.spectral`` with
  ``kinds="gaussian"`` (diagonal Gaussian per component and view; needs
  ``d_v >= k``, otherwise "n/a");
* scikit-learn ``GaussianMixture`` (full covariance, k-means init) on the
  concatenated views; its per-view conditional density is the Gaussian
  marginal of each component.

Errors after Hungarian matching of the components (on the view-0 densities):
the largest absolute error of the mixing weights, and the mean (over views
and components) L1 distance between the estimated and true conditional
densities on a grid (1-D views: 1401 points; 2-D views: 61 x 61). Time is the
wall time of the fit and, in brackets, the CPU time of this process (user +
system, all threads; on a shared machine wall time includes waiting for the
CPU). Densities evaluated afterwards are not timed. The load average at the
start and end of the run is printed.

Usage: ``python benchmarks/bench_kernel_multiview.py [--quick]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from sklearn.mixture import GaussianMixture

from specinit.models import kernel_multiview as km
from specinit.models import multiview as mv

try:
    from _common import machine
except ImportError:  # run from elsewhere
    from benchmarks._common import machine


class Bimodal:
    """Equal mixture of N(a, s^2) and N(b, s^2)."""

    def __init__(self, a, b, s):
        self.a, self.b, self.s = a, b, s

    def rvs(self, size, rng):
        return np.where(rng.random(size) < 0.5, self.a, self.b) + self.s * rng.standard_normal(size)

    def pdf(self, x):
        return 0.5 * (stats.norm.pdf(x, self.a, self.s) + stats.norm.pdf(x, self.b, self.s))


class Frozen:
    """A scipy.stats frozen distribution with the sampler signature of :class:`Bimodal`."""

    def __init__(self, d):
        self.d = d

    def rvs(self, size, rng):
        return self.d.rvs(size=size, random_state=rng)

    def pdf(self, x):
        return self.d.pdf(x)


def G(a, loc, scale):
    return Frozen(stats.gamma(a, loc=loc, scale=scale))


def L(loc, scale):
    return Frozen(stats.laplace(loc, scale))


def B(a, b, loc, scale):
    return Frozen(stats.beta(a, b, loc=loc, scale=scale))


#: scenario -> (weights, [view][component][coordinate] distributions)
SCENARIOS = {
    "1-D views, k=3": (
        np.array([0.5, 0.3, 0.2]),
        [[[G(2, -1, 1)], [L(2, 0.5)], [Bimodal(-3, 1, 0.5)]],
         [[B(2, 5, -2, 4)], [Bimodal(-1, 3, 0.4)], [L(0, 0.8)]],
         [[Bimodal(-2, 2, 0.5)], [G(3, -2, 0.7)], [B(5, 2, -1, 4)]]],
    ),
    "2-D views, k=2": (
        np.array([0.65, 0.35]),
        [[[G(2, -1, 1), L(1, 0.6)], [Bimodal(-2, 2, 0.5), G(3, -3, 0.8)]],
         [[L(-1, 0.5), B(2, 5, -2, 5)], [B(5, 2, -2, 5), Bimodal(-2, 1, 0.4)]],
         [[Bimodal(-1, 3, 0.5), L(0, 0.5)], [G(2, -3, 1), L(2, 1)]]],
    ),
    "1-D views, k=5": (
        np.array([0.3, 0.25, 0.2, 0.15, 0.1]),
        [[[G(2, -4, 0.8)], [L(0, 0.4)], [Bimodal(-3, 3, 0.4)], [B(2, 2, 1, 3)], [G(2, 3, 0.6)]],
         [[L(4, 0.5)], [G(2, -4, 0.7)], [B(5, 2, -2, 3)], [Bimodal(-4, 1, 0.4)], [L(-1, 0.5)]],
         [[Bimodal(-2, 2, 0.4)], [B(2, 5, -1, 4)], [L(-4, 0.5)], [G(3, 0, 0.8)], [L(5, 0.5)]]],
    ),
}


def sample(weights, components, n, seed):
    rng = np.random.default_rng(seed)
    h = rng.choice(len(weights), size=n, p=weights)
    views = []
    for view in components:
        x = np.empty((n, len(view[0])))
        for i, coords in enumerate(view):
            idx = np.flatnonzero(h == i)
            for j, d in enumerate(coords):
                x[idx, j] = d.rvs(idx.size, rng)
        views.append(x)
    return views


def grid_for(dim):
    if dim == 1:
        g = np.linspace(-8, 9, 1401)
        return g[:, None], g[1] - g[0]
    g = np.linspace(-7, 8, 61)
    pts = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    return pts, (g[1] - g[0]) ** 2


def true_density(coords, pts):
    return np.prod([d.pdf(pts[:, j]) for j, d in enumerate(coords)], axis=0)


def gaussian_density(mean, cov, pts):
    return stats.multivariate_normal(mean, cov, allow_singular=True).pdf(pts)


def score(weights, components, est_weights, densities):
    """(max weight error, mean L1) after matching on view 0; densities[v]: (k, n_points) on grid_for."""
    l1 = []
    truth = []
    for v, view in enumerate(components):
        pts, cell = grid_for(len(view[0]))
        truth.append(np.stack([true_density(c, pts) for c in view]))
        l1.append(cell)
    cost = np.abs(truth[0][:, None, :] - densities[0][None, :, :]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    perm = cols[np.argsort(rows)]
    dist = np.mean([np.abs(densities[v][perm] - truth[v]).sum(axis=1) * l1[v] for v in range(len(components))])
    return float(np.abs(np.asarray(est_weights)[perm] - weights).max()), float(dist)


def run_kernel(views, k):
    start, cpu = time.perf_counter(), time.process_time()
    est = km.spectral(views, k, seed=0)
    elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    dens = [km.conditional_density(est, v, grid_for(x.shape[1])[0]).T for v, x in enumerate(views)]
    return est.params["weights"], dens, elapsed


def run_parametric(views, k):
    if min(x.shape[1] for x in views) < k:
        return None
    start, cpu = time.perf_counter(), time.process_time()
    est = mv.spectral(views, k, kinds=["gaussian"] * len(views), seed=0)
    elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    dens = []
    for v, x in enumerate(views):
        pts = grid_for(x.shape[1])[0]
        loc, scale = est.params[f"loc_{v}"], est.params[f"scale_{v}"]
        dens.append(np.stack([gaussian_density(loc[i], np.diag(scale[i] ** 2), pts) for i in range(k)]))
    return est.params["weights"], dens, elapsed


def run_sklearn(views, k):
    x = np.concatenate(views, axis=1)
    start, cpu = time.perf_counter(), time.process_time()
    gm = GaussianMixture(k, covariance_type="full", random_state=0).fit(x)
    elapsed = (time.perf_counter() - start, time.process_time() - cpu)
    dens, start_col = [], 0
    for view in views:
        cols = slice(start_col, start_col + view.shape[1])
        pts = grid_for(view.shape[1])[0]
        dens.append(np.stack([gaussian_density(gm.means_[i, cols], gm.covariances_[i][cols, cols], pts)
                              for i in range(k)]))
        start_col += view.shape[1]
    return gm.weights_, dens, elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1000 and 10000 only")
    args = parser.parse_args()
    sizes = (1000, 10000) if args.quick else (1000, 10000, 100000)
    print(f"machine: {machine()}; load average at start: {os.getloadavg()[0]:.1f}")
    print()
    print("| scenario | N | kernel_multiview: weights err / mean L1 / wall (CPU) s "
          "| multiview (Gaussian): weights err / mean L1 / wall (CPU) s "
          "| sklearn GaussianMixture: weights err / mean L1 / wall (CPU) s |")
    print("|---|---|---|---|---|")
    for name, (weights, components) in SCENARIOS.items():
        k = len(weights)
        for n in sizes:
            views = sample(weights, components, n, seed=n)
            cells = []
            for runner in (run_kernel, run_parametric, run_sklearn):
                try:
                    out = runner(views, k)
                except Exception as exc:  # report, do not hide: a failing peer is a result
                    cells.append(f"failed ({type(exc).__name__})")
                    continue
                if out is None:
                    cells.append("n/a (d_v < k)")
                    continue
                w_err, l1 = score(weights, components, out[0], out[1])
                cells.append(f"{w_err:.3f} / {l1:.3f} / {out[2][0]:.2f} ({out[2][1]:.2f})")
            print(f"| {name} | {n:,} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
