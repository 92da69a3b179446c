"""Real data beyond text: Gaussian mixtures, HMMs and multi-view mixtures against their usual peers.

Tables, one run, peers in the same run:

1. GMM on scikit-learn's bundled datasets (standardized): ``gmm.spectral`` ARI, spectral-then-refine
   (``gmm.refine``: EM with its default split-merge moves) log-likelihood /
   iterations / time against scikit-learn ``GaussianMixture``'s best of 3 (k-means init, same covariance type,
   same ``tol``), both with one BLAS thread (threadpoolctl; small products gain nothing from threads on a
   shared machine).
2. HMM on letters of real English (Python standard-library docstrings, 27 symbols), k = 2..8: default
   ``hmm.spectral``, spectral-then-EM (``hmm.refine``) against hmmlearn's best of 3 random restarts.
3. k from the data: ``k="auto"`` against scikit-learn's BIC over k (GMM) and hmmlearn's BIC over k (HMM):
   the k chosen, the held-out log-likelihood at that k, time.
4. Multi-view: digits split into three bands of image rows, breast cancer's three statistics of the same ten
   nucleus measurements (mean, standard error, worst), wine's chemistry in three groups: does the model hold
   (the conditional-independence check), ARI of the spectral and refined fits against k-means.
5. NUTS (4 chains) from the spectral(-then-refined) estimate vs NumPyro's default init, one real dataset per
   model: max split-R-hat over the global sites.
6. Rows arriving in batches (``--only online``): the training rows (80%, seeded) of digits, breast cancer and
   wine in 10 batches through ``gmm.update`` against one ``gmm.spectral`` on all of them (their largest
   difference after label matching, and the time of all updates against the one fit), and scikit-learn's
   ``MiniBatchKMeans.partial_fit`` over the same batches (no streaming Gaussian mixture in scikit-learn): ARI
   against the classes on the held-out rows, and held-out log-likelihood per row of ours against
   ``GaussianMixture`` fitted on all the training rows at once (best of 3). Then letters of real English (80% of
   the paragraphs for training, seeded) in 10 batches through ``hmm.update`` against one ``hmm.spectral``, and
   held-out log-likelihood per letter of the streamed estimate, of it refined by ``hmm.refine`` on the training
   paragraphs, and of hmmlearn's ``CategoricalHMM`` fitted on them (one random start; no streaming HMM in
   hmmlearn). And the three multi-view tables of section 4 in 10 batches through ``multiview.update`` against one
   ``multiview.spectral`` and ``MiniBatchKMeans.partial_fit`` on the concatenated views. And two real series
   shipped with matplotlib (a membrane-potential recording; Google's daily log returns), cut into segments, the
   training segments in 10 batches through ``gaussian_hmm.update``: its difference to the moment estimate on all
   of them binned by the first batch's edges, held-out log-likelihood per observation of the streamed estimate,
   of it refined by ``gaussian_hmm.refine``, and of hmmlearn's ``GaussianHMM`` on all training segments (best of
   3 random starts).

Usage: ``python benchmarks/bench_real_mixtures.py [--quick] [--skip-nuts] [--only SECTION]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table  # noqa: E402

from sklearn import datasets  # noqa: E402
from sklearn.cluster import KMeans  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from specinit.align import match_components  # noqa: E402
from specinit.corpus import load_letter_sequences  # noqa: E402
from specinit.models import gmm, hmm  # noqa: E402
from specinit.models import multiview as mv  # noqa: E402



def standardize(x):
    sd = x.std(axis=0)
    return (x - x.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def quiet(func, *args, **kwargs):
    """Call and collect RuntimeWarnings (reported in the tables, not printed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = func(*args, **kwargs)
    return out, [str(w.message) for w in caught]


def bench_gmm(tol):
    with threadpool_limits(1):
        return _bench_gmm(tol)


def _bench_gmm(tol):
    rows = []
    cases = [("digits", datasets.load_digits, 10), ("wine", datasets.load_wine, 3),
             ("breast cancer", datasets.load_breast_cancer, 2), ("iris", datasets.load_iris, 3)]
    for name, loader, k in cases:
        data = loader()
        x, y = standardize(data.data), data.target
        for covariance in ("spherical", "diag"):
            start = time.perf_counter()
            est = gmm.spectral(x, k, covariance=covariance, seed=0)
            t_spec = time.perf_counter() - start
            start = time.perf_counter()
            result, _ = quiet(gmm.refine, x, est, max_iter=500, tol=tol)
            t_ref = time.perf_counter() - start
            start = time.perf_counter()
            fits = [GaussianMixture(k, covariance_type=covariance, random_state=seed, max_iter=500, tol=tol).fit(x)
                    for seed in range(3)]
            t_sk = time.perf_counter() - start
            sk = max(fits, key=lambda fit: fit.score(x))
            ari_spec = adjusted_rand_score(y, gmm.predict(x, est)[1])
            ari_ref = adjusted_rand_score(y, gmm.predict(x, result.estimate)[1])
            ari_sk = adjusted_rand_score(y, sk.predict(x))
            ll, ll_sk = result.mean_log_likelihood, sk.score(x)
            rows.append([f"{name} ({k})", covariance, round(ari_spec, 3), round(ari_ref, 3), round(ari_sk, 3),
                         f"{ll:.4f} / {result.n_iter}", f"{ll_sk:.4f} / {sk.n_iter_}",
                         f"{t_spec:.2f} + {t_ref:.2f}", f"{t_sk:.2f}",
                         "yes" if ll >= ll_sk - tol else f"no ({ll - ll_sk:+.3f})",
                         "yes" if t_spec + t_ref <= t_sk else "no"])
            print(rows[-1], flush=True)
    return (f"standardized features; one BLAS thread for both; EM tol = {tol:g} per observation for both "
            "(gmm.refine with its defaults: no perturbed restarts, split-merge moves until 2 fail in a row; "
            "its iterations count every step; GaussianMixture k-means init, best of random_state 0-2, iterations "
            "of the best fit); 'LL >=' allows a difference of tol\n\n") + table(
                 ["data (k)", "covariance", "spectral ARI", "spectral+EM ARI", "sklearn EM ARI",
                  "spectral+EM LL / iters", "sklearn best-of-3 LL / iters", "time spectral + EM (s)",
                  "sklearn 3 fits (s)", "LL >= sklearn best of 3", "less time"], rows)


def bench_hmm(n_letters, ks, n_iter):
    with threadpool_limits(1):
        return _bench_hmm(n_letters, ks, n_iter)


def _bench_hmm(n_letters, ks, n_iter):
    from hmmlearn.hmm import CategoricalHMM

    seqs = load_letter_sequences(max_letters=n_letters)
    n = sum(s.size for s in seqs)
    X, lengths = np.concatenate(seqs)[:, None], [s.size for s in seqs]
    rows = []
    for k in ks:
        start = time.perf_counter()
        est, caught = quiet(hmm.spectral, seqs, k, 27)
        t_spec = time.perf_counter() - start
        start = time.perf_counter()
        result, _ = quiet(hmm.refine, seqs, est, max_iter=n_iter, tol=1e-2 / n)
        t_ref = time.perf_counter() - start
        best, t_learn, iters = -np.inf, 0.0, []
        for seed in range(3):
            model = CategoricalHMM(k, n_iter=n_iter, tol=1e-2, random_state=seed, n_features=27)
            start = time.perf_counter()
            model.fit(X, lengths)
            t_learn += time.perf_counter() - start
            best = max(best, model.score(X, lengths))
            iters.append(model.monitor_.iter)
        ours, spectral_ll = result.log_likelihood[-1], float(np.sum(hmm.log_likelihood(seqs, est)))
        total = t_spec + t_ref
        rows.append([k, "yes" + (" (Jennrich fallback)" if est.diagnostics["fallback"] else ""),
                     f"{spectral_ll:.0f}", f"{ours:.0f} / {result.n_iter}", f"{t_spec:.2f} + {t_ref:.1f}",
                     f"{best:.0f} / {iters}", f"{t_learn:.1f}", "yes" if ours >= best else f"no ({ours - best:+.1f})",
                     "yes" if total <= t_learn else "no"])
        print(rows[-1], flush=True)
    header = (f"{len(seqs)} paragraphs, {n} letters (27 symbols), EM cap {n_iter} iterations, tol 1e-2 on the total "
              "log-likelihood for both, one BLAS thread for both; hmm.refine with its default 6 spectral-seeded restarts "
              "(raced by successive halving) and split-merge moves; iterations count every step")
    return header + "\n\n" + table(
        ["k", "default hmm.spectral runs", "spectral LL", "spectral+EM LL / iters", "time spectral + EM (s)",
         "hmmlearn best-of-3 LL / iters", "hmmlearn 3 runs (s)", "LL >= hmmlearn best", "less time"], rows)


def _split(n, seed=0):
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[n // 5:]), np.sort(order[: n // 5])


def bench_k_auto(n_letters):
    from hmmlearn.hmm import CategoricalHMM

    rows = []
    for name, loader, labels_k in (("iris", datasets.load_iris, 3), ("wine", datasets.load_wine, 3),
                                   ("breast cancer", datasets.load_breast_cancer, 2),
                                   ("digits", datasets.load_digits, 10)):
        x = standardize(loader().data)
        train, test = _split(len(x))
        start = time.perf_counter()
        est, _ = quiet(gmm.spectral, x[train], "auto", covariance="diag", seed=0)
        ours = quiet(gmm.refine, x[train], est, covariance="diag")[0].estimate
        t_ours = time.perf_counter() - start
        start = time.perf_counter()
        fits = [GaussianMixture(k, covariance_type="diag", random_state=0).fit(x[train]) for k in range(1, 11)]
        t_sk = time.perf_counter() - start
        sk = min(fits, key=lambda fit: fit.bic(x[train]))
        held_ours, held_sk = float(np.mean(gmm.log_likelihood(x[test], ours))), float(sk.score(x[test]))
        rows.append([f"gmm (diag), {name} ({labels_k} labels)", est.k, sk.n_components, f"{held_ours:.3f}",
                     f"{held_sk:.3f}", f"{t_ours:.2f}", f"{t_sk:.2f}",
                     "yes" if est.k == sk.n_components or held_ours >= held_sk else "no",
                     "yes" if t_ours <= t_sk else "no"])
        print(rows[-1], flush=True)
    seqs = load_letter_sequences(max_letters=n_letters)
    train, test = _split(len(seqs))
    seq_train, seq_test = [seqs[i] for i in train], [seqs[i] for i in test]
    start = time.perf_counter()
    est, _ = quiet(hmm.spectral, seq_train, "auto", 27, seed=0)
    ours = quiet(hmm.refine, seq_train, est, max_iter=100)[0].estimate
    t_ours = time.perf_counter() - start
    X, lengths = np.concatenate(seq_train)[:, None], [s.size for s in seq_train]
    Xt, lengths_t = np.concatenate(seq_test)[:, None], [s.size for s in seq_test]
    start = time.perf_counter()
    fits = [CategoricalHMM(k, n_iter=100, tol=1e-2, random_state=0, n_features=27).fit(X, lengths) for k in range(1, 11)]
    t_learn = time.perf_counter() - start
    best = min(fits, key=lambda fit: fit.bic(X, lengths))
    held_ours = float(np.sum(hmm.log_likelihood(seq_test, ours)))
    held_learn = float(best.score(Xt, lengths_t))
    rows.append([f"hmm, {sum(s.size for s in seqs)} letters", est.k, best.n_components, f"{held_ours:.0f}",
                 f"{held_learn:.0f}", f"{t_ours:.1f}", f"{t_learn:.1f}",
                 "yes" if est.k == best.n_components or held_ours >= held_learn else "no",
                 "yes" if t_ours <= t_learn else "no"])
    print(rows[-1], flush=True)
    return ("80 % of the observations (documents / paragraphs) fit, 20 % held out; ours: k='auto' then refine; "
            "peers: BIC over k = 1..10 (scikit-learn GaussianMixture, hmmlearn CategoricalHMM)\n\n") + table(
        ["model, data", "k='auto'", "peer's BIC k", "held-out LL (ours; per row for gmm, total for hmm)",
         "held-out LL (peer)", "ours (s)", "peer (s)", "same k or better held-out", "less time"], rows)


def multiview_datasets():
    """Real multi-view data: (name, views, labels, k)."""
    digits = datasets.load_digits()
    x = standardize(digits.data)
    cancer = datasets.load_breast_cancer()
    c = standardize(cancer.data)
    wine = datasets.load_wine()
    w = standardize(wine.data)
    return [
        ("digits, 3 bands of image rows (24/24/16 dims)", [x[:, 0:24], x[:, 24:48], x[:, 48:64]], digits.target, 10),
        ("breast cancer, mean / standard error / worst of 10 nucleus measurements", [c[:, 0:10], c[:, 10:20],
                                                                                      c[:, 20:30]], cancer.target, 2),
        ("wine, 3 groups of chemistry (4/4/5)", [w[:, 0:4], w[:, 4:8], w[:, 8:13]], wine.target, 3),
    ]


def bench_multiview():
    rows = []
    for name, views, y, k in multiview_datasets():
        start = time.perf_counter()
        est, caught = quiet(mv.spectral, views, k, seed=0)
        t_spec = time.perf_counter() - start
        start = time.perf_counter()
        result, _ = quiet(mv.refine, views, est, max_iter=500)
        t_ref = time.perf_counter() - start
        x = np.hstack(views)
        kmeans = [adjusted_rand_score(y, KMeans(k, n_init=1, random_state=seed).fit(x).labels_) for seed in range(3)]
        ari_spec = adjusted_rand_score(y, mv.predict(views, est)[1])
        ari_ref = adjusted_rand_score(y, mv.predict(views, result.estimate)[1])
        d = est.diagnostics
        rows.append([name, k, "yes" if d["independence_holds"] else
                     f"no (misfit {np.max(d['independence_misfit']):.2g} > {d['independence_level']:.2g}, warned)",
                     "yes" if d["fallback"] else "no", round(ari_spec, 3), f"{ari_ref:.3f} / {result.n_iter}",
                     f"{t_spec:.2f} + {t_ref:.2f}", f"{np.mean(kmeans):.3f} ({min(kmeans):.3f}-{max(kmeans):.3f})",
                     "yes" if max(ari_spec, ari_ref) >= np.mean(kmeans) else "no"])
        print(rows[-1], flush=True)
    return table(["data", "k", "model holds (conditional independence check)", "Jennrich fallback", "spectral ARI",
                  "spectral+EM ARI / iters", "time spectral + EM (s)",
                  "k-means on concatenated views ARI (mean of 3, range)", "ARI >= k-means"], rows)


def bench_nuts(small):
    from specinit.compare import compare_nuts

    settings = dict(num_chains=4, num_warmup=150 if small else 300, num_samples=150 if small else 300, seed=0)
    rows = []
    wine = datasets.load_wine()
    x = standardize(wine.data)
    est = gmm.refine(x, gmm.spectral(x, 3, covariance="spherical", seed=0)).estimate
    res = compare_nuts(gmm.model, est, model_args=(x.astype(np.float32),),
                       model_kwargs={"k": 3, "covariance": "spherical"}, **settings).summary()
    rows.append(["gmm (spherical), wine (178 x 13), k = 3", res])
    print(rows[-1], flush=True)
    seqs = load_letter_sequences(max_letters=3000)
    padded, lengths = hmm.pad_sequences(seqs)
    est, _ = quiet(hmm.spectral, seqs, 2, 27)
    est = quiet(hmm.refine, seqs, est, max_iter=100)[0].estimate
    res = compare_nuts(hmm.model, est, model_args=(padded,), model_kwargs={"k": 2, "n_symbols": 27, "lengths": lengths},
                       **settings).summary()
    rows.append([f"hmm, {len(seqs)} paragraphs / {int(lengths.sum())} letters, k = 2", res])
    print(rows[-1], flush=True)
    groups = [x[:, 0:4], x[:, 4:8], x[:, 8:13]]
    est, _ = quiet(mv.spectral, groups, 3, seed=0)
    est = quiet(mv.refine, groups, est)[0].estimate
    res = compare_nuts(mv.model, est, model_args=(groups,),
                       model_kwargs={"k": 3, "kinds": ("gaussian",) * 3}, **settings).summary()
    rows.append(["multiview, wine columns in 3 Gaussian views (4/4/5), k = 3", res])
    print(rows[-1], flush=True)
    out = [[name, f"{r['warm_max_rhat']:.3f}", f"{r['cold_max_rhat']:.3f}", f"{r['warm_time_s']:.0f}",
            f"{r['cold_time_s']:.0f}", "yes" if r["warm_max_rhat"] < 1.1 else "no"] for name, r in rows]
    return (f"4 chains, {settings['num_warmup']} warm-up + {settings['num_samples']} draws, estimate = spectral "
            "then EM, jitter 0.05\n\n" + table(["model, data", "warm max split-R-hat", "default-init max split-R-hat",
                                                 "warm time (s)", "default time (s)", "warm R-hat < 1.1"], out))


def _streamed(update, parts, **options):
    """``update`` over ``parts`` (the batches' data, in order) with ``options``, warnings collected: the last
    estimate and the seconds of all the updates."""
    estimate, seconds = None, 0.0
    for part in parts:
        start = time.perf_counter()
        estimate, _ = quiet(update, part, estimate, **options)
        seconds += time.perf_counter() - start
    return estimate, seconds


def bench_online(n_batches: int = 10):
    from sklearn.cluster import MiniBatchKMeans

    rows = []
    cases = [("digits", datasets.load_digits, 10), ("breast cancer", datasets.load_breast_cancer, 2),
             ("wine", datasets.load_wine, 3)]
    for name, loader, k in cases:
        data = loader()
        x, y = standardize(data.data), data.target
        train, test = _split(x.shape[0])
        batches = np.array_split(train, n_batches)
        gmm.update(x[batches[0]], k=k, seed=0)  # warm: the compiled power method loads here, not in a timed call
        for covariance in ("spherical", "diag"):
            start = time.perf_counter()
            once = gmm.spectral(x[train], k, covariance=covariance, seed=0)
            t_once = time.perf_counter() - start
            estimate, t_updates = _streamed(gmm.update, [x[batch] for batch in batches], k=k, covariance=covariance,
                                            seed=0)
            same = once.params["loc"][match_components(estimate.params["loc"], once.params["loc"])]
            kmeans = MiniBatchKMeans(k, random_state=0, n_init=3)
            start = time.perf_counter()
            for batch in batches:
                kmeans.partial_fit(x[batch])
            t_kmeans = time.perf_counter() - start
            sk = max((GaussianMixture(k, covariance_type=covariance, random_state=seed).fit(x[train])
                      for seed in range(3)), key=lambda fit: fit.score(x[train]))
            rows.append([f"{name} ({k})", covariance, f"{np.abs(estimate.params['loc'] - same).max():.1e}",
                         f"{t_updates:.3f}", f"{t_once:.3f}",
                         f"{adjusted_rand_score(y[test], gmm.predict(x[test], estimate)[1]):.3f}",
                         f"{adjusted_rand_score(y[test], kmeans.predict(x[test])):.3f}", f"{t_kmeans:.3f}",
                         f"{np.mean(gmm.log_likelihood(x[test], estimate)):.3f}", f"{sk.score(x[test]):.3f}"])
            print(rows[-1], flush=True)
    mixtures = (f"standardized features; the training rows (80%) in {n_batches} batches, held-out rows scored\n\n"
                + table(["data (k)", "covariance", "gmm.update vs one gmm.spectral: largest |loc| difference",
                         "all updates (s)", "one fit (s)", "held-out ARI, gmm.update", "held-out ARI, MiniBatchKMeans",
                         "MiniBatchKMeans partial_fit (s)", "held-out LL / row, gmm.update",
                         "held-out LL / row, GaussianMixture on all rows (best of 3)"], rows))
    return (mixtures + "\n\n" + _online_multiview(n_batches) + "\n\n" + _online_hmm(n_batches) + "\n\n"
            + _online_gaussian_hmm(n_batches))


def _online_multiview(n_batches: int) -> str:
    from sklearn.cluster import MiniBatchKMeans

    rows = []
    for name, views, y, k in multiview_datasets():
        train, test = _split(y.size)
        batches = np.array_split(train, n_batches)
        quiet(mv.update, [v[batches[0]] for v in views], k=k)  # warm
        start = time.perf_counter()
        once, _ = quiet(mv.spectral, [v[train] for v in views], k, seed=0)
        t_once = time.perf_counter() - start
        estimate, t_updates = _streamed(mv.update, [[v[batch] for v in views] for batch in batches], k=k, seed=0)
        site = once.match_site
        same = once.params[site][match_components(estimate.params[site], once.params[site])]
        x = np.hstack(views)
        kmeans = MiniBatchKMeans(k, random_state=0, n_init=3)
        for batch in batches:
            kmeans.partial_fit(x[batch])
        ours = adjusted_rand_score(y[test], mv.predict([v[test] for v in views], estimate)[1])
        rows.append([name, k, f"{np.abs(estimate.params[site] - same).max():.1e}", f"{t_updates:.3f}",
                     f"{t_once:.3f}", f"{ours:.3f}", f"{adjusted_rand_score(y[test], kmeans.predict(x[test])):.3f}"])
        print(rows[-1], flush=True)
    return (f"multi-view: the training observations (80%) in {n_batches} batches\n\n"
            + table(["data", "k", "multiview.update vs one multiview.spectral: largest difference of the target "
                     "view's means", "all updates (s)", "one fit (s)", "held-out ARI, multiview.update",
                     "held-out ARI, MiniBatchKMeans (concatenated views)"], rows))


def _online_hmm(n_batches: int, n_letters: int = 200_000) -> str:
    from hmmlearn.hmm import CategoricalHMM

    seqs = load_letter_sequences(max_letters=n_letters)
    train, test = _split(len(seqs))
    train_seqs, test_seqs = [seqs[i] for i in train], [seqs[i] for i in test]
    n_test = sum(s.size for s in test_seqs)
    batches = np.array_split(np.arange(len(train_seqs)), n_batches)
    quiet(hmm.update, [train_seqs[i] for i in batches[0]], k=2, n_symbols=27)  # warm
    rows = []
    for k in (2, 4):
        start = time.perf_counter()
        once, _ = quiet(hmm.spectral, train_seqs, k, 27, seed=0)
        t_once = time.perf_counter() - start
        estimate, t_updates = _streamed(hmm.update, [[train_seqs[i] for i in batch] for batch in batches], k=k,
                                        n_symbols=27, seed=0)
        same = once.params["emission"][match_components(estimate.params["emission"], once.params["emission"])]
        start = time.perf_counter()
        refined, _ = quiet(hmm.refine, train_seqs, estimate)
        t_refine = time.perf_counter() - start
        peer = CategoricalHMM(k, n_iter=100, tol=1e-2, random_state=0, n_features=27)
        start = time.perf_counter()
        peer.fit(np.concatenate(train_seqs)[:, None], [s.size for s in train_seqs])
        t_peer = time.perf_counter() - start

        def per_letter(fit):
            return f"{np.sum(hmm.log_likelihood(test_seqs, fit)) / n_test:.4f}"

        rows.append([k, f"{np.abs(estimate.params['emission'] - same).max():.1e}", f"{t_updates:.2f}",
                     f"{t_once:.2f}", per_letter(estimate), f"{per_letter(refined.estimate)} ({t_refine:.1f} s)",
                     f"{peer.score(np.concatenate(test_seqs)[:, None], [s.size for s in test_seqs]) / n_test:.4f} "
                     f"({t_peer:.1f} s)"])
        print(rows[-1], flush=True)
    return (f"letters: {len(train_seqs)} training paragraphs in {n_batches} batches, {len(test_seqs)} held out "
            f"({n_test} letters)\n\n"
            + table(["k", "hmm.update vs one hmm.spectral: largest |emission| difference", "all updates (s)",
                     "one fit (s)", "held-out LL / letter, hmm.update", "the same after hmm.refine (its time)",
                     "hmmlearn CategoricalHMM on all training paragraphs (its time)"], rows))


def gaussian_series() -> list:
    """Real 1-D series shipped with matplotlib (its sample data), cut into segments (the sequences):
    ``(name, segments, k)``. A membrane-potential recording (12,000 samples; three levels) in 40 segments of 300,
    and Google's daily closing prices 2004-2008 as log returns in percent (1,046 days; calm and volatile
    regimes) in 20 segments."""
    from matplotlib import cbook

    membrane = np.fromfile(cbook.get_sample_data("membrane.dat", asfileobj=False), dtype=np.float32).astype(float)
    close = cbook.get_sample_data("goog.npz")["price_data"]["adj_close"]
    returns = 100.0 * np.diff(np.log(close))
    return [("membrane potential", np.array_split(membrane, 40), 3),
            ("GOOG daily log returns (%)", np.array_split(returns, 20), 2)]


def _online_gaussian_hmm(n_batches: int) -> str:
    from hmmlearn.hmm import GaussianHMM

    from specinit.engine.sequences import as_sequences
    from specinit.models import gaussian_hmm

    rows = []
    for name, segments, k in gaussian_series():
        train, test = _split(len(segments))
        train_seqs, test_seqs = [segments[i] for i in train], [segments[i] for i in test]
        n_test = sum(s.size for s in test_seqs)
        batches = np.array_split(np.arange(len(train_seqs)), n_batches)
        quiet(gaussian_hmm.update, [train_seqs[i] for i in batches[0]], k=k)  # warm
        start = time.perf_counter()
        quiet(gaussian_hmm.spectral, train_seqs, k, seed=0)
        t_once = time.perf_counter() - start
        estimate, t_updates = _streamed(gaussian_hmm.update, [[train_seqs[i] for i in batch] for batch in batches],
                                        k=k, seed=0)
        first = as_sequences([train_seqs[i] for i in batches[0]], categorical=False)
        binned = gaussian_hmm.binned_moments(as_sequences(train_seqs, categorical=False),
                                             gaussian_hmm.quantile_edges(first, k, None))
        same, _ = quiet(gaussian_hmm.spectral_from_moments, binned, k, seed=0)
        order = match_components(estimate.params["loc"], same.params["loc"])
        start = time.perf_counter()
        refined, _ = quiet(gaussian_hmm.refine, train_seqs, estimate)
        t_refine = time.perf_counter() - start
        X, lengths = np.concatenate(train_seqs)[:, None], [s.size for s in train_seqs]
        start = time.perf_counter()
        fits, _ = quiet(lambda: [GaussianHMM(k, n_iter=100, random_state=seed).fit(X, lengths) for seed in range(3)])
        t_peer = time.perf_counter() - start
        peer = max(fits, key=lambda fit: fit.score(X, lengths))

        def per_observation(fit):
            return f"{np.sum(gaussian_hmm.log_likelihood(test_seqs, fit)) / n_test:.4f}"

        rows.append([name, k, f"{np.abs(estimate.params['loc'] - same.params['loc'][order]).max():.1e}",
                     f"{t_updates:.3f}", f"{t_once:.3f}", per_observation(estimate),
                     f"{per_observation(refined.estimate)} ({t_refine:.2f} s)",
                     f"{peer.score(np.concatenate(test_seqs)[:, None], [s.size for s in test_seqs]) / n_test:.4f} "
                     f"({t_peer:.2f} s)"])
        print(rows[-1], flush=True)
    return (f"Gaussian HMM: real series shipped with matplotlib cut into segments, the training segments (80%) "
            f"in {n_batches} batches, the others held out\n\n"
            + table(["series", "k", "gaussian_hmm.update vs the moment estimate on all training segments binned by "
                     "the first batch's edges: largest |loc| difference", "all updates (s)",
                     "one gaussian_hmm.spectral (s)", "held-out LL / observation, gaussian_hmm.update",
                     "the same after gaussian_hmm.refine (its time)",
                     "hmmlearn GaussianHMM on all training segments, best of 3 (their time)"], rows))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller HMM corpus, k in (2, 4), shorter NUTS")
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--only", choices=("gmm", "hmm", "k_auto", "multiview", "nuts", "online"))
    args = parser.parse_args(argv)
    print(f"Machine: {machine()}; load average {os.getloadavg()[0]:.1f} at the start\n", flush=True)
    sections = {
        "gmm": lambda: bench_gmm(tol=1e-5),
        "hmm": lambda: bench_hmm(20_000 if args.quick else 40_000, (2, 4) if args.quick else range(2, 9), 100),
        "k_auto": lambda: bench_k_auto(20_000 if args.quick else 40_000),
        "multiview": bench_multiview,
        "nuts": lambda: bench_nuts(args.quick),
        "online": bench_online,
    }
    for name, run in sections.items():
        if (args.only and name != args.only) or (name == "nuts" and args.skip_nuts):
            continue
        start = time.perf_counter()
        text = run()
        print(f"\n### {name} ({time.perf_counter() - start:.0f} s)\n\n{text}\n", flush=True)


if __name__ == "__main__":
    main()
