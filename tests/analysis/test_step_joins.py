"""Which step a kernel belongs to, and the precision a step's MFU is measured against, checked against
the raw trace JSON of a GPU-bound program (round 10's fp32 GroupNorm blocks on an H100, NCHW: cuDNN runs
the fp32 convolutions in TF32; the host runs ahead of the GPU, and the profiler starts while kernels the
warm-up step launched are still queued)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.analysis.critpath import critical_paths, step_windows
from kviewer.analysis.depgraph import build_graph
from kviewer.analysis.kinds import precision_pipe
from kviewer.analysis.mfu import mfu, steps_in_range
from kviewer.analysis.steps import find_steps, steps_of_gpu_ops
from kviewer.cli import main
from kviewer.io import load
from tests.analysis.device_table import raw_value

GN32 = "h100_r10_clgn32_nchw.pt.trace.json.gz"


def _raw(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return events


def _launched_per_step(events: list[dict[str, Any]]) -> tuple[list[int], int]:
    """Kernels whose launch call (same correlation id) started inside each ProfilerStep range, and
    the kernels whose launch the trace does not hold, counted from the JSON alone."""
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                   if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    counts = [0] * len(steps)
    orphans = 0
    for e in events:
        if e.get("cat") != "kernel":
            continue
        t = launches.get(e["args"].get("correlation"))
        if t is None:
            orphans += 1
            continue
        for i, (a, b) in enumerate(steps):
            if a <= t <= b:
                counts[i] += 1
    return counts, orphans


def test_kernels_queued_before_the_trace_belong_to_no_step(sample_traces: Path) -> None:
    """The trace opens with 43 kernels the warm-up step launched before the profiler started (no
    launch call recorded); they run through the first two steps' host ranges. They were counted by
    their own start: step 2 held 108 kernels and step 3 85 against 76 each, so their GPU spans read
    5.9 and 8.1 ms against 3.8 ms and their MFU 10.6 % and 7.8 % against 16.5 %. By stream order
    they ran work queued before the first recorded launch, so no step holds them."""
    path = sample_traces / GN32
    counts, orphans = _launched_per_step(_raw(path))
    assert orphans == 43 and counts == [76, 76, 76, 76]
    t = load(path)
    steps = find_steps(t)
    assert steps["kernel_count"].tolist() == counts
    span = steps["gpu_span"].to_numpy(np.float64)
    assert span.max() < 1.01 * span.min()
    # the critical path's step windows use the same join: each holds the same GPU ops
    graph = build_graph(t)
    windows, _ = step_windows(t, graph)
    kernels = [int((graph.g_table[w.gpu] == 0).sum()) for w in windows]
    assert kernels == counts


def test_an_unrecorded_launch_takes_the_step_of_the_op_before_it_on_its_stream() -> None:
    """Unit rules of the one join (steps.steps_of_gpu_ops), on hand-made ops: two steps [0, 100],
    [200, 300]; stream 0 has every launch recorded but one, stream 1 none, stream 2 starts with ops
    queued before its first recorded launch."""
    s, e = np.array([0, 200]), np.array([100, 300])
    #            launched in step 0 | unrecorded, after it | launched in step 1 | stream 1: by start | queued | recorded
    launch = np.array([10, -1, 210, -1, -1, -1, 20])
    linked = np.array([True, False, True, False, False, False, True])
    start = np.array([150, 400, 500, 250, 50, 60, 70])
    stream = np.array([0, 0, 0, 1, 2, 2, 2])
    got = steps_of_gpu_ops(s, e, launch, linked, start, stream)
    assert got.tolist() == [0, 0, 1, 1, -1, -1, 0]
    # ranges on the GPU: every op by its own start, inside a range or in none
    on_gpu = steps_of_gpu_ops(s, e, launch, linked, start, stream, on_gpu=True)
    assert on_gpu.tolist() == [-1, -1, -1, 1, 0, 0, 0]
    # no launch recorded anywhere: the step begun last before the op's start (the rule kept for such traces)
    none = steps_of_gpu_ops(s, e, launch, np.zeros(7, dtype=bool), start, stream)
    assert none.tolist() == [0, 1, 1, 1, 0, 0, 0]


def test_fp32_convolutions_cudnn_runs_in_tf32_are_measured_against_the_tf32_peak(sample_traces: Path) -> None:
    """cuDNN's ``sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_...`` multiplies fp32 tensors on the
    tensor cores in TF32. The op's dtype (float) made them fp32 against the FP32 vector rate (67
    TFLOP/s on an H100 SXM): 502 % of the speed of light, so no SOL, and steps 4-5 at 122 % of the
    peak, shown as unknown. Against the TF32 peak every step reads the same MFU, from the
    convolutions' FLOPs counted here from the raw shapes."""
    assert precision_pipe("conv", op="fp32", name="sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc")[:2] == ("tf32", "tensor")
    assert precision_pipe("gemm", op="fp32", name="ampere_sgemm_128x64_nn")[:2] == ("fp32", "tensor")
    assert precision_pipe("elementwise", op="fp32", name="tf32_looking_but_vector")[:2] == ("fp32", "vector")
    assert precision_pipe("gemm", op="bf16", name="sm90_xmma_gemm_tf32")[:2] == ("bf16", "tensor")
    path = sample_traces / GN32
    events = _raw(path)
    conv = 0.0
    for ev in events:
        if ev.get("name") == "aten::cudnn_convolution":
            (n, c, h, w), (k, _, r, q) = ev["args"]["Input Dims"][:2]
            conv += 2.0 * n * k * c * r * q * h * w  # stride 1, same padding: the output is h x w
    per_step = conv / 4
    peak = raw_value("h100_sxm", "tf32_tflops") * 1e12
    steps = mfu(load(path)).steps
    assert (steps["precision"] == "tf32").all()
    flops = steps["model_flops"].to_numpy(np.float64)
    assert np.all(np.abs(flops - per_step) <= 0.01 * per_step)  # the convolutions are all but 0.5 % of the work
    got = steps["mfu"].to_numpy(np.float64)
    want = flops / (peak * steps["step_ns"].to_numpy(np.float64) * 1e-9)
    assert np.allclose(got, want) and np.all((got > 0.16) & (got < 0.17))


