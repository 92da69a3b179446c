"""What only the two topic families (single-topic, LDA) share: alpha0 from the data, anchors, theta, SVI.

Spectral side: counts -> :class:`~specinit.engine.moments.CountMoments` ->
the LDA ``alpha0`` grid from one set of passes (:func:`fit_lda_grid`),
anchor-word recovery (:func:`fit_anchor`); per-document ``theta`` given the
topics (:func:`document_topics`).

Minibatch SVI with closed-form local updates (online-VB style), used by
``lda.svi``, ``lda.refine`` and ``single_topic.svi``. The guide is a NumPyro guide (a function of the model's arguments with
``numpyro.param`` and ``numpyro.sample`` sites), built so that a step costs
O(nnz(batch) * k) and converges like online variational Bayes [1]_:

* global sites are point masses in an unconstrained space: ``beta_i =
  softmax([x_i, 0])`` (additive log-ratio coordinates, one free logit per
  word but the last) and ``alpha = exp(a)`` (LDA), ``weights =
  softmax([w, 0])`` (single-topic). The guide's log density includes the
  transforms' log-Jacobians, so the objective is the log joint in the
  unconstrained coordinates: for ``beta`` with a Dirichlet(eta) prior this
  is ``loglik + eta * sum log beta`` (well posed for ``eta < 1``, unlike a
  MAP in the simplex);
* the per-document topic proportions ``theta`` (LDA) are LOCAL: for each
  minibatch the guide runs ``local_steps`` fixed-point steps of the online
  VB E-step ([1]_ Alg. 2, [2]_ eq. 6-7) given the current ``beta`` and
  ``alpha`` (``stop_gradient``), ``gamma_d = alpha + exp(E log theta_d) *
  sum_w c_dw beta_w / (exp(E log theta_d) . beta_w)``, and samples
  ``theta_d ~ Dirichlet(gamma_d)`` (or, with ``local="mean"``, puts a point
  mass at its mean ``gamma_d / sum(gamma_d)``). No per-document
  parameters are stored or optimized. The single-topic model sums its
  local topic out in the likelihood, so its guide has globals only.

Minibatches of rows are drawn without replacement (a fresh permutation per
epoch), converted to :class:`~specinit.distributions.counts.DocumentCounts`
padded to a few bucket sizes (so the jitted step compiles a handful of
times), and scaled to the corpus by ``num_documents``. The optimizer is Adam
with the step size decaying like ``lr / sqrt(1 + t / decay_steps)``.

References
----------
.. [1] Hoffman, Blei, Bach. "Online learning for latent Dirichlet
   allocation", NeurIPS 2010, Alg. 2.
.. [2] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, eq. 6-7
   (the variational E-step).
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from jax.scipy.special import digamma
from numpyro.handlers import replay, seed
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.util import compute_log_probs

from specinit._validation import (
    as_generator,
    bad_argument,
    check_choice,
    check_count_matrix,
    check_int,
    check_positive,
    current_entry,
    Interval,
    Options,
    warn,
)
from specinit.distributions.continuous import ALR, TRANSFORMS
from specinit.distributions.counts import HIGHEST, DocumentCounts, ModelData, _bucket, from_csr, topic_components
from specinit.engine.backends import numba_kernel
from specinit.engine.backends.numpy import in_order
from specinit.engine.decompose import check_options, decompose
from specinit.engine.moments import WEIGHTINGS, CountMoments
from specinit.engine.sources import row_ranges
from specinit.engine.support import fix_signs_by_mass, project_to_simplex
from specinit.engine.whitening import IndefiniteMomentError, krylov_eigenspace
from specinit.family import Family

LOGGER = logging.getLogger("specinit")

__all__ = ["ALPHA0", "ALPHA0_MAX", "K_FOLDS", "TopicData", "TopicFamily", "TopicSVIResult", "check_alpha0_grid", "check_local",
           "close_topics", "default_alpha0_grid",
           "document_topics", "fit_anchor", "fit_lda_grid", "lda_moment_fit", "local_gamma", "positive_eigenspace",
           "raw_subspace", "run_svi", "svi_batch", "word_pairs"]


#: Folds of the held-out score that picks k (:meth:`TopicFamily.k_score`).
K_FOLDS = 3


@dataclass(frozen=True)
class TopicData:
    """Counts in both forms EM reads: CSR (M-step) and float64 :class:`DocumentCounts` (the likelihood)."""

    csr: object
    documents: DocumentCounts


class TopicFamily(Family):
    """What the topic families share: count moments, the limits on k, sign fixing, count data for EM."""

    options = {"weighting": Options(WEIGHTINGS)}
    data_kind = "counts"
    # The pair moment of short documents is a positive semi-definite signal plus sampling noise of both signs,
    # whose negative eigenvalues can exceed the smaller topics' eigenvalues: whiten with the top-k positive
    # eigenspace.
    whitening_eigenspace = "positive"

    def moments(self, counts, *, k, backend, weighting: str = "pooled", **options) -> CountMoments:
        return CountMoments(counts, alpha0=options.get("alpha0"), weighting=weighting, backend=backend)

    def max_components(self, moments) -> tuple[int, str]:
        limits = [(moments.n_features - 1, f"smaller than the vocabulary size V={moments.n_features}")]
        n_docs = getattr(moments, "n_documents", None)
        if n_docs is not None:
            limits.append((n_docs, f"at most the number of usable documents ({n_docs} with >= 3 tokens)"))
        return min(limits)

    def topics(self, fit, moments, k: int) -> tuple[np.ndarray, np.ndarray, dict]:
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
        if flips:
            warn(f"{current_entry()}: {flips} recovered topic(s) had negative total mass before sign fixing; the "
                 f"moments are too noisy for k={k} (try more documents, a smaller k, or method='tpm' with more "
                 "restarts).")
        return raw, eig, report

    def k_score(self, counts, k: int, rng, **spectral_kw) -> float:
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

    def estimate_counts(self, counts, estimate):
        """``counts`` as validated CSR with the estimate's number of columns."""
        V = estimate.params["beta"].shape[1]
        X = check_count_matrix(counts, "counts")
        if X.shape[1] != V:
            raise bad_argument("counts", None, f"{V} columns (the estimate's V)", X)
        return X

    def refine_data(self, counts, estimate, **options) -> TopicData:
        X = self.estimate_counts(counts, estimate)
        return TopicData(X, from_csr(X, dtype=np.float64))

    def n_observations(self, data: TopicData) -> int:
        return int(data.csr.shape[0])

    def component_log_prob(self, params, data: TopicData):
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


