"""A step's modelled tensor-pipe use (SOL, or the MFU figure through the hook) against the
sampled Tensor Active of the real export, and the per-pixel extremes of a sampled track."""

from __future__ import annotations

import gzip
import math
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.gpu_metrics import DISAGREE, step_windows, tensor_check, tensor_checks
from kviewer.analysis.sol import sol_result
from kviewer.analysis.steps import find_steps
from kviewer.io import load
from kviewer.session.lod import SampledCounter

NAME = "gpt_train_gpu_metrics.sqlite.gz"


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(scope="module")
def real(sample_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, sqlite3.Connection]]:
    path = sample_traces / NAME
    if not path.exists():
        pytest.skip(f"{path} is not there")
    out = tmp_path_factory.mktemp("gmc") / "export.sqlite"
    with gzip.open(path, "rb") as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    db = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    yield load(path), db
    db.close()


def sql_tensor(db: sqlite3.Connection, t0: int, t1: int) -> float:
    return float(db.execute(
        "select avg(m.value) from GPU_METRICS m join TARGET_INFO_GPU_METRICS n on m.typeId = n.typeId and m.metricId = n.metricId "
        "where n.metricName = 'Tensor Active [Throughput %]' and m.timestamp >= ? and m.timestamp < ?", (t0, t1)).fetchone()[0])


def test_mfu_hook_against_sampled_tensor_active(real: tuple) -> None:
    trace, db = real
    steps = find_steps(trace, detect=False)
    assert len(steps) == 4
    t0, t1 = step_windows(steps)
    sampled = np.array([sql_tensor(db, int(a), int(b)) for a, b in zip(t0, t1)])
    sol = sol_result(trace).table
    # an MFU that agrees, one twice the sampled figure, none (the SOL path), one 20 % above
    mfu = np.array([sampled[0], 2 * sampled[1], math.nan, 1.2 * sampled[3]])
    checks = tensor_checks(trace, steps, sol, mfu)
    assert [c.sampled_pct for c in checks] == pytest.approx(list(sampled), rel=1e-12)
    assert [c.source for c in checks] == ["mfu", "mfu", "sol", "mfu"]
    # the nsys export has no shapes, so the SOL model knows no tensor FLOPs: unknown, never 0
    assert math.isnan(checks[2].modelled_pct) and checks[2].disagrees is None
    assert [checks[0].disagrees, checks[1].disagrees, checks[3].disagrees] == [False, True, False]
    assert checks[1].sentence() and "Tensor Active" in checks[1].sentence() and not checks[0].sentence()


def test_sol_path_sums_tensor_compute_time_in_the_window(real: tuple) -> None:
    """The SOL estimate: tensor-pipe t_compute_ns in the window (pro rata at the edges) over the
    window. The real export has no FLOPs, so the SOL table is given compute times of half each
    tensor kernel's duration here: the estimate must be half the tensor kernels' busy share."""
    trace, db = real
    sol = sol_result(trace).table.copy()
    tensor = sol["pipe"] == "tensor"
    sol.loc[tensor, "t_compute_ns"] = sol.loc[tensor, "dur"] * 0.5
    k = trace.kernels
    t0, t1 = 30_000_000, 40_000_000
    s, e = k["start"].to_numpy()[sol["id"]], k["end"].to_numpy()[sol["id"]]
    inside = tensor.to_numpy() & (s < t1) & (e > t0)
    expected = 0.5 * (np.minimum(e, t1) - np.maximum(s, t0))[inside].sum() / (t1 - t0) * 100.0
    check = tensor_check(trace, sol, t0, t1)
    assert check.source == "sol" and check.modelled_pct == pytest.approx(expected)
    assert check.sampled_pct == pytest.approx(sql_tensor(db, t0, t1))
    assert check.disagrees == (abs(expected - check.sampled_pct) / max(expected, check.sampled_pct) > DISAGREE)


def test_per_pixel_extremes_equal_brute_force() -> None:
    """min/max per pixel at every level of the block mipmap, against a loop over the samples
    (and the value held from the sample before each column)."""
    rng = np.random.default_rng(3)
    n = 50_000
    t = np.cumsum(rng.integers(90, 110, n)).astype(np.int64)
    v = rng.integers(0, 101, n).astype(np.float64)
    v[rng.integers(0, n, 5)] = 1000.0  # single-sample peaks
    c = SampledCounter.build(t, v)
    assert len(c.levels) >= 2
    for width in (100_000, 2000, 37):  # raw samples, one block level, the coarsest
        lo, hi = c.per_pixel_minmax(float(t[0]), float(t[-1]) + 1, width)
        assert np.nanmax(hi) == 1000.0 and np.nanmin(lo) == v.min()
    # ~5 samples a pixel: drawn from the raw samples, exactly (coarser zooms use the blocks,
    # whose extremes are the samples' own: checked above)
    edges = np.linspace(float(t[0]), float(t[-1]) + 1, 10_001)
    lo, hi = c.per_pixel_minmax(edges[0], edges[-1], 10_000)
    for i in range(0, 10_000, 37):
        sel = (t >= edges[i]) & (t < edges[i + 1])
        before = np.flatnonzero(t < edges[i])
        vals = list(v[sel]) + ([v[before[-1]]] if len(before) else [])
        assert (lo[i], hi[i]) == (min(vals), max(vals))
    # past the last sample nothing is held
    lo, hi = c.per_pixel_minmax(float(t[-1]) + 10_000, float(t[-1]) + 20_000, 10)
    assert np.isnan(hi).all()


def test_summary_steps_and_range_dock_check_the_mfu(real: tuple) -> None:
    """The MFU analysis' per-step figure goes through the same check: ``summary --steps`` gets
    ``mfu_tensor_disagrees`` per step, the Range dock's MFU line says when they disagree. The real
    export has no FLOPs (its MFU is unknown), so the MFU table is given here: one step agreeing
    with the sampled Tensor Active, one twice it, one unknown."""
    import pandas as pd

    from kviewer.analysis.gpu_metrics import steps_with_metrics
    from kviewer.session.mfu_view import mfu_tensor_sentence

    trace, db = real
    steps = find_steps(trace, detect=False)
    t0, t1 = step_windows(steps)
    sampled = np.array([sql_tensor(db, int(a), int(b)) for a, b in zip(t0, t1)])
    names = steps["step"].tolist()
    job = pd.DataFrame({"step": names, "mfu": [sampled[0] / 100, 2 * sampled[1] / 100, math.nan, 0.9 * sampled[3] / 100]})
    per_step = pd.DataFrame({"step": names})
    out = steps_with_metrics(trace, steps, per_step, None, mfu=job)
    flags = out["mfu_tensor_disagrees"].tolist()
    assert flags[0] is False and flags[1] is True and flags[3] is False
    assert flags[2] is None or flags[2] != flags[2]  # unknown stays unknown
    # without an MFU table the column is not there (the SOL check alone)
    assert "mfu_tensor_disagrees" not in steps_with_metrics(trace, steps, per_step, None).columns
    # the Range dock's sentence for the step whose MFU is twice the sampled activity, none for the others
    assert "Tensor Active" in mfu_tensor_sentence(trace, job["mfu"][1], int(t0[1]), int(t1[1]))
    assert mfu_tensor_sentence(trace, job["mfu"][0], int(t0[0]), int(t1[0])) == ""
    assert mfu_tensor_sentence(trace, math.nan, int(t0[2]), int(t1[2])) == ""
