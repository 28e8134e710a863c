"""A roofline chart: the GPU's roofs per precision and every kernel as a point (pyqtgraph, log-log).

x is arithmetic intensity (FLOP per DRAM byte), y achieved FLOP/s (FLOPs / measured duration).
Each precision's roof is ``min(peak, bandwidth x intensity)``; a kernel's distance below the roof
of its precision is its distance from the speed of light. Points are coloured by what bounds them
(memory: orange, compute: green, unknown: blue). Filled circles are measured (a counter report's
FLOPs and bytes), pale circles modelled (from the launching op), filled squares measured on another
launch of the same kernel and inherited; the legend names the styles shown.

Usage::

    view = RooflineWidget()
    view.set_data(speed_of_light(trace), spec)       # spec: the DeviceSpec of the GPU
    view.selectionChanged.connect(lambda ids: ...)   # kernel ids the user clicked (out)
    view.set_selection([12, 13])                     # highlight kernels selected elsewhere (in)
"""

from __future__ import annotations

import html
from typing import Any, Sequence

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontMetricsF, QResizeEvent
from PySide6.QtWidgets import QSizePolicy, QVBoxLayout, QWidget

from kviewer.analysis.devices import DeviceSpec

BOUND_COLOURS = {"memory": (230, 120, 30), "compute": (60, 150, 70), "unknown": (70, 110, 200)}
#: roofs drawn, with the pipe their rate belongs to and a line colour
ROOFS: tuple[tuple[str, str, str, tuple[int, int, int]], ...] = (
    ("FP64", "fp64", "vector", (120, 120, 120)),
    ("FP32", "fp32", "vector", (40, 40, 40)),
    ("TF32 tensor", "tf32", "tensor", (150, 80, 160)),
    ("FP16 tensor", "fp16", "tensor", (20, 140, 160)),
    ("BF16 tensor", "bf16", "tensor", (30, 90, 180)),
    ("FP8 tensor", "fp8", "tensor", (200, 40, 60)),
)
X_RANGE = (1e-2, 1e4)


def roof_lines(spec: DeviceSpec) -> list[tuple[str, float, tuple[int, int, int]]]:
    """(label, peak FLOP/s, colour) of each roof the GPU has. A roof the GPU lacks (no BF16 on a
    V100) is not drawn as another's; tensor roofs of one peak are one line named for all of them
    ("FP16/BF16 tensor" where the two rates are equal), so a line never names only one of them."""
    out: list[tuple[list[str], float, tuple[int, int, int], str]] = []
    for label, precision, pipe, rgb in ROOFS:
        peak, field = spec.peak_flops(precision, pipe)
        if not peak > 0 or not field.startswith(precision):
            continue
        same = next((o for o in out if o[1] == peak and o[3] == pipe), None)
        if same is not None:
            same[0].append(label.split()[0])
            continue
        out.append(([label.split()[0]], peak, rgb, pipe))
    return [("/".join(names) + (" tensor" if pipe == "tensor" else ""), peak, rgb) for names, peak, rgb, pipe in out]


def counter_marks(kernels: pd.DataFrame) -> np.ndarray | None:
    """The kernels' ``counters`` column for :meth:`RooflineWidget.set_data` (None when no counter
    report was attached)."""
    if "counters" not in kernels.columns:
        return None
    marks = kernels["counters"].astype(str).to_numpy()
    return marks if (marks != "").any() else None