def raw_subspace(raw, k: int, *, oversample: int = 10, n_iter: int = 1, max_iter: int = 12, tol: float = 1e-2,
                 seed=0) -> RawSubspace:
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
    e3 = raw.whitened_m3(Q)
    return RawSubspace(Q=Q, e2=0.5 * (e2 + e2.T), e3=e3, q=Q.T @ m1, ritz_residual=space.residual, passes=passes)


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
    alpha = 4 * a0 * (a0 + 1) / ((a0 + 2) ** 2 * eig**2)
    return ritz, dict(beta=beta, alpha=alpha, dec=dec, s=s, flips=flips, negative_mass=proj["negative_mass"],
                      negative_eigenvalues=int(np.count_nonzero(eig < 0)))


#: Largest Dirichlet concentration ``alpha0`` (and ``alpha_sum``) accepted: beyond it every document has the
#: same topic proportions to 1e-8, the topics are not identified, and the moment corrections overflow far later.
ALPHA0_MAX = 1e8

#: The one declaration of ``alpha0`` (``None``: chosen from the data).
ALPHA0 = Interval(float, 0.0, ALPHA0_MAX, open="low", none=True)


def check_alpha0_grid(name: str, grid) -> np.ndarray | None:
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


#: Pair log-likelihoods (nats per pair) closer than this to the best are treated as ties (0.2% in likelihood).
PAIR_TIE = 2e-3

#: Candidate values of sum(alpha) given the topics (the Dirichlet concentration used for theta).
ALPHA_SCALES = np.geomspace(1e-2, 1e2, 9)


def fit_lda_grid(raw, k: int, grid, pairs, *, func: str, method: str, seed, floor: float, decompose_options,
                 alpha_sum: float = 1.0):
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
        # On noisy real moments the iterates converge linearly (close, non-orthogonal components): a tolerance
        # of 1e-6 on unit vectors is far below the noise of the moments, and 300 steps reach it. The grid is
        # screened with a light power method (2 restarts, 20 steps: SVTD and ECA screens rank the grid
        # erratically on real text); the chosen alpha0 is decomposed again with the full settings.
        decompose_options.setdefault("tol", 1e-6)
        decompose_options.setdefault("n_iter", 300)
        screen_options = {"n_restarts": 2, "n_iter": 20, "tol": 1e-4, **screen_options}
    sub = raw_subspace(raw, k, seed=rng)
    backend = getattr(raw, "passes", None)  # moments from data: the power method runs where their passes ran
    rows, fits = [], {}
    for a0 in list(grid) + [None]:
        if a0 is None:
            if fits:
                break
            # Even the smallest alpha0 leaves M2 indefinite: alpha0 -> 0 (M2 = E2, the single-topic limit).
            a0 = float(grid[0]) * 1e-3
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ritz, fit = _lda_at(sub, a0, k, method=screen_method, rng=np.random.default_rng(rng.integers(2**63)),
                                floor=floor, decompose_options=screen_options, backend=backend)
        if fit is None:
            rows.append((a0, False, np.nan, np.nan, np.nan))
            continue
        fit["warnings"] = [str(w.message) for w in caught]
        weights = fit["alpha"] / fit["alpha"].sum()
        terms = pair_terms(pairs, fit["beta"], weights)
        scores = [pair_log_likelihood(pairs, fit["beta"], weights * scale, terms) for scale in ALPHA_SCALES]
        best_scale = int(np.argmax(scores))
        fit["third_misfit"] = float(sum(lda_moment_fit(sub, fit["beta"], fit["alpha"])))
        fits[a0] = fit
        rows.append((a0, True, scores[best_scale], float(fit["alpha"].sum()), float(ALPHA_SCALES[best_scale])))
    if not fits:
        ks = _supported_k(ritz)
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
    best = min(tied, key=lambda a: fits[a]["third_misfit"])
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
             f"of what the data support (the M2 spectrum supports k <= {_supported_k(ritz)}).")
    ritz, *_ = _lda_whitened(sub, best, k)
    s = fit["s"]
    e2_misfit, e3_misfit = lda_moment_fit(sub, fit["beta"], fit["alpha"])
    report = {
        **_dec_report(fit["dec"]),
        "method": method,
        "weighting": getattr(raw, "weighting", "pooled"),
        "alpha0": float(best),
        "alpha0_selected": True,
        "alpha0_criterion_name": "pair composite log-likelihood per token pair (higher is better)",
        "alpha0_grid": np.array([r[0] for r in rows]),
        "alpha0_criterion": np.array([r[2] for r in rows]),
        "alpha0_moment_misfit": np.array([fits[r[0]]["third_misfit"] if r[1] else np.nan for r in rows]),
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
        "k_supported": _supported_k(ritz),
        "tensor_eigenvalues": fit["dec"].weights,
        "sign_flips": fit["flips"],
        "negative_eigenvalues": fit["negative_eigenvalues"],
        "negative_mass": fit["negative_mass"],
        "n_documents": raw.n_documents,
        "n_dropped": raw.n_dropped,
    }
    for message in dict.fromkeys(fit["warnings"]):
        warn(f"{func} (alpha0 = {best:.3g}): {message}")
    _warn_topics(func, k, report)
    return fit["beta"], fit["alpha"], report


