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

With ``--online``: observations arriving in 10 batches through ``kernel_multiview.update`` (exact merged
feature sums, the density support a uniform sample of every observation seen) against one
``kernel_multiview.spectral`` on all of them: the planted 1-D scenario (weights error / mean L1 / seconds of
all updates, of ``SpectralKernelMultiView.partial_fit`` over the same batches read once at the end, and of
the one fit), and real data, scikit-learn's digits 0, 1 and 6 with three bands of image rows
(each reduced to 2 principal components) as views, 80% of the images for training (seeded): held-out ARI
against the digit labels of the streamed estimate, of the one fit, of scikit-learn's ``MiniBatchKMeans``
``partial_fit`` over the same batches and of ``GaussianMixture`` fitted on all training rows (concatenated
views, best of 3 starts).

Usage: ``python benchmarks/bench_kernel_multiview.py [--quick] [--online]``
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import MiniBatchKMeans
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture

from specinit.estimators import SpectralKernelMultiView
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


def streamed(views, k, n_batches):
    """``kernel_multiview.update`` over ``n_batches`` consecutive batches of ``views``: (estimate, seconds)."""
    estimate, start = None, time.perf_counter()
    for rows in np.array_split(np.arange(views[0].shape[0]), n_batches):
        estimate = km.update([x[rows] for x in views], estimate, k=k, seed=0)
    return estimate, time.perf_counter() - start


def streamed_estimator(views, k, n_batches):
    """``SpectralKernelMultiView.partial_fit`` over the batches, then one read of the model: seconds."""
    model, start = SpectralKernelMultiView(k, random_state=0), time.perf_counter()
    for rows in np.array_split(np.arange(views[0].shape[0]), n_batches):
        model.partial_fit([x[rows] for x in views])
    model.estimate_  # noqa: B018 -- the read that recovers the parameters
    return time.perf_counter() - start


def digit_views():
    """Digits 0, 1 and 6; three bands of image rows, each reduced to 2 principal components: (views, labels)."""
    digits = load_digits()
    keep = np.isin(digits.target, [0, 1, 6])
    images, labels = digits.images[keep], digits.target[keep]
    bands = [images[:, rows].reshape(len(images), -1) for rows in (slice(0, 3), slice(3, 6), slice(6, 8))]
    return [PCA(2, random_state=0).fit_transform(b[:, b.std(axis=0) > 0]) for b in bands], labels


def online(sizes, n_batches=10):
    print(f"\nOnline: {n_batches} batches through kernel_multiview.update against one kernel_multiview.spectral")
    print(f"\n| scenario | N | update x {n_batches}: weights err / mean L1 / s | partial_fit x {n_batches}, read "
          "once: s | one spectral: weights err / mean L1 / s |")
    print("|---|---|---|---|---|")
    weights, components = SCENARIOS["1-D views, k=3"]
    km.update(sample(weights, components, 500, seed=0), k=3)  # warm: compiled code loads here, not in a timed call
    for n in sizes:
        views = sample(weights, components, n, seed=n)
        estimate, t_stream = streamed(views, 3, n_batches)
        t_estimator = streamed_estimator(views, 3, n_batches)
        start = time.perf_counter()
        once = km.spectral(views, 3, seed=0)
        t_once = time.perf_counter() - start
        cells = [score(weights, components, e.params["weights"],
                       [km.conditional_density(e, v, grid_for(1)[0]).T for v in range(3)]) for e in (estimate, once)]
        print(f"| 1-D views, k=3 | {n:,} | {cells[0][0]:.3f} / {cells[0][1]:.3f} / {t_stream:.2f} | "
              f"{t_estimator:.2f} | {cells[1][0]:.3f} / {cells[1][1]:.3f} / {t_once:.2f} |", flush=True)
    views, labels = digit_views()
    train = np.sort(np.random.default_rng(0).permutation(labels.size)[: int(0.8 * labels.size)])
    test = np.setdiff1d(np.arange(labels.size), train)
    estimate, t_stream = streamed([x[train] for x in views], 3, n_batches)
    start = time.perf_counter()
    once = km.spectral([x[train] for x in views], 3, seed=0)
    t_once = time.perf_counter() - start
    x = np.hstack(views)
    start = time.perf_counter()
    kmeans = MiniBatchKMeans(3, random_state=0, n_init=3)
    for rows in np.array_split(train, n_batches):
        kmeans.partial_fit(x[rows])
    t_kmeans = time.perf_counter() - start
    start = time.perf_counter()
    gm = max((GaussianMixture(3, random_state=seed).fit(x[train]) for seed in range(3)),
             key=lambda fit: fit.score(x[train]))
    t_gm = time.perf_counter() - start
    held = [x[test] for x in views]
    aris = [adjusted_rand_score(labels[test], km.predict(held, e)[1]) for e in (estimate, once)]
    print(f"\nReal data: digits 0/1/6, three bands of image rows (2 principal components each), "
          f"{train.size} training / {test.size} held-out images; held-out ARI against the digit (seconds)\n")
    print(f"| update x {n_batches} | one spectral | MiniBatchKMeans partial_fit x {n_batches} | GaussianMixture on "
          "all (best of 3) |")
    print("|---|---|---|---|")
    print(f"| {aris[0]:.3f} ({t_stream:.2f}) | {aris[1]:.3f} ({t_once:.2f}) | "
          f"{adjusted_rand_score(labels[test], kmeans.predict(x[test])):.3f} ({t_kmeans:.2f}) | "
          f"{adjusted_rand_score(labels[test], gm.predict(x[test])):.3f} ({t_gm:.2f}) |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1000 and 10000 only")
    parser.add_argument("--online", action="store_true", help="only the batches through kernel_multiview.update")
    args = parser.parse_args()
    sizes = (1000, 10000) if args.quick else (1000, 10000, 100000)
    print(f"machine: {machine()}; load average at start: {os.getloadavg()[0]:.1f}")
    if args.online:
        online(sizes[1:])
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
        return
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
