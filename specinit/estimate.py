"""The result of every fit: parameters keyed by NumPyro site names, the sites' facts, flat diagnostics.

:class:`SpectralEstimate` is what every ``spectral`` and ``refine`` of
:mod:`specinit.models` returns and what the NumPyro and ArviZ boundaries
read: the values of the model's latent sites (constrained, float64, strictly
inside each site's support), the number of components ``k``, the facts of
each site (:class:`Site`: support, component axes, ArviZ dims), flat typed
diagnostics, and any fitted arrays a family reads back (``state``).

Saved estimates are ``.npz`` archives written atomically and read without
pickle, verified against their family's declaration (:meth:`SpectralEstimate.load`);
files written by specinit 0.2 still load.
"""

from __future__ import annotations

import json
import math
import os
import re
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Literal, Mapping, Sequence

import numpy as np

from specinit import _registry
from specinit._files import (FileError, check_max_bytes, check_path, check_target, new_file_beside, npz_members,
                             open_regular, remove_stale_beside, signals_clean_up)
from specinit._validation import StoredArrayError, bad_argument

if TYPE_CHECKING:
    import arviz as az
    import jax
    import xarray as xr
    from numpyro.infer.mcmc import MCMCKernel

    from specinit.warmstart import Laplace

__all__ = ["FORMAT_VERSION", "ModelFacts", "Site", "SpectralEstimate", "check_site_values"]

#: Version of the file layout written by :meth:`SpectralEstimate.save` (0.2 files carry none and read as 1).
FORMAT_VERSION = 2

SUPPORTS = ("simplex", "positive", "real", "observed")

#: Deepest nesting of a saved estimate's metadata that :meth:`SpectralEstimate.load` reads.
MAX_META_DEPTH = 32


@dataclass(frozen=True)
class Site:
    """What a model declares about one of its NumPyro sites.

    Attributes
    ----------
    support : {"simplex", "positive", "real", "observed"}
        ``"simplex"``: the last axis sums to one, every entry > 0 (weights,
        topic rows, transition rows); ``"positive"``: every entry > 0;
        ``"real"``: finite; ``"observed"``: a data site (never a parameter;
        listed for its ArviZ dims).
    axes : tuple of int
        Component (label) axes, counted without chain and draw axes; a site
        whose value all components share has none. Several axes carry the
        same labels (HMM ``transition``: from-state rows, to-state columns).
    dims : tuple of str
        ArviZ dimension names of the site's full shape.
    event_dims : tuple of str
        Event dims ArviZ cannot infer from the plates (``extra_event_dims``
        of ``az.from_numpyro``).
    """

    support: str
    axes: tuple = ()
    dims: tuple = ()
    event_dims: tuple = ()

    def __post_init__(self):
        if self.support not in SUPPORTS:
            raise bad_argument("support", "Site", f"one of {', '.join(map(repr, SUPPORTS))}", self.support)
        object.__setattr__(self, "axes", tuple(int(a) for a in self.axes))
        object.__setattr__(self, "dims", tuple(self.dims))
        object.__setattr__(self, "event_dims", tuple(self.event_dims))

    def to_json(self) -> dict:
        """A JSON-serializable dict (read back by ``Site(**d)``)."""
        return {"support": self.support, "axes": list(self.axes), "dims": list(self.dims),
                "event_dims": list(self.event_dims)}


