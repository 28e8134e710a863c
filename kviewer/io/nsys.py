"""Nsight Systems SQLite exports (``nsys export --type sqlite``).

Read here: kernels (CUPTI_ACTIVITY_KIND_KERNEL), memcpy and memset, CUDA runtime and driver calls
(CUPTI_ACTIVITY_KIND_RUNTIME), NVTX push/pop and start/end ranges (NVTX_EVENTS), OS runtime calls
(OSRT_API), the GPUs (TARGET_INFO_GPU, or TARGET_INFO_CUDA_GPU in old exports) and the export's
metadata. The schema drifts between nsys versions (2022.2 wrote schema 2.9.1 with
``EXPORT_META_DATA`` and every table created even when empty; 2024+ write ``META_DATA_EXPORT``,
leave empty tables out ("lazy" export) and add columns such as ``greenContextId``), so every
query is built from the columns ``PRAGMA table_info`` reports, and a table the export left out is
simply empty.

Times in the export are nanoseconds from the start of the capture session; the session's epoch
time (TARGET_INFO_SESSION_START_TIME.utcEpochNs) becomes the trace origin, so times are kept as
they are.

Global ids: nsys serialises process and thread ids as
``(hwId << 56) | (vmId << 48) | (pid << 24) | tid``; we keep pid and tid only.

The database is opened read-only; a gzip/xz/zstd/bzip2-compressed export is decompressed into a
temporary file that is removed when the load ends.
"""

from __future__ import annotations

import os
import re
import sqlite3
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Iterable, Sequence

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from kviewer.core import Diagnostic, Trace, TraceMeta, make_table
from kviewer.core.intervals import nesting_depth
from kviewer.core.names import strip_api_version
from kviewer.core.schema import OPS, STACK_SEP
from kviewer.errors import CorruptTrace, LoadError, TruncatedTrace
from kviewer.io.graphs import GRAPH_LAUNCH, link_graphs
from kviewer.io.nsys_gpu_metrics import describe, read_samples_counted
from kviewer.io.registry import CancelToken, LoaderSpec, Wanted
from kviewer.io.source import (
    SQLITE_MAGIC,
    Progress,
    compression_of_file,
    connect_readonly,
    decompress_to_file,
    remove_quietly,
    tables_only,
)

LABEL = "Nsight Systems SQLite export"

#: sqlite_master stores each table's ``CREATE TABLE`` text; these names only nsys writes
_HEAD_TABLES = re.compile(
    rb'CREATE TABLE "?(?:CUPTI_ACTIVITY_KIND_|TARGET_INFO_|NVTX_EVENTS\b|META_DATA_EXPORT\b|EXPORT_META_DATA\b)'
)
_NSYS_TABLE_NAMES = re.compile(r"^(?:CUPTI_ACTIVITY_KIND_\w+|TARGET_INFO_\w+|NVTX_EVENTS|META_DATA_EXPORT|EXPORT_META_DATA)$")

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"

# NVTX_EVENTS.eventType values (ENUM_NSYS_EVENT_TYPE in exports that carry it; these are the
# values every export we have seen uses, and the fallback when the enum table is absent)
NVTX_PUSH_POP = 59
NVTX_START_END = 60
NVTX_DOMAIN_CREATE = 75
_NVTX_TYPE_NAMES = {"NvtxPushPopRange": "push_pop", "NvtxStartEndRange": "start_end", "NvtxDomainCreate": "domain"}

# CUpti_ActivityMemcpyKind, as CUPTI documents it (nsys adds the three unified-memory kinds);
# used when the export has no ENUM_CUDA_MEMCPY_OPER table. Labels are the ones nsys prints.
MEMCPY_KINDS: dict[int, tuple[str, str]] = {
    0: ("", "Unknown"),
    1: ("HtoD", "Host-to-Device"),
    2: ("DtoH", "Device-to-Host"),
    3: ("HtoA", "Host-to-Array"),
    4: ("AtoH", "Array-to-Host"),
    5: ("AtoA", "Array-to-Array"),
    6: ("AtoD", "Array-to-Device"),
    7: ("DtoA", "Device-to-Array"),
    8: ("DtoD", "Device-to-Device"),
    9: ("HtoH", "Host-to-Host"),
    10: ("PtoP", "Peer-to-Peer"),
    11: ("HtoD", "Unified Host-to-Device"),
    12: ("DtoH", "Unified Device-to-Host"),
    13: ("DtoD", "Unified Device-to-Device"),
}
_ENUM_DIRECTION = re.compile(r"(?:UVM_)?([HDAP])TO([HDAP])$")
# srcKind/dstKind/memKind as nsys numbers them (its ENUM_CUDA_MEM_KIND, not CUPTI's order); used
# when the export has no ENUM_CUDA_MEM_KIND table
MEMORY_KINDS: dict[int, str] = {
    0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static", 6: "Managed Static", 7: "Unknown",
}

_ID_MASK = 0xFFFFFF


# ---------------------------------------------------------------------------------------------
# sniffing


def sniff(head: bytes, path: Path) -> bool:
    """SQLite magic and an nsys table in the schema.

    The schema (sqlite_master) normally sits in the first pages, so the head shows nsys's
    ``CREATE TABLE`` statements. When it does not (a schema spread further into the file), an
    uncompressed file is opened read-only and its table names checked: one cheap query.
    """
    if not head.startswith(SQLITE_MAGIC):
        return False
    if _HEAD_TABLES.search(head):
        return True
    try:
        if compression_of_file(path) is not None:
            return False  # the head is all we can cheaply see of a compressed file
        con = connect_readonly(path)
    except (OSError, LoadError):
        return False
    try:
        names = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
    except sqlite3.DatabaseError:
        return False
    finally:
        con.close()
    return any(_NSYS_TABLE_NAMES.match(n) for n in names)


# ---------------------------------------------------------------------------------------------
# loading


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    """Load an nsys SQLite export (optionally compressed) into a :class:`Trace`."""
    return _load(Path(path), progress, cancel, None)


def load_exported(db_path: Path, report: Path, progress: Progress, cancel: CancelToken) -> Trace:
    """Load the SQLite export of an ``.nsys-rep`` (:mod:`kviewer.io.nsys_rep`); the trace names the report."""
    trace = _load_db(Path(db_path), Path(report), progress, cancel, warnings=[])
    trace.meta.path = str(report)
    trace.meta.extra["exported_from"] = "nsys export --type sqlite"
    return trace


def load_part(path: Path, progress: Progress, cancel: CancelToken, tables: Wanted) -> Trace:
    """Read only ``tables`` (table -> columns) of an nsys export; see :func:`kviewer.io.registry.load`.

    The kernels and memory operations alone (without their launching thread, ``tid``) read the
    kernel table (and the memcpy and memset tables when asked for) and the names they use,
    nothing else: no API calls or NVTX ranges. Of the kernel table only the columns asked for are
    read (start and end always: the table's order). Any other request reads the whole export.
    """
    return _load(Path(path), progress, cancel, tables)


def _load(path: Path, progress: Progress, cancel: CancelToken, wanted: Wanted | None) -> Trace:
    comp = compression_of_file(path, LABEL)
    if comp is None:
        return _load_db(path, path, progress, cancel, warnings=[], wanted=wanted)

    # SQLite needs a file: decompress, streaming, into the private temporary folder; the file is
    # removed whatever happens (signals included: see source.private_tmpdir)
    tmp_path, _, truncated = decompress_to_file(path, ".sqlite", progress, cancel.check, LABEL)
    try:
        cancel.check()
        warnings: list[Diagnostic] = []
        if truncated:
            warnings.append(Diagnostic.warning("truncated", path, f"the {comp} stream is cut short; the export may be incomplete"))
        try:
            return _load_db(tmp_path, path, progress, cancel, warnings, wanted)
        except CorruptTrace as exc:
            if truncated:
                raise TruncatedTrace(path, f"the {comp} stream is cut short; {exc.problem}", LABEL) from exc
            raise
    finally:
        remove_quietly(tmp_path)


