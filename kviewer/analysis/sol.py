"""Speed of light per kernel: the shortest time the GPU's peak rates allow for its work.

For each kernel::

    T_SOL = max(FLOPs / peak FLOP/s for its precision, bytes / DRAM bandwidth)
    SOL%  = T_SOL / measured duration x 100
    arithmetic intensity = FLOPs / bytes
    bound = the term of the max that wins ("compute" or "memory")

FLOPs and bytes are *measured* when a counter profiler collected them (Nsight Compute's FLOP
counters and DRAM bytes, rocprof's FETCH_SIZE/WRITE_SIZE), else *modelled* from the PyTorch op
that launched the kernel (:mod:`kviewer.analysis.model`), else unknown (NaN): never guessed. The
``flops_source`` / ``bytes_source`` columns say which.

For Nsight Compute kernels, NVIDIA's own throughput percentages (``ncu_sm_pct``, ``ncu_mem_pct``)
sit beside ours, and the ``bound`` column follows Nsight Compute: memory-bound when its memory
throughput is above its compute throughput. ``bound_model`` always holds our own verdict.

SOL% above 100 is possible and explained in ``note``: modelled bytes count traffic that the L2
cache served (the DRAM saw less), attention FLOPs are counted without the causal mask, or the
measured run was clocked differently from the datasheet.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from kviewer.analysis.devices import DeviceSpec, devices_for_trace
from kviewer.analysis.model import kernel_kind, model_kernels
from kviewer.core import Trace

SOL_COLUMNS = [
    "id",
    "name",
    "short_name",
    "device",
    "stream",
    "start",
    "dur",
    "gpu",
    "kind",
    "op_name",
    "precision",
    "pipe",
    "flops",
    "flops_source",
    "bytes",
    "bytes_source",
    "bytes_written",
    "intensity",
    "peak_flops",
    "peak_field",
    "peak_bw",
    "t_compute_ns",
    "t_memory_ns",
    "t_sol_ns",
    "sol_pct",
    "bound",
    "bound_model",
    "ncu_sm_pct",
    "ncu_mem_pct",
    "note",
]

#: a tensor pipe busier than this (percent) means the kernel did tensor work (elementwise kernels
#: show ~1% on Hopper: the GELU of the H200 sample reports 1.1%)
_TENSOR_ACTIVE_PCT = 5.0


def _precision_from_name(name: str) -> str:
    """Tensor-op precision hinted by a kernel name (cuBLAS/CUTLASS/cuDNN naming), '' if none."""
    n = name.lower()
    if "e4m3" in n or "e5m2" in n or "fp8" in n or "f8f6f4" in n:
        return "fp8"
    if "bf16" in n or "bfloat16" in n:
        return "bf16"
    if "tf32" in n:
        return "tf32"
    if "f16" in n or "fp16" in n or "half" in n or "hgemm" in n:
        return "fp16"
    if "dgemm" in n or "fp64" in n or "f64" in n:
        return "fp64"
    return ""


def speed_of_light(
    trace: Trace,
    device: str | None = None,
    devices: Mapping[str, DeviceSpec] | None = None,
) -> pd.DataFrame:
    """One row per kernel with its speed of light (columns ``SOL_COLUMNS``, see the module doc).

    Parameters
    ----------
    trace
        Any loaded trace.
    device
        Override the recognised GPU (an id, name or reported spelling; the CLI's ``--device``).
    devices
        The device table to use (default: the packaged devices.toml).

    Raises
    ------
    AnalysisError
        when the GPU cannot be recognised and no ``device`` is given.
    """
    k = trace.kernels
    n = len(k)
    specs = devices_for_trace(trace, device, devices) if n else {}
    m = model_kernels(trace)
    names = k["name"].astype(str).to_numpy()
    dur = k["dur"].to_numpy(np.float64)

    # -- measured FLOPs: sum of the counters that were collected
    cols = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]
    meas = np.column_stack([k[c].to_numpy(np.float64) for c in cols]) if n else np.zeros((0, 4))
    any_meas = ~np.isnan(meas).all(axis=1) if n else np.zeros(0, dtype=bool)
    meas_flops = np.where(any_meas, np.nansum(np.nan_to_num(meas, nan=0.0), axis=1), np.nan)
    tensor_pct = k["tensor_pipe_pct"].to_numpy(np.float64)
    tensor_missing = any_meas & np.isnan(meas[:, 3]) & (tensor_pct > _TENSOR_ACTIVE_PCT)

    # -- measured bytes: DRAM bytes, or read + write
    dram = k["dram_bytes"].to_numpy(np.float64)
    rw = k["dram_read_bytes"].to_numpy(np.float64) + k["dram_write_bytes"].to_numpy(np.float64)
    meas_bytes = np.where(np.isnan(dram), rw, dram)

    # plain arrays: pandas scalar access inside the per-kernel loop costs more than the arithmetic
    m_kind = m["kind"].to_numpy(dtype=object)
    m_prec = m["precision"].to_numpy(dtype=object)
    m_pipe = m["pipe"].to_numpy(dtype=object)
    m_note = m["model_note"].to_numpy(dtype=object)
    mflops = m["model_flops"].to_numpy(np.float64)
    mbytes = m["model_bytes"].to_numpy(np.float64)

    rows = []
    ncu_sm = k["sm_throughput_pct"].to_numpy(np.float64)
    ncu_mem = k["mem_throughput_pct"].to_numpy(np.float64)
    dev_col = k["device"].to_numpy(np.int64)
    for i in range(n):
        notes: list[str] = []
        spec = specs.get(int(dev_col[i])) if specs else None
        kind = str(m_kind[i]) or kernel_kind(names[i])
        # FLOPs
        if any_meas[i] and not tensor_missing[i]:
            flops, fsrc = meas_flops[i], "measured"
        elif not math.isnan(mflops[i]):
            flops, fsrc = mflops[i], "modelled"
            if tensor_missing[i]:
                notes.append("tensor pipe active but no tensor FLOP counter collected: FLOPs modelled")
        else:
            flops, fsrc = math.nan, "unknown"
            if tensor_missing[i]:
                notes.append("tensor pipe active but no tensor FLOP counter collected: FLOPs unknown")
        # bytes
        if not math.isnan(meas_bytes[i]):
            nbytes, bsrc = meas_bytes[i], "measured"
        elif not math.isnan(mbytes[i]):
            nbytes, bsrc = mbytes[i], "modelled"
        else:
            nbytes, bsrc = math.nan, "unknown"
        # precision and pipe
        precision, pipe = str(m_prec[i]), str(m_pipe[i])
        if fsrc == "measured":
            parts = np.nan_to_num(meas[i], nan=0.0)
            top = int(np.argmax(parts))
            if top == 3 or tensor_pct[i] > _TENSOR_ACTIVE_PCT and parts[3] > 0:
                pipe = "tensor"
                if not precision:
                    precision = _precision_from_name(names[i])
                    if not precision:
                        precision = "fp16"
                        notes.append("tensor precision not recorded: FP16 tensor peak assumed")
            else:
                pipe = "vector"
                precision = ("fp64", "fp32", "fp16")[top]
        elif tensor_missing[i] and not precision:
            pipe, precision = "tensor", _precision_from_name(names[i])
        if not precision:
            precision, pipe = "fp32", pipe or "vector"
        if not pipe:
            pipe = "vector"
        peak, field = (spec.peak_flops(precision, pipe) if spec else (math.nan, ""))
        if field and pipe == "tensor" and not field.startswith(precision):
            notes.append(f"no {precision.upper()} tensor rate on this GPU: {field} used")
        bw = spec.dram_bytes_per_s if spec else math.nan
        t_c = flops / peak * 1e9 if peak > 0 and not math.isnan(flops) else math.nan
        t_m = nbytes / bw * 1e9 if bw > 0 and not math.isnan(nbytes) else math.nan
        if math.isnan(t_c) and math.isnan(t_m):
            t_sol = math.nan
            bound_model = "unknown"
        elif math.isnan(t_c):
            t_sol, bound_model = t_m, "unknown"
            notes.append("FLOPs unknown: the memory term alone")
        elif math.isnan(t_m):
            t_sol, bound_model = t_c, "unknown"
            notes.append("bytes unknown: the compute term alone")
        else:
            t_sol = max(t_c, t_m)
            bound_model = "compute" if t_c >= t_m else "memory"
        sol_pct = t_sol / dur[i] * 100.0 if dur[i] > 0 and not math.isnan(t_sol) else math.nan
        bound = bound_model
        if not math.isnan(ncu_sm[i]) and not math.isnan(ncu_mem[i]):
            bound = "memory" if ncu_mem[i] > ncu_sm[i] else "compute"
        if sol_pct > 100.0:
            notes.append(_over_100(bound_model, fsrc, bsrc, kind, nbytes, spec))
        intensity = flops / nbytes if nbytes > 0 and not math.isnan(flops) else math.nan
        note = str(m_note[i])
        if note:
            notes.insert(0, note)
        rows.append(
            (
                flops, fsrc, nbytes, bsrc, precision, pipe, kind, intensity, peak, field, bw, t_c, t_m, t_sol,
                sol_pct, bound, bound_model, spec.id if spec else "", "; ".join(notes),
            )
        )
    cols_out = [
        "flops", "flops_source", "bytes", "bytes_source", "precision", "pipe", "kind", "intensity",
        "peak_flops", "peak_field", "peak_bw", "t_compute_ns", "t_memory_ns", "t_sol_ns", "sol_pct",
        "bound", "bound_model", "gpu", "note",
    ]
    body = pd.DataFrame(rows, columns=cols_out) if rows else pd.DataFrame({c: pd.Series(dtype=object) for c in cols_out})
    out = pd.DataFrame(
        {
            "id": k["id"].to_numpy(np.int64),
            "name": names,
            "short_name": k["short_name"].astype(str).to_numpy(),
            "device": dev_col,
            "stream": k["stream"].to_numpy(np.int64),
            "start": k["start"].to_numpy(np.int64),
            "dur": k["dur"].to_numpy(np.int64),
            "op_name": m["op_name"].to_numpy(),
            "bytes_written": m["model_bytes_written"].to_numpy(np.float64),
            "ncu_sm_pct": ncu_sm,
            "ncu_mem_pct": ncu_mem,
        }
    )
    for c in cols_out:
        out[c] = body[c].to_numpy() if len(body) else np.array([], dtype=object)
    for c in ("flops", "bytes", "intensity", "peak_flops", "peak_bw", "t_compute_ns", "t_memory_ns", "t_sol_ns", "sol_pct"):
        out[c] = out[c].astype(np.float64)
    return out[SOL_COLUMNS]


def _over_100(bound: str, fsrc: str, bsrc: str, kind: str, nbytes: float, spec: DeviceSpec | None) -> str:
    if bound == "memory" or bound == "unknown" and bsrc != "unknown":
        if bsrc == "modelled":
            l2 = spec.l2_mib if spec is not None else math.nan
            size = f" ({nbytes / 2**20:.0f} MiB of traffic, L2 {l2:.0f} MiB)" if l2 == l2 else ""
            return "above 100%: part of the modelled traffic was served by the L2 cache, so DRAM moved less than the model counts" + size
        return (
            "above 100%: the measured DRAM bytes over this duration exceed the datasheet bandwidth "
            "(duration and counters from different replays, or memory clocked above the datasheet)"
        )
    if kind == "attention" and fsrc == "modelled":
        return "above 100%: attention FLOPs are counted without the causal mask, which skips about half of them"
    return "above 100%: more FLOP/s than the datasheet peak (FLOPs over-counted, or clocks above those the peak assumes)"


def sol_summary(sol: pd.DataFrame) -> dict[str, float]:
    """Totals over a SOL frame: kernel time, the SOL floor, and the time in memory-bound kernels."""
    dur = sol["dur"].to_numpy(np.float64)
    t_sol = sol["t_sol_ns"].to_numpy(np.float64)
    known = ~np.isnan(t_sol)
    return {
        "kernel_ns": float(dur.sum()),
        "known_ns": float(dur[known].sum()),
        "sol_ns": float(np.minimum(t_sol[known], dur[known]).sum()),
        "memory_bound_ns": float(dur[(sol["bound"] == "memory").to_numpy()].sum()),
        "compute_bound_ns": float(dur[(sol["bound"] == "compute").to_numpy()].sum()),
    }
