"""Benchmark: a 10-million-event PyTorch trace — peak memory of the load, reopen from the cache,
and (when the desktop app's benchmark helpers exist) a timeline frame and a kernel-table sort.

Run as a script (pytest ignores tests/bench)::

    python tests/bench/bench_10m.py [--tile 20] [--src TRACE] [--skip-ui]

The trace is ``h200_llm_train_big`` (501k events) tiled ``--tile`` times in time by
``gen_large.make_tiled`` (20 x = 10.0 million events, about 2.4 GB of JSON), generated once into
``gen_large.bench_dir()`` (never the repository) and reused.

Each measurement runs in a fresh process so that its peak RSS (``ru_maxrss``) is its own:

* cold load, trace cache off: wall time, peak RSS, and which load phase (the loader's progress
  message) was running when the RSS peaked, sampled every 20 ms;
* the same process then stores the trace in a temporary cache; a second process reopens it
  from there (time and peak RSS);
* UI (``--skip-ui`` to leave out): ``tests/bench/bench_ui_*.py`` of the desktop app are asked for
  ``render_frame_ms(trace)`` and ``sort_kernels_s(trace)``; without them this part is skipped.

Requirements: peak RSS <= 3 GB for the load, a timeline frame <= 33 ms, the kernel table sorted
in <= 2 s. Exit status 1 when a measured requirement fails.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.bench.gen_large import DEFAULT_SRC, bench_dir, cached, make_tiled

LIMIT_RSS = 3 * 1000**3
LIMIT_FRAME_MS = 33.0
LIMIT_SORT_S = 2.0

CHILD = r"""
import json, os, resource, sys, threading, time
path, mode, out = sys.argv[1], sys.argv[2], sys.argv[3]
page = os.sysconf("SC_PAGE_SIZE")
state = {"phase": "start", "peak": 0, "peak_phase": "start", "samples": []}
t0 = time.perf_counter()

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page

def sampler():
    while not state.get("done"):
        r = rss()
        if r > state["peak"]:
            state["peak"], state["peak_phase"] = r, state["phase"]
        state["samples"].append((round(time.perf_counter() - t0, 2), r, state["phase"]))
        time.sleep(0.02)

def progress(fraction, message):
    state["phase"] = f"{message} ({fraction:.0%})"

from kviewer.io import load
threading.Thread(target=sampler, daemon=True).start()
t = time.perf_counter()
trace = load(path, progress=progress, use_cache=(mode != "cold"))
seconds = time.perf_counter() - t
state["phase"] = "loaded"
rss_loaded = rss()
time.sleep(0.05)
result = {
    "seconds": seconds,
    "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "peak_sampled": state["peak"],
    "peak_phase": state["peak_phase"],
    "rss_loaded": rss_loaded,
    "sizes": trace.sizes(),
    "table_bytes": {n: int(trace.table(n).memory_usage(deep=True).sum()) for n in trace.sizes()},
    "warnings": trace.meta.warnings,
}
# a coarse RSS profile: the largest sample of each phase
by_phase = {}
for _, r, ph in state["samples"]:
    key = ph.split(" (")[0]
    by_phase[key] = max(by_phase.get(key, 0), r)
result["rss_by_phase"] = by_phase
if mode == "cold" and os.environ.get("KVIEWER_CACHE_DIR"):
    from kviewer.io import cache
    t = time.perf_counter()
    store = cache.TraceCache(os.environ["KVIEWER_CACHE_DIR"])
    result["stored"] = store.put(path, trace, cache.source_id(path))
    result["store_seconds"] = time.perf_counter() - t
    result["cache_bytes"] = sum(e["nbytes"] for e in store.entries())
state["done"] = True
with open(out, "w") as f:
    json.dump(result, f)
