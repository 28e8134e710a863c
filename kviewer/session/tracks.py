"""Timeline tracks of one trace: groups and lanes with their level-of-detail (no Qt).

Built once per opened trace, in the loading thread. The tree is

    trace -> [rank] -> GPU device -> utilisation and kernels-in-flight counter tracks
                                  -> NVTX / user ranges projected onto the GPU (the span of the
                                     GPU work launched inside each range), one lane per depth
                                  -> one lane per stream: its kernels, copies and memsets, as
                                     Nsight Systems draws a stream (a stream runs one at a time)
                    -> CPU thread  -> NVTX / user ranges, one lane per nesting depth
                                   -> runtime calls and framework ops, one lane per depth
                                   -> python stack (a group of its own, collapsed: dozens deep)

Every lane holds the row ids of its bars (sorted by start; a stream lane mixes kernels and
gpu_ops, told apart by ``Lane.tables``) and a :class:`~kviewer.session.lod.LaneLOD`. Per table,
``lane_of[id]`` / ``pos_of[id]`` locate a row's bar (its home lane: a projected NVTX bar's home is
its CPU thread), so selecting a row anywhere can find, reveal and outline it.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kviewer import analysis
from kviewer.core.intervals import nesting_depth
from kviewer.session import colors, recorded_tracks
from kviewer.session.lod import LaneLOD, SampledCounter, StepCounter

if TYPE_CHECKING:
    import pandas as pd

    import kviewer.analysis.activity
    import kviewer.analysis.gpu_metrics
    import kviewer.analysis.steps
    from kviewer.core import Trace
    from kviewer.session.analyses import SolInfo

#: CPU categories drawn in lanes of their own (ranges that do not nest with the API calls)
RANGE_CATEGORIES = ("nvtx", "annotation", "gpu_annotation")
#: a CPU thread with more lanes than this starts collapsed (deep python stacks)
COLLAPSE_THREAD_LANES = 16

#: the tables a lane's bars come from; ``Lane.tables`` holds indices into it
TABLES = ("kernels", "gpu_ops", "cpu_slices")

_keys = itertools.count(1)


@dataclass(eq=False)
class Lane:
    """One row of bars that do not nest."""

    label: str
    table: str
    """kernels | gpu_ops | cpu_slices"""
    ids: np.ndarray
    """row ids in ``table``, in lane order (sorted by start)"""
    lod: LaneLOD
    base_colour: np.ndarray
    inner: np.ndarray | None = None
    """SOL time (``t_sol_ns``) per bar, NaN where unknown; drawn inside the bar"""
    index: int = -1
    """position in :attr:`TraceTracks.lanes`"""
    tables: np.ndarray | None = None
    """per bar, its table as an index into :data:`TABLES` (None: every bar is from ``table``)"""
    projected: bool = False
    """NVTX ranges drawn at the span of the GPU work they launched (not their home lane)"""

    def entry(self, pos: int) -> tuple[str, int]:
        """(table, row id) of the bar at lane position ``pos``."""
        table = self.table if self.tables is None else TABLES[int(self.tables[pos])]
        return table, int(self.ids[pos])

    def of_table(self, table: str) -> np.ndarray:
        """Bool mask of this lane's bars that come from ``table``."""
        if self.tables is None:
            return np.full(len(self.ids), self.table == table)
        return self.tables == TABLES.index(table)

    @functools.cached_property
    def shows_idle(self) -> bool:
        """Whether the timeline shades this lane's idle gaps: a GPU stream that runs kernels.
        A stream of only copies or memsets (a DDP job's gloo/NCCL copy streams, a prefetch
        stream) waits between its transfers by design; shaded end to end, a dozen of them hid
        the compute streams' gaps that do mean something."""
        return self.table in ("kernels", "gpu_ops") and not self.projected and bool(self.of_table("kernels").any())


@dataclass(eq=False)
class CounterTrack:
    """A counter row: a value over time drawn as an area, one column per pixel."""

    label: str
    kind: str
    """utilisation (share of time with at least one kernel running) | concurrency (kernels in flight)
    | gpu_metric (a sampled metric: :class:`~kviewer.session.lod.SampledCounter`, min/max per pixel)"""
    counter: StepCounter | SampledCounter
    scale: float
    """the value drawn full height"""
    tooltip: str = ""
    mark_ns: int | None = None
    """a moment to mark with a line (a memory row's peak), on the trace's clock; None for none"""


