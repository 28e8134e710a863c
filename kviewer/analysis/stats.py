"""The ``nsys stats`` reports over any trace: one place for every duration summary.

:func:`duration_stats` is the one summary of durations grouped by a key (count, total, mean,
median, min, max, sample standard deviation, share of the total) that ``kviewer summary``, the
per-rank summary and every report below use. A report is a :class:`Report`: the columns, in the
order, units and rounding of ``nsys stats --format csv`` (Nsight Systems 2025), and a function
that builds its rows from a :class:`~kviewer.core.Trace`. Values are rounded as nsys rounds them
(SQLite ``ROUND``: the stored double's exact value, halves away from zero), so a CSV written with each column's ``decimals`` is the
text nsys prints. Unknown values are None (printed empty), never 0.

A report that needs what a trace does not hold (an Nsight Compute report has no API calls; only
Nsight Systems records OS runtime calls) raises :class:`~kviewer.errors.ReportUnavailable` naming
the file, the report and what the file lacks.

The reports, for every format where the data exists:

- ``cuda_gpu_kern_sum``: kernels by name.
- ``cuda_gpu_mem_time_sum`` / ``cuda_gpu_mem_size_sum``: memcpy and memset by operation, by time
  and by size (MB = 10^6 bytes, as nsys).
- ``cuda_api_sum``: CUDA runtime and driver calls by name (nsys strips only four-digit ``_vNNNN``
  suffixes, and so does kviewer: :func:`kviewer.core.names.strip_api_version`); ``hip_api_sum``
  is its AMD twin (HIP API calls of rocprof and ROCm PyTorch traces, as rocprof's ``hip_api_stats``
  counts them).
- ``nvtx_sum``: NVTX ranges by style and range (``domain:text``; ``:text`` for the default domain,
  as nsys prints it); for PyTorch and rocprof the user annotations (``record_function``, roctx).
- ``cuda_gpu_trace``: every kernel, memcpy and memset, in start order.
- ``osrt_sum``: OS runtime calls (Nsight Systems only; not the profiler's own start/finish marks).

``cuda_api_sum`` and ``osrt_sum`` count calls by the name's string id, as nsys does: an export
holding both ``cudaMalloc`` and ``cudaMalloc_v3020`` prints two ``cudaMalloc`` rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Callable, Mapping

import numpy as np
import pandas as pd

from kviewer.core import Trace
from kviewer.core.names import short_name
from kviewer.errors import ReportUnavailable

#: the columns of :func:`duration_stats` (and of ``kviewer summary``)
SUMMARY_COLUMNS = ["name", "count", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "time_pct"]
_FLOAT_STATS = ("avg_ns", "med_ns", "std_ns", "time_pct")


def duration_stats(
    keys: pd.Series | np.ndarray | pd.Categorical, dur: np.ndarray, ids: np.ndarray | None = None
) -> pd.DataFrame:
    """Durations grouped by key: the columns of :data:`SUMMARY_COLUMNS`.

    std_ns is the sample standard deviation (0 for a single instance, as nsys stats reports it);
    med_ns the middle value (mean of the two middle ones for an even count); time_pct the share of
    the total of every group, percent. Sorted by total_ns descending, then name.

    ``ids``: the source's id of each key (nsys string ids, -1 unknown). Groups are then (id, key),
    as nsys stats groups by the id: two ids that print one name (cudaMalloc, cudaMalloc_v3020) are
    two rows; equal totals go in id order, as nsys's GROUP BY hands them to its ORDER BY.
    """
    dur = np.asarray(dur, dtype=np.int64)
    if not len(dur):
        return pd.DataFrame({c: pd.Series(dtype="float64" if c in _FLOAT_STATS else "int64") for c in SUMMARY_COLUMNS}).astype(
            {"name": object}
        )
    # group by category codes where the keys are categorical: hashing the names row by row costs
    # (rows x name length), seconds for a long name shared by a few thousand kernels
    if isinstance(keys, pd.Series):
        keys = keys.array if isinstance(keys.dtype, pd.CategoricalDtype) else keys.astype(str).to_numpy()
    df = pd.DataFrame({"name": keys, "dur": dur})
    by = ["name"]
    if ids is not None:
        df["id"] = np.asarray(ids, dtype=np.int64)
        by = ["id", "name"]
    g = df.groupby(by, sort=False, observed=True)["dur"]
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
    order = ["total_ns", *(["id"] if ids is not None else []), "name"]
    out = out.sort_values(order, ascending=[False] + [True] * (len(order) - 1), kind="stable").reset_index(drop=True)
    return out[SUMMARY_COLUMNS]


def kernel_summary(trace: Trace, by: str = "name") -> pd.DataFrame:
    """Kernels grouped by ``by`` (``name`` or ``short_name``): :func:`duration_stats` of their durations.

    A summary-only trace (a profiler's own statistics file, ``meta.summary_only``) has no
    durations to group: its ``kernel_stats`` rows are the summary, the file's own numbers, with
    unknown (NaN) where the file says nothing.
    """
    if trace.stats_only:
        return stats_file_summary(trace, by)
    k = trace.kernels
    col = k[by]
    categorical = isinstance(col.dtype, pd.CategoricalDtype) and all(isinstance(c, str) for c in col.cat.categories)
    names = col.array if categorical else col.astype(str).to_numpy()
    return duration_stats(names, k["dur"].to_numpy(dtype=np.int64))


def stats_file_summary(trace: Trace, by: str = "name") -> pd.DataFrame:
    """The :data:`SUMMARY_COLUMNS` of a summary-only trace, from its ``kernel_stats`` table.

    By ``short_name`` the rows of one short name are added up: count and total add, the mean is
    total / count, min/max are the extremes of what is known (unknown if any row's is), the median
    and the deviation are unknown (they cannot be rebuilt from per-row summaries).
    """
    ks = trace.kernel_stats
    out = pd.DataFrame({c: ks[c] for c in SUMMARY_COLUMNS if c in ks.columns})
    out["name"] = ks["name"].astype(str).to_numpy(dtype=object)
    if by == "short_name" and len(out):
        out["name"] = [short_name(n) for n in out["name"]]
        g = out.groupby("name", sort=False)
        agg = pd.DataFrame({
            "count": g["count"].sum(), "total_ns": g["total_ns"].sum(),
            # unknown when any row's is (pandas 2 has no skipna here: the groups with a NaN masked)
            "min_ns": g["min_ns"].min().mask(g["min_ns"].count() < g.size()),
            "max_ns": g["max_ns"].max().mask(g["max_ns"].count() < g.size()),
            "time_pct": g["time_pct"].sum(min_count=1),
        })
        agg["avg_ns"] = agg["total_ns"] / agg["count"].where(agg["count"] > 0)
        agg["med_ns"] = np.nan
        agg["std_ns"] = np.nan
        out = agg.reset_index()
    out = out.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    return out[SUMMARY_COLUMNS]


# ---------------------------------------------------------------------------------------------
# reports


@dataclass(frozen=True)
class Column:
    """One column of a report: its header as nsys prints it and how many decimals (None: integer or text)."""

    header: str
    decimals: int | None = None
    text: bool = False


@dataclass(frozen=True)
class Report:
    name: str
    title: str
    columns: tuple[Column, ...]
    build: Callable[[Trace], pd.DataFrame]
    reads: Mapping[str, tuple[str, ...]] | None = None
    """what the report reads of a trace (:func:`kviewer.io.load`'s ``tables``); None: everything"""

    @property
    def headers(self) -> list[str]:
        return [c.header for c in self.columns]

    def run(self, trace: Trace) -> pd.DataFrame:
        """The report's rows: the columns in nsys's order, values rounded as nsys prints them."""
        df = self.build(trace)
        df = df[self.headers].copy()
        for c in self.columns:
            if c.decimals is not None:
                df[c.header] = sql_round(df[c.header].to_numpy(dtype=np.float64), c.decimals)
        return df.reset_index(drop=True)


def sql_round(x: np.ndarray, decimals: int) -> np.ndarray:
    """Round as SQLite's ROUND (and so nsys stats): the exact value of each double to ``decimals``
    places, halves away from zero; NaN stays NaN.

    numpy rounds half to even, and ``floor(x * 10**d + 0.5)`` rounds the product instead of the
    number: 694122.85 is stored as 694122.84999..., which nsys prints as 694122.8, while 12.25 is
    exact and goes up to 12.3. Only values whose scaled product lies next to a half are decided
    exactly (with :mod:`decimal`), so a long column costs no more than a numpy pass.
    """
    x = np.asarray(x, dtype=np.float64)
    scale = 10.0**decimals
    with np.errstate(invalid="ignore"):
        y = np.abs(x) * scale
        out = np.sign(x) * np.floor(y + 0.5) / scale
        near = np.isfinite(y) & (np.abs(y - np.floor(y) - 0.5) <= 1e-7 + y * 1e-15)
    step = Decimal(1).scaleb(-decimals)
    for i in np.flatnonzero(near):
        out[i] = float(Decimal(float(x[i])).quantize(step, rounding=ROUND_HALF_UP))  # half up: away from zero
    return out


def _summary_columns(count: str, key: str, *extra: str) -> tuple[Column, ...]:
    return (
        Column("Time (%)", 1), Column("Total Time (ns)"), Column(count), Column("Avg (ns)", 1), Column("Med (ns)", 1),
        Column("Min (ns)"), Column("Max (ns)"), Column("StdDev (ns)", 1), *(Column(e, text=True) for e in extra),
        Column(key, text=True),
    )  # fmt: skip


def _as_nsys_summary(stats: pd.DataFrame, count: str, key: str) -> pd.DataFrame:
    return stats.rename(
        columns={"time_pct": "Time (%)", "total_ns": "Total Time (ns)", "count": count, "avg_ns": "Avg (ns)",
                 "med_ns": "Med (ns)", "min_ns": "Min (ns)", "max_ns": "Max (ns)", "std_ns": "StdDev (ns)", "name": key}
    )  # fmt: skip


def _lacks(trace: Trace, report: str, what: str) -> ReportUnavailable:
    return ReportUnavailable(trace.meta.path, report, what)


def _is_amd(trace: Trace) -> bool:
    """HIP rather than CUDA: the source is rocprof or the trace's GPUs are AMD's."""
    vendors = set(trace.devices["vendor"].astype(str)) if len(trace.devices) else set()
    return trace.meta.source_format.startswith("rocprof") or "AMD" in vendors


def _kern_sum(trace: Trace) -> pd.DataFrame:
    if not len(trace.kernels) and not (trace.stats_only and len(trace.kernel_stats)):
        raise _lacks(trace, "cuda_gpu_kern_sum", "no GPU kernels")
    return _as_nsys_summary(kernel_summary(trace), "Instances", "Name")


def _gpu_ops(trace: Trace, report: str) -> pd.DataFrame:
    ops = trace.gpu_ops
    if not len(ops):
        what = "no memory copies or sets (Nsight Compute profiles kernels only)" if _serialised(trace) else "no memory copies or sets"
        raise _lacks(trace, report, what)
    return ops


def _mem_time_sum(trace: Trace) -> pd.DataFrame:
    ops = _gpu_ops(trace, "cuda_gpu_mem_time_sum")
    return _as_nsys_summary(duration_stats(ops["name"], ops["dur"].to_numpy()), "Count", "Operation")


def _mem_size_sum(trace: Trace) -> pd.DataFrame:
    ops = _gpu_ops(trace, "cuda_gpu_mem_size_sum")
    b = ops["bytes"].to_numpy(dtype=np.int64)
    known = b >= 0
    if not known.any():
        raise _lacks(trace, "cuda_gpu_mem_size_sum", "no sizes of its memory copies or sets")
    names = ops["name"].array[known] if isinstance(ops["name"].dtype, pd.CategoricalDtype) else ops["name"].to_numpy()[known]
    s = duration_stats(names, b[known])  # the same statistics, over bytes
    mb = 1e6  # nsys's MB is 10^6 bytes
    return pd.DataFrame(
        {"Total (MB)": s["total_ns"] / mb, "Count": s["count"], "Avg (MB)": s["avg_ns"] / mb, "Med (MB)": s["med_ns"] / mb,
         "Min (MB)": s["min_ns"] / mb, "Max (MB)": s["max_ns"] / mb, "StdDev (MB)": s["std_ns"] / mb, "Operation": s["name"]}
    )  # fmt: skip


def _slices(trace: Trace, categories: list[str]) -> pd.DataFrame:
    c = trace.cpu_slices
    return c[c["category"].isin(categories)]


def _by_name_id(calls: pd.DataFrame) -> pd.DataFrame:
    """API or OS runtime calls summarised as nsys does: by the name's string id, printed by name."""
    return duration_stats(calls["name"].astype(str).to_numpy(), calls["dur"].to_numpy(), ids=calls["name_id"].to_numpy())


def _api_sum(trace: Trace, report: str, hip: bool) -> pd.DataFrame:
    # CUDA: runtime and driver calls, as nsys; HIP: the HIP API (HSA is the layer under it)
    api = _slices(trace, ["runtime"] if hip else ["runtime", "driver"])
    if not len(api):
        raise _lacks(trace, report, f"no {'HIP' if hip else 'CUDA'} API calls")
    amd = _is_amd(trace)
    if amd != hip:
        other = "hip_api_sum" if amd else "cuda_api_sum"
        raise _lacks(trace, report, f"no {'HIP' if hip else 'CUDA'} API calls (it traced {'AMD' if amd else 'NVIDIA'} GPUs: "
                     f"--report {other})")
    return _as_nsys_summary(_by_name_id(api), "Num Calls", "Name")


_NVTX_STYLE = {"push_pop": "PushPop", "start_end": "StartEnd"}


def _nvtx_sum(trace: Trace) -> pd.DataFrame:
    nvtx = _slices(trace, ["nvtx"])
    if len(nvtx):
        style = nvtx["style"].astype(str).map(lambda s: _NVTX_STYLE.get(s, "")).to_numpy(dtype=object)
        # nsys names a range "domain:text"; kviewer's name already carries a named domain
        name = nvtx["name"].astype(str).to_numpy(dtype=object)
        default = nvtx["domain"].astype(str).to_numpy(dtype=object) == ""
        rng = np.where(default, ":" + name, name)
    else:
        # PyTorch record_function / rocprof roctx ranges: the user's annotations of the host code
        nvtx = _slices(trace, ["annotation"])
        if not len(nvtx):
            raise _lacks(trace, "nvtx_sum", "no NVTX ranges or user annotations")
        style = np.full(len(nvtx), "", dtype=object)  # the source does not say
        rng = nvtx["name"].astype(str).to_numpy(dtype=object)
    # grouped by (style, range), as nsys; the share is of every range's time
    dur = nvtx["dur"].to_numpy(dtype=np.int64)
    parts = []
    for one in pd.unique(style):
        mine = style == one
        part = duration_stats(rng[mine], dur[mine])
        part.insert(0, "Style", one)
        parts.append(part)
    s = pd.concat(parts, ignore_index=True)
    total = float(dur.sum())
    s["time_pct"] = s["total_ns"] / total * 100.0 if total > 0 else 0.0
    s = s.sort_values(["total_ns", "name", "Style"], ascending=[False, True, True], kind="stable")
    return _as_nsys_summary(s, "Instances", "Range")


def _osrt_sum(trace: Trace) -> pd.DataFrame:
    osrt = _slices(trace, ["osrt"])
    if not len(osrt):
        raise _lacks(trace, "osrt_sum", "no OS runtime calls (only Nsight Systems traces them, with --trace osrt)")
    return _as_nsys_summary(_by_name_id(osrt), "Num Calls", "Name")


def _serialised(trace: Trace) -> bool:
    k = trace.kernels
    return bool(len(k)) and bool(k["serialised"].all())


_TRACE_COLUMNS = (
    Column("Start (ns)"), Column("Duration (ns)"), Column("CorrId"), Column("GrdX"), Column("GrdY"), Column("GrdZ"),
    Column("BlkX"), Column("BlkY"), Column("BlkZ"), Column("Reg/Trd"), Column("StcSMem (MB)", 3), Column("DymSMem (MB)", 3),
    Column("Bytes (MB)", 3), Column("Throughput (MB/s)", 3), Column("SrcMemKd", text=True), Column("DstMemKd", text=True),
    Column("Device", text=True), Column("Ctx"), Column("GreenCtx"), Column("Strm"), Column("Name", text=True),
)  # fmt: skip


def _known(values: pd.Series) -> pd.Series:
    """Integers with the schema's -1 (unknown) as missing (nullable Int64, no Python object per
    value), for an integer column that may be empty."""
    v = values.to_numpy(dtype=np.int64)
    return pd.Series(pd.arrays.IntegerArray(v, v < 0), index=values.index)


def _unknown(index: pd.Index) -> pd.Series:
    """An integer column nsys leaves empty on every row (nullable Int64, all missing)."""
    return pd.Series(pd.arrays.IntegerArray(np.zeros(len(index), dtype=np.int64), np.ones(len(index), dtype=bool)), index=index)


def _device_labels(trace: Trace, device: pd.Series) -> np.ndarray:
    """``NAME (id)`` as nsys prints the device; unknown devices empty."""
    names = {int(i): str(n) for i, n in zip(trace.devices["id"], trace.devices["name"])} if len(trace.devices) else {}
    d = device.to_numpy(dtype=np.int64)
    ids, at = np.unique(d, return_inverse=True)
    labels = [(f"{names[int(u)]} ({int(u)})" if names.get(int(u)) else f"({int(u)})") if u >= 0 else "" for u in ids.tolist()]
    return np.asarray(labels, dtype=object)[at.reshape(-1)] if len(d) else np.array([], dtype=object)


def _gpu_trace(trace: Trace) -> pd.DataFrame:
    k, ops = trace.kernels, trace.gpu_ops
    if not len(k) and not len(ops):
        raise _lacks(trace, "cuda_gpu_trace", "no GPU kernels, memory copies or sets")
    if _serialised(trace):
        raise _lacks(trace, "cuda_gpu_trace", "no real start times (Nsight Compute replays each kernel alone and lays them end to end)")
    none = _unknown(k.index)
    mb = 1e6
    shared = k["shared_mem"].to_numpy(dtype=np.int64)
    dynamic = k["dynamic_shared_mem"].to_numpy(dtype=np.int64)
    split = (shared >= 0) & (dynamic >= 0)
    kern = pd.DataFrame(
        {
            "Start (ns)": k["start"], "Duration (ns)": k["dur"], "CorrId": _known(k["correlation"]),
            "GrdX": _known(k["grid_x"]), "GrdY": _known(k["grid_y"]), "GrdZ": _known(k["grid_z"]),
            "BlkX": _known(k["block_x"]), "BlkY": _known(k["block_y"]), "BlkZ": _known(k["block_z"]),
            "Reg/Trd": _known(k["registers"]),
            "StcSMem (MB)": np.where(split, (shared - dynamic) / mb, np.nan), "DymSMem (MB)": np.where(split, dynamic / mb, np.nan),
            "Bytes (MB)": np.nan, "Throughput (MB/s)": np.nan, "SrcMemKd": "", "DstMemKd": "",
            "Device": _device_labels(trace, k["device"]), "Ctx": _known(k["context"]), "GreenCtx": none, "Strm": _known(k["stream"]),
            "Name": k["name"].astype(str),
        }
    )  # fmt: skip
    nb = ops["bytes"].to_numpy(dtype=np.int64)
    dur = ops["dur"].to_numpy(dtype=np.int64)
    # nsys computes bytes * (1000000000 / duration) in SQLite integers: whole divisions of a second
    # first (8192 B in 1344 ns: 8192 * 744047 B/s = 6095.233 MB/s, not 6095.238); no time, no rate
    per_second = np.where(dur > 0, 1_000_000_000 // np.where(dur > 0, dur, 1), 0)
    throughput = np.where((nb >= 0) & (dur > 0), nb.astype(np.float64) * per_second / mb, np.nan)  # no int64 overflow
    none = _unknown(ops.index)
    memset = (ops["kind"] == "memset").to_numpy()
    mem = pd.DataFrame(
        {
            "Start (ns)": ops["start"], "Duration (ns)": ops["dur"], "CorrId": _known(ops["correlation"]),
            "GrdX": none, "GrdY": none, "GrdZ": none, "BlkX": none, "BlkY": none, "BlkZ": none, "Reg/Trd": none,
            "StcSMem (MB)": np.nan, "DymSMem (MB)": np.nan,
            "Bytes (MB)": np.where(nb >= 0, nb / mb, np.nan), "Throughput (MB/s)": throughput,
            # nsys prints a memset's memory kind under SrcMemKd
            "SrcMemKd": np.where(memset, ops["dst_kind"].astype(str), ops["src_kind"].astype(str)),
            "DstMemKd": np.where(memset, "", ops["dst_kind"].astype(str)),
            "Device": _device_labels(trace, ops["device"]), "Ctx": _known(ops["context"]), "GreenCtx": none,
            "Strm": _known(ops["stream"]), "Name": ops["name"].astype(str),
        }
    )  # fmt: skip
    out = pd.concat([kern, mem], ignore_index=True)
    return out.sort_values("Start (ns)", kind="stable")


def _gpu_metrics(trace: Trace) -> pd.DataFrame:
    """Sampled GPU metrics, one row per GPU and metric, as ``nsys recipe gpu_metric_util_sum``
    writes its ``rank_stats.csv`` (Nsight Systems has no ``nsys stats`` report for them): the
    samples of the capture (time >= its start, as the recipe counts them), sample standard
    deviation, linear quartiles."""
    s = trace.gpu_samples
    if not len(s):
        raise _lacks(trace, "gpu_metrics", "no GPU metrics samples (record with nsys profile --gpu-metrics-devices=all)")
    s = s[s["t"].to_numpy() >= 0]
    g = s.groupby(["device", "metric"], observed=True, sort=True)["value"]
    q = g.quantile(np.array([0.25, 0.5, 0.75])).unstack()
    out = pd.DataFrame({
        "Count": g.size().astype(np.int64), "Mean": g.mean(), "Std": g.std(ddof=1), "Min": g.min(),
        "Q1": q[0.25], "Median": q[0.5], "Q3": q[0.75], "Max": g.max(), "Sum": g.sum(),
    }).reset_index()
    out["GPU ID"] = out["device"].astype(np.int64)
    out["Metric Name"] = out["metric"].astype(str)
    ranks = trace.meta.ranks
    out["Rank"] = ranks[0] if len(ranks) == 1 else 0
    return out


#: what the reports read: kernel names and times; memory operations; every GPU activity row
_KERN_SUM_READS = {"kernels": ("name", "short_name", "dur")}
_MEM_SUM_READS = {"gpu_ops": ("name", "dur", "bytes"), "kernels": ("serialised",)}
_TRACE_READS = {
    "kernels": ("start", "dur", "correlation", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "registers",
                "shared_mem", "dynamic_shared_mem", "device", "context", "stream", "name", "serialised"),
    "gpu_ops": ("start", "dur", "correlation", "bytes", "kind", "src_kind", "dst_kind", "device", "context", "stream", "name"),
    "devices": ("id", "name"),
}  # fmt: skip

REPORTS: dict[str, Report] = {
    r.name: r
    for r in (
        Report("cuda_gpu_kern_sum", "CUDA GPU Kernel Summary", _summary_columns("Instances", "Name"), _kern_sum, _KERN_SUM_READS),
        Report("cuda_gpu_mem_time_sum", "CUDA GPU MemOps Summary (by Time)", _summary_columns("Count", "Operation"), _mem_time_sum,
               _MEM_SUM_READS),
        Report(
            "cuda_gpu_mem_size_sum",
            "CUDA GPU MemOps Summary (by Size)",
            (Column("Total (MB)", 3), Column("Count"), Column("Avg (MB)", 3), Column("Med (MB)", 3), Column("Min (MB)", 3),
             Column("Max (MB)", 3), Column("StdDev (MB)", 3), Column("Operation", text=True)),
            _mem_size_sum,
            _MEM_SUM_READS,
        ),  # fmt: skip
        Report("cuda_api_sum", "CUDA API Summary", _summary_columns("Num Calls", "Name"), lambda t: _api_sum(t, "cuda_api_sum", hip=False)),
        Report("hip_api_sum", "HIP API Summary", _summary_columns("Num Calls", "Name"), lambda t: _api_sum(t, "hip_api_sum", hip=True)),
        Report("nvtx_sum", "NVTX Range Summary", _summary_columns("Instances", "Range", "Style"), _nvtx_sum),
        Report("cuda_gpu_trace", "CUDA GPU Trace", _TRACE_COLUMNS, _gpu_trace, _TRACE_READS),
        Report("osrt_sum", "OS Runtime Summary", _summary_columns("Num Calls", "Name"), _osrt_sum),
        Report(
            "gpu_metrics",
            "GPU Metric Utilization Summary (as nsys recipe gpu_metric_util_sum)",
            (Column("GPU ID"), Column("Metric Name", text=True), Column("Count"), Column("Mean", 1), Column("Std", 1),
             Column("Min", 1), Column("Q1", 1), Column("Median", 1), Column("Q3", 1), Column("Max", 1), Column("Sum", 1),
             Column("Rank")),
            _gpu_metrics,
            {"gpu_samples": ()},
        ),  # fmt: skip
    )
}


def report_reads(names: list[str]) -> dict[str, tuple[str, ...]] | None:
    """What reports ``names`` read of a trace together (:func:`kviewer.io.load`'s ``tables``),
    None when one of them reads everything: a file is then read once for all of them."""
    out: dict[str, tuple[str, ...]] = {}
    for name in names:
        reads = REPORTS[name].reads
        if reads is None:
            return None
        for table, columns in reads.items():
            out[table] = tuple(dict.fromkeys(out.get(table, ()) + tuple(columns)))
    return out


def run_report(trace: Trace, name: str) -> pd.DataFrame:
    """The rows of report ``name`` (one of :data:`REPORTS`) for ``trace``.

    Raises
    ------
    KeyError
        ``name`` is not a report.
    ReportUnavailable
        The trace lacks what the report needs (the error says what).
    """
    return REPORTS[name].run(trace)