def _load_db(
    db_path: Path, shown_path: Path, progress: Progress, cancel: CancelToken, warnings: list[Diagnostic], wanted: Wanted | None = None
) -> Trace:
    """Read an uncompressed export at ``db_path``; errors name ``shown_path`` (the user's file)."""
    beat = _Heartbeat(progress, cancel)
    try:
        con = connect_readonly(db_path, LABEL, interrupt=beat)
    except LoadError as exc:
        raise CorruptTrace(shown_path, exc.problem, LABEL) from exc
    recognised = LABEL
    try:
        db = _Db(con, beat)
        meta = _read_meta(db, shown_path)
        recognised = meta.format_label
        meta.warnings.extend(warnings)
        meta.warnings.extend(Diagnostic.warning("ignored", shown_path, w) for w in getattr(con, "warnings", []))
        if KERNEL_TABLE not in db.tables:
            # a lazy export leaves out empty tables: a run without kernels is still a trace
            meta.warnings.append(
                Diagnostic.warning(
                    "empty",
                    shown_path,
                    f"no {KERNEL_TABLE} table: no CUDA kernels were recorded "
                    "(profile with CUDA tracing, e.g. 'nsys profile -t cuda', to see them)",
                )
            )
        trace = _read_tables(db, meta, progress, cancel, wanted)
        for name, bad in db.bad_values.items():
            trace.meta.warnings.append(
                Diagnostic.warning(
                    "damaged", shown_path, f"{bad:,} values of {name} are not integers (the export looks damaged); they are shown as unknown"
                )
            )
        return trace
    except sqlite3.DatabaseError as exc:
        cancel.check()  # a query stopped by the progress handler: cancelled, or over the memory budget
        if "not authorized" in str(exc).lower() or "prohibited" in str(exc).lower():  # foreign message: SQLite's
            raise CorruptTrace(shown_path, "the export asks SQLite to run its own code (a generated column or "
                               f"virtual table); kviewer runs only its own queries ({exc})", recognised) from exc
        raise CorruptTrace(shown_path, f"the database is damaged ({exc})", recognised) from exc
    finally:
        con.close()


class _Heartbeat:
    """SQLite's progress handler for a load: stops a running query within milliseconds on
    cancel (or when the memory watch failed the token). The registry repeats the latest
    progress report during long steps."""

    def __init__(self, progress: Progress, cancel: CancelToken) -> None:
        self.progress = progress
        self.cancel = cancel

    def __call__(self) -> bool:
        return self.cancel.cancelled


#: rows fetched at a time: bounds what a query holds as Python objects, and how long a load goes
#: between cancel checks
_CHUNK = 65536
#: rows per ``group_concat`` chunk of :meth:`_Db.ints` (about 1.3 MB of text per column)
_INT_CHUNK = 65536


class _Db:
    """The open export: which tables exist and which columns each has."""

    def __init__(self, con: sqlite3.Connection, beat: _Heartbeat | None = None) -> None:
        self.con = con
        self.beat = beat
        # tables only: a view (or anything else) named like an nsys table is not read
        self.tables = tables_only(con)
        self._columns: dict[str, set[str]] = {}
        self._types: dict[str, dict[str, str]] = {}
        self.bad_values: dict[str, int] = {}
        """output column -> how many values were not integers (text or blobs in a damaged export)"""
        self._string_ids: np.ndarray | None = None
        self._string_values: np.ndarray | None = None
        self._dense: bool | None = None

    def check(self) -> None:
        if self.beat is not None:
            self.beat.cancel.check()

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            if table in self.tables:
                # table names come from sqlite_master, not from the user; quoting keeps odd ones safe
                rows = self.con.execute(f'pragma table_info("{table}")').fetchall()
                self._columns[table] = {r[1] for r in rows}
                self._types[table] = {r[1]: str(r[2] or "") for r in rows}
            else:
                self._columns[table] = set()
                self._types[table] = {}
        return self._columns[table]

    def integer_affinity(self, table: str, column: str) -> bool:
        """Whether ``column`` is declared with INTEGER affinity (SQLite's rule: the type names "INT").

        SQLite stores what such a column receives as an integer whenever that is lossless (text
        "12", real 12.0), so anything else left in it (a fraction, a number beyond 64 bits, other
        text, a blob, NULL) does not print as one plain integer.
        """
        self.columns(table)
        return "INT" in self._types.get(table, {}).get(column, "").upper()

    def col(self, table: str, alias: str, column: str, default: str = "-1") -> str:
        """``coalesce(alias.column, default)`` when the column exists, else the default."""
        if column in self.columns(table):
            return f"coalesce({alias}.{column}, {default})"
        return default

    def string_id(self, table: str, alias: str, column: str) -> str:
        """A select expression for a StringIds reference column: the id when it is an integer, else -1.

        Names are not joined in SQL: a join would hand every row its own copy of its name (a
        2 MB name shared by a million kernels is 2 TB). The ids are mapped through the strings
        read once (:meth:`strings`), so each name exists once, however many rows share it.
        """
        if column in self.columns(table) and "StringIds" in self.tables:
            ref = f"{alias}.{column}"
            return f"(case when typeof({ref}) = 'integer' then {ref} else -1 end)"
        return "-1"

    def _load_strings(self) -> None:
        ids: np.ndarray = np.empty(0, dtype=np.int64)
        values: np.ndarray = np.empty(0, dtype=object)
        if {"id", "value"} <= self.columns("StringIds"):
            c = self.query("select id, value from StringIds", [("id", "i"), ("value", "s")], table="StringIds", text_none=None)
            ids, values = c["id"], c["value"]
            order = np.argsort(ids, kind="stable")
            ids, values = ids[order], values[order]
        self._string_ids, self._string_values = ids, values

    def string_positions(self, refs: np.ndarray) -> np.ndarray:
        """Positions in the string table of StringIds references (-1: no such id, or no text)."""
        if self._string_ids is None:
            self._load_strings()
        ids, values = self._string_ids, self._string_values
        assert ids is not None and values is not None
        if not len(ids) or not len(refs):
            return np.full(len(refs), -1, dtype=np.int64)
        if self._dense is None:
            self._dense = bool(np.array_equal(ids, np.arange(len(ids))))
        if self._dense:  # ids 0..n-1, as nsys numbers them: the id is the position
            return np.where((refs >= 0) & (refs < len(ids)), refs, -1)
        pos = np.minimum(np.searchsorted(ids, refs), len(ids) - 1)
        found = ids[pos] == refs
        return np.where(found, pos, -1)

    def strings_at(self, positions: np.ndarray) -> pd.Categorical[Any]:
        """The strings at ``positions`` (-1 and text-less values: ""), as a categorical: each
        distinct string once, whatever the number of rows."""
        values = self._string_values if self._string_values is not None else np.empty(0, dtype=object)
        used, inverse = _unique_positions(positions, len(values))
        cats: dict[str, int] = {}
        remap = np.empty(len(used), dtype=np.int64)
        for i, u in enumerate(used.tolist()):
            text = _as_text(values[u]) if u >= 0 else ""
            remap[i] = cats.setdefault(text, len(cats))
        codes = remap[inverse.reshape(-1)] if len(used) else np.empty(0, dtype=np.int64)
        return pd.Categorical.from_codes(codes, categories=pd.Index(list(cats)))

    def count(self, table: str) -> int:
        try:
            return int(self.con.execute(f'select count(*) from "{table}"').fetchone()[0])
        except (sqlite3.DatabaseError, TypeError, ValueError):
            return 0

    def query(
        self,
        sql: str,
        spec: Sequence[tuple[str, str]],
        params: Sequence[Any] = (),
        table: str | None = None,
        text_none: str | None = "",
    ) -> dict[str, np.ndarray]:
        """Run one query; return its columns as numpy arrays (``spec``: (name, 'i' int | 's' str)).

        Rows are fetched in chunks of :data:`_CHUNK` straight into arrays sized by ``count(*)``
        of ``table``: no list of every row, and a cancel check between chunks.
        """
        n = self.count(table) if table else 0
        out: dict[str, np.ndarray] = {
            name: np.empty(n, dtype=np.int64 if kind == "i" else object) for name, kind in spec
        }
        cur = self.con.execute(sql, params)
        pos = 0
        while True:
            self.check()
            rows = cur.fetchmany(_CHUNK)
            if not rows:
                break
            k = len(rows)
            if pos + k > len(next(iter(out.values()))):
                grow = max(2 * (pos + k), _CHUNK)
                for name in out:
                    bigger = np.empty(grow, dtype=out[name].dtype)
                    bigger[:pos] = out[name][:pos]
                    out[name] = bigger
            for (name, kind), values in zip(spec, zip(*rows)):
                if kind == "i":
                    try:
                        out[name][pos : pos + k] = values
                    except (ValueError, TypeError, OverflowError):
                        out[name][pos : pos + k], bad = _ints_or_missing(values)
                        self.bad_values[name] = self.bad_values.get(name, 0) + bad
                else:
                    out[name][pos : pos + k] = values
            pos += k
        for name, kind in spec:
            arr = out[name][:pos] if len(out[name]) != pos else out[name]
            if kind == "s" and text_none is not None and len(arr):
                arr[pd.isna(arr)] = text_none
            out[name] = arr
        return out

    def ints(self, table: str, alias: str, spec: Sequence[tuple[str, str]]) -> dict[str, np.ndarray]:
        """Integer columns of a whole table as int64 arrays, in the order ``select`` returns the rows.

        ``spec`` is (output name, select expression over ``alias``) per column. SQLite prints each
        chunk of :data:`_INT_CHUNK` rows as one comma-separated text per column (``group_concat``,
        in C) and numpy parses it (in C): no Python object per value, which is most of what a
        row-by-row fetch costs (3-4x). All the aggregates of one query see the rows in one scan,
        so the columns stay aligned; chunks are rowid ranges, in rowid order (a plain scan's).

        A chunk whose text is not exactly one integer per row (a NULL, a fraction, text, a blob
        with a comma: a damaged export) is read again through :meth:`query`, whose rules for such
        values apply (the same values as before this fast path). Columns without INTEGER affinity
        (:meth:`integer_affinity`) can hold text that parses as a number but is not one to
        SQLite; for those the chunk also counts non-integers in SQL.
        """
        names = [n for n, _ in spec]
        exprs = [e for _, e in spec]
        kinds = [(n, "i") for n in names]
        whole = f"select {', '.join(exprs)} from \"{table}\" as {alias}"
        n = self.count(table)
        shadowed = "rowid" in {c.lower() for c in self.columns(table)}
        bounds = None if shadowed or self._without_rowid(table) else self.con.execute(f'select min(rowid), max(rowid) from "{table}"').fetchone()
        if bounds is None or bounds[0] is None or bounds[1] - bounds[0] + 1 > 2 * n + _INT_CHUNK:
            # no usable rowid (shadowed, WITHOUT ROWID) or ids spread far apart: row by row
            return self.query(whole, kinds, table=table)
        strict = [e for e in exprs if any(not self.integer_affinity(table, c) for c in re.findall(rf"\b{alias}\.(\w+)", e))]
        check = "sum(" + " and ".join(f"typeof({e}) = 'integer'" for e in strict) + ")" if strict else "count(*)"
        # group_concat skips NULLs, which would shift the column: a bare column prints '' for NULL
        # (",," does not parse, so the chunk goes row by row); col() and string_id() are never NULL
        shown = [f"coalesce({e}, '')" if re.fullmatch(rf"{alias}\.\w+", e) else e for e in exprs]
        sql = (
            f"select count(*), {check}, " + ", ".join(f"group_concat({e})" for e in shown)
            + f' from "{table}" as {alias} where {alias}.rowid between ? and ?'
        )
        out = {k: np.empty(n, dtype=np.int64) for k in names}
        pos = 0
        lo, hi = int(bounds[0]), int(bounds[1])
        for first in range(lo, hi + 1, _INT_CHUNK):
            self.check()
            last = min(first + _INT_CHUNK - 1, hi)
            row = self.con.execute(sql, (first, last)).fetchone()
            k = int(row[0])
            if not k:
                continue
            cols = _parse_ints(row[2:], k) if row[1] == k else None
            if cols is None:  # a damaged chunk: row by row, with the usual rules for odd values
                part = self.query(whole + f" where {alias}.rowid between ? and ?", kinds, (first, last))
                cols = [part[name] for name in names]
                k = len(cols[0])
            if pos + k > len(out[names[0]]):
                for name in names:
                    out[name] = np.concatenate([out[name][:pos], np.empty(max(pos + k, 2 * pos) - pos, dtype=np.int64)])
            for name, values in zip(names, cols):
                out[name][pos : pos + k] = values
            pos += k
        return {name: (a[:pos] if len(a) != pos else a) for name, a in out.items()}

    def _without_rowid(self, table: str) -> bool:
        row = self.con.execute("select sql from sqlite_master where type = 'table' and name = ?", (table,)).fetchone()
        return bool(row and isinstance(row[0], str) and re.search(r"without\s+rowid", row[0], re.IGNORECASE))

    def key_values(self, table: str) -> list[tuple[str, str]]:
        if not {"name", "value"} <= self.columns(table):
            return []
        return [(str(k), "" if v is None else str(v)) for k, v in self.con.execute(f'select name, value from "{table}"')]


