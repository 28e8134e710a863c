"""``kviewer screenshot``: every view to PNG/SVG with no display, size and range options, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kviewer.cli import (
    EXIT_OK,
    EXIT_USER_ERROR,
    UserError,
    main,
    parse_size,
    parse_time_range,
)

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
REPO = Path(__file__).resolve().parents[2]


def run_headless(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a fresh process with no display at all (no DISPLAY, WAYLAND_DISPLAY or
    QT_QPA_PLATFORM): the command must pick the offscreen platform itself."""
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["KVIEWER_NO_CACHE"] = "1"
    return subprocess.run([sys.executable, "-m", "kviewer", *argv], capture_output=True, text=True, env=env, timeout=300, cwd=REPO, check=False)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_parse_size_and_range() -> None:
    assert parse_size("1600x1000") == (1600, 1000)
    assert parse_size("800X600") == (800, 600)
    assert parse_time_range("1.5ms:3ms") == (1.5e6, 3e6)
    assert parse_time_range("1000000:2000000") == (1e6, 2e6)
    assert parse_time_range("250us:1.5 ms") == (250e3, 1.5e6)
    assert parse_time_range(":2ms") == (None, 2e6)
    assert parse_time_range("1s:") == (1e9, None)
    for bad in ("1600", "axb", "10x10", "100000x100"):
        with pytest.raises(UserError, match="--size"):
            parse_size(bad)
    for bad in ("3ms", ":", "1ms:2ms:3ms", "2ms:1ms", "1parsec:2ms", "x:1ms"):
        with pytest.raises(UserError, match="--range"):
            parse_time_range(bad)


def test_timeline_png_with_range_and_size(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "tl.png"
    r = run_headless("screenshot", str(sample_traces / EAGER), "-o", str(out), "--view", "timeline", "--size", "900x320", "--range", "1.5ms:3ms", "-q")
    assert r.returncode == EXIT_OK, r.stderr
    assert r.stdout.strip() == str(out)
    assert r.stderr == ""  # the offscreen platform's chatter is not shown
    assert png_size(out) == (900, 320)
    # another range draws another picture
    other = tmp_path / "tl2.png"
    r = run_headless("screenshot", str(sample_traces / EAGER), "-o", str(other), "--view", "timeline", "--size", "900x320", "--range", "5000000:9000000", "-q")
    assert r.returncode == EXIT_OK, r.stderr
    assert other.read_bytes() != out.read_bytes()


def test_window_at_2x_and_compare_as_svg(sample_traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "win.png"
    r = run_headless("screenshot", str(sample_traces / EAGER), "-o", str(out), "--size", "1000x700", "--scale", "2", "-q")
    assert r.returncode == EXIT_OK, r.stderr
    assert png_size(out) == (2000, 1400)
    svg = tmp_path / "cmp.svg"
    r = run_headless("screenshot", str(sample_traces / EAGER), str(sample_traces / COMPILED), "-o", str(svg), "--view", "compare", "-q")
    assert r.returncode == EXIT_OK, r.stderr
    root = ET.parse(svg).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox") == "0 0 1600 1000"
    texts = "".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "triton_" in texts  # the compiled model's fused kernels are listed


def test_user_errors_exit_2_with_one_line(sample_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eager = str(sample_traces / EAGER)
    cases = [
        (["screenshot", eager, "-o", str(tmp_path / "x.jpg")], ".png or .svg"),
        (["screenshot", eager, "-o", str(tmp_path / "x.png"), "--view", "compare"], "needs two files"),
        (["screenshot", eager, "-o", str(tmp_path / "x.png"), "--view", "table", "--range", "1ms:2ms"], "--range applies"),
        (["screenshot", eager, "-o", str(tmp_path / "x.png"), "--size", "big"], "--size"),
        (["screenshot", eager, "-o", str(tmp_path / "x.png"), "--range", "2ms:1ms"], "--range"),
        (["screenshot", eager, "-o", str(tmp_path / "x.png"), "--view", "graph"], "invalid choice"),
        (["screenshot", eager, eager, eager, "-o", str(tmp_path / "x.png")], "one file, or two"),
        (["screenshot", eager, "-o", str(tmp_path / "none" / "x.png")], "does not exist"),
        (["screenshot", eager], "-o"),
    ]
    for argv, needle in cases:
        assert main(argv) == EXIT_USER_ERROR, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, (argv, err)
    assert not list(tmp_path.iterdir())
