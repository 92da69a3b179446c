"""NumPyro building blocks shared by the families of :mod:`specinit.models` (JAX).

* :mod:`~specinit.distributions.hmm` -- the one forward algorithm: :class:`CategoricalHMM`,
  :class:`GaussianHMM`, posterior marginals, Viterbi paths;
* :mod:`~specinit.distributions.counts` -- document-word counts (dense or sparse, O(nnz)) and the
  collapsed topic-model likelihoods;
* :mod:`~specinit.distributions.mixtures` -- mixture likelihoods with the component summed out;
* :mod:`~specinit.distributions.continuous` -- the exponential-power factor family, the additive
  log-ratio map of the simplex, the Dirichlet in centred log-ratio coordinates.
"""

from specinit.distributions.counts import DocumentCounts
from specinit.distributions.hmm import CategoricalHMM, GaussianHMM
from specinit.distributions.mixtures import MixtureLikelihood

__all__ = ["CategoricalHMM", "DocumentCounts", "GaussianHMM", "MixtureLikelihood"]
