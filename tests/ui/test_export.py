"""Pictures of every view: PNG at 1x/2x with the kernels in their colours, SVG that parses and keeps
the timeline as vector bars, the clipboard, the export dialog, views built offscreen."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QGuiApplication, QImage
from PySide6.QtWidgets import QWidget

from kviewer.core import Trace
from kviewer.io import load
from kviewer.session import colors
from kviewer.ui import headless
from kviewer.ui.export import (
    SVG_MIME,
    ExportDialog,
    ExportError,
    copy_picture,
    png_bytes,
    render_image,
    save_picture,
    svg_bytes,
)
from kviewer.ui.roofline import BOUND_COLOURS, RooflineWidget

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
SVG_NS = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def eager(sample_traces: Path) -> Trace:
    return load(sample_traces / EAGER)


@pytest.fixture(scope="module")
def compiled(sample_traces: Path) -> Trace:
    return load(sample_traces / COMPILED)


def pixels(img: QImage) -> np.ndarray:
    """(h, w, 3) uint8 RGB of an image."""
    rgb = img.convertToFormat(QImage.Format.Format_RGB888)
    h, w, bpl = rgb.height(), rgb.width(), rgb.bytesPerLine()
    return np.frombuffer(rgb.constBits(), dtype=np.uint8, count=h * bpl).reshape(h, bpl)[:, : w * 3].reshape(h, w, 3).copy()


def colour_counts(img: QImage) -> dict[tuple[int, int, int], int]:
    px = pixels(img).reshape(-1, 3)
    packed = (px[:, 0].astype(np.int64) << 16) | (px[:, 1].astype(np.int64) << 8) | px[:, 2]
    values, counts = np.unique(packed, return_counts=True)
    return {(int(v >> 16), int((v >> 8) & 255), int(v & 255)): int(c) for v, c in zip(values, counts)}


def near(img: QImage, rgb: tuple[int, int, int], tol: int = 12) -> int:
    """Pixels within ``tol`` of a colour in every channel."""
    px = pixels(img).astype(np.int16)
    return int((np.abs(px - np.array(rgb, dtype=np.int16)) <= tol).all(axis=2).sum())


def assert_not_blank(img: QImage, min_colours: int = 20) -> dict[tuple[int, int, int], int]:
    counts = colour_counts(img)
    assert len(counts) >= min_colours, f"only {len(counts)} colours: a blank picture"
    total = img.width() * img.height()
    background = max(counts.values())
    assert background < 0.97 * total, "one colour covers almost everything"
    return counts


def kernel_rgbs(trace: Trace) -> dict[str, set[tuple[int, int, int]]]:
    """The palette colours the timeline gives this trace's kernels, by bound."""
    from kviewer.session.analyses import compute_sol

    info = compute_sol(trace)
    assert info.sol is not None, info.why
    bounds = info.sol["bound"]
    idx = colors.kernel_colours(trace.kernels["short_name"], bounds)
    pal = colors.palette_rgb()
    out: dict[str, set[tuple[int, int, int]]] = {}
    for bound, i in zip(bounds.astype(str), idx):
        out.setdefault(bound, set()).add(tuple(pal[int(i)]))  # type: ignore[arg-type]
    return out


@pytest.fixture
def view(qtbot: Any, eager: Trace, compiled: Trace) -> Any:
    """build_view(name, ...) whose widgets are closed after the test."""
    made: list[QWidget] = []

    def build(name: str, size: tuple[int, int] = (1000, 560), **kw: Any) -> QWidget:
        traces = [eager, compiled] if name == "compare" else [eager]
        w = headless.build_view(name, traces, size, **kw)
        qtbot.addWidget(w)
        made.append(w)
        return w

    yield build
    for w in made:
        if hasattr(w, "loader"):
            w.loader.cancel()
            w.loader.wait(5000)


# ---------------------------------------------------------------------------------------------
# PNG


@pytest.mark.parametrize("name", headless.VIEWS)
@pytest.mark.parametrize("scale", [1.0, 2.0])
def test_every_view_exports_a_png_of_the_asked_size_that_is_not_blank(view: Any, name: str, scale: float) -> None:
    w = view(name, (900, 520))
    assert (w.width(), w.height()) == (900, 520)
    img = render_image(w, scale)
    assert (img.width(), img.height()) == (int(900 * scale), int(520 * scale))
    assert img.devicePixelRatio() == scale
    assert_not_blank(img)
    back = QImage.fromData(png_bytes(img), "PNG")
    assert (back.width(), back.height()) == (img.width(), img.height())


