"""The Diagnostics dock: every open trace's load warnings (salvaged files, dropped events, clock
fixes, ...) in one list, so a truncated file's warning is never only a line in the status bar.

Each row is one :class:`kviewer.core.Diagnostic` of one trace: the trace, the severity, the kind
(what the code decides on) and the message. A status-bar button shows how many there are and
brings the dock forward.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHeaderView, QLabel, QToolButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

COLUMNS = ("trace", "severity", "kind", "message")


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
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels([c.capitalize() for c in COLUMNS])
        self.tree.setRootIsDecorated(False)
        self.tree.setWordWrap(True)
        self.tree.header().setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.tree, 1)
        state.tracesChanged.connect(self.refresh)
        self.refresh()

    def refresh(self) -> None:
        rows = diagnostics_rows(list(self.state.traces))
        self.tree.clear()
        for row in rows:
            item = QTreeWidgetItem(list(row))
            item.setToolTip(3, row[3])
            self.tree.addTopLevelItem(item)
        for i in range(len(COLUMNS) - 1):
            self.tree.resizeColumnToContents(i)
        n = len(self.state.traces)
        self.summary.setText(f"{len(rows)} warning(s) from {n} open trace(s)" if n else "No trace open")
        self.countChanged.emit(len(rows))


class DiagnosticsButton(QToolButton):
    """The status bar's way to the Diagnostics dock: "⚠ N warnings", hidden when there are none."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAutoRaise(True)
        self.setToolTip("Show every open trace's warnings (View › Diagnostics)")
        self.set_count(0)

    def set_count(self, n: int) -> None:
        self.setText(f"⚠ {n} warning{'s' if n != 1 else ''}")
        self.setVisible(n > 0)
