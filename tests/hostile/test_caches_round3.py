"""Round 3 (issue #28 items 5 and 6, issue #30): the caches.

* a file rewritten with the same size and modification time (``cp -p``, a tool that restores
  times) is not served from the cache: entries are keyed by content too;
* the trace is written into the cache streaming, one table at a time, and not at all when that
  would pass the memory budget (the load itself still succeeds);
* traces and analyses live in one database under one bound (``KVIEWER_CACHE_MAX_BYTES``) with
  one least-recently-used eviction.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from tests.hostile.build import kineto_json
from tests.hostile.conftest import run_cli


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _same_size_rewrite(p: Path, old: str, new: str) -> None:
    """Rewrite ``p`` replacing ``old`` by ``new`` (same length), then put its times back."""
    st = os.stat(p)
    data = p.read_bytes()
    assert len(old) == len(new) and old.encode() in data
    p.write_bytes(data.replace(old.encode(), new.encode()))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(p)
    assert (after.st_size, after.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


def test_a_rewrite_with_the_same_size_and_mtime_misses(tmp_path: Path) -> None:
    """The CLI with the cache on: summary, rewrite (same size, times restored), summary again:
    the new names show, not the cached old ones."""
    p = kineto_json(tmp_path / "t.json", ["kernel_one", "kernel_two"])
    env = {"KVIEWER_NO_CACHE": "", "KVIEWER_CACHE_DIR": str(tmp_path / "cache")}

    def names() -> list[str]:
        r = run_cli(["summary", str(p), "--format", "json"], tmp_path, **env)
        assert r.returncode == 0, r.stderr
        return sorted(row["name"] for row in json.loads(r.stdout))

    assert names() == ["kernel_one", "kernel_two"]
    assert names() == ["kernel_one", "kernel_two"]  # a hit
    _same_size_rewrite(p, "kernel_one", "kernel_ONE")
    assert names() == ["kernel_ONE", "kernel_two"]


def test_a_big_file_rewritten_outside_the_sampled_blocks_misses(cache_on: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the whole-file hash size only sampled blocks are hashed: a change between them is
    still caught by the inode change time (which no tool can set back)."""
    from kviewer.io import cache
    from kviewer.io.cache import keys

    monkeypatch.setattr(keys, "WHOLE_HASH_MAX", 1024)  # sample even this small file
    monkeypatch.setattr(keys, "SAMPLES", 2)
    monkeypatch.setattr(keys, "SAMPLE_BLOCK", 16)
    p = kineto_json(tmp_path / "t.json", ["kernel_one"] + [f"k{i}" for i in range(200)])
    a = cache.source_id(p)
    assert cache.source_id(p) == a  # stable
    _same_size_rewrite(p, "kernel_one", "kernel_ONE")
    b = cache.source_id(p)
    assert b.digest == a.digest  # the change lies between the two sampled blocks
    assert b.key() != a.key()  # the inode change time moved on


def test_analysis_cache_misses_after_a_same_size_rewrite(cache_on: Path, sample_traces: Path, tmp_path: Path) -> None:
    from kviewer.io import load
    from kviewer.session import analysis_cache
    from kviewer.session.analyses import compute_sol

    p = tmp_path / "t.pt.trace.json.gz"
    shutil.copy(sample_traces / "h200_block2_eager.pt.trace.json.gz", p)
    trace = load(p, use_cache=False)
    sid = analysis_cache.identity(str(p))
    assert analysis_cache.put(sid, trace, compute_sol(trace))
    assert analysis_cache.get(analysis_cache.identity(str(p)), trace) is not None
    st = os.stat(p)
    data = bytearray(p.read_bytes())
    data[-9] ^= 0xFF  # one byte of the gzip trailer: same size
    p.write_bytes(bytes(data))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert analysis_cache.get(analysis_cache.identity(str(p)), trace) is None


# ---------------------------------------------------------------------------------------------
# item 5: streaming writes inside the memory budget


def _big_trace(tmp_path: Path, n: int = 200_000):  # type: ignore[no-untyped-def]
    from kviewer.io import load

    return load(kineto_json(tmp_path / "big.json", [f"kernel_{i % 500}" for i in range(n)]), use_cache=False)


def test_the_cache_is_written_one_column_at_a_time(cache_on: Path, tmp_path: Path) -> None:
    """Python's allocations while storing peak below the whole encoded trace (what the old
    encode-everything-then-insert held), measured with tracemalloc in the same run: the blobs
    are made and written one column at a time."""
    from kviewer.io import cache

    trace = _big_trace(tmp_path)
    path = tmp_path / "big.json"
    tracemalloc.start()
    whole = cache.encode_trace(trace, compress=False)  # what the old put held before its first insert
    _, encode_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    encoded = sum(len(b.data) for b in whole.columns)
    largest = max(len(b.data) for b in whole.columns)
    del whole
    store = cache.TraceCache(cache_on, max_bytes=1 << 30, compress=False)
    tracemalloc.start()
    try:
        assert store.put(path, trace, cache.source_id(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert largest < encoded / 2  # several columns worth streaming
    assert encode_peak >= encoded
    assert peak < encoded / 2, (peak, encoded, encode_peak, largest)
    back = store.get(path)
    assert back is not None and back.kernels["name"].astype(str).tolist() == trace.kernels["name"].astype(str).tolist()


def test_storing_past_the_memory_budget_is_skipped_not_failed(cache_on: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.io import cache, load

    trace = _big_trace(tmp_path, 5_000)
    path = tmp_path / "big.json"
    monkeypatch.setenv("KVIEWER_MAX_MEMORY", "64M")  # far below what this process already holds
    store = cache.TraceCache(cache_on)
    assert not store.put(path, trace, cache.source_id(path))
    assert store.entries() == []  # nothing half-written
    monkeypatch.delenv("KVIEWER_MAX_MEMORY")
    assert store.put(path, trace, cache.source_id(path))
    assert len(store.entries()) == 1
    assert len(load(path).kernels) == 5_000


# ---------------------------------------------------------------------------------------------
# issue #30: one cache, one bound, one eviction


def test_one_database_one_bound_one_eviction(cache_on: Path, sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.io import cache, load
    from kviewer.session import analysis_cache
    from kviewer.session.analyses import compute_sol

    p = tmp_path / "t.pt.trace.json.gz"
    shutil.copy(sample_traces / "h200_block2_eager.pt.trace.json.gz", p)
    trace = load(p)  # stored in the trace cache
    store = cache.default_cache()
    (entry,) = store.entries()
    sid = analysis_cache.identity(str(p))
    info = compute_sol(trace)
    assert analysis_cache.put(sid, trace, info)
    assert sorted(os.listdir(cache_on)) == sorted(f for f in os.listdir(cache_on) if f.startswith(cache.DB_NAME))  # no analysis.sqlite
    # KVIEWER_CACHE_MAX_BYTES reaches the analyses: a bound below one SOL table refuses it
    monkeypatch.setenv("KVIEWER_CACHE_MAX_BYTES", "1K")
    assert not analysis_cache.put(sid, trace, info)
    # one eviction over both: a bound that holds the trace or the SOL, not both, drops the older
    monkeypatch.setenv("KVIEWER_CACHE_MAX_BYTES", str(entry["nbytes"] + 64))
    analysis_cache.clear()
    assert analysis_cache.put(sid, trace, info)  # newer than the trace: the trace goes
    assert cache.default_cache().entries() == []
    assert analysis_cache.get(sid, trace) is not None
