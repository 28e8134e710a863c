"""What the profiler recorded, in the window: graph-launch lanes, memory counter rows, the kernel
table grouped by CUDA graph, and a timeline picture of both (real H200 traces in sample_traces)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from kviewer.io import load
from kviewer.session.tracks import CounterTrack, TraceTracks

REPO = Path(__file__).resolve().parents[2]
ST = REPO / "sample_traces"


def _items(tracks: TraceTracks) -> list:
    out = []

    def walk(g) -> None:  # noqa: ANN001
        for c in g.children:
            out.append(c)
            if hasattr(c, "children"):
                walk(c)

    walk(tracks.root)
    return out


def test_memory_counter_rows_peak() -> None:
    path = ST / "gpt_train_memory.pt.trace.json.gz"
    with gzip.open(path, "rt") as f:
        raw = [e["args"] for e in json.load(f)["traceEvents"] if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1]
    tracks = TraceTracks.build(load(path))
    counters = [c for c in _items(tracks) if isinstance(c, CounterTrack) and c.kind == "memory"]
    assert [c.label.split(" (")[0] for c in counters] == ["memory allocated", "memory reserved"]
    alloc, res = counters
    assert alloc.counter.peak == max(a["Total Allocated"] for a in raw) == alloc.scale
    assert res.counter.peak == max(a["Total Reserved"] for a in raw)
    # the peak is marked at the first event that reached it (trace clock)
    trace = tracks.trace
    m = trace.memory[trace.memory["device"] == 0]
    first_peak = int(m["start"].to_numpy()[int(np.argmax(m["total_allocated"].to_numpy()))])
    assert alloc.mark_ns == first_peak
    # the value after the last event holds to the end of the trace (a step counter, not a spike)
    assert alloc.counter.v[-2] == raw[-1]["Total Allocated"]


def test_graph_launch_lane_and_table(qtbot) -> None:  # noqa: ANN001
    from kviewer.session.graph_table import NOT_IN_GRAPH
    from kviewer.ui.kernel_table import GRAPHS, KernelTableModel

    trace = load(ST / "mlp_graph.pt.trace.json.gz")
    tracks = TraceTracks.build(trace)
    groups = [c for c in _items(tracks) if getattr(c, "label", "").startswith("CUDA graph launches")]
    assert len(groups) == 1 and groups[0].collapsed  # folded: the launches are the summary
    lane, kernels_lane = groups[0].children
    assert groups[0].first_lane() is lane
    # expanded: the kernels the launches ran
    assert sorted(kernels_lane.ids.tolist()) == np.flatnonzero(trace.kernels["graph_launch"].to_numpy() >= 0).tolist()
    g = trace.graph_launches
    assert len(lane.ids) == len(g) and lane.projected
    assert set(trace.cpu_slices["name"].astype(str).to_numpy()[lane.ids]) == {"cudaGraphLaunch"}
    # each bar is drawn at its launch's GPU span
    assert np.array_equal(np.sort(lane.lod.raw.start), np.sort(g["start"].to_numpy()))

    model = KernelTableModel()
    model.set_traces([tracks], GRAPHS)
    assert model.rowCount() == len(np.unique(g["graph_id"])) + int((trace.kernels["graph_launch"] < 0).any())
    members = [model.selection_for_row(r)[2] for r in range(model.rowCount())]
    assert sum(len(m) for m in members) == len(trace.kernels)  # every kernel in exactly one row
    labels = model.data_.column("graph").categories
    assert NOT_IN_GRAPH in labels or (trace.kernels["graph_launch"] >= 0).all()


def test_timeline_picture_with_graphs_and_memory(tmp_path: Path) -> None:
    for name in ("mlp_graph.pt.trace.json.gz", "gpt_train_memory.pt.trace.json.gz"):
        out = tmp_path / (name + ".png")
        r = subprocess.run([sys.executable, "-m", "kviewer", "screenshot", str(ST / name), "-o", str(out), "--view", "timeline",
                            "--size", "1000x700"], capture_output=True, text=True, cwd=REPO, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(REPO), "QT_QPA_PLATFORM": "offscreen"})
        assert r.returncode == 0, r.stderr
        assert out.stat().st_size > 1000


def test_memory_dock_lists_the_peak(window, qtbot) -> None:  # noqa: ANN001
    from kviewer.analysis.memory import memory_summary
    from tests.ui.conftest import wait_idle

    path = ST / "gpt_train_memory.pt.trace.json.gz"
    window.memory_dock.raise_()  # the dock computes while on screen
    window.open_files([str(path)])
    wait_idle(qtbot, window)
    panel = window.memory_panel
    qtbot.waitUntil(lambda: panel.result is not None and "computing" not in panel.status.text(), timeout=20_000)
    (dev,) = memory_summary(load(path)).devices
    assert panel.model.rowCount() == len(dev.live_at_peak)
    assert list(panel.rows["bytes"]) == [a.bytes for a in dev.live_at_peak]  # largest first
    assert "948.34 MB" in panel.status.text()
    panel._on_row(panel.model.index(0, 0))
    sel = window.state.time_selection
    assert sel is not None and sel[1] > sel[0]


def test_call_tree_dock_click_selects_frame_and_kernels(window, qtbot) -> None:  # noqa: ANN001
    from kviewer.analysis.calltree import launched_kernels
    from tests.ui.conftest import wait_idle

    path = ST / "gpt_train_memory.pt.trace.json.gz"
    window.flame_dock.raise_()  # the dock computes while on screen
    window.open_files([str(path)])
    wait_idle(qtbot, window)
    panel = window.flame_panel
    qtbot.waitUntil(lambda: panel.thread_rows is not None and "computing" not in panel.status.text(), timeout=20_000)
    tree = panel.tree
    # the deepest frame that launched kernels: choosing it selects it and highlights its kernels
    trace = window.state.current.trace
    cand = [i for i in np.argsort(-tree.depth).tolist()[:400] if len(launched_kernels(trace, int(tree.ids[i])))]
    assert cand
    i = cand[0]
    panel.choose(i)
    sel = window.state.selection
    assert sel is not None and sel.table == "cpu_slices" and sel.row == int(tree.ids[i])
    key = window.state.current.key
    assert np.array_equal(np.flatnonzero(window.state.highlight[key]), launched_kernels(trace, int(tree.ids[i])))
    t0, t1 = window.state.time_selection
    assert t1 - t0 == tree.inclusive_ns[i]
    panel.icicle.repaint()
