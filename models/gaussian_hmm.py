"""Hidden Markov model with scalar Gaussian emissions: NumPyro program and moment map.

The hidden chain is that of :mod:`specinit.models.hmm`; state ``h_t`` emits
``x_t ~ Normal(loc[h_t], scale[h_t])``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpy.typing import ArrayLike
from scipy.stats import norm

from specinit._validation import Interval, StoredArrayError, bad_argument, bad_stored, stored_array
from specinit.distributions.hmm import GaussianHMM, plate_shape
from specinit.engine.sequences import ChainViews, SequenceBatch, TripleCounts, as_sequences, chain_population, \
    forward_backward, stationary, triple_views
from specinit.engine.views import SummedViews, ViewMoments, conditional_means, multiview_population
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import Face, Param, chain_face, face
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, k_param, site_values
from specinit.models.hmm import HMM
from specinit.models.hmm import MODEL_ARGUMENTS as HMM_MODEL_ARGUMENTS
from specinit.refine import RefineResult

if TYPE_CHECKING:
    from specinit.engine.backends import Passes
    from specinit.engine.protocols import Moments, MultiViewMoments
    from specinit.engine.views import MultiViewFit

__all__ = ["FACTS", "FAMILY", "BinnedSums", "GaussianHMM", "GaussianHMMMoments", "GaussianHMMFamily", "binned_moments",
           "log_likelihood", "model", "population_moments", "quantile_edges", "refine", "spectral",
           "spectral_from_moments", "update"]


@dataclass(frozen=True)
class GaussianHMMMoments:
    """What :func:`spectral_from_moments` needs for a Gaussian HMM.

    Attributes
    ----------
    chain : ChainViews
        Moments of the sliding triples of quantile-bin indices.
    extended : ViewMoments or MultiViewPopulation
        The three bin views and a fourth view ``(x_t - center, (x_t - center)^2)``
        of the middle observation, for the state means and variances.
    n_bins : int
        Number of bins.
    variance : float
        Overall variance of the observations (scale of the variance floor).
    center : float
        What the fourth view is centred on (data: the mean of the
        observations; population moments: 0). A state's variance is a
        difference of its first two conditional moments, whose estimation
        error grows with ``center**2`` when they are taken about 0: a series
        far from zero (price levels) would get its variances swamped.
    """

    chain: ChainViews
    extended: object
    n_bins: int
    variance: float
    center: float = 0.0

    @property
    def views(self) -> MultiViewMoments:
        """The bin views of the triples (what the multi-view fit decomposes)."""
        return self.chain.views


#: The default variance floor of :func:`refine`, relative to the data's variance (hmmlearn's ``min_covar``).
REFINE_REG = 1e-3


def _default_bins(k: int) -> int:
    """Quantile bins of data and population moments when ``n_bins`` is not given."""
    return max(3 * k, 10)


def quantile_edges(seqs: list, k: int, n_bins: int | None) -> np.ndarray:
    """The interior edges of the quantile bins of real sequences.

    Parameters
    ----------
    seqs : list of ndarray
        Validated real sequences (:func:`specinit.engine.sequences.as_sequences`).
    k : int
        Number of hidden states.
    n_bins : int or None
        Number of bins, at least ``k`` and at most the number of
        observations (beyond which bins are empty); None: ``max(3 k, 10)``.

    Returns
    -------
    ndarray, shape (n_bins - 1,)
        Sorted edges; an observation ``x`` falls in bin
        ``searchsorted(edges, x, side="right")``.

    Raises
    ------
    ValueError
        ``n_bins`` out of range.
    """
    pooled = np.concatenate(seqs)
    n_bins = Interval(int, k, max(k, pooled.size)).check("n_bins", _default_bins(k) if n_bins is None else n_bins)
    return np.quantile(pooled, np.linspace(0.0, 1.0, n_bins + 1)[1:-1])


def _binned(seqs: list, edges: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    """The bin of every observation, and over the sliding triples the middle observations and the bins of the
    observations after them."""
    binned = [np.searchsorted(edges, s, side="right") for s in seqs]
    long = [(s, b) for s, b in zip(seqs, binned) if s.size >= 3]
    middle = np.concatenate([s[1:-1] for s, _ in long]) if long else np.zeros(0)
    following = np.concatenate([b[2:] for _, b in long]) if long else np.zeros(0, dtype=np.intp)
    return binned, middle, following


def binned_moments(seqs: list, edges: np.ndarray, backend: str | Passes | None = None) -> GaussianHMMMoments:
    """The moments of :func:`spectral` for real sequences binned by given edges.

    Parameters
    ----------
    seqs : list of ndarray
        Validated real sequences (:func:`specinit.engine.sequences.as_sequences`).
    edges : ndarray, shape (n_bins - 1,)
        Sorted interior edges of the bins (:func:`quantile_edges`).
    backend : str, Passes or None
        Where the passes over the triples run.

    Returns
    -------
    GaussianHMMMoments
        For :func:`spectral_from_moments`.

    Raises
    ------
    ValueError
        No sequence of length >= 3.
    """
    n_bins = edges.size + 1
    binned, middle, _ = _binned(seqs, edges)
    chain = triple_views(binned, n_bins)
    pooled = np.concatenate(seqs)
    center = float(pooled.mean())
    middle = middle - center
    extended = ViewMoments([*chain.views, np.column_stack([middle, middle**2])], backend=backend)
    chain = ChainViews(ViewMoments(chain.views, backend=backend), chain.first_mean, chain.counts)
    return GaussianHMMMoments(chain, extended, n_bins, float(pooled.var()), center)


def _shifted(next_sums: np.ndarray, counts: np.ndarray, by: float) -> np.ndarray:
    """Sums of ``y`` and ``y^2`` by bin as those of ``y - by`` and ``(y - by)^2`` (``counts`` terms per bin)."""
    first, second = next_sums[:, 0], next_sums[:, 1]
    return np.column_stack([first - by * counts, second - 2.0 * by * first + by**2 * counts])


class BinnedSums:
    """The exact additive summary of real sequences binned by fixed edges: what :func:`binned_moments` reads.

    The counts of the bin-index triples and first bins
    (:class:`~specinit.engine.sequences.TripleCounts`), the sums of
    ``x_t - shift`` and ``(x_t - shift)^2`` over the triples by the bin of
    ``x_{t+1}`` (the cross moment of the fourth view with the third; ``shift``
    is fixed by the first batch, its mean, so that the sums stay of the size
    of the spread, not of the level), and the count, mean and sum of squared
    deviations of all observations (merged by Chan's formula). Two summaries
    with the same edges add up (``+``) to that of their union, and
    :meth:`moments` equals :func:`binned_moments` on all the sequences at
    once (to rounding).

    Parameters
    ----------
    edges : ndarray, shape (n_bins - 1,)
    counts : TripleCounts
    next_sums : ndarray, shape (n_bins, 2)
    pooled : ndarray, shape (3,)
        Count, mean and sum of squared deviations of the observations.
    shift : float
        What ``next_sums`` are taken about (0 in summaries saved before it was stored).
    """

    def __init__(self, edges: ArrayLike, counts: TripleCounts, next_sums: ArrayLike, pooled: ArrayLike,
                 shift: float = 0.0) -> None:
        self.edges, self.counts = np.asarray(edges, dtype=np.float64), counts
        self.next_sums, self.pooled = (np.asarray(a, dtype=np.float64) for a in (next_sums, pooled))
        self.shift = float(shift)

    @property
    def n_bins(self) -> int:
        return self.edges.size + 1

    @classmethod
    def from_sequences(cls, seqs: list, edges: np.ndarray, name: str = "sequences",
                       shift: float | None = None) -> "BinnedSums":
        """The summary of validated real sequences binned by ``edges``, sums about ``shift`` (None: their mean)."""
        binned, middle, following = _binned(seqs, edges)
        n_bins = edges.size + 1
        pooled = np.concatenate(seqs)
        mean = float(pooled.mean())
        shift = mean if shift is None else float(shift)
        middle = middle - shift
        next_sums = np.column_stack([np.bincount(following, weights=middle, minlength=n_bins),
                                     np.bincount(following, weights=middle**2, minlength=n_bins)])
        return cls(edges, TripleCounts.from_sequences(binned, n_bins, name), next_sums,
                   [pooled.size, mean, float(np.sum((pooled - mean) ** 2))], shift)

    def _next_counts(self) -> np.ndarray:
        """The number of triples by the bin of ``x_{t+1}``."""
        return self.counts.triples.sum(axis=(0, 1))

    def __add__(self, other: "BinnedSums") -> "BinnedSums":
        if not isinstance(other, BinnedSums):
            return NotImplemented
        (n_a, mean_a, squares_a), (n_b, mean_b, squares_b) = self.pooled, other.pooled
        n, delta = n_a + n_b, mean_b - mean_a
        pooled = [n, mean_a + delta * n_b / n, squares_a + squares_b + delta**2 * n_a * n_b / n]
        others = other.next_sums if other.shift == self.shift else _shifted(
            other.next_sums, other._next_counts(), self.shift - other.shift)
        return BinnedSums(self.edges, self.counts + other.counts, self.next_sums + others, pooled, self.shift)

    def moments(self) -> GaussianHMMMoments:
        """:func:`binned_moments` of every sequence summed, read from the sums (no pass over sequences)."""
        chain = self.counts.chain_views()
        views = chain.views
        center = float(self.pooled[1])
        centered = _shifted(self.next_sums, self._next_counts(), center - self.shift)
        observed = centered if chain.symbols is None else centered[chain.symbols]  # the views' bins
        extended = SummedViews(views.n_observations, (*views.dims, 2), {**views.pairs, (2, 3): observed},
                               views.triples)
        return GaussianHMMMoments(chain, extended, self.n_bins, float(self.pooled[2] / self.pooled[0]), center)

    def to_arrays(self) -> dict:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them)."""
        return {"edges": self.edges, "next_sums": self.next_sums, "pooled": self.pooled,
                "shift": np.array([self.shift]),
                **{"chain/" + key: value for key, value in self.counts.to_arrays().items()}}

    @classmethod
    def from_arrays(cls, arrays: dict, name: str = "estimate") -> "BinnedSums":
        """The summary saved by :meth:`to_arrays`, every array checked (:func:`~specinit._validation.stored_array`:
        a :class:`~specinit._validation.StoredArrayError` names the damaged one, ``chain/...`` for the chain's)."""
        try:
            counts = TripleCounts.from_arrays({key[len("chain/"):]: value for key, value in arrays.items()
                                               if key.startswith("chain/")}, name)
        except StoredArrayError as exc:
            raise exc.under("chain/") from None
        what, V = "bin sums", counts.n_symbols
        edges = stored_array(arrays, "edges", what, name, shape=(V - 1,))
        if np.any(np.diff(edges) < 0):
            raise bad_stored(name, what, "edges", "non-decreasing bin edges", np.array2string(edges, threshold=8))
        next_sums = stored_array(arrays, "next_sums", what, name, shape=(V, 2))
        pooled = stored_array(arrays, "pooled", what, name, shape=(3,))
        if not (pooled[0] >= 1 and pooled[2] >= 0):
            raise bad_stored(name, what, "pooled", "the observations (>= 1), their sum and their sum of squares "
                             "(>= 0)", pooled.tolist())
        # sums saved before the shift was stored are about 0
        shift = stored_array({"shift": [0.0], **arrays}, "shift", what, name, shape=(1,))
        return cls(edges, counts, next_sums, pooled, float(shift[0]))


class GaussianHMMFamily(HMM):
    """HMM with scalar Gaussian emissions: the categorical chain on quantile bins, then exact state moments."""

    name = "gaussian_hmm"
    data_kind = "sequences"
    sites = {
        "init": Site("simplex", (0,), ("states",), ("states",)),
        "transition": Site("simplex", (0, 1), ("states", "next_state"), ("next_state",)),
        "loc": Site("real", (0,), ("states",)),
        "scale": Site("positive", (0,), ("states",)),
        "observations": Site("observed", (), ("sequences", "time"), ("time",)),
    }
    match_site = "loc"
    summary = BinnedSums
    options = {"n_bins": Param("int, optional", "Number of quantile bins (default ``max(3 k, 10)``).", None,
                               Interval(int, 1, none=True))}
    arguments = {
        **HMM.arguments,
        "sequences": Param("1-D float array, 2-D array or list/tuple of 1-D arrays", "Real observations (finite).",
                           annotation=ArrayLike | Sequence[ArrayLike]),
        "moments": Param("GaussianHMMMoments", "From :func:`population_moments` or built from data by "
                         ":func:`spectral`.", annotation=GaussianHMMMoments),
        "k": k_param("Number of hidden states, ``1 <= k <= n_bins``."),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Probabilities are floored at ``floor / d``; variances at ``floor`` times the overall variance (so the "
            "result does not depend on the data's unit)."),
        "backend": Param("{'numpy', 'jax'} or None", "Where the passes over the triples run "
                         "(:mod:`specinit.engine.backends`).", None),
    }
    advice = "The binned observations may not follow a k-state HMM: try a smaller k, or approach='jennrich'."

    def fit_input(self, moments: GaussianHMMMoments, k: int, **options: Any) -> Moments:
        return moments.chain.views

    def moments(self, sequences: ArrayLike | Sequence[ArrayLike], *, k: int, backend: str | Passes | None,
                n_bins: int | None = None) -> GaussianHMMMoments:
        seqs = as_sequences(sequences, categorical=False)
        return binned_moments(seqs, quantile_edges(seqs, k, n_bins), backend)

    def population_moments(self, params: Mapping[str, Any], n_bins: int | None = None) -> GaussianHMMMoments:
        init, T, loc, scale = (np.asarray(params[n], dtype=np.float64) for n in ("init", "transition", "loc", "scale"))
        if scale.shape != loc.shape or np.any(scale <= 0) or not np.all(np.isfinite(scale)):
            raise bad_argument("scale", None, f"finite and > 0, of shape {loc.shape}", scale)
        n_bins = Interval(int, loc.size).check("n_bins", _default_bins(loc.size) if n_bins is None else n_bins)
        w = stationary(T)
        grid = np.linspace((loc - 8 * scale).min(), (loc + 8 * scale).max(), 20001)
        mixture_cdf = norm.cdf((grid[:, None] - loc) / scale) @ w
        edges = np.interp(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], mixture_cdf, grid)
        cdf = norm.cdf((np.concatenate([[-np.inf], edges, [np.inf]])[None, :] - loc[:, None]) / scale[:, None])
        chain = chain_population(init, T, np.diff(cdf, axis=1))
        extended = multiview_population([*chain.views.means, np.column_stack([loc, loc**2 + scale**2])], w)
        variance = float(w @ (loc**2 + scale**2) - (w @ loc) ** 2)
        return GaussianHMMMoments(chain, extended, n_bins, variance)

    def max_components(self, moments: GaussianHMMMoments) -> tuple[int, str]:
        used = min(moments.chain.views.dims)
        if used < moments.n_bins:  # ties in the data leave bins empty
            return used, (f"<= the smallest dimension of the views used ({used} occupied quantile bins of "
                          f"n_bins = {moments.n_bins})")
        return moments.n_bins, f"at most the number of quantile bins n_bins = {moments.n_bins}"

    def unwhiten(self, fit: MultiViewFit, moments: GaussianHMMMoments, k: int, floor: float,
                 **options: Any) -> tuple[dict, dict, dict]:
        params, report, state = super().unwhiten(fit, moments.chain, k, floor)
        # x_t and x_t^2 are views of the middle state, conditionally independent of the NEXT bin (view 2).
        first, second = conditional_means(moments.extended, 3, 2, fit.means[2], fit.weights).T
        variance = second - first**2
        minimum = floor * moments.variance
        report.update(n_bins=moments.n_bins, n_scales_floored=int(np.sum(variance < minimum)),
                      scale_floor=float(np.sqrt(minimum)))
        del params["emission"]
        params.update(loc=first + moments.center, scale=np.sqrt(np.maximum(variance, minimum)))
        return params, report, state

    refine_advice = ("The data may not support k states: try a smaller k, a larger reg (the variance floor, relative "
                     "to the data's variance), or refine again with more restarts or another seed.")

    def scale_floor(self, estimate: SpectralEstimate) -> float | None:
        return estimate.diagnostics.get("scale_floor")

    def occupancy(self, stats: Any) -> np.ndarray:
        return np.asarray(stats[2]).sum(axis=0)

    def refined_scale_floor(self, prepared: SequenceBatch, options: dict) -> float | None:
        return float(np.sqrt(options["reg"] * prepared.variance))

    def refine(self, data: ArrayLike | Sequence[ArrayLike], estimate: SpectralEstimate | Mapping[str, ArrayLike], *,
               method: str | None = None, **options: Any) -> RefineResult:
        options.setdefault("reg", REFINE_REG)  # the variance floor of every refinement (internal ones included)
        return super().refine(data, estimate, method=method, **options)

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, sequences: ArrayLike | Sequence[ArrayLike], estimate: SpectralEstimate,
                    **options: Any) -> SequenceBatch:
        seqs = as_sequences(sequences, categorical=False)
        batch = SequenceBatch(seqs)
        batch.variance = float(np.var(batch.values))
        return batch

    def e_step(self, params: Mapping[str, np.ndarray],
               batch: SequenceBatch) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], float]:
        likelihood = norm.pdf(batch.values[:, None], params["loc"], params["scale"])
        init_counts, trans_counts, gamma, ll = forward_backward(batch, params["init"], params["transition"],
                                                                np.maximum(likelihood, np.finfo(float).tiny))
        return (init_counts, trans_counts, gamma), ll

    def split_merge(self, params: Mapping[str, np.ndarray], batch: SequenceBatch,
                    stats: tuple[np.ndarray, np.ndarray, np.ndarray], rng: np.random.Generator,
                    attempt: int = 0) -> dict | None:
        # The least visited state leaves (a state that lost its data, or one squeezed onto a few points); the
        # attempt // 2-th most visited other state is split in two, in location (loc -/+ scale / 2) on even attempts
        # and in scale (scale * exp(-/+ 1/2)) on odd ones (volatility regimes share a location), its transitions
        # copied and the moves into it shared half and half (as the categorical HMM's moves).
        init, transition, loc, scale = (np.array(params[name], dtype=np.float64)
                                        for name in ("init", "transition", "loc", "scale"))
        k = init.size
        if k < 2 or attempt >= 2 * (k - 1):
            return None
        visits = np.asarray(stats[2]).sum(axis=0)
        leaving = int(np.argmin(visits))
        others = np.delete(np.arange(k), leaving)
        split = int(others[np.argsort(-visits[others], kind="stable")[attempt // 2]])
        if attempt % 2 == 0:
            loc[leaving], loc[split] = loc[split] - scale[split] / 2, loc[split] + scale[split] / 2
            scale[leaving] = scale[split]
        else:
            loc[leaving] = loc[split]
            scale[leaving], scale[split] = scale[split] * np.exp(-0.5), scale[split] * np.exp(0.5)
        transition[leaving] = transition[split]
        for rows in (init[None, :], transition):
            rows[:, leaving] = 0.0
            rows /= rows.sum(axis=1, keepdims=True)
            rows[:, [leaving, split]] = rows[:, [split]] / 2
        return {"init": init, "transition": transition, "loc": loc, "scale": scale}

    def m_step(self, batch: SequenceBatch, stats: tuple[np.ndarray, np.ndarray, np.ndarray], params: Mapping[str, Any],
               reg: float = REFINE_REG, **options: Any) -> dict:
        init, transition, gamma = stats
        weight = gamma.sum(axis=0) + 10 * np.finfo(float).eps
        loc = gamma.T @ batch.values / weight
        variance = gamma.T @ (batch.values**2) / weight - loc**2
        return {"init": init, "transition": transition, "loc": loc,
                "scale": np.sqrt(np.maximum(variance, 0.0) + reg * batch.variance)}

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralGaussianHMM`."""
        return chain_face(
            "SpectralGaussianHMM", self.name, refine,
            """A hidden Markov model with scalar Gaussian emissions by the method of moments, then Baum-Welch.

            The question of hmmlearn's ``GaussianHMM`` (one feature) without its
            local optima at the start (:mod:`specinit.models.gaussian_hmm`: the
            observations binned by quantiles give the chain, exact moments the state
            means and variances). ``X`` is what
            :func:`specinit.models.gaussian_hmm.spectral` takes -- one 1-D array,
            equal-length rows, or a list of 1-D arrays.""",
            {"n_bins": self.declared()["n_bins"]},
            {"n_bins": "n_bins"},
            {"means_": ("ndarray, shape (n_components,)\n    State means.",
                        lambda estimator, estimate, X: estimate.params["loc"]),
             "covars_": ("ndarray, shape (n_components,)\n    State variances.",
                         lambda estimator, estimate, X: estimate.params["scale"] ** 2)},
            answers=frozenset({"partial_fit"}),
        )


FAMILY = GaussianHMMFamily()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


#: The arguments of :func:`model`: those of the categorical chain's (:data:`specinit.models.hmm.MODEL_ARGUMENTS`)
#: with Gaussian emissions.
MODEL_ARGUMENTS = {
    **HMM_MODEL_ARGUMENTS,
    "sequences": Param("float array, shape (N, T) or (T,), optional", "Observations, padded past each sequence's "
                       "length (:func:`specinit.models.hmm.pad_sequences`). ``None`` generates sequences of lengths "
                       "``lengths`` (``numpyro.infer.Predictive``).", None, annotation=ArrayLike | None),
    "concentration": Param("float", "Symmetric Dirichlet concentration of ``init`` and of every row of "
                           "``transition``.", 1.0),
    "loc_scale": Param("float", "``loc ~ Normal(0, loc_scale)`` per state.", 10.0),
    "scale_scale": Param("float", "``scale ~ HalfNormal(scale_scale)`` per state.", 5.0),
}


@face(MODEL_ARGUMENTS)
def model(sequences, *, k, lengths, concentration, loc_scale, scale_scale) -> None:
    """NumPyro HMM with scalar Gaussian emissions, hidden states summed out.

    Notes
    -----
    NumPyro sites: ``init`` (k,); ``transition`` (k, k), ``loc`` (k,) and
    ``scale`` (k,) in plate ``states``; observed ``observations`` in plate
    ``sequences`` with a :class:`GaussianHMM` likelihood (one log-density per
    sequence).
    """
    sequences, lengths, n_steps = plate_shape(sequences, lengths, "gaussian_hmm.model")
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        loc = numpyro.sample("loc", dist.Normal(0.0, loc_scale))
        scale = numpyro.sample("scale", dist.HalfNormal(scale_scale))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", GaussianHMM(init, transition, loc, scale, n_steps, lengths), obs=sequences)


@FAMILY.face(
    validate=True,
    init=Param("array, shape (k,), or dict / SpectralEstimate", "Law of the first state, or all four sites by "
               "name."),
    transition=Param("array, shape (k, k)", "Row-stochastic transition matrix.", None),
    loc=Param("array, shape (k,)", "Emission means.", None),
    scale=Param("array, shape (k,)", "Emission standard deviations (positive).", None))
def population_moments(init, transition, loc, scale, *, n_bins) -> GaussianHMMMoments:
    """Exact moments of a Gaussian HMM with a stationary middle state, binned at ``n_bins`` quantiles.

    Bin edges are the quantiles of the stationary mixture of the emissions,
    as :func:`spectral` takes them from data; the bin probabilities of each
    state are differences of normal CDFs.

    Returns
    -------
    GaussianHMMMoments
        For :func:`spectral_from_moments` (exact recovery checks).

    Raises
    ------
    ValueError
        Non-positive ``scale`` or ``n_bins < k``.
    """
    return FAMILY.population_moments(site_values(init, "init", transition=transition, loc=loc, scale=scale),
                                     n_bins=n_bins)


@FAMILY.face()
def spectral_from_moments(moments, k, *, method, approach, seed, floor, decompose_options) -> SpectralEstimate:
    """Recover ``init``, ``transition``, ``loc``, ``scale`` from :class:`GaussianHMMMoments`.

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        Only with ``approach="symmetric"``: the symmetrized second moment of
        the bin triples is not positive definite on its top k eigenvectors.
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, approach=approach, seed=seed, floor=floor,
                                        decompose_options=decompose_options)


@FAMILY.face()
def spectral(sequences, k, *, n_bins, method, approach, seed, floor, decompose_options, backend) -> SpectralEstimate:
    """Method-of-moments estimate of an HMM with scalar Gaussian emissions.

    The observations are discretized into ``n_bins`` quantile bins; the bin
    indices are an HMM with the same hidden chain (a deterministic function
    of each emission keeps the views conditionally independent), so the
    categorical multi-view fit of :func:`specinit.models.hmm.spectral` gives
    ``init`` and ``transition``. The state means and variances are then
    exact moments, not bin averages: ``x_t`` and ``x_t^2`` are extra views of
    the middle state, regressed on the (conditionally independent) third
    view's bin means by :func:`specinit.engine.views.conditional_means`.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic,
        ``"loc"`` (k,), ``"scale"`` (k,) (the sites of :func:`model`);
        ``diagnostics`` as for :func:`specinit.models.hmm.spectral` plus
        ``n_bins``, ``n_scales_floored`` and ``scale_floor`` (the smallest
        scale, ``sqrt(floor)`` times the data's standard deviation);
        ``degenerate/scale_at_floor`` lists the states at it.

    Raises
    ------
    ValueError
        Non-finite observations, no sequence of length >= 3, bad ``k`` or ``n_bins``.

    Warns
    -----
    RuntimeWarning
        The estimate is degenerate (:func:`specinit.models.hmm.degeneracy`: a
        state's scale at the floor, a transition matrix that is the identity
        or has rows that are point masses, a state of (nearly) zero weight):
        one warning naming the states and what to try.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
       learning latent variable models", JMLR 15 (2014), Prop. 3.4, Sec. 3.3.
    """
    return FAMILY.spectral(sequences, k, n_bins=n_bins, method=method, approach=approach, seed=seed, floor=floor,
                           decompose_options=decompose_options, backend=backend)


@FAMILY.refine_face(
    sequences=Param("1-D float array, 2-D array or list/tuple of 1-D arrays", "Real observations.",
                    annotation=ArrayLike | Sequence[ArrayLike]),
    estimate=Param("SpectralEstimate or dict", "Starting ``init``, ``transition``, ``loc``, ``scale`` (checked)."),
    method=Param("{'em'}", "Baum-Welch (EM for the hidden chain).", "em"), max_iter=1000, tol=1e-7, restarts=6,
    reg=Param("float", "Added to every state's variance, relative to the data's variance (so the result does not "
              "depend on the data's unit): the variance floor, like hmmlearn's ``min_covar``. The likelihood grows "
              "without bound as a state shrinks onto a few points: with 1e-6, EM from the spectral start of 500 daily "
              "returns squeezed a state onto one return (a scale 0.1% of the data's, where NUTS chains stay "
              "trapped).", REFINE_REG, Interval(float, 0.0)),
    split_merge=Param("int", "Then split-merge moves: the least visited state leaves and a heavily visited state is "
                      "split in two, alternately in location and in scale (its transitions copied, the moves into "
                      "it shared); EM runs from the move, which replaces the estimate when it passes its "
                      "log-likelihood. The moves stop after ``split_merge`` failures in a row (0: none).", 3))
def refine(sequences, estimate, *, method, max_iter, tol, floor, reg, restarts, split_merge, seed) -> RefineResult:
    """Spectral then refine: Baum-Welch EM for the Gaussian HMM started from an estimate.

    The E-step is the scaled forward-backward recursion over all sequences
    at once (:func:`specinit.engine.sequences.forward_backward`) with normal
    emission densities; the M-step re-estimates ``init``, ``transition``
    (expected counts) and each state's ``loc`` and ``scale`` (posterior-
    weighted mean and standard deviation, its variance plus ``reg`` times the
    data's), [1]_ eqs. 40a-c and 53-54.

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"gaussian_hmm"``), ``.log_likelihood`` trace,
        ``.n_iter``, ``.converged``. The estimate's ``degenerate/...``
        diagnostics (:func:`specinit.models.hmm.degeneracy`) describe the
        refined values: a scale at the floor means a variance at most twice
        ``reg`` times the data's, an empty state fewer than 0.1% of the
        expected visits.

    Raises
    ------
    TypeError
        ``sequences`` or ``estimate`` of the wrong type.
    ValueError
        Non-finite observations, an estimate of another model or outside the supports.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations; the refined estimate
        is degenerate (a scale at the floor, a transition row that is a point
        mass, an empty state), naming the states and what to try.

    References
    ----------
    .. [1] Rabiner (1989), eqs. 40a-c, 53-54 (continuous densities).
    """
    return FAMILY.refine(sequences, estimate, method=method, max_iter=max_iter, tol=tol, floor=floor, reg=reg,
                         restarts=restarts, split_merge=split_merge, seed=seed)


@FAMILY.face(
    sequences=Param("1-D float array, 2-D array or list/tuple of 1-D arrays", "The new sequences (real, finite; "
                    "whole sequences: a sequence is not continued across batches).",
                    annotation=ArrayLike | Sequence[ArrayLike]),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of hidden states: required for the first batch; with ``estimate`` None means "
            "``estimate.k`` (at most the bins' number).", None, Interval(int, 1, none=True)),
    n_bins=Param("int, optional", "Quantile bins of the first batch (default ``max(3 k, 10)``); with ``estimate`` "
                 "it must be None or the estimate's.", None, Interval(int, 1, none=True)))
def update(sequences, estimate, *, k, n_bins, method, approach, seed, floor, decompose_options) -> SpectralEstimate:
    """Add a batch of sequences to a Gaussian-HMM fit: exact merged sums over fixed bins, then the moment estimate.

    The first batch fixes the bins (its quantiles); every batch adds the
    counts of its bin triples, its sums of ``x_t`` and ``x_t^2`` by the bin
    of ``x_{t+1}`` and its count, mean and spread
    (:class:`BinnedSums`), which add up exactly: after any number of batches
    the estimate is that of :func:`spectral`'s moment map on all the
    sequences binned by the first batch's edges (the same moments to
    rounding, the same decomposition and seed). It differs from
    :func:`spectral` on everything only through the edges -- quantiles of the
    first batch instead of all the data -- so the first batch should cover
    the range of the observations (a later batch outside it falls in the
    outer bins, its values still counted exactly in the state means and
    variances). Memory: (n_bins,)^3 counts. There is no Baum-Welch step:
    :func:`refine` on sequences at hand takes the estimate further. The
    returned estimate keeps the sums in its ``state`` (``moments/...``),
    which :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates
    go on in a later process. The online face of
    ``SpectralGaussianHMM.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"gaussian_hmm"`` as from :func:`spectral`, plus ``n_batches`` in the
        diagnostics.

    Raises
    ------
    ValueError
        ``k`` missing on the first batch or above the bins' number,
        ``n_bins`` other than the estimate's, non-finite observations, an
        estimate without stored sums (from :func:`spectral`: fit the first
        batch with :func:`update`), no sequence of length >= 3 in any batch.
    MemoryError
        The (n_bins,)^3 counts over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> def sequence(n):  # a sticky two-state chain emitting N(-2, 1) or N(2, 1)
    ...     states = np.cumsum(rng.random(n) < 0.1) % 2
    ...     return rng.normal(np.where(states == 1, 2.0, -2.0), 1.0)
    >>> seqs = [sequence(100) for _ in range(40)]
    >>> est = update(seqs[:20], k=2, seed=0)
    >>> est = update(seqs[20:], est, seed=0)
    >>> bool(np.all(np.abs(np.sort(est.params["loc"]) - [-2.0, 2.0]) < 0.5)), est.diagnostics["n_batches"]
    (True, 2)
    """
    stored, k, n_batches = FAMILY.stream(estimate, k, FAMILY.summary, "gaussian_hmm.update")
    seqs = as_sequences(sequences, categorical=False)
    if stored is None:
        edges = quantile_edges(seqs, k, n_bins)
    elif n_bins not in (None, stored.n_bins):
        raise bad_argument("n_bins", None, f"None or the estimate's n_bins = {stored.n_bins}", n_bins)
    else:
        edges = stored.edges
    batch = BinnedSums.from_sequences(seqs, edges, shift=None if stored is None else stored.shift)
    merged = batch if stored is None else stored + batch
    fit = FAMILY.spectral_from_moments(merged.moments(), k, method=method, approach=approach, seed=seed, floor=floor,
                                       decompose_options=decompose_options)
    return FAMILY.streamed(fit, estimate, merged, n_batches)


log_likelihood = FAMILY.log_likelihood_face("sequences", """
    Log-likelihood of every sequence under ``estimate`` (forward algorithm, float64).

    Returns
    -------
    ndarray, shape (n_sequences,)
    """)
