"""The details panel: every known field of the selected bar, and its launch links."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QTextBrowser, QWidget

from kviewer import analysis
from kviewer.session.details import never_filled
from kviewer.session.format import format_bytes, format_count, format_duration, format_time
from kviewer.session.mfu_view import marker_mfu_html
from kviewer.session.open_trace import MFU
from kviewer.ui.viewstate import Selection, ViewState

if TYPE_CHECKING:
    import kviewer.analysis.attach

_TIME_COLS = {"start", "end", "dur", "t_sol_ns"}
_SKIP = {"id"}
#: columns of the speed-of-light table shown with a kernel's own
_SOL_FIELDS = ("bound", "t_sol_ns", "sol_pct", "sol_status")


class DetailsPanel(QTextBrowser):
    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.mfu_requests: Any = None
        """:class:`~kviewer.ui.mfu_requests.MfuRequests` (set by the window): a step marker's MFU"""
        self.setOpenLinks(False)
        self._unfilled: dict[tuple[int, str], tuple[Any, frozenset[str]]] = {}
        """(trace key, table) -> (the frame, its never-filled columns)"""
        self.anchorClicked.connect(self._on_link)
        state.selectionChanged.connect(self.show_selection)
        state.tracesChanged.connect(self._on_traces)
        self.show_selection(None)

    def _on_traces(self) -> None:
        self._unfilled.clear()  # a trace closed, or its content changed (counters attached)
        self.show_selection(self.state.selection)

    def show_selection(self, sel: Selection | None) -> None:
        tracks = self.state.trace(sel.trace) if sel is not None else None
        if sel is None or tracks is None:
            self.setHtml("<p style='color:#777'>Click a bar on the timeline or a row of the table.</p>")
            return
        df = tracks.trace.table(sel.table)
        if not (0 <= sel.row < len(df)):
            self.setHtml("")
            return
        r = df.iloc[sel.row]
        title = str(r["short_name"] if sel.table == "kernels" else r["name"])
        parts = [f"<h3 style='margin:2px 0'>{html.escape(title)}</h3>", "<table cellspacing='0' cellpadding='1'>"]
        # columns this trace never fills (an nsys kernel has no ncu throughput): not listed
        hide = self._never_filled(tracks, sel.table, df)
        fields = [(col, r[col]) for col in df.columns if col not in hide]
        if sel.table == "kernels":
            # the speed of light sits beside the kernels (its own table), row for row
            for col in _SOL_FIELDS:
                values = tracks.sol_column(col)
                if values is not None:
                    fields.append((col, values[sel.row]))
        for col, value in fields:
            if col in _SKIP or (col == "short_name" and str(value) == str(r.get("name", ""))):
                continue
            text = _value_text(col, value, tracks.offset_ns)
            if text and col in ("start", "end"):
                text = f"{text} {tracks.clock}"  # the one clock, said where a time is shown
            if text:
                parts.append(f"<tr><td style='color:#555;padding-right:10px'>{html.escape(col)}</td><td>{html.escape(text)}</td></tr>")
        parts.append("</table>")
        if sel.table == "kernels":
            parts.extend(_counter_notes(tracks, sel.row))
        if sel.table == "cpu_slices":
            parts.extend(self._step_mfu(tracks, r))
        parts.extend(self._links(tracks, sel))
        parts.append(f"<p style='color:#777'>{html.escape(tracks.label)} · {sel.table} #{sel.row}</p>")
        self.setHtml("".join(parts))

    def _never_filled(self, tracks: Any, table: str, df: Any) -> frozenset[str]:
        """:func:`~kviewer.session.details.never_filled` of a trace's table, worked out once."""
        key = (tracks.key, table)
        cached = self._unfilled.get(key)
        if cached is None or cached[0] is not df:
            cached = (df, never_filled(df))
            self._unfilled[key] = cached
        return cached[1]

    def _step_mfu(self, tracks: Any, r: Any) -> list[str]:
        """A step marker's MFU, HFU, step SOL and the split of its time."""
        rank = int(r["rank"]) if "rank" in r else -1
        text = marker_mfu_html(self.state.document.ready(tracks.key, MFU), str(r["name"]), rank)
        if text is None:
            return []
        if text == "" and self.mfu_requests is not None:
            sel = self.state.selection
            res = self.mfu_requests.get(tracks, lambda: self.show_selection(self.state.selection) if self.state.selection == sel else None)
            if res is None:
                return ["<p style='color:#777'>MFU: computing…</p>"]
            text = marker_mfu_html(res, str(r["name"]), rank) or ""
        return [text] if text else []

    def _links(self, tracks: Any, sel: Selection) -> list[str]:
        out: list[str] = []
        if sel.table == "kernels":
            src = int(tracks.launch_of_kernel[sel.row]) if sel.row < len(tracks.launch_of_kernel) else -1
            if src >= 0:
                name = tracks.name_of("cpu_slices", src)
                lat = tracks.launch_latency[sel.row] if tracks.launch_latency is not None else float("nan")
                latency = f" · launch latency <b>{format_duration(float(lat))}</b> (call start → kernel start)" if lat == lat else ""
                out.append(f"<p>Launched by <a href='select:{tracks.key}:cpu_slices:{src}'>{html.escape(name)}</a>{latency}</p>")
        sync = tracks.sync.get(sel.table)
        if sync is not None and sel.row < len(sync) and sync[sel.row]:
            what = "the host waits here for the GPU" if sel.table == "cpu_slices" else "a device-to-host copy the host waits for"
            out.append(f"<p style='color:#b3261e'>⏸ Synchronisation: {what}.</p>")
        if sel.table == "cpu_slices":
            f = tracks.trace.flows
            if len(f):
                rows = f[(f["src"] == sel.row)]
                for dst_table, dst in zip(rows["dst_table"].astype(str), rows["dst"]):
                    if dst_table in ("kernels", "gpu_ops") and 0 <= int(dst) < len(tracks.trace.table(dst_table)):
                        name = tracks.name_of(dst_table, int(dst))
                        out.append(f"<p>Launches <a href='select:{tracks.key}:{dst_table}:{int(dst)}'>{html.escape(name)}</a></p>")
        return out

    def _on_link(self, url: QUrl) -> None:
        text = url.toString()
        if not text.startswith("select:"):
            return
        _, key, table, row = text.split(":")
        self.state.set_selection(Selection(int(key), table, int(row)), reveal=True)


