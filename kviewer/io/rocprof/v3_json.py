"""rocprofv3 ``--output-format json`` (``{"rocprofiler-sdk-tool": [{...}]}``), and rocprof v1's
Chrome-trace JSON fragments (recognised, refused with a clear message).

The rocprofv3 document holds ``metadata`` (pid, command, host), ``agents`` (CPUs and GPUs:
``name`` gfx950, ``product_name``, ``cu_count``, clocks, memory banks), ``kernel_symbols``
(indexed by ``kernel_id``: mangled, demangled and "formatted" names), ``counters`` (id -> name),
``strings`` (the names of API domains and operations, and roctx messages), and the records:
``buffer_records.kernel_dispatch`` / ``memory_copy`` / ``hip_api`` / ``hsa_api`` /
``marker_api`` / ``rccl_api`` and ``callback_records.counter_collection``.

It is decoded with msgspec into typed structs that name only the fields kviewer reads (msgspec
skips the rest without building them), then turned into numpy columns; no per-event Python
object outlives the load.

Kernel names are ``formatted_kernel_name`` (what rocprofv3's CSV prints as Kernel_Name) with the
``.kd`` suffix removed, like every rocprof name in kviewer. Devices are the GPU agents, numbered by
their ``gpu_index`` (the HIP device order).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, Trace, TraceMeta, schema
from kviewer.core.intervals import nesting_depth
from kviewer.errors import CorruptTrace, LoadError, TruncatedTrace
from kviewer.io.rocprof import common as rc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, json_ends_early, read_content

LABEL = "rocprofv3 JSON"
V1_FRAGMENT = "rocprof v1 Chrome-trace JSON fragment"
NOMINAL_NS = 1000


# ---------------------------------------------------------------------------------------------
# the typed view of the document (only what is read; gc=False: these hold no cycles;
# the small leaf structs are frozen so they can serve as defaults)


class Handle(msgspec.Struct, frozen=True, gc=False):
    handle: int = 0


class Corr(msgspec.Struct, frozen=True, gc=False):
    internal: int = 0
    external: int = 0


class Dim3(msgspec.Struct, frozen=True, gc=False):
    x: int = 1
    y: int = 1
    z: int = 1


class DispatchInfo(msgspec.Struct, gc=False):
    agent_id: Handle = Handle()
    queue_id: Handle = Handle()
    kernel_id: int = 0
    dispatch_id: int = 0
    private_segment_size: int = 0
    group_segment_size: int = 0
    workgroup_size: Dim3 = Dim3()
    grid_size: Dim3 = Dim3()


class KernelDispatch(msgspec.Struct, gc=False):
    dispatch_info: DispatchInfo
    start_timestamp: int = -1
    end_timestamp: int = -1
    thread_id: int = -1
    correlation_id: Corr = Corr()
    stream_id: Handle = Handle()


class ApiRecord(msgspec.Struct, gc=False):
    kind: int = 0
    operation: int = 0
    start_timestamp: int = -1
    end_timestamp: int = -1
    thread_id: int = -1
    correlation_id: Corr = Corr()


class CopyRecord(msgspec.Struct, gc=False):
    kind: int = 0
    operation: int = 0
    start_timestamp: int = -1
    end_timestamp: int = -1
    thread_id: int = -1
    correlation_id: Corr = Corr()
    src_agent_id: Handle = Handle()
    dst_agent_id: Handle = Handle()
    bytes: int = -1


class CounterValue(msgspec.Struct, gc=False):
    counter_id: Handle = Handle()
    value: float = float("nan")


class CounterDispatchData(msgspec.Struct, gc=False):
    dispatch_info: DispatchInfo
    correlation_id: Corr = Corr()
    start_timestamp: int = -1
    end_timestamp: int = -1


class CounterDispatch(msgspec.Struct, gc=False):
    dispatch_data: CounterDispatchData
    records: list[CounterValue] = []
    thread_id: int = -1
    stream_id: Handle = Handle()


class CounterInfo(msgspec.Struct, gc=False):
    id: Handle = Handle()
    name: str = ""


class MemBank(msgspec.Struct, gc=False):
    size_in_bytes: int = 0
    mem_clk_max: int = 0
    width: int = 0


class Agent(msgspec.Struct, gc=False):
    id: Handle = Handle()
    type: int = 0  # 1 CPU, 2 GPU
    name: str = ""
    product_name: str = ""
    cu_count: int = 0
    node_id: int = -1
    gpu_index: int = -1
    max_engine_clk_fcompute: int = 0
    mem_banks: list[MemBank] = []


class KernelSymbol(msgspec.Struct, gc=False):
    kernel_id: int = 0
    kernel_name: str = ""
    formatted_kernel_name: str = ""
    demangled_kernel_name: str = ""
    sgpr_count: int = -1
    arch_vgpr_count: int = -1
    accum_vgpr_count: int = -1


class KindOps(msgspec.Struct, gc=False):
    kind: str = ""
    operations: list[str] = []


class KeyValue(msgspec.Struct, gc=False):
    key: int = 0
    value: str = ""


class Strings(msgspec.Struct, gc=False):
    buffer_records: list[KindOps] = []
    marker_api: list[KeyValue] = []


class BufferRecords(msgspec.Struct, gc=False):
    kernel_dispatch: list[KernelDispatch] = []
    memory_copy: list[CopyRecord] = []
    hip_api: list[ApiRecord] = []
    hsa_api: list[ApiRecord] = []
    marker_api: list[ApiRecord] = []
    rccl_api: list[ApiRecord] = []


class CallbackRecords(msgspec.Struct, gc=False):
    counter_collection: list[CounterDispatch] = []


class ToolEntry(msgspec.Struct, gc=False):
    metadata: dict[str, Any] = {}
    agents: list[Agent] = []
    counters: list[CounterInfo] = []
    strings: Strings = msgspec.field(default_factory=Strings)
    kernel_symbols: list[KernelSymbol] = []
    buffer_records: BufferRecords = msgspec.field(default_factory=BufferRecords)
    callback_records: CallbackRecords = msgspec.field(default_factory=CallbackRecords)


class Document(msgspec.Struct, gc=False):
    tool: list[ToolEntry] = msgspec.field(name="rocprofiler-sdk-tool")


_DECODER = msgspec.json.Decoder(Document)


# ---------------------------------------------------------------------------------------------
# sniffing


def _is_v1_fragment(s: bytes) -> bool:
    # rocprof v1 writes its Chrome trace piecewise, each event as ",{...}"; a file holding only
    # such pieces has no enclosing {"traceEvents": [...]}
    return s.startswith(b",") and s[1:].lstrip().startswith(b"{") and re.search(rb'"ph"\s*:', s[:4096]) is not None


def sniff(head: bytes, path: Path) -> bool:
    s = head.lstrip()
    if s.startswith(b"\xef\xbb\xbf"):
        s = s[3:].lstrip()
    if _is_v1_fragment(s):
        return True
    return s.startswith(b"{") and re.match(rb'\{\s*"rocprofiler-sdk-tool"\s*:', s) is not None


# ---------------------------------------------------------------------------------------------
# loading


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    content = read_content(path, progress)
    cancel.check()
    data = content.data
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    s = data.lstrip()
    if _is_v1_fragment(s):
        beside = (path.parent / "results.csv").is_file()
        raise CorruptTrace(
            path,
            "only a fragment of a Chrome trace (it starts with ',{' and has no enclosing "
            '{"traceEvents": [...]}), so it is not a complete trace; rocprof v1 writes its JSON in '
            "pieces -- open "
            + ("results.csv beside it" if beside else "the results.csv of the same run")
            + " instead",
            V1_FRAGMENT,
        )
    progress(0.3, "decoding JSON")
    try:
        doc = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        msg = str(exc)
        if content.truncated or json_ends_early(exc):
            raise TruncatedTrace(path, f"the JSON ends early ({msg}); rocprofv3 JSON cannot be read in part", LABEL) from exc
        raise CorruptTrace(path, f"not the rocprofv3 JSON layout ({msg})", LABEL) from exc
    except RecursionError as exc:  # msgspec's depth limit: no profiler nests this deep
        raise CorruptTrace(path, "the JSON is nested too deeply to be a rocprofv3 trace", LABEL) from exc
    cancel.check()
    if not doc.tool:
        raise CorruptTrace(path, 'the "rocprofiler-sdk-tool" list is empty', LABEL)
    progress(0.6, "building tables")
    entries = doc.tool
    del doc
    return build(path, entries, cancel)


def build(path: Path, entries: list[ToolEntry], cancel: CancelToken) -> Trace:
    warnings: list[Diagnostic] = []
    entry = entries[0]
    if len(entries) > 1:
        warnings.append(Diagnostic.warning("ignored", path, f"{len(entries)} tool entries (processes); only the first was loaded"))
    meta_raw = entry.metadata if isinstance(entry.metadata, dict) else {}
    pid = int(meta_raw.get("pid", -1)) if isinstance(meta_raw.get("pid", -1), int) else -1

    # devices: GPU agents, by HIP index
    gpus = [a for a in entry.agents if a.type == 2]
    gpus.sort(key=lambda a: (a.gpu_index if a.gpu_index >= 0 else 1 << 30, a.node_id))
    agent_dev: dict[int, int] = {}
    dev_rows = []
    for i, a in enumerate(gpus):
        idx = a.gpu_index if a.gpu_index >= 0 else i
        agent_dev[a.id.handle] = idx
        bank = a.mem_banks[0] if a.mem_banks else None
        dev_rows.append(
            {
                "id": idx,
                "name": a.product_name or a.name,
                "vendor": "AMD",
                "architecture": a.name,
                "sm_count": a.cu_count if a.cu_count > 0 else -1,
                "sm_clock_hz": a.max_engine_clk_fcompute * 1e6 if a.max_engine_clk_fcompute > 0 else np.nan,
                "memory_bytes": bank.size_in_bytes if bank and bank.size_in_bytes > 0 else -1,
                "mem_clock_hz": bank.mem_clk_max * 1e6 if bank and bank.mem_clk_max > 0 else np.nan,
                "mem_bus_width": bank.width if bank and bank.width > 0 else -1,
            }
        )
    agent_type = {a.id.handle: a.type for a in entry.agents}

    # kernel symbols: kernel_id -> display name (each distinct name normalised once)
    sym_ids = np.array([k.kernel_id for k in entry.kernel_symbols], dtype=np.int64)
    sym_names = [k.formatted_kernel_name or k.demangled_kernel_name or k.kernel_name for k in entry.kernel_symbols]
    # kernel_id -> symbol by binary search: a table indexed by id would let one huge kernel_id
    # in a tiny file allocate gigabytes
    sym_order = np.argsort(sym_ids, kind="stable")
    sym_sorted = sym_ids[sym_order]
    vgpr = np.array([k.arch_vgpr_count + max(k.accum_vgpr_count, 0) if k.arch_vgpr_count >= 0 else -1 for k in entry.kernel_symbols], dtype=np.int64)
    sgpr = np.array([k.sgpr_count for k in entry.kernel_symbols], dtype=np.int64)

    records = entry.buffer_records
    kd = records.kernel_dispatch
    n = len(kd)
    cancel.check()
    # columns straight from the structs, one pass each; the structs go when the entry does
    kernel_id = np.fromiter((r.dispatch_info.kernel_id for r in kd), np.int64, n)
    cols: dict[str, Any] = {
        "start": np.fromiter((r.start_timestamp for r in kd), np.int64, n),
        "end": np.fromiter((r.end_timestamp for r in kd), np.int64, n),
        "tid": np.fromiter((r.thread_id for r in kd), np.int64, n),
        "correlation": np.fromiter((r.correlation_id.internal for r in kd), np.int64, n),
        "external_id": np.fromiter((r.correlation_id.external for r in kd), np.int64, n),
        "shared_mem": np.fromiter((r.dispatch_info.group_segment_size for r in kd), np.int64, n),
    }
    dispatch = np.fromiter((r.dispatch_info.dispatch_id for r in kd), np.int64, n)
    agent = np.fromiter((r.dispatch_info.agent_id.handle for r in kd), np.int64, n)
    stream = np.fromiter((r.stream_id.handle for r in kd), np.int64, n)
    queue = np.fromiter((r.dispatch_info.queue_id.handle for r in kd), np.int64, n)
    wg = [np.fromiter((getattr(r.dispatch_info.workgroup_size, a) for r in kd), np.int64, n) for a in "xyz"]
    grid = [np.fromiter((getattr(r.dispatch_info.grid_size, a) for r in kd), np.int64, n) for a in "xyz"]
    scratch = np.fromiter((r.dispatch_info.private_segment_size for r in kd), np.int64, n)
    cols["stream"] = stream if (stream != 0).any() else queue
    stream_note = "HIP stream id (stream_id)" if (stream != 0).any() else "HSA queue id (queue_id)"
    for i, axis in enumerate("xyz"):
        cols[f"grid_{axis}"] = rc.ceil_div(grid[i], wg[i])  # work-items -> workgroups
        cols[f"block_{axis}"] = wg[i]
    cols["correlation"] = np.where(cols["correlation"] > 0, cols["correlation"], -1)
    cols["external_id"] = np.where(cols["external_id"] > 0, cols["external_id"], -1)

    # counters (callback_records.counter_collection): per dispatch, summed over dimensions
    counter_rows, counter_kernels = _counters(path, entry, warnings)
    serialised = False
    if n == 0 and counter_kernels is not None:
        # counters without a kernel trace: the dispatches come from the counter records
        (kernel_id, dispatch, agent, cols, scratch, serialised) = counter_kernels
        n = len(kernel_id)
    if n == 0:
        raise LoadError(path, "holds no kernel dispatches (buffer_records.kernel_dispatch and counter records are empty)", LABEL)

    if len(sym_sorted):
        pos = np.minimum(np.searchsorted(sym_sorted, kernel_id), len(sym_sorted) - 1)
        sym = np.where((sym_sorted[pos] == kernel_id) & (kernel_id >= 0), sym_order[pos], -1)
    else:
        sym = np.full(n, -1, dtype=np.int64)
    unknown = sym < 0
    if unknown.any():
        warnings.append(Diagnostic.warning("inconsistent", path, f"{int(unknown.sum())} dispatch(es) name a kernel_id missing from kernel_symbols"))
    # each distinct symbol (and unknown id) named once, then taken per dispatch by code: a long
    # name shared by many dispatches is never hashed once per row
    n_sym = len(sym_names)
    unknown_ids, unknown_at = np.unique(kernel_id[unknown], return_inverse=True)
    label = sym.copy()
    label[unknown] = n_sym + unknown_at.reshape(-1)
    keys, per_row = np.unique(label, return_inverse=True)
    raw_names = [sym_names[k] if k < n_sym else f"<kernel_id {unknown_ids[k - n_sym]}>" for k in keys.tolist()]
    names_u, shorts_u = rc.kernel_names(raw_names)
    per_row = per_row.reshape(-1)
    cols["name"], cols["short_name"] = names_u[per_row], shorts_u[per_row]
    cols["registers"] = np.where(unknown, -1, vgpr[np.maximum(sym, 0)] if len(vgpr) else -1)
    cols["device"] = _map(agent, agent_dev)
    cols["pid"] = np.full(n, pid, dtype=np.int64)
    if serialised:
        cols["serialised"] = np.ones(n, dtype=bool)

    # host side
    api_cols = _api(entry, pid)
    op_cols = _copies(records.memory_copy, agent_type, agent_dev, pid)
    timed = [cols["start"]] if not serialised else []
    timed += [c["start"] for c in (api_cols, op_cols) if c is not None]
    base = rc.rebase(timed)
    if base is not None:
        if not serialised:
            cols["start"] = cols["start"] - base
            cols["end"] = cols["end"] - base
        for c in (api_cols, op_cols):
            if c is not None:
                c["start"] = c["start"] - base
                c["end"] = c["end"] - base
    cols["end"] = rc.clamp_ends(cols["start"], cols["end"], warnings, path)

    # dram bytes from FETCH_SIZE / WRITE_SIZE (KiB), per dispatch
    if counter_rows is not None and len(counter_rows):
        row_of = pd.Series(np.arange(n), index=dispatch)
        row_of = row_of[~row_of.index.duplicated()]
        counter_rows["row"] = row_of.reindex(counter_rows["dispatch"].to_numpy()).to_numpy()
        missing = counter_rows["row"].isna()
        if missing.any():
            warnings.append(
                Diagnostic.warning(
                    "inconsistent", path, f"{counter_rows.loc[missing, 'dispatch'].nunique()} counter dispatch(es) have no kernel dispatch record; not attached"
                )
            )
            counter_rows = counter_rows[~missing]
        counter_rows["row"] = counter_rows["row"].astype(np.int64)
        wide = counter_rows.pivot_table(index="row", columns="metric", values="value", aggfunc="sum")
        for counter, column in rc.KIB_COUNTERS.items():
            if counter in wide.columns:
                col = np.full(n, np.nan)
                col[wide.index.to_numpy()] = wide[counter].to_numpy() * 1024.0
                cols[column] = col
        if "dram_read_bytes" in cols and "dram_write_bytes" in cols:
            cols["dram_bytes"] = cols["dram_read_bytes"] + cols["dram_write_bytes"]
        full = {}
        for counter in wide.columns:
            col = np.full(n, np.nan)
            col[wide.index.to_numpy()] = wide[counter].to_numpy()
            full[str(counter)] = col
        cols.update(rc.flops_columns(full, n))

    kernels, new_id = schema.make_table_mapped("kernels", n, cols)
    frames = []
    if counter_rows is not None and len(counter_rows):
        rows = counter_rows
        frames.append(_metric_table(new_id[rows["row"].to_numpy()], rows))
    launch = {"scratch": (scratch.astype(np.float64), scratch.astype(str).astype(object), "byte")}
    if len(sgpr):
        sg = np.where(unknown, -1, sgpr[np.maximum(sym, 0)]).astype(np.float64)
        launch["sgpr"] = (sg, sg.astype(np.int64).astype(str).astype(object), "register")
    frames.append(rc.launch_metrics(new_id, launch))
    metrics = rc.concat_metrics(*frames)

    cpu_slices, api_new = _table("cpu_slices", api_cols)
    gpu_ops, op_new = _table("gpu_ops", op_cols)
    flows = _flows(kernels, cols, new_id, op_cols, op_new, api_cols, api_new)

    extra: dict[str, Any] = rc.clock_extra(base)
    node_raw = meta_raw.get("node")
    node: dict[str, Any] = node_raw if isinstance(node_raw, dict) else {}
    if node.get("hostname"):
        extra["host"] = node["hostname"]
    if pid >= 0:
        extra["pid"] = pid
    command = meta_raw.get("command")
    if isinstance(command, list) and command:
        extra["command"] = " ".join(str(c) for c in command)
    if isinstance(meta_raw.get("init_time"), int) and base is not None:
        extra["profiler start"] = f"{(meta_raw['init_time'] - base) / 1e9:+.6f} s from the first event"
    extra["stream"] = stream_note
    if counter_rows is not None and len(counter_rows):
        extra["counters"] = ", ".join(sorted(set(counter_rows["metric"].tolist())))
    version = _version(meta_raw)
    meta = TraceMeta(
        path=str(path),
        source_format="rocprofv3-json",
        format_label="rocprofv3 JSON (rocprofiler-sdk-tool)",
        tool="rocprofv3 (rocprofiler-sdk)",
        tool_version=version,
        origin_ns=None,
        warnings=warnings,
        extra=extra,
    )
    return Trace(
        meta=meta,
        kernels=kernels,
        gpu_ops=gpu_ops,
        cpu_slices=cpu_slices,
        flows=flows,
        devices=rc.devices_table(dev_rows),
        metrics=metrics,
    )


def _map(keys: np.ndarray, mapping: dict[int, int]) -> np.ndarray:
    uniq, inv = np.unique(keys, return_inverse=True)
    return np.array([mapping.get(int(u), -1) for u in uniq], dtype=np.int32)[inv]


def _version(meta: dict[str, Any]) -> str:
    """A version the metadata states, if any (the 2025 sample states none)."""
    for key in ("rocprofiler_sdk_version", "rocprofiler-sdk-version", "version", "tool_version", "rocm_version"):
        v = meta.get(key)
        if isinstance(v, (str, int, float)) and str(v):
            return str(v)
        if isinstance(v, dict) and {"major", "minor"} <= set(v):
            return ".".join(str(v[k]) for k in ("major", "minor", "patch") if k in v)
    return ""


def _counters(path: Path, entry: ToolEntry, warnings: list[Diagnostic]) -> tuple[pd.DataFrame | None, tuple[Any, ...] | None]:
    """Long rows (dispatch, metric, value, text) from callback counter records, and the kernel
    columns those records describe (used when there is no kernel trace)."""
    recs = entry.callback_records.counter_collection
    if not recs:
        return None, None
    names = {c.id.handle: c.name for c in entry.counters}
    disp, metric, value = [], [], []
    for r in recs:
        d = r.dispatch_data.dispatch_info.dispatch_id
        sums: dict[str, float] = {}
        for v in r.records:
            name = names.get(v.counter_id.handle, f"counter {v.counter_id.handle}")
            sums[name] = sums.get(name, 0.0) + v.value  # dimension instances of one counter
        for name, total in sums.items():
            disp.append(d)
            metric.append(name)
            value.append(total)
    rows = pd.DataFrame({"dispatch": np.array(disp, dtype=np.int64), "metric": np.array(metric, dtype=object), "value": np.array(value, dtype=np.float64)})
    rows["text"] = [repr(float(v)) for v in rows["value"]]
    m = len(recs)
    info = [r.dispatch_data.dispatch_info for r in recs]
    start = np.fromiter((r.dispatch_data.start_timestamp for r in recs), np.int64, m)
    end = np.fromiter((r.dispatch_data.end_timestamp for r in recs), np.int64, m)
    serialised = bool((start <= 0).all())
    order = np.argsort(np.fromiter((i.dispatch_id for i in info), np.int64, m), kind="stable")
    if serialised:
        start = np.empty(m, dtype=np.int64)
        start[order] = np.arange(m, dtype=np.int64) * NOMINAL_NS
        end = start + NOMINAL_NS
        warnings.append(
            Diagnostic.warning(
                "serialised",
                path,
                "counter records without timestamps: kernels are laid end to end in dispatch order, "
                f"{NOMINAL_NS // 1000} µs each; their durations are not measured",
            )
        )
    wg = [np.fromiter((getattr(i.workgroup_size, a) for i in info), np.int64, m) for a in "xyz"]
    grid = [np.fromiter((getattr(i.grid_size, a) for i in info), np.int64, m) for a in "xyz"]
    cols: dict[str, Any] = {
        "start": start,
        "end": end,
        "tid": np.fromiter((r.thread_id for r in recs), np.int64, m),
        "correlation": np.fromiter((r.dispatch_data.correlation_id.internal for r in recs), np.int64, m),
        "stream": np.fromiter((i.queue_id.handle for i in info), np.int64, m),
        "shared_mem": np.fromiter((i.group_segment_size for i in info), np.int64, m),
    }
    cols["correlation"] = np.where(cols["correlation"] > 0, cols["correlation"], -1)
    for k, a in enumerate("xyz"):
        cols[f"grid_{a}"] = rc.ceil_div(grid[k], wg[k])
        cols[f"block_{a}"] = wg[k]
    kernel_id = np.fromiter((i.kernel_id for i in info), np.int64, m)
    dispatch = np.fromiter((i.dispatch_id for i in info), np.int64, m)
    agent = np.fromiter((i.agent_id.handle for i in info), np.int64, m)
    scratch = np.fromiter((i.private_segment_size for i in info), np.int64, m)
    return rows, (kernel_id, dispatch, agent, cols, scratch, serialised)


def _metric_table(kernel_ids: np.ndarray, rows: pd.DataFrame) -> pd.DataFrame:
    metric = rows["metric"].to_numpy(dtype=object)
    upper = np.array([str(m).upper() for m in metric], dtype=object)
    scale = np.where(np.isin(upper, list(rc.KIB_COUNTERS)), 1024.0, 1.0)
    units = np.array([rc.counter_unit(str(m)) for m in metric], dtype=object)
    n = len(rows)
    order = np.lexsort((np.arange(n), kernel_ids))
    return schema.make_table(
        "metrics",
        n,
        {
            "kernel": kernel_ids[order],
            "section": pd.Categorical(np.full(n, rc.SECTION, dtype=object)),
            "metric": pd.Categorical(metric[order]),
            "unit": pd.Categorical(units[order]),
            "value": (rows["value"].to_numpy(dtype=np.float64) * scale)[order],
            "text": rows["text"].to_numpy(dtype=object)[order],
        },
    )


def _api(entry: ToolEntry, pid: int) -> dict[str, Any] | None:
    kinds = entry.strings.buffer_records
    markers = {kv.key: kv.value for kv in entry.strings.marker_api}
    groups = (
        entry.buffer_records.hip_api,
        entry.buffer_records.hsa_api,
        entry.buffer_records.marker_api,
        entry.buffer_records.rccl_api,
    )
    recs = [r for g in groups for r in g]
    if not recs:
        return None
    m = len(recs)

    def kind_name(k: int) -> str:
        return kinds[k].kind if 0 <= k < len(kinds) else ""

    def op_name(k: int, op: int) -> str:
        ops = kinds[k].operations if 0 <= k < len(kinds) else []
        return ops[op] if 0 <= op < len(ops) else f"operation {op}"

    names, cats = [], []
    for r in recs:
        kname = kind_name(r.kind)
        if kname.startswith("MARKER") and r.correlation_id.internal in markers:
            names.append(markers[r.correlation_id.internal])
        else:
            names.append(op_name(r.kind, r.operation))
        cats.append(_category(kname))
    start = np.fromiter((r.start_timestamp for r in recs), np.int64, m)
    end = np.fromiter((r.end_timestamp for r in recs), np.int64, m)
    end = np.maximum(end, start)
    tid = np.fromiter((r.thread_id for r in recs), np.int64, m)
    corr = np.fromiter((r.correlation_id.internal for r in recs), np.int64, m)
    return {
        "name": pd.Categorical(np.array(names, dtype=object)),
        "category": pd.Categorical(np.array(cats, dtype=object)),
        "start": start,
        "end": end,
        "tid": tid,
        "pid": np.full(m, pid, dtype=np.int64),
        "correlation": np.where(corr > 0, corr, -1),
        "depth": nesting_depth(start, end, tid),
    }


def _category(kind: str) -> str:
    if kind.startswith("HIP"):
        return "runtime"
    if kind.startswith("HSA"):
        return "driver"
    if kind.startswith("MARKER"):
        return "annotation"
    return "other"


def _copies(recs: list[CopyRecord], agent_type: dict[int, int], agent_dev: dict[int, int], pid: int) -> dict[str, Any] | None:
    if not recs:
        return None
    m = len(recs)
    direction, device = [], []
    for r in recs:
        s = agent_type.get(r.src_agent_id.handle, 0) == 2
        d = agent_type.get(r.dst_agent_id.handle, 0) == 2
        direction.append({(False, True): "HtoD", (True, False): "DtoH", (True, True): "DtoD", (False, False): "HtoH"}[(s, d)])
        device.append(agent_dev.get(r.dst_agent_id.handle if (d and not s) else r.src_agent_id.handle, -1))
    start = np.fromiter((r.start_timestamp for r in recs), np.int64, m)
    end = np.fromiter((r.end_timestamp for r in recs), np.int64, m)
    corr = np.fromiter((r.correlation_id.internal for r in recs), np.int64, m)
    return {
        "kind": pd.Categorical(np.full(m, "memcpy", dtype=object)),
        "name": pd.Categorical(np.array([f"Memcpy {d}" for d in direction], dtype=object)),
        "direction": pd.Categorical(np.array(direction, dtype=object)),
        "start": start,
        "end": np.maximum(end, start),
        "bytes": np.fromiter((r.bytes for r in recs), np.int64, m),
        "device": np.array(device, dtype=np.int32),
        "pid": np.full(m, pid, dtype=np.int64),
        "correlation": np.where(corr > 0, corr, -1),
    }


def _table(name: str, cols: dict[str, Any] | None) -> tuple[pd.DataFrame, np.ndarray]:
    if cols is None:
        return schema.empty(name), np.array([], dtype=np.int64)
    return schema.make_table_mapped(name, len(cols["start"]), cols)


def _flows(kernels: pd.DataFrame, kcols: dict[str, Any], knew: np.ndarray, ocols: dict[str, Any] | None,
           onew: np.ndarray, acols: dict[str, Any] | None, anew: np.ndarray) -> pd.DataFrame:
    """Kernels and copies -> the HIP (else any) API call with their correlation id."""
    if acols is None:
        return schema.empty("flows")
    corr = acols["correlation"]
    rank = np.where(np.asarray(acols["category"].astype(object)) == "runtime", 0, 1)
    order = np.lexsort((rank, corr))
    first = np.ones(len(order), dtype=bool)
    first[1:] = corr[order][1:] != corr[order][:-1]
    keep = order[first & (corr[order] > 0)]
    call = pd.Series(anew[keep], index=corr[keep])
    src, table, dst, cc = [], [], [], []
    for name, c, new in (("kernels", kcols["correlation"], knew), ("gpu_ops", ocols["correlation"] if ocols else np.array([], dtype=np.int64), onew)):
        hit = call.reindex(c).to_numpy()
        ok = ~np.isnan(hit) & (c > 0)
        src.append(hit[ok].astype(np.int64))
        dst.append(new[np.flatnonzero(ok)])
        table += [name] * int(ok.sum())
        cc.append(c[ok])
    n = len(table)
    return schema.make_table(
        "flows",
        n,
        {"src": np.concatenate(src), "dst_table": pd.Categorical(np.array(table, dtype=object)), "dst": np.concatenate(dst), "correlation": np.concatenate(cc)},
    )


LOADER = LoaderSpec(
    name="rocprofv3-json",
    label=LABEL,
    priority=45,
    sniff=sniff,
    load=load,
)
