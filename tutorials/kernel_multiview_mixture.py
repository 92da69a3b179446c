"""Nonparametric multi-view mixtures: kernel embeddings instead of Gaussians
=========================================================================

Three views of each observation, conditionally independent given a hidden
class, with component densities that are skewed (Gamma, Beta), heavy-tailed
(Laplace) or bimodal. A Gaussian mixture gets them wrong; the kernel
spectral method of Song, Anandkumar, Dai and Xie ("Nonparametric Estimation
of Multi-View Latent Variable Models", ICML 2014) recovers the mixing
weights and every component density without assuming a shape:
KernelSVD of the second-order kernel embedding (Alg. 1), the whitened
third-order embedding (eq. 39), the tensor power method (Alg. 2) and the
conditional embeddings (eq. 40), here with random Fourier features of rank
128 (memory O(N r), never N x N) and the median-heuristic bandwidth.

Then a real data set shipped with scikit-learn: handwritten digits, with
three bands of image rows as the three views.

Set ``SPECINIT_TUTORIAL_SMALL=1`` for a fast run (smaller samples).
"""


# %%
import os
import time

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats
from scipy.optimize import linear_sum_assignment
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score
from sklearn.mixture import GaussianMixture

from specinit.models import kernel_multiview as km

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
rng = np.random.default_rng(0)

# %%
# A planted mixture with non-Gaussian components
# ----------------------------------------------
#
#
# k = 3 classes with weights (0.5, 0.3, 0.2); one dimension per view.

# %%
weights = np.array([0.5, 0.3, 0.2])


def bimodal(a, b, s):
    return stats.rv_histogram(np.histogram(np.r_[rng.normal(a, s, 200_000), rng.normal(b, s, 200_000)], bins=400),
                              density=True)


components = [  # [view][component]
    [stats.gamma(2.0, loc=-1.0), stats.laplace(2.0, 0.5), bimodal(-3.0, 1.0, 0.5)],
    [stats.beta(2, 5, loc=-2, scale=4), bimodal(-1.0, 3.0, 0.4), stats.laplace(0.0, 0.8)],
    [bimodal(-2.0, 2.0, 0.5), stats.gamma(3.0, loc=-2.0, scale=0.7), stats.beta(5, 2, loc=-1, scale=4)],
]
n = 2000 if SMALL else 30000
h = rng.choice(3, size=n, p=weights)
views = []
for comps in components:
    x = np.empty(n)
    for i, dist in enumerate(comps):
        x[h == i] = dist.rvs(size=int(np.sum(h == i)), random_state=rng)
    views.append(x[:, None])

start = time.perf_counter()
estimate = km.spectral(views, 3, seed=0)
print(f"spectral fit, N = {n}: {time.perf_counter() - start:.2f} s")
print("bandwidths (half the median distance):", [float(estimate.state[f"bandwidth_{v}"][0]) for v in range(3)])

# %%
# Components come out in an arbitrary order: match them to the truth on the
# densities of view 0, then compare weights and densities (L1 distance on a grid).

# %%
grid = np.linspace(-6, 8, 701)
truth = [np.stack([c.pdf(grid) for c in comps]) for comps in components]
dens = [km.conditional_density(estimate, v, grid).T for v in range(3)]
proj = [km.projected_density(estimate, v, grid).T for v in range(3)]
cost = np.abs(truth[0][:, None] - dens[0][None]).sum(-1)
rows, cols = linear_sum_assignment(cost)
perm = cols[np.argsort(rows)]
print("weights, true:", weights, " estimated:", np.round(estimate.params["weights"][perm], 3))
cell = grid[1] - grid[0]
for v in range(3):
    l1 = np.abs(dens[v][perm] - truth[v]).sum(axis=1) * cell
    print(f"view {v}: L1 distance of the kernel densities per component", np.round(l1, 3))

gm = GaussianMixture(3, random_state=0).fit(np.hstack(views))
print("GaussianMixture on the concatenated views, weights:", np.round(np.sort(gm.weights_)[::-1], 3))

fig, axes = plt.subplots(3, 3, figsize=(11, 8), sharex=True)
for v in range(3):
    for i in range(3):
        ax = axes[v, i]
        ax.plot(grid, truth[v][i], "k-", lw=2, label="truth")
        ax.plot(grid, dens[v][perm[i]], "C0-", label="kernel density (spectral)")
        ax.plot(grid, proj[v][perm[i]], "C1--", label="2-Gaussian projection (NumPyro init)")
        ax.set_title(f"view {v}, component {i}", fontsize=9)
axes[0, 0].legend(fontsize=7)
fig.tight_layout()
fig.savefig("kernel_multiview_densities.png", dpi=90)
print("wrote kernel_multiview_densities.png")

