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
* UI (``--skip-ui`` to leave out), in a third, offscreen Qt process that reopens the trace from
  the cache: the desktop app's own timeline and kernel table, driven as
  ``tests/bench/bench_ui_timeline.py`` drives them (``TraceTracks.build``, ``TimelineView``
  rendered into a 1600x900 image at a new view range every frame, ``KernelTableModel.sort``),
  with the same-run baselines of that benchmark: an empty frame, and ``np.argsort`` of the
  duration column.

Requirements: peak RSS <= 3 GB for the load, a timeline frame <= 33 ms, the kernel table sorted
in <= 2 s. Exit status 1 when a measured requirement fails.
"""

from __future__ import annotations

import argparse
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
    "warnings": trace.meta.warning_texts(),
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


UI_CHILD = r"""
import json, os, statistics, sys, time
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
import numpy as np
sys.path.insert(0, sys.argv[3])
from tests.bench.bench_ui_timeline import median_ms
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPainter
from PySide6.QtWidgets import QApplication
from kviewer.io import load
from kviewer.ui.kernel_table import KernelTableModel
from kviewer.ui.timeline import TimelineView
from kviewer.session.tracks import TraceTracks
from kviewer.ui.viewstate import ViewState

app = QApplication.instance() or QApplication(sys.argv[:1])
t = time.perf_counter(); trace = load(sys.argv[1]); t_load = time.perf_counter() - t
t = time.perf_counter(); tracks = TraceTracks.build(trace); t_tracks = time.perf_counter() - t
W, H = 1600, 900
img = QImage(W, H, QImage.Format.Format_ARGB32_Premultiplied)
def view():
    tl = TimelineView(ViewState()); tl.resize(W, H); tl.show(); app.processEvents(); return tl
def render(tl):
    img.fill(QColor("white")); p = QPainter(img); tl.canvas.render(p); p.end()
def at(tl, t0, width):
    def frame(i):
        shift = (i % 7) * width * 1e-4  # a new range every frame: no cached frame
        tl.set_range(t0 + shift, t0 + width + shift); render(tl)
    return frame
frames = int(sys.argv[2])
empty = view(); empty.set_range(0, 1e9)
def frame_empty(i):
    empty.set_range(float(i), 1e9 + i); render(empty)
tl = view(); tl.state.add_trace(tracks)
lo, hi = tl.state.span(); span = hi - lo
for fn in (frame_empty, at(tl, lo, span)):
    fn(0)
out = {"load_s": t_load, "tracks_s": t_tracks, "lanes": len(tracks.lanes), "kernels": len(trace.kernels), "cpu_slices": len(trace.cpu_slices)}
out["empty_ms"] = median_ms(frame_empty, frames)
out["full_ms"] = median_ms(at(tl, lo, span), frames)
out["mid_ms"] = median_ms(at(tl, lo + span * 0.4, span * 0.05), frames)
out["zoom_ms"] = median_ms(at(tl, lo + span * 0.5, 2e6), frames)
for g in (r.group for r in tl.rows if r.kind == "header" and r.group is not None):
    g.collapsed = False  # every thread and python stack expanded
tl.relayout()
out["expanded_rows"] = len(tl.rows)
out["full_expanded_ms"] = median_ms(at(tl, lo, span), frames)
model = KernelTableModel()
t = time.perf_counter(); model.set_traces([tracks]); out["table_s"] = time.perf_counter() - t
dur = trace.kernels["dur"].to_numpy()
out["argsort_ms"] = median_ms(lambda i: np.argsort(dur, kind="stable"), 5)
cols = [c.key for c in model.data_.columns]
orders = (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder)
out["sort_dur_ms"] = median_ms(lambda i: model.sort(cols.index("dur"), orders[i % 2]), 6)
out["sort_name_ms"] = median_ms(lambda i: model.sort(cols.index("short_name")), 5)
json.dump(out, sys.stdout)
"""


def ui_child(path: Path, env: dict[str, str], frames: int = 30) -> dict | None:
    """The UI measurements, or None when the desktop app's benchmark is not there."""
    if not (REPO / "tests" / "bench" / "bench_ui_timeline.py").exists():
        return None
    env = dict(env, QT_QPA_PLATFORM="offscreen")
    run = subprocess.run([sys.executable, "-c", UI_CHILD, str(path), str(frames), str(REPO)], check=True, env=env, capture_output=True, text=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


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
            ui = ui_child(out, env)
            if ui is None:
                print("UI: tests/bench/bench_ui_timeline.py is not there; skipped")
            else:
                print(f"UI ({ui['kernels']:,} kernels, {ui['cpu_slices']:,} CPU slices; trace from the cache {ui['load_s']:.1f} s, "
                      f"tracks + level of detail {ui['tracks_s']:.1f} s, {ui['lanes']} lanes, table columns {ui['table_s']:.2f} s)")
                print(f"  frame 1600x900, median: empty (baseline) {ui['empty_ms']:.2f} ms; full zoom-out {ui['full_ms']:.2f} ms; "
                      f"5 % of the span {ui['mid_ms']:.2f} ms; 2 ms {ui['zoom_ms']:.2f} ms; "
                      f"full zoom-out with every group expanded ({ui['expanded_rows']} rows) {ui['full_expanded_ms']:.2f} ms")
                worst = max(ui["full_ms"], ui["mid_ms"], ui["zoom_ms"], ui["full_expanded_ms"])
                ok &= worst <= LIMIT_FRAME_MS
                print(f"  {'PASS' if worst <= LIMIT_FRAME_MS else 'FAIL'} (limit: a frame <= {LIMIT_FRAME_MS} ms)")
                sort_s = max(ui["sort_dur_ms"], ui["sort_name_ms"]) / 1e3
                print(f"  kernel table sort: by duration {ui['sort_dur_ms']:.0f} ms, by name {ui['sort_name_ms']:.0f} ms "
                      f"(np.argsort of the durations, baseline: {ui['argsort_ms']:.0f} ms)")
                ok &= sort_s <= LIMIT_SORT_S
                print(f"  {'PASS' if sort_s <= LIMIT_SORT_S else 'FAIL'} (limit: a sort <= {LIMIT_SORT_S} s)")

    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
