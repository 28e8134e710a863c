"""Reading a fleet output back (for the app's per-rank table): no Dask, no Qt."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

DB = "fleet.sqlite"


def fleet_db(path: str | os.PathLike[str]) -> Path | None:
    """The ``fleet.sqlite`` of a ``kviewer fleet`` output (the folder or the database itself), or
    None. Only names are looked at until a candidate is found (cheap for every file the app opens)."""
    p = Path(path)
    db = p / DB if p.is_dir() else p
    if db.name != DB or not db.is_file():
        return None
    import sqlite3

    from kviewer.sqldb import open_readonly

    try:
        conn = open_readonly(str(db))
    except sqlite3.Error:
        return None
    try:
        row = conn.execute("SELECT kind FROM kviewer_schema").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return db if row is not None and row[0] == "fleet" else None


def read_ranks(db: Path) -> pd.DataFrame:
    """The fleet's per-rank table, slowest rank of each run first."""
    from kviewer.sqldb import open_readonly

    conn = open_readonly(str(db))
    try:
        ranks = pd.read_sql_query("SELECT * FROM fleet_ranks", conn)
    finally:
        conn.close()
    key = ranks["excess_pct"].astype("float64").fillna(float("-inf"))
    return ranks.assign(_k=key).sort_values(["run", "_k", "rank"], ascending=[True, False, True], kind="stable").drop(columns="_k").reset_index(drop=True)
