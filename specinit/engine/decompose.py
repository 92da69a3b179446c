"""Decompositions of symmetric, orthogonally decomposable k x k x k tensors.

Every method returns ``T ~= sum_i lambda_i v_i (x) v_i (x) v_i`` with
orthonormal ``v_i`` (the columns of ``vectors``) and ``lambda_i > 0``
(the sign of an odd-order component is absorbed into ``v_i``).

* :func:`tensor_power_method` -- the robust tensor power method with
  vectorized random restarts, a convergence tolerance, polishing of the best
  restart and deflation [1]_ (Alg. 1), [2]_ (Alg. 2).
* :func:`svtd` -- simultaneous diagonalization through the slice with the
  largest eigenvalue separation (SVTD, [3]_ Alg. 1 and Remark 7).
* :func:`eca` -- Excess Correlation Analysis / Jennrich: eigenvectors of one
  random slice ``T(I, I, theta)`` ([2]_ Alg. 1, [4]_). Fast, less robust.
* :func:`cp_als` -- CP alternating least squares; a baseline.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 2014, Alg. 1 and Thm 5.1.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for latent
   Dirichlet allocation", Alg. 1 and Alg. 2.
.. [3] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Alg. 1, Remark 7.
.. [4] Anandkumar et al. "Two SVDs suffice", Alg. 1 (ECA).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping

import numpy as np

from specinit._validation import (
    as_generator,
    bad_argument,
    check_choice,
    check_int,
    check_positive,
    checked_by_caller,
    public,
    warn,
)
from specinit.engine.backends import Passes, numba_kernel, one_blas_thread

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["Decomposition", "METHODS", "check_options", "cp_als", "decompose", "eca", "svtd", "tensor_power_method"]

METHODS = ("tpm", "svtd", "eca", "als")


@dataclass(frozen=True)
class Decomposition:
    """A symmetric CP decomposition ``T ~= sum_i weights[i] vectors[:, i]^(x)3``.

    Attributes
    ----------
    weights : ndarray, shape (k,)
        The tensor eigenvalues :math:`\\lambda_i`.
    vectors : ndarray, shape (n, k)
        Unit-norm components as columns.
    diagnostics : dict
        ``method``; ``residual`` (``||T - sum||_F / ||T||_F``); ``eigengaps``
        (per component, the smallest separation of its defining eigenvalue
        from the others, relative to the largest); ``orthogonality``
        (``max |V^T V - I|``); ``converged`` and ``n_iter`` where the method
        iterates.
    """

    weights: np.ndarray
    vectors: np.ndarray
    diagnostics: dict

    def report(self) -> dict[str, Any]:
        """The diagnostics as an estimate carries them: every key under ``decomposition/`` (as ``refine/``)."""
        return {f"decomposition/{key}": value for key, value in self.diagnostics.items()}


def _check_tensor(T, k, func, order: int = 3) -> tuple[np.ndarray, int]:
    """``T`` as a float64 array of shape (n,) * order, and ``k`` (default n) checked against n."""
    T = np.asarray(T, dtype=np.float64)
    if T.ndim != order or len(set(T.shape)) != 1:
        shape = "a cubic (n, n, n) array" if order == 3 else f"a ({', '.join(['n'] * order)}) array"
        raise bad_argument("T", func, shape, T)
    if not np.all(np.isfinite(T)):
        raise bad_argument("T", func, "finite", "an array with NaN or infinite entries", describe=False)
    n = T.shape[0]
    if k is None:
        return T, n
    if not checked_by_caller():
        k = check_int(k, "k", func, minimum=1)
        if k > n:
            raise bad_argument("k", func, f"at most the tensor size {n}", k)
    return T, k


def contract(T: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``T(I, u, u)`` for every column ``u`` of ``U`` (n, m) -> (n, m): one (n, n^2) x (n^2, m) GEMM."""
    n, m = U.shape
    return T.reshape(n, n * n) @ (U[:, None, :] * U[None, :, :]).reshape(n * n, m)


