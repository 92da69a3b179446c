"""Latent Dirichlet allocation: NumPyro program and moment map.

Each document has topic proportions ``theta_d ~ Dirichlet(alpha)``; its
words are drawn from ``theta_d @ beta``. Per-word topics are summed out:
``counts_d ~ Multinomial(n_d, theta_d @ beta)`` inside the ``documents``
plate, so the log-likelihood is per document.

Moments ([1]_ Lemma 3, [2]_ Thm 3), with ``alpha0 = sum(alpha)``:
``M2 = sum_i alpha_i / ((a0+1) a0) b_i b_i^T`` and
``M3 = sum_i 2 alpha_i / ((a0+2)(a0+1) a0) b_i^(x)3``. The tensor
eigenvalues are ``lambda_i = 2/(a0+2) sqrt(a0 (a0+1) / alpha_i)``, so

.. math::

    \\alpha_i = \\frac{4 a_0 (a_0+1)}{(a_0+2)^2 \\lambda_i^2}, \\qquad
    b_i = \\frac{a_0+2}{2} \\lambda_i (W^T)^+ v_i .

``alpha0`` is :math:`\\alpha_0` in [1]_. On this tensor path
(``spectral(method="tpm")``) it is chosen from the data unless given (one
set of passes serves a whole grid of ``alpha0`` values; see its docstring).
The default of :func:`spectral` is anchor-word recovery from the pair
moment alone, which needs no ``alpha0``; :func:`spectral_from_moments` takes moments
already corrected with a given ``alpha0``. With a given ``alpha0``,
``sum(alpha_hat)`` is reported beside it in the diagnostics (a large
mismatch signals misspecification) and is NOT silently renormalized.

References
----------
.. [1] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for latent
   Dirichlet allocation", Lemma 3, Alg. 2.
.. [2] Ruffini, Casanellas, Gavalda, Thm 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from numpy.typing import ArrayLike
from numpyro.infer.mcmc import MCMCKernel

from specinit.conditional import ExactGibbs
from specinit._validation import Interval, Options, as_generator, bad_argument, current_entry, public, warn
from specinit.distributions.continuous import TRANSFORMS, LogRatioDirichlet, point_mass
from specinit.distributions.counts import HIGHEST, DenseTopicCounts, DocumentCounts, ModelData, as_document_counts, \
    lda_augmented_step, lda_loglik, lda_marginal_loglik_draws
from specinit.engine.backends import one_blas_thread
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import RANDOM_STATE, Face, Param, face, n_components_param
from specinit.family import COMMON_OPTIONS, site_values
from specinit.engine.anchors import WARM_NOISE_TOL, fit_anchor
from specinit.models._svi import LOCAL_STEP, SVI_OPTIONS, TopicSVIResult, local_gamma, run_svi, svi_batch
from specinit.models._topics import MODEL_ARGUMENTS as TOPIC_MODEL_ARGUMENTS
from specinit.models._topics import (
    ALPHA0,
    ALPHA0_MAX,
    CLOSING_ETA,
    POPULATION_TOPICS,
    SEED_ANCHORS,
    SEED_PRIOR,
    SEED_WORDS,
    TPM_REAL_TEXT,
    UPDATE_ARGUMENTS,
    SeedWords,
    TopicFamily,
    check_alpha0_grid,
    close_topics,
    default_alpha0_grid,
    dirichlet_alpha,
    document_topics,
    fit_lda_grid,
    topic_concentration,
    warn_seeds,
    word_pairs,
)
from specinit.refine import PLATEAU_TOL, RefineResult, check_estimate, in_float64, plateau, refined

if TYPE_CHECKING:
    from specinit.engine.backends import Passes
    from specinit.engine.exchangeable import ExchangeableFit
    from specinit.engine.sources import Counts

__all__ = ["FACTS", "FAMILY", "LDA", "document_topics", "guide", "kernel", "log_likelihood", "model",
           "pointwise_log_likelihood", "population_moments", "refine", "seed_prior", "spectral",
           "spectral_from_moments", "svi", "update"]

#: Documents sampled (by global row index) for the pair criterion of the alpha0 choice.
PAIR_SAMPLE = 20_000

#: Importance-sampling particles per document and draw of :func:`pointwise_log_likelihood`.
NUM_PARTICLES = 128

#: EM sweeps that close ``spectral`` by default (:func:`specinit.models._topics.close_topics`).
EM_SWEEPS = 4

#: Most EM sweeps that close a seeded ``spectral`` fit by default: its constraints (seed words in their own topic,
#: documents with seed words in their groups' topics) are not the anchor fit's, and the sweeps carry the fit to them
#: (``closing_tol`` stopped them after 8-12 sweeps on the corpora of ``benchmarks/bench_seeded.py``).
SEEDED_SWEEPS = 20

#: Relative rise of the training log-likelihood per token below which the closing sweeps stop before ``em_sweeps``.
CLOSING_TOL = 1e-3


class LDA(TopicFamily):
    """Latent Dirichlet allocation: Dirichlet-corrected count moments, alpha0 from the data, anchor words."""

    name = "lda"
    sites = {
        "alpha": Site("positive", (0,), ("topics",), ("topics",)),
        "beta": Site("simplex", (0,), ("topics", "word"), ("word",)),
        "theta": Site("simplex", (1,), ("documents", "topics"), ("topics",)),
        "counts": Site("observed", (), ("documents", "word"), ("word",)),
    }
    match_site = "beta"
    optional_sites = frozenset({"theta"})
    options = {
        "alpha0": Param("float, optional", "``sum(alpha)``, the Dirichlet concentration (:math:`\\alpha_0` in [1]_) "
                        "used in the moment correction. ``None`` (default): chosen from the data (tensor path; see "
                        ":func:`spectral`). A given value is used as is (the classical estimator; ``sum(alpha_hat)`` "
                        "is then reported beside it).", None, ALPHA0),
        "weighting": Param("{'pooled', 'per-document'} or None", "Moment estimator: the average of per-document "
                           "unbiased estimators, or the pooled all-word estimators. ``None`` (default): "
                           "``\"per-document\"`` for ``method=\"anchor\"``, ``\"pooled\"`` for the tensor path.",
                           None, TopicFamily.options["weighting"].constraint),
        "doc_topics": Param("bool or 'auto'", "Also estimate per-document ``theta`` given ``beta`` and ``alpha`` "
                            "(:func:`document_topics`, chunk by chunk: one more pass). ``\"auto\"`` (default): only "
                            "for corpora of at most 5,000 documents (where NUTS on the full model, which needs "
                            "``theta``, is practical); on larger corpora call :func:`document_topics` when needed.",
                            "auto", lambda name, value: value if value == "auto" or isinstance(value, bool)
                            else Options(("auto", True, False)).check(name, value)),
        "alpha0_grid": Param("sequence of float, optional", "Candidate ``alpha0`` values when ``alpha0=None`` "
                             "(default: 9 values geometrically spaced from 0.01 to k).", None, check_alpha0_grid),
        "alpha_sum": Param("float", "``sum(alpha)`` of the returned prior when ``alpha0=None`` or "
                           "``method=\"anchor\"`` (ignored when ``alpha0`` is given: the tensor's ``alpha_hat`` is "
                           "returned).", 1.0, Interval(float, 0.0, ALPHA0_MAX, open="low")),
        "em_sweeps": Param("int or None", "Most EM sweeps over the corpus after the moment estimate (one pass each; "
                           "fewer when they converge first, see ``closing_tol``; ``0``: the moment estimate alone). "
                           "They keep ``sum(alpha)``. ``None`` (default): :data:`EM_SWEEPS`, or "
                           ":data:`SEEDED_SWEEPS` with ``seed_words``.", None, Interval(int, 0, none=True)),
        "closing_tol": Param("float", "The closing sweeps stop before ``em_sweeps`` after the first sweep whose "
                             "training log-likelihood per token rose by less than this fraction over the previous "
                             "sweep's (``closing_sweeps`` in the diagnostics counts the sweeps run; ``0``: always "
                             "``em_sweeps``).", CLOSING_TOL, Interval(float, 0.0)),
        "seed_words": SEED_WORDS,
        "seed_anchor": Param("{'extreme', 'pooled', 'harmonic'}", "How a seed group makes its topic's anchor: "
                             "the word nearest the group's pooled co-occurrence row that is farthest from the other "
                             "anchors, the pooled row itself, or the harmonic mean of the group's rows "
                             "(:func:`specinit.engine.anchors.fit_anchor`).", "harmonic", Options(SEED_ANCHORS)),
        "seed_prior": Param("float", "Extra Dirichlet concentration of each seed word in its own topic during the "
                            "closing sweeps (the ``eta`` of :meth:`SeedWords.prior`; 0: none).", SEED_PRIOR,
                            Interval(float, 0.0)),
    }
    arguments = {
        **TopicFamily.arguments,
        "method": Param("{'anchor', 'tpm', 'svtd', 'eca', 'als'} or None", "``\"anchor\"``: anchor-word recovery "
                        "from the top-k positive eigenspace of the pair moment (no third moment, no ``alpha0``; "
                        "``alpha = alpha_sum * p(topic)``). Otherwise the tensor decomposition "
                        "(:mod:`specinit.engine.decompose`) of the Dirichlet-corrected third moment. ``None`` "
                        "(default): ``\"anchor\"``, or ``\"tpm\"`` when ``alpha0`` is given (the classical "
                        "estimator).", None),
        "seed": Param("int or numpy.random.Generator", "Randomness of the whitening, the decomposition and the pair "
                      "sample (documents drawn by global row index, so in-memory, chunked and Dask inputs give the "
                      "same estimate).", 0),
    }
    methods = (*TopicFamily.methods, "anchor")
    advice = "For LDA, alpha0 may be misspecified: try another alpha0 (smaller for sparse topic mixtures)."
    refine_methods = ("svi",)

    def resolve(self, method: str | None, options: Mapping[str, Any]) -> tuple[str, dict]:
        """``method=None``: anchor words, or the tensor power method when ``alpha0`` is given; ``weighting=None``:
        per-document estimators for anchor words, pooled for the tensor path; ``em_sweeps=None``:
        :data:`EM_SWEEPS`, or :data:`SEEDED_SWEEPS` with ``seed_words``."""
        method = ("anchor" if options.get("alpha0") is None else "tpm") if method is None else method
        if options.get("weighting") is None:
            options = {**options, "weighting": "per-document" if method == "anchor" else "pooled"}
        if options.get("em_sweeps") is None:
            options = {**options, "em_sweeps": EM_SWEEPS if options.get("seed_words") is None else SEEDED_SWEEPS}
        return method, dict(options)

    def moments(self, counts: Counts, *, k: int, backend: str | Passes | None, weighting: str = "pooled",
                alpha0: float | None = None, **options: Any) -> CountMoments:
        return CountMoments(counts, alpha0=alpha0, weighting=weighting, backend=backend)

    def population_moments(self, params: Mapping[str, Any], **options: Any) -> FactoredMoments:
        beta = np.asarray(params["beta"], dtype=np.float64)
        alpha = np.asarray(params["alpha"], dtype=np.float64)
        a0 = alpha.sum()
        return FactoredMoments(beta, alpha / ((a0 + 1) * a0), 2 * alpha / ((a0 + 2) * (a0 + 1) * a0))

    def recover(self, moments: CountMoments | FactoredMoments, k: int, **kwargs: Any) -> tuple[dict, dict, dict]:
        # The recovery's dense linear algebra is small (eigenproblems of k + 10 columns, (V, k) products, k^3
        # tensors): extra BLAS threads only add lock waits and fight the passes, whose sparse products run on
        # their own threads (bench_lda_real.py on 2 busy cores: 0.6 s with one BLAS thread, 5.8 s with two).
        with one_blas_thread():
            return super().recover(moments, k, **kwargs)

    def strategy(self, moments: CountMoments | FactoredMoments, k: int, *, method: str,
                 alpha0: float | None = None, seed_words: SeedWords | None = None,
                 **options: Any) -> Callable[..., tuple[dict, dict, dict]] | None:
        """Anchor words (:meth:`anchors`) for ``method="anchor"``; the ``alpha0`` grid (:meth:`grid_fit`) for a
        tensor method without ``alpha0``; with ``alpha0``, the engine fit."""
        if method == "anchor":
            return self.anchors
        if seed_words is not None:
            raise bad_argument("seed_words", None, "None with a tensor method (seeded topics are anchored: "
                               "method='anchor')", seed_words)
        return self.grid_fit if alpha0 is None else None

    def decompose_defaults(self, method: str) -> dict:
        """The tensor power method's settings for noisy real-text moments (:data:`TPM_REAL_TEXT`)."""
        return dict(TPM_REAL_TEXT) if method == "tpm" else {}

    def anchors(self, moments: CountMoments | FactoredMoments, k: int, *, method: str, rng: np.random.Generator,
                floor: float, decompose_options: Mapping[str, Any] | None, alpha0: float | None = None,
                alpha_sum: float = 1.0, alpha0_grid: ArrayLike | None = None, seed_words: SeedWords | None = None,
                seed_anchor: str = "harmonic", **options: Any) -> tuple[dict, dict, dict]:
        """Anchor-word recovery from the pair moment (:func:`specinit.engine.anchors.fit_anchor`), seeded topics
        anchored on their groups."""
        if alpha0 is not None or decompose_options is not None or alpha0_grid is not None:
            raise bad_argument("method", None, "'tpm', 'svtd', 'eca' or 'als' when alpha0, alpha0_grid or "
                               "decompose_options is given (method='anchor' uses none of them)", method)
        columns = () if seed_words is None else seed_words.columns(None, moments.n_features, k)
        beta, alpha, _, report = fit_anchor(moments, k, func=current_entry(), seed=rng, floor=floor,
                                            alpha_sum=alpha_sum, seed_groups=columns, seed_anchor=seed_anchor)
        if seed_words is None:
            return {"alpha": alpha, "beta": beta}, report, {}
        report.update(seed_words.diagnostics())
        warn_seeds(seed_words, report)
        return {"alpha": alpha, "beta": beta}, report, seed_words.state(columns)

    def grid_fit(self, moments: CountMoments | FactoredMoments, k: int, *, method: str, rng: np.random.Generator,
                 floor: float, decompose_options: Mapping[str, Any] | None, alpha_sum: float = 1.0,
                 alpha0_grid: ArrayLike | None = None, **options: Any) -> tuple[dict, dict, dict]:
        """``alpha0`` chosen from the data: the tensor fit at every value of the grid from one set of passes, the
        best pair likelihood kept (:func:`specinit.models._topics.fit_lda_grid`)."""
        source = getattr(moments, "source", None)
        if source is None:
            raise bad_argument("alpha0", None, "given with moments that are not from data (the data choose it)",
                               None)
        n_total = moments.n_documents + moments.n_dropped
        sample = np.sort(as_generator(rng).choice(n_total, size=min(n_total, PAIR_SAMPLE), replace=False))
        pairs = word_pairs(source.rows(sample), seed=rng)
        grid = default_alpha0_grid(k) if alpha0_grid is None else alpha0_grid
        beta, alpha, report = fit_lda_grid(moments, k, grid, pairs, func=current_entry(), method=method, seed=rng,
                                           floor=floor, decompose_options=decompose_options, alpha_sum=alpha_sum)
        return {"alpha": alpha, "beta": beta}, report, {}

    def unwhiten(self, fit: ExchangeableFit, moments: CountMoments | FactoredMoments, k: int, floor: float,
                 alpha0: float, **options: Any) -> tuple[dict, dict, dict]:
        beta, eig, report = self.topics(fit, moments, k)
        a0 = alpha0
        alpha = dirichlet_alpha(eig, a0)
        report.update(alpha0=a0, alpha_sum=float(alpha.sum()))
        if not 0.5 < alpha.sum() / a0 < 2.0:
            warn(f"{current_entry()}: sum(alpha_hat) = {alpha.sum():.3g} differs from alpha0 = {a0:.3g} by more "
                 "than a factor of 2; alpha0 is probably misspecified (refit with alpha0 near sum(alpha_hat)) or "
                 "k is wrong.")
        return {"alpha": alpha, "beta": beta}, report, {}

    def complete(self, params: dict, counts: Counts, moments: CountMoments, *, rng: np.random.Generator,
                 floor: float = 1e-3, doc_topics: bool | Literal["auto"] = "auto", em_sweeps: int = EM_SWEEPS,
                 closing_tol: float = CLOSING_TOL, seed_words: SeedWords | None = None, seed_prior: float = SEED_PRIOR,
                 **options: Any) -> tuple[dict, dict]:
        report = {}
        k, n_words = params["beta"].shape
        columns = () if seed_words is None else seed_words.columns(None, n_words, k)
        if em_sweeps:
            eta = CLOSING_ETA if seed_words is None else seed_words.closing_eta(columns, (k, n_words), seed_prior)
            beta, alpha, report = close_topics(moments.source, params["beta"], params["alpha"], em_sweeps, floor=floor,
                                               eta=eta, tol=closing_tol, seed_groups=columns,
                                               backend=moments.passes)
            params = {**params, "beta": beta, "alpha": alpha}
        if seed_words is not None:
            report.update(seed_words.closed(params["beta"], params["alpha"], columns))
        n_docs = moments.n_documents + moments.n_dropped
        doc_topics = n_docs <= 5000 if doc_topics == "auto" else bool(doc_topics)
        if doc_topics:
            params = {**params, "theta": np.vstack([document_topics(chunk, params["beta"], params["alpha"])
                                                    for chunk in moments.source.chunks()])}
        return params, {**report, "doc_topics": doc_topics}

    def held_out(self, train: sp.csr_matrix, test: sp.csr_matrix, estimate: SpectralEstimate) -> float:
        """Document-completion log-likelihood of ``test`` under ``estimate``."""
        from specinit.corpus import document_completion

        return float(document_completion(test, estimate.params["beta"], estimate.params["alpha"]).log_likelihood)

    def log_likelihood(self, counts: ArrayLike | sp.spmatrix, estimate: SpectralEstimate | Mapping[str, Any],
                       **options: Any) -> np.ndarray:
        """``log p(c_d | theta_d, beta)`` of every document; ``theta`` from the estimate or the fixed-topic fold-in."""
        estimate = check_estimate(self, estimate)
        data = self.refine_data(counts, estimate)
        params = estimate.params
        theta = params.get("theta")
        if theta is None or theta.shape[0] != data.csr.shape[0]:
            theta = document_topics(data.csr, params["beta"], params["alpha"])
        return in_float64(lambda: lda_loglik(jnp.asarray(theta), jnp.asarray(params["beta"]), data.documents))

    def refine_svi(self, counts: ArrayLike | sp.spmatrix, estimate: SpectralEstimate, *, num_steps: int = 500,
                   batch_size: int | None = None, seed: int = 0, lr: float = 0.05, tol: float = 1e-4,
                   progress: bool = False) -> RefineResult:
        """Variational EM from the estimate (full-batch :func:`svi`), ``theta`` from the fixed-topic E-step."""
        data = self.refine_data(counts, estimate)
        X = data.csr
        params = estimate.params
        batch_size = min(X.shape[0], 2048) if batch_size is None else batch_size
        fit = svi(X, estimate.k, init={"beta": params["beta"], "alpha": params["alpha"]}, num_steps=num_steps,
                  batch_size=batch_size, seed=seed, lr=lr, progress=progress)
        beta, alpha = fit.params["beta"], fit.params["alpha"]
        elbo = -np.asarray(fit.losses, dtype=np.float64)
        converged, last = plateau(elbo, tol)
        result = refined(self, estimate, {"beta": beta, "alpha": alpha, "theta": document_topics(X, beta, alpha)},
                         "svi", elbo, num_steps, converged,
                         {"batch_size": int(batch_size), "seconds": fit.seconds, "final_elbo": last})
        return RefineResult(estimate=result, log_likelihood=elbo, n_iter=int(num_steps), converged=converged,
                            method="svi", diagnostics={"n_observations": float(X.sum())})

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralLDA`."""
        return Face(
            class_name="SpectralLDA", mixins=("feature_names", "transformer"),
            summary="Latent Dirichlet allocation by the method of moments (:func:`specinit.models.lda.spectral`).",
            parameters={
                "n_components": n_components_param("topics", 10, 'lda.spectral(X, "auto")'),
                "alpha0": Param("float, optional", "``sum(alpha)``; ``None`` chooses it from the data.", None),
                "method": Param("{'anchor', 'tpm', 'svtd', 'eca', 'als'} or None", "Recovery of "
                                ":func:`specinit.models.lda.spectral`; ``None``: its default (anchor words closed by "
                                "EM sweeps; the tensor power method when ``alpha0`` is given), so "
                                "``SpectralLDA(k).fit(X)`` and ``lda.spectral(X, k)`` give the same topics.", None),
                "refine_steps": Param("int", "Variational-EM steps after the spectral estimate "
                                      "(:func:`specinit.models.lda.refine`); 0: none.", 0),
                "seed_words": Param("dict of str -> sequence, or sequence of sequences, optional", "Seeded topics "
                                    "(:func:`specinit.models.lda.spectral`'s ``seed_words``): a few words per topic, "
                                    "by column index or, with ``vocabulary``, by word; topic i is group i's.", None,
                                    annotation=Mapping[str, Sequence[Any]] | Sequence[Sequence[Any]] | None),
                "vocabulary": Param("sequence of str, optional", "The columns' words (e.g. "
                                    "``CountVectorizer().get_feature_names_out()``): seed words by name, and the fit's "
                                    "``estimate_.vocabulary``.", None),
                "random_state": RANDOM_STATE,
            },
            spectral={"n_components": "k", "alpha0": "alpha0", "method": "method", "seed_words": "seed_words",
                      "vocabulary": "vocabulary"},
            fixed={"doc_topics": False},
            constraints={"alpha0": [Interval(float, 0.0, None, open="low"), None],
                         "method": [Options(self.methods), None],
                         "refine_steps": [Interval(int, 0)],
                         "seed_words": [dict, "array-like", None], "vocabulary": ["array-like", None]},
            refine_arguments={"num_steps": "refine_steps"},
            data="counts",
            refine=_refine_steps,
            attributes={
                "components_": ("ndarray, shape (n_components, n_features)\n    Topic-word probabilities (rows sum "
                                "to one; scikit-learn's LDA keeps unnormalized pseudo-counts).",
                                lambda estimator, estimate, X: estimate.params["beta"]),
                "doc_topic_prior_": ("ndarray, shape (n_components,)\n    ``alpha``.",
                                     lambda estimator, estimate, X: estimate.params["alpha"]),
            },
            transform=lambda estimator, faces, X: document_topics(X, estimator.components_,
                                                                  estimator.doc_topic_prior_),
            score=_document_completion,
            answers=frozenset({"perplexity", "partial_fit", "deferred_update"}),
        )


FAMILY = LDA()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


#: The arguments of :func:`model`: the topic models' ones and the prior of ``alpha``.
MODEL_ARGUMENTS = {**TOPIC_MODEL_ARGUMENTS,
                   "alpha_prior": Param("(float, float)", "Gamma(shape, rate) prior on each ``alpha_i``.", (1.0, 1.0),
                                        annotation=tuple[float, float])}


@face(MODEL_ARGUMENTS)
def model(counts, *, k, vocab_size, doc_lengths, eta, alpha_prior, subsample_size) -> None:
    """NumPyro LDA with per-word topics summed out.

    Raises
    ------
    ValueError
        ``vocab_size``/``doc_lengths`` missing when generating, counts that
        are not two-dimensional or not counts, or ``subsample_size`` with
        sparse counts.
    TypeError
        Counts of an unsupported type.

    Notes
    -----
    NumPyro sites: ``alpha`` (k,), ``beta`` (k, V) in plate ``topics``,
    ``theta`` (N, k) and ``counts`` in plate ``documents``: an observed
    site for dense counts, a ``numpyro.factor`` with the per-document
    log-likelihood for sparse counts (so ``log_likelihood`` and LOO are per
    document either way). The likelihood is the multinomial of
    ``theta_d @ beta`` evaluated in log space with HIGHEST-precision
    contractions ([2]_; see :mod:`specinit.distributions.counts`).

    ``beta`` and ``theta`` are Dirichlet sites whose unconstrained
    coordinates (what NUTS moves in, what ``init_params`` returns) are
    centred log-ratios
    (:class:`~specinit.distributions.continuous.LogRatioDirichlet`) rather
    than NumPyro's stick-breaking: the same density on the simplex, a
    log-concave prior in those coordinates, and none of the divergent
    transitions stick-breaking gives with small ``eta``
    (``benchmarks/bench_nuts.py``).

    ``model.kernel`` is :func:`kernel`: an MCMC kernel for this model that
    draws ``beta`` and ``theta`` exactly from their conditionals by data
    augmentation (the per-token topics, [3]_) and moves only ``alpha`` by
    NUTS; ``model.kernel(*model_args, **model_kwargs, **nuts_kwargs)``
    takes this model's arguments.

    References
    ----------
    .. [1] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for
       latent Dirichlet allocation", Sec. 2 (the model).
    .. [2] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 2.
    .. [3] Tanner, Wong. "The calculation of posterior distributions by data
       augmentation", JASA 82(398), 1987.
    """
    data = ModelData(counts, "lda.model", vocab_size, doc_lengths, subsample_size)
    alpha = numpyro.sample("alpha", dist.Gamma(jnp.full(k, alpha_prior[0]), alpha_prior[1]).to_event(1))
    with numpyro.plate("topics", k):
        beta = numpyro.sample("beta", LogRatioDirichlet(topic_concentration(eta, k, data.vocab_size)))
    with numpyro.handlers.scale(scale=data.scale), \
            numpyro.plate("documents", data.n_docs, subsample_size=subsample_size) as idx:
        theta = numpyro.sample("theta", LogRatioDirichlet(alpha))
        if data.sparse is not None:
            numpyro.factor("counts", lda_loglik(theta, beta, data.sparse))
        elif data.dense is not None:
            numpyro.sample("counts", DenseTopicCounts(theta, beta, data.lengths[idx]), obs=data.dense[idx])
        else:
            probs = jnp.maximum(jnp.matmul(theta, beta, precision=HIGHEST), jnp.finfo(beta.dtype).tiny)
            probs = probs / jnp.sum(probs, axis=-1, keepdims=True)
            numpyro.sample("counts", dist.Multinomial(data.lengths[idx], probs, total_count_max=data.max_length))



# Gibbs-within-NUTS -------------------------------------------------------------------------------------------------
# beta and theta are drawn from their conditionals given alpha by data augmentation (the per-token topics), alpha
# by NUTS on the model conditioned on them.


@face({
    **MODEL_ARGUMENTS,
    "counts": Param("array, scipy.sparse matrix or DocumentCounts, shape (N, V)", "The observed word counts of the "
                    "whole corpus (as for :func:`model`; pass the same value to ``MCMC.run``).",
                    annotation=ArrayLike | sp.spmatrix | DocumentCounts),
    "subsample_size": Param("None", "Not supported: the data-augmentation step needs every document.", None),
    "gibbs_sweeps": Param("int", "Data-augmentation updates of ``(beta, theta)`` per NUTS step (each leaves the "
                          "conditional invariant). A sweep costs one pass over the tokens, a fraction of a NUTS step; "
                          "the topic entries that switch between \"word absent from the topic\" and \"word present a "
                          "few times\" need several (R-hat by sweep count: ``benchmarks/bench_lda_gibbs.py``).", 5,
                          Interval(int, 1)),
    "nuts_kwargs": Param("dict", "Keyword arguments of ``numpyro.infer.NUTS`` for the ``alpha`` step "
                         "(``target_accept_prob``, ``max_tree_depth``, ``dense_mass``, ...)."),
})
def kernel(counts, *, k, vocab_size, doc_lengths, eta, alpha_prior, subsample_size, gibbs_sweeps,
           **nuts_kwargs) -> MCMCKernel:
    """Gibbs-within-NUTS sampler of :func:`model`: ``beta`` and ``theta`` exactly by data augmentation, NUTS for ``alpha``.

    Each MCMC step first updates ``(beta, theta)`` from their joint
    conditional given ``alpha`` and the counts, with the per-token topics
    ``z`` as auxiliary variables ([2]_, [3]_): every token of word ``w``
    in document ``d`` gets topic ``i`` with probability
    ``theta_di beta_iw / sum_j theta_dj beta_jw``; with ``n_iw`` and ``n_di``
    the resulting topic-word and document-topic counts,

    .. math::

        \\beta_i \\sim \\mathrm{Dirichlet}(\\eta + n_{i\\cdot}), \\qquad
        \\theta_d \\sim \\mathrm{Dirichlet}(\\alpha + n_{d\\cdot}).

    This update leaves ``p(beta, theta | alpha, counts)`` invariant (the
    conditionals of the augmented model ``p(beta, theta, z | alpha,
    counts)`` are drawn exactly). A NUTS step then moves ``alpha`` on
    :func:`model` conditioned on ``beta`` and ``theta``
    (:class:`specinit.conditional.ExactGibbs`; the likelihood, constant in
    ``alpha`` given them, is left out of its potential). Entries of ``beta`` for frequent words
    nearly absent from a topic, which NUTS on the whole model explores
    slowly (their log wanders in the heavy tail of ``Dirichlet(eta)``), are
    fresh conditional draws at every step.

    Also available as ``model.kernel`` (so generic code calls
    ``model.kernel(*model_args, **model_kwargs, **nuts_kwargs)``).

    Returns
    -------
    numpyro.infer.MCMCKernel
        A :class:`specinit.conditional.ExactGibbs` kernel (``kernel.model``
        is :func:`model`, so ArviZ gets the observed counts and the
        log-likelihood; its draws record the NUTS block's divergences,
        tree sizes and step size). Run it with the model's
        arguments: ``MCMC(lda.kernel(X, k=k), ...).run(key, X, k=k)``.
        ``init_params`` take ``alpha`` UNCONSTRAINED (its log) and ``beta``,
        ``theta`` CONSTRAINED (rows on the simplex), each with a leading
        chain axis for several chains. Without them ``beta`` and ``theta``
        start at prior draws and ``alpha`` at NUTS's ``init_strategy``.
        Run several chains with ``MCMC(..., chain_method=jax.vmap)``:
        NumPyro's sequential chains recompile the Gibbs step for every
        chain and its ``"vectorized"`` refuses Gibbs kernels. From the
        spectral estimate's starts a short warm-up suffices; from NumPyro's
        default start the chains settle in different labellings
        (``benchmarks/bench_lda_gibbs.py``).

    Raises
    ------
    ValueError
        ``subsample_size`` given, counts missing or not counts, a minibatch
        (DocumentCounts whose ``num_documents`` exceeds its rows), or
        ``vocab_size`` different from the counts'.
    TypeError
        Counts of an unsupported type, ``k`` not an integer.

    Notes
    -----
    The token topics are drawn per token by the Gumbel-max trick on log
    probabilities (topics of probability down to ~1e-10 times the largest
    are drawn at their rate) and the Dirichlets from log-Gamma variables,
    so nothing underflows on the way; the draws are floored at the smallest
    normal float (only values a float32 cannot hold move), so the model's
    log density stays finite. Memory is O(T k) for T tokens (the sum of the
    counts). Chains started from a spectral estimate share its labelling of
    the topics; chains started at random do not (R-hat over ``beta`` is then
    meaningless without relabelling).

    References
    ----------
    .. [1] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 2 (the model).
    .. [2] Tanner, Wong. "The calculation of posterior distributions by data
       augmentation", JASA 82(398), 1987.
    .. [3] Pritchard, Stephens, Donnelly. "Inference of population structure
       using multilocus genotype data", Genetics 155, 2000 (the same
       uncollapsed Gibbs sampler for the admixture model). Griffiths and
       Steyvers (PNAS 2004) collapse ``beta`` and ``theta`` instead.
    """
    func = current_entry()
    if subsample_size is not None:
        raise bad_argument("subsample_size", func, "None (the data-augmentation step updates every document: full "
                           "data only)", subsample_size)
    if counts is None:
        raise bad_argument("counts", func, "the observed counts (an (N, V) array or a scipy.sparse matrix)", counts)
    data = ModelData(counts, func, vocab_size, None, None)
    sparse = data.sparse if data.sparse is not None else as_document_counts(sp.csr_matrix(np.asarray(data.dense)), func)
    if sparse.num_documents != sparse.n_docs:
        raise bad_argument("counts", func, "the whole corpus (the data-augmentation step updates every document)",
                           f"a minibatch of {sparse.n_docs} of {sparse.num_documents} documents", describe=False)
    repeats = np.rint(np.asarray(sparse.count)).astype(np.int64)
    token_doc = jnp.asarray(np.repeat(np.asarray(sparse.doc), repeats), dtype=jnp.int32)
    token_word = jnp.asarray(np.repeat(np.asarray(sparse.word), repeats), dtype=jnp.int32)

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        def sweep(i, values):
            return lda_augmented_step(jax.random.fold_in(rng_key, i), hmc_sites["alpha"], *values, token_doc,
                                      token_word, eta)

        beta, theta = jax.lax.fori_loop(0, gibbs_sweeps, sweep, (gibbs_sites["beta"], gibbs_sites["theta"]))
        return {"beta": beta, "theta": theta}

    return ExactGibbs(model, gibbs_fn, ["beta", "theta"], nuts_model=_alpha_model, **nuts_kwargs)


def _alpha_model(*args, **kwargs):
    """:func:`model` without its ``counts`` site: the same conditional of ``alpha`` given ``beta`` and ``theta``.

    Given ``beta`` and ``theta`` the likelihood does not depend on ``alpha``;
    leaving it out spares the NUTS step of :func:`kernel` an O(N V k) (dense)
    or O(nnz k) evaluation per leapfrog step.
    """
    with numpyro.handlers.block(hide=["counts"]):
        model(*args, **kwargs)


model.kernel = kernel

@face({
    **MODEL_ARGUMENTS,
    "samples": Param("dict", "Posterior draws with leading (chain, draw) axes, as "
                     "``mcmc.get_samples(group_by_chain=True)``: ``\"alpha\"`` (chain, draw, k) and ``\"beta\"`` "
                     "(chain, draw, k, V). Other sites (``theta``) are ignored: ``theta`` is integrated out."),
    "counts": Param("array, scipy.sparse matrix or DocumentCounts, shape (N, V)", "The observed counts, as given to "
                    ":func:`model`.", None, annotation=ArrayLike | sp.spmatrix | DocumentCounts),
    "doc_lengths": Param("array, optional", "Unused (the lengths are those of ``counts``).", None),
    "eta": Param("float", "Unused (a prior, not part of the likelihood).", 0.1),
    "alpha_prior": Param("(float, float)", "Unused (a prior, not part of the likelihood).", (1.0, 1.0),
                         annotation=tuple[float, float]),
    "subsample_size": Param("int, optional", "Unused: every document is scored.", None),
    "num_particles": Param("int", "S, importance-sampling particles per document and draw.", NUM_PARTICLES,
                           Interval(int, 1)),
    "seed": Param("int", "Randomness of the particles (each draw gets its own stream).", 0, Interval(int, 0)),
})
def pointwise_log_likelihood(samples, counts, *, k, vocab_size, doc_lengths, eta, alpha_prior, subsample_size,
                             num_particles, seed) -> np.ndarray:
    """Per-document log-likelihood of posterior draws with ``theta`` integrated out, for PSIS-LOO.

    For every draw of ``(alpha, beta)`` and document ``d``,

    .. math::

        \\log p(c_d \\mid \\alpha, \\beta) = \\log \\int
            \\mathrm{Mult}(c_d \\mid n_d, \\theta^T \\beta)\\,
            \\mathrm{Dir}(\\theta \\mid \\alpha)\\, d\\theta,

    the likelihood of a new document under the model ([1]_). The
    log-likelihood that ``az.from_numpyro`` records for :func:`model` is
    ``log p(c_d | theta_d, beta)`` at each draw's own ``theta_d``: leaving a
    document out moves its ``theta_d`` far, the importance ratios of
    PSIS-LOO ([2]_) have heavy tails and most documents get Pareto k > 0.7.
    With ``theta_d`` integrated out, PSIS-LOO estimates the predictive
    density of held-out documents (``benchmarks/bench_lda_loo.py``).

    Estimator: importance sampling with ``num_particles`` (S) particles per
    document and draw
    (:func:`~specinit.distributions.counts.lda_marginal_loglik`). The
    proposal is a defensive mixture: a Dirichlet at the fixed-topic
    fold-in's variational posterior ``gamma_d`` ([3]_ Sec. 5.2) with its
    concentration halved (wider than the fold-in, which is narrower than
    the posterior), and the prior ``Dir(alpha)`` for one particle in eight,
    which bounds every importance weight. The value is the log of an
    unbiased estimate of the integral: biased low by about
    ``Var(w) / (2 S E[w]^2)`` and consistent as S grows. The multinomial
    coefficient ``log n_d! - sum_w log c_dw!`` is included, as in the
    model's ``counts`` site. With k = 1 the value is exact.

    Cost: ``O(S * nnz * k)`` per draw for sparse counts (``O(S * N * V * k)``
    dense), plus 20 fold-in iterations of ``O(nnz * k)``; memory bounded
    by :data:`~specinit.distributions.counts.POINTWISE_BUDGET` floats (particles and draws are taken in
    blocks), never N x V for sparse counts. ``benchmarks/bench_lda_loo.py``
    measures its time, its seed-to-seed spread and its bias on real text.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, N)
        ``log p(c_d | alpha, beta)`` per draw and document (float64 copy of
        values computed in the dtype of ``beta``).

    Raises
    ------
    ValueError
        ``samples`` without ``alpha`` and ``beta`` of shapes (chain, draw,
        k) and (chain, draw, k, V) matching ``k`` and the counts, or with
        non-positive or non-finite values; ``counts`` missing or not counts
        (see :func:`model`); ``num_particles`` below 1.
    TypeError
        ``samples`` not a mapping; non-integer ``k``, ``num_particles`` or
        ``seed``.

    Notes
    -----
    Available as ``lda.model.pointwise_log_likelihood``:
    :func:`specinit.posterior.to_inference_data` reads it there and puts
    these values in the ``log_likelihood`` group (dims ``chain, draw,
    documents``), so ``az.loo`` and :func:`specinit.posterior.loo` use them.

    References
    ----------
    .. [1] Wallach, Murray, Salakhutdinov, Mimno. "Evaluation methods for
       topic models", ICML 2009, Sec. 4 (importance sampling of
       ``p(c_d | alpha, beta)``).
    .. [2] Vehtari, Gelman, Gabry. "Practical Bayesian model evaluation using
       leave-one-out cross-validation and WAIC", Statistics and Computing
       27, 2017 (PSIS-LOO, Pareto k).
    .. [3] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 5.2.
    """
    from collections.abc import Mapping

    func = "lda.pointwise_log_likelihood"
    if not isinstance(samples, Mapping):
        raise bad_argument("samples", None, "a dict of posterior draws (mcmc.get_samples(group_by_chain=True))",
                           samples, kind=TypeError)
    missing = [name for name in ("alpha", "beta") if name not in samples]
    if missing:
        raise bad_argument("samples", None, "posterior draws with the sites 'alpha' and 'beta'",
                           f"no {' or '.join(repr(m) for m in missing)} among {sorted(samples)}", describe=False)
    if counts is None:
        raise bad_argument("counts", None, "the observed counts (an (N, V) array, a scipy.sparse matrix or "
                           "DocumentCounts)", counts)
    data = ModelData(counts, func, vocab_size, None, None)
    alpha, beta = np.asarray(samples["alpha"]), np.asarray(samples["beta"])
    if alpha.ndim != 3 or alpha.shape[-1] != k:
        raise bad_argument("samples", None, f"draws of 'alpha' of shape (chain, draw, k={k})",
                           f"'alpha' of shape {alpha.shape}", describe=False)
    if beta.shape != (*alpha.shape[:2], k, data.vocab_size):
        raise bad_argument("samples", None, f"draws of 'beta' of shape (chain, draw, k, V) = "
                           f"{(*alpha.shape[:2], k, data.vocab_size)}", f"'beta' of shape {beta.shape}",
                           describe=False)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if not (np.all(np.isfinite(value)) and np.all(value > 0 if name == "alpha" else value >= 0)):
            raise bad_argument("samples", None, f"finite {'positive' if name == 'alpha' else 'non-negative'} "
                               f"draws of '{name}'", f"values outside that range in '{name}'", describe=False)
    counts = data.sparse if data.sparse is not None else data.dense
    values = lda_marginal_loglik_draws(seed, alpha.reshape(-1, k), beta.reshape(-1, k, data.vocab_size), counts,
                                       num_particles)
    return values.reshape(*alpha.shape[:2], data.n_docs)


model.pointwise_log_likelihood = pointwise_log_likelihood


@FAMILY.face(
    validate=True,
    beta=POPULATION_TOPICS,
    alpha=Param("array-like, shape (k,)", "Dirichlet parameters (positive); ``alpha0 = sum(alpha)``.", None))
def population_moments(beta, alpha) -> FactoredMoments:
    """Exact Dirichlet-corrected ``M2``, ``M3`` of LDA ([1]_ Lemma 3).

    Returns
    -------
    FactoredMoments
        ``M2 = sum_i alpha_i / ((a0+1) a0) b_i b_i^T`` and
        ``M3 = sum_i 2 alpha_i / ((a0+2)(a0+1) a0) b_i^(x)3``, for
        :func:`spectral_from_moments` with ``alpha0 = sum(alpha)``.

    Raises
    ------
    ValueError
        If ``beta`` is not 2-D or ``alpha`` not positive with one entry per topic.
    """
    return FAMILY.population_moments(site_values(beta, "beta", alpha=alpha))


@public
def seed_prior(estimate: SpectralEstimate, *, eta: float = 0.1, strength: float = SEED_PRIOR) -> np.ndarray:
    """The (k, V) topic concentration that keeps a seeded fit's topics around their seed words in NumPyro.

    ``eta`` for every word of every topic, plus ``strength`` for each seed
    word in its own topic: a ``Dirichlet`` prior on each row of ``beta``
    that puts extra mass on the seed words. Pass it as ``eta`` to
    :func:`model`, :func:`kernel`, :func:`svi` or :func:`guide`: with the
    estimate's warm start (topic ``i`` is seed group ``i``'s), the
    posterior stays organized around the seeds where the data allow it.

    Parameters
    ----------
    estimate : SpectralEstimate
        A fit with ``seed_words`` (:func:`spectral` or :func:`update`).
    eta : float, default 0.1
        The symmetric concentration of every entry.
    strength : float, default :data:`~specinit.models._topics.SEED_PRIOR`
        The extra concentration of a seed word in its own topic.

    Returns
    -------
    ndarray, shape (k, V)

    Raises
    ------
    ValueError
        An estimate fitted without seed words, or a non-positive ``eta`` or negative ``strength``.
    """
    eta = Interval(float, 0.0, open="low").check("eta", eta)
    strength = Interval(float, 0.0).check("strength", strength)
    seeds = SeedWords.stored(estimate) if isinstance(estimate, SpectralEstimate) else None
    if seeds is None:
        raise bad_argument("estimate", None, "a SpectralEstimate fitted with seed_words", estimate)
    k, n_words = estimate.params["beta"].shape
    return seeds.prior(seeds.columns(None, n_words, k), k, n_words, eta, strength)


@FAMILY.face(method=COMMON_OPTIONS["method"], alpha0=Param("float", "``sum(alpha)`` used in the moment correction."))
def spectral_from_moments(moments, k, alpha0, *, method, seed, vocabulary, floor,
                          decompose_options) -> SpectralEstimate:
    """Recover ``beta`` and ``alpha`` from Dirichlet-corrected moments with known ``alpha0``.

    Returns
    -------
    SpectralEstimate
        ``params["alpha"]`` (k,) and ``params["beta"]`` (k, V).

    Raises
    ------
    ValueError
        Bad ``k`` or ``alpha0``, or degenerate moments.
    specinit.engine.whitening.IndefiniteMomentError
        If the corrected second moment is not positive definite on its top k
        eigenvectors (often a misspecified ``alpha0``).
    """
    a0 = ALPHA0.check("alpha0", alpha0)
    if a0 is None:
        raise bad_argument("alpha0", None, "a number (the concentration the moments were corrected with)", alpha0,
                           kind=TypeError)
    if getattr(moments, "alpha0", a0) != a0:
        raise bad_argument("alpha0", None, f"the alpha0 the moments were corrected with ({moments.alpha0})", alpha0)
    return FAMILY.spectral_from_moments(moments, k, method=method, seed=seed, vocabulary=vocabulary, floor=floor,
                                        decompose_options=decompose_options, alpha0=a0)


@FAMILY.face()
def spectral(counts, k, alpha0, *, method, weighting, seed, vocabulary, doc_topics, floor, decompose_options, backend,
             alpha0_grid, alpha_sum, em_sweeps, closing_tol, seed_words, seed_anchor, seed_prior) -> SpectralEstimate:
    """Method-of-moments estimate of LDA: anchor words on the cleaned pair moment (default) or a tensor path.

    The default (``method="anchor"``) uses the pair moment ``E2`` alone,
    estimated with per-document weights (each document's unbiased pair
    estimate, averaged), cut to its k largest positive eigenpairs
    (``E2 ~ U diag(s) U^T``: negative eigenvalues and the tail of the
    spectrum are estimator noise) and never formed: anchor words and the
    RecoverL2 weights come from the exact k-dimensional embedding of the
    row-normalized low-rank moment ([4]_, [5]_;
    :func:`specinit.engine.anchors.fit_anchor`). Then at most ``em_sweeps`` EM
    sweeps over the corpus close the estimate (per-document fold-in of the
    topic proportions, topics from the expected counts plus ``eta = 0.1``;
    :func:`specinit.models._topics.close_topics`), stopping early once a
    sweep raises the training log-likelihood per token by less than
    ``closing_tol`` (relative). On the real corpora of
    ``benchmarks/bench_lda_real.py`` (docstrings, man pages, news) this
    path gives a held-out perplexity 0.5-0.9x that of the tensor path and
    of rectified anchor words (``anchortopics``), at similar cost; on data
    drawn from LDA itself, whose topics need not have anchor words, the
    tensor path (``method="tpm"`` etc.) is the consistent one (mean topic L1
    error 0.67 against the default's 0.97 at N = 1M, V = 50k, k = 100).

    Seeded topics (``seed_words``): topic ``i`` is seed group ``i``'s. Its
    anchor row is made from the group (``seed_anchor``), and the closing
    sweeps are those of seeded LDA with the seeds as exact constraints
    (:func:`specinit.models._topics.seed_constraints`): a seed word is
    emitted by its own topic alone (z-labels, [6]_), and a training
    document that contains seed words draws its tokens from their groups'
    topics and the unseeded ones only (Labeled LDA, [7]_), so the words
    that share documents with the seeds join their topics. The constraints
    are not the anchor fit's, so the sweeps run until they converge (at
    most :data:`SEEDED_SWEEPS`). On real text with known categories
    (``benchmarks/bench_seeded.py``) the seeded topics pick out their
    categories' held-out documents better than unseeded topics, at
    held-out perplexity within 5% of the unseeded fit.

    Tensor path (``method`` in ``"tpm", "svtd", "eca", "als"``): with
    ``alpha0=None`` the Dirichlet concentration is chosen from the data
    ([3]_; :func:`specinit.models._topics.fit_lda_grid`). The moments depend
    on ``alpha0`` only through low-rank terms in ``m1`` ([1]_ Lemma 3), so
    one set of passes serves every ``alpha0`` of ``alpha0_grid``; each
    candidate is scored by the pairwise composite log-likelihood of the word
    pairs co-occurring in (a seeded sample of) the documents (closed form;
    on real text it ranks candidates as held-out perplexity does), ties
    broken by the misfit to the pair and triple moments (zero at the true
    ``alpha0``). The grid, the scores and the choice are in ``diagnostics``
    (``alpha0_grid``, ``alpha0_criterion``, ``alpha0_tied``,
    ``alpha0_moment_misfit``, ``alpha0_feasible``, ``alpha0``). ``alpha``
    keeps the tensor's relative topic weights with ``sum(alpha) =
    alpha_sum``: second moments do not identify the concentration (the
    tensor's own sum is reported as ``alpha_sum_tensor``). If ``M2(alpha0)``
    is indefinite for every grid value, the single-topic limit
    ``alpha0 -> 0`` is used with a warning; only an ``E2`` indefinite on its
    top k (k beyond what the data support) raises.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"alpha"`` (k,), ``"beta"`` (k, V), and ``"theta"``
        (N, k) when computed; ``diagnostics`` include the signed M2
        eigenvalues (``m2_eigenvalues``, ``m2_eigengaps`` and
        ``k_supported``, the number of positive eigenvalues: a guide
        to choosing k), condition number, decomposition residual, eigengaps
        and convergence, negative mass of each topic before projection,
        ``alpha_sum`` vs ``alpha0``, the ``alpha0`` selection table and
        documents dropped (fewer than 3 tokens); the path taken
        (``method``, ``weighting``); for ``method="anchor"`` the anchors,
        the rank of the cut (``anchor_rank``), its eigenvalues and the
        number of negative eigenvalues cut
        (``anchor_negative_eigenvalues_cut``); the closing sweeps
        (``closing_sweeps``, ``closing_log_likelihood``: training
        log-likelihood per token before each M-step).

    Raises
    ------
    ValueError
        Bad counts (negative, non-integer, NaN), ``k`` out of range (``k >=
        V`` or more topics than usable documents), ``alpha0 <= 0``, or an
        indefinite second moment (with the likely cause).
    TypeError
        Counts of a non-numeric type, or unknown ``decompose_options``.

    Warns
    -----
    RuntimeWarning
        Topics that needed repair (negative total mass, or more than 25% of
        their mass negative before projection), a decomposition that did not
        converge, or an ``alpha0`` grid that is entirely indefinite.

    References
    ----------
    .. [3] Lindsay, "Composite likelihood methods", Contemporary
       Mathematics 80, 1988 (the pairwise criterion); Wallach, Mimno,
       McCallum, "Rethinking LDA: why priors matter", NIPS 2009 (the
       concentration matters for held-out likelihood).
    .. [4] Arora, Ge, Halpern, Mimno, Moitra, Sontag, Wu, Zhu. "A practical
       algorithm for topic modeling with provable guarantees", ICML 2013,
       Alg. 2-3.
    .. [5] Lee, Cho, Bindel, Mimno. "Practical correlated topic modeling
       and analysis via the rectified anchor word algorithm", EMNLP 2019
       (anchor words from a low-rank pair moment).
    .. [6] Andrzejewski, Zhu. "Latent Dirichlet allocation with topic-in-set
       knowledge", NAACL HLT 2009 Workshop on Semi-supervised Learning for
       NLP; Jagarlamudi, Daume, Udupa. "Incorporating lexical priors into
       topic models", EACL 2012 (seeded LDA).
    .. [7] Ramage, Hall, Nallapati, Manning. "Labeled LDA: a supervised
       topic model for credit attribution in multi-labeled corpora", EMNLP
       2009.
    """
    seed_words = SeedWords.check("seed_words", seed_words)
    if seed_words is not None:
        if isinstance(k, str):
            raise bad_argument("k", None, "an integer with seed_words (each seed group is one of the k topics)", k)
        if vocabulary is not None:
            seed_words = seed_words.resolved(vocabulary)
    return FAMILY.spectral(counts, k, method=method, seed=seed, vocabulary=vocabulary, floor=floor,
                           decompose_options=decompose_options, backend=backend, weighting=weighting, alpha0=alpha0,
                           alpha_sum=alpha_sum, alpha0_grid=alpha0_grid, doc_topics=doc_topics, em_sweeps=em_sweeps,
                           closing_tol=closing_tol, seed_words=seed_words, seed_anchor=seed_anchor,
                           seed_prior=seed_prior)


@face({**MODEL_ARGUMENTS, **LOCAL_STEP,
       "counts": Param("scipy.sparse matrix or DocumentCounts", "The counts of the minibatch (as for :func:`model`).",
                       None, annotation=sp.spmatrix | DocumentCounts)})
def guide(counts, *, k, vocab_size, doc_lengths, eta, alpha_prior, subsample_size, local_steps, local) -> None:
    """NumPyro guide of :func:`model` on sparse counts: global point masses, closed-form local ``theta``.

    Its parameters ``alpha_unconstrained`` (k,) and ``beta_unconstrained``
    (k, V-1) start at zero unless given to ``SVI.init(init_params=...)``.
    """
    data = svi_batch(counts)
    alpha = point_mass("alpha", jnp.zeros(k), TRANSFORMS["alpha"])
    with numpyro.plate("topics", k):
        beta = point_mass("beta", jnp.zeros((k, data.vocab_size - 1)), TRANSFORMS["beta"])
    gamma = jax.lax.stop_gradient(local_gamma(alpha, beta, data, local_steps))
    with numpyro.handlers.scale(scale=data.num_documents / data.n_docs), numpyro.plate("documents", data.n_docs):
        if local == "mean":
            numpyro.sample("theta", dist.Delta(gamma / jnp.sum(gamma, axis=-1, keepdims=True), event_dim=1))
        else:
            numpyro.sample("theta", dist.Dirichlet(gamma))


@face({**MODEL_ARGUMENTS, **LOCAL_STEP, **SVI_OPTIONS})
def svi(counts, k, *, init, max_steps, tol, num_steps, batch_size, seed, progress, lr, decay_steps, local_steps, local,
        eta, alpha_prior, snapshot_every) -> TopicSVIResult:
    """Minibatch SVI of sparse LDA with closed-form per-document updates (online-VB style).

    Runs ``numpyro.infer.SVI`` on :func:`model` fed by minibatches of
    documents (rows of a sparse matrix; O(nnz) per step). The guide holds
    ``alpha`` and the topics ``beta`` as point masses in unconstrained
    coordinates and computes each minibatch's ``theta`` by the online
    variational-Bayes E-step given the current ``beta`` ([1]_ Alg. 2): no
    per-document parameters are optimized (see
    :mod:`specinit.models._svi`).

    Returns
    -------
    TopicSVIResult
        ``params`` (``"beta"``, ``"alpha"``), ``losses``, ``guide``,
        ``guide_params``, ``seconds``, ``snapshots``, ``checks``,
        ``n_steps``, ``stop_reason`` (``"plateau"``, ``"max_steps"`` or
        ``"num_steps"``), ``diagnostics``.

    Raises
    ------
    ValueError
        Bad counts, ``batch_size`` larger than N, an ``init`` without
        positive ``beta`` (k, V) and ``alpha`` (k,), or bad step settings.
    TypeError
        Counts or settings of the wrong type.

    Notes
    -----
    Compiled once per process for each set of shapes and settings; JAX's
    persistent compilation cache keeps it across processes (see
    :mod:`specinit.models._svi`).

    References
    ----------
    .. [1] Hoffman, Blei, Bach. "Online learning for latent Dirichlet
       allocation", NeurIPS 2010, Alg. 2.
    """
    kwargs = {"k": k, "eta": eta, "alpha_prior": tuple(alpha_prior)}
    return run_svi(model, guide, lambda vocab: {"alpha": (k,), "beta": (k, vocab)}, counts, k, init=init,
                   num_steps=num_steps, max_steps=max_steps, tol=tol, batch_size=batch_size, seed=seed, progress=progress,
                   lr=lr, decay_steps=decay_steps,
                   snapshot_every=snapshot_every, model_kwargs=kwargs,
                   guide_options={"local_steps": local_steps, "local": local})


@FAMILY.face(
    validate=True, **UPDATE_ARGUMENTS,
    weighting=replace(LDA.options["weighting"], type="{'per-document', 'pooled'}", default="per-document",
                      doc="Estimator of the pair moment (default: that of :func:`spectral`'s anchor words); fixed "
                      "by the first batch."),
    em_sweeps=Param("int", "EM sweeps over the batch after the anchor fit (one pass each; ``0``: the anchor fit "
                    "alone). They keep ``sum(alpha)``.", EM_SWEEPS, Interval(int, 0)))
def update(counts, estimate, *, k, alpha_sum, em_sweeps, seed, floor, weighting, vocabulary, seed_words,
           seed_prior) -> SpectralEstimate:
    """Add a batch of documents to an LDA fit: exact merged moments, warm-started anchor words, sweeps on the batch.

    The pair moment ``E2`` is a sum over documents, so the summary of the
    documents seen so far (:class:`~specinit.engine.moments.PairSums`: first-order
    sums and the sparse word-pair sums) merges with the new batch's exactly:
    after any number of batches it equals the summary of all documents at once
    (to rounding). The topics are then recovered from the merged moments by
    anchor words (the second-order method of :func:`spectral`,
    ``method="anchor"``), the eigensolver started from the previous fit's
    leading Ritz vectors and stopped once its residual is a tenth of the
    sampling noise the pair moment's negative eigenvalues show
    (:data:`~specinit.engine.anchors.WARM_NOISE_TOL`, before the sweeps move
    the topics further); the ``em_sweeps``
    closing sweeps run over the new batch only
    (the earlier documents are not kept): each M-step adds the earlier
    documents' expected topic-word counts under the current topics from their
    merged word counts, ``n_w p(topic | w)`` with ``p(topic | w)``
    proportional to ``alpha_k beta_kw`` (exact first-order sums; the
    documents' own context is what the batch's sweeps add). Counts left by
    earlier sweeps are not reused: they were computed under earlier topics
    and pull the sweeps back towards them. Topics keep their labels from batch to
    batch (the new ones are matched to the previous ones by L1 distance). The
    returned estimate keeps the merged moments in its ``state``
    (``moments/...``), which :meth:`~specinit.estimate.SpectralEstimate.save`
    writes, so updates go on in a later process. The online face of
    ``SpectralLDA.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"lda"`` with ``alpha`` (k,) and ``beta`` (k, V); ``diagnostics``
        as for ``method="anchor"`` plus ``n_batches``; ``state`` holds the
        merged moments and the eigensolver's leading Ritz block (the next
        update's start).

    Raises
    ------
    ValueError
        ``k`` missing on the first batch or different from the estimate's,
        an estimate without stored moments (from :func:`spectral`: fit the
        first batch with :func:`update`), a batch over another vocabulary,
        invalid counts.
    MemoryError
        Word-pair sums over the memory budget (:func:`specinit.memory_limit`).

    Examples
    --------
    >>> from specinit.synthetic import sample_lda
    >>> X = sample_lda(n_docs=400, vocab_size=30, k=3, alpha=0.3, doc_length=40, seed=0).counts
    >>> est = update(X[:200], k=3, seed=0)
    >>> est = update(X[200:], est, seed=0)
    >>> est.params["beta"].shape, est.diagnostics["n_batches"], est.diagnostics["n_documents"]
    ((3, 30), 2, 400)
    """
    step = FAMILY.anchor_update(counts, estimate, k, weighting=weighting, vocabulary=vocabulary, seed=seed,
                                floor=floor, alpha_sum=alpha_sum, noise_tol=WARM_NOISE_TOL,
                                seed_words=SeedWords.check("seed_words", seed_words))
    beta, alpha, report = step.beta, step.alpha, dict(step.report)
    seeds, columns = step.seed_words, step.seed_columns
    if em_sweeps:
        # the earlier documents join the sweeps through their word counts under these topics (none at first)
        joint = alpha[:, None] * beta
        earlier = step.merged.word_counts - step.batch.word_counts
        eta = CLOSING_ETA if seeds is None else seeds.closing_eta(columns, beta.shape, seed_prior)
        beta, alpha, closing = close_topics(step.source, beta, alpha, em_sweeps, floor=floor, eta=eta,
                                            prior_counts=earlier[None, :] * joint / joint.sum(axis=0, keepdims=True),
                                            seed_groups=columns)
        report.update(closing)
    if seeds is not None:
        warn_seeds(seeds, report)
        report.update(seeds.closed(beta, alpha, columns))
    return FAMILY.estimate(step.beta.shape[0], {"alpha": alpha, "beta": beta},
                           {**report, "method": "anchor", "em_sweeps": em_sweeps}, vocabulary=step.vocabulary,
                           state=step.state)


@face({
    **SVI_OPTIONS,
    "counts": Param("array-like or scipy.sparse matrix, shape (N, V)", "Word counts (the data NUTS will run on)."),
    "estimate": Param("SpectralEstimate or dict", "Starting ``beta`` (k, V) and ``alpha`` (k,) (e.g. "
                      ":func:`spectral`)."),
    "num_steps": Param("int", "SVI steps.", 500),
    "batch_size": Param("int, optional", "Documents per step; default ``min(N, 2048)``.", None),
    "tol": PLATEAU_TOL,
    "progress": replace(SVI_OPTIONS["progress"], default=False),
})
def refine(counts, estimate, *, num_steps, batch_size, seed, lr, tol, progress) -> RefineResult:
    """Spectral then refine: variational EM from an estimate, ready to warm-start NUTS.

    Runs :func:`svi` from ``estimate`` on the whole corpus (full-batch steps
    when N <= ``batch_size``): each step is the closed-form per-document
    E-step given the topics and an Adam step on ``beta`` and ``alpha``. The
    spectral topics place the run in one labelling; the refinement moves rare
    words to their topics, which NUTS chains cannot do within a short
    warm-up (started from the raw spectral values, one chain out of four may
    keep a rare word in another topic for the whole run: split-R-hat above
    1.1). The per-document ``theta`` of the result is the fixed-topic
    posterior mean (:func:`document_topics`), so every latent site of
    :func:`model` has a starting value.

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"lda"``: ``beta``, ``alpha``, ``theta``; the
        start's diagnostics plus ``refine/*`` keys), ``.log_likelihood``
        (the ELBO after each step, ``num_steps`` values; a lower bound of the
        log marginal likelihood), ``.n_iter``, ``.converged``, ``.method``
        ``"svi"``.

    Raises
    ------
    TypeError
        An ``estimate`` that is neither a SpectralEstimate nor a dict.
    ValueError
        Bad counts, an estimate of another model, or ``beta`` (k, V) and
        ``alpha`` (k,) that are missing, outside their supports or do not
        match the counts.
    """
    return FAMILY.refine(counts, estimate, method="svi", num_steps=num_steps, batch_size=batch_size, seed=seed, lr=lr,
                         tol=tol, progress=progress)


log_likelihood = FAMILY.log_likelihood_face("counts", """
    Log-likelihood of every document given the topics and its topic proportions ``theta``.

    ``log p(c_d | theta_d, beta)`` (the multinomial of ``theta_d @ beta``,
    per-word topics summed out; the density of :func:`model`'s ``counts``
    site). ``theta`` comes from the estimate, or, when it has none, from the
    fixed-topic fold-in :func:`document_topics`.

    Returns
    -------
    ndarray, shape (N,)
    """)


def _refine_steps(estimator, faces, X, estimate):
    """:class:`~specinit.estimators.SpectralLDA`'s refinement: ``refine_steps`` steps of :func:`refine`."""
    if not estimator.refine_steps:
        return estimate
    return refine(X, estimate, num_steps=estimator.refine_steps, seed=estimator._seed).estimate


def _document_completion(estimator, faces, X) -> float:
    """:class:`~specinit.estimators.SpectralLDA`'s score: document completion (half of each document folded in)."""
    from specinit.corpus import document_completion

    if not np.any(np.asarray(X.sum(axis=1)) >= 2):
        raise bad_argument("X", f"{type(estimator).__name__}.score", "at least one document with 2 or more tokens",
                           "none", describe=False)
    params = estimator.estimate_.params
    return document_completion(X, params["beta"], params["alpha"], seed=estimator._seed).log_likelihood
