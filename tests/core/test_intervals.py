"""One nesting-depth rule (core/intervals.py) for every loader and the timeline: on
``[0,10), [5,15)`` the second interval is one level below the first everywhere, and no two
intervals of one level on a track overlap."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kviewer.core import Trace, TraceMeta
from kviewer.core.intervals import nesting_depth
from kviewer.core.schema import make_table
from kviewer.io import load


def stack_walk(start: list[int], end: list[int], track: list[int]) -> list[int]:
    """The rule, one interval at a time: per track in (start, longest first) order, pop what
    ended by this start; the depth is what is left open."""
    order = sorted(range(len(start)), key=lambda i: (track[i], start[i], -end[i]))
    depth = [0] * len(start)
    stack: list[int] = []
    current = None
    for i in order:
        if track[i] != current:
            stack, current = [], track[i]
        while stack and stack[-1] <= start[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


def test_a_partial_overlap_goes_one_level_down() -> None:
    assert nesting_depth(np.array([0, 5]), np.array([10, 15])).tolist() == [0, 1]
    assert nesting_depth(np.array([5, 0]), np.array([15, 10]), np.array([3, 3])).tolist() == [1, 0]
    assert nesting_depth(np.array([0, 5]), np.array([10, 15]), np.array([1, 2])).tolist() == [0, 0]  # two tracks
    assert nesting_depth(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_random_intervals_follow_the_stack_walk_and_never_overlap_on_a_level() -> None:
    rng = np.random.default_rng(11)
    for trial in range(800):
        n = int(rng.integers(1, 60))
        track = rng.integers(0, 3, n)
        start = rng.integers(0, 50, n)
        end = start + rng.integers(0, 25, n)  # zero-length, nested, equal and partly overlapping
        got = nesting_depth(start, end, track)
        assert got.tolist() == stack_walk(start.tolist(), end.tolist(), track.tolist()), trial
        for t in np.unique(track):
            for d in np.unique(got[track == t]):
                sel = (track == t) & (got == d)
                order = np.argsort(start[sel], kind="stable")
                s, e = start[sel][order], end[sel][order]
                assert (s[1:] >= e[:-1]).all(), (trial, t, d)


def test_every_loader_and_the_timeline_use_the_one_rule() -> None:
    import kviewer.io.nsys
    import kviewer.io.rocprof.v3_csv
    import kviewer.io.rocprof.v3_json
    import kviewer.io.torch.columns
    import kviewer.session.tracks

    for module in (kviewer.io.nsys, kviewer.io.rocprof.v3_csv, kviewer.io.rocprof.v3_json, kviewer.io.torch.columns,
                   kviewer.session.tracks):
        assert module.nesting_depth is nesting_depth, module.__name__  # type: ignore[attr-defined]


def test_torch_loader_and_timeline_lanes_put_a_partial_overlap_one_level_down(tmp_path: Path) -> None:
    from kviewer.session.tracks import TraceTracks

    doc = {"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
    ]}  # fmt: skip
    path = tmp_path / "overlap.json"
    path.write_text(json.dumps(doc))
    trace = load(path, use_cache=False)
    c = trace.cpu_slices
    assert dict(zip(c["name"].astype(str), c["depth"].tolist())) == {"a": 0, "b": 1}
    # the timeline: two lanes for the thread's calls, a above b
    cpu = make_table("cpu_slices", 2, {"name": ["a", "b"], "start": np.array([0, 5]), "end": np.array([10, 15]),
                                       "category": ["cpu_op"] * 2, "pid": np.ones(2), "tid": np.ones(2)})
    tracks = TraceTracks.build(Trace(meta=TraceMeta(path="x.json", source_format="test"), cpu_slices=cpu))
    lanes = {ln.label: ln.ids.tolist() for ln in tracks.lanes}
    assert lanes == {"calls · depth 1": [0], "calls · depth 2": [1]}


def test_rocprof_api_calls_put_a_partial_overlap_one_level_down(tmp_path: Path, samples: Path) -> None:
    """A rocprofv3 HIP API trace (written here) beside the real 2025 kernel trace."""
    shutil.copy(samples / "rocprof/rocprofv3_2025/ps_file_kernel_trace.csv", tmp_path)
    t0 = 1986623975868304
    api = ['"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"',
           f'"HIP_RUNTIME_API","hipMalloc",7,7,1,{t0},{t0 + 10}',
           f'"HIP_RUNTIME_API","hipFree",7,7,2,{t0 + 5},{t0 + 15}']
    (tmp_path / "ps_file_hip_api_trace.csv").write_text("\n".join(api) + "\n")
    c = load(tmp_path, use_cache=False).cpu_slices
    assert dict(zip(c["name"].astype(str), c["depth"].tolist())) == {"hipMalloc": 0, "hipFree": 1}


def test_long_runs_of_partial_overlaps_follow_the_stack_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs long and tangled enough for many rounds of pointer jumping (and, with no rounds
    allowed, the one-at-a-time walk it falls back to) give the stack walk's depths."""
    import kviewer.core.intervals as intervals

    rng = np.random.default_rng(29)
    for trial in range(40):
        n = int(rng.integers(200, 3000))
        track = rng.integers(0, 2, n)
        start = np.sort(rng.integers(0, n * 3, n))
        end = start + rng.pareto(1.2, n).astype(np.int64) * int(rng.integers(1, 8)) + rng.integers(0, 3, n)
        want = stack_walk(start.tolist(), end.tolist(), track.tolist())
        assert nesting_depth(start, end, track).tolist() == want, trial
        if trial < 5:
            monkeypatch.setattr(intervals, "_ROUNDS", 0)
            assert nesting_depth(start, end, track).tolist() == want, trial
            monkeypatch.undo()


def test_real_traces_follow_the_stack_walk(samples: Path) -> None:
    """The CPU slices of real traces (Kineto, Nsight Systems) nest as the one-at-a-time walk says."""
    for name in ("torch/h200_llm_block_compiled.pt.trace.json.gz", "nsys/h200_llm_train_nvtx.sqlite"):
        c = load(samples / name, use_cache=False).cpu_slices
        start, end = c["start"].to_numpy(), c["end"].to_numpy()
        track = (c["pid"].astype(np.int64).to_numpy() * (1 << 32) + c["tid"].astype(np.int64).to_numpy()).tolist()
        got = nesting_depth(start, end, np.asarray(track))
        assert got.tolist() == stack_walk(start.tolist(), end.tolist(), track), name
        assert len(c) > 1000, name
