"""Nonparametric multi-view mixtures by kernel embeddings: spectral estimate and NumPyro program.

A hidden class ``h ~ Categorical(weights)`` and ``l >= 3`` real-valued views
``x_v`` (shapes (N, d_v)) that are conditionally independent given ``h``,
each with an ARBITRARY conditional density ``p_{v,h}`` (skewed, multimodal,
heavy-tailed). Seed 004's estimator ([1]_) embeds the views with a Gaussian
RBF kernel, whitens the second-order embedding (KernelSVD, Alg. 1), decomposes
the whitened third-order embedding (eq. 39) with the tensor power method
(Alg. 2) and reads off the mixing weights (from the tensor eigenvalues) and
the conditional embeddings of every component (eq. 40); see
:mod:`specinit.engine.kernels` for the low-rank features that keep it
``O(N r)`` in memory (random Fourier features of rank 128 by default, or
Nystrom with pivoted-Cholesky landmarks) and the median-heuristic bandwidth.

* ``exchangeable=True`` (views of the same kind: same dimension and the same
  conditional densities) uses one feature map for every view and the
  symmetric estimator of [1]_ Sec. 6;
* otherwise (the default; views of different kinds or dimensions) every view
  gets its own feature map and bandwidth, and the views are symmetrized onto
  a target view in projected coordinates, as the parametric multi-view
  engine does (:func:`specinit.engine.views.fit_multiview`).

From the estimate, :func:`conditional_density` evaluates a kernel density of
every component and view (non-negative, integrating to one), and the
projection onto a parametric family ([1]_ Sec. 7) fits, per component and
view, a mixture of ``m`` diagonal Gaussians to it. That projection is what
the NumPyro program :func:`model` uses: sites ``weights`` (k,), and per view
``v`` ``mix_<v>`` (k, m) (rows on the simplex), ``loc_<v>`` and
``scale_<v>`` (k, m, d_v); the class is summed out (log-sum-exp), with one
log-likelihood per observation in the plate ``data``.

References
----------
.. [1] Song, Anandkumar, Dai, Xie, "Nonparametric Estimation of Multi-View
   Latent Variable Models", ICML 2014: Alg. 1, eq. 39, Alg. 2, eq. 40, Sec. 7.
.. [2] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
   learning latent variable models", JMLR 2014, Sec. 3.3 (multi-view
   symmetrization).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from specinit._validation import Interval, Options, StoredArrayError, as_generator, bad_argument, bad_stored, \
    check_allocation, check_int, check_magnitude, check_positive, current_entry, public, stored_array, warn
from specinit.distributions.mixtures import MixtureLikelihood, gaussian_mixture_components, stack_views
from specinit.engine.kernel_densities import (
    cv_bandwidth,
    density_coefficients,
    fit_weighted_gmm,
    positive_part_mass,
    weighted_kde,
)
from specinit.engine.kernel_features import (
    FEATURES,
    NystromFeatures,
    RandomFourierFeatures,
    check_bandwidth,
    check_no_constant_columns,
    feature_map_from_arrays,
    kernel_features,
    median_bandwidth,
)
from specinit.engine.kernels import ExchangeableViews
from specinit.engine.rows import unit_of
from specinit.engine.views import ViewMoments, ViewSums, multiview_population
from specinit.estimate import Site, SpectralEstimate
from specinit.faces import Face, Param, face, view_face
from specinit.family import COMMON_OPTIONS, DEFERRED_ESTIMATE, Family, k_param, site_values
from specinit.refine import RefineResult

if TYPE_CHECKING:
    import jax
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit
    from specinit.engine.protocols import Moments
    from specinit.engine.views import MultiViewFit

__all__ = [
    "FAMILY",
    "KernelMoments",
    "KernelMultiview",
    "KernelSums",
    "check_views",
    "conditional_density",
    "log_likelihood",
    "model",
    "population_moments",
    "predict",
    "projected_density",
    "refine",
    "reservoir",
    "spectral",
    "spectral_from_moments",
    "update",
]

_EM_POINTS = 1000  # support points (a random subset; the support is in random order) used by the projection EM


@public
def check_views(views: Sequence[ArrayLike]) -> list[np.ndarray]:
    """Validate real-valued views: at least 3, same number of rows, finite, no constant column.

    Parameters
    ----------
    views : sequence of arrays
        Each (N,) or (N, d_v); 1-D views become (N, 1).

    Returns
    -------
    list of ndarray
        float64 arrays of shape (N, d_v).

    Raises
    ------
    TypeError
        ``views`` not a list, or a non-numeric view.
    ValueError
        Fewer than 3 views, different numbers of rows, NaN/inf, fewer than 2
        rows, or a constant column.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 2 (multi-view model: l >= 3
    views of the same observations).
    """
    checked = _finite_views(views)
    for i, a in enumerate(checked):
        check_no_constant_columns(a, f"views[{i}]", None)
    return checked


def _finite_views(views) -> list:
    """:func:`check_views` but for the constant columns (a later batch of an update may be a single row)."""
    if views is None or isinstance(views, np.ndarray) or not hasattr(views, "__len__"):
        raise bad_argument("views", None, "a list of per-view (N, d_v) arrays", views, kind=TypeError)
    arrays = [np.asarray(v) for v in views]
    arrays = [a[:, None] if a.ndim == 1 and a.dtype != object else a for a in arrays]
    from specinit.engine.sources import ViewSource

    checked = ViewSource(arrays).views
    for i, a in enumerate(checked):
        check_magnitude(a, f"views[{i}]")
    return checked


def kernel_components(spec, value):
    """``log p(x | h)`` of stacked views under per-view Gaussian mixtures, shape (N, k) (the one likelihood).

    Parameters
    ----------
    spec : dict
        ``"params"``: per view ``(mix, loc, scale)``; ``"dims"``: the view dimensions.
    value : array, shape (N, D)
        Stacked views.

    Returns
    -------
    array, shape (N, k)
    """
    total, start = 0.0, 0
    for (mix, loc, scale), d in zip(spec["params"], spec["dims"]):
        total = total + gaussian_mixture_components(value[..., start:start + d], mix, loc, scale)
        start += d
    return total


def _check_feature_memory(views, rank: int, exchangeable: bool) -> None:
    """Raise MemoryError when the (N, rank) feature views of ``views`` would pass the memory budget."""
    n_views = len(views)
    n_rows = views[0].shape[0] * (n_views if exchangeable else 1)
    check_allocation(2 * 8 * float(n_rows) * rank * n_views, "rank", f"(N, rank) = ({n_rows}, {rank}) features "
                     f"for {n_views} views")


def _feature_maps(views, *, bandwidth, rank, features, exchangeable, seed) -> tuple[tuple, list, tuple]:
    """``(units, views divided by their units, feature maps)`` of checked views (see :class:`KernelMoments`)."""
    n_views, rng = len(views), as_generator(seed)
    if bandwidth is not None and np.ndim(bandwidth) == 0:
        bandwidth = [bandwidth] * n_views
    if bandwidth is not None and len(bandwidth) != n_views:
        raise bad_argument("bandwidth", None, f"a number or one entry per view ({n_views})", bandwidth)
    units = (unit_of(*views),) * n_views if exchangeable else tuple(unit_of(x) for x in views)
    views = [x / unit for x, unit in zip(views, units)]
    bands = None if bandwidth is None else [check_bandwidth(b, views[v].shape[1], f"bandwidth[{v}]", None)
                                            / units[v] for v, b in enumerate(bandwidth)]
    if exchangeable:
        dims = [v.shape[1] for v in views]
        if len(set(dims)) != 1:
            raise bad_argument("exchangeable", None, "False for views of different dimensions", f"dims {dims}",
                               describe=False)
        pooled = np.concatenate(views, axis=0)
        band = median_bandwidth(pooled, seed=rng, name="views", func=None) if bands is None else np.mean(bands, 0)
        shared = kernel_features(pooled, features=features, rank=rank, bandwidth=band, seed=rng, name="views",
                                 func=None)
        return units, views, (shared,) * n_views
    return units, views, tuple(kernel_features(x, features=features, rank=rank,
                                               bandwidth=None if bands is None else bands[v], seed=rng,
                                               name=f"views[{v}]", func=None) for v, x in enumerate(views))


@public
def reservoir(keys: np.ndarray, views: Sequence[np.ndarray], size: int) -> tuple[np.ndarray, tuple]:
    """The rows of ``views`` with the ``size`` smallest ``keys``, in the order of their keys.

    With keys drawn uniformly at random for every observation, these rows
    are a uniform random subset of the observations (without replacement),
    in random order; keeping the smallest keys of a kept subset and a new
    batch gives the same subset as keeping them of all the observations, so
    the subset is maintained exactly as batches arrive (bottom-k sampling).

    Parameters
    ----------
    keys : ndarray, shape (N,)
        One key per observation.
    views : sequence of ndarray
        Arrays with N rows.
    size : int
        At most this many rows are kept.

    Returns
    -------
    (ndarray, tuple of ndarray)
        The kept keys (ascending) and the kept rows of every view.
    """
    keys = np.asarray(keys, dtype=np.float64)
    keep = np.argpartition(keys, size - 1)[:size] if keys.size > size else np.arange(keys.size)
    keep = keep[np.argsort(keys[keep], kind="stable")]
    return keys[keep], tuple(np.asarray(x)[keep] for x in views)


class KernelSums:
    """The exact additive summary of kernel multi-view batches: feature sums, the feature maps, a support sample.

    The feature maps (bandwidths by the median heuristic, Nystrom landmarks)
    and the views' units are fixed by the first batch; the pair and triple
    sums of the feature views (:class:`~specinit.engine.views.ViewSums`) add
    up over batches exactly, and the density support is a uniform random
    subset of every observation seen (:func:`reservoir` on uniform keys).

    Parameters
    ----------
    sums : ViewSums
        Sums of the feature views.
    features : tuple
        One feature map per view.
    units : tuple of float
        The units the views are divided by.
    rank : int
        The feature rank asked for (Nystrom maps may have fewer features).
    exchangeable : bool
        One shared feature map and the symmetric estimator.
    capacity : int
        The support's largest size (``max_support`` of the first batch).
    keys : ndarray, shape (n_support,)
        The support's keys (ascending).
    support : tuple of ndarray
        The support rows of every view, divided by the units.
    """

    def __init__(self, sums: ViewSums, features: tuple, units: tuple, rank: int, exchangeable: bool, capacity: int,
                 keys: ArrayLike, support: tuple) -> None:
        self.sums, self.features, self.units = sums, tuple(features), tuple(float(u) for u in units)
        self.rank, self.exchangeable, self.capacity = int(rank), bool(exchangeable), int(capacity)
        self.keys, self.support = np.asarray(keys, dtype=np.float64), tuple(support)

    @classmethod
    def of_batch(cls, views: list, features: tuple, units: tuple, rank: int, exchangeable: bool, capacity: int,
                 rng: np.random.Generator) -> "KernelSums":
        """The summary of one batch of views already divided by ``units``; ``rng`` draws the support keys.

        Raises
        ------
        MemoryError
            The pair and triple sums over the memory budget.
        """
        sums = ViewSums.from_views([fm.transform(x) for fm, x in zip(features, views)], len(views), "rank")
        keys, support = reservoir(rng.random(views[0].shape[0]), views, capacity)
        return cls(sums, features, units, rank, exchangeable, capacity, keys, support)

    def __add__(self, batch: "KernelSums") -> "KernelSums":
        keys, support = reservoir(np.concatenate([self.keys, batch.keys]),
                                  [np.concatenate(pair) for pair in zip(self.support, batch.support)], self.capacity)
        return KernelSums(self.sums + batch.sums, self.features, self.units, self.rank, self.exchangeable,
                          self.capacity, keys, support)

    def moments(self) -> KernelMoments:
        """The moments that :func:`spectral_from_moments` reads (the feature sums' cross moments, the support)."""
        return KernelMoments(self.features, self.sums.moments([1.0] * len(self.features)), self.exchangeable,
                             self.support, self.units)

    def to_arrays(self) -> dict:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them)."""
        out = {"sums/" + key: value for key, value in self.sums.to_arrays().items()}
        out.update({f"features_{v}/{key}": value for v, fm in enumerate(self.features)
                    for key, value in fm.to_arrays().items()})
        out.update({f"support_{v}": x for v, x in enumerate(self.support)})
        out.update(units=np.asarray(self.units), keys=self.keys,
                   options=np.asarray([self.rank, self.exchangeable, self.capacity], dtype=np.int64))
        return out

    @classmethod
    def from_arrays(cls, arrays: dict, name: str = "estimate") -> "KernelSums":
        """The summary saved by :meth:`to_arrays`, every array checked (:func:`~specinit._validation.stored_array`).

        Raises
        ------
        specinit._validation.StoredArrayError
            A ValueError naming the missing, inconsistent or non-finite array (``sums/...``,
            ``features_<v>/...`` for the view sums and feature maps).
        """
        def within(prefix, read):
            try:
                return read({key[len(prefix):]: value for key, value in arrays.items() if key.startswith(prefix)},
                            name)
            except StoredArrayError as exc:
                raise exc.under(prefix) from None

        what = "kernel sums"
        sums = within("sums/", ViewSums.from_arrays)
        n_views = sums.n_base
        maps = tuple(within(f"features_{v}/", feature_map_from_arrays) for v in range(n_views))
        for v, fm in enumerate(maps):
            if fm.rank != sums.dims[v]:
                raise bad_stored(name, what, f"features_{v}/" + ("omega" if hasattr(fm, "omega") else "projection"),
                                 f"a feature map of rank {sums.dims[v]} (the width of 'sums/first_{v}')", fm.rank)
        units = stored_array(arrays, "units", what, name, shape=(n_views,))
        if not np.all(units > 0):
            raise bad_stored(name, what, "units", "> 0", f"minimum {units.min():g}")
        keys = stored_array(arrays, "keys", what, name, ndim=1)
        rank, exchangeable, capacity = stored_array(arrays, "options", what, name, shape=(3,), integer=True)
        if rank < max(fm.rank for fm in maps) or capacity < keys.size:
            raise bad_stored(name, what, "options", f"the rank (>= {max(fm.rank for fm in maps)}, the feature maps'), "
                             f"exchangeable and the support's capacity (>= {keys.size}, the keys kept)",
                             [int(rank), int(exchangeable), int(capacity)])
        support = tuple(stored_array(arrays, f"support_{v}", what, name, shape=(keys.size, fm.dim))
                        for v, fm in enumerate(maps))
        return cls(sums, maps, tuple(units), int(rank), bool(exchangeable), int(capacity), keys, support)


def _n_views(params) -> int:
    v = 0
    while f"loc_{v}" in params:
        v += 1
    return v


@dataclass(frozen=True)
class KernelMoments:
    """What :func:`spectral_from_moments` needs: moments of the feature views and, from data, the views.

    Attributes
    ----------
    features : tuple
        One feature map per view (:class:`specinit.engine.kernel_features.RandomFourierFeatures`
        or :class:`~specinit.engine.kernel_features.NystromFeatures`; the same object
        for every view when ``exchangeable``).
    moments : ViewMoments or MultiViewPopulation
        Cross moments of the feature views ``phi_v(x_v)``.
    exchangeable : bool
        Whether the views share one feature map and the symmetric estimator is used.
    support : tuple of ndarray or None
        Built from data: the same random subset of at most ``max_support`` observations of every view
        (:func:`reservoir`; rows (n_support, d_v), each view divided by its unit, in random order), which
        carries the kernel densities; None for population moments.
    units : tuple of float
        The unit of every view of data (:func:`specinit.engine.rows.unit_of`; one unit shared by all views
        when ``exchangeable``): features, bandwidths and densities are built on the views divided by it,
        locations, scales, bandwidths and density supports are multiplied back (empty: population moments).

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, eqs. 34-35.
    """

    features: tuple
    moments: object
    exchangeable: bool
    support: tuple | None = None
    units: tuple = ()


def _mixture_embedding(feature_map, mix, loc, scale):
    """``sum_j mix_{h,j} E_{N(loc_{h,j}, scale_{h,j}^2)}[phi]`` for every component h -> (k, r)."""
    return np.einsum("hj,hjr->hr", mix, feature_map.gaussian_embedding(loc, scale))


@dataclass(frozen=True)
class KernelData:
    """Views as EM reads them: each view, the stacked values, the views' column variances."""

    views: list
    stacked: np.ndarray
    variances: list


