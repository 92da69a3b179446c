"""The single-topic (mixture of unigrams) model: NumPyro program and moment map.

Every document has one topic ``z_d ~ Categorical(weights)``; its words are
drawn i.i.d. from ``beta[z_d]``. The topic is summed out, so the observed
site ``counts`` lives in the ``documents`` plate with one log-likelihood per
document.

Moments ([1]_ Thm 3.1, [2]_ Thm 1): ``M2 = E[x1 (x) x2] = sum_i w_i b_i b_i^T``,
``M3 = E[x1 (x) x2 (x) x3] = sum_i w_i b_i^(x)3`` (all-word unbiased
estimators, no Dirichlet correction). After whitening the tensor
eigenvalues are ``lambda_i = w_i^(-1/2)``, so ``w_i = 1 / lambda_i^2`` and
``b_i = lambda_i (W^T)^+ v_i``.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Thm 3.1.
.. [2] Ruffini, Casanellas, Gavalda, Thm 1, Alg. 1, Remark 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.special import gammaln

from specinit._validation import Interval, Options
from specinit.family import site_values
from specinit.distributions.continuous import TRANSFORMS, point_mass
from specinit.distributions.counts import DocumentCounts, ModelData, mixture_loglik, topic_components
from specinit.distributions.mixtures import MixtureLikelihood
from specinit.engine.population import FactoredMoments
from specinit.estimate import ModelFacts, Site, SpectralEstimate
from specinit.faces import RANDOM_STATE, Face, Param, face, n_components_param, predicted
from specinit.faces import responsibilities as posterior_topics
from specinit.models._svi import SVI_OPTIONS, TopicSVIResult, run_svi, svi_batch
from specinit.models._topics import MODEL_ARGUMENTS, POPULATION_TOPICS, SEED_WORDS, UPDATE_ARGUMENTS, SeedWords, \
    TopicFamily, topic_concentration, warn_seeds
from specinit.refine import RefineResult, check_estimate, component_share, mixture_e_step, split_merge_pair

if TYPE_CHECKING:
    from specinit.engine.exchangeable import ExchangeableFit
    from specinit.engine.moments import CountMoments

__all__ = ["FACTS", "FAMILY", "SingleTopic", "guide", "log_likelihood", "model", "population_moments", "predict", "refine",
           "responsibilities", "spectral", "spectral_from_moments", "svi", "update"]

COUNT_SUPPORT = dist.constraints.independent(dist.constraints.nonnegative_integer, 1)


class SingleTopic(TopicFamily):
    """The mixture of unigrams: one topic per document, all-word moments with no Dirichlet correction."""

    name = "single_topic"
    sites = {
        "weights": Site("simplex", (0,), ("topics",), ("topics",)),
        "beta": Site("simplex", (0,), ("topics", "word"), ("word",)),
        "counts": Site("observed", (), ("documents", "word"), ("word",)),
    }
    match_site = "beta"
    advice = "The documents may not follow a k-topic mixture: try a smaller k."

    def population_moments(self, params: Mapping[str, Any], **options: Any) -> FactoredMoments:
        weights = np.asarray(params["weights"], dtype=np.float64)
        return FactoredMoments(np.asarray(params["beta"], dtype=np.float64), weights, weights)

    def unwhiten(self, fit: ExchangeableFit, moments: CountMoments | FactoredMoments, k: int, floor: float,
                 **options: Any) -> tuple[dict, dict, dict]:
        beta, eig, report = self.topics(fit, moments, k)
        report["weights_sum_before_normalization"] = float(np.sum(1.0 / eig**2))
        return {"weights": 1.0 / eig**2, "beta": beta}, report, {}

    def held_out(self, train: sp.csr_matrix, test: sp.csr_matrix, estimate: SpectralEstimate) -> float:
        """Marginal log-likelihood of ``test`` (multinomial coefficients left out) after 30 MAP-EM steps on ``train``."""
        estimate = self.refine(train, estimate, max_iter=30, tol=None, rtol=2e-6, restarts=0, pseudo_count=0.1,
                               window=10).estimate
        return self.token_log_likelihood(test, estimate)

    def token_log_likelihood(self, counts: ArrayLike | sp.spmatrix,
                             estimate: SpectralEstimate | Mapping[str, Any]) -> float:
        """Log-likelihood of the documents' token sequences (topic summed out, no multinomial coefficient)."""
        estimate = check_estimate(self, estimate)
        data = self.refine_data(counts, estimate)
        return float(np.sum(mixture_e_step(self, estimate.params, data, per_observation=True)[1] - data.log_coefficient))

    def refine_data(self, counts: ArrayLike | sp.spmatrix, estimate: SpectralEstimate | Mapping[str, Any],
                    pseudo_count: float = 0.0, **options: Any) -> "UnigramData":
        X = self.estimate_counts(counts, estimate).astype(np.float64)
        log_factorials = X.copy()
        log_factorials.data = gammaln(X.data + 1.0)
        coefficient = gammaln(np.asarray(X.sum(axis=1)).ravel() + 1.0) - np.asarray(log_factorials.sum(axis=1)).ravel()
        return UnigramData(X, coefficient, PSEUDO_COUNT.check("pseudo_count", pseudo_count))

    def component_log_prob(self, params: Mapping[str, Any], data: "UnigramData") -> np.ndarray:
        log_beta = np.log(np.maximum(np.asarray(params["beta"], dtype=np.float64), np.finfo(np.float64).tiny))
        return np.asarray(data.csr @ log_beta.T) + data.log_coefficient[:, None]

    def e_step(self, params: Mapping[str, Any], data: "UnigramData") -> tuple[np.ndarray, float]:
        resp, total = mixture_e_step(self, params, data)
        if data.pseudo_count:
            total += data.pseudo_count * sum(float(np.sum(np.log(params[name]))) for name in ("weights", "beta"))
        return resp, total

    def m_step(self, data: "UnigramData", resp: np.ndarray, params: Mapping[str, Any], **options: Any) -> dict:
        return {"weights": resp.sum(axis=0) + data.pseudo_count,
                "beta": np.asarray(data.csr.T @ resp).T + data.pseudo_count}

    def split_merge(self, params: Mapping[str, Any], data: "UnigramData", resp: np.ndarray, rng: np.random.Generator,
                    attempt: int = 0) -> dict | None:
        # merge: the topic whose removal costs the least log-likelihood leaves; split: the attempt-th heaviest
        # other topic, its documents divided along the principal axis of their word frequencies (power iteration
        # on the responsibility-weighted covariance, matrix-free on the sparse counts), each half's word counts
        # giving one of the two topics
        pair = split_merge_pair(self, params, data, attempt)
        if pair is None:
            return None
        leaving, split = pair
        weights = np.asarray(params["weights"], dtype=np.float64)
        lengths = np.asarray(data.csr.sum(axis=1)).ravel()
        frequencies = sp.diags(1.0 / np.maximum(lengths, 1.0)) @ data.csr
        share = component_share(resp, split)
        mean = np.asarray(frequencies.T @ share).ravel()
        axis = rng.standard_normal(data.csr.shape[1])
        for _ in range(30):
            projection = frequencies @ axis - mean @ axis
            axis = np.asarray(frequencies.T @ (share * projection)).ravel() - mean * float(share @ projection)
            norm = np.linalg.norm(axis)
            if not norm > 0:
                return None
            axis /= norm
        side = (frequencies @ axis - mean @ axis) > 0
        halves = [resp[:, split] * side, resp[:, split] * ~side]
        if min(float(h.sum()) for h in halves) <= 0:
            return None
        moved = {name: np.array(value, dtype=np.float64) for name, value in params.items()}
        for topic, half in zip((leaving, split), halves):
            counts = np.asarray(data.csr.T @ half).ravel() + max(data.pseudo_count, 1e-3)
            moved["beta"][topic] = counts / counts.sum()
            moved["weights"][topic] = weights[split] * float(half.sum()) / float(resp[:, split].sum())
        return moved

    def estimator_face(self) -> Face:
        """:class:`specinit.estimators.SpectralTopicMixture`."""
        return Face(
            class_name="SpectralTopicMixture", mixins=("cluster", "feature_names", "transformer"),
            summary="The mixture of unigrams (one topic per document) by the method of moments, then EM.",
            parameters={
                "n_components": n_components_param("topics", 10, 'single_topic.spectral(X, "auto")'),
                "method": Param("{'tpm', 'svtd', 'eca', 'als'}", "Tensor decomposition.", "tpm"),
                "max_iter": Param("int", "Most MAP-EM iterations after the spectral estimate "
                                  "(:func:`specinit.models.single_topic.refine` with its defaults, which stop earlier "
                                  "on its relative-gain rule); 0: none.", 500),
                "random_state": RANDOM_STATE,
            },
            spectral={"n_components": "k", "method": "method"},
            data="counts",
            constraints={"method": [Options(self.methods)]},
            refine=lambda estimator, faces, X, estimate: (refine(X, estimate, max_iter=estimator.max_iter).estimate
                                                          if estimator.max_iter else estimate),
            attributes={
                "components_": ("ndarray, shape (n_components, n_features)\n    Topic-word probabilities.",
                                lambda estimator, estimate, X: estimate.params["beta"]),
                "weights_": ("ndarray, shape (n_components,)",
                             lambda estimator, estimate, X: estimate.params["weights"]),
                "labels_": ("ndarray, shape (n_samples,)\n    Most probable topic of every training document.",
                            predicted),
            },
            transform=posterior_topics,
            predict_proba=posterior_topics,
            score=lambda estimator, faces, X: self.token_log_likelihood(X, estimator.estimate_),
            answers=frozenset({"perplexity", "partial_fit", "deferred_update"}),
        )


