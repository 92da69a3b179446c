"""Argument validation with one message format, and warnings that point at the user's line.

Every check raises at function entry with the message
``"The 'name' argument of func must be <constraint>; got <found> instead."``
so that users see which argument was wrong, what was expected and what was
found. ``ValueError`` is raised for bad values, ``TypeError`` for bad types.

:func:`warn` issues a warning attributed to the first frame outside
specinit, so it points at the user's call whatever the call depth inside
the package.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import numbers
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, ParamSpec, TypeVar

import numpy as np
import scipy.sparse as sp

__all__ = [
    "Interval",
    "Options",
    "StoredArrayError",
    "as_generator",
    "bad_argument",
    "bad_stored",
    "check_arguments",
    "check_choice",
    "check_count_matrix",
    "check_int",
    "check_magnitude",
    "checked_sparse",
    "integer_symbols",
    "optional_import",
    "check_positive",
    "check_allocation",
    "checked_by_caller",
    "current_entry",
    "format_bytes",
    "memory_limit",
    "public",
    "set_memory_limit",
    "stored_array",
    "warn",
]

_MAX_COUNT = float(2**53)  # the largest integer below which every integer is exact in float64

_PACKAGE_DIRS = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (__file__, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models", "x"))
)


def _inside_package(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE_DIRS)


_ENTRY: contextvars.ContextVar = contextvars.ContextVar("specinit_entry", default=None)
_NESTED: contextvars.ContextVar = contextvars.ContextVar("specinit_nested", default=False)


def _entry_name(func: Callable) -> str:
    """``family.function`` for functions of ``specinit.models.<family>``, the qualified name otherwise."""
    module = func.__module__ or ""
    name = func.__qualname__.replace(".__init__", "")
    if module.startswith("specinit.models.") and "." not in name:
        return f"{module.rsplit('.', 1)[1]}.{name}"
    return name


_P = ParamSpec("_P")
_R = TypeVar("_R")


def public(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Mark ``func`` as a public entry: errors raised under it name it, nested entries keep the outer name.

    The name is taken from the function (``hmm.spectral`` for
    ``specinit.models.hmm.spectral``), so no function name travels down as a
    string. A public function called by another one (``whiten`` inside
    ``lda.spectral``) reports the outer entry, the one the user called.

    Parameters
    ----------
    func : callable
        The public function.

    Returns
    -------
    callable
        The wrapped function.
    """
    name = _entry_name(func)

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        nested = _ENTRY.get() is not None
        entry = None if nested else _ENTRY.set(name)
        token = _NESTED.set(nested)
        try:
            return func(*args, **kwargs)
        finally:
            _NESTED.reset(token)
            if entry is not None:
                _ENTRY.reset(entry)

    return wrapper


def checked_by_caller() -> bool:
    """Whether the running public function was called by another one, which checked the arguments it passes.

    Arguments are validated once, at the entry the user called; an engine
    function (``whiten``, ``decompose``) called by the skeleton receives
    values already checked against the same constraints and skips its own
    checks of them (``k``).
    """
    return _NESTED.get()


def current_entry(default: str = "specinit") -> str:
    """The public function the user called (see :func:`public`), or ``default`` outside any."""
    return _ENTRY.get() or default


def warn(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Issue ``message`` attributed to the user's line (the first caller outside specinit).

    Parameters
    ----------
    message : str
        What happened and what to try.
    category : type of Warning
        ``RuntimeWarning`` for numerical trouble (the default), ``UserWarning``
        for questionable input.
    """
    frame, level = sys._getframe(1), 2
    while frame is not None and _inside_package(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def optional_import(module: str, extra: str, func: str | None = None) -> Any:
    """Import ``module``, a package of an optional extra; ImportError naming the extra when it is not installed.

    Parameters
    ----------
    module : str
        The module to import (``"dask.array"``, ``"numba"``, ``"lda"``).
    extra : str
        The extra of specinit that installs it (``"dask"``, ``"fast"``, ``"data"``).
    func : str, optional
        What needs it (the message starts with it); default the current public entry.

    Returns
    -------
    module

    Raises
    ------
    ImportError
        ``module`` (or a package it needs) is not installed; the message says
        ``pip install "specinit[<extra>]"`` and ``name`` is the missing module.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise ImportError(f'{func or current_entry()} needs the optional package {package!r}; install it with '
                          f'pip install "specinit[{extra}]".', name=exc.name or package) from exc


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if sp.issparse(value):
        return f"a sparse {value.format} matrix of shape {value.shape}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def bad_argument(name: str, func: str | None, constraint: str, found: Any, *, kind: type[Exception] = ValueError,
                 describe: bool = True) -> Exception:
    """Build the uniform validation error (the caller raises it); ``func=None`` names the current public entry."""
    got = _describe(found) if describe else str(found)
    return kind(f"The '{name}' argument of {func or current_entry()} must be {constraint}; got {got} instead.")


