"""``kviewer export`` and ``kviewer sql``: the unified model in one SQLite schema for every format."""

from __future__ import annotations

import hashlib
import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer import sqldb
from kviewer.analysis.summary import kernel_summary
from kviewer.core import schema
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
#: one real file per format family: bundled ones, then ../shared/samples ones
BUNDLED = [EAGER, "h200_llm_train_nvtx.sqlite.gz", "h200_llm_block_eager_full.raw.csv.gz"]
SHARED = [
    "ncu/h200_llm_block_eager.ncu-rep",
    "ncu/h200_llm_block_eager.details.csv",
    "ncu/cublaslt_ncu.log",
    "rocprof/gunrock_mi300/results.db",
    "rocprof/rocprofv2_omniperf_mi300x/timestamps.csv",
    "rocprof/hpctraining_seismic_pmc/data_movement.csv",
    "rocprof/rocprofv3_sdk_docs_2024/kernel_trace.csv",
    "torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "nsys/perlmutter-cloverleaf-cuda.sqlite",
    "rocprof/hpctraining_finite_difference/results.csv",
    "rocprof/rocprofv3_json_tracelens/908_results.json.gz",
    "rocprof/rocprofv3_2025/ps_file_kernel_trace.csv",
    "torch/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KVIEWER_NO_CACHE="1")
    return subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, env=env, timeout=300, cwd=cwd)


def _files(sample_traces: Path, samples_dir: Path | None) -> list[Path]:
    files = [sample_traces / f for f in BUNDLED]
    if samples_dir is not None:
        files += [samples_dir / f for f in SHARED]
    return files


@pytest.fixture
def maybe_samples(request: pytest.FixtureRequest) -> Path | None:
    try:
        return request.getfixturevalue("samples")  # type: ignore[no-any-return]
    except pytest.skip.Exception:
        return None


def _check_trace(conn: sqlite3.Connection, trace, trace_id: int) -> None:  # type: ignore[no-untyped-def]
    # every table holds exactly the trace's rows (what kviewer info counts)
    for name, n in trace.sizes().items():
        got = conn.execute(f"SELECT count(*) FROM {name} WHERE trace_id = ?", (trace_id,)).fetchone()[0]
        assert got == n, (trace.meta.path, name, got, n)
    # the summary view equals kviewer summary
    ours = kernel_summary(trace)
    view = pd.read_sql_query("SELECT * FROM kernel_summary WHERE trace_id = ?", conn, params=(trace_id,))
    assert list(view["name"]) == list(ours["name"]), trace.meta.path
    for col in ("count", "total_ns", "min_ns", "max_ns"):
        assert view[col].astype(np.int64).tolist() == ours[col].astype(np.int64).tolist(), col
    for col in ("avg_ns", "med_ns", "std_ns", "time_pct"):
        np.testing.assert_allclose(view[col].to_numpy(float), ours[col].to_numpy(float), rtol=1e-9, atol=1e-6, err_msg=col)
    # unknown ints are NULL, never the -1 sentinel
    for col in schema.KERNELS.columns:
        if col.dtype in (schema.INT, schema.I32) and col.name != "id":
            name = {"start": "start_ns", "end": "end_ns", "dur": "dur_ns"}.get(col.name, col.name)
            assert conn.execute(f"SELECT count(*) FROM kernels WHERE {name} = -1").fetchone()[0] == 0, name


