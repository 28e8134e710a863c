"""The unified data model, declared once as data.

Every table of a :class:`~kviewer.core.trace.Trace` is a pandas DataFrame whose columns are
listed here, with their dtype, what an unknown value looks like and what they mean. Loaders build
their columns as numpy arrays and hand them to :func:`make_table`, which fills the columns a
source does not know with the column's "missing" value and casts everything to the declared dtype.

Conventions
-----------
* Time is int64 nanoseconds relative to ``Trace.meta.origin_ns``.
* Unknown integers are ``-1`` (the tables stay numpy-backed, no nullable dtypes); unknown floats
  are ``NaN``; unknown strings are ``""``.
* String columns that repeat (names, categories) are pandas ``category``.
* Sort invariant: ``kernels``, ``gpu_ops`` and ``cpu_slices`` are sorted by ``start`` (stable), and
  ``id`` is the row position after sorting, so ``table.iloc[id]`` is the row with that id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd

INT = "int64"
I32 = "int32"
FLOAT = "float64"
CAT = "category"
STR = "str"  # free text; stored as object/str dtype
BOOL = "bool"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    doc: str
    missing: Any = None

    def fill(self, n: int) -> Any:
        """An array of n missing values of this column's dtype."""
        if self.dtype in (INT, I32):
            return np.full(n, -1 if self.missing is None else self.missing, dtype=self.dtype)
        if self.dtype == FLOAT:
            return np.full(n, np.nan, dtype=np.float64)
        if self.dtype == BOOL:
            return np.zeros(n, dtype=bool)
        if self.dtype == CAT:
            # from codes: the same categorical as pd.Categorical([""] * n) without hashing n strings
            return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([""])) if n else pd.Categorical([])
        return np.full(n, "", dtype=object)


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]
    sort_by: str | None = "start"

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.name} has no column {name!r}")


def _time_cols() -> tuple[Column, ...]:
    return (
        Column("start", INT, "start, ns relative to the trace origin"),
        Column("end", INT, "end, ns relative to the trace origin"),
        Column("dur", INT, "duration in ns (end - start)"),
    )


