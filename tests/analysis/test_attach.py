"""A counter report attached to a timeline (kviewer.analysis.attach)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.attach import attach_counters, describe, inherit_counters, is_counter_report, is_timeline, model_gaps
from kviewer.core import NcuCapture, Trace, TraceMeta, make_table
from kviewer.analysis.matching import identifier
from kviewer.analysis.merge import filter_mask, kernel_keys, match_kernels, merge_ncu


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


def _stepped(tl: Trace, steps: int) -> Trace:
    """``tl`` with NVTX ranges step_0.. around equal thirds (quarters, ...) of its kernels."""
    n = len(tl.kernels)
    per = n // steps
    c = make_table("cpu_slices", steps, {
        "name": [f"step_{i}" for i in range(steps)], "category": ["nvtx"] * steps,
        "start": [i * per * 10_000 for i in range(steps)], "end": [(i + 1) * per * 10_000 - 1000 for i in range(steps)],
        "pid": [1] * steps, "tid": [1] * steps, "depth": [0] * steps,
    })  # fmt: skip
    return Trace(meta=tl.meta, kernels=tl.kernels, cpu_slices=c)


def test_measured_marked_and_inherited_by_the_other_launches() -> None:
    tl = _stepped(_trace(list("ABCABCABC"), "timeline"), 3)
    nc = _trace(list("ABC"), "ncu", launch_skip=3)
    res = attach_counters(tl, nc)
    k = res.trace.kernels
    assert res.matched == 3 and res.match.start == 3
    assert k["counters"].astype(str).tolist() == ["inherited"] * 3 + ["measured"] * 3 + ["inherited"] * 3
    assert k["counters_from"].tolist() == [3, 4, 5, 3, 4, 5, 3, 4, 5]
    # the inherited launches carry the measured values of their profiled twin
    assert k["dram_bytes"].tolist() == [1, 1e6 + 1, 2e6 + 1] * 3
    assert res.inherited == 6
    assert [(x.step, x.source_step, x.launches) for x in res.inheritance.by_step] == [("step_0", "step_1", 3), ("step_2", "step_1", 3)]
    # three equally good windows, each offered
    assert [c.start for c in res.choices] == [0, 3, 6] and res.ambiguous and res.choices[res.chosen].start == 3
    assert attach_counters(tl, nc, start=6).trace.kernels["counters"].astype(str).tolist()[6:] == ["measured"] * 3
    assert tl.kernels["counters"].astype(str).tolist() == [""] * 9  # the input is untouched


def test_inherit_by_place_in_the_step_never_by_a_shared_key() -> None:
    """Two GEMMs share one kernel name and grid (G) at different places in the step (after A and
    after B): each launch inherits from the measured launch at its own place, and a launch whose
    step lacks a kernel still aligns the rest of its step."""
    tl = _stepped(_trace(list("AGBGAGBG"), "timeline"), 2)
    nc = _trace(list("AGBG"), "ncu")
    merged, rep = merge_ncu(tl, nc)
    assert rep.pairs["timeline_id"].tolist() == [0, 1, 2, 3]
    trace, inh = inherit_counters(merged)
    k = trace.kernels
    assert inh.launches == 4 and k["counters_from"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    # without step markers the iterations found in the kernel sequence give the place
    trace, inh = inherit_counters(merge_ncu(_trace(list("AGBGAGBG"), "timeline"), nc)[0])
    assert inh.launches == 4 and trace.kernels["counters_from"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_a_step_with_one_launch_more_inherits_at_every_place_of_its_repeated_layers() -> None:
    """Twelve identical layers a step; step_1 launches one kernel more after its third layer. Each
    launch of step_1 and step_2 inherits from the measured launch at its own place in step_0.
    Aligning longest common blocks first matched step_0's layers from the first one on with
    step_1's from the third one on, and left the first layers of step_1 without counters."""
    layer = list("ABCD")
    step = layer * 12
    names = step + step[:10] + ["E"] + step[10:] + step
    tl = _trace(names, "timeline")
    bounds = [(0, 48), (48, 97), (97, 145)]
    c = make_table("cpu_slices", 3, {
        "name": [f"step_{i}" for i in range(3)], "category": ["nvtx"] * 3,
        "start": [a * 10_000 for a, _ in bounds], "end": [b * 10_000 - 1000 for _, b in bounds],
        "pid": [1] * 3, "tid": [1] * 3, "depth": [0] * 3,
    })  # fmt: skip
    tl = Trace(meta=tl.meta, kernels=tl.kernels, cpu_slices=c)
    res = attach_counters(tl, _trace(step, "ncu"), start=0)
    k = res.trace.kernels
    src = k["counters_from"].tolist()
    assert res.matched == 48
    assert src[48:97] == list(range(10)) + [-1] + list(range(10, 48))
    assert src[97:] == list(range(48))
    assert k["counters"].astype(str).tolist()[58] == ""  # the extra launch has no place to inherit by


