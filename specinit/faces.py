"""Public faces built from declarations: each argument of a family's public calls is declared once.

A :class:`Param` holds what a user needs to know about one argument: its
numpydoc type, its annotation, its default, its constraint and its
documentation. A family declares its own in one table
(:attr:`specinit.family.Family.options` and
:attr:`~specinit.family.Family.arguments`, beside the common ones of
:data:`specinit.family.COMMON_OPTIONS`); :func:`face` turns a template --
a function whose ``def`` line names the arguments and whose docstring holds
everything but the ``Parameters`` section -- into the public function:
signature (``__signature__``, with the declared defaults and annotations,
and the template's return annotation),
``Parameters`` section assembled from the table, and the entry scope of
:func:`specinit._validation.public`. The scikit-learn estimators
(:mod:`specinit.estimators`) and the command line (:mod:`specinit.cli`) read
the same tables, and the skeleton validates the values against them once.
"""

from __future__ import annotations

import functools
import inspect
import operator
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import GenericAlias
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from specinit._validation import Interval, current_entry, public
from specinit.estimate import SpectralEstimate

if TYPE_CHECKING:
    from specinit.estimators import SpectralEstimator
    from specinit.family import Family

__all__ = ["NO_ANNOTATION", "RANDOM_STATE", "REQUIRED", "Face", "Param", "annotation_of", "chain_face", "face",
           "max_iter_param", "mean_log_likelihood", "n_components_param", "parameters_section", "predicted", "refined",
           "responsibilities", "view_face"]

#: The default of an argument that has none.
REQUIRED = inspect.Parameter.empty

#: The annotation of an argument that has none (a :class:`Param` whose type is not made of simple words, unless
#: it declares one).
NO_ANNOTATION = inspect.Parameter.empty

#: Sections a ``Parameters`` section goes before (numpydoc order).
_LATER_SECTIONS = re.compile(r"^\s*(Returns|Yields|Receives|Other Parameters|Raises|Warns|Warnings|See Also|Notes|"
                             r"References|Examples)\s*\n\s*-{3,}\s*$", re.MULTILINE)

#: Width of the assembled documentation lines (the code's line length).
_WIDTH = 116


#: The annotations of the numpydoc type words a :class:`Param` reads its annotation off (quoted strings and
#: ``{...}`` sets of them read as ``Literal``, ``sequence of <word>`` as a ``Sequence``).
_TYPE_WORDS: dict[str, Any] = {
    "int": int, "float": float, "bool": bool, "str": str, "dict": dict, "None": None, "object": Any,
    "array": ArrayLike, "array-like": ArrayLike, "arrays": ArrayLike, "scipy.sparse matrix": sp.spmatrix,
    "numpy.random.Generator": np.random.Generator, "SpectralEstimate": SpectralEstimate,
}

#: What separates the alternatives of a numpydoc type line: ", ", " or ", ", or " or " / " outside a ``{...}`` set.
_ALTERNATIVES = re.compile(r"(?:,? or |, | / )(?![^{]*\})")

#: The shapes a numpydoc type line states (``", shape (N, d)"``, ``" of shape (k,)"``), which annotations omit.
_SHAPE = re.compile(r",? (?:of )?shape \([^)]*\)")


def _word_annotation(word: str) -> Any:
    """The annotation of one alternative of a numpydoc type line; :data:`NO_ANNOTATION` when it is not a simple
    one."""
    if word.startswith(("{", "'")):
        choices = [choice.strip() for choice in word.strip("{}").split(",")]
        if not all(len(choice) > 1 and choice[0] == choice[-1] == "'" for choice in choices):
            return NO_ANNOTATION
        return Literal[tuple(choice[1:-1] for choice in choices)]
    if word.startswith("sequence of "):
        item = _word_annotation(word.removeprefix("sequence of "))
        return item if item is NO_ANNOTATION else GenericAlias(Sequence, (item,))  # Sequence[item] at run time
    return _TYPE_WORDS.get(word, NO_ANNOTATION)


