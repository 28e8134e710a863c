"""Columns of the kernel table, per instance or grouped by name, as numpy arrays (no Qt).

The Qt model (:mod:`kviewer.ui.kernel_table`) is a thin adapter over these: it never holds a
Python object per row. Sorting and filtering produce index arrays into these columns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kviewer.core.names import short_name
from kviewer.session.filterexpr import FilterColumn
from kviewer.session.format import UNKNOWN, display_text, format_count, format_duration, format_time, format_value
from kviewer.session.tracks import clock_label

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
#: METRIC_HEADERS columns that come from the speed-of-light table, not from the kernels
_SOL_KEYS = frozenset(("bound", "t_sol_ns", "sol_pct", "sol_status"))
ALIASES = {
    "duration": "dur", "time": "dur", "regs": "registers", "reg": "registers", "smem": "shared_mem",
    "shared": "shared_mem", "grid_size": "grid", "block_size": "block", "mean": "avg", "average": "avg",
    "calls": "count", "n": "count", "median": "med", "gpu": "device", "kernel": "name",
    "short": "short_name", "percent": "pct", "time_pct": "pct", "latency": "launch_latency",
}


_NO_VALUES = np.zeros(0)

#: units shown left-aligned (everything else is a number, right-aligned)
_TEXT_KINDS = ("text",)


@dataclass
class Col:
    """One table column of any table in the app: what to show, how to sort, what the filter sees.

    A column is data, not Qt: :class:`kviewer.ui.table_model.TableModel` draws any list of them.
    Declared without ``values`` it is a template that :func:`frame_table` fills from a frame's
    column of the same ``key``.
    """

    key: str
    """the column's name (in the frame it is read from, and for the filter)"""
    header: str
    kind: str
    """the unit, which picks the formatter (:data:`kviewer.session.format.FORMATTERS`): time |
    instant (a start or end on the trace's clock) | delta_time | pct | delta_pct | bytes | flops | si | count | int | number | plain | text"""
    values: np.ndarray = field(default_factory=lambda: _NO_VALUES)
    """numbers (the dtype of the column), or codes into ``categories`` for text (-1: none)"""
    categories: Sequence[str] | None = None
    sort_key: np.ndarray | None = None
    """what rows sort by when not ``values`` (text sorts by its categories, case-insensitively)"""
    display: Callable[[int], str] | None = None
    """a row's text when the unit's formatter does not say it (launch shapes, per-row units)"""
    tooltip: Callable[[int], str] | None = None
    missing_int: bool = False
    """integers where -1 means unknown (shown empty)"""
    header_tip: str = ""
    align: str = ""
    """"left" or "right"; by default text left, numbers right"""
    foreground: Callable[[int], str | None] | None = None
    """a row's text colour as ``#rrggbb`` (None: the default)"""
    italic: Callable[[int], bool] | None = None

    @property
    def is_text(self) -> bool:
        return self.kind in _TEXT_KINDS

    @property
    def alignment(self) -> str:
        return self.align or ("left" if self.is_text else "right")

    def unknown(self) -> np.ndarray:
        """Rows whose value is unknown: NaN, -1 for ``missing_int``, no text."""
        v = self.values
        if self.is_text:
            known = v >= 0
            if self.categories is not None and len(self.categories):
                empty = np.array([str(c) == "" for c in self.categories] + [True])
                known &= ~empty[np.where(v >= 0, v, len(self.categories))]
            return ~known
        if v.dtype.kind == "f":
            return np.isnan(v)
        if self.missing_int:
            return v == -1
        return np.zeros(v.shape[0], dtype=bool)

    def order_key(self) -> np.ndarray:
        """What rows sort by: ``sort_key``, else the values; text by the rank of its category in
        case-insensitive order. Unknown rows are found by :meth:`unknown` (always sorted last)."""
        if self.sort_key is not None:
            return self.sort_key
        if not self.is_text:
            return self.values
        cats = [str(c).lower() for c in (self.categories or [])]
        rank = np.zeros(len(cats) + 1, dtype=np.int64)  # the last slot: no text (unknown)
        if cats:
            rank[np.argsort(np.array(cats, dtype=object), kind="stable")] = np.arange(len(cats))
        return rank[np.where(self.values >= 0, self.values, len(cats))]

    def raw(self, i: int) -> Any:
        """A cell's value as Python (text as the string), for copying and tests."""
        v = self.values[i]
        if self.is_text:
            return "" if v < 0 or self.categories is None else str(self.categories[v])
        return v.item() if hasattr(v, "item") else v

    def text(self, i: int) -> str:
        if self.display is not None:
            return display_text(self.display(i))
        v = self.values[i]
        if self.is_text:
            return "" if v < 0 or self.categories is None else display_text(str(self.categories[v]))
        if self.missing_int and v == -1:
            return ""
        return format_value(self.kind, float(v))

    def as_filter(self) -> FilterColumn:
        kind = "text" if self.is_text else ("time" if self.kind in ("time", "instant") else "number")
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


