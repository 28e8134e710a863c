"""Building tables: events, piece by piece, into numpy columns; then sorted and linked into a Trace."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from msgspec import Raw

from kviewer.core import Diagnostic, Trace, TraceMeta, make_table
from kviewer.core.intervals import nesting_depth
from kviewer.core.names import short_name
from kviewer.errors import CorruptTrace
from kviewer.io.graphs import link_graphs
from kviewer.io.registry import CancelToken
from kviewer.io.torch.events import _NO_ARGS, LABEL, NAME, _Args, _Doc, _Event
from kviewer.io.torch.header import _devices, _extra, _is_amd, _label, _rank, _tool_version

# ---------------------------------------------------------------------------------------------
# building tables

# what each category becomes; anything else with ph "X" is a cpu slice of category "other"
_K_SKIP, _K_KERNEL, _K_MEMCPY, _K_MEMSET, _K_CPU = 0, 1, 2, 3, 4
_GPU_CATS = {"kernel": _K_KERNEL, "gpu_memcpy": _K_MEMCPY, "memcpy": _K_MEMCPY, "gpu_memset": _K_MEMSET, "memset": _K_MEMSET}
#: cpu_slices categories, in the order of their integer codes here
_CPU_CATEGORIES = ["runtime", "driver", "op", "python", "annotation", "gpu_annotation", "sync", "other"]
_C = {name: i for i, name in enumerate(_CPU_CATEGORIES)}
_CPU_CATS = {
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "op",
    "operator": "op",
    "python_function": "python",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
}
#: slices that live on a GPU (device, stream) track rather than a host thread
_GPU_TRACK = [_C["gpu_annotation"], _C["sync"]]
_LAUNCH = [_C["runtime"], _C["driver"]]
#: cpu slices whose args may carry shapes, dtypes and FLOPs
_OPS = [_C["op"], _C["annotation"], _C["other"]]
#: categories Kineto writes that are plain CPU slices of category "other" by design (every other
#: category that falls to "other" is unknown and counted in a warning)
_KNOWN_OTHER = {"overhead", "glow_runtime", "hpu_op", "collective_comm", "external_correlation", "cpu_instant_event"}
#: the 2021 (PyTorch 1.8/1.9) schema wrote these capitalised
_SCHEMA_2021_CATS = {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"}
_DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|HtoA|AtoH|AtoA|AtoD|DtoA)\b")
_DIGITS = re.compile(r"-?\d+")
#: at or above this, a µs timestamp is absolute epoch time (1e14 µs is 1973)
_ABSOLUTE_US = 1e14
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

_CAT, _NAME, _PID, _TID, _TS, _DUR = (attrgetter(a) for a in ("cat", "name", "pid", "tid", "ts", "dur"))
_DIMS, _TYPES, _GRID, _BLOCK, _SIZE, _STREAM, _CONCRETE = (
    attrgetter(a) for a in ("input_dims", "input_types", "grid", "block", "size", "stream", "concrete")
)
_COLL, _PG, _SEQ = (attrgetter(a) for a in ("collective", "process_group", "seq"))


def _classify(cat: str) -> tuple[int, int]:
    """(kind, cpu category code) of an event category."""
    low = cat.lower()
    if low in _GPU_CATS:
        return _GPU_CATS[low], -1
    if low == "trace":  # the profiler's own span, on the "Spans" pseudo-process
        return _K_SKIP, -1
    if low in _CPU_CATS:
        return _K_CPU, _C[_CPU_CATS[low]]
    if low.endswith("_runtime"):
        return _K_CPU, _C["runtime"]
    if low.endswith("_driver"):
        return _K_CPU, _C["driver"]
    return _K_CPU, _C["other"]


def _field(objs: list[Any], name: str, dtype: Any) -> np.ndarray:
    """One attribute of every struct as an array (typed struct fields: no conversion needed)."""
    return np.fromiter(map(attrgetter(name), objs), dtype=dtype, count=len(objs))


def _codes(ids: dict[Any, int], values: list[Any]) -> np.ndarray:
    """Integer codes of hashable values, growing ``ids`` (value -> code) with the new ones.

    A dict does this about twice as fast as ``pd.factorize`` on freshly decoded strings. Most
    pieces of a trace bring no new value, so look them up first and only on a miss collect the
    new ones."""
    try:
        return np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))
    except KeyError:
        pass
    for v in dict.fromkeys(values):
        if v not in ids:
            ids[v] = len(ids)
    return np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))


def _ids(xs: list[_Event], getter: Callable[[_Event], Any]) -> tuple[np.ndarray, np.ndarray]:
    """pids or tids as int64, and a mask of the numeric ones.

    Kineto writes ints, the 2021 schema strings ("25738", "stream 7"), and the profiler's
    pseudo-tracks names ("Spans"). Strings give the number in them, or -1 (mask False).
    """
    try:  # ints and numeric strings, in one pass
        return np.fromiter(map(getter, xs), dtype=np.int64, count=len(xs)), np.ones(len(xs), dtype=bool)
    except (ValueError, TypeError, OverflowError):
        pass
    uniques: dict[Any, int] = {}
    codes = _codes(uniques, list(map(getter, xs)))
    conv = np.empty(len(uniques), dtype=np.int64)
    ok = np.ones(len(uniques), dtype=bool)
    for v, i in uniques.items():
        number: int | None = None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            number = int(v)
        elif isinstance(v, str) and (m := _DIGITS.search(v)):
            number = int(m.group())
        if number is not None and _I64_MIN <= number <= _I64_MAX:
            conv[i] = number
        else:
            conv[i], ok[i] = -1, False
    return conv[codes], ok[codes]


def _texts(raws: list[Raw]) -> list[str]:
    """Raw JSON values as text ('' when absent). One join and one split: JSON text never holds a
    NUL byte, and this is twice as fast as ``bytes()`` on each."""
    if not raws:
        return []
    return b"\x00".join(raws).decode("utf-8", "replace").split("\x00")


def _xyz(lists: list[list[int] | None]) -> np.ndarray:
    """[x, y, z] lists (or None) as an (n, 3) int64 array, -1 where unknown."""
    n = len(lists)
    if not any(lists):
        return np.full((n, 3), -1, dtype=np.int64)
    if all(v is not None and len(v) == 3 for v in lists):
        try:
            return np.array(lists, dtype=np.int64).reshape(n, 3)
        except (ValueError, TypeError, OverflowError):
            pass
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, v in enumerate(lists):
        if v:
            k = min(3, len(v))
            out[i, :k] = v[:k]
    return out


def _int_or(values: list[Any]) -> np.ndarray:
    """ints, numeric strings ("2560", "0x0") and anything else (-1)."""
    if set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    out = np.full(len(values), -1, dtype=np.int64)
    for i, v in enumerate(values):
        try:
            number = int(v, 0) if isinstance(v, str) else int(v)
        except (ValueError, TypeError, OverflowError):
            continue
        if _I64_MIN <= number <= _I64_MAX:
            out[i] = number
    return out


def _track(pid: np.ndarray, tid: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    """One small integer per (pid, tid, on a GPU track?) triple."""
    if not len(pid):
        return np.zeros(0, dtype=np.int64)
    p, _ = pd.factorize(pid)
    t, tu = pd.factorize(tid)
    combined = (p.astype(np.int64) * (len(tu) + 1) + t) * 2 + gpu.astype(np.int64)
    codes, _ = pd.factorize(combined)
    return codes.astype(np.int64)


class _OutOfRange(ValueError):
    """Times an int64 count of nanoseconds cannot hold (a damaged file)."""


def _in_range(ns: np.ndarray, what: str) -> np.ndarray:
    """``ns`` when every value fits an int64 (a cast would silently wrap the others), else raise."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(ns) < 2.0**63)  # NaN and inf too
    if bad.any():
        raise _OutOfRange(
            f"{int(bad.sum()):,} event {what} are beyond what kviewer can represent "
            f"(±292 years in nanoseconds), e.g. {float(ns[bad][0]) / 1000:g} µs"
        )
    return ns


