"""What a cache entry is keyed by: the configuration (folder, bound, bypass), the code's
fingerprint and the identity of the source file or folder (path, size, mtime, inode change
time, inode, and a digest of its content)."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kviewer import __version__, io as kio
from kviewer.core import schema
from kviewer.errors import LoadError
from kviewer.io.memory import parse_size

if TYPE_CHECKING:
    import kviewer.io.source

log = logging.getLogger(__name__)

#: bump when the stored layout changes; part of every key
CACHE_FORMAT = 3  # 2: meta.warnings are typed diagnostics (kind, severity, file, message); meta.ncu_capture
# 3: keys by content (inode change time, inode, digest); analyses stored in the same database
DEFAULT_MAX_BYTES = 2 * 1024**3

ENV_DIR = "KVIEWER_CACHE_DIR"
ENV_DISABLE = "KVIEWER_NO_CACHE"
ENV_MAX = "KVIEWER_CACHE_MAX_BYTES"


def cache_dir() -> Path:
    """Where the cache lives: ``$KVIEWER_CACHE_DIR``, ``$XDG_CACHE_HOME/kviewer`` or ``~/.cache/kviewer``."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kviewer"


def cache_disabled() -> bool:
    """True when ``KVIEWER_NO_CACHE`` is set to anything but empty/0/false/no."""
    value = os.environ.get(ENV_DISABLE, "").strip().lower()
    return value not in ("", "0", "false", "no", "off")



def max_bytes_from_env() -> int:
    value = os.environ.get(ENV_MAX)
    if not value:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(value)
    except ValueError:
        log.warning("ignoring %s=%r: not a size; using the default %d bytes", ENV_MAX, value, DEFAULT_MAX_BYTES)
        return DEFAULT_MAX_BYTES


def fingerprint_sources() -> list[tuple[str, os.stat_result]]:
    """Every ``.py`` file of ``core`` and ``io``, sub-packages included (``io/torch/...``), with its stat."""
    pkg = Path(__file__).resolve().parents[2]
    out = []
    for sub in ("core", "io"):
        try:
            files = sorted((pkg / sub).rglob("*.py"))
        except OSError:
            continue
        for f in files:
            try:
                out.append((f.relative_to(pkg).as_posix(), f.stat()))
            except OSError:
                continue
    return out


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """A hash of everything that decides how a file parses into a Trace.

    The kviewer version and the schema (as data) cover releases; the size and mtime of the
    ``core`` and ``io`` sources cover a development checkout, where a loader is edited without a
    version bump (a stale cached parse would silently hide the edit).
    """
    h = hashlib.sha256()
    h.update(f"kviewer {__version__} cache {CACHE_FORMAT}\n".encode())
    for table in schema.TABLES.values():
        h.update(repr((table.name, table.sort_by, [(c.name, c.dtype, c.missing) for c in table.columns])).encode())
    for rel, st in fingerprint_sources():
        h.update(f"{rel} {st.st_size} {st.st_mtime_ns}\n".encode())
    h.update(f"pandas {pd.__version__} numpy {np.__version__}".encode())
    return h.hexdigest()[:32]


# ---------------------------------------------------------------------------------------------
# source identity


#: files up to this size are hashed whole; larger ones by :data:`SAMPLES` blocks spread over them
WHOLE_HASH_MAX = 16 * 1024**2
SAMPLES = 64
SAMPLE_BLOCK = 64 * 1024


def content_digest(path: str | os.PathLike[str], size: int, whole_max: int | None = None, samples: int | None = None) -> str:
    """A fast fingerprint of a file's bytes (blake2b): the whole file up to
    :data:`WHOLE_HASH_MAX` (~25 ms at 16 MiB), else :data:`SAMPLES` blocks of :data:`SAMPLE_BLOCK` bytes
    spread evenly from the first to the last byte (4 MiB read, whatever the size). With the
    inode change time beside it (which no tool can set back), a file rewritten with the same
    size and modification time misses. Raises OSError when it cannot be read."""
    whole_max = WHOLE_HASH_MAX if whole_max is None else whole_max
    samples = SAMPLES if samples is None else samples
    block = SAMPLE_BLOCK
    h = hashlib.blake2b(digest_size=16)
    try:
        f = kio.source.open_input(path)
    except LoadError as exc:
        raise OSError(str(exc)) from exc
    with f:
        if size <= whole_max or samples < 2:
            while chunk := f.read(1 << 20):
                h.update(chunk)
        else:
            step = (size - block) / (samples - 1)
            for i in range(samples):
                f.seek(int(i * step))
                h.update(f.read(block))
    return h.hexdigest()