@pytest.mark.parametrize("name", ["timeline", "window"])
def test_timeline_and_window_show_the_kernels_in_their_palette_colours(view: Any, eager: Trace, name: str) -> None:
    w = view(name, (1200, 700))
    counts = colour_counts(render_image(w))
    expected = kernel_rgbs(eager)
    # the eager model has memory-bound elementwise kernels and compute-bound GEMMs: both families show
    assert {"memory", "compute"} <= set(expected)
    for bound in ("memory", "compute"):
        shown = {c for c in expected[bound] if counts.get(c, 0) > 0}
        assert shown, f"no {bound}-bound kernel colour in the picture"
    all_kernel = set().union(*expected.values())
    painted = sum(counts.get(c, 0) for c in all_kernel)
    assert painted > 2000, f"only {painted} pixels in kernel colours"
    # nothing else on screen uses the kernel families: those pixels are the kernel bars
    assert len({c for c in all_kernel if counts.get(c, 0)}) >= 4


def test_2x_picture_is_drawn_at_double_resolution_not_enlarged(view: Any) -> None:
    w = view("table", (700, 300))
    one, two = pixels(render_image(w, 1.0)), pixels(render_image(w, 2.0)).astype(np.int16)
    assert two.shape[:2] == (one.shape[0] * 2, one.shape[1] * 2)
    # an enlarged 1x picture is made of uniform 2x2 blocks; text drawn at 2x has detail inside them
    blocks = two.reshape(one.shape[0], 2, one.shape[1], 2, 3)
    spread = (blocks.max(axis=(1, 3)) - blocks.min(axis=(1, 3))).max(axis=2)
    assert int((spread > 40).sum()) > 1000


def test_roofline_picture_has_points_of_both_bounds(view: Any) -> None:
    img = render_image(view("roofline", (900, 600)))
    assert near(img, BOUND_COLOURS["memory"]) > 20
    assert near(img, BOUND_COLOURS["compute"]) > 20


def test_compare_picture_shows_faster_rows_in_green(view: Any) -> None:
    from kviewer.ui.compare_view import FASTER

    img = render_image(view("compare", (1100, 600)))
    # the compiled model is faster: its deltas are written in the "faster" colour
    assert near(img, (FASTER.red(), FASTER.green(), FASTER.blue()), tol=30) > 30


def test_timeline_range_is_the_one_asked(view: Any) -> None:
    tl = view("timeline", (800, 300), time_range=(1.5e6, 3e6))
    x0, x1 = tl.visible_range()
    assert x0 == pytest.approx(1.5e6) and x1 == pytest.approx(3e6)
    tl = view("timeline", (800, 300), time_range=(None, 2e6))
    # an open start is the first event (on the trace's clock, where it lies just after 0)
    first = min(t.span[0] for t in tl.state.traces)
    assert tl.visible_range() == pytest.approx((first, 2e6))


def test_roofline_needs_a_known_gpu(qtbot: Any) -> None:
    from tests.cli.test_report import hostile_trace

    # kernels on a GPU the device table does not know
    trace = hostile_trace()
    trace.devices["name"] = "Mystery GPU 9000"
    with pytest.raises(headless.ViewError, match="Mystery GPU 9000"):
        headless.build_view("roofline", [trace], (400, 300))
    # --device names it
    w = headless.build_view("roofline", [trace], (400, 300), device="h200")
    qtbot.addWidget(w)
    assert "H200" in w.findChild(RooflineWidget).plot.titleLabel.text


def test_range_is_refused_where_it_means_nothing(eager: Trace) -> None:
    with pytest.raises(headless.ViewError, match="--range"):
        headless.build_view("table", [eager], (400, 300), time_range=(0, 1e6))
    with pytest.raises(headless.ViewError, match="two files"):
        headless.build_view("compare", [eager], (400, 300))
    with pytest.raises(headless.ViewError, match="before it starts"):
        headless.build_view("timeline", [eager], (400, 300), time_range=(None, -5.0))


# ---------------------------------------------------------------------------------------------
# SVG


@pytest.mark.parametrize("name", headless.VIEWS)
def test_every_view_exports_svg_that_parses(view: Any, name: str) -> None:
    w = view(name, (800, 450))
    root = ET.fromstring(svg_bytes(w, title="a <title> & more"))
    assert root.tag == f"{SVG_NS}svg"
    assert root.get("viewBox") == "0 0 800 450"
    assert root.find(f"{SVG_NS}title").text == "a <title> & more"  # type: ignore[union-attr]
    assert len(list(root.iter())) > 50


def test_timeline_svg_keeps_kernel_bars_as_vector_rectangles(view: Any, eager: Trace) -> None:
    root = ET.fromstring(svg_bytes(view("timeline", (1000, 400))))
    # QSvgGenerator puts the fill on the enclosing group
    fills = {g.get("fill", "").lower() for g in root.iter(f"{SVG_NS}g") if g.find(f"{SVG_NS}rect") is not None}
    kernel_hex = {"#{:02x}{:02x}{:02x}".format(*c) for cs in kernel_rgbs(eager).values() for c in cs}
    assert len(fills & kernel_hex) >= 4
    # and the plot was not flattened into one embedded bitmap
    assert not [i for i in root.iter(f"{SVG_NS}image") if float(i.get("width", 0)) > 100]


