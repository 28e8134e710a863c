"""Make a big Nsight Systems export by tiling a real one in time.

Run: ``python tests/bench/gen_nsys_tiled.py [SOURCE.sqlite] [--tiles N] [-o OUT.sqlite]``
(default: the shared h200_llm_train_nvtx.sqlite, 45 tiles: 611,055 kernels and 1,606,680
runtime calls, into the bench folder ``$KVIEWER_BENCH_DIR`` or ``~/.cache/kviewer-bench``).

The source is copied first (inputs are never modified); each activity table (kernels, memcpy,
memset, CUDA runtime/driver calls, NVTX, OS runtime calls) is then repeated ``N - 1`` times
with its timestamps shifted by whole multiples of the source's span (plus a gap), and its
correlation ids shifted past the source's largest one, so the result is one long valid trace:
every launch still meets its kernel, nothing overlaps across tiles. Names (StringIds), GPUs,
processes and metadata are the source's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples")) / "nsys" / "h200_llm_train_nvtx.sqlite"
#: tables with a start/end time that are repeated per tile
TILED = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
         "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "NVTX_EVENTS", "OSRT_API")  # fmt: skip
GAP_NS = 1_000_000


def bench_dir() -> Path:
    d = Path(os.environ.get("KVIEWER_BENCH_DIR", Path.home() / ".cache" / "kviewer-bench"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def tile(source: Path, out: Path, tiles: int) -> dict[str, int]:
    """Write ``out``: ``source`` with its activity tables repeated ``tiles`` times in time.

    Returns the row count of each tiled table.
    """
    tmp = out.with_suffix(".partial")
    shutil.copyfile(source, tmp)
    tmp.chmod(0o644)
    con = sqlite3.connect(tmp)
    try:
        con.execute("pragma journal_mode = off")
        con.execute("pragma synchronous = off")
        present = {r[0] for r in con.execute("select name from sqlite_master where type = 'table'")}
        tables = [t for t in TILED if t in present]
        lo, hi = None, None
        for t in tables:
            a, b = con.execute(f"select min(start), max(coalesce(end, start)) from {t}").fetchone()
            if a is not None:
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        if lo is None or hi is None:
            raise SystemExit(f"{source}: no timed rows to tile")
        period = hi - lo + GAP_NS
        corr = 0
        for t in tables:
            cols = [r[1] for r in con.execute(f"pragma table_info({t})")]
            if "correlationId" in cols:
                corr = max(corr, con.execute(f"select coalesce(max(correlationId), 0) from {t}").fetchone()[0])
        corr_step = corr + 1
        counts: dict[str, int] = {}
        for t in tables:
            cols = [r[1] for r in con.execute(f"pragma table_info({t})")]
            n0 = con.execute(f"select max(rowid) from {t}").fetchone()[0] or 0
            for k in range(1, tiles):
                exprs = []
                for c in cols:
                    if c in ("start", "end", "timestamp"):
                        exprs.append(f"{c} + {k * period}")
                    elif c == "correlationId":
                        exprs.append(f"{c} + {k * corr_step}")
                    else:
                        exprs.append(c)
                con.execute(f"insert into {t} ({', '.join(cols)}) select {', '.join(exprs)} from {t} where rowid <= {n0}")
            counts[t] = con.execute(f"select count(*) from {t}").fetchone()[0]
        con.commit()
    finally:
        con.close()
    tmp.replace(out)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", nargs="?", type=Path, default=SOURCE)
    p.add_argument("--tiles", type=int, default=45)
    p.add_argument("-o", "--out", type=Path)
    args = p.parse_args(argv)
    if not args.source.exists():
        print(f"no export at {args.source}", file=sys.stderr)
        return 2
    out = args.out or bench_dir() / f"{args.source.stem}_x{args.tiles}.sqlite"
    counts = tile(args.source, out, args.tiles)
    print(out)
    for t, n in counts.items():
        print(f"  {t:<40} {n:>10,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
