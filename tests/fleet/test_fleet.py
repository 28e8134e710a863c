"""``kviewer fleet``: the same tables on a real Dask cluster as in one process, agreement with
``kviewer summary FOLDER --steps``, stragglers and their reason, runs against a baseline,
bad files skipped, a lost worker's file retried once, and Dask kept out of start-up."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.cli import main
from kviewer.fleet import engine
from kviewer.fleet.analyze import analyze
from kviewer.fleet.engine import expand, summarize_here
from kviewer.fleet.record import FileSummary, summarize_file
from tests.bench.gen_fleet import SLOW_GROUP, write_ranks

TABLES = ("runs", "files", "ranks", "steps", "rank_steps", "groups", "rank_groups", "stragglers", "series")


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Runs of four ranks: rank 2 of run b is a planted straggler (slow layer norms) and run b has a
    damaged rank file; every rank of run c is slow (a regression)."""
    root = tmp_path_factory.mktemp("fleet")
    write_ranks(root / "a", 4, seed=1)
    write_ranks(root / "b", 4, straggler=2, slow_us=300.0, seed=2)
    write_ranks(root / "c", 4, all_slow=True, slow_us=100.0, seed=3)
    (root / "b" / "rank-9.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "na'))
    return root


def _run(*args: str) -> int:
    return main(["fleet", *args, "-q"])


def _tables(out: Path) -> dict[str, pd.DataFrame]:
    return {t: pd.read_csv(out / f"{t}.csv") for t in TABLES}


def _same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    for name in TABLES:
        x, y = a[name], b[name]
        if name == "files":  # how long a file took differs from run to run
            x, y = x.drop(columns="seconds"), y.drop(columns="seconds")
        pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=1e-12, obj=name)


