"""rocprof v1 ``results.csv`` (and the counter-mode CSVs it writes), plus rocprof statistics files.

Header forms read (column names compared after :func:`~kviewer.io.rocprof.common.norm`, so quoted
or not and any letter case):

* ROCm 5/6: ``Index,KernelName,gpu-id,queue-id,queue-index,pid,tid,grd,wgr,lds,scr,arch_vgpr,
  accum_vgpr,sgpr,wave_size,sig,obj,DispatchNs,BeginNs,EndNs,CompleteNs[,DurationNs]``
* older: ``...,scr,vgpr,sgpr,fbar,sig,obj,...`` (no wave size, no DurationNs)
* counter (``--pmc``) mode: counter columns after ``obj``, with the four timestamps after the
  counters (omniperf's SQ_LEVEL_WAVES.csv), before them, or absent (``data_movement.csv``).

Kernels are placed at ``BeginNs``..``EndNs`` (the GPU execution interval; ``DispatchNs`` is when
the packet was written and can be later than ``BeginNs`` in counter mode). A file without
timestamps has no execution times at all: its kernels are laid end to end in dispatch order,
1 µs each, and marked ``serialised`` (the durations are not measured; a warning says so).

A statistics file (``results.stats.csv``, rocprofv3 ``*_kernel_stats.csv``) opens as a kernel
summary without a timeline (:mod:`kviewer.io.rocprof.stats`); an API statistics file
(``results.hip_stats.csv``, ``*_api_stats.csv``) is refused with the per-dispatch file to open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, Trace, TraceMeta, schema
from kviewer.errors import CorruptTrace, LoadError
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.rocprof import common as rc
from kviewer.io.rocprof.stats import load_stats
from kviewer.io.source import Progress, read_content

RECOGNISED = "rocprof v1 results.csv"

#: the per-dispatch columns rocprof v1 writes; every other column is a counter
KNOWN = {
    "index", "kernelname", "gpuid", "queueid", "queueindex", "pid", "tid", "grd", "wgr", "lds",
    "scr", "vgpr", "sgpr", "fbar", "archvgpr", "accumvgpr", "wavesize", "sig", "obj",
    "dispatchns", "beginns", "endns", "completens", "durationns",
}
SPELLED = {"kernelname": "KernelName", "gpuid": "gpu-id", "beginns": "BeginNs", "endns": "EndNs", "grd": "grd", "wgr": "wgr"}
#: launch attributes that have no kernels column of their own; kept as metrics (section "launch")
LAUNCH_METRICS = {
    "accumvgpr": ("accum_vgpr", "register"),  # kernels.registers holds arch + accum
    "sgpr": ("sgpr", "register"),
    "scr": ("scratch", "byte"),
    "wavesize": ("wave_size", ""),
    "fbar": ("fbar", ""),
}

#: width given to each kernel of a file without timestamps (durations unknown)
NOMINAL_NS = 1000


def sniff(head: bytes, path: Path) -> bool:
    fields = rc.header_fields(head)
    if rc.is_stats_header(fields):
        return True
    # ncu's CSV has "Kernel Name" too but never gpu-id / queue-id / grd
    return {"kernelname", "gpuid", "queueid", "grd", "wgr"} <= set(fields)


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    content = read_content(path, progress)
    cancel.check()
    fields = rc.header_fields(content.data[:65536])
    if rc.is_stats_header(fields):
        return load_stats(path, content.data, stats_siblings(path))
    table = rc.read_csv_text(content.data, path, RECOGNISED, as_text=_as_text)
    if content.truncated:
        table.warnings.append(rc.compressed_cut(path))
    progress(0.5, "building kernels")
    cancel.check()
    return build_v1(table, path, "rocprof-v1-csv", "results.csv")


def _as_text(col: str) -> bool:
    # names as text; counters too, so the metrics keep the value as rocprof printed it
    return col in ("kernelname", "sig", "obj") or col not in KNOWN


def stats_siblings(path: Path) -> list[str]:
    """Per-dispatch files of the same run, named in the refusal message of a statistics file."""
    name = path.name
    out: list[str] = []
    if name.endswith(".hip_stats.csv"):
        out.append(name[: -len(".hip_stats.csv")] + ".csv")
    elif name.endswith(".stats.csv"):
        out.append(name[: -len(".stats.csv")] + ".csv")
    if name.endswith("_stats.csv"):
        # rocprof v1 results.hip_stats.csv -> results.hip_trace.csv; rocprofv3
        # <pid>_kernel_stats.csv -> <pid>_kernel_trace.csv, <pid>_hip_api_stats.csv -> ..._trace.csv
        out.append(name[: -len("_stats.csv")] + "_trace.csv")
    return out


def precision_lost(begin: pd.Series, end: pd.Series) -> bool:
    """Timestamps saved in a precision that cannot place kernels: written in scientific notation
    (``8.1097E+14``) or so rounded that most kernels begin and end at the same count."""
    text = begin.astype(str)
    if text.str.contains(r"[eE][+]", regex=True).any():
        return True
    b = pd.to_numeric(begin, errors="coerce").to_numpy(dtype=np.float64)
    e = pd.to_numeric(end, errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(b) & np.isfinite(e)
    if ok.sum() < 2 or b[ok].max() < 1e12:
        return False
    # nanosecond clocks are never all whole milliseconds: the digits were cut
    rounded = bool((np.mod(b[ok], 1e6) == 0).all() and (np.mod(e[ok], 1e6) == 0).all())
    return rounded or bool((e[ok] <= b[ok]).mean() >= 0.5)


def build_v1(table: rc.CsvTable, path: Path, source_format: str, container: str) -> Trace:
    """A Trace from the rows of a rocprof v1 results.csv or results.db ``KERN`` table."""
    recognised = f"rocprof v1 {container}"
    rc.require(table, ["kernelname", "gpuid", "grd", "wgr"], path, recognised, SPELLED)
    n = len(table.frame)
    if n == 0:
        raise LoadError(path, "has a header but no kernel dispatches (nothing was profiled, or the file was cut short)", recognised)
    warnings = list(table.warnings)
    extra: dict[str, Any] = {}

    def ints(name: str) -> np.ndarray:
        return rc.numbers(table, name, path, recognised)

    timed = table.has("beginns", "endns")
    if not timed and (table.has("beginns") or table.has("endns")):
        raise CorruptTrace(path, "has only one of BeginNs / EndNs", recognised)
    order_key = ints("index") if table.has("index") else np.arange(n, dtype=np.int64)
    lost = timed and precision_lost(table.frame[table.columns["beginns"]], table.frame[table.columns["endns"]])
    if lost:
        timed = False
        warnings.append(
            Diagnostic.warning(
                "damaged",
                path,
                "the BeginNs/EndNs timestamps lost their precision (saved as floating point, e.g. by a "
                "spreadsheet: 8.1097E+14 ns is only good to 10^10 ns): they are not used",
            )
        )
    if timed:
        begin = ints("beginns")
        end = ints("endns")
        end = rc.clamp_ends(begin, end, warnings, path)
        base = rc.rebase([begin])
        assert base is not None
        start = begin - base
        end = end - base
        serialised = np.zeros(n, dtype=bool)
        extra.update(rc.clock_extra(base))
    else:
        # counter mode without --timestamp on: no execution times at all
        slot = np.empty(n, dtype=np.int64)
        slot[np.argsort(order_key, kind="stable")] = np.arange(n, dtype=np.int64)
        start = slot * NOMINAL_NS
        end = start + NOMINAL_NS
        serialised = np.ones(n, dtype=bool)
        warnings.append(
            Diagnostic.warning(
                "serialised",
                path,
                "this file has no timestamps (counter mode): kernels are laid end to end in dispatch "
                f"order, {NOMINAL_NS // 1000} µs each; their durations are not measured",
            )
        )

    name, short = rc.kernel_names(table.text("kernelname"))
    grd = ints("grd")
    wgr = ints("wgr")
    gpu = ints("gpuid")
    cols: dict[str, Any] = {
        "name": name,
        "short_name": short,
        "start": start,
        "end": end,
        "device": gpu.astype(np.int32),
        "serialised": serialised,
        # v1 reports the grid and workgroup as totals (x*y*z work-items); kept as 1-D so the
        # workgroup and work-item counts stay right
        "grid_x": rc.ceil_div(grd, wgr).astype(np.int32),
        "grid_y": np.ones(n, dtype=np.int32),
        "grid_z": np.ones(n, dtype=np.int32),
        "block_x": wgr.astype(np.int32),
        "block_y": np.ones(n, dtype=np.int32),
        "block_z": np.ones(n, dtype=np.int32),
    }
    if table.has("queueid"):
        cols["stream"] = ints("queueid")
    for src, dst in (("pid", "pid"), ("tid", "tid")):
        if table.has(src):
            cols[dst] = ints(src)
    if table.has("lds"):
        cols["shared_mem"] = ints("lds")
    if table.has("archvgpr"):
        # CDNA has one VGPR file per lane split into arch and accumulation registers
        cols["registers"] = (ints("archvgpr") + (ints("accumvgpr") if table.has("accumvgpr") else 0)).astype(np.int32)
    elif table.has("vgpr"):
        cols["registers"] = ints("vgpr").astype(np.int32)

    counter_cols = [c for c in table.columns if c not in KNOWN]
    counters: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for c in counter_cols:
        values = rc.numbers(table, c, path, recognised, integer=False)
        counters[table.columns[c]] = (values, table.text(c))
    cols.update(rc.dram_columns({k: v[0] for k, v in counters.items()}, n))
    cols.update(rc.flops_columns({k: v[0] for k, v in counters.items()}, n))

    kernels, new_id = schema.make_table_mapped("kernels", n, cols)
    launch = {
        metric: (ints(key).astype(np.float64), table.text(key), unit)
        for key, (metric, unit) in LAUNCH_METRICS.items()
        if table.has(key)
    }
    metrics = rc.concat_metrics(rc.metrics_from_wide(new_id, counters), rc.launch_metrics(new_id, launch))

    devices, dev_extra = v1_devices(path, np.unique(gpu))
    extra.update(dev_extra)
    if counters:
        extra["counters"] = ", ".join(counters)
        if timed:
            extra["note"] = "counter collection serialises dispatches; times are from the profiled run"
    variant = "ROCm 5+ header (arch_vgpr, accum_vgpr, wave_size)" if table.has("archvgpr") else (
        "old header (vgpr, sgpr, fbar)" if table.has("vgpr") else "minimal header"
    )
    mode = (f"counter mode, {len(counters)} counters" + ("" if timed else ", no timestamps")) if counters else "kernel trace"
    meta = TraceMeta(
        path=str(path),
        source_format=source_format,
        format_label=f"rocprof v1 {container}: {mode}; {variant}",
        tool="rocprof",
        tool_version="",
        origin_ns=None,
        warnings=warnings,
        extra=extra,
    )
    trace = Trace(meta=meta, kernels=kernels, devices=devices, metrics=metrics)
    return trace


def v1_devices(path: Path, gpu_ids: np.ndarray) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Devices for rocprof v1's ``gpu-id`` values.

    rocprof v1's gpu-id is the GPU's position among the HSA GPU agents (rocprofiler's
    HsaRsrcFactory numbers GPU agents 0, 1, ... in discovery order), so with the rocminfo dump
    rocprof writes beside its results (``results.sysinfo.txt``) the n-th GPU agent describes it.
    """
    gpus, sysinfo_name, info = rc.sysinfo_beside(path)
    extra: dict[str, Any] = {}
    rows = []
    for g in gpu_ids.tolist():
        if 0 <= g < len(gpus):
            rows.append(rc.rocminfo_device(gpus[g], int(g)))
        else:
            rows.append({"id": int(g), "name": f"AMD GPU (rocprof gpu-id {g})", "vendor": "AMD"})
    if sysinfo_name:
        extra["sysinfo"] = f"{sysinfo_name} ({len(gpus)} GPU agents)"
        extra.update(info)
    return rc.devices_table(rows), extra


LOADER = LoaderSpec(
    name="rocprof-v1-csv",
    label="rocprof v1 results.csv",
    priority=40,
    sniff=sniff,
    load=load,
)
