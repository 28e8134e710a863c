"""Where the GPU waits: idle gaps on each stream with what the host was doing, launch latency,
and synchronisation points (no Qt).

The kernel -> launching call join is :func:`kviewer.analysis.steps.kernel_launch_calls`; copies and
memsets are joined to their call through ``flows``. (The SQL views ``gpu_idle_gaps`` and
``kernel_launch_latency`` of :mod:`kviewer.sqldb` answer the per-device questions in SQL.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kviewer.analysis.steps import kernel_launch_calls
from kviewer.core import Trace
from kviewer.core.groups import text_in

#: host calls that block until the device (or a stream / event) is done
SYNC_CALLS = {
    "cudaDeviceSynchronize": "device",
    "cudaStreamSynchronize": "stream",
    "cudaEventSynchronize": "event",
    "cuCtxSynchronize": "device",
    "cuStreamSynchronize": "stream",
    "cuEventSynchronize": "event",
    "hipDeviceSynchronize": "device",
    "hipStreamSynchronize": "stream",
    "hipEventSynchronize": "event",
}
#: host calls that copy synchronously (the host waits for the copy, and for the stream before it)
BLOCKING_COPY_CALLS = ("cudaMemcpy", "cuMemcpyDtoH", "hipMemcpy", "hipMemcpyDtoH")
#: default shortest idle gap listed (the timeline shades from the same default)
IDLE_GAP_NS = 50_000
RANGE_CATEGORIES = ("nvtx", "annotation")

GAP_COLUMNS = ["device", "stream", "start", "end", "gap_ns", "nvtx", "nvtx_tid", "call_before", "next_table", "next_id",
               "next_name"]


def launch_latency(trace: Trace, calls: np.ndarray | None = None) -> np.ndarray:
    """Per kernel, its start minus the start of its launching call (ns, float); NaN when the
    launch is unknown."""
    if calls is None:
        calls = kernel_launch_calls(trace)
    out = np.full(len(calls), np.nan)
    ok = calls >= 0
    if ok.any():
        out[ok] = trace.kernels["start"].to_numpy()[ok] - trace.cpu_slices["start"].to_numpy()[calls[ok]]
    return out


def op_launch_calls(trace: Trace) -> np.ndarray:
    """cpu_slices id of each gpu_ops row's call (through ``flows``), -1 where unknown."""
    g = trace.gpu_ops
    out = np.full(len(g), -1, dtype=np.int64)
    f = trace.flows
    if len(f) and len(g):
        f = f[(f["dst_table"] == "gpu_ops") & (f["dst"] >= 0) & (f["dst"] < len(g)) & (f["src"] >= 0) & (f["src"] < len(trace.cpu_slices))]
        out[f["dst"].to_numpy(dtype=np.int64)] = f["src"].to_numpy(dtype=np.int64)
    return out


def sync_points(trace: Trace) -> dict[str, np.ndarray]:
    """Where the host waits for the device, per table, as bool masks:

    - ``cpu_slices``: the synchronize calls (:data:`SYNC_CALLS`), the calls of blocking copies and
      the trace's own sync events (PyTorch's ``cuda_sync`` category);
    - ``gpu_ops``: device-to-host copies the host waits for (``.item()``, ``.cpu()``): made by a
      blocking copy call, or followed on their thread by a synchronize call before any other
      runtime call.
    """
    c = trace.cpu_slices
    g = trace.gpu_ops
    is_sync_call = text_in(c["name"], SYNC_CALLS)
    blocking = text_in(c["name"], BLOCKING_COPY_CALLS)
    cpu = is_sync_call | blocking | text_in(c["category"], ("sync",))
    gpu = np.zeros(len(g), dtype=bool)
    if len(g) and len(c):
        calls = op_launch_calls(trace)
        dtoh = text_in(g["direction"], ("DtoH",)) & text_in(g["kind"], ("memcpy",)) & (calls >= 0)
        if dtoh.any():
            api = np.flatnonzero(text_in(c["category"], ("runtime", "driver")))
            # the next runtime call on the same thread after each copy's call
            key = c["pid"].to_numpy()[api] * (1 << 32) + c["tid"].to_numpy()[api]
            order = np.lexsort((c["start"].to_numpy()[api], key))
            api, key = api[order], key[order]
            where = {int(a): i for i, a in enumerate(api.tolist())}
            rows = np.flatnonzero(dtoh)
            nxt_sync = np.zeros(len(rows), dtype=bool)
            for j, call in enumerate(calls[rows].tolist()):
                i = where.get(int(call))
                if i is not None and i + 1 < len(api) and key[i + 1] == key[i]:
                    nxt_sync[j] = is_sync_call[api[i + 1]]
            gpu[rows] = blocking[calls[rows]] | nxt_sync
    return {"cpu_slices": cpu, "gpu_ops": gpu}


def _stream_work(trace: Trace) -> pd.DataFrame:
    """Kernels and gpu_ops as one frame: table, id, device, stream, start, end."""
    parts = []
    for table in ("kernels", "gpu_ops"):
        df = trace.table(table)
        if len(df):
            parts.append(pd.DataFrame({"table": table, "id": np.arange(len(df)), "device": df["device"].to_numpy(),
                                       "stream": df["stream"].to_numpy(), "start": df["start"].to_numpy(), "end": df["end"].to_numpy()}))
    if not parts:
        return pd.DataFrame({"table": [], "id": [], "device": [], "stream": [], "start": [], "end": []})
    return pd.concat(parts, ignore_index=True)


