"""Choosing the number of topics: ``k="auto"`` and ``GridSearchCV`` over the topic faces vs the old score and
scikit-learn's LDA.

Synthetic LDA corpora with 3 to 8 topics (100 words, topics drawn from Dirichlet(0.1), alpha = 0.3 per topic,
1,500 documents of 30 tokens; seeded). For each corpus:

* ``SpectralLDA(n_components="auto")`` (the rule of ``lda.spectral(X, "auto")``:
  :meth:`specinit.family.Family.choose_k`), with the eigengap guess and the number of spectrum values above the
  noise threshold it reports;
* ``GridSearchCV(SpectralLDA(), n_components=1..12, cv=3)`` scored by ``SpectralLDA.score`` (held-out document
  completion);
* the same grid scored by the in-sample score the face had before (the log-likelihood of every document with its
  own folded-in theta, multinomial coefficient included), fits that fail counted as ``-inf``;
* ``GridSearchCV(LatentDirichletAllocation(learning_method="batch", max_iter=20), n_components=1..12, cv=3)``
  (scikit-learn's variational bound).

Gaussian mixtures (``--gmm``): blobs (``make_blobs``, 1,500 rows, unit spread, seeded) with 3-6 centres in 1-5
dimensions; ``SpectralGaussianMixture`` (spherical) chosen by ``n_components="auto"``, by ``GridSearchCV(cv=3)``
over its held-out ``score`` and by its ``bic``, against scikit-learn's ``GaussianMixture`` (spherical,
``n_init=3``) by the same grid and by BIC, k = 1..8.

Run: ``python benchmarks/bench_k_selection.py [--topics 3 4 5 6 7 8] [--gmm]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _common import machine, table
from sklearn.decomposition import LatentDirichletAllocation
from sklearn.model_selection import GridSearchCV
from specinit.models import lda

from specinit.estimators import SpectralLDA

GRID = list(range(1, 13))


def corpus(k: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(100, 0.1), size=k)
    theta = rng.dirichlet(np.full(k, 0.3), size=1_500)
    return sp.csr_matrix(np.vstack([rng.multinomial(30, p / p.sum()) for p in theta @ beta]))


def in_sample(estimator, X, y=None) -> float:
    """The face's former score: every document's log-likelihood with its own folded-in theta."""
    return float(np.sum(lda.log_likelihood(X, estimator.estimate_)))


def search(estimator, X, scoring=None):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = GridSearchCV(estimator, {"n_components": GRID}, cv=3, scoring=scoring, error_score=-np.inf).fit(X)
    failed = int(np.sum(~np.isfinite(found.cv_results_["mean_test_score"])))
    return found.best_params_["n_components"], failed, time.perf_counter() - start


BLOBS = [(3, 2, 0), (4, 3, 1), (5, 5, 2), (3, 1, 3), (6, 4, 4)]  # (centres, dimensions, seed)


def gmm_rows() -> list:
    from sklearn.datasets import make_blobs
    from sklearn.mixture import GaussianMixture

    from specinit.estimators import SpectralGaussianMixture

    grid = {"n_components": list(range(1, 9))}
    rows = []
    for k, d, seed in BLOBS:
        X, _ = make_blobs(1_500, n_features=d, centers=k, cluster_std=1.0, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto = SpectralGaussianMixture("auto", random_state=0).fit(X).estimate_.k
            ours = GridSearchCV(SpectralGaussianMixture(random_state=0), grid, cv=3).fit(X)
            ours_bic = [SpectralGaussianMixture(j, random_state=0).fit(X).bic(X) for j in grid["n_components"]]
            peer = GaussianMixture(covariance_type="spherical", n_init=3, random_state=0)
            theirs = GridSearchCV(peer, grid, cv=3).fit(X)
            theirs_bic = [peer.set_params(n_components=j).fit(X).bic(X) for j in grid["n_components"]]
        rows.append([k, d, auto, ours.best_params_["n_components"], 1 + int(np.argmin(ours_bic)),
                     theirs.best_params_["n_components"], 1 + int(np.argmin(theirs_bic))])
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, nargs="+", default=[3, 4, 5, 6, 7, 8])
    parser.add_argument("--gmm", action="store_true", help="the Gaussian-mixture table instead of the topic one")
    args = parser.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}\n")
    if args.gmm:
        print(table(["centres", "dimensions", "auto", "GridSearchCV, score", "BIC", "scikit-learn GridSearchCV",
                     "scikit-learn BIC"], gmm_rows()))
        return
    rows = []
    for k in args.topics:
        X = corpus(k, k)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            auto = SpectralLDA("auto", random_state=0).fit(X)
        auto_seconds = time.perf_counter() - start
        held_out = search(SpectralLDA(random_state=0), X)
        old = search(SpectralLDA(random_state=0), X, scoring=in_sample)
        theirs = search(LatentDirichletAllocation(learning_method="batch", max_iter=20, random_state=0), X)
        report = auto.estimate_.diagnostics
        rows.append([k, auto.estimate_.k, report["k_auto/eigengap_k"], report["k_auto/signal"], auto_seconds,
                     held_out[0], held_out[2], f"{old[0]} ({old[1]} failed fits)", theirs[0], theirs[2]])
    headers = ["true k", "auto", "eigengap", "signal values", "auto (s)", "GridSearchCV, score", "grid (s)",
               "GridSearchCV, former in-sample score", "sklearn LDA GridSearchCV", "sklearn grid (s)"]
    print(table(headers, rows))


if __name__ == "__main__":
    main()
