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

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from jax.scipy.special import logsumexp
from specinit.models._em import (
    RefineResult,
    check_em_options,
    em_loop,
    gaussian_log_density,
    responsibilities,
)

from specinit._validation import (
    bad_argument,
    check_choice,
    check_int,
    check_positive,
    warn,
)
from specinit.engine.support import positive_weights, project_to_simplex
from specinit.engine.views import (
    ViewMoments,
    conditional_variances,
    fit_multiview,
    multiview_population,
    with_squares,
)
from specinit.engine.whitening import IndefiniteMomentError
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = [
    "KINDS",
    "MultiViewMoments",
    "check_views",
    "model",
    "population_moments",
    "refine",
    "spectral",
    "spectral_from_moments",
    "stack_views",
]

KINDS = ("categorical", "gaussian")
_VARIANCE_FLOOR = 1e-6


def check_views(views, kinds=None, dims=None, func: str = "multiview.check_views"):
    """Validate views and resolve ``kinds`` and ``dims``.

    Parameters
    ----------
    views : sequence of arrays
        Categorical views: integer codes of shape (N,); Gaussian views: (N, d_v).
    kinds : sequence of {"categorical", "gaussian"}, optional
        Default: 1-D integer views are categorical, 2-D views Gaussian.
    dims : sequence of int, optional
        ``V_v`` (categorical, default ``max code + 1``) or ``d_v``.
    func : str
        The public function named in error messages.

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
            if a.ndim != 1 or np.any(a != np.round(a)):
                raise bad_argument(name, func, "a (N,) array of integer category codes", a)
            size = int(a.max()) + 1 if dims is None else check_int(dims[i], f"dims[{i}]", func, minimum=1)
            if a.min() < 0 or a.max() >= size:
                raise bad_argument(name, func, f"category codes in [0, {size})",
                                   f"values in [{a.min():g}, {a.max():g}]", describe=False)
            out.append(a.astype(np.int64))
        else:
            if a.ndim != 2:
                raise bad_argument(name, func, "a two-dimensional (N, d) array (Gaussian view)", a)
            size = a.shape[1]
            if dims is not None and check_int(dims[i], f"dims[{i}]", func, minimum=1) != size:
                raise bad_argument(f"dims[{i}]", func, f"the view's number of columns ({size})", dims[i])
            out.append(a.astype(np.float64))
        sizes.append(size)
    return out, kinds, tuple(sizes)


def stack_views(views):
    """All views as one (N, D) float array: one column per categorical view, d_v per Gaussian view.

    Parameters
    ----------
    views : sequence of arrays
        Validated views (:func:`check_views`).

    Returns
    -------
    ndarray, shape (N, D)
        The observed value of the model's ``views`` site.
    """
    return np.concatenate([np.asarray(v, dtype=np.float64).reshape(len(v), -1) for v in views], axis=1)


class _MultiViewMixture(dist.Distribution):
    """``sum_h w_h prod_v p(x_v | h)`` on stacked views (log-prob only)."""

    support = dist.constraints.real_vector

    def __init__(self, weights, kinds, params, n_obs):
        self.weights, self.kinds, self.params = weights, kinds, params
        width = sum(1 if kind == "categorical" else p[0].shape[-1] for kind, p in zip(kinds, params))
        super().__init__(batch_shape=(n_obs,), event_shape=(width,))

    def log_prob(self, value):
        logp = jnp.log(self.weights)
        start = 0
        for kind, p in zip(self.kinds, self.params):
            if kind == "categorical":
                codes = jnp.round(value[..., start]).astype(jnp.int32)
                logp = logp + jnp.log(p[0]).T[codes]
                start += 1
            else:
                loc, scale = p
                x = value[..., None, start:start + loc.shape[-1]]
                logp = logp + dist.Normal(loc, scale).log_prob(x).sum(-1)
                start += loc.shape[-1]
        return logsumexp(logp, axis=-1)


def model(views=None, *, k: int, kinds, n: int | None = None, dims=None):
    """NumPyro multi-view mixture with the class summed out.

    Parameters
    ----------
    views : sequence of arrays, optional
        Observed views (see :func:`check_views`); ``None`` generates ``n``
        observations with view sizes ``dims``.
    k : int
        Number of classes.
    kinds : sequence of {"categorical", "gaussian"}
        One per view.
    n : int, optional
        Number of observations to generate (only when ``views`` is None).
    dims : sequence of int, optional
        ``V_v`` or ``d_v`` per view (required when ``views`` is None).

    Notes
    -----
    NumPyro sites:
    ``weights`` (k,) ~ Dirichlet(1); per view ``v``: ``beta_<v>`` (k, V_v) ~
    Dirichlet(1) rows, or ``loc_<v>`` (k, d_v) ~ Normal(0, 10) and
    ``scale_<v>`` (k, d_v) ~ HalfNormal(10). Observed ``views`` (stacked) in
    plate ``data``; when generating, ``h`` and ``x_<v>`` in plate ``data``.
    """
    func = "multiview.model"
    kinds = tuple(kinds)
    if views is None:
        if n is None or dims is None or len(dims) != len(kinds):
            raise bad_argument("dims", func, "one size per view, with n, when views is None", dims)
        n_obs, sizes = int(n), tuple(int(s) for s in dims)
    else:
        views, kinds, sizes = check_views(views, kinds, dims, func)
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
            numpyro.sample("views", _MultiViewMixture(weights, kinds, params, n_obs), obs=jnp.asarray(stack_views(views)))


def _facts(kinds, target: int) -> ModelFacts:
    """Component axes, matching site and ArviZ dims for views of these kinds (matched on the target view)."""
    axes, dims = {"weights": 0}, {"weights": ("components",)}
    for v, kind in enumerate(kinds):
        names = [f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"]
        for name in names:
            axes[name] = 0
            dims[name] = ("components", f"symbol_{v}" if kind == "categorical" else f"dim_{v}")
    target = target % len(kinds)
    match = f"beta_{target}" if kinds[target] == "categorical" else f"loc_{target}"
    return ModelFacts(component_axes=axes, match_site=match, dims=dims, event_dims=dict(dims))


@dataclass(frozen=True)
class MultiViewMoments:
    """What :func:`spectral_from_moments` needs: view moments, squared-view moments and the view kinds.

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
    """

    views: object
    squares: object
    kinds: tuple


def population_moments(params, kinds) -> MultiViewMoments:
    """Exact moments of a multi-view mixture with the given parameters.

    Parameters
    ----------
    params : dict or SpectralEstimate
        ``weights`` (k,) and, per view ``v``, ``beta_<v>`` (k, V_v) for a
        categorical view or ``loc_<v>`` and ``scale_<v>`` (k, d_v) for a
        Gaussian one (the sites of :func:`model`).
    kinds : sequence of {"categorical", "gaussian"}
        The kind of each view.

    Returns
    -------
    MultiViewMoments
        For :func:`spectral_from_moments` (exact recovery checks).

    Raises
    ------
    ValueError
        Fewer than 3 views, an unknown kind, or a missing site.
    """
    func = "multiview.population_moments"
    params = dict(getattr(params, "params", params))
    kinds = tuple(check_choice(kind, f"kinds[{v}]", func, KINDS) for v, kind in enumerate(kinds))
    if len(kinds) < 3:
        raise bad_argument("kinds", func, "at least 3 views", kinds)
    needed = ["weights"] + [name for v, kind in enumerate(kinds)
                            for name in ([f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"])]
    missing = [name for name in needed if name not in params]
    if missing:
        raise bad_argument("params", func, f"the sites {needed}", f"missing {missing}", describe=False)
    weights = np.asarray(params["weights"], dtype=np.float64)
    means = [np.asarray(params[f"beta_{v}"] if kind == "categorical" else params[f"loc_{v}"], dtype=np.float64)
             for v, kind in enumerate(kinds)]
    gaussian = [v for v, kind in enumerate(kinds) if kind == "gaussian"]
    squares = [means[v] ** 2 + np.asarray(params[f"scale_{v}"], dtype=np.float64) ** 2 for v in gaussian]
    return MultiViewMoments(multiview_population(means, weights), multiview_population(means + squares, weights), kinds)


def spectral_from_moments(moments: MultiViewMoments, k: int, *, target: int = -1, method: str = "tpm", seed=0,
                          floor: float = 1e-3, decompose_options: dict | None = None,
                          approach: str = "auto") -> SpectralEstimate:
    """Weights and every view's parameters from :class:`MultiViewMoments` (data or population).

    Parameters
    ----------
    moments : MultiViewMoments
        From :func:`population_moments`, or built from data by :func:`spectral`.
    k : int
        Number of classes.
    target, method, seed, floor, decompose_options, approach
        As for :func:`spectral`.

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
    func = "multiview.spectral"
    floor = check_positive(floor, "floor", func)
    approach = check_choice(approach, "approach", func, ("auto", "symmetric", "jennrich"))
    fallback = None
    try:
        fit = fit_multiview(moments.views, k, target=target, method=method, seed=seed,
                            approach="symmetric" if approach == "auto" else approach,
                            decompose_options=decompose_options)
    except IndefiniteMomentError as exc:
        if approach != "auto":
            raise exc.advise(func, "The views may not follow a k-class multi-view mixture: try a smaller k, "
                                   "another target view, or approach='jennrich'.") from None
        fallback = f"jennrich (symmetrized second moment indefinite: {str(exc).split(' Likely')[0]})"
        warn(f"{func}: the symmetrized second moment is indefinite for k = {k} (the views are not exactly a "
             f"{k}-class multi-view mixture); fell back to approach='jennrich' (see diagnostics['fallback']). "
             "Refine the estimate (multiview.refine) or try a smaller k.")
        fit = fit_multiview(moments.views, k, target=target, approach="jennrich", seed=seed)
    params = {"weights": positive_weights(fit.weights)}
    diagnostics = dict(fit.diagnostics)
    diagnostics["fallback"] = fallback
    gaussian = [v for v, kind in enumerate(moments.kinds) if kind == "gaussian"]
    variances = conditional_variances(moments.squares, fit, gaussian) if gaussian else {}
    for v, kind in enumerate(moments.kinds):
        if kind == "categorical":
            params[f"beta_{v}"], report = project_to_simplex(fit.means[v], floor)
            diagnostics[f"negative_mass_{v}"] = report["negative_mass"]
        else:
            params[f"loc_{v}"] = fit.means[v]
            diagnostics[f"scale_floored_{v}"] = int(np.count_nonzero(variances[v] < _VARIANCE_FLOOR))
            params[f"scale_{v}"] = np.sqrt(np.maximum(variances[v], _VARIANCE_FLOOR))
    return SpectralEstimate("multiview", params, diagnostics, facts=_facts(moments.kinds, target))