@dataclass(frozen=True)
class ModelFacts:
    """The generic layers' view of a model's sites (kept for 0.2 code; built from :class:`Site` tables).

    Attributes
    ----------
    component_axes : dict of str -> int or tuple of int
        Component axes of each site with components (an int for one axis).
    match_site : str
        The site whose components are compared to match labels.
    dims : dict of str -> tuple of str
        Dimension names of each site's full shape.
    event_dims : dict of str -> tuple of str
        Event dims that ArviZ cannot infer from the plates.
    """

    component_axes: dict = field(default_factory=dict)
    match_site: str | None = None
    dims: dict = field(default_factory=dict)
    event_dims: dict = field(default_factory=dict)

    @classmethod
    def from_sites(cls, sites: Mapping[str, Site], match_site: str | None) -> "ModelFacts":
        """The facts of a site table."""
        return cls(
            component_axes={n: s.axes[0] if len(s.axes) == 1 else s.axes for n, s in sites.items() if s.axes},
            match_site=match_site,
            dims={n: s.dims for n, s in sites.items() if s.dims},
            event_dims={n: s.event_dims for n, s in sites.items() if s.event_dims},
        )

    def to_json(self) -> dict:
        """A dict of plain JSON values (lists, str, int, None) that :meth:`from_json` reads back.

        Built from the facts alone, so it works whatever the parameters hold.
        """
        def axes(value):
            return int(value) if isinstance(value, (int, np.integer)) else [int(a) for a in value]

        return {
            "component_axes": {str(name): axes(value) for name, value in self.component_axes.items()},
            "match_site": None if self.match_site is None else str(self.match_site),
            "dims": {str(name): [str(d) for d in dims] for name, dims in self.dims.items()},
            "event_dims": {str(name): [str(d) for d in dims] for name, dims in self.event_dims.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping) -> "ModelFacts":
        """The facts :meth:`to_json` wrote (the layout of specinit 0.2 files)."""
        return cls(
            component_axes={k: tuple(v) if isinstance(v, list) else v for k, v in data["component_axes"].items()},
            match_site=data["match_site"],
            dims={k: tuple(v) for k, v in data["dims"].items()},
            event_dims={k: tuple(v) for k, v in data["event_dims"].items()},
        )

    def to_sites(self, params: Mapping) -> dict:
        """A site table (support read off the values: ``"real"``, or ``"positive"`` when all > 0)."""
        names = set(self.dims) | set(self.component_axes) | set(params)
        sites = {}
        for name in sorted(names):
            axes = self.component_axes.get(name, ())
            support = "observed" if name not in params else (
                "positive" if np.all(np.asarray(params[name]) > 0) else "real")
            sites[name] = Site(support, (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes),
                               self.dims.get(name, ()), self.event_dims.get(name, ()))
        return sites


def _site_table(model: str):
    """The site table ``params -> (sites, match_site)`` of the registered family ``model``, or None."""
    family = _registry.lookup(model)
    return None if family is None else family.site_table


def _flat(diagnostics: Mapping, func: str = "SpectralEstimate") -> dict:
    """Diagnostics as flat, typed values (bool, int, float, str, None or a bool/int/float/str array)."""
    if not isinstance(diagnostics, Mapping):
        raise bad_argument("diagnostics", func, "a dict of flat values", diagnostics, kind=TypeError)
    out = {}
    for key, value in dict(diagnostics).items():
        if not isinstance(key, str):
            raise bad_argument("diagnostics", func, "a dict with str keys", f"the key {key!r}",
                               kind=TypeError, describe=False)
        if value is None or isinstance(value, (bool, str)):
            out[key] = value
        elif isinstance(value, (int, np.integer)):
            out[key] = int(value)
        elif isinstance(value, (float, np.floating)):
            out[key] = float(value)
        elif isinstance(value, np.bool_):
            out[key] = bool(value)
        elif isinstance(value, (np.ndarray, list, tuple)):
            array = np.asarray(value)
            if array.dtype.kind not in "biufU" or array.dtype.kind == "c":
                raise bad_argument("diagnostics", func, "flat values: bool, int, float, str, None or "
                                   "arrays of those", f"{key!r} = an array of dtype {array.dtype}", kind=TypeError,
                                   describe=False)
            out[key] = array
        else:
            raise bad_argument("diagnostics", func, "flat values: bool, int, float, str, None or arrays "
                               "of those (nest with 'prefix/key' names)", f"{key!r} = {type(value).__name__}",
                               kind=TypeError, describe=False)
    return out


_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _json_scalar(value):
    """A flat scalar as plain JSON: a non-finite float as ``{"float": "nan" | "inf" | "-inf"}``."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    return value


def _scalar_from_json(value):
    """Inverse of :func:`_json_scalar`."""
    if isinstance(value, dict) and set(value) == {"float"} and value["float"] in _NON_FINITE:
        return _NON_FINITE[value["float"]]
    return value


def check_site_values(params: Mapping, sites: Mapping, k: int | None, argument: str = "estimate",
                      func: str | None = None) -> None:
    """Check parameter values against their sites: finite, inside the support, ``k`` entries along component axes.

    Parameters
    ----------
    params : dict of str -> ndarray
    sites : dict of str -> Site
        Parameters without a site are checked for finiteness only.
    k : int or None
        Number of components (None: component axes unchecked).
    argument : str
        The argument named in the error.
    func : str, optional
        The public function named in the error (default: the current entry).

    Raises
    ------
    ValueError
        Non-finite values, values outside a site's support, wrong shapes.
    """
    for name, value in params.items():
        value = np.asarray(value)
        if not np.all(np.isfinite(value)):
            raise bad_argument(argument, func, "finite values", f"non-finite entries in {name!r}", describe=False)
        site = sites.get(name)
        if site is None:
            continue
        if site.support in ("simplex", "positive") and np.any(value <= 0):
            raise bad_argument(argument, func, f"values > 0 for the {site.support} site {name!r}",
                               f"minimum {value.min():g}", describe=False)
        worst = float(np.max(np.abs(value.sum(axis=-1) - 1.0))) if site.support == "simplex" and value.ndim else 0.0
        if not worst <= 1e-6:
            raise bad_argument(argument, func, f"rows of {name!r} summing to one (a simplex site)",
                               f"a row sum off by {worst:.3g}", describe=False)
        for axis in site.axes if k is not None else ():
            if axis >= value.ndim or value.shape[axis] != k:
                raise bad_argument(argument, func, f"{name!r} with k = {k} entries along its component axis {axis}",
                                   f"shape {value.shape}", describe=False)


@dataclass
class SpectralEstimate:
    """Method-of-moments (or refined) estimate of a specinit model.

    Parameters
    ----------
    model : str
        The model name (``"lda"``, ``"single_topic"``, ``"hmm"``, ...).
    params : dict of str -> array-like
        Constrained values keyed by the model's NumPyro site names.
    diagnostics : dict, optional
        Flat diagnostics: str keys, values bool, int, float, str, None or
        arrays of those; a refinement adds ``"refine/..."`` keys.
    vocabulary : sequence of str, optional
        Names of the observation dimension (words).
    facts : ModelFacts, optional
        0.2-style site facts, used when ``model`` is not a registered family
        (``sites`` is preferred).
    k : int, optional
        Number of components; default: read off the match site's first
        component axis.
    sites : dict of str -> Site, optional
        The sites' supports, component axes and dims; default: the table
        registered for ``model`` (every specinit family registers one).
    match_site : str, optional
        The site that drives label matching (default: the registered one).
    state : dict of str -> array, optional
        Fitted arrays a family reads back (kernel densities), saved with the estimate.

    Attributes
    ----------
    params, diagnostics, vocabulary, k, sites, match_site, state
        As above (params as float64 arrays).

    Raises
    ------
    ValueError
        A parameter that is not finite or outside its site's support, or a
        component axis whose length is not ``k``.
    TypeError
        A ``model`` that is not a str, nested or non-numeric diagnostics.

    Notes
    -----
    The components are ordered by decreasing tensor eigenvalue; their order
    (the labels) is otherwise arbitrary, as for any mixture. Posterior draws
    are aligned to these labels by :func:`specinit.align.align_draws`, which
    reads the component axes from :attr:`sites`.
    """

    model: str
    params: dict[str, np.ndarray]
    diagnostics: dict[str, Any] = field(default_factory=dict)
    vocabulary: tuple | None = None
    facts: ModelFacts | None = field(default=None, repr=False)
    k: int | None = field(default=None, kw_only=True)
    sites: dict | None = field(default=None, kw_only=True, repr=False)
    match_site: str | None = field(default=None, kw_only=True)
    state: dict = field(default_factory=dict, kw_only=True, repr=False)

    def __post_init__(self):
        if not isinstance(self.model, str):
            raise bad_argument("model", "SpectralEstimate", "a model name (str)", self.model, kind=TypeError)
        if not isinstance(self.params, Mapping):
            raise bad_argument("params", "SpectralEstimate", "a dict of site name -> array", self.params, kind=TypeError)
        self.params = {str(name): np.asarray(value, dtype=np.float64) for name, value in self.params.items()}
        self.diagnostics = _flat(self.diagnostics or {})
        self.state = {str(name): np.asarray(value) for name, value in (self.state or {}).items()}
        if self.vocabulary is not None:
            self.vocabulary = tuple(str(w) for w in self.vocabulary)
        if self.sites is None:
            if _site_table(self.model) is not None:
                self.sites, match = _site_table(self.model)(self.params)
            elif self.facts is not None:
                self.sites, match = self.facts.to_sites(self.params), self.facts.match_site
            else:
                self.sites, match = {}, None
            self.match_site = self.match_site or match
        self.sites = dict(self.sites)
        axis = None if self.vocabulary is None else _vocabulary_axis(self.params, self.sites)
        if axis is not None and len(self.vocabulary) != axis[2]:
            name, dim, size = axis
            raise bad_argument("vocabulary", None, f"{size} words (the axis {dim!r} of {name!r})",
                               f"{len(self.vocabulary)} words", describe=False)
        self.facts = ModelFacts.from_sites(self.sites, self.match_site)
        if self.k is None:
            site = self.sites.get(self.match_site)
            if site is None or not site.axes or self.match_site not in self.params:
                raise bad_argument("k", "SpectralEstimate", "given when the model's sites are unknown", None)
            self.k = int(self.params[self.match_site].shape[site.axes[0]])
        self.k = int(self.k)
        self.check_values("params", "SpectralEstimate")

    def check_values(self, argument: str = "estimate", func: str | None = None) -> None:
        """Check every parameter against its site (:func:`check_site_values`).

        Run when the estimate is built, and again by the NumPyro hand-off
        (an estimate's arrays can be changed in place after it is built).

        Parameters
        ----------
        argument : str
            The argument named in the error.
        func : str, optional
            The public function named in the error (default: the current entry).
        """
        check_site_values(self.params, self.sites, self.k, argument, func)

    # NumPyro hand-off ---------------------------------------------------------------------------
    def init_strategy(self, sites: Sequence[str] | Mapping[str, object] | None = None, *,
                      fallback: Collection[str] = ()) -> Callable[..., Any]:
        """An init strategy with these (constrained) values; see :func:`specinit.warmstart.init_strategy`."""
        from specinit.warmstart import init_strategy

        return init_strategy(self, sites, fallback=fallback)

    def init_params(self, model: Callable[..., Any], num_chains: int, key: jax.Array, *,
                    spread: float | Literal["laplace"] | Laplace = 0.0,
                    sites: Sequence[str] | Mapping[str, object] | None = None,
                    fallback: Collection[str] = (), model_args: Sequence[Any] = (),
                    model_kwargs: Mapping[str, Any] | None = None, kernel: MCMCKernel | None = None) -> dict[str, Any]:
        """Per-chain UNCONSTRAINED initial values; see :func:`specinit.warmstart.init_params`."""
        from specinit.warmstart import init_params

        return init_params(self, model, num_chains, key, spread=spread, sites=sites, fallback=fallback,
                           model_args=model_args, model_kwargs=model_kwargs, kernel=kernel)

    def inverse_mass_matrix(self, model: Callable[..., Any], *,
                            sites: Sequence[str] | Mapping[str, object] | None = None, fallback: Collection[str] = (),
                            model_args: Sequence[Any] = (), model_kwargs: Mapping[str, Any] | None = None,
                            over: Collection[str] | None = None, dense: bool | None = None, max_variance: float = 1.0,
                            coupled: bool = False) -> np.ndarray:
        """An initial inverse mass matrix for NUTS; see :func:`specinit.warmstart.inverse_mass_matrix`."""
        from specinit.warmstart import inverse_mass_matrix

        return inverse_mass_matrix(self, model, sites=sites, fallback=fallback, model_args=model_args,
                                   model_kwargs=model_kwargs, over=over, dense=dense, max_variance=max_variance,
                                   coupled=coupled)

    def condition(self, model: Callable[..., Any],
                  sites: Sequence[str] | Mapping[str, object] | None = None) -> Callable[..., Any]:
        """The model with these values fixed (a point estimate); see :func:`specinit.warmstart.condition`."""
        from specinit.warmstart import condition

        return condition(self, model, sites=sites)

    def to_inference_data(self) -> az.InferenceData | xr.DataTree:
        """The estimate as an ArviZ object with a single draw (``InferenceData`` under ArviZ 0.x, ``DataTree`` 1.x).

        See :mod:`specinit.posterior`.
        """
        from specinit.posterior import estimate_to_inference_data

        return estimate_to_inference_data(self)

    # persistence ----------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the estimate to an ``.npz`` file that :meth:`load` reads back exactly.

        The file is written to a temporary file beside ``path``, flushed to
        disk and renamed over ``path``: an existing file at ``path`` is
        replaced whole or left untouched, never truncated. A symbolic link
        is followed (the file it points to is replaced, the link kept); a
        target that is not a regular file (a FIFO, a device, a directory) is
        refused and left as it is. The temporary file never outlives the
        save: it is removed when the save fails or is interrupted by SIGINT
        or SIGTERM (SIGTERM then ends the process as it would have), and one
        left by a process killed outright is removed by the next save to the
        same ``path``. The new file's mode follows the umask as NumPy's do (an
        existing file keeps its mode). The metadata records every array's
        shape and dtype, which :meth:`load` checks before inflating them.
        Diagnostics are checked again (they may have changed since the
        estimate was built): numpy scalars and lists become plain values,
        non-finite floats are stored as JSON-safe markers that load back as
        the same floats.

        Parameters
        ----------
        path : str or os.PathLike
            Target file.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        ValueError
            The target exists and is not a regular file, or a parameter is
            not finite or outside its site's support.
        TypeError
            A diagnostic that cannot be stored (a set, a callable, an object
            array, ...); the message names its key.
        OSError
            The directory is missing or not writable, or the disk is full
            (the message names the file; nothing is left behind).
        """
        func = "SpectralEstimate.save"
        path = check_target(path, "path", func)
        target = Path(os.path.realpath(path)) if path.is_symlink() else path
        params = {name: np.asarray(value, dtype=np.float64) for name, value in self.params.items()}
        check_site_values(params, self.sites, self.k, "self", func)
        arrays = {f"param/{k}": v for k, v in params.items()}
        arrays.update({f"state/{k}": np.asarray(v) for k, v in self.state.items()})
        scalars = {}
        for key, value in _flat(self.diagnostics, func).items():
            if isinstance(value, np.ndarray):
                arrays[f"diag/{key}"] = value
            else:
                scalars[key] = _json_scalar(value)
        for name in arrays:
            if not _plain_member(name):
                raise bad_argument("self", func, "an estimate whose site, state and array diagnostic names are plain "
                                   "(identifiers for sites; letters, digits and '_.+-' between '/' otherwise)",
                                   f"the name {name.split('/', 1)[1]!r}", describe=False)
        meta = {
            "format": FORMAT_VERSION,
            "model": self.model,
            "k": self.k,
            "match_site": self.match_site,
            "sites": {name: site.to_json() for name, site in self.sites.items()},
            "vocabulary": list(self.vocabulary) if self.vocabulary else None,
            "diagnostics": scalars,
            "arrays": {name: {"shape": list(value.shape), "dtype": value.dtype.str} for name, value in arrays.items()},
        }
        text = json.dumps(meta, allow_nan=False)
        remove_stale_beside(target)
        with signals_clean_up():
            fd, tmp = new_file_beside(target)
            try:
                with os.fdopen(fd, "wb") as handle:
                    np.savez_compressed(handle, meta=np.array(text), **arrays)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, target)
            except BaseException as exc:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                if isinstance(exc, OSError):
                    raise OSError(exc.errno, f"could not save the estimate to {str(path)!r}: "
                                  f"{exc.strerror or exc}") from exc
                raise
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_bytes: int | None = None) -> SpectralEstimate:
        """Read an estimate written by :meth:`save` (this version or specinit 0.2).

        Only a regular file is opened (a FIFO, device or directory is refused
        before). Every array's size is read from its member header and
        checked against the metadata's record and against ``max_bytes``
        before any array is inflated.

        The file is verified, not trusted: the family it names must be a
        specinit family, and its sites (names, supports, component axes,
        dims) are the family's own declaration, which the file's metadata
        must agree with; every parameter has the declared number of axes,
        ``k`` entries along its component axes, axes of one name of one
        length, and values inside its support; the vocabulary has one word
        per column of the observation axis; the match site is a site with
        components; member names are plain (``param/<site>``,
        ``state/...``, ``diag/...``); the stored online state is numeric,
        finite and passes the family's check of it (the moment summary
        rebuilt with every array checked, the eigensolver's start block, the
        seeds) before anything uses it. Files of format 1 (specinit 0.2,
        which recorded no format) and 2 are read.

        Parameters
        ----------
        path : str or os.PathLike
            A file written by :meth:`save`.
        max_bytes : int, optional
            Memory budget of the arrays together (default
            :func:`specinit.memory_limit`).

        Returns
        -------
        SpectralEstimate

        Raises
        ------
        FileNotFoundError
            No such file.
        ValueError
            The file is not a regular file, not a specinit estimate, is
            truncated or corrupt, has metadata nested deeper than
            :data:`MAX_META_DEPTH`, holds an array whose size disagrees with
            its header or the metadata or exceeds ``max_bytes``, fails one
            of the checks above, or was written by a newer specinit (or
            records no valid format); the message names the file and the
            member (``param/beta``, ``state/moments/m1_sum``, or the
            metadata field).
        TypeError
            If ``path`` is not a path.
        """
        func = "SpectralEstimate.load"
        path = check_path(path, "path", func)
        max_bytes = check_max_bytes(max_bytes, func)
        where = repr(str(path))
        with open_regular(path, "path", func) as handle:  # FileNotFoundError names the file
            meta, arrays = _read_archive(handle, where, max_bytes, func)
        if not isinstance(meta, dict) or "model" not in meta or "diagnostics" not in meta:
            raise ValueError(f"{where} is not a specinit estimate (its metadata has no 'model' and 'diagnostics')")
        version = meta.get("format", 1)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValueError(f"{where}, metadata 'format': {version!r} is not a file format version (this release "
                             f"reads formats 1 to {FORMAT_VERSION})")
        if version > FORMAT_VERSION:
            raise ValueError(f"{where} was written by a newer specinit (file format {version}; this version reads "
                             f"formats up to {FORMAT_VERSION}): upgrade specinit to load it")

        def group(prefix):
            return {name.split("/", 1)[1]: value for name, value in arrays.items() if name.startswith(prefix)}

        params, state = group("param/"), group("state/")
        model = meta["model"]
        table = _site_table(model) if isinstance(model, str) else None
        if table is None:
            raise ValueError(f"{where}, metadata 'model': {model!r} is not a specinit family (registered: "
                             f"{', '.join(_registry.names())})")
        try:
            diagnostics = dict(meta["diagnostics"])
            if version == 1:
                diagnostics.update(group("diag/"))
                diagnostics = _flatten_legacy(diagnostics)
                facts = meta.get("facts")
                recorded, match = None, facts.get("match_site") if isinstance(facts, dict) else None
            else:
                diagnostics = {key: _scalar_from_json(value) for key, value in diagnostics.items()}
                diagnostics.update(group("diag/"))
                recorded, match = meta["sites"], meta["match_site"]
            sites, match, k = _verified_sites(model, table, params, meta.get("k"), recorded, match, where)
            _check_vocabulary(meta.get("vocabulary"), params, sites, where)
            _check_state_arrays(state, where)
            estimate = cls(model=model, params=params, diagnostics=diagnostics, vocabulary=meta.get("vocabulary"),
                           k=k, sites=sites, match_site=match, state=state)
        except FileError:
            raise
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"{where} is not a valid specinit estimate ({type(exc).__name__}: {exc})") from None
        except ValueError as exc:
            raise ValueError(f"{where} holds an invalid estimate: {exc}") from None
        _check_family_state(estimate, where)
        return estimate


