"""Reading a fleet output back (for the app's per-rank table): no Dask, no Qt.

A ``fleet.sqlite`` someone sent is untrusted: it is opened through the one hardened open
(:func:`kviewer.io.source.connect_readonly`, ``strict``: tables only, nothing a view or trigger
does runs), and every read is bounded in time and by the memory budget
(:func:`kviewer.io.sqlite_safety.run_query`).
The app calls these on a worker thread, never on the GUI thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from kviewer import io as kio
from kviewer.errors import CorruptTrace, KViewerError

if TYPE_CHECKING:  # sqlite3 and pandas are imported where a database is read (on a worker): the
    # app's start-up asks is_fleet_candidate without them
    import sqlite3

    import pandas as pd

    import kviewer.io.source
    import kviewer.io.sqlite_safety

DB = "fleet.sqlite"
RECOGNISED = "kviewer fleet output"
#: the longest a read of a fleet output may take
READ_TIMEOUT_S = 30.0


def is_fleet_candidate(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is named like a ``kviewer fleet`` output: the database itself or a folder
    holding one. Only names are looked at (cheap, nothing read: :func:`fleet_db` decides)."""
    return _candidate(path) is not None


def _open(db: Path) -> sqlite3.Connection:
    import sqlite3

    conn = kio.source.connect_readonly(db, RECOGNISED)  # strict: views and triggers never act
    try:
        missing = {"kviewer_schema", "fleet_ranks"} - kio.source.tables_only(conn)
    except sqlite3.Error as exc:
        conn.close()
        raise CorruptTrace(db, f"not a readable SQLite database ({exc})", RECOGNISED) from exc
    if missing:
        conn.close()
        raise CorruptTrace(db, f"has no {' or '.join(sorted(missing))} table; not a kviewer fleet output", RECOGNISED)
    return conn


def _query(conn: sqlite3.Connection, db: Path, sql: str) -> pd.DataFrame:
    """``sql`` as a frame, within :data:`READ_TIMEOUT_S` and the memory budget
    (:func:`kviewer.io.sqlite_safety.run_query`); a typed error."""
    import sqlite3

    try:
        return kio.sqlite_safety.run_query(conn, sql, READ_TIMEOUT_S)
    except kio.sqlite_safety.QueryStopped as exc:
        raise CorruptTrace(db, str(exc), RECOGNISED) from exc.__cause__
    except sqlite3.Error as exc:
        raise CorruptTrace(db, f"cannot be read ({exc})", RECOGNISED) from exc


def _candidate(path: str | os.PathLike[str]) -> Path | None:
    """The ``fleet.sqlite`` ``path`` names (the folder or the database itself), by name alone."""
    p = Path(path)
    db = p / DB if p.is_dir() else p
    if db.name != DB or not db.is_file():
        return None
    return db


def _is_fleet(conn: sqlite3.Connection, db: Path) -> bool:
    try:
        kind = _query(conn, db, "SELECT kind FROM kviewer_schema LIMIT 1")
    except KViewerError:
        return False
    return bool(len(kind) and kind.iat[0, 0] == "fleet")


def _ranks(conn: sqlite3.Connection, db: Path) -> pd.DataFrame:
    import pandas as pd

    ranks = _query(conn, db, "SELECT * FROM fleet_ranks")
    if not {"run", "rank", "excess_pct"} <= set(ranks.columns):
        raise CorruptTrace(db, "fleet_ranks lacks the run, rank and excess_pct columns", RECOGNISED)
    key = pd.to_numeric(ranks["excess_pct"], errors="coerce").astype("float64").fillna(float("-inf"))
    return ranks.assign(_k=key).sort_values(["run", "_k", "rank"], ascending=[True, False, True], kind="stable").drop(columns="_k").reset_index(drop=True)


def fleet_db(path: str | os.PathLike[str]) -> Path | None:
    """The ``fleet.sqlite`` of a ``kviewer fleet`` output (the folder or the database itself), or
    None. Only names are looked at until a candidate is found (cheap for every file the app opens)."""
    db = _candidate(path)
    if db is None:
        return None
    try:
        conn = _open(db)
    except KViewerError:
        return None
    try:
        return db if _is_fleet(conn, db) else None
    finally:
        conn.close()


def read_ranks(db: Path) -> pd.DataFrame:
    """The fleet's per-rank table, slowest rank of each run first; a typed
    :class:`~kviewer.errors.LoadError` for a file that is not one or too big to read."""
    conn = _open(db)
    try:
        return _ranks(conn, db)
    finally:
        conn.close()


def open_fleet(path: str | os.PathLike[str]) -> tuple[Path, pd.DataFrame] | None:
    """Worker side of opening a fleet output in the app: (its database, its ranks), or None when
    ``path`` is not one. The database is opened (and its tables checked) once."""
    db = _candidate(path)
    if db is None:
        return None
    try:
        conn = _open(db)
    except KViewerError:
        return None
    try:
        if not _is_fleet(conn, db):
            return None
        return db, _ranks(conn, db)
    finally:
        conn.close()
