"""One clock (issue 27): the same event read through every surface -- the CLI, SQL (``kviewer sql``
and the Query dock), Details, the timeline's tooltip and axis, the kernel table and the Idle Gaps
dock -- gives the same time, counted from the same origin (an Nsight Systems trace: the session
start, as nsys shows it), and each says which."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pandas as pd
from PySide6.QtCore import Qt

from kviewer.cli import main
from kviewer.ui.timeline import tooltip_text
from kviewer.ui.viewstate import Selection
from tests.ui.conftest import drop_files, wait_idle

NSYS = "nsys/h200_llm_train_nvtx.sqlite"
#: format_time writes seconds to the microsecond
US = 1000
#: waits for the loads, the Query dock's database (about 10 s of work on an idle machine) and the
#: Idle Gaps analysis: generous, as the test machines are shared (a wait is not a timing assertion)
WAIT_MS = 240_000
CLOCK = "since session start"


def _ns(text: str) -> float:
    """``"7.717178 s"`` / ``"378.466 ms"`` -> ns."""
    m = re.fullmatch(r"\s*(-?[\d.,]+)\s*(s|ms|µs|ns)\s*", text)
    assert m, text
    return float(m.group(1).replace(",", "")) * {"s": 1e9, "ms": 1e6, "µs": 1e3, "ns": 1.0}[m.group(2)]


def _cli(capsys: Any, *argv: str) -> pd.DataFrame:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return pd.read_csv(io.StringIO(capsys.readouterr().out))


def _run_query(qtbot: Any, window: Any, sql: str) -> pd.DataFrame:
    panel = window.query
    panel.editor.setPlainText(sql)
    panel.run_button.click()
    qtbot.waitUntil(lambda: not window.runner.pending("query"), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not panel.status.text().startswith(("Running", "Building")), timeout=WAIT_MS)
    assert panel.result is not None
    return panel.result


def test_one_event_reads_the_same_everywhere(qtbot: Any, window: Any, samples: Path, capsys: Any) -> None:
    path = str(samples / NSYS)
    # SQL (the CLI's): the biggest idle gap of the GPU and the kernel that ends it
    gaps = _cli(capsys, "sql", path, "SELECT start_ns, end_ns, gap_ns FROM gpu_idle_gaps ORDER BY gap_ns DESC LIMIT 1", "--format", "csv")
    gap_start, gap_end = int(gaps["start_ns"].iloc[0]), int(gaps["end_ns"].iloc[0])
    assert gaps["gap_ns"].iloc[0] > 1e9  # the multi-second gap of this sample
    ends = _cli(capsys, "sql", path, f"SELECT id, start_ns FROM kernels WHERE start_ns = {gap_end} ORDER BY id LIMIT 1", "--format", "csv")
    kid = int(ends["id"].iloc[0])
    # the CLI's kernel list: the same start
    kernels = _cli(capsys, "kernels", path, "--format", "csv")
    assert int(kernels.loc[kernels["id"] == kid, "start_ns"].iloc[0]) == gap_end
    # an nsys trace's first event comes seconds after its session start: a first-event clock
    # would read seconds less than SQL does
    first = _cli(capsys, "sql", path, "SELECT MIN(start_ns) AS first FROM kernels", "--format", "csv")
    assert int(first["first"].iloc[0]) > 1e9

    assert drop_files(window, [path])
    wait_idle(qtbot, window, timeout=WAIT_MS)
    tracks = window.state.traces[0]
    assert tracks.clock == CLOCK
    # the Query dock: the database the window builds reads the same
    q = _run_query(qtbot, window, f"SELECT start_ns FROM kernels WHERE trace_id = 1 AND id = {kid}")
    assert int(q["start_ns"].iloc[0]) == gap_end

    # Details and the timeline's tooltip: the kernel's start, saying which clock
    window.state.set_selection(Selection(tracks.key, "kernels", kid))
    details = window.details.toPlainText()
    m = re.search(rf"start\s+(.+?) {CLOCK}", details)
    assert m, details
    assert abs(_ns(m.group(1)) - gap_end) <= US
    tip = tooltip_text(tracks, "kernels", kid)
    m = re.search(rf"start: (.+?) {CLOCK}", tip)
    assert m, tip
    assert abs(_ns(m.group(1)) - gap_end) <= US
    # the timeline draws it there, and its axis says what 0 is
    assert float(tracks.trace.kernels["start"].iloc[kid] - tracks.offset_ns) == gap_end
    assert window.timeline.plot.getAxis("bottom").labelText == f"time {CLOCK}"
    # the kernel table's instances: the same number, the clock in the start column's header
    from kviewer.session.table_data import instance_data

    start = next(c for c in instance_data(window.state.traces).columns if c.key == "start")
    assert CLOCK in start.header_tip
    assert start.values[kid] == gap_end and abs(_ns(start.display(kid)) - gap_end) <= US  # type: ignore[misc]

    # the Idle Gaps dock: its biggest gap starts where SQL's does
    window.idle_dock.show()
    window.idle_dock.raise_()
    panel = window.idle_panel
    panel.refresh()
    qtbot.waitUntil(lambda: panel.gaps is not None and len(panel.gaps) > 0, timeout=WAIT_MS)
    model = panel.model
    start_col = model.column_index("start_display")
    shown = [str(model.data(model.index(r, start_col))) for r in range(min(model.rowCount(), 50))]
    gap_col = model.column_index("gap_ns")
    sizes = [_ns(str(model.data(model.index(r, gap_col)))) for r in range(min(model.rowCount(), 50))]
    biggest = max(range(len(sizes)), key=lambda r: sizes[r])
    assert abs(_ns(shown[biggest]) - gap_start) <= US
    assert CLOCK in model.headerData(start_col, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)