class _Times:
    """ts (µs) -> int64 ns relative to the origin, exactly as ``round(us * 1000)``."""

    def __init__(self, path: Path, ts: np.ndarray, base: int | None, warnings: list[Diagnostic]) -> None:
        if len(ts) and float(ts.min()) >= _ABSOLUTE_US:
            # absolute epoch µs: subtract an integer origin before scaling, so 1.7e15 µs keeps
            # every digit the file has (integers below 2**53 are exact in float64)
            self.origin_us = math.floor(float(ts.min()))
            self.origin_ns: int | None = self.origin_us * 1000
            self.note = "absolute epoch µs"
        else:
            # Kineto's relative µs can be large (days since baseTimeNanoseconds): move the origin
            # to the first whole µs so the tables' times start near 0 and keep full precision
            # (scaled first, then shifted by whole ns: exactly round(ts * 1000) - shift)
            self.origin_us = 0
            self.shift_ns = 1000 * math.floor(float(ts.min())) if len(ts) and float(ts.min()) > 0 else 0
            self.origin_ns = None if base is None else base + self.shift_ns
            self.note = "µs relative to baseTimeNanoseconds" if base is not None else "µs from an unknown origin"
            if base is None and len(ts):
                warnings.append(
                    Diagnostic.warning("time_origin", path, "relative timestamps without baseTimeNanoseconds: the wall-clock time of the trace is unknown")
                )

    shift_ns = 0

    def start(self, ts: np.ndarray) -> np.ndarray:
        rel = ts - self.origin_us if self.origin_us else ts
        out = np.rint(_in_range(rel * 1000.0, "timestamps")).astype(np.int64)
        if self.shift_ns:
            out -= self.shift_ns
        return out


