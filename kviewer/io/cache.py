"""A cache of parsed traces, so that reopening a big trace is near instant.

Layout
------
One SQLite database (``traces.sqlite``, written through sqlite-utils) in the user's cache
directory: ``$KVIEWER_CACHE_DIR``, else ``$XDG_CACHE_HOME/kviewer``, else ``~/.cache/kviewer``.
Nothing is ever written next to an input file, and inputs are only stat-ed by the cache.

Row-wise tables would be far too slow for half a million events, so the layout is columnar: the
``entries`` table has one row per cached trace (its key, the file's identity and the trace's
metadata as JSON) and the ``columns`` table one row per (trace, table, column) holding the whole
column as one BLOB:

* numeric and boolean columns: the numpy array's bytes;
* ``category`` columns: the integer codes' bytes, with the categories as a JSON list;
* free-text columns: a msgspec-encoded JSON list of strings.

Blobs are zstd-compressed with a checksum, so a damaged blob is detected rather than decoded
into wrong numbers.

Keys and invalidation
---------------------
An entry is keyed by the resolved path, size and modification time (ns) of the file (for a
folder: of every file in it) and by a fingerprint of the code that parsed it (kviewer version,
the schema as data, this cache's format and the size/mtime of the loader sources), so touching
a file, changing the schema or editing a loader all miss. A trace is stored only when its load
was complete (not a partial load of a cut file) and the file did not change during the load.

Bounds and failures
-------------------
The cache is bounded (2 GiB by default; ``KVIEWER_CACHE_MAX_BYTES``, e.g. ``500M``) and evicts
the least recently used traces. ``KVIEWER_NO_CACHE=1`` (or ``use_cache=False`` / the CLI's
``--no-cache``) bypasses it. A damaged cache database is deleted and rebuilt with a warning;
the cache never makes a load fail.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from kviewer.core import Trace, TraceMeta, schema

log = logging.getLogger(__name__)

#: bump when the stored layout changes; part of every key
CACHE_FORMAT = 1
DEFAULT_MAX_BYTES = 2 * 1024**3
DB_NAME = "traces.sqlite"
#: zstd level: level 1 compresses trace columns 3-10x at several hundred MB/s
ZSTD_LEVEL = 1

ENV_DIR = "KVIEWER_CACHE_DIR"
ENV_DISABLE = "KVIEWER_NO_CACHE"
ENV_MAX = "KVIEWER_CACHE_MAX_BYTES"


class CacheDamaged(Exception):
    """A cached entry or the cache database could not be read back."""


class NotCacheable(Exception):
    """The trace holds something the columnar codec cannot store faithfully."""


class UnsafeCache(Exception):
    """The cache folder or database could be read or written by someone else: it is not used."""


def _check_private(path: Path, what: str) -> os.stat_result | None:
    """lstat ``path`` and refuse it unless it is ours alone: not a symlink, owned by this user,
    writable by nobody else. None when it does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeCache(f"the cache {what} {path} is a symbolic link")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise UnsafeCache(f"the cache {what} {path} belongs to another user (uid {st.st_uid})")
    if st.st_mode & 0o022:
        raise UnsafeCache(f"the cache {what} {path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})")
    return st


def secure_cache_files(directory: Path, db_path: Path) -> None:
    """Make sure the cache is private before it is opened, or raise :class:`UnsafeCache`.

    The folder is created 0700 and the database 0600 (SQLite gives its -wal and -shm files the
    database's mode). A folder or file that is a symlink, belongs to another user or is writable
    by others is refused: entries there could be forged, or a write go through to another file.
    Our own folder or files that others can merely read (made by an older kviewer, 0755/0644)
    are tightened.
    """
    st = _check_private(directory, "folder")
    if st is None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = _check_private(directory, "folder")
        if st is None:  # pragma: no cover - removed under our feet
            raise UnsafeCache(f"the cache folder {directory} vanished")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeCache(f"the cache folder {directory} is not a folder")
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(str(db_path) + suffix)
        fst = _check_private(f, "database" if not suffix else f"file {suffix}")
        if fst is None:
            continue
        if not stat.S_ISREG(fst.st_mode):
            raise UnsafeCache(f"the cache file {f} is not a regular file")
        if stat.S_IMODE(fst.st_mode) & 0o077:
            os.chmod(f, 0o600)
    if not db_path.exists():
        flags = os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            os.close(os.open(db_path, flags, 0o600))
        except FileExistsError:  # another kviewer made it just now: check what is there
            secure_cache_files(directory, db_path)


