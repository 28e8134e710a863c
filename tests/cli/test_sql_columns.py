"""``kviewer sql`` writes only the columns the statement reads of the event tables (and loads only
what they come from), in memory without the cache, and in the cached database, whose tables are
written again with more columns when a later statement reads more: every answer equals the one of
a database with every column."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from kviewer import sqldb
from kviewer.core import Trace
from kviewer.io import load

QUERIES = [
    "SELECT count(*) FROM kernels",
    "SELECT name, count(*), sum(dur_ns) FROM kernels GROUP BY name ORDER BY 3 DESC, 1",
    "SELECT * FROM kernels ORDER BY pk LIMIT 20",
    "SELECT k.name, c.name FROM flows f JOIN kernels k ON k.pk = f.kernel_pk JOIN cpu_slices c ON c.pk = f.src_pk ORDER BY k.pk LIMIT 50",
    "SELECT count(*), max(rowid) FROM cpu_slices WHERE category = 'runtime'",
    "SELECT rowid, name FROM kernels_fts WHERE kernels_fts MATCH 'gemm OR elementwise' ORDER BY rowid LIMIT 20",
    "SELECT * FROM kernel_summary ORDER BY 1, 2",
    "SELECT * FROM nvtx_summary ORDER BY 1, 2",
    "SELECT * FROM memcpy_summary ORDER BY 1, 2",
    "SELECT * FROM kernel_launch_latency ORDER BY 1, 2 LIMIT 50",
    "SELECT * FROM gpu_idle_gaps ORDER BY 1, 2 LIMIT 50",
    "SELECT count(*) FROM step_times",
]
FILES = ["h200_llm_block_eager.pt.trace.json.gz", "mlp_graph_nsys_node.sqlite.gz"]


@pytest.mark.parametrize("name", FILES)
def test_only_the_columns_read_give_the_full_answer(sample_traces: Path, name: str) -> None:
    path = str(sample_traces / name)
    whole = sqldb.LazyDatabase([load(path, use_cache=False)], analysis=False)
    try:
        for sql in QUERIES:
            want = whole.query(sql)
            only = sqldb.columns_read(sql)
            assert only is not None
            part = sqldb.wanted_tables(sqldb.parts_read(sql, False), False, only)
            narrow = sqldb.LazyDatabase([load(path, use_cache=False, tables=part)], analysis=False, only=only)
            try:
                got = narrow.query(sql)
                # the database holds only that statement's columns
                if "kernels" in sqldb.built_parts(narrow.conn) and "*" not in sql:
                    cols = {r[1] for r in narrow.conn.execute("PRAGMA table_info(kernels)")}
                    assert cols == set(only["kernels"])
            finally:
                narrow.close()
            pd.testing.assert_frame_equal(got, want, check_exact=True, obj=sql)
    finally:
        whole.close()


def test_a_kernel_count_of_an_export_reads_no_api_calls(samples: Path) -> None:
    """A statement that needs no launching thread leaves the export's API calls unread."""
    sql = "SELECT count(*) FROM kernels"
    only = sqldb.columns_read(sql)
    assert only is not None and only["kernels"] == {"pk", "trace_id"}
    wanted = sqldb.wanted_tables(sqldb.parts_read(sql), True, only)
    assert wanted is not None and "tid" not in wanted["kernels"]
    trace = load(samples / "nsys" / "h200_llm_train_nvtx.sqlite", use_cache=False, tables=wanted)
    assert len(trace.kernels) == 13579 and not len(trace.cpu_slices)


def test_a_database_for_one_statement_refuses_others(sample_traces: Path) -> None:
    path = str(sample_traces / FILES[0])
    only = sqldb.columns_read("SELECT count(*) FROM kernels")
    db = sqldb.LazyDatabase([load(path, use_cache=False)], analysis=False, only=only)
    try:
        assert db.query("SELECT count(*) FROM kernels").iloc[0, 0] > 0
        with pytest.raises(ValueError, match="only the columns"):
            db.query("SELECT name FROM kernels")
    finally:
        db.close()


@pytest.mark.parametrize("name", FILES)
def test_the_cached_database_widens_its_tables_as_statements_read_more(
    sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """One cached database answers every statement of QUERIES in turn (and again, and a PRAGMA
    about a table), equal to the database with every column; a table is written again only when a
    statement reads a column it lacks, keeping the columns it had (and its full-text index)."""
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    path = str(sample_traces / name)
    whole = sqldb.LazyDatabase([load(path, use_cache=False)], analysis=False)
    loads: list[Any] = []

    def loader(p: str, tables: Any) -> Trace:
        loads.append(tables)
        return load(p, use_cache=False, tables=tables)

    def kernel_columns() -> set[str]:
        (db,) = (tmp_path / "cache" / "sql").glob("*.sqlite")
        conn = sqlite3.connect(db)
        try:
            return {r[1] for r in conn.execute("PRAGMA table_info(kernels)")}
        finally:
            conn.close()

    try:
        got = sqldb.query_files([path], QUERIES[0], loader, analysis=False)
        pd.testing.assert_frame_equal(got, whole.query(QUERIES[0]), check_exact=True)
        assert kernel_columns() == {"pk", "trace_id"} and len(loads) == 1
        seen: set[str] = {"pk", "trace_id"}
        for sql in [*QUERIES[1:], "PRAGMA table_info(kernels)"]:
            before = len(loads)
            got = sqldb.query_files([path], sql, loader, analysis=False)
            pd.testing.assert_frame_equal(got, whole.query(sql), check_exact=True, obj=sql)
            need = sqldb.columns_read(sql)
            assert need is not None
            if "kernels" in sqldb.parts_read(sql, False):
                widened = not need["kernels"] <= seen
                seen |= need["kernels"]
                assert kernel_columns() == seen, sql
                if widened:
                    assert len(loads) == before + 1, sql
        assert seen == {r[1] for r in whole.conn.execute("PRAGMA table_info(kernels)")}
        # every statement again: answered from the cached database alone
        before = len(loads)
        for sql in QUERIES:
            pd.testing.assert_frame_equal(sqldb.query_files([path], sql, loader, analysis=False), whole.query(sql), check_exact=True, obj=sql)
        assert len(loads) == before
    finally:
        whole.close()


def test_a_pragma_about_an_event_table_reads_every_column() -> None:
    only = sqldb.columns_read("PRAGMA table_info(kernels)")
    assert only is not None and {"name", "dur_ns", "grid_x"} <= only["kernels"]
