"""Nsight Compute: ``.ncu-rep`` reports (:mod:`.report`) and ``ncu --csv`` exports (:mod:`.csv_export`), sharing :mod:`.common`."""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
