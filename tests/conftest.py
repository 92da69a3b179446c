"""Shared test helpers: one Hungarian matcher for every recovery test; the ``boundary`` marker.

Import with ``from tests.conftest import best_permutation`` (the tests are a
package). The matcher is an independent oracle built on SciPy, not
:mod:`specinit.align`, so recovery tests do not rely on the code they check.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

# JAX's persistent compilation cache, shared by the worker processes, the tutorials' subprocesses and the runs
# under other Pythons with the same jax version (a key hashes the program without source locations, and the
# jax/jaxlib version): much of the suite's time is XLA compiling the same NumPyro programs again. Bounded in size,
# so JAX locks each entry (filelock, in the test extra) and no process reads a half-written one. Set before JAX is
# imported; the caller's own JAX_* settings win.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(__file__).parent.parent / ".pytest_cache" / "jax"))
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(4 << 30))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

# Test modules that cross the NumPyro/ArviZ/scikit-learn boundary or run the README's code (marker `boundary`):
# .ci/run runs them under the other supported Pythons beside the full suite. Those that run the demo or a tutorial
# as a user does (marker `script`) are the suite's slowest (`-m "not script"` leaves them out of a quick run).
BOUNDARY_MODULES = {"test_posterior.py", "test_compare.py", "test_readme.py", "test_estimators.py", "test_warmstart.py",
                    "test_topic_svi.py"}
SCRIPT_MODULES = {"test_demo.py", "test_tutorials.py"}


def pytest_collection_modifyitems(items):
    for item in items:
        name = Path(str(item.fspath)).name
        if name in BOUNDARY_MODULES:
            item.add_marker(pytest.mark.boundary)
        if name in SCRIPT_MODULES:
            item.add_marker(pytest.mark.script)
    # The slowest tests first (scripts, then the boundary's NumPyro runs), so that the workers of `-n 2` end on short
    # tests together instead of one running a tutorial alone while the other has finished.
    items.sort(key=lambda item: (item.get_closest_marker("script") is None,
                                 item.get_closest_marker("boundary") is None))


def best_permutation(truth, estimated, metric: str = "l1") -> np.ndarray:
    """Permutation ``perm`` of the rows of ``estimated`` with ``estimated[perm] ~ truth``.

    Rows are compared after flattening trailing axes; ``metric`` is ``"l1"``,
    ``"l2"`` or ``"abs_cosine"`` (unit vectors up to sign: maximizes
    ``|<e_i, t_j>|``).
    """
    truth = np.asarray(truth, dtype=np.float64).reshape(len(truth), -1)
    estimated = np.asarray(estimated, dtype=np.float64).reshape(len(estimated), -1)
    if metric == "abs_cosine":
        cost = -np.abs(truth @ estimated.T)
    else:
        diff = truth[:, None, :] - estimated[None, :, :]
        cost = np.abs(diff).sum(-1) if metric == "l1" else np.sqrt((diff**2).sum(-1))
    rows, cols = linear_sum_assignment(cost)
    return cols[np.argsort(rows)]


def random_instance(k, V, seed, conc=0.5):
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(V, conc), size=k)
    weights = rng.dirichlet(np.full(k, 5.0))
    return beta, weights


def sample_single_topic(beta, weights, N, length, seed):
    rng = np.random.default_rng(seed)
    z = rng.choice(len(weights), size=N, p=weights)
    X = rng.multinomial(length, beta[z])  # vectorized over rows
    return X, z


#: Six topics over 120 words with weights down to 0.03: with 2,000 documents of 3-4 tokens (seed 2 of
#: :func:`short_documents`) a negative noise eigenvalue of the pooled pair moment (about -0.0018) is larger in
#: magnitude than the smallest topic's (about 0.0017).
SHORT_TOPICS = (np.random.default_rng(5).dirichlet(np.full(120, 0.1), size=6), np.array([0.3, 0.25, 0.2, 0.15, 0.07, 0.03]))


def short_documents(beta, weights, N, seed):
    """N documents of 3 or 4 tokens from the single-topic model, as a CSR matrix."""
    rng = np.random.default_rng(seed)
    z = rng.choice(len(weights), size=N, p=weights)
    lengths = rng.integers(3, 5, size=N)
    X = np.zeros((N, beta.shape[1]), dtype=np.int64)
    for length in (3, 4):
        rows = np.flatnonzero(lengths == length)
        X[rows] = rng.multinomial(length, beta[z[rows]])
    return sp.csr_matrix(X)


def sample_lda(beta, alpha, N, length, seed):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(alpha, size=N)
    probs = theta @ beta
    X = rng.multinomial(length, probs / probs.sum(1, keepdims=True))
    return X, theta



@pytest.fixture
def one_mib_budget():
    """The memory budget (:func:`specinit.set_memory_limit`) at 1 MiB for one test, restored after it."""
    import specinit

    specinit.set_memory_limit(2**20)
    yield
    specinit.set_memory_limit(None)
