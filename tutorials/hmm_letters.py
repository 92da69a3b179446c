"""Letters of English text as a hidden Markov model
================================================

Text shipped with Python itself (the docstrings of a few standard-library
modules, ``specinit.corpus.load_letter_sequences``; nothing is downloaded)
becomes sequences of 27 symbols (a-z and space), one sequence per paragraph. A 2-state HMM of
letters is the classic vowel/consonant example.

1. The spectral estimate on the raw text: real letters are NOT a 2-state
   HMM. The symmetric approach says so (an indefinite symmetrized moment);
   the default (``approach="auto"``) then falls back, with a warning, to the
   observable-operator approach (Jennrich), which needs no positive moment,
   and records it in ``diagnostics["fallback"]``. The estimate is a starting
   point, not a fit: Baum-Welch (``hmm.refine``, spectral then refine in one
   call) takes it to a maximum-likelihood HMM, timed against hmmlearn, and
   NUTS warm-started from it is compared with NumPyro's default start.
2. The 2-state HMM implied by labelling the letters vowel / consonant
   (counting; a reference model).
3. On sequences generated from that HMM (the model is then true) the
   spectral estimate separates vowels from consonants without labels, in a
   fraction of a second, and warm-starts SVI.
"""


# %%
import os
import time
import warnings

import jax
import numpy as np
from numpyro.infer import SVI, Trace_ELBO
from numpyro.infer.autoguide import AutoDelta
from numpyro.optim import Adam
from scipy.optimize import linear_sum_assignment
from specinit.models import hmm

from specinit.corpus import LETTERS, load_letter_sequences

from specinit.engine.whitening import IndefiniteMomentError

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"

sequences = load_letter_sequences()
print(f"{len(sequences)} paragraphs, {sum(s.size for s in sequences)} symbols")

# %%
# 1. Spectral estimate on the raw text
# ------------------------------------
#
# Around the middle letter of every triple, the three letters would be
# conditionally independent given a 2-valued state if the text were a
# 2-state HMM; the symmetrized second moment would then be positive definite.
# It is not, and the default approach refuses. ``approach="jennrich"``
# (simultaneous diagonalization of the observable operators, Anandkumar, Hsu
# & Kakade 2012, Algorithm B) takes no square root of a moment and always
# returns an estimate; its diagnostics (a negative state weight, a large
# off-diagonal part of the weight solve) and warnings say the fit is poor.
# The two states it finds are not vowels vs consonants: the top-2 directions
# of the letter cross moments are overall frequency and word boundaries
# (space vs word-final letters), not the vowel / consonant contrast.

# %%
try:
    hmm.spectral(sequences, 2, 27, approach="symmetric")
except IndefiniteMomentError as error:
    print("symmetric approach refused:", str(error).split(" Likely")[0])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    raw = hmm.spectral(sequences, 2, 27)  # default: symmetric, falling back to Jennrich
print("fallback:", raw.diagnostics["fallback"] is not None)
for warning in caught:
    print("warning:", str(warning.message).split(" Try")[0])
d = raw.diagnostics
print(f"jennrich: middle-state weights {np.round(d['middle_state_weights'], 3)}, imaginary ratio "
      f"{d['jennrich_imaginary_ratio']:.2g}, eigenvector condition {d['jennrich_condition_number']:.3g}, "
      f"weight off-diagonal {d['jennrich_weights_offdiagonal']:.2f}")
vowels = [LETTERS.index(c) for c in "aeiou"]
for i, row in enumerate(raw.params["emission"]):
    top = "".join(LETTERS[c] for c in np.argsort(-row)[:12]).replace(" ", "_")
    print(f"raw-text state {i}: top letters {top}; vowel mass {row[vowels].sum():.2f}")

# %%
# 1b. Spectral then refine, against hmmlearn; NUTS warm vs default
# ----------------------------------------------------------------
#
# ``hmm.refine`` runs Baum-Welch (scaled forward-backward over all paragraphs
# at once, float64) from the spectral estimate; hmmlearn's ``CategoricalHMM``
# runs the same EM from its own random start (one restart here; the
# benchmark ``benchmarks/bench_real_mixtures.py`` uses the best of three).

# %%
from hmmlearn.hmm import CategoricalHMM  # noqa: E402

from specinit.compare import compare_nuts  # noqa: E402

train = sequences[:60] if SMALL else sequences
n_train = sum(s.size for s in train)
em_iter = 15 if SMALL else 200
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)  # the fallback and "not converged" (small run) are expected
    start = time.perf_counter()
    refined = hmm.refine(train, hmm.spectral(train, 2, 27), max_iter=em_iter, tol=1e-2 / n_train)
    t_ours = time.perf_counter() - start
X, lengths = np.concatenate(train)[:, None], [s.size for s in train]
start = time.perf_counter()
peer = CategoricalHMM(2, n_iter=em_iter, tol=1e-2, random_state=0, n_features=27).fit(X, lengths)
t_peer = time.perf_counter() - start
print(f"spectral + Baum-Welch: log-likelihood {refined.log_likelihood[-1]:.1f} after {refined.n_iter} iterations "
      f"in {t_ours:.2f} s; hmmlearn (random start): {peer.score(X, lengths):.1f} after {peer.monitor_.iter} "
      f"iterations in {t_peer:.2f} s")
