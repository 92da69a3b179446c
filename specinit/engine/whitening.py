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

from dataclasses import dataclass

import numpy as np

from specinit._validation import as_generator, check_int, warn

__all__ = ["Whitening", "IndefiniteMomentError", "whiten"]


class IndefiniteMomentError(ValueError):
    """The second moment has a non-positive eigenvalue among its top k."""

    def advise(self, func: str, advice: str) -> "IndefiniteMomentError":
        """The same error with the public entry ``func`` and a model's ``advice`` added.

        Parameters
        ----------
        func : str
            The public function the user called (e.g. ``"lda.spectral"``).
        advice : str
            What to try for this model (e.g. another ``alpha0``).

        Returns
        -------
        IndefiniteMomentError
            To be raised ``from None`` at the model boundary.
        """
        return IndefiniteMomentError(f"{func}: {self} {advice}".rstrip())


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
        ``power_iterations`` (passes after the first), ``spectral_gap``
        (``s_k / |s_(k+1)|``, inf when not computed).
    """

    W: np.ndarray
    U: np.ndarray
    eigenvalues: np.ndarray
    diagnostics: dict

    @property
    def unwhiten(self) -> np.ndarray:
        """``(W^T)^+ = U diag(s)^(1/2)``, shape (d, k): maps whitened vectors back."""
        return self.U * np.sqrt(self.eigenvalues)


def _rayleigh_ritz(Q: np.ndarray, Y: np.ndarray, k: int):
    """Ritz pairs of ``M2`` on span(Q) given ``Y = M2 Q``, by decreasing magnitude."""
    B = Q.T @ Y
    ritz, vecs = np.linalg.eigh(0.5 * (B + B.T))
    order = np.argsort(-np.abs(ritz))
    ritz, vecs = ritz[order], vecs[:, order]
    s = ritz[:k]
    residual = np.linalg.norm(Y @ vecs[:, :k] - (Q @ vecs[:, :k]) * s, axis=0) / np.maximum(np.abs(s), np.finfo(float).tiny)
    return ritz, vecs, float(residual.max())


def whiten(
    moments, k: int, *, oversample: int = 10, n_iter: int = 2, max_iter: int = 12, tol: float = 1e-2, seed=0
) -> Whitening:
    """Whiten the second moment ``M2`` of ``moments`` to rank ``k``.

    Parameters
    ----------
    moments : object
        Anything with ``n_features`` and ``m2_matmat(Q)`` (``M2 @ Q``).
    k : int
        Number of components, ``1 <= k <= n_features``.
    oversample : int
        Extra columns of the random test matrix (``p`` in Halko et al.).
    n_iter : int
        Power iterations always done; each is one more pass over the data.
    max_iter : int
        Further power iterations are done, one pass each, until the
        relative Ritz residual ``max_i ||M2 u_i - s_i u_i|| / s_i`` of the
        top-k pairs is below ``tol`` or ``max_iter`` is reached.
    tol : float
        Convergence tolerance on the relative Ritz residual.
    seed : int or numpy.random.Generator
        Randomness of the test matrix.

    Returns
    -------
    Whitening

    Raises
    ------
    IndefiniteMomentError
        If any of the top-k eigenvalues is <= 0 (or numerically zero).

    Warns
    -----
    RuntimeWarning
        If the residual is still above ``tol`` after ``max_iter`` iterations
        (the top-k eigenvalues are nearly tied with the rest of the
        spectrum: k may be too large for the data).
    """
    func = "whiten"
    d = moments.n_features
    k = check_int(k, "k", func, minimum=1, maximum=d)
    oversample = check_int(oversample, "oversample", func, minimum=0)
    n_iter = check_int(n_iter, "n_iter", func, minimum=0)
    max_iter = check_int(max_iter, "max_iter", func, minimum=n_iter)
    rng = as_generator(seed, func)
    r = min(d, k + oversample)
    Q = np.linalg.qr(rng.standard_normal((d, r)))[0]
    Y = moments.m2_matmat(Q)
    for iteration in range(max_iter + 1):
        ritz, vecs, residual = _rayleigh_ritz(Q, Y, k)
        if iteration >= max_iter or (iteration >= n_iter and residual < tol):
            break
        Q = np.linalg.qr(Y)[0]
        Y = moments.m2_matmat(Q)
    s = ritz[:k]
    scale = np.max(np.abs(ritz))
    if np.any(s <= scale * 1e-12):
        bad = int(np.count_nonzero(s <= scale * 1e-12))
        raise IndefiniteMomentError(
            f"The second moment is not positive definite on its top {k} eigenvectors: {bad} of the "
            f"top-{k} eigenvalues (by magnitude) are <= 0 or numerically zero (signed top eigenvalues: "
            f"{np.array2string(ritz[: k + 1], precision=3)}). Likely causes: k too large for the data "
            f"(try a smaller k), too little data, or a misspecified model."
        )
    U = Q @ vecs[:, :k]
    gap = float(s[-1] / abs(ritz[k])) if ritz.size > k and ritz[k] != 0 else np.inf
    diagnostics = {
        "signed_eigenvalues": ritz,
        "condition_number": float(s[0] / s[-1]),
        "ritz_residual": residual,
        "power_iterations": iteration,
        "spectral_gap": gap,
    }
    if residual >= tol:
        warn(
            f"whitening: the randomized eigensolver did not converge in max_iter={max_iter} power iterations "
            f"(relative Ritz residual {residual:.2g}, spectral gap s_k/|s_k+1| = {gap:.3g}); the top-{k} "
            "eigenvalues are barely separated from the rest: try a smaller k, or larger max_iter/oversample.")
    return Whitening(W=U / np.sqrt(s), U=U, eigenvalues=s, diagnostics=diagnostics)
