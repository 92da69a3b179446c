"""Hidden Markov models: NumPyro program, exact inference and moment map.

A hidden chain ``h_1 -> h_2 -> ...`` on ``k`` states starts from ``init``
and moves with ``transition[i, j] = P(h_{t+1} = j | h_t = i)``; each state
emits ``x_t`` from row ``h_t`` of ``emission`` (categorical symbols
``0..V-1``) or from ``Normal(loc[h_t], scale[h_t])`` (Gaussian variant).

Convention: ``transition`` is ROW-stochastic (row = from-state), as in
NumPyro, hmmlearn and most software. [1]_ Prop. 3.4 writes the transition
matrix column-stochastic (``T_{ij} = P(h_{t+1} = i | h_t = j)``); its ``T``
is our ``transition.T`` and its ``O`` is our ``emission.T``.

Hidden states are summed out by the forward algorithm in log space
(``jax.lax.scan``), packaged as the distributions :class:`CategoricalHMM`
and :class:`GaussianHMM` whose ``log_prob`` is one number per sequence, so
``numpyro.infer.log_likelihood`` is per sequence. Sequences of different
lengths are padded to a common length and masked by ``lengths``.

Method of moments ([1]_ Prop. 3.4): with ``h = h_2`` the observations
``x_1, x_2, x_3`` are conditionally independent given ``h`` and

.. math::

    E[x_2 | h = j] = O_j, \\qquad
    E[x_3 | h = j] = \\sum_l T_{jl} O_l, \\qquad
    E[x_1 | h = j] = \\sum_i \\frac{\\pi_i T_{ij}}{w_j} O_i

(row-stochastic ``T``, ``O_j`` = row ``j`` of ``emission``, ``pi`` the law
of ``h_1``, ``w = pi T`` the law of ``h``). :func:`spectral` feeds every
sliding triple ``(x_{t-1}, x_t, x_{t+1})`` of every sequence as three
one-hot views to :func:`specinit.engine.views.fit_multiview` with the middle
view as target: ``emission`` is the middle view's means; ``transition``
solves ``means_3 = T O`` by least squares in k dimensions; ``init`` solves
``E[x_1] = init O`` from the first symbol of every sequence. Every
estimate is projected strictly inside the simplex.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 15 (2014), Prop. 3.4, Sec. 3.3.
.. [2] Rabiner. "A tutorial on hidden Markov models and selected
   applications in speech recognition", Proc. IEEE 77 (1989), eqs. 19-20
   (forward), 27 (posterior marginals), 30-35 (Viterbi).
"""


from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from specinit.models._em import (
    RefineResult,
    SequenceBatch,
    check_em_options,
    em_loop,
    hmm_forward_backward,
)
from specinit.models._hmm_forward import (
    CategoricalHMM,
    _as_sequence_list,
    _check_symbols,
    _plate_shape,
    pad_sequences,
    posterior_marginals,
    viterbi,
)
from specinit.models._hmm_moments import (
    HMMMoments,
    chain_population,
    fit_chain,
    triple_moments,
)

from specinit._validation import bad_argument, check_choice, check_int, check_positive
from specinit.engine.support import project_to_simplex
from specinit.engine.views import ViewMoments
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = [
    "CategoricalHMM",
    "HMMMoments",
    "model",
    "pad_sequences",
    "population_moments",
    "posterior_marginals",
    "refine",
    "spectral",
    "spectral_from_moments",
    "viterbi",
]

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"emission": 0, "init": 0, "transition": (0, 1)},
    match_site="emission",
    dims={"init": ("states",), "transition": ("states", "next_state"), "emission": ("states", "symbol"),
          "observations": ("sequences", "time")},
    event_dims={"init": ("states",), "transition": ("next_state",), "emission": ("symbol",), "observations": ("time",)},
)


