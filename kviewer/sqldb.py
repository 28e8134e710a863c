"""The unified model in SQL: one documented, versioned SQLite schema for every format.

``kviewer export FILE... -o OUT.sqlite`` writes it; ``kviewer sql FILE... "SELECT ..."`` queries
it (in memory, read-only); the app's Query dock runs the same. Several files become several
``trace_id`` of one database, so SQL across runs or ranks works. Everything is written through
sqlite-utils (tables, foreign keys, indexes, full-text search); the views are plain SQL.

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

import math
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kviewer.core import schema
from kviewer.errors import QueryError

if TYPE_CHECKING:
    import sqlite_utils

    from kviewer.core import Trace

SCHEMA_VERSION = 1
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


def _sql_value(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _frame_for_sql(df: pd.DataFrame, table: schema.Table | None) -> pd.DataFrame:
    """Columns renamed to carry their unit, categories as text, unknown ints as NULL."""
    out = {}
    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            values: Any = col.astype(object).where(col.notna(), None).to_numpy()
        else:
            values = col.to_numpy()
        spec = None
        if table is not None:
            try:
                spec = table.column(name)
            except KeyError:
                spec = None
        if spec is not None and spec.dtype in (schema.INT, schema.I32) and name not in ("id",):
            missing = -1 if spec.missing is None else spec.missing
            values = np.where(values == missing, None, values.astype(object)) if len(values) else values.astype(object)
        out[TIME_COLUMNS.get(name, name)] = values
    return pd.DataFrame(out)


def _records(df: pd.DataFrame, extra: dict[str, Any] | None = None, pk: np.ndarray | None = None) -> Iterator[dict[str, Any]]:
    cols = list(df.columns)
    arrays = [df[c].to_numpy() for c in cols]
    for i in range(len(df)):
        rec = {c: _sql_value(a[i]) for c, a in zip(cols, arrays)}
        if extra:
            rec.update(extra)
        if pk is not None:
            rec["pk"] = int(pk[i])
        yield rec


def _insert(db: sqlite_utils.Database, name: str, df: pd.DataFrame, trace_id: int, pk: np.ndarray | None = None, **kw: Any) -> None:
    table = db[name]
    columns = {c: _column_type(df[c]) for c in df.columns}
    columns["trace_id"] = int
    if pk is not None:
        columns["pk"] = int
    if not table.exists():
        order = (["pk"] if pk is not None else []) + ["trace_id"] + list(df.columns)
        db.create_table(name, {c: columns[c] for c in order}, pk="pk" if pk is not None else None, **kw)
    if len(df):
        db[name].insert_all(_records(df, {"trace_id": trace_id}, pk), batch_size=5000, alter=True)  # type: ignore[union-attr]


def _column_type(col: pd.Series) -> type:
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


def add_trace(db: sqlite_utils.Database, trace: Trace, trace_id: int, analysis: bool = True, sol: pd.DataFrame | None = None) -> None:
    """Write one trace (and, with ``analysis``, its SOL and fusion candidates) as ``trace_id``;
    ``sol`` is its speed-of-light frame when the caller already has it (the app computed it on
    load, possibly on a GPU the user chose)."""
    meta = trace.meta
    base = trace_id * PK_STRIDE
    sol_device, sol_note = None, None
    for name in schema.TABLES:
        df = trace.table(name)
        spec = schema.TABLES[name]
        frame = _frame_for_sql(df, spec)
        if name in EVENT_TABLES:
            _insert(db, name, frame, trace_id, pk=base + df["id"].to_numpy(dtype=np.int64))
        elif name == "flows":
            dst = df["dst"].to_numpy(dtype=np.int64)
            to_k = (df["dst_table"].astype(str) == "kernels").to_numpy()
            frame = frame.assign(
                src_pk=_or_null(base + df["src"].to_numpy(dtype=np.int64), df["src"].to_numpy() >= 0),
                kernel_pk=_or_null(base + dst, to_k & (dst >= 0)),
                op_pk=_or_null(base + dst, ~to_k & (dst >= 0)),
            )
            _insert(db, name, frame, trace_id)
        elif name == "metrics":
            kernel = df["kernel"].to_numpy(dtype=np.int64)
            frame = frame.assign(kernel_pk=_or_null(base + kernel, kernel >= 0))
            _insert(db, name, frame, trace_id)
        else:
            _insert(db, name, frame, trace_id)
    from kviewer.analysis.steps import find_steps

    steps = find_steps(trace)
    steps = steps.rename(columns={"gpu_span": "gpu_span_ns", "gpu_start": "gpu_start_ns", "gpu_end": "gpu_end_ns"})
    _insert(db, "steps", _frame_for_sql(steps, None), trace_id)
    if analysis and len(trace.kernels):
        from kviewer.analysis.fusion import fusion_candidates
        from kviewer.analysis.sol import speed_of_light
        from kviewer.errors import AnalysisError

        try:
            if sol is None:
                sol = speed_of_light(trace)
        except AnalysisError as exc:
            sol_note = str(exc)
        else:
            devices = sorted({str(d) for d in sol.get("gpu", pd.Series(dtype=object)).dropna() if str(d)})
            sol_device = ", ".join(devices) or None
            keep = [c for c in sol.columns if c not in ("name", "short_name", "start", "end", "dur", "device", "stream")]
            frame = _frame_for_sql(sol[keep], None)
            ids = sol["id"].to_numpy(dtype=np.int64) if "id" in sol.columns else np.arange(len(sol))
            frame = frame.rename(columns={"id": "kernel_id"}).assign(kernel_pk=base + ids)
            _insert(db, "kernel_sol", frame, trace_id)
            try:
                cand = fusion_candidates(trace, sol=sol)
            except AnalysisError as exc:
                sol_note = str(exc)
            else:
                cand = cand.assign(kernel_ids=[" ".join(str(i) for i in ids[0]) if len(ids) else "" for ids in cand["kernel_ids"]])
                _insert(db, "fusion_candidates", _frame_for_sql(cand, None), trace_id)
    db["traces"].insert(  # type: ignore[union-attr]
        {
            "trace_id": trace_id, "path": meta.path, "source_format": meta.source_format,
            "format_label": meta.format_label, "tool": meta.tool, "tool_version": meta.tool_version,
            "origin_ns": meta.origin_ns, "time_zero": meta.time_zero, "sol_device": sol_device, "sol_note": sol_note,
        },
        pk="trace_id",
    )  # fmt: skip


def _finish(db: sqlite_utils.Database) -> None:
    """Keys, indexes, full-text search and views, once every trace is in."""
    _schema_row(db)
    names = set(db.table_names())
    fks = [(t, "trace_id", "traces", "trace_id") for t in names if t not in ("traces", "kviewer_schema")]
    fks += [("flows", "src_pk", "cpu_slices", "pk"), ("flows", "kernel_pk", "kernels", "pk"), ("flows", "op_pk", "gpu_ops", "pk"),
            ("metrics", "kernel_pk", "kernels", "pk")]  # fmt: skip
    if "kernel_sol" in names:
        fks.append(("kernel_sol", "kernel_pk", "kernels", "pk"))
    db.add_foreign_keys([fk for fk in fks if fk[0] in names and fk[1] in db[fk[0]].columns_dict])
    for t in EVENT_TABLES:
        db[t].create_index(["trace_id", "start_ns"], if_not_exists=True)  # type: ignore[union-attr]
        db[t].create_index(["name"], if_not_exists=True)  # type: ignore[union-attr]
    db["metrics"].create_index(["kernel_pk"], if_not_exists=True)  # type: ignore[union-attr]
    db["flows"].create_index(["kernel_pk"], if_not_exists=True)  # type: ignore[union-attr]
    db["kernels"].enable_fts(["name", "short_name"], create_triggers=False)  # type: ignore[union-attr]
    db["cpu_slices"].enable_fts(["name"], create_triggers=False)  # type: ignore[union-attr]
    for sql in VIEWS.values():
        db.execute(sql)


def build(
    db: sqlite_utils.Database, traces: Sequence[Trace], analysis: bool = True,
    progress: Callable[[str], None] | None = None, sols: Sequence[pd.DataFrame | None] | None = None,
) -> None:
    """Write ``traces`` (trace_id 1, 2, ...) into the empty database ``db`` (``sols``: their
    speed-of-light frames where already computed)."""
    for i, trace in enumerate(traces, start=1):
        if progress is not None:
            progress(trace.meta.path)
        add_trace(db, trace, i, analysis, sol=sols[i - 1] if sols is not None else None)
    _finish(db)


class OutputBusy(OSError):
    """Another process is writing the same output file right now."""


def _new_database(out: str, fill: Callable[[sqlite_utils.Database], None]) -> None:
    """Write a new database file ``out`` with ``fill`` (beside it as ``OUT.partial`` first, so an
    interrupted write never leaves a half database under the final name; replaced when it exists).

    ``OUT.partial`` is locked while it is written: a second writer of the same output fails at
    once with :class:`OutputBusy` instead of writing into the first one's file. Ctrl+C, SIGTERM
    or an error remove it (:func:`kviewer.tempdir.track_temp_file`); a file left by a killed
    writer (SIGKILL) holds no lock and is simply replaced."""
    import fcntl
    import os

    import sqlite_utils

    from kviewer.tempdir import remove_quietly, signals_deferred, track_temp_file, untrack_temp_file

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
        db = sqlite_utils.Database(tmp)
        try:
            fill(db)
            db.conn.commit()
        finally:
            db.close()
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
    from kviewer import __version__

    db["kviewer_schema"].insert({"version": SCHEMA_VERSION, "kviewer_version": __version__, **extra})  # type: ignore[union-attr]


def export(traces: Sequence[Trace], out: str, analysis: bool = True) -> None:
    """Write a new database file ``out`` (replaced when it exists) from ``traces``."""
    _new_database(out, lambda db: build(db, traces, analysis))


def in_memory(traces: Sequence[Trace], analysis: bool = True, sols: Sequence[pd.DataFrame | None] | None = None) -> sqlite3.Connection:
    """The schema for ``traces`` in an in-memory database, read-only from then on."""
    import sqlite_utils

    conn = sqlite3.connect(":memory:", check_same_thread=False)
    db = sqlite_utils.Database(conn)
    build(db, traces, analysis, sols=sols)
    conn.commit()
    from kviewer.io.sqlite_safety import harden_query_connection

    harden_query_connection(conn)
    return conn


def write_tables(tables: dict[str, pd.DataFrame], out: str, kind: str, keys: dict[str, list[str]] | None = None) -> None:
    """Write analysis tables (``kviewer fleet``'s) as a new database ``out`` in this module's
    style: sqlite-utils, unknown values NULL, one ``kviewer_schema`` row (with ``kind``), and an
    index on each table's ``keys``. Replaced when it exists."""

    def fill(db: sqlite_utils.Database) -> None:
        _schema_row(db, kind=kind)
        for name, df in tables.items():
            db.create_table(name, {c: _column_type(df[c].dropna()) if df[c].dtype == object else _column_type(df[c]) for c in df.columns})
            if len(df):
                db[name].insert_all(_records(df), batch_size=5000)  # type: ignore[union-attr]
            cols = [c for c in (keys or {}).get(name, []) if c in df.columns]
            if cols:
                db[name].create_index(cols, if_not_exists=True)  # type: ignore[union-attr]

    _new_database(out, fill)


def open_export(path: str) -> sqlite3.Connection | None:
    """A database written by :func:`export`, opened read-only; None when ``path`` is not one."""
    from kviewer.errors import KViewerError

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
    from kviewer.io.source import connect_readonly

    return connect_readonly(path, "kviewer database", policy="query")


def query(conn: sqlite3.Connection, sql: str, timeout_s: float | None = None, cancel: Callable[[], bool] | None = None) -> pd.DataFrame:
    """Run one statement; the result as a frame. Raises :class:`QueryError` with a one-line text.

    The statement runs under the ``query`` policy (:mod:`kviewer.io.sqlite_safety`: read-only,
    no ATTACH, no PRAGMA writes) and within ``timeout_s``, the memory budget
    (``KVIEWER_MAX_MEMORY``) and ``cancel()``."""
    from kviewer.io.sqlite_safety import QueryStopped, harden_query_connection, run_query

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


__all__ = ["PK_STRIDE", "SCHEMA_VERSION", "VIEWS", "QueryError", "add_trace", "build", "export", "in_memory", "open_export", "open_readonly", "query"]
