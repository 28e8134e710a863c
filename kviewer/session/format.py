"""Human formatting of times and numbers for the views (no Qt).

The formatters live in :mod:`kviewer.core.units`; they are imported on first use because importing
any ``kviewer.core`` module imports the package, which loads pandas, and the window must appear
without it (the loaders import it in the background).
"""

from __future__ import annotations

__all__ = [
    "FORMATTERS",
    "UNKNOWN",
    "format_bytes",
    "format_count",
    "format_duration",
    "format_count_int",
    "format_int",
    "format_number",
    "format_pct",
    "format_plain",
    "format_signed_duration",
    "format_signed_pct",
    "format_time",
    "format_value",
]

from collections.abc import Callable


#: how the GUI shows an unknown value: never 0
UNKNOWN = "—"


def format_duration(ns: float | None) -> str:
    """A duration with a unit chosen for it (ns, µs, ms, s); see :func:`kviewer.core.units.format_duration`.
    Unknown (None, NaN) is "—"."""
    from kviewer.core.units import format_duration as impl

    if ns is None or ns != ns:
        return UNKNOWN
    return impl(ns)


def format_count(value: float | None) -> str:
    """A count with an SI suffix (k, M, G, T); see :func:`kviewer.core.units.format_count`."""
    from kviewer.core.units import format_count as impl

    if value is None or value != value:
        return UNKNOWN
    return impl(value)


def format_signed_duration(ns: float | None) -> str:
    """A difference of durations: like :func:`format_duration` with a ``+`` on positive values."""
    from kviewer.core.units import format_signed_duration as impl

    if ns is None or ns != ns:
        return UNKNOWN
    return impl(ns)


def format_bytes(value: float | None) -> str:
    """A size in bytes with an SI prefix: ``213188`` -> ``213.19 kB``, ``24`` -> ``24 B``."""
    text = format_count(value)
    if text == UNKNOWN:
        return text
    return f"{text}B" if text[-1:].isalpha() else f"{text} B"


def format_pct(value: float | None) -> str:
    """A percentage (the header says "%"): ``12.345`` -> ``12.3``."""
    if value is None or value != value:
        return UNKNOWN
    return f"{float(value):.1f}"


def format_signed_pct(value: float | None) -> str:
    """A relative change: ``12.345`` -> ``+12.3%``."""
    if value is None or value != value:
        return UNKNOWN
    return f"{float(value):+.1f}%"


def format_int(value: float | None) -> str:
    """An identifier-like integer (device, stream, rank), without separators."""
    if value is None or value != value:
        return UNKNOWN
    return str(int(value))


def format_count_int(value: float | None) -> str:
    """A count with thousands separators: ``12345`` -> ``12,345``."""
    if value is None or value != value:
        return UNKNOWN
    return f"{int(value):,}"


def format_number(value: float | None) -> str:
    """A plain number: integers with separators from 10,000 on, fractions with two decimals."""
    if value is None or value != value:
        return UNKNOWN
    v = float(value)
    if v in (float("inf"), float("-inf")):
        return UNKNOWN
    if not v.is_integer():
        return f"{v:,.2f}"
    return f"{int(v):,}" if abs(v) >= 10000 else str(int(v))


def format_plain(value: float | None) -> str:
    """A number as Python writes it, every digit kept (query results of unknown meaning)."""
    if value is None or value != value:
        return UNKNOWN
    return str(value)


#: one formatter per unit (a column's ``kind``); every table of the app formats through these
FORMATTERS: dict[str, Callable[[float | None], str]] = {
    "time": format_duration,
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


def format_value(kind: str, value: float | None) -> str:
    """``value`` shown in the unit ``kind`` (a key of :data:`FORMATTERS`); unknown is "—"."""
    return FORMATTERS.get(kind, format_number)(value)


def format_time(ns: float | None) -> str:
    """A point in time on the timeline (relative to the trace's first event), to the
    microsecond: late in a long trace "8.261195 s", where a duration's three decimals would give
    every kernel of the second the same "8.261 s"."""
    if ns is None or ns != ns:
        return UNKNOWN
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.6f} s"
    return format_duration(ns)


def display_text(text: str) -> str:
    """Trace text with control and bidi characters made visible; see :func:`kviewer.core.text.display_text`."""
    from kviewer.core.text import display_text as impl

    return impl(text)


def xml_text(text: str) -> str:
    """Text with the characters XML 1.0 forbids escaped; see :func:`kviewer.core.text.xml_text`."""
    from kviewer.core.text import xml_text as impl

    return impl(text)