KERNELS = Table(
    "kernels",
    "GPU kernel executions, one row per launch.",
    (
        Column("id", INT, "row id (position after sorting by start)"),
        Column("name", CAT, "full (demangled) kernel name as the tool reports it"),
        Column("short_name", CAT, "short name: without arguments and template parameters"),
        *_time_cols(),
        Column("device", I32, "device index within the trace (devices.id)"),
        Column("stream", INT, "stream / queue id"),
        Column("rank", I32, "distributed rank, -1 when unknown", -1),
        Column("pid", INT, "process id of the launching process"),
        Column("tid", INT, "thread id of the launching thread"),
        Column("correlation", INT, "correlation id linking the launch call"),
        Column("external_id", INT, "framework op id (PyTorch External id)"),
        Column("grid_x", I32, "grid size x (blocks; workgroups for AMD)"),
        Column("grid_y", I32, "grid size y"),
        Column("grid_z", I32, "grid size z"),
        Column("block_x", I32, "block size x (threads; workgroup size for AMD)"),
        Column("block_y", I32, "block size y"),
        Column("block_z", I32, "block size z"),
        Column("registers", I32, "registers per thread"),
        Column("shared_mem", INT, "static + dynamic shared memory (LDS) per block, bytes"),
        Column("dynamic_shared_mem", INT, "the dynamic part of shared_mem, bytes (-1 when the source does not split it)"),
        Column("context", INT, "CUDA context id (Nsight Systems contextId)"),
        Column("serialised", BOOL, "True when start times are not real (Nsight Compute replays)"),
        # measured (by a profiler's counters); NaN when not collected
        Column("flops_fp64", FLOAT, "measured FP64 FLOP count"),
        Column("flops_fp32", FLOAT, "measured FP32 FLOP count"),
        Column("flops_fp16", FLOAT, "measured FP16/BF16 (non-tensor) FLOP count"),
        Column("flops_tensor", FLOAT, "measured tensor-core / matrix-core FLOP count"),
        Column("tensor_precision", CAT, "precision of the tensor-op counter that fired (bf16, fp16, tf32, fp8, int8, fp64)"),
        Column("dram_bytes", FLOAT, "measured DRAM bytes read + written"),
        Column("dram_read_bytes", FLOAT, "measured DRAM bytes read"),
        Column("dram_write_bytes", FLOAT, "measured DRAM bytes written"),
        Column("sm_throughput_pct", FLOAT, "Nsight Compute compute (SM) throughput, % of peak"),
        Column("mem_throughput_pct", FLOAT, "Nsight Compute memory throughput, % of peak"),
        Column("dram_throughput_pct", FLOAT, "DRAM throughput, % of peak"),
        Column("l1_throughput_pct", FLOAT, "Nsight Compute L1/TEX cache throughput, % of peak"),
        Column("l2_throughput_pct", FLOAT, "Nsight Compute L2 cache throughput, % of peak"),
        Column("tensor_pipe_pct", FLOAT, "tensor pipe utilisation, % of peak"),
        Column("achieved_occupancy_pct", FLOAT, "achieved occupancy, %"),
        Column("theoretical_occupancy_pct", FLOAT, "theoretical occupancy, %"),
        Column("sm_clock_hz", FLOAT, "SM clock during the kernel, Hz"),
        Column("dram_clock_hz", FLOAT, "DRAM clock during the kernel, Hz"),
        # modelled (from the framework op that launched the kernel); NaN when unknown
        Column("model_flops", FLOAT, "modelled FLOPs (from the launching op)"),
        Column("model_bytes", FLOAT, "modelled bytes read + written (from shapes and dtypes)"),
        # where the measured columns came from when a counter report was merged onto a timeline
        Column("counters", CAT, "'measured': a counter report profiled this launch; 'inherited': copied from a "
               "profiled launch of the same kernel, launch size and shapes (another step); '' otherwise"),
        Column("counters_from", INT, "kernels.id of the profiled launch whose counters this row holds, -1 when none"),
        # CUDA / HIP graphs (kviewer.io.graphs): a kernel a graph launch ran
        Column("graph_id", INT, "the graph it ran in: the profiler's graph id (Nsight Systems graphId) or, where the "
               "profiler names none (Kineto), the number of the distinct kernel sequence its launch ran; -1 when not in a graph"),
        Column("graph_node", INT, "graph node id (Nsight Systems graphNodeId); -1 when unknown or not in a graph"),
        Column("graph_launch", INT, "graph_launches.id of the graph launch it ran in; -1 when not in a graph"),
        # collectives (NCCL / RCCL kernels): what the framework recorded about the call, so that the
        # same collective can be matched on every rank (kviewer.analysis.collectives)
        Column("collective", CAT, "the collective a communication kernel runs as the framework names it (Kineto "
               "'Collective name': allreduce, allgather, ...); '' when not recorded"),
        Column("process_group", CAT, "the process group (communicator) it runs on (Kineto 'Process Group Name'); '' when unknown"),
        Column("collective_seq", INT, "the collective's sequence number on its process group (Kineto 'Seq'); -1 when unknown"),
    ),
)

GPU_OPS = Table(
    "gpu_ops",
    "GPU memory operations: memcpy and memset.",
    (
        Column("id", INT, "row id"),
        Column("kind", CAT, "memcpy | memset"),
        Column("name", CAT, "name as the tool reports it (e.g. 'Memcpy HtoD (Pinned -> Device)')"),
        *_time_cols(),
        Column("bytes", INT, "bytes copied or set"),
        Column("direction", CAT, "HtoD, DtoH, DtoD, HtoH, PtoP, ... for memcpy; '' for memset"),
        Column("device", I32, "device index"),
        Column("stream", INT, "stream / queue id"),
        Column("rank", I32, "distributed rank", -1),
        Column("pid", INT, "process id"),
        Column("correlation", INT, "correlation id of the API call"),
        Column("external_id", INT, "framework op id"),
        Column("value", INT, "memset: the value written; -1 for memcpy or when unknown"),
        Column("src_kind", CAT, "memcpy: memory kind of the source as the tool names it (Pageable, Pinned, Device, ...)"),
        Column("dst_kind", CAT, "memory kind of the destination (memcpy) or of the memory set (memset)"),
        Column("context", INT, "CUDA context id (Nsight Systems contextId)"),
    ),
)

