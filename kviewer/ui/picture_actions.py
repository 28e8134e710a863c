"""File › Export Picture… (Ctrl+Shift+S) and Edit › Copy Picture for the main window.

The window hands over its views by name (:meth:`PictureActions.views`); the export dialog
(:func:`kviewer.ui.export.export_dialog`) lists the visible ones and preselects the view that has
keyboard focus. Copy Picture puts the focused view (the timeline when focus is elsewhere) on the
clipboard as a bitmap and an SVG. The folder of the last export is remembered in QSettings.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from PySide6.QtCore import QObject, QPoint, QRect, QSettings
from PySide6.QtWidgets import QApplication, QWidget

from kviewer.ui.export import copy_picture, export_dialog

TIMELINE = "Timeline (visible range)"
TABLE = "Kernel table"
ROOFLINE = "Roofline"
FUSION = "Fusion candidates"
COMPARE = "Compare view"
WINDOW = "Whole window"
SETTINGS_KEY = "export/directory"


class PictureActions(QObject):
    """Export and copy pictures of the views ``views()`` returns (name -> widget or None)."""

    def __init__(self, window: QWidget, views: Callable[[], Mapping[str, QWidget | None]], status: Callable[[str], None]) -> None:
        super().__init__(window)
        self.window = window
        self._views = views
        self.status = status

    def views(self) -> dict[str, QWidget]:
        """The views that can be pictured now (on screen: not in a hidden dock tab), in menu order."""
        return {name: w for name, w in self._views().items() if w is not None and self._on_screen(w)}

    def _on_screen(self, widget: QWidget) -> bool:
        if widget is self.window:
            return widget.isVisible()
        # a dock whose tab is not the current one stays "visible", moved out of the window
        at = QRect(widget.mapTo(self.window, QPoint(0, 0)), widget.size())
        return widget.isVisible() and self.window.rect().intersects(at)

    def focused_view(self) -> str | None:
        """The name of the view holding keyboard focus (the whole window is never "focused").

        The window's own focus widget decides, not the application's: that one is None while
        another top-level window (a closing progress dialog, another kviewer window) is still the
        active one, and activation is asynchronous -- asking the application preselected the
        timeline at random (a flaky export test)."""
        focus = self.window.focusWidget() or QApplication.focusWidget()
        if focus is None:
            return None
        for name, widget in self.views().items():
            if widget is self.window:
                continue
            if widget is focus or widget.isAncestorOf(focus):
                return name
        return None

    def directory(self) -> str:
        value = QSettings().value(SETTINGS_KEY, "")
        return str(value) if value else ""

    def export(self) -> None:
        """Show the export dialog; remember where the picture went."""
        views = self.views()
        current = self.focused_view() or (TIMELINE if TIMELINE in views else None)
        path = export_dialog(self.window, views, current=current, directory=self.directory())
        if path is not None:
            QSettings().setValue(SETTINGS_KEY, os.fspath(path.parent))
            self.status(f"Saved the picture to {path}")

    def copy(self) -> str | None:
        """Copy the focused view (else the timeline) to the clipboard; returns its name."""
        views = self.views()
        name = self.focused_view()
        if name is None:
            name = TIMELINE if TIMELINE in views else next(iter(views), None)
        if name is None:
            return None
        copy_picture(views[name])
        self.status(f"Copied a picture of the {name.split(' (')[0].lower()} to the clipboard")
        return name
