"""The pictures of a ``kviewer report``, rendered offscreen as PNG bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kviewer.ui import headless
from kviewer.ui.export import png_bytes, render_image

if TYPE_CHECKING:
    from kviewer.report import Picture, Report

#: the timeline picture is as tall as its rows, within these bounds (px)
TIMELINE_HEIGHT = (160, 1100)


def render_picture(report: Report, picture: Picture, scale: float = 2.0) -> bytes:
    """One picture the report asks for, as PNG bytes (``scale`` device pixels per pixel)."""
    traces = [report.traces[i] for i in picture.traces]
    widget = headless.build_view(picture.view, traces, (picture.width, picture.height), device=report.device)
    try:
        if picture.view == "timeline":
            # as tall as the lanes, so the picture has no empty band below them
            timeline = widget
            axis = widget.height() - timeline.vb.height()  # type: ignore[attr-defined]
            want = int(timeline.content_height + axis + 8)  # type: ignore[attr-defined]
            height = max(TIMELINE_HEIGHT[0], min(TIMELINE_HEIGHT[1], want))
            if height != widget.height():
                widget.resize(widget.width(), height)
                headless.settle(widget)
                timeline.scroll_to(0.0)  # type: ignore[attr-defined]
                timeline.fit_all()  # type: ignore[attr-defined]
                headless.settle(widget)
            picture.height = height
        return png_bytes(render_image(widget, scale))
    finally:
        widget.hide()
        widget.deleteLater()


def render_pictures(report: Report, scale: float = 2.0, between: Callable[[], None] | None = None) -> dict[str, bytes]:
    """Every picture of the report that can be drawn, by key. A picture that cannot be built
    (e.g. a roofline without a recognised GPU) is left out; the report says why in its text.
    ``between`` is called before each picture (the command line's Ctrl+C check)."""
    out: dict[str, bytes] = {}
    for pic in report.pictures():
        if between is not None:
            between()
        try:
            out[pic.key] = render_picture(report, pic, scale)
        except headless.ViewError:
            continue
    return out
