"""rocprofv3 (rocprofiler-sdk) CSV output: one file, or a folder of them opened as one trace.

Each file is recognised by its header, not its name:

* kernel trace (``*_kernel_trace.csv``): ``"Kind","Agent_Id","Queue_Id",...,"Kernel_Name",
  "Correlation_Id","Start_Timestamp","End_Timestamp",...``; 2024 files have
  ``Private_Segment_Size``/``Group_Segment_Size`` and no registers, current ones ``Stream_Id``,
  ``LDS_Block_Size``, ``VGPR_Count``, ``Accum_VGPR_Count``, ``SGPR_Count`` and X/Y/Z sizes.
* counter collection (``*_counter_collection.csv``): long format, one row per counter and
  dispatch (``"Dispatch_Id",...,"Counter_Name","Counter_Value"``), with or without timestamps.
* API traces (``hip_api_trace``, ``hip_runtime_trace``, ``hip_compile_trace``, ``hsa_api_trace``,
  ``marker_api_trace``, ...): ``"Domain","Function","Process_Id","Thread_Id","Correlation_Id",
  "Start_Timestamp","End_Timestamp"``.
* memory copies (``*_memory_copy_trace.csv``): ``"Kind","Direction","Source_Agent_Id",
  "Destination_Agent_Id","Correlation_Id","Start_Timestamp","End_Timestamp"``.
* agent info (``*_agent_info.csv``): ``"Node_Id","Logical_Node_Id","Agent_Type",...`` -- the
  devices. Alone it holds no events, so opening it by itself is refused with a hint.

Agent ids appear as a number (2024), ``"Agent 2"`` (the absolute node id, the default) or
``"GPU 0"`` / ``"CPU 0"`` (type-relative). Devices are numbered 0, 1, ... over the GPU agents in
node order (agent_info.csv when present, else the GPU agents the events name).

In a folder, files are grouped by their name prefix (``<pid>_`` by default, ``-o NAME`` gives
``NAME_``; the folder and one level of sub-folders are searched). Within a group, counters join
their kernels by ``Dispatch_Id`` (checked against the kernel name) and kernels and copies link to
the API call with the same ``Correlation_Id`` (a flow). Stream: the HIP ``Stream_Id`` when the file
records one, else the HSA ``Queue_Id``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, Trace, TraceMeta, schema
from kviewer.core.intervals import nesting_depth
from kviewer.errors import LoadError, UnsupportedFormat
from kviewer.io.rocprof import common as rc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, read_content, read_head

RECOGNISED = "rocprofv3 CSV"
KERNEL, COUNTER, API, MEMCPY, AGENTS, STATS = "kernel trace", "counter collection", "API trace", "memory copy trace", "agent info", "statistics"

#: known file-name endings, for grouping the files of one process (content decides the kind)
SUFFIXES = (
    "kernel_trace.csv", "counter_collection.csv", "memory_copy_trace.csv", "hip_api_trace.csv",
    "hip_runtime_trace.csv", "hip_compile_trace.csv", "hsa_api_trace.csv", "marker_api_trace.csv",
    "rccl_api_trace.csv", "rocdecode_api_trace.csv", "rocjpeg_api_trace.csv", "agent_info.csv",
    "memory_allocation_trace.csv", "scratch_memory_trace.csv", "kernel_stats.csv",
    "hip_api_stats.csv", "hsa_api_stats.csv", "memory_copy_stats.csv", "marker_api_stats.csv",
    "domain_stats.csv", "kernel_names.csv",
)
FOLDER_FILE_LIMIT = 2000
#: columns kept as text (the rest are parsed as numbers by pandas' C parser)
TEXT_COLUMNS = frozenset({
    "kind", "kernelname", "agentid", "direction", "sourceagentid", "destinationagentid", "domain",
    "function", "countername", "countervalue", "agenttype", "name", "productname", "modelname",
    "vendorname",
})

SPELLED = {
    "kernelname": "Kernel_Name", "agentid": "Agent_Id", "starttimestamp": "Start_Timestamp",
    "endtimestamp": "End_Timestamp", "dispatchid": "Dispatch_Id", "countername": "Counter_Name",
    "countervalue": "Counter_Value", "function": "Function", "domain": "Domain",
    "direction": "Direction", "sourceagentid": "Source_Agent_Id", "destinationagentid": "Destination_Agent_Id",
}


def classify(fields: list[str]) -> str | None:
    f = set(fields)
    if rc.is_stats_header(fields):
        return STATS
    if {"countername", "countervalue", "dispatchid", "kernelname"} <= f:
        return COUNTER
    if {"kind", "agentid", "queueid", "kernelname", "starttimestamp", "endtimestamp"} <= f:
        return KERNEL
    if {"kind", "direction", "sourceagentid", "destinationagentid", "starttimestamp"} <= f:
        return MEMCPY
    if {"domain", "function", "threadid", "correlationid", "starttimestamp", "endtimestamp"} <= f:
        return API
    if {"nodeid", "agenttype"} <= f and ("cucount" in f or "name" in f):
        return AGENTS
    return None


def sniff(head: bytes, path: Path) -> bool:
    if path.is_dir():
        return bool(_folder_files(path, limit=FOLDER_FILE_LIMIT, first_only=True))
    kind = classify(rc.header_fields(head))
    # statistics files are claimed (and explained) by the rocprof v1 CSV loader
    return kind is not None and kind != STATS


# ---------------------------------------------------------------------------------------------
# one file


@dataclass
class V3File:
    path: Path
    kind: str
    table: rc.CsvTable
    group: str = ""


def _read_file(path: Path, kind: str) -> V3File:
    content = read_content(path)
    table = rc.read_csv_text(content.data, path, f"rocprofv3 {kind} CSV", as_text=TEXT_COLUMNS.__contains__)
    if content.truncated:
        table.warnings.append(rc.compressed_cut(path))
    return V3File(path, kind, table)


def _head_kind(path: Path) -> str | None:
    try:
        head = read_head(path, 8192)
    except (OSError, LoadError):
        return None
    return classify(rc.header_fields(head))


def _folder_files(folder: Path, limit: int, first_only: bool = False) -> list[tuple[Path, str]]:
    """(path, kind) of the rocprofv3 CSVs in the folder and its direct sub-folders."""
    out: list[tuple[Path, str]] = []
    try:
        candidates = sorted(folder.glob("*.csv")) + sorted(folder.glob("*/*.csv"))
    except OSError:
        return out
    for p in candidates[:limit]:
        if not p.is_file():
            continue
        kind = _head_kind(p)
        if kind in (KERNEL, COUNTER, API, MEMCPY, AGENTS, STATS):
            if first_only and kind in (KERNEL, COUNTER, API, MEMCPY):
                return [(p, kind)]
            out.append((p, kind))
    if first_only:
        return []
    return out


def _prefix(name: str) -> str | None:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


# ---------------------------------------------------------------------------------------------
# agents and devices


@dataclass
class AgentKeys:
    """Per-row agent keys, stored as codes into a short list of distinct keys."""

    codes: np.ndarray
    keys: list[tuple[str, int]]

    @staticmethod
    def of(rows: list[tuple[str, int]]) -> AgentKeys:
        index: dict[tuple[str, int], int] = {}
        codes = np.array([index.setdefault(k, len(index)) for k in rows], dtype=np.int64)
        return AgentKeys(codes, list(index))

    def pick(self, rows: np.ndarray) -> list[tuple[str, int]]:
        return [self.keys[c] for c in self.codes[rows]]


class Agents:
    """Maps rocprofv3 agent ids to kviewer device indexes."""

    def __init__(self) -> None:
        self.info: list[dict[str, Any]] = []  # GPU rows of agent_info.csv
        self.seen: set[tuple[str, int]] = set()

    @staticmethod
    def parse(raw: np.ndarray) -> AgentKeys:
        """``1`` / ``"Agent 2"`` -> ("node", n); ``"GPU 0"`` -> ("gpu", 0); ``"CPU 0"`` -> ("cpu", 0)."""
        codes, uniques = pd.factorize(np.asarray(raw, dtype=object), use_na_sentinel=False)
        keys: list[tuple[str, int]] = []
        for text in uniques:
            m = re.fullmatch(r"(?:(Agent|GPU|CPU)\s*)?(-?\d+)", str(text).strip(), re.IGNORECASE)
            if not m:
                keys.append(("?", -1))
                continue
            prefix = (m.group(1) or "agent").lower()
            keys.append(("node" if prefix == "agent" else prefix, int(m.group(2))))
        return AgentKeys(np.asarray(codes, dtype=np.int64), keys)

    def add_info(self, table: rc.CsvTable, path: Path) -> None:
        types = [str(t).strip().upper() for t in table.text("agenttype")]
        node = rc.numbers(table, "nodeid", path, "rocprofv3 agent info CSV")

        def col(name: str) -> np.ndarray:
            return table.text(name) if table.has(name) else np.full(len(node), "", dtype=object)

        def num(name: str) -> np.ndarray:
            return rc.numbers(table, name, path, "rocprofv3 agent info CSV", integer=False) if table.has(name) else np.full(len(node), np.nan)

        cu, clk = num("cucount"), num("maxengineclkfcompute")
        for i, t in enumerate(types):
            if t != "GPU":
                continue
            self.info.append(
                {
                    "node": int(node[i]),
                    "name": str(col("productname")[i]) or str(col("name")[i]),
                    "architecture": str(col("name")[i]),
                    "sm_count": -1 if np.isnan(cu[i]) else int(cu[i]),
                    "sm_clock_hz": clk[i] * 1e6 if clk[i] > 0 else np.nan,
                }
            )

    def device_of(self) -> dict[tuple[str, int], int]:
        """(kind, number) -> device index for every GPU agent: GPUs in node order."""
        mapping: dict[tuple[str, int], int] = {}
        nodes = sorted({d["node"] for d in self.info} | {k[1] for k in self.seen if k[0] == "node"})
        for i, node in enumerate(nodes):
            mapping[("node", node)] = i
        # type-relative "GPU n" is the n-th GPU in node order, i.e. device n
        for k in sorted(k for k in self.seen if k[0] == "gpu"):
            mapping[k] = k[1]
        return mapping

    def devices(self, mapping: dict[tuple[str, int], int]) -> tuple[pd.DataFrame, dict[str, Any]]:
        rows: dict[int, dict[str, Any]] = {}
        if self.info:
            for d in sorted(self.info, key=lambda d: d["node"]):
                idx = mapping[("node", d["node"])]
                rows[idx] = {"id": idx, **{k: v for k, v in d.items() if k != "node"}}
        labels = []
        for (kind, num), idx in sorted(mapping.items(), key=lambda kv: kv[1]):
            if (kind, num) not in self.seen:
                continue
            label = f"Agent {num}" if kind == "node" else f"{kind.upper()} {num}"
            labels.append(f"{label} = device {idx}")
            rows.setdefault(idx, {"id": idx, "name": f"AMD GPU (rocprofv3 {label})"})
        extra = {"agents": ", ".join(labels)} if labels else {}
        return rc.devices_table([rows[i] for i in sorted(rows)]), extra


# ---------------------------------------------------------------------------------------------
# builders: each returns column arrays (before sorting) and the raw device keys they need


@dataclass
class Part:
    """Rows of one table from one file, before the trace-wide device map and time base."""

    cols: dict[str, Any]
    agent_keys: AgentKeys = field(default_factory=lambda: AgentKeys(np.zeros(0, dtype=np.int64), []))
    group: str = ""
    source: str = ""
    dispatch: np.ndarray | None = None  # kernels: Dispatch_Id (for counters)
    launch: dict[str, tuple[np.ndarray, np.ndarray, str]] = field(default_factory=dict)
    from_counters: bool = False  # kernels built from a counter collection file
    serialised: bool = False  # no timestamps: laid end to end


def _ints(f: V3File, name: str) -> np.ndarray:
    return rc.numbers(f.table, name, f.path, f"rocprofv3 {f.kind} CSV")


def _corr(f: V3File) -> np.ndarray:
    if not f.table.has("correlationid"):
        return np.full(len(f.table.frame), -1, dtype=np.int64)
    c = _ints(f, "correlationid")
    return np.where(c > 0, c, -1)  # rocprofiler-sdk numbers from 1; 0 = none


def _times(f: V3File, warnings: list[Diagnostic]) -> tuple[np.ndarray, np.ndarray]:
    start = _ints(f, "starttimestamp")
    end = _ints(f, "endtimestamp")
    return start, rc.clamp_ends(start, end, warnings, f.path, f"{f.path.name}: row(s)")


def _pid_from_prefix(f: V3File, n: int) -> np.ndarray | None:
    p = _prefix(f.path.name)
    if p and re.fullmatch(r"\d+_", p):  # rocprofv3's default output name is <pid>_<domain>.csv
        return np.full(n, int(p[:-1]), dtype=np.int64)
    return None


def _kernel_part(f: V3File, warnings: list[Diagnostic]) -> Part:
    t = f.table
    n = len(t.frame)
    rc.require(t, ["kernelname", "agentid", "starttimestamp", "endtimestamp"], f.path, f"rocprofv3 {f.kind} CSV", SPELLED)
    start, end = _times(f, warnings)
    name, short = rc.kernel_names(t.text("kernelname"))
    cols: dict[str, Any] = {"name": name, "short_name": short, "start": start, "end": end, "correlation": _corr(f)}
    stream_note = "HSA queue id (Queue_Id)"
    if t.has("streamid") and (_ints(f, "streamid") != 0).any():
        cols["stream"] = _ints(f, "streamid")
        stream_note = "HIP stream id (Stream_Id)"
    elif t.has("queueid"):
        cols["stream"] = _ints(f, "queueid")
    if t.has("threadid"):
        cols["tid"] = _ints(f, "threadid")
    if t.has("processid"):
        cols["pid"] = _ints(f, "processid")
    elif (pid := _pid_from_prefix(f, n)) is not None:
        cols["pid"] = pid
    _geometry(f, cols, n)
    part = Part(cols, Agents.parse(t.text("agentid")), source=stream_note)
    part.dispatch = _ints(f, "dispatchid") if t.has("dispatchid") else None
    part.launch = _launch(f)
    return part


def _geometry(f: V3File, cols: dict[str, Any], n: int) -> None:
    t = f.table
    if t.has("gridsizex", "workgroupsizex"):
        for axis in "xyz":
            g = _ints(f, f"gridsize{axis}") if t.has(f"gridsize{axis}") else np.ones(n, dtype=np.int64)
            w = _ints(f, f"workgroupsize{axis}") if t.has(f"workgroupsize{axis}") else np.ones(n, dtype=np.int64)
            # rocprofiler-sdk grid sizes count work-items; kviewer's grid counts workgroups
            cols[f"grid_{axis}"] = rc.ceil_div(g, w)
            cols[f"block_{axis}"] = w
    elif t.has("gridsize", "workgroupsize"):
        g, w = _ints(f, "gridsize"), _ints(f, "workgroupsize")
        cols.update(grid_x=rc.ceil_div(g, w), grid_y=np.ones(n), grid_z=np.ones(n), block_x=w, block_y=np.ones(n), block_z=np.ones(n))
    if t.has("vgprcount"):
        cols["registers"] = _ints(f, "vgprcount") + (_ints(f, "accumvgprcount") if t.has("accumvgprcount") else 0)
    for key in ("ldsblocksize", "groupsegmentsize"):  # LDS bytes; Group_Segment_Size before SDK 1.1
        if t.has(key):
            cols["shared_mem"] = _ints(f, key)
            break


def _launch(f: V3File) -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    out = {}
    for key, metric, unit in (
        ("vgprcount", "arch_vgpr", "register"),
        ("accumvgprcount", "accum_vgpr", "register"),
        ("sgprcount", "sgpr", "register"),
        ("scratchsize", "scratch", "byte"),
        ("privatesegmentsize", "scratch", "byte"),
    ):
        if f.table.has(key) and metric not in out:
            out[metric] = (_ints(f, key).astype(np.float64), f.table.text(key), unit)
    return out


def _counter_kernels(f: V3File, warnings: list[Diagnostic]) -> Part:
    """Kernels from a counter collection alone (no kernel trace to attach them to)."""
    t = f.table
    rc.require(t, ["dispatchid", "kernelname", "countername", "countervalue"], f.path, f"rocprofv3 {f.kind} CSV", SPELLED)
    dispatch = _ints(f, "dispatchid")
    first = np.unique(dispatch, return_index=True)[1]  # sorted by dispatch id
    sub = V3File(f.path, f.kind, rc.CsvTable(t.frame.iloc[first].reset_index(drop=True), t.columns, []))
    n = len(first)
    name, short = rc.kernel_names(sub.table.text("kernelname"))
    cols: dict[str, Any] = {"name": name, "short_name": short, "correlation": _corr(sub)}
    if t.has("starttimestamp", "endtimestamp"):
        cols["start"], cols["end"] = _times(sub, warnings)
        serial = False
    else:
        # no times recorded: one after another in dispatch order, durations unknown
        cols["start"] = np.arange(n, dtype=np.int64) * NOMINAL_NS
        cols["end"] = cols["start"] + NOMINAL_NS
        cols["serialised"] = np.ones(n, dtype=bool)
        serial = True
    for src, dst in (("queueid", "stream"), ("processid", "pid"), ("threadid", "tid")):
        if t.has(src):
            cols[dst] = _ints(sub, src)
    _geometry(sub, cols, n)
    keys = Agents.parse(sub.table.text("agentid")) if t.has("agentid") else AgentKeys(np.zeros(n, dtype=np.int64), [("?", -1)])
    part = Part(cols, keys, source="HSA queue id (Queue_Id)")
    part.dispatch = dispatch[first]
    part.launch = _launch(sub)
    part.from_counters = True
    part.serialised = serial
    return part


NOMINAL_NS = 1000


def _counter_long(f: V3File) -> pd.DataFrame:
    """(dispatch, metric, value, text) rows of a counter collection file."""
    t = f.table
    rc.require(t, ["dispatchid", "kernelname", "countername", "countervalue"], f.path, f"rocprofv3 {f.kind} CSV", SPELLED)
    return pd.DataFrame(
        {
            "dispatch": _ints(f, "dispatchid"),
            "kernel_name": [rc.display_name(str(x)) for x in t.text("kernelname")],
            "metric": t.text("countername"),
            "value": rc.numbers(t, "countervalue", f.path, f"rocprofv3 {f.kind} CSV", integer=False),
            "text": t.text("countervalue"),
        }
    )


def _api_part(f: V3File, warnings: list[Diagnostic]) -> Part:
    t = f.table
    rc.require(t, ["domain", "function", "starttimestamp", "endtimestamp"], f.path, f"rocprofv3 {f.kind} CSV", SPELLED)
    start, end = _times(f, warnings)
    codes, uniques = pd.factorize(t.text("domain"), use_na_sentinel=False)
    domains = [str(d).strip().upper() for d in uniques]
    cat_names = sorted({_category(d) for d in domains})
    cat_codes = np.array([cat_names.index(_category(d)) for d in domains], dtype=np.int64)
    cols: dict[str, Any] = {
        "name": pd.Categorical(t.text("function")),
        "category": pd.Categorical.from_codes(cat_codes[codes], categories=pd.Index(cat_names)),
        "start": start,
        "end": end,
        "correlation": _corr(f),
        "tid": _ints(f, "threadid"),
    }
    if t.has("processid"):
        cols["pid"] = _ints(f, "processid")
    part = Part(cols)
    part.source = ",".join(sorted(domains))
    return part


def _category(domain: str) -> str:
    if domain.startswith("HIP"):
        return "runtime"
    if domain.startswith("HSA"):
        return "driver"  # the layer under HIP, as the CUDA driver API is under the runtime
    if domain.startswith(("MARKER", "ROCTX")):
        return "annotation"
    return "other"


DIRECTIONS = (("HOST_TO_DEVICE", "HtoD"), ("DEVICE_TO_HOST", "DtoH"), ("DEVICE_TO_DEVICE", "DtoD"), ("HOST_TO_HOST", "HtoH"))


def _memcpy_part(f: V3File, warnings: list[Diagnostic]) -> Part:
    t = f.table
    rc.require(t, ["direction", "sourceagentid", "destinationagentid", "starttimestamp", "endtimestamp"], f.path, f"rocprofv3 {f.kind} CSV", SPELLED)
    start, end = _times(f, warnings)
    n = len(start)
    codes, kinds = pd.factorize(t.text("direction"), use_na_sentinel=False)
    short = [next((abbr for key, abbr in DIRECTIONS if key in str(d).upper()), "") for d in kinds]
    direction = [short[c] for c in codes]
    rows = np.arange(n)
    src = Agents.parse(t.text("sourceagentid")).pick(rows)
    dst = Agents.parse(t.text("destinationagentid")).pick(rows)
    # the GPU side of the copy is its device: the destination of an upload, else the source
    keys = AgentKeys.of([d if dr == "HtoD" else (("?", -1) if dr == "HtoH" else s) for s, d, dr in zip(src, dst, direction)])
    cols: dict[str, Any] = {
        "kind": pd.Categorical(np.full(n, "memcpy", dtype=object)),
        "name": pd.Categorical(np.array([f"Memcpy {d}" if d else "Memcpy" for d in direction], dtype=object)),
        "direction": pd.Categorical(np.array(direction, dtype=object)),
        "start": start,
        "end": end,
        "correlation": _corr(f),
    }
    for key in ("bytes", "copybytes", "size"):
        if t.has(key):
            cols["bytes"] = _ints(f, key)
            break
    if (pid := _pid_from_prefix(f, n)) is not None:
        cols["pid"] = pid
    return Part(cols, keys)


# ---------------------------------------------------------------------------------------------
# assembling a trace


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    if path.is_dir():
        found = _folder_files(path, FOLDER_FILE_LIMIT)
        usable = [(p, k) for p, k in found if k in (KERNEL, COUNTER, API, MEMCPY, AGENTS)]
        if not any(k in (KERNEL, COUNTER, API, MEMCPY) for _, k in usable):
            raise UnsupportedFormat(path, "has no rocprofv3 trace CSVs (kernel, counter, API or memory copy traces)")
        skipped = [p for p, k in found if k == STATS]
    else:
        kind = _head_kind(path)
        if kind is None:
            raise UnsupportedFormat(path, "not a rocprofv3 CSV header", RECOGNISED)
        if kind == AGENTS:
            raise LoadError(
                path,
                "describes the devices only, with no events; open the folder with the run's "
                "trace CSVs to see them together",
                "rocprofv3 agent info CSV",
            )
        usable, skipped = [(path, kind)], []
    files: list[V3File] = []
    for i, (p, k) in enumerate(usable):
        cancel.check()
        progress(0.7 * i / max(1, len(usable)), f"reading {p.name}")
        files.append(_read_file(p, k))
    return assemble(path, files, skipped, progress, cancel)


def assemble(path: Path, files: list[V3File], skipped: list[Path], progress: Progress, cancel: CancelToken) -> Trace:
    warnings: list[Diagnostic] = []
    for f in files:
        warnings.extend(w.about(f.path, f.path.name) for w in f.table.warnings)
    _assign_groups(path, files)
    agents = Agents()
    for f in files:
        if f.kind == AGENTS:
            agents.add_info(f.table, f.path)

    kernel_parts: list[Part] = []
    op_parts: list[Part] = []
    api_parts: list[Part] = []
    counter_files: list[V3File] = []
    stream_notes: set[str] = set()
    spans: list[tuple[str, int, int]] = []
    for f in files:
        cancel.check()
        if not len(f.table.frame) and f.kind != AGENTS:
            warnings.append(Diagnostic.warning("empty", f.path, f"{f.path.name}: header only, no rows"))
            continue
        if f.kind == KERNEL:
            part = _kernel_part(f, warnings)
            part.group = f.group
            kernel_parts.append(part)
            stream_notes.add(part.source)
        elif f.kind == COUNTER:
            counter_files.append(f)
        elif f.kind == API:
            part = _api_part(f, warnings)
            part.group = f.group
            api_parts.append(part)
        elif f.kind == MEMCPY:
            part = _memcpy_part(f, warnings)
            part.group = f.group
            op_parts.append(part)
        else:
            continue
        if f.kind != COUNTER:
            spans.append((f.path.name, int(part.cols["start"].min()), int(part.cols["end"].max())))

    # counters: onto the kernels of their group by Dispatch_Id, or as kernels of their own
    metric_rows: list[tuple[Part, pd.DataFrame]] = []
    for f in counter_files:
        long = _counter_long(f)
        targets = [p for p in kernel_parts if p.group == f.group and p.dispatch is not None and not p.from_counters]
        if targets:
            attached = _attach(long, targets, f, warnings)
            metric_rows.extend(attached)
        else:
            part = _counter_kernels(f, warnings)
            part.group = f.group
            assert part.dispatch is not None
            long["row"] = np.searchsorted(part.dispatch, long["dispatch"].to_numpy())
            kernel_parts.append(part)
            metric_rows.append((part, long))
            stream_notes.add(part.source)
            if part.serialised:
                warnings.append(
                    Diagnostic.warning(
                        "serialised",
                        f.path,
                        f"{f.path.name}: counters without timestamps: its kernels are laid end to end in "
                        f"dispatch order, {NOMINAL_NS // 1000} µs each; their durations are not measured",
                    )
                )
            elif "start" in part.cols:
                spans.append((f.path.name, int(part.cols["start"].min()), int(part.cols["end"].max())))
    _check_spans(path, spans, warnings)

    # one device map and one time base for the whole trace
    for p in kernel_parts + op_parts:
        agents.seen.update(k for k in p.agent_keys.keys if k[0] in ("node", "gpu"))
    mapping = agents.device_of()
    timed = [p for p in kernel_parts if not p.serialised] + op_parts + api_parts
    base = rc.rebase([np.asarray(p.cols["start"]) for p in timed])
    for p in timed:
        p.cols["start"] = np.asarray(p.cols["start"]) - base
        p.cols["end"] = np.asarray(p.cols["end"]) - base
    for p in kernel_parts + op_parts:
        lookup = np.array([mapping.get(k, -1) for k in p.agent_keys.keys] or [-1], dtype=np.int32)
        p.cols["device"] = lookup[p.agent_keys.codes]

    progress(0.8, "building tables")
    kernels, kernel_new = _concat("kernels", kernel_parts)
    gpu_ops, op_new = _concat("gpu_ops", op_parts)
    api_parts_with_depth(api_parts)
    cpu_slices, api_new = _concat("cpu_slices", api_parts)
    flows = _flows(kernel_parts, kernel_new, op_parts, op_new, api_parts, api_new)

    # metrics: counters and launch attributes, with final kernel ids
    frames = []
    offsets = _offsets(kernel_parts)
    for part, rows in metric_rows:
        if not len(rows):
            continue
        k0 = offsets[id(part)]
        frames.append(_metrics_rows(kernel_new[k0 + rows["row"].to_numpy()], rows))
    for part in kernel_parts:
        k0 = offsets[id(part)]
        n = len(part.cols["name"])
        frames.append(rc.launch_metrics(kernel_new[k0 : k0 + n], part.launch))
    metrics = rc.concat_metrics(*frames)
    kernels = _dram_from_metrics(kernels, metrics)

    devices, dev_extra = agents.devices(mapping)
    extra: dict[str, Any] = rc.clock_extra(base)
    extra.update(dev_extra)
    extra["files"] = ", ".join(f"{f.path.relative_to(path) if path.is_dir() else f.path.name} ({f.kind})" for f in files)
    if skipped:
        extra["not loaded"] = ", ".join(f"{p.name} (statistics: no per-call times)" for p in skipped)
    if stream_notes:
        extra["stream"] = "; ".join(sorted(stream_notes))
    counters = sorted(set(metrics.loc[metrics["section"] == rc.SECTION, "metric"].astype(str).unique())) if len(metrics) else []
    if counters:
        extra["counters"] = ", ".join(counters)
    kinds = sorted({f.kind for f in files})
    label = "rocprofv3 CSV folder: " + ", ".join(kinds) if path.is_dir() else f"rocprofv3 {files[0].kind} CSV"
    meta = TraceMeta(
        path=str(path),
        source_format="rocprofv3-csv",
        format_label=label + _generation(files),
        tool="rocprofv3 (rocprofiler-sdk)",
        warnings=warnings,
        extra=extra,
    )
    return Trace(meta=meta, kernels=kernels, gpu_ops=gpu_ops, cpu_slices=cpu_slices, flows=flows, devices=devices, metrics=metrics)


def _generation(files: list[V3File]) -> str:
    cols: set[str] = set()
    for f in files:
        if f.kind in (KERNEL, COUNTER):
            cols |= set(f.table.columns)
    if not cols:
        return ""
    if "streamid" in cols or "accumvgprcount" in cols:
        return " (2025 columns: Stream_Id / Accum_VGPR_Count)"
    if "groupsegmentsize" in cols:
        return " (2024 columns: Private/Group_Segment_Size)"
    return ""


def _assign_groups(root: Path, files: list[V3File]) -> None:
    """Group the files of one process: same folder, same name prefix. A file whose name has no
    known ending joins its folder's group when that folder has only one."""
    for f in files:
        p = _prefix(f.path.name)
        f.group = f"{f.path.parent}|{p}" if p is not None else ""
    by_dir: dict[Path, set[str]] = {}
    for f in files:
        if f.group:
            by_dir.setdefault(f.path.parent, set()).add(f.group)
    for f in files:
        if not f.group:
            groups = by_dir.get(f.path.parent, set())
            f.group = next(iter(groups)) if len(groups) == 1 else f"{f.path}|"


