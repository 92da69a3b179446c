"""Where the passes over data run: one interface of additive passes, implementations chosen once per call.

Every moment the engine needs is a sum over rows (documents, observations,
sliding triples) of partial results that merge by addition. :class:`Passes`
declares those sums; :class:`~specinit.engine.backends.numpy.NumpyPasses` is
the reference implementation and the others override what they accelerate:

* ``numba`` -- fused multi-threaded CSR kernels for the count passes;
* ``jax`` -- the data moved once to JAX's default device (a GPU when
  present), every pass there in float64;
* ``dask`` -- partial sums computed where the blocks of a ``dask.array``
  live, only moment-sized results travel.

A backend is chosen once, at the public entry, by :func:`resolve_backend`:
a name, or ``None`` for the default (Dask for Dask input, JAX when an
accelerator is present and it implements the passes the model needs,
NumPy otherwise). A named backend that does not implement a pass the model
needs is refused with the list of backends that do; it is never silently
replaced. Backends are imported lazily, so importing the engine imports
neither JAX, Numba nor Dask.

Moment objects (:class:`~specinit.engine.moments.CountMoments`,
:class:`~specinit.engine.views.ViewMoments`) receive a placed data set and
its backend and contain no backend branches.

Where the tall arrays live: a count pass returns an array of the kind it
was given. NumPy in, NumPy out (every backend); an array made
:meth:`Passes.resident` (a JAX device array for ``jax``) in, the same kind
out, so the whitening's Krylov space, the whitening matrix and the
same-token corrections of the whitened third moment stay where the data
are, and only small (k x k, k x k x k) results come back to the host
(:func:`namespace` gives the array module of either kind). A backend may
also run the tensor power method on the (k, k, k) tensor where its passes
run (:attr:`Passes.power_method`; JAX does, the others leave it to the
host).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, fields
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import numpy as np

from specinit._validation import bad_argument

if TYPE_CHECKING:
    import jax

    from specinit.engine.sources import CountSource, ViewSource

__all__ = ["BACKENDS", "FirstOrderStats", "OnBackend", "Passes", "WhitenedStats", "accelerator_present", "namespace",
           "numba_kernel", "one_blas_thread", "resident_scope", "resolve_backend"]

#: Backend name -> "module:class" (imported on first use).
BACKENDS = {
    "numpy": "specinit.engine.backends.numpy:NumpyPasses",
    "numba": "specinit.engine.backends.numba:NumbaPasses",
    "jax": "specinit.engine.backends.jax:JaxPasses",
    "dask": "specinit.engine.backends.dask:DaskPasses",
}

#: What to install for a backend whose import failed.
_EXTRAS = {"numba": "pip install \"specinit[fast]\"", "dask": "pip install \"specinit[dask]\"",
           "jax": "pip install jax"}

#: Every pass of the interface.
PASSES = frozenset({"count_first", "count_m2", "count_whitened", "gram", "triples"})


class _Additive:
    """Dataclass mix-in: partial sums merge field by field with ``+``."""

    def __add__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return type(self)(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass
class FirstOrderStats(_Additive):
    """Sums over documents from the first count pass (all additive).

    ``a_d`` and ``b_d`` are the per-document weights of the second- and
    third-order estimators: 1 for the pooled estimator, 1 / (n(n-1)) and
    1 / (n(n-1)(n-2)) for the per-document average.

    Attributes
    ----------
    n_documents, n_dropped : int
        Documents used (>= 3 tokens) and dropped.
    m1_sum : ndarray, shape (V,)
        ``sum_d w1_d c_d``.
    m1_norm : float
        ``sum_d n_d`` (pooled) or the number of documents (per-document).
    word_a : ndarray, shape (V,)
        ``sum_d a_d c_d`` (the same-token correction of the second moment).
    norm2 : float
        ``sum_d a_d n_d (n_d - 1)``.
    word_b : ndarray, shape (V,)
        ``sum_d b_d c_d`` (the same-token corrections of the third moment).
    norm3 : float
        ``sum_d b_d n_d (n_d - 1) (n_d - 2)``.
    """

    n_documents: int
    n_dropped: int
    m1_sum: np.ndarray
    m1_norm: float
    word_a: np.ndarray
    norm2: float
    word_b: np.ndarray
    norm3: float


@dataclass
class WhitenedStats(_Additive):
    """Sums over documents of the whitened count pass, for a fixed whitening ``W``.

    Attributes
    ----------
    y3 : ndarray, shape (k, k, k)
        ``sum_d b_d y_d^(x)3`` with ``y_d = W^T c_d``.
    y2 : ndarray, shape (k, k)
        ``sum_d a_d y_d y_d^T``.
    word_by : ndarray, shape (V, k)
        ``sum_d b_d c_d y_d^T`` (per-word totals of the same-token corrections).
    """

    y3: np.ndarray
    y2: np.ndarray
    word_by: np.ndarray


class Passes:
    """The additive passes over data, as a backend implements them.

    Data are placed once (:meth:`place_counts`, :meth:`place_views`); every
    pass then reads the placed data. Subclasses declare in ``implements``
    the passes they provide; :func:`resolve_backend` refuses a backend that
    lacks one a model needs.

    Attributes
    ----------
    name : str
        The backend name.
    implements : frozenset of str
        Names of the passes provided (among ``count_first``, ``count_m2``,
        ``count_whitened``, ``gram``, ``triples``).
    """

    name: ClassVar[str] = ""
    implements: ClassVar[frozenset] = frozenset()

    def place_counts(self, source: CountSource, weighting: str) -> Any:
        """Place a :class:`~specinit.engine.sources.CountSource` (documents with >= 3 tokens, weights of ``weighting``)."""
        raise NotImplementedError

    def count_first(self, placed: Any) -> FirstOrderStats:
        """First-order sums of placed counts."""
        raise NotImplementedError

    def count_m2(self, placed: Any, Q: np.ndarray) -> np.ndarray:
        """``sum_d a_d c_d (c_d^T Q)`` (V, r)."""
        raise NotImplementedError

    def count_whitened(self, placed: Any, W: np.ndarray) -> WhitenedStats:
        """The whitened sums for a (V, k) whitening ``W``."""
        raise NotImplementedError

    def place_views(self, source: ViewSource) -> Any:
        """Place a :class:`~specinit.engine.sources.ViewSource`."""
        raise NotImplementedError

    def gram(self, placed: Any, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``X_a^T (X_b Q)`` summed over rows (d_a, r)."""
        raise NotImplementedError

    def triples(self, placed: Any, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray,
                Uc: np.ndarray) -> np.ndarray:
        """``sum_rows (Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)`` (ka, kb, kc)."""
        raise NotImplementedError

    def resident(self, A: np.ndarray) -> np.ndarray | jax.Array:
        """``A`` (float64) where the passes run; count passes given such an array return the same kind.

        The CPU backends compute on the host: ``A`` itself.
        """
        return np.asarray(A, dtype=np.float64)

    def scope(self) -> AbstractContextManager[Any]:
        """Context for arithmetic on :meth:`resident` arrays (the JAX backend: float64 enabled). Default: none."""
        return nullcontext()

    def pair_products(self, A: np.ndarray | jax.Array, rhs: np.ndarray | jax.Array) -> np.ndarray | jax.Array:
        """``sum_r A[r, i] A[r, j] rhs[r, m]`` (k, k, m) of tall arrays of the kind :meth:`resident` returns.

        The O(V k^3) same-token corrections of the whitened third moment. The
        host backends run :func:`specinit.engine.backends.numpy.pair_products`
        on every core.
        """
        raise NotImplementedError(f"the {self.name} backend has no pair products")

    #: The deflated tensor power method where the passes run, or None:
    #: :func:`specinit.engine.decompose.tensor_power_method` then runs its host iterations. A backend that
    #: provides one (JAX) defines
    #: ``power_method(T, starts, n_iter, tol)`` with ``T`` (k, k, k), ``starts`` (k, k, n_restarts), and returns
    #: host arrays ``(weights, vectors, converged, stalled, iterations)`` as
    #: :func:`~specinit.engine.decompose.deflated_power_method` does.
    power_method: ClassVar = None

    #: Whether the topic model's recovery steps (:meth:`anchor_weights`, :meth:`place_documents`) run where the
    #: passes run; False: on the host (:func:`specinit.engine.anchors.fit_anchor`'s loop, the chunks of
    #: :func:`specinit.models._topics.close_topics`).
    recovers_on_device: bool = False

    def place_documents(self, source: CountSource) -> Any:
        """Every document of ``source`` where the passes run, for the closing EM sweeps of ``lda.spectral``: an
        object whose ``sweep(beta, alpha, steps, seed_groups)`` returns the host arrays ``(stats, log_likelihood,
        tokens)`` of one sweep (:class:`specinit.engine.backends.jax.DeviceDocuments`)."""
        raise NotImplementedError(f"the {self.name} backend runs the closing sweeps on the host")

    def anchor_weights(self, H: np.ndarray, G: np.ndarray, lipschitz: float, n_iter: int,
                       tol: float) -> tuple[np.ndarray, int]:
        """The anchor weights' projected-gradient loop of :func:`specinit.engine.anchors.fit_anchor` where the
        passes run: the host weights ``C`` (V, k) and the steps taken."""
        raise NotImplementedError(f"the {self.name} backend fits the anchor weights on the host")


