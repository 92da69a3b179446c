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

The likelihood is that one definition, which :func:`model` and
:func:`log_likelihood` read. Baum-Welch (:func:`refine`) needs the
posterior counts as well, over every sequence at each step, so its E-step
runs the scaled forward-backward recursion on the host
(:func:`specinit.engine.sequences.forward_backward`: NumPy, or compiled
with the extra ``[fast]``, time-major and unpadded); a JAX program cannot
serve it without padding every sequence to the longest and compiling per
shape. The two recursions are tested equal, sequence by sequence, for both
chain families (``tests/test_refine.py``).

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

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpy.typing import ArrayLike

from specinit._validation import Interval, bad_argument, check_allocation, current_entry, warn
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
from specinit.engine.support import project_to_simplex
from specinit.engine.sources import is_dask_array
from specinit.engine.views import ViewMoments
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import Face, Param, chain_face, face
from specinit.family import COMMON_OPTIONS, UPDATED_ESTIMATE, Family, k_param, site_values
from specinit.refine import RefineResult

if TYPE_CHECKING:
    import dask.array
    from specinit.engine.backends import Passes
    from specinit.engine.protocols import Moments, MultiViewMoments
    from specinit.engine.views import MultiViewFit

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
    "degeneracy",
    "operator_transition",
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


def operator_transition(views: MultiViewMoments, emission: np.ndarray) -> np.ndarray:
    """The transition matrix from the lag-one and lag-two pair moments, in the states' basis set by ``emission``.

    With ``G = O Q`` (``Q`` an orthonormal basis of the row space of the
    emission ``O``) and ``J`` the joint law of ``(h_{t-1}, h_t)``, the
    projected pair moments of the sliding triples are
    ``A = Q^T E[x_t x_{t-1}^T] Q = G^T J^T G`` and
    ``B = Q^T E[x_{t+1} x_{t-1}^T] Q = G^T T^T J^T G``, so
    ``B A^{-1} = G^T T^T G^{-T}`` (the observable operator of [3]_) and
    ``T = G (B A^{-1})^T G^{-1}``. Its eigenvalues are those of ``B A^{-1}``,
    read from second moments of the data alone; an error in how far apart the
    estimated emission rows are only conjugates ``T`` (for k = 2 it cancels),
    whereas the regression ``T O = E[x_{t+1} | h_t]`` scales its non-unit
    eigenvalues by the square of that error -- past 1 for a sticky chain,
    where the projection onto the simplex then returns the identity. Rows
    sum to one whenever the rows of ``emission`` do (one-hot views).

    Parameters
    ----------
    views : ViewMoments, SummedViews or MultiViewPopulation
        The three views ``x_{t-1}, x_t, x_{t+1}`` of the sliding triples.
    emission : ndarray, shape (k, V)
        The middle view's conditional means (rank k).

    Returns
    -------
    ndarray, shape (k, k)
        Before projection onto the simplex (least squares where a k x k
        matrix is singular, so always finite for finite moments).

    References
    ----------
    .. [3] Hsu, Kakade, Zhang. "A spectral algorithm for learning hidden
       Markov models", JCSS 78 (2012), Lemma 3 (observable operators).
    """
    Q = np.linalg.qr(emission.T)[0]
    G = emission @ Q
    lag_one = Q.T @ views.pairs_matmat(1, 0, Q)
    lag_two = Q.T @ views.pairs_matmat(2, 0, Q)
    operator_t = np.linalg.lstsq(lag_one.T, lag_two.T, rcond=None)[0]  # (B A^{-1})^T
    return np.linalg.lstsq(G.T, (G @ operator_t).T, rcond=None)[0].T


def _simplex_repair(rows: np.ndarray) -> float:
    """How far rows are from the probability simplex: the Frobenius norm of their projection's change."""
    rows = np.asarray(rows, dtype=np.float64)
    return float(np.linalg.norm(rows - project_to_simplex(rows, np.finfo(float).tiny)[0]))


#: A state whose weight (law of the middle state for :func:`spectral`, share of the expected visits for
#: :func:`refine`) is below this is reported as empty (``diagnostics["degenerate/empty_states"]``).
EMPTY_STATE_WEIGHT = 1e-3

#: A transition row whose mass off its largest entry is below ``max(POINT_MASS_TOL, 2 * floor)`` is a point mass.
POINT_MASS_TOL = 1e-3


