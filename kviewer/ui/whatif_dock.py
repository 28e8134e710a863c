"""The What-if dock: tick an optimisation, see the projected step times (the numbers of
``kviewer whatif``), and draw the critical path over the timeline.

The graph, the steps, their critical paths and the fusion candidates of the current trace are
computed once off the GUI thread; each change of the ticks projects again off the GUI thread
(newest request winning) with :meth:`kviewer.analysis.whatif.WhatIfModel.project`, the function
the CLI calls. Choosing a step selects its window as the time range, which the Range dock then
breaks down (its "Critical path" tab).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from kviewer import analysis
from kviewer.errors import AnalysisError
from kviewer.session.format import format_duration, format_signed_pct
from kviewer.session.open_trace import Failed
from kviewer.session.table_data import Col
from kviewer.session.tracks import TraceTracks
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.critpath_overlay import CriticalPathOverlay, critpath_requests, path_bands
from kviewer.ui.dock_gate import DockGate
from kviewer.ui.table_model import TableModel, TableView
from kviewer.ui.viewstate import ViewState

if TYPE_CHECKING:
    import kviewer.analysis.whatif

#: kinds offered a speed-of-light target
SOL_KINDS = ("gemm", "attention", "elementwise", "norm")


@dataclass
class _Base:
    model: Any
    paths: Any
    fusion: Any
    fusion_error: str
    bands: Any
    """the paths laid on the trace's lanes (:func:`~kviewer.ui.critpath_overlay.path_bands`)"""


def _base(trace: Any, device: str | None, paths: Any, lane_of: dict[str, Any], sol: Any = None, fusion: Any = None) -> _Base:
    """The model of ``trace`` from its critical paths, and the paths on its lanes (on a worker);
    ``sol`` and ``fusion``: the trace's speed of light and fusion candidates when the window has
    them (the Roofline and Fusion docks' own, for the GPU chosen there), else computed."""
    model = analysis.whatif.whatif_model(trace, device=device, paths=paths, sol=sol, fusion=fusion)
    try:
        fusion, error = model.fusion_table(), ""
    except AnalysisError as exc:
        fusion, error = None, str(exc)
    return _Base(model, paths, fusion, error, path_bands(paths, lane_of))


