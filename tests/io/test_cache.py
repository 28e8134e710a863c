"""The trace cache: a hit equals a cold load, changes invalidate, LRU bound, bypasses, damage."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

# A text dtype that keeps missing values on this pandas: "str" (NaN for missing) on pandas 3; on
# pandas 2 dtype="str" is numpy unicode, which turns None into the text "None", so "string" (pd.NA).
TEXT = "str" if int(pd.__version__.split(".")[0]) >= 3 else "string"

from kviewer import cli
from kviewer.core import Diagnostic, Trace, TraceMeta, schema
from kviewer.io import cache, registry
from kviewer.io.cache import keys as cache_keys
from kviewer.io.cache import store as cache_store
from kviewer.io.memory import parse_size
from kviewer.io.registry import load

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"
NSYS = "h200_llm_train_nvtx.sqlite.gz"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache switched on, in a fresh tmp dir (conftest switches it off for other tests)."""
    d = tmp_path / "cache"
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.delenv("KVIEWER_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(d))
    return d


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files a real loader parsed (a cache hit parses nothing)."""
    seen: list[str] = []

    def counting(spec: registry.LoaderSpec) -> registry.LoaderSpec:
        def load_fn(path: Path, progress: Any, cancel: Any) -> Trace:
            seen.append(Path(path).name)
            return spec.load(path, progress, cancel)

        return dataclasses.replace(spec, load=load_fn)

    monkeypatch.setattr(registry, "_loaders", [counting(s) for s in registry.loaders()])
    return seen


def assert_same_trace(a: Trace, b: Trace) -> None:
    """Every table equal (values, dtypes, categories) and the metadata equal."""
    for name in schema.TABLES:
        x, y = a.table(name), b.table(name)
        assert list(x.dtypes) == list(y.dtypes), name
        pd.testing.assert_frame_equal(x, y, check_exact=True, check_categorical=True, obj=name)
        for col in x.columns:
            if isinstance(x[col].dtype, pd.CategoricalDtype):
                assert x[col].cat.categories.dtype == y[col].cat.categories.dtype, f"{name}.{col}"
    assert a.meta == b.meta


def copy_sample(src: Path, folder: Path, name: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / (name or src.name)
    shutil.copyfile(src, dst)
    return dst


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# hits


@pytest.mark.parametrize("name", [EAGER, COMPILED, NSYS])
def test_hit_equals_cold_load(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str], name: str) -> None:
    f = copy_sample(sample_traces / name, tmp_path / "in")
    cold = load(f, use_cache=False)
    stored = load(f)
    hit = load(f)
    assert calls == [f.name, f.name]  # the third load parsed nothing
    assert_same_trace(cold, stored)
    assert_same_trace(cold, hit)
    assert hit.sizes()["kernels"] > 0
    (entry,) = cache.TraceCache(cache_dir).entries()
    assert entry["path"] == str(f.resolve())
    assert entry["size"] == f.stat().st_size


@pytest.mark.samples
@pytest.mark.parametrize(
    "rel",
    [
        "ncu/h200_llm_block_eager.ncu-rep",  # metrics with a free-text column
        "ncu/metrics.csv",
        "rocprof/hpctraining_finite_difference/results.csv",
        "rocprof/rocprofv3_2025",  # a folder: keyed by every file in it
        "torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz",
        "torch/worker0.1623143089861.pt.trace.json.gz",
    ],
)
def test_hit_equals_cold_load_other_formats(samples: Path, cache_dir: Path, calls: list[str], rel: str) -> None:
    f = samples / rel
    cold = load(f, use_cache=False)
    stored = load(f)
    hit = load(f)
    assert len(calls) == 2
    assert_same_trace(cold, stored)
    assert_same_trace(cold, hit)


@pytest.mark.samples
def test_hit_equals_cold_load_big(samples: Path, cache_dir: Path, calls: list[str]) -> None:
    """The 500k-event trace: every column of every table comes back identical."""
    f = samples / "torch" / "h200_llm_train_big.pt.trace.json.xz"
    cold = load(f)
    hit = load(f)
    assert calls == [f.name]
    assert_same_trace(cold, hit)
    assert len(hit.cpu_slices) > 300_000


def test_hit_keeps_the_path_as_given(sample_traces: Path, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    load(f)
    monkeypatch.chdir(f.parent)
    hit = load(f.name)
    assert hit.meta.path == f.name
    assert_same_trace(load(f.name, use_cache=False), hit)


def test_hit_is_writable(sample_traces: Path, tmp_path: Path, cache_dir: Path) -> None:
    """Columns read from the cache are ordinary writable arrays, as a cold load's are."""
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    load(f)
    hit = load(f)
    hit.kernels.loc[0, "dur"] = 1
    assert hit.kernels["dur"].iloc[0] == 1


# ---------------------------------------------------------------------------------------------
# invalidation


def test_touch_invalidates(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str]) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    load(f)
    load(f)
    assert len(calls) == 1
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    load(f)
    assert len(calls) == 2
    # the stale parse of the same path was dropped when the new one was stored
    assert len(cache.TraceCache(cache_dir).entries()) == 1


