"""The unified data model (no Qt, no I/O).

The names below are imported on first use (module ``__getattr__``, as napari's lazy_loader does):
importing ``kviewer.core.text`` or ``kviewer.core.names`` on the way to the first window must not
load pandas, which :mod:`kviewer.core.schema` and :mod:`kviewer.core.trace` need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kviewer.core.diagnostics import Diagnostic
    from kviewer.core.schema import TABLES, make_table, make_table_mapped
    from kviewer.core.trace import NcuCapture, Trace, TraceMeta

__all__ = ["TABLES", "Diagnostic", "NcuCapture", "Trace", "TraceMeta", "make_table", "make_table_mapped"]

#: public name -> the module that defines it
_LAZY = {
    "Diagnostic": "kviewer.core.diagnostics",
    "TABLES": "kviewer.core.schema",
    "make_table": "kviewer.core.schema",
    "make_table_mapped": "kviewer.core.schema",
    "NcuCapture": "kviewer.core.trace",
    "Trace": "kviewer.core.trace",
    "TraceMeta": "kviewer.core.trace",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