def spectral(views, k: int, kinds=None, *, dims=None, target: int = -1, method: str = "tpm", seed=0,
             floor: float = 1e-3, decompose_options: dict | None = None, approach: str = "auto") -> SpectralEstimate:
    """Method-of-moments estimate of a multi-view mixture.

    Parameters
    ----------
    views : sequence of arrays
        At least 3 views with the same observations (see :func:`check_views`).
    k : int
        Number of classes; every view used by the tensor step needs ``V_v >= k``
        (categorical) or ``d_v >= k`` (Gaussian) with linearly independent
        class means.
    kinds : sequence of {"categorical", "gaussian"}, optional
        See :func:`check_views`.
    dims : sequence of int, optional
        See :func:`check_views`.
    target : int
        View onto which the others are symmetrized (:func:`specinit.engine.views.fit_multiview`).
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    seed : int or numpy.random.Generator
        Randomness of the range finders and the decomposition.
    floor : float
        Categorical rows are projected onto the simplex and floored at ``floor / V_v``.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition; unknown keys raise.
    approach : {"auto", "symmetric", "jennrich"}
        ``"symmetric"``: whiten the symmetrized second moment (raises
        :class:`specinit.engine.whitening.IndefiniteMomentError` when it is
        indefinite, as on real data that are not an exact k-class mixture).
        ``"jennrich"``: observable operators (no square root of a moment).
        ``"auto"`` (default): ``"symmetric"``, falling back to ``"jennrich"``
        with a RuntimeWarning; recorded in ``diagnostics["fallback"]``.

    Returns
    -------
    SpectralEstimate
        ``"multiview"`` with ``weights`` (k,), ``beta_<v>`` (k, V_v) for
        categorical views, ``loc_<v>`` and ``scale_<v>`` (k, d_v) for Gaussian
        views. Gaussian scales come from the within-class second moments
        ``E[x_v^2 | h] - loc_v^2`` (:func:`specinit.engine.views.conditional_variances`),
        floored at ``1e-6`` (variance) where noise makes them non-positive;
        the number floored is in ``diagnostics["scale_floored_<v>"]``.

    Raises
    ------
    ValueError
        Fewer than 3 views, different numbers of rows, NaN/inf, codes out of
        range, or ``k`` larger than a view's dimension.
    specinit.engine.whitening.IndefiniteMomentError
        Only with ``approach="symmetric"`` (see above).
    """
    func = "multiview.spectral"
    views, kinds, sizes = check_views(views, kinds, dims, func)
    n_obs = views[0].shape[0]
    fit_views = [sp.csr_matrix((np.ones(n_obs), (np.arange(n_obs), v)), shape=(n_obs, size))
                 if kind == "categorical" else v for v, kind, size in zip(views, kinds, sizes)]
    gaussian = [v for v, kind in enumerate(kinds) if kind == "gaussian"]
    moments = MultiViewMoments(ViewMoments(fit_views), with_squares(fit_views, gaussian), kinds)
    return spectral_from_moments(moments, k, target=target, method=method, seed=seed, floor=floor,
                                 decompose_options=decompose_options, approach=approach)


