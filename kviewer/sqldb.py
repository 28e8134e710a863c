"""The unified model in SQL: one documented, versioned SQLite schema for every format.

``kviewer export FILE... -o OUT.sqlite`` writes it; ``kviewer sql FILE... "SELECT ..."`` queries
it, building only the tables the statement reads (:func:`parts_read`) into a database kept in the
cache (:func:`query_files`); the app's Query dock does the same in memory (:class:`LazyDatabase`).
Several files become several ``trace_id`` of one database, so SQL across runs or ranks works.
Tables are written in sqlite-utils' style (its type names and FTS5 layout) but through the
connection itself: ``CREATE TABLE`` with the foreign keys, one ``executemany`` of tuples per
table, the indexes and full-text tables once the rows are in; the views are plain SQL.

Schema (version :data:`SCHEMA_VERSION`)
---------------------------------------
- ``kviewer_schema(version, kviewer_version)``: one row.
- ``traces(trace_id, path, source_format, format_label, tool, tool_version, origin_ns, time_zero,
  sol_device, sol_note)``: ``time_zero`` says what time 0 is ("session start" for Nsight Systems):
  every ``*_ns`` time counts from it, as the window's timeline, Details and docks do.
- ``kernels``, ``gpu_ops``, ``cpu_slices``, ``flows``, ``devices``, ``metrics``: the tables of
  :mod:`kviewer.core.schema`, one row per event, with ``pk`` (a key unique in the database),
  ``trace_id`` and the trace's own ``id``; times are ``start_ns``/``end_ns``/``dur_ns`` relative
  to the trace's origin. Unknown numbers are NULL (never 0 or -1). ``flows`` carries ``src_pk``
  (cpu_slices.pk of the launching call) and ``kernel_pk`` / ``op_pk`` (the GPU work it launched);
  ``metrics.kernel_pk`` points at the measured kernel.
- ``kernel_sol``: per kernel (``kernel_pk``) the speed of light: FLOPs, bytes and where they
  came from, ``t_sol_ns``, ``sol_pct``, ``bound``; only for traces whose GPU is known.
- ``fusion_candidates``: per trace, the candidates of ``kviewer fusion`` (``kernel_ids`` is one
  instance's kernel ids, space separated).
- ``steps``: the steps of each trace (``ProfilerStep#N``, NVTX ``step_N``, detected iterations).
- Views: ``kernel_summary`` / ``nvtx_summary`` / ``memcpy_summary`` (count, total, avg, median,
  min, max, sample standard deviation, share of time, as ``kviewer summary`` and ``nsys stats``),
  ``kernel_launch_latency`` (API call start to kernel start), ``gpu_idle_gaps`` (per device,
  times no kernel ran between two kernels), ``step_times``.
- Full-text search: ``kernels_fts`` (name, short_name) and ``cpu_slices_fts`` (name).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import pandas as pd
import sqlite_utils
from sqlite_utils.db import COLUMN_TYPE_MAPPING, jsonify_if_needed, quote_identifier
from sqlite_utils.utils import suggest_column_types

from kviewer import __version__, analysis, io as kio, session
from kviewer.core import Trace, TraceMeta, schema
from kviewer.errors import AnalysisError, KViewerError, QueryError
from kviewer.io.sqlite_safety import QueryStopped, clear_authorizer, harden_query_connection, query_authorizer, run_query
from kviewer.tempdir import remove_quietly, signals_deferred, track_temp_file, untrack_temp_file

if TYPE_CHECKING:
    import kviewer.analysis.fusion
    import kviewer.analysis.sol
    import kviewer.analysis.steps
    import kviewer.io.cache
    import kviewer.io.cache.derived
    import kviewer.io.source
    import kviewer.session.analysis_cache

#: 2: integer columns whose first rows are unknown are declared INTEGER (were TEXT, so SQLite stored
#: their known values as text: cpu_slices.correlation '27')
SCHEMA_VERSION = 2
EVENT_TABLES = ("kernels", "gpu_ops", "cpu_slices")
TIME_COLUMNS = {"start": "start_ns", "end": "end_ns", "dur": "dur_ns"}
#: row id spaces: pk = trace_id * PK_STRIDE + id, so a pk is stable and unique in the database
PK_STRIDE = 1 << 32


def _or_null(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``values`` where ``keep``, else None (SQL NULL): an object array, as a foreign key column."""
    out = values.astype(object)
    out[~keep] = None
    return out


def _summary_view(name: str, source: str, key: str) -> str:
    """A view with the ``kviewer summary`` columns over ``source`` (columns trace_id, key, dur_ns).

    Median: the middle value (the mean of the two middle ones for an even count); standard
    deviation: the sample one (n - 1), two-pass around the mean, 0 for a single instance."""
    return f"""
CREATE VIEW {name} AS
WITH src AS ({source}),
g AS (SELECT trace_id, {key} AS name, COUNT(*) AS n, SUM(dur_ns) AS total, AVG(dur_ns) AS mean,
             MIN(dur_ns) AS lo, MAX(dur_ns) AS hi FROM src GROUP BY trace_id, {key}),
r AS (SELECT trace_id, {key} AS name, dur_ns,
             ROW_NUMBER() OVER (PARTITION BY trace_id, {key} ORDER BY dur_ns) AS rn FROM src),
med AS (SELECT r.trace_id, r.name, AVG(r.dur_ns) AS med FROM r JOIN g ON g.trace_id = r.trace_id AND g.name IS r.name
        WHERE r.rn IN ((g.n + 1) / 2, (g.n + 2) / 2) GROUP BY r.trace_id, r.name),
var AS (SELECT s.trace_id, s.{key} AS name, SUM((s.dur_ns - g.mean) * (s.dur_ns - g.mean)) AS ss
        FROM src AS s JOIN g ON g.trace_id = s.trace_id AND g.name IS s.{key} GROUP BY s.trace_id, s.{key}),
tot AS (SELECT trace_id, SUM(dur_ns) AS t FROM src GROUP BY trace_id)
SELECT g.trace_id, g.name, g.n AS count, g.total AS total_ns, g.mean AS avg_ns, med.med AS med_ns,
       g.lo AS min_ns, g.hi AS max_ns,
       CASE WHEN g.n > 1 THEN sqrt(var.ss / (g.n - 1)) ELSE 0.0 END AS std_ns,
       CASE WHEN tot.t > 0 THEN 100.0 * g.total / tot.t END AS time_pct
FROM g JOIN med ON med.trace_id = g.trace_id AND med.name IS g.name
       JOIN var ON var.trace_id = g.trace_id AND var.name IS g.name
       JOIN tot ON tot.trace_id = g.trace_id
ORDER BY g.trace_id, total_ns DESC, g.name
"""