def test_local_cluster_equals_one_process(fleet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    distributed = pytest.importorskip("distributed")
    assert _run(str(fleet_dir), "-o", str(tmp_path / "here"), "--scheduler", "none") == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", **engine.NO_DASHBOARD) as cluster:
        assert cluster.scheduler_address.startswith("tcp://")
        assert _run(str(fleet_dir), "-o", str(tmp_path / "dask"), "--scheduler", cluster.scheduler_address) == 0
    here, there = _tables(tmp_path / "here"), _tables(tmp_path / "dask")
    _same(here, there)
    # and both equal the computation on the summaries made here, straight from the files
    files, runs = expand([str(fleet_dir)])
    direct = analyze([summarize_file(f.path, f.run) for f in files], runs)
    assert list(there["stragglers"]["rank"]) == list(direct.stragglers["rank"])
    np.testing.assert_allclose(there["rank_steps"]["dur"], direct.rank_steps["dur"].astype(np.int64))
    err = capsys.readouterr().err
    assert "rank-9.pt.trace.json.gz" in err  # the damaged file, named


def test_straggler_and_reason_agree_with_summary_steps(fleet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(str(fleet_dir / "b"), "-o", str(tmp_path / "out"), "--scheduler", "none") == 0
    capsys.readouterr()
    t = _tables(tmp_path / "out")
    sg = t["stragglers"]
    assert int(sg["rank"].iloc[0]) == 2
    assert sg["reason_kind"].iloc[0] == "kernel group" and SLOW_GROUP in sg["reason"].iloc[0]
    # the damaged rank is reported by name and skipped; the others are read
    files = t["files"].set_index("path")
    bad = str(fleet_dir / "b" / "rank-9.pt.trace.json.gz")
    assert files.loc[bad, "status"] == "failed" and pd.isna(files.loc[bad, "rank"])
    assert (files["status"] == "ok").sum() == 4
    # kviewer summary FOLDER --steps on the same (good) files
    good = tmp_path / "good"
    shutil.copytree(fleet_dir / "b", good, ignore=shutil.ignore_patterns("rank-9*"))
    assert main(["summary", str(good), "--steps", "--format", "json", "-q"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert ref["straggler"] == int(sg["rank"].iloc[0])
    spread = pd.DataFrame(ref["steps"])
    mine = t["steps"].drop(columns="run")
    pd.testing.assert_frame_equal(mine[spread.columns].astype(float), spread.astype(float), check_exact=False, rtol=1e-12)
    ranks = pd.DataFrame(ref["ranks"])
    np.testing.assert_allclose(sg["mean_ns"], ranks["mean_ns"])
    assert list(sg["rank"]) == list(ranks["rank"])


def test_straggler_of_a_run_read_alone(fleet_dir: Path) -> None:
    files, runs = expand([str(fleet_dir / "b" / "rank-*.pt.trace.json.gz")])
    assert runs == [str(fleet_dir / "b")] and len(files) == 5
    r = analyze(summarize_here(files), runs)
    assert int(r.runs["straggler"].iloc[0]) == 2


def test_communication_overlap_and_idle_are_known(fleet_dir: Path, tmp_path: Path) -> None:
    files, runs = expand([str(fleet_dir / "a")])
    r = analyze(summarize_here(files), runs)
    ranks = r.ranks
    assert (ranks["comm_ns"] > 0).all() and (ranks["overlap_ns"] > 0).all()
    assert np.allclose(ranks["exposed_comm_ns"], ranks["comm_ns"] - ranks["overlap_ns"])
    # idle is measured inside the steps: never more than the gaps of the whole capture
    assert (ranks["idle_ns"] >= 0).all() and (ranks["idle_ns"] <= ranks["span_ns"] - ranks["busy_ns"] + 1).all()
    assert r.groups["comm"].sum() == 1


def test_runs_against_the_baseline_and_fail_if_slower(fleet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(fleet_dir / "a"), str(fleet_dir / "b"), str(fleet_dir / "c"), "-o", str(tmp_path / "o"), "--scheduler", "none", "--report", "md"]
    assert _run(*args, "--fail-if-slower", "1000") == 0
    t = _tables(tmp_path / "o")
    runs = t["runs"]
    assert list(runs["baseline"]) == [True, False, False]
    c = t["series"][t["series"]["run"] == str(fleet_dir / "c")]
    slow = c[c["group"].str.contains(SLOW_GROUP)]
    assert len(slow) == 1 and (slow["status"] == "changed").all() and (slow["delta_ns"] > slow["noise_ns"]).all()
    # the other groups moved by the ranks' jitter only: within the noise
    assert (c.loc[~c["group"].str.contains(SLOW_GROUP) & ~c["comm"], "status"] == "unchanged").all()
    slower = float(runs["slower_pct"].iloc[2])
    assert slower > 0.5
    assert _run(*args, "--baseline", "c", "--fail-if-slower", "1000") == 0
    assert bool(_tables(tmp_path / "o")["runs"]["baseline"].iloc[2])
    capsys.readouterr()
    assert _run(*args, "--fail-if-slower", f"{slower / 2:.3f}") == 1
    assert "slower than the baseline" in capsys.readouterr().err
    assert _run(*args, "--fail-if-slower", "-1") == 2
    md = (tmp_path / "o" / "fleet.md").read_text()
    assert "Straggler: rank 2" in md and (tmp_path / "o" / "fleet_files").is_dir()


def test_report_sqlite_and_json(fleet_dir: Path, tmp_path: Path) -> None:
    import sqlite3

    out = tmp_path / "o"
    assert _run(str(fleet_dir / "b"), "-o", str(out), "--scheduler", "none") == 0
    html = (out / "fleet.html").read_text()
    assert "data:image/svg+xml;base64," in html and "<script" not in html
    conn = sqlite3.connect(out / "fleet.sqlite")
    try:
        assert conn.execute("SELECT kind FROM kviewer_schema").fetchone() == ("fleet",)
        (n,) = conn.execute("SELECT count(*) FROM fleet_ranks").fetchone()
        assert n == 4
        # unknown stays unknown: the damaged file has no rank
        assert conn.execute("SELECT rank FROM fleet_files WHERE status = 'failed'").fetchone() == (None,)
    finally:
        conn.close()
    doc = json.loads((out / "fleet.json").read_text())
    assert doc["stragglers"][0]["rank"] == 2
    assert _run(str(fleet_dir / "b"), "-o", str(tmp_path / "np"), "--scheduler", "none", "--no-pictures") == 0
    assert "data:image/svg" not in (tmp_path / "np" / "fleet.html").read_text()


def test_steps_are_the_files_own_markers(sample_traces: Path, tmp_path: Path) -> None:
    """Per-rank torch and nsys files: every step time is its ProfilerStep / NVTX step_N range."""
    from kviewer.io.registry import load

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(sample_traces / "h200_llm_block_eager.pt.trace.json.gz", run / "rank-0.pt.trace.json.gz")
    shutil.copy(sample_traces / "h200_resnet18.pt.trace.json.gz", run / "rank-1.pt.trace.json.gz")
    nsys = tmp_path / "nsys"
    nsys.mkdir()
    with gzip.open(sample_traces / "h200_llm_train_nvtx.sqlite.gz") as src, open(nsys / "report_rank0.sqlite", "wb") as dst:
        shutil.copyfileobj(src, dst)
    files, runs = expand([str(run), str(nsys)])
    r = analyze(summarize_here(files), runs)
    assert (r.files["status"] == "ok").all()
    checked = 0
    for f in files:
        t = load(f.path, use_cache=False)
        c = t.cpu_slices
        names = c["name"].astype(str)
        mine = r.rank_steps[r.rank_steps["run"] == f.run]
        rank = int(r.files.set_index("path").loc[f.path, "rank"])
        mine = mine[mine["rank"] == rank]
        assert len(mine)
        for row in mine.itertuples():
            marker = c[(names == row.name).to_numpy()].sort_values("start").iloc[0]
            assert row.dur == int(marker["end"] - marker["start"])
            checked += 1
    assert checked >= 5


def test_a_lost_worker_costs_only_its_file(fleet_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task that fails (its worker died) is retried once; failing again marks its file only."""
    distributed = pytest.importorskip("distributed")
    flaky = tmp_path / "flaky"
    calls = tmp_path / "calls"  # (the task function travels as a copy: count in a file)

    def summarize(path: str, run: str = "") -> FileSummary:
        with open(calls, "a") as f:
            f.write(Path(path).name + "\n")
        if path.endswith("rank-1.pt.trace.json.gz"):
            raise OSError("worker lost")  # every time: lost twice
        if path.endswith("rank-3.pt.trace.json.gz") and not flaky.exists():
            flaky.touch()
            raise OSError("worker lost")  # once: the retry reads it
        return summarize_file(path, run)

    monkeypatch.setattr(engine, "summarize_file", summarize)
    files, runs = expand([str(fleet_dir / "a")])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", **engine.NO_DASHBOARD) as cluster:
        out = engine.summarize_on_dask(files, scheduler=cluster.scheduler_address)
    by = {Path(s.path).name: s for s in out}
    assert by["rank-1.pt.trace.json.gz"].error_kind == engine.WORKER_LOST
    assert by["rank-3.pt.trace.json.gz"].ok and by["rank-0.pt.trace.json.gz"].ok
    assert calls.read_text().split().count("rank-1.pt.trace.json.gz") == 2


def test_user_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(str(tmp_path / "nothing"), "-o", str(tmp_path / "o")) == 2
    assert "nothing" in capsys.readouterr().err
    assert _run("s3://kviewer-no-bucket/run/", "-o", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "s3" in err
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "rank-0.json").write_text("not a trace")
    assert _run(str(tmp_path / "r"), "-o", str(tmp_path / "o"), "--scheduler", "none") == 2
    assert "rank-0.json" in capsys.readouterr().err
    # without Dask, asked for workers: one line saying how to get it
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert _run(str(tmp_path / "r"), "-o", str(tmp_path / "o"), "--workers", "1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kviewer: error: kviewer fleet needs Dask: pip install 'kviewer[fleet]'"]


def test_a_small_fleet_runs_in_this_process_and_says_why(fleet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    files, _runs = engine.expand([str(fleet_dir / "a")])
    here, why = engine.choose_here(files)
    assert here and "in this process" in why and f"{len(files):,} files" in why
    # decided on the files: many of them (or unknown sizes) go to the cluster
    assert not engine.choose_here(files * 400)[0]
    assert not engine.choose_here([engine.FleetFile("s3://bucket/run/rank-0.json", "s3://bucket/run")])[0]
    # no Dask needed for it: the default run of a small fleet works without it
    monkeypatch.setitem(sys.modules, "distributed", None)
    assert _run(str(fleet_dir / "a"), "-o", str(tmp_path / "o")) == 0
    assert "summarised in this process" in capsys.readouterr().err


def test_fsspec_urls_are_read(fleet_dir: Path, tmp_path: Path) -> None:
    """A URL (here fsspec's in-memory filesystem) is read through fsspec, named as given."""
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for p in sorted((fleet_dir / "a").iterdir())[:2]:
        fs.pipe(f"/kvfleet/run/{p.name}", p.read_bytes())
    try:
        files, runs = expand(["memory://kvfleet/run"])
        assert [f.path for f in files] == ["memory:///kvfleet/run/rank-0.pt.trace.json.gz", "memory:///kvfleet/run/rank-1.pt.trace.json.gz"]
        r = analyze(summarize_here(files), runs)
        assert (r.files["status"] == "ok").all() and list(r.ranks["rank"]) == [0, 1]
    finally:
        fs.rm("/kvfleet", recursive=True)


def test_start_up_does_not_import_dask() -> None:
    code = ("import sys; from kviewer.cli import build_parser; build_parser().parse_args(['fleet', 'x', '-o', 'y']); "
            "import kviewer.fleet.command, kviewer.fleet.analyze; "
            "print([m for m in ('dask', 'distributed') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_default_local_cluster_of_processes(fleet_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No --scheduler: a LocalCluster of worker processes is started and closed again."""
    import multiprocessing

    pytest.importorskip("distributed")
    assert _run(str(fleet_dir / "a"), "-o", str(tmp_path / "here"), "--scheduler", "none") == 0
    assert _run(str(fleet_dir / "a"), "-o", str(tmp_path / "local"), "--workers", "1") == 0
    _same(_tables(tmp_path / "here"), _tables(tmp_path / "local"))
    assert multiprocessing.active_children() == []
    assert _run(str(fleet_dir / "a"), "-o", str(tmp_path / "x"), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1") == 2


def test_workers_without_kviewer_are_a_user_error(fleet_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")

    def summarize(path: str, run: str = "") -> FileSummary:
        raise ModuleNotFoundError("No module named 'kviewer'", name="kviewer")

    monkeypatch.setattr(engine, "summarize_file", summarize)
    files, _ = expand([str(fleet_dir / "a")])
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp", **engine.NO_DASHBOARD) as cluster:
        with pytest.raises(engine.FleetError, match="cannot import kviewer"):
            engine.summarize_on_dask(files, scheduler=cluster.scheduler_address)


def die_once(path: str, run: str = "") -> FileSummary:
    """Kill this worker process the first time rank-2 comes (a real lost worker)."""
    import os

    marker = Path(os.environ["KVIEWER_TEST_DIE_MARKER"])
    if path.endswith("rank-2.pt.trace.json.gz") and not marker.exists():
        marker.touch()
        os._exit(1)
    return summarize_file(path, run)


@pytest.mark.parametrize("batch", [1, 2])
def test_a_killed_worker_process_costs_a_retry(fleet_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int) -> None:
    """Tasks of one file, or of two (the failed batch is retried file by file)."""
    distributed = pytest.importorskip("distributed")
    import dask

    marker = tmp_path / "died"
    monkeypatch.setenv("KVIEWER_TEST_DIE_MARKER", str(marker))
    monkeypatch.setattr(engine, "summarize_file", die_once)
    monkeypatch.setattr(engine, "batch_size", lambda n, w: batch)
    files, runs = expand([str(fleet_dir / "a")])
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, **engine.NO_DASHBOARD) as cluster:
            out = engine.summarize_on_dask(files, scheduler=cluster.scheduler_address)
    assert marker.exists()  # a worker did die
    assert all(s.ok for s in out) and len(out) == 4
    here = analyze(summarize_here(files), runs)
    pd.testing.assert_frame_equal(analyze(out, runs).rank_steps, here.rank_steps)


def test_relative_paths_reach_workers_absolute(fleet_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(fleet_dir)
    files, runs = expand(["a", "c/rank-*.pt.trace.json.gz"])
    assert runs == [str(fleet_dir / "a"), str(fleet_dir / "c")]
    assert all(Path(f.path).is_absolute() for f in files) and len(files) == 8


def test_batches() -> None:
    assert engine.batch_size(4, 2) == 1
    assert engine.batch_size(1024, 2) == engine.MAX_BATCH
    assert engine.batch_size(100, 2) == 6
