"""A counter report attached to a timeline (kviewer.analysis.attach)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.attach import attach_counters, describe, inherit_counters, is_counter_report, is_timeline, model_gaps
from kviewer.core import NcuCapture, Trace, TraceMeta, make_table
from kviewer.core.merge import filter_mask, match_kernels, merge_ncu


def _trace(names: list[str], fmt: str, grid: list[int] | None = None, **capture_options) -> Trace:  # type: ignore[no-untyped-def]
    n = len(names)
    cols = {
        "name": names,
        "start": np.arange(n, dtype=np.int64) * 10_000,
        "dur": np.full(n, 1000, dtype=np.int64),
        "grid_x": grid or [1] * n, "grid_y": [1] * n, "grid_z": [1] * n,
        "block_x": [128] * n, "block_y": [1] * n, "block_z": [1] * n,
        "correlation": np.arange(n) + 100 if fmt == "timeline" else np.full(n, -1),
    }  # fmt: skip
    if fmt == "ncu":
        cols["dram_bytes"] = np.arange(n, dtype=np.float64) * 1e6 + 1
        cols["sm_throughput_pct"] = np.arange(n, dtype=np.float64) + 10
        cols["serialised"] = np.ones(n, dtype=bool)
    k = make_table("kernels", n, cols)
    capture = NcuCapture(**capture_options) if capture_options else None
    return Trace(meta=TraceMeta(path=f"{fmt}.x", source_format="ncu-rep" if fmt == "ncu" else "torch", ncu_capture=capture), kernels=k)


def test_kinds_of_trace() -> None:
    assert is_counter_report(_trace(list("AB"), "ncu")) and not is_timeline(_trace(list("AB"), "ncu"))
    assert is_timeline(_trace(list("AB"), "timeline")) and not is_counter_report(_trace(list("AB"), "timeline"))


def test_kernel_filter_restricts_the_candidates_and_the_launch_skip() -> None:
    """ncu -k regex:B --launch-skip 1 -c 2: the 2nd and 3rd B launches, whatever runs between."""
    tl = _trace(list("ABCBABCB"), "timeline")
    nc = _trace(list("BB"), "ncu", kernel_filter="regex:^B$", launch_skip=1)
    rep = match_kernels(tl, nc)
    assert rep.filtered_out == 4
    assert rep.pairs["timeline_id"].tolist() == [3, 5]
    assert rep.starts == [0, 1, 2] and rep.start == 1
    assert filter_mask(["void ns::B<1>(int)", "A"], "B").tolist() == [True, False]


def test_measured_marked_and_inherited_by_the_other_launches() -> None:
    tl = _trace(list("ABCABCABC"), "timeline")
    nc = _trace(list("ABC"), "ncu", launch_skip=3)
    res = attach_counters(tl, nc)
    k = res.trace.kernels
    assert res.matched == 3 and res.match.start == 3
    assert k["counters"].astype(str).tolist() == ["inherited"] * 3 + ["measured"] * 3 + ["inherited"] * 3
    assert k["counters_from"].tolist() == [3, 4, 5, 3, 4, 5, 3, 4, 5]
    # the inherited launches carry the measured values of their profiled twin
    assert k["dram_bytes"].tolist() == [1, 1e6 + 1, 2e6 + 1] * 3
    assert res.inherited == 6
    # three equally good windows, each offered
    assert [c.start for c in res.choices] == [0, 3, 6] and res.ambiguous and res.choices[res.chosen].start == 3
    assert attach_counters(tl, nc, start=6).trace.kernels["counters"].astype(str).tolist()[6:] == ["measured"] * 3
    assert tl.kernels["counters"].astype(str).tolist() == [""] * 9  # the input is untouched


def test_inherit_keeps_repeated_launches_apart() -> None:
    """A kernel launched twice per step with the same key: the n-th launch takes the n-th profile."""
    tl = _trace(list("AXAAXA"), "timeline")
    nc = _trace(list("AXA"), "ncu")
    merged, rep = merge_ncu(tl, nc)
    assert rep.pairs["timeline_id"].tolist() == [0, 1, 2]
    trace, n = inherit_counters(merged)
    k = trace.kernels
    # no steps: one sequence; launches 3 and 5 are the 3rd and 4th A, cycling over the two profiles
    assert n == 3 and k["counters_from"].tolist() == [0, 1, 2, 0, 1, 2]


def test_unmatched_reasons() -> None:
    tl = _trace(list("ABC"), "timeline", grid=[1, 1, 1])
    nc = _trace(list("ABZ") + ["C"], "ncu", grid=[1, 1, 1, 8])
    res = attach_counters(tl, nc)
    whys = {(u.name, u.why) for u in res.unmatched}
    assert whys == {("Z", "name"), ("C", "launch")}
    text = "\n".join(describe(res))
    assert "2 of 4" in text and "other grid/block sizes" in text


def test_model_gap_is_reported_and_a_missing_tensor_counter_is_not_a_gap() -> None:
    tl = _trace(list("AB"), "timeline")
    k = tl.kernels.copy()
    k["flops_fp32"] = [100.0, 0.0]
    k["model_flops"] = [50.0, 1e9]
    k["tensor_pipe_pct"] = [0.0, 80.0]
    g0 = model_gaps(k, 0)
    assert len(g0) == 1 and g0[0].compared and g0[0].what == "FLOPs" and "+100 %" in g0[0].text
    g1 = model_gaps(k, 1)
    assert len(g1) == 1 and not g1[0].compared


@pytest.mark.samples
def test_real_pair_names_the_step_and_offers_the_others(samples: Path, sample_traces: Path) -> None:
    from kviewer.io import load

    tl = load(str(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz"))
    nc = load(str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"))
    res = attach_counters(tl, nc)
    assert res.matched == 30 and res.match.start == 35 and res.steps == ["step_0", "step_1"]
    assert len(res.choices) == 9 and {c.step for c in res.choices} == {"step_0", "step_1", "step_2"}
    k = res.trace.kernels
    status = k["counters"].astype(str)
    assert (status == "measured").sum() == 30 and (status == "inherited").sum() == 114
    # merged values equal the report's, for every matched kernel
    pairs = res.match.pairs
    for col in ("dram_bytes", "sm_throughput_pct", "mem_throughput_pct", "achieved_occupancy_pct", "flops_fp32"):
        a = k[col].to_numpy()[pairs["timeline_id"].to_numpy()]
        b = nc.kernels[col].to_numpy()[pairs["ncu_id"].to_numpy()]
        assert np.allclose(a, b, equal_nan=True), col
    # the modelled work sits beside the measured one
    assert k["model_flops"].notna().sum() > 100
    last = attach_counters(tl, nc, step="step_2")
    assert last.steps[0] == "step_2" and last.match.start == 107
    with pytest.raises(ValueError):
        attach_counters(tl, nc, step="nope")
    res.trace.validate()


@pytest.mark.samples
def test_rocprof_counter_collection_onto_its_kernel_trace(samples: Path) -> None:
    """AMD: rocprofv3 --pmc SQ_WAVES counters onto the kernel trace of the same program; the
    trace gives a 1024x1024 grid where the counter run gives 1048576 work-items in one dimension."""
    from kviewer.io import load

    folder = samples / "rocprof" / "rocprofv3_sdk_docs_2024"
    tl = load(str(folder / "kernel_trace.csv"))
    pmc = load(str(folder / "counter_collection.csv"))
    assert is_counter_report(pmc) and is_timeline(tl) and not is_counter_report(tl)
    res = attach_counters(tl, pmc)
    assert res.matched == 7 and not res.unmatched
    k = res.trace.kernels
    assert (k["counters"].astype(str) == "measured").sum() == 7
    m = res.trace.metrics
    waves = m[m["metric"].astype(str) == "SQ_WAVES"]
    assert sorted(waves["kernel"].tolist()) == list(range(7)) and (waves["value"] == 16384).all()
    # the timeline's own launch attributes are not doubled
    assert not m.duplicated(["kernel", "metric"]).any()
    # the same names on each side, in launch order
    names_tl = tl.kernels["name"].astype(str).to_numpy()[res.match.pairs["timeline_id"].to_numpy()]
    names_pmc = pmc.kernels["name"].astype(str).to_numpy()[res.match.pairs["ncu_id"].to_numpy()]
    assert names_tl.tolist() == names_pmc.tolist()


@pytest.mark.samples
def test_rocprof_v1_pmc_run_is_a_counter_report(samples: Path) -> None:
    from kviewer.io import load

    pmc = load(str(samples / "rocprof" / "hpctraining_seismic_pmc" / "data_movement.csv"))
    assert is_counter_report(pmc)
    # a timeline of the same program: the pmc run's own dispatches with real times stand in for it
    k = pmc.kernels.copy()
    k["serialised"] = False
    for col in ("dram_bytes", "dram_read_bytes", "dram_write_bytes"):
        k[col] = np.nan
    tl = Trace(meta=TraceMeta(path="tl", source_format="rocprof-v1-csv"), kernels=k)
    res = attach_counters(tl, pmc)
    assert res.matched == len(pmc.kernels)
    assert np.allclose(res.trace.kernels["dram_bytes"].to_numpy(), pmc.kernels["dram_bytes"].to_numpy(), equal_nan=True)


def test_nvtx_range_of_the_report_picks_the_step() -> None:
    """ncu --nvtx-include step_1/: among equal windows, the one in the timeline's step_1."""
    tl = _trace(list("ABCABCABC"), "timeline")
    # steps: NVTX ranges on the timeline's host thread around each ABC
    n = 3
    c = make_table("cpu_slices", n, {
        "name": ["step_0", "step_1", "step_2"], "category": ["nvtx"] * n,
        "start": [0, 30_000, 60_000], "end": [29_000, 59_000, 89_000],
        "pid": [1] * n, "tid": [1] * n, "depth": [0] * n,
    })  # fmt: skip
    tl = Trace(meta=tl.meta, kernels=tl.kernels, cpu_slices=c)
    nc = _trace(list("ABC"), "ncu")
    m = make_table("metrics", 3, {"kernel": [0, 1, 2], "section": ["nvtx"] * 3, "metric": ["<default domain>"] * 3,
                                  "unit": [""] * 3, "value": [np.nan] * 3, "text": ["step_1"] * 3})
    nc = Trace(meta=nc.meta, kernels=nc.kernels, metrics=m)
    res = attach_counters(tl, nc)
    if not res.has_steps:
        pytest.skip("these ranges are not taken for steps")
    assert res.steps == ["step_1"] and res.match.start == 3 and "NVTX" in res.match.start_source