def _supported_k(ritz: np.ndarray) -> int:
    """Positive eigenvalues (not numerically zero): the largest k whose M2 whitening exists."""
    return int(np.count_nonzero(ritz > 1e-12 * np.max(np.abs(ritz))))


def _dec_report(dec) -> dict:
    return {f"decomposition_{key}": value for key, value in dec.diagnostics.items()}


def _warn_topics(func: str, k: int, report: dict) -> None:
    """One warning naming the topics that had to be repaired (negative mass), with what to try."""
    heavy = int(np.count_nonzero(np.asarray(report["negative_mass"]) > 0.25))
    if report["sign_flips"] or heavy:
        warn(f"{func}: {report['sign_flips']} recovered topic(s) had negative total mass before sign fixing and "
             f"{heavy} had more than 25% of their mass negative before projection onto the simplex (see "
             f"diagnostics['negative_mass']); the moments are noisy for k={k}: try a smaller k (the M2 spectrum "
             f"supports k <= {report.get('k_supported', k)}) or more documents.")


def word_pairs(counts, max_pairs: int = 100_000, seed=0):
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


# ---------------------------------------------------------------------------------------------------------------
# Anchor words (Arora et al. 2013): topics from the co-occurrence moment alone
# ---------------------------------------------------------------------------------------------------------------

