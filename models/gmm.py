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
from specinit.models._em import (
    RefineResult,
    check_em_options,
    em_loop,
    gaussian_log_density,
    responsibilities,
)
from specinit.models._gmm_moments import DataMoments

from specinit._validation import (
    as_generator,
    bad_argument,
    check_choice,
    check_int,
    check_positive,
)
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.population import FactoredMoments
from specinit.engine.support import positive_weights
from specinit.engine.views import conditional_variances, fit_multiview, with_squares
from specinit.engine.whitening import IndefiniteMomentError
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = ["MixtureMoments", "model", "population_moments", "spectral", "spectral_from_moments", "spectral_axis_aligned", "refine"]

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"loc": 0, "weights": 0, "scale": 0},
    match_site="loc",
    dims={"weights": ("components",), "loc": ("components", "dim"), "x": ("data", "dim")},
    event_dims={"weights": ("components",), "loc": ("components", "dim"), "x": ("dim",)},
)

_SCALE_FLOOR = 1e-6


def model(x=None, *, k: int, n: int | None = None, dim: int | None = None, common_scale: bool = True,
          covariance: str | None = None):
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
        per component (``scale`` of shape (k,)); used when ``covariance`` is None.
    covariance : {"common", "spherical", "diag"}, optional
        ``scale`` scalar, (k,) or (k, d) (diagonal covariances); overrides
        ``common_scale``.

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
    covariance = _resolve_covariance(common_scale, covariance, "gmm.model")
    if covariance == "common":
        scale = numpyro.sample("scale", dist.HalfNormal(10.0))
        scale = jnp.broadcast_to(scale, (k, 1))
    elif covariance == "spherical":
        scale = numpyro.sample("scale", dist.HalfNormal(10.0).expand([k]).to_event(1))[:, None]
    else:
        scale = numpyro.sample("scale", dist.HalfNormal(10.0).expand([k, d]).to_event(2))
    components = dist.Normal(loc, scale).to_event(1)
    with numpyro.plate("data", n_obs):
        numpyro.sample("x", dist.MixtureSameFamily(dist.Categorical(weights), components), obs=x)


@dataclass(frozen=True)
class MixtureMoments(FactoredMoments):
    """Exact corrected moments of a spherical mixture, with its variance terms.

    Parameters
    ----------
    components : ndarray, shape (k, d)
        The means ``loc`` (``M2 = sum w mu mu^T``, ``M3 = sum w mu^(x)3``).
    omega, kappa : ndarray, shape (k,)
        The weights (both).
    sigma2 : float
        ``sigma_bar^2 = sum_i w_i sigma_i^2``.
    m1 : ndarray, shape (d,)
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


_COVARIANCES = ("common", "spherical", "diag")


def _resolve_covariance(common_scale, covariance, func):
    """``covariance`` when given, else ``"common"`` / ``"spherical"`` from ``common_scale``."""
    if covariance is None:
        return "common" if common_scale else "spherical"
    return check_choice(covariance, "covariance", func, _COVARIANCES)


def _check_data(x, k, func, min_dim_factor=1):
    if x is None or isinstance(x, (str, bytes)):
        raise bad_argument("x", func, "an (N, d) numeric array", x, kind=TypeError)
    x = np.asarray(x)
    if x.dtype == object or x.dtype.kind not in "biuf":
        raise bad_argument("x", func, "an (N, d) numeric array", x, kind=TypeError)
    if x.ndim != 2 or x.shape[0] < 2:
        raise bad_argument("x", func, "a two-dimensional (N, d) array with N >= 2", x)
    x = x.astype(np.float64, copy=False)
    finite = np.isfinite(x)
    if not np.all(finite):
        rows = np.flatnonzero(~finite.all(axis=1))
        listed = ", ".join(str(r) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
        raise bad_argument("x", func, "finite (no NaN or infinite values)",
                           f"NaN or infinite values in {rows.size} row(s): row {listed}", describe=False)
    k = check_int(k, "k", func, minimum=1)
    if x.shape[1] < min_dim_factor * k:
        need = "d >= k" if min_dim_factor == 1 else f"d >= {min_dim_factor} k"
        raise bad_argument("x", func, f"an array with {need} columns (k = {k})", x)
    return x, k


def _em_variances(x, loc, weights, var, covariance):
    """One EM step from (loc, weights, var): (weights, loc, variances (k, d)) and responsibilities."""

    resp, _ = responsibilities(np.log(weights) + gaussian_log_density(x, loc, var))
    return _m_step(x, resp, covariance) + (resp,)


def _m_step(x, resp, covariance, reg=1e-6):
    """Maximum-likelihood weights, means and (k, d) variances given responsibilities (``reg`` added)."""
    nk = resp.sum(axis=0) + 10 * np.finfo(float).eps
    loc = (resp.T @ x) / nk[:, None]
    second = (resp.T @ (x * x)) / nk[:, None]
    var = np.maximum(second - loc**2, 0.0)
    if covariance == "spherical":
        var = np.repeat(var.mean(axis=1, keepdims=True), x.shape[1], axis=1)
    elif covariance == "common":
        var = np.full_like(var, float((nk @ var.mean(axis=1)) / nk.sum()))
    return nk / nk.sum(), loc, var + reg


def _scale_param(var, covariance):
    """The model's ``scale`` site from (k, d) variances."""
    if covariance == "common":
        return np.sqrt(max(float(var[0, 0]), _SCALE_FLOOR**2))
    if covariance == "spherical":
        return np.sqrt(np.maximum(var[:, 0], _SCALE_FLOOR**2))
    return np.sqrt(np.maximum(var, _SCALE_FLOOR**2))


