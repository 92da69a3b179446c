"""scikit-learn faces of the families: one estimator class, specialised by one declaration per family.

:class:`SpectralEstimator` is everything an estimator does: check ``X``,
call the family's ``spectral`` (then its refinement when asked), keep the
:class:`~specinit.estimate.SpectralEstimate` as ``estimate_`` and answer
under scikit-learn's names. A :class:`Face`, declared by each family
(:meth:`specinit.family.Family.estimator_face`), holds what differs between
families: the estimator's parameters (each a :class:`~specinit.faces.Param`,
declared once, with the ``spectral`` argument it sets), the data (word
counts or rows), the refinement, the fitted attributes and the questions the
fitted model answers (``transform``, ``predict``, ``score_samples``,
``bic``, ``partial_fit``). :func:`estimator_class` turns a registered
family's face into its public class (the built-in families' are this
module's ``Spectral*`` classes; a user's family gets one the same way) --
``__init__`` signature (what ``get_params`` and ``clone``
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
import inspect
import re
from numbers import Integral, Real
from typing import Any, Callable, Self, TypeVar, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin, DensityMixin, TransformerMixin
from sklearn.utils import TransformerTags
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from specinit import _validation
from specinit._validation import bad_argument, check_count_matrix, warn
from specinit.faces import Face, parameters_section
from specinit.family import MOMENTS_STATE, Family
from specinit.family import family as registered_family
from specinit.models import FAMILIES

__all__ = ["Face", "SpectralEstimator", "estimator_class", "expected_failed_checks"]


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
        declared = face.constraints.get(parameter)
        if declared is not None:
            declared = [form for constraint in declared for form in (_converted(constraint) or [constraint])]
        found = declared or _COMMON_CONSTRAINTS.get(parameter) or _converted(declaration.constraint)
        if found is None:
            raise TypeError(f"estimator_class({name!r}): the parameter {parameter!r} has no constraint; declare it "
                            f"in the face's constraints.")
        constraints[parameter] = found
    return constraints


#: An error of the family about one of its arguments (:func:`specinit._validation.bad_argument`).
_ARGUMENT_ERROR = re.compile(r"The '(?P<name>[^']+)' argument of (?P<entry>\S+) (?P<rest>.*)", re.DOTALL)


#: A method of :class:`SpectralEstimator` (its type kept by :func:`_speaks`).
_Method = TypeVar("_Method", bound=Callable[..., Any])


def _speaks(method: str) -> Callable[[_Method], _Method]:
    """``method`` re-raising the family's errors about its arguments under the estimator's names.

    An error naming a ``spectral`` (or refinement) argument that a parameter sets becomes scikit-learn's
    ``InvalidParameterError`` naming that parameter and ``Estimator.method``; one naming the data argument names
    ``X`` and ``Estimator.method``. The message's substance is kept.
    """

    def decorate(func: _Method) -> _Method:
        @functools.wraps(func)
        def wrapper(self, *args, **kwargs):
            try:
                return func(self, *args, **kwargs)
            except (ValueError, TypeError) as error:
                translated = self._translated(error, method)
                if translated is None:
                    raise
                raise translated from error

        return cast(_Method, wrapper)

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
    family: Family

    @property
    def _faces(self):
        return self.family.faces

    def __reduce_ex__(self, protocol):
        # A user's family's class is built at run time and named in no module: its instances pickle by the
        # family's class (which unpickling imports, registering the family) and rebuild the estimator class.
        cls = type(self)
        if cls.__module__ == __name__ or _CLASSES.get(type(self.family)) is not cls:
            return super().__reduce_ex__(protocol)
        return _empty_estimator, (type(self.family),), self.__getstate__()

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
        data_argument = next(iter(inspect.signature(self._faces.spectral).parameters))
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
    def fit(self, X: Any, y: object = None) -> Self:
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
        estimate = self._faces.spectral(X, self.n_components, **{**self._spectral_arguments(), **derived})
        if self.face.refine is not None:
            estimate = self.face.refine(self, self._faces, X, estimate)
        return self._keep(estimate, X)

    def _keep(self, estimate, X):
        vars(self).pop("_deferred", None)
        self.estimate_ = estimate
        for name, (_, value) in self.face.attributes.items():
            setattr(self, name, value(self, estimate, X))
        return self

    @available_if(_answers("partial_fit"))
    @_speaks("partial_fit")
    def partial_fit(self, X: Any, y: object = None) -> Self:
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
        module, kept, fitted = self._faces, vars(self), self.__sklearn_is_fitted__()
        if "estimate_" in kept and not any(key.startswith(MOMENTS_STATE) for key in self.estimate_.state):
            raise ValueError(f"{type(self).__name__}.partial_fit continues a model built by partial_fit; this one "
                             f"was fitted by fit, which keeps no moments to merge with (call partial_fit on a new "
                             f"{type(self).__name__}).")
        X = self._data(X, reset=not fitted)
        derived = {} if fitted or self.face.from_data is None else self.face.from_data(self, X)
        spectral_arguments = {**self._spectral_arguments(), **derived}
        if "_deferred" in kept:
            previous, latest, k = kept["_deferred"]
            previous = self.family.defer(latest, previous, k, **self._update_arguments(spectral_arguments))
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
        parameters = inspect.signature(self._faces.update).parameters
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
        self._keep(self._faces.update(latest, previous, k=k, **self._update_arguments(self._spectral_arguments())),
                   latest)
        return getattr(self, name)

    @available_if(lambda estimator: estimator.face.transform is not None)
    @_speaks("transform")
    def transform(self, X: Any) -> np.ndarray:
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
        return self.face.transform(self, self._faces, self._data(X, reset=False))

    @available_if(lambda estimator: estimator.face.predict_proba is not None)
    @_speaks("predict_proba")
    def predict_proba(self, X: Any) -> np.ndarray | list[np.ndarray]:
        """Posterior component probabilities of every row (of every step, for sequences).

        Parameters
        ----------
        X : array-like or sparse matrix, shape (n_samples, n_features), or sequences

        Returns
        -------
        ndarray, shape (n_samples, n_components), or one (T, n_components) array per sequence
        """
        check_is_fitted(self)
        return self.face.predict_proba(self, self._faces, self._data(X, reset=False))

    @available_if(lambda estimator: estimator.face.predict_proba is not None)
    @_speaks("predict")
    def predict(self, X: Any) -> np.ndarray | list[np.ndarray]:
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
        return self.face.predict(self, self._faces, self._data(X, reset=False))

    @available_if(_answers("score_samples"))
    @_speaks("score_samples")
    def score_samples(self, X: Any) -> np.ndarray:
        """Log-likelihood of every row (of every sequence).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features), or sequences

        Returns
        -------
        ndarray, shape (n_samples,) or (n_sequences,)
        """
        check_is_fitted(self)
        return self._faces.log_likelihood(self._data(X, reset=False), self.estimate_)

    @_speaks("score")
    def score(self, X: Any, y: object = None) -> float:
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
        value = self.face.score(self, self._faces, self._data(X, reset=False))
        if not np.isfinite(value):
            warn(f"{type(self).__name__}.score: the log-likelihood is not finite; scored as -inf.")
            return -np.inf
        return value

    @available_if(_answers("perplexity"))
    @_speaks("perplexity")
    def perplexity(self, X: Any) -> float:
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
        return float(np.exp(-np.sum(self._faces.log_likelihood(X, self.estimate_)) / max(float(X.sum()), 1.0)))

    @available_if(_answers("bic"))
    @_speaks("bic")
    def bic(self, X: Any) -> float:
        """Bayesian information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        n = self._n_observations(X)
        return float(-2 * self.score(X) * n + self.family.n_free_parameters(self.estimate_) * np.log(n))

    @available_if(_answers("bic"))
    @_speaks("aic")
    def aic(self, X: Any) -> float:
        """Akaike information criterion on ``X`` (lower is better).

        Parameters
        ----------
        X : array-like, shape (n_samples, n_features)

        Returns
        -------
        float
        """
        return float(-2 * self.score(X) * self._n_observations(X) + 2 * self.family.n_free_parameters(
            self.estimate_))

    def _n_observations(self, X) -> int:
        """Rows (observations) of ``X``, as the family counts them for its BIC."""
        family = self.family
        return family.n_observations(family.refine_data(self._data(X, reset=False), self.estimate_))


