"""The roofline widget: roofs of the recognised GPU, kernels as points, selection in and out."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from kviewer.analysis.devices import load_devices
from kviewer.analysis.sol import speed_of_light
from kviewer.core import Trace
from kviewer.ui.roofline import BOUND_COLOURS, RooflineWidget

from tests.analysis.conftest import load_with


@pytest.fixture(scope="module")
def eager_sol(sample_traces: Path):  # type: ignore[no-untyped-def]
    trace: Trace = load_with("kviewer.io.torch", sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    return speed_of_light(trace)


def test_roofs_points_and_picture(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    w = RooflineWidget()
    qtbot.addWidget(w)
    w.resize(800, 500)
    w.set_data(eager_sol, load_devices()["h200"])
    w.show()
    qtbot.waitExposed(w)
    assert w.point_count() == len(eager_sol)
    labels = w.roof_labels()
    # FP16 and BF16 run at one rate on an H200: one line named for both (it read "BF16" alone)
    assert any(s.startswith("FP16/BF16 tensor 989.5") for s in labels)
    assert any(s.startswith("FP32 67.0") for s in labels) and any(s.startswith("FP8") for s in labels)
    img = w.grab().toImage()
    colours = {img.pixelColor(x, y).rgb() & 0xFFFFFF for x in range(0, img.width(), 3) for y in range(0, img.height(), 3)}
    assert len(colours) > 20  # not blank
    # memory-bound (orange) points are drawn
    orange = BOUND_COLOURS["memory"]
    found = any(
        abs(img.pixelColor(x, y).red() - orange[0]) < 12 and abs(img.pixelColor(x, y).green() - orange[1]) < 12
        and abs(img.pixelColor(x, y).blue() - orange[2]) < 12
        for x in range(img.width()) for y in range(img.height())
    )
    assert found


def test_selection_in_and_out(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    w = RooflineWidget()
    qtbot.addWidget(w)
    w.resize(800, 500)
    w.set_data(eager_sol, load_devices()["h200"])
    w.show()
    qtbot.waitExposed(w)
    # in: highlight without emitting
    with qtbot.assertNotEmitted(w.selectionChanged):
        w.set_selection([4, 5])
    assert w.selected_ids() == [4, 5]
    assert len(w.highlight.data) == 2
    # out: a click on the point of kernel 4 (the residual add) emits its id
    row = eager_sol.index[eager_sol["id"] == 4][0]
    x = np.log10(eager_sol["flops"].iloc[row] / eager_sol["bytes"].iloc[row])
    y = np.log10(eager_sol["flops"].iloc[row] / (eager_sol["dur"].iloc[row] * 1e-9))
    scene = w.plot.vb.mapViewToScene(QPointF(x, y))
    pos = w.plot_widget.mapFromScene(scene)
    with qtbot.waitSignal(w.selectionChanged, timeout=2000) as blocker:
        qtbot.mouseClick(w.plot_widget.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(pos.x(), pos.y()))
    assert 4 in blocker.args[0]


def test_no_point_above_its_roof_and_exceeding_kernels_left_out(qtbot, sample_traces: Path) -> None:  # type: ignore[no-untyped-def]
    # the eager trace ran on an H200; drawn against an H100 PCIe's roofline, its big GEMMs would
    # beat that GPU's peak: they are marked exceeds_peak and kept off the plot, the rest is drawn
    trace: Trace = load_with("kviewer.io.torch", sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    sol = speed_of_light(trace, device="h100_pcie")
    bad = int((sol["sol_status"] == "exceeds_peak").sum())
    assert bad > 0
    w = RooflineWidget()
    qtbot.addWidget(w)
    w.set_data(sol, load_devices()["h100_pcie"])
    assert w.exceeding == bad and w.point_count() > 0
    assert not np.isin(w._ids, sol.loc[sol["sol_status"] != "ok", "id"].to_numpy()).any()
    # every drawn point under min(its own peak, bandwidth x intensity)
    drawn = sol.set_index("id").loc[w._ids]
    achieved = drawn["flops"] / (drawn["dur"] * 1e-9)
    roof = np.fmin(drawn["peak_flops"], drawn["peak_bw"] * drawn["flops"] / drawn["bytes"])
    assert (achieved <= roof * (1 + 1e-9)).all()


def test_gui_and_cli_show_the_same_numbers(capsys, sample_traces: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    from kviewer.cli import main
    from kviewer.session.analyses import compute_sol

    f = sample_traces / "h200_resnet18.pt.trace.json.gz"
    trace: Trace = load_with("kviewer.io.torch", f)
    gui = compute_sol(trace).sol
    assert gui is not None
    assert main(["sol", str(f), "--format", "json", "-q"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in cli] == gui["id"].tolist()
    for col in ("flops", "bytes", "sol_pct", "t_sol_ns"):
        got = np.array([np.nan if r[col] is None else r[col] for r in cli], dtype=np.float64)
        np.testing.assert_array_equal(got, gui[col].to_numpy(np.float64))
    assert [r["sol_status"] for r in cli] == gui["sol_status"].tolist()


def test_kernel_table_marks_exceeding_kernels_and_never_shows_above_100(sample_traces: Path) -> None:
    from kviewer.session.analyses import compute_sol
    from kviewer.session.table_data import instance_data
    from kviewer.session.tracks import TraceTracks

    trace: Trace = load_with("kviewer.io.torch", sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    data = instance_data([TraceTracks.build(trace, sol=compute_sol(trace, "h100_pcie"))])
    status = data.column("sol_status")
    pct = data.column("sol_pct")
    texts = [status.text(i) for i in range(len(data))]
    assert "exceeds_peak" in texts
    shown = [pct.text(i) for i in range(len(data))]
    assert all(t == "—" or 0 <= float(t) <= 100 for t in shown)
    assert all(shown[i] == "—" for i, t in enumerate(texts) if t == "exceeds_peak")


def test_readable_tooltip_legend_and_empty_reason(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    """Issue 16: the hover text names the kernel with its FLOP/byte, TFLOP/s and SOL % (not
    pyqtgraph's log10 "x: 2.91 y: 14.9 data=135"); the legend explains point colours and the
    memory roof; an empty roofline says why in one line."""
    w = RooflineWidget()
    qtbot.addWidget(w)
    w.resize(800, 500)
    w.set_data(eager_sol, load_devices()["h200"])
    kid = int(w._ids[0])
    row = eager_sol.set_index("id").loc[kid]
    tip = w.points.opts["tip"](x=w._xy[0, 0], y=w._xy[0, 1], data=kid)
    assert str(row["short_name"]) in tip
    assert f"{row['flops'] / row['bytes']:,.3g} FLOP/byte" in tip
    assert f"{row['flops'] / (row['dur'] * 1e-9) / 1e12:,.3g} TFLOP/s" in tip
    assert f"SOL {row['sol_pct']:.1f} %" in tip and "data=" not in tip
    labels = [str(w.legend.getLabel(i).text) for i in w.bound_items]
    assert "memory-bound" in labels and "compute-bound" in labels
    assert any(s.startswith("memory roof 4.80 TB/s") for s in w.roof_labels())
    assert w.empty_reason == "" and not w.empty_text.isVisible()
    # no FLOPs known: no point, and one line saying why
    unknown = eager_sol.copy()
    unknown["flops"] = np.nan
    w.set_data(unknown, load_devices()["h200"])
    assert w.point_count() == 0
    assert "FLOPs" in w.empty_reason and w.empty_text.isVisible() and "\n" not in w.empty_reason
    # the line wraps inside the plot, and the plot fits the widget, also in a narrow dock: a fixed
    # 260 px line ran past both edges, and the two-column legend (~450 px) held the whole plot wider
    for width in (800, 300):
        w.resize(width, 500)
        w.show()
        qtbot.wait(100)  # the view range and the text's transform are applied when painted
        box = w.plot.getViewBox().sceneBoundingRect()
        text = w.empty_text.textItem.mapRectToScene(w.empty_text.textItem.boundingRect())
        assert box.left() <= text.left() and text.right() <= box.right() <= w.width(), (width, text, box)
        assert w.legend.columnCount == (2 if width == 800 else 1)


def test_fp16_roof_is_named_and_the_legend_is_below_the_points(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    from kviewer.ui.roofline import roof_lines

    devices = load_devices()
    # a T4 has FP16 tensor cores and no BF16: its tensor roof is FP16's (none was drawn)
    assert [label for label, _p, _c in roof_lines(devices["t4"])] == ["FP64", "FP32", "FP16 tensor"]
    w = RooflineWidget()
    qtbot.addWidget(w)
    w.resize(700, 420)
    w.set_data(eager_sol, devices["h200"])
    w.show()
    qtbot.waitExposed(w)
    legend = w.legend.sceneBoundingRect()
    plot_area = w.plot.getViewBox().sceneBoundingRect()
    assert legend.height() > 30 and legend.top() >= plot_area.bottom() - 1.0  # below it: it never covers a point


def test_a_long_title_is_elided_and_never_widens_the_plot(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    """In the default window the Roofline dock is about 240 px wide: a long file name in the title
    made the plot item 300 px wide, so the view cut off its right side. The title is elided to the
    widget instead (middle of each line), and re-fitted when the widget grows."""
    from PySide6.QtCore import Qt

    from kviewer.ui.analysis_docks import RooflinePanel

    panel = RooflinePanel()  # as the dock makes it: a one-column legend in small type
    qtbot.addWidget(panel)
    w = panel.ensure_widgets()
    w.set_data(eager_sol, load_devices()["h200"])
    long_name = "a_trace_file_name_much_longer_than_a_dock_" + "x" * 60 + ".pt.trace.json.gz"
    w.set_title([long_name, "NVIDIA H200 SXM 141GB"])
    panel.resize(240, 520)
    w.show()
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: w.plot_widget.width() == 240)
    shown = w.title_text()
    assert "…" in shown and shown.startswith("a_trace") and "NVIDIA H200" in shown
    minimum = w.plot.effectiveSizeHint(Qt.SizeHint.MinimumSize).width()
    assert minimum <= w.plot_widget.viewport().width(), "the plot is wider than the view: its right side is cut off"
    assert w.plot.geometry().width() <= w.plot_widget.viewport().width() + 0.5
    panel.resize(1400, 520)
    qtbot.waitUntil(lambda: "…" not in w.title_text())
    assert long_name in w.title_text()


def test_the_intensity_axis_title_fits_a_narrow_dock(qtbot, eager_sol) -> None:  # type: ignore[no-untyped-def]
    """At the default window's Roofline dock width (about 235 px) "arithmetic intensity
    (FLOP/byte)" was wider than the axis, and its end was cut off (a screenshot showed
    "...(FLOP/byte"). The longest title that fits is shown, the full one again when wide."""
    from PySide6.QtGui import QFontMetricsF

    from kviewer.ui.analysis_docks import RooflinePanel

    panel = RooflinePanel()
    qtbot.addWidget(panel)
    w = panel.ensure_widgets()
    w.set_data(eager_sol, load_devices()["h200"])
    panel.resize(235, 520)
    w.show()
    panel.show()
    qtbot.waitExposed(panel)
    qtbot.waitUntil(lambda: w.plot_widget.width() == 235)
    axis = w.plot.getAxis("bottom")
    shown = w.intensity_label()
    assert "FLOP/byte" in shown and shown != "arithmetic intensity (FLOP/byte)"
    assert QFontMetricsF(axis.label.font()).horizontalAdvance(shown) <= axis.geometry().width()
    panel.resize(900, 520)
    qtbot.waitUntil(lambda: w.intensity_label() == "arithmetic intensity (FLOP/byte)")