@dataclass(eq=False)
class Group:
    """A collapsible group of lanes and groups."""

    label: str
    children: list[Group | Lane | CounterTrack] = field(default_factory=list)
    collapsed: bool = False
    tooltip: str = ""
    start_collapsed: bool = False
    """collapsed when the trace opened (a deep CPU thread, the python stack)"""
    initial_order: list[str] = field(default_factory=list)
    """the children's labels as built (what a saved row order is compared with)"""
    note: str = ""
    """a line the timeline writes across this header's row (a summary-only trace: what the timeline needs)"""

    def lanes(self) -> Iterator[Lane]:
        for c in self.children:
            if isinstance(c, Lane):
                yield c
            elif isinstance(c, Group):
                yield from c.lanes()

    def first_lane(self) -> Lane | None:
        return next(self.lanes(), None)


@dataclass
class TraceTracks:
    """Everything the timeline and the table need from one trace, computed off the GUI thread."""

    trace: Trace
    key: int
    label: str
    offset_ns: int
    """subtracted from every time on display: 0 (the trace's own clock, :attr:`TraceMeta.clock
    <kviewer.core.trace.TraceMeta.clock>`) unless compare mode aligns it with another trace"""
    root: Group
    lanes: list[Lane]
    lane_of: dict[str, np.ndarray]
    pos_of: dict[str, np.ndarray]
    launch_of_kernel: np.ndarray
    """cpu_slices id of each kernel's launching call (via flows), -1 when unknown"""
    span: tuple[int, int]
    """(first start, last end) in display ns"""
    emphasis: np.ndarray | None = None
    sol_info: SolInfo | None = None
    """the trace's speed of light (:class:`~kviewer.session.analyses.SolInfo`; None without kernels):
    kernels are coloured by its ``bound`` and draw its ``t_sol_ns`` inside their bars"""
    counters: Any = None
    """:class:`~kviewer.analysis.attach.AttachResult` when a counter report is attached (None
    otherwise; set by :meth:`kviewer.session.document.Document.attach`)"""
    launch_latency: np.ndarray | None = None
    """per kernel, its start minus its launching call's start (ns), NaN when unknown"""
    sync: dict[str, np.ndarray] = field(default_factory=dict)
    """per table, a bool mask of where the host waits for the device (drawn in the sync colour)"""
    aligned_clock: str = ""
    """while drawn on another trace's clock (compare mode's B): how its times on display are
    counted (``"on A's clock, since session start"``); empty on its own clock"""
    source: Any = None
    """the file's identity when it was loaded (``trace.meta.source_id``, taken by the load), for
    the analysis cache; None when unknown"""

    # -----------------------------------------------------------------------------------------
    @staticmethod
    def new_key() -> int:
        """A key no other open trace has (a layout read back from the timeline cache takes one too)."""
        return next(_keys)

    @classmethod
    def build(cls, trace: Trace, label: str | None = None, sol: SolInfo | None = None, source: Any = None) -> TraceTracks:
        """Lay out ``trace``; ``sol`` colours its kernels by bound (grey-blue "unknown" without);
        ``source``: the file's identity at load (for the analysis cache)."""
        trace_key = cls.new_key()
        label = label or os.path.basename(trace.meta.path) or trace.meta.source_format
        span = trace.span_ns() or (0, 0)
        # one clock: the timeline shows the tables' own times (from the trace's time 0, e.g. the
        # nsys session start), as SQL, the CLI and Details do; compare mode moves B onto A's
        offset = 0
        lanes: list[Lane] = []
        lane_of: dict[str, np.ndarray] = {}
        pos_of: dict[str, np.ndarray] = {}
        for name in ("kernels", "gpu_ops", "cpu_slices"):
            n = len(trace.table(name))
            lane_of[name] = np.full(n, -1, dtype=np.int32)
            pos_of[name] = np.full(n, -1, dtype=np.int64)

        k = trace.kernels
        g = trace.gpu_ops
        c = trace.cpu_slices
        kcol, kinner = _kernel_colours(trace, sol)
        gcol = colors.gpu_op_colours(g["kind"], g["name"], g["direction"])
        ccol = colors.cpu_colours(c["category"], c["name"])

        # synchronisations are marked in the sync colour (red), on the host call and on the
        # device-to-host copy the host waits for
        sync = analysis.activity.sync_points(trace)
        sync_colour = colors.FAMILY_INDEX["sync"] * colors.SHADES
        ccol = np.where(sync["cpu_slices"], sync_colour + ccol % colors.SHADES, ccol).astype(np.uint16)
        gcol = np.where(sync["gpu_ops"], sync_colour + gcol % colors.SHADES, gcol).astype(np.uint16)
        colour_of = {"kernels": kcol, "gpu_ops": gcol, "cpu_slices": ccol}
        times = {name: (trace.table(name)["start"].to_numpy(), trace.table(name)["end"].to_numpy()) for name in TABLES}

        def add_lane(lbl: str, parts: list[tuple[str, np.ndarray]], home: bool = True,
                     span_of: tuple[np.ndarray, np.ndarray] | None = None) -> Lane:
            """A lane of the bars ``parts`` ((table, ids), ...), sorted by start. ``span_of``
            draws them at other times than their own (projected ranges)."""
            parts = [(t, ids) for t, ids in parts if len(ids)]
            tcode = np.concatenate([np.full(len(ids), TABLES.index(t), dtype=np.int8) for t, ids in parts])
            ids = np.concatenate([ids for _t, ids in parts]).astype(np.int64)
            if span_of is not None:
                start, end = span_of
            else:
                start = np.concatenate([times[t][0][i] for t, i in parts])
                end = np.concatenate([times[t][1][i] for t, i in parts])
            colour = np.concatenate([colour_of[t][i] for t, i in parts])
            inner = None
            if kinner is not None and any(t == "kernels" for t, _ in parts):
                inner = np.concatenate([kinner[i] if t == "kernels" else np.full(len(i), np.nan) for t, i in parts])
            if len(parts) > 1 or span_of is not None:
                order = np.lexsort((end, start))
                tcode, ids, start, end, colour = tcode[order], ids[order], start[order], end[order], colour[order]
                inner = None if inner is None else inner[order]
            table = parts[0][0]
            lane = Lane(lbl, table, ids, LaneLOD.build(start, end, colour), colour, inner, len(lanes),
                        tables=tcode if len(parts) > 1 else None, projected=span_of is not None)
            lanes.append(lane)
            if home:
                for t, _i in parts:
                    mine = lane.of_table(t)
                    lane_of[t][ids[mine]] = lane.index
                    pos_of[t][ids[mine]] = np.flatnonzero(mine)
            return lane

        device_names = _device_names(trace.devices)
        gpu_number = device_ordinals(trace.devices)
        launch = analysis.steps.kernel_launch_calls(trace)

        ranks = sorted(set(_ints(k, "rank")) | set(_ints(g, "rank")) | set(_ints(c, "rank")))
        multi_rank = len(ranks) > 1 or (ranks and ranks[0] != -1)
        root = Group(label, tooltip=f"{trace.meta.path}\n{trace.meta.format_label or trace.meta.source_format}")
        if trace.meta.summary_only:
            root.children.append(Group("no timeline", tooltip=trace.meta.timeline_needs, note=trace.meta.timeline_needs))
        kg = _groups(k, ["rank", "device", "stream"])
        gg = _groups(g, ["rank", "device", "stream"])
        cg = _groups(c, ["rank", "pid", "tid"])
        serialised = k["serialised"].to_numpy() if len(k) else np.zeros(0, dtype=bool)
        kdev = k["device"].to_numpy() if len(k) else np.zeros(0, dtype=np.int64)
        krank = k["rank"].to_numpy() if len(k) else np.zeros(0, dtype=np.int64)
        # per CPU slice, its kind of lane (0 ranges, 1 calls, 2 python) and whether it is a GPU
        # annotation, decided once per distinct category (comparing 375k strings per thread took
        # a sixth of the layout of a big Kineto trace)
        slice_kind, gpu_annotation = _slice_kinds(c)
        projections = projected_ranges(trace, launch)

        graph_spans = recorded_tracks.graph_launch_spans(trace)
        memory_rows = recorded_tracks.memory_counters(trace)
        metric_tracks = gpu_metric_tracks(trace)
        for rank in ranks or [-1]:
            parent = root
            if multi_rank:
                parent = Group(f"rank {rank}" if rank >= 0 else "rank ?")
                root.children.append(parent)
            devices = sorted({key[1] for key in kg if key[0] == rank} | {key[1] for key in gg if key[0] == rank}
                             | {key[1] for key in memory_rows if key[0] == rank}
                             | (set(metric_tracks) if rank == (ranks or [-1])[0] else set()))
            for dev in devices:
                dname = device_names.get(dev, "")
                dgroup = Group(f"GPU {gpu_number.get(dev, dev)}" + (f" · {dname}" if dname else "") if dev >= 0 else "GPU")
                parent.children.append(dgroup)
                on_dev = np.flatnonzero((kdev == dev) & (krank == rank))
                if len(on_dev) and not serialised[on_dev].all():
                    ks, ke = times["kernels"][0][on_dev], times["kernels"][1][on_dev]
                    util = StepCounter.from_intervals(ks, ke, busy=True)
                    conc = StepCounter.from_intervals(ks, ke)
                    dgroup.children.append(CounterTrack("GPU utilisation", "utilisation", util, 1.0,
                                                        "share of each pixel's time with at least one kernel running"))
                    dgroup.children.append(CounterTrack(f"kernels in flight (peak {conc.peak:.0f})", "concurrency", conc,
                                                        max(conc.peak, 1.0), "mean number of kernels running during each pixel's time"))
                if rank == (ranks or [-1])[0] and dev in metric_tracks:
                    dgroup.children.extend(metric_tracks[dev])
                for lbl, counter, scale, tip, peak_at in memory_rows.get((rank, dev), []):
                    dgroup.children.append(CounterTrack(lbl, "memory", counter, scale, tip, mark_ns=peak_at))
                gspan = graph_spans.get((rank, dev))
                if gspan is not None:
                    # folded: one bar per launch (the group's summary); expanded: the graphs' kernels
                    ggroup = Group(recorded_tracks.graph_lane_label(len(gspan[0]), trace), collapsed=True,
                                   tooltip="CUDA graph launches: expand for the kernels they ran (also on their stream lanes)")
                    ggroup.children.append(add_lane("launches", [("cpu_slices", gspan[0])], home=False, span_of=(gspan[1], gspan[2])))
                    in_graph = recorded_tracks.graph_kernels(trace, rank, dev)
                    if len(in_graph):
                        ggroup.children.append(add_lane("kernels in graphs", [("kernels", in_graph)], home=False))
                    dgroup.children.append(ggroup)
                proj = projections.get((rank, dev))
                if proj is not None:
                    pids, pstart, pend = proj
                    depth = nesting_depth(pstart, pend)
                    levels_p = np.unique(depth)
                    for j in levels_p:
                        sel = depth == j
                        lbl = depth_label("NVTX (projected)", int(j), len(levels_p))
                        dgroup.children.append(add_lane(lbl, [("cpu_slices", pids[sel])], home=False, span_of=(pstart[sel], pend[sel])))
                streams = sorted({kk[2] for kk in kg if kk[0] == rank and kk[1] == dev} | {kk[2] for kk in gg if kk[0] == rank and kk[1] == dev})
                for stream in streams:
                    kids = kg.get((rank, dev, stream), np.zeros(0, dtype=np.int64))
                    gids = gg.get((rank, dev, stream), np.zeros(0, dtype=np.int64))
                    lbl = f"stream {stream}" if stream >= 0 else ("kernels" if len(kids) else "memory ops")
                    if len(kids) and serialised[kids].all():
                        lbl += " (serialised)"
                    dgroup.children.append(add_lane(lbl, [("kernels", kids), ("gpu_ops", gids)]))
            starts_c = times["cpu_slices"][0]
            ends_c = times["cpu_slices"][1]
            annotations: list[Group] = []
            for key in sorted(kk for kk in cg if kk[0] == rank):
                ids = cg[key]
                tgroup = Group(_thread_label(key[1], key[2]))
                if gpu_annotation[ids].all():
                    # PyTorch's gpu_user_annotation: ranges on a GPU stream, not a CPU thread
                    tgroup.label = f"GPU {gpu_number.get(int(key[1]), key[1])} · stream {key[2]} annotations"
                    annotations.append(tgroup)
                kind = slice_kind[ids]
                for k_i, title in ((0, "ranges"), (1, "calls"), (2, "python")):
                    sub = ids[kind == k_i]
                    if not len(sub):
                        continue
                    # the loaders nest every category on one depth scale per thread (ops sit
                    # under python frames, at many depths): each kind is nested among itself,
                    # so its slices fill the top lanes and no lane holds overlapping bars
                    dense = nesting_depth(starts_c[sub], ends_c[sub])
                    levels = np.unique(dense)
                    target = tgroup
                    if k_i == 2:
                        # python frames (with_stack) can be dozens deep: their own group, closed
                        target = Group(f"python stack ({len(levels)} levels)", collapsed=True)
                        tgroup.children.append(target)
                    for j in range(len(levels)):
                        lbl = depth_label(title, j, len(levels))
                        target.children.append(add_lane(lbl, [("cpu_slices", sub[dense == j])]))
                tgroup.collapsed = sum(1 for _ in tgroup.lanes()) - _python_lanes(tgroup) > COLLAPSE_THREAD_LANES
                if tgroup not in annotations:
                    parent.children.append(tgroup)
            if len(annotations) > 1:
                # one per stream (a DDP run annotates a dozen copy streams): one closed group
                # instead of a screenful of groups between the GPU and the CPU threads
                parent.children.append(Group(f"GPU annotations · {len(annotations)} streams", children=list(annotations),
                                             collapsed=True, tooltip="PyTorch's gpu_user_annotation ranges, one group per GPU stream"))
            else:
                parent.children.extend(annotations)

        _remember_as_built(root)
        return cls(trace, trace_key, label, offset, root, lanes, lane_of, pos_of, launch, (int(span[0]) - offset, int(span[1]) - offset),
                   launch_latency=analysis.activity.launch_latency(trace, launch), sync=sync, sol_info=sol, source=source)

    # -----------------------------------------------------------------------------------------
    def set_kernel_emphasis(self, mask: np.ndarray | None) -> None:
        """Dim the kernels outside ``mask`` (a bool per kernel id); None shows all normally."""
        self.emphasis = mask
        for lane in self.lanes:
            mine = lane.of_table("kernels")
            if not mine.any():
                continue
            colour = lane.base_colour
            if mask is not None:
                dim = mine.copy()
                dim[mine] = ~mask[lane.ids[mine]]
                colour = np.where(dim, colour + colors.DIM, colour).astype(np.uint16)
            raw = lane.lod.raw
            lane.lod = LaneLOD.build(raw.start, raw.end, colour)

    def set_sol(self, info: SolInfo | None, trace: Trace | None = None) -> None:
        """Take a new speed of light (a GPU chosen, counters attached): recolour the kernel bars by
        bound and redraw the SOL floor inside them. ``trace`` replaces the open trace when given
        (the same kernels, e.g. with a counter report's counters merged)."""
        if trace is not None:
            if len(trace.kernels) != len(self.trace.kernels):
                raise ValueError("set_sol needs the same kernels as the open trace")
            self.trace = trace
        self.sol_info = info
        kcol, inner = _kernel_colours(self.trace, info)
        for lane in self.lanes:
            mine = lane.of_table("kernels")
            if not mine.any():
                continue
            lane.base_colour = lane.base_colour.copy()
            lane.base_colour[mine] = kcol[lane.ids[mine]]
            if inner is None:
                lane.inner = None
            else:
                lane.inner = np.full(len(lane.ids), np.nan)
                lane.inner[mine] = inner[lane.ids[mine]]
        self.set_kernel_emphasis(self.emphasis)  # rebuilds each lane's mipmap from the new colours

    def sol_column(self, col: str) -> np.ndarray | None:
        """One column of the speed-of-light table (:data:`kviewer.core.schema.SOL`) per kernel id,
        None when the speed of light is unknown."""
        info = self.sol_info
        sol = info.sol if info is not None else None
        if sol is None or len(sol) != len(self.trace.kernels):
            return None
        return sol[col].to_numpy()

    @property
    def clock(self) -> str:
        """How the times on display are counted: its own clock (``"since session start"``) or,
        aligned with another trace, that one's."""
        return self.aligned_clock or self.trace.meta.clock

    def set_display_offset(self, offset_ns: int, aligned_clock: str = "") -> None:
        """Draw the trace with ``offset_ns`` subtracted from its times (to align it with another
        trace, whose clock ``aligned_clock`` names); the span follows."""
        self.aligned_clock = aligned_clock if offset_ns else ""
        first = self.span[0] + self.offset_ns
        last = self.span[1] + self.offset_ns
        self.offset_ns = int(offset_ns)
        self.span = (first - self.offset_ns, last - self.offset_ns)

    def locate(self, table: str, row: int) -> tuple[Lane, int] | None:
        """The lane and raw position of a row's bar, or None when the row has no bar."""
        lanes = self.lane_of.get(table)
        if lanes is None or not (0 <= row < len(lanes)) or lanes[row] < 0:
            return None
        return self.lanes[int(lanes[row])], int(self.pos_of[table][row])

    def group_path(self, lane: Lane) -> list[Group]:
        """The groups from the root down to the lane (to expand them when revealing it)."""

        def walk(g: Group, path: list[Group]) -> list[Group] | None:
            for ch in g.children:
                if ch is lane:
                    return path + [g]
                if isinstance(ch, Group):
                    found = walk(ch, path + [g])
                    if found:
                        return found
            return None

        return walk(self.root, []) or []

    def name_of(self, table: str, row: int, short: bool = True) -> str:
        df = self.trace.table(table)
        col = "short_name" if short and table == "kernels" else "name"
        return str(df[col].iat[row])

    def find(self, text: str) -> list[tuple[str, int, int]]:
        """(table, row, start) of every bar whose name contains ``text`` (case-insensitive),
        sorted by start."""
        needle = text.lower()
        out: list[np.ndarray] = []
        tables: list[str] = []
        for table in ("kernels", "gpu_ops", "cpu_slices"):
            df = self.trace.table(table)
            if not len(df):
                continue
            names = df["name"]
            codes = np.asarray(names.cat.codes)
            hit_cats = np.array([needle in str(cat).lower() for cat in names.cat.categories] + [False])
            mask = hit_cats[codes]
            if table == "kernels":
                s = df["short_name"]
                mask |= np.array([needle in str(cat).lower() for cat in s.cat.categories] + [False])[np.asarray(s.cat.codes)]
            rows = np.flatnonzero(mask & (self.lane_of[table] >= 0))
            out.append(rows)
            tables.append(table)
        found: list[tuple[str, int, int]] = []
        for table, rows in zip(tables, out):
            starts = self.trace.table(table)["start"].to_numpy()[rows]
            found.extend((table, int(r), int(s)) for r, s in zip(rows, starts))
        found.sort(key=lambda t: (t[2], t[0], t[1]))
        return found


