"""A Poisson mixture of real counts: clustering handwritten digits
===============================================================

scikit-learn's ``load_digits`` (bundled, no download) holds 1,797 images of
handwritten digits as 64 counts: each feature counts the set pixels of a
4 x 4 block (0..16). A mixture of independent Poissons over the blocks is a
natural model of such rows, and the one users of count mixtures fit by EM
from random starts. Here:

1. the method-of-moments estimate (``poisson_mixture.spectral``): the
   factorial moments of the counts, ``E[x x^T] - diag(E[x])`` and its
   third-order analogue, equal ``sum_i w_i rates_i^(x)2`` and ``sum_i w_i
   rates_i^(x)3``, whitened and decomposed in passes over the rows;
2. spectral then refine (``poisson_mixture.refine``: EM from the estimate);
3. the usual recipe beside it: EM from k-means++ starts, best of several
   restarts, and scikit-learn's ``GaussianMixture`` on the same counts;
4. the estimate as values of the NumPyro program's sites.

Every method is scored on held-out images (20%): log-likelihood per row,
adjusted Rand index (ARI) of the clusters against the digit labels, and
wall time. Set ``SPECINIT_TUTORIAL_SMALL=1`` for a fast run (fewer restarts).
"""


# %%
import os
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from numpyro.infer.util import log_likelihood as numpyro_log_likelihood
from sklearn.cluster import kmeans_plusplus
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

from specinit.models import poisson_mixture as pm

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
RESTARTS = 3 if SMALL else 10
K = 10
# One BLAS thread for every method: products of this size gain nothing from threads, and on a shared machine
# spinning BLAS threads make GaussianMixture ten times slower.
threadpool_limits(limits=1)


def recorded(func, *args, **kwargs):
    """``func(*args, **kwargs)`` and the RuntimeWarnings it issued (printed below, not raised)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        out = func(*args, **kwargs)
    return out, [str(w.message) for w in caught]


# %%
# The counts
# ----------
# Three blocks are empty in every image (the left and right edges of some
# rows): they carry nothing, and a Gaussian's variance would collapse on
# them, so they are left out. 80% of the images train, 20% are held out.

# %%
digits = load_digits()
kept = digits.data.max(axis=0) > 0
x, labels = digits.data[:, kept].astype(np.int64), digits.target
order = np.random.default_rng(0).permutation(len(x))
train, test = order[: int(0.8 * len(x))], order[int(0.8 * len(x)):]
print(f"{x.shape[0]} images, d = {x.shape[1]} block counts (max {x.max()}), k = {K}; "
      f"{train.size} training, {test.size} held out")

# %%
# Spectral, then EM
# -----------------
# The moment estimate warns about what it met: on real images, which are not
# an exact ten-component Poisson mixture, some recovered rates come out at
# or below zero and are floored inside the support (counted in
# ``diagnostics["floored_rates"]``), and the tensor decomposition may leave a
# component short of its tolerance. EM from the estimate repairs both.
# The first calls in a process pay for imports; the timed ones are the second.

# %%
recorded(pm.refine, x[train], recorded(pm.spectral, x[train], K, seed=0)[0], max_iter=2)
results = {}
start = time.perf_counter()
spectral, caught = recorded(pm.spectral, x[train], K, seed=0)
results["spectral"] = (spectral, time.perf_counter() - start)
for message in caught:
    print("warned:", message[:160])
print(f"floored rates: {spectral.diagnostics['floored_rates']} of {spectral.params['rates'].size}")

start = time.perf_counter()
refined, caught = recorded(pm.refine, x[train], spectral)
results["spectral + EM"] = (refined.estimate, results["spectral"][1] + time.perf_counter() - start)
print(f"EM from the spectral estimate: {refined.n_iter} steps, converged {refined.converged}, "
      f"training log-likelihood per row {refined.mean_log_likelihood:.2f}")

# %%
# EM from random starts, and a Gaussian mixture
# ---------------------------------------------
# The usual recipe: k-means++ centres of the counts as starting rates (floored
# at 1e-3, equal weights), EM from each, the best training log-likelihood
# kept. It runs the same EM (``poisson_mixture.refine`` from a dict of site
# values), so only the start differs. scikit-learn's ``GaussianMixture`` reads
# the counts as real values: its held-out score is a log-density at the
# integer points, close to a log-probability only where the density is
# smooth at unit scale (here it is not: blocks that are nearly always empty
# get tiny variances).

# %%
start = time.perf_counter()
runs = []
for seed in range(RESTARTS):
    centres, _ = kmeans_plusplus(x[train].astype(np.float64), K, random_state=seed)
    start_values = {"weights": np.full(K, 1.0 / K), "rates": np.maximum(centres, 1e-3)}
    runs.append(recorded(pm.refine, x[train], start_values)[0])
best = max(runs, key=lambda run: run.log_likelihood[-1])
results[f"EM, k-means++, best of {RESTARTS}"] = (best.estimate, time.perf_counter() - start)
print(f"training log-likelihood per row of the {RESTARTS} runs:",
      np.round([run.mean_log_likelihood for run in runs], 2))

start = time.perf_counter()
gaussian = GaussianMixture(K, covariance_type="full", n_init=1 if SMALL else 10, random_state=0).fit(x[train])
t_gaussian = time.perf_counter() - start

# %%
# Held-out scores
# ---------------

# %%
print(f"{'method':28s} {'held-out log-lik/row':>21s} {'ARI':>6s} {'time (s)':>9s}")
for name, (estimate, seconds) in results.items():
    held_out = pm.log_likelihood(x[test], estimate).mean()
    ari = adjusted_rand_score(labels[test], pm.predict(x[test], estimate)[1])
    print(f"{name:28s} {held_out:21.2f} {ari:6.3f} {seconds:9.2f}")
print(f"{'GaussianMixture (full)':28s} {gaussian.score(x[test]):21.2f} "
      f"{adjusted_rand_score(labels[test], gaussian.predict(x[test])):6.3f} {t_gaussian:9.2f}   (a log-density)")

# %%
# The rates as images, and the NumPyro program
# --------------------------------------------
# Each component's rates, put back on the 8 x 8 grid of blocks (the empty
# blocks at zero), show the digit it stands for. The estimate holds the
# values of the NumPyro program's sites (``weights``, ``rates``): the model's
# per-row log-likelihood at them is the family's ``log_likelihood``, so the
# estimate can start NumPyro's samplers (``specinit.warmstart``).

# %%
estimate = results["spectral + EM"][0]
images = np.zeros((K, 64))
images[:, kept] = estimate.params["rates"]
fig, axes = plt.subplots(1, K, figsize=(1.4 * K, 1.8))
for ax, image, weight in zip(axes, images, estimate.params["weights"]):
    ax.imshow(image.reshape(8, 8), cmap="gray_r")
    ax.set_title(f"w = {weight:.2f}", fontsize=8)
    ax.axis("off")
fig.savefig("poisson_mixture_digits.png", dpi=80, bbox_inches="tight")

values = {name: value[None] for name, value in estimate.params.items()}
per_row = np.asarray(numpyro_log_likelihood(pm.model, values, counts=x[test], k=K)["counts"][0])
relative = np.max(np.abs(per_row / pm.log_likelihood(x[test], estimate) - 1.0))
print(f"NumPyro model log-likelihood at the estimate against the family's: relative difference {relative:.1e} "
      "(JAX computes in float32)")
