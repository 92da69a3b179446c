"""Label alignment: match mixture components to a reference labelling.

Mixture components (topics, states, clusters) are identified only up to a
permutation. A spectral estimate fixes one labelling; posterior draws (or
another estimate) are mapped onto it by solving a linear assignment problem
(the Hungarian algorithm, :func:`scipy.optimize.linear_sum_assignment`) on
the distances between the components' parameter rows.

Pure NumPy/SciPy: usable on draws from any sampler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from specinit._validation import bad_argument, check_choice

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from specinit.estimate import SpectralEstimate

__all__ = [
    "match_components",
    "draw_permutations",
    "align_draws",
    "topic_error",
    "amari_index",
]

_METRICS = ("l1", "l2")


def _as_rows(array, name: str, func: str) -> np.ndarray:
    value = np.asarray(array, dtype=np.float64)
    if value.ndim == 0 or value.shape[0] == 0:
        raise bad_argument(name, func, "an array with a leading component axis of length >= 1", value)
    if not np.all(np.isfinite(value)):
        raise bad_argument(name, func, "finite values", "non-finite entries", describe=False)
    return value.reshape(value.shape[0], -1)


def _cost(reference: np.ndarray, candidate: np.ndarray, metric: str) -> np.ndarray:
    # scipy's compiled pairwise distances: no (k, k, d) temporary (10x faster than broadcasting at k = 20, d = 3k)
    return cdist(reference, candidate, "cityblock" if metric == "l1" else "euclidean")


def match_components(reference: ArrayLike, candidate: ArrayLike, metric: Literal["l1", "l2"] = "l1") -> np.ndarray:
    """Permutation of ``candidate``'s components that best matches ``reference``.

    Solves :math:`\\min_\\pi \\sum_i d(r_i, c_{\\pi(i)})` exactly with the
    Hungarian algorithm, where ``d`` is the L1 or L2 distance between
    component rows.

    Parameters
    ----------
    reference : array-like, shape (k, ...)
        Reference components along the first axis (trailing axes are
        flattened).
    candidate : array-like, shape (k, ...)
        Components to relabel, same shape as ``reference``.
    metric : {"l1", "l2"}
        Distance between rows.

    Returns
    -------
    perm : ndarray of int, shape (k,)
        ``candidate[perm]`` is aligned with ``reference``: reference
        component ``i`` is candidate component ``perm[i]``.

    Raises
    ------
    ValueError
        If the shapes differ, an input is empty or has non-finite values, or
        ``metric`` is unknown.
    """
    func = "match_components"
    check_choice(metric, "metric", func, _METRICS)
    ref = _as_rows(reference, "reference", func)
    cand = _as_rows(candidate, "candidate", func)
    if np.shape(reference) != np.shape(candidate):
        raise bad_argument(
            "candidate", func, f"of the reference's shape {np.shape(reference)}", f"shape {np.shape(candidate)}", describe=False
        )
    rows, cols = linear_sum_assignment(_cost(ref, cand, metric))
    perm = np.empty(ref.shape[0], dtype=np.intp)
    perm[rows] = cols
    return perm


def _reference_params(reference, func: str) -> tuple[dict, object]:
    """``(params, facts)`` of a SpectralEstimate, or ``(dict, None)`` for a plain dict."""
    if isinstance(reference, Mapping):
        return dict(reference), None
    params = getattr(reference, "params", None)
    if not isinstance(params, Mapping):
        raise bad_argument("reference", func, "a SpectralEstimate or a dict of site -> array", reference, kind=TypeError)
    return dict(params), getattr(reference, "facts", None)


def _resolve_axes(component_axes, facts, func: str) -> dict:
    if component_axes is None:
        if facts is None or not facts.component_axes:
            raise bad_argument("component_axes", func, "given when the reference is a plain dict (a SpectralEstimate "
                               "carries its model's component axes)", component_axes)
        component_axes = facts.component_axes
    elif not isinstance(component_axes, Mapping):
        raise bad_argument("component_axes", func, "a dict of site -> axis, or None", component_axes, kind=TypeError)
    return {name: (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes) for name, axes in component_axes.items()}


def draw_permutations(samples: Mapping[str, ArrayLike], reference: SpectralEstimate | Mapping[str, ArrayLike], *,
                      match_on: str = "beta", axis: int = 0, metric: Literal["l1", "l2"] = "l1") -> np.ndarray:
    """Per-draw permutations aligning ``samples[match_on]`` to the reference.

    Parameters
    ----------
    samples : dict of str -> array-like
        Draws with leading ``(chain, draw)`` axes.
    reference : SpectralEstimate or dict of str -> array-like
        The labelling to align to; must contain ``match_on``.
    match_on : str
        Site whose components are compared.
    axis : int
        Component axis of ``match_on`` (after the chain and draw axes).
    metric : {"l1", "l2"}
        See :func:`match_components`.

    Returns
    -------
    perms : ndarray of int, shape (chain, draw, k)
        ``perms[c, d]`` is :func:`match_components` of draw ``(c, d)``.

    Raises
    ------
    ValueError
        If ``match_on`` is missing, or a draw's shape differs from the
        reference's.
    """
    func = "draw_permutations"
    params, _ = _reference_params(reference, func)
    if match_on not in params or match_on not in samples:
        raise bad_argument(
            "match_on", func, f"a site of both the reference ({sorted(params)}) and the samples ({sorted(samples)})", match_on
        )
    draws = np.asarray(samples[match_on], dtype=np.float64)
    ref = np.asarray(params[match_on], dtype=np.float64)
    if draws.ndim < 2 or draws.shape[2:] != ref.shape:
        raise bad_argument(
            "samples", func, f"draws of {match_on!r} with shape (chain, draw, *{ref.shape}) (the reference's shape)",
            f"shape {draws.shape}", describe=False,
        )
    if not -ref.ndim <= axis < ref.ndim:
        raise bad_argument("axis", func, f"an axis of {match_on!r} (ndim {ref.ndim})", axis)
    ref = np.moveaxis(ref, axis, 0)
    draws = np.moveaxis(draws, 2 + axis % ref.ndim, 2)
    perms = np.empty(draws.shape[:2] + (ref.shape[0],), dtype=np.intp)
    for chain, draw in np.ndindex(*draws.shape[:2]):
        perms[chain, draw] = match_components(ref, draws[chain, draw], metric=metric)
    return perms


def align_draws(samples: Mapping[str, ArrayLike], reference: SpectralEstimate | Mapping[str, ArrayLike],
                component_axes: Mapping[str, int | tuple[int, ...]] | None = None, match_on: str | None = None, *,
                metric: Literal["l1", "l2"] = "l1") -> dict[str, np.ndarray]:
    """Relabel every draw's components to the reference labelling.

    For each draw, the permutation is computed on the site ``match_on``
    (:func:`draw_permutations`) and applied to every site listed in
    ``component_axes``, so that all component-indexed parameters of a draw
    are relabelled consistently (LDA: rows of ``beta`` and ``alpha`` and the
    last axis of ``theta``; HMM: both axes of ``transition``).

    Parameters
    ----------
    samples : dict of str -> array-like
        Draws with leading ``(chain, draw)`` axes, e.g.
        ``mcmc.get_samples(group_by_chain=True)``.
    reference : SpectralEstimate or dict of str -> array-like
        The labelling to align to.
    component_axes : dict of str -> int or tuple of int, or None
        Component axes of each site, counted after the chain and draw axes.
        ``None`` uses the reference estimate's
        :attr:`~specinit.estimate.ModelFacts.component_axes`. Listed sites
        missing from ``samples`` are skipped, as are sites with scalar draws
        (a parameter shared by all components, e.g. one GMM scale).
    match_on : str, optional
        Site used to compute the permutation; its entry in
        ``component_axes`` must be a single axis (default 0). ``None`` uses
        the reference estimate's ``facts.match_site`` (``"beta"`` for a
        plain dict).
    metric : {"l1", "l2"}
        See :func:`match_components`.

    Returns
    -------
    dict of str -> ndarray
        A new dict with the same keys as ``samples``; sites not listed in
        ``component_axes`` are returned unchanged (as NumPy arrays).

    Raises
    ------
    ValueError
        If ``match_on`` is missing or has several component axes, or a listed
        site's component axis does not have length k.
    TypeError
        If ``reference`` or ``component_axes`` has the wrong type.
    """
    func = "align_draws"
    params, facts = _reference_params(reference, func)
    axes = _resolve_axes(component_axes, facts, func)
    if match_on is None:
        match_on = facts.match_site if facts is not None and facts.match_site else "beta"
    match_axes = axes.get(match_on, (0,))
    if len(match_axes) != 1:
        raise bad_argument("match_on", func, "a site with a single component axis", f"{match_on!r} with axes {match_axes}", describe=False)
    perms = draw_permutations(samples, params, match_on=match_on, axis=match_axes[0], metric=metric)
    k = perms.shape[-1]
    aligned = {name: np.asarray(value) for name, value in samples.items()}
    for name, site_axes in axes.items():
        if name not in aligned or aligned[name].ndim == 2:
            continue
        value = aligned[name]
        for ax in site_axes:
            if not -(value.ndim - 2) <= ax < value.ndim - 2 or value.shape[2 + ax % (value.ndim - 2)] != k:
                raise bad_argument(
                    "component_axes", func, f"axes of length k = {k} for every listed site",
                    f"axis {ax} of {name!r}, whose draws have shape {value.shape[2:]}", describe=False,
                )
        for ax in site_axes:
            ax = 2 + ax % (value.ndim - 2)
            index = perms.reshape(perms.shape[:2] + (1,) * (ax - 2) + (k,) + (1,) * (value.ndim - ax - 1))
            value = np.take_along_axis(value, index, axis=ax)
        aligned[name] = value
    return aligned


def topic_error(reference_beta: ArrayLike, estimated_beta: ArrayLike) -> float:
    """Mean L1 distance between matched topics.

    Parameters
    ----------
    reference_beta, estimated_beta : array-like, shape (k, V)
        Topic-word distributions (rows), e.g. the true and the estimated
        topics.

    Returns
    -------
    float
        :math:`\\frac{1}{k} \\sum_i \\lVert r_i - e_{\\pi(i)} \\rVert_1` for
        the best permutation :math:`\\pi` (:func:`match_components`); 0 for
        identical topics, at most 2 for distributions.

    Raises
    ------
    ValueError
        If the shapes differ or are not two-dimensional.
    """
    ref = np.asarray(reference_beta, dtype=np.float64)
    est = np.asarray(estimated_beta, dtype=np.float64)
    if ref.ndim != 2:
        raise bad_argument("reference_beta", "topic_error", "a two-dimensional (k, V) array", ref)
    if est.shape != ref.shape:
        raise bad_argument("estimated_beta", "topic_error", f"of the reference's shape {ref.shape}", est)
    perm = match_components(ref, est, metric="l1")
    return float(np.abs(ref - est[perm]).sum(axis=1).mean())


def amari_index(true_loadings: ArrayLike, estimated_loadings: ArrayLike) -> float:
    """Amari index between two mixing matrices: 0 when equal up to scale, sign and permutation.

    With ``P = pinv(B) A`` for mixing matrices ``A`` (true) and ``B``
    (estimated), both (d, k) (the transposes of ``loadings``),

    ``(1 / (2 k (k - 1))) [sum_i (sum_j |P_ij| / max_j |P_ij| - 1) + sum_j (sum_i |P_ij| / max_i |P_ij| - 1)]``,

    a number in [0, 1].

    Parameters
    ----------
    true_loadings, estimated_loadings : array, shape (k, d)
        Loadings (rows are mixing-matrix columns).

    Returns
    -------
    float
        The Amari index (0 for k = 1).

    Raises
    ------
    ValueError
        If the shapes differ.

    References
    ----------
    .. [1] Amari, Cichocki, Yang, "A new learning algorithm for blind signal
       separation", NIPS 1996.
    """
    A = np.asarray(true_loadings, dtype=np.float64).T
    B = np.asarray(estimated_loadings, dtype=np.float64).T
    if A.shape != B.shape or A.ndim != 2:
        raise bad_argument("estimated_loadings", "amari_index", f"of the true loadings' shape {A.shape[::-1]}",
                           B.T)
    k = A.shape[1]
    if k == 1:
        return 0.0
    P = np.abs(np.linalg.pinv(B) @ A)
    rows = (P.sum(axis=1) / P.max(axis=1) - 1).sum()
    cols = (P.sum(axis=0) / P.max(axis=0) - 1).sum()
    return float((rows + cols) / (2 * k * (k - 1)))
