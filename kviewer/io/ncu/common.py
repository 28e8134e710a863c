"""What the Nsight Compute loaders share: units, section labels, speed-of-light fields, rules.

Both :mod:`kviewer.io.ncu.report` (``.ncu-rep`` through NVIDIA's ``ncu_report`` module) and
:mod:`kviewer.io.ncu.csv_export` (``ncu --csv`` raw and details pages) collect, per kernel, a set of
metrics in *base units* and turn them into the same kernels/metrics/devices tables here, so that
one report exported three ways loads to the same numbers.

Units
-----
``ncu --csv`` auto-scales values for reading (``12.80 usecond``, ``2.90 Tbyte/s``, ``1.97 Ghz``,
``32,746,880 byte``) unless ``--print-units base`` was given; the report stores base units
(``ns``, ``byte``, ``byte/s``, ``hz``). :func:`parse_unit` maps any of them to a canonical base
unit and a factor:

=====================  ===========  ===========================================================
printed                base         note
=====================  ===========  ===========================================================
nsecond usecond us ms  ns           time is nanoseconds, as everywhere in kviewer
hz Khz Mhz Ghz         Hz
cycle/nsecond          Hz           a cycle rate is a frequency
byte Kbyte Mbyte ...   byte         SI prefixes (1 Kbyte = 1000 byte), as ncu uses them
Gbyte/s Tbyte/second   byte/s
Kbyte/block            byte/block
%/Kbyte                %/byte       factor 1000: ncu scales the byte prefix of this ratio like a
                                    numerator (checked against the report's own value)
inst/cycle %, warp...  unchanged
=====================  ===========  ===========================================================

Values are parsed with the thousands separators removed; ``n/a``, ``no data`` and empty cells
become NaN (the text stays in the ``metrics.text`` column).

Where things go
---------------
* ``metrics`` (long): one row per kernel and metric, ``metric`` is the ncu metric name
  (``gpu__time_duration.sum``) when known, else the label the details page printed;
  ``section`` is the section's display name ("GPU Speed Of Light Throughput"), "" when the
  metric belongs to no section.
* Rule results (advice): one ``metrics`` row per rule result, ``section = "rule:<RuleId>"``,
  ``metric = "estimated_speedup_local" | "estimated_speedup_global"`` with ``value`` the
  estimated speedup in % when the rule estimates one, else ``metric = "advice"``; ``text`` is
  ``"<TYPE>: <message>"`` (TYPE as the CSV prints it: OPT, INF, WRN, ERR), with the report's
  link markup rendered the way ``ncu --csv`` renders it.
* NVTX ranges: ``section = "nvtx"``, ``metric`` = the domain, ``text`` = the push/pop stack
  joined with ``/``.
* ``kernels``: launch configuration plus the speed-of-light inputs of
  :data:`kviewer.core.schema.KERNELS` computed by :func:`measured_columns`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, make_table
from kviewer.core.names import short_name

TOOL = "Nsight Compute"

# ---------------------------------------------------------------------------------------------
# units

_SI = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_TIME_NS = {
    "nsecond": 1.0, "ns": 1.0,
    "usecond": 1e3, "us": 1e3, "µs": 1e3, "μs": 1e3,
    "msecond": 1e6, "ms": 1e6,
    "second": 1e9, "s": 1e9, "sec": 1e9,
}  # fmt: skip
#: count-like units that ncu may print with an SI prefix (Kbyte, Minst, ...)
_COUNTABLE = (
    "byte", "inst", "cycle", "warp", "thread", "block", "sector", "request", "wavefront",
    "register", "pass", "cluster", "branches", "op", "flop", "transaction", "SM",
)  # fmt: skip


@lru_cache(maxsize=None)
def parse_unit(unit: str) -> tuple[str, float]:
    """Canonical base unit and the factor that turns a printed value into it.

    ``parse_unit("usecond") == ("ns", 1e3)``, ``parse_unit("Gbyte/s") == ("byte/s", 1e9)``,
    ``parse_unit("cycle/nsecond") == ("Hz", 1e9)``. A unit kviewer does not know is returned
    unchanged with factor 1.
    """
    u = unit.strip()
    if not u:
        return "", 1.0
    parts = u.split("/")
    num_base, num_factor, num_kind = _token(parts[0])
    if num_kind == "unknown":
        return u, 1.0
    dens: list[str] = []
    factor = num_factor
    for part in parts[1:]:
        base, f, kind = _token(part)
        if kind == "unknown":
            return u, 1.0
        if kind == "time":
            # a rate: value per <prefix>second -> per second
            factor *= 1e9 / f
            dens.append("s")
        else:
            # ncu applies the SI prefix of a denominator count like a numerator one
            # (derived__pct_occupancy_per_shared_mem_size: 1.466 %/Kbyte is 1466 %/byte)
            factor *= f
            dens.append(base)
    if num_kind == "cycle" and dens == ["s"]:
        return "Hz", factor
    if num_kind == "time" and not dens:
        return "ns", factor
    return "/".join([num_base, *dens]), factor


def _token(tok: str) -> tuple[str, float, str]:
    """(base, factor, kind) of one unit token; kind in time|hz|cycle|count|pct|unknown."""
    t = tok.strip()
    if t in _TIME_NS:
        return "ns", _TIME_NS[t], "time"
    low = t.lower()
    if low.endswith("hz") and (len(t) == 2 or t[:-2] in _SI):
        return "Hz", _SI.get(t[:-2], 1.0), "hz"
    if t in ("%", "pct"):
        return "%", 1.0, "pct"
    for base in _COUNTABLE:
        if t == base:
            return base, 1.0, "cycle" if base == "cycle" else "count"
        if t.endswith(base) and t[: -len(base)] in _SI and base != "SM":
            kind = "cycle" if base == "cycle" else "count"
            return base, _SI[t[: -len(base)]], kind
    if re.fullmatch(r"[A-Za-z_]+", t):
        # a plain word ncu uses as a unit (e.g. "bank"): keep it, no scaling
        return t, 1.0, "count"
    return t, 1.0, "unknown"


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def parse_number(text: str) -> float:
    """A value as ncu prints it -> float; thousands separators removed; NaN if not numeric."""
    s = text.strip().replace(",", "")
    if not s or not _NUMBER.match(s):
        return math.nan
    return float(s)


def normalise(texts: Sequence[str], unit: str) -> tuple[np.ndarray, str]:
    """Parse printed values and scale them to the base unit; returns (values, base unit)."""
    base, factor = parse_unit(unit)
    values = np.fromiter((parse_number(t) for t in texts), dtype=np.float64, count=len(texts))
    if factor != 1.0:
        values = values * factor
    return values, base


# ---------------------------------------------------------------------------------------------
# section labels (details page) -> metric names
#
# The details page prints each section's header metrics by their label. The table below is the
# label -> metric mapping of Nsight Compute's section files as the reports in
# ../shared/samples/ncu declare it (ISection.header_metrics(), IMetric.label()); the three L2
# compression rows of MemoryWorkloadAnalysis are printed by ncu 2025.3 but not declared as
# header metrics in the report, and were matched by value (lrc__ilc_input_sectors.sum = 524,681).

SECTION_NAMES: dict[str, str] = {
    "SpeedOfLight": "GPU Speed Of Light Throughput",
    "SpeedOfLight_RooflineChart": "GPU Speed Of Light Roofline Chart",
    "ComputeWorkloadAnalysis": "Compute Workload Analysis",
    "MemoryWorkloadAnalysis": "Memory Workload Analysis",
    "LaunchStats": "Launch Statistics",
    "Occupancy": "Occupancy",
    "SourceCounters": "Source Counters",
    "WorkloadDistribution": "GPU and Memory Workload Distribution",
    "SchedulerStats": "Scheduler Statistics",
    "WarpStateStats": "Warp State Statistics",
    "InstructionStats": "Instruction Statistics",
}

_LABELS: dict[str, dict[str, str]] = {
    "SpeedOfLight": {
        "Compute (SM) Throughput": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
        "DRAM Throughput": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "Duration": "gpu__time_duration.sum",
        "Elapsed Cycles": "gpc__cycles_elapsed.max",
        "L1/TEX Cache Throughput": "l1tex__throughput.avg.pct_of_peak_sustained_active",
        "L2 Cache Throughput": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "Memory Throughput": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "SM Active Cycles": "sm__cycles_active.avg",
        "SM Frequency": "gpc__cycles_elapsed.avg.per_second",
    },
    "ComputeWorkloadAnalysis": {
        "Executed Ipc Active": "sm__inst_executed.avg.per_cycle_active",
        "Executed Ipc Elapsed": "sm__inst_executed.avg.per_cycle_elapsed",
        "Issue Slots Busy": "sm__inst_issued.avg.pct_of_peak_sustained_elapsed",
        "Issued Ipc Active": "sm__inst_issued.avg.per_cycle_active",
        "SM Busy": "sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed",
    },
    "MemoryWorkloadAnalysis": {
        "L1/TEX Hit Rate": "l1tex__t_sector_hit_rate.pct",
        "L2 Hit Rate": "lts__t_sector_hit_rate.pct",
        "L2 Persisting Size": "launch__persisting_l2_cache_size",
        "Local Memory Spilling Request Overhead": "derived__local_spilling_requests_pct",
        "Local Memory Spilling Requests": "derived__local_spilling_requests",
        "Max Bandwidth": "gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",
        "Mem Busy": "gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",
        "Mem Pipes Busy": "sm__memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "Memory Throughput": "dram__bytes.sum.per_second",
        "L2 Compression Success Rate": "lrc__average_ilc_input_sector_success_rate.pct",
        "L2 Compression Ratio": "lrc__average_ilc_output_sector_compression_achieved_rate.pct",
        "L2 Compression Input Sectors": "lrc__ilc_input_sectors.sum",
    },
    "LaunchStats": {
        "# SMs": "launch__sm_count",
        "# TPCs": "launch__tpc_count",
        "Block Size": "launch__block_size",
        "Cluster Scheduling Policy": "launch__cluster_scheduling_policy",
        "Cluster Size": "launch__cluster_size",
        "Driver Shared Memory Per Block": "launch__shared_mem_per_block_driver",
        "Dynamic Shared Memory Per Block": "launch__shared_mem_per_block_dynamic",
        "Enabled TPC IDs": "launch__tpc_enabled",
        "Function Cache Configuration": "launch__func_cache_config",
        "Grid Size": "launch__grid_size",
        "Registers Per Thread": "launch__registers_per_thread",
        "Shared Memory Configuration Size": "launch__shared_mem_config_size",
        "Stack Size": "launch__stack_size",
        "Static Shared Memory Per Block": "launch__shared_mem_per_block_static",
        "Threads": "launch__thread_count",
        "Uses Green Context": "launch__uses_green_context",
        "Waves Per SM": "launch__waves_per_multiprocessor",
    },
    "Occupancy": {
        "Achieved Active Warps Per SM": "sm__warps_active.avg.per_cycle_active",
        "Achieved Occupancy": "sm__warps_active.avg.pct_of_peak_sustained_active",
        "Block Limit Barriers": "launch__occupancy_limit_barriers",
        "Block Limit Registers": "launch__occupancy_limit_registers",
        "Block Limit SM": "launch__occupancy_limit_blocks",
        "Block Limit Shared Mem": "launch__occupancy_limit_shared_mem",
        "Block Limit Warps": "launch__occupancy_limit_warps",
        "Cluster Occupancy": "launch__occupancy_cluster_pct",
        "Max Active Clusters": "launch__cluster_max_active",
        "Max Cluster Size": "launch__cluster_max_potential_size",
        "Overall GPU Occupancy": "launch__occupancy_cluster_gpu_pct",
        "Theoretical Active Warps per SM": "sm__maximum_warps_avg_per_active_cycle",
        "Theoretical Occupancy": "sm__maximum_warps_per_active_cycle_pct",
    },
    "SourceCounters": {
        "Avg. Divergent Branches": "smsp__sass_branch_targets_threads_divergent.avg",
        "Branch Efficiency": "smsp__sass_average_branch_targets_threads_uniform.pct",
        "Branch Instructions": "smsp__inst_executed_op_branch.sum",
        "Branch Instructions Ratio": "derived__smsp__inst_executed_op_branch_pct",
    },
}

#: (section display name, label) -> metric name
LABEL_TO_METRIC: dict[tuple[str, str], str] = {
    (SECTION_NAMES[sec], label): metric for sec, labels in _LABELS.items() for label, metric in labels.items()
}
#: metric name -> section display name (first section that shows it)
METRIC_SECTION: dict[str, str] = {}
for (_sec, _label), _metric in LABEL_TO_METRIC.items():
    METRIC_SECTION.setdefault(_metric, _sec)


def section_display_name(section: str) -> str:
    """A section identifier (as rule rows print it) -> its display name; unknown ones unchanged."""
    return SECTION_NAMES.get(section, section)


def metric_for_label(section: str, label: str) -> str:
    """The metric name a details-page row stands for; the label itself when unknown."""
    return LABEL_TO_METRIC.get((section_display_name(section), label), label)


# ---------------------------------------------------------------------------------------------
# rules

RULE_TYPES = {0: "", 1: "INF", 2: "OPT", 3: "WRN", 4: "ERR"}
SPEEDUP_TYPES = {0: "", 1: "local", 2: "global"}

_LINK_URL = re.compile(r"@url:([^:@]*):([^@]*)@")
_LINK_SECTION = re.compile(r"@section:[^:@]*:([^@]*)@")
_LINK_SASS = re.compile(r"@sass:[^:@]*:([^@]*)@")
_LINK_SOURCE = re.compile(r"@source:[^:@]*:[^:@]*:([^@]*)@")


def render_rule_message(message: str) -> str:
    """The report's link markup rendered as ``ncu --csv`` prints it (``text (url)``, ``text``)."""
    s = _LINK_URL.sub(r"\1 (\2)", message)
    s = _LINK_SECTION.sub(r"\1", s)
    s = _LINK_SASS.sub(r"\1", s)
    return _LINK_SOURCE.sub(r"\1", s)


