"""Whether a dock is on screen, so that its panel computes only then.

A dock in a tab group that is not the current tab still says ``isVisible()``; its
``visibilityChanged`` signal follows the tabs too, so it decides. A panel keeps a
:class:`DockGate`, the window tells it its dock (:meth:`DockGate.watch`), and the panel's refresh
returns early while :meth:`DockGate.on_screen` is False; the gate calls the refresh again when the
dock comes forward. With the panel's ``shown`` key (what it last filled itself for) the panel then
computes only when it is on screen and its input changed.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QDockWidget


class DockGate:
    def __init__(self, on_shown: Callable[[], None]) -> None:
        self.dock: QDockWidget | None = None
        self._shown = False
        self._on_shown = on_shown

    def watch(self, dock: QDockWidget) -> None:
        """Gate on ``dock`` (the dock the panel is in)."""
        self.dock = dock
        dock.visibilityChanged.connect(self._visibility)

    def _visibility(self, visible: bool) -> None:
        self._shown = visible
        if visible:
            self._on_shown()

    def on_screen(self) -> bool:
        """Whether the dock is shown (and, in a tab group, its tab is the current one); a panel
        that is in no dock is always on screen."""
        return self.dock is None or (self.dock.isVisible() and self._shown)