def idle_gaps(trace: Trace, min_ns: int = IDLE_GAP_NS, limit: int | None = 500) -> pd.DataFrame:
    """Gaps of at least ``min_ns`` on each stream between one piece of work (kernel, copy,
    memset) and the next, biggest first (``limit`` of them; None for all).

    Columns: device, stream, start, end, gap_ns (trace time), nvtx (the innermost NVTX / user
    range open on the launching thread when the gap began, else on another thread of its process,
    as PyTorch's autograd thread launches the backward while ``step_N`` is open on the main
    thread; "" when none), nvtx_tid (the thread that range is on; -1 when none), call_before (the
    runtime call on that thread just before the call that launched the work ending the gap
    (driver calls when the trace has no runtime calls):
    often the synchronisation the GPU waited on; "" when unknown), next_table / next_id /
    next_name (the work that ended the gap).
    """
    w = _stream_work(trace)
    empty = pd.DataFrame({c: pd.Series(dtype=object if c in ("nvtx", "call_before", "next_table", "next_name") else np.int64)
                          for c in GAP_COLUMNS})
    if not len(w):
        return empty
    w = w.sort_values(["device", "stream", "start", "end"], kind="stable").reset_index(drop=True)
    dev = w["device"].to_numpy()
    st = w["stream"].to_numpy()
    s = w["start"].to_numpy(dtype=np.int64)
    e = w["end"].to_numpy(dtype=np.int64)
    # running end within each stream: a gap starts where everything before it has finished
    grp = np.r_[True, (dev[1:] != dev[:-1]) | (st[1:] != st[:-1])]
    gid = np.cumsum(grp) - 1
    reach = pd.Series(e).groupby(gid).cummax().to_numpy()
    same = ~grp[1:]
    gap = s[1:] - reach[:-1]
    idx = np.flatnonzero(same & (gap >= min_ns)) + 1  # the work after each gap
    if not len(idx):
        return empty
    order = np.argsort(-(s[idx] - reach[idx - 1]), kind="stable")
    idx = idx[order]
    if limit is not None:
        idx = idx[:limit]
    out = pd.DataFrame({
        "device": dev[idx].astype(np.int64), "stream": st[idx].astype(np.int64),
        "start": reach[idx - 1], "end": s[idx], "gap_ns": s[idx] - reach[idx - 1],
        "next_table": w["table"].to_numpy()[idx], "next_id": w["id"].to_numpy()[idx].astype(np.int64),
    })
    k_calls = kernel_launch_calls(trace)
    g_calls = op_launch_calls(trace)
    names = {"kernels": trace.kernels["name"].astype(str).to_numpy() if len(trace.kernels) else np.zeros(0, dtype=object),
             "gpu_ops": trace.gpu_ops["name"].astype(str).to_numpy() if len(trace.gpu_ops) else np.zeros(0, dtype=object)}
    out["next_name"] = [str(names[t][i]) for t, i in zip(out["next_table"], out["next_id"])]
    call = np.array([(k_calls if t == "kernels" else g_calls)[i] for t, i in zip(out["next_table"], out["next_id"])], dtype=np.int64)
    out["nvtx"], out["nvtx_tid"], out["call_before"] = _host_context(trace, call, out["start"].to_numpy())
    return out[GAP_COLUMNS].reset_index(drop=True)


def _host_context(trace: Trace, call: np.ndarray, at: np.ndarray) -> tuple[list[str], np.ndarray, list[str]]:
    """For each launching call (cpu_slices id, -1 unknown): the innermost range open at time ``at``
    on its thread, else on any thread of its process (the latest-starting one), that range's
    thread id (-1 when none), and the runtime call just before the launch on its own thread."""
    c = trace.cpu_slices
    n = len(call)
    if not len(c):
        return [""] * n, np.full(n, -1, dtype=np.int64), [""] * n
    names = c["name"].astype(str).to_numpy()
    cats = c["category"].astype(str).to_numpy()
    start = c["start"].to_numpy()
    end = c["end"].to_numpy()
    pid = c["pid"].to_numpy()
    tid = c["tid"].to_numpy()
    thread = pid * (1 << 32) + tid
    ranges = np.flatnonzero(np.isin(cats, RANGE_CATEGORIES))
    # runtime calls (cudaStreamSynchronize, cudaMemcpy...): the driver calls under them would
    # name the machinery (cuKernelGetName), not what the program asked for
    api = np.flatnonzero(cats == "runtime")
    if not len(api):
        api = np.flatnonzero(cats == "driver")
    api = api[np.lexsort((start[api], thread[api]))]
    api_key = thread[api]
    api_start = start[api]
    nvtx, before = [], []
    nvtx_tid = np.full(n, -1, dtype=np.int64)
    for k, (cid, t) in enumerate(zip(call.tolist(), at.tolist())):
        if cid < 0:
            nvtx.append("")
            before.append("")
            continue
        th = thread[cid]
        open_ = ranges[(start[ranges] <= t) & (end[ranges] >= t)]
        r = open_[thread[open_] == th]
        if not len(r):
            r = open_[pid[open_] == pid[cid]]
        if len(r):
            best = r[np.argmax(start[r])]
            nvtx.append(str(names[best]))
            nvtx_tid[k] = int(tid[best])
        else:
            nvtx.append("")
        lo, hi = np.searchsorted(api_key, th, "left"), np.searchsorted(api_key, th, "right")
        i = lo + int(np.searchsorted(api_start[lo:hi], start[cid], "left")) - 1
        before.append(str(names[api[i]]) if lo <= i < hi else "")
    return nvtx, nvtx_tid, before
