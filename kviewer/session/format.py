"""Human formatting of times and numbers for the views (no Qt).

The formatters live in :mod:`kviewer.core.units`; they are imported on first use because importing
any ``kviewer.core`` module imports the package, which loads pandas, and the window must appear
without it (the loaders import it in the background).
"""

from __future__ import annotations

__all__ = ["UNKNOWN", "format_count", "format_duration", "format_time"]


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