def resident_scope(moments: object) -> AbstractContextManager[Any]:
    """The context for arithmetic on ``moments``' resident arrays (:meth:`Passes.scope`); none if it has no passes.

    Parameters
    ----------
    moments : object
        A moment object; those with a ``scope()`` method (count moments) name their backend's context.

    Returns
    -------
    context manager
    """
    scope = getattr(moments, "scope", None)
    return nullcontext() if scope is None else scope()


@functools.cache  # one import attempt: some loops look a kernel up at every step
def numba_kernel(name: str) -> Callable[..., Any] | None:
    """The compiled kernel ``name`` of the Numba backend, or None when Numba is not installed (extra ``[fast]``).

    Parameters
    ----------
    name : str
        A function of :mod:`specinit.engine.backends.numba` (``"closing_sweep"``, ``"forward_backward"``).

    Returns
    -------
    callable or None
    """
    try:
        module = importlib.import_module("specinit.engine.backends.numba")
    except ImportError:
        return None
    return getattr(module, name)


def namespace(x: np.ndarray | jax.Array) -> ModuleType:
    """The array module of ``x``: :mod:`numpy` for host arrays, the array's own (``jax.numpy``) otherwise.

    Parameters
    ----------
    x : array
        A NumPy array or an array with ``__array_namespace__`` (array API).

    Returns
    -------
    module
    """
    return np if isinstance(x, np.ndarray) else x.__array_namespace__()


