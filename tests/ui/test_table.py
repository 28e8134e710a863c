"""The kernel table model: numpy sorting and filtering, grouped mode, copy, links to the state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtWidgets import QApplication

from kviewer.ui.kernel_table import GROUPS, INSTANCES, KernelTableModel
from kviewer.session.tracks import TraceTracks
from kviewer.ui.viewstate import Selection
from tests.ui.conftest import make_sol, make_trace


@pytest.fixture
def model(qapp: Any) -> KernelTableModel:
    m = KernelTableModel()
    m.set_traces([TraceTracks.build(make_trace(300))])
    return m


def _col(model: KernelTableModel, key: str) -> int:
    return [c.key for c in model.data_.columns].index(key)


def _user(model: KernelTableModel, column: int) -> list[Any]:
    return [model.data(model.index(r, column), Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]


def test_model_passes_qtmodeltester_in_both_modes(model: KernelTableModel, qtmodeltester: Any) -> None:
    qtmodeltester.check(model, force_py=True)
    model.set_mode(GROUPS)
    qtmodeltester.check(model, force_py=True)


@pytest.mark.parametrize("descending", [False, True])
def test_every_column_sorts_like_pandas(model: KernelTableModel, descending: bool) -> None:
    order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
    for c, col in enumerate(model.data_.columns):
        model.sort(c, order)
        keys = np.asarray(col.order_key())[model.order]
        if col.kind == "text":
            shown = [model.data(model.index(r, c)) for r in range(model.rowCount())]
            assert shown == sorted(shown, reverse=descending), col.key
            continue
        finite = keys[~np.isnan(keys)] if keys.dtype.kind == "f" else keys
        expected = np.sort(finite)[::-1] if descending else np.sort(finite)
        assert np.array_equal(finite, expected), col.key
        if keys.dtype.kind == "f" and np.isnan(keys).any():
            first_nan = int(np.flatnonzero(np.isnan(keys))[0])
            assert np.isnan(keys[first_nan:]).all(), f"{col.key}: unknown values go last"


def test_sort_is_stable_and_keeps_the_selected_row(qtbot: Any, model: KernelTableModel) -> None:
    from PySide6.QtWidgets import QTableView

    view = QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    view.selectRow(5)
    kernel = model.selection_for_row(5)[1]
    model.sort(_col(model, "dur"), Qt.SortOrder.DescendingOrder)
    rows = view.selectionModel().selectedRows()
    assert len(rows) == 1 and model.selection_for_row(rows[0].row())[1] == kernel
    # ties keep start order (stable): sort by stream, starts stay increasing within a stream
    model.sort(_col(model, "stream"), Qt.SortOrder.AscendingOrder)
    starts = np.asarray(model.data_.column("start").values)[model.order]
    streams = np.asarray(model.data_.column("stream").values)[model.order]
    for s in np.unique(streams):
        assert np.all(np.diff(starts[streams == s]) >= 0)


def test_grouped_mode_matches_the_summary_analysis(model: KernelTableModel) -> None:
    from kviewer.analysis.summary import kernel_summary

    trace = model._traces[0].trace
    ref = kernel_summary(trace).set_index("name")
    model.set_mode(GROUPS)
    assert model.rowCount() == len(ref)
    d = model.data_
    names = [d.column("name").categories[c] for c in d.column("name").values]
    got = pd.DataFrame(
        {
            "count": d.column("count").values,
            "total_ns": d.column("total").values,
            "avg_ns": d.column("avg").values,
            "med_ns": d.column("med").values,
            "min_ns": d.column("min").values,
            "max_ns": d.column("max").values,
            "std_ns": d.column("std").values,
            "time_pct": d.column("pct").values,
        },
        index=names,
    ).loc[ref.index]
    for col in got.columns:
        np.testing.assert_allclose(got[col].to_numpy(dtype=float), ref[col].to_numpy(dtype=float), rtol=1e-9, err_msg=col)
    # every group's members are exactly the kernels of that name
    for i, members in enumerate(d.groups):
        assert set(trace.kernels["name"].astype(str).to_numpy()[members]) == {names[i]}
    assert sum(len(m) for m in d.groups) == len(trace.kernels)


def test_filter_in_model(model: KernelTableModel) -> None:
    trace = model._traces[0].trace
    k = trace.kernels
    assert model.set_filter("gemm_kernel_3 dur > 10us")
    expected = ((k["short_name"].astype(str) == "gemm_kernel_3") & (k["dur"] > 10_000)).sum()
    assert model.rowCount() == expected > 0
    errors: list[str] = []
    model.filterError.connect(errors.append)
    assert not model.set_filter("dur > lots")
    assert model.rowCount() == expected  # a bad filter keeps the previous rows
    assert errors and "not a number" in errors[0]
    assert model.set_filter("grid_x >= 128")
    assert model.rowCount() == int((k["grid_x"] >= 128).sum())
    assert model.set_filter("grid > 1k and regs < 100")
    assert model.rowCount() == int(((k["grid_x"] * k["grid_y"] * k["grid_z"] > 1000) & (k["registers"] < 100)).sum())
    assert model.set_filter("")
    assert model.rowCount() == len(k)


def test_sol_columns_only_when_known(qapp: Any) -> None:
    n = 50
    m = KernelTableModel()
    m.set_traces([TraceTracks.build(make_trace(n))])
    keys = {c.key for c in m.data_.columns}
    assert "model_flops" not in keys and "dram_bytes" not in keys and "bound" not in keys
    flops = np.full(n, np.nan)
    flops[3] = 1e9
    trace = make_trace(n, extra={"model_flops": flops, "sm_throughput_pct": np.linspace(0, 100, n)})
    m.set_traces([TraceTracks.build(trace, sol=make_sol(trace, np.where(np.arange(n) % 2 == 0, "memory", "compute")))])
    keys = [c.key for c in m.data_.columns]
    assert {"model_flops", "sm_throughput_pct", "bound"} <= set(keys)
    assert m.set_filter("sm_throughput_pct > 50 and bound = memory")
    expected = ((np.linspace(0, 100, n) > 50) & (np.arange(n) % 2 == 0)).sum()
    assert m.rowCount() == expected


def test_copy_rows_as_tsv(qtbot: Any, synthetic_window: Any) -> None:
    table = synthetic_window.table
    view = table.view
    view.selectRow(0)
    view.selectionModel().select(table.model.index(2, 0), view.selectionModel().SelectionFlag.Select | view.selectionModel().SelectionFlag.Rows)
    view.setFocus()
    qtbot.keyClick(view, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    text = QApplication.clipboard().text()
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == 3
    header = lines[0].split("\t")
    assert header[0] == "kernel" and "duration" in header and header[-1] == "full name"
    trace = synthetic_window.state.traces[0].trace
    first = lines[1].split("\t")
    kernel = table.model.selection_for_row(0)[1]
    assert first[0] == str(trace.kernels["short_name"].iat[kernel])
    assert first[-1] == str(trace.kernels["name"].iat[kernel])


def test_row_selection_and_state_selection_follow_each_other(qtbot: Any, synthetic_window: Any) -> None:
    state = synthetic_window.state
    table = synthetic_window.table
    key = state.traces[0].key
    table.model.sort(_col(table.model, "dur"), Qt.SortOrder.DescendingOrder)
    table.select_row(0)
    longest = int(state.traces[0].trace.kernels["dur"].to_numpy().argmax())
    assert state.selection == Selection(key, "kernels", longest)
    # a selection made on the timeline selects the table row
    state.set_selection(Selection(key, "kernels", 17))
    current = table.view.selectionModel().currentIndex()
    assert table.model.selection_for_row(current.row())[1] == 17
    qtbot.keyClick(table.view, Qt.Key.Key_Escape)
    assert state.selection is None


def test_group_selection_highlights_all_instances(qtbot: Any, synthetic_window: Any) -> None:
    state = synthetic_window.state
    table = synthetic_window.table
    table.mode_box.setCurrentIndex(table.mode_box.findData(GROUPS))
    assert table.model.mode == GROUPS
    table.select_row(0)
    key, _k, members = table.model.selection_for_row(0)
    mask = state.highlight[key]
    assert mask.sum() == len(members) and mask[members].all()
    # the timeline dims every other kernel
    tracks = state.traces[0]
    from kviewer.session import colors

    for lane in tracks.lanes:
        if lane.table == "kernels":
            dimmed = lane.lod.raw.colour >= colors.DIM
            assert np.array_equal(dimmed, ~mask[lane.ids])
    table.mode_box.setCurrentIndex(table.mode_box.findData(INSTANCES))
    assert state.highlight == {}


def test_filter_box_dims_the_timeline(qtbot: Any, synthetic_window: Any) -> None:
    table = synthetic_window.table
    state = synthetic_window.state
    qtbot.keyClicks(table.filter_edit, "dur > 20us")
    qtbot.keyClick(table.filter_edit, Qt.Key.Key_Return)
    k = state.traces[0].trace.kernels
    assert table.model.rowCount() == int((k["dur"] > 20_000).sum())
    assert state.filter_text == "dur > 20us"
    mask = state.highlight[state.traces[0].key]
    assert np.array_equal(mask, (k["dur"] > 20_000).to_numpy())
    assert "of" in table.count_label.text()
    table.filter_edit.setText("dur >")
    table.apply_filter()
    assert table.error_label.text() and not table.error_label.isHidden()


def test_index_outside_rows_is_harmless(model: KernelTableModel) -> None:
    assert model.data(QModelIndex()) is None
    assert model.data(model.createIndex(10_000, 0)) is None
    assert model.headerData(99, Qt.Orientation.Horizontal) is None


def test_going_back_restores_the_filter_and_the_filter_highlight(qtbot: Any, synthetic_window: Any) -> None:
    """The view state's filter has a listener (the table), and the highlight one rule: a picked
    group shows over the filter's highlight, and clearing the pick shows the filter's again."""
    window = synthetic_window
    state, table = window.state, window.table
    tracks = state.traces[0]
    k = tracks.trace.kernels
    table.filter_edit.setText("gemm_kernel_3")
    table.apply_filter()
    filtered = (k["short_name"].astype(str) == "gemm_kernel_3").to_numpy()
    assert table.model.rowCount() == int(filtered.sum())
    assert state.highlight[tracks.key].tolist() == filtered.tolist()
    # going back in the zoom/filter stack puts the table back on the earlier filter
    state.push(filter_text="gemm_kernel_5")
    assert table.filter_edit.text() == "gemm_kernel_5"
    assert table.model.rowCount() == int((k["short_name"].astype(str) == "gemm_kernel_5").sum())
    assert state.pop()
    assert table.filter_edit.text() == "gemm_kernel_3" and table.model.rowCount() == int(filtered.sum())
    assert state.highlight[tracks.key].tolist() == filtered.tolist()
    # a fusion candidate picked in its dock highlights its kernels; choosing none goes back to the filter's
    window.analysis.fusion_panel.shown = (tracks.key, 0)
    window.analysis.choose_candidate([1, 2])
    assert np.flatnonzero(state.highlight[tracks.key]).tolist() == [1, 2]
    window.analysis.choose_candidate([])
    assert state.highlight[tracks.key].tolist() == filtered.tolist()
    lane = next(ln for ln in tracks.lanes if ln.table == "kernels")
    assert tracks.emphasis is not None and tracks.emphasis.tolist() == filtered.tolist() and lane is not None
