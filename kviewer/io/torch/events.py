"""The Kineto JSON as typed msgspec structs, and how a file is recognised as one (``sniff``)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw, field

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
    # [memory] instant events (profile_memory=True); the 2021 schema has Bytes and the device only
    mem_bytes: int | None = field(name="Bytes", default=None)
    addr: int = field(name="Addr", default=-1)
    total_allocated: int = field(name="Total Allocated", default=-1)
    total_reserved: int = field(name="Total Reserved", default=-1)
    device_type: int = field(name="Device Type", default=-1)
    device_id: int = field(name="Device Id", default=-1)
    # kernels a CUDA graph ran (newer Kineto writes the node and graph ids when CUPTI gives them)
    graph_node: int = field(name="graph node id", default=-1)
    graph_id: int = field(name="graph id", default=-1)
    # collectives: record_param_comms copies these onto the NCCL kernel it launched
    collective: str = field(name="Collective name", default="")
    process_group: int | str = field(name="Process Group Name", default="")
    seq: int | str = field(name="Seq", default=-1)


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
    if s.startswith(b"["):
        # Chrome's JSON Array Format: a list of events, recognised by their "ph" and "ts" keys
        return s[1:].lstrip().startswith(b"{") and _PH_KEY.search(head) is not None and _TS_KEY.search(head) is not None
    if not s.startswith(b"{"):
        return False
    if b'"rocprofiler-sdk-tool"' in head:
        return False
    if any(m in head for m in _MARKERS):
        return True
    return _PH_KEY.search(head) is not None and _TS_KEY.search(head) is not None
