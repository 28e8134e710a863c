"""Round 3 (issue #28, items 1-3 and 9): the SQL surfaces added since round 2.

* a hostile ``fleet.sqlite`` (a recursive view as ``kviewer_schema``, a 100M-row view as
  ``fleet_ranks``) is read through the one hardened open: it never hangs, never reads a view;
* every connection user SQL runs on (``kviewer sql``, the Query dock's in-memory database, an
  export) refuses PRAGMA writes, ATTACH/DETACH (so VACUUM INTO), every write and fts3_tokenizer,
  and writes no file;
* a query is held to ``KVIEWER_MAX_MEMORY`` while it runs: exit 2 with one line.

Every input's hash is the same after the attack as before.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile.build import kineto_json
from tests.hostile.conftest import CAP_BYTES, _cap, run_cli

MB = 1024 * 1024


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _fleet_db(path: Path, schema_sql: str, ranks_sql: str) -> Path:
    con = sqlite3.connect(path)
    con.executescript(schema_sql + ";" + ranks_sql)
    con.commit()
    con.close()
    return path


RECURSIVE_SCHEMA = (
    "CREATE VIEW kviewer_schema AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
    "SELECT 1 AS version, 'x' AS kviewer_version, 'fleet' AS kind FROM r WHERE x < 0"
)
HUGE_RANKS = (
    "CREATE VIEW fleet_ranks AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 100000000) "
    "SELECT 'run' AS run, x AS rank, 1.0 AS excess_pct, randomblob(1000) AS path FROM r"
)
TABLE_SCHEMA = "CREATE TABLE kviewer_schema (version INTEGER, kviewer_version TEXT, kind TEXT); INSERT INTO kviewer_schema VALUES (1, 'x', 'fleet')"
TABLE_RANKS = "CREATE TABLE fleet_ranks (run TEXT, rank INTEGER, excess_pct REAL, path TEXT); INSERT INTO fleet_ranks VALUES ('r', 0, 5.0, '/x')"


def _open_fleet_in_subprocess(path: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "from kviewer.fleet.read import open_fleet\n"
        "from kviewer.errors import KViewerError\n"
        "try:\n"
        "    r = open_fleet(sys.argv[1])\n"
        "    print('none' if r is None else f'ranks {len(r[1])}')\n"
        "except KViewerError as exc:\n"
        "    print('error', type(exc).__name__, exc)\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120,
                          preexec_fn=_cap(CAP_BYTES), cwd=tmp_path)  # fmt: skip


@pytest.mark.parametrize(
    ("schema_sql", "ranks_sql", "expected"),
    [
        (RECURSIVE_SCHEMA, TABLE_RANKS, "none"),  # the recursive view is never read: not a fleet output
        (TABLE_SCHEMA, HUGE_RANKS, "none"),  # a 100M-row fleet_ranks view: not read either
        (TABLE_SCHEMA, TABLE_RANKS, "ranks 1"),  # the honest file still opens
    ],
    ids=["recursive-schema-view", "100M-row-ranks-view", "honest"],
)
def test_hostile_fleet_output_is_refused_fast(tmp_path: Path, schema_sql: str, ranks_sql: str, expected: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    db = _fleet_db(out / "fleet.sqlite", schema_sql, ranks_sql)
    before = sha(db)
    r = _open_fleet_in_subprocess(out, tmp_path)  # 120 s timeout: a hang fails the test
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == expected
    assert sha(db) == before
    assert sorted(os.listdir(out)) == ["fleet.sqlite"]  # no -wal, -shm or -journal beside it


def test_hostile_fleet_output_is_opened_by_the_one_hardened_open(tmp_path: Path) -> None:
    """The fleet reader goes through io.source.connect_readonly (strict): a view cannot be read."""
    from kviewer.fleet import read

    db = _fleet_db(tmp_path / "fleet.sqlite", TABLE_SCHEMA, TABLE_RANKS)
    con = sqlite3.connect(db)
    con.executescript("CREATE VIEW v AS SELECT * FROM fleet_ranks")
    con.close()
    conn = read._open(db)
    try:
        assert conn.execute("SELECT count(*) FROM fleet_ranks").fetchone() == (1,)
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute("SELECT * FROM v").fetchall()
    finally:
        conn.close()


def test_user_query_on_a_hostile_view_stops_at_the_timeout(tmp_path: Path) -> None:
    """``kviewer sql`` on an export someone sent, with an endless recursive view added: a user
    query may read views, so it runs, and stops at --timeout with one line; a view that calls
    randomblob is refused."""
    src = kineto_json(tmp_path / "t.json", ["a"])
    export = tmp_path / "e.sqlite"
    assert run_cli(["export", str(src), "-o", str(export), "--no-analysis"], tmp_path).returncode == 0
    con = sqlite3.connect(export)
    con.executescript(
        "CREATE VIEW endless AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT x FROM r;"
        "CREATE VIEW noisy AS SELECT randomblob(16) AS b FROM kernels;"
    )
    con.close()
    before = sha(export)
    r = run_cli(["sql", str(export), "SELECT count(*) FROM endless", "--timeout", "2"], tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0] and "Traceback" not in r.stderr
    r = run_cli(["sql", str(export), "SELECT * FROM noisy"], tmp_path)
    assert r.returncode == 2 and "not allowed" in r.stderr and r.stdout == ""
    # a fleet.sqlite whose kviewer_schema is a view is no export: one line, nothing read
    db = _fleet_db(tmp_path / "fleet.sqlite", RECURSIVE_SCHEMA, TABLE_RANKS)
    r = run_cli(["sql", str(db), "SELECT * FROM fleet_ranks", "--timeout", "2"], tmp_path, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert sha(export) == before


# ---------------------------------------------------------------------------------------------
# item 2 and 9: a read-only database stays read-only


ATTACKS = {
    "query_only off then update": ["PRAGMA query_only=OFF", "UPDATE kernels SET dur_ns = 0"],
    "delete": ["DELETE FROM kernels"],
    "attach, create, commit": ["ATTACH DATABASE '{out}' AS evil", "CREATE TABLE evil.t(x)", "COMMIT"],
    "vacuum into": ["VACUUM INTO '{out}'"],
    "writable schema": ["PRAGMA writable_schema=1"],
    "wal checkpoint": ["PRAGMA wal_checkpoint"],
    "fts3_tokenizer pointer": ["SELECT fts3_tokenizer('simple')"],
    "load_extension": ["SELECT load_extension('/tmp/x.so')"],
    "temp table": ["CREATE TEMP TABLE t(x)"],
}


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_query_dock_connection_cannot_be_made_writable(tmp_path: Path, attack: str) -> None:
    """The Query dock keeps one in-memory connection across queries: no statement of an attack
    changes what later queries see, and nothing is written to disk."""
    from kviewer import sqldb
    from kviewer.io import load

    trace = load(kineto_json(tmp_path / "t.json", ["a", "b", "c"]), use_cache=False)
    conn = sqldb.in_memory([trace], analysis=False)
    out = tmp_path / "evil.sqlite"
    truth = sqldb.query(conn, "SELECT id, dur_ns FROM kernels ORDER BY id")
    assert truth["dur_ns"].tolist() == [5000, 5000, 5000]  # 5 us each, as written
    for statement in ATTACKS[attack]:
        with pytest.raises(sqldb.QueryError) as err:
            sqldb.query(conn, statement.format(out=out))
        assert "\n" not in str(err.value)
    after = sqldb.query(conn, "SELECT id, dur_ns FROM kernels ORDER BY id")
    assert after.equals(truth)
    assert not out.exists()
    assert conn.execute("PRAGMA query_only").fetchone() == (1,)
    conn.close()


def test_reading_stays_free(tmp_path: Path) -> None:
    """The authorizer refuses writes, not reads: views, window functions, table_info, FTS."""
    from kviewer import sqldb
    from kviewer.io import load

    names = ["gemm_a", "gemm_b", "relu"]
    trace = load(kineto_json(tmp_path / "t.json", names), use_cache=False)
    conn = sqldb.in_memory([trace], analysis=False)
    summary = sqldb.query(conn, "SELECT name, count FROM kernel_summary ORDER BY name")
    assert summary["name"].tolist() == sorted(names) and summary["count"].tolist() == [1, 1, 1]
    cols = sqldb.query(conn, "PRAGMA table_info(kernels)")["name"].tolist()
    assert "start_ns" in cols
    ranked = sqldb.query(conn, "SELECT name, row_number() OVER (ORDER BY start_ns) AS n FROM kernels")
    assert ranked["n"].tolist() == [1, 2, 3]
    assert sqldb.query(conn, "SELECT hex(randomblob(4)) AS h")["h"].str.len().tolist() == [8]
    conn.close()


@pytest.mark.parametrize("attack", ["attach", "vacuum", "fts3", "pragma"])
def test_sql_command_on_an_export_writes_nothing(tmp_path: Path, attack: str) -> None:
    """``kviewer sql EXPORT`` (the file someone sent): exit 2 with one line, no file created,
    the export unchanged."""
    src = kineto_json(tmp_path / "t.json", ["a", "b"])
    export = tmp_path / "e.sqlite"
    r = run_cli(["export", str(src), "-o", str(export), "--no-analysis"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    before = sha(export)
    target = tmp_path / "made.sqlite"
    sql = {
        "attach": f"ATTACH DATABASE '{target}' AS x",
        "vacuum": f"VACUUM INTO '{target}'",
        "fts3": "SELECT hex(fts3_tokenizer('simple'))",
        "pragma": "PRAGMA query_only = OFF",
    }[attack]
    listing = sorted(os.listdir(tmp_path))
    r = run_cli(["sql", str(export), sql], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "not allowed" in r.stderr
    assert r.stdout == ""  # no pointer printed
    assert not target.exists()
    assert sorted(os.listdir(tmp_path)) == listing
    assert sha(export) == before


# ---------------------------------------------------------------------------------------------
# item 3: the memory budget holds while a query runs


ENDLESS = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "


@pytest.mark.parametrize(
    "select",
    [
        "SELECT randomblob(1000000) FROM r",
        "SELECT zeroblob(1000000), zeroblob(1000000), zeroblob(1000000) FROM r",
        "SELECT group_concat(hex(randomblob(100000))) FROM (SELECT i FROM r LIMIT 4000)",  # 800 MB of text
    ],
    ids=["randomblob-rows", "three-zeroblobs", "one-growing-value"],
)
def test_sql_query_is_held_to_the_memory_budget(tmp_path: Path, select: str) -> None:
    """``KVIEWER_MAX_MEMORY=1G``: an endless blob query stops at the budget (under a 3 GiB address
    space cap: a query that ignored the budget would die of a MemoryError traceback)."""
    src = kineto_json(tmp_path / "t.json", ["a"])
    before = sha(src)
    r = run_cli(["sql", str(src), ENDLESS + select, "--no-analysis", "--timeout", "100"], tmp_path,
                cap=3 * 1024**3, timeout=180, KVIEWER_MAX_MEMORY="1G")  # fmt: skip
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "MemoryError" not in r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("kviewer: warning:")]  # the load's own
    assert len(lines) == 1, r.stderr
    # the budget (or SQLite's own 256 MiB value cap for the one growing value) stopped it, not the timeout
    assert "memory" in lines[0] or "too big" in lines[0], lines[0]
    assert sha(src) == before


def test_sql_json_output_is_untouched_by_the_guard(tmp_path: Path) -> None:
    src = kineto_json(tmp_path / "t.json", ["a", "b"])
    r = run_cli(["sql", str(src), "SELECT name FROM kernels ORDER BY start_ns", "--format", "json", "--no-analysis"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert [row["name"] for row in json.loads(r.stdout)] == ["a", "b"]


@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_query_dock_lazy_database_cannot_be_made_writable(tmp_path: Path, attack: str) -> None:
    """The Query dock's database writes a table when a query first reads it (lifting the query
    policy meanwhile): an attack before any table, or after, changes nothing a later query sees."""
    from kviewer import sqldb
    from kviewer.io import load

    trace = load(kineto_json(tmp_path / "t.json", ["a", "b", "c"]), use_cache=False)
    db = sqldb.LazyDatabase([trace], analysis=False)
    out = tmp_path / "evil.sqlite"
    try:
        for _ in range(2):  # before the kernels table exists, then after
            for statement in ATTACKS[attack]:
                with pytest.raises(sqldb.QueryError) as err:
                    db.query(statement.format(out=out))
                assert "\n" not in str(err.value)
            assert db.query("SELECT id, dur_ns FROM kernels ORDER BY id")["dur_ns"].tolist() == [5000, 5000, 5000]
            assert db.conn.execute("PRAGMA query_only").fetchone() == (1,)
        assert not out.exists()
    finally:
        db.close()