def _variances(scale, k, d):
    """(k, d) variances from a scalar, (k,) or (k, d) ``scale``."""
    scale = np.asarray(scale, dtype=np.float64)
    if scale.ndim == 1:
        scale = scale[:, None]
    return np.broadcast_to(scale**2, (k, d)).copy()


def spectral_from_moments(moments, k: int, *, common_scale: bool = True, covariance: str | None = None,
                          method: str = "tpm", seed=0, decompose_options: dict | None = None) -> SpectralEstimate:
    """Weights, locations and scales from corrected moments ([1]_ Thm 3.2/3.3).

    Parameters
    ----------
    moments : MixtureMoments or the moments of data
        Anything with ``m2_matmat``, ``whitened_m3``, ``sigma2`` and ``m1``
        (:func:`population_moments`, or the data moments built by :func:`spectral`).
    k : int
        Number of components.
    common_scale : bool
        As for :func:`spectral`.
    covariance : {"common", "spherical", "diag"}, optional
        As for :func:`spectral`.
    method : {"tpm", "svtd", "eca", "als"}
        As for :func:`spectral`.
    seed : int or numpy.random.Generator
        As for :func:`spectral`.
    decompose_options : dict, optional
        As for :func:`spectral`.

    Returns
    -------
    SpectralEstimate
        ``weights`` (k,), ``loc`` (k, d), ``scale`` (scalar for ``"common"``,
        (k,) for ``"spherical"``, (k, d) for ``"diag"``).

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        If the corrected second moment is not positive definite on its top k
        eigenvectors (population moments with linearly dependent means).
    """
    func = "gmm.spectral"
    covariance = _resolve_covariance(common_scale, covariance, func)
    try:
        fit = fit_exchangeable(moments, k, method=method, seed=seed, decompose_options=decompose_options)
    except IndefiniteMomentError as exc:
        raise exc.advise(func, "The component means must be linearly independent (k <= d); try a smaller k.") from None
    lam = fit.eigenvalues
    weights, rows = positive_weights(1.0 / lam**2), fit.components * lam[:, None]
    diagnostics = {"sigma2_bar": float(moments.sigma2), "covariance": covariance, **fit.diagnostics}
    augmented = isinstance(moments, DataMoments)
    if augmented:
        # the appended coordinate of every mean is +c: it fixes the sign left by the odd-order decomposition
        flips = rows[:, -1] < 0
        rows = rows * np.where(flips, -1.0, 1.0)[:, None]
        diagnostics["sign_flips"] = int(flips.sum())
        ratio = rows[:, -1] / moments.c
        diagnostics["constant_coordinate_ratio"] = ratio
        loc = rows[:, :-1] + moments.mean
    else:
        loc = rows
    d = loc.shape[1]
    if covariance == "common":
        scale = np.sqrt(max(moments.sigma2, _SCALE_FLOOR**2))
    elif covariance == "spherical":
        variances = np.linalg.lstsq(rows.T * weights, getattr(moments, "m1_variances", moments.m1), rcond=None)[0]
        diagnostics["component_variances_raw"] = variances
        if augmented and getattr(moments, "noise_kind", "isotropic") == "factor":
            # the moment step assumed a noise shared by the components: start every component at its mean
            # (the Thm 3.3 solve stays in the diagnostics; refine / assign_steps separate the variances)
            variances = np.full(k, float(np.mean(moments.noise)))
        scale = np.sqrt(np.maximum(variances, _SCALE_FLOOR**2))
    else:
        noise = moments.noise if augmented else np.full(d, moments.sigma2)
        scale = np.sqrt(np.maximum(np.broadcast_to(noise, (k, d)), _SCALE_FLOOR**2))
    return SpectralEstimate("gmm", {"weights": weights, "loc": loc, "scale": scale}, diagnostics, facts=FACTS)


