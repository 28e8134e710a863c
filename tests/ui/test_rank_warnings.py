"""Warnings do not get lost (issue 27): every load diagnostic of a rank folder (a cut rank, ignored
files) lands in the Diagnostics dock, the status bar says how many more there are than the one it
shows and names the key that opens the dock; a folder of unrelated files is refused as a rank set
with the reason, in the window's error dialog."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kviewer.io import ranks
from tests.ui.conftest import wait_idle

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


@pytest.fixture(autouse=True)
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ranks.ENV_WORKERS, "1")


def _write(folder: Path, name: str, doc: dict[str, Any], rank: int, shift_ns: int = 0, cut: float = 1.0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2}}
    out.update({k: v for k, v in doc.items() if k != "distributedInfo"})
    out["baseTimeNanoseconds"] = doc["baseTimeNanoseconds"] + shift_ns
    data = json.dumps(out).encode()
    (folder / name).write_bytes(data[: int(len(data) * cut)])


def _doc(sample_traces: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress((sample_traces / EAGER).read_bytes()))
    return doc


def test_every_warning_of_a_rank_folder_is_in_the_diagnostics_dock(qtbot: Any, window: Any, errors: Any,
                                                                   sample_traces: Path, tmp_path: Path) -> None:
    doc = _doc(sample_traces)
    run = tmp_path / "run"
    _write(run, "rank-0.json", doc, 0)
    _write(run, "rank-1.json", doc, 1, cut=0.95)  # rank 1 truncated
    for name in ("README.txt", "notes.txt", "env.txt"):  # ignored 3 files
        (run / name).write_text("not a trace\n")
    window.open_files([str(run)])
    wait_idle(qtbot, window, timeout=120_000)
    assert not errors.calls
    meta = window.state.traces[0].trace.meta
    kinds = [d.kind for d in meta.warnings]
    assert "truncated" in kinds and "ignored" in kinds and len(kinds) >= 2
    model = window.diagnostics.model
    assert model.rowCount() == len(kinds)  # all of them, not the first
    assert [model.index(i, 2).data() for i in range(model.rowCount())] == kinds
    assert window.diagnostics_button.isVisible() and f"{len(kinds)} warnings" in window.diagnostics_button.text()
    status = window.status_label.text()
    assert meta.warnings[0].message in status and f"+{len(kinds) - 1} more" in status and "Ctrl+Shift+D" in status
    # the key (a menu action) brings the dock forward
    window.diagnostics_dock.hide()
    window.show_diagnostics_action.trigger()
    assert window.diagnostics_dock.isVisible()


def test_a_folder_of_unrelated_files_is_refused_with_the_reason(qtbot: Any, window: Any, errors: Any,
                                                                sample_traces: Path, tmp_path: Path) -> None:
    doc = _doc(sample_traces)
    junk = tmp_path / "junk"
    _write(junk, "a.json", doc, 0)
    _write(junk, "b.json", doc, 1, shift_ns=int(3.5 * 3600e9))  # 3.5 h later
    window.open_files([str(junk)])
    wait_idle(qtbot, window, timeout=120_000)
    qtbot.waitUntil(lambda: bool(errors.calls), timeout=120_000)
    assert not window.state.traces
    text = errors.calls[0][1]
    assert "not one run's ranks" in text and "apart" in text
