"""Document-word counts for the NumPyro topic models, and their collapsed log-likelihoods.

A corpus (or a minibatch of its rows) is passed to ``lda.model`` and
``single_topic.model`` as :class:`DocumentCounts`: the nonzero entries in
coordinate form (``doc``, ``word``, ``count``, each of length nnz, padded
with zero counts) plus the document lengths. Everything the model traces is
O(nnz * k), never O(N * V): the per-document log-likelihood is a segment
sum over the nonzeros,

.. math::

    \\log p(c_d \\mid \\theta_d, \\beta) = \\log \\frac{n_d!}{\\prod_w c_{dw}!}
        + \\sum_{w: c_{dw} > 0} c_{dw} \\log (\\theta_d^T \\beta_{:, w}),

(the multinomial of the per-word topic mixture, per-word topics summed
out; [1]_ Sec. 2), and for the single-topic model
``logsumexp_i(log w_i + sum_w c_dw log beta_iw)`` plus the same coefficient.

Numerics: the contractions use ``precision=jax.lax.Precision.HIGHEST`` (no
TF32 on GPUs), probabilities are floored at the smallest normal float before
the log, and no V-vector is checked against the simplex, so the densities
are finite in float32 at any V.

:class:`DocumentCounts` is a JAX pytree: a minibatch can be an argument of a
jitted step. ``num_documents`` (the corpus size a minibatch is drawn from)
scales the document-level log densities by ``num_documents / n_docs``.

References
----------
.. [1] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 2
   (the multinomial likelihood of a document given its topic mixture).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
import scipy.sparse as sp
from jax.scipy.special import digamma, gammaln, logsumexp

from specinit._validation import bad_argument, check_count_matrix

if TYPE_CHECKING:
    from jax.typing import ArrayLike
    from numpy.typing import DTypeLike

__all__ = ["DocumentCounts", "DenseTopicCounts", "POINTWISE_BUDGET", "as_document_counts", "from_csr",
           "lda_augmented_step", "mixture_augmented_step", "lda_loglik", "lda_marginal_loglik_draws",
           "lda_marginal_loglik", "mixture_loglik", "topic_components", "HIGHEST"]

HIGHEST = jax.lax.Precision.HIGHEST


@jax.tree_util.register_pytree_node_class
class DocumentCounts:
    """Nonzero counts of ``n_docs`` documents in coordinate form (a JAX pytree).

    Parameters
    ----------
    doc : array of int, shape (nnz,)
        Row of each entry within this batch (``0 <= doc < n_docs``).
    word : array of int, shape (nnz,)
        Vocabulary index of each entry.
    count : array of float, shape (nnz,)
        The counts; padding entries have count 0 (they add nothing).
    lengths : array of float, shape (n_docs,)
        Document lengths ``n_d`` (sums of the counts of each row).
    vocab_size : int
        V.
    num_documents : int
        Size of the corpus the rows are drawn from (``n_docs`` for a full
        corpus); document-level log densities are scaled by
        ``num_documents / n_docs``.
    """

    def __init__(self, doc: ArrayLike, word: ArrayLike, count: ArrayLike, lengths: ArrayLike, vocab_size: int,
                 num_documents: int) -> None:
        self.doc, self.word, self.count, self.lengths = doc, word, count, lengths
        self.vocab_size, self.num_documents = int(vocab_size), int(num_documents)

    @property
    def n_docs(self) -> int:
        """Number of documents (rows) held."""
        return int(np.shape(self.lengths)[0])

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_docs, vocab_size)``, as for a count matrix."""
        return (self.n_docs, self.vocab_size)

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any, Any], tuple[int, int]]:
        return (self.doc, self.word, self.count, self.lengths), (self.vocab_size, self.num_documents)

    @classmethod
    def tree_unflatten(cls, aux: tuple[int, int], children: Sequence[Any]) -> DocumentCounts:
        return cls(*children, *aux)

    def __repr__(self) -> str:
        return f"DocumentCounts(n_docs={self.n_docs}, vocab_size={self.vocab_size}, nnz={np.shape(self.count)[0]}, num_documents={self.num_documents})"


