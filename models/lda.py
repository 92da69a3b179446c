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

``alpha0`` is :math:`\\alpha_0` in [1]_. :func:`spectral` chooses it from
the data by default (one set of passes serves a whole grid of ``alpha0``
values; see its docstring); :func:`spectral_from_moments` takes moments
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

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from specinit.models._sparse_counts import (
    HIGHEST,
    DenseTopicCounts,
    ModelData,
    lda_loglik,
)
from specinit.models._topic_svi import document_topics
from specinit.models._topics import fit_topics

from specinit._validation import (
    as_generator,
    bad_argument,
    check_count_matrix,
    check_int,
    check_positive,
    warn,
)
from specinit.engine.chunks import count_chunks
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.estimate import ModelFacts, SpectralEstimate

__all__ = ["model", "spectral", "spectral_from_moments", "population_moments", "document_topics", "svi", "refine"]

_ADVICE = "For LDA, alpha0 may be misspecified: try another alpha0 (smaller for sparse topic mixtures)."

#: Component axes, matching site and ArviZ dims of this model's sites.
FACTS = ModelFacts(
    component_axes={"beta": 0, "alpha": 0, "theta": 1},
    match_site="beta",
    dims={"alpha": ("topics",), "beta": ("topics", "word"), "theta": ("documents", "topics"), "counts": ("documents", "word")},
    event_dims={"alpha": ("topics",), "beta": ("word",), "theta": ("topics",), "counts": ("word",)},
)


def model(
    counts=None,
    *,
    k: int,
    vocab_size: int | None = None,
    doc_lengths=None,
    eta: float = 0.1,
    alpha_prior: tuple = (1.0, 1.0),
    subsample_size=None,
):
    """NumPyro LDA with per-word topics summed out.

    Parameters
    ----------
    counts : array, scipy.sparse matrix or DocumentCounts, shape (N, V), optional
        Observed word counts. Dense arrays suit small corpora (the model
        forms ``theta @ beta``, N x V). Sparse matrices (as
        ``CountVectorizer`` returns them) and
        :class:`~specinit.models._sparse_counts.DocumentCounts` minibatches
        are evaluated from the nonzeros only (memory O(nnz * k)); a
        minibatch with ``num_documents`` larger than its rows scales the
        document terms by ``num_documents / rows`` (what :func:`svi` feeds).
        ``None`` generates documents of lengths ``doc_lengths``
        (``numpyro.infer.Predictive``).
    k : int
        Number of topics.
    vocab_size : int, optional
        V, needed only when ``counts`` is None (checked against counts
        otherwise).
    doc_lengths : array, shape (N,), optional
        Needed only when ``counts`` is None.
    eta : float
        Symmetric Dirichlet concentration of each topic.
    alpha_prior : (float, float)
        Gamma(shape, rate) prior on each ``alpha_i``.
    subsample_size : int, optional
        Documents per step for SVI (``numpyro.plate`` subsampling) with
        dense counts; sparse counts are subsampled by feeding minibatches.

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
    contractions ([2]_; see :mod:`specinit.models._sparse_counts`).

    References
    ----------
    .. [1] Anandkumar, Foster, Hsu, Kakade, Liu. "A spectral algorithm for
       latent Dirichlet allocation", Sec. 2 (the model).
    .. [2] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 2.
    """
    data = ModelData(counts, "lda.model", vocab_size, doc_lengths, subsample_size)
    alpha = numpyro.sample("alpha", dist.Gamma(jnp.full(k, alpha_prior[0]), alpha_prior[1]).to_event(1))
    with numpyro.plate("topics", k):
        beta = numpyro.sample("beta", dist.Dirichlet(jnp.full(data.vocab_size, eta)))
    with numpyro.handlers.scale(scale=data.scale), \
            numpyro.plate("documents", data.n_docs, subsample_size=subsample_size) as idx:
        theta = numpyro.sample("theta", dist.Dirichlet(alpha))
        if data.sparse is not None:
            numpyro.factor("counts", lda_loglik(theta, beta, data.sparse))
        elif data.dense is not None:
            numpyro.sample("counts", DenseTopicCounts(theta, beta, data.lengths[idx]), obs=data.dense[idx])
        else:
            probs = jnp.maximum(jnp.matmul(theta, beta, precision=HIGHEST), jnp.finfo(beta.dtype).tiny)
            probs = probs / jnp.sum(probs, axis=-1, keepdims=True)
            numpyro.sample("counts", dist.Multinomial(data.lengths[idx], probs, total_count_max=data.max_length))


