"""Compare pairs like with like (issue 26): never across precisions, op-less kernels by their
order within the steps, and per step when both files have steps."""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.analysis.compare import CHANGED, ONLY_A, ONLY_B, UNCHANGED, compare
from kviewer.analysis.kinds import kernel_op_rows, op_dtypes_precision, precision_from_name
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.io import load

BERT = "gaunernst_bert-small-uncased__1016001.json.gz"


def _copies(spec: list[tuple[str, int]], path: str) -> Trace:
    """Kernels launched by aten::copy_ ops; spec: (dst dtype, duration ns) per launch, the source fp32."""
    n = len(spec)
    k = make_table("kernels", n, {
        "name": ["void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>(int)"] * n,
        "start": np.arange(n, dtype=np.int64) * 10_000, "dur": np.asarray([d for _, d in spec], dtype=np.int64),
        "external_id": np.arange(n, dtype=np.int64) + 1, "correlation": np.arange(n, dtype=np.int64) + 1,
        "grid_x": [64] * n, "grid_y": [1] * n, "grid_z": [1] * n, "block_x": [128] * n, "block_y": [1] * n, "block_z": [1] * n,
    })  # fmt: skip
    c = make_table("cpu_slices", n, {
        "name": ["aten::copy_"] * n, "category": ["op"] * n, "start": np.arange(n, dtype=np.int64) * 10_000 - 5000,
        "end": np.arange(n, dtype=np.int64) * 10_000 - 1000, "external_id": np.arange(n, dtype=np.int64) + 1,
        "pid": [1] * n, "tid": [1] * n, "depth": [0] * n,
        "input_types": [json.dumps([t, "float", "bool"]) for t, _ in spec],
        "input_dims": [json.dumps([[4096], [4096], []])] * n,
    })  # fmt: skip
    return Trace(TraceMeta(path=path, source_format="test"), kernels=k, cpu_slices=c)


def test_bf16_and_fp32_copies_never_pair() -> None:
    """aten::copy_ into bf16 and into fp32 are two rows; the fp32 one is unchanged while the
    bf16 one got 30 % slower (the totals of a mixed row would call both 'changed')."""
    a = _copies([("c10::BFloat16", 1000)] * 6 + [("float", 2000)] * 4, "a")
    b = _copies([("c10::BFloat16", 1300)] * 6 + [("float", 2000)] * 4, "b")
    g = compare(a, b).groups.set_index("precision_a")
    assert set(g.index) == {"bf16/fp32", "fp32"}
    assert (g["precision_b"] == g.index).all()
    assert g.loc["fp32", "status"] == UNCHANGED and g.loc["bf16/fp32", "status"] == CHANGED
    assert g.loc["bf16/fp32", "delta_pct"] == pytest.approx(30.0)
    # one side bf16 only, the other fp32 only: nothing pairs
    r = compare(_copies([("c10::BFloat16", 1000)] * 3, "a"), _copies([("float", 1000)] * 3, "b"))
    assert sorted(r.groups["status"]) == [ONLY_A, ONLY_B]


def test_precision_from_names_and_scalars() -> None:
    assert precision_from_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT") == "bf16"
    assert precision_from_name("nvjet_sm90_hsh_128x256_64x4_2x1_v_bz_coopA_NTN") == "fp16"
    assert precision_from_name("Cijk_Alik_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1") == "bf16"
    assert precision_from_name("ampere_sgemm_128x64_tn") == "fp32"
    # CUTLASS: fp32 operands on the tensor cores run TF32 (sampled_rank-0's A100 GEMMs); SIMT is fp32
    assert precision_from_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>(x::Params)") == "tf32"
    assert precision_from_name("cutlass_80_simt_sgemm_128x128_8x5_nn_align1") == "fp32"
    assert precision_from_name("cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8") == "bf16"
    assert precision_from_name("cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8") == "fp16"
    # a Python scalar (dims []) is not the precision of the math: aten::mul(x, 0.5), AdamW's lr
    assert op_dtypes_precision('["c10::BFloat16", "double"]', "[[4, 1024], []]") == "bf16"
    assert op_dtypes_precision('["float", "double", "double"]', "[[1024], [], []]") == "fp32"
    assert op_dtypes_precision('["", "", "double"]', "[[], [], []]") == ""


