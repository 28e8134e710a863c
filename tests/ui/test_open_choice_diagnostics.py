"""File › Open with a trace open asks "Open beside / Compare with" (remembered), and every load's
warnings are listed in the Diagnostics dock and in the compare headline (issue 26)."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from kviewer.ui import dialogs
from kviewer.ui.open_choice import SETTING
from tests.ui.conftest import wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


@pytest.fixture
def cut_trace(sample_traces: Path, tmp_path: Path) -> Path:
    """The eager sample cut at 95 % of its JSON: it loads, with a ``truncated`` warning."""
    raw = gzip.decompress((sample_traces / EAGER).read_bytes())
    p = tmp_path / "cut_eager.pt.trace.json"
    p.write_bytes(raw[: int(len(raw) * 0.95)])
    return p


class Asker:
    def __init__(self, answer: tuple[str, bool] | None) -> None:
        self.answer = answer
        self.calls = 0

    def __call__(self, parent: Any, new_label: str, current_label: str) -> tuple[str, bool] | None:
        self.calls += 1
        return self.answer


def test_open_beside_is_asked_then_remembered(qtbot: Any, window: Any, errors: Any, sample_traces: Path,
                                               cut_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window.open_chosen([str(sample_traces / EAGER)])
    wait_idle(qtbot, window)
    assert len(window.state.traces) == 1
    ask = Asker(("beside", True))
    monkeypatch.setattr(dialogs, "ask_open_mode", ask)
    window.open_chosen([str(cut_trace)])
    wait_idle(qtbot, window)
    assert ask.calls == 1 and len(window.state.traces) == 2 and not window.compare.active
    assert str(window._settings().value(SETTING)) == "beside"
    # the truncated file's warning is in the Diagnostics dock, and the status bar leads there
    model = window.diagnostics.model
    rows = [[model.index(i, c).data() for c in range(model.columnCount())] for i in range(model.rowCount())]
    assert [(r[1], r[2]) for r in rows] == [("warning", "truncated")]
    assert "cut_eager" in rows[0][0]
    assert window.diagnostics_button.isVisible() and "1 warning" in window.diagnostics_button.text()
    window.diagnostics_button.click()
    assert window.diagnostics_dock.isVisible()
    # remembered: the next File › Open does not ask again
    window.open_chosen([str(sample_traces / "h200_llm_block_compiled.pt.trace.json.gz")])
    wait_idle(qtbot, window)
    assert ask.calls == 1 and len(window.state.traces) == 3 and not window.compare.active
    assert not errors.calls


def test_compare_with_shows_both_sides_warnings(qtbot: Any, window: Any, errors: Any, sample_traces: Path,
                                                cut_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    window.open_chosen([str(sample_traces / EAGER)])
    wait_idle(qtbot, window)
    ask = Asker(("compare", False))
    monkeypatch.setattr(dialogs, "ask_open_mode", ask)
    window.open_chosen([str(cut_trace)])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    qtbot.waitUntil(lambda: "truncated" in window.compare.view.headline.text() or "ends early" in window.compare.view.headline.text(),
                    timeout=20_000)
    assert ask.calls == 1 and not str(window._settings().value(SETTING, "") or "")
    head = window.compare.view.headline.text()
    assert "B:" in head and "median step" in head  # both have steps: the headline is per step
    # cancelling the question opens nothing
    ask.answer = None
    n = len(window.state.traces)
    window.compare.stop()
    window.open_chosen([str(sample_traces / "h200_llm_block_compiled.pt.trace.json.gz")])
    wait_idle(qtbot, window)
    assert len(window.state.traces) == n
    assert not errors.calls
