"""Views built offscreen, without a display: ``kviewer screenshot`` and the report's pictures.

Each view is the same widget class the desktop app shows, filled synchronously (no loading
thread) and shown with ``WA_DontShowOnScreen`` so Qt lays it out and polishes it without a window
ever appearing, even when a display is available. :func:`ensure_platform` selects Qt's
``offscreen`` platform when there is no display at all, before the QApplication exists.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QCoreApplication, Qt, QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication, QHBoxLayout, QWidget

from kviewer import session, ui
from kviewer.errors import KViewerError
from kviewer.session.compare import compare_open
from kviewer.tempdir import deferred_interrupt
from kviewer.ui.app import create_app
from kviewer.ui.export import picture_format, save_picture
from kviewer.ui.viewstate import ViewState

if TYPE_CHECKING:
    import kviewer.session.tracks
    import kviewer.ui.compare_view
    import kviewer.ui.kernel_table
    import kviewer.ui.mainwindow
    import kviewer.ui.roofline
    import kviewer.ui.timeline
    from kviewer.core import Trace

VIEWS = ("window", "timeline", "table", "roofline", "compare")
#: a size that shows the whole window's docks readably
DEFAULT_SIZE = (1600, 1000)
#: what the offscreen platform prints on every top-level show; not a problem of ours
_NOISE = ("This plugin does not support propagateSizeHints",)


class ViewError(Exception):
    """The view cannot be built from these traces (a user error: wrong number of files, unknown
    GPU for a roofline); the text says why."""


def ensure_platform() -> None:
    """Use Qt's offscreen platform when there is no display (Linux without X11 or Wayland).

    Must run before the QApplication is created; an explicit ``QT_QPA_PLATFORM`` is respected.
    """
    if os.environ.get("QT_QPA_PLATFORM"):
        return
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def _message_handler(mode: QtMsgType, context: Any, message: str) -> None:
    if any(message.startswith(n) for n in _NOISE):  # foreign message: Qt's
        return
    if mode in (QtMsgType.QtWarningMsg, QtMsgType.QtCriticalMsg, QtMsgType.QtFatalMsg):
        print(f"kviewer: qt: {message}", file=sys.stderr)


def application() -> QApplication:
    """The running QApplication, or a new one for a command-line run.

    A new one gets its own settings name, so a screenshot shows the default layout rather than
    whatever the user last left the desktop app in (and never writes to the user's settings).
    """
    app = QApplication.instance()
    if isinstance(app, QApplication):
        return app
    ensure_platform()
    qInstallMessageHandler(_message_handler)

    created = create_app()
    QCoreApplication.setApplicationName("kviewer-headless")
    assert isinstance(created, QApplication)
    return created


def settle(widget: QWidget | None = None, rounds: int = 3) -> None:
    """Let posted events (layouts, resizes, deferred updates) run."""
    app = QApplication.instance()
    for _ in range(rounds):
        QCoreApplication.sendPostedEvents()
        if app is not None:
            app.processEvents()
    if widget is not None:
        widget.ensurePolished()


# ---------------------------------------------------------------------------------------------
# views


def _show(widget: QWidget, size: tuple[int, int]) -> QWidget:
    widget.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
    widget.resize(*size)
    widget.show()
    settle(widget)
    return widget


def build_view(
    view: str,
    traces: Sequence[Trace],
    size: tuple[int, int] = DEFAULT_SIZE,
    time_range: tuple[float | None, float | None] | None = None,
    device: str | None = None,
) -> QWidget:
    """Build, fill and lay out one view offscreen.

    Parameters
    ----------
    view
        One of :data:`VIEWS`.
    traces
        One trace, or two: the second is compared with the first, as the window does with
        ``kviewer A B`` (aligned on A, labelled A and B, the Compare dock filled); ``compare``
        needs two.
    size
        Width and height in device-independent pixels.
    time_range
        ``(start, end)`` in ns on the timeline's axis (the trace's own clock); None for either end
        means the start or the end of the traces. Only the window and timeline views use it.
    device
        The GPU, when the trace does not say (as ``kviewer sol --device``).

    Raises
    ------
    ViewError
        for a view these traces cannot make.
    """
    if view not in VIEWS:
        raise ViewError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    if not traces:
        raise ViewError("no trace given")
    if len(traces) > 2:
        raise ViewError(f"at most two files (the second compared with the first), got {len(traces)}")
    if time_range is not None and view not in ("window", "timeline"):
        raise ViewError(f"--range applies to the window and timeline views, not to {view}")
    application()
    if view == "compare":
        if len(traces) != 2:
            raise ViewError("the compare view needs two files: the reference A and the report B compared with it")

        return _show(ui.compare_view.CompareView(traces[0], traces[1]), size)
    if view == "roofline":
        return _show(_rooflines(traces, device), size)

    tracks = [session.tracks.TraceTracks.build(t, sol=session.analyses.compute_sol(t, device)) for t in traces]
    if view == "window":
        widget: QWidget = ui.mainwindow.MainWindow()
        state = widget.state  # type: ignore[attr-defined]
        timeline = widget.timeline  # type: ignore[attr-defined]
    else:
        state = ViewState()
        if view == "timeline":
            widget = timeline = ui.timeline.TimelineView(state)
        else:
            widget, timeline = ui.kernel_table.KernelTable(state), None
        state.setParent(widget)  # the state lives as long as its view
    for t in tracks:
        state.add_trace(t)
    _show(widget, size)
    if len(tracks) == 2:
        # what the window does with ``kviewer A B`` once both are open: B aligned on A, labelled A
        # and B, the Compare dock filled and on top (the same session command; computed here)
        try:
            compare_open(state.document)
        except KViewerError:
            pass  # as in the window after a failed comparison: both traces open, on their own times
        settle(widget)
    if timeline is not None:
        if time_range is not None:
            lo, hi = state.span()
            t0 = lo if time_range[0] is None else float(time_range[0])
            t1 = hi if time_range[1] is None else float(time_range[1])
            if not t1 > t0:
                raise ViewError(f"the range ends ({t1:.0f} ns) before it starts ({t0:.0f} ns)")
            timeline.set_range(t0, t1)
        else:
            timeline.fit_all()
        settle(widget)
    return widget


def _rooflines(traces: Sequence[Trace], device: str | None) -> QWidget:
    """One roofline per trace, side by side, each titled with its GPU and file."""
    holder = QWidget()
    lay = QHBoxLayout(holder)
    lay.setContentsMargins(0, 0, 0, 0)
    for t in traces:
        info = session.analyses.compute_sol(t, device)
        if info.sol is None:
            raise ViewError(info.why)
        spec = info.spec
        roof = ui.roofline.RooflineWidget()
        roof.set_data(info.sol, spec, ui.roofline.counter_marks(t.kernels))
        name = os.path.basename(t.meta.path) or t.meta.source_format
        roof.set_title([f"{spec.name} · {name}" if spec is not None else name], point_size=None)
        lay.addWidget(roof)
    return holder


def screenshot(
    view: str,
    traces: Sequence[Trace],
    out: str | os.PathLike[str],
    size: tuple[int, int] = DEFAULT_SIZE,
    time_range: tuple[float | None, float | None] | None = None,
    scale: float = 1.0,
    device: str | None = None,
) -> str:
    """Build a view offscreen and save its picture (PNG or SVG by the suffix of ``out``)."""
    picture_format(out)  # a bad suffix fails before any work
    with deferred_interrupt() as stop:  # Ctrl+C: no picture, exit 130 (never swallowed by a Qt callback)
        widget = build_view(view, traces, size, time_range, device)
        try:
            stop.check()
            title = " vs ".join(os.path.basename(t.meta.path) for t in traces)
            return os.fspath(save_picture(widget, out, scale, title=f"kviewer {view}: {title}", check=stop.check))
        finally:
            widget.hide()
            widget.deleteLater()
