"""Pictures from the main window: File › Export Picture… (Ctrl+Shift+S) and Edit › Copy Picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QImage

from kviewer.ui import picture_actions
from kviewer.ui.export import ExportDialog
from tests.ui.conftest import drop_files, wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"


class DialogStandIn:
    """Replaces the blocking ``exec``: records what the dialog offered and saves as a user would."""

    def __init__(self, out: Path, choose: str | None = None) -> None:
        self.out = out
        self.choose = choose
        self.offered: list[str] = []
        self.preselected = ""
        self.directory = ""

    def __call__(self, dlg: ExportDialog) -> int:
        self.offered = [dlg.view_choice.itemText(i) for i in range(dlg.view_choice.count())]
        self.preselected = dlg.view_choice.currentText()
        self.directory = dlg.directory
        if self.choose is not None:
            dlg.view_choice.setCurrentText(self.choose)
        dlg.save_to(self.out)
        return 1


def _pixels(img: QImage) -> np.ndarray:
    rgb = img.convertToFormat(QImage.Format.Format_RGB888)
    h, w, bpl = rgb.height(), rgb.width(), rgb.bytesPerLine()
    return np.frombuffer(rgb.constBits(), dtype=np.uint8, count=h * bpl).reshape(h, bpl)[:, : w * 3].reshape(h, w, 3).copy()


def _colourful(img: QImage) -> int:
    """Pixels with a clear hue (kernel bars, points), not greys."""
    px = _pixels(img).astype(np.int16)
    return int(((px.max(axis=2) - px.min(axis=2)) > 60).sum())


def test_ctrl_shift_s_exports_the_timeline_as_png(
    qtbot: Any, window: Any, sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.analysis.roofline_panel.shown is not None, timeout=5000)
    stand_in = DialogStandIn(tmp_path / "timeline.png")
    monkeypatch.setattr(ExportDialog, "exec", lambda dlg: stand_in(dlg))
    assert window.export_action.shortcut().toString() == "Ctrl+Shift+S"
    # a window shortcut fires only in the active window, and activation is asynchronous (the load's
    # progress dialog was the active window a moment ago): a key sent before it lands is lost, as
    # one typed into another window would be
    window.activateWindow()
    qtbot.waitUntil(lambda: QGuiApplication.focusWindow() is window.windowHandle(), timeout=5000)
    window.timeline.canvas.setFocus()
    qtbot.keyClick(window.timeline.canvas, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert stand_in.offered, "Ctrl+Shift+S did not open the export dialog"
    assert stand_in.offered == [picture_actions.TIMELINE, picture_actions.TABLE, picture_actions.ROOFLINE, picture_actions.WINDOW]
    assert stand_in.preselected == picture_actions.TIMELINE
    out = tmp_path / "timeline.png"
    img = QImage(str(out))
    assert not img.isNull()
    assert (img.width(), img.height()) == (window.timeline.width(), window.timeline.height())
    assert _colourful(img) > 2000, "the timeline picture has no kernel bars"
    # the folder is remembered for the next export
    assert window.pictures.directory() == str(tmp_path)
    assert "Saved the picture" in window.statusBar().currentMessage()


def test_export_roofline_and_compare_view(
    qtbot: Any, window: Any, sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    window.open_files([str(sample_traces / EAGER), str(sample_traces / COMPILED)])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    qtbot.waitUntil(lambda: window.analysis.roofline_panel.shown is not None, timeout=5000)
    # the compare view is offered while comparing, and preselected when it has focus
    window.activateWindow()
    window.compare.view.diff_view.setFocus()
    stand_in = DialogStandIn(tmp_path / "compare.png")
    monkeypatch.setattr(ExportDialog, "exec", lambda dlg: stand_in(dlg))
    window.export_action.trigger()
    assert picture_actions.COMPARE in stand_in.offered
    assert stand_in.preselected == picture_actions.COMPARE
    img = QImage(str(tmp_path / "compare.png"))
    assert (img.width(), img.height()) == (window.compare.view.width(), window.compare.view.height())
    assert len(np.unique(_pixels(img).reshape(-1, 3), axis=0)) > 20
    # the roofline, with its points, as SVG and as PNG
    stand_in = DialogStandIn(tmp_path / "roofline.png", choose=picture_actions.ROOFLINE)
    monkeypatch.setattr(ExportDialog, "exec", lambda dlg: stand_in(dlg))
    window.export_action.trigger()
    img = QImage(str(tmp_path / "roofline.png"))
    assert not img.isNull() and _colourful(img) > 50


def test_copy_picture_of_the_focused_view(qtbot: Any, window: Any, sample_traces: Path) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    window.activateWindow()
    window.table.view.setFocus()
    qtbot.waitUntil(lambda: window.table.view.hasFocus(), timeout=2000)
    window.copy_picture_action.trigger()
    mime = QGuiApplication.clipboard().mimeData()
    assert mime.hasImage()
    img = QImage(mime.imageData())
    assert (img.width(), img.height()) == (window.table.width(), window.table.height())
    assert "kernel table" in window.statusBar().currentMessage()
    # focus elsewhere (no view): the timeline is copied
    window.menuBar().setFocus()
    assert window.pictures.copy() == picture_actions.TIMELINE


def test_export_preselects_the_view_focused_in_this_window_while_another_is_active(
    qtbot: Any, window: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flake behind a random "Timeline" preselection: activation is asynchronous, and while
    another top-level window (the closing progress dialog, a second window) is the active one the
    application has no focus widget. The window's own focus widget decides."""
    from PySide6.QtWidgets import QWidget

    from tests.ui.conftest import make_trace
    from kviewer.session.tracks import TraceTracks

    window.state.add_trace(TraceTracks.build(make_trace()))
    window.table.view.setFocus()
    other = QWidget()
    qtbot.addWidget(other)
    other.show()
    other.activateWindow()
    qtbot.waitUntil(lambda: QGuiApplication.focusWindow() is other.windowHandle(), timeout=5000)
    stand_in = DialogStandIn(tmp_path / "table.png")
    monkeypatch.setattr(ExportDialog, "exec", lambda dlg: stand_in(dlg))
    window.export_action.trigger()
    assert stand_in.preselected == picture_actions.TABLE