def spectral(x, k: int, *, common_scale: bool = True, covariance: str | None = None, method: str = "tpm",
             seed=0, assign_steps: int = 0, decompose_options: dict | None = None,
             backend: str | None = None, noise: str = "factor") -> SpectralEstimate:
    """Method-of-moments estimate of a Gaussian mixture (spherical or diagonal covariances).

    The data are centred and a constant coordinate is appended (see the
    module notes), so centred or standardized data work as they are and any
    ``k <= rank(Cov(x))`` with affinely independent means can be fitted; the
    corrected second moment is then positive definite on its top k
    eigenvectors for every data set (no refusal on real data).

    Parameters
    ----------
    x : array, shape (N, d)
        Observations. Constant or duplicated columns are allowed (they lower
        the rank, which must stay >= k).
    k : int
        Number of components.
    common_scale : bool
        Used when ``covariance`` is None: True means ``"common"``, False
        ``"spherical"``.
    covariance : {"common", "spherical", "diag"}, optional
        ``"common"``: one variance ([1]_ Thm 3.2). ``"spherical"``: one
        variance per component ([1]_ Thm 3.3, solved from
        ``M1' = sum_i w_i sigma_i^2 mu_i``). ``"diag"``: per-component,
        per-coordinate variances; the moment step corrects a shared
        per-coordinate noise estimated by factor iterations, the
        per-component variances come from the assignment steps (or
        :func:`refine`); with ``assign_steps=0`` every component gets the
        shared noise. (scikit-learn's ``covariance_type`` names
        ``"spherical"`` and ``"diag"`` mean the same.)
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    seed : int or numpy.random.Generator
        Randomness of the whitening and the decomposition.
    assign_steps : int
        EM assignment steps (soft assignment of every point, then weighted
        weights, means and variances) applied to the moment estimate,
        counted in ``diagnostics["assign_steps"]`` and not by :func:`refine`.
        They move the components to what EM calls a cluster on data that
        are not an exact mixture. 0 (default): the pure moment estimate.
    noise : {"factor", "isotropic"}
        Noise correction of the moment step. ``"factor"`` (default): a
        per-coordinate noise ``D`` shared by the components, from factor
        iterations on the covariance; consistent for spherical mixtures
        with a common variance and for diagonal ones with shared noise, and
        much closer to real data (standardized features whose within-cluster
        spread differs by feature). ``"isotropic"``: ``sigma_bar^2 I`` and,
        for ``covariance="spherical"``, the ``M1'`` correction of [1]_
        Thm 3.3 (consistent for spherical components with differing
        variances). Always per-coordinate for ``"diag"``.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition; unknown keys raise.
    backend : {"numpy", "jax"} or None
        Where the moment passes run (``None``: JAX when an accelerator is
        present). ``x`` may also be a ``dask.array`` of dense row blocks: the
        passes then run where the blocks live (``assign_steps`` must be 0).

    Returns
    -------
    SpectralEstimate
        ``"gmm"`` with ``weights`` (k,), ``loc`` (k, d), ``scale`` (scalar,
        (k,) or (k, d) by ``covariance``); diagnostics include ``sigma2_bar``,
        ``covariance_eigenvalues``, ``covariance_rank``, ``constant_columns``,
        ``assign_steps``.

    Raises
    ------
    ValueError
        ``d < k`` or covariance rank < k, NaN or infinite values (the rows
        are named), fewer than 2 observations, unknown ``covariance``.
    TypeError
        Non-numeric ``x``.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Thm 3.2, Thm 3.3.
    """
    func = "gmm.spectral"
    covariance = _resolve_covariance(common_scale, covariance, func)
    from specinit.engine.dask_passes import check_row_blocks, is_dask_array

    if is_dask_array(x):
        x, k = check_row_blocks(x, "x", func), check_int(k, "k", func, minimum=1)
        if x.shape[1] < k or x.shape[0] < 2:
            raise bad_argument("x", func, f"an (N, d) array with N >= 2 and d >= k = {k}", f"shape {x.shape}",
                               describe=False)
        if assign_steps:
            raise bad_argument("assign_steps", func, "0 with a Dask array (EM steps need the data in memory)",
                               assign_steps)
    else:
        x, k = _check_data(x, k, func)
    assign_steps = check_int(assign_steps, "assign_steps", func, minimum=0)
    noise = check_choice(noise, "noise", func, ("factor", "isotropic"))
    moments = DataMoments(x, k, covariance, func, backend, noise)
    estimate = spectral_from_moments(moments, k, covariance=covariance, method=method, seed=seed,
                                     decompose_options=decompose_options)
    diagnostics = estimate.diagnostics
    diagnostics.update(covariance_eigenvalues=moments.eigenvalues, covariance_rank=moments.rank,
                       constant_columns=moments.n_constant, factor_iterations=moments.factor_iterations,
                       assign_steps=assign_steps)
    if assign_steps:
        weights, loc = estimate.params["weights"], estimate.params["loc"]
        var = _variances(estimate.params["scale"], k, x.shape[1])
        for _ in range(assign_steps):
            weights, loc, var, _ = _em_variances(x, loc, weights, var, covariance)
        estimate = SpectralEstimate("gmm", {"weights": positive_weights(weights), "loc": loc,
                                            "scale": _scale_param(var, covariance)}, diagnostics, facts=FACTS)
    return estimate


