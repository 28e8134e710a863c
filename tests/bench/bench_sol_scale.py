"""Benchmark: `kviewer sol`, `kviewer stats` and the trace cache on a big Nsight Systems export,
each against a baseline measured in the same run (issue #29).

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_sol_scale.py [SOURCE.sqlite] [--tiles 45] [--reps 2] [--tree DIR] [--db FILE]

The export is the shared ``h200_llm_train_nvtx.sqlite`` tiled 45 times in time
(:mod:`gen_nsys_tiled`: 611,055 kernels, 1,606,680 CUDA API calls), built in a temporary folder
(or ``--db``: an export made before). Every command runs as a process from a neutral working
folder (``python -m kviewer`` puts the current folder first on ``sys.path``) with
``PYTHONPATH`` set to the checkout measured; ``--tree DIR`` runs another checkout (e.g. the code
before the change) beside it. Figures: wall and CPU (user + system) seconds, best of ``--reps``,
and the peak RSS (``ru_maxrss`` of the child, from ``wait4``: this script imports nothing
heavy, so what a child inherits from it is far below what it measures).

Baselines and targets (issue #29):

* ``summary --no-cache`` (the kernels alone): ``sol`` cold <= 3x, warm <= 1.5x, peak RSS <= 2x;
  ``stats -r cuda_gpu_kern_sum`` <= 1.2x;
* SQLite's shell writing the same rows as CSV (``sqlite3 -csv``: kernels, memcpy, memset joined
  with their names, in start order): ``stats -r cuda_gpu_trace -f csv`` <= 1.5x;
* the trace cache: a first ``summary`` with the cache on <= 1.1x ``--no-cache``, a warm one
  <= 0.5x (or the cache not used where SQLite serves the part faster: the choice made here).

Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gen_nsys_tiled import SOURCE, tile  # noqa: E402  (tests/bench is sys.path[0] when run as a script)

REPO = Path(__file__).resolve().parents[2]
GPU_TRACE_SQL = """
select k.start, k.end - k.start, k.correlationId, k.gridX, k.gridY, k.gridZ, k.blockX, k.blockY, k.blockZ, k.registersPerThread,
 round(k.staticSharedMemory / 1e6, 3), round(k.dynamicSharedMemory / 1e6, 3), null, null, null, null, k.deviceId, k.contextId,
 null, k.streamId, s.value
 from CUPTI_ACTIVITY_KIND_KERNEL as k join StringIds as s on s.id = k.demangledName
union all
select m.start, m.end - m.start, m.correlationId, null, null, null, null, null, null, null, null, null, round(m.bytes / 1e6, 3),
 round(m.bytes * (1000000000 / (m.end - m.start)) / 1e6, 3), m.srcKind, m.dstKind, m.deviceId, m.contextId, null, m.streamId,
 'memcpy'
 from CUPTI_ACTIVITY_KIND_MEMCPY as m
union all
select m.start, m.end - m.start, m.correlationId, null, null, null, null, null, null, null, null, null, round(m.bytes / 1e6, 3),
 round(m.bytes * (1000000000 / (m.end - m.start)) / 1e6, 3), m.memKind, null, m.deviceId, m.contextId, null, m.streamId,
 '[CUDA memset]'
 from CUPTI_ACTIVITY_KIND_MEMSET as m
