"""Independent factors: unmixing signals by the fourth cumulant, then NumPyro
==========================================================================

Observations ``x = loc + h @ loadings + noise`` with independent, non-Gaussian,
unit-variance factors ``h`` (independent component analysis with isotropic
Gaussian noise). The method of moments (Anandkumar et al., "A Spectral
Algorithm for Latent Dirichlet Allocation", Sec. 3.1, Lemma 2; "Two SVDs
Suffice", Alg. 2) whitens the noise-corrected covariance and decomposes the
whitened fourth cumulant, a k x k x k x k tensor built straight from the
whitened data, with the order-4 tensor power method.

1. A "cocktail party": four audio-like signals synthesised deterministically
   (sine, square wave, sawtooth and a seeded speech-like burst signal), mixed
   into five noisy "microphones"; we know the truth, so we measure the
   recovery (Amari index) against scikit-learn's FastICA, start FastICA from
   the spectral estimate, and warm-start NUTS on the NumPyro model.
2. Real data shipped with scikit-learn: the 8x8 digit images, whose
   independent components are shown as images.

The figures are written to ``independent_factors_signals.png`` and
``independent_factors_digits.png`` in the working directory.
Set ``SPECINIT_TUTORIAL_SMALL=1`` for a fast run (fewer samples and NUTS draws).
"""


# %%
import dataclasses
import os
import warnings

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from numpyro.infer import MCMC, NUTS  # noqa: E402
from scipy.optimize import linear_sum_assignment  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.decomposition import FastICA  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from specinit.models import factors  # noqa: E402

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"

# %%
# 1. Four signals, five microphones
# ---------------------------------
#
#
# Three periodic signals are sub-Gaussian (negative excess kurtosis: sine -1.5,
# square -2, sawtooth -1.2); the bursts (Laplace noise gated by a slow
# envelope) are super-Gaussian. The fourth cumulant separates both kinds.

# %%
n = 2_000 if SMALL else 20_000
t = np.linspace(0.0, 40.0, n)
rng = np.random.default_rng(0)
envelope = (np.sin(0.7 * t) > 0.3).astype(float) + 0.1
sources = np.stack([
    np.sin(2.0 * t),                                   # sine
    np.sign(np.sin(3.1 * t)),                          # square wave
    2.0 * ((0.9 * t) % 1.0) - 1.0,                     # sawtooth
    envelope * rng.laplace(size=n),                    # speech-like bursts
], axis=1)
sources = (sources - sources.mean(axis=0)) / sources.std(axis=0)  # unit variance: the model's scale convention
mixing = np.array([[1.0, 0.5, 1.5, 1.0, 0.3],
                   [1.0, 2.0, 1.0, 0.5, 1.0],
                   [1.0, 1.0, 2.0, 1.0, 0.2],
                   [0.5, 1.0, 1.0, 2.0, 1.5]])      # (k, d): rows are the columns of O
x = sources @ mixing + 0.2 * rng.normal(size=(n, 5)) + np.array([1.0, -2.0, 0.5, 0.0, 3.0])
print("data", x.shape)

# %%
# The spectral estimate. ``excess_kurtosis`` comes with each factor; the loadings
# are fixed up to sign by the documented rule (the entry of largest magnitude
# of each row is positive). The exponential-power family of the NumPyro model
# reaches down to excess kurtosis -1.2 (the uniform); lower values (square
# wave, sine) are clipped to its largest shape ``power = 100``.

# %%
estimate = factors.spectral(x, 4, "kurtosis", seed=0)
print("excess kurtosis  ", np.round(estimate.diagnostics["excess_kurtosis"], 2))
print("power (model)    ", np.round(estimate.params["power"], 2))
print("noise sd         ", round(float(estimate.params["noise"]), 3), "(truth 0.2)")
print("Amari index, spectral:", round(factors.amari_index(mixing, estimate.params["loadings"]), 4))

with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    ica = FastICA(4, whiten="unit-variance", random_state=0).fit(x)
print("Amari index, FastICA: ", round(factors.amari_index(mixing, ica.mixing_.T), 4), f"({ica.n_iter_} iterations)")

# %%
# FastICA started from the spectral estimate: ``w_init`` is the unmixing matrix
# in FastICA's whitened coordinates, ``inv(K @ loadings.T)`` with ``K`` FastICA's
# whitening (eigenvectors of the covariance scaled by ``1/sqrt(eigenvalue)``,
# signs as FastICA fixes them).

# %%
centred = x - x.mean(axis=0)
eigvals, eigvecs = np.linalg.eigh(centred.T @ centred / n)
eigvals, eigvecs = eigvals[::-1][:4], eigvecs[:, ::-1][:, :4]
K = (eigvecs * np.sign(eigvecs[0])).T / np.sqrt(eigvals)[:, None]
warm_ica = FastICA(4, whiten="unit-variance", random_state=0, w_init=np.linalg.inv(K @ estimate.params["loadings"].T)).fit(x)
print("Amari index, FastICA from spectral:", round(factors.amari_index(mixing, warm_ica.mixing_.T), 4),
      f"({warm_ica.n_iter_} iterations)")

# %%
# The recovered sources are the factor scores ``E[h | x]`` under the estimate
# (the site ``factors`` of the NumPyro model). Match them to the truth for the
# figure (order and sign are arbitrary in any ICA).