def test_roofline_svg_draws_points_as_paths(view: Any) -> None:
    w = view("roofline", (800, 500))
    root = ET.fromstring(svg_bytes(w))
    # pyqtgraph copies scatter points from a bitmap atlas unless told it is exporting
    assert not list(root.iter(f"{SVG_NS}image"))
    points = w.findChild(RooflineWidget).point_count()
    assert len(list(root.iter(f"{SVG_NS}path"))) >= points > 100


# ---------------------------------------------------------------------------------------------
# files, clipboard, dialog


def test_save_picture_by_suffix(view: Any, tmp_path: Path) -> None:
    w = view("timeline", (640, 320))
    png = save_picture(w, tmp_path / "t.png", scale=2.0)
    img = QImage(str(png))
    assert (img.width(), img.height()) == (1280, 640)
    svg = save_picture(w, tmp_path / "t.SVG")
    ET.parse(svg)
    with pytest.raises(ExportError, match=r"\.png or \.svg"):
        save_picture(w, tmp_path / "t.jpg")
    with pytest.raises(ExportError, match="cannot write"):
        save_picture(w, tmp_path / "missing" / "t.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.SVG", "t.png"]  # no leftovers


def test_copy_to_clipboard_puts_bitmap_and_svg(view: Any) -> None:
    w = view("roofline", (500, 300))
    img = copy_picture(w, 2.0)
    mime = QGuiApplication.clipboard().mimeData()
    got = QGuiApplication.clipboard().image()
    assert (got.width(), got.height()) == (img.width(), img.height()) == (1000, 600)
    ET.fromstring(bytes(mime.data(SVG_MIME).data()))


def test_export_dialog_on_the_main_window(qtbot: Any, synthetic_window: Any, tmp_path: Path) -> None:
    w = synthetic_window
    hidden = QWidget()
    qtbot.addWidget(hidden)
    views = {"Timeline (visible range)": w.timeline, "Kernel table": w.table, "Whole window": w, "Hidden": hidden}
    dlg = ExportDialog(w, views, current="Kernel table", directory=str(tmp_path))
    qtbot.addWidget(dlg)
    assert [dlg.view_choice.itemText(i) for i in range(dlg.view_choice.count())] == list(views)[:3]
    assert dlg.widget() is w.table
    assert dlg.default_name().endswith("kviewer-kernel-table.png")

    dlg.view_choice.setCurrentText("Whole window")
    dlg.png2.setChecked(True)
    assert dlg.size_label.text() == f"{w.width() * 2} × {w.height() * 2} pixels"
    out = dlg.save_to(tmp_path / "window.png")
    assert out is not None and dlg.saved_path == out
    img = QImage(str(out))
    assert (img.width(), img.height()) == (w.width() * 2, w.height() * 2)
    counts = assert_not_blank(img)
    pal = colors.palette_rgb()
    k = w.state.traces[0].trace.kernels
    expected = {tuple(pal[int(i)]) for i in colors.kernel_colours(k["short_name"])}
    assert any(counts.get(c, 0) for c in expected)  # type: ignore[call-overload]

    dlg.view_choice.setCurrentText("Timeline (visible range)")
    dlg.svg.setChecked(True)
    assert dlg.suffix() == ".svg"
    ET.parse(dlg.save_to(tmp_path / "timeline.svg"))  # type: ignore[arg-type]

    dlg.png1.setChecked(True)
    dlg.copy()
    assert QGuiApplication.clipboard().image().width() == w.timeline.width()
    assert "Copied" in dlg.status.text()

    assert dlg.save_to(tmp_path / "nowhere" / "x.png") is None
    assert "cannot write" in dlg.status.text()


def test_export_dialog_without_visible_views(qtbot: Any) -> None:
    hidden = QWidget()
    qtbot.addWidget(hidden)
    dlg = ExportDialog(None, {"Hidden": hidden})
    qtbot.addWidget(dlg)
    assert not dlg.save_button.isEnabled() and dlg.widget() is None
    assert "No view" in dlg.status.text()


def test_svg_of_graphics_views_is_placed_where_the_widget_is(view: Any) -> None:
    """The timeline's plot sits right of the lane labels: its vector bars start there too."""
    w = view("timeline", (900, 300))
    root = ET.fromstring(svg_bytes(w))
    xs = [float(r.get("x", "0")) for r in root.iter(f"{SVG_NS}rect") if float(r.get("width", "0")) < 400]
    canvas = w.canvas
    vb_rect: QRectF = w.vb.sceneBoundingRect()
    left = canvas.mapTo(w, canvas.mapFromScene(vb_rect.topLeft())).x()
    bars = [x for x in xs if x >= left - 1]
    assert bars and min(bars) >= left - 1