@dataclass(frozen=True)
class UnigramData:
    """Counts as the single-topic EM reads them: CSR (float64), log multinomial coefficients, the pseudo-count."""

    csr: sp.csr_matrix
    log_coefficient: np.ndarray
    pseudo_count: float = 0.0


#: The pseudo-count of the MAP refinement: a symmetric Dirichlet(1 + pseudo_count) prior on every topic and on
#: the weights.
PSEUDO_COUNT = Interval(float, 0.0)


FAMILY = SingleTopic()

#: Component axes, matching site and ArviZ dims of this family's sites (a view of ``FAMILY.sites``).
FACTS = ModelFacts.from_sites(*FAMILY.site_table())


@face(MODEL_ARGUMENTS)
def model(counts, *, k, vocab_size, doc_lengths, eta, subsample_size) -> None:
    """NumPyro single-topic model with the topic of each document summed out.

    Raises
    ------
    ValueError
        ``vocab_size``/``doc_lengths`` missing when generating, counts that
        are not two-dimensional, or ``subsample_size`` with sparse counts.
    TypeError
        Counts of an unsupported type.

    Notes
    -----
    NumPyro sites: ``weights`` (k,), ``beta`` (k, V), and ``counts`` in
    plate ``documents`` (observed for dense counts, a ``numpyro.factor`` of
    the per-document log-likelihood ``logsumexp_i(log w_i + sum_w c_dw log
    beta_iw)`` plus the multinomial coefficient for sparse counts; [1]_).

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Sec. 3.1 (the
       single-topic model).
    """
    data = ModelData(counts, "single_topic.model", vocab_size, doc_lengths, subsample_size)
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("topics", k):
        beta = numpyro.sample("beta", dist.Dirichlet(topic_concentration(eta, k, data.vocab_size)))
    with numpyro.handlers.scale(scale=data.scale), \
            numpyro.plate("documents", data.n_docs, subsample_size=subsample_size) as idx:
        n = data.lengths[idx]
        if data.sparse is not None:
            numpyro.factor("counts", mixture_loglik(weights, beta, data.sparse))
        elif data.dense is not None:
            numpyro.sample("counts", MixtureLikelihood(weights, partial(topic_components, beta), n.shape[0],
                                                       (data.vocab_size,), COUNT_SUPPORT), obs=data.dense[idx])
        else:
            z = numpyro.sample("z", dist.Categorical(weights))
            numpyro.sample("counts", dist.Multinomial(n, beta[z], total_count_max=data.max_length))


