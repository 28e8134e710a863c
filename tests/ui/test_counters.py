"""Counter reports in the window: attached to an open trace, and on their own (the Counters dock)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.ui.viewstate import Selection
from tests.ui.conftest import drop_files, wait_idle


def _wait_attached(qtbot: Any, window: Any) -> None:
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: not window.runner.pending(), timeout=20_000)
    qtbot.wait(50)


@pytest.mark.samples
def test_trace_then_report_attaches(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    """kviewer TRACE REPORT: one trace, whose matched kernels carry the report's counters."""
    trace = samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz"
    report = samples / "ncu" / "h200_llm_block_eager.ncu-rep"
    window.open_files([str(trace), str(report)])
    _wait_attached(qtbot, window)
    assert not errors.calls
    assert len(window.state.traces) == 1 and not window.compare.active
    tracks = window.state.traces[0]
    result = tracks.counters
    assert result is not None and result.matched == 30
    k = tracks.trace.kernels
    assert (k["counters"].astype(str) == "measured").sum() == 30
    assert (k["counters"].astype(str) == "inherited").sum() == 60  # the 30 places in the 2 other steps
    # the SOL the roofline and the colours use is the measured one
    sol = tracks.sol_info.sol
    assert ((sol["bytes_source"] == "measured").to_numpy() == k["counters"].astype(str).isin(["measured", "inherited"]).to_numpy()).all()
    # the roofline draws measured, inherited and modelled points differently, and its legend says so
    roofline = window.analysis.roofline_panel.roofline
    assert roofline is not None and window.analysis.roofline_panel.shown == (tracks.key, id(tracks.sol_info))
    labels = roofline.style_labels()
    assert "measured (counters)" in labels and "measured on another launch (inherited)" in labels
    # the table has the counters column; the details say where the values came from
    from kviewer.session.table_data import instance_data

    data = instance_data([tracks])
    col = data.column("counters")
    assert {col.text(i) for i in range(len(data))} >= {"measured", "inherited"}
    # ncu's throughput breakdown and the SOL % sit in the table, measured values equal the report's
    keys = {c.key for c in data.columns}
    assert {"sm_throughput_pct", "mem_throughput_pct", "l1_throughput_pct", "l2_throughput_pct", "dram_throughput_pct",
            "achieved_occupancy_pct", "sol_pct", "dram_bytes"} <= keys
    pairs = result.match.pairs
    report_l2 = window.counters.reports[tracks.key].kernels["l2_throughput_pct"].to_numpy()[pairs["ncu_id"].to_numpy()]
    assert np.allclose(k["l2_throughput_pct"].to_numpy()[pairs["timeline_id"].to_numpy()], report_l2)
    # the match report is shown, with the choice of step (the program repeats itself)
    panel = window.ncu_panel
    assert "30 of 30" in panel.match_label.text()
    assert panel.window_bar.isVisibleTo(panel) and panel.window_box.count() == 9
    # a measured kernel's counters in the dock
    measured = int(np.flatnonzero(k["counters"].astype(str) == "measured")[0])
    window.state.set_selection(Selection(tracks.key, "kernels", measured))
    text = panel.body.toPlainText()
    assert "GPU Speed Of Light Throughput" in text and "measured" in text and "Occupancy" in text
    # an inherited one says where its counters come from
    inherited = int(np.flatnonzero(k["counters"].astype(str) == "inherited")[0])
    window.state.set_selection(Selection(tracks.key, "kernels", inherited))
    assert "inherited" in panel.body.toPlainText()
    details = window.details.toPlainText()
    assert "inherited" in details and "#" in details
    # a measured GEMM without tensor FLOP counters: the details say why FLOPs are not compared;
    # an elementwise kernel whose FLOPs the model halves: the details flag the gap
    gemm = [i for i in np.flatnonzero(k["counters"].astype(str) == "measured") if "nvjet" in str(k["name"].iloc[i])][0]
    window.state.set_selection(Selection(tracks.key, "kernels", int(gemm)))
    assert "no tensor FLOP counter" in window.details.toPlainText()
    gaps = [i for i in np.flatnonzero(k["counters"].astype(str) == "measured") if "elementwise" in str(k["name"].iloc[i])]
    window.state.set_selection(Selection(tracks.key, "kernels", int(gaps[0])))
    assert "the model is off by more than 25 %" in window.details.toPlainText()
    # choosing another step re-attaches there
    last = panel.window_box.count() - 1
    panel.window_box.activated.emit(last)
    _wait_attached(qtbot, window)
    assert tracks.counters.match.start == tracks.counters.choices[last].start
    assert tracks.counters.steps[0] == "step_2"


