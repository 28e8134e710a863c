"""Human formatting of durations and counts, shared by the CLI, the report and the views."""

from __future__ import annotations

import math


def format_duration(ns: float | None) -> str:
    """``1234`` -> ``1.234 µs``: three decimals in the largest unit that fits; "" when unknown."""
    if ns is None or not math.isfinite(ns):
        return ""
    a = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def format_signed_duration(ns: float | None) -> str:
    """Like :func:`format_duration` with a ``+`` on positive values (deltas)."""
    text = format_duration(ns)
    return ("+" + text) if text and ns is not None and ns > 0 else text


def format_count(value: float | None) -> str:
    """``1.5e9`` -> ``1.50 G``; integers below 1000 as they are."""
    if value is None or not math.isfinite(value):
        return ""
    a = abs(value)
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{value / scale:.2f} {suffix}"
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.2f}"
