"""A trace's timeline layout (tracks, lanes and their level-of-detail arrays), cached beside the
parsed trace, so a reopened big trace paints without laying its timeline out again.

:meth:`kviewer.session.tracks.TraceTracks.build` groups a trace's rows into lanes, nests them,
builds each lane's mipmap (:class:`~kviewer.session.lod.LaneLOD`) and its counter tracks: about
0.6 s for the 153 MB ``h200_llm_train_big`` Kineto trace on an idle core, 1.5-2.3 s on the busy
2-core build machine, while the parsed trace itself comes back from the trace cache in 0.1-0.7 s.
This module stores that layout and reads it back; the storing is the trace cache's
(:meth:`kviewer.io.cache.TraceCache.put_extra`: its ``extras`` table, one bound, one
least-recently-used eviction, as :mod:`kviewer.session.analysis_cache` does), under the kind
:data:`KIND`.

What is stored is the layout built *without* a speed of light (kernels in the "unknown" colour):
the speed of light has its own cache and its own life (another GPU chosen, counters attached), and
:meth:`~kviewer.session.tracks.TraceTracks.set_sol` recolours the kernel lanes from it, which is
what ``build(trace, sol=...)`` does (the same arrays either way; a test checks it).

The encoding is data only, never pickle (a cache file is read back by a program that trusts it
less than its own code): a JSON tree of the layout's dataclasses, each named from a closed list
(:data:`_CLASSES`), with numpy arrays as references into one zstd-compressed buffer (dtype,
shape, offset; object arrays are refused). An object met twice (a lane is both in the group tree
and in ``lanes``; a mipmap level shares the arrays of the one below when nothing merged) is stored
once and comes back as one object. The entry is keyed by the file's identity taken by the load
(:func:`kviewer.io.cache.source_id`, with the parser's fingerprint) and a fingerprint of the
session and analysis sources that lay a timeline out, so a changed file or a changed layout
rule misses. Like the other caches, a problem is a miss, never a failure; ``KVIEWER_NO_CACHE``
bypasses it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import zstandard

from kviewer import __version__, io as kio
from kviewer.session.lod import LaneLOD, Level, SampledCounter, StepCounter
from kviewer.session.tracks import CounterTrack, Group, Lane, TraceTracks

if TYPE_CHECKING:
    import kviewer.io.cache
    from kviewer.core import Trace
    from kviewer.io.cache import SourceId
    from kviewer.session.analyses import SolInfo

log = logging.getLogger(__name__)

#: the kind of the cache's ``extras`` rows this module writes
KIND = "timeline"
#: bump when the stored layout changes
FORMAT = 1
#: zstd level of the array buffer (level 1: hundreds of MB/s; the index arrays compress 5-20x)
ZSTD_LEVEL = 1
#: the TraceTracks fields that are not the layout (the trace, its analyses, its identity, its key)
_NOT_LAYOUT = ("trace", "key", "sol_info", "counters", "source", "emphasis")


@functools.lru_cache(maxsize=1)
def layout_fingerprint() -> str:
    """A hash of what lays a timeline out: the session, analysis and core sources (a development
    checkout edits them without a version bump) and this module's format."""
    h = hashlib.sha256(f"kviewer {__version__} timeline cache {FORMAT}\n".encode())
    pkg = Path(__file__).resolve().parent.parent
    for sub in ("session", "analysis", "core"):
        for f in sorted((pkg / sub).glob("*.py")):
            try:
                st = f.stat()
            except OSError:
                continue
            h.update(f"{sub}/{f.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


@functools.lru_cache(maxsize=1)
def _classes() -> dict[str, type]:
    """The dataclasses a stored layout may name (nothing else is ever built from a cache row)."""
    return {c.__name__: c for c in (Group, Lane, CounterTrack, LaneLOD, Level, StepCounter, SampledCounter)}


class _NotStorable(Exception):
    """The layout holds something this encoding does not store faithfully (a miss, not an error)."""


class _Encoder:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []
        self.array_ids: dict[int, int] = {}
        self.objects: dict[int, int] = {}
        self.keep: list[Any] = []  # what the ids above belong to stays alive while encoding

    def value(self, v: Any) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, (int, float)) and not isinstance(v, np.generic):
            return v
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return {"a": self.array(v)}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return {"t": [self.value(x) for x in v]}
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise _NotStorable("a dict with keys other than text")
            return {"d": {k: self.value(x) for k, x in v.items()}}
        name = type(v).__name__
        if dataclasses.is_dataclass(v) and _classes().get(name) is type(v):
            seen = self.objects.get(id(v))
            if seen is not None:
                return {"r": seen}
            self.objects[id(v)] = idx = len(self.objects)
            self.keep.append(v)
            skip = _derived(v)
            fields = {f.name: self.value(getattr(v, f.name)) for f in dataclasses.fields(v) if f.name not in skip}
            return {"o": name, "i": idx, "f": fields}
        raise _NotStorable(f"a {type(v).__name__}")

    def array(self, a: np.ndarray) -> int:
        seen = self.array_ids.get(id(a))
        if seen is not None:
            return seen
        if a.dtype.hasobject or a.dtype.kind not in "biufcmM":
            raise _NotStorable(f"an array of {a.dtype}")
        self.array_ids[id(a)] = idx = len(self.arrays)
        self.keep.append(a)
        self.arrays.append(a)
        return idx


