"""The Memory, Call tree and What-if docks compute only while on screen, once per input: a hidden
tab computes nothing, and the second traces-changed of a load (the speed of light arriving) does
not compute again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.ui.conftest import wait_idle

ST = Path(__file__).resolve().parents[2] / "sample_traces"


def test_hidden_docks_compute_nothing_and_a_shown_one_computes_once(qtbot: Any, window: Any, monkeypatch: Any) -> None:
    import kviewer.analysis.calltree as calltree
    import kviewer.analysis.memory as memory

    calls = {"memory": 0, "calltree": 0}
    real_memory, real_tree = memory.memory_summary, calltree.call_tree

    def count_memory(trace: Any) -> Any:
        calls["memory"] += 1
        return real_memory(trace)

    def count_tree(trace: Any) -> Any:
        calls["calltree"] += 1
        return real_tree(trace)

    monkeypatch.setattr(memory, "memory_summary", count_memory)
    monkeypatch.setattr(calltree, "call_tree", count_tree)
    window.table_dock.raise_()  # Memory, Call tree and What-if are tabs behind it
    window.open_files([str(ST / "gpt_train_memory.pt.trace.json.gz")])
    wait_idle(qtbot, window)
    tracks = window.state.current
    qtbot.waitUntil(lambda: tracks.sol_info is not None, timeout=30_000)
    qtbot.wait(200)
    assert calls == {"memory": 0, "calltree": 0}
    assert window.whatif_panel.shown is None and window.whatif_panel.base is None
    window.memory_dock.raise_()
    qtbot.waitUntil(lambda: window.memory_panel.result is not None, timeout=30_000)
    window.state.document.changed()  # another traces-changed with the same input
    window.flame_dock.raise_()
    window.memory_dock.raise_()
    qtbot.waitUntil(lambda: window.flame_panel.thread_rows is not None, timeout=30_000)
    qtbot.wait(200)
    assert calls == {"memory": 1, "calltree": 1}


def test_what_if_rebuilds_when_the_speed_of_light_changes(qtbot: Any, window: Any, sample_traces: Path) -> None:
    """A GPU chosen (or counters attached) gives the trace a new speed of light: the What-if dock
    builds its base again (it stayed on the old one when only the trace object was compared)."""
    from kviewer.session.analyses import compute_sol

    window.whatif_dock.raise_()
    window.open_files([str(sample_traces / "mlp_sync.pt.trace.json.gz")])
    wait_idle(qtbot, window)
    tracks = window.state.current
    panel = window.whatif_panel
    qtbot.waitUntil(lambda: tracks.sol_info is not None and panel.projection is not None
                    and panel.shown == (tracks.key, id(tracks.trace), id(tracks.sol_info)), timeout=30_000)
    first = panel.base
    window.analysis.apply_sol(tracks.key, compute_sol(tracks.trace, "h100_sxm"))
    qtbot.waitUntil(lambda: panel.base is not None and panel.base is not first, timeout=30_000)
    assert panel.shown == (tracks.key, id(tracks.trace), id(tracks.sol_info))
    assert panel.base.model.device == "h100_sxm"
