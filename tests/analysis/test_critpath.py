"""Critical path: it tiles every step of every sample, its steps match the raw trace, and it
never holds more GPU time than the GPU was busy (checked against the raw Kineto JSON)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.critpath import CLASSES, critical_paths
from kviewer.analysis.depgraph import build_graph, replay
from kviewer.errors import AnalysisError, KViewerError
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
BUNDLED = (sorted(p.name for p in (REPO / "sample_traces").glob("*.pt.trace.json.gz")) + ["h200_llm_train_nvtx.sqlite.gz"]
           + sorted(p.name for p in (REPO / "sample_traces").glob("h100_r8_*_nsys.sqlite.gz")))


def _raw(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


def _check_tiling(path: Path) -> int:
    try:
        res = critical_paths(load(path))
    except AnalysisError:
        return 0
    for s in res.steps:
        assert s.measured_ns > 0
        assert abs(s.critical_path_ns - s.measured_ns) <= 0.01 * s.measured_ns, (path.name, s.name)
        assert sum(s.breakdown.values()) == s.critical_path_ns
        assert set(s.breakdown) == set(CLASSES) and min(s.breakdown.values()) >= 0
        seg = s.segments
        # contiguous, latest first, inside the step
        assert (seg["end"] > seg["start"]).all()
        assert (seg["start"].to_numpy()[:-1] == seg["end"].to_numpy()[1:]).all()
        assert seg["end"].iloc[0] == s.end and seg["start"].iloc[-1] == s.start
    return len(res.steps)


@pytest.mark.parametrize("name", BUNDLED)
def test_path_tiles_every_step_of_every_bundled_sample(sample_traces: Path, name: str) -> None:
    assert _check_tiling(sample_traces / name) > 0


def test_path_tiles_every_step_of_the_shared_samples(samples: Path) -> None:
    files = sorted((samples / "torch").glob("*.json.gz")) + sorted((samples / "nsys").glob("*.sqlite"))
    steps = 0
    for f in files:
        try:
            steps += _check_tiling(f)
        except KViewerError:
            continue  # a file no loader reads fully is another suite's business
    assert steps >= 10


@pytest.mark.parametrize("name", ["h200_llm_block_eager.pt.trace.json.gz", "mlp_sync.pt.trace.json.gz", "block4_compiled.pt.trace.json.gz",
                                  "h200_resnet18_train.pt.trace.json.gz"])
def test_replay_reproduces_every_node(sample_traces: Path, name: str) -> None:
    g = build_graph(load(sample_traces / name))
    r = replay(g)
    assert (r.g_start == g.g_start).all() and (r.g_end == g.g_end).all()
    assert (r.h_start == g.h_start).all() and (r.h_end == g.h_end).all()


def _raw_steps(events: list[dict]) -> tuple[list[str], np.ndarray]:
    """Step windows from the raw JSON: previous completion -> completion, where a step completes
    at the later of its CPU marker's end and the end of the GPU work launched inside it."""
    marks = sorted((e for e in events if e.get("cat") == "user_annotation" and
                    (e["name"].startswith("ProfilerStep#") or e["name"].startswith("step_"))), key=lambda e: e["ts"])
    launch = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    done = []
    for m in marks:
        lo, hi = m["ts"], m["ts"] + m["dur"]
        ends = [g["ts"] + g["dur"] for g in gpu if lo <= launch.get(g["args"].get("correlation"), -1) <= hi]
        done.append(max([hi, *ends]))
    starts = [marks[0]["ts"], *done[:-1]]
    return [m["name"] for m in marks], (np.array(done) - np.array(starts)) * 1000.0


@pytest.mark.parametrize("name", ["h200_llm_block_eager.pt.trace.json.gz", "mlp_eager.pt.trace.json.gz", "block4_compiled.pt.trace.json.gz"])
def test_step_times_match_the_raw_trace(sample_traces: Path, name: str) -> None:
    names, expect = _raw_steps(_raw(sample_traces / name))
    res = critical_paths(load(sample_traces / name))
    assert [s.name for s in res.steps] == names
    got = np.array([s.measured_ns for s in res.steps], dtype=float)
    assert np.allclose(got, expect, atol=5.0)  # microsecond floats with 3 decimals


@pytest.mark.parametrize("name", ["h200_llm_block_eager.pt.trace.json.gz", "mlp_eager.pt.trace.json.gz", "block4_compiled.pt.trace.json.gz",
                                  "mlp_sync.pt.trace.json.gz"])