class KernelMultiview(Family):
    """Nonparametric multi-view mixtures by kernel embeddings, projected onto per-view Gaussian mixtures."""

    name = "kernel_multiview"
    data_kind = "views"
    fit_kind = "multiview"
    component_state = ("embedding_", "density_weights_", "density_bandwidth_", "density_norm_")
    summary = KernelSums
    options = {
        "bandwidth": Param(
            "float, or sequence with one entry (float or (d_v,) vector) per view, optional",
            "Gaussian kernel length scale(s); default: half the median distance per view on standardized "
            "columns (:func:`specinit.engine.kernel_features.median_bandwidth`; pooled over the views when "
            "``exchangeable``).", None, annotation=float | Sequence[float | ArrayLike] | None),
        "rank": Param(
            "int",
            "Feature rank ``r``: memory ``O(N r)`` per view.", 128, Interval(int, 2)),
        "features": Param(
            "{'rff', 'nystrom'}",
            "Random Fourier features (default) or Nystrom features with pivoted-Cholesky landmarks.", 'rff',
            Options(FEATURES)),
        "exchangeable": Param(
            "bool",
            "Views of the same kind (same dimension, same conditional densities): one shared feature map and "
            "the symmetric estimator of seed 004 Sec. 6. Default False: per-view feature maps, symmetrized "
            "onto the target view.", False, lambda name, value: bool(value)),
        "m": Param(
            "int",
            "Gaussians per component and view in the parametric projection.", 2, Interval(int, 1)),
        "target": Param(
            "int",
            "Target view of the symmetrization (``exchangeable=False``), and the view whose ``loc`` labels "
            "are matched (facts).", -1, Interval(int)),
        "max_support": Param(
            "int",
            "At most this many observations (a random subset) carry the kernel density of each view "
            "(evaluation cost ``O(n_points max_support k)``).", 4000, Interval(int, 1)),
    }
    arguments = {
        "views": Param(
            "sequence of arrays",
            "At least 3 views with the same observations, each (N,) or (N, d_v), real-valued, no constant "
            "column."),
        "moments": Param(
            "KernelMoments",
            "From :func:`population_moments` or built from data by :func:`spectral`.", annotation=KernelMoments),
        "k": k_param("Number of classes, at most ``rank``; the ``k`` embedded conditional distributions of "
                   "each view must be linearly independent."),
        "method": Param(
            "{'tpm', 'svtd', 'eca', 'als'}",
            "Tensor decomposition (default: robust tensor power method, seed 004 Alg. 2).", 'tpm'),
        "seed": Param(
            "int or numpy.random.Generator",
            "Random features, range finders, decomposition, support subset.", 0),
        "approach": COMMON_OPTIONS["approach"].documented(
            "``exchangeable=False`` only: as for :func:`specinit.models.multiview.spectral`."),
        "backend": Param(
            "{'numpy', 'jax'} or None",
            "Where the passes over the feature views run (:mod:`specinit.engine.backends`).", None),
    }
    advice = ("The views may not follow a k-class multi-view mixture in this kernel: try a smaller k, a larger "
              "rank, another bandwidth, or exchangeable=False.")

    def site_table(self, params: Mapping[str, Any] | None = None, target: int = -1,
                   **options: Any) -> tuple[dict, str | None]:
        n_views = _n_views(params or {})
        sites = {"weights": Site("simplex", (0,), ("components",), ("components",))}
        for v in range(n_views):
            sites[f"mix_{v}"] = Site("simplex", (0,), ("components", f"gaussian_{v}"),
                                     ("components", f"gaussian_{v}"))
            dims = ("components", f"gaussian_{v}", f"dim_{v}")
            sites[f"loc_{v}"] = Site("real", (0,), dims, dims)
            sites[f"scale_{v}"] = Site("positive", (0,), dims, dims)
        return sites, f"loc_{target % n_views}" if n_views else "weights"

    def check_state(self, estimate: SpectralEstimate) -> None:
        """The stored sums (:class:`KernelSums`), and every view's fitted arrays: ``bandwidth_<v>`` (d_v,) > 0,
        ``embedding_<v>`` (k, r), and when fitted to data ``density_support_<v>`` (n, d_v),
        ``density_weights_<v>`` (k, n), ``density_bandwidth_<v>`` (k, d_v) > 0 and ``density_norm_<v>`` (k,) > 0."""
        super().check_state(estimate)
        state, k, what = estimate.state, estimate.k, "view fits"

        def positive(key, shape):
            value = stored_array(state, key, what, shape=shape)
            if not np.all(value > 0):
                raise bad_stored("estimate", what, key, "> 0", f"minimum {value.min():g}")

        for v in range(sum(1 for key in state if key.startswith("embedding_"))):
            d = stored_array(state, f"bandwidth_{v}", what, ndim=1).size
            positive(f"bandwidth_{v}", (d,))
            embedding = stored_array(state, f"embedding_{v}", what, ndim=2)
            if embedding.shape[0] != k:
                raise bad_stored("estimate", what, f"embedding_{v}", f"of {k} rows (k)", f"shape {embedding.shape}")
            if any(key.startswith("density_") and key.endswith(f"_{v}") for key in state):
                n = stored_array(state, f"density_support_{v}", what, shape=None, ndim=2).shape[0]
                stored_array(state, f"density_support_{v}", what, shape=(n, d))
                stored_array(state, f"density_weights_{v}", what, shape=(k, n))
                positive(f"density_bandwidth_{v}", (k, d))
                positive(f"density_norm_{v}", (k,))

    def target(self, target: int = -1, **options: Any) -> int:
        return target

    def moments(self, views: Sequence[ArrayLike], *, k: int, backend: str | Passes | None,
                bandwidth: float | Sequence[float | ArrayLike] | None = None, rank: int = 128,
                features: Literal["rff", "nystrom"] | Sequence[RandomFourierFeatures | NystromFeatures] | None = "rff",
                exchangeable: bool = False, seed: int | np.random.Generator = 0, max_support: int = 4000,
                **options: Any) -> KernelMoments:
        views = check_views(views)
        rank = Interval(int, 2).check("rank", rank)
        _check_feature_memory(views, rank, exchangeable)
        rng = as_generator(seed)
        units, views, maps = _feature_maps(views, bandwidth=bandwidth, rank=rank, features=features,
                                          exchangeable=exchangeable, seed=rng)
        _, support = reservoir(rng.random(views[0].shape[0]), views, max_support)
        return KernelMoments(maps, ViewMoments([fm.transform(x) for fm, x in zip(maps, views)], backend=backend),
                             bool(exchangeable), support, units)

    def population_moments(self, params: Mapping[str, Any],
                           features: Sequence[RandomFourierFeatures | NystromFeatures] | None = None,
                           bandwidth: float | Sequence[float | ArrayLike] | None = None, rank: int = 128,
                           exchangeable: bool = False, seed: int | np.random.Generator = 0,
                           **options: Any) -> KernelMoments:
        if "weights" not in params:
            raise bad_argument("params", None, "a dict with the site 'weights'", sorted(params))
        n_views = 0
        while f"loc_{n_views}" in params:
            n_views += 1
        if n_views < 3:
            raise bad_argument("params", None, "sites loc_0, loc_1, loc_2, ... for at least 3 views", sorted(params))
        weights = np.asarray(params["weights"], dtype=np.float64)
        comps = []
        for v in range(n_views):
            missing = [s for s in (f"mix_{v}", f"scale_{v}") if s not in params]
            if missing:
                raise bad_argument("params", None, f"the sites mix_{v}, loc_{v}, scale_{v}", f"missing {missing}",
                                   describe=False)
            mix, loc, scale = (np.asarray(params[f"{s}_{v}"], dtype=np.float64) for s in ("mix", "loc", "scale"))
            if loc.ndim != 3 or mix.shape != loc.shape[:2] or scale.shape != loc.shape or loc.shape[0] != weights.size:
                raise bad_argument(f"loc_{v}", None, "shapes mix (k, m), loc and scale (k, m, d) with "
                                   f"k={weights.size}", f"mix {mix.shape}, loc {loc.shape}, scale {scale.shape}",
                                   describe=False)
            comps.append((mix, loc, scale))
        dims = [c[1].shape[2] for c in comps]
        exchangeable = bool(exchangeable)
        if exchangeable and len(set(dims)) != 1:
            raise bad_argument("exchangeable", None, "False for views of different dimensions", f"dims {dims}",
                               describe=False)
        if features is None:
            rng = as_generator(seed, None)

            def marginal_sd(v):
                mix, loc, scale = comps[v]
                p = weights[:, None] * mix
                mean = np.einsum("hj,hjd->d", p, loc)
                second = np.einsum("hj,hjd->d", p, loc**2 + scale**2)
                return np.sqrt(np.maximum(second - mean**2, 1e-12))

            def band(v):
                if bandwidth is None:
                    return marginal_sd(v)
                value = bandwidth if np.ndim(bandwidth) == 0 else bandwidth[v]
                return check_bandwidth(value, dims[v], "bandwidth", None)

            if exchangeable:
                shared = RandomFourierFeatures(dims[0], np.mean([band(v) for v in range(n_views)], axis=0), rank, rng)
                features = (shared,) * n_views
            else:
                features = tuple(RandomFourierFeatures(dims[v], band(v), rank, rng) for v in range(n_views))
        features = tuple(features) if len(features) == n_views else tuple(features) * n_views
        embeddings = [_mixture_embedding(fm, *c) for fm, c in zip(features, comps)]
        return KernelMoments(features, multiview_population(embeddings, weights), exchangeable, None)

    def max_components(self, moments: KernelMoments) -> tuple[int, str]:
        rank = min(moments.moments.dims)
        return rank, f"<= the kernel feature rank ({rank}); increase rank"

    def kind_of(self, exchangeable: bool = False, **options: Any) -> str:
        return "exchangeable" if exchangeable else "multiview"

    def fit_input(self, moments: KernelMoments, k: int, exchangeable: bool = False, **options: Any) -> Moments:
        return ExchangeableViews(moments.moments) if exchangeable else moments.moments

    def unwhiten(self, fit: ExchangeableFit | MultiViewFit, moments: KernelMoments, k: int, floor: float,
                 rng: np.random.Generator | None = None, m: int = 2, max_support: int = 4000,
                 exchangeable: bool = False, **options: Any) -> tuple[dict, dict, dict]:
        if moments.support is not None:
            n_rows, width = moments.support[0].shape[0], max(x.shape[1] for x in moments.support)
            check_allocation(4 * 8 * float(n_rows) * k * m * width, "m",
                             f"(N, k, m, d) = ({n_rows}, {k}, {m}, {width}) mixture responsibilities")
        if exchangeable:
            lam = fit.eigenvalues
            if np.any(lam <= 0):
                warn(f"{current_entry()}: {int(np.sum(lam <= 0))} tensor eigenvalue(s) are not positive; the weights "
                     "are unreliable. Try a smaller k or more data.")
            lam = np.where(lam > 0, lam, np.finfo(float).eps)
            weights, embeddings = 1.0 / lam**2, [lam[:, None] * fit.components] * moments.moments.n_views
        else:
            weights, embeddings = fit.weights, fit.means
        rank = min(moments.moments.dims)
        diagnostics = {"raw_weights": np.asarray(weights, dtype=np.float64), "exchangeable": bool(exchangeable),
                       "feature_kind": moments.features[0].kind, "feature_rank": int(rank)}
        units = moments.units or (1.0,) * len(moments.features)
        state = {}
        for v, fm in enumerate(moments.features):
            state[f"bandwidth_{v}"] = units[v] * fm.bandwidth
            state[f"embedding_{v}"] = np.asarray(embeddings[v])
        params = {"weights": np.maximum(np.asarray(weights, dtype=np.float64), floor / k)}
        params["weights"] = params["weights"] / params["weights"].sum()
        if moments.support is None:
            return params, diagnostics, state
        rng = as_generator(0 if rng is None else rng)
        supports = [x[:max_support] for x in moments.support]  # in random order: the EM uses the first _EM_POINTS
        features = [fm.transform(x) for fm, x in zip(moments.features, supports)]
        for v, support in enumerate(supports):
            coef = density_coefficients(features, embeddings, weights, v)
            total = np.abs(coef).sum(axis=1)
            diagnostics[f"negative_mass_{v}"] = np.where(coef < 0, -coef, 0.0).sum(axis=1) / np.maximum(total, 1e-300)
            positive = np.clip(coef, 0.0, None)
            positive /= np.maximum(positive.sum(axis=1, keepdims=True), 1e-300)
            band = cv_bandwidth(support, positive)
            norm = positive_part_mass(support, coef, band, seed=rng)
            state[f"density_support_{v}"] = units[v] * support
            state[f"density_weights_{v}"] = coef
            state[f"density_bandwidth_{v}"] = units[v] * band
            state[f"density_norm_{v}"] = norm
            # importance weights (clipped density / mixture density) of at most _EM_POINTS support points
            em = support[: _EM_POINTS]
            dens = weighted_kde(em, support, coef, band, norm)
            resp = dens / np.maximum(dens @ params["weights"], 1e-300)[:, None]
            fits = [fit_weighted_gmm(em, resp[:, i] / max(resp[:, i].sum(), 1e-300), band[i], m, seed=rng)
                    for i in range(k)]
            params[f"mix_{v}"] = np.stack([f[0] for f in fits])
            params[f"loc_{v}"] = units[v] * np.stack([f[1] for f in fits])
            params[f"scale_{v}"] = units[v] * np.stack([f[2] for f in fits])
        return params, diagnostics, state

    def batch_summary(self, views: Sequence[ArrayLike], stored: KernelSums | None, n_batches: int, *,
                      bandwidth: float | Sequence[float | ArrayLike] | None = None, rank: int | None = None,
                      features: (Literal["rff", "nystrom"] | Sequence[RandomFourierFeatures | NystromFeatures]
                                 | None) = None,
                      exchangeable: bool | None = None, max_support: int | None = None,
                      seed: int | np.random.Generator = 0, **options: Any) -> KernelSums:
        """One batch's :class:`KernelSums`: the first builds the feature maps, later ones use the stored ones."""
        views = check_views(views) if stored is None else _finite_views(views)
        # the maps' and every batch's support keys' own streams: the decomposition's draws do not depend on batches
        maps_rng, *_, keys_rng = as_generator(seed).spawn(n_batches + 1)
        if stored is None:
            rank, exchangeable = 128 if rank is None else rank, bool(exchangeable)
            _check_feature_memory(views, rank, exchangeable)
            units, scaled, maps = _feature_maps(views, bandwidth=bandwidth, rank=rank,
                                                features="rff" if features is None else features,
                                                exchangeable=exchangeable, seed=maps_rng)
            return KernelSums.of_batch(scaled, maps, units, rank, exchangeable,
                                       4000 if max_support is None else max_support, keys_rng)
        if len(views) != len(stored.features) or [x.shape[1] for x in views] != [fm.dim for fm in stored.features]:
            raise bad_argument("views", None, f"the estimate's {len(stored.features)} views of dimensions "
                               f"{[fm.dim for fm in stored.features]}", f"{len(views)} views of dimensions "
                               f"{[x.shape[1] for x in views]}", describe=False)
        for name, given, kept in (("rank", rank, stored.rank), ("features", features, stored.features[0].kind),
                                  ("exchangeable", exchangeable, stored.exchangeable),
                                  ("max_support", max_support, stored.capacity)):
            if given is not None and given != kept:
                raise bad_argument(name, None, f"None or the first batch's {kept!r} (the stored feature maps are "
                                   "kept)", given)
        if bandwidth is not None:
            kept = [unit * fm.bandwidth for unit, fm in zip(stored.units, stored.features)]
            given = [bandwidth] * len(views) if np.ndim(bandwidth) == 0 else list(bandwidth)
            if len(given) != len(kept) or not all(np.allclose(np.broadcast_to(np.asarray(g, dtype=float), b.shape),
                                                              b, rtol=1e-9) for g, b in zip(given, kept)):
                raise bad_argument("bandwidth", None, "None or the first batch's bandwidths "
                                   f"{[np.round(b, 6).tolist() for b in kept]} (the stored feature maps are kept)",
                                   bandwidth)
        _check_feature_memory(views, stored.rank, stored.exchangeable)
        return KernelSums.of_batch([x / unit for x, unit in zip(views, stored.units)], stored.features, stored.units,
                                   stored.rank, stored.exchangeable, stored.capacity, keys_rng)

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, views: Sequence[ArrayLike], estimate: SpectralEstimate, **options: Any) -> KernelData:
        views = check_views(views)
        k = estimate.k
        for v, x in enumerate(views):
            loc = estimate.params.get(f"loc_{v}")
            if loc is None or loc.ndim != 3 or loc.shape[0] != k or loc.shape[2] != x.shape[1]:
                raise bad_argument("estimate", None, f"'loc_{v}' of shape ({k}, m, {x.shape[1]})",
                                   f"{None if loc is None else loc.shape}", describe=False)
        return KernelData(views, stack_views(views), [np.maximum(np.var(x, axis=0), np.finfo(float).tiny)
                                                      for x in views])

    def n_observations(self, data: KernelData) -> int:
        return int(data.stacked.shape[0])

    def component_log_prob(self, params: Mapping[str, Any], data: KernelData) -> jax.Array:
        spec = {"params": [tuple(jnp.asarray(params[f"{s}_{v}"]) for s in ("mix", "loc", "scale"))
                           for v in range(len(data.views))], "dims": [x.shape[1] for x in data.views]}
        return kernel_components(spec, jnp.asarray(data.stacked))

    def m_step(self, data: KernelData, resp: np.ndarray, params: Mapping[str, Any], reg: float = 1e-6,
               **options: Any) -> dict:
        out = {"weights": resp.sum(axis=0)}
        for v, x in enumerate(data.views):
            mix, loc, scale = (params[f"{s}_{v}"] for s in ("mix", "loc", "scale"))
            z = (x[:, None, None, :] - loc) / scale
            inner = np.log(mix) - np.sum(0.5 * z**2 + np.log(scale), axis=-1)  # (N, k, m), constants drop out
            inner = np.exp(inner - logsumexp(inner, axis=-1, keepdims=True)) * resp[:, :, None]
            mass = inner.sum(axis=0) + 10 * np.finfo(float).eps  # (k, m)
            new_loc = np.einsum("nhj,nd->hjd", inner, x) / mass[..., None]
            second = np.einsum("nhj,nd->hjd", inner, x * x) / mass[..., None]
            out[f"mix_{v}"] = mass
            out[f"loc_{v}"] = new_loc
            out[f"scale_{v}"] = np.sqrt(np.maximum(second - new_loc**2, 0.0) + reg * data.variances[v])
        return out

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralKernelMultiView`."""
        return view_face(
            "SpectralKernelMultiView", self, refine,
            "A nonparametric multi-view mixture by kernel embeddings (:mod:`specinit.models.kernel_multiview`), "
            """then EM.

            ``X`` is the list of views of
            :func:`specinit.models.kernel_multiview.spectral`; the conditional
            densities are kernel embeddings projected onto Gaussian mixtures per
            view; ``predict`` clusters the observations.""",
            ("bandwidth", "rank", "features", "exchangeable", "m", "target", "max_support"),
            answers=frozenset({"partial_fit", "deferred_update"}))


FAMILY = KernelMultiview()


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "views": Param("sequence of arrays, optional", "Observed views (each (N,) or (N, d_v)); ``None`` generates ``n`` "
                   "observations with view dimensions ``dims``.", None, annotation=Sequence[ArrayLike] | None),
    "k": Param("int", "Number of classes."),
    "m": Param("int", "Gaussians per component and view (the flexible component densities).", 2),
    "n": Param("int, optional", "Number of observations to generate (only when ``views`` is None).", None),
    "dims": Param("sequence of int, optional", "``d_v`` per view (required when ``views`` is None).", None,
                  annotation=Sequence[int] | None),
    "prior_scale": Param("float", "Scale of the Normal(0, prior_scale) prior of ``loc_<v>`` and of the "
                         "HalfNormal(prior_scale) prior of ``scale_<v>`` (data of order one to ten).", 10.0),
}


@face(MODEL_ARGUMENTS)
def model(views, *, k, m, n, dims, prior_scale) -> None:
    """NumPyro multi-view mixture with a mixture of ``m`` Gaussians per component and view.

    Returns
    -------
    None
        A NumPyro program: ``weights`` (k,) ~ Dirichlet(1); per view ``v``:
        ``mix_<v>`` (k, m) ~ Dirichlet(1) rows, ``loc_<v>`` (k, m, d_v) ~
        Normal(0, prior_scale), ``scale_<v>`` (k, m, d_v) ~
        HalfNormal(prior_scale). Observed ``views`` (stacked column-wise) in
        plate ``data`` with the class and the inner Gaussian summed out; when
        generating, ``h``, ``c_<v>`` (inner Gaussian) and ``x_<v>`` in plate ``data``.

    Raises
    ------
    ValueError
        Bad views, or ``dims`` / ``n`` missing when generating.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 7 (parametric family for the
    conditional densities).
    """
    k = check_int(k, "k", None, minimum=1)
    m = check_int(m, "m", None, minimum=1)
    prior_scale = check_positive(prior_scale, "prior_scale", None)
    if views is None:
        if n is None or dims is None:
            raise bad_argument("dims", None, "one dimension per view, with n, when views is None", dims)
        n_obs, sizes = check_int(n, "n", None, minimum=1), tuple(check_int(s, "dims", None, minimum=1) for s in dims)
    else:
        views = check_views(views)
        n_obs, sizes = views[0].shape[0], tuple(v.shape[1] for v in views)
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    params = []
    for v, d in enumerate(sizes):
        mix = numpyro.sample(f"mix_{v}", dist.Dirichlet(jnp.ones(m)).expand([k]).to_event(1))
        loc = numpyro.sample(f"loc_{v}", dist.Normal(0.0, prior_scale).expand([k, m, d]).to_event(3))
        scale = numpyro.sample(f"scale_{v}", dist.HalfNormal(prior_scale).expand([k, m, d]).to_event(3))
        params.append((mix, loc, scale))
    with numpyro.plate("data", n_obs):
        if views is None:
            h = numpyro.sample("h", dist.Categorical(weights))
            for v, (mix, loc, scale) in enumerate(params):
                c = numpyro.sample(f"c_{v}", dist.Categorical(mix[h]))
                numpyro.sample(f"x_{v}", dist.Normal(loc[h, c], scale[h, c]).to_event(1))
        else:
            components = partial(kernel_components, {"params": params, "dims": sizes})
            numpyro.sample("views", MixtureLikelihood(weights, components, n_obs, (sum(sizes),)),
                           obs=jnp.asarray(stack_views(views)))


@FAMILY.face(
    validate=True,
    params=Param("dict or SpectralEstimate", "``weights`` (k,) and, per view ``v``, ``mix_<v>`` (k, m), ``loc_<v>`` "
                 "and ``scale_<v>`` (k, m, d_v) (the sites of :func:`model`)."),
    features=Param("sequence of feature maps, optional", "One per view (or one shared map when ``exchangeable``); "
                   "default: random Fourier features of rank ``rank``.", None,
                   annotation=Sequence[RandomFourierFeatures | NystromFeatures] | None),
    bandwidth=KernelMultiview.options["bandwidth"].documented(
        "Kernel length scale(s) per view (a number, or one entry per view); default: the per-column standard "
        "deviation of each view's marginal (a population stand-in for the median heuristic)."),
    rank=KernelMultiview.options["rank"].documented("Feature rank when ``features`` is None."),
    seed=COMMON_OPTIONS["seed"].documented("Draws the random features."))
def population_moments(params, *, features, bandwidth, rank, exchangeable, seed) -> KernelMoments:
    """Exact kernel-embedding moments of a mixture whose component densities are Gaussian mixtures.

    With the Gaussian RBF kernel and random Fourier (or Nystrom) features,
    the mean embedding of a Gaussian is closed form, so
    ``E[phi_v(x_v) | h] = sum_j mix_{v,h,j} E_{N(loc, scale^2)}[phi_v]`` is
    exact and the cross moments of the feature views are those of a
    multi-view mixture with these means (no quadrature, no sampling).

    Returns
    -------
    KernelMoments
        For :func:`spectral_from_moments` (exact recovery of the weights and
        of the conditional embeddings).

    Raises
    ------
    ValueError
        Fewer than 3 views, a missing site, mismatched shapes, a bandwidth <= 0.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, eqs. 34-35 (population embeddings).
    """
    return FAMILY.population_moments(site_values(params), features=features, bandwidth=bandwidth, rank=rank,
                                     exchangeable=exchangeable, seed=seed)


@FAMILY.face()
def spectral_from_moments(moments, k, *, m, target, method, max_support, seed, decompose_options,
                          approach) -> SpectralEstimate:
    """Weights, conditional embeddings and (from data) densities and their Gaussian-mixture projection.

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`. From population moments (no data) only
        ``weights`` is a parameter; the exact conditional embeddings are in
        ``state["embedding_<v>"]`` (and labels match on ``weights``).

    Raises
    ------
    ValueError
        ``k`` larger than the feature rank.
    specinit.engine.whitening.IndefiniteMomentError
        If the second-order embedding is not positive on its top k eigenvectors.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, Alg. 1, eq. 39, Alg. 2, eq. 40, Sec. 7.
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, approach=approach, seed=seed,
                                        decompose_options=decompose_options, m=m, target=target,
                                        max_support=max_support, exchangeable=moments.exchangeable)


