"""Where the icon and the style sheet are: ``kviewer/resources`` (shipped in the package; the
repository's ``resources/`` holds symlinks to these files)."""

from __future__ import annotations

from pathlib import Path

_CANDIDATES = (Path(__file__).resolve().parent.parent / "resources",)


def path(name: str) -> Path | None:
    """The resource file, or None when kviewer runs without its resources (then Qt defaults)."""
    for base in _CANDIDATES:
        p = base / name
        if p.is_file():
            return p
    return None


def style_sheet() -> str:
    p = path("style.qss")
    return p.read_text(encoding="utf-8") if p is not None else ""