def _attach(long: pd.DataFrame, targets: list[Part], f: V3File, warnings: list[Diagnostic]) -> list[tuple[Part, pd.DataFrame]]:
    """Counter rows onto the kernel rows with the same Dispatch_Id (and kernel name)."""
    out = []
    unmatched = np.ones(len(long), dtype=bool)
    for part in targets:
        assert part.dispatch is not None
        index = pd.Series(np.arange(len(part.dispatch)), index=part.dispatch)
        index = index[~index.index.duplicated()]
        rows = index.reindex(long["dispatch"].to_numpy()).to_numpy()
        hit = ~np.isnan(rows)
        if not hit.any():
            continue
        row = rows[hit].astype(np.int64)
        names = np.asarray(part.cols["name"], dtype=object)[row]
        same = names == long["kernel_name"].to_numpy(dtype=object)[hit]
        if not same.all():
            warnings.append(
                Diagnostic.warning(
                    "inconsistent",
                    f.path,
                    f"{f.path.name}: {int((~same).sum())} counter row(s) name a different kernel than the "
                    "kernel trace's dispatch with the same Dispatch_Id (another run?); not attached",
                )
            )
        take = np.flatnonzero(hit)[same]
        unmatched[np.flatnonzero(hit)] = False
        sel = long.iloc[take].copy()
        sel["row"] = row[same]
        out.append((part, sel))
    if unmatched.any():
        n_disp = long["dispatch"][unmatched].nunique()
        warnings.append(
            Diagnostic.warning(
                "inconsistent",
                f.path,
                f"{f.path.name}: {n_disp} counter dispatch(es) have no kernel with that Dispatch_Id in the "
                "kernel trace (another run?); their counters were not attached",
            )
        )
    return out