def test_path_holds_no_more_gpu_time_than_the_gpu_was_busy(sample_traces: Path, name: str) -> None:
    events = _raw(sample_traces / name)
    t = load(sample_traces / name)
    origin = min(e["ts"] for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "cuda_runtime", "cpu_op", "user_annotation"))
    shift = float(t.cpu_slices["start"].min()) / 1000.0 - origin  # the loader's origin, in µs
    iv = sorted(((e["ts"] + shift) * 1000.0, (e["ts"] + e["dur"] + shift) * 1000.0) for e in events
                if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    for s in critical_paths(t).steps:
        busy = 0.0
        cur_s = cur_e = None
        for a, b in iv:
            a, b = max(a, s.start), min(b, s.end)
            if b <= a:
                continue
            if cur_e is None or a > cur_e:
                busy += (cur_e - cur_s) if cur_e is not None else 0.0
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        busy += (cur_e - cur_s) if cur_e is not None else 0.0
        on_gpu = s.breakdown["gpu_kernel"] + s.breakdown["memcpy"] + s.breakdown["comm"]
        assert on_gpu <= busy + 2000, (s.name, on_gpu, busy)


def test_a_host_bound_loop_is_host_time_and_a_gpu_bound_one_kernel_time(sample_traces: Path) -> None:
    # mlp_eager: 58 µs of kernels per 1.2 ms step (truth_eager_graph.json: gpu_busy_us); block4: 3.25 of 3.35 ms
    host = critical_paths(load(sample_traces / "mlp_eager.pt.trace.json.gz")).steps[-1]
    assert (host.breakdown["cpu"] + host.breakdown["launch"]) / host.critical_path_ns > 0.9
    gpu = critical_paths(load(sample_traces / "block4_eager.pt.trace.json.gz")).steps[-1]
    assert gpu.breakdown["gpu_kernel"] / gpu.critical_path_ns > 0.9


def test_blocking_sync_is_on_the_path_inside_the_sync_calls(sample_traces: Path) -> None:
    path = sample_traces / "mlp_sync.pt.trace.json.gz"
    events = _raw(path)
    syncs = [e for e in events if e.get("name") == "cudaStreamSynchronize"]
    assert syncs
    t = load(path)
    res = critical_paths(t)
    calls = t.cpu_slices[t.cpu_slices["name"].astype(str) == "cudaStreamSynchronize"]
    assert len(calls) == len(syncs)
    for s in res.steps:
        seg = s.segments[s.segments["cls"] == CLASSES.index("sync")]
        assert len(seg) and s.breakdown["sync"] > 0
        for a, b in zip(seg["start"], seg["end"]):
            assert ((calls["start"] <= a + 1) & (calls["end"] >= b - 1)).any() or ((calls["start"] <= b) & (calls["end"] >= b)).any()


def test_a_trace_without_launches_is_refused(sample_traces: Path) -> None:
    with pytest.raises(AnalysisError, match="no kernel launch calls"):
        critical_paths(load(sample_traces / "h200_gemms_full.raw.csv.gz"))


def test_named_step_ranges(sample_traces: Path) -> None:
    t = load(sample_traces / "mlp_eager.pt.trace.json.gz")
    res = critical_paths(t, step="ProfilerStep#3")
    assert [s.name for s in res.steps] == ["ProfilerStep#3"] and res.step_source == "named"
    with pytest.raises(AnalysisError, match="no range named"):
        critical_paths(t, step="no such range")


def test_communication_test_agrees_with_the_taxonomy(sample_traces: Path, samples: Path) -> None:
    from kviewer.analysis.kinds import is_communication, name_kind

    names: set[str] = set()
    for f in [sample_traces / "h200_llm_train_nvtx.sqlite.gz", samples / "torch" / "sampled_rank-0.json.gz",
              samples / "torch" / "worker0.1623143089861.pt.trace.json.gz", samples / "torch" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"]:
        try:
            names |= set(load(f).kernels["name"].astype(str))
        except KViewerError:
            continue
    assert any(name_kind(n) == "communication" for n in names)
    for n in names:
        assert is_communication(n) == (name_kind(n) == "communication"), n


def _innermost_one_at_a_time(start: np.ndarray, end: np.ndarray, names: np.ndarray, when: np.ndarray) -> list[str]:
    """The rule as first written: from the last op started, walk back one op at a time (at most 64)
    to the latest-starting one still open."""
    out = []
    for j, w in zip((np.searchsorted(start, when, "right") - 1).tolist(), when.tolist()):
        k = 0
        while j >= 0 and end[j] < w and k < 64:
            j, k = j - 1, k + 1
        out.append(str(names[j]) if j >= 0 and end[j] >= w else "")
    return out


@pytest.mark.parametrize("seed", range(6))
def test_innermost_op_agrees_with_the_walk_one_op_at_a_time(seed: int) -> None:
    """HostOps.innermost finds the run of ended ops by halving steps; it must name the same op as
    the one-at-a-time walk, also where the op still open lies 60-70 ops back (the 64-op bound),
    before the first op, after the last and with fewer ops than one run of 64."""
    from kviewer.analysis.critpath import HostOps

    rng = np.random.default_rng(seed)
    for n_ops in (1, 3, 63, 64, 65, 200, 2000):
        start = np.sort(rng.integers(0, 10_000, n_ops))
        end = start + rng.integers(0, [30, 3_000][seed % 2], n_ops)
        if n_ops > 100:  # one long op with 60-70 short ones after it
            k = n_ops // 2
            end[k] = start[k + int(rng.integers(60, 71))] + 5
        names = np.array([f"op{i}" for i in range(n_ops)], dtype=object)
        ops = HostOps.__new__(HostOps)
        ops.by_thread, ops._maxima = {3: (start, end, np.zeros(n_ops, np.int64), names)}, {}
        when = rng.integers(-10, 14_000, 800)
        threads = np.where(rng.random(800) < 0.9, 3, 4)  # thread 4 has no ops: ''
        got = ops.innermost(threads, when)
        mine = threads == 3
        assert got[mine].tolist() == _innermost_one_at_a_time(start, end, names, when[mine])
        assert set(got[~mine].tolist()) <= {""}
