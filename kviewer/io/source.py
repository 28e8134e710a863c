"""Reading input files: transparent gzip / xz / zstd, content sniffing heads, read-only SQLite.

Nothing here writes to an input file.
"""

from __future__ import annotations

import bz2
import lzma
import os
import shutil
import sqlite3
import stat
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from kviewer.errors import CorruptTrace, LoadError, MissingDependency
from kviewer.io.memory import parse_size
from kviewer.io.sqlite_safety import harden_query_connection, harden_strict_connection
from kviewer.tempdir import (  # noqa: F401 - re-exported: the loaders' one place for temporary files
    private_tmpdir,
    remove_quietly,
    track_temp_dir,
    untrack_temp_dir,
)

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


def compression_of_file(path: str | os.PathLike[str], recognised: str | None = None) -> str | None:
    """The compression of a file by its magic bytes (None: not compressed); a typed
    :class:`LoadError` when it cannot be opened as a regular file."""
    with open_input(path, recognised) as f:
        try:
            return compression_of(f.read(8))
        except OSError as exc:
            raise LoadError(Path(path), _os_problem(exc), recognised) from exc


def json_ends_early(exc: BaseException) -> bool:
    """True when a JSON decoder's error says the document ended before it was complete.

    msgspec raises one ``DecodeError`` type for every malformed document; only its message tells
    a cut file ("Input data was truncated") from a malformed one. This is the one place that reads
    it (a foreign message): loaders turn the answer into :class:`~kviewer.errors.TruncatedTrace`
    or a ``truncated`` diagnostic, and decide on those.
    """
    text = str(exc).lower()  # foreign message: msgspec's
    return "truncated" in text or "unexpected end" in text


def json_lone_surrogate(exc: BaseException) -> bool:
    """True when a JSON decoder's error is about a ``\\uD83D``-style escape of half a UTF-16
    surrogate pair (msgspec calls it an "unexpected end", like a cut file: only its message tells)."""
    return "surrogate" in str(exc)  # foreign message: msgspec's


def json_bad_utf8(exc: BaseException) -> bool:
    """True when a JSON decoder's error is about invalid UTF-8 (msgspec: only its message says)."""
    return "UTF-8" in str(exc)  # foreign message: msgspec's


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str | None:
    """What a non-regular, non-directory file is, in words; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def _os_problem(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return f"cannot be read ({exc.strerror or exc})"


def check_file(path: str | os.PathLike[str]) -> os.stat_result:
    """Stat an input: a readable regular file, or a typed :class:`LoadError` naming the problem.

    FIFOs, devices and sockets are refused before anything opens them (opening a FIFO blocks
    until a writer appears; a device can be endless).
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except OSError as exc:
        raise LoadError(p, _os_problem(exc)) from exc
    if stat.S_ISDIR(st.st_mode):
        raise LoadError(p, "is a directory, not a trace file")
    kind = _not_regular(st.st_mode)
    if kind is not None:
        raise LoadError(p, f"is {kind}, not a regular file; kviewer reads trace files")
    if not os.access(p, os.R_OK):
        raise LoadError(p, "permission denied")
    return st


