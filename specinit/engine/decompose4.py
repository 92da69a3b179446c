"""Decompositions of symmetric, orthogonally decomposable k x k x k x k tensors.

The order-4 companions of :mod:`specinit.engine.decompose` (kept in their own
module so that one stays short). Every method returns
``T ~= sum_i lambda_i v_i^(x)4`` with orthonormal ``v_i`` (the columns of
``vectors``). For an even order the sign of ``lambda_i`` is meaningful (a
fourth cumulant has negative eigenvalues for sub-Gaussian factors) and the
sign of ``v_i`` is not: the weights keep their signs and the components are
ordered by decreasing ``|lambda_i|``.

* :func:`tensor_power_method4` -- the tensor power method
  ``u <- T(I, u, u, u) / ||T(I, u, u, u)||`` with vectorized random restarts,
  a convergence tolerance (up to the sign flip of negative eigenvalues),
  polishing of the best restart (largest ``|T(u, u, u, u)|``) and deflation
  ([1]_ Alg. 1, [2]_ Sec. 3.1 and Lemma 2 for the fourth-order case).
* :func:`eca4` -- Excess Correlation Analysis for the fourth cumulant: the
  eigenvectors of one random slice ``T(I, I, theta, theta)``
  ``= sum_i lambda_i <v_i, theta>^2 v_i v_i^T`` ([3]_ Alg. 2).

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 2014, Alg. 1.
.. [2] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for latent
   Dirichlet allocation", Sec. 3.1, Lemma 2.
.. [3] Anandkumar et al. "Two SVDs suffice", Alg. 2 (ECA with the fourth cumulant).
"""

from __future__ import annotations
from typing import TYPE_CHECKING, Any, Literal, Mapping

import numpy as np

from specinit._validation import (
    as_generator,
    check_int,
    check_positive,
    public,
    warn,
)
from specinit.engine.decompose import (
    Decomposition,
    _check_tensor,
    _relative_gaps,
    check_options,
    deflated_power_method,
)

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["METHODS4", "check_options4", "contract4", "decompose4", "eca4", "reconstruct4", "tensor_power_method4"]

METHODS4 = ("tpm", "eca")


def contract4(T: np.ndarray, U: np.ndarray) -> np.ndarray:
    """``T(I, u, u, u)`` for every column ``u`` of ``U``.

    Parameters
    ----------
    T : ndarray, shape (n, n, n, n)
        Symmetric tensor.
    U : ndarray, shape (n, m)
        Vectors as columns.

    Returns
    -------
    ndarray, shape (n, m)
        One (n, n^3) x (n^3, m) product.
    """
    n, m = U.shape
    cubes = (U[:, None, None, :] * U[None, :, None, :] * U[None, None, :, :]).reshape(n**3, m)
    return T.reshape(n, n**3) @ cubes