def _bucket(nnz: int) -> int:
    """Round ``nnz`` up to 3 significant bits (at most 12.5% padding, few distinct shapes to compile)."""
    if nnz <= 64:
        return 64
    step = 1 << max(int(nnz - 1).bit_length() - 3, 0)
    return -(-nnz // step) * step


def from_csr(matrix: sp.csr_matrix, *, num_documents: int | None = None, pad: int = 0,
             dtype: DTypeLike | None = None) -> DocumentCounts:
    """:class:`DocumentCounts` (NumPy arrays) of a canonical CSR matrix, zero-padded to at least ``pad`` entries.

    Parameters
    ----------
    matrix : scipy.sparse.csr_matrix
        Validated counts.
    num_documents : int, optional
        Size of the corpus the rows are drawn from (default: the rows).
    pad : int
        Smallest number of (zero-padded) entries.
    dtype : dtype, optional
        Of the counts and lengths (default: JAX's default float).

    Returns
    -------
    DocumentCounts
    """
    nnz = matrix.nnz
    size = max(nnz, int(pad))
    dtype = jnp.result_type(float) if dtype is None else dtype
    doc = np.zeros(size, np.int32)
    word = np.zeros(size, np.int32)
    count = np.zeros(size, dtype)
    doc[:nnz] = np.repeat(np.arange(matrix.shape[0], dtype=np.int32), np.diff(matrix.indptr))
    word[:nnz] = matrix.indices
    count[:nnz] = matrix.data
    lengths = np.asarray(matrix.sum(axis=1), dtype=dtype).ravel()
    return DocumentCounts(doc, word, count, lengths, matrix.shape[1],
                          matrix.shape[0] if num_documents is None else num_documents)


def as_document_counts(counts: sp.sparray | sp.spmatrix | DocumentCounts, func: str,
                       vocab_size: int | None = None) -> DocumentCounts:
    """Validate sparse counts (scipy.sparse or :class:`DocumentCounts`) for a model.

    Parameters
    ----------
    counts : scipy.sparse matrix or DocumentCounts
    func : str
        The public function named in errors.
    vocab_size : int, optional
        Required V.

    Returns
    -------
    DocumentCounts
        With JAX arrays.

    Raises
    ------
    TypeError
        Not a 2-D numeric sparse matrix or :class:`DocumentCounts`.
    ValueError
        Negative, non-integer or non-finite counts; a vocabulary size
        different from ``vocab_size``.
    """
    if isinstance(counts, DocumentCounts):
        out = counts
    elif sp.issparse(counts):
        if len(counts.shape) != 2:
            raise bad_argument("counts", func, "a two-dimensional (documents x vocabulary) sparse matrix", counts)
        out = from_csr(check_count_matrix(counts, "counts", func))
    else:
        raise bad_argument("counts", func, "a scipy.sparse matrix or DocumentCounts", counts, kind=TypeError)
    if vocab_size is not None and out.vocab_size != vocab_size:
        raise bad_argument("counts", func, f"counts over the vocabulary of size V={vocab_size}", f"V={out.vocab_size}",
                           describe=False)
    return jax.tree_util.tree_map(jnp.asarray, out)


def _log_coefficient(data: DocumentCounts):
    """``log n_d! - sum_w log c_dw!`` per document (padding entries have c = 0, log 0! = 0)."""
    n_docs = data.lengths.shape[0]
    return gammaln(data.lengths + 1.0) - jax.ops.segment_sum(gammaln(data.count + 1.0), data.doc, num_segments=n_docs)


def lda_loglik(theta: ArrayLike, beta: ArrayLike, data: DocumentCounts) -> jax.Array:
    """Per-document collapsed LDA log-likelihood ``log p(c_d | theta_d, beta)``, shape (n_docs,).

    Parameters
    ----------
    theta : array, shape (n_docs, k)
    beta : array, shape (k, V)
    data : DocumentCounts

    Returns
    -------
    array, shape (n_docs,)
    """
    # sum_k theta[d, k] beta[k, w] for every nonzero (d, w): gathers of (nnz, k), one HIGHEST-precision row dot.
    mix = jnp.einsum("nk,nk->n", theta[data.doc], beta.T[data.word], precision=HIGHEST)
    logp = jnp.log(jnp.maximum(mix, jnp.finfo(mix.dtype).tiny))
    n_docs = data.lengths.shape[0]
    return _log_coefficient(data) + jax.ops.segment_sum(data.count * logp, data.doc, num_segments=n_docs)


#: Share of the importance-sampling particles of :func:`lda_marginal_loglik` drawn from the prior (the defensive
#: component of the proposal).
PRIOR_SHARE = 0.125

#: Concentration scale of the fitted component of the proposal (below 1: wider than the fold-in Dirichlet).
WIDEN = 0.5

#: Fixed-point iterations of the fold-in that fits the proposal.
FOLD_IN_STEPS = 20


def _log_dirichlet(log_theta, concentration):
    """``log Dirichlet(theta | concentration)`` from ``log theta`` (finite where ``theta`` underflows)."""
    return (gammaln(jnp.sum(concentration, axis=-1)) - jnp.sum(gammaln(concentration), axis=-1)
            + jnp.sum((concentration - 1.0) * log_theta, axis=-1))


def _fold_in(alpha, beta, log_beta, counts, lengths, steps: int):
    """Variational Dirichlet ``gamma_d`` of every document's ``theta_d`` given ``alpha`` and ``beta``, shape (n_docs, k).

    The fixed point of ``gamma_d = alpha + sum_w c_dw phi_dw`` with
    ``phi_dwk`` proportional to ``beta_kw exp(digamma(gamma_dk))`` (Blei, Ng,
    Jordan 2003, Sec. 5.2), ``steps`` iterations from ``alpha + n_d / k``.
    """
    n_docs, k = lengths.shape[0], alpha.shape[0]
    gamma = alpha + lengths[:, None] / k
    if isinstance(counts, DocumentCounts):
        log_beta_nz = log_beta.T[counts.word]

        def step(_, gamma):
            phi = jax.nn.softmax(log_beta_nz + digamma(gamma)[counts.doc], axis=-1)
            return alpha + jax.ops.segment_sum(counts.count[:, None] * phi, counts.doc, num_segments=n_docs)
    else:
        tiny = jnp.finfo(beta.dtype).tiny

        def step(_, gamma):
            psi = digamma(gamma)
            weight = jnp.exp(psi - jnp.max(psi, axis=-1, keepdims=True))
            norm = jnp.maximum(jnp.matmul(weight, beta, precision=HIGHEST), tiny)
            return alpha + weight * jnp.matmul(counts / norm, beta.T, precision=HIGHEST)

    return jax.lax.fori_loop(0, steps, step, gamma)


def _particle_loglik(log_theta, beta, counts):
    """``sum_w c_dw log(theta_db @ beta[:, w])`` for particles ``log_theta`` (n_docs, B, k), shape (n_docs, B)."""
    theta = jnp.exp(log_theta)
    tiny = jnp.finfo(beta.dtype).tiny
    if isinstance(counts, DocumentCounts):
        mix = jnp.einsum("nbk,nk->nb", theta[counts.doc], beta.T[counts.word], precision=HIGHEST)
        return jax.ops.segment_sum(counts.count[:, None] * jnp.log(jnp.maximum(mix, tiny)), counts.doc,
                                   num_segments=theta.shape[0])
    mix = jnp.einsum("nbk,kv->nbv", theta, beta, precision=HIGHEST)
    return jnp.sum(counts[:, None, :] * jnp.log(jnp.maximum(mix, tiny)), axis=-1)


def lda_marginal_loglik(key: jax.Array, alpha: ArrayLike, beta: ArrayLike, counts: DocumentCounts | ArrayLike,
                        num_particles: int, *, block: int | None = None, prior_share: float = PRIOR_SHARE,
                        widen: float = WIDEN, fold_in_steps: int = FOLD_IN_STEPS) -> jax.Array:
    """Per-document LDA log-likelihood with ``theta`` integrated out, by importance sampling; shape (n_docs,).

    .. math::

        \\log p(c_d \\mid \\alpha, \\beta) = \\log \\int
            \\mathrm{Mult}(c_d \\mid n_d, \\theta^T \\beta)\\,
            \\mathrm{Dir}(\\theta \\mid \\alpha)\\, d\\theta
        \\approx \\log \\frac{1}{S} \\sum_{s=1}^S
            \\frac{\\mathrm{Mult}(c_d \\mid n_d, \\theta_s^T \\beta)\\,
                  \\mathrm{Dir}(\\theta_s \\mid \\alpha)}{q_d(\\theta_s)},

    with the multinomial coefficient included (as in :func:`lda_loglik`).
    The proposal of document ``d`` is the defensive mixture
    ``q_d = (1 - eps) Dir(widen * gamma_d) + eps Dir(alpha)``: ``gamma_d``
    is the variational Dirichlet of the fixed-topic fold-in ([1]_ Sec. 5.2,
    ``fold_in_steps`` iterations), widened because it is narrower than the
    posterior; the prior component bounds every weight by
    ``Mult(c_d | theta_s^T beta) / eps``, so the weights have finite
    variance (a Dirichlet proposal alone does not, wherever
    ``gamma_dk > 2 alpha_k``). The ``S`` particles are split
    deterministically, ``ceil(prior_share * S)`` from the prior and the
    rest from the fitted component, with ``eps`` their exact share (the
    deterministic-mixture estimator, unbiased for the integral). The
    estimate is the log of an unbiased estimate, so it is biased low by
    about ``Var(w) / (2 S E[w]^2)``, and consistent as ``S`` grows ([2]_).

    Particles are sampled in log space (``jax.random.loggamma``), so
    proportions below the smallest float keep finite densities; every
    contraction uses HIGHEST precision. Cost: ``O(fold_in_steps * nnz * k +
    S * nnz * k)`` for sparse counts (``O(S * N * V * k)`` dense); memory
    ``O(block * nnz * k)`` (``O(block * N * V)`` dense), particles taken
    ``block`` at a time.

    Parameters
    ----------
    key : jax.random.PRNGKey
        Randomness of the particles.
    alpha : array, shape (k,)
        Dirichlet parameter of the topic proportions.
    beta : array, shape (k, V)
        Topics.
    counts : DocumentCounts, or a dense (n_docs, V) array
        The documents.
    num_particles : int
        S, particles per document.
    block : int, optional
        Particles evaluated at once (default: all ``S``).
    prior_share : float
        Share of the particles drawn from ``Dir(alpha)`` (0 to 1).
    widen : float
        Scale of the fitted Dirichlet's concentration (0 to 1: wider).
    fold_in_steps : int
        Fixed-point iterations of the fold-in.

    Returns
    -------
    array, shape (n_docs,)

    References
    ----------
    .. [1] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, Sec. 5.2.
    .. [2] Wallach, Murray, Salakhutdinov, Mimno. "Evaluation methods for
       topic models", ICML 2009, Sec. 4.1 (importance sampling of
       ``p(c_d | alpha, beta)``).
    """
    dtype = beta.dtype
    if isinstance(counts, DocumentCounts):
        lengths, coefficient = counts.lengths, _log_coefficient(counts)
    else:
        counts = jnp.asarray(counts, dtype)
        lengths = jnp.sum(counts, axis=-1)
        coefficient = gammaln(lengths + 1.0) - jnp.sum(gammaln(counts + 1.0), axis=-1)
    n_docs = lengths.shape[0]
    n_prior = min(int(np.ceil(prior_share * num_particles)), num_particles)
    eps = n_prior / num_particles
    log_beta = jnp.log(jnp.maximum(beta, jnp.finfo(dtype).tiny))
    fitted = widen * _fold_in(alpha, beta, log_beta, counts, lengths.astype(dtype), fold_in_steps)
    block = num_particles if block is None else max(1, min(int(block), num_particles))
    n_blocks = -(-num_particles // block)

    def body(total, b):
        index = b * block + jnp.arange(block)
        concentration = jnp.where((index < n_prior)[None, :, None], alpha, fitted[:, None, :])
        log_gamma = jax.random.loggamma(jax.random.fold_in(key, b), concentration, dtype=dtype)
        log_theta = log_gamma - logsumexp(log_gamma, axis=-1, keepdims=True)
        log_prior = _log_dirichlet(log_theta, alpha)
        if n_prior == num_particles:
            log_q = log_prior
        elif n_prior == 0:
            log_q = _log_dirichlet(log_theta, fitted[:, None, :])
        else:
            log_q = jnp.logaddexp(np.log1p(-eps) + _log_dirichlet(log_theta, fitted[:, None, :]),
                                  np.log(eps) + log_prior)
        log_w = _particle_loglik(log_theta, beta, counts) + log_prior - log_q
        log_w = jnp.where(index < num_particles, log_w, -jnp.inf)
        return jnp.logaddexp(total, logsumexp(log_w, axis=-1)), None

    total, _ = jax.lax.scan(body, jnp.full(n_docs, -jnp.inf, dtype), jnp.arange(n_blocks))
    return coefficient + total - np.log(num_particles)


#: Floats in the largest intermediate of one step of :func:`lda_marginal_loglik_draws` (64 MiB in float32).
POINTWISE_BUDGET = 2**24


def lda_marginal_loglik_draws(seed: int, alpha: np.ndarray, beta: np.ndarray, counts: DocumentCounts | np.ndarray,
                              num_particles: int) -> np.ndarray:
    """:func:`lda_marginal_loglik` of every posterior draw, in blocks within :data:`POINTWISE_BUDGET` floats.

    Parameters
    ----------
    seed : int
        Each draw gets its own stream of particles.
    alpha : ndarray, shape (n_draws, k)
    beta : ndarray, shape (n_draws, k, V)
        Its dtype is the computation's (float64 draws are computed in JAX's default float).
    counts : DocumentCounts or ndarray, shape (n_docs, V)
    num_particles : int

    Returns
    -------
    ndarray, shape (n_draws, n_docs)
        float64.
    """
    k = alpha.shape[1]
    dtype = jnp.result_type(float) if beta.dtype == np.float64 else beta.dtype
    if isinstance(counts, DocumentCounts):
        per_particle = int(np.shape(counts.count)[0]) * (k + 1)
    else:
        counts = jnp.asarray(counts, dtype)
        per_particle = counts.shape[0] * (counts.shape[1] + k)
    block = max(1, min(num_particles, POINTWISE_BUDGET // max(per_particle, 1)))
    n_draws = alpha.shape[0]
    batch = max(1, min(n_draws, POINTWISE_BUDGET // max(per_particle * block, 1)))
    keys = jax.random.split(jax.random.PRNGKey(seed), max(n_draws, 1))[:n_draws]
    values = _marginal_draws(keys, jnp.asarray(alpha, dtype), jnp.asarray(beta, dtype), counts,
                             num_particles=num_particles, block=block, batch=batch)
    return np.asarray(values, dtype=np.float64)


@functools.partial(jax.jit, static_argnames=("num_particles", "block", "batch"))
def _marginal_draws(keys, alpha, beta, counts, *, num_particles, block, batch):
    return jax.lax.map(lambda args: lda_marginal_loglik(*args, counts, num_particles, block=block),
                       (keys, alpha, beta), batch_size=batch)


def _dirichlet_draw(key, concentration):
    """``Dirichlet(concentration)`` along the last axis, drawn in log space and floored at the smallest normal float.

    ``log G`` of Gamma variables (exact for small shapes, where ``G`` itself
    underflows in float32), normalised by a log-sum-exp; only the final
    ``exp`` is floored, so every value is > 0 and the model's log density stays
    finite.
    """
    log_gamma = jax.random.loggamma(key, concentration)
    log_p = log_gamma - logsumexp(log_gamma, axis=-1, keepdims=True)
    return jnp.maximum(jnp.exp(log_p), jnp.finfo(log_p.dtype).tiny)


def _gumbel(key, shape):
    """Standard Gumbel variables ``-log E``, ``E = -log(1 - u) ~ Exponential(1)``, ``u`` from 32 random bits.

    ``jax.random.gumbel`` draws ``u`` as a multiple of 2**-23, so its
    Gumbels never exceed ~16.6 and a category whose probability is below
    ~1e-7 times the largest is never chosen; ``u = (bits + 1/2) 2**-32`` gives
    ``E`` down to ~1e-10 (Gumbels up to ~22.9: probabilities down to ~1e-10
    are drawn at their rate). ``u`` is capped below 1 (``E`` at ~16.6).
    """
    bits = jax.random.bits(key, shape, jnp.uint32)
    uniform = jnp.minimum((bits.astype(jnp.float32) + 0.5) * 2.0 ** -32, 1.0 - 2.0 ** -24)
    return -jnp.log(-jnp.log1p(-uniform))


def _topic_counts(key, theta, beta, token_doc, token_word):
    """Per-token topics drawn from their conditional, summed: ``n_dk`` (N, k) and ``n_kw`` (k, V), int32.

    Token ``t`` of word ``w`` in document ``d`` has topic ``i`` with
    probability proportional to ``theta_di beta_iw``: the Gumbel-max trick on
    the log probabilities (no product is formed, so none underflows), so the
    counts ``c_dw`` are split over the topics multinomially.
    """
    (n_docs, k), vocab_size = theta.shape, beta.shape[1]
    logits = jnp.log(theta)[token_doc] + jnp.log(beta).T[token_word]
    topic = jnp.argmax(logits + _gumbel(key, logits.shape), axis=-1).astype(jnp.int32)
    n_dk = jnp.bincount(token_doc * k + topic, length=n_docs * k).reshape(n_docs, k)
    n_kw = jnp.bincount(topic * vocab_size + token_word, length=k * vocab_size).reshape(k, vocab_size)
    return n_dk, n_kw


def lda_augmented_step(key: jax.Array, alpha: ArrayLike, beta: ArrayLike, theta: ArrayLike, token_doc: ArrayLike,
                       token_word: ArrayLike, eta: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """One data-augmentation update of ``(beta, theta)`` given ``alpha``: topics of the tokens, then both Dirichlets.

    The Gibbs block of :func:`specinit.models.lda.kernel`: every token gets a topic from its conditional given
    ``theta`` and ``beta``; then ``beta_i ~ Dirichlet(eta + n_i.)`` and ``theta_d ~ Dirichlet(alpha + n_d.)`` from
    the resulting counts (:func:`_topic_counts`, :func:`_dirichlet_draw`).

    Parameters
    ----------
    key : jax.random.PRNGKey
    alpha : array, shape (k,) or (N, k)
        Dirichlet concentration of each document's topic proportions.
    beta : array, shape (k, V)
    theta : array, shape (N, k)
    token_doc, token_word : int32 array, shape (T,)
        The document and the word of every token.
    eta : float or array, shape (k, V)
        Dirichlet concentration of each topic.

    Returns
    -------
    beta, theta : arrays
        The new draws (same shapes and dtypes).
    """
    key_split, key_beta, key_theta = jax.random.split(key, 3)
    n_dk, n_kw = _topic_counts(key_split, theta, beta, token_doc, token_word)
    beta = _dirichlet_draw(key_beta, eta + n_kw.astype(beta.dtype))
    theta = _dirichlet_draw(key_theta, alpha + n_dk.astype(theta.dtype))
    return beta, theta


def mixture_augmented_step(key: jax.Array, weights_concentration: ArrayLike, eta: ArrayLike, weights: ArrayLike,
                           beta: ArrayLike, counts: ArrayLike) -> tuple[jax.Array, jax.Array]:
    """One data-augmentation update of a mixture of multinomials: each row's component, then both Dirichlets.

    Row ``n`` gets component ``i`` with probability proportional to
    ``weights_i Mult(c_n | beta_i)`` (Gumbel-max on the log probabilities, so
    nothing underflows); then ``weights ~ Dirichlet(a + m)`` with ``m_i`` the
    rows given component ``i`` and ``beta_i ~ Dirichlet(eta_i + sum of their
    counts)``. The update leaves ``p(weights, beta | counts)`` invariant.

    Parameters
    ----------
    key : jax.random.PRNGKey
    weights_concentration : array, shape (k,)
        Dirichlet concentration ``a`` of the weights.
    eta : float or array, shape (k, V)
        Dirichlet concentration of each component.
    weights : array, shape (k,)
    beta : array, shape (k, V)
    counts : array, shape (N, V)
        Counts per row (one-hot rows for one categorical symbol per row).

    Returns
    -------
    weights, beta : arrays
        The new draws (same shapes and dtypes).
    """
    key_rows, key_weights, key_beta = jax.random.split(key, 3)
    counts = jnp.asarray(counts, dtype=beta.dtype)
    logits = jnp.log(weights) + topic_components(beta, counts)
    component = jnp.argmax(logits + _gumbel(key_rows, logits.shape), axis=-1)
    members = jax.nn.one_hot(component, beta.shape[0], dtype=beta.dtype)
    n_kw = jnp.matmul(members.T, counts, precision=HIGHEST)
    weights = _dirichlet_draw(key_weights, weights_concentration + jnp.sum(members, axis=0))
    beta = _dirichlet_draw(key_beta, eta + n_kw)
    return weights, beta


@jax.jit
def topic_components(beta: ArrayLike, counts: DocumentCounts | ArrayLike) -> jax.Array:
    """``log Multinomial(c_d | n_d, beta_i)`` for every document and topic, shape (n_docs, k).

    Parameters
    ----------
    beta : array, shape (k, V)
    counts : DocumentCounts, or a dense (n_docs, V) array

    Returns
    -------
    array, shape (n_docs, k)
    """
    log_beta = jnp.log(jnp.maximum(beta, jnp.finfo(beta.dtype).tiny))
    if isinstance(counts, DocumentCounts):
        n_docs = counts.lengths.shape[0]
        per_topic = jax.ops.segment_sum(counts.count[:, None] * log_beta.T[counts.word], counts.doc,
                                        num_segments=n_docs)
        return _log_coefficient(counts)[:, None] + per_topic
    counts = jnp.asarray(counts)
    norm = gammaln(jnp.sum(counts, axis=-1) + 1.0) - jnp.sum(gammaln(counts + 1.0), axis=-1)
    return norm[..., None] + jnp.matmul(counts, log_beta.T, precision=HIGHEST)


def mixture_loglik(weights: ArrayLike, beta: ArrayLike, data: DocumentCounts) -> jax.Array:
    """Per-document single-topic log-likelihood with the topic summed out, shape (n_docs,).

    Parameters
    ----------
    weights : array, shape (k,)
    beta : array, shape (k, V)
    data : DocumentCounts

    Returns
    -------
    array, shape (n_docs,)
    """
    log_weights = jnp.log(jnp.maximum(weights, jnp.finfo(beta.dtype).tiny))
    return logsumexp(topic_components(beta, data) + log_weights, axis=-1)


class DenseTopicCounts(dist.Distribution):
    """Counts of documents given per-document word probabilities ``theta @ beta`` (log-prob only).

    The multinomial evaluated in log space with a HIGHEST-precision
    contraction and no simplex validation of the V-vector (which fails in
    float32 at large V). Batch shape ``(n_docs,)``, event shape ``(V,)``.

    Parameters
    ----------
    theta : array, shape (n_docs, k)
        Topic proportions.
    beta : array, shape (k, V)
        Topics.
    total_count : array, shape (n_docs,)
        Document lengths.
    """

    support = dist.constraints.independent(dist.constraints.nonnegative_integer, 1)

    def __init__(self, theta: ArrayLike, beta: jax.Array, total_count: ArrayLike) -> None:
        self.theta, self.beta, self.total_count = theta, beta, total_count
        super().__init__(batch_shape=jnp.shape(total_count), event_shape=beta.shape[-1:])

    def log_prob(self, value: ArrayLike) -> jax.Array:
        mix = jnp.matmul(self.theta, self.beta, precision=HIGHEST)
        logp = jnp.log(jnp.maximum(mix, jnp.finfo(mix.dtype).tiny))
        norm = gammaln(self.total_count + 1.0) - jnp.sum(gammaln(value + 1.0), axis=-1)
        return norm + jnp.sum(value * logp, axis=-1)


class ModelData:
    """The observed-data argument of a topic model, normalised once per trace.

    Exactly one of ``dense`` (an (N, V) array), ``sparse``
    (:class:`DocumentCounts`) or neither (generation) is set; ``scale`` is
    ``num_documents / n_docs`` for a minibatch of a larger corpus.
    """

    def __init__(self, counts, func: str, vocab_size, doc_lengths, subsample_size):
        self.dense = self.sparse = None
        self.scale = 1.0
        if counts is None:
            if vocab_size is None or doc_lengths is None:
                raise bad_argument("vocab_size", func, "given (with doc_lengths) when counts is None, to generate data",
                                   vocab_size)
            self.vocab_size, self.lengths = int(vocab_size), jnp.asarray(doc_lengths)
            self.max_length = int(np.max(doc_lengths))
        elif isinstance(counts, DocumentCounts) or sp.issparse(counts):
            if subsample_size is not None:
                raise bad_argument(
                    "subsample_size", func, "None for sparse counts (feed minibatches of rows as DocumentCounts with "
                    "num_documents set, as lda.svi / single_topic.svi do)", subsample_size)
            self.sparse = as_document_counts(counts, func, vocab_size)
            self.vocab_size, self.lengths = self.sparse.vocab_size, self.sparse.lengths
            if self.sparse.num_documents != self.sparse.n_docs:
                self.scale = self.sparse.num_documents / self.sparse.n_docs
        else:
            if isinstance(counts, (str, bytes)) or not hasattr(counts, "shape") and not isinstance(counts, (list, tuple)):
                raise bad_argument("counts", func, "an (N, V) array, a scipy.sparse matrix or DocumentCounts", counts,
                                   kind=TypeError)
            self.dense = jnp.asarray(counts)
            if self.dense.ndim != 2:
                raise bad_argument("counts", func, "two-dimensional (documents x vocabulary)",
                                   f"shape {self.dense.shape}", describe=False)
            if vocab_size is not None and self.dense.shape[1] != vocab_size:
                raise bad_argument("counts", func, f"counts over the vocabulary of size V={vocab_size}",
                                   f"V={self.dense.shape[1]}", describe=False)
            self.vocab_size, self.lengths = self.dense.shape[1], jnp.sum(self.dense, axis=-1)

    @property
    def n_docs(self) -> int:
        return int(self.lengths.shape[0])
