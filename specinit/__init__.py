"""specinit: method-of-moments (spectral) estimates for NumPyro latent-variable models.

Layers, one organising rule (each layer imports only the ones above it):

* :mod:`specinit.engine` -- pure NumPy/SciPy: moments, whitening, tensor
  decompositions, multi-view symmetrization, support projection;
* :mod:`specinit.corpus` -- corpora in and out, topic quality;
* :mod:`specinit.models` -- one module per model: its NumPyro program and its
  moment map (``lda``, ``single_topic``, ``hmm``, ``gaussian_hmm``,
  ``multiview``, ``gmm``);
* the NumPyro and ArviZ boundary: :mod:`specinit.estimate` (the result of
  every fit), :mod:`specinit.warmstart`, :mod:`specinit.compare`,
  :mod:`specinit.align`, :mod:`specinit.posterior` (the only ArviZ module);
* entry points: :mod:`specinit.synthetic`, :mod:`specinit.demo`, :mod:`specinit.cli`.
"""

import sys

from specinit import _moved
from specinit.engine import decompose
from specinit.engine.exchangeable import fit_exchangeable
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.engine.whitening import IndefiniteMomentError, whiten
from specinit.estimate import SpectralEstimate

_moved.install()
# ``specinit.decompose`` is the public name of the decompositions (usable on any symmetric tensor).
sys.modules.setdefault("specinit.decompose", decompose)

__all__ = [
    "CountMoments",
    "FactoredMoments",
    "IndefiniteMomentError",
    "SpectralEstimate",
    "decompose",
    "fit_exchangeable",
    "whiten",
]
__version__ = "0.2.0"
