"""specinit: method-of-moments (spectral) estimates for NumPyro latent-variable models.

The engine (moments, whitening, decompositions, recovery) is pure
NumPy/SciPy; models live in :mod:`specinit.models` (``lda``,
``single_topic``, ``hmm``, ``multiview``, ``gmm``), the NumPyro hand-off in
:mod:`specinit.warmstart`, the ArviZ comparison in :mod:`specinit.diagnostics`.
"""

from specinit import decompose
from specinit.estimate import SpectralEstimate
from specinit.moments import CountMoments
from specinit.population import FactoredMoments
from specinit.recovery import fit_exchangeable
from specinit.whitening import IndefiniteMomentError, whiten

__all__ = [
    "CountMoments",
    "FactoredMoments",
    "IndefiniteMomentError",
    "SpectralEstimate",
    "decompose",
    "fit_exchangeable",
    "whiten",
]
__version__ = "0.1.0"
