"""The unified data model (no Qt, no I/O).

The names below are imported on first use (module ``__getattr__``, as napari's lazy_loader does):
importing ``kviewer.core.text`` or ``kviewer.core.names`` on the way to the first window must not
load pandas, which :mod:`kviewer.core.schema` and :mod:`kviewer.core.trace` need.
"""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
