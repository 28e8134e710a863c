"""Compare mode in the main window: a second report dropped on a window with one open (or two
files given at once, as ``kviewer A B`` does) shows the diff table and both timelines stacked, B
aligned on A's first step on the one shared time axis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtGui import QColor

from kviewer.analysis.compare import CHANGED, UNCHANGED, compare
from kviewer.core import Trace
from kviewer.io import load
from tests.ui.conftest import drop_files, wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"


@pytest.fixture(scope="module")
def expected(sample_traces: Path) -> Any:
    """The comparison computed directly from the files (not through the window)."""
    return compare(load(sample_traces / EAGER), load(sample_traces / COMPILED))


def _wait_compare(qtbot: Any, window: Any) -> None:
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)


def _compared(qtbot: Any, window: Any, sample_traces: Path) -> tuple[Any, Any]:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    assert not window.compare.active  # one trace: nothing to compare yet
    assert drop_files(window, [sample_traces / COMPILED])
    _wait_compare(qtbot, window)
    a, b = window.compare.traces()
    assert a is not None and b is not None
    return a, b


def _first_kernel_start(trace: Trace) -> int:
    return int(trace.kernels["start"].iloc[0])


def test_second_drop_starts_compare_mode(qtbot: Any, window: Any, sample_traces: Path, expected: Any, errors: Any) -> None:
    a, b = _compared(qtbot, window, sample_traces)
    assert errors.calls == []
    assert a.trace.meta.path.endswith(EAGER) and b.trace.meta.path.endswith(COMPILED)
    # the diff table with its rows, in a visible dock
    view = window.compare.view
    assert window.compare.dock.isVisible() and view is not None and view.isVisible()
    assert view.diff_model.rowCount() == len(expected.groups) > 0
    assert view.totals_model.rowCount() == len(expected.totals)
    assert "faster" in view.headline.text()
    assert "Comparing B" in window.statusBar().currentMessage()
    # both traces' tracks are on the one timeline, stacked, labelled A and B
    tl = window.timeline
    roots = [r for r in tl.rows if r.kind == "header" and r.depth == 0]
    assert [r.tracks.key for r in roots] == [a.key, b.key]
    assert roots[0].label.startswith("A · ") and roots[1].label.startswith("B · ")
    assert tl.lane_count() == len(a.lanes) + len(b.lanes)
    # B is shifted by align_offset_ns: its first step lands where A's does
    align = view.align_offset_ns
    assert align == expected.align_offset_ns
    assert b.offset_ns == a.offset_ns - align
    step_a = int(expected.steps_a["start"].iloc[0]) - a.offset_ns
    step_b = int(expected.steps_b["start"].iloc[0]) - b.offset_ns
    assert step_a == step_b
    # B's span moved with it and the state's span holds both
    assert b.span == (int(b.trace.span_ns()[0]) - b.offset_ns, int(b.trace.span_ns()[1]) - b.offset_ns)
    lo, hi = window.state.span()
    assert lo <= min(a.span[0], b.span[0]) and hi >= max(a.span[1], b.span[1])
    # one clock: A on its own, B on A's, and the axis and B's times say so
    assert a.offset_ns == 0 and a.clock == a.trace.meta.clock
    assert b.clock.startswith("on A's clock")
    assert window.timeline.plot.getAxis("bottom").labelText == f"time {a.trace.meta.clock} (B aligned on A)"
    # Compare actions follow the mode
    assert window.stop_compare_action.isEnabled() and not window.compare_open_action.isEnabled()


def test_both_timelines_are_drawn_and_zoom_together(qtbot: Any, window: Any, sample_traces: Path) -> None:
    a, b = _compared(qtbot, window, sample_traces)
    tl = window.timeline
    window.compare.dock.hide()  # room for both traces' rows
    tl.fit_all()
    qtbot.wait(50)

    def coloured_pixels(tracks: Any) -> int:
        lane = next(ln for ln in tracks.lanes if ln.table == "kernels")
        row = tl.row_of_lane(tracks, lane)
        tl.scroll_to(row.y - 40)  # the rows of both traces no longer fit: scroll to the lane
        img = tl.canvas.grab().toImage()
        dpr = img.devicePixelRatio()
        y = int((tl.canvas.mapFromScene(tl.vb.mapViewToScene(row_centre(row)))).y() * dpr)
        count = 0
        for x in range(int(tl.plot.getAxis("left").width() * dpr) + 2, img.width(), 2):
            c = QColor(img.pixel(x, y))
            count += max(c.red(), c.green(), c.blue()) - min(c.red(), c.green(), c.blue()) > 40
        return count

    def row_centre(row: Any) -> Any:
        from PySide6.QtCore import QPointF

        x0, x1 = tl.visible_range()
        return QPointF((x0 + x1) / 2, row.y + row.h / 2)

    assert tl.row_of_lane(a, next(ln for ln in a.lanes if ln.table == "kernels")) is not None
    assert coloured_pixels(a) > 50 and coloured_pixels(b) > 50
    # one time axis: a zoom changes the range both traces are drawn in
    before = window.state.range
    tl.zoom(0.5)
    after = window.state.range
    assert after[1] - after[0] == pytest.approx((before[1] - before[0]) * 0.5)
    assert tl.visible_range() == pytest.approx(after)


def test_selecting_a_row_highlights_its_kernels_in_both(qtbot: Any, window: Any, sample_traces: Path, expected: Any) -> None:
    a, b = _compared(qtbot, window, sample_traces)
    view = window.compare.view
    groups = expected.groups
    matched = groups["status"].isin([CHANGED, UNCHANGED]) & (groups["count_a"] > 0) & (groups["count_b"] > 0)
    row = int(np.flatnonzero(matched.to_numpy())[0])
    ka, kb = expected.kernels_of_row(row)
    assert len(ka) and len(kb)
    view.select_row(row)
    hl = window.state.highlight
    assert np.flatnonzero(hl[a.key]).tolist() == ka.tolist()
    assert np.flatnonzero(hl[b.key]).tolist() == kb.tolist()
    # the timeline dims what is outside the group, in both traces
    assert a.emphasis is not None and b.emphasis is not None
    assert int(a.emphasis.sum()) == len(ka) and int(b.emphasis.sum()) == len(kb)
    sel = window.state.selection
    assert sel is not None and sel.trace == a.key and sel.row in ka.tolist()
    # a row only B has highlights nothing in A
    only_b = groups.index[(groups["count_a"] == 0) & (groups["count_b"] > 0)]
    if len(only_b):
        view.select_row(int(only_b[0]))
        assert not window.state.highlight[a.key].any() and window.state.highlight[b.key].any()
        assert window.state.selection.trace == b.key


def test_stop_comparing_and_closing_a_side(qtbot: Any, window: Any, sample_traces: Path) -> None:
    a, b = _compared(qtbot, window, sample_traces)
    window.stop_compare_action.trigger()
    assert not window.compare.active and window.compare.dock.isHidden()
    # back on its own clock: its tables' times, from its own time 0 (one clock with SQL and the CLI)
    assert b.offset_ns == 0 and b.span[0] == int(b.trace.span_ns()[0]) and b.clock == b.trace.meta.clock
    assert b.root.label == b.label and a.root.label == a.label
    assert len(window.state.traces) == 2  # both stay open
    assert window.compare_open_action.isEnabled()
    # compare the two open traces again from the menu, then close B: A goes on alone
    window.compare_open_action.trigger()
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    window.close_trace(b.key)
    assert not window.compare.active and window.compare.dock.isHidden()
    assert a.root.label == a.label


def test_third_drop_just_adds_a_trace(qtbot: Any, window: Any, sample_traces: Path, tmp_path: Path) -> None:
    a, b = _compared(qtbot, window, sample_traces)
    third = tmp_path / "again.pt.trace.json.gz"
    third.write_bytes((sample_traces / EAGER).read_bytes())
    assert drop_files(window, [third])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: not window.runner.pending(), timeout=20_000)
    assert len(window.state.traces) == 3
    assert window.compare.traces() == (a, b)
    assert window.timeline.lane_count() == sum(len(t.lanes) for t in window.state.traces)


def test_two_files_at_once_compare_like_the_command_line(qtbot: Any, window: Any, sample_traces: Path, expected: Any) -> None:
    """``kviewer A B`` hands both files to ``open_files``, as dropping both at once does."""
    window.open_files([str(sample_traces / EAGER), str(sample_traces / COMPILED)])
    _wait_compare(qtbot, window)
    a, b = window.compare.traces()
    assert a.trace.meta.path.endswith(EAGER) and b.trace.meta.path.endswith(COMPILED)
    assert window.compare.view.diff_model.rowCount() == len(expected.groups)


def test_compare_with_a_chosen_file(qtbot: Any, window: Any, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtWidgets import QFileDialog

    assert drop_files(window, [sample_traces / COMPILED])
    wait_idle(qtbot, window)
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *a, **k: (str(sample_traces / EAGER), ""))
    window.compare_with_action.trigger()
    _wait_compare(qtbot, window)
    a, b = window.compare.traces()
    # the open trace is the reference A, the chosen file B
    assert a.trace.meta.path.endswith(COMPILED) and b.trace.meta.path.endswith(EAGER)
    assert "slower" in window.compare.view.headline.text()


def test_a_failed_second_file_starts_no_compare(qtbot: Any, window: Any, sample_traces: Path, tmp_path: Path, errors: Any) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    assert drop_files(window, [bad])
    wait_idle(qtbot, window)
    assert len(errors.calls) == 1 and not window.compare.active and not window.compare.busy
    # the next good drop still compares
    assert drop_files(window, [sample_traces / COMPILED])
    _wait_compare(qtbot, window)
