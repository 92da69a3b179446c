"""Warm-starting your own NumPyro model
====================================

specinit's estimates are keyed by its own site names (``loc``, ``transition``,
``emission``, ...). Your model has names of its own and, written the way
NumPyro's examples write mixtures and HMMs, discrete latent sites that
NumPyro enumerates. One mapping connects the two:

.. code-block:: python

   sites = {"weights": "weights", "locs": "loc", "scale": lambda p: np.sqrt(np.mean(p["scale"] ** 2))}
   init = estimate.init_params(model, num_chains, key, sites=sites, spread="laplace", model_args=(data,))


A value is an estimate parameter's name or a callable of the estimate's
parameters (here: one shared scale from the per-component ones). Every
continuous latent site of the model must get a value, or be named in
``fallback=`` to start from NumPyro's default; a misspelled or missing site
is an error that lists the model's sites. The enumerated sites are left
to NumPyro. ``spread="laplace"`` scatters the chains' starts by the
estimate's own uncertainty (the curvature of the posterior at the
estimate, ``specinit.warmstart.laplace``).

Two models from NumPyro's documentation, written as their authors write them
(``specinit.examples``; their source is printed below, it is all the model code there is):

1. the Gaussian mixture of NumPyro's mixture tutorial (an enumerated
   assignment per row), on the standardized iris measurements;
2. NumPyro's enumerated HMM example (``scan`` over time, a mask past the end
   of each sequence), with categorical letters, on English text shipped
   with Python.

For each: NUTS from the spectral estimate beside NumPyro's default start
(``specinit.compare.compare_nuts``), R-hat, and PSIS-LOO from the marginal
log-likelihood (the enumerated sites summed out per row) that
``specinit.posterior.to_inference_data`` computes.
"""


# %%
import os
import warnings

import inspect

import jax
import numpy as np
from sklearn.datasets import load_iris

from specinit.compare import compare_nuts
from specinit.corpus import load_letter_sequences
from specinit.examples import enumerated_hmm, enumerated_mixture
from specinit.models import gmm, hmm
from specinit.posterior import convergence, loo, to_inference_data

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
DRAWS = dict(num_chains=2, num_warmup=50, num_samples=50) if SMALL else dict(num_chains=4, num_warmup=300,
                                                                              num_samples=300)

# %%
# 1. A Gaussian mixture with an enumerated assignment
# ---------------------------------------------------

# %%
print(inspect.getsource(enumerated_mixture))


iris = load_iris().data
x = ((iris - iris.mean(0)) / iris.std(0)).astype(np.float32)
estimate = gmm.spectral(x, 3, seed=0)
print({name: value.shape for name, value in estimate.params.items()})

sites = {"weights": "weights", "locs": "loc", "scale": lambda p: np.sqrt(np.mean(p["scale"] ** 2))}
try:
    estimate.init_params(enumerated_mixture, 2, jax.random.PRNGKey(0), sites={"weights": "weights", "locz": "loc"},
                         model_args=(x,))
except ValueError as error:
    print("a misspelled site:", error)

result = compare_nuts(enumerated_mixture, estimate, model_args=(x,), sites=sites, **DRAWS)
summary = result.summary()
print(f"mixture: max R-hat from the estimate {summary['warm_max_rhat']:.3f} ({summary['warm_time_s']:.1f} s), "
      f"from NumPyro's default {summary['cold_max_rhat']:.3f} ({summary['cold_time_s']:.1f} s)")

idata = to_inference_data(result.warm, estimate, sites=sites)
print(convergence(idata))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # ArviZ's note on large Pareto k (short chains in the small run)
    mixture_loo = loo(idata, pointwise=True)
print(f"LOO: elpd {mixture_loo.elpd_loo:.1f}, p_loo {mixture_loo.p_loo:.1f}, "
      f"{np.mean(np.asarray(mixture_loo.pareto_k) < 0.7):.0%} of rows with Pareto k < 0.7")

# %%
# 2. NumPyro's enumerated HMM on letters of English
# -------------------------------------------------
#
# Each paragraph of the standard library's docstrings is a sequence of 27
# symbols (a-z and space). The spectral estimate, refined by Baum-Welch,
# gives ``transition`` and ``emission``; the model calls them ``probs_x`` and
# ``probs_y``. Its first state follows row 0 of ``probs_x`` (the example's
# convention), so no site takes the estimate's ``init``.

# %%
print(inspect.getsource(enumerated_hmm))


paragraphs = [s[: 40 if SMALL else 60] for s in load_letter_sequences()][: 12 if SMALL else 60]
states = 3
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # real text is not a 3-state HMM: the spectral step says so
    letters_estimate = hmm.refine(paragraphs, hmm.spectral(paragraphs, states, 27, seed=0), max_iter=50).estimate
padded, lengths = hmm.pad_sequences(paragraphs)
args = (padded, lengths, states, 27)
hmm_sites = {"probs_x": "transition", "probs_y": "emission"}
letters = compare_nuts(enumerated_hmm, letters_estimate, model_args=args, sites=hmm_sites, **DRAWS)
summary = letters.summary()
print(f"letters HMM: max R-hat from the estimate {summary['warm_max_rhat']:.3f} ({summary['warm_time_s']:.1f} s), "
      f"from NumPyro's default {summary['cold_max_rhat']:.3f} ({summary['cold_time_s']:.1f} s)")

letters_idata = to_inference_data(letters.warm, letters_estimate, sites=hmm_sites)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)
    letters_loo = loo(letters_idata, pointwise=True)
print(f"LOO per paragraph: elpd {letters_loo.elpd_loo:.1f}, "
      f"{np.mean(np.asarray(letters_loo.pareto_k) < 0.7):.0%} of paragraphs with Pareto k < 0.7")

# %%
# A short real-text posterior can be genuinely multimodal (several
# labellings of letter classes fit almost equally well): the R-hat above is
# what the chains did, not a tuned number. The default start lets each chain
# settle in its own labelling; from the estimate they share one.
