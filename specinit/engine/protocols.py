"""What the engine's fits read from a moment object: the one description of the moments a family returns.

A family's :meth:`~specinit.family.Family.moments` and
:meth:`~specinit.family.Family.population_moments` return one of these (or
an object its :meth:`~specinit.family.Family.fit_input` turns into one), and
the engine reads nothing else from it:

* :class:`ExchangeableMoments` -- :func:`specinit.engine.exchangeable.fit_exchangeable`
  (``fit_kind = "exchangeable"``): the second moment as a matrix product and
  the third moment whitened; :class:`FourthOrderMoments` adds the fourth
  (``order = 4``).
* :class:`MultiViewMoments` -- :func:`specinit.engine.views.fit_multiview`
  (``fit_kind = "multiview"``): the cross moments of the views.

Every data moment of the engine (:class:`~specinit.engine.moments.CountMoments`,
:class:`~specinit.engine.rows.RowMoments`, :class:`~specinit.engine.views.ViewMoments`)
and every exact one (:class:`~specinit.engine.population.FactoredMoments`,
:class:`~specinit.engine.views.MultiViewPopulation`) is one of them; a family
may add what its own hooks read (``m1``, ``n_documents``, ``source``).
"""

from __future__ import annotations

from typing import Protocol, Union, runtime_checkable

import numpy as np

__all__ = ["ExchangeableMoments", "FourthOrderMoments", "Moments", "MultiViewMoments"]


@runtime_checkable
class ExchangeableMoments(Protocol):
    """Moments ``M2 = sum_i omega_i b_i b_i^T`` and ``M3 = sum_i kappa_i b_i^(x)3`` of ``d`` features."""

    @property
    def n_features(self) -> int:
        """``d``."""

    def m2_matmat(self, Q: np.ndarray) -> np.ndarray:
        """``M2 @ Q`` for a (d, r) block ``Q``: (d, r)."""

    def whitened_m3(self, W: np.ndarray) -> np.ndarray:
        """``M3(W, W, W)`` for a (d, k) whitening ``W``: (k, k, k)."""


@runtime_checkable
class FourthOrderMoments(ExchangeableMoments, Protocol):
    """Exchangeable moments whose fourth-order cumulant is decomposed instead (kurtotic factors)."""

    def whitened_m4(self, W: np.ndarray) -> np.ndarray:
        """``M4(W, W, W, W)`` for a (d, k) whitening ``W``: (k, k, k, k)."""


@runtime_checkable
class MultiViewMoments(Protocol):
    """Cross moments of ``n_views`` conditionally independent views of a hidden class."""

    @property
    def n_views(self) -> int:
        """Number of views (at least 3)."""

    @property
    def dims(self) -> tuple[int, ...]:
        """The views' dimensions ``d_v``."""

    def pairs_matmat(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``E[x_a x_b^T] @ Q`` for a (d_b, r) block ``Q``: (d_a, r)."""

    def projected_triples(self, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray,
                          Uc: np.ndarray) -> np.ndarray:
        """``E[x_a (x) x_b (x) x_c]`` projected on the columns of ``Ua``, ``Ub``, ``Uc``: (r_a, r_b, r_c)."""


#: What a family's ``moments`` and ``population_moments`` return.
Moments = Union[ExchangeableMoments, MultiViewMoments]
