"""Dialogs that block, in one place so tests can replace them with recorders."""

from __future__ import annotations

from PySide6.QtWidgets import QMessageBox, QWidget


def show_error(parent: QWidget | None, title: str, text: str) -> None:
    """A critical message box naming the file(s) and the problem(s)."""
    box = QMessageBox(QMessageBox.Icon.Critical, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(box.textInteractionFlags())
    box.exec()


def show_info(parent: QWidget | None, title: str, text: str) -> None:
    QMessageBox.information(parent, title, text)
