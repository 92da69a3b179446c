"""The spectral engine: pure NumPy/SciPy arrays, no JAX, NumPyro or ArviZ.

Stages, each a module:

* :mod:`~specinit.engine.sources` -- data in, validated once per kind (counts, views; chunks, streams, Dask);
* :mod:`~specinit.engine.backends` -- where the passes run: one interface of additive passes, the NumPy
  reference and the Numba, JAX and Dask backends (imported lazily, only when asked for);
* :mod:`~specinit.engine.moments` -- count moments from data in one pass (mergeable partial sums);
* :mod:`~specinit.engine.rows` -- noise-corrected moments of mixture rows (Gaussian mixtures);
* :mod:`~specinit.engine.sequences` -- sequences in; the sliding triples of a hidden chain as three views;
* :mod:`~specinit.engine.population` -- exact moments from parameters (recovery checks, conditioning);
* :mod:`~specinit.engine.whitening` -- randomized whitening of the second moment (signed eigenvalues);
* :mod:`~specinit.engine.decompose` -- symmetric tensor decompositions (TPM, SVTD, ECA, ALS);
* :mod:`~specinit.engine.decompose4`, :mod:`~specinit.engine.cumulants` -- order-4 decompositions and
  whitened third/fourth cumulants from data (independent-factor models);
* :mod:`~specinit.engine.exchangeable` -- moments -> whitening -> decomposition -> unwhitened components;
* :mod:`~specinit.engine.views` -- multi-view moments, symmetrization onto a target view;
* :mod:`~specinit.engine.jennrich` -- non-symmetric simultaneous diagonalization (the fallback);
* :mod:`~specinit.engine.kernel_features`, :mod:`~specinit.engine.kernels`,
  :mod:`~specinit.engine.kernel_densities` -- low-rank kernel features, kernel embeddings of
  multi-view mixtures, conditional densities (nonparametric multi-view);
* :mod:`~specinit.engine.support` -- sign fixing and projection strictly inside the support.
"""

from specinit.engine import decompose
from specinit.engine.exchangeable import ExchangeableFit, fit_exchangeable
from specinit.engine.moments import CountMoments
from specinit.engine.population import FactoredMoments
from specinit.engine.views import MultiViewFit, ViewMoments, fit_multiview
from specinit.engine.whitening import IndefiniteMomentError, Whitening, whiten

__all__ = [
    "CountMoments",
    "ExchangeableFit",
    "FactoredMoments",
    "IndefiniteMomentError",
    "MultiViewFit",
    "ViewMoments",
    "Whitening",
    "decompose",
    "fit_exchangeable",
    "fit_multiview",
    "whiten",
]
