"""The Range dock: what lies inside the time range dragged on the timeline's axis.

The tables come from :func:`kviewer.analysis.timerange.range_summary` (the same function as
``kviewer summary FILE --range START:END``), computed off the GUI thread, newest range winning.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QTabWidget, QToolButton, QVBoxLayout, QWidget

from kviewer import analysis
from kviewer.session.format import format_duration, format_time
from kviewer.session.mfu_view import range_mfu_text
from kviewer.session.table_data import Col
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.critpath_overlay import StepBreakdown
from kviewer.ui.table_model import TableModel, TableView
from kviewer.ui.viewstate import ViewState

if TYPE_CHECKING:
    import kviewer.analysis.steps
    import kviewer.analysis.timerange

HINT = "Drag along the timeline's time axis (or Shift+drag over the lanes) to select a range."


def _columns() -> dict[str, tuple[Any, ...]]:
    return {
        "kernels": (
            Col("name", "Kernel", "text"),
            Col("count", "Count", "count", header_tip="kernels overlapping the range"),
            Col("total_ns", "Total", "time", header_tip="time inside the range (kernels across an edge are clipped)"),
            Col("avg_ns", "Avg", "time", header_tip="total / count"),
            Col("range_pct", "% of range", "pct", header_tip="total / range duration (above 100 when streams overlap)"),
        ),
        "streams": (
            Col("device", "GPU", "int"),
            Col("stream", "Stream", "int"),
            Col("kernels", "Kernels", "count"),
            Col("ops", "Copies/sets", "count"),
            Col("busy_ns", "Busy", "time", header_tip="time the stream ran a kernel, copy or memset"),
            Col("idle_ns", "Idle", "time"),
            Col("busy_pct", "Busy %", "pct"),
        ),
        "copies": (
            Col("kind", "Kind", "text"),
            Col("direction", "Direction", "text"),
            Col("count", "Count", "count"),
            Col("bytes", "Bytes", "bytes", header_tip="bytes inside the range (a copy across an edge counts pro rata)"),
            Col("total_ns", "Total", "time"),
            Col("bandwidth", "Bandwidth", "text", header_tip="bytes / time, over the operations that know their size"),
        ),
        "nvtx": (
            Col("name", "Range", "text"),
            Col("count", "Count", "count"),
            Col("total_ns", "Total", "time", header_tip="time inside the selected range"),
            Col("range_pct", "% of range", "pct"),
        ),
        "gpu_metrics": (
            Col("device", "GPU", "int"),
            Col("metric", "Metric", "text"),
            Col("samples", "Samples", "count", header_tip="samples whose time lies in the range"),
            Col("mean", "Mean", "number", header_tip="mean over the samples (fixed rate: the time mean)"),
            Col("p50", "p50", "number"),
            Col("p95", "p95", "number"),
            Col("max", "Max", "number"),
        ),
    }


TAB_TITLES = {"kernels": "Kernels", "streams": "GPU busy/idle", "copies": "Copies", "nvtx": "NVTX", "gpu_metrics": "GPU metrics"}


class RangePanel(QWidget):
    def __init__(self, state: ViewState, runner: BackgroundRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = runner
        self.summary: Any = None
        """the :class:`~kviewer.analysis.timerange.RangeSummary` shown (None before a range)"""
        self.title = QLabel(HINT)
        self.title.setWordWrap(True)
        self.title.setObjectName("rangeTitle")
        self.mfu_requests: Any = None
        """:class:`~kviewer.ui.mfu_requests.MfuRequests` (set by the window)"""
        self.mfu_label = QLabel("")
        self.mfu_label.setWordWrap(True)
        self.mfu_label.setObjectName("rangeMfu")
        self.mfu_label.hide()
        clear = QToolButton()
        clear.setText("Clear")
        clear.setToolTip("Clear the range (Esc on the timeline)")
        clear.clicked.connect(lambda: state.set_time_selection(None))
        head = QHBoxLayout()
        head.addWidget(self.title, 1)
        head.addWidget(clear)
        self.tabs = QTabWidget()
        self.models: dict[str, Any] = {}
        self.views: dict[str, Any] = {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        lay.addWidget(self.mfu_label)
        lay.addWidget(self.tabs, 1)

        self.critpath = StepBreakdown(runner, state)  # the breakdown when the range is a step
        state.timeSelectionChanged.connect(lambda _r: self.refresh())
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.timeSelectionChanged.connect(lambda _r: self.refresh_mfu())
        state.currentTraceChanged.connect(lambda _t: self.refresh_mfu())
        state.selectionChanged.connect(lambda _s: self.refresh_mfu())

    def refresh_mfu(self) -> None:
        """The MFU of the selected step marker, else of the whole steps inside the range."""
        tracks = self.state.current
        sel, rng = self.state.selection, self.state.time_selection
        marker = None
        if tracks is not None and sel is not None and sel.table == "cpu_slices" and self.state.trace(sel.trace) is tracks:
            c = tracks.trace.cpu_slices
            if 0 <= sel.row < len(c) and analysis.steps.is_step_marker_name(str(c["name"].iloc[sel.row])):
                marker = (str(c["name"].iloc[sel.row]), int(c["rank"].iloc[sel.row]))
        if self.mfu_requests is None or tracks is None or (marker is None and rng is None):
            self.mfu_label.hide()
            return
        res = self.mfu_requests.get(tracks, self.refresh_mfu)
        text = "MFU: computing…" if res is None else range_mfu_text(res, marker, rng, tracks.offset_ns, tracks.trace)
        self.mfu_label.setText(text)
        self.mfu_label.setVisible(bool(text))

    def _ensure_tables(self) -> None:
        """The tables, made on first use (their model module imports pandas: not at start-up)."""
        if self.models:
            return

        self.columns = _columns()
        for key in self.columns:
            model = TableModel()
            view = TableView(model, sortable=True)
            self.models[key] = model
            self.views[key] = view
            self.tabs.addTab(view, TAB_TITLES[key])
        self.tabs.addTab(self.critpath, "Critical path")

    def refresh(self) -> None:
        rng = self.state.time_selection
        tracks = self.state.current
        if rng is None or tracks is None:
            self.runner.cancel("range")
            self.critpath.refresh(None, 0, 0)
            self.summary = None
            self.title.setText(HINT)
            for key, model in self.models.items():
                if model.frame is not None:
                    model.set_frame(model.frame.iloc[0:0], self.columns[key])
            return

        self._ensure_tables()
        trace = tracks.trace
        t0 = int(round(rng[0])) + tracks.offset_ns
        t1 = int(round(rng[1])) + tracks.offset_ns
        label = tracks.label
        clock = tracks.clock
        info = tracks.sol_info
        sol = info.result.table if info is not None and info.result is not None else None
        self.title.setText(f"<b>{format_duration(rng[1] - rng[0])}</b> · {format_time(rng[0])} – {format_time(rng[1])} {html.escape(tracks.clock)} · {label} · computing…")
        self.runner.run("range", lambda: analysis.timerange.range_summary(trace, t0, t1, sol), lambda s: self._show(s, rng, label, clock), self._failed)
        self.critpath.refresh(tracks, t0, t1)

    def _show(self, summary: Any, rng: tuple[float, float], label: str, clock: str = "") -> None:

        self.summary = summary
        n = len(summary.kernels)
        self.title.setText(f"<b>{format_duration(rng[1] - rng[0])}</b> · {format_time(rng[0])} – {format_time(rng[1])} {html.escape(clock)} · "
                           f"{label} · {int(summary.kernels['count'].sum()):,} kernels of {n:,} names"
                           + (f"<br><span style='color:#a04000'>{summary.tensor.sentence()}</span>"
                              if summary.tensor is not None and summary.tensor.sentence() else ""))
        copies = summary.copies.copy()
        copies["bandwidth"] = [f"{g:.1f} GB/s" if np.isfinite(g) else "—" for g in copies["bandwidth_gbs"].to_numpy(dtype=float)]
        frames = {"kernels": summary.kernels, "streams": summary.streams, "copies": copies, "nvtx": summary.nvtx}
        if summary.gpu_metrics is not None:  # sampled metrics (nsys --gpu-metrics-devices)
            frames["gpu_metrics"] = summary.gpu_metrics
        for key, df in frames.items():
            self.models[key].set_frame(df, self.columns[key])
            view = self.views[key]
            view.resizeColumnsToContents()
            # a long kernel name must not push the numbers off-screen: it is elided instead
            first = view.horizontalHeader()
            first.resizeSection(0, min(first.sectionSize(0), max(240, int(view.viewport().width() * 0.45))))

    def _failed(self, message: str) -> None:
        self.summary = None
        self.title.setText(f"Range: {message.splitlines()[0]}")
