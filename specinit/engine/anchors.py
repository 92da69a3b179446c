"""Anchor-word recovery: topics from the top positive eigenspace of the pair moment alone.

An engine recovery beside the tensor decomposition: it reads the moments
through ``m2_matmat`` and ``m1`` only (any object with ``n_features``,
``m1`` and ``m2_matmat``, e.g. :class:`~specinit.engine.moments.CountMoments`
or merged pair sums), so it streams like the whitening does and never forms
the (V, V) pair moment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Sequence

import numpy as np

from specinit._validation import as_generator
from specinit.engine.backends import namespace, numba_kernel, resident_scope
from specinit.engine.support import project_to_simplex
from specinit.engine.whitening import IndefiniteMomentError, krylov_eigenspace

if TYPE_CHECKING:
    import jax

    from specinit.engine.protocols import ExchangeableMoments
    from specinit.engine.whitening import RitzSubspace

__all__ = ["ANCHOR_TOL", "OVERSAMPLE", "SEED_NEIGHBOURS", "WARM_NOISE_TOL", "anchor_weights_step", "fit_anchor",
           "positive_eigenspace", "positive_ritz", "seed_report", "simplex_projection", "supported_k"]

#: Columns of the eigensolver's block beyond the k wanted (and of the eigenspace kept for a warm start).
OVERSAMPLE = 10

#: Words per seed word among which a seed group's ``"extreme"`` anchor is chosen (:func:`fit_anchor`).
SEED_NEIGHBOURS = 3

#: The ``noise_tol`` of an online update whose anchor fit EM then moves (:func:`specinit.models.lda.update`): a
#: warm-started eigensolver also stops when its residual is this fraction of the pair moment's sampling noise.
WARM_NOISE_TOL = 0.1

#: The anchor weights' projected gradient stops once no weight moves by this much.
ANCHOR_TOL = 1e-10


def supported_k(ritz: np.ndarray) -> int:
    """Positive eigenvalues (not numerically zero): the largest k whose M2 whitening exists.

    Parameters
    ----------
    ritz : ndarray
        Signed Ritz values of the pair moment.

    Returns
    -------
    int
        How many exceed ``1e-12`` times the largest magnitude.
    """
    return positive_ritz(ritz).size


def positive_ritz(ritz: np.ndarray) -> np.ndarray:
    """Indices of the positive Ritz values that are not numerically zero (above ``1e-12`` of the largest magnitude).

    Parameters
    ----------
    ritz : ndarray
        Signed Ritz values.

    Returns
    -------
    ndarray of int
    """
    return np.flatnonzero(ritz > 1e-12 * np.max(np.abs(ritz)))



def simplex_projection(Y: np.ndarray | jax.Array) -> np.ndarray | jax.Array:
    """Euclidean projection of each row onto the probability simplex (Duchi et al. 2008), vectorized.

    Parameters
    ----------
    Y : array, shape (n, k)
        A NumPy array, or a JAX array (also inside ``jax.jit``: the device
        loop of the anchor weights).

    Returns
    -------
    array, shape (n, k)
        Rows on the simplex, of ``Y``'s kind.
    """
    xp = namespace(Y)
    k = Y.shape[1]
    U = -xp.sort(-Y, axis=1)
    css = xp.cumsum(U, axis=1) - 1.0
    rho = xp.count_nonzero(U - css / xp.arange(1, k + 1, dtype=Y.dtype) > 0, axis=1)
    theta = xp.take_along_axis(css, (rho - 1)[:, None], axis=1) / rho[:, None]
    return xp.maximum(Y - theta, 0.0)


def anchor_weights_step(Y: np.ndarray, product: np.ndarray, H: np.ndarray, C: np.ndarray, lipschitz: float,
                        momentum: float) -> float:
    """One accelerated projected-gradient (FISTA) step of the anchor weights, in place.

    ``C_new = P(Y - 2 (Y G - H) / L)`` row by row (``P`` the projection onto
    the simplex, :func:`simplex_projection`), then ``Y <- C_new + momentum
    (C_new - C)`` and ``C <- C_new``. The compiled step of the Numba backend
    (:func:`specinit.engine.backends.numba.anchor_weights_step`) does the same
    in one pass over the rows.

    Parameters
    ----------
    Y, C : ndarray, shape (V, k)
        The momentum point and the weights; both overwritten.
    product : ndarray, shape (V, k)
        ``Y @ G``.
    H : ndarray, shape (V, k)
        The targets.
    lipschitz : float
        ``L``, the gradient's Lipschitz constant.
    momentum : float
        FISTA's ``(t - 1) / t_new``.

    Returns
    -------
    float
        The largest move of a weight, ``max |C_new - C|``.
    """
    new = simplex_projection(Y - (2.0 * (product - H)) / lipschitz)
    delta = new - C
    move = float(np.max(np.abs(delta)))
    Y[...] = new + momentum * delta
    C[...] = new
    return move


def positive_eigenspace(raw: ExchangeableMoments, k: int, *, seed: int | np.random.Generator,
                        oversample: int = OVERSAMPLE, max_passes: int = 13, tol: float = 1e-2, noise_tol: float = 0.0,
                        start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, RitzSubspace]:
    """The top-k positive eigenpairs of ``E2`` (block Krylov, matrix-free): ``E2 ~ U diag(s) U^T``.

    Negative eigenvalues -- the sampling noise of the unbiased pair
    estimator, which a moment matrix of the model cannot have -- are cut,
    and so is everything beyond rank k.

    Parameters
    ----------
    raw : moments
        Anything with ``n_features`` and ``m2_matmat`` (products with the
        pair moment ``E2``).
    k : int
        Eigenpairs wanted.
    seed : int or numpy.random.Generator
        Seeds the random part of the Krylov start block.
    oversample : int, default :data:`OVERSAMPLE`
        Extra columns of the start block.
    max_passes : int, default 13
        Most products with ``E2``.
    tol : float, default 1e-2
        Relative Ritz residual at which the eigensolver stops.
    noise_tol : float, default 0
        With a warm start, the eigensolver also stops once its absolute
        residual is at most ``noise_tol`` times the sampling noise that the
        negative Ritz values show (``noise_tol`` of
        :func:`~specinit.engine.whitening.krylov_eigenspace`; 0: off). A
        random start ignores it: stopped at the noise level, its top
        eigenvectors (and the anchors read from them) still depend on the
        random block (held-out perplexity 669-695 over six seeds on the
        docstrings corpus, against 680.2-680.4 at ``tol``).
    start : ndarray, shape (V, <= k + oversample), optional
        Leads the Krylov start block (the rest is random), e.g. a previous
        fit's eigenvectors: a warm start.

    Returns
    -------
    U : ndarray, shape (V, k)
        Orthonormal eigenvectors.
    s : ndarray, shape (k,)
        The k largest positive Ritz values, descending.
    leading : ndarray, shape (V, min(V, k + oversample))
        The leading Ritz vectors (by magnitude): the ``start`` of a later fit.
    space : RitzSubspace
        The eigensolver's subspace (its signed Ritz values, residual and
        passes go to the diagnostics); its tall arrays stay where the
        moments' passes run (a JAX device for count moments on one).

    Raises
    ------
    IndefiniteMomentError
        When fewer than k Ritz values of the space are positive (k beyond
        what the data support).
    """
    rng = as_generator(seed, "positive_eigenspace")
    warm = start is not None and start.shape[1] > 0
    d = raw.n_features
    width = min(d, k + oversample)
    block = rng.standard_normal((d, width))
    if start is not None:
        block[:, : start.shape[1]] = start[:, :width]
    with resident_scope(raw):  # moments on a device keep the Krylov space there (only small projections travel)
        resident = getattr(raw, "resident", None)
        space = krylov_eigenspace(raw.m2_matmat, block if resident is None else resident(block), k,
                                  min_passes=2, max_passes=max_passes, tol=tol,
                                  noise_tol=noise_tol if warm else 0.0)
        positive = positive_ritz(space.ritz)
        positive = positive[np.argsort(-space.ritz[positive], kind="stable")][:k]
        if positive.size < k:
            raise IndefiniteMomentError(
                f"The pair moment E2 has only {positive.size} positive eigenvalues among its top {space.ritz.size} "
                f"(signed: {np.array2string(space.ritz[:k + 1], precision=3)}): the data do not support k={k} "
                f"topics. Try k <= {max(positive.size, 1)} or more documents.")
        # the tall results on the host, where the anchor algebra runs: the eigenvectors, and the whole leading Ritz
        # block as the next update's start (the top k alone, completed by random columns, made the warm start's
        # first passes no better than a cold start's on the docstrings corpus: 6-8 passes an update, against 4-5)
        U = np.asarray(space.basis @ space.vectors[:, positive])
        leading = np.asarray(space.basis @ space.vectors[:, : min(d, k + oversample)])
    return U, space.ritz[positive], leading, space


def fit_anchor(raw: ExchangeableMoments, k: int, *, func: str, seed: int | np.random.Generator, floor: float = 1e-3,
               alpha_sum: float = 1.0, n_candidates: int | None = None, n_iter: int = 60,
               start: np.ndarray | None = None, noise_tol: float = 0.0, seed_groups: Sequence[np.ndarray] = (),
               seed_anchor: Literal["extreme", "pooled", "harmonic"] = "harmonic",
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
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
    by accelerated projected gradient (:func:`anchor_weights_step`, compiled
    with Numba when the ``[fast]`` extra is installed). Then ``A_wk ~ C_wk p(w)`` and each
    topic is a column of ``A`` normalized, with ``p(w)`` the first moment.
    Memory O(V k); passes over the data: those of the eigensolver only
    (warm-started from ``start``, see :func:`positive_eigenspace`).

    Parameters
    ----------
    raw : moments
        Anything with ``n_features``, ``m1`` (word frequencies) and
        ``m2_matmat`` (products with the pair moment ``E2``).
    k : int
        Topics.
    func : str
        The public entry point, named in errors.
    seed : int or numpy.random.Generator
        Seeds the eigensolver's start block.
    floor : float, default 1e-3
        Smallest topic-word probability after projection onto the simplex.
    alpha_sum : float, default 1.0
        Sum of the returned Dirichlet parameters.
    n_candidates : int, optional
        Anchor candidates, the most frequent words (default ``8 k``).
    n_iter : int, default 60
        Most projected-gradient steps of the anchor weights.
    start : ndarray, shape (V, <= k + OVERSAMPLE), optional
        Warm start of the eigensolver (it may have no columns), e.g. the
        ``eigenspace`` of an earlier fit.
    noise_tol : float, default 0
        The warm-started eigensolver's stop at the sampling noise
        (:func:`positive_eigenspace`). The greedy anchor choice can flip
        between near-equivalent words when the eigenvectors move within the
        noise (one-sentence documents, k = 10: matched L1 0.48 between the
        topics of ten updates and of one fit at ``noise_tol`` 0.01-0.1,
        0.008 at 0, the held-out likelihood equal), so it suits fits that
        EM moves afterwards.
    seed_groups : tuple of int arrays, optional
        Seeded topics: group ``i`` holds the columns of the words the user
        gave for topic ``i`` (distinct, in range, disjoint; checked by the
        caller). Topic ``i`` of the result is group ``i``'s: its anchor row
        is fixed by the group (``seed_anchor``), the remaining ``k - len``
        anchors are found by the greedy search, orthogonally to the seeded
        ones, among the frequent words outside every group.
    seed_anchor : {"extreme", "pooled", "harmonic"}, default "harmonic"
        How a group makes its anchor. ``"harmonic"``: the element-wise
        harmonic mean of its words' normalized rows (what the words share:
        "tandem anchors", [3]_; a word that co-occurs with one seed word
        only weighs little). ``"pooled"``: the row-normalized sum of its
        words' pair-moment rows (the co-occurrence row of the group read as
        one word: a convex combination of the topics' rows, the group's
        topic when its words are mostly that topic's). ``"extreme"``: among
        the ``SEED_NEIGHBOURS`` times as many words whose rows point most
        nearly along the pooled row (the seed words included), the one
        farthest in its direction from the anchors already chosen: a word
        of the corpus at a vertex of the hull, as unseeded anchors are (for
        a group of one rare word, often a frequent generic word). Closed by
        the seeded sweeps of ``lda.spectral``, the harmonic anchors match
        the categories of the real corpora of ``benchmarks/bench_seeded.py``
        best of the three across splits, at held-out perplexity within 5%
        of the unseeded fit.

    Returns
    -------
    beta : ndarray, shape (k, V)
        Topics, rows on the simplex.
    alpha : ndarray, shape (k,)
        ``alpha_sum * p(topic)``.
    eigenspace : ndarray, shape (V, min(V, k + OVERSAMPLE))
        The leading Ritz vectors of the eigensolver's space (the top k
        first, by magnitude): the next ``start`` of an online update.
    report : dict
        Diagnostics (anchors, eigenvalues, passes, recovery objective).

    References
    ----------
    .. [1] Arora, Ge, Halpern, Mimno, Moitra, Sontag, Wu, Zhu. "A practical
       algorithm for topic modeling with provable guarantees", ICML 2013.
    .. [2] Lee, Cho, Bindel, Mimno. "Practical correlated topic modeling and
       analysis via the rectified anchor word algorithm", EMNLP 2019 (the
       low-rank anchor step).
    .. [3] Lund, Cook, Seppi, Boyd-Graber. "Tandem anchoring: a multiword
       anchor approach for interactive topic modeling", ACL 2017.
    """
    d = raw.n_features
    rng = as_generator(seed, func)
    U, s, leading, space = positive_eigenspace(raw, k, seed=rng, start=start, noise_tol=noise_tol)
    ritz, ritz_residual, passes = space.ritz, space.residual, space.passes
    del space  # the Krylov basis and its image, (V, up to 4 blocks) each, are freed before the recovery's algebra
    rowsum = U @ (s * U.sum(axis=0))
    valid = rowsum > 0
    X = (U * s) / np.where(valid, rowsum, 1.0)[:, None]
    # Anchor candidates: the most frequent words (rare words have noisy co-occurrence rows and make poor
    # anchors; [1]_ Sec. 5 keeps words above a document-frequency cut-off).
    n_candidates = 8 * k if n_candidates is None else n_candidates
    order = np.argsort(-np.where(valid, raw.m1, -np.inf), kind="stable")
    candidates = np.sort(order[: min(max(n_candidates, k), int(valid.sum()))])
    if seed_groups:  # a seed word anchors its own group's topic, not another one
        candidates = np.setdiff1d(candidates, np.concatenate(seed_groups))
    if candidates.size < k - len(seed_groups):
        raise ValueError(f"{func}: only {candidates.size} words have a positive co-occurrence row; k={k} anchors "
                         "cannot be found. Try a smaller k or more documents.")
    rows, S = _anchor_rows(X, rowsum, valid, candidates, k, seed_groups, seed_anchor, func, U)
    H = X @ rows.T  # Qbar_w . Qbar_s
    G = rows @ rows.T
    G = 0.5 * (G + G.T)
    L = 2.0 * max(np.linalg.eigvalsh(G)[-1], 1e-300)
    backend = getattr(raw, "passes", None)
    if getattr(backend, "recovers_on_device", False):  # where the moments' passes run (a JAX accelerator)
        C, steps = backend.anchor_weights(H, G, L, n_iter, ANCHOR_TOL)
    else:
        C = np.full((d, k), 1.0 / k)
        step = numba_kernel("anchor_weights_step") or anchor_weights_step  # compiled with the [fast] extra
        Y, t = C.copy(), 1.0
        steps = 0
        for steps in range(1, n_iter + 1):  # FISTA on all words at once, until no weight moves by ANCHOR_TOL
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            move = step(Y, Y @ G, H, C, L, (t - 1.0) / t_new)
            t = t_new
            if move < ANCHOR_TOL:
                break
    C[~valid] = 1.0 / k
    A = C * raw.m1[:, None]  # p(topic, word) = p(topic | word) p(word)
    topic_mass = A.sum(axis=0)
    beta, _ = project_to_simplex((A / np.maximum(topic_mass, 1e-300)).T, floor)
    weights = topic_mass / topic_mass.sum()
    residual = np.sum(C * (C @ G), axis=1) - 2 * np.sum(C * H, axis=1)
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
        "m2_ritz_residual": ritz_residual,
        "m2_passes": passes,
        "k_supported": supported_k(ritz),
        "alpha_sum": float(alpha_sum),
    }
    if seed_groups:  # the corpus read as one word: the rows weighted by their sums
        corpus = (rowsum[valid] / rowsum[valid].sum()) @ X[valid]
        report.update(seed_report(beta, weights, C, rows, corpus, raw.m1, seed_groups, seed_anchor))
    if hasattr(raw, "n_documents"):
        report.update(n_documents=raw.n_documents, n_dropped=raw.n_dropped)
    return beta, alpha_sum * weights, leading, report


