"""scikit-learn faces of the families: one estimator class, specialised by one declaration per family.

:class:`SpectralEstimator` is everything an estimator does: check ``X``,
call the family's ``spectral`` (then its refinement when asked), keep the
:class:`~specinit.estimate.SpectralEstimate` as ``estimate_`` and answer
under scikit-learn's names. A :class:`Face` declares what differs between
families: the estimator's parameters (each a :class:`~specinit.faces.Param`,
declared once, with the ``spectral`` argument it sets), the data (word
counts or rows), the refinement, the fitted attributes and the questions the
fitted model answers (``transform``, ``predict``, ``score_samples``,
``bic``, ``partial_fit``). :func:`estimator_class` turns a face into the
public class -- ``__init__`` signature (what ``get_params`` and ``clone``
read), docstring and scikit-learn mixins -- so a spectral topic model goes in
a ``Pipeline`` after ``CountVectorizer`` and in ``GridSearchCV`` over
``n_components``, and a mixture answers ``predict``, ``score`` and ``bic``
like ``GaussianMixture``. The estimate still warm-starts NumPyro
(``model.estimate_.init_params(...)``).

As in scikit-learn, constructors store and ``fit`` and ``partial_fit``
validate: every parameter against its constraints (``_parameter_constraints``,
scikit-learn's ``InvalidParameterError`` naming the parameter and the
estimator), and a value the family refuses is reported under the parameter's
name and the estimator's method (``SpectralGaussianMixture.fit``), not the
family's argument. :func:`expected_failed_checks` lists, with the reasons,
the checks of ``check_estimator`` that cannot apply to a face (those that feed
real rows to a face that takes counts, sequences or views).

scikit-learn (1.6 or later) comes with the base install.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, Callable, Mapping

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, DensityMixin, TransformerMixin
from sklearn.utils import TransformerTags
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from specinit import _validation
from specinit._validation import bad_argument, check_count_matrix, warn
from specinit.faces import Param, parameters_section
from specinit.family import MOMENTS_STATE

__all__ = ["Face", "SpectralEstimator", "SpectralFactors", "SpectralGaussianHMM", "SpectralGaussianMixture",
           "SpectralHMM", "SpectralKernelMultiView", "SpectralLDA", "SpectralMultiView", "SpectralTopicMixture",
           "estimator_class", "expected_failed_checks"]


@dataclass(frozen=True)
class Face:
    """How one family meets scikit-learn: what :class:`SpectralEstimator` reads.

    Parameters
    ----------
    family : str
        The module of :mod:`specinit.models`.
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
    refine : callable, optional
        ``(estimator, module, X, estimate) -> estimate`` after ``spectral``.
    transform : callable, optional
        ``(estimator, module, X) -> array``: the fitted model's ``transform``.
    predict_proba : callable, optional
        ``(estimator, module, X) -> array``: posterior component (or state) probabilities; with it the model
        answers ``predict_proba`` and ``predict``.
    predict : callable, optional
        ``(estimator, module, X) -> array``: the most probable components (default: the argmax of
        ``predict_proba``).
    score : callable
        ``(estimator, module, X) -> float``: ``score`` (higher is better; what ``GridSearchCV`` maximizes).
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
        scikit-learn constraints (``sklearn.utils._param_validation``: ``Interval``, ``StrOptions``, ``None``,
        ``"array-like"``, ...) of the parameters that neither :data:`_COMMON_CONSTRAINTS` nor their declaration's
        constraint covers; ``fit`` and ``partial_fit`` check every parameter against them.
    refine_arguments : dict of str -> str
        The parameter each argument of the refinement comes from (``reg`` of ``gmm.refine`` is ``reg_covar``): an
        error the refinement raises about its argument names the parameter.
    """

    family: str
    summary: str
    parameters: Mapping[str, Param]
    spectral: Mapping[str, str]
    data: str
    attributes: Mapping[str, tuple[str, Callable]]
    score: Callable
    refine: Callable | None = None
    transform: Callable | None = None
    predict_proba: Callable | None = None
    predict: Callable | None = None
    answers: frozenset = frozenset()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    from_data: Callable | None = None
    constraints: Mapping[str, list] = field(default_factory=dict)
    refine_arguments: Mapping[str, str] = field(default_factory=dict)


def _answers(question: str) -> Callable:
    return lambda estimator: question in estimator.face.answers


#: The constraints of the parameters every face (or most) has.
_COMMON_CONSTRAINTS = {
    "n_components": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
    "random_state": [Interval(Integral, 0, None, closed="left"), None],
    "max_iter": [Interval(Integral, 0, None, closed="left")],
}


def _converted(constraint) -> list | None:
    """scikit-learn's form of a family's declared constraint (:class:`specinit._validation.Interval` or
    :class:`~specinit._validation.Options`), or None for another kind."""
    if isinstance(constraint, _validation.Options):
        return [StrOptions(set(constraint.values))]
    if not isinstance(constraint, _validation.Interval):
        return None
    excluded = {"low": ("low",), "high": ("high",), "both": ("low", "high")}.get(constraint.open, ())
    low, high = constraint.low, constraint.high
    if constraint.kind is float:  # finite: infinite ends are open
        low, high = (-np.inf if low is None else low), (np.inf if high is None else high)
    closed_low = low is not None and np.isfinite(low) and "low" not in excluded
    closed_high = high is not None and np.isfinite(high) and "high" not in excluded
    closed = {(True, True): "both", (True, False): "left", (False, True): "right"}.get((closed_low, closed_high),
                                                                                      "neither")
    interval = Interval(Integral if constraint.kind is int else Real, low, high, closed=closed)
    return [interval, None] if constraint.none else [interval]


def _parameter_constraints(name: str, face: Face) -> dict:
    """Every parameter's scikit-learn constraints: the face's, the common ones, else the declaration's."""
    constraints = {}
    for parameter, declaration in face.parameters.items():
        found = face.constraints.get(parameter) or _COMMON_CONSTRAINTS.get(parameter) or _converted(
            declaration.constraint)
        if found is None:
            raise TypeError(f"estimator_class({name!r}): the parameter {parameter!r} has no constraint; declare it "
                            f"in the face's constraints.")
        constraints[parameter] = found
    return constraints


