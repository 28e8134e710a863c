"""A viewer never changes its inputs.

Every sample file and folder is loaded (in place, and from a read-only copy, with and without the
trace cache) while an audit hook watches every ``open`` and ``sqlite3.connect`` of the process;
the inputs' bytes, sizes and mtimes and the folders' listings are compared before and after.
SQLite inputs in WAL mode and with a hot rollback journal are checked too: SQLite itself would
write beside those (``-shm``/``-wal`` files, a rollback) unless the loader prevents it.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kviewer.errors import LoadError
from kviewer.io import load
from tests.conftest import SHARED_SAMPLES
from tests.robustness.harness import diff, snapshot

pytestmark = pytest.mark.timeout(600)

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class Watch:
    """Records write-mode opens and non-read-only SQLite connections under ``roots``."""

    active: Watch | None = None
    installed = False
    lock = threading.Lock()

    def __init__(self, roots: list[Path]) -> None:
        self.roots = [str(r.resolve()) for r in roots]
        self.violations: list[str] = []

    def _inside(self, path: object) -> bool:
        if isinstance(path, int):
            return False
        try:
            p = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return any(p == r or p.startswith(r + os.sep) for r in self.roots)

    def event(self, name: str, args: tuple[object, ...]) -> None:
        if name == "open" and len(args) >= 3 and args[0] is not None:
            path, mode, flags = args[0], args[1], args[2]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writes and self._inside(path):
                self.violations.append(f"open({path!r}, {mode!r}, flags={flags})")
        elif name == "sqlite3.connect" and args:
            db = os.fsdecode(args[0]) if isinstance(args[0], (str, bytes, os.PathLike)) else ""
            target = db.removeprefix("file:").split("?", 1)[0].removeprefix("//") if db.startswith("file:") else db
            if target and self._inside(target) and "mode=ro" not in db:
                self.violations.append(f"sqlite3.connect({db!r}) without mode=ro")

    @classmethod
    def hook(cls, name: str, args: tuple[object, ...]) -> None:
        w = cls.active
        if w is not None and name in ("open", "sqlite3.connect"):
            w.event(name, args)

    def __enter__(self) -> Watch:  # noqa: PYI034 - a context manager for this class only
        with Watch.lock:
            if not Watch.installed:  # audit hooks cannot be removed: install one, switch it
                sys.addaudithook(Watch.hook)
                Watch.installed = True
            Watch.active = self
        return self

    def __exit__(self, *exc: object) -> None:
        Watch.active = None


def _inputs(root: Path) -> list[Path]:
    """Every file and every folder (the per-rank / rocprofv3 folder loaders) under ``root``."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    folders = sorted({p.parent for p in files})
    return files + folders


def _load_all(paths: list[Path], use_cache: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for p in paths:
        try:
            t = load(p, use_cache=use_cache)
            out[str(p)] = f"{t.meta.source_format}:{len(t.kernels)}"
        except LoadError as exc:
            out[str(p)] = type(exc).__name__
    return out


@pytest.fixture(scope="module")
def roots(sample_traces: Path) -> list[Path]:
    """The real samples when present, and the repo's own traces."""
    return [r for r in (SHARED_SAMPLES, sample_traces) if r.is_dir()]


@pytest.fixture(scope="module")
def export(sample_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """An uncompressed Nsight Systems export (from the repo's traces) and its kernel count."""
    db = tmp_path_factory.mktemp("export") / "export.sqlite"
    db.write_bytes(gzip.decompress((sample_traces / "h200_llm_train_nvtx.sqlite.gz").read_bytes()))
    return db, len(load(db, use_cache=False).kernels)


def test_samples_in_place_are_not_touched(roots: list[Path]) -> None:
    """The real files, where they are: no write-mode open, same bytes and mtimes after."""
    before = {r: snapshot(r) for r in roots}
    paths = [p for r in roots for p in _inputs(r)]
    with Watch(roots) as w:
        outcomes = _load_all(paths, use_cache=False)
    assert not w.violations, w.violations
    for r in roots:
        assert not diff(before[r], snapshot(r)), diff(before[r], snapshot(r))
    assert sum(":" in v for v in outcomes.values()) >= 3  # the loads did happen


@pytest.fixture
def readonly_copy(roots: list[Path], tmp_path: Path) -> Iterator[Path]:
    """The samples (the big training trace aside) copied and made read-only (0444 files, 0555 folders)."""
    dest = tmp_path / "inputs"
    for r in roots:
        shutil.copytree(r, dest / r.name, ignore=shutil.ignore_patterns("*train_big*"))
    for p in sorted(dest.rglob("*"), reverse=True):
        p.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if p.is_dir() else 0))
    dest.chmod(0o555)
    yield dest
    for p in [dest, *dest.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)


