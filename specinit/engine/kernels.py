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

Recovery ([1]_ Sec. 6, exchangeable views, :class:`ExchangeableViews` through the exchangeable fit):

1. KernelSVD (Alg. 1): the top-k eigenpairs ``(U_k, S_k)`` of the
   symmetrized second-order embedding ``C2 = mean_{a<b} sym(C_{ab})``
   (:func:`specinit.engine.whitening.whiten`); ``W = U_k S_k^(-1/2)``;
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

from itertools import combinations
from typing import TYPE_CHECKING, Sequence

import numpy as np

from specinit._validation import bad_argument

if TYPE_CHECKING:
    from specinit.engine.views import MultiViewPopulation, SummedViews, ViewMoments

__all__ = ["ExchangeableViews", "whitened_third_embedding"]


def whitened_third_embedding(moments: ViewMoments | SummedViews | MultiViewPopulation, W: np.ndarray,
                             views: Sequence[int] | None = None) -> np.ndarray:
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
        Whitening matrix from :func:`specinit.engine.whitening.whiten` (KernelSVD).
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


class ExchangeableViews:
    """The symmetrized embeddings of exchangeable views, as the exchangeable fit reads moments ([1]_ Sec. 6).

    ``M2 = mean_{a < b} (C_ab + C_ab^T) / 2`` over pairs of the views (the
    second-order embedding whose top-k eigenpairs KernelSVD computes, [1]_
    Alg. 1; the features are the Cholesky or random-feature factor, so the
    eigenproblem is ``r x r``), and ``M3(W, W, W)`` the whitened third-order
    embedding (:func:`whitened_third_embedding`, eq. 39). With them
    :func:`specinit.engine.exchangeable.fit_exchangeable` is seed 004's
    algorithm: weights ``lambda_i^(-2)``, conditional embeddings
    ``lambda_i (W^T)^+ v_i`` (eq. 40), the same for every view.

    Parameters
    ----------
    moments : ViewMoments or MultiViewPopulation
        Moments of the feature views (one feature map, same dimension ``r``).
    views : sequence of int, optional
        The exchangeable views (default: all).

    Raises
    ------
    ValueError
        Views of different feature dimensions.

    References
    ----------
    .. [1] Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 6: Alg. 1, eq. 39, Alg. 2, eq. 40.
    """

    def __init__(self, moments: ViewMoments | SummedViews | MultiViewPopulation,
                 views: Sequence[int] | None = None) -> None:
        self.views = list(range(moments.n_views)) if views is None else list(views)
        dims = {moments.dims[v] for v in self.views}
        if len(dims) != 1:
            raise bad_argument("moments", None, "views with one common feature map (exchangeable views)",
                               f"feature dimensions {moments.dims}", describe=False)
        self.n_features = dims.pop()
        self.moments = moments
        self._pairs = list(combinations(self.views, 2))

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """The symmetrized second-order embedding times ``Q``."""
        total = sum(self.moments.pairs_matmat(a, b, Q) + self.moments.pairs_matmat(b, a, Q) for a, b in self._pairs)
        return total / (2 * len(self._pairs))

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """The whitened third-order embedding at ``W`` (eq. 39)."""
        return whitened_third_embedding(self.moments, W, self.views)
