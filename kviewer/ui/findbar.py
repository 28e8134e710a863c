"""Ctrl+F: find bars by name across every open trace, step through them with next / previous."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QLineEdit, QToolButton, QWidget

from kviewer.ui.viewstate import Selection, ViewState


class FindBar(QWidget):
    def __init__(self, state: ViewState, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = state
        self.matches: list[tuple[int, str, int]] = []
        self.current = -1
        self.edit = QLineEdit()
        self.edit.setPlaceholderText("Find kernels, memory ops and CPU slices by name")
        self.edit.setClearButtonEnabled(True)
        self.prev_button = _button("▲", "Previous match (Shift+Enter)")
        self.next_button = _button("▼", "Next match (Enter)")
        self.close_button = _button("✕", "Close (Esc)")
        self.count_label = QLabel()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.addWidget(QLabel("Find:"))
        lay.addWidget(self.edit, 1)
        lay.addWidget(self.count_label)
        lay.addWidget(self.prev_button)
        lay.addWidget(self.next_button)
        lay.addWidget(self.close_button)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(200)
        self._timer.timeout.connect(self.search)
        self.edit.textChanged.connect(lambda _t: self._timer.start())
        self.edit.returnPressed.connect(self._on_return)
        self.next_button.clicked.connect(self.next)
        self.prev_button.clicked.connect(self.previous)
        self.close_button.clicked.connect(self.close_bar)
        state.tracesChanged.connect(self._stale)

    def open_bar(self) -> None:
        self.show()
        self.edit.setFocus()
        self.edit.selectAll()

    def close_bar(self) -> None:
        self.hide()

    def keyPressEvent(self, ev: QKeyEvent) -> None:
        if ev.key() == Qt.Key.Key_Escape:
            self.close_bar()
            ev.accept()
            return
        super().keyPressEvent(ev)

    def _on_return(self) -> None:
        if self._timer.isActive():
            self.search()

        if QApplication.keyboardModifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.previous()
        else:
            self.next()

    def _stale(self) -> None:
        self.matches = []
        self.current = -1
        if self.edit.text():
            self.search()

    def search(self) -> None:
        self._timer.stop()
        text = self.edit.text().strip()
        self.matches = []
        self.current = -1
        if text:
            for tracks in self.state.traces:
                self.matches.extend((tracks.key, table, row) for table, row, _start in tracks.find(text))
        self._update_label()

    def _update_label(self) -> None:
        if not self.edit.text().strip():
            self.count_label.setText("")
        elif not self.matches:
            self.count_label.setText("no match")
        else:
            pos = f"{self.current + 1} of " if self.current >= 0 else ""
            self.count_label.setText(f"{pos}{len(self.matches):,}")

    def _go(self, step: int) -> None:
        if self._timer.isActive() or (not self.matches and self.edit.text().strip()):
            self.search()
        if not self.matches:
            return
        self.current = (self.current + step) % len(self.matches) if self.current >= 0 else (0 if step > 0 else len(self.matches) - 1)
        key, table, row = self.matches[self.current]
        self.state.set_selection(Selection(key, table, row), reveal=True)
        self._update_label()

    def next(self) -> None:
        self._go(1)

    def previous(self) -> None:
        self._go(-1)


def _button(text: str, tip: str) -> QToolButton:
    b = QToolButton()
    b.setText(text)
    b.setToolTip(tip)
    return b
