"""HMM moments: all sliding triples of symbols as a three-view model around the middle state.

Shared by :mod:`specinit.models.hmm` and :mod:`specinit.models.gaussian_hmm`
(which discretizes its observations into quantile bins first).

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 15 (2014), Prop. 3.4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_choice, warn
from specinit.engine.support import project_to_simplex
from specinit.engine.views import ViewMoments, fit_multiview, multiview_population
from specinit.engine.whitening import IndefiniteMomentError

__all__ = ["HMMMoments", "chain_population", "fit_chain", "stationary", "triple_moments"]


@dataclass(frozen=True)
class HMMMoments:
    """What :func:`spectral_from_moments` needs: the three-view moments and the law of ``x_1``.

    Attributes
    ----------
    views : ViewMoments or MultiViewPopulation
        Cross moments of ``(x_{t-1}, x_t, x_{t+1})`` (empirical: all sliding
        triples; population: a stationary chain).
    first_mean : ndarray, shape (d,)
        ``E[x_1]`` (empirical: over the first observation of every sequence).
    counts : dict
        ``n_sequences``, ``n_triples``, ``n_short_sequences`` (length < 3, used
        for ``first_mean`` only); zeros for population moments.
    """

    views: object
    first_mean: np.ndarray
    counts: dict


def stationary(transition: np.ndarray) -> np.ndarray:
    """Left eigenvector of a row-stochastic matrix for eigenvalue 1, normalized to sum one."""
    values, vectors = np.linalg.eig(transition.T)
    w = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return w / w.sum()



def chain_population(init, transition, emission) -> HMMMoments:
    """Exact moments of an HMM whose middle state ``h_2`` is stationary ([1]_ Prop. 3.4).

    The sliding triples of long sequences see a middle state distributed as
    the stationary law ``w`` of ``transition``; with it the view means are
    ``E[x_1 | h=j] = sum_i w_i T_ij / w_j O_i``, ``E[x_2 | h=j] = O_j`` and
    ``E[x_3 | h=j] = sum_l T_jl O_l`` (row-stochastic ``T``); ``E[x_1]`` of a
    sequence start is ``init @ emission``.

    Parameters
    ----------
    init : array, shape (k,)
    transition : array, shape (k, k), row-stochastic
    emission : array, shape (k, V)

    Returns
    -------
    HMMMoments
        For :func:`spectral_from_moments` (exact recovery checks) and for
        :func:`specinit.engine.views.fit_multiview` (``.views``).
    """
    init, T, O = (np.asarray(a, dtype=np.float64) for a in (init, transition, emission))
    w = stationary(T)
    previous = (T.T * w[None, :]) / w[:, None]  # row j: P(h_1 = . | h_2 = j)
    views = multiview_population([previous @ O, O, T @ O], w)
    return HMMMoments(views, init @ O, {"n_sequences": 0, "n_triples": 0, "n_short_sequences": 0})


def _one_hot(symbols: np.ndarray, n_symbols: int) -> sp.csr_matrix:
    n = symbols.size
    return sp.csr_matrix((np.ones(n), symbols, np.arange(n + 1)), shape=(n, n_symbols))


def triple_moments(seqs: list[np.ndarray], n_symbols: int, func: str) -> HMMMoments:
    """One-hot views of all sliding triples, and the mean one-hot first symbol."""
    long = [s for s in seqs if s.size >= 3]
    if not long:
        raise bad_argument("sequences", func, "at least one sequence of length >= 3 (for the triples)",
                           f"lengths {sorted({s.size for s in seqs})}", describe=False)
    views = ViewMoments([_one_hot(np.concatenate([s[i: s.size - 2 + i] for s in long]), n_symbols) for i in range(3)])
    first = np.bincount([s[0] for s in seqs], minlength=n_symbols) / len(seqs)
    counts = {"n_sequences": len(seqs), "n_triples": views.n_observations, "n_short_sequences": len(seqs) - len(long)}
    return HMMMoments(views, first, counts)


def _solve_rows(emission: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares ``X`` with ``X @ emission ~= targets`` (k-dimensional unknowns per row), and the relative residual."""
    solution = np.linalg.lstsq(emission.T, np.atleast_2d(targets).T, rcond=None)[0].T
    residual = np.linalg.norm(solution @ emission - targets) / max(np.linalg.norm(targets), np.finfo(float).tiny)
    return solution, float(residual)


def fit_chain(moments: HMMMoments, k: int, func: str, method: str, seed, floor: float, decompose_options,
              approach: str = "symmetric"):
    """Multi-view fit around the middle state, then (init, transition, raw emission) and diagnostics."""
    approach = check_choice(approach, "approach", func, ("auto", "symmetric", "jennrich"))
    fallback = None
    try:
        fit = fit_multiview(moments.views, k, target=1, method=method,
                            approach="symmetric" if approach == "auto" else approach, seed=seed,
                            decompose_options=decompose_options)
    except IndefiniteMomentError as exc:
        if approach != "auto":
            raise exc.advise(func, "The symbol triples may not follow a k-state HMM: try a smaller k, or "
                                   "approach='jennrich'.") from None
        # Real sequences are rarely an exact k-state HMM: the symmetrized moment can be indefinite. The
        # observable-operator (Jennrich) path takes no square root and still gives a starting point.
        fallback = f"jennrich (symmetrized second moment indefinite: {str(exc).split(' Likely')[0]})"
        warn(f"{func}: the symmetrized second moment of the symbol triples is indefinite for k = {k} (the data "
             "are not exactly a k-state HMM); fell back to approach='jennrich' (see diagnostics['fallback']). "
             "Refine the estimate (hmm.refine) or try a smaller k.")
        fit = fit_multiview(moments.views, k, target=1, approach="jennrich", seed=seed)
    raw_emission = fit.means[1]
    transition, trans_residual = _solve_rows(raw_emission, fit.means[2])
    init, init_residual = _solve_rows(raw_emission, moments.first_mean)
    transition, trans_report = project_to_simplex(transition, floor)
    init, init_report = project_to_simplex(init, floor)
    diagnostics = {
        **moments.counts,
        "middle_state_weights": fit.weights,
        "transition_residual": trans_residual,
        "init_residual": init_residual,
        "transition_negative_mass": trans_report["negative_mass"],
        "init_negative_mass": float(init_report["negative_mass"][0]),
        **fit.diagnostics,
        "fallback": fallback,
    }
    return init[0], transition, raw_emission, fit, diagnostics