@FAMILY.face()
def spectral(views, k, *, bandwidth, rank, features, exchangeable, m, target, method, max_support, seed,
             decompose_options, approach, backend) -> SpectralEstimate:
    """Nonparametric spectral estimate of a multi-view mixture (seed 004's kernel algorithm, low rank).

    Returns
    -------
    SpectralEstimate
        ``"kernel_multiview"`` with params ``weights`` (k,) and, per view
        ``v``, the Gaussian-mixture projection ``mix_<v>`` (k, m), ``loc_<v>``
        and ``scale_<v>`` (k, m, d_v) (the sites of :func:`model`).
        ``state`` (fitted arrays, saved with the estimate):
        ``embedding_<v>`` (k, r) conditional embeddings, ``bandwidth_<v>``,
        ``density_support_<v>``, ``density_weights_<v>`` (k, n_support),
        ``density_bandwidth_<v>`` (k, d_v) and ``density_norm_<v>`` for
        :func:`conditional_density`. ``diagnostics``: ``negative_mass_<v>``
        (per component, the fraction of coefficient mass clipped at 0),
        ``raw_weights`` (before flooring), and the whitening/decomposition
        diagnostics.

    Raises
    ------
    ValueError
        Fewer than 3 views, views of different lengths, NaN/inf, constant
        columns, a bandwidth <= 0, ``k`` larger than the kernel rank, or
        ``exchangeable=True`` with views of different dimensions.
    TypeError
        Non-numeric views, unknown ``decompose_options`` keys.
    specinit.engine.whitening.IndefiniteMomentError
        If the second-order embedding is not positive on its top k eigenvectors.

    References
    ----------
    Song, Anandkumar, Dai, Xie, "Nonparametric Estimation of Multi-View Latent
    Variable Models", ICML 2014: Alg. 1 (KernelSVD), eq. 39, Alg. 2, eq. 40,
    Sec. 7 (projection to a parametric family).
    """
    rng = as_generator(seed)
    options = {"bandwidth": bandwidth, "rank": rank, "features": features, "exchangeable": exchangeable}
    report = {}
    if isinstance(k, str) and k == "auto":
        k, report = FAMILY.choose_k(views, rng=rng, backend=backend, method=method, approach=approach,
                                    decompose_options=decompose_options, m=m, target=target, max_support=max_support,
                                    **options)
    estimate = FAMILY.spectral_from_moments(FAMILY.moments(views, k=k, backend=backend, seed=rng,
                                                          max_support=max_support, **options), k,
                                            method=method, approach=approach, seed=rng,
                                            decompose_options=decompose_options, m=m, target=target,
                                            max_support=max_support, exchangeable=exchangeable)
    estimate.diagnostics.update(report)
    return estimate


