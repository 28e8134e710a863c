"""Columns of the kernel table, per instance or grouped by name, as numpy arrays (no Qt).

The Qt model (:mod:`kviewer.ui.kernel_table`) is a thin adapter over these: it never holds a
Python object per row. Sorting and filtering produce index arrays into these columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kviewer.session.filterexpr import FilterColumn
from kviewer.session.format import UNKNOWN, format_count, format_duration, format_time

if TYPE_CHECKING:
    from kviewer.session.tracks import TraceTracks

#: human headers for measured / modelled columns (shown only when some value is known)
METRIC_HEADERS = {
    "bound": "bound",
    "counters": "counters",
    "t_sol_ns": "SOL time",
    "sol_pct": "% of SOL",
    "sol_status": "SOL status",
    "model_flops": "model FLOPs",
    "model_bytes": "model bytes",
    "flops_fp64": "FP64 FLOPs",
    "flops_fp32": "FP32 FLOPs",
    "flops_fp16": "FP16 FLOPs",
    "flops_tensor": "tensor FLOPs",
    "dram_bytes": "DRAM bytes",
    "dram_read_bytes": "DRAM read",
    "dram_write_bytes": "DRAM write",
    "sm_throughput_pct": "SM %",
    "mem_throughput_pct": "memory %",
    "dram_throughput_pct": "DRAM %",
    "l1_throughput_pct": "L1 %",
    "l2_throughput_pct": "L2 %",
    "tensor_pipe_pct": "tensor pipe %",
    "achieved_occupancy_pct": "achieved occ. %",
    "theoretical_occupancy_pct": "theor. occ. %",
    "sm_clock_hz": "SM clock",
    "dram_clock_hz": "DRAM clock",
}
ALIASES = {
    "duration": "dur", "time": "dur", "regs": "registers", "reg": "registers", "smem": "shared_mem",
    "shared": "shared_mem", "grid_size": "grid", "block_size": "block", "mean": "avg", "average": "avg",
    "calls": "count", "n": "count", "median": "med", "gpu": "device", "kernel": "name",
    "short": "short_name", "percent": "pct", "time_pct": "pct", "latency": "launch_latency",
}


@dataclass
class Col:
    """One table column: what to show, how to sort, what the filter sees."""

    key: str
    header: str
    kind: str
    """time | number | int | text | pct | bytes | flops | shape"""
    values: np.ndarray
    """numbers, or codes into ``categories`` for text"""
    categories: Sequence[str] | None = None
    sort_key: np.ndarray | None = None
    display: Callable[[int], str] | None = None
    tooltip: Callable[[int], str] | None = None
    missing_int: bool = False

    def key_for_sort(self) -> np.ndarray:
        return self.values if self.sort_key is None else self.sort_key

    def text(self, i: int) -> str:
        from kviewer.session.format import display_text  # trace text: control and bidi characters shown, not obeyed

        if self.display is not None:
            return display_text(self.display(i))
        v = self.values[i]
        if self.kind == "text":
            return "" if v < 0 or self.categories is None else display_text(self.categories[v])
        if self.missing_int and v == -1:
            return ""
        if self.kind == "time":
            return format_duration(float(v))
        if self.kind == "pct":
            return UNKNOWN if not np.isfinite(v) else f"{float(v):.1f}"
        if self.kind in ("bytes", "flops"):
            return format_count(float(v))
        if isinstance(v, (float, np.floating)):
            if not np.isfinite(v):
                return UNKNOWN
            return f"{float(v):,.2f}" if not float(v).is_integer() else f"{int(v):,}"
        return f"{int(v):,}" if self.kind == "number" and abs(int(v)) >= 10000 else str(int(v))

    def as_filter(self) -> FilterColumn:
        kind = "text" if self.kind == "text" else ("time" if self.kind == "time" else "number")
        return FilterColumn(self.values, kind, self.categories, self.missing_int)


@dataclass
class TableData:
    """Columns plus, for every row, which trace it belongs to and which kernels it stands for."""

    columns: list[Col]
    trace_key: np.ndarray
    kernel_row: np.ndarray
    """kernel id for instance rows; -1 for groups"""
    groups: list[np.ndarray] = field(default_factory=list)
    """for grouped rows: the member kernel ids of each row"""
    extra_filter: dict[str, FilterColumn] = field(default_factory=dict)
    """columns the filter knows that are not shown (grid_x, block_y, end, ...)"""

    def __len__(self) -> int:
        return int(self.trace_key.shape[0])

    def filter_columns(self) -> dict[str, FilterColumn]:
        out = dict(self.extra_filter)
        out.update({c.key: c.as_filter() for c in self.columns})
        return out

    def column(self, key: str) -> Col:
        for c in self.columns:
            if c.key == key:
                return c
        raise KeyError(key)


def _unified_text(parts: Sequence[tuple[np.ndarray, Sequence[str]]]) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Merge categorical columns of several traces: (codes, categories, sort rank per row)."""
    cats = sorted({str(c) for _codes, cs in parts for c in cs})
    where = {c: i for i, c in enumerate(cats)}
    out = []
    for codes, cs in parts:
        remap = np.array([where[str(c)] for c in cs] + [-1], dtype=np.int64)
        out.append(remap[codes])
    codes_all = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    # sorted categories: the code is the rank; missing (-1) sorts first
    return codes_all, cats, codes_all