def test_every_format_in_one_database(sample_traces: Path, maybe_samples: Path | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    traces = [load(p) for p in _files(sample_traces, maybe_samples)]
    conn = sqldb.in_memory(traces, analysis=False)
    assert conn.execute("SELECT version FROM kviewer_schema").fetchone()[0] == sqldb.SCHEMA_VERSION
    assert conn.execute("SELECT count(*) FROM traces").fetchone()[0] == len(traces)
    for i, trace in enumerate(traces, start=1):
        _check_trace(conn, trace, i)
    # read-only after the build
    with pytest.raises(sqlite3.DatabaseError):
        conn.execute("DELETE FROM kernels")
    conn.close()


def test_export_file_schema_views_fts_and_keys(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs.sqlite"
    proc = _cli("export", str(sample_traces / EAGER), str(sample_traces / COMPILED), "-o", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(out)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"kviewer_schema", "traces", "kernels", "gpu_ops", "cpu_slices", "flows", "devices", "metrics", "steps",
            "kernel_sol", "fusion_candidates", "kernels_fts", "cpu_slices_fts"} <= tables  # fmt: skip
    views = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert set(sqldb.VIEWS) <= views
    for view in sqldb.VIEWS:
        conn.execute(f"SELECT * FROM {view} LIMIT 5").fetchall()
    # foreign keys hold
    fks = {(r[2], r[3]) for r in conn.execute("SELECT * FROM pragma_foreign_key_list('flows')")}
    assert ("kernels", "kernel_pk") in fks and ("cpu_slices", "src_pk") in fks
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    # full-text search finds a kernel by a word of its name
    hits = conn.execute("SELECT name FROM kernels WHERE pk IN (SELECT rowid FROM kernels_fts WHERE kernels_fts MATCH 'gelu')").fetchall()
    assert hits and all("gelu" in h[0].lower() or "Gelu" in h[0] for h in hits)
    # launch latency: the API call starts before its kernel
    lat = conn.execute("SELECT min(latency_ns), count(*) FROM kernel_launch_latency").fetchone()
    assert lat[1] > 0 and lat[0] > 0
    # the same file twice: two trace ids, the same counts
    n1, n2 = (conn.execute("SELECT count(*) FROM kernels WHERE trace_id = ?", (i,)).fetchone()[0] for i in (1, 2))
    assert n1 == 144 and n2 == 99
    # sqlite-utils' own CLI reads the export as it is
    st = subprocess.run([str(Path(sys.executable).parent / "sqlite-utils"), "tables", str(out)], capture_output=True, text=True)
    assert st.returncode == 0 and "kernels" in st.stdout
    conn.close()


def test_cross_run_delta_equals_compare(sample_traces: Path, tmp_path: Path) -> None:
    a, b = str(sample_traces / EAGER), str(sample_traces / COMPILED)
    query = (
        "WITH a AS (SELECT name, total_ns FROM kernel_summary WHERE trace_id = 1), "
        "b AS (SELECT name, total_ns FROM kernel_summary WHERE trace_id = 2) "
        "SELECT a.name, b.total_ns - a.total_ns AS delta_ns FROM a JOIN b USING (name)"
    )
    proc = _cli("sql", a, b, query, "--format", "csv", "-q", "--no-analysis")
    assert proc.returncode == 0, proc.stderr
    sql = pd.read_csv(io.StringIO(proc.stdout)).set_index("name")["delta_ns"]
    cmp = _cli("compare", a, b, "--format", "csv", "-q")
    assert cmp.returncode == 0, cmp.stderr
    rows = pd.read_csv(io.StringIO(cmp.stdout), keep_default_na=False)
    # rows whose top kernel is the same on both sides (a row may join a name's groups of several
    # input shapes; a row holding another name's kernels would fail the sum below); a kernel
    # name may also fill several rows (one per shape): their deltas add up to the name's
    same = rows[rows["name_a"] == rows["name_b"]]
    mixed = set(rows.loc[~rows.index.isin(same.index), "name_a"]) | set(rows.loc[~rows.index.isin(same.index), "name_b"])
    per_name = same[~same["name_a"].isin(mixed)].groupby("name_a")["delta_ns"].sum()
    assert len(per_name) >= 2
    for name, delta in per_name.items():
        assert int(sql[name]) == int(delta), name


@pytest.mark.parametrize(
    "query,expect",
    [
        ("SELEC name FROM kernels", "SQL error"),
        ("DELETE FROM kernels", "SQL error"),
        ("DROP TABLE kernels", "SQL error"),
        ("SELECT 1; SELECT 2", "SQL error"),
        ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", "longer than"),
    ],
)
def test_bad_queries_exit_2_with_one_line(sample_traces: Path, tmp_path: Path, query: str, expect: str) -> None:
    export = tmp_path / "e.sqlite"
    src = sample_traces / EAGER
    assert _cli("export", str(src), "-o", str(export), "-q", "--no-analysis").returncode == 0
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (src, export)}
    for target in (str(export), str(src)):
        proc = _cli("sql", target, query, "--timeout", "1", "-q", "--no-analysis")
        assert proc.returncode == 2, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
    assert {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (src, export)} == before
    assert sorted(os.listdir(tmp_path)) == ["e.sqlite"]  # nothing written beside it


def test_sql_summary_equals_the_summary_command(sample_traces: Path) -> None:
    src = str(sample_traces / "h200_llm_train_nvtx.sqlite.gz")
    cols = "name, count, total_ns, avg_ns, med_ns, min_ns, max_ns, std_ns, time_pct"
    proc = _cli("sql", src, f"SELECT {cols} FROM kernel_summary", "--format", "csv", "-q", "--no-analysis")
    assert proc.returncode == 0, proc.stderr
    summary = _cli("summary", src, "--format", "csv", "-q")
    a = pd.read_csv(io.StringIO(proc.stdout), keep_default_na=False)
    b = pd.read_csv(io.StringIO(summary.stdout), keep_default_na=False)
    assert list(a.columns) == list(b.columns) and list(a["name"]) == list(b["name"])
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, check_dtype=False)