VIEWS: dict[str, str] = {
    "kernel_summary": _summary_view("kernel_summary", "SELECT trace_id, name, dur_ns FROM kernels", "name"),
    "nvtx_summary": _summary_view("nvtx_summary", "SELECT trace_id, name, dur_ns FROM cpu_slices WHERE category = 'nvtx'", "name"),
    "memcpy_summary": _summary_view("memcpy_summary", "SELECT trace_id, name, dur_ns FROM gpu_ops", "name"),
    "kernel_launch_latency": """
CREATE VIEW kernel_launch_latency AS
SELECT k.trace_id, k.id AS kernel_id, k.pk AS kernel_pk, k.name, c.name AS api, c.start_ns AS api_start_ns,
       k.start_ns, k.start_ns - c.start_ns AS latency_ns
FROM flows AS f JOIN cpu_slices AS c ON c.pk = f.src_pk JOIN kernels AS k ON k.pk = f.kernel_pk
ORDER BY k.trace_id, k.start_ns
""",
    "gpu_idle_gaps": """
CREATE VIEW gpu_idle_gaps AS
SELECT trace_id, device, prev_end AS start_ns, start_ns AS end_ns, start_ns - prev_end AS gap_ns
FROM (SELECT trace_id, device, start_ns,
             MAX(end_ns) OVER (PARTITION BY trace_id, device ORDER BY start_ns, end_ns
                               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
      FROM kernels)
WHERE prev_end IS NOT NULL AND start_ns > prev_end
ORDER BY gap_ns DESC
""",
    "step_times": """
CREATE VIEW step_times AS
SELECT trace_id, step, name, source, start_ns, end_ns, dur_ns, gpu_span_ns, kernel_ns, busy_ns, kernel_count
FROM steps ORDER BY trace_id, step
""",
}


# ---------------------------------------------------------------------------------------------
# writing
#
# Rows go in through the connection itself: one CREATE TABLE per table (its foreign keys declared
# there, column types as sqlite-utils names them), then one executemany of tuples made from numpy
# columns, all inside one transaction. sqlite-utils' insert_all would build a dict per row, commit
# every 5,000 rows and, for the foreign keys, copy every table once more (Table.transform).

#: foreign keys besides every table's ``trace_id`` -> ``traces``: table -> (column, table, column)
FOREIGN_KEYS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "flows": (("src_pk", "cpu_slices", "pk"), ("kernel_pk", "kernels", "pk"), ("op_pk", "gpu_ops", "pk")),
    "metrics": (("kernel_pk", "kernels", "pk"),),
    "kernel_sol": (("kernel_pk", "kernels", "pk"),),
}
#: tables without a ``trace_id`` foreign key
UNKEYED = ("traces", "kviewer_schema")
#: indexes made with their table
INDEXES: dict[str, tuple[tuple[str, ...], ...]] = {
    **{t: (("trace_id", "start_ns"), ("name",)) for t in EVENT_TABLES},
    "metrics": (("kernel_pk",),),
    "flows": (("kernel_pk",),),
}
#: full-text search: the virtual table -> (its table, the columns it indexes)
FTS: dict[str, tuple[str, tuple[str, ...]]] = {"kernels_fts": ("kernels", ("name", "short_name")), "cpu_slices_fts": ("cpu_slices", ("name",))}
ANALYSIS_TABLES = ("kernel_sol", "fusion_candidates")
#: every part of a full build: the tables, then the full-text indexes (views are always made)
PARTS: tuple[str, ...] = ("kviewer_schema", "traces", *schema.TABLES, "steps", *ANALYSIS_TABLES, *FTS)
TRACES_COLUMNS = ("trace_id", "path", "source_format", "format_label", "tool", "tool_version", "origin_ns", "time_zero",
                  "sol_device", "sol_note")

_PLAIN_TYPES = frozenset({str, int, type(None)})


def _sql_value(v: Any) -> Any:
    """One value as SQLite stores it: numpy scalars as Python ones, NaN/inf and NA as NULL, lists
    and dicts as JSON (as sqlite-utils stores them)."""
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, np.bool_):
        return bool(v)
    return jsonify_if_needed(v)


def _sql_column(column: pd.Series | np.ndarray) -> list[Any]:
    """A column's values as :func:`_sql_value` makes them, vectorised where the dtype allows: a
    categorical through its categories (a code -1 is the None after them), integers with unknowns
    (:func:`_frame_for_sql`) as ints with None where masked."""
    values = column.array if isinstance(column, pd.Series) else column
    if isinstance(values, pd.Categorical):
        table = [_sql_value(v) for v in values.categories.tolist()] + [None]
        return list(map(table.__getitem__, values.codes.tolist()))
    if isinstance(values, pd.arrays.IntegerArray):
        unknown = np.asarray(values.isna())
        if unknown.all():
            return [None] * len(values)
        out: list[Any] = values.to_numpy(dtype=np.int64, na_value=0).tolist()
        for i in np.flatnonzero(unknown).tolist():
            out[i] = None
        return out
    values = np.asarray(values)
    kind = values.dtype.kind
    if kind in "iub":
        return values.tolist()
    if kind == "f":
        bad = ~np.isfinite(values)
        n_bad = int(bad.sum())
        if not n_bad:
            return values.tolist()
        if n_bad == len(values):
            return [None] * len(values)
        if n_bad > len(values) // 8:  # many: one masked assignment instead of a loop over them
            boxed = values.astype(object)
            boxed[bad] = None
            return boxed.tolist()
        out = values.tolist()
        for i in np.flatnonzero(bad).tolist():
            out[i] = None
        return out
    out = values.tolist()
    if set(map(type, out)) <= _PLAIN_TYPES:
        return out
    return [_sql_value(v) for v in out]


def _frame_for_sql(df: pd.DataFrame, table: schema.Table | None) -> pd.DataFrame:
    """Columns renamed to carry their unit, unknown ints masked (NULL in the database);
    categories stay categorical (:func:`_sql_column` writes them through their categories)."""
    out = {}
    for name in df.columns:
        col = df[name]
        values: Any = col.array if isinstance(col.dtype, pd.CategoricalDtype) else col.to_numpy()
        spec = None
        if table is not None:
            try:
                spec = table.column(name)
            except KeyError:
                spec = None
        if spec is not None and spec.dtype in (schema.INT, schema.I32) and name not in ("id",):
            missing = -1 if spec.missing is None else spec.missing
            if values.dtype.kind in "iu":
                values = pd.arrays.IntegerArray(values.astype(np.int64, copy=False), values == missing)
            else:
                values = np.where(values == missing, None, values.astype(object)) if len(values) else values.astype(object)
        out[TIME_COLUMNS.get(name, name)] = values
    return pd.DataFrame(out)


