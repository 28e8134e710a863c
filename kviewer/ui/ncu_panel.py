"""The Counters dock: the match report of an attached counter report, and Nsight Compute's view of
the selected kernel.

Top: when a counter report is attached to the current trace, what matched (counts, the step of
the window, unmatched kernels on each side and why) and, when the program repeats itself and
several windows fit equally well, a box to choose the step the report belongs to.

Below: for the selected kernel (or, with nothing selected, the longest profiled kernel), the
sections an Nsight Compute user reads first, from :func:`kviewer.analysis.ncu_view.kernel_counters`:
speed-of-light bars (compute vs memory, and L1/L2/DRAM), launch statistics, occupancy (theoretical
vs achieved, the limiter), memory workload, and the rule results ncu stored. Sections the report
did not collect say so and name the ``--section`` that collects them; measured and modelled work
that disagree by more than 25 % are called out; inherited counters say from which launch.
"""

from __future__ import annotations

import html
import math
import os
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QTextBrowser, QVBoxLayout, QWidget

from kviewer import analysis
from kviewer.session.format import UNKNOWN, format_bytes, format_count, format_duration, number
from kviewer.ui.viewstate import Selection, ViewState

if TYPE_CHECKING:
    import kviewer.analysis.attach
    import kviewer.analysis.ncu_baseline
    import kviewer.analysis.ncu_view
    from kviewer.analysis.attach import AttachResult
    from kviewer.analysis.ncu_view import KernelCounters, Row
    from kviewer.session.tracks import TraceTracks

_MUTED = "color:#666"
_COMPUTE = "#3c9646"
_MEMORY = "#e6781e"
_OTHER = "#4a78c8"


def _value(row: Row) -> str:
    v = row.value
    if row.unit == "text":
        return html.escape(row.text) or "—"
    if math.isnan(v):
        return "—"
    if row.unit == "%":
        return f"{v:.1f} %"
    if row.unit == "ns":
        return format_duration(v)
    if row.unit == "Hz":
        return f"{v / 1e9:.2f} GHz"
    if row.unit == "byte":
        return format_bytes(v)
    if row.unit == "byte/s":
        return f"{format_count(v)}B/s"
    text = f"{v:,.0f}" if float(v).is_integer() else f"{v:,.4g}"
    return f"{text} {html.escape(row.unit)}" if row.unit else text


def _bar(label: str, pct: float, colour: str) -> str:
    if math.isnan(pct):
        return f"<tr><td>{html.escape(label)}</td><td colspan='2' style='{_MUTED}'>— not collected</td></tr>"
    w = max(0.0, min(100.0, pct))
    fill = f"<td bgcolor='{colour}' width='{w:.0f}%'>&nbsp;</td>" if w >= 0.5 else ""
    rest = f"<td bgcolor='#eeeeee' width='{100 - w:.0f}%'>&nbsp;</td>" if w < 99.5 else ""
    return (
        f"<tr><td style='padding-right:6px'>{html.escape(label)}</td>"
        f"<td width='60%'><table width='100%' cellspacing='0' cellpadding='0'><tr>{fill}{rest}</tr></table></td>"
        f"<td align='right'>&nbsp;{pct:.1f} %</td></tr>"
    )


