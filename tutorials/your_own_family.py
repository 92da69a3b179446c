"""Your own model family: a mixture over exchangeable views, defined outside specinit
===================================================================================

A model family is one :class:`specinit.family.Family` subclass. Defining it
in your own module registers it under its ``name``, and from then on it has
what the built-in families have: the method-of-moments estimate and its
exact recovery from population moments, EM from that estimate, prediction
and log-likelihoods, online updates, a scikit-learn estimator, save and
load, and NumPyro warm starts. This tutorial writes one from scratch.

The model: each row holds ``L`` exchangeable views of one hidden component
``h ~ Categorical(weights)``; given ``h``, the views are independent draws of
a category, ``x_v | h = i ~ Categorical(probs_i)``. Since the views are
exchangeable, a row is summed up by how many of its views fell on each
category (``c``, a count vector summing to ``L``), and the factorial moments
of ``c`` (sums over distinct views) are the model's moments::

    M2 = (E[c c^T] - diag E[c]) / (L (L-1))                     = sum_i w_i p_i p_i^T
    M3 = (E[c^(x)3] - sym3(E[c_j e_j (x) e_j (x) c]) + 2 diag3 E[c])
         / (L (L-1) (L-2))                                        = sum_i w_i p_i^(x)3

The real data: scikit-learn's handwritten digits (bundled, no download). Each
8 x 8 image is read as a bag of ink: its ``L = 64`` views are units of ink
drawn at random from its 64 blocks (a block with count 12 holds 12 units),
and the component is the digit, whose ink falls on blocks with probabilities
``probs``. Set ``SPECINIT_TUTORIAL_SMALL=1`` for a fast run (a shorter MCMC).
"""


# %%
import os
import pickle
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS
from scipy.special import gammaln
from sklearn.datasets import load_digits
from sklearn.metrics import adjusted_rand_score

from specinit.engine.support import fix_signs_by_mass
from specinit.estimate import Site, SpectralEstimate
from specinit.estimators import estimator_class
from specinit.align import match_components
from specinit.faces import RANDOM_STATE, Face, Param, mean_log_likelihood, n_components_param, refined, responsibilities
from specinit.family import Family, family, registered

SMALL = os.environ.get("SPECINIT_TUTORIAL_SMALL") == "1"
VIEWS, K = 64, 10

# %%
# The moments
# -----------
# A family's moments are any object with the three members of
# :class:`specinit.engine.protocols.ExchangeableMoments`: ``n_features``,
# ``M2 @ Q`` and ``M3`` whitened by ``W``. With 64 categories the two
# moments fit in memory as dense arrays. They are built from sums over the
# rows (``n``, ``sum c``, ``sum c c^T``, ``sum c^(x)3``), which add up over
# batches: that is all an online ``update`` needs to keep.


# %%
class DenseMoments:
    """``M2`` (d, d) and ``M3`` (d, d, d) held as arrays: the ExchangeableMoments protocol."""

    def __init__(self, m2, m3):
        self.m2, self.m3 = m2, m3

    @property
    def n_features(self):
        return self.m2.shape[0]

    def m2_matmat(self, Q):
        return self.m2 @ Q

    def whitened_m3(self, W):
        return np.einsum("abc,ai,bj,ck->ijk", self.m3, W, W, W, optimize=True)


@dataclass(frozen=True)
class DrawSums:
    """Sums of the count vectors of ``n`` rows of ``views`` draws: exact, and additive over batches."""

    n: int
    views: int
    first: np.ndarray
    second: np.ndarray
    third: np.ndarray

    @classmethod
    def of(cls, counts):
        c = np.asarray(counts, dtype=np.float64)
        totals = c.sum(axis=1)
        if c.ndim != 2 or np.any(c < 0) or np.any(c != np.round(c)) or np.any(totals != totals[0]) or totals[0] < 3:
            raise ValueError("counts must be rows of non-negative integer counts with one total of at least 3 views")
        pairs = (c[:, :, None] * c[:, None, :]).reshape(len(c), -1)
        d = c.shape[1]
        return cls(len(c), int(totals[0]), c.sum(axis=0), c.T @ c, (pairs.T @ c).reshape(d, d, d))

    def __add__(self, other):
        if other.views != self.views or other.first.shape != self.first.shape:
            raise ValueError(f"a batch of {other.views} views over {other.first.size} categories does not continue "
                             f"rows of {self.views} views over {self.first.size}")
        return DrawSums(self.n + other.n, self.views, self.first + other.first, self.second + other.second,
                        self.third + other.third)

    def to_arrays(self):
        return {"n": np.asarray(self.n), "views": np.asarray(self.views), "first": self.first,
                "second": self.second, "third": self.third}

    @classmethod
    def from_arrays(cls, arrays, name="estimate"):
        return cls(int(arrays["n"]), int(arrays["views"]), arrays["first"], arrays["second"], arrays["third"])

    def moments(self):
        L, d = self.views, self.first.size
        m1, raw2, raw3 = self.first / self.n, self.second / self.n, self.third / self.n
        pair = np.zeros((d, d, d))
        pair[np.arange(d), np.arange(d), :] = raw2  # pair[j, j, l] = E[c_j c_l]
        m3 = raw3 - (pair + pair.transpose(0, 2, 1) + pair.transpose(2, 0, 1))
        m3[np.arange(d), np.arange(d), np.arange(d)] += 2.0 * m1
        return DenseMoments((raw2 - np.diag(m1)) / (L * (L - 1)), m3 / (L * (L - 1) * (L - 2)))


