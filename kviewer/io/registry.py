"""Format detection by content and dispatch to the right loader.

Each loader module defines ``LOADER = LoaderSpec(...)`` with a cheap ``sniff(head, path)`` that
looks at the first (decompressed) bytes, and a ``load(path, progress, cancel)`` that returns a
:class:`~kviewer.core.Trace` or raises a typed :class:`~kviewer.errors.LoadError`. The registry
tries sniffers by descending priority; the first that claims the file loads it.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Collection, Mapping, Protocol

from kviewer import io as kio
from kviewer.core import Trace
from kviewer.errors import LoadCancelled, LoadError, MemoryLimitExceeded, UnsupportedFormat
from kviewer.io.folders import describe
from kviewer.io.memory import MemoryWatch
from kviewer.io.source import Progress, compression_of_file, read_head

if TYPE_CHECKING:
    import kviewer.io.cache

#: loader modules, imported on first use (keeps start-up light)
LOADER_MODULES: list[str] = [
    "kviewer.io.nsys",
    "kviewer.io.nsys_rep",
    "kviewer.io.torch",
    "kviewer.io.ncu.report",
    "kviewer.io.ncu.csv_export",
    "kviewer.io.rocprof.v1_csv",
    "kviewer.io.rocprof.v1_db",
    "kviewer.io.rocprof.v2_csv",
    "kviewer.io.rocprof.v3_csv",
    "kviewer.io.rocprof.v3_json",
    "kviewer.io.ranks",
]


class CancelToken:
    """A flag a loader checks between chunks of work; set from another thread to cancel."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.failure: LoadError | None = None
        """set by :meth:`fail`: the error the load stops with (e.g. the memory budget was exceeded)"""

    def cancel(self) -> None:
        self._event.set()

    def fail(self, error: LoadError) -> None:
        """Stop the load with ``error`` (raised by :meth:`check`) instead of a cancellation."""
        if self.failure is None:
            self.failure = error
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            if self.failure is not None:
                raise self.failure
            raise LoadCancelled("load cancelled")


class _Heartbeat:
    """The load's progress callback, repeated while the loader is busy in one long step.

    A loader reports progress between steps; one step (a SQLite query, a sort of millions of
    rows) can take seconds. The memory watch's thread calls :meth:`tick`, which repeats the
    latest report once a second has passed without one, so a user always sees the load is alive.
    """

    def __init__(self, progress: Progress, every: float = 1.0) -> None:
        self.progress = progress
        self.every = every
        self.last = (0.0, "starting")
        self.at = time.monotonic()
        self.lock = threading.Lock()

    def __call__(self, fraction: float, message: str) -> None:
        with self.lock:
            self.last = (fraction, message)
            self.at = time.monotonic()
            self.progress(fraction, message)

    def tick(self) -> None:
        if time.monotonic() - self.at < self.every:
            return
        with self.lock:
            self.at = time.monotonic()
            self.progress(*self.last)


class LoadFn(Protocol):
    def __call__(self, path: Path, progress: Progress, cancel: CancelToken) -> Trace: ...


#: table name -> the columns a caller reads (see :func:`load`'s ``tables``); besides the Trace's
#: tables, :data:`kviewer.core.schema.OPS` names the framework ops the kernel -> op join reads
Wanted = Mapping[str, Collection[str]]


class LoadPartFn(Protocol):
    def __call__(self, path: Path, progress: Progress, cancel: CancelToken, tables: Wanted) -> Trace: ...


@dataclass(frozen=True)
class LoaderSpec:
    name: str
    """machine name, also ``Trace.meta.source_format``"""
    label: str
    """what a user calls the format"""
    priority: int
    sniff: Callable[[bytes, Path], bool]
    load: LoadFn
    directories: bool = False
    """True when the loader also accepts a folder (sniff then gets head=b"")"""
    load_part: LoadPartFn | None = None
    """reads only some tables and columns (:func:`load`'s ``tables``), when the format allows it"""
    part_in_place: Callable[[Wanted], bool] | None = None
    """True when ``load_part`` reads this part of an uncompressed file faster than the trace
    cache serves the whole trace: such a part is read from the file, the cache unused"""


_loaders: list[LoaderSpec] | None = None
_lock = threading.Lock()


def loaders() -> list[LoaderSpec]:
    """Every registered loader, highest priority first."""
    global _loaders
    with _lock:
        if _loaders is None:
            specs = [importlib.import_module(m).LOADER for m in LOADER_MODULES]
            _loaders = sorted(specs, key=lambda s: -s.priority)
        return list(_loaders)


