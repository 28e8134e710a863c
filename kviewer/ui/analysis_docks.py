"""The Roofline and Fusion candidates docks of the main window, linked to the shared view state.

Both docks show the current trace (:attr:`ViewState.current`). The window paints a trace first
and analyses it after: its speed of light comes from the analysis cache with the load, or is
computed on the background runner once the trace is on screen (:meth:`AnalysisDocks.analyse`;
the docks say "Computing the speed of light…" meanwhile). The roofline reuses it
(:attr:`TraceTracks.sol_info`, which also colours the kernels); fusion candidates are computed from
it on the background runner and kept with the open document. A dock fills itself only while it is
visible, so a big trace costs nothing in a closed tab.

Selection flows both ways through the view state, never from view to view:

- clicking points in the roofline highlights those kernels (timeline and table dim the others)
  and selects the longest one, revealing it on the timeline;
- a kernel selected anywhere (table row, timeline bar) and the highlighted kernels (a filter, a
  table group, a fusion candidate) are ringed in the roofline;
- choosing a fusion candidate highlights every kernel of every instance and frames its first
  instance on the timeline.

When the trace's GPU is not recognised the roofline dock says why and its device picker asks for
the GPU; the choice recomputes the speed of light for that trace, recolours its kernel bars by
bound and fills both docks.

The panel widgets that need pandas (the roofline, the fusion table) are created on the first
trace, so the window still appears without importing pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QVBoxLayout,
    QWidget,
)

from kviewer import analysis, session, ui
from kviewer.errors import AnalysisError
from kviewer.session.analyses import SolInfo, drop_uncoloured_warning, note_uncoloured
from kviewer.session.open_trace import FUSION, SOL, Failed, Pending, Ready, run_analysis
from kviewer.ui.dock_gate import DockGate
from kviewer.ui.viewstate import PICK, Selection, ViewState

if TYPE_CHECKING:
    import kviewer.analysis.devices
    import kviewer.session.analysis_cache
    import kviewer.ui.fusion_panel
    import kviewer.ui.paint_order
    import kviewer.ui.roofline
    from kviewer.analysis.fusion import FusionResult
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.background import BackgroundRunner
    from kviewer.ui.fusion_panel import FusionPanel
    from kviewer.ui.roofline import RooflineWidget

#: rings drawn in the roofline for a highlight (a broad filter would otherwise ring everything)
MAX_RINGS = 5000
_MUTED = "color:#666; padding:6px;"
_WARN = "color:#9a4b00; padding:2px 4px;"


def _no_sol_text(tracks: TraceTracks) -> str:
    """Why a trace has no speed of light: no kernels, or none computed for this timeline (a
    projected what-if timeline laid beside its measured trace: its kernels run at estimated times)."""
    n = len(tracks.trace.kernels)
    if not n:
        return f"{tracks.label} has no GPU kernels."
    return f"No speed of light for {tracks.label}: it is not computed for this timeline ({n:,} kernels)."

class RooflinePanel(QWidget):
    """The roofline of one trace, with a GPU picker above it.

    Signals
    -------
    deviceChosen(str)
        the device id (``devices.toml`` key) the user picked for the shown trace.
    """

    deviceChosen = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("rooflinePanel")
        self.device_box = QComboBox()
        self.device_box.setObjectName("rooflineDevice")
        self.device_box.setToolTip("The GPU whose peak rates draw the roofs and bound each kernel")
        self.device_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device_box.setMinimumContentsLength(18)
        self.device_box.activated.connect(self._on_activated)
        self.message = QLabel()
        self.message.setObjectName("rooflineMessage")
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.placeholder = QLabel("Open a trace to see its kernels against the GPU's roofline.")
        self.placeholder.setWordWrap(True)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setStyleSheet(_MUTED)
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 2, 4, 2)
        bar.addWidget(QLabel("GPU:"))
        bar.addWidget(self.device_box, 1)
        self.bar = QWidget()
        self.bar.setLayout(bar)
        self.bar.hide()
        self.message.hide()
        self.roofline: RooflineWidget | None = None
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(0, 0, 0, 0)
        self.layout_.setSpacing(0)
        self.layout_.addWidget(self.bar)
        self.layout_.addWidget(self.message)
        self.layout_.addWidget(self.placeholder, 1)
        self.shown: tuple[int, int] | None = None
        """(trace key, id of its SolInfo) on display"""

    def ensure_widgets(self) -> ui.roofline.RooflineWidget:
        """Create the roofline and fill the device list (imports pandas: first trace only)."""
        if self.roofline is None:
            self.roofline = ui.roofline.RooflineWidget()
            self.roofline.setObjectName("roofline")
            # a dock is narrow and tall: a small legend in one column (below the plot, never over its points)
            self.roofline.legend.setLabelTextSize("7pt")
            self.roofline.legend.setColumnCount(1)
            self.roofline.hide()
            self.layout_.addWidget(self.roofline, 1)
            self.device_box.addItem("Choose the GPU…", None)
            for spec in sorted(analysis.devices.load_devices().values(), key=lambda s: (s.vendor, s.name)):
                self.device_box.addItem(spec.name, spec.id)
        return self.roofline

    def clear(self, text: str) -> None:
        self.shown = None
        self.bar.hide()
        self.message.hide()
        if self.roofline is not None:
            self.roofline.hide()
        self.placeholder.setText(text)
        self.placeholder.show()

    def show_busy(self, text: str) -> None:
        self.message.setStyleSheet(_MUTED)
        self.message.setText(text)
        self.message.show()

    def show_trace(self, tracks: TraceTracks, info: SolInfo | None, computing: bool = False) -> None:
        """Show the SOL of this trace, or why there is none (with the picker to fix it), or that
        it is being computed."""

        roofline = self.ensure_widgets()
        if info is None and computing:
            self.clear(f"Computing the speed of light of {tracks.label}…")
            return
        self.shown = (tracks.key, id(info))
        if info is None:
            self.clear(_no_sol_text(tracks))
            return
        self.placeholder.hide()
        self.bar.show()
        if not info.ok:
            self.device_box.setCurrentIndex(0)
            self.message.setStyleSheet(_WARN)
            self.message.setText(f"⚠ {info.problem}. Choose the GPU above to draw its roofline and colour the kernels by bound.")
            self.message.show()
            roofline.hide()
            self.placeholder.setText("")
            self.placeholder.show()  # takes the space below the message
            return
        assert info.sol is not None
        i = self.device_box.findData(info.spec.id) if info.spec is not None else -1
        self.device_box.setCurrentIndex(max(i, 0))
        self.message.setVisible(info.device is not None)
        if info.device is not None:
            self.message.setStyleSheet(_MUTED)
            self.message.setText("GPU chosen by you (the trace does not say which one ran it).")

        roofline.set_data(info.sol, info.spec, ui.roofline.counter_marks(tracks.trace.kernels))
        bad = info.result.warnings() if info.result is not None else {}
        if bad:
            why = ", ".join(f"{n} {r.replace('_', ' ')}" for r, n in sorted(bad.items()))
            self.message.setStyleSheet(_WARN)
            self.message.setText(f"⚠ {sum(bad.values()):,} kernel(s) exceed peak: model or counter error; not plotted ({why}).")
            self.message.show()
        roofline.set_title([tracks.label] + ([info.spec.name] if info.spec is not None else []))
        roofline.show()

    def _on_activated(self, index: int) -> None:
        device = self.device_box.itemData(index)
        if device:
            self.deviceChosen.emit(str(device))


class FusionDockPanel(QWidget):
    """The fusion candidates table of one trace, with a line saying what it shows."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fusionDockPanel")
        self.message = QLabel("Open a trace to list kernels worth fusing.")
        self.message.setObjectName("fusionMessage")
        self.message.setWordWrap(True)
        self.message.setStyleSheet(_MUTED)
        self.panel: FusionPanel | None = None
        self.layout_ = QVBoxLayout(self)
        self.layout_.setContentsMargins(0, 0, 0, 0)
        self.layout_.setSpacing(0)
        self.layout_.addWidget(self.message)
        self.layout_.addStretch(1)
        self.shown: tuple[int, int] | None = None
        """(trace key, id of the candidates frame) on display"""

    def ensure_widgets(self) -> ui.fusion_panel.FusionPanel:
        if self.panel is None:
            self.panel = ui.fusion_panel.FusionPanel()
            self.panel.setObjectName("fusionPanel")
            self.panel.hide()
            self.layout_.insertWidget(1, self.panel, 1)
        return self.panel

    def show_message(self, text: str) -> None:
        self.shown = None
        self.message.setText(text)
        self.message.show()
        if self.panel is not None:
            self.panel.hide()

    def show_candidates(self, key: int, result: FusionResult) -> None:
        panel = self.ensure_widgets()
        df = result.candidates
        self.shown = (key, id(df))
        panel.set_candidates(df, kernel_ns=result.kernel_ns)
        self.message.hide()
        if not len(df):
            self.show_message("No fusion candidates: no chain of memory-bound kernels was found.")
            self.shown = (key, id(df))
            return
        panel.show()


