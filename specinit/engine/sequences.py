"""Sequences in, and the sliding triples of a hidden Markov chain as three views.

With ``h = h_t`` the observations ``(x_{t-1}, x_t, x_{t+1})`` of an HMM are
conditionally independent given ``h`` ([1]_ Prop. 3.4): every sliding triple
of every sequence is one observation of a three-view mixture whose middle
view has the emission means. :func:`triple_views` builds those views from
data (one-hot symbols, in memory or as a 1-D ``dask.array``); the
population counterpart :func:`chain_population` gives the exact views of a
chain whose middle state is stationary.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 15 (2014), Prop. 3.4.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from specinit._validation import bad_argument, check_allocation, check_magnitude, integer_symbols, stored_array
from specinit.engine.backends import numba_kernel
from specinit.engine.sources import is_dask_array, is_jax_array
from specinit.engine.views import MultiViewPopulation, SummedViews, multiview_population

if TYPE_CHECKING:
    import dask.array
    from numpy.typing import ArrayLike

__all__ = ["ChainViews", "SequenceBatch", "TripleCounts", "as_sequences", "chain_population", "check_symbols",
           "forward_backward", "one_hot", "stationary", "triple_views"]

_EXPECTED = "a 1-D array (one sequence), a 2-D array (rows = sequences) or a list/tuple of 1-D arrays"


def as_sequences(sequences: ArrayLike | Sequence[ArrayLike], *, categorical: bool) -> list[np.ndarray]:
    """Validate one 1-D sequence, a 2-D array of equal-length rows, or a list/tuple of 1-D sequences.

    Parameters
    ----------
    sequences : array or list/tuple of 1-D arrays
        The sequences.
    categorical : bool
        Integer symbols (returned as int64) or real observations (float64).

    Returns
    -------
    list of ndarray

    Raises
    ------
    TypeError
        Not arrays of numbers.
    ValueError
        Empty input or sequences, NaN/inf, non-integer or negative symbols.
    """
    if isinstance(sequences, (list, tuple)):
        items = list(sequences)
    elif (isinstance(sequences, np.ndarray) or is_jax_array(sequences)) and np.asarray(sequences).dtype != object:
        array = np.asarray(sequences)
        if array.ndim not in (1, 2):
            raise bad_argument("sequences", None, _EXPECTED, array)
        items = [array] if array.ndim == 1 else list(array)
    else:
        raise bad_argument("sequences", None, _EXPECTED, sequences, kind=TypeError)
    if not items:
        raise bad_argument("sequences", None, "non-empty (at least one sequence)", sequences)
    out = []
    for i, item in enumerate(items):
        if not (isinstance(item, (list, tuple, np.ndarray)) or is_jax_array(item)):
            raise bad_argument("sequences", None, f"{_EXPECTED} (item {i} is not array-like)", item, kind=TypeError)
        array = np.asarray(item)
        if array.ndim != 1 or array.dtype.kind not in "biuf":
            raise bad_argument("sequences", None, f"{_EXPECTED} of numbers (item {i})", array, kind=TypeError)
        if array.size == 0:
            raise bad_argument("sequences", None, "sequences of length >= 1", f"an empty sequence at item {i}",
                               describe=False)
        if categorical:
            array = integer_symbols(array, "sequences", f" in item {i}")
        else:
            if not np.all(np.isfinite(array)):
                raise bad_argument("sequences", None, "finite observations", f"NaN or inf in item {i}", describe=False)
            array = array.astype(np.float64)
            check_magnitude(array, "sequences")
        out.append(array)
    return out


def check_symbols(seqs: list[np.ndarray], n_symbols: int) -> None:
    """Refuse symbols ``>= n_symbols``.

    Parameters
    ----------
    seqs : list of int arrays
    n_symbols : int
    """
    top = max(int(s.max()) for s in seqs)
    if top >= n_symbols:
        raise bad_argument("sequences", None, f"symbols in 0..{n_symbols - 1} (n_symbols = {n_symbols})",
                           f"the symbol {top}", describe=False)


def one_hot(symbols: np.ndarray, n_symbols: int) -> sp.csr_matrix:
    """One-hot rows (CSR) of integer symbols.

    Parameters
    ----------
    symbols : int array, shape (n,)
    n_symbols : int

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n, n_symbols)
    """
    n = symbols.size
    return sp.csr_matrix((np.ones(n), symbols, np.arange(n + 1)), shape=(n, n_symbols))


def stationary(transition: np.ndarray) -> np.ndarray:
    """Left eigenvector of a row-stochastic matrix for eigenvalue 1, normalized to sum one.

    Parameters
    ----------
    transition : ndarray, shape (k, k)

    Returns
    -------
    ndarray, shape (k,)
    """
    values, vectors = np.linalg.eig(transition.T)
    w = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return w / w.sum()


class ChainViews:
    """The three views of the sliding triples, and the law of the first observation.

    Attributes
    ----------
    views : list of 3 arrays or Dask arrays, or MultiViewPopulation
        One-hot (or numeric) views of ``x_{t-1}``, ``x_t``, ``x_{t+1}``
        (population: their exact means).
    first_mean : ndarray, shape (V,)
        ``E[x_1]`` (data: over the first observation of every sequence).
    counts : dict
        ``n_sequences``, ``n_triples``, ``n_short_sequences`` (length < 3,
        used for ``first_mean`` only); zeros for population moments.
    symbols : ndarray of int, optional
        The symbols that the views' columns stand for, where only the
        observed symbols are kept (``None``: columns ``0..V-1``).
    n_symbols : int, optional
        V, where ``symbols`` is given.
    """

    def __init__(self, views: Sequence[np.ndarray | sp.sparray | sp.spmatrix | dask.array.Array] | MultiViewPopulation,
                 first_mean: np.ndarray, counts: dict, symbols: np.ndarray | None = None,
                 n_symbols: int | None = None) -> None:
        self.views, self.first_mean, self.counts = views, np.asarray(first_mean, dtype=np.float64), dict(counts)
        self.symbols, self.n_symbols = symbols, n_symbols

    def expand(self, rows: np.ndarray) -> np.ndarray:
        """``rows`` over the views' columns as rows over all ``n_symbols`` (zeros for symbols never observed)."""
        if self.symbols is None:
            return rows
        out = np.zeros((rows.shape[0], self.n_symbols))
        out[:, self.symbols] = rows
        return out


