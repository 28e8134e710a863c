"""What a SQLite connection kviewer runs user SQL on may do, and the watch that bounds a query.

Two authorizers, one per kind of connection:

* :func:`strict_authorizer` (the ``strict`` policy): a file kviewer's own code reads
  (nsys and rocprof exports, ``fleet.sqlite``): tables only; nothing a view or a trigger does runs,
  and only the functions kviewer's queries call.
* :func:`query_authorizer` (the ``query`` policy): every connection user SQL runs on (``kviewer
  sql``, the Query dock, an export opened read-only). Reading is free; every write (INSERT,
  UPDATE, DELETE, CREATE, DROP, ALTER, REINDEX, ANALYZE, transactions), ATTACH / DETACH (so
  ``VACUUM INTO``, which attaches its target, too), every PRAGMA that sets something or acts
  (``query_only=OFF``, ``wal_checkpoint``) and functions that expose the process
  (``fts3_tokenizer`` hands out a pointer, ``load_extension``) are refused. A view may call only
  the built-ins kviewer's own views use.

:class:`QueryWatch` bounds one running query (:func:`run_query` runs one under it, for ``kviewer
sql``, the Query dock and the fleet reader): a deadline, the memory budget
(``KVIEWER_MAX_MEMORY``: SQLite's own heap through ``PRAGMA hard_heap_limit`` and the process's
resident memory, sampled by the progress handler and between fetched rows) and a cancel flag.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kviewer.io.memory import ENV, memory_budget, rss

if TYPE_CHECKING:
    import pandas as pd

#: the SQL functions kviewer's own queries call. A query that would call anything else (through
#: a generated column or a view in a hostile file: randomblob, zeroblob, a recursive CTE's
#: arithmetic, ...) is refused by the authorizer
ALLOWED_FUNCTIONS = frozenset(
    {"coalesce", "ifnull", "count", "max", "min", "sum", "total", "avg", "typeof", "length", "abs", "nullif", "round",
     "lower", "upper", "substr", "instr", "cast", "like", "glob", "iif", "group_concat"}
)  # fmt: skip
#: the longest string or blob a query may produce (a real name is far shorter; SQLITE_LIMIT_LENGTH)
MAX_SQL_VALUE = 256 * 1024**2


def strict_authorizer(action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
    """SQLite authorizer of input databases: only kviewer's own statements on tables run.

    ``source`` names the view or trigger an access comes from: none may act. Functions outside
    :data:`ALLOWED_FUNCTIONS` are refused wherever they come from.
    """
    if source is not None:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in ALLOWED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    if action in _DENIED_ACTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


_DENIED_ACTIONS = frozenset(
    getattr(sqlite3, name)
    for name in ("SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_INSERT", "SQLITE_UPDATE", "SQLITE_DELETE", "SQLITE_CREATE_TABLE",
                 "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_VIEW", "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_TEMP_VIEW",
                 "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_TABLE", "SQLITE_ALTER_TABLE")
    if hasattr(sqlite3, name)
)  # fmt: skip


def harden_strict_connection(con: sqlite3.Connection) -> None:
    """SQLite's defensive settings on a connection to an untrusted file.

    Python 3.12+ exposes ``sqlite3_db_config``: DEFENSIVE on, TRUSTED_SCHEMA, triggers and views
    off. On 3.11 (no ``setconfig``) ``PRAGMA trusted_schema=OFF`` stands in, and the authorizer
    (:func:`strict_authorizer`), which both versions install, refuses every access made by a view or a
    trigger and every function kviewer's queries do not call. Extension loading stays off, the
    connection is query-only, and strings and blobs are capped at :data:`MAX_SQL_VALUE`.
    """
    defensive_settings(con, views=False, max_value=MAX_SQL_VALUE)
    con.set_authorizer(strict_authorizer)


#: the longest string or blob a user query may produce (SQLITE_LIMIT_LENGTH): as for kviewer's own
MAX_QUERY_VALUE = MAX_SQL_VALUE

_WRITE_NAMES = (
    "SQLITE_INSERT", "SQLITE_UPDATE", "SQLITE_DELETE", "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TABLE",
    "SQLITE_CREATE_TEMP_INDEX", "SQLITE_CREATE_TEMP_TABLE", "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_CREATE_TEMP_VIEW",
    "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_VIEW", "SQLITE_CREATE_VTABLE", "SQLITE_DROP_INDEX", "SQLITE_DROP_TABLE",
    "SQLITE_DROP_TEMP_INDEX", "SQLITE_DROP_TEMP_TABLE", "SQLITE_DROP_TEMP_TRIGGER", "SQLITE_DROP_TEMP_VIEW",
    "SQLITE_DROP_TRIGGER", "SQLITE_DROP_VIEW", "SQLITE_DROP_VTABLE", "SQLITE_ALTER_TABLE", "SQLITE_REINDEX",
    "SQLITE_ANALYZE", "SQLITE_ATTACH", "SQLITE_DETACH", "SQLITE_TRANSACTION", "SQLITE_SAVEPOINT",
)  # fmt: skip
#: actions a user query may never take: every write, ATTACH/DETACH, transactions
DENIED_QUERY_ACTIONS = frozenset(getattr(sqlite3, n) for n in _WRITE_NAMES if hasattr(sqlite3, n))

#: pragmas that only report (with or without an argument naming a table or index)
READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list",
     "function_list", "module_list", "pragma_list", "collation_list", "database_list", "compile_options"}
)  # fmt: skip
#: settings a query may read (never set: an argument is refused)
READABLE_SETTINGS = frozenset(
    {"schema_version", "user_version", "application_id", "page_count", "page_size", "freelist_count", "encoding",
     "query_only", "foreign_keys", "data_version", "max_page_count", "journal_mode", "hard_heap_limit",
     "soft_heap_limit", "cache_size", "trusted_schema"}
)  # fmt: skip
#: functions no user query may call: fts3_tokenizer hands out (and takes) a pointer into the process
REFUSED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension", "readfile", "writefile", "edit", "fts5"})
#: what a view may call: the functions kviewer's own queries call, and those its own views use
#: besides (a hostile view may not reach randomblob)
VIEW_FUNCTIONS = ALLOWED_FUNCTIONS | frozenset(
    {"sqrt", "row_number", "rank", "dense_rank", "lag", "lead", "first_value", "last_value", "ntile", "percent_rank",
     "cume_dist", "nth_value", "trim", "ltrim", "rtrim", "replace", "printf", "format", "date", "time",
     "datetime", "julianday", "strftime", "floor", "ceil", "ceiling", "log", "log10", "exp", "pow", "power"}
)  # fmt: skip


def query_authorizer(action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
    """SQLite authorizer of connections user SQL runs on: read, never write (see the module)."""
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master" and source is None:
        # the full-text (FTS) module's constructor prepares this; sqlite_master is writable only
        # with PRAGMA writable_schema (refused below), and the connection is query-only anyway
        return sqlite3.SQLITE_OK
    if action in DENIED_QUERY_ACTIONS:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in READ_PRAGMAS or (name in READABLE_SETTINGS and arg2 is None):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        if name in REFUSED_FUNCTIONS or (source is not None and name not in VIEW_FUNCTIONS):
            return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


class Refusals:
    """:func:`query_authorizer` that also records what it refused (the action codes), so a
    caller can tell a refusal from another error on data, not on SQLite's words."""

    def __init__(self) -> None:
        self.actions: list[int] = []

    def __call__(self, action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
        verdict = query_authorizer(action, arg1, arg2, db_name, source)
        if verdict != sqlite3.SQLITE_OK:
            self.actions.append(action)
        return verdict


def defensive_settings(con: sqlite3.Connection, views: bool, max_value: int) -> None:
    """SQLite's defensive settings on a connection to an untrusted file, for every policy.

    Python 3.12+ (``setconfig``): DEFENSIVE on, TRUSTED_SCHEMA and triggers off, views as
    ``views`` says. Everywhere: no extension loading, ``trusted_schema`` off, query-only, page
    checks, no memory mapping, strings and blobs capped at ``max_value``, no attached databases.
    The caller installs its authorizer."""
    setconfig = getattr(con, "setconfig", None)
    if setconfig is not None:  # Python 3.12+
        for name, on in (("SQLITE_DBCONFIG_DEFENSIVE", True), ("SQLITE_DBCONFIG_TRUSTED_SCHEMA", False),
                         ("SQLITE_DBCONFIG_ENABLE_TRIGGER", False), ("SQLITE_DBCONFIG_ENABLE_VIEW", views)):  # fmt: skip
            op = getattr(sqlite3, name, None)
            if op is not None:
                try:
                    setconfig(op, on)
                except sqlite3.Error:
                    pass
    if hasattr(con, "enable_load_extension"):
        con.enable_load_extension(False)
    con.execute("PRAGMA trusted_schema=OFF")
    con.execute("PRAGMA query_only=ON")
    con.execute("PRAGMA cell_size_check=ON")
    con.execute("PRAGMA mmap_size=0")
    if hasattr(con, "setlimit"):  # Python 3.11+
        con.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value)
        con.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)