def _anchor_rows(X: np.ndarray, rowsum: np.ndarray, valid: np.ndarray, candidates: np.ndarray, k: int,
                 seed_groups: tuple, seed_anchor: str, func: str, U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k anchor rows of the embedding: the seeded groups' first, then the greedy farthest-point search.

    Returns the rows (k, width) and the anchor words (k,), ``-1`` for a pooled group's row.
    """
    rows, words, basis = [], [], []
    R = X[candidates]
    Z = R  # the candidates' rows minus the first anchor's, orthogonal to the anchors' differences (modified G-S)

    def orthogonal(rows_in):
        out = rows_in - rows[0] if rows else rows_in.copy()
        for b in basis:
            out -= np.outer(out @ b, b)
        return out

    def add(row, word, residual=None):
        nonlocal Z
        if rows:
            b = orthogonal(row[None, :])[0] if residual is None else residual
            norm = np.linalg.norm(b)
            if norm > 0:
                b = b / norm
                basis.append(b)
                Z = Z - np.outer(Z @ b, b)
        else:
            Z = R - row
        rows.append(row)
        words.append(word)

    for i, group in enumerate(seed_groups):
        usable = group[valid[group]]
        if usable.size == 0:
            raise ValueError(f"{func}: none of the words of seed group {i} co-occurs with another word in the "
                             "documents; the group cannot anchor a topic. Give words that occur in the corpus.")
        # the group read as one word: its normalized co-occurrence row is its words' rows weighted by their sums
        pooled = (rowsum[usable] / rowsum[usable].sum()) @ X[usable]
        if seed_anchor == "pooled":
            add(pooled, -1)
        elif seed_anchor == "harmonic":  # the words' rows (V wide) combined by their element-wise harmonic mean
            Q = X[usable] @ U.T
            Q = np.maximum(Q, 1e-12 * np.abs(Q).max())
            combined = usable.size / np.sum(1.0 / Q, axis=0)
            add((combined / combined.sum()) @ U, -1)
        else:  # "extreme": among the group's nearest words, the one farthest in the pooled row's direction
            pool = np.union1d(candidates, usable)
            unit = X[pool] / np.maximum(np.linalg.norm(X[pool], axis=1, keepdims=True), 1e-300)
            pool = pool[np.argsort(-(unit @ pooled), kind="stable")[: SEED_NEIGHBOURS * usable.size]]
            centre = rows[0] if rows else R.mean(axis=0)
            direction = orthogonal(pooled[None, :])[0] if rows else pooled - centre
            residual = orthogonal(X[pool]) if rows else X[pool] - centre
            best = int(np.argmax(residual @ direction))
            add(X[pool[best]], int(pool[best]), residual[best] if rows else None)
    for _ in range(k - len(rows)):
        norms = np.einsum("ij,ij->i", Z, Z)
        nxt = int(np.argmax(norms))
        add(R[nxt], int(candidates[nxt]), Z[nxt] if rows else None)
    return np.asarray(rows), np.asarray(words, dtype=np.int64)


def seed_report(beta: np.ndarray, weights: np.ndarray, C: np.ndarray, rows: np.ndarray, corpus: np.ndarray,
                m1: np.ndarray, seed_groups: tuple, seed_anchor: str) -> dict:
    """How strongly the data support each seeded topic (the ``seed/*`` diagnostics).

    ``seed/topic_weight``: the topic's probability; ``seed/seed_mass``: the
    share of the topic's mass on its seed words; ``seed/support``: the share
    of the seed words' occurrences that the topic explains (``sum_w C_wi
    p(w) / sum_w p(w)``, ``C_wi = p(topic i | w)``); ``seed/similarity``: for each
    group the largest cosine between its anchor row and another group's
    (1: two groups name one topic); ``seed/generality``: the cosine between
    its anchor row and the corpus' average row (1: the group co-occurs with
    every word as the corpus does, as words that every topic uses do: it
    names no topic).

    Parameters
    ----------
    beta : ndarray, shape (k, V)
        Topics, seeded ones first.
    weights : ndarray, shape (k,)
        Topic probabilities.
    C : ndarray, shape (V, k)
        ``p(topic | word)`` of the anchor recovery.
    rows : ndarray, shape (k, width)
        The anchor rows of the embedding (for ``seed/similarity``).
    corpus : ndarray, shape (width,)
        The average row of the embedding, weighted by the rows' sums (for
        ``seed/generality``).
    m1 : ndarray, shape (V,)
        Word frequencies.
    seed_groups : tuple of int arrays
        Each group's columns.
    seed_anchor : str
        How the groups made their anchors (reported).

    Returns
    -------
    dict
        The ``seed/*`` diagnostics.
    """
    g = len(seed_groups)
    support = np.array([C[group, i] @ m1[group] / max(m1[group].sum(), 1e-300) for i, group in enumerate(seed_groups)])
    report = {"seed/groups": g, "seed/anchor": seed_anchor, "seed/topic_weight": weights[:g].copy(),
              "seed/seed_mass": np.array([beta[i, group].sum() for i, group in enumerate(seed_groups)]),
              "seed/support": support}
    unit = rows[:g] / np.maximum(np.linalg.norm(rows[:g], axis=1, keepdims=True), 1e-300)
    cosine = unit @ unit.T
    np.fill_diagonal(cosine, -np.inf)
    report["seed/similarity"] = cosine.max(axis=1) if g > 1 else np.zeros(g)
    report["seed/generality"] = unit @ (corpus / max(np.linalg.norm(corpus), 1e-300))
    return report