def instance_data(traces: Sequence[TraceTracks]) -> TableData:
    """One row per kernel of every open trace."""
    ks = [t.trace.kernels for t in traces]
    n_each = [len(k) for k in ks]
    trace_key = np.concatenate([np.full(n, t.key, dtype=np.int64) for t, n in zip(traces, n_each)]) if ks else np.zeros(0, np.int64)
    kernel_row = np.concatenate([np.arange(n, dtype=np.int64) for n in n_each]) if ks else np.zeros(0, np.int64)

    def cat(col: str) -> tuple[np.ndarray, list[str], np.ndarray]:
        return _unified_text([(np.asarray(k[col].cat.codes), [str(c) for c in k[col].cat.categories]) for k in ks])

    def num(col: str, dtype: str | None = None, shift: bool = False) -> np.ndarray:
        arrs = []
        for t, k in zip(traces, ks):
            a = k[col].to_numpy()
            if shift:
                a = a - t.offset_ns
            arrs.append(a)
        out = np.concatenate(arrs) if arrs else np.zeros(0)
        return out.astype(dtype) if dtype else out

    short_codes, short_cats, short_rank = cat("short_name")
    name_codes, name_cats, name_rank = cat("name")
    cols: list[Col] = []
    if len(traces) > 1:
        labels = [t.label for t in traces]
        idx = np.concatenate([np.full(n, i, dtype=np.int64) for i, n in enumerate(n_each)])
        cols.append(Col("trace", "trace", "text", idx, labels))
    cols.append(Col(
        "short_name", "kernel", "text", short_codes, short_cats, short_rank,
        tooltip=lambda i: name_cats[name_codes[i]] if name_codes[i] >= 0 else "",
    ))
    starts = num("start", shift=True)
    cols.append(Col("start", "start", "time", starts, display=lambda i: format_time(float(starts[i]))))
    cols.append(Col("dur", "duration", "time", num("dur")))
    latency = [t.launch_latency if t.launch_latency is not None else np.full(len(k), np.nan) for t, k in zip(traces, ks)]
    if ks and any(np.isfinite(lat).any() for lat in latency):
        # launch call start -> kernel start (ns); unknown where the launch is not linked
        cols.append(Col("launch_latency", "launch latency", "time", np.concatenate(latency).astype(np.float64)))
    cols.append(Col("device", "device", "int", num("device", "int64"), missing_int=True))
    cols.append(Col("stream", "stream", "int", num("stream", "int64"), missing_int=True))
    gx, gy, gz = num("grid_x", "int64"), num("grid_y", "int64"), num("grid_z", "int64")
    bx, by, bz = num("block_x", "int64"), num("block_y", "int64"), num("block_z", "int64")
    cols.append(_shape_col("grid", "grid", gx, gy, gz))
    cols.append(_shape_col("block", "block", bx, by, bz))
    cols.append(Col("registers", "regs", "int", num("registers", "int64"), missing_int=True))
    cols.append(Col("shared_mem", "shared mem", "bytes", num("shared_mem", "float64")))
    cols[-1].values[cols[-1].values < 0] = np.nan
    # filter-only columns: each launch dimension on its own
    hidden_filter = {
        key: FilterColumn(arr, "number", None, True)
        for key, arr in (("grid_x", gx), ("grid_y", gy), ("grid_z", gz), ("block_x", bx), ("block_y", by), ("block_z", bz),
                         ("rank", num("rank", "int64")), ("correlation", num("correlation", "int64")))
    }
    hidden_filter["end"] = FilterColumn(num("end", shift=True), "time")
    for key, header in METRIC_HEADERS.items():
        if not all(key in k.columns for k in ks) or not ks:
            continue
        if key in ("bound", "sol_status", "counters"):
            codes, cats, rank = cat(key) if all(str(k[key].dtype) == "category" for k in ks) else _text_from_objects([k[key] for k in ks])
            if any(cats_i for cats_i in cats if cats_i):
                cols.append(Col(key, header, "text", codes, cats, rank))
            continue
        values = num(key, "float64")
        if np.isnan(values).all():
            continue
        kind = "time" if key.endswith("_ns") else "pct" if key.endswith("_pct") else "bytes" if "bytes" in key else "flops" if "flops" in key else "number"
        cols.append(Col(key, header, kind, values))
    cols.append(Col("name", "full name", "text", name_codes, name_cats, name_rank))
    return TableData(cols, trace_key, kernel_row, extra_filter=hidden_filter)


