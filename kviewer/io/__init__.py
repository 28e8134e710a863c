"""Loaders: a package per format family (torch/, ncu/, rocprof/, nsys), a registry that detects
formats by content, the trace cache (cache/) and the one decompression path (source); no Qt.

The names below load on first use (module ``__getattr__``, as :mod:`kviewer.core` does), so that
``kviewer.io.source`` or ``kviewer.io.cache`` can be imported without the registry and pandas.
"""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
