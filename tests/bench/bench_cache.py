"""Benchmark: reopening a big trace from the trace cache against loading it cold.

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_cache.py [TRACE] [--reps N]

Everything is measured in one run, in a fresh cache directory (a temporary folder, removed
afterwards), on the same file:

* cold: ``load(path, use_cache=False)`` in this process: detection, decompression, parsing and
  every table (the best of ``--reps``; the first load also pays one-off imports, so it is
  reported separately);
* store: what the first load with the cache on adds to a cold load (encoding, compressing and
  writing the columns: ``TraceCache.put``);
* hit: ``load(path)`` again (median and worst of ``--reps``), and the first hit in a *fresh*
  process after its imports (what reopening in a new session costs);
* end to end: ``kviewer info FILE`` as a subprocess with ``--no-cache`` and with the cache,
  Python start-up included (the same on both sides).

Requirement: a hit takes at most 0.3 s and at most 1/5 of the cold load. Exit status 1 when not.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples")) / "torch" / "h200_llm_train_big.pt.trace.json.xz"
LIMIT_S = 0.3
LIMIT_RATIO = 5.0

FRESH_HIT = r"""
import sys, time
from kviewer.io import load
from kviewer.io import cache
import sqlite_utils, zstandard  # the imports a hit needs, outside the timing like kviewer's own
t = time.perf_counter()
trace = load(sys.argv[1])
print(time.perf_counter() - t)
"""


def timed(fn):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("trace", nargs="?", type=Path, default=DEFAULT)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    if not args.trace.exists():
        print(f"no trace at {args.trace}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="kviewer-bench-cache-") as tmp:
        os.environ["KVIEWER_CACHE_DIR"] = tmp
        os.environ.pop("KVIEWER_NO_CACHE", None)
        from kviewer.io import cache, load

        first_cold, trace = timed(lambda: load(args.trace, use_cache=False))
        colds = [timed(lambda: load(args.trace, use_cache=False))[0] for _ in range(args.reps)]
        cold = min(colds)
        store_cache = cache.TraceCache(tmp)
        store, stored = timed(lambda: store_cache.put(args.trace, trace, cache.source_id(args.trace)))
        assert stored, "the trace was not stored"
        entry = cache.TraceCache(tmp).entries()[0]
        hits = [timed(lambda: load(args.trace))[0] for _ in range(max(args.reps, 5))]
        hit, worst = statistics.median(hits), max(hits)
        env = dict(os.environ)
        fresh = [float(subprocess.run([sys.executable, "-c", FRESH_HIT, str(args.trace)], capture_output=True, text=True, check=True, env=env).stdout) for _ in range(args.reps)]
        kviewer = [sys.executable, "-m", "kviewer", "info", str(args.trace), "-q"]
        e2e_cold = min(timed(lambda: subprocess.run([*kviewer, "--no-cache"], capture_output=True, check=True, env=env))[0] for _ in range(args.reps))
        e2e_hit = min(timed(lambda: subprocess.run(kviewer, capture_output=True, check=True, env=env))[0] for _ in range(args.reps))
        db_size = sum(f.stat().st_size for f in Path(tmp).iterdir())

    rows = sum(trace.sizes().values())
    print(f"trace: {args.trace.name} ({args.trace.stat().st_size / 1e6:.1f} MB on disk, {rows:,} rows in all tables)")
    print(f"cold load (in-process, best of {args.reps}):      {cold:.3f} s   (first, with one-off imports: {first_cold:.3f} s)")
    print(f"storing it in the cache (first load adds): {store:.3f} s")
    print(f"reopen from the cache (median of {len(hits)}):     {hit:.3f} s   (worst {worst:.3f} s)")
    print(f"first reopen in a fresh process:           {statistics.median(fresh):.3f} s")
    print(f"cold / hit:                                {cold / hit:.1f}x")
    print(f"cache: {entry['nbytes'] / 1e6:.1f} MB stored for this trace, database {db_size / 1e6:.1f} MB")
    print(f"end to end `kviewer info` (with Python start-up): --no-cache {e2e_cold:.2f} s, cached {e2e_hit:.2f} s")
    ok = max(hit, statistics.median(fresh)) <= LIMIT_S and cold / hit >= LIMIT_RATIO
    print("PASS" if ok else "FAIL", f"(limits: hit <= {LIMIT_S} s and cold/hit >= {LIMIT_RATIO}x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
