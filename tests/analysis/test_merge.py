"""Nsight Compute counters onto timeline kernels (kviewer.analysis.merge)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.core import NcuCapture, Trace, TraceMeta, make_table
from kviewer.analysis.merge import base_name, match_kernels, merge_ncu
from kviewer.io.registry import CancelToken

# ---------------------------------------------------------------------------------------------
# names


@pytest.mark.parametrize(
    "name",
    [
        # PyTorch (cupti), ncu-rep (demangled), ncu --csv: three spellings of one kernel
        "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
        "void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)",
        "void at::vectorized_elementwise_kernel<8, at::CUDAFunctor_add<c10::BFloat16>, std::array<char *, 3>>(int, T2, T3)",
        "vectorized_elementwise_kernel",
    ],
)
def test_base_name_survives_demanglers(name: str) -> None:
    assert base_name(name) == "vectorized_elementwise_kernel"


def test_base_name_anonymous_namespace() -> None:
    torch = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, c10::BFloat16 const*)"
    rep = "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)0>(int, T2, const T1 *, T1 *)"
    assert base_name(torch) == base_name(rep) == "vectorized_layer_norm_kernel"


# ---------------------------------------------------------------------------------------------
# synthetic traces: the algorithm


def _trace(names: list[str], fmt: str, grid: list[int] | None = None, dur: list[int] | None = None, **capture_options) -> Trace:  # type: ignore[no-untyped-def]
    n = len(names)
    dur_arr = np.asarray(dur or [1000] * n, dtype=np.int64)
    cols = {
        "name": names,
        "start": np.arange(n, dtype=np.int64) * 10_000,
        "dur": dur_arr,
        "grid_x": grid or [1] * n, "grid_y": [1] * n, "grid_z": [1] * n,
        "block_x": [128] * n, "block_y": [1] * n, "block_z": [1] * n,
        "correlation": np.arange(n) + 100 if fmt == "timeline" else np.full(n, -1),
    }  # fmt: skip
    if fmt == "ncu":
        cols["dram_bytes"] = np.arange(n, dtype=np.float64) * 1e6 + 1
        cols["registers"] = np.full(n, 40)
        cols["serialised"] = np.ones(n, dtype=bool)
    k = make_table("kernels", n, cols)
    capture = NcuCapture(**capture_options) if capture_options else None
    return Trace(meta=TraceMeta(path=f"{fmt}.x", source_format="ncu-rep" if fmt == "ncu" else "torch", ncu_capture=capture), kernels=k)


def test_contiguous_window_found() -> None:
    tl = _trace(list("ABCDEFGHABCX"), "timeline")
    nc = _trace(list("DEFG"), "ncu")
    merged, rep = merge_ncu(tl, nc)
    assert rep.matched == 4 and rep.start == 3 and rep.equal_starts == 1
    assert rep.pairs["timeline_id"].tolist() == [3, 4, 5, 6]
    assert merged.kernels["dram_bytes"].iloc[3:7].tolist() == [1, 1e6 + 1, 2e6 + 1, 3e6 + 1]
    assert merged.kernels["dram_bytes"].iloc[[0, 1, 2, 7]].isna().all()
    assert merged.kernels["registers"].iloc[3] == 40 and merged.kernels["registers"].iloc[0] == -1
    # the inputs are untouched
    assert tl.kernels["dram_bytes"].isna().all()
    assert len(rep.unmatched_timeline) == 8 and len(rep.unmatched_ncu) == 0


def test_repeating_program_prefers_launch_skip() -> None:
    tl = _trace(list("ABCABCABCABC"), "timeline")
    nc = _trace(list("ABC"), "ncu", launch_skip=6)
    rep = match_kernels(tl, nc)
    assert rep.equal_starts == 4 and rep.start == 6 and "launch-skip 6" in rep.start_source
    nc_plain = _trace(list("ABC"), "ncu")
    assert match_kernels(tl, nc_plain).start == 0  # no hint: the earliest of the equal starts


def test_grid_and_block_are_part_of_the_key() -> None:
    tl = _trace(list("AAAA"), "timeline", grid=[1, 2, 1, 2])
    nc = _trace(list("AA"), "ncu", grid=[2, 2])
    rep = match_kernels(tl, nc)
    assert rep.pairs["timeline_id"].tolist() == [1, 3]


def test_filtered_report_is_a_subsequence() -> None:
    """ncu -k B: only the B kernels were profiled; the n-th one goes to the n-th timeline B."""
    tl = _trace(list("ABCABCABC"), "timeline")
    nc = _trace(list("BBB"), "ncu")
    rep = match_kernels(tl, nc)
    assert rep.pairs["timeline_id"].tolist() == [1, 4, 7]


def test_given_start_and_unmatched() -> None:
    tl = _trace(list("ABCDABCD"), "timeline")
    nc = _trace(list("CDZ"), "ncu")
    rep = match_kernels(tl, nc, start=6)
    assert rep.start_source == "given" and rep.pairs["timeline_id"].tolist() == [6, 7]
    assert rep.unmatched_ncu.tolist() == [2] and rep.matched == 2
    assert rep.summary() == "ncu kernels matched: 2 of 3"


def test_nothing_in_common() -> None:
    rep = match_kernels(_trace(list("AB"), "timeline"), _trace(list("XY"), "ncu"))
    assert rep.matched == 0 and rep.start == -1 and rep.notes


def _program(steps: int, per_step: int = 30) -> list[str]:
    """A training loop: the same ``per_step`` kernels every step (every kernel repeats)."""
    return [f"k{i}" for i in range(per_step)] * steps


def test_a_gap_in_a_report_of_a_repeating_program_moves_no_pair_to_another_step() -> None:
    """ncu of steps 5..24 of a 100-step loop, eight launches not in the report (failed replays):
    every report kernel pairs with its own launch. Aligning longest common blocks first placed the
    longest run one step (or several) early, where the same keys repeat, and left every report
    kernel before it without a partner (359 of 592 paired)."""
    tl = _trace(_program(100), "timeline")
    window = list(range(150, 750))
    missing = {163, 241, 329, 537, 614, 653, 664, 681}
    kept = [p for p in window if p not in missing]
    nc = _trace([f"k{p % 30}" for p in kept], "ncu")
    rep = match_kernels(tl, nc, start=150)
    assert rep.matched == len(kept)
    assert rep.pairs["timeline_id"].tolist() == kept
    # the window is found too (every step fits as well; the earliest is chosen)
    found = match_kernels(tl, nc)
    assert found.matched == len(kept) and found.start == 0 and found.equal_starts > 90


def test_a_launch_the_timeline_lacks_leaves_one_report_kernel_unpaired() -> None:
    """The report ran k7 once more in one step (and was cut short elsewhere): the extra launch has
    no partner; every other report kernel pairs with its own launch."""
    tl = _trace(_program(40), "timeline")
    names = [f"k{p % 30}" for p in range(60, 360)]
    truth = list(range(60, 360))
    names.insert(100, "k7")  # an extra launch of a kernel that runs every step
    truth.insert(100, -1)
    nc = _trace(names, "ncu")
    rep = match_kernels(tl, nc, start=60)
    got = dict(zip(rep.pairs["ncu_id"].tolist(), rep.pairs["timeline_id"].tolist()))
    assert rep.matched == len(names) - 1
    assert all(got[i] == t for i, t in enumerate(truth) if t >= 0)


def test_a_report_of_the_launches_a_filter_it_does_not_name_selected() -> None:
    """A report holding only the launches of two kernels (a -k regex the file does not record):
    the n-th one pairs with the n-th such launch, however far apart they run."""
    tl = _trace(_program(150, per_step=40), "timeline")
    keep = [p for p in range(len(tl.kernels)) if p % 40 in (3, 31)]
    nc = _trace([f"k{p % 40}" for p in keep[10:210]], "ncu")
    rep = match_kernels(tl, nc)
    assert rep.matched == 200 and rep.pairs["timeline_id"].tolist() == keep[:200]
    rep = match_kernels(tl, nc, start=keep[10])
    assert rep.pairs["timeline_id"].tolist() == keep[10:210]


def test_near_pairs_finds_a_long_block_one_side_lacks() -> None:
    from kviewer.analysis.merge import near_pairs

    step = list(range(10)) * 12
    for block in (5, 40, 300):
        longer = step[:50] + [1000 + i for i in range(block)] + step[50:]
        want = [(i, i if i < 50 else i + block) for i in range(len(step))]
        assert near_pairs(step, longer) == want
        assert near_pairs(longer, step) == [(j, i) for i, j in want]
    assert near_pairs([], [1, 2]) == [] and near_pairs([1], []) == []
    assert near_pairs([1, 2, 3], [4, 5, 6]) == []


# ---------------------------------------------------------------------------------------------
# the real pair: torch eager trace + the eager ncu report of the same model


@pytest.fixture(scope="module")
def eager_pair(samples: Path, sample_traces: Path) -> tuple[Trace, Trace]:
    from kviewer.io import torch as torch_loader  # a broken loader fails here, never skips
    from kviewer.io.ncu import report as ncu_rep

    tl_path = sample_traces / "h200_llm_block_eager.pt.trace.json.gz"
    if not tl_path.exists():
        tl_path = samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz"
    tl = torch_loader.LOADER.load(tl_path, lambda f, m: None, CancelToken())
    nc = ncu_rep.load(samples / "ncu" / "h200_llm_block_eager.ncu-rep", lambda f, m: None, CancelToken())
    return tl, nc


@pytest.mark.samples
def test_torch_eager_with_ncu_report(eager_pair: tuple[Trace, Trace]) -> None:
    tl, nc = eager_pair
    merged, rep = merge_ncu(tl, nc)
    assert len(tl.kernels) == 144 and len(nc.kernels) == 30
    assert rep.matched == 30 and len(rep.unmatched_ncu) == 0 and len(rep.unmatched_timeline) == 114
    # the model repeats one decoder block: the 30-kernel window fits at every block boundary
    # (the ncu run had 2 blocks per step, the torch run 4); the start closest to --launch-skip 40 wins
    assert rep.equal_starts > 1 and "launch-skip 40" in rep.start_source
    pairs = rep.pairs
    t = merged.kernels.set_index("id").loc[pairs["timeline_id"]]
    n = nc.kernels.set_index("id").loc[pairs["ncu_id"]]
    # right kernels: same base name, grid and block, and consecutive launches on the timeline
    assert [base_name(x) for x in t["name"]] == [base_name(x) for x in n["name"]]
    for col in ("grid_x", "grid_y", "block_x", "block_y"):
        assert t[col].tolist() == n[col].tolist()
    assert np.all(np.diff(t["start"].to_numpy()) > 0)
    # each GEMM lands on the GEMM of the same role: durations agree within 15 % although ncu
    # replays kernels (the four GEMMs of a block take 44 to 180 us)
    ratio = n["dur"].to_numpy() / t["dur"].to_numpy()
    assert ratio.min() > 0.85 and ratio.max() < 1.2
    # the counters landed, and only on the matched kernels
    assert np.allclose(t["dram_bytes"].to_numpy(), n["dram_bytes"].to_numpy())
    assert (t["dram_bytes"] > 1e6).all()
    assert merged.kernels["dram_bytes"].notna().sum() == 30
    assert np.allclose(t["sm_throughput_pct"].to_numpy(), n["sm_throughput_pct"].to_numpy())
    # times are the timeline's
    assert merged.kernels["start"].tolist() == tl.kernels["start"].tolist()
    # the report's metrics rows, re-keyed to timeline kernels
    m = merged.metrics
    dur = m[m["metric"] == "gpu__time_duration.sum"].set_index("kernel")["value"]
    assert sorted(dur.index) == sorted(pairs["timeline_id"])
    assert np.allclose(dur.loc[pairs["timeline_id"]].to_numpy(), n["dur"].to_numpy())
    assert "30 of 30" in merged.meta.extra["ncu"]
    assert pd.api.types.is_float_dtype(merged.kernels["dram_bytes"])
    merged.validate()


def test_the_notes_tell_a_kernel_the_timeline_never_ran_from_one_out_of_place() -> None:
    tl = _trace(_program(10), "timeline")
    names = [f"k{p % 30}" for p in range(30, 90)]
    names.insert(20, "k4")  # once more than the timeline ran it there
    names.insert(40, "zz")  # a kernel the timeline never ran
    rep = match_kernels(tl, _trace(names, "ncu"), start=30)
    assert rep.matched == 60 and rep.unmatched_ncu.tolist() == [20, 40]
    assert "1 report kernel(s) found no timeline kernel with the same name, grid and block" in rep.notes
    assert any(n.startswith("1 report kernel(s) found no launch of theirs at their place") for n in rep.notes)


def test_sequences_that_are_not_nearly_the_same_fall_back_to_the_alignment() -> None:
    """Two unrelated sequences are no near pair: near_pairs says so after its first few dozen
    mismatches (instead of walking 50,000 of them), and best_pairs aligns them, or pairs the
    n-th of each code with the n-th where they are too long to align."""
    from kviewer.analysis.merge import aligned_pairs, best_pairs, near_pairs, occurrence_pairs

    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 8, 50_000), rng.integers(0, 8, 50_000)
    assert near_pairs(a, b) is None
    assert best_pairs(a, b) == occurrence_pairs(a, b)
    assert best_pairs(a[:300], b[:300]) == aligned_pairs(a[:300], b[:300])