@FAMILY.face(
    validate=True,
    beta=POPULATION_TOPICS,
    weights=Param("array-like, shape (k,)", "Topic probabilities (positive).", None))
def population_moments(beta, weights) -> FactoredMoments:
    """Exact ``M2``, ``M3`` of the single-topic model (``omega = kappa = weights``).

    Returns
    -------
    FactoredMoments
        ``M2 = sum_i w_i b_i b_i^T`` and ``M3 = sum_i w_i b_i^(x)3`` ([1]_ Thm 3.1).
    """
    return FAMILY.population_moments(site_values(beta, "beta", weights=weights))


@FAMILY.face()
def spectral_from_moments(moments, k, *, method, seed, vocabulary, floor, decompose_options) -> SpectralEstimate:
    """Recover ``beta`` and ``weights`` from moments (empirical or population).

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    ValueError
        Bad ``k``, or degenerate moments.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment has fewer than k positive eigenvalues (k beyond what the data support).
    """
    return FAMILY.spectral_from_moments(moments, k, method=method, seed=seed, vocabulary=vocabulary, floor=floor,
                                        decompose_options=decompose_options)


@FAMILY.face()
def spectral(counts, k, *, method, weighting, seed, vocabulary, floor, decompose_options, backend) -> SpectralEstimate:
    """Method-of-moments estimate of the single-topic model.

    Returns
    -------
    SpectralEstimate
        ``params["beta"]`` (k, V) and ``params["weights"]`` (k,).
        Use :func:`predict` for the MAP clustering of documents and
        :func:`refine` for EM from the estimate. The second moment is
        whitened with its top-k positive eigenspace: on very short documents
        (a few tokens each) its sampling noise has negative eigenvalues
        larger than the smaller topics' eigenvalues; they are skipped,
        counted in ``diagnostics["m2_negative_skipped"]`` and warned about.

    Raises
    ------
    ValueError
        Bad counts (negative, non-integer, NaN) or ``k`` (``k >= V`` or more
        than the usable documents).

    Warns
    -----
    RuntimeWarning
        Negative eigenvalues of the second moment skipped by the whitening
        (the smaller kept components are within its sampling noise: refine
        the estimate), or topics that needed repair.
    TypeError
        Unknown ``decompose_options`` keys, or counts of a non-numeric type.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment has fewer than k positive eigenvalues (k beyond what the data support).
    """
    return FAMILY.spectral(counts, k, method=method, weighting=weighting, seed=seed, vocabulary=vocabulary, floor=floor,
                           decompose_options=decompose_options, backend=backend)


