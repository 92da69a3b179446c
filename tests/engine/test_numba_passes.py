"""The fused Numba CSR kernels give the SciPy sums (backend="numba")."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine.moments import CountMoments
from tests.conftest import random_instance, sample_lda

# Same float64 products summed in another order (per thread, then across threads): a few ulps.
RTOL = 1e-10


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(a).max())


@pytest.mark.parametrize("weighting", ["pooled", "per-document"])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_numba_backend_equals_scipy(weighting, n_threads):
    beta, weights = random_instance(3, 40, seed=1)
    X, _ = sample_lda(beta, 3 * weights, N=400, length=20, seed=2)
    X[3] = 0  # dropped document
    X = sp.csr_matrix(X)
    ref = CountMoments(X, alpha0=1.5, weighting=weighting, backend="numpy")
    fast = CountMoments(X, alpha0=1.5, weighting=weighting, backend="numba", n_threads=n_threads, chunk_rows=150)
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((40, 7))
    assert _rel(ref.m2_matmat(Q), fast.m2_matmat(Q)) < RTOL
    W = rng.standard_normal((40, 3))
    assert _rel(ref.whitened_m3(W), fast.whitened_m3(W)) < RTOL
