"""rocprof's own kernel statistics (``rocprof --stats`` ``results.stats.csv``, rocprofv3
``<pid>_kernel_stats.csv``) opened as a kernel summary without a timeline.

Such a file has one row per kernel name (calls, total, average, share; rocprofv3 adds min, max
and standard deviation) and no dispatch times, so a Trace of it holds ``kernel_stats`` (the
file's own numbers, unknown where it says nothing) and no kernels: ``meta.summary_only`` is set
and ``meta.timeline_needs`` names the per-dispatch file of the same run that has the timeline.
Laying "Calls" out as fake kernels would invent start times, so that is never done.

API statistics (``results.hip_stats.csv``, ``*_hip_api_stats.csv``, ``*_hsa_api_stats.csv``,
``*_memory_copy_stats.csv``) share the header; their names (API calls, copy kinds) tell them
apart (:func:`counts_kernels`), and an API summary is still refused with the per-dispatch file
to open.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from kviewer.core import Trace, TraceMeta, schema
from kviewer.core.names import strip_kd
from kviewer.errors import LoadError
from kviewer.io.rocprof import common as rc

RECOGNISED = "rocprof kernel statistics CSV (--stats)"

#: names of API calls and copy kinds: a statistics file whose every name is one counts those, not kernels
_NOT_KERNEL = re.compile(r"^_{0,2}(hip|hsa|roctx|rccl|rocdecode|rocjpeg|amd_comgr)[A-Za-z0-9_]*$|^MEMORY_COPY_\w+$")


def counts_kernels(rows: list[rc.StatsRow]) -> bool:
    """Whether a statistics file summarises kernels, by its content: HIP/HSA API statistics
    (``results.hip_stats.csv``, ``*_hip_api_stats.csv``, ``*_hsa_api_stats.csv``) and copy
    statistics share the kernel summary's header, and only their names tell them apart (every
    name an API call or a copy kind). Decided on the rows, not the file name, so a renamed
    file opens the same. (rocprofv3's marker statistics, user range names, would pass for kernels.)"""
    return not rows or not all(_NOT_KERNEL.match(r.name.strip()) for r in rows)


def load_stats(path: Path, data: bytes, siblings: list[str]) -> Trace:
    """A summary-only Trace of a kernel statistics file (or the refusal of an API statistics file)."""
    rows = rc.parse_stats(data, path)
    if not counts_kernels(rows):
        raise rc.refuse_stats(path, data, siblings)
    if not rows:
        raise LoadError(path, "has a header but no kernel rows", RECOGNISED)
    n = len(rows)

    def col(key: str) -> np.ndarray:
        return np.array([r.values.get(key, math.nan) for r in rows], dtype=np.float64)

    total = np.array([r.total_ns for r in rows], dtype=np.float64)
    table = schema.make_table(
        "kernel_stats",
        n,
        {
            # the names the per-dispatch loaders give (without " [clone .kd]"), so a compare with
            # results.csv of the same run pairs them
            "name": [strip_kd(r.name) for r in rows],
            "count": np.array([r.calls for r in rows], dtype=np.int64),
            "total_ns": np.rint(total).astype(np.int64),
            "avg_ns": col("averagens"),
            "min_ns": col("minns"),
            "max_ns": col("maxns"),
            "std_ns": col("stddev") if any("stddev" in r.values for r in rows) else col("stddevns"),
            "time_pct": col("percentage"),
        },
    )
    # the file's order is rocprof's (total descending); keep it, ties by name as kviewer sorts
    order = np.lexsort((table["name"].astype(str).to_numpy(), -table["total_ns"].to_numpy()))
    table = table.take(order).reset_index(drop=True)
    beside = [s for s in siblings if (path.parent / s).exists()]
    needs = (
        f"no timeline: {path.name} is rocprof's per-name summary with no dispatch times; open {beside[0]} beside it for the timeline"
        if beside
        else f"no timeline: {path.name} is rocprof's per-name summary with no dispatch times; "
        "the timeline needs the per-dispatch trace of the same run (results.csv from rocprof --timestamp on, "
        "or rocprofv3 --kernel-trace's *_kernel_trace.csv)"
    )
    v3 = any("minns" in r.values for r in rows)
    meta = TraceMeta(
        path=str(path),
        source_format="rocprof-stats",
        format_label="rocprofv3 kernel statistics CSV" if v3 else "rocprof v1 kernel statistics CSV (--stats)",
        tool="rocprofv3" if v3 else "rocprof",
        summary_only=True,
        timeline_needs=needs,
    )
    return Trace(meta=meta, kernel_stats=table)