@FAMILY.refine_face(
    counts=Param("array-like or scipy.sparse matrix, shape (N, V)", "Word counts (the data the estimate describes)."),
    estimate=Param("SpectralEstimate or dict", "Starting ``weights`` (k,) and ``beta`` (k, V), inside their simplices "
                   "(checked)."),
    max_iter=500,
    tol=Param("float", "Relative tolerance: stop when the objective's gain per step, averaged over the last "
              "``window`` steps, and the gain Aitken's extrapolation still expects are both at most ``tol`` times "
              "``|L|`` (:class:`specinit.refine.StoppingRule`). Short texts gain in bursts (a slow step, then a climb "
              "when a cluster separates): the window rides out single slow steps.", 2e-6),
    pseudo_count=Param("float", "``a`` above, added to every expected word count and topic count in the M-step (0: "
                       "maximum likelihood). The default is the best held-out likelihood of "
                       "``benchmarks/bench_short_text.py`` among 0.01, 0.03, 0.1, 0.3 and 1.", 0.1),
    window=10, split_merge=2)
def refine(counts, estimate, *, method, max_iter, tol, floor, restarts, seed, pseudo_count, window, split_merge,
           accelerate) -> RefineResult:
    """Spectral then refine: MAP-EM for the mixture of unigrams started from an estimate.

    The objective is the log posterior under a symmetric Dirichlet(1 + ``pseudo_count``) prior on every
    topic's word distribution and on the weights,

    .. math::

        \\sum_d \\log \\sum_i w_i \\,\\mathrm{Mult}(c_d \\mid n_d, b_i)
        + a \\big(\\sum_{i,w} \\log b_{iw} + \\sum_i \\log w_i\\big), \\qquad a = \\text{pseudo\\_count},

    and each EM step raises it ([1]_ Sec. 3.1, [3]_). E-step, one sparse product: log-responsibilities
    ``X @ log(beta).T + log(weights)``, normalized per document; M-step, one sparse product:
    ``beta_i`` proportional to ``(R.T @ X)_i + a`` and ``weights`` to ``R.sum(axis=0) + a``. The pseudo-count gives every word of
    the vocabulary positive probability in every topic, so words a cluster never saw in training keep a
    probability that generalizes to held-out documents (``pseudo_count=0`` is maximum likelihood; unseen words
    then sit at the ``floor``).

    Returns
    -------
    specinit.refine.RefineResult
        ``.estimate`` (model ``"single_topic"``), ``.log_likelihood`` (the trace of the objective above,
        multinomial coefficients included), ``.n_iter``, ``.converged``.

    Raises
    ------
    TypeError
        Counts or estimate of the wrong type.
    ValueError
        Bad counts, counts whose V differs from the estimate's, an estimate
        of another model or outside the supports, a negative ``pseudo_count``.

    Warns
    -----
    RuntimeWarning
        EM did not converge in ``max_iter`` iterations.

    References
    ----------
    .. [3] Nigam, McCallum, Thrun, Mitchell, "Text classification from labeled and
       unlabeled documents using EM", Machine Learning 39 (2000).
    """
    return FAMILY.refine(counts, estimate, method=method, max_iter=max_iter, tol=None, rtol=tol, floor=floor,
                         restarts=restarts, seed=seed, pseudo_count=pseudo_count, window=window,
                         split_merge=split_merge, accelerate=accelerate)