def _value_text(col: str, value: Any, offset: int) -> str:
    if isinstance(value, float) or hasattr(value, "dtype") and value.dtype.kind == "f":
        v = float(value)
        if math.isnan(v):
            return "—"  # unknown, never 0
        if col in _TIME_COLS:
            return format_duration(v)
        if col.endswith("_pct"):
            return f"{v:.1f} %"
        if "bytes" in col:
            return f"{format_bytes(v)} ({v:,.0f})"
        if "flops" in col:
            return f"{format_count(v)} ({v:,.0f})"
        if col.endswith("_hz"):
            return f"{v / 1e9:.3f} GHz"
        return f"{v:,.4g}"
    if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
        return "yes" if bool(value) else ""
    if isinstance(value, int) or hasattr(value, "dtype") and value.dtype.kind in "iu":
        v = int(value)
        if v == -1:
            return ""
        if col in ("start", "end"):
            return format_time(v - offset)
        if col == "dur":
            return format_duration(v)
        if col in ("shared_mem", "bytes"):
            return f"{format_bytes(v)} ({v:,})" if v >= 1000 else format_bytes(v)
        return str(v)
    return str(value)


def _counter_notes(tracks: Any, row: int) -> list[str]:
    """Where the kernel's measured columns came from, and where they disagree with the model."""
    k = tracks.trace.kernels
    out: list[str] = []
    status = str(k["counters"].iloc[row]) if "counters" in k.columns else ""
    if status == "inherited":
        src = int(k["counters_from"].iloc[row])
        out.append(
            f"<p style='color:#1f5fa8'>Measured values <b>inherited</b> from the profiled launch "
            f"<a href='select:{tracks.key}:kernels:{src}'>#{src}</a> (same kernel, launch size and shapes).</p>"
        )
    elif status == "measured":
        out.append("<p style='color:#3c9646'>Measured values from the attached counter report (this launch was profiled).</p>")
    gaps = analysis.attach.model_gaps(k, row)
    for gap in gaps:
        colour = "#9a4b00" if gap.compared else "#666"
        mark = "⚠ " if gap.compared else ""
        out.append(f"<p style='color:{colour}'>{mark}{html.escape(gap.text)}</p>")
    if not gaps and status and not math.isnan(float(k["model_flops"].iloc[row])):
        out.append(f"<p style='color:#666'>Measured and modelled work agree within {analysis.attach.GAP_LIMIT * 100:.0f} %.</p>")
    return out