def model(sequences=None, *, k: int, n_symbols: int | None = None, lengths=None, concentration: float = 1.0):
    """NumPyro HMM with categorical emissions, hidden states summed out.

    Parameters
    ----------
    sequences : int array, shape (N, T) or (T,), optional
        Observed symbols in ``0..n_symbols-1``, zero-padded past each
        sequence's length (:func:`pad_sequences`). ``None`` generates
        sequences of lengths ``lengths`` (``numpyro.infer.Predictive``).
    k : int
        Number of hidden states.
    n_symbols : int, optional
        V; needed only when ``sequences`` is None (otherwise
        ``max(sequences) + 1`` would be a guess, so it is still preferred).
    lengths : int array, shape (N,), optional
        True lengths; default: every row is full length.
    concentration : float
        Symmetric Dirichlet concentration of ``init`` and of every row of
        ``transition`` and ``emission``.

    Notes
    -----
    NumPyro sites:
    ``init`` (k,); ``transition`` (k, k) and ``emission`` (k, V) in plate
    ``states`` (Dirichlet rows); observed ``observations`` (N, T) in plate
    ``sequences`` with a :class:`CategoricalHMM` likelihood (one log-density
    per sequence).
    """
    func = "hmm.model"
    sequences, lengths, n_steps = _plate_shape(sequences, lengths, func)
    if n_symbols is None:
        if sequences is None:
            raise bad_argument("n_symbols", func, "given when sequences is None, to generate data", n_symbols)
        n_symbols = int(jnp.max(sequences)) + 1
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        emission = numpyro.sample("emission", dist.Dirichlet(jnp.full(n_symbols, concentration)))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", CategoricalHMM(init, transition, emission, n_steps, lengths), obs=sequences)


def population_moments(init, transition, emission) -> HMMMoments:
    """Exact moments of an HMM whose middle state ``h_2`` is stationary ([1]_ Prop. 3.4).

    The sliding triples of long sequences see a middle state distributed as
    the stationary law ``w`` of ``transition``; with it the view means are
    ``E[x_1 | h=j] = sum_i w_i T_ij / w_j O_i``, ``E[x_2 | h=j] = O_j`` and
    ``E[x_3 | h=j] = sum_l T_jl O_l`` (row-stochastic ``T``); ``E[x_1]`` of a
    sequence start is ``init @ emission``.

    Parameters
    ----------
    init : array, shape (k,)
        Law of the first state.
    transition : array, shape (k, k)
        Row-stochastic transition matrix (row = from-state).
    emission : array, shape (k, V)
        Emission probabilities (rows).

    Returns
    -------
    HMMMoments
        For :func:`spectral_from_moments` (exact recovery checks).
    """
    return chain_population(init, transition, emission)


def spectral_from_moments(moments: HMMMoments, k: int, *, method: str = "tpm", approach: str = "auto", seed=0,
                          floor: float = 1e-3, decompose_options: dict | None = None) -> SpectralEstimate:
    """Recover ``init``, ``transition``, ``emission`` from :class:`HMMMoments` (data or population).

    Parameters
    ----------
    moments : HMMMoments
        From :func:`population_moments` or the sliding triples of data.
    k : int
        Number of hidden states.
    method, approach, seed, floor, decompose_options
        As for :func:`spectral`.

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        Only with ``approach="symmetric"``, if the symmetrized second moment is
        not positive definite on its top k eigenvectors.
    """
    func = "hmm.spectral"
    floor = check_positive(floor, "floor", func)
    init, transition, raw_emission, _, diagnostics = fit_chain(moments, k, func, method, seed, floor,
                                                               decompose_options, approach)
    emission, report = project_to_simplex(raw_emission, floor)
    diagnostics["emission_negative_mass"] = report["negative_mass"]
    return SpectralEstimate("hmm", {"init": init, "transition": transition, "emission": emission}, diagnostics,
                            facts=FACTS)


