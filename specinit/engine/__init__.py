"""The spectral engine: pure NumPy/SciPy arrays, no JAX, NumPyro or ArviZ.

Stages, each a module:

* :mod:`~specinit.engine.chunks` -- count input as validated CSR chunks; backend choice;
* :mod:`~specinit.engine.moments` -- count moments from data in one pass (mergeable partial sums);
* :mod:`~specinit.engine.jax_passes`, :mod:`~specinit.engine.numba_passes`,
  :mod:`~specinit.engine.dask_passes` -- the same passes on JAX devices, Numba threads, Dask blocks
  (imported lazily, only when asked for);
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
