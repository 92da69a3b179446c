"""Topics of real text, offline: the Python standard library's docstrings
======================================================================

A real English corpus that every Python installation ships: the docstrings of
the standard library, one document per paragraph (``load_python_docs``, parsed
with ``ast``, nothing imported or downloaded). We fit LDA by the method of
moments (anchor words on the pair moment, closed by a few EM sweeps), judge it by held-out
document-completion perplexity and topic coherence, and read the topics.
(``load_man_pages()`` gives a second, larger corpus on Debian/Ubuntu machines
with manual pages installed.)
"""


# %%
import os
import time

import numpy as np
import scipy.sparse as sp
from specinit.models import lda

from specinit.corpus import document_completion, load_python_docs, top_relevant_words, umass_coherence

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
packages = ("json", "email", "logging") if SMALL else ("stdlib",)
corpus = load_python_docs(packages, min_df=3 if SMALL else 5)
X = sp.csr_matrix(corpus.counts, dtype=np.float64)
print(corpus)

# %%
# Hold out documents
# ------------------
#
# A seeded 20% of the paragraphs are held out; the fit never sees them.

# %%
perm = np.random.default_rng(0).permutation(X.shape[0])
n_test = X.shape[0] // 5
train, test = X[perm[n_test:]], X[perm[:n_test]]

# %%
# Spectral LDA: anchor words on the cleaned pair moment (the default)
# -------------------------------------------------------------------
#
# The pair moment E2 (per-document estimate) is cut to its k largest positive
# eigenpairs -- negative eigenvalues and the tail are estimator noise -- and
# anchor words (Arora et al. 2013: a farthest-point search, every word a
# convex combination of the anchors) are found on that low-rank moment without
# forming it. Four EM sweeps over the corpus close the estimate.

# %%
k = 5 if SMALL else 20
start = time.perf_counter()
estimate = lda.spectral(train, k, seed=0, vocabulary=corpus.vocabulary)
seconds = time.perf_counter() - start
d = estimate.diagnostics
print(f"fit in {seconds:.2f} s: method {d['method']}, {d['weighting']} weighting, "
      f"{d['anchor_negative_eigenvalues_cut']} negative eigenvalues cut; anchors:",
      " ".join(corpus.vocabulary[i] for i in d["anchors"]))
print("training log-likelihood per token before each closing EM sweep:", np.round(d["closing_log_likelihood"], 3))

# %%
# Choosing k: the signed spectrum of the pair moment
# --------------------------------------------------
#
# ``k_supported`` counts its leading eigenvalues (by magnitude) that are
# positive; a sharp drop between consecutive eigenvalues marks a natural
# cut-off.

# %%
print(f"k_supported = {d['k_supported']}; signed eigenvalues:",
      np.array2string(d["m2_eigenvalues"][: k + 5], formatter={"float_kind": "{:.2e}".format}))

# %%
# Held-out perplexity and coherence
# ---------------------------------
#
# Document completion: theta is folded in on half of each held-out document's
# tokens, the other half is scored. The same function scores any method's
# ``(beta, alpha)``, e.g. scikit-learn's (see ``benchmarks/bench_lda_real.py``).

# %%
held = document_completion(test, estimate.params["beta"], estimate.params["alpha"], seed=0)
coherence = umass_coherence(estimate.params["beta"], train, n=10)
print(f"held-out perplexity {held.perplexity:.0f} on {held.n_tokens} tokens of {held.n_documents} documents")
print(f"mean UMass coherence {coherence.mean():.2f}")

# %%
# The tensor path, alpha0 chosen from the data
# --------------------------------------------
#
# ``method="tpm"``: the Dirichlet-corrected third moment, decomposed for each
# ``alpha0`` of a grid from one set of passes; each candidate is scored by the
# pairwise composite likelihood of co-occurring words. It is the consistent
# estimator for data drawn from LDA itself; on real text the anchor path
# gives the lower held-out perplexity (see ``benchmarks/bench_lda_real.py``).

# %%
start = time.perf_counter()
tensor = lda.spectral(train, k, method="tpm", seed=0, vocabulary=corpus.vocabulary)
tensor_seconds = time.perf_counter() - start
tensor_held = document_completion(test, tensor.params["beta"], tensor.params["alpha"], seed=0)
print(f"tensor path: fit in {tensor_seconds:.2f} s, alpha0 chosen = {tensor.diagnostics['alpha0']:.3g}, "
      f"held-out perplexity {tensor_held.perplexity:.0f}")
for a0, ok, score in zip(tensor.diagnostics["alpha0_grid"], tensor.diagnostics["alpha0_feasible"],
                         tensor.diagnostics["alpha0_criterion"]):
    print(f"  alpha0 {a0:8.3g}  {'pair log-lik %.4f' % score if ok else 'M2 indefinite on the top k'}")

# %%
# The topics
# ----------
#
# Words ranked by relevance (Sievert & Shirley, lambda = 0.6).

