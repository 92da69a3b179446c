"""``specinit demo``: the main job on an embedded default corpus drawn from LDA.

1. Draw a corpus from LDA (seeded) and fit it by the method of moments:
   time, topic error against the truth, diagnostics.
2. MCMC, 4 chains, on a small corpus (``lda.model``'s own kernel: exact
   Gibbs updates of the topics and proportions, NUTS for alpha): spectral
   estimate refined by ``lda.refine`` (variational EM) vs NumPyro's default
   init: time, max split-R-hat of the topics (no relabelling), bulk ESS.
3. SVI (AutoNormal): warm vs default start, steps to reach the default's
   final ELBO.
4. ArviZ: posterior aligned to the spectral labels, comparison table, and
   plots (forest with the spectral values, topic heatmap, ELBO traces)
   written to ``out_dir``.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np

from specinit._validation import check_choice
from specinit.align import topic_error
from specinit.models import lda
from specinit.synthetic import sample_lda

__all__ = ["DEMO_SIZES", "run_demo"]

# (documents, vocabulary, topics) of the spectral fit; then of the MCMC/SVI comparison, warm-up, draws, SVI steps.
DEMO_SIZES = {
    "default": {"fit": (20_000, 2_000, 10), "mcmc": (40, 40, 3), "warmup": 150, "draws": 150, "svi_steps": 500,
                "max_tree_depth": 7, "refine_steps": 100},
    "full": {"fit": (100_000, 5_000, 20), "mcmc": (120, 120, 4), "warmup": 300, "draws": 300, "svi_steps": 2000,
             "refine_steps": 400},
    "quick": {"fit": (1_000, 200, 4), "mcmc": (30, 30, 2), "warmup": 30, "draws": 30, "svi_steps": 100, "max_tree_depth": 5,
              "refine_steps": 20},
}


def run_demo(out_dir: Path, *, size: Literal["default", "full", "quick"] = "default", seed: int = 0,
             log: Callable[[str], None] = lambda msg: None) -> dict[str, Any]:
    """Run the demo; return its headline numbers and write plots to ``out_dir``.

    Parameters
    ----------
    out_dir : path
        Folder for the PNG plots and the saved estimate (created).
    size : {"default", "full", "quick"}
        The sizes of :data:`DEMO_SIZES`, the only difference between the
        runs: ``"full"`` takes larger corpora and longer chains than
        ``"default"``, ``"quick"`` tiny ones, as executed by the test suite.
        Compiling the samplers dominates the small runs: ``"quick"`` takes
        about two minutes on two cores, most of it JAX compiling.
    seed : int
    log : callable
        Receives progress lines (the CLI prints them).

    Returns
    -------
    dict
        Numbers shown by the demo (fit time, topic errors, R-hat, SVI steps),
        ``"plots"`` (the PNG files) and ``"files"`` (every file written: the
        saved estimate and the plots).
    """
    from specinit import posterior
    from specinit.compare import compare_nuts, compare_svi

    sizes = DEMO_SIZES[check_choice(size, "size", "run_demo", DEMO_SIZES)]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict = {}

    n_docs, vocab, k = sizes["fit"]
    log(f"[1/4] drawing an LDA corpus: N={n_docs}, V={vocab}, k={k}, alpha=0.1 ...")
    corpus = sample_lda(n_docs, vocab, k, alpha=0.1, doc_length=80, seed=seed)
    start = time.perf_counter()
    estimate = lda.spectral(corpus.counts, k, alpha0=0.1 * k, seed=seed)
    results["fit_seconds"] = time.perf_counter() - start
    results["fit_topic_l1"] = topic_error(corpus.beta, estimate.params["beta"])
    d = estimate.diagnostics
    log(f"      spectral fit in {results['fit_seconds']:.2f} s; mean L1 topic error {results['fit_topic_l1']:.3f}; "
        f"sum(alpha_hat) {d['alpha_sum']:.2f} (alpha0 {d['alpha0']:.2f}); M2 condition number {d['m2_condition_number']:.1f}")
    saved = estimate.save(out_dir / "estimate.npz")

    n_docs, vocab, k = sizes["mcmc"]
    small = sample_lda(n_docs, vocab, k, alpha=0.3, doc_length=100, seed=seed + 1)
    X = small.counts.toarray().astype(np.float32)
    spectral_small = lda.spectral(small.counts, k, alpha0=0.3 * k, seed=seed)
    # Spectral then refine: variational EM moves rare words to their topics, which NUTS chains started from the raw
    # spectral values may not do within a short warm-up (one chain keeps a rare word elsewhere: R-hat > 1.1).
    refined = lda.refine(small.counts, spectral_small, num_steps=sizes["refine_steps"], seed=seed)
    small_est = refined.estimate
    log(f"[2/4] MCMC (lda.kernel: exact Gibbs updates of beta and theta, NUTS for alpha), 4 chains x "
        f"({sizes['warmup']} warm-up + {sizes['draws']} draws), LDA N={n_docs}, V={vocab}, k={k}: spectral + "
        f"lda.refine ({sizes['refine_steps']} steps, {small_est.diagnostics['refine/seconds']:.1f} s) init vs default "
        "init (this is the slow step) ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        nuts = compare_nuts(lda.model, small_est, model_args=(X,), model_kwargs={"k": k}, num_chains=4,
                            num_warmup=sizes["warmup"], num_samples=sizes["draws"], seed=seed,
                            nuts_kwargs={"max_tree_depth": sizes.get("max_tree_depth", 10)}, progress_bar=True)
    summary = nuts.summary()
    results.update({f"nuts_{key}": value for key, value in summary.items()})
    log(f"      warm: {summary['warm_time_s']:.1f} s, max R-hat(beta, alpha) {summary['warm_max_rhat']:.3f}, "
        f"min bulk ESS {summary['warm_min_ess']:.0f}")
    log(f"      cold: {summary['cold_time_s']:.1f} s, max R-hat(beta, alpha) {summary['cold_max_rhat']:.3f}, "
        f"min bulk ESS {summary['cold_min_ess']:.0f}  (label switching between chains is expected)")

    log(f"[3/4] SVI (AutoNormal), {sizes['svi_steps']} steps: spectral init vs init_to_uniform ...")
    svi = compare_svi(lda.model, spectral_small, model_args=(X,), model_kwargs={"k": k}, num_steps=sizes["svi_steps"], seed=seed)
    s = svi.summary()
    results.update({f"svi_{key}": value for key, value in s.items()})
    log(f"      final smoothed loss warm {s['warm_final_loss']:.1f} vs cold {s['cold_final_loss']:.1f}; "
        f"warm reaches the cold final loss after {s['steps_to_reach']:.0f} of {sizes['svi_steps']} steps")

    log(f"[4/4] ArviZ comparison and plots in {out_dir} ...")
    idata = posterior.to_inference_data(nuts.warm, small_est)
    table = posterior.compare_table(idata, small_est, var_names=["alpha"])
    log(table.to_string(float_format=lambda v: f"{v:.3f}"))
    results["posterior_topic_l1"] = topic_error(small.beta, np.asarray(posterior.group(idata, "posterior")["beta"].mean(("chain", "draw"))))
    results["spectral_topic_l1_small"] = topic_error(small.beta, spectral_small.params["beta"])
    results["refined_topic_l1_small"] = topic_error(small.beta, small_est.params["beta"])
    log(f"      mean L1 topic error on the small corpus: spectral {results['spectral_topic_l1_small']:.3f}, "
        f"refined {results['refined_topic_l1_small']:.3f}, "
        f"posterior mean (warm MCMC) {results['posterior_topic_l1']:.3f}")
    paths = [
        posterior.plot_forest_with_spectral(idata, small_est, ["alpha"], out_dir / "forest_alpha.png"),
        posterior.plot_topic_heatmap(estimate.params["beta"], out_dir / "topics_spectral.png"),
        posterior.plot_elbo_traces({"spectral init": svi.warm_losses, "default init": svi.cold_losses}, out_dir / "elbo.png"),
    ]
    results["plots"] = [str(p) for p in paths]
    results["files"] = [str(saved), *results["plots"]]
    log("      wrote " + ", ".join(results["files"]))
    return results
