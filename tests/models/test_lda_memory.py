"""Peak memory of lda.spectral: the input plus O(V k) and bounded blocks, on every path, with and without Numba."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from specinit.engine import anchors
from specinit.models import _topics, lda
from specinit.synthetic import sample_lda

#: A corpus whose vocabulary is large against its documents (V = 12,000, 2,000 documents of 40 tokens): a dense
#: (V, V) array (1.2 GB) or a dense (N, V) one (0.19 GB) would be far above the bound.
N, V, K = 2000, 12_000, 5


@pytest.fixture(scope="module")
def corpus():
    return sp.csr_matrix(sample_lda(N, V, K, alpha=0.1, doc_length=40, seed=0).counts, dtype=np.float64)


def bound(X) -> float:
    """Bytes the fit may hold at its peak: the input, 40 (V, k + 10) float64 blocks (the eigensolver's Krylov space,
    at most 5 blocks of k + 10 columns with its image and a restart's copies, and the anchor step's (V, k) arrays)
    and 6 float64 (non-zeros, k) temporaries (the NumPy closing sweeps' blocks, whole at this size)."""
    return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + 8.0 * (40 * V * (K + 10) + 6 * X.nnz * K)


#: The alpha0 grid of the tensor path, long enough that keeping every candidate's (k, V) topics (0.46 MiB each
#: here) breaks the bound: 91 MiB with them kept, 36 MiB without.
LONG_GRID = np.geomspace(0.05, 50.0, 160)


@pytest.mark.parametrize("numba", [True, False], ids=["numba", "numpy"])
@pytest.mark.parametrize("options", [{}, {"alpha0": 0.5}, {"method": "tpm", "alpha0_grid": LONG_GRID}],
                         ids=["default", "alpha0", "alpha0-grid"])
def test_peak_memory_is_the_input_plus_vk(corpus, options, numba, monkeypatch):
    """The NumPy allocations of a fit (traced by tracemalloc, which NumPy reports to) peak within :func:`bound`:
    measured 33-36 MiB against a bound of 74 MiB on every path here."""
    if not numba:
        monkeypatch.setattr(_topics, "numba_kernel", lambda name: None)
        monkeypatch.setattr(anchors, "numba_kernel", lambda name: None)
    options = {**options, "doc_topics": False, "seed": 0, "closing_tol": 0.0}  # every closing sweep runs
    lda.spectral(corpus, K, **options)  # compiled kernels loaded outside the measurement
    tracemalloc.start()
    try:
        est = lda.spectral(corpus, K, **options)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.diagnostics["closing_sweeps"] == lda.EM_SWEEPS
    assert peak <= bound(corpus), f"peak {peak / 2**20:.1f} MiB over the bound {bound(corpus) / 2**20:.1f} MiB"
