"""Timeline tracks of one trace: groups and lanes with their level-of-detail (no Qt).

Built once per opened trace, in the loading thread. The tree is

    trace -> [rank] -> GPU device -> one lane per stream (kernels), memcpy, memset
                    -> CPU thread  -> NVTX / user ranges, one lane per nesting depth
                                   -> runtime calls and framework ops, one lane per depth
                                   -> python stack (a group of its own, collapsed: dozens deep)

Every lane holds the row ids of its bars (sorted by start) and a :class:`~kviewer.session.lod.LaneLOD`.
Per table, ``lane_of[id]`` / ``pos_of[id]`` locate a row's bar, so selecting a row anywhere can
find, reveal and outline it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kviewer.session import colors
from kviewer.session.lod import LaneLOD

if TYPE_CHECKING:
    import pandas as pd

    from kviewer.core import Trace
    from kviewer.session.analyses import SolInfo

#: CPU categories drawn in lanes of their own (ranges that do not nest with the API calls)
RANGE_CATEGORIES = ("nvtx", "annotation", "gpu_annotation")
#: a CPU thread with more lanes than this starts collapsed (deep python stacks)
COLLAPSE_THREAD_LANES = 16

_keys = itertools.count(1)


@dataclass
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


@dataclass
class Group:
    """A collapsible group of lanes and groups."""

    label: str
    children: list[Group | Lane] = field(default_factory=list)
    collapsed: bool = False
    tooltip: str = ""

    def lanes(self) -> Iterator[Lane]:
        for c in self.children:
            if isinstance(c, Lane):
                yield c
            else:
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
    """subtracted from every time so each trace starts at 0 on the timeline"""
    root: Group
    lanes: list[Lane]
    lane_of: dict[str, np.ndarray]
    pos_of: dict[str, np.ndarray]
    launch_of_kernel: np.ndarray
    """cpu_slices id of each kernel's launching call (via flows), -1 when unknown"""
    span: tuple[int, int]
    """(first start, last end) in display ns (so the first start is 0)"""
    emphasis: np.ndarray | None = None
    sol_info: SolInfo | None = None
    """the trace's speed of light (:class:`~kviewer.session.analyses.SolInfo`; None without kernels):
    kernels are coloured by its ``bound`` and draw its ``t_sol_ns`` inside their bars"""
    counters: Any = None
    """:class:`~kviewer.analysis.attach.AttachResult` when a counter report is attached (None otherwise)"""
    source: Any = None
    """the file's identity when it was loaded (:func:`kviewer.session.analysis_cache.identity`), for
    the analysis cache; None when unknown"""

    # -----------------------------------------------------------------------------------------
    @classmethod
    def build(cls, trace: Trace, label: str | None = None, sol: SolInfo | None = None) -> TraceTracks:
        """Lay out ``trace``; ``sol`` colours its kernels by bound (grey-blue "unknown" without)."""
        import os

        trace_key = next(_keys)
        label = label or os.path.basename(trace.meta.path) or trace.meta.source_format
        span = trace.span_ns() or (0, 0)
        offset = int(span[0])
        lanes: list[Lane] = []
        lane_of: dict[str, np.ndarray] = {}
        pos_of: dict[str, np.ndarray] = {}
        for name in ("kernels", "gpu_ops", "cpu_slices"):
            n = len(trace.table(name))
            lane_of[name] = np.full(n, -1, dtype=np.int32)
            pos_of[name] = np.full(n, -1, dtype=np.int64)

        def add_lane(lbl: str, table: str, ids: np.ndarray, colour: np.ndarray, inner: np.ndarray | None = None) -> Lane:
            df = trace.table(table)
            start = df["start"].to_numpy()[ids]
            end = df["end"].to_numpy()[ids]
            lane = Lane(lbl, table, ids, LaneLOD.build(start, end, colour[ids]), colour[ids], None, len(lanes))
            if inner is not None:
                lane.inner = inner[ids]
            lanes.append(lane)
            lane_of[table][ids] = lane.index
            pos_of[table][ids] = np.arange(len(ids))
            return lane

        k = trace.kernels
        g = trace.gpu_ops
        c = trace.cpu_slices
        kcol, inner = _kernel_colours(trace, sol)
        gcol = colors.gpu_op_colours(g["kind"], g["name"])
        ccol = colors.cpu_colours(c["category"], c["name"])
        device_names = _device_names(trace.devices)

        ranks = sorted(set(_ints(k, "rank")) | set(_ints(g, "rank")) | set(_ints(c, "rank")))
        multi_rank = len(ranks) > 1 or (ranks and ranks[0] != -1)
        root = Group(label, tooltip=f"{trace.meta.path}\n{trace.meta.format_label or trace.meta.source_format}")
        kg = _groups(k, ["rank", "device", "stream"])
        gg = _groups(g, ["rank", "device", "kind"])
        cg = _groups(c, ["rank", "pid", "tid"])
        serialised = k["serialised"].to_numpy() if len(k) else np.zeros(0, dtype=bool)
        for rank in ranks or [-1]:
            parent = root
            if multi_rank:
                parent = Group(f"rank {rank}" if rank >= 0 else "rank ?")
                root.children.append(parent)
            devices = sorted({key[1] for key in kg if key[0] == rank} | {key[1] for key in gg if key[0] == rank})
            for dev in devices:
                dname = device_names.get(dev, "")
                dgroup = Group(f"GPU {dev}" + (f" · {dname}" if dname else "") if dev >= 0 else "GPU")
                parent.children.append(dgroup)
                for key in sorted(kk for kk in kg if kk[0] == rank and kk[1] == dev):
                    ids = kg[key]
                    lbl = f"stream {key[2]}" if key[2] >= 0 else "kernels"
                    if serialised[ids].all():
                        lbl += " (serialised)"
                    dgroup.children.append(add_lane(lbl, "kernels", ids, kcol, inner))
                for key in sorted((kk for kk in gg if kk[0] == rank and kk[1] == dev), key=lambda t: (str(t[2]) != "memcpy", str(t[2]))):
                    dgroup.children.append(add_lane(str(key[2]) or "memory ops", "gpu_ops", gg[key], gcol))
            cats = c["category"].astype(str).to_numpy() if len(c) else np.zeros(0, dtype=object)
            starts_c = c["start"].to_numpy() if len(c) else np.zeros(0, dtype=np.int64)
            ends_c = c["end"].to_numpy() if len(c) else np.zeros(0, dtype=np.int64)
            for key in sorted(kk for kk in cg if kk[0] == rank):
                ids = cg[key]
                tgroup = Group(_thread_label(key[1], key[2]))
                if (cats[ids] == "gpu_annotation").all():
                    # PyTorch's gpu_user_annotation: ranges on a GPU stream, not a CPU thread
                    tgroup.label = f"GPU {key[1]} · stream {key[2]} annotations"
                kind = np.where(np.isin(cats[ids], RANGE_CATEGORIES), 0, np.where(cats[ids] == "python", 2, 1))
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
                        lbl = title if j == 0 else f"{title} {j}"
                        target.children.append(add_lane(lbl, "cpu_slices", sub[dense == j], ccol))
                tgroup.collapsed = sum(1 for _ in tgroup.lanes()) - _python_lanes(tgroup) > COLLAPSE_THREAD_LANES
                parent.children.append(tgroup)

        launch = np.full(len(k), -1, dtype=np.int64)
        f = trace.flows
        if len(f) and len(k):
            sel = (f["dst_table"].astype(str).to_numpy() == "kernels")
            dst = f["dst"].to_numpy()[sel]
            src = f["src"].to_numpy()[sel]
            ok = (dst >= 0) & (dst < len(k)) & (src >= 0) & (src < len(c))
            launch[dst[ok]] = src[ok]
        return cls(trace, trace_key, label, offset, root, lanes, lane_of, pos_of, launch, (0, int(span[1]) - offset), sol_info=sol)

    # -----------------------------------------------------------------------------------------
    def set_kernel_emphasis(self, mask: np.ndarray | None) -> None:
        """Dim the kernels outside ``mask`` (a bool per kernel id); None shows all normally."""
        self.emphasis = mask
        for lane in self.lanes:
            if lane.table != "kernels":
                continue
            colour = lane.base_colour
            if mask is not None:
                colour = np.where(mask[lane.ids], colour, colour + colors.DIM).astype(np.uint16)
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
            if lane.table == "kernels":
                lane.base_colour = kcol[lane.ids]
                lane.inner = None if inner is None else inner[lane.ids]
        self.set_kernel_emphasis(self.emphasis)  # rebuilds each lane's mipmap from the new colours

    def sol_column(self, col: str) -> np.ndarray | None:
        """One column of the speed-of-light table (:data:`kviewer.core.schema.SOL`) per kernel id,
        None when the speed of light is unknown."""
        info = self.sol_info
        sol = info.sol if info is not None else None
        if sol is None or len(sol) != len(self.trace.kernels):
            return None
        return sol[col].to_numpy()

    def set_display_offset(self, offset_ns: int) -> None:
        """Draw the trace with ``offset_ns`` subtracted from its times (to align it with another
        trace); the span follows."""
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


