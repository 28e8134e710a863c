"""The Query dock: SQL over the open traces, rows that select events, recent queries kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings

from kviewer.ui.query_dock import RECENT_KEY, event_of
from tests.ui.conftest import drop_files, wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


def _run(qtbot: Any, window: Any, sql: str) -> None:
    panel = window.query
    panel.editor.setPlainText(sql)
    panel.run_button.click()
    qtbot.waitUntil(lambda: not window.runner.pending("query"), timeout=60_000)
    qtbot.waitUntil(lambda: not panel.status.text().startswith(("Running", "Building")), timeout=5000)


def test_query_rows_select_kernels_on_the_timeline(qtbot: Any, window: Any, sample_traces: Path) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    tracks = window.state.traces[0]
    _run(qtbot, window, "SELECT trace_id, id, name, start_ns, dur_ns, grid_x FROM kernels ORDER BY dur_ns DESC LIMIT 10")
    panel = window.query
    assert panel.result is not None and len(panel.result) == 10
    assert panel.model.rowCount() == 10
    assert "10 rows" in panel.status.text()
    longest = int(tracks.trace.kernels["dur"].idxmax())
    assert int(panel.result["id"].iloc[0]) == int(tracks.trace.kernels["id"].iloc[longest])
    panel.view.clicked.emit(panel.model.index(0, 1))
    sel = window.state.selection
    assert sel is not None and (sel.trace, sel.table, sel.row) == (tracks.key, "kernels", int(panel.result["id"].iloc[0]))


def test_summary_view_matches_the_trace(qtbot: Any, window: Any, sample_traces: Path) -> None:
    from kviewer.analysis.summary import kernel_summary

    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    _run(qtbot, window, "SELECT name, count, total_ns FROM kernel_summary WHERE trace_id = 1")
    ours = kernel_summary(window.state.traces[0].trace)
    res = window.query.result
    assert list(res["name"]) == list(ours["name"])
    assert res["total_ns"].tolist() == ours["total_ns"].tolist()


def test_a_range_row_zooms_the_timeline(qtbot: Any, window: Any, sample_traces: Path) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    _run(qtbot, window, "SELECT trace_id, step, start_ns, end_ns FROM step_times ORDER BY step")
    panel = window.query
    assert len(panel.result) == 3
    panel.view.clicked.emit(panel.model.index(1, 0))
    t0, t1 = window.state.range
    row = panel.result.iloc[1]
    off = window.state.traces[0].offset_ns
    assert t0 < row["start_ns"] - off < row["end_ns"] - off < t1
    assert (t1 - t0) < 1.2 * (row["end_ns"] - row["start_ns"])


@pytest.mark.parametrize("sql", ["SELEC 1", "DELETE FROM kernels", "SELECT * FROM no_such_table"])
def test_bad_sql_is_one_line_and_nothing_changes(qtbot: Any, window: Any, sample_traces: Path, sql: str) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    n = len(window.state.traces[0].trace.kernels)
    _run(qtbot, window, sql)
    text = window.query.status.text()
    assert text.startswith("⚠ SQL error") and "\n" not in text
    _run(qtbot, window, "SELECT count(*) AS n FROM kernels")
    assert int(window.query.result["n"].iloc[0]) == n


def test_recent_queries_are_kept(qtbot: Any, window: Any, sample_traces: Path) -> None:
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    _run(qtbot, window, "SELECT 1 AS one")
    _run(qtbot, window, "SELECT 2 AS two")
    recent = QSettings().value(RECENT_KEY)
    assert recent[:2] == ["SELECT 2 AS two", "SELECT 1 AS one"]
    window.query.recent.activated.emit(1)
    assert window.query.editor.toPlainText() == "SELECT 1 AS one"


def test_event_of_decides_on_columns() -> None:
    keys = [7, 9]
    assert event_of(["trace_id", "kernel_id"], {"trace_id": 2, "kernel_id": 5}, keys) == (9, "kernels", 5)
    assert event_of(["trace_id", "id", "depth"], {"trace_id": 1, "id": 3, "depth": 0}, keys) == (7, "cpu_slices", 3)
    assert event_of(["trace_id", "id"], {"trace_id": 1, "id": 3}, keys) is None  # which table? unknown
    assert event_of(["trace_id", "kernel_id"], {"trace_id": 3, "kernel_id": 5}, keys) is None
