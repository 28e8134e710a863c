"""Loading traces off the GUI thread, with a progress dialog that can cancel.

A :class:`LoadJob` runs on a one-thread pool (loads run one after the other): it detects and parses
each file (:func:`kviewer.io.load`) and builds its timeline tracks and level-of-detail, so the GUI
thread only receives ready-made :class:`~kviewer.ui.tracks.TraceTracks`. Every failure, including
an unexpected exception in a loader, comes back as a message naming the file; traces that are
already open are never touched by a failed load.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtWidgets import QProgressDialog, QWidget

from kviewer.ui import dialogs

if TYPE_CHECKING:
    from kviewer.io import CancelToken


def with_speed_of_light(trace: Any) -> Any:
    """The trace with ``bound`` and ``t_sol_ns`` on its kernels when the GPU is recognised, so the
    timeline colours kernels by what bounds them and draws the SOL floor inside each bar. A trace
    whose GPU is unknown (or whose SOL cannot be computed) opens as it is, with a warning."""
    return speed_of_light_for_load(trace)[0]


def speed_of_light_for_load(trace: Any) -> tuple[Any, Any]:
    """:func:`with_speed_of_light` and the :class:`~kviewer.ui.sol_info.SolInfo` it used (None for
    a trace without kernels), which the roofline and fusion docks reuse."""
    from kviewer.ui.sol_info import UNCOLOURED_WARNING, coloured, compute_sol, reason

    if not len(trace.kernels):
        return trace, None
    info = compute_sol(trace)
    if not info.ok:
        if info.why and not info.why.endswith("has no kernels"):
            # the reason without the file name (the status bar shows it) or the CLI's advice
            trace.meta.warnings.append(f"{UNCOLOURED_WARNING}: {reason(info.why)}")
        return trace, info
    return coloured(trace, info), info


class LoadSignals(QObject):
    progress = Signal(float, str)
    loaded = Signal(object)
    """TraceTracks"""
    failed = Signal(str, str)
    """path, message"""
    cancelled = Signal(str)
    finished = Signal()


class LoadJob(QRunnable):
    """Load a list of files in order; report each result through :class:`LoadSignals`."""

    def __init__(self, paths: list[str], token: CancelToken, signals: LoadSignals) -> None:
        super().__init__()
        self.paths = list(paths)
        self.token = token
        self.signals = signals
        self._last = 0.0

    def _progress(self, index: int, name: str) -> Callable[[float, str], None]:
        n = len(self.paths)

        def report(fraction: float, message: str) -> None:
            # loaders may call this very often; the dialog needs a few updates a second
            now = time.monotonic()
            if now - self._last < 0.05 and fraction < 1.0:
                return
            self._last = now
            total = (index + max(0.0, min(1.0, fraction)) * 0.9) / n
            self.signals.progress.emit(total, f"{name}: {message}" if message else name)

        return report

    def run(self) -> None:
        from kviewer.errors import LoadCancelled, LoadError

        try:
            from kviewer.io import load
            from kviewer.ui.tracks import TraceTracks

            for i, path in enumerate(self.paths):
                name = os.path.basename(path) or path
                if self.token.cancelled:
                    self.signals.cancelled.emit(path)
                    break
                try:
                    trace = load(path, progress=self._progress(i, name), cancel=self.token)
                    self.token.check()
                    self.signals.progress.emit((i + 0.9) / len(self.paths), f"{name}: speed of light")
                    trace, sol_info = speed_of_light_for_load(trace)
                    self.token.check()
                    self.signals.progress.emit((i + 0.95) / len(self.paths), f"{name}: building the timeline")
                    tracks = TraceTracks.build(trace)
                    tracks.sol_info = sol_info
                    self.token.check()
                    self.signals.loaded.emit(tracks)
                except LoadCancelled:
                    self.signals.cancelled.emit(path)
                    break
                except LoadError as exc:
                    self.signals.failed.emit(path, str(exc))
                except MemoryError:
                    self.signals.failed.emit(path, f"{path}: not enough memory to open this file")
                except Exception as exc:  # a bug must not take the app down; report it, keep going
                    detail = traceback.format_exc(limit=3)
                    self.signals.failed.emit(path, f"{path}: unexpected error while loading: {type(exc).__name__}: {exc}\n\n{detail}")
        except Exception as exc:  # e.g. the io package itself failed to import
            self.signals.failed.emit(", ".join(self.paths), f"could not load: {type(exc).__name__}: {exc}")
        finally:
            self.signals.finished.emit()


class LoadController(QObject):
    """Runs load jobs one at a time, shows progress, reports errors; queues what comes meanwhile."""

    traceLoaded = Signal(object)
    fileOpened = Signal(str)
    idle = Signal()

    def __init__(self, parent_widget: QWidget, on_loaded: Callable[[Any], None]) -> None:
        super().__init__(parent_widget)
        self.parent_widget = parent_widget
        self.on_loaded = on_loaded
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self.pending: list[str] = []
        self.busy = False
        self.errors: list[str] = []
        self.dialog: QProgressDialog | None = None
        self.token: CancelToken | None = None
        self.signals: LoadSignals | None = None
        self._current: dict[str, str] = {}

    def open(self, paths: list[str]) -> None:
        self.pending.extend(os.fspath(p) for p in paths)
        if not self.busy:
            self._start()

    def _start(self) -> None:
        if not self.pending:
            self.busy = False
            self.idle.emit()
            return
        from kviewer.io import CancelToken

        paths, self.pending = self.pending, []
        self.busy = True
        self.errors = []
        self.token = CancelToken()
        self.signals = LoadSignals()
        self.signals.progress.connect(self._on_progress)
        self.signals.loaded.connect(self._on_loaded)
        self.signals.failed.connect(self._on_failed)
        self.signals.cancelled.connect(self._on_cancelled)
        self.signals.finished.connect(self._on_finished)
        names = ", ".join(os.path.basename(p) for p in paths)
        dlg = QProgressDialog(f"Opening {names}", "Cancel", 0, 1000, self.parent_widget)
        dlg.setWindowTitle("kviewer")
        dlg.setWindowModality(Qt.WindowModality.WindowModal)
        dlg.setMinimumDuration(400)  # small files open without a flashing dialog
        dlg.setAutoClose(False)
        dlg.setAutoReset(False)
        dlg.setValue(0)
        token = self.token
        dlg.canceled.connect(token.cancel)
        self.dialog = dlg
        self.pool.start(LoadJob(paths, token, self.signals))

    def cancel(self) -> None:
        if self.token is not None:
            self.token.cancel()

    def _on_progress(self, fraction: float, message: str) -> None:
        if self.dialog is not None:
            self.dialog.setLabelText(message)
            self.dialog.setValue(int(fraction * 1000))

    def _on_loaded(self, tracks: Any) -> None:
        self.on_loaded(tracks)
        self.traceLoaded.emit(tracks)
        self.fileOpened.emit(tracks.trace.meta.path)

    def _on_failed(self, path: str, message: str) -> None:
        self.errors.append(message)

    def _on_cancelled(self, path: str) -> None:
        pass  # the user asked for it: nothing to report

    def _on_finished(self) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None
        errors, self.errors = self.errors, []
        if errors:
            title = "Could not open a file" if len(errors) == 1 else f"Could not open {len(errors)} files"
            dialogs.show_error(self.parent_widget, title, "\n\n".join(errors))
        self._start()

    def wait(self, msecs: int = -1) -> bool:
        """Block until the pool is idle (for shutdown)."""
        return bool(self.pool.waitForDone(msecs))