class RooflineWidget(QWidget):
    """Roofline of one GPU with the kernels of a SOL frame as points.

    Signals
    -------
    selectionChanged(list)
        kernel ids (``kernels.id``) of the points under the user's click (overlapping points are
        all returned). Not emitted for :meth:`set_selection`.
    """

    selectionChanged = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot_widget = pg.PlotWidget(background="w")
        self.plot = self.plot_widget.getPlotItem()
        self.plot.setLogMode(x=True, y=True)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        self.plot.setLabel("bottom", "arithmetic intensity", units="FLOP/byte")
        # intensities read as plain FLOP per byte (0.1, 1, 10), not as "0.0001 kFLOP/byte"
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.plot.setLabel("left", "achieved", units="FLOP/s")
        # the legend beside the plot, not over it: inside the view box its dozen rows covered the
        # points (and the plot's own legend attribute still collects every named line)
        # below the intensity axis, in two columns: a dock is narrow and tall
        self.legend = pg.LegendItem(offset=None, verSpacing=-4, colCount=2)
        self.plot.legend = self.legend
        self.plot.layout.addItem(self.legend, 4, 0, 1, 3)
        self.legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)  # rows at their own height
        self.plot.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignLeft)
        # room on the right for the last tick label (10⁴ was cut off at the plot's edge)
        self.plot.setContentsMargins(0, 0, 14, 0)
        self.empty_text = pg.TextItem("", color=(90, 90, 90), anchor=(0.5, 0.5), fill=(255, 255, 255, 230))  # over the roofs
        self.empty_text.textItem.setTextWidth(260)  # wraps inside the plot; follows its width (_fit_empty_text)
        self.empty_text.setZValue(20)
        self.plot.addItem(self.empty_text, ignoreBounds=True)
        self.plot.getViewBox().sigResized.connect(self._fit_empty_text)
        self.empty_reason = ""
        """one line saying why no point is drawn ("" when some are)"""
        self._tip_rows: tuple[Any, ...] | None = None
        """what a point's hover text is written from (:meth:`point_tip`)"""
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot_widget)
        self.roofs: list[pg.PlotDataItem] = []
        self.points = pg.ScatterPlotItem(pxMode=True, hoverable=True, tip=self.point_tip)
        self.points.sigClicked.connect(self._clicked)
        self.highlight = pg.ScatterPlotItem(pxMode=True)
        # the selection ring must not take the clicks meant for the points under it
        self.highlight.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.highlight.setZValue(5)
        self.points.setZValue(10)
        self.plot.addItem(self.points)
        self.plot.addItem(self.highlight)
        self._ids = np.zeros(0, dtype=np.int64)
        self._xy = np.zeros((0, 2))
        self._selected: list[int] = []
        self.exceeding = 0
        """kernels of the last frame marked ``exceeds_peak`` (kept off the plot)"""
        self.off_roof = 0
        """kernels that would sit above their own roof (kept off the plot)"""
        self.style_items: list[pg.ScatterPlotItem] = []
        self.bound_items: list[pg.ScatterPlotItem] = []
        self._title: tuple[tuple[str, ...], float | None] = ((), 8.0)

    # -- title
    def set_title(self, lines: Sequence[str], point_size: float | None = 8.0) -> None:
        """Title lines above the plot (the first dark, the others grey; ``point_size`` None: the
        plot's default title size), each elided in the middle to the room beside the left axis,
        again on every resize. The title never sets the plot's minimum width: a long file name
        made the plot wider than a narrow dock, which then cut off the plot's right side (its
        last decade, the axis title)."""
        self._title = (tuple(lines), point_size)
        self._fit_title()

    def title_text(self) -> str:
        """The title as shown (elided), without markup."""
        label = self.plot.titleLabel
        return label.item.toPlainText() if label.isVisible() else ""

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_title()
        self._fit_intensity_label()
        self._fit_legend()

    def _fit_legend(self) -> None:
        """The legend in two columns where they fit, else in one: two columns of roof labels
        ("FP8 tensor 1,979.0 TFLOP/s") are about 450 px wide, and the plot's layout does not shrink
        below its legend, so a narrower dock cut off the right half of the whole plot."""
        labels = [label.boundingRect().width() for _sample, label in self.legend.items]
        if not labels:
            return
        column = max(labels) + 20.0 + 12.0  # label, sample, spacing
        cols = 2 if self.width() >= 2 * column + 24.0 else 1
        if cols != self.legend.columnCount:
            self.legend.setColumnCount(cols)
            # the view sized the plot before its legend narrowed (Qt held it at the old minimum): size it again
            view = self.plot_widget
            view.centralWidget.setGeometry(view.range)

    #: the intensity axis' title, longest first: the first that fits under the axis is shown
    INTENSITY_LABELS = ("arithmetic intensity", "intensity", "")

    def _fit_intensity_label(self) -> None:
        """The longest intensity axis title that fits under the axis: in a narrow dock the full
        "arithmetic intensity (FLOP/byte)" is wider than the axis and its end was cut off."""
        axis, left = self.plot.getAxis("bottom"), self.plot.getAxis("left")
        room = self.width() - max(left.width(), left.minimumWidth()) - 16.0
        metrics = QFontMetricsF(axis.label.font())
        text = self.INTENSITY_LABELS[-1]
        for text in self.INTENSITY_LABELS:
            if metrics.horizontalAdvance(f"{text} (FLOP/byte)" if text else "FLOP/byte") <= room:
                break
        if text != getattr(self, "_intensity_label", None):
            self._intensity_label = text
            if text:
                self.plot.setLabel("bottom", text, units="FLOP/byte")
            else:
                self.plot.setLabel("bottom", "FLOP/byte")

    def intensity_label(self) -> str:
        """The intensity axis' title as shown, without markup."""
        return str(self.plot.getAxis("bottom").label.toPlainText())

    def _fit_title(self) -> None:
        lines, size = self._title
        if not lines:
            return
        font = QFont(self.font())
        if size is not None:
            font.setPointSizeF(size)
        metrics = QFontMetricsF(font)
        # the title sits above the view box alone: the left axis and the right margin take the rest
        axis = self.plot.getAxis("left")
        room = max(40.0, self.width() - max(axis.width(), axis.minimumWidth(), 60.0) - 30.0)
        shown = [html.escape(metrics.elidedText(line, Qt.TextElideMode.ElideMiddle, room)) for line in lines]
        text = shown[0] + "".join(f"<br><span style='color:#555'>{line}</span>" for line in shown[1:])
        self.plot.setTitle(text, **({"size": f"{size:g}pt"} if size is not None else {}))

    # -- data in
    def set_data(self, sol: pd.DataFrame, spec: DeviceSpec | None, counters: Sequence[str] | np.ndarray | None = None) -> None:
        """Show the kernels of ``sol`` (a :func:`~kviewer.analysis.sol.speed_of_light` frame).

        ``counters`` (by kernel id, the kernels' ``counters`` column) marks the points whose
        measured values were inherited from another launch.
        """
        for item in self.roofs + self.style_items + self.bound_items:
            if item in self.roofs:
                self.plot.removeItem(item)
            self.legend.removeItem(item)
        self.roofs = []
        self.style_items = []
        self.bound_items = []
        if spec is not None:
            self._draw_roofs(spec)
            self.set_title([spec.name])  # callers with a longer title set theirs after this
        flops = sol["flops"].to_numpy(np.float64)
        nbytes = sol["bytes"].to_numpy(np.float64)
        dur = sol["dur"].to_numpy(np.float64)
        ok = (flops > 0) & (nbytes > 0) & (dur > 0)
        # only kernels whose speed of light is physical: one above its peak is a model or
        # counter error (counted in the warning, never drawn as an achievement), and no point
        # may sit above its own roof, min(peak of its precision, bandwidth x intensity)
        status = sol["sol_status"].astype(str).to_numpy() if "sol_status" in sol else np.full(len(sol), "ok", dtype=object)
        self.exceeding = int((status == "exceeds_peak").sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            roof = np.fmin(sol["peak_flops"].to_numpy(np.float64), sol["peak_bw"].to_numpy(np.float64) * flops / nbytes)
            above = ok & (flops / (dur * 1e-9) > roof * (1 + 1e-9))
        self.off_roof = int(above.sum())
        ok &= (status == "ok") & ~above
        x = flops[ok] / nbytes[ok]
        y = flops[ok] / (dur[ok] * 1e-9)
        self._ids = sol["id"].to_numpy(np.int64)[ok]
        self._xy = np.column_stack([np.log10(x), np.log10(y)]) if ok.any() else np.zeros((0, 2))
        bounds_all = sol["bound"].astype(str).to_numpy()
        bounds = bounds_all[ok]
        measured = (sol["flops_source"].astype(str).to_numpy()[ok] == "measured")
        # one pen and two brushes per bound, shared by every point (a pen per point made a
        # trace of 10k kernels take 0.4 s on the GUI thread)
        kinds = list(BOUND_COLOURS)
        code = np.full(len(bounds), kinds.index("unknown"), dtype=np.int64)
        for i, kind in enumerate(kinds):
            code[bounds == kind] = i
        pen_of = np.array([pg.mkPen(BOUND_COLOURS[k], width=1.5) for k in kinds], dtype=object)
        brush_of = np.array(
            [[pg.mkBrush(*BOUND_COLOURS[k], 60), pg.mkBrush(*BOUND_COLOURS[k], 220)] for k in kinds], dtype=object
        )
        pens = pen_of[code]
        brushes = brush_of[code, measured.astype(np.int64)]
        inherited = np.zeros(len(self._ids), dtype=bool)
        if counters is not None and len(self._ids):
            status = np.asarray(counters, dtype=object).astype(str)
            inside = self._ids < len(status)
            inherited[inside] = status[self._ids[inside]] == "inherited"
        inherited &= measured
        symbols = np.where(inherited, "s", "o").astype(object)
        # draw order: inherited squares, then modelled, then the profiled launches on top
        draw = np.argsort(np.where(inherited, 0, np.where(measured, 2, 1)), kind="stable")
        self._ids, self._xy = self._ids[draw], self._xy[draw]
        pens, brushes, symbols, measured, inherited = pens[draw], brushes[draw], symbols[draw], measured[draw], inherited[draw]
        # a readable tooltip per point: kernel, intensity, achieved rate, SOL %
        names = sol["short_name"].astype(str).to_numpy() if "short_name" in sol else sol["name"].astype(str).to_numpy()
        sol_pct = sol["sol_pct"].to_numpy(np.float64) if "sol_pct" in sol else np.full(len(sol), np.nan)
        # written when a point is hovered (25,680 f-strings took 0.2-0.3 s of the GUI thread here)
        self._tip_rows = (names, sol_pct, bounds_all, {int(i): r for r, i in enumerate(sol["id"].to_numpy(np.int64))},
                          {int(k): j for j, k in enumerate(self._ids.tolist())})
        # the scatter lives in the plot's log space: give it log10 coordinates
        self.points.setData(
            x=self._xy[:, 0], y=self._xy[:, 1], data=self._ids, size=9, pen=pens, brush=brushes, symbol=symbols
        )
        for shown, label, symbol, alpha in (
            ((measured & ~inherited).any(), "measured (counters)", "o", 220),
            (inherited.any(), "measured on another launch (inherited)", "s", 220),
            ((~measured).any(), "modelled (from the op)", "o", 60),
        ):
            if shown:
                item = pg.ScatterPlotItem(size=8, symbol=symbol, pen=pg.mkPen(90, 90, 90, width=1.5), brush=pg.mkBrush(90, 90, 90, alpha))
                self.legend.addItem(item, label)
                self.style_items.append(item)
        for kind in kinds:
            if (bounds == kind).any():
                item = pg.ScatterPlotItem(size=8, symbol="o", pen=pg.mkPen(BOUND_COLOURS[kind], width=1.5), brush=pg.mkBrush(*BOUND_COLOURS[kind], 220))
                self.legend.addItem(item, f"{kind}-bound" if kind != "unknown" else "bound unknown")
                self.bound_items.append(item)
        self._fit_legend()
        self.empty_reason = "" if ok.any() else self._why_empty(flops, nbytes, dur)
        self.empty_text.setText(self.empty_reason)
        self.empty_text.setVisible(bool(self.empty_reason))
        if self.empty_reason:
            top = self._top_roof(spec)
            self.plot.setXRange(np.log10(X_RANGE[0]), np.log10(X_RANGE[1]), padding=0)
            self.plot.setYRange(9.0, top + 0.3, padding=0)
            self.empty_text.setPos(0.5 * (np.log10(X_RANGE[0]) + np.log10(X_RANGE[1])), 0.5 * (9.0 + top))
        self.set_selection(self._selected)
        if ok.any():
            self.plot.setXRange(np.log10(X_RANGE[0]), np.log10(X_RANGE[1]), padding=0)
            lo = min(float(self._xy[:, 1].min()), 9.0)
            hi = max(float(self._xy[:, 1].max()), self._top_roof(spec))
            self.plot.setYRange(lo - 0.3, hi + 0.3, padding=0)

    def _fit_empty_text(self, *_: object) -> None:
        """Wrap the why-empty line to the plot's width (a fixed 260 px ran past both edges of a
        narrow dock), centred in the view box."""
        vb = self.plot.getViewBox()
        self.empty_text.setTextWidth(max(80.0, min(420.0, vb.width() - 16.0)))

    def _why_empty(self, flops: np.ndarray, nbytes: np.ndarray, dur: np.ndarray) -> str:
        """One line: why the roofline has no point."""
        if not len(flops):
            return "No kernels to plot."
        if not (flops > 0).any():
            return "No kernel's FLOPs are known: attach an Nsight Compute report or record shapes (record_shapes=True)."
        if not ((flops > 0) & (nbytes > 0)).any():
            return "No kernel has both FLOPs and bytes known: attach a counter report with DRAM bytes."
        if self.exceeding or self.off_roof:
            return f"Every kernel with FLOPs and bytes exceeds its roof ({self.exceeding + self.off_roof:,}): a model or counter error, not plotted."
        return "No kernel has a measured duration."

    def point_tip(self, x: float, y: float, data: Any) -> str:
        """The hover text of a point: kernel, FLOP/byte, achieved TFLOP/s, SOL %."""
        try:
            kid = int(data)
        except (TypeError, ValueError):
            return ""
        if self._tip_rows is None:
            return ""
        names, sol_pct, bounds_all, row_of, point_of = self._tip_rows
        r, j = row_of.get(kid), point_of.get(kid)
        if r is None or j is None:
            return ""
        lx, ly = (float(v) for v in self._xy[j])
        head = f"{names[r]}\n{10 ** lx:,.3g} FLOP/byte · {10 ** ly / 1e12:,.3g} TFLOP/s achieved"
        pct = sol_pct[r]
        if pct != pct:
            return head + "\nSOL —"
        return head + f"\nSOL {pct:.1f} %" + (f" · {bounds_all[r]}-bound" if bounds_all[r] in ("memory", "compute") else "")

    @staticmethod
    def _top_roof(spec: DeviceSpec | None) -> float:
        if spec is None or not spec.rates:
            return 12.0
        return float(np.log10(max(spec.rates.values()) * 1e12))

    def _draw_roofs(self, spec: DeviceSpec) -> None:
        xs = np.logspace(np.log10(X_RANGE[0]), np.log10(X_RANGE[1]), 400)
        bw = spec.dram_bytes_per_s
        for label, peak, rgb in roof_lines(spec):
            ys = np.minimum(peak, bw * xs)
            item = self.plot.plot(xs, ys, pen=pg.mkPen(rgb, width=2), name=f"{label} {peak / 1e12:,.1f} TFLOP/s")
            self.roofs.append(item)
        if bw > 0:
            # the memory roof on its own: every roof's slanted part is this line
            top = max((spec.peak_flops(p, pipe)[0] for _l, p, pipe, _c in ROOFS), default=0.0) or bw * xs[-1]
            keep = bw * xs <= top * 1.5
            item = self.plot.plot(xs[keep], bw * xs[keep], pen=pg.mkPen((110, 110, 110), width=1.5, style=Qt.PenStyle.DashLine),
                                  name=f"memory roof {bw / 1e12:,.2f} TB/s")
            self.roofs.append(item)

    # -- selection in / out
    def set_selection(self, ids: Sequence[int]) -> None:
        """Highlight these kernels (selected elsewhere); emits nothing."""
        self._selected = [int(i) for i in ids]
        mask = np.isin(self._ids, np.asarray(self._selected, dtype=np.int64))
        if mask.any():
            self.highlight.setData(
                x=self._xy[mask, 0], y=self._xy[mask, 1], size=15, pen=pg.mkPen((0, 0, 0), width=2),
                brush=pg.mkBrush(0, 0, 0, 0), symbol="o",
            )
        else:
            self.highlight.clear()

    def selected_ids(self) -> list[int]:
        return list(self._selected)

    def point_count(self) -> int:
        return int(len(self._ids))

    def style_labels(self) -> list[str]:
        """The point styles the legend explains (measured, inherited, modelled)."""
        return [str(self.legend.getLabel(item).text) for item in self.style_items]

    def roof_labels(self) -> list[str]:
        return [str(item.name()) for item in self.roofs]

    def _clicked(self, item: Any, points: Any, ev: Any = None) -> None:
        ids = [int(p.data()) for p in points]
        self.set_selection(ids)
        self.selectionChanged.emit(ids)
