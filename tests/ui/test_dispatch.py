"""The bridge from worker threads to the GUI thread (kviewer.ui.dispatch)."""

from __future__ import annotations

import threading
import time
from typing import Any

from PySide6.QtCore import QObject, Qt

from kviewer.ui.background import BackgroundRunner
from kviewer.ui.dispatch import Owner, dispatcher


def test_results_arrive_on_the_gui_thread_and_progress_is_coalesced(qtbot: Any) -> None:
    got: list[tuple[str, Any]] = []

    def work(progress: Any) -> int:
        assert threading.current_thread() is not threading.main_thread()
        for i in range(1000):
            progress(i / 1000, f"step {i}")
        return 42

    owner = Owner("test")
    dispatcher().submit(owner, work, on_done=lambda r: got.append((threading.current_thread().name, r)),
                        on_progress=lambda f, m: got.append((threading.current_thread().name, m)))  # fmt: skip
    qtbot.waitUntil(lambda: any(r == 42 for _t, r in got), timeout=10_000)
    assert all(t == threading.main_thread().name for t, _r in got)
    assert len(got) < 100  # the GUI thread sees the latest progress, not every call


def test_a_closed_owner_gets_nothing(qtbot: Any) -> None:
    got: list[Any] = []
    owner = Owner("closing")
    gate = threading.Event()
    dispatcher().submit(owner, lambda _p: gate.wait(5) or "late", on_done=got.append, on_error=got.append)
    owner.close()
    gate.set()
    assert dispatcher().wait(owner, timeout=10)
    qtbot.wait(100)
    assert got == [] and dispatcher().pending(owner) == 0


def test_the_newest_request_of_a_channel_wins(qtbot: Any) -> None:
    runner = BackgroundRunner("test")
    got: list[Any] = []
    gate = threading.Event()
    runner.run("ch", lambda: gate.wait(5) and "first", got.append)
    runner.run("ch", lambda: "second", got.append)
    gate.set()
    qtbot.waitUntil(lambda: not runner.pending(), timeout=10_000)
    qtbot.wait(50)
    assert got == ["second"]


def test_cyclic_garbage_is_collected_on_the_gui_thread_only(qtbot: Any) -> None:
    """A Qt object in a reference cycle, dropped while a worker allocates enough to cross the
    collector's thresholds: it must be destroyed on the GUI thread, never in the worker."""
    dispatcher()  # confines collection to the GUI thread
    where: list[str] = []

    class Holder:
        pass

    obj = QObject()
    holder = Holder()
    holder.obj = obj  # type: ignore[attr-defined]
    obj.holder = holder  # type: ignore[attr-defined]  # a cycle only the cyclic collector frees
    # direct: the slot runs in the thread that destroys the object
    obj.destroyed.connect(lambda *_: where.append(threading.current_thread().name), Qt.ConnectionType.DirectConnection)
    del obj, holder

    def churn(_progress: Any) -> int:
        junk = []
        for i in range(300_000):
            junk.append([i])  # container allocations: the thresholds are crossed many times
            if i % 1000 == 0:
                junk = [[j] for j in range(50)]
        time.sleep(0.05)
        return 1

    task = dispatcher().submit(Owner("churn"), churn)
    assert task.finished.wait(30)
    assert where in ([], [threading.main_thread().name]), where
    # the GUI thread's collector frees it once allocations there cross the thresholds
    keep: list[Any] = []
    qtbot.waitUntil(lambda: bool(keep.append([[i] for i in range(2000)]) or where), timeout=10_000)
    assert where == [threading.main_thread().name]
