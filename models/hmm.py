"""Hidden Markov models: NumPyro program, exact inference and moment map.

A hidden chain ``h_1 -> h_2 -> ...`` on ``k`` states starts from ``init``
and moves with ``transition[i, j] = P(h_{t+1} = j | h_t = i)``; each state
emits ``x_t`` from row ``h_t`` of ``emission`` (categorical symbols
``0..V-1``) or from ``Normal(loc[h_t], scale[h_t])`` (Gaussian variant).

Convention: ``transition`` is ROW-stochastic (row = from-state), as in
NumPyro, hmmlearn and most software. [1]_ Prop. 3.4 writes the transition
matrix column-stochastic (``T_{ij} = P(h_{t+1} = i | h_t = j)``); its ``T``
is our ``transition.T`` and its ``O`` is our ``emission.T``.

Hidden states are summed out by the forward algorithm in log space
(``jax.lax.scan``), packaged as the distributions :class:`CategoricalHMM`
and :class:`GaussianHMM` whose ``log_prob`` is one number per sequence, so
``numpyro.infer.log_likelihood`` is per sequence. Sequences of different
lengths are padded to a common length and masked by ``lengths``.

Method of moments ([1]_ Prop. 3.4): with ``h = h_2`` the observations
``x_1, x_2, x_3`` are conditionally independent given ``h`` and

.. math::

    E[x_2 | h = j] = O_j, \\qquad
    E[x_3 | h = j] = \\sum_l T_{jl} O_l, \\qquad
    E[x_1 | h = j] = \\sum_i \\frac{\\pi_i T_{ij}}{w_j} O_i

(row-stochastic ``T``, ``O_j`` = row ``j`` of ``emission``, ``pi`` the law
of ``h_1``, ``w = pi T`` the law of ``h``). :func:`spectral` feeds every
sliding triple ``(x_{t-1}, x_t, x_{t+1})`` of every sequence as three
one-hot views to :func:`specinit.multiview.fit_multiview` with the middle
view as target: ``emission`` is the middle view's means; ``transition``
solves ``means_3 = T O`` by least squares in k dimensions; ``init`` solves
``E[x_1] = init O`` from the first symbol of every sequence. Every
estimate is projected strictly inside the simplex.

References
----------
.. [1] Anandkumar, Ge, Hsu, Kakade, Telgarsky. "Tensor decompositions for
   learning latent variable models", JMLR 15 (2014), Prop. 3.4, Sec. 3.3.
.. [2] Rabiner. "A tutorial on hidden Markov models and selected
   applications in speech recognition", Proc. IEEE 77 (1989), eqs. 19-20
   (forward), 27 (posterior marginals), 30-35 (Viterbi).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import scipy.sparse as sp
from jax import lax, random
from numpyro.distributions import constraints

from specinit._validation import bad_argument, check_choice, check_int, check_positive
from specinit.estimate import SpectralEstimate
from specinit.multiview import ViewMoments, conditional_means, fit_multiview, multiview_population
from specinit.recovery import project_to_simplex

__all__ = [
    "CategoricalHMM",
    "GaussianHMM",
    "model",
    "gaussian_model",
    "pad_sequences",
    "posterior_marginals",
    "viterbi",
    "HMMMoments",
    "population_moments",
    "spectral",
    "spectral_from_moments",
    "gaussian_spectral",
]


# ------------------------------------------------------------------------------------------------
# Forward algorithm and distributions
# ------------------------------------------------------------------------------------------------
@partial(jax.jit, static_argnums=4)
def _forward(log_init, log_trans, log_emit, lengths, reduce):
    """Forward recursion in log space; ``reduce`` = logsumexp (likelihood) or max (Viterbi score).

    ``log_emit`` has shape ``(..., T, k)``; steps ``t >= lengths`` leave the
    forward variable unchanged (padding). Returns shape ``(...)``.
    """
    steps = jnp.moveaxis(log_emit, -2, 0)
    lengths = jnp.broadcast_to(lengths, log_emit.shape[:-2])

    def body(alpha, inputs):
        t, emit = inputs
        new = reduce(alpha[..., :, None] + log_trans, axis=-2) + emit
        return jnp.where((t < lengths)[..., None], new, alpha), None

    alpha, _ = lax.scan(body, log_init + steps[0], (jnp.arange(1, steps.shape[0]), steps[1:]))
    return reduce(alpha, axis=-1)


_ROWS_SIMPLEX = constraints.independent(constraints.simplex, 1)


class _HMM(dist.Distribution):
    """Shared forward likelihood and ancestral sampler; subclasses define the emissions."""

    def __init__(self, init, transition, n_steps, lengths, validate_args=None):
        self.init, self.transition = jnp.asarray(init), jnp.asarray(transition)
        self.n_steps = int(n_steps)
        self.lengths = jnp.full((), self.n_steps) if lengths is None else jnp.asarray(lengths)
        super().__init__(batch_shape=jnp.shape(self.lengths), event_shape=(self.n_steps,), validate_args=validate_args)

    def _log_emission(self, value):
        raise NotImplementedError

    def _emit(self, key, states):
        raise NotImplementedError

    def log_prob(self, value):
        log_emit = self._log_emission(value)
        return _forward(jnp.log(self.init), jnp.log(self.transition), log_emit, self.lengths, jax.nn.logsumexp)

    def sample(self, key, sample_shape=()):
        return _draw(self, key, tuple(sample_shape))

    def _draw(self, key, sample_shape):
        shape = sample_shape + self.batch_shape
        key_start, key_move, key_emit = random.split(key, 3)
        cumulative = jnp.cumsum(self.transition, axis=-1)

        def step(state, uniform):
            state = _inverse_cdf(cumulative[state], uniform)
            return state, state

        start = _inverse_cdf(jnp.cumsum(self.init), random.uniform(key_start, shape))
        _, rest = lax.scan(step, start, random.uniform(key_move, (self.n_steps - 1, *shape)))
        states = jnp.moveaxis(jnp.concatenate([start[None], rest]), 0, -1)
        obs = self._emit(key_emit, states)
        return jnp.where(jnp.arange(self.n_steps) < self.lengths[..., None], obs, jnp.zeros((), obs.dtype))


def _inverse_cdf(cumulative, uniform):
    """Index drawn by inverse-CDF sampling from rows of cumulative probabilities (``uniform`` in [0, 1))."""
    return jnp.minimum(jnp.sum(uniform[..., None] >= cumulative, axis=-1), cumulative.shape[-1] - 1)


@partial(jax.jit, static_argnums=2)
def _draw(hmm, key, sample_shape):
    """Ancestral sampling, compiled once per distribution type and shape."""
    return hmm._draw(key, sample_shape)


class CategoricalHMM(_HMM):
    """HMM with categorical emissions, hidden states summed out.

    Parameters
    ----------
    init : array, shape (k,)
        Law of the first hidden state.
    transition : array, shape (k, k)
        Row-stochastic: ``transition[i, j] = P(h_{t+1} = j | h_t = i)``.
    emission : array, shape (k, V)
        ``emission[i, v] = P(x_t = v | h_t = i)``.
    n_steps : int
        Padded sequence length T (the event shape).
    lengths : array of int, optional
        True length (1..T) of each sequence; its shape is the batch shape.
        Default: one sequence of length T. Entries past a sequence's length
        are ignored by ``log_prob`` and are 0 in samples.

    Notes
    -----
    ``log_prob(x)`` is the exact marginal log-likelihood
    ``log sum_h p(h, x)`` by the forward algorithm in log space ([2]_ eq. 20).
    """

    arg_constraints = {"init": constraints.simplex, "transition": _ROWS_SIMPLEX,
                       "emission": _ROWS_SIMPLEX}
    pytree_data_fields = ("init", "transition", "emission", "lengths")
    pytree_aux_fields = ("n_steps",)

    def __init__(self, init, transition, emission, n_steps, lengths=None, *, validate_args=None):
        self.emission = jnp.asarray(emission)
        super().__init__(init, transition, n_steps, lengths, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self):
        return constraints.independent(constraints.integer_interval(0, jnp.shape(self.emission)[-1] - 1), 1)

    def _log_emission(self, value):
        return jnp.log(self.emission).T[jnp.asarray(value)]

    def _emit(self, key, states):
        return _inverse_cdf(jnp.cumsum(self.emission, axis=-1)[states], random.uniform(key, jnp.shape(states)))


class GaussianHMM(_HMM):
    """HMM with scalar Gaussian emissions ``x_t | h_t = i ~ Normal(loc[i], scale[i])``.

    Parameters are those of :class:`CategoricalHMM` with ``loc`` (k,) and
    ``scale`` (k,) in place of ``emission``; padded entries are 0.0 in samples.
    """

    arg_constraints = {"init": constraints.simplex, "transition": _ROWS_SIMPLEX,
                       "loc": constraints.real_vector, "scale": constraints.independent(constraints.positive, 1)}
    support = constraints.independent(constraints.real, 1)
    pytree_data_fields = ("init", "transition", "loc", "scale", "lengths")
    pytree_aux_fields = ("n_steps",)

    def __init__(self, init, transition, loc, scale, n_steps, lengths=None, *, validate_args=None):
        self.loc, self.scale = jnp.asarray(loc), jnp.asarray(scale)
        super().__init__(init, transition, n_steps, lengths, validate_args=validate_args)

    def _log_emission(self, value):
        return dist.Normal(self.loc, self.scale).log_prob(jnp.asarray(value)[..., None])

    def _emit(self, key, states):
        return self.loc[states] + self.scale[states] * random.normal(key, jnp.shape(states))


# ------------------------------------------------------------------------------------------------
# Input handling
# ------------------------------------------------------------------------------------------------
def _as_sequence_list(sequences, func: str, *, categorical: bool) -> list[np.ndarray]:
    """Validate one 1-D sequence, a 2-D array of equal-length rows, or a list/tuple of 1-D sequences."""
    expected = "a 1-D array (one sequence), a 2-D array (rows = sequences) or a list/tuple of 1-D arrays"
    if isinstance(sequences, (list, tuple)):
        items = list(sequences)
    elif isinstance(sequences, (np.ndarray, jax.Array)) and np.asarray(sequences).dtype != object:
        array = np.asarray(sequences)
        if array.ndim not in (1, 2):
            raise bad_argument("sequences", func, expected, array)
        items = [array] if array.ndim == 1 else list(array)
    else:
        raise bad_argument("sequences", func, expected, sequences, kind=TypeError)
    if not items:
        raise bad_argument("sequences", func, "non-empty (at least one sequence)", sequences)
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, (list, tuple, np.ndarray, jax.Array)):
            raise bad_argument("sequences", func, f"{expected} (item {i} is not array-like)", item, kind=TypeError)
        array = np.asarray(item)
        if array.ndim != 1 or array.dtype.kind not in "biuf":
            raise bad_argument("sequences", func, f"{expected} of numbers (item {i})", array, kind=TypeError)
        if array.size == 0:
            raise bad_argument("sequences", func, "sequences of length >= 1", f"an empty sequence at item {i}", describe=False)
        if not np.all(np.isfinite(array)):
            raise bad_argument("sequences", func, "finite observations", f"NaN or inf in item {i}", describe=False)
        if categorical:
            if np.any(array != np.round(array)):
                bad = array[array != np.round(array)][0]
                raise bad_argument("sequences", func, "integer symbols", f"the value {bad:g} in item {i}", describe=False)
            if np.any(array < 0):
                raise bad_argument("sequences", func, "non-negative symbols", f"the value {array.min():g} in item {i}",
                                   describe=False)
            array = array.astype(np.int64)
        else:
            array = array.astype(np.float64)
        out.append(array)
    return out


def _check_symbols(seqs: list[np.ndarray], n_symbols: int, func: str) -> None:
    top = max(int(s.max()) for s in seqs)
    if top >= n_symbols:
        raise bad_argument("sequences", func, f"symbols in 0..{n_symbols - 1} (n_symbols = {n_symbols})",
                           f"the symbol {top}", describe=False)


def pad_sequences(sequences, *, categorical: bool = True):
    """Stack ragged sequences into a padded array plus their lengths.

    Parameters
    ----------
    sequences : array or list of 1-D arrays
        See :func:`spectral`.
    categorical : bool
        Integer symbols (True) or real observations (False).

    Returns
    -------
    padded : ndarray, shape (N, T)
        Zero-padded on the right (int64 or float64).
    lengths : ndarray of int64, shape (N,)
    """
    seqs = _as_sequence_list(sequences, "pad_sequences", categorical=categorical)
    lengths = np.array([s.size for s in seqs], dtype=np.int64)
    padded = np.zeros((len(seqs), lengths.max()), dtype=seqs[0].dtype)
    for row, s in zip(padded, seqs):
        row[: s.size] = s
    return padded, lengths


# ------------------------------------------------------------------------------------------------
# NumPyro models
# ------------------------------------------------------------------------------------------------
def _plate_shape(sequences, lengths, func):
    """(observations or None, lengths) for the ``sequences`` plate."""
    if sequences is not None:
        sequences = jnp.asarray(sequences)
        if sequences.ndim == 1:
            sequences = sequences[None]
        lengths = jnp.full(sequences.shape[0], sequences.shape[1]) if lengths is None else jnp.asarray(lengths)
        return sequences, lengths, sequences.shape[1]
    if lengths is None:
        raise bad_argument("lengths", func, "given (one length per sequence) when sequences is None, to generate data", lengths)
    lengths = np.asarray(lengths)
    return None, jnp.asarray(lengths), int(lengths.max())


def model(sequences=None, *, k: int, n_symbols: int | None = None, lengths=None, concentration: float = 1.0):
    """NumPyro HMM with categorical emissions, hidden states summed out.

    Parameters
    ----------
    sequences : int array, shape (N, T) or (T,), optional
        Observed symbols in ``0..n_symbols-1``, zero-padded past each
        sequence's length (:func:`pad_sequences`). ``None`` generates
        sequences of lengths ``lengths`` (``numpyro.infer.Predictive``).
    k : int
        Number of hidden states.
    n_symbols : int, optional
        V; needed only when ``sequences`` is None (otherwise
        ``max(sequences) + 1`` would be a guess, so it is still preferred).
    lengths : int array, shape (N,), optional
        True lengths; default: every row is full length.
    concentration : float
        Symmetric Dirichlet concentration of ``init`` and of every row of
        ``transition`` and ``emission``.

    Sites
    -----
    ``init`` (k,); ``transition`` (k, k) and ``emission`` (k, V) in plate
    ``states`` (Dirichlet rows); observed ``observations`` (N, T) in plate
    ``sequences`` with a :class:`CategoricalHMM` likelihood (one log-density
    per sequence).
    """
    func = "hmm.model"
    sequences, lengths, n_steps = _plate_shape(sequences, lengths, func)
    if n_symbols is None:
        if sequences is None:
            raise bad_argument("n_symbols", func, "given when sequences is None, to generate data", n_symbols)
        n_symbols = int(jnp.max(sequences)) + 1
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        emission = numpyro.sample("emission", dist.Dirichlet(jnp.full(n_symbols, concentration)))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", CategoricalHMM(init, transition, emission, n_steps, lengths), obs=sequences)


def gaussian_model(sequences=None, *, k: int, lengths=None, concentration: float = 1.0,
                   loc_scale: float = 10.0, scale_scale: float = 5.0):
    """NumPyro HMM with scalar Gaussian emissions (sites ``loc``, ``scale`` per state).

    Parameters are those of :func:`model` (``sequences`` real-valued);
    ``loc ~ Normal(0, loc_scale)`` and ``scale ~ HalfNormal(scale_scale)`` per
    state. Sites: ``init`` (k,); ``transition`` (k, k), ``loc`` (k,),
    ``scale`` (k,) in plate ``states``; observed ``observations`` in plate
    ``sequences`` with a :class:`GaussianHMM` likelihood.
    """
    sequences, lengths, n_steps = _plate_shape(sequences, lengths, "hmm.gaussian_model")
    init = numpyro.sample("init", dist.Dirichlet(jnp.full(k, concentration)))
    with numpyro.plate("states", k):
        transition = numpyro.sample("transition", dist.Dirichlet(jnp.full(k, concentration)))
        loc = numpyro.sample("loc", dist.Normal(0.0, loc_scale))
        scale = numpyro.sample("scale", dist.HalfNormal(scale_scale))
    with numpyro.plate("sequences", lengths.shape[0]):
        numpyro.sample("observations", GaussianHMM(init, transition, loc, scale, n_steps, lengths), obs=sequences)


# ------------------------------------------------------------------------------------------------
# Exact inference given parameters
# ------------------------------------------------------------------------------------------------
def _distribution_for(sequences, params, func):
    """(distribution, padded observations, lengths, single) for ``params`` of either emission family."""
    params = getattr(params, "params", params)
    if not isinstance(params, dict) or not {"init", "transition"} <= set(params):
        raise bad_argument("params", func, "a dict (or SpectralEstimate) with 'init', 'transition' and 'emission' "
                           "or 'loc' and 'scale'", params, kind=TypeError)
    categorical = "emission" in params
    if not categorical and not {"loc", "scale"} <= set(params):
        raise bad_argument("params", func, "emission parameters ('emission', or 'loc' and 'scale')", sorted(params))
    single = isinstance(sequences, (np.ndarray, jax.Array)) and np.ndim(sequences) == 1
    padded, lengths = pad_sequences(sequences, categorical=categorical)
    init, transition = jnp.asarray(params["init"]), jnp.asarray(params["transition"])
    if categorical:
        emission = jnp.asarray(params["emission"])
        _check_symbols([padded.ravel()], emission.shape[-1], func)
        hmm = CategoricalHMM(init, transition, emission, padded.shape[1], lengths)
    else:
        hmm = GaussianHMM(init, transition, jnp.asarray(params["loc"]), jnp.asarray(params["scale"]), padded.shape[1], lengths)
    return hmm, padded, lengths, single


def _state_scores(sequences, params, reduce, func):
    """Gradient of the (log-sum-exp or max) forward score with respect to the log-emissions."""
    hmm, padded, lengths, single = _distribution_for(sequences, params, func)

    def score(log_emit):
        return _forward(jnp.log(hmm.init), jnp.log(hmm.transition), log_emit, hmm.lengths, reduce).sum()

    grads = np.asarray(jax.grad(score)(hmm._log_emission(padded)), dtype=np.float64)
    return [g[:n] for g, n in zip(grads, lengths)], single


def posterior_marginals(sequences, params):
    """Posterior state marginals ``P(h_t = i | x_{1:T})`` (forward-backward).

    Computed as the gradient of the forward log-likelihood with respect to
    the log-emission terms, which equals the forward-backward product
    ``alpha_t(i) beta_t(i) / p(x)`` ([2]_ eq. 27) and shares the forward
    pass of the likelihood. Computed in JAX's default float dtype (float32
    unless x64 is enabled): entries are accurate to about 1e-6.

    Parameters
    ----------
    sequences : 1-D array or list of 1-D arrays
        Symbols (categorical) or real observations (Gaussian).
    params : dict or SpectralEstimate
        ``init``, ``transition`` and ``emission`` (categorical) or ``loc``
        and ``scale`` (Gaussian).

    Returns
    -------
    ndarray, shape (T, k), or list of them
        One array per sequence (a single array for a 1-D input); rows sum to one.
    """
    out, single = _state_scores(sequences, params, jax.nn.logsumexp, "hmm.posterior_marginals")
    return out[0] if single else out


def viterbi(sequences, params):
    """Most probable state path ``argmax_h p(h, x)`` ([2]_ eqs. 30-35).

    The max-product forward score is piecewise linear in the log-emission
    terms; its gradient is the indicator of the optimal path, so the
    back-tracking pass is the reverse-mode sweep of the max-product forward
    recursion (paths are unique for parameters in general position).

    Parameters and input forms are those of :func:`posterior_marginals`.

    Returns
    -------
    ndarray of int64, shape (T,), or list of them
    """
    out, single = _state_scores(sequences, params, jnp.max, "hmm.viterbi")
    paths = [np.argmax(g, axis=1).astype(np.int64) for g in out]
    return paths[0] if single else paths


# ------------------------------------------------------------------------------------------------
# Method of moments
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class HMMMoments:
    """What :func:`spectral_from_moments` needs: the three-view moments and the law of ``x_1``.

    Attributes
    ----------
    views : ViewMoments or MultiViewPopulation
        Cross moments of ``(x_{t-1}, x_t, x_{t+1})`` (empirical: all sliding
        triples; population: a stationary chain).
    first_mean : ndarray, shape (d,)
        ``E[x_1]`` (empirical: over the first observation of every sequence).
    counts : dict
        ``n_sequences``, ``n_triples``, ``n_short_sequences`` (length < 3, used
        for ``first_mean`` only); zeros for population moments.
    """

    views: object
    first_mean: np.ndarray
    counts: dict


def _stationary(transition: np.ndarray) -> np.ndarray:
    """Left eigenvector of a row-stochastic matrix for eigenvalue 1, normalized to sum one."""
    values, vectors = np.linalg.eig(transition.T)
    w = np.real(vectors[:, np.argmin(np.abs(values - 1.0))])
    return w / w.sum()


def population_moments(init, transition, emission) -> HMMMoments:
    """Exact moments of an HMM whose middle state ``h_2`` is stationary ([1]_ Prop. 3.4).

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
    HMMMoments
        For :func:`spectral_from_moments` (exact recovery checks) and for
        :func:`specinit.multiview.fit_multiview` (``.views``).
    """
    init, T, O = (np.asarray(a, dtype=np.float64) for a in (init, transition, emission))
    w = _stationary(T)
    previous = (T.T * w[None, :]) / w[:, None]  # row j: P(h_1 = . | h_2 = j)
    views = multiview_population([previous @ O, O, T @ O], w)
    return HMMMoments(views, init @ O, {"n_sequences": 0, "n_triples": 0, "n_short_sequences": 0})


def _one_hot(symbols: np.ndarray, n_symbols: int) -> sp.csr_matrix:
    n = symbols.size
    return sp.csr_matrix((np.ones(n), symbols, np.arange(n + 1)), shape=(n, n_symbols))


def _triple_moments(seqs: list[np.ndarray], n_symbols: int, func: str) -> HMMMoments:
    """One-hot views of all sliding triples, and the mean one-hot first symbol."""
    long = [s for s in seqs if s.size >= 3]
    if not long:
        raise bad_argument("sequences", func, "at least one sequence of length >= 3 (for the triples)",
                           f"lengths {sorted({s.size for s in seqs})}", describe=False)
    views = ViewMoments([_one_hot(np.concatenate([s[i: s.size - 2 + i] for s in long]), n_symbols) for i in range(3)])
    first = np.bincount([s[0] for s in seqs], minlength=n_symbols) / len(seqs)
    counts = {"n_sequences": len(seqs), "n_triples": views.n_observations, "n_short_sequences": len(seqs) - len(long)}
    return HMMMoments(views, first, counts)


def _solve_rows(emission: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares ``X`` with ``X @ emission ~= targets`` (k-dimensional unknowns per row), and the relative residual."""
    solution = np.linalg.lstsq(emission.T, np.atleast_2d(targets).T, rcond=None)[0].T
    residual = np.linalg.norm(solution @ emission - targets) / max(np.linalg.norm(targets), np.finfo(float).tiny)
    return solution, float(residual)


