"""Loaders: a package per format family (torch/, ncu/, rocprof/, nsys), a registry that detects
formats by content, the trace cache (cache/) and the one decompression path (source); no Qt.

The names below load on first use (module ``__getattr__``, as :mod:`kviewer.core` does), so that
``kviewer.io.source`` or ``kviewer.io.cache`` can be imported without the registry and pandas.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kviewer.io.registry import CancelToken, LoaderSpec, detect, load, loaders

__all__ = ["CancelToken", "LoaderSpec", "detect", "load", "loaders"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("kviewer.io.registry"), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
