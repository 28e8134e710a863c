"""The Kineto reader thread's switch interval: shortened while a reader runs, restored after."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from kviewer.errors import LoadError
from kviewer.io import load
from kviewer.io.torch import reader as reader_mod


def _trace(path: Path, n: int = 2000) -> Path:
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 1, "ts": i * 10, "dur": 5} for i in range(n)]
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


@pytest.fixture
def interval():
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.004)  # a value the reader's own is not, so a restore is visible
    yield 0.004
    sys.setswitchinterval(before)


def test_readers_share_the_short_interval_and_the_last_restores_it(tmp_path: Path, interval: float) -> None:
    path = _trace(tmp_path / "t.json.gz")
    a = reader_mod._Reader(path)
    assert sys.getswitchinterval() == pytest.approx(reader_mod._SWITCH_INTERVAL)
    b = reader_mod._Reader(path)  # a second load at the same time (two worker threads)
    a.close()
    assert sys.getswitchinterval() == pytest.approx(reader_mod._SWITCH_INTERVAL)
    a.close()  # closing twice counts once
    assert sys.getswitchinterval() == pytest.approx(reader_mod._SWITCH_INTERVAL)
    while b.get() is not None:
        pass
    b.close()
    assert sys.getswitchinterval() == pytest.approx(interval)


def test_a_load_restores_the_interval_also_when_it_fails(tmp_path: Path, interval: float) -> None:
    good = _trace(tmp_path / "t.json.gz")
    trace = load(good, use_cache=False)
    assert trace.sizes()["cpu_slices"] == 2000
    assert sys.getswitchinterval() == pytest.approx(interval)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2, "name": "a"}, {"ph": ') + b"\x00" * 64)
    try:
        load(bad, use_cache=False)
    except LoadError:
        pass
    assert sys.getswitchinterval() == pytest.approx(interval)