def _site_text(site: Site) -> str:
    return f"support {site.support!r}, component axes {site.axes}, dims {site.dims}, event dims {site.event_dims}"


def _verified_sites(model: str, table: Callable, params: dict, k, recorded, match, where: str) -> tuple:
    """``(sites, match_site, k)`` of a saved estimate from its family's declaration, each parameter checked against it.

    ``recorded`` (the file's own site table, None for 0.2 files) and ``match`` (its match site, None for the
    family's) must agree with the declaration; every latent site the family requires must be present, with the
    number of axes its dims declare, axes of one name of one length, ``k`` entries along component axes, values in
    its support.
    """
    try:
        sites, default = table(params)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise FileError(f"{where}: its parameters {sorted(params)} are not those of the family {model!r} "
                        f"({type(exc).__name__}: {exc})") from None
    if recorded is not None:
        if not isinstance(recorded, dict):
            raise FileError(f"{where}, metadata 'sites': not a table of sites ({type(recorded).__name__})")
        for name, entry in recorded.items():
            if name not in sites:
                raise FileError(f"{where}, metadata 'sites/{name}': not a site of the family {model!r} (its sites: "
                                f"{', '.join(sites)})")
            try:
                theirs = Site(**entry)
            except (TypeError, ValueError) as exc:
                raise FileError(f"{where}, metadata 'sites/{name}': not a site declaration ({exc})") from None
            if theirs != sites[name]:
                raise FileError(f"{where}, metadata 'sites/{name}': declares {_site_text(theirs)} where the family "
                                f"{model!r} declares {_site_text(sites[name])}")
    latent = [name for name, site in sites.items() if site.support != "observed"]
    optional = _registry.lookup(model).optional_sites
    for name in params:
        if name not in latent:
            raise FileError(f"{where}, member 'param/{name}': not a latent site of the family {model!r} (its latent "
                            f"sites: {', '.join(latent)})")
    for name in latent:
        if name not in params and name not in optional:
            raise FileError(f"{where}, member 'param/{name}': missing (the family {model!r} requires it)")
    with_components = [name for name in latent if sites[name].axes and name in params]
    match = default if match is None else match
    if match not in with_components:
        raise FileError(f"{where}, metadata 'match_site': {match!r} is not one of the family {model!r}'s sites "
                        f"with components ({', '.join(with_components)})")
    if k is None:
        k = params[match].shape[sites[match].axes[0]] if params[match].ndim > sites[match].axes[0] else 0
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise FileError(f"{where}, metadata 'k': {k!r} is not a number of components (an int >= 1)")
    lengths = {}
    for name, value in params.items():
        dims = sites[name].dims
        if dims and value.ndim != len(dims):
            raise FileError(f"{where}, member 'param/{name}': {value.ndim} axes (shape {value.shape}) where the family "
                            f"{model!r} declares {len(dims)} {dims}")
        for dim, size in zip(dims, value.shape):
            first = lengths.setdefault(dim, (size, name))
            if first[0] != size:
                raise FileError(f"{where}, member 'param/{name}': its axis {dim!r} has length {size} where "
                                f"'param/{first[1]}' has {first[0]}")
        try:
            check_site_values({name: value}, sites, int(k), "path", "SpectralEstimate.load")
        except ValueError as exc:
            raise FileError(f"{where}, member 'param/{name}': {exc}") from None
    return sites, match, int(k)


