from __future__ import annotations

from kviewer.ui import resources


def test_icon_and_style_ship_inside_the_package() -> None:
    for name in ("kviewer.svg", "style.qss", "kviewer.desktop", "devices.toml"):
        p = resources.path(name)
        assert p is not None and p.parent.parent.name == "kviewer", name
    assert "Q" in resources.style_sheet()
