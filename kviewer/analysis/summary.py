"""Kernels grouped by name, as ``nsys stats --report cuda_gpu_kern_sum`` reports them."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kviewer.core import Trace

SUMMARY_COLUMNS = ["name", "count", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "time_pct"]
#: what :func:`kernel_summary` reads of a trace (a loader may read only this: kviewer.io.load's ``tables``)
SUMMARY_READS = {"kernels": ("name", "short_name", "dur")}


def kernel_summary(trace: Trace, by: str = "name") -> pd.DataFrame:
    """Kernels grouped by ``by`` (``name`` or ``short_name``).

    Columns: name, count, total_ns, avg_ns, med_ns, min_ns, max_ns, std_ns (sample standard
    deviation, 0 for a single instance, as nsys stats reports it) and time_pct (share of the total
    kernel time, percent). Sorted by total_ns descending, then name.
    """
    k = trace.kernels
    if not len(k):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith(("_pct", "avg_ns", "med_ns", "std_ns")) else "int64") for c in SUMMARY_COLUMNS}).astype({"name": object})
    col = k[by]
    # group by the category codes: hashing the names row by row costs (rows x name length),
    # seconds for a long name shared by a few thousand kernels
    categorical = isinstance(col.dtype, pd.CategoricalDtype) and all(isinstance(c, str) for c in col.cat.categories)
    names = col.array if categorical else col.astype(str).to_numpy()
    dur = k["dur"].to_numpy(dtype=np.int64)
    df = pd.DataFrame({"name": names, "dur": dur})
    g = df.groupby("name", sort=False, observed=True)["dur"]
    out = pd.DataFrame(
        {
            "count": g.size().astype(np.int64),
            "total_ns": g.sum().astype(np.int64),
            "avg_ns": g.mean().astype(np.float64),
            "med_ns": g.median().astype(np.float64),
            "min_ns": g.min().astype(np.int64),
            "max_ns": g.max().astype(np.int64),
            "std_ns": g.std(ddof=1).fillna(0.0).astype(np.float64),
        }
    )
    total = float(dur.sum())
    out["time_pct"] = out["total_ns"] / total * 100.0 if total > 0 else 0.0
    out = out.reset_index().rename(columns={"index": "name"})
    out["name"] = out["name"].astype(object)
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[SUMMARY_COLUMNS]
