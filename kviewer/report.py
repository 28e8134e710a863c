"""``kviewer report``: a review document of one trace, or of two compared (no Qt).

:func:`build_report` gathers what a reviewer wants to see -- the trace facts (tool, versions,
GPU), the top kernels, speed of light, fusion candidates and, for two files, the comparison -- as
plain text cells and picture requests. :func:`render_html` and :func:`render_markdown` turn that
into a document; pictures are rendered by :mod:`kviewer.ui.report_pictures` (the only part that
needs Qt) and handed in as PNG bytes.

Every piece of text that comes from a trace (kernel names hold ``<``, ``>`` and ``&``; any string
can hold markup) stays raw in the :class:`Report` and is escaped once, when rendered: HTML through
:func:`html.escape`, Markdown by :func:`md_escape`. The HTML also carries a Content-Security-Policy
that allows no script at all, so a name that slipped through could still not run.

A report is shared, so by default it names each file by its name alone: a local path tells every
reader the author's folders and user name. The file fact, the compare labels, a Kineto trace's
``traceName`` (the path it was written to) show the name; any other text that quotes a trace's
path (a warning, a diagnostic) has the path cut to the name and the home folder written ``~``.
``show_paths=True`` (``kviewer report --show-paths``) keeps every path as it is.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kviewer import __version__, analysis, session
from kviewer.core.text import display_text
from kviewer.errors import AnalysisError

# the one formatting module's formatters, under this module's short names (an unknown value is
# "—" in a report, as in the window)
from kviewer.session.format import (
    UNKNOWN,
    format_count as fmt_count,
    format_count_int as fmt_int,
    format_duration as fmt_ns,
    format_percent,
    format_signed_duration as fmt_signed_ns,
    format_signed_pct,
    number,
)
from kviewer.session.mfu_view import mfu_cells, mfu_line

if TYPE_CHECKING:
    import pandas as pd

    import kviewer.analysis.compare
    import kviewer.analysis.fusion
    import kviewer.analysis.mfu
    import kviewer.analysis.summary
    import kviewer.analysis.whatif
    from kviewer.analysis.compare import CompareResult
    from kviewer.analysis.fusion import FusionResult
    from kviewer.analysis.sol import SolResult
    from kviewer.core import Trace
    from kviewer.session.analyses import SolInfo

FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}
DEFAULT_TOP = 20
#: pictures are rendered at this many device pixels per CSS pixel (sharp on HiDPI screens)
PICTURE_SCALE = 2.0


# ---------------------------------------------------------------------------------------------
# the document model


@dataclass
class Paragraph:
    text: str


@dataclass
class Facts:
    """Label: value pairs."""

    items: list[tuple[str, str]]


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]]
    numeric: list[bool]
    """right-align this column"""
    caption: str = ""
    wide: tuple[int, ...] = ()
    """columns holding long names (allowed to wrap anywhere)"""


@dataclass
class Picture:
    key: str
    """file-name-safe identifier (Markdown writes ``<key>.png``)"""
    view: str
    """a :data:`kviewer.ui.headless.VIEWS` name"""
    traces: tuple[int, ...]
    """indices into :attr:`Report.traces`"""
    caption: str
    width: int = 1400
    height: int = 600


@dataclass
class Svg:
    """A picture drawn from numbers without Qt (``kviewer fleet``): a complete SVG document whose
    text was escaped when it was made."""

    key: str
    """file-name-safe identifier (Markdown writes ``<key>.svg``)"""
    svg: str
    caption: str
    width: int = 1000


Block = Paragraph | Facts | Table | Picture | Svg


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2


@dataclass
class Report:
    title: str
    traces: list[Trace]
    sections: list[Section]
    device: str | None = None
    generated: str = ""

    def pictures(self) -> list[Picture]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Picture)]


# ---------------------------------------------------------------------------------------------
# formatting


def fmt_pct(value: object, signed: bool = False) -> str:
    """``12.34`` -> ``12.3%`` (``+12.3%`` when ``signed``); unknown "—"."""
    return format_signed_pct(value) if signed else format_percent(value)


def _most_common(values: pd.Series) -> object:
    """The most frequent value of a group (the first of the ties)."""
    return values.mode().iat[0]


def report_format(path: str | os.PathLike[str]) -> str:
    """``"html"`` or ``"md"`` from the output file name; ValueError otherwise."""
    suffix = Path(path).suffix.lower()
    fmt = FORMATS.get(suffix)
    if fmt is None:
        raise ValueError(f"{os.fspath(path)}: cannot tell the report format from {suffix or 'a name without suffix'!r}; use .html or .md")
    return fmt


# ---------------------------------------------------------------------------------------------
# building


def _label(trace: Trace) -> str:
    return os.path.basename(trace.meta.path.rstrip("/")) or trace.meta.source_format


def build_report(
    traces: Sequence[Trace], device: str | None = None, top: int = DEFAULT_TOP, pictures: bool = True, show_paths: bool = False
) -> Report:
    """The review document of one trace, or of two (B compared with A).

    Parameters
    ----------
    traces
        One or two loaded traces.
    device
        The GPU when a trace does not say (as ``kviewer sol --device``).
    top
        Rows of each ranked table.
    pictures
        Ask for the timeline and roofline pictures.
    show_paths
        Show each file's full path; by default its name alone (see the module's docstring).
    """
    if not 1 <= len(traces) <= 2:
        raise ValueError(f"a report covers one trace or two compared, got {len(traces)}")
    traces = list(traces)
    labels = [_label(t) for t in traces]
    two = len(traces) == 2
    if two and labels[0] == labels[1]:
        title = f"kviewer report: A: {labels[0]} vs B: {labels[1]}"  # the same name: the tags tell them apart
    else:
        title = f"kviewer report: {labels[0]}" + (f" vs {labels[1]}" if two else "")

    report = Report(
        title=title,
        traces=traces,
        sections=[],
        device=device,
        generated=f"kviewer {__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    )

    sols = [session.analyses.compute_sol(t, device) for t in traces]
    tags = ["A", "B"] if two else [""]

    mfus = [analysis.mfu.mfu_or_unknown(t, device, sols[i].result) for i, t in enumerate(traces)]
    facts = Section("Traces")
    for i, t in enumerate(traces):
        facts.blocks.append(Paragraph(f"{tags[i] + ': ' if two else ''}{labels[i]}"))
        facts.blocks.extend(_mfu_headline(mfus[i]))
        facts.blocks.append(Facts(_trace_facts(t, sols[i], show_paths)))
        if len(mfus[i].steps):
            facts.blocks.append(_mfu_table(mfus[i]))
    report.sections.append(facts)

    if pictures and any(len(t.kernels) or len(t.cpu_slices) or len(t.gpu_ops) for t in traces):
        report.sections.append(
            Section(
                "Timeline",
                [
                    Picture(
                        "timeline", "timeline", tuple(range(len(traces))),
                        "The whole timeline" + (" of both traces, A above B" if two else "")
                        + "; kernels coloured by what bounds them (orange memory, green compute, blue unknown), "
                        "the dark band inside a kernel is its speed-of-light time",
                    )
                ],
            )
        )

    for i, t in enumerate(traces):
        who = f" of {tags[i]} ({labels[i]})" if two else ""
        report.sections.append(_top_kernels(t, top, who))
        report.sections.append(_sol_section(sols[i], top, who, f"roofline_{tags[i].lower() or 'trace'}", i, pictures))
        fus = None
        if sols[i].result is not None:
            fus = analysis.fusion.fusion(t, sol=sols[i].result)
        report.sections.append(_fusion_section(fus, top, who))
        report.sections.append(_whatif_section(t, sols[i].result, fus, who, device))

    if two:
        shown = [t.meta.path for t in traces] if show_paths else labels
        report.sections.append(_compare_section(analysis.compare.compare(traces[0], traces[1]), top, shown))
    if not show_paths:
        _hide_paths(report)
    return report


def _hide_paths(report: Report) -> None:
    """Every text of ``report`` with the traces' paths cut to their names and the home folder
    written ``~`` (a warning or a diagnostic may quote a path)."""
    cuts: dict[str, str] = {}
    for t in report.traces:
        path = t.meta.path.rstrip("/")
        if not path:
            continue
        for full in {path, os.path.abspath(path), os.path.realpath(path)}:
            cuts[full] = _label(t)
            folder = os.path.dirname(full)
            if folder and folder != os.sep:
                cuts[folder + os.sep] = ""
    home = os.path.expanduser("~")
    if home and home != os.sep:
        cuts[home] = "~"
    if not cuts:
        return
    # longest first, so a path goes before its folder and the folder before the home folder
    pattern = re.compile("|".join(re.escape(k) for k in sorted(cuts, key=len, reverse=True)))

    def cut(text: str) -> str:
        return pattern.sub(lambda m: cuts[m.group(0)], text) if text else text

    report.title = cut(report.title)
    for sec in report.sections:
        sec.title = cut(sec.title)
        for b in sec.blocks:
            if isinstance(b, Paragraph):
                b.text = cut(b.text)
            elif isinstance(b, Facts):
                b.items = [(cut(k), cut(v)) for k, v in b.items]
            elif isinstance(b, Table):
                b.columns = [cut(c) for c in b.columns]
                b.rows = [[cut(v) for v in row] for row in b.rows]
                b.caption = cut(b.caption)
            elif isinstance(b, (Picture, Svg)):
                b.caption = cut(b.caption)


def _mfu_headline(m: Any) -> list[Paragraph]:
    """The headline: MFU, HFU and step SOL over all steps (nothing when the trace has no steps)."""
    if not m.totals or m.totals.get("error"):
        return []
    return [Paragraph(f"{m.totals['steps']} steps: " + mfu_line(m.totals))]


def _mfu_table(m: Any) -> Table:
    """MFU per step: the table of ``kviewer summary --steps``."""
    headers, rows = mfu_cells(m.steps)
    return Table(headers, rows, [h not in ("basis", "peak") for h in headers],
                 caption="MFU per step: model FLOPs / (step time x dense peak of the dominant precision); "
                         "HFU counts what the GPU executed (recomputation, measured counters); "
                         "step SOL = sum of the kernels' speed-of-light times / step time")


#: ``meta.extra`` entries that hold a path on the machine that recorded the trace (Kineto's
#: ``traceName``: where the profiler wrote the file)
PATH_EXTRAS = frozenset({"trace_name"})


def _trace_facts(t: Trace, sol: SolInfo, show_paths: bool = False) -> list[tuple[str, str]]:
    m = t.meta
    items: list[tuple[str, str]] = [("file", m.path if show_paths else _label(t)), ("format", m.format_label or m.source_format)]
    tool = " ".join(x for x in (m.tool, m.tool_version) if x)
    items.append(("tool", tool or "unknown"))
    for key, value in m.extra.items():
        text = str(value)
        if key in PATH_EXTRAS and not show_paths:
            # the recording machine's path (either separator: it may have been Windows)
            text = re.split(r"[/\\]", text.rstrip("/\\"))[-1] or text
        items.append((str(key).replace("_", " "), text))
    if m.origin_ns is not None:
        items.append(("recorded", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(m.origin_ns / 1e9))))
    span = t.span_ns()
    if span:
        items.append(("span", fmt_ns(span[1] - span[0])))
    if m.ranks:
        items.append(("ranks", ", ".join(str(r) for r in m.ranks)))
    for rec in t.devices.to_dict(orient="records"):
        parts = [str(rec.get("name") or "unknown device")]
        if rec.get("architecture"):
            parts.append(str(rec["architecture"]))
        if rec.get("compute_capability"):
            parts.append(f"CC {rec['compute_capability']}")
        if int(rec.get("sm_count", -1)) > 0:
            parts.append(f"{int(rec['sm_count'])} {'CUs' if rec.get('vendor') == 'AMD' else 'SMs'}")
        mem = rec.get("memory_bytes", -1)
        if mem is not None and mem > 0:
            parts.append(f"{mem / 1024**3:.1f} GiB")
        items.append((f"device {rec['id']}", ", ".join(parts)))
    specs = sol.result.specs if sol.result is not None else {}
    for spec in {s.id: s for s in specs.values()}.values():
        items.append(("peak rates", f"{spec.name} ({spec.source})" if spec.source else spec.name))
    if sol.why:
        items.append(("speed of light", sol.why))
    k = t.kernels
    items.append(("kernels", f"{len(k):,}, {fmt_ns(float(k['dur'].sum()))} of kernel time" if len(k) else "none"))
    items.append(("memory ops", f"{len(t.gpu_ops):,}"))
    items.append(("host slices", f"{len(t.cpu_slices):,}"))
    for w in m.warnings:
        items.append(("warning", w.message))
    return items


def _top_kernels(t: Trace, top: int, who: str) -> Section:
    sec = Section(f"Top kernels{who}")
    if not len(t.kernels):
        sec.blocks.append(Paragraph("The trace has no kernels."))
        return sec
    df = analysis.summary.kernel_summary(t).head(top)
    rows = [
        [str(i + 1), str(r.name), fmt_int(r.count), fmt_ns(r.total_ns), fmt_ns(r.avg_ns), fmt_ns(r.min_ns), fmt_ns(r.max_ns), fmt_pct(r.time_pct)]
        for i, r in enumerate(df.itertuples(index=False))
    ]
    n = t.kernels["name"].nunique()
    sec.blocks.append(
        Table(
            ["#", "kernel", "count", "total", "average", "min", "max", "time"],
            rows,
            [True, False, True, True, True, True, True, True],
            caption=f"{len(rows)} of {n:,} distinct kernels, by total time",
            wide=(1,),
        )
    )
    return sec


def _sol_section(info: SolInfo, top: int, who: str, key: str, index: int, pictures: bool) -> Section:
    sec = Section(f"Speed of light{who}")
    result = info.result
    if result is None:
        sec.blocks.append(Paragraph(f"No speed-of-light analysis: {info.why}"))
        return sec
    sol, specs = result.table, result.specs
    s = result.summary()
    bad = result.warnings()
    if bad:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(bad.items()))
        sec.blocks.append(Paragraph(f"Warning: {sum(bad.values()):,} kernel(s) exceed peak: model or counter error; their SOL % is not shown ({why})."))
    kernel_ns = s["kernel_ns"]
    known = s["known_ns"]
    sec.blocks.append(
        Facts(
            [
                ("kernel time", fmt_ns(kernel_ns)),
                ("with a SOL estimate", f"{fmt_ns(known)} ({fmt_pct(known / kernel_ns * 100 if kernel_ns else math.nan)})"),
                ("SOL floor of that time", f"{fmt_ns(s['sol_ns'])} ({fmt_pct(s['sol_ns'] / known * 100 if known else math.nan)} of it)"),
                ("memory-bound kernels", f"{fmt_ns(s['memory_bound_ns'])} ({fmt_pct(s['memory_bound_ns'] / kernel_ns * 100 if kernel_ns else math.nan)})"),
                ("compute-bound kernels", f"{fmt_ns(s['compute_bound_ns'])} ({fmt_pct(s['compute_bound_ns'] / kernel_ns * 100 if kernel_ns else math.nan)})"),
            ]
        )
    )
    g = _sol_groups(sol).head(top)
    rows = [
        [
            str(r.short_name), str(r.kind), fmt_int(r.count), fmt_ns(r.dur), fmt_ns(r.t_sol),
            f"exceeds peak ({fmt_int(r.exceeds)})" if r.exceeds else fmt_pct(r.sol_pct), str(r.bound),
            fmt_count(r.flops), fmt_count(r.nbytes), str(r.source),
        ]
        for r in g.itertuples(index=False)
    ]
    sec.blocks.append(
        Table(
            ["kernel", "kind", "count", "total", "SOL time", "SOL %", "bound", "FLOPs", "bytes", "FLOPs / bytes from"],
            rows,
            [False, False, True, True, True, True, False, True, True, False],
            caption="kernels grouped by short name, by total time; SOL % is the speed-of-light time over the measured time",
            wide=(0,),
        )
    )
    if pictures:
        spec_names = sorted({s.name for s in specs.values()})
        sec.blocks.append(
            Picture(
                key, "roofline", (index,),
                f"Roofline of {', '.join(spec_names) or 'the GPU'}: each kernel at its arithmetic intensity and achieved FLOP/s "
                "(filled: measured FLOPs, hollow: modelled)",
                width=1100, height=620,
            )
        )
    return sec


def _sol_groups(sol: pd.DataFrame) -> pd.DataFrame:
    """SOL per short name: summed times, the most common bound and sources."""
    import pandas as pd

    df = pd.DataFrame(
        {
            "short_name": sol["short_name"].astype(str).to_numpy(),
            "kind": sol["kind"].astype(str).to_numpy(),
            "dur": sol["dur"].to_numpy(np.float64),
            "t_sol": sol["t_sol_ns"].to_numpy(np.float64),
            "flops": sol["flops"].to_numpy(np.float64),
            "nbytes": sol["bytes"].to_numpy(np.float64),
            "bound": sol["bound"].astype(str).to_numpy(),
            "source": (sol["flops_source"].astype(str) + " / " + sol["bytes_source"].astype(str)).to_numpy(),
            "exceeds": (sol["sol_status"].astype(str) == "exceeds_peak").to_numpy() if "sol_status" in sol else np.zeros(len(sol), dtype=bool),
        }
    )
    # SOL % of a group: over the kernels whose speed of light is known and physical
    df["known_dur"] = np.where(np.isnan(df["t_sol"].to_numpy()), 0.0, df["dur"].to_numpy())
    g = df.groupby("short_name", sort=False)
    out = pd.DataFrame(
        {
            "kind": g["kind"].agg(_most_common),
            "count": g.size(),
            "dur": g["dur"].sum(),
            "t_sol": g["t_sol"].sum(min_count=1),
            "flops": g["flops"].sum(min_count=1),
            "nbytes": g["nbytes"].sum(min_count=1),
            "bound": g["bound"].agg(_most_common),
            "source": g["source"].agg(_most_common),
            "exceeds": g["exceeds"].sum().astype(np.int64),
            "known_dur": g["known_dur"].sum(),
        }
    ).reset_index()
    out["sol_pct"] = np.where(out["known_dur"] > 0, out["t_sol"] / out["known_dur"].where(out["known_dur"] > 0) * 100.0, np.nan)
    return out.sort_values(["dur", "short_name"], ascending=[False, True], kind="stable").reset_index(drop=True)


def _fusion_section(result: FusionResult | None, top: int, who: str) -> Section:
    """The fusion candidates (None: no speed of light to find them with)."""
    sec = Section(f"Fusion candidates{who}")
    if result is None:
        sec.blocks.append(Paragraph("No fusion analysis without speed of light (see above)."))
        return sec
    df = result.candidates
    if not len(df):
        sec.blocks.append(Paragraph("No fusion candidates: no chains of memory-bound kernels or GEMMs with separate epilogues."))
        return sec
    total = result.summary()
    sec.blocks.append(
        Paragraph(
            f"{len(df):,} candidates; estimated saving {fmt_ns(total['savings_ns'])} "
            f"of {fmt_ns(total['kernel_ns'])} kernel time ({fmt_pct(total['savings_pct'])})"
            + (f"; {total['unknown']:,} without an estimate (unknown sizes)." if total["unknown"] else ".")
        )
    )
    rows = [
        [
            fmt_int(r.rank), str(r.kind), str(r.chain), fmt_int(r.count), fmt_ns(r.measured_ns),
            fmt_ns(r.fused_est_ns), fmt_ns(r.savings_ns),
            fmt_pct(r.gpu_time_pct), f"{r.remedy} ({r.confidence} confidence)", str(r.note),
        ]
        for r in df.head(top).itertuples(index=False)
    ]
    sec.blocks.append(
        Table(
            ["#", "kind", "chain", "count", "measured", "fused (est.)", "saving", "of GPU time", "remedy", "note"],
            rows,
            [True, False, False, True, True, True, True, True, False, False],
            caption=f"{len(rows)} of {len(df):,} candidates, by estimated saving",
            wide=(2, 8),
        )
    )
    return sec


def _whatif_section(t: Trace, sol: SolResult | None, fus: FusionResult | None, who: str, device: str | None) -> Section:
    """"What would help most": each single what-if change and all of them together, projected
    by replaying the trace's dependency graph (:mod:`kviewer.analysis.whatif`)."""
    sec = Section(f"What would help most{who}")
    try:
        model = analysis.whatif.whatif_model(t, device=device, sol=sol, fusion=fus.candidates if fus is not None else None)
    except AnalysisError as exc:
        sec.blocks.append(Paragraph(f"No projection: {exc}"))
        return sec
    projections = analysis.whatif.top_projections(model)
    base = projections[0].median_measured_ns if projections else math.nan
    sec.blocks.append(Paragraph(
        f"Median step {fmt_ns(base)} over {len(model.windows):,} step(s). Each change replays the trace's dependency graph "
        "(launches, streams, syncs) with the change applied (kviewer whatif); the last row applies them all together."))
    rows = []
    idle = [p.changes.label() for p in projections if not p.median_projected_ns < 0.995 * p.median_measured_ns]
    for p in projections:
        m, q = p.median_measured_ns, p.median_projected_ns
        if p.changes.label() in idle:
            continue
        rows.append([p.changes.label(), fmt_ns(q), fmt_pct((q - m) / m * 100.0, signed=True) if m > 0 else UNKNOWN,
                     "; ".join(str(n["what"]) for n in p.notes)])
    sec.blocks.append(Table(["change", "projected median step", "vs measured", "what it does"], rows, [False, True, True, False],
                            caption="projected median step time per change", wide=(0, 3)))
    if idle:
        sec.blocks.append(Paragraph(f"No gain projected (left out): {', '.join(idle)}."))
    return sec


