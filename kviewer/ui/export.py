"""Pictures of any view: PNG at 1x or 2x, SVG, and the clipboard.

Every function takes a plain ``QWidget`` (the timeline, the kernel table, the roofline, the compare
view or the whole main window) and draws it as it is on screen, at its current size: the timeline
picture therefore shows its visible time range.

PNG renders the widget into a ``QImage`` whose device pixel ratio is the scale, so text and lines
are drawn at 2x resolution rather than upscaled. SVG goes through ``QSvgGenerator``; a plain
``QWidget.render`` would rasterise every ``QGraphicsView`` (pyqtgraph plots) into an embedded
bitmap, so :func:`paint_widget` draws graphics views through their scene instead, which keeps
the timeline bars and roofline points as vector shapes.

The GUI calls :func:`export_dialog` (Ctrl+Shift+S); ``kviewer screenshot`` uses
:func:`save_picture` on views built offscreen (:mod:`kviewer.ui.headless`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from PySide6.QtCore import (
    QBuffer,
    QByteArray,
    QIODevice,
    QMimeData,
    QPoint,
    QRect,
    QRectF,
    QSize,
    Qt,
)
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QRegion
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from kviewer.errors import KViewerError
from kviewer.session.format import xml_text

#: picture formats by file suffix
SUFFIXES = {".png": "png", ".svg": "svg"}
SCALES = (1.0, 2.0)
SVG_MIME = "image/svg+xml"
BACKGROUND = QColor(255, 255, 255)


class ExportError(KViewerError):
    """A picture could not be written (unknown format, unwritable path); the text says why."""


def picture_format(path: str | os.PathLike[str]) -> str:
    """``"png"`` or ``"svg"`` from the file name; :class:`ExportError` for anything else."""
    suffix = Path(path).suffix.lower()
    fmt = SUFFIXES.get(suffix)
    if fmt is None:
        raise ExportError(f"{os.fspath(path)}: cannot tell the picture format from {suffix or 'a name without suffix'!r}; use .png or .svg")
    return fmt


def _settle(widget: QWidget) -> None:
    """Lay out and polish a widget that may never have been painted (offscreen, hidden docks)."""
    widget.ensurePolished()
    lay = widget.layout()
    if lay is not None:
        lay.activate()


@contextlib.contextmanager
def _export_mode(widget: QWidget, opts: dict[str, object]) -> Iterator[None]:
    """Tell pyqtgraph items they are drawn for export (pyqtgraph's own exporters do this): a
    scatter plot then draws each point as a path instead of copying it from its 1x pixmap atlas,
    which keeps points sharp at 2x and makes them vector shapes (not one bitmap each) in SVG."""
    views = [widget] if isinstance(widget, QGraphicsView) else []
    views += widget.findChildren(QGraphicsView)
    items = [i for v in views if v.scene() is not None for i in v.scene().items() if hasattr(i, "setExportMode")]
    for item in items:
        item.setExportMode(True, dict(opts))
    try:
        yield
    finally:
        for item in items:
            item.setExportMode(False)


def render_image(widget: QWidget, scale: float = 1.0) -> QImage:
    """The widget as it is, at its current size, in a QImage of ``scale`` x its pixels.

    The image carries ``scale`` as its device pixel ratio, so Qt draws text and lines at the
    higher resolution (a 2x picture is sharp, not an enlarged 1x one).
    """
    if not scale > 0:
        raise ExportError(f"scale must be positive, got {scale}")
    _settle(widget)
    size = widget.size()
    w = max(round(size.width() * scale), 1)
    h = max(round(size.height() * scale), 1)
    img = QImage(w, h, QImage.Format.Format_ARGB32_Premultiplied)
    img.setDevicePixelRatio(scale)
    img.fill(BACKGROUND)
    painter = QPainter(img)
    try:
        if scale == 1.0:
            widget.render(painter, QPoint(0, 0))
        else:
            with _export_mode(widget, {"antialias": True, "resolutionScale": 1.0}):
                widget.render(painter, QPoint(0, 0))
    finally:
        painter.end()
    return img


def png_bytes(image: QImage) -> bytes:
    """PNG-encoded bytes of an image."""
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buf, "PNG"):  # type: ignore[call-overload]  # the stubs say bytes; PySide6 takes str
        raise ExportError("could not encode the picture as PNG")
    buf.close()
    return bytes(data.data())


def paint_widget(painter: QPainter, widget: QWidget, origin: QPoint | None = None) -> None:
    """Paint ``widget`` and its visible children with ``painter``, graphics views as vectors.

    ``QWidget.render`` paints a ``QGraphicsView`` from a raster backing store, which a vector
    device (SVG) receives as one embedded bitmap; ``QGraphicsView.render`` draws its scene's items
    through the painter instead.
    """
    origin = origin or QPoint(0, 0)
    if isinstance(widget, QGraphicsView):
        # the frame and scroll bars of a plot carry nothing worth a vector; the viewport is it
        vp = widget.viewport()
        at = origin + vp.mapTo(widget, QPoint(0, 0))
        widget.render(painter, QRectF(at.x(), at.y(), vp.width(), vp.height()), vp.rect(), Qt.AspectRatioMode.IgnoreAspectRatio)
        return
    widget.render(painter, origin, QRegion(), QWidget.RenderFlag.DrawWindowBackground)
    for child in widget.children():
        if isinstance(child, QWidget) and child.isVisible() and not child.isWindow():
            paint_widget(painter, child, origin + child.pos())


def svg_bytes(widget: QWidget, title: str = "", description: str = "") -> bytes:
    """The widget as an SVG document (vector shapes and text where Qt has them)."""
    _settle(widget)
    size = widget.size()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    gen = QSvgGenerator()
    gen.setOutputDevice(buf)
    gen.setSize(QSize(size.width(), size.height()))
    gen.setViewBox(QRect(0, 0, size.width(), size.height()))
    gen.setTitle(title or widget.windowTitle() or "kviewer")
    gen.setDescription(description or "kviewer picture")
    painter = QPainter(gen)
    try:
        painter.fillRect(QRect(0, 0, size.width(), size.height()), BACKGROUND)
        with _export_mode(widget, {"antialias": True, "painter": painter}):
            paint_widget(painter, widget)
    finally:
        painter.end()
    buf.close()
    # names from a trace can hold characters XML 1.0 forbids; the labels are escaped where they
    # are drawn, and this keeps the document well-formed whatever else reached the generator
    # names from a trace can hold characters XML 1.0 forbids; labels are escaped where they are
    # drawn, and this keeps the document well-formed whatever else reached the generator
    return xml_text(bytes(data.data()).decode("utf-8", "replace")).encode("utf-8")


def save_picture(
    widget: QWidget, path: str | os.PathLike[str], scale: float = 1.0, title: str = "", check: Callable[[], None] | None = None,
) -> Path:  # fmt: skip
    """Write the widget to ``path``: PNG (at ``scale``) or SVG, chosen by the suffix. ``check()``
    runs between drawing and writing (it raises to stop: nothing is written then).

    Raises
    ------
    ExportError
        for an unknown suffix or when the file cannot be written.
    """
    out = Path(path)
    fmt = picture_format(out)
    data = svg_bytes(widget, title=title) if fmt == "svg" else png_bytes(render_image(widget, scale))
    if check is not None:
        check()
    try:
        # write then rename: a failed export never leaves half a picture under the asked name
        tmp = out.with_name(f".{out.name}.part")
        tmp.write_bytes(data)
        os.replace(tmp, out)
    except OSError as exc:
        raise ExportError(f"{out}: cannot write the picture: {exc.strerror or exc}") from exc
    return out


def copy_picture(widget: QWidget, scale: float = 1.0) -> QImage:
    """Put the widget's picture on the clipboard: a bitmap for every application, and the SVG
    (``image/svg+xml``) for those that take vectors. Returns the bitmap."""
    img = render_image(widget, scale)
    mime = QMimeData()
    mime.setImageData(img)
    mime.setData(SVG_MIME, QByteArray(svg_bytes(widget)))
    QGuiApplication.clipboard().setMimeData(mime)
    return img


# ---------------------------------------------------------------------------------------------
# the GUI dialog


class ExportDialog(QDialog):
    """Choose a view and a format; save it to a file or copy it to the clipboard.

    Parameters
    ----------
    views
        Display name -> widget, in menu order, e.g. ``{"Timeline (visible range)": timeline,
        "Kernel table": table, "Whole window": window}``. Hidden widgets are left out.
    current
        The name to preselect (the view that has focus).
    directory
        Where the save dialog starts.
    """

    def __init__(self, parent: QWidget | None, views: Mapping[str, QWidget], current: str | None = None, directory: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Export picture")
        self.views = {name: w for name, w in views.items() if w is not None and w.isVisible()}
        self.directory = directory
        self.saved_path: Path | None = None

        self.view_choice = QComboBox()
        for name in self.views:
            self.view_choice.addItem(name)
        if current in self.views:
            self.view_choice.setCurrentText(current)
        self.size_label = QLabel()

        self.png1 = QRadioButton("PNG")
        self.png2 = QRadioButton("PNG, 2x")
        self.svg = QRadioButton("SVG")
        self.png1.setChecked(True)
        self.format_group = QButtonGroup(self)
        fmt_row = QHBoxLayout()
        for b in (self.png1, self.png2, self.svg):
            self.format_group.addButton(b)
            fmt_row.addWidget(b)
        fmt_row.addStretch(1)

        form = QFormLayout()
        form.addRow("View:", self.view_choice)
        form.addRow("Format:", fmt_row)
        form.addRow("", self.size_label)

        self.status = QLabel()
        self.status.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy to Clipboard")
        self.save_button = QPushButton("Save…")
        self.save_button.setDefault(True)
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.save_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.rejected.connect(self.reject)
        self.copy_button.clicked.connect(self.copy)
        self.save_button.clicked.connect(self._save_clicked)

        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self.view_choice.currentIndexChanged.connect(lambda _i: self._update_size())
        self.format_group.buttonToggled.connect(lambda *_: self._update_size())
        enabled = bool(self.views)
        for w in (self.copy_button, self.save_button, self.view_choice):
            w.setEnabled(enabled)
        if not enabled:
            self.status.setText("No view is visible to export.")
        self._update_size()

    # state -------------------------------------------------------------------------------------
    def widget(self) -> QWidget | None:
        return self.views.get(self.view_choice.currentText())

    def scale(self) -> float:
        return 2.0 if self.png2.isChecked() else 1.0

    def suffix(self) -> str:
        return ".svg" if self.svg.isChecked() else ".png"

    def _update_size(self) -> None:
        w = self.widget()
        if w is None:
            self.size_label.setText("")
            return
        if self.svg.isChecked():
            self.size_label.setText(f"{w.width()} × {w.height()} (vector)")
        else:
            s = self.scale()
            self.size_label.setText(f"{int(w.width() * s)} × {int(w.height() * s)} pixels")

    # actions -----------------------------------------------------------------------------------
    def copy(self) -> None:
        w = self.widget()
        if w is None:
            return
        copy_picture(w, self.scale())
        self.status.setText(f"Copied {self.view_choice.currentText()} to the clipboard.")

    def save_to(self, path: str | os.PathLike[str]) -> Path | None:
        """Save the chosen view to ``path`` (suffix decides the format); report errors in the
        dialog rather than raising."""
        w = self.widget()
        if w is None:
            return None
        try:
            out = save_picture(w, path, self.scale())
        except ExportError as exc:
            self.status.setText(str(exc))
            return None
        self.saved_path = out
        self.status.setText(f"Saved {out}")
        return out

    def default_name(self) -> str:
        base = self.view_choice.currentText().split(" (")[0].lower().replace(" ", "-") or "view"
        return os.path.join(self.directory, f"kviewer-{base}{self.suffix()}")

    def _save_clicked(self) -> None:
        fmt_filter = "SVG picture (*.svg)" if self.svg.isChecked() else "PNG picture (*.png)"
        path, _ = QFileDialog.getSaveFileName(self, "Export picture", self.default_name(), fmt_filter)
        if not path:
            return
        if not Path(path).suffix:
            path += self.suffix()
        if self.save_to(path) is not None:
            self.accept()


def export_dialog(parent: QWidget | None, views: Mapping[str, QWidget], current: str | None = None, directory: str = "") -> Path | None:
    """Show the export dialog (modal) and return the path written, or None (cancelled, or only
    copied to the clipboard).

    ``views`` maps a display name to its widget, e.g.
    ``{"Timeline (visible range)": w.timeline, "Kernel table": w.table, "Whole window": w}``.
    """
    dlg = ExportDialog(parent, views, current=current, directory=directory)
    dlg.exec()
    return dlg.saved_path