def test_inheritance_refused_when_the_modelled_work_differs() -> None:
    """fc1 and fc2 share kernel and grid; their modelled FLOPs differ 3x: an aligned launch whose
    modelled FLOPs differ from its source's by more than 25 % keeps no counters and is listed."""
    tl = _trace(list("AGAG"), "timeline")
    k = tl.kernels.copy()
    k["model_flops"] = [1e6, 3e9, 1e6, 1e9]  # launch 3: the same place, a third of the work
    k["model_bytes"] = [1e3, 1e6, 1.1e3, 1e6]  # launch 2: 10 % more bytes, within the limit
    tl = _stepped(Trace(meta=tl.meta, kernels=k), 2)
    res = attach_counters(tl, _trace(list("AG"), "ncu"))
    st = res.trace.kernels["counters"].astype(str).tolist()
    assert st == ["measured", "measured", "inherited", ""]
    [r] = res.inheritance.refused
    assert (r.kernel, r.source, r.what) == (3, 1, "FLOPs") and r.diff == pytest.approx(-2 / 3)
    assert any("refused" in line for line in describe(res))


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
    # each measured launch has its place in the two other steps: 30 x 2 inherit, no more
    assert (status == "measured").sum() == 30 and (status == "inherited").sum() == 60
    _same_kernel_same_place(res.trace)
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
    from kviewer.analysis.merge import MEASURED, copy_values, known

    names = schema.KERNELS.names
    assert MEASURED[0] == "flops_fp64" and names.index(MEASURED[-1]) + 1 == names.index("model_flops")
    k = _trace(list("ABC"), "timeline").kernels.copy()
    copy_values(k, "counters", np.array([0, 2]), np.array(["measured", ""], dtype=object), known("counters", np.array(["measured", ""], dtype=object)))
    assert k["counters"].astype(str).tolist() == ["measured", "", ""] and str(k["counters"].dtype) == "category"
    copy_values(k, "dram_bytes", np.array([1]), np.array([5.0]), np.array([True]))
    assert k["dram_bytes"].tolist()[1] == 5.0


def _same_kernel_same_place(trace: Trace) -> None:
    """Every inherited launch has its source's full name, grid and block, and the same place in its
    step: the n-th launch of that name in its step inherits from the n-th in the source's."""
    from kviewer.analysis.attach import _steps_of
    from kviewer.analysis.merge import launch_order

    k = trace.kernels
    st = k["counters"].astype(str).to_numpy()
    src = k["counters_from"].to_numpy()
    names = k["name"].astype(str).to_numpy()
    step_of, _ = _steps_of(trace)
    nth = np.zeros(len(k), dtype=np.int64)
    seen: dict[tuple, int] = {}
    for i in launch_order(k):
        key = (int(step_of[i]), names[i])
        nth[i] = seen.get(key, 0)
        seen[key] = nth[i] + 1
    inh = np.flatnonzero(st == "inherited")
    assert len(inh)
    assert (st[src[inh]] == "measured").all()
    assert (names[inh] == names[src[inh]]).all(), "an inherited launch took another kernel's counters"
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        v = k[c].to_numpy()
        assert (v[inh] == v[src[inh]]).all(), c
    assert (nth[inh] == nth[src[inh]]).all(), "an inherited launch sits at another place in its step"
    assert (step_of[inh] != step_of[src[inh]]).all()


def _without(report: Trace, rows: list[int]) -> Trace:
    """The report with some kernels removed (a window with gaps), ids renumbered."""
    k = report.kernels.drop(index=rows).reset_index(drop=True)
    k["id"] = np.arange(len(k), dtype=np.int64)
    return Trace(meta=report.meta, kernels=k)