def refine(views, estimate, kinds=None, *, dims=None, method: str = "em", max_iter: int = 100, tol: float = 1e-3,
           reg: float = 1e-6, floor: float = 1e-10):
    """Spectral then refine: EM for the multi-view mixture started from an estimate.

    E-step: ``log w_h + sum_v log p(x_v | h)`` normalized by log-sum-exp;
    M-step: weighted class frequencies, categorical frequencies per view,
    weighted means and per-coordinate variances of Gaussian views ([3]_).

    Parameters
    ----------
    views : sequence of arrays
        As for :func:`spectral`.
    estimate : SpectralEstimate or dict
        ``weights`` and every view's sites (``beta_<v>`` or ``loc_<v>``, ``scale_<v>``).
    kinds : sequence of {"categorical", "gaussian"}, optional
        As for :func:`spectral`.
    dims : sequence of int, optional
        As for :func:`spectral`.
    method : {"em"}
        Expectation-maximization (NumPy, float64).
    max_iter : int
        Largest number of EM iterations.
    tol : float
        Stop when the log-likelihood gain per observation is below ``tol``.
    reg : float
        Added to every Gaussian variance.
    floor : float
        Categorical probabilities are floored at ``floor`` (rows renormalized).

    Returns
    -------
    specinit.models._em.RefineResult
        ``.estimate`` (model ``"multiview"``, refined sites), ``.log_likelihood``
        trace, ``.n_iter``, ``.converged``.

    Raises
    ------
    ValueError
        Bad views (as for :func:`spectral`), missing or mis-shaped sites.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [3] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
       the EM algorithm", JRSS B 39 (1977).
    """

    func = "multiview.refine"
    check_choice(method, "method", func, ("em",))
    views, kinds, sizes = check_views(views, kinds, dims, func)
    max_iter, tol = check_em_options(max_iter, tol, func)
    reg, floor = check_positive(reg, "reg", func), check_positive(floor, "floor", func)
    params = dict(getattr(estimate, "params", estimate))
    names = ["weights"] + [n for v, kind in enumerate(kinds)
                           for n in ([f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"])]
    missing = [n for n in names if n not in params]
    if missing:
        raise bad_argument("estimate", func, f"the sites {names}", f"missing {missing}", describe=False)
    k = np.asarray(params["weights"]).size
    for v, (kind, size) in enumerate(zip(kinds, sizes)):
        for n in ([f"beta_{v}"] if kind == "categorical" else [f"loc_{v}", f"scale_{v}"]):
            if np.shape(params[n]) != (k, size):
                raise bad_argument("estimate", func, f"{n!r} of shape ({k}, {size})",
                                   f"shape {np.shape(params[n])}", describe=False)
    one_hot = {v: sp.csr_matrix((np.ones(len(x)), (np.arange(len(x)), x)), shape=(len(x), size))
               for v, (x, kind, size) in enumerate(zip(views, kinds, sizes)) if kind == "categorical"}

    def normalize(rows):
        rows = np.maximum(rows / np.maximum(rows.sum(axis=-1, keepdims=True), np.finfo(float).tiny), floor)
        return rows / rows.sum(axis=-1, keepdims=True)

    def estep(p):
        logp = np.log(p["weights"])[None, :]
        for v, kind in enumerate(kinds):
            if kind == "categorical":
                logp = logp + np.log(p[f"beta_{v}"]).T[views[v]]
            else:
                logp = logp + gaussian_log_density(views[v], p[f"loc_{v}"], p[f"scale_{v}"] ** 2)
        return responsibilities(logp)

    def mstep(resp):
        nk = resp.sum(axis=0) + 10 * np.finfo(float).eps
        out = {"weights": nk / nk.sum()}
        for v, kind in enumerate(kinds):
            if kind == "categorical":
                out[f"beta_{v}"] = normalize(np.asarray(one_hot[v].T @ resp).T)
            else:
                x = views[v]
                loc = resp.T @ x / nk[:, None]
                var = np.maximum(resp.T @ (x * x) / nk[:, None] - loc**2, 0.0) + reg
                out[f"loc_{v}"], out[f"scale_{v}"] = loc, np.sqrt(var)
        return out

    start = {n: np.asarray(params[n], dtype=np.float64) for n in names}
    start["weights"] = positive_weights(start["weights"])
    for v in one_hot:
        start[f"beta_{v}"] = normalize(start[f"beta_{v}"])
    refined, trace, n_iter, converged, decreases = em_loop(
        estep, mstep, start, max_iter=max_iter, tol=tol, n_observations=len(views[0]), func=func)
    refined["weights"] = positive_weights(refined["weights"])
    facts = getattr(estimate, "facts", None) or _facts(kinds, -1)
    diagnostics = {"spectral": dict(getattr(estimate, "diagnostics", {})),
                   "refine": {"method": method, "n_iter": n_iter, "converged": converged, "log_likelihood": trace}}
    return RefineResult(SpectralEstimate("multiview", refined, diagnostics, facts=facts), trace, n_iter, converged,
                        method, {"n_observations": len(views[0]), "decreases": decreases})
