"""The one formatting module: how numbers and times are written for people, by the window, the
CLI's tables, the report and the fleet report (no Qt, no pandas).

Unknown is never 0; it is written one way per destination: :data:`UNKNOWN` ("—") wherever a
person reads it (the window, terminal tables, HTML/Markdown reports), :data:`UNKNOWN_CSV` (an
empty cell) in CSV and ``null`` in JSON. Every formatter here returns :data:`UNKNOWN` for None,
NaN and infinities.
"""

from __future__ import annotations

__all__ = [
    "FORMATTERS",
    "UNKNOWN",
    "UNKNOWN_CSV",
    "format_bytes",
    "format_count",
    "format_duration",
    "format_count_int",
    "format_int",
    "format_number",
    "format_pct",
    "format_percent",
    "format_plain",
    "format_ratio",
    "format_signed_duration",
    "format_signed_pct",
    "format_time",
    "format_util",
    "format_value",
    "display_text",
    "xml_text",
]

import math
from collections.abc import Callable

# trace text made safe for a destination (re-exported: views import their text helpers from here)
from kviewer.core.text import display_text, xml_text

#: how an unknown value is shown to a person (window, terminal table, report): never 0
UNKNOWN = "—"
#: how an unknown value is written in CSV: an empty cell
UNKNOWN_CSV = ""


def number(value: object) -> int | float | None:
    """``value`` (a table cell: a Python or numpy number, None, pandas NA, text...) as a number
    that can be shown, or None when it is unknown (None, NA, NaN, infinite) or not a number."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "iu":  # numpy integers: every digit
        return int(value)  # type: ignore[call-overload]
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def known(value: object) -> bool:
    """A value that can be shown (a number, not None, NA, NaN or infinite)."""
    return number(value) is not None


def format_duration(ns: object) -> str:
    """``1234`` -> ``1.234 µs``: three decimals in the largest unit that fits (ns, µs, ms, s)."""
    v = number(ns)
    if v is None:
        return UNKNOWN
    a = abs(v)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if a >= scale:
            return f"{v / scale:.3f} {unit}"
    return f"{v:.0f} ns"


def format_count(value: object) -> str:
    """A count with an SI suffix: ``1.5e9`` -> ``1.50 G``; below 1000 whole numbers as they are,
    fractions with two decimals (``2.5`` -> ``2.50``)."""
    v = number(value)
    if v is None:
        return UNKNOWN
    a = abs(v)
    for suffix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{v / scale:.2f} {suffix}"
    return f"{v:.0f}" if float(v).is_integer() else f"{v:.2f}"


def format_signed_duration(ns: object) -> str:
    """A difference of durations: like :func:`format_duration` with a ``+`` on positive values."""
    v = number(ns)
    text = format_duration(v)
    return "+" + text if v is not None and v > 0 else text


def format_bytes(value: object) -> str:
    """A size in bytes with an SI prefix: ``213188`` -> ``213.19 kB``, ``24`` -> ``24 B``."""
    text = format_count(value)
    if text == UNKNOWN:
        return text
    return f"{text}B" if text[-1:].isalpha() else f"{text} B"


def format_pct(value: object) -> str:
    """A percentage (the header says "%"): ``12.345`` -> ``12.3``."""
    v = number(value)
    return UNKNOWN if v is None else f"{float(v):.1f}"


def format_percent(value: object) -> str:
    """A percentage in running text: ``12.345`` -> ``12.3%``."""
    text = format_pct(value)
    return text if text == UNKNOWN else text + "%"


def format_signed_pct(value: object) -> str:
    """A relative change: ``12.345`` -> ``+12.3%``."""
    v = number(value)
    return UNKNOWN if v is None else f"{float(v):+.1f}%"


def format_util(value: object) -> str:
    """A utilisation (a fraction) as a percentage: ``0.4123`` -> ``41.2%``."""
    v = number(value)
    return UNKNOWN if v is None else f"{float(v) * 100:.1f}%"


def format_ratio(value: object) -> str:
    """A ratio (step SOL): ``0.5234`` -> ``0.52``."""
    v = number(value)
    return UNKNOWN if v is None else f"{float(v):.2f}"


def format_int(value: object) -> str:
    """An identifier-like integer (device, stream, rank), without separators."""
    v = number(value)
    return UNKNOWN if v is None else str(int(v))


def format_count_int(value: object) -> str:
    """A count with thousands separators: ``12345`` -> ``12,345``."""
    v = number(value)
    return UNKNOWN if v is None else f"{int(v):,}"


def format_number(value: object) -> str:
    """A plain number: integers with separators from 10,000 on, fractions with two decimals."""
    n = number(value)
    if n is None:
        return UNKNOWN
    v = float(n)
    if not v.is_integer():
        return f"{v:,.2f}"
    return f"{int(v):,}" if abs(v) >= 10000 else str(int(v))


def format_plain(value: object) -> str:
    """A number as Python writes it, every digit kept (query results of unknown meaning)."""
    try:
        missing = value is None or bool(value != value)  # None, NaN
    except TypeError:  # pandas NA: its comparisons are NA
        missing = True
    return UNKNOWN if missing else str(value)


#: one formatter per unit (a column's ``kind``); every table of the app formats through these
FORMATTERS: dict[str, Callable[[object], str]] = {
    "time": format_duration,
    "instant": lambda v: format_time(v),  # a point in time (a start or end), to the microsecond (defined below)
    "delta_time": format_signed_duration,
    "pct": format_pct,
    "delta_pct": format_signed_pct,
    "bytes": format_bytes,
    "flops": format_count,
    "si": format_count,
    "count": format_count_int,
    "int": format_int,
    "number": format_number,
    "plain": format_plain,
}


def format_value(kind: str, value: object) -> str:
    """``value`` shown in the unit ``kind`` (a key of :data:`FORMATTERS`); unknown is "—"."""
    return FORMATTERS.get(kind, format_number)(value)


def format_time(ns: object) -> str:
    """A point in time (on the trace's clock, :attr:`kviewer.core.trace.TraceMeta.clock`), to the
    microsecond: late in a long trace "8.261195 s", where a duration's three decimals would give
    every kernel of the second the same "8.261 s"."""
    v = number(ns)
    if v is None:
        return UNKNOWN
    if abs(v) >= 1e9:
        return f"{v / 1e9:.6f} s"
    return format_duration(v)
