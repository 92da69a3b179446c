"""What only the two topic families (single-topic, LDA) share: alpha0 from the data, theta, the closing sweeps.

Spectral side: counts -> :class:`~specinit.engine.moments.CountMoments` ->
the LDA ``alpha0`` grid from one set of passes (:func:`fit_lda_grid`),
per-document ``theta`` given the topics (:func:`document_topics`), the
closing EM sweeps (:func:`close_topics`). Anchor-word recovery is an engine
recovery (:mod:`specinit.engine.anchors`); the minibatch SVI driver is
:mod:`specinit.models._svi`.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from specinit._validation import (
    as_generator,
    bad_argument,
    bad_stored,
    check_count_matrix,
    check_int,
    current_entry,
    Interval,
    Options,
    warn,
)
from specinit.distributions.counts import DocumentCounts, from_csr, topic_components
from specinit.align import match_components
from specinit.engine.anchors import OVERSAMPLE, fit_anchor, supported_k
from specinit.engine.backends import numba_kernel, one_blas_thread
from specinit.engine.backends.numpy import in_order
from specinit.engine.decompose import check_options, decompose
from specinit.engine.moments import WEIGHTINGS, CountMoments, PairSums
from specinit.engine.population import FactoredMoments
from specinit.engine.sources import CountSource, row_ranges
from specinit.engine.support import fix_signs_by_mass, project_to_simplex
from specinit.engine.whitening import IndefiniteMomentError, krylov_eigenspace
from specinit.estimate import SpectralEstimate
from specinit.faces import Param
from specinit.family import COMMON_OPTIONS, DEFERRED_ESTIMATE, MOMENTS_STATE, Family, k_param

if TYPE_CHECKING:
    import jax
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit
    from specinit.engine.sources import Counts
    from specinit.family import Stream

__all__ = ["ALPHA0", "ALPHA0_MAX", "K_FOLDS", "MODEL_ARGUMENTS", "POPULATION_TOPICS", "SEED_ANCHORS", "SEED_PRIOR",
           "SEED_WORDS", "TPM_REAL_TEXT", "UPDATE_ARGUMENTS", "AnchorUpdate", "SeedWords", "TopicData", "TopicFamily",
           "check_alpha0_grid", "check_eta", "close_topics", "default_alpha0_grid", "dirichlet_alpha",
           "document_topics", "fit_lda_grid", "lda_moment_fit", "raw_subspace", "seed_constraints",
           "topic_concentration", "warn_seeds", "warn_topics", "word_pairs"]


#: The topics given to the topic families' ``population_moments``, declared once.
POPULATION_TOPICS = Param("array-like, shape (k, V), or dict / SpectralEstimate", "Topics, rows on the simplex (or "
                          "every site by name).")

#: The arguments of the topic models' NumPyro programs (``lda.model``, ``single_topic.model``), declared once: their
#: guides, kernels and SVI drivers take them too, so generic code passes a model's arguments through.
MODEL_ARGUMENTS = {
    "counts": Param("array, scipy.sparse matrix or DocumentCounts, shape (N, V), optional", "Observed word counts. "
                    "Dense arrays suit small corpora (the likelihood is formed for all N x V entries). Sparse matrices "
                    "(as ``CountVectorizer`` returns them) and :class:`~specinit.distributions.counts.DocumentCounts` "
                    "minibatches are evaluated from the nonzeros only (memory O(nnz * k)); a minibatch with "
                    "``num_documents`` larger than its rows scales the document terms by ``num_documents / rows`` "
                    "(what ``svi`` feeds). ``None`` generates documents of lengths ``doc_lengths`` "
                    "(``numpyro.infer.Predictive``).", None,
                    annotation=ArrayLike | sp.spmatrix | DocumentCounts | None),
    "k": Param("int", "Number of topics.", constraint=Interval(int, 1)),
    "vocab_size": Param("int, optional", "V, needed only when ``counts`` is None (checked against the counts "
                        "otherwise).", None),
    "doc_lengths": Param("array, shape (N,), optional", "Needed only when ``counts`` is None (the lengths are "
                         "otherwise the counts' row sums).", None),
    "eta": Param("float or array of shape (k, V)", "Dirichlet concentration of the topics: one number for every "
                 "word of every topic (symmetric), or a (k, V) array, e.g. :func:`specinit.models.lda.seed_prior` "
                 "(extra mass on each seeded topic's seed words).", 0.1, lambda name, value: check_eta(name, value)),
    "subsample_size": Param("int, optional", "Documents per step for SVI (``numpyro.plate`` subsampling) with dense "
                            "counts; sparse counts are subsampled by feeding minibatches.", None),
}

def check_eta(name: str, value: ArrayLike) -> float | np.ndarray:
    """``eta`` as a float, or a finite positive float64 array (of shape (k, V), checked by the model)."""
    if np.ndim(value) == 0:
        return Interval(float, 0.0, open="low").check(name, value)
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.number) or array.ndim != 2 or not np.all(np.isfinite(array)) \
            or not np.all(array > 0):
        raise bad_argument(name, None, "a positive number or a (k, V) array of finite positive numbers", value)
    return array.astype(np.float64)


def topic_concentration(eta: ArrayLike, k: int, n_words: int) -> jax.Array:
    """The topics' Dirichlet concentration, (V,) for a number and (k, V) for an array (checked against k and V)."""
    if np.ndim(eta) == 0:
        return jnp.full(n_words, eta)
    if np.shape(eta) != (k, n_words):
        raise bad_argument("eta", None, f"a number or an array of shape (k, V) = ({k}, {n_words})",
                           f"shape {np.shape(eta)}", describe=False)
    return jnp.asarray(eta)


#: Folds of the held-out score that picks k (:meth:`TopicFamily.k_score`).
K_FOLDS = 3


@dataclass(frozen=True)
class TopicData:
    """Counts in both forms EM reads: CSR (M-step) and float64 :class:`DocumentCounts` (the likelihood)."""

    csr: object
    documents: DocumentCounts


#: The arguments every topic family's ``update`` declares the same way (its ``weighting`` is its own).
UPDATE_ARGUMENTS = {
    "counts": Param("array-like, scipy.sparse matrix, list of chunks or callable",
                    "The new (n, V) counts (any input :func:`spectral` reads, except Dask).",
                    annotation=ArrayLike | sp.spmatrix | Sequence[Any] | Callable[..., Any]),
    "estimate": DEFERRED_ESTIMATE,
    "k": Param("int, optional", "Number of topics: required for the first batch; with ``estimate`` it must be None or "
               "``estimate.k``.", None, Interval(int, 1, none=True)),
    "vocabulary": Param("sequence of str, optional", "Words of the columns; with ``estimate`` it must equal its "
                        "vocabulary.", None),
}


def _stored_eigenspace(estimate, n_features: int) -> np.ndarray:
    """The eigensolver's start block an online topic estimate keeps: finite, (V, at most k + OVERSAMPLE)."""
    space, found = estimate.state.get("eigenspace"), "none"
    if space is not None:
        space = np.asarray(space)
        floating = np.issubdtype(space.dtype, np.floating)
        finite = floating and bool(np.all(np.isfinite(space)))
        if finite and space.ndim == 2 and space.shape[0] == n_features and space.shape[1] <= estimate.k + OVERSAMPLE:
            return space
        found = f"an array of shape {space.shape} and dtype {space.dtype}"
        found += " with non-finite entries" if floating and not finite else ""
    raise bad_argument("estimate", None, f"an estimate whose state holds the eigensolver's finite (V, <= k + "
                       f"{OVERSAMPLE}) = ({n_features}, <= {estimate.k + OVERSAMPLE}) start block 'eigenspace'",
                       found, describe=False)


#: Extra Dirichlet concentration of a seed word in its own topic (:meth:`SeedWords.prior`) beside ``eta``.
SEED_PRIOR = 1.0

#: How a seed group makes its topic's anchor (:func:`specinit.engine.anchors.fit_anchor`).
SEED_ANCHORS = ("extreme", "pooled", "harmonic")

#: A seeded topic that explains less than this share of its seed words' occurrences is weakly supported.
SEED_SUPPORT = 0.5

#: Two seed groups whose anchor rows have a cosine above this name one topic.
SEED_COLLAPSE = 0.95

#: A seed group whose anchor row has a cosine above this with the corpus' average row names no topic (groups of words
#: that every topic uses: 0.9993-0.9995 in tests/models/test_seeded.py; the real groups of
#: ``benchmarks/bench_seeded.py``: 0.60-0.99).
SEED_GENERIC = 0.995


