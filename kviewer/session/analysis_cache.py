"""A trace's analyses (speed of light, fusion candidates), cached beside the parsed trace, so a
reopen is complete at once.

The window paints a trace as soon as its kernels are loaded and analyses it afterwards; with this
cache a reopened trace comes with its SOL colours, roofline and fusion candidates. This module
only encodes and decodes; the storing is the trace cache's (:class:`kviewer.io.cache.TraceCache`,
its ``extras`` table: one database, one bound ``KVIEWER_CACHE_MAX_BYTES``, one least-recently-used
eviction over traces and analyses together). One row per trace and analysis: the SOL table
(:data:`kviewer.core.schema.SOL`) in the trace cache's columnar codec with the ids of the GPUs whose
peaks were used, and the fusion candidates (their kernel ids as JSON).

An entry is keyed by the file's identity (path, size, mtime, inode change time and a digest of
its content: :func:`kviewer.io.cache.source_id`, taken once by the load as ``trace.meta.source_id``,
with the parser's fingerprint) and a fingerprint
of the analysis (its sources, the device table, the SOL schema), so rewriting the file (even with
its old size and times), editing a model or a peak rate all miss. Only the speed of light on the
trace's own GPU of a complete load is stored. ``KVIEWER_NO_CACHE`` bypasses it; like the trace
cache it never makes anything fail: a problem is a miss.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from kviewer import __version__, analysis, core, io as kio
from kviewer.core import jsonout
from kviewer.session import analyses
from kviewer.session.analyses import SolInfo

if TYPE_CHECKING:
    import kviewer.analysis.devices
    import kviewer.analysis.fusion
    import kviewer.analysis.mfu
    import kviewer.analysis.sol
    import kviewer.core.schema
    import kviewer.io.cache
    from kviewer.analysis.fusion import FusionResult
    from kviewer.core import Trace
    from kviewer.io.cache import SourceId

log = logging.getLogger(__name__)

#: bump when the stored layout changes
FORMAT = 2  # 2: stored in the trace cache database (io/cache), one bound and eviction


@functools.lru_cache(maxsize=1)
def analysis_fingerprint() -> str:
    """A hash of what decides a trace's speed of light: the analysis sources, the device table
    and the SOL schema (a development checkout edits them without a version bump)."""
    h = hashlib.sha256(f"kviewer {__version__} sol cache {FORMAT}\n".encode())
    h.update(repr([(c.name, c.dtype) for c in core.schema.SOL.columns]).encode())
    pkg = Path(__file__).resolve().parent.parent
    files = sorted((pkg / "analysis").glob("*.py")) + [pkg / "resources" / "devices.toml"]
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        h.update(f"{f.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:32]


def identity(path: str) -> SourceId | None:
    """What identifies the file now (its stat and a digest of its content:
    :func:`kviewer.io.cache.source_id`); None when the cache is off or the file is gone. A loaded
    trace already carries the identity taken by its load (``trace.meta.source_id``)."""
    if not path or kio.cache.cache_disabled():
        return None
    try:
        return kio.cache.source_id(path)
    except OSError:
        return None


def _unchanged(sid: SourceId) -> bool:
    """The cache is on and the file stats as it did when ``sid`` was taken (no new digest)."""
    return not kio.cache.cache_disabled() and sid.unchanged()


def _key(sid: SourceId, table: str) -> str:
    return hashlib.sha256(f"{sid.key()} {analysis_fingerprint()} {table}".encode()).hexdigest()


def _read(sid: SourceId, table: str) -> tuple[str, bytes] | None:
    """(info, data) of ``sid``'s ``table`` result ("sol" or "fusion"), marked as used now; None on a miss."""
    return kio.cache.default_cache().get_extra(_key(sid, table))


def _write(sid: SourceId, table: str, info: str, data: bytes) -> bool:
    return kio.cache.default_cache().put_extra(_key(sid, table), table, info, data)


def get(sid: SourceId | None, trace: Trace) -> SolInfo | None:
    """The cached speed of light of ``trace`` (loaded from the file ``sid`` names), None on a miss."""
    if sid is None or not len(trace.kernels):
        return None
    try:
        row = _read(sid, "sol")
        if row is None:
            return None
        return _decode(row[0], row[1], trace)
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss, never a failure
        log.warning("speed-of-light cache not read: %s", exc)
        return None


def put(sid: SourceId | None, trace: Trace, info: SolInfo) -> bool:
    """Store the speed of light of a complete load, unless the file changed since ``sid``."""
    result = info.result
    if sid is None or result is None or info.device is not None or not kio.cache.load_was_complete(trace):
        return False
    try:
        if not _unchanged(sid):
            return False  # the file changed during the load: the entry could describe other bytes
        specs, data = _encode(info)
        return _write(sid, "sol", specs, data)
    except Exception as exc:  # noqa: BLE001
        log.warning("speed-of-light cache not written: %s", exc)
        return False