def test_changed_content_invalidates(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str]) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in", "trace.json.gz")
    st = f.stat()
    first = load(f)
    # same name, other content (and size); restore the old mtime so only the size tells
    shutil.copyfile(sample_traces / COMPILED, f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    second = load(f)
    assert len(calls) == 2
    assert_same_trace(second, load(f, use_cache=False))
    assert set(first.kernels["name"].astype(str)) != set(second.kernels["name"].astype(str))


def test_code_change_invalidates(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another kviewer version / schema / loader source gives another key."""
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    load(f)
    monkeypatch.setattr(cache_keys, "fingerprint", lambda: "a-different-build")
    load(f)
    assert len(calls) == 2


def test_partial_load_is_decided_on_the_kind_not_the_words() -> None:
    def trace(*ws: Diagnostic) -> Trace:
        return Trace(meta=TraceMeta(path="x.json", source_format="torch", warnings=list(ws)))

    assert not cache.load_was_complete(trace(Diagnostic.warning("damaged", "x.json", "2 names could not be read")))
    assert not cache.load_was_complete(trace(Diagnostic.warning("truncated", "x.json", "no words about it")))
    # words that the old regex took for a cut file do not make a complete load partial
    assert cache.load_was_complete(trace(Diagnostic.warning("skipped", "x.json", "skipped 3 incomplete, truncated, cut events")))
    assert cache.load_was_complete(trace())


def test_fingerprint_covers_loader_sub_packages() -> None:
    """A loader edited inside a format package (io/torch/, io/ncu/...) must change the key too."""
    names = {rel for rel, _ in cache_keys.fingerprint_sources()}
    assert {"core/trace.py", "io/nsys.py", "io/torch/columns.py", "io/ncu/report.py", "io/rocprof/v3_csv.py", "io/cache/codec.py"} <= names


def test_file_changing_during_load_is_not_stored(sample_traces: Path, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    real = registry.loaders()

    def touching(spec: registry.LoaderSpec) -> registry.LoaderSpec:
        def load_fn(path: Path, progress: Any, cancel: Any) -> Trace:
            trace = spec.load(path, progress, cancel)
            st = f.stat()
            os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # "still being written"
            return trace

        return dataclasses.replace(spec, load=load_fn)

    monkeypatch.setattr(registry, "_loaders", [touching(s) for s in real])
    load(f)
    assert cache.TraceCache(cache_dir).entries() == []


def test_partial_load_is_not_cached(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str]) -> None:
    """A cut file (maybe still being written) loads partially with a warning, and is not cached."""
    raw = gzip.decompress((sample_traces / EAGER).read_bytes())
    f = tmp_path / "in" / "cut.pt.trace.json.gz"
    f.parent.mkdir()
    whole = gzip.compress(raw)
    f.write_bytes(whole[: len(whole) * 2 // 3])
    t = load(f)
    assert [w.kind for w in t.meta.warnings] == ["truncated"] and len(t.cpu_slices) > 0
    assert not cache.load_was_complete(t)
    load(f)
    assert len(calls) == 2
    assert cache.TraceCache(cache_dir).entries() == []


# ---------------------------------------------------------------------------------------------
# bound and eviction


def test_lru_eviction_under_a_small_bound(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = sample_traces / EAGER
    files = [copy_sample(src, tmp_path / "in", f"t{i}.pt.trace.json.gz") for i in range(3)]
    trace = load(src, use_cache=False)
    size = cache.encode_trace(trace).nbytes
    clock = iter(range(1000, 2000))
    monkeypatch.setattr(cache_store.time, "time", lambda: float(next(clock)))
    store = cache.TraceCache(tmp_path / "cache", max_bytes=int(size * 2.5))
    a, b, c = files
    assert store.put(a, trace, cache.source_id(a))
    assert store.put(b, trace, cache.source_id(b))
    assert store.get(a) is not None  # a is now more recently used than b
    assert store.put(c, trace, cache.source_id(c))
    kept = {Path(e["path"]).name for e in store.entries()}
    assert kept == {"t0.pt.trace.json.gz", "t2.pt.trace.json.gz"}
    assert store.get(b) is None
    assert sum(e["nbytes"] for e in store.entries()) <= store.max_bytes
    # a trace larger than the whole bound is never stored
    tiny = cache.TraceCache(tmp_path / "tiny", max_bytes=size // 2)
    assert not tiny.put(a, trace, cache.source_id(a))
    assert tiny.entries() == []


def test_bound_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("KVIEWER_CACHE_MAX_BYTES", "300M")
    assert cache.default_cache().max_bytes == 300 * 1024**2
    monkeypatch.setenv("KVIEWER_CACHE_MAX_BYTES", "lots")
    assert cache.default_cache().max_bytes == cache.DEFAULT_MAX_BYTES
    assert parse_size("2GiB") == 2 * 1024**3
    assert parse_size("1.5k") == 1536


def test_cache_dir_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KVIEWER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "kviewer"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == Path.home() / ".cache" / "kviewer"
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


# ---------------------------------------------------------------------------------------------
# bypass


def test_environment_bypass(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    load(f)
    load(f)
    assert len(calls) == 2
    assert not (cache_dir / cache.DB_NAME).exists()
    monkeypatch.setenv("KVIEWER_NO_CACHE", "0")
    load(f)
    load(f)
    assert len(calls) == 3


def test_cli_no_cache_flag(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    for command in ("info", "summary", "kernels"):
        assert cli.main([command, str(f), "-q", "--no-cache"]) == 0
    assert len(calls) == 3
    assert not (cache_dir / cache.DB_NAME).exists()
    # the flag travels as an argument (use_cache=False), never through the environment
    assert "KVIEWER_NO_CACHE" not in os.environ
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    assert cli.main(["summary", str(f), "-q"]) == 0
    assert cli.main(["summary", str(f), "-q"]) == 0
    assert len(calls) == 4
    assert len(cache.TraceCache(cache_dir).entries()) == 1
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# damage and safety


@pytest.mark.parametrize("damage", ["garbage", "cut"])
def test_damaged_cache_is_rebuilt_with_a_warning(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str], damage: str) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    cold = load(f, use_cache=False)
    load(f)
    db = cache_dir / cache.DB_NAME
    if damage == "garbage":
        db.write_bytes(np.random.default_rng(0).bytes(300_000))
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
    else:
        # fold the WAL in, then cut the database file in the middle of its pages
        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2] + b"\x00" * 100)
    again = load(f)
    assert [w.kind for w in again.meta.warnings] == ["cache"], again.meta.warnings
    again.meta.warnings.clear()
    assert_same_trace(cold, again)
    # the rebuilt cache works: the next load is a hit, without the warning
    hit = load(f)
    assert hit.meta.warnings == []
    assert_same_trace(cold, hit)
    assert calls == [f.name] * 3  # cold, first store, reload after the damage


def test_damaged_blob_is_reloaded_with_a_warning(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str]) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    cold = load(f, use_cache=False)
    load(f)
    con = sqlite3.connect(cache_dir / cache.DB_NAME)
    with con:
        n = con.execute("update columns set data = randomblob(length(data)) where tbl = 'cpu_slices' and col = 'start'").rowcount
    con.close()
    assert n == 1
    again = load(f)
    assert [w.kind for w in again.meta.warnings] == ["cache"], again.meta.warnings
    again.meta.warnings.clear()
    assert_same_trace(cold, again)
    assert_same_trace(cold, load(f))
    assert len(calls) == 3  # cold, first store, reload after the damage; then a hit


def test_damaged_column_info_is_reloaded_and_the_entry_replaced(sample_traces: Path, tmp_path: Path, cache_dir: Path, calls: list[str]) -> None:
    """A column whose stored info is not JSON, met while the table's rows are still being read:
    the damaged entry is deleted while that read is open, the file is loaded again and stored,
    and the next load hits."""
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    cold = load(f, use_cache=False)
    load(f)
    con = sqlite3.connect(cache_dir / cache.DB_NAME)
    with con:
        first = con.execute("select col from columns where tbl = 'kernels' order by pos limit 1").fetchone()[0]
        n = con.execute("update columns set info = '{not json' where tbl = 'kernels' and col = ?", [first]).rowcount
    con.close()
    assert n == 1
    again = load(f)
    assert [w.kind for w in again.meta.warnings] == ["cache"], again.meta.warnings
    assert "damaged" in again.meta.warnings[0].message
    again.meta.warnings.clear()
    assert_same_trace(cold, again)
    con = sqlite3.connect(cache_dir / cache.DB_NAME)
    bad = con.execute("select count(*) from columns where info = '{not json'").fetchone()[0]
    con.close()
    assert bad == 0  # the damaged entry is gone (the reload stored a good one)
    hit = load(f)
    assert hit.meta.warnings == []
    assert_same_trace(cold, hit)
    assert len(calls) == 3  # cold, first store, reload after the damage; then a hit


def test_inputs_are_never_written(sample_traces: Path, tmp_path: Path, cache_dir: Path) -> None:
    folder = tmp_path / "in"
    f = copy_sample(sample_traces / EAGER, folder)
    n = copy_sample(sample_traces / NSYS, folder)
    before = {p.name: (sha256(p), p.stat().st_mtime_ns) for p in folder.iterdir()}
    for _ in range(2):
        load(f)
        load(n)
    after = {p.name: (sha256(p), p.stat().st_mtime_ns) for p in folder.iterdir()}
    assert after == before  # same files, same bytes, same times: nothing written beside them
    assert (cache_dir / cache.DB_NAME).exists()


# ---------------------------------------------------------------------------------------------
# codec


def test_codec_round_trips_unusual_frames() -> None:
    df = pd.DataFrame(
        {
            "i8": np.array([1, -1, 3], dtype=np.int8),
            "u64": np.array([0, 2**63, 5], dtype=np.uint64),
            "f": [0.5, np.nan, -np.inf],
            "b": [True, False, True],
            "cat": pd.Categorical(["x", None, "y"], categories=["y", "x"], ordered=True),
            "s": pd.array(["a", None, "ü"], dtype=TEXT),
            "o": np.array(["p", "q", ""], dtype=object),
        },
        index=pd.RangeIndex(10, 16, 2),
    )
    back = cache.decode_frame("t", cache.encode_frame("t", df))
    pd.testing.assert_frame_equal(df, back, check_exact=True)
    # a filtered table keeps its integer index
    sub = df.iloc[[0, 2]]
    pd.testing.assert_frame_equal(sub, cache.decode_frame("t", cache.encode_frame("t", sub, compress=False)), check_exact=True)


def test_repeated_texts_are_stored_once_each_and_read_back_exactly() -> None:
    """A text column whose values repeat (kernel names, kinds, notes) is stored as its distinct
    texts and a code per row (``strdict``); it reads back as the same column, missing values and
    dtype included. A column of mostly distinct texts keeps the per-row list (``str``)."""
    rng = np.random.default_rng(7)
    words = np.array(["gemm", "ü-norm", "", "a,b \"q\"", "x" * 300], dtype=object)
    n = 5000
    picks = words[rng.integers(0, len(words), n)]
    s_missing = pd.array(np.where(rng.random(n) < 0.1, None, picks), dtype=TEXT)
    df = pd.DataFrame({"obj": picks.copy(), "s": s_missing, "unique": pd.array([f"k{i}" for i in range(n)], dtype=TEXT),
                       "all_missing": pd.array([None] * n, dtype=TEXT)})
    for compress in (True, False):
        blobs = cache.encode_frame("t", df, compress=compress)
        kinds = {b.column: b.kind for b in blobs}
        assert kinds == {"obj": "strdict", "s": "strdict", "unique": "str", "all_missing": "strdict"}
        back = cache.decode_frame("t", blobs)
        pd.testing.assert_frame_equal(df, back, check_exact=True)
        assert back["s"].isna().sum() == df["s"].isna().sum() > 0


def test_damaged_text_codes_are_a_cache_problem() -> None:
    df = pd.DataFrame({"s": pd.array(["a", "b"] * 100, dtype=TEXT)})
    (blob,) = cache.encode_frame("t", df, compress=False)
    assert blob.kind == "strdict"
    short = dataclasses.replace(blob, data=blob.data[:-1])
    with pytest.raises(cache.CacheDamaged):
        cache.decode_frame("t", [short])
    split = blob.info["texts_bytes"]
    out_of_range = dataclasses.replace(blob, data=blob.data[:split] + np.full(200, 9, dtype=blob.info["codes_dtype"]).tobytes())
    with pytest.raises(cache.CacheDamaged):
        cache.decode_frame("t", [out_of_range])


def test_uncacheable_trace_still_loads(sample_traces: Path, tmp_path: Path, cache_dir: Path) -> None:
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    trace = load(f, use_cache=False)
    trace.devices["name"] = np.array([object()] * len(trace.devices), dtype=object)
    with pytest.raises(cache.NotCacheable):
        cache.encode_trace(trace)
    assert not cache.TraceCache(cache_dir).put(f, trace, cache.source_id(f))
    weird = dataclasses.replace(trace.meta, extra={"when": object()})
    with pytest.raises(cache.NotCacheable):
        cache.encode_meta(weird)
    assert cache.decode_meta(cache.encode_meta(TraceMeta(path="p", source_format="x", extra={"a": [1, "b"]}))).extra == {"a": [1, "b"]}


def test_unwritable_cache_dir_does_not_fail_loads(sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be\n")
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(blocker / "cache"))
    f = copy_sample(sample_traces / EAGER, tmp_path / "in")
    with caplog.at_level("WARNING", logger="kviewer.io.cache"):
        first = load(f)
        second = load(f)
    assert_same_trace(first, second)
    assert first.meta.warnings == []
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1  # said once, not per load
