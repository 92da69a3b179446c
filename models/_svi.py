"""Minibatch SVI for the topic models: the driver of ``lda.svi`` and ``single_topic.svi`` and their guides' pieces.

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

The update is compiled once per process for each set of shapes and settings
(N, V, ``k``, ``batch_size``, the step and model settings): a second call on
the same corpus compiles nothing (see ``first_step_seconds``). To keep the
compiled update across processes, turn on JAX's persistent compilation cache
before the first call, e.g.
``jax.config.update("jax_compilation_cache_dir", "/path/to/cache")``.

References
----------
.. [1] Hoffman, Blei, Bach. "Online learning for latent Dirichlet
   allocation", NeurIPS 2010, Alg. 2.
.. [2] Blei, Ng, Jordan. "Latent Dirichlet allocation", JMLR 2003, eq. 6-7
   (the variational E-step).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
from jax.scipy.special import digamma
from numpy.typing import ArrayLike
from numpyro.handlers import replay, seed
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.util import compute_log_probs

from specinit._validation import Interval, Options, bad_argument, check_count_matrix, current_entry, warn
from specinit.distributions.continuous import ALR, TRANSFORMS
from specinit.distributions.counts import HIGHEST, DocumentCounts, ModelData, _bucket, from_csr
from specinit.faces import Param

if TYPE_CHECKING:
    import scipy.sparse as sp
    from specinit.estimate import SpectralEstimate

LOGGER = logging.getLogger("specinit")

__all__ = ["LOCAL_STEP", "SVI_OPTIONS", "TopicSVIResult", "local_gamma", "run_svi", "svi_batch"]


def _progress(name: str, value):
    """``progress``: None, a bool or a non-negative number of steps between progress lines."""
    if value is not None and (not isinstance(value, (bool, int, np.integer)) or value < 0):
        raise bad_argument(name, None, "None, a bool or a non-negative number of steps between progress lines", value)
    return value


#: The options of the driver (``lda.svi``, ``single_topic.svi``; with other defaults ``lda.refine``), declared once.
SVI_OPTIONS = {
    "counts": Param("array-like or scipy.sparse matrix, shape (N, V)", "Non-negative integer word counts."),
    "init": Param("SpectralEstimate or dict, optional", "Start from these constrained values of the global sites "
                  "(``beta`` (k, V) and ``alpha`` or ``weights`` (k,); e.g. from ``spectral``); ``None`` is NumPyro's "
                  "default start (unconstrained coordinates uniform in (-2, 2)).", None),
    "max_steps": Param("int", "Most optimization steps (one minibatch each) when ``num_steps`` is None; reaching it "
                       "before the stopping rule fires warns.", 2000, Interval(int, 1)),
    "tol": Param("float", "The stopping rule: a fixed, seeded batch of ``batch_size`` documents is scored every 25 "
                 "steps (the negative objective per token, at fixed random numbers: ``checks``); from step 100 on, the "
                 "run stops at the second check in a row where the mean of the last quarter of the checks is less "
                 "than ``tol`` nats per word below the mean of the quarter before (about a factor ``exp(tol)`` in the "
                 "batch's perplexity). The checks cost about one step in 25.", 0.01, Interval(float, 0.0, open="low")),
    "num_steps": Param("int, optional", "Exactly this many steps, without the stopping rule (``max_steps`` and "
                       "``tol`` unused).", None, Interval(int, 1, none=True)),
    "batch_size": Param("int", "Documents per minibatch, at most N.", 256, Interval(int, 1)),
    "seed": Param("int", "Seeds the starting values (``init=None``), the minibatches and SVI.", 0, Interval(int, 0)),
    "progress": Param("None, bool or int", "Progress lines to the ``specinit`` logger (INFO; shown only when the "
                      "application configures logging, e.g. ``logging.basicConfig(level=\"INFO\")``). ``None`` "
                      "(default): a line with the recent mean loss per word every 15 s, only in runs that last that "
                      "long, and a tqdm bar when standard error is a terminal; ``True``: the same lines and always the "
                      "bar; an int: a line every ``progress`` steps, no bar; ``False``/0: none. A last line says why "
                      "and when the run stopped.", None, _progress),
    "lr": Param("float", "Adam step size at step 0; it decays like ``lr / sqrt(1 + t / decay_steps)``.", 0.05,
                Interval(float, 0.0, open="low")),
    "decay_steps": Param("float", "Time scale of the step-size decay.", 200.0, Interval(float, 0.0, open="low")),
    "snapshot_every": Param("int, optional", "Keep ``(step, params)`` every this many steps (e.g. to measure "
                            "held-out perplexity along the run).", None, Interval(int, 1, none=True)),
}

#: The per-document E-step of the LDA guide and of ``lda.svi``.
LOCAL_STEP = {
    "local_steps": Param("int", "E-step iterations per minibatch.", 20, Interval(int, 1)),
    "local": Param("{'dirichlet', 'mean'}", "The guide's ``theta``: a ``Dirichlet(gamma)`` draw (the default: a "
                   "proper variational factor, so the gradient for ``alpha`` uses ``E log theta``), or a point mass "
                   "at its mean (less noise, but ``alpha`` comes out too large by Jensen's inequality).", "dirichlet",
                   Options(("dirichlet", "mean"))),
}


def svi_batch(counts: sp.spmatrix | DocumentCounts) -> DocumentCounts:
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


def local_gamma(alpha: jax.Array, beta: jax.Array, data: DocumentCounts, steps: int) -> jax.Array:
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


def run_svi(model: Callable[..., Any], guide: Callable[..., Any], shapes: dict,
            counts: ArrayLike | sp.spmatrix | DocumentCounts, k: int, *,
            init: SpectralEstimate | Mapping[str, Any] | None, num_steps: int | None, max_steps: int, tol: float,
            batch_size: int, seed: int, progress: bool, lr: float, decay_steps: float, snapshot_every: int | None,
            model_kwargs: dict, guide_options: Mapping[str, Any] | None = None) -> TopicSVIResult:
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
    application configures logging). The options arrive checked by the public faces
    (:data:`SVI_OPTIONS`).
    """
    func = current_entry()
    X = check_count_matrix(counts, "counts", func)
    n_docs, vocab = X.shape
    if batch_size > n_docs:
        raise bad_argument("batch_size", func, f"at most the number of documents N={n_docs}", batch_size)
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
