"""Fusion candidates on the eager and torch.compile'd H200 traces, and on kernels without ops."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.fusion import FUSION_COLUMNS, fusion_candidates, fusion_summary
from kviewer.core import Trace, TraceMeta, make_table


def test_eager_candidates(eager: Trace) -> None:
    c = fusion_candidates(eager)
    assert list(c.columns) == FUSION_COLUMNS
    # o_proj (K = 2048) followed by the residual add
    o_proj = c[c["chain"] == "aten::mm(4096x2048, 2048x2048) → aten::add"]
    assert len(o_proj) == 1
    row = o_proj.iloc[0]
    assert row["kind"] == "gemm+epilogue" and row["count"] == 12 and row["savings_ns"] > 0
    assert row["intermediate"] == "shapes"
    assert row["bytes_saved"] == 2 * 4 * 1024 * 2048 * 2  # the GEMM output no longer written and read back
    # GELU -> *1.0 -> +0.0 (as the epilogue of the up projection)
    gelu = c[c["chain"].str.contains("aten::gelu → aten::mul → aten::add", regex=False)]
    assert len(gelu) == 1 and gelu.iloc[0]["savings_ns"] > 0 and gelu.iloc[0]["count"] == 12
    # ranked by total saving, each instance's kernels listed
    assert (np.diff(c["savings_ns"].to_numpy()) <= 0).all()
    assert all(len(ids) == n for ids, n in zip(c["kernel_ids"], c["count"]))
    assert (c["savings_ns"] < c["measured_ns"]).all()
    assert (c["fused_est_ns"] >= c["fused_sol_ns"]).all()


def test_compiled_saves_less_than_eager(eager: Trace, compiled: Trace) -> None:
    e = fusion_summary(fusion_candidates(eager), eager)
    c = fusion_summary(fusion_candidates(compiled), compiled)
    # torch.compile already fused GELU, mul and add (and add + layer norm): less is left to gain
    assert 0 < c["savings_ns"] < e["savings_ns"]
    assert c["savings_pct"] < e["savings_pct"]
    comp = fusion_candidates(compiled)
    assert not comp["chain"].str.contains("aten::gelu").any()


def _no_op_trace(gap: int = 1000) -> Trace:
    names = [
        "nvjet_sm90_tst_128x128",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
        "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float>",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    ]
    dur = np.array([50_000, 10_000, 12_000, 15_000, 10_000])
    start = np.cumsum(np.r_[0, dur[:-1] + gap])
    nbytes = np.array([3e7, 4.0e7, 2.7e7, 2.7e7, 4.0e7])
    kernels = make_table(
        "kernels",
        5,
        {
            "name": names, "short_name": names, "start": start, "dur": dur, "stream": np.full(5, 7),
            "dram_bytes": nbytes, "flops_fp32": [0, 1e6, 1e6, 4e6, 1e6],
            "sm_throughput_pct": [90, 10, 10, 20, 10], "mem_throughput_pct": [40, 80, 80, 70, 80],
            "tensor_pipe_pct": [85, 0, 0, 0, 0],
        },
    )
    devices = make_table("devices", 1, {"id": [0], "name": np.array(["NVIDIA H100 80GB HBM3"], dtype=object)})
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, devices=devices)


def test_no_chain_without_a_data_dependency() -> None:
    # back-to-back kernels whose ops (and so shapes) are unknown: nothing says the add reads the
    # GEMM's output, so no chain and no invented saving
    assert len(fusion_candidates(_no_op_trace())) == 0


def test_gaps_break_chains() -> None:
    assert len(fusion_candidates(_no_op_trace(gap=1_000_000))) == 0


# -- honesty: data dependency, what is excluded, unknown sizes, the launch floor


def _op_trace(ops: list[tuple[str, str, list[list[int]], list[str]]], gap: int = 1000, dur: int = 200_000) -> Trace:
    """One kernel per op, back to back on one stream: (kernel name, op name, input dims, dtypes)."""
    import json

    import pandas as pd

    n = len(ops)
    names = [o[0] for o in ops]
    start = np.arange(n) * (dur + gap)
    kernels = make_table("kernels", n, {
        "name": names, "short_name": names, "start": start, "dur": np.full(n, dur), "stream": np.full(n, 7),
        "external_id": np.arange(1, n + 1),
    })
    cpu = make_table("cpu_slices", n, {
        "name": np.array([o[1] for o in ops], dtype=object), "category": pd.Categorical(["op"] * n),
        "start": start, "dur": np.full(n, 10), "external_id": np.arange(1, n + 1), "depth": np.zeros(n, dtype=np.int64),
        "input_dims": pd.Categorical([json.dumps(o[2]) for o in ops]),
        "input_types": pd.Categorical([json.dumps(o[3]) for o in ops]),
    })
    devices = make_table("devices", 1, {"id": [0], "name": np.array(["NVIDIA H100 80GB HBM3"], dtype=object)})
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, devices=devices, cpu_slices=cpu)


ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)"
GELU = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>(int)"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"
X = [4096, 4096]


def test_chain_needs_a_data_dependency_and_fused_traffic_is_honest() -> None:
    c = fusion_candidates(_op_trace([(ADD, "aten::add", [X, X], ["float", "float"]), (GELU, "aten::gelu", [X], ["float"])]))
    assert len(c) == 1
    row = c.iloc[0]
    n = 4096 * 4096 * 4
    # add reads 2 tensors and writes 1, gelu reads it back and writes 1: 5 tensors; fused: 2 in, 1 out
    assert row["bytes_saved"] == 2 * n
    assert row["remedy"].startswith("torch.compile") and row["confidence"] == "high"
    assert row["fused_est_ns"] >= 200_000  # never below one launch (the shortest kernel it replaces)
    # the same two kernels, but gelu reads an unrelated tensor: no dependency, no chain
    assert len(fusion_candidates(_op_trace([(ADD, "aten::add", [X, X], ["float", "float"]), (GELU, "aten::gelu", [[17, 3]], ["float"])]))) == 0


def test_fills_communication_and_unknown_sizes() -> None:
    fills = _op_trace([(FILL, "aten::fill_", [X, []], ["float", "Scalar"])] * 10)
    assert len(fusion_candidates(fills)) == 0  # ten fills read nothing: no chain
    nccl = _op_trace([("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "c10d::allreduce_", [X], ["float"]),
                      (ADD, "aten::add", [X, X], ["float", "float"])])
    assert len(fusion_candidates(nccl)) == 0  # communication never joins a chain
    # a member whose work is unknown (no model for the op): the chain is listed, its saving unknown
    unk = fusion_candidates(_op_trace([(ADD, "aten::add", [X, X], ["float", "float"]), (GELU, "aten::special_gelu_thing", [X], ["float"])]))
    assert len(unk) == 1 and np.isnan(unk["savings_ns"].iloc[0]) and np.isnan(unk["fused_est_ns"].iloc[0])
    assert unk["confidence"].iloc[0] == "low"
    assert np.isnan(fusion_summary(unk, _op_trace([(ADD, "aten::add", [X, X], ["float", "float"])]))["savings_ns"])


@pytest.mark.samples
def test_big_train_trace_candidates_are_honest(samples: Path) -> None:
    from kviewer.analysis.sol import speed_of_light
    from tests.analysis.conftest import load_with

    t = load_with("kviewer.io.torch", samples / "torch" / "h200_llm_train_big.pt.trace.json.xz")
    sol = speed_of_light(t)
    c = fusion_candidates(t, sol=sol)
    assert len(c)
    # the 80 foreach kernels of unknown size are no chain; no fill joins one; every saving known is real
    assert not c["chain"].str.contains("_foreach_|fill_").any()
    assert (c["fused_est_ns"].dropna() >= 0.02 * c.loc[c["fused_est_ns"].notna(), "measured_ns"]).all()
    pow_mean = c[c["chain"].str.contains("aten::copy_") & c["chain"].str.contains("aten::pow")]
    for _, row in pow_mean.iterrows():
        ids = [i for inst in row["kernel_ids"] for i in inst]
        moved = sol.set_index("id").loc[ids, "bytes"].sum() / row["count"]
        assert 0 <= row["bytes_saved"] < moved
    # GEMM epilogues are named with their cuBLASLt remedy
    assert c[c["kind"] == "gemm+epilogue"]["remedy"].str.contains("cuBLASLt|torch.compile").all()
    # the cuDNN attention backward's convert helper is a copy with none of its FLOPs; no kernel above 100 %
    conv = sol[sol["name"].str.contains("convert_dq_to_16bits")]
    assert len(conv) and (conv["kind"] == "copy").all() and (conv["flops"].fillna(0) == 0).all()
    assert (sol["sol_pct"].dropna() <= 100).all()


def test_fusion_result_carries_its_candidates_and_kernel_time(eager: Trace) -> None:
    from kviewer.analysis.fusion import FusionResult, fusion
    from kviewer.analysis.sol import sol_result

    result = fusion(eager, sol=sol_result(eager))
    assert isinstance(result, FusionResult)
    expected = fusion_candidates(eager)
    assert result.candidates["chain"].tolist() == expected["chain"].tolist()
    assert result.kernel_ns == float(eager.kernels["dur"].sum())
    assert result.summary() == fusion_summary(expected, eager)


def _two_rank_trace() -> Trace:
    """Two ranks (one GPU each) run the same two steps: an add as the last kernel of step 0, then a
    gelu reading its output as the first kernel of step 1, 1 µs later. Each rank marks its own
    steps (ProfilerStep#0, #1): rank 1's boundary lies elsewhere on the clock than rank 0's. No
    launch call is recorded, so the kernels' own starts place them."""
    import json

    import pandas as pd

    dur, n = 200_000, 4
    rank = np.array([0, 0, 1, 1])
    start = np.array([0, dur + 1000, 50_000, 50_000 + dur + 1000])
    names = [ADD, GELU, ADD, GELU]
    kernels = make_table("kernels", n, {
        "name": names, "short_name": names, "start": start, "dur": np.full(n, dur), "stream": np.full(n, 7),
        "device": rank, "rank": rank, "external_id": np.arange(1, n + 1),
    })
    # the ops (one per kernel), then each rank's two step markers, split between its add and its gelu
    split = start[1::2] - 500
    m_start = np.array([0, split[0], 0, split[1]])
    m_end = np.array([split[0], split[0] + 300_000, split[1], split[1] + 300_000])
    cpu = make_table("cpu_slices", 2 * n, {
        "name": np.array(["aten::add", "aten::gelu"] * 2 + ["ProfilerStep#0", "ProfilerStep#1"] * 2, dtype=object),
        "category": pd.Categorical(["op"] * n + ["annotation"] * n),
        "start": np.concatenate([start, m_start]), "dur": np.concatenate([np.full(n, 10), m_end - m_start]),
        "external_id": np.concatenate([np.arange(1, n + 1), np.full(n, -1)]), "depth": np.zeros(2 * n, dtype=np.int64),
        "rank": np.concatenate([rank, rank]),
        "input_dims": pd.Categorical([json.dumps(d) for d in ([X, X], [X]) * 2] + ["[]"] * n),
        "input_types": pd.Categorical([json.dumps(t) for t in (["float", "float"], ["float"]) * 2] + ["[]"] * n),
    })
    devices = make_table("devices", 2, {"id": [0, 1], "name": np.array(["NVIDIA H100 80GB HBM3"] * 2, dtype=object)})
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, devices=devices, cpu_slices=cpu)


