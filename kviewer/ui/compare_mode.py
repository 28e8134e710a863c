"""Compare mode: two open traces, B aligned on A, with the diff table in a dock.

How a comparison starts:

- an open request that brings the window to exactly two traces: dropping a second report on a
  window with one open, dropping two onto an empty one, or ``kviewer A B``. The report opened
  first is A (the reference), the other B. A status message says so; View › Stop Comparing
  (or closing either trace) ends it.
- File › Compare With… picks a file to compare with the current trace.
- File › Compare Open Traces when two traces are open but not compared.

A third report dropped while comparing simply opens as another trace.

The comparison (:func:`kviewer.analysis.compare.compare`, about half a second on big traces) runs
on the background runner. Its result goes to the session's command
(:func:`kviewer.session.compare.start_compare`), which shifts B on the shared time axis by
``align_offset_ns`` so both start their first step (or first kernel) at the same x and labels the
track groups "A ·" and "B ·"; because they share one axis, zoom and pan stay in step. This class
follows the document's ``compare_changed`` to show the Compare dock, so a comparison started
elsewhere (the headless screenshot runs the same command) shows the same window.
Choosing a row of the diff table highlights that group's kernels in both traces (double-click or
Enter also reveals the longest one on the timeline).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QStackedWidget

from kviewer import analysis, ui
from kviewer.session.compare import start_compare, stop_compare
from kviewer.ui import dialogs
from kviewer.ui.viewstate import PICK, Selection, ViewState

if TYPE_CHECKING:
    import kviewer.analysis.compare
    import kviewer.ui.compare_view
    from kviewer.analysis.compare import CompareResult
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.background import BackgroundRunner
    from kviewer.ui.compare_view import CompareSelection, CompareView
    from kviewer.ui.loading import LoadController

PLACEHOLDER = (
    "Drop a second report on the window to compare it with the open one, "
    "or use File › Compare With…"
)


class CompareMode(QObject):
    """Owns the Compare dock and the A/B pairing; talks to the views only through the state.

    Signals
    -------
    changed()
        compare mode started or stopped (menus update their actions).
    """

    changed = Signal()

    def __init__(
        self,
        window: QMainWindow,
        state: ViewState,
        loader: LoadController,
        runner: BackgroundRunner,
        beside: QDockWidget,
        status: Callable[[str], None],
    ) -> None:
        super().__init__(window)
        self.window = window
        self.state = state
        self.loader = loader
        self.runner = runner
        self.status = status
        self.placeholder = QLabel(PLACEHOLDER)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet("color:#666; padding:12px;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.dock = QDockWidget("Compare", window)
        self.dock.setObjectName("compareDock")  # saveState needs names
        self.dock.setWidget(self.stack)
        window.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.dock)
        self.dock.hide()
        self.beside = beside
        self.view: CompareView | None = None
        self._armed = False
        self._arm_a: int | None = None
        self._pending: tuple[int, int] | None = None
        self._explicit = False
        loader.traceLoaded.connect(self._on_loaded)
        loader.idle.connect(self._on_idle)
        state.compareChanged.connect(self._on_compare_changed)

    def arrange_default(self) -> None:
        """The first-run layout: the Compare dock in a tab beside the kernel table (see
        :meth:`AnalysisDocks.arrange_default` for why only without a saved layout)."""
        self.window.tabifyDockWidget(self.beside, self.dock)
        self.dock.hide()
        self.beside.raise_()

    # state -------------------------------------------------------------------------------------
    @property
    def a_key(self) -> int | None:
        pair = self.state.document.compare
        return pair.a if pair is not None else None

    @property
    def b_key(self) -> int | None:
        pair = self.state.document.compare
        return pair.b if pair is not None else None

    @property
    def result(self) -> CompareResult | None:
        """The comparison on display (kept with the open document)."""
        pair = self.state.document.compare
        return pair.result if pair is not None else None

    @property
    def active(self) -> bool:
        return self.a_key is not None and self.b_key is not None

    @property
    def busy(self) -> bool:
        """A comparison is being computed."""
        return self._pending is not None

    def traces(self) -> tuple[TraceTracks | None, TraceTracks | None]:
        a = self.state.trace(self.a_key) if self.a_key is not None else None
        b = self.state.trace(self.b_key) if self.b_key is not None else None
        return a, b

    # starting ----------------------------------------------------------------------------------
    def note_open(self, paths: list[str]) -> None:
        """Called before an open request: arm compare mode when it brings the window to two
        traces (see the module doc)."""
        if self.active or self._armed or self._pending is not None or self.loader.busy or self.loader.pending:
            return
        if len(self.state.traces) + len(paths) == 2:
            self._arm(self.state.traces[0].key if self.state.traces else None)

    def _arm(self, a_key: int | None) -> None:
        self._armed = True
        self._arm_a = a_key

    def compare_with(self, path: str) -> None:
        """Open ``path`` and compare it (B) with the current trace (A)."""
        current = self.state.current
        if current is None:
            self.loader.open([path])
            return
        self._arm(current.key)
        self._explicit = True
        self.loader.open([path])

    def compare_open(self) -> None:
        """Compare the two open traces (the first opened is A)."""
        if len(self.state.traces) == 2:
            self.start(self.state.traces[0].key, self.state.traces[1].key)

    def _on_loaded(self, tracks: TraceTracks) -> None:
        if not self._armed or self.state.trace(tracks.key) is None:
            return  # not armed, or the file did not open as a trace (a report attached to one)
        if self._arm_a is None or self.state.trace(self._arm_a) is None:
            self._arm_a = tracks.key  # the first report of the request is A
            return
        a = self._arm_a
        self._armed, self._arm_a, self._explicit = False, None, False
        self.start(a, tracks.key)

    def _on_idle(self) -> None:
        # the request ended without a second report (a load failed or was cancelled)
        self._armed, self._arm_a = False, None
        self._explicit = False

    @property
    def wants_compare(self) -> bool:
        """A comparison was asked for explicitly (File › Compare With…), or one is on: a counter
        report loaded now opens as a trace to compare, not attached to the open one."""
        return self.active or (self._armed and self._explicit)

    def start(self, a_key: int, b_key: int) -> None:
        """Compare trace ``b_key`` with ``a_key`` (in the background); show it when done."""
        a, b = self.state.trace(a_key), self.state.trace(b_key)
        if a is None or b is None or a_key == b_key:
            return
        if self.active:
            self.stop()
        self._pending = (a_key, b_key)
        self.status(f"Comparing {b.label} with {a.label}…")
        # paint first: both traces are on screen; the dock says the comparison is on its way
        self.placeholder.setText(f"Computing the comparison of B {b.label} with A {a.label}…")
        self.stack.setCurrentWidget(self.placeholder)
        self.dock.show()
        ta, tb = a.trace, b.trace

        def done(result: CompareResult) -> None:
            self._pending = None
            if self.state.trace(a_key) is a and self.state.trace(b_key) is b:
                self._show(a, b, result)
            else:
                self._end_pending()

        def failed(message: str) -> None:
            self._pending = None
            self._end_pending()
            self.status("")
            dialogs.show_error(self.window, "Could not compare the traces", f"{b.label} with {a.label}: {message}")

        self.runner.run("compare", lambda: analysis.compare.compare(ta, tb), done, failed)

    def _end_pending(self) -> None:
        """No comparison is coming: the dock goes back to its hint (hidden unless one is shown)."""
        self.placeholder.setText(PLACEHOLDER)
        if not self.active:
            self.stack.setCurrentWidget(self.placeholder)
            self.dock.hide()

    def _show(self, a: TraceTracks, b: TraceTracks, result: CompareResult) -> None:
        start_compare(self.state.document, a.key, b.key, result)  # -> _on_compare_changed

    def _on_compare_changed(self) -> None:
        """The document's comparison started or stopped: the dock, the range and the status
        follow (whoever ran the command: this class, a closed trace, the headless path)."""
        pair = self.state.document.compare
        a, b = self.traces()
        if pair is None or a is None or b is None:
            self.placeholder.setText(PLACEHOLDER)
            if self._pending is None:
                self.stack.setCurrentWidget(self.placeholder)
                self.dock.hide()
            self.state.clear_highlight(PICK)  # the diff row's kernels
            self.status("")
            self.changed.emit()
            return

        result = pair.result
        self.placeholder.setText(PLACEHOLDER)
        if self.view is None:
            self.view = ui.compare_view.CompareView(a.trace, b.trace, result)
            self.view.rowSelected.connect(lambda sel: self.select_row(sel, reveal=False))
            self.view.rowActivated.connect(lambda sel: self.select_row(sel, reveal=True))
            self.stack.addWidget(self.view)
        else:
            self.view.set_result(a.trace, b.trace, result)
        self.stack.setCurrentWidget(self.view)
        self.dock.show()
        self.dock.raise_()
        # the totals and the diff rows need more height than the kernel table's default
        self.window.resizeDocks([self.dock], [max(380, int(self.window.height() * 0.42))], Qt.Orientation.Vertical)
        lo, hi = self.state.span()
        pad = (hi - lo) * 0.02
        self.state.set_range(lo - pad, hi + pad)
        pct = result.slower_pct
        verdict = "the same" if pct == 0 else (f"{abs(pct):.1f}% {'slower' if pct > 0 else 'faster'}" if np.isfinite(pct) else "all new")
        what = "median step" if result.headline_basis == "median step" else "kernel time"
        self.status(f"Comparing B {b.label} with A {a.label}: B's {what} is {verdict}; timelines aligned at the {result.align_basis}")
        self.changed.emit()

    # stopping ----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Leave compare mode: B back at its own start, the dock hidden."""
        if not self.active and self._pending is None:
            return
        self.runner.cancel("compare")
        self._pending = None
        if not self.active:
            self._end_pending()
            return

        stop_compare(self.state.document)  # -> _on_compare_changed

    # rows -> state -----------------------------------------------------------------------------
    def select_row(self, sel: CompareSelection, reveal: bool = False) -> None:
        """Highlight a diff row's kernels in A and in B; select the longest (A's first)."""
        a, b = self.traces()
        if a is None or b is None:
            return
        highlight: dict[int, np.ndarray] = {}
        pick: Selection | None = None
        for tracks, ids in ((a, sel.kernels_a), (b, sel.kernels_b)):
            n = len(tracks.trace.kernels)
            ids = np.asarray(ids, dtype=np.int64)
            ids = ids[(ids >= 0) & (ids < n)]
            mask = np.zeros(n, dtype=bool)
            mask[ids] = True
            highlight[tracks.key] = mask
            if pick is None and len(ids):
                dur = tracks.trace.kernels["dur"].to_numpy()[ids]
                pick = Selection(tracks.key, "kernels", int(ids[int(np.argmax(dur))]))
        self.state.set_highlight(highlight)
        if pick is not None:
            self.state.set_selection(pick, reveal=reveal)


__all__ = ["PLACEHOLDER", "CompareMode"]