@dataclass(frozen=True)
class SourceId:
    """What identifies the bytes a trace was parsed from: path, size, modification and inode
    change times, inode, and a digest of the content (:func:`content_digest`).

    Taken once per load (:func:`kviewer.io.registry.load`, kept on the trace as
    ``TraceMeta.source_id``); whether the file changed since is asked of its stat alone
    (:meth:`unchanged`), never by hashing it again."""

    path: str
    """resolved absolute path"""
    size: int
    mtime_ns: int
    members: tuple[tuple[str, int, int, int, int, str], ...] = ()
    """for a folder: (name, size, mtime_ns, ctime_ns, inode, digest) of every file in it"""
    ctime_ns: int = 0
    inode: int = 0
    digest: str = ""

    def key(self, fp: str | None = None) -> str:
        text = json.dumps([fp or fingerprint(), self.path, self.size, self.mtime_ns, self.ctime_ns, self.inode, self.digest, self.members])
        return hashlib.sha256(text.encode()).hexdigest()

    def stat_fields(self) -> StatId:
        """The cheap part of the identity: what :func:`source_stat` reads back for the same file."""
        if not self.digest:  # a folder (a file always has a digest, an empty one too)
            return (self.path, tuple(m[:5] for m in self.members))
        return (self.path, self.size, self.mtime_ns, self.ctime_ns, self.inode)

    def unchanged(self, path: str | os.PathLike[str] | None = None) -> bool:
        """True when ``path`` (default: this identity's own path) stats as it did when this
        identity was taken (size, modification and inode change times, inode; for a folder, of
        every file in it): any write moves the inode change time, which no tool can set back."""
        try:
            return source_stat(self.path if path is None else path) == self.stat_fields()
        except OSError:
            return False


#: :meth:`SourceId.stat_fields` / :func:`source_stat`: (path, size, mtime_ns, ctime_ns, inode) of
#: a file, (path, ((name, size, mtime_ns, ctime_ns, inode), ...)) of a folder
StatId = tuple[Any, ...]


def _resolve(path: str | os.PathLike[str]) -> Path:
    try:
        return Path(path).resolve()
    except RuntimeError as exc:  # a symlink loop (pathlib raises RuntimeError for it on 3.11)
        raise OSError(f"{path}: a symbolic link that loops") from exc


def _member_files(folder: Path) -> list[tuple[os.DirEntry[str], os.stat_result]]:
    """The files of a folder that make up its identity, by name, with their stat."""
    out = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        try:
            if not entry.is_file():
                continue
            est = entry.stat()
        except OSError:  # a symlink loop or a vanished file: not part of the folder's trace
            continue
        if not os.access(entry.path, os.R_OK):  # its digest cannot be taken: not part of it either
            continue
        out.append((entry, est))
    return out


def source_stat(path: str | os.PathLike[str]) -> StatId:
    """Stat a file (or every file of a folder) without reading it: :meth:`SourceId.stat_fields`
    as the file is now. Raises OSError when it is not there."""
    p = _resolve(path)
    st = p.stat()
    if p.is_dir():
        return (str(p), tuple((e.name, est.st_size, est.st_mtime_ns, est.st_ctime_ns, est.st_ino) for e, est in _member_files(p)))
    return (str(p), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def source_id(path: str | os.PathLike[str]) -> SourceId:
    """Stat a file (or every file of a folder) and fingerprint its content; raises OSError when
    it is not there or cannot be read."""
    p = _resolve(path)
    st = p.stat()
    if p.is_dir():
        members = []
        for entry, est in _member_files(p):
            try:
                # members: 16 blocks each (1 MiB), so a folder of many ranks stays quick
                digest = content_digest(entry.path, est.st_size, whole_max=16 * SAMPLE_BLOCK, samples=16)
            except OSError:  # unreadable after all: not part of the folder's trace
                continue
            members.append((entry.name, est.st_size, est.st_mtime_ns, est.st_ctime_ns, est.st_ino, digest))
        return SourceId(str(p), sum(m[1] for m in members), max((m[2] for m in members), default=st.st_mtime_ns), tuple(members))
    return SourceId(str(p), st.st_size, st.st_mtime_ns, ctime_ns=st.st_ctime_ns, inode=st.st_ino, digest=content_digest(p, st.st_size))
