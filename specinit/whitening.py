"""Matrix-free whitening of a second-moment operator.

The top-k eigenpairs of ``M2`` are found by a randomized range finder with
power iterations and a Rayleigh-Ritz step on the last orthonormal block
(Halko, Martinsson, Tropp 2011, Alg. 4.4 / 5.3), touching ``M2`` only through
products ``M2 @ Q``. The k eigenvalues of largest magnitude are kept WITH
their signs: a moment matrix that should be positive semi-definite but has a
negative or zero eigenvalue among the top k is a symptom (alpha0
misspecified, k too large, too little data) and raises an error instead of
being silently absorbed by an absolute value.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from specinit._validation import as_generator, check_int

__all__ = ["Whitening", "IndefiniteMomentError", "whiten"]


class IndefiniteMomentError(ValueError):
    """The second moment has a non-positive eigenvalue among its top k."""


@dataclass(frozen=True)
class Whitening:
    """Result of :func:`whiten`.

    Attributes
    ----------
    W : ndarray, shape (d, k)
        ``U diag(s)^(-1/2)``, so that ``W.T @ M2 @ W = I_k``.
    U : ndarray, shape (d, k)
        Orthonormal top-k eigenvectors of ``M2``.
    eigenvalues : ndarray, shape (k,)
        The top-k eigenvalues, positive, descending.
    diagnostics : dict
        ``signed_eigenvalues`` (all Ritz values computed, by decreasing
        magnitude, with signs), ``condition_number``, ``ritz_residual``
        (max relative residual ``||M2 u - s u|| / s`` of the kept pairs),
        ``spectral_gap`` (``s_k / |s_(k+1)|``, inf when not computed).
    """

    W: np.ndarray
    U: np.ndarray
    eigenvalues: np.ndarray
    diagnostics: dict

    @property
    def unwhiten(self) -> np.ndarray:
        """``(W^T)^+ = U diag(s)^(1/2)``, shape (d, k): maps whitened vectors back."""
        return self.U * np.sqrt(self.eigenvalues)


def whiten(moments, k: int, *, oversample: int = 10, n_iter: int = 2, seed=0, hint: str = "") -> Whitening:
    """Whiten the second moment ``M2`` of ``moments`` to rank ``k``.

    Parameters
    ----------
    moments : object
        Anything with ``n_features`` and ``m2_matmat(Q)`` (``M2 @ Q``).
    k : int
        Number of components, ``1 <= k < n_features`` (``k == n_features``
        is allowed for already projected moments).
    oversample : int
        Extra columns of the random test matrix (``p`` in Halko et al.).
    n_iter : int
        Power iterations; each is one more pass over the data.
    seed : int or numpy.random.Generator
        Randomness of the test matrix.
    hint : str
        Model-specific advice appended to the error for an indefinite ``M2``.

    Returns
    -------
    Whitening

    Raises
    ------
    IndefiniteMomentError
        If any of the top-k eigenvalues is <= 0 (or too small to invert).

    Warns
    -----
    RuntimeWarning
        If the Ritz residual shows the range finder has not converged.
    """
    func = "whiten"
    d = moments.n_features
    k = check_int(k, "k", func, minimum=1, maximum=d)
    oversample = check_int(oversample, "oversample", func, minimum=0)
    n_iter = check_int(n_iter, "n_iter", func, minimum=0)
    rng = as_generator(seed, func)
    r = min(d, k + oversample)
    Q = np.linalg.qr(rng.standard_normal((d, r)))[0]
    Y = moments.m2_matmat(Q)
    for _ in range(n_iter):
        Q = np.linalg.qr(Y)[0]
        Y = moments.m2_matmat(Q)
    B = Q.T @ Y
    ritz, vecs = np.linalg.eigh(0.5 * (B + B.T))
    order = np.argsort(-np.abs(ritz))
    ritz, vecs = ritz[order], vecs[:, order]
    signed = ritz.copy()
    s = ritz[:k]
    scale = np.max(np.abs(ritz)) if ritz.size else 0.0
    tiny = scale * 1e-12 if scale > 0 else np.inf
    if np.any(s <= tiny):
        bad = int(np.count_nonzero(s <= tiny))
        raise IndefiniteMomentError(
            f"The second moment is not positive definite on its top {k} eigenvectors: {bad} of the "
            f"top-{k} eigenvalues (by magnitude) are <= 0 or numerically zero (signed top eigenvalues: "
            f"{np.array2string(signed[: k + 1], precision=3)}). Likely causes: k too large for the data "
            f"(try a smaller k), too little data, or a misspecified model{hint}."
        )
    U = Q @ vecs[:, :k]
    residual = np.linalg.norm(Y @ vecs[:, :k] - U * s, axis=0) / s
    gap = float(s[-1] / abs(ritz[k])) if ritz.size > k and ritz[k] != 0 else np.inf
    diagnostics = {
        "signed_eigenvalues": signed,
        "condition_number": float(s[0] / s[-1]),
        "ritz_residual": float(residual.max()),
        "spectral_gap": gap,
    }
    if residual.max() > 1e-2:
        warnings.warn(
            f"whitening: the randomized eigensolver has not converged (relative residual "
            f"{residual.max():.2g}); increase n_iter or oversample.",
            RuntimeWarning,
            stacklevel=2,
        )
    return Whitening(W=U / np.sqrt(s), U=U, eigenvalues=s, diagnostics=diagnostics)
