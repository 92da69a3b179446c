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

Real data (``--real``), where no k is true but the ways of choosing one should agree: the Gaussian mixtures of
scikit-learn's bundled tables (iris, wine, breast cancer, digits; standardized features; their class counts
beside), spherical and diagonal, k = 1..8 (digits 1..16; ``n_components="auto"``, ``GridSearchCV`` over ``score``, BIC;
scikit-learn's ``GaussianMixture(n_init=3)`` by the same grid and by BIC); and LDA on paragraphs of the
standard-library docstrings (:func:`specinit.corpus.load_python_docs`, a seeded subset of ``--docs`` paragraphs),
k in ``REAL_TOPICS``: ``SpectralLDA("auto")``, ``GridSearchCV`` over ``SpectralLDA.score`` and over scikit-learn's
``LatentDirichletAllocation`` (batch, 20 iterations), with each grid's mean held-out score per k. The real-data
grids use three shuffled folds (seeded): the bundled tables are sorted by class.

Run: ``python benchmarks/bench_k_selection.py [--topics 3 4 5 6 7 8] [--gmm] [--real [--docs 4000]]``.
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
from sklearn.model_selection import GridSearchCV, KFold
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


#: Bundled tables of ``--real``: scikit-learn loader, largest k of the grid.
TABLES = (("iris", "load_iris", 8), ("wine", "load_wine", 8), ("breast cancer", "load_breast_cancer", 8),
          ("digits", "load_digits", 16))

#: Numbers of topics of the real-text grid.
REAL_TOPICS = [5, 10, 15, 20, 30, 40]


#: The folds of the real-data grids: the bundled tables are sorted by class, so unshuffled folds would each hold
#: out whole classes.
FOLDS = KFold(3, shuffle=True, random_state=0)


def real_gmm_rows() -> list:
    from sklearn import datasets
    from sklearn.mixture import GaussianMixture

    from specinit.estimators import SpectralGaussianMixture

    rows = []
    for name, loader, k_max in TABLES:
        grid = {"n_components": list(range(1, k_max + 1))}
        bunch = getattr(datasets, loader)()
        X = bunch.data
        sd = X.std(axis=0)
        X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        for covariance in ("spherical", "diag"):
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = SpectralGaussianMixture(covariance_type=covariance, random_state=0)
                auto = SpectralGaussianMixture("auto", covariance_type=covariance, random_state=0).fit(X).estimate_.k
                found = GridSearchCV(ours, grid, cv=FOLDS, error_score=-np.inf).fit(X)
                bic = [ours.set_params(n_components=j).fit(X).bic(X) for j in grid["n_components"]]
                ours_seconds = time.perf_counter() - start
                start = time.perf_counter()
                peer = GaussianMixture(covariance_type=covariance, n_init=3, random_state=0)
                theirs = GridSearchCV(peer, grid, cv=FOLDS, error_score=-np.inf).fit(X)
                theirs_bic = [peer.set_params(n_components=j).fit(X).bic(X) for j in grid["n_components"]]
                theirs_seconds = time.perf_counter() - start
            rows.append([name, covariance, len(np.unique(bunch.target)), auto, found.best_params_["n_components"],
                         1 + int(np.argmin(bic)), ours_seconds, theirs.best_params_["n_components"],
                         1 + int(np.argmin(theirs_bic)), theirs_seconds])
    return rows


def real_lda_rows(n_docs: int) -> tuple[list, list]:
    from specinit.corpus import load_python_docs

    X = sp.csr_matrix(load_python_docs().counts, dtype=np.float64)
    X = X[np.sort(np.random.default_rng(0).permutation(X.shape[0])[:n_docs])]
    X = X[np.asarray(X.sum(axis=1)).ravel() >= 3]
    grid = {"n_components": REAL_TOPICS}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        auto = SpectralLDA("auto", random_state=0).fit(X)
        auto_seconds = time.perf_counter() - start
        start = time.perf_counter()
        ours = GridSearchCV(SpectralLDA(random_state=0), grid, cv=FOLDS, error_score=-np.inf).fit(X)
        ours_seconds = time.perf_counter() - start
        start = time.perf_counter()
        peer = LatentDirichletAllocation(learning_method="batch", max_iter=20, random_state=0)
        theirs = GridSearchCV(peer, grid, cv=FOLDS, error_score=-np.inf).fit(X)
        theirs_seconds = time.perf_counter() - start
    report = auto.estimate_.diagnostics
    summary = [[f"{X.shape[0]} x {X.shape[1]}", auto.estimate_.k, report["k_auto/eigengap_k"], report["k_auto/signal"],
                auto_seconds, ours.best_params_["n_components"], ours_seconds, theirs.best_params_["n_components"],
                theirs_seconds]]
    curves = [[k, f"{a:.5g}", f"{b:.5g}"] for k, a, b in zip(REAL_TOPICS, ours.cv_results_["mean_test_score"],
                                                          theirs.cv_results_["mean_test_score"])]
    return summary, curves


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--topics", type=int, nargs="+", default=[3, 4, 5, 6, 7, 8])
    parser.add_argument("--gmm", action="store_true", help="the Gaussian-mixture table instead of the topic one")
    parser.add_argument("--real", action="store_true", help="the real-data tables instead of the synthetic ones")
    parser.add_argument("--docs", type=int, default=4_000, help="docstring paragraphs of the real LDA grid")
    args = parser.parse_args()
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f}\n")
    if args.real:
        print(table(["table", "covariance", "classes", "auto", "GridSearchCV, score", "BIC", "ours (s)",
                     "scikit-learn GridSearchCV", "scikit-learn BIC", "scikit-learn (s)"], real_gmm_rows()))
        summary, curves = real_lda_rows(args.docs)
        print(table(["docstrings (N x V)", "auto", "eigengap", "signal values", "auto (s)", "GridSearchCV, score",
                     "grid (s)", "sklearn LDA GridSearchCV", "sklearn grid (s)"], summary))
        print(table(["k", "SpectralLDA.score (mean held-out, per fold)", "sklearn LDA score (mean held-out)"],
                    curves))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        return
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
