"""PyTorch profiler (Kineto) Chrome-trace JSON.

What the files look like
------------------------
``torch.profiler`` (through Kineto) writes one JSON object: a few header keys (``schemaVersion``,
``deviceProperties``, ``distributedInfo``, CUDA/CUPTI or HIP/roctracer versions, ``trace_id``,
``baseTimeNanoseconds``) and ``traceEvents``, a Chrome-trace event list. Complete events
(``"ph": "X"``) carry everything kviewer shows; flow (``s``/``f``), instant (``i``) and metadata
(``M``) events are not needed because every GPU activity and the API call that launched it carry the
same ``correlation`` arg (the ``ac2g``/``launch`` flows only repeat that pairing).

Variants handled (each has a real sample in ../shared/samples/torch):

* current schema: lower-case categories (``cpu_op``, ``cuda_runtime``, ``kernel``, ``gpu_memcpy``…),
  arg ``External id``; float ``ts`` in µs relative to ``baseTimeNanoseconds``;
* older files (2023) without ``baseTimeNanoseconds``: integer ``ts`` in absolute epoch µs;
* the 2021 schema (PyTorch 1.8/1.9): capitalised categories (``Operator``, ``Runtime``, ``Kernel``,
  ``Memcpy``, ``Memset``), arg ``external id``, string tids (``"stream 7"``, ``"25738"``);
* ROCm (roctracer): HIP calls under ``cuda_runtime`` with grid/block/kernel args; kernels may lack
  grid/block and memcpys their byte count, which are then taken from the launching call;
* GPU-only and CPU-only traces, single-line files, ``distributedInfo`` ranks;
* truncated files (the writer died, a cut download or ``.gz``): every complete event is loaded and
  a warning says so.

``ts`` and ``dur`` are always microseconds whatever ``displayTimeUnit`` says (that key only sets the
unit chrome://tracing displays). Times become int64 ns exactly as ``round(us * 1000)``; absolute
epoch timestamps get an integer origin subtracted before scaling so no digit is lost.

Where things go
---------------
* ``kernel``/``Kernel`` -> ``kernels``; ``gpu_memcpy``/``Memcpy`` and ``gpu_memset``/``Memset`` ->
  ``gpu_ops``.
* Every other complete event -> ``cpu_slices`` with category ``runtime`` (``*_runtime``,
  ``Runtime``), ``driver`` (``*_driver``), ``op`` (``cpu_op``, ``Operator``), ``python``
  (``python_function``), ``annotation`` (``user_annotation``), ``sync`` (``cuda_sync``) or
  ``other``. ``gpu_user_annotation`` ranges (``record_function`` ranges as Kineto projects them onto
  a GPU stream) become category ``gpu_annotation``; like ``cuda_sync`` they live on a GPU track, so
  their ``pid``/``tid`` hold the device and stream exactly as the file has them, and their depth is
  computed on a track of their own (never mixed with a host thread that has the same numbers).
* The profiler's own span (cat ``Trace``, pid ``"Spans"``) and other events on non-numeric
  pseudo-processes are skipped.
* ``flows`` link each runtime/driver call to the kernel or GPU op with the same correlation id.

Performance
-----------
The file is decompressed by a background thread (zlib, lzma, bz2 and zstd release the GIL) while
the main thread decodes what has arrived: the event list is cut at event boundaries into pieces of
a few MB, each decoded with typed msgspec structs (``_Event``, whose ``args`` go straight into a
small typed ``_Args``; msgspec skips every other key, shapes and dtypes stay ``msgspec.Raw`` JSON
text). Each piece is turned into numpy columns at once and its structs are dropped, so no Python
object per event outlives its piece, and decompression, decoding and column building overlap on
two cores. The tables are sorted and linked with numpy at the end.
"""

from __future__ import annotations

import gc
import math
import os
import queue
import re
import threading
from collections.abc import Callable
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
from msgspec import Raw, field

from kviewer.core import Trace, TraceMeta, make_table
from kviewer.core.names import short_name
from kviewer.errors import CorruptTrace, LoadError, TruncatedTrace
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import OUT_BLOCK, DecompressStream, Progress, compression_of, max_decompressed, open_input

LABEL = "PyTorch profiler (Kineto) JSON"
NAME = "torch"

# ---------------------------------------------------------------------------------------------
# typed decoding

_NO_RAW = Raw(b"")


class _Args(msgspec.Struct, gc=False, frozen=True):
    """The args kviewer uses; msgspec skips every other key without building it."""

    external_id: int = field(name="External id", default=-1)
    external_id_2021: int = field(name="external id", default=-1)
    correlation: int = -1
    device: int = -1
    # ROCm HIP calls write the stream as a pointer string ("0x0")
    stream: int | str = -1
    grid: list[int] | None = None
    block: list[int] | None = None
    registers: int = field(name="registers per thread", default=-1)
    shared_mem: int = field(name="shared memory", default=-1)
    occupancy: float = field(name="est. achieved occupancy %", default=math.nan)
    bytes: int = -1
    # hipMemcpy* calls: "size": "2560", "kind": "1"; ROCm GPU ops: "kind": "HtoD"
    size: int | str = -1
    kind: int | str = ""
    input_dims: Raw = field(name="Input Dims", default=_NO_RAW)
    input_types: Raw = field(name="Input type", default=_NO_RAW)
    concrete: Raw = field(name="Concrete Inputs", default=_NO_RAW)
    flops: float = field(name="FLOPs", default=math.nan)


