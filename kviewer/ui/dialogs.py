"""Dialogs that block, in one place so tests can replace them with recorders."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QMessageBox, QWidget


def show_error(parent: QWidget | None, title: str, text: str) -> None:
    """A critical message box naming the file(s) and the problem(s)."""
    box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(box.textInteractionFlags())
    box.exec()


def show_info(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.information(parent, title, text)


def ask_open_mode(parent: QWidget | None, new_label: str, current_label: str) -> tuple[str, bool] | None:
    """File › Open with a trace open: ("beside" | "compare", remember) or None when cancelled."""
    box = QMessageBox(QMessageBox.Icon.Question, "Open", f"{new_label}: a trace is already open ({current_label}).", QMessageBox.StandardButton.NoButton, parent)
    beside = box.addButton("Open Beside", QMessageBox.ButtonRole.AcceptRole)
    compare = box.addButton(f"Compare With {current_label}", QMessageBox.ButtonRole.ActionRole)
    box.addButton(QMessageBox.StandardButton.Cancel)
    remember = QCheckBox("Remember my choice")
    box.setCheckBox(remember)
    box.exec()
    clicked = box.clickedButton()
    if clicked is beside:
        return "beside", remember.isChecked()
    if clicked is compare:
        return "compare", remember.isChecked()
    return None