def spectral(sequences, k: int, n_symbols: int, *, method: str = "tpm", approach: str = "auto", seed=0,
             floor: float = 1e-3, decompose_options: dict | None = None) -> SpectralEstimate:
    """Method-of-moments estimate of a categorical HMM ([1]_ Prop. 3.4).

    Parameters
    ----------
    sequences : 1-D int array, 2-D int array or list/tuple of 1-D int arrays
        One sequence, equal-length sequences (rows) or ragged sequences of
        symbols in ``0..n_symbols-1``. Sequences shorter than 3 inform only
        ``init`` (counted in ``diagnostics["n_short_sequences"]``). One long
        sequence may also be a 1-D ``dask.array``: the triples' one-hot views
        are built block by block where the symbols live
        (:func:`specinit.engine.dask_passes.sliding_one_hot_views`).
    k : int
        Number of hidden states, ``1 <= k <= n_symbols``.
    n_symbols : int
        V, the number of distinct symbols.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition (:mod:`specinit.engine.decompose`); ``approach="symmetric"`` only.
    approach : {"auto", "symmetric", "jennrich"}
        ``"symmetric"`` whitens the symmetrized second moment
        (:func:`specinit.engine.views.fit_multiview`) and raises
        :class:`specinit.engine.whitening.IndefiniteMomentError` when it is
        not positive semi-definite (the data are then not a k-state HMM).
        ``"jennrich"`` (observable operators, simultaneous diagonalization,
        [2]_ Alg. B) needs no PSD moment and warns (RuntimeWarning) when the
        operators are far from simultaneously diagonalizable or a state
        weight is not positive. ``"auto"`` (default): ``"symmetric"``, and
        on an indefinite moment a RuntimeWarning and ``"jennrich"``,
        recorded in ``diagnostics["fallback"]`` (None when no fallback was
        needed). On real sequences the estimate is a starting point for
        :func:`refine` (Baum-Welch), not a final fit.
    seed : int or numpy.random.Generator
    floor : float
        Every probability is floored at ``floor / d`` (d = row length) and
        rows renormalized, so estimates are strictly inside the simplex.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition (``approach="symmetric"``
        only); unknown keys raise.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic
        (row = from-state; the transpose of [1]_'s ``T``), ``"emission"``
        (k, V). ``diagnostics``: sequence/triple counts, the law of the middle
        state, least-squares residuals of the transition and init solves,
        negative mass clipped per row, and the multi-view diagnostics.

    Raises
    ------
    TypeError
        ``sequences`` not an array or list/tuple of 1-D numeric arrays.
    ValueError
        Empty input, negative, non-integer or out-of-range symbols, no
        sequence of length >= 3, or ``k`` outside ``1..n_symbols``.

    Notes
    -----
    Sliding triples from the start of a sequence see a middle state that is
    not yet stationary; the multi-view model holds for any law of the middle
    state, so this is no bias. ``init`` is estimated from first symbols only:
    with few sequences it is noisy.
    """
    func = "hmm.spectral"
    n_symbols = check_int(n_symbols, "n_symbols", func, minimum=1)
    k = check_int(k, "k", func, minimum=1, maximum=n_symbols)
    from specinit.engine.dask_passes import is_dask_array, sliding_one_hot_views

    if is_dask_array(sequences):
        views, first, n_triples = sliding_one_hot_views(sequences, n_symbols, func)
        moments = HMMMoments(ViewMoments(views), first, {"n_sequences": 1, "n_triples": n_triples, "n_short_sequences": 0})
        return spectral_from_moments(moments, k, method=method, approach=approach, seed=seed, floor=floor,
                                     decompose_options=decompose_options)
    seqs = _as_sequence_list(sequences, func, categorical=True)
    _check_symbols(seqs, n_symbols, func)
    return spectral_from_moments(triple_moments(seqs, n_symbols, func), k, method=method, approach=approach,
                                 seed=seed, floor=floor, decompose_options=decompose_options)