def _allow_all(action: int, arg1: str | None, arg2: str | None, db_name: str | None, source: str | None) -> int:
    return sqlite3.SQLITE_OK


def clear_authorizer(conn: sqlite3.Connection) -> None:
    """Remove the authorizer of ``conn``. ``set_authorizer(None)`` does that from Python 3.11; on
    3.10 SQLite would call ``None`` and deny every statement, so an allow-all is installed."""
    if sys.version_info >= (3, 11):
        conn.set_authorizer(None)
    else:
        conn.set_authorizer(_allow_all)


def harden_query_connection(conn: sqlite3.Connection) -> Refusals:
    """The ``query`` policy on ``conn`` (idempotent): no extensions, capped values, no attached
    databases, untrusted schema, query-only, and :func:`query_authorizer` (returned, recording
    what it refuses)."""
    clear_authorizer(conn)
    defensive_settings(conn, views=True, max_value=MAX_QUERY_VALUE)  # views on: the authorizer limits them
    refusals = Refusals()
    conn.set_authorizer(refusals)
    return refusals


_heap_limit_set: int | None = None


def limit_sqlite_heap(budget: int) -> None:
    """``PRAGMA hard_heap_limit``: SQLite's allocations in this process stay under ``budget``
    (process-wide; SQLite lets it only be lowered, so it is set once to the budget)."""
    global _heap_limit_set
    if _heap_limit_set is not None and _heap_limit_set <= budget:
        return
    con = sqlite3.connect(":memory:")
    try:
        con.execute(f"PRAGMA hard_heap_limit = {int(budget)}")
        _heap_limit_set = budget
    except sqlite3.Error:  # pragma: no cover - SQLite older than 3.31
        pass
    finally:
        con.close()


