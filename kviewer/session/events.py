"""Plain-Python events: the session's observers, without Qt.

An :class:`Event` is a list of callbacks called in the order they were connected. The GUI adapts
them to Qt signals once (:mod:`kviewer.ui.viewstate`), so widgets keep Qt's own lifetime rules; the
CLI, the headless path and tests connect plain functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Event:
    """Callbacks to call, in order, when something happened (``emit(*args)``)."""

    __slots__ = ("_callbacks", "name")

    def __init__(self, name: str = "") -> None:
        self.name = name
        self._callbacks: list[Callable[..., Any]] = []

    def connect(self, callback: Callable[..., Any]) -> None:
        self._callbacks.append(callback)

    def disconnect(self, callback: Callable[..., Any]) -> None:
        """Forget ``callback`` (every connection of it); unknown callbacks are ignored."""
        self._callbacks = [c for c in self._callbacks if c != callback]

    def emit(self, *args: Any) -> None:
        # a copy: a callback may connect or disconnect others while this runs
        for callback in list(self._callbacks):
            callback(*args)

    def __len__(self) -> int:
        return len(self._callbacks)

    def __repr__(self) -> str:
        return f"Event({self.name!r}, {len(self._callbacks)} callbacks)"
