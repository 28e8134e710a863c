"""How ``kviewer export`` and ``kviewer sql`` build the schema: the fast writer produces what
sqlite-utils' row-by-row path produced (tables, column types, keys, indexes, every row), a query
builds only the tables it reads, and ``kviewer sql`` keeps what it built in the cache."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kviewer import sqldb
from kviewer.core import Trace
from kviewer.io import load

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
NVTX = "h200_llm_train_nvtx.sqlite.gz"
#: the full-text tables' own storage (their layout is SQLite's business; their content is compared)
FTS_SHADOWS = ("_data", "_idx", "_docsize", "_config")


def _describe(path: Path) -> dict[str, Any]:
    """Every table and view: columns (name, type, pk), foreign keys, indexes, row count, a digest
    of the rows and the storage class of every column's values."""
    conn = sqlite3.connect(path)
    out: dict[str, Any] = {}
    for name, kind in conn.execute("SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"):
        if any(name.endswith(s) for s in FTS_SHADOWS) and name.split("_fts")[0] + "_fts" != name:
            continue
        cols = [(r[1], r[2], r[5]) for r in conn.execute(f'PRAGMA table_info("{name}")')]
        fks = sorted((r[2], r[3], r[4]) for r in conn.execute(f'PRAGMA foreign_key_list("{name}")'))
        idx = sorted((r[1], tuple(x[2] for x in conn.execute(f'PRAGMA index_info("{r[1]}")'))) for r in conn.execute(f'PRAGMA index_list("{name}")'))
        entry: dict[str, Any] = {"kind": kind, "cols": cols, "fks": fks, "idx": idx}
        if kind == "table":
            rows = sorted(repr(r) for r in conn.execute(f'SELECT rowid, * FROM "{name}"'))
            entry["n"] = len(rows)
            entry["digest"] = hashlib.sha256("\n".join(rows).encode()).hexdigest()
            if cols:
                entry["classes"] = conn.execute("SELECT " + ", ".join(f'group_concat(DISTINCT typeof("{c[0]}"))' for c in cols) + f' FROM "{name}"').fetchone()
        out[name] = entry
    conn.close()
    return out


def _reference_export(traces: list[Trace], out: Path) -> None:
    """The database as kviewer wrote it through sqlite-utils before: a dict per row through
    ``insert_all`` (alter=True), then ``add_foreign_keys``, the indexes and ``enable_fts``."""
    import sqlite_utils

    from kviewer.sqldb import _Builder, _create_views, _sql_value

    class RowByRow:
        """A stand-in for the writer: each table through sqlite-utils' own insert path."""

        def __init__(self, db: sqlite_utils.Database) -> None:
            self.db = db

        def insert(self, name: str, df: pd.DataFrame, trace_id: int | None, pk: np.ndarray | None = None) -> None:
            columns = {c: sqldb._column_type(df[c]) for c in df.columns}
            if trace_id is not None:
                columns["trace_id"] = int
            if pk is not None:
                columns["pk"] = int
            if not self.db[name].exists():
                order = (["pk"] if pk is not None else []) + (["trace_id"] if trace_id is not None else []) + list(df.columns)
                self.db.create_table(name, {c: columns[c] for c in order}, pk="pk" if pk is not None else None)
            arrays = {c: df[c].to_numpy() for c in df.columns}
            records = []
            for i in range(len(df)):
                rec = {c: _sql_value(a[i]) for c, a in arrays.items()}
                if trace_id is not None:
                    rec["trace_id"] = trace_id
                if pk is not None:
                    rec["pk"] = int(pk[i])
                records.append(rec)
            if records:
                self.db[name].insert_all(records, batch_size=5000, alter=True)  # type: ignore[union-attr]

    db = sqlite_utils.Database(out)
    writer = RowByRow(db)
    saved = sqldb._insert, sqldb._insert_row, sqldb._index, sqldb.INDEXES
    sqldb._insert = lambda _db, name, df, trace_id, pk=None: writer.insert(name, df, trace_id, pk)  # type: ignore[assignment]
    sqldb._insert_row = lambda _db, name, row, pk=None: _db[name].insert(row, pk=pk)  # type: ignore[assignment,misc]
    sqldb._index = lambda _db, name: None  # type: ignore[assignment]
    try:
        _Builder(db, traces, True).build([p for p in sqldb.PARTS if p not in sqldb.FTS])
    finally:
        sqldb._insert, sqldb._insert_row, sqldb._index, sqldb.INDEXES = saved
    names = set(db.table_names())
    fks = [(t, "trace_id", "traces", "trace_id") for t in names if t not in sqldb.UNKEYED]
    fks += [(t, col, other, ocol) for t, keys in sqldb.FOREIGN_KEYS.items() if t in names for col, other, ocol in keys]
    db.add_foreign_keys(fks)
    for t, indexes in sqldb.INDEXES.items():
        for cols in indexes:
            db[t].create_index(list(cols), if_not_exists=True)  # type: ignore[union-attr]
    for fts, (table, cols) in sqldb.FTS.items():
        db[table].enable_fts(list(cols), create_triggers=False)  # type: ignore[union-attr]
    _create_views(db)
    db.conn.commit()
    db.close()


