"""From moments to components: whitening, decomposition, unwhitening -- the one fit of every model.

:func:`fit_exchangeable` is the engine shared by every model whose
(possibly symmetrized or noise-corrected) moments have the form
``M2 = sum_i omega_i b_i b_i^T`` and ``M3 = sum_i kappa_i b_i^(x)3`` (or
``M4 = sum_i kappa_i b_i^(x)4`` with ``order=4``, for kurtotic factors).
After whitening (``W^T M2 W = I``) the tensor ``T = M3(W, W, W)`` equals
``sum_i lambda_i v_i^(x)3`` with orthonormal ``v_i = sqrt(omega_i) W^T b_i``
and ``lambda_i = kappa_i / omega_i^(3/2)``; hence

.. math::

    \\sqrt{\\omega_i}\\, b_i = (W^T)^+ v_i .

Each model turns ``(lambda_i, (W^T)^+ v_i)`` into its own parameters
(for example ``omega_i = 1 / lambda_i^2`` when ``kappa = omega``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping

import numpy as np

from specinit._validation import as_generator, check_choice, check_int, checked_by_caller, public
from specinit.engine.decompose import METHODS, Decomposition, check_options, decompose
from specinit.engine.decompose4 import METHODS4, check_options4, decompose4
from specinit.engine.backends import resident_scope
from specinit.engine.whitening import SymmetricMoments, Whitening, whiten

__all__ = ["ExchangeableFit", "fit_exchangeable"]


@dataclass(frozen=True)
class ExchangeableFit:
    """Output of :func:`fit_exchangeable`.

    Attributes
    ----------
    components : ndarray, shape (k, d)
        ``(W^T)^+ v_i`` as rows, i.e. ``sqrt(omega_i) b_i``.
    eigenvalues : ndarray, shape (k,)
        Tensor eigenvalues ``lambda_i``.
    whitening : Whitening
    decomposition : Decomposition
    """

    components: np.ndarray
    eigenvalues: np.ndarray
    whitening: Whitening
    decomposition: Decomposition

    @property
    def diagnostics(self) -> dict[str, Any]:
        """Whitening and decomposition diagnostics in one flat dict."""
        w = self.whitening.diagnostics
        return {
            "m2_eigenvalues": w["signed_eigenvalues"],
            "m2_condition_number": w["condition_number"],
            "m2_ritz_residual": w["ritz_residual"],
            "m2_passes": w["power_iterations"] + 1,
            "m2_spectral_gap": w["spectral_gap"],
            "m2_negative_skipped": w["negative_skipped"],
            "tensor_eigenvalues": self.eigenvalues,
            **self.decomposition.report(),
        }


def _slice_directions(unwhiten: np.ndarray, max_directions: int) -> np.ndarray:
    """Whitened images of the features with most weight in the subspace."""
    norms = np.linalg.norm(unwhiten, axis=1)
    top = np.argsort(-norms)[:max_directions]
    return unwhiten[top].T


@public
def fit_exchangeable(
    moments: SymmetricMoments,
    k: int,
    *,
    order: Literal[3, 4] = 3,
    method: Literal["tpm", "svtd", "eca", "als"] = "tpm",
    seed: int | np.random.Generator = 0,
    oversample: int = 10,
    n_power_iter: int = 1,
    max_slice_directions: int = 200,
    decompose_options: Mapping[str, Any] | None = None,
    eigenspace: Literal["magnitude", "positive"] = "magnitude",
) -> ExchangeableFit:
    """Whiten ``moments``, decompose the whitened third (or fourth) moment, unwhiten.

    Parameters
    ----------
    moments : SymmetricMoments
        Has ``n_features``, ``m2_matmat(Q)`` and ``whitened_m3(W)``
        (``whitened_m4(W)`` for ``order=4``):
        :class:`specinit.engine.moments.CountMoments`,
        :class:`specinit.engine.population.FactoredMoments`, ...
    k : int
        Number of components.
    order : {3, 4}
        Order of the whitened tensor.
    method : {"tpm", "svtd", "eca", "als"}
        Decomposition (:mod:`specinit.engine.decompose`; ``"tpm"`` or ``"eca"``
        for ``order=4``, :mod:`specinit.engine.decompose4`).
    seed : int or numpy.random.Generator
        One generator drives whitening and decomposition.
    oversample, n_power_iter : int
        Randomized whitening settings (:func:`specinit.engine.whitening.whiten`).
    max_slice_directions : int
        For ``method="svtd"``: number of original features whose whitened
        slices are candidates (those with the largest weight in the top-k
        subspace).
    decompose_options : dict, optional
        Keyword arguments of the decomposition (``n_restarts``, ``n_iter``,
        ``tol``...; checked against the method's keywords).
    eigenspace : {"magnitude", "positive"}
        The eigenpairs of the second moment that whiten it
        (:func:`specinit.engine.whitening.whiten`): the top k by magnitude,
        or the k largest positive ones.

    Returns
    -------
    ExchangeableFit
        Unwhitened components ``sqrt(omega_i) b_i``, tensor eigenvalues, the
        whitening and the decomposition (with their diagnostics).

    Raises
    ------
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment is not positive definite on the k eigenvectors it is whitened with.
    TypeError
        If ``decompose_options`` names a keyword the decomposition does not take.
    """
    order = check_choice(order, "order", None, (3, 4))
    method = check_choice(method, "method", None, METHODS if order == 3 else METHODS4)
    if not checked_by_caller():
        k = check_int(k, "k", None, minimum=1, maximum=moments.n_features)
    max_slice_directions = check_int(max_slice_directions, "max_slice_directions", None, minimum=1)
    rng = as_generator(seed, None)
    options = (check_options if order == 3 else check_options4)(method, decompose_options, None)
    # The whitening's tall arrays stay where the moments' passes run (a JAX device) through the whitened pass;
    # the power method runs there too (Passes.power_method); the unwhitening runs on the host.
    wh = whiten(moments, k, oversample=oversample, n_iter=n_power_iter, seed=rng, eigenspace=eigenspace)
    with resident_scope(moments):
        tensor = moments.whitened_m4(wh.W) if order == 4 else moments.whitened_m3(wh.W)
    host = replace(wh, W=np.asarray(wh.W), U=np.asarray(wh.U))
    if order == 4:
        dec = decompose4(tensor, k, method, seed=rng, options=options)
    else:
        if method == "svtd":
            options.setdefault("directions", _slice_directions(host.unwhiten, max_slice_directions))
        dec = decompose(tensor, k, method, seed=rng, passes=getattr(moments, "passes", None), **options)
    components = (host.unwhiten @ dec.vectors).T
    return ExchangeableFit(components=components, eigenvalues=dec.weights, whitening=host, decomposition=dec)
