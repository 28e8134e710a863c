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

``bound`` is the roofline's verdict (the term of the max that wins), the same for every source, so
a layer norm is not "compute" in an Nsight Compute report and "memory" in the torch trace of the
same run. NVIDIA's own throughput percentages (``ncu_sm_pct``, ``ncu_mem_pct``) sit beside it,
and ``ncu_bound`` holds Nsight Compute's verdict (memory when its memory throughput is above its
compute throughput); ``bound`` falls back to it only where the roofline has no verdict (FLOPs or
bytes unknown). ``bound_model`` is the roofline's verdict alone.

Physics is an invariant: no kernel runs faster than its speed of light. A kernel whose T_SOL
exceeds its measured duration has a model or counter error, never an achievement: its ``sol_pct``
and ``t_sol_ns`` are left unknown, ``sol_status`` is ``"exceeds_peak"`` and ``sol_reason`` names
the likely cause as data (``SOL_REASONS``); ``note`` says it in words. Such kernels are kept off
the roofline and counted in a warning by every view (:func:`sol_warnings`).

Measured quantities never fall back to the model: a kernel whose counters were collected but miss
its tensor work (tensor pipe busy, no tensor counter) has FLOPs *unknown*, not modelled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from kviewer.analysis.devices import DeviceSpec, devices_for_trace
from kviewer.analysis.kinds import precision_from_name, precision_pipe
from kviewer.analysis.model import model_kernels
from kviewer.core import Trace
from kviewer.core.groups import distinct_rows
from kviewer.core.schema import OPS, SOL

#: the columns of a SOL table, declared with their dtypes in :data:`kviewer.core.schema.SOL`
SOL_COLUMNS = SOL.names

#: what the speed of light reads of a trace (:func:`kviewer.io.load`'s ``tables``): the kernels'
#: identity, time, counters and the op join's keys, the framework ops they join to, the GPUs
SOL_READS: dict[str, tuple[str, ...]] = {
    "kernels": (
        "id", "name", "short_name", "start", "dur", "device", "stream", "rank", "external_id", "flops_fp64", "flops_fp32",
        "flops_fp16", "flops_tensor", "tensor_pipe_pct", "tensor_precision", "dram_bytes", "dram_read_bytes",
        "dram_write_bytes", "sm_throughput_pct", "mem_throughput_pct",
    ),
    OPS: ("category", "external_id", "rank", "pid", "tid", "depth", "start", "dur", "name", "input_dims", "input_types",
          "concrete_inputs", "flops"),
    "devices": (),
}  # fmt: skip

#: ``sol_status`` values
SOL_OK, SOL_UNKNOWN, SOL_EXCEEDS = "ok", "unknown", "exceeds_peak"
#: ``sol_reason`` values for ``exceeds_peak`` kernels (data, for code to test)
SOL_REASONS = (
    "l2_served_traffic",       # modelled bytes include traffic the L2 cache served
    "measured_bandwidth",      # measured DRAM bytes over the duration exceed the datasheet bandwidth
    "attention_mask",          # attention FLOPs modelled without the (unrecorded) causal mask
    "modelled_flops",          # modelled FLOPs above the peak: the model over-counts
    "measured_flops",          # measured FLOPs above the peak: clocks above the datasheet, or replay mismatch
)

#: a tensor pipe busier than this (percent) means the kernel did tensor work (elementwise kernels
#: show ~1% on Hopper: the GELU of the H200 sample reports 1.1%)
_TENSOR_ACTIVE_PCT = 5.0


