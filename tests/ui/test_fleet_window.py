"""The per-rank table of a ``kviewer fleet`` output: slowest first, unknown as "—", and a
double-click opens that rank's trace in the main window."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from kviewer.cli import main
from tests.bench.gen_fleet import write_ranks
from tests.ui.conftest import wait_idle


def _fleet(tmp_path: Path) -> Path:
    write_ranks(tmp_path / "run", 3, straggler=1, slow_us=300.0, seed=4)
    (tmp_path / "run" / "rank-3.pt.trace.json.gz").write_bytes(b"")  # empty: skipped
    out = tmp_path / "out"
    assert main(["fleet", str(tmp_path / "run"), "-o", str(out), "--scheduler", "none", "--report", "none", "-q"]) == 0
    return out


def test_fleet_table_and_double_click(qtbot: Any, qtmodeltester: Any, window: Any, tmp_path: Path, errors: Any, capsys: Any) -> None:
    from kviewer.ui.app import _open_fleets

    out = _fleet(tmp_path)
    capsys.readouterr()
    rest = _open_fleets(window, [str(out), str(tmp_path / "other.json")])
    assert rest == [str(tmp_path / "other.json")]
    qtbot.waitUntil(lambda: len(window.fleet_windows) == 1, timeout=20000)  # read on a worker thread
    (fw,) = window.fleet_windows
    qtbot.addWidget(fw)
    qtmodeltester.check(fw.model, force_py=True)
    view = fw.view
    assert fw.model.rowCount() == 3
    rank_col = [fw.model.headerData(c, Qt.Orientation.Horizontal) for c in range(fw.model.columnCount())].index("rank")
    assert fw.model.index(0, rank_col).data() == "1"  # the planted straggler first
    reason_col = [fw.model.headerData(c, Qt.Orientation.Horizontal) for c in range(fw.model.columnCount())].index("kernel group / idle")
    assert "layer_norm" in fw.model.index(0, reason_col).data()
    view.doubleClicked.emit(fw.model.index(0, 0))
    wait_idle(qtbot, window)
    assert len(window.state.traces) == 1
    assert Path(window.state.traces[0].trace.meta.path).name == "rank-1.pt.trace.json.gz"
    assert errors.calls == []
    fw.close()


def test_hostile_fleet_output_never_blocks_the_window(qtbot: Any, window: Any, tmp_path: Path, errors: Any) -> None:
    """A fleet.sqlite whose kviewer_schema is an endless recursive view (issue #28 item 1): the
    window opens it on a worker (the GUI thread never queries it), it is not taken for a fleet
    output, and opening it as a trace says why in one error."""
    import sqlite3

    from kviewer.ui.app import _open_fleets

    out = tmp_path / "out"
    out.mkdir()
    con = sqlite3.connect(out / "fleet.sqlite")
    con.executescript(
        "CREATE VIEW kviewer_schema AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT 1 AS version, 'x' AS kviewer_version, 'fleet' AS kind FROM r WHERE x < 0;"
        "CREATE TABLE fleet_ranks (run TEXT, rank INTEGER, excess_pct REAL, path TEXT);"
    )
    con.close()
    assert _open_fleets(window, [str(out / "fleet.sqlite")]) == []  # returns at once: nothing read here
    qtbot.waitUntil(lambda: len(errors.calls) == 1, timeout=30000)
    assert window.fleet_windows == []
    assert "fleet.sqlite" in errors.calls[0][1]