@FAMILY.face(validate=True, **UPDATE_ARGUMENTS, seed_words=SEED_WORDS,
             weighting=replace(FAMILY.options["weighting"], doc="Estimator of the pair moment; fixed by the first "
                               "batch."))
def update(counts, estimate, *, k, seed, floor, weighting, vocabulary, seed_words) -> SpectralEstimate:
    """Add a batch of documents to a single-topic fit: exact merged pair moment, warm-started anchor words.

    The pair moment ``M2 = sum_i w_i b_i b_i^T`` is a sum over documents, so
    the summary of the documents seen so far
    (:class:`~specinit.engine.moments.PairSums`) merges with the new batch's
    exactly: after any number of batches it equals the summary of all
    documents at once (to rounding). The topics and their weights are then
    recovered from the merged pair moment by anchor words
    (:func:`~specinit.engine.anchors.fit_anchor`: each topic is assumed to
    have a word that occurs in it alone; ``A_wi = p(topic i | w) p(w)``, so
    ``w_i`` is the mass of column i and ``b_i`` the column normalized), the
    eigensolver started from the previous fit's leading Ritz vectors and run
    to the tolerance of a fresh fit (the anchors are the result here, and
    their greedy choice can flip within the sampling noise); the topics keep
    their labels from batch to batch. The third moment that
    :func:`spectral`'s tensor decomposition reads is a (V, V, V) sum and is
    not kept. No EM runs here: the earlier documents are not kept, and
    :func:`refine` needs them (refine the final estimate on the documents
    at hand). The returned estimate keeps the merged moments in its
    ``state``, which :meth:`~specinit.estimate.SpectralEstimate.save`
    writes, so updates go on in a later process. The online face of
    ``SpectralTopicMixture.partial_fit``.

    Returns
    -------
    SpectralEstimate
        ``"single_topic"`` with ``weights`` (k,) and ``beta`` (k, V);
        ``diagnostics`` as for :func:`specinit.models.lda.spectral`'s anchor
        words plus ``n_batches``; ``state`` holds the merged moments and the
        eigensolver's leading Ritz block (the next update's start).

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
    >>> from specinit.synthetic import sample_single_topic
    >>> X = sample_single_topic(n_docs=600, vocab_size=30, k=3, doc_length=30, seed=0).counts
    >>> est = update(X[:300], k=3, seed=0)
    >>> est = update(X[300:], est, seed=0)
    >>> est.params["beta"].shape, est.diagnostics["n_batches"], est.diagnostics["n_documents"]
    ((3, 30), 2, 600)
    """
    step = FAMILY.anchor_update(counts, estimate, k, weighting=weighting, vocabulary=vocabulary, seed=seed,
                                floor=floor, seed_words=SeedWords.check("seed_words", seed_words))
    if step.seed_words is not None:
        warn_seeds(step.seed_words, step.report)
    return FAMILY.estimate(step.beta.shape[0], {"weights": step.alpha, "beta": step.beta},
                           {**step.report, "method": "anchor"}, vocabulary=step.vocabulary, state=step.state)


