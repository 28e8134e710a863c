"""Sampled GPU metrics of a real export: ``nsys profile --gpu-metrics-devices=all`` (metric set
gh100, 10 kHz) of 4 training steps of a small GPT on one H200 (NVTX ranges step_0..step_3),
nsys 2025.3.1 (sample_traces/gpt_train_gpu_metrics.sqlite.gz, made by the gpu-data helper).

Every figure kviewer prints is checked against SQL over the export's own GPU_METRICS /
TARGET_INFO_GPU_METRICS (and the step windows against SQL over its kernel and runtime tables),
computed here independently of the loader.
"""

from __future__ import annotations

import gzip
import io
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.cli import main
from kviewer.io import load
from tests.analysis.device_table import raw_value

NAME = "gpt_train_gpu_metrics.sqlite.gz"


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(scope="module")
def path(sample_traces: Path) -> Path:
    p = sample_traces / NAME
    if not p.exists():
        pytest.skip(f"{p} is not there")
    return p


@pytest.fixture(scope="module")
def db(path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sqlite3.Connection]:
    out = tmp_path_factory.mktemp("gm") / "export.sqlite"
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    yield con
    con.close()


def sql_stats(db: sqlite3.Connection, name: str, t0: int | None = None, t1: int | None = None) -> tuple[int, float, float]:
    where = "" if t0 is None else f" and m.timestamp >= {int(t0)} and m.timestamp < {int(t1)}"
    n, avg, mx = db.execute(
        "select count(*), avg(m.value), max(m.value) from GPU_METRICS m join TARGET_INFO_GPU_METRICS n "
        f"on m.typeId = n.typeId and m.metricId = n.metricId where n.metricName = ?{where}", (name,)
    ).fetchone()
    return int(n), float("nan") if avg is None else float(avg), float("nan") if mx is None else float(mx)


def test_every_sample_is_loaded(path: Path, db: sqlite3.Connection) -> None:
    trace = load(path)
    s = trace.gpu_samples
    assert len(s) == db.execute("select count(*) from GPU_METRICS").fetchone()[0] == 15_312
    names = {r[0] for r in db.execute("select metricName from TARGET_INFO_GPU_METRICS")}
    assert set(s["metric"].astype(str)) == names and len(names) == 22
    assert set(s["device"]) == {0}
    assert trace.meta.extra["gpu metrics"].startswith("22 metrics on 1 GPU(s), 10 kHz, 15,312 samples")
    for name in names:
        n, avg, mx = sql_stats(db, name)
        part = s[s["metric"] == name]
        scale = 1e6 if name.endswith("[MHz]") else 1.0  # the clocks are stored in Hz
        assert len(part) == n and part["value"].mean() == pytest.approx(avg / scale) and part["value"].max() == pytest.approx(mx / scale)
        assert (np.diff(part["t"].to_numpy()) > 0).all()
    clock = s[s["metric"] == "GPC Clock Frequency [MHz]"]["value"]
    assert 1000 < clock.max() <= 1980.1  # the H200's boost clock, MHz