def test_a_failed_query_leaves_the_cache_as_it_was(sample_traces: Path, tmp_path: Path) -> None:
    src = sample_traces / EAGER
    cache = tmp_path / "cache"
    env = dict(os.environ, KVIEWER_CACHE_DIR=str(cache))
    env.pop("KVIEWER_NO_CACHE", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, env=env, timeout=300)

    def contents() -> dict[str, int]:
        # every table of every cache database with its row count (a hit updates "last used"
        # times, so the bytes change; the entries must not)
        out: dict[str, int] = {}
        for db in cache.rglob("*.sqlite"):
            conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
            for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
                out[f"{db.name}:{name}"] = conn.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
            conn.close()
        return out

    assert run("sql", str(src), "SELECT count(*) FROM kernels", "-q", "--no-analysis").returncode == 0
    before = contents()
    assert before
    proc = run("sql", str(src), "DELETE FROM kernels", "-q", "--no-analysis")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert contents() == before
    again = run("sql", str(src), "SELECT count(*) AS n FROM kernels", "--format", "csv", "-q", "--no-analysis")
    assert again.returncode == 0 and again.stdout.split() == ["n", "144"]


def test_export_refuses_to_overwrite_an_input(sample_traces: Path, tmp_path: Path) -> None:
    db = tmp_path / "x.sqlite"
    db.write_bytes((sample_traces / EAGER).read_bytes())
    proc = _cli("export", str(db), "-o", str(db), "-q")
    assert proc.returncode == 2 and "overwrite an input" in proc.stderr


def _rows(path: Path) -> dict[str, object]:
    """Every table's columns and rows (full-text tables by what they find), every view and index."""
    conn = sqlite3.connect(path)
    try:
        out: dict[str, object] = {}
        for name, kind in conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view', 'index') ORDER BY name"):
            if kind == "table" and name in sqldb.FTS:
                out[name] = conn.execute(f"SELECT rowid FROM {name} WHERE {name} MATCH 'a* OR b* OR c* OR g* OR s*' ORDER BY rowid").fetchall()
            elif kind == "table" and not any(name.startswith(f"{f}_") for f in sqldb.FTS):
                out[name] = ([r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')],
                             conn.execute(f'SELECT * FROM "{name}" ORDER BY rowid').fetchall())
            else:
                out[name] = kind
        return out
    finally:
        conn.close()


def test_export_with_the_cache_copies_the_cached_database(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the cache on, export completes the database ``kviewer sql`` keeps (here one a kernel
    count left with two kernel columns) and copies it: the same tables, rows, views, indexes and
    full-text answers as an export without the cache; a second export loads no file."""
    import kviewer.cli.export as cli_export
    from kviewer.cli import main

    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    files = [str(sample_traces / EAGER), str(sample_traces / "mlp_graph_nsys_node.sqlite.gz")]
    loads: list[object] = []
    real = cli_export.load_for

    def counting(*args: object, **kwargs: object) -> object:
        loads.append(kwargs.get("tables"))
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_export, "load_for", counting)
    assert main(["sql", *files, "SELECT count(*) FROM kernels", "-q"]) == 0
    assert main(["export", *files, "-o", str(tmp_path / "a.sqlite"), "-q"]) == 0
    assert len(loads) == 2 and loads == [None, None]  # completed: every part and column of both files
    assert main(["export", *files, "-o", str(tmp_path / "b.sqlite"), "-q"]) == 0
    assert len(loads) == 2  # a copy of the cached database
    assert main(["export", *files, "-o", str(tmp_path / "c.sqlite"), "-q", "--no-cache"]) == 0
    want = _rows(tmp_path / "c.sqlite")
    assert _rows(tmp_path / "a.sqlite") == want and _rows(tmp_path / "b.sqlite") == want
    assert (tmp_path / "a.sqlite").stat().st_mode & 0o777 == 0o644
    # the copy is a database of its own: a query on it does not touch the cache
    conn = sqldb.open_export(str(tmp_path / "b.sqlite"))
    n = sum(len(load(f, use_cache=False).kernels) for f in files)
    assert conn is not None and conn.execute("SELECT count(*) FROM kernels").fetchone()[0] == n
    conn.close()