def _derived(obj: Any) -> tuple[str, ...]:
    """Fields of ``obj`` not stored because :func:`_derive` computes them again from the others
    (a mipmap level's running maximum of its ends; the raw level's ranks, counts and durations):
    40 % of the arrays' bytes."""
    if type(obj).__name__ == "Level":
        return ("cend", "rep", "count", "maxdur") if obj.bucket == 0 else ("cend",)
    return ()


def _derive(name: str, fields: dict[str, Any], memo: dict[tuple[str, int], np.ndarray]) -> dict[str, Any]:
    """The fields :func:`_derived` left out, computed as :meth:`~kviewer.session.lod.LaneLOD.build`
    does; one array per source array (levels that share their arrays keep sharing them)."""
    if name != "Level":
        return fields

    def once(what: str, src: np.ndarray, fn: Any) -> np.ndarray:
        key = (what, id(src))
        if key not in memo:
            memo[key] = fn(src)
        return memo[key]

    end = fields["end"]
    fields["cend"] = once("cend", end, lambda e: np.maximum.accumulate(e) if len(e) else e)
    if fields["bucket"] == 0:
        n = len(end)
        fields["rep"] = np.arange(n, dtype=np.int64)
        fields["count"] = np.ones(n, dtype=np.int64)
        fields["maxdur"] = end - fields["start"]
    return fields


@dataclasses.dataclass
class Snapshot:
    """A layout taken apart (:func:`snapshot`): its JSON tree and the arrays it refers to. Taking
    it is a walk over a few hundred objects; compressing and writing it (:func:`encode`) can run
    later, on another thread (the timeline never changes these arrays in place)."""

    tree: dict[str, Any]
    arrays: list[np.ndarray]


def snapshot(tracks: TraceTracks) -> Snapshot:
    enc = _Encoder()
    tree = {f.name: enc.value(getattr(tracks, f.name)) for f in dataclasses.fields(tracks) if f.name not in _NOT_LAYOUT}
    return Snapshot(tree, enc.arrays)


def encode(snap: Snapshot) -> bytes:
    """The layout as bytes: the length of a JSON header, the header, then the arrays' bytes
    compressed as one zstd frame."""
    specs = []
    offset = 0
    cobj = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compressobj()
    out = []
    for a in snap.arrays:
        c = np.ascontiguousarray(a)
        specs.append([c.dtype.str, list(c.shape), offset])
        if c.nbytes:
            out.append(cobj.compress(c.data.cast("B")))
        offset += c.nbytes
    out.append(cobj.flush())
    header = json.dumps({"format": FORMAT, "tree": snap.tree, "arrays": specs, "nbytes": offset}).encode()
    return len(header).to_bytes(8, "little") + header + b"".join(out)


