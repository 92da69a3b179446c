"""Matrix-free whitening of a second-moment operator.

The top-k eigenpairs of ``M2`` are found by a randomized block Krylov method
(block Lanczos with full reorthogonalization and thick restarts): every pass
``M2 @ Q`` over the data adds a block to the search space, and the Ritz pairs
come from the whole space, not only from the last block as in the
randomized range finder with power iterations (Musco & Musco 2015; Halko,
Martinsson, Tropp 2011, Alg. 4.4 / 5.3). The gap-dependence of the number of
passes drops from ``1/gap`` to ``1/sqrt(gap)``, and ``M2`` is touched only
through products ``M2 @ Q``. Eigenvalues are kept WITH their signs. By
default the k of largest magnitude are whitened: a moment matrix that should
be positive semi-definite but has a negative or zero eigenvalue among the top
k is a symptom (alpha0 misspecified, k too large, too little data) and raises
an error instead of being silently absorbed by an absolute value. With
``eigenspace="positive"`` the k largest positive eigenpairs are whitened and
negative eigenvalues of larger magnitude are skipped and counted: the
estimator of an unbiased pair moment from very short documents is a positive
semi-definite signal plus noise with both signs, and its top-k positive
eigenspace is the signal's estimate (only fewer than k positive eigenvalues
raise).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Literal, Protocol

import numpy as np

from specinit._validation import as_generator, check_choice, check_int, checked_by_caller, public, warn
from specinit.engine.backends import namespace, one_blas_thread, resident_scope

__all__ = ["EIGENSPACES", "Whitening", "IndefiniteMomentError", "RitzSubspace", "krylov_eigenspace",
           "negative_spectrum", "signed_spectrum", "wanted_pairs", "whiten"]


#: Which k eigenpairs :func:`whiten` keeps: the top k by magnitude (all must be positive), or the k largest positive.
EIGENSPACES = ("magnitude", "positive")


class SecondMoments(Protocol):
    """What :func:`whiten` reads of a moment object: its dimension and products with its second moment."""

    @property
    def n_features(self) -> int:
        """The dimension ``d`` of the second moment."""

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q`` for a (d, r) block ``Q``."""


class SymmetricMoments(SecondMoments, Protocol):
    """What :func:`~specinit.engine.exchangeable.fit_exchangeable` reads: :class:`SecondMoments` and ``M3(W, W, W)``
    (``whitened_m4(W)`` too for ``order=4``)."""

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """The third moment at a (d, k) whitening ``W``: (k, k, k)."""


class IndefiniteMomentError(ValueError):
    """The second moment has a non-positive eigenvalue among the k it should whiten."""

    def advise(self, func: str, advice: str) -> "IndefiniteMomentError":
        """The same error with the public entry ``func`` and a model's ``advice`` added.

        Parameters
        ----------
        func : str
            The public function the user called (e.g. ``"lda.spectral"``).
        advice : str
            What to try for this model (e.g. another ``alpha0``).

        Returns
        -------
        IndefiniteMomentError
            To be raised ``from None`` at the model boundary.
        """
        return IndefiniteMomentError(f"{func}: {self} {advice}".rstrip())


@dataclass(frozen=True)
class Whitening:
    """Result of :func:`whiten`.

    Attributes
    ----------
    W : array, shape (d, k)
        ``U diag(s)^(-1/2)``, so that ``W.T @ M2 @ W = I_k``; where the
        moments' passes run (a NumPy array on the CPU backends, a JAX device
        array for ``backend="jax"``).
    U : array, shape (d, k)
        Orthonormal top-k eigenvectors of ``M2`` (where ``W`` is).
    eigenvalues : ndarray, shape (k,)
        The kept eigenvalues, positive, descending.
    diagnostics : dict
        ``signed_eigenvalues`` (the top ``k + oversample`` Ritz values, by
        decreasing magnitude, with signs), ``negative_skipped`` (negative
        eigenvalues larger in magnitude than the smallest kept one, skipped
        by ``eigenspace="positive"``; 0 otherwise), ``condition_number``,
        ``ritz_residual`` (max relative residual ``||M2 u - s u|| / s`` of
        the kept pairs), ``power_iterations`` (passes after the first),
        ``spectral_gap``
        (``s_k / |s_(k+1)|``, with ``s_(k+1)`` the eigenvalue after the
        smallest kept one by magnitude; inf when not computed).
    """

    W: np.ndarray
    U: np.ndarray
    eigenvalues: np.ndarray
    diagnostics: dict

    @property
    def unwhiten(self) -> np.ndarray:
        """``(W^T)^+ = U diag(s)^(1/2)``, shape (d, k): maps whitened vectors back."""
        return self.U * np.sqrt(self.eigenvalues)