"""


def child(path: Path, mode: str, env: dict[str, str]) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        subprocess.run([sys.executable, "-c", CHILD, str(path), mode, out.name], check=True, env=env)
        return json.load(open(out.name))


def gb(n: float) -> str:
    return f"{n / 1000**3:.2f} GB"


def gb2(n: float) -> str:
    return f"{n / 1000**3:.2f} GB = {n / 1024**3:.2f} GiB"


def ui_functions() -> tuple[object | None, object | None]:
    """``render_frame_ms`` and ``sort_kernels_s`` from the desktop app's benchmarks, if present."""
    render = sort = None
    for f in sorted((REPO / "tests" / "bench").glob("bench_ui_*.py")):
        mod = importlib.import_module(f"tests.bench.{f.stem}")
        render = render or getattr(mod, "render_frame_ms", None)
        sort = sort or getattr(mod, "sort_kernels_s", None)
    return render, sort


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=DEFAULT_SRC)
    p.add_argument("--tile", type=int, default=20)
    p.add_argument("--skip-ui", action="store_true")
    args = p.parse_args(argv)
    out = bench_dir() / f"{args.src.name.split('.')[0]}_x{args.tile}.pt.trace.json"
    t = time.perf_counter()
    built = cached(out, {"src": str(args.src), "tile": args.tile, "version": 1}, lambda: make_tiled(args.src, out, args.tile))
    if built is not None:
        print(f"generated {built[1]:,} events in {time.perf_counter() - t:.0f} s")
    print(f"trace: {out} ({out.stat().st_size / 1e9:.2f} GB of JSON)")

    ok = True
    with tempfile.TemporaryDirectory(prefix="kviewer-bench-10m-") as tmp:
        env = dict(os.environ, KVIEWER_CACHE_DIR=tmp)
        env.pop("KVIEWER_NO_CACHE", None)
        cold = child(out, "cold", env)
        events = sum(cold["sizes"][n] for n in ("kernels", "gpu_ops", "cpu_slices"))
        print(f"cold load: {cold['seconds']:.1f} s, peak RSS {gb2(cold['maxrss'])} (sampled peak during '{cold['peak_phase']}'), "
              f"RSS after the load {gb(cold['rss_loaded'])}")
        print(f"  tables: {events:,} rows in kernels + gpu_ops + cpu_slices; in memory " + ", ".join(f"{n} {gb(b)}" for n, b in cold["table_bytes"].items() if b > 1e6))
        print("  peak RSS by phase: " + "; ".join(f"{ph}: {gb(r)}" for ph, r in cold["rss_by_phase"].items()))
        ok &= cold["maxrss"] <= LIMIT_RSS
        print(f"  {'PASS' if cold['maxrss'] <= LIMIT_RSS else 'FAIL'} (limit: peak RSS <= {gb(LIMIT_RSS)})")
        if cold.get("stored"):
            hit = child(out, "cache", env)
            print(f"stored in the cache in {cold['store_seconds']:.1f} s ({cold['cache_bytes'] / 1e6:.0f} MB); "
                  f"reopen from the cache: {hit['seconds']:.2f} s, peak RSS {gb(hit['maxrss'])} ({cold['seconds'] / hit['seconds']:.0f}x faster)")
        else:
            print("the trace was not stored in the cache (over the bound, or a partial load)")

    if not args.skip_ui:
        render, sort = ui_functions()
        if render is None and sort is None:
            print("UI: no tests/bench/bench_ui_*.py with render_frame_ms / sort_kernels_s yet; skipped")
        else:
            os.environ["KVIEWER_NO_CACHE"] = "1"
            from kviewer.io import load

            trace = load(out, use_cache=False)
            if render is not None:
                ms = float(render(trace))  # type: ignore[operator]
                ok &= ms <= LIMIT_FRAME_MS
                print(f"timeline frame: {ms:.1f} ms  {'PASS' if ms <= LIMIT_FRAME_MS else 'FAIL'} (limit {LIMIT_FRAME_MS} ms)")
            if sort is not None:
                s = float(sort(trace))  # type: ignore[operator]
                ok &= s <= LIMIT_SORT_S
                print(f"kernel table sort: {s:.2f} s  {'PASS' if s <= LIMIT_SORT_S else 'FAIL'} (limit {LIMIT_SORT_S} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
