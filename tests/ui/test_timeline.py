"""The timeline: what it draws (pixels), hover and click, keys, collapse, find, details."""

from __future__ import annotations

import colorsys
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor, QImage

from kviewer.session import colors
from kviewer.ui.timeline import TimelineView, tooltip_text
from kviewer.session.tracks import TraceTracks
from kviewer.ui.viewstate import Selection, ViewState
from tests.ui.conftest import make_sol, make_trace


@pytest.fixture
def timeline(qtbot: Any) -> TimelineView:
    state = ViewState()
    tl = TimelineView(state)
    qtbot.addWidget(tl)
    tl.resize(1200, 500)
    tl.show()
    qtbot.waitExposed(tl)
    return tl


def _open(tl: TimelineView, trace: Any, sol: Any = None) -> TraceTracks:
    tracks = TraceTracks.build(trace, sol=sol)
    tl.state.add_trace(tracks)
    return tracks


def _to_widget(tl: TimelineView, x: float, y: float) -> QPoint:
    scene = tl.vb.mapViewToScene(QPointF(x, y))
    return tl.canvas.mapFromScene(scene)


def _bar_centre(tl: TimelineView, tracks: TraceTracks, table: str, row: int, frac: float = 0.5) -> QPoint:
    lane, _pos = tracks.locate(table, row)
    r = tl.row_of_lane(tracks, lane)
    df = tracks.trace.table(table)
    s = float(df["start"].iat[row] - tracks.offset_ns)
    e = float(df["end"].iat[row] - tracks.offset_ns)
    return _to_widget(tl, s + (e - s) * frac, r.y + r.h / 2)


def _grab(tl: TimelineView) -> QImage:
    return tl.canvas.grab().toImage()


def _rgb(img: QImage, p: QPoint) -> tuple[int, int, int]:
    c = QColor(img.pixel(p))
    return c.red(), c.green(), c.blue()


def test_rows_follow_the_trace_structure(timeline: TimelineView) -> None:
    tracks = _open(timeline, make_trace(200, streams=3))
    labels = [r.label for r in timeline.rows]
    assert labels[0] == "synthetic.json"
    assert "GPU 0 · NVIDIA H200" in labels
    assert [r.label for r in timeline.rows if r.kind == "lane" and r.lane.table == "kernels"] == ["stream 7", "stream 8", "stream 9"]
    assert any(label.startswith("CPU pid 10") for label in labels)
    assert timeline.lane_count() == len(tracks.lanes) == 4


def test_draws_kernels_in_their_colours(qtbot: Any, timeline: TimelineView) -> None:
    trace = make_trace(200)
    tracks = _open(timeline, trace)
    state = timeline.state
    k = trace.kernels
    target = int(np.argmax(k["dur"].to_numpy()))
    state.set_selection(Selection(tracks.key, "kernels", target))
    timeline.fit_selection()
    state.set_selection(None)
    img = _grab(timeline)
    expected = colors.palette_rgb()[int(colors.kernel_colours(k["short_name"])[target])]
    got = _rgb(img, _bar_centre(timeline, tracks, "kernels", target))
    assert got == expected
    # where no bar is, the background stays white; and the image is not blank
    row = timeline.rows[-1]
    assert _rgb(img, _to_widget(timeline, timeline.visible_range()[0] + 1, row.y + row.h + 40)) == (255, 255, 255)
    arr = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine())
    assert len(np.unique(arr)) > 20


def test_full_zoom_out_still_shows_every_stream(timeline: TimelineView) -> None:
    trace = make_trace(20_000, streams=3)
    tracks = _open(timeline, trace)
    timeline.fit_all()
    img = _grab(timeline)
    for r in timeline.rows:
        if r.kind == "lane" and r.lane.table == "kernels":
            x0, x1 = timeline.visible_range()
            xs = np.linspace(x0 + (x1 - x0) * 0.1, x0 + (x1 - x0) * 0.9, 25)
            painted = [_rgb(img, _to_widget(timeline, x, r.y + r.h / 2)) != (255, 255, 255) for x in xs]
            assert sum(painted) >= 20, r.label
    assert timeline.item._frame is not None and timeline.item._frame.bars < 2 * 1200 * len(tracks.lanes)


