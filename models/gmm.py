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

Full covariances come from EM alone: the moment step gives common,
spherical or diagonal scales, and :func:`refine` with
``covariance="full"`` starts from them (diagonal matrices) and estimates one
full covariance matrix per component (the param ``covariance``, (k, d, d),
beside ``scale``, the roots of its diagonal). :func:`lkj_sites` and
:func:`scale_tril_sites` map such an estimate onto the sites of a NumPyro
mixture written with ``LKJCholesky`` correlations or a ``scale_tril``.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Thm 3.2, Thm 3.3, Prop. 3.2.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpy.typing import ArrayLike

from specinit._validation import Interval, Options, as_generator, bad_argument, check_arguments, current_entry
from specinit.distributions.mixtures import gaussian_components_host
from specinit.engine.backends import numba_kernel
from specinit.engine.population import FactoredMoments
from specinit.engine.rows import RowMoments, RowSums, unit_of
from specinit.engine.sources import check_rows, is_dask_array
from specinit.engine.support import project
from specinit.engine.views import conditional_variances, fit_multiview, with_squares
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import RANDOM_STATE, Face, Param, face, mean_log_likelihood, predicted, responsibilities
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, Family, k_param, site_values
from specinit.refine import RefineResult, component_share, split_merge_pair

if TYPE_CHECKING:
    import dask.array
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit

__all__ = ["FACTS", "FAMILY", "GaussianMixture", "LIFTED_MAX_K", "LiftedRows", "MixtureMoments", "lifted_fit",
           "lkj_sites", "log_likelihood", "model", "population_moments", "predict", "refine", "scale_tril_sites",
           "spectral", "spectral_axis_aligned", "spectral_from_moments", "update"]

#: Covariance kinds of the moment step (and of :func:`model`).
COVARIANCES = ("common", "spherical", "diag")

#: Covariance kinds of :func:`refine`: those of the moment step, and full matrices (EM only).
REFINE_COVARIANCES = (*COVARIANCES, "full")

#: Relative floor (in units of the data's mean column variance) of the eigenvalues of a covariance that EM's E-step
#: meets not positive definite -- a perturbed restart or a SQUAREM extrapolation, never an M-step's (regularised)
#: matrix nor a start given to :func:`refine`, which must be positive definite.
REPAIR_FLOOR = 1e-6


def _resolve_covariance(common_scale, covariance):
    """``covariance`` when given, else ``"common"`` / ``"spherical"`` from ``common_scale``."""
    if covariance is None:
        return "common" if common_scale else "spherical"
    if covariance == "full":
        raise bad_argument("covariance", None, "one of 'common', 'spherical', 'diag' (full covariances come from "
                           "gmm.refine(x, estimate, covariance='full'); gmm.lkj_sites and gmm.scale_tril_sites map "
                           "them onto a NumPyro model with full covariances)", covariance)
    return Options(COVARIANCES).check("covariance", covariance)


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


#: Widest rows whose split direction (a split-merge move's principal axis) comes from the component's dense (d, d)
#: covariance; wider rows use matrix-free power iteration (N d^2 against 60 N d multiply-adds).
DENSE_AXIS_MAX = 64


@dataclass(frozen=True)
class LiftedRows:
    """Rows with fewer columns than components: the moments of the d < k strategy (:func:`lifted_fit` reads the
    rows; :meth:`GaussianMixture.strategy` names it, :meth:`GaussianMixture.max_components` gives its limit).

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Validated rows.
    """

    x: np.ndarray

    @property
    def n_features(self) -> int:
        """``d``."""
        return int(self.x.shape[1])


@dataclass(frozen=True)
class RowData:
    """Rows as EM reads them (and their squares, read by every E- and M-step), with the covariance kind (one of
    :data:`REFINE_COVARIANCES`) and the data's mean column variance (the unit of ``reg``)."""

    x: np.ndarray
    covariance: str
    variance: float
    x_squared: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "x", np.ascontiguousarray(self.x, dtype=np.float64))  # what the compiled steps read
        object.__setattr__(self, "x_squared", self.x * self.x)