def annotation_of(type_text: str, default: Any = REQUIRED) -> Any:
    """The annotation a numpydoc type line states, when it is made of simple words; :data:`NO_ANNOTATION` otherwise.

    The alternatives (separated by ``" or "``, ``", "`` or ``" / "``; shapes left out) are ``int``, ``float``,
    ``bool``, ``str``, ``dict``, ``None``, ``object``, ``array``, ``array-like``, ``scipy.sparse matrix``,
    ``numpy.random.Generator``, ``SpectralEstimate``, quoted strings and ``{...}`` sets of quoted strings (a
    ``Literal``), each possibly after ``"sequence of "``; ``", optional"`` adds None when the default is None.

    Parameters
    ----------
    type_text : str
        A numpydoc type line (``"{'pooled', 'per-document'} or None"``, ``"array, shape (k,), optional"``).
    default : object, optional
        The argument's default.

    Returns
    -------
    object
        The annotation (``Literal["pooled", "per-document"] | None``), or :data:`NO_ANNOTATION` for a line with
        other words (``"ChainViews"``).
    """
    text = _SHAPE.sub("", type_text)
    optional = text.endswith(", optional")
    alternatives = [_word_annotation(word) for word in _ALTERNATIVES.split(text.removesuffix(", optional"))]
    if NO_ANNOTATION in alternatives:
        return NO_ANNOTATION
    if optional and default is None and None not in alternatives:
        alternatives.append(None)
    return functools.reduce(operator.or_, alternatives) if len(alternatives) > 1 else alternatives[0]


@dataclass(frozen=True)
class Param:
    """One declared argument: numpydoc type, default, constraint, documentation and annotation.

    Parameters
    ----------
    type : str
        The numpydoc type line (``"{'pooled', 'per-document'} or None"``).
    doc : str
        The description (one paragraph, or paragraphs separated by blank lines; wrapped when assembled).
    default : object, optional
        The default value; :data:`REQUIRED` (default) for an argument without one.
    constraint : object, optional
        An :class:`~specinit._validation.Interval`, :class:`~specinit._validation.Options`, or a callable
        ``(name, value) -> value``; None: any value (checked where it is used).
    annotation : object, optional
        The annotation of the argument in the public signatures (a type or a ``typing`` form); ``...``
        (default): read off ``type`` (:func:`annotation_of`; :data:`NO_ANNOTATION` when it is not made of
        simple words).
    """

    type: str
    doc: str
    default: Any = REQUIRED
    constraint: Any = None
    annotation: Any = ...

    def __post_init__(self) -> None:
        if self.annotation is ...:
            object.__setattr__(self, "annotation", annotation_of(self.type, self.default))

    def check(self, name: str, value: Any) -> Any:
        """``value`` checked against the constraint (and normalised), or as it is when there is none."""
        if self.constraint is None:
            return value
        if hasattr(self.constraint, "check"):
            return self.constraint.check(name, value)
        return self.constraint(name, value)

    def documented(self, doc: str) -> Param:
        """This declaration with another description: a family documenting a common argument its own way keeps
        its type, default and constraint."""
        return replace(self, doc=doc)

    def numpydoc(self, name: str) -> str:
        """The argument's entry in a ``Parameters`` section (unindented)."""
        paragraphs = [textwrap.fill(" ".join(part.split()), _WIDTH - 8) for part in self.doc.split("\n\n")]
        body = textwrap.indent("\n\n".join(paragraphs), "    ")
        return f"{name} : {self.type}\n{body}"


def parameters_section(table: Mapping[str, Param], names: Iterable[str]) -> str:
    """The numpydoc ``Parameters`` section of ``names`` (unindented), from ``table``."""
    return "Parameters\n----------\n" + "\n".join(table[name.lstrip("*")].numpydoc(name) for name in names)


def _with_parameters(doc: str, section: str) -> str:
    """``doc`` (a template's docstring) with ``section`` before its first later section, indented like it."""
    doc = inspect.cleandoc(doc)
    match = _LATER_SECTIONS.search(doc)
    at = match.start() if match else len(doc)
    head, tail = doc[:at].rstrip("\n"), doc[at:].lstrip("\n")
    return f"{head}\n\n{section}\n\n{tail}".rstrip() + "\n"