#: An error of the family about one of its arguments (:func:`specinit._validation.bad_argument`).
_ARGUMENT_ERROR = re.compile(r"The '(?P<name>[^']+)' argument of (?P<entry>\S+) (?P<rest>.*)", re.DOTALL)


def _speaks(method: str) -> Callable:
    """``method`` re-raising the family's errors about its arguments under the estimator's names.

    An error naming a ``spectral`` (or refinement) argument that a parameter sets becomes scikit-learn's
    ``InvalidParameterError`` naming that parameter and ``Estimator.method``; one naming the data argument names
    ``X`` and ``Estimator.method``. The message's substance is kept.
    """

    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            try:
                return func(self, *args, **kwargs)
            except (ValueError, TypeError) as error:
                translated = self._translated(error, method)
                if translated is None:
                    raise
                raise translated from error

        return wrapper

    return decorate


class SpectralEstimator:
    """The scikit-learn face of a family: what every estimator of :mod:`specinit.estimators` does.

    A class built by :func:`estimator_class` is this one, the face's
    scikit-learn mixins and ``BaseEstimator``, in that order (its methods
    first: the mixins' defaults such as ``DensityMixin.score`` do not hide
    them); it carries its :class:`Face` as ``face``, and its parameters and
    fitted attributes are those the face declares (see its docstring).
    """

    face: Face

    @property
    def _module(self):
        return importlib.import_module(f"specinit.models.{self.face.family}")

    @property
    def _seed(self) -> int:
        return 0 if self.random_state is None else self.random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        if self.face.data == "counts":
            tags.input_tags.sparse = True
            tags.input_tags.positive_only = True
        if self.face.data == "sequences" and "n_symbols" in self.face.parameters:  # categorical symbols
            tags.input_tags.positive_only = True
        if self.face.transform is not None and tags.transformer_tags is None:
            tags.transformer_tags = TransformerTags()
        tags.requires_fit = True
        return tags

    def _translated(self, error: Exception, method: str) -> Exception | None:
        """``error`` (a family's argument error) naming the estimator's parameter, or None when it names none."""
        match = _ARGUMENT_ERROR.match(str(error))
        caller = f"{type(self).__name__}.{method}"
        if (type(error) not in (ValueError, TypeError) or match is None
                or match["entry"].startswith(f"{type(self).__name__}.")):
            return None
        names = {"seed": "random_state", **{argument: parameter for parameter, argument in self.face.spectral.items()},
                 **{argument: parameter for argument, parameter in self.face.refine_arguments.items()}}
        name, bracket, subscript = match["name"].partition("[")  # kinds[0]: an entry of kinds
        if name in names:
            return InvalidParameterError(f"The '{names[name]}{bracket}{subscript}' parameter of {caller} "
                                         f"{match['rest']}")
        data_argument = next(iter(inspect.signature(self._module.spectral).parameters))
        if match["name"] in (data_argument, "X"):
            return type(error)(f"The 'X' argument of {caller} {match['rest']}")
        return None

    @property
    def _n_features_out(self):
        return self.estimate_.k

    def _data(self, X, reset: bool):
        """``X`` validated for the family (CSR float64 counts, or float64 rows), with scikit-learn's bookkeeping."""
        if self.face.data in ("sequences", "views"):  # not one matrix: the family validates them
            return X
        if self.face.data == "counts":
            X = validate_data(self, X, accept_sparse="csr", dtype=np.float64, reset=reset, ensure_min_samples=1)
            check_non_negative(X, type(self).__name__)
            return check_count_matrix(X, "X")
        return validate_data(self, X, dtype=np.float64, reset=reset, ensure_min_samples=2 if reset else 1)

    def _spectral_arguments(self) -> dict:
        arguments = {self.face.spectral[name]: getattr(self, name) for name in self.face.parameters
                     if name in self.face.spectral and name != "n_components"}
        return {**arguments, **self.face.fixed, "seed": self._seed}

    @_speaks("fit")
    def fit(self, X, y=None):
        """Fit the family to ``X``: its ``spectral`` (then its refinement, as the parameters ask).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts (non-negative integers, e.g. ``CountVectorizer`` output) for the topic faces, real rows
            otherwise.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        sklearn.utils._param_validation.InvalidParameterError
            A parameter outside its constraints, or one the family refuses (the error names the parameter).
        """
        self._validate_params()
        X = self._data(X, reset=True)
        derived = {} if self.face.from_data is None else self.face.from_data(self, X)
        estimate = self._module.spectral(X, self.n_components, **{**self._spectral_arguments(), **derived})
        if self.face.refine is not None:
            estimate = self.face.refine(self, self._module, X, estimate)
        return self._keep(estimate, X)

    def _keep(self, estimate, X):
        vars(self).pop("_deferred", None)
        self.estimate_ = estimate
        for name, (_, value) in self.face.attributes.items():
            setattr(self, name, value(self, estimate, X))
        return self

    @available_if(_answers("partial_fit"))
    @_speaks("partial_fit")
    def partial_fit(self, X, y=None):
        """Add a batch to the fit (online: the family's ``update``).

        The first call fits the batch; each later call merges the batch's
        moments with those kept in ``estimate_`` exactly and recovers the
        parameters from everything seen: topics by anchor words (warm-started)
        closed by EM sweeps over the last batch (:func:`specinit.models.lda.update`),
        topics and weights of the mixture of unigrams by the same anchor words
        (:func:`specinit.models.single_topic.update`; no EM), or the moment
        estimate of a Gaussian mixture, an HMM, a multi-view
        mixture or independent factors, equal to that of one fit on all the
        rows, sequences or observations (:func:`specinit.models.gmm.update`,
        :func:`specinit.models.hmm.update`,
        :func:`specinit.models.multiview.update`,
        :func:`specinit.models.factors.update`; no EM), for a Gaussian
        HMM, on all the sequences binned by the first batch's quantiles
        (:func:`specinit.models.gaussian_hmm.update`), or, for a kernel
        multi-view mixture, with the first batch's feature maps and a density
        support sampled from every observation
        (:func:`specinit.models.kernel_multiview.update`). ``n_components="auto"``
        is chosen on the first batch by the rule :meth:`fit` follows
        (:meth:`specinit.family.Family.choose_k`) and kept. Parameters
        that only :meth:`fit` reads (refinement steps) are not used. The model
        answers its questions after every batch; ``estimate_.save`` keeps the
        moments, so a loaded estimate continues (``update(X_next, estimate)``).
        The topic and kernel multi-view faces defer the recovery, which costs
        about one fit whatever the batch's size: ``partial_fit`` merges the
        moments (:meth:`specinit.family.Family.defer`) and keeps the last
        batch, and the parameters are recovered (for topics with that batch's
        closing sweeps) when ``estimate_``, a fitted attribute or a method
        that reads them is first used: the estimate of the same batches given
        one by one to ``update`` (for topics the eigensolver starts from the
        last recovered fit, cold before the first). Streaming many batches and
        then using the model costs one recovery; using it after every batch,
        one per batch (the estimates ``update`` returns).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features), sequences, or views
            The new documents' word counts, rows, whole sequences, or views.
        y : ignored

        Returns
        -------
        self

        Raises
        ------
        ValueError
            A model fitted by :meth:`fit` (it keeps no moments to merge with), or a batch with another number of
            words.
        sklearn.utils._param_validation.InvalidParameterError
            A parameter outside its constraints, or one the family refuses (the error names the parameter).
        """
        self._validate_params()
        module, kept, fitted = self._module, vars(self), self.__sklearn_is_fitted__()
        if "estimate_" in kept and not any(key.startswith(MOMENTS_STATE) for key in self.estimate_.state):
            raise ValueError(f"{type(self).__name__}.partial_fit continues a model built by partial_fit; this one "
                             f"was fitted by fit, which keeps no moments to merge with (call partial_fit on a new "
                             f"{type(self).__name__}).")
        X = self._data(X, reset=not fitted)
        derived = {} if fitted or self.face.from_data is None else self.face.from_data(self, X)
        spectral_arguments = {**self._spectral_arguments(), **derived}
        if "_deferred" in kept:
            previous, latest, k = kept["_deferred"]
            previous = module.FAMILY.defer(latest, previous, k, **self._update_arguments(spectral_arguments))
        else:
            previous, k = kept.get("estimate_"), self.n_components
            if isinstance(k, str) and k == "auto":  # chosen on the first batch, as fit chooses it, then kept
                k = previous.k if previous is not None else module.spectral(X, "auto", **spectral_arguments).k
        if "deferred_update" in self.face.answers:
            for name in ("estimate_", *self.face.attributes):  # read again once recovered
                kept.pop(name, None)
            self._deferred = (previous, X, k)
            return self
        return self._keep(module.update(X, previous, k=k, **self._update_arguments(spectral_arguments)), X)

    def _update_arguments(self, spectral_arguments: dict) -> dict:
        """The keyword arguments of the family's ``update`` but ``k``: the estimator's, else ``update``'s defaults."""
        parameters = inspect.signature(self._module.update).parameters
        return {name: spectral_arguments.get(name, parameter.default) for name, parameter in parameters.items()
                if parameter.kind is parameter.KEYWORD_ONLY and name != "k"
                and (name in spectral_arguments or parameter.default is not parameter.empty)}

    def __sklearn_is_fitted__(self) -> bool:
        return "estimate_" in vars(self) or "_deferred" in vars(self)

    @_speaks("partial_fit")
    def __getattr__(self, name: str):
        # a deferred update (partial_fit of the topic faces) is recovered when its parameters are first read
        deferred = vars(self).get("_deferred")
        if deferred is None or not (name == "estimate_" or name in self.face.attributes):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        previous, latest, k = deferred  # kept until the recovery succeeds (_keep drops it)
        self._keep(self._module.update(latest, previous, k=k, **self._update_arguments(self._spectral_arguments())),
                   latest)
        return getattr(self, name)

    @available_if(lambda estimator: estimator.face.transform is not None)
    @_speaks("transform")
    def transform(self, X):
        """The fitted model's representation of every row (topic proportions, posterior memberships).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)

        Returns
        -------
        ndarray, shape (n_samples, n_components)
            Rows sum to one.
        """
        check_is_fitted(self)
        return self.face.transform(self, self._module, self._data(X, reset=False))

    @available_if(lambda estimator: estimator.face.predict_proba is not None)
    @_speaks("predict_proba")
    def predict_proba(self, X):
        """Posterior component probabilities of every row (of every step, for sequences).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features), or sequences

        Returns
        -------
        ndarray, shape (n_samples, n_components), or one (T, n_components) array per sequence
        """
        check_is_fitted(self)
        return self.face.predict_proba(self, self._module, self._data(X, reset=False))

    @available_if(lambda estimator: estimator.face.predict_proba is not None)
    @_speaks("predict")
    def predict(self, X):
        """Most probable component of every row (the most probable state path of every sequence).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features), or sequences

        Returns
        -------
        ndarray of int, shape (n_samples,), or one path per sequence
        """
        if self.face.predict is None:
            return self.predict_proba(X).argmax(axis=1)
        check_is_fitted(self)
        return self.face.predict(self, self._module, self._data(X, reset=False))

    @available_if(_answers("score_samples"))
    @_speaks("score_samples")
    def score_samples(self, X):
        """Log-likelihood of every row (of every sequence).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features), or sequences

        Returns
        -------
        ndarray, shape (n_samples,) or (n_sequences,)
        """
        check_is_fitted(self)
        return self._module.log_likelihood(self._data(X, reset=False), self.estimate_)

    @_speaks("score")
    def score(self, X, y=None) -> float:
        """The face's score of ``X`` (higher is better; what ``GridSearchCV`` maximizes).

        Topic faces: the held-out log-likelihood of the documents' tokens, a
        quantity that does not grow with ``n_components`` on documents the
        model was not fitted to, and the one ``n_components="auto"`` scores
        (:meth:`specinit.family.Family.choose_k`), so both pick the same k
        (no multinomial coefficient: tokens are scored as a sequence; LDA
        scores document completion, :func:`specinit.corpus.document_completion`,
        every document's topic proportions folded in on half of its tokens
        drawn with ``random_state`` and the other half scored; the mixture of
        unigrams every document's tokens with its topic summed out). Mixtures
        of rows: the mean log-likelihood per row (``GaussianMixture.score``).
        Hidden Markov models: the total log-likelihood of the sequences
        (hmmlearn's ``score``).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        float
            Finite, or ``-inf`` (with a warning) where a scored value has probability zero.
        """
        check_is_fitted(self)
        value = self.face.score(self, self._module, self._data(X, reset=False))
        if not np.isfinite(value):
            warn(f"{type(self).__name__}.score: the log-likelihood is not finite; scored as -inf.")
            return -np.inf
        return value

    @available_if(_answers("perplexity"))
    @_speaks("perplexity")
    def perplexity(self, X) -> float:
        """``exp(-log-likelihood / number of tokens)`` of the documents (lower is better).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features)
            Word counts.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        X = self._data(X, reset=False)
        return float(np.exp(-np.sum(self._module.log_likelihood(X, self.estimate_)) / max(float(X.sum()), 1.0)))

    @available_if(_answers("bic"))
    @_speaks("bic")
    def bic(self, X) -> float:
        """Bayesian information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        n = self._n_observations(X)
        return float(-2 * self.score(X) * n + self._module.FAMILY.n_free_parameters(self.estimate_) * np.log(n))

    @available_if(_answers("bic"))
    @_speaks("aic")
    def aic(self, X) -> float:
        """Akaike information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        return float(-2 * self.score(X) * self._n_observations(X) + 2 * self._module.FAMILY.n_free_parameters(
            self.estimate_))

    def _n_observations(self, X) -> int:
        """Rows (observations) of ``X``, as the family counts them for its BIC."""
        family = self._module.FAMILY
        return family.n_observations(family.refine_data(self._data(X, reset=False), self.estimate_))


def estimator_class(name: str, face: Face, mixins: tuple = ()) -> type:
    """The public estimator class of ``face``: signature, docstring and mixins from the declaration.

    Parameters
    ----------
    name : str
        The class name.
    face : Face
    mixins : tuple of type
        scikit-learn mixins (``ClusterMixin``, ``TransformerMixin``, ...).

    Returns
    -------
    type
        A subclass of :class:`SpectralEstimator`, ``mixins`` and ``sklearn.base.BaseEstimator``.
    """
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [inspect.Parameter(param_name, inspect.Parameter.POSITIONAL_OR_KEYWORD if i == 0 else
                                    inspect.Parameter.KEYWORD_ONLY, default=param.default)
                  for i, (param_name, param) in enumerate(face.parameters.items())]
    signature = inspect.Signature([self_parameter, *parameters])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for param_name in face.parameters:
            setattr(self, param_name, bound.arguments[param_name])

    __init__.__signature__ = signature
    __init__.__qualname__ = f"{name}.__init__"
    attributes = "\n".join(f"{attr} : {text}" for attr, (text, _) in face.attributes.items())
    doc = (f"{inspect.cleandoc(face.summary)}\n\n{parameters_section(face.parameters, list(face.parameters))}\n\n"
           f"Attributes\n----------\nestimate_ : SpectralEstimate\n    The fitted estimate (NumPyro warm starts).\n"
           f"{attributes}\nn_features_in_ : int\n")
    return type(name, (SpectralEstimator, *mixins, BaseEstimator),
                {"face": face, "__init__": __init__, "__doc__": doc, "__module__": __name__, "__qualname__": name,
                 "_parameter_constraints": _parameter_constraints(name, face)})


# ---------------------------------------------------------------------------------------------------------------
# the faces
# ---------------------------------------------------------------------------------------------------------------

def _n_components(what: str, default, rule: str) -> Param:
    return Param("int or 'auto'", f"Number of {what}; ``\"auto\"``: chosen from the data by the rule of "
                 f"``{rule}`` (:meth:`specinit.family.Family.choose_k`: the spectrum of the second moment bounds it, "
                 f"the score :meth:`score` reports picks it).", default)


_RANDOM_STATE = Param("int, optional", "Seed of the fit (None: 0, so repeated fits agree).", None)


def _lda_refine(estimator, module, X, estimate):
    if not estimator.refine_steps:
        return estimate
    return module.refine(X, estimate, num_steps=estimator.refine_steps, seed=estimator._seed).estimate


def _document_completion(estimator, module, X) -> float:
    from specinit.corpus import document_completion

    if not np.any(np.asarray(X.sum(axis=1)) >= 2):
        raise bad_argument("X", f"{type(estimator).__name__}.score", "at least one document with 2 or more tokens",
                           "none", describe=False)
    params = estimator.estimate_.params
    return document_completion(X, params["beta"], params["alpha"], seed=estimator._seed).log_likelihood


SpectralLDA = estimator_class("SpectralLDA", Face(
    family="lda",
    summary="Latent Dirichlet allocation by the method of moments (:func:`specinit.models.lda.spectral`).",
    parameters={
        "n_components": _n_components("topics", 10, 'lda.spectral(X, "auto")'),
        "alpha0": Param("float, optional", "``sum(alpha)``; ``None`` chooses it from the data.", None),
        "method": Param("{'anchor', 'tpm', 'svtd', 'eca', 'als'} or None", "Recovery of "
                        ":func:`specinit.models.lda.spectral`; ``None``: its default (anchor words closed by EM "
                        "sweeps; the tensor power method when ``alpha0`` is given), so ``SpectralLDA(k).fit(X)`` "
                        "and ``lda.spectral(X, k)`` give the same topics.", None),
        "refine_steps": Param("int", "Variational-EM steps after the spectral estimate "
                              "(:func:`specinit.models.lda.refine`); 0: none.", 0),
        "seed_words": Param("dict of str -> sequence, or sequence of sequences, optional", "Seeded topics "
                            "(:func:`specinit.models.lda.spectral`'s ``seed_words``): a few words per topic, by "
                            "column index or, with ``vocabulary``, by word; topic i is group i's.", None),
        "vocabulary": Param("sequence of str, optional", "The columns' words (e.g. "
                            "``CountVectorizer().get_feature_names_out()``): seed words by name, and the fit's "
                            "``estimate_.vocabulary``.", None),
        "random_state": _RANDOM_STATE,
    },
    spectral={"n_components": "k", "alpha0": "alpha0", "method": "method", "seed_words": "seed_words",
              "vocabulary": "vocabulary"},
    fixed={"doc_topics": False},
    constraints={"alpha0": [Interval(Real, 0, np.inf, closed="neither"), None],
                 "method": [StrOptions({"anchor", "tpm", "svtd", "eca", "als"}), None],
                 "refine_steps": [Interval(Integral, 0, None, closed="left")],
                 "seed_words": [dict, "array-like", None], "vocabulary": ["array-like", None]},
    refine_arguments={"num_steps": "refine_steps"},
    data="counts",
    refine=_lda_refine,
    attributes={
        "components_": ("ndarray, shape (n_components, n_features)\n    Topic-word probabilities (rows sum to one; "
                        "scikit-learn's LDA keeps unnormalized pseudo-counts).",
                        lambda estimator, estimate, X: estimate.params["beta"]),
        "doc_topic_prior_": ("ndarray, shape (n_components,)\n    ``alpha``.",
                             lambda estimator, estimate, X: estimate.params["alpha"]),
    },
    transform=lambda estimator, module, X: module.document_topics(X, estimator.components_,
                                                                   estimator.doc_topic_prior_),
    score=_document_completion,
    answers=frozenset({"perplexity", "partial_fit", "deferred_update"}),
), (ClassNamePrefixFeaturesOutMixin, TransformerMixin))


def _mean_log_likelihood(estimator, module, X) -> float:
    return float(np.mean(module.log_likelihood(X, estimator.estimate_)))


def _predicted(estimator, estimate, X):
    return estimator.predict(X)


def _responsibilities(estimator, module, X):
    return module.predict(X, estimator.estimate_)[0]


SpectralTopicMixture = estimator_class("SpectralTopicMixture", Face(
    family="single_topic",
    summary="The mixture of unigrams (one topic per document) by the method of moments, then EM.",
    parameters={
        "n_components": _n_components("topics", 10, 'single_topic.spectral(X, "auto")'),
        "method": Param("{'tpm', 'svtd', 'eca', 'als'}", "Tensor decomposition.", "tpm"),
        "max_iter": Param("int", "Most MAP-EM iterations after the spectral estimate "
                          "(:func:`specinit.models.single_topic.refine` with its defaults, which stop earlier on its "
                          "relative-gain rule); 0: none.", 500),
        "random_state": _RANDOM_STATE,
    },
    spectral={"n_components": "k", "method": "method"},
    data="counts",
    constraints={"method": [StrOptions({"tpm", "svtd", "eca", "als"})]},
    refine=lambda estimator, module, X, estimate: (module.refine(X, estimate, max_iter=estimator.max_iter).estimate
                                                   if estimator.max_iter else estimate),
    attributes={
        "components_": ("ndarray, shape (n_components, n_features)\n    Topic-word probabilities.",
                        lambda estimator, estimate, X: estimate.params["beta"]),
        "weights_": ("ndarray, shape (n_components,)", lambda estimator, estimate, X: estimate.params["weights"]),
        "labels_": ("ndarray, shape (n_samples,)\n    Most probable topic of every training document.", _predicted),
    },
    transform=_responsibilities,
    predict_proba=_responsibilities,
    score=lambda estimator, module, X: module.FAMILY.token_log_likelihood(X, estimator.estimate_),
    answers=frozenset({"perplexity", "partial_fit", "deferred_update"}),
), (ClusterMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin))


def _gmm_refine(estimator, module, X, estimate):
    if not estimator.max_iter:
        return estimate
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        result = module.refine(X, estimate, max_iter=estimator.max_iter, tol=estimator.tol, reg=estimator.reg_covar)
    for warning in caught:
        warnings.warn(warning.message, warning.category, stacklevel=3)
    return result.estimate


SpectralGaussianMixture = estimator_class("SpectralGaussianMixture", Face(
    family="gmm",
    summary="A Gaussian mixture started from the method-of-moments estimate, then EM (:mod:`specinit.models.gmm`).",
    parameters={
        "n_components": Param("int or 'auto'", "Number of components (more than the number of features: the "
                              "lifted moments of :func:`specinit.models.gmm.lifted_fit`); ``\"auto\"``: chosen by "
                              "``gmm.spectral(X, \"auto\")`` (:meth:`specinit.family.Family.choose_k`).", 1),
        "covariance_type": Param("{'spherical', 'diag', 'common'}", "One variance per component, per component "
                                 "and coordinate, or one for all.", "spherical"),
        "max_iter": Param("int", "EM iterations after the spectral estimate; 0: the spectral estimate alone.", 500),
        "tol": Param("float, optional", "EM stops when the mean log-likelihood gain is below ``tol`` "
                     "(scikit-learn's rule). Default None: the relative rule of :func:`specinit.models.gmm.refine` "
                     "(with its split-merge moves), so the face's fit is ``gmm.refine(X, gmm.spectral(X, k, "
                     "covariance=covariance_type))``.", None),
        "reg_covar": Param("float", "Added to every variance, relative to the data's mean variance.", 1e-6),
        "random_state": _RANDOM_STATE,
    },
    spectral={"n_components": "k", "covariance_type": "covariance"},
    data="rows",
    constraints={"covariance_type": [StrOptions({"spherical", "diag", "common"})],
                 "tol": [Interval(Real, 0, np.inf, closed="left"), None],
                 "reg_covar": [Interval(Real, 0, np.inf, closed="left")]},
    refine_arguments={"reg": "reg_covar", "tol": "tol", "max_iter": "max_iter"},
    refine=_gmm_refine,
    attributes={
        "weights_": ("ndarray, shape (n_components,)", lambda estimator, estimate, X: estimate.params["weights"]),
        "means_": ("ndarray, shape (n_components, n_features)", lambda estimator, estimate, X: estimate.params["loc"]),
        "covariances_": ("ndarray\n    Variances: (n_components,) spherical, (n_components, n_features) diag, () "
                         "common.", lambda estimator, estimate, X: estimate.params["scale"] ** 2),
        "converged_": ("bool\n    Whether EM met its stopping rule (True without EM: ``max_iter=0``, "
                       ":meth:`partial_fit`).",
                       lambda estimator, estimate, X: bool(estimate.diagnostics.get("refine/converged", True))),
        "n_iter_": ("int\n    EM steps (0 without EM).",
                    lambda estimator, estimate, X: int(estimate.diagnostics.get("refine/n_iter", 0))),
        "lower_bound_": ("float\n    Final mean log-likelihood per sample.",
                         lambda estimator, estimate, X: estimator.score(X)),
        "labels_": ("ndarray, shape (n_samples,)\n    Most probable component of every training row.", _predicted),
    },
    score=_mean_log_likelihood,
    predict_proba=_responsibilities,
    answers=frozenset({"score_samples", "bic", "partial_fit"}),
), (ClusterMixin, DensityMixin))


def _declared(family: str, name: str) -> Param:
    """The declaration of ``name`` among ``family``'s arguments (the estimator reuses it)."""
    return importlib.import_module(f"specinit.models.{family}").FAMILY.declared()[name]