def _simplex_projection(Y: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (Duchi et al. 2008), vectorized."""
    n, k = Y.shape
    U = -np.sort(-Y, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    idx = np.arange(1, k + 1)
    rho = np.count_nonzero(U - css / idx > 0, axis=1)
    theta = css[np.arange(n), rho - 1] / rho
    return np.maximum(Y - theta[:, None], 0.0)


def positive_eigenspace(raw, k: int, *, seed, oversample: int = 10, max_passes: int = 13, tol: float = 1e-2,
                        start: np.ndarray | None = None):
    """The top-k positive eigenpairs of ``E2`` (block Krylov, matrix-free): ``E2 ~ U diag(s) U^T``.

    Returns ``(U, s, space)``: ``U`` (V, k) orthonormal, ``s`` (k,) the k
    largest positive Ritz values (descending) and the
    :class:`~specinit.engine.whitening.RitzSubspace` (its signed Ritz values,
    residual and passes go to the diagnostics). Negative eigenvalues -- the
    sampling noise of the unbiased pair estimator, which a moment matrix of
    the model cannot have -- are cut, and so is everything beyond rank k.

    ``start`` (V, <= k + oversample), e.g. a previous fit's eigenvectors,
    leads the Krylov start block (the rest is random): a warm start.

    Raises
    ------
    IndefiniteMomentError
        When fewer than k Ritz values of the space are positive (k beyond
        what the data support).
    """
    rng = as_generator(seed, "positive_eigenspace")
    d = raw.n_features
    width = min(d, k + oversample)
    block = rng.standard_normal((d, width))
    if start is not None:
        block[:, : start.shape[1]] = start[:, :width]
    space = krylov_eigenspace(raw.m2_matmat, block, k, min_passes=2, max_passes=max_passes, tol=tol)
    positive = np.flatnonzero(space.ritz > 1e-12 * np.max(np.abs(space.ritz)))
    positive = positive[np.argsort(-space.ritz[positive], kind="stable")][:k]
    if positive.size < k:
        raise IndefiniteMomentError(
            f"The pair moment E2 has only {positive.size} positive eigenvalues among its top {space.ritz.size} "
            f"(signed: {np.array2string(space.ritz[:k + 1], precision=3)}): the data do not support k={k} "
            f"topics. Try k <= {max(positive.size, 1)} or more documents.")
    return space.basis @ space.vectors[:, positive], space.ritz[positive], space


def fit_anchor(raw, k: int, *, func: str, seed, floor: float = 1e-3, alpha_sum: float = 1.0,
               n_candidates: int | None = None, n_iter: int = 60, start: np.ndarray | None = None):
    """Anchor-word recovery (RecoverL2) from the top-k positive eigenspace of the pair moment ``E2``.

    ([1]_ Alg. 2 FastAnchorWords, Alg. 3 RecoverL2 on the low-rank pair
    moment, as in [2]_): ``E2`` is cut to its k largest positive eigenpairs,
    ``E2 ~ U diag(s) U^T`` (:func:`positive_eigenspace`; the noise of the
    estimator -- negative eigenvalues and the tail of the spectrum -- is
    dropped, which is what rectification buys). The rows of the
    row-normalized matrix, ``Qbar_w = E2[w, :] / d_w`` with row sums
    ``d = U (s * U^T 1)``, are convex combinations of the k anchor rows, and
    their inner products are exactly those of the k-dimensional embedding
    ``X_w = U_w s / d_w`` (``U^T U = I``). Anchors come from a greedy
    farthest-point search (Gram-Schmidt) on ``X`` over the frequent words;
    the convex weights ``C_w = p(topic | w)`` minimize
    ``||X_w - C_w X_S||^2`` over the simplex, solved for all words at once
    by accelerated projected gradient. Then ``A_wk ~ C_wk p(w)`` and each
    topic is a column of ``A`` normalized, with ``p(w)`` the first moment.
    Memory O(V k); passes over the data: those of the eigensolver only
    (warm-started from ``start``, see :func:`positive_eigenspace`).

    Returns ``(beta, alpha, report)`` with ``alpha = alpha_sum * p(topic)``;
    with ``start`` given (it may have no columns), the report's
    ``state/eigenspace`` is the (V, k) eigenvector basis, the next start.

    References
    ----------
    .. [1] Arora, Ge, Halpern, Mimno, Moitra, Sontag, Wu, Zhu. "A practical
       algorithm for topic modeling with provable guarantees", ICML 2013.
    .. [2] Lee, Cho, Bindel, Mimno. "Practical correlated topic modeling and
       analysis via the rectified anchor word algorithm", EMNLP 2019 (the
       low-rank anchor step).
    """
    d = raw.n_features
    rng = as_generator(seed, func)
    U, s, space = positive_eigenspace(raw, k, seed=rng, start=start)
    rowsum = U @ (s * U.sum(axis=0))
    valid = rowsum > 0
    X = (U * s) / np.where(valid, rowsum, 1.0)[:, None]
    # Anchor candidates: the most frequent words (rare words have noisy co-occurrence rows and make poor
    # anchors; [1]_ Sec. 5 keeps words above a document-frequency cut-off).
    n_candidates = 8 * k if n_candidates is None else n_candidates
    order = np.argsort(-np.where(valid, raw.m1, -np.inf), kind="stable")
    candidates = np.sort(order[: min(max(n_candidates, k), int(valid.sum()))])
    if candidates.size < k:
        raise ValueError(f"{func}: only {candidates.size} words have a positive co-occurrence row; k={k} anchors "
                         "cannot be found. Try a smaller k or more documents.")
    R = X[candidates]
    first = int(np.argmax(np.einsum("ij,ij->i", R, R)))
    anchors = [first]
    Z = R - R[first]
    for _ in range(k - 1):
        norms = np.einsum("ij,ij->i", Z, Z)
        nxt = int(np.argmax(norms))
        anchors.append(nxt)
        b = Z[nxt] / np.sqrt(norms[nxt])
        Z = Z - np.outer(Z @ b, b)
    S = candidates[anchors]
    H = X @ X[S].T  # Qbar_w . Qbar_s
    G = H[S]
    G = 0.5 * (G + G.T)
    L = 2.0 * max(np.linalg.eigvalsh(G)[-1], 1e-300)
    C = np.full((d, k), 1.0 / k)
    Y, t = C.copy(), 1.0
    steps = 0
    for steps in range(1, n_iter + 1):  # FISTA on all words at once, until no weight moves by 1e-10
        new = _simplex_projection(Y - (2.0 * (Y @ G - H)) / L)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        Y = new + (t - 1.0) / t_new * (new - C)
        done = np.max(np.abs(new - C)) < 1e-10
        C, t = new, t_new
        if done:
            break
    C[~valid] = 1.0 / k
    A = C * raw.m1[:, None]  # p(topic, word) = p(topic | word) p(word)
    topic_mass = A.sum(axis=0)
    beta, _ = project_to_simplex((A / np.maximum(topic_mass, 1e-300)).T, floor)
    weights = topic_mass / topic_mass.sum()
    residual = np.sum(C * (C @ G), axis=1) - 2 * np.sum(C * H, axis=1)
    ritz = space.ritz
    report = {
        "method": "anchor",
        "weighting": getattr(raw, "weighting", "pooled"),
        "anchors": S,
        "anchor_rank": k,
        "anchor_eigenvalues": s,
        # negative eigenvalues that a top-k by magnitude would have kept
        "anchor_negative_eigenvalues_cut": int(np.count_nonzero(ritz < -s[-1])),
        "anchor_recovery_objective": float(np.mean(residual[valid]) + 0.0),
        "anchor_recovery_steps": steps,
        "n_words_without_pairs": int(np.count_nonzero(~valid)),
        "m2_eigenvalues": ritz,
        "m2_ritz_residual": space.residual,
        "m2_passes": space.passes,
        "k_supported": _supported_k(ritz),
        "alpha_sum": float(alpha_sum),
    }
    if hasattr(raw, "n_documents"):
        report.update(n_documents=raw.n_documents, n_dropped=raw.n_dropped)
    if start is not None:
        report["state/eigenspace"] = U
    return beta, alpha_sum * weights, report


def svi_batch(counts) -> DocumentCounts:
    """The sparse minibatch a topic-model guide receives, validated.

    Parameters
    ----------
    counts : scipy.sparse matrix or DocumentCounts

    Returns
    -------
    DocumentCounts
    """
    data = ModelData(counts, current_entry("guide"), None, None, None)
    if data.sparse is None:
        raise bad_argument("counts", None, "sparse counts (scipy.sparse or DocumentCounts)", counts, kind=TypeError)
    return data.sparse


def local_gamma(alpha, beta, data: DocumentCounts, steps: int):
    """Online-VB E-step: variational Dirichlet parameters ``gamma`` (n_docs, k) given ``alpha``, ``beta``.

    Parameters
    ----------
    alpha : array, shape (k,)
    beta : array, shape (k, V)
    data : DocumentCounts
    steps : int
        Fixed-point iterations ([2]_ eq. 6-7), started from ``alpha + n_d / k``.
    """
    n_docs, k = data.lengths.shape[0], alpha.shape[0]
    beta_w = beta.T[data.word]  # (nnz, k)
    tiny = jnp.finfo(beta.dtype).tiny

    def step(_, gamma):
        elog = digamma(gamma) - digamma(jnp.sum(gamma, axis=-1, keepdims=True))
        expel = jnp.exp(elog - jnp.max(elog, axis=-1, keepdims=True))
        norm = jnp.einsum("nk,nk->n", expel[data.doc], beta_w, precision=HIGHEST) + tiny
        stats = jax.ops.segment_sum((data.count / norm)[:, None] * beta_w, data.doc, num_segments=n_docs)
        return alpha + expel * stats

    gamma0 = alpha + data.lengths[:, None] / k
    return jax.lax.fori_loop(0, steps, step, gamma0)


def document_topics(counts, beta, alpha, *, n_iter: int = 30, tol: float = 1e-4) -> np.ndarray:
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
        new = (alpha + current * np.asarray(_token_ratio(sub, current, sub_tokens) @ beta.T)) / (
            sub_lengths[:, None] + alpha.sum())
        theta[held[going]] = new[going]
        going &= np.max(np.abs(new - current), axis=1, initial=0.0) >= tol
    return theta


#: Dirichlet concentration of each topic in the closing EM sweeps (the ``eta`` of ``lda.model``).
CLOSING_ETA = 0.1


def close_topics(source, beta: np.ndarray, alpha: np.ndarray, sweeps: int, *, floor: float, eta: float = CLOSING_ETA,
                 fold_in_steps: int = 3, prior_counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, dict]:
    """A few EM sweeps over the corpus from given topics: the closing step of ``lda.spectral``.

    Each sweep streams the chunks of ``source`` once: per document,
    ``fold_in_steps`` fixed-point steps of its topic proportions
    (:func:`document_topics`' update, warm-started from the previous sweep),
    then the expected topic-word counts
    ``n_kw = beta_kw sum_d theta_dk c_dw / (theta_d . beta_w)`` give the new
    topics ``beta_k ~ n_k + eta`` (the mean of the topic's Dirichlet
    posterior with concentration ``eta``). The topic weights follow the
    expected tokens per topic, ``alpha`` keeps its sum. With Numba installed
    (extra ``[fast]``) a compiled kernel runs each chunk's documents on every
    core without per-token temporaries; otherwise the documents are
    processed in blocks of bounded (nonzeros, k) temporaries
    (:data:`TOKEN_BLOCK_BYTES`) on every core. Memory: the (N, k)
    proportions and a few blocks' temporaries. ``prior_counts`` (k, V),
    expected topic-word counts of documents not in ``source`` (earlier
    batches), are added to every M-step's counts.

    Returns ``(beta, alpha, report)``; the report holds the training
    log-likelihood per token before each M-step (``closing_log_likelihood``).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    k = beta.shape[0]
    thetas, loglik = {}, []

    compiled = numba_kernel("closing_sweep")

    def sweep(item, beta, alpha):
        i, X = item
        theta = thetas.get(i)
        if theta is None:
            theta = np.tile(alpha / alpha.sum(), (X.shape[0], 1))
        if compiled is not None:
            return (i, *compiled(X, beta, alpha, theta, fold_in_steps), float(X.data.sum()))
        tokens = _tokens(X, beta)
        theta = _fold_in(X, beta, alpha, theta, fold_in_steps, 0.0, tokens)
        ratio = _token_ratio(X, theta, tokens)
        return (i, theta, np.asarray(ratio.T @ theta).T, float(np.sum(X.data * np.log(X.data / ratio.data))),
                float(X.data.sum()))

    for _ in range(sweeps):
        stats, total, n_tokens = np.zeros_like(beta), 0.0, 0.0
        if compiled is not None:  # the kernel runs on every core over a chunk's documents, without temporaries
            results = map(partial(sweep, beta=beta, alpha=alpha), enumerate(source.chunks()))
        else:
            blocks = enumerate(block for chunk in source.chunks() for block in _token_blocks(chunk, k))
            results = in_order(partial(sweep, beta=beta, alpha=alpha), blocks, os.cpu_count() or 1)
        for i, theta, block_stats, block_total, block_tokens in results:
            thetas[i] = theta
            stats += block_stats
            total += block_total
            n_tokens += block_tokens
        counts = beta * stats + (0.0 if prior_counts is None else prior_counts)
        loglik.append(total / max(n_tokens, 1.0))
        smoothed = counts + eta
        beta, _ = project_to_simplex(smoothed / smoothed.sum(axis=1, keepdims=True), floor)
        mass = counts.sum(axis=1)
        alpha = alpha.sum() * mass / mass.sum()
    return beta, alpha, {"closing_sweeps": int(sweeps), "closing_eta": float(eta),
                         "closing_log_likelihood": np.asarray(loglik)}


def initial_unconstrained(init, shapes: dict, rng: np.random.Generator, func: str) -> dict:
    """Unconstrained starting values: from an estimate's constrained params, or NumPyro's ``init_to_uniform``.

    ``init=None`` draws every unconstrained coordinate from Uniform(-2, 2)
    (NumPyro's default start); otherwise ``init.params`` (or a dict) must
    hold every site of ``shapes`` with that constrained shape.
    """
    dtype = jnp.result_type(float)
    out = {}
    for name, shape in shapes.items():
        transform = TRANSFORMS[name]
        if init is None:
            out[name] = jnp.asarray(rng.uniform(-2.0, 2.0, size=transform.inverse_shape(shape)), dtype)
            continue
        params = init.params if hasattr(init, "params") else init
        if not isinstance(params, dict) or name not in params:
            raise bad_argument("init", func, f"None, or an estimate whose params hold {sorted(shapes)}", init)
        value = np.asarray(params[name], dtype=np.float64)
        if value.shape != tuple(shape) or not np.all(np.isfinite(value)) or np.any(value <= 0):
            raise bad_argument("init", func, f"an estimate with positive {name!r} of shape {tuple(shape)}",
                               f"{name!r} of shape {value.shape}", describe=False)
        if transform is ALR:
            value = value / value.sum(axis=-1, keepdims=True)
        out[name] = jnp.asarray(_inverse_np(transform, value), dtype)
    return out


def _inverse_np(transform, value: np.ndarray) -> np.ndarray:
    """Inverse transform in float64 NumPy (the estimate's precision), before casting to the model dtype."""
    if transform is ALR:
        log_v = np.log(value)
        return log_v[..., :-1] - log_v[..., -1:]
    return np.log(value)


def constrained(unconstrained: dict) -> dict:
    """Constrained point values (NumPy) of the guide's unconstrained parameters."""
    out = {}
    for key, value in unconstrained.items():
        name = key[: -len("_unconstrained")]
        out[name] = np.asarray(TRANSFORMS[name](jnp.asarray(value)), dtype=np.float64)
        if name in ("beta", "weights"):
            out[name] /= out[name].sum(axis=-1, keepdims=True)
    return out


@dataclass
class TopicSVIResult:
    """Result of ``lda.svi`` / ``single_topic.svi``.

    Attributes
    ----------
    params : dict of str -> ndarray
        Constrained point values by site name (float64 NumPy): ``"beta"``
        (k, V) rows on the simplex and ``"alpha"`` (k,) for LDA,
        ``"weights"`` (k,) for the single-topic model.
    losses : ndarray, shape (n_steps,)
        Minibatch loss per step (negative objective, scaled to the corpus).
    guide : callable
        The NumPyro guide (takes the model's arguments; counts as
        :class:`~specinit.distributions.counts.DocumentCounts`).
    guide_params : dict
        The guide's parameters (``"<site>_unconstrained"``), e.g. for
        ``numpyro.infer.SVI``/``Predictive`` with ``params=``.
    model : callable
        The model the guide belongs to.
    model_kwargs : dict
        Keyword arguments the model was run with (``k``, priors).
    seconds : float
        Wall time of the run (compilation included).
    snapshots : list of (int, dict)
        ``(step, params)`` every ``snapshot_every`` steps (empty if not asked).
    batch_size : int
    init : str
        ``"estimate"`` or ``"uniform"`` (NumPyro's default start).
    checks : ndarray, shape (n_checks, 2)
        The stopping rule's record: step, and the loss per word of its fixed
        check batch at that step (empty with ``num_steps``).
    n_steps : int
        Steps taken.
    stop_reason : str
        ``"plateau"`` (the stopping rule fired), ``"max_steps"`` (the cap
        was reached first) or ``"num_steps"`` (an exact number of steps was
        asked for).
    improvement : float
        The last gain the stopping rule measured: the mean check loss of the
        second-to-last quarter of the run minus that of the last quarter
        (nats per word; NaN if the rule never ran).
    first_step_seconds : float
        Wall time of the first step: the compilation of the update, or
        almost nothing when a run of the same shapes compiled it before.
    """

    params: dict
    losses: np.ndarray
    guide: Callable = field(repr=False)
    guide_params: dict = field(repr=False)
    model: Callable = field(repr=False)
    model_kwargs: dict
    seconds: float
    snapshots: list = field(default_factory=list, repr=False)
    batch_size: int = 0
    init: str = "uniform"
    checks: np.ndarray = field(default_factory=lambda: np.empty((0, 2)), repr=False)
    n_steps: int = 0
    stop_reason: str = "num_steps"
    improvement: float = float("nan")
    first_step_seconds: float = float("nan")

    @property
    def diagnostics(self) -> dict:
        """Flat scalar summary of the run: ``n_steps``, ``stop_reason``, ``improvement``, ``seconds``,
        ``first_step_seconds``, ``check_loss`` (the check batch's last loss per word; NaN without checks)."""
        return {"n_steps": int(self.n_steps), "stop_reason": self.stop_reason, "improvement": float(self.improvement),
                "seconds": float(self.seconds), "first_step_seconds": float(self.first_step_seconds),
                "check_loss": float(self.checks[-1, 1]) if len(self.checks) else float("nan")}


_CACHE: dict = {}
_AUTO_PROGRESS_S = 15.0
#: The stopping rule looks every this many steps, from step 4 * _CHECK_EVERY on, and stops at the second check
#: in a row whose gain is below tol.
_CHECK_EVERY = 25
_PATIENCE = 2


class _SortedTraceELBO(Trace_ELBO):
    """``Trace_ELBO`` with the sites summed in sorted order.

    ``Trace_ELBO`` sums over a Python ``set`` of site names, whose order
    follows the per-process string hash: the same update then lowers to a
    different program in every process, so JAX's persistent compilation cache
    never hits and the last bits of the loss vary between processes. Same
    random numbers (the key split as in ``Trace_ELBO``), same value up to the
    order of the sum.
    """

    def loss_with_mutable_state(self, rng_key, param_map, model, guide, *args, **kwargs):
        model_seed, guide_seed = jax.random.split(rng_key)
        guide_log_probs, guide_trace = compute_log_probs(seed(guide, guide_seed), args, kwargs, param_map)
        model_log_probs, _ = compute_log_probs(replay(seed(model, model_seed), guide_trace), args, kwargs, param_map)
        names = sorted(set(model_log_probs) | set(guide_log_probs))
        elbo = sum((model_log_probs.get(name, 0.0) - guide_log_probs.get(name, 0.0) for name in names),
                   start=jnp.array(0.0))
        return {"loss": -elbo, "mutable_state": None}


def _compiled(model, guide, guide_items: tuple, lr, decay_steps, kwargs_items: tuple):
    """``(svi, jitted init, jitted update)`` shared by runs with the same model, guide and settings.

    The key holds only module-level functions and hashable settings, so a
    later call with the same settings reuses the jitted functions, and their
    own caches (keyed on the argument shapes) make a run on a corpus of the
    same shapes compile nothing. Start values enter through ``init_params``,
    so warm and cold runs of the same shapes compile once. The lowered update
    is the same in every process (:class:`_SortedTraceELBO`), so JAX's
    persistent compilation cache, when the application turns it on, serves
    it to later processes too.
    """
    key = (model, guide, guide_items, lr, decay_steps, kwargs_items)
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        kwargs = dict(kwargs_items)
        bound = partial(guide, **dict(guide_items)) if guide_items else guide
        svi = SVI(model, bound, numpyro.optim.Adam(_schedule(lr, decay_steps)), _SortedTraceELBO())
        init_fn = jax.jit(lambda rng_key, batch, values: svi.init(rng_key, batch, init_params=values, **kwargs))
        step = jax.jit(lambda state, batch: svi.update(state, batch, **kwargs))
        _CACHE[key] = (svi, init_fn, step)
    return _CACHE[key]


def _schedule(lr: float, decay_steps: float):
    return lambda t: lr / jnp.sqrt(1.0 + t / decay_steps)


def _plateau_gain(checks: list) -> float:
    """The stopping rule's gain: the mean check loss of the second-to-last quarter of the checks minus that of
    the last quarter (nats per word).

    Parameters
    ----------
    checks : list of (int, float)
        ``(step, loss per word of the check batch)`` every ``_CHECK_EVERY``
        steps, the latest last (at least four).

    Returns
    -------
    float
    """
    values = np.array([value for _, value in checks])
    quarter = values.size // 4
    return float(values[-2 * quarter: -quarter].mean() - values[-quarter:].mean())


def _progress_bar(progress, total: int, func: str):
    """A tqdm bar when ``progress is True``, or ``progress is None`` in a terminal; else None."""
    import sys

    if progress is True or (progress is None and sys.stderr.isatty()):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=func, unit="step", leave=False)
    return None


