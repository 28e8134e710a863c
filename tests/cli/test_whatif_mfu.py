"""``kviewer whatif`` gives the projected MFU beside the projected step time: the step's model
FLOPs (a projection changes time, not work) over the device's peak and the MFU's step time scaled
by the projection (projected / measured). The what-if measures the first step from its marker's
start, which in a GPU-bound trace includes work queued before the trace began (block4_eager's first
step: 4.88 ms against the 3.35 ms its own kernels span); the MFU's step time does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kviewer.analysis.mfu import mfu
from kviewer.cli import main
from kviewer.io import load


def test_projected_mfu_is_the_steps_flops_at_the_projected_time(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = sample_traces / "block4_eager.pt.trace.json.gz"
    assert main(["whatif", str(path), "--fuse", "all", "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    job = mfu(load(path, use_cache=False)).job
    names = {int(r.step): r for r in job.itertuples()}
    assert len(doc["steps"]) == len(job) >= 2
    for st, row in zip(doc["steps"], (names[k] for k in sorted(names))):
        expect = row.model_flops / (row.step_ns * st["projected_ns"] / st["measured_ns"] * 1e-9 * row.peak_flops)
        assert st["projected_mfu"] == pytest.approx(expect, rel=1e-9)
        assert st["mfu"] == pytest.approx(row.mfu, rel=1e-12)
        assert st["projected_ns"] < st["measured_ns"] and st["projected_mfu"] > st["mfu"]  # fusing saves time: MFU rises
        assert 0 < st["projected_mfu"] <= 1.0
