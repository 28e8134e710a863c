"""The per-rank table of a ``kviewer fleet`` output, in a window of its own.

``kviewer OUT`` (a fleet output folder, or its ``fleet.sqlite``) opens it beside the main window;
a double-click on a rank opens that rank's trace in the main window. Unknown values show "—".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtWidgets import QLabel, QTableView, QVBoxLayout, QWidget

#: (column of fleet_ranks, header, kind): kind ns, pct, int or text
COLUMNS = [
    ("run", "run", "text"), ("rank", "rank", "int"), ("steps", "steps", "int"), ("mean_step_ns", "mean step", "ns"),
    ("excess_pct", "over median", "pct"), ("reason_kind", "reason", "text"), ("reason", "kernel group / idle", "text"),
    ("reason_excess_ns", "excess", "ns"), ("kernel_ns", "kernel time", "ns"), ("comm_ns", "communication", "ns"),
    ("exposed_comm_ns", "exposed comm.", "ns"), ("idle_ns", "idle", "ns"), ("path", "file", "text"),
]
UNKNOWN = "—"
PATH_ROLE = Qt.ItemDataRole.UserRole + 1


def _known(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


class FleetRanksModel(QAbstractTableModel):
    def __init__(self, ranks: Any, parent: Any = None) -> None:
        super().__init__(parent)
        self._cols = [c for c in COLUMNS if c[0] in ranks.columns]
        self._data = [ranks[c].tolist() for c, _, _ in self._cols]
        self._paths = ranks["path"].tolist()
        self._n = len(ranks)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._n

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._cols)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal and 0 <= section < len(self._cols):
            return self._cols[section][1]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < self._n and 0 <= index.column() < len(self._cols)):
            return None
        v = self._data[index.column()][index.row()]
        kind = self._cols[index.column()][2]
        if role == Qt.ItemDataRole.DisplayRole:
            if not _known(v) or (kind == "text" and v == ""):
                return UNKNOWN if kind != "text" or v is None else ""
            if kind == "ns":
                from kviewer.core.units import format_duration

                return format_duration(float(v))
            if kind == "pct":
                return f"{float(v):+.1f}%"
            if kind == "int":
                return f"{int(v):,}"
            return str(v)
        if role == Qt.ItemDataRole.UserRole:  # sort key: the number itself, unknown last
            if kind == "text":
                return "" if v is None else str(v)
            return float(v) if _known(v) else float("-inf")
        if role == PATH_ROLE:
            return self._paths[index.row()]
        if role == Qt.ItemDataRole.TextAlignmentRole and kind != "text":
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class FleetWindow(QWidget):
    """The ranks of a fleet, slowest first; ``open_trace(path)`` on a double-click."""

    def __init__(self, db: Path, open_trace: Callable[[str], None], parent: Any = None) -> None:
        super().__init__(parent)
        from kviewer.fleet.read import read_ranks

        self.setObjectName("fleetWindow")
        self.setWindowTitle(f"kviewer fleet — {db.parent}")
        ranks = read_ranks(db)
        self.model = FleetRanksModel(ranks, self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # the file's order: slowest first
        self.view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.view.doubleClicked.connect(self._open)
        self._open_trace = open_trace
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"{len(ranks):,} ranks, slowest of each run first; double-click a rank to open its trace", self))
        layout.addWidget(self.view)
        self.resize(1100, 500)

    def _open(self, index: QModelIndex) -> None:
        path = self.proxy.data(index, PATH_ROLE)
        if path:
            self._open_trace(str(path))
