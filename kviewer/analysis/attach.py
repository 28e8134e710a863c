"""A counter report (Nsight Compute, rocprof ``--pmc``) attached to a timeline of the same program.

:func:`attach_counters` is the one entry point the CLI (``--ncu REPORT``) and the desktop app
(``kviewer TRACE REPORT``, a report dropped on an open trace, File › Attach Counter Report…) use:

1. :func:`kviewer.analysis.merge.merge_ncu` pairs the report's kernels with the timeline's by launch
   order within each (base name, grid, block) group and copies the measured columns and the
   ``metrics`` rows onto the matched timeline kernels (``counters = "measured"``). Whatever the
   speed-of-light analysis does with measured counters on a loaded report therefore applies to
   the merged kernels unchanged.
2. The step each matched kernel ran in is named (:mod:`kviewer.analysis.steps`). When the program
   repeats itself, several window starts fit equally well; each is offered as a
   :class:`WindowChoice` (its step) and ``start=`` or ``step=`` picks one.
3. A launch of the same kernel at the same place in another step inherits the measured counters
   (``counters = "inherited"``, ``counters_from`` = the profiled launch): each step's launch
   sequence is aligned with the measured step's (:func:`inherit_counters`; identity = full name,
   grid, block, launching op and shapes), so the efficiency measured once shows on every step and
   two GEMMs sharing a kernel and a grid never swap counters. Inheritances whose modelled FLOPs or
   bytes differ from the source's by more than :data:`INHERIT_LIMIT` are refused and listed.
4. The modelled FLOPs and bytes (filled before step 3) (:func:`kviewer.analysis.model.model_kernels`) fill the kernels'
   ``model_flops``/``model_bytes`` columns, so measured and modelled sit side by side;
   :func:`model_gaps` says where they differ by more than :data:`GAP_LIMIT`.

Nothing here is presentation: :func:`describe` gives terminal lines, the GUI builds its own view
from :class:`AttachResult`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kviewer.analysis.matching import kernel_op_info
from kviewer.analysis.merge import (
    MEASURED,
    MatchReport,
    best_pairs,
    copy_values,
    kernel_keys,
    known,
    launch_order,
    match_kernels,
    merge_ncu,
)
from kviewer.analysis.model import model_kernels
from kviewer.analysis.steps import find_steps, kernel_steps
from kviewer.core import Trace

#: measured and modelled differing by more than this share is reported (the model gets caught)
GAP_LIMIT = 0.25
#: how many equally good window starts the terminal lines name one by one
MAX_CHOICES = 12
#: a tensor pipe busier than this (percent) did tensor work that the SASS FLOP counters miss
TENSOR_ACTIVE_PCT = 5.0
#: metrics sections that are not counters (launch attributes, NVTX ranges)
NOT_COUNTERS = frozenset({"launch", "nvtx", ""})
#: source formats of counter reports whose kernels are serialised replays, not a timeline
COUNTER_FORMATS = ("ncu-rep", "ncu-csv")


def is_counter_report(trace: Trace) -> bool:
    """True for a counter report (Nsight Compute; a rocprof ``--pmc`` run or rocprofv3 counter
    collection, with or without timestamps): the kind of file that is attached to a timeline."""
    fmt = trace.meta.source_format
    if fmt in COUNTER_FORMATS or fmt.startswith("ncu"):
        return True
    k = trace.kernels
    if not len(k):
        return False
    # a rocprof counter run (--pmc, rocprofv3 counter collection): counter values in metrics
    sections = set(trace.metrics["section"].astype(str).unique().tolist()) if len(trace.metrics) else set()
    if sections - NOT_COUNTERS:
        return True
    return bool(k["serialised"].all()) and any(bool(known(c, k[c].to_numpy()).any()) for c in MEASURED)


def is_timeline(trace: Trace) -> bool:
    """A trace with real kernel times that counters can be attached to."""
    return len(trace.kernels) > 0 and not is_counter_report(trace)


@dataclass(frozen=True)
class WindowChoice:
    """One window start that fits the report as well as any other."""

    start: int
    """launch-order position of the report's first kernel in the timeline"""
    step: str
    """the step its first matched kernel ran in ("" when the timeline has no steps)"""
    first_kernel: int
    """kernels.id of that kernel (-1 when nothing matched)"""


