"""Training / inference steps of a trace and the GPU time each one takes.

A step is found, in this order of preference, from

1. ``ProfilerStep#N`` ranges, which ``torch.profiler.profile.step()`` writes;
2. ranges named like ``step_N``, ``step N``, ``iteration N``, ``iter_N`` -- NVTX ranges in an
   Nsight Systems export (``nvtx`` category) or ``record_function`` user annotations in a
   PyTorch trace;
3. when the trace has no markers, *detected iterations*: the kernel sequence is cut at the
   occurrences of an anchor kernel (see :func:`detect_iterations`).

A marker is a host-side range. The GPU work of a step is the set of kernels *launched* inside
the range (the launching runtime/driver call, found through ``flows`` or the correlation id,
starts inside it), which is what a step costs even when the GPU runs behind the CPU. Kernels
whose launch is unknown (a trace without API calls) are attributed by their own start time to
``[step start, next step start)``.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from kviewer.analysis.matching import factorize
from kviewer.core import Trace
from kviewer.core.groups import distinct_rows

STEP_COLUMNS = [
    "step",
    "name",
    "source",
    "start",
    "end",
    "dur",
    "gpu_start",
    "gpu_end",
    "gpu_span",
    "kernel_ns",
    "busy_ns",
    "kernel_count",
]

_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_STEP = re.compile(r"^(?:train(?:ing)?[_ ]?)?(?:step|iter|iteration)[\s_#:=-]*(\d+)$", re.IGNORECASE)
#: host-side categories that cannot be step markers
_NOT_MARKERS = ("runtime", "driver", "python", "sync")


def busy_ns(start: np.ndarray, end: np.ndarray, device: np.ndarray | None = None) -> int:
    """Length of the union of intervals, per device, summed over devices (GPU busy time).

    Overlapping kernels on one device (concurrent streams) count once; two devices busy at the
    same moment count twice, as two GPUs do twice the work.
    """
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if not len(start):
        return 0
    if device is None:
        device = np.zeros(len(start), dtype=np.int64)
    total = 0
    for d in np.unique(device):
        sel = device == d
        s = start[sel]
        e = end[sel]
        order = np.argsort(s, kind="stable")
        s = s[order]
        e = np.maximum.accumulate(e[order])
        # a new busy run begins where a start is past the furthest end seen so far
        new_run = np.empty(len(s), dtype=bool)
        new_run[0] = True
        new_run[1:] = s[1:] > e[:-1]
        run_id = np.cumsum(new_run) - 1
        run_start = s[new_run]
        run_end = np.zeros(len(run_start), dtype=np.int64)
        np.maximum.at(run_end, run_id, e)
        total += int((run_end - run_start).sum())
    return total


def kernel_launch_calls(trace: Trace) -> np.ndarray:
    """The cpu_slices id of each kernel's launching runtime/driver call, -1 where unknown.

    Through ``flows`` first, else the correlation id (unique per process, so matched on
    (pid, correlation) when both sides know the pid). The one kernel -> launch join: launch
    times, launch latency, the timeline's flow arrow and the idle-gap context all use it.
    """
    k = trace.kernels
    calls = np.full(len(k), -1, dtype=np.int64)
    c = trace.cpu_slices
    if not len(k) or not len(c):
        return calls
    f = trace.flows
    if len(f):
        f = f[(f["dst_table"] == "kernels") & (f["src"] >= 0) & (f["src"] < len(c)) & (f["dst"] >= 0) & (f["dst"] < len(k))]
        calls[f["dst"].to_numpy(dtype=np.int64)] = f["src"].to_numpy(dtype=np.int64)
    linked = calls >= 0
    if linked.all():
        return calls
    api_rows = np.flatnonzero(c["category"].isin(["runtime", "driver"]).to_numpy() & (c["correlation"].to_numpy() >= 0))
    if not len(api_rows):
        return calls
    api = c.iloc[api_rows]
    kc = k["correlation"].to_numpy(dtype=np.int64)
    kp = k["pid"].to_numpy(dtype=np.int64)
    ap = api["pid"].to_numpy(dtype=np.int64)
    use_pid = bool((kp >= 0).all() and np.isin(kp, ap).all())
    akey = pd.MultiIndex.from_arrays([ap if use_pid else np.zeros(len(api), np.int64), api["correlation"].to_numpy(dtype=np.int64)])
    kkey = pd.MultiIndex.from_arrays([kp if use_pid else np.zeros(len(k), np.int64), kc])
    first = ~akey.duplicated()
    idx = akey[first].get_indexer(kkey)
    todo = (~linked) & (idx >= 0) & (kc >= 0)
    calls[todo] = api_rows[first][idx[todo]]
    return calls


def kernel_launch_times(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """When each kernel was launched on the host.

    Returns
    -------
    launch
        Start of the launching runtime/driver call, or the kernel's own start when unknown.
    linked
        True where the launch call was found (see :func:`kernel_launch_calls`).
    """
    k = trace.kernels
    launch = k["start"].to_numpy(dtype=np.int64).copy()
    calls = kernel_launch_calls(trace)
    linked = calls >= 0
    if linked.any():
        launch[linked] = trace.cpu_slices["start"].to_numpy(dtype=np.int64)[calls[linked]]
    return launch, linked


def _markers(trace: Trace, every_rank: bool = False) -> pd.DataFrame:
    """Step marker ranges (step, name, source, start, end, rank), one per step number, by start:
    of the first rank, or with ``every_rank`` of each rank (one per rank and step number)."""
    c = trace.cpu_slices
    empty = pd.DataFrame({"step": pd.Series(dtype=np.int64), "name": pd.Series(dtype=object), "source": pd.Series(dtype=object),
                          "start": pd.Series(dtype=np.int64), "end": pd.Series(dtype=np.int64),
                          "rank": pd.Series(dtype=np.int64)})
    if not len(c):
        return empty
    ok = ~c["category"].isin(_NOT_MARKERS).to_numpy()
    # test each distinct name once, on the codes of the (categorical) name column
    codes, values = factorize(c["name"])
    distinct = pd.Series(values, dtype=object)
    for pattern, source in ((_PROFILER_STEP, "ProfilerStep"), (_STEP, None)):
        num = distinct.str.extract(pattern, expand=False)
        is_step = num.notna().to_numpy()
        mask = ok & is_step[codes]
        if not mask.any():
            continue
        step_of_value = np.where(is_step, pd.to_numeric(num, errors="coerce").fillna(-1).to_numpy(), -1).astype(np.int64)
        sel = c[mask].copy()
        sel["step"] = step_of_value[codes[mask]]
        if (sel["rank"] >= 0).any() and not every_rank:
            # one rank's steps: the others run the same steps at (nearly) the same time
            sel = sel[sel["rank"] == sel.loc[sel["rank"] >= 0, "rank"].min()]
        # the same step marked twice (a CPU range and its GPU projection): keep the earliest
        sel = sel.sort_values(["start", "depth"], kind="stable").drop_duplicates(["rank", "step"], keep="first")
        src = source or ""
        out = pd.DataFrame(
            {
                "step": sel["step"].to_numpy(dtype=np.int64),
                "name": sel["name"].astype(str).to_numpy(dtype=object),
                "source": [src or _source_of(cat) for cat in sel["category"].astype(str)],
                "start": sel["start"].to_numpy(dtype=np.int64),
                "end": sel["end"].to_numpy(dtype=np.int64),
                "rank": sel["rank"].to_numpy(dtype=np.int64),
            }
        )
        return out.sort_values("start", kind="stable").reset_index(drop=True)
    return empty


def _source_of(category: str) -> str:
    return {"nvtx": "nvtx", "annotation": "annotation", "op": "annotation", "gpu_annotation": GPU_MARKER}.get(category, category or "marker")


#: source of a step marker drawn on the GPU timeline (Kineto ``gpu_user_annotation``): its range
#: is GPU time, so kernels belong to it by their own start, not by their launch
GPU_MARKER = "gpu annotation"


def detect_iterations(trace: Trace, tolerance: float = 0.1) -> pd.DataFrame:
    """Iterations found in the kernel sequence of a trace without step markers.

    In a loop every kernel runs a multiple of the iteration count. The candidate counts ``m`` are
    the kernel counts ``m >= 2`` such that the kernels whose count is a multiple of ``m`` hold at
    least 90% of the kernel time, tried smallest first (the longest repeating unit). An *anchor*
    is a kernel name that runs exactly ``m`` times, the earliest first. It is accepted when the
    pieces between its consecutive occurrences hold the same number of kernels ``L`` within
    ``tolerance`` (80% of them at least). An anchor need not open an iteration: the cuts move to
    a fixed offset before each anchor when that puts them after clear GPU idle gaps (steps are
    often separated by host work; see :func:`_phase`). Kernels before the first cut (warm-up)
    and after the last whole piece belong to no iteration.

    This finds the longest repeating unit that the kernel counts allow; a model made of
    identical layers with nothing else per step may be cut per layer. Markers are better when
    a trace has them.

    Returns
    -------
    DataFrame with columns step, start, end (first kernel start and last kernel end of the
    piece), first and stop (the piece is kernels ``first:stop`` in start order); empty when no
    periodic structure was found.
    """
    k = trace.kernels
    cols = ("step", "start", "end", "first", "stop")
    empty = pd.DataFrame({c: pd.Series(dtype=np.int64) for c in cols})
    n = len(k)
    if n < 4:
        return empty
    codes = pd.Categorical(k["name"]).codes.astype(np.int64)
    start = k["start"].to_numpy(dtype=np.int64)
    end = k["end"].to_numpy(dtype=np.int64)
    dur = k["dur"].to_numpy(dtype=np.int64).astype(np.float64)
    counts = np.bincount(codes)
    time_per = np.bincount(codes, weights=dur, minlength=len(counts))
    total = time_per.sum()
    prev_end = np.concatenate([[start[0]], np.maximum.accumulate(end)[:-1]])
    gap = np.maximum(start - prev_end, 0)
    for m in np.unique(counts[counts >= 2]):
        if m > n // 2:
            break
        multiple = counts % m == 0
        share = time_per[multiple].sum() / total if total > 0 else float(multiple.mean())
        if share < 0.9:
            continue
        anchors = [np.flatnonzero(codes == a) for a in np.flatnonzero(counts == m)]
        for pos in sorted(anchors, key=lambda p: int(p[0])):
            inner = np.diff(pos)
            size = float(np.median(inner))
            if (np.abs(inner - size) <= tolerance * size).mean() < 0.8:
                continue
            cuts = _phase(pos, gap, round(size))
            # a last piece cut short (the trace ends mid-iteration) is no iteration
            if len(cuts) and n - cuts[-1] < (1 - tolerance) * size:
                cuts = cuts[:-1]
            if len(cuts) < 2:
                continue
            stop = np.append(cuts[1:], min(n, cuts[-1] + round(size)))
            piece_end = np.array([end[p:q].max() for p, q in zip(cuts, stop)], dtype=np.int64)
            return pd.DataFrame({"step": np.arange(len(cuts), dtype=np.int64), "start": start[cuts], "end": piece_end,
                                 "first": cuts.astype(np.int64), "stop": stop.astype(np.int64)})
    return empty


#: a cut moves off its anchor only to land after GPU idle gaps this many times the typical gap
IDLE_FACTOR = 10.0


def _phase(pos: np.ndarray, gap: np.ndarray, size: int) -> np.ndarray:
    """Where to cut, given the anchor positions: the anchor need not open an iteration.

    Cut at a fixed offset ``0 .. -(size-1)`` before each anchor: the offset whose cuts follow the
    longest GPU idle gaps (the shortest gap over the cuts, or their 20th percentile from five
    cuts on), when those gaps are clearly idle time (at least
    :data:`IDLE_FACTOR` times the median gap of the trace); else at the anchors themselves. A
    GPU that runs behind the host has no idle time between steps to go by.
    """
    typical = float(np.median(gap[1:])) if len(gap) > 1 else 0.0
    best = pos
    best_score = -1.0
    for delta in range(0, -max(size, 1), -1):
        cuts = pos + delta
        cuts = cuts[cuts >= 0]
        if len(cuts) < 2:
            break
        inner = cuts[cuts > 0]  # nothing runs before the first kernel: no gap to judge there
        # nearly every cut must follow idle time: one long gap (a first-step stall) is no pattern
        # (a low percentile when there are enough cuts, so one busy boundary does not veto)
        score = float(np.percentile(gap[inner], 20) if len(inner) >= 5 else gap[inner].min()) if len(inner) else 0.0
        if score > best_score:
            best, best_score = cuts, score
    return best if best_score >= IDLE_FACTOR * max(typical, 1.0) else pos


def find_steps(trace: Trace, detect: bool = True) -> pd.DataFrame:
    """The steps of a trace and their GPU cost (columns :data:`STEP_COLUMNS`).

    ``start``/``end``/``dur`` are the marker range (host time; for detected iterations, the GPU
    range of the piece). ``gpu_start``/``gpu_end``/``gpu_span`` cover the kernels of the step
    (first start to last end), ``kernel_ns`` is their summed duration, ``busy_ns`` the union of
    their intervals per device and ``kernel_count`` their number. Empty when the trace has no
    steps (and ``detect`` is False or nothing periodic was found).
    """
    marks, step_of = marked_steps(trace)
    if not len(marks):
        found = detect_iterations(trace) if detect else marks
        if not len(found):
            return _empty_steps()
        marks = pd.DataFrame(
            {"step": found["step"], "name": [f"iteration {i}" for i in found["step"]], "source": "detected", "start": found["start"], "end": found["end"]}
        )
        for i, (p, q) in enumerate(zip(found["first"], found["stop"])):
            step_of[p:q] = i
    return _with_gpu(marks, trace, step_of)


def marked_steps(trace: Trace, every_rank: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """The step markers of a trace (ProfilerStep#N, else ranges named like steps; see the module
    doc) and the row of the markers each kernel belongs to (-1 for none, and for every kernel when
    there are no markers): the rules of :func:`find_steps` without detected iterations.

    The markers are the first rank's, and the other ranks' kernels belong to none of them (a step
    table of one rank; the others run the same steps); with ``every_rank``, each rank's kernels
    belong to its own rank's markers (fusion, which must not chain across any rank's steps).
    """
    marks = _markers(trace, every_rank)
    k = trace.kernels
    step_of = np.full(len(k), -1, dtype=np.int64)
    if not len(marks):
        return marks, step_of
    launch, linked = kernel_launch_times(trace)
    mrank = marks["rank"].to_numpy(dtype=np.int64)
    krank = k["rank"].to_numpy(dtype=np.int64)
    ranks = np.unique(mrank)
    if (mrank < 0).all() or (krank < 0).all() or (len(ranks) == 1 and (krank == ranks[0]).all()):
        return marks, _assign(marks, k, launch, linked)
    cols = k[["device", "stream", "start"]]
    for r in ranks:
        rows = np.flatnonzero(mrank == r)
        mine = np.flatnonzero(krank == r)
        sub = _assign(marks.iloc[rows], cols.iloc[mine], launch[mine], linked[mine])
        step_of[mine] = np.where(sub >= 0, rows[np.maximum(sub, 0)], -1)
    return marks, step_of


def kernel_steps(trace: Trace, steps: pd.DataFrame) -> np.ndarray:
    """The row of ``steps`` each kernel belongs to (-1 for none), by the rules of :func:`find_steps`.

    ``steps`` is one rank's table (:func:`find_steps`); in a trace of several ranks each rank's
    kernels join its *own* rank's marker of the same step number (the ranks' clocks and step
    boundaries differ: another rank's kernel is not in step N because it ran during this rank's
    step N), and a rank without markers of its own goes by the table's time ranges.
    """
    k = trace.kernels
    if not len(steps):
        return np.full(len(k), -1, dtype=np.int64)
    if (steps["source"] == "detected").all():
        # pieces of the kernel sequence: by start, and not past the piece's last kernel
        ks = k["start"].to_numpy(dtype=np.int64)
        i = np.searchsorted(steps["start"].to_numpy(dtype=np.int64), ks, side="right") - 1
        ic = np.clip(i, 0, len(steps) - 1)
        return np.where((i >= 0) & (ks <= steps["end"].to_numpy(dtype=np.int64)[ic]), i, -1).astype(np.int64)
    launch, linked = kernel_launch_times(trace)
    krank = k["rank"].to_numpy(dtype=np.int64)
    if len(np.unique(krank[krank >= 0])) < 2:
        return _assign(steps, k, launch, linked)
    marks, of = marked_steps(trace, every_rank=True)
    if not len(marks):
        return _assign(steps, k, launch, linked)
    # a marker row -> the table's row of the same step number
    row_of_step = pd.Series(np.arange(len(steps), dtype=np.int64), index=steps["step"].to_numpy(dtype=np.int64))
    row_of_step = row_of_step[~row_of_step.index.duplicated(keep="first")]
    row_of_mark = row_of_step.reindex(marks["step"].to_numpy(dtype=np.int64)).fillna(-1).to_numpy(dtype=np.int64)
    marked = np.isin(krank, marks["rank"].to_numpy(dtype=np.int64))
    out = np.where(of >= 0, row_of_mark[np.maximum(of, 0)], -1).astype(np.int64)
    rest = np.flatnonzero(~marked)  # ranks without markers of their own: the table's time ranges
    if len(rest):
        out[rest] = _assign(steps, k.iloc[rest], launch[rest], linked[rest])
    return out


def _assign(marks: pd.DataFrame, k: pd.DataFrame, launch: np.ndarray, linked: np.ndarray) -> np.ndarray:
    s = marks["start"].to_numpy(dtype=np.int64)
    e = marks["end"].to_numpy(dtype=np.int64)
    # the streams matter only to kernels whose launch is unknown: not computed when every one is known
    stream = np.zeros(len(k), dtype=np.int64) if linked.all() else distinct_rows(k["device"].to_numpy(), k["stream"].to_numpy())[0]
    return steps_of_gpu_ops(s, e, launch, linked, k["start"].to_numpy(dtype=np.int64), stream,
                            on_gpu=bool((marks["source"] == GPU_MARKER).all()))


def steps_of_gpu_ops(s: np.ndarray, e: np.ndarray, launch: np.ndarray, linked: np.ndarray, own_start: np.ndarray,
                     stream: np.ndarray, on_gpu: bool = False) -> np.ndarray:
    """The step each GPU op belongs to (-1 for none): the one join of GPU work to steps (the
    step table, MFU, compare and the critical path's step windows all use it).

    ``s``/``e``: the step ranges, by start, not overlapping; ``launch``: the start of each op's
    launch call where ``linked``; ``own_start``: the op's start on the GPU; ``stream``: a code
    per (device, stream). An op belongs to the step whose range holds its launch call (for
    ranges on the GPU, ``on_gpu``: its own start). An op whose launch was not recorded takes the
    step of the nearest op before it on its stream whose launch was (ops on a stream run in the
    order they were launched). One with no such op before it ran work queued before the first
    recorded launch on its stream, e.g. the tail of an iteration launched before the profiler
    started (a GPU-bound program), and belongs to no step. Only on a stream where no launch was
    recorded at all does the op's own start decide (the step begun last before it).
    """
    n = len(own_start)
    if on_gpu:
        launch, linked = own_start, np.ones(n, dtype=bool)
    i = np.searchsorted(s, launch, side="right") - 1
    ic = np.clip(i, 0, max(len(s) - 1, 0))
    step_of = np.where(linked & (i >= 0) & (launch <= e[ic]), ic, -1).astype(np.int64) if len(s) else np.full(n, -1, np.int64)
    unlinked = ~linked
    if not unlinked.any() or not len(s):
        return step_of
    by_start = (np.searchsorted(s, own_start, side="right") - 1).astype(np.int64)
    order = np.lexsort((own_start, stream))
    st, lk = stream[order], linked[order]
    pos = np.arange(n)
    prev = np.maximum.accumulate(np.where(lk, pos, -1))  # the last linked op at or before, any stream
    has_prev = (prev >= 0) & (st[np.maximum(prev, 0)] == st)  # ... on the op's own stream
    codes, inverse = np.unique(st, return_inverse=True)
    stream_linked = np.zeros(len(codes), dtype=bool)
    stream_linked[inverse[lk]] = True
    out_sorted = np.where(has_prev, step_of[order][np.maximum(prev, 0)], np.where(stream_linked[inverse], -1, by_start[order]))
    result = step_of.copy()
    result[order[~lk]] = out_sorted[~lk]
    return result


def _with_gpu(marks: pd.DataFrame, trace: Trace, step_of: np.ndarray) -> pd.DataFrame:
    k = trace.kernels
    n = len(marks)
    ks = k["start"].to_numpy(dtype=np.int64)
    ke = k["end"].to_numpy(dtype=np.int64)
    kd = k["dur"].to_numpy(dtype=np.int64)
    dev = k["device"].to_numpy(dtype=np.int64)
    gpu_start = np.full(n, -1, dtype=np.int64)
    gpu_end = np.full(n, -1, dtype=np.int64)
    kernel_ns = np.zeros(n, dtype=np.int64)
    busy = np.zeros(n, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    for i in range(n):
        sel = step_of == i
        if sel.any():
            gpu_start[i] = ks[sel].min()
            gpu_end[i] = ke[sel].max()
            kernel_ns[i] = kd[sel].sum()
            busy[i] = busy_ns(ks[sel], ke[sel], dev[sel])
            count[i] = int(sel.sum())
    out = pd.DataFrame(
        {
            "step": marks["step"].to_numpy(dtype=np.int64),
            "name": marks["name"].to_numpy(dtype=object),
            "source": marks["source"].to_numpy(dtype=object),
            "start": marks["start"].to_numpy(dtype=np.int64),
            "end": marks["end"].to_numpy(dtype=np.int64),
            "dur": (marks["end"] - marks["start"]).to_numpy(dtype=np.int64),
            "gpu_start": gpu_start,
            "gpu_end": gpu_end,
            "gpu_span": np.where(count > 0, gpu_end - gpu_start, 0),
            "kernel_ns": kernel_ns,
            "busy_ns": busy,
            "kernel_count": count,
        },
        columns=STEP_COLUMNS,
    )
    return out


def _empty_steps() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c in ("name", "source") else np.int64) for c in STEP_COLUMNS})


def is_step_marker_name(name: str) -> bool:
    """Whether a range of this name marks a step (``ProfilerStep#N``, ``step_N``, ``iteration N``…)."""
    return bool(_PROFILER_STEP.match(name) or _STEP.match(name))
