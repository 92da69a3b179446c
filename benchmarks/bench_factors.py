"""Independent-factor models: spectral estimate vs scikit-learn's FastICA on the same planted data.

For each (cumulant, d, k, N): draw ``x = h O + 0.5 eps`` with ``O`` (k, d)
standard normal, isotropic Gaussian noise, and ``k`` independent unit-variance
factors:

* ``skew``: centred Gamma factors, shapes uniform in [0.5, 8] (skewness 0.7-2.8);
* ``kurtosis``: exponential-power factors, half super-Gaussian (shape 0.8-1.3,
  excess kurtosis 1.3-5.6), half sub-Gaussian (shape 4-30, excess kurtosis
  -0.8 to -1.2).

Then, in the same run, measure the Amari index of the loadings (0 = exact up to
scale, sign and permutation; :func:`specinit.models.factors.amari_index`) and
the wall time of

* ``spectral``: :func:`specinit.models.factors.spectral` with the same
  ``cumulant`` (tensor power method of order 3 or 4; factor scores not computed);
* ``FastICA unit``: ``FastICA(n_components=k, whiten="unit-variance")``
  (parallel, logcosh, default tol/max_iter);
* ``FastICA arbitrary``: ``whiten="arbitrary-variance"`` (same iterations,
  different final scaling);
* ``FastICA warm``: ``whiten="unit-variance"`` started from the spectral
  estimate: ``w_init = inv(K O_hat)`` with ``K`` the whitening FastICA computes
  (rebuilt here from the covariance eigenvectors with FastICA's sign rule);
  the time is spectral + FastICA.

All methods run with one BLAS thread (threadpoolctl). FastICA's ``n_iter_`` and ConvergenceWarnings ("nc" = did not converge) are
reported. Prints a markdown table.

Usage: ``python benchmarks/bench_factors.py [--quick] [--big] [--nuts] [--online] [--seed 0]``
(``--big`` adds N = 10^6 for d = 20, k = 5; ``--nuts`` runs only NUTS from the
spectral estimate vs NumPyro's default init on a small planted model (d = 6,
k = 3, N = 200, 4 chains): max split R-hat of the global sites, time, tree
size, and the Amari index of the worst chain's posterior-mean loadings); ``--online`` runs only the rows
arriving in 10 batches: ``factors.update`` after each batch against FastICA refitted on every row seen so far,
d = 20, k = 5 and d = 50, k = 10 at N = 10^5).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from scipy.special import gammaln
from sklearn.decomposition import FastICA
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from _common import machine, table
from specinit.align import match_components
from specinit.models import factors


def draw(rng, cumulant, d, k, n, noise=0.5):
    loadings = rng.normal(size=(k, d))
    if cumulant == "skew":
        shape = rng.uniform(0.5, 8.0, size=k)
        h = rng.gamma(shape, 1 / np.sqrt(shape), size=(n, k)) - np.sqrt(shape)
    else:
        half = k // 2
        power = np.concatenate([rng.uniform(0.8, 1.3, size=half), rng.uniform(4.0, 30.0, size=k - half)])
        scale = np.exp(0.5 * (gammaln(1 / power) - gammaln(3 / power)))
        h = rng.choice([-1.0, 1.0], size=(n, k)) * scale * rng.gamma(1 / power, size=(n, k)) ** (1 / power)
    return h @ loadings + noise * rng.standard_normal((n, d)), loadings


def fastica(x, k, seed, whiten, w_init=None):
    ica = FastICA(n_components=k, whiten=whiten, random_state=seed, w_init=w_init)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        ica.fit(x)
        elapsed = time.perf_counter() - start
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return ica.mixing_.T, elapsed, ica.n_iter_, converged


def fastica_w_init(x, k, loadings_hat):
    """``inv(K O_hat)``: the spectral loadings as an unmixing matrix in FastICA's whitened coordinates."""
    centred = x - x.mean(axis=0)
    eigvals, eigvecs = np.linalg.eigh(centred.T @ centred / len(x))
    eigvals, eigvecs = eigvals[::-1][:k], eigvecs[:, ::-1][:, :k]
    eigvecs = eigvecs * np.sign(eigvecs[0])  # FastICA: u *= sign(u[0])
    K = eigvecs.T / np.sqrt(eigvals)[:, None]  # = sqrt(N) * FastICA's whitening_
    return np.linalg.inv(K @ loadings_hat.T)


def run(cumulant, d, k, n, seed):
    x, truth = draw(np.random.default_rng(seed), cumulant, d, k, n)
    rows = []
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        est = factors.spectral(x, k, cumulant, seed=seed, scores=False)
    t_spec = time.perf_counter() - start
    flag = "warned" if caught else "ok"
    rows.append([cumulant, d, k, n, "spectral", factors.amari_index(truth, est.params["loadings"]), t_spec, "-", flag])
    for whiten, label in (("unit-variance", "FastICA unit"), ("arbitrary-variance", "FastICA arbitrary")):
        mixing, t, it, ok = fastica(x, k, seed, whiten)
        rows.append([cumulant, d, k, n, label, factors.amari_index(truth, mixing), t, it, "ok" if ok else "nc"])
    start = time.perf_counter()
    w_init = fastica_w_init(x, k, est.params["loadings"])
    t_init = time.perf_counter() - start
    mixing, t, it, ok = fastica(x, k, seed, "unit-variance", w_init=w_init)
    rows.append([cumulant, d, k, n, "FastICA warm", factors.amari_index(truth, mixing), t_spec + t_init + t, it,
                 "ok" if ok else "nc"])
    return rows