def test_readonly_copies_through_the_cache(readonly_copy: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Read-only files load as writable ones do, twice through the trace cache (stored, then
    served from it), and the cache writes nothing beside them."""
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    before = snapshot(readonly_copy)
    files = [p for p in _inputs(readonly_copy) if p.is_file()]
    with Watch([readonly_copy]) as w:
        direct = _load_all(files, use_cache=False)
        stored = _load_all(files, use_cache=True)
        served = _load_all(files, use_cache=True)
    assert not w.violations, w.violations
    assert not diff(before, snapshot(readonly_copy))
    assert direct == stored == served
    assert sum(":" in v for v in direct.values()) >= 3
    assert any((tmp_path / "cache").iterdir())  # the cache was used, in its own folder


def _wal_copy(src: Path, dest: Path, keep_wal: bool) -> sqlite3.Connection | None:
    """``src`` copied and switched to WAL mode; with ``keep_wal``, the connection of a writer that
    is still open (so its ``-wal`` and ``-shm`` stay beside the file), else None."""
    shutil.copyfile(src, dest)
    con = sqlite3.connect(dest)
    con.execute("pragma journal_mode=wal")
    if not keep_wal:
        con.close()
        return None
    con.execute("pragma wal_autocheckpoint=0")
    con.execute("create table kv_note(x)")
    con.execute("insert into kv_note values (1)")
    con.commit()
    return con


@pytest.mark.parametrize("keep_wal", [False, True])
def test_wal_mode_database(export: tuple[Path, int], tmp_path: Path, keep_wal: bool) -> None:
    """Read-only SQLite would create -wal/-shm beside a WAL-mode file, or write an existing -shm."""
    db = tmp_path / "wal.sqlite"
    writer = _wal_copy(export[0], db, keep_wal)
    try:
        assert (tmp_path / "wal.sqlite-wal").exists() == keep_wal
        before = snapshot(tmp_path)
        with Watch([tmp_path]) as w:
            trace = load(db, use_cache=False)
        assert len(trace.kernels) == export[1]
        assert not w.violations
        assert not diff(before, snapshot(tmp_path)), diff(before, snapshot(tmp_path))
    finally:
        if writer is not None:
            writer.close()


def test_hot_journal_is_not_rolled_back(export: tuple[Path, int], tmp_path: Path) -> None:
    """A writer that died mid-transaction leaves a hot journal: a reader must not roll it back."""
    db = tmp_path / "hot.sqlite"
    shutil.copyfile(export[0], db)
    code = (
        "import os, sqlite3, sys\n"
        "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "con.execute('pragma cache_size=1')\n"  # spill changed pages to the file before commit
        "con.execute('begin')\n"
        "con.execute('update StringIds set value = value || value')\n"
        "os._exit(0)\n"  # no commit, no rollback: the -journal stays hot
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, timeout=60)
    journal = tmp_path / "hot.sqlite-journal"
    assert journal.exists() and journal.stat().st_size > 0
    before = snapshot(tmp_path)
    with Watch([tmp_path]) as w:
        try:
            load(db, use_cache=False)
        except LoadError as exc:  # refusing is fine; rolling back (writing) is not
            assert str(db) in str(exc)
    assert not w.violations
    assert not diff(before, snapshot(tmp_path)), diff(before, snapshot(tmp_path))


def test_watch_sees_writes(tmp_path: Path) -> None:
    """The audit hook is not blind: a write-mode open and a read-write connect are recorded."""
    p = tmp_path / "x.sqlite"
    p.write_bytes(b"")
    with Watch([tmp_path]) as w:
        with open(p, "ab"):
            pass
        sqlite3.connect(p).close()
        sqlite3.connect(p.as_uri() + "?mode=ro", uri=True).close()
    assert len(w.violations) == 2, w.violations