def test_no_chain_across_a_step_boundary_of_any_rank() -> None:
    """Fusion takes every kernel's step from the one step join (steps.marked_steps), each rank's
    kernels against that rank's own markers. Its own rule before put kernels without a recorded
    launch in no step (so this add and gelu chained across the boundary on both ranks); the step
    table is one rank's, so had fusion used it, rank 1's pair would still chain."""
    from kviewer.analysis.steps import find_steps, marked_steps

    t = _two_rank_trace()
    marks, step_of = marked_steps(t, every_rank=True)
    assert marks["rank"].tolist() == [0, 1, 0, 1] and marks["step"].tolist() == [0, 0, 1, 1]
    # kernels by start: rank 0's add, rank 1's add, rank 0's gelu, rank 1's gelu
    assert t.kernels["rank"].tolist() == [0, 1, 0, 1]
    assert [(int(marks["rank"][s]), int(marks["step"][s])) for s in step_of] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    # the step table: rank 0's two steps, one kernel each (rank 1's kernels in none)
    assert find_steps(t, detect=False)["kernel_count"].tolist() == [1, 1]
    assert marked_steps(t)[1].tolist() == [0, -1, 1, -1]
    assert len(fusion_candidates(t)) == 0
    # the same two kernels within one step on every rank: they chain, once per rank
    one = Trace(meta=t.meta, kernels=t.kernels, devices=t.devices,
                cpu_slices=t.cpu_slices[~t.cpu_slices["name"].isin(["ProfilerStep#1"])].reset_index(drop=True))
    c = fusion_candidates(one)
    assert len(c) == 1 and int(c["count"].iloc[0]) == 2