def open_input(path: str | os.PathLike[str], recognised: str | None = None) -> BinaryIO:
    """Open an input file for reading, refusing anything but a regular file.

    The file is opened non-blocking and checked with ``fstat`` on the open descriptor, so a
    path swapped for a FIFO after :func:`check_file` cannot hang the load.
    """
    p = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        if isinstance(exc, IsADirectoryError):
            raise LoadError(p, "is a directory, not a trace file", recognised) from exc
        raise LoadError(p, _os_problem(exc), recognised) from exc
    try:
        st = os.fstat(fd)
        kind = _not_regular(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            raise LoadError(p, "is a directory, not a trace file", recognised)
        if kind is not None:
            raise LoadError(p, f"is {kind}, not a regular file; kviewer reads trace files", recognised)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_raw(path: Path, size: int) -> bytes:
    with open_input(path) as f:
        try:
            return f.read(size)
        except OSError as exc:  # /proc/self/mem and friends: a regular file the OS refuses to read
            raise LoadError(path, _os_problem(exc)) from exc


def read_head(path: str | os.PathLike[str], size: int = HEAD_SIZE) -> bytes:
    """The first ``size`` bytes of the file's content, decompressed when compressed.

    A damaged compressed stream gives whatever could be decompressed (possibly b"").
    """
    p = Path(path)
    check_file(p)
    raw = _read_raw(p, size)
    comp = compression_of(raw)
    if comp is None:
        return raw
    out = bytearray()
    with open_input(p) as f:
        stream = DecompressStream(p, f, comp, max_bytes=max(size, BOMB_FLOOR))
        try:
            for chunk in stream.chunks(out_block=max(size, 64 * 1024)):
                out += chunk
                if len(out) >= size:
                    break
        except (CorruptTrace, OSError):
            pass
    return bytes(out[:size])


@dataclass
class Content:
    """A file's whole (decompressed) content."""

    data: bytes
    compression: str | None
    truncated: bool = False
    """True when a compressed stream ended early or was damaged; ``data`` holds what was readable."""


#: the most decompressed bytes kviewer accepts from one file (``KVIEWER_MAX_DECOMPRESSED``)
MAX_DECOMPRESSED = 8 * 1024**3
#: a stream that has produced more than BOMB_FLOOR bytes at more than BOMB_RATIO times the
#: compressed bytes read so far is refused. Real traces compress 3-30x (nsys SQLite ~3x, Kineto
#: JSON 7-30x with gzip or xz: the samples here are all within 30x); a gzip bomb expands ~1000x,
#: xz/zstd/bzip2 bombs far more. 100x leaves real files a wide margin and stops a bomb after
#: BOMB_FLOOR bytes, before it can hold memory or disk.
BOMB_RATIO = 100
BOMB_FLOOR = 64 * 1024**2

#: compressed bytes fed to a decompressor at a time (zstd: smaller, as its output per call has no
#: bound: one 4 KiB RLE-packed input can still give 128 MiB, so the step bounds what a call can hold)
_RAW_BLOCK = 256 << 10
_ZSTD_RAW_BLOCK = 4 << 10
#: the most decompressed bytes handed over at once
OUT_BLOCK = 4 << 20


def max_decompressed() -> int:
    """The absolute cap on one file's decompressed bytes (``KVIEWER_MAX_DECOMPRESSED``, e.g. 2G)."""
    value = os.environ.get("KVIEWER_MAX_DECOMPRESSED")
    if value:
        try:
            return parse_size(value)
        except ValueError:
            pass
    return MAX_DECOMPRESSED


def check_expansion(path: str | os.PathLike[str], produced: int, consumed: int, recognised: str | None = None) -> None:
    """Raise :class:`CorruptTrace` when ``consumed`` compressed bytes gave a bomb-like ``produced``."""
    if produced > BOMB_FLOOR and produced > BOMB_RATIO * max(consumed, 1):
        raise CorruptTrace(
            path,
            f"{consumed:,} compressed bytes expand to more than {produced // 1024**2:,} MiB "
            f"(over {BOMB_RATIO}x, far beyond any real trace); refusing (a decompression bomb?)",
            recognised,
        )


def _decompressor(comp: str, path: Path) -> Any:
    if comp == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if comp == "xz":
        return lzma.LZMADecompressor()
    if comp == "bz2":
        return bz2.BZ2Decompressor()
    if comp == "zstd":
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - zstandard is a dependency
            raise MissingDependency(path, "zstd-compressed; install the 'zstandard' package") from exc
        return zstandard.ZstdDecompressor().decompressobj()
    raise ValueError(comp)


class DecompressStream:
    """The one decompression path: a file's content in bounded chunks, streaming.

    Every compressed input (Kineto JSON, CSV, nsys SQLite, ncu reports) goes through here, so
    every one has both caps: the absolute one (``max_bytes``, :func:`max_decompressed` by
    default) and the ratio one (:func:`check_expansion`), checked as the bytes come, before
    more are produced. Nothing is held but the current chunk. Concatenated streams (``cat a.gz
    b.gz``) are read whole; a stream that ends early or is damaged ends the chunks quietly with
    ``truncated`` set, after everything readable was delivered.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        f: BinaryIO,
        comp: str | None,
        max_bytes: int | None = None,
        recognised: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.f = f
        self.compression = comp
        self.max_bytes = max_decompressed() if max_bytes is None else max_bytes
        self.recognised = recognised
        self.consumed = 0
        self.produced = 0
        self.truncated = False

    def _account(self, out: bytes) -> bytes:
        self.produced += len(out)
        if self.produced > self.max_bytes:
            raise CorruptTrace(
                self.path,
                f"decompresses to more than {self.max_bytes // 1024**2:,} MiB; refusing (a decompression bomb?)",
                self.recognised,
            )
        check_expansion(self.path, self.produced, self.consumed, self.recognised)
        return out

    def chunks(self, out_block: int = OUT_BLOCK) -> Iterator[bytes]:
        """The content in chunks of at most ``out_block`` bytes (zstd: about that size)."""
        f, comp = self.f, self.compression
        try:
            if comp is None:
                while block := f.read(out_block):
                    self.consumed += len(block)
                    yield self._account(block)
                return
            yield from self._decompressed(f, comp, out_block)
        except LoadError:
            raise
        except _STREAM_ERRORS:
            # a damaged stream (zlib/lzma/bz2/zstd each raise their own): keep what was delivered
            self.truncated = True

    def _decompressed(self, f: BinaryIO, comp: str, out_block: int) -> Iterator[bytes]:
        step = _ZSTD_RAW_BLOCK if comp == "zstd" else _RAW_BLOCK
        dec = _decompressor(comp, self.path)
        zstd = comp == "zstd"
        pending = bytearray()  # zstd output gathered into chunks of about out_block
        data = b""
        try:
            yield from self._loop(f, comp, out_block, step, dec, zstd, pending, data)
        except _STREAM_ERRORS:
            self.truncated = True  # damaged: what came before the damage is delivered below
        if pending:
            yield bytes(pending)

    def _loop(self, f: BinaryIO, comp: str, out_block: int, step: int, dec: Any, zstd: bool, pending: bytearray, data: bytes) -> Iterator[bytes]:
        while True:
            if dec.eof:
                # another member / stream (``cat a.gz b.gz``), or the end: padding is ignored
                while len(data) < 8 and (more := f.read(step)):
                    self.consumed += len(more)
                    data += more
                if compression_of(data[:8]) != comp:
                    break
                dec = _decompressor(comp, self.path)
            if not data and getattr(dec, "needs_input", True):
                data = f.read(step)
                self.consumed += len(data)
                if not data:
                    if hasattr(dec, "flush") and not zstd:  # zlib may still hold output
                        tail = dec.flush()
                        if tail:
                            yield self._account(tail)
                        if dec.eof:
                            continue
                    self.truncated = True  # the input ends inside a stream
                    break
            if zstd:
                out = dec.decompress(data)
                data = dec.unused_data if dec.eof else b""
                if out:
                    pending += self._account(out)
                    if len(pending) >= out_block:
                        yield bytes(pending)
                        pending.clear()
                continue
            out = dec.decompress(data, out_block)
            # zlib hands back the input it did not use; lzma and bz2 keep it until asked again
            data = dec.unused_data if dec.eof else getattr(dec, "unconsumed_tail", b"")
            if out:
                yield self._account(out)


def read_content(
    path: str | os.PathLike[str],
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> Content:
    """Read the whole file, decompressing transparently (through :class:`DecompressStream`).

    A compressed stream that ends early or is damaged is not an error: the readable prefix is
    returned with ``truncated=True`` so a loader can load every complete event and warn.
    """
    p = Path(path)
    size = check_file(p).st_size
    with open_input(p) as f:
        comp = compression_of(f.read(8))
        f.seek(0)
        if comp is None:
            try:
                return Content(f.read(), None)
            except OSError as exc:
                raise LoadError(p, _os_problem(exc)) from exc
        stream = DecompressStream(p, f, comp, max_bytes)
        chunks: list[bytes] = []
        for chunk in stream.chunks():
            chunks.append(chunk)
            if progress is not None and size:
                progress(min(stream.consumed / size, 1.0) * 0.3, "decompressing")
    data = b"".join(chunks)
    del chunks
    return Content(data, comp, truncated=stream.truncated)


def decompress_to_file(
    path: str | os.PathLike[str],
    suffix: str,
    progress: Progress | None = None,
    check: Callable[[], None] | None = None,
    recognised: str | None = None,
) -> tuple[Path, str, bool]:
    """Decompress ``path`` into a file in the private temporary folder (for readers that need a file).

    Streams chunk by chunk: no copy of the content is held in memory. Besides the two caps of
    :class:`DecompressStream`, the file may not fill the temporary folder's disk. Returns (the
    file, the compression, truncated); the caller removes the file (:func:`remove_quietly`), and
    the folder goes at exit or on a signal whatever happens.
    """
    p = Path(path)
    size = max(check_file(p).st_size, 1)
    folder = private_tmpdir()
    fd, name = tempfile.mkstemp(prefix="kviewer-", suffix=suffix, dir=folder)
    out_path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out, open_input(p, recognised) as f:
            comp = compression_of(f.read(8)) or ""
            f.seek(0)
            try:
                free = shutil.disk_usage(folder).free - 256 * 1024**2
            except OSError:
                free = MAX_DECOMPRESSED
            cap = min(max_decompressed(), max(free, 0))
            stream = DecompressStream(p, f, comp or None, recognised=recognised)
            for chunk in stream.chunks():
                if stream.produced > cap:
                    raise LoadError(
                        p,
                        f"decompressing needs more than the {cap // 1024**2:,} MiB free in {folder.parent}; "
                        "set TMPDIR to a larger disk or decompress it yourself",
                        recognised,
                    )
                out.write(chunk)
                if check is not None:
                    check()
                if progress is not None:
                    progress(min(stream.consumed / size, 1.0) * 0.3, "decompressing")
        return out_path, comp, stream.truncated
    except BaseException:
        remove_quietly(out_path)
        raise


class _Connection(sqlite3.Connection):
    """A read-only connection that may own a private copy of the database, removed on close."""

    copy_dir: str | None = None
    warnings: list[str]

    def close(self) -> None:
        super().close()
        if self.copy_dir is not None:
            shutil.rmtree(self.copy_dir, ignore_errors=True)
            self.copy_dir = None


def _wal_mode(path: Path) -> bool:
    """True when the header says WAL mode (file format read/write versions 2)."""
    with open_input(path) as f:
        header = f.read(20)
    return header.startswith(SQLITE_MAGIC) and len(header) == 20 and 2 in (header[18], header[19])


#: files SQLite opens beside a database on its own
SIDECARS = ("-wal", "-journal", "-shm")

def _unsafe_sidecars(p: Path) -> list[str]:
    """Sidecar files beside ``p`` that are not plain regular files (symlinks, FIFOs, devices, folders)."""
    bad = []
    for suffix in SIDECARS:
        side = p.with_name(p.name + suffix)
        try:
            st = os.lstat(side)
        except FileNotFoundError:
            continue
        except OSError:
            bad.append(side.name)
            continue
        if not stat.S_ISREG(st.st_mode):
            bad.append(side.name)
    return bad


def _copy_input(src: Path, dst: Path, limit: int) -> None:
    """Copy a regular file (checked on the open descriptor) of at most ``limit`` bytes."""
    with open_input(src) as f, open(dst, "xb") as out:
        copied = 0
        while block := f.read(OUT_BLOCK):
            copied += len(block)
            if copied > limit:
                raise LoadError(src, f"larger than the {limit // 1024**2:,} MiB free for a private copy")
            out.write(block)


def tables_only(con: sqlite3.Connection) -> set[str]:
    """The database's tables (``sqlite_master`` type 'table': never a view, a trigger or an index)."""
    return {r[0] for r in con.execute("select name from sqlite_master where type = 'table'") if isinstance(r[0], str)}


