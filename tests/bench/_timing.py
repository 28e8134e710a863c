"""Timing helpers shared by the benchmark scripts (no timing asserts: figures go to BENCHMARKS.md)."""

from __future__ import annotations

import time
from typing import Callable


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fastest of ``repeat`` calls, in seconds (the least disturbed by other work)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
