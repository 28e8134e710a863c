"""Sampled GPU metrics in the window (real export: 4 GPT training steps on an H200, nsys
--gpu-metrics-devices=all): the Range dock's GPU metrics tab equals the command line (and so SQL,
tests/analysis/test_gpu_metrics_real.py), the lane menu shows and hides metric tracks, the
tracks are painted, and a rocprof --stats file shows its summary instead of lanes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PySide6.QtGui import QImage

from kviewer.session.tracks import CounterTrack, Group, TraceTracks, metric_tracks_of


@pytest.fixture(scope="module")
def gm_path(sample_traces: Path) -> Path:
    p = sample_traces / "gpt_train_gpu_metrics.sqlite.gz"
    if not p.exists():
        pytest.skip(f"{p} is not there")
    return p


@pytest.fixture(scope="module")
def gm(gm_path: Path) -> Any:
    from kviewer.io import load

    return load(gm_path, use_cache=False)


def gpu_group(tracks: TraceTracks) -> Group:
    return next(g for g in tracks.root.children if isinstance(g, Group) and g.label.startswith("GPU 0"))


def test_range_tab_equals_the_command_line(qtbot: Any, window: Any, gm: Any, gm_path: Path, capsys: Any) -> None:
    from kviewer.cli import main

    tracks = TraceTracks.build(gm)
    window.state.add_trace(tracks)
    window.state.set_time_selection((10e6, 20e6))
    panel = window.range_panel
    qtbot.waitUntil(lambda: panel.summary is not None, timeout=10_000)
    ours = panel.summary.gpu_metrics
    assert ours is not None and len(ours) == 22
    model = panel.models["gpu_metrics"]
    assert model.rowCount() == 22
    capsys.readouterr()
    assert main(["summary", str(gm_path), "--range", "10ms:20ms", "--format", "json", "-q"]) == 0
    cli = pd.DataFrame(json.loads(capsys.readouterr().out)["gpu_metrics"])
    pd.testing.assert_frame_equal(cli[list(ours.columns)].astype(ours.dtypes.to_dict()), ours.reset_index(drop=True), check_exact=False, rtol=1e-12)


def test_lane_menu_shows_and_hides_metrics(qtbot: Any, window: Any, gm: Any) -> None:
    tracks = TraceTracks.build(gm)
    window.state.add_trace(tracks)
    tl = window.timeline
    g = gpu_group(tracks)
    header = next(r for r in tl.rows if r.kind == "header" and r.group is g)
    menu = tl.row_menu(header)
    sub = next(a.menu() for a in menu.actions() if a.text() == "GPU Metrics")
    acts = {a.text(): a for a in sub.actions()}
    assert len(sub.actions()) == len(acts) == 22  # a quantity in several units is labelled with its unit
    assert "Compute Warps in Flight [Avg Warps per Cycle]" in acts
    assert acts["SMs Active"].isChecked() and not acts["PCIe RX Throughput"].isChecked()
    shown = lambda label: any(r.kind == "counter" and r.counter is not None and r.counter.label == label for r in tl.rows)  # noqa: E731
    assert shown("SMs Active") and not shown("PCIe RX Throughput")
    acts["PCIe RX Throughput"].trigger()  # out of the closed group, beside the others
    assert shown("PCIe RX Throughput")
    assert [t.label for t, is_open in metric_tracks_of(g) if is_open][-1] == "PCIe RX Throughput"
    acts["SMs Active"].trigger()  # hidden
    assert not shown("SMs Active")


def test_metric_tracks_are_painted(qtbot: Any, window: Any, gm: Any) -> None:
    tracks = TraceTracks.build(gm)
    window.state.add_trace(tracks)
    tl = window.timeline
    tl.set_range(0.0, float(tracks.span[1]))
    qtbot.wait(50)
    row = next(r for r in tl.rows if r.kind == "counter" and isinstance(r.counter, CounterTrack) and r.counter.label == "SMs Active")
    frame = tl.item.frame(*tl.vb.viewRange()[0], tl.vb.viewRange()[1][0], tl.vb.width(), tl.vb.height())
    kinds = {k for k, _ in frame.counters}
    assert {"gpu_metric", "gpu_metric_max"} <= kinds
    img = tl.canvas.viewport().grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    # the metric colour (brown) appears on the canvas
    arr = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)
    brown = (np.abs(arr[..., 2].astype(int) - 150) < 8) & (np.abs(arr[..., 1].astype(int) - 80) < 8) & (np.abs(arr[..., 0].astype(int) - 20) < 8)
    assert brown.sum() > 50
    assert row is not None


def test_stats_file_shows_its_summary(qtbot: Any, window: Any, samples: Path) -> None:
    from kviewer.io import load

    trace = load(samples / "rocprof/hpctraining_finite_difference/results.stats.csv", use_cache=False)
    window.state.add_trace(TraceTracks.build(trace))
    qtbot.wait(20)
    table = window.table
    assert table.model.rowCount() == 4 and table.mode_box.currentText() == "Grouped by name"
    assert any(r.group is not None and r.group.note == trace.meta.timeline_needs for r in window.timeline.rows)
