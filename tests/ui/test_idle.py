"""Idle gaps and latency (issue 16, point 3): gaps on a stream listed biggest first with what the
host was doing, shaded on the timeline; launch latency in Details, the tooltip and the table;
synchronisations marked."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kviewer.session import colors
from kviewer.session.tracks import TraceTracks
from kviewer.ui.viewstate import Selection
from tests.ui.conftest import make_trace


def _reference_gaps(trace: Any, min_ns: int) -> list[int]:
    """Per stream, start of the next work minus the end of everything before it: numpy."""
    k = trace.kernels
    out: list[int] = []
    for s in np.unique(k["stream"].to_numpy()):
        m = k["stream"].to_numpy() == s
        st = k["start"].to_numpy()[m]
        en = k["end"].to_numpy()[m]
        o = np.argsort(st, kind="stable")
        st, en = st[o], np.maximum.accumulate(en[o])
        gap = st[1:] - en[:-1]
        out.extend(int(g) for g in gap[gap >= min_ns])
    return sorted(out, reverse=True)


def _waiting_trace() -> Any:
    """Four kernels on one stream; before the fourth, the host synchronises inside NVTX 'step_1'
    and the stream idles 400 µs."""
    from kviewer.core import Trace, TraceMeta, make_table

    ks = np.array([0, 20_000, 40_000, 460_000]) + 1_000_000
    kernels = make_table("kernels", 4, dict(
        name=np.array(["k"] * 4, dtype=object), short_name=np.array(["k"] * 4, dtype=object), start=ks,
        dur=np.full(4, 10_000), device=np.zeros(4), stream=np.full(4, 7), correlation=np.arange(4)))
    # rows in start order (the schema keeps cpu_slices sorted by start)
    names = ["step_1"] + ["cudaLaunchKernel"] * 3 + ["cudaStreamSynchronize", "cudaLaunchKernel"]
    cats = ["nvtx"] + ["runtime"] * 5
    starts = [ks[0] - 8000, ks[0] - 5000, ks[1] - 5000, ks[2] - 5000, ks[2] - 3000, ks[3] - 3000]
    durs = [ks[3] - ks[0] + 20_000, 1000, 1000, 1000, ks[3] - ks[2] - 1000, 1000]
    cpu = make_table("cpu_slices", 6, dict(
        name=np.array(names, dtype=object), category=np.array(cats, dtype=object), start=np.array(starts),
        dur=np.array(durs), pid=np.full(6, 10), tid=np.full(6, 11), correlation=np.array([-1, 0, 1, 2, -1, 3])))
    flows = make_table("flows", 4, dict(src=np.array([1, 2, 3, 5]), dst_table=np.array(["kernels"] * 4, dtype=object),
                                        dst=np.arange(4), correlation=np.arange(4)))
    devices = make_table("devices", 1, dict(id=[0], name=["NVIDIA H200"], vendor=["NVIDIA"]))
    return Trace(TraceMeta("waiting.json", "synthetic", "synthetic"), kernels=kernels, cpu_slices=cpu, flows=flows, devices=devices)


def test_idle_gap_list_matches_numpy_and_is_shaded(qtbot: Any, window: Any) -> None:
    trace = make_trace(400, streams=3)
    tracks = TraceTracks.build(trace)
    window.state.add_trace(tracks)
    panel = window.idle_panel
    assert panel.gaps is None and not window.runner.pending("idle")  # in a tab behind the kernels: not computed
    window.idle_dock.raise_()  # brought forward: listed
    qtbot.waitUntil(lambda: panel.gaps is not None, timeout=10_000)
    panel.threshold.setValue(20.0)  # µs
    qtbot.waitUntil(lambda: not window.runner.pending("idle"), timeout=10_000)
    want = _reference_gaps(trace, 20_000)
    assert len(want) > 10
    assert panel.gaps["gap_ns"].tolist() == want  # every gap, biggest first
    assert panel.model.rowCount() == len(want)
    assert window.timeline.idle_threshold_ns == 20_000
    # the timeline shades the same gaps
    tl = window.timeline
    tl.fit_all()
    tl.canvas.grab()
    fr = tl.item._frame
    assert fr is not None and len(fr.idle) > 0
    # choosing a row selects the gap as the range and zooms to it
    view = panel.view
    view.clicked.emit(panel.model.index(0, 0))
    first = panel.gaps.iloc[panel.model.source_row(0)]
    rng = window.state.time_selection
    assert rng == (float(first["start"] - tracks.offset_ns), float(first["end"] - tracks.offset_ns))
    x0, x1 = tl.visible_range()
    assert x0 < rng[0] and rng[1] < x1 and (x1 - x0) < 2 * (rng[1] - rng[0])
    # the biggest gap's rectangle is painted in the idle tint (under no range tint)
    window.state.set_time_selection(None)
    img = tl.canvas.grab().toImage()
    lane = next(ln for ln in tracks.lanes if ln.label == f"stream {int(first['stream'])}")
    row = tl.row_of_lane(tracks, lane)
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QColor

    p = tl.canvas.mapFromScene(tl.vb.mapViewToScene(QPointF((rng[0] + rng[1]) / 2, row.y + row.h / 2)))
    c = QColor(img.pixel(int(p.x() * img.devicePixelRatio()), int(p.y() * img.devicePixelRatio())))
    assert c.red() > c.blue() + 10 and c.red() > c.green() + 10, c.getRgb()


def test_gap_context_latency_and_sync_marks(qtbot: Any, window: Any) -> None:
    from kviewer.analysis.activity import idle_gaps
    from kviewer.ui.timeline import tooltip_text

    trace = _waiting_trace()
    gaps = idle_gaps(trace, 100_000)
    assert len(gaps) == 1
    g = gaps.iloc[0]
    assert g["gap_ns"] == 460_000 - 50_000
    assert g["nvtx"] == "step_1" and g["call_before"] == "cudaStreamSynchronize" and g["next_id"] == 3
    tracks = TraceTracks.build(trace)
    # launch latency: kernel start - launch call start
    assert tracks.launch_latency.tolist() == [5000.0, 5000.0, 5000.0, 3000.0]
    # the synchronize call is marked (and drawn in the sync colour)
    assert tracks.sync["cpu_slices"].tolist() == [False, False, False, False, True, False]
    lane, pos = tracks.locate("cpu_slices", 4)
    assert lane.lod.raw.colour[pos] // colors.SHADES == colors.FAMILY_INDEX["sync"]
    assert "synchronisation" in tooltip_text(tracks, "cpu_slices", 4)
    assert "launch latency: 3.000 µs" in tooltip_text(tracks, "kernels", 3)
    window.state.add_trace(tracks)
    window.state.set_selection(Selection(tracks.key, "kernels", 3))
    assert "launch latency 3.000 µs" in window.details.toPlainText()
    window.state.set_selection(Selection(tracks.key, "cpu_slices", 4))
    assert "Synchronisation" in window.details.toPlainText()
    # the kernel table has the column
    model = window.table.model
    keys = [c.key for c in model.data_.columns]
    assert "launch_latency" in keys
    col = model.data_.columns[keys.index("launch_latency")]
    assert col.values.tolist() == [5000.0, 5000.0, 5000.0, 3000.0]


@pytest.mark.parametrize("name", ["cudaDeviceSynchronize", "hipDeviceSynchronize", "cudaStreamSynchronize"])
def test_sync_calls_by_name(name: str) -> None:
    from kviewer.analysis.activity import sync_points
    from kviewer.core import Trace, TraceMeta, make_table

    cpu = make_table("cpu_slices", 2, dict(name=np.array([name, "cudaLaunchKernel"], dtype=object),
                                           category=np.array(["runtime", "runtime"], dtype=object),
                                           start=np.array([0, 10]), dur=np.array([5, 5]), pid=np.ones(2), tid=np.ones(2)))
    assert sync_points(Trace(TraceMeta("x", "synthetic", "x"), cpu_slices=cpu))["cpu_slices"].tolist() == [True, False]


def test_item_style_device_to_host_copy_is_a_sync() -> None:
    """A DtoH copy whose call is followed by cudaStreamSynchronize (what .item() does) is marked."""
    from kviewer.analysis.activity import sync_points
    from kviewer.core import Trace, TraceMeta, make_table

    cpu = make_table("cpu_slices", 4, dict(
        name=np.array(["cudaMemcpyAsync", "cudaStreamSynchronize", "cudaMemcpyAsync", "cudaLaunchKernel"], dtype=object),
        category=np.array(["runtime"] * 4, dtype=object), start=np.array([0, 10, 20, 30]), dur=np.full(4, 5),
        pid=np.ones(4), tid=np.ones(4)))
    ops = make_table("gpu_ops", 2, dict(kind=np.array(["memcpy"] * 2, dtype=object), name=np.array(["DtoH"] * 2, dtype=object),
                                        start=np.array([5, 25]), dur=np.array([2, 2]), bytes=np.array([4, 4]),
                                        direction=np.array(["DtoH"] * 2, dtype=object), device=np.zeros(2), stream=np.full(2, 7)))
    flows = make_table("flows", 2, dict(src=np.array([0, 2]), dst_table=np.array(["gpu_ops"] * 2, dtype=object), dst=np.arange(2),
                                        correlation=np.arange(2)))
    sp = sync_points(Trace(TraceMeta("x", "synthetic", "x"), cpu_slices=cpu, gpu_ops=ops, flows=flows))
    assert sp["gpu_ops"].tolist() == [True, False]