def warn_seeds(seeds: "SeedWords", report: dict) -> None:
    """Warn, naming the groups, of seeded topics the data hardly support or two groups that make one topic."""
    support = report.get("seed/support")
    if support is not None:
        weak = [f"{seeds.names[i]!r} ({support[i]:.0%})" for i in np.flatnonzero(support < SEED_SUPPORT)]
        if weak:
            warn(f"{current_entry()}: seeded topics weakly supported by the data: {', '.join(weak)} of their seed "
                 "words' occurrences are explained by their topic. Give words that mostly occur with that theme, "
                 "more of them, or fewer groups.")
    generality = report.get("seed/generality")
    if generality is not None:
        generic = [seeds.names[i] for i in np.flatnonzero(generality > SEED_GENERIC)]
        if generic:
            warn(f"{current_entry()}: seed groups {', '.join(map(repr, generic))} co-occur with every word as the "
                 f"corpus does (cosine with its average row > {SEED_GENERIC}): they name no topic. Give words that "
                 "mostly occur with that theme.")
    similarity = report.get("seed/similarity")
    if similarity is not None:
        close = [seeds.names[i] for i in np.flatnonzero(similarity > SEED_COLLAPSE)]
        if close:
            warn(f"{current_entry()}: seed groups {', '.join(map(repr, close))} co-occur with the same words "
                 f"(anchor cosine > {SEED_COLLAPSE}): they name one topic. Merge them or give more distinct words.")


@dataclass(frozen=True)
class SeedWords:
    """Seeded topics: groups of words, topic ``i`` being group ``i``'s (:func:`specinit.models.lda.spectral`).

    Built from what the user passes (:meth:`check`): a mapping of topic
    name to words, or a sequence of word groups; a word is a vocabulary
    entry (str, with ``vocabulary=``) or a column index.

    Attributes
    ----------
    names : tuple of str
        The seeded topics' names (the mapping's keys, else the groups' words joined by ``/``).
    groups : tuple of tuple
        Each group's words (str or int), in the order given, without repeats.
    given : tuple of tuple, optional
        The groups as the user gave them, when ``groups`` holds their columns (:meth:`resolved`).
    """

    names: tuple
    groups: tuple
    given: tuple | None = None

    @classmethod
    def check(cls, name: str, value: Any) -> "SeedWords | None":
        """The :class:`~specinit.faces.Param` constraint: ``value`` as a :class:`SeedWords` (None stays None).

        Raises
        ------
        TypeError
            Not a mapping or a sequence of groups, or a word that is neither a str nor an int.
        ValueError
            No group, an empty group, or a word in two groups.
        """
        if value is None or isinstance(value, cls):
            return value
        if isinstance(value, dict):
            names, groups = [str(key) for key in value], list(value.values())
        elif isinstance(value, (list, tuple)):
            names, groups = None, list(value)
        else:
            raise bad_argument(name, None, "a mapping of topic name to seed words, or a sequence of word groups",
                               value, kind=TypeError)
        if not groups:
            raise bad_argument(name, None, "at least one group of seed words", value)
        checked, owner = [], {}
        for i, group in enumerate(groups):
            label = repr(names[i]) if names else str(i)
            words = [group] if isinstance(group, (str, int, np.integer)) else group
            if not isinstance(words, (list, tuple, np.ndarray)) or len(words) == 0:
                kind = ValueError if isinstance(words, (list, tuple, np.ndarray)) else TypeError
                raise bad_argument(name, None, f"non-empty word groups (group {label} is empty or not a sequence)",
                                   group, kind=kind)
            unique = []
            for word in words:
                if isinstance(word, (bool, np.bool_)) or not isinstance(word, (str, int, np.integer)):
                    raise bad_argument(name, None, f"words given as str or column index (group {label})", word,
                                       kind=TypeError)
                word = word if isinstance(word, str) else int(word)
                if word in owner and owner[word] != label:
                    raise bad_argument(name, None, f"disjoint groups: {word!r} is in group {owner[word]} and in group "
                                       f"{label}", value, describe=False)
                if word not in owner:
                    owner[word] = label
                    unique.append(word)
            checked.append(tuple(unique))
        names = names or ["/".join(map(str, group[:3])) for group in checked]
        return cls(tuple(names), tuple(checked))

    def resolved(self, vocabulary: Sequence[str]) -> "SeedWords":
        """The same groups with every word as its column in ``vocabulary`` (checked as in :meth:`columns`)."""
        columns = self.columns(vocabulary, len(vocabulary), None)
        return SeedWords(self.names, tuple(tuple(int(c) for c in group) for group in columns),
                         self.given or self.groups)

    def columns(self, vocabulary: Sequence[str] | None, n_words: int, k: int | None, name: str = "seed_words") -> tuple:
        """Each group's column indices, checked against the vocabulary, ``V = n_words`` and ``k`` (None: unchecked).

        Raises
        ------
        ValueError
            More groups than topics, a word not in the vocabulary (or words without one), a column out of range.
        """
        if k is not None and len(self.groups) > k:
            raise bad_argument(name, None, f"at most k = {k} groups (one per seeded topic)",
                               f"{len(self.groups)} groups", describe=False)
        index = None if vocabulary is None else {str(word): i for i, word in enumerate(vocabulary)}
        columns = []
        for label, group in zip(self.names, self.groups):
            found = []
            for word in group:
                if isinstance(word, str):
                    if index is None:
                        raise bad_argument(name, None, "column indices, or words together with vocabulary=",
                                           f"the word {word!r} (group {label!r}) and no vocabulary", describe=False)
                    if word not in index:
                        close = difflib.get_close_matches(word, index, n=3)
                        hint = f" (close: {', '.join(close)})" if close else ""
                        raise bad_argument(name, None, "words of the vocabulary",
                                           f"{word!r} in group {label!r}, not in it{hint}", describe=False)
                    word = index[word]
                if not 0 <= word < n_words:
                    raise bad_argument(name, None, f"column indices in [0, {n_words})",
                                       f"{word} in group {label!r}", describe=False)
                found.append(word)
            columns.append(np.asarray(found, dtype=np.int64))
        if len({int(c) for group in columns for c in group}) < sum(len(group) for group in columns):
            raise bad_argument(name, None, "disjoint groups", "a column named twice (by word and by index)",
                               describe=False)
        return tuple(columns)

    def prior(self, columns: tuple, k: int, n_words: int, eta: float, strength: float = SEED_PRIOR) -> np.ndarray:
        """The (k, V) Dirichlet concentration of the topics: ``eta``, plus ``strength`` on each seed word in its topic.

        Parameters
        ----------
        columns : tuple of int arrays
            :meth:`columns`.
        k, n_words : int
            Topics and V.
        eta : float
            The symmetric concentration of every entry.
        strength : float, default :data:`SEED_PRIOR`
            The extra concentration of a seed word in its own topic.

        Returns
        -------
        ndarray, shape (k, V)
        """
        concentration = np.full((k, n_words), float(eta))
        for i, group in enumerate(columns):
            concentration[i, group] += strength
        return concentration

    def state(self, columns: tuple) -> dict:
        """The seeds as an estimate keeps them (``state``): every seed column and its group, so updates go on."""
        return {"seed_columns": np.concatenate(columns),
                "seed_group": np.repeat(np.arange(len(columns)), [len(group) for group in columns])}

    @classmethod
    def stored(cls, estimate: SpectralEstimate) -> "SeedWords | None":
        """The seeds an estimate was fitted with (:meth:`state` and the ``seed/names`` diagnostics), or None."""
        columns, group = estimate.state.get("seed_columns"), estimate.state.get("seed_group")
        if columns is None:
            return None
        columns, group = np.asarray(columns), np.asarray(group)
        names = tuple(str(name) for name in np.atleast_1d(estimate.diagnostics.get("seed/names", ())))
        n_words = estimate.params["beta"].shape[-1]
        if columns.dtype.kind not in "iu" or columns.ndim != 1 or np.any(columns < 0) or np.any(columns >= n_words):
            raise bad_stored("estimate", "seeds", "seed_columns", f"a 1-d integer array of columns in 0..{n_words - 1}",
                             f"shape {columns.shape} of {columns.dtype}")
        if group.dtype.kind not in "iu" or group.shape != columns.shape or np.any(group < 0) or len(names) != (
                group.max() + 1 if group.size else 0):
            raise bad_stored("estimate", "seeds", "seed_group", f"one group in 0..{len(names) - 1} per seed column "
                             f"({columns.size}), one group per name of diagnostics 'seed/names' ({len(names)})",
                             f"shape {group.shape} of {group.dtype}")
        columns, group = columns.astype(np.int64), group.astype(np.int64)
        words = cls.check("seed_words", {name: columns[group == i].tolist() for i, name in enumerate(names)})
        given = estimate.diagnostics.get("seed/words")
        return words if given is None else cls(words.names, words.groups, tuple(tuple(str(w).split()) for w in given))

    def closing_eta(self, columns: tuple, shape: tuple, strength: float) -> np.ndarray:
        """The closing sweeps' (k, V) concentration: :data:`CLOSING_ETA` plus ``strength`` on each seed word."""
        return self.prior(columns, *shape, CLOSING_ETA, strength)

    def closed(self, beta: np.ndarray, alpha: np.ndarray, columns: tuple) -> dict:
        """The seeded topics' weights and seed mass after the sweeps (``seed/topic_weight``, ``seed/seed_mass``).

        ``seed/support`` stays the anchor fit's (:func:`~specinit.engine.anchors.seed_report`): the sweeps keep each
        seed word in its own topic (:func:`seed_constraints`), so only the unconstrained fit measures the data's
        support.
        """
        return {"seed/topic_weight": alpha[:len(columns)] / alpha.sum(),
                "seed/seed_mass": np.array([beta[i, group].sum() for i, group in enumerate(columns)])}

    def diagnostics(self) -> dict:
        """The ``seed/names`` and ``seed/words`` diagnostics (words joined by spaces, one entry per group)."""
        return {"seed/names": np.asarray(self.names, dtype=str),
                "seed/words": np.asarray([" ".join(map(str, group)) for group in self.given or self.groups], dtype=str)}


