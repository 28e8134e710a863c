"""``kviewer --install-desktop``: the menu entry, icon and file kinds for this user's desktop.

Follows the freedesktop.org layout (what ``xdg-desktop-menu``, ``xdg-icon-resource`` and
``xdg-mime`` do): the ``.desktop`` file under ``$XDG_DATA_HOME/applications``, the icon under
``icons/hicolor/scalable/apps``, and a shared-mime-info package naming only kviewer's own kinds
(``.ncu-rep``, ``.nsys-rep``, ``*.pt.trace.json[.gz]``, a fleet's ``fleet.sqlite``) so that kviewer
never claims every JSON, gzip, CSV or SQLite file. The desktop's caches are refreshed when their
tools are on PATH; nothing else is touched. No Qt here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

APP_ID = "kviewer"
_FILES = {  # resource -> folder under the data home
    "kviewer.desktop": "applications",
    "kviewer.svg": "icons/hicolor/scalable/apps",
    "kviewer-mime.xml": "mime/packages",
}
_REFRESH = {  # folder -> the tool that rebuilds its cache
    "applications": ("update-desktop-database",),
    "mime": ("update-mime-database",),
    "icons/hicolor": ("gtk-update-icon-cache", "-f", "-t"),
}


@dataclass
class Installed:
    files: list[Path] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # cache tools not on PATH


def data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _exec_line() -> str:
    """The command the menu entry runs: this installation's own ``kviewer`` when it can be found."""
    exe = shutil.which("kviewer") or str(Path(sys.executable).with_name("kviewer"))
    return f"{exe} %F" if Path(exe).exists() else "kviewer %F"


def install_desktop(home: Path | None = None) -> Installed:
    """Write the entry, icon and MIME package under ``home`` (default :func:`data_home`)."""
    home = home or data_home()
    done = Installed()
    pkg = resources.files("kviewer").joinpath("resources")
    for name, sub in _FILES.items():
        folder = home / sub
        folder.mkdir(parents=True, exist_ok=True)
        text = pkg.joinpath(name).read_text("utf-8")
        if name.endswith(".desktop"):
            text = "\n".join(f"Exec={_exec_line()}" if line.startswith("Exec=") else line for line in text.splitlines()) + "\n"
        target = folder / ("kviewer.xml" if name == "kviewer-mime.xml" else name)
        target.write_text(text, "utf-8")
        done.files.append(target)
    for sub, tool in _REFRESH.items():
        if shutil.which(tool[0]) is None:
            done.skipped.append(tool[0])
            continue
        subprocess.run([*tool, str(home / sub)], check=False, capture_output=True, timeout=60)
        done.refreshed.append(tool[0])
    return done


def main() -> int:
    done = install_desktop()
    for f in done.files:
        print(f"wrote {f}")
    if done.skipped:
        print(f"not on PATH (the desktop picks the files up at next login): {', '.join(done.skipped)}")
    return 0