def _float_dtypes(trace: Trace, rows: np.ndarray) -> set[tuple[str, ...]]:
    """The dtypes of the tensor inputs (dims non-empty) of the ops launching these kernels, read
    from the raw ``input_types``/``input_dims`` text (not through the precision rule)."""
    ops = kernel_op_rows(trace)[rows]
    c = trace.cpu_slices
    out = set()
    for o in ops:
        if o < 0:
            out.add(("no op",))
            continue
        types = json.loads(str(c["input_types"].iat[o]) or "[]")
        dims = json.loads(str(c["input_dims"].iat[o]) or "[]")
        out.add(tuple(t for t, d in zip(types, dims) if isinstance(d, list) and d and t in ("float", "double", "c10::BFloat16", "c10::Half")))
    return out


@pytest.mark.samples
def test_h100_vs_mi300_pairs_within_one_precision(samples: Path) -> None:
    a = load(str(samples / "torch" / "tracelens_h100" / BERT))
    b = load(str(samples / "torch" / "tracelens_mi300" / BERT))
    r = compare(a, b)
    g = r.groups
    matched = np.flatnonzero(g["status"].isin([CHANGED, UNCHANGED]).to_numpy())
    assert len(matched)
    for row in matched:
        ka, kb = r.kernels_of_row(int(row))
        da, db = _float_dtypes(a, ka), _float_dtypes(b, kb)
        assert len(da) == 1 and da == db, (g["name"].iat[row], da, db)
        assert g["precision_a"].iat[row] == g["precision_b"].iat[row]
    # unpaired time against the kernel time of both files, from the raw JSON
    total = 0.0
    for side in ("tracelens_h100", "tracelens_mi300"):
        with gzip.open(samples / "torch" / side / BERT, "rt") as fh:
            total += sum(e["dur"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel") * 1000
    assert total == pytest.approx(r.total_a_ns + r.total_b_ns, rel=1e-3)
    unpaired = g.loc[g["status"].isin([ONLY_A, ONLY_B]), ["total_a_ns", "total_b_ns"]].to_numpy().sum()
    assert unpaired <= 0.05 * total


def test_occurrence_pairs_are_the_alignment_of_equal_sequences_and_pair_nth_with_nth() -> None:
    from kviewer.analysis.merge import aligned_pairs, occurrence_pairs

    a = np.random.default_rng(5).integers(0, 5, 400)
    assert occurrence_pairs(a, a) == aligned_pairs(a, a) == [(i, i) for i in range(400)]
    # the 2nd 7 of a with the 2nd 7 of b, whatever lies between; a code one side lacks pairs nothing
    assert occurrence_pairs(np.array([7, 1, 7, 3]), np.array([1, 7, 9, 9, 7])) == [(0, 1), (1, 0), (2, 4)]
    assert occurrence_pairs(np.array([], dtype=np.int64), np.array([1])) == []


def test_a_whole_capture_against_a_stepped_one_pairs_without_aligning_tens_of_thousands(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An nsys export with NVTX steps against a rocprofv3 capture of 43,915 kernels and no steps:
    the op-less kernels of the two whole captures are paired by kind and precision. Aligned with
    difflib (about quadratic time on a few codes) this ran for minutes (found by comparing every
    shared sample with one file); sequences past ALIGN_MAX_CELLS pair by occurrence instead."""
    from kviewer.analysis import compare as cmp
    from kviewer.analysis.merge import ALIGN_MAX_CELLS

    seen: list[int] = []
    real = cmp.aligned_pairs

    def bounded(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
        seen.append(len(a) * len(b))
        assert len(a) * len(b) <= ALIGN_MAX_CELLS
        return real(a, b)

    monkeypatch.setattr(cmp, "aligned_pairs", bounded)
    a = load(str(samples / "nsys" / "h200_llm_train_nvtx.sqlite"))
    b = load(str(samples / "rocprof" / "rocprofv3_json_tracelens" / "908_results.json.gz"))
    r = cmp.compare(a, b)
    assert len(b.kernels) == 43_915
    assert r.total_b_ns == pytest.approx(float(b.kernels["dur"].sum()))
    g = r.groups
    for row in np.flatnonzero(g["status"].isin([CHANGED, UNCHANGED]).to_numpy()):  # never bf16 with fp32
        assert g["precision_a"].iat[row] == g["precision_b"].iat[row]


@pytest.fixture(scope="module")
def gemm_grid(sample_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    sq = tmp_path_factory.mktemp("gg") / "gemm_grid_block2_nsys.sqlite"
    sq.write_bytes(gzip.decompress((sample_traces / "gemm_grid_block2_nsys.sqlite.gz").read_bytes()))
    return sample_traces / "gemm_grid_block2_eager.pt.trace.json.gz", sq


TRUTH_STEP_MEDIAN_US = 1524.786  # /work/gpu_data/gemm_grid/truth.json: the torch trace's ProfilerStep GPU spans' median
TRUTH_KERNELS_PER_STEP = 24  # truth.json: kernels per profiled step (2 blocks x 12)


@pytest.mark.samples
def test_torch_vs_nsys_of_one_program_compare_per_step(gemm_grid: tuple[Path, Path]) -> None:
    """The PyTorch trace (3 ProfilerSteps) and the nsys export (3 NVTX steps after 7 unmarked
    warm-up iterations) of the same program: per file, B's kernel time is about twice A's; per
    step the two are the same program (median step within 3 %), and each row's launches per
    step agree."""
    a, b = load(str(gemm_grid[0])), load(str(gemm_grid[1]))
    r = compare(a, b)
    assert r.per_step and r.headline_basis == "median step"
    assert r.step_median_a_ns == pytest.approx(TRUTH_STEP_MEDIAN_US * 1000, abs=5)
    assert r.total_slower_pct > 50  # the per-file figure the headline used to show
    assert abs(r.slower_pct) < 3
    g = r.groups
    assert g["launches_per_step_b"].sum() == pytest.approx(TRUTH_KERNELS_PER_STEP)
    gemm = g[g["name"].str.startswith("nvjet")].iloc[0]
    assert gemm["launches_per_step_b"] == 8 and gemm["precision_a"] == gemm["precision_b"] == "bf16"
    assert gemm["status"] == UNCHANGED and abs(gemm["delta_step_pct"]) < 6 and gemm["delta_pct"] > 50


def _rename_step(t: Trace, name: str) -> Trace:
    """The same trace with one step marker renamed (its kernels then belong to no step)."""
    c = t.cpu_slices.copy()
    names = c["name"].astype(str).to_numpy(dtype=object).copy()
    names[names == name] = "not a step"
    c["name"] = pd.Categorical(names)
    return dataclasses.replace(t, cpu_slices=c)


@pytest.mark.samples
def test_step_counts_that_differ_are_said_and_divided(gemm_grid: tuple[Path, Path]) -> None:
    a = _rename_step(load(str(gemm_grid[0])), "ProfilerStep#2")  # 2 steps left
    b = load(str(gemm_grid[1]))  # 3 steps
    r = compare(a, b)
    assert len(r.steps_a) == 2 and len(r.steps_b) == 3 and r.per_step
    assert any("2 steps" in n and "3" in n for n in r.notes)
    g = r.groups
    # per step, every matched row launches as often on both sides (the same program)
    m = g[g["status"].isin([CHANGED, UNCHANGED])]
    assert (m["launches_per_step_a"] == m["launches_per_step_b"]).all()
    assert abs(r.slower_pct) < 3


@pytest.mark.samples
def test_cli_fail_if_slower_uses_the_step(gemm_grid: tuple[Path, Path]) -> None:
    a, b = (str(p) for p in gemm_grid)
    base = [sys.executable, "-m", "kviewer", "compare", a, b, "-q", "--fail-if-slower"]
    ok = subprocess.run(base + ["10"], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "median step" in ok.stdout and "total kernel time" in ok.stdout
    js = json.loads(subprocess.run([sys.executable, "-m", "kviewer", "compare", a, b, "-q", "--format", "json"],
                                   capture_output=True, text=True, timeout=300).stdout)
    assert js["slower_basis"] == "median step" and js["total_slower_pct"] > 50 and abs(js["slower_pct"]) < 3
    assert all(("precision_a" in row and "precision_b" in row and "matched_by" in row) for row in js["groups"])


def _mixed(names: list[str], with_op: list[bool], durs: list[int], path: str) -> Trace:
    """Kernels in launch order, some launched by an aten::copy_ op (bf16 <- fp32), the others by no op."""
    n = len(names)
    ext = np.where(with_op, np.arange(n) + 1, -1).astype(np.int64)
    k = make_table("kernels", n, {
        "name": names, "start": np.arange(n, dtype=np.int64) * 10_000, "dur": np.asarray(durs, dtype=np.int64),
        "external_id": ext, "correlation": np.arange(n, dtype=np.int64) + 1,
    })  # fmt: skip
    ops = [i for i in range(n) if with_op[i]]
    c = make_table("cpu_slices", len(ops), {
        "name": ["aten::copy_"] * len(ops), "category": ["op"] * len(ops),
        "start": np.asarray(ops, dtype=np.int64) * 10_000 - 5000, "end": np.asarray(ops, dtype=np.int64) * 10_000 - 1000,
        "external_id": np.asarray(ops, dtype=np.int64) + 1, "pid": [1] * len(ops), "tid": [1] * len(ops), "depth": [0] * len(ops),
        "input_types": [json.dumps(["c10::BFloat16", "float"])] * len(ops), "input_dims": [json.dumps([[4096], [4096]])] * len(ops),
    })  # fmt: skip
    return Trace(TraceMeta(path=path, source_format="test"), kernels=k, cpu_slices=c)


def test_opless_kernels_pair_by_kind_precision_and_order() -> None:
    """The op-less GEMMs of a cuBLAS and a hipBLASLt run (no name in common) meet by kind,
    precision and place in the sequence; the bf16 one meets the bf16 one, the fp32 one the fp32
    one, and an op-less kernel of another kind stays unpaired."""
    copy = "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda>(int)"
    a = _mixed([copy, "nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", copy, "ampere_sgemm_128x64_tn", copy, copy],
               [True, False, True, False, True, True], [100, 5000, 100, 3000, 100, 100], "a")
    b = _mixed([copy, "Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8x1_SN", copy, "Cijk_Ailk_Bljk_SB_MT64x64x16_SN",
                copy, "void at::native::reduce_kernel<512, 1>(float)", copy],
               [True, False, True, False, True, False, True], [100, 6000, 100, 2000, 100, 700, 100], "b")
    g = compare(a, b).groups
    rows = g[g["matched_by"] == "kind+precision+order"]
    assert len(rows) == 2
    by = rows.set_index("precision_a")
    assert by.loc["bf16", "name_a"].startswith("nvjet") and by.loc["bf16", "name_b"].startswith("Cijk_Ailk_Bljk_BBS")
    assert by.loc["fp32", "name_a"].startswith("ampere_sgemm") and by.loc["fp32", "precision_b"] == "fp32"
    assert (rows["precision_a"] == rows["precision_b"]).all()
    assert g.loc[g["status"] == ONLY_B, "name_b"].str.contains("reduce_kernel").all()