#: The ``seed_words`` option of the topic families' anchor-word fits, declared once.
SEED_WORDS = Param("dict of str -> sequence, or sequence of sequences, optional", "Seeded topics "
                    "(``method=\"anchor\"``): a few words per topic, by vocabulary word (with "
                    "``vocabulary=``) or column index, as ``{\"name\": [words], ...}`` or ``[[words], ...]``; "
                    "topic ``i`` is group ``i``'s, its anchor made from the group (``seed_anchor``), the "
                    "other ``k - len(seed_words)`` topics found from the data. ``diagnostics`` report how "
                    "strongly the data support each group (``seed/*``); a weak or duplicated group warns.",
                    None, SeedWords.check, annotation=Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]] | None)


@dataclass(frozen=True)
class AnchorUpdate:
    """What :meth:`TopicFamily.anchor_update` returns: the batch, the merged summary and the recovered topics.

    Attributes
    ----------
    source : CountSource
        The batch, validated.
    batch, merged : PairSums
        The batch's summary and the merged one (everything seen).
    beta : ndarray, shape (k, V)
        Topics, in the previous fit's order.
    alpha : ndarray, shape (k,)
        ``alpha_sum`` times the topic probabilities, in the same order.
    report : dict
        Diagnostics of the anchor fit plus ``n_batches``.
    state : dict
        The merged summary and the eigensolver's leading Ritz block (``eigenspace``), to keep in the estimate.
    vocabulary : tuple of str or None
    seed_words : SeedWords or None
        The seeds of the fit, and their columns (``seed_columns``).
    """

    source: CountSource
    batch: PairSums
    merged: PairSums
    beta: np.ndarray
    alpha: np.ndarray
    report: dict
    state: dict
    vocabulary: tuple | None
    seed_words: SeedWords | None = None
    seed_columns: tuple = ()


class TopicFamily(Family):
    """What the topic families share: count moments, the limits on k, sign fixing, count data for EM."""

    options = {"weighting": Param("{'pooled', 'per-document'}", "Moment estimator: the pooled all-word estimators, or "
                                  "the average of per-document unbiased estimators.", "pooled", Options(WEIGHTINGS))}
    arguments = {
        "counts": Param("array-like or scipy.sparse matrix, shape (N, V)", "Non-negative integer word counts (or "
                        "chunks; see :class:`specinit.engine.moments.CountMoments`)."),
        "moments": Param("CountMoments or FactoredMoments", "Empirical moments (:class:`specinit.engine.moments."
                         "CountMoments`), or exact ones (:func:`population_moments`).",
                         annotation=CountMoments | FactoredMoments),
        "k": k_param("Number of topics, ``1 <= k < V``.", "the held-out score"),
        "floor": COMMON_OPTIONS["floor"].documented("Topic-word probabilities are floored at ``floor / V``."),
    }
    data_kind = "counts"
    summary = PairSums
    # The pair moment of short documents is a positive semi-definite signal plus sampling noise of both signs,
    # whose negative eigenvalues can exceed the smaller topics' eigenvalues: whiten with the top-k positive
    # eigenspace.
    whitening_eigenspace = "positive"

    def moments(self, counts: Counts, *, k: int, backend: str | Passes | None, weighting: str = "pooled",
                **options: Any) -> CountMoments:
        return CountMoments(counts, alpha0=options.get("alpha0"), weighting=weighting, backend=backend)

    def max_components(self, moments: CountMoments | FactoredMoments) -> tuple[int, str]:
        limits = [(moments.n_features - 1, f"smaller than the vocabulary size V={moments.n_features}")]
        n_docs = getattr(moments, "n_documents", None)
        if n_docs is not None:
            limits.append((n_docs, f"at most the number of usable documents ({n_docs} with >= 3 tokens)"))
        return min(limits)

    def topics(self, fit: ExchangeableFit, moments: CountMoments | FactoredMoments,
               k: int) -> tuple[np.ndarray, np.ndarray, dict]:
        """Sign-fixed topic rows and tensor eigenvalues of an exchangeable fit, with the shared checks."""
        if not np.all(np.abs(fit.eigenvalues) > 1e-12 * max(1.0, np.max(np.abs(fit.eigenvalues)))):
            raise ValueError(
                f"{current_entry()}: the whitened third moment is degenerate (tensor eigenvalues "
                f"{np.array2string(fit.eigenvalues, precision=3)}): some components carry no third-order signal. "
                "Try a smaller k or more data.")
        raw, eig, flips = fix_signs_by_mass(fit.components, fit.eigenvalues)
        report = {"sign_flips": flips}
        if hasattr(moments, "n_documents"):
            report.update(n_documents=moments.n_documents, n_dropped=moments.n_dropped)
        warn_topics(current_entry(), k, flips)  # the skeleton's projection reports the negative mass
        return raw, eig, report

    def batch_summary(self, counts: Counts, stored: PairSums | None, n_batches: int, *, weighting: str,
                      **options: Any) -> PairSums:
        """A batch's pair sums, weighted as the stored ones (the first batch fixes ``weighting``)."""
        return self._batch_sums(CountSource(counts), stored, weighting)

    def check_state(self, estimate: SpectralEstimate) -> None:
        """The stored pair sums, the eigensolver's start block (``eigenspace``) and the seeds, when kept."""
        super().check_state(estimate)
        if "eigenspace" in estimate.state:
            _stored_eigenspace(estimate, estimate.params["beta"].shape[-1])
        SeedWords.stored(estimate)

    def continued(self, estimate: SpectralEstimate | Stream | None, k: int | None, func: str) -> tuple:
        """:meth:`~specinit.family.Family.continued`, and ``k`` must be the estimate's (its eigenspace is the warm
        start)."""
        stored, previous, k, n_batches = super().continued(estimate, k, func)
        if stored is not None and previous is estimate and k != estimate.k:
            raise bad_argument("k", None, f"None or the estimate's k = {estimate.k}", k)
        return stored, previous, k, n_batches

    @staticmethod
    def _batch_sums(source: CountSource, stored, weighting: str) -> PairSums:
        """A batch's pair sums, weighted as the stored ones (the first batch fixes the weighting) and summed dense
        when they are dense (no sparse (V, V) product to convert)."""
        if stored is None:
            return PairSums.from_counts(source, weighting, "counts")
        return PairSums.from_counts(source, stored.weighting, "counts", dense=stored.dense)

    def anchor_update(self, counts: Counts, estimate: SpectralEstimate | Stream | None, k: int | None, *,
                      weighting: str, vocabulary: Sequence[str] | None, seed: int | np.random.Generator, floor: float,
                      alpha_sum: float = 1.0, noise_tol: float = 0.0,
                      seed_words: SeedWords | None = None) -> "AnchorUpdate":
        """The moment half of an online update: a batch's pair sums merged with the stored ones, anchor words.

        The summary of the documents seen so far (:class:`~specinit.engine.moments.PairSums`, stored in
        ``estimate.state`` under :data:`~specinit.family.MOMENTS_STATE`, or a :class:`~specinit.family.Stream`'s)
        and the batch's add up exactly; the topics are recovered from the merged pair moment by anchor words
        (:func:`~specinit.engine.anchors.fit_anchor`), the eigensolver started from the last recovered fit's
        leading Ritz block, and put in the order of its topics (matched by L1 distance).

        Parameters
        ----------
        counts : array-like, sparse matrix, list of chunks or callable
            The batch (validated here, once: the returned ``source`` reads it again).
        estimate : SpectralEstimate, Stream or None
            The fit to update, or the batches taken in since (:meth:`defer`); None for the first batch.
        k : int or None
            Topics; required for the first batch, else None or ``estimate.k``.
        weighting : {"pooled", "per-document"}
            The pair moment's estimator (the stored summary's, for later batches).
        vocabulary : sequence of str or None
            The columns' words; with ``estimate`` it must equal the estimate's.
        seed : int or numpy.random.Generator
        floor : float
        alpha_sum : float, default 1.0
            Sum of the returned ``alpha`` (topic probabilities times it).
        noise_tol : float, default 0
            The warm-started eigensolver's stop at the sampling noise
            (:func:`~specinit.engine.anchors.fit_anchor`).
        seed_words : SeedWords, optional
            Seeded topics (first batch; later batches keep the estimate's, :meth:`SeedWords.stored`): topic ``i``
            stays group ``i``'s from batch to batch.

        Returns
        -------
        AnchorUpdate

        Raises
        ------
        ValueError
            As :meth:`~specinit.family.Family.stream`, a ``k`` or ``vocabulary`` other than the estimate's,
            invalid counts.
        """
        func = current_entry()
        rng = as_generator(seed)
        stored, previous, k, n_batches = self.continued(estimate, k, func)
        if previous is not None:
            if vocabulary is not None and previous.vocabulary is not None and tuple(vocabulary) != previous.vocabulary:
                raise bad_argument("vocabulary", None, "the estimate's vocabulary", vocabulary)
            vocabulary = vocabulary if vocabulary is not None else previous.vocabulary
        kept = None if previous is None else SeedWords.stored(previous)
        if kept is not None and seed_words is not None and seed_words.names != kept.names:
            raise bad_argument("seed_words", None, f"None (the estimate keeps its seeds, {list(kept.names)})",
                               seed_words.names)
        seed_words = kept or seed_words
        if seed_words is not None and vocabulary is not None:
            seed_words = seed_words.resolved(vocabulary)
        source = CountSource(counts)  # validated once, read by the pair sums and by what follows
        batch = self._batch_sums(source, stored, weighting)
        merged = batch if stored is None else stored + batch
        columns = () if seed_words is None else seed_words.columns(None, batch.n_features, k)
        start = (np.zeros((batch.n_features, 0)) if previous is None
                 else _stored_eigenspace(previous, batch.n_features))
        with one_blas_thread():
            beta, alpha, eigenspace, report = fit_anchor(merged, k, func=func, seed=rng, floor=floor,
                                                         alpha_sum=alpha_sum, start=start, noise_tol=noise_tol,
                                                         seed_groups=columns)
        if previous is not None and len(columns) < k:
            # topics keep their labels from batch to batch: the new ones are put in the order of the closest old ones
            # (a seeded topic is its group's already)
            g = len(columns)
            order = np.concatenate([np.arange(g), g + match_components(previous.params["beta"][g:], beta[g:])])
            beta, alpha = beta[order], alpha[order]
        state = {MOMENTS_STATE + key: value for key, value in merged.to_arrays().items()}
        state.update(eigenspace=eigenspace)
        if seed_words is not None:
            state.update(seed_words.state(columns))
            report.update(seed_words.diagnostics())
        return AnchorUpdate(source, batch, merged, beta, alpha, {**report, "n_batches": n_batches}, state, vocabulary,
                            seed_words, columns)

    def held_out(self, train: sp.csr_matrix, test: sp.csr_matrix, estimate: SpectralEstimate) -> float:
        """The held-out log-likelihood of the documents ``test`` under ``estimate`` (fitted to ``train``), as the
        family's estimator scores them: what :meth:`k_score` averages over folds."""
        raise NotImplementedError(f"{self.name} scores no held-out documents")

    def k_score(self, counts: Counts, k: int, rng: np.random.Generator, **spectral_kw: Any) -> float:
        """Held-out log-likelihood of the k-topic fit, averaged over :data:`K_FOLDS` folds of the documents.

        The documents are shuffled and cut into :data:`K_FOLDS` folds; each fold is scored by the fit to the
        others, with the quantity the scikit-learn faces' ``score`` reports (so ``k="auto"`` and
        ``GridSearchCV(cv=K_FOLDS)`` over ``n_components`` estimate the same thing): LDA scores document
        completion (theta folded in on half of each held-out document's tokens,
        :func:`specinit.corpus.document_completion`); the single-topic model the held-out documents' tokens
        with their topic summed out, after 30 MAP-EM steps.
        """
        X = check_count_matrix(counts, "counts")
        folds = np.array_split(rng.permutation(X.shape[0]), K_FOLDS)
        total = 0.0
        for i, test in enumerate(folds):
            train = np.sort(np.concatenate(folds[:i] + folds[i + 1:]))
            estimate = self.spectral(X[train], k, seed=rng, **spectral_kw)
            total += self.held_out(X[train], X[np.sort(test)], estimate)
        return total / K_FOLDS

    def estimate_counts(self, counts: ArrayLike | sp.spmatrix,
                        estimate: SpectralEstimate | Mapping[str, Any]) -> sp.csr_matrix:
        """``counts`` as validated CSR with the estimate's number of columns."""
        V = estimate.params["beta"].shape[1]
        X = check_count_matrix(counts, "counts")
        if X.shape[1] != V:
            raise bad_argument("counts", None, f"{V} columns (the estimate's V)", X)
        return X

    def refine_data(self, counts: ArrayLike | sp.spmatrix, estimate: SpectralEstimate | Mapping[str, Any],
                    **options: Any) -> TopicData:
        X = self.estimate_counts(counts, estimate)
        return TopicData(X, from_csr(X, dtype=np.float64))

    def n_observations(self, data: TopicData) -> int:
        return int(data.csr.shape[0])

    def component_log_prob(self, params: Mapping[str, Any], data: TopicData) -> jax.Array:
        return topic_components(jnp.asarray(params["beta"]), data.documents)


