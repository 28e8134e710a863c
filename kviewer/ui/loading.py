"""Loading traces off the GUI thread, with a progress dialog that can cancel.

:func:`~kviewer.ui.open_work.load_file` runs on the application's one-thread load pool (loads run one after the other):
it detects and parses each file (:func:`kviewer.io.load`) and builds its timeline tracks and
level-of-detail, so the GUI thread only receives ready-made :class:`~kviewer.session.tracks.TraceTracks`.
The analyses (speed of light, fusion, compare) run after the trace is shown, unless the analysis
cache already has them. Every failure, including
an unexpected exception in a loader, comes back as a message naming the file; traces that are
already open are never touched by a failed load.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QProgressDialog, QWidget

from kviewer import io as kio
from kviewer.errors import LoadCancelled, LoadError
from kviewer.ui import dialogs
from kviewer.ui.dispatch import Owner, Task, dispatcher
from kviewer.ui.open_work import load_file

if TYPE_CHECKING:
    import kviewer.io
    from kviewer.io import CancelToken


def failure_message(path: str, exc: BaseException) -> str | None:
    """What the user is told when ``path`` did not open (None: cancelled, nothing to say)."""
    if isinstance(exc, LoadCancelled):
        return None
    if isinstance(exc, LoadError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return f"{path}: not enough memory to open this file"
    # a bug must not take the app down; report it, keep going
    detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=3))
    return f"{path}: unexpected error while loading: {type(exc).__name__}: {exc}\n\n{detail}"


class LoadController(QObject):
    """Loads files one at a time off the GUI thread, shows progress, reports errors; queues what
    comes meanwhile.

    The parsing runs on the application's load pool (:mod:`kviewer.ui.dispatch`): plain Python
    that never touches Qt. Its progress and results reach this object on the GUI thread, and
    never after :meth:`shutdown` (the window closed)."""

    traceLoaded = Signal(object)
    fileOpened = Signal(str)
    idle = Signal()

    def __init__(self, parent_widget: QWidget, on_loaded: Callable[[Any], None]) -> None:
        super().__init__(parent_widget)
        self.parent_widget = parent_widget
        self.on_loaded = on_loaded
        self.owner = Owner("loader")
        self.pending: list[str] = []
        self.busy = False
        self.errors: list[str] = []
        self.dialog: QProgressDialog | None = None
        self.token: CancelToken | None = None
        self.task: Task | None = None
        self._batch: list[str] = []
        self._index = 0

    def open(self, paths: list[str]) -> None:
        if self.owner.closed:
            return
        self.pending.extend(os.fspath(p) for p in paths)
        if not self.busy:
            self._start()

    def _start(self) -> None:
        """Begin the next batch of files (everything queued so far)."""
        if self.owner.closed:
            return
        if not self.pending:
            self.busy = False
            self.idle.emit()
            return

        self._batch, self.pending = self.pending, []
        self._index = 0
        self.busy = True
        self.errors = []
        self.token = kio.CancelToken()
        names = ", ".join(os.path.basename(p) for p in self._batch)
        dlg = QProgressDialog(f"Opening {names}", "Cancel", 0, 1000, self.parent_widget)
        dlg.setWindowTitle("kviewer")
        dlg.setWindowModality(Qt.WindowModality.WindowModal)
        dlg.setMinimumDuration(400)  # small files open without a flashing dialog
        dlg.setAutoClose(False)
        dlg.setAutoReset(False)
        dlg.setValue(0)
        dlg.canceled.connect(self.token.cancel)
        self.dialog = dlg
        self._next_file()

    def _next_file(self) -> None:
        token = self.token
        if token is None or self._index >= len(self._batch) or token.cancelled:
            self._finish_batch()
            return
        path = self._batch[self._index]
        self.task = dispatcher().submit(
            self.owner,
            lambda progress: load_file(path, token, progress),
            on_done=self._on_loaded,
            on_error=lambda exc: self._on_failed(path, exc),
            on_progress=self._on_progress,
            pool="load",
        )

    def cancel(self) -> None:
        if self.token is not None:
            self.token.cancel()

    def _on_progress(self, fraction: float, message: str) -> None:
        if self.dialog is not None:
            n = max(1, len(self._batch))
            self.dialog.setLabelText(message)
            self.dialog.setValue(int((self._index + fraction) / n * 1000))

    def _on_loaded(self, tracks: Any) -> None:
        self.task = None
        self.on_loaded(tracks)
        self.traceLoaded.emit(tracks)
        self.fileOpened.emit(tracks.trace.meta.path)
        self._index += 1
        self._next_file()

    def _on_failed(self, path: str, exc: BaseException) -> None:
        self.task = None
        message = failure_message(path, exc)
        if message is None:  # the user cancelled: nothing to report, the rest of the batch too
            self._finish_batch()
            return
        self.errors.append(message)
        self._index += 1
        self._next_file()

    def _finish_batch(self) -> None:
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None
        self._batch, self._index = [], 0
        errors, self.errors = self.errors, []
        if errors:
            title = "Could not open a file" if len(errors) == 1 else f"Could not open {len(errors)} files"
            dialogs.show_error(self.parent_widget, title, "\n\n".join(errors))
        self._start()

    def wait(self, msecs: int = -1) -> bool:
        """Block until the load in flight has returned (for shutdown and tests)."""
        return dispatcher().wait(self.owner, timeout=3600.0 if msecs < 0 else msecs / 1000)

    def shutdown(self) -> None:
        """The window is closing: stop the load in flight, drop everything it would still report."""
        self.cancel()
        self.owner.close()
        self.pending = []
        if self.dialog is not None:
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None
        self.busy = False