@dataclass(frozen=True)
class RitzSubspace:
    """Result of :func:`krylov_eigenspace`: an orthonormal search space and ``M2`` applied to it.

    Attributes
    ----------
    basis : array, shape (d, m)
        Orthonormal basis of the search space (it contains the start block),
        where the start block is (host or device).
    image : array, shape (d, m)
        ``M2 @ basis`` (exact: every column came from a pass over the data).
    ritz : ndarray, shape (m,)
        Ritz values with signs, by decreasing magnitude.
    vectors : ndarray, shape (m, m)
        Ritz vectors in the coordinates of ``basis`` (columns, same order).
    residual : float
        Largest relative residual ``||M2 u - s u|| / |s|`` of the wanted Ritz pairs (:func:`wanted_pairs`).
    passes : int
        Products with ``M2`` (passes over the data).
    """

    basis: np.ndarray
    image: np.ndarray
    ritz: np.ndarray
    vectors: np.ndarray
    residual: float
    passes: int


def wanted_pairs(ritz: np.ndarray, k: int, order: Literal["magnitude", "positive"]) -> np.ndarray:
    """Indices of the wanted Ritz pairs among ``ritz`` (by decreasing magnitude): the first k, or the first k positive.

    Parameters
    ----------
    ritz : ndarray
        Signed Ritz values by decreasing magnitude.
    k : int
    order : {"magnitude", "positive"}

    Returns
    -------
    ndarray of int
        At most k indices (fewer when fewer than k values are positive).
    """
    return np.arange(min(k, ritz.size)) if order == "magnitude" else np.flatnonzero(ritz > 0)[:k]


def _ritz_pairs(B: np.ndarray, G: np.ndarray, k: int, order: str):
    """Ritz pairs from ``B = Q^T M2 Q`` and ``G = (M2 Q)^T (M2 Q)``, by decreasing magnitude.

    The residuals (of the wanted pairs, :func:`wanted_pairs`) come from the
    small matrices, ``||M2 u - s u||^2 = v^T G v - s^2`` for ``u = Q v``
    (orthonormal Q): no product with the tall basis. Cancellation limits
    them to about ``1e-8`` relative, far below the stopping tolerance; the
    reported residual is recomputed from the tall arrays (:func:`_exact_residual`).
    Returns the Ritz values and vectors, the largest relative residual
    ``||M2 u - s u|| / |s|`` and the largest absolute one ``||M2 u - s u||``.
    """
    ritz, vecs = np.linalg.eigh(0.5 * (B + B.T))
    rank = np.argsort(-np.abs(ritz))
    ritz, vecs = ritz[rank], vecs[:, rank]
    wanted = wanted_pairs(ritz, k, order)
    if wanted.size == 0:
        return ritz, vecs, np.inf, np.inf
    s, top = ritz[wanted], vecs[:, wanted]
    absolute = np.sqrt(np.maximum(np.einsum("ij,ij->j", top, G @ top) - s**2, 0.0))
    return ritz, vecs, float(np.max(absolute / np.maximum(np.abs(s), np.finfo(float).tiny))), float(np.max(absolute))


def _exact_residual(basis, image, ritz: np.ndarray, vecs: np.ndarray, wanted) -> float:
    """``max_i ||M2 u_i - s_i u_i|| / |s_i|`` over the wanted Ritz pairs, from the tall arrays."""
    if len(wanted) == 0:
        return np.inf
    s, top = ritz[wanted], vecs[:, wanted]
    residual = np.linalg.norm(np.asarray(image @ top - (basis @ top) * s), axis=0)
    return float(np.max(residual / np.maximum(np.abs(s), np.finfo(float).tiny)))