class StoredArrayError(ValueError):
    """A damaged array of a summary an estimate keeps (its ``state``), naming the array.

    Attributes
    ----------
    key : str
        The array's name in the summary (``"m1_sum"``); a saved estimate holds it as the member
        ``state/<prefix><key>``.
    problem : str
        What is wrong, without the argument (``"must be ...; got ... instead"``).
    """

    def __init__(self, message: str, key: str, problem: str) -> None:
        super().__init__(message)
        self.key, self.problem = key, problem

    def under(self, prefix: str) -> "StoredArrayError":
        """The same error for a summary stored under ``prefix`` (its key ``prefix + key``, in the message too)."""
        key = prefix + self.key
        return StoredArrayError(str(self).replace(f"{self.key!r} {self.problem}", f"{key!r} {self.problem}"), key,
                                self.problem)


def bad_stored(name: str, what: str, key: str, constraint: str, found: Any) -> StoredArrayError:
    """Build the error of a damaged stored array ``key`` of ``what`` (``"pair sums"``) kept by the argument ``name``
    (the caller raises it)."""
    problem = f"must be {constraint}; got {found} instead"
    return StoredArrayError(f"The '{name}' argument of {current_entry()} must be an estimate whose stored {what} are "
                            f"whole: {key!r} {problem}.", key, problem)


def stored_array(arrays: Mapping, key: str, what: str, name: str = "estimate", *, shape: tuple | None = None,
                 ndim: int | None = None, integer: bool = False, nonnegative: bool = False) -> np.ndarray:
    """The array ``key`` of a stored summary ``what`` (``"row sums"``), checked before anything uses it.

    Parameters
    ----------
    arrays : mapping of str -> array
        The summary's arrays (an estimate's ``state`` without its prefix).
    key : str
        The array wanted.
    what : str
        The summary, in words (errors say "stored <what>").
    name : str
        The argument named in errors.
    shape : tuple of int, optional
        The shape it must have.
    ndim : int, optional
        Its number of axes, when the shape is free.
    integer : bool
        An integer array (returned as int64); otherwise numeric and finite (returned as float64).
    nonnegative : bool
        No negative entry.

    Returns
    -------
    ndarray

    Raises
    ------
    StoredArrayError
        Naming ``key``: missing, of another kind, number of axes or shape, non-finite or negative entries.
    """
    if key not in arrays:
        raise bad_stored(name, what, key, "present", "none")
    value = np.asarray(arrays[key])
    axes = len(shape) if shape is not None else ndim
    if value.dtype.kind not in ("iu" if integer else "iuf") or (axes is not None and value.ndim != axes):
        article = f"a {axes}-d" if axes is not None else "an" if integer else "a"
        raise bad_stored(name, what, key, f"{article} {'integer' if integer else 'numeric'} array",
                         f"shape {value.shape} of {value.dtype}")
    if shape is not None and value.shape != tuple(shape):
        raise bad_stored(name, what, key, f"of shape {tuple(shape)}", f"shape {value.shape}")
    value = value.astype(np.int64 if integer else np.float64)
    if not integer and not np.all(np.isfinite(value)):
        raise bad_stored(name, what, key, "finite", "non-finite entries")
    if nonnegative and np.any(value < 0):
        raise bad_stored(name, what, key, "non-negative", f"minimum {value.min():g}")
    return value


def check_int(value: Any, name: str, func: str | None = None, *, minimum: int | None = None,
              maximum: int | None = None) -> int:
    """Return ``value`` as ``int`` after checking its type and range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise bad_argument(name, func, "an integer", value, kind=TypeError)
    value = int(value)
    if minimum is not None and value < minimum:
        raise bad_argument(name, func, f"an integer >= {minimum}", value)
    if maximum is not None and value > maximum:
        raise bad_argument(name, func, f"an integer <= {maximum}", value)
    return value


def check_positive(value: Any, name: str, func: str | None = None) -> float:
    """Return ``value`` as a finite, strictly positive float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise bad_argument(name, func, "a positive real number", value, kind=TypeError)
    value = float(value)
    if not np.isfinite(value) or value <= 0:
        raise bad_argument(name, func, "a finite number > 0", value)
    return value


