"""File › Open while a trace is open: open the file beside it, or compare it with it.

Asked once with a "remember" box (kept in QSettings under :data:`SETTING`); drag-and-drop keeps
its own rule (a second dropped report compares). Qt-only glue: the question itself is
:func:`kviewer.ui.dialogs.ask_open_mode`, which tests replace with a recorder.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QWidget

from kviewer.ui import dialogs

BESIDE = "beside"
COMPARE = "compare"
#: the remembered answer ("" or absent: ask)
SETTING = "open/with_trace_open"


def choose_open_mode(parent: QWidget, settings: Any, new_label: str, current_label: str) -> str | None:
    """``"beside"``, ``"compare"`` or None (cancelled): the remembered answer, else the user's."""
    saved = str(settings.value(SETTING, "") or "")
    if saved in (BESIDE, COMPARE):
        return saved
    answer = dialogs.ask_open_mode(parent, new_label, current_label)
    if answer is None:
        return None
    mode, remember = answer
    if remember:
        settings.setValue(SETTING, mode)
    return mode
