"""Minibatch SVI for the sparse topic models, with closed-form local updates (online-VB style).

The guide is a NumPyro guide (a function of the model's arguments with
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
epoch), converted to :class:`~specinit.models._sparse_counts.DocumentCounts`
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

import time
from dataclasses import dataclass, field
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.scipy.special import digamma
from numpyro.distributions import constraints
from numpyro.distributions.transforms import ExpTransform, Transform
from numpyro.infer import SVI, Trace_ELBO
from specinit.models._sparse_counts import (
    HIGHEST,
    DocumentCounts,
    ModelData,
    _bucket,
    from_csr,
)

from specinit._validation import (
    bad_argument,
    check_choice,
    check_count_matrix,
    check_int,
    check_positive,
)

__all__ = ["TopicSVIResult", "ALRSoftmaxTransform", "document_topics", "lda_guide", "single_topic_guide", "run_svi",
           "initial_unconstrained"]


class ALRSoftmaxTransform(Transform):
    """``x (..., V-1) -> softmax([x, 0]) (..., V)``: additive log-ratio coordinates of the simplex.

    A bijection from R^(V-1) onto the open simplex with
    ``log|det J| = sum_{w=1}^{V} log p_w`` (computed from ``x`` by
    ``log_softmax``, so it is exact in float32 even where ``p`` underflows).
    Outputs are floored at the smallest normal float.
    """

    domain = constraints.real_vector
    codomain = constraints.simplex

    @staticmethod
    def _extend(x):
        return jnp.concatenate([x, jnp.zeros(x.shape[:-1] + (1,), x.dtype)], axis=-1)

    def __call__(self, x):
        return jnp.maximum(jax.nn.softmax(self._extend(x), axis=-1), jnp.finfo(x.dtype).tiny)

    def _inverse(self, y):
        log_y = jnp.log(y)
        return log_y[..., :-1] - log_y[..., -1:]

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        return jnp.sum(jax.nn.log_softmax(self._extend(x), axis=-1), axis=-1)

    def forward_shape(self, shape):
        return shape[:-1] + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        return shape[:-1] + (shape[-1] - 1,)

    def tree_flatten(self):
        return (), ((), {})

    def __eq__(self, other):
        return isinstance(other, ALRSoftmaxTransform)


_ALR = ALRSoftmaxTransform()
_TRANSFORMS = {"alpha": ExpTransform(), "beta": _ALR, "weights": _ALR}


def _point(name: str, init, transform):
    """A global point-mass site in unconstrained coordinates (log-Jacobian included in the guide density)."""
    x = numpyro.param(f"{name}_unconstrained", init)  # unconstrained: SVI.init's init_params are used as given
    return numpyro.sample(name, dist.TransformedDistribution(dist.Delta(x, event_dim=1), transform))


def _batch(counts, func) -> DocumentCounts:
    data = ModelData(counts, func, None, None, None)
    if data.sparse is None:
        raise bad_argument("counts", func, "sparse counts (scipy.sparse or DocumentCounts)", counts, kind=TypeError)
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
    over documents with one sparse product per step. Documents with no
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
        Stop when no entry of ``theta`` moves more than this.

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
    func = "lda.document_topics"
    X = check_count_matrix(counts, "counts", func)
    beta = np.asarray(beta, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.float64)
    if X.shape[1] != beta.shape[1]:
        raise bad_argument("counts", func, f"{beta.shape[1]} columns (the topics' V)", X)
    n_iter = check_int(n_iter, "n_iter", func, minimum=1)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    cols = X.indices
    lengths = np.asarray(X.sum(axis=1)).ravel()
    theta = np.tile(alpha / alpha.sum(), (X.shape[0], 1))
    for _ in range(n_iter):
        probs = np.einsum("nk,kn->n", theta[rows], beta[:, cols])
        ratio = X.copy()
        ratio.data = X.data / probs
        new = (alpha + theta * np.asarray(ratio @ beta.T)) / (lengths[:, None] + alpha.sum())
        done = np.max(np.abs(new - theta)) < tol
        theta = new
        if done:
            break
    return theta / theta.sum(axis=1, keepdims=True)


def lda_guide(*, local_steps: int = 20, local: str = "dirichlet") -> Callable:
    """NumPyro guide for ``lda.model`` on sparse counts (global point masses, closed-form local theta).

    Its parameters ``alpha_unconstrained`` (k,) and ``beta_unconstrained``
    (k, V-1) start at zero unless given to ``SVI.init(init_params=...)``.

    Parameters
    ----------
    local_steps : int
        E-step iterations per minibatch.
    local : {"dirichlet", "mean"}
        ``theta`` is a draw from ``Dirichlet(gamma)``, or a point mass at
        its mean.

    Returns
    -------
    callable
        ``guide(counts, *, k, ...)`` taking the model's arguments.
    """

    def guide(counts=None, *, k, vocab_size=None, doc_lengths=None, eta=0.1, alpha_prior=(1.0, 1.0), subsample_size=None):
        data = _batch(counts, "lda guide")
        vocab = data.vocab_size
        alpha = _point("alpha", jnp.zeros(k), _TRANSFORMS["alpha"])
        with numpyro.plate("topics", k):
            beta = _point("beta", jnp.zeros((k, vocab - 1)), _TRANSFORMS["beta"])
        gamma = jax.lax.stop_gradient(local_gamma(alpha, beta, data, local_steps))
        with numpyro.handlers.scale(scale=data.num_documents / data.n_docs), numpyro.plate("documents", data.n_docs):
            if local == "mean":
                numpyro.sample("theta", dist.Delta(gamma / jnp.sum(gamma, axis=-1, keepdims=True), event_dim=1))
            else:
                numpyro.sample("theta", dist.Dirichlet(gamma))

    return guide


def single_topic_guide() -> Callable:
    """NumPyro guide for ``single_topic.model``: point masses for ``weights`` and ``beta`` (topics summed out).

    Its parameters ``weights_unconstrained`` (k-1,) and ``beta_unconstrained``
    (k, V-1) start at zero unless given to ``SVI.init(init_params=...)``.

    Returns
    -------
    callable
        ``guide(counts, *, k, ...)`` taking the model's arguments.
    """

    def guide(counts=None, *, k, vocab_size=None, doc_lengths=None, eta=0.1, subsample_size=None):
        vocab = _batch(counts, "single-topic guide").vocab_size
        _point("weights", jnp.zeros(k - 1), _TRANSFORMS["weights"])
        with numpyro.plate("topics", k):
            _point("beta", jnp.zeros((k, vocab - 1)), _TRANSFORMS["beta"])

    return guide


def initial_unconstrained(init, shapes: dict, rng: np.random.Generator, func: str) -> dict:
    """Unconstrained starting values: from an estimate's constrained params, or NumPyro's ``init_to_uniform``.

    ``init=None`` draws every unconstrained coordinate from Uniform(-2, 2)
    (NumPyro's default start); otherwise ``init.params`` (or a dict) must
    hold every site of ``shapes`` with that constrained shape.
    """
    dtype = jnp.result_type(float)
    out = {}
    for name, shape in shapes.items():
        transform = _TRANSFORMS[name]
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
        if transform is _ALR:
            value = value / value.sum(axis=-1, keepdims=True)
        out[name] = jnp.asarray(_inverse_np(transform, value), dtype)
    return out


def _inverse_np(transform, value: np.ndarray) -> np.ndarray:
    """Inverse transform in float64 NumPy (the estimate's precision), before casting to the model dtype."""
    if transform is _ALR:
        log_v = np.log(value)
        return log_v[..., :-1] - log_v[..., -1:]
    return np.log(value)


def constrained(unconstrained: dict) -> dict:
    """Constrained point values (NumPy) of the guide's unconstrained parameters."""
    out = {}
    for key, value in unconstrained.items():
        name = key[: -len("_unconstrained")]
        out[name] = np.asarray(_TRANSFORMS[name](jnp.asarray(value)), dtype=np.float64)
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
    losses : ndarray, shape (num_steps,)
        Minibatch loss per step (negative objective, scaled to the corpus).
    guide : callable
        The NumPyro guide (takes the model's arguments; counts as
        :class:`~specinit.models._sparse_counts.DocumentCounts`).
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


_CACHE: dict = {}
_AUTO_PROGRESS_S = 15.0


def _compiled(model, make_guide, guide_items: tuple, lr, decay_steps, kwargs_items: tuple):
    """``(svi, jitted init, jitted update)`` shared by runs with the same model, guide and settings.

    Start values enter through ``init_params``, so warm and cold runs of the
    same shapes compile once.
    """
    key = (model, make_guide, guide_items, lr, decay_steps, kwargs_items)
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        kwargs = dict(kwargs_items)
        svi = SVI(model, make_guide(**dict(guide_items)), numpyro.optim.Adam(_schedule(lr, decay_steps)), Trace_ELBO())
        init_fn = jax.jit(lambda rng_key, batch, values: svi.init(rng_key, batch, init_params=values, **kwargs))
        step = jax.jit(lambda state, batch: svi.update(state, batch, **kwargs))
        _CACHE[key] = (svi, init_fn, step)
    return _CACHE[key]


def _schedule(lr: float, decay_steps: float):
    return lambda t: lr / jnp.sqrt(1.0 + t / decay_steps)


def run_svi(func: str, model, make_guide, shapes: dict, counts, k: int, *, init, num_steps, batch_size, seed, progress,
            lr, decay_steps, snapshot_every, model_kwargs: dict, guide_options=None, log=print) -> TopicSVIResult:
    """Shared minibatch SVI loop of ``lda.svi`` and ``single_topic.svi`` (see the module notes)."""
    X = check_count_matrix(counts, "counts", func)
    n_docs, vocab = X.shape
    num_steps = check_int(num_steps, "num_steps", func, minimum=1)
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
    every = (max(num_steps // 20, 1) if progress is True else int(progress)) if progress else 0
    # progress=None: a line every _AUTO_PROGRESS_S seconds, only once a run has lasted that long (silent in short runs).
    auto = progress is None
    last_print = 0.0
    last_step = 0

    rng = np.random.default_rng(seed)
    start_values = initial_unconstrained(init, shapes(vocab), rng, func)
    dtype = jnp.result_type(float)
    svi, init_fn, step = _compiled(model, make_guide, tuple(sorted((guide_options or {}).items())), lr, decay_steps,
                                   tuple(sorted(model_kwargs.items())))

    order = np.empty(0, dtype=np.int64)
    # One padded nnz capacity for every minibatch (one compilation), grown only if a batch overflows it.
    capacity = _bucket(int(1.3 * X.nnz / n_docs * batch_size) + 64)

    def next_batch():
        nonlocal order, capacity
        if order.size < batch_size:
            order = np.concatenate([order, rng.permutation(n_docs)])
        rows, order = order[:batch_size], order[batch_size:]
        rows_x = X[np.sort(rows)]
        if rows_x.nnz > capacity:
            capacity = _bucket(int(1.15 * rows_x.nnz))
        return from_csr(rows_x, num_documents=n_docs, pad=capacity, dtype=dtype)

    start = time.perf_counter()
    batch = next_batch()
    state = init_fn(jax.random.PRNGKey(seed), batch, {f"{name}_unconstrained": v for name, v in start_values.items()})
    losses, snapshots = [], []
    for t in range(num_steps):
        if t:
            batch = next_batch()
        state, loss = step(state, batch)
        losses.append(loss)
        done = t + 1
        if snapshot_every and (done % snapshot_every == 0 or done == num_steps):
            snapshots.append((done, constrained(svi.get_params(state))))
        if auto and time.perf_counter() - start - last_print >= _AUTO_PROGRESS_S:
            last_print = time.perf_counter() - start
            recent = np.asarray(jnp.stack(losses[last_step:]), dtype=np.float64)
            last_step = done
            log(f"{func}: step {done}/{num_steps}, mean loss since the last line {np.mean(recent):.6g} "
                f"({last_print:.0f} s)")
        if every and (done % every == 0 or done == num_steps):
            recent = np.asarray(jnp.stack(losses[-every:]), dtype=np.float64)
            log(f"{func}: step {done}/{num_steps}, mean loss of the last {recent.size} steps "
                f"{np.mean(recent):.6g} ({time.perf_counter() - start:.1f} s)")
    params_u = svi.get_params(state)
    losses = np.asarray(jax.block_until_ready(jnp.stack(losses)), dtype=np.float64)
    seconds = time.perf_counter() - start
    return TopicSVIResult(constrained(params_u), losses, svi.guide, params_u, model, dict(model_kwargs), seconds, snapshots,
                          batch_size, "uniform" if init is None else "estimate")


def check_local(local: str, func: str) -> str:
    """Validate the ``local`` option of ``lda.svi``."""
    return check_choice(local, "local", func, ("mean", "dirichlet"))
