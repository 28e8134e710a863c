"""The cache database: lookup, storing, eviction, and the checks that keep it private."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import stat
import threading
import time
from pathlib import Path
from typing import Any, Callable

from kviewer.core import Diagnostic, Trace, TraceMeta, jsonout, schema
from kviewer.errors import CacheProblem
from kviewer.io.cache import keys
from kviewer.io.cache.codec import CacheDamaged, ColumnBlob, NotCacheable, decode_frame, decode_meta, encode_meta, iter_encoded
from kviewer.io.cache.keys import SourceId, cache_dir, max_bytes_from_env, source_id
from kviewer.io.memory import memory_budget, rss

log = logging.getLogger(__name__)

DB_NAME = "traces.sqlite"


class UnsafeCache(CacheProblem):
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
# which loads may be cached

def load_was_complete(trace: Trace) -> bool:
    """False when the loader says, by a diagnostic of a partial kind (``truncated``, ``damaged``:
    :data:`kviewer.core.diagnostics.PARTIAL_KINDS`), that it read only part of the input: a cut
    file may be a file still being written."""
    return not any(d.partial for d in trace.meta.warnings)


# ---------------------------------------------------------------------------------------------
# the database


def _is_corruption(exc: sqlite3.Error) -> bool:
    name = getattr(exc, "sqlite_errorname", "") or ""
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return True
    text = str(exc).lower()  # foreign message: SQLite's, for Pythons without sqlite_errorname
    return "not a database" in text or "malformed" in text or "corrupt" in text


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
        self.warnings: list[Diagnostic] = []
        """problems met (damaged cache rebuilt, ...), for the caller to show"""
        self._lock = threading.Lock()
        self._complained = False
        self._refused = False

    # -- connection ----------------------------------------------------------------------------

    def _open(self) -> Any:  # a sqlite_utils.Database (imported on first use)
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
            # what analyses of a cached file computed (session/analysis_cache.py: SOL, fusion),
            # in the same database, under the same bound and the same eviction
            db.table("extras").create(
                {"key": str, "kind": str, "info": str, "data": bytes, "nbytes": int, "created": float, "last_used": float},
                pk="key",
                if_not_exists=True,
            )
        except BaseException:
            conn.close()
            raise
        return db

    def _rebuild(self, exc: BaseException) -> None:
        msg = f"the trace cache {self.path} was damaged ({exc}); it has been rebuilt"
        self._say(msg)
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
            self._say(msg)

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

    def _say(self, msg: str) -> None:
        log.info(msg)  # the user sees it in the trace's warnings
        self.warnings.append(Diagnostic.warning("cache", self.path, msg))

    def take_warnings(self) -> list[Diagnostic]:
        """The problems met since the last call (and forget them)."""
        with self._lock:
            out, self.warnings = self.warnings, []
        return out

    def get_meta(self, sid: SourceId) -> TraceMeta | None:
        """The cached trace's metadata alone (its warnings, format, origin), None on a miss: for a
        command that answers from cached analyses without decoding the tables."""

        def fetch(db: Any) -> TraceMeta | None:
            row = db.execute("select meta from entries where key = ?", [sid.key()]).fetchone()
            if row is None:
                return None
            try:
                return decode_meta(row[0])
            except (CacheDamaged, ValueError, TypeError, KeyError):
                return None  # get() says so and drops the entry when the trace is next read

        with self._lock:
            result: TraceMeta | None = self._run("read", fetch, None)
        return result

    def get(self, path: str | os.PathLike[str], sid: SourceId | None = None) -> Trace | None:
        """The cached trace for this file as it is now (``sid``: its :func:`source_id`, taken
        here when not given), or None."""
        if sid is None:
            try:
                sid = source_id(path)
            except OSError:
                return None
        key = sid.key()

        def fetch(db: Any) -> Trace | None:
            row = db.execute("select meta, path_as_given from entries where key = ?", [key]).fetchone()
            if row is None:
                return None
            try:
                # table by table: only one table's compressed blobs are held beside the decoded trace
                meta = decode_meta(row[0])
                tables = {}
                for name in schema.TABLES:
                    cur = db.execute("select tbl, col, pos, kind, dtype, nrows, info, codec, data from columns where key = ? and tbl = ?", [key, name])
                    blobs = []
                    for tbl, col, pos, kind, dtype, nrows, info, codec, data in cur:
                        try:
                            info_obj = json.loads(info) if info else {}
                        except ValueError as exc:
                            raise CacheDamaged(f"{tbl}.{col}: {exc}") from exc
                        blobs.append(ColumnBlob(tbl, col, pos, kind, dtype, nrows, info_obj, data or b"", codec))
                    if not blobs:
                        raise CacheDamaged(f"table {name} is missing")
                    tables[name] = decode_frame(name, blobs)
                    del blobs
                trace = Trace(meta=meta, **tables)
            except (CacheDamaged, ValueError, TypeError, KeyError) as exc:
                msg = f"a cached trace of {sid.path} was damaged ({exc}); it was loaded from the file again"
                self._say(msg)
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
        """Store a trace loaded from ``path``; ``before`` is :func:`source_id` taken before the load
        (whether the file changed since is asked of its stat: :meth:`SourceId.unchanged`).

        Returns False (and stores nothing) when the load was partial, the file changed while it
        was read, the trace cannot be stored faithfully, it alone exceeds the bound, or storing
        it would take the process past its memory budget (``KVIEWER_MAX_MEMORY``).

        The trace is written streaming, one table's column blobs at a time inside one
        transaction: besides the trace, only the current table's encoded columns are in memory.
        """
        if not load_was_complete(trace):
            log.info("trace cache: not storing %s: the load was partial", path)
            return False
        if not before.unchanged(path):
            log.info("trace cache: not storing %s: it changed while it was read", path)
            return False
        try:
            meta = encode_meta(trace.meta)
        except NotCacheable as exc:
            log.info("trace cache: not storing %s: %s", path, exc)
            return False
        key = before.key()
        path_as_given = int(trace.meta.path == os.fspath(path))
        now = time.time()

        budget = memory_budget()

        class _Abandon(Exception):
            pass

        def write(db: Any) -> None:
            # older parses of the same file can never hit again: drop them now
            for (old,) in db.execute("select key from entries where path = ? and key != ?", [before.path, key]).fetchall():
                self._delete(db, old, commit=False)
            self._delete(db, key, commit=False)
            nbytes = len(meta)
            for b in iter_encoded(trace, self.compress):
                info = jsonout.to_text(b.info) if b.info else ""
                nbytes += len(b.data) + len(info)
                if nbytes > self.max_bytes:
                    raise _Abandon(f"more than the bound of {self.max_bytes} bytes")
                if rss() > budget:
                    raise _Abandon("storing it would pass the memory budget")
                db.conn.execute(
                    "insert into columns (key, tbl, col, pos, kind, dtype, nrows, info, codec, data) values (?,?,?,?,?,?,?,?,?,?)",
                    [key, b.table, b.column, b.position, b.kind, b.dtype, b.nrows, info, b.codec, b.data],
                )
                del b
            db.table("entries").insert(
                {
                    "key": key,
                    "path": before.path,
                    "size": before.size,
                    "mtime_ns": before.mtime_ns,
                    "fingerprint": keys.fingerprint(),
                    "meta": meta,
                    "path_as_given": path_as_given,
                    "nbytes": nbytes,
                    "load_seconds": float(load_seconds),
                    "created": now,
                    "last_used": now,
                }
            )

        def guarded(db: Any) -> bool:
            try:
                return self._write_evicting(db, key, write)
            except _Abandon as exc:
                log.info("trace cache: not storing %s: %s", path, exc)
                return False
            except NotCacheable as exc:
                log.info("trace cache: not storing %s: %s", path, exc)
                return False
            except (sqlite3.Error, OSError, UnsafeCache):
                raise
            except Exception as exc:  # noqa: BLE001 - the cache must never fail a load that worked
                log.warning("trace cache: not storing %s: %s: %s", path, type(exc).__name__, exc)
                return False

        with self._lock:
            ok: bool = self._run("write", guarded, False)
        return ok

    @staticmethod
    def _compact(db: Any) -> None:
        try:
            db.execute("PRAGMA incremental_vacuum")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError:
            pass

    def _evict(self, db: Any, keep: str) -> int:
        """The one eviction: drop least recently used traces and analysis results (together, one
        order) until the total is within the bound."""
        total = db.execute("select coalesce(sum(nbytes), 0) from entries").fetchone()[0]
        total += db.execute("select coalesce(sum(nbytes), 0) from extras").fetchone()[0]
        evicted = 0
        if total <= self.max_bytes:
            return 0
        rows = db.execute(
            "select 'entries', key, nbytes, last_used, created from entries where key != ? "
            "union all select 'extras', key, nbytes, last_used, created from extras where key != ? order by 4, 5",
            [keep, keep],
        ).fetchall()
        for table, old, nbytes, _used, _created in rows:
            if total <= self.max_bytes:
                break
            if table == "entries":
                self._delete(db, old, commit=False)
            else:
                db.conn.execute("delete from extras where key = ?", [old])
            total -= nbytes
            evicted += 1
        return evicted

    def _delete(self, db: Any, key: str, commit: bool = True) -> None:
        db.conn.execute("delete from columns where key = ?", [key])
        db.conn.execute("delete from entries where key = ?", [key])
        if commit:
            db.commit()

    # -- analysis results (session/analysis_cache.py) ----------------------------------------------

    def get_extra(self, key: str) -> tuple[str, bytes] | None:
        """(info, data) stored under ``key`` by :meth:`put_extra`, marked as used now; None on a miss."""

        def fetch(db: Any) -> tuple[str, bytes] | None:
            row = db.execute("select info, data from extras where key = ?", [key]).fetchone()
            if row is None:
                return None
            try:
                db.execute("update extras set last_used = ? where key = ?", [time.time(), key])
            except sqlite3.OperationalError:
                pass
            return str(row[0]), bytes(row[1])

        with self._lock:
            result: tuple[str, bytes] | None = self._run("read", fetch, None)
        return result

    def _write_evicting(self, db: Any, key: str, write: Callable[[Any], object]) -> bool:
        """One write transaction: ``write(db)``, then the eviction that keeps the cache inside its
        bound (never evicting ``key``); the file is compacted after an eviction."""
        db.execute("BEGIN IMMEDIATE")
        try:
            write(db)
            evicted = self._evict(db, keep=key)
            db.commit()
        except BaseException:
            db.rollback()
            raise
        if evicted:
            self._compact(db)
        return True

    def put_extra(self, key: str, kind: str, info: str, data: bytes) -> bool:
        """Store an analysis result (``data``, with ``info`` text) under ``key``, inside the one
        bound and eviction of the cache; False when it alone exceeds the bound or the cache fails."""
        nbytes = len(data) + len(info)
        if nbytes > self.max_bytes:
            return False
        now = time.time()

        def store(db: Any) -> bool:
            return self._write_evicting(
                db, key, lambda db: db.conn.execute("insert or replace into extras values (?, ?, ?, ?, ?, ?, ?)",
                                                    [key, kind, info, data, nbytes, now, now]))

        with self._lock:
            ok: bool = self._run("write", store, False)
        return ok

    def clear_extras(self, kind: str | None = None) -> None:
        """Forget the stored analysis results (of ``kind``, or all)."""

        def wipe(db: Any) -> None:
            db.conn.execute("delete from extras" + (" where kind = ?" if kind else ""), [kind] if kind else [])
            db.commit()

        with self._lock:
            self._run("clear", wipe, None)

    def entries(self) -> list[dict[str, Any]]:
        """Cached traces, most recently used first (path, size, mtime_ns, nbytes, last_used)."""

        def fetch(db: Any) -> list[dict[str, Any]]:
            return list(db.query("select key, path, size, mtime_ns, nbytes, load_seconds, created, last_used from entries order by last_used desc"))

        with self._lock:
            result: list[dict[str, Any]] = self._run("list", fetch, [])
        return result


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