def _text_from_objects(series: Sequence[object]) -> tuple[np.ndarray, list[str], np.ndarray]:
    parts = []
    for s in series:
        arr = np.asarray(s, dtype=object).astype(str)
        cats, codes = np.unique(arr, return_inverse=True)
        parts.append((codes.astype(np.int64), list(cats)))
    return _unified_text(parts)


def _shape_col(key: str, header: str, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> Col:
    known = x >= 0
    total = np.where(known, np.maximum(x, 1) * np.maximum(y, 1) * np.maximum(z, 1), -1)

    def display(i: int) -> str:
        if x[i] < 0:
            return ""
        return f"{x[i]}×{max(y[i], 1)}×{max(z[i], 1)}"

    # sorted and filtered by the total count (blocks or threads)
    return Col(key, header, "number", total, display=display, missing_int=True)


def grouped_data(traces: Sequence[TraceTracks]) -> TableData:
    """One row per (trace, kernel name): count and time statistics, as ``nsys stats`` reports."""
    import pandas as pd

    keys: list[np.ndarray] = []
    members: list[np.ndarray] = []
    frames = []
    for t in traces:
        k = t.trace.kernels
        if not len(k):
            continue
        codes = np.asarray(k["name"].cat.codes)
        df = pd.DataFrame({"code": codes, "dur": k["dur"].to_numpy()})
        g = df.groupby("code", sort=True)["dur"]
        stats = g.agg(["count", "sum", "mean", "median", "min", "max", "std"])
        total = float(df["dur"].sum()) or 1.0
        stats["pct"] = stats["sum"] / total * 100.0
        cats = [str(c) for c in k["name"].cat.categories]
        short = {str(a): str(b) for a, b in zip(k["name"].to_numpy(), k["short_name"].to_numpy())}
        stats["name"] = [cats[c] if c >= 0 else "" for c in stats.index]
        stats["short_name"] = [short.get(n, n) for n in stats["name"]]
        stats["trace"] = t.key
        frames.append(stats.reset_index())
        idx = g.indices
        for c in stats.index:
            members.append(np.asarray(idx[c], dtype=np.int64))
        keys.append(np.full(len(stats), t.key, dtype=np.int64))
    if frames:
        s = pd.concat(frames, ignore_index=True)
    else:
        s = pd.DataFrame({c: [] for c in ("count", "sum", "mean", "median", "min", "max", "std", "pct", "name", "short_name", "trace", "code")})
    trace_key = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    names = s["name"].astype(str).to_numpy()
    shorts = s["short_name"].astype(str).to_numpy()
    name_cats, name_codes = np.unique(names, return_inverse=True) if len(names) else (np.array([]), np.zeros(0, np.int64))
    short_cats, short_codes = np.unique(shorts, return_inverse=True) if len(shorts) else (np.array([]), np.zeros(0, np.int64))
    cols: list[Col] = []
    if len(traces) > 1:
        labels = [t.label for t in traces]
        pos = {t.key: i for i, t in enumerate(traces)}
        cols.append(Col("trace", "trace", "text", np.array([pos[int(k)] for k in trace_key], dtype=np.int64), labels))
    name_list = [str(c) for c in name_cats]
    cols.append(Col("short_name", "kernel", "text", short_codes.astype(np.int64), [str(c) for c in short_cats],
                    tooltip=lambda i: name_list[name_codes[i]]))
    cols.append(Col("count", "count", "int", s["count"].to_numpy(dtype=np.int64)))
    cols.append(Col("total", "total", "time", s["sum"].to_numpy(dtype=np.float64)))
    cols.append(Col("pct", "time %", "pct", s["pct"].to_numpy(dtype=np.float64)))
    cols.append(Col("avg", "average", "time", s["mean"].to_numpy(dtype=np.float64)))
    cols.append(Col("med", "median", "time", s["median"].to_numpy(dtype=np.float64)))
    cols.append(Col("min", "min", "time", s["min"].to_numpy(dtype=np.float64)))
    cols.append(Col("max", "max", "time", s["max"].to_numpy(dtype=np.float64)))
    cols.append(Col("std", "std dev", "time", s["std"].to_numpy(dtype=np.float64)))
    cols.append(Col("name", "full name", "text", name_codes.astype(np.int64), name_list))
    return TableData(cols, trace_key, np.full(len(trace_key), -1, dtype=np.int64), members)


def sort_order(rows: np.ndarray, key: np.ndarray, descending: bool) -> np.ndarray:
    """``rows`` reordered by ``key[rows]``: stable; unknown values (NaN) last either way."""
    k = key[rows]
    if k.dtype.kind == "f":
        k = -k if descending else k  # NaN stays NaN, and argsort puts NaN last
    elif descending:
        k = -k.astype(np.int64)
    return rows[np.argsort(k, kind="stable")]
