"""``kviewer [FILE ...]``: start the desktop app.

Start-up imports only Qt, pyqtgraph and numpy on the way to the first window: the loaders (and
pandas) are imported in a background thread while the window appears, and parsing happens in the
loading thread.
"""

from __future__ import annotations

import sys
import threading
from typing import Sequence


def _warm_up() -> None:
    """Import the loaders in the background so the first open does not wait for pandas."""
    try:
        import kviewer.io  # noqa: F401
    except Exception:  # the load itself reports any real problem
        pass


def create_app() -> "object":
    from PySide6.QtWidgets import QApplication

    from kviewer.ui import resources

    app = QApplication.instance()
    if app is None:
        app = QApplication(sys.argv[:1])
    app.setOrganizationName("kviewer")
    app.setApplicationName("kviewer")
    app.setApplicationDisplayName("kviewer")
    app.setDesktopFileName("kviewer")
    style = resources.style_sheet()
    if style:
        app.setStyleSheet(style)
    return app


def run(files: Sequence[str]) -> int:
    """Open the main window with these files; return the exit status of the event loop."""
    app = create_app()
    from PySide6.QtCore import QTimer

    from kviewer.ui.mainwindow import MainWindow

    window = MainWindow()
    window.show()
    threading.Thread(target=_warm_up, name="kviewer-warm-up", daemon=True).start()
    if files:
        QTimer.singleShot(0, lambda: window.open_files(list(files)))
    return int(app.exec())  # type: ignore[attr-defined]