#: The scikit-learn mixins a face names (:attr:`specinit.faces.Face.mixins`).
_MIXINS = {"cluster": ClusterMixin, "feature_names": ClassNamePrefixFeaturesOutMixin, "transformer": TransformerMixin,
           "density": DensityMixin}

#: Family class -> its estimator class (each built once).
_CLASSES: dict[type, type[SpectralEstimator]] = {}


def estimator_class(family: Family | str) -> type[SpectralEstimator]:
    """The scikit-learn estimator of a registered family: signature, docstring and mixins from its face.

    The class is built once per family from :meth:`specinit.family.Family.estimator_face`; the built-in
    families' classes are this module's ``Spectral*`` names, a user's family gets its own the same way.

    Parameters
    ----------
    family : Family or str
        A family, or a registered family's name.

    Returns
    -------
    type
        A subclass of :class:`SpectralEstimator`, the face's scikit-learn mixins and
        ``sklearn.base.BaseEstimator``.

    Raises
    ------
    TypeError
        A family that declares no estimator face.
    """
    if isinstance(family, str):
        family = registered_family(family)
    if type(family) in _CLASSES:
        return _CLASSES[type(family)]
    face = family.estimator_face()
    if face is None:
        raise bad_argument("family", "estimator_class", "a family that declares its estimator_face", family.name,
                           kind=TypeError)
    name = face.class_name
    self_parameter = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = [inspect.Parameter(param_name, inspect.Parameter.POSITIONAL_OR_KEYWORD if i == 0 else
                                    inspect.Parameter.KEYWORD_ONLY, default=param.default, annotation=param.annotation)
                  for i, (param_name, param) in enumerate(face.parameters.items())]
    signature = inspect.Signature([self_parameter, *parameters], return_annotation=None)

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
    builtin = family.name in FAMILIES  # found by pickle under this module's name
    bases = (SpectralEstimator, *(_MIXINS[mixin] for mixin in face.mixins), BaseEstimator)
    cls = cast(type[SpectralEstimator], type(name, bases, {
        "face": face, "family": family, "__init__": __init__, "__doc__": doc,
        "__module__": __name__ if builtin else type(family).__module__, "__qualname__": name,
        "_parameter_constraints": _parameter_constraints(name, face)}))
    _CLASSES[type(family)] = cls
    return cls