def chain_population(init: ArrayLike, transition: ArrayLike, emission: ArrayLike) -> ChainViews:
    """Exact views of an HMM whose middle state ``h_2`` is stationary ([1]_ Prop. 3.4).

    The sliding triples of long sequences see a middle state distributed as
    the stationary law ``w`` of ``transition``; with it the view means are
    ``E[x_1 | h=j] = sum_i w_i T_ij / w_j O_i``, ``E[x_2 | h=j] = O_j`` and
    ``E[x_3 | h=j] = sum_l T_jl O_l`` (row-stochastic ``T``); ``E[x_1]`` of a
    sequence start is ``init @ emission``.

    Parameters
    ----------
    init : array, shape (k,)
    transition : array, shape (k, k), row-stochastic
    emission : array, shape (k, V)

    Returns
    -------
    ChainViews
        ``views`` is a :class:`~specinit.engine.views.MultiViewPopulation`.
    """
    init, T, O = (np.asarray(a, dtype=np.float64) for a in (init, transition, emission))
    w = stationary(T)
    previous = (T.T * w[None, :]) / w[:, None]  # row j: P(h_1 = . | h_2 = j)
    views = multiview_population([previous @ O, O, T @ O], w)
    return ChainViews(views, init @ O, {"n_sequences": 0, "n_triples": 0, "n_short_sequences": 0})


def triple_views(sequences: Sequence[ArrayLike] | dask.array.Array, n_symbols: int) -> ChainViews:
    """One-hot views of all sliding triples and the mean one-hot first symbol.

    Parameters
    ----------
    sequences : list of int arrays, or a 1-D dask.array
        Validated sequences (:func:`as_sequences`), or one long sequence as
        a Dask array (the views are then Dask arrays built block by block
        where the symbols live).
    n_symbols : int
        V.

    Returns
    -------
    ChainViews

    Raises
    ------
    ValueError
        No sequence of length >= 3.
    """
    if is_dask_array(sequences):
        views, first, n_triples = _dask_triple_views(sequences, n_symbols)
        return ChainViews(views, first, {"n_sequences": 1, "n_triples": n_triples, "n_short_sequences": 0})
    long = [s for s in sequences if s.size >= 3]
    if not long:
        raise bad_argument("sequences", None, "at least one sequence of length >= 3 (for the triples)",
                           f"lengths {sorted({s.size for s in sequences})}", describe=False)
    # Symbols never observed have zero rows and columns in every moment: the views keep the observed ones only,
    # so memory and time follow the data, not n_symbols.
    symbols = np.unique(np.concatenate(sequences))
    observed = symbols.size
    if observed < n_symbols:
        sequences = [np.searchsorted(symbols, s) for s in sequences]
        long = [s for s in sequences if s.size >= 3]
    views = [one_hot(np.concatenate([s[i: s.size - 2 + i] for s in long]), observed) for i in range(3)]
    first = np.bincount([s[0] for s in sequences], minlength=observed) / len(sequences)
    counts = {"n_sequences": len(sequences), "n_triples": views[0].shape[0],
              "n_short_sequences": len(sequences) - len(long)}
    if observed < n_symbols:
        return ChainViews(views, first, counts, symbols, n_symbols)
    return ChainViews(views, first, counts)