_blas_controller = None


def one_blas_thread() -> AbstractContextManager[Any]:
    """A context in which the BLAS of this process runs on one thread.

    Used where the work is already spread over threads (the row chunks of a
    pass) and around small dense algebra (eigenproblems of the Krylov
    space's projections, the tensor power method), where BLAS threads cost
    more than they save; on a machine loaded by other processes, OpenBLAS's
    spinning threads make a (240, 240) eigendecomposition a hundred times
    slower.

    Returns
    -------
    context manager
        From :meth:`threadpoolctl.ThreadpoolController.limit`.
    """
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController

        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=1, user_api="blas")


def accelerator_present() -> bool:
    """True when JAX is installed and its default device is a GPU or TPU.

    Returns
    -------
    bool
    """
    try:
        jax = importlib.import_module("jax")
        return jax.devices()[0].platform != "cpu"
    except (ImportError, RuntimeError):  # pragma: no cover - no JAX, or no backend at all
        return False


def _load(name: str) -> type:
    module, cls = BACKENDS[name].split(":")
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as exc:
        raise bad_argument("backend", None, f"a backend whose packages are installed ({_EXTRAS.get(name, '')})",
                           f"{name!r}, which needs {exc.name or exc}", describe=False) from None


def resolve_backend(backend: str | Passes | None, source_kind: str, needs: frozenset, **settings: int | None) -> Passes:
    """The backend of one call, chosen once at the public entry.

    Parameters
    ----------
    backend : str, Passes or None
        ``"numpy"``, ``"numba"``, ``"jax"``, ``"dask"``, an instance of
        :class:`Passes`, or ``None``: ``"dask"`` for Dask input, ``"jax"`` when
        an accelerator is present and JAX implements ``needs``, else ``"numpy"``.
    source_kind : str
        The input's kind (``"dask"`` for Dask arrays; anything else is local).
    needs : frozenset of str
        The passes the caller will run.
    **settings
        Keyword arguments of the backend's constructor (``n_threads``).

    Returns
    -------
    Passes

    Raises
    ------
    ValueError
        An unknown name, a backend lacking one of ``needs``, Dask input with
        a local backend (or the reverse), or a backend whose packages are missing.
    """
    if isinstance(backend, Passes):
        passes = backend
    else:
        if backend is None:
            if source_kind == "dask":
                backend = "dask"
            elif accelerator_present() and needs <= _load("jax").implements:
                backend = "jax"
            else:
                backend = "numpy"
        if backend not in BACKENDS:
            raise bad_argument("backend", None, f"one of {', '.join(map(repr, BACKENDS))} or None", backend)
        passes = _load(backend)(**settings)
    missing = needs - passes.implements
    if missing:
        able = [name for name in BACKENDS if needs <= _load_quietly(name)]
        raise bad_argument("backend", None, f"a backend implementing the passes this model needs "
                           f"({', '.join(sorted(needs))}): one of {', '.join(map(repr, able))}",
                           f"{passes.name!r}, which lacks {', '.join(sorted(missing))}", describe=False)
    if (source_kind == "dask") != (passes.name == "dask"):
        raise bad_argument("backend", None, "'dask' or None for Dask input (its blocks are reduced where they live)"
                           if source_kind == "dask" else "a local backend ('numpy', 'numba', 'jax') for in-memory "
                           "input (backend='dask' needs dask.array input)", passes.name)
    return passes


class OnBackend:
    """Base of the moment classes: every pass over their source runs on one backend, resolved once.

    A subclass calls :meth:`_run_on` in its constructor, before its first pass; the chosen
    :class:`Passes` is ``passes`` and its name ``backend``.
    """

    passes: Passes

    def _run_on(self, backend: str | Passes | None, source_kind: str, needs: frozenset, **settings: int | None) -> None:
        """Resolve ``backend`` for a source of ``source_kind`` that will run ``needs`` (:func:`resolve_backend`)."""
        self.passes = resolve_backend(backend, source_kind, needs, **settings)

    @property
    def backend(self) -> str:
        """Name of the backend running the passes."""
        return self.passes.name


def _load_quietly(name: str) -> frozenset:
    try:
        return _load(name).implements
    except ValueError:
        return frozenset()