_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    """One Chrome-trace event (``id``, ``bp``, ``s`` and the like are skipped)."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: int | str = -1
    tid: int | str = -1
    # JSON integers (absolute epoch µs) become floats exactly: they are far below 2**53
    ts: float = 0.0
    dur: float = 0.0
    args: _Args | None = _NO_ARGS


class _Header(msgspec.Struct, gc=False):
    """Top-level keys other than the events (all optional; ``Any`` so odd values never fail)."""

    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    displayTimeUnit: Any = None
    traceName: Any = None
    trace_id: Any = None
    cuda_runtime_version: Any = None
    cuda_driver_version: Any = None
    cupti_version: Any = None
    roctracer_version: Any = None
    hip_runtime_version: Any = None
    hip_driver_version: Any = None
    record_shapes: Any = None
    with_stack: Any = None
    with_flops: Any = None
    with_modules: Any = None
    profile_memory: Any = None


class _Doc(_Header, gc=False):
    traceEvents: list[_Event] | None = None


class _DocRaw(_Header, gc=False):
    traceEvents: list[Raw] | None = None


class _Probe(msgspec.Struct):
    """Decoding into a struct with no fields checks the JSON syntax without building anything."""


_DOC = msgspec.json.Decoder(_Doc)
_DOC_RAW = msgspec.json.Decoder(_DocRaw)
_EVENTS = msgspec.json.Decoder(list[_Event])
_EVENTS_RAW = msgspec.json.Decoder(list[Raw])
_EVENT = msgspec.json.Decoder(_Event)
_PROBE = msgspec.json.Decoder(_Probe)
_HEADER_FIELDS = _Header.__struct_fields__

# ---------------------------------------------------------------------------------------------
# sniffing

_MARKERS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"', b'"baseTimeNanoseconds"')
_PH_KEY = re.compile(rb'"ph"\s*:\s*"[A-Za-z]"')
_TS_KEY = re.compile(rb'"ts"\s*:\s*-?\d')
_BOM = b"\xef\xbb\xbf"


def sniff(head: bytes, path: Path) -> bool:
    """Claim Kineto / Chrome-trace JSON objects by content.

    The head is only 64 KiB and ``traceEvents`` may come after a long ``deviceProperties``,
    ``distributedInfo`` or ``metadata`` block, so any of the Kineto header keys is enough, as are
    Chrome-trace event keys (``"ph": "X"`` and a numeric ``"ts"``). rocprofv3's JSON (an object
    under ``"rocprofiler-sdk-tool"``) is refused, and so is anything that is not a JSON object
    (rocprof v1's ``results.json`` fragment starts with a comma; CSV; SQLite).
    """
    s = head.lstrip()
    if s.startswith(_BOM):
        s = s[3:].lstrip()
    if not s.startswith(b"{"):
        return False
    if b'"rocprofiler-sdk-tool"' in head:
        return False
    if any(m in head for m in _MARKERS):
        return True
    return _PH_KEY.search(head) is not None and _TS_KEY.search(head) is not None


# ---------------------------------------------------------------------------------------------
# reading: decompression on a background thread

#: the most decompressed bytes handed over at once (so a decompression bomb never sits in memory whole)
_OUT_BLOCK = OUT_BLOCK


class _Reader:
    """Decompresses ``path`` on a daemon thread into a small queue of byte chunks.

    The decompressors release the GIL, so this runs while the main thread decodes. A stream that
    ends early or is damaged is not an error: ``truncated`` is set and what was decompressed
    before the damage has been delivered.
    """

    def __init__(self, path: Path, max_bytes: int | None = None) -> None:
        self.path = path
        self._file = open_input(path, LABEL)  # the reader thread closes it
        try:
            self.size = max(os.fstat(self._file.fileno()).st_size, 1)
        except OSError as exc:
            self._file.close()
            raise LoadError(path, f"cannot be read ({exc.strerror or exc})", LABEL) from exc
        self.max_bytes = max_decompressed() if max_bytes is None else max_bytes
        self.consumed = 0
        self.produced = 0
        self.truncated = False
        self.compression: str | None = None
        self.failure: BaseException | None = None
        self._queue: queue.Queue[bytes | None] = queue.Queue(maxsize=6)
        self._stop = threading.Event()
        self._ended = False
        self._thread = threading.Thread(target=self._run, name="kviewer-torch-reader", daemon=True)
        self._thread.start()

    def _put(self, item: bytes | None) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            with self._file as f:
                self.compression = comp = compression_of(f.read(8))
                f.seek(0)
                # the one decompression path (source.DecompressStream): ratio and absolute caps
                stream = DecompressStream(self.path, f, comp, self.max_bytes, LABEL)
                for out in stream.chunks(_OUT_BLOCK):
                    self.consumed = stream.consumed
                    self.produced = stream.produced
                    if self._stop.is_set() or not self._put(out):
                        return
                self.truncated = stream.truncated
        except LoadError as exc:
            self.failure = exc
        except Exception:  # noqa: BLE001 - a read error mid-file: keep what was delivered and say the file is cut
            self.truncated = True
        finally:
            self._put(None)

    def get(self) -> bytes | None:
        """The next chunk, or None at the end of the stream (and on every call after it)."""
        if self._ended:
            return None
        item = self._queue.get()
        if item is None:
            self._ended = True
            if self.failure is not None:
                raise self.failure
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


# ---------------------------------------------------------------------------------------------
# loading


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    """Load a Kineto trace; see the module docstring for what goes where."""
    path = Path(path)
    warnings: list[str] = []
    acc = _Columns()
    # The load allocates millions of short-lived, acyclic objects (structs, strings, lists): the
    # cyclic collector would rescan them over and over for nothing.
    reader = _Reader(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        header, salvaged = _read(path, reader, acc, progress, cancel)
        if acc.bad:
            warnings.append(f"skipped {acc.bad:,} trace events whose fields have unexpected types")
        if acc.utf8:
            warnings.append(_UTF8_NOTE)
        if salvaged or reader.truncated:
            how = f"the {reader.compression} stream is cut or damaged" if reader.truncated else "the file ends early"
            warnings.append(
                f"the trace is truncated ({how}, after {reader.produced:,} bytes of JSON); "
                f"loaded the {acc.n_events:,} complete events before the cut"
            )
        progress(0.9, "building tables")
        cancel.check()
        return acc.finish(path, header, warnings, cancel)
    finally:
        reader.close()
        if gc_was_enabled:
            gc.enable()


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
#: the event list is decoded in pieces of at least this many bytes
_PIECE = 4 << 20
_NON_WS = re.compile(rb"[^ \t\r\n]")
#: Kineto's header keys and any single event are far smaller; more is damage (or a bomb of
#: whitespace), so the load stops instead of holding it all in memory
_MAX_HEADER = 256 << 20
_MAX_EVENT = 256 << 20
_NESTED = "JSON nested too deeply to be a trace"
_UTF8_NOTE = "invalid UTF-8 in the file was replaced by U+FFFD"


def _read(path: Path, reader: _Reader, acc: _Columns, progress: Progress, cancel: CancelToken) -> tuple[_Doc, bool]:
    """Stream the file into ``acc``; return the header keys and whether a cut file was salvaged."""

    def report() -> None:
        progress(0.02 + 0.86 * min(reader.consumed / reader.size, 1.0), "reading trace events")
        cancel.check()

    # 1. the header, up to the "[" that opens traceEvents (however long the keys before it)
    pending = bytearray()
    match = None
    while (chunk := reader.get()) is not None:
        seen = len(pending)
        pending += chunk
        if not seen and pending.startswith(_BOM):
            del pending[:3]
        match = _EVENTS_KEY.search(pending, max(0, seen - 64))
        report()
        if match:
            break
        if len(pending) > _MAX_HEADER:
            raise CorruptTrace(path, f"no trace event list in its first {_MAX_HEADER >> 20} MiB", LABEL)
    header: _Doc | None = None
    if match is not None:
        try:
            header = _DOC.decode(bytes(pending[: match.end()]) + b"]}")
        except (msgspec.DecodeError, RecursionError):  # the key was inside a string, or an odd header
            header = None  # no streaming: the whole document is decoded at the end
    if header is None:
        while (chunk := reader.get()) is not None:
            pending += chunk
            report()
        data = pending
        del pending
        if not data.strip():
            if reader.truncated:
                raise TruncatedTrace(path, f"the {reader.compression} stream is damaged before any data", LABEL)
            raise CorruptTrace(path, "the file is empty", LABEL)
        doc, salvaged = _decode(path, data, reader.truncated, cancel, acc)
        del data
        acc.add(doc.traceEvents or [])
        doc.traceEvents = None
        return doc, salvaged

    # 2. the events, in pieces cut at event boundaries while the reader thread decompresses.
    # Each piece is copied once, into a bytearray that starts with "[" and whose "," after the
    # last complete event becomes "]", and is decoded in place.
    assert match is not None  # a header was decoded, so the key was found
    rest = bytearray(pending[match.end() :])
    del pending
    retry_at = _PIECE  # after a piece that could not be cut, wait until the rest has doubled
    while (chunk := reader.get()) is not None:
        report()
        rest += chunk
        del chunk
        if len(rest) < retry_at:
            continue
        buf = bytearray(b"[")
        buf += rest
        split = _split(path, buf, acc)
        if split is None:
            if len(rest) > _MAX_EVENT:
                raise CorruptTrace(path, f"no end of a trace event in {len(rest) >> 20} MiB", LABEL)
            retry_at = 2 * len(rest)
            continue
        events, next_event = split
        acc.add(events)
        del events
        rest = buf[next_event:]
        retry_at = _PIECE
        del buf

    # 3. the tail: the last events and any keys after the list
    tail = b"".join([b'{"traceEvents":[', rest])
    del rest
    try:
        doc, salvaged = _decode(path, tail, reader.truncated, cancel, acc)
    except TruncatedTrace:
        if not acc.n_events:
            raise
        doc, salvaged = _Doc(traceEvents=[]), True  # cut inside the first event of the tail
    del tail
    acc.add(doc.traceEvents or [])
    for key in _HEADER_FIELDS:
        if getattr(header, key) is None:
            setattr(header, key, getattr(doc, key))
    return header, salvaged


def _split(path: Path, buf: bytearray, acc: _Columns) -> tuple[list[_Event], int] | None:
    """Decode the complete events in ``buf`` ("[" + the inside of the event list).

    Cut after the last ``}`` followed by ``,`` and ``{``: that comma becomes the closing ``]``.
    If the ``}`` was inside a string or a nested object the piece is not valid JSON, so put the
    comma back and try the one before (a few times). Returns the events and the offset of the
    first event not decoded.
    """
    n = len(buf)
    p = n
    tries = 0
    view = memoryview(buf)
    while tries < 8:
        p = buf.rfind(b"}", 1, p)
        if p < 0:
            return None
        # skip whitespace with the regex engine: a byte-by-byte loop over a file padded with
        # megabytes of blanks would take seconds per piece
        m = _NON_WS.search(buf, p + 1)
        q = m.start() if m else n
        if q >= n or buf[q] != 0x2C:  # ","
            continue
        m = _NON_WS.search(buf, q + 1)
        r = m.start() if m else n
        if r >= n or buf[r] != 0x7B:  # "{"
            continue
        tries += 1
        buf[q] = 0x5D  # "]"
        try:
            events = _decode_events(view[: q + 1], acc)
        except RecursionError as exc:
            raise CorruptTrace(path, _NESTED, LABEL) from exc
        except msgspec.DecodeError:
            buf[q] = 0x2C
            continue
        return events, r
    return None


def _decode_events(piece: bytes | memoryview, acc: _Columns) -> list[_Event]:
    """A JSON array of events: typed, else event by event; invalid UTF-8 is replaced."""
    try:
        return _EVENTS.decode(piece)
    except msgspec.ValidationError:
        return _lenient_events(_EVENTS_RAW.decode(piece), acc)
    except msgspec.DecodeError as exc:
        if "UTF-8" not in str(exc):
            raise
    acc.utf8 = True
    return _decode_events(_valid_utf8(piece), acc)


def _valid_utf8(data: bytes | bytearray | memoryview) -> bytes:
    return bytes(data).decode("utf-8", "replace").encode("utf-8")


def _lenient_events(items: list[Raw], acc: _Columns) -> list[_Event]:
    """Decode events one by one, coercing odd field types and counting the hopeless ones."""
    events: list[_Event] = []
    for item in items:
        try:
            events.append(_EVENT.decode(item))
        except msgspec.ValidationError:
            ev = _coerce_event(item)
            if ev is None:
                acc.bad += 1
            else:
                events.append(ev)
    return events


def _decode(path: Path, data: bytes | bytearray, cut: bool, cancel: CancelToken, acc: _Columns) -> tuple[_Doc, bool]:
    """Decode a whole document; salvage the complete events of a cut one.

    Returns the document and whether it had to be salvaged.
    """
    try:
        doc, salvaged = _decode_doc(path, data, acc), False
    except msgspec.DecodeError as exc:
        if "UTF-8" in str(exc):
            acc.utf8 = True
            return _decode(path, _valid_utf8(data), cut, cancel, acc)
        doc, salvaged = _salvage(path, data, exc, cut, cancel, acc), True
    if doc.traceEvents is None:
        raise CorruptTrace(path, "a JSON object without a 'traceEvents' list: not a PyTorch profiler trace", LABEL)
    return doc, salvaged


def _decode_doc(path: Path, data: bytes | bytearray, acc: _Columns) -> _Doc:
    """Typed decode; on a type mismatch anywhere, decode event by event and drop the bad ones.

    Raises ``msgspec.DecodeError`` (not a ValidationError) when the JSON itself is malformed.
    """
    try:
        return _DOC.decode(data)
    except msgspec.ValidationError:
        pass
    except RecursionError as exc:
        raise CorruptTrace(path, _NESTED, LABEL) from exc
    try:
        raw = _DOC_RAW.decode(data)
    except msgspec.ValidationError as exc:
        raise CorruptTrace(path, f"JSON that is not a PyTorch profiler trace ({exc})", LABEL) from exc
    except RecursionError as exc:
        raise CorruptTrace(path, _NESTED, LABEL) from exc
    header = {f: getattr(raw, f) for f in _HEADER_FIELDS}
    if raw.traceEvents is None:
        return _Doc(**header)
    events = _lenient_events(raw.traceEvents, acc)
    if raw.traceEvents and not events:
        raise CorruptTrace(path, "none of its trace events is an event object: not a PyTorch profiler trace", LABEL)
    return _Doc(traceEvents=events, **header)


def _coerce_event(item: Raw) -> _Event | None:
    """Best effort for an event whose fields have unexpected types (e.g. a float pid)."""
    try:
        obj = msgspec.json.decode(item)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None

    def num(v: Any) -> int | float | None:
        if isinstance(v, bool):
            return None
        if isinstance(v, (int, float)):
            return v
        if isinstance(v, str):
            try:
                return float(v) if any(c in v for c in ".eE") else int(v)
            except ValueError:
                return None
        return None

    def ident(v: Any) -> int | str:
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v if isinstance(v, (int, str)) and not isinstance(v, bool) else -1

    ts, dur = num(obj.get("ts", 0)), num(obj.get("dur", 0))
    if ts is None or dur is None:
        return None
    args = obj.get("args")
    return _Event(
        ph=str(obj.get("ph", "")),
        cat=str(obj.get("cat", "")),
        name=str(obj.get("name", "")),
        pid=ident(obj.get("pid", -1)),
        tid=ident(obj.get("tid", -1)),
        ts=float(ts),
        dur=float(dur),
        args=_coerce_args(args) if isinstance(args, dict) else _NO_ARGS,
    )


def _coerce_args(d: dict[str, Any]) -> _Args:
    values: dict[str, Any] = {}
    for f in msgspec.structs.fields(_Args):
        if f.encode_name not in d:
            continue
        v = d[f.encode_name]
        if f.type is Raw:
            values[f.name] = Raw(msgspec.json.encode(v))
            continue
        try:
            values[f.name] = msgspec.convert(v, f.type, strict=False)
        except msgspec.ValidationError:
            continue
    return _Args(**values)


#: a cut file is retried at most this many candidate cut points (each costs one syntax pass)
_MAX_SALVAGE_TRIES = 64


def _salvage(
    path: Path, data: bytes | bytearray, exc: msgspec.DecodeError, cut: bool, cancel: CancelToken, acc: _Columns
) -> _Doc:
    """Load every complete event of a file that ends early (the writer died, a cut download).

    Candidate cut points are the ``}`` that close an event (followed by ``,``, by ``]`` or by the
    end of the data); the JSON is closed after each candidate, from the end backwards, until it
    parses. A ``}`` inside a string or a nested object can never give valid JSON once closed, so a
    successful parse means a real event boundary.
    """
    recognised = LABEL
    key = data.find(b'"traceEvents"')
    if key < 0:
        problem = "the file ends before its trace events" if "truncated" in str(exc) or cut else f"malformed JSON ({exc})"
        raise (TruncatedTrace if "truncated" in str(exc) or cut else CorruptTrace)(path, problem, recognised) from exc
    start = data.find(b"[", key)
    if start < 0:
        raise TruncatedTrace(path, "the file ends before its trace events", recognised) from exc
    tries = 0
    p = len(data)
    while tries < _MAX_SALVAGE_TRIES:
        p = data.rfind(b"}", start, p)
        if p < 0:
            break
        q = p + 1
        while q < len(data) and data[q] in b" \t\r\n":
            q += 1
        follow = data[q : q + 1]
        if follow == b"]":
            candidate = data[: q + 1] + b"}"  # the event list closed; the tail after it is lost
        elif follow in (b",", b""):
            candidate = data[: p + 1] + b"]}"
        else:
            continue
        tries += 1
        cancel.check()
        try:
            _PROBE.decode(candidate)
        except msgspec.ValidationError:
            pass  # valid JSON of an unexpected shape: _decode_doc reports it
        except msgspec.DecodeError:
            continue
        except RecursionError as deep:
            raise CorruptTrace(path, _NESTED, recognised) from deep
        return _decode_doc(path, candidate, acc)
    if "truncated" in str(exc) or cut:
        raise TruncatedTrace(path, "the file is cut before its first complete trace event", recognised) from exc
    raise CorruptTrace(path, f"malformed JSON ({exc})", recognised) from exc


# ---------------------------------------------------------------------------------------------
# building tables

# what each category becomes; anything else with ph "X" is a cpu slice of category "other"
_K_SKIP, _K_KERNEL, _K_MEMCPY, _K_MEMSET, _K_CPU = 0, 1, 2, 3, 4
_GPU_CATS = {"kernel": _K_KERNEL, "gpu_memcpy": _K_MEMCPY, "memcpy": _K_MEMCPY, "gpu_memset": _K_MEMSET, "memset": _K_MEMSET}
#: cpu_slices categories, in the order of their integer codes here
_CPU_CATEGORIES = ["runtime", "driver", "op", "python", "annotation", "gpu_annotation", "sync", "other"]
_C = {name: i for i, name in enumerate(_CPU_CATEGORIES)}
_CPU_CATS = {
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "driver",
    "driver": "driver",
    "cpu_op": "op",
    "operator": "op",
    "python_function": "python",
    "user_annotation": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_sync": "sync",
}
#: slices that live on a GPU (device, stream) track rather than a host thread
_GPU_TRACK = [_C["gpu_annotation"], _C["sync"]]
_LAUNCH = [_C["runtime"], _C["driver"]]
#: cpu slices whose args may carry shapes, dtypes and FLOPs
_OPS = [_C["op"], _C["annotation"], _C["other"]]
#: the 2021 (PyTorch 1.8/1.9) schema wrote these capitalised
_SCHEMA_2021_CATS = {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"}
_DIRECTION = re.compile(r"\b(HtoD|DtoH|DtoD|HtoH|PtoP|HtoA|AtoH|AtoA|AtoD|DtoA)\b")
_DIGITS = re.compile(r"-?\d+")
#: at or above this, a µs timestamp is absolute epoch time (1e14 µs is 1973)
_ABSOLUTE_US = 1e14
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1

_CAT, _NAME, _PID, _TID, _TS, _DUR = (attrgetter(a) for a in ("cat", "name", "pid", "tid", "ts", "dur"))
_DIMS, _TYPES, _GRID, _BLOCK, _SIZE, _STREAM, _CONCRETE = (
    attrgetter(a) for a in ("input_dims", "input_types", "grid", "block", "size", "stream", "concrete")
)


def _classify(cat: str) -> tuple[int, int]:
    """(kind, cpu category code) of an event category."""
    low = cat.lower()
    if low in _GPU_CATS:
        return _GPU_CATS[low], -1
    if low == "trace":  # the profiler's own span, on the "Spans" pseudo-process
        return _K_SKIP, -1
    if low in _CPU_CATS:
        return _K_CPU, _C[_CPU_CATS[low]]
    if low.endswith("_runtime"):
        return _K_CPU, _C["runtime"]
    if low.endswith("_driver"):
        return _K_CPU, _C["driver"]
    return _K_CPU, _C["other"]


def _field(objs: list[Any], name: str, dtype: Any) -> np.ndarray:
    """One attribute of every struct as an array (typed struct fields: no conversion needed)."""
    return np.fromiter(map(attrgetter(name), objs), dtype=dtype, count=len(objs))


def _codes(ids: dict[Any, int], values: list[Any]) -> np.ndarray:
    """Integer codes of hashable values, growing ``ids`` (value -> code) with the new ones.

    A dict does this about twice as fast as ``pd.factorize`` on freshly decoded strings. Most
    pieces of a trace bring no new value, so look them up first and only on a miss collect the
    new ones."""
    try:
        return np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))
    except KeyError:
        pass
    for v in dict.fromkeys(values):
        if v not in ids:
            ids[v] = len(ids)
    return np.fromiter(map(ids.__getitem__, values), dtype=np.int64, count=len(values))


def _ids(xs: list[_Event], getter: Callable[[_Event], Any]) -> tuple[np.ndarray, np.ndarray]:
    """pids or tids as int64, and a mask of the numeric ones.

    Kineto writes ints, the 2021 schema strings ("25738", "stream 7"), and the profiler's
    pseudo-tracks names ("Spans"). Strings give the number in them, or -1 (mask False).
    """
    try:  # ints and numeric strings, in one pass
        return np.fromiter(map(getter, xs), dtype=np.int64, count=len(xs)), np.ones(len(xs), dtype=bool)
    except (ValueError, TypeError, OverflowError):
        pass
    uniques: dict[Any, int] = {}
    codes = _codes(uniques, list(map(getter, xs)))
    conv = np.empty(len(uniques), dtype=np.int64)
    ok = np.ones(len(uniques), dtype=bool)
    for v, i in uniques.items():
        number: int | None = None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            number = int(v)
        elif isinstance(v, str) and (m := _DIGITS.search(v)):
            number = int(m.group())
        if number is not None and _I64_MIN <= number <= _I64_MAX:
            conv[i] = number
        else:
            conv[i], ok[i] = -1, False
    return conv[codes], ok[codes]


def _texts(raws: list[Raw]) -> list[str]:
    """Raw JSON values as text ('' when absent). One join and one split: JSON text never holds a
    NUL byte, and this is twice as fast as ``bytes()`` on each."""
    if not raws:
        return []
    return b"\x00".join(raws).decode("utf-8", "replace").split("\x00")


def _xyz(lists: list[list[int] | None]) -> np.ndarray:
    """[x, y, z] lists (or None) as an (n, 3) int64 array, -1 where unknown."""
    n = len(lists)
    if not any(lists):
        return np.full((n, 3), -1, dtype=np.int64)
    if all(v is not None and len(v) == 3 for v in lists):
        try:
            return np.array(lists, dtype=np.int64).reshape(n, 3)
        except (ValueError, TypeError, OverflowError):
            pass
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, v in enumerate(lists):
        if v:
            k = min(3, len(v))
            out[i, :k] = v[:k]
    return out


def _int_or(values: list[Any]) -> np.ndarray:
    """ints, numeric strings ("2560", "0x0") and anything else (-1)."""
    if set(map(type, values)) <= {int}:
        try:
            return np.fromiter(values, dtype=np.int64, count=len(values))
        except OverflowError:
            pass
    out = np.full(len(values), -1, dtype=np.int64)
    for i, v in enumerate(values):
        try:
            number = int(v, 0) if isinstance(v, str) else int(v)
        except (ValueError, TypeError, OverflowError):
            continue
        if _I64_MIN <= number <= _I64_MAX:
            out[i] = number
    return out


def _depth(track: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of intervals on their track, vectorised.

    Sort by (track, start, longest first); the depth of a slice is the number of slices before
    it on its track that have not ended by its start. In doubled units a zero-length slice
    occupies [2s, 2s+1), so every interval has end > start and the slices counted as "ended by
    my start" are always among those sorted before me. Partly overlapping slices (which Kineto
    does write, e.g. a runtime call that outlives its op by a few ns) get stack-like depths.
    """
    n = len(track)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    lo = int(start.min())
    s2 = (start - lo) * 2
    e2 = np.where(end > start, (end - lo) * 2, s2 + 1)
    span = int(e2.max()) + 2
    n_tracks = int(track.max()) + 1
    if n_tracks * span < 2**62:
        rs, re_, m = s2, e2, np.int64(span)
    else:  # a long trace with many tracks: rank the times so (track, time) fits one int64
        times, inv = np.unique(np.concatenate([s2, e2]), return_inverse=True)
        rs, re_, m = inv[:n].astype(np.int64), inv[n:].astype(np.int64), np.int64(len(times) + 1)
    order = None
    if np.all(start[1:] >= start[:-1]):
        # already in start order (the loader's case): a stable sort by track gives (track, start)
        # order, which is the full key unless two slices of a track start together
        order = np.argsort(track, kind="stable")
        t_o, s_o = track[order], start[order]
        if np.any((t_o[1:] == t_o[:-1]) & (s_o[1:] == s_o[:-1])):
            order = None
    if order is None:
        order = np.lexsort((-re_, rs, track))
    first = np.searchsorted(track[order], track, side="left")  # each track's first sorted position
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    ekey = np.sort(track * m + re_)
    ended = np.searchsorted(ekey, track * m + rs, side="right") - np.searchsorted(ekey, track * m, side="left")
    return (rank - first - ended).astype(np.int32)


