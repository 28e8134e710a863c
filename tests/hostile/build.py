"""Builders for hostile inputs: small files that each attack one weakness (issue #20).

Each builder writes into a folder the test owns and returns the path. Files stay small (a few
MB at most) but telling: a 2 MB name shared by 2,000 kernels is 4 GB of per-row copies, far
over the address-space cap the memory tests run under.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

# the kernel table columns an nsys export has (enough of them for the loader)
_KERNEL_COLUMNS = (
    "start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, "
    "demangledName INTEGER, shortName INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER, blockX INTEGER, "
    "blockY INTEGER, blockZ INTEGER, registersPerThread INTEGER, staticSharedMemory INTEGER, dynamicSharedMemory INTEGER"
)


def nsys_export(
    path: Path,
    names: list[str],
    kernels: list[int] | None = None,
    *,
    kernel_count: int | None = None,
    extra_sql: str = "",
    meta: dict[str, str] | None = None,
) -> Path:
    """A minimal nsys SQLite export: StringIds ``names`` (ids 0..), kernels naming ``kernels``
    (string ids, one kernel each) or ``kernel_count`` kernels all naming id 0."""
    if kernels is None:
        kernels = [0] * (kernel_count if kernel_count is not None else len(names))
    con = sqlite3.connect(path)
    con.execute("PRAGMA synchronous=OFF")  # test files: no fsync per statement of extra_sql
    try:
        con.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(enumerate(names)))
        con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({_KERNEL_COLUMNS})")
        gpid = (1 << 24) * 1234
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,0,7,?,?,?,?,1,1,1,128,1,1,32,0,0)",
            [(i * 1000, i * 1000 + 500, i, gpid, sid, sid) for i, sid in enumerate(kernels)],
        )
        con.execute("CREATE TABLE META_DATA_EXPORT (name TEXT, value TEXT)")
        rows = {"EXPORT_SCHEMA_VERSION": "3.11.0", **(meta or {})}
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)", list(rows.items()))
        if extra_sql:
            con.commit()
            con.executescript(f"BEGIN; {extra_sql}; COMMIT;")
        con.commit()
    finally:
        con.close()
    return path


def kineto_json(path: Path, names: list[str]) -> Path:
    """A minimal PyTorch profiler (Kineto) trace with one kernel per name."""
    events = [
        {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 5.0,
         "args": {"device": 0, "stream": 7, "correlation": i + 1, "grid": [1, 1, 1], "block": [128, 1, 1]}}
        for i, n in enumerate(names)
    ]
    doc = {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


#: names that attack terminals, spreadsheets, XML and readers
EVIL_NAMES = [
    "\x1b]0;pwned-title\x07kernel_title",  # OSC 0: set the terminal title
    "\x1b[2J\x1b[Hkernel_clear",  # CSI: clear the screen
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",  # OSC 8 hyperlink
    "line1\nline2\rline3\x00nul",  # row breakers
    "=HYPERLINK(\"https://evil.example\",\"x\")",  # spreadsheet formula
    "+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A2)",
    "\tTAB",
    "good_\u202egnp.exe",  # RLO: reads as good_exe.png
    "\u2066isolate\u2069",
    "\x9b31mC1_csi",  # 8-bit CSI
]
