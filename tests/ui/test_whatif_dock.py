"""The What-if dock and the critical-path track (issue 24): the dock's projected steps equal the
CLI's, the path is painted over the lanes in its class colours, and a step selected as the range
gets its breakdown in the Range dock."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt

from kviewer.session.tracks import TraceTracks


def _open(window: Any, path: Path) -> TraceTracks:
    from kviewer.io import load

    window.whatif_dock.raise_()  # the dock computes while on screen
    tracks = TraceTracks.build(load(path))
    window.state.add_trace(tracks)
    return tracks


def _tick(qtbot: Any, panel: Any, box: Any, done: Any) -> None:
    """Wait for the measured projection, tick ``box``, wait for the projection whose changes pass ``done``."""
    qtbot.waitUntil(lambda: panel.projection is not None, timeout=20_000)
    box.setChecked(True)
    qtbot.waitUntil(lambda: panel.projection is not None and done(panel.projection.changes), timeout=20_000)


def test_dock_projects_like_the_cli_and_draws_the_path(qtbot: Any, window: Any, sample_traces: Path) -> None:
    from kviewer.analysis.critpath import critical_paths
    from kviewer.analysis.whatif import Changes, whatif_model
    from kviewer.ui.critpath_overlay import CLASS_COLOURS

    tracks = _open(window, sample_traces / "mlp_sync.pt.trace.json.gz")
    panel = window.whatif_panel
    qtbot.waitUntil(lambda: panel.projection is not None, timeout=20_000)
    assert [s.projected_ns for s in panel.projection.steps] == [s.measured_ns for s in panel.projection.steps]
    panel.graphs.setChecked(True)
    panel.no_sync.setChecked(True)
    qtbot.waitUntil(lambda: panel.projection is not None and panel.projection.changes.cuda_graphs
                    and panel.projection.changes.no_sync == (), timeout=20_000)
    want = whatif_model(tracks.trace).project(Changes(cuda_graphs=True, no_sync=()))
    assert [s.projected_ns for s in panel.projection.steps] == [s.projected_ns for s in want.steps]
    assert panel.model.rowCount() == len(want.steps)
    # fusion candidates can be ticked one by one
    assert panel.fusion.count() >= 1
    # the critical path over the lanes
    panel.show_path.setChecked(True)
    assert window.timeline.critical_path is panel.overlay and len(panel.overlay.start) > 0
    res = critical_paths(tracks.trace)
    last = res.steps[-1]
    window.timeline.set_range(float(last.start - tracks.offset_ns), float(last.end - tracks.offset_ns))
    qtbot.wait(50)
    img = window.timeline.grab().toImage()
    colours = {(img.pixelColor(x, y).red(), img.pixelColor(x, y).green(), img.pixelColor(x, y).blue())
               for x in range(0, img.width(), 2) for y in range(0, img.height(), 2)}
    cpu = CLASS_COLOURS[3]
    assert (cpu.red(), cpu.green(), cpu.blue()) in colours  # a host-bound step: host work on the path
    panel.show_path.setChecked(False)
    assert window.timeline.critical_path is None


def test_dock_ticks_channels_last(qtbot: Any, window: Any, sample_traces: Path) -> None:
    from kviewer.analysis.whatif import Changes, whatif_model

    tracks = _open(window, sample_traces / "h100_r7_gn_eager.pt.trace.json.gz")
    panel = window.whatif_panel
    _tick(qtbot, panel, panel.channels_last, lambda ch: ch.channels_last)
    want = whatif_model(tracks.trace).project(Changes(channels_last=True))
    assert [s.projected_ns for s in panel.projection.steps] == [s.projected_ns for s in want.steps]


def test_a_step_selected_as_the_range_shows_its_breakdown(qtbot: Any, window: Any, sample_traces: Path) -> None:
    from kviewer.analysis.critpath import critical_paths

    tracks = _open(window, sample_traces / "block4_eager.pt.trace.json.gz")
    panel = window.whatif_panel
    qtbot.waitUntil(lambda: panel.projection is not None, timeout=20_000)
    index = panel.model.index(1, 0)
    panel._on_row(index)  # a click on the second step
    res = critical_paths(tracks.trace)
    rng = window.state.time_selection
    assert rng == (float(res.steps[1].start - tracks.offset_ns), float(res.steps[1].end - tracks.offset_ns))
    bd = window.range_panel.critpath
    qtbot.waitUntil(lambda: bd.step is not None, timeout=20_000)
    assert bd.step.name == res.steps[1].name and bd.step.breakdown == res.steps[1].breakdown
    assert "gpu_kernel" in bd.label.text() and "launch the trace does not hold" not in bd.label.text()
    # the first step waits behind work queued before the profiler started (1.49 ms of its 4.88 ms path): it says so
    assert res.steps[0].unlaunched_ns > 1_000_000
    panel._on_row(panel.model.index(0, 0))
    qtbot.waitUntil(lambda: bd.step is not None and bd.step.name == res.steps[0].name, timeout=20_000)
    assert "launch the trace does not hold" in bd.label.text() and "1.489 ms" in bd.label.text()
    rng = window.state.time_selection
    # a range that is no step
    window.state.set_time_selection((rng[0], rng[0] + (rng[1] - rng[0]) / 2))
    qtbot.waitUntil(lambda: "not a step" in bd.label.text(), timeout=20_000)
    assert bd.step is None
    np.testing.assert_equal(panel.changes().empty, True)
    assert Qt.CheckState.Unchecked == panel.fusion.item(0).checkState() if panel.fusion.count() else True


def test_projected_timeline_beside_the_measured_one(qtbot: Any, window: Any, sample_traces: Path) -> None:
    tracks = _open(window, sample_traces / "mlp_eager.pt.trace.json.gz")
    panel = window.whatif_panel
    _tick(qtbot, panel, panel.graphs, lambda ch: ch.cuda_graphs)
    panel.beside.click()
    qtbot.waitUntil(lambda: panel.projected_tracks is not None, timeout=20_000)
    proj = panel.projected_tracks
    assert len(window.state.traces) == 2 and "projected" in proj.label
    qtbot.waitUntil(lambda: window.compare.active, timeout=30_000)
    assert window.compare.a_key == tracks.key and window.compare.b_key == proj.key
    # the projected trace keeps every kernel, at its replayed time
    assert len(proj.trace.kernels) == len(tracks.trace.kernels)
    # it has no speed of light of its own (its kernels run at estimated times): the docks say so,
    # not that it has no kernels
    from kviewer.ui.analysis_docks import _no_sol_text

    assert proj.sol_info is None and "not computed" in _no_sol_text(proj) and "no GPU kernels" not in _no_sol_text(proj)


def test_the_path_bands_are_built_with_the_frame_not_on_every_paint(qtbot: Any, window: Any, sample_traces: Path,
                                                                    monkeypatch: Any) -> None:
    tracks = _open(window, sample_traces / "mlp_sync.pt.trace.json.gz")
    panel = window.whatif_panel
    qtbot.waitUntil(lambda: panel.base is not None, timeout=20_000)
    calls: list[int] = []
    real = panel.overlay.band_rects

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(panel.overlay, "band_rects", counted)
    panel.show_path.setChecked(True)
    window.timeline.grab()
    window.timeline.grab()  # a repaint of the same view: the frame (with its bands) is reused
    assert len(calls) == 1 and window.timeline.item._frame.critpath
    panel.show_path.setChecked(False)  # cleared: the frame is built again, without bands
    window.timeline.grab()
    assert len(calls) == 1 and not window.timeline.item._frame.critpath
    assert tracks.key == panel.overlay.key