class QueryWatch:
    """Bounds one query on ``conn``: ``timeout_s``, the memory ``budget`` (default
    :func:`kviewer.io.memory.memory_budget`) and ``cancel()``. Install with ``with``; the
    progress handler interrupts SQLite, :meth:`check` is called between fetched rows.

    After an interruption, :attr:`reason` says why: ``"timeout"``, ``"memory"`` or ``"cancel"``.
    """

    #: SQLite VM steps between two calls of the progress handler
    STEPS = 2_000

    def __init__(
        self, conn: sqlite3.Connection, timeout_s: float | None = None, budget: int | None = None,
        cancel: Callable[[], bool] | None = None,
    ) -> None:  # fmt: skip

        self.conn = conn
        self.timeout_s = timeout_s
        self.deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.budget = memory_budget() if budget is None else budget
        self.cancel = cancel
        self.reason: str | None = None
        self.peak = 0
        self._calls = 0

    def over(self) -> bool:
        """True (and :attr:`reason` set) when the query must stop now."""
        if self.reason is not None:
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.reason = "timeout"
        elif self.cancel is not None and self.cancel():
            self.reason = "cancel"
        else:
            now = rss()
            self.peak = max(self.peak, now)
            if now > self.budget:
                self.reason = "memory"
        return self.reason is not None

    def _handler(self) -> int:
        return 1 if self.over() else 0

    def __enter__(self) -> QueryWatch:
        limit_sqlite_heap(self.budget)
        self.conn.set_progress_handler(self._handler, self.STEPS)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.conn.set_progress_handler(None, 0)

    def fetch(self, cur: sqlite3.Cursor, batch: int = 1000) -> list[Any]:
        """Every row of ``cur``, checking the watch between batches (a row can be a big blob)."""
        rows: list[Any] = []
        while True:
            chunk = cur.fetchmany(batch)
            if not chunk:
                return rows
            rows.extend(chunk)
            if self.over():
                raise sqlite3.OperationalError("interrupted")

    def message(self) -> str:
        """Why the query stopped, in words (for :class:`~kviewer.errors.QueryError`)."""
        if self.reason == "timeout":
            return f"the query ran longer than {self.timeout_s:g} s and was interrupted"
        if self.reason == "memory":
            return (
                f"the query needed more memory than the budget of {self.budget / 1024**3:.1f} GiB and was stopped "
                f"(raise {ENV}, e.g. {ENV}=16G, if the machine has room)"
            )
        return "the query was cancelled"


class QueryStopped(Exception):
    """:func:`run_query` was stopped by its watch (the deadline, the memory budget or a cancel);
    the text says why, in words (:meth:`QueryWatch.message`)."""


def run_query(conn: sqlite3.Connection, sql: str, timeout_s: float | None = None, cancel: Callable[[], bool] | None = None) -> pd.DataFrame:
    """Run one statement on ``conn`` under a :class:`QueryWatch` (``timeout_s``, the memory budget,
    ``cancel()``); every row as a frame.

    Raises :class:`QueryStopped` when the watch stopped it (or memory ran out), and SQLite's own
    errors (``sqlite3.Error``, ``sqlite3.Warning``) otherwise: each caller says them its way."""
    import pandas as pd

    watch = QueryWatch(conn, timeout_s, cancel=cancel)
    try:
        with watch:
            cur = conn.execute(sql)
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = watch.fetch(cur)
            cur.close()
            if watch.over():
                raise sqlite3.OperationalError("interrupted")
            return pd.DataFrame.from_records(rows, columns=cols)
    except MemoryError:  # SQLite's heap limit (SQLITE_NOMEM) or Python's own
        watch.reason = "memory"
        raise QueryStopped(watch.message()) from None
    except sqlite3.Error as exc:
        if watch.reason is not None:
            raise QueryStopped(watch.message()) from exc
        raise