def degeneracy(params: Mapping[str, np.ndarray], *, floor: float, weights: np.ndarray,
               scale_floor: float | None = None) -> dict:
    """Degenerate parts of an HMM estimate, as flat diagnostics (``degenerate/...``; state indices as int arrays).

    Parameters
    ----------
    params : dict
        ``init``, ``transition`` and ``emission`` (categorical) or ``scale`` (Gaussian), inside their supports.
    floor : float
        The floor the estimate was projected with (probabilities at least ``floor / d``).
    weights : array, shape (k,)
        The law of the states (middle-state weights of the moment fit, or the shares of the expected visits).
    scale_floor : float, optional
        The smallest scale the estimate allows (Gaussian emissions).

    Returns
    -------
    dict
        ``degenerate/scale_at_floor`` (states whose variance is at most twice the floor's, Gaussian only),
        ``degenerate/emission_at_floor`` (states whose emission row is at the floor for every symbol but one,
        symbols at the floor in every state -- never observed -- left out; categorical only: a state that emits
        a few symbols is not degenerate), ``degenerate/transition_point_mass`` (states whose transition row puts
        all but ``max(1e-3, 2 floor)`` of its mass on one state), ``degenerate/transition_identity`` (every row a point
        mass on itself: the chain never moves), ``degenerate/identity_distance`` (``max |T - I|``),
        ``degenerate/empty_states`` (weight below 1e-3), ``degenerate/any`` (whether any of these is set).
    """
    transition = np.asarray(params["transition"], dtype=np.float64)
    k = transition.shape[0]
    weights = np.asarray(weights, dtype=np.float64)
    tol = max(POINT_MASS_TOL, 2.0 * floor)
    off_peak = 1.0 - transition.max(axis=1)
    point_mass = np.flatnonzero(off_peak < tol) if k > 1 else np.zeros(0, dtype=np.int64)
    report = {
        "degenerate/transition_point_mass": point_mass.astype(np.int64),
        "degenerate/transition_identity": bool(k > 1 and np.all(1.0 - np.diag(transition) < tol)),
        "degenerate/identity_distance": float(np.abs(transition - np.eye(k)).max()),
        "degenerate/empty_states": np.flatnonzero(~(weights >= EMPTY_STATE_WEIGHT)).astype(np.int64),
    }
    if "emission" in params:
        emission = np.asarray(params["emission"], dtype=np.float64)
        at_floor = emission <= 1.5 * floor / emission.shape[1]
        informative = ~np.all(at_floor, axis=0)  # a symbol at the floor in every state was never observed
        above = np.sum(~at_floor[:, informative], axis=1) if informative.sum() > 1 else np.full(k, 2)
        report["degenerate/emission_at_floor"] = np.flatnonzero(above <= 1).astype(np.int64)
    if scale_floor is not None and "scale" in params:
        scale = np.asarray(params["scale"], dtype=np.float64)
        report["degenerate/scale_at_floor"] = np.flatnonzero(scale**2 <= 2.0 * scale_floor**2).astype(np.int64)
    report["degenerate/any"] = bool(report["degenerate/transition_identity"] or any(
        np.size(value) for key, value in report.items() if isinstance(value, np.ndarray)))
    return report


def _warn_degenerate(report: dict, k: int, advice: str) -> None:
    """One RuntimeWarning naming the degenerate states of a :func:`degeneracy` report (none when it is healthy).

    Parameters
    ----------
    report : dict
        From :func:`degeneracy` (keys ``degenerate/...``).
    k : int
        Number of states.
    advice : str
        What to try, appended to the message.
    """
    if not report["degenerate/any"]:
        return
    identity = report["degenerate/transition_identity"]
    found = []
    for key, what in (("degenerate/scale_at_floor", "state(s) {} have their scale at the floor"),
                      ("degenerate/emission_at_floor",
                       "state(s) {} have all but one symbol of their emission row at the floor"),
                      ("degenerate/transition_point_mass", "the transition row(s) of state(s) {} are (nearly) a "
                                                           "point mass"),
                      ("degenerate/empty_states", "state(s) {} have (nearly) zero weight")):
        value = report.get(key)
        if value is not None and np.size(value) and not (identity and key == "degenerate/transition_point_mass"):
            found.append(what.format(np.asarray(value).tolist()) + f" (diagnostics['{key}'])")
    if identity:
        found.append(f"the transition matrix is the identity to within {report['degenerate/identity_distance']:.2g}"
                     " (diagnostics['degenerate/transition_identity']): the chain never moves, so the data do not "
                     "identify its transitions")
    warn(f"{current_entry()}: degenerate estimate for k={k}: " + "; ".join(found) + f". {advice}")