def online(cumulant, d, k, n, seed, n_batches=10):
    """Rows arriving in ``n_batches`` batches: ``factors.update`` after each against FastICA refitted on every row
    seen so far (what a FastICA user does as data arrive: it has no ``partial_fit``); the final estimates, the
    totals of time, and the difference of the last update to one ``factors.spectral`` on all rows."""
    x, truth = draw(np.random.default_rng(seed), cumulant, d, k, n)
    bounds = np.linspace(0, n, n_batches + 1).astype(int)
    estimate, t_update, t_ica = None, 0.0, 0.0
    for first, stop in zip(bounds[:-1], bounds[1:]):
        start = time.perf_counter()
        estimate = factors.update(x[first:stop], estimate, k=k, cumulant=cumulant, seed=seed)
        t_update += time.perf_counter() - start
        mixing, t, _, _ = fastica(x[:stop], k, seed, "unit-variance")
        t_ica += t
    start = time.perf_counter()
    once = factors.spectral(x, k, cumulant, seed=seed, scores=False)
    t_once = time.perf_counter() - start
    order = match_components(estimate.params["loadings"], once.params["loadings"])
    diff = float(np.abs(estimate.params["loadings"] - once.params["loadings"][order]).max())
    return [cumulant, d, k, n, n_batches, f"{diff:.1e}", t_update, t_once,
            factors.amari_index(truth, estimate.params["loadings"]), t_ica, factors.amari_index(truth, mixing)]


def nuts_comparison(cumulant, seed, d=6, k=3, n=200, chains=4, warmup=300, samples=300):
    """NUTS warm (spectral init, jittered per chain) vs default init on a small planted model."""
    from specinit.compare import compare_nuts

    x, truth = draw(np.random.default_rng(seed), cumulant, d, k, n)
    est = factors.spectral(x, k, cumulant, seed=seed)  # scores=True: every latent site has a warm value
    result = compare_nuts(factors.model, est, model_kwargs={"x": x.astype(np.float32), "k": k, "cumulant": cumulant,
                                                            "prior_scale": 5.0},
                          num_chains=chains, num_warmup=warmup, num_samples=samples, seed=seed)
    summary = result.summary()
    for label, mcmc in (("warm", result.warm), ("cold", result.cold)):
        per_chain = np.asarray(mcmc.get_samples(group_by_chain=True)["loadings"]).mean(axis=1)
        summary[f"{label}_worst_chain_amari"] = max(factors.amari_index(truth, chain) for chain in per_chain)
    summary["spectral_amari"] = factors.amari_index(truth, est.params["loadings"])
    return summary


def main():
    # one BLAS thread for every method: on a small shared machine multi-threaded BLAS spin-waits and times
    # become noise (a 100000 x 20 Gram matrix took 0.3-1.2 s with 2 threads under load, 3-80 ms with one)
    with threadpool_limits(1):
        _main()


def _main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="d = 20, k = 5, N = 10^4 only")
    parser.add_argument("--big", action="store_true", help="add N = 10^6 for d = 20, k = 5")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nuts", action="store_true", help="only the NUTS warm-vs-default comparison")
    parser.add_argument("--online", action="store_true", help="only rows arriving in 10 batches: factors.update vs "
                        "FastICA refitted on the rows seen")
    args = parser.parse_args()
    if args.online:
        run("skew", 10, 3, 2_000, args.seed)  # warm-up, not reported
        sizes = [(20, 5, 10_000)] if args.quick else [(20, 5, 100_000), (50, 10, 100_000)]
        rows = [online(c, d, k, n, args.seed) for c in ("skew", "kurtosis") for d, k, n in sizes]
        print(f"Machine: {machine()}, one BLAS thread. Seed {args.seed}; noise sd 0.5; 10 batches of equal size.")
        print(table(["cumulant", "d", "k", "N", "batches", "largest loadings difference, last update vs one spectral",
                     "all updates (s)", "one spectral (s)", "Amari, last update", "FastICA refits on the rows seen (s)",
                     "Amari, FastICA on all rows"], rows))
        return
    if args.nuts:
        print(f"NUTS, 4 chains x (300 + 300), d=6, k=3, N=200, sequential chains. Machine: {machine()}")
        results = {c: nuts_comparison(c, args.seed) for c in ("skew", "kurtosis")}
        keys = list(results["skew"])
        print(table(["quantity", "skew", "kurtosis"], [[key, float(results["skew"][key]), float(results["kurtosis"][key])]
                                                        for key in keys]))
        return
    shapes = [(20, 5)] if args.quick else [(20, 5), (50, 10), (100, 20)]
    sizes = [10_000] if args.quick else [10_000, 100_000]
    grid = [(c, d, k, n) for c in ("skew", "kurtosis") for d, k in shapes for n in sizes]
    if args.big:
        grid += [(c, 20, 5, 1_000_000) for c in ("skew", "kurtosis")]
    run("skew", 10, 3, 2_000, args.seed)  # warm-up (BLAS threads, first-call overheads), not reported
    rows = []
    for config in grid:
        rows += run(*config, args.seed)
        print(table(["cumulant", "d", "k", "N", "method", "Amari index", "time s", "FastICA iters", "status"], rows[-4:]),
              flush=True)
    print()
    print(f"Machine: {machine()}, one BLAS thread. Seed {args.seed}; noise sd 0.5; loadings standard normal.")
    print(table(["cumulant", "d", "k", "N", "method", "Amari index", "time s", "FastICA iters", "status"], rows))


if __name__ == "__main__":
    main()
