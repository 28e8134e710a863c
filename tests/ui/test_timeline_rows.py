"""Timeline rows as Nsight Systems draws them (issue 16, point 1): a lane per stream holding its
kernels, copies and memsets; NVTX projected onto the GPU; utilisation and concurrency counters;
lanes pinned, moved, hidden and searched; a scrollbar and the wheel reach every row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QColor

from kviewer.session import colors
from kviewer.session.tracks import CounterTrack, TraceTracks
from kviewer.ui.timeline import TimelineView
from kviewer.ui.viewstate import ViewState
from tests.ui.conftest import make_trace


@pytest.fixture(scope="module")
def nsys(sample_traces: Path) -> Any:
    from kviewer.io import load

    return load(sample_traces / "h200_llm_train_nvtx.sqlite.gz")


@pytest.fixture
def timeline(qtbot: Any) -> TimelineView:
    tl = TimelineView(ViewState())
    qtbot.addWidget(tl)
    tl.resize(1200, 400)
    tl.show()
    qtbot.waitExposed(tl)
    return tl


def test_a_lane_per_stream_holds_its_kernels_copies_and_memsets(nsys: Any) -> None:
    tracks = TraceTracks.build(nsys)
    g = nsys.gpu_ops
    k = nsys.kernels
    by_label = {ln.label: ln for ln in tracks.lanes}
    # every stream of the trace has its own lane, and nothing else is a GPU lane
    streams = sorted(set(k["stream"].tolist()) | set(g["stream"].tolist()))
    assert [ln.label for ln in tracks.lanes if ln.label.startswith("stream")] == [f"stream {s}" for s in streams]
    for s in streams:
        lane = by_label[f"stream {s}"]
        want_k = np.flatnonzero(k["stream"].to_numpy() == s)
        want_g = np.flatnonzero(g["stream"].to_numpy() == s)
        assert sorted(lane.ids[lane.of_table("kernels")].tolist()) == want_k.tolist()
        assert sorted(lane.ids[lane.of_table("gpu_ops")].tolist()) == want_g.tolist()
        # the bars are in start order, whatever table they come from
        assert np.all(np.diff(lane.lod.raw.start) >= 0)
    # the side-stream host-to-device copies sit on their stream's lane, coloured as H2D
    side = by_label["stream 13"]
    assert side.of_table("gpu_ops").all() and len(side.ids) == int((g["stream"] == 13).sum())
    fam = side.lod.raw.colour // colors.SHADES
    htod = g["direction"].astype(str).to_numpy()[side.ids] == "HtoD"
    assert htod.all() and (fam == colors.FAMILY_INDEX["memcpy_htod"]).all()
    main = by_label["stream 7"]
    mine = main.of_table("gpu_ops")
    dirs = g["direction"].astype(str).to_numpy()[main.ids[mine]]
    kinds = g["kind"].astype(str).to_numpy()[main.ids[mine]]
    fam7 = main.lod.raw.colour[mine] // colors.SHADES
    assert (fam7[kinds == "memset"] == colors.FAMILY_INDEX["memset"]).all()
    assert (fam7[(dirs == "DtoD") & (kinds == "memcpy")] == colors.FAMILY_INDEX["memcpy"]).all()
    assert (fam7[(dirs == "HtoD") & (kinds == "memcpy")] == colors.FAMILY_INDEX["memcpy_htod"]).all()
    # every GPU op has its one home bar
    assert (tracks.lane_of["gpu_ops"] >= 0).all()
    for row in (0, len(g) - 1):
        lane, pos = tracks.locate("gpu_ops", row)
        assert lane.entry(pos) == ("gpu_ops", row)


def test_nvtx_ranges_are_projected_onto_the_gpu(nsys: Any) -> None:
    from kviewer.analysis.steps import kernel_launch_calls

    tracks = TraceTracks.build(nsys)
    proj = [ln for ln in tracks.lanes if ln.projected]
    assert proj and all(ln.table == "cpu_slices" for ln in proj)
    c = nsys.cpu_slices
    k = nsys.kernels
    launch = kernel_launch_calls(nsys)
    cs = c["start"].to_numpy()
    ce = c["end"].to_numpy()
    lane = proj[0]
    for pos in (0, len(lane.ids) // 2, len(lane.ids) - 1):
        rid = int(lane.ids[pos])
        assert str(c["category"].iat[rid]) == "nvtx"
        inside = (launch >= 0) & (cs[np.maximum(launch, 0)] >= cs[rid]) & (cs[np.maximum(launch, 0)] <= ce[rid])
        inside &= (c["tid"].to_numpy()[np.maximum(launch, 0)] == c["tid"].iat[rid])
        assert inside.any()
        assert lane.lod.raw.start[pos] == k["start"].to_numpy()[inside].min()
        assert lane.lod.raw.end[pos] == k["end"].to_numpy()[inside].max()
    # the projected bar's home stays its CPU thread
    home, _ = tracks.locate("cpu_slices", int(lane.ids[0]))
    assert not home.projected


def test_utilisation_and_concurrency_counters_match_numpy() -> None:
    trace = make_trace(300, streams=3)
    k = trace.kernels
    # make kernels of different streams overlap
    shift = (k["stream"].to_numpy() - 7) * 3000
    k["start"] = k["start"].to_numpy() - shift
    k["end"] = k["end"].to_numpy() - shift
    tracks = TraceTracks.build(trace)
    counters = [ch for ch in tracks.root.children[0].children if isinstance(ch, CounterTrack)]
    util, conc = counters
    assert util.kind == "utilisation" and conc.kind == "concurrency"
    s = k["start"].to_numpy()
    e = k["end"].to_numpy()
    t0, t1 = float(s.min()), float(e.max())
    grid = np.linspace(t0, t1, 200_001)[:-1] + (t1 - t0) / 400_000  # sample at column midpoints
    running = ((s[None, :] <= grid[:2000, None]) & (e[None, :] > grid[:2000, None])).sum(axis=1)
    # exact: the mean over the first 1 % of the span, from the sampled step function
    a, b = t0, t0 + (t1 - t0) * 0.01
    assert abs(util.counter.mean(a, b) - (running > 0).mean()) < 2e-3
    assert abs(conc.counter.mean(a, b) - running.mean()) < 2e-3
    assert conc.scale == conc.counter.peak >= 2
    per_px = util.counter.per_pixel(t0, t1, 100)
    assert per_px.shape == (100,) and (per_px <= 1.0 + 1e-9).all() and (per_px >= 0).all()


def test_counter_rows_are_drawn(qtbot: Any, timeline: TimelineView) -> None:
    timeline.state.add_trace(TraceTracks.build(make_trace(2000, streams=2)))
    timeline.fit_all()
    row = next(r for r in timeline.rows if r.kind == "counter" and r.counter.kind == "utilisation")
    img = timeline.canvas.grab().toImage()
    dpr = img.devicePixelRatio()
    x0, x1 = timeline.visible_range()
    green = 0
    for i in range(50):
        t = x0 + (x1 - x0) * (0.1 + 0.8 * i / 50)
        p = timeline.canvas.mapFromScene(timeline.vb.mapViewToScene(QPointF(t, row.y + row.h - 3)))
        c = QColor(img.pixel(int(p.x() * dpr), int(p.y() * dpr)))
        green += c.green() > c.red() + 40
    assert green >= 40


def test_scrollbar_and_wheel_reach_the_last_lane(qtbot: Any, timeline: TimelineView) -> None:
    from PySide6.QtCore import QPointF as P
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    for seed in range(4):
        timeline.state.add_trace(TraceTracks.build(make_trace(50, streams=6, seed=seed, path=f"t{seed}.json")))
    assert timeline.content_height > timeline._view_height()
    sb = timeline.scrollbar
    assert sb.isVisible() and sb.maximum() > 0
    last = timeline.rows[-1]
    sb.setValue(sb.maximum())
    top, bottom = timeline.vb.viewRange()[1]
    assert top <= last.y and last.y + last.h <= bottom
    sb.setValue(0)
    assert timeline.top == 0.0
    # the mouse wheel scrolls the rows (Ctrl+wheel zooms time)
    before = timeline.visible_range()
    vp = timeline.canvas.viewport()
    centre = P(vp.width() / 2, vp.height() / 2)
    for _ in range(60):
        ev = QWheelEvent(centre, P(vp.mapToGlobal(centre.toPoint())), QPoint(0, 0), QPoint(0, -120),
                         Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
        QApplication.sendEvent(vp, ev)
    assert timeline.visible_range() == before
    assert sb.value() == sb.maximum() and timeline.top > 0
    top, bottom = timeline.vb.viewRange()[1]
    assert top <= last.y and last.y + last.h <= bottom


def test_lanes_pin_move_hide_and_search(timeline: TimelineView) -> None:
    tracks = TraceTracks.build(make_trace(100, streams=3))
    timeline.state.add_trace(tracks)
    lanes = [r for r in timeline.rows if r.kind == "lane" and r.label.startswith("stream")]
    assert [r.label for r in lanes] == ["stream 7", "stream 8", "stream 9"]
    s9 = lanes[2].lane
    # pin: stream 9 comes first, under a "Pinned" header, and leaves its place
    timeline.pin(tracks, s9)
    assert timeline.rows[0].label == "Pinned" and timeline.rows[1].lane is s9
    assert [r.label for r in timeline.rows if r.kind == "lane" and r.label.startswith("stream")] == ["stream 9", "stream 7", "stream 8"]
    assert timeline.row_of_lane(tracks, s9) is timeline.rows[1]
    timeline.unpin(s9)
    # move: stream 9 up one place
    row9 = timeline.row_of_lane(tracks, s9)
    timeline.move_row(row9, -1)
    assert [r.label for r in timeline.rows if r.kind == "lane" and r.label.startswith("stream")] == ["stream 7", "stream 9", "stream 8"]
    # hide, then show again
    timeline.hide_item(s9)
    assert timeline.row_of_lane(tracks, s9) is None and timeline.show_hidden.isVisibleTo(timeline)
    timeline.unhide_all()
    assert timeline.row_of_lane(tracks, s9) is not None
    # search: only matching lanes (and the groups above them) stay
    timeline.search.setText("stream 8")
    assert [r.label for r in timeline.rows if r.kind != "header"] == ["stream 8"]
    assert any(r.label.startswith("GPU 0") for r in timeline.rows)
    timeline.search.setText("utilisation")
    assert [r.label for r in timeline.rows if r.kind != "header"] == ["GPU utilisation"]
    timeline.search.setText("")
    assert len([r for r in timeline.rows if r.kind == "lane"]) == len(tracks.lanes)
    # the context menu offers all of it
    menu = timeline.row_menu(timeline.row_of_lane(tracks, s9))
    assert {"Pin to Top", "Move Up", "Move Down", "Hide"} <= {a.text() for a in menu.actions()}