CPU_SLICES = Table(
    "cpu_slices",
    "Host-side intervals: runtime/driver API calls, framework ops, python frames, NVTX / user ranges.",
    (
        Column("id", INT, "row id"),
        Column("name", CAT, "name (runtime names without a four-digit _vNNNN suffix, as nsys stats names them)"),
        Column("category", CAT, "runtime | driver | op | python | annotation | nvtx | sync | other"),
        *_time_cols(),
        Column("rank", I32, "distributed rank", -1),
        Column("pid", INT, "process id"),
        Column("tid", INT, "thread id"),
        Column("depth", I32, "nesting depth on its thread (0 = outermost)"),
        Column("correlation", INT, "correlation id (runtime/driver calls)"),
        Column("external_id", INT, "framework op id (PyTorch External id)"),
        Column("input_dims", CAT, "op input shapes, JSON text"),
        Column("input_types", CAT, "op input dtypes, JSON text"),
        Column("concrete_inputs", CAT, "op scalar arguments (strides, flags), JSON text"),
        Column("flops", FLOAT, "FLOPs the framework reports for the op"),
        Column("style", CAT, "how an NVTX range was recorded: push_pop | start_end; '' otherwise"),
        Column("domain", CAT, "NVTX domain of the range ('' = the default domain; named domains also prefix the name)"),
        Column("name_id", INT, "the source's id of the name (Nsight Systems StringIds id of an API or OS runtime call; -1 "
               "elsewhere): cudaMalloc and cudaMalloc_v3020 share a name but not an id, and nsys stats counts them apart"),
    ),
)

FLOWS = Table(
    "flows",
    "Launch -> GPU operation links.",
    (
        Column("src", INT, "cpu_slices.id of the launching call"),
        Column("dst_table", CAT, "kernels | gpu_ops"),
        Column("dst", INT, "id in dst_table"),
        Column("correlation", INT, "the correlation id that links them"),
    ),
    sort_by=None,
)

DEVICES = Table(
    "devices",
    "GPUs as the source describes them.",
    (
        Column("id", I32, "device index used by the other tables"),
        Column("name", STR, "product name as reported (e.g. 'NVIDIA H200')"),
        Column("vendor", STR, "NVIDIA | AMD | ''"),
        Column("architecture", STR, "e.g. 'sm_90', 'gfx942'"),
        Column("compute_capability", STR, "e.g. '9.0' (NVIDIA)"),
        Column("sm_count", I32, "SMs (NVIDIA) or CUs (AMD)"),
        Column("memory_bytes", INT, "device memory, bytes"),
        Column("sm_clock_hz", FLOAT, "SM/core clock as reported, Hz"),
        Column("mem_clock_hz", FLOAT, "memory clock as reported, Hz"),
        Column("mem_bus_width", I32, "memory bus width, bits"),
        Column("rank", I32, "rank this device belongs to", -1),
        Column("ordinal", I32, "the device's own number in its file (the CUDA/HIP ordinal the profiler recorded) when "
               "it differs from id: ranks merged into one trace are renumbered so that an id names one device of one "
               "rank, and each keeps its ordinal here; -1: the same as id", -1),
    ),
    sort_by=None,
)

METRICS = Table(
    "metrics",
    "Every metric a counter profiler (Nsight Compute, rocprof) reports, long format, base units.",
    (
        Column("kernel", INT, "kernels.id"),
        Column("section", CAT, "section (Nsight Compute) or block (rocprof)"),
        Column("metric", CAT, "metric name"),
        Column("unit", CAT, "base unit after normalisation (ns, byte, FLOP, Hz, %, ...)"),
        Column("value", FLOAT, "numeric value in base units, NaN if not numeric"),
        Column("text", STR, "the value as the tool printed it"),
    ),
    sort_by=None,
)

