"""The window lifecycle under load: open -> compare -> stop comparing -> close -> open again, with
loads and analyses in flight at every step and damaged files dropped mid-load.

This is the test for the worker/Qt lock-order crash (see :mod:`kviewer.ui.dispatch`): windows are
closed and garbage-collected while their loads and comparisons still run. It also counts what a
long session must not accumulate: worker threads, windows, memory.

Runs in the suite; on its own: ``QT_QPA_PLATFORM=offscreen python -m pytest tests/ui/test_stress.py``
(``KVIEWER_STRESS_CYCLES=N`` for more or fewer than 200 cycles).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication

from tests.ui.conftest import drop_files

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
CYCLES = int(os.environ.get("KVIEWER_STRESS_CYCLES", "200"))
#: memory is compared from this cycle on (caches, pools and allocators have settled by then)
SETTLED = 20


def _rss() -> int:
    """Resident set size now, in bytes (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _main_windows() -> list[Any]:
    from kviewer.ui.mainwindow import MainWindow

    return [w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow)]


def _settle(qtbot: Any, ms: int = 0) -> None:
    if ms:
        qtbot.wait(ms)
    QApplication.processEvents()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """What exists before the first cycle (modules, pandas, the test session: most of the heap)
    is moved out of the cyclic collector's sight (:func:`gc.freeze`). Each of the test's frequent
    collections then scans only what the cycles made (windows, traces, Qt wrappers), which is
    what it must find and destroy, in a few milliseconds instead of tens; 200 cycles stay."""
    import importlib

    # what every cycle uses, imported now so that its modules are frozen too
    for name in ("kviewer.ui.mainwindow", "kviewer.ui.compare_view", "kviewer.ui.roofline", "kviewer.ui.fusion_panel",
                 "kviewer.io.torch", "kviewer.session.tracks", "kviewer.session.analysis_cache", "kviewer.analysis.compare",
                 "kviewer.analysis.sol", "kviewer.analysis.fusion", "kviewer.analysis.activity"):
        importlib.import_module(name)
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RSS from /proc")
def test_open_compare_close_cycles(frozen_heap: None, qtbot: Any, errors: Any, sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.ui.dispatch import dispatcher
    from kviewer.ui.mainwindow import MainWindow

    monkeypatch.setenv("KVIEWER_RANK_WORKERS", "1")
    eager, compiled = str(sample_traces / EAGER), str(sample_traces / COMPILED)
    damaged = tmp_path / "damaged.pt.trace.json"
    damaged.write_bytes(b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1, "dur": \x00\x01 garbage')
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes((sample_traces / EAGER).read_bytes()[:5000])  # a gzip stream cut mid-way

    # the old crash needed Python's cyclic GC to destroy a closed window's Qt wrappers on the GUI
    # thread while a worker reported back: collect often, at arbitrary points of the event loop.
    # What existed before the first cycle is frozen out of the collector's sight (``frozen_heap``).
    from PySide6.QtCore import QTimer

    collector = QTimer()
    collector.setInterval(7)
    collector.timeout.connect(gc.collect)
    collector.start()
    before_windows = len(_main_windows())
    threads_at: dict[int, int] = {}
    rss_at: dict[int, int] = {}
    completed_compares = 0
    for cycle in range(1, CYCLES + 1):
        w = MainWindow()
        w.resize(900, 600)
        w.show()
        # both files at once: compare mode starts by itself once both are open
        w.open_files([eager, compiled])
        step = cycle % 4
        if cycle % 3 == 0:
            # a damaged file dropped while the loads are in flight: an error, the others open
            assert drop_files(w, [damaged if cycle % 2 else cut])
        if step == 0:
            # close at once: loads in flight (cancelled, their results dropped)
            pass
        elif step == 1:
            # close while the comparison runs in the background
            qtbot.waitUntil(lambda: w.compare._pending is not None or w.compare.active, timeout=30_000)
        else:
            qtbot.waitUntil(lambda: w.compare.active, timeout=30_000)
            completed_compares += 1
            w.compare.stop()
            assert not w.compare.active
            if step == 3:
                # compare again and close with that comparison and a reload in flight
                w.compare.compare_open()
                w.open_files([eager])
        w.close()
        w.deleteLater()
        del w
        _settle(qtbot)
        if cycle in (SETTLED, CYCLES) or (os.environ.get("KVIEWER_STRESS_TRACE") and cycle % SETTLED == 0):
            # let everything in flight report (and be dropped), then measure
            assert dispatcher().wait(timeout=60)
            _settle(qtbot, 50)
            gc.collect()
            _settle(qtbot)
            threads_at[cycle] = sum(1 for t in threading.enumerate() if t.is_alive())
            rss_at[cycle] = _rss()

    collector.stop()
    assert dispatcher().wait(timeout=60)
    _settle(qtbot, 50)
    gc.collect()
    _settle(qtbot)
    assert len(_main_windows()) == before_windows, "closed windows were not destroyed"
    assert dispatcher().pending() == 0
    if CYCLES >= SETTLED:
        assert threads_at[CYCLES] <= threads_at[SETTLED], f"threads leaked: {threads_at}"
        grew = rss_at[CYCLES] / rss_at[SETTLED]
        assert grew <= 1.10, f"RSS grew {grew:.2f}x from cycle {SETTLED} to {CYCLES}: {rss_at}"
    assert completed_compares >= CYCLES // 2
    # every damaged drop was reported (as an error dialog), none crashed or was lost; the closed
    # windows' errors may be dropped with them, so count at least the ones whose window waited
    assert all("damaged" in text or "cut" in text for _title, text in errors.calls)
    print(f"\nstress: {CYCLES} cycles, {completed_compares} comparisons shown, threads {threads_at}, "
          f"RSS {({k: f'{v / 2**20:.0f} MiB' for k, v in rss_at.items()})}, {len(errors.calls)} damaged-file errors shown")


if __name__ == "__main__":
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.exit(pytest.main([__file__, "-q", "-s", "-p", "no:cacheprovider"]))
