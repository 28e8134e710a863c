"""Loading: the event list decoded in pieces as it streams in, and the salvage of a cut file."""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw

from kviewer.core import Diagnostic, Trace
from kviewer.errors import CorruptTrace, TruncatedTrace
from kviewer.io.registry import CancelToken
from kviewer.io.source import Progress, json_bad_utf8, json_ends_early, json_lone_surrogate
from kviewer.io.torch.columns import _Columns
from kviewer.io.torch.events import (
    _BOM,
    _DOC,
    _DOC_RAW,
    _EVENT,
    _EVENTS,
    _EVENTS_RAW,
    _HEADER_FIELDS,
    _NO_ARGS,
    _PROBE,
    LABEL,
    _Args,
    _Doc,
    _Event,
)
from kviewer.io.torch.reader import _Reader



def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    """Load a Kineto trace; see the module docstring for what goes where."""
    path = Path(path)
    warnings: list[Diagnostic] = []
    acc = _Columns()
    # The load allocates millions of short-lived, acyclic objects (structs, strings, lists): the
    # cyclic collector would rescan them over and over for nothing.
    reader = _Reader(path)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        header, salvaged = _read(path, reader, acc, progress, cancel)
        if acc.bad:
            warnings.append(Diagnostic.warning("skipped", path, f"skipped {acc.bad:,} trace events whose fields have unexpected types"))
        if acc.utf8:
            warnings.append(Diagnostic.warning("encoding", path, _UTF8_NOTE))
        if acc.surrogates:
            warnings.append(Diagnostic.warning("encoding", path, f"{acc.surrogates:,} escapes of half a UTF-16 surrogate pair "
                                               "(e.g. \\ud83d alone) were read as U+FFFD (\ufffd); every event was loaded"))
        if salvaged or reader.truncated:
            how = f"the {reader.compression} stream is cut or damaged" if reader.truncated else "the file ends early"
            warnings.append(
                Diagnostic.warning(
                    "truncated",
                    path,
                    f"the trace is truncated ({how}, after {reader.produced:,} bytes of JSON); "
                    f"loaded the {acc.n_events:,} complete events before the cut",
                )
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
        head = data[:64].lstrip()
        if head.startswith(b"["):
            # Chrome's JSON Array Format ([{"ph": ...}, ...], written by other tools): the same
            # events without the object around them
            data = bytearray(b'{"traceEvents":') + data + bytearray(b"}")
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
        if json_lone_surrogate(exc):
            fixed, count = repair_lone_surrogates(bytes(piece))
            if count:
                acc.surrogates += count
                return _decode_events(fixed, acc)
        if not json_bad_utf8(exc):
            raise
    acc.utf8 = True
    return _decode_events(_valid_utf8(piece), acc)


#: a JSON backslash pair, a whole surrogate pair, or half of one (in that order of preference)
_SURROGATE_ESCAPE = re.compile(rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def repair_lone_surrogates(data: bytes) -> tuple[bytes, int]:
    """``data`` with every escape of half a UTF-16 surrogate pair (``\\ud83d`` not followed by a
    low half, a low half alone) replaced by ``\\ufffd``; and how many there were. Escaped
    backslashes and whole pairs are kept."""
    count = 0

    def sub(m: re.Match[bytes]) -> bytes:
        nonlocal count
        text = m.group(0)
        if len(text) == 6:  # half a pair
            count += 1
            return b"\\ufffd"
        return text

    fixed = _SURROGATE_ESCAPE.sub(sub, data)
    return fixed, count


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
        if json_lone_surrogate(exc):
            fixed, count = repair_lone_surrogates(bytes(data))
            if count:
                acc.surrogates += count
                return _decode(path, fixed, cut, cancel, acc)
        if json_bad_utf8(exc):
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
        ended = json_ends_early(exc) or cut
        problem = "the file ends before its trace events" if ended else f"malformed JSON ({exc})"
        raise (TruncatedTrace if ended else CorruptTrace)(path, problem, recognised) from exc
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
    if json_ends_early(exc) or cut:
        raise TruncatedTrace(path, "the file is cut before its first complete trace event", recognised) from exc
    raise CorruptTrace(path, f"malformed JSON ({exc})", recognised) from exc