# ---------------------------------------------------------------------------------------------
# configuration


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


from kviewer.io.memory import parse_size  # noqa: E402 - one size parser (re-exported)


def max_bytes_from_env() -> int:
    value = os.environ.get(ENV_MAX)
    if not value:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(value)
    except ValueError:
        log.warning("ignoring %s=%r: not a size; using the default %d bytes", ENV_MAX, value, DEFAULT_MAX_BYTES)
        return DEFAULT_MAX_BYTES


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
    pkg = Path(__file__).resolve().parent.parent
    for sub in ("core", "io"):
        folder = pkg / sub
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if entry.name.endswith(".py"):
                st = entry.stat()
                h.update(f"{sub}/{entry.name} {st.st_size} {st.st_mtime_ns}\n".encode())
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


# ---------------------------------------------------------------------------------------------
# the columnar codec (also used to ship traces between processes)


@dataclass
class ColumnBlob:
    """One column of one table, as stored."""

    table: str
    column: str
    position: int
    kind: str
    """``num`` (numpy bytes), ``cat`` (codes + categories), ``str`` (JSON list) or ``index``"""
    dtype: str
    """numpy dtype of the bytes (num, cat codes) or the pandas dtype (str)"""
    nrows: int
    info: dict[str, Any]
    data: bytes
    codec: str = "raw"
    """``raw`` or ``zstd``"""


@dataclass
class EncodedTrace:
    """A Trace as plain bytes and JSON: cheap to pickle, store or send to another process."""

    meta: bytes
    columns: list[ColumnBlob] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return len(self.meta) + sum(len(c.data) + len(json.dumps(c.info)) for c in self.columns)


_meta_encoder = msgspec.json.Encoder()
_meta_decoder = msgspec.json.Decoder(TraceMeta)


def encode_meta(meta: TraceMeta) -> bytes:
    """JSON for a TraceMeta; :class:`NotCacheable` when it would not read back equal."""
    try:
        data = _meta_encoder.encode(meta)
        back = _meta_decoder.decode(data)
    except (TypeError, msgspec.MsgspecError, ValueError) as exc:
        raise NotCacheable(f"metadata is not JSON: {exc}") from exc
    if back != meta:
        raise NotCacheable("metadata does not survive a JSON round trip")
    return data


def decode_meta(data: bytes) -> TraceMeta:
    try:
        return _meta_decoder.decode(data)
    except (msgspec.MsgspecError, ValueError) as exc:
        raise CacheDamaged(f"metadata: {exc}") from exc


def _compress(data: bytes, compress: bool) -> tuple[bytes, str]:
    if not compress or len(data) < 256:
        return data, "raw"
    import zstandard

    return zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True).compress(data), "zstd"


def _array_from(blob: ColumnBlob, dtype: np.dtype[Any], count: int) -> np.ndarray:
    """A writable array of ``count`` items from a blob (one copy, straight into place)."""
    out = np.empty(count, dtype=dtype)
    want = out.nbytes
    if blob.codec == "raw":
        if len(blob.data) != want:
            raise CacheDamaged(f"{blob.table}.{blob.column}: {len(blob.data)} bytes, expected {want}")
        if want:
            out.view(np.uint8)[:] = np.frombuffer(blob.data, dtype=np.uint8)
        return out
    if blob.codec != "zstd":
        raise CacheDamaged(f"{blob.table}.{blob.column}: unknown codec {blob.codec!r}")
    import zstandard

    try:
        params = zstandard.get_frame_parameters(blob.data)
        if params.content_size != want:
            raise CacheDamaged(f"{blob.table}.{blob.column}: holds {params.content_size} bytes, expected {want}")
        view = memoryview(out.view(np.uint8))  # type: ignore[arg-type]
        got = 0
        with zstandard.ZstdDecompressor().stream_reader(blob.data) as reader:
            while got < want:
                n = reader.readinto(view[got:])
                if not n:
                    break
                got += n
            # reading past the end verifies the frame checksum
            if reader.read(1):
                raise CacheDamaged(f"{blob.table}.{blob.column}: trailing data")
    except zstandard.ZstdError as exc:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {exc}") from exc
    if got != want:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {got} bytes, expected {want}")
    return out


