"""Human formatting of times and numbers for the views (no Qt)."""

from __future__ import annotations

import math


def format_duration(ns: float) -> str:
    """``1234`` -> ``1.234 µs``; three significant decimals in the largest fitting unit."""
    if ns is None or not math.isfinite(ns):
        return ""
    a = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def format_time(ns: float) -> str:
    """A point in time on the timeline (relative to the trace's first event)."""
    return format_duration(ns)


def format_count(value: float) -> str:
    if value is None or not math.isfinite(value):
        return ""
    a = abs(value)
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
