"""The JAX backend: the moment passes on the device that JAX selects (float64).

:class:`JaxPasses` moves a data set once to JAX's default device (a GPU when
present) and runs every pass there. Imported lazily by
:func:`specinit.engine.backends.resolve_backend`; the rest of the engine
never imports JAX.

Every pass is a sum over row blocks of additive partial results (the same
sums as the NumPy path). A sparse row block is held on the device as padded
COO arrays (``rows``, ``cols``, ``vals``) and a product ``X Q`` is a gather
``Q[cols]`` followed by a segment sum over ``rows``; ``X^T Z`` is the
transposed segment sum over ``cols``. Dense blocks use matrix products with
``precision=HIGHEST``.

Accuracy: all arithmetic runs in float64 inside a scoped
``jax.enable_x64`` context (the global x64 flag is never flipped), and every
matrix product asks for ``Precision.HIGHEST`` so that an accelerator never
substitutes TF32/bfloat16 passes. Results equal the NumPy path to float64
round-off (tests compare them to 1e-10 relative).

Compilation: blocks are padded to power-of-two bucket sizes (at least
:data:`MIN_NNZ_BUCKET` non-zeros and :data:`ROW_TILE` rows), and a corpus is
cut into blocks of at most ``max_nnz`` non-zeros and ``max_rows`` rows, so a
corpus compiles at most two shapes per kernel (full blocks and the last one)
and a new corpus of similar size reuses them. :data:`TRACE_COUNTS` counts
traces per kernel (a test checks that a second corpus does not recompile).

References
----------
.. [1] Ruffini, Casanellas, Gavalda. "A new method of moments for latent
   variable models", Thm 1 (pooled unbiased estimators: the sums computed here).
.. [2] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 2014, Sec. 3.3 (multi-view cross moments).
"""

from __future__ import annotations

import collections
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from specinit.engine.anchors import simplex_projection
from specinit.engine.backends import PASSES, FirstOrderStats, Passes, WhitenedStats, accelerator_present
from specinit.engine.backends.numpy import document_weights, usable_documents
from specinit.engine.decompose import POLISH, STALL_WINDOW
from specinit.engine.sources import row_ranges

if TYPE_CHECKING:
    from specinit.engine.sources import CountSource, ViewSource

__all__ = [
    "TRACE_COUNTS",
    "DeviceCounts",
    "DeviceDocuments",
    "DeviceRows",
    "JaxPasses",
    "bucket",
    "x64",
]

#: Number of times each kernel was traced (compiled) in this process, by name.
TRACE_COUNTS: collections.Counter = collections.Counter()

MIN_NNZ_BUCKET = 1024
ROW_TILE = 256  # rows per step of the third-order accumulation (bounds the (rows, k, k) intermediate)
DEFAULT_MAX_NNZ = 2**17  # non-zeros per device block: the (nnz, r) gather is at most 2^17 * r * 8 bytes
DEFAULT_MAX_ROWS = 2**13
#: Block bounds (non-zeros, rows) on a GPU or TPU: every block is one kernel launch per pass, costing tens of
#: microseconds of host time whatever its size; 16x larger blocks turn a pass over N = 1M documents (90M
#: non-zeros) from ~700 launches into ~45 (the largest gather, 2^21 x r float64, is 1.8 GB at r = 110).
ACCELERATOR_MAX_NNZ, ACCELERATOR_MAX_ROWS = 2**21, 2**16
HIGHEST = jax.lax.Precision.HIGHEST


def x64() -> AbstractContextManager[Any]:
    """Scoped float64 context (``jax.enable_x64(True)``; the global flag is untouched).

    Returns
    -------
    context manager
        Inside it, JAX creates and computes float64 arrays.
    """
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64  # older JAX

    return enable_x64()


def bucket(n: int, minimum: int) -> int:
    """Smallest power of two ``>= max(n, minimum)`` (the padded size of a block).

    Parameters
    ----------
    n : int
        Actual size.
    minimum : int
        Smallest bucket.

    Returns
    -------
    int
    """
    n = max(int(n), int(minimum), 1)
    return 1 << (n - 1).bit_length()


def _is_resource_exhausted(exc: Exception) -> bool:
    return "RESOURCE_EXHAUSTED" in str(exc) or "out of memory" in str(exc).lower()


# ----------------------------------------------------------------------------- kernels
# Each kernel bumps TRACE_COUNTS when traced (a Python side effect runs once per compilation).


@partial(jax.jit, static_argnames=("n_rows", "n_cols"))
def _matmat(rows, cols, vals, Q, n_rows, n_cols):
    """(n_rows, r) product ``X Q`` of a padded COO block."""
    TRACE_COUNTS["matmat"] += 1
    return jax.ops.segment_sum(vals[:, None] * Q[cols], rows, num_segments=n_rows, indices_are_sorted=True)