def check_choice(value: Any, name: str, func: str | None, options: Iterable[str]) -> str:
    """Check that ``value`` is one of ``options`` (listed in the error)."""
    options = tuple(options)
    if value not in options:
        listed = ", ".join(repr(o) for o in options)
        raise bad_argument(name, func, f"one of {listed}", value)
    return value


def as_generator(seed: Any, func: str | None = None, name: str = "seed") -> np.random.Generator:
    """Normalise ``seed`` (int or ``numpy.random.Generator``) once."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise bad_argument(name, func, "an int or a numpy.random.Generator", seed, kind=TypeError)
    if seed < 0:
        raise bad_argument(name, func, "a non-negative integer", seed)
    return np.random.default_rng(int(seed))


def _index_range(index: np.ndarray, size: int, what: str, name: str, func: str | None) -> None:
    """Refuse non-integer ``index`` arrays or entries outside ``[0, size)``."""
    if index.dtype.kind not in "iu":
        raise bad_argument(name, func, f"a sparse matrix with integer {what}", f"{what} of dtype {index.dtype}",
                           kind=TypeError, describe=False)
    if index.size and (index.min() < 0 or index.max() >= size):
        raise bad_argument(name, func, f"a sparse matrix with {what} in [0, {size})",
                           f"{what} from {index.min()} to {index.max()}", describe=False)


def _compressed_structure(matrix, name: str, func: str | None) -> None:
    """Check a CSR, CSC or BSR matrix's ``indptr``/``indices``/``data`` against its shape."""
    rows, cols = matrix.shape
    if matrix.format == "bsr":
        block_rows, block_cols = matrix.blocksize
        major, minor, block = rows // block_rows, cols // block_cols, (block_rows, block_cols)
    else:
        (major, minor), block = (rows, cols) if matrix.format == "csr" else (cols, rows), ()
    indptr, indices, data = (np.asarray(a) for a in (matrix.indptr, matrix.indices, matrix.data))
    if indptr.ndim != 1 or indptr.size != major + 1 or indices.ndim != 1 or data.shape[1:] != block:
        raise bad_argument(name, func, f"a {matrix.format.upper()} matrix whose indptr has {major + 1} entries",
                           f"indptr of shape {indptr.shape}, indices of shape {indices.shape} and data of shape "
                           f"{data.shape}", describe=False)
    _index_range(indptr, indices.size + 1, "indptr", name, func)
    if indptr[0] != 0 or np.any(indptr[1:] < indptr[:-1]):
        raise bad_argument(name, func, "a sparse matrix whose indptr starts at 0 and never decreases",
                           f"indptr {indptr[:5]}...", describe=False)
    stored = int(indptr[-1])
    if stored > data.shape[0]:
        raise bad_argument(name, func, f"a sparse matrix with as many data as indices ({stored})",
                           f"{data.shape[0]} data", describe=False)
    _index_range(indices[:stored], minor, "column indices" if matrix.format != "csc" else "row indices", name, func)