def _unique_positions(positions: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(positions, return_inverse=True)`` for positions in [-1, m), in O(len + m):
    a table over the string positions instead of a sort of every row."""
    positions = np.asarray(positions, dtype=np.int64)
    if not len(positions):
        return np.unique(positions, return_inverse=True)
    present = np.zeros(m + 1, dtype=bool)
    present[positions + 1] = True
    used = np.flatnonzero(present) - 1
    lookup = np.empty(m + 1, dtype=np.int64)
    lookup[used + 1] = np.arange(len(used), dtype=np.int64)
    return used, lookup[positions + 1]


def _parse_ints(texts: Sequence[Any], k: int) -> list[np.ndarray] | None:
    """``group_concat`` texts of one chunk as int64 arrays of ``k`` values each, or None when
    one is not exactly ``k`` comma-separated integers (numpy parses them in C)."""
    cols = []
    for text in texts:
        if not isinstance(text, str):
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # older numpy only warns about text it cannot read
                values = np.fromstring(text, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            return None
        if len(values) != k:
            return None
        cols.append(values)
    return cols


def _as_text(value: Any) -> str:
    """A StringIds value as text (a damaged export can hold blobs or numbers there)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _ints_or_missing(values: Sequence[Any]) -> tuple[np.ndarray, int]:
    """Integers as int64, anything else (text, bytes, out of range) as -1; and how many were not."""
    out = np.full(len(values), -1, dtype=np.int64)
    bad = 0
    for i, v in enumerate(values):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, int) and -(2**63) <= v < 2**63:
            out[i] = v
        else:
            bad += 1
    return out, bad


# ---------------------------------------------------------------------------------------------
# metadata


def _read_meta(db: _Db, path: Path) -> TraceMeta:
    export: dict[str, str] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        for k, v in db.key_values(table):
            export.setdefault(k, v)
    capture = db.key_values("META_DATA_CAPTURE")
    cap: dict[str, str] = {}
    for k, v in capture:
        cap.setdefault(k, v)

    schema = export.get("EXPORT_SCHEMA_VERSION", "")
    if not schema and "EXPORT_SCHEMA_VERSION_MAJOR" in export:
        schema = ".".join(export.get(f"EXPORT_SCHEMA_VERSION_{p}", "0") for p in ("MAJOR", "MINOR", "MICRO"))
    version = export.get("EXPORT_PRODUCT_VERSION", "") or cap.get("PRODUCT_VERSION", "")

    origin: int | None = None
    if "utcEpochNs" in db.columns("TARGET_INFO_SESSION_START_TIME"):
        row = db.con.execute("select utcEpochNs from TARGET_INFO_SESSION_START_TIME limit 1").fetchone()
        if row and row[0] is not None:
            origin = int(row[0])

    extra: dict[str, Any] = {}
    if schema:
        extra["schema"] = schema
    host = ""
    if {"name", "value"} <= db.columns("TARGET_INFO_SYSTEM_ENV"):
        row = db.con.execute("select value from TARGET_INFO_SYSTEM_ENV where name = 'Hostname' limit 1").fetchone()
        host = row[0] if row and row[0] else ""
    host = host or cap.get("DEVICE_DISPLAY_NAME", "")
    if host:
        extra["host"] = host
    command = _command(capture)
    if command:
        extra["command"] = command

    label = f"{LABEL}, schema {schema}" if schema else LABEL
    return TraceMeta(
        path=str(path),
        source_format="nsys",
        format_label=label,
        tool="Nsight Systems",
        tool_version=version,
        origin_ns=origin,
        time_zero="session start",  # nsys times count from the session start, as its GUI shows them
        host=host,
        program=os.path.basename(command.split(" ", 1)[0]) if command else "",
        extra=extra,
    )


def _command(capture: Iterable[tuple[str, str]]) -> str:
    """``PROCESS_0:COMMAND`` and its ``PROCESS_0:ARGUMENT_n`` from META_DATA_CAPTURE."""
    command = ""
    args: dict[int, str] = {}
    for k, v in capture:
        if k == "PROCESS_0:COMMAND":
            command = v
        elif k.startswith("PROCESS_0:ARGUMENT_"):
            try:
                args[int(k.rsplit("_", 1)[1])] = v
            except ValueError:
                continue
    if not command:
        return ""
    return " ".join([command] + [args[i] for i in sorted(args)])