class TripleCounts:
    """The exact additive summary of categorical sequences: counts of their symbol triples and first symbols.

    ``triples[a, b, c]`` counts the sliding triples ``(x_{t-1}, x_t, x_{t+1})
    = (a, b, c)`` of the sequences of length >= 3, ``first[a]`` the sequences
    that start with ``a`` and ``seen[a]`` every occurrence of ``a``. The
    one-hot views of :func:`triple_views` have exactly these moments
    (``E[x_a x_b^T]`` are the triples' marginal tables divided by their
    number), so two summaries of disjoint sets of sequences add up (``+``) to
    that of their union and :meth:`chain_views` (the moments read from the
    counts, :class:`~specinit.engine.views.SummedViews`) is what
    :func:`triple_views` gives for all the sequences at once: sequences can
    arrive in batches.
    Memory: about three (V, V, V) float arrays while summaries merge and
    are read (refused over the memory budget, :func:`specinit.memory_limit`).

    Parameters
    ----------
    triples : ndarray, shape (V, V, V)
    first, seen : ndarray, shape (V,)
    n_sequences, n_short_sequences : int
    """

    def __init__(self, triples: ArrayLike, first: ArrayLike, seen: ArrayLike, n_sequences: int,
                 n_short_sequences: int) -> None:
        self.triples, self.first, self.seen = (np.asarray(a, dtype=np.float64) for a in (triples, first, seen))
        self.n_sequences, self.n_short_sequences = int(n_sequences), int(n_short_sequences)

    @property
    def n_symbols(self) -> int:
        return self.first.size

    @classmethod
    def from_sequences(cls, seqs: list, n_symbols: int, name: str = "sequences") -> "TripleCounts":
        """The summary of validated sequences (:func:`as_sequences`, symbols checked by :func:`check_symbols`).

        Raises
        ------
        MemoryError
            The (n_symbols,)^3 counts over the memory budget.
        """
        V = int(n_symbols)
        check_allocation(3 * 8.0 * V**3, name, f"the ({V}, {V}, {V}) counts of symbol triples (about three such "
                         "arrays while they are merged and read)")
        long = [s for s in seqs if s.size >= 3]
        codes = np.concatenate([(s[:-2] * V + s[1:-1]) * V + s[2:] for s in long]) if long else np.zeros(0, int)
        triples = np.bincount(codes, minlength=V**3).astype(np.float64).reshape(V, V, V)
        first = np.bincount([s[0] for s in seqs], minlength=V).astype(np.float64)
        seen = np.bincount(np.concatenate(seqs), minlength=V).astype(np.float64)
        return cls(triples, first, seen, len(seqs), len(seqs) - len(long))

    def __add__(self, other: "TripleCounts") -> "TripleCounts":
        if not isinstance(other, TripleCounts):
            return NotImplemented
        return TripleCounts(self.triples + other.triples, self.first + other.first, self.seen + other.seen,
                            self.n_sequences + other.n_sequences, self.n_short_sequences + other.n_short_sequences)

    def chain_views(self) -> ChainViews:
        """The views' moments and the law of the first symbol, over the observed symbols (as :func:`triple_views`).

        Raises
        ------
        ValueError
            No sequence of length >= 3.
        """
        n_triples = int(self.triples.sum())
        if n_triples == 0:
            raise bad_argument("sequences", None, "at least one sequence of length >= 3 (for the triples)",
                               "none", describe=False)
        symbols = np.flatnonzero(self.seen)
        observed = np.ix_(symbols, symbols, symbols)
        counts = {"n_sequences": self.n_sequences, "n_triples": n_triples,
                  "n_short_sequences": self.n_short_sequences}
        table = self.triples[observed]
        views = SummedViews(n_triples, table.shape, {(0, 1): table.sum(axis=2), (0, 2): table.sum(axis=1),
                                                     (1, 2): table.sum(axis=0)}, {(0, 1, 2): table})
        first = self.first[symbols] / self.n_sequences
        if symbols.size < self.n_symbols:
            return ChainViews(views, first, counts, symbols, self.n_symbols)
        return ChainViews(views, first, counts)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Named arrays that :meth:`from_arrays` reads back (an estimate's ``state`` saves them)."""
        return {"triples": self.triples, "first": self.first, "seen": self.seen,
                "sequences": np.asarray([self.n_sequences, self.n_short_sequences])}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], name: str = "estimate") -> "TripleCounts":
        """The summary saved by :meth:`to_arrays`, every array checked (:func:`~specinit._validation.stored_array`:
        a :class:`~specinit._validation.StoredArrayError` names the damaged one)."""
        what = "triple counts"
        first = stored_array(arrays, "first", what, name, ndim=1, nonnegative=True)
        V = first.shape[0]
        triples = stored_array(arrays, "triples", what, name, shape=(V, V, V), nonnegative=True)
        seen = stored_array(arrays, "seen", what, name, shape=(V,), nonnegative=True)
        n_sequences, n_short = stored_array(arrays, "sequences", what, name, shape=(2,), nonnegative=True)
        return cls(triples, first, seen, int(n_sequences), int(n_short))


