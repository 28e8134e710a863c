"""Reading input files: transparent gzip / xz / zstd, content sniffing heads, read-only SQLite.

Nothing here writes to an input file.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import sqlite3
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kviewer.errors import CorruptTrace, LoadError, MissingDependency

GZIP_MAGIC = b"\x1f\x8b"
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BZ2_MAGIC = b"BZh"
SQLITE_MAGIC = b"SQLite format 3\x00"

#: bytes a sniffer sees (decompressed)
HEAD_SIZE = 64 * 1024

try:  # zstandard raises its own error class for a damaged frame (not a ValueError)
    from zstandard import ZstdError as _ZstdError
except ImportError:  # pragma: no cover - zstandard is a dependency

    class _ZstdError(Exception):  # type: ignore[no-redef]
        pass


#: what a decompressor raises on a damaged or cut stream
_STREAM_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError, _ZstdError)

Progress = Callable[[float, str], None]
"""progress(fraction 0..1, message)"""


def compression_of(raw_head: bytes) -> str | None:
    if raw_head.startswith(GZIP_MAGIC):
        return "gzip"
    if raw_head.startswith(XZ_MAGIC):
        return "xz"
    if raw_head.startswith(ZSTD_MAGIC):
        return "zstd"
    if raw_head.startswith(BZ2_MAGIC) and len(raw_head) > 3 and raw_head[3:4].isdigit():
        return "bz2"
    return None


def _check_file(path: Path) -> None:
    if not path.exists():
        raise LoadError(path, "no such file")
    if path.is_dir():
        raise LoadError(path, "is a directory, not a trace file")
    if not os.access(path, os.R_OK):
        raise LoadError(path, "permission denied")


def read_head(path: str | os.PathLike[str], size: int = HEAD_SIZE) -> bytes:
    """The first ``size`` bytes of the file's content, decompressed when compressed.

    A damaged compressed stream gives whatever could be decompressed (possibly b"").
    """
    p = Path(path)
    _check_file(p)
    with open(p, "rb") as f:
        raw = f.read(size)
    comp = compression_of(raw)
    if comp is None:
        return raw
    try:
        with _open_decompressed(p, comp) as f:
            return f.read(size)
    except _STREAM_ERRORS:
        return _salvage(p, comp, limit=size)[0]


def _open_decompressed(path: Path, comp: str):  # type: ignore[no-untyped-def]
    if comp == "gzip":
        return gzip.open(path, "rb")
    if comp == "xz":
        return lzma.open(path, "rb")
    if comp == "bz2":
        return bz2.open(path, "rb")
    if comp == "zstd":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - zstandard is a dependency
            raise MissingDependency(path, "zstd-compressed; install the 'zstandard' package") from exc
        return zstandard.open(path, "rb")
    raise ValueError(comp)


@dataclass
class Content:
    """A file's whole (decompressed) content."""

    data: bytes
    compression: str | None
    truncated: bool = False
    """True when a compressed stream ended early or was damaged; ``data`` holds what was readable."""


#: refuse to decompress more than this many bytes (a bound against decompression bombs)
MAX_DECOMPRESSED = 8 * 1024**3
#: a stream that has produced more than BOMB_FLOOR bytes at more than BOMB_RATIO times the
#: compressed bytes read so far is refused. Real traces compress 3-30x (nsys SQLite ~3x, Kineto
#: JSON 10-25x with gzip or xz); a gzip bomb expands ~1000x, xz/zstd/bzip2 bombs far more. Without
#: this, a 2 MB .gz could make a load hold gigabytes before MAX_DECOMPRESSED stops it.
BOMB_RATIO = 500
BOMB_FLOOR = 256 * 1024**2


def check_expansion(path: str | os.PathLike[str], produced: int, consumed: int, recognised: str | None = None) -> None:
    """Raise :class:`CorruptTrace` when ``consumed`` compressed bytes gave a bomb-like ``produced``."""
    if produced > BOMB_FLOOR and produced > BOMB_RATIO * max(consumed, 1):
        raise CorruptTrace(
            path,
            f"{consumed:,} compressed bytes expand to more than {produced // 1024**2:,} MiB "
            f"(over {BOMB_RATIO}x, far beyond any real trace); refusing (a decompression bomb?)",
            recognised,
        )


def read_content(
    path: str | os.PathLike[str],
    progress: Progress | None = None,
    max_bytes: int = MAX_DECOMPRESSED,
) -> Content:
    """Read the whole file, decompressing transparently.

    A compressed stream that ends early or is damaged is not an error: the readable prefix is
    returned with ``truncated=True`` so a loader can load every complete event and warn.
    """
    p = Path(path)
    _check_file(p)
    size = p.stat().st_size
    with open(p, "rb") as f:
        magic = f.read(8)
    comp = compression_of(magic)
    if comp is None:
        with open(p, "rb") as f:
            return Content(f.read(), None)
    chunks: list[bytes] = []
    total = 0
    try:
        with open(p, "rb") as raw, _open_decompressed_fileobj(raw, comp, p) as f:
            while True:
                chunk = f.read(8 * 1024 * 1024)
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
                if total > max_bytes:
                    raise CorruptTrace(
                        p, f"decompresses to more than {max_bytes // 1024**2} MiB; refusing (a decompression bomb?)"
                    )
                check_expansion(p, total, raw.tell())
                if progress is not None and size:
                    progress(min(raw.tell() / size, 1.0) * 0.3, "decompressing")
        # zstandard's stream reader ends quietly on a cut frame: check the frames are whole
        return Content(b"".join(chunks), comp, truncated=comp == "zstd" and not _zstd_complete(p))
    except _STREAM_ERRORS as exc:
        if isinstance(exc, LoadError):
            raise
        data, _ = _salvage(p, comp, limit=max_bytes)
        return Content(data, comp, truncated=True)


