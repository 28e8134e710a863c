"""Qt fixtures: a temporary QSettings location, a main window, drops as a user makes them."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from PySide6.QtCore import QMimeData, QPointF, QSettings, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

@pytest.fixture(autouse=True)
def tmp_settings(tmp_path_factory: pytest.TempPathFactory, qapp: QApplication) -> Iterator[Path]:
    """Every test gets its own QSettings folder (never the user's real settings)."""
    folder = tmp_path_factory.mktemp("settings")
    QSettings.setDefaultFormat(QSettings.Format.IniFormat)
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.UserScope, str(folder))
    QSettings.setPath(QSettings.Format.IniFormat, QSettings.Scope.SystemScope, str(folder / "system"))
    qapp.setOrganizationName("kviewer")
    qapp.setApplicationName("kviewer-tests")
    yield folder


@pytest.fixture(autouse=True)
def collect_qt_garbage(qapp: QApplication) -> Iterator[None]:
    """After each test (and after pytest-qt has closed its widgets): let every worker finish,
    deliver (or drop) what it reported, run the deferred deletes and collect Python garbage now,
    so each test starts from a quiet application. Workers never touch Qt (kviewer.ui.dispatch),
    so this is hygiene, not a crash guard: tests/ui/test_stress.py runs the GC every few ms on
    purpose."""
    import gc

    from PySide6.QtCore import QEvent

    from kviewer.ui.dispatch import dispatcher

    yield
    dispatcher().wait(timeout=10)
    dispatcher().drain()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


@pytest.fixture(autouse=True)
def no_key_held_after(qapp: QApplication) -> Iterator[None]:
    """After each test, no modifier key is held. A simulated key press with modifiers (QTest's
    Ctrl+Shift+S) leaves the application's modifier state set on the offscreen platform, where
    no real key is ever let go; the next test's ``selectRow`` then read Shift or Ctrl as held and
    extended or toggled the selection (test_table.py failed after test_integration_export.py in
    one worker). Letting go of each key here, as a user would, ends that state."""
    yield
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QWidget

    held = QGuiApplication.keyboardModifiers()
    if held == Qt.KeyboardModifier.NoModifier:
        return
    target = QWidget()
    target.show()
    try:
        for mod, key in ((Qt.KeyboardModifier.ShiftModifier, Qt.Key.Key_Shift), (Qt.KeyboardModifier.ControlModifier, Qt.Key.Key_Control),
                         (Qt.KeyboardModifier.AltModifier, Qt.Key.Key_Alt), (Qt.KeyboardModifier.MetaModifier, Qt.Key.Key_Meta)):
            if held & mod:
                QTest.keyRelease(target, key, Qt.KeyboardModifier.NoModifier)
    finally:
        target.close()
        target.deleteLater()
    assert QGuiApplication.keyboardModifiers() == Qt.KeyboardModifier.NoModifier