@pytest.mark.samples
def test_report_dropped_on_open_trace_and_menu_attach(qtbot: Any, window: Any, errors: Any, samples: Path, sample_traces: Path) -> None:
    trace = sample_traces / "h200_block2_eager.pt.trace.json.gz"
    window.open_files([str(trace)])
    wait_idle(qtbot, window)
    assert drop_files(window, [samples / "ncu" / "h200_llm_block_eager.raw.csv"])
    _wait_attached(qtbot, window)
    assert not errors.calls
    assert len(window.state.traces) == 1 and window.state.traces[0].counters.matched == 30
    # File › Attach Counter Report… (the dialog's answer given directly)
    window.attach_file(str(sample_traces / "h200_llm_block_eager_full.raw.csv.gz"))
    _wait_attached(qtbot, window)
    tracks = window.state.traces[0]
    assert len(window.state.traces) == 1 and "full" in tracks.counters.report_path
    assert (tracks.trace.kernels["counters"].astype(str) == "measured").sum() == 30


@pytest.mark.samples
def test_report_alone_shows_ncu_sections_and_rules(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    window.open_files([str(samples / "ncu" / "h200_llm_block_eager.ncu-rep")])
    wait_idle(qtbot, window)
    assert len(window.state.traces) == 1
    text = window.ncu_panel.body.toPlainText()
    # the longest kernel is shown without a selection: a GEMM limited by registers and shared memory
    for part in ("GPU Speed Of Light Throughput", "Compute (SM)", "Memory", "Occupancy", "Theoretical", "Achieved",
                 "Launch Statistics", "Memory Workload Analysis", "L2 Hit Rate", "Rule results", "OPT"):
        assert part in text, part
    assert "limited by registers" in text
    # every section the report stored is browsable
    assert "All sections of the report" in text and "Compute Workload Analysis (51 metrics)" in text
    assert window.counters_dock.isVisible()


@pytest.mark.samples
def test_rocprof_counter_run_attaches_to_its_kernel_trace(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    folder = samples / "rocprof" / "rocprofv3_sdk_docs_2024"
    window.open_files([str(folder / "kernel_trace.csv"), str(folder / "counter_collection.csv")])
    _wait_attached(qtbot, window)
    assert not errors.calls
    assert len(window.state.traces) == 1
    tracks = window.state.traces[0]
    assert tracks.counters is not None and tracks.counters.matched == 7
    assert "7 of 7" in window.ncu_panel.match_label.text()


@pytest.mark.samples
def test_report_before_trace_in_one_request_is_adopted(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    """kviewer REPORT TRACE: the report opens first, the timeline of the same request takes it."""
    window.open_files([str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"), str(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz")])
    _wait_attached(qtbot, window)
    assert not errors.calls
    assert len(window.state.traces) == 1 and not window.compare.active and not window.compare.busy
    assert window.state.traces[0].counters.matched == 30


@pytest.mark.samples
def test_two_reports_still_compare(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    """Two counter reports (no timeline): compare mode, as with any two reports."""
    window.open_files([str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"), str(samples / "ncu" / "h200_llm_block_eager.raw.csv")])
    _wait_attached(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    assert len(window.state.traces) == 2 and not errors.calls
    # the Counters dock puts the selected kernel beside its partner, metric by metric
    a = window.state.traces[0]
    window.state.set_selection(Selection(a.key, "kernels", 2))
    text = window.ncu_panel.body.toPlainText()
    assert "Baseline: A #2 vs B #2" in text and ", 0 differ)" in text and "sm__throughput.avg.pct_of_peak_sustained_elapsed" in text


@pytest.mark.samples
def test_unrelated_report_opens_on_its_own(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    window.open_files([str(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz")])
    wait_idle(qtbot, window)
    window.attach_file(str(samples / "ncu" / "manual_nvtx.ncu-rep"))
    _wait_attached(qtbot, window)
    qtbot.waitUntil(lambda: len(window.state.traces) == 2, timeout=20_000)
    assert window.state.traces[0].counters is None and not errors.calls
