"""The fast paths of the Nsight Systems loader give what the row-by-row reads give.

``_Db.ints`` reads integer columns as ``group_concat`` text parsed by numpy; ``_Db.query`` is
the row-by-row read whose rules (unknown values, counted as damaged) every odd value must keep.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kviewer.core.intervals import nesting_depth
from kviewer.io import nsys
from kviewer.io.source import connect_readonly
from tests.hostile.build import nsys_export

K = nsys.KERNEL_TABLE
#: the connections a test opened, closed after it (Python 3.13 warns of an unclosed one)
_opened: list[sqlite3.Connection] = []


@pytest.fixture(autouse=True)
def _close_opened() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().close()


def _open(path: Path) -> nsys._Db:
    _opened.append(connect_readonly(path))
    return nsys._Db(_opened[-1])


def _both(path: Path, table: str, spec: list[tuple[str, str]]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], nsys._Db, nsys._Db]:
    fast_db = _open(path)
    slow_db = _open(path)
    fast = fast_db.ints(table, "k", spec)
    exprs = ", ".join(e for _, e in spec)
    slow = slow_db.query(f'select {exprs} from "{table}" as k', [(n, "i") for n, _ in spec], table=table)
    return fast, slow, fast_db, slow_db


def _spec(db_path: Path) -> list[tuple[str, str]]:
    db = _open(db_path)
    return [("start", "k.start"), ("end", "k.end"), ("stream", db.col(K, "k", "streamId")),
            ("gpid", db.col(K, "k", "globalPid")), ("name", db.string_id(K, "k", "demangledName"))]  # fmt: skip


@pytest.mark.parametrize("chunk", [3, 65536])
def test_ints_equal_the_row_by_row_read_on_damaged_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    monkeypatch.setattr(nsys, "_INT_CHUNK", chunk)
    p = nsys_export(tmp_path / "odd.sqlite", ["a", "b"], [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    con = sqlite3.connect(p)
    # a NULL start (skipped by group_concat), text with a comma in the same chunk, a fraction, a
    # number beyond 64 bits, text that SQLite turned into an integer, a string id as text
    con.execute(f"update {K} set start = NULL where rowid = 2")
    con.execute(f"update {K} set streamId = '1,2' where rowid = 3")
    con.execute(f"update {K} set globalPid = 1.5 where rowid = 5")
    con.execute(f"update {K} set \"end\" = 99999999999999999999 where rowid = 7")
    con.execute(f"update {K} set streamId = '42' where rowid = 9")
    con.execute(f"update {K} set demangledName = 'x' where rowid = 10")
    con.commit()
    con.close()
    fast, slow, fast_db, slow_db = _both(p, K, _spec(p))
    for name in slow:
        assert fast[name].dtype == np.int64
        assert fast[name].tolist() == slow[name].tolist(), name
    assert fast_db.bad_values == slow_db.bad_values and fast_db.bad_values  # the damage is still counted
    assert fast["stream"][8] == 42  # stored as an integer by the column's affinity


def test_ints_check_types_in_sql_where_a_column_has_no_integer_affinity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without INTEGER affinity text stays text: '12' is not 12 to SQLite, and 20 digits do not fit."""
    monkeypatch.setattr(nsys, "_INT_CHUNK", 4)
    p = tmp_path / "typeless.sqlite"
    con = sqlite3.connect(p)
    con.execute(f"create table {K} (start, end, streamId, globalPid, demangledName)")
    rows = [(i * 10, i * 10 + 5, i, 7, 0) for i in range(10)]
    rows[1] = (10, 15, "12", 7, 0)
    rows[6] = (60, "99999999999999999999", 6, 7, 0)
    con.executemany(f"insert into {K} values (?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()
    fast, slow, fast_db, slow_db = _both(p, K, [("start", "k.start"), ("end", "k.end"), ("stream", "coalesce(k.streamId, -1)")])
    for name in slow:
        assert fast[name].tolist() == slow[name].tolist(), name
    assert fast_db.bad_values == slow_db.bad_values == {"end": 1}


def test_ints_read_a_table_without_rowid_or_with_a_rowid_column(tmp_path: Path) -> None:
    for i, ddl in enumerate((f"create table {K} (start integer primary key, end integer) without rowid",
                             f"create table {K} (rowid integer, start integer, end integer)")):  # fmt: skip
        p = tmp_path / f"t{i}.sqlite"
        con = sqlite3.connect(p)
        con.execute(ddl)
        cols = "start, end" if i == 0 else "rowid, start, end"
        con.executemany(f"insert into {K} ({cols}) values ({', '.join('?' * len(cols.split(',')))})",
                        [((s, s + 5) if i == 0 else (99 - s, s, s + 5)) for s in range(0, 100, 10)])  # fmt: skip
        con.commit()
        con.close()
        fast, slow, _, _ = _both(p, K, [("start", "k.start"), ("end", "k.end")])
        assert fast["start"].tolist() == slow["start"].tolist() == list(range(0, 100, 10))


@pytest.mark.samples
def test_ints_equal_the_row_by_row_read_on_a_real_export(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsys, "_INT_CHUNK", 1000)  # many chunks
    p = samples / "nsys" / "h200_llm_train_nvtx.sqlite"
    db = _open(p)
    spec = [("start", "k.start"), ("end", "k.end"), ("device", db.col(K, "k", "deviceId")),
            ("corr", db.col(K, "k", "correlationId")), ("gpid", db.col(K, "k", "globalPid")),
            ("name", db.string_id(K, "k", "demangledName")), ("grid", db.col(K, "k", "gridX"))]  # fmt: skip
    fast, slow, fast_db, _ = _both(p, K, spec)
    assert len(fast["start"]) == 13_579
    for name in slow:
        assert np.array_equal(fast[name], slow[name]), name
    assert not fast_db.bad_values


@pytest.mark.samples
def test_a_summary_reads_the_kernels_alone(samples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the cache, ``tables`` = what the summary reads: no API calls, memory operations or
    NVTX ranges are read, and the kernels it uses are those of the whole load."""
    from kviewer.analysis.summary import SUMMARY_READS, kernel_summary
    from kviewer.io import load

    p = samples / "nsys" / "h200_llm_train_nvtx.sqlite"
    full = load(p, use_cache=False)

    def not_read(*args: object, **kwargs: object) -> None:
        raise AssertionError("read a table the summary does not use")

    for name in ("_api_calls", "_nvtx", "_gpu_ops", "_cpu_slices", "_flows"):
        monkeypatch.setattr(nsys, name, not_read)
    part = load(p, use_cache=False, tables=SUMMARY_READS)
    part.validate()
    assert part.sizes()["kernels"] == 13_579 and part.sizes()["cpu_slices"] == part.sizes()["gpu_ops"] == 0
    for col in ("id", "name", "short_name", "start", "end", "dur"):
        assert part.kernels[col].equals(full.kernels[col]), col
    assert (part.kernels["grid_x"] == -1).all()  # not read: unknown, never a made-up value
    for by in ("name", "short_name"):
        assert kernel_summary(part, by).equals(kernel_summary(full, by))


@pytest.mark.samples
def test_a_part_of_an_export_comes_from_the_file_with_the_cache_on(samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part of an uncompressed export is read from the file in place, the cache on or off: the
    cache is neither read nor written (SQLite serves the part faster than the cache the whole
    trace; BENCHMARKS.md). A whole load is still stored and reopened from the cache."""
    from kviewer.analysis.summary import SUMMARY_READS
    from kviewer.io import load
    from kviewer.io.cache import default_cache

    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    p = samples / "nsys" / "h200_llm_train_nvtx.sqlite"
    monkeypatch.setattr(default_cache(), "put", lambda *a, **k: pytest.fail("a part was stored"))
    part = load(p, tables=SUMMARY_READS)
    assert part.sizes()["cpu_slices"] == 0 and (part.kernels["grid_x"] == -1).all()
    assert part.meta.source_id is None
    monkeypatch.undo()
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    whole = load(p)
    assert whole.sizes()["cpu_slices"] > 0
    monkeypatch.setattr(nsys, "_kernels", lambda *a, **k: pytest.fail("not served from the cache"))
    assert load(p).sizes() == whole.sizes()
    # the host side (API calls, NVTX: most of an export) is not read in place: the cache serves it
    assert load(p, tables={"cpu_slices": ("name", "dur")}).sizes() == whole.sizes()


@pytest.mark.samples
def test_a_part_of_a_compressed_export_goes_through_the_cache(samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compressed export is not read in place (each read would decompress it again): a part of
    it loads the whole trace through the cache once, and the next part comes from the cache.
    (The check used to look at the decompressed head, so every compressed export counted as in
    place and was decompressed again on every command.)"""
    import gzip

    from kviewer.analysis.summary import SUMMARY_READS
    from kviewer.io import load

    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    p = tmp_path / "saxpy.sqlite.gz"
    p.write_bytes(gzip.compress((samples / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite").read_bytes()))
    first = load(p, tables=SUMMARY_READS)
    assert first.meta.source_id is not None and first.sizes()["cpu_slices"] > 0  # the whole trace, stored
    monkeypatch.setattr(nsys, "_kernels", lambda *a, **k: pytest.fail("not served from the cache"))
    again = load(p, tables=SUMMARY_READS)
    assert again.sizes() == first.sizes()
    assert again.kernels["name"].equals(first.kernels["name"])


def _walk_reference(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The nesting rule, one interval at a time: per (pid, tid) track in (start, longest first)
    order, pop what ended by this start; the depth is what is left open."""
    order = np.lexsort((-end, start, tid, pid))
    depth = np.zeros(len(start), dtype=np.int32)
    stack: list[int] = []
    track = None
    for i in order.tolist():
        if (pid[i], tid[i]) != track:
            stack, track = [], (pid[i], tid[i])
        while stack and stack[-1] <= start[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(int(end[i]))
    return depth


def test_depths_follow_the_stack_rule_on_random_intervals() -> None:
    """Nested, overlapping, equal, zero-length and backwards intervals on a few tracks."""
    rng = np.random.default_rng(7)
    for trial in range(1500):
        n = int(rng.integers(0, 40))
        pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
        start = rng.integers(0, 30, n)
        end = start + rng.integers(-3 if trial % 5 == 0 else 0, 15, n)
        got = nesting_depth(start, end, pid, tid)
        assert got.tolist() == _walk_reference(pid, tid, start, end).tolist(), (pid, tid, start, end)


def test_depths_of_deep_nesting() -> None:
    n = 200  # 200 intervals, each inside the one before, then one overlapping the outermost
    start = np.concatenate([np.arange(n), [5]])
    end = np.concatenate([1000 - np.arange(n), [2000]])
    pid = tid = np.zeros(n + 1, dtype=np.int64)
    assert nesting_depth(start, end, pid, tid).tolist() == _walk_reference(pid, tid, start, end).tolist()
