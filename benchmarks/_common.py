"""Shared helpers of the benchmark scripts: timing, peak memory, machine line, tables."""

from __future__ import annotations

import os
import platform
import resource
import sys
import time

import numpy as np
from scipy.optimize import linear_sum_assignment


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, NumPy {np.__version__}"


def timed(func, *args, **kwargs):
    start = time.perf_counter()
    out = func(*args, **kwargs)
    return out, time.perf_counter() - start


def peak_rss_gb() -> float:
    """Peak resident memory of this process so far, in GiB.

    Linux: ``VmHWM``, the high-water mark of this process's own address space (``ru_maxrss`` would carry the
    parent's peak over ``fork`` + ``exec``, so a benchmark's child process would report its parent's memory).
    Elsewhere ``ru_maxrss``.
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    scale = 2**30 if sys.platform == "darwin" else 2**20  # bytes on macOS, KiB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def matched_l1(reference: np.ndarray, estimate: np.ndarray) -> float:
    """Mean L1 distance between rows after Hungarian matching."""
    cost = np.abs(reference[:, None, :] - estimate[None, :, :]).sum(axis=-1)
    rows, cols = linear_sum_assignment(cost)
    return float(cost[rows, cols].mean())


def table(headers: list[str], rows: list[list]) -> str:
    def fmt(value):
        if isinstance(value, float):
            return f"{value:.3g}"
        return str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