def _column_type(col: pd.Series) -> type:
    if isinstance(col.dtype, pd.CategoricalDtype):  # the type of its texts (or numbers)
        return _column_type(pd.Series(col.cat.categories, dtype=object))
    kind = col.dtype.kind
    if kind in "iub":
        return int
    if kind == "f":
        return float
    values = [v for v in col.head(64) if v is not None]
    if values and all(isinstance(v, (int, np.integer)) for v in values):
        return int
    if values and all(isinstance(v, (float, int, np.floating, np.integer)) for v in values):
        return float
    return str


def _foreign_keys(name: str, columns: Sequence[str]) -> list[tuple[str, str, str]]:
    fks = [] if name in UNKEYED else [("trace_id", "traces", "trace_id")]
    fks += list(FOREIGN_KEYS.get(name, ()))
    return [fk for fk in fks if fk[0] in columns]


def _create(db: sqlite_utils.Database, name: str, columns: dict[str, type], pk: str | None = None) -> None:
    """CREATE TABLE with sqlite-utils' type names and the table's foreign keys declared (the
    tables they point at need not exist yet: a partial build makes them when a query names them)."""
    refs = {col: (table, other) for col, table, other in _foreign_keys(name, list(columns))}
    defs = []
    for col, typ in columns.items():
        extra = " PRIMARY KEY" if col == pk else ""
        if col in refs:
            extra += f" REFERENCES {quote_identifier(refs[col][0])}({quote_identifier(refs[col][1])})"
        defs.append(f"   {quote_identifier(col)} {COLUMN_TYPE_MAPPING[typ]}{extra}")
    db.conn.execute(f"CREATE TABLE {quote_identifier(name)} (\n" + ",\n".join(defs) + "\n)")


def _index(db: sqlite_utils.Database, name: str) -> None:
    """The table's indexes, made once its rows are in (a sort, not an insert per row)."""
    for cols in INDEXES.get(name, ()):
        # a table built for one statement may lack an indexed column (columns_read)
        if db[name].exists() and set(cols) <= set(db[name].columns_dict):
            db[name].create_index(list(cols), if_not_exists=True)  # type: ignore[union-attr]


def _insert(db: sqlite_utils.Database, name: str, df: pd.DataFrame, trace_id: int | None, pk: np.ndarray | None = None) -> None:
    """Append ``df``'s rows (with ``trace_id`` and ``pk``) to table ``name``, creating it first
    (columns ``pk``, ``trace_id``, then the frame's) or adding columns it lacks."""
    columns: dict[str, Any] = {}
    data: list[Any] = []
    if pk is not None:
        columns["pk"] = int
        data.append(pk.astype(np.int64, copy=False).tolist())
    if trace_id is not None:
        columns["trace_id"] = int
        data.append([trace_id] * len(df))
    for c in df.columns:
        columns[str(c)] = _column_type(df[c])
        data.append(_sql_column(df[c]))
    if not db[name].exists():
        _create(db, name, columns, pk="pk" if pk is not None else None)
    else:
        have = db[name].columns_dict
        for c, t in columns.items():
            if c not in have:
                db[name].add_column(c, t)  # type: ignore[union-attr]
    if not len(df):
        return
    names, marks, bound = [], [], []
    for c, values in zip(columns, data):
        literal = _constant(values) if isinstance(values, list) else None
        if literal == "NULL":
            continue  # unknown throughout: the column's default
        names.append(quote_identifier(c))
        marks.append("?" if literal is None else literal)
        if literal is None:
            bound.append(values)
    rows = zip(*bound) if bound else itertools.repeat((), len(df))
    db.conn.executemany(f"INSERT INTO {quote_identifier(name)} ({', '.join(names)}) VALUES ({', '.join(marks)})", rows)


def _constant(values: list[Any]) -> str | None:
    """The SQL literal of a column that holds one value throughout (NULL, an integer, a text
    without NUL), else None. Such a column is written once in the statement instead of bound on
    every row: binding, not SQLite, is most of an insert's time, and many columns of a trace are
    unknown or constant throughout (half of the kernel columns of an nsys or Kineto trace)."""
    first = values[0]
    if values.count(first) != len(values):
        return None
    if first is None:
        return "NULL"
    kinds = set(map(type, values))
    if kinds == {int}:
        return str(first)
    if kinds == {str} and "\x00" not in first:
        return "'" + first.replace("'", "''") + "'"
    return None  # floats are bound: a decimal literal might not read back as the same double


def _insert_row(db: sqlite_utils.Database, name: str, row: dict[str, Any], pk: str | None = None) -> None:
    """One row; the table made first with the types sqlite-utils gives these values (as its
    ``insert`` would), without the commit ``insert`` makes."""
    if not db[name].exists():
        _create(db, name, suggest_column_types([row]), pk=pk)
    names = ", ".join(quote_identifier(c) for c in row)
    db.conn.execute(f"INSERT INTO {quote_identifier(name)} ({names}) VALUES ({', '.join('?' * len(row))})", [_sql_value(v) for v in row.values()])


def _create_fts(db: sqlite_utils.Database, fts: str) -> None:
    """A full-text index over its table's rows, built once from the table (no triggers: the
    database is not written again), as sqlite-utils' ``enable_fts`` writes it."""
    table, cols = FTS[fts]
    names = ", ".join(quote_identifier(c) for c in cols)
    db.conn.execute(f"CREATE VIRTUAL TABLE {quote_identifier(fts)} USING FTS5 (\n    {names},\n    content={quote_identifier(table)}\n)")
    db.conn.execute(f"INSERT INTO {quote_identifier(fts)} (rowid, {names})\n    SELECT rowid, {names} FROM {quote_identifier(table)};")


def _sol_frame(sol: pd.DataFrame, base: int) -> pd.DataFrame:
    """``kernel_sol`` rows of a SOL table (:data:`kviewer.core.schema.SOL`)."""
    keep = [c for c in sol.columns if c not in ("name", "short_name", "start", "end", "dur", "device", "stream")]
    frame = _frame_for_sql(sol[keep], None)
    ids = sol["id"].to_numpy(dtype=np.int64) if "id" in sol.columns else np.arange(len(sol))
    return frame.rename(columns={"id": "kernel_id"}).assign(kernel_pk=base + ids)


