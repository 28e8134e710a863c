"""Ctrl+C while Qt draws: a flag, acted on between steps.

A ``KeyboardInterrupt`` raised by Python's SIGINT handler inside a Qt callback (a paint event, a
pyqtgraph range update) is swallowed by PySide (printed, then the work goes on and the picture
is written) or lands in the middle of a C++ destructor (a crash). While a
:class:`DeferredInterrupt` is active, SIGINT only sets a flag; :meth:`DeferredInterrupt.check`
raises the ``KeyboardInterrupt`` in the caller's own flow, between steps, where it unwinds
cleanly (the command line then exits 130 with "interrupted").
"""

from __future__ import annotations

import signal
import threading
from typing import Any


class DeferredInterrupt:
    """``with DeferredInterrupt() as stop: ...; stop.check(); ...`` (main thread only; elsewhere
    it does nothing and :meth:`check` never raises)."""

    #: the outermost active one (a nested one shares its flag)
    _current: DeferredInterrupt | None = None

    def __init__(self) -> None:
        self.interrupted = False
        self._previous: Any = None
        self._installed = False
        self._outer: DeferredInterrupt | None = None

    def _handler(self, num: int, frame: Any) -> None:
        self.interrupted = True

    def __enter__(self) -> DeferredInterrupt:
        if DeferredInterrupt._current is not None:
            self._outer = DeferredInterrupt._current
            return self
        if threading.current_thread() is threading.main_thread():
            try:
                self._previous = signal.getsignal(signal.SIGINT)
                if self._previous is signal.default_int_handler:  # someone else's handler is left alone
                    signal.signal(signal.SIGINT, self._handler)
                    self._installed = True
                    DeferredInterrupt._current = self
            except (OSError, ValueError):
                pass
        return self

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` when Ctrl+C came since the start."""
        if self._outer is not None:
            self._outer.check()
        if self.interrupted:
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False
            DeferredInterrupt._current = None