def _bytes_from(blob: ColumnBlob) -> bytes:
    if blob.codec == "raw":
        return blob.data
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompress(blob.data)
    except zstandard.ZstdError as exc:
        raise CacheDamaged(f"{blob.table}.{blob.column}: {exc}") from exc


def _str_dtype_ok(dtype: Any) -> bool:
    try:
        return bool(pd.api.types.pandas_dtype(str(dtype)) == dtype)
    except TypeError:
        return False


def encode_frame(name: str, df: pd.DataFrame, compress: bool = True) -> list[ColumnBlob]:
    """A DataFrame as one :class:`ColumnBlob` per column (plus one for a non-default index)."""
    n = len(df)
    out: list[ColumnBlob] = []
    if not df.columns.is_unique:
        raise NotCacheable(f"{name}: duplicate column names")
    index = df.index
    if isinstance(index, pd.RangeIndex):
        if not (index.start == 0 and index.step == 1):
            out.append(ColumnBlob(name, "", -1, "index", "range", n, {"start": index.start, "step": index.step}, b""))
    elif index.dtype.kind in "iu" and index.name is None:
        arr = np.ascontiguousarray(index.to_numpy())
        data, codec = _compress(arr.tobytes(), compress)
        out.append(ColumnBlob(name, "", -1, "index", arr.dtype.str, n, {}, data, codec))
    else:
        raise NotCacheable(f"{name}: index of type {type(index).__name__}")
    for pos, col in enumerate(df.columns):
        if not isinstance(col, str):
            raise NotCacheable(f"{name}: column name {col!r} is not text")
        s = df[col]
        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype):
            cats = dt.categories
            if cats.dtype.kind not in "OUT" and not isinstance(cats.dtype, pd.StringDtype):
                raise NotCacheable(f"{name}.{col}: categories of dtype {cats.dtype}")
            values = cats.tolist()
            if any(not isinstance(v, str) for v in values):
                raise NotCacheable(f"{name}.{col}: categories that are not text")
            if not _str_dtype_ok(cats.dtype):
                raise NotCacheable(f"{name}.{col}: categories dtype {cats.dtype}")
            codes = np.ascontiguousarray(s.cat.codes.to_numpy())
            data, codec = _compress(codes.tobytes(), compress)
            info = {"categories": values, "categories_dtype": str(cats.dtype), "ordered": bool(dt.ordered)}
            out.append(ColumnBlob(name, col, pos, "cat", codes.dtype.str, n, info, data, codec))
        elif isinstance(dt, np.dtype) and dt.kind in "biuf":
            arr = np.ascontiguousarray(s.to_numpy())
            data, codec = _compress(arr.tobytes(), compress)
            out.append(ColumnBlob(name, col, pos, "num", arr.dtype.str, n, {}, data, codec))
        elif (isinstance(dt, pd.StringDtype) or dt == object) and _str_dtype_ok(dt):
            kind = pd.api.types.infer_dtype(s, skipna=True)
            if kind not in ("string", "empty"):
                raise NotCacheable(f"{name}.{col}: values of kind {kind}")
            values = s.tolist()
            if dt == object and any(not isinstance(v, str) for v in values):
                # an object column holding None/NaN would not come back as the same object
                raise NotCacheable(f"{name}.{col}: missing values in an object column")
            encoded = msgspec.json.encode([v if isinstance(v, str) else None for v in values])
            data, codec = _compress(encoded, compress)
            out.append(ColumnBlob(name, col, pos, "str", str(dt), n, {}, data, codec))
        else:
            raise NotCacheable(f"{name}.{col}: dtype {dt}")
    return out


