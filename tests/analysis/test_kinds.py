"""The one kernel taxonomy (kviewer.analysis.kinds): a hand-checked table of real kernel names from
every sample, whole-word matching, the signal order (counters > op > name) and the rank-aware
kernel -> op join."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from kviewer.analysis import kinds, matching, model
from kviewer.analysis.kinds import KINDS, classify, kernel_op_rows, name_kind
from kviewer.core import Trace, TraceMeta, make_table

TABLE = Path(__file__).parent / "data" / "kernel_kinds.tsv"


def _table() -> list[tuple[str, str, str]]:
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        kind, sample, name = line.split("\t", 2)
        rows.append((kind, sample, name))
    return rows


def test_table_is_large_and_covers_every_family() -> None:
    rows = _table()
    assert len(rows) >= 200
    names = "\n".join(n for _, _, n in rows)
    for needle in ("nvjet_sm90", "sm90_xmma", "cutlass", "cudnn::fusion::convert_dq_to_16bits", "flash_fwd", "Cijk_",
                   "igemm_fwd_gtcx2", "batched_transpose", "ncclDevKernel", "ncclKernel", "multi_tensor_apply_kernel",
                   "FillFunctor", "reduce_kernel", "triton_poi", "triton_red", "softmax_warp", "scudnn", "rocprim"):
        assert needle in names, needle
    assert {k for k, _, _ in rows} == set(KINDS)  # every kind has real examples
    samples = {s for _, s, _ in rows}
    assert len(samples) >= 25  # taken from (nearly) every sample file


def test_every_real_name_gets_its_hand_checked_kind() -> None:
    wrong = [(want, name_kind(name), name[:100]) for want, _, name in _table() if name_kind(name) != want]
    assert not wrong, wrong


def test_words_not_substrings() -> None:
    # "conv" is not "convert", "norm" in a lambda is not a layer norm, "cat" is not "scatter"...
    assert name_kind("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*)") == "copy"
    assert name_kind("void implicit_convolve_sgemm<float>(int)") == "conv"  # cuDNN: "convolve" is a conv word
    assert name_kind("void my_conv_kernel<float>(float*)") == "conv"
    assert name_kind("void conversation_step()") == "other"
    assert name_kind("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") == "communication"
    assert name_kind("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)") == "fill"
    assert name_kind("void vectorized_blocktiling<128>(int)") == "other"  # "vectorized" says nothing
    assert name_kind("void prefill_cache_kernel()") == "other"  # "prefill" is not "fill"
    assert name_kind("void mempool_release_kernel()") == "other"  # "mempool" is not pooling
    assert name_kind("void madam_kernel()") == "other"


def test_matching_and_model_use_the_one_taxonomy() -> None:
    """What the compare's groups and the model's kernels say a kernel is, through each module's
    own output, equals the hand-checked kind of every real name in the table (a second rule in
    matching or model would disagree somewhere)."""
    rows = _table()
    names = [name for _, _, name in rows]
    n = len(names)
    kernels = make_table("kernels", n, {"name": names, "short_name": names, "start": np.arange(n) * 100, "dur": np.full(n, 50)})
    trace = Trace(meta=TraceMeta(path="kinds.json", source_format="test"), kernels=kernels)
    assert trace.kernels["name"].astype(str).tolist() == names  # the table kept the order
    want = [kind for kind, _, _ in rows]
    groups, group_of = matching.kernel_groups(trace, ops=np.full(n, "", dtype=object))
    by_matching = groups["kind"].to_numpy(dtype=object)[group_of].tolist()
    assert [(w, g, nm[:80]) for w, g, nm in zip(want, by_matching, names) if w != g] == []
    by_model = model.model_kernels(trace)["kind"].tolist()
    assert [(w, g, nm[:80]) for w, g, nm in zip(want, by_model, names) if w != g] == []
    assert matching.KINDS == KINDS == kinds.KINDS


def _two_rank_trace() -> Trace:
    """Two ranks whose External ids collide: each kernel must join its own rank's op."""
    kn = ["nvjet_sm90_tst_256x128", "void cudnn::fusion::convert_dq_to_16bits<true>()",
          "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16", "nvjet_sm90_tst_128x128"]
    kernels = make_table("kernels", 4, {
        "name": kn, "short_name": kn, "start": [0, 100, 200, 0], "dur": [50, 50, 50, 50],
        "rank": [0, 0, 0, 1], "external_id": [7, 8, 8, 7], "flops_tensor": [np.nan, np.nan, np.nan, 1e9],
    })
    ops = make_table("cpu_slices", 4, {
        "name": np.array(["aten::mm", "aten::_cudnn_attention_backward", "aten::add", "aten::mm"], dtype=object),
        "category": pd.Categorical(["op", "op", "op", "op"]), "start": [0, 100, 0, 0], "dur": [10, 10, 10, 10],
        "rank": [0, 0, 1, 1], "external_id": [7, 8, 7, 8], "depth": [0, 0, 0, 0],
    })
    return Trace(meta=TraceMeta(path="t", source_format="test"), kernels=kernels, cpu_slices=ops)


