"""The Query dock: SQL over the open traces (Perfetto's query page), in the schema of ``kviewer export``.

The open traces are written into a read-only in-memory database (:class:`kviewer.sqldb.LazyDatabase`,
trace_id 1, 2, ... in the order they were opened) on the analysis worker, one per set of open
traces, each table when a query first reads it (as ``kviewer sql`` does); queries run there too,
so a slow one never blocks the window. The result shows in the
common table model; choosing a row that names an event (a kernel, GPU op or CPU slice of an open
trace) selects it on the timeline, a row with ``start_ns``/``end_ns`` zooms to that interval.
Recent queries are kept in QSettings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QModelIndex, QSettings, Qt
from PySide6.QtGui import QFontDatabase, QKeySequence, QShortcut
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QSplitter, QVBoxLayout, QWidget

import kviewer
from kviewer.session.tables import query_columns
from kviewer.ui.table_model import TableModel, TableView
from kviewer.ui.viewstate import Selection

if TYPE_CHECKING:
    import pandas as pd

    import kviewer.sqldb
    from kviewer.ui.background import BackgroundRunner
    from kviewer.ui.viewstate import ViewState

RECENT_KEY = "query/recent"
MAX_RECENT = 20
EXAMPLE = "SELECT trace_id, name, count, total_ns, time_pct FROM kernel_summary ORDER BY total_ns DESC LIMIT 20"
#: a column only this event table has: a result row with it (and trace_id, id) is such an event
TABLE_MARKERS = {"kernels": "grid_x", "gpu_ops": "direction", "cpu_slices": "depth"}


@dataclass
class _Database:
    """The in-memory database of one set of open traces; touched on the worker thread only."""

    signature: tuple[int, ...] = ()
    conn: Any = None
    """kviewer.sqldb.LazyDatabase"""
    keys: list[int] = field(default_factory=list)


def event_of(columns: list[str], row: dict[str, Any], keys: list[int]) -> tuple[int, str, int] | None:
    """(trace key, table, row id) of the event a result row names, or None."""
    tid = row.get("trace_id")
    if tid is None or not isinstance(tid, (int, np.integer)) or not 1 <= int(tid) <= len(keys):
        return None
    key = keys[int(tid) - 1]
    for col, table in (("kernel_id", "kernels"), ("op_id", "gpu_ops"), ("slice_id", "cpu_slices")):
        if isinstance(row.get(col), (int, np.integer)):
            return key, table, int(row[col])
    if isinstance(row.get("id"), (int, np.integer)):
        for table, marker in TABLE_MARKERS.items():
            if marker in columns:
                return key, table, int(row["id"])
    return None


class QueryPanel(QWidget):
    """SQL editor, run button, recent queries and the result table."""

    def __init__(self, state: ViewState, runner: BackgroundRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.runner = runner
        self._db = _Database()
        self.result: pd.DataFrame | None = None
        self._keys: list[int] = []
        self.editor = QPlainTextEdit()
        self.editor.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.editor.setPlaceholderText(f"{EXAMPLE}\n\nTables: kernels, gpu_ops, cpu_slices, flows, devices, metrics, steps, "
                                       "kernel_sol, fusion_candidates, traces; views: kernel_summary, nvtx_summary, memcpy_summary, "
                                       "kernel_launch_latency, gpu_idle_gaps, step_times (see kviewer/sqldb.py). Ctrl+Enter runs.")  # fmt: skip
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run the query (Ctrl+Enter)")
        self.run_button.clicked.connect(self.run_query)
        self.recent = QComboBox()
        self.recent.setToolTip("Recent queries")
        self.recent.setMinimumContentsLength(30)
        self.recent.activated.connect(self._on_recent)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        # the result table is made with the first result: its model (and pandas) are not
        # imported on the way to the first window
        self.model: TableModel | None = None
        self.view: TableView | None = None
        self.results = QWidget()
        self._results_lay = QVBoxLayout(self.results)
        self._results_lay.setContentsMargins(0, 0, 0, 0)

        bar = QHBoxLayout()
        bar.addWidget(self.run_button)
        bar.addWidget(self.recent, 1)
        top = QWidget()
        top_lay = QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.addWidget(self.editor, 1)
        top_lay.addLayout(bar)
        top_lay.addWidget(self.status)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(top)
        split.addWidget(self.results)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([110, 300])  # a few lines of SQL, most of the height for the result
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(split)
        for seq in ("Ctrl+Return", "Ctrl+Enter"):
            sc = QShortcut(QKeySequence(seq), self.editor)
            sc.activated.connect(self.run_query)
        self._fill_recent()

    # recent queries --------------------------------------------------------------------------
    def recent_queries(self) -> list[str]:
        value: Any = QSettings().value(RECENT_KEY, [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def _remember(self, sql: str) -> None:
        recent = [sql] + [q for q in self.recent_queries() if q != sql]
        QSettings().setValue(RECENT_KEY, recent[:MAX_RECENT])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent.clear()
        for q in self.recent_queries():
            self.recent.addItem(" ".join(q.split())[:120], q)
        if not self.recent.count():
            self.recent.addItem("(no recent queries)", "")

    def _on_recent(self, index: int) -> None:
        sql = self.recent.itemData(index)
        if sql:
            self.editor.setPlainText(str(sql))

    # running ---------------------------------------------------------------------------------
    def run_query(self, sql: str | None = None) -> None:
        """Run ``sql`` (else the editor's text) on the open traces, in the background."""
        sql = (sql if isinstance(sql, str) else self.editor.toPlainText()).strip()
        if not sql:
            self.status.setText("Write a query first, e.g. " + EXAMPLE)
            return
        traces = list(self.state.traces)
        if not traces:
            self.status.setText("Open a trace to query it.")
            return
        self._remember(sql)
        signature = tuple(id(t.trace) for t in traces)
        keys = [t.key for t in traces]
        plain = [t.trace for t in traces]
        # the speed of light the window already computed (on the GPU the user chose, if any)
        sols = [t.sol_info.sol if t.sol_info is not None and t.sol_info.ok else None for t in traces]
        holder = self._db
        self.status.setText("Running…" if holder.signature == signature else "Building the database of the open traces…")

        def work() -> tuple[pd.DataFrame, list[int]]:
            # worker thread: the database lives and is used here only; it holds the tables the
            # queries so far have read, and a query reading another one adds it
            if holder.signature != signature or holder.conn is None:
                if holder.conn is not None:
                    holder.conn.close()
                holder.conn = None
                holder.conn = kviewer.sqldb.LazyDatabase(plain, sols=sols)
                holder.signature, holder.keys = signature, keys
            return holder.conn.query(sql, timeout_s=60.0), list(holder.keys)

        self.runner.run("query", work, self._show, self._failed)

    def _show(self, result: tuple[pd.DataFrame, list[int]]) -> None:
        df, keys = result
        df = df.reset_index(drop=True)
        self.result, self._keys = df, keys
        old = self.model
        self.model = TableModel(self)
        self.model.set_frame(df, query_columns(df, self.state.clock()))
        if self.view is None:
            self.view = TableView(self.model)
            self.view.verticalHeader().setVisible(False)
            self.view.horizontalHeader().setStretchLastSection(True)
            self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
            self.view.activated.connect(self._on_row)
            self.view.clicked.connect(self._on_row)
            self._results_lay.addWidget(self.view)
        else:
            self.view.setModel(self.model)
        if old is not None:
            old.deleteLater()  # the previous result's model, parented to the panel
        self.view.resizeColumnsToContents()
        n = len(df)
        self.status.setText(f"{n:,} row{'s' if n != 1 else ''}" + ("; choose a row to select its event" if n and self._selectable() else ""))

    def _failed(self, message: str) -> None:
        self.status.setText(f"⚠ {message.splitlines()[0] if message else 'the query failed'}")

    def _selectable(self) -> bool:
        df = self.result
        if df is None or not len(df):
            return False
        return event_of(list(df.columns), {str(k): v for k, v in df.iloc[0].to_dict().items()}, self._keys) is not None or {"start_ns", "end_ns"} <= set(df.columns)

    def _on_row(self, index: QModelIndex) -> None:
        df = self.result
        if df is None or self.model is None or not index.isValid():
            return
        row = {str(k): v for k, v in df.iloc[self.model.source_row(index.row())].to_dict().items()}
        event = event_of(list(df.columns), row, self._keys)
        if event is not None:
            key, table, rid = event
            tracks = self.state.trace(key)
            if tracks is not None and 0 <= rid < len(tracks.trace.table(table)):
                self.state.set_selection(Selection(key, table, rid), reveal=True)
                return
        start, end = row.get("start_ns"), row.get("end_ns")
        if isinstance(start, (int, float, np.integer, np.floating)) and isinstance(end, (int, float, np.integer, np.floating)) and end > start:
            tid = row.get("trace_id")
            offset = 0
            if isinstance(tid, (int, np.integer)) and 1 <= int(tid) <= len(self._keys):
                tracks = self.state.trace(self._keys[int(tid) - 1])
                offset = tracks.offset_ns if tracks is not None else 0
            pad = (float(end) - float(start)) * 0.05
            self.state.set_range(float(start) - offset - pad, float(end) - offset + pad)

    def on_traces_changed(self) -> None:
        """A trace opened or closed: the database of the old set is freed (rebuilt on demand)."""
        if self._db.conn is not None and self._db.signature != tuple(id(t.trace) for t in self.state.traces):
            self.close_database()

    def close_database(self) -> None:
        """Forget the database (the traces it holds are closed); the worker frees it."""
        holder = self._db
        self._db = _Database()

        def close() -> None:
            if holder.conn is not None:
                holder.conn.close()

        self.runner.run("query-close", close, lambda _r: None)


__all__ = ["QueryPanel", "event_of"]