def _compare_section(r: CompareResult, top: int, shown: Sequence[str] | None = None) -> Section:
    """``shown``: how A and B are named (their names, or paths with ``--show-paths``); by
    default the comparison's own labels."""
    sec = Section("Comparison: B against A")
    name_a, name_b = shown if shown is not None else (r.label_a, r.label_b)
    sec.blocks.append(Facts([("A", name_a), ("B", name_b)]))
    slower = r.slower_pct
    verdict = "slower" if r.delta_ns > 0 else "faster" if r.delta_ns < 0 else "as fast"
    total_pct = r.total_slower_pct
    per_step = (f"Median step: A {fmt_ns(r.step_median_a_ns)}, B {fmt_ns(r.step_median_b_ns)} ({fmt_pct(slower, signed=True)}), "
                f"{len(r.steps_a)} vs {len(r.steps_b)} steps. " if r.headline_basis == "median step" else "")
    sec.blocks.append(
        Paragraph(
            per_step
            + f"Total kernel time: A {fmt_ns(r.total_a_ns)}, B {fmt_ns(r.total_b_ns)}; B is {fmt_ns(abs(r.delta_ns))} {verdict}"
            + (f" ({fmt_pct(total_pct, signed=True)})." if math.isfinite(total_pct) else ".")
            + f" Kernels matched by {'name, launch size and launching op' if r.use_ops else 'name and launch size'}."
        )
    )
    for note in r.notes:  # how to read the figures (step counts, ranks that differ): as the window and the CLI say
        sec.blocks.append(Paragraph(f"Note: {note}."))
    rows = []
    for t in r.totals.itertuples(index=False):
        is_ns = str(t.unit) == "ns"
        f = fmt_ns if is_ns else fmt_int
        d = number(t.delta)
        delta = fmt_signed_ns(d) if is_ns else (UNKNOWN if d is None else f"{d:+,.0f}")
        rows.append([str(t.metric), f(t.a), f(t.b), delta, fmt_pct(t.delta_pct, signed=True)])
    sec.blocks.append(Table(["metric", "A", "B", "B − A", "change"], rows, [False, True, True, True, True], caption="totals"))

    g = r.groups.copy()
    g = g.reindex(g["delta_ns"].abs().sort_values(ascending=False, kind="stable").index).head(top)
    rows = [
        [
            str(x.name), str(x.status), fmt_int(x.count_a), fmt_ns(x.total_a_ns), fmt_int(x.count_b), fmt_ns(x.total_b_ns),
            fmt_signed_ns(x.delta_ns), fmt_pct(x.delta_pct, signed=True), str(x.matched_by),
        ]
        for x in g.itertuples(index=False)
    ]
    sec.blocks.append(
        Table(
            ["kernel group", "status", "count A", "total A", "count B", "total B", "B − A", "change", "matched by"],
            rows,
            [False, False, True, True, True, True, True, True, False],
            caption=f"{len(rows)} of {len(r.groups):,} kernel groups, by size of the change",
            wide=(0,),
        )
    )
    if len(r.fusion):
        rows = [
            [fmt_int(x.fusion_set), str(x.rows_a), str(x.rows_b), fmt_ns(x.total_a_ns), fmt_ns(x.total_b_ns), fmt_signed_ns(x.delta_ns), fmt_pct(x.delta_pct, signed=True)]
            for x in r.fusion.head(top).itertuples(index=False)
        ]
        sec.blocks.append(
            Table(
                ["set", "kernels in A", "fused kernels in B", "total A", "total B", "B − A", "change"],
                rows,
                [True, False, False, True, True, True, True],
                caption="work A does in separate kernels and the fused kernels B runs for it",
                wide=(1, 2),
            )
        )
    if len(r.steps):
        rows = [
            [fmt_int(x.position), str(x.step_a), str(x.step_b), fmt_ns(x.gpu_span_a), fmt_ns(x.gpu_span_b), fmt_signed_ns(x.delta_ns), fmt_pct(x.delta_pct, signed=True)]
            for x in r.steps.head(top).itertuples(index=False)
        ]
        sec.blocks.append(
            Table(
                ["#", "step A", "step B", "GPU span A", "GPU span B", "B − A", "change"],
                rows,
                [True, False, False, True, True, True, True],
                caption=f"steps paired by position (B aligned to A at the {r.align_basis})",
            )
        )
    return sec