def test_per_step_means_equal_sql(path: Path, db: sqlite3.Connection, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(path), "--steps", "--format", "csv", "-q"]) == 0
    steps = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(steps["step"]) == [0, 1, 2, 3]
    peak = raw_value("h200", "dram_gbs")
    for row in steps.itertuples():
        # the window: the GPU span of the kernels launched inside the step's NVTX range, by SQL
        s, e = db.execute("select start, end from NVTX_EVENTS e join StringIds t on t.id = e.textId where t.value = ? "
                          "union all select start, end from NVTX_EVENTS where text = ?", (f"step_{row.step}",) * 2).fetchone()
        w0, w1 = db.execute("select min(k.start), max(k.end) from CUPTI_ACTIVITY_KIND_KERNEL k join CUPTI_ACTIVITY_KIND_RUNTIME r "
                            "on r.correlationId = k.correlationId where r.start >= ? and r.start <= ?", (s, e)).fetchone()
        assert (row.window_start, row.window_end) == (w0, w1)
        n, sm, _ = sql_stats(db, "SMs Active [Throughput %]", w0, w1)
        assert n > 50  # 10 kHz over 7-11 ms
        assert row.sm_active_pct == pytest.approx(sm, rel=1e-12)
        assert row.tensor_active_pct == pytest.approx(sql_stats(db, "Tensor Active [Throughput %]", w0, w1)[1], rel=1e-12)
        rd = sql_stats(db, "DRAM Read Bandwidth [Throughput %]", w0, w1)[1]
        wr = sql_stats(db, "DRAM Write Bandwidth [Throughput %]", w0, w1)[1]
        assert row.dram_bw_gbps == pytest.approx((rd + wr) / 100.0 * peak, rel=1e-12)
        assert row.dram_bw_gbps <= peak  # achieved never above peak


#: names nsys recipe gpu_metric_util_sum prints without their " [Throughput %]"
RECIPE_SHORT = {"SMs Active", "SM Issue", "Tensor Active", "Unallocated Warps in Active SMs"}


def recipe_name(name: str) -> str:
    base = name.removesuffix(" [Throughput %]")
    return base if base in RECIPE_SHORT else name


