"""Interaction polish (issue 16, point 4): the selection is drawn at once, tooltips, keys right
after a file opens, times with enough digits late in a long trace, About, the status bar."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QRectF, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from kviewer.session.tracks import TraceTracks
from kviewer.session.axis_ticks import tick_labels
from kviewer.ui.timeline import TimeAxis, TimelineView, tooltip_text
from kviewer.ui.viewstate import Selection, ViewState
from tests.ui.conftest import make_trace


def test_a_new_selection_repaints_a_region_qt_can_hold(qtbot: Any) -> None:
    """The timeline item's update region used to be the whole time axis in pixels (1e11 px and
    more): past Qt's int coordinates, so a click drew no outline until the view changed."""
    tl = TimelineView(ViewState())
    qtbot.addWidget(tl)
    tl.resize(1000, 400)
    tl.show()
    qtbot.waitExposed(tl)
    tracks = TraceTracks.build(make_trace(200))
    tl.state.add_trace(tracks)
    tl.state.set_selection(Selection(tracks.key, "kernels", 50))
    tl.fit_selection()
    qtbot.wait(20)
    regions: list[QRectF] = []
    tl.canvas.scene().changed.connect(lambda rects: regions.extend(rects))
    painted: list[int] = []
    orig = tl.item.paint
    tl.item.paint = lambda *a: (painted.append(1), orig(*a))[1]  # type: ignore[method-assign]
    tl.state.set_selection(Selection(tracks.key, "kernels", 51))
    qtbot.waitUntil(lambda: bool(regions) and bool(painted), timeout=2000)
    limit = 2**31 - 1
    for r in regions:
        assert abs(r.left()) < limit and abs(r.right()) < limit and r.width() < 1e7, r


def test_tooltip_names_duration_sol_and_bound() -> None:
    from kviewer.analysis.sol import SolResult
    from kviewer.core.schema import SOL, make_table
    from kviewer.session.analyses import SolInfo

    trace = make_trace(20)
    k = trace.kernels
    pct = np.linspace(10, 90, 20)
    sol = make_table(SOL, 20, {"id": k["id"].to_numpy(), "dur": k["dur"].to_numpy(), "device": k["device"].to_numpy(),
                               "bound": np.array(["memory"] * 20, dtype=object), "sol_pct": pct,
                               "t_sol_ns": k["dur"].to_numpy() * 0.5})
    tracks = TraceTracks.build(trace, sol=SolInfo(SolResult(sol)))
    text = tooltip_text(tracks, "kernels", 3)
    assert f"<b>{k['short_name'].iat[3]}</b>" in text
    assert "duration: " in text and "bound: memory" in text
    assert f"SOL: {pct[3]:.1f} % of speed of light" in text
    assert "launch latency: 1.500 µs" in text


def test_keys_work_as_soon_as_a_file_opens(qtbot: Any, window: Any) -> None:
    window.table.view.setFocus()  # somewhere else, as after clicking the table before opening
    window._on_loaded(TraceTracks.build(make_trace(200)))
    qtbot.wait(10)
    before = window.state.range
    target = QApplication.focusWidget()
    assert target is window.timeline.canvas
    QTest.keyClick(target, Qt.Key.Key_W)
    after = window.state.range
    assert (after[1] - after[0]) < (before[1] - before[0]) * 0.9
    QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_D)
    assert window.state.range[0] > after[0]
    # but not while the user types in the table's filter box
    window._on_loaded(TraceTracks.build(make_trace(50, path="second.json")))
    box = window.table.filter_edit
    box.setFocus()
    window._on_loaded(TraceTracks.build(make_trace(50, path="third.json")))
    assert QApplication.focusWidget() is box


def test_times_late_in_a_long_trace_keep_their_digits() -> None:
    from kviewer.session.format import format_time
    from kviewer.session.table_data import instance_data

    assert format_time(8_261_195_123) == "8.261195 s"
    assert format_time(8_261_196_900) != format_time(8_261_195_123)
    assert format_time(1_500) == "1.500 µs"
    [ticks] = tick_labels([(20_000.0, [8_261_180_000.0, 8_261_200_000.0, 8_261_220_000.0])])
    assert ticks == ["8.26118 s", "+20 µs", "+40 µs"]
    # the axis: near 0 as before, late in the trace relative to its first tick
    axis = TimeAxis()
    assert axis.tickStrings([0.0, 1e6, 2e6], 1.0, 1e6) == ["0 ms", "1 ms", "2 ms"]
    late = axis.tickStrings([8_261_180_000.0, 8_261_200_000.0], 1.0, 20_000.0)
    assert late[0] == "8.26118 s" and late[1] == "+20 µs"
    # the table's start column
    trace = make_trace(30)
    trace.kernels["start"] = trace.kernels["start"].to_numpy() + 8_000_000_000
    trace.kernels["end"] = trace.kernels["end"].to_numpy() + 8_000_000_000
    tracks = TraceTracks.build(trace)
    tracks.offset_ns = 0
    col = instance_data([tracks]).column("start")
    texts = {col.text(i) for i in range(30)}
    assert len(texts) == 30 and all(t.endswith(" s") and len(t.split(".")[1]) == 8 for t in texts)


def test_about_names_version_python_qt_and_cache(window: Any) -> None:
    import platform

    from PySide6.QtCore import qVersion

    from kviewer import __version__
    from kviewer.io.cache import cache_dir

    text = window.about_text()
    assert f"kviewer {__version__}" in text and f"Python {platform.python_version()}" in text
    assert f"Qt {qVersion()}" in text and str(cache_dir()) in text
    help_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&Help")
    assert any("About" in a.text() for a in help_menu.actions())


def test_status_text_gives_way_to_the_view_range(qtbot: Any, window: Any) -> None:
    window.resize(700, 500)
    tracks = TraceTracks.build(make_trace(50, path="a_very_long_trace_file_name_" + "x" * 120 + ".json"))
    window.state.add_trace(tracks)
    qtbot.wait(20)
    label, rng = window.status_label, window.range_label
    assert rng.text().startswith("view ")
    left_end = label.mapTo(window, label.rect().topRight()).x()
    assert left_end <= rng.mapTo(window, rng.rect().topLeft()).x()
    assert label.shown_text().endswith("…") and label.text().startswith("a_very_long_trace")
