"""The Nsight Compute view of one kernel (kviewer.analysis.ncu_view), without Qt."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.ncu_view import kernel_counters, sections_hint
from kviewer.core import Trace, TraceMeta, make_table


@pytest.mark.samples
def test_basic_report_sections_occupancy_and_rules(samples: Path) -> None:
    from kviewer.io import load

    rep = load(str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"))
    kc = kernel_counters(rep, 2)  # an nvjet GEMM
    sol = {r.label: r.value for r in kc.section("SpeedOfLight").rows}
    assert sol["Compute (SM) Throughput"] == pytest.approx(86.7014, abs=1e-3)
    assert sol["Memory Throughput"] == pytest.approx(68.3442, abs=1e-3)
    occ = {r.label: r.value for r in kc.section("Occupancy").rows}
    assert occ["Theoretical Occupancy"] == 18.75 and occ["Achieved Occupancy"] == pytest.approx(14.69, abs=0.01)
    assert kc.limiter == "registers, shared memory"
    mem = {r.label: r.value for r in kc.section("MemoryWorkloadAnalysis").rows}
    assert mem["L2 Hit Rate"] == pytest.approx(82.14, abs=0.01)
    assert math.isnan(mem["L2 Bytes"])  # not collected by these sections: unknown, not 0
    kinds = [r.kind for r in kc.rules]
    assert len(kc.rules) == 5 and kinds[0] == "OPT" and "INF" in kinds
    top = kc.rules[0]
    assert top.rule == "TheoreticalOccupancy" and top.speedup_pct == pytest.approx(81.25)
    assert not kc.missing


def test_missing_sections_name_their_section() -> None:
    k = make_table("kernels", 1, {"name": ["k"], "short_name": ["k"], "start": [0], "dur": [10]})
    m = make_table("metrics", 2, {
        "kernel": [0, 0], "section": ["GPU Speed Of Light Throughput"] * 2,
        "metric": ["sm__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"],
        "unit": ["%", "%"], "value": np.array([50.0, 20.0]), "text": ["50", "20"],
    })  # fmt: skip
    kc = kernel_counters(Trace(TraceMeta("x", "ncu-csv"), kernels=k, metrics=m), 0)
    missing = {s.key for s in kc.missing}
    assert {"Occupancy", "LaunchStats", "MemoryWorkloadAnalysis", "SpeedOfLight_RooflineChart"} <= missing
    assert "--section Occupancy" in sections_hint(kc.missing)
    assert kc.section("SpeedOfLight").collected and kc.limiter == "" and not kc.rules