class WhatIfPanel(QWidget):
    def __init__(self, state: ViewState, runner: BackgroundRunner, timeline: Any, compare: Callable[[int, int], None] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.compare = compare
        """``CompareMode.start(a_key, b_key)``: lays the projected timeline beside the measured one"""
        self.projected_tracks: Any = None
        self.state = state
        self.runner = runner
        self.timeline = timeline
        self.overlay = CriticalPathOverlay(timeline)
        self.base: _Base | None = None
        self.projection: Any = None
        """the :class:`~kviewer.analysis.whatif.Projection` shown (None before one)"""
        self._tracks: Any = None
        self.paths = critpath_requests(runner, state)
        """the trace's critical paths, kept by its owner (asked for here, shared with the Range dock)"""
        self._base_for: tuple[int, int, int] | None = None
        """the shown key a base was asked for"""
        self.show_path = QCheckBox("Show the critical path")
        self.show_path.setToolTip("Draw each step's critical path along the lanes it crosses, coloured by what it spends time on")
        self.show_path.setObjectName("whatifShowPath")
        self.show_path.toggled.connect(self._path_toggled)
        self.beside = QPushButton("Lay beside the measured")
        self.beside.setObjectName("whatifBeside")
        self.beside.setToolTip("Open the trace as the ticked changes would run it and compare it with the measured trace")
        self.beside.clicked.connect(self.lay_beside)
        self.beside.setEnabled(False)
        self.graphs = QCheckBox("CUDA graphs (each step one graph launch)")
        self.no_sync = QCheckBox("Remove host syncs")
        self.channels_last = QCheckBox("Convolutions in channels_last (no layout transforms)")
        self.channels_last.setToolTip("The layout transforms a library runs around each convolution (cuDNN's nchwToNhwc / "
                                      "nhwcToNchw) go away, as with tensors already in channels_last; an op eager PyTorch runs only "
                                      "in NCHW (GroupNorm, InstanceNorm, pixel_shuffle) adds its copies into NCHW and back for the convolution after it, "
                                      "at the rate PyTorch's strided copies ran on an H100")
        self.sol: dict[str, QSpinBox] = {}
        sol_box = QGridLayout()
        for i, kind in enumerate(SOL_KINDS):
            spin = QSpinBox()
            spin.setRange(0, 100)
            spin.setSuffix(" % SOL")
            spin.setSpecialValueText("as measured")
            spin.setToolTip(f"{kind} kernels run at this share of their speed of light (never slower than measured)")
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(lambda _v: self.project())
            self.sol[kind] = spin
            sol_box.addWidget(QLabel(kind), i, 0)
            sol_box.addWidget(spin, i, 1)
        self.fusion = QListWidget()
        self.fusion.setObjectName("whatifFusion")
        self.fusion.setMinimumWidth(120)
        self.fusion.itemChanged.connect(lambda _i: self.project())
        for box in (self.graphs, self.no_sync, self.channels_last):
            box.toggled.connect(lambda _c: self.project())
        changes = QGroupBox("Changes")
        cl = QVBoxLayout(changes)
        cl.addWidget(self.graphs)
        cl.addWidget(self.no_sync)
        cl.addWidget(self.channels_last)
        cl.addLayout(sol_box)
        cl.addWidget(QLabel("Fuse (fusion candidates, as kviewer fusion ranks them):"))
        cl.addWidget(self.fusion, 1)
        self.result = QLabel("")
        self.result.setObjectName("whatifResult")
        self.result.setWordWrap(True)
        self.result.setTextFormat(Qt.TextFormat.RichText)
        self.model: Any = None
        self.view: Any = None
        head = QHBoxLayout()
        head.addWidget(self.show_path, 1)
        head.addWidget(self.beside)
        # changes at the left, the steps at the right, in a scroll area: the dock shares the
        # bottom area and must not hold the window taller than the other docks do
        inner = QWidget()
        body = QHBoxLayout(inner)
        body.setContentsMargins(0, 0, 0, 0)
        left = QVBoxLayout()
        left.addLayout(head)
        left.addWidget(changes, 1)
        right = QVBoxLayout()
        right.addWidget(self.result)
        body.addLayout(left, 1)
        body.addLayout(right, 1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(inner)
        scroll.setMinimumHeight(40)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(scroll)
        self._lay = right
        self.gate = DockGate(self.refresh)
        """computes only while the dock is on screen (the window tells it the dock)"""
        self.shown: tuple[int, int, int] | None = None
        """(trace key, id of its trace, id of its speed of light) the base was built for"""
        state.currentTraceChanged.connect(lambda _t: self.refresh())
        state.tracesChanged.connect(self.refresh)

    # -----------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Build the base of the current trace, when on screen and the trace or its speed of
        light (a GPU chosen, counters attached) changed since the last build."""
        tracks = self.state.current
        want = None if tracks is None else (tracks.key, id(tracks.trace), id(tracks.sol_info))
        if want == self.shown:
            return
        if tracks is not self._tracks or want is None or self.shown is None or want[:2] != self.shown[:2]:
            # another trace (or another trace object): the path and numbers shown are not its own
            self._tracks = tracks
            self.shown = self._base_for = None
            self.base = None
            self.projection = None
            self.overlay.clear()
            self.timeline.repaint_overlay()
            self.fusion.clear()
            self.result.setText("")
        if tracks is None:
            self.runner.cancel("whatif-base")
            return
        if not self.gate.on_screen():
            return
        self.shown = want
        self.result.setText("building the dependency graph…")
        self._build()

    def _build(self) -> None:
        """Ask for the base once the trace's critical paths are known (called again when they are)."""
        tracks, shown = self.state.current, self.shown
        if tracks is None or shown is None or tracks is not self._tracks or self._base_for == shown:
            return
        got = self.paths.request(tracks, self._build)
        if got is None:
            return  # the critical paths are being computed: called again
        if isinstance(got, Failed):
            self._failed(got.problem)
            return
        self._base_for = shown
        trace, paths = tracks.trace, got.result
        info = tracks.sol_info  # a GPU chosen in the Roofline dock (counters attached are in tracks.trace)
        device = info.device if info is not None else None
        sol = info.result if info is not None else None
        ready = self.state.document.fusion(tracks.key)  # dropped when the SOL changes: always this SOL's
        fusion = ready.candidates if ready is not None else None
        lane_of = dict(tracks.lane_of)
        self.runner.run("whatif-base", lambda: _base(trace, device, paths, lane_of, sol, fusion),
                        lambda b: self._base_ready(tracks, b), self._failed)

    def _base_ready(self, tracks: Any, base: _Base) -> None:
        if tracks is not self.state.current:
            return
        self.base = base
        self.fusion.blockSignals(True)
        self.fusion.clear()
        if base.fusion is not None:
            for r in base.fusion.itertuples(index=False):
                item = QListWidgetItem(f"#{r.rank} {r.chain} · saves {format_duration(r.savings_ns)} · {r.remedy}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(Qt.CheckState.Unchecked)
                item.setData(Qt.ItemDataRole.UserRole, int(r.rank))
                self.fusion.addItem(item)
        else:
            self.fusion.addItem(QListWidgetItem(f"no fusion: {base.fusion_error}"))
        self.fusion.blockSignals(False)
        if self.show_path.isChecked():
            self._path_toggled(True)
        self.project()

    def _failed(self, message: str) -> None:
        self.result.setText(message.splitlines()[0])

    def changes(self) -> Any:
        """The ticked changes as :class:`~kviewer.analysis.whatif.Changes`."""
        ranks = tuple(int(self.fusion.item(i).data(Qt.ItemDataRole.UserRole)) for i in range(self.fusion.count())
                      if self.fusion.item(i).checkState() == Qt.CheckState.Checked)
        sol = tuple((k, float(s.value())) for k, s in self.sol.items() if s.value() > 0)
        return analysis.whatif.Changes(fuse=ranks or None, cuda_graphs=self.graphs.isChecked(), sol=sol,
                                       no_sync=() if self.no_sync.isChecked() else None, channels_last=self.channels_last.isChecked())

    def project(self) -> None:
        base = self.base
        if base is None:
            return
        changes = self.changes()
        tracks = self._tracks
        self.result.setText(f"projecting {changes.label()}…")
        self.runner.run("whatif", lambda: base.model.project(changes), lambda p: self._show(tracks, p), self._failed)

    def _show(self, tracks: Any, projection: Any) -> None:
        if tracks is not self.state.current:
            return
        self.projection = projection
        self.beside.setEnabled(True)
        self._ensure_table()
        import pandas as pd

        rows = []
        bounds = self.base.model.measured_bounds if self.base is not None else []
        for (lo, hi), s in zip(bounds, projection.steps):
            rows.append({"step": s.name, "measured_ns": s.measured_ns, "projected_ns": s.projected_ns,
                         "change_pct": (s.projected_ns - s.measured_ns) / s.measured_ns * 100.0 if s.measured_ns > 0 else float("nan"),
                         "start": lo, "end": hi})
        self.frame = pd.DataFrame(rows)
        self.model.set_frame(self.frame, self.cols)
        self.view.resizeColumnsToContents()
        m, p = projection.median_measured_ns, projection.median_projected_ns
        notes = "<br>".join(f"{n['change']}: {n['what']}" for n in projection.notes)
        pct = f" ({format_signed_pct((p - m) / m * 100)})" if m > 0 else ""
        self.result.setText(f"median step: measured <b>{format_duration(m)}</b> → projected <b>{format_duration(p)}</b>{pct}"
                            + (f"<br><small>{notes}</small>" if notes else ""))

    def _ensure_table(self) -> None:
        if self.model is not None:
            return

        self.cols = (
            Col("step", "Step", "text"),
            Col("measured_ns", "Measured", "time", header_tip="previous step's completion to this step's completion"),
            Col("projected_ns", "Projected", "time", header_tip="the same, in the replay with the ticked changes"),
            Col("change_pct", "Change", "pct"),
        )
        self.model = TableModel()
        self.view = TableView(self.model, sortable=False)
        self.view.clicked.connect(self._on_row)
        self.view.activated.connect(self._on_row)
        self._lay.addWidget(self.view, 1)

    def _on_row(self, index: Any) -> None:
        tracks = self._tracks
        if tracks is None or not index.isValid():
            return
        r = self.frame.iloc[self.model.source_row(index.row())]
        t0 = float(r["start"] - tracks.offset_ns)
        t1 = float(r["end"] - tracks.offset_ns)
        pad = (t1 - t0) * 0.05
        self.state.set_range(t0 - pad, t1 + pad)
        self.state.set_time_selection((t0, t1))

    def lay_beside(self) -> None:
        """Open the current projection as a trace of its own and compare it with the measured one."""
        base, proj, tracks = self.base, self.projection, self._tracks
        if base is None or proj is None or tracks is None:
            return

        label = f"{tracks.label} (projected: {proj.changes.label()})"
        self.result.setText(self.result.text() + "<br>laying out the projected timeline…")
        self.runner.run("whatif-beside", lambda: TraceTracks.build(analysis.whatif.projected_trace(base.model, proj), label),
                        lambda t: self._beside_ready(tracks, t), self._failed)

    def _beside_ready(self, measured: Any, projected: Any) -> None:
        if measured is not self.state.current and measured not in self.state.traces:
            return
        self.projected_tracks = projected
        self.state.add_trace(projected)
        if self.compare is not None:
            self.compare(measured.key, projected.key)

    def _path_toggled(self, on: bool) -> None:
        if on and self.base is not None and self._tracks is not None:
            self.overlay.set_path(self._tracks.key, self.base.bands)
            self.timeline.critical_path = self.overlay
        else:
            self.timeline.critical_path = None
        self.timeline.repaint_overlay()
