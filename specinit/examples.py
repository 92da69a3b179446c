"""NumPyro's own example models, written as their authors write them: user models to warm-start.

specinit's families carry their own NumPyro models; most users write theirs.
These two are the shapes NumPyro's documentation teaches, with their site
names and enumerated discrete sites, and serve the tests, benchmarks and
tutorials of warm starts through a site mapping
(:mod:`specinit.warmstart`):

* :func:`enumerated_mixture` -- the Gaussian mixture of NumPyro's mixture
  tutorial (a ``Categorical`` assignment per row, enumerated), in ``d``
  dimensions with one shared scale: sites ``weights``, ``scale``, ``locs``;
  from a :mod:`specinit.models.gmm` estimate,
  ``{"weights": "weights", "locs": "loc", "scale": lambda p: np.sqrt(np.mean(p["scale"] ** 2))}``;
* :func:`lkj_mixture` -- a full-covariance Gaussian mixture as users write
  it (per-coordinate scales and ``LKJCholesky`` correlations per component,
  an enumerated assignment): sites ``weights``, ``locs``, ``scales``,
  ``corr``; from a full-covariance :mod:`specinit.models.gmm` estimate
  (``gmm.refine(..., covariance="full")``), ``gmm.lkj_sites()``;
* :func:`enumerated_hmm` -- NumPyro's enumerated HMM example (``scan`` over
  time, a mask past each sequence's end), with categorical symbols: sites
  ``probs_x`` (transition rows) and ``probs_y`` (emission rows); from a
  :mod:`specinit.models.hmm` estimate,
  ``{"probs_x": "transition", "probs_y": "emission"}``.
"""

from __future__ import annotations
from typing import TYPE_CHECKING

import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro import handlers
from numpyro.contrib.control_flow import scan
from numpyro.contrib.funsor import config_enumerate

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

__all__ = ["MIXTURE_SITES", "HMM_SITES", "enumerated_hmm", "enumerated_mixture", "lkj_mixture"]

#: The mapping of :func:`enumerated_mixture`'s sites onto a ``gmm`` estimate.
MIXTURE_SITES = {"weights": "weights", "locs": "loc", "scale": lambda p: np.sqrt(np.mean(p["scale"] ** 2))}

#: The mapping of :func:`enumerated_hmm`'s sites onto an ``hmm`` estimate.
HMM_SITES = {"probs_x": "transition", "probs_y": "emission"}


@config_enumerate
def enumerated_mixture(data: ArrayLike, k: int = 3) -> None:
    """Gaussian mixture with an enumerated assignment per row (NumPyro's mixture tutorial, in d dimensions).

    Parameters
    ----------
    data : array, shape (N, d)
        Observed rows.
    k : int
        Number of components.
    """
    weights = numpyro.sample("weights", dist.Dirichlet(0.5 * jnp.ones(k)))
    scale = numpyro.sample("scale", dist.LogNormal(0.0, 2.0))
    with numpyro.plate("components", k):
        locs = numpyro.sample("locs", dist.Normal(0.0, 10.0).expand([data.shape[1]]).to_event(1))
    with numpyro.plate("data", len(data)):
        assignment = numpyro.sample("assignment", dist.Categorical(weights))
        numpyro.sample("obs", dist.Normal(locs[assignment], scale).to_event(1), obs=data)


@config_enumerate
def lkj_mixture(data: ArrayLike, k: int = 3) -> None:
    """Full-covariance Gaussian mixture: per-coordinate scales and LKJ correlations per component, enumerated.

    Component ``i`` is ``MultivariateNormal(locs[i], scale_tril=scales[i, :, None] * corr[i])``.

    Parameters
    ----------
    data : array, shape (N, d)
        Observed rows.
    k : int
        Number of components.
    """
    d = data.shape[1]
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("components", k):
        locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([d]).to_event(1))
        scales = numpyro.sample("scales", dist.HalfNormal(2.0).expand([d]).to_event(1))
        corr = numpyro.sample("corr", dist.LKJCholesky(d, 2.0))
    scale_tril = scales[..., None] * corr
    with numpyro.plate("data", len(data)):
        assignment = numpyro.sample("assignment", dist.Categorical(weights))
        numpyro.sample("obs", dist.MultivariateNormal(locs[assignment], scale_tril=scale_tril[assignment]), obs=data)


def enumerated_hmm(sequences: ArrayLike, lengths: ArrayLike, hidden_dim: int, n_symbols: int) -> None:
    """HMM of NumPyro's enumeration example (``scan`` over time, masked padding), categorical symbols.

    The first state follows row 0 of ``probs_x`` (the example's convention).

    Parameters
    ----------
    sequences : int array, shape (num_sequences, max_length)
        Symbols, padded past each sequence's end.
    lengths : int array, shape (num_sequences,)
        True lengths.
    hidden_dim : int
        Number of hidden states.
    n_symbols : int
        Number of symbols.
    """
    num_sequences, _ = sequences.shape
    probs_x = numpyro.sample("probs_x", dist.Dirichlet(0.9 * jnp.eye(hidden_dim) + 0.1).to_event(1))
    probs_y = numpyro.sample("probs_y", dist.Dirichlet(0.5 * jnp.ones((hidden_dim, n_symbols))).to_event(1))

    def transition(carry, y):
        x_prev, t = carry
        with numpyro.plate("sequences", num_sequences, dim=-1), handlers.mask(mask=t < lengths):
            x = numpyro.sample("x", dist.Categorical(probs_x[x_prev]), infer={"enumerate": "parallel"})
            numpyro.sample("y", dist.Categorical(probs_y[x]), obs=y)
        return (x, t + 1), None

    scan(transition, (jnp.zeros(num_sequences, dtype=jnp.int32), 0), jnp.swapaxes(sequences, 0, 1))
