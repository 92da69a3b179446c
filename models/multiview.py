"""Multi-view (naive Bayes) mixtures: NumPyro program and spectral estimate.

A hidden class ``h ~ Categorical(weights)`` and ``l >= 3`` views that are
conditionally independent given ``h``; each view is either

* ``"categorical"``: one symbol per observation, given as integer codes
  ``0 <= x_v < V_v`` (shape (N,)), ``x_v | h = i ~ Categorical(beta_v[i])``;
  sites ``beta_<v>`` (k, V_v);
* ``"gaussian"``: a real vector (shape (N, d_v)) with diagonal covariance,
  ``x_v | h = i ~ Normal(loc_v[i], diag(scale_v[i]^2))``; sites
  ``loc_<v>`` and ``scale_<v>`` (k, d_v).

The class is summed out (log-sum-exp over ``h`` of ``log w_h + sum_v log
p(x_v | h)``); the observed site ``views`` (all views stacked column-wise,
see :func:`stack_views`) lives in the plate ``data`` with one log-likelihood
per observation. With ``views=None`` the model generates data: sites ``h``
and ``x_<v>`` in the plate ``data``.

The spectral estimate uses :func:`specinit.engine.views.fit_multiview`
(symmetrization in projected coordinates, [1]_ Sec. 3.3, [2]_ Prop. 1) on
one-hot categorical views and raw Gaussian views, since ``E[x_v | h]`` is
``beta_v[h]`` (one-hot) or ``loc_v[h]``.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Sec. 3.3, Thm 3.6.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu, Prop. 1 (view symmetrization).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from numpy.typing import ArrayLike

from specinit._validation import Interval, bad_argument, check_allocation, check_choice, check_int, check_magnitude, \
    current_entry, integer_symbols, public, warn
from specinit.distributions.mixtures import MixtureLikelihood, gaussian_components, stack_views
from specinit.engine.rows import unit_of
from specinit.engine.views import (
    ViewMoments,
    ViewSums,
    conditional_variances,
    multiview_population,
    pair_misfit,
    with_squares,
)
from specinit.estimate import Site, SpectralEstimate
from specinit.faces import Face, Param, face, view_face
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, Family, k_param, site_values
from specinit.refine import RefineResult

if TYPE_CHECKING:
    import jax
    from specinit.engine.backends import Passes
    from specinit.engine.protocols import Moments
    from specinit.engine.views import MultiViewFit

__all__ = [
    "FAMILY",
    "KINDS",
    "MultiView",
    "MultiViewMoments",
    "check_views",
    "log_likelihood",
    "model",
    "population_moments",
    "predict",
    "refine",
    "spectral",
    "spectral_from_moments",
    "stack_views",
    "update",
]

KINDS = ("categorical", "gaussian")


def _numeric_views(views, kinds, sizes) -> list:
    """Categorical codes as one-hot CSR rows, Gaussian views as they are (validated by :func:`check_views`)."""
    n = views[0].shape[0]
    return [x if kind == "gaussian" else sp.csr_matrix((np.ones(n), (np.arange(n), x)), shape=(n, size))
            for x, kind, size in zip(views, kinds, sizes)]


@public
def check_views(views: Sequence[ArrayLike], kinds: Sequence[Literal["categorical", "gaussian"]] | None = None,
                dims: Sequence[int] | None = None, func: str | None = None) -> tuple[list[np.ndarray], tuple, tuple]:
    """Validate views and resolve ``kinds`` and ``dims``.

    Parameters
    ----------
    views : sequence of arrays
        Categorical views: integer codes of shape (N,); Gaussian views: (N, d_v).
    kinds : sequence of {"categorical", "gaussian"}, optional
        Default: 1-D integer views are categorical, 2-D views Gaussian.
    dims : sequence of int, optional
        ``V_v`` (categorical, default ``max code + 1``) or ``d_v``.
    func : str, optional
        The public function named in error messages (default: the entry the user called).

    Returns
    -------
    views : list of ndarray
        int64 codes or float64 arrays.
    kinds, dims : tuple

    Raises
    ------
    ValueError
        Fewer than 3 views, different numbers of observations, NaN/inf,
        categorical values out of range or not integers, wrong shapes.
    """
    if views is None or isinstance(views, np.ndarray) or not hasattr(views, "__len__"):
        raise bad_argument("views", func, "a list of per-view arrays", views, kind=TypeError)
    views = list(views)
    if len(views) < 3:
        raise bad_argument("views", func, "a list of at least 3 views", f"{len(views)} views", describe=False)
    arrays = [np.asarray(v) for v in views]
    for i, a in enumerate(arrays):
        if a.dtype == object or a.dtype.kind not in "biuf":
            raise bad_argument(f"views[{i}]", func, "a numeric array", a, kind=TypeError)
    if kinds is None:
        kinds = tuple("categorical" if a.ndim == 1 and a.dtype.kind in "biu" else "gaussian" for a in arrays)
    kinds = tuple(kinds)
    if len(kinds) != len(arrays):
        raise bad_argument("kinds", func, f"one kind per view ({len(arrays)})", kinds)
    for i, kind in enumerate(kinds):
        check_choice(kind, f"kinds[{i}]", func, KINDS)
    if dims is not None and len(dims) != len(arrays):
        raise bad_argument("dims", func, f"one size per view ({len(arrays)})", dims)
    rows = [a.shape[0] if a.ndim else 0 for a in arrays]
    if len(set(rows)) != 1:
        raise bad_argument("views", func, "views with the same number of observations (rows)", f"row counts {rows}", describe=False)
    out, sizes = [], []
    for i, (a, kind) in enumerate(zip(arrays, kinds)):
        name = f"views[{i}]"
        if a.size and not np.all(np.isfinite(a)):
            rows_bad = np.flatnonzero(~np.isfinite(a.reshape(len(a), -1)).all(axis=1))
            listed = ", ".join(str(r) for r in rows_bad[:5]) + (", ..." if rows_bad.size > 5 else "")
            raise bad_argument(name, func, "finite", f"NaN or infinite entries in {rows_bad.size} row(s): row {listed}",
                               describe=False)
        if kind == "categorical":
            if a.ndim != 1:
                raise bad_argument(name, func, "a (N,) array of integer category codes", a)
            codes = integer_symbols(a, name, func=func, noun="category codes")
            size = int(codes.max()) + 1 if dims is None else check_int(dims[i], f"dims[{i}]", func, minimum=1)
            if codes.max() >= size:
                raise bad_argument(name, func, f"category codes in [0, {size})",
                                   f"values in [{codes.min()}, {codes.max()}]", describe=False)
            out.append(codes)
        else:
            if a.ndim != 2:
                raise bad_argument(name, func, "a two-dimensional (N, d) array (Gaussian view)", a)
            check_magnitude(a, name, func)
            size = a.shape[1]
            if dims is not None and check_int(dims[i], f"dims[{i}]", func, minimum=1) != size:
                raise bad_argument(f"dims[{i}]", func, f"the view's number of columns ({size})", dims[i])
            out.append(a.astype(np.float64))
        sizes.append(size)
    return out, kinds, tuple(sizes)


def view_components(spec, value):
    """``log p(x | h)`` of stacked views for every observation and class, shape (N, k) (the one likelihood).

    Parameters
    ----------
    spec : dict
        ``"params"``: per view ``(beta,)`` (categorical) or ``(loc, scale)``
        (Gaussian); ``"kinds"``: the view kinds.
    value : array, shape (N, D)
        Stacked views (:func:`stack_views`).

    Returns
    -------
    array, shape (N, k)
    """
    total, start = 0.0, 0
    for kind, p in zip(spec["kinds"], spec["params"]):
        if kind == "categorical":
            codes = jnp.round(value[..., start]).astype(jnp.int32)
            total = total + jnp.log(p[0]).T[codes]
            start += 1
        else:
            width = p[0].shape[-1]
            total = total + gaussian_components(value[..., start:start + width], p[0], p[1])
            start += width
    return total


def _kinds_of(params) -> tuple:
    """The view kinds read off the site names (``beta_<v>``: categorical; ``loc_<v>``: Gaussian)."""
    kinds, v = [], 0
    while f"beta_{v}" in params or f"loc_{v}" in params:
        kinds.append("categorical" if f"beta_{v}" in params else "gaussian")
        v += 1
    return tuple(kinds)


def _view_params(params, kinds) -> list:
    return [(jnp.asarray(params[f"beta_{v}"]),) if kind == "categorical"
            else (jnp.asarray(params[f"loc_{v}"]), jnp.asarray(params[f"scale_{v}"])) for v, kind in enumerate(kinds)]


@dataclass(frozen=True)
class MultiViewMoments:
    """What :func:`spectral_from_moments` needs: view moments, squared-view moments, kinds and view variances.

    Attributes
    ----------
    views : ViewMoments or MultiViewPopulation
        Moments of the views as the tensor step sees them (one-hot
        categorical views, raw Gaussian views).
    squares : ViewMoments or MultiViewPopulation
        The same views followed by the squares of the Gaussian views (for
        their variances; :func:`specinit.engine.views.conditional_variances`).
    kinds : tuple of str
        ``"categorical"`` or ``"gaussian"`` per view.
    variances : dict of int -> ndarray
        Column variances of every Gaussian view (the scale of the variance floor), in its unit.
    n_observations : int or None
        Rows of the data (None for population moments).
    units : dict of int -> float
        The unit of every Gaussian view of data (:func:`specinit.engine.rows.unit_of`): the moments are
        those of the view divided by it, its recovered locations and scales are multiplied by it (1 when
        absent: population moments).
    """

    views: object
    squares: object
    kinds: tuple
    variances: dict
    n_observations: int | None = None
    units: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ViewData:
    """Views as EM reads them: stacked values, kinds, one-hot categorical views, Gaussian column variances."""

    stacked: np.ndarray
    views: list
    kinds: tuple
    one_hot: dict
    variances: dict


class MultiView(Family):
    """Multi-view (naive Bayes) mixtures of categorical and diagonal-Gaussian views."""

    name = "multiview"
    data_kind = "views"
    match_site = "beta_2"
    summary = ViewSums
    fit_kind = "multiview"
    options = {
        "kinds": Param("sequence of {'categorical', 'gaussian'}, optional",
                       "See :func:`~specinit.models.multiview.check_views`.", None),
        "dims": Param("sequence of int, optional", "See :func:`~specinit.models.multiview.check_views`.", None),
        "target": Param("int", "View onto which the others are symmetrized "
                        "(:func:`specinit.engine.views.fit_multiview`).", -1, Interval(int)),
    }
    arguments = {
        "views": Param("sequence of arrays", "At least 3 views with the same observations (see :func:`check_views`)."),
        "moments": Param("MultiViewMoments", "From :func:`population_moments`, or built from data by "
                         ":func:`spectral`.", annotation=MultiViewMoments),
        "k": k_param("Number of classes; every view used by the tensor step needs ``V_v >= k`` "
                   "(categorical) or ``d_v >= k`` (Gaussian) with linearly independent class means."),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Categorical rows are projected onto the simplex and floored at ``floor / V_v``; Gaussian variances at "
            "``floor`` times the view's column variance."),
        "backend": Param("{'numpy', 'jax'} or None", "Where the passes run (:mod:`specinit.engine.backends`).", None),
    }
    advice = ("The views may not follow a k-class multi-view mixture: try a smaller k, another target view, or "
              "approach='jennrich'.")

    def site_table(self, params: Mapping[str, Any] | None = None, target: int = -1,
                   **options: Any) -> tuple[dict, str | None]:
        kinds = _kinds_of(params or {})
        sites = {"weights": Site("simplex", (0,), ("components",), ("components",))}
        for v, kind in enumerate(kinds):
            if kind == "categorical":
                sites[f"beta_{v}"] = Site("simplex", (0,), ("components", f"symbol_{v}"), ("components", f"symbol_{v}"))
            else:
                pair = ("components", f"dim_{v}")
                sites[f"loc_{v}"] = Site("real", (0,), pair, pair)
                sites[f"scale_{v}"] = Site("positive", (0,), pair, pair)
        if not kinds:
            return sites, None
        t = target % len(kinds)
        return sites, f"beta_{t}" if kinds[t] == "categorical" else f"loc_{t}"

    def target(self, target: int = -1, **options: Any) -> int:
        return target

    def moments(self, views: Sequence[ArrayLike], *, k: int, backend: str | Passes | None,
                kinds: Sequence[Literal["categorical", "gaussian"]] | None = None, dims: Sequence[int] | None = None,
                target: int = -1) -> MultiViewMoments:
        views, kinds, sizes = check_views(views, kinds, dims)
        for v, (kind, size) in enumerate(zip(kinds, sizes)):
            # The whitening's randomized range finder keeps a few (size, k + 10) blocks per view.
            check_allocation(4 * 8 * float(size) * (k + 10), "views" if dims is None else "dims",
                             f"(V, k + 10) = ({size}, {k + 10}) blocks for view {v}")
        n_obs = views[0].shape[0]
        gaussian = [v for v, kind in enumerate(kinds) if kind == "gaussian"]
        units = {v: unit_of(views[v]) for v in gaussian}
        fit_views = [x / units[v] if v in units else x for v, x in enumerate(_numeric_views(views, kinds, sizes))]
        variances = {v: np.var(fit_views[v], axis=0) for v in gaussian}
        return MultiViewMoments(ViewMoments(fit_views, backend=backend), with_squares(fit_views, gaussian, backend),
                                kinds, variances, n_obs, units)

    def population_moments(self, params: Mapping[str, Any],
                           kinds: Sequence[Literal["categorical", "gaussian"]] | None = None,
                           **options: Any) -> MultiViewMoments:
        kinds = _kinds_of(params) if kinds is None else tuple(
            check_choice(kind, f"kinds[{v}]", None, KINDS) for v, kind in enumerate(kinds))
        if len(kinds) < 3:
            raise bad_argument("kinds", None, "at least 3 views", kinds)
        needed = ["weights"] + [name for v, kind in enumerate(kinds)
                                for name in ([f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"])]
        missing = [name for name in needed if name not in params]
        if missing:
            raise bad_argument("params", None, f"the sites {needed}", f"missing {missing}", describe=False)
        weights = np.asarray(params["weights"], dtype=np.float64)
        means = [np.asarray(params[f"beta_{v}"] if kind == "categorical" else params[f"loc_{v}"], dtype=np.float64)
                 for v, kind in enumerate(kinds)]
        gaussian = [v for v, kind in enumerate(kinds) if kind == "gaussian"]
        second = {v: means[v] ** 2 + np.asarray(params[f"scale_{v}"], dtype=np.float64) ** 2 for v in gaussian}
        variances = {v: weights @ second[v] - (weights @ means[v]) ** 2 for v in gaussian}
        return MultiViewMoments(multiview_population(means, weights),
                                multiview_population(means + [second[v] for v in gaussian], weights), kinds, variances)

    def fit_input(self, moments: MultiViewMoments, k: int, **options: Any) -> Moments:
        return moments.views

    def max_components(self, moments: MultiViewMoments) -> tuple[int, str]:
        limits = [(min(moments.views.dims), f"at most the smallest view dimension ({min(moments.views.dims)})")]
        if moments.n_observations is not None:
            limits.append((moments.n_observations, f"at most the number of observations ({moments.n_observations})"))
        return min(limits)

    def unwhiten(self, fit: MultiViewFit, moments: MultiViewMoments, k: int, floor: float,
                 rng: np.random.Generator | None = None, **options: Any) -> tuple[dict, dict, dict]:
        params, report = {"weights": fit.weights}, {}
        if moments.n_observations is not None:
            report.update(self.independence(moments, fit, k, rng))
        gaussian = [v for v, kind in enumerate(moments.kinds) if kind == "gaussian"]
        variances = conditional_variances(moments.squares, fit, gaussian) if gaussian else {}
        for v, kind in enumerate(moments.kinds):
            if kind == "categorical":
                params[f"beta_{v}"] = fit.means[v]
            else:
                minimum = floor * np.maximum(moments.variances[v], np.finfo(float).tiny)
                unit = moments.units.get(v, 1.0)
                params[f"loc_{v}"] = unit * fit.means[v]
                report[f"scale_floored_{v}"] = int(np.count_nonzero(variances[v] < minimum))
                params[f"scale_{v}"] = unit * np.sqrt(np.maximum(variances[v], minimum))
        return params, report, {}

    def independence(self, moments: MultiViewMoments, fit: MultiViewFit, k: int, rng: np.random.Generator) -> dict:
        """Check the model's premise on data: the views conditionally independent given the k classes.

        :func:`specinit.engine.views.pair_misfit` compares every cross moment of the data with the one the fit
        implies; above the sampling level ``max(0.2, 5 / sqrt(N))`` the views depend on each other beyond the
        classes and a RuntimeWarning says what to try.
        """
        misfit = pair_misfit(moments.views, fit.weights, fit.means, seed=rng)
        level = max(0.2, 5.0 / np.sqrt(moments.n_observations))
        if np.max(misfit) > level:
            warn(f"{current_entry()}: the views are not conditionally independent given the {k} estimated classes "
                 f"(cross-moment misfit up to {np.max(misfit):.2g}, above the sampling level {level:.2g}; "
                 "diagnostics['independence_misfit']): the multi-view model does not hold for these views. Try "
                 "other views (groups of measurements independent given the class), another k, or one model of "
                 "the concatenated views (specinit.models.gmm).")
        return {"independence_misfit": misfit, "independence_level": level,
                "independence_holds": bool(np.max(misfit) <= level)}

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, views: Sequence[ArrayLike], estimate: SpectralEstimate,
                    kinds: Sequence[Literal["categorical", "gaussian"]] | None = None,
                    dims: Sequence[int] | None = None, **options: Any) -> ViewData:
        kinds = _kinds_of(estimate.params) if kinds is None else kinds
        if dims is None and len(kinds) == len(_kinds_of(estimate.params)):  # the estimate's sizes: a batch of views
            # need not show every category
            dims = [estimate.params[f"beta_{v}" if f"beta_{v}" in estimate.params else f"loc_{v}"].shape[1]
                    for v in range(len(kinds))]
        views, kinds, sizes = check_views(views, kinds, dims)
        k = estimate.k
        for v, (kind, size) in enumerate(zip(kinds, sizes)):
            for name in ([f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"]):
                if name not in estimate.params or estimate.params[name].shape != (k, size):
                    raise bad_argument("estimate", None, f"{name!r} of shape ({k}, {size})",
                                       f"{np.shape(estimate.params.get(name))}", describe=False)
        one_hot = {v: sp.csr_matrix((np.ones(len(x)), (np.arange(len(x)), x)), shape=(len(x), size))
                   for v, (x, kind, size) in enumerate(zip(views, kinds, sizes)) if kind == "categorical"}
        variances = {v: np.maximum(np.var(views[v], axis=0), np.finfo(float).tiny)
                     for v, kind in enumerate(kinds) if kind == "gaussian"}
        return ViewData(stack_views(views), views, kinds, one_hot, variances)

    def n_observations(self, data: ViewData) -> int:
        return int(data.stacked.shape[0])

    def component_log_prob(self, params: Mapping[str, Any], data: ViewData) -> jax.Array:
        return view_components({"params": _view_params(params, data.kinds), "kinds": data.kinds},
                               jnp.asarray(data.stacked))

    def m_step(self, data: ViewData, resp: np.ndarray, params: Mapping[str, Any], reg: float = 1e-6,
               **options: Any) -> dict:
        nk = resp.sum(axis=0) + 10 * np.finfo(float).eps
        out = {"weights": nk}
        for v, kind in enumerate(data.kinds):
            if kind == "categorical":
                out[f"beta_{v}"] = np.asarray(data.one_hot[v].T @ resp).T
            else:
                x = data.views[v]
                loc = resp.T @ x / nk[:, None]
                var = np.maximum(resp.T @ (x * x) / nk[:, None] - loc**2, 0.0) + reg * data.variances[v]
                out[f"loc_{v}"], out[f"scale_{v}"] = loc, np.sqrt(var)
        return out

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralMultiView`."""
        return view_face(
            "SpectralMultiView", self, refine,
            """A mixture of conditionally independent views (categorical or Gaussian) by the method of moments, then EM.

            ``X`` is the list of views of :func:`specinit.models.multiview.spectral`
            (at least three arrays with the same rows: one-hot or integer categorical
            views, real Gaussian ones); ``predict`` clusters the observations,
            ``score`` is the mean log-likelihood per observation.""",
            ("kinds", "dims", "target"), answers=frozenset({"partial_fit"}))


