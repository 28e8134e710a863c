"""The one table model of the app: a QAbstractTableModel over the columns of a
:class:`~kviewer.session.table_data.TableData`, and the table view that goes with it.

Every table (kernels, compare diff/totals/steps, fusion candidates, fleet ranks, query results,
range summaries) is a list of :class:`~kviewer.session.table_data.Col` descriptors drawn by this
model. Rows are ``order[i]`` positions into the columns: sorting is one numpy ``argsort`` of the
column's key (:func:`~kviewer.session.table_data.sort_order`: unknown last in both directions),
filtering a boolean mask; no ``lessThan`` in Python and no QSortFilterProxyModel, so a million
rows sort in a fraction of a second.

Usage::

    model = TableModel()
    model.set_frame(df, [Col("name", "kernel", "text"), Col("total_ns", "total", "time")])
    view = TableView(model)

Roles: ``DisplayRole`` the formatted text, ``UserRole`` the raw value (text as the string),
``ToolTipRole``, ``TextAlignmentRole``, ``ForegroundRole`` and ``FontRole`` from the column.
The vertical header numbers the rows as shown, 1 to n.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QColor, QFont, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QTableView, QWidget

from kviewer.session.table_data import Col, TableData, frame_table, sort_order

Index = QModelIndex | QPersistentModelIndex

_ALIGN = {
    "left": int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
    "right": int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
}


def _empty() -> TableData:
    return TableData([], np.zeros(0, np.int64), np.zeros(0, np.int64))


class TableModel(QAbstractTableModel):
    """A read-only, sortable, filterable table over :class:`Col` columns.

    ``order`` holds the table's row positions shown, in display order; ``mask`` (or None) which
    rows pass the filter; ``frame`` the DataFrame the columns came from, when they did.
    """

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.data_: TableData = _empty()
        self.frame: Any = None
        self.order = np.zeros(0, dtype=np.int64)
        self.mask: np.ndarray | None = None
        self.sort_column = -1
        self.sort_desc = False
        self._brushes: dict[str, QColor] = {}

    # content ---------------------------------------------------------------------------------
    @property
    def columns(self) -> list[Col]:
        return self.data_.columns

    def set_table(self, data: TableData, frame: Any = None, mask: np.ndarray | None = None) -> None:
        """Show ``data`` (its rows filtered by ``mask``); the sort column stays when it still exists."""
        self.beginResetModel()
        old = self.data_.columns[self.sort_column].key if 0 <= self.sort_column < len(self.data_.columns) else None
        self.data_ = data
        self.frame = frame
        self.mask = mask
        keys = [c.key for c in data.columns]
        self.sort_column = keys.index(old) if old in keys else -1
        self._apply_order()
        self.endResetModel()

    def set_frame(self, frame: Any, columns: Sequence[Col]) -> None:
        """Show the columns of a DataFrame (``columns`` are templates, see :func:`frame_table`)."""
        frame = frame.reset_index(drop=True)
        self.set_table(frame_table(frame, columns), frame)

    def set_mask(self, mask: np.ndarray | None) -> None:
        self.beginResetModel()
        self.mask = mask
        self._apply_order()
        self.endResetModel()

    def _apply_order(self) -> None:
        n = len(self.data_)
        rows = np.arange(n, dtype=np.int64) if self.mask is None else np.flatnonzero(self.mask)
        if 0 <= self.sort_column < len(self.data_.columns):
            rows = sort_order(rows, self.data_.columns[self.sort_column], self.sort_desc)
        self.order = rows

    def column_index(self, key: str) -> int:
        """The position of the column ``key`` (-1 when the table has none)."""
        for i, c in enumerate(self.data_.columns):
            if c.key == key:
                return i
        return -1

    def sort_by(self, key: str, descending: bool = False) -> None:
        """Sort by the column named ``key`` (never by its position, which depends on the columns shown)."""
        c = self.column_index(key)
        if c >= 0:
            self.sort(c, Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder)

    def source_row(self, view_row: int) -> int:
        """The table row shown at ``view_row``."""
        return int(self.order[view_row])


    def view_row(self, source_row: int) -> int:
        """The view row showing a table row, -1 when filtered out."""
        hits = np.flatnonzero(self.order == source_row)
        return int(hits[0]) if len(hits) else -1

    def row_tsv(self, rows: Sequence[int]) -> str:
        """View rows as tab-separated text with a header line, as shown."""
        cols = self.data_.columns
        lines = ["\t".join(c.header for c in cols)]
        for r in rows:
            i = int(self.order[r])
            lines.append("\t".join(c.text(i).replace("\t", " ") for c in cols))
        return "\n".join(lines) + "\n"

    # Qt model API ----------------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else int(self.order.shape[0])

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.data_.columns)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        if not (0 <= r < self.order.shape[0] and 0 <= c < len(self.data_.columns)):
            return None
        col = self.data_.columns[c]
        i = int(self.order[r])
        if role == Qt.ItemDataRole.DisplayRole:
            return col.text(i)
        if role == Qt.ItemDataRole.UserRole:
            return col.raw(i)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _ALIGN[col.alignment]
        if role == Qt.ItemDataRole.ToolTipRole:
            if col.tooltip is not None:
                return col.tooltip(i) or None
            if col.is_text:
                text = col.text(i)
                return text or None
            return None
        if role == Qt.ItemDataRole.ForegroundRole and col.foreground is not None:
            colour = col.foreground(i)
            if colour is None:
                return None
            brush = self._brushes.get(colour)
            if brush is None:
                brush = self._brushes[colour] = QColor(colour)
            return brush
        if role == Qt.ItemDataRole.FontRole and col.italic is not None and col.italic(i):
            font = QFont()
            font.setItalic(True)
            return font
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal:
            if not 0 <= section < len(self.data_.columns):
                return None
            col = self.data_.columns[section]
            if role == Qt.ItemDataRole.DisplayRole:
                return col.header
            if role == Qt.ItemDataRole.ToolTipRole:
                return col.header_tip or None
            if role == Qt.ItemDataRole.TextAlignmentRole:
                return _ALIGN[col.alignment]
            return None
        if role == Qt.ItemDataRole.DisplayRole and 0 <= section < self.order.shape[0]:
            return str(section + 1)  # rows numbered as shown, whatever the sort
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not (-1 <= column < len(self.data_.columns)):
            return
        self.layoutAboutToBeChanged.emit()
        old = self.order
        persistent = self.persistentIndexList()
        sources = [int(old[p.row()]) if 0 <= p.row() < len(old) else -1 for p in persistent]
        self.sort_column = column
        self.sort_desc = order == Qt.SortOrder.DescendingOrder
        self._apply_order()
        if persistent:
            # keep persistent indexes (the selection) on their rows
            where = np.full(len(self.data_), -1, dtype=np.int64)
            where[self.order] = np.arange(self.order.shape[0])
            new = [self.index(int(where[s]), p.column()) if s >= 0 and where[s] >= 0 else QModelIndex() for p, s in zip(persistent, sources)]
            self.changePersistentIndexList(persistent, new)
        self.layoutChanged.emit()


class TableView(QTableView):
    """The view of a :class:`TableModel`: rows selected whole, Ctrl+C copies them as TSV, Esc
    emits ``escapePressed``; sortable by a click on a header unless ``sortable`` is False."""

    escapePressed = Signal()

    def __init__(self, model: TableModel | None = None, sortable: bool = True, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        if model is not None:
            self.setModel(model)
        # start in the model's own order: enabling sorting sorts by the current indicator at once
        self.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.setSortingEnabled(sortable)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.horizontalHeader().setHighlightSections(False)

    def keyPressEvent(self, ev: Any) -> None:
        if ev.matches(QKeySequence.StandardKey.Copy):
            self.copy_selection()
            ev.accept()
            return
        if ev.key() == Qt.Key.Key_Escape:
            self.escapePressed.emit()
            ev.accept()
            return
        super().keyPressEvent(ev)

    def copy_selection(self) -> str:
        """The selected rows as TSV on the clipboard (and returned)."""
        model = self.model()
        sm = self.selectionModel()
        rows = sorted({i.row() for i in sm.selectedRows()}) if sm is not None else []
        if not rows or not isinstance(model, TableModel):
            return ""
        text = model.row_tsv(rows)
        QGuiApplication.clipboard().setText(text)
        return text


__all__ = ["TableModel", "TableView"]