def _encode(info: SolInfo) -> tuple[str, bytes]:
    assert info.result is not None
    specs = jsonout.to_text({str(dev): spec.id for dev, spec in info.result.specs.items()})
    blobs = kio.cache.encode_frame("sol", info.result.table)
    return specs, msgspec.msgpack.encode(blobs)


def _decode(specs_text: str, data: bytes, trace: Trace | None, text_categories: bool = False) -> SolInfo | None:
    table = kio.cache.decode_frame("sol", msgspec.msgpack.decode(data, type=list[kio.cache.ColumnBlob]), text_categories=text_categories)
    if list(table.columns) != core.schema.SOL.names or (trace is not None and len(table) != len(trace.kernels)):
        return None
    known = analysis.devices.load_devices()
    ids: dict[str, Any] = json.loads(specs_text)
    if any(v not in known for v in ids.values()):
        return None
    return SolInfo(analysis.sol.SolResult(table, {int(dev): known[v] for dev, v in ids.items()}))


def sol_of_file(sid: SourceId | None, for_output: bool = False) -> tuple[SolInfo, list[Any]] | None:
    """The stored speed of light of the file ``sid`` names on its own GPU, with the file's load
    warnings, read without loading the file (``kviewer sol`` on a file seen before); None on a
    miss, also when its warnings are not known (neither its cached trace nor
    :func:`put_load_warnings` kept them): the caller then loads the file, which says them.
    ``for_output``: its repeated text columns as Categoricals (the same values, for a writer)."""
    if sid is None or kio.cache.cache_disabled():
        return None
    try:
        row = _read(sid, "sol")
        if row is None:
            return None
        warnings = cached_warnings(sid)
        if warnings is None:
            kept = get_blob(sid, "load_warnings")
            if kept is None:
                return None
            warnings = msgspec.json.decode(kept[1], type=list[core.Diagnostic])
        info = _decode(row[0], row[1], None, text_categories=for_output)
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss, never a failure
        log.warning("speed-of-light cache not read: %s", exc)
        return None
    return None if info is None else (info, warnings)


def put_load_warnings(sid: SourceId | None, trace: Trace) -> bool:
    """Keep the load warnings of a file whose trace is not in the trace cache (a part of an
    export read in place), so :func:`sol_of_file` can say them without loading the file."""
    return put_blob(sid, trace, "load_warnings", "", msgspec.json.encode(list(trace.meta.warnings)))


def sol_for_open(trace: Trace, source: SourceId | None = None) -> SolInfo | None:
    """Worker side of opening a trace in the window: its speed of light from this cache
    (``source``: the file's identity taken before the load), else computed and stored here. None
    for a trace without kernels. The trace is not changed
    (:func:`kviewer.session.analyses.note_uncoloured` does that on the GUI thread)."""
    if not len(trace.kernels):
        return None
    cached = get(source, trace)
    if cached is not None:
        return cached
    info = analyses.compute_sol(trace)
    put(source, trace, info)
    return info


def get_fusion(sid: SourceId | None, trace: Trace) -> FusionResult | None:
    """The cached fusion candidates of ``trace`` on its own GPU, None on a miss."""
    if sid is None or not len(trace.kernels):
        return None
    try:
        row = _read(sid, "fusion")
        if row is None:
            return None
        return _decode_fusion(float(row[0]), row[1])
    except Exception as exc:  # noqa: BLE001
        log.warning("fusion cache not read: %s", exc)
        return None


def put_fusion(sid: SourceId | None, trace: Trace, result: FusionResult) -> bool:
    """Store the fusion candidates of a complete load on its own GPU, unless the file changed."""
    if sid is None or not kio.cache.load_was_complete(trace):
        return False
    try:
        if not _unchanged(sid):
            return False
        data = _encode_fusion(result)
        return _write(sid, "fusion", repr(float(result.kernel_ns)), data)
    except Exception as exc:  # noqa: BLE001
        log.warning("fusion cache not written: %s", exc)
        return False


def _encode_fusion(result: FusionResult) -> bytes:
    df = result.candidates
    # kernel ids: one tuple per instance, as JSON text (the codec stores flat columns)
    flat = df.assign(kernel_ids=[jsonout.to_text([list(map(int, inst)) for inst in ids]) for ids in df["kernel_ids"]])
    return msgspec.msgpack.encode(kio.cache.encode_frame("fusion", flat))


