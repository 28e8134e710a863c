"""An export's own SQL never runs: only tables are read, with SQLite's defensive settings on;
sidecar files are used only when they are regular files; inputs and their folder never change."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.hostile.build import nsys_export
from tests.hostile.conftest import leftovers, run_cli, snapshot


def _summary_json(p: Path, tmp_path: Path) -> list[dict[str, object]]:
    r = run_cli(["summary", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_stringids_view_with_randomblob_is_not_read(tmp_path: Path) -> None:
    """A StringIds *view* would make the names random on every run: it is not a table, so it is
    not read (the names are unknown, and the same every time)."""
    p = nsys_export(tmp_path / "v.sqlite", ["real"], [0, 0])
    con = sqlite3.connect(p)
    con.executescript("DROP TABLE StringIds; CREATE VIEW StringIds AS SELECT 0 AS id, hex(randomblob(16)) AS value;")
    con.close()
    before = snapshot(tmp_path)
    a, b = _summary_json(p, tmp_path), _summary_json(p, tmp_path)
    assert a == b
    assert [r["name"] for r in a] == [""]
    after = snapshot(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("TMPDIR")} == {k: v for k, v in before.items() if not k.startswith("TMPDIR")}


def test_endless_recursive_view_is_not_read(tmp_path: Path) -> None:
    """A kernel "table" that is a view over an endless recursive CTE: never queried."""
    p = nsys_export(tmp_path / "cte.sqlite", ["k"], [0])
    con = sqlite3.connect(p)
    con.executescript(
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;"
        "CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) "
        "SELECT x AS start, x + 1 AS end, 0 AS deviceId, 0 AS demangledName FROM r;"
    )
    con.close()
    r = run_cli(["info", str(p), "--format", "json"], tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads(r.stdout)
    assert info["tables"]["kernels"] == 0
    assert any("CUPTI_ACTIVITY_KIND_KERNEL" in w for w in info["warnings"])


def test_connection_is_hardened(tmp_path: Path) -> None:
    from kviewer.io.source import connect_readonly

    p = nsys_export(tmp_path / "h.sqlite", ["k"], [0])
    con = sqlite3.connect(p)
    con.executescript("CREATE VIEW v AS SELECT value FROM StringIds; CREATE TABLE log(x);"
                      "CREATE TRIGGER t AFTER INSERT ON log BEGIN SELECT 1; END;")  # fmt: skip
    con.close()
    ro = connect_readonly(p)
    try:
        assert ro.execute("PRAGMA trusted_schema").fetchone()[0] == 0
        assert ro.execute("PRAGMA query_only").fetchone()[0] == 1
        with pytest.raises(sqlite3.DatabaseError):  # a view's accesses are refused
            ro.execute("SELECT * FROM v").fetchall()
        for sql in ("SELECT randomblob(10)", "SELECT zeroblob(1000000000)", "ATTACH ':memory:' AS x", "INSERT INTO log VALUES (1)"):
            with pytest.raises(sqlite3.DatabaseError):
                ro.execute(sql).fetchall()
        if hasattr(ro, "enable_load_extension"):
            with pytest.raises(sqlite3.DatabaseError):
                ro.execute("SELECT load_extension('/nonexistent')").fetchall()
    finally:
        ro.close()


def _wal_export(tmp_path: Path) -> Path:
    p = nsys_export(tmp_path / "w.sqlite", ["k"], [0, 0])
    con = sqlite3.connect(p)
    con.execute("PRAGMA journal_mode=WAL")
    con.close()
    for suffix in ("-wal", "-shm"):
        Path(str(p) + suffix).unlink(missing_ok=True)
    return p


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "loop"])
def test_sidecar_that_is_not_a_regular_file_is_never_opened(tmp_path: Path, target: str) -> None:
    """A -wal symlinked to /dev/zero filled TMPDIR; a FIFO -journal would hang SQLite."""
    p = _wal_export(tmp_path)
    wal = Path(str(p) + "-wal")
    if target == "fifo":
        os.mkfifo(Path(str(p) + "-journal"))
        os.mkfifo(wal)
    elif target == "loop":
        wal.symlink_to(wal.name)
    else:
        wal.symlink_to(target)
    before = snapshot(p.parent)
    r = run_cli(["info", str(p), "--format", "json"], tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    info = json.loads(r.stdout)
    assert info["tables"]["kernels"] == 2
    assert any("not a regular file" in w for w in info["warnings"])
    assert leftovers(tmp_path) == []
    after = snapshot(p.parent)
    assert {k: v for k, v in after.items() if not k.startswith("TMPDIR")} == {k: v for k, v in before.items() if not k.startswith("TMPDIR")}


def test_regular_wal_is_read_from_a_private_copy(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "w.sqlite", ["k"], [0])
    writer = sqlite3.connect(p)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("PRAGMA wal_autocheckpoint=0")
    writer.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT start + 5000, end + 5000, deviceId, streamId, correlationId, globalPid, "
                   "demangledName, shortName, gridX, gridY, gridZ, blockX, blockY, blockZ, registersPerThread, staticSharedMemory, "
                   "dynamicSharedMemory FROM CUPTI_ACTIVITY_KIND_KERNEL")  # fmt: skip
    writer.commit()
    try:
        assert Path(str(p) + "-wal").stat().st_size > 0
        before = snapshot(tmp_path)
        r = run_cli(["info", str(p), "--format", "json"], tmp_path)
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["tables"]["kernels"] == 2  # the row in the -wal is seen
        assert leftovers(tmp_path) == []
        after = snapshot(tmp_path)
        assert {k: v for k, v in after.items() if not k.startswith("TMPDIR")} == {k: v for k, v in before.items() if not k.startswith("TMPDIR")}
    finally:
        writer.close()
