"""Spherical Gaussian mixtures: NumPyro program and moment maps.

``h ~ Categorical(weights)``, ``x | h = i ~ Normal(loc_i, scale_i^2 I_d)``
with a common ``scale`` (scalar) or one scale per component (``(k,)``).
The component is summed out (``MixtureSameFamily``), so the observed site
``x`` lives in the plate ``data`` with one log-likelihood per observation.

Moments ([1]_ Thm 3.2 and 3.3, after Hsu and Kakade 2013). Let
``sigma_bar^2 = sum_i w_i sigma_i^2``; it is the smallest eigenvalue of
``Cov(x)`` (multiplicity ``d - k + 1``) and ``V`` spans its eigenspace. With
``M1' = E[x ||V^T (x - E x)||^2] / (d - k + 1) = sum_i w_i sigma_i^2 mu_i``
(``= sigma^2 E[x]`` for a common variance):

.. math::

    M_2 = E[x x^T] - \\bar\\sigma^2 I = \\sum_i w_i \\mu_i \\mu_i^T, \\qquad
    M_3 = E[x^{\\otimes 3}] - \\sum_j (M_1' \\otimes e_j \\otimes e_j
          + e_j \\otimes M_1' \\otimes e_j + e_j \\otimes e_j \\otimes M_1')
        = \\sum_i w_i \\mu_i^{\\otimes 3}.

The whitened third moment is computed from whitened data ``y = W^T x``:
``M3(W, W, W) = E[y^(x)3] - sym(W^T M1' (x) W^T W)``; no ``d x d x d`` array
is formed. Then ``w_i = 1/lambda_i^2``, ``mu_i = lambda_i (W^T)^+ v_i`` and,
for differing variances, ``M1' = mu^T (w * sigma^2)`` is solved for the
``sigma_i^2``.

For mixtures with axis-aligned (diagonal) covariances,
:func:`spectral_axis_aligned` splits the coordinates into three random
groups, which are conditionally independent views ([1]_ Prop. 3.2), and
uses :func:`specinit.engine.views.fit_multiview`.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Thm 3.2, Thm 3.3, Prop. 3.2.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist

from specinit._validation import as_generator, bad_argument, check_int
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.moments import pair_products
from specinit.engine.population import FactoredMoments
from specinit.engine.support import positive_weights
from specinit.engine.views import conditional_variances, fit_multiview, with_squares
from specinit.engine.whitening import IndefiniteMomentError
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = ["MixtureMoments", "model", "population_moments", "spectral", "spectral_from_moments", "spectral_axis_aligned"]

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"loc": 0, "weights": 0, "scale": 0},
    match_site="loc",
    dims={"weights": ("components",), "loc": ("components", "dim"), "x": ("data", "dim")},
    event_dims={"weights": ("components",), "loc": ("components", "dim"), "x": ("dim",)},
)

_SCALE_FLOOR = 1e-6


def model(x=None, *, k: int, n: int | None = None, dim: int | None = None, common_scale: bool = True):
    """NumPyro spherical Gaussian mixture with the component summed out.

    Parameters
    ----------
    x : array, shape (N, d), optional
        Observations; ``None`` generates ``n`` observations of dimension ``dim``.
    k : int
        Number of components.
    n, dim : int, optional
        Needed only when ``x`` is None.
    common_scale : bool
        One standard deviation for all components (``scale`` scalar) or one
        per component (``scale`` of shape (k,)).

    Notes
    -----
    NumPyro sites:
    ``weights`` (k,) ~ Dirichlet(1), ``loc`` (k, d) ~ Normal(0, 10),
    ``scale`` () or (k,) ~ HalfNormal(10), observed ``x`` in plate ``data``.
    """
    if x is None:
        if n is None or dim is None:
            raise bad_argument("n", "gmm.model", "given (with dim) when x is None, to generate data", n)
        n_obs, d = int(n), int(dim)
    else:
        n_obs, d = jnp.shape(x)
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    loc = numpyro.sample("loc", dist.Normal(0.0, 10.0).expand([k, d]).to_event(2))
    if common_scale:
        scale = numpyro.sample("scale", dist.HalfNormal(10.0))
        scale = jnp.broadcast_to(scale, (k,))
    else:
        scale = numpyro.sample("scale", dist.HalfNormal(10.0).expand([k]).to_event(1))
    components = dist.Normal(loc, scale[:, None]).to_event(1)
    with numpyro.plate("data", n_obs):
        numpyro.sample("x", dist.MixtureSameFamily(dist.Categorical(weights), components), obs=x)


@dataclass(frozen=True)
class MixtureMoments(FactoredMoments):
    """Exact corrected moments of a spherical mixture, with its variance terms.

    ``components``, ``omega``, ``kappa`` are ``loc``, ``weights``, ``weights``
    (``M2 = sum w mu mu^T``, ``M3 = sum w mu^(x)3``); ``sigma2`` is
    ``sigma_bar^2 = sum_i w_i sigma_i^2`` and ``m1`` is
    ``M1' = sum_i w_i sigma_i^2 mu_i``, from which the scales are recovered.
    """

    sigma2: float = 0.0
    m1: np.ndarray | None = None


def population_moments(loc, weights, scale) -> MixtureMoments:
    """Exact corrected moments of the mixture ([1]_ Thm 3.2/3.3).

    Parameters
    ----------
    loc : array, shape (k, d)
        Component means (linearly independent for identifiability).
    weights : array, shape (k,)
        Mixing weights, positive.
    scale : float or array of shape (k,)
        Common or per-component standard deviation, positive.

    Returns
    -------
    MixtureMoments
        For :func:`spectral_from_moments` (exact recovery of all three sites).

    Raises
    ------
    ValueError
        Non-positive or non-finite ``scale`` or ``weights``, or shapes that
        do not match ``loc``.
    """
    func = "gmm.population_moments"
    loc = np.asarray(loc, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    if scale.shape not in ((), weights.shape) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise bad_argument("scale", func, f"finite and > 0, a scalar or of shape {weights.shape}", scale)
    variances = np.broadcast_to(scale**2, weights.shape)
    return MixtureMoments(loc, weights, weights, sigma2=float(weights @ variances), m1=(weights * variances) @ loc)


def _check_data(x, k, func, min_dim_factor=1):
    if x is None or isinstance(x, (str, bytes)):
        raise bad_argument("x", func, "an (N, d) numeric array", x, kind=TypeError)
    x = np.asarray(x)
    if x.dtype == object or x.dtype.kind not in "biuf":
        raise bad_argument("x", func, "an (N, d) numeric array", x, kind=TypeError)
    if x.ndim != 2 or x.shape[0] < 2:
        raise bad_argument("x", func, "a two-dimensional (N, d) array with N >= 2", x)
    x = x.astype(np.float64, copy=False)
    if not np.all(np.isfinite(x)):
        n_bad = int(x.size - np.count_nonzero(np.isfinite(x)))
        raise bad_argument("x", func, "finite", f"{n_bad} NaN or infinite entries", describe=False)
    k = check_int(k, "k", func, minimum=1)
    if x.shape[1] < min_dim_factor * k:
        need = "d >= k" if min_dim_factor == 1 else f"d >= {min_dim_factor} k"
        raise bad_argument("x", func, f"an array with {need} columns (k = {k})", x)
    return x, k


class _SphericalMoments:
    """Variance-corrected moments of spherical Gaussian mixture data ([1]_ Thm 3.2/3.3)."""

    def __init__(self, x: np.ndarray, k: int, common_scale: bool):
        self.x = x
        n, d = x.shape
        self.mean = x.mean(axis=0)
        cov = np.cov(x, rowvar=False, bias=True).reshape(d, d)
        eigvals, eigvecs = np.linalg.eigh(cov)
        m = d - k + 1
        # sigma_bar^2 has multiplicity d - k + 1 in the population; averaging these
        # eigenvalues removes most of the downward bias of the sample minimum.
        self.sigma2 = float(eigvals[:m].mean())
        if common_scale:
            self.m1 = self.sigma2 * self.mean
        else:
            proj = (x - self.mean) @ eigvecs[:, :m]
            self.m1 = x.T @ np.sum(proj**2, axis=1) / (n * m)
        self.eigenvalues = eigvals

    @property
    def n_features(self) -> int:
        return self.x.shape[1]

    def m2_matmat(self, Q):
        return self.x.T @ (self.x @ Q) / self.x.shape[0] - self.sigma2 * Q

    def whitened_m3(self, W):
        Y = self.x @ W
        T = pair_products(Y, Y) / Y.shape[0]
        a, B = W.T @ self.m1, W.T @ W
        return T - (np.einsum("a,bc->abc", a, B) + np.einsum("b,ac->abc", a, B) + np.einsum("c,ab->abc", a, B))


def spectral_from_moments(moments, k: int, *, common_scale: bool = True, method: str = "tpm", seed=0,
                          decompose_options: dict | None = None) -> SpectralEstimate:
    """Weights, locations and scales from corrected moments ([1]_ Thm 3.2/3.3).

    Parameters
    ----------
    moments : MixtureMoments or the moments of data
        Anything with ``m2_matmat``, ``whitened_m3``, ``sigma2`` and ``m1``
        (:func:`population_moments`, or the data moments built by :func:`spectral`).
    k : int
        Number of components.
    common_scale, method, seed, decompose_options
        As for :func:`spectral`.

    Returns
    -------
    SpectralEstimate
        ``weights`` (k,), ``loc`` (k, d), ``scale`` (scalar, or (k,) when not
        ``common_scale``).

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        If the corrected second moment is not positive definite on its top k
        eigenvectors (the means must be linearly independent, so k <= d).
    """
    func = "gmm.spectral"
    try:
        fit = fit_exchangeable(moments, k, method=method, seed=seed, decompose_options=decompose_options)
    except IndefiniteMomentError as exc:
        raise exc.advise(func, "The component means must be linearly independent (k <= d); try a smaller k.") from None
    lam = fit.eigenvalues
    weights, loc = positive_weights(1.0 / lam**2), fit.components * lam[:, None]
    diagnostics = {"sigma2_bar": float(moments.sigma2), **fit.diagnostics}
    if common_scale:
        scale = np.sqrt(max(moments.sigma2, _SCALE_FLOOR**2))
    else:
        variances = np.linalg.lstsq(loc.T * weights, moments.m1, rcond=None)[0]
        diagnostics["component_variances_raw"] = variances
        scale = np.sqrt(np.maximum(variances, _SCALE_FLOOR**2))
    return SpectralEstimate("gmm", {"weights": weights, "loc": loc, "scale": scale}, diagnostics, facts=FACTS)


def spectral(x, k: int, *, common_scale: bool = True, method: str = "tpm", seed=0,
             decompose_options: dict | None = None) -> SpectralEstimate:
    """Method-of-moments estimate of a spherical Gaussian mixture.

    Parameters
    ----------
    x : array, shape (N, d)
        Observations, ``d >= k`` (the noise variance is read off the
        ``d - k + 1`` smallest eigenvalues of the covariance).
    k : int
        Number of components; the means must be linearly independent.
    common_scale : bool
        True: one variance ([1]_ Thm 3.2). False: per-component variances
        ([1]_ Thm 3.3), solved from ``M1' = sum_i w_i sigma_i^2 mu_i``.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    seed : int or numpy.random.Generator
        Randomness of the whitening and the decomposition.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition; unknown keys raise.

    Returns
    -------
    SpectralEstimate
        ``"gmm"`` with ``weights`` (k,), ``loc`` (k, d), ``scale`` (scalar if
        ``common_scale`` else (k,)); diagnostics include ``sigma2_bar`` and
        ``covariance_eigenvalues``.

    Raises
    ------
    ValueError
        ``d < k``, NaN or infinite values, fewer than 2 observations.
    """
    x, k = _check_data(x, k, "gmm.spectral")
    moments = _SphericalMoments(x, k, bool(common_scale))
    estimate = spectral_from_moments(moments, k, common_scale=common_scale, method=method, seed=seed,
                                     decompose_options=decompose_options)
    estimate.diagnostics["covariance_eigenvalues"] = moments.eigenvalues
    return estimate


def spectral_axis_aligned(x, k: int, *, method: str = "tpm", seed=0, decompose_options: dict | None = None) -> SpectralEstimate:
    """Mixture of axis-aligned Gaussians via a random 3-way partition of coordinates.

    The coordinates are randomly permuted and split into three groups of
    nearly equal size (each with at least ``k`` coordinates); given the
    component the groups are independent, hence three views ([1]_ Prop. 3.2,
    which needs the mean matrix to be incoherent). Means come from
    :func:`specinit.engine.views.fit_multiview`; per-coordinate variances from
    the conditional means of the squared coordinates ``E[x_j^2 | h]``
    estimated against another group, minus ``loc^2``
    (:func:`specinit.engine.views.conditional_variances`).

    Returns
    -------
    SpectralEstimate
        ``"gmm"`` with ``weights`` (k,), ``loc`` (k, d) and ``scale`` (k,) the
        root mean per-coordinate variance of each component (the model's
        per-component scale); the per-coordinate variances (k, d) are in
        ``diagnostics["coordinate_variances"]``, and the partition in
        ``diagnostics["partition"]``.

    Raises
    ------
    ValueError
        ``d < 3 k``, NaN or infinite values.
    """
    func = "gmm.spectral_axis_aligned"
    x, k = _check_data(x, k, func, min_dim_factor=3)
    rng = as_generator(seed, func)
    groups = np.array_split(rng.permutation(x.shape[1]), 3)
    views = [x[:, g] for g in groups]
    fit = fit_multiview(views, k, method=method, seed=rng, decompose_options=decompose_options)
    weights = positive_weights(fit.weights)
    loc = np.empty((k, x.shape[1]))
    variances = np.empty((k, x.shape[1]))
    partition = np.empty(x.shape[1], dtype=np.int64)
    conditional = conditional_variances(with_squares(views, range(3)), fit, range(3))
    for j, g in enumerate(groups):
        loc[:, g] = fit.means[j]
        variances[:, g] = conditional[j]
        partition[g] = j
    scale = np.sqrt(np.maximum(variances.mean(axis=1), _SCALE_FLOOR**2))
    diagnostics = {"partition": partition, "coordinate_variances": variances, **fit.diagnostics}
    return SpectralEstimate("gmm", {"weights": weights, "loc": loc, "scale": scale}, diagnostics, facts=FACTS)
