"""Guard against a Qt binding that leaks references to None (PySide6 6.12.0 on CPython < 3.12).

Each leaked reference brings the process closer to "Fatal Python error: none_dealloc"; a long GUI
session or a big export then aborts. pyproject.toml excludes that release; this test catches a
release like it.
"""

from __future__ import annotations

import sys

from PySide6.QtGui import QColor


def test_void_qt_calls_do_not_leak_none() -> None:
    color = QColor(1, 2, 3)
    before = sys.getrefcount(None)
    for _ in range(1000):
        color.setRed(5)
    # immortal None (3.12+) reports a constant huge count; a leak shows as a drop of ~1000
    assert before - sys.getrefcount(None) < 100
