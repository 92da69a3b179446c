"""Population moments in factored form, built from model parameters.

For every model specinit handles, the moments the decomposition sees have
the form

.. math::

    M_2 = \\sum_i \\omega_i\\, b_i \\otimes b_i, \\qquad
    M_3 = \\sum_i \\kappa_i\\, b_i \\otimes b_i \\otimes b_i,

with component vectors :math:`b_i` (rows of ``components``) and positive
coefficients :math:`\\omega_i, \\kappa_i`. :class:`FactoredMoments` stores
exactly that and answers the same two questions as the empirical moment
objects (``m2_matmat``, ``whitened_m3``) without forming V x V arrays, so
exact recovery can be checked through the same pipeline that fits data, and
users can check whether a model is identifiable and well conditioned before
fitting (:meth:`FactoredMoments.conditioning`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specinit._validation import bad_argument

__all__ = ["FactoredMoments"]


@dataclass(frozen=True)
class FactoredMoments:
    """Exact moments ``M2 = sum_i omega_i b_i b_i^T``, ``M3 = sum_i kappa_i b_i^(x)3``.

    Parameters
    ----------
    components : ndarray, shape (k, d)
        The vectors :math:`b_i` as rows.
    omega : ndarray, shape (k,)
        Second-order coefficients (positive).
    kappa : ndarray, shape (k,)
        Third-order coefficients (positive).
    """

    components: np.ndarray
    omega: np.ndarray
    kappa: np.ndarray

    def __post_init__(self):
        func = "FactoredMoments"
        b = np.asarray(self.components, dtype=np.float64)
        if b.ndim != 2:
            raise bad_argument("components", func, "a (k, d) array", b)
        for name in ("omega", "kappa"):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (b.shape[0],):
                raise bad_argument(name, func, f"a ({b.shape[0]},) array (one per component)", value)
            if not np.all(np.isfinite(value)) or np.any(value <= 0):
                raise bad_argument(name, func, "finite and > 0", value)
            object.__setattr__(self, name, value)
        if not np.all(np.isfinite(b)):
            raise bad_argument("components", func, "finite", b)
        object.__setattr__(self, "components", b)

    @property
    def n_features(self) -> int:
        return self.components.shape[1]

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q`` for a (d, r) matrix."""
        return self.components.T @ (self.omega[:, None] * (self.components @ Q))

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """``M3(W, W, W)`` for a (d, k) matrix."""
        proj = self.components @ W  # (k_model, k)
        return np.einsum("i,ia,ib,ic->abc", self.kappa, proj, proj, proj)

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """The explicit (d, d) and (d, d, d) arrays; for small d only."""
        b = self.components
        m2 = b.T @ (self.omega[:, None] * b)
        m3 = np.einsum("i,ia,ib,ic->abc", self.kappa, b, b, b)
        return m2, m3

    def conditioning(self) -> dict[str, Any]:
        """Identifiability and conditioning of the moment problem.

        Returns
        -------
        dict
            ``eigenvalues``: the k non-zero eigenvalues of ``M2`` (descending);
            ``condition_number``: their ratio max/min (the whitening
            amplifies noise by about its square root); ``smallest_singular_value``
            of the component matrix (0 means the components are linearly
            dependent and the model is not identifiable from these moments);
            ``tensor_eigenvalues``: the eigenvalues ``kappa / omega**1.5`` of the
            whitened third moment.
        """
        b = self.components
        scaled = np.sqrt(self.omega)[:, None] * b
        eig = np.sort(np.linalg.eigvalsh(scaled @ scaled.T))[::-1]
        sv = np.linalg.svd(b, compute_uv=False)
        with np.errstate(divide="ignore"):
            cond = float(eig[0] / eig[-1]) if eig[-1] > 0 else np.inf
        return {
            "eigenvalues": eig,
            "condition_number": cond,
            "smallest_singular_value": float(sv[-1]),
            "tensor_eigenvalues": self.kappa / self.omega**1.5,
        }