SpectralFactors = estimator_class("SpectralFactors", Face(
    family="factors",
    summary="""Independent non-Gaussian factors by the method of moments (:mod:`specinit.models.factors`).

    ``x = loc + h @ loadings + noise``, with independent skewed (Gamma) or
    kurtotic factors ``h``: the noise-corrected covariance whitens the third
    or fourth cumulant, whose decomposition gives the loadings in one pass,
    with no local optima (the model FastICA and ``FactorAnalysis`` users
    fit). ``transform`` gives the factor scores ``E[h | x]`` (linear).""",
    parameters={
        "n_components": Param("int or 'auto'", "Number of factors, at most the number of features (fewer to "
                              "estimate the noise); ``\"auto\"``: the eigengap of the noise-corrected covariance "
                              "(:meth:`specinit.models.factors.Factors.choose_k`).", 2),
        "cumulant": _declared("factors", "cumulant"),
        "noise": _declared("factors", "noise"),
        "random_state": _RANDOM_STATE,
    },
    spectral={"n_components": "k", "cumulant": "cumulant", "noise": "noise"},
    fixed={"scores": False},
    data="rows",
    attributes={
        "components_": ("ndarray, shape (n_components, n_features)\n    Loadings (each factor's direction and "
                        "scale).", lambda estimator, estimate, X: estimate.params["loadings"]),
        "mean_": ("ndarray, shape (n_features,)", lambda estimator, estimate, X: estimate.params["loc"]),
        "noise_variance_": ("float\n    Variance of the isotropic noise.",
                            lambda estimator, estimate, X: float(estimate.params["noise"]) ** 2),
    },
    transform=lambda estimator, module, X: module.factor_scores(estimator.estimate_, X),
    score=_mean_log_likelihood,
    answers=frozenset({"score_samples", "partial_fit"}),
), (ClassNamePrefixFeaturesOutMixin, TransformerMixin))