def decode_frame(name: str, blobs: Iterable[ColumnBlob], zero_copy: bool = False) -> pd.DataFrame:
    """Inverse of :func:`encode_frame`; :class:`CacheDamaged` when a blob does not read back.

    ``zero_copy``: uncompressed numeric blobs become read-only views of the blob's bytes instead
    of copies (for a caller that only reads them, e.g. the rank merge).
    """

    def array(b: ColumnBlob) -> np.ndarray:
        dtype = np.dtype(b.dtype)
        if zero_copy and b.codec == "raw" and len(b.data) == dtype.itemsize * b.nrows:
            return np.frombuffer(b.data, dtype=dtype, count=b.nrows)
        return _array_from(b, dtype, b.nrows)

    data: dict[str, Any] = {}
    order: list[tuple[int, str]] = []
    index: Any = None
    n: int | None = None
    for b in blobs:
        if n is None:
            n = b.nrows
        elif b.nrows != n:
            raise CacheDamaged(f"{name}.{b.column}: {b.nrows} rows, table has {n}")
        try:
            if b.kind == "index":
                if b.dtype == "range":
                    start, step = int(b.info["start"]), int(b.info["step"])
                    index = pd.RangeIndex(start, start + step * b.nrows, step)
                else:
                    index = pd.Index(array(b))
                continue
            if b.kind == "num":
                values: Any = array(b)
            elif b.kind == "cat":
                codes = array(b)
                cats = pd.Index(b.info["categories"], dtype=b.info["categories_dtype"])
                if len(codes) and (codes.max(initial=-1) >= len(cats) or codes.min(initial=0) < -1):
                    raise CacheDamaged(f"{name}.{b.column}: category codes out of range")
                values = pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(cats, ordered=bool(b.info["ordered"])), validate=False)
            elif b.kind == "str":
                items = msgspec.json.decode(_bytes_from(b))
                if not isinstance(items, list) or len(items) != b.nrows:
                    raise CacheDamaged(f"{name}.{b.column}: not a list of {b.nrows} strings")
                dtype = pd.api.types.pandas_dtype(b.dtype)
                if dtype == object:
                    arr = np.empty(len(items), dtype=object)
                    arr[:] = items
                    values = arr
                else:
                    values = pd.array(items, dtype=dtype)
            else:
                raise CacheDamaged(f"{name}.{b.column}: unknown kind {b.kind!r}")
        except (KeyError, TypeError, ValueError, msgspec.MsgspecError) as exc:
            raise CacheDamaged(f"{name}.{b.column}: {type(exc).__name__}: {exc}") from exc
        data[b.column] = values
        order.append((b.position, b.column))
    columns = [c for _, c in sorted(order)]
    df = pd.DataFrame(data, columns=columns, index=index, copy=False)
    if n is not None and len(df) != n:
        raise CacheDamaged(f"{name}: {len(df)} rows, expected {n}")
    return df


def encode_trace(trace: Trace, compress: bool = True) -> EncodedTrace:
    """Every table of a trace as column blobs, and its metadata as JSON."""
    enc = EncodedTrace(encode_meta(trace.meta))
    for name in schema.TABLES:
        df = trace.table(name)
        blobs = encode_frame(name, df, compress)
        if not any(b.kind != "index" for b in blobs):
            raise NotCacheable(f"{name}: no columns")
        enc.columns.extend(blobs)
    return enc


def decode_trace(enc: EncodedTrace, zero_copy: bool = False) -> Trace:
    meta = decode_meta(enc.meta)
    by_table: dict[str, list[ColumnBlob]] = {}
    for b in enc.columns:
        by_table.setdefault(b.table, []).append(b)
    tables: dict[str, pd.DataFrame] = {}
    for name in schema.TABLES:
        if name not in by_table:
            raise CacheDamaged(f"table {name} is missing")
        tables[name] = decode_frame(name, by_table[name], zero_copy)
    return Trace(meta=meta, **tables)


