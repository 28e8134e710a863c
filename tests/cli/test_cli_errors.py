"""Bad input exits with status 2 and one clear line naming the file; never a traceback."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kviewer.cli import main


def _foreign_sqlite(p: Path) -> None:
    con = sqlite3.connect(p)
    con.execute("create table customers(id integer, name text)")
    con.commit()
    con.close()


def _corrupt_sqlite(p: Path) -> None:
    p.write_bytes(b"SQLite format 3\x00" + os.urandom(4096))


CASES = {
    "empty.json": lambda p: p.write_bytes(b""),
    "not_a_trace.json": lambda p: p.write_text('{"hello": [1, 2, 3]}'),
    "list_of_numbers.json": lambda p: p.write_text("[1, 2, 3]"),
    "random.bin": lambda p: p.write_bytes(os.urandom(10_000)),
    "random.sqlite": lambda p: p.write_bytes(os.urandom(10_000)),
    "corrupt.sqlite": _corrupt_sqlite,
    "foreign.sqlite": _foreign_sqlite,
    "text.txt": lambda p: p.write_text("hello world\n" * 10),
    "empty.json.gz": lambda p: p.write_bytes(b"\x1f\x8b"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("command", ["info", "summary", "kernels"])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, command: str) -> None:
    p = tmp_path / name
    CASES[name](p)
    code = main([command, str(p)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert str(p) in lines[0]
    assert "Traceback" not in err


def test_directory_and_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "directory" in err
    assert main(["info", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bad_option_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["summary", str(tmp_path / "x"), "--format", "xml"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice" in err and len(err.strip().splitlines()) == 1


def test_real_process_exit_status(tmp_path: Path) -> None:
    p = tmp_path / "garbage.json"
    p.write_text("{ this is not json")
    proc = subprocess.run([sys.executable, "-m", "kviewer", "summary", str(p)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(p) in proc.stderr


def test_terminal_progress_draws_and_clears() -> None:
    import io

    from kviewer.cli import TerminalProgress

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    bar = TerminalProgress("big.json", stream=stream, delay=0.0)
    bar(0.5, "decoding")
    assert "50.0%" in stream.getvalue() and "big.json" in stream.getvalue()
    bar.close()
    assert stream.getvalue().endswith("\r")
    quiet = io.StringIO()
    TerminalProgress("x", stream=quiet, delay=0.0)(0.5, "not a tty")
    assert quiet.getvalue() == ""