GRAPH_LAUNCHES = Table(
    "graph_launches",
    "CUDA / HIP graph launches, one row per launch (cudaGraphLaunch / hipGraphLaunch): a unit of GPU work.",
    (
        Column("id", INT, "row id (position after sorting by start)"),
        Column("graph_id", INT, "the graph (kernels.graph_id); -1 when unknown"),
        *_time_cols(),
        Column("device", I32, "device index"),
        Column("stream", INT, "stream the graph was launched into (its first kernel's stream for a node-level trace)"),
        Column("rank", I32, "distributed rank", -1),
        Column("pid", INT, "process id of the launching process"),
        Column("tid", INT, "thread id of the launching thread"),
        Column("correlation", INT, "correlation id of the launch call"),
        Column("launch", INT, "cpu_slices.id of the launch call (cudaGraphLaunch); -1 when the trace has none"),
        Column("launch_ns", INT, "duration of the launch call on the CPU, ns; -1 when unknown"),
        Column("kernels", INT, "kernels this launch ran (rows of kernels); -1 when the profiler recorded the launch as "
               "one activity (Nsight Systems --cuda-graph-trace=graph)"),
        Column("level", CAT, "node: the trace has the graph's kernels | graph: one activity per launch"),
    ),
)

MEMORY = Table(
    "memory",
    "Memory allocator events: one row per allocation (bytes > 0) or free (bytes < 0), with the totals after it.",
    (
        Column("id", INT, "row id (position after sorting by start)"),
        Column("start", INT, "time of the event, ns relative to the trace origin"),
        Column("device", I32, "device index of the memory (devices.id); -1 for host memory"),
        Column("device_type", CAT, "cuda | cpu | ... : the kind of memory as the profiler names it"),
        Column("rank", I32, "distributed rank", -1),
        Column("pid", INT, "process id"),
        Column("tid", INT, "thread id of the allocating thread"),
        Column("addr", INT, "address of the block; -1 when unknown"),
        Column("bytes", INT, "bytes allocated (> 0) or freed (< 0)"),
        Column("total_allocated", INT, "bytes allocated on the device after this event, as the profiler reports it; "
               "-1 when it does not"),
        Column("total_reserved", INT, "bytes the allocator holds on the device after this event; -1 when unknown"),
        Column("source", CAT, "what recorded it: kineto | cudaMalloc | cudaFree | nsys memory usage | ..."),
    ),
)

KERNEL_STATS = Table(
    "kernel_stats",
    "A profiler's own per-name kernel summary (rocprof --stats results.stats.csv, rocprofv3 "
    "*kernel_stats.csv) when that is all a file holds: one row per name, no dispatch times. "
    "Numbers the file does not give are unknown (NaN), never derived.",
    (
        Column("name", CAT, "kernel name as the profiler printed it"),
        Column("count", INT, "calls"),
        Column("total_ns", INT, "total duration, ns"),
        Column("avg_ns", FLOAT, "mean duration, ns (the file's own figure)"),
        Column("med_ns", FLOAT, "median duration, ns; NaN (no profiler stats file gives it)"),
        Column("min_ns", FLOAT, "shortest call, ns; NaN when the file does not say (rocprof v1)"),
        Column("max_ns", FLOAT, "longest call, ns; NaN when the file does not say (rocprof v1)"),
        Column("std_ns", FLOAT, "standard deviation, ns, as the profiler computed it; NaN when absent"),
        Column("time_pct", FLOAT, "share of the total kernel time, % (the file's own figure)"),
    ),
    sort_by=None,
)

GPU_SAMPLES = Table(
    "gpu_samples",
    "Device-wide metrics sampled at a fixed rate (Nsight Systems GPU_METRICS, rocprofv3 counter "
    "sampling), long format, sorted by (device, metric, t). A sample's value holds from its time "
    "until the next sample of the same metric.",
    (
        Column("device", I32, "devices.id"),
        Column("metric", CAT, "metric name as the profiler names it (TARGET_INFO_GPU_METRICS.metricName)"),
        Column("t", INT, "sample time, ns relative to the trace origin"),
        Column("value", FLOAT, "the sampled value in the metric's unit (see the name's [unit])"),
    ),
    sort_by=None,
)

#: separates the frames of a sampled stack (a character no symbol name holds; ``;`` can, in C++)
STACK_SEP = "\x1f"

