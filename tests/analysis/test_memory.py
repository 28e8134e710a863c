"""Memory: the ``memory`` table and ``kviewer memory`` against the raw files.

The PyTorch trace (profile_memory=True, sample_traces/gpt_train_memory.pt.trace.json.gz, H200) and
its truth (torch.cuda.max_memory_allocated / max_memory_reserved over the profiled steps, in
gpt_train_memory.json) come from the gpu-data run; the Nsight Systems export of the same program
(--cuda-memory-usage=true) is checked against SQL on the export. Counts here are computed from the
raw JSON / SQLite, not through kviewer.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kviewer.analysis.memory import memory_summary
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
KINETO = REPO / "sample_traces" / "gpt_train_memory.pt.trace.json.gz"
TRUTH = REPO / "sample_traces" / "gpt_train_memory.json"
NSYS = REPO / "sample_traces" / "gpt_train_nsys_memory.sqlite.gz"


def _raw_memory(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(REPO)})


def test_kineto_memory_events_all_loaded() -> None:
    raw = _raw_memory(KINETO)
    trace = load(KINETO)
    assert len(trace.memory) == len(raw) > 0
    gpu = [e["args"] for e in raw if e["args"].get("Device Type") == 1]
    m = trace.memory
    assert int((m["device_type"].astype(str) == "cuda").sum()) == len(gpu)
    assert int(m["bytes"].sum()) == sum(e["args"]["Bytes"] for e in raw)


def test_kineto_peak_equals_the_trace_and_torch() -> None:
    raw = [e["args"] for e in _raw_memory(KINETO) if e["args"].get("Device Type") == 1]
    truth = json.loads(TRUTH.read_text())["at_end"]
    res = memory_summary(load(KINETO))
    (dev,) = res.devices
    assert dev.peak_allocated_bytes == max(a["Total Allocated"] for a in raw) == truth["max_memory_allocated"]
    assert dev.peak_reserved_bytes == max(a["Total Reserved"] for a in raw) == truth["max_memory_reserved"]
    assert dev.final_allocated_bytes == raw[-1]["Total Allocated"] == truth["memory_allocated"]


def test_kineto_live_allocations_at_peak_replayed() -> None:
    """Replay the raw events with a dict (address -> bytes) up to the peak: the same live set."""
    events = sorted((e for e in _raw_memory(KINETO) if e["args"].get("Device Type") == 1), key=lambda e: e["ts"])
    peak = max(range(len(events)), key=lambda i: (events[i]["args"]["Total Allocated"], -i))
    live: dict[int, int] = {}
    for e in events[: peak + 1]:
        a = e["args"]
        if a["Bytes"] > 0:
            live[a["Addr"]] = a["Bytes"]
        else:
            live.pop(a["Addr"], None)
    res = memory_summary(load(KINETO))
    (dev,) = res.devices
    assert dev.live_at_peak_bytes == sum(live.values())
    assert sum(o.bytes for o in dev.top_ops_at_peak) == sum(live.values())
    assert sum(o.allocations for o in dev.top_ops_at_peak) == len(live)
    sizes = [a.bytes for a in dev.live_at_peak]
    assert sizes == sorted(live.values(), reverse=True)[: len(sizes)]
    # ops are real op names of the trace, largest first
    assert all(o.op.startswith("aten::") for o in dev.top_ops_at_peak[:5])
    assert [o.bytes for o in dev.top_ops_at_peak] == sorted((o.bytes for o in dev.top_ops_at_peak), reverse=True)


def test_old_schema_totals_unknown_not_zero(samples: Path) -> None:
    """The 2021 schema has Bytes only: the peaks are unknown (None), never 0."""
    path = samples / "torch" / "worker0.1623143089861.pt.trace.json.gz"
    raw = _raw_memory(path)
    trace = load(path)
    assert len(trace.memory) == len(raw)
    res = memory_summary(trace)
    assert res.devices and all(d.peak_allocated_bytes is None and d.peak_reserved_bytes is None for d in res.devices)
    assert sum(d.events for d in res.devices) == sum(1 for e in raw if e["args"].get("Device Type") == 1)


def test_tracelens_h100_peak(samples: Path) -> None:
    path = samples / "torch" / "tracelens_h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    raw = [e["args"] for e in _raw_memory(path) if e["args"].get("Device Type") == 1]
    (dev,) = memory_summary(load(path)).devices
    assert dev.peak_allocated_bytes == max(a["Total Allocated"] for a in raw)
    assert dev.peak_reserved_bytes == max(a["Total Reserved"] for a in raw)


@pytest.fixture(scope="module")
def nsys_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("nsys") / "gpt_train_nsys_memory.sqlite"
    with gzip.open(NSYS) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def test_nsys_memory_usage_events(nsys_db: Path) -> None:
    con = sqlite3.connect(f"file:{nsys_db}?mode=ro", uri=True)
    n = con.execute("select count(*) from CUDA_GPU_MEMORY_USAGE_EVENTS").fetchone()[0]
    # device-resident kinds by their enum label, allocations minus deallocations, in time order
    rows = con.execute(
        "select m.bytes, m.memoryOperationType from CUDA_GPU_MEMORY_USAGE_EVENTS m join ENUM_CUDA_MEM_KIND k on k.id = m.memKind "
        "where k.label in ('Device', 'Device Static', 'Array') order by m.start"
    ).fetchall()
    total = peak = 0
    for b, op in rows:
        total += -b if op == 1 else b
        peak = max(peak, total)
    trace = load(nsys_db)
    assert len(trace.memory) == n
    (dev,) = memory_summary(trace).devices
    assert dev.events == len(rows)
    assert dev.peak_allocated_bytes == peak
    assert dev.peak_reserved_bytes is None  # nsys does not know a caching allocator's reserve
    # every allocation of the caching allocator was a cudaMalloc the export recorded
    mallocs = con.execute(
        "select count(*) from CUDA_GPU_MEMORY_USAGE_EVENTS m join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = m.correlationId "
        "join StringIds s on s.id = r.nameId where s.value like 'cudaMalloc%'"
    ).fetchone()[0]
    assert int((trace.memory["source"].astype(str) == "cudaMalloc").sum()) == mallocs > 0
    con.close()


def test_cli_memory_json_and_csv() -> None:
    raw = [e["args"] for e in _raw_memory(KINETO) if e["args"].get("Device Type") == 1]
    r = _cli("memory", str(KINETO), "-q", "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    (dev,) = doc["devices"]
    assert dev["peak_allocated_bytes"] == max(a["Total Allocated"] for a in raw)
    assert dev["peak_reserved_bytes"] == max(a["Total Reserved"] for a in raw)
    assert isinstance(dev["peak_at_ns"], int) and dev["top_ops_at_peak"][0]["bytes"] > 0
    r = _cli("memory", str(REPO / "sample_traces" / "h200_llm_block_eager.pt.trace.json.gz"), "-q", "--format", "csv")
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("device,")
    r = _cli("memory", str(REPO / "no-such-file.json"), "-q")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_partial_read_equals_full(nsys_db: Path) -> None:
    """`kviewer memory` reads an export's memory events alone: the same table."""
    import pandas as pd

    from kviewer.analysis.memory import MEMORY_READS

    full, part = load(nsys_db), load(nsys_db, tables=MEMORY_READS)
    pd.testing.assert_frame_equal(full.memory, part.memory)
    assert len(part.kernels) == 0  # nothing else was read
