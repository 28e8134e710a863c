"""What an Nsight Compute user reads first about one kernel, from a trace's ``metrics`` rows.

:func:`kernel_counters` turns the metrics of one kernel (of an Nsight Compute report, or of a
timeline kernel that a report was attached to) into the sections of ncu's details page, as data:

* speed of light: compute (SM) and memory throughput, the bars ncu draws, with the memory
  breakdown (L1/TEX, L2, DRAM) and duration/clocks;
* launch statistics: grid, block, threads, registers, shared memory, waves per SM;
* occupancy: theoretical vs achieved (percent and warps per SM) and the block limits, the
  smallest of which is the limiter;
* memory workload: DRAM/L2/L1 bytes and throughput, hit rates;
* the rule results ncu stored (OPT/WRN/INF messages with their estimated speedup).

A section the report did not collect is listed in ``missing`` with the ``--section`` that
collects it. Unknown values stay NaN (shown as "—"), never 0. No Qt here: the ncu panel
(:mod:`kviewer.ui.ncu_panel`) renders this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kviewer.core import Trace


@dataclass(frozen=True)
class Row:
    label: str
    value: float
    unit: str
    """"%", "byte", "byte/s", "ns", "Hz", "" (a count), or "text" (see ``text``)"""
    text: str = ""
    metric: str = ""


@dataclass(frozen=True)
class Section:
    key: str
    """the ``ncu --section`` identifier"""
    title: str
    rows: list[Row]
    collected: bool


@dataclass(frozen=True)
class Rule:
    rule: str
    kind: str
    """OPT, WRN, INF, ERR or "" """
    message: str
    speedup_pct: float
    """estimated speedup (NaN when the rule estimates none)"""
    speedup_kind: str
    """"local", "global" or "" """


@dataclass
class KernelCounters:
    kernel: int
    name: str
    sections: list[Section] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    limiter: str = ""
    """the occupancy limiter ("registers", "shared memory", "warps", "blocks per SM", "barriers"; "" unknown)"""

    def section(self, key: str) -> Section:
        for s in self.sections:
            if s.key == key:
                return s
        raise KeyError(key)

    @property
    def missing(self) -> list[Section]:
        return [s for s in self.sections if not s.collected]

    @property
    def has_counters(self) -> bool:
        return any(s.collected for s in self.sections)


# (section key, title, the metric whose presence says it was collected, rows: (label, metrics..., unit))
_SECTIONS: tuple[tuple[str, str, tuple[str, ...], tuple[tuple[str, tuple[str, ...], str], ...]], ...] = (
    ("SpeedOfLight", "GPU Speed Of Light Throughput", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), (
        ("Compute (SM) Throughput", ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("Memory Throughput", ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("L1/TEX Cache Throughput", ("l1tex__throughput.avg.pct_of_peak_sustained_active",), "%"),
        ("L2 Cache Throughput", ("lts__throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("DRAM Throughput", ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"), "%"),
        ("Duration", ("gpu__time_duration.sum",), "ns"),
        ("Elapsed Cycles", ("gpc__cycles_elapsed.max",), ""),
        ("SM Frequency", ("gpc__cycles_elapsed.avg.per_second",), "Hz"),
        ("DRAM Frequency", ("dram__cycles_elapsed.avg.per_second",), "Hz"),
    )),
    ("LaunchStats", "Launch Statistics", ("launch__grid_size", "launch__waves_per_multiprocessor"), (
        ("Grid Size", ("launch__grid_size",), ""),
        ("Block Size", ("launch__block_size",), ""),
        ("Threads", ("launch__thread_count",), ""),
        ("Registers Per Thread", ("launch__registers_per_thread",), ""),
        ("Static Shared Memory Per Block", ("launch__shared_mem_per_block_static",), "byte"),
        ("Dynamic Shared Memory Per Block", ("launch__shared_mem_per_block_dynamic",), "byte"),
        ("# SMs", ("launch__sm_count",), ""),
        ("Waves Per SM", ("launch__waves_per_multiprocessor",), ""),
    )),
    ("Occupancy", "Occupancy", ("sm__maximum_warps_per_active_cycle_pct", "launch__occupancy_limit_registers"), (
        ("Theoretical Occupancy", ("sm__maximum_warps_per_active_cycle_pct",), "%"),
        ("Achieved Occupancy", ("sm__warps_active.avg.pct_of_peak_sustained_active",), "%"),
        ("Theoretical Active Warps per SM", ("sm__maximum_warps_avg_per_active_cycle",), ""),
        ("Achieved Active Warps Per SM", ("sm__warps_active.avg.per_cycle_active",), ""),
        ("Block Limit Registers", ("launch__occupancy_limit_registers",), ""),
        ("Block Limit Shared Mem", ("launch__occupancy_limit_shared_mem",), ""),
        ("Block Limit Warps", ("launch__occupancy_limit_warps",), ""),
        ("Block Limit SM", ("launch__occupancy_limit_blocks",), ""),
        ("Block Limit Barriers", ("launch__occupancy_limit_barriers",), ""),
    )),
    ("MemoryWorkloadAnalysis", "Memory Workload Analysis", ("lts__t_sector_hit_rate.pct", "dram__bytes.sum.per_second"), (
        ("DRAM Bytes", ("dram__bytes.sum",), "byte"),
        ("DRAM Read", ("dram__bytes_read.sum",), "byte"),
        ("DRAM Write", ("dram__bytes_write.sum",), "byte"),
        ("L2 Bytes", ("lts__t_bytes.sum",), "byte"),
        ("L1/TEX Bytes", ("l1tex__t_bytes.sum",), "byte"),
        ("DRAM Bandwidth", ("dram__bytes.sum.per_second",), "byte/s"),
        ("L2 Hit Rate", ("lts__t_sector_hit_rate.pct",), "%"),
        ("L1/TEX Hit Rate", ("l1tex__t_sector_hit_rate.pct",), "%"),
        ("Mem Busy", ("gpu__compute_memory_access_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("Max Bandwidth", ("gpu__compute_memory_request_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
    )),
    ("ComputeWorkloadAnalysis", "Compute Workload Analysis", ("sm__inst_executed.avg.per_cycle_active",), (
        ("Executed Ipc Active", ("sm__inst_executed.avg.per_cycle_active",), ""),
        ("Issue Slots Busy", ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("SM Busy", ("sm__instruction_throughput.avg.pct_of_peak_sustained_elapsed",), "%"),
        ("Tensor Pipe", ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"), "%"),
    )),
)  # fmt: skip

#: the sections worth a hint when absent, with the metric that says they were collected
ROOFLINE_SECTION = ("SpeedOfLight_RooflineChart", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed")
_LIMITS = (
    ("launch__occupancy_limit_registers", "registers"),
    ("launch__occupancy_limit_shared_mem", "shared memory"),
    ("launch__occupancy_limit_warps", "warps"),
    ("launch__occupancy_limit_blocks", "blocks per SM"),
    ("launch__occupancy_limit_barriers", "barriers"),
)


def _values(m: pd.DataFrame) -> tuple[dict[str, float], dict[str, str]]:
    names = m["metric"].astype(str).to_numpy()
    vals = m["value"].to_numpy(np.float64)
    texts = m["text"].to_numpy(dtype=object)
    v: dict[str, float] = {}
    t: dict[str, str] = {}
    for n, x, s in zip(names, vals, texts):
        v.setdefault(n, float(x))
        t.setdefault(n, str(s))
    return v, t


def kernel_metrics(trace: Trace, kernel: int) -> pd.DataFrame:
    """The metrics rows of one kernel (empty when none)."""
    m = trace.metrics
    if not len(m):
        return m
    return m[m["kernel"].to_numpy() == kernel]


def kernel_counters(trace: Trace, kernel: int) -> KernelCounters:
    """The details-page view of one kernel (see the module docstring)."""
    k = trace.kernels
    name = str(k["short_name"].iloc[kernel]) if 0 <= kernel < len(k) else ""
    m = kernel_metrics(trace, kernel)
    v, t = _values(m) if len(m) else ({}, {})
    out = KernelCounters(kernel, name)
    for key, title, probe, rows in _SECTIONS:
        collected = any(p in v for p in probe)
        items: list[Row] = []
        for label, metrics, unit in rows:
            value, text, used = math.nan, "", ""
            for metric in metrics:
                if metric in v:
                    value, text, used = v[metric], t.get(metric, ""), metric
                    break
            if key == "MemoryWorkloadAnalysis" and label == "DRAM Bytes" and math.isnan(value) and 0 <= kernel < len(k):
                value = float(k["dram_bytes"].iloc[kernel])  # the loader's derivation (rate x duration)
                used = "dram_bytes" if not math.isnan(value) else ""
            if math.isnan(value) and text and unit in ("", "text"):
                items.append(Row(label, value, "text", text, used))
            else:
                items.append(Row(label, value, unit, "", used))
        out.sections.append(Section(key, title, items, collected))
    limits = [(v[metric], what) for metric, what in _LIMITS if metric in v and not math.isnan(v[metric])]
    if limits:
        low = min(x for x, _ in limits)
        out.limiter = ", ".join(what for x, what in limits if x == low)
    out.sections.append(Section(ROOFLINE_SECTION[0], "GPU Speed Of Light Roofline Chart", [], ROOFLINE_SECTION[1] in v))
    if len(m):
        sec = m["section"].astype(str).to_numpy()
        rules = m[pd.Series(sec).str.startswith("rule:").to_numpy()]
        for s, metric, value, text in zip(rules["section"].astype(str), rules["metric"].astype(str), rules["value"].to_numpy(np.float64), rules["text"]):
            text = str(text)
            kind, _, msg = text.partition(": ")
            if kind not in ("OPT", "WRN", "INF", "ERR"):
                kind, msg = "", text
            speedup_kind = metric.rsplit("_", 1)[-1] if metric.startswith("estimated_speedup_") else ""
            out.rules.append(Rule(s[len("rule:"):], kind, msg, float(value) if metric.startswith("estimated_speedup") else math.nan, speedup_kind))
        order = {"ERR": 0, "WRN": 1, "OPT": 2, "INF": 3, "": 4}
        out.rules.sort(key=lambda r: (order.get(r.kind, 4), -(r.speedup_pct if not math.isnan(r.speedup_pct) else -1)))
    return out


def all_sections(trace: Trace, kernel: int) -> tuple[list[tuple[str, list[Row]]], int]:
    """Every section the report stored for the kernel with all its metrics (for browsing), and the
    number of metrics outside any section."""
    m = kernel_metrics(trace, kernel)
    if not len(m):
        return [], 0
    sec = m["section"].astype(str).to_numpy()
    keep = ~(pd.Series(sec).str.startswith("rule:").to_numpy() | (sec == "nvtx"))
    out: dict[str, list[Row]] = {}
    loose = 0
    for s, metric, unit, value, text in zip(sec[keep], m["metric"].astype(str).to_numpy()[keep], m["unit"].astype(str).to_numpy()[keep],
                                            m["value"].to_numpy(np.float64)[keep], m["text"].to_numpy(dtype=object)[keep]):
        if s in ("", "launch"):
            loose += 1
            continue
        label = metric.split(":", 1)[-1]
        if math.isnan(value):
            out.setdefault(s, []).append(Row(label, value, "text", str(text), metric))
        else:
            out.setdefault(s, []).append(Row(label, float(value), unit, "", metric))
    return sorted(out.items()), loose


def section_metrics() -> list[str]:
    """Every metric name the sections show (what a kernel view puts first)."""
    return [metric for _k, _t, _p, items in _SECTIONS for _l, metrics, _u in items for metric in metrics]


def sections_hint(sections: list[Section]) -> str:
    """The ncu options that would collect the missing sections."""
    return " ".join(f"--section {s.key}" for s in sections)


__all__ = ["KernelCounters", "Row", "Rule", "Section", "all_sections", "kernel_counters", "kernel_metrics", "section_metrics", "sections_hint"]
