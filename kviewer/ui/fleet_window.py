"""The per-rank table of a ``kviewer fleet`` output, in a window of its own.

``kviewer OUT`` (a fleet output folder, or its ``fleet.sqlite``) opens it beside the main window;
a double-click on a rank opens that rank's trace in the main window. Unknown values show "—".
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from kviewer.fleet.read import read_ranks
from kviewer.session.tables import FLEET_COLUMNS
from kviewer.ui.table_model import TableModel, TableView


class FleetWindow(QWidget):
    """The ranks of a fleet, slowest first; ``open_trace(path)`` on a double-click."""

    def __init__(self, db: Path, open_trace: Callable[[str], None], parent: Any = None, ranks: Any = None) -> None:
        super().__init__(parent)

        self.setObjectName("fleetWindow")
        self.setWindowTitle(f"kviewer fleet — {db.parent}")
        if ranks is None:  # read here only for a caller already off the GUI thread (tests)
            ranks = read_ranks(db)
        self.ranks = ranks.reset_index(drop=True)
        self.model = TableModel(self)
        self.model.set_frame(self.ranks, FLEET_COLUMNS)
        self.view = TableView(self.model, parent=self)  # the file's order: slowest first
        self.view.doubleClicked.connect(self._open)
        self._open_trace = open_trace
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{len(ranks):,} ranks, slowest of each run first; double-click a rank to open its trace", self))
        layout.addWidget(self.view)
        self.resize(1100, 500)

    def _open(self, index: QModelIndex) -> None:
        if not index.isValid() or "path" not in self.ranks.columns:
            return
        path = self.ranks["path"].iat[self.model.source_row(index.row())]
        if isinstance(path, str) and path:
            self._open_trace(str(path))