def reconstruct4(weights: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``sum_i weights[i] v_i^(x)4`` as a dense (n, n, n, n) array.

    Parameters
    ----------
    weights : ndarray, shape (k,)
        Eigenvalues (signed).
    vectors : ndarray, shape (n, k)
        Components as columns.

    Returns
    -------
    ndarray, shape (n, n, n, n)
    """
    return np.einsum("i,ai,bi,ci,di->abcd", weights, vectors, vectors, vectors, vectors)


def _finish4(T, weights, vectors, method, extra) -> Decomposition:
    order = np.argsort(-np.abs(weights))
    weights, vectors = weights[order], vectors[:, order]
    norm = np.linalg.norm(T)
    resid = np.linalg.norm(T - reconstruct4(weights, vectors)) / (norm if norm > 0 else 1.0)
    gram = vectors.T @ vectors
    diagnostics = {
        "method": method,
        "residual": float(resid),
        "orthogonality": float(np.max(np.abs(gram - np.eye(gram.shape[0])))),
        **{key: (value[order] if isinstance(value, np.ndarray) and value.shape == order.shape else value)
           for key, value in extra.items()},
    }
    diagnostics.setdefault("eigengaps", _relative_gaps(weights))
    return Decomposition(weights=weights, vectors=vectors, diagnostics=diagnostics)


def tensor_power_method4(T: np.ndarray, k: int | None = None, *, n_restarts: int = 10, n_iter: int = 200,
                         tol: float = 1e-10, seed: int | np.random.Generator = 0) -> Decomposition:
    """Tensor power method for symmetric fourth-order tensors, with restarts and deflation.

    For each of ``k`` components, ``n_restarts`` random unit vectors are
    iterated together (``u <- T(I, u, u, u) / ||T(I, u, u, u)||``) until
    every one moves less than ``tol`` (up to sign) or ``n_iter`` steps; the
    restart with the largest ``|T(u, u, u, u)|`` is polished by up to
    ``n_iter`` more steps, its eigenvalue ``lambda = T(u, u, u, u)``
    recorded with its sign, and ``lambda u^(x)4`` deflated from ``T``. The
    iteration's fixed points are the components whatever the sign of their
    eigenvalue (the coefficients ``c_j = <v_j, u>`` evolve as
    ``c_j <- lambda_j c_j^3``), so mixed-sign tensors (sub- and super-Gaussian
    factors together) are decomposed.

    Parameters
    ----------
    T : ndarray, shape (n, n, n, n)
        Symmetric tensor (e.g. a whitened fourth cumulant).
    k : int, optional
        Number of components (default ``n``).
    n_restarts : int
        Random restarts per component (``L`` in [1]_ Alg. 1).
    n_iter : int
        Maximum power iterations per phase (``N`` in [1]_). Convergence is
        cubic near a component, slower where eigenvalues nearly tie.
    tol : float
        Convergence tolerance on the change of the unit iterate.
    seed : int or numpy.random.Generator
        Randomness of the restarts.

    Returns
    -------
    Decomposition
        ``weights`` signed, ordered by decreasing ``|lambda|``;
        ``diagnostics``: ``residual`` (``||T - sum||_F / ||T||_F``),
        ``eigengaps`` (relative separation of each eigenvalue from the
        nearest other one), ``orthogonality``, ``converged``, ``stalled`` (given up
        as hopeless) and ``n_iter`` per component.

    Raises
    ------
    ValueError
        If ``T`` is not a finite (n, n, n, n) array or ``k > n``.
    TypeError
        Non-integer ``k``, ``n_restarts`` or ``n_iter``.

    Warns
    -----
    RuntimeWarning
        If a component did not converge within ``n_iter`` iterations.

    References
    ----------
    .. [1] Anandkumar et al., JMLR 2014, Alg. 1.
    .. [2] Anandkumar et al., "A spectral algorithm for LDA", Sec. 3.1, Lemma 2.
    """
    func = "tensor_power_method4"
    T, k = _check_tensor(T, k, func, order=4)
    n_restarts = check_int(n_restarts, "n_restarts", func, minimum=1)
    n_iter = check_int(n_iter, "n_iter", func, minimum=1)
    tol = check_positive(tol, "tol", func)
    starts = as_generator(seed, func).standard_normal((k, T.shape[0], n_restarts))
    weights, vectors, converged, stalled, iters = deflated_power_method(
        T, starts, n_iter, tol, contract4, lambda u: np.einsum("a,b,c,d->abcd", u, u, u, u),
        select=lambda values: np.argmax(np.abs(values)))
    if not converged.all():
        warn(f"tensor_power_method4: {k - converged.sum()} of {k} components did not converge in n_iter={n_iter} "
             "iterations (nearly tied eigenvalues); increase n_iter or n_restarts, or try method='eca'.")
    return _finish4(T, weights, vectors, "tpm", {"converged": converged, "stalled": stalled, "n_iter": iters})


def eca4(T: np.ndarray, k: int | None = None, *, seed: int | np.random.Generator = 0) -> Decomposition:
    """Excess Correlation Analysis on a fourth-order tensor: eigenvectors of one random slice.

    ``H = T(I, I, theta, theta) = sum_i lambda_i <v_i, theta>^2 v_i v_i^T``
    for a random unit ``theta`` has, with probability one, distinct
    eigenvalues; its eigenvectors are the components and the weights are
    ``lambda_i = T(v_i, v_i, v_i, v_i)``. Fast (one k x k eigenproblem) and
    less robust to sampling error than :func:`tensor_power_method4`.

    Parameters
    ----------
    T : ndarray, shape (n, n, n, n)
        Symmetric tensor.
    k : int, optional
        Number of components (default ``n``): the slice eigenvectors with the
        k eigenvalues of largest magnitude.
    seed : int or numpy.random.Generator
        Randomness of ``theta``.

    Returns
    -------
    Decomposition
        As :func:`tensor_power_method4`; ``diagnostics["slice_eigenvalues"]``
        and ``eigengaps`` of the slice.

    Raises
    ------
    ValueError
        If ``T`` is not a finite (n, n, n, n) array or ``k > n``.

    Warns
    -----
    RuntimeWarning
        If the slice has nearly repeated eigenvalues (components may mix).

    References
    ----------
    .. [1] Anandkumar et al., "Two SVDs suffice", Alg. 2.
    """
    func = "eca4"
    T, k = _check_tensor(T, k, func, order=4)
    rng = as_generator(seed, func)
    theta = rng.standard_normal(T.shape[0])
    theta /= np.linalg.norm(theta)
    H = np.einsum("abcd,c,d->ab", T, theta, theta)
    values, O = np.linalg.eigh(0.5 * (H + H.T))
    order = np.argsort(-np.abs(values))[:k]
    values, O = values[order], O[:, order]
    weights = np.einsum("im,im->m", O, contract4(T, O))
    gaps = _relative_gaps(values)
    if np.min(gaps) < 1e-6:
        warn(f"eca4: the random slice has nearly repeated eigenvalues (relative gap {np.min(gaps):.1e}); "
             "components may be mixed. Try method='tpm' or another seed.")
    return _finish4(T, weights, O, "eca", {"slice_eigenvalues": values, "eigengaps": gaps})


_BY_METHOD4 = {"tpm": tensor_power_method4, "eca": eca4}


def check_options4(method: str, options: Mapping[str, Any] | None, func: str) -> dict:
    """Check ``options`` against the keyword arguments of an order-4 decomposition.

    Parameters
    ----------
    method : {"tpm", "eca"}
        The decomposition the options configure.
    options : dict or None
        Keyword arguments for it (``None``: none).
    func : str
        The public function the options were given to (named in errors).

    Returns
    -------
    dict
        A copy of ``options`` (empty for ``None``).

    Raises
    ------
    ValueError
        Unknown ``method``.
    TypeError
        If ``options`` is not a dict or names a keyword the decomposition does
        not take (the error lists the ones it does take).
    """
    return check_options(method, options, func, _BY_METHOD4)


@public
def decompose4(T: ArrayLike, k: int | None = None, method: Literal["tpm", "eca"] = "tpm", *,
               seed: int | np.random.Generator = 0, options: Mapping[str, Any] | None = None) -> Decomposition:
    """Dispatch to one of :data:`METHODS4`.

    Parameters
    ----------
    T : array-like, shape (n, n, n, n)
        Symmetric fourth-order tensor.
    k : int, optional
        Number of components (default ``n``).
    method : {"tpm", "eca"}
        :func:`tensor_power_method4` or :func:`eca4`.
    seed : int or numpy.random.Generator
        Randomness of the chosen method.
    options : dict, optional
        Keyword arguments of the chosen method (checked by :func:`check_options4`).

    Returns
    -------
    Decomposition

    Raises
    ------
    ValueError
        Unknown ``method``, or a bad tensor or ``k``.
    TypeError
        An option the chosen method does not take.
    """
    options = check_options4(method, options, "decompose4")
    return _BY_METHOD4[method](T, k, seed=seed, **options)