# %%
frequency = np.asarray(X.sum(axis=0)).ravel()  # whole-corpus word counts (every word occurs)
for i, words in enumerate(top_relevant_words(estimate.params["beta"], frequency, corpus.vocabulary, n=8)):
    print(f"topic {i:2d}  alpha {estimate.params['alpha'][i]:.3f}  UMass {coherence[i]:6.2f}  {' '.join(words)}")

# %%
# Refinement with NumPyro: warm-started SVI
# -----------------------------------------
#
# ``lda.svi`` runs minibatch SVI on the sparse NumPyro model. Its guide holds
# ``beta`` and ``alpha`` as point values and computes each minibatch's ``theta`` in
# closed form given ``beta`` (the online variational-Bayes E-step), so it
# converges like scikit-learn's online LDA. ``init=estimate`` starts from the
# spectral topics, ``init=None`` from NumPyro's default; the snapshots are scored
# with the same held-out protocol.

# %%
steps = 100 if SMALL else 3000
every = steps // 5
runs = {}
for name, init in (("warm (spectral init)", estimate), ("cold (NumPyro default init)", None)):
    fit = lda.svi(train, k, init=init, num_steps=steps, batch_size=256, seed=0, snapshot_every=every, progress=False)
    curve = [(step, document_completion(test, p["beta"], p["alpha"], seed=0).perplexity) for step, p in fit.snapshots]
    runs[name] = (fit, curve)
    print(f"{name}: {fit.seconds:.1f} s (compilation included); held-out perplexity by step:",
          ", ".join(f"{step}: {value:.0f}" for step, value in curve))
cold_final = runs["cold (NumPyro default init)"][1][-1][1]
reached = next((step for step, value in runs["warm (spectral init)"][1] if value <= cold_final), None)
print(f"the warm run reaches the cold run's final perplexity ({cold_final:.0f}) at step {reached} of {steps}")
refined = runs["warm (spectral init)"][0]

# %%
# Spectral, refined and posterior side by side in ArviZ
# -----------------------------------------------------
#
# Full MCMC on the whole corpus is what the spectral and SVI fits spare us,
# but on a slice it shows how far the point estimates sit from the posterior:
# NUTS on the documents richest in the most frequent words, over those words
# only, from the refined topics (restricted and renormalized) and from
# NumPyro's default start. ``to_inference_data`` aligns every draw's topic labels
# to the estimate's; ``compare_table`` puts the estimate beside the posterior.

# %%
from specinit import posterior  # noqa: E402
from specinit.compare import compare_nuts  # noqa: E402
from specinit.estimate import SpectralEstimate  # noqa: E402

n_words, n_docs, k_small = (20, 20, 2) if SMALL else (150, 150, 5)
words = np.argsort(-np.asarray(train.sum(axis=0)).ravel())[:n_words]
docs = np.argsort(-np.asarray(train[:, words].sum(axis=1)).ravel())[:n_docs]
sub = sp.csr_matrix(train[docs][:, words])
# The k_small topics with most weight on these words, restricted to them and renormalized.
mass = refined.params["beta"][:, words].sum(axis=1) * refined.params["alpha"]
top = np.argsort(-mass)[:k_small]
beta_sub = refined.params["beta"][top][:, words]
beta_sub /= beta_sub.sum(axis=1, keepdims=True)
alpha_sub = refined.params["alpha"][top]
start_values = SpectralEstimate("lda", {"beta": beta_sub, "alpha": alpha_sub,
                                        "theta": lda.document_topics(sub, beta_sub, alpha_sub)}, facts=lda.FACTS)
draws = 20 if SMALL else 300
nuts = compare_nuts(lda.model, start_values, model_args=(sub,), model_kwargs={"k": k_small}, num_chains=4,
                    num_warmup=draws, num_samples=draws, seed=0, nuts_kwargs={"max_tree_depth": 4 if SMALL else 10})
summary = nuts.summary()
print(f"NUTS on {n_docs} documents x {n_words} words, k = {k_small}, 4 chains x ({draws} + {draws}): "
      f"warm {summary['warm_time_s']:.0f} s, max R-hat {summary['warm_max_rhat']:.2f}; "
      f"default start {summary['cold_time_s']:.0f} s, max R-hat {summary['cold_max_rhat']:.2f}")
idata = posterior.to_inference_data(nuts.warm, start_values)
table = posterior.compare_table(idata, start_values, var_names=["alpha"])
print(table[["spectral", "mean", "hdi_low", "hdi_high", "r_hat"]].round(3))
posterior.plot_forest_with_spectral(idata, start_values, ["alpha"], "real_text_alpha_forest.png")

# %%
assert np.all(estimate.params["beta"] > 0) and np.allclose(estimate.params["beta"].sum(axis=1), 1.0)
assert np.isfinite(held.perplexity) and all(np.isfinite(v) for _, v in runs["warm (spectral init)"][1])
