"""Shared test helpers: one Hungarian matcher for every recovery test.

Import with ``from tests.conftest import best_permutation`` (the tests are a
package). The matcher is an independent oracle built on SciPy, not
:mod:`specinit.align`, so recovery tests do not rely on the code they check.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment


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


def sample_lda(beta, alpha, N, length, seed):
    rng = np.random.default_rng(seed)
    theta = rng.dirichlet(alpha, size=N)
    probs = theta @ beta
    X = rng.multinomial(length, probs / probs.sum(1, keepdims=True))
    return X, theta