CPU_SAMPLES = Table(
    "cpu_samples",
    "CPU samples with their call stacks (Nsight Systems ``--sample=cpu --backtrace=...``: "
    "COMPOSITE_EVENTS and SAMPLING_CALLCHAINS), one row per sample, sorted by time. A thread is "
    "sampled while it runs, at the sampling rate; an unresolved frame is named by its module "
    "(``[libc.so.6]``), as perf does.",
    (
        Column("start", INT, "sample time, ns relative to the trace origin"),
        Column("rank", I32, "distributed rank", -1),
        Column("pid", INT, "process id"),
        Column("tid", INT, "thread id"),
        Column("state", CAT, "thread state as the profiler names it (Running, ...)"),
        Column("stack", CAT, "the call stack, outermost frame first, frames separated by STACK_SEP"),
    ),
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (KERNELS, GPU_OPS, CPU_SLICES, FLOWS, DEVICES, METRICS, GRAPH_LAUNCHES, MEMORY, KERNEL_STATS, GPU_SAMPLES, CPU_SAMPLES)
}

#: a key of the ``tables`` a caller reads (:func:`kviewer.io.load`) besides the tables above: the
#: framework op rows of ``cpu_slices`` (category ``op``: PyTorch's ``aten::`` ops) that the kernel
#: -> op join reads (:func:`kviewer.analysis.kinds.kernel_op_rows`). A loader reading part of a
#: format without framework ops (Nsight Systems: its PyTorch ranges are NVTX) reads nothing for it.
OPS = "ops"

# ---------------------------------------------------------------------------------------------
# analysis results: tables an analysis computes from a trace (not stored in a Trace)

#: the columns of a fusion-candidate table (:func:`kviewer.analysis.fusion.fusion_candidates`)
FUSION_COLUMNS = [
    "rank",
    "kind",
    "chain",
    "kernels",
    "count",
    "length",
    "measured_ns",
    "fused_est_ns",
    "fused_sol_ns",
    "savings_ns",
    "savings_per_instance_ns",
    "gpu_time_pct",
    "bytes_saved",
    "intermediate",
    "remedy",
    "confidence",
    "note",
    "kernel_ids",
]


SOL = Table(
    "sol",
    "Speed of light per kernel (kviewer.analysis.sol): one row per kernel, in kernel id order.",
    (
        Column("id", INT, "kernels.id"),
        Column("name", STR, "full kernel name"),
        Column("short_name", STR, "short kernel name"),
        Column("device", INT, "device index (devices.id)"),
        Column("stream", INT, "stream / queue id"),
        Column("start", INT, "start, ns relative to the trace origin"),
        Column("dur", INT, "measured duration, ns"),
        Column("gpu", STR, "devices.toml id of the GPU whose peaks were used; '' when unknown"),
        Column("kind", STR, "kernel kind (kviewer.analysis.kinds)"),
        Column("op_name", STR, "the framework op that launched the kernel, '' when unknown"),
        Column("precision", STR, "precision of the arithmetic that sets the roof (fp32, bf16, ...)"),
        Column("pipe", STR, "vector | tensor"),
        Column("flops", FLOAT, "FLOPs (measured, else modelled); NaN when unknown"),
        Column("flops_source", STR, "measured | modelled | unknown"),
        Column("bytes", FLOAT, "DRAM bytes (measured, else modelled); NaN when unknown"),
        Column("bytes_source", STR, "measured | modelled | unknown"),
        Column("bytes_written", FLOAT, "modelled bytes written; NaN when unknown"),
        Column("intensity", FLOAT, "arithmetic intensity, FLOPs per byte"),
        Column("peak_flops", FLOAT, "peak FLOP/s of the precision and pipe"),
        Column("peak_field", STR, "the devices.toml field the peak came from"),
        Column("peak_bw", FLOAT, "peak DRAM bandwidth, bytes/s"),
        Column("t_compute_ns", FLOAT, "FLOPs at the peak, ns"),
        Column("t_memory_ns", FLOAT, "bytes at the bandwidth, ns"),
        Column("t_sol_ns", FLOAT, "speed-of-light time, ns; NaN when unknown or above the measured time"),
        Column("sol_pct", FLOAT, "t_sol_ns / dur x 100; NaN when unknown, never above 100"),
        Column("bound", STR, "memory | compute | unknown: the roofline's verdict, else Nsight Compute's"),
        Column("bound_model", STR, "memory | compute | unknown: the roofline's verdict alone"),
        Column("ncu_sm_pct", FLOAT, "Nsight Compute SM throughput, %"),
        Column("ncu_mem_pct", FLOAT, "Nsight Compute memory throughput, %"),
        Column("note", STR, "how the numbers were obtained, in words"),
        Column("sol_status", STR, "ok | unknown | exceeds_peak"),
        Column("sol_reason", STR, "for exceeds_peak: which term broke physics (analysis.sol.SOL_REASONS)"),
        Column("ncu_bound", STR, "memory | compute from Nsight Compute's throughputs; '' when not measured"),
    ),
    sort_by=None,
)

