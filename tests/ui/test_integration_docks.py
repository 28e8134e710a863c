"""The Roofline and Fusion candidates docks in the main window: filled for the current trace from
the load's SOL pass, selection linked both ways with the table and the timeline, the device
picker for a GPU the trace does not name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from kviewer.analysis.fusion import fusion_candidates
from kviewer.analysis.sol import speed_of_light
from kviewer.core import Trace, make_table
from kviewer.io import load
from kviewer.session import colors
from kviewer.ui.viewstate import Selection
from tests.ui.conftest import drop_files, wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


@pytest.fixture(scope="module")
def eager(sample_traces: Path) -> Trace:
    return load(sample_traces / EAGER)


def _open_eager(qtbot: Any, window: Any, sample_traces: Path) -> Any:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    assert len(window.state.traces) == 1
    return window.state.traces[0]


def _wait_analysis(qtbot: Any, window: Any) -> None:
    qtbot.waitUntil(lambda: not window.runner.pending(), timeout=20_000)


def test_docks_exist_with_names_and_menu_entries(window: Any) -> None:
    docks = window.analysis
    assert docks.roofline_dock.objectName() == "rooflineDock"
    assert docks.fusion_dock.objectName() == "fusionDock"
    assert window.compare.dock.objectName() == "compareDock"
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text().replace("&", "") == "View")
    texts = {a.text() for a in view_menu.actions()}
    assert {"Roofline", "Fusion candidates", "Compare"} <= texts
    # roofline and fusion share the space below Details; the empty compare dock starts hidden
    assert window.dockWidgetArea(docks.roofline_dock) == Qt.DockWidgetArea.RightDockWidgetArea
    assert docks.fusion_dock in window.tabifiedDockWidgets(docks.roofline_dock)
    assert docks.roofline_dock.isVisible() and window.compare.dock.isHidden()
    # the toggle action hides and shows the dock
    docks.roofline_dock.toggleViewAction().trigger()
    assert docks.roofline_dock.isHidden()
    docks.roofline_dock.toggleViewAction().trigger()
    assert docks.roofline_dock.isVisible()


def test_roofline_shows_the_eager_kernels_and_reuses_the_load_sol(qtbot: Any, window: Any, sample_traces: Path, eager: Trace) -> None:
    tracks = _open_eager(qtbot, window, sample_traces)
    panel = window.analysis.roofline_panel
    qtbot.waitUntil(lambda: panel.shown is not None, timeout=5000)
    roofline = panel.roofline
    assert roofline is not None and roofline.isVisible()
    # the SOL frame on screen is the one the load computed (no second pass)
    assert tracks.sol_info is not None and tracks.sol_info.ok
    assert panel.shown == (tracks.key, id(tracks.sol_info))
    expected = speed_of_light(eager)
    ok = (expected["flops"] > 0) & (expected["bytes"] > 0) & (expected["dur"] > 0)
    assert roofline.point_count() == int(ok.sum()) > 100
    assert sorted(roofline._ids.tolist()) == sorted(expected.loc[ok, "id"].tolist())
    assert panel.device_box.currentData() == "h200"
    assert not panel.message.isVisible()
    assert any(s.startswith("FP16/BF16 tensor 989.5") for s in roofline.roof_labels())


def _click_point(qtbot: Any, roofline: Any, kernel: int) -> None:
    i = int(np.flatnonzero(roofline._ids == kernel)[0])
    x, y = roofline._xy[i]
    scene = roofline.plot.vb.mapViewToScene(QPointF(x, y))
    pos = roofline.plot_widget.mapFromScene(scene)
    qtbot.mouseClick(roofline.plot_widget.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))


def test_roofline_click_selects_in_table_and_timeline(qtbot: Any, window: Any, sample_traces: Path) -> None:
    tracks = _open_eager(qtbot, window, sample_traces)
    panel = window.analysis.roofline_panel
    qtbot.waitUntil(lambda: panel.shown is not None, timeout=5000)
    roofline = panel.roofline
    k = tracks.trace.kernels
    # the longest kernel: its point is where the click lands
    target = int(np.argmax(k["dur"].to_numpy()))
    with qtbot.waitSignal(roofline.selectionChanged, timeout=3000) as blocker:
        _click_point(qtbot, roofline, target)
    clicked = [int(i) for i in blocker.args[0]]
    assert target in clicked
    state = window.state
    # the state: the clicked kernels highlighted, the longest of them selected
    mask = state.highlight[tracks.key]
    assert sorted(np.flatnonzero(mask).tolist()) == sorted(set(clicked))
    durs = k["dur"].to_numpy()[clicked]
    assert state.selection == Selection(tracks.key, "kernels", clicked[int(np.argmax(durs))])
    # the table shows it as its current row, the timeline has it in view
    row = window.table.view.currentIndex().row()
    assert window.table.model.selection_for_row(row)[1] == state.selection.row
    t0, t1 = window.timeline.visible_range()
    start = float(k["start"].iat[state.selection.row] - tracks.offset_ns)
    assert t0 <= start <= t1
    # the timeline dims the kernels outside the clicked ones
    assert tracks.emphasis is not None and tracks.emphasis.sum() == len(set(clicked))


def test_table_and_timeline_selection_ring_the_point(qtbot: Any, window: Any, sample_traces: Path) -> None:
    tracks = _open_eager(qtbot, window, sample_traces)
    panel = window.analysis.roofline_panel
    qtbot.waitUntil(lambda: panel.shown is not None, timeout=5000)
    roofline = panel.roofline
    # a table row (the model shows kernels in start order)
    window.table.select_row(17)
    _key, kernel, _ = window.table.model.selection_for_row(17)
    assert roofline.selected_ids() == [kernel]
    assert len(roofline.highlight.data) == 1
    # a click on a bar of the timeline
    window.state.set_selection(None)
    assert roofline.selected_ids() == []
    target = 60
    tl = window.timeline
    window.state.set_selection(Selection(tracks.key, "kernels", target), reveal=True)
    tl.fit_selection()
    window.state.set_selection(None)
    lane, _pos = tracks.locate("kernels", target)
    row = tl.row_of_lane(tracks, lane)
    s = float(tracks.trace.kernels["start"].iat[target] - tracks.offset_ns)
    e = float(tracks.trace.kernels["end"].iat[target] - tracks.offset_ns)
    pos = tl.canvas.mapFromScene(tl.vb.mapViewToScene(QPointF((s + e) / 2, row.y + row.h / 2)))
    qtbot.mouseClick(tl.canvas.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert window.state.selection == Selection(tracks.key, "kernels", target)
    assert roofline.selected_ids() == [target]
    # a grouped table row highlights every instance of the name: all are ringed
    window.table.mode_box.setCurrentIndex(1)
    window.table.select_row(0)
    mask = window.state.highlight[tracks.key]
    assert sorted(roofline.selected_ids()) == sorted(set(np.flatnonzero(mask).tolist()) | {window.state.selection.row})


def test_fusion_dock_lists_candidates_and_highlights_instances(qtbot: Any, window: Any, sample_traces: Path, eager: Trace) -> None:
    tracks = _open_eager(qtbot, window, sample_traces)
    docks = window.analysis
    docks.fusion_dock.raise_()
    qtbot.waitUntil(lambda: docks.fusion_panel.shown is not None, timeout=20_000)
    panel = docks.fusion_panel.panel
    assert panel is not None and panel.isVisible()
    expected = fusion_candidates(eager)
    assert len(expected) > 0
    assert panel.model.rowCount() == len(expected)
    assert str(len(expected)) in panel.total.text() and "estimated saving" in panel.total.text()
    # the panel sorts by saving, as fusion_candidates ranks them: row 0 is rank 1
    state = window.state
    panel.select_row(0)
    top = expected.iloc[0]
    ids = sorted(int(k) for inst in top["kernel_ids"] for k in inst)
    assert sorted(np.flatnonzero(state.highlight[tracks.key]).tolist()) == ids
    first = [int(k) for k in top["kernel_ids"][0]]
    assert state.selection == Selection(tracks.key, "kernels", first[0])
    # the first instance is framed on the timeline
    k = tracks.trace.kernels
    t0, t1 = window.timeline.visible_range()
    assert t0 <= float(k["start"].to_numpy()[first].min() - tracks.offset_ns)
    assert float(k["end"].to_numpy()[first].max() - tracks.offset_ns) <= t1
    assert t1 - t0 < tracks.span[1] / 4  # zoomed in on it, not the whole trace
    # the roofline rings the candidate's kernels
    docks.roofline_dock.raise_()
    qtbot.waitUntil(lambda: docks.roofline_panel.shown is not None, timeout=5000)
    assert set(ids) <= set(docks.roofline_panel.roofline.selected_ids())
    # clearing the choice clears the highlight
    docks.fusion_dock.raise_()
    panel.view.clearSelection()
    assert state.highlight == {}


def _unknown_gpu(trace: Trace) -> Trace:
    """The eager trace as if recorded on a GPU the device table does not know."""
    devices = make_table("devices", 1, {"id": [0], "name": ["Mystery Accelerator 9000"], "vendor": ["Acme"]})
    meta = dataclasses.replace(trace.meta, path="/tmp/mystery.pt.trace.json", warnings=[])
    return dataclasses.replace(trace, meta=meta, devices=devices)


def test_unknown_gpu_offers_the_device_picker(qtbot: Any, window: Any, eager: Trace) -> None:
    from kviewer.session.analyses import sol_for_load
    from kviewer.session.tracks import TraceTracks

    trace = _unknown_gpu(eager)
    info = sol_for_load(trace)
    assert info is not None and not info.ok
    tracks = TraceTracks.build(trace, sol=info)
    window.state.add_trace(tracks)  # as the loader hands it over
    docks = window.analysis
    panel = docks.roofline_panel
    qtbot.waitUntil(lambda: panel.shown is not None, timeout=5000)
    assert panel.device_box.isVisible() and panel.device_box.currentIndex() == 0
    assert panel.device_box.currentText() == "Choose the GPU…"
    assert panel.message.isVisible() and "Mystery Accelerator 9000" in panel.message.text()
    assert "not in the device table" in panel.message.text()
    assert panel.roofline is not None and not panel.roofline.isVisible()
    assert tracks.sol_column("bound") is None
    assert any(w.kind == "unknown_device" for w in tracks.trace.meta.warnings)
    docks.fusion_dock.raise_()
    qtbot.waitUntil(lambda: "choose it in the Roofline dock" in docks.fusion_panel.message.text(), timeout=5000)
    docks.roofline_dock.raise_()
    # bars are all in the "unknown" kernel family before a GPU is chosen
    lanes = [ln for ln in tracks.lanes if ln.table == "kernels"]
    before = np.concatenate([ln.base_colour[ln.of_table("kernels")] for ln in lanes]) // colors.SHADES
    assert set(before.tolist()) == {colors.FAMILY_INDEX["kernel"]}

    # the user picks the H200: SOL is recomputed, the bars recoloured, the roofline drawn
    i = panel.device_box.findData("h200")
    panel.device_box.setCurrentIndex(i)
    panel.device_box.activated.emit(i)
    _wait_analysis(qtbot, window)
    qtbot.waitUntil(lambda: panel.roofline.isVisible(), timeout=5000)
    expected = speed_of_light(eager, device="h200")
    assert tracks.sol_info.ok and tracks.sol_info.device == "h200"
    assert panel.roofline.point_count() == int(((expected["flops"] > 0) & (expected["bytes"] > 0) & (expected["dur"] > 0)).sum())
    assert (tracks.sol_column("bound") == expected["bound"].astype(str).to_numpy()).all()
    after = np.concatenate([ln.base_colour[ln.of_table("kernels")] for ln in lanes]) // colors.SHADES
    assert {colors.FAMILY_INDEX["kernel_memory"], colors.FAMILY_INDEX["kernel_compute"]} <= set(after.tolist())
    assert all(ln.inner is not None for ln in lanes)
    assert not any(w.kind == "unknown_device" for w in tracks.trace.meta.warnings)
    assert "GPU chosen by you" in panel.message.text()
    # and the fusion dock now lists candidates on that GPU
    docks.fusion_dock.raise_()
    qtbot.waitUntil(lambda: docks.fusion_panel.shown is not None, timeout=20_000)
    assert docks.fusion_panel.panel.model.rowCount() == len(fusion_candidates(eager, device="h200"))


@pytest.mark.samples
def test_unknown_amd_gpu_from_a_real_file(qtbot: Any, window: Any, samples: Path) -> None:
    path = samples / "torch" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    assert drop_files(window, [path])
    wait_idle(qtbot, window)
    panel = window.analysis.roofline_panel
    qtbot.waitUntil(lambda: panel.shown is not None, timeout=5000)
    assert panel.device_box.currentIndex() == 0 and panel.message.isVisible()
    assert "AMD Radeon Graphics" in panel.message.text()
    i = panel.device_box.findData("mi250x_gcd")
    panel.device_box.setCurrentIndex(i)
    panel.device_box.activated.emit(i)
    _wait_analysis(qtbot, window)
    tracks = window.state.traces[0]
    assert tracks.sol_info.ok and tracks.sol_info.spec.id == "mi250x_gcd"
    assert tracks.sol_column("bound") is not None
