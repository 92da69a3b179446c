"""Topics of a real corpus in seconds: Reuters
===========================================

The 395 Reuters news stories shipped inside the ``lda`` package (LDA-C format,
4,258 words). We fit LDA by the method of moments with each decomposition,
show the top words and UMass coherence of each topic, and time the fits.
Nothing is downloaded.
"""


# %%
import os
import time
import warnings

import numpy as np
from specinit.models import lda, single_topic

from specinit.corpus import load_reuters, top_relevant_words, top_words, umass_coherence

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
corpus = load_reuters()
X = corpus.counts
print(f"{X.shape[0]} documents, V={X.shape[1]}, {X.nnz} non-zeros, {int(X.sum())} tokens")

# %%
# LDA with the tensor power method
# --------------------------------
#
# ``alpha0`` (the sum of the Dirichlet parameters) must be given; the fit
# reports ``sum(alpha_hat)`` beside it, a check for misspecification.

# %%
k = 5 if SMALL else 10
start = time.perf_counter()
estimate = lda.spectral(X, k, alpha0=1.0, vocabulary=corpus.vocabulary, seed=0)
print(f"fit in {time.perf_counter() - start:.2f} s; sum(alpha_hat) = {estimate.diagnostics['alpha_sum']:.2f}")
coherence = umass_coherence(estimate.params["beta"], X, n=10)
for i, words in enumerate(top_words(estimate.params["beta"], corpus.vocabulary, n=8)):
    print(f"topic {i}  alpha {estimate.params['alpha'][i]:.3f}  UMass {coherence[i]:6.2f}  {' '.join(words)}")

# %%
# Frequent words ("said", "year") dominate raw probabilities; relevance
# (Sievert & Shirley, lambda = 0.6) re-ranks by lift over the corpus frequency.

# %%
for i, words in enumerate(top_relevant_words(estimate.params["beta"], X, corpus.vocabulary, n=8, lam=0.6)):
    print(f"topic {i}: {' '.join(words)}")

# %%
# Decompositions side by side
# ---------------------------
#
# Same moments, four decompositions: time, mean coherence, and how much of the
# estimate the projection onto the simplex had to repair (a warning says when
# a topic was mostly negative mass before it: noisy moments for this k).

# %%
for method in ("tpm", "svtd", "eca", "als"):
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = single_topic.spectral(X, k, method=method, seed=0)
    seconds = time.perf_counter() - start
    worst = fit.diagnostics["negative_mass_beta"].max()
    print(f"{method:5s} {seconds:6.2f} s  mean UMass coherence {umass_coherence(fit.params['beta'], X).mean():7.2f}"
          f"  largest negative mass repaired {worst:.2f}  warnings {len(caught)}")

# %%
assert np.all(estimate.params["beta"] > 0) and np.allclose(estimate.params["beta"].sum(axis=1), 1.0)