def rule_row(rule_id: str, rule_type: str, message: str, speedup_type: str, speedup: float) -> tuple[str, str, str, float, str]:
    """(section, metric, unit, value, text) of one rule result, see the module docstring."""
    text = f"{rule_type}: {message}" if rule_type else message
    if speedup_type or not math.isnan(speedup):
        metric = f"estimated_speedup_{speedup_type}" if speedup_type else "estimated_speedup"
        return f"rule:{rule_id}", metric, "%", speedup, text
    return f"rule:{rule_id}", "advice", "", math.nan, text


# ---------------------------------------------------------------------------------------------
# collecting a report


@dataclass
class KernelLaunch:
    """What the loaders know about one profiled kernel before the tables are built."""

    name: str
    grid: tuple[int, int, int] = (-1, -1, -1)
    block: tuple[int, int, int] = (-1, -1, -1)
    device: int = -1
    stream: int = -1
    pid: int = -1
    cc: str = ""
    """compute capability as the CSV prints it ("9.0"); "" when the report's attributes say it"""


@dataclass
class Collected:
    """Kernels in launch order, their metrics (long lists) and numeric values by metric name."""

    launches: list[KernelLaunch] = field(default_factory=list)
    m_kernel: list[int] = field(default_factory=list)
    m_section: list[str] = field(default_factory=list)
    m_metric: list[str] = field(default_factory=list)
    m_unit: list[str] = field(default_factory=list)
    m_value: list[float] = field(default_factory=list)
    m_text: list[str] = field(default_factory=list)
    text_values: dict[str, dict[int, str]] = field(default_factory=dict)

    def add(self, kernel: int, section: str, metric: str, unit: str, value: float, text: str) -> None:
        self.m_kernel.append(kernel)
        self.m_section.append(section)
        self.m_metric.append(metric)
        self.m_unit.append(unit)
        self.m_value.append(value)
        self.m_text.append(text)

    def wide(self) -> dict[str, np.ndarray]:
        """Numeric metric values as ``{metric: array over kernels}`` (NaN where absent).

        Rule and NVTX rows are left out; when a metric repeats for a kernel (a details page
        showing it in two sections) the first value wins.
        """
        n = len(self.launches)
        kernel = np.asarray(self.m_kernel, dtype=np.int64)
        value = np.asarray(self.m_value, dtype=np.float64)
        section = np.asarray(self.m_section, dtype=object)
        keep = ~(pd.Series(section, dtype=object).str.startswith("rule:").to_numpy(dtype=bool) | (section == "nvtx"))
        codes, names = pd.factorize(np.asarray(self.m_metric, dtype=object)[keep])
        grid = np.full((len(names), n), np.nan)
        # fancy assignment keeps the last write: assign in reverse so the first value wins
        grid[codes[::-1], kernel[keep][::-1]] = value[keep][::-1]
        return {str(name): grid[i] for i, name in enumerate(names)}

    def texts(self, metric: str) -> list[str]:
        """The printed text of ``metric`` per kernel ("" where absent)."""
        out = [""] * len(self.launches)
        for k, m, t in zip(self.m_kernel, self.m_metric, self.m_text):
            if m == metric and not out[k]:
                out[k] = t
        return out


