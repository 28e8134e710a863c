"""MFU per step in the window (issue 31): a selected step marker's Details and the Range dock show
the step's MFU line, the same numbers as ``kviewer summary --steps``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.analysis.mfu import mfu, steps_in_range
from kviewer.session.mfu_view import mfu_line
from kviewer.session.tracks import TraceTracks
from kviewer.ui.viewstate import Selection


def test_step_marker_details_and_range_show_its_mfu(qtbot: Any, window: Any, sample_traces: Path) -> None:
    from kviewer.io import load

    trace = load(sample_traces / "gpt_train.pt.trace.json.gz")
    expected = mfu(trace)
    tracks = TraceTracks.build(trace)
    window.state.add_trace(tracks)
    c = trace.cpu_slices
    names = c["name"].astype(str).to_numpy()
    row = int(np.flatnonzero(names == "ProfilerStep#3")[0])
    window.state.set_selection(Selection(tracks.key, "cpu_slices", row))
    step = expected.steps[expected.steps["name"] == "ProfilerStep#3"].iloc[0].to_dict()
    line = mfu_line(step)
    qtbot.waitUntil(lambda: line in window.details.toPlainText(), timeout=30000)
    assert "idle/launch" in window.details.toPlainText()
    # the step lane's tooltip carries the same line
    from kviewer.session.open_trace import MFU
    from kviewer.ui.timeline import tooltip_text

    computed = window.state.document.ready(tracks.key, MFU)  # what the timeline passes
    assert line in tooltip_text(tracks, "cpu_slices", row, mfu=computed)
    assert "MFU" not in tooltip_text(tracks, "cpu_slices", int(np.flatnonzero(names == "aten::mm")[0]), mfu=computed)
    qtbot.waitUntil(lambda: line in window.range_panel.mfu_label.text(), timeout=30000)
    # a slice that is no step marker shows no MFU
    other = int(np.flatnonzero(names == "aten::mm")[0])
    window.state.set_selection(Selection(tracks.key, "cpu_slices", other))
    assert "MFU" not in window.details.toPlainText()
    assert window.range_panel.mfu_label.isHidden()
    # a time range over two whole steps: their summed FLOPs over their summed time
    st = expected.steps
    t0, t1 = int(st["start"].iloc[0]) - tracks.offset_ns, int(st["end"].iloc[1]) - tracks.offset_ns
    window.state.set_time_selection((float(t0 - 1000), float(t1 + 1000)))
    tot = steps_in_range(expected, int(st["start"].iloc[0]) - 1000, int(st["end"].iloc[1]) + 1000)
    assert tot is not None and tot["step_list"] == [2, 3]
    assert tot["mfu"] == pytest.approx(st["model_flops"].iloc[:2].sum() / (st["step_ns"].iloc[:2].sum() * 1e-9 * st["peak_flops"].iloc[0]), rel=1e-12)
    qtbot.waitUntil(lambda: mfu_line(tot) in window.range_panel.mfu_label.text(), timeout=30000)


def test_mfu_is_computed_once_the_speed_of_light_is_known(qtbot: Any, window: Any, sample_traces: Path) -> None:
    """Nothing selected: once the window has the trace's speed of light, the MFU follows in the
    background and the step markers' tooltips show it."""
    from kviewer.io import load
    from kviewer.session.open_trace import MFU
    from kviewer.ui.timeline import tooltip_text

    from tests.ui.conftest import drop_files, wait_idle

    trace = load(sample_traces / "gpt_infer.pt.trace.json.gz")
    assert drop_files(window, [sample_traces / "gpt_infer.pt.trace.json.gz"])
    wait_idle(qtbot, window)
    tracks = window.state.traces[0]
    qtbot.waitUntil(lambda: tracks.sol_info is not None and window.state.document.ready(tracks.key, MFU) is not None, timeout=60000)
    expected = mfu(trace).steps.iloc[0].to_dict()
    row = int(np.flatnonzero(trace.cpu_slices["name"].astype(str).to_numpy() == expected["name"])[0])
    assert mfu_line(expected) in tooltip_text(tracks, "cpu_slices", row, mfu=window.state.document.ready(tracks.key, MFU))


def test_a_failed_mfu_is_kept_and_said_not_asked_again(qtbot: Any, window: Any, sample_traces: Path, monkeypatch: Any) -> None:
    """The MFU lives in the trace's slot: a computation that fails is Failed there, Details says
    why, and later traces-changed events (which warm the MFU) do not start it again."""
    import kviewer.ui.mfu_requests as mfu_requests
    from kviewer.io import load
    from kviewer.session.open_trace import MFU, Failed

    calls: list[int] = []

    def broken(trace: Any, info: Any) -> Any:
        calls.append(1)
        raise ValueError("no FLOPs today")

    monkeypatch.setattr(mfu_requests, "compute_mfu", broken)  # where the request looks it up
    trace = load(sample_traces / "gpt_train.pt.trace.json.gz")
    tracks = TraceTracks.build(trace)
    window.state.add_trace(tracks)
    names = trace.cpu_slices["name"].astype(str).to_numpy()
    window.state.set_selection(Selection(tracks.key, "cpu_slices", int(np.flatnonzero(names == "ProfilerStep#3")[0])))
    qtbot.waitUntil(lambda: "no FLOPs today" in window.details.toPlainText(), timeout=30000)
    assert isinstance(window.state.document.analysis(tracks.key, MFU), Failed)
    for _ in range(3):
        window.state.document.changed()
        window.details.show_selection(window.state.selection)
    qtbot.wait(200)
    assert calls == [1]
