"""Kernels grouped by name, as ``nsys stats --report cuda_gpu_kern_sum`` reports them.

The summary itself lives with every other duration summary in :mod:`kviewer.analysis.stats`.
"""

from __future__ import annotations

from kviewer.analysis.stats import SUMMARY_COLUMNS, kernel_summary

__all__ = ["SUMMARY_COLUMNS", "kernel_summary"]
