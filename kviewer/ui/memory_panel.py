"""The Memory dock: per device the peak of allocated (and reserved) memory, and the details of the
peak: the allocations live at that moment, largest first, with the op that made each one.

The numbers are :func:`kviewer.analysis.memory.memory_summary` (the same as ``kviewer memory``),
computed off the GUI thread. Choosing a row selects the allocation's lifetime up to the peak as a
time range and zooms the timeline to it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from kviewer import analysis, session, ui
from kviewer.session.format import format_bytes, format_time
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.dock_gate import DockGate
from kviewer.ui.viewstate import ViewState

if TYPE_CHECKING:
    import kviewer.analysis.memory
    import kviewer.session.table_data
    import kviewer.ui.table_model


class MemoryPanel(QWidget):
    def __init__(self, state: ViewState, runner: BackgroundRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = runner
        self.result: Any = None
        self.rows: Any = None
        self._offset = 0
        self._clock = ""
        self.status = QLabel("")
        self.status.setObjectName("memoryStatus")
        self.status.setWordWrap(True)
        self.model: Any = None
        self.view: Any = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.status)
        self._lay = lay
        self.gate = DockGate(self.refresh)
        """computes only while the dock is on screen (the window tells it the dock)"""
        self.shown: tuple[int, int, int] | None = None
        """(trace key, id of its trace, display offset) filled for"""
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.tracesChanged.connect(self.refresh)

    def refresh(self) -> None:
        """Fill for the current trace, when on screen and it changed since the last fill."""
        tracks = self.state.current
        if tracks is not None:
            want = (tracks.key, id(tracks.trace), tracks.offset_ns)
            if want == self.shown or not self.gate.on_screen():
                return
            self.shown = want
        else:
            self.shown = None
        if tracks is None or not len(tracks.trace.memory):
            self.runner.cancel("memory")
            self.result = None
            self.status.setText("No memory events in this trace (PyTorch: profile_memory=True; "
                                "Nsight Systems: --cuda-memory-usage=true)." if tracks is not None else "")
            if self.model is not None:
                self._show_rows([])
            return

        trace = tracks.trace
        offset = tracks.offset_ns
        self._clock = tracks.clock
        self.status.setText("computing…")
        self.runner.run("memory", lambda: analysis.memory.memory_summary(trace), lambda res: self._show(res, offset), self._failed)

    def _ensure_table(self) -> None:
        if self.model is not None:
            return

        self.cols = (
            session.table_data.Col("device", "Device", "text"),
            session.table_data.Col("bytes", "Size", "bytes"),
            session.table_data.Col("op", "Made by", "text", header_tip="the op around the allocation (allocation helpers such as aten::empty skipped)"),
            session.table_data.Col("at", "Allocated at", "instant", header_tip="when it was allocated"),
            session.table_data.Col("age", "Live before the peak", "time"),
        )
        self.model = ui.table_model.TableModel()
        self.view = ui.table_model.TableView(self.model, sortable=True)
        self.view.clicked.connect(self._on_row)
        self.view.activated.connect(self._on_row)
        self._lay.addWidget(self.view, 1)

    def _show(self, res: Any, offset: int) -> None:
        self.result = res
        self._offset = offset
        lines = []
        rows = []
        for d in res.devices:
            where = f"GPU {d.device}" if d.device >= 0 else "host"
            if d.peak_allocated_bytes is None:
                lines.append(f"{where}: {d.events:,} allocator events; the profiler reports no totals, so the peak is unknown")
                continue
            reserved = f", reserved peak {format_bytes(d.peak_reserved_bytes)}" if d.peak_reserved_bytes is not None else ""
            lines.append(f"{where}: allocated peak {format_bytes(d.peak_allocated_bytes)} at "
                         f"{format_time((d.peak_at_ns or 0) - offset)}{reserved}; live at the peak (largest first):")
            for a in d.live_at_peak:
                rows.append({"device": where, "bytes": a.bytes, "op": a.op or "—", "at": a.allocated_at_ns - offset,
                             "age": (d.peak_at_ns or 0) - a.allocated_at_ns, "start": a.allocated_at_ns, "end": d.peak_at_ns})
        self.status.setText("\n".join(lines))
        self._show_rows(rows)

    def _show_rows(self, rows: list[dict[str, Any]]) -> None:
        import pandas as pd

        self._ensure_table()
        df = pd.DataFrame(rows, columns=["device", "bytes", "op", "at", "age", "start", "end"])
        self.rows = df
        clock = self._clock
        cols = tuple(replace(c, header_tip=f"when it was allocated, time {clock}") if c.key == "at" and clock else c for c in self.cols)
        self.model.set_frame(df, cols)
        self.view.resizeColumnsToContents()

    def _failed(self, message: str) -> None:
        self.status.setText(message.splitlines()[0])

    def _on_row(self, index: Any) -> None:
        if self.rows is None or not index.isValid():
            return
        r = self.rows.iloc[self.model.source_row(index.row())]
        t0 = float(r["start"] - self._offset)
        t1 = float(r["end"] - self._offset)
        pad = max((t1 - t0) * 0.1, 1000.0)
        self.state.set_range(t0 - pad, t1 + pad)
        self.state.set_time_selection((t0, t1))