def test_launch_skip_before_match_counts_every_launch() -> None:
    """ncu -k regex:B --launch-skip 4 --launch-skip-before-match -c 1: the first B after 4 launches."""
    tl = _trace(list("ABCBABCB"), "timeline")
    nc = _trace(list("B"), "ncu", kernel_filter="regex:^B$", launch_skip=4, skip_before_match=True)
    assert match_kernels(tl, nc).pairs["timeline_id"].tolist() == [5]
    plain = _trace(list("B"), "ncu", kernel_filter="regex:^B$", launch_skip=2)
    assert match_kernels(tl, plain).pairs["timeline_id"].tolist() == [5]


def test_measured_block_and_copy_of_any_dtype() -> None:
    """MEASURED is the schema's measured block (a measured column added there is merged too);
    copy_values handles text (category) columns as well as numbers."""
    from kviewer.core import schema
    from kviewer.core.merge import MEASURED, copy_values, known

    names = schema.KERNELS.names
    assert MEASURED[0] == "flops_fp64" and names.index(MEASURED[-1]) + 1 == names.index("model_flops")
    k = _trace(list("ABC"), "timeline").kernels.copy()
    copy_values(k, "counters", np.array([0, 2]), np.array(["measured", ""], dtype=object), known("counters", np.array(["measured", ""], dtype=object)))
    assert k["counters"].astype(str).tolist() == ["measured", "", ""] and str(k["counters"].dtype) == "category"
    copy_values(k, "dram_bytes", np.array([1]), np.array([5.0]), np.array([True]))
    assert k["dram_bytes"].tolist()[1] == 5.0
