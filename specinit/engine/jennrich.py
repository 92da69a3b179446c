"""Non-symmetric simultaneous diagonalization of multi-view observable operators (Jennrich).

Used by :func:`specinit.engine.views.fit_multiview` with ``approach="jennrich"``
(or as the fallback of ``approach="auto"``): it needs no positive
semi-definite symmetrized moment, so it runs on real data where the
symmetric whitening is indefinite, at a cost in robustness.

References
----------
.. [1] Anandkumar, Hsu, Kakade, "A method of moments for mixture models and
   hidden Markov models", COLT 2012, Alg. B.
"""

from __future__ import annotations
from typing import Any, Mapping

import numpy as np

from specinit._validation import warn

__all__ = ["jennrich_projected_means"]

_JENNRICH_CANDIDATES = 8  # random directions tried for the eigenvector matrix R
_JENNRICH_WARN_IMAGINARY = 0.05
_JENNRICH_WARN_CONDITION = 1e3


def jennrich_projected_means(k: int, pairs: Mapping[str, np.ndarray], triples: np.ndarray,
                             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Simultaneous diagonalization of the observable operators ([1]_ Alg. B; (weights, rows ``U_t^T mu_{t,i}``)).

    ``B_j = (U_a^T Triples_{a,b,t}(U_t e_j) U_b) P_ab^{-1} = R diag(m_{.,j}) R^{-1}`` where the columns of ``R``
    are the projected view-``a`` means (up to scale) and ``m_i = U_t^T mu_{t,i}``. ``R`` is the eigenvector
    matrix of the best-separated (real parts) of a few random combinations ``sum_j eta_j B_j``; the diagonals of
    ``R^{-1} B_j R`` give the ``m_i`` coordinate by coordinate. The scale-free weights are the diagonal of
    ``M^{-1} (P_tb P_ab^{-1} P_at) M^{-T}`` (``M`` with columns ``m_i``), which equals ``diag(w)`` under the
    model whether or not the symmetrized moment is positive semi-definite.

    Parameters
    ----------
    k : int
        Number of classes.
    pairs : dict of str -> ndarray
        Projected pair moments ``"ab"``, ``"ta"``, ``"tb"`` (k x k each).
    triples : ndarray, shape (k, k, k)
        Projected triples ``U_a^T Triples_{a,b,t} (U_b, U_t)``.
    rng : numpy.random.Generator
        Randomness of the combination directions.

    Returns
    -------
    weights : ndarray, shape (k,)
    projected_means : ndarray, shape (k, k)
        Rows ``U_t^T mu_{t,i}``.
    diagnostics : dict
        Imaginary-part ratio, eigenvector condition number, eigenvalue
        separation, off-diagonal weight mass.

    Warns
    -----
    RuntimeWarning
        When the operators are far from simultaneously diagonalizable or a
        weight is not positive.
    """
    P_ab, P_ta, P_tb = pairs["ab"], pairs["ta"], pairs["tb"]
    operators = np.stack([np.linalg.solve(P_ab.T, triples[:, :, j].T).T for j in range(k)])  # (k, k, k)
    best = None
    for _ in range(_JENNRICH_CANDIDATES):
        eta = rng.standard_normal(k)
        eta /= np.linalg.norm(eta)
        values, R = np.linalg.eig(np.tensordot(eta, operators, axes=1))
        # Gaps between REAL parts: a complex-conjugate pair (possible off the model) scores zero.
        gaps = np.abs(values.real[:, None] - values.real[None, :]) + np.diag(np.full(k, np.inf))
        scale = max(np.abs(values).max(), np.finfo(float).tiny)
        separation = float(gaps.min() / scale) if k > 1 else 1.0
        if best is None or separation > best[0]:
            best = (separation, R)
    separation, R = best
    diagonal = np.stack([np.diag(np.linalg.solve(R, B @ R)) for B in operators], axis=1)  # (k states, k coords)
    reference = max(np.abs(diagonal.real).max(), np.finfo(float).tiny)
    imaginary = float(np.abs(diagonal.imag).max() / reference)
    condition = float(np.linalg.cond(R))
    projected_means = diagonal.real
    m2 = P_tb @ np.linalg.solve(P_ab, P_ta.T)  # = M diag(w) M^T under the model (not symmetrized)
    inv_means = np.linalg.pinv(projected_means.T)  # singular only off the model (warned below)
    weight_matrix = inv_means @ m2 @ inv_means.T
    weights = np.diag(weight_matrix).copy()
    off = weight_matrix - np.diag(weights)
    diagnostics = {
        "jennrich_imaginary_ratio": imaginary,
        "jennrich_condition_number": condition,
        "jennrich_eigen_separation": separation,
        "jennrich_weights_offdiagonal": float(np.abs(off).max() / max(np.abs(weights).max(), np.finfo(float).tiny)),
    }
    if imaginary > _JENNRICH_WARN_IMAGINARY or condition > _JENNRICH_WARN_CONDITION:
        warn(
            f"fit_multiview(approach='jennrich'): the observable operators are far from simultaneously "
            f"diagonalizable (largest imaginary part {imaginary:.3g} of the real parts, condition number of the "
            f"eigenvector matrix {condition:.3g}); the data may not follow a {k}-class multi-view model. Try a "
            f"smaller k, another target view, more data, or another seed.")
    if np.any(weights <= 0):
        warn(
            f"fit_multiview(approach='jennrich'): non-positive class weights {np.round(weights, 4).tolist()}; the "
            f"data may not follow a {k}-class multi-view model. Try a smaller k or another target view.")
    return weights, projected_means, diagnostics