def clock_label(traces: Sequence[TraceTracks]) -> str:
    """What the times on display count from, for the time axis and the tables' headers:
    ``"time since session start"``; ``"… (B aligned on A)"`` in compare mode, where B is drawn on
    A's clock; "" with nothing open."""
    if not traces:
        return ""
    own = {t.trace.meta.clock for t in traces if not t.aligned_clock}
    aligned = any(t.aligned_clock for t in traces)
    if len(own) == 1:
        text = f"time {own.pop()}" + (" of each trace" if len(traces) > 1 and not aligned else "")
    else:
        text = "time since each trace's own time 0"
    return text + (" (B aligned on A)" if aligned else "")


def gpu_metric_tracks(trace: Trace) -> dict[int, list[CounterTrack | Group]]:
    """Per device, the counter tracks of its sampled GPU metrics (``gpu_samples``): the metrics
    Nsight Systems leads with open (:data:`kviewer.analysis.gpu_metrics.DEFAULT_ROLES`, in that
    order), every other one in a closed group below them (open it to show them, or pin one)."""
    if not len(trace.gpu_samples):
        return {}

    out: dict[int, list[CounterTrack | Group]] = {}
    by_dev: dict[int, list[CounterTrack]] = {}
    rank_of: dict[int, int] = {}
    all_series = analysis.gpu_metrics.series(trace)
    base_count: dict[tuple[int, str], int] = {}
    for x in all_series:
        key = (x.device, analysis.gpu_metrics.split_name(x.metric)[0])
        base_count[key] = base_count.get(key, 0) + 1
    for x in all_series:
        counter = SampledCounter.build(x.t, x.v)
        name, unit = analysis.gpu_metrics.split_name(x.metric)
        if base_count[(x.device, name)] > 1:  # one quantity in several units: the unit tells them apart
            name = x.metric
        scale = 100.0 if analysis.gpu_metrics.is_percent(x.metric) else max(counter.peak, 1e-12)
        track = CounterTrack(name, "gpu_metric", counter, scale,
                             f"{x.metric}: sampled by the profiler; each pixel shows the lowest to the highest sample in its time"
                             + ("" if analysis.gpu_metrics.is_percent(x.metric) else f" (full height {scale:g} {unit})"))
        by_dev.setdefault(x.device, []).append(track)
        role = x.role
        rank_of[id(track)] = analysis.gpu_metrics.DEFAULT_ROLES.index(role) if role in analysis.gpu_metrics.DEFAULT_ROLES else len(analysis.gpu_metrics.DEFAULT_ROLES)
    for dev, tracks in by_dev.items():
        first = sorted((t for t in tracks if rank_of[id(t)] < len(analysis.gpu_metrics.DEFAULT_ROLES)), key=lambda t: rank_of[id(t)])
        rest = [t for t in tracks if rank_of[id(t)] >= len(analysis.gpu_metrics.DEFAULT_ROLES)]
        items: list[CounterTrack | Group] = list(first)
        if rest:
            items.append(Group(f"more GPU metrics ({len(rest)})", list(rest), collapsed=True,
                               tooltip="the other sampled metrics of this GPU: open the group to show them"))
        out[dev] = items
    return out


