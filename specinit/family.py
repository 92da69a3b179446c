"""One model family: what a model declares, and the spectral skeleton written once for all of them.

Every model of :mod:`specinit.models` is a :class:`Family` subclass plus its
NumPyro program. A family declares what differs between models -- its
NumPyro sites (:class:`~specinit.estimate.Site`: support, component axes,
ArviZ dims), its options, how data become moments, the exact moments of
given parameters, how whitened components become parameters, its
likelihood and its M-step -- and inherits what is the same: validation of
the common options, the choice of backend, the fit with its fallback and
advice, projection into the supports, the estimate, refinement, scoring and
prediction.

The skeleton of :meth:`Family.spectral`::

    data --moments()--> moments --check_k--> recover() --project--> complete() --> SpectralEstimate
                                     recover() = strategy() if the family names one,
                                                 else engine fit (exchangeable | multiview) + unwhiten()

The contract. A family with a ``name`` is registered when its class is
defined (:func:`registered`, :func:`family`); a class without a ``name`` of
its own is an abstract base (``TopicFamily``). It must implement
:data:`REQUIRED_HOOKS` -- ``moments``, ``population_moments``, and
``unwhiten`` (or ``recover``) -- or its definition raises a TypeError
naming what is missing. Moments are the objects of
:mod:`specinit.engine.protocols`. Every other hook has a default: declared
options (:attr:`Family.options`, checked once at the entry), the limit on
``k`` (:meth:`Family.max_components`), scoring and EM
(:meth:`Family.component_log_prob`, :meth:`Family.m_step`, ...), the
scikit-learn face (:meth:`Family.estimator_face`).

Which hook to override: the narrowest one that holds the difference.
Override :meth:`Family.unwhiten` when the engine's fit is right and only
its translation into parameters is the family's; :meth:`Family.fit_input`
or :meth:`Family.kind_of` to feed the engine another view of the moments;
:meth:`Family.complete` for data-dependent additions after recovery;
:meth:`Family.decompose_defaults` for the decomposition's settings its
moments call for. When the recovery is not an engine fit followed by an unwhitening (anchor
words, a grid of fits, the lifted moments of a mixture with fewer features
than components), :meth:`Family.strategy` names it: the skeleton calls it in
place of the engine fit and keeps everything around it (validation, the
limit on ``k``, projection, warnings, :meth:`Family.complete`, the
estimate). Never override :meth:`Family.spectral`, whose validation,
choice of ``k`` and estimate every family shares.

Examples
--------
A complete family -- a mixture of ``k`` dice, each observation three
throws of one die drawn with probabilities ``weights`` (three conditionally
independent views of the die) -- is written as a new model would be:

>>> import numpy as np
>>> import jax.numpy as jnp
>>> from specinit.engine.sequences import one_hot
>>> from specinit.engine.views import ViewMoments, multiview_population
>>> from specinit.estimate import Site
>>> from specinit.family import Family
>>> class ThreeThrows(Family):
...     name = "three_throws_example"
...     sites = {"weights": Site("simplex", (0,), ("dice",)), "faces": Site("simplex", (0,), ("dice", "face"))}
...     match_site = "faces"
...     fit_kind = "multiview"
...     def moments(self, throws, *, k, backend):
...         return ViewMoments([one_hot(np.asarray(throws)[:, j], 6) for j in range(3)], backend=backend)
...     def population_moments(self, params):
...         return multiview_population([params["faces"]] * 3, params["weights"])
...     def unwhiten(self, fit, moments, k, floor, **options):
...         return {"weights": fit.weights, "faces": fit.means[0]}, {}, {}
...     def component_log_prob(self, params, throws):
...         return jnp.log(jnp.asarray(params["faces"])).T[throws].sum(axis=1)
>>> family = ThreeThrows()
>>> truth = {"weights": np.array([0.7, 0.3]),
...          "faces": np.array([[0.5, 0.1, 0.1, 0.1, 0.1, 0.1], [0.05, 0.05, 0.1, 0.1, 0.2, 0.5]])}
>>> exact = family.spectral_from_moments(family.population_moments(truth), 2)
>>> order = np.argsort(-exact.params["weights"])
>>> bool(np.allclose(exact.params["faces"][order], truth["faces"], atol=1e-8))
True
>>> rng = np.random.default_rng(0)
>>> dice = rng.choice(2, size=50_000, p=truth["weights"])
>>> throws = np.stack([[rng.choice(6, p=truth["faces"][d]) for _ in range(3)] for d in dice[:20_000]])
>>> est = family.spectral(throws, 2, seed=0)
>>> est.k, est.model, sorted(est.sites)
(2, 'three_throws_example', ['faces', 'weights'])
>>> order = np.argsort(-est.params["weights"])
>>> bool(np.abs(est.params["faces"][order] - truth["faces"]).max() < 0.05)
True
>>> resp, labels = family.predict(throws[:3], est)
>>> resp.shape, family.log_likelihood(throws[:3], est).shape
((3, 2), (3,))
"""

from __future__ import annotations

import inspect
import sys
import warnings
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from specinit import _registry
from specinit._validation import (
    Interval,
    Options,
    StoredArrayError,
    as_generator,
    bad_argument,
    check_arguments,
    current_entry,
    warn,
)
from specinit.align import match_components
from specinit.engine.decompose import METHODS
from specinit.engine.exchangeable import ExchangeableFit, fit_exchangeable
from specinit.engine.protocols import Moments, MultiViewMoments
from specinit.engine.support import project
from specinit.engine.views import MultiViewFit, fit_multiview, pair_spectrum
from specinit.engine.whitening import IndefiniteMomentError, negative_spectrum, signed_spectrum
from specinit.estimate import Site, SpectralEstimate
from specinit.faces import Face, Param, R, face

if TYPE_CHECKING:
    from specinit.engine.backends import Passes
    from specinit.refine import RefineResult

__all__ = ["COMMON_OPTIONS", "DEFERRED_ESTIMATE", "Family", "MOMENTS_STATE", "NEGATIVE_PROBE", "NOISE_FACTOR",
           "REQUIRED_HOOKS", "SCORED_ESTIMATE", "Stream", "UPDATED_ESTIMATE", "family", "k_param", "noise_edge",
           "registered", "site_values", "stored_moments"]

#: A positive eigenvalue of the second moment counts as signal when it exceeds this multiple of the negative
#: eigenvalues' edge (the sampling noise of a positive semi-definite moment, :meth:`Family.spectrum_k`).
NOISE_FACTOR = 2.0

#: The hooks a family must implement (each entry: one of these), checked when its class is defined.
REQUIRED_HOOKS = (("moments",), ("population_moments",), ("unwhiten", "recover"))

#: Negative eigenvalues probed for the noise edge of the families that whiten with the positive eigenspace.
NEGATIVE_PROBE = 8


