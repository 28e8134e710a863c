"""The work of opening a file in the window, without Qt: :func:`load_file` runs on the
application's load pool (:mod:`kviewer.ui.loading`), and :func:`prefetch` starts it before the
window exists.

``kviewer FILE`` used to import Qt and pyqtgraph and build the main window (2-4 s of a busy
2-core machine) before the load of FILE began; :func:`prefetch` starts loading and laying out the
file first, on a thread of its own, and the window's load of the same path adopts the result
(its progress and its cancellation included). This module imports no Qt, so the prefetch starts
before Qt is imported.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from typing import TYPE_CHECKING, Any

from kviewer import io as kio, session

if TYPE_CHECKING:
    import kviewer.io
    import kviewer.session.analysis_cache
    import kviewer.session.timeline_cache
    from kviewer.io import CancelToken

Progress = Callable[[float, str], None]


def load_file(path: str, token: CancelToken, progress: Progress) -> Any:
    """Detect, parse and lay out one file (worker thread; no Qt): the ready-made
    :class:`~kviewer.session.tracks.TraceTracks`. Raises LoadError, LoadCancelled or any bug.
    A file :func:`prefetch` started is taken from there (once: a later open loads it again)."""
    pre = _prefetched.pop(os.path.abspath(path), None)
    if pre is not None:
        return pre.adopt(token, progress)
    return _load_file(path, token, progress)


def _load_file(path: str, token: CancelToken, progress: Progress) -> Any:
    name = os.path.basename(path) or path
    last = [0.0]

    def report(fraction: float, message: str) -> None:
        # loaders may call this very often; the dialog needs a few updates a second
        now = time.monotonic()
        if now - last[0] < 0.05 and fraction < 1.0:
            return
        last[0] = now
        progress(max(0.0, min(1.0, fraction)) * 0.9, f"{name}: {message}" if message else name)

    token.check()
    trace = kio.load(path, progress=report, cancel=token)
    token.check()
    # the file's identity taken by the load, before it read the file (None with the cache off): an
    # analysis of a file that changes meanwhile is not cached
    source = trace.meta.source_id
    progress(0.95, f"{name}: building the timeline")
    # paint first: the speed of light comes with the trace from the analysis cache, or the window
    # computes it after showing the trace (AnalysisDocks.analyse); the layout comes from the
    # timeline cache, or is laid out here and stored on the cache's writer thread
    tracks = session.timeline_cache.tracks_for_open(trace, sol=session.analysis_cache.get(source, trace), source=source)
    token.check()
    return tracks


class _Prefetch:
    """A file being loaded before the window asked for it: its future, its own cancel token, and
    where its progress goes once a load adopts it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.token: CancelToken | None = None
        self.cancelled = False
        self.future: Future[Any] | None = None
        self._lock = threading.Lock()
        self._target: Progress | None = None
        self._last: tuple[float, str] | None = None

    def run(self) -> Any:
        """The load itself, on the prefetch thread (which imports the loaders and pandas, so the
        main thread does not wait for them)."""
        with self._lock:
            self.token = kio.CancelToken()
            if self.cancelled:
                self.token.cancel()
        return _load_file(self.path, self.token, self.progress)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self.token is not None:
                self.token.cancel()

    def progress(self, fraction: float, message: str) -> None:
        with self._lock:
            self._last = (fraction, message)
            target = self._target
        if target is not None:
            target(fraction, message)

    def adopt(self, token: CancelToken, progress: Progress) -> Any:
        """Wait for the result on behalf of the load that asked for the file, passing its
        progress on and its cancellation through."""
        with self._lock:
            self._target = progress
            last = self._last
        if last is not None:
            progress(*last)
        assert self.future is not None
        while True:
            try:
                return self.future.result(timeout=0.05)
            except FutureTimeout:
                if token.cancelled:
                    self.cancel()


_prefetched: dict[str, _Prefetch] = {}
_pool: ThreadPoolExecutor | None = None


def prefetch(path: str) -> None:
    """Start loading and laying out ``path`` now, on a thread of its own (plain Python, no Qt,
    like every load); :func:`load_file` of the same path adopts it."""
    global _pool
    key = os.path.abspath(path)
    if key in _prefetched:
        return
    pre = _Prefetch(path)
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kviewer-prefetch")
    pre.future = _pool.submit(pre.run)
    _prefetched[key] = pre


def forget() -> None:
    """Drop what was prefetched and not adopted (its load is cancelled)."""
    for pre in _prefetched.values():
        pre.cancel()
    _prefetched.clear()
