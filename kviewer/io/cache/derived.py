"""Databases derived from traces, kept beside the trace cache: ``kviewer sql`` keeps the schema it
built for a set of files here, so that the next query on them opens it instead of loading and
writing the traces again.

One SQLite file per key in a folder of the cache directory (``<cache dir>/sql/<key>.sqlite``),
private as the trace cache is (folder 0700, files 0600, symlinks and other owners refused), and
bounded by the same ``KVIEWER_CACHE_MAX_BYTES``: beyond it the least recently used files go
first. The key is the caller's (it names the files' identities and the code that built it), so a
changed file or a new kviewer never meets an old database; such databases age out."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from kviewer.io.cache.keys import cache_dir, max_bytes_from_env
from kviewer.io.cache.store import UnsafeCache, _check_private, secure_cache_files

log = logging.getLogger(__name__)

SUFFIXES = ("", "-journal", "-wal", "-shm", ".lock")


def derived_path(kind: str, key: str) -> Path:
    """The private file for ``key`` in the folder ``kind`` of the cache directory (made empty,
    0600, when missing). Raises :class:`UnsafeCache` or OSError when it cannot be had safely."""
    top = cache_dir()
    st = _check_private(top, "folder")
    if st is None:
        top.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = top / kind
    path = folder / f"{key}.sqlite"
    secure_cache_files(folder, path)
    return path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock file (one writer of a derived database at a time, across processes)."""
    fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # the lock goes with it


def remove(path: Path) -> None:
    """Remove a derived database and its companion files."""
    for suffix in SUFFIXES:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")


def evict(kind: str, keep: Path, max_bytes: int | None = None) -> int:
    """Remove the least recently used databases of ``kind`` (by modification time) until the folder
    holds at most ``max_bytes`` (default ``KVIEWER_CACHE_MAX_BYTES``), never ``keep``; how many went."""
    bound = max_bytes_from_env() if max_bytes is None else max_bytes
    files = []
    for f in (cache_dir() / kind).glob("*.sqlite"):
        try:
            st = f.stat()
        except OSError:
            continue
        files.append((st.st_mtime, st.st_size, f))
    total = sum(size for _, size, _ in files)
    gone = 0
    for _, size, f in sorted(files, key=lambda x: x[0]):
        if total <= bound:
            break
        if f == keep:
            continue
        try:
            remove(f)  # a reader that has it open keeps reading it (POSIX unlink)
        except OSError as exc:
            log.warning("derived cache: could not remove %s: %s", f, exc)
            continue
        total -= size
        gone += 1
    return gone


def touch(path: Path) -> None:
    """Mark ``path`` as used now (the eviction's order)."""
    with contextlib.suppress(OSError):
        os.utime(path)


__all__ = ["UnsafeCache", "derived_path", "evict", "locked", "remove", "touch"]