class HMM(Family):
    """Categorical hidden Markov model: sliding triples as a multi-view model around the middle state."""

    name = "hmm"
    data_kind = "symbols"
    sites = {
        "init": Site("simplex", (0,), ("states",), ("states",)),
        "transition": Site("simplex", (0, 1), ("states", "next_state"), ("next_state",)),
        "emission": Site("simplex", (0,), ("states", "symbol"), ("symbol",)),
        "observations": Site("observed", (), ("sequences", "time"), ("time",)),
    }
    match_site = "emission"
    summary = TripleCounts
    fit_kind = "multiview"
    options = {"n_symbols": Param("int", "V, the number of distinct symbols.", constraint=Interval(int, 1))}
    arguments = {
        "sequences": Param("1-D int array, 2-D int array or list/tuple of 1-D int arrays", "One sequence, "
                           "equal-length sequences (rows) or ragged sequences of symbols in ``0..n_symbols-1``. "
                           "Sequences shorter than 3 inform only ``init`` (counted in "
                           "``diagnostics[\"n_short_sequences\"]``). One long sequence may also be a 1-D "
                           "``dask.array``: the triples' one-hot views are built block by block where the symbols "
                           "live (:func:`specinit.engine.sequences.triple_views`).",
                           annotation=ArrayLike | Sequence[ArrayLike]),
        "moments": Param("ChainViews", "From :func:`population_moments` or the sliding triples of data.",
                         annotation=ChainViews),
        "k": k_param("Number of hidden states, ``1 <= k <= n_symbols``."),
        "method": Param("{'tpm', 'svtd', 'eca', 'als'}", "Tensor decomposition (:mod:`specinit.engine.decompose`); "
                        "``approach=\"symmetric\"`` only.", "tpm"),
        "approach": COMMON_OPTIONS["approach"].documented(
            "``\"symmetric\"`` whitens the symmetrized second moment (:func:`specinit.engine.views.fit_multiview`) "
            "and raises :class:`specinit.engine.whitening.IndefiniteMomentError` when it is not positive "
            "semi-definite (the data are then not a k-state HMM). ``\"jennrich\"`` (observable operators, "
            "simultaneous diagonalization; Anandkumar, Hsu, Kakade, COLT 2012, Alg. B) needs no PSD moment and warns "
            "(RuntimeWarning) when the "
            "operators are far from simultaneously diagonalizable or a state weight is not positive. ``\"auto\"`` "
            "(default): ``\"symmetric\"``, and on an indefinite moment a RuntimeWarning and ``\"jennrich\"``, "
            "recorded in ``diagnostics[\"fallback\"]`` (None when no fallback was needed). On real sequences the "
            "estimate is a starting point for :func:`refine` (Baum-Welch), not a final fit."),
        "floor": COMMON_OPTIONS["floor"].documented(
            "Every probability is floored at ``floor / d`` (d = row length) and rows renormalized, so estimates are "
            "strictly inside the simplex."),
    }
    advice = "The symbol triples may not follow a k-state HMM: try a smaller k, or approach='jennrich'."

    def target(self, **options: Any) -> int:
        return 1

    def fit_input(self, moments: ChainViews, k: int, **options: Any) -> Moments:
        return moments.views

    def sequences(self, sequences: ArrayLike | Sequence[ArrayLike],
                  n_symbols: int) -> list[np.ndarray] | dask.array.Array:
        """Validated symbol sequences (a Dask 1-D array passes through), checked against ``n_symbols``."""
        if is_dask_array(sequences):
            return sequences
        seqs = as_sequences(sequences, categorical=True)
        check_symbols(seqs, n_symbols)
        return seqs

    def moments(self, sequences: ArrayLike | Sequence[ArrayLike], *, k: int, backend: str | Passes | None,
                n_symbols: int) -> ChainViews:
        # The emission matrix and the projection's temporaries: about four (k, n_symbols) float64 arrays.
        check_allocation(4 * 8 * float(k) * n_symbols, "n_symbols", f"(k, n_symbols) = ({k}, {n_symbols}) emissions")
        chain = triple_views(self.sequences(sequences, n_symbols), n_symbols)
        return ChainViews(ViewMoments(chain.views, backend=backend), chain.first_mean, chain.counts, chain.symbols,
                          chain.n_symbols)

    def population_moments(self, params: Mapping[str, Any], **options: Any) -> ChainViews:
        return chain_population(params["init"], params["transition"], params["emission"])

    def max_components(self, moments: ChainViews) -> tuple[int, str]:
        observed = min(moments.views.dims)
        if moments.symbols is None:
            return observed, f"at most the number of symbols n_symbols = {observed}"
        return observed, f"at most the number of symbols observed ({observed} of n_symbols = {moments.n_symbols})"

    def unwhiten(self, fit: MultiViewFit, moments: ChainViews, k: int, floor: float,
                 **options: Any) -> tuple[dict, dict, dict]:
        emission = fit.means[1]
        # Two estimates of the transition: the regression T O = E[x_{t+1} | h_t], and the observable operator of the
        # lag-one and lag-two pairs (its eigenvalues from second moments only). The one nearer the simplex is kept:
        # on a sticky chain the regression overshoots past the identity (operator_transition).
        regression, _ = solve_rows(emission, fit.means[2])
        operator = operator_transition(moments.views, emission)
        repairs = {"regression": _simplex_repair(regression),
                   "operator": _simplex_repair(operator) if np.all(np.isfinite(operator)) else np.inf}
        chosen = "operator" if repairs["operator"] < repairs["regression"] else "regression"
        transition = operator if chosen == "operator" else regression
        trans_residual = float(np.linalg.norm(transition @ emission - fit.means[2])
                               / max(np.linalg.norm(fit.means[2]), np.finfo(float).tiny))
        init, init_residual = solve_rows(emission, moments.first_mean)
        report = {**moments.counts, "middle_state_weights": fit.weights, "transition_residual": trans_residual,
                  "init_residual": init_residual, "transition_estimator": chosen,
                  "transition_repair_regression": repairs["regression"],
                  "transition_repair_operator": float(repairs["operator"])}
        return {"init": init[0], "transition": transition, "emission": moments.expand(emission)}, report, {}

    # Degenerate estimates --------------------------------------------------------------------------------------
    spectral_advice = ("The data may not support k states: try a smaller k, a larger floor, or refine the estimate "
                       "with restarts (refine(..., restarts=..., seed=...)).")
    refine_advice = ("The data may not support k states: try a smaller k, refine again with more restarts or "
                     "another seed, or start from another spectral estimate (another seed or approach).")

    def scale_floor(self, estimate: SpectralEstimate) -> float | None:
        """The smallest emission scale the spectral estimate allows (None: categorical emissions)."""
        return None

    def checked(self, estimate: SpectralEstimate, floor: float) -> SpectralEstimate:
        """``estimate`` with the :func:`degeneracy` diagnostics of a moment fit, warning when one is set."""
        report = degeneracy(estimate.params, floor=floor, weights=estimate.diagnostics["middle_state_weights"],
                            scale_floor=self.scale_floor(estimate))
        _warn_degenerate(report, estimate.k or len(estimate.params["init"]), self.spectral_advice)
        return replace(estimate, diagnostics={**estimate.diagnostics, **report})

    def spectral_from_moments(self, moments: ChainViews, k: int | Literal["auto"], *, floor: float = 1e-3,
                              **options: Any) -> SpectralEstimate:
        return self.checked(super().spectral_from_moments(moments, k, floor=floor, **options), floor)

    def spectral(self, data: ArrayLike | Sequence[ArrayLike], k: int | Literal["auto"], *, floor: float = 1e-3,
                 **options: Any) -> SpectralEstimate:
        estimate = super().spectral(data, k, floor=floor, **options)
        if isinstance(k, str):  # k="auto": the fit at the chosen k was checked
            return estimate
        return self.checked(estimate, floor)

    def occupancy(self, stats: Any) -> np.ndarray:
        """Expected visits of every state, from :meth:`e_step`'s statistics."""
        return np.asarray(stats[2]).sum(axis=1)

    def refined_scale_floor(self, prepared: Any, options: dict) -> float | None:
        """The smallest emission scale EM allows (None: categorical emissions)."""
        return None

    def refine(self, data: ArrayLike | Sequence[ArrayLike], estimate: SpectralEstimate | Mapping[str, ArrayLike], *,
               method: str | None = None, **options: Any) -> RefineResult:
        from specinit.refine import EM_OPTIONS

        result = super().refine(data, estimate, method=method, **options)
        prepared = self.refine_data(data, result.estimate, **{key: value for key, value in options.items()
                                                              if key not in EM_OPTIONS})  # how to read the data
        stats, _ = self.e_step(result.estimate.params, prepared)
        visits = self.occupancy(stats)
        report = degeneracy(result.estimate.params, floor=options.get("floor", EM_OPTIONS["floor"].default),
                            weights=visits / max(float(visits.sum()), np.finfo(float).tiny),
                            scale_floor=self.refined_scale_floor(prepared, options))
        _warn_degenerate(report, len(result.estimate.params["init"]), self.refine_advice)
        # The refined estimate's own check replaces its start's (the keys describe the values they sit beside).
        result.estimate = replace(result.estimate, diagnostics={**result.estimate.diagnostics, **report})
        return result

    # EM (Baum-Welch) -----------------------------------------------------------------------------------------
    def refine_data(self, sequences: ArrayLike | Sequence[ArrayLike], estimate: SpectralEstimate,
                    n_symbols: int | None = None) -> SequenceBatch:
        V = estimate.params["emission"].shape[1]
        if n_symbols is not None and Interval(int, 1).check("n_symbols", n_symbols) != V:
            raise bad_argument("n_symbols", None, f"the number of emission columns ({V})", n_symbols)
        batch = SequenceBatch(self.sequences(as_sequences(sequences, categorical=True), V))
        batch.one_hot = one_hot(batch.values, V)
        return batch

    def n_observations(self, batch: SequenceBatch) -> int:
        return batch.n_observations

    def e_step(self, params: Mapping[str, np.ndarray],
               batch: SequenceBatch) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], float]:
        init_counts, trans_counts, gamma, ll = forward_backward(batch, params["init"], params["transition"],
                                                                params["emission"].T[batch.values])
        return (init_counts, trans_counts, np.asarray(batch.one_hot.T @ gamma).T), ll

    def m_step(self, batch: SequenceBatch, stats: tuple[np.ndarray, np.ndarray, np.ndarray], params: Mapping[str, Any],
               **options: Any) -> dict:
        init, transition, emission = stats
        return {"init": init, "transition": transition, "emission": emission}

    def split_merge(self, params: Mapping[str, np.ndarray], batch: SequenceBatch,
                    stats: tuple[np.ndarray, np.ndarray, np.ndarray], rng: np.random.Generator,
                    attempt: int = 0) -> dict | None:
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

    def log_likelihood(self, sequences: ArrayLike | Sequence[ArrayLike],
                       estimate: SpectralEstimate | Mapping[str, Any]) -> np.ndarray:
        from specinit.refine import check_estimate, in_float64

        estimate = check_estimate(self, estimate)

        def per_sequence():
            hmm, padded, _, _ = sequence_distribution(sequences, estimate.params)
            return hmm.log_prob(jnp.asarray(padded))

        return in_float64(per_sequence)

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralHMM`."""
        return chain_face(
            "SpectralHMM", self.name, refine,
            """A categorical hidden Markov model by the method of moments, then Baum-Welch (:mod:`specinit.models.hmm`).

            The question of hmmlearn's ``CategoricalHMM``, started where Baum-Welch
            has no local optimum to fear: the sliding triples of the sequences give
            the chain's parameters in one pass. ``X`` is what
            :func:`specinit.models.hmm.spectral` takes -- one 1-D array of symbols,
            equal-length rows, or a list of 1-D arrays -- not hmmlearn's
            concatenated column with ``lengths``. ``predict`` gives every sequence's
            most probable state path (Viterbi), ``predict_proba`` the posterior
            state marginals, ``score`` the total log-likelihood.""",
            {"n_symbols": Param("int, optional", "V, the number of distinct symbols; None: one more than the "
                                "largest symbol of the training sequences.", None)},
            {},
            {"emissionprob_": ("ndarray, shape (n_components, n_symbols)\n    Emission probabilities (rows sum to "
                               "one).", lambda estimator, estimate, X: estimate.params["emission"])},
            from_data=_symbols_seen, answers=frozenset({"partial_fit"}),
            constraints={"n_symbols": [Interval(int, 1), None]},
        )


FAMILY = HMM()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


#: The arguments of :func:`model`.
MODEL_ARGUMENTS = {
    "sequences": Param("int array, shape (N, T) or (T,), optional", "Observed symbols in ``0..n_symbols-1``, "
                       "zero-padded past each sequence's length (:func:`pad_sequences`). ``None`` generates sequences "
                       "of lengths ``lengths`` (``numpyro.infer.Predictive``).", None, annotation=ArrayLike | None),
    "k": Param("int", "Number of hidden states."),
    "n_symbols": Param("int, optional", "V; needed only when ``sequences`` is None (otherwise ``max(sequences) + 1`` "
                       "would be a guess, so it is still preferred).", None),
    "lengths": Param("int array, shape (N,), optional", "True lengths; default: every row is full length.", None,
                     annotation=ArrayLike | None),
    "concentration": Param("float", "Symmetric Dirichlet concentration of ``init`` and of every row of "
                           "``transition`` and ``emission``.", 1.0),
}


@face(MODEL_ARGUMENTS)
def model(sequences, *, k, n_symbols, lengths, concentration) -> None:
    """NumPyro HMM with categorical emissions, hidden states summed out.

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
        which estimate of the transition was kept (``transition_estimator``:
        ``"regression"`` or ``"operator"``, the one nearer the simplex, with
        ``transition_repair_<estimator>`` their distances to it; see
        :func:`operator_transition`), negative mass clipped per row
        (``negative_mass_<site>``), the multi-view diagnostics, and the
        checks of :func:`degeneracy` (``degenerate/...``).

    Raises
    ------
    TypeError
        ``sequences`` not an array or list/tuple of 1-D numeric arrays.
    ValueError
        Empty input, negative, non-integer or out-of-range symbols, no
        sequence of length >= 3, or ``k`` outside ``1..n_symbols``.

    Warns
    -----
    RuntimeWarning
        The estimate is degenerate (:func:`degeneracy`: emission rows mostly
        at the floor, a transition matrix that is the identity or has rows
        that are point masses, a state of (nearly) zero weight): one warning
        naming the states and what to try (a smaller k, a larger ``floor``,
        :func:`refine` with restarts).

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
    sequences=HMM.arguments["sequences"].documented("As for :func:`spectral` (every sequence of length >= 1 is "
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
           seed, accelerate) -> RefineResult:
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
        EM did not converge in ``max_iter`` iterations; the refined estimate
        is degenerate (:func:`degeneracy`, with the shares of the expected
        visits as the states' weights; its ``degenerate/...`` diagnostics
        replace the start's), naming the states and what to try.

    References
    ----------
    Rabiner (1989), [2]_ eqs. 40a-c (re-estimation) and 91-93 (scaling).
    """
    return FAMILY.refine(sequences, estimate, method=method, max_iter=max_iter, tol=tol, rtol=rtol, floor=floor,
                         restarts=restarts, split_merge=split_merge, restart_iter=restart_iter, seed=seed,
                         n_symbols=n_symbols, accelerate=accelerate)


@FAMILY.face(
    sequences=HMM.arguments["sequences"].documented("The new sequences (whole sequences: a sequence is not "
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
    stored, k, n_batches = FAMILY.stream(estimate, k, FAMILY.summary, "hmm.update")
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


log_likelihood = FAMILY.log_likelihood_face("sequences", """
    Log-likelihood of every sequence under ``estimate`` (forward algorithm, float64).

    Returns
    -------
    ndarray, shape (n_sequences,)
        ``log p(x_{1:T})`` of each sequence, hidden states summed out (the
        log-density of the NumPyro program's ``observations`` site).
    """)


def _symbols_seen(estimator, X) -> dict:
    """:class:`~specinit.estimators.SpectralHMM`'s ``n_symbols``: its parameter, else read off the training
    sequences."""
    if estimator.n_symbols is not None:
        return {"n_symbols": estimator.n_symbols}
    return {"n_symbols": 1 + max(int(sequence.max()) for sequence in as_sequences(X, categorical=True))}
