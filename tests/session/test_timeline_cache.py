"""The timeline layout cached beside the parsed trace (a reopen paints without laying it out)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.io import load
from kviewer.session import analysis_cache, timeline_cache
from kviewer.session.analyses import compute_sol
from kviewer.session.tracks import Group, TraceTracks

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
SKIP = ("trace", "key", "source", "counters")


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal layouts: the same classes, values and arrays (dtype included), field by field."""
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, path
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            if f.name not in SKIP and f.name != "sol_info":
                same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    else:
        assert a == b or (a != a and b != b), (path, a, b)


def test_a_stored_layout_reads_back_as_built_and_recolours_as_build_does(cache_on: Path, sample_traces: Path) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    trace = load(path, use_cache=False)
    source = analysis_cache.identity(str(path))
    assert timeline_cache.get(source, trace) is None  # nothing stored yet
    built = timeline_cache.tracks_for_open(trace, source=source, background=False)
    back = timeline_cache.get(source, trace)
    assert back is not None and back.key != built.key and back.trace is trace
    same(TraceTracks.build(trace), back)
    # one object where the built layout has one: the lanes of the tree are the lanes of the list
    assert [id(x) for x in back.root.lanes()] == [id(back.lanes[x.index]) for x in back.root.lanes()]
    # with a speed of light: what build(trace, sol) lays out
    sol = compute_sol(trace)
    assert sol.ok
    coloured = timeline_cache.tracks_for_open(trace, sol=sol, source=source)
    assert coloured.sol_info is sol and coloured.source == source
    same(TraceTracks.build(trace, sol=sol), coloured)
    # the recolouring never wrote into the cached arrays
    same(TraceTracks.build(trace), timeline_cache.get(source, trace))


def test_the_background_write_is_the_same_entry(cache_on: Path, sample_traces: Path) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    trace = load(path, use_cache=False)
    source = analysis_cache.identity(str(path))
    timeline_cache.tracks_for_open(trace, source=source)  # background=True: written on the writer thread
    timeline_cache.flush()
    back = timeline_cache.get(source, trace)
    assert back is not None
    same(TraceTracks.build(trace), back)


def test_misses_touched_file_no_cache_and_foreign_rows(cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    trace = load(path, use_cache=False)
    source = analysis_cache.identity(str(path))
    assert source is not None
    assert timeline_cache.put(source, TraceTracks.build(trace))
    # a layout with a speed of light is not what this cache stores
    assert not timeline_cache.put(source, TraceTracks.build(trace, sol=compute_sol(trace)))
    # another trace (other row counts) under the same key reads as a miss
    other = load(sample_traces / "h200_block2_eager.pt.trace.json.gz", use_cache=False)
    assert timeline_cache.get(source, other) is None
    # a row naming a class outside the closed list is a miss, never an object built from it
    from kviewer.io.cache import default_cache

    data = timeline_cache.encode(timeline_cache.snapshot(TraceTracks.build(trace)))
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8:8 + n])
    head["tree"]["root"]["o"] = "Popen"
    bad = json.dumps(head).encode()
    default_cache().put_extra(timeline_cache._key(source), timeline_cache.KIND, "", len(bad).to_bytes(8, "little") + bad + data[8 + n:])
    assert timeline_cache.get(source, trace) is None
    # KVIEWER_NO_CACHE bypasses it
    assert timeline_cache.put(source, TraceTracks.build(trace))
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    assert timeline_cache.get(source, trace) is None
    assert not timeline_cache.put(source, TraceTracks.build(trace))
    monkeypatch.delenv("KVIEWER_NO_CACHE")
    # the file touched: its identity changes, the entry is not found
    import os

    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert timeline_cache.get(analysis_cache.identity(str(path)), trace) is None
    assert isinstance(TraceTracks.build(trace).root, Group)