def _fit_chain(moments: HMMMoments, k: int, func: str, method: str, seed, floor: float, options: dict,
               approach: str = "symmetric"):
    """Multi-view fit around the middle state, then (init, transition, raw emission) and diagnostics."""
    approach = check_choice(approach, "approach", func, ("symmetric", "jennrich"))
    fit = fit_multiview(moments.views, k, target=1, method=method, approach=approach, seed=seed, **options)
    raw_emission = fit.means[1]
    transition, trans_residual = _solve_rows(raw_emission, fit.means[2])
    init, init_residual = _solve_rows(raw_emission, moments.first_mean)
    transition, trans_report = project_to_simplex(transition, floor)
    init, init_report = project_to_simplex(init, floor)
    diagnostics = {
        **moments.counts,
        "middle_state_weights": fit.weights,
        "transition_residual": trans_residual,
        "init_residual": init_residual,
        "transition_negative_mass": trans_report["negative_mass"],
        "init_negative_mass": float(init_report["negative_mass"][0]),
        **fit.diagnostics,
    }
    return init[0], transition, raw_emission, fit, diagnostics


def spectral_from_moments(moments: HMMMoments, k: int, *, method: str = "tpm", approach: str = "symmetric", seed=0,
                          floor: float = 1e-3, **options) -> SpectralEstimate:
    """Recover ``init``, ``transition``, ``emission`` from :class:`HMMMoments` (data or population).

    ``approach`` is that of :func:`spectral`.
    """
    func = "hmm.spectral"
    floor = check_positive(floor, "floor", func)
    init, transition, raw_emission, _, diagnostics = _fit_chain(moments, k, func, method, seed, floor, options,
                                                                approach)
    emission, report = project_to_simplex(raw_emission, floor)
    diagnostics["emission_negative_mass"] = report["negative_mass"]
    return SpectralEstimate("hmm", {"init": init, "transition": transition, "emission": emission}, diagnostics)