def refine(sequences, estimate, *, n_symbols: int | None = None, method: str = "em", max_iter: int = 100,
           tol: float = 1e-7, floor: float = 1e-10):
    """Spectral then refine: Baum-Welch EM for the categorical HMM started from an estimate.

    The E-step is the scaled forward-backward recursion over all sequences
    at once (NumPy, float64; :func:`specinit.models._em.hmm_forward_backward`),
    the M-step the re-estimation formulas of [2]_ (eqs. 40a-c).

    Parameters
    ----------
    sequences : 1-D int array, 2-D int array or list/tuple of 1-D int arrays
        As for :func:`spectral` (every sequence of length >= 1 is used).
    estimate : SpectralEstimate or dict
        Starting ``init`` (k,), ``transition`` (k, k) and ``emission`` (k, V).
    n_symbols : int, optional
        V; default ``emission.shape[1]``.
    method : {"em"}
        Baum-Welch.
    max_iter : int
        Largest number of EM iterations.
    tol : float
        Stop when the log-likelihood gain per symbol is below ``tol``.
    floor : float
        Probabilities are floored at ``floor`` and rows renormalized after
        every M-step (strictly inside the simplex, as NumPyro needs).

    Returns
    -------
    specinit.models._em.RefineResult
        ``.estimate`` (model ``"hmm"``, the refined sites, for warm starts),
        ``.log_likelihood`` trace (total over all sequences), ``.n_iter``,
        ``.converged``; ``diagnostics["n_observations"]`` is the number of symbols.

    Raises
    ------
    TypeError
        ``sequences`` of the wrong type, ``estimate`` without the HMM sites.
    ValueError
        Symbols outside ``0..n_symbols-1``, parameters of inconsistent shapes,
        non-positive ``tol`` / ``floor``.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    Rabiner (1989), [2]_ eqs. 40a-c (re-estimation) and 91-93 (scaling).
    """

    func = "hmm.refine"
    check_choice(method, "method", func, ("em",))
    params = getattr(estimate, "params", estimate)
    if not isinstance(params, dict) or not {"init", "transition", "emission"} <= set(params):
        raise bad_argument("estimate", func, "a SpectralEstimate or dict with 'init', 'transition' and 'emission'",
                           estimate, kind=TypeError)
    init, transition, emission = (np.asarray(params[n], dtype=np.float64) for n in ("init", "transition", "emission"))
    k = init.size
    if transition.shape != (k, k) or emission.ndim != 2 or emission.shape[0] != k:
        raise bad_argument("estimate", func, "init (k,), transition (k, k) and emission (k, V)",
                           f"shapes {init.shape}, {transition.shape}, {emission.shape}", describe=False)
    n_symbols = emission.shape[1] if n_symbols is None else check_int(n_symbols, "n_symbols", func, minimum=1)
    if n_symbols != emission.shape[1]:
        raise bad_argument("n_symbols", func, f"the number of emission columns ({emission.shape[1]})", n_symbols)
    max_iter, tol = check_em_options(max_iter, tol, func)
    floor = check_positive(floor, "floor", func)
    seqs = _as_sequence_list(sequences, func, categorical=True)
    _check_symbols(seqs, n_symbols, func)
    batch = SequenceBatch(seqs, n_symbols)

    def normalize(rows):
        rows = np.maximum(rows / np.maximum(rows.sum(axis=-1, keepdims=True), np.finfo(float).tiny), floor)
        return rows / rows.sum(axis=-1, keepdims=True)

    def estep(p):
        *counts, ll = hmm_forward_backward(batch, *p)
        return counts, ll

    def mstep(counts):
        return tuple(normalize(c) for c in counts)

    start = (normalize(init), normalize(transition), normalize(emission))
    (init, transition, emission), trace, n_iter, converged, decreases = em_loop(
        estep, mstep, start, max_iter=max_iter, tol=tol, n_observations=batch.n_observations, func=func)
    diagnostics = {"spectral": dict(getattr(estimate, "diagnostics", {})),
                   "refine": {"method": method, "n_iter": n_iter, "converged": converged, "log_likelihood": trace}}
    refined = SpectralEstimate("hmm", {"init": init, "transition": transition, "emission": emission}, diagnostics,
                               facts=FACTS)
    return RefineResult(refined, trace, n_iter, converged, method,
                        {"n_observations": batch.n_observations, "decreases": decreases})
