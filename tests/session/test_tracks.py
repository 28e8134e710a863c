"""Timeline tracks built from real traces: lane structure, nesting, SOL colouring on load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.core.intervals import nesting_depth
from kviewer.session.tracks import Group, TraceTracks


def test_nesting_depth() -> None:
    start = np.array([0, 0, 10, 12, 30, 40, 41], dtype=np.int64)
    end = np.array([100, 50, 20, 15, 35, 60, 45], dtype=np.int64)
    # [0,100) holds [0,50) (same start, shorter) which holds [10,20) > [12,15), [30,35);
    # [40,60) starts inside [0,50) and ends after it: nested anyway; [41,45) inside it
    assert nesting_depth(start, end).tolist() == [0, 1, 2, 3, 2, 2, 3]


@pytest.fixture(scope="module")
def eager(sample_traces: Path) -> Any:
    from kviewer.io import load

    return load(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")


def test_cpu_lanes_never_overlap_and_python_is_its_own_group(eager: Any) -> None:
    tracks = TraceTracks.build(eager)
    c = eager.cpu_slices
    for lane in tracks.lanes:
        raw = lane.lod.raw
        # bars of one lane never overlap: they really are one nesting level
        assert np.all(raw.start[1:] >= raw.end[:-1]), lane.label
    main = next(g for g in tracks.root.children if isinstance(g, Group) and any(isinstance(x, Group) for x in g.children))
    py = next(x for x in main.children if isinstance(x, Group))
    assert py.label.startswith("python stack") and py.collapsed and not main.collapsed
    py_ids = np.concatenate([lane.ids for lane in py.lanes()])
    assert set(c["category"].astype(str).to_numpy()[py_ids]) == {"python"}
    # every slice has exactly one bar
    assert (tracks.lane_of["cpu_slices"] >= 0).all()
    # (NVTX ranges projected onto a GPU are drawn there too, but their home is their thread)
    assert sum(len(lane.ids) for lane in tracks.lanes if lane.table == "cpu_slices" and not lane.projected) == len(c)


def test_loading_colours_kernels_by_sol_bound(eager: Any) -> None:
    from kviewer.analysis.sol import speed_of_light
    from kviewer.core.schema import KERNELS
    from kviewer.session import colors
    from kviewer.session.analyses import sol_for_load

    info = sol_for_load(eager)
    assert info is not None and info.sol is not None
    sol = speed_of_light(eager)
    assert np.array_equal(info.sol["bound"].to_numpy(), sol["bound"].to_numpy())
    assert list(eager.kernels.columns) == KERNELS.names  # the loaded trace itself is not changed
    tracks = TraceTracks.build(eager, sol=info)
    assert tracks.trace is eager
    assert np.array_equal(tracks.sol_column("bound"), sol["bound"].to_numpy())
    lane = next(lane for lane in tracks.lanes if lane.table == "kernels")
    mine = lane.of_table("kernels")  # a stream lane holds its copies too
    family = lane.lod.raw.colour[mine] // colors.SHADES
    bound = sol["bound"].astype(str).to_numpy()[lane.ids[mine]]
    assert np.all(family[bound == "memory"] == colors.FAMILY_INDEX["kernel_memory"])
    assert np.all(family[bound == "compute"] == colors.FAMILY_INDEX["kernel_compute"])
    assert np.isfinite(lane.inner).any()


def test_unknown_gpu_opens_uncoloured_with_a_warning(samples: Path) -> None:
    from kviewer.io import load
    from kviewer.session.analyses import sol_for_load

    trace = load(samples / "rocprof/hpctraining_finite_difference/results.csv")
    info = sol_for_load(trace)
    assert info is not None and not info.ok
    assert TraceTracks.build(trace, sol=info).sol_column("bound") is None
    assert [w.kind for w in trace.meta.warnings].count("unknown_device") == 1


def _cpu(rows: list[tuple[str, str, int, int, int, int]]) -> Any:
    """cpu_slices from (name, category, pid, tid, start, end)."""
    from kviewer.core import make_table

    n = len(rows)
    return make_table("cpu_slices", n, {"name": [r[0] for r in rows], "category": [r[1] for r in rows],
                                        "pid": np.array([r[2] for r in rows]), "tid": np.array([r[3] for r in rows]),
                                        "start": np.array([r[4] for r in rows]), "end": np.array([r[5] for r in rows])})


def test_lane_names_say_the_nesting_depth() -> None:
    from kviewer.core import Trace, TraceMeta

    # four nested calls on one thread, one lone range on another
    rows = [("a", "cpu_op", 1, 1, 0, 100), ("b", "cpu_op", 1, 1, 10, 90), ("c", "cpu_op", 1, 1, 20, 80),
            ("d", "cpu_op", 1, 1, 30, 70), ("r", "annotation", 1, 2, 0, 50)]
    tracks = TraceTracks.build(Trace(meta=TraceMeta(path="x.json", source_format="test"), cpu_slices=_cpu(rows)))
    labels = [ln.label for ln in tracks.lanes]
    assert labels == ["calls · depth 1", "calls · depth 2", "calls · depth 3", "calls · depth 4", "ranges"]


def test_gpu_annotation_streams_share_one_closed_group() -> None:
    from kviewer.core import Trace, TraceMeta

    rows = [("main", "cpu_op", 1, 11, 0, 100)]
    rows += [(f"copy{s}", "gpu_annotation", 0, 20 + s, 10 * s, 10 * s + 5) for s in range(14)]
    tracks = TraceTracks.build(Trace(meta=TraceMeta(path="x.json", source_format="test"), cpu_slices=_cpu(rows)))
    tops = [c.label for c in tracks.root.children]
    assert tops == ["CPU pid 1 · tid 11", "GPU annotations · 14 streams"]
    ann = tracks.root.children[1]
    assert isinstance(ann, Group) and ann.collapsed and len(ann.children) == 14
    assert ann.children[0].label == "GPU 0 · stream 20 annotations"
    # a single annotated stream keeps its own group, no wrapper
    one = TraceTracks.build(Trace(meta=TraceMeta(path="y.json", source_format="test"), cpu_slices=_cpu(rows[:2])))
    assert [c.label for c in one.root.children] == ["CPU pid 1 · tid 11", "GPU 0 · stream 20 annotations"]


def test_idle_is_shaded_on_streams_that_run_kernels_only() -> None:
    from kviewer.core import Trace, TraceMeta, make_table

    kernels = make_table("kernels", 3, {"name": ["k"] * 3, "short_name": ["k"] * 3, "start": np.array([0, 1000, 5000]),
                                        "dur": np.full(3, 100), "device": np.zeros(3), "stream": np.array([7, 7, 9])})
    ops = make_table("gpu_ops", 4, {"kind": ["memcpy"] * 4, "start": np.array([0, 100_000, 300, 9_000_000]),
                                    "end": np.array([50, 100_050, 350, 9_000_050]), "device": np.zeros(4),
                                    "stream": np.array([20, 20, 9, 21])})
    tracks = TraceTracks.build(Trace(meta=TraceMeta(path="x.json", source_format="test"), kernels=kernels, gpu_ops=ops))
    shaded = {ln.label: ln.shows_idle for ln in tracks.lanes}
    # stream 9 mixes a kernel and a copy: it computes; 20 and 21 only copy (gloo's copy streams)
    assert shaded == {"stream 7": True, "stream 9": True, "stream 20": False, "stream 21": False}