# %%
# The family
# ----------
# Three hooks are required: ``moments`` (data to moments),
# ``population_moments`` (the exact moments of given parameters: what makes
# the estimate checkable) and ``unwhiten`` (the engine's whitened components
# to the sites' values). After whitening with ``M2``, the tensor eigenvalue
# of component ``i`` is ``w_i^(-1/2)`` and its component is ``w_i^(1/2)
# p_i``; the skeleton then projects every site into its support (here the
# simplex). ``resolve`` sets the default decomposition (alternating least
# squares, which converges on these noisy moments where the tensor power
# method may stop short). ``component_log_prob`` and ``m_step`` give the
# mixture its likelihood (so ``predict``, ``log_likelihood`` and EM),
# ``summary`` and a method ``update`` its online fits, and
# ``estimator_face`` its scikit-learn estimator. The class statement
# registers it.


# %%
class ExchangeableDraws(Family):
    """Mixtures of categorical distributions observed through exchangeable views (rows of view counts)."""

    name = "exchangeable_draws"
    data_kind = "counts"
    sites = {"weights": Site("simplex", (0,), ("components",), ("components",)),
             "probs": Site("simplex", (0,), ("components", "category"), ("components", "category")),
             "counts": Site("observed", (), ("rows", "category"), ("category",))}
    match_site = "probs"
    summary = DrawSums

    def moments(self, counts, *, k, backend):
        return DrawSums.of(counts).moments()

    def population_moments(self, params):
        w, p = np.asarray(params["weights"]), np.asarray(params["probs"])
        return DenseMoments(np.einsum("i,ia,ib->ab", w, p, p), np.einsum("i,ia,ib,ic->abc", w, p, p, p))

    def resolve(self, method, options):
        return ("als" if method is None else method), dict(options)  # the default decomposition: ALS

    def unwhiten(self, fit, moments, k, floor, **options):
        components, eigenvalues, flips = fix_signs_by_mass(fit.components, fit.eigenvalues)
        return {"weights": 1.0 / eigenvalues**2, "probs": eigenvalues[:, None] * components}, {"sign_flips": flips}, {}

    def refine_data(self, counts, estimate, **options):
        counts = np.asarray(counts, dtype=np.float64)
        if counts.ndim != 2 or counts.shape[1] != estimate.params["probs"].shape[1]:
            raise ValueError(f"counts must have {estimate.params['probs'].shape[1]} columns (the estimate's)")
        return counts

    def component_log_prob(self, params, counts):
        log_coefficient = gammaln(counts.sum(axis=1) + 1.0) - gammaln(counts + 1.0).sum(axis=1)
        return counts @ np.log(np.asarray(params["probs"])).T + log_coefficient[:, None]

    def m_step(self, counts, resp, params, **options):
        return {"weights": resp.sum(axis=0), "probs": resp.T @ counts + 1e-12}  # normalized by the projection

    def update(self, counts, estimate=None, *, k=None, seed=0):
        """Add a batch of rows: exact merged sums, then the moment estimate (as ``spectral`` on every row)."""
        stored, k, n_batches = self.stream(estimate, k, DrawSums, "ExchangeableDraws.update")
        merged = DrawSums.of(counts) if stored is None else stored + DrawSums.of(counts)
        fit = self.spectral_from_moments(merged.moments(), k, seed=seed)
        return self.streamed(fit, estimate, merged, n_batches, n_observations=merged.n)

    def estimator_face(self):
        return Face(class_name="SpectralExchangeableDraws", mixins=("cluster", "density"),
                    summary="Mixtures over exchangeable categorical views: the moment estimate, then EM.",
                    parameters={"n_components": n_components_param("components", 2, "spectral"),
                                "max_iter": Param("int", "EM steps after the estimate (0: none).", 100),
                                "random_state": RANDOM_STATE},
                    spectral={"n_components": "k"}, data="rows", refine=refined,
                    attributes={"probs_": ("ndarray, shape (n_components, n_features)",
                                           lambda estimator, estimate, X: estimate.params["probs"])},
                    predict_proba=responsibilities, score=mean_log_likelihood, answers=frozenset({"partial_fit"}))


draws = family("exchangeable_draws")
print("registered:", "exchangeable_draws" in registered(), type(draws).__name__)

# %%
# Exact recovery first
# --------------------
# From the population moments of known parameters the estimate must give the
# parameters back (up to the order of the components): the first test of a
# new family. (``floor`` keeps every probability at least ``floor / d``:
# lowered here, as the true probabilities go below the default.)