def checked_sparse(matrix: Any, name: str, func: str | None = None) -> sp.csr_matrix:
    """A ``scipy.sparse`` matrix or array of any format as CSR, after checking its structure in O(nnz).

    SciPy's conversions and the compiled count kernels (Numba, JAX) index
    memory with the stored indices unchecked; an index outside the shape, a
    decreasing ``indptr`` or arrays of disagreeing lengths would read or
    write out of bounds. They are refused here, before any conversion.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array
    name : str
        The argument's name, for the error.
    func : str, optional
        The public function, for the error (default: the current entry).

    Returns
    -------
    scipy.sparse.csr_matrix
        ``matrix`` itself when it is CSR; else a converted copy.

    Raises
    ------
    ValueError
        Indices outside the shape, a malformed ``indptr``, lengths that disagree.
    TypeError
        Non-integer index arrays, non-numeric data.
    """
    if matrix.ndim != 2:
        raise bad_argument(name, func, "two-dimensional (rows x columns)", matrix)
    if matrix.dtype.kind not in "biuf":
        raise bad_argument(name, func, "a numeric sparse matrix", matrix, kind=TypeError)
    if matrix.format in ("lil", "dok", "dia"):
        try:  # built in Python/NumPy without indexed writes; the coordinates are checked below
            matrix = matrix.tocoo()
        except (ValueError, IndexError) as exc:
            raise bad_argument(name, func, f"a sparse matrix with indices inside its shape {matrix.shape}", str(exc),
                               describe=False) from None
    if matrix.format == "coo":
        coords = matrix.coords if hasattr(matrix, "coords") else (matrix.row, matrix.col)
        data = np.asarray(matrix.data)
        for axis, (index, size) in enumerate(zip(coords, matrix.shape)):
            index = np.asarray(index)
            if index.ndim != 1 or index.size != data.size:
                raise bad_argument(name, func, f"a COO matrix with one coordinate per value ({data.size})",
                                   f"{index.size} coordinates on axis {axis}", describe=False)
            _index_range(index, size, "row indices" if axis == 0 else "column indices", name, func)
    elif matrix.format in ("csr", "csc", "bsr"):
        _compressed_structure(matrix, name, func)
    else:  # pragma: no cover - scipy.sparse has no other formats
        raise bad_argument(name, func, "a CSR, CSC, COO, BSR, LIL, DOK or DIA matrix", matrix, kind=TypeError)
    index_arrays = [a for a in ("indices", "indptr", "row", "col") if hasattr(matrix, a)]
    if any(getattr(matrix, a).dtype not in (np.int32, np.int64) for a in index_arrays):
        # SciPy's compiled routines take int32/int64 indices only; in-range indices of other integer types are
        # converted on a copy (the caller's matrix is left as it is)
        matrix = matrix.copy()
        for a in index_arrays:
            setattr(matrix, a, np.asarray(getattr(matrix, a)).astype(np.int64))
    return matrix.tocsr()


def integer_symbols(array: np.ndarray, name: str, where: str = "", func: str | None = None,
                    noun: str = "symbols") -> np.ndarray:
    """Finite, non-negative, integer-valued ``array`` as int64, checked before any cast.

    Floats must be whole numbers below 2**53 (exact in float64); unsigned
    integers must fit in int64: nothing wraps around or is truncated.

    Parameters
    ----------
    array : ndarray
        Boolean, integer or float symbols.
    name : str
        The argument's name, for the error.
    where : str
        Where in the argument (e.g. ``" in item 3"``).
    func : str, optional
        The public function (default: the current entry).
    noun : str
        What the values are called in errors (``"symbols"``, ``"category codes"``).

    Returns
    -------
    ndarray of int64
    """
    if array.dtype.kind not in "biuf":
        raise bad_argument(name, func, f"integer {noun}", f"dtype {array.dtype}{where}", kind=TypeError, describe=False)
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)):
            raise bad_argument(name, func, f"finite {noun}", f"NaN or inf{where}", describe=False)
        whole = array == np.round(array)
        if not np.all(whole):
            raise bad_argument(name, func, f"integer {noun}", f"the value {array[~whole][0]:g}{where}", describe=False)
    if array.size and array.dtype.kind in "if" and array.min() < 0:
        raise bad_argument(name, func, f"non-negative {noun}", f"the value {array.min():g}{where}", describe=False)
    limit = 2**53 if array.dtype.kind == "f" else np.iinfo(np.int64).max
    if array.size and array.max() > limit:
        raise bad_argument(name, func, f"{noun} below {limit:.3g}", f"the value {array.max():g}{where}",
                           describe=False)
    return array.astype(np.int64)


#: Largest |value| of real-valued data: the variances the fits use and report (squares) stay finite in float64.
MAX_MAGNITUDE = float(np.sqrt(np.finfo(np.float64).max) / 2)


def check_magnitude(values: np.ndarray, name: str, func: str | None = None) -> None:
    """Refuse real-valued data beyond :data:`MAX_MAGNITUDE` in absolute value (their squares would overflow).

    Parameters
    ----------
    values : ndarray
        Finite data.
    name : str
        The argument named in the error.
    func : str, optional
        The public function (default: the current entry).
    """
    top = float(np.max(np.abs(values))) if np.size(values) else 0.0
    if top > MAX_MAGNITUDE:
        raise bad_argument(name, func, f"values of at most {MAX_MAGNITUDE:.3g} in absolute value (variances, their "
                           "squares, must be finite in float64: change the unit)", f"max |value| = {top:.3g}",
                           describe=False)