# ---------------------------------------------------------------------------------------------
# the tables


def _kernels_only(wanted: Wanted | None) -> Collection[str] | None:
    """The kernel columns to read when ``wanted`` needs the GPU's own activity alone (kernels and
    memory operations, neither of them their launching thread ``tid``, which comes from the API
    calls), else None. Framework ops (:data:`~kviewer.core.schema.OPS`) need nothing: an export
    records none."""
    if wanted is None or set(wanted) - {"kernels", "gpu_ops", "devices", OPS}:
        return None
    if "tid" in wanted.get("gpu_ops", ()):
        return None
    columns = set(wanted.get("kernels", ()))
    return None if "tid" in columns else columns


def _read_tables(db: _Db, meta: TraceMeta, progress: Progress, cancel: CancelToken, wanted: Wanted | None = None) -> Trace:
    """The tables of an export; under ``wanted`` (table -> columns) only what those tables need:
    the memory events, GPU metrics and graph activities are read only when asked for, and the
    timeline tables (kernels, memory operations, API calls, NVTX) only when one of them is."""
    gpus = _Gpus.read(db)
    progress(0.35, "kernels")
    cancel.check()

    def wants(table: str) -> bool:
        return wanted is None or table in wanted

    only = _kernels_only(wanted)
    graphs = _graph_launches_only(db, meta, gpus, wanted)
    if graphs is not None:
        return graphs
    if wanted is not None and only is not None:
        kernels = _kernels(db, gpus, only) if "kernels" in wanted else make_table("kernels", 0)
        gpu_ops = _gpu_ops(db, gpus) if "gpu_ops" in wanted else make_table("gpu_ops", 0)
        return Trace(meta=meta, kernels=kernels, gpu_ops=gpu_ops, devices=gpus.devices)
    timeline = any(wants(t) for t in ("kernels", "gpu_ops", "cpu_slices", "flows", "graph_launches"))
    trace = Trace(meta=meta, devices=gpus.devices)
    if timeline:
        kernels = _kernels(db, gpus)
        progress(0.5, "memory operations")
        cancel.check()
        gpu_ops = _gpu_ops(db, gpus)
        progress(0.6, "CUDA API calls")
        cancel.check()
        parts = [_api_calls(db, RUNTIME_TABLE, None)]
        cancel.check()
        progress(0.7, "NVTX ranges")
        parts.append(_nvtx(db, meta))
        cancel.check()
        parts.append(_api_calls(db, "OSRT_API", "osrt"))
        cancel.check()
        progress(0.85, "nesting")
        cpu_slices = _cpu_slices(parts)
        flows = _flows(cpu_slices, kernels, gpu_ops)
        _fill_launch_tid(kernels, cpu_slices, flows)
        trace.kernels, trace.gpu_ops, trace.cpu_slices, trace.flows = kernels, gpu_ops, cpu_slices, flows
        if meta.extra.get("command") is None:
            command = _process_name(db, kernels)
            if command:
                meta.extra["command"] = command
    if wants("memory"):
        cancel.check()
        trace.memory = _memory(db, gpus)
    if wants("gpu_samples"):
        progress(0.9, "GPU metrics")
        cancel.check()

        samples, rows = read_samples_counted(db.con, db.tables, gpus.by_gpu_id, db.check)
        if len(samples):
            meta.extra["gpu metrics"] = describe(samples)
            lost = rows - len(samples)
            if lost > 0:
                meta.warnings.append(Diagnostic.warning(
                    "damaged", meta.path, f"{lost:,} GPU metrics samples could not be read (a NULL, text or out-of-range value): left out"))
        trace.gpu_samples = samples
    if wants("cpu_samples"):
        cancel.check()
        trace.cpu_samples = _cpu_samples(db)
    if not timeline:
        return trace
    # the graph-level activities add launches (and so move the kernels' graph_launch ids)
    graph_ids = wants("graph_launches") or "graph_launch" in (wanted or {}).get("kernels", ())
    return link_graphs(trace, _graph_activities(db, gpus) if graph_ids else None)


SAMPLES_TABLE, CALLCHAINS_TABLE = "COMPOSITE_EVENTS", "SAMPLING_CALLCHAINS"


def _cpu_samples(db: _Db) -> pd.DataFrame:
    """CPU samples and their call stacks (``nsys profile --sample=cpu --backtrace=...``).

    SAMPLING_CALLCHAINS holds one row per frame of a sample (``stackDepth`` 0 is the innermost);
    each sample's frames become one stack text, outermost first. An unresolved frame (its symbol is
    an address) is named by its module's file name in brackets, so the samples of one library add up.
    """
    if SAMPLES_TABLE not in db.tables or not {"id", "start"} <= db.columns(SAMPLES_TABLE):
        return make_table("cpu_samples", 0)
    ev = db.ints(SAMPLES_TABLE, "e", [("id", "e.id"), ("start", "e.start"), ("gtid", db.col(SAMPLES_TABLE, "e", "globalTid")),
                                      ("state", db.col(SAMPLES_TABLE, "e", "threadState", "0"))])  # fmt: skip
    n = len(ev["id"])
    if not n:
        return make_table("cpu_samples", 0)
    stacks = np.full(n, "", dtype=object)
    cc = CALLCHAINS_TABLE
    if cc in db.tables and {"id", "symbol", "stackDepth"} <= db.columns(cc):
        ch = db.ints(cc, "c", [("id", "c.id"), ("depth", "c.stackDepth"), ("symbol", db.string_id(cc, "c", "symbol")),
                               ("module", db.string_id(cc, "c", "module")), ("unresolved", db.col(cc, "c", "unresolved", "0"))])  # fmt: skip
        if len(ch["id"]):
            sym = np.asarray(db.strings_at(db.string_positions(ch["symbol"])).astype(object))
            mod = np.asarray(db.strings_at(db.string_positions(ch["module"])).astype(object))
            unresolved = ch["unresolved"] != 0
            if unresolved.any():
                base = np.array([f"[{str(m).rsplit('/', 1)[-1] or '?'}]" for m in mod[unresolved]], dtype=object)
                sym[unresolved] = base
            # outermost first: by sample, then deepest stackDepth first
            order = np.lexsort((-ch["depth"], ch["id"]))
            ids, frames = ch["id"][order], sym[order]
            cuts = np.flatnonzero(np.diff(ids)) + 1
            heads = np.concatenate([[0], cuts]) if len(ids) else np.zeros(0, dtype=np.int64)
            texts = [STACK_SEP.join(map(str, part)) for part in np.split(frames, cuts)]
            pos = np.searchsorted(ev["id"], ids[heads]) if len(heads) else heads
            sorted_ids = np.all(np.diff(ev["id"]) >= 0)
            if sorted_ids:
                ok = (pos < n) & (ev["id"][np.minimum(pos, n - 1)] == ids[heads])
                for p_, t_, good in zip(pos.tolist(), texts, ok.tolist()):
                    if good:
                        stacks[p_] = t_
            else:
                at = {int(i): t_ for i, t_ in zip(ids[heads].tolist(), texts)}
                stacks = np.array([at.get(int(i), "") for i in ev["id"].tolist()], dtype=object)
    labels = _enum_labels(db, "ENUM_SAMPLING_THREAD_STATE")
    state = np.array([labels.get(int(v), "Unknown") for v in ev["state"].tolist()], dtype=object)
    order = np.argsort(ev["start"], kind="stable")
    return make_table("cpu_samples", n, {
        "start": ev["start"][order], "pid": _pid(ev["gtid"])[order], "tid": _tid(ev["gtid"])[order],
        "state": state[order], "stack": stacks[order],
    })  # fmt: skip


def _pid(global_id: np.ndarray) -> np.ndarray:
    out = (global_id >> 24) & _ID_MASK
    return np.where(global_id < 0, -1, out)


def _tid(global_id: np.ndarray) -> np.ndarray:
    return np.where(global_id < 0, -1, global_id & _ID_MASK)


#: kernel table columns -> the select outputs (of :func:`_kernels`) they are made from
_KERNEL_NEEDS = {"name": ("name", "short_name"), "short_name": ("name", "short_name"), "dur": (),
                 "device": ("device", "gpid"), "pid": ("gpid",)}  # fmt: skip


