"""The PyTorch profiler (Kineto JSON) loader, checked against the files' own events.

Every reference number here comes from parsing the file independently with the stdlib ``json``
module: kernel counts and total durations per name (``round(dur * 1000)`` ns), memcpy/memset
counts and bytes, start times, launch/kernel pairs.
"""

from __future__ import annotations

import collections
import gzip
import json
import lzma
import random
import threading
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kviewer.cli import main as cli_main
from kviewer.errors import (
    CorruptTrace,
    LoadCancelled,
    LoadError,
    TruncatedTrace,
    UnsupportedFormat,
)
from kviewer.io import CancelToken, detect, load
from kviewer.io import torch as kineto
from kviewer.io.source import HEAD_SIZE, read_head
from kviewer.core.intervals import nesting_depth

# every PyTorch profiler trace in ../shared/samples/torch (the big one has its own test)
SHARED = [
    "torch/triton_example.json.gz",
    "torch/benchmark_result_493459_1694039959_trace.json.gz",
    "torch/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "torch/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "torch/sampled_rank-0.json.gz",
    "torch/worker0.1623143089861.pt.trace.json.gz",
    "torch/tracelens_h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz",
    "torch/tracelens_mi210/gpu_only_trace.json.gz",
    "torch/h200_llm_block_eager.pt.trace.json.gz",
    "torch/h200_llm_block_compiled.pt.trace.json.gz",
]
BUNDLED = ["h200_llm_block_eager.pt.trace.json.gz", "h200_llm_block_compiled.pt.trace.json.gz"]
BIG = "torch/h200_llm_train_big.pt.trace.json.xz"

KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load from the file every time (the trace cache is tested on its own)."""
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(params=SHARED + [f"bundled:{b}" for b in BUNDLED], ids=lambda p: p.split("/")[-1][:40])
def trace_path(request: pytest.FixtureRequest, samples: Path, sample_traces: Path) -> Path:
    name: str = request.param
    if name.startswith("bundled:"):
        return sample_traces / name.split(":", 1)[1]
    return samples / name


# ---------------------------------------------------------------------------------------------
# an independent reading of the files (stdlib json)


def decompressed(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw.startswith(b"\x1f\x8b"):
        return gzip.decompress(raw)
    if raw.startswith(b"\xfd7zXZ"):
        return lzma.decompress(raw)
    return raw


def reference(path: Path) -> dict[str, Any]:
    return json.loads(decompressed(path))


def numeric(v: Any) -> bool:
    return isinstance(v, int) or (isinstance(v, str) and any(c.isdigit() for c in v))


def complete(events: list[dict[str, Any]], cats: set[str] | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e.get("ph") == "X" and (cats is None or e.get("cat") in cats)]


def ns(us: float) -> int:
    return round(us * 1000)


def kernel_stats(events: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    stats: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for e in complete(events, KERNEL_CATS):
        stats[e["name"]][0] += 1
        stats[e["name"]][1] += ns(e["dur"])
    return {k: (v[0], v[1]) for k, v in stats.items()}


def loaded_stats(trace: Any) -> dict[str, tuple[int, int]]:
    k = trace.kernels
    g = k.groupby(k["name"].astype(str), observed=True)["dur"]
    return {str(name): (int(c), int(s)) for name, c, s in zip(g.size().index, g.size(), g.sum())}


# ---------------------------------------------------------------------------------------------
# every sample


def test_loads_with_schema(trace_path: Path) -> None:
    trace = load(trace_path)
    trace.validate()
    assert trace.meta.source_format == "torch"
    assert trace.meta.format_label.startswith("PyTorch profiler (Kineto) JSON")
    assert trace.meta.tool == "PyTorch Profiler"
    assert trace.meta.tool_version.startswith("schema 1")
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        df = trace.table(name)
        assert np.all(np.diff(df["start"].to_numpy()) >= 0), f"{name} not sorted by start"
        assert np.array_equal(df["id"].to_numpy(), np.arange(len(df)))
        assert np.array_equal(df["end"].to_numpy(), (df["start"] + df["dur"]).to_numpy())


def test_kernels_per_name_match_the_file(trace_path: Path) -> None:
    """Count and total duration per kernel name, to the nanosecond."""
    expected = kernel_stats(reference(trace_path)["traceEvents"])
    assert loaded_stats(load(trace_path)) == expected


def test_kernel_times_match_the_file(trace_path: Path) -> None:
    doc = reference(trace_path)
    base = doc.get("baseTimeNanoseconds", 0)
    expected = sorted((ns(e["ts"]) + base, ns(e["dur"])) for e in complete(doc["traceEvents"], KERNEL_CATS))
    trace = load(trace_path)
    origin = trace.meta.origin_ns or 0
    got = sorted(zip((trace.kernels["start"] + origin).tolist(), trace.kernels["dur"].tolist()))
    assert got == expected
    if "baseTimeNanoseconds" in doc:
        # the origin is baseTimeNanoseconds moved to the trace's first whole µs (times start near 0)
        shift = trace.meta.origin_ns - doc["baseTimeNanoseconds"]
        assert shift >= 0 and shift % 1000 == 0
        assert min(int(trace.table(t)["start"].min()) for t in ("kernels", "cpu_slices") if len(trace.table(t))) < 10**10


def test_gpu_ops_match_the_file(trace_path: Path) -> None:
    events = reference(trace_path)["traceEvents"]
    trace = load(trace_path)
    ops = trace.gpu_ops
    for kind, cats in (("memcpy", MEMCPY_CATS), ("memset", MEMSET_CATS)):
        ref = complete(events, cats)
        mine = ops[ops["kind"] == kind]
        assert len(mine) == len(ref)
        assert int(mine["dur"].sum()) == sum(ns(e["dur"]) for e in ref)
        with_bytes = [e["args"]["bytes"] for e in ref if "bytes" in e.get("args", {})]
        if len(with_bytes) == len(ref):
            assert int(mine["bytes"].sum()) == sum(with_bytes)
    copies = ops[ops["kind"] == "memcpy"]
    for name, direction in zip(copies["name"].astype(str), copies["direction"].astype(str)):
        assert direction and direction in name, (name, direction)
    assert set(ops[ops["kind"] == "memset"]["direction"].astype(str)) <= {""}


def test_cpu_slices_match_the_file(trace_path: Path) -> None:
    events = reference(trace_path)["traceEvents"]
    gpu = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
    ref = [e for e in complete(events) if e.get("cat") not in gpu and numeric(e.get("pid"))]
    cpu = load(trace_path).cpu_slices
    assert len(cpu) == len(ref)
    assert collections.Counter(cpu["name"].astype(str)) == collections.Counter(e["name"] for e in ref)
    assert int(cpu["dur"].sum()) == sum(ns(e["dur"]) for e in ref)


def test_every_launched_kernel_has_a_flow(trace_path: Path) -> None:
    """A kernel or GPU op whose correlation id has a runtime/driver call gets a link to it."""
    events = reference(trace_path)["traceEvents"]
    launches = {e["args"]["correlation"] for e in complete(events, LAUNCH_CATS) if "correlation" in e.get("args", {})}
    gpu = complete(events, KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS)
    linked = sum(1 for e in gpu if e.get("args", {}).get("correlation") in launches)
    trace = load(trace_path)
    flows = trace.flows
    assert len(flows) == linked
    cpu = trace.cpu_slices
    for table in ("kernels", "gpu_ops"):
        f = flows[flows["dst_table"] == table]
        dst = trace.table(table).iloc[f["dst"].to_numpy()]
        src = cpu.iloc[f["src"].to_numpy()]
        assert np.array_equal(src["correlation"].to_numpy(), dst["correlation"].to_numpy())
        assert np.array_equal(f["correlation"].to_numpy(), dst["correlation"].to_numpy())
        assert set(src["category"].astype(str)) <= {"runtime", "driver"}
        assert np.array_equal(dst["pid"].to_numpy(), src["pid"].to_numpy())


def test_depth_is_nesting_on_each_track(trace_path: Path) -> None:
    """The loaded depth follows the stack rule (:func:`brute_depth`, one slice at a time) on each
    track of the real trace (a CPU thread, or a GPU annotation track)."""
    cpu = load(trace_path).cpu_slices
    gpu_track = cpu["category"].astype(str).isin(["gpu_annotation", "sync"]).to_numpy()
    keys = list(zip(cpu["pid"].tolist(), cpu["tid"].tolist(), gpu_track.tolist()))
    number = {k: i for i, k in enumerate(sorted(set(keys)))}
    track = [number[k] for k in keys]
    start, end = cpu["start"].tolist(), cpu["end"].tolist()
    assert cpu["depth"].tolist() == brute_depth(track, start, end)


def brute_depth(track: list[int], start: list[int], end: list[int]) -> list[int]:
    """The stack rule one slice at a time: per track in (start, longest first) order, pop what
    ended by my start; my depth is what is left open (a partial overlap goes one level down)."""
    order = sorted(range(len(start)), key=lambda i: (track[i], start[i], -end[i]))
    depth = [0] * len(start)
    stack: list[int] = []
    current = None
    for i in order:
        if track[i] != current:
            stack, current = [], track[i]
        while stack and stack[-1] <= start[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(end[i])
    return depth


@pytest.mark.parametrize("presorted", [True, False])
@pytest.mark.parametrize("ties", [True, False])
def test_depth_with_ties_and_zero_length_slices(presorted: bool, ties: bool) -> None:
    rng = random.Random(7)
    # coarse starts give many slices starting together; distinct starts give none
    starts = [rng.randrange(0, 200, 5) for _ in range(400)] if ties else rng.sample(range(100_000), 400)
    spans = []
    for start in starts:
        spans.append((rng.randrange(3), start, start + rng.choice([0, 0, 5, 10, 40, 120, 5000])))
    if presorted:
        spans.sort(key=lambda x: x[1])
    track, start, end = (np.array(v, dtype=np.int64) for v in zip(*spans))
    got = nesting_depth(start, end, track)
    assert got.tolist() == brute_depth(track.tolist(), start.tolist(), end.tolist())


def test_cli_info_and_summary(trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["info", str(trace_path), "-q"]) == 0
    out = capsys.readouterr().out
    assert "PyTorch profiler (Kineto) JSON" in out
    assert cli_main(["summary", str(trace_path), "--format", "csv", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "name,count,total_ns,avg_ns,med_ns,min_ns,max_ns,std_ns,time_pct"
    expected = kernel_stats(reference(trace_path)["traceEvents"])
    assert len(lines) - 1 == len(expected)
    import csv

    rows = list(csv.DictReader(lines))
    assert sum(int(r["count"]) for r in rows) == sum(c for c, _ in expected.values())
    assert sum(int(r["total_ns"]) for r in rows) == sum(t for _, t in expected.values())


# ---------------------------------------------------------------------------------------------
# variants


def test_2021_schema(samples: Path) -> None:
    path = samples / "torch/worker0.1623143089861.pt.trace.json.gz"
    trace = load(path)
    assert "2021 schema" in trace.meta.format_label
    k = trace.kernels
    # GPU tids are "stream 7" strings; streams and external ids ("external id") are read
    assert set(k["stream"]) == {7}
    assert (k["external_id"] >= 0).all()
    assert collections.Counter(trace.cpu_slices["category"].astype(str)) == {"op": 23646, "runtime": 11923}
    # a known pair: cudaMemcpyAsync (correlation 34417) -> Memcpy HtoD of 19,267,584 bytes
    f = trace.flows[trace.flows["correlation"] == 34417]
    assert len(f) == 1 and f["dst_table"].iloc[0] == "gpu_ops"
    call = trace.cpu_slices.iloc[int(f["src"].iloc[0])]
    op = trace.gpu_ops.iloc[int(f["dst"].iloc[0])]
    assert call["name"] == "cudaMemcpyAsync"
    assert (op["name"], op["bytes"], op["direction"], op["pid"]) == ("Memcpy HtoD (Pageable -> Device)", 19267584, "HtoD", 25738)
    # absolute epoch µs: the origin is the first event, start = (ts - origin) exactly
    assert trace.meta.origin_ns == 1623142623460072 * 1000
    assert call["start"] + trace.meta.origin_ns == 1623142623529088 * 1000
    assert trace.meta.extra["timestamps"] == "absolute epoch µs"


def test_known_launch_pair(sample_traces: Path) -> None:
    trace = load(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    f = trace.flows[trace.flows["correlation"] == 27]
    call = trace.cpu_slices.iloc[int(f["src"].iloc[0])]
    kernel = trace.kernels.iloc[int(f["dst"].iloc[0])]
    assert call["name"] == "cudaLaunchKernel" and call["category"] == "runtime"
    base = 1790857026000000000  # the file's baseTimeNanoseconds
    assert call["start"] + trace.meta.origin_ns == base + round(5345956842337.413 * 1000)
    assert kernel["short_name"] == "at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
    assert (kernel["grid_x"], kernel["grid_y"], kernel["block_x"], kernel["block_y"]) == (4096, 1, 32, 4)
    assert (kernel["registers"], kernel["shared_mem"], kernel["stream"], kernel["device"]) == (32, 24, 7, 0)
    assert (kernel["pid"], kernel["tid"], kernel["external_id"]) == (478, 478, 3)
    assert kernel["dur"] == 18848
    dev = trace.devices.iloc[0]
    assert (dev["name"], dev["vendor"], dev["compute_capability"], dev["sm_count"], dev["memory_bytes"]) == (
        "NVIDIA H200",
        "NVIDIA",
        "9.0",
        132,
        150109880320,
    )
    assert trace.meta.extra["cuda_runtime_version"] == "13.0"
    # shapes and dtypes of ops are kept as JSON text
    ln = trace.cpu_slices[trace.cpu_slices["name"] == "aten::layer_norm"].iloc[0]
    assert json.loads(ln["input_dims"])[0] == [4, 1024, 2048]
    assert json.loads(ln["input_types"])[0] == "c10::BFloat16"


def test_cpu_only_trace_has_a_rank(samples: Path) -> None:
    trace = load(samples / "torch/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    assert len(trace.kernels) == 0 and len(trace.gpu_ops) == 0
    assert trace.meta.ranks == [34]
    assert set(trace.cpu_slices["rank"]) == {34}
    assert "CPU only" in trace.meta.format_label
    assert trace.meta.extra["distributed_world_size"] == 300


def test_distributed_rank_on_every_table(samples: Path) -> None:
    trace = load(samples / "torch/sampled_rank-0.json.gz")
    assert trace.meta.ranks == [0]
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        assert set(trace.table(name)["rank"]) == {0}


def test_single_line_file(samples: Path) -> None:
    path = samples / "torch/sampled_rank-0.json.gz"
    assert decompressed(path).count(b"\n") <= 1
    trace = load(path)
    assert len(trace.kernels) == 1154


@pytest.mark.parametrize(
    "name",
    [
        "torch/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz",
        "torch/tracelens_mi210/gpu_only_trace.json.gz",
    ],
)
def test_rocm_vendor(samples: Path, name: str) -> None:
    path = samples / name
    doc = reference(path)
    trace = load(path)
    assert "ROCm" in trace.meta.format_label
    says_amd = "roctracer_version" in doc or any("AMD" in d["name"] for d in doc["deviceProperties"])
    assert says_amd
    assert set(trace.devices["vendor"]) == {"AMD"}
    assert (trace.devices["compute_capability"] == "").all()  # a gfx major/minor is not a CUDA CC
    names = {d["name"] for d in doc["deviceProperties"]}
    assert set(trace.devices["name"]) == names


def test_rocm_fills_from_the_hip_call(samples: Path) -> None:
    """roctracer kernels lack grid/block and memcpys their byte count: the HIP call has them."""
    path = samples / "torch/mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    events = reference(path)["traceEvents"]
    calls = {e["args"]["correlation"]: e["args"] for e in complete(events, {"cuda_runtime"})}
    trace = load(path)
    for _, k in trace.kernels.iterrows():
        call = calls[k["correlation"]]
        assert [k["grid_x"], k["grid_y"], k["grid_z"]] == call["grid"]
        assert [k["block_x"], k["block_y"], k["block_z"]] == call["block"]
    for _, op in trace.gpu_ops.iterrows():
        assert op["bytes"] == int(calls[op["correlation"]]["size"])
    assert "HIP runtime" not in trace.meta.tool_version  # this file does not say
    mi300 = load(samples / "torch/tracelens_mi300/gaunernst_bert-small-uncased__1016001.json.gz")
    assert "HIP runtime 6.4.43483" in mi300.meta.tool_version and "roctracer 4.1" in mi300.meta.tool_version


def test_gpu_only_trace(samples: Path) -> None:
    trace = load(samples / "torch/tracelens_mi210/gpu_only_trace.json.gz")
    assert "GPU only" in trace.meta.format_label
    assert set(trace.cpu_slices["category"].astype(str)) == {"runtime"}
    assert len(trace.flows) == len(trace.kernels) == 562


def test_gpu_annotations_and_syncs_keep_their_gpu_track(samples: Path) -> None:
    path = samples / "torch/benchmark_result_493459_1694039959_trace.json.gz"
    syncs = complete(reference(path)["traceEvents"], {"cuda_sync"})
    cpu = load(path).cpu_slices
    mine = cpu[cpu["category"] == "sync"]
    assert len(mine) == len(syncs) == 41
    assert set(zip(mine["pid"], mine["tid"])) == {(e["pid"], e["tid"]) for e in syncs}
    path = samples / "torch/tracelens_h100/gaunernst_bert-small-uncased__1016001.json.gz"
    cpu = load(path).cpu_slices
    ann = cpu[cpu["category"] == "gpu_annotation"]
    assert list(ann["name"]) == ["ProfilerStep#6"] and list(ann["pid"]) == [0] and list(ann["tid"]) == [7]
    assert list(ann["depth"]) == [0]
    # python frames share the host thread's track with ops and runtime calls, and nest
    assert cpu[cpu["category"] == "python"]["depth"].max() > 10


def test_key_order_does_not_matter(tmp_path: Path, sample_traces: Path) -> None:
    """The header keys may come after the events, the events after megabytes of other keys, and
    an object holding a "traceEvents" key of its own may come first."""
    path = sample_traces / "h200_llm_block_eager.pt.trace.json.gz"
    doc = json.loads(decompressed(path))
    normal = load(path)
    events = doc.pop("traceEvents")
    variants = {
        "events_first": {"traceEvents": events, **doc},
        "long_block_first": {"metadata": {"note": "x" * (12 << 20)}, **doc, "traceEvents": events},
        "nested_key_first": {"metadata": {"traceEvents": [1]}, **doc, "traceEvents": events},
    }
    for name, variant in variants.items():
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(variant))
        # straight to the loader: 12 MB of "x" leave nothing for a 64 KiB sniffer to recognise
        trace = kineto.load(p, lambda f, m: None, CancelToken())
        assert trace.meta.origin_ns == normal.meta.origin_ns, name
        assert trace.meta.tool_version == normal.meta.tool_version, name
        assert trace.devices.equals(normal.devices), name
        assert trace.kernels.equals(normal.kernels), name
        assert trace.cpu_slices.equals(normal.cpu_slices), name
        assert trace.meta.warnings == [], name


def test_flops_arg(tmp_path: Path, sample_traces: Path) -> None:
    """No sample has a ``FLOPs`` arg (with_flops did not fire for these ops), so add one to a
    real file the way Kineto writes it."""
    doc = json.loads(decompressed(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"))
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    op["args"]["FLOPs"] = 17179869184
    path = tmp_path / "with_flops.json"
    path.write_text(json.dumps(doc))
    cpu = load(path).cpu_slices
    row = cpu[(cpu["name"] == "aten::mm") & (cpu["external_id"] == op["args"]["External id"])].iloc[0]
    assert row["flops"] == 17179869184
    assert int(cpu["flops"].notna().sum()) == 1


# ---------------------------------------------------------------------------------------------
# truncated files


def complete_prefix_events(text: bytes) -> list[dict[str, Any]]:
    """The events of a cut JSON text that are complete, by stdlib raw_decode one at a time."""
    s = text.decode("utf-8", "ignore")
    pos = s.index("[", s.index('"traceEvents"')) + 1
    dec = json.JSONDecoder()
    events = []
    while True:
        while pos < len(s) and s[pos] in " \t\r\n,":
            pos += 1
        try:
            obj, pos = dec.raw_decode(s, pos)
        except json.JSONDecodeError:
            return events
        events.append(obj)


@pytest.mark.parametrize("fraction", [0.07, 0.31, 0.5, 0.77, 0.999])
def test_truncated_file_loads_complete_events(tmp_path: Path, sample_traces: Path, fraction: float) -> None:
    full = decompressed(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    cut = full[: int(len(full) * fraction)]
    path = tmp_path / "cut.pt.trace.json"
    path.write_bytes(cut)
    trace = load(path)
    assert "truncated" in {w.kind for w in trace.meta.warnings}
    events = complete_prefix_events(cut)
    assert loaded_stats(trace) == kernel_stats(events)
    assert len(trace.cpu_slices) == sum(
        1 for e in complete(events) if e.get("cat") not in KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS and numeric(e.get("pid"))
    )


def test_cut_right_after_an_event_and_after_the_list(tmp_path: Path, sample_traces: Path) -> None:
    full = decompressed(sample_traces / "h200_llm_block_compiled.pt.trace.json.gz")
    end_of_list = full.rindex(b"]")
    for cut in (full[: full.index(b"}", len(full) // 2) + 1], full[: end_of_list + 1], full[: end_of_list + 3]):
        path = tmp_path / "cut.json"
        path.write_bytes(cut)
        trace = load(path)
        assert "truncated" in {w.kind for w in trace.meta.warnings}
        assert loaded_stats(trace) == kernel_stats(complete_prefix_events(cut))


def test_truncated_gzip(tmp_path: Path, sample_traces: Path) -> None:
    raw = (sample_traces / "h200_llm_block_eager.pt.trace.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(raw[: int(len(raw) * 0.6)])
    trace = load(path)
    assert "truncated" in {w.kind for w in trace.meta.warnings}
    available = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw[: int(len(raw) * 0.6)])
    assert loaded_stats(trace) == kernel_stats(complete_prefix_events(available))
    assert 0 < len(trace.cpu_slices) < 2489  # Kineto writes host events first, kernels last


def compress(data: bytes, how: str) -> bytes:
    import bz2

    import zstandard

    if how == "gzip-members":  # bgzip-style: several gzip members back to back
        third = len(data) // 3
        return b"".join(gzip.compress(data[i : i + third]) for i in range(0, len(data), third))
    return {
        "plain": lambda d: d,
        "gzip": gzip.compress,
        "xz": lzma.compress,
        "bz2": lambda d: bz2.compress(d, 1),  # 100 kB blocks: a cut file still has whole blocks
        "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    }[how](data)


@pytest.mark.parametrize(
    "how, name",
    [
        # 30 MB of JSON: decoded in many pieces
        ("plain", "torch/worker0.1623143089861.pt.trace.json.gz"),
        ("gzip", "torch/worker0.1623143089861.pt.trace.json.gz"),
        ("gzip-members", "torch/worker0.1623143089861.pt.trace.json.gz"),
        ("zstd", "torch/worker0.1623143089861.pt.trace.json.gz"),
        # slow compressors: a smaller file
        ("xz", "torch/h200_llm_block_eager.pt.trace.json.gz"),
        ("bz2", "torch/h200_llm_block_eager.pt.trace.json.gz"),
    ],
)
def test_every_compression_loads_the_same(tmp_path: Path, samples: Path, how: str, name: str) -> None:
    data = decompressed(samples / name)
    path = tmp_path / f"trace.{how}"
    path.write_bytes(compress(data, how) + (bytes(512) if how == "gzip" else b""))  # + tar-like padding
    trace = load(path)
    assert trace.meta.warnings == []
    events = json.loads(data)["traceEvents"]
    assert loaded_stats(trace) == kernel_stats(events)
    assert len(trace.cpu_slices) == len(complete(events)) - len(complete(events, KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS | {"Trace"}))


@pytest.mark.parametrize("how", ["xz", "bz2", "zstd"])
def test_truncated_compressed_streams(tmp_path: Path, sample_traces: Path, how: str) -> None:
    data = decompressed(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    packed = compress(data, how)
    path = tmp_path / f"cut.{how}"
    path.write_bytes(packed[: int(len(packed) * 0.85)])
    # straight to the loader: detection's 64 KiB head of a cut bz2 is io.source's business
    trace = kineto.load(path, lambda f, m: None, CancelToken())
    assert "truncated" in {w.kind for w in trace.meta.warnings}
    assert 0 < len(trace.cpu_slices) < 2489


def test_cut_before_any_event_is_an_error(tmp_path: Path, sample_traces: Path) -> None:
    full = decompressed(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    path = tmp_path / "header_only.json"
    path.write_bytes(full[: full.index(b'"traceEvents"') + 40])
    with pytest.raises(TruncatedTrace) as err:
        load(path)
    assert str(path) in str(err.value)


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "content",
    [b"", b"   \n", b'{"a": 1}', b"[1, 2, 3]", random.Random(0).randbytes(4096), b'{"traceEvents": 5}', b'{"traceEvents": [1, 2]}'],
    ids=["empty", "blank", "object", "numbers", "random", "not-a-list", "not-events"],
)
def test_bad_input_raises_load_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(LoadError) as err:
        load(path)
    assert str(path) in str(err.value)
    assert type(err.value) in (UnsupportedFormat, CorruptTrace, TruncatedTrace)


@pytest.mark.parametrize(
    "content, error",
    [
        (b"", CorruptTrace),
        (b'{"a": 1}', CorruptTrace),
        (b"[1, 2, 3]", CorruptTrace),
        (b'{"traceEvents": 5}', CorruptTrace),
        (b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": 1', TruncatedTrace),
        (b'{"schemaVersion": 1, "traceEvents": [}', CorruptTrace),
    ],
)
def test_loader_errors_are_typed(tmp_path: Path, content: bytes, error: type) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(error) as err:
        kineto.load(path, lambda f, m: None, CancelToken())
    assert str(path) in str(err.value)


def test_unreadable_path_is_a_load_error(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.json", tmp_path):
        with pytest.raises(LoadError) as err:
            kineto.load(path, lambda f, m: None, CancelToken())
        assert str(path) in str(err.value)


def test_odd_event_types_are_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(
        json.dumps(
            {
                "schemaVersion": 1,
                "traceEvents": [
                    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0.0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"correlation": 3}},
                    {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "soon", "dur": 2},
                    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 1, "dur": 0.5, "args": {"correlation": 3}},
                ],
            }
        )
    )
    trace = load(path)
    assert len(trace.kernels) == 1 and trace.kernels["dur"].iloc[0] == 2000
    assert len(trace.flows) == 1
    assert "skipped" in {w.kind for w in trace.meta.warnings}


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "kviewer-torch-reader"]


def test_cancel(sample_traces: Path, samples: Path) -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(LoadCancelled):
        kineto.load(sample_traces / "h200_llm_block_eager.pt.trace.json.gz", lambda f, m: None, token)
    # cancelled from the progress callback while the reader thread is still decompressing
    token = CancelToken()
    seen: list[float] = []

    def progress(fraction: float, message: str) -> None:
        seen.append(fraction)
        if len(seen) == 2:
            token.cancel()

    with pytest.raises(LoadCancelled):
        kineto.load(samples / "torch/worker0.1623143089861.pt.trace.json.gz", progress, token)
    assert seen[-1] < 0.9
    assert reader_threads() == []


def test_progress_rises_and_no_thread_is_left(samples: Path) -> None:
    seen: list[float] = []
    kineto.load(samples / "torch/worker0.1623143089861.pt.trace.json.gz", lambda f, m: seen.append(f), CancelToken())
    assert len(seen) > 3 and seen == sorted(seen) and 0.0 <= seen[0] and seen[-1] <= 1.0
    assert reader_threads() == []


# ---------------------------------------------------------------------------------------------
# sniffing, on bytes


def test_sniff_claims_every_sample_head(trace_path: Path) -> None:
    head = read_head(trace_path)
    assert kineto.sniff(head, trace_path)
    assert detect(trace_path).name == "torch"


@pytest.mark.parametrize(
    "head",
    [
        b'{"traceEvents": []}',
        b'\xef\xbb\xbf  {"schemaVersion": 1, "deviceProperties": [',
        b'{\n  "distributedInfo": {"rank": 3, "pg_config": [' + b"1, " * 30000,
        b'{"displayTimeUnit": "ms", "otherData": {}, "x": [{"ph": "X", "ts": 1.5, "pid": 1, "tid": 1, "name": "a"}',
    ],
    ids=["minimal", "bom", "long-distributedInfo", "chrome-events"],
)
def test_sniff_claims(head: bytes) -> None:
    assert kineto.sniff(head[:HEAD_SIZE], Path("x.json"))


@pytest.mark.parametrize(
    "head",
    [
        b'{"a": 1}',
        b"[1, 2, 3]",
        b"SQLite format 3\x00" + bytes(100),
        b'"Index","KernelName","gpu-id","queue-id"\n1,"k",0,0\n',
        b'{"rocprofiler-sdk-tool": [{"metadata": {"pid": 1}, "traceEvents": []}]}',
        b',{"args":{"name":"CPU"},"ph":"M","pid":0,"name":"process_name"}',
        b"",
    ],
    ids=["object", "array", "sqlite", "csv", "rocprofv3", "rocprof-fragment", "empty"],
)
def test_sniff_refuses(head: bytes) -> None:
    assert not kineto.sniff(head, Path("x.json"))


@pytest.mark.parametrize(
    "name",
    [
        "rocprof/rocprofv3_json_tracelens/908_results.json.gz",
        "rocprof/hpctraining_finite_difference/results.json",
        "rocprof/hpctraining_finite_difference/results.csv",
        "rocprof/gunrock_mi300/results.db",
        "nsys/perlmutter-cloverleaf-cuda.sqlite",
    ],
)
def test_sniff_refuses_other_real_files(samples: Path, name: str) -> None:
    path = samples / name
    assert not kineto.sniff(read_head(path), path)


# ---------------------------------------------------------------------------------------------
# the big trace (153 MB of JSON, xz)


@pytest.mark.samples
def test_big_trace(samples: Path) -> None:
    path = samples / BIG
    if not path.exists():
        pytest.skip(f"{path} not found")
    events = reference(path)["traceEvents"]
    expected = kernel_stats(events)
    n_memcpy = len(complete(events, MEMCPY_CATS))
    n_memset = len(complete(events, MEMSET_CATS))
    del events
    trace = load(path)
    assert sum(c for c, _ in expected.values()) == len(trace.kernels) == 25680
    assert loaded_stats(trace) == expected
    ops = trace.gpu_ops
    assert (int((ops["kind"] == "memcpy").sum()), int((ops["kind"] == "memset").sum())) == (n_memcpy, n_memset)
    assert trace.meta.warnings == []
    assert len(trace.flows) == len(trace.kernels) + len(ops)
