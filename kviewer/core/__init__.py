"""The unified data model (no Qt, no I/O)."""

from __future__ import annotations

from kviewer.core.schema import TABLES, make_table, make_table_mapped
from kviewer.core.trace import Trace, TraceMeta

__all__ = ["TABLES", "Trace", "TraceMeta", "make_table", "make_table_mapped"]
