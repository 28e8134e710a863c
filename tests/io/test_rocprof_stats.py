"""rocprof's own kernel statistics (results.stats.csv, rocprofv3 *_kernel_stats.csv) open as a
kernel summary without a timeline. Checked against the files read independently here (the csv
module, rows split from the right) and against the per-dispatch results.csv of the same run."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.cli import main
from kviewer.core.names import strip_kd
from kviewer.errors import LoadError
from kviewer.io import load

STATS = ["gunrock_mi300/results.stats.csv", "hpctraining_finite_difference/results.stats.csv", "kokkos_hip_stats/results.stats.csv"]


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(scope="module")
def rp(samples: Path) -> Path:
    return samples / "rocprof"


def read_stats(path: Path) -> dict[str, list[float]]:
    """name -> the numeric fields, each line split from the right by the header's field count
    (Kokkos names hold unquoted commas)."""
    lines = path.read_text().splitlines()
    k = len(next(csv.reader([lines[0]]))) - 1
    out: dict[str, list[float]] = {}
    for line in lines[1:]:
        if not line.strip():
            continue
        parts = line.rsplit(",", k)
        name = parts[0][1:-1] if parts[0].startswith('"') and parts[0].endswith('"') else parts[0]
        out[strip_kd(name)] = [float(x) for x in parts[1:]]
    return out


@pytest.mark.parametrize("rel", STATS)
def test_summary_is_the_files_own_numbers(rp: Path, rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = rp / rel
    trace = load(path)
    trace.validate()
    assert trace.meta.summary_only and trace.meta.timeline_needs
    assert len(trace.kernels) == 0 and trace.span_ns() is None
    theirs = read_stats(path)
    assert len(trace.kernel_stats) == len(theirs)
    assert main(["summary", str(path), "--format", "csv", "-q"]) == 0
    ours = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False, na_values=[""])
    assert set(ours["name"]) == set(theirs)
    for row in ours.itertuples():
        calls, total, avg, pct = theirs[row.name][:4]
        assert (row.count, row.total_ns) == (calls, total)
        assert row.avg_ns == pytest.approx(avg) and row.time_pct == pytest.approx(pct)
        # v1 says nothing of median, min, max or deviation: unknown, never 0
        assert np.isnan(row.med_ns) and np.isnan(row.min_ns) and np.isnan(row.max_ns) and np.isnan(row.std_ns)
    assert list(ours["total_ns"]) == sorted(ours["total_ns"], reverse=True)


@pytest.mark.parametrize("run", ["gunrock_mi300", "hpctraining_finite_difference"])
def test_compare_with_the_dispatch_trace_of_the_same_run(rp: Path, run: str, capsys: pytest.CaptureFixture[str]) -> None:
    """stats vs results.csv: every name matched, the totals rocprof summed equal the dispatch
    durations summed here from results.csv, and nothing the summary lacks is made up."""
    stats, dispatches = rp / run / "results.stats.csv", rp / run / "results.csv"
    totals: dict[str, int] = defaultdict(int)
    calls: dict[str, int] = defaultdict(int)
    with open(dispatches, newline="") as f:
        for rec in csv.DictReader(f):
            name = strip_kd(rec["KernelName"])
            totals[name] += int(rec["EndNs"]) - int(rec["BeginNs"])
            calls[name] += 1
    assert main(["compare", str(stats), str(dispatches), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    groups = doc["groups"]
    assert {g["status"] for g in groups} == {"unchanged"} and {g["matched_by"] for g in groups} == {"name"}
    # rows by full name (B's groups also split by launch size; rocprof's summary does not)
    got_a: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    got_b: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for g in groups:
        got_a[g["name_b"]][0] += g["count_a"]
        got_a[g["name_b"]][1] += g["total_a_ns"]
        got_b[g["name_b"]][0] += g["count_b"]
        got_b[g["name_b"]][1] += g["total_b_ns"]
    want = {n: [calls[n], totals[n]] for n in totals}
    assert dict(got_b) == want and dict(got_a) == want
    assert doc["a"]["kernel_time_ns"] == doc["b"]["kernel_time_ns"] == sum(totals.values())
    by = {t["metric"]: t for t in doc["totals"]}
    assert by["kernel count"]["a"] == by["kernel count"]["b"] == sum(calls.values())
    assert by["GPU span"]["a"] is None and by["GPU busy time"]["a"] is None  # a summary has no times


def test_rocprofv3_kernel_stats_columns(rp: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """rocprofv3's stats shape (Min/Max/StdDev after Percentage): the real hip_api_stats.csv with
    its numbers kept byte for byte and each API name replaced by a kernel name (kernel_stats.csv
    shares the columns; we have no real one)."""
    src = rp / "rocprofv3_sdk_docs_2024/hip_api_stats.csv"
    path = tmp_path / "1234_kernel_stats.csv"
    lines = src.read_text().splitlines()
    out = [lines[0]] + [f'"void kernel_{i}<float>(float*, int)"' + line[line.index('",') + 1:] for i, line in enumerate(lines[1:])]
    path.write_text("\n".join(out) + "\n")
    trace = load(path)
    assert trace.meta.summary_only and trace.meta.tool == "rocprofv3"
    theirs = read_stats(path)
    assert main(["summary", str(path), "--format", "json", "-q"]) == 0
    for row in json.loads(capsys.readouterr().out):
        calls, total, avg, pct, lo, hi, std = theirs[row["name"]]
        assert (row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) == (calls, total, lo, hi)
        assert row["std_ns"] == pytest.approx(std) and row["avg_ns"] == pytest.approx(avg) and row["time_pct"] == pytest.approx(pct)
        assert row["med_ns"] is None


@pytest.mark.parametrize("rel", ["kokkos_hip_stats/results.hip_stats.csv", "rocprofv3_sdk_docs_2024/hip_api_stats.csv"])
def test_api_statistics_are_still_refused(rp: Path, rel: str, tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no per-dispatch start times"):
        load(rp / rel)
    # by content: renamed to a kernel-statistics name, still an API summary
    renamed = tmp_path / "results.stats.csv"
    shutil.copyfile(rp / rel, renamed)
    with pytest.raises(LoadError, match="no per-dispatch start times"):
        load(renamed)


def test_a_renamed_kernel_summary_opens_the_same(rp: Path, tmp_path: Path) -> None:
    src = rp / "kokkos_hip_stats/results.stats.csv"
    renamed = tmp_path / "whatever.txt"
    shutil.copyfile(src, renamed)
    a, b = load(src), load(renamed)
    assert b.meta.summary_only
    pd.testing.assert_frame_equal(a.kernel_stats, b.kernel_stats)


def test_info_and_timeline_say_what_the_timeline_needs(rp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = rp / "hpctraining_finite_difference/results.stats.csv"
    assert main(["info", str(path), "--format", "json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary_only"] is True and "results.csv" in doc["timeline_needs"]
    from kviewer.session.tracks import TraceTracks

    tracks = TraceTracks.build(load(path))
    assert not tracks.lanes
    notes = [g for g in tracks.root.children if getattr(g, "note", "")]
    assert len(notes) == 1 and notes[0].note == doc["timeline_needs"]


def test_short_name_rows_add_up_and_unknown_extremes_stay_unknown() -> None:
    """By short name, the rows of one short name add up; min/max are the extremes of what the
    file says, unknown when any of its rows' is (pandas 2 and 3 alike: 2 has no skipna there)."""
    from kviewer.analysis.stats import kernel_summary
    from kviewer.core import Trace, TraceMeta, make_table

    names = ["void k<float>(int)", "void k<half>(int)", "void m<float>(int)", "void m<half>(int)"]
    ks = make_table("kernel_stats", 4, {
        "name": names, "count": [2, 3, 1, 1], "total_ns": [20, 60, 5, 7], "avg_ns": [10.0, 20.0, 5.0, 7.0],
        "med_ns": [np.nan] * 4, "min_ns": [8.0, 15.0, 5.0, np.nan], "max_ns": [12.0, 30.0, 5.0, np.nan],
        "std_ns": [np.nan] * 4, "time_pct": [20.0, 60.0, 5.0, 15.0],
    })  # fmt: skip
    trace = Trace(meta=TraceMeta(path="s.csv", source_format="test", summary_only=True), kernel_stats=ks)
    got = kernel_summary(trace, "short_name").set_index("name")
    assert sorted(got.index) == ["k", "m"]
    assert got.loc["k", "count"] == 5 and got.loc["k", "total_ns"] == 80 and got.loc["k", "avg_ns"] == 16.0
    assert got.loc["k", "min_ns"] == 8.0 and got.loc["k", "max_ns"] == 30.0
    assert np.isnan(got.loc["m", "min_ns"]) and np.isnan(got.loc["m", "max_ns"])  # one row says nothing: unknown
    assert got.loc["m", "total_ns"] == 12