def check_count_matrix(counts: Any, name: str, func: str | None = None) -> sp.csr_matrix:
    """Validate an (N, V) matrix of non-negative integer counts.

    Accepts ``scipy.sparse`` matrices or arrays (any format) and dense
    array-likes. Returns a canonical CSR matrix of float64 (summed
    duplicates, sorted indices) without copying more than needed.
    """
    if sp.issparse(counts):
        if counts.ndim != 2:
            raise bad_argument(name, func, "two-dimensional (documents x vocabulary)", counts)
        matrix = checked_sparse(counts, name, func)
        # The caller's arrays are never modified: a float64 CSR in canonical form (sorted, no duplicates) is used
        # as it is; anything else is converted or copied once, then canonicalized in place.
        owned = matrix is not counts
        copy = not owned and (matrix.dtype != np.float64 or not matrix.has_canonical_format)
        matrix, owned = sp.csr_matrix(matrix, dtype=np.float64, copy=copy), owned or copy
        matrix.sum_duplicates()
        values = matrix.data
    else:
        if isinstance(counts, (str, bytes)) or counts is None:
            raise bad_argument(name, func, "an (N, V) array-like or scipy.sparse matrix of counts", counts, kind=TypeError)
        try:
            array = np.asarray(counts)
        except Exception as exc:  # pragma: no cover - defensive, numpy's own message kept
            raise bad_argument(name, func, "an (N, V) array-like of counts", counts, kind=TypeError) from exc
        if array.dtype == object or array.dtype.kind not in "biuf":
            raise bad_argument(name, func, "an (N, V) numeric array-like of counts", array, kind=TypeError)
        if array.ndim != 2:
            raise bad_argument(name, func, "two-dimensional (documents x vocabulary)", array)
        values = array.astype(np.float64, copy=False)
        matrix = None
    shape = matrix.shape if matrix is not None else values.shape
    if shape[0] == 0 or shape[1] == 0:
        raise bad_argument(name, func, "non-empty (at least one document and one word)", f"shape {shape}", describe=False)
    explicit_zeros = _check_count_values(values, name, func)
    if matrix is None:
        return sp.csr_matrix(values)
    if explicit_zeros:
        matrix = matrix if owned else matrix.copy()
        matrix.eliminate_zeros()
    return matrix


#: Values checked at a time by :func:`_check_count_values` (bounds its temporaries to a few tens of MB).
_VALUE_BLOCK = 1 << 22


def _check_count_values(values: np.ndarray, name: str, func: str | None) -> int:
    """Refuse non-finite, negative, non-integer or too large counts, block by block; return the number of zeros."""
    flat = values.reshape(-1)
    zeros = 0
    for start in range(0, flat.size, _VALUE_BLOCK):
        block = flat[start : start + _VALUE_BLOCK]
        if not np.all(np.isfinite(block)):
            n_bad = int(np.size(values) - np.count_nonzero(np.isfinite(values)))
            raise bad_argument(name, func, "finite counts", f"{n_bad} NaN or infinite entries", describe=False)
        if np.any(block < 0):
            raise bad_argument(name, func, "non-negative counts", f"minimum {values.min():g}", describe=False)
        fractional = block != np.round(block)
        if np.any(fractional):
            raise bad_argument(name, func, "integer-valued counts", f"the value {block[fractional][0]:g}",
                               describe=False)
        if np.max(block) > _MAX_COUNT:
            raise bad_argument(name, func, f"counts of at most 2**53 = {_MAX_COUNT:.3g} (larger integers are not "
                               "exact in float64, and the third moments multiply three counts)",
                               f"a count of {np.max(values):g}", describe=False)
        zeros += block.size - np.count_nonzero(block)
    return zeros


# Memory budget ------------------------------------------------------------------------------------------------------
def _cgroup_memory() -> int | None:
    """The memory limit of the process's cgroup (v2 ``memory.max``, v1 ``memory.limit_in_bytes``), if any."""
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(name, encoding="ascii") as handle:
                text = handle.read().strip()
        except (OSError, ValueError):
            continue
        if text.isdigit() and int(text) < 2**60:  # "max" or a huge number: no limit
            return int(text)
    return None


def _physical_memory() -> int:
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        physical = 16 * 2**30
    cgroup = _cgroup_memory()
    return physical if cgroup is None else min(physical, cgroup)