def _next_block(basis, candidates):
    """Orthonormal directions of ``candidates`` outside span(basis).

    Projected out of the basis twice (classical Gram-Schmidt, "twice is
    enough"), then orthonormalized through the eigendecomposition of the
    small Gram matrix (thin GEMMs instead of a tall QR or SVD); directions
    below ``1e-7`` of the largest (numerically inside the span: an invariant
    subspace was found) are dropped, and one more projection and Cholesky
    sweep restore orthogonality to round-off. The tall products run where
    the arrays are; the small Gram matrices come to the host.
    """
    scale = float(namespace(candidates).linalg.norm(candidates))
    for _ in range(2):
        candidates = candidates - basis @ (basis.T @ candidates)
    vals, vecs = np.linalg.eigh(np.asarray(candidates.T @ candidates))
    keep = vals > (1e-7 * scale) ** 2
    if not keep.any():
        return candidates[:, :0]
    block = candidates @ (vecs[:, keep] / np.sqrt(vals[keep]))
    block = block - basis @ (basis.T @ block)
    chol = np.linalg.cholesky(np.asarray(block.T @ block))
    return block @ np.linalg.inv(chol).T


def krylov_eigenspace(matmat: Callable[[np.ndarray], np.ndarray], start: np.ndarray, k: int, *, min_passes: int = 2,
                      max_passes: int = 13, tol: float = 1e-2, noise_tol: float = 0.0, max_blocks: int = 4,
                      order: Literal["magnitude", "positive"] = "magnitude") -> RitzSubspace:
    """Top-k eigenpairs of a symmetric operator by randomized block Krylov iteration.

    Block Lanczos with full reorthogonalization: the search space starts as
    span(``start``) and each pass ``Y = M2 @ Q_j`` of the newest block adds
    the part of ``Y`` outside the space as the next block. The Ritz pairs of
    the whole space (``image = M2 @ basis`` is known exactly, so no pass is
    spent on the Rayleigh quotient) are checked after every pass. When the
    space would exceed ``max_blocks`` blocks it is restarted on its top Ritz
    vectors (thick restart), which bounds memory at ``max_blocks * b``
    columns of length d. The algebra of the space (thin GEMMs, small
    eigenproblems) runs on one BLAS thread: the passes use the cores.

    Parameters
    ----------
    matmat : callable
        ``Q -> M2 @ Q`` for a (d, b) matrix, returning an array of ``Q``'s
        kind; one call is one pass over the data.
    start : array, shape (d, b)
        Start block (random; columns that must lie in the space, such as a
        mean vector, can be included). ``b >= k``. A NumPy array, or a device
        array (array API): the tall arrays of the space stay where it is and
        only the small projections come to the host.
    k : int
        Number of wanted eigenpairs.
    min_passes, max_passes : int
        Passes always done, and at most done.
    tol : float
        Stop when the top-k relative Ritz residual is below ``tol``.
    noise_tol : float, default 0
        Stop also when the largest absolute residual ``||M2 u - s u||`` of
        the wanted pairs is at most ``noise_tol`` times the magnitude of the
        most negative Ritz value. For a moment whose population value is
        positive semi-definite (a pair moment of a mixture) that value is
        sampling noise, and its magnitude a lower bound of the noise's
        spectral norm: the eigenvectors' error from the iteration is then at
        most ``noise_tol`` times the error the data leave in them
        (Davis-Kahan: both are a residual over the eigengap). 0 turns the
        rule off, as does a space without negative Ritz values (exact
        moments).
    max_blocks : int
        Blocks kept in the space before a thick restart.
    order : {"magnitude", "positive"}
        The wanted eigenpairs, whose residual decides convergence: the k of
        largest magnitude, or the first k positive ones in that order
        (negative ones of larger magnitude stay in the space and are
        skipped). A thick restart keeps the Ritz vectors of largest magnitude.

    Returns
    -------
    RitzSubspace
    """
    order = check_choice(order, "order", None, EIGENSPACES)
    with one_blas_thread():
        return _block_lanczos(matmat, start, k, min_passes, max_passes, tol, noise_tol, max_blocks, order)