@partial(jax.jit, static_argnames=("n_cols",))
def _rmatmat(rows, cols, vals, Z, n_cols):
    """(n_cols, r) product ``X^T Z`` of a padded COO block."""
    TRACE_COUNTS["rmatmat"] += 1
    return jax.ops.segment_sum(vals[:, None] * Z[rows], cols, num_segments=n_cols)


@partial(jax.jit, static_argnames=("n_cols",))
def _first_order(rows, cols, vals, w1, a, b, n_cols):
    TRACE_COUNTS["first_order"] += 1
    weights = jnp.stack([w1, a, b], axis=1)
    return jax.ops.segment_sum(vals[:, None] * weights[rows], cols, num_segments=n_cols)


@partial(jax.jit, static_argnames=("n_rows", "n_cols"))
def _m2_pass(rows, cols, vals, a, Q, n_rows, n_cols):
    """``X^T (a * (X Q))`` for one block."""
    TRACE_COUNTS["m2_pass"] += 1
    XQ = jax.ops.segment_sum(vals[:, None] * Q[cols], rows, num_segments=n_rows, indices_are_sorted=True)
    return jax.ops.segment_sum(vals[:, None] * (a[:, None] * XQ)[rows], cols, num_segments=n_cols)


def _cube(Y, b):
    """``sum_r b_r y_r (x) y_r (x) y_r`` accumulated over tiles of ROW_TILE rows."""
    k = Y.shape[1]
    tiles = Y.reshape(-1, ROW_TILE, k)
    weights = b.reshape(-1, ROW_TILE)

    def step(total, tile):
        y, w = tile
        pairs = (y[:, :, None] * y[:, None, :]).reshape(ROW_TILE, k * k)
        return total + jnp.matmul(pairs.T, w[:, None] * y, precision=HIGHEST).reshape(k, k, k), None

    total, _ = jax.lax.scan(step, jnp.zeros((k, k, k), Y.dtype), (tiles, weights))
    return total


def _cross3(Za, Zb, Zc):
    """``sum_r za_r (x) zb_r (x) zc_r`` over tiles of ROW_TILE rows."""
    ka, kb, kc = Za.shape[1], Zb.shape[1], Zc.shape[1]

    def step(total, tile):
        za, zb, zc = tile
        pairs = (za[:, :, None] * zb[:, None, :]).reshape(ROW_TILE, ka * kb)
        return total + jnp.matmul(pairs.T, zc, precision=HIGHEST).reshape(ka, kb, kc), None

    tiles = tuple(Z.reshape(-1, ROW_TILE, Z.shape[1]) for Z in (Za, Zb, Zc))
    total, _ = jax.lax.scan(step, jnp.zeros((ka, kb, kc), Za.dtype), tiles)
    return total


@partial(jax.jit, static_argnames=("n_rows", "n_cols"))
def _whitened_pass(rows, cols, vals, a, b, W, n_rows, n_cols):
    """(y3, y2, word_by) of one block: ``Y = X W``, ``sum b y^(x)3``, ``(a Y)^T Y``, ``X^T (b Y)``."""
    TRACE_COUNTS["whitened_pass"] += 1
    Y = jax.ops.segment_sum(vals[:, None] * W[cols], rows, num_segments=n_rows, indices_are_sorted=True)
    y3 = _cube(Y, b)
    y2 = jnp.matmul((a[:, None] * Y).T, Y, precision=HIGHEST)
    word_by = jax.ops.segment_sum(vals[:, None] * (b[:, None] * Y)[rows], cols, num_segments=n_cols)
    return y3, y2, word_by


@jax.jit
def _dense_gram(Xa, Xb, Q):
    TRACE_COUNTS["dense_gram"] += 1
    return jnp.matmul(Xa.T, jnp.matmul(Xb, Q, precision=HIGHEST), precision=HIGHEST)


@jax.jit
def _dense_project(X, U):
    TRACE_COUNTS["dense_project"] += 1
    return jnp.matmul(X, U, precision=HIGHEST)


@jax.jit
def _cross3_jit(Za, Zb, Zc):
    TRACE_COUNTS["cross3"] += 1
    return _cross3(Za, Zb, Zc)


# ----------------------------------------------------------------------------- tensor power method


def _contract(T, U):
    """``T(I, u, u)`` for every column of ``U``: one (n, n^2) x (n^2, m) product."""
    n, m = U.shape
    return jnp.matmul(T.reshape(n, n * n), (U[:, None, :] * U[None, :, :]).reshape(n * n, m), precision=HIGHEST)