FAMILY = MultiView()


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "views": Param("sequence of arrays, optional", "Observed views (see :func:`check_views`); ``None`` generates ``n`` "
                   "observations with view sizes ``dims``.", None, annotation=Sequence[ArrayLike] | None),
    "k": Param("int", "Number of classes."),
    "kinds": Param('sequence of {"categorical", "gaussian"}', "One per view.",
                   annotation=Sequence[Literal["categorical", "gaussian"]]),
    "n": Param("int, optional", "Number of observations to generate (only when ``views`` is None).", None),
    "dims": Param("sequence of int, optional", "``V_v`` or ``d_v`` per view (required when ``views`` is None).", None,
                  annotation=Sequence[int] | None),
}


@face(MODEL_ARGUMENTS)
def model(views, *, k, kinds, n, dims) -> None:
    """NumPyro multi-view mixture with the class summed out.

    Notes
    -----
    NumPyro sites:
    ``weights`` (k,) ~ Dirichlet(1); per view ``v``: ``beta_<v>`` (k, V_v) ~
    Dirichlet(1) rows, or ``loc_<v>`` (k, d_v) ~ Normal(0, 10) and
    ``scale_<v>`` (k, d_v) ~ HalfNormal(10). Observed ``views`` (stacked) in
    plate ``data``; when generating, ``h`` and ``x_<v>`` in plate ``data``.
    """
    kinds = tuple(kinds)
    if views is None:
        if n is None or dims is None or len(dims) != len(kinds):
            raise bad_argument("dims", None, "one size per view, with n, when views is None", dims)
        n_obs, sizes = int(n), tuple(int(s) for s in dims)
    else:
        views, kinds, sizes = check_views(views, kinds, dims, None)
        n_obs = views[0].shape[0]
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    params = []
    for v, (kind, size) in enumerate(zip(kinds, sizes)):
        if kind == "categorical":
            params.append((numpyro.sample(f"beta_{v}", dist.Dirichlet(jnp.ones(size)).expand([k]).to_event(1)),))
        else:
            loc = numpyro.sample(f"loc_{v}", dist.Normal(0.0, 10.0).expand([k, size]).to_event(2))
            scale = numpyro.sample(f"scale_{v}", dist.HalfNormal(10.0).expand([k, size]).to_event(2))
            params.append((loc, scale))
    with numpyro.plate("data", n_obs):
        if views is None:
            h = numpyro.sample("h", dist.Categorical(weights))
            for v, (kind, p) in enumerate(zip(kinds, params)):
                if kind == "categorical":
                    numpyro.sample(f"x_{v}", dist.Categorical(p[0][h]))
                else:
                    numpyro.sample(f"x_{v}", dist.Normal(p[0][h], p[1][h]).to_event(1))
        else:
            components = partial(view_components, {"params": params, "kinds": kinds})
            numpyro.sample("views", MixtureLikelihood(weights, components, n_obs, (sum(1 if kind == "categorical" else
                                                                               s for kind, s in zip(kinds, sizes)),)),
                           obs=jnp.asarray(stack_views(views)))