@pytest.fixture(scope="module")
def two_traces(sample_traces: Path) -> list[Trace]:
    return [load(sample_traces / EAGER, use_cache=False), load(sample_traces / NVTX, use_cache=False)]


def test_export_equals_the_row_by_row_sqlite_utils_database(two_traces: list[Trace], tmp_path: Path) -> None:
    new, ref = tmp_path / "new.sqlite", tmp_path / "ref.sqlite"
    sqldb.export(two_traces, str(new))
    _reference_export(two_traces, ref)
    a, b = _describe(new), _describe(ref)
    assert sorted(a) == sorted(b)
    for name in b:
        assert a[name] == b[name], name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.sqlite", "ref.sqlite"]  # no .partial left
    conn = sqlite3.connect(new)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


QUERIES = [
    "SELECT count(*) AS n FROM kernels",
    "SELECT trace_id, name, count, total_ns FROM kernel_summary ORDER BY trace_id, total_ns DESC, name",
    "SELECT * FROM kernel_launch_latency ORDER BY trace_id, kernel_id LIMIT 50",
    "SELECT name FROM kernels WHERE pk IN (SELECT rowid FROM kernels_fts WHERE kernels_fts MATCH 'gemm') ORDER BY pk",
    "SELECT trace_id, sol_device, sol_note FROM traces",
    "SELECT kernel_pk, sol_pct, bound FROM kernel_sol ORDER BY kernel_pk LIMIT 100",
    "SELECT * FROM step_times",
    "PRAGMA table_info(flows)",
    "SELECT type, name FROM sqlite_master ORDER BY type, name",
]


def test_a_query_builds_only_what_it_reads_and_answers_as_the_full_database(two_traces: list[Trace]) -> None:
    full = sqldb.in_memory(two_traces)
    lazy = sqldb.LazyDatabase(two_traces)
    try:
        first = lazy.query(QUERIES[0])
        assert sqldb.built_parts(lazy.conn) == {"kviewer_schema", "kernels"}
        assert first["n"].tolist() == [len(two_traces[0].kernels) + len(two_traces[1].kernels)]
        lazy.query(QUERIES[1])
        assert sqldb.built_parts(lazy.conn) == {"kviewer_schema", "kernels"}  # the view reads kernels only
        for sql in QUERIES:
            got, want = lazy.query(sql), sqldb.query(full, sql)
            pd.testing.assert_frame_equal(got, want, check_dtype=False, obj=sql)
        assert sqldb.built_parts(lazy.conn) == set(sqldb.PARTS)  # sqlite_master: everything
        assert lazy.conn.execute("PRAGMA query_only").fetchone() == (1,)
    finally:
        lazy.close()
        full.close()


@pytest.mark.parametrize(
    "sql,parts",
    [
        ("SELECT count(*) FROM kernels", {"kernels"}),
        ("SELECT * FROM nvtx_summary", {"cpu_slices"}),
        ("SELECT * FROM kernel_launch_latency", {"kernels", "cpu_slices", "flows"}),
        ("SELECT rowid FROM cpu_slices_fts WHERE cpu_slices_fts MATCH 'aten'", {"cpu_slices", "cpu_slices_fts"}),
        ("WITH k AS (SELECT name FROM kernels) SELECT count(*) FROM k JOIN devices", {"kernels", "devices"}),
        ("PRAGMA foreign_key_list(metrics)", {"metrics"}),
        ("DELETE FROM kernels", set()),  # refused: nothing is built for it
        ("SELECT 1", set()),
    ],
)
def test_parts_read_come_from_sqlite(sql: str, parts: set[str]) -> None:
    assert set(sqldb.parts_read(sql)) - {"kviewer_schema"} == parts


def test_parts_read_without_analysis_leave_the_analysis_tables_out() -> None:
    assert "kernel_sol" in sqldb.parts_read("SELECT * FROM sqlite_master")
    assert not set(sqldb.parts_read("SELECT * FROM sqlite_master", analysis=False)) & set(sqldb.ANALYSIS_TABLES)


