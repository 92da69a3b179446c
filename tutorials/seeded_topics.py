"""Seeded topics: name a few words per theme, get topics organized around them
===========================================================================

You often know the themes of a corpus before you fit it. Here the corpus is the
docstring paragraphs of eight packages of Python's standard library, and the themes
are the packages: for each we give the package's name and the words of its title in
the library reference ("email -- An email and MIME handling package"). With
``seed_words``, anchor-word recovery takes each group as the anchor of one topic:
topic i is group i's, from the moment estimate on, and the rest of each topic
follows from the pair moment. The EM sweeps that close the fit keep the seeds as
exact constraints: a seed word belongs to its own topic alone, and a paragraph
that contains seed words is about their groups' topics. Nothing is downloaded.
"""


# %%
import os
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.metrics import normalized_mutual_info_score

from specinit.corpus import document_completion, load_python_docs, top_words
from specinit.posterior import plot_topic_heatmap
from specinit.models import lda

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
TITLES = {
    "email": ["email", "mime", "handling"],
    "asyncio": ["asyncio", "asynchronous"],
    "unittest": ["unittest", "unit", "testing", "framework"],
    "xml": ["xml", "processing"],
    "tkinter": ["tkinter", "tcl", "tk", "interface"],
    "http": ["http"],
    "logging": ["logging", "facility"],
    "multiprocessing": ["multiprocessing", "process", "parallelism"],
}
if SMALL:
    TITLES = {name: TITLES[name] for name in ("email", "asyncio", "tkinter", "logging")}
corpus = load_python_docs(tuple(TITLES))
X = sp.csr_matrix(corpus.counts, dtype=np.float64)
package = np.array([name.split("/")[0] for name in corpus.names])
vocabulary = set(corpus.vocabulary)
seeds = {name: [word for word in words if word in vocabulary] for name, words in TITLES.items()}
order = np.random.default_rng(0).permutation(X.shape[0])
test, train = order[: X.shape[0] // 4], order[X.shape[0] // 4:]
k = len(TITLES)
print(corpus, f"\n{len(train)} training paragraphs, {len(test)} held out, k = {k}")
for name, words in seeds.items():
    print(f"  {name}: {' '.join(words)}")

# %%
# The fit
# -------
#
# Words are given by name with ``vocabulary=`` (or by column index). The diagnostics say
# how strongly the data support each group: ``seed/support`` is the share of the seed
# words' occurrences that their topic explains in the anchor fit, before the sweeps
# constrain them; a weak group, a group of words that every topic uses, or two groups
# that name one topic warn. Generic title words ("process", "logging") also occur in
# paragraphs that the other topics explain, and their groups may be reported as weakly
# supported; the warnings are printed here.

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    seeded = lda.spectral(X[train], k, vocabulary=corpus.vocabulary, seed_words=seeds, seed=0)
for warning in caught:
    print(f"warning: {warning.message}")
d = seeded.diagnostics
for i, words in enumerate(top_words(seeded.params["beta"], corpus.vocabulary, n=8)):
    print(f"{d['seed/names'][i]:>16}  support {d['seed/support'][i]:.2f}  {' '.join(words)}")

# %%
# Do the seeded topics pick out their packages?
# ---------------------------------------------
#
# Each held-out paragraph goes to its most probable topic. For the seeded fit topic i
# is package i's by construction; the unseeded fit gets the best one-to-one matching
# of its topics to the packages, which no user has without labels.

# %%
unseeded = lda.spectral(X[train], k, seed=0)
names = list(TITLES)
truth = np.array([names.index(p) for p in package[test]])


def assignment(estimate):
    return np.argmax(lda.document_topics(X[test], estimate.params["beta"], estimate.params["alpha"]), axis=1)


def recall_by_package(assigned, topic_of):
    return np.array([np.mean(assigned[truth == i] == topic_of[i]) for i in range(k)])


seeded_assigned, unseeded_assigned = assignment(seeded), assignment(unseeded)
contingency = np.zeros((k, k))
np.add.at(contingency, (unseeded_assigned, truth), 1)
from scipy.optimize import linear_sum_assignment  # noqa: E402

rows, cols = linear_sum_assignment(-contingency)
matched = np.empty(k, dtype=int)
matched[cols] = rows
for label, estimate, assigned, topic_of in (("seeded", seeded, seeded_assigned, np.arange(k)),
                                            ("unseeded, best matching", unseeded, unseeded_assigned, matched)):
    perplexity = document_completion(X[test], estimate.params["beta"], estimate.params["alpha"]).perplexity
    print(f"{label:>24}: recall by package {np.array2string(recall_by_package(assigned, topic_of), precision=2)}, "
          f"NMI {normalized_mutual_info_score(truth, assigned):.3f}, held-out perplexity {perplexity:.0f}")

# %%
# The picture
# -----------
#
# The seeded topics' top words, named after their groups.

# %%
path = plot_topic_heatmap(seeded.params["beta"], "seeded_topics.png", vocabulary=corpus.vocabulary, top_n=6,
                          topic_names=seeded.diagnostics["seed/names"])
print(f"wrote {path}")

# %%
# The seeds go on: online updates, refinement and the Bayesian model
# ------------------------------------------------------------------
#
# The estimate keeps its seeds, so ``lda.update`` continues with topic i still group i's.
# ``lda.seed_prior`` gives the (k, V) Dirichlet concentration with extra mass on each seed
# word in its topic: pass it as ``eta`` to ``lda.model``, ``lda.kernel`` or ``lda.svi``, start
# from the estimate (``init_params``), and the posterior stays organized around the seeds
# where the data allow it; ArviZ names the topics after the groups.

# %%
halves = np.array_split(train, 2)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    online = lda.update(X[halves[0]], k=k, vocabulary=corpus.vocabulary, seed_words=seeds, seed=0)
    online = lda.update(X[halves[1]], online, seed=0)
for warning in caught:
    print(f"warning: {warning.message}")
for i, words in enumerate(top_words(online.params["beta"], corpus.vocabulary, n=5)):
    print(f"{online.diagnostics['seed/names'][i]:>16}  {' '.join(words)}")
eta = lda.seed_prior(seeded, eta=0.1, strength=1.0)
print("seed prior:", eta.shape, "extra mass on", int(np.sum(eta > 0.1)), "seed words")
