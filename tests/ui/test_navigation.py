"""Navigation as in Perfetto and Nsight Systems (issue 27): F and the lanes' context menu zoom to a
dragged range; the time axis never writes one label twice and an empty window has no ticks."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt

from kviewer.session.tracks import TraceTracks
from kviewer.ui.timeline import TimelineView
from kviewer.ui.viewstate import Selection, ViewState
from tests.ui.conftest import make_trace


@pytest.fixture
def timeline(qtbot: Any) -> TimelineView:
    tl = TimelineView(ViewState())
    qtbot.addWidget(tl)
    tl.resize(1200, 500)
    tl.show()
    qtbot.waitExposed(tl)
    return tl


def _drag_axis(qtbot: Any, tl: TimelineView, t0: float, t1: float) -> None:
    """Drag along the time axis from t0 to t1 (display ns), as a user selects a range."""
    from PySide6.QtCore import QPointF

    axis = tl.time_axis
    y = axis.sceneBoundingRect().center().y()
    a = tl.canvas.mapFromScene(QPointF(tl.vb.mapViewToScene(QPointF(t0, 0)).x(), y))
    b = tl.canvas.mapFromScene(QPointF(tl.vb.mapViewToScene(QPointF(t1, 0)).x(), y))
    vp = tl.canvas.viewport()
    qtbot.mousePress(vp, Qt.MouseButton.LeftButton, pos=a)
    for i in range(1, 6):
        qtbot.mouseMove(vp, a + (b - a) * (i / 5))
    qtbot.mouseRelease(vp, Qt.MouseButton.LeftButton, pos=b)


def test_f_zooms_to_a_range_dragged_on_the_time_axis(qtbot: Any, timeline: TimelineView) -> None:
    tracks = TraceTracks.build(make_trace(200))
    timeline.state.add_trace(tracks)
    x0, x1 = timeline.visible_range()
    t0, t1 = x0 + (x1 - x0) * 0.40, x0 + (x1 - x0) * 0.45
    _drag_axis(qtbot, timeline, t0, t1)
    rng = timeline.state.time_selection
    assert rng is not None and rng[0] == pytest.approx(t0, rel=0.01) and rng[1] == pytest.approx(t1, rel=0.01)
    qtbot.keyClick(timeline.canvas, Qt.Key.Key_F)
    assert timeline.visible_range() == pytest.approx(rng)  # exactly the range, as Nsight's zoom does
    qtbot.keyClick(timeline.canvas, Qt.Key.Key_Backspace)
    assert timeline.visible_range() == pytest.approx((x0, x1))


def test_f_zooms_to_whichever_was_picked_last(timeline: TimelineView) -> None:
    tracks = TraceTracks.build(make_trace(200))
    state = timeline.state
    state.add_trace(tracks)
    k = tracks.trace.kernels
    s, e = float(k["start"].iat[5] - tracks.offset_ns), float(k["end"].iat[5] - tracks.offset_ns)
    state.set_time_selection((s + 1e6, s + 3e6))
    state.set_selection(Selection(tracks.key, "kernels", 5))  # the bar is newer
    timeline.fit_selection()
    f0, f1 = timeline.visible_range()
    assert f0 < s and e < f1 and (e - s) / (f1 - f0) > 0.5
    state.set_time_selection((s + 2e6, s + 4e6))  # now the range is
    timeline.fit_selection()
    assert timeline.visible_range() == pytest.approx((s + 2e6, s + 4e6))
    state.set_time_selection(None)  # the bar is left
    timeline.fit_selection()
    assert timeline.visible_range() == pytest.approx((f0, f1))


def test_the_lanes_context_menu_zooms_back_and_fits(timeline: TimelineView) -> None:
    tracks = TraceTracks.build(make_trace(200))
    state = timeline.state
    state.add_trace(tracks)
    full = timeline.visible_range()

    def act(text: str) -> Any:
        return next(a for a in timeline.view_menu().actions() if a.text().split("\t")[0] == text)

    assert not act("Zoom to Selection").isEnabled() and not act("Zoom Back").isEnabled()
    state.set_time_selection((2e6, 2.5e6))
    act("Zoom to Selection").trigger()
    assert timeline.visible_range() == pytest.approx((2e6, 2.5e6))
    act("Zoom Back").trigger()
    assert timeline.visible_range() == pytest.approx(full)
    act("Clear Range").trigger()
    assert state.time_selection is None
    assert "Clear Range" not in [a.text() for a in timeline.view_menu().actions()]
    timeline.set_range(1e6, 1.1e6)
    act("Fit All").trigger()
    assert timeline.visible_range() == pytest.approx(full)


# a real popup under the offscreen platform, which cannot do everything a popup asks of it
@pytest.mark.qt_log_ignore("This plugin does not support (propagateSizeHints|raise|grabbing)")
def test_a_right_click_on_the_lanes_opens_the_view_menu(qtbot: Any, timeline: TimelineView) -> None:
    from PySide6.QtCore import QPoint, QTimer
    from PySide6.QtWidgets import QApplication

    timeline.state.add_trace(TraceTracks.build(make_trace(50)))
    shown: list[list[str]] = []

    def close_popup() -> None:
        popup = QApplication.activePopupWidget()
        if popup is None:
            QTimer.singleShot(20, close_popup)  # not up yet
            return
        shown.append([a.text() for a in popup.actions()])
        popup.close()

    QTimer.singleShot(20, close_popup)
    centre = timeline.canvas.mapFromScene(timeline.vb.sceneBoundingRect().center())
    qtbot.mouseClick(timeline.canvas.viewport(), Qt.MouseButton.RightButton, pos=QPoint(centre.x(), centre.y()))
    qtbot.waitUntil(lambda: bool(shown), timeout=5000)
    assert shown[0][0].startswith("Zoom to Selection")


def _labels(tl: TimelineView, lo: float, hi: float) -> list[str]:
    axis = tl.time_axis
    levels = axis.tickValues(lo, hi, 1200)
    return [s for sp, vals in levels for s in axis.tickStrings(vals, 1.0, sp)]


def test_no_tick_label_twice_at_any_zoom(timeline: TimelineView) -> None:
    timeline.state.add_trace(TraceTracks.build(make_trace(50)))
    for centre in (0.0, 3.7e5, 8_261_195_123.0, 1.2517e13):
        for width in (12.0, 150.0, 2e3, 4.5e4, 1e6, 3e7, 8e8, 2e10):
            labels = _labels(timeline, centre - width / 2, centre + width / 2)
            assert labels and len(set(labels)) == len(labels), (centre, width, labels)


def test_an_empty_window_has_no_ticks(qtbot: Any, timeline: TimelineView) -> None:
    assert timeline.time_axis.tickValues(*timeline.visible_range(), 1200) == []
    tracks = TraceTracks.build(make_trace(50))
    timeline.state.add_trace(tracks)
    assert timeline.time_axis.tickValues(*timeline.visible_range(), 1200)
    timeline.state.remove_trace(tracks.key)
    assert timeline.time_axis.tickValues(*timeline.visible_range(), 1200) == []


def test_file_open_folder_opens_a_rank_folder(qtbot: Any, window: Any, errors: Any, sample_traces: Any,
                                              tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from PySide6.QtWidgets import QFileDialog

    from tests.ui.conftest import wait_idle

    monkeypatch.setenv("KVIEWER_RANK_WORKERS", "1")  # no worker processes inside the Qt test
    folder = tmp_path / "job"
    folder.mkdir()
    for rank, name in enumerate(("h200_llm_block_eager.pt.trace.json.gz", "h200_llm_block_compiled.pt.trace.json.gz")):
        shutil.copy(sample_traces / name, folder / f"rank-{rank}.pt.trace.json.gz")
    asked: list[tuple[Any, ...]] = []
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a: (asked.append(a), str(folder))[1]))
    file_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&File")
    action = next(a for a in file_menu.actions() if a.text().startswith("Open &Folder"))
    action.trigger()
    wait_idle(qtbot, window)
    assert asked and errors.calls == []
    [tracks] = window.state.traces
    assert sorted(set(tracks.trace.kernels["rank"].astype(int))) == [0, 1]


def test_late_in_a_trace_the_anchor_tick_is_clear_of_the_edge(qtbot: Any, timeline: TimelineView) -> None:
    """The anchor tick once sat on the view's left edge, where pyqtgraph does not draw it: only
    "+50 µs", "+100 µs"... were shown, offsets from nothing."""
    trace = make_trace(50)
    for col in ("start", "end"):  # a trace 8.3 s long
        trace.kernels[col] = trace.kernels[col].to_numpy() + 8_300_000_000
    timeline.state.add_trace(TraceTracks.build(trace))
    timeline.set_range(8.2611e9, 8.2614e9)  # the first major tick (50 µs apart) on the edge
    assert timeline.visible_range() == pytest.approx((8.2611e9, 8.2614e9))
    axis = timeline.time_axis
    lo, hi = axis.range
    levels = axis.tickValues(lo, hi, 1200)
    spacing, values = levels[0]
    labels = axis.tickStrings(values, 1.0, spacing)
    [anchor] = [v for v, t in zip(values, labels) if not t.startswith(("+", "−"))]
    assert anchor >= lo + 0.2 * spacing and labels[values.index(anchor)] == "8.26115 s"
