"""Exact conditional updates: Gibbs within NUTS for the library's models and for the user's own.

NUTS moves a Dirichlet site through its stick-breaking coordinates, where
the small entries that topic models and count mixtures are full of sit in a
heavy tail; its warm-up then shrinks the step size, and a mass matrix fitted
at one point of that tail sends the next draws off it (nearly every draw
diverges). Where the model has a conjugate structure, those sites can be
drawn exactly from their conditionals instead (data augmentation: the
per-token or per-row assignments are drawn, then the Dirichlets), and NUTS
moves only the other continuous sites given them.

:class:`ExactGibbs` is that sampler, a ``numpyro.infer.Gibbs`` composite of
a ``CustomGibbs`` block (the exact draws) and a ``NUTS`` block (every other
continuous site; discrete sites stay enumerated). Its ``model`` is the whole
model, so ArviZ and :func:`specinit.posterior.to_inference_data` see the
observed data and the log-likelihood, and its state carries the NUTS
block's statistics (divergences, tree size, step size) where ArviZ reads
them.

:func:`find_structure` recognises, in a model written the way NumPyro's
examples write them (any site names), one of:

* **admixture** (LDA): a Dirichlet site of topic rows ``(K, V)``, a
  Dirichlet site of per-document proportions ``(N, K)``, and one observed
  site whose probabilities are ``proportions @ topics`` -- a
  ``Multinomial`` of the ``(N, V)`` counts, or a ``Categorical`` per token
  (each token's probabilities a row of the product);
* **mixture** of multinomials (or of categoricals): a Dirichlet site of
  weights ``(K,)``, a Dirichlet site of component rows ``(K, V)``, an
  enumerated ``Categorical(weights)`` assignment per row, and one observed
  site whose probabilities are the assigned component's row.

Roles are found by substituting random values and comparing the observed
site's probabilities with the structure's; the concentrations are read from
the model at the current values of its other sites, so hyperpriors are
allowed. :func:`exact_kernel` then checks numerically that the model's log
density is the structure's (its difference from the structure's own log
density, with the model's other sites held fixed, does not change across
random points, in float64): any other term on those sites (a ``factor``, a
different prior or likelihood) is a ``ValueError`` naming them, never a
silently wrong sampler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from dataclasses import dataclass
from itertools import permutations

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from numpyro import handlers
from numpyro.infer import NUTS
from numpyro.infer.gibbs import CustomGibbs, Gibbs, GibbsState
from numpyro.infer.util import log_density

from specinit._validation import bad_argument
from specinit.engine.backends.jax import x64
from specinit.distributions.counts import HIGHEST, lda_augmented_step, mixture_augmented_step, topic_components
from specinit.pointwise import enumerable
from specinit.warmstart import latent_sites

__all__ = ["ExactGibbs", "Structure", "exact_kernel", "find_structure", "check_structure"]

#: Statistics of the NUTS block that :class:`ExactGibbs` records at every draw (ArviZ's ``sample_stats``).
NUTS_FIELDS = ("diverging", "num_steps", "adapt_state.step_size", "potential_energy", "accept_prob")

#: Random points at which :func:`check_structure` compares the log densities (per draw of the other sites).
CHECK_POINTS = 3

#: Relative tolerance of that comparison (float64; relative to the largest log density seen).
CHECK_RTOL = 1e-8


def _nuts_field(name: str, doc: str) -> property:
    return property(lambda state: getattr(state.block_states[-1], name), doc=doc)


class ExactGibbsState(GibbsState):
    """The composite's state, with the NUTS block's statistics readable at the top level (``extra_fields``)."""

    __slots__ = ()
    diverging = _nuts_field("diverging", "Whether the NUTS block's trajectory diverged.")
    num_steps = _nuts_field("num_steps", "Leapfrog steps of the NUTS block.")
    adapt_state = _nuts_field("adapt_state", "The NUTS block's adaptation state (step size, inverse mass matrix).")
    potential_energy = _nuts_field("potential_energy", "Potential energy of the NUTS block's (conditional) model.")
    accept_prob = _nuts_field("accept_prob", "Acceptance probability of the NUTS block.")


class ExactGibbs(Gibbs):
    """Exact conditional draws of some sites, NUTS for the other continuous sites, on one model.

    Parameters
    ----------
    model : callable
        The whole NumPyro model: what the draws are of (``kernel.model``,
        read by ArviZ and :func:`specinit.posterior.to_inference_data`).
    gibbs_fn : callable
        ``gibbs_fn(rng_key, gibbs_sites, hmc_sites) -> dict``: a draw of the
        ``gibbs_sites`` (constrained) from their conditional given every
        other site (``hmc_sites``, constrained), as for
        ``numpyro.infer.HMCGibbs``.
    gibbs_sites : sequence of str
        The sites drawn exactly.
    nuts_model : callable, optional
        The model NUTS runs on (default ``model``): a model with the same
        conditional of the other sites given the ``gibbs_sites``, cheaper
        to evaluate (``lda.kernel`` leaves out the likelihood, constant in
        ``alpha`` given ``beta`` and ``theta``).
    moves_others : bool
        Whether NUTS has sites to move. Without any, the NUTS block only
        evaluates the potential energy, recorded as ``lp`` (where it runs
        ``model``).
    **nuts_kwargs
        Keyword arguments of ``numpyro.infer.NUTS``.

    Notes
    -----
    Run several chains with ``MCMC(..., chain_method=jax.vmap)``: NumPyro's
    sequential chains recompile a Gibbs step for every chain, and its
    ``"vectorized"`` refuses Gibbs kernels. ``init_params`` take the
    ``gibbs_sites`` constrained and the others unconstrained
    (:func:`specinit.warmstart.init_params` with ``kernel=`` gives both).
    """

    _state_cls = ExactGibbsState

    def __init__(self, model: Callable, gibbs_fn: Callable, gibbs_sites: Sequence[str], *,
                 nuts_model: Callable | None = None, moves_others: bool = True, **nuts_kwargs: Any) -> None:
        super().__init__([(CustomGibbs(gibbs_fn), tuple(gibbs_sites)),
                          (NUTS(nuts_model or model, **nuts_kwargs), None)])
        self._full_model = model
        self._moves_others = bool(moves_others)
        self._whole = nuts_model is None or nuts_model is model

    @property
    def model(self) -> Callable[..., Any]:
        """The whole model (the draws' joint distribution)."""
        return self._full_model

    @property
    def default_fields(self) -> tuple:
        """The draws and the NUTS block's statistics.

        The potential energy (ArviZ's ``lp``) is recorded where NUTS runs
        the whole model; where NUTS moves nothing, it and ``diverging``
        (always false: exact draws do not diverge) are the only ones.
        """
        fields = NUTS_FIELDS if self._moves_others else ("diverging", "potential_energy")
        return ("z", *(f for f in fields if self._whole or f != "potential_energy"))


# --- structures -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Structure:
    """A conjugate structure found in a model.

    Attributes
    ----------
    kind : {"admixture", "mixture"}
        See the module notes.
    roles : dict of str -> str
        Role -> model site: ``"topics"``, ``"proportions"`` (admixture) or
        ``"weights"``, ``"components"``, ``"assignment"`` (mixture).
    observed : str
        The observed site.
    doc, word, count : numpy.ndarray
        The observations as (row, symbol, count) triples: document and word
        of the nonzero counts (admixture; a token of a ``Categorical`` has
        count 1), or row and symbol (mixture).
    rows : int
        Documents (admixture) or rows (mixture).
    """

    kind: str
    roles: Mapping[str, str]
    observed: str
    doc: np.ndarray
    word: np.ndarray
    count: np.ndarray
    rows: int

    @property
    def gibbs_sites(self) -> tuple[str, ...]:
        """The sites drawn exactly (the assignment stays enumerated)."""
        if self.kind == "admixture":
            return self.roles["topics"], self.roles["proportions"]
        return self.roles["weights"], self.roles["components"]

    def dense_counts(self, vocab_size: int) -> np.ndarray:
        """``(rows, V)`` counts."""
        counts = np.zeros((self.rows, vocab_size))
        np.add.at(counts, (self.doc, self.word), self.count)
        return counts

    def log_density(self, values: Mapping, concentrations: Mapping) -> jax.Array:
        """Log density of the structure's sites and the observed site (up to a constant), in JAX.

        Parameters
        ----------
        values : dict of str -> array
            Constrained values of the structure's sites.
        concentrations : dict of str -> array
            The Dirichlet concentrations of the structure's sites (full
            shapes), as the model gives them at these values.
        """
        prior = sum(jnp.sum(dist.Dirichlet(concentrations[name]).log_prob(values[name]))
                    for name in self.gibbs_sites)
        if self.kind == "admixture":
            topics, proportions = values[self.roles["topics"]], values[self.roles["proportions"]]
            probs = jnp.einsum("tk,kt->t", proportions[self.doc], topics[:, self.word], precision=HIGHEST)
            return prior + jnp.sum(self.count * jnp.log(probs))
        weights, components = values[self.roles["weights"]], values[self.roles["components"]]
        counts = self.dense_counts(components.shape[-1])
        return prior + jnp.sum(logsumexp(jnp.log(weights) + topic_components(components, counts), axis=-1))


def _base(fn):
    """The distribution under NumPyro's ``Independent``, ``ExpandedDistribution`` and ``MaskedDistribution``."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution, dist.MaskedDistribution)):
        fn = fn.base_dist
    return fn


def _trace(model, model_args, model_kwargs, values=None, key=None) -> dict:
    substituted = handlers.substitute(model, data=values) if values else model
    key = jax.random.PRNGKey(0) if key is None else key
    return handlers.trace(handlers.seed(substituted, key)).get_trace(*model_args, **model_kwargs)


def _concentrations(trace, names) -> dict:
    return {name: jnp.broadcast_to(_base(trace[name]["fn"]).concentration,
                                   tuple(trace[name]["fn"].batch_shape) + tuple(trace[name]["fn"].event_shape))
            for name in names}


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-4, atol=1e-6))


def _triples(value: np.ndarray, multinomial: bool, rows: np.ndarray) -> tuple:
    """(row, symbol, count) of the observations; ``rows`` gives each observation's row."""
    if multinomial:
        counts = np.asarray(value, dtype=np.float64).reshape(len(rows), -1)
        doc, word = np.nonzero(counts)
        return rows[doc], word, counts[doc, word]
    symbols = np.asarray(value).reshape(-1).astype(np.int64)
    return rows, symbols, np.ones(symbols.size)


def _match_rows(probs: np.ndarray, table: np.ndarray) -> np.ndarray | None:
    """For every row of ``probs``, the row of ``table`` it equals (None unless each equals one)."""
    direction = np.random.default_rng(0).normal(size=table.shape[1])
    keys, order = table @ direction, np.argsort(table @ direction)
    position = np.clip(np.searchsorted(keys[order], probs @ direction), 0, len(order) - 1)
    candidates = np.stack([order[position], order[np.maximum(position - 1, 0)]])
    errors = np.abs(table[candidates] - probs[None]).max(axis=-1)
    best = candidates[np.argmin(errors, axis=0), np.arange(len(probs))]
    return best if _close(table[best], probs) else None


def _sites(model, model_args, model_kwargs) -> dict:
    """Every sample site's kind, traced abstractly: (observed, base distribution type, shape, categories)."""
    facts = {}

    def values():
        trace = _trace(model, model_args, model_kwargs)
        for name, site in trace.items():
            if site["type"] == "sample" and not isinstance(site["fn"], dist.Unit):
                base = _base(site["fn"])
                categories = base.probs.shape[-1] if site["fn"].support.is_discrete and hasattr(base, "probs") else 0
                facts[name] = (bool(site["is_observed"]), type(base), categories)
            elif site["type"] == "sample":
                facts[name] = (True, dist.Unit, 0)
        return {name: trace[name]["value"] for name in facts}

    shapes = jax.eval_shape(values)
    return {name: (*facts[name], tuple(shapes[name].shape)) for name in facts}


def find_structure(model: Callable[..., Any], model_args: Sequence[Any] = (),
                   model_kwargs: Mapping[str, Any] | None = None) -> Structure | None:
    """The conjugate structure of ``model`` (module notes), or ``None`` where it has none.

    Parameters
    ----------
    model : callable
        A NumPyro model with its observed data.
    model_args, model_kwargs
        Arguments the model is called with.

    Returns
    -------
    Structure or None
        Which sites play which role; ``None`` for a model with another
        structure (it is sampled by NUTS). A ``numpyro.factor`` counts as an
        observed site: :func:`check_structure` then finds its term.
    """
    model_kwargs = dict(model_kwargs or {})
    sites = _sites(model, model_args, model_kwargs)
    observed = [name for name, (is_observed, kind, _, _) in sites.items() if is_observed and kind is not dist.Unit]
    if len(observed) != 1:
        return None
    kind = sites[observed[0]][1]
    if not issubclass(kind, (dist.MultinomialProbs, dist.MultinomialLogits, dist.CategoricalProbs,
                             dist.CategoricalLogits)):
        return None
    multinomial = issubclass(kind, (dist.MultinomialProbs, dist.MultinomialLogits))
    dirichlets = [name for name, (is_observed, kind, _, _) in sites.items()
                  if not is_observed and issubclass(kind, dist.Dirichlet)]
    discrete = [name for name, (is_observed, _, categories, _) in sites.items() if not is_observed and categories]
    # random values of every Dirichlet (and assignment) site, then the observed site's probabilities there
    rng = np.random.default_rng(1)
    values = {name: rng.dirichlet(np.ones(sites[name][3][-1]), size=sites[name][3][:-1]) for name in dirichlets}
    values.update({name: rng.integers(0, sites[name][2], sites[name][3]) for name in discrete})

    @jax.jit
    def probe(values):
        trace = _trace(model, model_args, model_kwargs, values=values)
        found = {name: _base(trace[name]["fn"]).probs for name in discrete}
        base = _base(trace[observed[0]]["fn"])
        found[observed[0]] = jnp.broadcast_to(base.probs, tuple(trace[observed[0]]["fn"].batch_shape)
                                              + base.probs.shape[-1:])
        return found, trace[observed[0]]["value"]

    found, value = jax.device_get(probe({k: jnp.asarray(v) for k, v in values.items()}))
    flat = np.asarray(found[observed[0]], dtype=np.float64)
    flat = flat.reshape(-1, flat.shape[-1])
    if not discrete:
        for proportions, topics in permutations(dirichlets, 2):
            theta, beta = values[proportions], values[topics]
            if theta.ndim != 2 or beta.ndim != 2 or theta.shape[1] != beta.shape[0] or beta.shape[1] != flat.shape[1]:
                continue
            rows = _match_rows(flat, theta @ beta)
            if rows is not None:
                return Structure("admixture", {"topics": topics, "proportions": proportions}, observed[0],
                                 *_triples(value, multinomial, rows), theta.shape[0])
        return None
    if len(discrete) != 1:
        return None
    assignment = discrete[0]
    z = values[assignment].reshape(-1)
    if z.size != flat.shape[0]:
        return None
    assigned = np.asarray(found[assignment], dtype=np.float64)
    for weights, components in permutations(dirichlets, 2):
        w, beta = values[weights], values[components]
        if (w.ndim == 1 and beta.ndim == 2 and beta.shape[0] == w.size
                and _close(np.broadcast_to(assigned, (z.size, w.size)), np.broadcast_to(w, (z.size, w.size)))
                and _close(flat, beta[z])):
            return Structure("mixture", {"weights": weights, "components": components, "assignment": assignment},
                             observed[0], *_triples(value, multinomial, np.arange(z.size)), z.size)
    return None


def _joint_log_density(model, model_args, model_kwargs, values, discrete: bool):
    """The model's log joint density at constrained ``values`` (enumerated sites summed out)."""
    if discrete:
        from numpyro.contrib.funsor import log_density as enumerated_log_density

        return enumerated_log_density(enumerable(model, model_args, model_kwargs), model_args, model_kwargs, values)[0]
    return log_density(model, model_args, model_kwargs, values)[0]


def check_structure(structure: Structure, model: Callable[..., Any], model_args: Sequence[Any] = (),
                    model_kwargs: Mapping[str, Any] | None = None, *, seed: int = 0) -> None:
    """Check that the model's log density is the structure's, up to terms free of the structure's sites.

    At ``CHECK_POINTS`` random values of the structure's sites, for two
    draws of the model's other sites, the model's log joint density (in
    float64, enumerated sites summed out) minus
    :meth:`Structure.log_density` must not change (relative tolerance
    ``CHECK_RTOL``).

    Parameters
    ----------
    structure : Structure
        From :func:`find_structure`.
    model : callable
    model_args, model_kwargs
        Arguments the model is called with.
    seed : int
        Seeds the random points.

    Raises
    ------
    ValueError
        The log densities differ: the model has other terms on the
        structure's sites (the message names them).
    """
    model_kwargs = dict(model_kwargs or {})
    names = structure.gibbs_sites
    discrete = structure.kind == "mixture"
    rng = np.random.default_rng(seed)
    shapes = {name: shape for name, shape in latent_sites(model, model_args, model_kwargs).items() if name in names}
    with x64():
        @jax.jit
        def densities(key, values):
            trace = _trace(model, model_args, model_kwargs, values=values, key=key)  # the other sites drawn
            point = {name: site["value"] for name, site in trace.items() if site["type"] == "sample"
                     and not site["is_observed"] and not site["fn"].support.is_discrete}
            joint = _joint_log_density(model, model_args, model_kwargs, point, discrete)
            return joint, structure.log_density(point, _concentrations(trace, names))

        for draw in range(2):
            key = jax.random.PRNGKey(seed + draw)
            points = [{name: jnp.asarray(rng.dirichlet(np.ones(shape[-1]), size=shape[:-1]))
                       for name, shape in shapes.items()} for _ in range(CHECK_POINTS)]
            pairs = np.array([jax.device_get(densities(key, point)) for point in points], dtype=np.float64)
            gaps = pairs[:, 0] - pairs[:, 1]
            if not np.all(np.isfinite(gaps)) or np.ptp(gaps) > CHECK_RTOL * max(1.0, np.abs(pairs).max()):
                raise bad_argument(
                    "model", "check_structure", f"a model whose log density on {list(names)} and "
                    f"{structure.observed!r} is the {structure.kind} structure's (Dirichlet priors, the observed "
                    "site's probabilities from them), with no other term on them",
                    f"log densities that differ by {np.ptp(gaps):.3g} between random points (pass exact=False "
                    "to sample every site with NUTS)", describe=False)


def _update(structure: Structure, model, model_args, model_kwargs, vocab_size: int, constant: bool) -> Callable:
    """The exact conditional draw of the structure's sites (the ``gibbs_fn`` of :class:`ExactGibbs`)."""
    names = structure.gibbs_sites
    fixed = None
    if constant:  # read once, at any value of the structure's sites
        shapes = {name: shape for name, shape in latent_sites(model, model_args, model_kwargs).items() if name in names}
        uniform = {name: jnp.full(shape, 1.0 / shape[-1]) for name, shape in shapes.items()}
        fixed = jax.jit(lambda: _concentrations(_trace(model, model_args, model_kwargs, values=uniform), names))()

    def concentrations(values):
        return fixed if constant else _concentrations(_trace(model, model_args, model_kwargs, values=values), names)

    if structure.kind == "admixture":
        repeats = np.rint(structure.count).astype(np.int64)
        token_doc = jnp.asarray(np.repeat(structure.doc, repeats), dtype=jnp.int32)
        token_word = jnp.asarray(np.repeat(structure.word, repeats), dtype=jnp.int32)
        topics, proportions = names

        def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
            conc = concentrations({**hmc_sites, **gibbs_sites})
            beta, theta = lda_augmented_step(rng_key, conc[proportions], gibbs_sites[topics], gibbs_sites[proportions],
                                             token_doc, token_word, conc[topics])
            return {topics: beta, proportions: theta}

        return gibbs_fn
    counts = jnp.asarray(structure.dense_counts(vocab_size), dtype=jnp.result_type(float))
    weights, components = names

    def gibbs_fn(rng_key, gibbs_sites, hmc_sites):
        conc = concentrations({**hmc_sites, **gibbs_sites})
        w, beta = mixture_augmented_step(rng_key, conc[weights], conc[components], gibbs_sites[weights],
                                         gibbs_sites[components], counts)
        return {weights: w, components: beta}

    return gibbs_fn


def exact_kernel(model: Callable[..., Any], model_args: Sequence[Any] = (),
                 model_kwargs: Mapping[str, Any] | None = None, *, structure: Structure | None = None,
                 check: bool = True, **nuts_kwargs: Any) -> ExactGibbs:
    """The :class:`ExactGibbs` sampler of a model with a conjugate structure (module notes).

    Parameters
    ----------
    model : callable
        The user's NumPyro model (any site names; discrete sites enumerated).
    model_args, model_kwargs
        Arguments the model is called with (with the observed data); the
        sampler is built for these data.
    structure : Structure, optional
        From :func:`find_structure` (found here when not given).
    check : bool
        Run :func:`check_structure` (leave it on unless that structure was
        checked on these model arguments already).
    **nuts_kwargs
        Keyword arguments of the NUTS block (the model's other continuous
        sites).

    Returns
    -------
    ExactGibbs
        Run it as ``MCMC(kernel, ..., chain_method=jax.vmap).run(key,
        *model_args, **model_kwargs)``.

    Raises
    ------
    ValueError
        A model without a known structure, or whose log density differs
        from the structure's (:func:`check_structure`).
    """
    model_kwargs = dict(model_kwargs or {})
    structure = structure or find_structure(model, model_args, model_kwargs)
    if structure is None:
        raise bad_argument("model", "exact_kernel", "a model with a Dirichlet admixture (LDA) or a mixture of "
                           "multinomials (specinit.conditional); sample others with NUTS", model)
    if check:
        check_structure(structure, model, model_args, model_kwargs)
    latent = latent_sites(model, model_args, model_kwargs)
    others = set(latent) - set(structure.gibbs_sites)
    vocab_size = latent[structure.gibbs_sites[0 if structure.kind == "admixture" else 1]][-1]
    gibbs_fn = _update(structure, model, tuple(model_args), model_kwargs, vocab_size, constant=not others)
    return ExactGibbs(model, gibbs_fn, structure.gibbs_sites, moves_others=bool(others), **nuts_kwargs)
