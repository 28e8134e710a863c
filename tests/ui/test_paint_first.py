"""Paint first, analyse after: the window shows a trace's timeline and table as soon as its
kernels are loaded; the speed of light (bound colours, roofline) and the fusion candidates fill
in afterwards, the docks saying they are being computed; a reopen takes them from the analysis
cache and is complete at once."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.session import colors
from kviewer.ui.viewstate import Selection
from tests.ui.conftest import drop_files

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


def _kernel_families(tracks: Any) -> set[int]:
    """Colour families of the kernel bars (stream lanes also hold copies and memsets)."""
    return set((np.concatenate([ln.base_colour[ln.of_table("kernels")] for ln in tracks.lanes]) // colors.SHADES).tolist())


def test_trace_shows_before_its_speed_of_light(qtbot: Any, window: Any, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kviewer.session.analyses as analyses

    release = threading.Event()
    real = analyses.compute_sol

    def slow_sol(trace: Any, device: Any = None) -> Any:
        assert release.wait(30), "the test never released the analysis"
        return real(trace, device)

    monkeypatch.setattr(analyses, "compute_sol", slow_sol)
    docks = window.analysis
    docks.fusion_dock.raise_()
    assert drop_files(window, [sample_traces / EAGER])
    try:
        # the load is done and the trace is on screen while its speed of light is still computing
        qtbot.waitUntil(lambda: not window.loader.busy and len(window.state.traces) == 1, timeout=20_000)
        tracks = window.state.traces[0]
        assert tracks.sol_info is None and docks.computing_sol(tracks.key)
        assert window.timeline.rows and window.table.model.rowCount() == len(tracks.trace.kernels)
        assert _kernel_families(tracks) == {colors.FAMILY_INDEX["kernel"]}  # not coloured by bound yet
        qtbot.waitUntil(lambda: "Computing the speed of light" in docks.fusion_panel.message.text(), timeout=5000)
        docks.roofline_dock.raise_()
        qtbot.waitUntil(lambda: "Computing the speed of light" in docks.roofline_panel.placeholder.text(), timeout=5000)
        # the window is usable meanwhile: select a kernel, the details follow
        window.state.set_selection(Selection(tracks.key, "kernels", 3))
        assert "#3" in window.details.toPlainText()
    finally:
        release.set()
    qtbot.waitUntil(lambda: tracks.sol_info is not None, timeout=20_000)
    assert tracks.sol_info.ok and not docks.computing_sol()
    assert {colors.FAMILY_INDEX["kernel_memory"], colors.FAMILY_INDEX["kernel_compute"]} <= _kernel_families(tracks)
    qtbot.waitUntil(lambda: docks.roofline_panel.roofline is not None and docks.roofline_panel.roofline.isVisible(), timeout=5000)
    assert "bound" in {c.key for c in window.table.model.data_.columns}
    assert window.state.selection == Selection(tracks.key, "kernels", 3)  # the selection survived the recolouring


def test_reopen_comes_with_its_speed_of_light(qtbot: Any, window: Any, sample_traces: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import kviewer.session.analyses as analyses

    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / EAGER
    shutil.copy(sample_traces / EAGER, path)
    docks = window.analysis
    docks.fusion_dock.raise_()
    window.open_files([str(path)])
    qtbot.waitUntil(lambda: len(window.state.traces) == 1 and window.state.traces[0].sol_info is not None, timeout=30_000)
    first = window.state.traces[0]
    assert first.sol_info.ok
    qtbot.waitUntil(lambda: docks.fusion_panel.shown is not None, timeout=30_000)
    n_candidates = docks.fusion_panel.panel.model.rowCount()
    assert n_candidates > 0
    window.close_all()
    # the second open must not compute anything: the speed of light comes with the trace, the
    # fusion candidates from the same cache
    monkeypatch.setattr(analyses, "compute_sol", lambda *a, **k: pytest.fail("the speed of light was computed again"))
    monkeypatch.setattr(analyses, "fusion_for", lambda *a, **k: pytest.fail("the fusion candidates were computed again"))
    seen: list[Any] = []
    window.state.tracesChanged.connect(lambda: seen.extend((t.sol_info for t in window.state.traces)))
    window.open_files([str(path)])
    qtbot.waitUntil(lambda: not window.loader.busy and len(window.state.traces) == 1, timeout=30_000)
    again = window.state.traces[0]
    assert seen and seen[0] is not None and seen[0].ok  # complete when it first appeared
    assert again.sol_info.ok and not window.analysis.computing_sol()
    assert np.array_equal(again.sol_column("bound"), first.sol_column("bound"))
    assert {colors.FAMILY_INDEX["kernel_memory"], colors.FAMILY_INDEX["kernel_compute"]} <= _kernel_families(again)
    qtbot.waitUntil(lambda: docks.fusion_panel.shown is not None and docks.fusion_panel.shown[0] == again.key, timeout=30_000)
    assert docks.fusion_panel.panel.model.rowCount() == n_candidates


def test_compare_dock_says_computing_until_the_comparison_arrives(qtbot: Any, window: Any, sample_traces: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import kviewer.analysis.compare as compare_module

    release = threading.Event()
    real = compare_module.compare

    def slow_compare(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30), "the test never released the comparison"
        return real(*args, **kwargs)

    monkeypatch.setattr(compare_module, "compare", slow_compare)
    window.open_files([str(sample_traces / EAGER), str(sample_traces / "h200_llm_block_compiled.pt.trace.json.gz")])
    try:
        qtbot.waitUntil(lambda: window.compare.busy, timeout=30_000)
        dock = window.compare.dock
        assert dock.isVisible() and "Computing the comparison" in window.compare.placeholder.text()
        assert len(window.state.traces) == 2 and not window.compare.active
    finally:
        release.set()
    qtbot.waitUntil(lambda: window.compare.active, timeout=30_000)
    assert window.compare.view is not None and window.compare.view.isVisible()
    window.compare.stop()
    assert window.compare.dock.isHidden() and "Computing" not in window.compare.placeholder.text()