def detect(path: str | os.PathLike[str]) -> LoaderSpec:
    """The loader that claims this file, or :class:`UnsupportedFormat`."""
    p = Path(path)
    if not p.exists():
        if p.is_symlink():
            raise LoadError(p, "is a symbolic link that loops or points to nothing")
        raise LoadError(p, "no such file or directory")
    if p.is_dir():
        for spec in loaders():
            if spec.directories and spec.sniff(b"", p):
                return spec

        raise UnsupportedFormat(p, describe(p, detect))
    head = read_head(p)
    if not head:
        raise UnsupportedFormat(p, "the file is empty")
    for spec in loaders():
        try:
            if spec.sniff(head, p):
                return spec
        except Exception:  # a sniffer must never take the app down; treat as "not mine"
            continue
    raise UnsupportedFormat(p, f"not a format kviewer reads ({describe_head(head)})")


def describe_head(head: bytes) -> str:
    """A few words on what unknown content looks like, for error messages."""
    stripped = head.lstrip()
    if stripped.startswith(b"SQLite format 3"):
        return "a SQLite database that is not a known profiler export"
    if stripped[:1] in (b"{", b"["):
        return "JSON that is not a known trace"
    try:
        head[:4096].decode("utf-8")
    except UnicodeDecodeError:
        return "binary data of an unknown kind"
    return "text of an unknown kind"


def load(
    path: str | os.PathLike[str],
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    use_cache: bool | None = None,
    tables: Wanted | None = None,
) -> Trace:
    """Detect the format of ``path`` and load it, through the trace cache (:mod:`kviewer.io.cache`).

    ``use_cache=None`` uses the cache unless ``KVIEWER_NO_CACHE`` is set; ``False`` bypasses it.

    ``tables`` (table -> columns) says what the caller reads. A loader that can read part of a
    file (``LoaderSpec.load_part``) then reads only that: the other tables are empty and the
    other columns unknown, so only the caller that asked may use the trace (a summary of a big
    Nsight Systems export never pays for its API calls). A part the loader reads in place faster
    than the cache serves the whole trace (``LoaderSpec.part_in_place``: an uncompressed nsys
    export's GPU activity) neither reads nor writes the trace cache: storing the whole trace
    would cost a whole load (BENCHMARKS.md, "sol, stats and the cache at 611k kernels").
    Otherwise, with the cache on, the whole trace is loaded and stored, as without ``tables``.

    With the cache on, the file's identity (:func:`kviewer.io.cache.source_id`: its stat and a
    digest of its content) is taken once, before the load, and kept on the trace as
    ``trace.meta.source_id`` for the analysis cache; None with the cache off.

    Raises
    ------
    LoadError
        (or a subclass) naming the file and the problem.
    LoadCancelled
        when ``cancel`` was set.
    """
    p = Path(path)
    prog: Progress = progress or (lambda fraction, message: None)
    spec: LoaderSpec | None = None
    if tables is not None and use_cache is not False:
        spec = detect(p)
        if spec.part_in_place is not None and spec.part_in_place(tables) and compression_of_file(p) is None:
            use_cache = False  # the part from the file in place: faster than the cache (see above)
    store = None
    sid = None  # the file's identity (stat and content digest), taken once for the whole load
    if use_cache is None or use_cache:
        if use_cache or not kio.cache.cache_disabled():
            try:
                sid = kio.cache.source_id(p)
            except OSError:
                sid = None  # detect() below names the problem
            if sid is not None:
                store = kio.cache.default_cache()
                hit = store.get(p, sid)
                if hit is not None:
                    hit.meta.warnings.extend(store.take_warnings())
                    hit.meta.source_id = sid
                    prog(1.0, "loaded from the cache")
                    return hit
    beat = _Heartbeat(prog)
    beat(0.0, "detecting the format")
    spec = spec or detect(p)
    token = cancel or CancelToken()
    t0 = time.perf_counter()
    try:
        with MemoryWatch(p, token, spec.label, tick=beat.tick):
            if tables is not None and store is None and spec.load_part is not None:
                trace = spec.load_part(p, beat, token, tables)
            else:
                trace = spec.load(p, beat, token)
        if token.failure is not None:
            raise token.failure
    except LoadCancelled:
        if token.failure is not None:
            raise token.failure from None
        raise
    except LoadError as exc:
        if token.failure is not None and exc is not token.failure:
            raise token.failure from exc
        if token.cancelled and token.failure is None:
            raise LoadCancelled("load cancelled") from exc
        raise
    except MemoryError as exc:
        raise MemoryLimitExceeded(p, "not enough memory to load this file", spec.label) from exc
    except Exception as exc:  # a loader bug must still reach the user as one clear line
        # a SQLite query stopped by its progress handler, a reader thread told to stop: the
        # token says why (memory budget, cancel), not the exception it surfaced as
        if token.failure is not None:
            raise token.failure from exc
        if token.cancelled:
            raise LoadCancelled("load cancelled") from exc
        raise LoadError(p, f"could not be read: {type(exc).__name__}: {exc}", spec.label) from exc
    if store is not None and sid is not None:
        store.put(p, trace, sid, time.perf_counter() - t0)
        trace.meta.warnings.extend(store.take_warnings())
        trace.meta.source_id = sid
    prog(1.0, "done")
    return trace
