"""Device memory over time, from the allocator events a profiler recorded (the ``memory`` table).

PyTorch's ``profile_memory=True`` writes one ``[memory]`` event per allocation and free with the
allocator's ``Total Allocated`` and ``Total Reserved`` after it: the peak of those is what
``torch.cuda.max_memory_allocated()`` / ``max_memory_reserved()`` report over the same window.
Nsight Systems' ``--cuda-memory-usage=true`` records the CUDA allocations themselves (what a caching
allocator reserves): their running total is the ``allocated`` figure there, and ``reserved`` is
unknown.

At the peak, the allocations still live (allocated at or before it, not freed by then) are listed
largest first, each with the framework op that made it: the innermost ``cpu_op`` on the allocating
thread around the event that is not an allocation helper (``aten::empty``, ``aten::empty_strided``,
...). ``top_ops_at_peak`` sums them per op.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Trace

#: what :func:`memory_summary` reads of a trace
MEMORY_READS = {"memory": ()}
"""(an Nsight Systems export is then read no further; a PyTorch trace is parsed whole, so its ops are there)"""
#: ops that only hand out memory for the op around them (the op around is the one that made it)
ALLOC_HELPERS = frozenset({
    "aten::empty", "aten::empty_strided", "aten::empty_like", "aten::new_empty", "aten::new_empty_strided",
    "aten::resize_", "aten::zeros", "aten::zeros_like", "aten::ones_like", "aten::full", "aten::new_zeros",
    "aten::to", "aten::_to_copy", "aten::contiguous", "aten::clone",
})  # fmt: skip
#: how many live allocations the result keeps per device (the largest)
LIVE_LIMIT = 50


@dataclass
class LiveAllocation:
    addr: int
    bytes: int
    allocated_at_ns: int
    op: str
    """the op that made it; '' when unknown"""


@dataclass
class OpAtPeak:
    op: str
    bytes: int
    allocations: int


@dataclass
class DeviceMemory:
    device: int
    """device index; -1 for host memory"""
    device_type: str
    events: int
    allocations: int
    frees: int
    peak_allocated_bytes: int | None
    """the largest allocated total (None when the profiler reports no totals)"""
    peak_reserved_bytes: int | None
    peak_at_ns: int | None
    """when the allocated total first reached its peak (trace time)"""
    final_allocated_bytes: int | None
    source: str
    """kineto | nsys"""
    live_at_peak_bytes: int | None = None
    """sum of the live allocations recorded in the window (what was allocated before it is not seen)"""
    live_at_peak: list[LiveAllocation] = field(default_factory=list)
    top_ops_at_peak: list[OpAtPeak] = field(default_factory=list)


@dataclass
class MemoryResult:
    devices: list[DeviceMemory]

    def to_json(self) -> dict[str, Any]:
        return {"devices": [asdict(d) for d in self.devices]}


def _valid(values: np.ndarray) -> np.ndarray:
    return values >= 0


def memory_summary(trace: Trace, include_host: bool = False) -> MemoryResult:
    """Per device: the peaks, when, and what was live at the peak."""
    m = trace.memory
    out: list[DeviceMemory] = []
    if not len(m):
        return MemoryResult(out)
    dev = m["device"].to_numpy()
    dtype = m["device_type"].astype(str).to_numpy()
    src = m["source"].astype(str).to_numpy()
    keys = sorted(set(zip(dev.tolist(), dtype.tolist())) if include_host else {(int(d), t) for d, t in zip(dev.tolist(), dtype.tolist()) if d >= 0})
    # one entry per device (an nsys export splits device memory by kind: Device, Device Static)
    devices = sorted({d for d, _t in keys})
    for d in devices:
        rows = np.flatnonzero(dev == d)
        if d < 0:
            rows = rows[np.isin(dtype[rows], [t for dd, t in keys if dd == d])]
        out.append(_device(trace, rows, d, "/".join(sorted(set(dtype[rows].tolist()))),
                           "kineto" if (src[rows] == "kineto").all() else "nsys"))
    return MemoryResult(out)


def _device(trace: Trace, rows: np.ndarray, device: int, device_type: str, source: str) -> DeviceMemory:
    m = trace.memory
    start = m["start"].to_numpy()[rows]
    nbytes = m["bytes"].to_numpy()[rows]
    talloc = m["total_allocated"].to_numpy()[rows]
    tres = m["total_reserved"].to_numpy()[rows]
    addr = m["addr"].to_numpy()[rows]
    known = _valid(talloc)
    res = DeviceMemory(
        device=int(device), device_type=device_type, events=len(rows), allocations=int((nbytes > 0).sum()),
        frees=int((nbytes < 0).sum()), peak_allocated_bytes=None, peak_reserved_bytes=None, peak_at_ns=None,
        final_allocated_bytes=None, source=source,
    )
    if _valid(tres).any():
        res.peak_reserved_bytes = int(tres[_valid(tres)].max())
    if not known.any():
        return res
    k_idx = np.flatnonzero(known)
    peak_pos = int(k_idx[np.argmax(talloc[k_idx])])
    res.peak_allocated_bytes = int(talloc[peak_pos])
    res.peak_at_ns = int(start[peak_pos])
    res.final_allocated_bytes = int(talloc[k_idx[-1]])
    live = live_at(addr, nbytes, peak_pos)
    res.live_at_peak_bytes = int(nbytes[live].sum())
    order = live[np.argsort(-nbytes[live], kind="stable")]
    ops = ops_of(trace, rows[order])
    res.live_at_peak = [
        LiveAllocation(int(addr[i]), int(nbytes[i]), int(start[i]), op) for i, op in zip(order[:LIVE_LIMIT].tolist(), ops[:LIVE_LIMIT])
    ]
    per_op: dict[str, list[int]] = {}
    for i, op in zip(order.tolist(), ops):
        acc = per_op.setdefault(op, [0, 0])
        acc[0] += int(nbytes[i])
        acc[1] += 1
    res.top_ops_at_peak = sorted((OpAtPeak(op, b, n) for op, (b, n) in per_op.items()), key=lambda o: (-o.bytes, o.op))
    return res


def live_at(addr: np.ndarray, nbytes: np.ndarray, upto: int) -> np.ndarray:
    """Positions (into these rows, in time order) of the allocations made at or before ``upto``
    and not freed by then: an allocation is freed by the next event at its address."""
    n = upto + 1
    a, b = addr[:n], nbytes[:n]
    has = np.flatnonzero(a >= 0)
    if not len(has):
        return np.zeros(0, dtype=np.int64)
    order = has[np.lexsort((has, a[has]))]  # by address, then time
    same_next = np.r_[a[order][1:] == a[order][:-1], False]
    next_is_free = same_next & np.r_[b[order][1:] < 0, False]
    alive = (b[order] > 0) & ~next_is_free
    return np.sort(order[alive])


def ops_of(trace: Trace, memory_rows: np.ndarray) -> list[str]:
    """The op that made each allocation (see the module doc); for an Nsight Systems event the API
    call that made it (cudaMalloc)."""
    m = trace.memory
    if not len(memory_rows):
        return []
    src = m["source"].astype(str).to_numpy()[memory_rows]
    out = ["" if s == "kineto" else s for s in src.tolist()]
    c = trace.cpu_slices
    if not len(c):
        return out
    cat = c["category"].astype(str).to_numpy()
    ops = np.flatnonzero(cat == "op")
    if not len(ops):
        return out
    names = c["name"].astype(str).to_numpy()
    cs, ce = c["start"].to_numpy()[ops], c["end"].to_numpy()[ops]
    ctid, cpid, cdepth = c["tid"].to_numpy()[ops], c["pid"].to_numpy()[ops], c["depth"].to_numpy()[ops]
    ts = m["start"].to_numpy()[memory_rows]
    tid = m["tid"].to_numpy()[memory_rows]
    pid = m["pid"].to_numpy()[memory_rows]
    by_thread: dict[tuple[int, int], np.ndarray] = {}
    for i in range(len(memory_rows)):
        if src[i] != "kineto":
            continue
        key = (int(pid[i]), int(tid[i]))
        sel = by_thread.get(key)
        if sel is None:
            sel = by_thread[key] = np.flatnonzero((ctid == key[1]) & (cpid == key[0]))
        around = sel[(cs[sel] <= ts[i]) & (ce[sel] >= ts[i])]
        if not len(around):
            continue
        around = around[np.argsort(-cdepth[around], kind="stable")]
        chosen = next((names[ops[j]] for j in around.tolist() if names[ops[j]] not in ALLOC_HELPERS), names[ops[around[0]]])
        out[i] = str(chosen)
    return out


def memory_series(trace: Trace, device: int, column: str = "total_allocated", rank: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(times, values) of one device's (of one ``rank``'s, when given) allocated (or reserved)
    total, a step after each event; empty when the profiler reports no totals."""
    m = trace.memory
    if not len(m):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    sel = (m["device"].to_numpy() == device) & (m[column].to_numpy() >= 0)
    if rank is not None:
        sel &= m["rank"].to_numpy() == rank
    return m["start"].to_numpy()[sel], m[column].to_numpy()[sel].astype(np.float64)


def memory_frame(result: MemoryResult) -> pd.DataFrame:
    """One row per device (the table / CSV form)."""
    rows = []
    for d in result.devices:
        rows.append({
            "device": d.device, "device_type": d.device_type, "events": d.events, "allocations": d.allocations,
            "frees": d.frees, "peak_allocated_bytes": d.peak_allocated_bytes, "peak_reserved_bytes": d.peak_reserved_bytes,
            "peak_at_ns": d.peak_at_ns, "live_at_peak_bytes": d.live_at_peak_bytes,
            "top_op_at_peak": d.top_ops_at_peak[0].op if d.top_ops_at_peak else None, "source": d.source,
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["device", "device_type", "events", "allocations", "frees", "peak_allocated_bytes",
                                       "peak_reserved_bytes", "peak_at_ns", "live_at_peak_bytes", "top_op_at_peak", "source"])