def spectral(sequences, k: int, n_symbols: int, *, method: str = "tpm", approach: str = "symmetric", seed=0,
             floor: float = 1e-3, **options) -> SpectralEstimate:
    """Method-of-moments estimate of a categorical HMM ([1]_ Prop. 3.4).

    Parameters
    ----------
    sequences : 1-D int array, 2-D int array or list/tuple of 1-D int arrays
        One sequence, equal-length sequences (rows) or ragged sequences of
        symbols in ``0..n_symbols-1``. Sequences shorter than 3 inform only
        ``init`` (counted in ``diagnostics["n_short_sequences"]``).
    k : int
        Number of hidden states, ``1 <= k <= n_symbols``.
    n_symbols : int
        V, the number of distinct symbols.
    method : {"tpm", "svtd", "eca", "als"}
        Tensor decomposition (:mod:`specinit.decompose`); ``approach="symmetric"`` only.
    approach : {"symmetric", "jennrich"}
        Passed to :func:`specinit.multiview.fit_multiview`. ``"symmetric"``
        (default) whitens the symmetrized second moment and raises
        :class:`specinit.whitening.IndefiniteMomentError` when it is not
        positive semi-definite (the data are then not a k-state HMM).
        ``"jennrich"`` (observable operators, simultaneous diagonalization)
        needs no PSD moment and warns (RuntimeWarning) when the operators are
        far from simultaneously diagonalizable or a state weight is not
        positive. There is deliberately no automatic fallback from one to the
        other: on data far from the model (e.g. raw English letters with
        ``k = 2``) ``"jennrich"`` returns an estimate, but not a meaningful
        one, so the refusal is kept as the default.
    seed : int or numpy.random.Generator
    floor : float
        Every probability is floored at ``floor / d`` (d = row length) and
        rows renormalized, so estimates are strictly inside the simplex.
    **options
        Passed to :func:`specinit.multiview.fit_multiview`.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic
        (row = from-state; the transpose of [1]_'s ``T``), ``"emission"``
        (k, V). ``diagnostics``: sequence/triple counts, the law of the middle
        state, least-squares residuals of the transition and init solves,
        negative mass clipped per row, and the multi-view diagnostics.

    Raises
    ------
    TypeError
        ``sequences`` not an array or list/tuple of 1-D numeric arrays.
    ValueError
        Empty input, negative, non-integer or out-of-range symbols, no
        sequence of length >= 3, or ``k`` outside ``1..n_symbols``.

    Notes
    -----
    Sliding triples from the start of a sequence see a middle state that is
    not yet stationary; the multi-view model holds for any law of the middle
    state, so this is no bias. ``init`` is estimated from first symbols only:
    with few sequences it is noisy.
    """
    func = "hmm.spectral"
    n_symbols = check_int(n_symbols, "n_symbols", func, minimum=1)
    k = check_int(k, "k", func, minimum=1, maximum=n_symbols)
    seqs = _as_sequence_list(sequences, func, categorical=True)
    _check_symbols(seqs, n_symbols, func)
    return spectral_from_moments(_triple_moments(seqs, n_symbols, func), k, method=method, approach=approach,
                                 seed=seed, floor=floor, **options)


