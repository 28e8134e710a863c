"""The Idle gaps dock: gaps on each stream longer than a threshold, biggest first, with what the
host was doing (the enclosing NVTX range, the runtime call before the next launch).

The list is :func:`kviewer.analysis.activity.idle_gaps`, computed off the GUI thread; the timeline
shades the same gaps. Choosing a row selects the gap as a range and zooms the timeline to it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtWidgets import QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from kviewer import analysis, session, ui
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.dock_gate import DockGate
from kviewer.ui.viewstate import ViewState

if TYPE_CHECKING:
    import kviewer.analysis.activity
    import kviewer.session.table_data
    import kviewer.ui.table_model


class IdlePanel(QWidget):
    def __init__(self, state: ViewState, runner: BackgroundRunner, on_threshold: Callable[[float], None],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = runner
        self.on_threshold = on_threshold
        self.gaps: Any = None
        """the DataFrame listed (None before a trace)"""
        self._offset = 0
        self.threshold = QDoubleSpinBox()
        self.threshold.setObjectName("idleThreshold")
        self.threshold.setRange(0.1, 1e7)
        self.threshold.setDecimals(1)
        self.threshold.setSuffix(" µs")
        self.threshold.setKeyboardTracking(False)
        self.threshold.setToolTip("List and shade gaps on a stream at least this long")
        self.status = QLabel("")
        head = QHBoxLayout()
        head.addWidget(QLabel("Gaps on a stream of at least"))
        head.addWidget(self.threshold)
        head.addWidget(self.status, 1)
        self.model: Any = None
        self.view: Any = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(head)
        self._lay = lay
        self._init_threshold = False
        self.gate = DockGate(self.refresh)
        """computes only while the dock is on screen (the window tells it the dock)"""
        self.shown: tuple[int, int, int, int] | None = None
        """(trace key, id of its trace, display offset, threshold in ns) filled for"""
        self.threshold.valueChanged.connect(self._threshold_changed)
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.tracesChanged.connect(self.refresh)

    def _threshold_changed(self, value_us: float) -> None:
        self.on_threshold(value_us * 1e3)
        self.refresh()

    def refresh(self) -> None:
        """List the current trace's gaps, when on screen and the trace or threshold changed since."""
        tracks = self.state.current
        if tracks is None:
            self.shown = None
            self.runner.cancel("idle")
            self.gaps = None
            self.status.setText("")
            if self.model is not None and self.model.frame is not None:
                self.model.set_frame(self.model.frame.iloc[0:0], self.cols)
            return

        if not self._init_threshold:
            self._init_threshold = True
            self.threshold.blockSignals(True)
            self.threshold.setValue(analysis.activity.IDLE_GAP_NS / 1e3)
            self.threshold.blockSignals(False)
        trace = tracks.trace
        min_ns = int(round(self.threshold.value() * 1e3))
        offset = tracks.offset_ns
        want = (tracks.key, id(trace), offset, min_ns)
        if want == self.shown or not self.gate.on_screen():
            return
        self.shown = want
        key = tracks.key
        clock = tracks.clock
        self.status.setText("computing…")
        self.runner.run("idle", lambda: analysis.activity.idle_gaps(trace, min_ns), lambda df: self._show(df, offset, key, clock), self._failed)

    def _ensure_table(self) -> None:
        if self.model is not None:
            return

        cols = (
            session.table_data.Col("where", "Stream", "text"),
            session.table_data.Col("start_display", "Start", "instant", header_tip="when the stream went idle"),
            session.table_data.Col("gap_ns", "Gap", "time"),
            session.table_data.Col("nvtx", "NVTX range (host)", "text", header_tip="the innermost NVTX / user range open when the gap began: on the "
                "launching thread, else on another thread of its process (PyTorch's autograd thread launches the backward)"),
            session.table_data.Col("range_thread", "Range on thread", "text", header_tip="the thread the range is on"),
            session.table_data.Col("call_before", "Call before next launch", "text", header_tip="the runtime call on that thread just before the launch that ended the gap"),
            session.table_data.Col("next_name", "Next work", "text"),
        )
        self.cols = cols
        self.model = ui.table_model.TableModel()
        self.view = ui.table_model.TableView(self.model, sortable=True)
        self.view.clicked.connect(self._on_row)
        self.view.activated.connect(self._on_row)
        self._lay.addWidget(self.view, 1)

    def _show(self, df: Any, offset: int, key: int, clock: str = "") -> None:
        self._ensure_table()
        # the header says which clock the start is on (the timeline's, SQL's, the CLI's)
        cols = tuple(replace(c, header_tip=f"when the stream went idle, time {clock}") if c.key == "start_display" else c for c in self.cols)
        df = df.copy()
        df["where"] = [f"GPU {d} · stream {s}" for d, s in zip(df["device"], df["stream"])]
        df["start_display"] = df["start"] - offset
        df["range_thread"] = [f"tid {t}" if t >= 0 else "—" for t in df["nvtx_tid"]]
        for col in ("nvtx", "call_before"):
            df[col] = df[col].replace("", "—")
        self.gaps = df
        self._offset = offset
        self.model.set_frame(df, cols)
        self.view.resizeColumnsToContents()
        hh = self.view.horizontalHeader()
        for c in (self.model.column_index("nvtx"), self.model.column_index("next_name")):  # long names are elided
            hh.resizeSection(c, min(hh.sectionSize(c), 360))
        n = len(df)
        self.status.setText(f"{n:,} gap{'s' if n != 1 else ''}" + (" (the 500 biggest)" if n >= 500 else "") + ", biggest first")

    def _failed(self, message: str) -> None:
        self.status.setText(message.splitlines()[0])

    def _on_row(self, index: Any) -> None:
        if self.gaps is None or not index.isValid():
            return
        r = self.gaps.iloc[self.model.source_row(index.row())]
        t0 = float(r["start"] - self._offset)
        t1 = float(r["end"] - self._offset)
        pad = (t1 - t0) * 0.25
        self.state.set_range(t0 - pad, t1 + pad)
        self.state.set_time_selection((t0, t1))
