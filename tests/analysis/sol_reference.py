"""The per-kernel speed of light and kernel classification as they were computed before they were
vectorised (kviewer 36d99ae, analysis/sol.py and analysis/kinds.py), and the per-kernel modelled
work as it was computed before it was vectorised (kviewer 3305054, analysis/model.py
``model_kernels``): one Python pass per kernel. Kept verbatim as the references the vectorised
versions must equal exactly (test_sol_vectorised.py).
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import pandas as pd

from kviewer.analysis.devices import DeviceSpec, devices_for_trace
from kviewer.analysis.kinds import (
    MATRIX_KINDS, kernel_op_info, kernel_op_rows, name_kind, op_kind, precision_from_name, precision_pipe,
)
from kviewer.analysis import kinds as _kinds
from kviewer.analysis.kinds import DATA_KINDS
from kviewer.analysis.model import MODEL_COLUMNS, OpWork, _enclosing_flops, _join, model_kernels, op_work
from kviewer.analysis.sol import _REASON_TEXT, _TENSOR_ACTIVE_PCT, SOL_COLUMNS, SOL_EXCEEDS, SOL_OK, SOL_UNKNOWN, _over_100_reason, _peak
from kviewer.core import Trace
from kviewer.analysis.kinds import CLASSIFY_COLUMNS, WIDE_BLOCKS


def speed_of_light_per_kernel(
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
    m = model if model is not None else model_kernels(trace, classify_per_kernel(trace))
    names = k["name"].astype(str).to_numpy()
    dur = k["dur"].to_numpy(np.float64)

    # -- measured FLOPs: every counter family that was collected (fp64, fp32, fp16 vector; tensor)
    fam_cols = ["flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor"]
    meas = np.column_stack([k[c].to_numpy(np.float64) for c in fam_cols]) if n else np.zeros((0, 4))
    any_meas = np.asarray(~np.isnan(meas).all(axis=1) if n else np.zeros(0, dtype=bool), dtype=bool)
    meas_flops = np.where(any_meas, np.nansum(np.nan_to_num(meas, nan=0.0), axis=1), np.nan)
    tensor_pct = k["tensor_pipe_pct"].to_numpy(np.float64)
    tensor_missing = any_meas & np.isnan(meas[:, 3]) & (tensor_pct > _TENSOR_ACTIVE_PCT)
    tprec = k["tensor_precision"].astype(str).to_numpy() if "tensor_precision" in k else np.full(n, "", dtype=object)

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
    name_prec: dict[str, str] = {}
    for i in range(n):
        notes: list[str] = []
        spec = specs.get(int(dev_col[i])) if specs else None
        kind = str(m_kind[i])
        precision, pipe = str(m_prec[i]), str(m_pipe[i])
        # FLOPs: measured, else modelled, else unknown -- never a measured kernel's model
        if any_meas[i] and tensor_missing[i]:
            flops, fsrc = math.nan, "unknown"
            notes.append("tensor pipe active but no tensor FLOP counter collected: FLOPs unknown (counters are never mixed with the model)")
            pipe = "tensor"
        elif any_meas[i]:
            flops, fsrc = meas_flops[i], "measured"
        elif not math.isnan(mflops[i]):
            flops, fsrc = mflops[i], "modelled"
        else:
            flops, fsrc = math.nan, "unknown"
        # bytes
        if not math.isnan(meas_bytes[i]):
            nbytes, bsrc = meas_bytes[i], "measured"
        elif not math.isnan(mbytes[i]):
            nbytes, bsrc = mbytes[i], "modelled"
        else:
            nbytes, bsrc = math.nan, "unknown"
        # precision and pipe: the counter that fired, else the op's dtypes, else the name
        # (kinds.precision_pipe, the one rule)
        if names[i] not in name_prec:
            name_prec[names[i]] = precision_from_name(names[i])
        hint = name_prec[names[i]]
        peak, field = math.nan, ""
        if fsrc != "measured":
            precision, pipe, _ = precision_pipe(kind, op=precision, op_pipe=pipe, name=names[i])
        if fsrc == "measured":
            parts = np.nan_to_num(meas[i], nan=0.0)
            cands = []
            for j, (p, pp) in enumerate((("fp64", "vector"), ("fp32", "vector"), ("fp16", "vector"), ("", "tensor"))):
                if parts[j] <= 0:
                    continue
                if pp == "tensor":
                    counter = tprec[i] if tprec[i] not in ("", "nan") else ""
                    op_p = precision if precision not in ("", "fp32") else ""  # fp32 ops run tf32 or fp32
                    p = precision_pipe(kind, counter, "tensor", op_p, "tensor", names[i])[0]
                    if not p:
                        p = "fp16"
                        notes.append("tensor precision not recorded: FP16 tensor peak assumed")
                pk, fd = _peak(spec, p, pp)
                cands.append((parts[j] / pk if pk > 0 else math.inf, p, pp, pk, fd, parts[j]))
            if cands:
                # the pipes run side by side: the family needing the most time at its own peak
                # sets the roof, and the kernel's FLOPs are that counter's value (a GEMM's are its
                # tensor operations, exactly what Nsight Compute counted; the epilogue's few FP32
                # FLOPs ran on another pipe and are named in the note)
                _, precision, pipe, peak, field, flops = max(cands, key=lambda c: c[0])
                others = [c for c in cands if c[1:3] != (precision, pipe)]
                if others:
                    notes.append("also " + ", ".join(f"{c[5]:,.0f} {c[1].upper()} {c[2]} FLOPs" for c in others)
                                 + " (on another pipe, within the time of the first)")
            else:
                precision, pipe = precision or hint or "fp32", pipe or "vector"
        if not precision:
            precision = "fp32"
            if not math.isnan(flops):
                notes.append("precision not recorded: the FP32 peak assumed")
        if not pipe:
            pipe = "tensor" if kind in ("gemm", "conv", "attention") else "vector"
        if not field:
            peak, field = _peak(spec, precision, pipe)
        if field and pipe == "tensor" and not field.startswith(precision):
            notes.append(f"no {precision.upper()} tensor rate on this GPU: {field} used")
        bw = spec.dram_bytes_per_s if spec else math.nan
        # the dominant family's FLOPs at its peak: the achieved point then sits under that roof
        # exactly when T_SOL <= the measured time
        t_c = flops / peak * 1e9 if peak > 0 and not math.isnan(flops) else math.nan
        t_m = nbytes / bw * 1e9 if bw > 0 and not math.isnan(nbytes) else math.nan
        if math.isnan(t_c) and math.isnan(t_m):
            t_sol = math.nan
            bound_model = "unknown"
        elif math.isnan(t_c) and (kind in ("gemm", "conv", "attention") or tensor_missing[i]):
            # a matrix kernel's floor is its compute term: the memory term alone would put a GEMM
            # at a few % of a speed of light it nearly reaches
            t_sol, bound_model = math.nan, "unknown"
            notes.append("FLOPs unknown for a matrix kernel: its speed of light is unknown (the memory term alone would understate it)")
        elif math.isnan(t_c):
            t_sol, bound_model = (t_m, "unknown") if t_m > 0 else (math.nan, "unknown")
            notes.append("FLOPs unknown: the memory term alone")
        elif math.isnan(t_m):
            # a kernel known to do no arithmetic has no compute floor: nothing is known
            t_sol, bound_model = (t_c, "unknown") if t_c > 0 else (math.nan, "unknown")
            notes.append("bytes unknown: the compute term alone")
        else:
            t_sol = max(t_c, t_m)
            bound_model = "compute" if t_c >= t_m else "memory"
        sol_pct = t_sol / dur[i] * 100.0 if dur[i] > 0 and not math.isnan(t_sol) else math.nan
        status, reason = (SOL_UNKNOWN if math.isnan(sol_pct) else SOL_OK), ""
        ncu_bound = ""
        if not math.isnan(ncu_sm[i]) and not math.isnan(ncu_mem[i]):
            ncu_bound = "memory" if ncu_mem[i] > ncu_sm[i] else "compute"
        bound = bound_model if bound_model != "unknown" or not ncu_bound else ncu_bound
        if sol_pct > 100.0:
            reason = _over_100_reason(t_c, t_m, dur[i], fsrc, bsrc, kind, str(m_note[i]))
            notes.append(f"exceeds peak: model or counter error ({sol_pct:.0f}% of the speed of light is impossible): " + _REASON_TEXT[reason](nbytes, spec))
            status, sol_pct, t_sol = SOL_EXCEEDS, math.nan, math.nan
        intensity = flops / nbytes if nbytes > 0 and not math.isnan(flops) else math.nan
        note = str(m_note[i])
        if note:
            notes.insert(0, note)
        rows.append(
            (
                flops, fsrc, nbytes, bsrc, precision, pipe, kind, intensity, peak, field, bw, t_c, t_m, t_sol,
                sol_pct, bound, bound_model, spec.id if spec else "", "; ".join(notes), status, reason, ncu_bound,
            )
        )
    cols_out = [
        "flops", "flops_source", "bytes", "bytes_source", "precision", "pipe", "kind", "intensity",
        "peak_flops", "peak_field", "peak_bw", "t_compute_ns", "t_memory_ns", "t_sol_ns", "sol_pct",
        "bound", "bound_model", "gpu", "note", "sol_status", "sol_reason", "ncu_bound",
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


def classify_per_kernel(trace: Trace, ops: np.ndarray | None = None) -> pd.DataFrame:
    """Kind of every kernel (rows in ``trace.kernels`` order), from the strongest signal present.

    Columns: ``kind``; ``kind_source`` (``counters`` | ``op`` | ``name``); ``helper`` (True for
    a helper kernel of its op: it gets none of the op's FLOPs); ``op_row`` (the launching op's
    ``cpu_slices`` position, -1), ``op_name``, ``op_kind`` and ``name_kind``.
    """
    k = trace.kernels
    n = len(k)
    ops = kernel_op_rows(trace) if ops is None else ops
    op_names, _ = kernel_op_info(trace, ops)
    cats = k["name"].astype("category") if n else pd.Series([], dtype="category")
    by_cat = np.array([name_kind(str(c)) for c in cats.cat.categories] + ["other"], dtype=object)
    nkind = by_cat[cats.cat.codes.to_numpy()] if n else np.array([], dtype=object)
    uniq_ops, inv = np.unique(op_names.astype(str), return_inverse=True) if n else (np.array([]), np.array([], dtype=np.int64))
    okind = np.array([op_kind(str(o)) for o in uniq_ops], dtype=object)[inv] if n else np.array([], dtype=object)

    tensor = k["flops_tensor"].to_numpy(np.float64) if n else np.zeros(0)
    fired = np.nan_to_num(tensor, nan=0.0) > 0
    kind = nkind.copy()
    source = np.full(n, "name", dtype=object)
    helper = np.zeros(n, dtype=bool)
    # ops whose matrix arithmetic is recognisably done by some of their kernels: the others are helpers
    has_main: set[int] = set()
    for j in np.flatnonzero((ops >= 0) & (np.isin(nkind, list(MATRIX_KINDS)) | fired)):
        has_main.add(int(ops[j]))
    # one-block kernels beside a sibling of the same op launch of at least WIDE_BLOCKS blocks
    blocks = []
    for i in range(n):
        b = 1.0
        for c in ("grid_x", "grid_y", "grid_z"):
            v = pd.to_numeric(k[c].iloc[i], errors="coerce") if c in k.columns else math.nan
            b *= float(v) if v == v and v > 0 else 0.0
        blocks.append(b)
    widest: dict[int, float] = {}
    for i in range(n):
        if ops[i] >= 0:
            widest[int(ops[i])] = max(widest.get(int(ops[i]), 0.0), blocks[i])
    for i in range(n):
        nk, ok = nkind[i], okind[i]
        if ok and ok != "other":
            is_helper = nk in ("copy", "fill", "communication", "sort") and nk != ok
            if ok in MATRIX_KINDS and nk not in MATRIX_KINDS and not fired[i]:
                # a transform, convert, split-K reduction or epilogue beside the op's main kernel
                is_helper = is_helper or int(ops[i]) in has_main or nk in ("reduction", "elementwise", "norm")
            if ok == "attention" and nk == "softmax":
                is_helper = False  # an unfused attention's softmax is part of the op's arithmetic
            if ops[i] >= 0 and blocks[i] == 1 and widest[int(ops[i])] >= WIDE_BLOCKS:
                is_helper = True
            if is_helper:
                helper[i] = True
            else:
                kind[i] = ok
                source[i] = "op"
        if fired[i]:
            # tensor ops fired: matrix arithmetic, whatever the name or op said about it
            if kind[i] not in MATRIX_KINDS:
                kind[i] = "gemm"
            source[i] = "counters"
            helper[i] = False
    return pd.DataFrame(
        {"kind": kind, "kind_source": source, "helper": helper, "op_row": ops, "op_name": op_names,
         "op_kind": okind, "name_kind": nkind},
        columns=CLASSIFY_COLUMNS,
    )


def model_kernels_per_kernel(trace: Trace, classes: pd.DataFrame | None = None) -> pd.DataFrame:
    """The modelled work of every kernel (one row per kernel, in ``trace.kernels`` order).

    Columns: ``op_id``, ``op_name``, ``op_dims`` (the op's input shapes, JSON text), ``kind``,
    ``kind_source`` and ``helper`` (from :func:`kviewer.analysis.kinds.classify`),
    ``model_flops``, ``model_bytes`` (read + written), ``model_bytes_written`` (the output, which a
    fused consumer would no longer read back), ``out_numel`` (elements of the op's output),
    ``precision``, ``pipe`` (tensor | vector), ``op_kernels`` (how many kernels the op launched)
    and ``model_note``.

    An op's FLOPs and bytes go to the kernels doing its arithmetic (split evenly when there are
    several); its helper kernels (layout transforms, converts, fills, copies, split-K reductions)
    get none of them: a copy or fill helper is known to do no FLOPs, its bytes are unknown.
    """
    k = trace.kernels
    n = len(k)
    cls = _kinds.classify(trace) if classes is None else classes
    op_id = cls["op_row"].to_numpy(np.int64)
    out = {
        "op_id": op_id,
        "op_name": cls["op_name"].to_numpy(dtype=object).copy(),
        "op_dims": np.full(n, "", dtype=object),
        "kind": cls["kind"].to_numpy(dtype=object).copy(),
        "kind_source": cls["kind_source"].to_numpy(dtype=object),
        "helper": cls["helper"].to_numpy(dtype=bool),
        "model_flops": np.full(n, np.nan),
        "model_bytes": np.full(n, np.nan),
        "model_bytes_written": np.full(n, np.nan),
        "out_numel": np.full(n, np.nan),
        "precision": np.full(n, "", dtype=object),
        "pipe": np.full(n, "", dtype=object),
        "op_kernels": np.zeros(n, dtype=np.int64),
        "model_note": np.full(n, "", dtype=object),
    }
    has_op = op_id >= 0
    if not has_op.any():
        return pd.DataFrame(out, columns=MODEL_COLUMNS)
    c = trace.cpu_slices
    rows = np.nonzero(has_op)[0]
    ids = op_id[rows]
    op_names = c["name"].astype(str).to_numpy()[ids]
    op_dims = c["input_dims"].astype(str).to_numpy()[ids]
    op_types = c["input_types"].astype(str).to_numpy()[ids]
    op_conc = c["concrete_inputs"].astype(str).to_numpy()[ids] if "concrete_inputs" in c else np.full(len(ids), "", dtype=object)
    op_flops = c["flops"].to_numpy(np.float64)[ids]
    counts = pd.Series(ids).map(pd.Series(ids).value_counts()).to_numpy()
    out["op_kernels"][rows] = counts
    out["op_dims"][rows] = op_dims
    helper = out["helper"]
    # the kernels doing each op's arithmetic, and their measured time
    mains: dict[int, int] = {}
    main_ns: dict[int, float] = {}
    kdur = k["dur"].to_numpy(np.float64)
    for r, i in zip(rows, ids):
        if not helper[r]:
            mains[int(i)] = mains.get(int(i), 0) + 1
            main_ns[int(i)] = main_ns.get(int(i), 0.0) + max(kdur[r], 0.0)
    # ops whose main kernels are each one gradient (dgrad / wgrad), as many as the op computes
    knames = k["name"].astype(str).to_numpy()
    grads: dict[int, set[str]] = {}
    for r, i in zip(rows, ids):
        if not helper[r]:
            words = set(_kinds.name_words(str(knames[r])))
            grads.setdefault(int(i), set()).add("dgrad" if "dgrad" in words else "wgrad" if "wgrad" in words else "")
    # (each gradient may run as several kernels, a split-K wgrad: those share its FLOPs by time)
    per_grad = {i for i, g in grads.items() if "" not in g}
    grad_of = {int(r): ("dgrad" if "dgrad" in _kinds.name_words(str(knames[r])) else "wgrad") for r, i in zip(rows, ids)
               if int(i) in per_grad and not helper[r]}
    grad_ns: dict[tuple[int, str], float] = {}
    for r, i in zip(rows, ids):
        if int(r) in grad_of:
            grad_ns[(int(i), grad_of[int(r)])] = grad_ns.get((int(i), grad_of[int(r)]), 0.0) + max(kdur[r], 0.0)
    enclosing = _enclosing_flops(trace, np.unique(ids))
    for r, i, nm, d, t, f, cc in zip(rows, ids, op_names, op_dims, op_types, op_flops, op_conc):
        w = op_work(nm, d, t, float(f), cc)
        if math.isnan(w.flops) and int(i) in enclosing and w.kind in ("conv", "gemm", "attention"):
            # the innermost op (aten::cudnn_convolution) has no formula here, but an op around it
            # (aten::conv2d) carries the profiler's own FLOP count
            flops, outer = enclosing[int(i)]
            w = OpWork(w.kind, flops, w.bytes_read, w.bytes_written, w.precision or "", w.pipe or "tensor",
                       _join(w.note, f"FLOPs from the profiler's arg on the enclosing {outer}"), w.out_numel)
        out["precision"][r] = w.precision
        out["out_numel"][r] = w.out_numel
        if helper[r]:
            out["pipe"][r] = "vector"
            if out["kind"][r] in DATA_KINDS:
                out["model_flops"][r] = 0.0
            out["model_note"][r] = f"helper kernel of {nm}: none of the op's FLOPs or bytes (they go to its main kernels)"
            continue
        share = 1.0
        note = w.note
        members, n_main = int(counts[np.searchsorted(rows, r)]), mains.get(int(i), 1)
        if n_main > 1 and int(i) in per_grad:
            # a convolution backward's dgrad and wgrad kernels each compute one gradient, and
            # each gradient costs the forward's FLOPs: each gets exactly its own, not a time share
            kinds_here = grads[int(i)]  # the gradients its main kernels compute
            same_ns = grad_ns.get((int(i), grad_of[int(r)]), 0.0)
            share = (1.0 / len(kinds_here)) * (max(kdur[r], 0.0) / same_ns if same_ns > 0 else 1.0)
            note = _join(note, f"{nm} launched {members} kernels: its {grad_of[int(r)]} kernel(s) compute one of its "
                               f"{len(kinds_here)} gradients, 1/{len(kinds_here)} of the op's work")
        elif n_main > 1:
            # several kernels share the op's arithmetic (statistics then normalise, split-K
            # partials): in proportion to their time, so each runs at the op's own SOL%
            total_ns = main_ns.get(int(i), 0.0)
            share = max(kdur[r], 0.0) / total_ns if total_ns > 0 else 1.0 / n_main
            note = _join(note, f"{nm} launched {members} kernels: its work is split over the {n_main} doing its arithmetic in proportion to their time")
        elif members > 1:
            note = _join(note, f"{nm} launched {members} kernels: all its work is attributed to this one")
        if out["kind_source"][r] != "counters" and w.kind not in ("other", ""):
            if out["kind"][r] != w.kind and w.kind in _kinds.KINDS and out["kind_source"][r] != "op":
                out["kind"][r] = w.kind
        out["model_flops"][r] = w.flops * share
        out["model_bytes"][r] = w.bytes * share
        out["model_bytes_written"][r] = w.bytes_written * share
        # an fp32 GEMM run by an FMA-pipe kernel (volta_sgemm, cutlass simt, ffma): the vector peak applies
        out["pipe"][r] = "vector" if w.pipe == "tensor" and _kinds.fma_pipe(str(knames[r])) else w.pipe
        out["model_note"][r] = note
    return pd.DataFrame(out, columns=MODEL_COLUMNS)