def test_the_join_keeps_ranks_apart_and_the_signals_are_ordered() -> None:
    t = _two_rank_trace()  # (tables are sorted by start: look rows up by name)
    ops = kernel_op_rows(t)
    op_name = {str(n): str(t.cpu_slices["name"].iloc[o]) for n, o in zip(t.kernels["name"], ops)}
    assert op_name["nvjet_sm90_tst_256x128"] == "aten::mm"
    assert op_name["nvjet_sm90_tst_128x128"] == "aten::add"  # rank 1's id 7, not rank 0's aten::mm
    assert op_name["void cudnn::fusion::convert_dq_to_16bits<true>()"] == "aten::_cudnn_attention_backward"
    c = classify(t).assign(name=t.kernels["name"].astype(str).to_numpy()).set_index("name")
    # GEMM by op (and name); the convert under the attention backward is a helper copy
    assert c.loc["nvjet_sm90_tst_256x128", "kind"] == "gemm" and c.loc["nvjet_sm90_tst_256x128", "kind_source"] == "op"
    conv = c.loc["void cudnn::fusion::convert_dq_to_16bits<true>()"]
    assert conv["kind"] == "copy" and conv["helper"] and conv["kind_source"] == "name"
    bprop = c.loc["cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16"]
    assert bprop["kind"] == "attention" and not bprop["helper"]
    # the op says add, but tensor counters fired: matrix arithmetic wins
    assert c.loc["nvjet_sm90_tst_128x128", "kind"] == "gemm" and c.loc["nvjet_sm90_tst_128x128", "kind_source"] == "counters"
    m = model.model_kernels(t).assign(name=t.kernels["name"].astype(str).to_numpy()).set_index("name")
    helper = m.loc["void cudnn::fusion::convert_dq_to_16bits<true>()"]
    assert helper["helper"] and str(helper["model_note"]).startswith("helper kernel") and helper["model_flops"] == 0


def test_a_one_block_kernel_beside_a_wide_sibling_of_its_op_is_a_helper() -> None:
    """Decided on the launch configuration alone: one block beside a sibling of the same op launch of
    at least WIDE_BLOCKS blocks; two narrow kernels, unknown grids and kernels without an op decide
    nothing."""
    import numpy as np
    import pandas as pd

    from kviewer.analysis.kinds import WIDE_BLOCKS, _narrow_beside_wide

    k = pd.DataFrame({
        "grid_x": [1, 2, 1, 1, 1, -1, 1, 1],
        "grid_y": [1, WIDE_BLOCKS // 2, 1, 1, 1, 1, 1, 1],
        "grid_z": [1, 1, 1, 1, 1, 1, 1, 1],
    })
    ops = np.array([7, 7, 8, 8, 9, 9, -1, 10])
    k.loc[3, "grid_x"] = WIDE_BLOCKS - 1  # op 8: one block beside 63: not wide enough
    k.loc[7, "grid_x"] = np.nan  # op 10 alone, unknown
    got = _narrow_beside_wide(k, ops)
    assert got.tolist() == [True, False, False, False, False, False, False, False]


def test_the_enclosing_op_is_the_outermost_named_one_on_the_launching_ops_thread() -> None:
    """``enclosing_op_rows``: the outermost op of the named ones holding a kernel's launching op, on
    that op's thread; the launching op itself counts; an op of the name that has ended, or one on
    another thread at the same time, does not."""
    names = ["aten::instance_norm", "aten::batch_norm", "aten::native_batch_norm",  # thread 1: norm -> bn -> kernel
             "aten::pixel_shuffle", "aten::clone",  # thread 1: the shuffle's own clone
             "aten::group_norm", "aten::native_group_norm",  # nested named ops: the outer one wins
             "aten::instance_norm", "aten::relu",  # an instance_norm that ended before the relu started
             "aten::instance_norm", "aten::mul"]  # thread 2 holds an instance_norm over the same time as thread 1's mul
    start = [0, 10, 20, 100, 110, 200, 210, 300, 400, 500, 500]
    end = [90, 80, 70, 190, 180, 290, 280, 350, 450, 600, 550]
    tid = [1] * 10 + [2]
    tid[9] = 2
    tid[10] = 1
    ops = make_table("cpu_slices", len(names), {
        "name": np.array(names, dtype=object), "category": pd.Categorical(["op"] * len(names)),
        "start": start, "end": end, "dur": np.subtract(end, start), "tid": tid, "pid": [7] * len(names),
        "depth": [0, 1, 2, 0, 1, 0, 1, 0, 0, 0, 0], "external_id": list(range(len(names))),
    })
    t = Trace(meta=TraceMeta(path="t", source_format="test"), cpu_slices=ops)
    c = t.cpu_slices
    row = {(str(n), int(s)): i for i, (n, s) in enumerate(zip(c["name"].astype(str), c["start"]))}
    launching = np.array([row["aten::native_batch_norm", 20], row["aten::clone", 110], row["aten::native_group_norm", 210],
                          row["aten::relu", 400], row["aten::mul", 500], -1], dtype=np.int64)
    got = kinds.enclosing_op_rows(t, launching, kinds.EAGER_NCHW_OPS)
    assert got.tolist() == [row["aten::instance_norm", 0], row["aten::pixel_shuffle", 100], row["aten::group_norm", 200], -1, -1, -1]
    assert (kinds.enclosing_op_rows(t, launching, {"batch_norm"}) == np.array([row["aten::batch_norm", 10], -1, -1, -1, -1, -1])).all()
