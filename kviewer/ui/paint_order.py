"""Work that should start once a widget has painted: "paint first, analyse after".

A trace that arrives is drawn by the timeline on the next turn of the event loop; work started on
a thread at the same moment (the speed of light of a big trace: ~0.2 s of the GIL) competes with
that paint for the interpreter. :func:`after_next_paint` runs a callable once ``widget`` has
handled its next paint event, or after ``timeout_ms`` when none comes (a hidden or minimised
window never paints).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget


class _PaintOrder(QObject):
    """One per widget, living as long as it (a child of it; never deleted before it: deleting a
    helper from its own timer's slot crashed now and then under PySide6): the callables waiting
    for the widget's next paint."""

    def __init__(self, widget: QWidget) -> None:
        super().__init__(widget)
        self._widget = widget
        self._waiting: list[Callable[[], None]] = []
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._run)
        widget.installEventFilter(self)

    def add(self, fn: Callable[[], None], timeout_ms: int) -> None:
        self._waiting.append(fn)
        if not self._timer.isActive() or self._timer.remainingTime() > timeout_ms:
            self._timer.start(timeout_ms)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:  # noqa: N802 (Qt's name)
        if self._waiting and obj is self._widget and event.type() == QEvent.Type.Paint:
            self._timer.start(0)  # once this paint has been handled
        return False

    def _run(self) -> None:
        waiting, self._waiting = self._waiting, []
        for fn in waiting:
            fn()


def after_next_paint(widget: QWidget, fn: Callable[[], None], timeout_ms: int = 250) -> None:
    """Call ``fn()`` on the GUI thread once ``widget`` has painted next (at the latest after
    ``timeout_ms``)."""
    order = widget.findChild(_PaintOrder)
    if order is None:
        order = _PaintOrder(widget)
    order.add(fn, timeout_ms)
