"""MFU in ``kviewer fleet`` (issue 31): per step, per rank and per run, the numbers
:func:`kviewer.analysis.mfu.mfu` gives for the same files read as one folder, and a slower rank
sets the job's step time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from kviewer.analysis.mfu import mfu
from kviewer.fleet.analyze import analyze
from kviewer.fleet.engine import expand, summarize_here
from kviewer.io import load
from kviewer.io import ranks as io_ranks
from tests.io.test_ranks import write_rank

STRETCH = 1.5


def _run(folder: Path, doc: dict[str, Any], slow_rank: int) -> None:
    """Three ranks of block2_eager; ``slow_rank``'s step ranges last STRETCH times longer."""
    for r in range(3):
        d = json.loads(json.dumps(doc))
        if r == slow_rank:
            for e in d["traceEvents"]:
                if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step_"):
                    e["dur"] = e["dur"] * STRETCH
        write_rank(folder, f"rank-{r}.json", d, r)


def test_fleet_mfu_per_step_rank_and_run(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(io_ranks.ENV_WORKERS, "1")
    doc = json.loads(gzip.decompress((sample_traces / "h200_block2_eager.pt.trace.json.gz").read_bytes()))
    host = {e["name"]: e["dur"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation" and str(e["name"]).startswith("step_")}
    _run(tmp_path / "a", doc, slow_rank=1)
    _run(tmp_path / "b", doc, slow_rank=2)
    files, runs = expand([str(tmp_path / "a"), str(tmp_path / "b")])
    res = analyze(summarize_here(files), runs)
    one = mfu(load(sample_traces / "h200_block2_eager.pt.trace.json.gz"))
    direct = mfu(load(tmp_path / "a"))
    steps = res.steps[res.steps["run"] == str(tmp_path / "a")].reset_index(drop=True)
    assert len(steps) == 2
    for s, o, d in zip(steps.to_dict(orient="records"), one.steps.to_dict(orient="records"), direct.job.to_dict(orient="records")):
        # the slow rank's stretched host range is the job's step time
        slow_ns = host[o["name"]] * STRETCH * 1e3
        assert d["step_ns"] == pytest.approx(max(slow_ns, o["step_ns"]), abs=2)
        assert s["model_flops"] == pytest.approx(3 * o["model_flops"], rel=1e-12)
        assert s["mfu"] == pytest.approx(3 * o["model_flops"] / (d["step_ns"] * 1e-9 * 3 * o["peak_flops"]), rel=1e-9)
        assert s["mfu"] == pytest.approx(d["mfu"], rel=1e-12) and s["mfu"] < o["mfu"]
    ranks = res.ranks[res.ranks["run"] == str(tmp_path / "a")].set_index("rank")
    # the slow rank's own MFU is lower than the others'
    assert ranks.loc[1, "mfu"] < ranks.loc[0, "mfu"] == pytest.approx(ranks.loc[2, "mfu"], rel=1e-12)
    # a run's MFU: all its steps; the two runs are equally slow (one stretched rank each)
    by_run = res.runs.set_index("run")
    assert by_run.loc[str(tmp_path / "a"), "mfu"] == pytest.approx(direct.totals["mfu"], rel=1e-12)
    assert by_run.loc[str(tmp_path / "b"), "mfu"] == pytest.approx(by_run.loc[str(tmp_path / "a"), "mfu"], rel=1e-9)