@FAMILY.face(
    views=Param("sequence of arrays", "The new observations of every view (as for :func:`spectral`)."),
    estimate=DEFERRED_ESTIMATE,
    k=Param("int, optional", "Number of classes: required for the first batch; with ``estimate`` None means "
            "``estimate.k`` (the stored sums fit any k).", None, Interval(int, 1, none=True)),
    bandwidth=KernelMultiview.options["bandwidth"].documented(
        "Fixed by the first batch (the median heuristic runs on it); a later batch's must be None or the same."),
    rank=Param("int, optional", "Feature rank, fixed by the first batch (default 128); a later batch's must be "
               "None or the same.", None, Interval(int, 2, none=True)),
    features=Param("{'rff', 'nystrom'}, optional", "Feature kind, fixed by the first batch (default 'rff'; Nystrom "
                   "landmarks come from the first batch); a later batch's must be None or the same.", None,
                   lambda name, value: None if value is None else Options(FEATURES).check(name, value)),
    exchangeable=Param("bool, optional", "As for :func:`spectral`, fixed by the first batch (default False); a "
                       "later batch's must be None or the same.", None,
                       lambda name, value: None if value is None else bool(value)),
    max_support=Param("int, optional", "Size of the density support, fixed by the first batch (default 4000): a "
                      "uniform random subset of every observation seen; a later batch's must be None or the same.",
                      None, Interval(int, 1, none=True)))