def noise_edge(magnitudes: ArrayLike) -> float:
    """The edge of the negative eigenvalues' bulk: the largest magnitude that is not an isolated spike.

    A few magnitudes far above the others are spikes -- directions in which the estimator fluctuates far more
    than in the rest (on real text a few short documents with a repeated word dominate the per-document pair
    estimator there) -- and do not mask positive eigenvalues in other directions. The largest drop between
    consecutive magnitudes among the first half of them, when it is more than a factor of two, separates the
    spikes from the bulk; otherwise the largest magnitude is the edge.

    Parameters
    ----------
    magnitudes : array-like
        Magnitudes of the most negative eigenvalues, descending (possibly empty).

    Returns
    -------
    float
        0 when there is none.
    """
    values = np.asarray(magnitudes, dtype=np.float64)
    if values.size < 2:
        return float(values[0]) if values.size else 0.0
    half = max(values.size // 2, 1)
    ratios = values[:half] / np.maximum(values[1: half + 1], np.finfo(float).tiny)
    drop = int(np.argmax(ratios))
    return float(values[drop + 1] if ratios[drop] > 2.0 else values[0])


@dataclass(frozen=True)
class Stream:
    """Batches an online fit has taken in without recovering the parameters (:meth:`Family.defer`).

    The recovery, which costs about as much as a fit however small the batch, waits until the parameters are
    needed: the family's ``update(data, stream)`` merges ``data`` and recovers from everything, as if the same
    batches had been given one by one to ``update``; the scikit-learn faces' ``partial_fit`` keeps one between
    calls.

    Attributes
    ----------
    previous : SpectralEstimate or None
        The last recovered fit (its labels, and for topics its eigenspace, carry over); None before the first
        recovery.
    merged : object
        The family's summary (:attr:`Family.summary`) of every batch taken in, ``previous``'s stored one included.
    n_batches : int
        Batches in ``merged``.
    k : int
        Components.
    """

    previous: Any
    merged: Any
    n_batches: int
    k: int


def k_param(what: str = "Number of components.", score: str = "a score") -> Param:
    """The declaration of ``k`` for a family: what it counts, then the one rule of ``k="auto"``.

    Parameters
    ----------
    what : str
        The first sentences: what k counts and its range.
    score : str
        What picks among the candidate k (``"the held-out score"`` for the topic families).

    Returns
    -------
    Param
    """
    return Param("int or 'auto'", f"{what} ``\"auto\"``: chosen from the data (:meth:`specinit.family.Family."
                 f"choose_k`: the spectrum of the second moment bounds it, {score} after a cheap refine picks it; "
                 f"evidence in ``diagnostics[\"k_auto/*\"]``).", constraint=Interval(int, 1))


#: The arguments every ``spectral`` takes, declared once (:class:`~specinit.faces.Param`); ``k``, ``approach``,
#: ``floor`` and ``method`` are checked once at the entry, a family may re-declare one to document it its way.
COMMON_OPTIONS = {
    "k": k_param(),
    "method": Param("{'tpm', 'svtd', 'eca', 'als'}", "Tensor decomposition (:mod:`specinit.engine.decompose`).",
                    "tpm"),
    "approach": Param("{'auto', 'symmetric', 'jennrich'}",
                      "Multi-view fits: ``\"symmetric\"`` whitens the symmetrized second moment (raises "
                      ":class:`specinit.engine.whitening.IndefiniteMomentError` when it is indefinite, as on real "
                      "data that are not an exact k-class mixture); ``\"jennrich\"``: observable operators (no "
                      "square root of a moment); ``\"auto\"`` (default): ``\"symmetric\"``, falling back to "
                      "``\"jennrich\"`` with a RuntimeWarning, recorded in ``diagnostics[\"fallback\"]`` "
                      "(:func:`specinit.engine.views.fit_multiview`).",
                      "auto", Options(("auto", "symmetric", "jennrich"))),
    "seed": Param("int or numpy.random.Generator", "Randomness of the whitening and the decomposition.", 0),
    "floor": Param("float", "Probabilities are floored at ``floor / d`` (d entries), so every value lies strictly "
                   "inside its support.", 1e-3, Interval(float, 0.0, 1.0, open="both")),
    "decompose_options": Param("dict, optional", "Keyword arguments of the tensor decomposition (e.g. "
                               "``{\"n_restarts\": 20}`` for ``method=\"tpm\"``); unknown keys raise.", None),
    "backend": Param("{'numpy', 'numba', 'jax', 'dask'} or None",
                     "Where the moment passes run (:mod:`specinit.engine.backends`); ``None``: Dask for a "
                     "``dask.array`` input, JAX when an accelerator is present, NumPy otherwise.", None),
    "vocabulary": Param("sequence of str, optional", "Kept with the estimate.", None),
}

#: The fit that a family's ``predict`` and ``log_likelihood`` score data under, declared once.
SCORED_ESTIMATE = Param("SpectralEstimate or dict", "A fit of this family (from ``spectral`` or ``refine``), or a "
                        "dict of its site values.")

#: The ``Returns`` section of a ``predict`` face whose docstring is its summary alone (:meth:`Family.predict_face`).
_PREDICT_RETURNS = "Returns\n-------\nresp : ndarray, shape (N, k)\nlabels : ndarray, shape (N,)"

#: The ``Returns`` section of a ``log_likelihood`` face whose docstring is its summary alone.
_LIKELIHOOD_RETURNS = "Returns\n-------\nndarray, shape (N,)"

#: The ``estimate`` argument of a family's online ``update``.
UPDATED_ESTIMATE = Param("SpectralEstimate, optional", "The fit to update (from :func:`update`, or :func:`load "
                         "<specinit.estimate.SpectralEstimate.load>` of one); None for the first batch.", None)


#: The ``estimate`` argument of an ``update`` whose family defers recoveries (:meth:`Family.defer`).
DEFERRED_ESTIMATE = Param("SpectralEstimate or Stream, optional", UPDATED_ESTIMATE.doc + " A :class:`Stream` (batches "
                          "taken in by :meth:`Family.defer`, the parameters not yet recovered) continues like the "
                          "estimate it started from.", None, annotation=SpectralEstimate | Stream | None)


def site_values(value: Any, first: str | None = None, /, **others: Any) -> dict:
    """The parameters given to a ``population_moments`` face, as a dict of site values.

    Parameters
    ----------
    value : SpectralEstimate, dict or array-like
        Every site by name (an estimate or a dict, completed by those of ``others`` that it lacks and that are
        given), or the value of the site ``first``.
    first : str, optional
        The site ``value`` stands for when it is not a dict; None: ``value`` must be a dict or an estimate.
    **others
        The other sites by name (None: not given).

    Returns
    -------
    dict of str -> object

    Raises
    ------
    TypeError
        ``value`` that is neither a dict nor an estimate where ``first`` is None.
    """
    params = getattr(value, "params", value)
    if isinstance(params, Mapping):
        return {**{name: site for name, site in others.items() if site is not None}, **params}
    if first is None:
        raise bad_argument("params", None, "a dict of site values or a SpectralEstimate", value, kind=TypeError)
    return {first: value, **others}


#: Prefix of the moment summary kept in the ``state`` of an estimate from a family's ``update`` (online fits).
MOMENTS_STATE = "moments/"


def stored_moments(estimate: Any, model: str, func: str) -> dict:
    """The moment summary an online estimate keeps (its ``state`` under :data:`MOMENTS_STATE`, prefix removed).

    Parameters
    ----------
    estimate : object
        The ``estimate`` argument of ``func``.
    model : str
        The family's name (``"lda"``, ``"gmm"``).
    func : str
        The public function (``"lda.update"``), named in errors.

    Returns
    -------
    dict of str -> ndarray

    Raises
    ------
    TypeError
        Not a SpectralEstimate of ``model``.
    ValueError
        An estimate without a stored summary (from ``spectral``, which keeps none).
    """
    if not isinstance(estimate, SpectralEstimate) or estimate.model != model:
        raise bad_argument("estimate", None, f"a {model!r} SpectralEstimate from {func}", estimate, kind=TypeError)
    stored = {key[len(MOMENTS_STATE):]: value for key, value in estimate.state.items() if key.startswith(MOMENTS_STATE)}
    if not stored:
        raise bad_argument("estimate", None, f"an estimate that keeps its moments (from {func}; "
                           f"{func.split('.')[0]}.spectral does not keep them: fit the first batch with {func})",
                           "an estimate without stored moments", describe=False)
    return stored


class Family:
    """A latent-variable model family: declarations, and the skeleton that turns data into estimates.

    Attributes
    ----------
    name : str
        The model name carried by every estimate (the module name in
        :mod:`specinit.models`).
    sites : dict of str -> Site
        The NumPyro sites (latent and observed) with their supports,
        component axes and ArviZ dims; :meth:`site_table` may derive them
        from the parameters instead (models whose sites depend on the data).
    match_site : str
        The site whose components drive label matching.
    fit_kind : {"exchangeable", "multiview"}
        The engine fit: :func:`specinit.engine.exchangeable.fit_exchangeable`
        on the family's moments, or :func:`specinit.engine.views.fit_multiview`
        on :meth:`fit_input` (with the Jennrich fallback of ``approach="auto"``).
    order : {3, 4}
        Order of the whitened tensor (exchangeable fits).
    options : dict of str -> Param
        The family's own options of ``spectral`` (:class:`~specinit.faces.Param`:
        type, default, constraint, documentation), checked once at the entry
        (:func:`specinit._validation.check_arguments`) and passed to
        :meth:`moments`, :meth:`unwhiten` and :meth:`complete`.
    arguments : dict of str -> Param
        The family's other declared arguments: its data (``counts``, ``x``,
        ...), ``moments``, and common arguments it documents its own way.
        :meth:`face` builds the public functions from :data:`COMMON_OPTIONS`,
        these and :attr:`options`.
    advice : str
        Appended to an :class:`~specinit.engine.whitening.IndefiniteMomentError`.
    refine_methods : tuple of str
        Refinement drivers of :meth:`refine` (:mod:`specinit.refine`, or a
        family's own ``refine_<method>``), the default first.
    methods : tuple of str
        The decompositions (or other recoveries) ``method`` may name.
    optional_sites : frozenset of str
        Latent sites a start for :meth:`refine` may lack (per-document ``theta``).
    summary : type or None
        The exact additive summary an online update keeps (with ``+``, ``to_arrays`` and ``from_arrays``) when
        the family defers recoveries (:meth:`defer`, :meth:`batch_summary`).
    component_state : tuple of str
        Prefixes of the fitted ``state`` arrays whose first axis runs over the
        components (permuted with the sites when :meth:`streamed` keeps labels).
    data_kind : {"counts", "rows", "views", "sequences", "symbols"}
        What the data are (``"symbols"``: sequences of integer symbols; the command line reads a file by it).
    k_dependent_moments : bool
        Whether :meth:`moments` depends on ``k`` (a noise estimate).
    whitening_eigenspace : {"magnitude", "positive"}
        The eigenpairs an exchangeable fit whitens with
        (:func:`specinit.engine.whitening.whiten`): the top k by magnitude,
        all positive (a negative one is a symptom the error reports), or the
        k largest positive ones (moments whose sampling noise has both signs
        and can exceed the smaller signal eigenvalues).

    Notes
    -----
    A subclass implements :data:`REQUIRED_HOOKS` (:meth:`moments`,
    :meth:`population_moments`, :meth:`unwhiten`, with :meth:`strategy`
    naming the recoveries that are not an engine fit; see the module notes
    for which to override); for refinement and
    scoring, :meth:`component_log_prob` (mixtures) or :meth:`e_step`
    (chains), :meth:`m_step` and :meth:`refine_data`; :meth:`em_step` when
    one compiled EM step beats the two calls; :meth:`model_inputs` for the
    MAP refinement.
    """

    name: ClassVar[str] = ""
    sites: ClassVar[Mapping[str, Site]] = {}
    match_site: ClassVar[str | None] = None
    fit_kind: ClassVar[str] = "exchangeable"
    order: ClassVar[int] = 3
    options: ClassVar[Mapping[str, Param]] = {}
    arguments: ClassVar[Mapping[str, Param]] = {}
    advice: ClassVar[str] = ""
    refine_methods: ClassVar[tuple] = ("em",)
    methods: ClassVar[tuple] = METHODS
    optional_sites: ClassVar[frozenset] = frozenset()
    summary: ClassVar[type | None] = None
    component_state: ClassVar[tuple] = ()
    data_kind: ClassVar[str] = "rows"
    k_dependent_moments: ClassVar[bool] = False
    whitening_eigenspace: ClassVar[str] = "magnitude"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):  # a base without a name of its own is abstract
            return
        missing = [" or ".join(hooks) for hooks in REQUIRED_HOOKS
                   if all(getattr(cls, hook) is getattr(Family, hook) for hook in hooks)]
        if missing:
            raise TypeError(f"The family {cls.__qualname__} ({cls.name!r}) must implement {', '.join(missing)} "
                            f"(the required hooks of specinit.family.Family).")
        _registry.register(cls)

    @property
    def faces(self) -> Any:
        """The public functions of this family: its module when the module's ``FAMILY`` is of this class (the
        built-in families: ``lda.spectral`` ...), else this family itself (its methods)."""
        module = sys.modules.get(type(self).__module__)
        return module if type(getattr(module, "FAMILY", None)) is type(self) else self

    # ---- declarations ---------------------------------------------------------------------------------------
    def face(self, *, validate: bool = False, **overrides: Param) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorator building a public function of this family from a template (:func:`specinit.faces.face`).

        Parameters
        ----------
        validate : bool, default False
            Check the declared constraints at the entry: for functions that do not pass through the skeleton,
            which checks the options of ``spectral`` once itself.
        **overrides : Param
            Declarations of this function only (an argument it documents differently).

        Returns
        -------
        callable
        """
        return face({**self.declared(), **overrides}, validate=validate)

    def refine_face(self, **overrides: Any) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorator building this family's public ``refine`` from a template: the EM options
        (:data:`specinit.refine.EM_OPTIONS`) over the family's declarations, then ``overrides``.

        Parameters
        ----------
        **overrides : Param or object
            A :class:`~specinit.faces.Param` re-declares an argument; any other value re-declares only the
            default (``max_iter=500``).

        Returns
        -------
        callable
        """
        from specinit.refine import EM_OPTIONS

        table = {**self.declared(), **EM_OPTIONS}
        for name, value in overrides.items():
            table[name] = value if isinstance(value, Param) else replace(table[name], default=value)
        return face(table, validate=False)

    def scoring_face(self, data: str, **overrides: Param) -> Callable[[Callable[..., R]], Callable[..., R]]:
        """Decorator building a face that scores data under a fit (``predict``, ``log_likelihood``): ``data`` as
        for ``spectral``, ``estimate`` a fit of this family (:data:`SCORED_ESTIMATE`), then ``overrides``.

        Parameters
        ----------
        data : str
            The name of the family's data argument (``"x"``, ``"counts"``, ``"sequences"``, ``"views"``).
        **overrides : Param
            Declarations of this function only.

        Returns
        -------
        callable
        """
        documented = self.declared()[data].documented("As for :func:`spectral`.")
        return self.face(**{data: documented, "estimate": SCORED_ESTIMATE, **overrides})

    def predict_face(self, data: str, doc: str, *, positional: Sequence[str] = (),
                     keyword: Sequence[str] = ()) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
        """This family's public ``predict``: :meth:`predict` of ``data`` under a fit, declared by :meth:`scoring_face`.

        Parameters
        ----------
        data : str
            The name of the family's data argument (``"x"``, ``"counts"``, ``"views"``).
        doc : str
            The docstring without its ``Parameters`` section; a single line is the summary of the usual ``Returns``
            (``resp`` (N, k) and ``labels`` (N,)).
        positional, keyword : sequence of str
            Declared arguments after ``data`` and ``estimate`` (positional or keyword, then keyword-only), passed
            to :meth:`predict` by name.

        Returns
        -------
        callable
        """
        return self._scoring_function("predict", data, doc, _PREDICT_RETURNS, tuple[np.ndarray, np.ndarray],
                                      positional, keyword)

    def log_likelihood_face(self, data: str, doc: str, *, positional: Sequence[str] = (),
                            keyword: Sequence[str] = ()) -> Callable[..., np.ndarray]:
        """This family's public ``log_likelihood``: :meth:`log_likelihood` of ``data`` under a fit, declared by
        :meth:`scoring_face`.

        Parameters
        ----------
        data : str
            The name of the family's data argument.
        doc : str
            The docstring without its ``Parameters`` section; a single line is the summary of the usual ``Returns``
            (one value per observation, (N,)).
        positional, keyword : sequence of str
            As for :meth:`predict_face`.

        Returns
        -------
        callable
        """
        return self._scoring_function("log_likelihood", data, doc, _LIKELIHOOD_RETURNS, np.ndarray, positional,
                                      keyword)

    def _scoring_function(self, method: str, data: str, doc: str, returns: str, annotation: Any,
                          positional: Sequence[str], keyword: Sequence[str]) -> Callable:
        """The public function ``method`` of this family's module: its arguments forwarded to the method."""
        kinds = [inspect.Parameter.POSITIONAL_OR_KEYWORD] * (2 + len(positional)) \
            + [inspect.Parameter.KEYWORD_ONLY] * len(keyword)
        signature = inspect.Signature([inspect.Parameter(name, kind) for name, kind in
                                       zip((data, "estimate", *positional, *keyword), kinds)],
                                      return_annotation=annotation)
        scored = getattr(self, method)

        def template(*args: Any, **kwargs: Any) -> Any:
            arguments = signature.bind(*args, **kwargs).arguments
            return scored(arguments.pop(data), arguments.pop("estimate"), **arguments)

        template.__signature__ = signature  # type: ignore[attr-defined]
        template.__doc__ = doc if "\n" in doc.strip() else f"{doc}\n\n{returns}"
        template.__name__ = template.__qualname__ = method
        template.__module__ = type(self).__module__
        return self.scoring_face(data)(template)

    def declared(self) -> dict:
        """Every declared argument of this family's public functions: :data:`COMMON_OPTIONS`, :attr:`arguments`,
        :attr:`options` (later tables re-declare earlier names)."""
        return {**COMMON_OPTIONS, **self.arguments, **self.options}

    def estimator_face(self) -> Face | None:
        """This family's scikit-learn face (:class:`~specinit.faces.Face`), from which
        :func:`specinit.estimators.estimator_class` builds its estimator; None (default): no estimator."""
        return None

    def site_table(self, params: Mapping | None = None, **options: Any) -> tuple[dict, str | None]:
        """``(sites, match_site)`` for estimates with these parameters (default: the declared table)."""
        return dict(self.sites), self.match_site

    def check_state(self, estimate: SpectralEstimate) -> None:
        """Check the fitted arrays an estimate of this family keeps (its ``state``) before anything uses them.

        The default rebuilds the stored moment summary (:data:`MOMENTS_STATE`) with :attr:`summary`'s
        ``from_arrays``, which checks every array; :meth:`SpectralEstimate.load` calls it on every file.

        Parameters
        ----------
        estimate : SpectralEstimate

        Raises
        ------
        ValueError
            A damaged array (:class:`specinit._validation.StoredArrayError` when the error names it).
        """
        if self.summary is not None and any(key.startswith(MOMENTS_STATE) for key in estimate.state):
            self._stored_summary(self.summary, estimate, "update")

    def _stored_summary(self, summary: type, estimate: SpectralEstimate, func: str):
        """The moment summary ``estimate`` keeps, rebuilt by ``summary.from_arrays`` (a damaged array named by its
        key in ``estimate.state``)."""
        try:
            return summary.from_arrays(stored_moments(estimate, self.name, func), "estimate")
        except StoredArrayError as exc:
            raise exc.under(MOMENTS_STATE) from None

    def moments(self, data: Any, *, k: int, backend: str | Passes | None, **options: Any) -> Moments:
        """Required: the data's moments (:mod:`specinit.engine.protocols`; one validated pass, on ``backend``)."""
        raise NotImplementedError(f"{type(self).__name__} does not build moments from data")

    def population_moments(self, params: Mapping, **options: Any) -> Moments:
        """Required: exact moments (:mod:`specinit.engine.protocols`) of the model with parameters ``params``
        (a dict of site values)."""
        raise NotImplementedError(f"{type(self).__name__} has no population moments")

    def max_components(self, moments: Moments) -> tuple[int, str]:
        """The largest ``k`` the moments support, and the constraint on ``k`` it gives (as the error states it);
        default: the number of features (exchangeable moments) or the smallest view dimension (multi-view)."""
        if isinstance(moments, MultiViewMoments):
            return min(moments.dims), f"at most the smallest view dimension ({min(moments.dims)})"
        return moments.n_features, f"at most the number of features ({moments.n_features})"

    def target(self, **options: Any) -> int:
        """The target view of a multi-view fit."""
        return -1

    def kind_of(self, **options: Any) -> str:
        """The engine fit for these options (default: :attr:`fit_kind`)."""
        return self.fit_kind

    def tensor_order(self, **options: Any) -> int:
        """Order of the whitened tensor of an exchangeable fit (default: :attr:`order`)."""
        return self.order

    def fit_input(self, moments: Moments, k: int, **options: Any) -> Moments:
        """What the engine fit decomposes: the family's moments, or a view of them (default: themselves)."""
        return moments

    def unwhiten(self, fit: ExchangeableFit | MultiViewFit, moments: Moments, k: int, floor: float,
                 **options: Any) -> tuple[dict, dict, dict]:
        """Required unless :meth:`recover` is overridden: ``(params, report, state)`` from an engine fit: values
        of every latent site, flat diagnostics, and the fitted arrays that are not sites but that the estimate
        keeps (saved with it; usually none).

        ``options`` hold the family's options and ``rng``, the fit's generator.
        """
        raise NotImplementedError(f"{type(self).__name__} does not unwhiten an engine fit")

    def complete(self, params: dict, data: Any, moments: Moments, *, rng: np.random.Generator,
                 **options: Any) -> tuple[dict, dict]:
        """Data-dependent additions after recovery (document topics, factor scores, closing steps; ``floor`` is
        :meth:`spectral`'s); default: none."""
        return params, {}

    # ---- the skeleton ---------------------------------------------------------------------------------------
    def estimate(self, k: int | None, params: Mapping, diagnostics: Mapping, *, vocabulary: Sequence[str] | None = None,
                 state: Mapping | None = None, options: Mapping | None = None) -> SpectralEstimate:
        """Package values as this family's :class:`~specinit.estimate.SpectralEstimate` (the one place estimates are built).

        Parameters
        ----------
        k : int or None
            Number of components (None: read off the match site).
        params : dict
        diagnostics : dict
            Flat diagnostics (numbers, strings, arrays).
        vocabulary : sequence of str, optional
        state : dict, optional
            Fitted arrays that are not sites (saved and loaded with the estimate).
        options : dict, optional
            The family's options (for site tables that depend on them).

        Returns
        -------
        SpectralEstimate
        """
        sites, match = self.site_table(params, **(options or {}))
        return SpectralEstimate(self.name, dict(params), dict(diagnostics), vocabulary, k=k, sites=sites,
                                match_site=match, state=dict(state or {}))

    def stream(self, estimate: SpectralEstimate | None, k: int | None, summary: type,
               func: str) -> tuple[Any, int, int]:
        """Where an online fit stands before a batch: ``(stored summary or None, k, number of this batch)``.

        Parameters
        ----------
        estimate : SpectralEstimate or None
            The fit to update (None: the first batch).
        k : int or None
            Components asked for (None: the estimate's; required on the first batch).
        summary : type
            The family's moment summary, with ``from_arrays(arrays, name)``.
        func : str
            The public function, named in errors.

        Returns
        -------
        (object or None, int, int)

        Raises
        ------
        ValueError
            ``k`` missing on the first batch or not an int >= 1, an estimate without a stored summary.
        TypeError
            An estimate of another family.
        """
        k = Interval(int, 1, none=True).check("k", k)
        if estimate is None:
            if k is None:
                raise bad_argument("k", None, "given for the first batch (no estimate to update)", k)
            return None, k, 1
        stored = self._stored_summary(summary, estimate, func)
        return stored, estimate.k if k is None else k, int(estimate.diagnostics.get("n_batches", 1)) + 1

    def continued(self, estimate: SpectralEstimate | Stream | None, k: int | None,
                  func: str) -> tuple[Any, Any, int, int]:
        """Where an online fit stands before a batch, a :class:`Stream` included: ``(stored summary or None, last
        recovered fit or None, k, number of this batch)``.

        Parameters
        ----------
        estimate : SpectralEstimate, Stream or None
            The fit to update, the batches taken in since (:meth:`defer`), or None (the first batch).
        k : int or None
            Components asked for; with a stream None or the stream's.
        func : str
            The public function, named in errors.

        Returns
        -------
        (object or None, SpectralEstimate or None, int, int)

        Raises
        ------
        ValueError
            As :meth:`stream`, or a ``k`` other than the stream's.
        """
        if isinstance(estimate, Stream):
            if k is not None and k != estimate.k:
                raise bad_argument("k", None, f"None or the stream's k = {estimate.k}", k)
            return estimate.merged, estimate.previous, estimate.k, estimate.n_batches + 1
        stored, k, n_batches = self.stream(estimate, k, self.summary, func)
        return stored, estimate, k, n_batches

    def batch_summary(self, data: Any, stored: Any, n_batches: int, **options: Any) -> Any:
        """The summary (:attr:`summary`) of one batch, read as ``stored`` was (None: the first batch fixes how).

        Parameters
        ----------
        data : object
            The batch.
        stored : object or None
            The summary of the batches before it.
        n_batches : int
            The batch's number (1 for the first).
        **options
            The arguments of the family's ``update`` (each family reads those it needs).

        Returns
        -------
        object
        """
        raise NotImplementedError(f"{self.name} does not defer online updates")

    def defer(self, data: Any, estimate: SpectralEstimate | Stream | None, k: int | None, **options: Any) -> Stream:
        """The first half of an online update alone: a batch's summary merged with what came before, no recovery.

        Parameters
        ----------
        data : object
            The batch.
        estimate : SpectralEstimate, Stream or None
            The fit (or the batches taken in) to add to; None for the first batch.
        k : int or None
            Components; required for the first batch, else None or the estimate's.
        **options
            The arguments of the family's ``update`` (:meth:`batch_summary` reads those it needs).

        Returns
        -------
        Stream

        Raises
        ------
        ValueError
            As the family's ``update``.
        """
        stored, previous, k, n_batches = self.continued(estimate, k, current_entry())
        batch = self.batch_summary(data, stored, n_batches, **options)
        return Stream(previous, batch if stored is None else stored + batch, n_batches, k)

    def streamed(self, fit: SpectralEstimate, previous: SpectralEstimate | None, merged: Any, n_batches: int,
                 **diagnostics: Any) -> SpectralEstimate:
        """The estimate after a batch: ``fit`` with the component labels of ``previous`` (matched on the match
        site; every site permuted along its component axes, and the :attr:`component_state`), ``n_batches`` and
        ``diagnostics`` added, the merged summary kept in its ``state`` (:data:`MOMENTS_STATE`) for the next batch
        and :meth:`SpectralEstimate.save`."""
        params, state = dict(fit.params), dict(fit.state)
        if previous is not None and previous.k == fit.k:
            order = match_components(previous.params[fit.match_site], params[fit.match_site])
            for name, site in fit.sites.items():
                if name in params:
                    for axis in site.axes:
                        params[name] = np.take(params[name], order, axis=axis)
            for name in state:
                if name.startswith(self.component_state):
                    state[name] = np.take(state[name], order, axis=0)
        state.update({MOMENTS_STATE + key: value for key, value in merged.to_arrays().items()})
        return replace(fit, params=params, diagnostics={**fit.diagnostics, "n_batches": n_batches, **diagnostics},
                       state=state)

    def resolve(self, method: str | None, options: Mapping) -> tuple[str, dict]:
        """The defaults that depend on other arguments, in one place for every entry: ``method`` when None
        (default: ``"tpm"``) and the options the family derives from the arguments given.

        Parameters
        ----------
        method : str or None
        options : dict
            The family's options as given.

        Returns
        -------
        (str, dict)
        """
        return ("tpm" if method is None else method), dict(options)

    def check_options(self, options: Mapping, func: str = "spectral") -> dict:
        """The family's options checked once against their declarations (:attr:`options`), normalised.

        Parameters
        ----------
        options : dict
        func : str
            The method called, named in the error outside a public function.

        Returns
        -------
        dict

        Raises
        ------
        TypeError
            A name the family does not declare (a misspelled option), named in the error.
        """
        unknown = [name for name in options if name not in self.options]
        if unknown:
            entry = current_entry(f"{type(self).__name__}.{func}")
            raise TypeError(f"{entry} got an unexpected keyword argument {unknown[0]!r} (the options of the family "
                            f"{self.name!r}: {', '.join(self.options) or 'none'}).")
        return check_arguments(self.options, options)

    def check_k(self, k: int, moments: Moments) -> int:
        """``k`` (an int >= 1, checked at the entry) within ``max_components(moments)``: its data-dependent check."""
        limit, constraint = self.max_components(moments)
        if k > limit:
            raise bad_argument("k", None, constraint, k)
        return k

    def strategy(self, moments: Moments, k: int, *, method: str,
                 **options: Any) -> Callable[..., tuple[dict, dict, dict]] | None:
        """The recovery these moments and options call for when it is not the engine fit and :meth:`unwhiten`.

        Parameters
        ----------
        moments : object
            What :meth:`moments` or :meth:`population_moments` returned.
        k : int
            Components (checked against :meth:`max_components`).
        method : str
            One of :attr:`methods`.
        **options
            The family's options.

        Returns
        -------
        callable or None
            Called as :meth:`recover` is (``moments, k, method=, approach=, rng=, floor=, decompose_options=``,
            the options) and returning what it returns, ``(params, report, state)``; None (default): the engine
            fit and :meth:`unwhiten`.
        """
        return None

    def decompose_defaults(self, method: str) -> dict:
        """Keyword arguments of the tensor decomposition ``method`` that this family's moments call for, under
        those the caller gives in ``decompose_options`` (default: none, the engine's own)."""
        return {}

    def recover(self, moments: Moments, k: int, *, method: str, approach: str, rng: np.random.Generator, floor: float,
                decompose_options: Mapping[str, Any] | None, **options: Any) -> tuple[dict, dict, dict]:
        """The family's :meth:`strategy`, else the engine fit (with the fallback of ``approach="auto"``) and
        :meth:`unwhiten`: ``(params, report, state)``."""
        strategy = self.strategy(moments, k, method=method, **options)
        if strategy is not None:
            return strategy(moments, k, method=method, approach=approach, rng=rng, floor=floor,
                            decompose_options=decompose_options, **options)
        defaults = self.decompose_defaults(method)
        if defaults and (decompose_options is None or isinstance(decompose_options, dict)):  # others: the engine raises
            decompose_options = {**defaults, **(decompose_options or {})}
        fit_moments = self.fit_input(moments, k, **options)
        if self.kind_of(**options) == "multiview":
            fit = fit_multiview(fit_moments, k, target=self.target(**options), method=method, approach=approach,
                                seed=rng, decompose_options=decompose_options)
            diagnostics = dict(fit.diagnostics)
        else:
            fit = fit_exchangeable(fit_moments, k, order=self.tensor_order(**options), method=method, seed=rng,
                                   decompose_options=decompose_options, eigenspace=self.whitening_eigenspace)
            diagnostics = fit.diagnostics
        params, report, state = self.unwhiten(fit, moments, k, floor, rng=rng, **options)
        return params, {**diagnostics, **report}, state

    def _fit(self, moments, k, *, method, approach, seed, floor, decompose_options,
             options) -> tuple[int, dict, dict, dict]:
        checked = check_arguments({**COMMON_OPTIONS, "method": Options(self.methods)},
                                  {"method": method, "approach": approach, "floor": floor})
        k = self.check_k(k, moments)
        rng = as_generator(seed)
        try:
            params, report, state = self.recover(moments, k, method=checked["method"], approach=checked["approach"],
                                                 rng=rng, floor=checked["floor"],
                                                 decompose_options=decompose_options, **options)
        except IndefiniteMomentError as exc:
            raise exc.advise(current_entry(), self.advice) from None
        params, repairs = project(params, self.site_table(params, **options)[0], checked["floor"])
        self.warn_repairs(repairs, k, self.site_table(params, **options)[1])
        return k, params, {**report, **repairs}, state

    def warn_repairs(self, repairs: Mapping, k: int, match_site: str | None) -> None:
        """Warn when the projection had to repair much of the matched site (every repair is in the diagnostics)."""
        negative = np.asarray(repairs.get(f"negative_mass_{match_site}", 0.0))
        floored = repairs.get(f"floored_{match_site}", 0)
        if np.any(negative > 0.25):
            warn(f"{current_entry()}: {int(np.sum(negative > 0.25))} row(s) of {match_site!r} had more than 25% of "
                 f"their mass negative before projection onto the simplex "
                 f"(diagnostics['negative_mass_{match_site}']); the moments are noisy for k={k}: try a smaller k, "
                 "more data, or refine the estimate.")
        if floored:
            warn(f"{current_entry()}: {floored} value(s) of {match_site!r} were not positive and were floored "
                 f"(diagnostics['floored_{match_site}']); the moments are noisy for k={k}: try a smaller k or more "
                 "data.")

    def spectral_from_moments(self, moments: Moments, k: int | Literal["auto"], *, method: str | None = None,
                              approach: str = "auto", seed: int | np.random.Generator = 0, floor: float = 1e-3,
                              decompose_options: dict | None = None, vocabulary: Sequence[str] | None = None,
                              **options: Any) -> SpectralEstimate:
        """Recover the parameters from moments (data or population): the skeleton without the data pass.

        Parameters
        ----------
        moments : object
            From :meth:`moments` or :meth:`population_moments`.
        k : int or "auto"
            Number of components; ``"auto"``: the eigengap of the moments' spectrum (:meth:`spectrum_k`;
            exact for population moments).
        method : {"tpm", "svtd", "eca", "als"} or None
            Tensor decomposition (or another of :attr:`methods`); None: the family's default (:meth:`resolve`).
        approach : {"auto", "symmetric", "jennrich"}
            Multi-view fits only (see :func:`specinit.engine.views.fit_multiview`).
        seed : int or numpy.random.Generator
        floor : float
            Simplex entries are floored at ``floor / d``.
        decompose_options : dict, optional
        vocabulary : sequence of str, optional
        **options
            The family's options (:attr:`options`).

        Returns
        -------
        SpectralEstimate
        """
        method, options = self.resolve(method, options)
        options = self.check_options(options, "spectral_from_moments")
        report = {}
        if isinstance(k, str) and k == "auto":
            seed = as_generator(seed)
            k, report = self.spectrum_k(moments, 10, seed, **options)
        else:
            k = COMMON_OPTIONS["k"].check("k", k)
        k, params, diagnostics, state = self._fit(moments, k, method=method, approach=approach, seed=seed,
                                                  floor=floor, decompose_options=decompose_options, options=options)
        return self.estimate(k, params, {**diagnostics, **report}, vocabulary=vocabulary, state=state,
                             options=options)

    def spectral(self, data: Any, k: int | Literal["auto"], *, method: str | None = None, approach: str = "auto",
                 seed: int | np.random.Generator = 0, floor: float = 1e-3, decompose_options: dict | None = None,
                 backend: str | Passes | None = None, vocabulary: Sequence[str] | None = None,
                 **options: Any) -> SpectralEstimate:
        """Method-of-moments estimate from data: :meth:`moments`, then the skeleton, then :meth:`complete`.

        Parameters
        ----------
        data : object
            The family's data (counts, rows, views, sequences).
        k : int or "auto"
            Number of components; ``"auto"``: chosen from the data (:meth:`choose_k`).
        method, approach, seed, floor, decompose_options, vocabulary
            As for :meth:`spectral_from_moments`.
        backend : str, Passes or None
            Where the passes run (:func:`specinit.engine.backends.resolve_backend`).
        **options
            The family's options.

        Returns
        -------
        SpectralEstimate
        """
        method, options = self.resolve(method, options)
        options = self.check_options(options)  # before the passes, which allocate by these sizes
        rng = as_generator(seed)
        if isinstance(k, str) and k == "auto":
            k, report = self.choose_k(data, rng=rng, backend=backend, method=method, approach=approach,
                                      floor=floor, decompose_options=decompose_options, **options)
            estimate = self.spectral(data, k, method=method, approach=approach, seed=rng, floor=floor,
                                     decompose_options=decompose_options, backend=backend, vocabulary=vocabulary,
                                     **options)
            return replace(estimate, diagnostics={**estimate.diagnostics, **report})
        k = COMMON_OPTIONS["k"].check("k", k)
        moments = self.moments(data, k=k, backend=backend, **options)
        k, params, diagnostics, state = self._fit(moments, k, method=method, approach=approach, seed=rng,
                                                  floor=floor, decompose_options=decompose_options, options=options)
        params, extra = self.complete(params, data, moments, rng=rng, floor=floor, **options)
        return self.estimate(k, params, {**diagnostics, **extra}, vocabulary=vocabulary, state=state,
                             options=options)

    # ---- k from the data ---------------------------------------------------------------------------------------
    def n_free_parameters(self, estimate: SpectralEstimate) -> int:
        """Free parameters of the global sites (simplex rows count one less than their length)."""
        total = 0
        for name, value in estimate.params.items():
            site = estimate.sites.get(name)
            if site is None or name in self.optional_sites:
                continue
            total += value.size - (value.size // value.shape[-1] if site.support == "simplex" and value.ndim else 0)
        return int(total)

    def k_score(self, data: Any, k: int, rng: np.random.Generator, **spectral_kw: Any) -> float:
        """Minus half the BIC of the k-component fit (after 30 EM steps when the family has EM); higher is better."""
        estimate = self.spectral(data, k, seed=rng, **spectral_kw)
        if "em" in self.refine_methods:
            estimate = self.refine(data, estimate, max_iter=30, tol=1e-4, restarts=0).estimate
        n = self.n_observations(self.refine_data(data, estimate))
        return float(np.sum(self.log_likelihood(data, estimate)) - 0.5 * self.n_free_parameters(estimate) * np.log(n))

    def spectrum_k(self, moments: Moments, k_max: int, rng: np.random.Generator, **options: Any) -> tuple[int, dict]:
        """The number of components the second moment supports, from its spectrum.

        The signed eigenvalues of the exchangeable moment (or the singular values of a cross moment of the
        views) have exactly k leading positive values under a k-component model with exact moments, and no
        negative one. With data, the second moment is that positive semi-definite signal plus sampling noise
        of both signs, so the negative values measure the noise: a positive value counts as signal when it
        exceeds :data:`NOISE_FACTOR` times the edge of their bulk (:func:`noise_edge`: the largest negative
        magnitude, isolated spikes set aside; the noise threshold), and the largest ratio of consecutive values
        among the signal ones (the eigengap) is the guess. Families that whiten with the positive eigenspace
        (``whitening_eigenspace = "positive"``) count the positive values past any larger negative (noise)
        ones, and probe the :data:`NEGATIVE_PROBE` most negative values for the edge (on real text the
        per-document pair moment has a negative spike about three times its bulk, which would hide all but the
        two or three largest topics).

        Parameters
        ----------
        moments : object
            Data or population moments of this family (for ``k_max`` components when they depend on k).
        k_max : int
            Largest k considered (also bounded by :meth:`max_components`).
        rng : numpy.random.Generator
        **options
            The family's options.

        Returns
        -------
        k : int
            The eigengap guess (exact for population moments).
        report : dict
            ``k_auto/spectrum``, ``k_auto/positive`` (leading positive values), ``k_auto/noise_level`` (the
            threshold), ``k_auto/signal`` (positive values above it), ``k_auto/eigengap_k``.
        """
        limit = min(self.max_components(moments)[0], k_max)
        fit_moments = self.fit_input(moments, limit, **options)
        r = limit + 1
        if self.kind_of(**options) == "multiview":
            spectrum = pair_spectrum(fit_moments, min(r, min(fit_moments.dims)), rng, self.target(**options))
        else:
            spectrum = signed_spectrum(fit_moments, min(r, fit_moments.n_features), rng)
        scale = max(abs(float(spectrum[0])), np.finfo(float).tiny)
        if self.whitening_eigenspace == "positive":
            # Whitening keeps the top positive eigenpairs, skipping negative noise ones: the positive values
            # first (decreasing), then the rest by magnitude.
            keep = spectrum > 1e-10 * scale
            spectrum = np.concatenate([np.sort(spectrum[keep])[::-1], spectrum[~keep]])
        positive = int(np.argmax(np.append(spectrum, -1.0) <= 1e-10 * scale))
        negatives = np.sort(-spectrum[spectrum < 0])[::-1]
        if self.whitening_eigenspace == "positive" and negatives.size:
            negatives = negative_spectrum(fit_moments, min(NEGATIVE_PROBE, fit_moments.n_features), scale, rng)
        noise = NOISE_FACTOR * noise_edge(negatives)
        signal = int(np.count_nonzero(spectrum[:positive] > max(noise, 1e-10 * scale)))
        magnitudes = np.maximum(np.abs(spectrum), 1e-10 * scale)
        ratios = (magnitudes[:-1] / magnitudes[1:])[:max(signal, 1)]  # ratio i separates k = i + 1
        gap_k = min(int(np.argmax(ratios)) + 1 if ratios.size else 1, limit)
        return gap_k, {"k_auto/spectrum": spectrum, "k_auto/positive": positive, "k_auto/noise_level": noise,
                       "k_auto/signal": signal, "k_auto/eigengap_k": gap_k}

    def choose_k(self, data: Any, *, rng: np.random.Generator, backend: str | Passes | None = None, k_max: int = 10,
                 **spectral_kw: Any) -> tuple[int, dict]:
        """``k`` from the data: the spectrum of the second moment bounds it, a score after a cheap refine picks it.

        The one rule of ``k="auto"`` (and of the scikit-learn faces' ``n_components="auto"``): the spectrum
        bounds k, a score picks it. The candidates run from 1 to the number of signal values of the second
        moment's spectrum (positive values above the noise threshold the data give, :meth:`spectrum_k`, whose
        eigengap guess is reported), within ``k_max`` and the limit the data support. Each candidate is
        fitted, refined by 30 EM steps when the family has EM, and scored by :meth:`k_score` (minus half the
        BIC; the topic models score held-out documents by cross-validation, the quantity their estimators'
        ``score`` reports, so ``GridSearchCV`` over ``n_components`` estimates the same curve); the smallest k
        within 0.1 % of the best score is kept.

        Parameters
        ----------
        data : object
            The family's data, in memory.
        rng : numpy.random.Generator
        backend : optional
            As for :meth:`spectral`.
        k_max : int
            Largest k considered.
        **spectral_kw
            The fit's options.

        Returns
        -------
        k : int
        report : dict
            :meth:`spectrum_k`'s report, ``k_auto/candidates``, ``k_auto/score`` (``-inf`` where the data
            refused a k) and ``k_auto/chosen``.
        """
        family_options = {name: spectral_kw.pop(name) for name in list(spectral_kw) if name in self.options}
        probe = self.moments(data, k=1, backend=backend, **family_options)
        limit = min(self.max_components(probe)[0], k_max)
        moments = self.moments(data, k=limit, backend=backend, **family_options) if self.k_dependent_moments else probe
        gap_k, report = self.spectrum_k(moments, limit, rng, **family_options)
        candidates = list(range(1, self.largest_candidate(data, report, limit, k_max) + 1))
        scores = []
        for k in candidates:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    scores.append(self.k_score(data, k, rng, backend=backend, **spectral_kw, **family_options))
            except ValueError:  # the data do not support this k
                scores.append(-np.inf)
        finite = np.isfinite(scores)
        if finite.any():
            top = float(np.max(np.asarray(scores)[finite]))
            # the smallest k within 0.1 % of the best score (duplicated components add nothing)
            best = next(k for k, v in zip(candidates, scores) if v >= top - 1e-3 * abs(top))
        else:
            best = gap_k
        return best, {**report, "k_auto/candidates": np.asarray(candidates), "k_auto/score": np.asarray(scores),
                      "k_auto/chosen": best}

    def largest_candidate(self, data: Any, report: Mapping, limit: int, k_max: int) -> int:
        """The largest k :meth:`choose_k` scores: the signal values of the spectrum (:meth:`spectrum_k`'s
        report), within ``limit`` (the data's and ``k_max``'s)."""
        return min(limit, max(report["k_auto/signal"], 1))

    # ---- likelihood, refinement, prediction -----------------------------------------------------------------
    def component_log_prob(self, params: Mapping, data: Any) -> Any:
        """``log p(x_n | h = i)`` for every observation and component, shape (N, k) (JAX or NumPy; mixtures)."""
        raise NotImplementedError(f"{self.name} is not a mixture with a per-component likelihood")

    def refine_data(self, data: Any, estimate: SpectralEstimate, **options: Any) -> Any:
        """The data in the form :meth:`component_log_prob`, :meth:`e_step` and :meth:`m_step` read (validated
        against the estimate); default: as given."""
        return data

    def model_inputs(self, data: Any, estimate: SpectralEstimate, **options: Any) -> tuple[Callable, tuple, dict]:
        """``(model, args, kwargs)``: the NumPyro program and its arguments for ``data``, as the ``map``
        refinement (:func:`specinit.refine.map_estimate`) runs it."""
        raise NotImplementedError(f"{self.name} has no MAP refinement")

    def e_step(self, params: Mapping, data: Any) -> tuple[Any, float]:
        """``(expected statistics, total log-likelihood)``; default: mixture responsibilities."""
        from specinit.refine import mixture_e_step

        return mixture_e_step(self, params, data)

    def m_step(self, data: Any, stats: Any, params: Mapping, **options: Any) -> dict:
        """Parameters maximizing the expected complete-data log-likelihood (before projection)."""
        raise NotImplementedError(f"{self.name} has no EM refinement")

    def em_step(self, data: Any, stats: Any, params: Mapping, sites: Mapping, floor: float,
                **options: Any) -> tuple[dict, Any, float]:
        """One EM step from the expected statistics ``stats`` at ``params``: the M-step projected inside the
        sites' supports (:func:`~specinit.engine.support.project` at ``floor``), then the E-step there;
        ``(params, stats, total log-likelihood)``. Families with a compiled step override it."""
        params, _ = project(self.m_step(data, stats, params, **options), sites, floor)
        stats, log_likelihood = self.e_step(params, data)
        return params, stats, log_likelihood

    def split_merge(self, params: Mapping, data: Any, stats: Any, rng: np.random.Generator,
                    attempt: int = 0) -> dict | None:
        """A split-merge move for EM: the least needed component taken away, another split in two (mixtures).

        Parameters
        ----------
        params : dict
            A converged iterate.
        data : object
            In the form :meth:`refine_data` returns.
        stats : object
            The expected statistics at ``params`` (:meth:`e_step`).
        rng : numpy.random.Generator
        attempt : int
            Moves from ``params`` that failed so far: the next move should differ from them.

        Returns
        -------
        dict or None
            The moved parameters (before projection), or None when no move applies or none is left that
            differs from the ``attempt`` failed ones (the drivers then stop moving).
        """
        raise NotImplementedError(f"{self.name} has no split-merge move for EM")

    def n_observations(self, data: Any) -> int:
        """What divides the log-likelihood gain in EM's stopping rule (observations, symbols)."""
        return int(np.shape(data)[0])

    def unit_offset(self, data: Any) -> float:
        """What makes the log-likelihood of ``data`` free of the data's unit (added to it by EM's relative
        stopping rule): ``N d log(unit)`` for densities of real-valued data, whose log-likelihood shifts by
        ``-N d log(s)`` when the data are multiplied by ``s``; 0 for discrete data (default)."""
        return 0.0

    def refine(self, data: Any, estimate: SpectralEstimate | Mapping[str, ArrayLike], *, method: str | None = None,
               **options: Any) -> RefineResult:
        """Spectral then refine: a driver of :mod:`specinit.refine` started from ``estimate``.

        Parameters
        ----------
        data : object
            The data the estimate was fitted to.
        estimate : SpectralEstimate
            A start of this family (checked: family, sites, support, shapes).
        method : str, optional
            One of :attr:`refine_methods` (default: the first).
        **options
            Keyword arguments of the driver.

        Returns
        -------
        specinit.refine.RefineResult
        """
        from specinit import refine as drivers

        method = Options(self.refine_methods).check("method", method or self.refine_methods[0])
        estimate = drivers.check_estimate(self, estimate)
        own = getattr(self, f"refine_{method}", None)
        if own is not None:
            return own(data, estimate, **options)
        return drivers.DRIVERS[method](self, data, estimate, **options)

    def _score(self, data, estimate, **options):
        """Responsibilities and per-observation log-likelihoods of ``data`` under a checked ``estimate``."""
        from specinit.refine import check_estimate, mixture_e_step

        estimate = check_estimate(self, estimate)
        return mixture_e_step(self, estimate.params, self.refine_data(data, estimate, **options), per_observation=True)

    def predict(self, data: Any, estimate: SpectralEstimate | Mapping[str, ArrayLike],
                **options: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior component probabilities of every observation, and the most probable component.

        Parameters
        ----------
        data : object
            Observations of this family.
        estimate : SpectralEstimate
        **options
            How to read the data (as for :meth:`refine_data`).

        Returns
        -------
        resp : ndarray, shape (N, k)
            Rows sum to one.
        labels : ndarray of int, shape (N,)
        """
        resp, _ = self._score(data, estimate, **options)
        return resp, resp.argmax(axis=1)

    def log_likelihood(self, data: Any, estimate: SpectralEstimate | Mapping[str, ArrayLike],
                       **options: Any) -> np.ndarray:
        """Log-likelihood of every observation (document, sequence, row) under ``estimate``.

        Parameters
        ----------
        data : object
            Observations of this family.
        estimate : SpectralEstimate
        **options
            How to read the data (as for :meth:`refine_data`).

        Returns
        -------
        ndarray
            One float64 value per observation, discrete latents summed out.
        """
        return self._score(data, estimate, **options)[1]


def registered() -> dict:
    """Every registered family by name: the built-in ones of :mod:`specinit.models` (imported here), then those
    defined elsewhere (a user's family is registered by defining its class).

    Returns
    -------
    dict of str -> Family
    """
    return {name: _registry.lookup(name) for name in _registry.names()}


def family(name: str) -> Family:
    """The registered family ``name`` (a built-in one's module is imported on first use).

    Parameters
    ----------
    name : str
        A family's :attr:`Family.name`.

    Returns
    -------
    Family

    Raises
    ------
    ValueError
        An unknown name (the error lists the registered ones).
    """
    found = _registry.lookup(name) if isinstance(name, str) else None
    if found is None:
        raise bad_argument("name", "family", f"a registered family ({', '.join(_registry.names())})", name)
    return found
