"""The kernel table: a QAbstractTableModel over numpy columns, and its widget.

Sorting and filtering are numpy index arrays (``order``) into the columns of
:class:`~kviewer.session.table_data.TableData`: no ``lessThan`` in Python, no QSortFilterProxyModel,
so a million rows sort in a fraction of a second. The widget observes the shared
:class:`~kviewer.ui.viewstate.ViewState`: selecting a kernel row selects and reveals it on the
timeline; selecting a group highlights all its instances there; a selection made elsewhere
selects the matching row here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import (
    QAbstractTableModel,
    QItemSelectionModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from kviewer.session.filterexpr import FilterError, apply_filter
from kviewer.session.table_data import (
    ALIASES,
    TableData,
    grouped_data,
    instance_data,
    sort_order,
)
from kviewer.ui.viewstate import Selection, ViewState

INSTANCES = "instances"
GROUPS = "groups"

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)

Index = QModelIndex | QPersistentModelIndex


class KernelTableModel(QAbstractTableModel):
    """Rows are ``order[i]`` positions into :class:`TableData` columns."""

    filterError = Signal(str)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.data_: TableData = TableData([], np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.mode = INSTANCES
        self.order = np.zeros(0, dtype=np.int64)
        self.filter_text = ""
        self.filter_mask: np.ndarray | None = None
        self.sort_column = -1
        self.sort_desc = False
        self._traces: list[Any] = []

    # content ---------------------------------------------------------------------------------
    def set_traces(self, traces: list[Any], mode: str | None = None) -> None:
        self._traces = list(traces)
        if mode is not None:
            self.mode = mode
        self.beginResetModel()
        self.data_ = instance_data(self._traces) if self.mode == INSTANCES else grouped_data(self._traces)
        if self.sort_column >= len(self.data_.columns):
            self.sort_column = -1
        self._refilter()
        self.endResetModel()

    def set_mode(self, mode: str) -> None:
        if mode != self.mode:
            self.sort_column = -1
            self.set_traces(self._traces, mode)

    def set_filter(self, text: str) -> bool:
        """Apply a filter; on a parse error keep the previous rows and emit ``filterError``."""
        try:
            mask = apply_filter(text, self.data_.filter_columns(), len(self.data_), ALIASES)
        except FilterError as exc:
            self.filterError.emit(str(exc))
            return False
        self.beginResetModel()
        self.filter_text = text
        self.filter_mask = mask
        self._apply_order()
        self.endResetModel()
        self.filterError.emit("")
        return True

    def _refilter(self) -> None:
        try:
            self.filter_mask = apply_filter(self.filter_text, self.data_.filter_columns(), len(self.data_), ALIASES)
        except FilterError as exc:
            self.filter_mask = None
            self.filterError.emit(str(exc))
        self._apply_order()

    def _apply_order(self) -> None:
        n = len(self.data_)
        rows = np.arange(n, dtype=np.int64) if self.filter_mask is None else np.flatnonzero(self.filter_mask)
        if 0 <= self.sort_column < len(self.data_.columns):
            rows = sort_order(rows, self.data_.columns[self.sort_column].key_for_sort(), self.sort_desc)
        self.order = rows

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
        if role == Qt.ItemDataRole.ToolTipRole:
            if col.tooltip is not None:
                return col.tooltip(i)
            return col.text(i) if col.kind == "text" else None
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _LEFT if col.kind == "text" else _RIGHT
        if role == Qt.ItemDataRole.UserRole:
            v = col.values[i]
            return v.item() if hasattr(v, "item") else v
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            if 0 <= section < len(self.data_.columns):
                return self.data_.columns[section].header
            return None
        return str(section + 1)

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if not (0 <= column < len(self.data_.columns)):
            return
        self.layoutAboutToBeChanged.emit()
        old = self.order
        persistent = self.persistentIndexList()
        sources = [int(old[p.row()]) if 0 <= p.row() < len(old) else -1 for p in persistent]
        self.sort_column = column
        self.sort_desc = order == Qt.SortOrder.DescendingOrder
        self._apply_order()
        if persistent:
            where = np.full(len(self.data_), -1, dtype=np.int64)
            where[self.order] = np.arange(self.order.shape[0])
            new = [self.index(int(where[s]), p.column()) if s >= 0 and where[s] >= 0 else QModelIndex() for p, s in zip(persistent, sources)]
            self.changePersistentIndexList(persistent, new)
        self.layoutChanged.emit()

    # lookups ---------------------------------------------------------------------------------
    def selection_for_row(self, row: int) -> tuple[int, int, np.ndarray | None]:
        """(trace key, kernel id or -1, member ids for a group row or None)."""
        i = int(self.order[row])
        key = int(self.data_.trace_key[i])
        if self.mode == INSTANCES:
            return key, int(self.data_.kernel_row[i]), None
        return key, -1, self.data_.groups[i]

    def row_of_kernel(self, trace_key: int, kernel: int) -> int:
        """View row showing that kernel (instances mode), or -1."""
        if self.mode != INSTANCES:
            return -1
        hits = np.flatnonzero((self.data_.kernel_row[self.order] == kernel) & (self.data_.trace_key[self.order] == trace_key))
        return int(hits[0]) if len(hits) else -1

    def row_tsv(self, rows: list[int]) -> str:
        """Rows as tab-separated text with a header line (full names, not the short ones)."""
        cols = self.data_.columns
        lines = ["\t".join(c.header for c in cols)]
        for r in rows:
            i = int(self.order[r])
            lines.append("\t".join(c.text(i).replace("\t", " ") for c in cols))
        return "\n".join(lines) + "\n"

    def instance_mask(self, trace_key: int) -> np.ndarray | None:
        """For the timeline: which kernels of one trace pass the filter (None when unfiltered)."""
        if self.filter_mask is None or self.mode != INSTANCES:
            return None
        tr = next((t for t in self._traces if t.key == trace_key), None)
        if tr is None:
            return None
        sel = self.data_.trace_key == trace_key
        out = np.zeros(len(tr.trace.kernels), dtype=bool)
        out[self.data_.kernel_row[sel & self.filter_mask]] = True
        return out


class KernelTableView(QTableView):
    """QTableView with Ctrl+C as TSV and Esc to clear the selection."""

    escapePressed = Signal()

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
        model = self.model()
        rows = sorted({i.row() for i in self.selectionModel().selectedRows()})
        if not rows or not isinstance(model, KernelTableModel):
            return ""
        text = model.row_tsv(rows)
        QGuiApplication.clipboard().setText(text)
        return text


class KernelTable(QWidget):
    """Mode switch, filter box and the table."""

    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.model = KernelTableModel(self)
        self.view = KernelTableView(self)
        self.view.setModel(self.model)
        self.view.setSortingEnabled(True)
        self.view.horizontalHeader().setSortIndicatorShown(True)
        self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setAlternatingRowColors(True)
        self.view.setWordWrap(False)
        self.view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        vh = self.view.verticalHeader()
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vh.setDefaultSectionSize(20)
        vh.hide()
        hh = self.view.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)

        self.mode_box = QComboBox()
        self.mode_box.addItem("Kernels", INSTANCES)
        self.mode_box.addItem("Grouped by name", GROUPS)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter: name, /regex/, dur > 10us, grid_x >= 128, regs < 64 …")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.setToolTip(_FILTER_HELP)
        self.count_label = QLabel()
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #b00020;")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 4, 4, 2)
        bar.addWidget(self.mode_box)
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.error_label)
        bar.addWidget(self.count_label)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addLayout(bar)
        lay.addWidget(self.view)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(200)
        self._timer.timeout.connect(self.apply_filter)
        self._mirroring = False

        self.filter_edit.textChanged.connect(lambda _t: self._timer.start())
        self.filter_edit.returnPressed.connect(self.apply_filter)
        self.mode_box.currentIndexChanged.connect(self._on_mode)
        self.model.filterError.connect(self._on_filter_error)
        self.model.modelReset.connect(self._update_count)
        self.view.selectionModel().currentRowChanged.connect(self._on_current_row)
        self.view.escapePressed.connect(lambda: state.set_selection(None))
        state.tracesChanged.connect(self._on_traces)
        state.selectionChanged.connect(self._on_state_selection)

    # state -> table ----------------------------------------------------------------------------
    def _on_traces(self) -> None:
        self.model.set_traces(self.state.traces)
        self._resize_columns()
        self._push_highlight()

    def _resize_columns(self) -> None:
        hh = self.view.horizontalHeader()
        for c, col in enumerate(self.model.data_.columns):
            width = 320 if col.key == "short_name" else 140 if col.key in ("trace", "launch_latency") else 92
            hh.resizeSection(c, width)

    def _on_state_selection(self, sel: Selection | None) -> None:
        if self._mirroring:
            return
        sm = self.view.selectionModel()
        self._mirroring = True
        try:
            if sel is None:
                sm.clearSelection()
                return
            if sel.table != "kernels" or self.model.mode != INSTANCES:
                return
            row = self.model.row_of_kernel(sel.trace, sel.row)
            if row < 0:
                return
            idx = self.model.index(row, 0)
            sm.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
            self.view.scrollTo(idx, QAbstractItemView.ScrollHint.EnsureVisible)
        finally:
            self._mirroring = False

    # table -> state ----------------------------------------------------------------------------
    def _on_current_row(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if self._mirroring or not current.isValid():
            return
        key, kernel, members = self.model.selection_for_row(current.row())
        self._mirroring = True
        try:
            if members is None:
                self.state.set_selection(Selection(key, "kernels", kernel), reveal=True)
            else:
                tr = self.state.trace(key)
                if tr is None:
                    return
                mask = np.zeros(len(tr.trace.kernels), dtype=bool)
                mask[members] = True
                self.state.set_highlight({key: mask})
                # select the longest instance so the details panel and F have something to show
                durs = tr.trace.kernels["dur"].to_numpy()[members]
                self.state.set_selection(Selection(key, "kernels", int(members[int(np.argmax(durs))])), reveal=True)
        finally:
            self._mirroring = False

    def select_row(self, row: int) -> None:
        """Select a view row as a click would (tests, keyboard)."""
        idx = self.model.index(row, 0)
        self.view.selectionModel().setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)

    def _on_mode(self, _i: int) -> None:
        self.model.set_mode(self.mode_box.currentData())
        self.view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self._resize_columns()
        self.state.set_highlight({})
        self._push_highlight()

    def apply_filter(self) -> None:
        self._timer.stop()
        text = self.filter_edit.text().strip()
        if self.model.set_filter(text):
            self.state.set_filter(text)
            self._push_highlight()

    def _push_highlight(self) -> None:
        """A filtered instance table dims the other kernels on the timeline."""
        if self.model.mode != INSTANCES:
            return
        hl = {}
        for t in self.state.traces:
            m = self.model.instance_mask(t.key)
            if m is not None:
                hl[t.key] = m
        if hl or self.state.highlight:
            self.state.set_highlight(hl)

    def _on_filter_error(self, message: str) -> None:
        self.error_label.setText(message)
        self.error_label.setVisible(bool(message))

    def _update_count(self) -> None:
        total = len(self.model.data_)
        shown = self.model.rowCount()
        what = "kernels" if self.model.mode == INSTANCES else "names"
        self.count_label.setText(f"{shown:,} of {total:,} {what}" if shown != total else f"{total:,} {what}")


_FILTER_HELP = """<b>Filter</b><br>
<code>gemm</code> name contains; <code>"two words"</code>; <code>-elementwise</code> excludes<br>
<code>/^triton_.*fused/</code> or <code>re:PATTERN</code> regular expression on the name<br>
<code>dur &gt; 10us</code>, <code>start &lt; 2ms</code> (ns us ms s)<br>
<code>grid_x &gt;= 128</code>, <code>grid &gt; 1k</code>, <code>regs &lt; 64</code>, <code>stream = 7</code><br>
<code>dram_bytes &gt; 1GB</code>, <code>sm_throughput_pct &gt; 50</code> (when measured)<br>
grouped: <code>count &gt; 10</code>, <code>total &gt; 1ms</code>, <code>pct &gt; 5</code><br>
combine with <code>and</code> (or a space, a comma) and <code>or</code>"""
