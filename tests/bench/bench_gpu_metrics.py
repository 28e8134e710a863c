"""GPU metrics at the size the issue names: 10 kHz x 60 s x 20 metrics = 12 million samples on one
GPU, in NVIDIA's GPU_METRICS schema (a database written here by SQL, values random 0..100).

Prints: the read time against one SQLite scan of the same table (``select sum(value)``, the
baseline, same run); the read's peak traced memory against the final table's size; and the time
of one timeline frame (min/max per pixel of the 6 default tracks, 1600 px, whole capture and a
1 ms zoom) against a mean per pixel of one track's samples (numpy, the same run).

Run: ``PYTHONPATH=. python tests/bench/bench_gpu_metrics.py [DIR]`` (a few minutes; ~1 GB of disk).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from kviewer.io import nsys_gpu_metrics as gm
from kviewer.session.lod import SampledCounter

RATE_HZ = 10_000
SECONDS = 60
METRICS = 20


def make(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE GPU_METRICS (rawTimestamp INTEGER NOT NULL, timestamp INTEGER NOT NULL, typeId INTEGER NOT NULL, "
                "metricId INTEGER NOT NULL, value INTEGER NOT NULL)")
    con.execute("CREATE TABLE TARGET_INFO_GPU_METRICS (typeId INTEGER NOT NULL, sourceId INTEGER NOT NULL, typeName TEXT NOT NULL, "
                "metricId INTEGER NOT NULL, metricName TEXT NOT NULL)")
    type_id = 281479271677952  # the typeId of the real H200 export
    for m in range(METRICS):
        con.execute("INSERT INTO TARGET_INFO_GPU_METRICS VALUES (?, ?, '', ?, ?)", (type_id, type_id, m, f"Metric {m} [Throughput %]"))
    n = RATE_HZ * SECONDS
    # one row per metric per sample, in time order, as nsys writes them
    con.execute(
        f"WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {n * METRICS - 1}) "
        f"INSERT INTO GPU_METRICS SELECT (i / {METRICS}) * 100000, (i / {METRICS}) * 100000, {type_id}, i % {METRICS}, "
        "abs(random() % 101) FROM s"
    )
    con.commit()
    con.close()


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    path = folder / "gpu_metrics_12m.sqlite"
    if not path.exists():
        t = time.perf_counter()
        make(path)
        print(f"made {path} in {time.perf_counter() - t:.1f} s")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    t = time.perf_counter()
    con.execute("select sum(value) from GPU_METRICS").fetchone()
    scan = time.perf_counter() - t
    tracemalloc.start()
    t = time.perf_counter()
    df = gm.read_samples(con, tables, {0: 0})
    read = time.perf_counter() - t
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    size = int(df.memory_usage(index=False).sum())
    print(f"{len(df):,} samples; read {read:.2f} s = {read / scan:.1f}x one SQLite scan ({scan:.2f} s)")
    print(f"table {size / 2**20:.0f} MiB; peak traced while reading {peak / 2**20:.0f} MiB = {peak / size:.2f}x the table")
    tv = df["t"].to_numpy()
    vv = df["value"].to_numpy()
    per = len(df) // METRICS
    counters = [SampledCounter.build(tv[i * per:(i + 1) * per], vv[i * per:(i + 1) * per]) for i in range(6)]
    t0, t1 = float(tv[0]), float(tv[per - 1])
    for label, (a, b) in {"whole 60 s": (t0, t1), "1 ms": (t0 + 30e9, t0 + 30e9 + 1e6)}.items():
        frame = min(_time(lambda: [c.per_pixel_minmax(a, b, 1600) for c in counters]) for _ in range(5))
        base = min(_time(lambda: _mean_per_pixel(counters[0].t, counters[0].v, a, b, 1600)) for _ in range(5))
        print(f"frame, 6 tracks, {label}: {frame * 1e3:.2f} ms = {frame / base:.2f}x a numpy mean per pixel of 1 track's samples ({base * 1e3:.2f} ms)")


def _time(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def _mean_per_pixel(t: np.ndarray, v: np.ndarray, a: float, b: float, n: int) -> np.ndarray:
    i0, i1 = np.searchsorted(t, [a, b])
    bins = ((t[i0:i1] - a) / (b - a) * n).astype(np.int64)
    return np.bincount(bins, v[i0:i1], minlength=n) / np.maximum(np.bincount(bins, minlength=n), 1)


if __name__ == "__main__":
    main()
