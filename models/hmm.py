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

from specinit._validation import Interval, bad_argument, check_allocation, public
from specinit.distributions.hmm import (
    CategoricalHMM,
    pad_sequences,
    plate_shape,
    posterior_marginals,
    sequence_distribution,
    viterbi,
)
from specinit.engine.sequences import (
    ChainViews,
    SequenceBatch,
    TripleCounts,
    as_sequences,
    chain_population,
    check_symbols,
    forward_backward,
    one_hot,
    triple_views,
)
from specinit.engine.sources import is_dask_array
from specinit.engine.views import ViewMoments
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import Param
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, Family, k_param, site_values

__all__ = [
    "FACTS",
    "FAMILY",
    "HMM",
    "CategoricalHMM",
    "log_likelihood",
    "model",
    "pad_sequences",
    "population_moments",
    "posterior_marginals",
    "refine",
    "spectral",
    "spectral_from_moments",
    "update",
    "viterbi",
]


def solve_rows(emission: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares ``X`` with ``X @ emission ~= targets`` (k unknowns per row), and the relative residual.

    Parameters
    ----------
    emission : ndarray, shape (k, V)
    targets : ndarray, shape (m, V) or (V,)

    Returns
    -------
    (ndarray (m, k), float)
    """
    solution = np.linalg.lstsq(emission.T, np.atleast_2d(targets).T, rcond=None)[0].T
    residual = np.linalg.norm(solution @ emission - targets) / max(np.linalg.norm(targets), np.finfo(float).tiny)
    return solution, float(residual)


class HMM(Family):
    """Categorical hidden Markov model: sliding triples as a multi-view model around the middle state."""

    name = "hmm"
    data_kind = "sequences"
    sites = {
        "init": Site("simplex", (0,), ("states",), ("states",)),
        "transition": Site("simplex", (0, 1), ("states", "next_state"), ("next_state",)),
        "emission": Site("simplex", (0,), ("states", "symbol"), ("symbol",)),
        "observations": Site("observed", (), ("sequences", "time"), ("time",)),
    }
    match_site = "emission"
    fit_kind = "multiview"
    options = {"n_symbols": Param("int", "V, the number of distinct symbols.", constraint=Interval(int, 1))}
    arguments = {
        "sequences": Param("1-D int array, 2-D int array or list/tuple of 1-D int arrays", "One sequence, "
                           "equal-length sequences (rows) or ragged sequences of symbols in ``0..n_symbols-1``. "
                           "Sequences shorter than 3 inform only ``init`` (counted in "
                           "``diagnostics[\"n_short_sequences\"]``). One long sequence may also be a 1-D "
                           "``dask.array``: the triples' one-hot views are built block by block where the symbols "
                           "live (:func:`specinit.engine.sequences.triple_views`)."),
        "moments": Param("ChainViews", "From :func:`population_moments` or the sliding triples of data."),
        "k": k_param("Number of hidden states, ``1 <= k <= n_symbols``."),
        "method": Param("{'tpm', 'svtd', 'eca', 'als'}", "Tensor decomposition (:mod:`specinit.engine.decompose`); "
                        "``approach=\"symmetric\"`` only.", "tpm"),
        "approach": COMMON_OPTIONS["approach"].documented(
            "``\"symmetric\"`` whitens the symmetrized second moment (:func:`specinit.engine.views.fit_multiview`) "
            "and raises :class:`specinit.engine.whitening.IndefiniteMomentError` when it is not positive "
            "semi-definite (the data are then not a k-state HMM). ``\"jennrich\"`` (observable operators, "
            "simultaneous diagonalization, [2]_ Alg. B) needs no PSD moment and warns (RuntimeWarning) when the "
            "operators are far from simultaneously diagonalizable or a state weight is not positive. ``\"auto\"`` "
            "(default): ``\"symmetric\"``, and on an indefinite moment a RuntimeWarning and ``\"jennrich\"``, "
            "recorded in ``diagnostics[\"fallback\"]`` (None when no fallback was needed). On real sequences the "
            "estimate is a starting point for :func:`refine` (Baum-Welch), not a final fit."),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Every probability is floored at ``floor / d`` (d = row length) and rows renormalized, so estimates are "
            "strictly inside the simplex."),
    }
    advice = "The symbol triples may not follow a k-state HMM: try a smaller k, or approach='jennrich'."

    def target(self, **options) -> int:
        return 1

    def fit_input(self, moments: ChainViews, k, **options):
        return moments.views

    def sequences(self, sequences, n_symbols: int):
        """Validated symbol sequences (a Dask 1-D array passes through), checked against ``n_symbols``."""
        if is_dask_array(sequences):
            return sequences
        seqs = as_sequences(sequences, categorical=True)
        check_symbols(seqs, n_symbols)
        return seqs

    def moments(self, sequences, *, k, backend, n_symbols: int) -> ChainViews:
        # The emission matrix and the projection's temporaries: about four (k, n_symbols) float64 arrays.
        check_allocation(4 * 8 * float(k) * n_symbols, "n_symbols", f"(k, n_symbols) = ({k}, {n_symbols}) emissions")
        chain = triple_views(self.sequences(sequences, n_symbols), n_symbols)
        return ChainViews(ViewMoments(chain.views, backend=backend), chain.first_mean, chain.counts, chain.symbols,
                          chain.n_symbols)

    def population_moments(self, params, **options) -> ChainViews:
        return chain_population(params["init"], params["transition"], params["emission"])

    def max_components(self, moments: ChainViews) -> tuple[int, str]:
        observed = min(moments.views.dims)
        if moments.symbols is None:
            return observed, f"at most the number of symbols n_symbols = {observed}"
        return observed, f"at most the number of symbols observed ({observed} of n_symbols = {moments.n_symbols})"

    def unwhiten(self, fit, moments: ChainViews, k, floor, **options):
        emission = fit.means[1]
        transition, trans_residual = solve_rows(emission, fit.means[2])
        init, init_residual = solve_rows(emission, moments.first_mean)
        report = {**moments.counts, "middle_state_weights": fit.weights, "transition_residual": trans_residual,
                  "init_residual": init_residual}
        return {"init": init[0], "transition": transition, "emission": moments.expand(emission)}, report, {}

    # EM (Baum-Welch) -----------------------------------------------------------------------------------------
    def refine_data(self, sequences, estimate: SpectralEstimate, n_symbols: int | None = None):
        V = estimate.params["emission"].shape[1]
        if n_symbols is not None and Interval(int, 1).check("n_symbols", n_symbols) != V:
            raise bad_argument("n_symbols", None, f"the number of emission columns ({V})", n_symbols)
        batch = SequenceBatch(self.sequences(as_sequences(sequences, categorical=True), V))
        batch.one_hot = one_hot(batch.values, V)
        return batch

    def n_observations(self, batch: SequenceBatch) -> int:
        return batch.n_observations

    def e_step(self, params, batch: SequenceBatch):
        init_counts, trans_counts, gamma, ll = forward_backward(batch, params["init"], params["transition"],
                                                                params["emission"].T[batch.values])
        return (init_counts, trans_counts, np.asarray(batch.one_hot.T @ gamma).T), ll

    def m_step(self, batch, stats, params, **options):
        init, transition, emission = stats
        return {"init": init, "transition": transition, "emission": emission}

    def split_merge(self, params, batch, stats, rng, attempt=0):
        # merge: the least visited state leaves, the chain's moves into it going to the other states in
        # proportion; split: the attempt-th most visited other state, its emission row tilted both ways along a
        # random direction, its transitions copied and the moves into it shared half and half
        init, transition, emission = (np.array(params[name], dtype=np.float64)
                                      for name in ("init", "transition", "emission"))
        k = init.size
        if k < 2:
            return None
        visits = np.asarray(stats[2]).sum(axis=1)
        leaving = int(np.argmin(visits))
        others = np.delete(np.arange(k), leaving)
        split = int(others[np.argsort(-visits[others], kind="stable")[attempt % (k - 1)]])
        tilt = np.exp(rng.standard_normal(emission.shape[1]))
        emission[leaving], emission[split] = emission[split] * tilt, emission[split] / tilt
        transition[leaving] = transition[split]
        for weights in (init[None, :], transition):
            weights[:, leaving] = 0.0
            weights /= weights.sum(axis=1, keepdims=True)
            weights[:, [leaving, split]] = weights[:, [split]] / 2
        return {"init": init, "transition": transition, "emission": emission / emission.sum(axis=1, keepdims=True)}

    def log_likelihood(self, sequences, estimate) -> np.ndarray:
        from specinit.refine import check_estimate, in_float64

        estimate = check_estimate(self, estimate)

        def per_sequence():
            hmm, padded, _, _ = sequence_distribution(sequences, estimate.params)
            return hmm.log_prob(jnp.asarray(padded))

        return in_float64(per_sequence)


FAMILY = HMM()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


@public
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
    sequences, lengths, n_steps = plate_shape(sequences, lengths, None)
    if n_symbols is None:
        if sequences is None:
            raise bad_argument("n_symbols", None, "given when sequences is None, to generate data", n_symbols)
        n_symbols = int(jnp.max(sequences)) + 1
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        emission = numpyro.sample("emission", dist.Dirichlet(jnp.full(n_symbols, concentration)))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", CategoricalHMM(init, transition, emission, n_steps, lengths), obs=sequences)


@FAMILY.face(
    validate=True,
    init=Param("array, shape (k,), or dict / SpectralEstimate", "Law of the first state, or all three sites by "
               "name."),
    transition=Param("array, shape (k, k)", "Row-stochastic transition matrix (row = from-state).", None),
    emission=Param("array, shape (k, V)", "Emission probabilities (rows).", None))
def population_moments(init, transition, emission) -> ChainViews:
    """Exact moments of an HMM whose middle state ``h_2`` is stationary ([1]_ Prop. 3.4).

    The sliding triples of long sequences see a middle state distributed as
    the stationary law ``w`` of ``transition``; with it the view means are
    ``E[x_1 | h=j] = sum_i w_i T_ij / w_j O_i``, ``E[x_2 | h=j] = O_j`` and
    ``E[x_3 | h=j] = sum_l T_jl O_l`` (row-stochastic ``T``); ``E[x_1]`` of a
    sequence start is ``init @ emission``.

    Returns
    -------
    specinit.engine.sequences.ChainViews
        For :func:`spectral_from_moments` (exact recovery checks).
    """
    return FAMILY.population_moments(site_values(init, "init", transition=transition, emission=emission))


@FAMILY.face()
def spectral_from_moments(moments, k, *, method, approach, seed, floor, decompose_options) -> SpectralEstimate:
    """Recover ``init``, ``transition``, ``emission`` from :class:`~specinit.engine.sequences.ChainViews`.

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
    return FAMILY.spectral_from_moments(moments, k, method=method, approach=approach, seed=seed, floor=floor,
                                        decompose_options=decompose_options)


@FAMILY.face()
def spectral(sequences, k, n_symbols, *, method, approach, seed, floor, decompose_options, backend) -> SpectralEstimate:
    """Method-of-moments estimate of a categorical HMM ([1]_ Prop. 3.4).

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic
        (row = from-state; the transpose of [1]_'s ``T``), ``"emission"``
        (k, V). ``diagnostics``: sequence/triple counts, the law of the middle
        state, least-squares residuals of the transition and init solves,
        negative mass clipped per row (``negative_mass_<site>``), and the
        multi-view diagnostics.

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
    return FAMILY.spectral(sequences, k, n_symbols=n_symbols, method=method, approach=approach, seed=seed,
                           floor=floor, decompose_options=decompose_options, backend=backend)


@FAMILY.refine_face(
    sequences=Param(HMM.arguments["sequences"].type, "As for :func:`spectral` (every sequence of length >= 1 is "
                    "used)."),
    estimate=Param("SpectralEstimate or dict", "Starting ``init`` (k,), ``transition`` (k, k) and ``emission`` (k, "
                   "V), strictly inside their simplices (checked, never repaired silently)."),
    n_symbols=Param("int, optional", "V; default ``emission.shape[1]``.", None),
    method=Param("{'em'}", "Baum-Welch (EM for the hidden chain).", "em"),
    max_iter=1000, tol=None, rtol=1e-7, restarts=6, restart_iter=10, accelerate=True,
    split_merge=Param("int", "Then split-merge moves: the least visited state leaves (the moves into it shared among "
                      "the others) and a heavily visited state is split in two (its emission row tilted both ways "
                      "along a random direction, its transitions copied); EM runs from the move, which replaces the "
                      "estimate when it passes its log-likelihood. The moves stop after ``split_merge`` failures in a "
                      "row (0: none). They revive a state the spectral start left unreachable and separate states "
                      "that share one kind of symbol.", 3))
def refine(sequences, estimate, *, n_symbols, method, max_iter, tol, rtol, floor, restarts, split_merge, restart_iter,
           seed, accelerate):
    """Spectral then refine: Baum-Welch EM for the categorical HMM started from an estimate.

    The E-step is the scaled forward-backward recursion over all sequences
    at once (NumPy, float64; :func:`specinit.engine.sequences.forward_backward`,
    equal to the log-likelihood of :class:`CategoricalHMM` to round-off), the
    M-step the re-estimation formulas of [2]_ (eqs. 40a-c), every iterate
    projected strictly inside the simplex (:mod:`specinit.refine`). Baum-Welch
    converges slowly on long sequences; by default its steps are accelerated
    by SQUAREM (``accelerate``; :func:`specinit.refine.em`): on English letters
    the same or higher optima in 1.5-4x fewer steps
    (``benchmarks/bench_refine_optimum.py``).

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"hmm"``, the refined sites, for warm starts),
        ``.log_likelihood`` trace (total over all sequences), ``.n_iter``,
        ``.converged``; ``diagnostics["n_observations"]`` is the number of symbols.

    Raises
    ------
    TypeError
        ``sequences`` of the wrong type, an ``estimate`` that is not an estimate or dict.
    ValueError
        Symbols outside ``0..n_symbols-1``, an estimate of another model, a
        missing site, values outside the simplex or of inconsistent shapes,
        non-positive ``tol`` / ``floor``, ``rtol`` outside ``(0, 1)``,
        ``restart_iter < 1``, negative ``restarts`` or ``split_merge``.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    Rabiner (1989), [2]_ eqs. 40a-c (re-estimation) and 91-93 (scaling).
    """
    return FAMILY.refine(sequences, estimate, method=method, max_iter=max_iter, tol=tol, rtol=rtol, floor=floor,
                         restarts=restarts, split_merge=split_merge, restart_iter=restart_iter, seed=seed,
                         n_symbols=n_symbols, accelerate=accelerate)


@FAMILY.face(
    sequences=Param(HMM.arguments["sequences"].type, "The new sequences (whole sequences: a sequence is not "
                    "continued across batches)."),
    estimate=UPDATED_ESTIMATE,
    k=Param("int, optional", "Number of hidden states: required for the first batch; with ``estimate`` None means "
            "``estimate.k`` (the stored counts fit any k).", None, Interval(int, 1, none=True)),
    n_symbols=Param("int, optional", "V: required for the first batch; with ``estimate`` it must be None or the "
                    "estimate's.", None, Interval(int, 1, none=True)))
def update(sequences, estimate, *, k, n_symbols, method, approach, seed, floor, decompose_options) -> SpectralEstimate:
    """Add a batch of sequences to an HMM fit: exact merged triple counts, then the moment estimate.

    The moments of :func:`spectral` are the counts of the sequences' sliding
    symbol triples and first symbols (:class:`~specinit.engine.sequences.TripleCounts`),
    which add up over batches exactly: after any number of batches the
    estimate is that of :func:`spectral` on all the sequences at once (the
    same moments to rounding, the same decomposition and seed). The counts do
    not depend on ``k``. States keep their labels from batch to batch (the new
    emission rows are matched to the previous ones). Memory: a few
    (n_symbols,)^3 float arrays. There is no Baum-Welch step (it needs the sequences):
    :func:`refine` on sequences at hand takes the estimate further. The
    returned estimate keeps the counts in its ``state`` (``moments/...``),
    which :meth:`~specinit.estimate.SpectralEstimate.save` writes, so updates
    go on in a later process. The online face of ``SpectralHMM.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"hmm"`` as from :func:`spectral`, plus ``n_batches`` in the
        diagnostics (the counts of sequences and triples are those of all
        batches).

    Raises
    ------
    ValueError
        ``k`` or ``n_symbols`` missing on the first batch, ``n_symbols``
        other than the estimate's, symbols outside ``0..n_symbols-1``, an
        estimate without stored counts (from :func:`spectral`: fit the first
        batch with :func:`update`), no sequence of length >= 3 in any batch.
    MemoryError
        The (n_symbols,)^3 counts over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> emission = np.array([[0.7, 0.2, 0.05, 0.05], [0.05, 0.05, 0.2, 0.7]])
    >>> def sequence(n):  # a sticky two-state chain
    ...     states = np.cumsum(rng.random(n) < 0.1) % 2
    ...     return np.array([rng.choice(4, p=emission[h]) for h in states])
    >>> seqs = [sequence(50) for _ in range(40)]
    >>> est = update(seqs[:20], k=2, n_symbols=4)
    >>> est = update(seqs[20:], est)
    >>> once = spectral(seqs, 2, 4)
    >>> from specinit.align import match_components
    >>> same = once.params["emission"][match_components(est.params["emission"], once.params["emission"])]
    >>> bool(abs(est.params["emission"] - same).max() < 1e-8), est.diagnostics["n_batches"]
    (True, 2)
    """
    n_symbols = Interval(int, 1, none=True).check("n_symbols", n_symbols)
    stored, k, n_batches = FAMILY.stream(estimate, k, TripleCounts, "hmm.update")
    if stored is None and n_symbols is None:
        raise bad_argument("n_symbols", None, "given for the first batch (no estimate to update)", n_symbols)
    if stored is not None:
        if n_symbols not in (None, stored.n_symbols):
            raise bad_argument("n_symbols", None, f"None or the estimate's n_symbols = {stored.n_symbols}", n_symbols)
        n_symbols = stored.n_symbols
    batch = TripleCounts.from_sequences(FAMILY.sequences(as_sequences(sequences, categorical=True), n_symbols),
                                        n_symbols)
    merged = batch if stored is None else stored + batch
    fit = FAMILY.spectral_from_moments(merged.chain_views(), k, method=method, approach=approach, seed=seed,
                                       floor=floor, decompose_options=decompose_options, n_symbols=n_symbols)
    return FAMILY.streamed(fit, estimate, merged, n_batches)


@FAMILY.scoring_face("sequences")
def log_likelihood(sequences, estimate) -> np.ndarray:
    """Log-likelihood of every sequence under ``estimate`` (forward algorithm, float64).

    Returns
    -------
    ndarray, shape (n_sequences,)
        ``log p(x_{1:T})`` of each sequence, hidden states summed out (the
        log-density of the NumPyro program's ``observations`` site).
    """
    return FAMILY.log_likelihood(sequences, estimate)
