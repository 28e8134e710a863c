"""``kviewer [FILE ...]``: start the desktop app.

Start-up imports only Qt, pyqtgraph and numpy on the way to the first window: the loaders (and
pandas) are imported in a background thread while the window appears, and parsing happens in the
loading thread.

For scripts and smoke tests, ``KVIEWER_SCREENSHOT=out.png kviewer FILE ...`` opens the files,
saves a picture of the window once they are loaded and exits (status 2 when a file failed, the
error on stderr instead of a dialog). ``KVIEWER_WINDOW_SIZE=1600x1000`` sets the window size.
"""

from __future__ import annotations

import gc
import importlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kviewer import ui
from kviewer.fleet.read import is_fleet_candidate, open_fleet
from kviewer.tempdir import deferred_interrupt
from kviewer.ui import resources
from kviewer.ui.open_work import prefetch

if TYPE_CHECKING:
    import kviewer.ui.dialogs
    import kviewer.ui.fleet_window
    import kviewer.ui.mainwindow

ENV_SCREENSHOT = "KVIEWER_SCREENSHOT"
ENV_SIZE = "KVIEWER_WINDOW_SIZE"


#: imported by :func:`_warm_up`: the loaders (pandas and the core tables), and what the GUI thread
#: imports when a trace arrives (counter-report matching, the table's columns): 0.2-0.3 s of it
#: before the first paint otherwise
WARM_UP = ("kviewer.io.registry", "kviewer.analysis.attach", "kviewer.session.table_data")


def _warm_up() -> None:
    """Import the loaders and what a trace's arrival needs in the background, so neither the first
    open nor the GUI thread waits for them."""
    try:
        for name in WARM_UP:
            importlib.import_module(name)
    except Exception:  # the load itself reports any real problem
        pass


def _prefetch_first(files: Sequence[str]) -> None:
    """Start loading the first trace file before Qt is imported (start-up work off the critical
    path: the window's load adopts it, :func:`kviewer.ui.open_work.prefetch`)."""
    first = next((f for f in files if not is_fleet_candidate(f)), None)
    if first is None or not os.path.isfile(first):
        return

    # the cyclic collector runs on the GUI thread only (kviewer.ui.dispatch, from the first
    # dispatcher on): with Qt objects about to exist, none may be collected on the loading thread
    gc.disable()

    prefetch(first)


def create_app() -> Any:
    from PySide6.QtWidgets import QApplication

    existing = QApplication.instance()
    app: QApplication = existing if isinstance(existing, QApplication) else QApplication(sys.argv[:1])
    app.setOrganizationName("kviewer")
    app.setApplicationName("kviewer")
    app.setApplicationDisplayName("kviewer")
    app.setDesktopFileName("kviewer")
    readable_placeholders(app)
    style = resources.style_sheet()
    if style:
        app.setStyleSheet(style)
    return app


def _luminance(c: Any) -> float:
    """WCAG relative luminance of a QColor."""

    def lin(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF())


def contrast(a: Any, b: Any) -> float:
    """WCAG contrast ratio of two QColors (1: none, 21: black on white)."""
    la, lb = sorted((_luminance(a), _luminance(b)))
    return (lb + 0.05) / (la + 0.05)


def readable_placeholders(app: Any) -> None:
    """A dark palette set without its PlaceholderText role (as most "Fusion dark" recipes do)
    keeps the light theme's grey hint text, unreadable on a dark field: make it the field's text
    colour halfway to its background."""
    from PySide6.QtGui import QColor, QPalette

    pal = app.palette()
    changed = False
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        base = pal.color(group, QPalette.ColorRole.Base)
        text = pal.color(group, QPalette.ColorRole.Text)
        if contrast(pal.color(group, QPalette.ColorRole.PlaceholderText), base) >= 3.0:
            continue
        mix = QColor.fromRgbF(*(0.4 * b + 0.6 * t for b, t in zip(base.getRgbF()[:3], text.getRgbF()[:3])))
        pal.setColor(group, QPalette.ColorRole.PlaceholderText, mix)
        changed = True
    if changed:
        app.setPalette(pal)


def run(files: Sequence[str]) -> int:
    """Open the main window with these files; return the exit status of the event loop.

    Ctrl+C in the terminal it was started from: while Qt is imported and the window is built, it
    is noted and acted on once they are done (landing inside PySide's import, it aborts the
    process in shiboken's bootstrap or leaves a Qt type half made); once the window runs, it
    closes every window as their close buttons do (:class:`CtrlCCloses`). Either way
    ``KeyboardInterrupt`` leaves here, and the command line ends with "interrupted" and 130."""
    with deferred_interrupt() as stop:
        _prefetch_first(files)
        app = create_app()
        from PySide6.QtCore import QTimer

        window = ui.mainwindow.MainWindow()
        size = os.environ.get(ENV_SIZE, "")
        if "x" in size:
            w, h = (int(v) for v in size.lower().split("x", 1))
            window.resize(w, h)
        window.show()
        threading.Thread(target=_warm_up, name="kviewer-warm-up", daemon=True).start()
        status = {"code": 0}
        shot = os.environ.get(ENV_SCREENSHOT, "")
        if shot:
            _screenshot_mode(app, window, shot, status, bool(files))
        files = _open_fleets(window, list(files))
        if files:
            QTimer.singleShot(0, lambda: window.open_files(list(files)))
        stop.check()
    ctrl_c = CtrlCCloses(app)
    try:
        code = int(app.exec())
    finally:
        ctrl_c.close()
    if ctrl_c.interrupted:
        raise KeyboardInterrupt
    return code or status["code"]