# ---------------------------------------------------------------------------------------------
# speed-of-light fields


def _first(wide: Mapping[str, np.ndarray], names: Iterable[str], n: int) -> np.ndarray:
    """Per kernel, the first of ``names`` that has a value."""
    out = np.full(n, np.nan)
    for name in names:
        arr = wide.get(name)
        if arr is not None:
            out = np.where(np.isnan(out), arr, out)
    return out


def _sum_all(wide: Mapping[str, np.ndarray], names: Sequence[str], weights: Sequence[float]) -> np.ndarray | None:
    """Weighted sum when every metric exists (NaN propagates per kernel); None when one is missing."""
    if not all(name in wide for name in names):
        return None
    total = np.zeros_like(wide[names[0]])
    for name, w in zip(names, weights):
        total = total + w * wide[name]
    return total


def duration_ns(wide: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    return _first(wide, ("gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"), n)


def _flops(wide: Mapping[str, np.ndarray], p: str, n: int, cycles: np.ndarray) -> np.ndarray:
    """add + mul + 2 x fma for precision letter ``p`` (d, f, h), as Nsight Compute's roofline does.

    Counts (``*_pred_on.sum``) are used when collected; otherwise the roofline sections' rates
    (``smsp__..._pred_on.sum.per_cycle_elapsed``, and the sections' own ``_x2``/``_x4`` metrics)
    are multiplied by the elapsed SMSP cycles (clock x duration). A half-precision instruction
    works on a half2 pair: the HierarchicalHalfRooflineChart section counts hadd and hmul twice
    (``_x2``) and hfma four times (``_x4``), and so does this.
    """
    out = np.full(n, np.nan)
    ops = [f"{p}add", f"{p}mul", f"{p}fma"]
    weights = (2, 2, 4) if p == "h" else (1, 1, 2)
    for unit in ("sm", "smsp"):
        counts = _sum_all(wide, [f"{unit}__sass_thread_inst_executed_op_{o}_pred_on.sum" for o in ops], weights)
        if counts is not None:
            out = np.where(np.isnan(out), counts, out)
    rate = np.zeros(n)
    have = True
    for o, w in zip(ops, weights):
        derived = f"derived__smsp__sass_thread_inst_executed_op_{o}_pred_on_x{w}"
        plain = f"smsp__sass_thread_inst_executed_op_{o}_pred_on.sum.per_cycle_elapsed"
        if derived in wide:
            rate = rate + wide[derived]
        elif plain in wide:
            rate = rate + w * wide[plain]
        else:
            have = False
    if have:
        out = np.where(np.isnan(out), rate * cycles, out)
    return out


#: the source type of a tensor-op counter -> the precision whose peak applies
_TENSOR_SRC = {"bf16": "bf16", "fp16": "fp16", "f16": "fp16", "tf32": "tf32", "fp8": "fp8", "fp64": "fp64",
               "f64": "fp64", "int8": "int8", "int4": "int4", "int1": "int1", "fp4": "fp4", "fp6": "fp6"}
#: ``sm__ops_path_tensor_src_<src>[_dst_<dst>][_sparsity_<on|off>].sum``: tensor-pipe operations
#: (2 per multiply-add, so a GEMM's count is 2·M·N·K) by source type, the counter family of
#: ``--set full`` on Hopper and later; the per-instruction variants
#: (``sm__ops_path_tensor_op_<hgmma|hmma|...>_src_...``) split the same operations by instruction
_OPS_PATH = re.compile(r"sm__ops_path_tensor_()src_([a-z0-9]+?)(?:_dst_([a-z0-9]+))?(?:_sparsity_(on|off))?\.sum")
_OPS_PATH_OP = re.compile(r"sm__ops_path_tensor_op_([a-z0-9]+)_src_([a-z0-9]+?)(?:_dst_([a-z0-9]+))?(?:_sparsity_(on|off))?\.sum")


def _ops_path_total(wide: Mapping[str, np.ndarray], pattern: re.Pattern[str]) -> dict[str, np.ndarray]:
    """Per precision, the tensor operations of the counters matching ``pattern`` (groups:
    instruction, source, destination, sparsity), each operation counted once.

    Nsight Compute writes a total per source type and, depending on the GPU and version, splits
    of it by destination type and by sparsity; summing a total with its splits would count the
    same operations twice. So per (instruction, source) the least split level present is used:
    the total, else the sum over destinations, else over sparsity, else over both.
    """
    levels: dict[tuple[str, str], dict[int, list[np.ndarray]]] = {}
    for name, values in wide.items():
        m = pattern.fullmatch(name)
        if not m:
            continue
        instr, src, dst, sparse = m.group(1) or "", m.group(2), m.group(3), m.group(4)
        level = (1 if dst else 0) + (2 if sparse else 0)
        levels.setdefault((instr, src), {}).setdefault(level, []).append(np.asarray(values, dtype=np.float64))
    out: dict[str, np.ndarray] = {}
    for (_, src), by_level in levels.items():
        prec = _TENSOR_SRC.get(src)
        if prec is None:
            continue
        arrays = by_level[min(by_level)]
        total = arrays[0]
        for a in arrays[1:]:
            total = np.where(np.isnan(total), a, np.where(np.isnan(a), total, total + a))
        prev = out.get(prec)
        out[prec] = total if prev is None else np.where(np.isnan(prev), total, np.where(np.isnan(total), prev, prev + total))
    return out


def tensor_flops(wide: Mapping[str, np.ndarray], n: int, cycles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Measured tensor-pipe FLOPs per kernel and the precision of the counter that fired.

    In order of preference: the ``sm__ops_path_tensor_src_*`` operation counters (exact; the
    precision is the source type with the most operations), their per-instruction split
    ``sm__ops_path_tensor_op_*_src_*``, then the HierarchicalTensorRooflineChart section's
    ``derived__smsp__inst_executed_pipe_tensor_x512`` rate (512 operations per tensor-pipe
    instruction; precision not known). NaN / "" where none was collected.
    """
    for pattern in (_OPS_PATH, _OPS_PATH_OP):
        by_prec = _ops_path_total(wide, pattern)
        if by_prec:
            names = sorted(by_prec)
            grid = np.vstack([by_prec[p] for p in names])
            seen = ~np.isnan(grid).all(axis=0)
            total = np.where(seen, np.nansum(grid, axis=0), np.nan)
            filled = np.nan_to_num(grid, nan=0.0)
            top = np.argmax(filled, axis=0)
            prec_out = np.where(seen & (filled.max(axis=0) > 0), np.asarray(names, dtype=object)[top], "")
            return total, prec_out.astype(object)
    # older Nsight Compute: the tensor roofline's own approximation, 512 operations per
    # tensor-pipe instruction (its section defines derived__smsp__inst_executed_pipe_tensor_x512 as
    # smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed * 512)
    tensor = np.full(n, np.nan)
    if "derived__smsp__inst_executed_pipe_tensor_x512" in wide:
        tensor = wide["derived__smsp__inst_executed_pipe_tensor_x512"] * cycles
    for name in ("sm__inst_executed_pipe_tensor.sum", "smsp__inst_executed_pipe_tensor.sum"):
        if name in wide:
            tensor = np.where(np.isnan(tensor), 512.0 * wide[name], tensor)
    if "smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed" in wide:
        tensor = np.where(np.isnan(tensor), 512.0 * wide["smsp__inst_executed_pipe_tensor.sum.per_cycle_elapsed"] * cycles, tensor)
    return tensor, np.full(n, "", dtype=object)


def measured_columns(wide: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """The kernels table's measured columns (and ``dur``) from metric values in base units."""
    dur = duration_ns(wide, n)
    dur_s = dur * 1e-9
    smsp_hz = _first(wide, ("smsp__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second",
                            "gpc__cycles_elapsed.avg.per_second"), n)
    cycles = _first(wide, ("smsp__cycles_elapsed.avg",), n)
    cycles = np.where(np.isnan(cycles), smsp_hz * dur_s, cycles)
    cols: dict[str, np.ndarray] = {"dur": dur}
    cols["flops_fp64"] = _flops(wide, "d", n, cycles)
    cols["flops_fp32"] = _flops(wide, "f", n, cycles)
    cols["flops_fp16"] = _flops(wide, "h", n, cycles)
    tensor, tensor_prec = tensor_flops(wide, n, cycles)
    cols["flops_tensor"] = tensor
    cols["tensor_precision"] = tensor_prec

    read = _first(wide, ("dram__bytes_read.sum",), n)
    write = _first(wide, ("dram__bytes_write.sum",), n)
    dram = _first(wide, ("dram__bytes.sum",), n)
    dram = np.where(np.isnan(dram), read + write, dram)
    dram = np.where(np.isnan(dram), _first(wide, ("dram__bytes.sum.per_second",), n) * dur_s, dram)
    cols["dram_bytes"] = dram
    cols["dram_read_bytes"] = read
    cols["dram_write_bytes"] = write

    cols["sm_throughput_pct"] = _first(wide, ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), n)
    cols["mem_throughput_pct"] = _first(wide, ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), n)
    cols["dram_throughput_pct"] = _first(
        wide, ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"), n
    )
    cols["l1_throughput_pct"] = _first(wide, ("l1tex__throughput.avg.pct_of_peak_sustained_active",), n)
    cols["l2_throughput_pct"] = _first(wide, ("lts__throughput.avg.pct_of_peak_sustained_elapsed",), n)
    tensor_pct = _first(
        wide, ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active.avg.pct_of_peak_sustained_elapsed"), n
    )
    ops = [wide[k] for k in wide if re.fullmatch(r"sm__pipe_tensor_op_\w+_cycles_active\.avg\.pct_of_peak_sustained_elapsed", k)]
    if ops:
        tensor_pct = np.where(np.isnan(tensor_pct), np.fmax.reduce(np.vstack(ops), axis=0) if len(ops) > 1 else ops[0], tensor_pct)
    cols["tensor_pipe_pct"] = tensor_pct
    cols["achieved_occupancy_pct"] = _first(wide, ("sm__warps_active.avg.pct_of_peak_sustained_active",), n)
    cols["theoretical_occupancy_pct"] = _first(wide, ("sm__maximum_warps_per_active_cycle_pct",), n)
    cols["sm_clock_hz"] = _first(wide, ("gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"), n)
    cols["dram_clock_hz"] = _first(wide, ("dram__cycles_elapsed.avg.per_second",), n)
    return cols


