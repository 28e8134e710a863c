"""A table of fusion candidates (from :func:`kviewer.analysis.fusion.fusion_candidates`).

Usage::

    panel = FusionPanel()
    panel.set_candidates(fusion_candidates(trace))
    panel.candidateSelected.connect(lambda ids: ...)  # every kernel id of the chosen candidate

The model is a thin adapter over the candidates frame; sorting is done on its numpy columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from kviewer.session.format import UNKNOWN

Index = QModelIndex | QPersistentModelIndex

#: (column of the frame, header, how to show it)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("rank", "#", "int"),
    ("kind", "kind", "text"),
    ("chain", "chain", "text"),
    ("count", "count", "int"),
    ("savings_ns", "saving (µs)", "us"),
    ("gpu_time_pct", "% GPU time", "pct"),
    ("savings_per_instance_ns", "per instance (µs)", "us"),
    ("measured_ns", "measured (µs)", "us"),
    ("fused_est_ns", "fused est. (µs)", "us"),
    ("remedy", "remedy", "text"),
    ("confidence", "confidence", "text"),
)


class FusionModel(QAbstractTableModel):
    """Rows of a fusion-candidates frame; ``Qt.UserRole`` gives the sortable raw value."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._df = pd.DataFrame({c: [] for c, _, _ in COLUMNS})
        self._ids: list[list[int]] = []

    def set_frame(self, df: pd.DataFrame) -> None:
        self.beginResetModel()
        self._df = df.reset_index(drop=True)
        ids = df["kernel_ids"].tolist() if "kernel_ids" in df.columns else [[] for _ in range(len(df))]
        self._ids = [[int(k) for inst in row for k in inst] for row in ids]
        self.endResetModel()

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._df)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            return COLUMNS[section][1]
        return None

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self._df)) or not (0 <= index.column() < len(COLUMNS)):
            return None
        col, _, how = COLUMNS[index.column()]
        value = self._df[col].iat[index.row()] if col in self._df.columns else None
        if role == Qt.ItemDataRole.UserRole:
            if isinstance(value, (np.floating, float)) and np.isnan(value):
                return -1.0
            return value.item() if hasattr(value, "item") else value
        if role == Qt.ItemDataRole.DisplayRole:
            if value is None:
                return ""
            if how == "int":
                return f"{int(value):,}"
            if how == "us":
                return UNKNOWN if np.isnan(value) else f"{float(value) / 1e3:,.1f}"
            if how == "pct":
                return UNKNOWN if np.isnan(value) else f"{float(value):.2f}"
            return str(value)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if how == "text":
                return int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and col == "chain":
            note = self._df["note"].iat[index.row()] if "note" in self._df.columns else ""
            return f"{value}\n\n{note}" if note else str(value)
        return None

    def kernel_ids(self, row: int) -> list[int]:
        return list(self._ids[row]) if 0 <= row < len(self._ids) else []


class FusionPanel(QWidget):
    """Fusion candidates as a sortable table with a total line.

    Signals
    -------
    candidateSelected(list)
        the kernel ids of every instance of the selected candidate (``[]`` when the selection is
        cleared).
    """

    candidateSelected = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = FusionModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.verticalHeader().setVisible(False)
        self.view.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.total = QLabel(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        layout.addWidget(self.total)
        self.view.selectionModel().selectionChanged.connect(self._selection_changed)

    def set_candidates(self, df: pd.DataFrame, kernel_ns: float | None = None) -> None:
        """Show these candidates; ``kernel_ns`` (total kernel time) adds the share to the total line."""
        self.model.set_frame(df)
        self.view.sortByColumn(4, Qt.SortOrder.DescendingOrder)
        savings = df["savings_ns"].to_numpy(np.float64) if len(df) else np.zeros(0)
        known = ~np.isnan(savings)
        if not known.any():
            text = f"{len(df)} candidates, estimated saving {UNKNOWN} (no candidate with known sizes)"
        else:
            saving = float(savings[known].sum())
            text = f"{len(df)} candidates, estimated saving {saving / 1e3:,.1f} µs"
            if kernel_ns:
                text += f" ({saving / kernel_ns * 100:.1f}% of kernel time)"
            if (~known).any():
                text += f"; {int((~known).sum())} without an estimate"
        self.total.setText(text)

    def select_row(self, row: int) -> None:
        """Select the candidate at this (displayed) row."""
        self.view.selectRow(row)

    def _selection_changed(self, *_: Any) -> None:
        rows = self.view.selectionModel().selectedRows()
        if not rows:
            self.candidateSelected.emit([])
            return
        source = self.proxy.mapToSource(rows[0])
        self.candidateSelected.emit(self.model.kernel_ids(source.row()))