def _evaluated(annotation: Any, template: Callable) -> Any:
    """A template's return annotation as an object: a string (postponed annotations) evaluated in the template's
    module, kept as written when it names what the module imports for type checkers only."""
    if not isinstance(annotation, str):
        return annotation
    try:
        return eval(annotation, template.__globals__)  # noqa: S307 (the module's own annotation text)
    except NameError:
        return annotation


#: The return type of a template, kept by its public function (a type checker sees the template's annotation).
R = TypeVar("R")


def face(table: Mapping[str, Param], *, validate: bool = True) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Decorator: the public function of a template, with signature and ``Parameters`` section from ``table``.

    The template's ``def`` line names the arguments and their kinds (positional before the ``*``, keyword-only
    after it; ``**name`` for keyword arguments forwarded as they are); ``table`` gives each named argument its
    default and its documentation (type and description). Calls bind to the declared signature (missing
    defaults filled in, unknown names refused as Python refuses them), every argument with a constraint is
    checked against it (and normalised), and the template receives every argument named. The signature carries
    each argument's declared annotation (the ``annotation`` of its :class:`Param`) and the template's return
    annotation.

    Parameters
    ----------
    table : dict of str -> Param
        Declarations by argument name; every argument of the template must be declared.
    validate : bool, default True
        Check the arguments' constraints at the entry; False where the callee checks them once itself (the
        family skeleton checks the options of ``spectral``).

    Returns
    -------
    callable
        The decorator.

    Raises
    ------
    KeyError
        A template argument that ``table`` does not declare (at import).
    """

    def build(template: Callable[..., R]) -> Callable[..., R]:
        declared = inspect.signature(template)
        parameters = []
        for name, parameter in declared.parameters.items():
            param = table[name]
            keyword = parameter.kind is inspect.Parameter.VAR_KEYWORD
            default = parameter.default if keyword else param.default
            parameters.append(parameter.replace(default=default, annotation=param.annotation))
        signature = declared.replace(parameters=parameters,
                                     return_annotation=_evaluated(declared.return_annotation, template))
        names = [f"**{name}" if p.kind is inspect.Parameter.VAR_KEYWORD else name
                 for name, p in declared.parameters.items()]
        checked = [name for name in names if validate and not name.startswith("**")
                   and table[name].constraint is not None]

        @functools.wraps(template)
        def entry(*args: Any, **kwargs: Any) -> R:
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as exc:  # an unknown or missing argument, named as Python names it, under the entry
                raise TypeError(f"{current_entry()} {exc}") from None
            bound.apply_defaults()
            for name in checked:
                bound.arguments[name] = table[name].check(name, bound.arguments[name])
            return template(*bound.args, **bound.kwargs)

        entry.__signature__ = signature
        entry.__doc__ = _with_parameters(template.__doc__ or "", parameters_section(table, names))
        return public(entry)

    return build


# ---------------------------------------------------------------------------------------------------------------
# the scikit-learn face of a family, declared by the family (Family.estimator_face), built by specinit.estimators
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Face:
    """How one family meets scikit-learn: what :class:`specinit.estimators.SpectralEstimator` reads.

    A family declares it (:meth:`specinit.family.Family.estimator_face`) and
    :func:`specinit.estimators.estimator_class` builds the class; the callables
    receive the estimator, the family's public functions
    (:attr:`specinit.family.Family.faces`: its module, or the family itself)
    and the data.

    Parameters
    ----------
    class_name : str
        The estimator class's name (``"SpectralLDA"``).
    summary : str
        The class docstring's summary and extended description.
    parameters : dict of str -> Param
        The estimator's parameters in signature order (``n_components`` first, the only positional one).
    spectral : dict of str -> str
        The ``spectral`` argument each parameter sets (``n_components`` sets ``k``; ``random_state`` seeds the
        fit, 0 when None).
    data : {"counts", "rows", "sequences", "views"}
        Word counts (CSR, non-negative integers; sparse input welcome), real rows, or what the family's
        ``spectral`` takes (sequences: one 1-D array, equal-length rows, or a list of 1-D arrays; views: a list
        of arrays with the same rows).
    attributes : dict of str -> (str, callable)
        Fitted attributes: numpydoc description (``"type\\n    description"``) and ``(estimator, estimate, X) ->
        value`` (X: the training data).
    score : callable
        ``(estimator, faces, X) -> float``: ``score`` (higher is better; what ``GridSearchCV`` maximizes).
    mixins : tuple of str
        scikit-learn mixins, in order: ``"cluster"``, ``"feature_names"`` (class-name prefixed output names),
        ``"transformer"``, ``"density"``.
    refine : callable, optional
        ``(estimator, faces, X, estimate) -> estimate`` after ``spectral``.
    transform : callable, optional
        ``(estimator, faces, X) -> array``: the fitted model's ``transform``.
    predict_proba : callable, optional
        ``(estimator, faces, X) -> array``: posterior component (or state) probabilities; with it the model
        answers ``predict_proba`` and ``predict``.
    predict : callable, optional
        ``(estimator, faces, X) -> array``: the most probable components (default: the argmax of
        ``predict_proba``).
    answers : frozenset of str
        Further questions the fitted model answers: ``"score_samples"``, ``"bic"`` (``bic``, ``aic``),
        ``"perplexity"``, ``"partial_fit"``, ``"deferred_update"`` (``partial_fit`` only takes the batch's moments
        in, through the family's ``defer``; the parameters are recovered, by the family's ``update`` on the last
        batch, when something first reads them).
    fixed : dict
        ``spectral`` arguments the face sets itself.
    from_data : callable, optional
        ``(estimator, X) -> dict``: ``spectral`` arguments read off the training data (a parameter left None).
    constraints : dict of str -> list
        The constraints of the parameters that neither the common ones (``n_components``, ``random_state``,
        ``max_iter``) nor their declaration's constraint covers: :class:`~specinit._validation.Interval`,
        :class:`~specinit._validation.Options`, or scikit-learn's own forms (``None``, ``"array-like"``,
        ``"boolean"``, a type); ``fit`` and ``partial_fit`` check every parameter against them.
    refine_arguments : dict of str -> str
        The parameter each argument of the refinement comes from (``reg`` of ``gmm.refine`` is ``reg_covar``): an
        error the refinement raises about its argument names the parameter.
    """

    class_name: str
    summary: str
    parameters: Mapping[str, Param]
    spectral: Mapping[str, str]
    data: str
    attributes: Mapping[str, tuple[str, Callable]]
    score: Callable
    mixins: tuple = ()
    refine: Callable | None = None
    transform: Callable | None = None
    predict_proba: Callable | None = None
    predict: Callable | None = None
    answers: frozenset = frozenset()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    from_data: Callable | None = None
    constraints: Mapping[str, list] = field(default_factory=dict)
    refine_arguments: Mapping[str, str] = field(default_factory=dict)


def n_components_param(what: str, default: int | Literal["auto"], rule: str) -> Param:
    """The ``n_components`` of a face: what it counts, its default, and the ``"auto"`` rule of ``rule``."""
    return Param("int or 'auto'", f"Number of {what}; ``\"auto\"``: chosen from the data by the rule of "
                 f"``{rule}`` (:meth:`specinit.family.Family.choose_k`: the spectrum of the second moment bounds it, "
                 f"the score :meth:`score` reports picks it).", default)


#: The ``random_state`` of every face.
RANDOM_STATE = Param("int, optional", "Seed of the fit (None: 0, so repeated fits agree).", None)


def max_iter_param(refine: Callable, steps: str) -> Param:
    """The ``max_iter`` of a face whose fit ends with the family's ``refine`` (same default)."""
    default = inspect.signature(refine).parameters["max_iter"].default
    return Param("int", f"{steps} after the spectral estimate (:func:`{refine.__module__}.refine` with its other "
                 f"defaults); 0: the spectral estimate alone.", default)