# ---------------------------------------------------------------------------------------------
# escaping


def html_escape(text: object) -> str:
    """Text for HTML content or a quoted attribute (control and bidi characters made visible first)."""
    return html.escape(display_text(text), quote=True)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")


def md_escape(text: object) -> str:
    """Text for a Markdown paragraph or table cell: it renders as the same characters.

    ``&``, ``<`` and ``>`` become entities (Markdown passes raw HTML through, so ``<script>`` would
    be markup); backslash-escapes stop emphasis, code spans, links and images, and table cell
    breaks (``|``); line breaks become spaces (a table row is one line); other control and bidi
    characters are made visible (:func:`kviewer.core.text.display_text`).
    """
    s = display_text(re.sub(r"[\r\n]+", " ", str(text)))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


# ---------------------------------------------------------------------------------------------
# rendering

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2125; margin: 24px auto; max-width: 1400px; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 2px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #d5dbe1; padding-bottom: 3px; }
.generated { color: #68717a; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 4px; }
th, td { border: 1px solid #d5dbe1; padding: 3px 8px; vertical-align: top; }
th { background: #eef1f4; text-align: left; }
td.num, th.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.wide { overflow-wrap: anywhere; min-width: 18em; max-width: 60em; font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
caption { caption-side: bottom; text-align: left; color: #68717a; font-size: 12px; padding-top: 3px; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; margin: 6px 0 12px; }
dl.facts dt { color: #55606b; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
figure { margin: 10px 0; } figure img { border: 1px solid #d5dbe1; max-width: 100%; height: auto; }
figcaption { color: #55606b; font-size: 12px; }
p.trace { font-weight: 600; margin-bottom: 0; }
"""


def render_html(report: Report, images: Mapping[str, bytes]) -> str:
    """A self-contained HTML document: styles inline, pictures as ``data:`` URIs."""
    e = html_escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # no script may run in a report, whatever text a trace put in it
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(report.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head><body>",
        f"<h1>{e(report.title)}</h1>",
        f'<p class="generated">{e(report.generated)}</p>',
    ]
    for sec in report.sections:
        out.append(f"<h{sec.level}>{e(sec.title)}</h{sec.level}>")
        for b in sec.blocks:
            if isinstance(b, Paragraph):
                cls = ' class="trace"' if sec.title == "Traces" else ""
                out.append(f"<p{cls}>{e(b.text)}</p>")
            elif isinstance(b, Facts):
                out.append('<dl class="facts">' + "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in b.items) + "</dl>")
            elif isinstance(b, Table):
                out.append(_html_table(b))
            elif isinstance(b, Picture):
                data = images.get(b.key)
                if data is None:
                    continue
                uri = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
                out.append(
                    f'<figure><img src="{uri}" width="{b.width}" alt="{e(b.caption)}">'
                    f"<figcaption>{e(b.caption)}</figcaption></figure>"
                )
            elif isinstance(b, Svg):
                # an <img> (not inline SVG): the document's policy runs no script, and an image runs none either
                uri = "data:image/svg+xml;base64," + base64.b64encode(b.svg.encode("utf-8")).decode("ascii")
                out.append(f'<figure><img src="{uri}" width="{b.width}" alt="{e(b.caption)}"><figcaption>{e(b.caption)}</figcaption></figure>')
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _html_table(t: Table) -> str:
    e = html_escape
    head = "".join(f'<th class="num">{e(c)}</th>' if num else f"<th>{e(c)}</th>" for c, num in zip(t.columns, t.numeric))
    body = []
    for row in t.rows:
        cells = []
        for i, (value, num) in enumerate(zip(row, t.numeric)):
            cls = "num" if num else ("wide" if i in t.wide else "")
            cells.append(f'<td class="{cls}">{e(value)}</td>' if cls else f"<td>{e(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f"<caption>{e(t.caption)}</caption>" if t.caption else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>" + "".join(body) + "</tbody></table>"


def render_markdown(report: Report, image_paths: Mapping[str, str]) -> str:
    """GitHub-flavoured Markdown; pictures referenced by the (relative) paths given."""
    m = md_escape
    out = [f"# {m(report.title)}", "", f"_{m(report.generated)}_", ""]
    for sec in report.sections:
        out += ["#" * sec.level + " " + m(sec.title), ""]
        for b in sec.blocks:
            if isinstance(b, Paragraph):
                out += [("**" + m(b.text) + "**") if sec.title == "Traces" else m(b.text), ""]
            elif isinstance(b, Facts):
                out += [f"- {m(k)}: {m(v)}" for k, v in b.items] + [""]
            elif isinstance(b, Table):
                out += _md_table(b) + [""]
            elif isinstance(b, (Picture, Svg)):
                path = image_paths.get(b.key)
                if path is None:
                    continue
                url = urllib.parse.quote(path.replace(os.sep, "/"))
                out += [f"![{m(b.caption)}]({url})", "", f"_{m(b.caption)}_", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _md_table(t: Table) -> list[str]:
    m = md_escape
    lines = ["| " + " | ".join(m(c) for c in t.columns) + " |"]
    lines.append("|" + "|".join("---:" if num else "---" for num in t.numeric) + "|")
    for row in t.rows:
        lines.append("| " + " | ".join(m(v) if v != "" else " " for v in row) + " |")
    if t.caption:
        lines += ["", f"_{m(t.caption)}_"]
    return lines


def write_report(report: Report, out: str | os.PathLike[str], images: Mapping[str, bytes]) -> list[Path]:
    """Write the report; Markdown pictures go to ``<OUT stem>_files/<key>.png`` beside it.
    Returns every file written."""
    out = Path(out)
    fmt = report_format(out)
    written: list[Path] = []
    if fmt == "html":
        text = render_html(report, images)
    else:
        folder = out.with_name(out.stem + "_files")
        paths: dict[str, str] = {}
        if images:
            folder.mkdir(parents=True, exist_ok=True)
        for key, data in images.items():
            p = folder / f"{key}.png"
            p.write_bytes(data)
            written.append(p)
            paths[key] = f"{folder.name}/{p.name}"
        for svg in (b for sec in report.sections for b in sec.blocks if isinstance(b, Svg)):
            folder.mkdir(parents=True, exist_ok=True)
            p = folder / f"{svg.key}.svg"
            p.write_text(svg.svg, encoding="utf-8")
            written.append(p)
            paths[svg.key] = f"{folder.name}/{p.name}"
        text = render_markdown(report, paths)
    out.write_text(text, encoding="utf-8")
    written.insert(0, out)
    return written
