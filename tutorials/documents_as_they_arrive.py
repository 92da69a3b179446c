"""Documents as they arrive: online topic models
=============================================

A collection that grows -- tickets, messages, commits -- should not be refitted from
scratch every day. The moments the spectral fit reads are sums over documents, so
adding a batch is exact: the summary of the documents seen so far (their word-pair
sums) merges with the new batch's, and the topics are recovered from everything seen,
the eigensolver started from the previous fit. The earlier documents need not be
kept. Here: the standard library's docstrings arrive in ten batches, first as LDA
(``SpectralLDA.partial_fit``, or ``lda.update`` with estimates), then one-sentence
summaries as a mixture of unigrams (``SpectralTopicMixture.partial_fit``).
"""


# %%
import os
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import normalized_mutual_info_score

from specinit.corpus import document_completion, load_docstring_summaries, load_python_docs
from specinit.estimate import SpectralEstimate
from specinit.estimators import SpectralLDA, SpectralTopicMixture
from specinit.models import lda, single_topic

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
corpus = load_python_docs(("json", "email", "logging") if SMALL else ("stdlib",), min_df=3 if SMALL else 5)
X = sp.csr_matrix(corpus.counts, dtype=np.float64)
order = np.random.default_rng(0).permutation(X.shape[0])
n_test = X.shape[0] // 5
test, train = X[order[:n_test]], X[order[n_test:]]
batches = np.array_split(np.arange(train.shape[0]), 10)
k = 8 if SMALL else 20
print(corpus, f"\n{train.shape[0]} training paragraphs in 10 batches, {test.shape[0]} held out, k = {k}")


def perplexity(beta, alpha):
    """Held-out document completion: half of each test document's tokens fold in theta, the rest are scored."""
    return document_completion(test, beta, alpha).perplexity


# %%
# LDA, batch by batch
# -------------------
#
# ``partial_fit`` merges the batch's pair sums with the stored ones and keeps the batch;
# the topics are recovered when the model is next read (``components_``, ``transform``,
# ``score``): anchor words on everything seen, the eigensolver warm-started from the last
# recovery, then EM sweeps over the latest batch (the earlier documents enter them
# through their word counts). A stream read only at the end pays one recovery; read
# after every batch, one per batch. (The first read also loads the compiled kernels.)

# %%
model = SpectralLDA(k, random_state=0)
for number, batch in enumerate(batches, 1):
    start = time.perf_counter()
    model.partial_fit(train[batch])
    merged = time.perf_counter() - start
    if number in (1, 2, 5, 10):
        start = time.perf_counter()
        topics = model.components_  # the read that recovers the topics
        recovered = time.perf_counter() - start
        print(f"after batch {number:2d}: {model.estimate_.diagnostics['n_documents']:5d} documents, "
              f"held-out perplexity {perplexity(topics, model.doc_topic_prior_):6.0f}, "
              f"merge {merged * 1000:4.0f} ms, recovery {recovered * 1000:4.0f} ms")

once = lda.spectral(train, k, seed=0, doc_topics=False)
print(f"one fit on everything: held-out perplexity {perplexity(once.params['beta'], once.params['alpha']):.0f}")

# %%
# Stop, save, continue in another process
# ---------------------------------------
#
# The functional form ``lda.update`` recovers at every batch and returns an estimate that
# keeps the merged moments in its ``state``; ``save`` writes them, so the stream continues
# after a restart.

# %%
uninterrupted = None
for batch in batches:
    uninterrupted = lda.update(train[batch], uninterrupted, k=k, seed=0)
stream = None
for batch in batches[:5]:
    stream = lda.update(train[batch], stream, k=k, seed=0)
with tempfile.TemporaryDirectory() as folder:
    path = stream.save(os.path.join(folder, "topics.npz"))
    resumed = SpectralEstimate.load(path)
for batch in batches[5:]:
    resumed = lda.update(train[batch], resumed, seed=0)
assert np.array_equal(resumed.params["beta"], uninterrupted.params["beta"])
print(f"resumed after batch 5: {resumed.diagnostics['n_batches']} batches, same topics as the uninterrupted stream")

# %%
# Short texts: a mixture of unigrams, batch by batch
# --------------------------------------------------
#
# One-sentence docstring summaries, labelled by package. The mixture of unigrams (one
# topic per document) merges the same pair sums; its topics and weights come from anchor
# words, and after the last batch they are those of one anchor fit on everything. No EM
# runs during the stream; refine at the end on whatever documents you kept.

# %%
summaries = load_docstring_summaries(("json", "email", "logging") if SMALL else ("stdlib", "numpy", "scipy"))
S = sp.csr_matrix(summaries.counts)
labels = np.asarray(summaries.labels)
mixture = SpectralTopicMixture(3 if SMALL else 10, random_state=0)
for batch in np.array_split(np.random.default_rng(1).permutation(S.shape[0]), 10):
    mixture.partial_fit(S[batch])
clusters = mixture.predict(S)
print(f"{S.shape[0]} summaries: NMI of the streamed clusters vs package "
      f"{normalized_mutual_info_score(labels, clusters):.3f}, log-likelihood {mixture.score(S) / S.sum():.3f} "
      "nats/token")
refined = single_topic.refine(S, mixture.estimate_, seed=0).estimate
print(f"refined on all summaries: NMI {normalized_mutual_info_score(labels, single_topic.predict(S, refined)[1]):.3f}")