def _fusion_frame(cand: pd.DataFrame) -> pd.DataFrame:
    """``fusion_candidates`` rows (one instance's kernel ids, space separated)."""
    cand = cand.assign(kernel_ids=[" ".join(str(i) for i in ids[0]) if len(ids) else "" for ids in cand["kernel_ids"]])
    return _frame_for_sql(cand, None)


class _Builder:
    """Writes the parts of the schema for ``traces`` into ``db``, part by part (a table for every
    trace, or a full-text index); each trace's analyses are computed once, when first needed."""

    def __init__(self, db: sqlite_utils.Database, traces: Sequence[Trace], analysis: bool = True,
                 sols: Sequence[pd.DataFrame | None] | None = None, progress: Callable[[str], None] | None = None,
                 only: Mapping[str, Collection[str]] | None = None, indexes: bool = True) -> None:
        self.db, self.traces, self.analysis, self.progress = db, list(traces), analysis, progress
        self.only = only  # SQL columns written of the event tables (columns_read); None: all
        self.indexes = indexes
        self.sols = list(sols) if sols is not None else [None] * len(self.traces)
        self._analyses: dict[int, _Analyses] = {}

    def build(self, parts: Iterable[str]) -> None:
        for part in parts:
            if self.progress is not None:
                self.progress(part)
            if part in FTS:
                _create_fts(self.db, part)
            elif part == "kviewer_schema":
                _schema_row(self.db)
            else:
                for trace_id, trace in enumerate(self.traces, start=1):
                    self._table(part, trace, trace_id)
                if self.indexes:
                    _index(self.db, part)

    def _table(self, name: str, trace: Trace, trace_id: int) -> None:
        base = trace_id * PK_STRIDE
        if name in schema.TABLES:
            df = trace.table(name)
            if name in EVENT_TABLES:
                keep = df.columns if self.only is None or name not in self.only else _trace_columns(name, self.only[name])
                frame = _frame_for_sql(df[list(keep)], schema.TABLES[name])
                if self.only is not None and name in self.only:
                    frame = frame[[c for c in frame.columns if c in self.only[name]]]
                _insert(self.db, name, frame, trace_id, pk=base + df["id"].to_numpy(dtype=np.int64))
                return
            frame = _frame_for_sql(df, schema.TABLES[name])
            if name == "flows":
                dst = df["dst"].to_numpy(dtype=np.int64)
                to_k = (df["dst_table"].astype(str) == "kernels").to_numpy()
                frame = frame.assign(
                    src_pk=_or_null(base + df["src"].to_numpy(dtype=np.int64), df["src"].to_numpy() >= 0),
                    kernel_pk=_or_null(base + dst, to_k & (dst >= 0)),
                    op_pk=_or_null(base + dst, ~to_k & (dst >= 0)),
                )
            elif name == "metrics":
                kernel = df["kernel"].to_numpy(dtype=np.int64)
                frame = frame.assign(kernel_pk=_or_null(base + kernel, kernel >= 0))
            _insert(self.db, name, frame, trace_id)
        elif name == "steps":
            steps = analysis.steps.find_steps(trace).rename(columns={"gpu_span": "gpu_span_ns", "gpu_start": "gpu_start_ns", "gpu_end": "gpu_end_ns"})
            _insert(self.db, "steps", _frame_for_sql(steps, None), trace_id)
        elif name == "kernel_sol":
            sol = self._analysed(trace, trace_id).sol
            if sol is not None:
                _insert(self.db, "kernel_sol", _sol_frame(sol, base), trace_id)
        elif name == "fusion_candidates":
            cand = self._analysed(trace, trace_id).fusion
            if cand is not None:
                _insert(self.db, "fusion_candidates", _fusion_frame(cand), trace_id)
        elif name == "traces":
            a = self._analysed(trace, trace_id)
            meta = trace.meta
            row = {"trace_id": trace_id, "path": meta.path, "source_format": meta.source_format,
                   "format_label": meta.format_label, "tool": meta.tool, "tool_version": meta.tool_version,
                   "origin_ns": meta.origin_ns, "time_zero": meta.time_zero, "sol_device": a.sol_device,
                   "sol_note": a.sol_note}  # fmt: skip
            _insert_row(self.db, "traces", row, pk="trace_id")
        else:
            raise ValueError(f"not a part of the kviewer schema: {name}")

    def _analysed(self, trace: Trace, trace_id: int) -> _Analyses:
        """The trace's speed of light and fusion candidates (with ``analysis`` and kernels), once."""
        done = self._analyses.get(trace_id)
        if done is not None:
            return done
        out = _Analyses()
        if self.analysis and len(trace.kernels):
            sol = self.sols[trace_id - 1]
            sid = trace.meta.source_id
            if sol is None and sid is not None:
                # a trace loaded through the cache: its analyses come from (and go to) the
                # analysis cache, as in the window (computed once per file, not per export)
                info = session.analysis_cache.sol_for_open(trace, sid)
                if info is None or info.sol is None:
                    out.sol_note = info.why if info is not None else None
                else:
                    out.sol, out.sol_device = info.sol, _sol_device(info.sol)
                    try:
                        out.fusion = session.analysis_cache.fusion_for_open(trace, info, sid).candidates
                    except AnalysisError as exc:
                        out.sol_note = str(exc)
            else:
                try:
                    if sol is None:
                        sol = analysis.sol.speed_of_light(trace)
                except AnalysisError as exc:
                    out.sol_note = str(exc)
                else:
                    out.sol, out.sol_device = sol, _sol_device(sol)
                    try:
                        out.fusion = analysis.fusion.fusion_candidates(trace, sol=sol)
                    except AnalysisError as exc:
                        out.sol_note = str(exc)
        self._analyses[trace_id] = out
        return out


def _sol_device(sol: pd.DataFrame) -> str | None:
    """The GPUs whose peaks a SOL table used, as ``traces.sol_device`` says them."""
    devices = sorted({str(d) for d in sol.get("gpu", pd.Series(dtype=object)).dropna() if str(d)})
    return ", ".join(devices) or None


@dataclass
class _Analyses:
    sol: pd.DataFrame | None = None
    fusion: pd.DataFrame | None = None
    sol_device: str | None = None
    sol_note: str | None = None


def _create_views(db: sqlite_utils.Database) -> None:
    for sql in VIEWS.values():
        db.conn.execute(sql)


