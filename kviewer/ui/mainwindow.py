"""The main window: it only wires the views, the shared view state and the loader together."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import PySide6
from PySide6.QtCore import QSettings, Qt, QUrl, qVersion
from PySide6.QtGui import QAction, QDragEnterEvent, QDropEvent, QIcon, QKeySequence
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QApplication,
    QDockWidget,
    QFileDialog,
    QLabel,
    QLineEdit,
    QMainWindow,
    QPlainTextEdit,
    QSizePolicy,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from kviewer import __version__, analysis, core, io as kio
from kviewer.session.format import format_duration
from kviewer.session.lanes import SavedLayout
from kviewer.ui import dialogs, open_choice, resources
from kviewer.ui.analysis_docks import AnalysisDocks
from kviewer.ui.background import BackgroundRunner
from kviewer.ui.compare_mode import CompareMode
from kviewer.ui.counters_attach import CounterAttach
from kviewer.ui.details import DetailsPanel
from kviewer.ui.diagnostics_panel import DiagnosticsButton, DiagnosticsPanel
from kviewer.ui.findbar import FindBar
from kviewer.ui.flame_panel import FlamePanel
from kviewer.ui.idle_panel import IdlePanel
from kviewer.ui.kernel_table import KernelTable
from kviewer.ui.loading import LoadController
from kviewer.ui.memory_panel import MemoryPanel
from kviewer.ui.mfu_requests import MfuRequests
from kviewer.ui.ncu_panel import NcuPanel
from kviewer.ui.picture_actions import (
    COMPARE,
    FUSION,
    ROOFLINE,
    TABLE,
    TIMELINE,
    WINDOW,
    PictureActions,
)
from kviewer.ui.query_dock import QueryPanel
from kviewer.ui.range_panel import RangePanel
from kviewer.ui.timeline import TimelineView
from kviewer.ui.viewstate import ViewState
from kviewer.ui.whatif_dock import WhatIfPanel

if TYPE_CHECKING:
    import kviewer.analysis.attach
    import kviewer.core.jsonout
    import kviewer.io.cache

MAX_RECENT = 10
#: the docks the saved layout knows; a layout saved with another set (an older kviewer, before
#: the Query and Counters docks) would leave the new docks loose beside the others
#: brings the Diagnostics dock (every load warning of every open trace) forward
DIAGNOSTICS_KEY = "Ctrl+Shift+D"
LAYOUT_DOCKS = "kernels,details,roofline,fusion,compare,query,counters,range,idle,diagnostics,whatif,memory,calltree"
FILE_FILTER = (
    "Profiler traces (*.json *.json.gz *.json.xz *.json.zst *.sqlite *.sqlite.gz *.nsys-rep *.ncu-rep *.csv *.db *.txt *.log);;"
    "All files (*)"
)


class ElidedLabel(QLabel):
    """A label that cuts its text with "…" to the width it is given."""

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self._full = text
        self.setMinimumWidth(10)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        self._full = text
        self._elide()

    def text(self) -> str:
        """The whole text (what is painted may be cut)."""
        return self._full

    def shown_text(self) -> str:
        return super().text()

    def resizeEvent(self, event: Any) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, max(self.width() - 4, 10))
        super().setText(shown)
        if shown != self._full:
            self.setToolTip(self._full)


class MainWindow(QMainWindow):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("kviewerMainWindow")
        self.setWindowTitle("kviewer")
        icon = resources.path("kviewer.svg")
        if icon is not None:
            self.setWindowIcon(QIcon(str(icon)))
        self.setAcceptDrops(True)
        self.resize(1400, 900)

        self.state = ViewState(self)
        self.timeline = TimelineView(self.state)
        self.find_bar = FindBar(self.state)
        self.find_bar.hide()
        self.table = KernelTable(self.state)
        self.details = DetailsPanel(self.state)
        self.ncu_panel = NcuPanel(self.state)
        self.loader = LoadController(self, self._on_loaded)
        # drops land on the window, whichever child is under the cursor
        self.timeline.canvas.setAcceptDrops(False)
        self.table.view.setAcceptDrops(False)

        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.find_bar)
        lay.addWidget(self.timeline, 1)
        self.setCentralWidget(central)
        # the right-hand docks (details, roofline) run the full height; the bottom ones sit
        # under the timeline only
        self.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.RightDockWidgetArea)
        self.table_dock = self._dock("Kernels", "kernelsDock", self.table, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.details_dock = self._dock("Details", "detailsDock", self.details, Qt.DockWidgetArea.RightDockWidgetArea)
        # analysis runs off the GUI thread; the docks and compare mode own their logic
        self.runner = BackgroundRunner("window")
        self.analysis = AnalysisDocks(self, self.state, self.runner, below=self.details_dock)
        self.compare = CompareMode(self, self.state, self.loader, self.runner, beside=self.table_dock, status=self.show_message)
        self.query = QueryPanel(self.state, self.runner)
        self.query_dock = self._dock("Query", "queryDock", self.query, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.counters_dock = self._dock("Counters", "countersDock", self.ncu_panel, Qt.DockWidgetArea.RightDockWidgetArea)

        self.range_panel = RangePanel(self.state, self.runner)

        self.details.mfu_requests = self.range_panel.mfu_requests = mfu_requests = MfuRequests(self.runner, self.state)
        self.state.tracesChanged.connect(lambda: mfu_requests.warm(self.state))
        self.range_dock = self._dock("Range", "rangeDock", self.range_panel, Qt.DockWidgetArea.BottomDockWidgetArea)

        self.idle_panel = IdlePanel(self.state, self.runner, self.timeline.set_idle_threshold)
        self.idle_dock = self._dock("Idle Gaps", "idleDock", self.idle_panel, Qt.DockWidgetArea.BottomDockWidgetArea)

        self.diagnostics = DiagnosticsPanel(self.state)
        self.diagnostics_dock = self._dock("Diagnostics", "diagnosticsDock", self.diagnostics, Qt.DockWidgetArea.BottomDockWidgetArea)

        self.whatif_panel = WhatIfPanel(self.state, self.runner, self.timeline, compare=self.compare.start)
        self.whatif_dock = self._dock("What-if", "whatifDock", self.whatif_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.whatif_panel.gate.watch(self.whatif_dock)  # the analysis docks compute only on screen

        self.memory_panel = MemoryPanel(self.state, self.runner)
        self.memory_dock = self._dock("Memory", "memoryDock", self.memory_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.flame_panel = FlamePanel(self.state, self.runner)
        self.flame_dock = self._dock("Call Tree", "callTreeDock", self.flame_panel, Qt.DockWidgetArea.BottomDockWidgetArea)
        self.memory_panel.gate.watch(self.memory_dock)
        self.idle_panel.gate.watch(self.idle_dock)
        self.flame_panel.gate.watch(self.flame_dock)
        # a range dragged on the time axis brings its summary forward
        self.state.timeSelectionChanged.connect(self._show_range_dock)
        self.counters = CounterAttach(self, self.state, self.runner, self.analysis, self.show_message,
                                      blocked=lambda: self.compare.wants_compare, open_alone=lambda p: self.loader.open([p]))
        self.counters.attached.connect(lambda _k: self._raise_counters())
        self.ncu_panel.windowChosen.connect(self.counters.choose_window)
        self.loader.idle.connect(self.counters.request_done)
        self.ncu_panel.compare_pair = self._counter_pair
        self.compare.changed.connect(self.ncu_panel.refresh)
        self.pictures = PictureActions(self, self._picture_views, self.show_message)
        self.resizeDocks([self.table_dock], [340], Qt.Orientation.Vertical)
        self.resizeDocks([self.details_dock], [380], Qt.Orientation.Horizontal)

        self._build_menus()
        self._build_status()
        self.timeline.closeRequested.connect(self.close_trace)
        self.loader.fileOpened.connect(self.add_recent)
        self.state.tracesChanged.connect(self._on_traces)
        self.state.tracesChanged.connect(self.query.on_traces_changed)
        self.state.currentTraceChanged.connect(lambda _t: self._update_status())
        self.state.rangeChanged.connect(self._on_range)
        self.compare.changed.connect(self._update_actions)
        if not self._restore_settings():
            self.analysis.arrange_default()
            self.compare.arrange_default()
            self.tabifyDockWidget(self.table_dock, self.query_dock)
            self.tabifyDockWidget(self.table_dock, self.range_dock)
            self.tabifyDockWidget(self.table_dock, self.idle_dock)
            self.tabifyDockWidget(self.table_dock, self.diagnostics_dock)
            self.tabifyDockWidget(self.table_dock, self.whatif_dock)
            self.tabifyDockWidget(self.table_dock, self.memory_dock)
            self.tabifyDockWidget(self.table_dock, self.flame_dock)
            self.table_dock.raise_()
            # out of the layout first: tabbed from where it was stacked, below the Roofline split off
            # Details, Qt made a second "Details | Counters" bar and left it at the group's first
            # place, drawn over the Roofline (tests/ui/test_app.py::test_no_stale_tab_bar...)
            self.removeDockWidget(self.counters_dock)
            self.tabifyDockWidget(self.details_dock, self.counters_dock)
            self.counters_dock.show()
            self.details_dock.raise_()
            self.resizeDocks([self.details_dock, self.analysis.roofline_dock], [240, 560], Qt.Orientation.Vertical)
        if not self.compare.active:
            was_on_top = not self.compare.dock.isHidden()  # saved while comparing: its tab was the current one
            self.compare.dock.hide()  # a restored layout must not show an empty Compare dock
            if was_on_top:
                self.compare.beside.raise_()  # the tab it sits beside (the kernels), not whichever neighbour Qt picks
        self._update_actions()
        owners = (self.loader.owner, self.runner.owner)

        def close_owners(*_: object) -> None:
            for owner in owners:
                owner.close()

        self.destroyed.connect(close_owners)

    def _show_range_dock(self, rng: Any) -> None:
        if rng is not None:
            self.range_dock.show()
            self.range_dock.raise_()

    def _dock(self, title: str, name: str, widget: QWidget, area: Qt.DockWidgetArea) -> QDockWidget:
        dock = QDockWidget(title, self)
        dock.setObjectName(name)  # saveState needs names
        dock.setWidget(widget)
        self.addDockWidget(area, dock)
        return dock

    # menus -----------------------------------------------------------------------------------
    def _action(self, text: str, slot: Callable[[], Any], shortcut: QKeySequence | QKeySequence.StandardKey | None = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut if isinstance(shortcut, QKeySequence) else QKeySequence(shortcut))
        action.triggered.connect(lambda _checked=False: slot())
        return action

    def _build_menus(self) -> None:
        mb = self.menuBar()
        file_menu = mb.addMenu("&File")
        self.open_action = self._action("&Open…", self.open_dialog, QKeySequence.StandardKey.Open)
        file_menu.addAction(self.open_action)
        self.open_folder_action = self._action("Open &Folder of Ranks…", self.open_folder_dialog, QKeySequence("Ctrl+Shift+O"))
        self.open_folder_action.setToolTip("A folder with one trace per rank of a distributed run, opened as one trace")
        file_menu.addAction(self.open_folder_action)
        self.recent_menu = file_menu.addMenu("Open &Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        self.close_menu = file_menu.addMenu("&Close Trace")
        self.close_menu.aboutToShow.connect(self._fill_close)
        self.close_all_action = self._action("Close &All", self.close_all)
        file_menu.addAction(self.close_all_action)
        file_menu.addSeparator()
        self.compare_with_action = self._action("Compare &With…", self.compare_dialog)
        self.compare_open_action = self._action("Compare Open &Traces", self.compare.compare_open)
        self.stop_compare_action = self._action("&Stop Comparing", self.compare.stop)
        for act in (self.compare_with_action, self.compare_open_action, self.stop_compare_action):
            file_menu.addAction(act)
        file_menu.addSeparator()
        self.attach_action = self._action("Attach Counter &Report…", self.attach_dialog)
        self.attach_action.setToolTip("Put the counters of an Nsight Compute report (or rocprof --pmc run) of the same program on this trace's kernels")
        file_menu.addAction(self.attach_action)
        file_menu.addSeparator()
        self.export_action = self._action("&Export Picture…", self.pictures.export, QKeySequence("Ctrl+Shift+S"))
        file_menu.addAction(self.export_action)
        file_menu.addSeparator()
        file_menu.addAction(self._action("&Quit", self.close, QKeySequence.StandardKey.Quit))

        edit = mb.addMenu("&Edit")
        self.find_action = self._action("&Find…", self.find_bar.open_bar, QKeySequence.StandardKey.Find)
        edit.addAction(self.find_action)
        edit.addAction(self._action("Find &Next", self.find_bar.next, QKeySequence.StandardKey.FindNext))
        edit.addAction(self._action("Find &Previous", self.find_bar.previous, QKeySequence.StandardKey.FindPrevious))
        edit.addSeparator()
        # single-letter keys belong to the timeline (they would steal typing from the filter box
        # as window shortcuts): the menu shows them after a tab without binding them
        edit.addAction(self._action("Clear Selection\tEsc", lambda: self.state.set_selection(None)))
        edit.addAction(self._action("Copy Selected Rows\tCtrl+C", self.table.view.copy_selection))
        self.copy_picture_action = self._action("Copy &Picture", self.pictures.copy, QKeySequence("Ctrl+Shift+C"))
        edit.addAction(self.copy_picture_action)

        view = mb.addMenu("&View")
        view.addAction(self._action("Zoom &In\tW", lambda: self.timeline.zoom(0.8)))
        view.addAction(self._action("Zoom &Out\tS", lambda: self.timeline.zoom(1.25)))
        view.addAction(self._action("Pan &Left\tA", lambda: self.timeline.pan(-0.15)))
        view.addAction(self._action("Pan &Right\tD", lambda: self.timeline.pan(0.15)))
        view.addAction(self._action("&Zoom to Selection\tF", self.timeline.fit_selection))
        view.addAction(self._action("Fit &All", self.timeline.fit_all, QKeySequence("Ctrl+0")))
        view.addSeparator()
        view.addAction(self.table_dock.toggleViewAction())
        view.addAction(self.details_dock.toggleViewAction())
        view.addAction(self.analysis.roofline_dock.toggleViewAction())
        view.addAction(self.analysis.fusion_dock.toggleViewAction())
        view.addAction(self.compare.dock.toggleViewAction())
        view.addAction(self.query_dock.toggleViewAction())
        view.addAction(self.counters_dock.toggleViewAction())
        view.addAction(self.range_dock.toggleViewAction())
        view.addAction(self.idle_dock.toggleViewAction())
        view.addAction(self.diagnostics_dock.toggleViewAction())
        self.show_diagnostics_action = self._action("Show &Diagnostics", self.show_diagnostics, QKeySequence(DIAGNOSTICS_KEY))
        view.addAction(self.show_diagnostics_action)
        view.addAction(self.whatif_dock.toggleViewAction())
        view.addAction(self.memory_dock.toggleViewAction())
        view.addAction(self.flame_dock.toggleViewAction())

        help_menu = mb.addMenu("&Help")
        help_menu.addAction(self._action("&Keys", self._show_keys))
        help_menu.addAction(self._action("&About kviewer", self._show_about))

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        recent = self.recent_files()
        for path in recent:
            act = self.recent_menu.addAction(path)
            act.triggered.connect(lambda _checked=False, p=path: self.open_files([p]))
        if not recent:
            self.recent_menu.addAction("(none)").setEnabled(False)
        else:
            self.recent_menu.addSeparator()
            self.recent_menu.addAction("Clear List", lambda: self._settings().setValue("recentFiles", []))

    def _fill_close(self) -> None:
        self.close_menu.clear()
        for tracks in self.state.traces:
            act = self.close_menu.addAction(tracks.label)
            act.triggered.connect(lambda _checked=False, k=tracks.key: self.close_trace(k))
        if not self.state.traces:
            self.close_menu.addAction("(no trace open)").setEnabled(False)

    def _show_keys(self) -> None:
        dialogs.show_info(
            self,
            "Keys",
            "W / S  zoom in / out around the mouse\nA / D  pan left / right\nF  zoom to the dragged range or the selected bar, whichever is newer (everything when neither)\n"
            "Backspace  back to the view before the last F\n"
            "Mouse wheel  scroll the lanes; Ctrl+wheel  zoom around the cursor; Shift+wheel  pan; drag  pan\n"
            "Drag along the time axis (or Shift+drag over the lanes)  select a range: the Range dock sums it\n"
            "Ctrl+F  find; Enter / Shift+Enter  next / previous match\nEsc  clear the selection\nCtrl+O  open; Ctrl+Shift+O  open a folder of rank traces; Ctrl+C  copy table rows as TSV\n"
            "Ctrl+Shift+S  export a picture of a view; Ctrl+Shift+C  copy the focused view's picture\n"
            f"{DIAGNOSTICS_KEY}  the Diagnostics dock: every warning of every open trace\n"
            "Click a group header to collapse it; right-click a lane or header to pin, move, hide it (or close a trace),\n"
            "right-click the lanes' area to zoom to the selection, zoom back or fit all;\n"
            "type in the box above the lanes to search them.\n"
            "Drop a second report on the window to compare it with the open one.",
        )

    def about_text(self) -> str:
        """Version, Python and Qt versions, the cache location."""
        return (f"kviewer {__version__}\nGPU profiler traces on one timeline, with speed of light, fusion and compare.\n\n"
                f"Python {platform.python_version()} · Qt {qVersion()} · PySide6 {PySide6.__version__} · pyqtgraph "
                f"{__import__('pyqtgraph').__version__}\nTrace cache: {kio.cache.cache_dir()}\nSettings: {self._settings().fileName()}")

    def _show_about(self) -> None:
        dialogs.show_info(self, "About kviewer", self.about_text())

    # status bar --------------------------------------------------------------------------------
    def _build_status(self) -> None:
        self.status_label = ElidedLabel()
        self.range_label = QLabel()
        # the trace description gives way (elided) to the view-range label, never overlaps it
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addPermanentWidget(self.range_label)

        self.diagnostics_button = DiagnosticsButton()
        self.diagnostics_button.clicked.connect(self.show_diagnostics)
        self.diagnostics.countChanged.connect(self.diagnostics_button.set_count)
        self.diagnostics_button.set_count(self.diagnostics.count)
        self.statusBar().addPermanentWidget(self.diagnostics_button)
        self._update_status()

    def show_diagnostics(self) -> None:
        """Bring the Diagnostics dock forward (the status bar's warning button)."""
        self.diagnostics_dock.show()
        self.diagnostics_dock.raise_()

    def _update_status(self) -> None:
        t = self.state.current
        if t is None:
            self.status_label.setText("Drop trace files here, or File › Open (Ctrl+O)")
            self.setWindowTitle("")  # the application's display name alone
            return
        m = t.trace.meta
        k = t.trace.kernels
        parts = [os.path.basename(m.path), m.format_label or m.source_format, f"{len(k):,} kernels", f"span {format_duration(t.span[1] - t.span[0])}"]
        devices = t.trace.devices
        if len(devices):
            names = sorted({str(n) for n in devices["name"] if str(n)})
            if names:
                parts.append(names[0] if len(names) == 1 else f"{names[0]} (+{len(names) - 1})")
        if m.warnings:
            # the first warning, and how many more the Diagnostics dock lists (never only the first)
            more = len(m.warnings) - 1
            parts.append(f"⚠ {m.warnings[0].message}" + (f" (+{more} more: {DIAGNOSTICS_KEY})" if more else ""))
        self.status_label.setText("  ·  ".join(parts))
        self.status_label.setToolTip(m.path)
        n = len(self.state.traces)
        # Qt appends the application's display name ("— kviewer") itself
        self.setWindowTitle(os.path.basename(m.path) + (f" ({n} traces)" if n > 1 else ""))

    def _on_range(self, t0: float, t1: float) -> None:
        self.range_label.setText(f"view {format_duration(t0)} – {format_duration(t1)}  ({format_duration(t1 - t0)})")

    def _on_traces(self) -> None:
        self._focus_timeline()
        self._update_status()
        self._update_actions()

    def _focus_timeline(self) -> None:
        """W/S/A/D work as soon as a trace opens: focus goes to the timeline unless the user is
        typing somewhere (the filter box, the query editor)."""
        if not self.state.traces:
            return
        focus = QApplication.focusWidget()
        if isinstance(focus, (QLineEdit, QPlainTextEdit, QAbstractSpinBox)) or (isinstance(focus, QTextEdit) and not focus.isReadOnly()):
            return
        self.timeline.canvas.setFocus(Qt.FocusReason.OtherFocusReason)

    def _update_actions(self) -> None:
        n = len(self.state.traces)
        self.close_all_action.setEnabled(n > 0)
        self.compare_with_action.setEnabled(n > 0)
        self.attach_action.setEnabled(n > 0)
        self.compare_open_action.setEnabled(n == 2 and not self.compare.active)
        self.stop_compare_action.setEnabled(self.compare.active)

    def show_message(self, text: str) -> None:
        """A passing message in the status bar ("" clears it)."""
        if text:
            self.statusBar().showMessage(text, 12000)
        else:
            self.statusBar().clearMessage()

    def _picture_views(self) -> dict[str, QWidget | None]:
        return {
            TIMELINE: self.timeline,
            TABLE: self.table,
            ROOFLINE: self.analysis.roofline_panel.roofline,
            FUSION: self.analysis.fusion_panel.panel,
            COMPARE: self.compare.view if self.compare.active else None,
            WINDOW: self,
        }

    # files -------------------------------------------------------------------------------------
    def open_files(self, paths: list[str]) -> None:
        paths = [os.fspath(p) for p in paths]
        self.compare.note_open(paths)  # a second report (or two at once) starts compare mode
        self.loader.open(paths)

    def compare_dialog(self) -> None:
        """File › Compare With…: a report to compare with the current trace."""
        start = str(Path(self.recent_files()[0]).parent) if self.recent_files() else ""
        path, _ = QFileDialog.getOpenFileName(self, "Compare with", start, FILE_FILTER)
        if path:
            self.compare.compare_with(path)

    def attach_dialog(self) -> None:
        """File › Attach Counter Report…: a report whose counters go onto the current trace."""
        current = self.state.current
        if current is None:
            return
        start = str(Path(self.recent_files()[0]).parent) if self.recent_files() else ""
        path, _ = QFileDialog.getOpenFileName(self, "Attach a counter report", start,
                                              "Counter reports (*.ncu-rep *.csv *.csv.gz *.txt);;All files (*)")
        if path:
            self.attach_file(path, current.key)

    def attach_file(self, path: str, key: int | None = None) -> None:
        """Load ``path`` and attach it to trace ``key`` (the current one when None)."""
        if key is None and self.state.current is not None:
            key = self.state.current.key
        self.counters.expect(path, key)
        self.loader.open([path])

    def _on_loaded(self, tracks: Any) -> None:
        """A file has loaded: a counter report goes onto the open timeline trace; anything else
        opens as a trace."""
        if self.counters.take(tracks):
            return
        self.state.add_trace(tracks)
        # paint first: the speed of light follows in the background, once the timeline has drawn it
        self.analysis.analyse(tracks, after=self.timeline.canvas.viewport())

        if analysis.attach.is_counter_report(tracks.trace):
            self.counters.note_alone(tracks)
            self._raise_counters()
        else:
            self.counters.adopt(tracks)

    def _counter_pair(self) -> Any:
        """(A, B) while two counter reports are compared (the Counters dock shows the baseline)."""
        a, b = self.compare.traces() if self.compare.active else (None, None)
        if a is None or b is None or not (analysis.attach.is_counter_report(a.trace) and analysis.attach.is_counter_report(b.trace)):
            return None
        return a, b

    def _raise_counters(self) -> None:
        self.counters_dock.show()
        self.counters_dock.raise_()

    def open_dialog(self) -> None:
        start = str(Path(self.recent_files()[0]).parent) if self.recent_files() else ""
        paths, _ = QFileDialog.getOpenFileNames(self, "Open traces", start, FILE_FILTER)
        if paths:
            self.open_chosen(paths)

    def open_folder_dialog(self) -> None:
        """File › Open Folder of Ranks…: a folder of per-rank traces (kviewer.io.ranks), as a
        dropped folder opens."""
        start = str(Path(self.recent_files()[0]).parent) if self.recent_files() else ""
        folder = QFileDialog.getExistingDirectory(self, "Open a folder of rank traces", start)
        if folder:
            self.open_chosen([folder])

    def open_chosen(self, paths: list[str]) -> None:
        """File › Open: with a trace open, one file opens beside it or is compared with it, as the
        user says (asked once, or remembered in the settings); never silently a comparison."""
        current = self.state.current
        if current is None or len(paths) != 1 or self.compare.active:
            self.open_files(paths)
            return
        mode = open_choice.choose_open_mode(self, self._settings(), os.path.basename(paths[0]), current.label)
        if mode == open_choice.COMPARE:
            self.compare.compare_with(paths[0])
        elif mode == open_choice.BESIDE:
            self.loader.open(paths)

    def close_trace(self, key: int) -> None:
        self.state.remove_trace(key)

    def close_all(self) -> None:
        for t in list(self.state.traces):
            self.state.remove_trace(t.key)

    @staticmethod
    def dropped_paths(event: QDropEvent | QDragEnterEvent) -> list[str]:
        mime = event.mimeData()
        if not mime.hasUrls():
            return []
        return [u.toLocalFile() for u in mime.urls() if isinstance(u, QUrl) and u.isLocalFile()]

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if self.dropped_paths(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event: Any) -> None:
        event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = self.dropped_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.open_files(paths)

    # settings ----------------------------------------------------------------------------------
    @staticmethod
    def _settings() -> QSettings:
        return QSettings()

    def recent_files(self) -> list[str]:
        value: Any = self._settings().value("recentFiles", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def add_recent(self, path: str) -> None:
        path = os.path.abspath(path)
        recent = [p for p in self.recent_files() if p != path]
        self._settings().setValue("recentFiles", [path] + recent[: MAX_RECENT - 1])

    def _restore_settings(self) -> bool:
        """Restore the window's geometry and dock layout; False when no layout was saved."""
        s = self._settings()
        geometry = s.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        self._restore_lanes(s.value("timeline/lanes"))
        state = s.value("window/state")
        if state is None or str(s.value("window/docks", "")) != LAYOUT_DOCKS:
            return False  # no layout, or one made for other docks: the default arrangement
        return bool(self.restoreState(state))

    def save_settings(self) -> None:
        s = self._settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/docks", LAYOUT_DOCKS)
        saved = self.timeline.lanes_layout.saved(self.state.traces)

        s.setValue("timeline/lanes", core.jsonout.to_text(saved.to_json()))  # the row layout, by label path
        s.sync()

    def _restore_lanes(self, text: Any) -> None:
        """The timeline's row layout saved with the window (pins, hidden rows, order, collapsed
        groups, lane filter); a malformed value is ignored."""
        try:
            data = json.loads(str(text)) if text else None
        except ValueError:
            data = None
        self.timeline.lanes_layout.restore(SavedLayout.from_json(data))

    def closeEvent(self, event: Any) -> None:
        self.save_settings()
        self.shutdown_work()
        super().closeEvent(event)

    def shutdown_work(self) -> None:
        """Stop the load in flight and drop every result still to come: nothing is delivered to
        this window once it closes (the workers never touch it; see :mod:`kviewer.ui.dispatch`)."""
        self.loader.shutdown()
        self.runner.close()