class CtrlCCloses:
    """While the event loop runs, Ctrl+C (SIGINT) closes every window as their close buttons do
    (each saves its view state) and ends the loop; :attr:`interrupted` says it happened.

    Python runs a signal's handler only when it next runs Python code, and Qt's event loop runs
    none while it waits: Python's C-level handler also writes the signal's number to a socket
    (:func:`signal.set_wakeup_fd`) that a ``QSocketNotifier`` watches, so the loop wakes at once.
    Only on the main thread and where SIGINT has Python's default handler: an ignored SIGINT (a
    background job's) stays ignored, and someone else's handler is left alone."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.interrupted = False
        self.previous: Any = None
        self.old_fd: int | None = None
        self.socks: tuple[socket.socket, socket.socket] | None = None
        self.notifier: Any = None
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return
            r, w = socket.socketpair()
            r.setblocking(False)
            w.setblocking(False)
            self.old_fd = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        except (OSError, ValueError):
            return
        self.socks = (r, w)
        self.previous = signal.signal(signal.SIGINT, self._noted)
        from PySide6.QtCore import QSocketNotifier

        self.notifier = QSocketNotifier(r.fileno(), QSocketNotifier.Type.Read)
        self.notifier.activated.connect(self._woken)

    def _noted(self, signum: int, frame: Any) -> None:
        self.interrupted = True

    def _woken(self, *args: Any) -> None:
        if self.socks is not None:
            try:
                while self.socks[0].recv(64):
                    pass
            except OSError:  # drained (BlockingIOError) or closed
                pass
        if self.interrupted:
            self.app.closeAllWindows()
            self.app.exit(0)  # every event loop of the thread, a modal dialog's too

    def close(self) -> None:
        """Put the signal handling back as it was; the sockets closed."""
        if self.socks is None:
            return
        self.notifier.setEnabled(False)
        self.notifier = None
        try:
            signal.set_wakeup_fd(self.old_fd if self.old_fd is not None else -1)
        except (OSError, ValueError):
            pass
        if signal.getsignal(signal.SIGINT) is self._noted:
            signal.signal(signal.SIGINT, self.previous)
        for sock in self.socks:
            sock.close()
        self.socks = None


def _open_fleets(window: Any, files: list[str]) -> list[str]:
    """Show the per-rank table of each ``kviewer fleet`` output among ``files`` (a double-click
    opens that rank's trace in ``window``); return the other files.

    Only names decide what is a candidate here; the database itself (untrusted: a hostile one may
    hold views that never end) is opened and read on a worker thread (:func:`kviewer.fleet.read.
    open_fleet`, bounded in time and memory). A candidate that is no fleet output after all is
    opened as a trace; one that cannot be read says why in an error dialog."""
    if not any(is_fleet_candidate(f) for f in files):
        return files

    rest = []
    runner = window.runner  # the window's: its shutdown drops a read still in flight
    window.fleet_windows = getattr(window, "fleet_windows", [])
    for f in files:
        if not is_fleet_candidate(f):
            rest.append(f)
            continue

        def done(result: Any, f: str = f) -> None:
            if result is None:
                window.open_files([f])
                return

            db, ranks = result
            fw = ui.fleet_window.FleetWindow(db, lambda path: window.open_files([path]), ranks=ranks)
            fw.show()
            window.fleet_windows.append(fw)  # kept alive with the main window

        def failed(message: str, f: str = f) -> None:
            ui.dialogs.show_error(window, "Could not open the fleet output", f"{f}: {message}")

        runner.run(f"fleet:{f}", lambda f=f: open_fleet(f), done, failed)
    return rest


def _screenshot_mode(app: Any, window: Any, out: str, status: dict[str, int], has_files: bool) -> None:
    """Save a picture of the window once every file is open, then quit (no blocking dialogs)."""
    from PySide6.QtCore import QTimer

    def report(_parent: Any, title: str, text: str) -> None:
        status["code"] = 2
        print(f"kviewer: error: {text}", file=sys.stderr)

    ui.dialogs.show_error = report  # type: ignore[assignment]

    def save() -> None:
        runner = getattr(window, "runner", None)
        if runner is not None and runner.pending():
            # a comparison or an analysis dock is still computing: picture the finished window
            QTimer.singleShot(100, save)
            return
        app.processEvents()
        if not window.grab().save(out):
            print(f"kviewer: error: could not write {out}", file=sys.stderr)
            status["code"] = 2
        window.close()
        app.quit()

    if has_files:
        window.loader.idle.connect(lambda: QTimer.singleShot(200, save))
    else:
        QTimer.singleShot(200, save)