def update(views, estimate, *, k, bandwidth, rank, features, exchangeable, m, target, method, max_support, seed,
           decompose_options, approach) -> SpectralEstimate:
    """Add a batch of observations to a kernel multi-view fit: exact merged feature sums, then the estimate.

    The first batch fixes the feature maps (the bandwidths of the median
    heuristic, the random frequencies or Nystrom landmarks) and the views'
    units. The estimator reads the cross moments of the feature views, which
    are sums over observations: the pair and triple sums of the features
    (:class:`KernelSums`; ``3 r^3`` floats for three views of rank ``r``)
    add up over batches exactly, so after any number of batches the weights
    and conditional embeddings are those of one fit on all the observations
    with the same feature maps (the same moments to rounding, the same
    decomposition and seed). The kernel densities are carried by a uniform
    random subset of at most ``max_support`` of all the observations seen,
    kept as batches arrive (:func:`reservoir`; the support a one-shot fit
    draws is such a subset too), and projected onto Gaussian mixtures as
    :func:`spectral` does. Classes keep their labels from batch to batch
    (matched on the target view's locations). There is no EM step (it needs
    the observations): :func:`refine` on data at hand takes the estimate
    further. The returned estimate keeps the sums, the feature maps and the
    support in its ``state`` (``moments/...``), which
    :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates go on
    in a later process. The online face of ``SpectralKernelMultiView.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"kernel_multiview"`` as from :func:`spectral`, plus ``n_batches``
        and ``n_observations`` in the diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch, another number of views or view
        dimensions than the estimate's, a ``rank``, ``features``,
        ``exchangeable`` or ``max_support`` other than the first batch's,
        an estimate without stored sums (from :func:`spectral`: fit the
        first batch with :func:`update`), or anything :func:`check_views`
        refuses.
    MemoryError
        The sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> h = rng.integers(0, 2, size=2000)
    >>> views = [rng.gamma(2.0, 1.0 + 2.0 * h) for _ in range(3)]  # skewed, class-dependent scale
    >>> est = update([v[:1000] for v in views], k=2, rank=32, bandwidth=1.0)
    >>> est = update([v[1000:] for v in views], est)
    >>> once = update(views, k=2, rank=32, bandwidth=1.0)
    >>> bool(np.allclose(np.sort(est.params["weights"]), np.sort(once.params["weights"]))), est.diagnostics["n_batches"]
    (True, 2)
    """
    stream = FAMILY.defer(views, estimate, k, bandwidth=bandwidth, rank=rank, features=features,
                          exchangeable=exchangeable, max_support=max_support, seed=seed)
    merged = stream.merged
    fit = FAMILY.spectral_from_moments(merged.moments(), stream.k, method=method, approach=approach, seed=seed,
                                       decompose_options=decompose_options, m=m, target=target,
                                       max_support=merged.capacity, exchangeable=merged.exchangeable)
    return FAMILY.streamed(fit, stream.previous, merged, stream.n_batches, n_observations=merged.sums.n)