def _decode_fusion(kernel_ns: float, data: bytes) -> analysis.fusion.FusionResult | None:
    df = kio.cache.decode_frame("fusion", msgspec.msgpack.decode(data, type=list[kio.cache.ColumnBlob]))
    if list(df.columns) != analysis.fusion.FUSION_COLUMNS:
        return None
    import pandas as pd

    ids = [[tuple(inst) for inst in json.loads(text)] for text in df["kernel_ids"]]
    df["kernel_ids"] = pd.Series(ids, index=df.index, dtype=object)
    return analysis.fusion.FusionResult(df, kernel_ns)


def fusion_for_open(trace: Trace, info: SolInfo, source: SourceId | None = None) -> FusionResult:
    """Worker side of the Fusion dock: the candidates from this cache, else computed from the
    trace's speed of light and stored here. ``source`` is None for a trace this cache must not
    describe (counters attached, another GPU chosen)."""
    if info.device is not None:
        source = None
    cached = get_fusion(source, trace)
    if cached is not None:
        return cached
    result = analyses.fusion_for(trace, info)
    put_fusion(source, trace, result)
    return result


def mfu_for(trace: Trace, sol_of: Any, source: SourceId | None = None) -> Any:
    """The MFU of ``trace``'s steps on its own GPU (:func:`kviewer.analysis.mfu.mfu_or_unknown`),
    from this cache, else computed (``sol_of()`` gives the speed of light it needs, or None) and
    stored. ``source`` None: neither read nor stored. The MFU is the same whatever a what-if
    projects (a projection changes time, not work), so ``kviewer whatif`` reads it here."""
    cached = cached_mfu(source)
    if cached is not None:
        return cached
    result = analysis.mfu.mfu_or_unknown(trace, None, sol_of())
    if source is not None and not result.totals.get("error"):
        try:
            data = msgspec.msgpack.encode((kio.cache.encode_frame("mfu", result.steps), kio.cache.encode_frame("mfu_job", result.job)))
            put_blob(source, trace, "mfu", json.dumps(result.totals, default=_plain), data)
        except Exception as exc:  # noqa: BLE001
            log.warning("MFU cache not written: %s", exc)
    return result


def cached_mfu(source: SourceId | None) -> Any:
    """The stored MFU (an :class:`~kviewer.analysis.mfu.MfuResult`) of the file ``source``
    names on its own GPU, None on a miss: read without loading the trace."""
    row = get_blob(source, "mfu")
    if row is None:
        return None
    try:
        steps_b, job_b = msgspec.msgpack.decode(row[1], type=tuple[list[kio.cache.ColumnBlob], list[kio.cache.ColumnBlob]])
        return analysis.mfu.MfuResult(kio.cache.decode_frame("mfu", steps_b), kio.cache.decode_frame("mfu_job", job_b), json.loads(row[0]))
    except Exception as exc:  # noqa: BLE001
        log.warning("MFU cache not read: %s", exc)
        return None


def _plain(v: Any) -> Any:
    """numpy scalars as Python numbers (the MFU totals as JSON)."""
    return v.item() if hasattr(v, "item") else str(v)


def cached_warnings(sid: SourceId | None) -> list[Any] | None:
    """The load warnings of the file ``sid`` names, from its cached trace's metadata; None when
    the trace is not cached (or the cache is off). For commands that answer from cached analyses
    without loading the file, so its warnings are said all the same."""
    if sid is None or kio.cache.cache_disabled():
        return None
    try:
        meta = kio.cache.default_cache().get_meta(sid)
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss
        log.warning("trace cache not read: %s", exc)
        return None
    return None if meta is None else list(meta.warnings)


def get_blob(sid: SourceId | None, table: str) -> tuple[str, bytes] | None:
    """(info, data) another analysis stored for the file ``sid`` names under ``table`` (its own
    encoding), None on a miss or when the cache is off; a cache problem is a miss."""
    if sid is None or kio.cache.cache_disabled():
        return None
    try:
        return _read(sid, table)
    except Exception as exc:  # noqa: BLE001
        log.warning("%s cache not read: %s", table, exc)
        return None


def put_blob(sid: SourceId | None, trace: Trace | None, table: str, info: str, data: bytes) -> bool:
    """Store another analysis's result for the file ``sid`` names (``trace``: the complete load
    it was computed from, None when it was computed from cached results of one), unless the file
    changed since ``sid`` was taken."""
    if sid is None or (trace is not None and not kio.cache.load_was_complete(trace)):
        return False
    try:
        if not _unchanged(sid):
            return False
        return _write(sid, table, info, data)
    except Exception as exc:  # noqa: BLE001
        log.warning("%s cache not written: %s", table, exc)
        return False


def clear() -> None:
    """Forget every cached analysis result (tests)."""
    kio.cache.default_cache().clear_extras()