def population_moments(beta, alpha) -> FactoredMoments:
    """Exact Dirichlet-corrected ``M2``, ``M3`` of LDA ([1]_ Lemma 3).

    Parameters
    ----------
    beta : array-like, shape (k, V)
        Topics, rows on the simplex.
    alpha : array-like, shape (k,)
        Dirichlet parameters (positive); ``alpha0 = sum(alpha)``.

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
    beta = np.asarray(beta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    a0 = alpha.sum()
    return FactoredMoments(beta, alpha / ((a0 + 1) * a0), 2 * alpha / ((a0 + 2) * (a0 + 1) * a0))


def spectral_from_moments(moments, k: int, alpha0: float, *, method: str = "tpm", seed=0, vocabulary=None,
                          floor: float = 1e-3, decompose_options: dict | None = None) -> SpectralEstimate:
    """Recover ``beta`` and ``alpha`` from Dirichlet-corrected moments with known ``alpha0``.

    Parameters
    ----------
    moments : CountMoments or FactoredMoments
        Empirical moments corrected with the same ``alpha0``, or exact ones
        (:func:`population_moments`).
    k : int
        Number of topics.
    alpha0 : float
        ``sum(alpha)`` used in the moment correction.
    method, seed, vocabulary, floor, decompose_options
        As for :func:`spectral`.

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
    func = "lda.spectral"
    a0 = check_positive(alpha0, "alpha0", func)
    floor = check_positive(floor, "floor", func)
    if method == "tpm" and (decompose_options is None or isinstance(decompose_options, dict)):
        # Noisy real-text moments: the power iterates converge linearly; 1e-6 on unit vectors in up to 300 steps
        # (far below the moment noise) instead of the engine's 1e-10 in 100, which real corpora often miss.
        decompose_options = {"tol": 1e-6, "n_iter": 300, **(decompose_options or {})}
    beta, eig, fit, report = fit_topics(moments, k, func=func, method=method, seed=seed, advice=_ADVICE, floor=floor,
                                        decompose_options=decompose_options)
    alpha = 4 * a0 * (a0 + 1) / ((a0 + 2) ** 2 * eig**2)
    report.update(alpha0=a0, alpha_sum=float(alpha.sum()))
    if not 0.5 < alpha.sum() / a0 < 2.0:
        warn(
            f"lda.spectral: sum(alpha_hat) = {alpha.sum():.3g} differs from alpha0 = {a0:.3g} by more than a "
            "factor of 2; alpha0 is probably misspecified (refit with alpha0 near sum(alpha_hat)) or k is wrong.")
    return SpectralEstimate("lda", {"alpha": alpha, "beta": beta}, report, vocabulary, FACTS)


