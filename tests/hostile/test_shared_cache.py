"""The trace cache on a shared machine: private modes, and a cache someone else could touch is
refused with a warning and bypassed (never read, never written through)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.hostile.build import nsys_export
from tests.hostile.conftest import run_cli


def _cached_run(p: Path, tmp_path: Path, cache: Path) -> dict[str, object]:
    r = run_cli(["info", str(p), "--format", "json"], tmp_path, KVIEWER_NO_CACHE="", KVIEWER_CACHE_DIR=str(cache))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_cache_is_created_private(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0])
    cache = tmp_path / "cache"
    _cached_run(p, tmp_path, cache)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    files = list(cache.iterdir())
    assert files
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f


def test_world_writable_cache_is_refused_and_untouched(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["real_kernel"], [0])
    cache = tmp_path / "shared"
    # another user's forged entry: a real cache made elsewhere, then planted in a folder everyone can write
    _cached_run(p, tmp_path, tmp_path / "forger")
    cache.mkdir()
    os.chmod(cache, 0o777)
    shutil.copy(tmp_path / "forger" / "traces.sqlite", cache / "traces.sqlite")
    con = sqlite3.connect(cache / "traces.sqlite")
    con.execute("update entries set meta = ?", [b"{}"])  # the forged content
    con.commit()
    con.close()
    before = {f.name: f.read_bytes() for f in cache.iterdir()}
    info = _cached_run(p, tmp_path, cache)
    assert info["tables"]["kernels"] == 1 and info["file"] == str(p)  # loaded from the file itself
    assert any("can be written by other users" in w and "not used" in w for w in info["warnings"])
    assert {f.name: f.read_bytes() for f in cache.iterdir()} == before


def test_cache_file_symlinked_to_another_database_is_not_written(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0])
    victim = tmp_path / "victim.sqlite"
    con = sqlite3.connect(victim)
    con.execute("create table precious(x)")
    con.commit()
    con.close()
    digest = victim.read_bytes()
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / "traces.sqlite").symlink_to(victim)
    info = _cached_run(p, tmp_path, cache)
    assert any("symbolic link" in w for w in info["warnings"])
    assert victim.read_bytes() == digest
    assert sorted(os.listdir(cache)) == ["traces.sqlite"]


def test_cache_of_another_user_is_refused(tmp_path: Path, is_root: bool) -> None:
    if not is_root:
        pytest.skip("making a folder owned by another user needs root")
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0])
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    os.chown(cache, 12345, 12345)
    info = _cached_run(p, tmp_path, cache)
    assert any("another user" in w for w in info["warnings"])
    assert os.listdir(cache) == []


def test_cache_made_by_an_older_kviewer_is_tightened(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0])
    cache = tmp_path / "old"
    _cached_run(p, tmp_path, cache)
    os.chmod(cache, 0o755)
    os.chmod(cache / "traces.sqlite", 0o644)
    info = _cached_run(p, tmp_path, cache)
    assert not any("cache" in w for w in info["warnings"])
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert stat.S_IMODE((cache / "traces.sqlite").stat().st_mode) == 0o600