def _columns(xp, new, buffer, tall=None):
    """``tall`` (None: no columns) followed by the columns of ``new``: a view of ``buffer``, whose leading columns
    ``tall`` already is, for host arrays; a concatenation for device arrays (``buffer`` None)."""
    if buffer is None:
        return new if tall is None else xp.concatenate([tall, new], axis=1)
    m = 0 if tall is None else tall.shape[1]
    buffer[:, m: m + new.shape[1]] = new
    return buffer[:, : m + new.shape[1]]


def _block_lanczos(matmat, start, k, min_passes, max_passes, tol, noise_tol, max_blocks, order) -> RitzSubspace:
    # The tall arrays (basis, image: (d, m)) stay where ``start`` is (host or device: namespace); the projections
    # B = Q^T M2 Q and G = (M2 Q)^T (M2 Q) are small host arrays grown by one block per pass (O(d m b) per pass).
    xp = namespace(start)
    d, width = start.shape
    capacity = min(d, max_blocks * width)

    def fresh_buffers():
        # Host arrays grow inside two (d, capacity + width) column-major buffers, new after each restart: a block
        # is written in place (no copy of the space per pass) and only the columns written so far are resident;
        # device arrays (immutable) are concatenated.
        return tuple(np.empty((d, capacity + width), order="F") for _ in range(2)) if xp is np else (None, None)

    buffers = fresh_buffers()
    basis = _columns(xp, xp.linalg.qr(start)[0], buffers[0])
    image = _columns(xp, matmat(basis), buffers[1])
    added, passes = width, 1
    B = np.asarray(basis.T @ image)
    G = np.asarray(image.T @ image)
    while True:
        ritz, vecs, residual, absolute = _ritz_pairs(B, G, k, order)
        below_noise = absolute <= noise_tol * max(-float(ritz.min()), 0.0)
        if passes >= max_passes or (passes >= min_passes and (residual < tol or below_noise)):
            break
        m = basis.shape[1]
        newest = image[:, m - added :]
        if m + width > capacity:  # thick restart on the top Ritz vectors
            keep = vecs[:, :width]
            buffers = fresh_buffers()
            basis = _columns(xp, basis @ keep, buffers[0])  # one at a time: the old basis is freed here
            image = _columns(xp, image @ keep, buffers[1])
            B, G = keep.T @ B @ keep, keep.T @ G @ keep
            newest = image
        block = _next_block(basis, newest)
        added = block.shape[1]
        if added == 0:  # span(basis) is invariant: the Ritz pairs are exact
            break
        Y = matmat(block)
        passes += 1
        C, H = np.asarray(basis.T @ Y), np.asarray(image.T @ Y)
        B = np.block([[B, C], [C.T, np.asarray(block.T @ Y)]])
        G = np.block([[G, H], [H.T, np.asarray(Y.T @ Y)]])
        basis, image = _columns(xp, block, buffers[0], basis), _columns(xp, Y, buffers[1], image)
    ritz, vecs, *_ = _ritz_pairs(B, G, k, order)  # of the final space (a thick restart may have rotated it)
    residual = _exact_residual(basis, image, ritz, vecs, wanted_pairs(ritz, k, order))
    return RitzSubspace(basis=basis, image=image, ritz=ritz, vectors=vecs, residual=residual, passes=passes)