class ErrorRecorder:
    """Stands in for the blocking error dialog."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, parent: Any, title: str, text: str) -> None:
        self.calls.append((title, text))


@pytest.fixture
def errors(monkeypatch: pytest.MonkeyPatch) -> ErrorRecorder:
    from kviewer.ui import dialogs

    rec = ErrorRecorder()
    monkeypatch.setattr(dialogs, "show_error", rec)
    return rec


@pytest.fixture
def window(qtbot: Any, errors: ErrorRecorder) -> Iterator[Any]:
    from kviewer.ui.mainwindow import MainWindow

    w = MainWindow()
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    qtbot.waitExposed(w)
    yield w
    w.loader.cancel()
    w.loader.wait(10000)


def drop_files(widget: Any, paths: Sequence[os.PathLike[str] | str]) -> bool:
    """Drag files onto the widget and drop them, as a file manager does. Returns whether the
    drop was accepted."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(Path(p).resolve())) for p in paths])
    pos = QPointF(widget.width() / 2, widget.height() / 2)
    with warnings.catch_warnings():
        # PySide marks the only QDragEnterEvent constructor it binds (QPoint) as deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, enter)
    if not enter.isAccepted():
        return False
    drop = QDropEvent(pos, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(widget, drop)
    return drop.isAccepted()


def wait_idle(qtbot: Any, window: Any, timeout: int = 20_000) -> None:
    """Wait until the window's loader has finished everything it was given, and the speed of
    light of what it opened has arrived (the window paints first and analyses after)."""
    qtbot.waitUntil(lambda: not window.loader.busy and not window.analysis.computing_sol(), timeout=timeout)


def make_trace(
    n: int = 400,
    streams: int = 3,
    seed: int = 0,
    with_cpu: bool = True,
    extra: dict[str, Any] | None = None,
    path: str = "synthetic.json",
) -> Any:
    """A small trace built through the schema (for tests that need exact control)."""
    from kviewer.core import Trace, TraceMeta, make_table

    rng = np.random.default_rng(seed)
    dur = rng.integers(2_000, 40_000, n)
    gap = rng.integers(500, 5_000, n)
    # back to back with gaps: no two kernels of the trace overlap
    start = 1_000_000 + np.concatenate([[0], np.cumsum(dur + gap)[:-1]])
    names = np.array([f"void gemm_kernel_{i}<float, {i}>(float*, int)" for i in range(8)], dtype=object)
    pick = rng.integers(0, 8, n)
    shorts = np.array([f"gemm_kernel_{i}" for i in range(8)], dtype=object)
    cols: dict[str, Any] = dict(
        name=names[pick],
        short_name=shorts[pick],
        start=start,
        dur=dur,
        device=np.zeros(n),
        stream=7 + rng.integers(0, streams, n),
        grid_x=2 ** rng.integers(0, 12, n),
        grid_y=np.ones(n),
        grid_z=np.ones(n),
        block_x=np.full(n, 128),
        block_y=np.ones(n),
        block_z=np.ones(n),
        registers=rng.integers(16, 255, n),
        shared_mem=rng.integers(0, 4, n) * 1024,
        correlation=np.arange(n),
    )
    cols.update(extra or {})
    from kviewer.core import make_table as mt

    kernels = mt("kernels", n, cols)
    tables: dict[str, Any] = {"kernels": kernels}
    if with_cpu:
        cpu = make_table(
            "cpu_slices",
            n,
            dict(
                name=np.array(["cudaLaunchKernel"] * n, dtype=object),
                category=np.array(["runtime"] * n, dtype=object),
                start=kernels["start"].to_numpy() - 1500,
                dur=np.full(n, 900),
                pid=np.full(n, 10),
                tid=np.full(n, 11),
                depth=np.zeros(n),
                correlation=kernels["correlation"].to_numpy(),
            ),
        )
        flows = make_table(
            "flows",
            n,
            dict(src=np.arange(n), dst_table=np.array(["kernels"] * n, dtype=object), dst=np.arange(n), correlation=np.arange(n)),
        )
        tables.update(cpu_slices=cpu, flows=flows)
    devices = make_table("devices", 1, dict(id=[0], name=["NVIDIA H200"], vendor=["NVIDIA"]))
    return Trace(TraceMeta(path, "synthetic", "synthetic test trace"), devices=devices, **tables)


@pytest.fixture
def synthetic_window(window: Any) -> Any:
    """The main window with one synthetic trace open (added as the loader would)."""
    from kviewer.session.tracks import TraceTracks

    window.state.add_trace(TraceTracks.build(make_trace()))
    return window


def make_sol(trace: Any, bound: Any, t_sol_ns: Any = None) -> Any:
    """A speed of light for ``trace`` with these verdicts and SOL times (schema SOL, the rest
    unknown), for tests that need exact control over the colours."""
    from kviewer.analysis.sol import SolResult
    from kviewer.core.schema import SOL, make_table
    from kviewer.session.analyses import SolInfo

    k = trace.kernels
    n = len(k)
    cols = {"id": k["id"].to_numpy(), "dur": k["dur"].to_numpy(), "device": k["device"].to_numpy(),
            "bound": np.asarray(bound, dtype=object)}
    if t_sol_ns is not None:
        cols["t_sol_ns"] = np.asarray(t_sol_ns, dtype=np.float64)
    return SolInfo(SolResult(make_table(SOL, n, cols)))
