"""The session palette (``kviewer.session.colors``) as Qt colours and brushes."""

from __future__ import annotations

from PySide6.QtGui import QBrush, QColor

from kviewer.session.colors import palette_rgb


def qcolors() -> list[QColor]:
    return [QColor(r, g, b) for r, g, b in palette_rgb()]


def qbrushes() -> list[QBrush]:
    return [QBrush(c) for c in qcolors()]