def build(
    db: sqlite_utils.Database, traces: Sequence[Trace], analysis: bool = True,
    progress: Callable[[str], None] | None = None, sols: Sequence[pd.DataFrame | None] | None = None,
    parts: Iterable[str] | None = None,
) -> None:
    """Write ``traces`` (trace_id 1, 2, ...) into the empty database ``db`` (``sols``: their
    speed-of-light frames where already computed), in one transaction the caller commits:
    ``parts`` of the schema (:data:`PARTS`, default all; the analysis tables only with
    ``analysis``), then the views."""
    todo = [p for p in (PARTS if parts is None else parts) if analysis or p not in ANALYSIS_TABLES]
    if not db.conn.in_transaction:
        db.conn.execute("BEGIN")
    _Builder(db, traces, analysis, sols, progress).build(todo)
    _create_views(db)


class OutputBusy(OSError):
    """Another process is writing the same output file right now."""


def _new_database(out: str, fill: Callable[[sqlite_utils.Database], None]) -> None:
    """Write a new database file ``out`` with ``fill`` (:func:`_new_file`), without a journal and
    without syncs (the ``.partial`` file is thrown away unless complete), in one transaction."""

    def write(tmp: str) -> None:
        db = sqlite_utils.Database(tmp)
        try:
            db.conn.execute("PRAGMA journal_mode=OFF")
            db.conn.execute("PRAGMA synchronous=OFF")
            db.conn.execute("BEGIN")
            fill(db)
            db.conn.commit()
        finally:
            db.close()

    _new_file(out, write)


def _new_file(out: str, write: Callable[[str], None]) -> None:
    """Write a new file ``out`` with ``write(path)`` (beside it as ``OUT.partial`` first, so an
    interrupted write never leaves a half database under the final name; replaced when it exists),
    flushed to disk once before it takes the final name.

    ``OUT.partial`` is locked while it is written: a second writer of the same output fails at
    once with :class:`OutputBusy` instead of writing into the first one's file. Ctrl+C, SIGTERM
    or an error remove it (:func:`kviewer.tempdir.track_temp_file`); a file left by a killed
    writer (SIGKILL) holds no lock and is simply replaced."""
    import fcntl

    tmp = f"{out}.partial"
    # signals wait while the file is made, locked and registered for removal: a Ctrl+C or SIGTERM
    # landing in between would otherwise leave it behind
    fd = -1
    mine = False
    try:
        with signals_deferred():
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputBusy(f"another kviewer is writing {out} right now (it holds {tmp}); try again when it is done") from None
            mine = True
            track_temp_file(tmp)
        os.ftruncate(fd, 0)
        remove_quietly(f"{tmp}-journal")
        write(tmp)
        os.fsync(fd)  # the one flush: the file is complete on disk before it takes the final name
        os.replace(tmp, out)
    except BaseException:
        if mine:
            for suffix in ("", "-journal"):
                remove_quietly(tmp + suffix)
        raise
    finally:
        untrack_temp_file(tmp)
        if fd >= 0:
            os.close(fd)  # the lock goes with it


def _schema_row(db: sqlite_utils.Database, **extra: Any) -> None:
    _insert_row(db, "kviewer_schema", {"version": SCHEMA_VERSION, "kviewer_version": __version__, **extra})


def export(traces: Sequence[Trace], out: str, analysis: bool = True) -> None:
    """Write a new database file ``out`` (replaced when it exists) from ``traces``."""
    _new_database(out, lambda db: build(db, traces, analysis))


def in_memory(traces: Sequence[Trace], analysis: bool = True, sols: Sequence[pd.DataFrame | None] | None = None) -> sqlite3.Connection:
    """The schema for ``traces`` in an in-memory database, read-only from then on."""
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    db = sqlite_utils.Database(conn)
    build(db, traces, analysis, sols=sols)
    conn.commit()

    harden_query_connection(conn)
    return conn


def write_tables(tables: dict[str, pd.DataFrame], out: str, kind: str, keys: dict[str, list[str]] | None = None) -> None:
    """Write analysis tables (``kviewer fleet``'s) as a new database ``out`` in this module's
    style: sqlite-utils types, unknown values NULL, one ``kviewer_schema`` row (with ``kind``), and an
    index on each table's ``keys``. Replaced when it exists."""
    def fill(db: sqlite_utils.Database) -> None:
        _schema_row(db, kind=kind)
        for name, df in tables.items():
            db.create_table(name, {c: _column_type(df[c].dropna()) if df[c].dtype == object else _column_type(df[c]) for c in df.columns})
            if len(df):
                names = ", ".join(quote_identifier(str(c)) for c in df.columns)
                rows = zip(*(_sql_column(df[c]) for c in df.columns))
                db.conn.executemany(f"INSERT INTO {quote_identifier(name)} ({names}) VALUES ({', '.join('?' * len(df.columns))})", rows)
            cols = [c for c in (keys or {}).get(name, []) if c in df.columns]
            if cols:
                db[name].create_index(cols, if_not_exists=True)  # type: ignore[union-attr]

    _new_database(out, fill)


# ---------------------------------------------------------------------------------------------
# building what a query reads
#
# A query names the tables it reads; SQLite itself says which: the statement is prepared (as
# EXPLAIN, so nothing runs) against an empty database of the whole schema, with an authorizer that
# notes every table read. Only those parts are then built (``kviewer sql``, the Query dock).


def _empty_trace() -> Trace:
    return Trace(meta=TraceMeta(path="", source_format=""))