# ---------------------------------------------------------------------------------------------
# which loads may be cached

#: warnings that say a load saw only part of the file; such loads are never cached
_PARTIAL_WORDS = re.compile(r"truncat|partial|\bcut\b|ends early|incomplete|damaged", re.IGNORECASE)


def load_was_complete(trace: Trace) -> bool:
    """False when the loader says (``meta.extra['partial']``/``['truncated']`` or a warning)
    that it read only part of the input: a cut file may be a file still being written."""
    extra = trace.meta.extra
    if extra.get("partial") or extra.get("truncated"):
        return False
    return not any(_PARTIAL_WORDS.search(w) for w in trace.meta.warnings)


# ---------------------------------------------------------------------------------------------
# the database


def _is_corruption(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


@dataclass
class CacheStats:
    entries: int
    bytes: int
    max_bytes: int
    path: str


class TraceCache:
    """The cache database. Every method swallows cache problems (a cache never fails a load).

    Parameters
    ----------
    directory
        Where ``traces.sqlite`` lives (default :func:`cache_dir`).
    max_bytes
        Bound on the stored bytes; least recently used traces are evicted beyond it.
    compress
        zstd-compress blobs (smaller cache, about as fast to read).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, max_bytes: int | None = None, compress: bool = True) -> None:
        self.directory = Path(directory) if directory is not None else cache_dir()
        self.path = self.directory / DB_NAME
        self.max_bytes = max_bytes_from_env() if max_bytes is None else int(max_bytes)
        self.compress = compress
        self.warnings: list[str] = []
        """problems met (damaged cache rebuilt, ...), for the caller to show"""
        self._lock = threading.Lock()
        self._complained = False
        self._refused = False

    # -- connection ----------------------------------------------------------------------------

    def _open(self):  # type: ignore[no-untyped-def]
        import sqlite_utils

        secure_cache_files(self.directory, self.path)
        conn = sqlite3.connect(str(self.path), timeout=10.0, check_same_thread=False)
        try:
            db = sqlite_utils.Database(conn, execute_plugins=False)
            # big pages: a column blob is read as a few long overflow chains
            if not self.path.stat().st_size:
                db.execute("PRAGMA page_size=65536")
                db.execute("PRAGMA auto_vacuum=INCREMENTAL")
            with db.ensure_autocommit_on():
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA journal_size_limit=67108864")
            db.table("entries").create(
                {
                    "key": str,
                    "path": str,
                    "size": int,
                    "mtime_ns": int,
                    "fingerprint": str,
                    "meta": bytes,
                    "path_as_given": int,
                    "nbytes": int,
                    "load_seconds": float,
                    "created": float,
                    "last_used": float,
                },
                pk="key",
                if_not_exists=True,
            )
            db.table("columns").create(
                {
                    "key": str,
                    "tbl": str,
                    "col": str,
                    "pos": int,
                    "kind": str,
                    "dtype": str,
                    "nrows": int,
                    "info": str,
                    "codec": str,
                    "data": bytes,
                },
                pk=("key", "tbl", "col"),
                if_not_exists=True,
            )
        except BaseException:
            conn.close()
            raise
        return db

    def _rebuild(self, exc: BaseException) -> None:
        msg = f"the trace cache {self.path} was damaged ({exc}); it has been rebuilt"
        log.info(msg)  # the user sees it in the trace's warnings
        self.warnings.append(msg)
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(str(self.path) + suffix)
            except FileNotFoundError:
                pass
            except OSError as err:
                log.warning("could not remove %s%s: %s", self.path, suffix, err)

    def _refuse(self, exc: UnsafeCache) -> None:
        """Say once, in the trace's warnings too, that the cache is not safe and is bypassed."""
        if not self._refused:
            self._refused = True
            msg = f"{exc}; the trace cache is not used (set KVIEWER_CACHE_DIR to a private folder)"
            log.info(msg)  # the user sees it in the trace's warnings
            self.warnings.append(msg)

    def _complain(self, what: str, exc: BaseException) -> None:
        """Say once that the cache does not work (e.g. a read-only home), then stay quiet."""
        if not self._complained:
            self._complained = True
            log.warning("trace cache %s: %s failed (%s); loading without it", self.path, what, exc)
        else:
            log.debug("trace cache: %s failed: %s", what, exc)

    def _run(self, what: str, fn: Any, default: Any) -> Any:
        """Run ``fn(db)``; on corruption rebuild once and retry, on other failures log and give up."""
        for attempt in (0, 1):
            db = None
            try:
                db = self._open()
                return fn(db)
            except sqlite3.Error as exc:
                if _is_corruption(exc) and attempt == 0:
                    if db is not None:
                        db.close()
                        db = None
                    self._rebuild(exc)
                    continue
                self._complain(what, exc)
                return default
            except UnsafeCache as exc:
                self._refuse(exc)
                return default
            except OSError as exc:
                self._complain(what, exc)
                return default
            finally:
                if db is not None:
                    db.close()
        return default

    # -- public API ----------------------------------------------------------------------------

    def take_warnings(self) -> list[str]:
        """The problems met since the last call (and forget them)."""
        with self._lock:
            out, self.warnings = self.warnings, []
        return out

    def get(self, path: str | os.PathLike[str]) -> Trace | None:
        """The cached trace for this file as it is now, or None."""
        try:
            sid = source_id(path)
        except OSError:
            return None
        key = sid.key()

        def fetch(db: Any) -> Trace | None:
            row = db.execute("select meta, path_as_given from entries where key = ?", [key]).fetchone()
            if row is None:
                return None
            cur = db.execute("select tbl, col, pos, kind, dtype, nrows, info, codec, data from columns where key = ?", [key])
            try:
                blobs = []
                for tbl, col, pos, kind, dtype, nrows, info, codec, data in cur:
                    try:
                        info_obj = json.loads(info) if info else {}
                    except ValueError as exc:
                        raise CacheDamaged(f"{tbl}.{col}: {exc}") from exc
                    blobs.append(ColumnBlob(tbl, col, pos, kind, dtype, nrows, info_obj, data or b"", codec))
                trace = decode_trace(EncodedTrace(row[0], blobs))
            except (CacheDamaged, ValueError, TypeError, KeyError) as exc:
                msg = f"a cached trace of {sid.path} was damaged ({exc}); it was loaded from the file again"
                log.info(msg)  # the user sees it in the trace's warnings
                self.warnings.append(msg)
                self._delete(db, key)
                return None
            if row[1]:
                trace.meta.path = os.fspath(path)
            try:
                db.execute("update entries set last_used = ? where key = ?", [time.time(), key])
            except sqlite3.OperationalError:  # busy: the LRU order is a hint, not worth waiting for
                pass
            return trace

        with self._lock:
            result: Trace | None = self._run("read", fetch, None)
        return result

    def put(self, path: str | os.PathLike[str], trace: Trace, before: SourceId, load_seconds: float = 0.0) -> bool:
        """Store a trace loaded from ``path``; ``before`` is :func:`source_id` taken before the load.

        Returns False (and stores nothing) when the load was partial, the file changed while it
        was read, the trace cannot be stored faithfully or it alone exceeds the bound.
        """
        if not load_was_complete(trace):
            log.info("trace cache: not storing %s: the load was partial", path)
            return False
        try:
            after = source_id(path)
        except OSError:
            return False
        if after != before:
            log.info("trace cache: not storing %s: it changed while it was read", path)
            return False
        try:
            enc = encode_trace(trace, self.compress)
        except NotCacheable as exc:
            log.info("trace cache: not storing %s: %s", path, exc)
            return False
        except Exception as exc:  # noqa: BLE001 - the cache must never fail a load that worked
            log.warning("trace cache: not storing %s: %s: %s", path, type(exc).__name__, exc)
            return False
        nbytes = enc.nbytes
        if nbytes > self.max_bytes:
            log.info("trace cache: not storing %s: %d bytes exceed the bound of %d", path, nbytes, self.max_bytes)
            return False
        key = before.key()
        path_as_given = int(trace.meta.path == os.fspath(path))
        now = time.time()

        def store(db: Any) -> bool:
            db.execute("BEGIN IMMEDIATE")
            try:
                # older parses of the same file can never hit again: drop them now
                for (old,) in db.execute("select key from entries where path = ? and key != ?", [before.path, key]).fetchall():
                    self._delete(db, old, commit=False)
                self._delete(db, key, commit=False)
                db.table("entries").insert(
                    {
                        "key": key,
                        "path": before.path,
                        "size": before.size,
                        "mtime_ns": before.mtime_ns,
                        "fingerprint": fingerprint(),
                        "meta": enc.meta,
                        "path_as_given": path_as_given,
                        "nbytes": nbytes,
                        "load_seconds": float(load_seconds),
                        "created": now,
                        "last_used": now,
                    }
                )
                db.table("columns").insert_all(
                    (
                        {
                            "key": key,
                            "tbl": b.table,
                            "col": b.column,
                            "pos": b.position,
                            "kind": b.kind,
                            "dtype": b.dtype,
                            "nrows": b.nrows,
                            "info": json.dumps(b.info, ensure_ascii=False) if b.info else "",
                            "codec": b.codec,
                            "data": b.data,
                        }
                        for b in enc.columns
                    ),
                    batch_size=16,
                )
                evicted = self._evict(db, keep=key)
                db.commit()
            except BaseException:
                db.rollback()
                raise
            if evicted:
                try:
                    db.execute("PRAGMA incremental_vacuum")
                    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.OperationalError:
                    pass
            return True

        with self._lock:
            ok: bool = self._run("write", store, False)
        return ok

    def _evict(self, db: Any, keep: str) -> int:
        """Drop least recently used entries until the total is within the bound."""
        total = db.execute("select coalesce(sum(nbytes), 0) from entries").fetchone()[0]
        evicted = 0
        if total <= self.max_bytes:
            return 0
        for old, nbytes in db.execute("select key, nbytes from entries where key != ? order by last_used, created", [keep]).fetchall():
            if total <= self.max_bytes:
                break
            self._delete(db, old, commit=False)
            total -= nbytes
            evicted += 1
        return evicted

    def _delete(self, db: Any, key: str, commit: bool = True) -> None:
        db.conn.execute("delete from columns where key = ?", [key])
        db.conn.execute("delete from entries where key = ?", [key])
        if commit:
            db.commit()

    def entries(self) -> list[dict[str, Any]]:
        """Cached traces, most recently used first (path, size, mtime_ns, nbytes, last_used)."""

        def fetch(db: Any) -> list[dict[str, Any]]:
            return list(db.query("select key, path, size, mtime_ns, nbytes, load_seconds, created, last_used from entries order by last_used desc"))

        with self._lock:
            result: list[dict[str, Any]] = self._run("list", fetch, [])
        return result

    def stats(self) -> CacheStats:
        items = self.entries()
        return CacheStats(len(items), sum(e["nbytes"] for e in items), self.max_bytes, str(self.path))

    def clear(self) -> None:
        """Delete the cache database."""
        with self._lock:
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    os.unlink(str(self.path) + suffix)
                except FileNotFoundError:
                    pass


_default: TraceCache | None = None
_default_lock = threading.Lock()


def default_cache() -> TraceCache:
    """The process's cache in :func:`cache_dir` (re-made when the environment changes it)."""
    global _default
    with _default_lock:
        directory = cache_dir()
        max_bytes = max_bytes_from_env()
        if _default is None or _default.directory != directory or _default.max_bytes != max_bytes:
            _default = TraceCache(directory, max_bytes)
        return _default
