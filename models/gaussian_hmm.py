"""Hidden Markov model with scalar Gaussian emissions: NumPyro program and moment map.

The hidden chain is that of :mod:`specinit.models.hmm`; state ``h_t`` emits
``x_t ~ Normal(loc[h_t], scale[h_t])``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from scipy.stats import norm
from specinit.models._hmm_forward import GaussianHMM, _as_sequence_list, _plate_shape
from specinit.models._hmm_moments import (
    HMMMoments,
    chain_population,
    fit_chain,
    stationary,
    triple_moments,
)

from specinit._validation import bad_argument, check_int, check_positive
from specinit.engine.views import ViewMoments, conditional_means, multiview_population
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = ["GaussianHMM", "GaussianHMMMoments", "model", "population_moments", "spectral", "spectral_from_moments"]

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"init": 0, "transition": (0, 1), "loc": 0, "scale": 0},
    match_site="loc",
    dims={"init": ("states",), "transition": ("states", "next_state"), "loc": ("states",), "scale": ("states",),
          "observations": ("sequences", "time")},
    event_dims={"init": ("states",), "transition": ("next_state",), "observations": ("time",)},
)


def model(sequences=None, *, k: int, lengths=None, concentration: float = 1.0,
                   loc_scale: float = 10.0, scale_scale: float = 5.0):
    """NumPyro HMM with scalar Gaussian emissions, hidden states summed out.

    Parameters
    ----------
    sequences : float array, shape (N, T) or (T,), optional
        Observations, padded past each sequence's length
        (:func:`specinit.models.hmm.pad_sequences`). ``None`` generates
        sequences of lengths ``lengths`` (``numpyro.infer.Predictive``).
    k : int
        Number of hidden states.
    lengths : int array, shape (N,), optional
        True lengths; default: every row is full length.
    concentration : float
        Symmetric Dirichlet concentration of ``init`` and of every row of
        ``transition``.
    loc_scale : float
        ``loc ~ Normal(0, loc_scale)`` per state.
    scale_scale : float
        ``scale ~ HalfNormal(scale_scale)`` per state.

    Notes
    -----
    NumPyro sites: ``init`` (k,); ``transition`` (k, k), ``loc`` (k,) and
    ``scale`` (k,) in plate ``states``; observed ``observations`` in plate
    ``sequences`` with a :class:`GaussianHMM` likelihood (one log-density per
    sequence).
    """
    sequences, lengths, n_steps = _plate_shape(sequences, lengths, "gaussian_hmm.model")
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        loc = numpyro.sample("loc", dist.Normal(0.0, loc_scale))
        scale = numpyro.sample("scale", dist.HalfNormal(scale_scale))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", GaussianHMM(init, transition, loc, scale, n_steps, lengths), obs=sequences)


@dataclass(frozen=True)
class GaussianHMMMoments:
    """What :func:`spectral_from_moments` needs for a Gaussian HMM.

    Attributes
    ----------
    chain : HMMMoments
        Moments of the sliding triples of quantile-bin indices.
    extended : ViewMoments or MultiViewPopulation
        The three bin views and a fourth view ``(x_t, x_t^2)`` of the middle
        observation, for the state means and variances.
    n_bins : int
        Number of bins.
    variance : float
        Overall variance of the observations (scale of the variance floor).
    """

    chain: HMMMoments
    extended: object
    n_bins: int
    variance: float


def population_moments(init, transition, loc, scale, *, n_bins: int = 10) -> GaussianHMMMoments:
    """Exact moments of a Gaussian HMM with a stationary middle state, binned at ``n_bins`` quantiles.

    Bin edges are the quantiles of the stationary mixture of the emissions,
    as :func:`spectral` takes them from data; the bin probabilities of each
    state are differences of normal CDFs.

    Parameters
    ----------
    init : array, shape (k,)
        Law of the first state.
    transition : array, shape (k, k)
        Row-stochastic transition matrix.
    loc, scale : arrays, shape (k,)
        Emission means and standard deviations (positive).
    n_bins : int
        Number of quantile bins, ``>= k``.

    Returns
    -------
    GaussianHMMMoments
        For :func:`spectral_from_moments` (exact recovery checks).

    Raises
    ------
    ValueError
        Non-positive ``scale`` or ``n_bins < k``.
    """
    func = "gaussian_hmm.population_moments"
    init, T, loc, scale = (np.asarray(a, dtype=np.float64) for a in (init, transition, loc, scale))
    if scale.shape != loc.shape or np.any(scale <= 0) or not np.all(np.isfinite(scale)):
        raise bad_argument("scale", func, f"finite and > 0, of shape {loc.shape}", scale)
    n_bins = check_int(n_bins, "n_bins", func, minimum=loc.size)
    w = stationary(T)
    grid = np.linspace((loc - 8 * scale).min(), (loc + 8 * scale).max(), 20001)
    mixture_cdf = norm.cdf((grid[:, None] - loc) / scale) @ w
    edges = np.interp(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], mixture_cdf, grid)
    cdf = norm.cdf((np.concatenate([[-np.inf], edges, [np.inf]])[None, :] - loc[:, None]) / scale[:, None])
    emission = np.diff(cdf, axis=1)
    chain = chain_population(init, T, emission)
    extended = multiview_population([*chain.views.means, np.column_stack([loc, loc**2 + scale**2])], w)
    variance = float(w @ (loc**2 + scale**2) - (w @ loc) ** 2)
    return GaussianHMMMoments(chain, extended, n_bins, variance)


def spectral_from_moments(moments: GaussianHMMMoments, k: int, *, method: str = "tpm", seed=0, floor: float = 1e-3,
                          decompose_options: dict | None = None) -> SpectralEstimate:
    """Recover ``init``, ``transition``, ``loc``, ``scale`` from :class:`GaussianHMMMoments`.

    Parameters
    ----------
    moments : GaussianHMMMoments
        From :func:`population_moments` or built from data by :func:`spectral`.
    k : int
        Number of hidden states.
    method, seed, floor, decompose_options
        As for :func:`spectral`.

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        If the symmetrized second moment of the bin triples is not positive
        definite on its top k eigenvectors.
    """
    func = "gaussian_hmm.spectral"
    floor = check_positive(floor, "floor", func)
    init, transition, _, fit, diagnostics = fit_chain(moments.chain, k, func, method, seed, floor, decompose_options)
    first, second = conditional_means(moments.extended, 3, 2, fit.means[2], fit.weights).T
    variance = second - first**2
    minimum = floor * moments.variance
    diagnostics.update(n_bins=moments.n_bins, n_scales_floored=int(np.sum(variance < minimum)))
    params = {"init": init, "transition": transition, "loc": first, "scale": np.sqrt(np.maximum(variance, minimum))}
    return SpectralEstimate("gaussian_hmm", params, diagnostics, facts=FACTS)


def spectral(sequences, k: int, *, n_bins: int | None = None, method: str = "tpm", seed=0, floor: float = 1e-3,
             decompose_options: dict | None = None) -> SpectralEstimate:
    """Method-of-moments estimate of an HMM with scalar Gaussian emissions.

    The observations are discretized into ``n_bins`` quantile bins; the bin
    indices are an HMM with the same hidden chain (a deterministic function
    of each emission keeps the views conditionally independent), so the
    categorical multi-view fit of :func:`specinit.models.hmm.spectral` gives
    ``init`` and ``transition``. The state means and variances are then
    exact moments, not bin averages: ``x_t`` and ``x_t^2`` are extra views of
    the middle state, regressed on the (conditionally independent) third
    view's bin means by :func:`specinit.engine.views.conditional_means`.

    Parameters
    ----------
    sequences : 1-D float array, 2-D array or list/tuple of 1-D arrays
        Real observations (finite).
    k : int
        Number of hidden states, ``1 <= k <= n_bins``.
    n_bins : int, optional
        Number of quantile bins (default ``max(3 k, 10)``).
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    seed : int or numpy.random.Generator
        Randomness of the range finders and the decomposition.
    floor : float
        Probabilities are floored at ``floor / d``; variances at ``floor``
        times the overall variance.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition; unknown keys raise.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic,
        ``"loc"`` (k,), ``"scale"`` (k,) (the sites of :func:`model`);
        ``diagnostics`` as for :func:`specinit.models.hmm.spectral` plus
        ``n_bins``, ``n_scales_floored``.

    Raises
    ------
    ValueError
        Non-finite observations, no sequence of length >= 3, bad ``k`` or ``n_bins``.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
       learning latent variable models", JMLR 15 (2014), Prop. 3.4, Sec. 3.3.
    """
    func = "gaussian_hmm.spectral"
    k = check_int(k, "k", func, minimum=1)
    n_bins = check_int(max(3 * k, 10) if n_bins is None else n_bins, "n_bins", func, minimum=k)
    seqs = _as_sequence_list(sequences, func, categorical=False)
    pooled = np.concatenate(seqs)
    edges = np.quantile(pooled, np.linspace(0.0, 1.0, n_bins + 1)[1:-1])
    chain = triple_moments([np.searchsorted(edges, s, side="right") for s in seqs], n_bins, func)
    middle = np.concatenate([s[1:-1] for s in seqs if s.size >= 3])
    extended = ViewMoments([*chain.views.views, np.column_stack([middle, middle**2])])
    moments = GaussianHMMMoments(chain, extended, n_bins, float(pooled.var()))
    return spectral_from_moments(moments, k, method=method, seed=seed, floor=floor, decompose_options=decompose_options)
