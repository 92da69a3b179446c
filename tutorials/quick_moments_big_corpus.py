"""Quick moment estimates on a corpus too large for MCMC
=====================================================

The spectral fit reads the corpus in a few sparse passes and never forms a
V x V matrix. Here the corpus is streamed in row-chunks from a function (as
one would read shards from disk); moments from chunks merge by addition and
equal the whole-batch moments. We compare with scikit-learn's online LDA.
"""


# %%
import os
import time

import numpy as np
from scipy.optimize import linear_sum_assignment
from specinit.models import lda

from specinit.engine.moments import CountMoments
from specinit.synthetic import sample_lda

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
n_docs, vocab, k = (3_000, 1_000, 5) if SMALL else (200_000, 20_000, 30)
corpus = sample_lda(n_docs, vocab, k, alpha=0.1, doc_length=90, seed=1)
X = corpus.counts
print(f"N={n_docs}, V={vocab}, k={k}, {X.nnz} non-zeros")


def topic_error(beta_hat):
    cost = np.abs(corpus.beta[:, None, :] - beta_hat[None]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols].mean()


# %%
# Streaming: a callable that yields row-chunks (called once per pass)
# -------------------------------------------------------------------

# %%
def shards(size=max(1, n_docs // 8)):
    for start in range(0, n_docs, size):
        yield X[start : start + size]


start = time.perf_counter()
estimate = lda.spectral(shards, k, alpha0=0.1 * k, doc_topics=False, seed=0)
print(f"streamed fit: {time.perf_counter() - start:.2f} s, mean L1 topic error {topic_error(estimate.params['beta']):.3f}")

# %%
# Chunked and whole-batch first-order statistics agree to rounding:

# %%
whole = CountMoments(X, alpha0=0.1 * k)
chunked = CountMoments(shards, alpha0=0.1 * k)
print("max |M1 difference|:", np.abs(whole.m1 - chunked.m1).max())
assert np.allclose(whole.m1, chunked.m1, atol=1e-12)

# %%
# Against scikit-learn's online variational LDA (one pass over the data)
# ----------------------------------------------------------------------

# %%
from sklearn.decomposition import LatentDirichletAllocation

start = time.perf_counter()
sk = LatentDirichletAllocation(n_components=k, learning_method="online", max_iter=1, doc_topic_prior=0.1, random_state=0).fit(X)
sk_beta = sk.components_ / sk.components_.sum(axis=1, keepdims=True)
print(f"sklearn online LDA (1 pass): {time.perf_counter() - start:.2f} s, mean L1 topic error {topic_error(sk_beta):.3f}")