# ---------------------------------------------------------------------------------------------------------------
# LDA with alpha0 chosen from the data
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RawSubspace:
    """The data-dependent pieces of every LDA moment, computed once for all ``alpha0``.

    The Dirichlet-corrected moments depend on ``alpha0`` only through
    low-rank terms in ``m1`` ([1]_ Lemma 3):
    ``M2(a0) = E2 - a0/(a0+1) m1 m1^T`` and
    ``M3(a0) = E3 - a0/(a0+2) sym(E2 (x) m1) + 2 a0^2/((a0+2)(a0+1)) m1^(x)3``.
    With an orthonormal basis ``Q`` (V, r) of the top eigenspace of ``E2``
    augmented by ``m1`` (so ``m1 = Q q`` exactly), every whitening of
    ``M2(a0)`` to rank ``k <= r - 1`` is ``W = Q A`` with a small (r, k)
    matrix ``A``, and ``M3(a0)(W, W, W)`` follows from ``E2(Q, Q)``,
    ``E3(Q, Q, Q)`` and ``q`` alone: one whitened pass serves the whole grid.

    Attributes
    ----------
    Q : ndarray, shape (V, r)
    e2 : ndarray, shape (r, r)
        ``Q^T E2 Q``.
    e3 : ndarray, shape (r, r, r)
        ``E3(Q, Q, Q)``.
    q : ndarray, shape (r,)
        ``Q^T m1``.
    ritz_residual : float
        Relative residual of the top-k Ritz pairs of ``E2`` on the Krylov space.
    passes : int
        Products with ``E2`` (passes over the data) spent on the space.
    """

    Q: np.ndarray
    e2: np.ndarray
    e3: np.ndarray
    q: np.ndarray
    ritz_residual: float
    passes: int