def _kernels(db: _Db, gpus: "_Gpus", columns: Collection[str] | None = None) -> pd.DataFrame:
    """The kernel table; ``columns``: only these schema columns (the others unknown), else all."""
    t = KERNEL_TABLE
    if t not in db.tables:
        return make_table("kernels", 0)
    name = db.string_id(t, "k", "demangledName")
    short = db.string_id(t, "k", "shortName")
    cols = db.columns(t)
    shared = " + ".join(f"coalesce(k.{c}, 0)" for c in ("staticSharedMemory", "dynamicSharedMemory") if c in cols) or "-1"
    spec = [
        ("start", "k.start"), ("end", "k.end"), ("device", db.col(t, "k", "deviceId")), ("stream", db.col(t, "k", "streamId")),
        ("correlation", db.col(t, "k", "correlationId")), ("gpid", db.col(t, "k", "globalPid")),
        ("name", name), ("short_name", short),
        ("grid_x", db.col(t, "k", "gridX")), ("grid_y", db.col(t, "k", "gridY")), ("grid_z", db.col(t, "k", "gridZ")),
        ("block_x", db.col(t, "k", "blockX")), ("block_y", db.col(t, "k", "blockY")), ("block_z", db.col(t, "k", "blockZ")),
        ("registers", db.col(t, "k", "registersPerThread")), ("shared_mem", shared),
        ("dynamic_shared_mem", db.col(t, "k", "dynamicSharedMemory")), ("context", db.col(t, "k", "contextId")),
        ("graph_node", db.col(t, "k", "graphNodeId")), ("graph_id", db.col(t, "k", "graphId")),
    ]  # fmt: skip
    if columns is not None:
        keep = {"start", "end"} | {x for col in columns for x in _KERNEL_NEEDS.get(col, (col,))}
        spec = [(out, expr) for out, expr in spec if out in keep]
    c: dict[str, Any] = db.ints(t, "k", spec)
    if "gpid" in c:
        gpid = c.pop("gpid")
        c["pid"] = _pid(gpid)
        if "device" in c:
            c["device"] = gpus.map(c["pid"], c["device"])
    if "name" in c:
        # as coalesce(name, short name, '') and coalesce(short name, name, '') did in SQL
        name_pos = db.string_positions(c["name"])
        short_pos = db.string_positions(c["short_name"])
        both = db.strings_at(np.concatenate([np.where(name_pos >= 0, name_pos, short_pos), np.where(short_pos >= 0, short_pos, name_pos)]))
        n = len(name_pos)
        codes = both.codes
        cats = both.categories
        c["name"] = _compact(pd.Categorical.from_codes(codes[:n], categories=cats))
        c["short_name"] = _compact(pd.Categorical.from_codes(codes[n:], categories=cats))
    return make_table("kernels", len(c["start"]), c)


def _gpu_ops(db: _Db, gpus: "_Gpus") -> pd.DataFrame:
    parts: list[dict[str, np.ndarray]] = []
    t = MEMCPY_TABLE
    if t in db.tables:
        c = db.ints(
            t,
            "m",
            _op_spec(db, t)
            + [("copy_kind", db.col(t, "m", "copyKind")), ("context", db.col(t, "m", "contextId")),
               ("src_kind", db.col(t, "m", "srcKind")), ("dst_kind", db.col(t, "m", "dstKind"))],
        )  # fmt: skip
        kinds = {**MEMCPY_KINDS, **_memcpy_kinds(db)}
        uniq, inverse = np.unique(c.pop("copy_kind"), return_inverse=True)
        known = [kinds.get(int(u), ("", f"kind {int(u)}")) for u in uniq]
        # named as nsys stats names them, e.g. "[CUDA memcpy Host-to-Device]"
        c["direction"] = np.array([d for d, _ in known], dtype=object)[inverse.reshape(-1)]
        c["name"] = np.array([f"[CUDA memcpy {label}]" for _, label in known], dtype=object)[inverse.reshape(-1)]
        c["kind"] = np.full(len(c["start"]), "memcpy", dtype=object)
        c["value"] = np.full(len(c["start"]), -1, dtype=np.int64)
        parts.append(c)
    t = MEMSET_TABLE
    if t in db.tables:
        c = db.ints(
            t,
            "m",
            _op_spec(db, t)
            + [("value", db.col(t, "m", "value")), ("context", db.col(t, "m", "contextId")),
               ("dst_kind", db.col(t, "m", "memKind"))],
        )  # fmt: skip
        n = len(c["start"])
        c["src_kind"] = np.full(n, -1, dtype=np.int64)
        c["direction"] = np.full(n, "", dtype=object)
        c["name"] = np.full(n, "[CUDA memset]", dtype=object)
        c["kind"] = np.full(n, "memset", dtype=object)
        parts.append(c)
    if not parts:
        return make_table("gpu_ops", 0)
    cols: dict[str, Any] = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    gpid = cols.pop("gpid")
    cols["pid"] = _pid(gpid)
    cols["device"] = gpus.map(cols["pid"], cols["device"])
    # memory kinds by their label in ENUM_CUDA_MEM_KIND, as nsys stats cuda_gpu_trace prints them
    mem_kinds = {**MEMORY_KINDS, **_enum_labels(db, "ENUM_CUDA_MEM_KIND")}
    for k in ("src_kind", "dst_kind"):
        uniq, inverse = np.unique(cols[k], return_inverse=True)
        labels = np.array([mem_kinds.get(int(u), "") if u >= 0 else "" for u in uniq] or [""], dtype=object)
        cols[k] = _categorical(labels[inverse.reshape(-1)] if len(uniq) else np.empty(0, dtype=object))
    for k in ("name", "kind", "direction"):
        cols[k] = _categorical(cols[k])
    return make_table("gpu_ops", len(cols["start"]), cols)


def _op_spec(db: _Db, t: str) -> list[tuple[str, str]]:
    """The columns memcpy and memset records share, as (output name, select expression)."""
    return [("start", "m.start"), ("end", "m.end")] + [
        (out, db.col(t, "m", col))
        for out, col in (("device", "deviceId"), ("stream", "streamId"), ("correlation", "correlationId"),
                         ("gpid", "globalPid"), ("bytes", "bytes"))
    ]  # fmt: skip


def _memcpy_kinds(db: _Db) -> dict[int, tuple[str, str]]:
    """copyKind -> (direction, label) from ENUM_CUDA_MEMCPY_OPER when the export has it."""
    if not {"id", "name", "label"} <= db.columns("ENUM_CUDA_MEMCPY_OPER"):
        return {}
    out: dict[int, tuple[str, str]] = {}
    for kind, name, label in db.con.execute("select id, name, label from ENUM_CUDA_MEMCPY_OPER"):
        m = _ENUM_DIRECTION.search(str(name or ""))
        direction = f"{m.group(1)}to{m.group(2)}" if m else MEMCPY_KINDS.get(int(kind), ("", ""))[0]
        out[int(kind)] = (direction, str(label or name or f"kind {kind}"))
    return out


def _enum_labels(db: _Db, table: str) -> dict[int, str]:
    """id -> label of an ``ENUM_*`` table when the export has it."""
    if not {"id", "label"} <= db.columns(table):
        return {}
    return {int(i): str(label) for i, label in db.con.execute(f"select id, label from {table}") if label is not None}


def _api_calls(db: _Db, table: str, category: str | None) -> dict[str, np.ndarray]:
    """CUDA runtime/driver calls (category by name: ``cuda*`` runtime, other ``cu*`` driver) or OSRT."""
    if table not in db.tables:
        return _empty_slices()
    name = db.string_id(table, "r", "nameId")
    c: dict[str, Any] = db.ints(
        table,
        "r",
        [("start", "r.start"), ("end", "r.end"), ("gtid", db.col(table, "r", "globalTid")),
         ("correlation", db.col(table, "r", "correlationId")), ("name", name),
         ("event_class", db.col(table, "r", "eventClass"))],
    )  # fmt: skip
    event_class = c.pop("event_class")
    c["name_id"] = c["name"].copy()  # nsys stats groups calls by this id, not by the text
    # each distinct name once: a categorical (codes), never a string per row
    by_name = db.strings_at(db.string_positions(c["name"]))
    uniq = [str(u) for u in by_name.categories]
    inverse = np.asarray(by_name.codes, dtype=np.int64)
    n = len(inverse)
    if category is None:
        # nsys stores runtime and driver calls in one table; versioned names (cudaLaunchKernel_v7000)
        # are the same call as the plain ones
        stripped = [strip_api_version(u) for u in uniq]
        index: dict[str, int] = {}
        remap = np.array([index.setdefault(u, len(index)) for u in stripped], dtype=np.int64)
        is_driver = np.array([not (u.startswith("cuda") or not u.startswith("cu")) for u in stripped], dtype=np.int8)
        c["name"] = pd.Categorical.from_codes(remap[inverse] if len(uniq) else inverse, categories=pd.Index(list(index)))
        # codes, not a string per row: 0 driver, 1 runtime (as pd.Categorical would sort them)
        kind = (1 - is_driver)[inverse] if len(uniq) else np.ones(n, dtype=np.int8)
        c["category"] = pd.Categorical.from_codes(kind, categories=pd.Index(["driver", "runtime"]))
    else:
        c["name"] = pd.Categorical.from_codes(inverse, categories=pd.Index(uniq))
        # OSRT_API also holds the profiler's own "OS runtime libraries profiling started/finished"
        # marks (other event classes): calls are only the rows of the OS runtime class
        calls = event_class == _event_class(db, "TRACE_PROCESS_EVENT_OS_RUNTIME", 27)
        labels = sorted({category, "other"})
        codes = np.where(calls | (event_class < 0), labels.index(category), labels.index("other")).astype(np.int8)
        c["category"] = pd.Categorical.from_codes(codes, categories=pd.Index(labels))
        c["correlation"] = np.full(n, -1, dtype=np.int64)
    gtid = c.pop("gtid")
    c["pid"] = _pid(gtid)
    c["tid"] = _tid(gtid)
    return c


