"""Checked by mypy (tests/test_typing.py), never run: what a type checker infers for calls of the public API."""

from typing import Any, Callable, assert_type

import numpy as np

from specinit import SpectralEstimate
from specinit.models import factors, gmm, hmm, lda, multiview, single_topic
from specinit.refine import RefineResult

counts = np.ones((20, 6))
est = lda.spectral(counts, 2)
assert_type(est, SpectralEstimate)
assert_type(single_topic.spectral(counts, 2), SpectralEstimate)
assert_type(gmm.spectral(counts, 2), SpectralEstimate)
assert_type(hmm.spectral([np.arange(5)], 2, 5), SpectralEstimate)
assert_type(factors.spectral(counts, 2), SpectralEstimate)
assert_type(multiview.spectral([counts, counts, counts], 2), SpectralEstimate)
assert_type(est.params, dict[str, np.ndarray])
assert_type(est.init_params(lda.model, 2, None), dict[str, Any])
assert_type(est.inverse_mass_matrix(lda.model), np.ndarray)
assert_type(est.condition(lda.model), Callable[..., Any])
assert_type(SpectralEstimate.load("estimate.npz"), SpectralEstimate)

mixture = gmm.spectral(counts, 2)
assert_type(gmm.refine(counts, mixture), RefineResult)
assert_type(gmm.refine(counts, mixture).estimate, SpectralEstimate)
assert_type(hmm.refine([np.arange(5)], hmm.spectral([np.arange(5)], 2, 5)), RefineResult)
