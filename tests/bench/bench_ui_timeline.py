"""Benchmark: timeline frames and table sorting with a million kernel bars.

Run: ``QT_QPA_PLATFORM=offscreen python tests/bench/bench_ui_timeline.py [--tiles N]``

The trace is the bundled Nsight Systems export ``sample_traces/h200_llm_train_nvtx.sqlite.gz``
(13,579 kernels on stream 7 plus the side-stream memcpy and the memsets) tiled in time until it holds one million
kernels (74 copies end to end, each keeping the real gaps, names and launch shapes).

Figures, each the median over many frames, every frame at a *new* view range so the level-of-
detail work is redone (the frame cache never hits):

* baseline: the same 1600x900 timeline rendering an empty frame (no trace) in the same run;
* full zoom-out: the whole million-kernel span on screen;
* zoomed in: the busiest 2 ms of the trace (individual kernels, names drawn in the bars);
* mid zoom: 5 % of the span (dense merged regions and single bars mixed);
* table sort: ``KernelTableModel.sort`` on one million rows (by duration, by name) against
  ``np.argsort`` of the duration column, also measured in this run.

With ``--big``, also the real ``h200_llm_train_big`` PyTorch trace (25,680 kernels and ~470,000
CPU slices, every thread expanded) from ../shared/samples.

Targets (from the issue): a frame within 16 ms, a sort within 200 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_traces" / "h200_llm_train_nvtx.sqlite.gz"


def tiled_trace(tiles: int) -> Any:
    """The sample's kernels and memory ops repeated ``tiles`` times back to back in time."""
    import pandas as pd

    from kviewer.core import Trace, make_table
    from kviewer.io import load

    base = load(SAMPLE)
    span = base.span_ns()
    assert span is not None
    period = span[1] - span[0] + 1000

    def tile(df: pd.DataFrame, table: str) -> pd.DataFrame:
        n = len(df)
        reps = np.repeat(np.arange(tiles, dtype=np.int64), n)
        cols: dict[str, Any] = {}
        for col in df.columns:
            if col == "id":
                continue
            v = df[col]
            if isinstance(v.dtype, pd.CategoricalDtype):
                cols[col] = pd.Categorical.from_codes(np.tile(v.cat.codes.to_numpy(), tiles), categories=v.cat.categories)
            else:
                cols[col] = np.tile(v.to_numpy(), tiles)
        cols["start"] = cols["start"] + reps * period
        cols["end"] = cols["end"] + reps * period
        return make_table(table, n * tiles, cols)

    return Trace(base.meta, kernels=tile(base.kernels, "kernels"), gpu_ops=tile(base.gpu_ops, "gpu_ops"), devices=base.devices)