class AnalysisDocks(QObject):
    """Creates the two docks in ``window`` (below the Details dock) and keeps them in step with
    the view state."""

    def __init__(self, window: QMainWindow, state: ViewState, runner: BackgroundRunner, below: QDockWidget) -> None:
        super().__init__(window)
        self.window = window
        self.state = state
        self.runner = runner
        self.roofline_panel = RooflinePanel()
        self.fusion_panel = FusionDockPanel()
        self.roofline_dock = self._dock("Roofline", "rooflineDock", self.roofline_panel)
        self.fusion_dock = self._dock("Fusion candidates", "fusionDock", self.fusion_panel)
        self.below = below
        self.document = state.document
        self._roofline_connected = False
        self._fusion_connected = False

        # paint first: a trace that arrives is drawn (timeline, table) before the docks fill; the
        # roofline of a reopened big trace, whose speed of light came from the cache, took 1-1.5 s
        # of the GUI thread inside add_trace, before the timeline's first paint (issue #29)
        self._refresh_soon = QTimer(self)
        self._refresh_soon.setSingleShot(True)
        self._refresh_soon.setInterval(0)
        self._refresh_soon.timeout.connect(self.refresh)
        state.currentTraceChanged.connect(lambda _t: self._refresh_soon.start())
        state.tracesChanged.connect(self._refresh_soon.start)
        state.selectionChanged.connect(lambda _s: self.sync_roofline_selection())
        state.highlightChanged.connect(self.sync_roofline_selection)
        self.roofline_panel.deviceChosen.connect(self.choose_device)
        # filled only while on screen (a dock in a hidden tab says isVisible() too)
        self.gates: dict[str, DockGate] = {}
        for dock in (self.roofline_dock, self.fusion_dock):
            self.gates[dock.objectName()] = gate = DockGate(self.refresh)
            gate.watch(dock)

    def arrange_default(self) -> None:
        """The first-run layout: Roofline below Details, Fusion candidates in a tab beside it.

        Only without a saved layout: tab groups made before ``restoreState`` leave stray tab bars
        behind in the window.
        """
        self.window.splitDockWidget(self.below, self.roofline_dock, Qt.Orientation.Vertical)
        self.window.tabifyDockWidget(self.roofline_dock, self.fusion_dock)
        self.roofline_dock.raise_()

    def _dock(self, title: str, name: str, widget: QWidget) -> QDockWidget:
        dock = QDockWidget(title, self.window)
        dock.setObjectName(name)  # saveState needs names
        dock.setWidget(widget)
        self.window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        return dock

    def on_screen(self, dock: QDockWidget) -> bool:
        """Whether the dock is shown (and, in a tab group, its tab is the current one)."""
        return self.gates[dock.objectName()].on_screen()

    # filling -----------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Fill the visible docks for the current trace (what is already shown is kept)."""
        tracks = self.state.current
        if tracks is None:
            self.roofline_panel.clear("Open a trace to see its kernels against the GPU's roofline.")
            self.fusion_panel.show_message("Open a trace to list kernels worth fusing.")
            return
        info = tracks.sol_info
        if self.on_screen(self.roofline_dock) and self.roofline_panel.shown != (tracks.key, id(info)):
            self.roofline_panel.show_trace(tracks, info, self.computing_sol(tracks.key))
            self._connect_roofline()
            self.sync_roofline_selection()
        if self.on_screen(self.fusion_dock):
            self._fill_fusion(tracks)

    def _fill_fusion(self, tracks: TraceTracks) -> None:
        info = tracks.sol_info
        key = tracks.key
        if info is None and self.computing_sol(key):
            self.fusion_panel.show_message(f"Computing the speed of light of {tracks.label}… (fusion candidates follow)")
            return
        if info is None:
            self.fusion_panel.show_message(_no_sol_text(tracks))
            return
        if not info.ok:
            self.fusion_panel.show_message("The GPU is not known: choose it in the Roofline dock to estimate fusion savings.")
            return
        state = self.document.analysis(key, FUSION)
        if isinstance(state, Failed):
            self.fusion_panel.show_message(f"Fusion candidates could not be computed: {state.problem}")
        elif isinstance(state, Ready):
            if self.fusion_panel.shown != (key, id(state.result.candidates)):
                self.fusion_panel.show_candidates(key, state.result)
                self._connect_fusion()
        else:
            self.fusion_panel.show_message(f"Looking for fusion candidates in {tracks.label}…")
            if not isinstance(state, Pending):
                self._compute_fusion(tracks)

    def _compute_fusion(self, tracks: TraceTracks) -> None:
        """Fusion candidates of the trace from its speed of light, on the runner (one channel per
        trace: a trace left before its candidates arrived still gets them)."""
        trace, info, key = tracks.trace, tracks.sol_info, tracks.key
        assert info is not None
        # the analysis cache describes the file as loaded, on its own GPU
        source = tracks.source if tracks.counters is None else None
        self.document.begin(key, FUSION)

        def done(state: Ready[FusionResult] | Failed | None) -> None:
            now = self.state.trace(key)
            if now is not None and now.sol_info is info and state is not None:  # not closed or recomputed meanwhile
                self.document.settle(key, FUSION, state)
                self.refresh()

        self.runner.run(f"fusion:{key}", lambda: run_analysis(lambda: session.analysis_cache.fusion_for_open(trace, info, source), trace.meta.path),
                        done, lambda message: done(_failed(message, trace.meta.path)))

    def _connect_roofline(self) -> None:
        if not self._roofline_connected and self.roofline_panel.roofline is not None:
            self.roofline_panel.roofline.selectionChanged.connect(self.select_kernels)
            self._roofline_connected = True

    def _connect_fusion(self) -> None:
        if not self._fusion_connected and self.fusion_panel.panel is not None:
            self.fusion_panel.panel.candidateSelected.connect(self.choose_candidate)
            self._fusion_connected = True

    # state -> roofline ------------------------------------------------------------------------
    def ringed_ids(self) -> list[int]:
        """Kernels of the shown trace to ring in the roofline: the selected one and the
        highlighted ones."""
        shown = self.roofline_panel.shown
        if shown is None:
            return []
        key = shown[0]
        ids: list[int] = []
        sel = self.state.selection
        if sel is not None and sel.trace == key and sel.table == "kernels":
            ids.append(sel.row)
        mask = self.state.highlight.get(key)
        if mask is not None and 0 < int(mask.sum()) < len(mask):
            ids.extend(np.flatnonzero(mask)[:MAX_RINGS].tolist())
        return list(dict.fromkeys(ids))  # the selected kernel is usually highlighted too

    def sync_roofline_selection(self) -> None:
        roofline = self.roofline_panel.roofline
        if roofline is not None and self.roofline_panel.shown is not None:
            roofline.set_selection(self.ringed_ids())

    # roofline / fusion -> state ---------------------------------------------------------------
    def select_kernels(self, ids: list[int], reveal: bool = True) -> None:
        """Highlight these kernels of the shown trace and select the longest of them."""
        shown = self.roofline_panel.shown
        tracks = self.state.trace(shown[0]) if shown is not None else None
        if tracks is None or not ids:
            return
        self._highlight_and_select(tracks, np.asarray(ids, dtype=np.int64), reveal)

    def _highlight_and_select(self, tracks: TraceTracks, ids: np.ndarray, reveal: bool, pick: int | None = None) -> None:
        n = len(tracks.trace.kernels)
        ids = ids[(ids >= 0) & (ids < n)]
        if not len(ids):
            return
        mask = np.zeros(n, dtype=bool)
        mask[ids] = True
        self.state.set_highlight({tracks.key: mask})
        if pick is None:
            dur = tracks.trace.kernels["dur"].to_numpy()[ids]
            pick = int(ids[int(np.argmax(dur))])
        self.state.set_selection(Selection(tracks.key, "kernels", pick), reveal=reveal)

    def choose_candidate(self, ids: list[int]) -> None:
        """A fusion candidate was chosen: highlight all its kernels, frame its first instance."""
        shown = self.fusion_panel.shown
        tracks = self.state.trace(shown[0]) if shown is not None else None
        if tracks is None:
            return
        if not ids:
            self.state.clear_highlight(PICK)
            return
        first = self._first_instance(tracks.key, ids)
        self._highlight_and_select(tracks, np.asarray(ids, dtype=np.int64), True, pick=first[0])
        k = tracks.trace.kernels
        s = float(k["start"].to_numpy()[first].min() - tracks.offset_ns)
        e = float(k["end"].to_numpy()[first].max() - tracks.offset_ns)
        pad = max((e - s) * 0.5, 1000.0)
        self.state.set_range(s - pad, e + pad)

    def _first_instance(self, key: int, ids: list[int]) -> list[int]:
        """The kernel ids of the first instance of the candidate whose kernels are ``ids``."""
        result = self.document.fusion(key)
        if result is not None:
            for instances in result.candidates["kernel_ids"]:
                if instances and instances[0] and int(instances[0][0]) == int(ids[0]):
                    return [int(i) for i in instances[0]]
        return [int(ids[0])]

    # paint first, analyse after ---------------------------------------------------------------
    def analyse(self, tracks: TraceTracks, after: QWidget) -> None:
        """A trace has just been shown without its speed of light (not in the analysis cache):
        compute it in the background; the docks say so meanwhile, and the bars are recoloured and
        the docks filled when it arrives. The window stays usable throughout. The computation starts
        once ``after`` (the timeline) has painted the trace (paint first:
        :func:`kviewer.ui.paint_order.after_next_paint`); it counts as being computed from now."""
        if tracks.sol_info is not None or not len(tracks.trace.kernels):
            return

        key, trace, source = tracks.key, tracks.trace, tracks.source
        self.document.begin(key, SOL)

        def current() -> TraceTracks | None:
            # not closed, not given counters or another GPU meanwhile
            now = self.state.trace(key)
            return now if now is not None and now.trace is trace and now.sol_info is None else None

        def done(info: SolInfo | None) -> None:
            if current() is None or info is None:
                return
            note_uncoloured(trace, info)
            self.document.set_sol(key, info)
            self.refresh()

        def failed(message: str) -> None:
            if current() is not None:
                info = SolInfo(None, f"{trace.meta.path}: speed of light not available: {message.splitlines()[0]}")
                note_uncoloured(trace, info)
                self.document.set_sol(key, info)
                self.refresh()

        def start() -> None:
            if current() is not None:
                self.runner.run(f"sol:{key}", lambda: session.analysis_cache.sol_for_open(trace, source), done, failed)

        ui.paint_order.after_next_paint(after, start)
        self.refresh()

    def computing_sol(self, key: int | None = None) -> bool:
        """Whether the speed of light of trace ``key`` (None: of any trace) is being computed."""
        keys = [key] if key is not None else [t.key for t in self.state.traces]
        return any(o is not None and o.pending(SOL) for o in map(self.document.get, keys))

    # device picker ----------------------------------------------------------------------------
    def choose_device(self, device: str) -> None:
        """Recompute the shown trace's speed of light on ``device`` (in the background)."""
        shown = self.roofline_panel.shown
        tracks = self.state.trace(shown[0]) if shown is not None else None
        if tracks is None:
            return
        key, trace = tracks.key, tracks.trace
        name = self.roofline_panel.device_box.currentText()
        self.roofline_panel.show_busy(f"Computing the speed of light on {name}…")

        def failed(message: str) -> None:
            self.roofline_panel.show_busy(f"⚠ {message}")
            opened = self.document.get(key)
            if opened is not None and opened.pending(SOL):  # the load-time SOL this choice superseded
                self.document.settle(key, SOL, _failed(message, trace.meta.path))
                self.refresh()

        # the channel of the trace's load-time SOL: a choice made while that runs supersedes it
        self.runner.run(f"sol:{key}", lambda: session.analyses.compute_sol(trace, device), lambda info: self.apply_sol(key, info), failed)

    def apply_sol(self, key: int, info: SolInfo) -> None:
        """Take a recomputed SOL for an open trace: recolour its bars, refill the docks."""
        tracks = self.state.trace(key)
        if tracks is None:
            return
        if info.ok:
            drop_uncoloured_warning(tracks.trace)
        # recolours the bars, drops the results of the old SOL; every view reloads the trace
        self.document.set_sol(key, info)
        self.refresh()
        if hasattr(self.window, "statusBar") and info.ok and info.spec is not None:
            self.window.statusBar().showMessage(f"{tracks.label}: kernels bound on {info.spec.name}", 6000)


def _failed(message: str, path: str) -> Failed:
    """A background computation's error message (the runner's) as a failed analysis."""
    return Failed(AnalysisError(message.split("\n", 1)[0], path=path))
