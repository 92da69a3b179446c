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

from specinit._validation import Interval, bad_argument, public
from specinit.distributions.hmm import GaussianHMM, plate_shape
from specinit.engine.sequences import ChainViews, SequenceBatch, as_sequences, chain_population, forward_backward, \
    stationary, triple_views
from specinit.engine.views import ViewMoments, conditional_means, multiview_population
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import Param
from specinit.family import COMMON_OPTIONS, k_param, site_values
from specinit.models.hmm import HMM

__all__ = ["FACTS", "FAMILY", "GaussianHMM", "GaussianHMMMoments", "GaussianHMMFamily", "log_likelihood", "model",
           "population_moments", "refine", "spectral", "spectral_from_moments"]


@dataclass(frozen=True)
class GaussianHMMMoments:
    """What :func:`spectral_from_moments` needs for a Gaussian HMM.

    Attributes
    ----------
    chain : ChainViews
        Moments of the sliding triples of quantile-bin indices.
    extended : ViewMoments or MultiViewPopulation
        The three bin views and a fourth view ``(x_t, x_t^2)`` of the middle
        observation, for the state means and variances.
    n_bins : int
        Number of bins.
    variance : float
        Overall variance of the observations (scale of the variance floor).
    """

    chain: ChainViews
    extended: object
    n_bins: int
    variance: float

    @property
    def views(self):
        """The bin views of the triples (what the multi-view fit decomposes)."""
        return self.chain.views


def _default_bins(k: int) -> int:
    """Quantile bins of data and population moments when ``n_bins`` is not given."""
    return max(3 * k, 10)


class GaussianHMMFamily(HMM):
    """HMM with scalar Gaussian emissions: the categorical chain on quantile bins, then exact state moments."""

    name = "gaussian_hmm"
    sites = {
        "init": Site("simplex", (0,), ("states",), ("states",)),
        "transition": Site("simplex", (0, 1), ("states", "next_state"), ("next_state",)),
        "loc": Site("real", (0,), ("states",)),
        "scale": Site("positive", (0,), ("states",)),
        "observations": Site("observed", (), ("sequences", "time"), ("time",)),
    }
    match_site = "loc"
    options = {"n_bins": Param("int, optional", "Number of quantile bins (default ``max(3 k, 10)``).", None,
                               Interval(int, 1, none=True))}
    arguments = {
        **HMM.arguments,
        "sequences": Param("1-D float array, 2-D array or list/tuple of 1-D arrays", "Real observations (finite)."),
        "moments": Param("GaussianHMMMoments", "From :func:`population_moments` or built from data by "
                         ":func:`spectral`."),
        "k": k_param("Number of hidden states, ``1 <= k <= n_bins``."),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Probabilities are floored at ``floor / d``; variances at ``floor`` times the overall variance (so the "
            "result does not depend on the data's unit)."),
        "backend": Param("{'numpy', 'jax'} or None", "Where the passes over the triples run "
                         "(:mod:`specinit.engine.backends`).", None),
    }
    advice = "The binned observations may not follow a k-state HMM: try a smaller k, or approach='jennrich'."

    def fit_input(self, moments: GaussianHMMMoments, k, **options):
        return moments.chain.views

    def moments(self, sequences, *, k, backend, n_bins=None) -> GaussianHMMMoments:
        seqs = as_sequences(sequences, categorical=False)
        pooled = np.concatenate(seqs)
        # Bins beyond the number of observations are empty: at most N of them are kept.
        n_bins = Interval(int, k, max(k, pooled.size)).check("n_bins", _default_bins(k) if n_bins is None else n_bins)
        edges = np.quantile(pooled, np.linspace(0.0, 1.0, n_bins + 1)[1:-1])
        chain = triple_views([np.searchsorted(edges, s, side="right") for s in seqs], n_bins)
        middle = np.concatenate([s[1:-1] for s in seqs if s.size >= 3])
        extended = ViewMoments([*chain.views, np.column_stack([middle, middle**2])], backend=backend)
        chain = ChainViews(ViewMoments(chain.views, backend=backend), chain.first_mean, chain.counts)
        return GaussianHMMMoments(chain, extended, n_bins, float(pooled.var()))

    def population_moments(self, params, n_bins=None) -> GaussianHMMMoments:
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

    def unwhiten(self, fit, moments: GaussianHMMMoments, k, floor, **options):
        params, report, state = super().unwhiten(fit, moments.chain, k, floor)
        # x_t and x_t^2 are views of the middle state, conditionally independent of the NEXT bin (view 2).
        first, second = conditional_means(moments.extended, 3, 2, fit.means[2], fit.weights).T
        variance = second - first**2
        minimum = floor * moments.variance
        report.update(n_bins=moments.n_bins, n_scales_floored=int(np.sum(variance < minimum)))
        del params["emission"]
        params.update(loc=first, scale=np.sqrt(np.maximum(variance, minimum)))
        return params, report, state

    # EM ------------------------------------------------------------------------------------------------------
    def refine_data(self, sequences, estimate: SpectralEstimate, **options):
        seqs = as_sequences(sequences, categorical=False)
        batch = SequenceBatch(seqs)
        batch.variance = float(np.var(batch.values))
        return batch

    def e_step(self, params, batch: SequenceBatch):
        likelihood = norm.pdf(batch.values[:, None], params["loc"], params["scale"])
        init_counts, trans_counts, gamma, ll = forward_backward(batch, params["init"], params["transition"],
                                                                np.maximum(likelihood, np.finfo(float).tiny))
        return (init_counts, trans_counts, gamma), ll

    def m_step(self, batch, stats, params, reg: float = 1e-6, **options):
        init, transition, gamma = stats
        weight = gamma.sum(axis=0) + 10 * np.finfo(float).eps
        loc = gamma.T @ batch.values / weight
        variance = gamma.T @ (batch.values**2) / weight - loc**2
        return {"init": init, "transition": transition, "loc": loc,
                "scale": np.sqrt(np.maximum(variance, 0.0) + reg * batch.variance)}


