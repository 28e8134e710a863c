"""The dependency graph of a trace (with its steps and the measured replay) and its critical
paths, cached beside the parsed trace, so that ``kviewer whatif`` after ``kviewer critpath`` (or a
second ``critpath``) does not rebuild them.

The storing is the analysis cache's (:mod:`kviewer.session.analysis_cache`: the trace cache's
``extras`` table, one bound and one eviction; keyed by the file's identity -- its stat and a
digest of its content -- and a fingerprint of the analysis sources, so rewriting the file or
editing an analysis misses). Two entries per (file, ``--step``):

``depgraph``  every array of :class:`~kviewer.analysis.depgraph.DepGraph`, the step windows, where
              they came from and the measured replay (numpy bytes, zstd-compressed): what
              :func:`kviewer.analysis.whatif.whatif_model` and
              :func:`kviewer.analysis.critpath.critical_paths` build before anything else;
``critpath``  the critical paths as ``kviewer critpath`` prints them (the JSON document, the
              launches without GPU work and the graph's notes), read before the trace is loaded.

Like every cache here it never makes anything fail: a problem is a miss.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import zstandard

from kviewer import analysis
from kviewer.core import Diagnostic
from kviewer.session import analysis_cache

if TYPE_CHECKING:
    import kviewer.analysis.critpath
    import kviewer.analysis.depgraph
    from kviewer.analysis.critpath import StepWindow
    from kviewer.analysis.depgraph import DepGraph, Replay
    from kviewer.core import Trace
    from kviewer.io.cache import SourceId

log = logging.getLogger(__name__)

#: bump when the stored layout changes
FORMAT = 2  # 2: thread handoffs (h_xdep, h_xlat, h_idle, h_xtail; the replay's h_sbind)


@dataclass(frozen=True)
class GraphBase:
    """What every critical path and projection of a trace starts from."""

    graph: DepGraph
    windows: list[StepWindow]
    source: str
    measured: Replay


def _table(kind: str, step: str | None) -> str:
    return f"{kind} v{FORMAT} step={step!r}"


def _pack(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return {"s": [str(v) for v in value.tolist()]}
        return {"a": [value.dtype.str, list(value.shape), value.tobytes()]}
    return value


def _unpack(value: Any) -> Any:
    if isinstance(value, dict) and "a" in value:
        dt, shape, data = value["a"]
        return np.frombuffer(data, dtype=np.dtype(dt)).reshape(shape).copy()
    if isinstance(value, dict) and "s" in value:
        return np.asarray(value["s"], dtype=object)
    return value


def encode_base(base: GraphBase) -> bytes:
    g: dict[str, Any] = {}
    for f in dataclasses.fields(analysis.depgraph.DepGraph):
        v = getattr(base.graph, f.name)
        if f.name == "notes":
            v = [[d.kind, d.severity, d.file, d.message] for d in v]
        g[f.name] = _pack(v)
    doc = {
        "graph": g,
        "windows": [[w.name, w.marker_start, w.marker_end, w.thread, _pack(w.gpu)] for w in base.windows],
        "source": base.source,
        "measured": {f.name: _pack(getattr(base.measured, f.name)) for f in dataclasses.fields(base.measured)},
    }
    return zstandard.ZstdCompressor(level=1).compress(msgspec.msgpack.encode(doc))


def decode_base(data: bytes) -> GraphBase:
    doc = msgspec.msgpack.decode(zstandard.ZstdDecompressor().decompress(data))
    g = {k: _unpack(v) for k, v in doc["graph"].items()}
    g["threads"] = [tuple(t) for t in g["threads"]]
    g["streams"] = [tuple(t) for t in g["streams"]]
    g["notes"] = [Diagnostic(*n) for n in g["notes"]]
    graph = analysis.depgraph.DepGraph(**g)
    windows = [analysis.critpath.StepWindow(str(n), int(a), int(b), int(t), _unpack(gpu)) for n, a, b, t, gpu in doc["windows"]]
    measured = analysis.depgraph.Replay(**{k: _unpack(v) for k, v in doc["measured"].items()})
    return GraphBase(graph, windows, str(doc["source"]), measured)


def cached_base(sid: SourceId | None, step: str | None = None) -> GraphBase | None:
    """The stored graph, steps and measured replay of the file ``sid`` names (None on a miss or
    with the cache off): what :func:`graph_base` reads, without loading the trace (``kviewer
    whatif --cuda-graphs`` on a file seen before needs nothing else)."""
    row = analysis_cache.get_blob(sid, _table("depgraph", step))
    if row is None:
        return None
    try:
        return decode_base(row[1])
    except Exception as exc:  # noqa: BLE001  # a cache problem is a miss
        log.warning("dependency graph cache not read: %s", exc)
        return None


def graph_base(trace: Trace, step: str | None = None, use_cache: bool = True) -> GraphBase:
    """The graph, steps and measured replay of ``trace``: from the cache, else built and stored
    (``use_cache`` False: built, neither read nor stored).

    Raises
    ------
    AnalysisError
        as :func:`kviewer.analysis.critpath.check_graph` and ``step_windows`` do.
    """
    sid = trace.meta.source_id if use_cache else None
    cached = cached_base(sid, step)
    if cached is not None and cached.graph.kernel_node.shape == (len(trace.kernels),):
        return cached
    graph = analysis.depgraph.build_graph(trace)
    analysis.critpath.check_graph(trace, graph)
    windows, source = analysis.critpath.step_windows(trace, graph, step)
    base = GraphBase(graph, windows, source, analysis.depgraph.replay(graph))
    try:
        analysis_cache.put_blob(sid, trace, _table("depgraph", step), "", encode_base(base))
    except Exception as exc:  # noqa: BLE001
        log.warning("dependency graph cache not written: %s", exc)
    return base


def get_critpath(sid: SourceId | None, step: str | None) -> dict[str, Any] | None:
    """The stored ``kviewer critpath`` document of the file ``sid`` names (None on a miss)."""
    row = analysis_cache.get_blob(sid, _table("critpath", step))
    if row is None:
        return None
    try:
        doc: dict[str, Any] = json.loads(row[1])
        return doc
    except ValueError:
        return None


def put_critpath(sid: SourceId | None, trace: Trace, step: str | None, doc: dict[str, Any]) -> bool:
    """Store a ``kviewer critpath`` document (the result's ``as_dict`` with ``unlinked`` and ``notes``)."""
    return analysis_cache.put_blob(sid, trace, _table("critpath", step), "", json.dumps(doc).encode())