@FAMILY.face(
    params=Param("dict or SpectralEstimate", "``weights`` (k,) and, per view ``v``, ``beta_<v>`` (k, V_v) for a "
                 "categorical view or ``loc_<v>`` and ``scale_<v>`` (k, d_v) for a Gaussian one (the sites of "
                 ":func:`model`)."),
    kinds=MultiView.options["kinds"].documented("The kind of each view (default: read off the site names: "
                                                  "``beta_<v>`` categorical, ``loc_<v>`` Gaussian)."))
def population_moments(params, kinds) -> MultiViewMoments:
    """Exact moments of a multi-view mixture with the given parameters.

    Returns
    -------
    MultiViewMoments
        For :func:`spectral_from_moments` (exact recovery checks).

    Raises
    ------
    ValueError
        Fewer than 3 views, an unknown kind, or a missing site.
    TypeError
        ``params`` that is neither a dict nor an estimate.
    """
    return FAMILY.population_moments(site_values(params), kinds)


@FAMILY.face()
def spectral_from_moments(moments, k, *, target, method, seed, floor, decompose_options,
                          approach) -> SpectralEstimate:
    """Weights and every view's parameters from :class:`MultiViewMoments` (data or population).

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        Only with ``approach="symmetric"``: the symmetrized second moment is
        not positive definite on its top k eigenvectors.
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, approach=approach, seed=seed, floor=floor,
                                        decompose_options=decompose_options, target=target)


@FAMILY.face()
def spectral(views, k, kinds, *, dims, target, method, seed, floor, decompose_options, approach,
             backend) -> SpectralEstimate:
    """Method-of-moments estimate of a multi-view mixture.

    Returns
    -------
    SpectralEstimate
        ``"multiview"`` with ``weights`` (k,), ``beta_<v>`` (k, V_v) for
        categorical views, ``loc_<v>`` and ``scale_<v>`` (k, d_v) for Gaussian
        views. Gaussian scales come from the within-class second moments
        ``E[x_v^2 | h] - loc_v^2`` (:func:`specinit.engine.views.conditional_variances`),
        floored at ``floor`` times the view's column variance where noise
        makes them non-positive (so the result does not depend on the data's
        unit); the number floored is in ``diagnostics["scale_floored_<v>"]``.
        ``diagnostics["independence_misfit"]`` (one value per pair of views),
        ``"independence_level"`` and ``"independence_holds"`` check the
        model's premise (:meth:`MultiView.independence`).

    Warns
    -----
    RuntimeWarning
        The fallback to ``approach="jennrich"``, or views that are not
        conditionally independent given the estimated classes (the model
        does not hold; the warning says what to try).

    Raises
    ------
    ValueError
        Fewer than 3 views, different numbers of rows, NaN/inf, codes out of
        range, or ``k`` larger than a view's dimension.
    specinit.engine.whitening.IndefiniteMomentError
        Only with ``approach="symmetric"`` (see above).
    """
    return FAMILY.spectral(views, k, method=method, approach=approach, seed=seed, floor=floor,
                           decompose_options=decompose_options, backend=backend, kinds=kinds, dims=dims, target=target)


@FAMILY.refine_face(
    estimate=Param("SpectralEstimate or dict", "``weights`` and every view's sites (``beta_<v>`` or ``loc_<v>``, "
                   "``scale_<v>``)."),
    restarts=6)
def refine(views, estimate, kinds, *, dims, method, max_iter, tol, reg, floor, restarts, seed) -> RefineResult:
    """Spectral then refine: EM for the multi-view mixture started from an estimate.

    E-step: ``log w_h + sum_v log p(x_v | h)`` normalized by log-sum-exp;
    M-step: weighted class frequencies, categorical frequencies per view,
    weighted means and per-coordinate variances of Gaussian views ([3]_).

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"multiview"``, refined sites), ``.log_likelihood``
        trace, ``.n_iter``, ``.converged``.

    Raises
    ------
    ValueError
        Bad views (as for :func:`spectral`), an estimate of another model,
        missing or mis-shaped sites, values outside their supports.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [3] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
       the EM algorithm", JRSS B 39 (1977).
    """

    return FAMILY.refine(views, estimate, method=method, max_iter=max_iter, tol=tol, floor=floor, reg=reg,
                         restarts=restarts, seed=seed,
                         kinds=kinds, dims=dims)


@FAMILY.face(
    views=Param("sequence of arrays", "The new observations of every view (as for :func:`spectral`)."),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of classes: required for the first batch; with ``estimate`` None means "
            "``estimate.k`` (the stored sums fit any k).", None, Interval(int, 1, none=True)),
    kinds=Param("sequence of {'categorical', 'gaussian'}, optional", "See :func:`check_views`; with ``estimate``, "
                "default: the estimate's.", None),
    dims=Param("sequence of int, optional", "See :func:`check_views`; with ``estimate`` the sizes are the "
               "estimate's. Give them on the first batch when it may not show every category of a view.", None))
def update(views, estimate, *, k, kinds, dims, target, method, seed, floor, decompose_options,
           approach) -> SpectralEstimate:
    """Add a batch of observations to a multi-view fit: exact merged sums, then the moment estimate.

    The moments of :func:`spectral` are functions of the views' row count,
    largest values, column sums, pair sums and the triple sums of the views
    (:class:`~specinit.engine.views.ViewSums`; the squares of the Gaussian
    views join the pairs, for the within-class variances), which add up over
    batches exactly: after any number of batches the estimate is that of
    :func:`spectral` on all the observations at once (the same moments to
    rounding, the same decomposition and seed). The sums do not depend on
    ``k``. Classes keep their labels from batch to batch (matched on the
    target view's means). Memory: the pair sums and three times the triple
    sums (``V_a V_b V_c`` floats for each triple of views). There is no EM step
    (it needs the observations): :func:`refine` on data at hand takes the
    estimate further. The returned estimate keeps the sums in its ``state``
    (``moments/...``), which :meth:`~specinit.estimate.SpectralEstimate.save`
    writes, so updates go on in a later process. The online face of
    ``SpectralMultiView.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"multiview"`` as from :func:`spectral`, plus ``n_batches`` and
        ``n_observations`` in the diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch, views of other kinds or sizes
        than the estimate's, codes at or above a categorical view's size, an
        estimate without stored sums (from :func:`spectral`: fit the first
        batch with :func:`update`), a Gaussian view whose fourth powers
        float64 cannot hold (the sums are raw; :func:`spectral` is free of
        the unit), or anything :func:`check_views` refuses.
    MemoryError
        The sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> h = rng.integers(0, 2, size=600)
    >>> means = np.array([[3.0, 0.0], [0.0, 3.0]])  # linearly independent class means in every view
    >>> views = [rng.normal(means[h], 1.0) for _ in range(3)]
    >>> est = update([v[:300] for v in views], k=2)
    >>> est = update([v[300:] for v in views], est)
    >>> once = spectral(views, 2)
    >>> from specinit.align import match_components
    >>> same = once.params["loc_2"][match_components(est.params["loc_2"], once.params["loc_2"])]
    >>> bool(abs(est.params["loc_2"] - same).max() < 1e-8), est.diagnostics["n_batches"]
    (True, 2)
    """
    stored, k, n_batches = FAMILY.stream(estimate, k, FAMILY.summary, "multiview.update")
    if stored is not None:
        if hasattr(views, "__len__") and len(views) != stored.n_base:
            raise bad_argument("views", None, f"the estimate's {stored.n_base} views", f"{len(views)} views",
                               describe=False)
        kinds = _kinds_of(estimate.params) if kinds is None else kinds
        dims = stored.dims[: stored.n_base] if dims is None else dims
    views, kinds, sizes = check_views(views, kinds, dims)
    gaussian = [v for v, kind in enumerate(kinds) if kind == "gaussian"]
    numeric = _numeric_views(views, kinds, sizes)
    for v in gaussian:  # the sums are raw: up to fourth powers of a Gaussian view (its squares' pair sums)
        low, high = np.finfo(np.float64).tiny ** 0.25, (np.finfo(np.float64).max / max(len(numeric[v]), 1)) ** 0.25
        if not low <= unit_of(numeric[v]) <= high:
            raise bad_argument(f"views[{v}]", None, f"a Gaussian view whose largest |value| lies between {low:.1e} "
                               f"and {high:.1e} (update keeps sums of fourth powers of the Gaussian views, which "
                               "float64 must hold; multiview.spectral is free of the unit): change the unit",
                               f"max |value| = {unit_of(numeric[v]):.3g}", describe=False)
    batch = ViewSums.from_views(numeric + [views[v] ** 2 for v in gaussian], len(numeric), "views")
    merged = batch if stored is None else stored + batch
    units = {v: float(merged.peaks[v]) if merged.peaks[v] > 0 else 1.0 for v in gaussian}
    scales = [units.get(v, 1.0) for v in range(len(kinds))] + [units[v] ** 2 for v in gaussian]
    variances = {v: merged.firsts[len(kinds) + j] / (merged.n * scales[-len(gaussian) + j])
                 - (merged.firsts[v] / (merged.n * units[v])) ** 2 for j, v in enumerate(gaussian)}
    moments = MultiViewMoments(merged.moments(scales, len(kinds)), merged.moments(scales), kinds, variances, merged.n,
                               units)
    fit = FAMILY.spectral_from_moments(moments, k, method=method, approach=approach, seed=seed, floor=floor,
                                       decompose_options=decompose_options, kinds=kinds, dims=sizes, target=target)
    return FAMILY.streamed(fit, estimate, merged, n_batches, n_observations=merged.n)


predict = FAMILY.predict_face("views", "Posterior class probabilities of every observation and the most probable "
                              "class.", positional=("kinds",), keyword=("dims",))


log_likelihood = FAMILY.log_likelihood_face("views", "Log-likelihood of every observation, its class summed out.",
                                            positional=("kinds",), keyword=("dims",))