@pytest.mark.samples
def test_gaps_in_the_report_window_move_no_other_pair(samples: Path) -> None:
    """Removing launches from the middle of a real report leaves every other kernel on the same
    timeline launch as the whole report (the alignment honours gaps)."""
    from kviewer.io import load

    tl = load(str(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz"))
    nc = load(str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"))
    whole = match_kernels(tl, nc, start=35)
    assert whole.matched == 30
    by_ncu = dict(zip(whole.pairs["ncu_id"].tolist(), whole.pairs["timeline_id"].tolist()))
    tkey = kernel_keys(tl.kernels, exact=True)
    nkey = kernel_keys(nc.kernels, exact=True)
    # every whole-report pair is the same kernel: full signature (template arguments), grid, block
    assert all(tkey[t] == nkey[n] for n, t in by_ncu.items())
    for gap, exact in (([1, 7, 8, 20], True), ([9], True), ([0], True), ([22, 23, 24], True),
                       ([3, 4], False), ([12, 13, 14, 15, 16], False)):  # fmt: skip
        part = match_kernels(tl, _without(nc, gap), start=35)
        kept = [i for i in range(30) if i not in gap]
        assert part.matched == len(kept), gap
        got = part.pairs["timeline_id"].tolist()
        # never another kernel; where a removed launch repeats its neighbour's key (2 [3 4] with
        # 2 and 4 the same GEMM) the keys cannot say which of the two is missing
        assert [tkey[t] for t in got] == [nkey[i] for i in kept], gap
        if exact:
            assert got == [by_ncu[i] for i in kept], gap


@pytest.mark.samples
def test_nsys_export_inherits_by_place_in_the_step(sample_traces: Path, tmp_path: Path) -> None:
    """An Nsight Systems export (no shapes) and an ncu --set full report of 3 kernels of one step
    (two nvjet GEMMs and a layer norm): the 3 measured launches' places in every other step
    inherit, each from the launch of the same full name, grid and block."""
    import gzip

    from kviewer.io import load

    sq = tmp_path / "h200_llm_train_nvtx.sqlite"
    sq.write_bytes(gzip.decompress((sample_traces / "h200_llm_train_nvtx.sqlite.gz").read_bytes()))
    tl = load(str(sq))
    nc = load(str(sample_traces / "h200_block_fullset_3k.ncu-rep.gz"))
    res = attach_counters(tl, nc, step="step_0")
    assert res.matched == 3 and res.steps == ["step_0"]
    k = res.trace.kernels
    steps = {x.step for x in res.inheritance.by_step}
    # every other step holds the same 3 launches at the same places
    assert res.inherited == 3 * len(steps) and all(x.launches == 3 and x.source_step == "step_0" for x in res.inheritance.by_step)
    _same_kernel_same_place(res.trace)
    assert (k["counters"].astype(str) == "inherited").sum() == res.inherited


def test_signature_is_one_spelling_for_both_demanglers() -> None:
    """CUPTI's and Nsight Compute's spellings of the same kernels (copied from the real pair in
    the shared samples) give one signature; two instantiations of a template stay apart."""
    cupti = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, c10::BFloat16 const*)"
    ncu = "void at::native::<unnamed>::vectorized_layer_norm_kernel<c10::BFloat16, float, (bool)0>(int, T2, const T1 *)"
    assert identifier(cupti) == identifier(ncu)
    add = "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int)"
    add_n = "void at::native::vectorized_elementwise_kernel<(int)8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
    mul = "void at::native::vectorized_elementwise_kernel<8, at::native::MulFunctor<c10::BFloat16>, std::array<char*, 3ul> >(int)"
    assert identifier(add) == identifier(add_n) != identifier(mul)
    assert identifier("void f<lambda>::g<{lambda()#2}>(int)") == identifier("void f<lambda>::g<[lambda() (instance 2)]>(int, T1)")


@pytest.mark.samples
def test_report_taken_during_warm_up_aligns_with_every_step(sample_traces: Path, tmp_path: Path) -> None:
    """The fullset_3k report's window lies in the warm-up, outside the NVTX steps: the launches
    from its first to its last measured one align with each step's sequence, so each of the 60
    steps inherits the same 3 kernels (same full names, grid, block, in the same order)."""
    import gzip

    from kviewer.io import load

    sq = tmp_path / "h200_llm_train_nvtx.sqlite"
    sq.write_bytes(gzip.decompress((sample_traces / "h200_llm_train_nvtx.sqlite.gz").read_bytes()))
    tl = load(str(sq))
    nc = load(str(sample_traces / "h200_block_fullset_3k.ncu-rep.gz"))
    res = attach_counters(tl, nc)
    assert res.matched == 3 and not res.steps  # the window is outside the steps
    by = res.inheritance.by_step
    assert len(by) == 60 and all(x.source_step == "outside the steps" and x.launches == 3 for x in by)
    k = res.trace.kernels
    st = k["counters"].astype(str).to_numpy()
    src = k["counters_from"].to_numpy()
    names = k["name"].astype(str).to_numpy()
    measured = [names[i] for i in np.flatnonzero(st == "measured")]
    inh = np.flatnonzero(st == "inherited")
    assert len(inh) == 180 and (names[inh] == names[src[inh]]).all()
    for c in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        assert (k[c].to_numpy()[inh] == k[c].to_numpy()[src[inh]]).all()
    from kviewer.analysis.attach import _steps_of
    from kviewer.analysis.merge import launch_order

    step_of, _ = _steps_of(res.trace)
    order = launch_order(k)
    for s in range(60):
        seq = [names[i] for i in order if step_of[i] == s and st[i] == "inherited"]
        assert seq == measured, s