@dataclass
class Unmatched:
    """Report kernels without a partner, grouped by name and reason."""

    name: str
    count: int
    why: str
    """"name": no timeline kernel has this base name; "launch": the name is there but with
    other grid/block sizes; "order": the timeline has no launch of it left after the window"""


WHY_TEXT = {
    "name": "no timeline kernel has this name",
    "launch": "the timeline runs this kernel only with other grid/block sizes",
    "order": "no launch of it is left in the timeline after the window start",
}


@dataclass
class AttachResult:
    trace: Trace
    """the timeline with the report's counters on its kernels"""
    match: MatchReport
    report_path: str
    report_format: str
    steps: list[str] = field(default_factory=list)
    """the steps the matched kernels ran in, in order"""
    choices: list[WindowChoice] = field(default_factory=list)
    """every window start that fits equally well (one when the match is unambiguous)"""
    chosen: int = -1
    """index into ``choices`` of the start used (-1 when nothing matched)"""
    inherited: int = 0
    """timeline launches that inherited counters from a profiled launch"""
    inheritance: Inherited = field(default_factory=lambda: Inherited())
    """which steps inherited from which, and the inheritances refused"""
    unmatched: list[Unmatched] = field(default_factory=list)
    timeline_outside: int = 0
    """timeline kernels before or after the report's window"""
    timeline_skipped: int = 0
    """timeline kernels inside the window that the report does not have (filtered, not profiled)"""
    gaps: int = 0
    """measured kernels whose FLOPs or bytes differ from the model by more than GAP_LIMIT"""
    has_steps: bool = False
    """the timeline has steps (``steps`` empty then means the window lies outside them)"""

    @property
    def matched(self) -> int:
        return self.match.matched

    @property
    def ambiguous(self) -> bool:
        return len(self.choices) > 1


def _steps_of(trace: Trace) -> tuple[np.ndarray, list[str]]:
    """Step row per kernel (-1 none) and the step names."""
    try:
        steps = find_steps(trace)
    except Exception:  # noqa: BLE001  # a trace whose steps cannot be found simply has none
        return np.full(len(trace.kernels), -1, dtype=np.int64), []
    if not len(steps):
        return np.full(len(trace.kernels), -1, dtype=np.int64), []
    return kernel_steps(trace, steps), [str(s) for s in steps["name"].tolist()]


def _step_name(step_of: np.ndarray, names: list[str], kernel: int) -> str:
    if kernel < 0 or kernel >= len(step_of) or step_of[kernel] < 0:
        return ""
    return names[int(step_of[kernel])]


def attach_counters(
    timeline: Trace, report: Trace, start: int | None = None, step: str | int | None = None
) -> AttachResult:
    """Merge ``report``'s counters onto ``timeline`` (see the module docstring).

    Parameters
    ----------
    start
        The window start to use (a ``WindowChoice.start``); searched for when None.
    step
        Instead of ``start``: among the equally good window starts, the one whose first kernel ran
        in this step (a step name such as ``ProfilerStep#3`` or ``step_7``, or its position
        0, 1, ... in the trace's steps). Raises ``ValueError`` when no equal start lies there.
    """
    step_of, step_names = _steps_of(timeline)
    merged, match = merge_ncu(timeline, report, start)
    # the equally good windows come from the search, also when the caller chose one of them
    search = match if start is None else match_kernels(timeline, report)
    choices = [
        WindowChoice(int(s), _step_name(step_of, step_names, int(first)), int(first))
        for s, first in zip(search.starts, search.start_kernels)
    ]
    if start is None and step is None and len({c.step for c in choices}) > 1:
        # a report taken inside an NVTX range named like one of the timeline's steps
        # (ncu --nvtx --nvtx-include "step_7/") belongs to that step
        ranges = report_ranges(report)
        named = [c for c in choices if c.step and c.step in ranges]
        if named and named[0].start != match.start and all(c.step == named[0].step for c in named):
            merged, match = merge_ncu(timeline, report, named[0].start)
            match.start_source = f"the report's NVTX range {named[0].step}"
    if step is not None:
        want = _resolve_step(step, step_names)
        pick = next((c for c in choices if c.step == want), None)
        if pick is None:
            have = ", ".join(sorted({c.step for c in choices if c.step})) or "none"
            raise ValueError(f"the report does not fit step {want!r} as well as the best window; equal fits in: {have}")
        if pick.start != match.start:
            merged, match = merge_ncu(timeline, report, pick.start)
    chosen = next((i for i, c in enumerate(choices) if c.start == match.start), -1)
    if chosen < 0 and match.matched:
        first = int(match.pairs["timeline_id"].iloc[0])
        choices.insert(0, WindowChoice(match.start, _step_name(step_of, step_names, first), first))
        chosen = 0

    tids = match.pairs["timeline_id"].to_numpy(np.int64)
    steps_hit = sorted({int(step_of[t]) for t in tids if step_of[t] >= 0})
    trace, inherited = inherit_counters(with_model(merged), steps=(step_of, step_names))
    outside, skipped = _timeline_unmatched(timeline, match)
    result = AttachResult(
        trace=trace,
        match=match,
        report_path=report.meta.path,
        report_format=report.meta.source_format,
        steps=[step_names[i] for i in steps_hit],
        choices=choices,
        chosen=chosen,
        inherited=inherited.launches,
        inheritance=inherited,
        unmatched=unmatched_reasons(timeline, report, match),
        timeline_outside=outside,
        timeline_skipped=skipped,
        has_steps=bool(step_names),
    )
    result.gaps = int(sum(1 for i in np.flatnonzero(trace.kernels["counters"].astype(str).to_numpy() == "measured")
                          if any(g.compared for g in model_gaps(trace.kernels, int(i)))))
    extra = dict(trace.meta.extra)
    where = f", step {', '.join(result.steps)}" if result.steps else ""
    extra["ncu"] = f"{report.meta.path}: {match.matched} of {match.ncu_total} kernels matched{where}"
    result.trace = dataclasses.replace(trace, meta=dataclasses.replace(trace.meta, extra=extra, warnings=list(trace.meta.warnings)))
    return result


