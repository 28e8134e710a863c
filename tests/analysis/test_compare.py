"""Comparing real reports: eager vs compiled, H100 vs MI300X, a trace with itself, nsys vs PyTorch.

Totals are checked against numbers computed here straight from the raw files (the profiler's
own durations), not against kviewer's own tables.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.compare import (
    CHANGED,
    DIFF_COLUMNS,
    ONLY_A,
    ONLY_B,
    REPLACED,
    REPLACEMENT,
    UNCHANGED,
    CompareResult,
    compare,
)
from kviewer.core import Trace
from kviewer.io import load

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
BERT = "gaunernst_bert-small-uncased__1016001.json.gz"

_cache: dict[Path, Trace] = {}


def _load(path: Path) -> Trace:
    if path not in _cache:
        _cache[path] = load(path)
    return _cache[path]


def _raw_kernels_by_op(path: Path) -> tuple[dict[str, list[float]], float]:
    """Kernel durations (µs, as the file stores them) per launching cpu_op, read with json."""
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    op_of = {e["args"]["External id"]: e["name"] for e in events if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    per_op: dict[str, list[float]] = defaultdict(list)
    total = 0.0
    for e in events:
        if e.get("cat") == "kernel":
            per_op[op_of.get(e["args"].get("External id"), "")].append(e["dur"])
            total += e["dur"]
    return per_op, total


@pytest.fixture(scope="module")
def eager_vs_compiled(sample_traces: Path) -> CompareResult:
    return compare(_load(sample_traces / EAGER), _load(sample_traces / COMPILED))


@pytest.fixture(scope="module")
def h100_vs_mi300(samples: Path) -> CompareResult:
    return compare(_load(samples / "torch" / "tracelens_h100" / BERT), _load(samples / "torch" / "tracelens_mi300" / BERT))


# ---------------------------------------------------------------------------------------------
# eager vs torch.compile


def test_eager_vs_compiled_deltas_add_up_exactly(eager_vs_compiled: CompareResult, sample_traces: Path) -> None:
    r = eager_vs_compiled
    g = r.groups
    assert list(g.columns) == DIFF_COLUMNS
    assert int(g["delta_ns"].sum()) == r.total_b_ns - r.total_a_ns
    assert g["delta_ns"].dtype == np.int64
    # and the totals are the files' own kernel durations (µs floats; rounding within 1 ns a kernel)
    _, raw_a = _raw_kernels_by_op(sample_traces / EAGER)
    _, raw_b = _raw_kernels_by_op(sample_traces / COMPILED)
    assert abs(r.total_a_ns - raw_a * 1000) <= 144
    assert abs(r.total_b_ns - raw_b * 1000) <= 99
    # largest |delta| first
    d = np.abs(g["delta_ns"].to_numpy())
    assert (d[:-1] >= d[1:]).all()


def test_eager_elementwise_replaced_by_triton_fused_kernels(eager_vs_compiled: CompareResult) -> None:
    g = eager_vs_compiled.groups
    eager_side = g[g["count_b"] == 0]
    compiled_side = g[g["count_a"] == 0]
    # every eager elementwise / layer-norm group is reported replaced, by Triton kernels
    assert set(eager_side["op"]) == {"aten::add", "aten::mul", "aten::gelu", "aten::native_layer_norm"}
    assert (eager_side["status"] == REPLACED).all()
    assert eager_side["replaced_by"].str.contains("triton_").all()
    gelu = eager_side[eager_side["op"] == "aten::gelu"].iloc[0]
    assert "triton_poi_fused__unsafe_view_add_gelu_mul" in gelu["replaced_by"]
    ln = eager_side[eager_side["op"] == "aten::native_layer_norm"].iloc[0]
    assert "layer_norm" in ln["replaced_by"] and "gelu" not in ln["replaced_by"]
    # every Triton kernel is a replacement for eager groups, and only Triton kernels are
    assert compiled_side["name_b"].str.startswith("triton_").all()
    assert (compiled_side["status"] == REPLACEMENT).all() and (compiled_side["replaces"] != "").all()
    assert not (g["status"].isin([ONLY_A, ONLY_B])).any()
    # the fusion set sums the replaced and replacing kernels as one honest comparison
    f = eager_vs_compiled.fusion
    assert len(f) == 1
    assert f["total_a_ns"].iloc[0] == eager_side["total_a_ns"].sum()
    assert f["total_b_ns"].iloc[0] == compiled_side["total_b_ns"].sum()


def test_eager_vs_compiled_gemms_and_attention_matched(eager_vs_compiled: CompareResult) -> None:
    g = eager_vs_compiled.groups
    matched = g[g["status"].isin([CHANGED, UNCHANGED])]
    assert set(matched["op"]) == {"aten::mm", "aten::_cudnn_attention_forward"}
    gemm = matched[matched["op"] == "aten::mm"].iloc[0]
    assert gemm["kind"] == "gemm" and gemm["matched_by"] == "name+op+launch"
    assert gemm["count_a"] == gemm["count_b"] == 48
    # the same cuBLAS kernel on the same shapes: well within noise
    assert gemm["status"] == UNCHANGED


def test_eager_vs_compiled_per_op(eager_vs_compiled: CompareResult, sample_traces: Path) -> None:
    ops = eager_vs_compiled.ops
    assert ops is not None
    assert int(ops["delta_ns"].sum()) == eager_vs_compiled.delta_ns
    by = ops.set_index("op")
    assert by.loc["aten::mm", "status"] in (CHANGED, UNCHANGED)
    for op in ("aten::add", "aten::mul", "aten::gelu", "aten::native_layer_norm"):
        assert by.loc[op, "status"] == REPLACED
    raw, _ = _raw_kernels_by_op(sample_traces / EAGER)
    for op, durs in raw.items():
        assert by.loc[op, "count_a"] == len(durs)
        assert abs(by.loc[op, "total_a_ns"] - sum(durs) * 1000) <= len(durs)


def test_eager_vs_compiled_steps_and_alignment(eager_vs_compiled: CompareResult) -> None:
    r = eager_vs_compiled
    assert list(r.steps["step_a"]) == list(r.steps["step_b"]) == ["step_0", "step_1", "step_2"]
    # every kernel of the trace runs inside one of the three record_function steps
    assert r.steps["kernel_count_a"].sum() == 144 and r.steps["kernel_count_b"].sum() == 99
    assert (r.steps["delta_ns"] < 0).all()  # compiled steps are shorter on the GPU
    assert r.align_basis == "first step"
    assert int(r.steps_b["start"].iloc[0]) + r.align_offset_ns == int(r.steps_a["start"].iloc[0])
    totals = r.totals.set_index("metric")
    assert totals.loc["kernel time", "a"] == r.total_a_ns
    assert totals.loc["kernel count", "b"] == 99
    assert totals.loc["steps", "a"] == 3


# ---------------------------------------------------------------------------------------------
# the same model on an H100 and an MI300X


def test_h100_vs_mi300_gemms_matched_through_their_op(h100_vs_mi300: CompareResult) -> None:
    g = h100_vs_mi300.groups
    assert h100_vs_mi300.use_ops
    gemm = g[(g["kind"] == "gemm")]
    # one row per GEMM shape: the cuBLAS kernel of a shape meets the hipBLASLt kernel of that shape
    assert len(gemm) == 4 and (gemm["op"] == "aten::addmm").all() and (gemm["matched_by"] == "kind+op+shapes").all()
    assert (gemm["count_a"] == gemm["count_b"]).all() and gemm["count_a"].sum() == 26
    assert (gemm["precision_a"] == "bf16").all() and (gemm["precision_b"] == "bf16").all()
    for _, row in gemm.iterrows():
        assert "cutlass" in row["name_a"] or "xmma" in row["name_a"]
        assert row["name_b"].startswith("Cijk_")
    att = g[g["op"] == "aten::_flash_attention_forward"].iloc[0]
    assert att["kind"] == "attention" and att["name_b"] == "attn_fwd" and "flash_fwd_kernel" in att["name_a"]
    # one model, one set of ops: everything has a counterpart on the other vendor
    assert g["status"].isin([CHANGED, UNCHANGED]).all()
    assert int(g["delta_ns"].sum()) == h100_vs_mi300.delta_ns


def test_h100_vs_mi300_per_op_comparison(h100_vs_mi300: CompareResult, samples: Path) -> None:
    ops = h100_vs_mi300.ops
    assert ops is not None
    raw_a, _ = _raw_kernels_by_op(samples / "torch" / "tracelens_h100" / BERT)
    raw_b, _ = _raw_kernels_by_op(samples / "torch" / "tracelens_mi300" / BERT)
    assert set(ops["op"]) == set(raw_a) == set(raw_b)
    by = ops.set_index("op")
    for op in raw_a:
        assert by.loc[op, "count_a"] == len(raw_a[op]) and by.loc[op, "count_b"] == len(raw_b[op])
        assert abs(by.loc[op, "total_a_ns"] - sum(raw_a[op]) * 1000) <= len(raw_a[op])
        assert abs(by.loc[op, "total_b_ns"] - sum(raw_b[op]) * 1000) <= len(raw_b[op])
    assert by.loc["aten::addmm", "name_b"].startswith("Cijk_")
    assert int(ops["delta_ns"].sum()) == h100_vs_mi300.delta_ns


# ---------------------------------------------------------------------------------------------
# a trace with itself


@pytest.mark.parametrize(
    "where, name",
    [
        ("bundled", EAGER),
        ("bundled", COMPILED),
        ("bundled", "h200_llm_train_nvtx.sqlite.gz"),
        ("torch", "tracelens_mi300/" + BERT),
        ("torch", "benchmark_result_493459_1694039959_trace.json.gz"),
    ],
)
def test_trace_compared_with_itself(where: str, name: str, sample_traces: Path, request: pytest.FixtureRequest) -> None:
    path = sample_traces / name if where == "bundled" else request.getfixturevalue("samples") / where / name
    t = _load(path)
    r = compare(t, t)
    assert len(r.groups) > 0
    assert (r.groups["status"] == UNCHANGED).all()
    assert (r.groups["delta_ns"] == 0).all() and (r.groups["count_a"] == r.groups["count_b"]).all()
    assert r.align_offset_ns == 0 and r.slower_pct == 0.0
    assert (r.totals["delta"] == 0).all()
    if r.ops is not None:
        assert (r.ops["status"] == UNCHANGED).all() and (r.ops["delta_ns"] == 0).all()
    assert np.array_equal(r.row_of_kernel_a, r.row_of_kernel_b)


# ---------------------------------------------------------------------------------------------
# across tools: an Nsight Systems export and a PyTorch trace of the same workload


def test_nsys_vs_pytorch_trace_of_one_workload(sample_traces: Path, samples: Path) -> None:
    a = _load(sample_traces / "h200_llm_train_nvtx.sqlite.gz")
    b = _load(samples / "torch" / "h200_llm_train_big.pt.trace.json.xz")
    r = compare(a, b)
    assert not r.use_ops  # the nsys export has no framework ops: match on names
    g = r.groups
    # every kernel the PyTorch trace ran has its counterpart in the nsys export, matched by name
    assert (g["count_a"] == 0).sum() == 0
    matched = g[g["status"].isin([CHANGED, UNCHANGED])]
    assert matched["total_b_ns"].sum() == r.total_b_ns
    assert set(matched["matched_by"]) == {"name+launch"}
    # what only nsys saw (set-up before the loop: weight init) is a sliver of its kernel time
    assert g.loc[g["status"] == ONLY_A, "total_a_ns"].sum() < 0.001 * r.total_a_ns
    gemm = g[g["name"].str.startswith("nvjet_")]
    assert len(gemm) >= 3 and (gemm["matched_by"] == "name+launch").all()
    # 60 NVTX steps against 120 profiler steps, each running the same 214 kernels
    assert len(r.steps_a) == 60 and len(r.steps_b) == 120
    assert (r.steps["kernel_count_a"] == r.steps["kernel_count_b"]).all()
    assert int(g["delta_ns"].sum()) == r.delta_ns


def test_compiled_vs_eager_mirrors_the_relation(sample_traces: Path) -> None:
    r = compare(_load(sample_traces / COMPILED), _load(sample_traces / EAGER))
    g = r.groups
    fused = g[g["count_b"] == 0]  # only in A: the compiled model's Triton kernels
    unfused = g[g["count_a"] == 0]
    assert fused["name_a"].str.startswith("triton_").all()
    # A's fused kernels are replaced by B's separate elementwise kernels, which are the replacement
    assert (fused["status"] == REPLACED).all() and (unfused["status"] == REPLACEMENT).all()
    assert set(unfused["op"]) == {"aten::add", "aten::mul", "aten::gelu", "aten::native_layer_norm"}
    f = r.fusion.iloc[0]
    assert f["total_a_ns"] == fused["total_a_ns"].sum() and f["total_b_ns"] == unfused["total_b_ns"].sum()
    assert f["delta_ns"] > 0  # eager does the same work slower
    assert int(g["delta_ns"].sum()) == r.delta_ns


def test_one_run_in_two_rocprof_formats(samples: Path) -> None:
    # rocprof v1 writes the same dispatches as CSV and as its SQLite DB: nothing may differ
    folder = samples / "rocprof" / "gunrock_mi300"
    r = compare(_load(folder / "results.csv"), _load(folder / "results.db"))
    assert len(r.groups) > 0 and (r.groups["status"] == UNCHANGED).all() and (r.groups["delta_ns"] == 0).all()


def test_every_launch_beyond_the_other_sides_is_changed_whatever_one_outlier_does(samples: Path) -> None:
    """BERT-small's relu GEMM on an H100 (4 launches, 6.0-6.3 µs) and an MI300X (7.1-7.4 µs and one
    at 12.1 µs): the outlier widens B's spread until +38 % sits inside 2 std, but every B launch is
    slower than every A launch (a rank test at full separation, 4 against 4: p = 0.029)."""
    from kviewer.analysis.compare import CHANGED, NoiseModel, compare
    from kviewer.io import load

    pa = samples / "torch" / "tracelens_h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    pb = samples / "torch" / "tracelens_mi300" / "gaunernst_bert-small-uncased__1016001.json.gz"
    a, b = load(pa, use_cache=False), load(pb, use_cache=False)
    r = compare(a, b)
    g = r.groups
    row = int(np.flatnonzero(g["name"].str.contains("s16816gemm_relu").to_numpy())[0])
    ia, ib = r.kernels_of_row(row)
    da, db = a.kernels["dur"].to_numpy()[ia], b.kernels["dur"].to_numpy()[ib]
    assert len(da) == len(db) == 4 and db.min() > da.max()
    assert abs(g.at[row, "delta_ns"]) <= g.at[row, "noise_ns"]  # inside the spread rule ...
    assert g.at[row, "status"] == CHANGED  # ... and changed by the separation
    # the exact test's threshold: 3 against 3 (p = 0.1) is not enough, 4 against 4 (p = 0.029) is
    nm = NoiseModel()
    assert not nm.separated(3, 3) and nm.separated(4, 4) and nm.separated(2, 8) and not nm.separated(1, 20)
    # a row whose launches overlap stays with the spread rule: none of the other unchanged rows moved
    plain = compare(a, b, noise=NoiseModel(alpha=0.0))
    moved = (plain.groups.set_index("name")["status"] != g.set_index("name")["status"])
    assert moved[moved].index.tolist() == [g.at[row, "name"]]