MFU = Table(
    "mfu",
    "Model FLOPs utilisation per (rank, step) (kviewer.analysis.mfu): MFU, HFU, the step's speed of light and its "
    "compute / memory / idle split.",
    (
        Column("rank", INT, "rank (-1 when the trace has none)"),
        Column("step", INT, "step number"),
        Column("name", STR, "step marker name"),
        Column("start", INT, "start of the step's marker range, ns relative to the trace origin"),
        Column("end", INT, "end of the step's marker range, ns relative to the trace origin"),
        Column("gpu_end", INT, "end of the last kernel launched in the step, ns relative to the trace origin (-1: none); "
               "past ``end`` when the GPU runs behind the host"),
        Column("step_ns", INT, "step time, ns: the host range, or the GPU span of its kernels when longer"),
        Column("time_basis", STR, "'host range' | 'GPU span': which time step_ns is"),
        Column("kernel_count", INT, "kernels launched in the step"),
        Column("model_flops", FLOAT, "the ops' FLOPs, each op once, no recomputation; NaN when none is known"),
        Column("hardware_flops", FLOAT, "FLOPs executed: measured counters, else modelled with recomputation"),
        Column("unknown_kernels", INT, "kernels whose FLOPs are unknown (not counted as 0)"),
        Column("unknown_ns", FLOAT, "kernel time of those kernels, ns"),
        Column("precision", STR, "precision holding most of the model FLOPs"),
        Column("pipe", STR, "tensor | vector: the pipe of that precision"),
        Column("peak_flops", FLOAT, "dense peak FLOP/s of that precision and pipe (devices.toml)"),
        Column("peak_field", STR, "the devices.toml field of the peak"),
        Column("gpu", STR, "devices.toml id of the GPU"),
        Column("mfu", FLOAT, "model_flops / (step_ns x peak_flops); a lower bound when unknown_ns > 0"),
        Column("hfu", FLOAT, "hardware_flops / (step_ns x peak_flops)"),
        Column("sol_ns", FLOAT, "sum of the step's kernels' speed-of-light times, ns (known ones)"),
        Column("sol_step", FLOAT, "sol_ns / step_ns"),
        Column("sol_unknown_ns", FLOAT, "kernel time whose speed of light is unknown, ns"),
        Column("compute_ns", FLOAT, "GPU time running compute-bound kernels, ns"),
        Column("memory_ns", FLOAT, "GPU time running memory-bound kernels (no compute-bound one), ns"),
        Column("unknown_bound_ns", FLOAT, "GPU time running only kernels without a verdict, ns"),
        Column("idle_ns", FLOAT, "step time with no kernel of the step running (launch gaps, host work), ns"),
        Column("note", STR, "why a utilisation is unknown ('' when nothing to say)"),
    ),
    sort_by=None,
)

MFU_JOB = Table(
    "mfu_job",
    "Model FLOPs utilisation per step of a job over its ranks (kviewer.analysis.mfu).",
    (
        Column("step", INT, "step number"),
        Column("ranks", INT, "ranks that ran the step"),
        Column("step_ns", INT, "the slowest rank's step time, ns"),
        Column("slowest_rank", INT, "that rank"),
        Column("model_flops", FLOAT, "model FLOPs summed over the ranks"),
        Column("hardware_flops", FLOAT, "hardware FLOPs summed over the ranks"),
        Column("unknown_ns", FLOAT, "kernel time without known FLOPs, summed over the ranks, ns"),
        Column("peak_flops", FLOAT, "the ranks' peaks summed, FLOP/s"),
        Column("mfu", FLOAT, "model_flops / (step_ns x peak_flops)"),
        Column("hfu", FLOAT, "hardware_flops / (step_ns x peak_flops)"),
        Column("sol_step", FLOAT, "the ranks' summed SOL time / (step_ns x ranks)"),
    ),
    sort_by=None,
)

#: tables analyses return (kept apart from TABLES: a Trace and its cache hold only those)
ANALYSIS_TABLES: dict[str, Table] = {t.name: t for t in (SOL, MFU, MFU_JOB)}