FAMILY = GaussianHMMFamily()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


@public
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
    return FAMILY.spectral(sequences, k, n_bins=n_bins, method=method, approach=approach, seed=seed, floor=floor,
                           decompose_options=decompose_options, backend=backend)


@FAMILY.refine_face(
    sequences=Param("1-D float array, 2-D array or list/tuple of 1-D arrays", "Real observations."),
    estimate=Param("SpectralEstimate or dict", "Starting ``init``, ``transition``, ``loc``, ``scale`` (checked)."),
    method=Param("{'em'}", "Baum-Welch (EM for the hidden chain).", "em"), tol=1e-7, restarts=6)
def refine(sequences, estimate, *, method, max_iter, tol, floor, reg, restarts, seed):
    """Spectral then refine: Baum-Welch EM for the Gaussian HMM started from an estimate.

    The E-step is the scaled forward-backward recursion over all sequences
    at once (:func:`specinit.engine.sequences.forward_backward`) with normal
    emission densities; the M-step re-estimates ``init``, ``transition``
    (expected counts) and each state's ``loc`` and ``scale`` (posterior-
    weighted mean and standard deviation), [1]_ eqs. 40a-c and 53-54.

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"gaussian_hmm"``), ``.log_likelihood`` trace,
        ``.n_iter``, ``.converged``.

    Raises
    ------
    TypeError
        ``sequences`` or ``estimate`` of the wrong type.
    ValueError
        Non-finite observations, an estimate of another model or outside the supports.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [1] Rabiner (1989), eqs. 40a-c, 53-54 (continuous densities).
    """
    return FAMILY.refine(sequences, estimate, method=method, max_iter=max_iter, tol=tol, floor=floor, reg=reg,
                         restarts=restarts, seed=seed)


@FAMILY.scoring_face("sequences")
def log_likelihood(sequences, estimate) -> np.ndarray:
    """Log-likelihood of every sequence under ``estimate`` (forward algorithm, float64).

    Returns
    -------
    ndarray, shape (n_sequences,)
    """
    return FAMILY.log_likelihood(sequences, estimate)
