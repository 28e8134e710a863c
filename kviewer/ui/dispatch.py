"""The one bridge from worker threads to the GUI thread.

Why this exists (the crash it removes): workers used to report through signals of QObjects that the
GUI thread could delete. A worker emitting a Qt signal takes Qt's signal-slot mutex of the sender
(Qt hashes objects onto a small shared pool of such mutexes) and then needs the GIL to copy its
Python arguments; meanwhile the GUI thread, holding the GIL, destroys a QObject (a closed window's
wrappers collected by Python) and waits for a signal-slot mutex of the same pool. Either thread
then waits for the other (a deadlock), or the object is freed under the emitting worker (a
segfault in ``LoadController._on_progress``).

Here workers never touch Qt at all. They are plain Python threads (:mod:`concurrent.futures`, one
long-lived pool per kind of work) and put what they have to say — progress, a result, an error —
on a thread-safe queue. The GUI thread drains that queue from a timer owned by the application
(it outlives every window and every task) and calls back there. Each task belongs to an
:class:`Owner` (a window, a loader): once the owner is closed, what its tasks still report is
dropped on the GUI thread, never delivered to a half-destroyed widget. The dispatcher holds every
in-flight task until it has reported, so nothing is garbage-collected while work is in flight.

Python's cyclic garbage collector runs in whichever thread happens to allocate when a threshold
is crossed: in a worker, it would destroy the Qt wrappers of a closed window (a dock's model, a
timer) off the GUI thread ("QBasicTimer::start: Timers cannot be started from another thread",
or worse). While the dispatcher exists, automatic collection is off and pyqtgraph's
``GarbageCollector`` collects from a timer on the GUI thread instead.
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

#: how often the GUI thread looks for results while work is in flight (ms); well under a frame
POLL_MS = 15

ProgressFn = Callable[[float, str], None]


class Owner:
    """Whoever receives results (a window, a loader): results for a closed owner are dropped."""

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


@dataclass(eq=False)
class Task:
    """One piece of work in flight. Callbacks run on the GUI thread only."""

    id: int
    owner: Owner
    on_done: Callable[[Any], None] | None
    on_error: Callable[[BaseException], None] | None
    on_progress: ProgressFn | None
    dropped: bool = False
    """set on the GUI thread to drop whatever this task still reports"""
    finished: threading.Event = field(default_factory=threading.Event)
    """set by the worker when the function has returned or raised"""

    @property
    def live(self) -> bool:
        return not (self.dropped or self.owner.closed)

    def drop(self) -> None:
        self.dropped = True


class Dispatcher:
    """Long-lived worker pools plus the queue the GUI thread drains. One per application."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[str, int, Any]] = queue.SimpleQueue()
        self._tasks: dict[int, Task] = {}
        self._ids = itertools.count(1)
        self._pools: dict[str, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()
        self._timer: Any = None

    # GUI thread ----------------------------------------------------------------------------
    def submit(
        self,
        owner: Owner,
        fn: Callable[[ProgressFn], Any],
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_progress: ProgressFn | None = None,
        pool: str = "analysis",
    ) -> Task:
        """Run ``fn(progress)`` on the worker pool ``pool`` (one thread each: work of one kind runs
        in order). ``progress(fraction, message)`` may be called from the worker as often as it
        likes; the GUI thread sees the latest. ``on_done(result)`` or ``on_error(exception)``
        follows on the GUI thread, unless the task was dropped or its owner closed."""
        task = Task(next(self._ids), owner, on_done, on_error, on_progress)
        self._tasks[task.id] = task
        self._pool(pool).submit(self._work, task, fn)
        self._ensure_timer()
        return task

    def pending(self, owner: Owner | None = None) -> int:
        """Tasks (of ``owner``, or all) that have not reported yet."""
        return sum(1 for t in self._tasks.values() if owner is None or t.owner is owner)

    def wait(self, owner: Owner | None = None, timeout: float = 10.0) -> bool:
        """Block until the workers of the tasks (of ``owner``) have returned — without delivering
        their results (that happens in :meth:`drain`). For shutdown and tests."""
        deadline = time.monotonic() + timeout
        for task in list(self._tasks.values()):
            if owner is not None and task.owner is not owner:
                continue
            if not task.finished.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def drain(self) -> None:
        """Deliver what the workers have reported (GUI thread). Runs from the timer."""
        latest: dict[int, tuple[float, str]] = {}
        items: list[tuple[str, int, Any]] = []
        while True:
            try:
                kind, tid, payload = self._queue.get_nowait()
            except queue.Empty:
                break
            if kind == "progress":
                latest[tid] = payload  # only the newest progress of a task matters
            else:
                items.append((kind, tid, payload))
        for tid, payload in latest.items():
            task = self._tasks.get(tid)
            if task is not None and task.live and task.on_progress is not None:
                task.on_progress(*payload)
        for kind, tid, payload in items:
            task = self._tasks.pop(tid, None)
            if task is None or not task.live:
                continue
            if kind == "done":
                if task.on_done is not None:
                    task.on_done(payload)
            elif task.on_error is not None:
                task.on_error(payload)
        if not self._tasks and self._timer is not None:
            self._timer.stop()

    def shutdown(self, timeout: float = 10.0) -> None:
        """At application exit: drop every result, wait for the workers, end the pools (a later
        :meth:`submit` starts new ones)."""
        for task in self._tasks.values():
            task.drop()
        self.wait(timeout=timeout)
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._pools.clear()
        if self._timer is not None:
            self._timer.stop()

    def _pool(self, name: str) -> ThreadPoolExecutor:
        pool = self._pools.get(name)
        if pool is None:
            pool = self._pools[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"kviewer-{name}")
        return pool

    def _ensure_timer(self) -> None:
        if self._timer is None:
            from PySide6.QtCore import QCoreApplication, QTimer

            # parented to the application: it lives as long as the event loop that drives it
            self._timer = QTimer(QCoreApplication.instance())
            self._timer.setInterval(POLL_MS)
            self._timer.timeout.connect(self.drain)
        if not self._timer.isActive():
            self._timer.start()

    # worker threads ------------------------------------------------------------------------
    def _work(self, task: Task, fn: Callable[[ProgressFn], Any]) -> None:
        put = self._queue.put

        def progress(fraction: float, message: str = "") -> None:
            if not task.dropped:
                put(("progress", task.id, (float(fraction), str(message))))

        try:
            if task.dropped:
                put(("error", task.id, None))
                return
            result = fn(progress)
        except BaseException as exc:  # noqa: BLE001  # reported to the GUI thread, never lost here
            put(("error", task.id, exc))
        else:
            put(("done", task.id, result))
        finally:
            task.finished.set()


_DISPATCHER: Dispatcher | None = None
_GUARD = threading.Lock()
_COLLECTOR: Any = None
#: how often the GUI thread runs the cyclic garbage collector (s)
GC_INTERVAL_S = 0.5


def dispatcher() -> Dispatcher:
    """The application's dispatcher (created on first use, on the GUI thread)."""
    global _DISPATCHER
    with _GUARD:
        if _DISPATCHER is None:
            _confine_garbage_collection()
            _DISPATCHER = Dispatcher()
            from PySide6.QtCore import QCoreApplication

            app = QCoreApplication.instance()
            if app is not None:
                app.aboutToQuit.connect(_DISPATCHER.shutdown)
        return _DISPATCHER


def _confine_garbage_collection() -> None:
    """Collect cyclic garbage on the GUI thread only (see the module docstring)."""
    global _COLLECTOR
    if _COLLECTOR is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _COLLECTOR = GarbageCollector(interval=GC_INTERVAL_S)