class _Skeleton:
    """The whole schema without rows (every table with its columns, the full-text tables, the
    views), made once per process; prepares statements to see what they read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.conn: sqlite3.Connection | None = None

    def _make(self) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", check_same_thread=False)
        db = sqlite_utils.Database(conn)
        conn.execute("BEGIN")
        _Builder(db, [_empty_trace()], analysis=False).build([p for p in PARTS if p not in ANALYSIS_TABLES])
        # the analysis tables' columns, from their declared ones through the same frames
        _insert(db, "kernel_sol", _sol_frame(schema.empty(schema.SOL), PK_STRIDE), 1)
        _insert(db, "fusion_candidates", _fusion_frame(pd.DataFrame({c: [] for c in schema.FUSION_COLUMNS})), 1)
        _create_views(db)
        conn.commit()
        conn.execute("PRAGMA query_only=ON")
        return conn

    def table_columns(self, table: str) -> frozenset[str]:
        """Every SQL column of ``table`` in a full build."""
        with self.lock:
            if self.conn is None:
                self.conn = self._make()
            return frozenset(r[1] for r in self.conn.execute(f"PRAGMA table_info({quote_identifier(table)})"))

    def reads(self, sql: str) -> set[str] | None:
        """The parts ``sql`` reads; None when that cannot be told (everything is built then); an
        empty set for a statement that will be refused (a write, more than one statement)."""
        return self.reads_columns(sql)[0]

    def reads_columns(self, sql: str) -> tuple[set[str] | None, dict[str, set[str]]]:
        """:meth:`reads`, and the columns ``sql`` reads of each event table (:data:`EVENT_TABLES`:
        SQL names, "" for the rows alone, as ``count(*)`` reads them; a view or a full-text
        table stands for the columns it reads, a full-text table's are added by
        :func:`columns_read`)."""
        names: set[str] = set()
        columns: dict[str, set[str]] = {}
        state = {"all": False, "refused": False}

        def note(action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
            verdict = query_authorizer(action, arg1, arg2, db_name, source)
            if verdict != sqlite3.SQLITE_OK:
                state["refused"] = True
            elif action == sqlite3.SQLITE_READ and arg1:
                name = arg1.lower()  # as the statement spells it; SQL names are case-blind
                if name.startswith("pragma_") or name == "dbstat":
                    state["all"] = True  # a table-valued pragma or dbstat: about the schema, read when run
                elif name in SCHEMA_TABLES:
                    # SQLite itself reads sqlite_master's rowid to make an eponymous virtual
                    # table (json_each, pragma_table_info): only a column read is the user's
                    state["all"] = state["all"] or (arg2 or "").lower() != "rowid"
                else:
                    names.add(name)
                    if name in EVENT_TABLES:
                        columns.setdefault(name, set()).add((arg2 or "").lower())
            elif action == sqlite3.SQLITE_PRAGMA:
                if arg2 is not None and arg2.lower() in PARTS:
                    names.add(arg2.lower())
                    if arg2.lower() in EVENT_TABLES:  # PRAGMA table_info(kernels) is about every column
                        columns.setdefault(arg2.lower(), set()).add("*")
                else:
                    state["all"] = True  # e.g. PRAGMA table_list: the whole schema
            return verdict

        with self.lock:
            if self.conn is None:
                self.conn = self._make()
            self.conn.set_authorizer(note)
            try:
                self.conn.execute(f"EXPLAIN {sql}").close()
            except (sqlite3.Warning, sqlite3.ProgrammingError):  # more than one statement: refused whatever it reads
                return set(), {}
            except sqlite3.Error:
                return (set() if state["refused"] else None), {}
            finally:
                clear_authorizer(self.conn)
        if state["refused"]:
            return set(), {}
        if state["all"]:
            return None, {}
        out = set()
        for name in names:
            if name in PARTS:
                out.add(name)
            else:  # a full-text table's shadow tables (kernels_fts_data, ...)
                out.update(f for f in FTS if name.startswith(f"{f}_"))
        return out, columns


_SKELETON = _Skeleton()
#: the tables that list the schema: a query reading them sees every part
SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})


def parts_read(sql: str, analysis: bool = True) -> list[str]:
    """The parts of the schema (:data:`PARTS`, in build order) that statement ``sql`` reads, as
    SQLite prepares it: a view stands for the tables it reads, a full-text table for itself and its
    table. Every part when that cannot be told (a statement that does not prepare against the
    schema, one that reads ``sqlite_master``), none for a statement the query policy refuses."""
    found = _SKELETON.reads(sql)
    want = set(PARTS) if found is None else found | {FTS[f][0] for f in found if f in FTS}
    want.add("kviewer_schema")
    return [p for p in PARTS if p in want and (analysis or p not in ANALYSIS_TABLES)]


#: the columns every built event table keeps, whatever a query reads (its key, its trace)
_KEY_COLUMNS = frozenset({"pk", "trace_id"})


def columns_read(sql: str) -> dict[str, frozenset[str]] | None:
    """The SQL columns of each event table ``sql`` reads (with the key and trace columns, and the
    full-text index's columns when it reads the index, whose content the table is), for a
    database built for this one statement (:func:`query_files` without the cache): only those
    columns are written, and only the trace columns they come from are loaded. None when that
    cannot be told: every column then."""
    parts, columns = _SKELETON.reads_columns(sql)
    if parts is None:
        return None
    out: dict[str, frozenset[str]] = {}
    for table in EVENT_TABLES:
        wanted = set(columns.get(table, ())) - {"", "rowid", "oid", "_rowid_"}
        if "*" in wanted:  # a PRAGMA about the table: every column
            wanted = set(_SKELETON.table_columns(table))
        wanted |= _KEY_COLUMNS
        for fts, (content, cols) in FTS.items():
            if content == table and fts in parts:
                wanted |= set(cols)
        out[table] = frozenset(wanted)
    return out


def _trace_columns(table: str, sql_columns: Collection[str]) -> list[str]:
    """The columns of trace table ``table`` that its SQL columns ``sql_columns`` are written from
    (``start_ns`` from ``start``...), with ``id`` (the key) and ``start`` (the order)."""
    back = {v: k for k, v in TIME_COLUMNS.items()}
    names = schema.TABLES[table].names
    want = {back.get(c, c) for c in sql_columns} | {"id", "start"}
    return [c for c in names if c in want]


def columns_to_build(conn: sqlite3.Connection, parts: Collection[str], only: Mapping[str, Collection[str]] | None) -> dict[str, frozenset[str] | None]:
    """The event tables among ``parts`` that ``conn`` must (re)build for a statement reading
    ``only`` of them (:func:`columns_read`; None: every column), each with the SQL columns to write
    (None: all of them): a table it lacks gets the columns read; a table it holds without some of
    them is written again with the columns it had and those (rows keep their pk, which is the rowid
    a full-text index refers to)."""
    out: dict[str, frozenset[str] | None] = {}
    for table in EVENT_TABLES:
        if table not in parts:
            continue
        have = frozenset(r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})"))
        full = _SKELETON.table_columns(table)
        want = full if only is None else frozenset(only[table])
        if not want <= have:
            cols = want | have
            out[table] = None if cols >= full else cols
    return out


def built_parts(conn: sqlite3.Connection) -> set[str]:
    """The parts a database holds (a part is written in one transaction: present is complete)."""
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} & set(PARTS)


def missing_parts(conn: sqlite3.Connection, sql: str, analysis: bool = True) -> list[str]:
    """The parts ``sql`` reads that ``conn`` does not hold yet."""
    have = built_parts(conn)
    return [p for p in parts_read(sql, analysis) if p not in have]


def wanted_tables(parts: Sequence[str], analysis: bool = True, only: Mapping[str, Collection[str]] | None = None) -> dict[str, list[str]] | None:
    """What of a trace file ``parts`` need (:func:`kviewer.io.load`'s ``tables``); None: all of it
    (the steps and the analyses read the whole trace). ``only``: the SQL columns of the event
    tables that will be written (:func:`columns_read`); their other columns are not loaded."""
    if any(p in ("steps", *ANALYSIS_TABLES) for p in parts) or ("traces" in parts and analysis):
        return None
    tables = [t for t in schema.TABLES if t in parts or any(FTS[f][0] == t for f in parts if f in FTS)]
    return {t: _trace_columns(t, only[t]) if only is not None and t in only else schema.TABLES[t].names for t in tables or ["devices"]}


def _start(conn: sqlite3.Connection) -> None:
    """A new database of the schema: the ``kviewer_schema`` row and the views (whose tables come
    when a query reads them)."""
    db = sqlite_utils.Database(conn)
    conn.execute("BEGIN")
    _schema_row(db)
    _create_views(db)
    conn.commit()


def add_parts(conn: sqlite3.Connection, traces: Sequence[Trace], parts: Sequence[str], analysis: bool = True,
              sols: Sequence[pd.DataFrame | None] | None = None, only: Mapping[str, Collection[str]] | None = None,
              rebuild: Collection[str] = (), indexes: bool = True) -> None:
    """Write ``parts`` for ``traces`` into ``conn`` in one transaction (the query policy is lifted
    meanwhile and put back after, when it was on). ``rebuild``: tables of ``parts`` that ``conn``
    holds and that are dropped first, to be written again (with more columns). ``indexes``: make
    the tables' indexes (:data:`INDEXES`), for the later queries they serve."""
    hardened = conn.execute("PRAGMA query_only").fetchone()[0] == 1
    clear_authorizer(conn)
    conn.execute("PRAGMA query_only=OFF")
    try:
        db = sqlite_utils.Database(conn)
        conn.execute("BEGIN")
        try:
            for name in rebuild:
                conn.execute(f"DROP TABLE {quote_identifier(name)}")  # its indexes go with it
            _Builder(db, traces, analysis, sols, only=only, indexes=indexes).build(parts)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    finally:
        if hardened:
            harden_query_connection(conn)


class LazyDatabase:
    """The schema of some loaded traces in memory, each part written when a query first reads it
    (the Query dock; ``kviewer sql`` without the cache). Not thread-safe: one thread uses it."""

    def __init__(self, traces: Sequence[Trace], analysis: bool = True, sols: Sequence[pd.DataFrame | None] | None = None,
                 only: Mapping[str, Collection[str]] | None = None) -> None:
        self.traces, self.analysis, self.sols, self.only = list(traces), analysis, sols, only
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        _start(self.conn)
        harden_query_connection(self.conn)

    def query(self, sql: str, timeout_s: float | None = None, cancel: Callable[[], bool] | None = None) -> pd.DataFrame:
        """:func:`query`, after writing the parts ``sql`` reads. A database built with ``only``
        (the columns one statement reads: :func:`columns_read`) answers only statements that
        read no other column of its event tables."""
        if self.only is not None:
            need = columns_read(sql)
            if need is None or any(not set(need[t]) <= set(self.only[t]) for t in need if t in self.only):
                raise ValueError("this database holds only the columns of the statement it was built for")
        missing = missing_parts(self.conn, sql, self.analysis)
        if missing:
            # a database for one statement makes no index: making one costs the sort the
            # statement would make at most once (SQLite indexes a join's inner table itself)
            add_parts(self.conn, self.traces, missing, self.analysis, self.sols, self.only, indexes=self.only is None)
        return query(self.conn, sql, timeout_s, cancel)

    def close(self) -> None:
        self.conn.close()


def _code_fingerprint() -> str:
    """What decides the built schema besides the files: this module and the analyses."""
    st = Path(__file__).stat()
    return hashlib.sha256(f"{SCHEMA_VERSION} {st.st_size} {st.st_mtime_ns} {session.analysis_cache.analysis_fingerprint()}".encode()).hexdigest()[:32]


def _cache_key(paths: Sequence[str], analysis: bool) -> str | None:
    """The key of the cached database of ``paths`` (as given: ``traces.path`` says them so), None
    when a file cannot be identified."""
    try:
        ids = [kio.cache.source_id(p).key() for p in paths]
    except OSError:
        return None
    text = json.dumps([ids, list(paths), analysis, _code_fingerprint()])
    return hashlib.sha256(text.encode()).hexdigest()


def query_files(
    paths: Sequence[str], sql: str, load: Callable[[str, Mapping[str, Collection[str]] | None], Trace],
    analysis: bool = True, use_cache: bool = True, timeout_s: float | None = None,
) -> pd.DataFrame:
    """Run ``sql`` on the schema of the trace files ``paths`` (trace_id 1, 2, ... in order), building
    only the parts it reads. ``load(path, tables)`` loads a file (``tables``: what of it is needed,
    None for all).

    With ``use_cache`` the built database is kept beside the trace cache
    (:mod:`kviewer.io.cache.derived`), keyed by the files' identities, the paths as given, the
    analysis choice and the code: a later query opens it and adds only the parts it lacks, without
    loading the files when it lacks none. Its event tables hold the columns the statements so far
    read (:func:`columns_to_build`: a statement reading another column writes that table again,
    widened). A cache that cannot be used is passed by (in memory).
    Raises :class:`QueryError` for a failed query."""
    if use_cache:
        found = _cached(paths, sql, load, analysis)
        if found is not None:
            try:
                return query(found, sql, timeout_s)
            finally:
                found.close()
    parts = parts_read(sql, analysis)
    # one statement in memory: only the columns it reads of the event tables are written, and
    # only the trace columns they come from loaded (a kernel count needs no launching thread, so
    # an export's API calls are not read)
    only = columns_read(sql)
    wanted = wanted_tables(parts, analysis, only)
    db = LazyDatabase([load(p, wanted) for p in paths], analysis, only=only)
    try:
        return db.query(sql, timeout_s)
    finally:
        db.close()


def _fill_cached(conn: sqlite3.Connection, paths: Sequence[str], wanted: Sequence[str], only: Mapping[str, Collection[str]] | None,
                 load: Callable[[str, Mapping[str, Collection[str]] | None], Trace], analysis: bool) -> None:
    """Make the cached database ``conn`` of ``paths`` hold the parts ``wanted`` with (at least) the
    event-table columns ``only`` (None: all), loading only what the missing parts and columns need."""
    if "kviewer_schema" not in built_parts(conn):
        _start(conn)
    have = built_parts(conn)
    missing = [p for p in wanted if p not in have]
    # the event tables hold the columns read so far: one lacking a column now read is written
    # again with it (a kernel count writes two columns of 600k kernels, not fifty)
    columns = columns_to_build(conn, wanted, only)
    rebuild = [t for t in columns if t not in missing]
    parts = [p for p in PARTS if p in missing or p in rebuild]
    if parts:
        narrow = {t: cols for t, cols in columns.items() if cols is not None}
        traces = [load(p, wanted_tables(parts, analysis, narrow)) for p in paths]
        add_parts(conn, traces, parts, analysis, only=narrow, rebuild=rebuild)


def _completed(paths: Sequence[str], analysis: bool, wanted: Sequence[str], only: Mapping[str, Collection[str]] | None,
               load: Callable[[str, Mapping[str, Collection[str]] | None], Trace]) -> tuple[Path, BinaryIO] | None:
    """The cached database of ``paths`` made to hold ``wanted`` with the columns ``only``
    (:func:`_fill_cached`), and the file opened under its lock (a removal by another process's
    eviction does not take it away); None when the cache cannot serve."""
    log = logging.getLogger(__name__)
    key = _cache_key(paths, analysis)
    if key is None:
        return None
    try:
        path = kio.cache.derived.derived_path("sql", key)
    except (kio.cache.derived.UnsafeCache, OSError) as exc:
        log.info("sql cache not used: %s", exc)
        return None
    try:
        with kio.cache.derived.locked(path):
            conn = sqlite3.connect(path, timeout=30.0)
            try:
                _fill_cached(conn, paths, wanted, only, load, analysis)
            finally:
                conn.close()
            src = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except sqlite3.DatabaseError as exc:  # a damaged cache file: dropped, the caller goes without
        log.warning("sql cache %s was damaged (%s); it has been removed", path, exc)
        kio.cache.derived.remove(path)
        return None
    except QueryError:
        raise
    except Exception as exc:  # noqa: BLE001 - a load error is the caller's; a cache problem is a miss
        if isinstance(exc, (KViewerError, KeyboardInterrupt)):
            raise
        log.warning("sql cache %s not used: %s: %s", path, type(exc).__name__, exc)
        return None
    kio.cache.derived.touch(path)
    kio.cache.derived.evict("sql", keep=path)
    return path, src


def export_files(paths: Sequence[str], out: str, load: Callable[[str, Mapping[str, Collection[str]] | None], Trace],
                 analysis: bool = True) -> bool:
    """Write the database of the trace files ``paths`` to ``out`` (as :func:`export` would) as a
    copy of their cached database (:func:`query_files`' cache), which is completed first (every
    part, every column): a second export of the same files loads nothing and copies a file. False
    when the cache cannot serve (nothing written: the caller exports from loaded traces)."""
    found = _completed(paths, analysis, [p for p in PARTS if analysis or p not in ANALYSIS_TABLES], None, load)
    if found is None:
        return False
    _, src = found
    with src:  # complete: never written again

        def copy(tmp: str) -> None:
            with open(tmp, "r+b") as dst:
                _copy_file(src, dst)

        _new_file(out, copy)
    return True


def _copy_file(src: BinaryIO, dst: BinaryIO) -> None:
    """Copy ``src`` (from its start) into ``dst`` inside the kernel (``os.sendfile``: no pass of the
    bytes through Python), else through buffers where the system cannot."""
    size, done = os.fstat(src.fileno()).st_size, 0
    try:
        while done < size:
            sent = os.sendfile(dst.fileno(), src.fileno(), done, size - done)
            if not sent:
                break
            done += sent
    except (OSError, AttributeError):  # no sendfile between these files: the portable way
        done = 0
    if done < size:
        src.seek(done)
        dst.seek(done)
        shutil.copyfileobj(src, dst, 1 << 24)


def _cached(paths: Sequence[str], sql: str, load: Callable[[str, Mapping[str, Collection[str]] | None], Trace],
            analysis: bool) -> sqlite3.Connection | None:
    """The cached database of ``paths`` holding what ``sql`` reads, opened read-only under the query
    policy; None when the cache cannot serve (then the caller builds in memory)."""
    found = _completed(paths, analysis, parts_read(sql, analysis), columns_read(sql), load)
    if found is None:
        return None
    path, src = found
    with src:
        return open_readonly(str(path))


def open_export(path: str) -> sqlite3.Connection | None:
    """A database written by :func:`export`, opened read-only; None when ``path`` is not one."""
    try:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\x00":
                return None
        conn = open_readonly(path)
    except (OSError, sqlite3.Error, KViewerError):
        return None
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kviewer_schema'").fetchone() is not None:
            return conn
    except sqlite3.Error:
        pass
    conn.close()
    return None


def open_readonly(path: str) -> sqlite3.Connection:
    """An export opened read-only through the one hardened open
    (:func:`kviewer.io.source.connect_readonly`) under the ``query`` policy, for user SQL (views
    allowed, every write, ATTACH and PRAGMA write refused). Raises
    :class:`~kviewer.errors.LoadError` when it cannot be opened."""
    return kio.source.connect_readonly(path, "kviewer database", policy="query")


def query(conn: sqlite3.Connection, sql: str, timeout_s: float | None = None, cancel: Callable[[], bool] | None = None) -> pd.DataFrame:
    """Run one statement; the result as a frame. Raises :class:`QueryError` with a one-line text.

    The statement runs under the ``query`` policy (:mod:`kviewer.io.sqlite_safety`: read-only,
    no ATTACH, no PRAGMA writes) and within ``timeout_s``, the memory budget
    (``KVIEWER_MAX_MEMORY``) and ``cancel()``."""
    refusals = harden_query_connection(conn)
    try:
        return run_query(conn, sql, timeout_s, cancel)
    except sqlite3.Warning as exc:  # e.g. more than one statement
        raise QueryError(f"SQL error: {exc}") from exc
    except QueryStopped as exc:  # the deadline, the memory budget, a cancel
        raise QueryError(str(exc)) from exc.__cause__
    except sqlite3.Error as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if refusals.actions:
            text = "not allowed: queries are read-only (no writes, ATTACH, VACUUM INTO, PRAGMA settings or fts3_tokenizer)"
        raise QueryError(f"SQL error: {text}") from exc


__all__ = ["PARTS", "PK_STRIDE", "SCHEMA_VERSION", "VIEWS", "LazyDatabase", "QueryError", "add_parts", "build", "columns_to_build", "export",
           "export_files", "in_memory", "missing_parts", "open_export", "open_readonly", "parts_read", "query", "query_files",
           "wanted_tables"]