@public
def whiten(moments: SecondMoments, k: int, *, oversample: int = 10, n_iter: int = 1, max_iter: int = 12,
           tol: float = 1e-2, seed: int | np.random.Generator = 0,
           eigenspace: Literal["magnitude", "positive"] = "magnitude") -> Whitening:
    """Whiten the second moment ``M2`` of ``moments`` to rank ``k``.

    Parameters
    ----------
    moments : SecondMoments
        Anything with ``n_features`` and ``m2_matmat(Q)`` (``M2 @ Q``);
        with ``resident(A)`` and ``scope()`` too (count moments), the start
        block and the whole Krylov space live where its passes run.
    k : int
        Number of components, ``1 <= k <= n_features``.
    oversample : int
        Extra columns of the random start block (``p`` in Halko et al.):
        the block size of the Krylov iteration is ``k + oversample``.
    n_iter : int
        Krylov blocks always added after the first pass; each is one more
        pass over the data.
    max_iter : int
        Further blocks are added, one pass each, until the relative Ritz
        residual ``max_i ||M2 u_i - s_i u_i|| / s_i`` of the top-k pairs is
        below ``tol`` or ``max_iter`` passes after the first are done.
    tol : float
        Convergence tolerance on the relative Ritz residual.
    seed : int or numpy.random.Generator
        Randomness of the test matrix.
    eigenspace : {"magnitude", "positive"}
        ``"magnitude"``: whiten with the k eigenpairs of largest magnitude,
        which must all be positive. ``"positive"``: with the k largest
        positive eigenpairs; negative eigenvalues of larger magnitude than
        the smallest kept one are skipped and counted in
        ``diagnostics["negative_skipped"]`` (a sampled unbiased moment of
        very short documents: a positive semi-definite signal plus noise of
        both signs).

    Returns
    -------
    Whitening

    Raises
    ------
    IndefiniteMomentError
        If a kept eigenvalue is <= 0 (or numerically zero): one of the top k
        by magnitude, or, with ``eigenspace="positive"``, fewer than k
        positive eigenvalues (the message states how many there are).

    Warns
    -----
    RuntimeWarning
        If the residual is still above ``tol`` after ``max_iter`` iterations
        (the top-k eigenvalues are nearly tied with the rest of the
        spectrum: k may be too large for the data); with
        ``eigenspace="positive"``, if negative eigenvalues were skipped (the
        smallest kept eigenvalues are within the moment's sampling noise,
        whose scale the negative ones show).
    """
    d = moments.n_features
    if not checked_by_caller():
        k = check_int(k, "k", None, minimum=1, maximum=d)
    oversample = check_int(oversample, "oversample", None, minimum=0)
    n_iter = check_int(n_iter, "n_iter", None, minimum=0)
    max_iter = check_int(max_iter, "max_iter", None, minimum=n_iter)
    eigenspace = check_choice(eigenspace, "eigenspace", None, EIGENSPACES)
    rng = as_generator(seed, None)
    r = min(d, k + oversample)
    start = rng.standard_normal((d, r))
    with resident_scope(moments):
        resident = getattr(moments, "resident", None)
        space = krylov_eigenspace(moments.m2_matmat, start if resident is None else resident(start), k,
                                  min_passes=n_iter + 1, max_passes=max_iter + 1, tol=tol, order=eigenspace)
        residual, ritz = space.residual, space.ritz[:r]
        kept = wanted_pairs(space.ritz, k, eigenspace)
        s = space.ritz[kept]
        scale = np.max(np.abs(ritz))
        if kept.size < k or np.any(s <= scale * 1e-12):
            raise _indefinite(ritz, s, k, scale, eigenspace)
        U = space.basis @ space.vectors[:, kept]
        # Eigenvectors are defined up to sign: make each column's largest entry positive, so that backends whose
        # sums differ only by round-off hand the decomposition the same whitened tensor.
        xp = namespace(U)
        U = U * np.where(np.asarray(U[xp.argmax(xp.abs(U), axis=0), np.arange(k)]) < 0, -1.0, 1.0)
        W = U / np.sqrt(s)
    skipped = int(kept[-1] + 1 - k)  # the negative values before the k-th positive one (by magnitude)
    following = space.ritz[kept[-1] + 1] if space.ritz.size > kept[-1] + 1 else 0.0
    gap = float(s[-1] / abs(following)) if following != 0 else np.inf
    diagnostics = {
        "signed_eigenvalues": ritz,
        "negative_skipped": skipped,
        "condition_number": float(s[0] / s[-1]),
        "ritz_residual": residual,
        "power_iterations": space.passes - 1,
        "spectral_gap": gap,
    }
    if residual >= tol:
        warn(
            f"whitening: the randomized eigensolver did not converge in max_iter={max_iter} passes after the first "
            f"(relative Ritz residual {residual:.2g}, spectral gap s_k/|s_k+1| = {gap:.3g}); the top-{k} "
            "eigenvalues are barely separated from the rest: try a smaller k, or larger max_iter/oversample.")
    if skipped:
        below = int(np.count_nonzero(s < abs(float(np.min(space.ritz[: kept[-1]])))))
        warn(f"whitening: {skipped} negative eigenvalue(s) of the second moment are larger in magnitude than the "
             f"smallest of the top-{k} positive ones it is whitened with (skipped; "
             f"diagnostics['m2_negative_skipped']): {below} of the k kept eigenvalues are within the moment's "
             "sampling noise (very short documents, or k beyond what the data resolve). Refine the estimate "
             "(EM) before using it, or try a smaller k.")
    return Whitening(W=W, U=U, eigenvalues=s, diagnostics=diagnostics)