def _refined(estimator, module, X, estimate):
    """The family's ``refine`` from the spectral estimate (its defaults, ``max_iter`` and the seed), unless
    ``max_iter`` is 0."""
    if not estimator.max_iter:
        return estimate
    return module.refine(X, estimate, max_iter=estimator.max_iter, seed=estimator._seed).estimate


def _max_iter(family: str, steps: str) -> Param:
    """The ``max_iter`` of a face whose fit ends with the family's ``refine`` (same default)."""
    default = inspect.signature(importlib.import_module(f"specinit.models.{family}").refine).parameters["max_iter"]
    return Param("int", f"{steps} after the spectral estimate (:func:`specinit.models.{family}.refine` with its "
                 f"other defaults); 0: the spectral estimate alone.", default.default)


def _state_marginals(estimator, module, X):
    from specinit.distributions.hmm import posterior_marginals

    return posterior_marginals(X, estimator.estimate_)


def _state_paths(estimator, module, X):
    from specinit.distributions.hmm import viterbi

    return viterbi(X, estimator.estimate_)


def _total_log_likelihood(estimator, module, X) -> float:
    return float(np.sum(module.log_likelihood(X, estimator.estimate_)))


def _chain_face(family: str, summary: str, parameters: dict, spectral: dict, attributes: dict,
                from_data=None, answers: frozenset = frozenset(), constraints: dict | None = None) -> Face:
    """A hidden Markov model's face: sequences in, Baum-Welch after the moments, hmmlearn's attribute names."""
    return Face(
        family=family, summary=summary,
        parameters={
            "n_components": _n_components("hidden states", 2, f'{family}.spectral(X, "auto")'),
            **parameters,
            "max_iter": _max_iter(family, "Baum-Welch iterations"),
            "random_state": _RANDOM_STATE,
        },
        spectral={"n_components": "k", **spectral}, data="sequences", refine=_refined,
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


def _symbols_seen(estimator, X) -> dict:
    from specinit.engine.sequences import as_sequences

    if estimator.n_symbols is not None:
        return {"n_symbols": estimator.n_symbols}
    return {"n_symbols": 1 + max(int(sequence.max()) for sequence in as_sequences(X, categorical=True))}


SpectralHMM = estimator_class("SpectralHMM", _chain_face(
    "hmm",
    """A categorical hidden Markov model by the method of moments, then Baum-Welch (:mod:`specinit.models.hmm`).

    The question of hmmlearn's ``CategoricalHMM``, started where Baum-Welch
    has no local optimum to fear: the sliding triples of the sequences give
    the chain's parameters in one pass. ``X`` is what
    :func:`specinit.models.hmm.spectral` takes -- one 1-D array of symbols,
    equal-length rows, or a list of 1-D arrays -- not hmmlearn's
    concatenated column with ``lengths``. ``predict`` gives every sequence's
    most probable state path (Viterbi), ``predict_proba`` the posterior
    state marginals, ``score`` the total log-likelihood.""",
    {"n_symbols": Param("int, optional", "V, the number of distinct symbols; None: one more than the largest "
                        "symbol of the training sequences.", None)},
    {},
    {"emissionprob_": ("ndarray, shape (n_components, n_symbols)\n    Emission probabilities (rows sum to one).",
                       lambda estimator, estimate, X: estimate.params["emission"])},
    from_data=_symbols_seen, answers=frozenset({"partial_fit"}),
    constraints={"n_symbols": [Interval(Integral, 1, None, closed="left"), None]},
))


SpectralGaussianHMM = estimator_class("SpectralGaussianHMM", _chain_face(
    "gaussian_hmm",
    """A hidden Markov model with scalar Gaussian emissions by the method of moments, then Baum-Welch.

    The question of hmmlearn's ``GaussianHMM`` (one feature) without its
    local optima at the start (:mod:`specinit.models.gaussian_hmm`: the
    observations binned by quantiles give the chain, exact moments the state
    means and variances). ``X`` is what
    :func:`specinit.models.gaussian_hmm.spectral` takes -- one 1-D array,
    equal-length rows, or a list of 1-D arrays.""",
    {"n_bins": _declared("gaussian_hmm", "n_bins")},
    {"n_bins": "n_bins"},
    {"means_": ("ndarray, shape (n_components,)\n    State means.",
                lambda estimator, estimate, X: estimate.params["loc"]),
     "covars_": ("ndarray, shape (n_components,)\n    State variances.",
                 lambda estimator, estimate, X: estimate.params["scale"] ** 2)},
    answers=frozenset({"partial_fit"}),
))


#: The view options whose declaration carries no constraint scikit-learn's form can hold.
_VIEW_CONSTRAINTS = {"kinds": ["array-like", None], "dims": ["array-like", None],
                     "bandwidth": [Interval(Real, 0, np.inf, closed="neither"), "array-like", None],
                     "exchangeable": ["boolean"]}


def _view_face(family: str, summary: str, options: tuple, answers: frozenset = frozenset()) -> Face:
    """A multi-view mixture's face: a list of views in, EM after the moments, classes out."""
    return Face(
        family=family, summary=summary,
        parameters={
            "n_components": _n_components("classes", 2, f'{family}.spectral(X, "auto")'),
            **{name: _declared(family, name) for name in options},
            "max_iter": _max_iter(family, "EM iterations"),
            "random_state": _RANDOM_STATE,
        },
        spectral={"n_components": "k", **{name: name for name in options}}, data="views",
        refine=_refined, refine_arguments={"max_iter": "max_iter"},
        constraints={name: constraint for name, constraint in _VIEW_CONSTRAINTS.items() if name in options},
        attributes={
            "weights_": ("ndarray, shape (n_components,)", lambda estimator, estimate, X: estimate.params["weights"]),
            "labels_": ("ndarray, shape (n_samples,)\n    Most probable class of every training observation.",
                        _predicted),
        },
        predict_proba=_responsibilities, transform=_responsibilities,
        score=_mean_log_likelihood,
        answers=frozenset({"score_samples", "bic"}) | answers)


SpectralMultiView = estimator_class("SpectralMultiView", _view_face(
    "multiview",
    """A mixture of conditionally independent views (categorical or Gaussian) by the method of moments, then EM.

    ``X`` is the list of views of :func:`specinit.models.multiview.spectral`
    (at least three arrays with the same rows: one-hot or integer categorical
    views, real Gaussian ones); ``predict`` clusters the observations,
    ``score`` is the mean log-likelihood per observation.""",
    ("kinds", "dims", "target"), answers=frozenset({"partial_fit"})), (ClusterMixin, DensityMixin))


SpectralKernelMultiView = estimator_class("SpectralKernelMultiView", _view_face(
    "kernel_multiview",
    """A nonparametric multi-view mixture by kernel embeddings (:mod:`specinit.models.kernel_multiview`), then EM.

    ``X`` is the list of views of
    :func:`specinit.models.kernel_multiview.spectral`; the conditional
    densities are kernel embeddings projected onto Gaussian mixtures per
    view; ``predict`` clusters the observations.""",
    ("bandwidth", "rank", "features", "exchangeable", "m", "target", "max_support"),
    answers=frozenset({"partial_fit", "deferred_update"})), (ClusterMixin, DensityMixin))


#: The checks of ``check_estimator`` that fit the face on scikit-learn's real (n_samples, n_features) rows.
_FIT_ON_REAL_ROWS = (
    "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object", "check_estimators_dtypes",
    "check_estimators_fit_returns_self", "check_estimators_nan_inf", "check_estimators_overwrite_params",
    "check_estimators_pickle", "check_f_contiguous_array_estimator", "check_fit2d_1feature", "check_fit2d_1sample",
    "check_fit2d_predict1d", "check_fit_check_is_fitted", "check_fit_idempotent",
    "check_methods_sample_order_invariance", "check_methods_subset_invariance", "check_n_features_in",
    "check_n_features_in_after_fitting", "check_pipeline_consistency", "check_readonly_memmap_input")

#: The sparse, clustering, transformer and partial_fit checks, which also fit on real rows.
_FIT_ON_REAL_ROWS_TOO = (
    "check_clustering", "check_estimator_sparse_array", "check_estimator_sparse_matrix", "check_estimator_sparse_tag",
    "check_estimators_partial_fit_n_features", "check_transformer_data_not_an_array", "check_transformer_general",
    "check_transformer_n_iter", "check_transformer_preserve_dtypes")

#: The checks that judge the refusal of an array (1-D, empty, complex) by scikit-learn's wording.
_REFUSAL_WORDING = ("check_complex_data", "check_estimators_empty_data_messages", "check_fit1d")

#: The checks that fit a Gaussian HMM on scikit-learn's rows read as sequences (2 columns: too short for triples),
#: or ask for ``n_features_in_`` (sequences have no features).
_SHORT_SEQUENCES = ("check_estimators_overwrite_params", "check_estimators_fit_returns_self",
                    "check_readonly_memmap_input", "check_fit2d_1feature", "check_fit_idempotent",
                    "check_fit_check_is_fitted", "check_n_features_in", "check_fit2d_predict1d",
                    "check_n_features_in_after_fitting", "check_dtype_object")

#: The checks of ``check_estimator`` that cannot apply to a face, by what it takes (:func:`_input_kind`), and why;
#: every other check passes.
_NOT_APPLICABLE = {
    "counts": ("scikit-learn feeds real-valued or negative X; the topic faces take word counts (non-negative "
               "integers, as CountVectorizer gives them) and refuse anything else with a message naming the problem",
               _FIT_ON_REAL_ROWS + _FIT_ON_REAL_ROWS_TOO),
    "symbols": ("scikit-learn feeds real rows; SpectralHMM reads an array as sequences of integer symbols (a 1-D "
                "array is one sequence, a 2-D array equal-length sequences), has no features, and refuses real, "
                "empty, complex or negative input in its own words",
                _FIT_ON_REAL_ROWS + ("check_complex_data", "check_estimators_empty_data_messages",
                                     "check_positive_only_tag_during_fit")),
    "sequences": ("scikit-learn feeds rows of features; SpectralGaussianHMM reads an array as sequences (a 1-D array "
                  "is one sequence, a 2-D array equal-length sequences of length 3 or more), has no features, and "
                  "refuses empty, complex or object input in its own words",
                  _SHORT_SEQUENCES + _REFUSAL_WORDING),
    "views": ("scikit-learn feeds one (n_samples, n_features) array; the multi-view faces take a list of views (at "
              "least three arrays with the same rows) and refuse one array with a message saying so",
              _FIT_ON_REAL_ROWS + _FIT_ON_REAL_ROWS_TOO + _REFUSAL_WORDING + ("check_positive_only_tag_during_fit",)),
}


def _input_kind(face: Face) -> str:
    """What the face takes, as :data:`_NOT_APPLICABLE` reads it: its data, symbols for a categorical chain."""
    return "symbols" if face.data == "sequences" and "n_symbols" in face.parameters else face.data


#: Why ``check_fit_score_takes_y`` fails on a face that answers ``partial_fit``.
_PARTIAL_FIT_AFTER_FIT = ("the check calls partial_fit on a model fitted by fit, which keeps no moments to merge "
                          "with; partial_fit refuses and says so")


def expected_failed_checks(estimator) -> dict:
    """The checks of scikit-learn's ``check_estimator`` that cannot apply to ``estimator``, each with the reason.

    For ``check_estimator(estimator, expected_failed_checks=expected_failed_checks(estimator))`` (or
    ``parametrize_with_checks``): every other check passes. The checks that feed one real (n_samples, n_features)
    array cannot apply to the faces that take word counts, sequences or a list of views; a face that answers
    ``partial_fit`` continues only a model built by ``partial_fit``.

    Parameters
    ----------
    estimator : SpectralEstimator
        An estimator of this module.

    Returns
    -------
    dict of str -> str
        Check name -> why it cannot pass.
    """
    face = estimator.face
    reason, checks = _NOT_APPLICABLE.get(_input_kind(face), ("", ()))
    failed = {check: reason for check in checks
              if check != "check_transformer_n_iter" or "max_iter" in face.parameters}  # it reads max_iter alone
    if "partial_fit" in face.answers:
        failed.setdefault("check_fit_score_takes_y", _PARTIAL_FIT_AFTER_FIT)
    return failed