class GaussianMixture(Family):
    """Gaussian mixtures with common, spherical or diagonal covariances ([1]_ Thm 3.2/3.3), and full covariances
    from EM (:meth:`refine`)."""

    name = "gmm"
    data_kind = "rows"
    k_dependent_moments = True
    match_site = "loc"
    summary = RowSums
    options = {
        "covariance": Param("{'common', 'spherical', 'diag'}, optional", "``\"common\"``: one variance ([1]_ Thm "
                            "3.2). ``\"spherical\"``: one variance per component ([1]_ Thm 3.3, solved from ``M1' = "
                            "sum_i w_i sigma_i^2 mu_i``). ``\"diag\"``: per-component, per-coordinate variances; the "
                            "moment step corrects a shared per-coordinate noise estimated by factor iterations, the "
                            "per-component variances come from the assignment steps (or :func:`refine`); with "
                            "``assign_steps=0`` every component gets the shared noise. (scikit-learn's "
                            "``covariance_type`` names ``\"spherical\"`` and ``\"diag\"`` mean the same.) ``None`` "
                            "(default): by ``common_scale``. Full covariances are not a moment estimate: "
                            ":func:`refine` with ``covariance=\"full\"`` estimates them from this start.", None,
                            Options(COVARIANCES)),
        "noise": Param("{'factor', 'isotropic'}", "Noise correction of the moment step. ``\"factor\"`` (default): a "
                       "per-coordinate noise ``D`` shared by the components, from factor iterations on the "
                       "covariance; consistent for spherical mixtures with a common variance and for diagonal ones "
                       "with shared noise, and much closer to real data (standardized features whose within-cluster "
                       "spread differs by feature). ``\"isotropic\"``: ``sigma_bar^2 I`` and, for "
                       "``covariance=\"spherical\"``, the ``M1'`` correction of [1]_ Thm 3.3 (consistent for "
                       "spherical components with differing variances). Always per-coordinate for ``\"diag\"``. "
                       "Where the covariance does not identify a per-coordinate noise "
                       "(``diagnostics[\"factor_identified\"]``), the shared ``sigma_bar^2``.",
                       "factor", Options(("factor", "isotropic"))),
        "assign_steps": Param("int", "EM assignment steps (soft assignment of every point, then weighted weights, "
                              "means and variances) applied to the moment estimate, counted in "
                              "``diagnostics[\"assign_steps\"]`` and not by :func:`refine`. They move the components "
                              "to what EM calls a cluster on data that are not an exact mixture. 0 (default): the "
                              "pure moment estimate.", 0, Interval(int, 0)),
    }
    arguments = {
        "x": Param("array, shape (N, d)", "Observations. Constant or duplicated columns are allowed (they lower the "
                   "rank, which must stay >= k when d >= k)."),
        "moments": Param("MixtureMoments or the moments of data", ":func:`population_moments`, or the data moments "
                         "built by :func:`spectral` (:class:`specinit.engine.rows.RowMoments`).",
                         annotation=MixtureMoments | RowMoments),
        "k": k_param("Number of components. ``d < k`` (one-dimensional data with several components) is fitted by "
                   ":func:`lifted_fit`: the one-dimensional method of moments on the principal axis "
                   "(Hermite-corrected moments of the lifted features ``[1, t, t^2, ..., t^(2k)]``), with a common "
                   "variance (the other ``covariance`` kinds start every component at it; :func:`refine` separates "
                   "them), ``k <= 10``; ``diagnostics[\"lifted\"]`` says so. When every direction of the data "
                   "carries signal and ``d < 10``, the spectrum bounds nothing and ``k=\"auto\"`` scores k up to 10."),
        "common_scale": Param("bool", "Used when ``covariance`` is None: True means ``\"common\"``, False "
                              "``\"spherical\"``.", True),
        "backend": Param("{'numpy', 'jax', 'dask'} or None", "Where the moment passes run "
                         "(:mod:`specinit.engine.backends`; ``None``: Dask for a ``dask.array`` of dense row blocks, "
                         "whose passes run where the blocks live (``assign_steps`` must be 0), JAX when an "
                         "accelerator is present, NumPy otherwise).", None),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Scales are floored at ``floor`` times the data's root mean variance and weights at ``floor / k`` "
            "(relative floors: the estimate does not depend on the data's unit)."),
    }
    advice = "The component means must be linearly independent (k <= d); try a smaller k."

    def site_table(self, params: Mapping[str, Any] | None = None, **options: Any) -> tuple[dict, str | None]:
        params = params or {}
        scale = np.asarray(params.get("scale", 1.0))
        scale_dims = {0: (), 1: ("components",), 2: ("components", "dim")}[min(scale.ndim, 2)]
        sites = {
            "weights": Site("simplex", (0,), ("components",), ("components",)),
            "loc": Site("real", (0,), ("components", "dim"), ("components", "dim")),
            "scale": Site("positive", (0,) if scale.ndim else (), scale_dims, scale_dims),
            "x": Site("observed", (), ("data", "dim"), ("dim",)),
        }
        if "covariance" in params:  # full covariances (refine): symmetric positive definite, no sign constraint
            sites["covariance"] = Site("real", (0,), ("components", "dim", "dim2"), ("components", "dim", "dim2"))
        return sites, "loc"

    def n_free_parameters(self, estimate: SpectralEstimate) -> int:
        total = super().n_free_parameters(estimate)
        covariance = estimate.params.get("covariance")
        if covariance is None:
            return total
        # full covariances: "scale" is the root of their diagonal, each matrix has d (d + 1) / 2 free entries
        k, d = covariance.shape[:2]
        return total - covariance.size - estimate.params["scale"].size + k * d * (d + 1) // 2

    def moments(self, x: ArrayLike | dask.array.Array, *, k: int, backend: str | Passes | None,
                covariance: str = "common", noise: str = "factor", assign_steps: int = 0) -> RowMoments | LiftedRows:
        if not is_dask_array(x):
            x = check_rows(x)
            if x.shape[1] < k:
                return LiftedRows(x)
        elif assign_steps:
            raise bad_argument("assign_steps", None, "0 with a Dask array (EM steps need the data in memory)",
                               assign_steps)
        return RowMoments(x, k, covariance, noise, backend)

    def population_moments(self, params: Mapping[str, Any], **options: Any) -> "MixtureMoments":
        loc = np.asarray(params["loc"], dtype=np.float64)
        weights = np.asarray(params["weights"], dtype=np.float64)
        scale = np.asarray(params["scale"], dtype=np.float64)
        if scale.shape not in ((), weights.shape) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise bad_argument("scale", None, f"finite and > 0, a scalar or of shape {weights.shape}", scale)
        variances = np.broadcast_to(scale**2, weights.shape)
        return MixtureMoments(loc, weights, weights, sigma2=float(weights @ variances), m1=(weights * variances) @ loc)

    def max_components(self, moments: MixtureMoments | RowMoments | LiftedRows) -> tuple[int, str]:
        if isinstance(moments, LiftedRows):
            return LIFTED_MAX_K, (f"at most {LIFTED_MAX_K} when x has fewer columns than k (d = {moments.n_features}: "
                                  "the one-dimensional method of moments uses moments up to order 2 k)")
        if isinstance(moments, RowMoments):
            return moments.rank, f"at most the rank of the covariance of x ({moments.rank})"
        return moments.n_features, f"at most the dimension d = {moments.n_features}"

    def strategy(self, moments: MixtureMoments | RowMoments | LiftedRows, k: int, *, method: str,
                 **options: Any) -> Callable[..., tuple[dict, dict, dict]] | None:
        """Rows with fewer columns than components: the lifted moments (:meth:`lifted`)."""
        return self.lifted if isinstance(moments, LiftedRows) else None

    def lifted(self, moments: LiftedRows, k: int, *, covariance: str = "common",
               **options: Any) -> tuple[dict, dict, dict]:
        """The d < k recovery (:func:`lifted_fit`), every component started at the common variance."""
        params, diagnostics = lifted_fit(moments.x, k)
        params["scale"] = _scale_for(params["scale"], covariance, params["loc"].shape)
        return params, {**diagnostics, "covariance": covariance}, {}

    def unwhiten(self, fit: ExchangeableFit, moments: MixtureMoments | RowMoments, k: int, floor: float,
                 covariance: str = "common", **options: Any) -> tuple[dict, dict, dict]:
        lam = fit.eigenvalues
        weights, rows = 1.0 / lam**2, fit.components * lam[:, None]
        rowdata = isinstance(moments, RowMoments)
        unit = moments.unit if rowdata else 1.0
        diagnostics = {"sigma2_bar": float(moments.sigma2) * unit**2, "covariance": covariance}
        if rowdata:
            # the appended coordinate of every mean is +c: it fixes the sign left by the odd-order decomposition
            flips = rows[:, -1] < 0
            rows = rows * np.where(flips, -1.0, 1.0)[:, None]
            diagnostics["sign_flips"] = int(flips.sum())
            diagnostics["constant_coordinate_ratio"] = rows[:, -1] / moments.c
            loc, unit = moments.shift + moments.unit * rows[:, :-1], moments.unit
            total = float(np.mean(moments.eigenvalues))
        else:
            loc, unit, total = rows, 1.0, float(moments.sigma2)
        d = loc.shape[1]
        minimum = floor**2 * max(total, np.finfo(float).tiny)
        if covariance == "common":
            variances = np.asarray(moments.sigma2)
        elif covariance == "spherical":
            variances = np.linalg.lstsq(rows.T * weights, moments.m1_variances if rowdata else moments.m1,
                                        rcond=None)[0]
            diagnostics["component_variances_raw"] = variances * unit**2
            if rowdata and moments.noise_kind == "factor":
                # the moment step assumed a noise shared by the components: start every component at its mean
                # (the Thm 3.3 solve stays in the diagnostics; refine / assign_steps separate the variances)
                variances = np.full(k, float(np.mean(moments.noise)))
        else:
            noise = moments.noise if rowdata else np.full(d, moments.sigma2)
            variances = np.broadcast_to(noise, (k, d))
        diagnostics["n_scales_floored"] = int(np.count_nonzero(variances < minimum))
        scale = unit * np.sqrt(np.maximum(variances, minimum))
        if rowdata:
            diagnostics.update(covariance_eigenvalues=moments.eigenvalues * unit**2, covariance_rank=moments.rank,
                               constant_columns=moments.n_constant, factor_iterations=moments.factor_iterations,
                               factor_converged=moments.factor_converged, factor_identified=moments.factor_identified)
        return {"weights": weights, "loc": loc, "scale": scale}, diagnostics, {}

    def complete(self, params: dict, x: ArrayLike | dask.array.Array, moments: MixtureMoments | RowMoments, *,
                 rng: np.random.Generator, covariance: str = "common", assign_steps: int = 0,
                 **options: Any) -> tuple[dict, dict]:
        if not assign_steps:
            return params, {"assign_steps": 0}
        data = RowData(np.asarray(x, dtype=np.float64), covariance, float(np.mean(np.var(x, axis=0))))
        sites = self.site_table(params)[0]
        resp, _ = self.e_step(params, data)
        for _ in range(assign_steps):
            params, resp, _ = self.em_step(data, resp, params, sites, 1e-10)
        return params, {"assign_steps": int(assign_steps)}

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, x: ArrayLike, estimate: SpectralEstimate, covariance: str | None = None,
                    **options: Any) -> RowData:
        loc = estimate.params["loc"]
        x = check_rows(x, min_rows=1)
        if loc.shape != (estimate.k, x.shape[1]):
            raise bad_argument("estimate", None, f"'loc' of shape ({estimate.k}, {x.shape[1]}) matching x",
                               f"shape {loc.shape}", describe=False)
        if covariance is not None:
            kind = Options(REFINE_COVARIANCES).check("covariance", covariance)
        elif "covariance" in estimate.params:
            kind = "full"
        else:
            kind = {0: "common", 1: "spherical"}.get(estimate.params["scale"].ndim, "diag")
        if kind == "full" and "covariance" in estimate.params:
            _check_covariance(estimate.params["covariance"], loc.shape)
        return RowData(x, kind, max(float(np.mean(np.var(x, axis=0))), np.finfo(float).tiny))

    def n_observations(self, data: RowData) -> int:
        return int(data.x.shape[0])

    def unit_offset(self, data: RowData) -> float:
        return float(data.x.size * np.log(unit_of(data.x)))

    def component_log_prob(self, params: Mapping[str, Any], data: RowData) -> np.ndarray:
        # NumPy (float64 products): EM's E-step on rows is a few matrix products, cheaper than a JAX dispatch
        if data.covariance == "full":
            return _full_log_prob(data.x, params["loc"], params["covariance"], REPAIR_FLOOR * data.variance)
        scale = np.asarray(params["scale"], dtype=np.float64)
        return gaussian_components_host(data.x, params["loc"], scale[:, None] if scale.ndim == 1 else scale,
                                        x_squared=data.x_squared)

    def e_step(self, params: Mapping[str, np.ndarray], data: RowData) -> tuple[np.ndarray, float]:
        # with the [fast] extra: one pass, no (k, N) temporaries (full covariances: NumPy only)
        compiled = numba_kernel("gaussian_e_step") if data.covariance != "full" else None
        if compiled is None:
            return super().e_step(params, data)
        loc, scale = params["loc"], np.asarray(params["scale"], dtype=np.float64)
        return compiled(data.x, params["weights"], loc, np.broadcast_to(scale[:, None] if scale.ndim == 1 else scale,
                                                                        np.shape(loc)))

    def em_step(self, data: RowData, resp: np.ndarray, params: Mapping[str, np.ndarray], sites: Mapping[str, Site],
                floor: float, reg: float = 1e-6, **options: Any) -> tuple[dict, np.ndarray, float]:
        # with the [fast] extra: M-step, projection and E-step fused (full covariances: NumPy only)
        compiled = numba_kernel("gaussian_em_step") if data.covariance != "full" else None
        if compiled is None:
            return super().em_step(data, resp, params, sites, floor, reg=reg, **options)
        weights, loc, scale, finite, resp, log_likelihood = compiled(data.x, resp, data.covariance, reg,
                                                                     data.variance, floor)
        params = {"weights": weights, "loc": loc,
                  "scale": {"common": np.asarray(scale[0, 0]), "spherical": scale[:, 0]}.get(data.covariance, scale)}
        if not finite:
            project(params, sites, floor)  # names the site with non-finite entries
        return params, resp, log_likelihood

    def m_step(self, data: RowData, resp: np.ndarray, params: Mapping[str, np.ndarray], reg: float = 1e-6,
               **options: Any) -> dict:
        x = data.x
        nk = resp.sum(axis=0) + 10 * np.finfo(float).eps
        loc = (resp.T @ x) / nk[:, None]
        if data.covariance == "full":  # scikit-learn's GaussianMixture(covariance_type="full"), reg relative
            covariance = np.empty((nk.size, x.shape[1], x.shape[1]))
            for i, centred in enumerate(x - row for row in loc):
                covariance[i] = (resp[:, i, None] * centred).T @ centred / nk[i]
            covariance = 0.5 * (covariance + covariance.transpose(0, 2, 1))  # exactly symmetric
            covariance[:, np.arange(x.shape[1]), np.arange(x.shape[1])] += reg * data.variance
            return {"weights": nk, "loc": loc, "scale": np.sqrt(np.diagonal(covariance, axis1=1, axis2=2)),
                    "covariance": covariance}
        var = np.maximum((resp.T @ data.x_squared) / nk[:, None] - loc**2, 0.0)
        if data.covariance == "spherical":
            var = var.sum(axis=1) / var.shape[1]  # the mean (np.mean's own arithmetic, without its overhead)
        elif data.covariance == "common":
            var = np.asarray(float((nk @ var.mean(axis=1)) / nk.sum()))
        return {"weights": nk, "loc": loc, "scale": np.sqrt(var + reg * data.variance)}

    def split_merge(self, params: Mapping[str, np.ndarray], data: RowData, resp: np.ndarray, rng: np.random.Generator,
                    attempt: int = 0) -> dict | None:
        # merge: the component whose removal costs the least log-likelihood leaves; split: the attempt-th
        # heaviest other component, its mean moved one standard deviation either way along its principal axis
        pair = split_merge_pair(self, params, data, attempt)
        if pair is None:
            return None
        leaving, split = pair
        weights = np.asarray(params["weights"], dtype=np.float64)
        x, loc = data.x, np.asarray(params["loc"], dtype=np.float64)
        centred = x - loc[split]
        unit = unit_of(centred)  # the power iteration in that unit: no square overflows or underflows
        centred /= unit
        share = component_share(resp, split)
        if x.shape[1] <= DENSE_AXIS_MAX:  # the component's weighted covariance, and its top eigenvector
            values, vectors = np.linalg.eigh((centred * share[:, None]).T @ centred)
            if not values[-1] > 0:
                return None
            axis = vectors[:, -1]
        else:
            axis = rng.standard_normal(x.shape[1])
            for _ in range(30):  # power iteration on that covariance, matrix-free
                axis = centred.T @ (share * (centred @ axis))
                norm = np.linalg.norm(axis)
                if not norm > 0:
                    return None
                axis /= norm
        offset = unit * np.sqrt(float(share @ (centred @ axis) ** 2)) * axis
        moved = {name: np.array(value, dtype=np.float64) for name, value in params.items()}
        moved["loc"][leaving], moved["loc"][split] = loc[split] + offset, loc[split] - offset
        moved["weights"][[leaving, split]] = weights[split] / 2
        for name in ("scale", "covariance"):  # per-component spreads: the split's for both halves
            if name in moved and moved[name].ndim:
                moved[name][leaving] = moved[name][split]
        return moved

    def largest_candidate(self, data: ArrayLike | dask.array.Array, report: dict, limit: int, k_max: int) -> int:
        # every direction of the data carries signal: the spectrum bounds nothing, the lifted fits (k > d) compete
        if not is_dask_array(data) and report["k_auto/signal"] >= limit and np.shape(data)[1] < k_max:
            return k_max
        return super().largest_candidate(data, report, limit, k_max)

    def refine(self, data: ArrayLike, estimate: SpectralEstimate | Mapping[str, ArrayLike], *,
               method: str | None = None, covariance: str | None = None, **options: Any) -> RefineResult:
        from specinit.refine import check_estimate

        estimate = check_estimate(self, estimate)
        kind = self.refine_data(data, estimate, covariance).covariance
        params = dict(estimate.params)
        params["scale"] = _scale_for(params["scale"], kind, params["loc"].shape)
        if kind == "full":
            params.setdefault("covariance", _covariances(params))
        else:
            params.pop("covariance", None)
        estimate = self.estimate(estimate.k, params, estimate.diagnostics, vocabulary=estimate.vocabulary)
        return super().refine(data, estimate, method=method, covariance=kind, **options)

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralGaussianMixture`."""
        return Face(
            class_name="SpectralGaussianMixture", mixins=("cluster", "density"),
            summary="A Gaussian mixture started from the method-of-moments estimate, then EM "
                    "(:mod:`specinit.models.gmm`).",
            parameters={
                "n_components": Param("int or 'auto'", "Number of components (more than the number of features: "
                                      "the lifted moments of :func:`specinit.models.gmm.lifted_fit`); ``\"auto\"``: "
                                      "chosen by ``gmm.spectral(X, \"auto\")`` "
                                      "(:meth:`specinit.family.Family.choose_k`).", 1),
                "covariance_type": Param("{'spherical', 'diag', 'common'}", "One variance per component, per "
                                         "component and coordinate, or one for all.", "spherical"),
                "max_iter": Param("int", "EM iterations after the spectral estimate; 0: the spectral estimate "
                                  "alone.", 500),
                "tol": Param("float, optional", "EM stops when the mean log-likelihood gain is below ``tol`` "
                             "(scikit-learn's rule). Default None: the relative rule of "
                             ":func:`specinit.models.gmm.refine` (with its split-merge moves), so the face's fit is "
                             "``gmm.refine(X, gmm.spectral(X, k, covariance=covariance_type))``.", None),
                "reg_covar": Param("float", "Added to every variance, relative to the data's mean variance.", 1e-6),
                "random_state": RANDOM_STATE,
            },
            spectral={"n_components": "k", "covariance_type": "covariance"},
            data="rows",
            constraints={"covariance_type": [Options(("spherical", "diag", "common"))],
                         "tol": [Interval(float, 0.0), None], "reg_covar": [Interval(float, 0.0)]},
            refine_arguments={"reg": "reg_covar", "tol": "tol", "max_iter": "max_iter"},
            refine=_refine_warned,
            attributes={
                "weights_": ("ndarray, shape (n_components,)",
                             lambda estimator, estimate, X: estimate.params["weights"]),
                "means_": ("ndarray, shape (n_components, n_features)",
                           lambda estimator, estimate, X: estimate.params["loc"]),
                "covariances_": ("ndarray\n    Variances: (n_components,) spherical, (n_components, n_features) "
                                 "diag, () common.", lambda estimator, estimate, X: estimate.params["scale"] ** 2),
                "converged_": ("bool\n    Whether EM met its stopping rule (True without EM: ``max_iter=0``, "
                               ":meth:`partial_fit`).",
                               lambda estimator, estimate, X: bool(estimate.diagnostics.get("refine/converged",
                                                                                            True))),
                "n_iter_": ("int\n    EM steps (0 without EM).",
                            lambda estimator, estimate, X: int(estimate.diagnostics.get("refine/n_iter", 0))),
                "lower_bound_": ("float\n    Final mean log-likelihood per sample.",
                                 lambda estimator, estimate, X: estimator.score(X)),
                "labels_": ("ndarray, shape (n_samples,)\n    Most probable component of every training row.",
                            predicted),
            },
            score=mean_log_likelihood,
            predict_proba=responsibilities,
            answers=frozenset({"score_samples", "bic", "partial_fit"}),
        )


def _scale_for(scale, covariance: str, shape: tuple) -> np.ndarray:
    """A ``scale`` start of the shape ``covariance`` needs (root mean variances when it has more entries; per
    coordinate for ``"diag"`` and ``"full"``)."""
    scale = np.asarray(scale, dtype=np.float64)
    var = np.broadcast_to((scale[:, None] if scale.ndim == 1 else scale) ** 2, shape)
    if covariance == "common":
        return np.sqrt(np.mean(var))
    if covariance == "spherical":
        return np.sqrt(var.mean(axis=1))
    return np.sqrt(var)


def _covariances(params) -> np.ndarray:
    """The (k, d, d) covariances of an estimate's params: its ``covariance``, else the diagonal matrices of its
    ``scale`` (scalar, (k,) or (k, d))."""
    if "covariance" in params:
        return np.asarray(params["covariance"], dtype=np.float64)
    scale = _scale_for(params["scale"], "diag", np.shape(params["loc"]))
    return np.eye(scale.shape[1]) * scale[:, None, :] ** 2


def _check_covariance(covariance, shape: tuple) -> None:
    """Raise unless ``covariance`` holds symmetric positive definite matrices, one per row of ``loc`` (``shape``)."""
    k, d = shape
    covariance = np.asarray(covariance, dtype=np.float64)
    if covariance.shape != (k, d, d):
        raise bad_argument("estimate", None, f"'covariance' of shape ({k}, {d}, {d}) matching 'loc'",
                           f"shape {covariance.shape}", describe=False)
    asymmetry = np.abs(covariance - covariance.transpose(0, 2, 1)).max(axis=(1, 2))
    smallest = np.linalg.eigvalsh(covariance)[:, 0]
    bad = np.flatnonzero((asymmetry > 1e-8 * np.abs(covariance).max(axis=(1, 2))) | ~(smallest > 0))
    if bad.size:
        raise bad_argument("estimate", None, "'covariance' of symmetric positive definite matrices",
                           f"components {bad.tolist()} that are not", describe=False)


def _cholesky(covariance: np.ndarray, minimum: float) -> np.ndarray:
    """Lower Cholesky factors of the (symmetrized) covariances.

    A batch with a matrix that is not positive definite -- only EM's perturbed restarts and SQUAREM
    extrapolations meet one -- is read with every eigenvalue replaced by its magnitude, floored at ``minimum``
    and at ``1e-8`` times the matrix's largest one (so the factorization cannot fail on round-off).
    """
    covariance = np.asarray(covariance, dtype=np.float64)
    covariance = 0.5 * (covariance + covariance.transpose(0, 2, 1))
    try:
        return np.linalg.cholesky(covariance)
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(covariance)
        values = np.abs(values)
        values = np.maximum(values, np.maximum(minimum, 1e-8 * values.max(axis=1, keepdims=True)))
        repaired = (vectors * values[:, None, :]) @ vectors.transpose(0, 2, 1)
        return np.linalg.cholesky(0.5 * (repaired + repaired.transpose(0, 2, 1)))


def _full_log_prob(x: np.ndarray, loc, covariance, minimum: float) -> np.ndarray:
    """``log N(x_n; loc_i, covariance_i)`` for every row and component, (N, k) float64, through the Cholesky factors
    ``L_i`` (:func:`_cholesky`): ``-1/2 ||L_i^-1 (x_n - loc_i)||^2 - sum log diag L_i - d/2 log 2 pi``."""
    from scipy.linalg import solve_triangular

    tril = _cholesky(covariance, minimum)
    loc = np.asarray(loc, dtype=np.float64)
    k, d = loc.shape
    out = np.empty((k, x.shape[0]))  # formed as (k, N), returned transposed, as gaussian_components_host does
    for i in range(k):
        whitened = solve_triangular(tril[i], (x - loc[i]).T, lower=True, check_finite=False)
        out[i] = np.einsum("jn,jn->n", whitened, whitened)
    out *= -0.5
    out -= (np.log(np.diagonal(tril, axis1=1, axis2=2)).sum(axis=1) + 0.5 * d * np.log(2.0 * np.pi))[:, None]
    return out.T


def _coordinate_scales(params) -> np.ndarray:
    """Per-component standard deviations of every coordinate, (k, d): the roots of the covariances' diagonals."""
    return np.sqrt(np.diagonal(_covariances(params), axis1=1, axis2=2))


def _covariance_cholesky(params) -> np.ndarray:
    """Lower Cholesky factors of the covariances, (k, d, d), positive diagonals."""
    return np.linalg.cholesky(_covariances(params))


def _correlation_cholesky(params) -> np.ndarray:
    """Lower Cholesky factors of the correlation matrices, (k, d, d): the covariances' factors with every row
    scaled to unit norm (row j of ``L`` has norm ``sqrt(covariance_jj)``)."""
    tril = _covariance_cholesky(params)
    return tril / np.linalg.norm(tril, axis=2, keepdims=True)


#: The largest k of the lifted fit (``d < k``): it reads moments up to order 2 k of the standardized data.
LIFTED_MAX_K = 10


def _hermite_basis(order: int) -> list:
    """``s^(j/2) He_j(t / sqrt(s))`` for j = 0..order, each as ``{n: (c, q)}``: the term ``c s^q t^n``."""
    basis = []
    for j in range(order + 1):
        coefficients = np.polynomial.hermite_e.herme2poly(np.eye(j + 1)[j])
        basis.append({n: (float(c), (j - n) // 2) for n, c in enumerate(coefficients) if c})
    return basis


def _denoised(raw: np.ndarray, s: float, basis: list) -> np.ndarray:
    """The lifted features ``s^(j/2) He_j(t / sqrt(s))`` from powers ``t^n`` (last axis), or their means from raw
    moments: ``sum_i w_i a_i^j`` for a Gaussian mixture with variance ``s`` along ``t`` and means ``a_i``."""
    return np.array([sum(c * s**q * raw[..., n] for n, (c, q) in terms.items()) for terms in basis]).T


def _hankel(m: np.ndarray, size: int) -> np.ndarray:
    return np.array([[m[a + b] for b in range(size)] for a in range(size)])


def lifted_fit(x: np.ndarray, k: int) -> tuple[dict, dict]:
    """Means, weights and a common variance of a k-component Gaussian mixture with ``d < k``, by moments.

    The data are centred and projected on their principal axis ``u`` (scaled to unit variance), ``t =
    u^T x``. With a common variance ``s`` along ``u``, the Hermite-corrected moments of the lifted features
    ``[1, t, t^2, ...]``, ``m_j(s) = E[s^(j/2) He_j(t / sqrt(s))] = sum_i w_i a_i^j``, are the moments of the
    means ``a_i = u^T mu_i``, so the ``(k + 1) x (k + 1)`` Hankel matrix ``[m_(a+b)(s)]`` is positive
    semi-definite of rank k exactly at the variance: ``s`` is the smallest root of its smallest eigenvalue
    (Lindsay 1989), its null vector holds the coefficients of the polynomial whose roots are the ``a_i``
    (Prony), and the Vandermonde system ``sum_i w_i a_i^j = m_j`` gives the weights. The other coordinates:
    ``E[(I - u u^T) x m_j-feature] = sum_i w_i (I - u u^T) mu_i a_i^j`` for ``j < k``, a linear solve. Exact for
    population moments when the ``a_i`` are distinct.

    Parameters
    ----------
    x : ndarray, shape (N, d)
        Validated rows.
    k : int
        Number of components (at most :data:`LIFTED_MAX_K`).

    Returns
    -------
    params : dict
        ``weights`` (k,), ``loc`` (k, d), ``scale`` (the common standard deviation).
    diagnostics : dict
        ``lifted`` (True), ``lifted_axis``, ``lifted_variance``, ``lifted_imaginary`` (largest imaginary part of
        a root, relative; 0 for exact moments).

    Raises
    ------
    ValueError
        When the projected moments do not identify k distinct means.

    References
    ----------
    .. [2] Lindsay, "Moment matrices: applications in mixtures", Annals of Statistics 17 (1989), Sec. 2-3 (the
       Hankel moment matrix of a normal mixture with a common variance, singular at that variance).
    """
    mean = x.mean(axis=0)
    centred = x - mean
    axis = np.linalg.svd(centred, full_matrices=False)[2][0] if x.shape[1] > 1 else np.ones(1)
    projection = centred @ axis
    unit = float(np.sqrt(np.mean(projection**2)))
    if not unit > 0:
        raise bad_argument("x", None, f"rows that vary (k={k} components need distinct means)", x)
    t, rest = projection / unit, (centred - np.outer(projection, axis)) / unit
    order = 2 * k
    powers = t[:, None] ** np.arange(order + 1)
    raw = powers.mean(axis=0)
    basis = _hermite_basis(order)

    def smallest(s):
        hankel = _hankel(_denoised(raw, s, basis), k + 1)
        scale = np.sqrt(np.maximum(np.abs(np.diag(hankel)), np.finfo(float).tiny))
        values, vectors = np.linalg.eigh(hankel / np.outer(scale, scale))
        return values[0], vectors[:, 0] / scale

    grid = np.linspace(0.0, 1.0, 201)
    signs = np.array([smallest(s)[0] for s in grid])
    crossing = int(np.argmax(signs <= 0))
    low, high = grid[max(crossing - 1, 0)], grid[crossing]
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if smallest(middle)[0] > 0 else (low, middle)
    s = 0.5 * (low + high)
    polynomial = smallest(s)[1]
    if not s < 1.0 - 1e-6 or abs(polynomial[-1]) < 1e-12 * np.abs(polynomial).max():
        raise ValueError(f"{current_entry()}: the moments of x along its principal axis do not identify k={k} "
                         "distinct means (d < k: the one-dimensional method of moments was used); try a smaller k.")
    roots = np.roots(polynomial[::-1])
    imaginary = float(np.max(np.abs(roots.imag)) / max(np.max(np.abs(roots)), np.finfo(float).tiny))
    a = np.sort(roots.real)
    m = _denoised(raw, s, basis)
    vandermonde = np.vander(a, k, increasing=True).T  # [j, i] = a_i^j
    weights = np.linalg.lstsq(vandermonde, m[:k], rcond=None)[0]
    weights = np.maximum(weights, 1e-3 / k)
    weights /= weights.sum()
    cross = rest.T @ _denoised(powers, s, basis[:k]) / t.size  # (d, k): sum_i w_i (P mu_i) a_i^j
    others = np.linalg.lstsq((weights[:, None] * vandermonde.T).T, cross.T, rcond=None)[0]  # (k, d)
    loc = mean + unit * (a[:, None] * axis + others)
    return ({"weights": weights, "loc": loc, "scale": np.asarray(unit * np.sqrt(s))},
            {"lifted": True, "lifted_axis": axis, "lifted_variance": float(unit**2 * s), "lifted_imaginary": imaginary})


FAMILY = GaussianMixture()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "x": Param("array, shape (N, d), optional", "Observations; ``None`` generates ``n`` observations of dimension "
               "``dim``.", None),
    "k": Param("int", "Number of components."),
    "n": Param("int, optional", "Needed only when ``x`` is None.", None),
    "dim": Param("int, optional", "Needed only when ``x`` is None.", None),
    "common_scale": Param("bool", "One standard deviation for all components (``scale`` scalar) or one per component "
                          "(``scale`` of shape (k,)); used when ``covariance`` is None.", True),
    "covariance": Param('{"common", "spherical", "diag"}, optional', "``scale`` scalar, (k,) or (k, d) (diagonal "
                        "covariances); overrides ``common_scale``.", None, annotation=str | None),
}


@face(MODEL_ARGUMENTS)
def model(x, *, k, n, dim, common_scale, covariance) -> None:
    """NumPyro spherical Gaussian mixture with the component summed out.

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
    covariance = _resolve_covariance(common_scale, covariance)
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


@FAMILY.face(
    validate=True,
    loc=Param("array, shape (k, d), or dict / SpectralEstimate", "Component means (linearly independent for "
              "identifiability), or all three sites by name."),
    weights=Param("array, shape (k,)", "Mixing weights, positive.", None),
    scale=Param("float or array of shape (k,)", "Common or per-component standard deviation, positive.", None))
def population_moments(loc, weights, scale) -> MixtureMoments:
    """Exact corrected moments of the mixture ([1]_ Thm 3.2/3.3).

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
    return FAMILY.population_moments(site_values(loc, "loc", weights=weights, scale=scale))


@FAMILY.face()
def spectral_from_moments(moments, k, *, common_scale, covariance, method, seed, decompose_options,
                          floor) -> SpectralEstimate:
    """Weights, locations and scales from corrected moments ([1]_ Thm 3.2/3.3).

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
    return FAMILY.spectral_from_moments(moments, k, method=method, seed=seed, floor=floor,
                                        decompose_options=decompose_options,
                                        covariance=_resolve_covariance(common_scale, covariance))


@FAMILY.face()
def spectral(x, k, *, common_scale, covariance, method, seed, assign_steps, decompose_options, backend, noise,
             floor) -> SpectralEstimate:
    """Method-of-moments estimate of a Gaussian mixture (spherical or diagonal covariances).

    The data are centred and a constant coordinate is appended (see the
    module notes), so centred or standardized data work as they are and any
    ``k <= rank(Cov(x))`` with affinely independent means can be fitted; the
    corrected second moment is then positive definite on its top k
    eigenvectors for every data set (no refusal on real data).

    Returns
    -------
    SpectralEstimate
        ``"gmm"`` with ``weights`` (k,), ``loc`` (k, d), ``scale`` (scalar,
        (k,) or (k, d) by ``covariance``); diagnostics include ``sigma2_bar``,
        ``covariance_eigenvalues``, ``covariance_rank``, ``constant_columns``,
        ``assign_steps``, ``factor_identified`` (False: k - 1 factors and a
        per-coordinate noise are not identified by a covariance of rank r
        with ``(r - k + 1)^2 < r + k - 1``, e.g. d = 4 and k = 3; the noise is
        then ``sigma2_bar`` capped at each coordinate's variance, with no
        factor iterations), and for per-coordinate noise ``factor_iterations``
        and ``factor_converged`` (False: the principal-axis iterations for the
        noise stopped at their cap of 50 before their tolerance, so the noise
        correction is approximate; :func:`refine` does not depend on it).

    Raises
    ------
    ValueError
        Covariance rank < k <= d, ``d < k`` with k > 10 or moments that do not identify k distinct means, NaN or
        infinite values (the rows are named), fewer than 2 observations, unknown ``covariance``.
    TypeError
        Non-numeric ``x``.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Thm 3.2, Thm 3.3.
    """
    return FAMILY.spectral(x, k, method=method, seed=seed, floor=floor, decompose_options=decompose_options,
                           backend=backend, covariance=_resolve_covariance(common_scale, covariance), noise=noise,
                           assign_steps=assign_steps)


@FAMILY.refine_face(
    estimate=Param("SpectralEstimate or dict", "Starting ``weights``, ``loc`` and ``scale`` (scalar, (k,) or (k, d)), "
                   "and for full covariances ``covariance`` (k, d, d), symmetric positive definite."),
    covariance=Param("{'common', 'spherical', 'diag', 'full'}, optional", "The kind the M-step estimates. "
                     "``\"full\"``: one full covariance matrix per component, the param ``covariance`` (k, d, d) "
                     "(scikit-learn's ``GaussianMixture(covariance_type=\"full\")``, ``reg`` times the data's mean "
                     "variance added to its diagonal), ``scale`` (k, d) the roots of its diagonal (for code that "
                     "reads per-coordinate scales); the E-step reads Cholesky factors in float64, and every step "
                     "runs in NumPy (the compiled step of the other kinds, extra ``[fast]``, has no full kind). A "
                     "start without ``covariance`` (every moment estimate) starts from the diagonal matrices of its "
                     "``scale``. Default: ``\"full\"`` when the estimate has a ``covariance``, else read off the "
                     "shape of ``scale`` (scalar -> ``\"common\"``, (k,) -> ``\"spherical\"``, (k, d) -> "
                     "``\"diag\"``).", None),
    max_iter=500, tol=None, rtol=1e-6, split_merge=2)
def refine(x, estimate, *, covariance, method, max_iter, tol, rtol, reg, floor, restarts, split_merge, restart_iter,
           seed, accelerate) -> RefineResult:
    """Spectral then refine: EM for the Gaussian mixture started from an estimate.

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (a :class:`SpectralEstimate` of model ``"gmm"`` with the
        refined sites, for warm starts; with ``covariance="full"`` it also
        has ``covariance`` (k, d, d), whose sites :func:`lkj_sites` and
        :func:`scale_tril_sites` map onto a NumPyro model with full
        covariances), ``.log_likelihood`` trace (total), ``.n_iter``,
        ``.converged``, ``.mean_log_likelihood``.

    Raises
    ------
    ValueError
        Bad ``x`` (as for :func:`spectral`), an estimate of another model,
        parameters that do not match ``x`` or lie outside their supports
        (a ``covariance`` that is not symmetric positive definite), an
        unknown ``covariance``, non-positive ``tol`` or ``reg``, ``rtol``
        outside ``(0, 1)``, ``restart_iter < 1``, negative ``restarts`` or
        ``split_merge``.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [2] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
       the EM algorithm", JRSS B 39 (1977).
    """

    return FAMILY.refine(x, estimate, method=method, covariance=covariance, max_iter=max_iter, tol=tol, rtol=rtol,
                         reg=reg, restarts=restarts, split_merge=split_merge, restart_iter=restart_iter, seed=seed,
                         floor=floor, accelerate=accelerate)


@FAMILY.face(
    x=Param("array, shape (n, d)", "The new rows (finite)."),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of components, at most the rank of the rows' covariance: required for the "
            "first batch; with ``estimate`` None means ``estimate.k`` (the stored sums fit any k).", None,
            Interval(int, 1, none=True)))
def update(x, estimate, *, k, common_scale, covariance, noise, method, seed, decompose_options,
           floor) -> SpectralEstimate:
    """Add a batch of rows to a Gaussian-mixture fit: exact merged moments, then the moment estimate.

    The moments of :func:`spectral` are functions of the count of rows, their
    column ranges and the sums of their first three powers
    (:class:`~specinit.engine.rows.RowSums`), which add up over batches
    exactly: after any number of batches the estimate is that of
    :func:`spectral` on all the rows at once (the same moments to rounding,
    the same decomposition and seed), whatever the batch sizes. The sums do
    not depend on ``k``, ``covariance`` or ``noise``, so a later batch may
    ask for others. Components keep their labels from batch to batch (the new
    means are matched to the previous ones). Memory: a few (d, d, d) float
    arrays. There is no EM step (EM needs all the rows at once):
    :func:`refine` on data at hand takes the estimate further. The returned estimate keeps the sums in
    its ``state`` (``moments/...``), which
    :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates go on
    in a later process. The online face of
    ``SpectralGaussianMixture.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"gmm"`` as from :func:`spectral` (without ``assign_steps``), plus
        ``n_batches`` and ``n_observations`` in the diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch or above the covariance's rank, an
        estimate without stored sums (from :func:`spectral`: fit the first
        batch with :func:`update`), a batch with another number of columns,
        rows that are not finite.
    MemoryError
        The (d, d, d) sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = np.concatenate([rng.normal(-2.0, 1.0, (300, 4)), rng.normal(2.0, 1.0, (300, 4))])[rng.permutation(600)]
    >>> est = update(x[:300], k=2, covariance="spherical")
    >>> est = update(x[300:], est, covariance="spherical")
    >>> once = spectral(x, 2, covariance="spherical")  # the same components, in the first batch's order
    >>> from specinit.align import match_components
    >>> same = once.params["loc"][match_components(est.params["loc"], once.params["loc"])]
    >>> bool(abs(est.params["loc"] - same).max() < 1e-8), est.diagnostics["n_batches"]
    (True, 2)
    """
    stored, k, n_batches = FAMILY.stream(estimate, k, FAMILY.summary, "gmm.update")
    options = check_arguments(FAMILY.options, {"covariance": _resolve_covariance(common_scale, covariance),
                                               "noise": noise})
    batch = RowSums.from_rows(x, "x", frame=stored)
    merged = batch if stored is None else stored + batch
    fit = FAMILY.spectral_from_moments(RowMoments(merged, k, options["covariance"], options["noise"]), k,
                                       method=method, seed=seed, floor=floor, decompose_options=decompose_options,
                                       covariance=options["covariance"])
    return FAMILY.streamed(fit, estimate, merged, n_batches, n_observations=merged.n)


predict = FAMILY.predict_face("x", "Posterior component probabilities of every row and the most probable "
                              "component.")


log_likelihood = FAMILY.log_likelihood_face("x", "Log-likelihood of every row, its component summed out.")


def _site_mapping(func: str, sources: dict) -> dict:
    """``{model site: source}`` from ``{(argument, site name or None): source}``, names checked, None left out."""
    for (argument, site), _ in sources.items():
        if site is not None and not isinstance(site, str):
            raise bad_argument(argument, func, "a model site name (str) or None", site, kind=TypeError)
    return {site: source for (_, site), source in sources.items() if site is not None}


def lkj_sites(loc: str | None = "locs", scale: str | None = "scales", corr: str | None = "corr",
              weights: str | None = "weights") -> dict:
    """The ``sites=`` mapping of a Gaussian mixture written with per-coordinate scales and LKJ correlations.

    For a NumPyro model whose component ``i`` is ``MultivariateNormal(locs[i],
    scale_tril=scales[i, :, None] * corr[i])`` with ``corr ~ LKJCholesky(d, eta)``
    in the plate of the components, as :mod:`specinit.warmstart` takes it (``init_params``,
    ``init_strategy``, ``condition``, ``laplace``). A full-covariance estimate
    (:func:`refine` with ``covariance="full"``) gives the covariance
    ``C_i = L_i L_i^T``; an estimate without ``covariance`` gives its diagonal
    matrices (identity correlations). A name None leaves that site out of the
    mapping (a model without it).

    Parameters
    ----------
    loc : str or None
        The site of the component means, (k, d): the estimate's ``loc``.
    scale : str or None
        The site of the per-component standard deviations of every
        coordinate, (k, d): ``sqrt(diag(C_i))``.
    corr : str or None
        The site of the Cholesky factors of the correlation matrices,
        (k, d, d): the factor ``L_i`` of ``C_i`` with every row scaled to unit
        norm (lower triangular, positive diagonal: the support of
        ``LKJCholesky``), so that ``scale[i, :, None] * corr[i]`` is ``L_i``.
    weights : str or None
        The site of the mixing weights, (k,): the estimate's ``weights``.

    Returns
    -------
    dict of str -> str or callable
        For the ``sites`` argument of :mod:`specinit.warmstart`'s functions.

    Raises
    ------
    TypeError
        A name that is neither a str nor None.

    Examples
    --------
    >>> import numpy as np
    >>> est = {"weights": np.array([0.4, 0.6]), "loc": np.zeros((2, 2)), "scale": np.array([[2.0, 1.0], [1.0, 3.0]]),
    ...        "covariance": np.array([[[4.0, 1.0], [1.0, 1.0]], [[1.0, 0.0], [0.0, 9.0]]])}
    >>> sites = lkj_sites()
    >>> sorted(sites), sites["scales"](est)[0], sites["corr"](est)[0, 1].round(3)
    (['corr', 'locs', 'scales', 'weights'], array([2., 1.]), array([0.5  , 0.866]))
    """
    return _site_mapping("gmm.lkj_sites", {("weights", weights): "weights", ("loc", loc): "loc",
                                          ("scale", scale): _coordinate_scales, ("corr", corr): _correlation_cholesky})


def scale_tril_sites(loc: str | None = "locs", scale_tril: str | None = "scale_tril",
                     weights: str | None = "weights") -> dict:
    """The ``sites=`` mapping of a Gaussian mixture written with the Cholesky factor of each covariance.

    For a NumPyro model whose component ``i`` is ``MultivariateNormal(locs[i],
    scale_tril=scale_tril[i])`` with ``scale_tril`` a site of support
    ``constraints.lower_cholesky`` (NumPyro's ``LowerCholeskyTransform`` or
    ``ScaledUnitLowerCholeskyTransform`` parametrizations), as
    :mod:`specinit.warmstart` takes it. An estimate without ``covariance``
    gives the factors of its diagonal matrices. A name None leaves that site
    out of the mapping (a model without it).

    Parameters
    ----------
    loc : str or None
        The site of the component means, (k, d): the estimate's ``loc``.
    scale_tril : str or None
        The site of the lower Cholesky factors ``L_i`` of the covariances
        ``C_i = L_i L_i^T``, (k, d, d), positive diagonals.
    weights : str or None
        The site of the mixing weights, (k,): the estimate's ``weights``.

    Returns
    -------
    dict of str -> str or callable
        For the ``sites`` argument of :mod:`specinit.warmstart`'s functions.

    Raises
    ------
    TypeError
        A name that is neither a str nor None.
    """
    return _site_mapping("gmm.scale_tril_sites", {("weights", weights): "weights", ("loc", loc): "loc",
                                                 ("scale_tril", scale_tril): _covariance_cholesky})


@FAMILY.face(
    validate=True,
    x=Param("array, shape (N, d)", "Observations, ``d >= 3 k``."),
    k=Param("int", "Number of components.", constraint=Interval(int, 1)),
    seed=COMMON_OPTIONS["seed"].documented("Randomness of the partition, the range finders and the decomposition."),
    floor=COMMON_OPTIONS["floor"].documented("Scales are floored at ``floor`` times the data's root mean variance."))
def spectral_axis_aligned(x, k, *, method, seed, decompose_options, floor) -> SpectralEstimate:
    """Mixture of axis-aligned Gaussians via a random 3-way partition of coordinates.

    The coordinates are randomly permuted and split into three groups of
    nearly equal size (each with at least ``k`` coordinates); given the
    component the groups are independent, hence three views ([1]_ Prop. 3.2,
    which needs the mean matrix to be incoherent). Means come from
    :func:`specinit.engine.views.fit_multiview`; per-coordinate variances from
    the conditional means of the squared coordinates ``E[x_j^2 | h]``
    estimated against another group, minus ``loc^2``
    (:func:`specinit.engine.views.conditional_variances`). The fit runs on
    ``x`` divided by its largest magnitude, and ``loc``, ``scale`` and the
    variances are scaled back: the estimate does not depend on the data's
    unit (data times 1e-150 or 1e150 give the same estimate times that).

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
    x = check_rows(x, min_columns=3 * k, columns="3 k")
    unit = unit_of(x)  # the fit runs on x / unit (no square or cube over- or underflows); loc and scale come back
    x = x / unit
    rng = as_generator(seed)
    groups = np.array_split(rng.permutation(x.shape[1]), 3)
    views = [x[:, g] for g in groups]
    fit = fit_multiview(views, k, method=method, seed=rng, decompose_options=decompose_options)
    loc = np.empty((k, x.shape[1]))
    variances = np.empty((k, x.shape[1]))
    partition = np.empty(x.shape[1], dtype=np.int64)
    conditional = conditional_variances(with_squares(views, range(3)), fit, range(3))
    for j, g in enumerate(groups):
        loc[:, g] = fit.means[j]
        variances[:, g] = conditional[j]
        partition[g] = j
    minimum = floor**2 * max(float(np.mean(np.var(x, axis=0))), np.finfo(float).tiny)
    scale = np.sqrt(np.maximum(variances.mean(axis=1), minimum))
    params, repairs = project({"weights": fit.weights, "loc": loc, "scale": scale}, FAMILY.site_table()[0], floor)
    params["loc"], params["scale"] = unit * params["loc"], unit * params["scale"]
    singular = {key: unit**2 * value for key, value in fit.diagnostics.items() if key.startswith("pair_singular")}
    diagnostics = {"partition": partition, "coordinate_variances": unit**2 * variances, **fit.diagnostics,
                   **singular, **repairs}
    return FAMILY.estimate(k, params, diagnostics)


def _refine_warned(estimator, faces, X, estimate):
    """:class:`~specinit.estimators.SpectralGaussianMixture`'s refinement: :func:`refine` with the face's
    ``max_iter``, ``tol`` and ``reg_covar``, its warnings pointing at the caller of ``fit``."""
    if not estimator.max_iter:
        return estimate
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        result = refine(X, estimate, max_iter=estimator.max_iter, tol=estimator.tol, reg=estimator.reg_covar)
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=3)
    return result.estimate
