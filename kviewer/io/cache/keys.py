"""What a cache entry is keyed by: the configuration (folder, bound, bypass), the code's
fingerprint and the identity (path, size, mtime) of the source file or folder."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from kviewer.core import schema
from kviewer.io.memory import parse_size

log = logging.getLogger(__name__)

#: bump when the stored layout changes; part of every key
CACHE_FORMAT = 2  # 2: meta.warnings are typed diagnostics (kind, severity, file, message); meta.ncu_capture
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
    from kviewer import __version__

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


@dataclass(frozen=True)
class SourceId:
    """What identifies the bytes a trace was parsed from."""

    path: str
    """resolved absolute path"""
    size: int
    mtime_ns: int
    members: tuple[tuple[str, int, int], ...] = ()
    """for a folder: (name, size, mtime_ns) of every file in it"""

    def key(self, fp: str | None = None) -> str:
        text = json.dumps([fp or fingerprint(), self.path, self.size, self.mtime_ns, self.members])
        return hashlib.sha256(text.encode()).hexdigest()


def source_id(path: str | os.PathLike[str]) -> SourceId:
    """Stat a file (or every file of a folder); raises OSError when it is not there."""
    try:
        p = Path(path).resolve()
    except RuntimeError as exc:  # a symlink loop (pathlib raises RuntimeError for it on 3.11)
        raise OSError(f"{path}: a symbolic link that loops") from exc
    st = p.stat()
    if p.is_dir():
        members = []
        for entry in sorted(os.scandir(p), key=lambda e: e.name):
            try:
                if not entry.is_file():
                    continue
                est = entry.stat()
            except OSError:  # a symlink loop or a vanished file: not part of the folder's trace
                continue
            members.append((entry.name, est.st_size, est.st_mtime_ns))
        return SourceId(str(p), sum(m[1] for m in members), max((m[2] for m in members), default=st.st_mtime_ns), tuple(members))
    return SourceId(str(p), st.st_size, st.st_mtime_ns)
