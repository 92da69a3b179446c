"""Kernel embeddings of multi-view mixtures with low-rank features (nonparametric multi-view models).

A hidden class ``h`` with ``Pr[h = i] = w_i`` and ``l >= 3`` views that are
conditionally independent given ``h``, each with an ARBITRARY conditional
density ``p_{v,i}``. Under a Gaussian RBF kernel with feature map ``phi`` the
kernel embeddings of the cross moments are ([1]_ eqs. 34-35)

.. math::

    C_{ab} = E[\\phi(x_a) \\otimes \\phi(x_b)] = \\sum_i w_i \\mu_{a,i} \\otimes \\mu_{b,i},
    \\qquad
    C_{abc} = \\sum_i w_i \\mu_{a,i} \\otimes \\mu_{b,i} \\otimes \\mu_{c,i},

with the conditional mean embeddings ``mu_{v,i} = E[phi(x_v) | h = i]``: the
multi-view moment structure, in feature space.

Scale. The exact algorithm of [1]_ works with N x N kernel matrices (Alg. 1
``KernelSVD`` through a Cholesky factor ``K = R^T R``). Here the kernel is
replaced by an explicit low-rank factor ``K ~= Z Z^T`` with ``Z`` of shape
``(N, r)``: memory ``O(N r)``, never ``N x N``. ``Z`` plays the role of
``R^T`` in Alg. 1, so KernelSVD becomes the eigendecomposition of the
``r x r`` matrix ``C_{ab}``. Two factors are offered:

* :class:`RandomFourierFeatures` (the default, rank ``r = 128``):
  ``phi(x) = r^(-1/2) [cos(Omega^T x), sin(Omega^T x)]`` with
  ``Omega ~ N(0, diag(sigma)^(-2))`` (Rahimi and Recht 2007), so that
  ``phi(x)^T phi(y) ~= exp(-sum_j (x_j - y_j)^2 / (2 sigma_j^2))`` with
  error ``O(r^(-1/2))``. It is data-independent, and the mean embedding of a
  Gaussian ``N(m, diag(s^2))`` is closed form
  (``E[cos(omega^T x)] = exp(-omega^T diag(s^2) omega / 2) cos(omega^T m)``),
  which gives exact population moments for mixtures of Gaussians.
* :class:`NystromFeatures`: ``phi(x) = K_mm^(-1/2) k(z, x)`` on ``r``
  landmarks ``z`` chosen by pivoted (incomplete) Cholesky on a random
  subsample of the data (Fine and Scheinberg 2001, cited by [1]_ Sec. 3):
  more accurate per unit of rank on low-dimensional views, data-dependent.
  Gaussian mean embeddings are closed form too.

Whatever the factor, the estimator works on ``E[phi(x_a) phi(x_b)^T]``, so
the approximation only changes the kernel (the class of functions the
moments see); identifiability needs the ``k`` embedded component densities
to be linearly independent in the ``r``-dimensional feature space, hence
``k <= r``.

Bandwidth. :func:`median_bandwidth` is the median heuristic on
standardized columns, halved: ``sigma_j = 0.5 std_j median_{n != n'}
||(x_n - x_n')/std||`` over a random subsample of at most 1000 rows; it
needs no tuning and adapts to every view's scale and dimension (the full
median distance failed to separate k = 5 components of 1-D views).

Recovery ([1]_ Sec. 6, exchangeable views, :func:`fit_exchangeable_views`):

1. KernelSVD (Alg. 1): the top-k eigenpairs ``(U_k, S_k)`` of the
   symmetrized second-order embedding ``C2 = mean_{a<b} sym(C_{ab})``;
   ``W = U_k S_k^(-1/2)``;
2. the whitened third-order embedding (eq. 39) ``T = mean_{a<b<c} sym
   E[xi_a (x) xi_b (x) xi_c]`` with ``xi_v = W^T phi(x_v)``, a ``k x k x k``
   tensor built from the features in bounded chunks;
3. the robust tensor power method (Alg. 2;
   :func:`specinit.engine.decompose.tensor_power_method`):
   ``T = sum_i lambda_i v_i^(x)3``;
4. weights ``w_i = lambda_i^(-2)`` and conditional embeddings (eq. 40)
   ``mu_i = lambda_i U_k S_k^(1/2) v_i`` (eq. 40 omits the factor
   ``lambda_i = w_i^(-1/2)``, which restores the scale of the embedding).

Views of different kinds or dimensions (each with its own feature map) are
symmetrized onto a target view in projected coordinates, as the parametric
multi-view engine does (:func:`specinit.engine.views.fit_multiview`).

Densities. ``E[g(x_v) | h]`` for ANY function ``g`` follows from the cross
moment with another view ``t`` ([1]_ Sec. 3.3 of the JMLR tensor paper, as
in :func:`specinit.engine.views.conditional_means`):
``E[g(x_v) phi(x_t)^T] Q = E[g(x_v) | h]^T diag(w) (mu_t Q)``. With the
empirical cross moment this is ``sum_n c_{i,n} g(x_{v,n})`` with per-point
coefficients ``c_{:,n} = diag(w)^(-1) (mu_t Q)^(-T) Q^T phi(x_{t,n}) / N``
(:func:`density_coefficients`, averaged over the anchors ``t != v``). Taking
``g`` the normalized Gaussian kernel gives a (signed) kernel density
estimate of ``p_{v,i}``, consistent but negative in places: about a fifth
to a third of the coefficient mass is negative on our planted mixtures.
The signed density is clipped at 0 POINTWISE and divided by the integral of
its positive part (:func:`positive_part_mass`), so it is non-negative and
integrates to one (:func:`weighted_kde`); clipping the coefficients instead
(the first thing one tries) biases it heavily (mean L1 error 0.37 instead of
0.13 at N = 10^5 on the planted 1-D mixtures of the tests). The kernel
bandwidth of each component is chosen by weighted likelihood
cross-validation among fractions of Silverman's rule on the effective sample
size (:func:`cv_bandwidth`, :func:`silverman_bandwidth`). :func:`fit_weighted_gmm` projects it onto a
small Gaussian mixture ([1]_ Sec. 7, projection to a parametric family).

References
----------
.. [1] Song, Anandkumar, Dai, Xie, "Nonparametric Estimation of Multi-View
   Latent Variable Models", ICML 2014: Alg. 1 (KernelSVD), eq. 39 (whitened
   third-order embedding), Alg. 2 (tensor power method), eq. 40 (conditional
   embeddings), Sec. 7 (projection to a parametric family).
.. [2] Rahimi, Recht, "Random features for large-scale kernel machines", NIPS 2007.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from specinit._validation import as_generator, bad_argument, check_int, warn
from specinit.engine.decompose import check_options, decompose
from specinit.engine.whitening import IndefiniteMomentError

__all__ = [
    "KernelMultiviewFit",
    "fit_exchangeable_views",
    "kernel_svd",
    "whitened_third_embedding",
]


def kernel_svd(moments, k: int, views=None, func: str = "kernel_svd"):
    """KernelSVD ([1]_ Alg. 1) of the symmetrized second-order embedding in feature coordinates.

    ``C2 = mean_{a < b} (C_ab + C_ab^T) / 2`` over pairs of ``views`` (the
    ``r x r`` matrix is formed: ``r`` is the feature rank); its top-k
    eigenpairs give ``W = U_k S_k^(-1/2)``. The features are the Cholesky
    factor of Alg. 1 (``K ~= Z Z^T``), so the eigenproblem ``R L R^T`` of the
    paper becomes this ``r x r`` one.

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
        Moments of the feature views (``pairs_matmat``).
    k : int
        Number of components.
    views : sequence of int, optional
        The exchangeable views (default: all).
    func : str
        Function named in error messages.

    Returns
    -------
    U : ndarray, shape (r, k)
    s : ndarray, shape (k,)
        Eigenvalues, descending, positive.
    diagnostics : dict
        ``m2_eigenvalues`` (top k + 1, signed), ``m2_condition_number``, ``m2_spectral_gap``.

    Raises
    ------
    IndefiniteMomentError
        If one of the top-k eigenvalues is not positive (the data are not a
        k-class multi-view mixture in this kernel, or k exceeds the number of
        distinguishable components).

    References
    ----------
    .. [1] Song, Anandkumar, Dai, Xie, ICML 2014, Alg. 1 (KernelSVD) and eq. 38.
    """
    views = list(range(moments.n_views)) if views is None else list(views)
    r = moments.dims[views[0]]
    eye = np.eye(r)
    C2 = np.zeros((r, r))
    pairs = list(combinations(views, 2))
    for a, b in pairs:
        C2 += moments.pairs_matmat(a, b, eye)
    C2 = (C2 + C2.T) / (2 * len(pairs))
    values, vectors = np.linalg.eigh(C2)
    order = np.argsort(-np.abs(values))
    values, vectors = values[order], vectors[:, order]
    top = values[:k]
    scale = max(abs(values[0]), np.finfo(float).tiny)
    if np.any(top <= 1e-12 * scale):
        raise IndefiniteMomentError(
            f"{func}: the second-order kernel embedding has non-positive eigenvalues among its top k={k} "
            f"(signed top eigenvalues {np.array2string(values[:k + 1], precision=3)}).")
    diagnostics = {
        "m2_eigenvalues": values[:k + 1].copy(),
        "m2_condition_number": float(top[0] / top[-1]),
        "m2_spectral_gap": float(top[-1] / abs(values[k])) if values.size > k and values[k] != 0 else np.inf,
    }
    return vectors[:, :k], top, diagnostics


def whitened_third_embedding(moments, W, views=None) -> np.ndarray:
    """The whitened third-order embedding ([1]_ eq. 39) as a symmetric k x k x k tensor.

    ``T = mean_{a < b < c} sym E[xi_a (x) xi_b (x) xi_c]``, ``xi_v = W^T phi(x_v)``;
    eq. 39 averages the three cyclic orders of one triple of views; with
    exchangeable views every order has the same expectation, so the full
    symmetrization is used (exactly symmetric, same expectation).

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
        Moments of the feature views (``projected_triples``, computed in bounded chunks).
    W : array, shape (r, k)
        Whitening matrix from :func:`kernel_svd`.
    views : sequence of int, optional
        The exchangeable views (default: all).

    Returns
    -------
    ndarray, shape (k, k, k)

    Raises
    ------
    ValueError
        ``W`` whose rows do not match the feature dimension (shape mismatch).

    References
    ----------
    .. [1] Song, Anandkumar, Dai, Xie, ICML 2014, eq. 39.
    """
    views = list(range(moments.n_views)) if views is None else list(views)
    triples = list(combinations(views, 3))
    T = sum(moments.projected_triples(a, b, c, W, W, W) for a, b, c in triples) / len(triples)
    return (T + T.transpose(0, 2, 1) + T.transpose(1, 0, 2) + T.transpose(1, 2, 0)
            + T.transpose(2, 0, 1) + T.transpose(2, 1, 0)) / 6.0


@dataclass(frozen=True)
class KernelMultiviewFit:
    """Weights and conditional embeddings of a multi-view mixture in feature space.

    Attributes
    ----------
    weights : ndarray, shape (k,)
        ``w_i = lambda_i^(-2)`` (not floored or renormalized).
    embeddings : list of ndarray, each (k, r_v)
        Row ``i`` of ``embeddings[v]`` estimates ``E[phi_v(x_v) | h = i]``.
    diagnostics : dict
        Whitening and decomposition diagnostics.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, eq. 40 (conditional embeddings).
    """

    weights: np.ndarray
    embeddings: list
    diagnostics: dict


def fit_exchangeable_views(moments, k: int, *, method: str = "tpm", seed=0,
                           decompose_options: dict | None = None) -> KernelMultiviewFit:
    """Seed 004's kernel algorithm for exchangeable views sharing one feature map ([1]_ Sec. 6).

    KernelSVD (Alg. 1, :func:`kernel_svd`), the whitened third-order
    embedding (eq. 39, :func:`whitened_third_embedding`), the tensor power
    method (Alg. 2), weights ``lambda_i^(-2)`` and conditional embeddings
    (eq. 40) ``mu_i = lambda_i U_k S_k^(1/2) v_i``, the same for every view.

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
        Moments of the feature views (same feature map, same dimension ``r``).
    k : int
        Number of components, ``<= r``.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition (default: the robust tensor power method).
    seed : int or numpy.random.Generator
    decompose_options : dict, optional
        Keyword arguments of the decomposition; unknown keys raise.

    Returns
    -------
    KernelMultiviewFit

    Raises
    ------
    ValueError
        ``k`` larger than the feature rank, views of different feature dimensions.
    IndefiniteMomentError
        If the second-order embedding is not positive on its top k eigenvectors.

    References
    ----------
    .. [1] Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 6: Alg. 1, eq. 39, Alg. 2, eq. 40.
    """
    func = "fit_exchangeable_views"
    options = check_options(method, decompose_options, func)
    dims = set(moments.dims)
    if len(dims) != 1:
        raise bad_argument("moments", func, "views with one common feature map (exchangeable views)",
                           f"feature dimensions {moments.dims}", describe=False)
    r = dims.pop()
    k = check_int(k, "k", func, minimum=1, maximum=r)
    rng = as_generator(seed, func)
    U, s, diagnostics = kernel_svd(moments, k, func=func)
    W = U / np.sqrt(s)
    T = whitened_third_embedding(moments, W)
    dec = decompose(T, k, method, seed=rng, **options)
    lam = dec.weights
    if np.any(lam <= 0):
        warn(f"{func}: {int(np.sum(lam <= 0))} tensor eigenvalue(s) are not positive; the weights are unreliable. "
             "Try a smaller k or more data.")
    lam = np.where(lam > 0, lam, np.finfo(float).eps)
    embeddings = (lam[:, None] * ((U * np.sqrt(s)) @ dec.vectors).T)
    diagnostics.update({"tensor_eigenvalues": lam, **{f"decomposition_{key}": v for key, v in dec.diagnostics.items()}})
    return KernelMultiviewFit(1.0 / lam**2, [embeddings] * moments.n_views, diagnostics)