class _Columns:
    """Columns of the events seen so far, built piece by piece (file order)."""

    #: per row (kept complete event)
    ROW = ("kind", "ccat", "ts", "dur", "pid", "tid", "name", "ext", "corr", "flops", "dims", "types", "conc", "lgrid", "lblock", "lbytes")
    #: per kernel / per GPU op
    KER = ("k_row", "k_dev", "k_stream", "k_grid", "k_block", "k_regs", "k_smem", "k_occ", "k_gnode", "k_gid", "k_coll", "k_pg", "k_seq")
    GOP = ("g_row", "g_bytes", "g_dev", "g_stream")
    #: per [memory] instant event (profile_memory=True)
    MEM = ("m_ts", "m_pid", "m_tid", "m_bytes", "m_addr", "m_talloc", "m_tres", "m_dtype", "m_dev")

    def __init__(self) -> None:
        self.cat_code: dict[str, int] = {}
        self.names: dict[str, int] = {}
        self.dims: dict[str, int] = {"": 0}
        self.types: dict[str, int] = {"": 0}
        self.conc: dict[str, int] = {"": 0}
        self.colls: dict[str, int] = {"": 0}
        self.groups: dict[str, int] = {"": 0}
        self.schema_2021 = False
        self.n_rows = 0
        self.n_events = 0
        self.bad = 0
        self.utf8 = False
        self.surrogates = 0
        """escapes of half a UTF-16 surrogate pair read as U+FFFD"""
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.ROW + self.KER + self.GOP + self.MEM}
        self.g_kind: list[Any] = []
        #: category code -> events so far, for the categories no rule knows
        self.unknown: dict[int, int] = {}
        self.unknown_names: dict[int, str] = {}

    def add(self, events: list[_Event]) -> None:
        """Turn a piece of events into columns (the events can be dropped afterwards)."""
        self.n_events += len(events)
        mem = [e for e in events if e.ph == "i" and e.name == "[memory]"]
        if mem:
            self._add_memory(mem)
        xs = [e for e in events if e.ph == "X"]
        if not xs:
            return
        cats = list(map(_CAT, xs))
        cc = self.cat_code
        try:
            code = np.fromiter(map(cc.__getitem__, cats), dtype=np.int16, count=len(cats))
        except KeyError:  # a category not seen before
            for c in dict.fromkeys(cats):
                if c not in cc:
                    c_kind, c_cpu = _classify(c)
                    cc[c] = c_kind * 16 + c_cpu + 1
                    if c_kind == _K_CPU and c_cpu == _C["other"] and c.lower() not in _KNOWN_OTHER:
                        self.unknown_names[cc[c]] = c
                    self.schema_2021 |= c in _SCHEMA_2021_CATS
            code = np.fromiter(map(cc.__getitem__, cats), dtype=np.int16, count=len(cats))
        if self.unknown_names:
            for c_code in self.unknown_names:
                hits = int((code == c_code).sum())
                if hits:
                    self.unknown[c_code] = self.unknown.get(c_code, 0) + hits
        kind, ccat = code >> 4, (code & 15) - 1
        pid, pid_ok = _ids(xs, _PID)
        keep = (kind != _K_SKIP) & pid_ok  # drop the profiler's span and named pseudo-processes
        if not keep.all():
            idx = np.flatnonzero(keep)
            xs = [xs[i] for i in idx.tolist()]
            kind, ccat, pid = kind[idx], ccat[idx], pid[idx]
        n = len(xs)
        base = self.n_rows
        self.n_rows += n
        ts = np.fromiter(map(_TS, xs), dtype=np.float64, count=n)
        dur = np.fromiter(map(_DUR, xs), dtype=np.float64, count=n)
        tid, _ = _ids(xs, _TID)
        names = _codes(self.names, list(map(_NAME, xs)))

        # args: python frames carry none kviewer uses, so their structs are not even visited
        is_cpu = kind == _K_CPU
        need = np.flatnonzero(~is_cpu | (ccat != _C["python"]))
        args = [xs[i].args or _NO_ARGS for i in need.tolist()]
        del xs
        ext = np.full(n, -1, dtype=np.int64)
        corr = np.full(n, -1, dtype=np.int64)
        e1 = _field(args, "external_id", np.int64)
        if self.schema_2021:  # "external id" in the 2021 schema
            e1 = np.where(e1 >= 0, e1, _field(args, "external_id_2021", np.int64))
        ext[need] = e1
        corr[need] = _field(args, "correlation", np.int64)
        n_kind, n_ccat, n_cpu = kind[need], ccat[need], is_cpu[need]

        def subset(mask: np.ndarray) -> tuple[np.ndarray, list[_Args]]:
            sel = np.flatnonzero(mask)
            return need[sel], [args[j] for j in sel.tolist()]

        flops = np.full(n, np.nan)
        dims = np.zeros(n, dtype=np.int64)
        types = np.zeros(n, dtype=np.int64)
        conc = np.zeros(n, dtype=np.int64)
        rows, sub = subset(n_cpu & np.isin(n_ccat, _OPS))
        flops[rows] = _field(sub, "flops", np.float64)
        dims[rows] = _codes(self.dims, _texts(list(map(_DIMS, sub))))
        types[rows] = _codes(self.types, _texts(list(map(_TYPES, sub))))
        conc[rows] = _codes(self.conc, _texts(list(map(_CONCRETE, sub))))

        lgrid = np.full((n, 3), -1, dtype=np.int64)
        lblock = np.full((n, 3), -1, dtype=np.int64)
        lbytes = np.full(n, -1, dtype=np.int64)
        rows, sub = subset(n_cpu & np.isin(n_ccat, _LAUNCH))
        lgrid[rows] = _xyz(list(map(_GRID, sub)))
        lblock[rows] = _xyz(list(map(_BLOCK, sub)))
        b = _field(sub, "bytes", np.int64)
        lbytes[rows] = np.where(b >= 0, b, _int_or(list(map(_SIZE, sub))))

        row: tuple[np.ndarray, ...] = (kind, ccat, ts, dur, pid, tid, names, ext, corr, flops, dims, types, conc, lgrid, lblock, lbytes)
        for key, value in zip(self.ROW, row):
            self.parts[key].append(value)

        rows, sub = subset(n_kind == _K_KERNEL)
        for key, value in zip(
            self.KER,
            (
                rows + base,
                _field(sub, "device", np.int64),
                _int_or(list(map(_STREAM, sub))),
                _xyz(list(map(_GRID, sub))),
                _xyz(list(map(_BLOCK, sub))),
                _field(sub, "registers", np.int64),
                _field(sub, "shared_mem", np.int64),
                _field(sub, "occupancy", np.float64),
                _field(sub, "graph_node", np.int64),
                _field(sub, "graph_id", np.int64),
                _codes(self.colls, list(map(_COLL, sub))),
                _codes(self.groups, [str(g) for g in map(_PG, sub)]),
                _int_or(list(map(_SEQ, sub))),
            ),
        ):
            self.parts[key].append(value)

        rows, sub = subset((n_kind == _K_MEMCPY) | (n_kind == _K_MEMSET))
        for key, value in zip(
            self.GOP,
            (rows + base, _field(sub, "bytes", np.int64), _field(sub, "device", np.int64), _int_or(list(map(_STREAM, sub)))),
        ):
            self.parts[key].append(value)
        self.g_kind += [a.kind for a in sub]

    def _add_memory(self, mem: list[_Event]) -> None:
        """[memory] instant events as columns (allocations > 0 bytes, frees < 0)."""
        pid, ok = _ids(mem, _PID)
        args = [e.args or _NO_ARGS for e in mem]
        nbytes = np.array([a.mem_bytes if isinstance(a.mem_bytes, int) else 0 for a in args], dtype=np.int64)
        tid, _ = _ids(mem, _TID)
        cols = (
            np.fromiter(map(_TS, mem), dtype=np.float64, count=len(mem)), pid, tid, nbytes,
            _field(args, "addr", np.int64), _field(args, "total_allocated", np.int64), _field(args, "total_reserved", np.int64),
            _field(args, "device_type", np.int64), _field(args, "device_id", np.int64),
        )  # fmt: skip
        keep = ok & np.array([a.mem_bytes is not None for a in args], dtype=bool)
        for key, value in zip(self.MEM, cols):
            self.parts[key].append(value[keep])

    def _col(self, key: str, dtype: Any = np.int64, width: int = 0) -> np.ndarray:
        parts = self.parts[key]
        if parts:
            return np.concatenate(parts)
        return np.zeros((0, width) if width else 0, dtype=dtype)

    def finish(self, path: Path, header: _Doc, warnings: list[Diagnostic], cancel: CancelToken) -> Trace:
        """Sort, link and wrap the columns into a Trace."""
        col = self._col
        kind, ccat = col("kind", np.int16), col("ccat", np.int16)
        pid, tid, name = col("pid"), col("tid"), col("name")
        ext, corr = col("ext"), col("corr")
        ts = col("ts", np.float64)
        base = header.baseTimeNanoseconds
        base = base if isinstance(base, int) and not isinstance(base, bool) else None
        times = _Times(path, ts, base, warnings)
        try:
            start = times.start(ts)
            dur = np.rint(_in_range(col("dur", np.float64) * 1000.0, "durations")).astype(np.int64)
        except _OutOfRange as exc:
            raise CorruptTrace(path, str(exc), LABEL) from exc
        del ts
        name_index = pd.Index(list(self.names), dtype=object)
        rank = _rank(header.distributedInfo)

        def names_of(rows: np.ndarray) -> pd.Categorical:
            return pd.Categorical.from_codes(name[rows], categories=name_index).remove_unused_categories()

        def by_start(rows: np.ndarray) -> np.ndarray:
            return np.argsort(start[rows], kind="stable")

        # ---- cpu slices, in start order (stable: ties keep file order, as make_table would)
        ci = np.flatnonzero(kind == _K_CPU)
        ci = ci[by_start(ci)]
        n_cpu = len(ci)
        cpu_id = np.full(self.n_rows, -1, dtype=np.int64)
        cpu_id[ci] = np.arange(n_cpu, dtype=np.int64)
        c_cat = ccat[ci].astype(np.int8)
        c_start, c_dur = start[ci], dur[ci]
        track = _track(pid[ci], tid[ci], np.isin(c_cat, _GPU_TRACK))
        depth = nesting_depth(c_start, c_start + np.maximum(c_dur, 0), track)
        cpu_slices = make_table(
            "cpu_slices",
            n_cpu,
            {
                "name": names_of(ci),
                "category": pd.Categorical.from_codes(c_cat, categories=pd.Index(_CPU_CATEGORIES)),
                "start": c_start,
                "dur": c_dur,
                "rank": np.full(n_cpu, rank),
                "pid": pid[ci],
                "tid": tid[ci],
                "depth": depth,
                "correlation": corr[ci],
                "external_id": ext[ci],
                "input_dims": _text_categorical(self.dims, col("dims")[ci]),
                "input_types": _text_categorical(self.types, col("types")[ci]),
                "concrete_inputs": _text_categorical(self.conc, col("conc")[ci]),
                "flops": col("flops", np.float64)[ci],
            },
        )
        n_host = int(np.isin(c_cat, [_C["op"], _C["python"], _C["annotation"]]).sum())
        cancel.check()

        # ---- launch calls by correlation id
        lr = np.flatnonzero((kind == _K_CPU) & np.isin(ccat, _LAUNCH) & (corr >= 0))
        l_order = np.argsort(corr[lr], kind="stable")
        l_rows, l_corr = lr[l_order], corr[lr][l_order]

        def find_launch(c: np.ndarray) -> np.ndarray:
            """Row of the runtime/driver call with each correlation id, or -1."""
            if not len(l_corr):
                return np.full(len(c), -1, dtype=np.int64)
            pos = np.minimum(np.searchsorted(l_corr, c), len(l_corr) - 1)
            return np.where((c >= 0) & (l_corr[pos] == c), l_rows[pos], -1)

        # ---- kernels
        k_row = col("k_row")
        ko = by_start(k_row)
        k_row = k_row[ko]
        k_corr = corr[k_row]
        k_launch = find_launch(k_corr)
        has = k_launch >= 0
        lrow = np.maximum(k_launch, 0)
        grid, block = col("k_grid", width=3)[ko], col("k_block", width=3)[ko]
        # roctracer kernels may lack grid/block: the hipLaunchKernel call carries them
        fill = has & (grid[:, 0] < 0)
        grid[fill] = col("lgrid", width=3)[k_launch[fill]]
        fill = has & (block[:, 0] < 0)
        block[fill] = col("lblock", width=3)[k_launch[fill]]
        k_dev, k_stream = col("k_dev")[ko], col("k_stream")[ko]
        k_names = names_of(k_row)
        # short names are computed once per distinct name; several names can share one
        short = np.array([short_name(str(s)) for s in k_names.categories] + [""], dtype=object)
        n_k = len(k_row)
        kernels = make_table(
            "kernels",
            n_k,
            {
                "name": k_names,
                "short_name": pd.Categorical(short[k_names.codes]),
                "start": start[k_row],
                "dur": dur[k_row],
                "device": np.where(k_dev >= 0, k_dev, pid[k_row]),
                "stream": np.where(k_stream >= 0, k_stream, tid[k_row]),
                "rank": np.full(n_k, rank),
                "pid": np.where(has, pid[lrow], -1),
                "tid": np.where(has, tid[lrow], -1),
                "correlation": k_corr,
                "external_id": ext[k_row],
                "grid_x": grid[:, 0],
                "grid_y": grid[:, 1],
                "grid_z": grid[:, 2],
                "block_x": block[:, 0],
                "block_y": block[:, 1],
                "block_z": block[:, 2],
                "registers": col("k_regs")[ko],
                "shared_mem": col("k_smem")[ko],
                # Kineto computes this from the launch configuration with the CUDA occupancy
                # calculator; it is not a measured counter, so it is the theoretical figure.
                # It writes 0 where the calculator could not place a block (large dynamic
                # shared memory); a kernel that ran had a block resident, so 0 is unknown
                "theoretical_occupancy_pct": _positive_or_nan(col("k_occ", np.float64)[ko]),
                "graph_node": col("k_gnode")[ko],
                "graph_id": col("k_gid")[ko],
                "collective": _text_categorical(self.colls, col("k_coll")[ko]),
                "process_group": _text_categorical(self.groups, col("k_pg")[ko]),
                "collective_seq": col("k_seq")[ko],
            },
        )

        # ---- gpu ops
        g_row = col("g_row")
        go = by_start(g_row)
        g_row = g_row[go]
        g_corr = corr[g_row]
        g_launch = find_launch(g_corr)
        g_has = g_launch >= 0
        g_bytes = col("g_bytes")[go]
        # roctracer memcpys may lack "bytes"; the hipMemcpy* call has "bytes" or "size"
        fill = g_has & (g_bytes < 0)
        g_bytes[fill] = col("lbytes")[g_launch[fill]]
        g_names = names_of(g_row)
        is_copy = kind[g_row] == _K_MEMCPY
        g_kind = [self.g_kind[i] for i in go.tolist()]
        g_dev, g_stream = col("g_dev")[go], col("g_stream")[go]
        n_g = len(g_row)
        gpu_ops = make_table(
            "gpu_ops",
            n_g,
            {
                "kind": pd.Categorical(np.where(is_copy, "memcpy", "memset").astype(object), categories=["memcpy", "memset"]),
                "name": g_names,
                "start": start[g_row],
                "dur": dur[g_row],
                "bytes": g_bytes,
                "direction": pd.Categorical(_directions(g_names, is_copy, g_kind)),
                "device": np.where(g_dev >= 0, g_dev, pid[g_row]),
                "stream": np.where(g_stream >= 0, g_stream, tid[g_row]),
                "rank": np.full(n_g, rank),
                "pid": np.where(g_has, pid[np.maximum(g_launch, 0)], -1),
                "correlation": g_corr,
                "external_id": ext[g_row],
            },
        )

        # ---- flows: launch call -> kernel / gpu op. Every table above was given its rows in
        # start order, so make_table kept that order and a row's position is its id.
        kl, gl = np.flatnonzero(has), np.flatnonzero(g_has)
        flows = make_table(
            "flows",
            len(kl) + len(gl),
            {
                "src": np.concatenate([cpu_id[k_launch[kl]], cpu_id[g_launch[gl]]]),
                "dst_table": pd.Categorical(["kernels"] * len(kl) + ["gpu_ops"] * len(gl), categories=["kernels", "gpu_ops"]),
                "dst": np.concatenate([kl, gl]),
                "correlation": np.concatenate([k_corr[kl], g_corr[gl]]),
            },
        )

        memory = _memory_table(self, times, rank)
        if self.unknown:
            parts = ", ".join(f"{self.unknown_names[c]!r} {n:,}" for c, n in sorted(self.unknown.items(), key=lambda kv: -kv[1]))
            total = sum(self.unknown.values())
            warnings.append(Diagnostic.warning(
                "unknown_category", path,
                f"{total:,} events of categories kviewer does not know were kept as plain CPU slices (category 'other'): {parts}",
            ))
        amd = _is_amd(header)
        devices = _devices(path, header, rank, amd, kernels, gpu_ops, warnings)
        if not self.n_rows:
            warnings.append(Diagnostic.warning("empty", path, "the trace has no complete events"))
        meta = TraceMeta(
            path=str(path),
            source_format=NAME,
            format_label=_label(header, self.schema_2021, amd, n_k + n_g, n_host, sum(self.unknown.values())),
            tool="PyTorch Profiler",
            tool_version=_tool_version(header),
            origin_ns=times.origin_ns,
            ranks=[rank] if rank >= 0 else [],
            warnings=warnings,
            extra=_extra(header, times.note),
        )
        trace = Trace(meta=meta, kernels=kernels, gpu_ops=gpu_ops, cpu_slices=cpu_slices, flows=flows, devices=devices, memory=memory)
        return link_graphs(trace)


