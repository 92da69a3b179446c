"""Whitened third and fourth cumulants of continuous data, never forming d^3 or d^4 arrays.

For centred data ``x`` (N, d) and a whitening matrix ``W`` (d, k) the
whitened data are ``y = W^T x`` (N, k). The cumulant tensors of ``x``
evaluated at ``W`` are the cumulant tensors of ``y``:

.. math::

    \\kappa_3(W, W, W) = E[y^{\\otimes 3}], \\qquad
    \\kappa_4(W, W, W, W)_{abcd} = E[y_a y_b y_c y_d]
        - S_{ab} S_{cd} - S_{ac} S_{bd} - S_{ad} S_{bc},

with ``S = E[y y^T]`` ([1]_ Sec. 3.1; [2]_ Alg. 2, where the fourth cumulant
is the fourth moment minus the three pair products of the covariance). Both
are computed from ``y`` in bounded row blocks: O(N k^3) and O(N k^4) flops,
O(k^4) memory. Gaussian noise adds nothing to either tensor.

References
----------
.. [1] Anandkumar, Foster, Hsu, Kakade, Liu, "A Spectral Algorithm for Latent
   Dirichlet Allocation", Sec. 3.1, Lemmas 1 and 2.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu, "Two SVDs Suffice: Spectral
   decompositions for probabilistic topic modeling and latent Dirichlet
   allocation" (Excess Correlation Analysis), Algs. 1 and 2.
"""

from __future__ import annotations
from typing import Callable, Literal

import numpy as np

from specinit._validation import bad_argument

__all__ = ["CorrectedCovariance", "fourth_power_sum", "pair_product_tensor", "whitened_third_cumulant",
           "whitened_fourth_cumulant"]

_CHUNK_BYTES = 64 * 2**20


def _check_whitened(y, func) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] < 1 or y.shape[1] < 1:
        raise bad_argument("y", func, "a non-empty two-dimensional (N, k) array", y)
    if not np.all(np.isfinite(y)):
        raise bad_argument("y", func, "finite", "an array with NaN or infinite entries", describe=False)
    return y


