"""From moments to components: whitening, decomposition, unwhitening.

:func:`fit_exchangeable` is the engine shared by every model whose
(possibly symmetrized) moments have the form
``M2 = sum_i omega_i b_i b_i^T`` and ``M3 = sum_i kappa_i b_i^(x)3``.
After whitening (``W^T M2 W = I``) the tensor ``T = M3(W, W, W)`` equals
``sum_i lambda_i v_i^(x)3`` with orthonormal ``v_i = sqrt(omega_i) W^T b_i``
and ``lambda_i = kappa_i / omega_i^(3/2)``; hence

.. math::

    \\sqrt{\\omega_i}\\, b_i = (W^T)^+ v_i .

Each model turns ``(lambda_i, (W^T)^+ v_i)`` into its own parameters
(for example ``omega_i = 1 / lambda_i^2`` when ``kappa = omega``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from specinit._validation import as_generator, check_choice, check_int
from specinit.decompose import METHODS, Decomposition, decompose
from specinit.whitening import Whitening, whiten

__all__ = ["ExchangeableFit", "fit_exchangeable", "fix_signs_by_mass", "project_to_simplex", "positive_weights"]


@dataclass(frozen=True)
class ExchangeableFit:
    """Output of :func:`fit_exchangeable`.

    Attributes
    ----------
    components : ndarray, shape (k, d)
        ``(W^T)^+ v_i`` as rows, i.e. ``sqrt(omega_i) b_i``.
    eigenvalues : ndarray, shape (k,)
        Tensor eigenvalues ``lambda_i``.
    whitening : Whitening
    decomposition : Decomposition
    """

    components: np.ndarray
    eigenvalues: np.ndarray
    whitening: Whitening
    decomposition: Decomposition

    @property
    def diagnostics(self) -> dict:
        """Whitening and decomposition diagnostics in one flat dict."""
        w, d = self.whitening.diagnostics, self.decomposition.diagnostics
        return {
            "m2_eigenvalues": w["signed_eigenvalues"],
            "m2_condition_number": w["condition_number"],
            "m2_ritz_residual": w["ritz_residual"],
            "m2_spectral_gap": w["spectral_gap"],
            "tensor_eigenvalues": self.eigenvalues,
            **{f"decomposition_{key}": value for key, value in d.items()},
        }


def _slice_directions(unwhiten: np.ndarray, max_directions: int) -> np.ndarray:
    """Whitened images of the features with most weight in the subspace."""
    norms = np.linalg.norm(unwhiten, axis=1)
    top = np.argsort(-norms)[:max_directions]
    return unwhiten[top].T


def fit_exchangeable(
    moments,
    k: int,
    *,
    method: str = "tpm",
    seed=0,
    oversample: int = 10,
    n_power_iter: int = 2,
    max_slice_directions: int = 200,
    hint: str = "",
    **decompose_options,
) -> ExchangeableFit:
    """Whiten ``moments``, decompose the whitened third moment, unwhiten.

    Parameters
    ----------
    moments : object
        Has ``n_features``, ``m2_matmat(Q)`` and ``whitened_m3(W)``
        (:class:`specinit.moments.CountMoments`,
        :class:`specinit.population.FactoredMoments`, ...).
    k : int
        Number of components.
    method : {"tpm", "svtd", "eca", "als"}
        Decomposition (:mod:`specinit.decompose`).
    seed : int or numpy.random.Generator
        One generator drives whitening and decomposition.
    oversample, n_power_iter : int
        Randomized whitening settings (:func:`specinit.whitening.whiten`).
    max_slice_directions : int
        For ``method="svtd"``: number of original features whose whitened
        slices are candidates (those with the largest weight in the top-k
        subspace).
    hint : str
        Model-specific advice for the indefinite-M2 error.
    **decompose_options
        Passed to the decomposition (``n_restarts``, ``n_iter``, ``tol``...).
    """
    func = "fit_exchangeable"
    method = check_choice(method, "method", func, METHODS)
    k = check_int(k, "k", func, minimum=1, maximum=moments.n_features)
    max_slice_directions = check_int(max_slice_directions, "max_slice_directions", func, minimum=1)
    rng = as_generator(seed, func)
    wh = whiten(moments, k, oversample=oversample, n_iter=n_power_iter, seed=rng, hint=hint)
    T = moments.whitened_m3(wh.W)
    if method == "svtd":
        decompose_options.setdefault("directions", _slice_directions(wh.unwhiten, max_slice_directions))
    dec = decompose(T, k, method, seed=rng, **decompose_options)
    components = (wh.unwhiten @ dec.vectors).T
    return ExchangeableFit(components=components, eigenvalues=dec.weights, whitening=wh, decomposition=dec)


def fix_signs_by_mass(components: np.ndarray, eigenvalues: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Flip each ``(component, eigenvalue)`` pair whose component sums to < 0.

    For probability vectors the sign indeterminacy of an odd-order
    decomposition is resolved by positive total mass. Returns the flipped
    arrays and the number of flips (non-zero only with noisy moments).
    """
    flip = components.sum(axis=1) < 0
    sign = np.where(flip, -1.0, 1.0)
    return components * sign[:, None], eigenvalues * sign, int(flip.sum())


def project_to_simplex(rows: np.ndarray, floor: float = 1e-3) -> tuple[np.ndarray, dict]:
    """Project rows onto the interior of the probability simplex.

    Negative entries (noise) are clipped, every entry is floored at
    ``floor / d`` (never an exact zero, which would break Dirichlet and
    categorical densities downstream) and rows are renormalized.

    Returns
    -------
    rows : ndarray
        Strictly positive rows summing to one.
    report : dict
        ``negative_mass``: per row, the fraction of absolute mass that was
        negative before clipping (0 for exact moments).
    """
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    d = rows.shape[1]
    total = np.abs(rows).sum(axis=1)
    negative = np.where(rows < 0, -rows, 0.0).sum(axis=1) / np.where(total > 0, total, 1.0)
    clipped = np.clip(rows, 0.0, None)
    sums = clipped.sum(axis=1, keepdims=True)
    clipped = np.where(sums > 0, clipped / np.where(sums > 0, sums, 1.0), 1.0 / d)
    out = np.maximum(clipped, floor / d)
    return out / out.sum(axis=1, keepdims=True), {"negative_mass": negative}


def positive_weights(weights: np.ndarray, floor: float = 1e-6, name: str = "weights") -> np.ndarray:
    """Floor mixing weights at ``floor`` and renormalize, warning if any was not finite."""
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)):
        warnings.warn(f"{name}: non-finite estimates replaced by the floor {floor}; the decomposition is unreliable "
                      "(check diagnostics, try more data or a smaller k).", RuntimeWarning, stacklevel=2)
        weights = np.where(np.isfinite(weights), weights, floor)
    weights = np.maximum(weights, floor)
    return weights / weights.sum()