@dataclass(frozen=True)
class SolResult:
    """The speed of light of one trace, as every consumer (CLI, report, session, UI) takes it.

    Attributes
    ----------
    table
        One row per kernel, in kernel id order; columns :data:`kviewer.core.schema.SOL`.
    specs
        The GPU's peak rates per device id of the trace.
    device
        The GPU the caller named (``--device``, the window's picker); None when the trace's own
        GPU was recognised.
    """

    table: pd.DataFrame
    specs: dict[int, DeviceSpec] = field(default_factory=dict)
    device: str | None = None
    model: pd.DataFrame | None = field(default=None, repr=False)
    """:func:`kviewer.analysis.model.model_kernels` of the trace, the op model the table was
    made from (None when the table came from elsewhere, e.g. the analysis cache)"""

    @property
    def spec(self) -> DeviceSpec | None:
        """The GPU that ran most of the kernel time (a trace rarely mixes models)."""
        if not self.specs:
            return None
        by_dev = self.table.groupby("device")["dur"].sum().sort_values(ascending=False)
        for dev in by_dev.index:
            if int(dev) in self.specs:
                return self.specs[int(dev)]
        return next(iter(self.specs.values()))

    def warnings(self) -> dict[str, int]:
        """:func:`sol_warnings` of the table."""
        return sol_warnings(self.table)

    def summary(self) -> dict[str, float]:
        """:func:`sol_summary` of the table."""
        return sol_summary(self.table)


def sol_result(
    trace: Trace,
    device: str | None = None,
    devices: Mapping[str, DeviceSpec] | None = None,
) -> SolResult:
    """:func:`speed_of_light` of ``trace`` with the GPU specs it used.

    Raises
    ------
    AnalysisError
        when the GPU cannot be recognised and no ``device`` is given.
    """
    model = model_kernels(trace)
    table = speed_of_light(trace, device, devices, model=model)
    specs = devices_for_trace(trace, device, devices) if len(trace.kernels) else {}
    return SolResult(table, specs, device, model)