def median_ms(fn: Callable[[int], object], n: int) -> float:
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiles", type=int, default=74)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--big", action="store_true", help="also the real 153 MB torch trace from ../shared/samples")
    args = ap.parse_args()

    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    from kviewer.ui.kernel_table import KernelTableModel
    from kviewer.ui.timeline import TimelineView
    from kviewer.session.tracks import TraceTracks
    from kviewer.ui.viewstate import ViewState

    t0 = time.perf_counter()
    trace = tiled_trace(args.tiles)
    t_tile = time.perf_counter() - t0
    n = len(trace.kernels)
    t0 = time.perf_counter()
    tracks = TraceTracks.build(trace)
    t_build = time.perf_counter() - t0

    W, H = 1600, 900
    img = QImage(W, H, QImage.Format.Format_ARGB32_Premultiplied)

    def make_view() -> TimelineView:
        tl = TimelineView(ViewState())
        tl.resize(W, H)
        tl.show()
        app.processEvents()
        return tl

    def render(tl: TimelineView) -> None:
        img.fill(QColor("white"))
        p = QPainter(img)
        tl.canvas.render(p)
        p.end()

    empty = make_view()
    empty.set_range(0, 1e9)

    def frame_empty(i: int) -> None:
        empty.set_range(float(i), 1e9 + i)  # a new range each frame, as below
        render(empty)

    full = make_view()
    full.state.add_trace(tracks)
    lo, hi = full.state.span()
    span = hi - lo

    def at(tl: TimelineView, t0: float, width: float) -> Callable[[int], None]:
        def frame(i: int) -> None:
            shift = (i % 7) * width * 1e-4  # a different range every frame: no cached frame
            tl.set_range(t0 + shift, t0 + width + shift)
            render(tl)

        return frame

    for fn in (frame_empty, at(full, lo, span)):  # warm up (fonts, first allocations)
        fn(0)
    base = median_ms(frame_empty, args.frames)
    full_ms = median_ms(at(full, lo - span * 0.01, span * 1.02), args.frames)
    bars_full = full.item._frame.bars if full.item._frame is not None else 0
    # zoom where the kernels are densest (the trace has idle stretches between steps)
    starts = trace.kernels["start"].to_numpy()
    busiest = int(np.argmax(np.searchsorted(starts, starts + 2_000_000) - np.arange(n)))
    centre = float(starts[busiest] - tracks.offset_ns) + 1e6
    mid_ms = median_ms(at(full, centre - span * 0.025, span * 0.05), args.frames)
    bars_mid = full.item._frame.bars if full.item._frame is not None else 0
    zoom_ms = median_ms(at(full, centre - 1e6, 2e6), args.frames)
    bars_zoom = full.item._frame.bars if full.item._frame is not None else 0
    labels_zoom = len(full.item._frame.labels) if full.item._frame is not None else 0

    # table: sort a million rows with the model, against np.argsort of the column itself
    model = KernelTableModel()
    t0 = time.perf_counter()
    model.set_traces([tracks])
    t_model = time.perf_counter() - t0
    dur = trace.kernels["dur"].to_numpy()
    argsort_ms = median_ms(lambda i: np.argsort(dur, kind="stable"), 5)
    cols = [c.key for c in model.data_.columns]
    orders = (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder)
    sort_dur_ms = median_ms(lambda i: model.sort(cols.index("dur"), orders[i % 2]), 6)
    sort_name_ms = median_ms(lambda i: model.sort(cols.index("short_name")), 5)
    filter_ms = median_ms(lambda i: model.set_filter("dur > 10us" if i % 2 else "gemm"), 6)

    big_lines: list[str] = []
    big = REPO.parent / "shared" / "samples" / "torch" / "h200_llm_train_big.pt.trace.json.xz"
    if args.big and big.is_file():
        from kviewer.io import load

        t0 = time.perf_counter()
        real = load(big)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        real_tracks = TraceTracks.build(real)
        t_real = time.perf_counter() - t0
        tl = make_view()
        tl.state.add_trace(real_tracks)
        for g in (r.group for r in tl.rows if r.kind == "header" and r.group is not None):
            g.collapsed = False
        tl.relayout()
        rlo, rhi = tl.state.span()
        rspan = rhi - rlo
        r_full = median_ms(at(tl, rlo, rspan), args.frames)
        r_bars = tl.item._frame.bars if tl.item._frame is not None else 0
        r_zoom = median_ms(at(tl, rlo + rspan * 0.5, rspan * 0.002), args.frames)
        r_zbars = tl.item._frame.bars if tl.item._frame is not None else 0
        r_names = len(tl.item._frame.labels) if tl.item._frame is not None else 0
        big_lines = [
            f"real trace {big.name}: {len(real.kernels):,} kernels, {len(real.cpu_slices):,} CPU slices, "
            f"{len(real_tracks.lanes)} lanes all expanded (load {t_load:.1f} s, tracks + level of detail {t_real:.2f} s)",
            f"  full zoom-out              {r_full:7.2f} ms  ({r_full / base:5.1f}x baseline)  {r_bars:,} rects",
            f"  0.2 % of the span          {r_zoom:7.2f} ms  ({r_zoom / base:5.1f}x baseline)  {r_zbars:,} rects, {r_names} names",
        ]

    print(f"trace: {n:,} kernels, {len(trace.gpu_ops):,} memory ops, {len(tracks.lanes)} lanes "
          f"(tiling {t_tile:.2f} s, tracks + level of detail {t_build:.2f} s, table columns {t_model:.2f} s)")
    print(f"frame {W}x{H}, median of {args.frames}:")
    print(f"  empty frame (baseline)     {base:7.2f} ms")
    print(f"  full zoom-out              {full_ms:7.2f} ms  ({full_ms / base:5.1f}x baseline)  {bars_full:,} rects")
    print(f"  5 % of the span            {mid_ms:7.2f} ms  ({mid_ms / base:5.1f}x baseline)  {bars_mid:,} rects")
    print(f"  2 ms zoomed in             {zoom_ms:7.2f} ms  ({zoom_ms / base:5.1f}x baseline)  {bars_zoom:,} rects, {labels_zoom} names")
    print("table, 1,000,000-row sorts (median):")
    print(f"  np.argsort(dur) (baseline) {argsort_ms:7.1f} ms")
    print(f"  model.sort by duration     {sort_dur_ms:7.1f} ms  ({sort_dur_ms / argsort_ms:4.2f}x baseline)")
    print(f"  model.sort by kernel name  {sort_name_ms:7.1f} ms  ({sort_name_ms / argsort_ms:4.2f}x baseline)")
    print(f"  model filter (dur / name)  {filter_ms:7.1f} ms  ({filter_ms / argsort_ms:4.2f}x baseline)")
    for line in big_lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