def raw_subspace(raw: CountMoments, k: int, *, oversample: int = 10, n_iter: int = 1, max_iter: int = 12,
                 tol: float = 1e-2, seed: int | np.random.Generator = 0) -> RawSubspace:
    """Block Krylov eigenspace of ``E2`` (with ``m1`` in it), then one whitened pass on a basis of it.

    ``raw`` is a :class:`~specinit.engine.moments.CountMoments` with
    ``alpha0=None`` (its ``m2_matmat`` is ``E2 @ Q``, its ``whitened_m3`` is
    ``E3(Q, Q, Q)``). The start block holds ``m1`` and ``k + oversample - 1``
    random columns, so ``m1`` lies in the Krylov space; the returned basis
    spans the top ``k + oversample - 1`` Ritz vectors of ``E2`` and ``m1``,
    and ``E2`` on it comes from the Krylov passes (one more pass of width
    one only if a thick restart dropped ``m1``'s direction). Passes over the
    data: between ``n_iter + 1`` and ``max_iter + 1`` products with ``E2``
    (until the top-k Ritz residual is below ``tol``;
    :func:`specinit.engine.whitening.krylov_eigenspace`) and one whitened
    pass.
    """
    rng = as_generator(seed, "raw_subspace")
    d = raw.n_features
    r = min(d - 1, k + oversample)
    m1 = raw.m1
    start = np.column_stack([m1, rng.standard_normal((d, r - 1))])
    space = krylov_eigenspace(raw.m2_matmat, start, k, min_passes=n_iter + 1, max_passes=max_iter + 1, tol=tol,
                              order="positive")
    passes = space.passes
    # The top r - 1 Ritz vectors, augmented by the direction of m1 outside them (so that the rank-one alpha0
    # terms live inside span(Q)); E2 on that direction comes from the Krylov passes while m1 is in the space (it
    # started there), from one more pass if a thick restart dropped it.
    top = space.vectors[:, : r - 1]
    Q, EQ = space.basis @ top, space.image @ top
    rest = m1 - Q @ (Q.T @ m1)
    if np.linalg.norm(rest) > 1e-12 * np.linalg.norm(m1):
        u = rest - Q @ (Q.T @ rest)
        u /= np.linalg.norm(u)
        coords = space.basis.T @ u
        if np.linalg.norm(u - space.basis @ coords) <= 1e-10:
            Eu = space.image @ coords
        else:
            Eu = raw.m2_matmat(u[:, None])[:, 0]
            passes += 1
        Q, EQ = np.column_stack([Q, u]), np.column_stack([EQ, Eu])
    e2 = Q.T @ EQ
    residual = space.residual
    del space, EQ  # the Krylov space and its image, (V, up to 5 blocks) each, are freed before the whitened pass
    e3 = raw.whitened_m3(Q)
    return RawSubspace(Q=Q, e2=0.5 * (e2 + e2.T), e3=e3, q=Q.T @ m1, ritz_residual=residual, passes=passes)


def _sym3(m):
    return m + m.transpose(0, 2, 1) + m.transpose(2, 0, 1)


def _lda_whitened(sub: RawSubspace, a0: float, k: int):
    """Whitening of ``M2(a0)`` inside span(Q) and the whitened ``M3(a0)``.

    Returns ``(ritz, A, s, T)``: all signed eigenvalues of ``Q^T M2(a0) Q``
    by decreasing magnitude, and (when it has k positive eigenvalues) the
    (r, k) whitening ``A`` (``W = Q A``) on the eigenvectors of the k
    largest ones ``s``, and the (k, k, k) tensor ``M3(a0)(W, W, W)``;
    ``A, s, T`` are None otherwise.
    """
    q = sub.q
    m2 = sub.e2 - a0 / (a0 + 1.0) * np.outer(q, q)
    vals, vecs = np.linalg.eigh(m2)
    top = np.argsort(-vals)[:k]  # the k largest: the top-k positive eigenspace (noise of both signs is skipped)
    s = vals[top]
    vals = vals[np.argsort(-np.abs(vals))]
    if np.any(s <= np.max(np.abs(vals)) * 1e-12):
        return vals, None, None, None
    A = vecs[:, top] / np.sqrt(s)
    e3 = np.einsum("abc,ai,bj,cl->ijl", sub.e3, A, A, A, optimize=True)
    e2w, m = A.T @ sub.e2 @ A, A.T @ q
    T = e3 - a0 / (a0 + 2.0) * _sym3(np.einsum("ij,l->ijl", e2w, m)) \
        + 2.0 * a0**2 / ((a0 + 2.0) * (a0 + 1.0)) * np.einsum("i,j,l->ijl", m, m, m)
    return vals, A, s, T


def lda_moment_fit(sub: RawSubspace, beta: np.ndarray, alpha: np.ndarray) -> tuple[float, float]:
    """Relative misfit of the LDA moments implied by ``(beta, alpha)`` to the data, on span(Q).

    Model pair and triple moments ([1]_ Sec. 2, Dirichlet moments):
    ``E2 = B^T (diag(alpha) + alpha alpha^T) B / (a0 (a0+1))`` and
    ``E3 = [g^(x)3 + sym(H (x) g) + 2 sum_i alpha_i B_i^(x)3] / (a0 (a0+1)(a0+2))``
    with ``g = B^T alpha``, ``H = B^T diag(alpha) B`` (all projected on Q).
    Returns ``(||E2_model - E2|| / ||E2||, ||E3_model - E3|| / ||E3||)``.
    """
    a0 = float(alpha.sum())
    G = beta @ sub.Q  # (k, r)
    g = G.T @ alpha
    H = (G.T * alpha) @ G
    m2 = (np.outer(g, g) + H) / (a0 * (a0 + 1.0))
    cube = np.einsum("i,ia,ib,ic->abc", alpha, G, G, G, optimize=True)
    m3 = (np.einsum("a,b,c->abc", g, g, g) + _sym3(np.einsum("ab,c->abc", H, g)) + 2.0 * cube) / (
        a0 * (a0 + 1.0) * (a0 + 2.0))
    return (float(np.linalg.norm(m2 - sub.e2) / np.linalg.norm(sub.e2)),
            float(np.linalg.norm(m3 - sub.e3) / np.linalg.norm(sub.e3)))


def dirichlet_alpha(eigenvalues: np.ndarray, alpha0: float) -> np.ndarray:
    """``alpha`` from the tensor eigenvalues of the Dirichlet-corrected moments at ``alpha0``: ``lambda_i = 2 /
    (a0 + 2) sqrt(a0 (a0 + 1) / alpha_i)`` ([1]_ Lemma 3), so ``alpha_i = 4 a0 (a0 + 1) / ((a0 + 2)^2 lambda_i^2)``.

    Parameters
    ----------
    eigenvalues : ndarray, shape (k,)
        Tensor eigenvalues (sign-fixed).
    alpha0 : float
        The concentration the moments were corrected with.

    Returns
    -------
    ndarray, shape (k,)
    """
    return 4 * alpha0 * (alpha0 + 1) / ((alpha0 + 2) ** 2 * eigenvalues**2)


def _lda_at(sub, a0, k, *, method, rng, floor, decompose_options, backend):
    """Decompose the whitened tensor at one ``alpha0`` (the power method where the ``backend``'s passes run) and
    map to (beta, alpha); None if M2 is indefinite."""
    ritz, A, s, T = _lda_whitened(sub, a0, k)
    if A is None:
        return ritz, None
    unwhiten = sub.Q @ (A * s)  # (W^T)^+ = U diag(s)^(1/2) = Q A diag(s)
    options = dict(decompose_options)
    if method == "svtd":
        norms = np.linalg.norm(unwhiten, axis=1)
        options.setdefault("directions", unwhiten[np.argsort(-norms)[:200]].T)
    dec = decompose(T, k, method, seed=rng, passes=backend, **options)
    raw_beta, eig, flips = fix_signs_by_mass((unwhiten @ dec.vectors).T, dec.weights)
    beta, proj = project_to_simplex(raw_beta, floor)
    alpha = dirichlet_alpha(eig, a0)
    return ritz, dict(beta=beta, alpha=alpha, dec=dec, s=s, flips=flips, negative_mass=proj["negative_mass"],
                      negative_eigenvalues=int(np.count_nonzero(eig < 0)))


#: Largest Dirichlet concentration ``alpha0`` (and ``alpha_sum``) accepted: beyond it every document has the
#: same topic proportions to 1e-8, the topics are not identified, and the moment corrections overflow far later.
ALPHA0_MAX = 1e8

#: The one declaration of ``alpha0`` (``None``: chosen from the data).
ALPHA0 = Interval(float, 0.0, ALPHA0_MAX, open="low", none=True)


def check_alpha0_grid(name: str, grid: ArrayLike | None) -> np.ndarray | None:
    """``alpha0_grid`` as a sorted float array of values in ``(0, ALPHA0_MAX]``, or None (the default grid)."""
    if grid is None:
        return None
    if isinstance(grid, (str, bytes)) or not np.iterable(grid):
        raise bad_argument(name, None, "a sequence of numbers", grid, kind=TypeError)
    try:
        values = np.asarray(grid, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise bad_argument(name, None, "a sequence of numbers", grid, kind=TypeError) from None
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values <= 0) or np.any(values > ALPHA0_MAX):
        raise bad_argument(name, None, f"a non-empty sequence of numbers in (0, {ALPHA0_MAX:g}]", grid)
    return np.sort(values)


def default_alpha0_grid(k: int) -> np.ndarray:
    """The default ``alpha0`` grid: 9 values geometrically spaced from 0.01 to ``k``."""
    return np.geomspace(0.01, max(float(k), 0.02), 9)


#: The tensor power method's settings on noisy real-text moments, under those the caller gives: the iterates
#: converge linearly (close, non-orthogonal components), and a tolerance of 1e-6 on unit vectors in up to 300 steps is
#: far below the noise of the moments (the engine's 1e-10 in 100 steps, which real corpora miss).
TPM_REAL_TEXT = {"tol": 1e-6, "n_iter": 300}

