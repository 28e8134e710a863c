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
