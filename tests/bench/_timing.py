"""Timing helpers shared by the benchmark scripts (no timing asserts: figures go to BENCHMARKS.md)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

#: one bytecode prefix for the measured child processes of a bench run, compiled by unmeasured runs first: this
#: machine sets PYTHONDONTWRITEBYTECODE, an installed kviewer has its .pyc files (bench_paint_first makes its own)
PYC = {"PYTHONPYCACHEPREFIX": str(Path(os.environ.get("TMPDIR", "/tmp")) / f"kv-bench-pyc-{os.getpid()}")}


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` calls, in seconds (the least disturbed by other work)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