#: c10::DeviceType codes, as the [memory] events' "Device Type" writes them
DEVICE_TYPES = {0: "cpu", 1: "cuda", 2: "mkldnn", 3: "opengl", 4: "opencl", 5: "ideep", 6: "hip", 7: "fpga", 8: "maia",
                9: "xla", 10: "vulkan", 11: "metal", 12: "xpu", 13: "mps", 14: "meta", 15: "hpu", 16: "ve", 17: "lazy",
                18: "ipu", 19: "mtia", 20: "privateuseone"}  # fmt: skip


def _memory_table(acc: _Columns, times: _Times, rank: int) -> pd.DataFrame:
    """The [memory] events as the memory table (times on the trace's clock)."""
    col = acc._col
    ts = col("m_ts", np.float64)
    n = len(ts)
    if not n:
        return make_table("memory", 0)
    dtype = col("m_dtype")
    uniq, inv = np.unique(dtype, return_inverse=True)
    names = np.array([DEVICE_TYPES.get(int(u), f"device type {int(u)}" if u >= 0 else "") for u in uniq], dtype=object)
    dev = col("m_dev")
    return make_table(
        "memory",
        n,
        {
            "start": times.start(ts),
            "device": np.where(dtype == 0, -1, dev),
            "device_type": pd.Categorical(names[inv.reshape(-1)]),
            "rank": np.full(n, rank),
            "pid": col("m_pid"),
            "tid": col("m_tid"),
            "addr": col("m_addr"),
            "bytes": col("m_bytes"),
            "total_allocated": col("m_talloc"),
            "total_reserved": col("m_tres"),
            "source": pd.Categorical(np.full(n, "kineto", dtype=object)),
        },
    )


def _text_categorical(ids: dict[str, int], codes: np.ndarray) -> pd.Categorical:
    """Codes into ``ids`` (text -> code) as a categorical, unused texts dropped."""
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(ids), dtype=object)).remove_unused_categories()


def _directions(names: pd.Categorical, is_copy: np.ndarray, kinds: list[Any]) -> np.ndarray:
    """Copy direction from the op name ("Memcpy HtoD (Pinned -> Device)"), else from a ROCm
    ``kind`` arg ("HtoD"); '' for memsets."""
    by_name = []
    for n in names.categories:
        m = _DIRECTION.search(str(n))
        by_name.append(m.group(1) if m else "")
    out = np.array(by_name + [""], dtype=object)[names.codes]
    out[~is_copy] = ""
    for i in np.flatnonzero(is_copy & (out == "")).tolist():
        k = kinds[i]
        if isinstance(k, str) and _DIRECTION.fullmatch(k):
            out[i] = k
    return out


def _positive_or_nan(values: np.ndarray) -> np.ndarray:
    """``values`` with zero and negative entries unknown (NaN)."""
    out = np.asarray(values, dtype=np.float64).copy()
    out[~(out > 0)] = np.nan
    return out