def spectral(
    counts,
    k: int,
    alpha0: float | None = None,
    *,
    method: str = "tpm",
    weighting: str = "pooled",
    seed=0,
    vocabulary=None,
    doc_topics="auto",
    floor: float = 1e-3,
    decompose_options: dict | None = None,
    backend: str | None = None,
    alpha0_grid=None,
    alpha_sum: float = 1.0,
) -> SpectralEstimate:
    """Method-of-moments estimate of LDA, with ``alpha0`` chosen from the data by default.

    With ``alpha0=None`` (default) the Dirichlet concentration is chosen
    from the data ([3]_): the moments depend on ``alpha0`` only through
    low-rank terms in ``m1`` ([1]_ Lemma 3), so the passes over the data
    are made once (``E2`` on a basis ``Q`` of its top eigenspace plus
    ``m1``, and ``E3(Q, Q, Q)``), and for every ``alpha0`` of
    ``alpha0_grid`` the whitening and the tensor decomposition are redone
    on (k, k, k) arrays only. Each candidate whose ``M2(alpha0)`` is
    positive definite on its top k eigenvectors is turned into valid
    parameters (topics on the simplex; relative topic weights from the
    tensor eigenvalues) and scored by the pairwise composite
    log-likelihood of the word pairs co-occurring in (a seeded sample of)
    the documents, ``log beta_w^T E[theta theta^T] beta_w'`` -- a
    closed-form criterion with no latent variable to fit, which on real
    text ranks the candidate topics as held-out perplexity does. Candidates
    within 0.002 nats per pair of the best are ties (on data drawn from LDA
    every candidate reproduces ``E2`` and this criterion is flat); among
    them the one whose parameters best reproduce the pair and triple
    moments is chosen (the third order identifies ``alpha0`` under the
    model: the misfit is zero at the true value). The grid, the scores and
    the choice are in ``diagnostics`` (``alpha0_grid``,
    ``alpha0_criterion``, ``alpha0_tied``, ``alpha0_moment_misfit``,
    ``alpha0_feasible``, ``alpha0``). The returned
    ``alpha`` keeps the tensor's relative topic weights with
    ``sum(alpha) = alpha_sum`` (default 1, the usual ``1/k`` per topic):
    the concentration is not identified by second moments, and on real
    text the tensor's own ``sum(alpha_hat)`` is unreliable (reported as
    ``alpha_sum_tensor``). If ``M2(alpha0)`` is
    indefinite for every grid value, the single-topic limit
    ``alpha0 -> 0`` is used with a warning; only when ``E2`` itself is
    indefinite on its top k (k beyond what the data support) is an error
    raised.

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer word counts (or chunks; see
        :class:`specinit.engine.moments.CountMoments`).
    k : int
        Number of topics, ``1 <= k < V``.
    alpha0 : float, optional
        ``sum(alpha)``, the Dirichlet concentration (:math:`\\alpha_0` in
        [1]_) used in the moment correction. ``None`` (default): chosen from
        the data (see above). A given value is used as is (the classical
        estimator; ``sum(alpha_hat)`` is then reported beside it).
    method : {"tpm", "svtd", "eca", "als", "anchor"}
        Tensor decomposition (:mod:`specinit.engine.decompose`), or
        ``"anchor"``: anchor-word recovery from the pair moment alone ([4]_
        FastAnchorWords + RecoverL2, matrix-free: four passes, no third
        moment, no ``alpha0``; ``alpha = alpha_sum * p(topic)``). On the
        real corpora of ``benchmarks/bench_lda_real.py`` it gives a clearly
        lower held-out perplexity than the tensor path; on data drawn from
        LDA itself (no anchor words) the tensor path is the consistent one.
    weighting : {"pooled", "per-document"}
        Moment estimator (pooled all-word estimators by default).
    seed : int or numpy.random.Generator
        Randomness of the whitening, the decomposition and the pair sample.
    vocabulary : sequence of str, optional
        Kept with the estimate.
    doc_topics : bool or "auto"
        Also estimate per-document ``theta`` given ``beta`` and ``alpha``
        (:func:`document_topics`, chunk by chunk: one more pass). ``"auto"``
        (default): only for corpora of at most 5,000 documents (where NUTS
        on the full model, which needs ``theta``, is practical); on larger
        corpora call :func:`document_topics` when needed.
    floor : float, default 1e-3
        Topic-word probabilities are floored at ``floor / V``.
    decompose_options : dict, optional
        Keyword arguments of the tensor decomposition (e.g.
        ``{"n_restarts": 20}`` for ``method="tpm"``); unknown keys raise.
    backend : {"numpy", "jax"} or None
        Where the moment passes run (:class:`specinit.engine.moments.CountMoments`);
        ``None``: JAX when an accelerator is present. ``counts`` may also be a
        ``dask.array`` of row blocks (passes run on the Dask workers).
    alpha0_grid : sequence of float, optional
        Candidate ``alpha0`` values when ``alpha0=None`` (default: 9 values
        geometrically spaced from 0.01 to k).
    alpha_sum : float, default 1.0
        ``sum(alpha)`` of the returned prior when ``alpha0=None`` or
        ``method="anchor"`` (ignored when ``alpha0`` is given: the tensor's
        ``alpha_hat`` is returned).

    Returns
    -------
    SpectralEstimate
        ``params``: ``"alpha"`` (k,), ``"beta"`` (k, V), and ``"theta"``
        (N, k) when computed; ``diagnostics`` include the signed M2
        eigenvalues (``m2_eigenvalues``, ``m2_eigengaps`` and
        ``k_supported``, the number of leading positive eigenvalues: a guide
        to choosing k), condition number, decomposition residual, eigengaps
        and convergence, negative mass of each topic before projection,
        ``alpha_sum`` vs ``alpha0``, the ``alpha0`` selection table and
        documents dropped (fewer than 3 tokens).

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
    """
    func = "lda.spectral"
    if method == "anchor":
        from specinit.models._topics import fit_anchor

        if alpha0 is not None or decompose_options is not None:
            raise bad_argument("method", func, "'tpm', 'svtd', 'eca' or 'als' when alpha0 or decompose_options is "
                               "given (method='anchor' uses neither)", method)
        raw = CountMoments(counts, alpha0=None, weighting=weighting, backend=backend)
        beta, alpha, report = fit_anchor(raw, k, func=func, seed=seed, floor=check_positive(floor, "floor", func),
                                         alpha_sum=check_positive(alpha_sum, "alpha_sum", func))
        estimate = SpectralEstimate("lda", {"alpha": alpha, "beta": beta}, report, vocabulary, FACTS)
        n_docs = raw.n_documents + raw.n_dropped
    elif alpha0 is None:
        from specinit.models._topics import (
            default_alpha0_grid,
            fit_lda_grid,
            word_pairs,
        )

        rng = as_generator(seed, func)
        raw = CountMoments(counts, alpha0=None, weighting=weighting, backend=backend)
        pairs = word_pairs(_first_rows(counts, func), seed=rng)
        grid = default_alpha0_grid(check_int(k, "k", func, minimum=1)) if alpha0_grid is None else alpha0_grid
        beta, alpha, report = fit_lda_grid(raw, k, grid, pairs, func=func, method=method, seed=rng, floor=floor,
                                           decompose_options=decompose_options,
                                           alpha_sum=check_positive(alpha_sum, "alpha_sum", func))
        estimate = SpectralEstimate("lda", {"alpha": alpha, "beta": beta}, report, vocabulary, FACTS)
        n_docs = raw.n_documents + raw.n_dropped
    else:
        moments = CountMoments(counts, alpha0=check_positive(alpha0, "alpha0", func), weighting=weighting,
                               backend=backend)
        estimate = spectral_from_moments(moments, k, alpha0, method=method, seed=seed, vocabulary=vocabulary,
                                         floor=floor, decompose_options=decompose_options)
        n_docs = moments.n_documents + moments.n_dropped
    if doc_topics == "auto":
        doc_topics = n_docs <= 5000
    estimate.diagnostics["doc_topics"] = bool(doc_topics)
    if doc_topics:
        beta, alpha = estimate.params["beta"], estimate.params["alpha"]
        chunks = count_chunks(counts, "lda.spectral")()
        estimate.params["theta"] = np.vstack([document_topics(chunk, beta, alpha) for chunk in chunks])
    return estimate