def refined(estimator: SpectralEstimator, faces: Any, X: Any, estimate: SpectralEstimate) -> SpectralEstimate:
    """The family's ``refine`` from the spectral estimate (its defaults, ``max_iter`` and the seed), unless
    ``max_iter`` is 0."""
    if not estimator.max_iter:
        return estimate
    return faces.refine(X, estimate, max_iter=estimator.max_iter, seed=estimator._seed).estimate


def mean_log_likelihood(estimator: SpectralEstimator, faces: Any, X: Any) -> float:
    """The mean log-likelihood per row (``GaussianMixture.score``)."""
    return float(np.mean(faces.log_likelihood(X, estimator.estimate_)))


def predicted(estimator: SpectralEstimator, estimate: SpectralEstimate, X: Any) -> np.ndarray:
    """The fitted attribute ``labels_``: the most probable component of every training row."""
    return estimator.predict(X)


def responsibilities(estimator: SpectralEstimator, faces: Any, X: Any) -> np.ndarray:
    """Posterior component probabilities of every row (the family's ``predict``)."""
    return faces.predict(X, estimator.estimate_)[0]


def _state_marginals(estimator, faces, X):
    from specinit.distributions.hmm import posterior_marginals  # JAX, loaded when a chain face first predicts

    return posterior_marginals(X, estimator.estimate_)