def connect_readonly(
    path: str | os.PathLike[str],
    recognised: str | None = None,
    interrupt: Callable[[], bool] | None = None,
    policy: str = "strict",
) -> sqlite3.Connection:
    """Open a SQLite file read-only (``file:…?mode=ro``) with SQLite's defensive settings (:func:`kviewer.io.sqlite_safety.harden_strict_connection`).

    ``immutable=1`` is not used in general: it would skip locking, and a trace being written could
    be misread. A WAL-mode database is the exception: even read-only, SQLite creates ``-wal`` and
    ``-shm`` files beside it (and writes to existing ones). Without a ``-wal`` file every committed
    page is in the database itself, so it is read as immutable; with one, a private copy of both is
    opened instead (in the private temporary folder, removed when the connection closes).

    Sidecar files (``-wal``, ``-journal``, ``-shm``) are used only when they are regular files: a
    symlink (to /dev/zero, say), FIFO or device there makes the database open as immutable, so
    SQLite never touches them; the connection's ``warnings`` say so.

    ``interrupt``, when given, is called every few thousand SQLite steps; True stops the running
    query (``sqlite3.OperationalError: interrupted``): a cancel button or Ctrl+C acts within
    milliseconds even inside one long query.

    ``policy`` says who runs SQL on it: ``"strict"`` (kviewer's own queries: tables only, nothing a
    view or trigger does runs; :func:`kviewer.io.sqlite_safety.strict_authorizer`) or ``"query"`` (user SQL on a database kviewer
    wrote, views allowed: :func:`kviewer.io.sqlite_safety.query_authorizer`). Either way the
    connection is read-only, with SQLite's defensive settings. This is the one open for every
    SQLite file kviewer reads.
    """
    if policy not in ("strict", "query"):
        raise ValueError(policy)
    check_file(path)  # before resolve(): a symlink loop is a LoadError, not a RuntimeError
    p = Path(path).resolve()
    uri = p.as_uri() + "?mode=ro"
    copy_dir: str | None = None
    warnings: list[str] = []
    try:
        bad = _unsafe_sidecars(p)
        if bad:
            warnings.append(f"ignored {', '.join(bad)} beside it: not a regular file")
            uri += "&immutable=1"
        elif _wal_mode(p):
            wal = p.with_name(p.name + "-wal")
            if wal.exists():
                copy_dir = tempfile.mkdtemp(prefix="sqlite-", dir=private_tmpdir())
                try:
                    free = shutil.disk_usage(copy_dir).free - 256 * 1024**2
                except OSError:
                    free = MAX_DECOMPRESSED
                _copy_input(p, Path(copy_dir) / p.name, free)
                _copy_input(wal, Path(copy_dir) / wal.name, free - p.stat().st_size)
                uri = (Path(copy_dir) / p.name).as_uri() + "?mode=ro"
            else:
                uri += "&immutable=1"
        con = sqlite3.connect(uri, uri=True, check_same_thread=False, factory=_Connection)
        con.copy_dir, copy_dir = copy_dir, None  # the connection owns the copy now
        con.warnings = warnings
        try:
            harden_strict_connection(con)
            if policy == "query":
                harden_query_connection(con)
            if interrupt is not None:
                con.set_progress_handler(lambda: 1 if interrupt() else 0, 20_000)
            con.execute("select count(*) from sqlite_master").fetchone()
        except (sqlite3.DatabaseError, UnicodeDecodeError):  # a damaged schema text is not UTF-8
            con.close()
            raise
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        raise CorruptTrace(path, f"not a readable SQLite database ({exc})", recognised) from exc
    except OSError as exc:
        raise LoadError(path, f"could not be read ({exc.strerror or exc})", recognised) from exc
    finally:
        if copy_dir is not None:
            shutil.rmtree(copy_dir, ignore_errors=True)
    return con
