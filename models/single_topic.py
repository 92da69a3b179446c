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

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import gammaln, logsumexp
from specinit.models._sparse_counts import HIGHEST, ModelData, mixture_loglik
from specinit.models._topics import fit_topics

from specinit._validation import (
    bad_argument,
    check_count_matrix,
    check_int,
    check_positive,
)
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.engine.support import positive_weights
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = ["model", "spectral", "spectral_from_moments", "population_moments", "responsibilities", "svi"]

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"beta": 0, "weights": 0},
    match_site="beta",
    dims={"weights": ("topics",), "beta": ("topics", "word"), "counts": ("documents", "word")},
    event_dims={"weights": ("topics",), "beta": ("word",), "counts": ("word",)},
)


def model(counts=None, *, k: int, vocab_size: int | None = None, doc_lengths=None, eta: float = 0.1, subsample_size=None):
    """NumPyro single-topic model with the topic of each document summed out.

    Parameters
    ----------
    counts : array, scipy.sparse matrix or DocumentCounts, shape (N, V), optional
        Observed word counts: dense for small corpora, sparse (as
        ``CountVectorizer`` returns them) or a
        :class:`~specinit.models._sparse_counts.DocumentCounts` minibatch
        evaluated from the nonzeros only (memory O(nnz * k); a minibatch
        with ``num_documents`` larger than its rows is scaled up to the
        corpus). ``None`` generates documents of lengths ``doc_lengths``
        (``numpyro.infer.Predictive``).
    k : int
        Number of topics.
    vocab_size : int, optional
        V, needed only when ``counts`` is None (checked against counts
        otherwise).
    doc_lengths : array, shape (N,), optional
        Document lengths, needed only when ``counts`` is None.
    eta : float
        Symmetric Dirichlet concentration of each topic.
    subsample_size : int, optional
        Documents per step for SVI (``numpyro.plate`` subsampling) with
        dense counts; sparse counts are subsampled by feeding minibatches.

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
        beta = numpyro.sample("beta", dist.Dirichlet(jnp.full(data.vocab_size, eta)))
    with numpyro.handlers.scale(scale=data.scale), \
            numpyro.plate("documents", data.n_docs, subsample_size=subsample_size) as idx:
        n = data.lengths[idx]
        if data.sparse is not None:
            numpyro.factor("counts", mixture_loglik(weights, beta, data.sparse))
        elif data.dense is not None:
            numpyro.sample("counts", _MixtureOfMultinomials(weights, beta, n), obs=data.dense[idx])
        else:
            z = numpyro.sample("z", dist.Categorical(weights))
            numpyro.sample("counts", dist.Multinomial(n, beta[z], total_count_max=data.max_length))


class _MixtureOfMultinomials(dist.Distribution):
    """``sum_i w_i Multinomial(n, beta_i)`` evaluated in log space (log-prob only)."""

    support = dist.constraints.independent(dist.constraints.nonnegative_integer, 1)

    def __init__(self, weights, beta, total_count):
        self.weights, self.beta, self.total_count = weights, beta, total_count
        super().__init__(batch_shape=jnp.shape(total_count), event_shape=beta.shape[-1:])

    def log_prob(self, value):
        n = self.total_count
        norm = gammaln(n + 1.0) - jnp.sum(gammaln(value + 1.0), axis=-1)
        tiny = jnp.finfo(self.beta.dtype).tiny
        per_topic = jnp.matmul(value, jnp.log(jnp.maximum(self.beta, tiny)).T, precision=HIGHEST)  # (N, k)
        return norm + logsumexp(per_topic + jnp.log(jnp.maximum(self.weights, tiny)), axis=-1)


def population_moments(beta, weights) -> FactoredMoments:
    """Exact ``M2``, ``M3`` of the single-topic model (``omega = kappa = weights``).

    Parameters
    ----------
    beta : array-like, shape (k, V)
        Topics, rows on the simplex.
    weights : array-like, shape (k,)
        Topic probabilities (positive).

    Returns
    -------
    FactoredMoments
        ``M2 = sum_i w_i b_i b_i^T`` and ``M3 = sum_i w_i b_i^(x)3`` ([1]_ Thm 3.1).

    Raises
    ------
    ValueError
        If ``beta`` is not 2-D or ``weights`` not positive with one entry per topic.
    """
    beta = np.asarray(beta, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    return FactoredMoments(beta, weights, weights)


def spectral_from_moments(moments, k: int, *, method: str = "tpm", seed=0, vocabulary=None, floor: float = 1e-3,
                          decompose_options: dict | None = None) -> SpectralEstimate:
    """Recover ``beta`` and ``weights`` from moments (empirical or population).

    Parameters
    ----------
    moments : CountMoments or FactoredMoments
        Empirical (:class:`specinit.engine.moments.CountMoments` with
        ``alpha0=None``) or exact (:func:`population_moments`) moments.
    k, method, seed, vocabulary, floor, decompose_options
        As for :func:`spectral`.

    Returns
    -------
    SpectralEstimate
        As for :func:`spectral`.

    Raises
    ------
    ValueError
        Bad ``k``, or degenerate moments.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment is not positive definite on its top k eigenvectors.
    """
    func = "single_topic.spectral"
    floor = check_positive(floor, "floor", func)
    beta, eig, fit, report = fit_topics(moments, k, func=func, method=method, seed=seed, floor=floor,
                                        decompose_options=decompose_options)
    weights = positive_weights(1.0 / eig**2)
    report["weights_sum_before_normalization"] = float(np.sum(1.0 / eig**2))
    return SpectralEstimate("single_topic", {"weights": weights, "beta": beta}, report, vocabulary, FACTS)


def spectral(counts, k: int, *, method: str = "tpm", weighting: str = "pooled", seed=0, vocabulary=None,
             floor: float = 1e-3, decompose_options: dict | None = None,
             backend: str | None = None) -> SpectralEstimate:
    """Method-of-moments estimate of the single-topic model.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer word counts (or chunks; see
        :class:`specinit.engine.moments.CountMoments`).
    k : int
        Number of topics, ``1 <= k < V``.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition.
    weighting : {"pooled", "per-document"}
        Moment estimator ([2]_ Thm 1 is the pooled one).
    seed : int or numpy.random.Generator
    vocabulary : sequence of str, optional
        Kept with the estimate.
    floor : float, default 1e-3
        Topic-word probabilities are floored at ``floor / V`` and rows
        renormalized, so every value is strictly inside the simplex.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition (e.g.
        ``{"n_restarts": 20}`` for ``method="tpm"``); unknown keys raise.
    backend : {"numpy", "jax"} or None
        Where the moment passes run (:class:`specinit.engine.moments.CountMoments`);
        ``None``: JAX when an accelerator is present. ``counts`` may also be a
        ``dask.array`` of row blocks (passes run on the Dask workers).

    Returns
    -------
    SpectralEstimate
        ``params["beta"]`` (k, V) and ``params["weights"]`` (k,).
        Use :func:`responsibilities` for the MAP clustering of documents.

    Raises
    ------
    ValueError
        Bad counts (negative, non-integer, NaN) or ``k`` (``k >= V`` or more
        than the usable documents).
    TypeError
        Unknown ``decompose_options`` keys, or counts of a non-numeric type.
    specinit.engine.whitening.IndefiniteMomentError
        If the second moment is not positive definite on its top k eigenvectors.
    """
    moments = CountMoments(counts, alpha0=None, weighting=weighting, backend=backend)
    return spectral_from_moments(moments, k, method=method, seed=seed, vocabulary=vocabulary, floor=floor,
                                 decompose_options=decompose_options)


def responsibilities(counts, estimate: SpectralEstimate) -> tuple[np.ndarray, np.ndarray]:
    """Posterior topic probabilities of each document and the MAP topics ([2]_ Remark 1).

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Word counts of the documents.
    estimate : SpectralEstimate
        A single-topic estimate (``params["beta"]``, ``params["weights"]``).

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
    """
    X = check_count_matrix(counts, "counts", "single_topic.responsibilities")
    beta, weights = estimate.params["beta"], estimate.params["weights"]
    if X.shape[1] != beta.shape[1]:
        raise bad_argument("counts", "single_topic.responsibilities", f"{beta.shape[1]} columns (the estimate's V)", X)
    logp = np.asarray(X @ np.log(beta).T) + np.log(weights)
    logp -= logp.max(axis=1, keepdims=True)
    resp = np.exp(logp)
    resp /= resp.sum(axis=1, keepdims=True)
    return resp, resp.argmax(axis=1)


def svi(counts, k: int, *, init=None, num_steps: int = 2000, batch_size: int = 256, seed: int = 0, progress=None,
        lr: float = 0.05, decay_steps: float = 200.0, eta: float = 0.1, snapshot_every: int | None = None):
    """Minibatch SVI of the sparse single-topic model (point masses for ``weights`` and ``beta``).

    Runs ``numpyro.infer.SVI`` on :func:`model` fed by minibatches of
    documents (O(nnz) per step). Each document's topic is summed out in
    the likelihood, so the guide has only the global sites, as point masses
    in unconstrained (additive log-ratio) coordinates (see
    :mod:`specinit.models._topic_svi`); the objective is the log joint of
    those coordinates, the stochastic-gradient analogue of EM for a mixture
    of unigrams ([1]_ Sec. 3.1).

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer word counts.
    k : int
        Number of topics.
    init : SpectralEstimate or dict, optional
        Start from these constrained ``beta`` (k, V) and ``weights`` (k,)
        (e.g. :func:`spectral`); ``None`` is NumPyro's default start.
    num_steps : int
        Optimization steps (one minibatch each).
    batch_size : int
        Documents per minibatch, at most N.
    seed : int
        Seeds the starting values, the minibatches and SVI.
    progress : None, bool or int
        ``None`` (default): a line with the recent mean loss every 15 s,
        only in runs that last that long; ``True``: 20 lines per run;
        an int: a line every ``progress`` steps; ``False``/0: silent.
    lr : float
        Adam step size at step 0, decaying like ``lr / sqrt(1 + t / decay_steps)``.
    decay_steps : float
        Time scale of the step-size decay.
    eta : float
        Dirichlet concentration of each topic in the model.
    snapshot_every : int, optional
        Keep ``(step, params)`` every this many steps.

    Returns
    -------
    TopicSVIResult
        ``params`` (``"beta"``, ``"weights"``), ``losses``, ``guide``,
        ``guide_params``, ``seconds``, ``snapshots``.

    Raises
    ------
    ValueError
        Bad counts, ``batch_size`` larger than N, an ``init`` without
        positive ``beta`` and ``weights``, or bad step settings.
    TypeError
        Counts or settings of the wrong type.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky, JMLR 2014, Sec. 3.1.
    """
    from specinit.models._topic_svi import run_svi, single_topic_guide

    func = "single_topic.svi"
    k = check_int(k, "k", func, minimum=1)
    kwargs = {"k": k, "eta": check_positive(eta, "eta", func)}
    return run_svi(func, model, single_topic_guide, lambda vocab: {"weights": (k,), "beta": (k, vocab)}, counts, k,
                   init=init, num_steps=num_steps, batch_size=batch_size, seed=seed, progress=progress, lr=lr,
                   decay_steps=decay_steps, snapshot_every=snapshot_every, model_kwargs=kwargs)
