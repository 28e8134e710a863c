"""Range selection (issue 16, point 2): a drag on the time axis selects a range, the Range dock
aggregates it, and ``kviewer summary FILE --range`` prints the same tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

from kviewer.session.tracks import TraceTracks


@pytest.fixture(scope="module")
def nsys_path(sample_traces: Path) -> Path:
    return sample_traces / "h200_llm_train_nvtx.sqlite.gz"


@pytest.fixture(scope="module")
def nsys(nsys_path: Path) -> Any:
    from kviewer.io import load

    return load(nsys_path)


def _mouse(widget: Any, kind: QEvent.Type, pos: QPointF, buttons: Qt.MouseButton, mods: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    button = Qt.MouseButton.LeftButton if kind != QEvent.Type.MouseMove else Qt.MouseButton.NoButton
    ev = QMouseEvent(kind, pos, widget.mapToGlobal(pos), button, buttons, mods)
    QApplication.sendEvent(widget, ev)


def drag(widget: Any, a: QPointF, b: QPointF, mods: Qt.KeyboardModifier = Qt.KeyboardModifier.NoModifier) -> None:
    """Press at a, move to b in steps with the button held, release at b (pyqtgraph drops mouse
    moves less than 10 ms apart: mouseRateLimit)."""
    import time

    left = Qt.MouseButton.LeftButton
    _mouse(widget, QEvent.Type.MouseMove, a, Qt.MouseButton.NoButton, mods)
    _mouse(widget, QEvent.Type.MouseButtonPress, a, left, mods)
    for i in range(1, 11):
        time.sleep(0.012)
        _mouse(widget, QEvent.Type.MouseMove, a + (b - a) * (i / 10), left, mods)
    _mouse(widget, QEvent.Type.MouseButtonRelease, b, Qt.MouseButton.NoButton, mods)


def expected_kernels(trace: Any, t0: int, t1: int) -> pd.DataFrame:
    """Kernels by name inside [t0, t1], clipped: the numpy reference."""
    k = trace.kernels
    s = k["start"].to_numpy()
    e = k["end"].to_numpy()
    inside = (s < t1) & (e > t0)
    clipped = np.minimum(e, t1) - np.maximum(s, t0)
    names = k["name"].astype(str).to_numpy()
    out = {}
    for name in np.unique(names[inside]):
        m = inside & (names == name)
        out[name] = (int(m.sum()), int(clipped[m].sum()))
    return pd.DataFrame([(n, c, t) for n, (c, t) in out.items()], columns=["name", "count", "total_ns"]).set_index("name").sort_index()


@pytest.mark.qt_log_ignore("This plugin does not support raise")  # hover tooltips during the drag, offscreen
def test_drag_on_the_time_axis_selects_a_range_and_the_panel_sums_it(qtbot: Any, window: Any, nsys: Any) -> None:
    tracks = TraceTracks.build(nsys)
    window.state.add_trace(tracks)
    tl = window.timeline
    k = nsys.kernels
    # a busy 30 ms stretch in the middle of training (kernels cut by both edges)
    mid = float(np.median(k["start"].to_numpy()) - tracks.offset_ns)
    tl.set_range(mid, mid + 30e6)
    qtbot.wait(20)
    axis = tl.plot.getAxis("bottom")
    vp = tl.canvas.viewport()
    y = axis.sceneBoundingRect().center().y()

    def at(t: float) -> QPointF:
        x = tl.vb.mapViewToScene(QPointF(t, 0)).x()
        return QPointF(tl.canvas.mapFromScene(QPointF(x, y)))

    drag(vp, at(mid + 5e6), at(mid + 25e6))
    rng = window.state.time_selection
    assert rng is not None
    px = (30e6) / tl.vb.width()  # one pixel, in ns
    assert abs(rng[0] - (mid + 5e6)) < 2 * px and abs(rng[1] - (mid + 25e6)) < 2 * px
    # the drag did not pan the view
    assert tl.visible_range() == pytest.approx((mid, mid + 30e6))
    assert window.range_dock.isVisible()
    panel = window.range_panel
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=10_000)
    t0 = int(round(rng[0])) + tracks.offset_ns
    t1 = int(round(rng[1])) + tracks.offset_ns
    got = panel.summary.kernels.set_index("name").sort_index()
    want = expected_kernels(nsys, t0, t1)
    assert len(want) > 5
    assert got["count"].to_dict() == want["count"].to_dict()
    assert got["total_ns"].to_dict() == want["total_ns"].to_dict()
    assert np.allclose(got["range_pct"], got["total_ns"] / (t1 - t0) * 100)
    # the model shows the same rows, and the duration is written in the title
    assert panel.models["kernels"].rowCount() == len(want)
    from kviewer.session.format import format_duration

    assert format_duration(rng[1] - rng[0]) in panel.title.text()
    # stream busy time: the union of the stream's work, clipped
    s7 = panel.summary.streams.set_index("stream").loc[7]
    m = (k["stream"].to_numpy() == 7)
    g = nsys.gpu_ops
    gm = g["stream"].to_numpy() == 7
    starts = np.concatenate([k["start"].to_numpy()[m], g["start"].to_numpy()[gm]])
    ends = np.concatenate([k["end"].to_numpy()[m], g["end"].to_numpy()[gm]])
    grid = np.arange(t0, t1, 50)  # 50 ns samples
    order = np.argsort(starts)
    covered = np.zeros(len(grid), dtype=bool)
    for s_, e_ in zip(starts[order], ends[order]):
        if e_ > t0 and s_ < t1:
            covered[np.searchsorted(grid, s_):np.searchsorted(grid, e_)] = True
    assert abs(int(s7["busy_ns"]) - covered.sum() * 50) <= 50 * (int(s7["kernels"]) + int(s7["ops"]) + 2)
    # Shift+drag over the lanes selects too; Esc clears it
    lane_row = next(r for r in tl.rows if r.kind == "lane")
    yl = tl.canvas.mapFromScene(tl.vb.mapViewToScene(QPointF(mid, lane_row.y + lane_row.h / 2))).y()
    a = QPointF(at(mid + 10e6).x(), yl)
    b = QPointF(at(mid + 12e6).x(), yl)
    drag(vp, a, b, Qt.KeyboardModifier.ShiftModifier)
    rng2 = window.state.time_selection
    assert rng2 is not None and abs((rng2[1] - rng2[0]) - 2e6) < 2 * px
    window.state.set_selection(None)
    tl.handle_key(Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
    assert window.state.time_selection is None


def test_summary_range_on_the_command_line_equals_the_panel(qtbot: Any, window: Any, nsys: Any, nsys_path: Path, capsys: Any) -> None:
    from kviewer.cli import main

    tracks = TraceTracks.build(nsys)
    window.state.add_trace(tracks)
    # on the trace's clock (since the nsys session start; the first event is at 7.316146 s)
    window.state.set_time_selection((15.416146e9, 15.466146e9))
    panel = window.range_panel
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=10_000)
    capsys.readouterr()
    assert main(["summary", str(nsys_path), "--range", "15.416146s:15.466146s", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["duration_ns"] == panel.summary.duration == 50_000_000
    for section, df in panel.summary.sections().items():
        cli = pd.DataFrame(doc[section], columns=list(df.columns))
        assert len(cli) == len(df), section
        pd.testing.assert_frame_equal(cli.astype(df.dtypes.to_dict()), df.reset_index(drop=True), check_exact=False, rtol=1e-9)
    # copies in the range: the side-stream host-to-device copies, with their bandwidth
    copies = panel.summary.copies
    htod = copies[(copies["kind"] == "memcpy") & (copies["direction"] == "HtoD")]
    assert len(htod) == 1 and htod["bandwidth_gbs"].iat[0] > 1.0
    # the human table prints the same sections
    assert main(["summary", str(nsys_path), "--range", "15.416146s:15.466146s"]) == 0
    text = capsys.readouterr().out
    assert "duration 50.000 ms" in text and "\ncopies\n" in text and "\nnvtx\n" in text


def test_range_argument_errors(nsys_path: Path, capsys: Any) -> None:
    from kviewer.cli import main

    assert main(["summary", str(nsys_path), "--range", "5ms"]) == 2
    assert main(["summary", str(nsys_path), "--range", "5ms:2ms"]) == 2
    assert main(["summary", str(nsys_path), "--range", "5parsecs:6ms"]) == 2
    assert "--range" in capsys.readouterr().err