def metric_tracks_of(group: Group) -> list[tuple[CounterTrack, bool]]:
    """The sampled-metric tracks of a GPU group, each with whether it is among the group's open
    rows (False: in the closed "more GPU metrics" group): what the lane menu lists."""
    out: list[tuple[CounterTrack, bool]] = []
    for ch in group.children:
        if isinstance(ch, CounterTrack) and ch.kind == "gpu_metric":
            out.append((ch, True))
        elif isinstance(ch, Group) and ch.label.startswith("more GPU metrics"):
            out.extend((c, False) for c in ch.children if isinstance(c, CounterTrack))
    return out


def bring_out_metric(group: Group, track: CounterTrack) -> None:
    """Move a metric track out of the closed "more GPU metrics" group to just after the GPU's
    open metric tracks (the lane menu's way to show one)."""
    for ch in group.children:
        if isinstance(ch, Group) and track in ch.children:
            ch.children.remove(track)
            last = max((i for i, c in enumerate(group.children) if isinstance(c, CounterTrack)), default=-1)
            group.children.insert(last + 1, track)
            if not ch.children:
                group.children.remove(ch)
            else:
                ch.label = f"more GPU metrics ({len(ch.children)})"
            return


def _kernel_colours(trace: Trace, sol: SolInfo | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Bar colours of the kernels (by bound when the speed of light is known) and their SOL times."""
    k = trace.kernels
    table = sol.sol if sol is not None else None
    if table is None or len(table) != len(k):
        return colors.kernel_colours(k["short_name"], None), None
    return colors.kernel_colours(k["short_name"], table["bound"]), table["t_sol_ns"].to_numpy(dtype=np.float64)


def projected_ranges(trace: Trace, launch: np.ndarray) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """NVTX / user ranges projected onto the GPUs, as Nsight Systems does: per (rank, device),
    the ranges (cpu_slices ids) inside which kernels of that device were launched, each with the
    span of that GPU work (first kernel start, last kernel end). ``launch`` is the launching
    call of each kernel (:func:`~kviewer.analysis.steps.kernel_launch_calls`)."""
    c = trace.cpu_slices
    k = trace.kernels
    out: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    if not len(c) or not len(k):
        return out
    cat = c["category"].astype(str).to_numpy()
    ranges = np.flatnonzero(np.isin(cat, ("nvtx", "annotation")))
    linked = np.flatnonzero(launch >= 0)
    if not len(ranges) or not len(linked):
        return out
    cstart = c["start"].to_numpy()
    cend = c["end"].to_numpy()
    ctid = c["tid"].to_numpy()
    cpid = c["pid"].to_numpy()
    calls = launch[linked]
    kstart = k["start"].to_numpy()[linked]
    kend = k["end"].to_numpy()[linked]
    kdev = k["device"].to_numpy()[linked]
    krank = k["rank"].to_numpy()[linked]
    for rank, dev in sorted(set(zip(krank.tolist(), kdev.tolist()))):
        on = (kdev == dev) & (krank == rank)
        ids_out, s_out, e_out = [], [], []
        # per host thread: its launches sorted by call start, each range takes the launches
        # whose call starts inside it (searchsorted), min/max of their GPU times (reduceat)
        for pid, tid in set(zip(cpid[calls[on]].tolist(), ctid[calls[on]].tolist())):
            mine = on & (cpid[calls] == pid) & (ctid[calls] == tid)
            t = cstart[calls[mine]]
            order = np.argsort(t, kind="stable")
            t = t[order]
            gs = kstart[mine][order]
            ge = kend[mine][order]
            rr = ranges[(ctid[ranges] == tid) & (cpid[ranges] == pid)]
            if not len(rr):
                continue
            i0 = np.searchsorted(t, cstart[rr], side="left")
            i1 = np.searchsorted(t, cend[rr], side="right")
            has = i1 > i0
            if not has.any():
                continue
            rr, i0, i1 = rr[has], i0[has], i1[has]
            idx = np.empty(2 * len(rr), dtype=np.int64)
            idx[0::2] = i0
            idx[1::2] = i1
            lo = np.minimum.reduceat(np.r_[gs, 0], idx)[0::2]
            hi = np.maximum.reduceat(np.r_[ge, 0], idx)[0::2]
            ids_out.append(rr)
            s_out.append(lo)
            e_out.append(hi)
        if ids_out:
            ids = np.concatenate(ids_out)
            st = np.concatenate(s_out)
            en = np.concatenate(e_out)
            order = np.lexsort((-(en - st), st))
            out[(int(rank), int(dev))] = (ids[order], st[order], en[order])
    return out


def _remember_as_built(g: Group) -> None:
    """Record each group's opening state and child order (:mod:`kviewer.session.lanes` saves
    what the user changed from it)."""
    g.start_collapsed = g.collapsed
    g.initial_order = [c.label for c in g.children]
    for c in g.children:
        if isinstance(c, Group):
            _remember_as_built(c)


def _slice_kinds(c: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``cpu_slices``: its kind of lane (0: ranges, :data:`RANGE_CATEGORIES`; 2: python
    frames; 1: calls) and whether it is a GPU annotation."""
    if not len(c):
        return np.zeros(0, dtype=np.int8), np.zeros(0, dtype=bool)
    col = c["category"]
    if str(col.dtype) == "category":
        names = [str(v) for v in col.cat.categories] + ["nan"]  # code -1 (missing) is the last entry
        codes = np.asarray(col.cat.codes)
    else:
        uniq, codes = np.unique(col.astype(str).to_numpy(), return_inverse=True)
        names = [str(v) for v in uniq]
    kind = np.array([0 if n in RANGE_CATEGORIES else 2 if n == "python" else 1 for n in names], dtype=np.int8)
    gpu = np.array([n == "gpu_annotation" for n in names], dtype=bool)
    return kind[codes], gpu[codes]


