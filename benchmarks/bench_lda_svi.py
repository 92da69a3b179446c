"""Refinement benchmark (issue 9, rows 2 and 3): spectral + ``lda.svi`` vs scikit-learn online LDA; NUTS R-hat.

1. Real corpora (``--corpus python,man``): paragraphs of the Python standard
   library's docstrings (:func:`specinit.corpus.shipped.load_python_docs`,
   offline, shipped with Python), or the first 40,000 sections of the Debian
   manual pages with every word seen in two or more sections (``man``;
   V = 11,931 with ``manpages``/``manpages-dev`` installed; no shipped corpus
   reaches V = 50,000); 2,000 documents held out at random. Held-out document-completion
   perplexity (:func:`specinit.corpus.heldout.document_completion`: theta
   folded in on half of each held-out document's tokens, the other half
   scored; the same fold-in and split for every method) and wall time of:
   the spectral fit; ``lda.svi`` started from it (warm) and from NumPyro's
   default start (cold); scikit-learn's ``LatentDirichletAllocation``
   (online, max_iter=10); tomotopy's collapsed Gibbs ``LDAModel`` (100
   sweeps, 2 threads; the "moonshot": spectral + ``lda.svi`` within 5% of its
   perplexity in no more than its time). Warm vs cold: steps the warm run needs to reach the
   cold run's final held-out perplexity (perplexity measured every
   ``num_steps / 20`` steps; evaluation time is not counted in the runs).
2. NUTS, 4 chains x (500 warm-up + 500 draws), LDA N = V = 300, k = 5
   (the README's setting), one run per start: the raw spectral estimate,
   the spectral estimate refined by ``lda.refine`` (with and without
   jitter), NumPyro's default init. Max split-R-hat over ``beta`` and
   ``alpha`` (NumPyro's, no relabelling), wall times, tree sizes and the
   spread of the chains' mean potential energies (a chain in another mode
   shows up there), with sparse counts.

3. Time to quality (``--curves``): held-out perplexity against wall time in one process for spectral +
   ``lda.svi`` with its defaults (stopping rule; the first call, so the JIT compilation counts), scikit-learn
   online VB (``partial_fit`` passes, scored after each) and tomotopy (10 sweeps at a time, scored after
   each); targets: online VB's final perplexity in at most 0.5x its time, tomotopy-100's in at most its time.

Run: ``python benchmarks/bench_lda_svi.py [--quick] [--skip-nuts] [--skip-real] [--steps S] [--k K]
[--nuts-inits spectral,refined,...] [--chain-method parallel]``, or
``python benchmarks/bench_lda_svi.py --curves [--corpus python,man] [--man-docs N] [--compilation-cache DIR]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import machine, table, timed
from specinit.models import lda

from specinit.corpus.heldout import document_completion
from specinit.corpus.shipped import load_man_pages, load_python_docs


def split_rows(X, n_test: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.shape[0])
    return X[np.sort(order[n_test:])], X[np.sort(order[:n_test])]


def perplexity(test, beta, alpha) -> float:
    return document_completion(test, beta, alpha, seed=0).perplexity


def load_real(name: str, quick: bool, man_docs: int, seed: int):
    """(counts, vocabulary, description) of a corpus shipped on this machine."""
    if name == "python":
        corpus = load_python_docs(max_documents=3_000 if quick else None)
        return corpus.counts.tocsr(), list(corpus.vocabulary), "Python stdlib docstring paragraphs"
    # Man-page sections with a large vocabulary (every word in >= 2 sections, up to 60,000 words).
    corpus = load_man_pages(unit="section", min_df=2, max_words=60_000, max_documents=5_000 if quick else man_docs)
    return corpus.counts.tocsr(), list(corpus.vocabulary), "Debian manual-page sections (large vocabulary)"


def bench_real(k: int, num_steps: int, batch_size: int, quick: bool, corpus_name: str = "python",
               man_docs: int = 40_000, tomotopy_iterations: int = 100, seed: int = 0):
    from bench_lda_real import tomotopy_lda
    from sklearn.decomposition import LatentDirichletAllocation

    X, vocabulary, description = load_real(corpus_name, quick, man_docs, seed)
    train, test = split_rows(X, 300 if quick else 2_000, seed)
    print(f"corpus: {description}, N = {X.shape[0]:,} ({train.shape[0]:,} train, "
          f"{test.shape[0]:,} held out), V = {X.shape[1]:,}, {int(X.sum()):,} tokens; k = {k}\n")
    rows, curves = [], {}

    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = lda.spectral(train, k, seed=seed, doc_topics=False)
    t_spec = time.perf_counter() - start
    p_spec = perplexity(test, est.params["beta"], est.params["alpha"])
    rows.append(["lda.spectral (alpha0 from the data)", "-", t_spec, p_spec])
    if caught:
        print("spectral warnings: " + " | ".join(str(w.message)[:120] for w in caught))

    every = max(num_steps // 20, 1)
    # Compile the SVI step once (same shapes for both runs) and report it apart: both runs below are compiled.
    start = time.perf_counter()
    lda.svi(train, k, init=None, num_steps=1, batch_size=batch_size, seed=seed)
    t_compile = time.perf_counter() - start
    rows.append(["lda.svi JIT compilation (once per shape; not in the rows below)", 1, t_compile, "-"])
    times = {}
    for name, init in (("warm", est), ("cold", None)):
        result = lda.svi(train, k, init=init, num_steps=num_steps, batch_size=batch_size, seed=seed,
                         snapshot_every=every, progress=max(num_steps // 5, 1))
        curve = [(step, perplexity(test, p["beta"], p["alpha"])) for step, p in result.snapshots]
        curves[name] = curve
        label = f"lda.svi {name} ({'spectral init' if init is not None else 'NumPyro default init'})"
        total = result.seconds + (t_spec if init is not None else 0.0)
        times[name] = result.seconds
        rows.append([label + (", time incl. spectral" if init is not None else ""), num_steps, total, curve[-1][1]])

    model = LatentDirichletAllocation(n_components=k, learning_method="online", max_iter=10, random_state=seed)
    start = time.perf_counter()
    model.fit(train)
    t_sk = time.perf_counter() - start
    beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
    p_sk = perplexity(test, beta, np.full(k, model.doc_topic_prior_))
    rows.append(["scikit-learn LDA online, max_iter=10", "-", t_sk, p_sk])
    beta, alpha, t_tp, note = tomotopy_lda(train, k, seed, vocabulary, tomotopy_iterations)
    p_tp = perplexity(test, beta, alpha)
    rows.append([f"tomotopy LDAModel ({note})", "-", t_tp, p_tp])
    print(table(["method", "SVI steps", "time (s)", "held-out perplexity"], rows))

    target = curves["cold"][-1][1]
    reached = next((step for step, p in curves["warm"] if p <= target), None)
    print(f"\nwarm vs cold: the cold run's final perplexity {target:.1f} is reached by the warm run after "
          f"{reached if reached is not None else 'never (within the run)'} of {num_steps} steps"
          + (f" ({reached / num_steps:.2f} of the run; target <= 0.2)" if reached else ""))
    beat = next((step for step, p in curves["warm"] if p <= p_sk), None)
    if beat is not None:
        print(f"the warm run reaches scikit-learn online's perplexity {p_sk:.1f} after {beat} steps, i.e. about "
              f"{t_spec + times['warm'] * beat / num_steps:.1f} s including the spectral fit (scikit-learn: {t_sk:.1f} s)")
    else:
        print(f"the warm run does not reach scikit-learn online's perplexity {p_sk:.1f} within {num_steps} steps")
    close = next((step for step, p in curves["warm"] if p <= 1.05 * p_tp), None)
    print(f"moonshot (spectral + lda.svi within 5% of tomotopy's {tomotopy_iterations}-sweep perplexity {p_tp:.1f} in no more "
          f"than its {t_tp:.1f} s): " + (f"reached at step {close}, about "
          f"{t_spec + times['warm'] * close / num_steps:.1f} s including the spectral fit" if close is not None
          else f"not reached within {num_steps} steps (best warm perplexity {min(p for _, p in curves['warm']):.1f})"))
    print(table(["step", "warm perplexity", "cold perplexity"],
                [[s, w, c] for (s, w), (_, c) in zip(curves["warm"], curves["cold"])]))


def first_time_at(curve, target: float):
    """Wall time of the first point of ``curve`` ((seconds, perplexity), in time order) at or below ``target``."""
    return next((seconds for seconds, p in curve if p <= target), None)


def bench_time_to_quality(k: int, corpus_name: str, man_docs: int, seed: int = 0, sklearn_epochs: int = 10,
                          tomotopy_iterations: int = 100, tomotopy_every: int = 10):
    """Held-out perplexity against wall time for spectral + ``lda.svi`` (defaults), online VB and tomotopy.

    Every method runs once in this process: ``lda.svi`` with its defaults (stopping rule, ``max_steps=2000``) from
    the spectral estimate, its first call in the process (the JIT compilation of the update counted); the
    parameters are kept every 25 steps and the time of step s is the spectral time plus the first step (compile)
    plus s - 1 steps at the run's mean step time. scikit-learn online VB: ``partial_fit`` over the training set
    (one pass of 128-document minibatches, as ``fit(max_iter=1)``), ``sklearn_epochs`` times, scored after each.
    tomotopy: ``train(tomotopy_every)`` until ``tomotopy_iterations`` sweeps, scored after each. Scoring is not
    timed.
    """
    from bench_lda_real import as_token_lists
    from sklearn.decomposition import LatentDirichletAllocation

    X, vocabulary, description = load_real(corpus_name, False, man_docs, seed)
    train, test = split_rows(X, 2_000, seed)
    print(f"\ncorpus: {description}, {train.shape[0]:,} train / {test.shape[0]:,} held out, V = {X.shape[1]:,}, "
          f"k = {k}", flush=True)
    curves = {}

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = lda.spectral(train, k, seed=seed, doc_topics=False)
    t_spec = time.perf_counter() - start
    fit = lda.svi(train, k, init=est, seed=seed, snapshot_every=25, progress=False)
    per_step = (fit.seconds - fit.first_step_seconds) / max(fit.n_steps - 1, 1)
    curves["spectral + lda.svi"] = [(t_spec, perplexity(test, est.params["beta"], est.params["alpha"]))] + [
        (t_spec + fit.first_step_seconds + (step - 1) * per_step, perplexity(test, p["beta"], p["alpha"]))
        for step, p in fit.snapshots]
    svi_note = (f"spectral {t_spec:.1f} s; lda.svi stopped after {fit.n_steps} steps ({fit.stop_reason}) in "
                f"{fit.seconds:.1f} s, of which the first step (compilation) {fit.first_step_seconds:.1f} s")

    model = LatentDirichletAllocation(n_components=k, learning_method="online", random_state=seed,
                                      total_samples=train.shape[0])
    elapsed, curve = 0.0, []
    for _ in range(sklearn_epochs):
        start = time.perf_counter()
        model.partial_fit(train)
        elapsed += time.perf_counter() - start
        beta = model.components_ / model.components_.sum(axis=1, keepdims=True)
        curve.append((elapsed, perplexity(test, beta, np.full(k, model.doc_topic_prior_))))
    curves[f"scikit-learn online VB ({sklearn_epochs} passes)"] = curve

    import tomotopy as tp

    tm = tp.LDAModel(k=k, seed=seed)
    for words in as_token_lists(train, vocabulary):
        if words:
            tm.add_doc(words)
    elapsed, curve = 0.0, []
    for _ in range(tomotopy_iterations // tomotopy_every):
        start = time.perf_counter()
        tm.train(tomotopy_every, workers=2)
        elapsed += time.perf_counter() - start
        index = {w: i for i, w in enumerate(tm.used_vocabs)}
        order = np.array([index.get(w, -1) for w in vocabulary])
        beta = np.full((k, len(vocabulary)), 1e-12)
        for t in range(k):
            beta[t, order >= 0] = np.asarray(tm.get_topic_word_dist(t), dtype=np.float64)[order[order >= 0]]
        beta /= beta.sum(axis=1, keepdims=True)
        curve.append((elapsed, perplexity(test, beta, np.asarray(tm.alpha, dtype=np.float64))))
    curves[f"tomotopy ({tomotopy_iterations} Gibbs sweeps, 2 threads)"] = curve

    rows = []
    for name, curve in curves.items():
        picks = curve if len(curve) <= 8 else [curve[int(i)] for i in np.linspace(0, len(curve) - 1, 8)]
        rows.append([name, "; ".join(f"{t:.1f} s: {p:.0f}" for t, p in picks)])
    print(table(["method", "(wall time, held-out perplexity) along the run"], rows))
    print(svi_note)
    ours, sk, tomo = curves.values()
    t_sk, p_sk = sk[-1]
    t_tp, p_tp = tomo[-1]
    reach_sk, reach_tp = first_time_at(ours, p_sk), first_time_at(ours, p_tp)
    print(f"target 1: online VB's final perplexity {p_sk:.0f} (reached in {t_sk:.1f} s) by spectral + lda.svi in at most "
          f"{0.5 * t_sk:.1f} s: " + (f"reached at {reach_sk:.1f} s ({reach_sk / t_sk:.2f}x)" if reach_sk is not None
                                     else "not reached") + f"; final {ours[-1][1]:.0f} at {ours[-1][0]:.1f} s")
    print(f"target 2: tomotopy's perplexity {p_tp:.0f} (in {t_tp:.1f} s) by spectral + lda.svi in at most its time: "
          + (f"reached at {reach_tp:.1f} s ({reach_tp / t_tp:.2f}x)" if reach_tp is not None else
             f"not reached (best {min(p for _, p in ours):.0f})"), flush=True)
    return curves


NUTS_INITS = {
    "spectral": "spectral (init_params, jitter 0.05)",
    "refined": "spectral + lda.refine (400 steps; jitter 0.05)",
    "refined-nojitter": "spectral + lda.refine (400 steps; jitter 0)",
    "default": "NumPyro default (init_to_uniform)",
}


def bench_nuts(num_warmup: int, num_samples: int, n: int, inits, chain_method: str = "sequential", seed: int = 0):
    """One warm-start NUTS run per init of ``inits`` (keys of NUTS_INITS) on the README's LDA setting."""
    import jax
    from numpyro.diagnostics import split_gelman_rubin
    from numpyro.infer import MCMC, NUTS

    from specinit.synthetic import sample_lda
    from specinit.warmstart import init_params

    k = 5
    corpus = sample_lda(n, n, k, alpha=0.3, doc_length=100, beta_concentration=0.1, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spectral, t_spectral = timed(lda.spectral, corpus.counts, k, alpha0=0.3 * k, seed=seed)
        refined, t_refine = (timed(lda.refine, corpus.counts, spectral, num_steps=400, seed=seed)
                             if any(name.startswith("refined") for name in inits) else (None, 0.0))
    rows = []
    for name in inits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = refined.estimate if name.startswith("refined") else spectral
            t_init = t_spectral + (t_refine if name.startswith("refined") else 0.0)
            jitter = 0.0 if name.endswith("nojitter") else 0.05
            start_values = None if name == "default" else init_params(
                est, lda.model, 4, jax.random.PRNGKey(seed), spread=jitter, model_args=(corpus.counts,),
                model_kwargs={"k": k})
            mcmc = MCMC(NUTS(lda.model), num_warmup=num_warmup, num_samples=num_samples, num_chains=4,
                        chain_method=chain_method, progress_bar=False)
            start = time.perf_counter()
            mcmc.run(jax.random.PRNGKey(seed + 1), corpus.counts, init_params=start_values,
                     extra_fields=("num_steps", "potential_energy"), k=k)
            draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
            t_nuts = time.perf_counter() - start
        rhat = {site: np.asarray(split_gelman_rubin(np.asarray(draws[site], dtype=np.float64))) for site in ("beta", "alpha")}
        extra = mcmc.get_extra_fields(group_by_chain=True)
        energy = np.asarray(extra["potential_energy"]).mean(axis=1)
        rows.append([NUTS_INITS[name], f"{t_init:.1f}" if name != "default" else "-", t_nuts,
                     max(float(r.max()) for r in rhat.values()), int((rhat["beta"] > 1.1).sum()),
                     float(np.asarray(extra["num_steps"]).mean()), f"{np.ptp(energy):.0f}"])
        print(table(["init", "init time (s)", "NUTS wall time (s)", "max split-R-hat over beta, alpha",
                     "beta entries with R-hat > 1.1", "mean tree size",
                     "spread of the chains' mean potential energy"], rows[-1:]), flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-nuts", action="store_true")
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--k", type=int, default=20)
    parser.add_argument("--corpus", default="python", help="comma-separated: python, man")
    parser.add_argument("--man-docs", type=int, default=40_000)
    parser.add_argument("--curves", action="store_true", help="only the time-to-quality curves (section 3)")
    parser.add_argument("--compilation-cache", default=None, metavar="DIR",
                        help="turn on JAX's persistent compilation cache in DIR (a second run then loads the update)")
    parser.add_argument("--nuts-inits", default=",".join(NUTS_INITS), help="comma-separated keys of NUTS_INITS")
    parser.add_argument("--chain-method", default="sequential", choices=["sequential", "parallel", "vectorized"])
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    if args.compilation_cache:
        import jax

        jax.config.update("jax_compilation_cache_dir", args.compilation_cache)
        print(f"JAX persistent compilation cache: {args.compilation_cache}\n")
    if args.curves:
        print("3. time to quality: held-out perplexity against wall time, one run each")
        for name in args.corpus.split(","):
            bench_time_to_quality(args.k, name, args.man_docs)
        return
    if not args.skip_real:
        steps = args.steps or (100 if args.quick else 2000)
        print(f"1. spectral + lda.svi vs scikit-learn online LDA ({steps} SVI steps of {args.batch_size} documents)")
        for name in args.corpus.split(","):
            bench_real(args.k, steps, args.batch_size, args.quick, name, args.man_docs)
    if not args.skip_nuts:
        n, warm, samp = (60, 100, 100) if args.quick else (300, 500, 500)
        print(f"\n2. NUTS, 4 chains x ({warm} warm-up + {samp} draws), LDA N = V = {n}, k = 5, sparse counts")
        bench_nuts(warm, samp, n, args.nuts_inits.split(","), args.chain_method)


if __name__ == "__main__":
    main()