# %%
rng = np.random.default_rng(0)
truth = {"weights": rng.dirichlet(np.full(K, 5.0)), "probs": rng.dirichlet(np.full(64, 0.3), size=K)}
exact = draws.spectral_from_moments(draws.population_moments(truth), K, floor=1e-9)
order = match_components(truth["probs"], exact.params["probs"])
print(f"exact recovery: largest error in probs {np.abs(exact.params['probs'][order] - truth['probs']).max():.1e}")

# %%
# The digits as bags of ink
# -------------------------

# %%
digits = load_digits()
ink = digits.data.astype(np.int64)
counts = np.stack([rng.multivariate_hypergeometric(row, VIEWS) for row in ink])
split = int(0.8 * len(counts))
train, test, labels = counts[:split], counts[split:], digits.target[split:]
print(f"{len(counts)} images, {VIEWS} units of ink each over {counts.shape[1]} blocks; {split} training rows")

# %%
# Every face: spectral, EM, predict, log-likelihood, update
# ---------------------------------------------------------
# The family's methods are its public functions (a built-in family's module
# offers the same ones, ``poisson_mixture.spectral`` ...). Online, ``update``
# takes the rows in two batches and gives the estimate of ``spectral`` on
# all of them.

# %%
start = time.perf_counter()
estimate = draws.spectral(train, K, seed=0)
print(f"spectral: {time.perf_counter() - start:.2f} s, weights {np.round(np.sort(estimate.params['weights']), 3)}")
refined_fit = draws.refine(train, estimate, max_iter=200)
print(f"EM from it: {refined_fit.n_iter} steps, converged {refined_fit.converged}")
for name, fit in (("spectral", estimate), ("spectral + EM", refined_fit.estimate)):
    held_out = draws.log_likelihood(test, fit).mean()
    ari = adjusted_rand_score(labels, draws.predict(test, fit)[1])
    print(f"{name:14s} held-out log-likelihood per row {held_out:7.3f}, ARI against the digits {ari:.3f}")

online = draws.update(train[: split // 2], k=K)
online = draws.update(train[split // 2:], online)
same = np.sort(online.params["weights"]) - np.sort(estimate.params["weights"])
print(f"update in two batches against spectral on all rows: largest weight difference {np.abs(same).max():.1e}")

# %%
# Save, load, and the scikit-learn estimator
# ------------------------------------------
# ``SpectralEstimate.load`` finds the family by the name the file carries (in
# another process: import the module that defines it first), and an online
# estimate goes on updating after loading. The estimator class is built from
# ``estimator_face``; its instances pickle.

# %%
loaded = SpectralEstimate.load(online.save("draws.npz"))
print("loaded:", loaded.model, loaded.k, "-- one more batch:", draws.update(test, loaded).diagnostics["n_batches"])

SpectralExchangeableDraws = estimator_class(draws)
fitted = SpectralExchangeableDraws(K, max_iter=100, random_state=0).fit(train)
again = pickle.loads(pickle.dumps(fitted))
print(f"{type(again).__name__}: score {again.score(test):.3f}, "
      f"predictions equal after pickling: {bool(np.array_equal(again.predict(test), fitted.predict(test)))}")

# %%
# The ink distributions
# ---------------------

# %%
fig, axes = plt.subplots(1, K, figsize=(1.4 * K, 1.8))
fit = refined_fit.estimate
for ax, probs, weight in zip(axes, fit.params["probs"], fit.params["weights"]):
    ax.imshow(probs.reshape(8, 8), cmap="gray_r")
    ax.set_title(f"w = {weight:.2f}", fontsize=8)
    ax.axis("off")
fig.savefig("your_own_family.png", dpi=80, bbox_inches="tight")

# %%
# A NumPyro warm start
# --------------------
# The NumPyro program has the family's sites (``weights``, ``probs``, the
# observed ``counts``), and the component of each row, a discrete site that
# NumPyro enumerates (it needs no start). The estimate
# starts NUTS (``init_params``); the chain starts where EM ended.


# %%
def model(counts, k):
    n, d = counts.shape
    weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(k)))
    with numpyro.plate("components", k):
        probs = numpyro.sample("probs", dist.Dirichlet(jnp.ones(d)))
    with numpyro.plate("rows", n):
        digit = numpyro.sample("digit", dist.Categorical(weights), infer={"enumerate": "parallel"})
        numpyro.sample("counts", dist.Multinomial(VIEWS, probs[digit]), obs=counts)


rows = jnp.asarray(train[:300] if SMALL else train)
init = fit.init_params(model, 1, jax.random.PRNGKey(0), model_args=(rows, K))
steps = 20 if SMALL else 300
mcmc = MCMC(NUTS(model, max_tree_depth=4 if SMALL else 8), num_warmup=steps, num_samples=steps, num_chains=1,
            progress_bar=False)
start = time.perf_counter()
mcmc.run(jax.random.PRNGKey(1), rows, K, init_params=init)
posterior_weights = np.asarray(mcmc.get_samples()["weights"]).mean(axis=0)
print(f"NUTS from the estimate ({steps} warm-up, {steps} draws, {time.perf_counter() - start:.1f} s): largest "
      f"posterior-mean weight {posterior_weights.max():.3f} (estimate: {fit.params['weights'].max():.3f})")
