"""Kernels grouped by name, as ``nsys stats --report cuda_gpu_kern_sum`` reports them.

The summary itself lives with every other duration summary in :mod:`kviewer.analysis.stats`.
"""

from __future__ import annotations

from kviewer.analysis.stats import SUMMARY_COLUMNS, kernel_summary

#: what :func:`kernel_summary` reads of a trace (a loader may read only this: kviewer.io.load's ``tables``)
SUMMARY_READS = {"kernels": ("name", "short_name", "dur")}

__all__ = ["SUMMARY_COLUMNS", "SUMMARY_READS", "kernel_summary"]
