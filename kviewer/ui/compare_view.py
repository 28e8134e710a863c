"""The compare view: totals, steps and the diff table of two reports.

A standalone widget over a :class:`~kviewer.analysis.compare.CompareResult`; the main window
places it (a dock or a tab) and draws the two timelines stacked, shifted by
:attr:`CompareView.align_offset_ns`. The view says which kernels a row holds through its
signals, so the window can highlight them on both timelines.

The models are thin adapters over the result's columns: sorting is a numpy ``argsort`` of the
column (unknown values last), filtering a boolean mask, as in the kernel table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    Qt,
    Signal,
)
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSplitter,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from kviewer.analysis.compare import (
    CHANGED,
    ONLY_A,
    ONLY_B,
    REPLACED,
    REPLACEMENT,
    STATUSES,
    UNCHANGED,
    CompareResult,
    compare,
)
from kviewer.core import Trace
from kviewer.session.format import format_count, format_duration

Index = QModelIndex | QPersistentModelIndex

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_LEFT = int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)

#: how a delta reads: slower (B takes longer) red, faster green, within noise grey
SLOWER = QColor(192, 57, 43)
FASTER = QColor(30, 132, 73)
NEUTRAL = QColor(110, 118, 125)
STATUS_COLOURS = {
    CHANGED: QColor(40, 40, 40),
    UNCHANGED: NEUTRAL,
    ONLY_A: QColor(160, 90, 0),
    ONLY_B: QColor(0, 102, 170),
    REPLACED: QColor(125, 60, 152),
    REPLACEMENT: QColor(125, 60, 152),
}

GROUPS = "groups"
OPS = "ops"


@dataclass(frozen=True)
class Column:
    """One column of a view over a DataFrame."""

    key: str
    header: str
    kind: str  # text | count | ns | delta | pct | delta_pct
    tip: str = ""


GROUP_VIEW_COLUMNS = (
    Column("name", "Kernel group", "text", "what the row's kernels have in common, [launching op]"),
    Column("status", "Status", "text"),
    Column("count_a", "A count", "count"),
    Column("total_a_ns", "A total", "ns"),
    Column("count_b", "B count", "count"),
    Column("total_b_ns", "B total", "ns"),
    Column("delta_ns", "Δ (B − A)", "delta", "B's total minus A's total"),
    Column("delta_pct", "Δ %", "delta_pct", "delta as a percentage of A's total"),
    Column("noise_ns", "Noise", "ns", "|Δ| up to this is unchanged: max(2% of A, 2 std of the total difference)"),
    Column("matched_by", "Matched by", "text", "the matching level: name, launch size, op, kernel kind"),
    Column("kind", "Kind", "text"),
    Column("op", "Op", "text", "the framework op that launched the kernels"),
)

OP_VIEW_COLUMNS = (
    Column("op", "Op", "text", "the framework op that launched the kernels"),
    Column("status", "Status", "text"),
    Column("count_a", "A kernels", "count"),
    Column("total_a_ns", "A total", "ns"),
    Column("count_b", "B kernels", "count"),
    Column("total_b_ns", "B total", "ns"),
    Column("delta_ns", "Δ (B − A)", "delta"),
    Column("delta_pct", "Δ %", "delta_pct"),
    Column("name_a", "Top kernel in A", "text"),
    Column("name_b", "Top kernel in B", "text"),
)

TOTAL_VIEW_COLUMNS = (
    Column("metric", "Total", "text"),
    Column("a", "A", "auto"),
    Column("b", "B", "auto"),
    Column("delta", "Δ (B − A)", "auto_delta"),
    Column("delta_pct", "Δ %", "delta_pct"),
)

STEP_VIEW_COLUMNS = (
    Column("position", "#", "count"),
    Column("step_a", "Step in A", "text"),
    Column("step_b", "Step in B", "text"),
    Column("gpu_span_a", "A GPU span", "ns", "first kernel start to last kernel end of the kernels launched in the step"),
    Column("gpu_span_b", "B GPU span", "ns"),
    Column("delta_ns", "Δ (B − A)", "delta"),
    Column("delta_pct", "Δ %", "delta_pct"),
    Column("kernel_ns_a", "A kernel time", "ns"),
    Column("kernel_ns_b", "B kernel time", "ns"),
)

FUSION_VIEW_COLUMNS = (
    Column("fusion_set", "Set", "count"),
    Column("total_a_ns", "A total (unfused)", "ns"),
    Column("total_b_ns", "B total (fused)", "ns"),
    Column("delta_ns", "Δ (B − A)", "delta"),
    Column("delta_pct", "Δ %", "delta_pct"),
    Column("rows_a", "Rows in A", "text"),
    Column("rows_b", "Rows in B", "text"),
)


def _signed_duration(ns: float) -> str:
    if ns is None or not math.isfinite(ns):
        return ""
    text = format_duration(ns)
    return text if ns <= 0 else "+" + text


def _pct(value: float, signed: bool) -> str:
    if value is None or not math.isfinite(value):
        return ""
    return f"{value:+.1f}%" if signed else f"{value:.1f}%"


class FrameModel(QAbstractTableModel):
    """A read-only, sortable, filterable table over the columns of a DataFrame.

    ``order`` holds the DataFrame positions shown, in display order; ``UserRole`` gives the raw
    value of a cell (for sorting, tests and copying), ``DisplayRole`` the formatted one.
    """

    def __init__(self, columns: Sequence[Column], frame: pd.DataFrame | None = None, parent: Any = None) -> None:
        super().__init__(parent)
        self.columns = tuple(columns)
        self.frame = pd.DataFrame({c.key: [] for c in self.columns})
        self.order = np.zeros(0, dtype=np.int64)
        self.mask: np.ndarray | None = None
        self.sort_column = -1
        self.sort_desc = False
        self._values: list[np.ndarray] = []
        self.units: np.ndarray | None = None  # per row "ns" or "" for the totals table
        if frame is not None:
            self.set_frame(frame)

    # content ---------------------------------------------------------------------------------
    def set_frame(self, frame: pd.DataFrame, units: np.ndarray | None = None) -> None:
        self.beginResetModel()
        self.frame = frame.reset_index(drop=True)
        self._values = [self.frame[c.key].to_numpy() for c in self.columns]
        self.units = units
        self.mask = None
        self._apply_order()
        self.endResetModel()

    def set_mask(self, mask: np.ndarray | None) -> None:
        self.beginResetModel()
        self.mask = mask
        self._apply_order()
        self.endResetModel()

    def _apply_order(self) -> None:
        rows = np.arange(len(self.frame), dtype=np.int64)
        if self.mask is not None:
            rows = rows[self.mask]
        if 0 <= self.sort_column < len(self.columns):
            rows = _sorted_rows(rows, self._values[self.sort_column], self.sort_desc)
        self.order = rows

    def frame_row(self, view_row: int) -> int:
        """The DataFrame position shown at ``view_row``."""
        return int(self.order[view_row])

    def view_row(self, frame_row: int) -> int:
        """The view row of a DataFrame position, -1 when filtered out."""
        hits = np.flatnonzero(self.order == frame_row)
        return int(hits[0]) if len(hits) else -1

    # Qt model --------------------------------------------------------------------------------
    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.order)

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(self.columns):
            col = self.columns[section]
            if role == Qt.ItemDataRole.DisplayRole:
                return col.header
            if role == Qt.ItemDataRole.ToolTipRole:
                return col.tip or None
            if role == Qt.ItemDataRole.TextAlignmentRole:
                return _LEFT if col.kind == "text" else _RIGHT
        if orientation == Qt.Orientation.Vertical and role == Qt.ItemDataRole.DisplayRole and 0 <= section < len(self.order):
            return str(section + 1)
        return None

    def flags(self, index: Index) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not (0 <= index.row() < len(self.order)) or not (0 <= index.column() < len(self.columns)):
            return None
        col = self.columns[index.column()]
        row = int(self.order[index.row()])
        value = self._values[index.column()][row]
        if role == Qt.ItemDataRole.UserRole:
            return _plain(value)
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(col, row, value)
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return _LEFT if col.kind == "text" else _RIGHT
        if role == Qt.ItemDataRole.ForegroundRole:
            return self._colour(col, row, value)
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(col, row, value)
        if role == Qt.ItemDataRole.FontRole and col.key == "status" and value in (REPLACED, REPLACEMENT):
            font = QFont()
            font.setItalic(True)
            return font
        return None

    def _text(self, col: Column, row: int, value: Any) -> str:
        kind = col.kind
        if kind in ("auto", "auto_delta"):
            unit = "" if self.units is None else str(self.units[row])
            if unit == "ns":
                return _signed_duration(float(value)) if kind == "auto_delta" else format_duration(float(value))
            v = float(value)
            text = format_count(v)
            return ("+" + text if v > 0 else text) if kind == "auto_delta" else text
        if kind == "text":
            return "" if value is None else str(value)
        if col.key == "noise_ns" and "status" in self.frame.columns and self.frame["status"].iat[row] not in (CHANGED, UNCHANGED):
            return ""  # noise only means something for a matched row
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            return ""
        if kind == "count":
            return f"{int(value):,}"
        if kind == "ns":
            return format_duration(float(value))
        if kind == "delta":
            return _signed_duration(float(value))
        if kind == "delta_pct":
            return _pct(float(value), signed=True)
        if kind == "pct":
            return _pct(float(value), signed=False)
        return str(value)

    def _colour(self, col: Column, row: int, value: Any) -> QColor | None:
        if col.key == "status":
            return STATUS_COLOURS.get(str(value))
        if col.kind in ("delta", "delta_pct", "auto_delta"):
            status = self.frame["status"].iat[row] if "status" in self.frame.columns else CHANGED
            if status == UNCHANGED:
                return NEUTRAL
            v = float(value) if value is not None else float("nan")
            if not math.isfinite(v) or v == 0:
                return NEUTRAL
            return SLOWER if v > 0 else FASTER
        return None

    def _tooltip(self, col: Column, row: int, value: Any) -> str | None:
        f = self.frame
        if col.key in ("name", "op") and "name_a" in f.columns:
            parts = []
            for side in ("a", "b"):
                full = str(f[f"name_{side}"].iat[row])
                if full:
                    parts.append(f"{side.upper()}: {full}")
            for key, label in (("replaced_by", "replaced by"), ("replaces", "replaces")):
                if key in f.columns and f[key].iat[row]:
                    parts.append(f"{label}: {f[key].iat[row]}")
            return "\n".join(parts) or None
        if col.kind == "text":
            text = "" if value is None else str(value)
            return text if len(text) > 40 else None
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self.layoutAboutToBeChanged.emit()
        old = self.order.copy()
        self.sort_column = column
        self.sort_desc = order == Qt.SortOrder.DescendingOrder
        self._apply_order()
        # keep persistent indexes (the selection) on their rows
        pos = {int(r): i for i, r in enumerate(self.order)}
        for idx in self.persistentIndexList():
            if idx.isValid() and idx.row() < len(old):
                new_row = pos.get(int(old[idx.row()]), -1)
                self.changePersistentIndex(idx, self.index(new_row, idx.column()) if new_row >= 0 else QModelIndex())
        self.layoutChanged.emit()


def _plain(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def _sorted_rows(rows: np.ndarray, values: np.ndarray, descending: bool) -> np.ndarray:
    """``rows`` ordered by ``values[rows]``; stable; NaN and empty text last either way."""
    v = values[rows]
    if v.dtype.kind in "iufb":
        vf = v.astype(np.float64)
        unknown = np.isnan(vf)
        key = np.where(unknown, 0.0, -vf if descending else vf)
        order = np.lexsort((key, unknown))
    else:
        text = np.array([str(x).lower() for x in v], dtype=object)
        unknown = text == ""
        codes, _ = pd.factorize(pd.Series(text), sort=True)
        key = -codes if descending else codes
        order = np.lexsort((key, unknown))
    return rows[order]


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

        self.totals_model = FrameModel(TOTAL_VIEW_COLUMNS, parent=self)
        self.totals_view = _table(self.totals_model, sortable=False)
        self.totals_view.setObjectName("compareTotals")
        self.totals_view.horizontalHeader().setStretchLastSection(False)

        self.diff_model = FrameModel(GROUP_VIEW_COLUMNS, parent=self)
        self.diff_view = _table(self.diff_model, sortable=True)
        self.diff_view.setObjectName("compareDiff")
        self.diff_view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.steps_model = FrameModel(STEP_VIEW_COLUMNS, parent=self)
        self.steps_view = _table(self.steps_model, sortable=True)
        self.fusion_model = FrameModel(FUSION_VIEW_COLUMNS, parent=self)
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

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.totals_view)
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
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
        self.totals_model.set_frame(r.totals, units=r.totals["unit"].to_numpy(dtype=object))
        self.steps_model.set_frame(r.steps)
        self.fusion_model.set_frame(r.fusion)
        self.tabs.setTabEnabled(1, len(r.steps) > 0)
        self.tabs.setTabEnabled(2, len(r.fusion) > 0)
        self._show_table()
        pct = r.slower_pct
        if math.isfinite(pct):
            verdict = "slower" if pct > 0 else "faster" if pct < 0 else "the same"
            amount = f"{abs(pct):.1f}% {verdict}" if pct else verdict
        else:
            amount = "all new kernel time"
        self.headline.setText(
            f"<b>A</b> {_escape(r.label_a)} &nbsp;vs&nbsp; <b>B</b> {_escape(r.label_b)}: "
            f"B's kernel time is {amount} ({_signed_duration(float(r.delta_ns)) or '0 ns'}); "
            f"timelines aligned at the {r.align_basis}"
        )
        self.totals_view.resizeColumnsToContents()
        self.steps_view.resizeColumnsToContents()
        self.fusion_view.resizeColumnsToContents()
        self.totals_view.setMaximumHeight(self.totals_view.verticalHeader().length() + self.totals_view.horizontalHeader().height() + 4)

    def _show_table(self) -> None:
        r = self.result
        if self.table_kind == OPS and r.ops is not None:
            self.diff_model.columns = OP_VIEW_COLUMNS
            self.diff_model.sort_column = -1
            self.diff_model.set_frame(r.ops)
        else:
            self.diff_model.columns = GROUP_VIEW_COLUMNS
            self.diff_model.sort_column = -1
            self.diff_model.set_frame(r.groups)
        self.diff_view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.DescendingOrder)
        self._refilter()
        header = self.diff_view.horizontalHeader()
        header.resizeSections(QHeaderView.ResizeMode.ResizeToContents)
        header.resizeSection(0, min(max(header.sectionSize(0), 200), 460))

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
            self.rowSelected.emit(self.selection_for(self.diff_model.frame_row(current.row())))

    def _on_activated(self, index: QModelIndex) -> None:
        if index.isValid():
            self.rowActivated.emit(self.selection_for(self.diff_model.frame_row(index.row())))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _table(model: FrameModel, sortable: bool) -> QTableView:
    view = QTableView()
    view.setModel(model)
    # start unsorted, in the result's own order (largest |delta| first): enabling sorting sorts
    # by the current indicator at once
    view.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.DescendingOrder)
    view.setSortingEnabled(sortable)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    view.setTextElideMode(Qt.TextElideMode.ElideMiddle)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + 6)
    view.horizontalHeader().setStretchLastSection(True)
    view.horizontalHeader().setHighlightSections(False)
    return view


__all__ = ["CompareSelection", "CompareView", "FrameModel"]
