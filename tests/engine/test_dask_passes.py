"""Dask row blocks on a two-process LocalCluster give the in-memory moments and estimates; bad inputs fail clearly."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.sparse as sp
from distributed import Client, LocalCluster
from specinit.models import lda, single_topic

from specinit.engine.moments import CountMoments
from specinit.engine.views import ViewMoments, fit_multiview
from tests.conftest import random_instance, sample_lda

# In-memory and Dask paths add the same float64 partial sums in a different order (threads / tree):
# the issue asks for agreement to 1e-10 (relative to the largest entry); observed ~1e-16.
RTOL = 1e-10


def _rel(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / np.abs(np.asarray(a)).max())


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def corpus():
    beta, weights = random_instance(4, 60, seed=5)
    X, _ = sample_lda(beta, 2 * weights, N=600, length=30, seed=6)
    X[7] = 0  # a dropped document (< 3 tokens) inside a block
    return sp.csr_matrix(X)


def _sparse_blocks(X, rows):
    return da.concatenate([da.from_array(X[i : i + rows], chunks=X[i : i + rows].shape, asarray=False)
                           for i in range(0, X.shape[0], rows)])


@pytest.mark.parametrize("dense", [False, True])
def test_count_moments_equal_in_memory(client, corpus, dense):
    counts = da.from_array(corpus.toarray(), chunks=(137, -1)) if dense else _sparse_blocks(corpus, 137)
    assert counts.numblocks[0] == 5
    ref = CountMoments(corpus, alpha0=0.8)
    dist = CountMoments(counts, alpha0=0.8)
    assert dist.n_dropped == ref.n_dropped == 1 and dist.n_documents == ref.n_documents
    rng = np.random.default_rng(0)
    Q = rng.standard_normal((60, 8))
    assert _rel(ref.m2_matmat(Q), dist.m2_matmat(Q)) < RTOL
    W = rng.standard_normal((60, 4))
    assert _rel(ref.whitened_m3(W), dist.whitened_m3(W)) < RTOL


def test_topic_models_on_dask_equal_in_memory(client, corpus):
    counts = _sparse_blocks(corpus, 200)
    a = lda.spectral(corpus, 4, alpha0=1.0, seed=2)
    b = lda.spectral(counts, 4, alpha0=1.0, seed=2)
    assert _rel(a.params["beta"], b.params["beta"]) < 1e-8 and _rel(a.params["theta"], b.params["theta"]) < 1e-8
    c = single_topic.spectral(corpus, 4, seed=2)
    d = single_topic.spectral(counts, 4, seed=2)
    assert _rel(c.params["beta"], d.params["beta"]) < 1e-8


def test_views_on_dask_equal_in_memory(client):
    rng = np.random.default_rng(1)
    N = 800
    h = rng.choice(3, size=N, p=[0.25, 0.35, 0.4])
    symbols = np.array([rng.choice(20, p=p) for p in rng.dirichlet(np.full(20, 0.3), size=3)[h]])
    views = [rng.normal(3 * rng.standard_normal((3, 5))[h]),
             sp.csr_matrix((np.ones(N), (np.arange(N), symbols)), shape=(N, 20)),
             rng.normal(3 * rng.standard_normal((3, 7))[h])]
    lazy = [da.from_array(views[0], chunks=(300, -1)), _sparse_blocks(views[1], 300),
            da.from_array(views[2], chunks=(300, -1))]
    ref, dist = ViewMoments(views), ViewMoments(lazy)
    Q = rng.standard_normal((20, 4))
    assert _rel(ref.pairs_matmat(0, 1, Q), dist.pairs_matmat(0, 1, Q)) < RTOL
    U = [rng.standard_normal((v.shape[1], 3)) for v in views]
    assert _rel(ref.projected_triples(0, 1, 2, *U), dist.projected_triples(0, 1, 2, *U)) < RTOL
    assert _rel(fit_multiview(views, 3, seed=0).weights, fit_multiview(lazy, 3, seed=0).weights) < 1e-8


def test_bad_dask_inputs(client, corpus):
    by_columns = da.from_array(corpus.toarray(), chunks=(200, 30))
    with pytest.raises(ValueError, match=r"rechunk with x.rechunk\(\{1: -1\}\)"):
        CountMoments(by_columns)
    mixed = da.concatenate([_sparse_blocks(corpus[:300], 300), da.from_array(corpus[300:].toarray(), chunks=(300, -1))])
    with pytest.raises(ValueError, match="all scipy.sparse or all dense"):
        CountMoments(mixed)
    with pytest.raises(ValueError, match="'backend' argument of CountMoments"):
        CountMoments(_sparse_blocks(corpus, 300), backend="jax")
    negative = da.from_array(-corpus.toarray(), chunks=(300, -1))
    with pytest.raises(ValueError, match="non-negative counts"):
        CountMoments(negative)
    dense = [np.ones((10, 3)), np.ones((10, 4)), np.ones((10, 5))]
    misaligned = [da.from_array(dense[0], chunks=(5, -1)), da.from_array(dense[1], chunks=(4, -1)),
                  da.from_array(dense[2], chunks=(5, -1))]
    with pytest.raises(ValueError, match="same row chunks"):
        ViewMoments(misaligned)
    with pytest.raises(TypeError, match="all Dask arrays or all in-memory"):
        ViewMoments([misaligned[0]] + dense[1:])


def _hmm_symbols(T, seed=3):
    rng = np.random.default_rng(seed)
    k, V = 3, 12
    trans = rng.dirichlet(np.ones(k), size=k) + 3 * np.eye(k)
    trans /= trans.sum(1, keepdims=True)
    emission = rng.dirichlet(np.full(V, 0.3), size=k)
    states = np.zeros(T, dtype=np.int64)
    u = rng.random(T)
    cum = np.cumsum(trans, axis=1)
    for t in range(1, T):
        states[t] = min(np.searchsorted(cum[states[t - 1]], u[t]), k - 1)
    return (np.cumsum(emission, axis=1)[states] < rng.random(T)[:, None]).sum(axis=1)


def test_hmm_one_long_sequence_on_dask(client):
    from specinit.models import hmm

    symbols = _hmm_symbols(6000)
    a = hmm.spectral(symbols, 3, 12, seed=0)
    # Uneven blocks, two of one symbol: the triples across block boundaries read the next blocks.
    b = hmm.spectral(da.from_array(symbols, chunks=(2000, 1, 1, 1500, 2498)), 3, 12, seed=0)
    assert b.diagnostics["n_triples"] == a.diagnostics["n_triples"] == 5998
    for site in ("init", "transition", "emission"):
        assert _rel(a.params[site], b.params[site]) < 1e-8
    with pytest.raises(ValueError, match=r"symbols in 0\.\.11"):
        hmm.spectral(da.from_array(np.r_[symbols, 40], chunks=2000), 3, 12)


@pytest.mark.parametrize("covariance", ["common", "spherical"])
def test_gmm_on_dask_equals_in_memory(client, covariance):
    from specinit.models import gmm

    rng = np.random.default_rng(0)
    loc = 4 * rng.standard_normal((3, 6))
    x = loc[rng.choice(3, 2000, p=[0.2, 0.3, 0.5])] + rng.standard_normal((2000, 6))
    a = gmm.spectral(x, 3, covariance=covariance, seed=0)
    b = gmm.spectral(da.from_array(x, chunks=(600, -1)), 3, covariance=covariance, seed=0)
    for site in ("weights", "loc", "scale"):
        assert _rel(a.params[site], b.params[site]) < 1e-8
    with pytest.raises(ValueError, match="assign_steps"):
        gmm.spectral(da.from_array(x, chunks=(600, -1)), 3, assign_steps=2)