def _vocabulary_axis(params: dict, sites: dict) -> tuple[str, str, int] | None:
    """The observation axis a vocabulary names (``"word"``, else the last dim of an observed site): the first
    parameter that carries it, the axis and its size; None when no parameter carries one."""
    axes = ["word"] + [site.dims[-1] for site in sites.values() if site.support == "observed" and site.dims]
    for dim in axes:
        for name, value in params.items():
            if name in sites and dim in sites[name].dims:
                return name, dim, value.shape[sites[name].dims.index(dim)]
    return None


def _check_vocabulary(vocabulary, params: dict, sites: dict, where: str) -> None:
    """A saved vocabulary is a list of str with one word per column of the observation axis."""
    if vocabulary is None:
        return
    if not isinstance(vocabulary, list) or not all(isinstance(word, str) for word in vocabulary):
        raise FileError(f"{where}, metadata 'vocabulary': not a list of words")
    axis = _vocabulary_axis(params, sites)
    if axis is not None and len(vocabulary) != axis[2]:
        name, dim, size = axis
        raise FileError(f"{where}, metadata 'vocabulary': {len(vocabulary)} words for V = {size} (the axis "
                        f"{dim!r} of 'param/{name}')")


def _check_state_arrays(state: dict, where: str) -> None:
    """Every stored state array is numeric and finite."""
    for name, value in state.items():
        if value.dtype.kind not in "biuf":
            raise FileError(f"{where}, member 'state/{name}': not a numeric array (dtype {value.dtype})")
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise FileError(f"{where}, member 'state/{name}': non-finite entries")


