"""The one forward algorithm of the hidden Markov families (:mod:`specinit.models.hmm`, :mod:`specinit.models.gaussian_hmm`).

The forward algorithm in log space (``jax.lax.scan``), the distributions
:class:`CategoricalHMM` and :class:`GaussianHMM` whose ``log_prob`` is one
number per sequence (so ``numpyro.infer.log_likelihood`` is per sequence),
input checks and padding of ragged sequences, and exact inference given
parameters (posterior marginals, Viterbi).

References
----------
.. [1] Rabiner. "A tutorial on hidden Markov models and selected
   applications in speech recognition", Proc. IEEE 77 (1989), eqs. 19-20
   (forward), 27 (posterior marginals), 30-35 (Viterbi).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax import lax, random
from numpyro.distributions import constraints

from specinit._validation import bad_argument, public
from specinit.engine.sequences import as_sequences, check_symbols

if TYPE_CHECKING:
    from jax.typing import ArrayLike

    from specinit.estimate import SpectralEstimate

__all__ = ["CategoricalHMM", "GaussianHMM", "sequence_distribution", "pad_sequences", "plate_shape",
           "posterior_marginals", "viterbi"]


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
    validate_args : bool, optional
        NumPyro's argument validation.

    Notes
    -----
    ``log_prob(x)`` is the exact marginal log-likelihood
    ``log sum_h p(h, x)`` by the forward algorithm in log space ([1]_ eq. 20).
    """

    arg_constraints = {"init": constraints.simplex, "transition": _ROWS_SIMPLEX,
                       "emission": _ROWS_SIMPLEX}
    pytree_data_fields = ("init", "transition", "emission", "lengths")
    pytree_aux_fields = ("n_steps",)

    def __init__(self, init: ArrayLike, transition: ArrayLike, emission: ArrayLike, n_steps: int,
                 lengths: ArrayLike | None = None, *, validate_args: bool | None = None) -> None:
        self.emission = jnp.asarray(emission)
        super().__init__(init, transition, n_steps, lengths, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> constraints.Constraint:
        return constraints.independent(constraints.integer_interval(0, jnp.shape(self.emission)[-1] - 1), 1)

    def _log_emission(self, value):
        return jnp.log(self.emission).T[jnp.asarray(value)]

    def _emit(self, key, states):
        return _inverse_cdf(jnp.cumsum(self.emission, axis=-1)[states], random.uniform(key, jnp.shape(states)))


class GaussianHMM(_HMM):
    """HMM with scalar Gaussian emissions ``x_t | h_t = i ~ Normal(loc[i], scale[i])``.

    Parameters
    ----------
    init : array, shape (k,)
        Law of the first hidden state.
    transition : array, shape (k, k)
        Row-stochastic transition matrix.
    loc, scale : arrays, shape (k,)
        Emission means and standard deviations (positive).
    n_steps : int
        Padded sequence length T.
    lengths : array of int, optional
        True lengths, as for :class:`CategoricalHMM`; padded entries are 0.0 in samples.
    validate_args : bool, optional
        NumPyro's argument validation.
    """

    arg_constraints = {"init": constraints.simplex, "transition": _ROWS_SIMPLEX,
                       "loc": constraints.real_vector, "scale": constraints.independent(constraints.positive, 1)}
    support = constraints.independent(constraints.real, 1)
    pytree_data_fields = ("init", "transition", "loc", "scale", "lengths")
    pytree_aux_fields = ("n_steps",)

    def __init__(self, init: ArrayLike, transition: ArrayLike, loc: ArrayLike, scale: ArrayLike, n_steps: int,
                 lengths: ArrayLike | None = None, *, validate_args: bool | None = None) -> None:
        self.loc, self.scale = jnp.asarray(loc), jnp.asarray(scale)
        super().__init__(init, transition, n_steps, lengths, validate_args=validate_args)

    def _log_emission(self, value):
        return dist.Normal(self.loc, self.scale).log_prob(jnp.asarray(value)[..., None])

    def _emit(self, key, states):
        return self.loc[states] + self.scale[states] * random.normal(key, jnp.shape(states))


# ------------------------------------------------------------------------------------------------
# Input handling
# ------------------------------------------------------------------------------------------------
@public
def pad_sequences(sequences: ArrayLike | Sequence[ArrayLike], *,
                  categorical: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Stack ragged sequences into a padded array plus their lengths.

    Parameters
    ----------
    sequences : array or list of 1-D arrays
        See :func:`specinit.models.hmm.spectral`.
    categorical : bool
        Integer symbols (True) or real observations (False).

    Returns
    -------
    padded : ndarray, shape (N, T)
        Zero-padded on the right (int64 or float64).
    lengths : ndarray of int64, shape (N,)
    """
    seqs = as_sequences(sequences, categorical=categorical)
    lengths = np.array([s.size for s in seqs], dtype=np.int64)
    padded = np.zeros((len(seqs), lengths.max()), dtype=seqs[0].dtype)
    for row, s in zip(padded, seqs):
        row[: s.size] = s
    return padded, lengths


def plate_shape(sequences: ArrayLike | None, lengths: ArrayLike | None,
                func: str) -> tuple[np.ndarray | None, np.ndarray, int]:
    """Observed sequences (2-D), lengths and padded length for a model's ``sequences`` plate.

    Parameters
    ----------
    sequences : array or None
        Observations, (N, T) or (T,); None when generating.
    lengths : array of int or None
        True lengths (required when generating).
    func : str
        The model named in errors.

    Returns
    -------
    (array or None, array, int)
    """
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



# ------------------------------------------------------------------------------------------------
# Exact inference given parameters
# ------------------------------------------------------------------------------------------------
def sequence_distribution(sequences: ArrayLike | Sequence[ArrayLike],
                          params: Mapping[str, ArrayLike] | SpectralEstimate,
                          func: str | None = None) -> tuple[CategoricalHMM | GaussianHMM, np.ndarray, np.ndarray, bool]:
    """``(distribution, padded observations, lengths, single)`` for ``params`` of either emission family.

    Parameters
    ----------
    sequences : 1-D array or list of 1-D arrays
        Symbols (categorical) or real observations (Gaussian).
    params : dict or SpectralEstimate
        ``init``, ``transition`` and ``emission`` or ``loc`` and ``scale``.
    func : str, optional
        Function named in errors (default: the public entry).

    Returns
    -------
    (CategoricalHMM or GaussianHMM, ndarray, ndarray, bool)
    """
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
        check_symbols([padded.ravel()], emission.shape[-1])
        hmm = CategoricalHMM(init, transition, emission, padded.shape[1], lengths)
    else:
        hmm = GaussianHMM(init, transition, jnp.asarray(params["loc"]), jnp.asarray(params["scale"]), padded.shape[1], lengths)
    return hmm, padded, lengths, single


def _state_scores(sequences, params, reduce, func):
    """Gradient of the (log-sum-exp or max) forward score with respect to the log-emissions."""
    hmm, padded, lengths, single = sequence_distribution(sequences, params, func)

    def score(log_emit):
        return _forward(jnp.log(hmm.init), jnp.log(hmm.transition), log_emit, hmm.lengths, reduce).sum()

    grads = np.asarray(jax.grad(score)(hmm._log_emission(padded)), dtype=np.float64)
    return [g[:n] for g, n in zip(grads, lengths)], single


@public
def posterior_marginals(sequences: ArrayLike | Sequence[ArrayLike],
                        params: Mapping[str, ArrayLike] | SpectralEstimate) -> np.ndarray | list[np.ndarray]:
    """Posterior state marginals ``P(h_t = i | x_{1:T})`` (forward-backward).

    Computed as the gradient of the forward log-likelihood with respect to
    the log-emission terms, which equals the forward-backward product
    ``alpha_t(i) beta_t(i) / p(x)`` ([1]_ eq. 27) and shares the forward
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


@public
def viterbi(sequences: ArrayLike | Sequence[ArrayLike],
            params: Mapping[str, ArrayLike] | SpectralEstimate) -> np.ndarray | list[np.ndarray]:
    """Most probable state path ``argmax_h p(h, x)`` ([1]_ eqs. 30-35).

    The max-product forward score is piecewise linear in the log-emission
    terms; its gradient is the indicator of the optimal path, so the
    back-tracking pass is the reverse-mode sweep of the max-product forward
    recursion (paths are unique for parameters in general position).

    Parameters
    ----------
    sequences : 1-D array or list of 1-D arrays
        As for :func:`posterior_marginals`.
    params : dict or SpectralEstimate
        As for :func:`posterior_marginals`.

    Returns
    -------
    ndarray of int64, shape (T,), or list of them
    """
    out, single = _state_scores(sequences, params, jnp.max, "hmm.viterbi")
    paths = [np.argmax(g, axis=1).astype(np.int64) for g in out]
    return paths[0] if single else paths