def test_gpu_metrics_report_equals_nvidias_recipe(path: Path, db: sqlite3.Connection, sample_traces: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """nsys 2025.3.1 has no GPU-metrics report in `nsys stats` (its --help-reports lists none); its
    summary is `nsys recipe gpu_metric_util_sum` (rank_stats.csv, run by the gpu-data helper on the
    same report). Every cell equals it, but the [MHz] clocks, which the recipe prints in Hz."""
    recipe = pd.read_csv(sample_traces / "gpt_train_gpu_metrics_recipe_gpu_metric_util_sum.csv")
    assert main(["stats", str(path), "--report", "gpu_metrics", "--format", "csv", "-q"]) == 0
    ours = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert list(ours.columns) == list(recipe.columns)
    assert len(ours) == len(recipe) == 22
    theirs = recipe.set_index("Metric Name")
    for r in ours.to_dict(orient="records"):
        t = theirs.loc[recipe_name(r["Metric Name"])]
        scale = 1e6 if r["Metric Name"].endswith("[MHz]") else 1.0
        assert (r["GPU ID"], r["Count"], r["Rank"]) == (t["GPU ID"], t["Count"], t["Rank"]) == (0, 695, 0)
        for col in ("Mean", "Std", "Min", "Q1", "Median", "Q3", "Max", "Sum"):
            # both print one decimal (half-up here, pandas' half-even there; the clocks in MHz here)
            assert r[col] == pytest.approx(t[col] / scale, abs=0.05 + 1e-9 + 5e-7 * abs(t[col] / scale)), (r["Metric Name"], col)
        # and independently of both: SQL over the samples of the capture (time >= its start)
        n, avg, mx = sql_stats(db, r["Metric Name"], 0, 2**62)
        assert r["Count"] == n and r["Mean"] == pytest.approx(avg / scale, abs=0.05 + 1e-9)


def test_per_step_means_equal_nvidias_projected_nvtx_recipe(path: Path, sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`nsys recipe gpu_metric_util_sum --per-projected-nvtx`: per NVTX range projected onto the
    GPU (the span of the GPU work it launched), the metrics' statistics. kviewer's step window is
    that projection: the per-step means equal NVIDIA's to its one decimal."""
    recipe = pd.read_csv(sample_traces / "gpt_train_gpu_metrics_recipe_gpu_metric_util_sum_per-projected-nvtx.csv")
    assert main(["summary", str(path), "--steps", "--format", "csv", "-q"]) == 0
    steps = pd.read_csv(io.StringIO(capsys.readouterr().out))
    trace = load(path)
    s = trace.gpu_samples
    for row in steps.itertuples():
        mine = recipe[recipe["Name"] == f"step_{row.step}"].set_index("Metric Name")
        n = int(((s["metric"] == "SMs Active [Throughput %]") & (s["t"] >= row.window_start) & (s["t"] < row.window_end)).sum())
        assert n == mine.loc["SMs Active", "Count"]
        assert row.sm_active_pct == pytest.approx(mine.loc["SMs Active", "Mean"], abs=0.05 + 1e-9)
        assert row.tensor_active_pct == pytest.approx(mine.loc["Tensor Active", "Mean"], abs=0.05 + 1e-9)


def test_range_dock_numbers_equal_sql(path: Path, db: sqlite3.Connection) -> None:
    from kviewer.analysis.timerange import range_summary

    trace = load(path)
    t0, t1 = 30_000_000, 40_000_000  # inside step_1 .. step_2
    rs = range_summary(trace, t0, t1)
    assert rs.gpu_metrics is not None and "gpu_metrics" in rs.sections()
    for r in rs.gpu_metrics.itertuples():
        n, avg, mx = sql_stats(db, r.metric, t0, t1)
        scale = 1e6 if r.metric.endswith("[MHz]") else 1.0
        avg, mx = avg / scale, mx / scale
        values = [v / scale for (v,) in db.execute(
            "select m.value from GPU_METRICS m join TARGET_INFO_GPU_METRICS n on m.typeId = n.typeId and m.metricId = n.metricId "
            "where n.metricName = ? and m.timestamp >= ? and m.timestamp < ?", (r.metric, t0, t1))]
        assert r.samples == n == len(values) and r.mean == pytest.approx(avg) and r.max == pytest.approx(mx)
        assert r.p95 == pytest.approx(np.percentile(values, 95)) and r.p50 == pytest.approx(np.median(values))


def test_timeline_tracks_show_the_peaks(path: Path, db: sqlite3.Connection) -> None:
    from kviewer.session.lod import SampledCounter
    from kviewer.session.tracks import CounterTrack, Group, TraceTracks

    tracks = TraceTracks.build(load(path))
    gpu = next(g for g in tracks.root.children if isinstance(g, Group) and g.label.startswith("GPU 0"))
    metric = [c for c in gpu.children if isinstance(c, CounterTrack) and c.kind == "gpu_metric"]
    assert [c.label for c in metric] == ["GR Active", "SMs Active", "SM Issue", "Tensor Active", "DRAM Read Bandwidth", "DRAM Write Bandwidth"]
    more = [c for c in gpu.children if isinstance(c, Group) and c.label.startswith("more GPU metrics")]
    assert len(more) == 1 and more[0].collapsed and len(more[0].children) == 22 - 6
    sm = next(c for c in metric if c.label == "SMs Active")
    assert isinstance(sm.counter, SampledCounter)
    t = sm.counter.t
    # at 40 pixels for the whole capture every pixel holds ~17 samples: the pixels' maxima and
    # minima are the samples' own extremes, which a mean per pixel would flatten
    lo, hi = sm.counter.per_pixel_minmax(float(t[0]), float(t[-1]) + 1, 40)
    n, _, mx = sql_stats(db, "SMs Active [Throughput %]")
    mn = db.execute("select min(m.value) from GPU_METRICS m join TARGET_INFO_GPU_METRICS n on m.typeId = n.typeId and "
                    "m.metricId = n.metricId where n.metricName = 'SMs Active [Throughput %]'").fetchone()[0]
    assert np.nanmax(hi) == mx == 97 and np.nanmin(lo) == mn
    means = np.array([np.mean(sm.counter.v[(t >= a) & (t < b)]) for a, b in zip(np.linspace(t[0], t[-1] + 1, 41)[:-1], np.linspace(t[0], t[-1] + 1, 41)[1:])])
    assert np.nanmax(means) < mx  # the peak a per-pixel mean would hide
