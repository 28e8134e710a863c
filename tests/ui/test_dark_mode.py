"""Dark mode (issue 27): under a dark palette (Fusion + a dark QPalette, as a dark desktop theme
gives) the table's header and alternate rows, the status bar and the filter's hint text read as
light text on a dark ground. Checked on pixels: the contrast of the text with its background."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication

from kviewer.ui.app import contrast, readable_placeholders


def _dark_palette() -> QPalette:
    """The usual "Fusion dark" recipe: no PlaceholderText role set."""
    p = QPalette()
    R = QPalette.ColorRole
    for role, rgb in ((R.Window, (53, 53, 53)), (R.WindowText, (255, 255, 255)), (R.Base, (35, 35, 35)),
                      (R.AlternateBase, (66, 66, 66)), (R.ToolTipBase, (25, 25, 25)), (R.ToolTipText, (255, 255, 255)),
                      (R.Text, (255, 255, 255)), (R.Button, (53, 53, 53)), (R.ButtonText, (255, 255, 255)),
                      (R.BrightText, (255, 0, 0)), (R.Highlight, (42, 130, 218)), (R.HighlightedText, (35, 35, 35)),
                      (R.Mid, (80, 80, 80)), (R.Midlight, (70, 70, 70))):
        p.setColor(role, QColor(*rgb))
    return p


@pytest.fixture
def dark(qapp: QApplication) -> Iterator[QApplication]:
    from kviewer.ui import resources

    style, palette, sheet = qapp.style().name(), qapp.palette(), qapp.styleSheet()
    qapp.setStyle("Fusion")
    qapp.setPalette(_dark_palette())
    readable_placeholders(qapp)  # what create_app does
    qapp.setStyleSheet(resources.style_sheet())
    try:
        yield qapp
    finally:
        qapp.setStyleSheet(sheet)
        qapp.setPalette(palette)
        qapp.setStyle(style)


def _text_contrast(img: QImage) -> tuple[QColor, float]:
    """(background, contrast of the pixel that differs most from it): the background is the most
    common colour, the text its most distant pixel (anti-aliased glyphs reach their colour)."""
    counts = Counter(img.pixel(x, y) & 0xFFFFFF for x in range(img.width()) for y in range(img.height()))
    bg = QColor(counts.most_common(1)[0][0])
    best = max(contrast(QColor(rgb), bg) for rgb in counts)
    return bg, best


def _lum(c: QColor) -> float:
    return (0.2126 * c.red() + 0.7152 * c.green() + 0.0722 * c.blue()) / 255.0


def test_header_rows_status_bar_and_hint_are_readable_under_a_dark_palette(qtbot: Any, dark: QApplication,
                                                                             synthetic_window: Any) -> None:
    w = synthetic_window
    w.table_dock.show()
    w.table_dock.raise_()
    qtbot.wait(50)
    view = w.table.view
    header = view.horizontalHeader().grab().toImage()
    bg, ratio = _text_contrast(header)
    assert _lum(bg) < 0.35 and ratio >= 4.5, (bg.name(), ratio)  # was white text on #eef1f4: ~1.1
    status = w.statusBar().grab().toImage()
    bg, ratio = _text_contrast(status)
    assert _lum(bg) < 0.35 and ratio >= 4.5, (bg.name(), ratio)
    # alternate rows: the second row's ground is the palette's dark alternate base, not #f6f8fa
    rows = view.viewport().grab().toImage()
    h = view.rowHeight(0)
    second = QColor(rows.pixel(rows.width() - 3, h + h // 2))
    assert _lum(second) < 0.35, second.name()
    # the filter box's hint text (empty box): readable on the dark field
    edit = w.table.filter_edit
    edit.clear()
    hint = edit.grab().toImage()
    bg, ratio = _text_contrast(hint.copy(4, 4, hint.width() - 8, hint.height() - 8))
    assert _lum(bg) < 0.35 and ratio >= 3.0, (bg.name(), ratio)