def _track(pid: np.ndarray, tid: np.ndarray, gpu: np.ndarray) -> np.ndarray:
    """One small integer per (pid, tid, on a GPU track?) triple."""
    if not len(pid):
        return np.zeros(0, dtype=np.int64)
    p, _ = pd.factorize(pid)
    t, tu = pd.factorize(tid)
    combined = (p.astype(np.int64) * (len(tu) + 1) + t) * 2 + gpu.astype(np.int64)
    codes, _ = pd.factorize(combined)
    return codes.astype(np.int64)


class _OutOfRange(ValueError):
    """Times an int64 count of nanoseconds cannot hold (a damaged file)."""


def _in_range(ns: np.ndarray, what: str) -> np.ndarray:
    """``ns`` when every value fits an int64 (a cast would silently wrap the others), else raise."""
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(ns) < 2.0**63)  # NaN and inf too
    if bad.any():
        raise _OutOfRange(
            f"{int(bad.sum()):,} event {what} are beyond what kviewer can represent "
            f"(±292 years in nanoseconds), e.g. {float(ns[bad][0]) / 1000:g} µs"
        )
    return ns


class _Times:
    """ts (µs) -> int64 ns relative to the origin, exactly as ``round(us * 1000)``."""

    def __init__(self, ts: np.ndarray, base: int | None, warnings: list[str]) -> None:
        if len(ts) and float(ts.min()) >= _ABSOLUTE_US:
            # absolute epoch µs: subtract an integer origin before scaling, so 1.7e15 µs keeps
            # every digit the file has (integers below 2**53 are exact in float64)
            self.origin_us = math.floor(float(ts.min()))
            self.origin_ns: int | None = self.origin_us * 1000
            self.note = "absolute epoch µs"
        else:
            # Kineto's relative µs can be large (days since baseTimeNanoseconds): move the origin
            # to the first whole µs so the tables' times start near 0 and keep full precision
            # (scaled first, then shifted by whole ns: exactly round(ts * 1000) - shift)
            self.origin_us = 0
            self.shift_ns = 1000 * math.floor(float(ts.min())) if len(ts) and float(ts.min()) > 0 else 0
            self.origin_ns = None if base is None else base + self.shift_ns
            self.note = "µs relative to baseTimeNanoseconds" if base is not None else "µs from an unknown origin"
            if base is None and len(ts):
                warnings.append("relative timestamps without baseTimeNanoseconds: the wall-clock time of the trace is unknown")

    shift_ns = 0

    def start(self, ts: np.ndarray) -> np.ndarray:
        rel = ts - self.origin_us if self.origin_us else ts
        out = np.rint(_in_range(rel * 1000.0, "timestamps")).astype(np.int64)
        if self.shift_ns:
            out -= self.shift_ns
        return out