for i, row in enumerate(refined.params["emission"]):
    print(f"refined state {i}: top letters {''.join(LETTERS[c] for c in np.argsort(-row)[:12]).replace(' ', '_')}; "
          f"vowel mass {row[vowels].sum():.2f}")

nuts_seqs = sorted(train, key=len)[:8] if SMALL else sorted(train, key=len)[:60]  # short paragraphs: padding is cheap
padded, nuts_lengths = hmm.pad_sequences(nuts_seqs)
nuts = compare_nuts(hmm.model, refined.estimate, model_args=(padded,),
                    model_kwargs={"k": 2, "n_symbols": 27, "lengths": nuts_lengths},
                    num_chains=2 if SMALL else 4, num_warmup=5 if SMALL else 300, num_samples=5 if SMALL else 300)
summary = nuts.summary()
print(f"NUTS warm (spectral + EM) max split-R-hat {summary['warm_max_rhat']:.3f} in {summary['warm_time_s']:.1f} s; "
      f"default init {summary['cold_max_rhat']:.3f} in {summary['cold_time_s']:.1f} s")

# %%
# 2. The vowel / consonant reference HMM
# --------------------------------------
#
# Label each letter vowel (a, e, i, o, u) or consonant (everything else,
# space included); counting gives the initial law, the label transition
# matrix (row = from-state) and each label's letter frequencies.

# %%
vowel = np.isin(np.arange(27), [LETTERS.index(c) for c in "aeiou"]).astype(int)
labels = [vowel[s] for s in sequences]
symbols, states = np.concatenate(sequences), np.concatenate(labels)
pairs = np.concatenate([lab[:-1] * 2 + lab[1:] for lab in labels])
reference = {
    "init": np.bincount([lab[0] for lab in labels], minlength=2) + 1.0,
    "transition": np.bincount(pairs, minlength=4).reshape(2, 2) + 1.0,
    "emission": np.stack([np.bincount(symbols[states == j], minlength=27) + 0.1 for j in (0, 1)]),
}
reference = {name: value / value.sum(axis=-1, keepdims=True) for name, value in reference.items()}
print("reference transition (consonant, vowel):\n", reference["transition"].round(2))

# %%
# 3. Spectral estimate when the model is true
# -------------------------------------------
#
# Sequences generated from the reference HMM; the spectral fit sees only the
# symbols. States are matched to the reference by emission L1 distance.

# %%
n_gen, length = (200, 500) if SMALL else (2000, 1000)
generator = hmm.CategoricalHMM(reference["init"], reference["transition"], reference["emission"], length,
                               np.full(n_gen, length))
generated = np.asarray(generator.sample(jax.random.PRNGKey(1)))
start = time.perf_counter()
estimate = hmm.spectral(list(generated), 2, 27)
print(f"spectral fit in {time.perf_counter() - start:.2f} s on {generated.size} symbols")
cost = np.abs(estimate.params["emission"][:, None] - reference["emission"][None]).sum(axis=-1)
rows, cols = linear_sum_assignment(cost)
for i, j in zip(rows, cols):
    top = " ".join(repr(LETTERS[c]) for c in np.argsort(-estimate.params["emission"][i])[:8])
    print(f"spectral state {i} ~ {('consonant', 'vowel')[j]:9s} (emission L1 {cost[i, j]:.3f}): {top}")

# %%
# Warm-started inference
# ----------------------
#
# Log-likelihood per symbol at the reference, at the spectral estimate and at
# a uniform starting point; then a short MAP run (SVI with a point-mass guide)
# starting from the spectral estimate (``init_loc_fn=estimate.init_strategy()``).

# %%
uniform = {"init": np.full(2, 0.5), "transition": np.full((2, 2), 0.5),
           "emission": np.random.default_rng(0).dirichlet(np.full(27, 50.0), size=2)}
for name, params in (("reference", reference), ("spectral", estimate.params), ("near-uniform", uniform)):
    dist = hmm.CategoricalHMM(params["init"], params["transition"], params["emission"], length, np.full(n_gen, length))
    print(f"{name:12s} log-likelihood per symbol {float(dist.log_prob(generated).sum()) / generated.size:.4f}")

kwargs = {"k": 2, "n_symbols": 27, "lengths": np.full(n_gen, length)}
guide = AutoDelta(hmm.model, init_loc_fn=estimate.init_strategy())
svi = SVI(hmm.model, guide, Adam(0.01), Trace_ELBO())
steps = 10 if SMALL else 200
result = svi.run(jax.random.PRNGKey(2), steps, generated, progress_bar=False, **kwargs)
print(f"warm-started MAP: loss {float(result.losses[0]):.0f} -> {float(result.losses[-1]):.0f} in {steps} steps")
assert np.all(cost[rows, cols] < 0.3)