def test_the_critical_path_says_how_much_of_a_step_ran_work_queued_before_the_trace(sample_traces: Path,
                                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The first step's measured time (from its marker to its completion) is 5.96 ms against 3.82 ms for
    the others: its kernels wait behind the 48 GPU ops queued before the profiler started (2.13 ms of
    work by the raw JSON). The path says how much of it ran such work, the other steps none."""
    path = sample_traces / GN32
    events = _raw(path)
    launched = {e["args"]["correlation"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    queued = [e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy") and e["args"].get("correlation") not in launched]
    queued_ns = sum(e["dur"] for e in queued) * 1000
    steps = critical_paths(load(path)).steps
    first = steps[0]
    # the path starts at the step's marker, after the first queued op had begun: a little less than all of it
    assert 0.95 * queued_ns <= first.unlaunched_ns <= queued_ns
    assert first.as_dict()["unlaunched_ns"] == first.unlaunched_ns
    assert all(s.unlaunched_ns == 0 and "unlaunched_ns" not in s.as_dict() for s in steps[1:])
    assert first.measured_ns - first.unlaunched_ns == pytest.approx(steps[1].measured_ns, rel=0.02)
    assert main(["critpath", str(path), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert f"{steps[0].name}: 2.07" in out and "whose launch the trace does not hold" in out


def test_a_range_holds_a_step_whole_only_with_its_gpu_work(sample_traces: Path) -> None:
    """The Range dock's MFU line counts the steps whole inside the selected range. A GPU-bound step's
    kernels run past its marker: step 2's window (its marker's start to its last kernel's end, 5.96 ms)
    holds the markers of steps 2-4, and was read as "3 whole steps (2-4)" at 11.4 ms of step time.
    A step is whole inside when its GPU work is too (``gpu_end``, checked here against the raw JSON)."""
    path = sample_traces / GN32
    events = _raw(path)
    steps_raw = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                       if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#"))
    launches = {e["args"]["correlation"]: e["ts"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    last_end = [max(e["ts"] + e["dur"] for e in events if e.get("cat") == "kernel" and a <= launches.get(e["args"].get("correlation"), -1) <= b)
                for a, b in steps_raw]
    res = mfu(load(path))
    st = res.steps
    # the last kernel's end after the marker's start, as the raw JSON has it (µs, to the ns)
    got = (st["gpu_end"] - st["start"]).to_numpy(np.float64)
    want = np.array([(e - a) * 1000 for e, (a, _) in zip(last_end, steps_raw)])
    assert np.allclose(got, want, atol=2.0)
    assert (st["gpu_end"] > st["end"]).all()  # bound by the GPU: every step's kernels outlast its marker
    t0, t1 = int(st["start"].iloc[0]), int(st["gpu_end"].iloc[0])
    one = steps_in_range(res, t0, t1)
    assert one is not None and one["step_list"] == [2] and one["last_end"] == t1
    every = steps_in_range(res, t0, int(st["gpu_end"].max()))
    assert every is not None and every["step_list"] == [2, 3, 4, 5]
    assert steps_in_range(res, t0, int(st["end"].iloc[0])) is None  # the marker alone: its kernels still run


CNN = "h100_r7_cnn_eager.pt.trace.json.gz"


def _two_ranks(sample_traces: Path, tmp_path: Path, shift_ns: int) -> Path:
    """The CNN trace as rank 0, and again as rank 1 whose clock reads ``shift_ns`` later (another
    host's clock, or a rank that reached the step later)."""
    from tests.io.test_ranks import write_rank

    doc = json.loads(gzip.decompress((sample_traces / CNN).read_bytes()))
    folder = tmp_path / "ranks"
    write_rank(folder, "rank-0.pt.trace.json", doc, 0, world=2)
    write_rank(folder, "rank-1.pt.trace.json", doc, 1, world=2, base_shift_ns=shift_ns)
    return folder


def test_each_ranks_kernels_join_its_own_ranks_step(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a folder of ranks, a kernel of rank 1 belongs to rank 1's step N, not to the step rank 0
    happened to be in when it ran: with rank 1's clock 1 ms (about 40 % of a step) later, every
    rank's steps hold exactly the kernels the single trace's steps hold, and compare's per-step
    columns are the two ranks' sum."""
    from kviewer.analysis.compare import compare
    from kviewer.analysis.steps import kernel_steps
    from kviewer.io import ranks

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    single = load(sample_traces / CNN, use_cache=False)
    per_step = find_steps(single)["kernel_count"].tolist()
    assert per_step == [44, 44, 44, 44]
    folder = _two_ranks(sample_traces, tmp_path, 1_000_000)
    t = load(folder, use_cache=False)
    steps = find_steps(t)
    assert steps["kernel_count"].tolist() == per_step  # the step table is the first rank's
    of = kernel_steps(t, steps)
    rank = t.kernels["rank"].to_numpy()
    for r in (0, 1):
        assert np.bincount(of[(rank == r) & (of >= 0)], minlength=len(steps)).tolist() == per_step, r
    # the same kernel of each rank in the same step: names per step agree rank by rank
    names = t.kernels["name"].astype(str).to_numpy()
    for i in range(len(steps)):
        assert sorted(names[(rank == 0) & (of == i)]) == sorted(names[(rank == 1) & (of == i)])
    res = compare(single, t)
    assert res.per_step
    g = res.groups
    both = g["launches_per_step_a"] > 0
    assert np.allclose(g.loc[both, "launches_per_step_b"], 2 * g.loc[both, "launches_per_step_a"])
    assert np.allclose(g.loc[both, "step_b_ns"], 2 * g.loc[both, "step_a_ns"])
    assert any("A holds the kernels of 1 rank and B of 2" in n for n in res.notes)
    assert not any("rank" in n for n in compare(t, t).notes)


def test_compare_names_the_precision_the_convolution_computes_in(sample_traces: Path) -> None:
    """cuDNN's fp32 convolutions run in TF32: compare's precision (from the op's dtypes, with ops)
    says tf32 for them, as the speed of light does and as the kernel name does without ops."""
    from kviewer.analysis.compare import compare
    from kviewer.analysis.kinds import kernel_precisions
    from kviewer.analysis.sol import sol_result

    t = load(sample_traces / GN32, use_cache=False)
    sol = sol_result(t).table
    conv = (sol["kind"] == "conv").to_numpy()
    assert conv.sum() > 0 and set(sol.loc[conv, "precision"]) == {"tf32"}
    with_ops = kernel_precisions(t, use_ops=True)
    assert set(with_ops[conv]) == {"tf32"}
    assert with_ops[conv].tolist() == kernel_precisions(t, use_ops=False)[conv].tolist()
    assert set(with_ops[~conv]) <= {"fp32", ""}  # the other kernels keep their op's dtype
    res = compare(t, t)
    assert res.use_ops
    rows = res.groups[res.groups["kind"] == "conv"]
    assert len(rows) and set(rows["precision_a"]) == {"tf32"} and set(rows["precision_b"]) == {"tf32"}


GLOO = "h100_ranks_gloo"


@pytest.mark.parametrize("variant", ["balanced", "straggler"])
def test_real_ranks_each_kernel_in_its_own_ranks_step(sample_traces: Path, variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two real ranks (gloo, one H100): every rank's kernels per step equal what its own JSON says
    (kernels whose launch call started inside that rank's ProfilerStep#N, by correlation id). Rank 0's
    time ranges put one of rank 1's kernels of the balanced run in no step (42/42/41/42)."""
    from kviewer.analysis.steps import kernel_steps
    from kviewer.io import ranks

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    folder = sample_traces / GLOO / variant
    t = load(folder, use_cache=False)
    steps = find_steps(t)
    of = kernel_steps(t, steps)
    rank = t.kernels["rank"].to_numpy()
    for r in (0, 1):
        want, orphans = _launched_per_step(_raw(folder / f"rank-{r}.pt.trace.json.gz"))
        assert len(want) == len(steps) == 4
        got = np.bincount(of[(rank == r) & (of >= 0)], minlength=len(steps)).tolist()
        assert got == want, (r, got, want)
        assert int(((rank == r) & (of < 0)).sum()) == orphans
    assert {r: sum(_launched_per_step(_raw(folder / f"rank-{r}.pt.trace.json.gz"))[0]) for r in (0, 1)} == (
        {0: 168, 1: 168} if variant == "balanced" else {0: 168, 1: 200})


def test_host_collectives_on_the_critical_path_are_communication(sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gloo all-reduces on the host (its own threads): the path's time inside `gloo:all_reduce` is
    `comm`, not `cpu`, and the breakdown still tiles every step."""
    from kviewer.analysis.kinds import op_kind
    from kviewer.io import ranks

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    t = load(sample_traces / GLOO / "balanced", use_cache=False)
    res = critical_paths(t)
    assert len(res.steps) == 4
    for s in res.steps:
        assert s.critical_path_ns == s.measured_ns
        assert sum(s.breakdown.values()) == s.critical_path_ns
        tops = {x["name"]: x["kind"] for x in s.top}
        assert tops.get("gloo:all_reduce") == "comm"
        assert s.breakdown["comm"] >= 0.2 * s.measured_ns  # about a third of each step here
        assert all(k != "cpu" or op_kind(n) != "communication" for n, k in tops.items())
    # a view is not a collective: aten::broadcast_tensors was taken for c10d's broadcast
    assert op_kind("aten::broadcast_tensors") == "" and op_kind("aten::broadcast_to") == ""
    assert op_kind("c10d::broadcast_") == op_kind("gloo:all_reduce") == op_kind("nccl:all_reduce") == "communication"