def _indefinite(ritz: np.ndarray, s: np.ndarray, k: int, scale: float, eigenspace: str) -> IndefiniteMomentError:
    """The error for a kept eigenvalue that is not positive (fewer than k positive ones with ``"positive"``)."""
    if eigenspace == "positive":
        n_positive = int(np.count_nonzero(s > scale * 1e-12))
        return IndefiniteMomentError(
            f"The second moment has only {n_positive} eigenvalue(s) that are positive and not numerically zero, "
            f"fewer than k={k} (signed top eigenvalues: {np.array2string(ritz[: k + 1], precision=3)}): "
            f"the data support at most k={n_positive} components; try a smaller k or more data.")
    bad = int(np.count_nonzero(s <= scale * 1e-12))
    return IndefiniteMomentError(
        f"The second moment is not positive definite on its top {k} eigenvectors: {bad} of the "
        f"top-{k} eigenvalues (by magnitude) are <= 0 or numerically zero (signed top eigenvalues: "
        f"{np.array2string(ritz[: k + 1], precision=3)}). Likely causes: k too large for the data "
        f"(try a smaller k), too little data, or a misspecified model."
    )


def signed_spectrum(moments: SecondMoments, r: int, seed: int | np.random.Generator = 0) -> np.ndarray:
    """The ``r`` eigenvalues of largest magnitude of ``moments``' second moment, with their signs (descending).

    Parameters
    ----------
    moments : SecondMoments
        Has ``n_features`` and ``m2_matmat``.
    r : int
        How many.
    seed : int or numpy.random.Generator

    Returns
    -------
    ndarray, shape (r,)
    """
    d = moments.n_features
    r = check_int(r, "r", "signed_spectrum", minimum=1, maximum=d)
    rng = as_generator(seed, "signed_spectrum")
    space = krylov_eigenspace(moments.m2_matmat, rng.standard_normal((d, min(d, r + 10))), r, min_passes=3)
    return space.ritz[:r]


def negative_spectrum(moments: SecondMoments, m: int, top: float, seed: int | np.random.Generator = 0) -> np.ndarray:
    """The magnitudes of the ``m`` most negative eigenvalues of ``moments``' second moment (descending; fewer when
    fewer are negative).

    :func:`signed_spectrum` of ``top I - M2``, whose largest eigenvalues are ``top`` plus those magnitudes when
    ``top`` is at least the largest eigenvalue: the negative side of a spectrum whose positive values are
    larger, which :func:`signed_spectrum` of ``M2`` (by magnitude) reaches only past all of them.

    Parameters
    ----------
    moments : SecondMoments
        Has ``n_features`` and ``m2_matmat``.
    m : int
        How many.
    top : float
        The largest eigenvalue of the second moment (or more).
    seed : int or numpy.random.Generator

    Returns
    -------
    ndarray, shape (<= m,)
    """
    shifted = SimpleNamespace(n_features=moments.n_features, m2_matmat=lambda Q: top * Q - moments.m2_matmat(Q))
    values = signed_spectrum(shifted, m, seed) - top  # top I - M2 has no negative eigenvalue: magnitude = value
    return np.sort(values[values > 0])[::-1]