def whitened_third_cumulant(y: np.ndarray) -> np.ndarray:
    """``E[y^(x)3]`` of centred whitened data, a (k, k, k) array.

    Parameters
    ----------
    y : array, shape (N, k)
        Whitened data, centred (column means zero).

    Returns
    -------
    ndarray, shape (k, k, k)
        The symmetric third cumulant of ``y``.

    Raises
    ------
    ValueError
        If ``y`` is not a finite non-empty (N, k) array.

    References
    ----------
    .. [1] Anandkumar et al., "A Spectral Algorithm for LDA", Lemma 1 (Triples).
    """
    y = _check_whitened(y, "whitened_third_cumulant")
    n, k = y.shape
    out = np.zeros((k, k * k))
    step = max(1, _CHUNK_BYTES // (8 * k * k))
    for start in range(0, n, step):
        block = y[start:start + step]
        out += block.T @ (block[:, :, None] * block[:, None, :]).reshape(len(block), k * k)
    return out.reshape(k, k, k) / n


def pair_product_tensor(S: np.ndarray) -> np.ndarray:
    """``S_ab S_cd + S_ac S_bd + S_ad S_bc``: the fourth moment of a Gaussian with covariance ``S``.

    Parameters
    ----------
    S : array, shape (k, k)
        Symmetric covariance.

    Returns
    -------
    ndarray, shape (k, k, k, k)
    """
    S = np.asarray(S, dtype=np.float64)
    return np.einsum("ab,cd->abcd", S, S) + np.einsum("ac,bd->abcd", S, S) + np.einsum("ad,bc->abcd", S, S)


def whitened_fourth_cumulant(y: np.ndarray) -> np.ndarray:
    """Fourth cumulant of centred whitened data, a (k, k, k, k) array.

    ``E[y^(x)4]`` is accumulated as ``(y (x) y)^T (y (x) y)`` over row blocks
    (intermediates bounded to about 64 MB), then the three pair products of
    the sample covariance ``S = E[y y^T]`` are subtracted.

    Parameters
    ----------
    y : array, shape (N, k)
        Whitened data, centred (column means zero).

    Returns
    -------
    ndarray, shape (k, k, k, k)
        The symmetric fourth cumulant of ``y``.

    Raises
    ------
    ValueError
        If ``y`` is not a finite non-empty (N, k) array.

    References
    ----------
    .. [1] Anandkumar et al., "A Spectral Algorithm for LDA", Lemma 2
       (Quadruples minus the three Pairs products).
    .. [2] Anandkumar et al., "Two SVDs Suffice", Alg. 2.
    """
    y = _check_whitened(y, "whitened_fourth_cumulant")
    n = y.shape[0]
    return fourth_power_sum(y) / n - pair_product_tensor(y.T @ y / n)


def fourth_power_sum(y: np.ndarray) -> np.ndarray:
    """``sum_n y_n^(x)4``, a (k, k, k, k) array: ``P^T P`` for the products ``P = y_i y_j`` of the k(k+1)/2 pairs
    ``i <= j`` (a quarter of the flops of the full ``(y (x) y)^T (y (x) y)``), over row blocks (temporaries
    ~64 MB), then spread to every index order.

    Parameters
    ----------
    y : ndarray, shape (N, k)

    Returns
    -------
    ndarray, shape (k, k, k, k)
    """
    n, k = y.shape
    first, second = np.triu_indices(k)
    pair = np.empty((k, k), dtype=np.intp)
    pair[first, second] = pair[second, first] = np.arange(first.size)
    m4 = np.zeros((first.size, first.size))
    step = max(1, _CHUNK_BYTES // (8 * first.size))
    for start in range(0, n, step):
        block = y[start:start + step]
        products = np.empty((len(block), first.size))
        for i in range(k):  # the columns of the pairs (i, i..k-1), in triu order
            np.multiply(block[:, i:], block[:, i:i + 1], out=products[:, pair[i, i]:pair[i, i] + k - i])
        m4 += products.T @ products
    return m4[pair[:, :, None, None], pair[None, None, :, :]]


class CorrectedCovariance:
    """A factor model's covariance with the isotropic noise removed, and its whitened cumulant tensor.

    ``M2 = Cov(x) - noise^2 I = O O^T`` (the moments object that
    :func:`specinit.engine.exchangeable.fit_exchangeable` whitens) with the
    noise variance the mean of the ``d - k`` smallest covariance eigenvalues
    (``noise="isotropic"`` and ``d > k``; 0 otherwise), and the whitened
    third or fourth cumulant as its ``whitened_m3`` / ``whitened_m4``.

    Parameters
    ----------
    covariance : ndarray, shape (d, d)
    whitened_cumulant : callable
        ``W (d, k) -> (k,)*order`` whitened cumulant tensor.
    k : int
        Number of factors.
    noise : {"isotropic", "none"}

    Attributes
    ----------
    eigenvalues : ndarray, shape (d,)
        Covariance eigenvalues, descending.
    noise_variance : float
    n_features : int
    """

    def __init__(self, covariance: np.ndarray, whitened_cumulant: Callable[[np.ndarray], np.ndarray], k: int,
                 noise: Literal["isotropic", "none"]) -> None:
        covariance = 0.5 * (covariance + covariance.T)
        self.eigenvalues = np.linalg.eigvalsh(covariance)[::-1]
        d = covariance.shape[0]
        self.noise_variance = float(max(self.eigenvalues[k:].mean(), 0.0)) if (noise == "isotropic" and d > k) else 0.0
        self.n_features = d
        self._covariance = covariance
        self._cumulant = whitened_cumulant

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``(Cov(x) - noise^2 I) Q``."""
        return self._covariance @ Q - self.noise_variance * Q

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """The whitened cumulant at ``W`` (order 3: skewed factors)."""
        return self._cumulant(W)

    def whitened_m4(self, W: np.ndarray) -> np.ndarray:
        """The whitened cumulant at ``W`` (order 4: kurtotic factors)."""
        return self._cumulant(W)