def _unified_text(parts: Sequence[tuple[np.ndarray, Sequence[str]]]) -> tuple[np.ndarray, list[str]]:
    """Merge categorical columns of several traces: (codes, sorted categories); -1: no text."""
    cats = sorted({str(c) for _codes, cs in parts for c in cs})
    where = {c: i for i, c in enumerate(cats)}
    out = []
    for codes, cs in parts:
        remap = np.array([where[str(c)] for c in cs] + [-1], dtype=np.int64)
        out.append(remap[codes])
    codes_all = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    return codes_all, cats


def instance_data(traces: Sequence[TraceTracks]) -> TableData:
    """One row per kernel of every open trace."""
    ks = [t.trace.kernels for t in traces]
    n_each = [len(k) for k in ks]
    trace_key = np.concatenate([np.full(n, t.key, dtype=np.int64) for t, n in zip(traces, n_each)]) if ks else np.zeros(0, np.int64)
    kernel_row = np.concatenate([np.arange(n, dtype=np.int64) for n in n_each]) if ks else np.zeros(0, np.int64)

    def cat(col: str) -> tuple[np.ndarray, list[str]]:
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

    short_codes, short_cats = cat("short_name")
    name_codes, name_cats = cat("name")
    cols: list[Col] = []
    if len(traces) > 1:
        idx = np.concatenate([np.full(n, i, dtype=np.int64) for i, n in enumerate(n_each)])
        cols.append(_trace_col(traces, idx))
    cols.append(Col(
        "short_name", "kernel", "text", short_codes, short_cats,
        tooltip=lambda i: name_cats[name_codes[i]] if name_codes[i] >= 0 else "",
    ))
    starts = num("start", shift=True)
    cols.append(Col("start", "start", "time", starts, display=lambda i: format_time(float(starts[i])), header_tip=clock_label(traces)))
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
        if not ks:
            continue
        if key in _SOL_KEYS:
            # the speed of light lives beside the kernels (TraceTracks.sol_info), row for row
            sol_cols = [t.sol_column(key) for t in traces]
            if any(c is None for c in sol_cols):
                continue
            arrays: list[Any] = [c for c in sol_cols if c is not None]
        elif all(key in k.columns for k in ks):
            arrays = [k[key] for k in ks]
        else:
            continue
        if key in ("bound", "sol_status", "counters"):
            codes, cats = cat(key) if key not in _SOL_KEYS and all(str(k[key].dtype) == "category" for k in ks) else _text_from_objects(arrays)
            if any(cats_i for cats_i in cats if cats_i):
                cols.append(Col(key, header, "text", codes, cats))
            continue
        values = np.concatenate([np.asarray(a, dtype=np.float64) for a in arrays]) if key in _SOL_KEYS else num(key, "float64")
        if np.isnan(values).all():
            continue
        kind = "time" if key.endswith("_ns") else "pct" if key.endswith("_pct") else "bytes" if "bytes" in key else "flops" if "flops" in key else "number"
        cols.append(Col(key, header, kind, values))
    cols.append(Col("name", "full name", "text", name_codes, name_cats))
    return TableData(cols, trace_key, kernel_row, extra_filter=hidden_filter)


def trace_label(t: TraceTracks) -> str:
    """The name a trace goes by in tables: its label on the timeline ("A · file" / "B · file"
    while two traces are compared), else the file name."""
    root = getattr(t, "root", None)
    return str(getattr(root, "label", "") or t.label)


def _trace_col(traces: Sequence[TraceTracks], idx: np.ndarray) -> Col:
    labels = [trace_label(t) for t in traces]
    paths = [str(t.trace.meta.path or t.label) for t in traces]
    return Col("trace", "trace", "text", idx, labels, tooltip=lambda i: paths[idx[i]])


