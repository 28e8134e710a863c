"""Names with terminal escapes, row breakers, formulas and bidi overrides are made safe for
each destination (kviewer.core.text), and JSON stays exact."""

from __future__ import annotations

import csv
import io
import sys
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kviewer.core.text import csv_cell, display_text, xml_text
from tests.hostile.build import EVIL_NAMES, nsys_export
from tests.hostile.conftest import run_cli

#: what must never reach a terminal, an HTML/Markdown page or the Qt table raw
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


@pytest.fixture(scope="module")
def evil(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("evil")
    meta = {"EXPORT_PRODUCT_VERSION": "\x1b]0;title\x07 2024.1", "EXPORT_SCHEMA_VERSION": "3.11\x1b[2J"}
    return nsys_export(d / "evil\x1b[31m.sqlite", EVIL_NAMES, list(range(len(EVIL_NAMES))), meta=meta)


def test_display_text_rules() -> None:
    assert display_text("a\x1b]0;x\x07b") == "a\\x1b]0;x\\x07b"
    assert display_text("good_\u202egnp.exe") == "good_U+202Egnp.exe"
    assert display_text("l1\nl2\rl3\x00") == "l1\\x0al2\\x0dl3\\x00"
    assert display_text("\x9b31m") == "\\x9b31m"
    assert display_text("plain µs name<T>") == "plain µs name<T>"
    assert xml_text("a\x1bb\x00c") == "a\\x1bb\\x00c" and xml_text("ok\tok\n") == "ok\tok\n"


@pytest.mark.parametrize("value", ["=1+1", "+1", "-x", "@SUM(A1)", "\tx", "\rx"])
def test_csv_formula_guard(value: str) -> None:
    assert str(csv_cell(value)).startswith("'")
    assert csv_cell(value, raw=True) == value
    assert csv_cell(-5) == -5 and csv_cell(-1.5) == -1.5 and csv_cell(None) is None


@pytest.mark.parametrize("command", [["summary"], ["kernels"], ["info"], ["summary", "--short"], ["kernels", "--format", "table"]])
def test_terminal_tables_escape(evil: Path, tmp_path: Path, command: list[str]) -> None:
    r = run_cli([command[0], str(evil), *command[1:]], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not UNSAFE.search(r.stdout), repr(UNSAFE.search(r.stdout))
    assert not UNSAFE.search(r.stderr)
    if command[0] != "info":
        assert "\\x1b]0;pwned-title\\x07kernel_title" in r.stdout
        assert "good_U+202Egnp.exe" in r.stdout
        # every row is one line: header + rule + one per name
        assert len(r.stdout.strip().splitlines()) == 2 + len(EVIL_NAMES)


def test_error_lines_escape(tmp_path: Path) -> None:
    p = tmp_path / "bad\x1b]0;x\x07.json"
    p.write_text("{}")
    r = run_cli(["summary", str(p)], tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not UNSAFE.search(r.stderr)


def test_csv_guards_formulas_keeps_numbers_and_rows(evil: Path, tmp_path: Path) -> None:
    r = run_cli(["kernels", str(evil), "--format", "csv"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.DictReader(io.StringIO(r.stdout, newline="")))
    assert len(rows) == len(EVIL_NAMES)  # CR/LF/NUL never break a row
    names = [row["name"] for row in rows]
    for name in names:
        assert not name.startswith(("=", "+", "-", "@", "\t", "\r")), name
        assert "\x1b" not in name and "\x00" not in name
    assert "'=HYPERLINK(\"https://evil.example\",\"x\")" in names and "'-2+3" in names
    assert all(row["rank"] == "-1" for row in rows)  # numbers stay numbers, negative ones too
    raw = run_cli(["kernels", str(evil), "--format", "csv", "--raw-csv"], tmp_path)
    assert raw.returncode == 0, raw.stderr[-2000:]
    # Python 3.10's csv reader refuses NUL (3.11+ reads it): there the NUL is compared as a stand-in
    nul = "\0" if sys.version_info >= (3, 11) else "\ue000"
    raw_names = [row["name"] for row in csv.DictReader(io.StringIO(raw.stdout.replace("\0", nul), newline=""))]
    assert sorted(raw_names) == sorted(n.replace("\0", nul) for n in EVIL_NAMES)


def test_json_stays_exact(evil: Path, tmp_path: Path) -> None:
    r = run_cli(["kernels", str(evil), "--format", "json"], tmp_path)
    assert r.returncode == 0
    assert sorted(k["name"] for k in json.loads(r.stdout)) == sorted(EVIL_NAMES)
    assert "\x1b" not in r.stdout  # JSON escapes control characters itself


@pytest.mark.parametrize("suffix", [".html", ".md"])
def test_reports_escape(evil: Path, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"r{suffix}"
    r = run_cli(["report", str(evil), "-o", str(out), "--no-pictures"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    assert not UNSAFE.search(text.replace("\n", "")), repr(UNSAFE.search(text.replace("\n", "")))
    assert "U+202E" in text


def test_svg_screenshot_is_well_formed(evil: Path, tmp_path: Path) -> None:
    pytest.importorskip("PySide6")
    for view in ("table", "timeline"):
        out = tmp_path / f"{view}.svg"
        r = run_cli(["screenshot", str(evil), "-o", str(out), "--view", view, "--size", "900x500"], tmp_path, cap=None)
        assert r.returncode == 0, r.stderr[-2000:]
        ET.parse(out)  # raises on a document that is not well-formed XML
        assert "\x1b" not in out.read_text(encoding="utf-8")


def test_qt_table_display_role_escapes() -> None:
    import numpy as np

    from kviewer.session.table_data import Col

    col = Col("name", "kernel", "text", np.arange(len(EVIL_NAMES)), categories=EVIL_NAMES)
    for i in range(len(EVIL_NAMES)):
        assert not UNSAFE.search(col.text(i)), repr(col.text(i))
