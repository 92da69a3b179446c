"""specinit: method-of-moments (spectral) estimates for NumPyro latent-variable models.

Layers, one organising rule (each layer imports only the ones above it):

* :mod:`specinit.engine` -- pure NumPy/SciPy: moments, whitening, tensor
  decompositions, multi-view symmetrization, support projection;
* :mod:`specinit.corpus` -- corpora in and out, topic quality;
* :mod:`specinit.distributions` -- NumPyro building blocks shared by the
  families (the forward algorithm, count likelihoods, mixtures);
* :mod:`specinit.family` -- the :class:`Family` skeleton every model uses;
  :mod:`specinit.refine` -- the refinement drivers (EM, MAP);
* :mod:`specinit.models` -- one module per family: ``lda``,
  ``single_topic``, ``hmm``, ``gaussian_hmm``, ``multiview``, ``gmm``,
  ``factors``, ``kernel_multiview``;
* the NumPyro and ArviZ boundary: :mod:`specinit.estimate` (the result of
  every fit), :mod:`specinit.warmstart`, :mod:`specinit.compare`,
  :mod:`specinit.pointwise` (the log-likelihood LOO uses),
  :mod:`specinit.align`, :mod:`specinit.posterior` (the only ArviZ module),
  :mod:`specinit.examples` (NumPyro's own example models, to warm-start);
* entry points: :mod:`specinit.synthetic`, :mod:`specinit.demo`, :mod:`specinit.cli`.
"""

import logging
import sys

from specinit._validation import memory_limit, set_memory_limit
from specinit.engine import decompose
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.engine.whitening import IndefiniteMomentError, whiten
from specinit.estimate import Site, SpectralEstimate
from specinit.family import Family
from specinit import models  # noqa: F401  (declares the built-in families; each imported on first use)

# Library logging is silent unless the application configures it (progress of long runs goes to INFO).
logging.getLogger("specinit").addHandler(logging.NullHandler())
# ``specinit.decompose`` is the public name of the decompositions (usable on any symmetric tensor).
sys.modules.setdefault("specinit.decompose", decompose)

__all__ = [
    "CountMoments",
    "FactoredMoments",
    "Family",
    "Site",
    "IndefiniteMomentError",
    "SpectralEstimate",
    "decompose",
    "fit_exchangeable",
    "memory_limit",
    "set_memory_limit",
    "whiten",
]
__version__ = "0.2.0"
