"""Two kernel summaries side by side, by name: the compare for a summary-only file.

A profiler's own statistics file (rocprof ``--stats``) has no kernels, launch shapes or steps,
so :func:`kviewer.analysis.compare.compare` has nothing to match on; what both sides do have is
:func:`kviewer.analysis.stats.kernel_summary` (name, calls, total). This joins the two summaries
on the name (like with like: the same name, nothing fuzzier); a name on one side only is kept
and marked, never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kviewer.analysis.stats import kernel_summary
from kviewer.core import Trace

COLUMNS = ["name", "status", "count_a", "count_b", "total_a_ns", "total_b_ns", "delta_ns", "ratio", "avg_a_ns", "avg_b_ns"]


@dataclass
class SummaryCompare:
    table: pd.DataFrame
    """:data:`COLUMNS`, by the larger total descending; counts/totals of a missing side are NaN"""
    total_a_ns: int
    total_b_ns: int
    only_a: int
    only_b: int

    @property
    def slower_pct(self) -> float:
        """B's kernel time over A's, in % above A (negative: faster); NaN when A has none."""
        return (self.total_b_ns / self.total_a_ns - 1.0) * 100.0 if self.total_a_ns > 0 else float("nan")


def compare_summaries(a: Trace, b: Trace, by: str = "name") -> SummaryCompare:
    sa = kernel_summary(a, by=by)[["name", "count", "total_ns", "avg_ns"]]
    sb = kernel_summary(b, by=by)[["name", "count", "total_ns", "avg_ns"]]
    m = sa.merge(sb, on="name", how="outer", suffixes=("_a", "_b"), indicator=True, sort=False)
    status = m["_merge"].map({"both": "both", "left_only": "only_a", "right_only": "only_b"}).astype(str)
    ta = m["total_ns_a"].astype(np.float64)
    tb = m["total_ns_b"].astype(np.float64)
    out = pd.DataFrame({
        "name": m["name"].astype(object),
        "status": status.to_numpy(dtype=object),
        "count_a": m["count_a"].astype(np.float64),
        "count_b": m["count_b"].astype(np.float64),
        "total_a_ns": ta,
        "total_b_ns": tb,
        "delta_ns": tb - ta,
        "ratio": tb / ta.where(ta > 0),
        "avg_a_ns": m["avg_ns_a"].astype(np.float64),
        "avg_b_ns": m["avg_ns_b"].astype(np.float64),
    })
    key = np.fmax(ta.fillna(-1).to_numpy(), tb.fillna(-1).to_numpy())
    out = out.iloc[np.lexsort((out["name"].astype(str).to_numpy(), -key))].reset_index(drop=True)
    return SummaryCompare(
        out[COLUMNS],
        int(sa["total_ns"].sum()),
        int(sb["total_ns"].sum()),
        int((status == "only_a").sum()),
        int((status == "only_b").sum()),
    )