def _kernel_colours(trace: Trace, sol: SolInfo | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Bar colours of the kernels (by bound when the speed of light is known) and their SOL times."""
    k = trace.kernels
    table = sol.sol if sol is not None else None
    if table is None or len(table) != len(k):
        return colors.kernel_colours(k["short_name"], None), None
    return colors.kernel_colours(k["short_name"], table["bound"]), table["t_sol_ns"].to_numpy(dtype=np.float64)


def nesting_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each interval (sorted by start) when nested on one thread: 0 for an outermost
    one, 1 inside it, ... An interval that starts inside another but ends after it (clock noise)
    is treated as nested. One pass with a stack of open ends (a Python loop: a few hundred
    thousand slices take well under a second, in the loading thread)."""
    n = start.shape[0]
    out = np.zeros(n, dtype=np.int64)
    # ties: the longer interval first, so it becomes the parent
    order = np.lexsort((-(end - start), start))
    stack: list[int] = []
    s_list = start[order].tolist()
    e_list = end[order].tolist()
    res = [0] * n
    for i, (s, e) in enumerate(zip(s_list, e_list)):
        while stack and stack[-1] <= s:
            stack.pop()
        res[i] = len(stack)
        stack.append(e)
    out[order] = res
    return out


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


def _device_names(devices: pd.DataFrame) -> dict[int, str]:
    if not len(devices):
        return {}
    return {int(i): str(n) for i, n in zip(devices["id"].to_numpy(), devices["name"].to_numpy()) if str(n)}


def _thread_label(pid: int, tid: int) -> str:
    if pid >= 0 and tid >= 0 and pid != tid:
        return f"CPU pid {pid} · tid {tid}"
    if tid >= 0:
        return f"CPU thread {tid}"
    return "CPU"
