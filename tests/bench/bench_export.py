"""Benchmark: pictures of views and the review report (``kviewer.ui.export``, ``kviewer.report``).

Run: ``QT_QPA_PLATFORM=offscreen python tests/bench/bench_export.py`` (the eager sample and, when
../shared/samples is present, the 25,680-kernel training trace).

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

from PySide6.QtWidgets import QWidget

from kviewer.core import Trace
from kviewer.io import load
from kviewer.report import build_report, render_html
from kviewer.ui import headless
from kviewer.ui.export import png_bytes, render_image, svg_bytes
from kviewer.ui.report_pictures import render_pictures

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "samples"
SIZE = (1600, 1000)


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_view(view: str, trace: Trace) -> None:
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
    paths = [REPO / "sample_traces" / "h200_llm_block_eager.pt.trace.json.gz"]
    big = SHARED / "torch" / "h200_llm_train_big.pt.trace.json.xz"
    if big.exists():
        paths.append(big)
    else:
        print(f"({big} not found: the big trace is skipped)", file=sys.stderr)
    for p in paths:
        bench(p)


if __name__ == "__main__":
    main()