def _check_family_state(estimate: "SpectralEstimate", where: str) -> None:
    """The family's own check of the fitted arrays an estimate keeps, as an error naming the file and member."""
    if not estimate.state:
        return
    try:
        _registry.lookup(estimate.model).check_state(estimate)
    except StoredArrayError as exc:
        raise FileError(f"{where}, member 'state/{exc.key}': {exc.problem}") from None
    except ValueError as exc:
        raise FileError(f"{where}, members 'state/*': the stored online state is damaged: {exc}") from None


#: Groups of a saved estimate's array members (``<group>/<name>``).
MEMBER_GROUPS = ("param", "state", "diag")

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


def _plain_member(name: str) -> bool:
    """Whether ``name`` is an array member :meth:`SpectralEstimate.save` writes: ``param/<identifier>``, or
    ``state/...`` and ``diag/...`` with plain parts (letters, digits, ``_.+-``, never starting with a dot)."""
    group, _, rest = name.partition("/")
    if group == "param":
        return rest.isidentifier()
    return group in MEMBER_GROUPS and all(_PLAIN.fullmatch(part) for part in rest.split("/"))


def _depth(value) -> int:
    """Nesting depth of a JSON value (0 for a scalar), computed without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _parse_meta(text: str, where: str):
    """The metadata JSON, refusing invalid JSON and nesting deeper than :data:`MAX_META_DEPTH`."""
    too_deep = FileError(f"{where} is not a specinit estimate: its metadata is nested deeper than {MAX_META_DEPTH} "
                         "levels")
    try:
        meta = json.loads(text)
    except RecursionError:
        raise too_deep from None
    except json.JSONDecodeError as exc:
        raise FileError(f"{where} is corrupt: its metadata is not valid JSON ({exc})") from None
    if _depth(meta) > MAX_META_DEPTH:
        raise too_deep
    return meta


def _check_declared(meta, members: dict, where: str) -> None:
    """Every array member has the shape and dtype the metadata records (files that record them)."""
    declared = meta.get("arrays") if isinstance(meta, dict) else None
    if declared is None:
        return
    if not isinstance(declared, dict):
        raise FileError(f"{where} is corrupt: its metadata's 'arrays' is not a table of shapes")
    for name, (shape, dtype) in members.items():
        if name == "meta":
            continue
        entry = declared.get(name)
        if not isinstance(entry, dict) or entry.get("shape") != list(shape) or entry.get("dtype") != dtype.str:
            raise FileError(f"{where}, member {name!r}: holds shape {shape} of {dtype.str} but the metadata records "
                            f"{entry!r}")
    missing = sorted(set(declared) - set(members))
    if missing:
        raise FileError(f"{where} is truncated or corrupt: the metadata records arrays {missing} that it lacks")


def _read_archive(handle, where: str, max_bytes: int, func: str) -> tuple[object, dict]:
    """``(meta, arrays)`` of an estimate archive, every failure as a ValueError naming the file.

    The member headers are checked (sizes, the budget, the metadata's record of shapes) before any array
    but the metadata is inflated.
    """
    members = npz_members(handle, where, max_bytes, func)
    if "meta" not in members:
        raise ValueError(f"{where} is not a specinit estimate (an archive without its 'meta' entry)")
    for name in members:
        if name != "meta" and not _plain_member(name):
            raise FileError(f"{where}, member {name!r}: not a member of a specinit estimate ('param/<site>', "
                            "'state/<name>' or 'diag/<key>', plain names separated by '/')")
    try:
        with np.load(handle, allow_pickle=False) as data:
            meta = _parse_meta(str(data["meta"]), where)
            _check_declared(meta, members, where)
            return meta, {name: data[name] for name in members if name != "meta"}
    except FileError:
        raise
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError, ValueError, KeyError) as exc:
        raise ValueError(f"{where} is not a readable specinit estimate (truncated, corrupt or another kind of "
                         f"file: {type(exc).__name__}: {exc})") from None


def _flatten_legacy(diagnostics: dict) -> dict:
    """0.2 diagnostics with JSON-nested values flattened to ``outer/inner`` keys."""
    out = {}
    for key, value in diagnostics.items():
        if isinstance(value, dict):
            out.update({f"{key}/{inner}": v for inner, v in _flatten_legacy(value).items()})
        elif isinstance(value, list):
            out[key] = np.asarray(value)
        else:
            out[key] = value
    return out
