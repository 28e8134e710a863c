"""``kviewer screenshot A B --view window`` draws what ``kviewer A B`` opens: B aligned on A, the
track groups labelled A and B, the Compare dock filled. Both run the same session command
(:func:`kviewer.session.compare.start_compare`); this test opens the two files through the
window's loader (as ``kviewer A B`` does) and through the headless path, and compares what each
shows, row by row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kviewer.analysis.compare import compare
from kviewer.io import load
from tests.ui.conftest import wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"


def _shown(window: Any) -> dict[str, Any]:
    """What a window shows of two compared traces, independent of trace keys."""
    a, b = window.compare.traces()
    view = window.compare.view
    return {
        "active": window.compare.active,
        "dock": window.compare.dock.isVisible() and view is not None and view.isVisible(),
        # the Compare tab is the one on top (a tabbed dock behind another still says isVisible)
        "dock_on_top": not window.compare.dock.visibleRegion().isEmpty(),
        "rows": [(r.kind, r.depth, r.label) for r in window.timeline.rows],
        "paths": [a.trace.meta.path.rsplit("/", 1)[-1], b.trace.meta.path.rsplit("/", 1)[-1]],
        "b_minus_a_offset": b.offset_ns - a.offset_ns,
        "spans": [a.span, b.span],
        "diff_rows": view.diff_model.rowCount() if view is not None else -1,
        "totals_rows": view.totals_model.rowCount() if view is not None else -1,
    }


def test_screenshot_of_two_files_equals_the_window(qtbot: Any, window: Any, sample_traces: Path, errors: Any) -> None:
    from kviewer.ui.headless import build_view

    window.open_files([str(sample_traces / EAGER), str(sample_traces / COMPILED)])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    opened = _shown(window)

    headless = build_view("window", [load(sample_traces / EAGER), load(sample_traces / COMPILED)], size=(1400, 900))
    try:
        drawn = _shown(headless)
    finally:
        headless.close()
        headless.deleteLater()
    assert errors.calls == []
    assert drawn == opened
    # and both are what the comparison computed directly from the files says
    expected = compare(load(sample_traces / EAGER), load(sample_traces / COMPILED))
    assert drawn["active"] and drawn["dock"] and drawn["dock_on_top"]
    assert drawn["b_minus_a_offset"] == -int(expected.align_offset_ns)
    assert drawn["diff_rows"] == len(expected.groups) > 0
    roots = [label for kind, depth, label in drawn["rows"] if kind == "header" and depth == 0]
    assert roots == [f"A · {EAGER}", f"B · {COMPILED}"]
