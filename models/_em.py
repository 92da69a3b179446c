"""Expectation-maximization shared by the mixture and HMM models (NumPy, float64, log space).

One loop (:func:`em_loop`) drives every model's refinement: an E-step that
returns the expected sufficient statistics and the log-likelihood of the
current parameters, an M-step that maps statistics to parameters. The
log-likelihood never decreases under exact EM ([1]_ Thm 1); a decrease larger
than round-off is counted in the result's diagnostics rather than hidden.

Also here: diagonal-Gaussian log densities for all components at once,
log-sum-exp responsibilities, and the scaled forward-backward recursion of
a categorical HMM over many ragged sequences at once ([2]_ eqs. 92-93).

References
----------
.. [1] Dempster, Laird, Rubin, "Maximum likelihood from incomplete data via
   the EM algorithm", JRSS B 39 (1977), Thm 1.
.. [2] Rabiner, "A tutorial on hidden Markov models and selected applications
   in speech recognition", Proc. IEEE 77 (1989), eqs. 19-27 (forward-backward),
   40a-c (re-estimation), 91-93 (scaling).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from specinit._validation import check_int, check_positive, warn
from specinit.estimate import SpectralEstimate

__all__ = ["RefineResult", "em_loop", "gaussian_log_density", "responsibilities", "hmm_forward_backward", "SequenceBatch"]

_TINY = np.finfo(np.float64).tiny


@dataclass
class RefineResult:
    """Output of a model's ``refine``: the refined estimate and the EM trace.

    Attributes
    ----------
    estimate : SpectralEstimate
        Refined parameters keyed by the model's site names (strictly inside
        their supports), so ``estimate.init_strategy()`` and
        ``estimate.init_params(...)`` warm-start NumPyro as before;
        ``estimate.diagnostics`` keeps the spectral diagnostics under
        ``"spectral"`` and adds ``"refine"``.
    log_likelihood : ndarray, shape (n_iter + 1,)
        Total log-likelihood of the data at the start and after every M-step.
    n_iter : int
        Number of M-steps taken.
    converged : bool
        Whether the mean per-observation gain fell below ``tol``.
    method : str
        ``"em"``.
    diagnostics : dict
        ``n_observations``, ``decreases`` (M-steps that lowered the
        log-likelihood by more than round-off; zero for exact EM).
    """

    estimate: SpectralEstimate
    log_likelihood: np.ndarray
    n_iter: int
    converged: bool
    method: str = "em"
    diagnostics: dict = field(default_factory=dict)

    @property
    def params(self) -> dict:
        """The refined parameters by site name (``estimate.params``)."""
        return self.estimate.params

    @property
    def mean_log_likelihood(self) -> float:
        """Final log-likelihood per observation (comparable to scikit-learn's ``score``)."""
        return float(self.log_likelihood[-1] / self.diagnostics["n_observations"])


def check_em_options(max_iter, tol, func: str) -> tuple[int, float]:
    """Validated ``(max_iter, tol)`` of a refine call."""
    return check_int(max_iter, "max_iter", func, minimum=0), check_positive(tol, "tol", func)


def em_loop(estep, mstep, params, *, max_iter: int, tol: float, n_observations: int, func: str):
    """Iterate ``params <- mstep(estep(params))`` until the mean gain is below ``tol``.

    Parameters
    ----------
    estep : callable
        ``params -> (statistics, total log-likelihood of params)``.
    mstep : callable
        ``statistics -> params``.
    params : object
        Starting parameters (any object ``estep`` accepts).
    max_iter : int
        Largest number of M-steps.
    tol : float
        Stop when the log-likelihood gain per observation is below ``tol``
        (scikit-learn's convention for ``GaussianMixture``).
    n_observations : int
        Divides the gain (observations, or symbols for an HMM).
    func : str
        Public entry, for the warning.

    Returns
    -------
    params, trace (ndarray), n_iter (int), converged (bool), decreases (int)

    Warns
    -----
    RuntimeWarning
        If ``max_iter`` M-steps did not reach ``tol``.
    """
    stats, ll = estep(params)
    trace = [float(ll)]
    converged, decreases, n_iter = False, 0, 0
    for n_iter in range(1, max_iter + 1):
        params = mstep(stats)
        stats, ll = estep(params)
        trace.append(float(ll))
        gain = (trace[-1] - trace[-2]) / n_observations
        if gain < -1e-9 * max(1.0, abs(trace[-2]) / n_observations):
            decreases += 1
        if abs(gain) < tol:
            converged = True
            break
    if not converged and max_iter > 0:
        warn(f"{func}: EM did not converge in max_iter={max_iter} iterations (last gain per observation "
             f"{(trace[-1] - trace[-2]) / n_observations:.3g} > tol={tol:g}); raise max_iter or tol.")
    return params, np.asarray(trace), (n_iter if max_iter > 0 else 0), converged, decreases


def gaussian_log_density(x: np.ndarray, loc: np.ndarray, var: np.ndarray) -> np.ndarray:
    """``log N(x_n | loc_i, diag(var_i))`` for every row and component, shape (N, k).

    Parameters
    ----------
    x : ndarray, shape (N, d)
    loc : ndarray, shape (k, d)
    var : ndarray, shape (k, d)
        Positive variances.

    Returns
    -------
    ndarray, shape (N, k)
    """
    precision = 1.0 / var
    quad = (x * x) @ precision.T - 2.0 * x @ (loc * precision).T + np.sum(loc * loc * precision, axis=1)
    return -0.5 * (quad + np.sum(np.log(2.0 * np.pi * var), axis=1))


def responsibilities(log_joint: np.ndarray) -> tuple[np.ndarray, float]:
    """Posterior class probabilities from ``log p(x_n, h = i)`` (log-sum-exp), and the total log-likelihood.

    Parameters
    ----------
    log_joint : ndarray, shape (N, k)

    Returns
    -------
    resp : ndarray, shape (N, k)
        Rows sum to one.
    log_likelihood : float
        ``sum_n log sum_i exp(log_joint[n, i])``.
    """
    row = logsumexp(log_joint, axis=1)
    return np.exp(log_joint - row[:, None]), float(row.sum())


class SequenceBatch:
    """Ragged symbol sequences in time-major order, for :func:`hmm_forward_backward`.

    Sorted by decreasing length, the sequences still running at step ``t``
    are a prefix of the batch; their symbols at ``t`` are stored contiguously
    (``symbols[offsets[t]: offsets[t] + active[t]]``), so every time step is
    one NumPy operation on all running sequences and nothing is padded.

    Parameters
    ----------
    sequences : list of 1-D int arrays
        Validated symbols (length >= 1 each).
    n_symbols : int
        V.
    """

    def __init__(self, sequences, n_symbols: int):
        lengths = np.array([s.size for s in sequences], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[order]
        T = int(self.lengths[0])
        self.active = np.searchsorted(-self.lengths, -np.arange(1, T + 1), side="right")
        self.offsets = np.concatenate([[0], np.cumsum(self.active)])
        self.symbols = np.empty(int(self.offsets[-1]), dtype=np.int64)
        sorted_seqs = [sequences[i] for i in order]
        for t in range(T):
            m = self.active[t]
            self.symbols[self.offsets[t]: self.offsets[t] + m] = [s[t] for s in sorted_seqs[:m]]
        n = self.symbols.size
        self.one_hot = sp.csr_matrix((np.ones(n), self.symbols, np.arange(n + 1)), shape=(n, n_symbols))
        self.n_symbols = int(n_symbols)

    @property
    def n_observations(self) -> int:
        """Total number of symbols."""
        return int(self.symbols.size)


def hmm_forward_backward(batch: SequenceBatch, init, transition, emission):
    """Expected counts of a categorical HMM over ragged sequences (scaled forward-backward, [2]_ eqs. 91-93).

    Parameters
    ----------
    batch : SequenceBatch
        The sequences, time-major.
    init, transition, emission : ndarray
        ``(k,)``, ``(k, k)`` row-stochastic, ``(k, V)``, strictly positive.

    Returns
    -------
    init_counts (k,), transition_counts (k, k), emission_counts (k, V), log_likelihood (float)
    """
    active, off, sym = batch.active, batch.offsets, batch.symbols
    T = active.size
    k = init.size
    emit_t = emission.T  # (V, k)
    alpha = np.empty((sym.size, k))
    scale = np.empty(sym.size)
    a = init * emit_t[sym[: active[0]]]
    for t in range(T):
        m, o = active[t], off[t]
        if t:
            a = (alpha[off[t - 1]: off[t - 1] + m] @ transition) * emit_t[sym[o: o + m]]
        c = a.sum(axis=1)
        scale[o: o + m] = c
        alpha[o: o + m] = a / np.maximum(c, _TINY)[:, None]
    log_likelihood = float(np.sum(np.log(np.maximum(scale, _TINY))))
    trans_counts = np.zeros((k, k))
    beta = np.ones((active[0], k))
    for t in range(T - 1, -1, -1):
        m, o = active[t], off[t]
        beta[(active[t + 1] if t + 1 < T else 0): m] = 1.0  # sequences whose last step is t
        if t:
            eb = emit_t[sym[o: o + m]] * beta[:m] / scale[o: o + m, None]
            previous = alpha[off[t - 1]: off[t - 1] + m]
            trans_counts += transition * (previous.T @ eb)
        alpha[o: o + m] *= beta[:m]  # alpha is now gamma at step t
        if t:
            beta[:m] = eb @ transition.T
    gamma = alpha
    init_counts = gamma[: active[0]].sum(axis=0)
    emit_counts = np.asarray(batch.one_hot.T @ gamma).T
    return init_counts, trans_counts, emit_counts, log_likelihood
