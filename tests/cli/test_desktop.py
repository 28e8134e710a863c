"""``kviewer --install-desktop``: the entry, icon and MIME package land under XDG_DATA_HOME, and the
entry claims only kviewer's own file kinds."""

from __future__ import annotations

import configparser
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kviewer.cli import main

GENERIC = {"application/json", "application/gzip", "application/vnd.sqlite3", "text/csv", "application/x-sqlite3",
           "application/octet-stream", "text/plain"}


def test_install_desktop_writes_entry_icon_and_own_mime_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", "")  # no cache tools: nothing outside tmp_path is run or touched
    assert main(["--install-desktop"]) == 0
    entry = tmp_path / "applications" / "kviewer.desktop"
    icon = tmp_path / "icons" / "hicolor" / "scalable" / "apps" / "kviewer.svg"
    mime = tmp_path / "mime" / "packages" / "kviewer.xml"
    assert entry.is_file() and icon.read_text().startswith("<svg") and mime.is_file()
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(entry)
    desk = cp["Desktop Entry"]
    assert desk["Exec"].endswith("%F") and desk["Icon"] == "kviewer"
    claimed = {m for m in desk["MimeType"].split(";") if m}
    assert claimed and not claimed & GENERIC
    ns = {"m": "http://www.freedesktop.org/standards/shared-mime-info"}
    declared = {t.get("type") for t in ET.parse(mime).getroot().findall("m:mime-type", ns)}
    assert claimed == declared  # every kind the entry names is one the package defines
    globs = {g.get("pattern") for g in ET.parse(mime).getroot().iter("{%s}glob" % ns["m"])}
    assert {"*.ncu-rep", "*.nsys-rep", "*.pt.trace.json", "*.pt.trace.json.gz"} <= globs
    assert not globs & {"*.json", "*.gz", "*.csv", "*.sqlite"}
    assert str(entry) in capsys.readouterr().out


def test_install_desktop_is_in_the_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--install-desktop" in capsys.readouterr().out