def _window(block, following, need: int):
    """``block`` followed by the first ``need`` symbols of the next block(s) (the triples crossing the boundary)."""
    tail = np.concatenate([np.asarray(f) for f in following])[:need] if following else np.zeros(0, dtype=np.int64)
    return np.concatenate([np.asarray(block), tail])


def _one_hot_shift(window, shift: int, n_rows: int, n_symbols: int):
    """One-hot rows of ``window[shift : shift + n_rows]`` (CSR), refusing symbols outside ``0..n_symbols-1``."""
    import scipy.sparse as sp

    symbols = integer_symbols(np.asarray(window[shift : shift + n_rows]), "sequences", " (Dask block)")
    if symbols.size and symbols.max() >= n_symbols:
        raise bad_argument("sequences", None, f"symbols in 0..{n_symbols - 1}",
                           f"symbols from {symbols.min()} to {symbols.max()}", describe=False)
    return sp.csr_matrix((np.ones(n_rows), symbols, np.arange(n_rows + 1)), shape=(n_rows, n_symbols))


def _dask_triple_views(symbols, n_symbols: int):
    """The three one-hot views of all sliding triples of ONE long sequence held as a 1-D Dask array.

    Block ``j`` of view ``i`` holds the one-hot rows of ``x_{t+i}`` for the
    triples starting in block ``j`` of the sequence; the two symbols that a
    block's last triples need from the next block are read by that block's
    task, so no symbol is duplicated on the client and the views share the
    row chunks of the sequence (minus the last two positions).

    Parameters
    ----------
    symbols : dask.array.Array
        1-D integer symbols ``0..n_symbols-1`` of length T >= 3.
    n_symbols : int
        V.

    Returns
    -------
    views : list of 3 dask.array.Array
        (T - 2, V) CSR row blocks.
    first : ndarray, shape (V,)
        One-hot first symbol.
    n_triples : int
        T - 2.

    Raises
    ------
    ValueError
        Not one-dimensional, shorter than 3, or unknown chunk sizes.

    References
    ----------
    .. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
       learning latent variable models", JMLR 2014, Prop. 3.4 (triples of an HMM as three views).
    """
    import dask
    import dask.array as da
    import scipy.sparse as sp

    if symbols.ndim != 1:
        raise bad_argument("sequences", None, "a one-dimensional Dask array (one long sequence)",
                           f"{symbols.ndim} dimensions", describe=False)
    sizes = symbols.chunks[0]
    if any(math.isnan(s) for s in sizes):
        raise bad_argument("sequences", None, "a Dask array with known chunk sizes (call compute_chunk_sizes())",
                           "unknown chunk sizes", describe=False)
    T = int(sum(sizes))
    if T < 3:
        raise bad_argument("sequences", None, "a sequence of length >= 3 (for the triples)", f"length {T}",
                           describe=False)
    blocks = list(symbols.to_delayed().ravel())
    starts = np.concatenate([[0], np.cumsum(sizes)])
    meta = sp.csr_matrix((0, n_symbols))
    views = [[], [], []]
    for j, block in enumerate(blocks):
        n_rows = min(int(starts[j + 1]), T - 2) - int(starts[j])
        if n_rows <= 0:
            continue
        # The (at most two) symbols after this block may span several tiny blocks.
        following, have, m = [], 0, j + 1
        while have < 2 and m < len(blocks):
            following.append(blocks[m])
            have += sizes[m]
            m += 1
        window = dask.delayed(_window)(block, following, 2)
        for i in range(3):
            views[i].append(da.from_delayed(dask.delayed(_one_hot_shift)(window, i, n_rows, n_symbols),
                                            shape=(n_rows, n_symbols), dtype=np.float64, meta=meta))
    views = [da.concatenate(v) if len(v) > 1 else v[0] for v in views]
    first_symbol = int(symbols[0].compute())
    if not 0 <= first_symbol < n_symbols:
        raise bad_argument("sequences", None, f"symbols in 0..{n_symbols - 1}", f"first symbol {first_symbol}",
                           describe=False)
    first = np.zeros(n_symbols)
    first[first_symbol] = 1.0
    return views, first, T - 2