def test_an_idle_gpu_shorter_than_the_chains_work_does_not_end_it() -> None:
    """The GPU idles between two members when the host launches the next one late (the profiled
    host of an eager program): shorter than the work already in the chain, that is no new phase of
    the program and the chain goes on; longer than both that work and ``max_gap_ns``, it ends."""
    ops = [(ADD, "aten::add", [X, X], ["float", "float"]), (GELU, "aten::gelu", [X], ["float"])]
    assert len(fusion_candidates(_op_trace(ops, gap=150_000, dur=200_000))) == 1
    assert len(fusion_candidates(_op_trace(ops, gap=250_000, dur=200_000))) == 0


def _r11(sample_traces: Path, name: str, gpu: str = "h100") -> Trace:
    from kviewer.io import load

    return load(sample_traces / f"{gpu}_r11_{name}.pt.trace.json.gz")


@pytest.mark.parametrize(
    ("prefix", "members", "n_copies"),
    [("attc", ["aten::bmm", "aten::div", "aten::masked_fill_", "aten::_softmax", "aten::bmm"], 4),
     ("attn", ["aten::bmm", "aten::div", "aten::_softmax", "aten::bmm"], 4),
     ("att32", ["aten::bmm", "aten::div", "aten::_softmax", "aten::bmm"], 4),
     # Hugging Face's eager attentions (made after the rules above): GPT-2's torch.where mask, and Llama's
     # grouped-query attention with its softmax in fp32 (a cast to fp32 before it and back after it, members
     # too); Llama's repeat_kv copies of K and V run in the SDPA program as well, and stay
     ("gpt2", ["aten::bmm", "aten::div", "aten::where", "aten::_softmax", "aten::bmm"], 4),
     ("llama", ["aten::bmm", "aten::div", "aten::add", "aten::copy_", "aten::_softmax", "aten::copy_", "aten::bmm"], 2)],
)
@pytest.mark.parametrize("gpu", ["h100", "h200"])  # the same script run again on an H200: not fitted on
def test_unfused_attention_against_sdpa(sample_traces: Path, prefix: str, members: list[str], n_copies: int, gpu: str) -> None:
    """Round 11 (H100, sample_traces/h100_gen_round11.py): four hand-written attention blocks, and the
    same blocks with F.scaled_dot_product_attention. The chain is the whole attention, from QK^T to
    the product with V, although the causal mask is built (a fill, a triu) and V made contiguous
    between its members, and the host launches the masked_fill 180 µs after the GPU finished the
    division. Its estimated saving is checked against what SDPA's kernel saved (the kernel time of
    the chain's members and of the layout copies around them against SDPA's attention kernel, per
    instance, both measured): within 20 %, and the fused kernel never estimated faster than SDPA's.
    The copies are Q, K^T and V made contiguous for the two batched GEMMs and the output's
    transpose for the output projection: the SDPA program runs none of them (SDPA reads Q, K, V
    strided and writes the layout the projection reads), so they go with the chain, and no other
    candidate holds them (the Q and K^T copies chained with each other before)."""
    a, b = _r11(sample_traces, f"{prefix}_manual", gpu), _r11(sample_traces, f"{prefix}_sdpa", gpu)
    c = fusion_candidates(a)
    att = c[c["kind"] == "attention (unfused)"]
    assert len(att) == 1
    row = att.iloc[0]
    assert [p.split("(")[0] for p in row["chain"].split(" → ")] == members
    assert row["count"] == 4 * (2 if prefix == "llama" else 4)  # 4 profiled steps of 4 blocks (Llama: 2)
    assert row["remedy"].startswith("FlashAttention / SDPA")
    ids = [i for inst in row["kernel_ids"] for i in inst]
    assert all(len(inst) == len(members) + n_copies for inst in row["kernel_ids"])
    names_a = a.kernels.set_index("id")["name"].astype(str)
    copies = [i for inst in row["kernel_ids"] for i in inst[len(members):]]
    assert names_a[copies].str.contains("elementwise_kernel").all()  # PyTorch's strided copy
    assert not any(set(ids) & {i for inst in other for i in inst} for other in c[c["kind"] != "attention (unfused)"]["kernel_ids"])
    # SDPA's program runs no copy of the shapes the chain took (Llama's runs its repeat_kv copies, as A does)
    from kviewer.analysis.kinds import classify, kernel_op_info

    row_of = {int(i): r for r, i in enumerate(a.kernels["id"].tolist())}
    dims_a, dims_b = kernel_op_info(a)[1], kernel_op_info(b)[1]
    taken = {str(dims_a[row_of[i]]) for i in copies}
    copies_b = {str(d) for d, kd in zip(dims_b, classify(b)["kind"].astype(str)) if kd == "copy"}
    assert taken and not taken & copies_b
    names = b.kernels["name"].astype(str)
    flash = b.kernels["dur"][names.str.contains("sdpa|fmha", case=False)].to_numpy(np.float64)
    assert len(flash) >= row["count"]
    measured, fused = row["measured_ns"] / row["count"], row["fused_est_ns"] / row["count"]
    true_fused = float(np.median(flash))
    assert fused >= true_fused
    assert abs((measured - fused) - (measured - true_fused)) <= 0.2 * (measured - true_fused)


def test_a_copy_reads_its_source_only() -> None:
    """``copy_(dst, src)`` writes dst without reading it (a cast's fp32 buffer): the chain's
    intermediate is src, and dst's bytes are no external read."""
    from kviewer.analysis.fusion import _links
    from kviewer.analysis.model import overwrites_self

    assert overwrites_self("aten::copy_") and overwrites_self("aten::fill_") and overwrites_self("aten::zero_")
    assert not overwrites_self("aten::add_") and not overwrites_self("aten::copy") and not overwrites_self("aten::clone")
    COPY = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::copy_kernel>>(int)"
    t = _op_trace([(ADD, "aten::add", [X, X], ["float", "float"]), (COPY, "aten::copy_", [X, X], ["c10::BFloat16", "float"])])
    links = _links(t)
    assert links.inputs[1] == [(4096 * 4096, 4096 * 4096 * 4)]  # src alone: fp32