class _Columns:
    """Columns of the events seen so far, built piece by piece (file order)."""

    #: per row (kept complete event)
    ROW = ("kind", "ccat", "ts", "dur", "pid", "tid", "name", "ext", "corr", "flops", "dims", "types", "conc", "lgrid", "lblock", "lbytes")
    #: per kernel / per GPU op
    KER = ("k_row", "k_dev", "k_stream", "k_grid", "k_block", "k_regs", "k_smem", "k_occ")
    GOP = ("g_row", "g_bytes", "g_dev", "g_stream")

    def __init__(self) -> None:
        self.cat_code: dict[str, int] = {}
        self.names: dict[str, int] = {}
        self.dims: dict[str, int] = {"": 0}
        self.types: dict[str, int] = {"": 0}
        self.conc: dict[str, int] = {"": 0}
        self.schema_2021 = False
        self.n_rows = 0
        self.n_events = 0
        self.bad = 0
        self.utf8 = False
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in self.ROW + self.KER + self.GOP}
        self.g_kind: list[Any] = []

    def add(self, events: list[_Event]) -> None:
        """Turn a piece of events into columns (the events can be dropped afterwards)."""
        self.n_events += len(events)
        xs = [e for e in events if e.ph == "X"]
        if not xs:
            return
        cats = list(map(_CAT, xs))
        cc = self.cat_code
        try:
            code = np.fromiter(map(cc.__getitem__, cats), dtype=np.int16, count=len(cats))
        except KeyError:  # a category not seen before
            for c in dict.fromkeys(cats):
                if c not in cc:
                    c_kind, c_cpu = _classify(c)
                    cc[c] = c_kind * 16 + c_cpu + 1
                    self.schema_2021 |= c in _SCHEMA_2021_CATS
            code = np.fromiter(map(cc.__getitem__, cats), dtype=np.int16, count=len(cats))
        kind, ccat = code >> 4, (code & 15) - 1
        pid, pid_ok = _ids(xs, _PID)
        keep = (kind != _K_SKIP) & pid_ok  # drop the profiler's span and named pseudo-processes
        if not keep.all():
            idx = np.flatnonzero(keep)
            xs = [xs[i] for i in idx.tolist()]
            kind, ccat, pid = kind[idx], ccat[idx], pid[idx]
        n = len(xs)
        base = self.n_rows
        self.n_rows += n
        ts = np.fromiter(map(_TS, xs), dtype=np.float64, count=n)
        dur = np.fromiter(map(_DUR, xs), dtype=np.float64, count=n)
        tid, _ = _ids(xs, _TID)
        names = _codes(self.names, list(map(_NAME, xs)))

        # args: python frames carry none kviewer uses, so their structs are not even visited
        is_cpu = kind == _K_CPU
        need = np.flatnonzero(~is_cpu | (ccat != _C["python"]))
        args = [xs[i].args or _NO_ARGS for i in need.tolist()]
        del xs
        ext = np.full(n, -1, dtype=np.int64)
        corr = np.full(n, -1, dtype=np.int64)
        e1 = _field(args, "external_id", np.int64)
        if self.schema_2021:  # "external id" in the 2021 schema
            e1 = np.where(e1 >= 0, e1, _field(args, "external_id_2021", np.int64))
        ext[need] = e1
        corr[need] = _field(args, "correlation", np.int64)
        n_kind, n_ccat, n_cpu = kind[need], ccat[need], is_cpu[need]

        def subset(mask: np.ndarray) -> tuple[np.ndarray, list[_Args]]:
            sel = np.flatnonzero(mask)
            return need[sel], [args[j] for j in sel.tolist()]

        flops = np.full(n, np.nan)
        dims = np.zeros(n, dtype=np.int64)
        types = np.zeros(n, dtype=np.int64)
        conc = np.zeros(n, dtype=np.int64)
        rows, sub = subset(n_cpu & np.isin(n_ccat, _OPS))
        flops[rows] = _field(sub, "flops", np.float64)
        dims[rows] = _codes(self.dims, _texts(list(map(_DIMS, sub))))
        types[rows] = _codes(self.types, _texts(list(map(_TYPES, sub))))
        conc[rows] = _codes(self.conc, _texts(list(map(_CONCRETE, sub))))

        lgrid = np.full((n, 3), -1, dtype=np.int64)
        lblock = np.full((n, 3), -1, dtype=np.int64)
        lbytes = np.full(n, -1, dtype=np.int64)
        rows, sub = subset(n_cpu & np.isin(n_ccat, _LAUNCH))
        lgrid[rows] = _xyz(list(map(_GRID, sub)))
        lblock[rows] = _xyz(list(map(_BLOCK, sub)))
        b = _field(sub, "bytes", np.int64)
        lbytes[rows] = np.where(b >= 0, b, _int_or(list(map(_SIZE, sub))))

        row: tuple[np.ndarray, ...] = (kind, ccat, ts, dur, pid, tid, names, ext, corr, flops, dims, types, conc, lgrid, lblock, lbytes)
        for key, value in zip(self.ROW, row):
            self.parts[key].append(value)

        rows, sub = subset(n_kind == _K_KERNEL)
        for key, value in zip(
            self.KER,
            (
                rows + base,
                _field(sub, "device", np.int64),
                _int_or(list(map(_STREAM, sub))),
                _xyz(list(map(_GRID, sub))),
                _xyz(list(map(_BLOCK, sub))),
                _field(sub, "registers", np.int64),
                _field(sub, "shared_mem", np.int64),
                _field(sub, "occupancy", np.float64),
            ),
        ):
            self.parts[key].append(value)

        rows, sub = subset((n_kind == _K_MEMCPY) | (n_kind == _K_MEMSET))
        for key, value in zip(
            self.GOP,
            (rows + base, _field(sub, "bytes", np.int64), _field(sub, "device", np.int64), _int_or(list(map(_STREAM, sub)))),
        ):
            self.parts[key].append(value)
        self.g_kind += [a.kind for a in sub]

    def _col(self, key: str, dtype: Any = np.int64, width: int = 0) -> np.ndarray:
        parts = self.parts[key]
        if parts:
            return np.concatenate(parts)
        return np.zeros((0, width) if width else 0, dtype=dtype)

    def finish(self, path: Path, header: _Doc, warnings: list[str], cancel: CancelToken) -> Trace:
        """Sort, link and wrap the columns into a Trace."""
        col = self._col
        kind, ccat = col("kind", np.int16), col("ccat", np.int16)
        pid, tid, name = col("pid"), col("tid"), col("name")
        ext, corr = col("ext"), col("corr")
        ts = col("ts", np.float64)
        base = header.baseTimeNanoseconds
        base = base if isinstance(base, int) and not isinstance(base, bool) else None
        times = _Times(ts, base, warnings)
        try:
            start = times.start(ts)
            dur = np.rint(_in_range(col("dur", np.float64) * 1000.0, "durations")).astype(np.int64)
        except _OutOfRange as exc:
            raise CorruptTrace(path, str(exc), LABEL) from exc
        del ts
        name_index = pd.Index(list(self.names), dtype=object)
        rank = _rank(header.distributedInfo)

        def names_of(rows: np.ndarray) -> pd.Categorical:
            return pd.Categorical.from_codes(name[rows], categories=name_index).remove_unused_categories()

        def by_start(rows: np.ndarray) -> np.ndarray:
            return np.argsort(start[rows], kind="stable")

        # ---- cpu slices, in start order (stable: ties keep file order, as make_table would)
        ci = np.flatnonzero(kind == _K_CPU)
        ci = ci[by_start(ci)]
        n_cpu = len(ci)
        cpu_id = np.full(self.n_rows, -1, dtype=np.int64)
        cpu_id[ci] = np.arange(n_cpu, dtype=np.int64)
        c_cat = ccat[ci].astype(np.int8)
        c_start, c_dur = start[ci], dur[ci]
        track = _track(pid[ci], tid[ci], np.isin(c_cat, _GPU_TRACK))
        depth = _depth(track, c_start, c_start + np.maximum(c_dur, 0))
        cpu_slices = make_table(
            "cpu_slices",
            n_cpu,
            {
                "name": names_of(ci),
                "category": pd.Categorical.from_codes(c_cat, categories=_CPU_CATEGORIES),
                "start": c_start,
                "dur": c_dur,
                "rank": np.full(n_cpu, rank),
                "pid": pid[ci],
                "tid": tid[ci],
                "depth": depth,
                "correlation": corr[ci],
                "external_id": ext[ci],
                "input_dims": _text_categorical(self.dims, col("dims")[ci]),
                "input_types": _text_categorical(self.types, col("types")[ci]),
                "concrete_inputs": _text_categorical(self.conc, col("conc")[ci]),
                "flops": col("flops", np.float64)[ci],
            },
        )
        n_host = int(np.isin(c_cat, [_C["op"], _C["python"], _C["annotation"]]).sum())
        cancel.check()

        # ---- launch calls by correlation id
        lr = np.flatnonzero((kind == _K_CPU) & np.isin(ccat, _LAUNCH) & (corr >= 0))
        l_order = np.argsort(corr[lr], kind="stable")
        l_rows, l_corr = lr[l_order], corr[lr][l_order]

        def find_launch(c: np.ndarray) -> np.ndarray:
            """Row of the runtime/driver call with each correlation id, or -1."""
            if not len(l_corr):
                return np.full(len(c), -1, dtype=np.int64)
            pos = np.minimum(np.searchsorted(l_corr, c), len(l_corr) - 1)
            return np.where((c >= 0) & (l_corr[pos] == c), l_rows[pos], -1)

        # ---- kernels
        k_row = col("k_row")
        ko = by_start(k_row)
        k_row = k_row[ko]
        k_corr = corr[k_row]
        k_launch = find_launch(k_corr)
        has = k_launch >= 0
        lrow = np.maximum(k_launch, 0)
        grid, block = col("k_grid", width=3)[ko], col("k_block", width=3)[ko]
        # roctracer kernels may lack grid/block: the hipLaunchKernel call carries them
        fill = has & (grid[:, 0] < 0)
        grid[fill] = col("lgrid", width=3)[k_launch[fill]]
        fill = has & (block[:, 0] < 0)
        block[fill] = col("lblock", width=3)[k_launch[fill]]
        k_dev, k_stream = col("k_dev")[ko], col("k_stream")[ko]
        k_names = names_of(k_row)
        # short names are computed once per distinct name; several names can share one
        short = np.array([short_name(str(s)) for s in k_names.categories] + [""], dtype=object)
        n_k = len(k_row)
        kernels = make_table(
            "kernels",
            n_k,
            {
                "name": k_names,
                "short_name": pd.Categorical(short[k_names.codes]),
                "start": start[k_row],
                "dur": dur[k_row],
                "device": np.where(k_dev >= 0, k_dev, pid[k_row]),
                "stream": np.where(k_stream >= 0, k_stream, tid[k_row]),
                "rank": np.full(n_k, rank),
                "pid": np.where(has, pid[lrow], -1),
                "tid": np.where(has, tid[lrow], -1),
                "correlation": k_corr,
                "external_id": ext[k_row],
                "grid_x": grid[:, 0],
                "grid_y": grid[:, 1],
                "grid_z": grid[:, 2],
                "block_x": block[:, 0],
                "block_y": block[:, 1],
                "block_z": block[:, 2],
                "registers": col("k_regs")[ko],
                "shared_mem": col("k_smem")[ko],
                # Kineto computes this from the launch configuration with the CUDA occupancy
                # calculator; it is not a measured counter, so it is the theoretical figure.
                # It writes 0 where the calculator could not place a block (large dynamic
                # shared memory); a kernel that ran had a block resident, so 0 is unknown
                "theoretical_occupancy_pct": _positive_or_nan(col("k_occ", np.float64)[ko]),
            },
        )

        # ---- gpu ops
        g_row = col("g_row")
        go = by_start(g_row)
        g_row = g_row[go]
        g_corr = corr[g_row]
        g_launch = find_launch(g_corr)
        g_has = g_launch >= 0
        g_bytes = col("g_bytes")[go]
        # roctracer memcpys may lack "bytes"; the hipMemcpy* call has "bytes" or "size"
        fill = g_has & (g_bytes < 0)
        g_bytes[fill] = col("lbytes")[g_launch[fill]]
        g_names = names_of(g_row)
        is_copy = kind[g_row] == _K_MEMCPY
        g_kind = [self.g_kind[i] for i in go.tolist()]
        g_dev, g_stream = col("g_dev")[go], col("g_stream")[go]
        n_g = len(g_row)
        gpu_ops = make_table(
            "gpu_ops",
            n_g,
            {
                "kind": pd.Categorical(np.where(is_copy, "memcpy", "memset").astype(object), categories=["memcpy", "memset"]),
                "name": g_names,
                "start": start[g_row],
                "dur": dur[g_row],
                "bytes": g_bytes,
                "direction": pd.Categorical(_directions(g_names, is_copy, g_kind)),
                "device": np.where(g_dev >= 0, g_dev, pid[g_row]),
                "stream": np.where(g_stream >= 0, g_stream, tid[g_row]),
                "rank": np.full(n_g, rank),
                "pid": np.where(g_has, pid[np.maximum(g_launch, 0)], -1),
                "correlation": g_corr,
                "external_id": ext[g_row],
            },
        )

        # ---- flows: launch call -> kernel / gpu op. Every table above was given its rows in
        # start order, so make_table kept that order and a row's position is its id.
        kl, gl = np.flatnonzero(has), np.flatnonzero(g_has)
        flows = make_table(
            "flows",
            len(kl) + len(gl),
            {
                "src": np.concatenate([cpu_id[k_launch[kl]], cpu_id[g_launch[gl]]]),
                "dst_table": pd.Categorical(["kernels"] * len(kl) + ["gpu_ops"] * len(gl), categories=["kernels", "gpu_ops"]),
                "dst": np.concatenate([kl, gl]),
                "correlation": np.concatenate([k_corr[kl], g_corr[gl]]),
            },
        )

        amd = _is_amd(header)
        devices = _devices(header, rank, amd, kernels, gpu_ops, warnings)
        if not self.n_rows:
            warnings.append("the trace has no complete events")
        meta = TraceMeta(
            path=str(path),
            source_format=NAME,
            format_label=_label(header, self.schema_2021, amd, n_k + n_g, n_host),
            tool="PyTorch Profiler",
            tool_version=_tool_version(header),
            origin_ns=times.origin_ns,
            ranks=[rank] if rank >= 0 else [],
            warnings=warnings,
            extra=_extra(header, times.note),
        )
        return Trace(meta=meta, kernels=kernels, gpu_ops=gpu_ops, cpu_slices=cpu_slices, flows=flows, devices=devices)