class SequenceBatch:
    """Ragged sequences in time-major order, for :func:`forward_backward`.

    Sorted by decreasing length, the sequences still running at step ``t``
    are a prefix of the batch; their observations at ``t`` are stored
    contiguously (``values[offsets[t]: offsets[t] + active[t]]``), so every
    time step is one NumPy operation on all running sequences and nothing is
    padded.

    Parameters
    ----------
    sequences : list of 1-D arrays
        Validated observations (length >= 1 each; int symbols or floats).
    """

    def __init__(self, sequences: Sequence[np.ndarray]) -> None:
        lengths = np.array([s.size for s in sequences], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        self.lengths = lengths[order]
        T = int(self.lengths[0])
        self.active = np.searchsorted(-self.lengths, -np.arange(1, T + 1), side="right")
        self.offsets = np.concatenate([[0], np.cumsum(self.active)])
        self.values = np.empty(int(self.offsets[-1]), dtype=sequences[0].dtype)
        # The i-th longest sequence is running at its steps 0..L_i - 1, where it is the i-th of the active ones.
        for rank, i in enumerate(order):
            self.values[self.offsets[: lengths[i]] + rank] = sequences[i]

    @property
    def n_observations(self) -> int:
        """Total number of observations."""
        return int(self.values.size)


def forward_backward(batch: SequenceBatch, init: np.ndarray, transition: np.ndarray,
                     likelihood: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Expected counts of an HMM over ragged sequences (scaled forward-backward, [2]_ eqs. 91-93).

    With Numba installed (extra ``[fast]``) the recursions run compiled
    (:func:`specinit.engine.backends.numba.forward_backward`); otherwise
    each time step is one NumPy operation over the sequences running at it.
    Its log-likelihood is that of the JAX forward algorithm of
    :mod:`specinit.distributions.hmm` (the NumPyro programs' density, tested
    equal): EM on the host needs the posterior counts, unpadded.

    Parameters
    ----------
    batch : SequenceBatch
        The sequences, time-major.
    init, transition : ndarray
        ``(k,)`` and ``(k, k)`` row-stochastic, strictly positive.
    likelihood : ndarray, shape (n_observations, k)
        ``p(x | h = i)`` of every observation in the batch's time-major order.

    Returns
    -------
    init_counts : ndarray (k,)
    transition_counts : ndarray (k, k)
    gamma : ndarray (n_observations, k)
        Posterior state probabilities, time-major.
    log_likelihood : float

    References
    ----------
    .. [2] Rabiner, "A tutorial on hidden Markov models and selected applications in speech
       recognition", Proc. IEEE 77 (1989), eqs. 19-27, 91-93.
    """
    compiled = numba_kernel("forward_backward")
    if compiled is not None:
        return compiled(batch, init, transition, likelihood)
    tiny = np.finfo(np.float64).tiny
    active, off = batch.active, batch.offsets
    T = active.size
    k = init.size
    alpha = np.empty((batch.n_observations, k))
    scale = np.empty(batch.n_observations)
    a = init * likelihood[: active[0]]
    for t in range(T):
        m, o = active[t], off[t]
        if t:
            a = (alpha[off[t - 1]: off[t - 1] + m] @ transition) * likelihood[o: o + m]
        c = a.sum(axis=1)
        scale[o: o + m] = c
        alpha[o: o + m] = a / np.maximum(c, tiny)[:, None]
    log_likelihood = float(np.sum(np.log(np.maximum(scale, tiny))))
    trans_counts = np.zeros((k, k))
    beta = np.ones((active[0], k))
    for t in range(T - 1, -1, -1):
        m, o = active[t], off[t]
        beta[(active[t + 1] if t + 1 < T else 0): m] = 1.0  # sequences whose last step is t
        if t:
            eb = likelihood[o: o + m] * beta[:m] / scale[o: o + m, None]
            previous = alpha[off[t - 1]: off[t - 1] + m]
            trans_counts += transition * (previous.T @ eb)
        alpha[o: o + m] *= beta[:m]  # alpha is now gamma at step t
        if t:
            beta[:m] = eb @ transition.T
    return alpha[: active[0]].sum(axis=0), trans_counts, alpha, log_likelihood