@FAMILY.refine_face(
    estimate=Param("SpectralEstimate or dict", "``weights`` and, per view, ``mix_<v>``, ``loc_<v>``, ``scale_<v>`` "
                   "(from :func:`spectral` on data)."),
    restarts=6)
def refine(views, estimate, *, method, max_iter, tol, reg, floor, restarts, seed) -> RefineResult:
    """Spectral then refine: EM for the mixture of per-view Gaussian mixtures (:func:`model`) from an estimate.

    The E-step gives each observation's class posterior from the model's own
    likelihood; the M-step updates the class weights and, per view, each
    class's inner mixture (weights, means, diagonal variances) with the inner
    Gaussians' posteriors weighted by the class posterior (exact EM for the
    mixture of mixtures).

    Returns
    -------
    specinit.refine.RefineResult

    Raises
    ------
    ValueError
        Bad views, or an estimate of another model, without the projection, or outside its supports.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.
    """
    return FAMILY.refine(views, estimate, method=method, max_iter=max_iter, tol=tol, reg=reg, floor=floor,
                         restarts=restarts, seed=seed)


predict = FAMILY.predict_face("views", "Posterior class probabilities of every observation under the projected "
                              "model, and the most probable class.")


log_likelihood = FAMILY.log_likelihood_face("views", "Log-likelihood of every observation under the projected model "
                                            "(class and inner Gaussian summed out).")


