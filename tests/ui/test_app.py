"""Start-up, the ``kviewer FILE`` entry point, and what QSettings keeps."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QSettings, Qt

from tests.ui.conftest import drop_files, wait_idle


def test_settings_live_in_the_test_folder(tmp_settings: Path) -> None:
    assert Path(QSettings().fileName()).is_relative_to(tmp_settings)


def test_recent_files_and_layout_survive_a_restart(qtbot: Any, window: Any, sample_traces: Path, errors: Any) -> None:
    from kviewer.ui.mainwindow import MainWindow

    path = sample_traces / "h200_llm_block_eager.pt.trace.json.gz"
    assert drop_files(window, [path])
    wait_idle(qtbot, window)
    assert window.recent_files() == [str(path.resolve())]
    window.details_dock.hide()
    window.resize(640, 480)  # within the offscreen screen (800x800)
    # the docks' minimum sizes may hold the window a few pixels wider (the Idle Gaps table fills
    # in from a worker, whenever it finishes): what is saved is the size the window has
    saved = window.size()
    assert 640 <= saved.width() <= 700 and saved.height() == 480
    window.close()  # saves geometry and dock state

    again = MainWindow()
    qtbot.addWidget(again)
    assert again.recent_files() == [str(path.resolve())]
    assert again.size() == saved
    assert again.details_dock.isHidden()
    again._fill_recent()
    entries = [a.text() for a in again.recent_menu.actions() if a.text()]
    assert str(path.resolve()) in entries
    # choosing the recent entry opens it again
    next(a for a in again.recent_menu.actions() if a.text() == str(path.resolve())).trigger()
    wait_idle(qtbot, again)
    assert len(again.state.traces) == 1


def test_start_up_does_not_import_pandas_or_loaders(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from kviewer.ui.app import create_app\n"
        "app = create_app()\n"
        "from kviewer.ui.mainwindow import MainWindow\n"
        "w = MainWindow(); w.show(); app.processEvents()\n"
        # kviewer.core and kviewer.io are light (lazy packages: their names load on first use); the
        # tables, Trace and the loaders need pandas
        "heavy = [m for m in ('pandas', 'kviewer.io.registry', 'kviewer.core.schema', 'kviewer.core.trace', 'msgspec', 'sqlite3') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def _run_kviewer(args: list[str], tmp_path: Path, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path), **env_extra)
    return subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)


def test_kviewer_file_opens_the_window(sample_traces: Path, tmp_path: Path) -> None:
    """``kviewer FILE`` as a user types it, in its own process (an event loop that quits cannot
    run inside the test process): the window opens the file and shows it."""
    from PySide6.QtGui import QImage

    path = sample_traces / "h200_llm_block_eager.pt.trace.json.gz"
    out = tmp_path / "window.png"
    res = _run_kviewer([str(path)], tmp_path, KVIEWER_SCREENSHOT=str(out), KVIEWER_WINDOW_SIZE="1200x800")
    assert res.returncode == 0, res.stderr
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1200, 800)
    # the H200 is in the device table: kernels are coloured by what bounds them, compute-bound
    # ones green and memory-bound ones orange
    green = orange = 0
    for y in range(0, img.height(), 2):
        for x in range(0, img.width(), 2):
            c = img.pixelColor(x, y)
            r, g, b = c.red(), c.green(), c.blue()
            green += g > r + 40 and g > b + 40
            orange += r > b + 80 and r > g + 20
    assert green > 20 and orange > 20


def test_kviewer_bad_file_reports_and_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    res = _run_kviewer([str(bad)], tmp_path, KVIEWER_SCREENSHOT=str(tmp_path / "w.png"))
    assert res.returncode == 2
    assert "bad.json" in res.stderr


def test_missing_file_is_a_user_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kviewer import cli

    assert cli.main([str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_keys_help_and_menus(window: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.ui import dialogs

    shown: list[str] = []
    monkeypatch.setattr(dialogs, "show_info", lambda parent, title, text: shown.append(text))
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    assert set(menus) == {"File", "Edit", "View", "Help"}
    help_actions = [a for a in menus["Help"].actions() if a.text().replace("&", "") == "Keys"]
    help_actions[0].trigger()
    assert shown and "W / S" in shown[0] and "Ctrl+F" in shown[0]
    assert window.open_action.shortcut().toString() == "Ctrl+O"
    assert window.find_action.shortcut().toString() == "Ctrl+F"
    assert window.status_label.text().startswith("Drop trace files here")
    assert window.testAttribute(Qt.WidgetAttribute.WA_AcceptDrops)


def test_a_layout_saved_for_other_docks_gives_the_default_arrangement(qtbot: Any) -> None:
    """A layout saved by a kviewer without the Query and Counters docks must not leave them
    loose beside the kernel table and details: the default arrangement tabs them."""
    from PySide6.QtCore import QSettings

    from kviewer.ui.mainwindow import MainWindow

    old = MainWindow()
    qtbot.addWidget(old)
    # as an older kviewer, which had neither dock, saved it: the layout names no such docks
    old.query_dock.setObjectName("notYetQuery")
    old.counters_dock.setObjectName("notYetCounters")
    old.save_settings()
    QSettings().remove("window/docks")
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()  # Qt lists a dock re-added to a tab group once the layout is applied
    qtbot.waitExposed(w)
    assert w.query_dock in w.tabifiedDockWidgets(w.table_dock)
    assert w.counters_dock in w.tabifiedDockWidgets(w.details_dock)
    # and a layout saved by this one is restored as saved
    w.removeDockWidget(w.query_dock)
    w.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, w.query_dock)
    w.query_dock.show()
    w.save_settings()
    again = MainWindow()
    qtbot.addWidget(again)
    assert again.dockWidgetArea(again.query_dock) == Qt.DockWidgetArea.LeftDockWidgetArea


def test_a_layout_saved_while_comparing_reopens_on_the_kernels_tab(qtbot: Any, window: Any, sample_traces: Path) -> None:
    """The Compare dock was the current tab when the layout was saved; reopened without a
    comparison, the bottom area shows the kernel table, not whichever neighbour Qt picks."""
    from PySide6.QtWidgets import QTabBar

    from kviewer.ui.mainwindow import MainWindow

    window.resize(1200, 800)
    assert drop_files(window, [sample_traces / "block4_eager.pt.trace.json.gz", sample_traces / "block4_compiled.pt.trace.json.gz"])
    wait_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.compare.active, timeout=30_000)
    window.close()  # saves the layout with the Compare tab on top

    again = MainWindow()
    qtbot.addWidget(again)
    again.show()
    qtbot.waitExposed(again)

    def current_tabs() -> set[str]:
        return {bar.tabText(bar.currentIndex()) for bar in again.findChildren(QTabBar) if bar.isVisible() and bar.count()}

    assert "Compare" not in current_tabs()
    assert "Kernels" in current_tabs()



_TAB_BARS = r"""
import json, sys, time
from PySide6.QtWidgets import QApplication, QTabBar
app = QApplication(sys.argv[:1])
from kviewer.ui.mainwindow import MainWindow
w = MainWindow()
w.resize(1600, 1000)
w.show()
for _ in range(20):
    app.processEvents()
    time.sleep(0.01)
print(json.dumps([[bar.tabText(i) for i in range(bar.count())] for bar in w.findChildren(QTabBar)
                  if bar.parent() is w and bar.isVisible() and bar.count() > 1]))
"""


def test_no_stale_tab_bar_is_drawn_over_the_docks(tmp_path: Path) -> None:
    """The first-run layout tabbed Details with Counters after the Roofline had been split off
    below Details; Qt then made a second "Details | Counters" tab bar and left it where the group
    first was, drawn over the Roofline (`kviewer screenshot --view window` showed it). One bar per
    tab group. In a fresh process, as the app starts: this test session's own QApplication never
    showed the stale bar."""
    import json

    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _TAB_BARS], capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    bars = [tuple(b) for b in json.loads(out.strip().splitlines()[-1])]
    assert ("Details", "Counters") in bars and len(bars) == len(set(bars)), bars