def _iterate(T, U, n_iter, tol):
    """The power iterations of :func:`specinit.engine.decompose._power_iterate` as one ``while_loop``.

    Every column is contracted each step and a stopped column keeps its
    iterate: the same rule (converged below ``tol``, or hopeless after
    ``max(STALL_WINDOW, n_iter // 10)`` steps) decides when a column stops.
    """
    m = U.shape[1]
    patience = max(STALL_WINDOW, n_iter // 10)

    def running(state):
        it, _, _, active, *_ = state
        return (it < n_iter) & jnp.any(active)

    def step(state):
        it, U, moves, active, iterations, converged, stalled = state
        it = it + 1
        V = _contract(T, U)
        norms = jnp.linalg.norm(V, axis=0)
        V = V / jnp.where(norms > 0, norms, 1.0)
        move = jnp.minimum(jnp.linalg.norm(V - U, axis=0), jnp.linalg.norm(V + U, axis=0))
        U = jnp.where(active, V, U)
        iterations = jnp.where(active, it, iterations)
        moves = moves.at[it].set(move)
        done = active & (move < tol)
        rate = (move / moves[jnp.maximum(it - STALL_WINDOW, 0)]) ** (1.0 / STALL_WINDOW)
        needed = jnp.log(tol / move) / jnp.log(rate)
        hopeless = active & ~done & (it >= patience) & ((rate >= 1.0) | (it + needed > n_iter))
        return it, U, moves, active & ~(done | hopeless), iterations, converged | done, stalled | hopeless

    flags = jnp.zeros(m, dtype=bool)
    moves = jnp.zeros((n_iter + 1, m), U.dtype).at[0].set(jnp.inf)  # as on the host: no move before the first
    state = (jnp.asarray(0), U, moves, ~flags, jnp.zeros(m, dtype=jnp.int32), flags, flags)
    _, U, _, _, iterations, converged, stalled = jax.lax.while_loop(running, step, state)
    return U, iterations, converged, stalled


@partial(jax.jit, static_argnames=("n_iter",))
def _power_method(T, starts, tol, n_iter):
    """The deflated power method of :func:`specinit.engine.decompose.deflated_power_method`, scanned over components."""
    TRACE_COUNTS["power_method"] += 1

    def component(residual, start):
        U = start / jnp.linalg.norm(start, axis=0)
        U, first, _, _ = _iterate(residual, U, n_iter, tol)
        values = jnp.einsum("im,im->m", U, _contract(residual, U), precision=HIGHEST)
        u = jax.lax.dynamic_slice_in_dim(U, jnp.argmax(values), 1, axis=1)
        u, polish, _, gave_up = _iterate(residual, u, n_iter, POLISH * tol)
        ok = _iterate(residual, u, 1, tol)[2][0]
        u = u[:, 0]
        lam = u @ _contract(residual, u[:, None])[:, 0]
        residual = residual - lam * jnp.einsum("a,b,c->abc", u, u, u)
        return residual, (lam, u, ok, gave_up[0] & ~ok, jnp.max(first) + polish[0])

    _, (weights, vectors, converged, stalled, iterations) = jax.lax.scan(component, T, starts)
    return weights, vectors.T, converged, stalled, iterations


# ----------------------------------------------------------------------------- topic-model steps


@partial(jax.jit, static_argnames=("n_iter",))
def _anchor_weights(H, G, lipschitz, tol, n_iter):
    """The FISTA loop of :func:`specinit.engine.anchors.fit_anchor` as one ``while_loop`` (``C`` from uniform rows)."""
    TRACE_COUNTS["anchor_weights"] += 1
    C = jnp.full(H.shape, 1.0 / H.shape[1], dtype=H.dtype)

    def running(state):
        steps, *_, move = state
        return (steps < n_iter) & (move >= tol)

    def step(state):
        steps, Y, C, t, _ = state
        t_new = 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t))
        new = simplex_projection(Y - (2.0 * (jnp.matmul(Y, G, precision=HIGHEST) - H)) / lipschitz)
        delta = new - C
        return steps + 1, new + ((t - 1.0) / t_new) * delta, new, t_new, jnp.max(jnp.abs(delta))

    state = (jnp.asarray(0), C, C, jnp.asarray(1.0, H.dtype), jnp.asarray(jnp.inf, H.dtype))
    steps, _, C, _, _ = jax.lax.while_loop(running, step, state)
    return C, steps


