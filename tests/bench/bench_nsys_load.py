"""Benchmark: loading Nsight Systems SQLite exports.

Run: ``python tests/bench/bench_nsys_load.py [EXPORT ...]`` (default: the h200 export, plain from
../shared/samples when present and gzipped from sample_traces/).

The baseline, measured in the same run, is the floor any SQLite reader pays: ``select *`` of the
tables the loader reads (kernels, memcpy, memset, runtime, NVTX, OSRT, StringIds), fetched into
Python tuples with no joins and no model building. The figure that matters is the ratio of the
full load (joins, numpy columns, nesting depth, flows, devices) to that floor.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

from kviewer.io import nsys
from kviewer.io.registry import CancelToken
from _timing import best_of  # noqa: E402  (tests/bench is sys.path[0] when run as a script)

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples")) / "nsys"
TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "OSRT_API", "StringIds")  # fmt: skip


def raw_fetch(path: Path) -> int:
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    present = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    n = 0
    for t in TABLES:
        if t in present:
            n += len(con.execute(f"select * from {t}").fetchall())
    con.close()
    return n


def load(path: Path) -> object:
    return nsys.load(path, lambda fraction, message: None, CancelToken())


def main(argv: list[str]) -> None:
    paths = [Path(a) for a in argv]
    if not paths:
        plain = SHARED / "h200_llm_train_nvtx.sqlite"
        paths = ([plain] if plain.exists() else []) + [REPO / "sample_traces" / "h200_llm_train_nvtx.sqlite.gz"]
    print(f"{'export':<45} {'rows':>8} {'floor s':>8} {'load s':>8} {'load/floor':>10}")
    for p in paths:
        db = p
        tmp = None
        if p.suffix == ".gz":  # the floor reads the decompressed database
            tmp = tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False)
            tmp.write(gzip.decompress(p.read_bytes()))
            tmp.close()
            db = Path(tmp.name)
        rows = raw_fetch(db)
        floor = best_of(lambda: raw_fetch(db))
        full = best_of(lambda: load(p))
        print(f"{p.name:<45} {rows:>8,} {floor:>8.3f} {full:>8.3f} {full / floor:>10.2f}")
        if tmp is not None:
            Path(tmp.name).unlink()
    others = [SHARED / n for n in ("perlmutter-cloverleaf-cuda.sqlite", "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")]
    if not argv:
        for p in others:
            if p.exists():
                floor = best_of(lambda: raw_fetch(p))
                full = best_of(lambda: load(p))
                print(f"{p.name:<45} {raw_fetch(p):>8,} {floor:>8.3f} {full:>8.3f} {full / floor:>10.2f}")
    print(f"(best of 5 runs each; python {sys.version.split()[0]})")


if __name__ == "__main__":
    main(sys.argv[1:])
