"""What an install without the optional parts does: a .ncu-rep names the extra, memory is read in bytes."""

from __future__ import annotations

import builtins
import sys
from pathlib import Path
from typing import Any

import pytest

from kviewer.cli import main
from kviewer.errors import MissingDependency
from kviewer.io import load
from kviewer.io import memory


def test_ncu_rep_without_ncu_report_names_the_extra(sample_traces: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rep = sample_traces / "h200_block_fullset_3k.ncu-rep.gz"
    monkeypatch.setitem(sys.modules, "ncu_report", None)  # import ncu_report raises ImportError
    with pytest.raises(MissingDependency) as err:
        load(rep, use_cache=False)
    assert "kviewer[ncu]" in str(err.value) and rep.name in str(err.value)
    assert main(["info", str(rep), "-q", "--no-cache"]) == 2
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and "kviewer[ncu]" in line


def test_resident_memory_without_proc_is_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where /proc is missing (macOS) the figure comes from psutil, in bytes: ru_maxrss is bytes there, not KiB."""
    psutil = pytest.importorskip("psutil", reason="psutil is a dependency; a broken install should fail elsewhere")
    real_open = builtins.open

    def no_proc(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == "/proc/self/statm":  # what rss() reads first; psutil reads /proc/PID/…
            raise OSError("no /proc here")
        return real_open(file, *args, **kwargs)

    with_proc = memory.rss()
    monkeypatch.setattr(builtins, "open", no_proc)
    without = memory.rss()
    now = psutil.Process().memory_info().rss
    assert without > 10 * 1024**2
    assert abs(without - now) <= 0.05 * now
    assert abs(without - with_proc) <= 0.25 * with_proc