def refine(x, estimate, *, covariance: str | None = None, method: str = "em", max_iter: int = 100,
           tol: float = 1e-3, reg: float = 1e-6):
    """Spectral then refine: EM for the Gaussian mixture started from an estimate.

    Parameters
    ----------
    x : array, shape (N, d)
        The observations (as for :func:`spectral`).
    estimate : SpectralEstimate or dict
        Starting ``weights``, ``loc`` and ``scale`` (scalar, (k,) or (k, d)).
    covariance : {"common", "spherical", "diag"}, optional
        Default: read off the shape of ``scale`` (scalar -> ``"common"``,
        (k,) -> ``"spherical"``, (k, d) -> ``"diag"``).
    method : {"em"}
        Expectation-maximization in NumPy, float64, log-sum-exp E-step.
    max_iter : int
        Largest number of EM iterations (M-steps).
    tol : float
        Stop when the log-likelihood gain per observation is below ``tol``
        (scikit-learn's ``GaussianMixture`` convention and default).
    reg : float
        Added to every variance (scikit-learn's ``reg_covar``).

    Returns
    -------
    specinit.models._em.RefineResult
        ``.estimate`` (a :class:`SpectralEstimate` of model ``"gmm"`` with the
        refined sites, for warm starts), ``.log_likelihood`` trace (total),
        ``.n_iter``, ``.converged``, ``.mean_log_likelihood``.

    Raises
    ------
    ValueError
        Bad ``x`` (as for :func:`spectral`), parameters that do not match
        ``x``, non-positive ``tol`` or ``reg``.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [2] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
       the EM algorithm", JRSS B 39 (1977).
    """

    func = "gmm.refine"
    check_choice(method, "method", func, ("em",))
    params = dict(getattr(estimate, "params", estimate))
    missing = {"weights", "loc", "scale"} - set(params)
    if missing:
        raise bad_argument("estimate", func, "a SpectralEstimate or dict with 'weights', 'loc' and 'scale'",
                           f"missing {sorted(missing)}", describe=False)
    loc = np.asarray(params["loc"], dtype=np.float64)
    k = loc.shape[0]
    x, k = _check_data(x, k, func)
    if loc.shape != (k, x.shape[1]):
        raise bad_argument("estimate", func, f"'loc' of shape ({k}, {x.shape[1]}) matching x", loc, describe=False)
    scale = np.asarray(params["scale"], dtype=np.float64)
    if covariance is None:
        covariance = {0: "common", 1: "spherical"}.get(scale.ndim, "diag")
    covariance = check_choice(covariance, "covariance", func, _COVARIANCES)
    max_iter, tol = check_em_options(max_iter, tol, func)
    reg = check_positive(reg, "reg", func)
    if covariance == "spherical" and scale.ndim == 2:
        scale = np.sqrt((scale**2).mean(axis=1))
    elif covariance == "common" and scale.ndim:
        scale = np.sqrt(np.mean(_variances(scale, k, x.shape[1])))
    start = (positive_weights(np.asarray(params["weights"], dtype=np.float64)), loc, _variances(scale, k, x.shape[1]))

    def estep(p):
        weights, mu, var = p
        return responsibilities(np.log(weights) + gaussian_log_density(x, mu, var))

    def mstep(resp):
        return _m_step(x, resp, covariance, reg)

    (weights, loc, var), trace, n_iter, converged, decreases = em_loop(
        estep, mstep, start, max_iter=max_iter, tol=tol, n_observations=x.shape[0], func=func)
    spectral_diagnostics = dict(getattr(estimate, "diagnostics", {}))
    diagnostics = {"spectral": spectral_diagnostics,
                   "refine": {"method": method, "n_iter": n_iter, "converged": converged, "covariance": covariance,
                              "log_likelihood": trace}}
    refined = SpectralEstimate("gmm", {"weights": positive_weights(weights), "loc": loc,
                                       "scale": _scale_param(var, covariance)}, diagnostics, facts=FACTS)
    return RefineResult(refined, trace, n_iter, converged, method,
                        {"n_observations": x.shape[0], "decreases": decreases})


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

    Parameters
    ----------
    x : array, shape (N, d)
        Observations, ``d >= 3 k``.
    k : int
        Number of components.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    seed : int or numpy.random.Generator
        Randomness of the partition, the range finders and the decomposition.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition; unknown keys raise.

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