def _empty_estimator(family_class: type) -> SpectralEstimator:
    """An estimator of ``family_class`` with no attributes set (unpickling; :meth:`SpectralEstimator.__reduce_ex__`)."""
    cls = estimator_class(registered_family(family_class.name))
    return cls.__new__(cls)


#: The built-in families' estimators, by class name.
_BUILTIN = {cls.__name__: cls for cls in map(estimator_class, FAMILIES)}
globals().update(_BUILTIN)
__all__ += sorted(_BUILTIN)


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
    "check_transformer_n_iter", "check_non_transformer_estimators_n_iter", "check_transformer_preserve_dtypes")

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


#: The two n_iter checks of ``check_estimator``: one for transformers, one for the other estimators.
_N_ITER_CHECKS = ("check_transformer_n_iter", "check_non_transformer_estimators_n_iter")

#: Why ``check_fit_score_takes_y`` fails on a face that answers ``partial_fit``.
_PARTIAL_FIT_AFTER_FIT = ("the check calls partial_fit on a model fitted by fit, which keeps no moments to merge "
                          "with; partial_fit refuses and says so")


def expected_failed_checks(estimator: SpectralEstimator) -> dict[str, str]:
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
    # scikit-learn runs one n_iter check, by whether the face transforms; it reads max_iter alone
    transformer = "transformer" in face.mixins or face.transform is not None
    n_iter = "check_transformer_n_iter" if transformer else "check_non_transformer_estimators_n_iter"
    failed = {check: reason for check in checks
              if check not in _N_ITER_CHECKS or (check == n_iter and "max_iter" in face.parameters)}
    if "partial_fit" in face.answers:
        failed.setdefault("check_fit_score_takes_y", _PARTIAL_FIT_AFTER_FIT)
    return failed