def _first_rows(counts, func: str):
    """The documents the pair criterion samples from: the matrix itself, or its first chunk / row block."""
    import scipy.sparse as sp

    if sp.issparse(counts) or isinstance(counts, np.ndarray):
        return check_count_matrix(counts, "counts", func)
    if type(counts).__module__.startswith("dask"):
        return check_count_matrix(counts.blocks[0].compute(), "counts", func)
    return next(iter(count_chunks(counts, func)()))


def svi(counts, k: int, *, init=None, num_steps: int = 2000, batch_size: int = 256, seed: int = 0, progress=None,
        lr: float = 0.05, decay_steps: float = 200.0, local_steps: int = 20, local: str = "dirichlet", eta: float = 0.1,
        alpha_prior: tuple = (1.0, 1.0), snapshot_every: int | None = None):
    """Minibatch SVI of sparse LDA with closed-form per-document updates (online-VB style).

    Runs ``numpyro.infer.SVI`` on :func:`model` fed by minibatches of
    documents (rows of a sparse matrix; O(nnz) per step). The guide holds
    ``alpha`` and the topics ``beta`` as point masses in unconstrained
    coordinates and computes each minibatch's ``theta`` by the online
    variational-Bayes E-step given the current ``beta`` ([1]_ Alg. 2): no
    per-document parameters are optimized (see
    :mod:`specinit.models._topic_svi`).

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Non-negative integer word counts.
    k : int
        Number of topics.
    init : SpectralEstimate or dict, optional
        Start from these constrained ``beta`` (k, V) and ``alpha`` (k,)
        (e.g. :func:`spectral`); ``None`` is NumPyro's default start
        (unconstrained coordinates uniform in (-2, 2)).
    num_steps : int
        Optimization steps (one minibatch each).
    batch_size : int
        Documents per minibatch, at most N.
    seed : int
        Seeds the starting values (``init=None``), the minibatches and SVI.
    progress : None, bool or int
        ``None`` (default): a line with the recent mean loss every 15 s,
        only in runs that last that long; ``True``: 20 lines per run;
        an int: a line every ``progress`` steps; ``False``/0: silent.
    lr : float
        Adam step size at step 0; it decays like ``lr / sqrt(1 + t / decay_steps)``.
    decay_steps : float
        Time scale of the step-size decay.
    local_steps : int
        E-step iterations per minibatch.
    local : {"dirichlet", "mean"}
        The guide's ``theta``: a ``Dirichlet(gamma)`` draw (the default: a
        proper variational factor, so the gradient for ``alpha`` uses
        ``E log theta``), or a point mass at its mean (less noise, but
        ``alpha`` comes out too large by Jensen's inequality).
    eta : float
        Dirichlet concentration of each topic in the model.
    alpha_prior : (float, float)
        Gamma(shape, rate) prior on each ``alpha_i`` in the model.
    snapshot_every : int, optional
        Keep ``(step, params)`` every this many steps (e.g. to measure
        held-out perplexity along the run).

    Returns
    -------
    TopicSVIResult
        ``params`` (``"beta"``, ``"alpha"``), ``losses``, ``guide``,
        ``guide_params``, ``seconds``, ``snapshots``.

    Raises
    ------
    ValueError
        Bad counts, ``batch_size`` larger than N, an ``init`` without
        positive ``beta`` (k, V) and ``alpha`` (k,), or bad step settings.
    TypeError
        Counts or settings of the wrong type.

    References
    ----------
    .. [1] Hoffman, Blei, Bach. "Online learning for latent Dirichlet
       allocation", NeurIPS 2010, Alg. 2.
    """
    from specinit.models._topic_svi import check_local, lda_guide, run_svi

    func = "lda.svi"
    k = check_int(k, "k", func, minimum=1)
    local = check_local(local, func)
    local_steps = check_int(local_steps, "local_steps", func, minimum=1)
    kwargs = {"k": k, "eta": check_positive(eta, "eta", func), "alpha_prior": tuple(alpha_prior)}
    return run_svi(func, model, lda_guide, lambda vocab: {"alpha": (k,), "beta": (k, vocab)}, counts, k, init=init,
                   num_steps=num_steps, batch_size=batch_size, seed=seed, progress=progress, lr=lr, decay_steps=decay_steps,
                   snapshot_every=snapshot_every, model_kwargs=kwargs,
                   guide_options={"local_steps": local_steps, "local": local})


