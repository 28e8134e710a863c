"""A table of fusion candidates (from :func:`kviewer.analysis.fusion.fusion_candidates`).

Usage::

    panel = FusionPanel()
    panel.set_candidates(fusion_candidates(trace))
    panel.candidateSelected.connect(lambda ids: ...)  # every kernel id of the chosen candidate

The table is the app's one table model over the candidates frame with the columns of
:data:`kviewer.session.tables.FUSION_COLUMNS`: sorted by saving, largest first, unknown savings
("—") last; rows numbered 1 to n as shown; the saving is the first column so it is on screen at
the dock's default width.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QVBoxLayout, QWidget

from kviewer.session.format import UNKNOWN, format_duration
from kviewer.session.tables import fusion_table
from kviewer.ui.table_model import TableModel, TableView

#: the column the candidates are sorted by when shown
SORT_KEY = "savings_ns"
#: widths of the wide text columns (the others fit their contents)
_WIDTHS = {"chain": 260, "kind": 110, "remedy": 200}


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
        self.model = TableModel(self)
        self.view = TableView(self.model, parent=self)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.view.horizontalHeader().setStretchLastSection(True)
        self._ids: list[list[int]] = []
        self.total = QLabel(self)
        self.total.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.view)
        layout.addWidget(self.total)
        self.view.selectionModel().selectionChanged.connect(self._selection_changed)

    def set_candidates(self, df: pd.DataFrame, kernel_ns: float | None = None) -> None:
        """Show these candidates; ``kernel_ns`` (total kernel time) adds the share to the total line."""
        df = df.reset_index(drop=True)
        ids = df["kernel_ids"].tolist() if "kernel_ids" in df.columns else [[] for _ in range(len(df))]
        self._ids = [[int(k) for inst in row for k in inst] for row in ids]
        self.model.set_table(fusion_table(df), df)
        c = self.model.column_index(SORT_KEY)
        self.view.sortByColumn(c, Qt.SortOrder.DescendingOrder)
        self._fit_columns()
        savings = df["savings_ns"].to_numpy(np.float64) if len(df) else np.zeros(0)
        known = ~np.isnan(savings)
        if not known.any():
            text = f"{len(df)} candidates, estimated saving {UNKNOWN} (no candidate with known sizes)"
        else:
            saving = float(savings[known].sum())
            text = f"{len(df)} candidates, estimated saving {format_duration(saving)}"
            if kernel_ns:
                text += f" ({saving / kernel_ns * 100:.1f}% of kernel time)"
            if (~known).any():
                text += f"; {int((~known).sum())} without an estimate"
        self.total.setText(text)

    def _fit_columns(self) -> None:
        hh = self.view.horizontalHeader()
        for c, col in enumerate(self.model.columns):
            if col.key in _WIDTHS:
                hh.resizeSection(c, _WIDTHS[col.key])
            else:
                self.view.resizeColumnToContents(c)

    def kernel_ids(self, row: int) -> list[int]:
        """Every kernel id of the candidate in row ``row`` of the frame."""
        return list(self._ids[row]) if 0 <= row < len(self._ids) else []

    def select_row(self, row: int) -> None:
        """Select the candidate at this (displayed) row."""
        self.view.selectRow(row)

    def _selection_changed(self, *_: Any) -> None:
        rows = self.view.selectionModel().selectedRows()
        if not rows:
            self.candidateSelected.emit([])
            return
        self.candidateSelected.emit(self.kernel_ids(self.model.source_row(rows[0].row())))