def counters_html(kc: KernelCounters, extra: list[str] | None = None) -> str:
    """The kernel's sections as HTML (the bars as ncu draws them)."""
    parts = [f"<h3 style='margin:2px 0'>{html.escape(kc.name)}</h3>"]
    parts += extra or []
    sol = kc.section("SpeedOfLight")
    if sol.collected:
        rows = {r.label: r for r in sol.rows}
        parts.append("<b>GPU Speed Of Light Throughput</b><table width='100%' cellspacing='2'>")
        parts.append(_bar("Compute (SM)", rows["Compute (SM) Throughput"].value, _COMPUTE))
        parts.append(_bar("Memory", rows["Memory Throughput"].value, _MEMORY))
        parts.append(_bar("L1/TEX cache", rows["L1/TEX Cache Throughput"].value, _OTHER))
        parts.append(_bar("L2 cache", rows["L2 Cache Throughput"].value, _OTHER))
        parts.append(_bar("DRAM", rows["DRAM Throughput"].value, _OTHER))
        parts.append("</table>")
        parts.append(_table([r for r in sol.rows if r.unit != "%"]))
    for key in ("Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis"):
        s = kc.section(key)
        if not s.collected:
            continue
        parts.append(f"<b>{html.escape(s.title)}</b>")
        if key == "Occupancy":
            rows = {r.label: r for r in s.rows}
            parts.append("<table width='100%' cellspacing='2'>")
            parts.append(_bar("Theoretical", rows["Theoretical Occupancy"].value, _OTHER))
            parts.append(_bar("Achieved", rows["Achieved Occupancy"].value, _COMPUTE))
            parts.append("</table>")
            if kc.limiter:
                parts.append(f"<p style='margin:2px 0'>Occupancy limited by <b>{html.escape(kc.limiter)}</b> (fewest blocks per SM).</p>")
        parts.append(_table(s.rows))
    if kc.rules:
        parts.append("<b>Rule results</b><ul style='margin-left:-20px'>")
        colours = {"ERR": "#b00020", "WRN": "#9a4b00", "OPT": "#1f5fa8", "INF": "#555"}
        for r in kc.rules:
            speed = ""
            if not math.isnan(r.speedup_pct):
                speed = f" <i>(est. speedup {r.speedup_pct:.1f} %{' ' + r.speedup_kind if r.speedup_kind else ''})</i>"
            kind = f"<b style='color:{colours.get(r.kind, '#555')}'>{r.kind or 'NOTE'}</b> "
            parts.append(f"<li>{kind}<span style='color:#555'>{html.escape(r.rule)}</span>: {html.escape(r.message)}{speed}</li>")
        parts.append("</ul>")
    missing = kc.missing
    if missing:
        names = ", ".join(html.escape(s.title) for s in missing)
        parts.append(f"<p style='{_MUTED}'>Not collected: {names}. Collect with <code>ncu {html.escape(analysis.ncu_view.sections_hint(missing))}</code>"
                     " (or <code>--set full</code>).</p>")
    if not kc.rules and any(s.collected for s in kc.sections):
        parts.append(f"<p style='{_MUTED}'>No rule results in this report (CSV raw pages hold none; the .ncu-rep or "
                     "<code>--page details</code> has them).</p>")
    return "".join(parts)


def sections_html(trace: Any, row: int) -> str:
    """Every section the report stored for the kernel, all its metrics (ncu's details page)."""
    sections, loose = analysis.ncu_view.all_sections(trace, row)
    if not sections and not loose:
        return ""
    parts = ["<hr><b>All sections of the report</b>"]
    for title, rows in sections:
        parts.append(f"<p style='margin:6px 0 0 0'><b>{html.escape(title)}</b> <span style='{_MUTED}'>({len(rows)} metrics)</span></p>")
        parts.append(_table(rows))
    if loose:
        parts.append(f"<p style='{_MUTED}'>{loose} further metrics outside any section.</p>")
    return "".join(parts)


def _num(v: object) -> str:
    n = number(v)
    return UNKNOWN if n is None else f"{n:,.4g}"


def _table(rows: list[Row]) -> str:
    cells = [f"<tr><td style='color:#555;padding-right:10px'>{html.escape(r.label)}</td><td>{_value(r)}</td></tr>" for r in rows]
    return "<table cellspacing='0' cellpadding='1'>" + "".join(cells) + "</table>"


def match_html(result: AttachResult) -> str:
    """The match report of an attached counter report."""
    m = result.match
    lines = [f"<b>{m.matched} of {m.ncu_total}</b> kernels of {html.escape(_base(result.report_path))} matched"]
    if result.steps:
        lines.append(f"window in {html.escape(', '.join(result.steps))} (timeline launch {m.start}, {html.escape(m.start_source)})")
    if result.inherited:
        lines.append(f"{result.inherited} launches of the same kernel at the same place in other steps inherit the measured counters")
    if result.inheritance.refused:
        lines.append(f"{len(result.inheritance.refused)} inheritances refused: modelled FLOPs or bytes differ from the measured launch's by more than 25 %")
    for u in result.unmatched:
        lines.append(f"unmatched in the report: {u.count} × {html.escape(u.name)}: {html.escape(analysis.attach.WHY_TEXT.get(u.why, u.why))}")
    if result.timeline_outside or result.timeline_skipped:
        lines.append(f"unmatched in the timeline: {result.timeline_outside} outside the window, {result.timeline_skipped} inside it")
    if result.gaps:
        lines.append(f"{result.gaps} measured kernels differ from the model by more than 25 %")
    return "<br>".join(lines)