def make_table(table: Table | str, n: int, columns: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Build a table with exactly the schema's columns.

    Parameters
    ----------
    table
        The :class:`Table` or its name.
    n
        Number of rows.
    columns
        Arrays (length n) for the columns the source knows; the others are filled with missing
        values. ``dur`` is derived from ``start``/``end`` when not given, and ``end`` from
        ``start``/``dur``. Unknown column names raise ``KeyError`` so typos fail loudly.

    Returns
    -------
    DataFrame sorted by the table's ``sort_by`` column, with ``id`` renumbered to positions.
    """
    spec = TABLES[table] if isinstance(table, str) else table
    given = dict(columns or {})
    for key in given:
        spec.column(key)
    names = spec.names
    if "start" in names:
        if "dur" not in given and "start" in given and "end" in given:
            given["dur"] = np.asarray(given["end"], dtype=np.int64) - np.asarray(given["start"], dtype=np.int64)
        if "end" not in given and "start" in given and "dur" in given:
            given["end"] = np.asarray(given["start"], dtype=np.int64) + np.asarray(given["dur"], dtype=np.int64)
    data: dict[str, Any] = {}
    for col in spec.columns:
        if col.name in given:
            data[col.name] = _cast(col, given[col.name], n)
        else:
            data[col.name] = col.fill(n)
    if "id" in names and spec.sort_by:
        data["id"] = np.arange(n, dtype=np.int64)
    # copy=False: the loader's arrays become the columns as they are (no consolidation into 2-D
    # blocks, which doubled the peak memory of a 10-million-event load)
    df = pd.DataFrame(data, columns=names, copy=False)
    if spec.sort_by and n > 1:
        sort_key = df[spec.sort_by].to_numpy()
        # loaders usually hand rows over in order already: an O(n) check saves the argsort
        if not bool(np.all(sort_key[1:] >= sort_key[:-1])):
            order = np.argsort(sort_key, kind="stable")
            df = df.take(order).reset_index(drop=True)
            if "id" in names:
                df["id"] = np.arange(n, dtype=np.int64)
    return df


def _cast(col: Column, values: Any, n: int) -> Any:
    if col.dtype == CAT:
        if isinstance(values, pd.Categorical):
            cat = values
        else:
            cat = pd.Categorical(np.asarray(values, dtype=object))
        if len(cat) != n:
            raise ValueError(f"column {col.name}: {len(cat)} values for {n} rows")
        return cat
    if col.dtype == STR:
        arr = np.asarray(values, dtype=object)
    else:
        arr = np.asarray(values)
        if col.dtype in (INT, I32) and arr.dtype.kind == "f":
            # NaN is missing (-1); so is what the integer type cannot hold (inf, 1e30 from a
            # damaged file), which a cast would turn into an arbitrary number (and numpy warns)
            limit = 2.0**63 if col.dtype == INT else 2.0**31
            with np.errstate(invalid="ignore"):
                arr = np.where(np.abs(arr) < limit, np.rint(arr), -1)
        arr = arr.astype(col.dtype, copy=False)
    if len(arr) != n:
        raise ValueError(f"column {col.name}: {len(arr)} values for {n} rows")
    return arr


def empty(table: Table | str) -> pd.DataFrame:
    """An empty table with the schema's columns and dtypes."""
    return make_table(table, 0)


def make_table_mapped(
    table: Table | str, n: int, columns: Mapping[str, Any] | None = None
) -> tuple[pd.DataFrame, np.ndarray]:
    """Like :func:`make_table`, and also return ``new_id``: ``new_id[i]`` is the final id of the
    row given at position ``i`` (for loaders that link rows, e.g. flows, before sorting)."""
    spec = TABLES[table] if isinstance(table, str) else table
    given = dict(columns or {})
    given.pop("id", None)
    given["id"] = np.arange(n, dtype=np.int64)
    # make_table renumbers ids after sorting, so sort here to learn the permutation first
    if spec.sort_by and n and spec.sort_by in given:
        order = np.argsort(np.asarray(given[spec.sort_by]), kind="stable")
    else:
        order = np.arange(n)
    df = make_table(spec, n, given)
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n, dtype=np.int64)
    return df, new_id