@partial(jax.jit, static_argnames=("steps", "n_rows", "n_cols", "n_seeded", "fresh"))
def _closing_sweep(rows, cols, vals, beta_t, theta, alpha, group_of, steps, n_rows, n_cols, n_seeded, fresh):
    """One closing EM sweep over a padded COO block: the unit of :meth:`DeviceDocuments.sweep`.

    ``steps`` fixed-point steps of each document's proportions from
    ``theta`` (``fresh``: from ``alpha`` normalized, rounded to float32 as
    the host path starts), then the expected counts
    ``sum_d theta_dk c_dw / (theta_d . beta_w)`` (V, k) and the tokens' log
    likelihood. With ``n_seeded`` seeded topics (``group_of[w]``: the group
    of a seed word, -1 for others) a document containing seed words keeps
    the Dirichlet parameters of its groups' topics and the unseeded ones
    only (:func:`specinit.models._topics.seed_constraints`). Returns the
    proportions in the host path's warm-start precision (float32, then
    float16).
    """
    TRACE_COUNTS["closing_sweep"] += 1
    k = beta_t.shape[1]
    alpha = jnp.broadcast_to(alpha, (n_rows, k))
    if n_seeded:
        hits = jax.nn.one_hot(group_of[cols], n_seeded, dtype=vals.dtype) * (vals > 0)[:, None]
        present = jax.ops.segment_max(hits, rows, num_segments=n_rows, indices_are_sorted=True) > 0
        allowed = jnp.where(present.any(axis=1, keepdims=True), present, True)
        alpha = alpha * jnp.concatenate([allowed, jnp.ones((n_rows, k - n_seeded), dtype=bool)], axis=1)
    a0 = alpha.sum(axis=1)
    if fresh:
        theta = (alpha / a0[:, None]).astype(jnp.float32)
    theta = theta.astype(vals.dtype)
    words = beta_t[cols]
    length = jax.ops.segment_sum(vals, rows, num_segments=n_rows, indices_are_sorted=True)
    real = vals > 0  # padded entries (value 0) add nothing; their product is replaced so that a zero floor stays finite

    def dots(th):
        return jnp.where(real, jnp.sum(th[rows] * words, axis=1), 1.0)

    def step(_, th):
        acc = jax.ops.segment_sum((vals / dots(th))[:, None] * words, rows, num_segments=n_rows,
                                  indices_are_sorted=True)
        return (alpha + th * acc) / (length + a0)[:, None]

    theta = jax.lax.fori_loop(0, steps, step, theta)
    dot = dots(theta)
    stats = jax.ops.segment_sum((vals / dot)[:, None] * theta[rows], cols, num_segments=n_cols)
    return theta.astype(jnp.float32).astype(jnp.float16), stats, jnp.sum(vals * jnp.log(dot))


# ----------------------------------------------------------------------------- count corpora


@dataclass
class _CountBlock:
    rows: object  # device int32 (nnz_bucket,)
    cols: object  # device int32 (nnz_bucket,)
    vals: object  # device float64 (nnz_bucket,)
    w1: object  # device float64 (row_bucket,), zero on padded rows
    a: object
    b: object
    n_rows: int  # padded row count (bucket)
    n_real: int  # real rows
    nnz: int  # real non-zeros


