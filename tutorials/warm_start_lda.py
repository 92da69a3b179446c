"""Warm-starting LDA in NumPyro from the spectral estimate
=======================================================

With NumPyro's default initialization, each NUTS chain settles on its own
labelling of the topics (label switching between chains): R-hat is huge and
the chains cannot be pooled without relabelling. Started from the spectral
estimate, every chain begins in the same mode. We also initialise SVI from
it, and compare spectral and posterior fits in ArviZ (the figures are written to
the working directory).
"""


# %%
import os
import warnings

import numpy as np
from specinit.models import lda

from specinit import posterior
from specinit.align import topic_error
from specinit.compare import compare_nuts, compare_svi
from specinit.synthetic import sample_lda

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
n_docs, vocab, k = (40, 30, 2) if SMALL else (200, 150, 4)
corpus = sample_lda(n_docs, vocab, k, alpha=0.3, doc_length=100, seed=2)
X = corpus.counts.toarray().astype(np.float32)

estimate = lda.spectral(corpus.counts, k, alpha0=0.3 * k, seed=0)
print("spectral mean L1 topic error:", round(topic_error(corpus.beta, estimate.params["beta"]), 3))

# %%
# NUTS: spectral init vs default init (4 chains, same settings)
# -------------------------------------------------------------

# %%
with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    nuts = compare_nuts(lda.model, estimate, model_args=(X,), model_kwargs={"k": k}, num_chains=4,
                        num_warmup=30 if SMALL else 400, num_samples=30 if SMALL else 400, seed=0,
                        nuts_kwargs={"max_tree_depth": 5} if SMALL else None)
for key, value in nuts.summary().items():
    print(f"{key:24s} {value}" if isinstance(value, str) else f"{key:24s} {value:.3f}")

# %%
# SVI: AutoNormal initialised at the estimate vs ``init_to_uniform``
# ------------------------------------------------------------------

# %%
svi = compare_svi(lda.model, estimate, model_args=(X,), model_kwargs={"k": k}, num_steps=100 if SMALL else 3000, seed=0)
for key, value in svi.summary().items():
    print(f"{key:22s} {value:.3f}")

# %%
# ArviZ: posterior aligned to the spectral labels, the estimate beside it
# -----------------------------------------------------------------------

# %%
idata = posterior.to_inference_data(nuts.warm, estimate)
print(posterior.compare_table(idata, estimate, var_names=["alpha"]).to_string())
posterior_beta = np.asarray(posterior.group(idata, "posterior")["beta"].mean(("chain", "draw")))
print("posterior-mean topic error:", round(topic_error(corpus.beta, posterior_beta), 3))
print(posterior.plot_forest_with_spectral(idata, estimate, ["alpha"], "warm_start_lda_forest.png"))
print(posterior.plot_elbo_traces({"spectral": svi.warm_losses, "default": svi.cold_losses}, "warm_start_lda_elbo.png"))