def gaussian_spectral(sequences, k: int, *, n_bins: int | None = None, method: str = "tpm", seed=0,
                      floor: float = 1e-3, **options) -> SpectralEstimate:
    """Method-of-moments estimate of an HMM with scalar Gaussian emissions.

    The observations are discretized into ``n_bins`` quantile bins; the bin
    indices are an HMM with the same hidden chain (a deterministic function
    of each emission keeps the views conditionally independent), so the
    categorical multi-view fit of :func:`spectral` gives ``init`` and
    ``transition``. The state means and variances are then exact moments,
    not bin averages: ``x_t`` and ``x_t^2`` are extra views of the middle
    state, regressed on the (conditionally independent) third view's bin
    means by :func:`specinit.multiview.conditional_means`.

    Parameters
    ----------
    sequences : 1-D float array, 2-D array or list/tuple of 1-D arrays
        Real observations (finite).
    k : int
        Number of hidden states, ``1 <= k <= n_bins``.
    n_bins : int, optional
        Number of quantile bins (default ``max(3 k, 10)``).
    method, seed, floor, **options
        As for :func:`spectral`; variances are floored at ``floor`` times the
        overall variance.

    Returns
    -------
    SpectralEstimate
        ``params``: ``"init"`` (k,), ``"transition"`` (k, k) row-stochastic,
        ``"loc"`` (k,), ``"scale"`` (k,) (the sites of :func:`gaussian_model`);
        ``diagnostics`` as for :func:`spectral` plus ``n_bins``,
        ``n_scales_floored``.

    References
    ----------
    [1]_ Prop. 3.4 (HMM as a multi-view model), Sec. 3.3.
    """
    func = "hmm.gaussian_spectral"
    k = check_int(k, "k", func, minimum=1)
    n_bins = check_int(max(3 * k, 10) if n_bins is None else n_bins, "n_bins", func, minimum=k)
    floor = check_positive(floor, "floor", func)
    seqs = _as_sequence_list(sequences, func, categorical=False)
    pooled = np.concatenate(seqs)
    edges = np.quantile(pooled, np.linspace(0.0, 1.0, n_bins + 1)[1:-1])
    moments = _triple_moments([np.searchsorted(edges, s, side="right") for s in seqs], n_bins, func)
    init, transition, _, fit, diagnostics = _fit_chain(moments, k, func, method, seed, floor, options)
    middle = np.concatenate([s[1:-1] for s in seqs if s.size >= 3])
    extended = ViewMoments([*moments.views.views, np.column_stack([middle, middle**2])])
    first, second = conditional_means(extended, 3, 2, fit.means[2], fit.weights).T
    variance = second - first**2
    minimum = floor * pooled.var()
    diagnostics.update(n_bins=n_bins, n_scales_floored=int(np.sum(variance < minimum)))
    params = {"init": init, "transition": transition, "loc": first, "scale": np.sqrt(np.maximum(variance, minimum))}
    return SpectralEstimate("hmm", params, diagnostics)
