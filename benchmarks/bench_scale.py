"""Scale benchmarks (issue 10): the moment passes on all CPU cores, through JAX, and on Dask.

Sections (each prints a markdown table; peers run in the same process on the same data):

a. N = 200k, V = 20k, k = 50: the whole LDA fit (moments + whitening + TPM, no per-document theta)
   against one bare SciPy ``X.T @ (X @ Q)`` of width k (target: fit <= 3x the bare pass), and every
   pass per backend: SciPy single-threaded, SciPy threads over row chunks, fused Numba kernels
   (1 and all threads), JAX on the CPU.
b. N = 1M, V = 50k, k = 100: fit time and peak RSS of a process that loads the corpus and fits
   (targets 60 s, 4 GB), in a child process; ``--large-n`` sets N, ``--b-replicas R`` stacks the sampled
   corpus R times (N = 10M: ``--large-n 1000000 --b-replicas 10``).
c. Dask: LocalCluster with 1 and 2 worker processes (one thread each), the corpus persisted on the
   workers in row blocks; pass and fit times as N grows, and the cost of the reduction alone (a
   pass whose blocks return a zero (V, k) partial: scheduling, transfer and the tree of additions).
   HMM (T symbols of one sequence) and GMM (N points) through the in-memory and Dask paths.
d. GPU (``--gpu``, JAX on an accelerator): at N = 1M (``--large-n``) the passes one by one, the tensor fit and
   the default call after and including compilation, a profile of the warm default call; N = 10M (the corpus
   stacked 10 times); the float64 CPU fits on the same machine; topic errors. Printed as "not run" without
   ``--gpu``.
e. The other families at scale, in memory on all cores: a categorical HMM on one sequence of T = 10^7
   symbols against hmmlearn's Baum-Welch, a Gaussian mixture of N = 10^7 points against scikit-learn's
   GaussianMixture; fit time, peak RSS of the fitting child process, and each fit's log-likelihood per
   observation on held-out data (scored by the peer's own code from the fitted parameters).

Run: ``python benchmarks/bench_scale.py [--sections abcde] [--quick] [--large-n N] [--b-replicas R] [--gpu]
[--seq-n T]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy.sparse as sp
from _common import machine, matched_l1, peak_rss_gb, table, timed

from specinit.engine.moments import CountMoments
from specinit.models import lda
from specinit.synthetic import sample_lda


def timed_cpu(func, *args, **kwargs):
    """(result, wall seconds, CPU seconds of this process: all its threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _corpus(n, vocab, k, seed=0):
    corpus, seconds = timed(sample_lda, n, vocab, k, alpha=0.1, doc_length=90, seed=seed)
    X = sp.csr_matrix(corpus.counts, dtype=np.float64)
    return corpus, X, seconds


def _bare_pass(X, width, seed=0):
    Q = np.random.default_rng(seed).standard_normal((X.shape[1], width))
    _, seconds = timed(lambda: X.T @ (X @ Q))
    return seconds


def _pass_times(X, k, backend, n_threads):
    """(first pass incl. device transfer, m2 pass of width k + 10, whitened pass of width k): warm timings."""
    rng = np.random.default_rng(1)
    Q, W = rng.standard_normal((X.shape[1], k + 10)), rng.standard_normal((X.shape[1], k))
    moments, first, _ = timed_cpu(CountMoments, X, alpha0=0.1 * k, backend=backend, n_threads=n_threads)
    moments.m2_matmat(Q[:, :1] @ np.ones((1, k + 10))) if backend != "numpy" else None  # compile / warm up
    _, m2, m2_cpu = timed_cpu(moments.m2_matmat, Q)
    if backend != "numpy":
        moments.whitened_stats(W * 0.5)
    _, white, white_cpu = timed_cpu(moments.whitened_stats, W)
    return first, m2, m2_cpu, white, white_cpu


class _Table:
    """A markdown table printed row by row (long runs on a busy machine show partial results)."""

    def __init__(self, headers):
        self.n = len(headers)
        print(table(headers, []), flush=True)

    def row(self, values):
        print(table([""] * self.n, [values]).splitlines()[-1], flush=True)


def section_a(n, vocab, k, quick):
    corpus, X, t_sample = _corpus(n, vocab, k)
    print(f"\n### a. N = {n:,}, V = {vocab:,}, k = {k}, nnz = {X.nnz / 1e6:.1f}M (sampled in {t_sample:.1f} s)\n")
    Q = np.random.default_rng(0).standard_normal((X.shape[1], k))
    bare = [timed_cpu(lambda: X.T @ (X @ Q))[1:] for _ in range(3)]
    bare_wall, bare_cpu = min(b[0] for b in bare), min(b[1] for b in bare)
    print(f"One bare SciPy X.T @ (X @ Q), width {k}: {bare_wall:.2f} s wall, {bare_cpu:.2f} s CPU (best of 3)\n",
          flush=True)
    print("Per pass (warm; the first pass includes moving the corpus to the JAX device):\n")
    out = _Table(["backend", "first pass, wall (s)", f"m2 pass, width {k + 10}: wall (s)", "CPU (s)",
                  f"whitened pass, width {k}: wall (s)", "CPU (s)"])
    configs = [("SciPy, 1 thread", "numpy", 1), (f"SciPy, {os.cpu_count()} threads over row chunks", "numpy", None),
               ("Numba fused kernel, 1 thread", "numba", 1), (f"Numba fused kernel, {os.cpu_count()} threads", "numba", None),
               ("JAX on CPU (float64)", "jax", None)]
    for name, backend, threads in configs:
        out.row([name, *_pass_times(X, k, backend, threads)])
    print("\nWhole fit (moments + adaptive randomized whitening + TPM; no per-document theta):\n")
    out = _Table(["what", "wall (s)", "CPU (s)", "m2 passes", "x bare pass (wall)", "x bare pass (CPU)",
                  "mean L1 topic error"])
    for backend in ("numpy", "numba", "jax"):
        moments = CountMoments(X, alpha0=0.1 * k, backend=backend)  # first pass timed in the table above
        calls = {"n": 0}
        original = moments.m2_matmat

        def counted(Q, original=original, calls=calls):
            calls["n"] += 1
            return original(Q)

        moments.m2_matmat = counted
        est, seconds, cpu = timed_cpu(lda.spectral_from_moments, moments, k, 0.1 * k, seed=0)
        err = matched_l1(corpus.beta, est.params["beta"])
        out.row([f"lda fit, backend={backend}", seconds, cpu, calls["n"], seconds / bare_wall, cpu / bare_cpu, err])


_CHILD = r"""
import json, sys, time
backend = sys.argv[3]
if backend == "numpy-without-numba":  # an install without the [fast] extra: Numba cannot be imported
    sys.modules["numba"] = None
    backend = "numpy"
import numpy as np, scipy.sparse as sp
from _common import peak_rss_gb
from specinit.models import lda
X = sp.load_npz(sys.argv[1]); k = int(sys.argv[2]); mode = sys.argv[5]
options = {"tensor": {"alpha0": 0.1 * k, "em_sweeps": 0}, "tensor+sweeps": {"alpha0": 0.1 * k}, "default": {},
           "grid": {"method": "tpm"}}[mode]
base = peak_rss_gb()
t = time.perf_counter()
est = lda.spectral(X, k, doc_topics=False, seed=0, backend=backend, **options)
seconds = time.perf_counter() - t
np.save(sys.argv[4], est.params["beta"])
d = est.diagnostics
print(json.dumps({"fit": seconds, "rss_after_load": base, "input": (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**30,
                  "peak": peak_rss_gb(), "passes": int(d["m2_passes"]),
                  "stalled": int(np.sum(d.get("decomposition/stalled", 0))),
                  "tpm_iterations": int(np.sum(d.get("decomposition/n_iter", 0)))}))
"""


def _child(script, *args):
    """Run ``script`` in a fresh Python process (with this folder's ``_common`` importable); its last line as JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.path.dirname(os.path.abspath(__file__)),
                                                                     os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, check=True,
                         env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


#: Section b's fits: (backend, what). "tensor": alpha0 given, the spectral step alone (moments, whitening,
#: TPM); "tensor+sweeps": and the closing EM sweeps of the default; "default": lda.spectral(X, k) (anchor words
#: on the positive eigenspace, then the sweeps); "grid": method="tpm" without alpha0 (the alpha0 grid, then the
#: sweeps). Backend "numpy-without-numba": the NumPy backend in a process that cannot import Numba (an install
#: without the [fast] extra).
LARGE_FITS = [("numpy", "tensor"), ("numba", "tensor"), ("numpy", "tensor+sweeps"), ("numba", "tensor+sweeps"),
              ("numpy", "default")]


def section_b(n, vocab, k, fits=tuple(LARGE_FITS), replicas=1):
    """Fit time and peak RSS of a child process that loads the corpus and fits: ``VmHWM`` of the child is the
    kernel's high-water mark of its whole resident set (all threads, BLAS buffers, the corpus). ``replicas`` > 1
    stacks the sampled corpus that many times (N = 10M: the stacked corpus has the same moments, so its topic error
    is comparable, and sampling 10M documents on one core would take longer than the fit)."""
    corpus, X, t_sample = _corpus(n, vocab, k, seed=1)
    beta = corpus.beta
    del corpus
    # The stacked corpus's bare pass is that of one copy times the copies (its (N, k) product alone would take
    # 8 GB at N = 10M).
    bare = _bare_pass(X, k) * replicas
    if replicas > 1:
        X = sp.vstack([X] * replicas, format="csr")
    n_docs, nnz = X.shape[0], X.nnz
    with tempfile.TemporaryDirectory(prefix="bench_scale_") as tmp:
        path = os.path.join(tmp, "corpus.npz")
        sp.save_npz(path, X, compressed=False)
        del X
        copies, bare_of = ((f" ({replicas} copies of {n:,} documents)", " (copies x that of one copy)") if replicas > 1
                           else ("", ""))
        print(f"\n### b. N = {n_docs:,}{copies}, V = {vocab:,}, k = {k}, nnz = {nnz / 1e6:.1f}M (sampled in "
              f"{t_sample:.0f} s); one bare SciPy pass of width {k}{bare_of}: {bare:.1f} s; load average "
              f"{os.getloadavg()[0]:.1f}\n")
        out = _Table(["backend", "fit", "fit (s)", "x bare pass", "m2 passes", "TPM components given up / iterations",
                      "input CSR (GB)", "RSS after loading (GB)", "peak RSS of the process (GB)", "peak - input (GB)",
                      "mean L1 topic error"])
        for backend, what in fits:
            beta_path = os.path.join(tmp, f"beta_{backend}_{what}.npy")
            res = _child(_CHILD, path, k, backend, beta_path, what)
            err = matched_l1(beta, np.load(beta_path))
            out.row([backend, what, res["fit"], res["fit"] / bare, res["passes"],
                     f"{res['stalled']} / {res['tpm_iterations']}", res["input"], res["rss_after_load"], res["peak"],
                     res["peak"] - res["input"], err])


def _zero_partial(block, V, k):
    return np.zeros((V, k))


def section_c(sizes, vocab, k, block_rows, hmm_t, gmm_n):
    import dask.array as da
    from distributed import Client, LocalCluster

    from specinit.engine.backends.dask import reduce_blocks

    print(f"\n### c. Dask, V = {vocab:,}, k = {k}, blocks of {block_rows:,} documents, corpus persisted on the workers\n")
    rows = _Table(["N", "where", f"m2 pass, width {k + 10} (s)", "lda fit (s)", "reduction alone (s)"])
    corpora = {n: _corpus(n, vocab, k, seed=2)[1] for n in sizes}
    for n in sizes:
        X = corpora[n]
        Q = np.random.default_rng(0).standard_normal((vocab, k + 10))
        _, mem_pass = timed(CountMoments(X, alpha0=0.1 * k).m2_matmat, Q)
        _, mem_fit = timed(lda.spectral, X, k, alpha0=0.1 * k, doc_topics=False, seed=0)
        rows.row([n, "in memory (2 threads)", mem_pass, mem_fit, ""])
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            for n in sizes:
                X = corpora[n]
                blocks = [X[i : i + block_rows] for i in range(0, n, block_rows)]
                counts = da.concatenate([da.from_array(b, chunks=b.shape, asarray=False) for b in blocks]).persist()
                client.wait_for_workers(workers)
                moments = CountMoments(counts, alpha0=0.1 * k)
                Q = np.random.default_rng(0).standard_normal((vocab, k + 10))
                moments.m2_matmat(Q)
                _, dpass = timed(moments.m2_matmat, Q)
                _, dfit = timed(lda.spectral, counts, k, alpha0=0.1 * k, doc_topics=False, seed=0)
                _, red = timed(reduce_blocks, [counts], _zero_partial, vocab, k + 10)
                rows.row([n, f"Dask, {workers} worker process(es), {len(blocks)} blocks", dpass, dfit, red])
                del counts
    _section_c_hmm_gmm(hmm_t, gmm_n)


def _markov_chain(trans, T, seed):
    """States of a Markov chain started in state 0 (a compiled loop: the chain is sequential)."""
    import numba

    @numba.njit(cache=True)
    def run(cum, u):
        states = np.zeros(u.size, dtype=np.int64)
        for t in range(1, u.size):
            states[t] = min(np.searchsorted(cum[states[t - 1]], u[t]), cum.shape[0] - 1)
        return states

    return run(np.cumsum(trans, axis=1), np.random.default_rng(seed).random(T))


#: The HMM and GMM of sections c and e: 4 hidden states over 30 symbols; 4 components in 10 dimensions.
HMM_SYMBOLS = 30


def _hmm_gmm_data(hmm_t, gmm_n, seed):
    """One HMM sequence of ``hmm_t`` symbols (sticky transitions) and ``gmm_n`` points of a 4-component GMM, d = 10."""
    rng = np.random.default_rng(seed)
    k, V, d = 4, HMM_SYMBOLS, 10
    T = rng.dirichlet(np.full(k, 1.0), size=k) + 3 * np.eye(k)
    T /= T.sum(1, keepdims=True)
    O = rng.dirichlet(np.full(V, 0.3), size=k)
    states = _markov_chain(T, hmm_t, seed + 1)
    symbols = (np.cumsum(O, axis=1)[states] < rng.random(hmm_t)[:, None]).sum(axis=1)
    loc = 4 * rng.standard_normal((k, d))
    z = rng.choice(k, size=gmm_n, p=[0.1, 0.2, 0.3, 0.4])
    return symbols, loc[z] + rng.standard_normal((gmm_n, d))


def _section_c_hmm_gmm(hmm_t, gmm_n):
    import dask.array as da
    from distributed import Client, LocalCluster

    from specinit.models import gmm, hmm

    symbols, x = _hmm_gmm_data(hmm_t, gmm_n, 3)
    k, kg, d = 4, 4, x.shape[1]
    V = HMM_SYMBOLS
    print()
    rows = _Table(["model", "where", "fit (s)", "max difference to in memory"])
    ref_hmm, t_hmm = timed(hmm.spectral, symbols, k, V, seed=0)
    rows.row([f"HMM, T = {hmm_t:,}", "in memory", t_hmm, ""])
    ref_gmm, t_gmm = timed(gmm.spectral, x, kg, seed=0)
    rows.row([f"GMM, N = {gmm_n:,}, d = {d}", "in memory", t_gmm, ""])
    for workers in (1, 2):
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster):
            lazy_symbols = da.from_array(symbols, chunks=max(hmm_t // 8, 3)).persist()
            est, t = timed(hmm.spectral, lazy_symbols, k, V, seed=0)
            diff = np.abs(est.params["transition"] - ref_hmm.params["transition"]).max()
            rows.row([f"HMM, T = {hmm_t:,}", f"Dask, {workers} worker(s), 8 blocks", t, f"{diff:.1e}"])
            lazy_x = da.from_array(x, chunks=(max(gmm_n // 8, 2), -1)).persist()
            est, t = timed(gmm.spectral, lazy_x, kg, seed=0)
            diff = np.abs(est.params["loc"] - ref_gmm.params["loc"]).max()
            rows.row([f"GMM, N = {gmm_n:,}, d = {d}", f"Dask, {workers} worker(s), 8 blocks", t, f"{diff:.1e}"])


def section_d(run_gpu, n=1_000_000, vocab=50_000, k=100, replicas=10):
    """The device path on a GPU, against the CPU on the same machine in the same run.

    On the corpus of N = ``n`` documents: the passes one by one (placement of the corpus + first pass, one m2 pass
    of width k + 10, the whitened pass of width k; warm), the moment step (the passes the tensor fit makes: first,
    its m2 passes, whitened), the tensor fit (``alpha0 = 0.1 k``, no closing sweeps) cold and warm, the default
    call (anchor words + closing sweeps, all on the device) cold and warm with a profile of the warm one; then the
    corpus stacked ``replicas`` times (N = 10M at the defaults: sampling 10M documents takes minutes on one core;
    the stacked corpus has the same moments, so the topic error is comparable) with the kernels already compiled; last the float64 CPU fit (NumPy,
    every core) of the tensor path and of the default call."""
    headers = ["N", "nnz", "what", "device", "after compilation (s)", "incl. compilation (s)", "m2 passes",
               "mean L1 topic error"]
    if not run_gpu:
        print("\n### d. GPU\n")
        print(table(headers, [[f"{m:,}", "", "tensor fit", "not run: no GPU on this machine", "", "", "", ""]
                              for m in (n, n * replicas)]))
        return
    import cProfile
    import pstats

    import jax

    assert jax.devices()[0].platform != "cpu", "--gpu needs a JAX accelerator (pip install -e '.[gpu]')"
    gpu = jax.devices()[0].device_kind
    corpus, X, t_sample = _corpus(n, vocab, k, seed=4)
    print(f"\n### d. GPU: {gpu}, JAX {jax.__version__}; N = {n:,}, V = {vocab:,}, k = {k}, "
          f"nnz = {X.nnz / 1e6:.1f}M (sampled in {t_sample:.0f} s)\n", flush=True)
    out = _Table(headers)
    tensor = {"alpha0": 0.1 * k, "em_sweeps": 0}

    def error(est):
        return f"{matched_l1(corpus.beta, est.params['beta']):.4f}"

    def fit(data, **options):
        return timed(lda.spectral, data, k, doc_topics=False, seed=0, backend="jax", **options)

    nnz = f"{X.nnz / 1e6:.0f}M"
    (est, cold), (_, warm) = fit(X, **tensor), fit(X, **tensor)
    passes = int(est.diagnostics["m2_passes"])
    out.row([f"{n:,}", nnz, "tensor fit", gpu, warm, cold, passes, error(est)])
    first, m2, _, white, _ = _pass_times(X, k, "jax", None)
    out.row([f"{n:,}", nnz, "placement + first pass", gpu, first, "", "", ""])
    out.row([f"{n:,}", nnz, f"m2 pass, width {k + 10}", gpu, m2, "", "", ""])
    out.row([f"{n:,}", nnz, f"whitened pass, width {k}", gpu, white, "", "", ""])
    out.row([f"{n:,}", nnz, "moment step (first + m2 passes + whitened; placement included)", gpu,
             first + passes * m2 + white, "", passes, ""])
    est, cold = fit(X)
    profile = cProfile.Profile()
    profile.enable()
    _, warm = fit(X)
    profile.disable()
    out.row([f"{n:,}", nnz, "default call (anchor words + closing sweeps)", gpu, warm, cold,
             int(est.diagnostics["m2_passes"]), error(est)])
    stacked = sp.vstack([X] * replicas, format="csr")
    est, seconds = fit(stacked, **tensor)
    out.row([f"{stacked.shape[0]:,}", f"{stacked.nnz / 1e6:.0f}M", f"tensor fit (kernels compiled at N = {n:,})", gpu,
             seconds, "", int(est.diagnostics["m2_passes"]), error(est)])
    del stacked
    cpu = f"CPU: NumPy, {os.cpu_count()} threads"
    for what, options in (("tensor fit", tensor), ("default call (anchor words + closing sweeps)", {})):
        est, seconds = timed(lda.spectral, X, k, doc_topics=False, seed=0, backend="numpy", **options)
        out.row([f"{n:,}", nnz, what, cpu, seconds, "", int(est.diagnostics["m2_passes"]), error(est)])
    print("\nProfile of the warm default call on the GPU (host view: device work shows where the host waits):\n")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(30)


_FAMILY_CHILD = r"""
import json, sys, time, warnings, numpy as np
from _common import peak_rss_gb
what, path, k, n_symbols = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = np.load(path)
train = data["train"]
t = time.perf_counter()
if what == "hmm-specinit":
    from specinit.models import hmm
    est = hmm.spectral(train, k, n_symbols, seed=0)
    params = {"start": est.params["init"], "transition": est.params["transition"], "emission": est.params["emission"]}
elif what == "hmm-specinit-refine":
    from specinit.models import hmm
    est = hmm.refine(train, hmm.spectral(train, k, n_symbols, seed=0), max_iter=20, restarts=0)
    params = {"start": est.params["init"], "transition": est.params["transition"], "emission": est.params["emission"]}
elif what == "hmm-hmmlearn":
    from hmmlearn.hmm import CategoricalHMM
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CategoricalHMM(k, n_iter=20, tol=1e-7, random_state=0, n_features=n_symbols).fit(train[:, None])
    params = {"start": model.startprob_, "transition": model.transmat_, "emission": model.emissionprob_}
elif what == "gmm-specinit":
    from specinit.models import gmm
    est = gmm.spectral(train, k, seed=0)
    params = {"weights": est.params["weights"], "loc": est.params["loc"], "scale": np.full(k, float(est.params["scale"]))}
elif what == "gmm-specinit-refine":
    from specinit.models import gmm
    est = gmm.refine(train, gmm.spectral(train, k, seed=0), max_iter=20, split_merge=0)
    params = {"weights": est.params["weights"], "loc": est.params["loc"], "scale": np.full(k, float(est.params["scale"]))}
else:
    from sklearn.mixture import GaussianMixture
    model = GaussianMixture(k, covariance_type="spherical", max_iter=20, random_state=0).fit(train)
    params = {"weights": model.weights_, "loc": model.means_, "scale": np.sqrt(model.covariances_)}
seconds = time.perf_counter() - t
np.savez(path + "." + what + ".npz", **params)
print(json.dumps({"fit": seconds, "peak": peak_rss_gb()}))
"""


def _held_out_hmm(params, test, n_symbols):
    from hmmlearn.hmm import CategoricalHMM

    model = CategoricalHMM(params["transition"].shape[0], n_features=n_symbols)
    model.startprob_, model.transmat_, model.emissionprob_ = params["start"], params["transition"], params["emission"]
    return model.score(test[:, None]) / test.size


def _held_out_gmm(params, test):
    from sklearn.mixture import GaussianMixture

    k = params["weights"].size
    model = GaussianMixture(k, covariance_type="spherical")
    model.weights_, model.means_, model.covariances_ = params["weights"], params["loc"], params["scale"] ** 2
    model.precisions_cholesky_ = 1.0 / params["scale"]
    return model.score(test)


def section_e(n):
    """HMM (T = n symbols) and GMM (N = n points) fits in child processes, against hmmlearn and scikit-learn."""
    symbols, x = _hmm_gmm_data(n + n // 10, n + n // 10, 5)
    k, V, d = 4, HMM_SYMBOLS, x.shape[1]
    with tempfile.TemporaryDirectory(prefix="bench_scale_e_") as tmp:
        print(f"\n### e. HMM (one sequence, T = {n:,}, k = {k}, {V} symbols) and GMM (N = {n:,}, d = {d}, k = {k}); "
              f"held-out: the next {n // 10:,}; load average {os.getloadavg()[0]:.1f}\n")
        out = _Table(["model", "fit", "fit (s)", "peak RSS of the process (GB)", "input (GB)",
                      "held-out log-likelihood per observation"])
        jobs = [("hmm", symbols, ["hmm-specinit", "hmm-specinit-refine", "hmm-hmmlearn"]),
                ("gmm", x, ["gmm-specinit", "gmm-specinit-refine", "gmm-sklearn"])]
        names = {"hmm-specinit": "specinit hmm.spectral", "hmm-specinit-refine": "specinit spectral + 20 EM steps",
                 "hmm-hmmlearn": "hmmlearn CategoricalHMM, 20 Baum-Welch steps (random init)",
                 "gmm-specinit": "specinit gmm.spectral", "gmm-specinit-refine": "specinit spectral + 20 EM steps",
                 "gmm-sklearn": "scikit-learn GaussianMixture (spherical, k-means init, 20 EM steps)"}
        for model, values, fits in jobs:
            path = os.path.join(tmp, f"{model}.npz")
            np.savez(path, train=values[:n])
            for what in fits:
                res = _child(_FAMILY_CHILD, what, path, k, V)
                params = dict(np.load(f"{path}.{what}.npz"))
                score = (_held_out_hmm(params, values[n:], V) if model == "hmm" else _held_out_gmm(params, values[n:]))
                out.row([model.upper(), names[what], res["fit"], res["peak"], values[:n].nbytes / 2**30,
                         f"{score:.4f}"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sections", default="abcde")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--large-n", type=int, default=1_000_000)
    parser.add_argument("--gpu", action="store_true")
    parser.add_argument("--b-fits", default=",".join(f"{b}:{w}" for b, w in LARGE_FITS),
                        help="section b's fits, backend:what (what: tensor, tensor+sweeps, default, grid)")
    parser.add_argument("--b-replicas", type=int, default=1, help="section b: stack the sampled corpus this many times")
    parser.add_argument("--seq-n", type=int, default=10_000_000, help="HMM length T and GMM points N (sections c, e)")
    parser.add_argument("--c-sizes", default="50000,100000,200000", help="corpus sizes N of section c")
    args = parser.parse_args()
    print(f"Machine: {machine()}; load average at start {os.getloadavg()[0]:.1f} (shared with other jobs); "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    q = args.quick
    if "a" in args.sections:
        section_a(*(20_000, 5_000, 20) if q else (200_000, 20_000, 50), q)
    if "b" in args.sections:
        fits = [tuple(item.split(":")) for item in args.b_fits.split(",")]
        section_b(*(50_000, 10_000, 20) if q else (args.large_n, 50_000, 100), fits=fits,
                  replicas=args.b_replicas)
    if "c" in args.sections:
        if q:
            section_c([10_000, 20_000], 5_000, 20, 5_000, 100_000, 100_000)
        else:
            sizes = [int(n) for n in args.c_sizes.split(",")]
            section_c(sizes, 20_000, 50, max(sizes[0] // 2, 1), args.seq_n, args.seq_n)
    if "d" in args.sections:
        section_d(args.gpu, *(20_000, 5_000, 20, 2) if q else (args.large_n, 50_000, 100, 10))
    if "e" in args.sections:
        section_e(100_000 if q else args.seq_n)
    print(f"\npeak RSS of this process: {peak_rss_gb():.2f} GB")


if __name__ == "__main__":
    main()