def _text_categorical(ids: dict[str, int], codes: np.ndarray) -> pd.Categorical:
    """Codes into ``ids`` (text -> code) as a categorical, unused texts dropped."""
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(ids), dtype=object)).remove_unused_categories()


def _directions(names: pd.Categorical, is_copy: np.ndarray, kinds: list[Any]) -> np.ndarray:
    """Copy direction from the op name ("Memcpy HtoD (Pinned -> Device)"), else from a ROCm
    ``kind`` arg ("HtoD"); '' for memsets."""
    by_name = []
    for n in names.categories:
        m = _DIRECTION.search(str(n))
        by_name.append(m.group(1) if m else "")
    out = np.array(by_name + [""], dtype=object)[names.codes]
    out[~is_copy] = ""
    for i in np.flatnonzero(is_copy & (out == "")).tolist():
        k = kinds[i]
        if isinstance(k, str) and _DIRECTION.fullmatch(k):
            out[i] = k
    return out


def _rank(info: Any) -> int:
    if isinstance(info, dict):
        r = info.get("rank")
        if isinstance(r, str) and r.isdigit():
            r = int(r)
        if isinstance(r, int) and not isinstance(r, bool) and 0 <= r < 2**31:
            return r
    return -1


def _is_amd(doc: _Doc) -> bool:
    if doc.roctracer_version is not None or doc.hip_runtime_version is not None:
        return True
    return any(_vendor_from_name(str(d.get("name", ""))) == "AMD" for d in _device_dicts(doc))


