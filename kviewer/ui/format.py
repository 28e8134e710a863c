"""Human formatting of times and numbers for the views (no Qt)."""

from __future__ import annotations

from kviewer.core.units import format_count, format_duration

__all__ = ["format_count", "format_duration", "format_time"]


def format_time(ns: float) -> str:
    """A point in time on the timeline (relative to the trace's first event)."""
    return format_duration(ns)
