"""The fusion panel: a checked model over the candidates, sorted by saving, selection out."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from kviewer.analysis.fusion import fusion_candidates
from kviewer.core import Trace
from kviewer.ui.fusion_panel import FusionPanel

from tests.analysis.conftest import load_with


@pytest.fixture(scope="module")
def eager(sample_traces: Path) -> Trace:
    return load_with("kviewer.io.torch", sample_traces / "h200_llm_block_eager.pt.trace.json.gz")


def test_model_and_selection(qtbot, qtmodeltester, eager) -> None:  # type: ignore[no-untyped-def]
    cands = fusion_candidates(eager)
    panel = FusionPanel()
    qtbot.addWidget(panel)
    panel.set_candidates(cands, kernel_ns=float(eager.kernels["dur"].sum()))
    qtmodeltester.check(panel.model)
    model = panel.model
    assert model.rowCount() == len(cands)
    # sorted by total saving, largest first
    saving = model.column_index("savings_ns")
    first = model.index(0, saving).data(Qt.ItemDataRole.UserRole)
    assert first == pytest.approx(cands["savings_ns"].max())
    assert "aten::gelu" in model.index(0, model.column_index("chain")).data()
    assert "% of kernel time" in panel.total.text()
    with qtbot.waitSignal(panel.candidateSelected, timeout=1000) as blocker:
        panel.select_row(0)
    top = cands.sort_values("savings_ns", ascending=False).iloc[0]
    assert blocker.args[0] == [k for inst in top["kernel_ids"] for k in inst]
    assert len(blocker.args[0]) == top["count"] * top["length"]
    # sorting by another column keeps the row -> kernels mapping right
    panel.view.sortByColumn(model.column_index("count"), Qt.SortOrder.AscendingOrder)
    panel.view.clearSelection()
    last = model.rowCount() - 1
    with qtbot.waitSignal(panel.candidateSelected, timeout=1000) as blocker:
        panel.select_row(last)
    assert blocker.args[0] == panel.kernel_ids(model.source_row(last))


def test_empty(qtbot) -> None:  # type: ignore[no-untyped-def]
    from kviewer.analysis.fusion import FUSION_COLUMNS
    import pandas as pd

    panel = FusionPanel()
    qtbot.addWidget(panel)
    panel.set_candidates(pd.DataFrame({c: [] for c in FUSION_COLUMNS}))
    assert panel.model.rowCount() == 0 and panel.total.text().startswith("0 candidates")