def _text_from_objects(series: Sequence[object]) -> tuple[np.ndarray, list[str]]:
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
        if t.trace.stats_only and len(t.trace.kernel_stats):
            # a profiler's own per-name summary (rocprof --stats): its rows, its numbers; what the
            # file does not say stays unknown; there are no instances to select
            stats = _stats_file_rows(t.trace.kernel_stats)
            stats["trace"] = t.key
            frames.append(stats)
            members.extend(np.zeros(0, dtype=np.int64) for _ in range(len(stats)))
            keys.append(np.full(len(stats), t.key, dtype=np.int64))
            continue
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
        pos = {t.key: i for i, t in enumerate(traces)}
        cols.append(_trace_col(traces, np.array([pos[int(k)] for k in trace_key], dtype=np.int64)))
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


def _stats_file_rows(ks: Any) -> Any:
    """The grouped table's columns from a ``kernel_stats`` table."""
    import pandas as pd

    names = ks["name"].astype(str).tolist()
    return pd.DataFrame({
        "code": np.arange(len(ks)), "count": ks["count"].to_numpy(), "sum": ks["total_ns"].to_numpy(dtype=np.float64),
        "mean": ks["avg_ns"].to_numpy(), "median": ks["med_ns"].to_numpy(), "min": ks["min_ns"].to_numpy(),
        "max": ks["max_ns"].to_numpy(), "std": ks["std_ns"].to_numpy(), "pct": ks["time_pct"].to_numpy(),
        "name": names, "short_name": [short_name(n) for n in names],
    })


def sort_order(rows: np.ndarray, col: Col, descending: bool) -> np.ndarray:
    """``rows`` reordered by ``col``'s sort key: stable; unknown values (NaN, -1 ids, no text)
    last in both directions. One ``argsort`` of a numeric key, so a million rows sort fast."""
    k = col.order_key()[rows]
    if k.dtype.kind == "f":
        # argsort puts NaN last, and a negated NaN is still NaN: last in both directions
        return rows[np.argsort(-k if descending else k, kind="stable")]
    k = k.astype(np.int64, copy=False)
    if descending:
        k = -k
    unknown = col.unknown()
    if unknown.any():
        k = np.where(unknown[rows], np.iinfo(np.int64).max, k)  # after every known value either way
    return rows[np.argsort(k, kind="stable")]


def text_table(rows: Sequence[Sequence[str]], columns: Sequence[Col]) -> TableData:
    """A table of text rows (no pandas): column ``j`` of every row fills template ``columns[j]``
    as codes into its sorted categories; "" is no text (as in :func:`frame_table`)."""
    n = len(rows)
    out: list[Col] = []
    for j, tpl in enumerate(columns):
        texts = [str(r[j]) for r in rows]
        cats = sorted({t for t in texts if t})
        where = {c: i for i, c in enumerate(cats)}
        codes = np.fromiter((where.get(t, -1) for t in texts), dtype=np.int64, count=n)
        out.append(replace(tpl, values=codes, categories=cats))
    return TableData(out, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))


def frame_table(frame: Any, columns: Sequence[Col]) -> TableData:
    """A table over the columns of a pandas DataFrame: each template of ``columns`` (a :class:`Col`
    declared without values) takes the frame's column of its key; keys the frame lacks are left
    out. Text becomes codes into sorted categories; None, NaN and "" are no text."""
    import pandas as pd

    n = len(frame)
    out: list[Col] = []
    for tpl in columns:
        if tpl.key not in frame.columns:
            continue
        series = frame[tpl.key]
        if tpl.is_text:
            text = series.astype(object).where(series.notna(), None)
            codes, cats = pd.factorize(pd.Series([None if v is None else str(v) for v in text], dtype=object), sort=True)
            out.append(replace(tpl, values=np.asarray(codes, dtype=np.int64), categories=[str(c) for c in cats]))
        else:
            values = pd.to_numeric(series, errors="coerce").to_numpy()
            if values.dtype.kind not in "iuf":
                values = values.astype(np.float64)
            if values.dtype.kind == "u":
                values = values.astype(np.int64)
            out.append(replace(tpl, values=values))
    return TableData(out, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64))