#: Pair log-likelihoods (nats per pair) closer than this to the best are treated as ties (0.2% in likelihood).
PAIR_TIE = 2e-3

#: Candidate values of sum(alpha) given the topics (the Dirichlet concentration used for theta).
ALPHA_SCALES = np.geomspace(1e-2, 1e2, 9)


def fit_lda_grid(raw: CountMoments, k: int, grid: ArrayLike, pairs: tuple[np.ndarray, np.ndarray, np.ndarray], *,
                 func: str, method: str, seed: int | np.random.Generator, floor: float,
                 decompose_options: Mapping[str, Any] | None,
                 alpha_sum: float = 1.0) -> tuple[np.ndarray, np.ndarray, dict]:
    """Fit LDA at every ``alpha0`` of ``grid`` from one set of passes and keep the best pair likelihood.

    For each ``alpha0`` of ``grid`` where ``M2(alpha0)`` is positive definite
    on its top k eigenvectors, the whitened ``M3(alpha0)`` is decomposed and
    mapped to valid parameters (sign fixing, projection onto the simplex).
    Each candidate -- topics ``beta`` and relative weights ``w`` from the
    tensor eigenvalues -- is scored by the pairwise composite log-likelihood
    of within-document word pairs (:func:`pair_log_likelihood`, closed form),
    maximized over the concentration ``sum(alpha)`` in :data:`ALPHA_SCALES`.
    Candidates within :data:`PAIR_TIE` of the best are ties, broken by the
    moment misfit (:func:`lda_moment_fit`, pair plus triple, zero at the true
    ``alpha0`` with exact moments). The chosen ``alpha0`` is decomposed again
    with the full settings and returned with ``alpha = alpha_sum * w``. (Second
    moments do not identify the concentration -- every candidate reproduces
    ``E2`` -- so the pair-optimal ``sum(alpha)`` is only reported.) All
    values are reported.

    Returns ``(beta, alpha, report)``.
    """
    grid = np.sort(np.asarray(grid, dtype=np.float64).ravel())
    rng = as_generator(seed, func)
    decompose_options = check_options(method, decompose_options, func)
    screen_method, screen_options = method, dict(decompose_options)
    if method == "tpm":
        # The grid is screened with a light power method (2 restarts, 20 steps: SVTD and ECA screens rank the grid
        # erratically on real text); the chosen alpha0 is decomposed again with the full settings.
        decompose_options = {**TPM_REAL_TEXT, **decompose_options}
        screen_options = {"n_restarts": 2, "n_iter": 20, "tol": 1e-4, **screen_options}
    sub = raw_subspace(raw, k, seed=rng)
    backend = getattr(raw, "passes", None)  # moments from data: the power method runs where their passes ran
    rows, misfits = [], {}  # a candidate's third-order misfit only: its (k, V) topics are freed before the next one
    for a0 in list(grid) + [None]:
        if a0 is None:
            if misfits:
                break
            # Even the smallest alpha0 leaves M2 indefinite: alpha0 -> 0 (M2 = E2, the single-topic limit).
            a0 = float(grid[0]) * 1e-3
        with warnings.catch_warnings(record=True):  # a screened candidate's warnings are not the fit's
            warnings.simplefilter("always")
            ritz, fit = _lda_at(sub, a0, k, method=screen_method, rng=np.random.default_rng(rng.integers(2**63)),
                                floor=floor, decompose_options=screen_options, backend=backend)
        if fit is None:
            rows.append((a0, False, np.nan, np.nan, np.nan))
            continue
        weights = fit["alpha"] / fit["alpha"].sum()
        terms = pair_terms(pairs, fit["beta"], weights)
        scores = [pair_log_likelihood(pairs, fit["beta"], weights * scale, terms) for scale in ALPHA_SCALES]
        best_scale = int(np.argmax(scores))
        misfits[a0] = float(sum(lda_moment_fit(sub, fit["beta"], fit["alpha"])))
        rows.append((a0, True, scores[best_scale], float(fit["alpha"].sum()), float(ALPHA_SCALES[best_scale])))
        del fit, terms  # before the next candidate's decomposition
    if not misfits:
        ks = supported_k(ritz)
        raise IndefiniteMomentError(
            f"The pair moment E2 itself has only {ks} positive eigenvalues, fewer than k={k} (signed top "
            f"eigenvalues: {np.array2string(ritz[: k + 1], precision=3)}): the data do not support k={k} "
            f"topics. Try k <= {ks} or more documents.").advise(func, "")
    scores = {r[0]: r[2] for r in rows if r[1]}
    top = max(scores, key=scores.get)
    # Candidates the pair likelihood does not separate from the best (within PAIR_TIE nats per pair; on data
    # drawn from LDA every candidate reproduces E2 and the pair likelihood is flat): among them, the best fit of
    # the pair and triple moments, as the third order identifies alpha0 under the model.
    tied = [a for a in scores if scores[top] - scores[a] <= PAIR_TIE]
    best = min(tied, key=misfits.get)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, fit = _lda_at(sub, best, k, method=method, rng=rng, floor=floor, decompose_options=decompose_options,
                         backend=backend)
    fit["warnings"] = [str(w.message) for w in caught]
    fit["alpha_tensor"] = fit["alpha"]
    fit["alpha"] = fit["alpha"] / fit["alpha"].sum() * alpha_sum
    if best < grid[0]:
        warn(f"{func}: M2(alpha0) is indefinite on its top {k} eigenvectors for every alpha0 of the grid "
             f"(smallest {grid[0]:.3g}); used alpha0 = {best:.3g} (the single-topic limit). k={k} is at the edge "
             f"of what the data support (the M2 spectrum supports k <= {supported_k(ritz)}).")
    ritz, *_ = _lda_whitened(sub, best, k)
    s = fit["s"]
    e2_misfit, e3_misfit = lda_moment_fit(sub, fit["beta"], fit["alpha"])
    report = {
        **fit["dec"].report(),
        "method": method,
        "weighting": getattr(raw, "weighting", "pooled"),
        "alpha0": float(best),
        "alpha0_selected": True,
        "alpha0_criterion_name": "pair composite log-likelihood per token pair (higher is better)",
        "alpha0_grid": np.array([r[0] for r in rows]),
        "alpha0_criterion": np.array([r[2] for r in rows]),
        "alpha0_moment_misfit": np.array([misfits[r[0]] if r[1] else np.nan for r in rows]),
        "alpha0_tied": np.array([r[0] in tied for r in rows]),
        "alpha0_feasible": np.array([r[1] for r in rows]),
        "alpha0_tensor_alpha_sum": np.array([r[3] for r in rows]),
        "alpha0_pair_optimal_alpha_sum": np.array([r[4] for r in rows]),
        "alpha_sum": float(fit["alpha"].sum()),
        "alpha_sum_tensor": float(fit["alpha_tensor"].sum()),
        "n_word_pairs": int(pairs[0].size),
        "moment_misfit_e2": e2_misfit,
        "moment_misfit_e3": e3_misfit,
        "m2_eigenvalues": ritz,
        "m2_condition_number": float(s[0] / s[-1]),
        "m2_ritz_residual": sub.ritz_residual,
        "m2_passes": sub.passes,
        "m2_spectral_gap": float(s[-1] / abs(ritz[k])) if ritz.size > k and ritz[k] != 0 else np.inf,
        "m2_eigengaps": np.abs(ritz[:-1]) / np.maximum(np.abs(ritz[1:]), 1e-300),
        "m2_negative_skipped": int(np.count_nonzero((ritz < 0) & (np.abs(ritz) > s[-1]))),
        "k_supported": supported_k(ritz),
        "tensor_eigenvalues": fit["dec"].weights,
        "sign_flips": fit["flips"],
        "negative_eigenvalues": fit["negative_eigenvalues"],
        "negative_mass": fit["negative_mass"],
        "n_documents": raw.n_documents,
        "n_dropped": raw.n_dropped,
    }
    for message in dict.fromkeys(fit["warnings"]):
        warn(f"{func} (alpha0 = {best:.3g}): {message}")
    warn_topics(func, k, report["sign_flips"], report["negative_mass"], report["k_supported"])
    return fit["beta"], fit["alpha"], report


