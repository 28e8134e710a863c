"""The Diagnostics dock: every open trace's load warnings (salvaged files, dropped events, clock
fixes, ...) in one list, so a truncated file's warning is never only a line in the status bar.

Each row is one :class:`kviewer.core.Diagnostic` of one trace: the trace, the severity, the kind
(what the code decides on) and the message, in the app's one table (:class:`~kviewer.ui.
table_model.TableModel`: sortable, Ctrl+C copies rows). A status-bar button shows how many there
are and brings the dock forward.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget

from kviewer.session.table_data import Col, text_table
from kviewer.ui.table_model import TableModel, TableView

COLUMNS = ("trace", "severity", "kind", "message")
#: the table's columns (text; the message's whole text is its tooltip)
COLS = tuple(Col(c, c.capitalize(), "text") for c in COLUMNS)


def diagnostics_rows(traces: list[Any]) -> list[tuple[str, str, str, str]]:
    """(trace label, severity, kind, message) of every warning of every open trace, in order."""
    rows = []
    for t in traces:
        for d in t.trace.meta.warnings:
            rows.append((str(t.label), str(d.severity), str(d.kind), str(d.message)))
    return rows


class DiagnosticsPanel(QWidget):
    """A list of the open traces' warnings; ``countChanged(n)`` after each refresh."""

    countChanged = Signal(int)

    def __init__(self, state: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.summary = QLabel()
        self.count = 0
        """the number of warnings listed"""
        self.model = TableModel()
        self.view = TableView(self.model, sortable=True)
        self.view.horizontalHeader().setStretchLastSection(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.view, 1)
        state.tracesChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        rows = diagnostics_rows(list(self.state.traces))
        messages = [r[3] for r in rows]
        cols = [*COLS[:-1], replace(COLS[-1], tooltip=lambda i: messages[i])]
        self.model.set_table(text_table(rows, cols))
        for i in range(len(COLUMNS) - 1):
            self.view.resizeColumnToContents(i)
        self.count = len(rows)
        n = len(self.state.traces)
        self.summary.setText(f"{len(rows)} warning(s) from {n} open trace(s)" if n else "No trace open")
        self.countChanged.emit(len(rows))


class DiagnosticsButton(QToolButton):
    """The status bar's way to the Diagnostics dock: "⚠ N warnings", hidden when there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoRaise(True)
        self.setToolTip("Show every open trace's warnings (View › Show Diagnostics, Ctrl+Shift+D)")
        self.set_count(0)

    def set_count(self, n: int) -> None:
        self.setText(f"⚠ {n} warning{'s' if n != 1 else ''}")
        self.setVisible(n > 0)