predict = FAMILY.predict_face("counts", """
    Posterior topic probabilities of each document and the MAP topics ([2]_ Remark 1).

    Returns
    -------
    resp : ndarray, shape (N, k)
        ``p(z_d = i | c_d)``, rows summing to one.
    labels : ndarray, shape (N,)
        The most probable topic of each document.

    Raises
    ------
    ValueError
        Bad counts, or counts whose number of columns is not the estimate's V.
    """)


responsibilities = predict


log_likelihood = FAMILY.log_likelihood_face("counts", "Log-likelihood of every document, its topic summed out "
                                            "(multinomial coefficient included).")


@face({**MODEL_ARGUMENTS, "counts": Param("scipy.sparse matrix or DocumentCounts", "The counts of the minibatch "
                                            "(as for :func:`model`).", None, annotation=sp.spmatrix | DocumentCounts)})
def guide(counts, *, k, vocab_size, doc_lengths, eta, subsample_size) -> None:
    """NumPyro guide of :func:`model` on sparse counts: point masses for ``weights`` and ``beta`` (topics summed out).

    Its parameters ``weights_unconstrained`` (k-1,) and ``beta_unconstrained``
    (k, V-1) start at zero unless given to ``SVI.init(init_params=...)``.
    """
    vocab = svi_batch(counts).vocab_size
    point_mass("weights", jnp.zeros(k - 1), TRANSFORMS["weights"])
    with numpyro.plate("topics", k):
        point_mass("beta", jnp.zeros((k, vocab - 1)), TRANSFORMS["beta"])


@face({**MODEL_ARGUMENTS, **SVI_OPTIONS})
def svi(counts, k, *, init, max_steps, tol, num_steps, batch_size, seed, progress, lr, decay_steps, eta,
        snapshot_every) -> TopicSVIResult:
    """Minibatch SVI of the sparse single-topic model (point masses for ``weights`` and ``beta``).

    Runs ``numpyro.infer.SVI`` on :func:`model` fed by minibatches of
    documents (O(nnz) per step). Each document's topic is summed out in
    the likelihood, so the guide has only the global sites, as point masses
    in unconstrained (additive log-ratio) coordinates (see
    :mod:`specinit.models._svi`); the objective is the log joint of
    those coordinates, the stochastic-gradient analogue of EM for a mixture
    of unigrams ([1]_ Sec. 3.1).

    Returns
    -------
    TopicSVIResult
        ``params`` (``"beta"``, ``"weights"``), ``losses``, ``guide``,
        ``guide_params``, ``seconds``, ``snapshots``, ``checks``,
        ``n_steps``, ``stop_reason`` (``"plateau"``, ``"max_steps"`` or
        ``"num_steps"``), ``diagnostics``.

    Raises
    ------
    ValueError
        Bad counts, ``batch_size`` larger than N, an ``init`` without
        positive ``beta`` and ``weights``, or bad step settings.
    TypeError
        Counts or settings of the wrong type.

    Notes
    -----
    Compiled once per process for each set of shapes and settings; JAX's
    persistent compilation cache keeps it across processes (see
    :mod:`specinit.models._svi`).

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Sec. 3.1.
    """
    kwargs = {"k": k, "eta": eta}
    return run_svi(model, guide, lambda vocab: {"weights": (k,), "beta": (k, vocab)}, counts, k,
                   init=init, num_steps=num_steps, max_steps=max_steps, tol=tol, batch_size=batch_size, seed=seed,
                   progress=progress, lr=lr, decay_steps=decay_steps, snapshot_every=snapshot_every, model_kwargs=kwargs)