def _state_paths(estimator, faces, X):
    from specinit.distributions.hmm import viterbi

    return viterbi(X, estimator.estimate_)


def _total_log_likelihood(estimator, faces, X) -> float:
    return float(np.sum(faces.log_likelihood(X, estimator.estimate_)))


def chain_face(class_name: str, name: str, refine: Callable, summary: str, parameters: dict, spectral: dict,
               attributes: dict, from_data: Callable | None = None, answers: frozenset = frozenset(),
               constraints: dict | None = None) -> Face:
    """A hidden Markov model's face: sequences in, Baum-Welch after the moments, hmmlearn's attribute names."""
    return Face(
        class_name=class_name, summary=summary,
        parameters={
            "n_components": n_components_param("hidden states", 2, f'{name}.spectral(X, "auto")'),
            **parameters,
            "max_iter": max_iter_param(refine, "Baum-Welch iterations"),
            "random_state": RANDOM_STATE,
        },
        spectral={"n_components": "k", **spectral}, data="sequences", refine=refined,
        attributes={
            "startprob_": ("ndarray, shape (n_components,)\n    Initial state distribution.",
                           lambda estimator, estimate, X: estimate.params["init"]),
            "transmat_": ("ndarray, shape (n_components, n_components)\n    Transition matrix (rows sum to one).",
                          lambda estimator, estimate, X: estimate.params["transition"]),
            **attributes,
        },
        predict_proba=_state_marginals, predict=_state_paths, score=_total_log_likelihood,
        answers=frozenset({"score_samples"}) | answers, from_data=from_data, constraints=constraints or {},
        refine_arguments={"max_iter": "max_iter"})


#: The view options whose declaration carries no constraint scikit-learn's form can hold.
_VIEW_CONSTRAINTS = {"kinds": ["array-like", None], "dims": ["array-like", None],
                     "bandwidth": [Interval(float, 0.0, None, open="low"), "array-like", None],
                     "exchangeable": ["boolean"]}


def view_face(class_name: str, family: Family, refine: Callable, summary: str, options: tuple,
              answers: frozenset = frozenset()) -> Face:
    """A multi-view mixture's face: a list of views in, EM after the moments, classes out."""
    declared = family.declared()
    return Face(
        class_name=class_name, summary=summary, mixins=("cluster", "density"),
        parameters={
            "n_components": n_components_param("classes", 2, f'{family.name}.spectral(X, "auto")'),
            **{name: declared[name] for name in options},
            "max_iter": max_iter_param(refine, "EM iterations"),
            "random_state": RANDOM_STATE,
        },
        spectral={"n_components": "k", **{name: name for name in options}}, data="views",
        refine=refined, refine_arguments={"max_iter": "max_iter"},
        constraints={name: constraint for name, constraint in _VIEW_CONSTRAINTS.items() if name in options},
        attributes={
            "weights_": ("ndarray, shape (n_components,)", lambda estimator, estimate, X: estimate.params["weights"]),
            "labels_": ("ndarray, shape (n_samples,)\n    Most probable class of every training observation.",
                        predicted),
        },
        predict_proba=responsibilities, transform=responsibilities,
        score=mean_log_likelihood,
        answers=frozenset({"score_samples", "bic"}) | answers)
