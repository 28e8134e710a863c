"""rocprof v1 ``results.db``: the SQLite file rocprof v1 writes next to results.csv.

Its ``KERN`` table has the results.csv columns (``"Index"``, ``"KernelName"``, ``"gpu-id"``, ...,
``"BeginNs"``, ``"EndNs"``), with ``KernelName`` stored *including* its CSV quotes. The rows go
through the same builder as results.csv (:func:`kviewer.io.rocprof.v1_csv.build_v1`), so both files
of one run give the same kernels. The file is opened read-only.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd

from kviewer.core import Trace
from kviewer.errors import CorruptTrace
from kviewer.io.rocprof import common as rc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.rocprof.v1_csv import build_v1
from kviewer.io.source import SQLITE_MAGIC, Progress, connect_readonly

RECOGNISED = "rocprof v1 results.db"


def sniff(head: bytes, path: Path) -> bool:
    # sqlite_master lives on the first page, so the CREATE TABLE text is in the head
    return head.startswith(SQLITE_MAGIC) and b"CREATE TABLE KERN" in head and b'"KernelName"' in head


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    con = connect_readonly(path, RECOGNISED, interrupt=lambda: cancel.cancelled)  # Cancel stops a running query
    try:
        tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
        if "KERN" not in tables:
            raise CorruptTrace(path, "has no KERN table", RECOGNISED)
        progress(0.2, "reading KERN")
        try:
            cur = con.execute('select * from "KERN"')
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        except sqlite3.DatabaseError as exc:
            cancel.check()  # stopped by the progress handler: a cancel, not damage
            raise CorruptTrace(path, f"the KERN table cannot be read ({exc})", RECOGNISED) from exc
    finally:
        con.close()
    cancel.check()
    # the builder validates the columns as it does for the CSV; SQLite gives ints as ints
    frame = pd.DataFrame.from_records(rows, columns=names) if rows else pd.DataFrame({n: [] for n in names})
    columns: dict[str, str] = {}
    for c in names:
        columns.setdefault(rc.norm(c), c)
    table = rc.CsvTable(frame, columns, [])
    trace = build_v1(table, path, "rocprof-v1-db", "results.db")
    others = [t for t in tables if t != "KERN"]
    if others:
        trace.meta.extra["other tables"] = ", ".join(others)
    return trace


LOADER = LoaderSpec(
    name="rocprof-v1-db",
    label="rocprof v1 results.db (SQLite)",
    priority=40,
    sniff=sniff,
    load=load,
)