# ---------------------------------------------------------------------------------------------
# tables


def _int_or(arr: np.ndarray | None, fallback: Sequence[int]) -> np.ndarray:
    fb = np.asarray(fallback, dtype=np.float64)
    if arr is None:
        return fb
    return np.where(np.isnan(arr), fb, arr)


def kernels_table(path: Path, c: Collected, wide: Mapping[str, np.ndarray]) -> tuple[pd.DataFrame, list[Diagnostic]]:
    """The kernels table, laid end to end in launch order; returns (table, warnings)."""
    n = len(c.launches)
    warnings: list[Diagnostic] = []
    cols = measured_columns(wide, n)
    dur = cols.pop("dur")
    missing = np.isnan(dur)
    if missing.any():
        warnings.append(
            Diagnostic.warning("missing_values", path, f"{int(missing.sum())} of {n} kernels have no gpu__time_duration; they are drawn with zero length")
        )
    dur_ns = np.where(missing, 0, np.rint(dur)).astype(np.int64)
    # ncu serialises (and replays) kernels: there are no real start times, lay them end to end
    start = np.concatenate([[0], np.cumsum(dur_ns)[:-1]]) if n else np.zeros(0, dtype=np.int64)
    names = [k.name for k in c.launches]
    shorts = {name: short_name(name) for name in set(names)}

    def launch(attr: str, i: int) -> list[int]:
        return [getattr(k, attr)[i] for k in c.launches]

    get = wide.get
    grid = [_int_or(get(f"launch__grid_dim_{ax}"), launch("grid", i)) for i, ax in enumerate("xyz")]
    block = [_int_or(get(f"launch__block_dim_{ax}"), launch("block", i)) for i, ax in enumerate("xyz")]
    shared = np.full(n, np.nan)
    static, dynamic = get("launch__shared_mem_per_block_static"), get("launch__shared_mem_per_block_dynamic")
    if static is not None and dynamic is not None:
        shared = static + dynamic
    elif static is not None:
        shared = static
    elif dynamic is not None:
        shared = dynamic
    columns: dict[str, Any] = {
        "name": pd.Categorical(names),
        "short_name": pd.Categorical([shorts[x] for x in names]),
        "start": start,
        "dur": dur_ns,
        "device": _int_or(get("launch__device_id"), [k.device for k in c.launches]),
        "stream": _int_or(get("launch__stream_id"), [k.stream for k in c.launches]),
        "pid": np.asarray([k.pid for k in c.launches], dtype=np.int64),
        "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2],
        "block_x": block[0], "block_y": block[1], "block_z": block[2],
        "registers": _int_or(get("launch__registers_per_thread"), [-1] * n),
        "shared_mem": np.where(np.isnan(shared), -1, shared),
        "serialised": np.ones(n, dtype=bool),
        **cols,
    }  # fmt: skip
    return make_table("kernels", n, columns), warnings