def _status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmSize``, ``VmData``) in bytes; 0 where it cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - no /proc (macOS, Windows)
        pass
    return 0


#: The process limits that bound what one allocation can get: (resource name, status field, words).
_PROCESS_LIMITS = (("RLIMIT_AS", "VmSize", "the address-space limit (RLIMIT_AS, ulimit -v)"),
                   ("RLIMIT_DATA", "VmData", "the data-segment limit (RLIMIT_DATA, ulimit -d)"))


def process_headroom() -> tuple[int, str] | None:
    """What the process's soft limits on its address space leave it, in bytes, and which limit binds.

    For each of ``RLIMIT_AS`` and ``RLIMIT_DATA`` that is set (not
    ``RLIM_INFINITY``), the soft limit less what the process already maps
    (``VmSize``, ``VmData`` of ``/proc/self/status``); the smaller of the two.

    Returns
    -------
    tuple of (int, str) or None
        ``(bytes, words)``, e.g. ``(805306368, "the address-space limit
        (RLIMIT_AS, ulimit -v)")``; None when no such limit is set.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    tightest = None
    for limit, field, words in _PROCESS_LIMITS:
        try:
            soft = resource.getrlimit(getattr(resource, limit))[0]
        except (AttributeError, ValueError, OSError):  # pragma: no cover - a platform without this limit
            continue
        if soft == resource.RLIM_INFINITY or soft < 0:
            continue
        headroom = max(soft - _status_bytes(field), 0)
        if tightest is None or headroom < tightest[0]:
            tightest = (headroom, words)
    return tightest


#: The budget set by :func:`set_memory_limit` (None: the environment's, or half of RAM).
_MEMORY_LIMIT = {"bytes": None}

#: Environment variable with a budget in bytes (read when no budget was set in Python; the command line's route).
MEMORY_LIMIT_VARIABLE = "SPECINIT_MEMORY_LIMIT"


def _memory_setting() -> int:
    """The budget as set: :func:`set_memory_limit`, else the environment variable, else half of the memory."""
    if _MEMORY_LIMIT["bytes"] is not None:
        return _MEMORY_LIMIT["bytes"]
    text = os.environ.get(MEMORY_LIMIT_VARIABLE)
    if text is None:
        return _physical_memory() // 2
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2**20:
        raise ValueError(f"The environment variable {MEMORY_LIMIT_VARIABLE} must be a number of bytes >= 1048576; "
                         f"got {text!r} instead.")
    return value


def memory_limit() -> int:
    """The most memory (bytes) one allocation planned by a fit or a reader may take.

    The smaller of the setting and what the process's address-space limits
    leave it. The setting is the budget given to :func:`set_memory_limit`,
    else the environment variable ``SPECINIT_MEMORY_LIMIT`` (bytes) when
    set, else half of the available memory: the physical memory, or the
    cgroup's memory limit when that is lower. The soft limits
    ``RLIMIT_AS`` (``ulimit -v``) and ``RLIMIT_DATA`` (``ulimit -d``), when
    set, cap it at the limit less what the process already maps
    (``VmSize``, ``VmData``), so that a plan the operating system would
    refuse is refused with a message first.

    Returns
    -------
    int
    """
    setting = _memory_setting()
    headroom = process_headroom()
    return setting if headroom is None else min(setting, headroom[0])


def memory_limit_reason(limit: int | None = None) -> str:
    """Words for a message: why the budget is ``limit`` (default :func:`memory_limit`) when a process limit binds.

    Returns
    -------
    str
        ``""`` when the setting decides, else ``" (what the address-space
        limit (RLIMIT_AS, ulimit -v) leaves this process)"``.
    """
    headroom = process_headroom()
    limit = memory_limit() if limit is None else limit
    if headroom is None or headroom[0] > limit + 2**24 or headroom[0] >= _memory_setting():  # 16 MiB: mappings move
        return ""
    return f" (what {headroom[1]} leaves this process)"


def set_memory_limit(n_bytes: int | None) -> int:
    """Set the budget that fits and readers check before allocating; returns the previous one.

    A fit or a reader estimates what it is about to allocate from the
    shapes (``n_symbols``, ``k``, a file's header or largest index) and
    refuses with a ``MemoryError`` naming the argument or file and the size,
    instead of allocating.

    Parameters
    ----------
    n_bytes : int or None
        The new budget in bytes (at least 1 MiB); None restores the default
        (:func:`memory_limit`).

    Returns
    -------
    int
        The previous budget.
    """
    previous = memory_limit()
    _MEMORY_LIMIT["bytes"] = None if n_bytes is None else check_int(n_bytes, "n_bytes", "specinit.set_memory_limit",
                                                                    minimum=2**20)
    return previous


def format_bytes(n_bytes: float) -> str:
    """``n_bytes`` in words, three significant digits (``"6.09 GiB"``, ``"352 bytes"``)."""
    for unit, scale in (("EiB", 2**60), ("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                        ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"


def check_allocation(n_bytes: float, name: str, what: str, func: str | None = None) -> None:
    """Refuse, before allocating, a plan of ``n_bytes`` over :func:`memory_limit`.

    Parameters
    ----------
    n_bytes : float
        The planned allocation (a float: products of shapes may exceed int64).
    name : str
        The argument (or ``"file 'path'"``) that decides the size.
    what : str
        What would be allocated, e.g. ``"the (k, n_symbols) emission matrix"``.
    func : str, optional
        The public function (default: the current entry).

    Raises
    ------
    MemoryError
        The plan exceeds the budget.
    """
    limit = memory_limit()
    if n_bytes > limit:
        reason = memory_limit_reason(limit)
        remedy = ("raise that limit" if reason else
                  f"raise the budget with specinit.set_memory_limit(n_bytes) or the {MEMORY_LIMIT_VARIABLE} "
                  "environment variable (bytes)")
        raise MemoryError(f"The '{name}' argument of {func or current_entry()} asks for about {format_bytes(n_bytes)} "
                          f"({what}), over the memory budget of {format_bytes(limit)}{reason}; pass smaller sizes, or "
                          f"{remedy}.")


# Constraint tables ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A number of type ``kind`` (``int`` or ``float``) in ``[low, high]`` (``open`` ends excluded).

    Parameters
    ----------
    kind : type
        ``int`` (bools refused) or ``float`` (any real; finite).
    low, high : float, optional
        Bounds; ``None`` for none.
    open : str
        ``""`` (closed), ``"low"``, ``"high"`` or ``"both"``: which bounds are excluded.
    none : bool
        Whether ``None`` is accepted.
    """

    kind: type
    low: float | None = None
    high: float | None = None
    open: str = ""
    none: bool = False

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a finite number"
        bounds = []
        if self.low is not None:
            bounds.append(f"{'>' if self.open in ('low', 'both') else '>='} {self.low:g}")
        if self.high is not None:
            bounds.append(f"{'<' if self.open in ('high', 'both') else '<='} {self.high:g}")
        text = what + (" " + " and ".join(bounds) if bounds else "")
        return text + (" or None" if self.none else "")

    def check(self, name: str, value: Any) -> Any:
        if value is None and self.none:
            return None
        integral = isinstance(value, numbers.Integral) and not isinstance(value, bool)
        if self.kind is int and not integral or self.kind is float and (
                isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise bad_argument(name, None, self.describe(), value, kind=TypeError)
        try:
            value = self.kind(value)
        except OverflowError:  # an integer beyond float range
            raise bad_argument(name, None, self.describe(), value) from None
        bad = self.kind is float and not np.isfinite(value)
        if self.low is not None:
            bad |= value <= self.low if self.open in ("low", "both") else value < self.low
        if self.high is not None:
            bad |= value >= self.high if self.open in ("high", "both") else value > self.high
        if bad:
            raise bad_argument(name, None, self.describe(), value)
        return value


@dataclass(frozen=True)
class Options:
    """One of ``values`` (listed in the error)."""

    values: tuple

    def check(self, name: str, value: Any) -> Any:
        return check_choice(value, name, None, self.values)


def check_arguments(table: Mapping[str, Any], values: Mapping[str, Any]) -> dict:
    """Check every ``values[name]`` against ``table[name]`` (an :class:`Interval`, :class:`Options`, or a callable).

    Parameters
    ----------
    table : dict of str -> constraint
        Constraints by argument name; a callable ``(name, value) -> value`` is allowed.
    values : dict of str -> object
        The arguments; names absent from the table pass unchecked.

    Returns
    -------
    dict
        The checked (normalised) values.
    """
    out = dict(values)
    for name, value in values.items():
        constraint = table.get(name)
        if constraint is None:
            continue
        out[name] = constraint.check(name, value) if hasattr(constraint, "check") else constraint(name, value)
    return out