def test_bound_colours_and_sol_inner_bar(qtbot: Any, timeline: TimelineView) -> None:
    n = 60
    trace = make_trace(n, streams=1)
    k = trace.kernels
    sol = make_sol(trace, np.where(np.arange(n) % 2 == 0, "memory", "compute"), k["dur"].to_numpy() * 0.4)
    tracks = _open(timeline, trace, sol)
    for target, hue_range in ((10, (10, 45)), (11, (100, 155))):
        timeline.state.set_selection(Selection(tracks.key, "kernels", target))
        timeline.fit_selection()
        timeline.state.set_selection(None)
        img = _grab(timeline)
        lane, _ = tracks.locate("kernels", target)
        row = timeline.row_of_lane(tracks, lane)
        s = float(k["start"].iat[target] - tracks.offset_ns)
        e = float(k["end"].iat[target] - tracks.offset_ns)
        outer = _rgb(img, _to_widget(timeline, s + (e - s) * 0.7, row.y + 4))
        h, _l, _s = colorsys.rgb_to_hls(*(c / 255 for c in outer))
        assert hue_range[0] <= h * 360 <= hue_range[1], (target, outer)
        # along the bottom of the bar, its SOL part (first 40 %) is darker than the rest
        inner = _rgb(img, _to_widget(timeline, s + (e - s) * 0.2, row.y + row.h - 4))
        after = _rgb(img, _to_widget(timeline, s + (e - s) * 0.7, row.y + row.h - 4))
        assert sum(inner) < sum(after) - 60
    text = tooltip_text(tracks, "kernels", 10)
    assert "bound: memory" in text and "SOL time" in text


def test_hover_and_click_select_the_bar(qtbot: Any, timeline: TimelineView) -> None:
    trace = make_trace(100)
    tracks = _open(timeline, trace)
    state = timeline.state
    target = 42
    state.set_selection(Selection(tracks.key, "kernels", target))
    timeline.fit_selection()
    state.set_selection(None)
    pos = _bar_centre(timeline, tracks, "kernels", target)
    found = timeline.hit(timeline.canvas.mapToScene(pos))
    assert found is not None and int(found[1].ids[found[2]]) == target
    text = tooltip_text(tracks, "kernels", target)
    k = trace.kernels
    assert str(k["short_name"].iat[target]) in text
    assert f"grid: {k['grid_x'].iat[target]}×1×1" in text and "block: 128×1×1" in text
    assert f"stream {k['stream'].iat[target]}" in text and "duration:" in text
    qtbot.mouseClick(timeline.canvas.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert state.selection == Selection(tracks.key, "kernels", target)
    # the selected kernel is outlined, its launching call too, with a flow arrow between them
    img = _grab(timeline)
    arr = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)
    red = (arr[..., 2] > 170) & (arr[..., 1] < 80) & (arr[..., 0] < 80)
    assert red.sum() > 30
    # clicking empty space clears the selection
    last = timeline.rows[-1]
    qtbot.mouseClick(timeline.canvas.viewport(), Qt.MouseButton.LeftButton, pos=_to_widget(timeline, timeline.visible_range()[0] + 1, last.y + last.h + 30))
    assert state.selection is None


def test_keys_zoom_pan_fit_and_clear(qtbot: Any, timeline: TimelineView) -> None:
    tracks = _open(timeline, make_trace(100))
    state = timeline.state
    canvas = timeline.canvas
    x0, x1 = timeline.visible_range()
    qtbot.keyClick(canvas, Qt.Key.Key_W)
    a0, a1 = timeline.visible_range()
    assert a1 - a0 == pytest.approx((x1 - x0) * 0.8)
    qtbot.keyClick(canvas, Qt.Key.Key_D)
    b0, b1 = timeline.visible_range()
    assert b0 == pytest.approx(a0 + (a1 - a0) * 0.15) and b1 - b0 == pytest.approx(a1 - a0)
    qtbot.keyClick(canvas, Qt.Key.Key_A)
    assert timeline.visible_range() == pytest.approx((a0, a1))
    qtbot.keyClick(canvas, Qt.Key.Key_S)
    c0, c1 = timeline.visible_range()
    assert c1 - c0 == pytest.approx(x1 - x0)
    state.set_selection(Selection(tracks.key, "kernels", 5))
    qtbot.keyClick(canvas, Qt.Key.Key_F)
    f0, f1 = timeline.visible_range()
    k = tracks.trace.kernels
    s, e = k["start"].iat[5] - tracks.offset_ns, k["end"].iat[5] - tracks.offset_ns
    assert f0 < s and e < f1 and (e - s) / (f1 - f0) > 0.5
    qtbot.keyClick(canvas, Qt.Key.Key_Escape)
    assert state.selection is None
    qtbot.keyClick(canvas, Qt.Key.Key_F)  # nothing selected: fit everything
    lo, hi = state.span()
    g0, g1 = timeline.visible_range()
    assert g0 <= lo and g1 >= hi