def _python_lanes(g: Group) -> int:
    return sum(len(c.children) for c in g.children if isinstance(c, Group))


def _ints(df: pd.DataFrame, col: str) -> list[int]:
    if not len(df):
        return []
    return [int(v) for v in np.unique(df[col].to_numpy())]


def _groups(df: pd.DataFrame, cols: list[str]) -> dict[tuple[Any, ...], np.ndarray]:
    """Row positions (sorted, so still in start order) for each combination of ``cols``."""
    if not len(df):
        return {}
    frame = df[cols].copy()
    for col in cols:
        if str(frame[col].dtype) == "category":
            frame[col] = frame[col].astype(str)
    out: dict[tuple[Any, ...], np.ndarray] = {}
    for key, idx in frame.groupby(cols, sort=True, observed=True).indices.items():
        key_t = key if isinstance(key, tuple) else (key,)
        out[tuple(int(v) if isinstance(v, (int, np.integer)) else str(v) for v in key_t)] = np.asarray(idx, dtype=np.int64)
    return out


def device_ordinals(devices: pd.DataFrame) -> dict[int, int]:
    """device id -> the GPU's own number in its file, where the two differ (ranks merged into one
    trace are renumbered; a rank's GPU 0 is still called GPU 0)."""
    if not len(devices) or "ordinal" not in devices:
        return {}
    ids, ords = devices["id"].to_numpy(), devices["ordinal"].to_numpy()
    return {int(i): int(o) for i, o in zip(ids, ords) if o >= 0}


def _device_names(devices: pd.DataFrame) -> dict[int, str]:
    if not len(devices):
        return {}
    return {int(i): str(n) for i, n in zip(devices["id"].to_numpy(), devices["name"].to_numpy()) if str(n)}


def depth_label(title: str, level: int, levels: int) -> str:
    """A lane of one nesting level of ``title`` bars ("calls" when they do not nest, else
    "calls · depth 1" for the outermost, "calls · depth 4" for the fourth level): a bare number
    ("calls 3") read as a count, or as a third kind of call."""
    return title if levels <= 1 else f"{title} · depth {level + 1}"


def _thread_label(pid: int, tid: int) -> str:
    if pid >= 0 and tid >= 0 and pid != tid:
        return f"CPU pid {pid} · tid {tid}"
    if tid >= 0:
        return f"CPU thread {tid}"
    return "CPU"