# %%
scores = estimate.params["factors"]
corr = np.corrcoef(sources.T, scores.T)[:4, 4:]
order = np.abs(corr).argmax(axis=1)
signs = np.sign(corr[np.arange(4), order])
print("|correlation| of each source with its recovered factor:", np.round(np.abs(corr[np.arange(4), order]), 3))

window = slice(0, min(n, 1_500))
names = ["sine", "square", "sawtooth", "bursts"]
fig, axes = plt.subplots(4, 3, figsize=(12, 7), sharex=True)
for i in range(4):
    axes[i, 0].plot(t[window], sources[window, i], lw=0.8)
    axes[i, 1].plot(t[window], x[window, i], lw=0.8, color="gray")
    axes[i, 2].plot(t[window], signs[i] * scores[window, order[i]], lw=0.8, color="C3")
    axes[i, 0].set_ylabel(names[i])
for ax, title in zip(axes[0], ["sources", "microphones (4 of 5)", "recovered (spectral, kurtosis)"]):
    ax.set_title(title)
fig.tight_layout()
fig.savefig("independent_factors_signals.png", dpi=90)
plt.close(fig)

# %%
# Warm-started NUTS on the NumPyro model
# --------------------------------------
#
#
# The model keeps the factors as latent sites (one per observation and factor)
# in the plate ``data``; the estimate covers every latent site (``scores=True``),
# so ``init_params`` starts each chain at the spectral point (the potential
# energy and its gradient are checked finite there). NUTS runs on a subsample;
# the moments are best estimated on all the data, so the global sites come
# from the full-data estimate and only the subsample's factor scores are
# recomputed (``factors.factor_scores``).

# %%
n_fit = 150 if SMALL else 1_000
sub = x[:: n // n_fit][:n_fit]
sub_estimate = dataclasses.replace(estimate, params={**estimate.params, "factors": factors.factor_scores(estimate, sub)})
kwargs = {"x": sub, "k": 4, "cumulant": "kurtosis", "prior_scale": 5.0}
init = sub_estimate.init_params(factors.model, 1, jax.random.PRNGKey(0), model_kwargs=kwargs)
n_warmup, n_samples = (5, 5) if SMALL else (300, 300)
mcmc = MCMC(NUTS(factors.model), num_warmup=n_warmup, num_samples=n_samples, progress_bar=False)
mcmc.run(jax.random.PRNGKey(1), init_params=init, **kwargs)
post_loadings = np.asarray(mcmc.get_samples()["loadings"]).mean(axis=0)
print("Amari index, posterior mean of the loadings:", round(factors.amari_index(mixing, post_loadings), 4),
      "| spectral start:", round(factors.amari_index(mixing, sub_estimate.params["loadings"]), 4))

# %%
# 2. Real images: independent components of the digits
# ----------------------------------------------------
#
#
# 1797 images of 8x8 pixels (bundled with scikit-learn). Three border pixels
# are always blank: constant columns carry no factor and would bias the
# isotropic noise estimate, so ``factors.spectral`` refuses them; we drop them.
# The images are not an exact independent-factor model (the pixel noise is
# not isotropic); the components are a description, compared with FastICA's.

# %%
digits = load_digits().data
keep = digits.std(axis=0) > 0
pixels = digits[:, keep]
try:
    factors.spectral(digits, 10, "kurtosis")
except ValueError as exc:
    print("refused:", str(exc)[:110], "...")
k_digits = 10
digit_estimate = factors.spectral(pixels, k_digits, "kurtosis", seed=0, scores=False,
                                  decompose_options={"n_iter": 2000})
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    digit_ica = FastICA(k_digits, whiten="unit-variance", random_state=0, max_iter=400).fit(pixels)
print("excess kurtosis of the digit factors:", np.round(digit_estimate.diagnostics["excess_kurtosis"], 2))
print("Amari index between the spectral and FastICA loadings:",
      round(factors.amari_index(digit_ica.mixing_.T, digit_estimate.params["loadings"]), 3))

# FastICA's components in the order (and sign) of the spectral ones that they match best
spectral_rows = digit_estimate.params["loadings"]
ica_rows = digit_ica.mixing_.T
cosine = (spectral_rows / np.linalg.norm(spectral_rows, axis=1, keepdims=True)) @ (
    ica_rows / np.linalg.norm(ica_rows, axis=1, keepdims=True)).T
_, match = linear_sum_assignment(-np.abs(cosine))
images = np.zeros((2, k_digits, 64))
images[0][:, keep] = spectral_rows
images[1][:, keep] = ica_rows[match] * np.sign(cosine[np.arange(k_digits), match])[:, None]
print("|cosine| of matched spectral and FastICA components:", np.round(np.abs(cosine[np.arange(k_digits), match]), 2))
fig, axes = plt.subplots(2, k_digits, figsize=(1.3 * k_digits, 3.2))
for row, label in enumerate(["spectral", "FastICA"]):
    for j in range(k_digits):
        limit = np.abs(images[row, j]).max()
        axes[row, j].imshow(images[row, j].reshape(8, 8), cmap="RdBu_r", vmin=-limit, vmax=limit)
        axes[row, j].set_xticks([])
        axes[row, j].set_yticks([])
        if row == 0:
            axes[row, j].set_title(f"{digit_estimate.diagnostics['excess_kurtosis'][j]:+.2f}", fontsize=8)
    axes[row, 0].set_ylabel(label)
fig.tight_layout()
fig.savefig("independent_factors_digits.png", dpi=90)
plt.close(fig)
print("figures: independent_factors_signals.png, independent_factors_digits.png")