# %%
# Warm-started SVI on the NumPyro model
# -------------------------------------
#
#
# ``kernel_multiview.model`` gives each component and view a mixture of m = 2
# Gaussians (the parametric projection above), with the class summed out. A
# MAP fit (AutoDelta) started at the projected spectral estimate is compared
# with NumPyro's default start (``init_to_uniform``), same steps and step size.

# %%
from specinit.compare import compare_svi

subset = [x[:1000] for x in views]
svi = compare_svi(km.model, estimate, (subset,), {"k": 3, "m": 2}, guide="delta",
                  num_steps=200 if SMALL else 2000, lr=0.02, seed=0)
print(f"SVI loss, spectral start: first {svi.warm_losses[0]:.1f}, last {svi.warm_losses[-1]:.1f}")
print(f"SVI loss, default start:  first {svi.cold_losses[0]:.1f}, last {svi.cold_losses[-1]:.1f}")

# %%
# Real data: digits, three bands of image rows as views
# -----------------------------------------------------
#
#
# scikit-learn's 8 x 8 digits (bundled, no download). Rows 0-2, 3-5 and 6-7
# of each image are three views of the same digit; given the digit they are
# roughly (not exactly) independent. We keep digits 0, 1 and 6, drop pixels
# that are constant (a constant column is rejected: it carries no
# information), and reduce each band to its 2 leading principal components.

# %%
digits = load_digits()
keep = np.isin(digits.target, [0, 1, 6])
images, labels = digits.images[keep], digits.target[keep]
if SMALL:
    images, labels = images[:300], labels[:300]
bands = [images[:, 0:3].reshape(len(images), -1), images[:, 3:6].reshape(len(images), -1),
         images[:, 6:8].reshape(len(images), -1)]
bands = [b[:, b.std(axis=0) > 0] for b in bands]
digit_views = [PCA(2, random_state=0).fit_transform(b) for b in bands]

start = time.perf_counter()
digit_est = km.spectral(digit_views, 3, seed=0)
print(f"digits: N = {len(labels)}, fit {time.perf_counter() - start:.2f} s")
print("class proportions:", np.round(np.bincount(labels)[[0, 1, 6]] / len(labels), 3),
      " spectral weights:", np.round(np.sort(digit_est.params["weights"])[::-1], 3))

# MAP class of each image under the projected (Gaussian-mixture) densities: log w + sum_v log p_v(x_v | h)
logp = np.log(digit_est.params["weights"]) + sum(
    np.log(np.maximum(km.projected_density(digit_est, v, x), 1e-300)) for v, x in enumerate(digit_views))
spectral_labels = logp.argmax(axis=1)
gm_labels = GaussianMixture(3, random_state=0).fit_predict(np.hstack(digit_views))
print("adjusted Rand index vs digit labels: spectral", round(adjusted_rand_score(labels, spectral_labels), 3),
      "| GaussianMixture", round(adjusted_rand_score(labels, gm_labels), 3))

fig, axes = plt.subplots(1, 3, figsize=(11, 3.4))
lo, hi = digit_views[0].min() - 3, digit_views[0].max() + 3
g = np.linspace(lo, hi, 121)
pts = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
dens0 = km.conditional_density(digit_est, 0, pts)
for i in range(3):
    axes[i].contourf(g, g, dens0[:, i].reshape(g.size, g.size).T, levels=12)
    axes[i].plot(*digit_views[0][spectral_labels == i].T, "w.", ms=2, alpha=0.5)
    axes[i].set_title(f"rows 0-2, component {i} (weight {digit_est.params['weights'][i]:.2f})", fontsize=9)
fig.tight_layout()
fig.savefig("kernel_multiview_digits.png", dpi=90)
print("wrote kernel_multiview_digits.png")

# %%
# Images arriving in batches
# --------------------------
#
#
# The estimator reads the cross moments of the feature views, which are sums
# over observations: ``km.update`` merges a batch's feature sums with those the
# estimate keeps (``state["moments/..."]``, saved by ``save``) and re-estimates
# from everything seen, with the first batch's feature maps and a density
# support sampled uniformly from every image so far. After the last batch the
# weights and embeddings are those of one fit with the same maps.
# ``SpectralKernelMultiView.partial_fit`` does the same and waits for the first
# read of the model before it recovers.

# %%
streamed_est = None
for rows in np.array_split(rng.permutation(len(labels)), 5):
    streamed_est = km.update([x[rows] for x in digit_views], streamed_est, k=3, seed=0)
streamed_labels = km.predict(digit_views, streamed_est)[1]
print(f"{streamed_est.diagnostics['n_batches']} batches, {streamed_est.diagnostics['n_observations']} images: "
      f"ARI {adjusted_rand_score(labels, streamed_labels):.3f}",
      " weights:", np.round(np.sort(streamed_est.params["weights"])[::-1], 3))
