"""Counters attached to an Nsight Systems export of a program whose GEMMs share one kernel and one
grid (gemm_grid: two decoder blocks, bf16; qkv, o_proj, fc1 and fc2 all run
``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT`` on grid (2,66,1) x 384): every inherited launch
must carry the counters of the launch at its own place, which the test checks against the FLOPs
that the PyTorch trace of the same program gives each place (shapes -> 2·M·N·K, independent of
the counters)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.attach import attach_counters, measured_flops, with_model
from kviewer.analysis.merge import launch_order
from kviewer.analysis.steps import find_steps, kernel_steps
from kviewer.core import Trace
from kviewer.io import load

from .test_attach import _same_kernel_same_place, _without

GEMM = "nvjet"


@pytest.fixture(scope="module")
def nsys(sample_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Trace:
    sq = tmp_path_factory.mktemp("gemm_grid") / "gemm_grid_block2_nsys.sqlite"
    sq.write_bytes(gzip.decompress((sample_traces / "gemm_grid_block2_nsys.sqlite.gz").read_bytes()))
    return load(str(sq))


@pytest.fixture(scope="module")
def report(sample_traces: Path) -> Trace:
    return load(str(sample_traces / "gemm_grid_step1_full.ncu-rep.gz"))


@pytest.fixture(scope="module")
def place_flops(sample_traces: Path) -> np.ndarray:
    """The modelled FLOPs of each GEMM place of a step, from the PyTorch trace's shapes."""
    tt = with_model(load(str(sample_traces / "gemm_grid_block2_eager.pt.trace.json.gz")))
    k = tt.kernels
    step_of = kernel_steps(tt, find_steps(tt))
    names = k["name"].astype(str).to_numpy()
    order = launch_order(k)
    first = int(step_of[order][step_of[order] >= 0][0])
    f = k["model_flops"].to_numpy(np.float64)
    seq = np.asarray([f[i] for i in order if step_of[i] == first and GEMM in names[i]])
    return seq[~np.isnan(seq)]  # the step's first GEMM is launched outside any op: no model


def _gemm_flops_by_place(trace: Trace) -> dict[int, tuple[list[str], np.ndarray]]:
    k = trace.kernels
    step_of = kernel_steps(trace, find_steps(trace))
    names = k["name"].astype(str).to_numpy()
    st = k["counters"].astype(str).to_numpy()
    mf = measured_flops(k)
    out = {}
    for s in sorted(set(step_of[step_of >= 0].tolist())):
        g = [int(i) for i in launch_order(k) if step_of[i] == s and GEMM in names[i]]
        out[s] = ([str(st[i]) for i in g], mf[g])
    return out


@pytest.mark.samples
def test_shared_grid_gemms_inherit_their_own_counters(nsys: Trace, report: Trace, place_flops: np.ndarray) -> None:
    # the premise: the four GEMMs of a block share the kernel and the grid but not the work
    k = nsys.kernels
    g = k[k["name"].astype(str).str.contains(GEMM)]
    assert g["name"].nunique() == 1 and len(g.drop_duplicates(["grid_x", "grid_y", "grid_z", "block_x"])) == 1
    assert len(set(np.round(place_flops / 1e9, 1).tolist())) >= 3
    res = attach_counters(nsys, report)
    assert res.matched == len(report.kernels) == 24 and res.steps == ["step_1"]
    assert [(x.step, x.source_step, x.launches) for x in res.inheritance.by_step] == [("step_0", "step_1", 24), ("step_2", "step_1", 24)]
    assert not res.inheritance.refused  # no shapes in an nsys export: no model to refuse by
    _same_kernel_same_place(res.trace)
    for step, (status, flops) in _gemm_flops_by_place(res.trace).items():
        assert status == (["measured"] if step == 1 else ["inherited"]) * len(place_flops), step
        np.testing.assert_allclose(flops, place_flops, rtol=0.01, err_msg=f"step {step}")


@pytest.mark.samples
def test_a_gap_in_the_report_leaves_that_place_unmeasured(nsys: Trace, report: Trace, place_flops: np.ndarray) -> None:
    """The report without block 0's o_proj GEMM (and the kernels around it): those places get no
    counters in any step (not the other block's o_proj, not the next GEMM's); every GEMM that has
    counters has the FLOPs of its own place."""
    names = report.kernels["name"].astype(str).to_numpy()
    gemm_rows = [i for i in range(len(names)) if GEMM in names[i]]
    gap = [gemm_rows[1], gemm_rows[1] + 1]  # o_proj of block 0 and the kernel after it
    res = attach_counters(nsys, _without(report, gap), step="step_1")
    assert res.matched == 22
    _same_kernel_same_place(res.trace)
    for step, (status, flops) in _gemm_flops_by_place(res.trace).items():
        assert status[1] == "", (step, status)  # the o_proj place of block 0: nothing measured there
        have = ~np.isnan(flops)
        assert have.sum() == len(place_flops) - 1, step
        np.testing.assert_allclose(flops[have], place_flops[have], rtol=0.01, err_msg=f"step {step}")


@pytest.mark.samples
def test_match_report_counts_direct_and_inherited(nsys: Trace, report: Trace, sample_traces: Path) -> None:
    """The match report (``sol|kernels … --ncu`` on stderr, ``info TRACE REPORT``) says how many
    launches were measured directly, how many inherited, and from which step."""
    import json
    import subprocess
    import sys

    from kviewer.analysis.attach import describe

    lines = "\n".join(describe(attach_counters(nsys, report)))
    assert "24 launches measured directly, 48 inherited" in lines
    assert "step_0 <- step_1: 24; step_2 <- step_1: 24" in lines
    proc = subprocess.run([sys.executable, "-m", "kviewer", "info", nsys.meta.path, str(sample_traces / "gemm_grid_step1_full.ncu-rep.gz"),
                           "--format", "json", "-q"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    [m] = json.loads(proc.stdout)["ncu_matches"]
    assert (m["matched"], m["inherited"], m["refused"]) == (24, 48, [])
    assert [(x["step"], x["source_step"], x["launches"]) for x in m["inherited_from"]] == [("step_0", "step_1", 24), ("step_2", "step_1", 24)]