def _base(path: str) -> str:
    return os.path.basename(path) or path


class NcuPanel(QWidget):
    """The Counters dock's widget (see the module docstring).

    Signals
    -------
    windowChosen(int, int)
        (trace key, window start) the user picked among equally good windows.
    """

    windowChosen = Signal(int, int)

    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ncuPanel")
        self.state = state
        self.match_label = QLabel()
        self.match_label.setObjectName("ncuMatch")
        self.match_label.setWordWrap(True)
        self.match_label.setStyleSheet("padding:4px; background:#f4f7fb;")
        self.window_box = QComboBox()
        self.window_box.setObjectName("ncuWindow")
        self.window_box.setToolTip("The program repeats itself: these windows fit the report equally well")
        self.window_box.activated.connect(self._on_window)
        self.window_bar = QWidget()
        bar = QHBoxLayout(self.window_bar)
        bar.setContentsMargins(4, 0, 4, 2)
        bar.addWidget(QLabel("Report profiled in:"))
        bar.addWidget(self.window_box, 1)
        self.body = QTextBrowser()
        self.body.setObjectName("ncuBody")
        self.body.setOpenLinks(False)
        self.body.anchorClicked.connect(self._on_link)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.match_label)
        layout.addWidget(self.window_bar)
        layout.addWidget(self.body, 1)
        self.match_label.hide()
        self.window_bar.hide()
        self.shown_kernel: tuple[int, int] | None = None
        self.compare_pair: Any = None
        """callable -> (A tracks, B tracks) while two counter reports are compared, else None"""
        self._pairs: dict[tuple[int, int], Any] = {}
        state.selectionChanged.connect(lambda _s: self.refresh())
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.tracesChanged.connect(self.refresh)
        self.refresh()

    # -- filling
    def refresh(self) -> None:
        tracks = self._tracks()
        self._show_match(tracks)
        if tracks is None:
            self.shown_kernel = None
            self.body.setHtml(f"<p style='{_MUTED}'>Open an Nsight Compute report, or attach one to a trace "
                              "(File › Attach Counter Report…, or drop it on the window), to see its counters here.</p>")
            return
        row = self._kernel(tracks)
        if row < 0:
            self.shown_kernel = None
            self.body.setHtml(f"<p style='{_MUTED}'>{html.escape(tracks.label)} has no counters: attach an Nsight Compute "
                              "report of the same program (File › Attach Counter Report…).</p>")
            return
        self.show_kernel(tracks, row)

    def _tracks(self) -> TraceTracks | None:
        sel = self.state.selection
        if sel is not None:
            t = self.state.trace(sel.trace)
            if t is not None:
                return t
        return self.state.current

    def _kernel(self, tracks: TraceTracks) -> int:
        """The selected kernel of this trace, else its longest kernel with counters (-1: none)."""
        import numpy as np

        sel = self.state.selection
        if sel is not None and sel.trace == tracks.key and sel.table == "kernels":
            return sel.row
        m = tracks.trace.metrics
        if not len(m):
            return -1
        ids = np.unique(m["kernel"].to_numpy())
        ids = ids[(ids >= 0) & (ids < len(tracks.trace.kernels))]
        if not len(ids):
            return -1
        dur = tracks.trace.kernels["dur"].to_numpy()[ids]
        return int(ids[int(np.argmax(dur))])

    def show_kernel(self, tracks: TraceTracks, row: int) -> None:
        k = tracks.trace.kernels
        extra: list[str] = []
        status = str(k["counters"].iloc[row]) if "counters" in k.columns else ""
        source = int(k["counters_from"].iloc[row]) if "counters_from" in k.columns else -1
        shown_row = row
        if status == "inherited" and source >= 0:
            extra.append(f"<p style='color:#1f5fa8'>Counters <b>inherited</b> from the profiled launch "
                         f"<a href='select:{tracks.key}:kernels:{source}'>#{source}</a> (same kernel, launch size and shapes); "
                         "the sections below are that launch's.</p>")
            shown_row = source
        elif status == "measured":
            extra.append("<p style='color:#3c9646'>Counters <b>measured</b> by the attached report for this launch.</p>")
        for gap in analysis.attach.model_gaps(k, row):
            colour = "#9a4b00" if gap.compared else "#666"
            extra.append(f"<p style='color:{colour}'>⚠ {html.escape(gap.text)}</p>" if gap.compared else f"<p style='color:{colour}'>{html.escape(gap.text)}</p>")
        kc = analysis.ncu_view.kernel_counters(tracks.trace, shown_row)
        if not kc.has_counters and status == "":
            self.shown_kernel = (tracks.key, row)
            self.body.setHtml(f"<h3 style='margin:2px 0'>{html.escape(kc.name)}</h3><p style='{_MUTED}'>No counters for this kernel "
                              "(the attached report did not profile it, and no profiled launch has the same kernel, launch size and shapes).</p>")
            return
        self.shown_kernel = (tracks.key, row)
        self.body.setHtml(counters_html(kc, extra) + self._baseline_html(tracks, row) + sections_html(tracks.trace, shown_row))

    def _baseline_html(self, tracks: TraceTracks, row: int) -> str:
        """While two counter reports are compared: the selected kernel beside its partner, metric
        by metric (Nsight Compute's baseline)."""
        pair = self.compare_pair() if self.compare_pair is not None else None
        if pair is None or tracks.key not in (pair[0].key, pair[1].key):
            return ""

        a, b = pair
        key = (a.key, b.key)
        if key not in self._pairs:
            self._pairs = {key: analysis.ncu_baseline.pair_kernels(a.trace, b.trace)[0]}
        pairs = self._pairs[key]
        col, other = ("kernel_a", "kernel_b") if tracks.key == a.key else ("kernel_b", "kernel_a")
        hit = pairs[pairs[col] == row]
        if not len(hit):
            return f"<p style='{_MUTED}'>Baseline: no launch of this kernel in the other report.</p>"
        ka = int(hit["kernel_a"].iloc[0])
        kb = int(hit["kernel_b"].iloc[0])
        rows = analysis.ncu_baseline.baseline(a.trace, b.trace, only=(ka, kb)).rows
        shown = analysis.ncu_view.section_metrics()
        main = rows[rows["metric"].isin(shown)]
        differ = rows[~rows["same"] & rows["a"].notna() & rows["b"].notna() & ~rows["metric"].isin(shown)]
        both = rows["a"].notna() & rows["b"].notna()
        n_diff = int((both & ~rows["same"]).sum())
        parts = [f"<b>Baseline: A #{ka} vs B #{kb}</b> <span style='{_MUTED}'>({int(both.sum())} metrics compared, {n_diff} differ)</span>",
                 "<table cellspacing='0' cellpadding='1'><tr><th align='left'>metric</th><th>A</th><th>B</th><th>delta</th></tr>"]
        for r in list(main.itertuples()) + list(differ.itertuples())[:40]:
            delta_pct, d = number(r.delta_pct), number(r.delta)
            pct = "" if delta_pct is None else f" ({delta_pct:+.1f} %)"
            colour = "#000" if r.same else "#9a4b00"
            delta = UNKNOWN if d is None else f"{d:,.4g}{pct}"
            parts.append(f"<tr><td style='color:#555;padding-right:8px'>{html.escape(str(r.metric))}</td><td align='right'>{_num(r.a)}</td>"
                         f"<td align='right'>{_num(r.b)}</td><td align='right' style='color:{colour}'>{delta}</td></tr>")
        parts.append("</table>")
        return "".join(parts)

    def _show_match(self, tracks: TraceTracks | None) -> None:
        result: Any = getattr(tracks, "counters", None) if tracks is not None else None
        if result is None:
            self.match_label.hide()
            self.window_bar.hide()
            return
        self.match_label.setText(match_html(result))
        self.match_label.show()
        self.window_box.blockSignals(True)
        self.window_box.clear()
        for c in result.choices:
            self.window_box.addItem(f"{c.step or 'launch ' + str(c.start)} (timeline launch {c.start})", (tracks.key, c.start) if tracks else None)
        if 0 <= result.chosen < self.window_box.count():
            self.window_box.setCurrentIndex(result.chosen)
        self.window_box.blockSignals(False)
        self.window_bar.setVisible(result.ambiguous)

    def _on_link(self, url: Any) -> None:
        text = url.toString()
        if text.startswith("select:"):
            _, key, table, row = text.split(":")
            self.state.set_selection(Selection(int(key), table, int(row)), reveal=True)

    def _on_window(self, index: int) -> None:
        data = self.window_box.itemData(index)
        if data:
            self.windowChosen.emit(int(data[0]), int(data[1]))


__all__ = ["NcuPanel", "counters_html", "match_html", "sections_html"]