def _device_dicts(doc: _Doc) -> list[dict[str, Any]]:
    props = doc.deviceProperties
    return [d for d in props if isinstance(d, dict)] if isinstance(props, list) else []


def _vendor_from_name(name: str) -> str:
    low = name.lower()
    if any(w in low for w in ("amd", "radeon", "instinct", "gfx")):
        return "AMD"
    if any(w in low for w in ("nvidia", "tesla", "geforce", "quadro", "titan", "rtx")):
        return "NVIDIA"
    return ""


def _int_field(d: dict[str, Any], key: str, limit: int = 2**31) -> int:
    """A non-negative integer property below ``limit`` (the column's range), else -1."""
    v = d.get(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < limit:
        return int(v)
    return -1


def _devices(
    doc: _Doc, rank: int, amd: bool, kernels: pd.DataFrame, gpu_ops: pd.DataFrame, warnings: list[str]
) -> pd.DataFrame:
    """``deviceProperties``, plus a row for each device a GPU event uses that no entry describes
    (so every ``device`` in kernels/gpu_ops has a row).

    Such a device is common on ROCm (roctracer numbers the agent, e.g. device 2, while
    ``deviceProperties`` lists the visible device 0). When every described device is the same
    model, the undescribed one is taken to be that model too, and a warning says so.
    """
    cuda = doc.cuda_runtime_version is not None or doc.cupti_version is not None
    rows: dict[int, dict[str, Any]] = {}
    for pos, d in enumerate(_device_dicts(doc)):
        dev_id = _int_field(d, "id")
        dev_id = pos if dev_id < 0 else dev_id
        name = str(d.get("name", ""))
        vendor = _vendor_from_name(name) or ("AMD" if amd else "NVIDIA" if cuda else "")
        major, minor = _int_field(d, "computeMajor"), _int_field(d, "computeMinor")
        cc = arch = ""
        if vendor != "AMD" and major >= 0 and minor >= 0:
            # HIP reports a gfx major/minor here (gfx90a and gfx908 are both 9.0), not a CUDA
            # compute capability, so only NVIDIA devices get these columns
            cc, arch = f"{major}.{minor}", f"sm_{major}{minor}"
        rows[dev_id] = {
            "id": dev_id,
            "name": name,
            "vendor": vendor,
            "architecture": arch,
            "compute_capability": cc,
            "sm_count": _int_field(d, "numSms"),
            "memory_bytes": _int_field(d, "totalGlobalMem", 2**63),
        }
    used = set(kernels["device"].tolist()) | set(gpu_ops["device"].tolist())
    undescribed = sorted(u for u in used if u >= 0 and u not in rows)
    models = {(r["name"], r["sm_count"], r["memory_bytes"]) for r in rows.values()}
    template = next(iter(rows.values())) if len(models) == 1 else None
    for dev_id in undescribed:
        if template is not None and template["name"]:
            rows[dev_id] = {**template, "id": dev_id}
        else:
            vendor = "AMD" if amd else ("NVIDIA" if cuda else "")
            rows[dev_id] = {"id": dev_id, "name": "", "vendor": vendor, "architecture": "", "compute_capability": "", "sm_count": -1, "memory_bytes": -1}
    if undescribed and template is not None and template["name"]:
        ids = ", ".join(str(u) for u in undescribed)
        warnings.append(
            f"device {ids} has no deviceProperties entry; assumed to be the same model as every described device ({template['name']})"
        )
    recs = [rows[k] for k in sorted(rows)]
    keys = ("id", "name", "vendor", "architecture", "compute_capability", "sm_count", "memory_bytes")
    cols: dict[str, Any] = {key: [r[key] for r in recs] for key in keys}
    cols["rank"] = [rank] * len(recs)
    return make_table("devices", len(recs), cols)


def _cuda_version(v: Any) -> str:
    """12040 -> '12.4' (CUDA's 1000*major + 10*minor)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


def _hip_version(v: Any) -> str:
    """60443483 -> '6.4.43483' (HIP_VERSION = major*10^7 + minor*10^5 + patch)."""
    if isinstance(v, int) and not isinstance(v, bool) and v >= 10**7:
        return f"{v // 10**7}.{(v // 10**5) % 100}.{v % 10**5}"
    return str(v)


def _tool_version(doc: _Doc) -> str:
    parts = []
    if doc.schemaVersion is not None:
        parts.append(f"schema {doc.schemaVersion}")
    if doc.cuda_runtime_version is not None:
        parts.append(f"CUDA runtime {_cuda_version(doc.cuda_runtime_version)}")
    if doc.cuda_driver_version is not None:
        parts.append(f"driver {_cuda_version(doc.cuda_driver_version)}")
    if doc.cupti_version is not None:
        parts.append(f"CUPTI {doc.cupti_version}")
    if doc.hip_runtime_version is not None:
        parts.append(f"HIP runtime {_hip_version(doc.hip_runtime_version)}")
    if doc.roctracer_version is not None:
        parts.append(f"roctracer {doc.roctracer_version}")
    return ", ".join(parts)


def _label(doc: _Doc, schema_2021: bool, amd: bool, n_gpu: int, n_host: int) -> str:
    kineto = doc.schemaVersion is not None or doc.deviceProperties is not None or doc.distributedInfo is not None
    parts = [LABEL if kineto or schema_2021 else "Chrome trace JSON (read as PyTorch profiler events)"]
    if schema_2021:
        parts.append("2021 schema")
    if amd:
        parts.append("ROCm")
    if n_gpu == 0:
        parts.append("CPU only")
    elif n_host == 0:
        parts.append("GPU only")
    return ", ".join(parts)


def _extra(doc: _Doc, time_note: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for key in ("trace_id", "traceName"):
        v = getattr(doc, key)
        if isinstance(v, (str, int)) and v != "":
            extra["trace_name" if key == "traceName" else key] = v
    if doc.cuda_runtime_version is not None:
        extra["cuda_runtime_version"] = _cuda_version(doc.cuda_runtime_version)
    if doc.cuda_driver_version is not None:
        extra["cuda_driver_version"] = _cuda_version(doc.cuda_driver_version)
    if doc.cupti_version is not None:
        extra["cupti_version"] = doc.cupti_version
    if doc.hip_runtime_version is not None:
        extra["hip_runtime_version"] = _hip_version(doc.hip_runtime_version)
    if doc.hip_driver_version is not None:
        extra["hip_driver_version"] = _hip_version(doc.hip_driver_version)
    if doc.roctracer_version is not None:
        extra["roctracer_version"] = doc.roctracer_version
    options = [k for k in ("record_shapes", "with_stack", "with_flops", "with_modules", "profile_memory") if getattr(doc, k)]
    if options:
        extra["profiler_options"] = ", ".join(options)
    info = doc.distributedInfo
    if isinstance(info, dict):
        for key in ("backend", "world_size"):
            if isinstance(info.get(key), (str, int)):
                extra[f"distributed_{key}"] = info[key]
    extra["timestamps"] = time_note
    return extra


LOADER = LoaderSpec(name=NAME, label=LABEL, priority=50, sniff=sniff, load=load)

__all__ = ["LOADER", "load", "sniff"]


def _positive_or_nan(values: np.ndarray) -> np.ndarray:
    """``values`` with zero and negative entries unknown (NaN)."""
    out = np.asarray(values, dtype=np.float64).copy()
    out[~(out > 0)] = np.nan
    return out