def test_collapse_a_group_by_clicking_its_header(qtbot: Any, timeline: TimelineView) -> None:
    _open(timeline, make_trace(100))
    n_rows = len(timeline.rows)
    gpu = next(r for r in timeline.rows if r.label.startswith("GPU 0"))
    pos = _to_widget(timeline, timeline.visible_range()[0], gpu.y + gpu.h / 2)
    qtbot.mouseClick(timeline.canvas.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(30, pos.y()))
    assert gpu.group.collapsed
    # its rows (3 stream lanes, the utilisation and kernels-in-flight counters) go
    assert len(gpu.group.children) == 5
    assert len(timeline.rows) == n_rows - 5
    # revealing a kernel expands its group again
    tracks = timeline.state.traces[0]
    timeline.state.set_selection(Selection(tracks.key, "kernels", 3), reveal=True)
    assert not gpu.group.collapsed and len(timeline.rows) == n_rows


def test_range_is_shared_through_the_state(timeline: TimelineView) -> None:
    _open(timeline, make_trace(100))
    timeline.state.set_range(1000.0, 5000.0)
    assert timeline.visible_range() == pytest.approx((1000.0, 5000.0))
    timeline.zoom(0.5)
    assert timeline.state.range == pytest.approx((2000.0, 4000.0))


def test_find_next_previous(qtbot: Any, synthetic_window: Any) -> None:
    w = synthetic_window
    state = w.state
    w.activateWindow()
    qtbot.waitActive(w)
    qtbot.keyClick(w, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert w.find_bar.isVisible()
    qtbot.keyClicks(w.find_bar.edit, "gemm_kernel_5")
    qtbot.keyClick(w.find_bar.edit, Qt.Key.Key_Return)
    k = state.traces[0].trace.kernels
    hits = np.flatnonzero(k["short_name"].astype(str).to_numpy() == "gemm_kernel_5")
    assert state.selection == Selection(state.traces[0].key, "kernels", int(hits[0]))
    w.find_bar.next()
    assert state.selection.row == int(hits[1])
    w.find_bar.previous()
    w.find_bar.previous()
    assert state.selection.row == int(hits[-1])
    assert w.find_bar.count_label.text() == f"{len(hits)} of {len(hits)}"
    qtbot.keyClick(w.find_bar.edit, Qt.Key.Key_Escape)
    assert not w.find_bar.isVisible()


def test_details_panel_and_launch_link(qtbot: Any, synthetic_window: Any) -> None:
    w = synthetic_window
    state = w.state
    tracks = state.traces[0]
    state.set_selection(Selection(tracks.key, "kernels", 7))
    html = w.details.toPlainText()
    k = tracks.trace.kernels
    assert str(k["short_name"].iat[7]) in html and "grid_x" in html and "Launched by cudaLaunchKernel" in html
    from PySide6.QtCore import QUrl

    w.details.anchorClicked.emit(QUrl(f"select:{tracks.key}:cpu_slices:7"))
    assert state.selection == Selection(tracks.key, "cpu_slices", 7)
    assert "Launches gemm_kernel" in w.details.toPlainText()


def test_backspace_goes_back_to_the_view_before_f(qtbot: Any, timeline: TimelineView) -> None:
    tracks = _open(timeline, make_trace(100))
    state = timeline.state
    canvas = timeline.canvas
    qtbot.keyClick(canvas, Qt.Key.Key_W)
    before = timeline.visible_range()
    state.set_selection(Selection(tracks.key, "kernels", 5))
    qtbot.keyClick(canvas, Qt.Key.Key_F)
    assert timeline.visible_range()[1] - timeline.visible_range()[0] < (before[1] - before[0]) / 10
    assert len(state.session.stack) == 1
    qtbot.keyClick(canvas, Qt.Key.Key_Backspace)
    assert timeline.visible_range() == pytest.approx(before)
    assert state.range == pytest.approx(before) and state.session.stack == []
    qtbot.keyClick(canvas, Qt.Key.Key_Backspace)  # nothing to go back to: the view stays
    assert timeline.visible_range() == pytest.approx(before)