order by 1;
"""


def run(cmd: list[str], env: dict[str, str], cwd: str, stdin: str | None = None) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS (MB) of one child process, its output thrown away."""
    t = time.perf_counter()
    with open(os.devnull, "w") as null:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=null, stdin=subprocess.PIPE if stdin else None, text=True)
        if stdin:
            assert proc.stdin is not None
            proc.stdin.write(stdin)
            proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit status {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", nargs="?", type=Path, default=SOURCE)
    p.add_argument("--tiles", type=int, default=45)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--db", type=Path, help="an export made before (gen_nsys_tiled.py -o FILE), used as it is")
    p.add_argument("--tree", type=Path, action="append", default=[], help="another checkout to run alongside (repeatable)")
    args = p.parse_args(argv)
    shell = shutil.which("sqlite3")
    with tempfile.TemporaryDirectory(prefix="kviewer-bench-sol-") as tmp:
        db = args.db
        if db is None:
            if not args.source.exists():
                print(f"no export at {args.source} (set KVIEWER_SAMPLES)", file=sys.stderr)
                return 2
            db = Path(tmp) / f"{args.source.stem}_x{args.tiles}.sqlite"
            counts = tile(args.source, db, args.tiles)
            print(f"{db.name}: {db.stat().st_size / 1e6:.0f} MB, " + ", ".join(f"{t} {n:,}" for t, n in counts.items()))
        print(f"load average before: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} cores; python {sys.version.split()[0]}")
        trees = [("this checkout", REPO)] + [(str(t), t) for t in args.tree]
        f = str(db)
        py = sys.executable
        kv = [py, "-m", "kviewer"]
        commands = {
            "summary --no-cache": kv + ["summary", "--no-cache", "-q", f, "--format", "csv"],
            "sol --no-cache -f csv": kv + ["sol", "--no-cache", "-q", f, "--format", "csv"],
            "sol --no-cache (table)": kv + ["sol", "--no-cache", "-q", f],
            "stats cuda_gpu_kern_sum": kv + ["stats", "--no-cache", "-q", f, "-r", "cuda_gpu_kern_sum", "-f", "csv"],
            "stats cuda_gpu_trace -f csv": kv + ["stats", "--no-cache", "-q", f, "-r", "cuda_gpu_trace", "-f", "csv"],
            "summary, cache on, first": kv + ["summary", "-q", f, "--format", "csv"],
            "summary, cache on, warm": kv + ["summary", "-q", f, "--format", "csv"],
            "sol, cache on, first": kv + ["sol", "-q", f, "--format", "csv"],
            "sol, cache on, warm": kv + ["sol", "-q", f, "--format", "csv"],
        }
        results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
        floor: list[tuple[float, float, float]] = []
        for _ in range(args.reps):
            if shell:
                floor.append(run([shell, "-readonly", "-csv", f], dict(os.environ), tmp, GPU_TRACE_SQL))
            for label, tree in trees:
                cache = Path(tmp) / "cache" / label.replace("/", "_")
                shutil.rmtree(cache, ignore_errors=True)
                env = {**os.environ, "PYTHONPATH": str(tree), "KVIEWER_CACHE_DIR": str(cache)}
                env.pop("KVIEWER_NO_CACHE", None)
                for name, cmd in commands.items():
                    results.setdefault((label, name), []).append(run(cmd, env, tmp))
        print(f"load average after: {open('/proc/loadavg').read().strip()}")
        ok = True
        for label, _ in trees:
            def best(name: str) -> tuple[float, float, float]:
                s = results[(label, name)]
                return min(x[0] for x in s), min(x[1] for x in s), min(x[2] for x in s)

            bw, bc, bm = best("summary --no-cache")
            print(f"\n{label} (best of {args.reps})            wall s   CPU s   peak MB   / summary --no-cache (wall, CPU, RSS)")
            for name in commands:
                w, c, m = best(name)
                print(f"  {name:<32} {w:>7.2f} {c:>7.2f} {m:>8.0f}   {w / bw:>5.2f}x {c / bc:>5.2f}x {m / bm:>5.2f}x")
            if floor:
                fw, fc, fm = min(x[0] for x in floor), min(x[1] for x in floor), min(x[2] for x in floor)
                w, c, _ = best("stats cuda_gpu_trace -f csv")
                print(f"  {'sqlite3 -csv (GPU trace rows)':<32} {fw:>7.2f} {fc:>7.2f} {fm:>8.0f}   "
                      f"cuda_gpu_trace / it: {w / fw:.2f}x wall, {c / fc:.2f}x CPU")
            if label == "this checkout":
                sol_c = best("sol --no-cache -f csv")
                ok &= sol_c[1] / bc <= 3.0 and sol_c[2] / bm <= 2.0
                ok &= best("sol, cache on, warm")[1] / bc <= 1.5
                ok &= best("stats cuda_gpu_kern_sum")[1] / bc <= 1.2
                ok &= best("summary, cache on, first")[1] / bc <= 1.1
                if floor:
                    ok &= best("stats cuda_gpu_trace -f csv")[1] / min(x[1] for x in floor) <= 1.5
    print("\ntargets (CPU ratios: sol <= 3x and RSS <= 2x, warm <= 1.5x; kern_sum <= 1.2x; cache first <= 1.1x; "
          "gpu_trace <= 1.5x sqlite3 -csv):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
