"""The compare view renders offscreen with rows; its models pass qtmodeltester; signals carry kernels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage

from kviewer.analysis.compare import REPLACED, UNCHANGED, compare
from kviewer.core import Trace
from kviewer.io import load
from kviewer.ui.compare_view import (
    FASTER,
    GROUP_VIEW_COLUMNS,
    OPS,
    SLOWER,
    CompareSelection,
    CompareView,
)

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"

_cache: dict[str, Trace] = {}


def _load(path: Path) -> Trace:
    if str(path) not in _cache:
        _cache[str(path)] = load(path)
    return _cache[str(path)]


@pytest.fixture
def view(qtbot: Any, sample_traces: Path) -> CompareView:
    a, b = _load(sample_traces / EAGER), _load(sample_traces / COMPILED)
    w = CompareView(a, b, compare(a, b))
    qtbot.addWidget(w)
    w.resize(1300, 760)
    w.show()
    qtbot.waitExposed(w)
    return w


def _colours(image: QImage, step: int = 3) -> set[tuple[int, int, int]]:
    return {
        (c.red(), c.green(), c.blue())
        for y in range(0, image.height(), step)
        for x in range(0, image.width(), step)
        for c in [image.pixelColor(x, y)]
    }


def test_renders_offscreen_with_rows(view: CompareView) -> None:
    model = view.diff_model
    assert model.rowCount() == len(view.result.groups) == 14  # GEMM rows split by their op's input shapes
    assert model.columnCount() == len(GROUP_VIEW_COLUMNS)
    image = view.grab().toImage()
    assert image.width() >= 1000 and image.height() >= 600
    colours = _colours(image)
    assert len(colours) > 20, "the picture is blank"
    # deltas are drawn in the slower (red) and faster (green) colours
    def near(target: QColor) -> bool:
        return any(abs(r - target.red()) + abs(g - target.green()) + abs(b - target.blue()) < 60 for r, g, b in colours)
    assert near(SLOWER) and near(FASTER)
    assert "faster" in view.headline.text() and "first step" in view.headline.text()


def test_models_pass_qtmodeltester(view: CompareView, qtmodeltester: Any) -> None:
    qtmodeltester.check(view.diff_model, force_py=True)
    qtmodeltester.check(view.totals_model, force_py=True)
    qtmodeltester.check(view.steps_model, force_py=True)
    qtmodeltester.check(view.fusion_model, force_py=True)
    view.set_table(OPS)
    qtmodeltester.check(view.diff_model, force_py=True)


def test_cells_show_the_result(view: CompareView) -> None:
    model = view.diff_model
    keys = [c.key for c in model.columns]
    g = view.result.groups
    for r in range(model.rowCount()):
        row = model.source_row(r)
        assert model.data(model.index(r, keys.index("delta_ns")), Qt.ItemDataRole.UserRole) == g["delta_ns"].iat[row]
        assert model.data(model.index(r, keys.index("name")), Qt.ItemDataRole.DisplayRole) == g["name"].iat[row]
    # the first row is the largest |delta|, a +822 µs Triton kernel; its delta reads as signed time
    first = model.data(model.index(0, keys.index("delta_ns")))
    assert first.startswith("+") and first.endswith("µs")
    assert model.data(model.index(0, keys.index("delta_ns")), Qt.ItemDataRole.ForegroundRole) == SLOWER


def test_sorting_by_header(view: CompareView) -> None:
    model = view.diff_model
    col = [c.key for c in model.columns].index("total_a_ns")
    view.diff_view.sortByColumn(col, Qt.SortOrder.DescendingOrder)
    values = [model.data(model.index(r, col), Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]
    assert values == sorted(values, reverse=True)
    name_col = 0
    view.diff_view.sortByColumn(name_col, Qt.SortOrder.AscendingOrder)
    names = [model.data(model.index(r, name_col)).lower() for r in range(model.rowCount())]
    assert names == sorted(names)


def test_filters(view: CompareView) -> None:
    view.set_status_filter(REPLACED)
    assert view.diff_model.rowCount() == 5
    assert view.count_label.text() == "5 of 14 rows"
    view.set_status_filter("")
    view.filter_edit.setText("NVJET")
    assert view.diff_model.rowCount() == 1
    view.filter_edit.clear()
    assert view.diff_model.rowCount() == 14


def test_row_selection_signals_carry_the_kernels_of_both_reports(qtbot: Any, view: CompareView) -> None:
    g = view.result.groups
    gemm_row = int(np.flatnonzero(g["name"].str.startswith("nvjet_").to_numpy())[0])
    with qtbot.waitSignal(view.rowSelected, timeout=2000) as sig:
        view.select_row(gemm_row)
    sel = sig.args[0]
    assert isinstance(sel, CompareSelection)
    assert sel.table == "groups" and sel.row == gemm_row and sel.status == UNCHANGED
    assert len(sel.kernels_a) == len(sel.kernels_b) == 48
    names_a = set(view.trace_a.kernels["name"].astype(str).to_numpy()[sel.kernels_a])
    names_b = set(view.trace_b.kernels["name"].astype(str).to_numpy()[sel.kernels_b])
    assert names_a == names_b == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"}
    with qtbot.waitSignal(view.rowActivated, timeout=2000) as sig:
        view.diff_view.activated.emit(view.diff_view.currentIndex())
    assert sig.args[0].row == gemm_row


def test_per_op_table_and_alignment(qtbot: Any, view: CompareView) -> None:
    view.set_table(OPS)
    ops = view.result.ops
    assert ops is not None and view.diff_model.rowCount() == len(ops)
    row = int(np.flatnonzero((ops["op"] == "aten::gelu").to_numpy())[0])
    with qtbot.waitSignal(view.rowSelected, timeout=2000) as sig:
        view.select_row(row)
    assert sig.args[0].table == "ops" and sig.args[0].name == "aten::gelu" and len(sig.args[0].kernels_b) == 0
    assert view.align_offset_ns == view.result.align_offset_ns
    assert view.steps_model.rowCount() == 3 and view.fusion_model.rowCount() == 1


def test_a_trace_with_itself_and_without_ops(qtbot: Any, sample_traces: Path) -> None:
    t = _load(sample_traces / "h200_llm_train_nvtx.sqlite.gz")
    w = CompareView(t, t)  # computes the comparison itself
    qtbot.addWidget(w)
    assert w.diff_model.rowCount() == len(w.result.groups) > 0
    keys = [c.key for c in w.diff_model.columns]
    assert {w.diff_model.data(w.diff_model.index(r, keys.index("status"))) for r in range(w.diff_model.rowCount())} == {UNCHANGED}
    with pytest.raises(ValueError):
        w.set_table(OPS)  # an nsys export has no framework ops
    assert w.steps_model.rowCount() == 60


def test_the_headline_shows_what_the_comparison_notes(qtbot: Any, sample_traces: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-rank trace against a folder of two ranks: the comparison's notes (every figure adds a
    side's ranks) are in the window's headline, as `kviewer compare` prints them."""
    from kviewer.io import ranks
    from tests.analysis.test_step_joins import CNN, _two_ranks

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    a = load(sample_traces / CNN, use_cache=False)
    b = load(_two_ranks(sample_traces, tmp_path, 1_000_000), use_cache=False)
    res = compare(a, b)
    assert res.notes
    w = CompareView(a, b, res)
    qtbot.addWidget(w)
    text = w.headline.text()
    assert all(n.split(":")[0] in text for n in res.notes)
    assert "A holds the kernels of 1 rank and B of 2" in text