def metrics_table(c: Collected) -> pd.DataFrame:
    return make_table(
        "metrics",
        len(c.m_kernel),
        {
            "kernel": np.asarray(c.m_kernel, dtype=np.int64),
            "section": pd.Categorical(c.m_section),
            "metric": pd.Categorical(c.m_metric),
            "unit": pd.Categorical(c.m_unit),
            "value": np.asarray(c.m_value, dtype=np.float64),
            "text": np.asarray(c.m_text, dtype=object),
        },
    )


def devices_table(c: Collected, wide: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """One row per device index, from the ``device__attribute_*`` metrics of its first kernel."""
    n = len(c.launches)
    dev_ids = _int_or(wide.get("launch__device_id"), [k.device for k in c.launches]).astype(np.int64)
    names = c.texts("device__attribute_display_name") if "device__attribute_display_name" in set(c.m_metric) else [""] * n
    rows: dict[int, dict[str, Any]] = {}
    for i in range(n):
        dev = int(dev_ids[i]) if dev_ids[i] >= 0 else 0
        if dev in rows:
            continue

        def attr(name: str) -> float:
            arr = wide.get(f"device__attribute_{name}")
            return float(arr[i]) if arr is not None else math.nan

        major, minor = attr("compute_capability_major"), attr("compute_capability_minor")
        cc = f"{int(major)}.{int(minor)}" if not (math.isnan(major) or math.isnan(minor)) else c.launches[i].cc
        arch = ""
        m = re.fullmatch(r"(\d+)\.(\d+)", cc or "")
        if m:
            arch = f"sm_{m.group(1)}{m.group(2)}"
        sms = attr("multiprocessor_count")
        if math.isnan(sms) and "launch__sm_count" in wide:
            sms = float(wide["launch__sm_count"][i])
        # CUDA reports clock attributes in kHz
        rows[dev] = {
            "id": dev,
            "name": names[i],
            "vendor": "NVIDIA",
            "architecture": arch,
            "compute_capability": cc or "",
            "sm_count": sms,
            "memory_bytes": attr("total_memory"),
            "sm_clock_hz": attr("clock_rate") * 1e3,
            "mem_clock_hz": attr("memory_clock_rate") * 1e3,
            "mem_bus_width": attr("global_memory_bus_width"),
        }
    recs = [rows[k] for k in sorted(rows)]
    cols = {key: [r[key] for r in recs] for key in (recs[0] if recs else {})}
    return make_table("devices", len(recs), cols)
