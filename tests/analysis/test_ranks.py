"""Per-rank summaries, kernels across ranks, step-time spread and the straggler rank."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer import cli
from kviewer.analysis import ranks as R
from kviewer.analysis.summary import kernel_summary
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.io import ranks as io_ranks
from kviewer.io.registry import load
from tests.bench.gen_large import make_ranks
from tests.io.test_ranks import EAGER, eager_doc, write_rank


@pytest.fixture(autouse=True)
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(io_ranks.ENV_WORKERS, "1")


@pytest.fixture
def three_ranks(sample_traces: Path, tmp_path: Path) -> Path:
    doc = eager_doc(sample_traces)
    for r in range(3):
        write_rank(tmp_path / "run", f"w{r}.json", doc, r)
    return tmp_path / "run"


# ---------------------------------------------------------------------------------------------
# a synthetic run: 4 ranks, 5 steps, rank 2 slower by 15%

BASE_NS = [10_000_000, 12_000_000, 9_000_000, 11_000_000, 10_500_000]
SLOW_RANK, SLOW = 2, 1.15


def synthetic(marker: str = "ProfilerStep#{}", n_ranks: int = 4, slow_rank: int | None = SLOW_RANK) -> Trace:
    names, starts, durs, rks, cats, depth = [], [], [], [], [], []
    k_start, k_dur, k_rank = [], [], []
    for r in range(n_ranks):
        t = 1_000 * r  # ranks start a little apart
        for s, base in enumerate(BASE_NS):
            dur = int(base * SLOW) if r == slow_rank else base
            names.append(marker.format(s))
            starts.append(t)
            durs.append(dur)
            rks.append(r)
            cats.append("annotation")
            depth.append(0)
            # one op inside (not a marker) and one kernel that runs for half the step
            names.append("aten::mm")
            starts.append(t + 10)
            durs.append(dur // 4)
            rks.append(r)
            cats.append("op")
            depth.append(1)
            k_start.append(t + 100)
            k_dur.append(dur // 2)
            k_rank.append(r)
            t += dur + 50_000
    cpu = make_table("cpu_slices", len(names), {"name": names, "category": cats, "start": starts, "dur": durs, "rank": rks, "depth": depth, "pid": np.full(len(names), 7), "tid": np.full(len(names), 7)})
    kernels = make_table("kernels", len(k_start), {"name": ["gemm"] * len(k_start), "short_name": ["gemm"] * len(k_start), "start": k_start, "dur": k_dur, "rank": k_rank, "device": k_rank})
    meta = TraceMeta(path="synthetic", source_format="test", ranks=list(range(n_ranks)))
    return Trace(meta=meta, cpu_slices=cpu, kernels=kernels)


def test_straggler_on_a_synthetic_run() -> None:
    trace = synthetic()
    steps = R.step_times(trace)
    assert len(steps) == 4 * len(BASE_NS)
    assert steps["step"].tolist() == sorted(steps["step"].tolist())
    spread = R.step_spread(trace)
    assert spread["step"].tolist() == list(range(len(BASE_NS)))
    assert (spread["ranks"] == 4).all()
    assert spread["min_ns"].tolist() == BASE_NS
    assert spread["max_ns"].tolist() == [int(b * SLOW) for b in BASE_NS]
    assert spread["spread_ns"].tolist() == [int(b * SLOW) - b for b in BASE_NS]
    assert np.allclose(spread["spread_pct"], 15.0, atol=1e-3)
    assert (spread["slowest_rank"] == SLOW_RANK).all()
    assert (spread["fastest_rank"] == 0).all()  # the ties go to the lowest rank
    stats = R.rank_step_stats(trace)
    assert stats["rank"].iloc[0] == SLOW_RANK
    assert stats["times_slowest"].tolist() == [len(BASE_NS), 0, 0, 0]
    assert stats["excess_pct"].iloc[0] == pytest.approx(15.0, abs=1e-3)
    # the GPU work of each step is the kernel launched in it: half the step
    assert stats.set_index("rank").loc[0, "mean_busy_ns"] == pytest.approx(np.mean([b // 2 for b in BASE_NS]))
    assert R.straggler(trace) == SLOW_RANK


@pytest.mark.parametrize("marker", ["step_{}", "ProfilerStep#{}"])
def test_step_markers(marker: str) -> None:
    trace = synthetic(marker, slow_rank=1)
    assert R.straggler(trace) == 1
    assert set(R.step_times(trace)["name"]) == {marker.format(s) for s in range(len(BASE_NS))}


def test_no_straggler_without_steps_or_ranks() -> None:
    plain = synthetic("phase {}")
    assert R.step_times(plain).empty
    assert R.step_spread(plain).empty
    assert R.rank_step_stats(plain).empty
    assert R.straggler(plain) is None
    one = synthetic(n_ranks=1, slow_rank=None)
    assert (R.step_spread(one)["ranks"] == 1).all()
    assert R.straggler(one) is None


# ---------------------------------------------------------------------------------------------
# real traces


def test_summaries_per_rank(three_ranks: Path, sample_traces: Path) -> None:
    single = load(sample_traces / EAGER, use_cache=False)
    merged = load(three_ranks, use_cache=False)
    want = kernel_summary(single)
    by_rank = R.kernel_summary_by_rank(merged)
    assert by_rank["rank"].unique().tolist() == [0, 1, 2]
    for r in (0, 1, 2):
        got = by_rank[by_rank["rank"] == r].drop(columns="rank").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)


def test_generated_ranks_with_a_slow_rank(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """gen_large's rank files: tiled twice, rank 1 stretched by 25% is the straggler."""
    single = load(sample_traces / EAGER, use_cache=False)
    single_steps = R.step_times(single)
    paths = make_ranks(sample_traces / EAGER, tmp_path / "run", ranks=3, tile=2, slow_rank=1, slow_factor=1.25)
    assert [p.name for p in paths] == [f"rank-{r}.pt.trace.json" for r in range(3)]
    merged = load(tmp_path / "run", use_cache=False)
    assert merged.meta.ranks == [0, 1, 2]
    for r in (0, 1, 2):
        sub = R.rank_subtrace(merged, r)
        assert len(sub.kernels) == 2 * len(single.kernels)
        # the copies' ids do not alias: every launch links to its own kernel
        assert sub.kernels["correlation"].is_unique
        assert len(sub.flows) == 2 * len(single.flows)
    steps = R.step_times(merged)
    assert sorted(steps["step"].unique()) == list(range(2 * len(single_steps)))
    spread = R.step_spread(merged, steps)
    assert (spread["slowest_rank"] == 1).all()
    assert np.allclose(spread["spread_pct"], 25.0, atol=0.01)
    assert R.straggler(merged, steps) == 1

    assert cli.main(["summary", str(tmp_path / "run"), "--steps", "--format", "json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["straggler"] == 1
    assert len(out["steps"]) == 2 * len(single_steps)
    assert cli.main(["summary", str(tmp_path / "run"), "--by-rank", "--format", "csv", "-q"]) == 0
    csv = capsys.readouterr().out.splitlines()
    assert csv[0].startswith("rank,name,count,total_ns")
    assert {line.split(",")[0] for line in csv[1:]} == {"0", "1", "2"}
    assert cli.main(["summary", str(tmp_path / "run"), "--steps", "-q"]) == 0
    assert "straggler: rank 1" in capsys.readouterr().out


def test_steps_option_without_steps_is_a_user_error(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = eager_doc(sample_traces)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("step_")]
    write_rank(tmp_path, "nosteps.json", doc, None)
    assert cli.main(["summary", str(tmp_path / "nosteps.json"), "--steps", "-q"]) == 2
    assert "no steps found" in capsys.readouterr().err