def report_ranges(report: Trace) -> set[str]:
    """Names of the NVTX ranges the report's kernels ran in (each level of each push/pop stack)."""
    m = report.metrics
    if not len(m):
        return set()
    texts = m["text"].to_numpy(dtype=object)[(m["section"].astype(str) == "nvtx").to_numpy()]
    out: set[str] = set()
    for t in set(str(x) for x in texts):
        for part in t.split("; "):
            out.update(p for p in part.split("/") if p)
    return out


def _resolve_step(step: str | int, names: list[str]) -> str:
    if isinstance(step, int) or str(step).strip().lstrip("-").isdigit():
        i = int(step)
        if not names:
            raise ValueError("the timeline has no steps (no ProfilerStep#N or step_N ranges)")
        if not 0 <= i < len(names):
            raise ValueError(f"step {i}: the timeline has steps 0 to {len(names) - 1}")
        return names[i]
    if str(step) not in names:
        raise ValueError(f"no step named {step!r}; the timeline has: {', '.join(names) or 'none'}")
    return str(step)


def _timeline_unmatched(timeline: Trace, match: MatchReport) -> tuple[int, int]:
    """Unmatched timeline kernels outside the report's window and inside it."""
    n = len(timeline.kernels)
    if not match.matched:
        return n, 0
    order = launch_order(timeline.kernels)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    p = pos[match.pairs["timeline_id"].to_numpy(np.int64)]
    lo, hi = int(p.min()), int(p.max())
    un = pos[np.asarray(match.unmatched_timeline, dtype=np.int64)]
    inside = int(((un > lo) & (un < hi)).sum())
    return len(un) - inside, inside


def unmatched_reasons(timeline: Trace, report: Trace, match: MatchReport) -> list[Unmatched]:
    """Why each unmatched report kernel found no partner (grouped by name and reason)."""
    if not len(match.unmatched_ncu):
        return []
    tkeys = set(kernel_keys(timeline.kernels))
    tbases = {k[0] for k in tkeys}
    nkeys = kernel_keys(report.kernels)
    shorts = report.kernels["short_name"].astype(str).to_numpy()
    names = np.where(shorts == "", report.kernels["name"].astype(str).to_numpy(), shorts)
    counts: dict[tuple[str, str], int] = {}
    for i in np.asarray(match.unmatched_ncu, dtype=np.int64):
        key = nkeys[int(i)]
        why = "order" if key in tkeys else "launch" if key[0] in tbases else "name"
        counts[(str(names[int(i)]), why)] = counts.get((str(names[int(i)]), why), 0) + 1
    return [Unmatched(name, c, why) for (name, why), c in sorted(counts.items(), key=lambda kv: -kv[1])]


#: an inheritance whose modelled FLOPs or bytes differ from its source's by more than this is refused
INHERIT_LIMIT = 0.25
#: the source "step" of launches measured outside every step (a report taken during warm-up)
OUTSIDE = -1