class DeviceCounts:
    """A count corpus resident on the JAX device as padded COO row blocks.

    Built from validated CSR chunks whose documents all have 3 or more
    tokens (the caller drops the others) and their per-document weights
    ``(w1, a, b)``; see :meth:`JaxPasses.place_counts`.

    Parameters
    ----------
    n_cols : int
        V, the vocabulary size.
    max_nnz, max_rows : int
        Bounds of one device block (non-zeros, documents). Blocks are padded
        to power-of-two buckets, so one corpus compiles at most two shapes.
    """

    def __init__(self, n_cols: int, max_nnz: int = DEFAULT_MAX_NNZ, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.n_cols = int(n_cols)
        self.max_nnz = int(max_nnz)
        self.max_rows = int(max_rows)
        self.blocks: list[_CountBlock] = []
        self.device = jax.devices()[0]

    def add(self, chunk: sp.csr_matrix, w1: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        """Move one validated chunk (documents with >= 3 tokens) to the device, cut into bounded blocks."""
        for start, stop in row_ranges(chunk.indptr, self.max_nnz, self.max_rows):
            self._add_block(chunk, start, stop, w1, a, b)

    def _add_block(self, chunk, start, stop, w1, a, b):
        lo, hi = int(chunk.indptr[start]), int(chunk.indptr[stop])
        nnz, n_real = hi - lo, stop - start
        nnz_bucket = bucket(nnz, MIN_NNZ_BUCKET)
        row_bucket = bucket(n_real, ROW_TILE)
        rows = np.zeros(nnz_bucket, dtype=np.int32)
        rows[:nnz] = np.repeat(np.arange(n_real, dtype=np.int32), np.diff(chunk.indptr[start : stop + 1]))
        rows[nnz:] = n_real - 1  # padded entries: value 0, sorted row index
        cols = np.zeros(nnz_bucket, dtype=np.int32)
        cols[:nnz] = chunk.indices[lo:hi]
        vals = np.zeros(nnz_bucket)
        vals[:nnz] = chunk.data[lo:hi]

        def pad(w):
            out = np.zeros(row_bucket)
            out[:n_real] = w[start:stop]
            return out

        with x64():
            put = partial(jax.device_put, device=self.device)
            self.blocks.append(_CountBlock(put(rows), put(cols), put(vals), put(pad(w1)), put(pad(a)), put(pad(b)),
                                           row_bucket, n_real, nnz))

    def _split(self, blk: _CountBlock) -> list[_CountBlock]:
        """Halve a block (by rows) after the device ran out of memory on it."""
        if blk.n_real < 2:
            raise MemoryError(
                f"The JAX device ran out of memory on one document of {blk.nnz} distinct words (a block padded to "
                f"{int(blk.vals.shape[0])} non-zeros). Use backend='numpy' for this corpus, or a device with more memory.")
        rows, cols, vals = (np.asarray(x) for x in (blk.rows, blk.cols, blk.vals))
        indptr = np.searchsorted(rows[: blk.nnz], np.arange(blk.n_real + 1), side="left").astype(np.int64)
        chunk = sp.csr_matrix((vals[: blk.nnz], cols[: blk.nnz], indptr), shape=(blk.n_real, self.n_cols))
        w1, a, b = (np.asarray(x)[: blk.n_real] for x in (blk.w1, blk.a, blk.b))
        half = blk.n_real // 2
        saved, self.blocks = self.blocks, []
        try:
            self._add_block(chunk, 0, half, w1, a, b)
            self._add_block(chunk, half, blk.n_real, w1, a, b)
            return self.blocks
        finally:
            self.blocks = saved

    def _run(self, kernel, total):
        """``total + sum kernel(block)`` over the blocks; a block the device cannot hold is halved and retried."""
        i = 0
        while i < len(self.blocks):
            blk = self.blocks[i]
            try:
                part = kernel(blk)
            except Exception as exc:  # XlaRuntimeError on an exhausted device
                if not _is_resource_exhausted(exc):
                    raise
                self.blocks[i : i + 1] = self._split(blk)
                continue
            total = jax.tree_util.tree_map(jnp.add, total, part)
            i += 1
        return total

    def first_order(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(X^T w1, X^T a, X^T b)``: the (V,) vectors of the first pass."""
        with x64():
            total = self._run(lambda blk: _first_order(blk.rows, blk.cols, blk.vals, blk.w1, blk.a, blk.b,
                                                       n_cols=self.n_cols), jnp.zeros((self.n_cols, 3)))
            out = np.asarray(total)
        return out[:, 0], out[:, 1], out[:, 2]

    def m2_sum(self, Q: np.ndarray | jax.Array) -> np.ndarray | jax.Array:
        """``sum_d a_d c_d (c_d^T Q)`` over the corpus: (V, r), on the device when ``Q`` is a device array."""
        with x64():
            Qd = self._put(Q)
            total = self._run(lambda blk: _m2_pass(blk.rows, blk.cols, blk.vals, blk.a, Qd, n_rows=blk.n_rows,
                                                   n_cols=self.n_cols), jnp.zeros((self.n_cols, Qd.shape[1])))
            return total if Qd is Q else np.asarray(total)

    def whitened_sums(self, W: np.ndarray | jax.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray | jax.Array]:
        """``(sum b y^(x)3, sum a y y^T, X^T (b Y))`` with ``Y = X W``; the last on the device when ``W`` is."""
        with x64():
            Wd = self._put(W)
            k = Wd.shape[1]
            zero = (jnp.zeros((k, k, k)), jnp.zeros((k, k)), jnp.zeros((self.n_cols, k)))
            y3, y2, wb = self._run(lambda blk: _whitened_pass(blk.rows, blk.cols, blk.vals, blk.a, blk.b, Wd,
                                                              n_rows=blk.n_rows, n_cols=self.n_cols), zero)
            return np.asarray(y3), np.asarray(y2), wb if Wd is W else np.asarray(wb)

    def _put(self, A):
        """``A`` itself if it is a device array, else a float64 copy on the device."""
        return A if isinstance(A, jax.Array) else jax.device_put(np.asarray(A, dtype=np.float64), self.device)


class DeviceDocuments:
    """Every document of a count corpus on the device, for the closing EM sweeps of ``lda.spectral``.

    Holds the corpus as padded COO blocks (a :class:`DeviceCounts`: the
    moment passes' own blocks when they dropped no document, so the corpus is
    on the device once) and each block's proportions between sweeps, in the
    host path's warm-start precision (float16). Made by
    :meth:`JaxPasses.place_documents`.

    Parameters
    ----------
    counts : DeviceCounts
        Every document, in order.
    """

    def __init__(self, counts: DeviceCounts) -> None:
        self.counts = counts
        self.thetas: dict[int, jax.Array] = {}
        with x64():
            self.tokens = float(sum(jnp.sum(blk.vals) for blk in counts.blocks))

    def sweep(self, beta: np.ndarray, alpha: np.ndarray, steps: int,
              seed_groups: Sequence[np.ndarray] = ()) -> tuple[np.ndarray, float, float]:
        """One closing sweep on the device (float64): the host path's sweep of
        :func:`specinit.models._topics.close_topics`.

        Parameters
        ----------
        beta : ndarray, shape (k, V)
            Topics.
        alpha : ndarray, shape (k,)
            Dirichlet parameters of the proportions.
        steps : int
            Fixed-point steps of each document's proportions, warm-started
            from the previous sweep's.
        seed_groups : sequence of int arrays
            Group ``i``'s columns, topic ``i``'s seed words: a document that
            contains seed words draws from their groups' topics and the
            unseeded ones only.

        Returns
        -------
        stats : ndarray, shape (k, V)
            ``sum_d theta_di c_dw / (theta_d . beta_w)``.
        log_likelihood : float
            ``sum_dw c_dw log(theta_d . beta_w)``.
        tokens : float
            Tokens of the corpus.
        """
        k, n_words = beta.shape
        group_of = np.full(n_words, -1, dtype=np.int32)
        for i, group in enumerate(seed_groups):
            group_of[group] = i
        device = self.counts.device
        with x64():
            beta_t, alpha, group_of = (jax.device_put(x, device) for x in (
                np.ascontiguousarray(beta.T, dtype=np.float64), np.asarray(alpha, dtype=np.float64), group_of))
            stats, total = jnp.zeros((n_words, k)), jnp.zeros(())
            for i, blk in enumerate(self.counts.blocks):
                theta = self.thetas.get(i)
                try:
                    new, part, loglik = _closing_sweep(
                        blk.rows, blk.cols, blk.vals, beta_t, jnp.zeros((), jnp.float16) if theta is None else theta,
                        alpha, group_of, steps=int(steps), n_rows=blk.n_rows, n_cols=n_words,
                        n_seeded=len(seed_groups), fresh=theta is None)
                except Exception as exc:  # XlaRuntimeError on an exhausted device
                    if not _is_resource_exhausted(exc):
                        raise
                    raise MemoryError(
                        f"The JAX device ran out of memory in a closing EM sweep over a block of {blk.nnz} non-zeros "
                        f"and k={k} topics. Use backend='numpy', em_sweeps=0, or JaxPasses(max_nnz=...) with "
                        "smaller blocks.") from exc
                self.thetas[i] = new
                stats, total = stats + part, total + loglik
            return np.array(stats).T, float(total), self.tokens


# ----------------------------------------------------------------------------- row-aligned views


class DeviceRows:
    """Views (dense or sparse, same rows) on the JAX device, as aligned padded row blocks.

    Parameters
    ----------
    views : list of (N, d_v) ndarray or scipy.sparse CSR matrices (float64, validated)
    max_rows : int
        Rows per device block (padded to a power of two at least ROW_TILE).
    """

    def __init__(self, views: Sequence[np.ndarray | sp.sparray | sp.spmatrix],
                 max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.dims = tuple(v.shape[1] for v in views)
        self.device = jax.devices()[0]
        n = views[0].shape[0]
        self.blocks = []  # list over blocks of list over views
        with x64():
            put = partial(jax.device_put, device=self.device)
            for start in range(0, n, max_rows):
                stop = min(start + max_rows, n)
                n_real = stop - start
                n_pad = bucket(n_real, ROW_TILE)
                per_view = []
                for v in views:
                    part = v[start:stop]
                    if sp.issparse(part):
                        part = sp.csr_matrix(part)
                        nnz = part.nnz
                        nb = bucket(nnz, MIN_NNZ_BUCKET)
                        rows = np.full(nb, n_real - 1, dtype=np.int32)
                        rows[:nnz] = np.repeat(np.arange(n_real, dtype=np.int32), np.diff(part.indptr))
                        cols = np.zeros(nb, dtype=np.int32)
                        cols[:nnz] = part.indices
                        vals = np.zeros(nb)
                        vals[:nnz] = part.data
                        per_view.append(("coo", put(rows), put(cols), put(vals), n_pad))
                    else:
                        dense = np.zeros((n_pad, part.shape[1]))
                        dense[:n_real] = part
                        per_view.append(("dense", put(dense)))
                self.blocks.append(per_view)

    def _project(self, block, v, U):
        entry = block[v]
        if entry[0] == "dense":
            return _dense_project(entry[1], U)
        _, rows, cols, vals, n_pad = entry
        return _matmat(rows, cols, vals, U, n_rows=n_pad, n_cols=self.dims[v])

    def _transpose_apply(self, block, v, Z):
        entry = block[v]
        if entry[0] == "dense":
            return jnp.matmul(entry[1].T, Z, precision=HIGHEST)
        _, rows, cols, vals, _ = entry
        return _rmatmat(rows, cols, vals, Z, n_cols=self.dims[v])

    def gram(self, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        """``X_a^T (X_b Q)`` summed over the blocks."""
        with x64():
            Qd = jax.device_put(np.asarray(Q, dtype=np.float64), self.device)
            total = jnp.zeros((self.dims[a], Qd.shape[1]))
            for block in self.blocks:
                if block[a][0] == "dense" and block[b][0] == "dense":
                    total = total + _dense_gram(block[a][1], block[b][1], Qd)
                else:
                    total = total + self._transpose_apply(block, a, self._project(block, b, Qd))
            return np.asarray(total)

    def triples(self, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray, Uc: np.ndarray) -> np.ndarray:
        """``sum_r (Ua^T x_a) (x) (Ub^T x_b) (x) (Uc^T x_c)`` over the rows."""
        with x64():
            Us = [jax.device_put(np.asarray(U, dtype=np.float64), self.device) for U in (Ua, Ub, Uc)]
            total = jnp.zeros(tuple(U.shape[1] for U in Us))
            for block in self.blocks:
                Za, Zb, Zc = (self._project(block, v, U) for v, U in zip((a, b, c), Us))
                total = total + _cross3_jit(Za, Zb, Zc)
            return np.asarray(total)


# ----------------------------------------------------------------------------- the backend


class JaxPasses(Passes):
    """Passes on JAX's default device: count corpora as padded COO blocks, views as aligned row blocks.

    Parameters
    ----------
    max_nnz, max_rows : int, optional
        Bounds of one device block (non-zeros of a count corpus; rows).
        Default: :data:`DEFAULT_MAX_NNZ` and :data:`DEFAULT_MAX_ROWS` on the
        CPU, :data:`ACCELERATOR_MAX_NNZ` and :data:`ACCELERATOR_MAX_ROWS` on a
        GPU or TPU.
    n_threads, chunk_rows : optional
        Accepted for a uniform backend signature (the device does the work).
    recovers_on_device : bool, optional
        Run the topic model's recovery steps on the device too: the anchor
        weights (:meth:`anchor_weights`) and the closing EM sweeps
        (:meth:`place_documents`) of ``lda.spectral``. Default: on a GPU or
        TPU; on JAX's CPU device the host's compiled kernels run them faster
        (N = 20k, V = 5k, k = 20 on 2 cores: the sweeps 2.9 s there against
        0.25 s with Numba, the anchor weights 0.8 s against 0.05 s).
    """

    name = "jax"
    implements = PASSES

    def __init__(self, max_nnz: int | None = None, max_rows: int | None = None, n_threads: int | None = None,
                 chunk_rows: int | None = None, recovers_on_device: bool | None = None) -> None:
        accelerator = accelerator_present()
        self.recovers_on_device = accelerator if recovers_on_device is None else bool(recovers_on_device)
        default_nnz, default_rows = ((ACCELERATOR_MAX_NNZ, ACCELERATOR_MAX_ROWS) if accelerator
                                     else (DEFAULT_MAX_NNZ, DEFAULT_MAX_ROWS))
        self.max_nnz = int(default_nnz if max_nnz is None else max_nnz)
        self.max_rows = int(default_rows if max_rows is None else max_rows)
        self.chunk_rows = chunk_rows
        self._placed: tuple[CountSource | None, DeviceCounts | None] = (None, None)  # the last corpus placed

    def place_counts(self, source: CountSource, weighting: str) -> DeviceCounts | None:
        """Move the documents with >= 3 tokens to the device; the first-order scalars are summed on the way."""
        device = None
        totals = [0, 0, 0.0, 0.0, 0.0]  # documents, dropped, m1_norm, norm2, norm3
        pooled = weighting == "pooled"
        for chunk in source.chunks(self.chunk_rows):
            if device is None:
                device = DeviceCounts(chunk.shape[1], self.max_nnz, self.max_rows)
            chunk, n, dropped = usable_documents(chunk)
            w1, a, b = document_weights(n, weighting)
            device.add(chunk, w1, a, b)
            count = float(chunk.shape[0])
            totals[0] += chunk.shape[0]
            totals[1] += dropped
            totals[2] += float(n.sum()) if pooled else count
            totals[3] += float((n * (n - 1)).sum()) if pooled else count
            totals[4] += float((n * (n - 1) * (n - 2)).sum()) if pooled else count
        if device is not None:
            device.totals = totals
        self._placed = (source, device)
        return device

    def place_documents(self, source: CountSource) -> DeviceDocuments:
        """Every document of ``source`` on the device for the closing EM sweeps (:class:`DeviceDocuments`).

        The blocks that :meth:`place_counts` put there for the moments are
        reused when they hold every document (none had fewer than 3 tokens);
        otherwise the corpus is placed again, short documents included.
        """
        source_placed, placed = self._placed
        if source_placed is source and placed is not None and placed.totals[1] == 0:
            return DeviceDocuments(placed)
        device = None
        for chunk in source.chunks(self.chunk_rows):
            if device is None:
                device = DeviceCounts(chunk.shape[1], self.max_nnz, self.max_rows)
            unweighted = np.zeros(chunk.shape[0])  # the sweeps read the counts alone
            device.add(chunk, unweighted, unweighted, unweighted)
        return DeviceDocuments(device)

    def anchor_weights(self, H: np.ndarray, G: np.ndarray, lipschitz: float, n_iter: int,
                       tol: float) -> tuple[np.ndarray, int]:
        """The anchor weights' projected-gradient loop of :func:`specinit.engine.anchors.fit_anchor` on the device.

        FISTA from uniform rows, ``C <- P(Y - 2 (Y G - H) / L)`` row by row
        with momentum, until no weight moves by ``tol`` or after ``n_iter``
        steps, as one compiled loop (float64, ``Precision.HIGHEST``).

        Parameters
        ----------
        H : ndarray, shape (V, k)
            The targets.
        G : ndarray, shape (k, k)
            The anchors' Gram matrix.
        lipschitz : float
            The gradient's Lipschitz constant.
        n_iter : int
            Most steps.
        tol : float
            Stop once no weight moves by this much.

        Returns
        -------
        C : ndarray, shape (V, k)
            The weights (rows on the simplex), on the host.
        steps : int
        """
        with x64():
            C, steps = _anchor_weights(self.resident(H), self.resident(G), jnp.asarray(lipschitz, jnp.float64),
                                       jnp.asarray(tol, jnp.float64), n_iter=int(n_iter))
            return np.array(C), int(steps)

    def count_first(self, placed: DeviceCounts) -> FirstOrderStats | None:
        if placed is None:
            return None
        m1_sum, word_a, word_b = placed.first_order()
        n_docs, dropped, m1_norm, norm2, norm3 = placed.totals
        return FirstOrderStats(n_documents=n_docs, n_dropped=dropped, m1_sum=m1_sum, m1_norm=m1_norm, word_a=word_a,
                               norm2=norm2, word_b=word_b, norm3=norm3)

    def count_m2(self, placed: DeviceCounts, Q: np.ndarray) -> np.ndarray:
        return placed.m2_sum(Q)

    def count_whitened(self, placed: DeviceCounts, W: np.ndarray) -> WhitenedStats:
        y3, y2, word_by = placed.whitened_sums(W)
        return WhitenedStats(y3=y3, y2=y2, word_by=word_by)

    def place_views(self, source: ViewSource) -> DeviceRows:
        return DeviceRows(source.views, self.max_rows)

    def gram(self, placed: DeviceRows, a: int, b: int, Q: np.ndarray) -> np.ndarray:
        return placed.gram(a, b, Q)

    def triples(self, placed: DeviceRows, a: int, b: int, c: int, Ua: np.ndarray, Ub: np.ndarray,
                Uc: np.ndarray) -> np.ndarray:
        return placed.triples(a, b, c, Ua, Ub, Uc)

    def resident(self, A: np.ndarray) -> jax.Array:
        """A float64 copy of ``A`` on JAX's default device."""
        with x64():
            return jax.device_put(np.asarray(A, dtype=np.float64), jax.devices()[0])

    def scope(self) -> AbstractContextManager[Any]:
        """Scoped float64 (:func:`x64`): eager arithmetic on device arrays stays in float64."""
        return x64()

    def pair_products(self, A: np.ndarray | jax.Array, rhs: np.ndarray | jax.Array) -> jax.Array:
        """``sum_r A[r, i] A[r, j] rhs[r, m]`` on the device (rows padded to whole tiles of ROW_TILE)."""
        with x64():
            rows = ((0, -A.shape[0] % ROW_TILE), (0, 0))
            A = jnp.pad(jnp.asarray(A), rows)
            return _cross3_jit(A, A, jnp.pad(jnp.asarray(rhs), rows))

    def power_method(self, T: np.ndarray, starts: np.ndarray, n_iter: int, tol: float) -> tuple[np.ndarray, ...]:
        """The deflated tensor power method as one compiled program on the device (float64).

        The components' loop is a ``scan`` and each phase of iterations a
        ``while_loop``, so the host waits once per decomposition. The tensor
        shape is (k, k, k) whatever the corpus: a second fit with the same
        ``k``, ``n_restarts`` and ``n_iter`` does not recompile.
        """
        with x64():
            found = _power_method(jnp.asarray(T, dtype=jnp.float64), jnp.asarray(starts, dtype=jnp.float64),
                                  jnp.asarray(tol, dtype=jnp.float64), n_iter=int(n_iter))
            return tuple(np.asarray(x) for x in found)
