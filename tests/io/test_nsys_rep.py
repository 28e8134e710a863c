"""``.nsys-rep`` reports: without nsys one line naming the export command; with nsys the report is
exported to SQLite in the private temporary folder and loaded, and Ctrl+C stops the export.

The report is real (sample_traces/mlp_graph_nsys_graph.nsys-rep, nsys 2025.x on an H200). nsys is
not installed on the test machines, so the "nsys on PATH" cases put a stand-in ``nsys`` first on
PATH that copies the SQLite export nsys itself made of this report (mlp_graph_nsys_graph.sqlite.gz):
what is tested is kviewer's side (command line, temporary folder, progress, cancel, loading).
"""

from __future__ import annotations

import gzip
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kviewer.errors import LoadCancelled, MissingDependency
from kviewer.io import load
from kviewer.io.registry import CancelToken

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "sample_traces" / "mlp_graph_nsys_graph.nsys-rep"
EXPORT = REPO / "sample_traces" / "mlp_graph_nsys_graph.sqlite.gz"


def _fake_nsys(folder: Path, sqlite: Path, delay: float = 0.0) -> Path:
    exe = folder / "nsys"
    exe.write_text(
        "#!/bin/sh\n"
        f"sleep {delay}\n"
        'out=""; while [ $# -gt 0 ]; do case "$1" in --output) out="$2"; shift 2;; *) shift;; esac; done\n'
        f'cp "{sqlite}" "$out"\n'
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


@pytest.fixture
def sqlite(tmp_path: Path) -> Path:
    out = tmp_path / "export.sqlite"
    with gzip.open(EXPORT) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def test_without_nsys_one_line_naming_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("KVIEWER_NSYS", raising=False)
    with pytest.raises(MissingDependency) as info:
        load(REPORT)
    assert "nsys export --type sqlite" in str(info.value)
    r = subprocess.run([sys.executable, "-m", "kviewer", "info", str(REPORT), "-q"], capture_output=True, text=True,
                       cwd=REPO, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "PATH": "/nonexistent"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "nsys export --type sqlite" in r.stderr


def test_with_nsys_the_export_is_loaded(tmp_path: Path, sqlite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NSYS", str(_fake_nsys(tmp_path, sqlite)))
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    seen: list[str] = []
    trace = load(REPORT, progress=lambda f, m: seen.append(m))
    direct = load(sqlite)
    assert trace.meta.path == str(REPORT)
    assert len(trace.kernels) == len(direct.kernels) > 0 and len(trace.graph_launches) == len(direct.graph_launches) > 0


def test_ctrl_c_stops_the_export(tmp_path: Path, sqlite: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NSYS", str(_fake_nsys(tmp_path, sqlite, delay=30)))
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    token = CancelToken()
    threading.Timer(0.8, token.cancel).start()
    t0 = time.monotonic()
    with pytest.raises(LoadCancelled):
        load(REPORT, cancel=token)
    assert time.monotonic() - t0 < 10  # the 30 s export was stopped