def _event_class(db: _Db, name: str, default: int) -> int:
    """The id of an ``ENUM_NSYS_EVENT_CLASS`` name (the export's own table when it has one)."""
    if {"id", "name"} <= db.columns("ENUM_NSYS_EVENT_CLASS"):
        row = db.con.execute("select id from ENUM_NSYS_EVENT_CLASS where name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
    return default


def _empty_slices() -> dict[str, np.ndarray]:
    i = np.empty(0, dtype=np.int64)
    s = np.empty(0, dtype=object)
    return {"start": i, "end": i, "correlation": i, "name": s, "category": s, "pid": i, "tid": i, "name_id": i}


def _nvtx_types(db: _Db) -> dict[str, int]:
    types = {"push_pop": NVTX_PUSH_POP, "start_end": NVTX_START_END, "domain": NVTX_DOMAIN_CREATE}
    if {"id", "name"} <= db.columns("ENUM_NSYS_EVENT_TYPE"):
        for tid, name in db.con.execute("select id, name from ENUM_NSYS_EVENT_TYPE"):
            if name in _NVTX_TYPE_NAMES:
                types[_NVTX_TYPE_NAMES[name]] = int(tid)
    return types


def _nvtx(db: _Db, meta: TraceMeta) -> dict[str, np.ndarray]:
    """NVTX push/pop and start/end ranges; named ``domain:text`` outside the default domain, as nsys does."""
    t = "NVTX_EVENTS"
    if t not in db.tables:
        return _empty_slices()
    types = _nvtx_types(db)
    text_id = db.string_id(t, "e", "textId")
    text = "e.text" if "text" in db.columns(t) else "NULL"
    c = db.query(
        f"select e.start, coalesce(e.end, -1), e.eventType, {text}, {text_id}, "
        f"{db.col(t, 'e', 'globalTid')}, {db.col(t, 'e', 'domainId', '0')} from {t} as e "
        "where e.eventType in (?, ?, ?)",
        [("start", "i"), ("end", "i"), ("type", "i"), ("name", "s"), ("text_id", "i"), ("gtid", "i"), ("domain", "i")],
        (types["push_pop"], types["start_end"], types["domain"]),
        table=t,
        text_none=None,
    )
    # inline text first, else the StringIds text (as coalesce(text, textId's value, '') did)
    inline = c["name"]
    by_id = db.strings_at(db.string_positions(c.pop("text_id")))
    missing = pd.isna(inline) if len(inline) else np.zeros(0, dtype=bool)
    from_ids = np.asarray([str(u) for u in by_id.categories] or [""], dtype=object)[np.asarray(by_id.codes, dtype=np.int64)]
    inline[missing] = from_ids[missing]
    c["name"] = inline
    gtid = c.pop("gtid")
    pid = _pid(gtid)
    is_domain = c["type"] == types["domain"]
    domains = {(int(p), int(d)): str(n) for p, d, n in zip(pid[is_domain], c["domain"][is_domain], c["name"][is_domain])}
    ranges = ~is_domain
    open_ended = ranges & (c["end"] < c["start"])
    if open_ended.any():
        meta.warnings.append(Diagnostic.warning("skipped", meta.path, f"{int(open_ended.sum())} NVTX ranges never ended and are left out"))
    keep = ranges & ~open_ended
    names: Any = c["name"][keep]
    if not domains and missing.all():
        # every name from StringIds: keep them as codes (no string hashed once per row)
        names = by_id[keep]
    elif domains:
        dom = c["domain"][keep]
        pids = pid[keep]
        names = np.array(
            [f"{domains[(int(p), int(d))]}:{n}" if d and (int(p), int(d)) in domains else n for p, d, n in zip(pids, dom, names)],
            dtype=object,
        )
    n = int(keep.sum())
    kept_domain = c["domain"][keep]
    kept_pid = pid[keep]
    domain_names = np.array(
        [domains.get((int(p), int(d)), "") if d else "" for p, d in zip(kept_pid, kept_domain)] if n else [], dtype=object
    )
    return {
        "start": c["start"][keep],
        "end": c["end"][keep],
        "correlation": np.full(n, -1, dtype=np.int64),
        "name": names,
        "category": _constant("nvtx", n),
        "pid": kept_pid,
        "tid": _tid(gtid)[keep],
        "style": np.where(c["type"][keep] == types["start_end"], "start_end", "push_pop").astype(object),
        "domain": domain_names,
    }


def _cpu_slices(parts: list[dict[str, Any]]) -> pd.DataFrame:
    """The host slices of every part (API calls, NVTX, OS runtime), in time order. The parts are
    consumed: each column leaves its part once joined, and the joined columns are put in order
    one at a time, so the peak holds one extra column rather than a second copy of the table
    (the load's peak over its tables: 1.76x -> 1.44x at 1.6M calls, 1.67x -> 1.41x at 16M;
    BENCHMARKS.md, "6 million kernels")."""
    sizes = [len(p["start"]) for p in parts]
    keys = ("start", "end", "correlation", "pid", "tid")
    cols: dict[str, Any] = {k: np.concatenate([p.pop(k) for p in parts]) for k in keys}
    cols["name_id"] = np.concatenate([p.pop("name_id", np.full(m, -1, dtype=np.int64)) for p, m in zip(parts, sizes)])
    n = len(cols["start"])
    cols["depth"] = nesting_depth(cols["start"], cols["end"], cols["pid"], cols["tid"])
    # names arrive as categoricals where they came from StringIds: unite their categories (each
    # distinct name hashed once), never hash a string per row
    names = [p["name"] if isinstance(p["name"], pd.Categorical) else _categorical(p["name"]) for p in parts if len(p["name"])]
    names = [pd.Categorical.from_codes(c.codes, categories=pd.Index(list(c.categories), dtype=object)) for c in names]
    cols["name"] = union_categoricals(names, sort_categories=True) if names else _categorical(np.empty(0, dtype=object))
    del names
    # each part's categories are its own few labels: unite them (as pd.Categorical of the
    # concatenated labels would, sorted), never hash a label per row
    kinds = [p["category"] for p in parts if len(p["category"])]
    cols["category"] = _compact(union_categoricals(kinds)) if kinds else _categorical(np.empty(0, dtype=object))
    del kinds
    for key in ("style", "domain"):  # only NVTX ranges have them
        cols[key] = _categorical(np.concatenate([p.pop(key) if key in p else np.full(m, "", dtype=object) for p, m in zip(parts, sizes)]))
    parts.clear()
    start = cols["start"]
    if n > 1 and not bool(np.all(start[1:] >= start[:-1])):
        # make_table's order (stable by start), taken here column by column
        order = np.argsort(start, kind="stable")
        for key, col in cols.items():
            cols[key] = col.take(order) if isinstance(col, pd.Categorical) else col[order]
        del col, start
    return make_table("cpu_slices", n, cols)


def _flows(cpu: pd.DataFrame, kernels: pd.DataFrame, gpu_ops: pd.DataFrame) -> pd.DataFrame:
    """Launch call -> kernel / memcpy / memset, by correlation id within one process."""
    api = cpu.loc[cpu["category"].isin(["runtime", "driver"]) & (cpu["correlation"] >= 0), ["id", "pid", "correlation"]]
    # a call can appear twice with one correlation id (2022 exports wrap some calls in a second
    # record); the innermost one (the later start, so the larger id) is the launching call
    api = api.drop_duplicates(["pid", "correlation"], keep="last").rename(columns={"id": "src"})
    frames = []
    for table, df in (("kernels", kernels), ("gpu_ops", gpu_ops)):
        dst = df.loc[df["correlation"] >= 0, ["id", "pid", "correlation"]].rename(columns={"id": "dst"})
        m = dst.merge(api, on=["pid", "correlation"], how="inner")
        m["dst_table"] = table
        frames.append(m)
    f = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    n = len(f)
    if not n:
        return make_table("flows", 0)
    return make_table(
        "flows",
        n,
        {"src": f["src"].to_numpy(), "dst_table": f["dst_table"].to_numpy(dtype=object), "dst": f["dst"].to_numpy(),
         "correlation": f["correlation"].to_numpy()},
    )  # fmt: skip


def _fill_launch_tid(kernels: pd.DataFrame, cpu: pd.DataFrame, flows: pd.DataFrame) -> None:
    """Kernel records carry the process only; the launching call says which thread."""
    if not len(flows) or not len(kernels):
        return
    kf = flows[flows["dst_table"] == "kernels"]
    tids = cpu["tid"].to_numpy()[kf["src"].to_numpy()]
    col = kernels["tid"].to_numpy().copy()
    col[kf["dst"].to_numpy()] = tids
    kernels["tid"] = col


def _process_name(db: _Db, kernels: pd.DataFrame) -> str:
    if not len(kernels) or not {"pid", "name"} <= db.columns("PROCESSES"):
        return ""
    pid = int(kernels["pid"].iloc[0])
    row = db.con.execute("select name from PROCESSES where pid = ? limit 1", (pid,)).fetchone()
    return str(row[0]) if row and row[0] else ""


def _constant(label: str, n: int) -> "pd.Categorical[str]":
    """``n`` times ``label``, as a categorical."""
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([label]))