def _open_decompressed_fileobj(raw, comp: str, path: Path):  # type: ignore[no-untyped-def]
    if comp == "gzip":
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if comp == "xz":
        return lzma.LZMAFile(raw, "rb")
    if comp == "bz2":
        return bz2.BZ2File(raw, "rb")
    if comp == "zstd":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover
            raise MissingDependency(path, "zstd-compressed; install the 'zstandard' package") from exc
        return zstandard.ZstdDecompressor().stream_reader(raw)
    raise ValueError(comp)


def _zstd_complete(path: Path) -> bool:
    """True when the file's zstd frames all end (decompressed again, output discarded)."""
    import zstandard

    dz = zstandard.ZstdDecompressor().decompressobj()
    started = False
    try:
        with open(path, "rb") as f:
            while block := f.read(1 << 16):
                while block:
                    if dz.eof:
                        dz = zstandard.ZstdDecompressor().decompressobj()
                    dz.decompress(block)
                    started = True
                    block = dz.unused_data if dz.eof else b""
    except _STREAM_ERRORS:
        return False
    return started and dz.eof


def _salvage(path: Path, comp: str, limit: int) -> tuple[bytes, bool]:
    """Decompress as much of a damaged or cut stream as possible."""
    with open(path, "rb") as f:
        raw = f.read()
    out = bytearray()
    step = 1 << 16
    try:
        if comp == "gzip":
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            for i in range(0, len(raw), step):
                out += d.decompress(raw[i : i + step], max(0, limit - len(out)))
                check_expansion(path, len(out), i + step)
                if len(out) >= limit:
                    break
        elif comp == "xz":
            dx = lzma.LZMADecompressor()
            for i in range(0, len(raw), step):
                out += dx.decompress(raw[i : i + step], max(0, limit - len(out)))
                check_expansion(path, len(out), i + step)
                if len(out) >= limit or dx.eof:
                    break
        elif comp == "bz2":
            # stepwise with a cap, like the others: one call on the whole file has no bound
            db = bz2.BZ2Decompressor()
            for i in range(0, len(raw), step):
                out += db.decompress(raw[i : i + step], max(0, limit - len(out)))
                check_expansion(path, len(out), i + step)
                if len(out) >= limit or db.eof:
                    break
        elif comp == "zstd":
            import zstandard

            dz = zstandard.ZstdDecompressor().decompressobj()
            for i in range(0, len(raw), step):
                out += dz.decompress(raw[i : i + step])
                check_expansion(path, len(out), i + step)
                if len(out) >= limit:
                    break
    except _STREAM_ERRORS:
        pass
    return bytes(out[:limit]), True


class _Connection(sqlite3.Connection):
    """A read-only connection that may own a private copy of the database, removed on close."""

    copy_dir: str | None = None

    def close(self) -> None:
        super().close()
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)
            self.copy_dir = None


def _wal_mode(path: Path) -> bool:
    """True when the header says WAL mode (file format read/write versions 2)."""
    with open(path, "rb") as f:
        header = f.read(20)
    return header.startswith(SQLITE_MAGIC) and len(header) == 20 and 2 in (header[18], header[19])


def connect_readonly(path: str | os.PathLike[str], recognised: str | None = None) -> sqlite3.Connection:
    """Open a SQLite file read-only (``file:…?mode=ro``): a viewer never changes its inputs.

    ``immutable=1`` is not used in general: it would skip locking, and a trace being written could
    be misread. A WAL-mode database is the exception: even read-only, SQLite creates ``-wal`` and
    ``-shm`` files beside it (and writes to existing ones). Without a ``-wal`` file every committed
    page is in the database itself, so it is read as immutable; with one, a private copy of both is
    opened instead (and removed when the connection closes).
    """
    p = Path(path).resolve()
    _check_file(p)
    uri = p.as_uri() + "?mode=ro"
    copy_dir: str | None = None
    try:
        if _wal_mode(p):
            wal = p.with_name(p.name + "-wal")
            if wal.exists():
                copy_dir = tempfile.mkdtemp(prefix="kviewer-sqlite-")
                shutil.copyfile(p, Path(copy_dir) / p.name)
                shutil.copyfile(wal, Path(copy_dir) / wal.name)
                uri = (Path(copy_dir) / p.name).as_uri() + "?mode=ro"
            else:
                uri += "&immutable=1"
        con = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Connection)
        con.copy_dir, copy_dir = copy_dir, None  # the connection owns the copy now
        try:
            con.execute("select count(*) from sqlite_master").fetchone()
        except sqlite3.DatabaseError:
            con.close()
            raise
    except sqlite3.DatabaseError as exc:
        raise CorruptTrace(path, f"not a readable SQLite database ({exc})", recognised) from exc
    except OSError as exc:
        raise LoadError(path, f"could not be read ({exc.strerror or exc})", recognised) from exc
    finally:
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)
    return con