def warn_topics(func: str, k: int, sign_flips: int, negative_mass: ArrayLike | None = None,
                supported: int | None = None) -> None:
    """The one warning of recovered topics that had to be repaired, with what to try (none when none was).

    Parameters
    ----------
    func : str
        The public entry, named first.
    k : int
        Topics.
    sign_flips : int
        Topics with negative total mass before sign fixing.
    negative_mass : array-like, optional
        Each topic's negative mass before projection onto the simplex (more than 0.25 counts as repaired);
        None where the skeleton's projection reports it (:meth:`specinit.family.Family.warn_repairs`).
    supported : int, optional
        The largest k the spectrum of the pair moment supports, named in the advice.
    """
    heavy = 0 if negative_mass is None else int(np.count_nonzero(np.asarray(negative_mass) > 0.25))
    if not (sign_flips or heavy):
        return
    repaired = f"{sign_flips} recovered topic(s) had negative total mass before sign fixing"
    if negative_mass is not None:
        repaired += (f" and {heavy} had more than 25% of their mass negative before projection onto the simplex "
                     "(see diagnostics['negative_mass'])")
    bound = "" if supported is None else f" (the M2 spectrum supports k <= {supported})"
    warn(f"{func}: {repaired}; the moments are noisy for k={k}: try a smaller k{bound} or more documents.")


def word_pairs(counts: ArrayLike | sp.spmatrix, max_pairs: int = 100_000,
               seed: int | np.random.Generator = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ordered pairs of distinct tokens within documents, with multiplicities, from a sample of documents.

    Returns ``(first, second, weight)``: word ids and the number of ordered
    token pairs ``c_w (c_w' - [w = w'])`` of each word pair, summed over the
    sampled documents (documents drawn without replacement, seeded, until
    ``max_pairs`` distinct word pairs).
    """
    X = check_count_matrix(counts, "counts", "word_pairs")
    rng = as_generator(seed, "word_pairs")
    first, second, weight, total = [], [], [], 0
    for d in rng.permutation(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        if hi - lo == 0:
            continue
        words, c = X.indices[lo:hi], X.data[lo:hi]
        w = np.outer(c, c) - np.diag(c)
        i, j = np.nonzero(w)
        first.append(words[i]), second.append(words[j]), weight.append(w[i, j])
        total += i.size
        if total >= max_pairs:
            break
    if not first:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    # Aggregate repeated word pairs (frequent words co-occur in many documents): fewer terms to score.
    key, inverse = np.unique(np.concatenate(first).astype(np.int64) * X.shape[1] + np.concatenate(second),
                             return_inverse=True)
    return key // X.shape[1], key % X.shape[1], np.bincount(inverse, weights=np.concatenate(weight).astype(np.float64))


def pair_terms(pairs, beta: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per word pair, ``sum_i w_i beta_iw beta_iw'`` and ``(w . beta_w)(w . beta_w')`` for normalized weights ``w``."""
    first, second, _ = pairs
    words = np.ascontiguousarray(beta.T)
    b1, b2 = words[first], words[second]
    return (b1 * b2) @ weights, (b1 @ weights) * (b2 @ weights)


def pair_log_likelihood(pairs, beta: np.ndarray, alpha: np.ndarray, terms=None) -> float:
    """Mean log-probability of within-document word pairs under LDA (a pairwise composite likelihood).

    Two tokens of one document are words ``(w, w')`` with probability
    ``beta[:, w]^T E[theta theta^T] beta[:, w']``, where
    ``E[theta theta^T] = (diag(alpha) + alpha alpha^T) / (a0 (a0+1))`` for
    ``theta ~ Dirichlet(alpha)``; with ``alpha = a0 w`` this is
    ``(P1 + a0 P2) / (a0 + 1)`` (:func:`pair_terms`). Closed form, no
    latent variables to fit (Lindsay 1988, "Composite likelihood methods").
    """
    _, _, weight = pairs
    a0 = float(alpha.sum())
    p1, p2 = pair_terms(pairs, beta, alpha / a0) if terms is None else terms
    p = (p1 + a0 * p2) / (a0 + 1.0)
    return float(np.sum(weight * np.log(np.maximum(p, 1e-300))) / max(weight.sum(), 1.0))