def reconstruct(weights: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``sum_i weights[i] v_i^(x)3`` as a dense (n, n, n) array."""
    return np.einsum("i,ai,bi,ci->abc", weights, vectors, vectors, vectors)


def _relative_gaps(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return np.full(values.shape, np.inf)
    diff = np.abs(values[:, None] - values[None, :])
    np.fill_diagonal(diff, np.inf)
    return diff.min(axis=1) / max(np.max(np.abs(values)), np.finfo(float).tiny)


def _finish(T, weights, vectors, method, extra) -> Decomposition:
    sign = np.where(weights < 0, -1.0, 1.0)
    weights, vectors = weights * sign, vectors * sign
    order = np.argsort(-weights)
    weights, vectors = weights[order], vectors[:, order]
    norm = np.linalg.norm(T)
    resid = np.linalg.norm(T - reconstruct(weights, vectors)) / (norm if norm > 0 else 1.0)
    gram = vectors.T @ vectors
    diagnostics = {
        "method": method,
        "residual": float(resid),
        "orthogonality": float(np.max(np.abs(gram - np.eye(gram.shape[0])))),
        **extra,
    }
    diagnostics.setdefault("eigengaps", _relative_gaps(weights))
    return Decomposition(weights=weights, vectors=vectors, diagnostics=diagnostics)


#: Iterations over which a power iterate's rate of convergence is measured before it may be given up.
STALL_WINDOW = 20

#: The chosen restart of each component is polished to this fraction of the tolerance.
POLISH = 1e-3


#: Third-order tensors of at most this size iterate in the compiled loop of the Numba backend (when installed):
#: below it the NumPy loop's per-iteration array calls cost more than its matrix product saves (ten restarts on a
#: noisy 10 x 10 x 10 tensor: 0.05 ms compiled against 0.34 ms; at 24 x 24 x 24, 0.70 against 0.38).
COMPILED_POWER_MAX = 16


def _power_iterate(T, U, n_iter, tol, contract_fn=None):
    """Run ``u <- T(I, u, ..., u)/||.||`` on every column until it moves less than ``tol`` (up to sign).

    ``contract_fn(T, U)`` is the contraction of the tensor's order
    (:func:`contract` for order 3). The move is measured up to sign, since a
    negative eigenvalue of an even-order tensor flips the iterate each step
    (for order 3 with positive eigenvalues the iterate never flips).

    Each column stops on its own: when it has converged, or when it is
    hopeless -- after at least ``max(STALL_WINDOW, n_iter // 10)``
    iterations, its move has not shrunk over the last ``STALL_WINDOW``
    iterations, or shrinks at a linear rate that would not reach ``tol``
    within ``n_iter`` iterations. Only the running columns are contracted.
    Third-order tensors of at most :data:`COMPILED_POWER_MAX` a side run in
    the compiled loop of the Numba backend when it is installed
    (:func:`specinit.engine.backends.numba.power_iterate`: the same rule).

    Returns
    -------
    U : ndarray
        The last iterates.
    iterations : ndarray of int
        Iterations run per column.
    converged, stalled : ndarray of bool
        Per column: moved less than ``tol``; given up as hopeless.
    """
    contract_fn = contract if contract_fn is None else contract_fn
    patience = max(STALL_WINDOW, n_iter // 10)
    if contract_fn is contract and T.shape[0] <= COMPILED_POWER_MAX:
        compiled = numba_kernel("power_iterate")
        if compiled is not None:
            return compiled(T, U, n_iter, tol, patience, STALL_WINDOW)
    U = np.array(U, dtype=np.float64)
    m = U.shape[1]
    iterations = np.zeros(m, dtype=int)
    converged, stalled = np.zeros(m, dtype=bool), np.zeros(m, dtype=bool)
    # The running columns are kept together (``current``, their indices ``running`` and their moves
    # ``moves[:, j]``) and compacted only when some stop: each step is a few small array operations.
    running, current = np.arange(m), U.copy()
    moves = np.empty((n_iter + 1, m))
    moves[0] = np.inf  # no move before the first iteration: no evidence of a stall until STALL_WINDOW moves are seen
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for it in range(1, n_iter + 1):
            V = contract_fn(T, current)
            norms = np.sqrt(np.einsum("ij,ij->j", V, V))
            V /= np.where(norms > 0, norms, 1.0)
            # The move up to sign: against the nearer of current and -current.
            V_minus = V - np.copysign(1.0, np.einsum("ij,ij->j", V, current)) * current
            step = np.sqrt(np.einsum("ij,ij->j", V_minus, V_minus))
            current = V
            moves[it] = step
            stop = done = step < tol
            if it >= patience:
                rate = (step / moves[it - STALL_WINDOW]) ** (1.0 / STALL_WINDOW)
                hopeless = ~done & ((rate >= 1.0) | (it + np.log(tol / step) / np.log(rate) > n_iter))
                stop = done | hopeless
                stalled[running[hopeless]] = True
            if stop.any() or it == n_iter:
                U[:, running] = current
                iterations[running] = it
                converged[running[done]] = True
                keep = ~stop
                running, current, moves = running[keep], current[:, keep], moves[:, keep]
                if running.size == 0:
                    break
    return U, iterations, converged, stalled


def deflated_power_method(T, starts, n_iter, tol, contract_fn, outer_fn, select=np.argmax):
    """Robust tensor power method with restarts and deflation, for a tensor of any order, on the host.

    For each component ``c``: the restarts ``starts[c]`` (normalized) are
    iterated together, each until it converges or is hopeless
    (:func:`_power_iterate`); the restart chosen by ``select`` on the values
    ``T(u, ..., u)`` is polished (to ``POLISH * tol``, or until it is
    hopeless), its eigenvalue recorded and ``lambda u^(x)order``
    (``outer_fn(u)``) deflated. The dense algebra runs
    on one BLAS thread (its products are small).

    Parameters
    ----------
    T : ndarray
        Symmetric tensor (validated by the caller).
    starts : ndarray, shape (k, n, n_restarts)
        The random starts of each of the ``k`` components.
    n_iter : int
        Iterations per phase.
    tol : float
        Convergence tolerance on the move of the iterates.
    contract_fn : callable
        ``contract_fn(T, U)``: ``T(I, u, ..., u)`` for every column of ``U``.
    outer_fn : callable
        ``outer_fn(u)``: the rank-one tensor ``u^(x)order``.
    select : callable
        Picks the restart from the values (``np.argmax``; the largest
        magnitude for even orders).

    Returns
    -------
    weights : ndarray, shape (k,)
    vectors : ndarray, shape (n, k)
    converged : ndarray of bool, shape (k,)
        One more step moves the polished iterate less than ``tol``.
    stalled : ndarray of bool, shape (k,)
        Not converged, and given up as hopeless before ``n_iter``
        iterations (not converging fast enough).
    n_iter : ndarray of int, shape (k,)
        Iterations used per component (the longest restart plus the polishing).

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, "Tensor decompositions for
       learning latent variable models", JMLR 2014, Alg. 1.
    """
    residual = T.copy()
    weights, vectors, converged, stalled, iters = [], [], [], [], []
    with one_blas_thread():
        for start in starts:
            U = start / np.linalg.norm(start, axis=0)
            U, it1, _, _ = _power_iterate(residual, U, n_iter, tol, contract_fn)
            values = np.einsum("im,im->m", U, contract_fn(residual, U))
            # The chosen iterate is polished well below tol (to POLISH * tol, or until it stops converging), so
            # that sums differing by round-off, which may stop a step apart, still give the same component.
            u, it2, _, gave_up = _power_iterate(residual, U[:, [int(select(values))]], n_iter, POLISH * tol,
                                                contract_fn)
            ok = _power_iterate(residual, u, 1, tol, contract_fn)[2]
            u = u[:, 0]
            lam = float(u @ contract_fn(residual, u[:, None])[:, 0])
            residual = residual - lam * outer_fn(u)
            weights.append(lam)
            vectors.append(u)
            converged.append(ok[0])
            stalled.append(gave_up[0] and not ok[0])
            iters.append(it1.max() + it2[0])
    return np.array(weights), np.stack(vectors, axis=1), np.array(converged), np.array(stalled), np.array(iters)


def cube(u: np.ndarray) -> np.ndarray:
    """The rank-one tensor ``u (x) u (x) u``."""
    return np.einsum("a,b,c->abc", u, u, u)


def tensor_power_method(T: np.ndarray, k: int | None = None, *, n_restarts: int = 10, n_iter: int = 100,
                        tol: float = 1e-10, seed: int | np.random.Generator = 0,
                        passes: Passes | None = None) -> Decomposition:
    """Robust tensor power method with restarts and deflation.

    For each of ``k`` components: ``n_restarts`` random unit vectors are
    iterated together (``u <- T(I, u, u) / ||T(I, u, u)||``), each until it
    moves less than ``tol``, ``n_iter`` steps, or is given up as hopeless
    (after ``max(20, n_iter // 10)`` steps, a move that does not shrink, or
    shrinks too slowly to reach ``tol`` within ``n_iter``); the restart with the
    largest ``T(u, u, u)`` is polished by up to ``n_iter`` more steps, its
    eigenvalue ``lambda = T(u, u, u)`` recorded, and ``lambda u^(x)3``
    deflated from ``T``.

    Parameters
    ----------
    T : ndarray, shape (n, n, n)
        Symmetric tensor (e.g. a whitened third moment).
    k : int, optional
        Number of components (default ``n``).
    n_restarts : int
        Random restarts per component (``L`` in [1]_ Alg. 1).
    n_iter : int
        Maximum power iterations per phase (``N`` in [1]_).
    tol : float
        Convergence tolerance on the change of the unit iterate.
    seed : int or numpy.random.Generator
        Randomness of the starts (drawn on the host, component by component).
    passes : specinit.engine.backends.Passes, optional
        The backend of the moments the tensor came from: where it has a
        :attr:`~specinit.engine.backends.Passes.power_method`, that runs the
        iterations where its passes run (JAX: one compiled program on the
        device). Default, and for the other backends: the host.

    Returns
    -------
    Decomposition
        ``diagnostics["converged"]``, ``stalled`` (given up as hopeless)
        and ``n_iter`` per component; ``eigengaps`` are the relative separations of each eigenvalue from
        the nearest other one (deflation order is fragile when they are
        tiny).

    Warns
    -----
    RuntimeWarning
        If a component did not converge within ``n_iter`` iterations.

    References
    ----------
    .. [1] Anandkumar et al., JMLR 2014, Alg. 1.
    """
    func = "tensor_power_method"
    T, k = _check_tensor(T, k, func)
    n_restarts = check_int(n_restarts, "n_restarts", func, minimum=1)
    n_iter = check_int(n_iter, "n_iter", func, minimum=1)
    tol = check_positive(tol, "tol", func)
    starts = as_generator(seed, func).standard_normal((k, T.shape[0], n_restarts))
    if passes is None or passes.power_method is None:
        found = deflated_power_method(T, starts, n_iter, tol, contract, cube)
    else:
        found = passes.power_method(T, starts, n_iter, tol)
    weights, vectors, converged, stalled, iters = found
    if not converged.all():
        warn(
            f"tensor_power_method: {k - converged.sum()} of {k} components did not converge in "
            f"n_iter={n_iter} iterations ({stalled.sum()} given up early: their iterates were not converging "
            "fast enough); increase n_iter or n_restarts, or try method='svtd'.")
    return _finish(T, weights, vectors, "tpm", {"converged": converged, "stalled": stalled, "n_iter": iters})


def _slice_decomposition(T, theta, k, method, extra):
    H = np.einsum("ijl,l->ij", T, theta)
    values, O = np.linalg.eigh(0.5 * (H + H.T))
    order = np.argsort(-np.abs(values))[:k]
    values, O = values[order], O[:, order]
    weights = np.einsum("im,im->m", O, contract(T, O))
    gaps = _relative_gaps(values)
    dec = _finish(T, weights, O, method, {"slice_eigenvalues": values, **extra})
    diagnostics = dict(dec.diagnostics, eigengaps=np.sort(gaps)[::-1][: dec.weights.size])
    if np.min(gaps) < 1e-6:
        warn(
            f"{method}: the chosen slice has nearly repeated eigenvalues (relative gap "
            f"{np.min(gaps):.1e}); components may be mixed. Try method='tpm'.")
    return Decomposition(dec.weights, dec.vectors, diagnostics)


def svtd(T: np.ndarray, k: int | None = None, *, directions: np.ndarray | None = None, n_random: int = 0,
         seed: int | np.random.Generator = 0) -> Decomposition:
    """Simultaneous diagonalization via the best-separated slice (SVTD).

    Each candidate direction ``theta`` gives a symmetric slice
    ``H = T(I, I, theta) = sum_i lambda_i <v_i, theta> v_i v_i^T`` whose
    eigenvectors are the ``v_i`` and whose eigenvalues are
    ``m_i = lambda_i <v_i, theta>``. Following [1]_ Remark 7, the slice with
    the largest ``min_{i != j} |m_i - m_j|`` is diagonalized; the weights are
    then ``lambda_i = T(v_i, v_i, v_i)``.

    Parameters
    ----------
    T : ndarray, shape (n, n, n)
        Symmetric third-order tensor.
    k : int, optional
        Number of components (default ``n``): the k slice eigenvalues of
        largest magnitude are kept.
    directions : ndarray, shape (n, R), optional
        Candidate slice directions as columns. In the spectral pipeline these
        are the whitened images of the original features, ``theta_r = row r
        of (W^T)^+``, so that ``T(I, I, theta_r)`` is the whitened slice
        ``M3(W, W, e_r)`` of [1]_ in the population. Default: the n
        coordinate axes.
    n_random : int
        Extra random unit directions added to the candidates.
    seed : int or numpy.random.Generator
        Randomness of the extra directions.

    Returns
    -------
    Decomposition
        Weights, unit components and diagnostics (the chosen slice and its
        eigenvalue separation, residual, eigengaps).

    References
    ----------
    .. [1] Ruffini, Casanellas, Gavalda, Alg. 1 and Remark 7.
    """
    func = "svtd"
    T, k = _check_tensor(T, k, func)
    n_random = check_int(n_random, "n_random", func, minimum=0)
    rng = as_generator(seed, func)
    n = T.shape[0]
    cand = np.eye(n) if directions is None else np.asarray(directions, dtype=np.float64)
    if cand.ndim != 2 or cand.shape[0] != n or not np.all(np.isfinite(cand)):
        raise bad_argument("directions", func, f"a finite ({n}, R) array of directions as columns", cand)
    if n_random:
        extra = rng.standard_normal((n, n_random))
        cand = np.concatenate([cand, extra / np.linalg.norm(extra, axis=0)], axis=1)
    norms = np.linalg.norm(cand, axis=0)
    cand = cand[:, norms > 0] / norms[norms > 0]
    if cand.shape[1] == 0:
        raise bad_argument("directions", func, "at least one non-zero direction", "only zero columns", describe=False)
    slices = np.einsum("ijl,lr->rij", T, cand)
    values = np.linalg.eigvalsh(0.5 * (slices + slices.transpose(0, 2, 1)))
    top = np.take_along_axis(values, np.argsort(-np.abs(values), axis=1)[:, :k], axis=1)
    if k > 1:
        diffs = np.abs(top[:, :, None] - top[:, None, :]) + np.where(np.eye(k, dtype=bool), np.inf, 0.0)
        score = diffs.min(axis=(1, 2)) / np.maximum(np.abs(top).max(axis=1), np.finfo(float).tiny)
    else:
        score = np.abs(top[:, 0])
    best = int(np.argmax(score))
    return _slice_decomposition(T, cand[:, best], k, "svtd", {"slice_index": best, "slice_score": float(score[best])})


def eca(T: np.ndarray, k: int | None = None, *, seed: int | np.random.Generator = 0) -> Decomposition:
    """Excess Correlation Analysis: eigenvectors of one random slice (Jennrich).

    ``T(I, I, theta)`` for a uniformly random unit ``theta`` has, with
    probability one, distinct eigenvalues ``lambda_i <v_i, theta>``; its
    eigenvectors are the components.

    Parameters
    ----------
    T : ndarray, shape (n, n, n)
        Symmetric third-order tensor.
    k : int, optional
        Number of components (default ``n``).
    seed : int or numpy.random.Generator
        Randomness of the slice direction ``theta``.

    Returns
    -------
    Decomposition
        Weights ``T(v_i, v_i, v_i)``, unit components and diagnostics.

    References
    ----------
    .. [1] Anandkumar, Foster, Hsu, Kakade, Liu, Alg. 1; "Two SVDs suffice", Alg. 1.
    """
    func = "eca"
    T, k = _check_tensor(T, k, func)
    rng = as_generator(seed, func)
    theta = rng.standard_normal(T.shape[0])
    return _slice_decomposition(T, theta / np.linalg.norm(theta), k, "eca", {})


def cp_als(T: np.ndarray, k: int | None = None, *, init: Literal["svd", "random"] = "svd", n_iter: int = 500,
           tol: float = 1e-12, seed: int | np.random.Generator = 0) -> Decomposition:
    """Rank-k CP alternating least squares, symmetrized at the end (baseline).

    Three factor matrices are updated in turn by least squares; the
    components are the normalized averages of the three factors' columns
    and the weights ``T(v, v, v)``. Unlike the methods above ALS has local
    optima (two factors can collapse onto one component from a random
    start); it is here as the classical baseline.

    Parameters
    ----------
    T : ndarray, shape (n, n, n)
        Symmetric third-order tensor.
    k : int, optional
        Number of components (default ``n``).
    init : {"svd", "random"}
        Start from the leading left singular vectors of each unfolding (as
        tensorly's default) or from random orthonormal factors.
    n_iter : int
        Maximum number of sweeps.
    tol : float
        Stop when the relative change of the fit is below ``tol``.
    seed : int or numpy.random.Generator
        Randomness of the ``"random"`` start.

    Returns
    -------
    Decomposition
        Weights, unit components and diagnostics (sweeps, convergence).

    Warns
    -----
    RuntimeWarning
        If the sweeps did not converge in ``n_iter``.
    """
    func = "cp_als"
    T, k = _check_tensor(T, k, func)
    init = check_choice(init, "init", func, ("svd", "random"))
    n_iter = check_int(n_iter, "n_iter", func, minimum=1)
    tol = check_positive(tol, "tol", func)
    rng = as_generator(seed, func)
    n = T.shape[0]
    unfold = [T.reshape(n, n * n), T.transpose(1, 0, 2).reshape(n, n * n), T.transpose(2, 0, 1).reshape(n, n * n)]
    if init == "svd":
        factors = [np.linalg.svd(u, full_matrices=False)[0][:, :k] for u in unfold]
    else:
        factors = [np.linalg.qr(rng.standard_normal((n, k)))[0] for _ in range(3)]
    previous, converged, it = np.inf, False, 0
    for it in range(1, n_iter + 1):
        for mode in range(3):
            b, c = (factors[m] for m in range(3) if m != mode)
            kr = (b[:, None, :] * c[None, :, :]).reshape(n * n, k)
            gram = (b.T @ b) * (c.T @ c)
            factors[mode] = np.linalg.lstsq(gram, (unfold[mode] @ kr).T, rcond=None)[0].T
        fit = np.linalg.norm(unfold[0] - factors[0] @ ((factors[1][:, None, :] * factors[2][None, :, :]).reshape(n * n, k)).T)
        if abs(previous - fit) <= tol * max(1.0, np.linalg.norm(T)):
            converged = True
            break
        previous = fit
    first = factors[0] / np.linalg.norm(factors[0], axis=0)
    aligned = [f / np.linalg.norm(f, axis=0) * np.where(np.sum(f * first, axis=0) < 0, -1.0, 1.0) for f in factors]
    vectors = sum(aligned)
    vectors = vectors / np.linalg.norm(vectors, axis=0)
    weights = np.einsum("im,im->m", vectors, contract(T, vectors))
    if not converged:
        warn(f"cp_als did not converge in n_iter={n_iter} sweeps; increase n_iter.")
    return _finish(T, weights, vectors, "als", {"converged": np.array([converged]), "n_iter": np.array([it])})


_BY_METHOD = {"tpm": tensor_power_method, "svtd": svtd, "eca": eca, "als": cp_als}


def check_options(method: str, options: Mapping[str, Any] | None, func: str, methods: dict | None = None) -> dict:
    """Check ``options`` against the keyword arguments of ``method``'s decomposition.

    Parameters
    ----------
    method : {"tpm", "svtd", "eca", "als"}
        The decomposition the options configure.
    options : dict or None
        Keyword arguments for it (``None``: none).
    func : str
        The public function the options were given to (named in errors).
    methods : dict of str -> callable, optional
        The decompositions by name (default: the order-3 ones of this module;
        :mod:`specinit.engine.decompose4` passes its own).

    Returns
    -------
    dict
        A copy of ``options`` (empty for ``None``).

    Raises
    ------
    ValueError
        Unknown ``method``.
    TypeError
        If ``options`` is not a dict, or names a keyword the decomposition
        does not take (the error lists the ones it does take).
    """
    methods = _BY_METHOD if methods is None else methods
    method = check_choice(method, "method", func, tuple(methods))
    if options is None:
        return {}
    if not isinstance(options, dict):
        raise bad_argument("decompose_options", func, "a dict of keyword arguments or None", options, kind=TypeError)
    # The fit supplies the seed and the backend of its moments.
    accepted = [name for name, param in inspect.signature(methods[method]).parameters.items()
                if param.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("seed", "passes")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise bad_argument("decompose_options", func, f"keywords of method={method!r} ({', '.join(accepted) or 'none'})",
                           unknown, kind=TypeError)
    return dict(options)


@public
def decompose(T: ArrayLike, k: int | None = None, method: Literal["tpm", "svtd", "eca", "als"] = "tpm", *,
              seed: int | np.random.Generator = 0, passes: Passes | None = None, **options: Any) -> Decomposition:
    """Dispatch to one of :data:`METHODS`.

    Parameters
    ----------
    T : array-like, shape (n, n, n)
        Symmetric third-order tensor.
    k : int, optional
        Number of components (default ``n``).
    method : {"tpm", "svtd", "eca", "als"}
        :func:`tensor_power_method`, :func:`svtd`, :func:`eca` or :func:`cp_als`.
    seed : int or numpy.random.Generator
        Randomness of the chosen method.
    passes : specinit.engine.backends.Passes, optional
        The backend of the moments: ``"tpm"`` runs its iterations where the
        passes ran (:func:`tensor_power_method`); the other methods run on
        the host.
    **options
        Keyword arguments of the chosen method (checked by :func:`check_options`).

    Returns
    -------
    Decomposition

    Raises
    ------
    ValueError
        Unknown ``method``, or a bad tensor or ``k`` (see the methods).
    TypeError
        An option the chosen method does not take.
    """
    options = check_options(method, options, "decompose")
    if method == "tpm":
        options["passes"] = passes
    return _BY_METHOD[method](T, k, seed=seed, **options)
