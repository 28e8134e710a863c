"""Benchmark: an 8-rank folder loaded in parallel processes against its ranks one after another.

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_ranks.py [--ranks 8] [--tile 2] [--reps 3] [--src TRACE]

The folder is generated once by ``gen_large.make_ranks`` from a real Kineto trace (by default
``h200_llm_train_big`` tiled twice in time: 1.0M events and ~250 MB of JSON per rank, about
3 s of parsing each) into
``gen_large.bench_dir()`` (``$KVIEWER_BENCH_DIR``, else ``~/.cache/kviewer-bench``; never the
repository) and reused while its parameters do not change. The trace cache is off throughout.

* baseline: ``load(file)`` of every rank file in this process, one after another (no merge);
* one process: ``load(folder)`` with ``KVIEWER_RANK_WORKERS=1`` (the same plus the merge);
* parallel: ``load(folder)`` with the default worker count (the CPU count): this process and
  CPU count - 1 spawned processes, all taking files from one queue.

Sides alternate, ``--reps`` times each; the best of each is compared. Requirement: parallel
<= 0.7x baseline. Exit status 1 when not.

The machine is shared, so the run also measures how many cores it really got: a pure-Python
spin of fixed length in one process, then in two processes at once, just before the loads
(``effective cores`` = 2 x one / two; 2.0 on an idle 2-core machine, 1.0 when another job holds
a core, and then no parallel load can beat 0.7x).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.bench.gen_large import DEFAULT_SRC, bench_dir, cached, make_ranks

LIMIT = 0.7


def spin(n: int = 20_000_000) -> float:
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x ^= i
    return time.perf_counter() - t


def effective_cores(workers: int = 2) -> float:
    """2 x (one spin alone) / (two spins at once, in two processes)."""
    import concurrent.futures as cf
    import multiprocessing

    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as ex:
        list(ex.map(abs, range(workers)))  # start the workers
        one = ex.submit(spin).result()
        t = time.perf_counter()
        list(ex.map(spin, [20_000_000] * workers))
        together = time.perf_counter() - t
    return workers * one / together


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--tile", type=int, default=2, help="copies of the source per rank in time (2: ~3 s of parsing per rank)")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    os.environ["KVIEWER_NO_CACHE"] = "1"

    from kviewer.io import load, ranks

    folder = bench_dir() / f"ranks{args.ranks}_{args.src.name.split('.')[0]}_x{args.tile}"
    params = {"src": str(args.src), "ranks": args.ranks, "tile": args.tile, "version": 1}
    t0 = time.perf_counter()
    built = cached(folder, params, lambda: make_ranks(args.src, folder, args.ranks, args.tile))
    if built is not None:
        print(f"generated {args.ranks} rank files in {time.perf_counter() - t0:.1f} s")
    files = sorted(folder.glob("rank-*.pt.trace.json"), key=lambda f: int(f.name.split("-")[1].split(".")[0]))
    size = sum(f.stat().st_size for f in files)
    print(f"folder: {folder} ({len(files)} files, {size / 1e6:.0f} MB of JSON)")

    # where the parallel load spends its time
    phases: dict[str, float] = {}
    real_load_all, real_merge = ranks._load_all, ranks.merge_ranks

    def load_all(*a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        out = real_load_all(*a, **k)
        phases["parse"] = time.perf_counter() - t
        return out

    def merge(*a, **k):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        out = real_merge(*a, **k)
        phases["merge"] = time.perf_counter() - t
        return out

    ranks._load_all, ranks.merge_ranks = load_all, merge  # type: ignore[assignment]

    cores: list[float] = []
    seq, one, par = [], [], []
    all_phases: list[dict[str, float]] = []
    events = 0
    for _ in range(args.reps):
        t = time.perf_counter()
        for f in files:
            rows = sum(load(f).sizes().values())
            events += rows if not seq else 0
        seq.append(time.perf_counter() - t)
        os.environ[ranks.ENV_WORKERS] = "1"
        t = time.perf_counter()
        load(folder)
        one.append(time.perf_counter() - t)
        os.environ.pop(ranks.ENV_WORKERS)
        cores.append(effective_cores())  # just before the parallel load
        phases.clear()
        t = time.perf_counter()
        trace = load(folder)
        par.append(time.perf_counter() - t)
        all_phases.append(dict(phases))
    workers = ranks.worker_count(len(files))
    b, o, q = min(seq), min(one), min(par)
    par_phases = all_phases[par.index(q)]
    print(f"merged trace: ranks {trace.meta.ranks}, {sum(trace.sizes().values()):,} rows ({events:,} rows over the rank files)")
    print(f"baseline, ranks one after another:  {b:.2f} s  ({b / len(files):.2f} s per rank)")
    print(f"folder in one process (+ merge):     {o:.2f} s  ({o / b:.2f}x)")
    print(f"folder in {workers} processes (parallel):   {q:.2f} s  ({q / b:.2f}x)  " + ", ".join(f"{k} {v:.2f} s" for k, v in par_phases.items()))
    print(f"all runs (s): baseline {[f'{x:.2f}' for x in seq]}, one process {[f'{x:.2f}' for x in one]}, parallel {[f'{x:.2f}' for x in par]}")
    print(f"effective cores just before each parallel load: {', '.join(f'{c:.2f}' for c in cores)} (of {os.cpu_count()})")
    print(f"parsing in {workers} processes: {par_phases['parse'] * workers / len(files):.2f} s per rank and process "
          f"(one after another in this process: {b / len(files):.2f} s)")
    ok = q / b <= LIMIT
    print("PASS" if ok else "FAIL", f"(limit: parallel <= {LIMIT}x baseline)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
