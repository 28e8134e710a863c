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
from PySide6.QtCore import QItemSelectionModel, QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from kviewer.session.filterexpr import FilterError, apply_filter
from kviewer.session.graph_table import graph_grouped_data
from kviewer.session.table_data import ALIASES, grouped_data, instance_data
from kviewer.ui.table_model import TableModel, TableView
from kviewer.ui.viewstate import FILTER, Selection, ViewState

INSTANCES = "instances"
GROUPS = "groups"
GRAPHS = "graphs"


class KernelTableModel(TableModel):
    """The kernel rows of the open traces (one per kernel, or one per name), filtered by the
    filter language; rows are ``order[i]`` positions into :class:`TableData` columns."""

    filterError = Signal(str)

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.mode = INSTANCES
        self.filter_text = ""
        self._traces: list[Any] = []

    @property
    def filter_mask(self) -> np.ndarray | None:
        return self.mask

    # content ---------------------------------------------------------------------------------
    def set_traces(self, traces: list[Any], mode: str | None = None) -> None:
        self._traces = list(traces)
        if mode is not None:
            self.mode = mode
        if self.mode == GRAPHS:
            data = graph_grouped_data(self._traces)
        else:
            data = instance_data(self._traces) if self.mode == INSTANCES else grouped_data(self._traces)
        try:
            mask = apply_filter(self.filter_text, data.filter_columns(), len(data), ALIASES)
        except FilterError as exc:
            mask = None
            self.filterError.emit(str(exc))
        self.set_table(data, mask=mask)

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
        self.filter_text = text
        self.set_mask(mask)
        self.filterError.emit("")
        return True

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

    def instance_mask(self, trace_key: int) -> np.ndarray | None:
        """For the timeline: which kernels of one trace pass the filter (None when unfiltered)."""
        if self.mask is None or self.mode != INSTANCES:
            return None
        tr = next((t for t in self._traces if t.key == trace_key), None)
        if tr is None:
            return None
        sel = self.data_.trace_key == trace_key
        out = np.zeros(len(tr.trace.kernels), dtype=bool)
        out[self.data_.kernel_row[sel & self.mask]] = True
        return out


#: the kernel table's view is the common one (Ctrl+C as TSV, Esc clears the selection)
KernelTableView = TableView


class KernelTable(QWidget):
    """Mode switch, filter box and the table."""

    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.model = KernelTableModel(self)
        self.view = TableView(self.model, parent=self)
        self.view.horizontalHeader().setSortIndicatorShown(True)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
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
        self.mode_box.addItem("Grouped by CUDA graph", GRAPHS)
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
        state.filterChanged.connect(self._on_state_filter)

    # state -> table ----------------------------------------------------------------------------
    def _on_traces(self) -> None:
        traces = self.state.traces
        if traces and all(t.trace.meta.summary_only for t in traces) and self.model.mode == INSTANCES:
            # a profiler's own summary (rocprof --stats) has no kernel instances: show it by name
            self.mode_box.setCurrentIndex(self.mode_box.findData(GROUPS))
        self.model.set_traces(self.state.traces)
        self._resize_columns()
        self._push_highlight()

    def _on_state_filter(self, text: str) -> None:
        """The view state's filter changed elsewhere (going back in the zoom/filter stack): the
        filter box and the rows follow."""
        if text == self.filter_edit.text().strip():
            return
        self._timer.stop()
        self.filter_edit.blockSignals(True)
        try:
            self.filter_edit.setText(text)
        finally:
            self.filter_edit.blockSignals(False)
        if self.model.set_filter(text):
            self._push_highlight()

    def _resize_columns(self) -> None:
        hh = self.view.horizontalHeader()
        fm = self.view.fontMetrics()
        for c, col in enumerate(self.model.data_.columns):
            width = 320 if col.key == "short_name" else 140 if col.key == "launch_latency" else 92
            if col.key == "trace":
                # wide enough for the whole label ("A · file" and "B · file" must read apart)
                width = min(360, max([140] + [fm.horizontalAdvance(str(t)) + 16 for t in col.categories or []]))
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
        self.state.clear_highlight()
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
        self.state.set_highlight(hl, FILTER)

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