def _categorical(values: np.ndarray) -> pd.Categorical:
    return pd.Categorical(values.astype(object, copy=False))


def _compact(cat: pd.Categorical) -> pd.Categorical:
    """Only the categories in use, sorted (as ``pd.Categorical(values)`` would order them)."""
    cat = cat.remove_unused_categories()
    order = sorted(cat.categories)
    if list(cat.categories) != order:
        cat = cat.reorder_categories(order)
    return cat


# ---------------------------------------------------------------------------------------------
# GPUs


@dataclass
class _Gpus:
    """The GPUs and how an event's ``deviceId`` maps to a trace device index.

    The index is the GPU's CUDA device number (TARGET_INFO_GPU.cuDevice), which is what the
    activity tables' ``deviceId`` holds; TARGET_INFO_GPU.id is nsys's own numbering and can
    differ (id 0 is cuDevice 3 in one of our samples). Exports that have TARGET_INFO_CUDA_DEVICE
    map (process, CUDA id) to a GPU explicitly, which also covers processes that see a subset of
    the GPUs (CUDA_VISIBLE_DEVICES).
    """

    devices: pd.DataFrame
    by_pid_cuda: dict[tuple[int, int], int] = field(default_factory=dict)
    by_cuda: dict[int, int] = field(default_factory=dict)
    by_gpu_id: dict[int, int] = field(default_factory=dict)
    """TARGET_INFO_GPU.id -> device index (what GPU_METRICS' typeId names)"""

    def map(self, pid: np.ndarray, device: np.ndarray) -> np.ndarray:
        if not len(device) or (not self.by_pid_cuda and all(k == v for k, v in self.by_cuda.items())):
            return device
        # each distinct (pid, device) pair once: factorize each column, then their joint code
        # (np.unique over rows of a 2-column array sorts row views, several times slower)
        pids, pid_code = np.unique(pid, return_inverse=True)
        devs, dev_code = np.unique(device, return_inverse=True)
        pairs, inverse = np.unique(pid_code.reshape(-1) * len(devs) + dev_code.reshape(-1), return_inverse=True)
        mapped = np.array(
            [self.by_pid_cuda.get((int(p), int(d)), self.by_cuda.get(int(d), int(d)))
             for p, d in zip(pids[pairs // len(devs)], devs[pairs % len(devs)])],
            dtype=np.int64,
        )  # fmt: skip
        return mapped[inverse.reshape(-1)]

    @classmethod
    def read(cls, db: _Db) -> "_Gpus":
        table = next((t for t in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU") if t in db.tables), None)
        if table is None:
            return cls(make_table("devices", 0))
        cur = db.con.execute(f'select * from "{table}"')
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
        if not rows:
            return cls(make_table("devices", 0))

        gpu_ids = [_int(_first(r, "id", "deviceId"), i) for i, r in enumerate(rows)]
        cuda_ids = [_int(_first(r, "cuDevice"), -1) for r in rows]
        if all(c >= 0 for c in cuda_ids) and len(set(cuda_ids)) == len(cuda_ids):
            index = cuda_ids
            by_cuda = {c: c for c in cuda_ids}
        else:
            # no CUDA numbering: the activity tables' deviceId is the GPU's id (as NVIDIA's own
            # 2021 reports join them)
            index = gpu_ids if len(set(gpu_ids)) == len(gpu_ids) else list(range(len(rows)))
            by_cuda = dict(zip(gpu_ids, index))
        index_of_gpu = dict(zip(gpu_ids, index))

        by_pid_cuda: dict[tuple[int, int], int] = {}
        if {"gpuId", "cudaId", "pid"} <= db.columns("TARGET_INFO_CUDA_DEVICE"):
            for gpu_id, cuda_id, pid in db.con.execute("select gpuId, cudaId, pid from TARGET_INFO_CUDA_DEVICE"):
                if gpu_id is not None and int(gpu_id) in index_of_gpu and cuda_id is not None and pid is not None:
                    by_pid_cuda[(int(pid), int(cuda_id))] = index_of_gpu[int(gpu_id)]

        cols: dict[str, list[Any]] = {k: [] for k in (
            "id", "name", "vendor", "architecture", "compute_capability", "sm_count", "memory_bytes",
            "sm_clock_hz", "mem_clock_hz", "mem_bus_width",
        )}  # fmt: skip
        for idx, r in sorted(zip(index, rows), key=lambda x: x[0]):
            major = _int(_first(r, "computeMajor", "computeCapabilityMajor"), -1)
            minor = _int(_first(r, "computeMinor", "computeCapabilityMinor"), -1)
            cols["id"].append(idx)
            cols["name"].append(str(_first(r, "name") or ""))
            cols["vendor"].append("NVIDIA")
            cols["architecture"].append(f"sm_{major}{minor}" if major > 0 and minor >= 0 else "")
            cols["compute_capability"].append(f"{major}.{minor}" if major > 0 and minor >= 0 else "")
            cols["sm_count"].append(_int(_first(r, "smCount", "numMultiprocessors", "multiProcessorCount"), -1))
            cols["memory_bytes"].append(_int(_first(r, "totalMemory", "globalMemorySize", "totalGlobalMem"), -1))
            cols["sm_clock_hz"].append(_hz(_first(r, "clockRate", "coreClockRate")))
            cols["mem_clock_hz"].append(_hz(_first(r, "memoryClockRate", "memClockRate")))
            cols["mem_bus_width"].append(_int(_first(r, "memoryBusWidth", "memBusWidth"), -1))
        devices = make_table("devices", len(rows), {k: np.array(v, dtype=object) if k in ("name", "vendor", "architecture", "compute_capability") else np.array(v) for k, v in cols.items()})
        return cls(devices, by_pid_cuda, by_cuda, index_of_gpu)


def _first(row: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if row.get(k) is not None:
            return row[k]
    return None


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _hz(value: Any) -> float:
    """A clock as Hz. TARGET_INFO_GPU reports Hz; CUPTI's device record (the older
    TARGET_INFO_CUDA_GPU) reports kHz, and no GPU clock is below 10 MHz, so small values are kHz."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    if v <= 0:
        return float("nan")
    return v * 1e3 if v < 1e7 else v


def part_in_place(wanted: Wanted) -> bool:
    """The GPU activity alone (kernels, memory operations) is read from the export in place
    faster than the trace cache serves the whole trace (measured at 611k kernels: BENCHMARKS.md)."""
    return _kernels_only(wanted) is not None


LOADER = LoaderSpec(name="nsys", label=LABEL, priority=50, sniff=sniff, load=load, load_part=load_part, part_in_place=part_in_place)


# ---------------------------------------------------------------------------------------------
# graph launches and memory (kviewer.io.graphs, the memory table)

MEMORY_USAGE_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS"
#: graph-level trace (--cuda-graph-trace=graph): one activity per graph launch
GRAPH_TRACE_TABLES = ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE",)
#: memory kinds (ENUM_CUDA_MEM_KIND labels) that live on the device
_DEVICE_MEMORY = ("device", "device static", "array")


def _graph_activities(db: _Db, gpus: "_Gpus") -> pd.DataFrame | None:
    """The graph-level activities (one row per launch) when the export has them."""
    t = next((name for name in GRAPH_TRACE_TABLES if name in db.tables), None)
    if t is None:
        return None
    c = db.ints(t, "g", [
        ("start", "g.start"), ("end", "g.end"), ("device", db.col(t, "g", "deviceId")), ("stream", db.col(t, "g", "streamId")),
        ("correlation", db.col(t, "g", "correlationId")), ("gpid", db.col(t, "g", "globalPid")),
        ("graph_id", db.col(t, "g", "graphId")),
    ])  # fmt: skip
    pid = _pid(c.pop("gpid"))
    c["pid"] = pid
    c["device"] = gpus.map(pid, c["device"])
    return pd.DataFrame(c)


def _graph_launches_only(db: _Db, meta: TraceMeta, gpus: "_Gpus", wanted: Wanted | None) -> Trace | None:
    """What ``kviewer graphs`` reads, without the rest of the export: the kernels with only the
    graph launch calls (not every API call)."""
    if wanted is None:
        return None
    keys = set(wanted)
    if "graph_launches" in keys and keys <= {"graph_launches", "kernels", "devices"}:
        # the kernel columns the graphs need (as kviewer summary reads only names and durations)
        kernels = _kernels(db, gpus, ("name", "short_name", "correlation", "device", "stream", "graph_node", "graph_id", "pid"))
        calls = _graph_launch_calls(db)
        cpu_slices = _cpu_slices([calls]) if len(calls["start"]) else make_table("cpu_slices", 0)
        flows = _launch_flows(cpu_slices, kernels)
        trace = Trace(meta=meta, kernels=kernels, cpu_slices=cpu_slices, flows=flows, devices=gpus.devices)
        return link_graphs(trace, _graph_activities(db, gpus))
    return None


def _launch_flows(calls: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Flows from a few launch calls to the kernels with their correlation id (same process), in
    numpy: :func:`_flows` without its pandas merges, for the graph launch calls alone."""
    if not len(calls) or not len(kernels):
        return make_table("flows", 0)
    cc, cp = calls["correlation"].to_numpy(), calls["pid"].to_numpy()
    order = np.argsort(cc, kind="stable")
    keys = cc[order]
    kc, kp = kernels["correlation"].to_numpy(), kernels["pid"].to_numpy()
    pos = np.minimum(np.searchsorted(keys, kc), len(keys) - 1)
    src = order[pos]
    hit = np.flatnonzero((kc >= 0) & (keys[pos] == kc) & ((kp < 0) | (cp[src] == kp)))
    return make_table("flows", len(hit), {
        "src": src[hit], "dst_table": pd.Categorical(["kernels"] * len(hit), categories=["kernels", "gpu_ops"]),
        "dst": hit, "correlation": kc[hit],
    })  # fmt: skip


def _graph_launch_calls(db: _Db) -> dict[str, Any]:
    """The runtime/driver calls that launch a graph (cudaGraphLaunch, cuGraphLaunch), as the API
    call reader returns them, selected in SQL."""
    t = RUNTIME_TABLE
    if t not in db.tables or "StringIds" not in db.tables or "nameId" not in db.columns(t):
        return _empty_slices()
    ids = [int(i) for i, v in db.con.execute("select id, value from StringIds where value like '%GraphLaunch%'")
           if GRAPH_LAUNCH.match(strip_api_version(str(v)))]
    if not ids:
        return _empty_slices()
    rows = db.con.execute(
        f"select start, end, {db.col(t, 'r', 'globalTid')}, {db.col(t, 'r', 'correlationId')}, nameId from {t} as r "
        f"where nameId in ({','.join(map(str, ids))}) order by start"
    ).fetchall()
    names = dict(db.con.execute(f"select id, value from StringIds where id in ({','.join(map(str, ids))})").fetchall())
    arr = np.array([r[:4] for r in rows], dtype=np.int64).reshape(-1, 4)
    gtid = arr[:, 2]
    n = len(rows)
    return {
        "start": arr[:, 0], "end": arr[:, 1], "correlation": arr[:, 3], "pid": _pid(gtid), "tid": _tid(gtid),
        "name": pd.Categorical([strip_api_version(str(names[r[4]])) for r in rows]),
        "category": pd.Categorical.from_codes(np.ones(n, dtype=np.int8), categories=pd.Index(["driver", "runtime"])),
        "name_id": np.array([r[4] for r in rows], dtype=np.int64),
    }  # fmt: skip


def _memory(db: _Db, gpus: "_Gpus") -> pd.DataFrame:
    """CUDA_GPU_MEMORY_USAGE_EVENTS (nsys --cuda-memory-usage=true): allocations and frees with the
    device's running total (what the CUDA allocations hold; a caching allocator's reserved memory)."""
    t = MEMORY_USAGE_TABLE
    if t not in db.tables:
        return make_table("memory", 0)
    c = db.ints(t, "m", [
        ("start", "m.start"), ("gpid", db.col(t, "m", "globalPid")), ("device", db.col(t, "m", "deviceId")),
        ("addr", db.col(t, "m", "address")), ("bytes", db.col(t, "m", "bytes", "0")), ("kind", db.col(t, "m", "memKind")),
        ("op", db.col(t, "m", "memoryOperationType", "0")), ("correlation", db.col(t, "m", "correlationId")),
    ])  # fmt: skip
    n = len(c["start"])
    if not n:
        return make_table("memory", 0)
    order = np.argsort(c["start"], kind="stable")
    c = {k: v[order] for k, v in c.items()}
    pid = _pid(c["gpid"])
    labels = {**MEMORY_KINDS, **_enum_labels(db, "ENUM_CUDA_MEM_KIND")}
    uniq, inv = np.unique(c["kind"], return_inverse=True)
    kind_name = np.array([labels.get(int(u), "unknown").lower() for u in uniq] or [""], dtype=object)[inv.reshape(-1)]
    on_device = np.isin(kind_name, _DEVICE_MEMORY)
    device = np.where(on_device, gpus.map(pid, c["device"]), -1)
    signed = np.where(c["op"] == 1, -np.abs(c["bytes"]), np.abs(c["bytes"]))
    total = np.full(n, -1, dtype=np.int64)
    for dev in np.unique(device[on_device]).tolist():
        sel = on_device & (device == dev)
        total[sel] = np.cumsum(signed[sel])
    # the API call that made it (cudaMalloc, cudaFree, ...) and its thread, by correlation id (in SQL:
    # the memory events are few, the API calls many)
    source = np.full(n, "nsys memory usage", dtype=object)
    tid = np.full(n, -1, dtype=np.int64)
    r = RUNTIME_TABLE
    if r in db.tables and {"correlationId", "nameId", "globalTid"} <= db.columns(r) and "correlationId" in db.columns(t) \
            and "StringIds" in db.tables:
        calls = db.con.execute(
            f"select r.correlationId, s.value, r.globalTid from {r} as r join StringIds as s on s.id = r.nameId "
            f"where r.correlationId in (select correlationId from {t} where correlationId > 0)"
        ).fetchall()
        by_corr = {int(cid): (strip_api_version(str(name)), int(g) if g is not None else -1) for cid, name, g in calls if cid is not None}
        if by_corr:
            keys = np.array(sorted(by_corr), dtype=np.int64)
            names = np.array([by_corr[int(k)][0] for k in keys], dtype=object)
            gtid = np.array([by_corr[int(k)][1] for k in keys], dtype=np.int64)
            corr = c["correlation"]
            pos = np.minimum(np.searchsorted(keys, corr), len(keys) - 1)
            hit = (corr > 0) & (keys[pos] == corr)
            source[hit] = names[pos[hit]]
            tid[hit] = np.where(gtid[pos[hit]] >= 0, _tid(gtid[pos[hit]]), -1)
    return make_table("memory", n, {
        "start": c["start"], "device": device, "device_type": pd.Categorical(kind_name), "pid": pid, "tid": tid,
        "addr": c["addr"], "bytes": signed, "total_allocated": total, "source": pd.Categorical(source),
    })  # fmt: skip
