"""Benchmark: pictures of views and the review report (``kviewer.ui.export``, ``kviewer.report``),
and with ``--db`` the SQLite export and SQL queries (``kviewer export``, ``kviewer sql``).

Run: ``QT_QPA_PLATFORM=offscreen python tests/bench/bench_export.py`` (the eager sample and, when
../shared/samples is present, the 25,680-kernel training trace).

``python tests/bench/bench_export.py --db [FILE ...]`` (default: the 153 MB Kineto trace
h200_llm_train_big and, when it is there, the 611k-kernel nsys export that
``tests/bench/gen_nsys_tiled.py`` writes): every command a process, as a user runs it, alternating,
best of ``--repeat``, wall and CPU (children's user+system), each as a ratio to ``kviewer summary``
measured in the same run in the same cache regime:

* ``--no-cache``: ``summary --no-cache`` against ``export --no-cache`` (analyses computed) and
  ``sql --no-cache "select count(*) from kernels"`` (in memory, only the kernels table);
* cache on, warm (the trace cache filled once before): ``summary`` against a first ``export`` (the
  database ``kviewer sql`` keeps removed before each sample: built, with the speed of light and
  fusion candidates from the analysis cache, then copied), a second ``export`` (that database
  copied), ``export --no-analysis``, a first ``sql`` (its cached database removed before each sample: the kernels
  table built and stored: its key columns alone), a second ``sql`` (the cached database opened; no
  trace loaded) and a wider ``sql`` after the count (``select name, sum(dur_ns) ... group by
  name``: the kernels table written again with the two columns it lacked).

Baselines, measured in the same run:

* pictures: ``QWidget.grab()`` of the same built view encoded as PNG, the cheapest PNG Qt makes of
  a widget (a 1x copy of its backing store); ``render_image`` + PNG at 1x and 2x and ``svg_bytes``
  are given as ratios to it;
* views and the report: loading the trace (``kviewer.io.load``, cache off), since a screenshot or a
  report always starts with one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["KVIEWER_NO_CACHE"] = "1"

if "--db" not in sys.argv:  # the pictures need Qt; the database benchmark does not
    from PySide6.QtWidgets import QWidget

    from kviewer.core import Trace
    from kviewer.io import load
    from kviewer.report import build_report, render_html
    from kviewer.ui import headless
    from kviewer.ui.export import png_bytes, render_image, svg_bytes
    from kviewer.ui.report_pictures import render_pictures

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples"))
SIZE = (1600, 1000)


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_view(view: str, trace: "Trace") -> None:
    t_build, built = timed(lambda: headless.build_view(view, [trace], SIZE), repeat=1)
    w = cast(QWidget, built)
    t_grab, _ = timed(lambda: png_bytes(w.grab().toImage()))
    t1, _ = timed(lambda: png_bytes(render_image(w, 1.0)))
    t2, _ = timed(lambda: png_bytes(render_image(w, 2.0)))
    ts, svg = timed(lambda: svg_bytes(w))
    print(
        f"{view:<10} {t_build:7.2f}s {t_grab * 1e3:7.0f}ms {t1 * 1e3:6.0f}ms ({t1 / t_grab:4.1f}x) {t2 * 1e3:6.0f}ms ({t2 / t_grab:4.1f}x)"
        f" {ts * 1e3:6.0f}ms ({ts / t_grab:4.1f}x, {len(cast(bytes, svg)) / 1e3:,.0f} kB)"
    )
    w.hide()
    w.deleteLater()


def bench(path: Path) -> None:
    t_load, trace = timed(lambda: load(path), repeat=1)
    print(f"\n{path.name}: {len(trace.kernels):,} kernels, {len(trace.cpu_slices):,} host slices; load {t_load:.2f} s")  # type: ignore[attr-defined]
    headless.application()
    print(f"{'view':<10} {'build':>8} {'grab+png':>9} {'png 1x':>14} {'png 2x':>14} {'svg':>16}")
    for view in ("window", "timeline", "table", "roofline"):
        bench_view(view, trace)
    t_rep, rep = timed(lambda: build_report([trace], pictures=True), repeat=1)
    t_pic, pics = timed(lambda: render_pictures(rep), repeat=1)  # type: ignore[arg-type]
    t_html, doc = timed(lambda: render_html(rep, pics), repeat=1)  # type: ignore[arg-type]
    print(
        f"report: tables {t_rep:.2f} s ({t_rep / t_load:.2f}x load), pictures {t_pic:.2f} s ({t_pic / t_load:.2f}x load), "
        f"HTML {t_html * 1e3:.0f} ms, {len(doc) / 1e6:.2f} MB"  # type: ignore[arg-type]
    )


def main() -> None:
    if "--db" in sys.argv:
        bench_db(sys.argv[1:])
        return
    paths = [REPO / "sample_traces" / "h200_llm_block_eager.pt.trace.json.gz"]
    big = SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz"
    if big.exists():
        paths.append(big)
    else:
        print(f"({big} not found: the big trace is skipped)", file=sys.stderr)
    for p in paths:
        bench(p)


# ---------------------------------------------------------------------------------------------
# kviewer export and kviewer sql


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one command run as a process (CPU: its user + system time)."""
    import resource
    import subprocess

    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def bench_db(argv: list[str]) -> None:
    import argparse
    import shutil
    import tempfile

    ap = argparse.ArgumentParser(prog="bench_export.py --db")
    ap.add_argument("--db", action="store_true")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated case names to leave out (e.g. 'export --no-cache')")
    args = ap.parse_args(argv)
    files = [Path(f) for f in args.files]
    if not files:
        big = SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz"
        tiled = Path(os.environ.get("KVIEWER_BENCH_DIR", Path.home() / ".cache" / "kviewer-bench")) / "h200_llm_train_nvtx_x45.sqlite"
        files = [f for f in (big, tiled) if f.exists()]
        if not files:
            print(f"neither {big} nor {tiled} found (tests/bench/gen_nsys_tiled.py makes the second)", file=sys.stderr)
            return
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    kv = [sys.executable, "-m", "kviewer"]
    query = "select count(*) from kernels"
    wider = "select name, sum(dur_ns) from kernels group by name"
    with open("/proc/loadavg") as f:
        print(f"load average before: {f.read().split()[:3]}; {os.cpu_count()} cores")
    for path in files:
        work = Path(tempfile.mkdtemp(prefix="kv-bench-db-"))
        env = dict(os.environ, KVIEWER_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(REPO))
        env.pop("KVIEWER_NO_CACHE", None)
        out = str(work / "out.sqlite")
        sql_dir = work / "cache" / "sql"
        f = str(path)
        cases: dict[str, tuple[list[str], Callable[[], object] | None]] = {
            "summary --no-cache": (kv + ["summary", f, "-q", "--no-cache", "--format", "csv"], None),
            "export --no-cache": (kv + ["export", f, "-o", out, "-q", "--no-cache"], None),
            "sql --no-cache": (kv + ["sql", f, query, "-q", "--no-cache"], None),
            "summary": (kv + ["summary", f, "-q", "--format", "csv"], None),
            # the database kviewer sql keeps removed: built (the analyses from their cache) and copied
            "export, first": (kv + ["export", f, "-o", out, "-q"], lambda: shutil.rmtree(sql_dir, ignore_errors=True)),
            # the database kept by the export before: copied
            "export": (kv + ["export", f, "-o", out, "-q"], None),
            "export --no-analysis": (kv + ["export", f, "-o", out, "-q", "--no-analysis"], None),
            "sql, first": (kv + ["sql", f, query, "-q"], lambda: shutil.rmtree(sql_dir, ignore_errors=True)),
            "sql, again": (kv + ["sql", f, query, "-q"], None),
            # after the count, a statement reading two more kernel columns: the table written again
            "sql, wider": (kv + ["sql", f, wider, "-q"], lambda: (shutil.rmtree(sql_dir, ignore_errors=True), _run(kv + ["sql", f, query, "-q"], env))),
        }
        cases = {k: v for k, v in cases.items() if k not in skip}
        # fill the trace cache, the analysis cache and the sql cache once (not measured)
        _run(kv + ["export", f, "-o", out, "-q"], env)
        _run(kv + ["sql", f, query, "-q"], env)
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(args.repeat):
            for name, (cmd, before) in cases.items():
                if before is not None:
                    before()
                samples[name].append(_run(cmd, env))
        size = os.path.getsize(out) / 1e6
        with open("/proc/loadavg") as fl:
            load_avg = fl.read().split()[:3]
        print(f"\n{path.name} ({path.stat().st_size / 1e6:.0f} MB; export {size:.0f} MB); best of {args.repeat}; load average after: {load_avg}")
        print(f"| command | wall | CPU | / summary (wall, CPU) |\n|---|---:|---:|---:|")
        for name, vals in samples.items():
            wall, cpu = min(v[0] for v in vals), min(v[1] for v in vals)
            base = "summary --no-cache" if "--no-cache" in name else "summary"
            bw, bc = (min(v[0] for v in samples[base]), min(v[1] for v in samples[base])) if samples.get(base) else (float("nan"), float("nan"))
            print(f"| `{name}` | {wall:.2f} s | {cpu:.2f} s | {wall / bw:.2f}x, {cpu / bc:.2f}x |")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