def speed_of_light(
    trace: Trace,
    device: str | None = None,
    devices: Mapping[str, DeviceSpec] | None = None,
    model: pd.DataFrame | None = None,
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
    model
        :func:`kviewer.analysis.model.model_kernels` of ``trace`` when the caller has it.

    Raises
    ------
    AnalysisError
        when the GPU cannot be recognised and no ``device`` is given.
    """
    k = trace.kernels
    n = len(k)
    specs = devices_for_trace(trace, device, devices) if n else {}
    m = model if model is not None else model_kernels(trace)
    names = _text_of(k["name"])
    dur = k["dur"].to_numpy(np.float64)

    # -- measured FLOPs: every counter family that was collected (fp64, fp32, fp16 vector; tensor)
    fam_cols = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]
    meas = np.column_stack([k[c].to_numpy(np.float64) for c in fam_cols]) if n else np.zeros((0, 4))
    any_meas = np.asarray(~np.isnan(meas).all(axis=1) if n else np.zeros(0, dtype=bool), dtype=bool)
    meas_flops = np.where(any_meas, np.nansum(np.nan_to_num(meas, nan=0.0), axis=1), np.nan)
    tensor_pct = k["tensor_pipe_pct"].to_numpy(np.float64)
    tensor_missing = any_meas & np.isnan(meas[:, 3]) & (tensor_pct > _TENSOR_ACTIVE_PCT)
    tprec = _text_of(k["tensor_precision"]) if "tensor_precision" in k else _constant(n, "")

    # -- measured bytes: DRAM bytes, or read + write
    dram = k["dram_bytes"].to_numpy(np.float64)
    rw = k["dram_read_bytes"].to_numpy(np.float64) + k["dram_write_bytes"].to_numpy(np.float64)
    meas_bytes = np.where(np.isnan(dram), rw, dram)

    kind = m["kind"].to_numpy(dtype=object)
    m_prec = m["precision"].to_numpy(dtype=object)
    m_pipe = m["pipe"].to_numpy(dtype=object)
    m_note = m["model_note"].to_numpy(dtype=object)
    mflops = m["model_flops"].to_numpy(np.float64)
    mbytes = m["model_bytes"].to_numpy(np.float64)
    ncu_sm = k["sm_throughput_pct"].to_numpy(np.float64)
    ncu_mem = k["mem_throughput_pct"].to_numpy(np.float64)
    dev_col = k["device"].to_numpy(np.int64)
    matrix = np.isin(kind, list(_MATRIX))

    # Whole columns at once; what depends on text (a name's precision, a GPU's peak, a note) is
    # worked out once per distinct combination (_per_distinct) and spread over its kernels. Only
    # kernels with measured FLOPs take a Python step each (their counter families are compared
    # one by one: :func:`_measured_flops`), and only the kernels exceeding their peak get a note
    # with their own numbers.

    # FLOPs: measured, else modelled, else unknown -- never a measured kernel's model
    flops = mflops.copy()
    fsrc = _choose(np.isnan(mflops), "unknown", "modelled")
    # bytes
    known_mb = ~np.isnan(meas_bytes)
    nbytes = np.where(known_mb, meas_bytes, mbytes)
    bsrc = _choose(known_mb, "measured", _choose(np.isnan(mbytes), "unknown", "modelled"))
    # precision and pipe: the counter that fired, else the op's dtypes, else the name
    # (kinds.precision_pipe, the one rule), once per distinct (kind, op precision, op pipe, name)
    group, combos = _per_distinct(kind, m_prec, m_pipe, names)
    pp = [precision_pipe(str(kd), op=str(pr), op_pipe=str(pi), name=str(nm))[:2] for kd, pr, pi, nm in combos]
    precision = np.array([p for p, _ in pp] + [""], dtype=object)[group]
    pipe = np.array([q for _, q in pp] + [""], dtype=object)[group]
    peak = np.full(n, np.nan)
    field = _constant(n, "")
    head_note = _constant(n, "")  # what the counters said, before the notes below
    for i in np.flatnonzero(any_meas):
        spec = specs.get(int(dev_col[i])) if specs else None
        flops[i], fsrc[i], precision[i], pipe[i], peak[i], field[i], notes = _measured_flops(
            spec, str(kind[i]), str(m_prec[i]), str(m_pipe[i]), str(names[i]), meas[i], float(meas_flops[i]),
            bool(tensor_missing[i]), str(tprec[i]))
        head_note[i] = "; ".join(notes)
    no_prec = precision == ""
    prec_note = no_prec & ~np.isnan(flops)
    precision[no_prec] = "fp32"
    no_pipe = pipe == ""
    pipe[no_pipe & matrix] = "tensor"
    pipe[no_pipe & ~matrix] = "vector"
    # the GPU's peak for the precision and pipe, and its bandwidth, once per distinct GPU
    need = field == ""
    if need.any():
        group, combos = _per_distinct(dev_col[need], precision[need], pipe[need])
        peaks = [_peak(specs.get(int(d)) if specs else None, str(pr), str(pi)) for d, pr, pi in combos]
        peak[need] = np.array([pk for pk, _ in peaks] + [np.nan], dtype=np.float64)[group]
        field[need] = np.array([fd for _, fd in peaks] + [""], dtype=object)[group]
    group, combos = _per_distinct(precision, pipe, field)
    rate_note = np.array([f"no {pr.upper()} tensor rate on this GPU: {fd} used" if fd and pi == "tensor" and not fd.startswith(pr) else ""
                          for pr, pi, fd in combos] + [""], dtype=object)[group]
    group, combos = _per_distinct(dev_col)
    dev_specs = [specs.get(int(d)) if specs else None for (d,) in combos]
    bw = np.array([s.dram_bytes_per_s if s else np.nan for s in dev_specs] + [np.nan], dtype=np.float64)[group]
    gpu = np.array([s.id if s else "" for s in dev_specs] + [""], dtype=object)[group]

    # the dominant family's FLOPs at its peak: the achieved point then sits under that roof
    # exactly when T_SOL <= the measured time
    with np.errstate(invalid="ignore", divide="ignore"):
        t_c = np.where((peak > 0) & ~np.isnan(flops), flops / peak * 1e9, np.nan)
        t_m = np.where((bw > 0) & ~np.isnan(nbytes), nbytes / bw * 1e9, np.nan)
    c_nan, m_nan = np.isnan(t_c), np.isnan(t_m)
    # a matrix kernel's floor is its compute term: the memory term alone would put a GEMM at a
    # few % of a speed of light it nearly reaches
    matrix_only_m = c_nan & ~m_nan & (matrix | tensor_missing)
    only_m = c_nan & ~m_nan & ~matrix_only_m
    only_c = ~c_nan & m_nan
    both = ~c_nan & ~m_nan
    t_sol = np.full(n, np.nan)
    t_sol[only_m] = np.where(t_m[only_m] > 0, t_m[only_m], np.nan)
    # a kernel known to do no arithmetic has no compute floor: nothing is known
    t_sol[only_c] = np.where(t_c[only_c] > 0, t_c[only_c], np.nan)
    t_sol[both] = np.maximum(t_c[both], t_m[both])
    bound_model = _constant(n, "unknown")
    bound_model[both] = _choose(t_c[both] >= t_m[both], "compute", "memory")
    term_note = np.zeros(n, dtype=np.int8)  # _TERM_NOTES
    term_note[matrix_only_m], term_note[only_m], term_note[only_c] = 1, 2, 3
    with np.errstate(invalid="ignore", divide="ignore"):
        sol_pct = np.where((dur > 0) & ~np.isnan(t_sol), t_sol / dur * 100.0, np.nan)
    status = _choose(np.isnan(sol_pct), SOL_UNKNOWN, SOL_OK)
    reason = _constant(n, "")
    ncu_bound = _constant(n, "")
    ncu_known = ~np.isnan(ncu_sm) & ~np.isnan(ncu_mem)
    ncu_bound[ncu_known] = _choose(ncu_mem[ncu_known] > ncu_sm[ncu_known], "memory", "compute")
    bound = np.where((bound_model != "unknown") | (ncu_bound == ""), bound_model, ncu_bound)
    with np.errstate(invalid="ignore"):
        over = np.flatnonzero(sol_pct > 100.0)
    over_note = {}
    for i in over:
        spec = specs.get(int(dev_col[i])) if specs else None
        reason[i] = _over_100_reason(t_c[i], t_m[i], dur[i], fsrc[i], bsrc[i], str(kind[i]), str(m_note[i]))
        over_note[int(i)] = (f"exceeds peak: model or counter error ({sol_pct[i]:.0f}% of the speed of light is impossible): "
                             + _REASON_TEXT[reason[i]](nbytes[i], spec))
    status[over], sol_pct[over], t_sol[over] = SOL_EXCEEDS, np.nan, np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        intensity = np.where((nbytes > 0) & ~np.isnan(flops), flops / nbytes, np.nan)
    # the notes, in order: the op model's, the counters', the precision and rate assumed, the
    # term(s) used; joined once per distinct combination
    group, combos = _per_distinct(m_note, head_note, prec_note, rate_note, term_note)
    note = np.array(["; ".join(p for p in (str(mn), hd, _PREC_NOTE if pn else "", rt, _TERM_NOTES[tn]) if p)
                     for mn, hd, pn, rt, tn in combos] + [""], dtype=object)[group]
    for row, text in over_note.items():
        note[row] = f"{note[row]}; {text}" if note[row] else text

    cols = {
        "flops": flops, "flops_source": fsrc, "bytes": nbytes, "bytes_source": bsrc, "precision": precision, "pipe": pipe,
        "kind": kind.copy(), "intensity": intensity, "peak_flops": peak, "peak_field": field, "peak_bw": bw,
        "t_compute_ns": t_c, "t_memory_ns": t_m, "t_sol_ns": t_sol, "sol_pct": sol_pct, "bound": bound,
        "bound_model": bound_model, "gpu": gpu, "note": note, "sol_status": status, "sol_reason": reason, "ncu_bound": ncu_bound,
    }  # fmt: skip
    data = {
        "id": k["id"].to_numpy(np.int64),
        "name": names,
        "short_name": _text_of(k["short_name"]),
        "device": dev_col,
        "stream": k["stream"].to_numpy(np.int64),
        "start": k["start"].to_numpy(np.int64),
        "dur": k["dur"].to_numpy(np.int64),
        "op_name": m["op_name"].to_numpy(),
        "bytes_written": m["model_bytes_written"].to_numpy(np.float64),
        "ncu_sm_pct": ncu_sm,
        "ncu_mem_pct": ncu_mem,
        **{c: (v.astype(np.float64) if v.dtype != object else v) for c, v in cols.items()},
    }
    # in the schema's order, column by column (no 2-D block of the float columns: a copy of them)
    return pd.DataFrame({c: data[c] for c in SOL_COLUMNS}, columns=SOL_COLUMNS, copy=False)


_MATRIX = ("gemm", "conv", "attention")


# Text columns as object arrays whose equal texts are one object: 600k kernels then hold 600k
# pointers, not 600k copies of "unknown" (np.where(mask, "a", "b").astype(object) makes a string
# per row; so does a categorical's astype(str)).


def _constant(n: int, text: str) -> np.ndarray:
    out = np.empty(n, dtype=object)
    out.fill(text)
    return out


def _choose(mask: np.ndarray, yes: str, no: str | np.ndarray) -> np.ndarray:
    """``np.where(mask, yes, no)`` as an object array of shared texts."""
    out = np.array([no, yes], dtype=object)[mask.astype(np.int8)] if isinstance(no, str) else no.copy()
    if not isinstance(no, str):
        out[mask] = yes
    return out


def _text_of(col: pd.Series) -> np.ndarray:
    """``col.astype(str).to_numpy()``, each category's text made once."""
    if not isinstance(col.dtype, pd.CategoricalDtype):
        return col.astype(str).to_numpy(dtype=object)
    one_each = pd.Categorical.from_codes(np.arange(-1, len(col.cat.categories)), dtype=col.dtype)  # the missing one first
    texts = pd.Series(one_each).astype(str).to_numpy(dtype=object)
    return texts[col.cat.codes.to_numpy().astype(np.int64) + 1]
_PREC_NOTE = "precision not recorded: the FP32 peak assumed"
#: the note on the term(s) a kernel's speed of light used (0: both, or none known)
_TERM_NOTES = (
    "",
    "FLOPs unknown for a matrix kernel: its speed of light is unknown (the memory term alone would understate it)",
    "FLOPs unknown: the memory term alone",
    "bytes unknown: the compute term alone",
)


def _per_distinct(*columns: np.ndarray) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """Each row's position among the distinct value combinations of ``columns``
    (:func:`kviewer.core.groups.distinct_rows`) and those combinations: per-name (per-GPU,
    per-note) work is done once per combination and spread over its rows with
    ``np.array(results + [filler])[group]``."""
    group, first = distinct_rows(*columns)
    return group, [tuple(col[i] for col in columns) for i in first]


def _measured_flops(
    spec: DeviceSpec | None, kind: str, op_prec: str, op_pipe: str, name: str, parts_raw: np.ndarray, total: float,
    tensor_missing: bool, counter_prec: str,
) -> tuple[float, str, str, str, float, str, list[str]]:
    """(flops, flops_source, precision, pipe, peak, peak_field, notes) of a kernel whose FLOP
    counters were collected: the counter family needing the most time at its own peak."""
    notes: list[str] = []
    if tensor_missing:
        notes.append("tensor pipe active but no tensor FLOP counter collected: FLOPs unknown (counters are never mixed with the model)")
        precision, pipe, _ = precision_pipe(kind, op=op_prec, op_pipe="tensor", name=name)
        return math.nan, "unknown", precision, pipe, math.nan, "", notes
    precision, pipe = op_prec, op_pipe
    parts = np.nan_to_num(parts_raw, nan=0.0)
    cands = []
    for j, (p, pp) in enumerate((("fp64", "vector"), ("fp32", "vector"), ("fp16", "vector"), ("", "tensor"))):
        if parts[j] <= 0:
            continue
        if pp == "tensor":
            counter = counter_prec if counter_prec not in ("", "nan") else ""
            op_p = precision if precision not in ("", "fp32") else ""  # fp32 ops run tf32 or fp32
            p = precision_pipe(kind, counter, "tensor", op_p, "tensor", name)[0]
            if not p:
                p = "fp16"
                notes.append("tensor precision not recorded: FP16 tensor peak assumed")
        pk, fd = _peak(spec, p, pp)
        cands.append((parts[j] / pk if pk > 0 else math.inf, p, pp, pk, fd, parts[j]))
    if not cands:
        return total, "measured", precision or precision_from_name(name) or "fp32", pipe or "vector", math.nan, "", notes
    # the pipes run side by side: the family needing the most time at its own peak sets the roof,
    # and the kernel's FLOPs are that counter's value (a GEMM's are its tensor operations, exactly
    # what Nsight Compute counted; the epilogue's few FP32 FLOPs ran on another pipe and are named
    # in the note)
    _, precision, pipe, peak, field, flops = max(cands, key=lambda c: c[0])
    others = [c for c in cands if c[1:3] != (precision, pipe)]
    if others:
        notes.append("also " + ", ".join(f"{c[5]:,.0f} {c[1].upper()} {c[2]} FLOPs" for c in others)
                     + " (on another pipe, within the time of the first)")
    return flops, "measured", precision, pipe, peak, field, notes


def _peak(spec: DeviceSpec | None, precision: str, pipe: str) -> tuple[float, str]:
    if spec is None:
        return math.nan, ""
    try:
        return spec.peak_flops(precision, pipe)
    except ValueError:  # a precision without a rate in the table (int4, fp4...)
        return math.nan, ""


def _over_100_reason(t_c: float, t_m: float, dur: float, fsrc: str, bsrc: str, kind: str, model_note: str) -> str:
    """Which term broke physics, and why, as a :data:`SOL_REASONS` code."""
    memory = not math.isnan(t_m) and t_m > dur and (math.isnan(t_c) or t_m >= t_c)
    if memory:
        return "l2_served_traffic" if bsrc == "modelled" else "measured_bandwidth"
    if fsrc == "modelled":
        return "attention_mask" if kind == "attention" and "masking not recorded" in model_note else "modelled_flops"
    return "measured_flops"


_REASON_TEXT = {
    "l2_served_traffic": lambda nbytes, spec: (
        "part of the modelled traffic was served by the L2 cache, so DRAM moved less than the model counts"
        + (f" ({nbytes / 2**20:.0f} MiB of traffic, L2 {spec.l2_mib:.0f} MiB)" if spec is not None and spec.l2_mib == spec.l2_mib and nbytes == nbytes else "")
    ),
    "measured_bandwidth": lambda nbytes, spec: (
        "the measured DRAM bytes over this duration exceed the datasheet bandwidth "
        "(duration and counters from different replays, or memory clocked above the datasheet)"
    ),
    "attention_mask": lambda nbytes, spec: "attention FLOPs are counted without the causal mask, which skips about half of them",
    "modelled_flops": lambda nbytes, spec: "the modelled FLOPs exceed what the peak allows in this time: the model over-counts this kernel's work",
    "measured_flops": lambda nbytes, spec: "more FLOP/s than the datasheet peak (clocks above those the peak assumes, or counters and duration from different replays)",
}


def sol_warnings(sol: pd.DataFrame) -> dict[str, int]:
    """How many kernels exceed their peak, per :data:`SOL_REASONS` code (empty when none): every
    view shows this count as a warning."""
    if "sol_status" not in sol or not len(sol):
        return {}
    bad = sol[sol["sol_status"].astype(str).to_numpy() == SOL_EXCEEDS]
    return {str(r): int(c) for r, c in bad["sol_reason"].astype(str).value_counts().items()}


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