def decode(data: bytes) -> dict[str, Any]:
    """The stored layout's fields (what :func:`encode` took from a TraceTracks, by name)."""
    n = int.from_bytes(data[:8], "little")
    head = json.loads(data[8:8 + n])
    if head.get("format") != FORMAT:
        raise _NotStorable("another format")
    # writable arrays (the timeline recolours lanes in place): one bytearray they all view
    nbytes = int(head["nbytes"])
    raw = bytearray(nbytes)
    view = memoryview(raw)
    got = 0
    with zstandard.ZstdDecompressor().stream_reader(memoryview(data)[8 + n:]) as reader:
        while got < nbytes:
            k = reader.readinto(view[got:])
            if not k:
                break
            got += k
    if got != nbytes:
        raise _NotStorable("a short array buffer")
    arrays = []
    for dtype, shape, offset in head["arrays"]:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise _NotStorable("an object array")
        count = int(np.prod(shape)) if shape else 1
        arrays.append(np.frombuffer(raw, dtype=dt, count=count, offset=int(offset)).reshape(shape))
    objects: dict[int, Any] = {}
    memo: dict[tuple[str, int], np.ndarray] = {}
    classes = _classes()

    def value(v: Any) -> Any:
        if isinstance(v, list):
            return [value(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "a" in v:
            return arrays[int(v["a"])]
        if "t" in v:
            return tuple(value(x) for x in v["t"])
        if "d" in v:
            return {k: value(x) for k, x in v["d"].items()}
        if "r" in v:
            return objects[int(v["r"])]
        cls = classes[v["o"]]  # a name outside the closed list is a KeyError: a miss
        obj = cls(**_derive(v["o"], {k: value(x) for k, x in v["f"].items()}, memo))
        objects[int(v["i"])] = obj
        return obj

    return {k: value(x) for k, x in head["tree"].items()}


def _key(sid: SourceId) -> str:
    return hashlib.sha256(f"{sid.key()} {layout_fingerprint()} {KIND}".encode()).hexdigest()


def get(sid: SourceId | None, trace: Trace) -> TraceTracks | None:
    """The cached layout of ``trace`` (loaded from the file ``sid`` names) as a new TraceTracks
    without a speed of light, None on a miss."""
    if sid is None or kio.cache.cache_disabled():
        return None
    try:
        row = kio.cache.default_cache().get_extra(_key(sid))
        if row is None:
            return None
        fields = decode(row[1])
        tracks = TraceTracks(trace=trace, key=TraceTracks.new_key(), **fields)
        for table, lanes in tracks.lane_of.items():
            if len(lanes) != len(trace.table(table)):
                return None  # another trace after all
        return tracks
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss, never a failure
        log.warning("timeline cache not read: %s", exc)
        return None


_writer: Any = None  # a one-thread concurrent.futures executor, made on first use
_writes: list[Any] = []  # the writes in flight (futures), for flush()


def put(sid: SourceId | None, tracks: TraceTracks, background: bool = False) -> bool:
    """Store the layout of ``tracks`` (built without a speed of light) of a complete load, unless
    the file changed since ``sid``. With ``background``, the layout is taken apart here and
    compressed and written on a writer thread (True: the write was started; :func:`flush` waits
    for it), so a cold open paints without waiting for it."""
    if sid is None or kio.cache.cache_disabled() or tracks.sol_info is not None or not kio.cache.load_was_complete(tracks.trace):
        return False
    try:
        snap = snapshot(tracks)
    except _NotStorable as exc:
        log.info("timeline not cached: it holds %s", exc)
        return False
    if not background:
        return _write(sid, snap)
    global _writer
    if _writer is None:
        _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kviewer-timeline-cache")
    _writes[:] = [f for f in _writes if not f.done()]
    _writes.append(_writer.submit(_write, sid, snap))
    return True


def _write(sid: SourceId, snap: Snapshot) -> bool:
    try:
        if not sid.unchanged():
            return False  # the file changed during the load: the entry could describe other bytes
        return kio.cache.default_cache().put_extra(_key(sid), KIND, "", encode(snap))
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss, never a failure
        log.warning("timeline cache not written: %s", exc)
        return False


def flush(timeout: float | None = None) -> None:
    """Wait for the background writes started so far (tests, benchmarks, shutdown)."""
    pending = list(_writes)
    if pending:
        wait(pending, timeout=timeout)


def tracks_for_open(trace: Trace, sol: SolInfo | None = None, source: SourceId | None = None,
                    background: bool = True) -> TraceTracks:
    """Worker side of opening a trace in the window: its timeline from this cache, else laid out
    and stored here (on the writer thread with ``background``); coloured by ``sol`` when given.
    ``source``: the file's identity taken by the load (None: not cached)."""
    tracks = get(source, trace)
    if tracks is None:
        tracks = TraceTracks.build(trace)
        put(source, tracks, background=background)
    tracks.source = source
    if sol is not None:
        tracks.set_sol(sol)
    return tracks
