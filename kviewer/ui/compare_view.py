"""The compare view: totals, steps and the diff table of two reports.

A standalone widget over a :class:`~kviewer.analysis.compare.CompareResult`; the main window
places it (a dock or a tab) and draws the two timelines stacked, shifted by
:attr:`CompareView.align_offset_ns`. The view says which kernels a row holds through its
signals, so the window can highlight them on both timelines.

The tables are the app's one table model (:mod:`kviewer.ui.table_model`) over the result's frames,
with the columns of :mod:`kviewer.session.tables`: sorting is a numpy ``argsort`` of the column
(unknown values last either way), filtering a boolean mask, as in the kernel table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QSplitter,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kviewer.analysis.compare import STATUSES, CompareResult, compare
from kviewer.core import Trace
from kviewer.session import tables
from kviewer.session.format import format_signed_duration, format_signed_pct
from kviewer.session.tables import FUSION_VIEW_COLUMNS, GROUP_VIEW_COLUMNS, OP_VIEW_COLUMNS, STEP_VIEW_COLUMNS
from kviewer.ui.table_model import TableModel, TableView

#: how a delta reads: slower (B takes longer) red, faster green, within noise grey
SLOWER = QColor(tables.SLOWER)
FASTER = QColor(tables.FASTER)
NEUTRAL = QColor(tables.NEUTRAL)

GROUPS = "groups"
OPS = "ops"


@dataclass(frozen=True)
class CompareSelection:
    """A row the user picked: which table, which row of the result, and its kernels.

    ``kernels_a`` / ``kernels_b`` are row positions in ``trace_a.kernels`` / ``trace_b.kernels``
    (equal to the kernels' ``id``).
    """

    table: str
    row: int
    name: str
    status: str
    kernels_a: np.ndarray
    kernels_b: np.ndarray


class CompareView(QWidget):
    """Totals, steps and the kernel-group (or per-op) diff of two reports.

    Parameters
    ----------
    trace_a, trace_b
        The reference report and the report compared with it.
    result
        Their comparison; computed here (``compare(trace_a, trace_b)``) when None, which takes
        well under a second for traces of tens of thousands of kernels.
    parent
        Qt parent.

    Signals
    -------
    rowSelected(CompareSelection)
        The current row changed (keyboard or mouse).
    rowActivated(CompareSelection)
        A row was double-clicked or Enter was pressed on it: reveal its kernels.
    """

    rowSelected = Signal(object)
    rowActivated = Signal(object)

    def __init__(self, trace_a: Trace, trace_b: Trace, result: CompareResult | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("compareView")
        self.trace_a = trace_a
        self.trace_b = trace_b
        self.result: CompareResult = result if result is not None else compare(trace_a, trace_b)
        self.table_kind = GROUPS

        self.headline = QLabel()
        self.headline.setObjectName("compareHeadline")
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.headline.setWordWrap(True)
        self.headline.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

        self.totals_model = TableModel(self)
        self.totals_view = _table(self.totals_model, sortable=False)
        self.totals_view.setObjectName("compareTotals")
        self.totals_view.horizontalHeader().setStretchLastSection(False)

        self.diff_model = TableModel(self)
        self.diff_view = _table(self.diff_model, sortable=True)
        self.diff_view.setObjectName("compareDiff")
        self.diff_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.steps_model = TableModel(self)
        self.steps_view = _table(self.steps_model, sortable=True)
        self.fusion_model = TableModel(self)
        self.fusion_view = _table(self.fusion_model, sortable=True)

        self.table_choice = QComboBox()
        self.table_choice.addItem("Kernel groups", GROUPS)
        self.table_choice.addItem("Per op", OPS)
        self.table_choice.setToolTip("rows per matched kernel group, or per framework op that launched the kernels (PyTorch traces)")
        self.status_choice = QComboBox()
        self.status_choice.addItem("All statuses", "")
        for status in STATUSES:
            self.status_choice.addItem(status, status)
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by name")
        self.filter_edit.setClearButtonEnabled(True)
        self.count_label = QLabel()

        bar = QHBoxLayout()
        bar.addWidget(self.table_choice)
        bar.addWidget(self.status_choice)
        bar.addWidget(self.filter_edit, 1)
        bar.addWidget(self.count_label)
        diff_page = QWidget()
        diff_layout = QVBoxLayout(diff_page)
        diff_layout.setContentsMargins(0, 0, 0, 0)
        diff_layout.addLayout(bar)
        diff_layout.addWidget(self.diff_view)

        self.tabs = QTabWidget()
        self.tabs.addTab(diff_page, "Diff")
        self.tabs.addTab(self.steps_view, "Steps")
        self.tabs.addTab(self.fusion_view, "Fused kernels")

        # the totals beside the tables, not above them: above, they took the height of the dock
        # and left the diff two rows
        split = QSplitter(Qt.Orientation.Horizontal)
        split.setObjectName("compareSplit")
        split.addWidget(self.totals_view)
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setCollapsible(1, False)
        self.split = split
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.headline)
        layout.addWidget(split, 1)

        self.table_choice.currentIndexChanged.connect(self._on_table_choice)
        self.status_choice.currentIndexChanged.connect(lambda _i: self._refilter())
        self.filter_edit.textChanged.connect(lambda _t: self._refilter())
        self.diff_view.selectionModel().currentRowChanged.connect(self._on_current)
        self.diff_view.activated.connect(self._on_activated)
        self._fill()

    # public ----------------------------------------------------------------------------------
    @property
    def align_offset_ns(self) -> int:
        """``time_in_A = time_in_B + align_offset_ns``: B's first step (or kernel) on A's."""
        return int(self.result.align_offset_ns)

    def set_result(self, trace_a: Trace, trace_b: Trace, result: CompareResult | None = None) -> None:
        """Show another comparison."""
        self.trace_a, self.trace_b = trace_a, trace_b
        self.result = result if result is not None else compare(trace_a, trace_b)
        self._fill()

    def set_table(self, kind: str) -> None:
        """Show kernel groups (``"groups"``) or per-op rows (``"ops"``, PyTorch traces only)."""
        i = self.table_choice.findData(kind)
        if i < 0 or not self.table_choice.model().item(i).isEnabled():  # type: ignore[attr-defined]
            raise ValueError(f"no {kind!r} table for this comparison")
        self.table_choice.setCurrentIndex(i)

    def set_status_filter(self, status: str) -> None:
        """Show only rows with this status ("" for all)."""
        self.status_choice.setCurrentIndex(max(0, self.status_choice.findData(status)))

    def selection_for(self, frame_row: int) -> CompareSelection:
        """The selection describing a row of the current table (a position in the result)."""
        frame = self.diff_model.frame
        ka, kb = self.result.kernels_of_row(frame_row, "ops" if self.table_kind == OPS else "groups")
        name = str(frame["op" if self.table_kind == OPS else "name"].iat[frame_row])
        return CompareSelection(self.table_kind, frame_row, name, str(frame["status"].iat[frame_row]), ka, kb)

    def select_row(self, frame_row: int) -> None:
        """Make a row of the result current (shows it, emits ``rowSelected``)."""
        view_row = self.diff_model.view_row(frame_row)
        if view_row < 0:
            self.set_status_filter("")
            self.filter_edit.clear()
            view_row = self.diff_model.view_row(frame_row)
        if view_row >= 0:
            self.diff_view.setCurrentIndex(self.diff_model.index(view_row, 0))
            self.diff_view.scrollTo(self.diff_model.index(view_row, 0))

    # internals -------------------------------------------------------------------------------
    def _fill(self) -> None:
        r = self.result
        has_ops = r.ops is not None
        item = self.table_choice.model().item(1)  # type: ignore[attr-defined]
        item.setEnabled(has_ops)
        if not has_ops and self.table_kind == OPS:
            self.table_kind = GROUPS
            self.table_choice.setCurrentIndex(0)
        self.totals_model.set_table(tables.totals_table(r.totals), r.totals)
        self.steps_model.set_table(tables.compare_table(r.steps, STEP_VIEW_COLUMNS), r.steps)
        self.fusion_model.set_table(tables.compare_table(r.fusion, FUSION_VIEW_COLUMNS), r.fusion)
        self.tabs.setTabEnabled(1, len(r.steps) > 0)
        self.tabs.setTabEnabled(2, len(r.fusion) > 0)
        self._show_table()
        pct = r.slower_pct
        if math.isfinite(pct):
            verdict = "slower" if pct > 0 else "faster" if pct < 0 else "the same"
            amount = f"{abs(pct):.1f}% {verdict}" if pct else verdict
        else:
            amount = "all new kernel time"
        if r.headline_basis == "median step":
            # per step: files of 3 and 10 steps compare; the per-file total beside
            tp = r.total_slower_pct
            total = format_signed_pct(tp) if math.isfinite(tp) else "all new"
            said = (f"B's median step is {amount}; total kernel time {total} "
                    f"({format_signed_duration(float(r.delta_ns))}, {len(r.steps_a)} vs {len(r.steps_b)} steps)")
        else:
            said = f"B's kernel time is {amount} ({format_signed_duration(float(r.delta_ns))})"
        warn = "".join(
            f"<br><span style='color:#b35c00'>⚠ {side}: {_escape(d.message)}</span>"
            for side, t in (("A", self.trace_a), ("B", self.trace_b)) for d in t.meta.warnings if d.severity != "info"
        )
        # what the comparison itself says about how to read it (step counts, ranks): as the CLI prints
        notes = "".join(f"<br><span style='color:#555'>ℹ {_escape(n)}</span>" for n in r.notes)
        self.headline.setText(
            f"<b>A</b> {_escape(r.label_a)} &nbsp;vs&nbsp; <b>B</b> {_escape(r.label_b)}: "
            f"{said}; timelines aligned at the {r.align_basis}" + notes + warn
        )
        self.totals_view.resizeColumnsToContents()
        self.steps_view.resizeColumnsToContents()
        self.fusion_view.resizeColumnsToContents()
        # the totals as wide as their columns (a scroll bar's width spare); the tables get the rest
        tv = self.totals_view
        width = tv.horizontalHeader().length() + 2 * tv.frameWidth() + tv.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent) + 2
        tv.setMaximumWidth(width)
        self.split.setSizes([width, max(width, self.split.width() - width)])

    def _show_table(self) -> None:
        r = self.result
        if self.table_kind == OPS and r.ops is not None:
            self.diff_model.sort_column = -1
            self.diff_model.set_table(tables.compare_table(r.ops, OP_VIEW_COLUMNS), r.ops.reset_index(drop=True))
        else:
            self.diff_model.sort_column = -1
            self.diff_model.set_table(tables.compare_table(r.groups, GROUP_VIEW_COLUMNS), r.groups.reset_index(drop=True))
        self.diff_view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.DescendingOrder)
        self._refilter()
        header = self.diff_view.horizontalHeader()
        header.resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(0, min(max(header.sectionSize(0), 200), 360))

    def _refilter(self) -> None:
        frame = self.diff_model.frame
        mask = np.ones(len(frame), dtype=bool)
        status = self.status_choice.currentData()
        if status:
            mask &= (frame["status"] == status).to_numpy()
        needle = self.filter_edit.text().strip().lower()
        if needle:
            cols = [c for c in ("name", "op", "name_a", "name_b") if c in frame.columns]
            hit = np.zeros(len(frame), dtype=bool)
            for c in cols:
                hit |= frame[c].astype(str).str.lower().str.contains(needle, regex=False).to_numpy()
            mask &= hit
        self.diff_model.set_mask(mask)
        self.count_label.setText(f"{int(mask.sum())} of {len(frame)} rows")

    def _on_table_choice(self, i: int) -> None:
        kind = self.table_choice.itemData(i)
        if kind == self.table_kind:
            return
        self.table_kind = kind
        self._show_table()

    def _on_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.rowSelected.emit(self.selection_for(self.diff_model.source_row(current.row())))

    def _on_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.rowActivated.emit(self.selection_for(self.diff_model.source_row(index.row())))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _table(model: TableModel, sortable: bool) -> TableView:
    view = TableView(model, sortable=sortable)
    # start unsorted, in the result's own order (largest |delta| first)
    view.verticalHeader().setVisible(False)
    view.horizontalHeader().setStretchLastSection(True)
    return view


__all__ = ["FASTER", "NEUTRAL", "SLOWER", "CompareSelection", "CompareView"]