def _points(estimate, view, points, func):
    if not isinstance(estimate, SpectralEstimate) or estimate.model != "kernel_multiview":
        raise bad_argument("estimate", func, "a SpectralEstimate of kernel_multiview.spectral", estimate, kind=TypeError)
    n_views = sum(1 for key in estimate.state if key.startswith("embedding_"))
    if not n_views:
        raise bad_argument("estimate", func, "an estimate of kernel_multiview.spectral (with its fitted state)",
                           "an estimate without kernel embeddings", describe=False)
    view = check_int(view, "view", func, minimum=-n_views, maximum=n_views - 1) % n_views
    dim = np.asarray(estimate.state[f"bandwidth_{view}"]).size
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim == 1 and dim == 1:
        pts = pts[:, None]
    if pts.ndim != 2 or pts.shape[1] != dim or not np.all(np.isfinite(pts)):
        raise bad_argument("points", func, f"a finite (n_points, {dim}) array (view {view} has {dim} columns)", points)
    return view, pts


@public
def conditional_density(estimate: SpectralEstimate, view: int, points: ArrayLike) -> np.ndarray:
    """Kernel density of every component of one view at ``points``: an (n_points, k) array.

    ``p_{v,i}(y) = max(sum_n c_{i,n} N(y; x_{v,n}, diag(h_i^2)), 0) / Z_i``
    with the (signed, unbiased) per-observation coefficients of
    :func:`specinit.engine.kernel_densities.density_coefficients`, clipped at 0
    pointwise and divided by the integral ``Z_i`` of the positive part
    (:func:`specinit.engine.kernel_densities.positive_part_mass`: exact quadrature
    for 1-D views, importance sampling with about 1 % error for 2-3 dimensions),
    so each column is non-negative and integrates to one; ``h_i`` is chosen
    per component by weighted likelihood cross-validation among fractions of
    Silverman's rule (:func:`specinit.engine.kernel_densities.cv_bandwidth`).

    Parameters
    ----------
    estimate : SpectralEstimate
        From :func:`spectral` (data; population estimates carry no density).
    view : int
        View index.
    points : array, shape (n_points, d_v) (or (n_points,) for a 1-D view)
        Where to evaluate.

    Returns
    -------
    ndarray, shape (n_points, k)

    Raises
    ------
    TypeError
        Not a kernel_multiview estimate.
    ValueError
        A view out of range, points of the wrong width, or an estimate
        without density (built from population moments).

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, eq. 40 (conditional embeddings).
    """
    view, pts = _points(estimate, view, points, None)
    if f"density_support_{view}" not in estimate.state:
        raise bad_argument("estimate", None, "an estimate fitted to data (population estimates carry no density)",
                           "an estimate without density support", describe=False)
    d = estimate.state
    return weighted_kde(pts, np.asarray(d[f"density_support_{view}"]), np.asarray(d[f"density_weights_{view}"]),
                        np.asarray(d[f"density_bandwidth_{view}"]), np.asarray(d[f"density_norm_{view}"]))