def run_svi(model, guide, shapes: dict, counts, k: int, *, init, num_steps, max_steps, tol, batch_size, seed,
            progress, lr, decay_steps, snapshot_every, model_kwargs: dict, guide_options=None) -> TopicSVIResult:
    """Shared minibatch SVI loop of ``lda.svi`` and ``single_topic.svi`` (see the module notes).

    The stopping rule (``num_steps=None``): a fixed, seeded batch of
    ``batch_size`` documents is scored every ``_CHECK_EVERY`` steps with the
    compiled update itself (its loss is taken before the step, whose new state
    is dropped) at a fixed random key, so the check losses differ only by the
    parameters' change; from step ``4 * _CHECK_EVERY`` on, the run stops at the
    second check in a row where the mean check loss of the last quarter of the
    checks is less than ``tol`` nats per word below that of the quarter before
    (:func:`_plateau_gain`), else at ``max_steps``. Progress
    lines go to the ``specinit`` logger (level INFO; silent unless the
    application configures logging).
    """
    func = current_entry()
    X = check_count_matrix(counts, "counts", func)
    n_docs, vocab = X.shape
    num_steps = None if num_steps is None else check_int(num_steps, "num_steps", func, minimum=1)
    max_steps = check_int(max_steps, "max_steps", func, minimum=1)
    tol = check_positive(tol, "tol", func)
    batch_size = check_int(batch_size, "batch_size", func, minimum=1)
    if batch_size > n_docs:
        raise bad_argument("batch_size", func, f"at most the number of documents N={n_docs}", batch_size)
    lr = check_positive(lr, "lr", func)
    decay_steps = check_positive(decay_steps, "decay_steps", func)
    snapshot_every = None if snapshot_every is None else check_int(snapshot_every, "snapshot_every", func, minimum=1)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise bad_argument("seed", func, "a non-negative integer", seed, kind=TypeError if not isinstance(seed, (int, np.integer)) else ValueError)
    if progress is not None and (not isinstance(progress, (bool, int, np.integer)) or progress < 0):
        raise bad_argument("progress", func, "None, a bool or a non-negative number of steps between progress lines",
                           progress)
    limit = max_steps if num_steps is None else num_steps
    every = 0 if isinstance(progress, bool) or progress is None else int(progress)
    # progress None or True: a line every _AUTO_PROGRESS_S seconds, only once a run has lasted that long.
    timed_lines = progress is None or progress is True
    last_print = 0.0

    rng = np.random.default_rng(seed)
    start_values = initial_unconstrained(init, shapes(vocab), rng, func)
    dtype = jnp.result_type(float)
    svi, init_fn, step = _compiled(model, guide, tuple(sorted((guide_options or {}).items())), lr, decay_steps,
                                   tuple(sorted(model_kwargs.items())))

    order = np.empty(0, dtype=np.int64)
    # One padded nnz capacity for every minibatch (one compilation), grown only if a batch overflows it.
    capacity = _bucket(int(1.3 * X.nnz / n_docs * batch_size) + 64)
    scale = n_docs / batch_size  # the model scales a minibatch's log density to the corpus

    def batch_of(rows):
        nonlocal capacity
        rows_x = X[np.sort(rows)]
        if rows_x.nnz > capacity:
            capacity = _bucket(int(1.15 * rows_x.nnz))
        return from_csr(rows_x, num_documents=n_docs, pad=capacity, dtype=dtype), max(float(rows_x.sum()), 1.0)

    def next_batch():
        nonlocal order
        if order.size < batch_size:
            order = np.concatenate([order, rng.permutation(n_docs)])
        rows, order = order[:batch_size], order[batch_size:]
        return batch_of(rows)[0]

    if num_steps is None:
        check_rows = np.random.default_rng([seed, 1]).choice(n_docs, size=batch_size, replace=False)
        check_batch, check_tokens = batch_of(check_rows)
        check_key = jax.random.PRNGKey(seed + 1)

    bar = _progress_bar(progress, limit, func)
    start = time.perf_counter()
    batch = next_batch()
    state = init_fn(jax.random.PRNGKey(seed), batch, {f"{name}_unconstrained": v for name, v in start_values.items()})
    losses, snapshots, checks, below = [], [], [], 0
    first_step_seconds, gain, reason = float("nan"), float("nan"), "num_steps" if num_steps is not None else "max_steps"

    def recent_mean(n: int) -> float:
        return float(np.mean(np.asarray(jnp.stack(losses[-n:]), dtype=np.float64)))

    done = 0
    while done < limit:
        if done:
            batch = next_batch()
        if num_steps is None and done % _CHECK_EVERY == 0 and done:
            if check_batch.count.shape[0] < capacity:  # padded like the training batches: no second compilation
                check_batch, check_tokens = batch_of(check_rows)
            # The loss of the check batch at the current parameters (the returned state is dropped).
            checks.append((done, float(step(state._replace(rng_key=check_key), check_batch)[1]) / (scale * check_tokens)))
            if len(checks) >= 4:
                gain = _plateau_gain(checks)
                if bar is not None:
                    bar.set_postfix(check_loss=f"{checks[-1][1]:.4f}", gain=f"{gain:.2g}")
                below = below + 1 if gain < tol else 0
                if below == _PATIENCE:
                    reason = "plateau"
                    break
        state, loss = step(state, batch)
        losses.append(loss)
        done += 1
        if done == 1:
            jax.block_until_ready(loss)
            first_step_seconds = time.perf_counter() - start
        if bar is not None:
            bar.update(1)
        if snapshot_every and (done % snapshot_every == 0 or done == limit):
            snapshots.append((done, constrained(svi.get_params(state))))
        if timed_lines and time.perf_counter() - start - last_print >= _AUTO_PROGRESS_S:
            last_print = time.perf_counter() - start
            LOGGER.info(f"{func}: step {done}/{limit}, mean loss of the last {min(done, _CHECK_EVERY)} steps "
                        f"{recent_mean(_CHECK_EVERY):.6g} ({last_print:.0f} s)")
        if every and (done % every == 0 or done == limit):
            LOGGER.info(f"{func}: step {done}/{limit}, mean loss of the last {min(done, every)} steps "
                        f"{recent_mean(every):.6g} ({time.perf_counter() - start:.1f} s)")
    if bar is not None:
        bar.close()
    params_u = svi.get_params(state)
    losses = np.asarray(jax.block_until_ready(jnp.stack(losses)), dtype=np.float64)
    seconds = time.perf_counter() - start
    if reason == "plateau" and snapshot_every and (not snapshots or snapshots[-1][0] != done):
        snapshots.append((done, constrained(params_u)))
    LOGGER.info(f"{func}: stopped after {done} steps ({reason}; gain over the last quarter {gain:.3g} nats per word, "
                f"tol {tol:g}) in {seconds:.1f} s")
    if reason == "max_steps":
        measured = (f"the last quarter of the run gained {gain:.3g} nats per word, tol={tol:g}" if np.isfinite(gain)
                    else f"the stopping rule looks from step {4 * _CHECK_EVERY} on")
        warn(f"{func} reached max_steps={max_steps} before its objective levelled off ({measured}); pass a larger "
             "max_steps, a larger tol, or num_steps for an exact number of steps.")
    return TopicSVIResult(constrained(params_u), losses, svi.guide, params_u, model, dict(model_kwargs), seconds,
                          snapshots, batch_size, "uniform" if init is None else "estimate", np.array(checks).reshape(-1, 2),
                          done, reason, gain, first_step_seconds)


def check_local(local: str, func: str) -> str:
    """Validate the ``local`` option of ``lda.svi``."""
    return check_choice(local, "local", func, ("mean", "dirichlet"))