@dataclass(frozen=True)
class Inheritance:
    """How many launches of one step took their counters from the measured launches of another."""

    step: str
    """the step of the inheriting launches"""
    source_step: str
    """the step of the measured launches they inherit from"""
    launches: int


@dataclass(frozen=True)
class Refused:
    """A launch that aligned with a measured one but does not inherit: its modelled work differs."""

    kernel: int
    """kernels.id of the launch that did not inherit"""
    source: int
    """kernels.id of the measured launch it aligned with"""
    name: str
    what: str
    """"FLOPs" or "bytes" (the modelled quantity that differs)"""
    value: float
    source_value: float

    @property
    def diff(self) -> float:
        """Relative difference from the source's value."""
        return (self.value - self.source_value) / self.source_value if self.source_value else math.inf


@dataclass
class Inherited:
    """What :func:`inherit_counters` did."""

    launches: int = 0
    by_step: list[Inheritance] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    has_steps: bool = True
    """False: the timeline has no steps, so no launch has a position to inherit by"""


def _identity(trace: Trace) -> list[tuple]:
    """Per kernel what makes two launches the same kernel: the full name, grid, block (x, y, z), and
    the launching op and its input shapes where the trace has them ("" otherwise)."""
    k = trace.kernels
    ops, shapes = kernel_op_info(trace)
    cols = [k[c].to_numpy(np.int64) for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")]
    names = k["name"].astype(str).to_numpy()
    return [(str(names[i]), *(int(c[i]) for c in cols), str(ops[i]), str(shapes[i])) for i in range(len(k))]


def _differs(a: float, b: float, limit: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return False  # unknown on a side: nothing to compare
    if b == 0:
        return a != 0
    return abs(a - b) / abs(b) > limit


def inherit_counters(trace: Trace, limit: float = INHERIT_LIMIT,
                     steps: tuple[np.ndarray, list[str]] | None = None) -> tuple[Trace, Inherited]:
    """Copy measured counters to unprofiled launches of the *same kernel at the same place in
    another step*.

    Each step's launch sequence (launch order) is aligned with the sequence of every step that has
    measured launches (:func:`kviewer.analysis.merge.best_pairs` on the identity of
    :func:`_identity`: full name, grid, block, launching op and shapes); a launch aligned with a measured one inherits its
    counters (``counters = "inherited"``, ``counters_from`` its id). Two GEMMs that share a kernel
    and a grid but sit at different places in the step therefore never exchange counters, also in
    an Nsight Systems export without shapes. An inheritance whose modelled FLOPs or bytes
    (``model_flops``/``model_bytes``, filled by :func:`with_model` first) differ from the source's
    by more than ``limit`` is refused and listed. A timeline without steps inherits nothing.
    ``steps``: the trace's step of each kernel and step names (:func:`_steps_of`) when the caller
    has them (the timeline the counters were merged onto has the same kernels and steps).
    """
    k = trace.kernels
    status = k["counters"].astype(str).to_numpy()
    measured = status == "measured"
    out = Inherited()
    if not measured.any() or measured.all():
        return trace, out
    step_of, step_names = _steps_of(trace) if steps is None else steps
    if not step_names:
        out.has_steps = False
        return trace, out
    ident = _identity(trace)
    codes: dict[tuple, int] = {}
    code = np.asarray([codes.setdefault(x, len(codes)) for x in ident], dtype=np.int64)
    order = launch_order(k)
    seqs: dict[int, np.ndarray] = {}
    so = step_of[order]
    for s in np.unique(so[so >= 0]).tolist():
        seqs[int(s)] = order[so == s]
    # a report taken outside the steps (during warm-up): the launches from its first to its last
    # measured one are the sequence the steps align with
    out_seq = order[so < 0]
    hit = np.flatnonzero(measured[out_seq])
    if len(hit):
        seqs[OUTSIDE] = out_seq[int(hit[0]) : int(hit[-1]) + 1]
    sources = sorted((s for s in seqs if measured[seqs[s]].any()), key=lambda s: (-int(measured[seqs[s]].sum()), s))
    mf = k["model_flops"].to_numpy(np.float64)
    mb = k["model_bytes"].to_numpy(np.float64)
    names = k["name"].astype(str).to_numpy()
    taken = np.zeros(len(k), dtype=bool)
    dst: list[int] = []
    src: list[int] = []
    counts: dict[tuple[int, int], int] = {}
    for d, dseq in seqs.items():
        if d == OUTSIDE:
            continue  # outside the steps no launch has a place to inherit by
        for s in sources:
            if s == d:
                continue
            sseq = seqs[s]
            # a source shorter than the destination is taken for a part of it (a report that
            # covered part of a step): then only its own launches left unpaired count
            for a, b in best_pairs(code[sseq], code[dseq], b_weight=1.0 if len(sseq) >= len(dseq) else 0.0):
                i, j = int(sseq[a]), int(dseq[b])
                if not measured[i] or taken[j] or status[j]:
                    continue
                what = "FLOPs" if _differs(mf[j], mf[i], limit) else "bytes" if _differs(mb[j], mb[i], limit) else ""
                if what:
                    vals = (mf[j], mf[i]) if what == "FLOPs" else (mb[j], mb[i])
                    out.refused.append(Refused(j, i, str(names[j]), what, float(vals[0]), float(vals[1])))
                    continue
                taken[j] = True
                dst.append(j)
                src.append(i)
                counts[(d, s)] = counts.get((d, s), 0) + 1
    name_of = {**dict(enumerate(step_names)), OUTSIDE: "outside the steps"}
    out.by_step = [Inheritance(name_of[d], name_of[s], n) for (d, s), n in sorted(counts.items())]
    out.launches = len(dst)
    out.refused.sort(key=lambda r: r.kernel)
    if not dst:
        return trace, out
    dd = np.asarray(dst, dtype=np.int64)
    ss = np.asarray(src, dtype=np.int64)
    kernels = k.copy()
    for col in MEASURED:
        copy_values(kernels, col, dd, k[col].to_numpy()[ss], np.ones(len(dd), dtype=bool))
    st = status.astype(object)
    st[dd] = "inherited"
    kernels["counters"] = pd.Categorical(st)
    cf = kernels["counters_from"].to_numpy().copy()
    cf[dd] = ss
    kernels["counters_from"] = cf
    return dataclasses.replace(trace, kernels=kernels), out


def with_model(trace: Trace) -> Trace:
    """The kernels' ``model_flops``/``model_bytes`` filled from the launching ops' model where
    they are unknown (a trace without ops is returned unchanged)."""
    k = trace.kernels
    if not len(k):
        return trace
    try:
        m = model_kernels(trace)
    except Exception:  # noqa: BLE001  # no model is no model: the measured values stand alone
        return trace
    kernels = k.copy()
    changed = False
    for col in ("model_flops", "model_bytes"):
        have = kernels[col].to_numpy(np.float64)
        new = m[col].to_numpy(np.float64)
        fill = np.isnan(have) & ~np.isnan(new)
        if fill.any():
            kernels[col] = np.where(fill, new, have)
            changed = True
    return dataclasses.replace(trace, kernels=kernels) if changed else trace


def measured_flops(k: pd.DataFrame) -> np.ndarray:
    """Per kernel the sum of the measured FLOP counters (NaN when none was collected)."""
    cols = np.column_stack([k[c].to_numpy(np.float64) for c in ("flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor")])
    anyv = ~np.isnan(cols).all(axis=1)
    return np.where(anyv, np.nansum(np.nan_to_num(cols, nan=0.0), axis=1), np.nan)


@dataclass(frozen=True)
class Gap:
    """Measured against modelled work of one kernel."""

    what: str
    """FLOPs or DRAM bytes"""
    measured: float
    modelled: float
    compared: bool
    """False when the two cannot be compared (``text`` says why)"""
    text: str


def model_gaps(k: pd.DataFrame, row: int, limit: float = GAP_LIMIT) -> list[Gap]:
    """A kernel's measured FLOPs or bytes that differ from the modelled ones by more than
    ``limit``, and the comparisons that could not be made (empty when all agree or a side is
    unknown)."""
    out: list[Gap] = []
    r = k.iloc[row]
    flops = float(measured_flops(k.iloc[[row]])[0])
    pairs = (
        ("FLOPs", flops, float(r["model_flops"])),
        ("DRAM bytes", float(r["dram_bytes"]) if not math.isnan(float(r["dram_bytes"])) else float(r["dram_read_bytes"]) + float(r["dram_write_bytes"]),
         float(r["model_bytes"])),
    )
    tensor_pct = float(r["tensor_pipe_pct"])
    for what, meas, model in pairs:
        if math.isnan(meas) or math.isnan(model) or model <= 0:
            continue
        if what == "FLOPs" and math.isnan(float(r["flops_tensor"])) and tensor_pct > TENSOR_ACTIVE_PCT:
            out.append(Gap(what, meas, model, False,
                f"FLOPs not compared with the model: the tensor pipe was {tensor_pct:.0f} % busy but no tensor FLOP "
                "counter was collected (ncu --set full, or --section SpeedOfLight_HierarchicalTensorRooflineChart)"
            ))
            continue
        diff = (meas - model) / model
        if abs(diff) > limit:
            hint = ""
            if what == "DRAM bytes" and diff < 0:
                hint = " (the L2 cache served part of the modelled traffic)"
            out.append(Gap(what, meas, model, True,
                           f"measured {what} {_si(meas)} vs modelled {_si(model)} ({diff * 100:+.0f} %): "
                           f"the model is off by more than {limit * 100:.0f} %{hint}"))
    return out


def _si(v: float) -> str:
    for div, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g} {p}"
    return f"{v:.3g}"


def describe(result: AttachResult) -> list[str]:
    """The match report as terminal lines: counts, the window and its step, the choice when the
    program repeats itself, unmatched kernels on each side and why."""
    m = result.match
    lines = [f"{m.summary()} ({result.report_path})"]
    if m.start >= 0:
        where = f", in step {', '.join(result.steps)}" if result.steps else (", outside the trace's steps" if result.has_steps else "")
        lines.append(f"  window starts at timeline launch {m.start} ({m.start_source}){where}")
    if result.ambiguous:
        shown = result.choices[:MAX_CHOICES]
        alts = "; ".join(f"launch {c.start}" + (f" ({c.step})" if c.step else "") for c in shown)
        if len(result.choices) > len(shown):
            alts += f"; … ({len(result.choices) - len(shown)} more)"
        lines.append(f"  the program repeats itself: {len(result.choices)} windows fit equally well: {alts}")
        lines.append("  choose one with --ncu-step STEP or --ncu-start LAUNCH")
    lines.append(f"  {m.matched} launches measured directly, {result.inherited} inherited")
    inh = result.inheritance
    if inh.by_step:
        first = inh.by_step[:MAX_CHOICES]
        more = f"; … ({len(inh.by_step) - len(first)} more)" if len(inh.by_step) > len(first) else ""
        lines.append("  inherited from (same kernel, same place in the step): "
                     + "; ".join(f"{x.step} <- {x.source_step}: {x.launches}" for x in first) + more)
    if not inh.has_steps and m.matched:
        lines.append("  the timeline has no steps: no launch has a place in a step to inherit counters by")
    if inh.refused:
        lines.append(f"  {len(inh.refused)} inheritances refused: modelled FLOPs or bytes differ from the measured "
                     f"launch's by more than {INHERIT_LIMIT * 100:.0f} %")
        for r in inh.refused[:MAX_CHOICES]:
            lines.append(f"    kernel {r.kernel} <- {r.source}: {r.what} {_si(r.value)} vs {_si(r.source_value)} "
                         f"({r.diff * 100:+.0f} %) {r.name[:80]}")
        if len(inh.refused) > MAX_CHOICES:
            lines.append(f"    … ({len(inh.refused) - MAX_CHOICES} more)")
    for u in result.unmatched:
        lines.append(f"  unmatched in the report: {u.count} x {u.name}: {WHY_TEXT.get(u.why, u.why)}")
    if result.timeline_outside or result.timeline_skipped:
        lines.append(
            f"  unmatched in the timeline: {result.timeline_outside} outside the report's window, "
            f"{result.timeline_skipped} inside it that the report does not hold"
        )
    if m.filtered_out:
        lines.append(f"  {m.filtered_out} timeline kernels are not selected by the report's kernel filter")
    if result.gaps:
        lines.append(f"  {result.gaps} measured kernels differ from the model by more than {GAP_LIMIT * 100:.0f} % in FLOPs or bytes")
    return lines


__all__ = [
    "GAP_LIMIT",
    "INHERIT_LIMIT",
    "AttachResult",
    "Inheritance",
    "Inherited",
    "Refused",
    "Gap",
    "Unmatched",
    "WindowChoice",
    "attach_counters",
    "describe",
    "inherit_counters",
    "is_counter_report",
    "is_timeline",
    "measured_flops",
    "model_gaps",
    "unmatched_reasons",
    "with_model",
]