@public
def projected_density(estimate: SpectralEstimate, view: int, points: ArrayLike) -> np.ndarray:
    """The Gaussian-mixture projection (the model's sites) of every component of one view at ``points``.

    Parameters
    ----------
    estimate : SpectralEstimate
        From :func:`spectral`, or any estimate with ``mix_<v>``, ``loc_<v>``, ``scale_<v>``.
    view : int
        View index.
    points : array, shape (n_points, d_v) (or (n_points,) for a 1-D view)

    Returns
    -------
    ndarray, shape (n_points, k)

    Raises
    ------
    TypeError
        Not a kernel_multiview estimate.
    ValueError
        A view out of range, points of the wrong width, or no projection in the estimate.

    References
    ----------
    Song, Anandkumar, Dai, Xie, ICML 2014, Sec. 7 (projection onto a parametric family).
    """
    view, pts = _points(estimate, view, points, None)
    if f"loc_{view}" not in estimate.params:
        raise bad_argument("estimate", None, "an estimate fitted to data (with the Gaussian-mixture projection)",
                           "an estimate without it", describe=False)
    mix, loc, scale = (estimate.params[f"{s}_{view}"] for s in ("mix", "loc", "scale"))
    z = (pts[:, None, None, :] - loc) / scale
    comp = np.exp(-0.5 * np.sum(z**2, axis=-1)) / np.prod(np.sqrt(2 * np.pi) * scale, axis=-1)
    return np.einsum("nhj,hj->nh", comp, mix)