def document_topics(counts: ArrayLike | sp.spmatrix, beta: ArrayLike, alpha: ArrayLike, *, n_iter: int = 30,
                    tol: float = 1e-4) -> np.ndarray:
    """Per-document topic proportions given topics and the Dirichlet prior.

    Fixed-point iteration of the expected topic counts,
    ``theta_d <- (alpha + theta_d * (c_d / (theta_d @ beta)) @ beta.T) / (n_d + a0)``
    (EM for each document's posterior mean under a fixed ``beta``), vectorized
    over documents with one sparse product per step. Each document stops on
    its own criterion, so a document's proportions do not depend on the
    other documents or on how the corpus is split into chunks. Documents with no
    words get ``alpha / alpha0``. (The held-out evaluation uses the same
    update with a fixed number of steps: :func:`specinit.corpus.fold_in`.)

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Word counts of the documents.
    beta : array-like, shape (k, V)
        Topics, rows on the simplex.
    alpha : array-like, shape (k,)
        Dirichlet parameters of the topic proportions.
    n_iter : int, default 30
        Maximum fixed-point steps.
    tol : float, default 1e-4
        A document stops after the first step that moves none of its entries
        by this much.

    Returns
    -------
    theta : ndarray, shape (N, k)
        Rows strictly inside the simplex.

    Raises
    ------
    ValueError
        Bad counts, or counts whose number of columns is not the topics' V.

    References
    ----------
    .. [1] Blei, Ng, Jordan, "Latent Dirichlet allocation", JMLR 2003, Sec. 5.3
       (per-document inference with fixed topics).
    """
    X = check_count_matrix(counts, "counts", None)
    beta = np.asarray(beta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if X.shape[1] != beta.shape[1]:
        raise bad_argument("counts", None, f"{beta.shape[1]} columns (the topics' V)", X)
    n_iter = check_int(n_iter, "n_iter", None, minimum=1)
    k = alpha.shape[0]

    def fold_in(block):
        return _fold_in(block, beta, alpha, np.tile(alpha / alpha.sum(), (block.shape[0], 1)), n_iter, tol)

    theta = np.concatenate([np.zeros((0, k)), *in_order(fold_in, _token_blocks(X, k), os.cpu_count() or 1)])
    return theta / theta.sum(axis=1, keepdims=True)


#: Bytes of the per-nonzero (nonzeros, k) temporaries of one block of documents (fold-in, closing sweeps).
TOKEN_BLOCK_BYTES = 64 * 2**20


def _token_blocks(X, k: int):
    """Consecutive row blocks of the CSR counts ``X`` whose (nonzeros, k) temporaries stay below TOKEN_BLOCK_BYTES."""
    for start, stop in row_ranges(X.indptr, max(1, TOKEN_BLOCK_BYTES // (8 * k))):
        yield X[start:stop]


def _tokens(X, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per nonzero of the CSR counts ``X``: its row and its word's topic column ``beta[:, w]`` (nnz, k)."""
    return np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)), np.ascontiguousarray(beta.T)[X.indices]


def _token_ratio(X, theta: np.ndarray, tokens):
    """``c_dw / (theta_d . beta_w)`` on the nonzeros of the CSR counts ``X`` (same sparsity; ``tokens``: :func:`_tokens`)."""
    rows, word_topics = tokens
    ratio = X.copy()
    ratio.data = X.data / np.einsum("nk,nk->n", theta[rows], word_topics)
    return ratio


def _fold_in(X, beta: np.ndarray, alpha: np.ndarray, theta: np.ndarray, n_iter: int, tol: float,
             tokens=None) -> np.ndarray:
    """Fixed-point steps of :func:`document_topics` from ``theta``, per document until no entry moves by ``tol``.

    The stopping rule is per document: a document stops after the first step
    that moves none of its entries by ``tol`` (or after ``n_iter`` steps),
    whatever other documents share its block, so that splitting the documents
    into blocks (chunks, shards, Dask partitions) changes no document's
    result. Stopped documents leave the working set, which is re-sliced when
    it has halved (``tol = 0``: every document takes ``n_iter`` steps).
    ``alpha`` is shared (k,) or one row per document (n, k).
    """
    lengths = np.asarray(X.sum(axis=1)).ravel()
    theta = np.array(theta, dtype=np.float64)
    held = np.arange(X.shape[0])  # the documents of the working block ``sub``
    going = np.ones(held.size, dtype=bool)  # which of them still iterate
    sub, sub_lengths, sub_tokens = X, lengths, _tokens(X, beta) if tokens is None else tokens
    for _ in range(n_iter):
        if not going.any():
            break
        if 2 * np.count_nonzero(going) <= held.size:
            held = held[going]
            going = np.ones(held.size, dtype=bool)
            sub, sub_lengths = X[held], lengths[held]
            sub_tokens = _tokens(sub, beta)
        current = theta[held]
        prior = alpha if alpha.ndim == 1 else alpha[held]
        new = (prior + current * np.asarray(_token_ratio(sub, current, sub_tokens) @ beta.T)) / (
            sub_lengths[:, None] + prior.sum(axis=-1, keepdims=True))
        theta[held[going]] = new[going]
        going &= np.max(np.abs(new - current), axis=1, initial=0.0) >= tol
    return theta


#: Dirichlet concentration of each topic in the closing EM sweeps (the ``eta`` of ``lda.model``).
CLOSING_ETA = 0.1

#: Precision of the per-document proportions kept between closing sweeps: only the next sweep's warm start, whose
#: fold-in steps run in float64 (half-precision rounding, 5e-4 relative, is far below a fold-in step's move).
WARM_START = np.float16


def seed_constraints(seed_groups: Sequence[np.ndarray], shape: tuple[int, int],
                     counts: sp.csr_matrix | sp.csr_array | None = None) -> np.ndarray:
    """The exact constraints of seeded topics in the closing sweeps (:func:`close_topics`), as 0/1 masks.

    Parameters
    ----------
    seed_groups : sequence of int arrays
        Group ``i``'s columns, the seed words of topic ``i`` (disjoint).
    shape : tuple of int
        ``(k, V)``, the topics' shape.
    counts : scipy.sparse CSR matrix, shape (n, V), optional
        Documents.

    Returns
    -------
    ndarray
        Without ``counts``, shape (k, V): which topics may emit each word (a
        seed word its own topic only, any other word every topic). With
        ``counts``, shape (n, k): which topics each document may draw its
        tokens from (a document that contains seed words: their groups'
        topics and the unseeded topics ``i >= len(seed_groups)``; any other
        document: every topic).
    """
    k, n_words = shape
    g = len(seed_groups)
    if counts is None:
        allowed = np.ones(shape)
        for i, group in enumerate(seed_groups):
            allowed[:, group] = 0.0
            allowed[i, group] = 1.0
        return allowed
    columns = np.concatenate(seed_groups)
    member = sp.csr_matrix((np.ones(columns.size), (columns, np.repeat(np.arange(g), [len(c) for c in seed_groups]))),
                           shape=(n_words, g))
    present = sp.csr_matrix(counts @ member).toarray() > 0
    allowed = np.ones((counts.shape[0], k))
    labeled = present.any(axis=1)
    allowed[labeled, :g] = present[labeled]
    return allowed


def close_topics(source: CountSource, beta: np.ndarray, alpha: np.ndarray, sweeps: int, *, floor: float,
                 eta: float | np.ndarray = CLOSING_ETA, fold_in_steps: int = 3, prior_counts: np.ndarray | None = None,
                 tol: float = 0.0, seed_groups: Sequence[np.ndarray] = (),
                 backend: Passes | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """A few EM sweeps over the corpus from given topics: the closing step of ``lda.spectral``.

    Each sweep streams the chunks of ``source`` once: per document,
    ``fold_in_steps`` fixed-point steps of its topic proportions
    (:func:`document_topics`' update, warm-started from the previous sweep),
    then the expected topic-word counts
    ``n_kw = beta_kw sum_d theta_dk c_dw / (theta_d . beta_w)`` give the new
    topics ``beta_k ~ n_k + eta`` (the mean of the topic's Dirichlet
    posterior with concentration ``eta``, a number or a (k, V) array such
    as :meth:`SeedWords.prior`; ``closing_eta`` reports its smallest entry). The topic weights follow the
    expected tokens per topic, ``alpha`` keeps its sum. With Numba installed
    (extra ``[fast]``) a compiled kernel runs each chunk's documents on every
    core without per-token temporaries; otherwise the documents are
    processed in blocks of bounded (nonzeros, k) temporaries
    (:data:`TOKEN_BLOCK_BYTES`) on every core. A ``backend`` that runs the
    sweeps where its passes run (``recovers_on_device``: the JAX backend
    on an accelerator, float64) holds the documents and their proportions
    there instead (:meth:`~specinit.engine.backends.Passes.place_documents`). Memory: the (N, k)
    proportions kept in half precision between sweeps (a warm start, refined by
    the next sweep's fold-in steps in float64) and a few blocks'
    temporaries. ``prior_counts`` (k, V),
    expected topic-word counts of documents not in ``source`` (earlier
    batches), are added to every M-step's counts.

    ``sweeps`` is the most sweeps. With ``tol > 0`` they stop after the
    first sweep whose training log-likelihood per token rose by less than
    ``tol`` (relative) over the previous sweep's; that sweep's M-step is
    still taken (its expected counts are already summed), so stopping costs
    no pass.

    ``seed_groups`` (group ``i``'s columns, topic ``i``'s seed words) make
    the sweeps those of seeded LDA with its labels as exact constraints
    (:func:`seed_constraints`): a seed word is emitted by its own topic alone
    (z-labels, [1]_; its entries in the other topics stay at the floor), and
    a document that contains seed words draws its tokens from their groups'
    topics and the unseeded ones only (its Dirichlet parameters of the other
    seeded topics are zero, as in Labeled LDA, [2]_).

    Returns ``(beta, alpha, report)``; the report holds the training
    log-likelihood per token before each M-step (``closing_log_likelihood``)
    and the sweeps run (``closing_sweeps``).

    References
    ----------
    .. [1] Andrzejewski, Zhu. "Latent Dirichlet allocation with topic-in-set
       knowledge", NAACL HLT 2009 Workshop on Semi-supervised Learning for NLP.
    .. [2] Ramage, Hall, Nallapati, Manning. "Labeled LDA: a supervised topic
       model for credit attribution in multi-labeled corpora", EMNLP 2009.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    k = beta.shape[0]
    thetas, loglik, done = {}, [], 0
    allowed = None
    if seed_groups:
        allowed = seed_constraints(seed_groups, beta.shape)
        beta, _ = project_to_simplex(beta * allowed, floor)

    compiled = numba_kernel("closing_sweep")
    # the sweeps where the passes run (a JAX accelerator)
    documents = backend.place_documents(source) if getattr(backend, "recovers_on_device", False) else None

    def sweep(item, beta, alpha):
        i, X = item
        if seed_groups:
            alpha = alpha * seed_constraints(seed_groups, beta.shape, X)
        theta = thetas.get(i)  # the previous sweep's, in WARM_START precision: each document's steps run in float64
        if theta is None:
            theta = np.broadcast_to(alpha / alpha.sum(axis=-1, keepdims=True), (X.shape[0], k)).astype(np.float32)
        if compiled is not None:
            return (i, *compiled(X, beta, alpha, theta, fold_in_steps), float(X.data.sum()))
        tokens = _tokens(X, beta)
        theta = _fold_in(X, beta, alpha, theta, fold_in_steps, 0.0, tokens)
        ratio = _token_ratio(X, theta, tokens)
        return (i, theta, np.asarray(ratio.T @ theta).T, float(np.sum(X.data * np.log(X.data / ratio.data))),
                float(X.data.sum()))

    def host_sweep(beta, alpha):
        stats, total, n_tokens = np.zeros_like(beta), 0.0, 0.0
        if compiled is not None:  # the kernel runs on every core over a chunk's documents, without temporaries
            results = map(partial(sweep, beta=beta, alpha=alpha), enumerate(source.chunks()))
        else:
            blocks = enumerate(block for chunk in source.chunks() for block in _token_blocks(chunk, k))
            results = in_order(partial(sweep, beta=beta, alpha=alpha), blocks, os.cpu_count() or 1)
        for i, theta, block_stats, block_total, block_tokens in results:
            # the next sweep's warm start, a quarter of float64's memory; rounded through float32 on both paths (the
            # compiled sweep returns float32), so that they give the same bits
            thetas[i] = theta.astype(np.float32, copy=False).astype(WARM_START)
            stats += block_stats
            total += block_total
            n_tokens += block_tokens
            # released before the next chunk's sweep runs (``results`` is lazy): the chunk's proportions and its
            # threads' partial counts (the compiled sweep's expected counts are a view of them), about 0.1 GB at
            # N = 1M, k = 100
            del theta, block_stats
        return stats, total, n_tokens

    for done in range(1, sweeps + 1):
        if documents is None:
            stats, total, n_tokens = host_sweep(beta, alpha)
        else:
            stats, total, n_tokens = documents.sweep(beta, alpha, fold_in_steps, seed_groups)
        counts = stats  # in place, as the (k, V) arrays below: at V = 50k, k = 100 each is 40 MB
        counts *= beta
        if prior_counts is not None:
            counts += prior_counts
        loglik.append(total / max(n_tokens, 1.0))
        mass = counts.sum(axis=1)
        alpha = alpha.sum() * mass / mass.sum()
        counts += eta
        if allowed is not None:
            counts *= allowed
        counts /= counts.sum(axis=1, keepdims=True)
        beta, _ = project_to_simplex(counts, floor)
        if tol > 0 and done > 1 and loglik[-1] - loglik[-2] < tol * abs(loglik[-1]):
            break
    return beta, alpha, {"closing_sweeps": int(done), "closing_eta": float(np.min(eta)),
                         "closing_log_likelihood": np.asarray(loglik)}
