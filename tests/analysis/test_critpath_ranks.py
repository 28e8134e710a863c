"""Critical paths and what-ifs across ranks: a collective on one rank waits for the same collective
on the others (issue 24), checked on small 2-rank Kineto traces written here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.collectives import match_collectives
from kviewer.analysis.critpath import critical_paths
from kviewer.analysis.depgraph import build_graph, replay
from kviewer.analysis.whatif import Changes, whatif_model
from kviewer.io import load

STEPS = 5
EXTRA = 200  # µs of extra work on the straggler


def _rank_trace(rank: int, extra: int, seq: bool = True, base_ns: int = 1_700_000_000_000_000_000, n_steps: int = STEPS,
                collective: str = "allreduce", late_extra: int = EXTRA, recorded: bool = True) -> dict:
    """One rank of a DDP-like loop: a GEMM, (rank 1: extra work), an all-reduce, a device sync.

    Rank 0's all-reduce starts early and ends 20 µs after rank 1's starts (the transfer once both
    joined): the times every rank would record on one host."""
    ev: list[dict] = []
    corr = [100]
    pid, tid = 1000 + rank, 1000 + rank

    def launch(ts: float, name: str, start: float, dur: float, args: dict | None = None) -> None:
        c = corr[0]
        corr[0] += 1
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid, "ts": ts, "dur": 4,
                   "args": {"correlation": c, "External id": c}})
        ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": start, "dur": dur,
                   "args": {"correlation": c, "External id": c, "device": 0, "stream": 7, **(args or {})}})

    T = 0
    for k in range(n_steps):
        marker = len(ev)
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}", "pid": pid, "tid": tid, "ts": T, "dur": 0, "args": {}})
        launch(T + 5, "gemm_model_kernel", T + 10, 100)
        g_end = T + 110
        if extra:
            launch(T + 12, "straggler_extra_kernel", T + 111, extra)
            g_end = T + 111 + extra
        mine = g_end + 1
        # the all-reduce ends 20 µs after the later rank joined (rank 1 joins at T+112+late_extra)
        late = T + 112 + late_extra
        end = max(mine, late) + 20
        args = {"Collective name": collective, "Process Group Name": "0", "Process Group Ranks": "[0, 1]", "Group size": 2}
        if seq:
            args["Seq"] = k
        if not recorded:  # as Nsight Systems sees it: the kernel name alone
            args = {}
        launch(T + 20, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", mine, end - mine, args)
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": pid, "tid": tid, "ts": T + 30,
                   "dur": end + 5 - (T + 30), "args": {}})
        ev[marker]["dur"] = end + 8 - T
        T = end + 10
    return {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 2},
            "baseTimeNanoseconds": base_ns, "traceEvents": ev}


def _write(folder: Path, docs: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for r, d in enumerate(docs):
        (folder / f"rank-{r}.pt.trace.json").write_text(json.dumps(d))
    return folder


@pytest.fixture
def straggler(tmp_path: Path) -> Path:
    return _write(tmp_path / "straggler", [_rank_trace(0, 0), _rank_trace(1, EXTRA)])


def test_collectives_match_by_sequence_number_and_by_order(tmp_path: Path, straggler: Path) -> None:
    t = load(straggler, use_cache=False)
    m = match_collectives(t)
    assert m.by == "seq" and m.n_groups == STEPS and not m.diagnostics
    k = t.kernels
    grp = m.group[m.group >= 0]
    assert len(grp) == 2 * STEPS and set(np.bincount(grp)) == {2}
    assert set(k["rank"].to_numpy()[m.group >= 0]) == {0, 1}
    # without sequence numbers: by their order on the process group
    t2 = load(_write(tmp_path / "noseq", [_rank_trace(0, 0, seq=False), _rank_trace(1, EXTRA, seq=False)]), use_cache=False)
    m2 = match_collectives(t2)
    assert m2.by == "order" and m2.n_groups == STEPS
    assert (m2.group >= 0).sum() == 2 * STEPS
    # nothing recorded but the NCCL kernel name: the collective from the name, then by order
    t3 = load(_write(tmp_path / "bare", [_rank_trace(0, 0, recorded=False), _rank_trace(1, EXTRA, recorded=False)]), use_cache=False)
    m3 = match_collectives(t3)
    assert m3.by == "order" and m3.n_groups == STEPS and not m3.diagnostics


def test_the_path_crosses_to_the_straggler_and_its_work_is_on_top(straggler: Path) -> None:
    t = load(straggler, use_cache=False)
    res = critical_paths(t)
    assert len(res.steps) == STEPS
    for s in res.steps[1:]:  # the first step's window starts at its marker
        assert abs(s.critical_path_ns - s.measured_ns) <= 0.01 * s.measured_ns
        # the straggler's extra kernel is the costliest operation, on rank 1
        top = s.top[0]
        assert top["name"] == "straggler_extra_kernel" and top["rank"] == 1 and top["kind"] == "gpu_kernel"
        assert s.breakdown["gpu_kernel"] >= (EXTRA + 100) * 1000 * 0.99
        # the all-reduce on the path is only the transfer after rank 1 joined: 20 µs
        assert s.breakdown["comm"] == pytest.approx(20_000, abs=2_000)
        # rank 0 waited about EXTRA µs for rank 1 in its all-reduce: comm_wait, off the path
        assert s.comm_wait.get(0, 0) == pytest.approx(EXTRA * 1000 + 1000, rel=0.02)
        assert 1 not in s.comm_wait
        assert "comm_wait" in s.as_dict()


def test_replay_reproduces_the_measured_run_with_collective_edges(straggler: Path) -> None:
    t = load(straggler, use_cache=False)
    g = build_graph(t)
    assert g.n_collectives == STEPS
    rep = replay(g)
    assert np.array_equal(rep.g_start, g.g_start) and np.array_equal(rep.g_end, g.g_end)
    assert np.array_equal(rep.h_start, g.h_start) and np.array_equal(rep.h_end, g.h_end)


def test_whatif_on_the_straggler_shortens_every_ranks_step(tmp_path: Path, straggler: Path) -> None:
    t = load(straggler, use_cache=False)
    model = whatif_model(t)
    proj = model.project(Changes(kernel=(("straggler_extra_kernel", 0.0),)))
    balanced = load(_write(tmp_path / "balanced", [_rank_trace(0, 0, late_extra=0), _rank_trace(1, 0, late_extra=0)]), use_cache=False)
    truth = whatif_model(balanced).project(Changes())
    # rank 0 did no extra work, yet its steps get shorter by the extra work of rank 1
    assert proj.median_projected_ns < proj.median_measured_ns - 0.8 * EXTRA * 1000
    assert proj.median_projected_ns == pytest.approx(truth.median_measured_ns, rel=0.05)
    # half as long: half the saving
    half = model.project(Changes(kernel=(("straggler_extra_kernel", 0.5),)))
    assert half.median_projected_ns == pytest.approx(proj.median_measured_ns - EXTRA * 500, rel=0.05)


def test_ranks_of_different_jobs_get_no_collective_edges(tmp_path: Path) -> None:
    # the same rank layout, but rank 1 ran ten seconds later: no collective overlaps its peer
    folder = _write(tmp_path / "two_jobs", [_rank_trace(0, 0), _rank_trace(1, EXTRA, base_ns=1_700_000_010_000_000_000)])
    t = load(folder, use_cache=False)
    m = match_collectives(t)
    assert m.n_groups == 0 and (m.group < 0).all()
    assert [d.kind for d in m.diagnostics] == ["unmatched_collectives"]
    g = build_graph(t)
    assert g.n_collectives == 0 and [d.kind for d in g.notes] == ["unmatched_collectives"]
    # ... and different numbers of them without sequence numbers: no guess either
    folder = _write(tmp_path / "counts", [_rank_trace(0, 0, seq=False), _rank_trace(1, EXTRA, seq=False, n_steps=STEPS - 1)])
    m = match_collectives(load(folder, use_cache=False))
    assert m.n_groups == 0 and [d.kind for d in m.diagnostics] == ["unmatched_collectives"]


def test_one_rank_has_no_collective_edges(straggler: Path) -> None:
    t = load(straggler / "rank-0.pt.trace.json", use_cache=False)
    m = match_collectives(t)
    assert m.n_groups == 0 and not m.diagnostics