def test_sql_keeps_the_built_database_in_the_cache(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    src = str(sample_traces / EAGER)
    loads: list[Any] = []

    def loader(path: str, tables: Any) -> Trace:
        loads.append(tables)
        return load(path, tables=tables)

    n = sqldb.query_files([src], "SELECT count(*) AS n FROM kernels", loader)
    assert n["n"].tolist() == [144] and len(loads) == 1
    again = sqldb.query_files([src], "SELECT count(*) AS n FROM kernels WHERE trace_id = 1", loader)
    assert again["n"].tolist() == [144] and len(loads) == 1  # answered from the cached database
    ops = sqldb.query_files([src], "SELECT count(*) AS n FROM gpu_ops", loader)
    assert len(loads) == 2 and ops["n"].tolist() == [len(load(src, use_cache=False).gpu_ops)]
    dbs = list((tmp_path / "cache" / "sql").glob("*.sqlite"))
    assert len(dbs) == 1 and (dbs[0].stat().st_mode & 0o077) == 0
    conn = sqlite3.connect(dbs[0])
    assert sqldb.built_parts(conn) == {"kviewer_schema", "kernels", "gpu_ops"}
    conn.close()
    # a failed query changes nothing there, and a refused one builds nothing
    with pytest.raises(sqldb.QueryError):
        sqldb.query_files([src], "DELETE FROM cpu_slices", loader)
    assert len(loads) == 2
    # without the cache: in memory, the tables the query reads loaded alone
    sqldb.query_files([src], "SELECT count(*) FROM devices", loader, use_cache=False)
    assert loads[-1] is not None and set(loads[-1]) == {"devices"}


@pytest.mark.parametrize(
    "sql,parts",
    [
        ("SELECT count(*) FROM KERNELS", {"kernels"}),  # SQL names are case-blind
        ('SELECT * FROM main."Gpu_Ops"', {"gpu_ops"}),
        ("PRAGMA table_info(KERNELS)", {"kernels"}),
        ("SELECT * FROM json_each('[1, 2]')", set()),  # SQLite reads sqlite_master's rowid to make it
    ],
)
def test_parts_read_spellings(sql: str, parts: set[str]) -> None:
    assert set(sqldb.parts_read(sql)) - {"kviewer_schema"} == parts


@pytest.mark.parametrize("sql", ["SELECT name FROM sqlite_master", "SELECT * FROM pragma_table_info('kernels')", "PRAGMA table_list"])
def test_parts_read_of_the_schema_itself_is_everything(sql: str) -> None:
    assert sqldb.parts_read(sql) == list(sqldb.PARTS)


def test_integer_columns_with_unknowns_are_integers(two_traces: list[Trace], tmp_path: Path) -> None:
    """An integer column of the schema whose first rows were unknown (NULL) used to be declared
    TEXT, and SQLite's affinity then stored every known value as text: cpu_slices.correlation
    '27', sorted as text ('100' < '27'). Every integer column is declared INTEGER and holds
    integers or NULL."""
    from kviewer.core import schema

    out = tmp_path / "e.sqlite"
    sqldb.export(two_traces, str(out))
    conn = sqlite3.connect(out)
    checked = 0
    for name, table in schema.TABLES.items():
        declared = {r[1]: r[2] for r in conn.execute(f'PRAGMA table_info("{name}")')}
        for col in table.columns:
            if col.dtype not in (schema.INT, schema.I32):
                continue
            column = sqldb.TIME_COLUMNS.get(col.name, col.name)
            if column not in declared:
                continue
            assert declared[column] == "INTEGER", (name, column, declared[column])
            classes = {r[0] for r in conn.execute(f'SELECT DISTINCT typeof("{column}") FROM "{name}"')}
            assert classes <= {"integer", "null"}, (name, column, classes)
            checked += 1
    assert checked > 40
    known = conn.execute("SELECT count(*) FROM cpu_slices WHERE correlation IS NOT NULL").fetchone()[0]
    assert known > 0
    conn.close()


@pytest.mark.parametrize("sendfile", ["works", "refused", "stops"])
def test_the_cached_database_is_copied_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sendfile: str) -> None:
    """The export's copy of the cached database goes through the kernel, else through buffers
    (a system without sendfile between two files, or one that stops early): the same bytes either way."""
    import os

    src, dst = tmp_path / "src.bin", tmp_path / "dst.bin"
    data = os.urandom(3 << 20)
    src.write_bytes(data)
    dst.write_bytes(b"")
    real = os.sendfile

    def fake(out_fd: int, in_fd: int, offset: int, count: int) -> int:
        if sendfile == "refused":
            raise OSError(22, "Invalid argument")
        if sendfile == "stops" and offset >= 1 << 20:
            return 0
        return real(out_fd, in_fd, offset, min(count, 1 << 20))

    monkeypatch.setattr(os, "sendfile", fake)
    with open(src, "rb") as s, open(dst, "r+b") as d:
        sqldb._copy_file(s, d)
    assert dst.read_bytes() == data