def _metrics_rows(kernel_ids: np.ndarray, rows: pd.DataFrame) -> pd.DataFrame:
    metric = rows["metric"].to_numpy(dtype=object)
    upper = np.array([str(m).upper() for m in metric], dtype=object)
    scale = np.where(np.isin(upper, list(rc.KIB_COUNTERS)), 1024.0, 1.0)
    units = {m: rc.counter_unit(m) for m in set(metric.tolist())}
    n = len(rows)
    order = np.lexsort((np.arange(n), kernel_ids))
    return schema.make_table(
        "metrics",
        n,
        {
            "kernel": np.asarray(kernel_ids, dtype=np.int64)[order],
            "section": pd.Categorical(np.full(n, rc.SECTION, dtype=object)),
            "metric": pd.Categorical(metric[order]),
            "unit": pd.Categorical(np.array([units[m] for m in metric[order]], dtype=object)),
            "value": (rows["value"].to_numpy(dtype=np.float64) * scale)[order],
            "text": rows["text"].to_numpy(dtype=object)[order],
        },
    )


def _dram_from_metrics(kernels: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    if not len(metrics):
        return kernels
    m = metrics[metrics["section"].astype(str) == rc.SECTION]
    names = m["metric"].astype(str).str.upper()
    for counter, column in rc.KIB_COUNTERS.items():
        sel = m[names == counter]
        if len(sel):
            sums = sel.groupby("kernel")["value"].sum()  # already in bytes
            col = kernels[column].to_numpy(copy=True)
            col[sums.index.to_numpy()] = sums.to_numpy()
            kernels[column] = col
    has_both = kernels["dram_read_bytes"].notna() & kernels["dram_write_bytes"].notna()
    if has_both.any():
        kernels.loc[has_both, "dram_bytes"] = kernels.loc[has_both, "dram_read_bytes"] + kernels.loc[has_both, "dram_write_bytes"]
    per: dict[str, np.ndarray] = {}
    for name, sel in m.groupby(names.to_numpy(), sort=False):
        col = np.full(len(kernels), np.nan)
        sums = sel.groupby("kernel")["value"].sum()
        col[sums.index.to_numpy()] = sums.to_numpy()
        per[str(name)] = col
    for column, values in rc.flops_columns(per, len(kernels)).items():
        kernels[column] = pd.Categorical(values) if column == "tensor_precision" else values
    return kernels


def _check_spans(path: Path, spans: list[tuple[str, int, int]], warnings: list[Diagnostic]) -> None:
    """Files of one run overlap in time; ones hours apart were recorded separately."""
    if len(spans) < 2:
        return
    spans = sorted(spans, key=lambda s: s[1])
    hour = 3600 * 10**9
    reach = spans[0][2]
    for name, lo, hi in spans[1:]:
        if lo - reach > hour:
            warnings.append(
                Diagnostic.warning(
                    "time_origin",
                    path,
                    "the files do not overlap in time (more than an hour apart): they were probably "
                    "recorded in different runs, so the timeline shows them far apart",
                )
            )
            return
        reach = max(reach, hi)


def api_parts_with_depth(parts: list[Part]) -> None:
    """Nesting depth per (pid, tid) over every API file together (HIP calls nest HSA calls)."""
    if not parts:
        return
    starts = np.concatenate([np.asarray(p.cols["start"]) for p in parts])
    ends = np.concatenate([np.asarray(p.cols["end"]) for p in parts])
    pid = np.concatenate([np.asarray(p.cols.get("pid", np.full(len(p.cols["start"]), -1))) for p in parts])
    tid = np.concatenate([np.asarray(p.cols["tid"]) for p in parts])
    groups = np.concatenate([np.full(len(p.cols["start"]), i) for i, p in enumerate(parts)])
    group_names = np.array([p.group for p in parts], dtype=object)[groups]
    key = pd.factorize(pd.Series(list(zip(group_names, pid, tid))))[0] if len(starts) else np.array([], dtype=np.int64)
    depth = nesting_depth(starts, ends, np.asarray(key))
    k = 0
    for p in parts:
        n = len(p.cols["start"])
        p.cols["depth"] = depth[k : k + n]
        k += n


def _offsets(parts: list[Part]) -> dict[int, int]:
    out, k = {}, 0
    for p in parts:
        out[id(p)] = k
        k += len(p.cols["start"])
    return out


def _concat(table: str, parts: list[Part]) -> tuple[pd.DataFrame, np.ndarray]:
    if not parts:
        return schema.empty(table), np.array([], dtype=np.int64)
    names = set().union(*(p.cols.keys() for p in parts))
    spec = schema.TABLES[table]
    cols: dict[str, Any] = {}
    for name in names:
        col = spec.column(name)
        arrays = []
        for p in parts:
            n = len(p.cols["start"])
            if name in p.cols:
                v = p.cols[name]
                arrays.append(np.asarray(v.astype(object) if isinstance(v, pd.Categorical) else v))
            else:
                fill = col.fill(n)
                arrays.append(np.asarray(fill.astype(object) if isinstance(fill, pd.Categorical) else fill))
        joined = np.concatenate(arrays)
        cols[name] = pd.Categorical(joined) if col.dtype == schema.CAT else joined
    n = sum(len(p.cols["start"]) for p in parts)
    return schema.make_table_mapped(table, n, cols)


def _flows(kparts: list[Part], knew: np.ndarray, oparts: list[Part], onew: np.ndarray, aparts: list[Part], anew: np.ndarray) -> pd.DataFrame:
    """Launch -> GPU op links: a kernel or copy and the API call with its correlation id, in the
    same group (process). HIP calls win over HSA calls carrying the same id."""
    if not aparts:
        return schema.empty("flows")
    groups = {g: i for i, g in enumerate(dict.fromkeys(p.group for p in kparts + oparts + aparts))}

    def keyed(parts: list[Part]) -> np.ndarray:
        # (group, correlation id) as one int64 key; ids are far below 2**40
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([
            groups[p.group] * (1 << 40) + np.asarray(p.cols.get("correlation", np.full(len(p.cols["start"]), -1)), dtype=np.int64)
            for p in parts
        ])

    akey = keyed(aparts)
    acorr = np.concatenate([np.asarray(p.cols["correlation"]) for p in aparts])
    runtime = np.concatenate([np.asarray(p.cols["category"].astype(object)) == "runtime" for p in aparts])
    order = np.lexsort((~runtime, akey))  # per key, a HIP runtime call first
    first = np.ones(len(order), dtype=bool)
    first[1:] = akey[order][1:] != akey[order][:-1]
    keep = order[first & (acorr[order] > 0)]
    call = pd.Series(anew[keep], index=akey[keep])
    src, table, dst, corr = [], [], [], []
    for parts, new, name in ((kparts, knew, "kernels"), (oparts, onew, "gpu_ops")):
        if not parts:
            continue
        key = keyed(parts)
        c = np.concatenate([np.asarray(p.cols.get("correlation", np.full(len(p.cols["start"]), -1))) for p in parts])
        hit = call.reindex(key).to_numpy()
        ok = ~np.isnan(hit) & (c > 0)
        src.append(hit[ok].astype(np.int64))
        dst.append(new[np.flatnonzero(ok)])
        corr.append(c[ok])
        table += [name] * int(ok.sum())
    if not table:
        return schema.empty("flows")
    return schema.make_table(
        "flows",
        len(table),
        {"src": np.concatenate(src), "dst_table": pd.Categorical(np.array(table, dtype=object)),
         "dst": np.concatenate(dst), "correlation": np.concatenate(corr)},
    )


LOADER = LoaderSpec(
    name="rocprofv3-csv",
    label="rocprofv3 CSV (file or folder)",
    priority=40,
    sniff=sniff,
    load=load,
    directories=True,
)
