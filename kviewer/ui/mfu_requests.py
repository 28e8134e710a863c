"""MFU per step of the open traces, computed once per trace and speed of light off the GUI thread
(:func:`kviewer.session.mfu_view.compute_mfu`), for the Details and Range docks."""

from __future__ import annotations

from typing import Any, Callable

from kviewer.session.mfu_view import cached_mfu, compute_mfu, store_mfu


class MfuRequests:
    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self._waiting: dict[int, list[Callable[[], None]]] = {}

    def get(self, tracks: Any, then: Callable[[], None]) -> Any:
        """The trace's :class:`~kviewer.analysis.mfu.MfuResult`, or None while it is computed;
        ``then()`` is called on the GUI thread when it is ready."""
        res = cached_mfu(tracks)
        if res is not None:
            return res
        key = int(tracks.key)
        waiting = self._waiting.setdefault(key, [])
        waiting.append(then)
        if len(waiting) == 1:
            def done(computed: Any) -> None:
                store_mfu(tracks, computed)
                for cb in self._waiting.pop(key, []):
                    cb()

            def failed(_message: str) -> None:
                self._waiting.pop(key, None)

            self.runner.run(f"mfu:{key}", lambda: compute_mfu(tracks), done, failed)
        return None

    def warm(self, state: Any) -> None:
        """Compute the MFU of every open trace once its speed of light is known, so that the
        timeline's tooltips of step markers can show it (``state.tracesChanged``)."""
        for tracks in state.traces:
            if tracks.sol_info is not None and cached_mfu(tracks) is None and int(tracks.key) not in self._waiting:
                self.get(tracks, lambda: None)
