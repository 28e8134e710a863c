"""kviewer: one window for GPU profiler traces (Nsight Systems, Nsight Compute, rocprof, PyTorch)."""

from __future__ import annotations

__version__ = "0.1.0"