def refine(counts, estimate, *, num_steps: int = 500, batch_size: int | None = None, seed: int = 0, lr: float = 0.05,
           tol: float = 1e-4, progress=False):
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

    Parameters
    ----------
    counts : array-like or scipy.sparse matrix, shape (N, V)
        Word counts (the data NUTS will run on).
    estimate : SpectralEstimate or dict
        Starting ``beta`` (k, V) and ``alpha`` (k,) (e.g. :func:`spectral`).
    num_steps : int
        SVI steps.
    batch_size : int, optional
        Documents per step; default ``min(N, 2048)``.
    seed : int
        Seeds the minibatches and SVI.
    lr : float
        Adam step size (see :func:`svi`).
    tol : float
        ``converged`` when the mean loss of the last tenth of the steps is
        within ``tol`` (relative) of the tenth before it.
    progress : None, bool or int
        As for :func:`svi`.

    Returns
    -------
    specinit.models._em.RefineResult
        ``.estimate`` (model ``"lda"``: ``beta``, ``alpha``, ``theta``; the
        diagnostics keep the input's under ``"spectral"``), ``.log_likelihood``
        (the ELBO after each step, ``num_steps`` values; a lower bound of the
        log marginal likelihood), ``.n_iter``, ``.converged``, ``.method``
        ``"svi"``.

    Raises
    ------
    TypeError
        An ``estimate`` that is neither a SpectralEstimate nor a dict with
        ``beta`` and ``alpha``.
    ValueError
        Bad counts, or ``beta`` (k, V) and ``alpha`` (k,) that are not positive
        or do not match the counts.
    """
    from specinit.models._em import RefineResult

    func = "lda.refine"
    params = getattr(estimate, "params", estimate)
    if not isinstance(params, dict) or "beta" not in params or "alpha" not in params:
        raise bad_argument("estimate", func, "a SpectralEstimate or dict with 'beta' (k, V) and 'alpha' (k,)",
                           type(params).__name__, kind=TypeError, describe=False)
    X = check_count_matrix(counts, "counts", func)
    k = int(np.shape(params["alpha"])[0])
    batch_size = min(X.shape[0], 2048) if batch_size is None else batch_size
    fit = svi(X, k, init=params, num_steps=num_steps, batch_size=batch_size, seed=seed, lr=lr, progress=progress)
    beta, alpha = fit.params["beta"], fit.params["alpha"]
    elbo = -np.asarray(fit.losses, dtype=np.float64)
    tenth = max(elbo.size // 10, 1)
    last, before = elbo[-tenth:].mean(), elbo[-2 * tenth : -tenth].mean() if elbo.size >= 2 * tenth else -np.inf
    converged = bool(abs(last - before) <= check_positive(tol, "tol", func) * abs(last))
    diagnostics = {"spectral": dict(getattr(estimate, "diagnostics", {})),
                   "refine": {"method": "svi", "num_steps": int(num_steps), "batch_size": int(batch_size),
                              "seconds": fit.seconds, "final_elbo": float(last), "converged": converged}}
    refined = SpectralEstimate("lda", {"beta": beta, "alpha": alpha, "theta": document_topics(X, beta, alpha)},
                               diagnostics, getattr(estimate, "vocabulary", None), FACTS)
    return RefineResult(estimate=refined, log_likelihood=elbo, n_iter=int(num_steps), converged=converged, method="svi",
                        diagnostics={"n_observations": float(X.sum())})
