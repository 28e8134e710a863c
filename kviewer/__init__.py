"""kviewer: one window for GPU profiler traces (Nsight Systems, Nsight Compute, rocprof, PyTorch)."""

__version__ = "0.1.0"

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
