"""One table model for every table: unknown values sort last in both directions and read "—" in
the kernel table (both modes), the compare diff, the fusion candidates, the fleet ranks and query
results; the fusion dock sorted by saving; compare labels and rows; units on shared memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PySide6.QtCore import Qt

from kviewer.core import Trace
from kviewer.io import load
from tests.ui.conftest import drop_files, make_sol, make_trace, wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
UNKNOWN = ("—", "")

_cache: dict[str, Trace] = {}


def _load(path: Path) -> Trace:
    if str(path) not in _cache:
        _cache[str(path)] = load(path)
    return _cache[str(path)]


def _column(model: Any, header: str) -> int:
    """The column whose header starts with ``header``."""
    headers = [str(model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)) for c in range(model.columnCount())]
    hits = [c for c, h in enumerate(headers) if h.startswith(header)]
    assert hits, f"no column {header!r} in {headers}"
    return hits[0]


def assert_unknown_last(model: Any, header: str, sort: Any = None) -> None:
    """Sorted by the column ``header`` ascending and descending, the known values are in order
    and every unknown value (shown as "—", or empty for text and ids) comes after them."""
    c = _column(model, header)
    for descending in (False, True):
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        (sort or model.sort)(c, order)
        shown = [model.data(model.index(r, c)) for r in range(model.rowCount())]
        raw = [model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]
        unknown = [t in UNKNOWN for t in shown]
        assert any(unknown) and not all(unknown), f"{header}: the test needs known and unknown values"
        first = unknown.index(True)
        assert all(unknown[first:]), f"{header} {'desc' if descending else 'asc'}: unknown values must come last, got {shown}"
        known = shown[:first] if isinstance(raw[0], str) or raw[0] is None else raw[:first]
        if isinstance(known[0], str):
            known = [k.lower() for k in known]
        assert known == sorted(known, reverse=descending), f"{header}: known values in order"


# ---- kernel table ----------------------------------------------------------------------------


def _kernels_with_unknowns(n: int = 60) -> tuple[Trace, Any]:
    """A trace with unknown devices and occupancies, and its speed of light with unknown bounds."""
    rng = np.random.default_rng(3)
    device = np.where(np.arange(n) % 4 == 0, -1, rng.integers(0, 2, n))
    occ = np.where(np.arange(n) % 5 == 0, np.nan, rng.uniform(10, 100, n))
    bound = np.where(np.arange(n) % 3 == 0, "", np.where(np.arange(n) % 2 == 0, "memory", "compute"))
    trace = make_trace(n, extra={"device": device, "theoretical_occupancy_pct": occ})
    return trace, make_sol(trace, bound)


@pytest.mark.parametrize("header", ["device", "theor. occ.", "bound"])
def test_kernel_table_unknown_last_both_ways(qapp: Any, header: str) -> None:
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.kernel_table import KernelTableModel

    model = KernelTableModel()
    trace, sol = _kernels_with_unknowns()
    model.set_traces([TraceTracks.build(trace, sol=sol)])
    assert_unknown_last(model, header)


def test_grouped_kernel_table_unknown_last_both_ways(qapp: Any) -> None:
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.kernel_table import GROUPS, KernelTableModel

    trace = make_trace(40)
    # a name launched once: its standard deviation is unknown
    trace.kernels["name"] = trace.kernels["name"].cat.add_categories(["once"])
    trace.kernels.loc[7, "name"] = "once"
    model = KernelTableModel()
    model.set_traces([TraceTracks.build(trace)], GROUPS)
    assert_unknown_last(model, "std dev")


# ---- compare ---------------------------------------------------------------------------------


@pytest.fixture
def compare_view(qtbot: Any, sample_traces: Path) -> Any:
    from kviewer.analysis.compare import compare
    from kviewer.ui.compare_view import CompareView

    a, b = _load(sample_traces / EAGER), _load(sample_traces / COMPILED)
    w = CompareView(a, b, compare(a, b))
    qtbot.addWidget(w)
    w.resize(1300, 760)
    return w


@pytest.mark.parametrize("header", ["Δ %", "Noise", "Matched by"])
def test_compare_diff_unknown_last_both_ways(compare_view: Any, header: str) -> None:
    model = compare_view.diff_view.model()
    # replacements have no A total, so no relative change: "—", never an empty cell or 0
    if header == "Δ %":
        c = _column(model, header)
        texts = [model.data(model.index(r, c)) for r in range(model.rowCount())]
        assert "—" in texts and "" not in texts
    assert_unknown_last(model, header, sort=compare_view.diff_view.sortByColumn)


# ---- fusion candidates -----------------------------------------------------------------------


def _candidates_with_unknown(sample_traces: Path) -> pd.DataFrame:
    from kviewer.analysis.fusion import fusion_candidates

    cands = fusion_candidates(_load(sample_traces / EAGER)).copy()
    assert len(cands) >= 3
    # a candidate whose sizes are not known has no saving (as fusion_candidates reports it)
    unknown = cands.iloc[[0]].copy()
    for col in ("savings_ns", "savings_per_instance_ns", "gpu_time_pct", "fused_est_ns"):
        unknown[col] = np.nan
    unknown["rank"] = len(cands) + 1
    return pd.concat([unknown, cands], ignore_index=True)


def test_fusion_sorted_by_saving_unknown_last(qtbot: Any, sample_traces: Path) -> None:
    from kviewer.ui.fusion_panel import FusionPanel

    cands = _candidates_with_unknown(sample_traces)
    panel = FusionPanel()
    qtbot.addWidget(panel)
    panel.set_candidates(cands)
    model = panel.view.model()
    c = _column(model, "saving")
    shown = [model.data(model.index(r, c)) for r in range(model.rowCount())]
    raw = [model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for r in range(model.rowCount())]
    # largest saving first, the unknown one last and shown as "—"
    assert shown[-1] == "—" and "—" not in shown[:-1]
    assert raw[:-1] == sorted(raw[:-1], reverse=True)
    assert raw[0] == pytest.approx(cands["savings_ns"].max())
    # rows numbered forwards, whatever the sort
    numbers = [model.headerData(r, Qt.Orientation.Vertical) for r in range(model.rowCount())]
    assert numbers == [str(i + 1) for i in range(model.rowCount())]
    assert panel.view.verticalHeader().isVisibleTo(panel)
    assert_unknown_last(model, "saving", sort=panel.view.sortByColumn)
    assert_unknown_last(model, "% GPU", sort=panel.view.sortByColumn)


def test_fusion_saving_visible_at_the_default_dock_width(qtbot: Any, window: Any, sample_traces: Path) -> None:
    window.resize(1600, 1000)
    assert drop_files(window, [sample_traces / EAGER])
    wait_idle(qtbot, window)
    docks = window.analysis
    docks.fusion_dock.show()
    docks.fusion_dock.raise_()
    qtbot.waitUntil(lambda: docks.fusion_panel.shown is not None and docks.fusion_panel.panel is not None
                    and docks.fusion_panel.panel.isVisible(), timeout=30_000)
    panel = docks.fusion_panel.panel
    view = panel.view
    model = view.model()
    c = _column(model, "saving")
    right = view.columnViewportPosition(c) + view.columnWidth(c)
    assert 0 <= view.columnViewportPosition(c) and right <= view.viewport().width(), (right, view.viewport().width())
    assert model.data(model.index(0, c), Qt.ItemDataRole.UserRole) == max(
        model.data(model.index(r, c), Qt.ItemDataRole.UserRole) for r in range(model.rowCount()))


# ---- fleet ranks -----------------------------------------------------------------------------


def test_fleet_unknown_last_both_ways(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kviewer.ui.fleet_window as fleet_window
    from kviewer.ui.fleet_window import FleetWindow

    ranks = pd.DataFrame({
        "run": ["r"] * 5,
        "rank": [0, 1, 2, 3, 4],
        "steps": [10, 10, 10, 0, 10],
        "mean_step_ns": [2.0e6, np.nan, 1.5e6, np.nan, 3.0e6],
        "excess_pct": [5.0, np.nan, -3.0, np.nan, 40.0],
        "reason_kind": ["kernel", None, "idle", None, "kernel"],
        "reason": ["gemm", "", "idle", "", "layer_norm"],
        "path": [f"/x/rank-{i}.json" for i in range(5)],
    })
    monkeypatch.setattr(fleet_window, "read_ranks", lambda _db: ranks)  # where the window looks it up
    fw = FleetWindow(tmp_path / "fleet.sqlite", lambda _p: None)
    qtbot.addWidget(fw)
    model = fw.view.model()
    for header in ("mean step", "over median", "reason"):
        assert_unknown_last(model, header, sort=fw.view.sortByColumn)
    c = _column(model, "mean step")
    assert model.data(model.index(model.rowCount() - 1, c)) == "—"


# ---- query results ---------------------------------------------------------------------------


def test_query_results_unknown_last_both_ways(qtbot: Any, synthetic_window: Any) -> None:
    window = synthetic_window
    panel = window.query
    panel.editor.setPlainText("SELECT id, CASE WHEN id % 3 = 0 THEN NULL ELSE dur_ns END AS maybe_ns, "
                              "CASE WHEN id % 4 = 0 THEN NULL ELSE 'k' || (id % 7) END AS label FROM kernels LIMIT 40")
    panel.run_button.click()
    qtbot.waitUntil(lambda: not window.runner.pending("query") and panel.model is not None, timeout=60_000)
    model = panel.view.model()
    assert model.rowCount() == 40
    for header in ("maybe_ns", "label"):
        assert_unknown_last(model, header, sort=panel.view.sortByColumn)


# ---- compare in the window: labels and rows --------------------------------------------------


def test_compare_names_a_and_b_and_shows_every_diff_row(qtbot: Any, window: Any, sample_traces: Path) -> None:
    window.resize(1600, 1100)  # 14 diff rows since precisions never pair (#26)
    assert drop_files(window, [sample_traces / EAGER, sample_traces / COMPILED])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=30_000)
    view = window.compare.view
    qtbot.waitUntil(view.diff_view.isVisible, timeout=5000)
    # every row of the diff fits in the dock (the totals above it used to leave two rows)
    n = view.diff_model.rowCount()
    from kviewer.analysis.compare import compare
    from kviewer.io import load

    # the window's diff is the library's (the CLI's): 14 rows since precisions never pair (#26)
    expected = compare(load(sample_traces / EAGER, use_cache=False), load(sample_traces / COMPILED, use_cache=False)).groups
    assert n == len(view.result.groups) == len(expected) == 14

    def all_rows_visible() -> bool:
        last = view.diff_view.visualRect(view.diff_model.index(n - 1, 0))
        return last.isValid() and 0 <= last.top() and last.bottom() <= view.diff_view.viewport().height()

    qtbot.waitUntil(all_rows_visible, timeout=5000)  # once the dock has its size
    # the kernel table names A and B, and its trace column is wide enough to read them apart
    table = window.table
    c = _column(table.model, "trace")
    labels = {table.model.data(table.model.index(r, c)) for r in range(table.model.rowCount())}
    assert labels == {f"A · {EAGER}", f"B · {COMPILED}"}
    fm = table.view.fontMetrics()
    assert all(table.view.columnWidth(c) >= fm.horizontalAdvance(label) for label in labels)
    # stop comparing: plain file names again
    window.compare.stop()
    labels = {table.model.data(table.model.index(r, c)) for r in range(table.model.rowCount())}
    assert labels == {EAGER, COMPILED}


# ---- units and unknown in the kernel table -----------------------------------------------------


def test_shared_memory_has_a_unit_and_unmeasured_occupancy_is_unknown(sample_traces: Path) -> None:
    from kviewer.session.table_data import instance_data
    from kviewer.session.tracks import TraceTracks

    trace = _load(sample_traces / EAGER)
    data = instance_data([TraceTracks.build(trace)])
    k = trace.kernels
    smem = data.column("shared_mem")
    row = int(np.flatnonzero(k["shared_mem"].to_numpy() == 213188)[0])
    assert smem.text(row) == "213.19 kB"
    # Kineto wrote occupancy 0 for the kernels its calculator could not place: not measured
    occ = data.column("theoretical_occupancy_pct")
    nvjet = np.flatnonzero(k["short_name"].astype(str).str.startswith("nvjet").to_numpy())
    assert len(nvjet) and all(occ.text(int(i)) == "—" for i in nvjet)
    shown = {occ.text(i) for i in range(len(k))}
    assert "0.0" not in shown and "100.0" in shown
