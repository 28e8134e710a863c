"""The unified data model (no Qt, no I/O)."""

from __future__ import annotations

from kviewer.core.diagnostics import Diagnostic
from kviewer.core.schema import TABLES, make_table, make_table_mapped
from kviewer.core.trace import NcuCapture, Trace, TraceMeta

__all__ = ["TABLES", "Diagnostic", "NcuCapture", "Trace", "TraceMeta", "make_table", "make_table_mapped"]
