"""ROCm profiler loaders on the real rocprof samples (../shared/samples/rocprof).

The numbers these tests compare against come from the tools themselves (rocprof's own
results.stats.csv) or from reading the files independently (csv/json from the standard library),
never from the loaders under test.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.cli import main
from kviewer.core.names import strip_kd
from kviewer.errors import CorruptTrace, LoadCancelled, LoadError
from kviewer.io import load, registry
from kviewer.io.rocprof.common import parse_rocminfo, parse_stats
from kviewer.io.source import read_head

pytestmark = pytest.mark.samples

ROCPROF_LOADERS = {"rocprof-v1-csv", "rocprof-v1-db", "rocprofv2-csv", "rocprofv3-csv", "rocprofv3-json"}

#: every rocprof sample that must load, with what it must hold
LOADABLE = {
    "gunrock_mi300/results.csv": ("rocprof-v1-csv", 56),
    "gunrock_mi300/results.db": ("rocprof-v1-db", 56),
    "hpctraining_finite_difference/results.csv": ("rocprof-v1-csv", 1004),
    "hpctraining_seismic_pmc/data_movement.csv": ("rocprof-v1-csv", 1024),
    "omniperf2022_mi200/timestamps.csv": ("rocprof-v1-csv", 167),
    "omniperf2022_mi200/SQ_LEVEL_WAVES.csv": ("rocprof-v1-csv", 167),
    "rocprofv2_omniperf_mi300x/timestamps.csv": ("rocprofv2-csv", 3),
    "rocprofv3_2025/ps_file_kernel_trace.csv": ("rocprofv3-csv", 3),
    "rocprofv3_2025/counter_collection.csv": ("rocprofv3-csv", 4),
    "rocprofv3_2025": ("rocprofv3-csv", 7),
    "rocprofv3_sdk_docs_2024/kernel_trace.csv": ("rocprofv3-csv", 7),
    "rocprofv3_sdk_docs_2024/counter_collection.csv": ("rocprofv3-csv", 7),
    "rocprofv3_sdk_docs_2024/kernel_names.csv": ("rocprofv3-csv", 4),
    "rocprofv3_sdk_docs_2024/memory_copy_trace.csv": ("rocprofv3-csv", 0),
    "rocprofv3_sdk_docs_2024/hip_runtime_trace.csv": ("rocprofv3-csv", 0),
    "rocprofv3_sdk_docs_2024/hip_compile_trace.csv": ("rocprofv3-csv", 0),
    "rocprofv3_sdk_docs_2024/hsa_api_trace.csv": ("rocprofv3-csv", 0),
    "rocprofv3_sdk_docs_2024/marker_api_trace.csv": ("rocprofv3-csv", 0),
    "rocprofv3_sdk_docs_2024": ("rocprofv3-csv", 7),
    "rocprofv3_json_tracelens/908_results.json.gz": ("rocprofv3-json", 43915),
}
#: rocprof samples that are refused on purpose, and why
REFUSED = {
    "hpctraining_finite_difference/results.json": (CorruptTrace, "not a complete trace"),
    "kokkos_hip_stats/results.hip_stats.csv": (LoadError, "no per-dispatch start times"),
    "rocprofv3_sdk_docs_2024/hip_api_stats.csv": (LoadError, "no per-dispatch start times"),
}


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # the loaders are under test, not the trace cache
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(scope="module")
def rp(samples: Path) -> Path:
    return samples / "rocprof"


#: kernel statistics files: open as a summary without a timeline (tests/io/test_rocprof_stats.py)
SUMMARY_ONLY = {"gunrock_mi300/results.stats.csv", "hpctraining_finite_difference/results.stats.csv", "kokkos_hip_stats/results.stats.csv"}


def test_every_rocprof_sample_is_listed(rp: Path) -> None:
    """A new sample must be added to LOADABLE, SUMMARY_ONLY or REFUSED (the only other file is rocminfo text)."""
    files = {str(p.relative_to(rp)) for p in rp.rglob("*") if p.is_file()}
    assert files - set(LOADABLE) - set(REFUSED) - SUMMARY_ONLY == {"gunrock_mi300/results.sysinfo.txt"}


@pytest.mark.parametrize("rel", sorted(LOADABLE))
def test_sample_loads(rp: Path, rel: str) -> None:
    path = rp / rel
    fmt, n_kernels = LOADABLE[rel]
    assert registry.detect(path).name == fmt
    trace = load(path)
    trace.validate()
    assert trace.meta.source_format == fmt
    assert trace.meta.tool.startswith("rocprof")
    assert trace.meta.origin_ns is None and "ns" in trace.meta.extra.get("clock", "ns (not epoch)")
    assert len(trace.kernels) == n_kernels
    assert len(trace.kernels) + len(trace.gpu_ops) + len(trace.cpu_slices) > 0
    k = trace.kernels
    if len(k):
        assert (k["name"].astype(str) != "").all()
        assert not k["name"].astype(str).str.endswith(".kd").any()
        assert (k["dur"] >= 0).all() and (k["start"] >= 0).all()
        assert (np.diff(k["start"].to_numpy()) >= 0).all()
        assert set(k["device"]) <= set(trace.devices["id"])
        assert (trace.devices["vendor"] == "AMD").all()
        assert (k["grid_x"] > 0).all() and (k["block_x"] > 0).all()


@pytest.mark.parametrize("rel", sorted(REFUSED))
def test_refused_with_a_clear_typed_error(rp: Path, rel: str) -> None:
    error, words = REFUSED[rel]
    with pytest.raises(error, match=words) as info:
        load(rp / rel)
    assert str(rp / rel) in str(info.value)
    assert info.value.recognised  # recognised as a rocprof file, not "unknown format"


@pytest.mark.parametrize("run", ["gunrock_mi300", "hpctraining_finite_difference"])
@pytest.mark.parametrize("source", ["results.csv", "results.db"])
def test_summary_equals_rocprof_stats(rp: Path, run: str, source: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`kviewer summary results.csv --format csv` against rocprof's own results.stats.csv."""
    path = rp / run / source
    if not path.exists():
        pytest.skip(f"{run} has no {source}")
    assert main(["summary", str(path), "--format", "csv", "-q"]) == 0
    ours = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    stats = parse_stats((rp / run / "results.stats.csv").read_bytes(), rp / run / "results.stats.csv")
    theirs = {strip_kd(r.name): (r.calls, r.total_ns) for r in stats}
    assert len(theirs) == len(stats)  # names stay distinct after the suffix is removed
    got = {row.name: (row.count, row.total_ns) for row in ours.itertuples()}
    assert got == theirs


def test_stats_parsed_from_the_right(rp: Path) -> None:
    """Kokkos names hold unquoted commas: the last four fields are the numbers."""
    path = rp / "kokkos_hip_stats/results.stats.csv"
    rows = parse_stats(path.read_bytes(), path)
    assert len(rows) == len(path.read_text().strip().splitlines()) - 1
    assert any("," in r.name and r.name.startswith("void Kokkos::") for r in rows)
    unknown = [r for r in rows if r.name == "Unknown command type"]
    assert len(unknown) == 1 and unknown[0].calls == 4 and unknown[0].total_ns == 0
    # the percentages rocprof printed agree with calls/totals parsed this way
    with open(path, newline="") as f:
        lines = f.read().splitlines()[1:]
    total = sum(r.total_ns for r in rows)
    for r, line in zip(rows, lines):
        pct = float(line.rsplit(",", 1)[1])
        assert r.total_ns / total * 100 == pytest.approx(pct, abs=1e-9)


def test_csv_and_db_give_the_same_kernels(rp: Path) -> None:
    a = load(rp / "gunrock_mi300/results.csv").kernels
    b = load(rp / "gunrock_mi300/results.db").kernels
    cols = ["name", "start", "end", "device", "stream", "grid_x", "block_x", "registers", "shared_mem"]
    pd.testing.assert_frame_equal(a[cols].astype({"name": str}), b[cols].astype({"name": str}))


def test_v1_kernel_columns_match_the_file(rp: Path) -> None:
    path = rp / "gunrock_mi300/results.csv"
    raw = pd.read_csv(path)
    trace = load(path)
    k = trace.kernels
    base = raw["BeginNs"].min()
    assert trace.meta.extra["time_base_ns"] == base
    order = np.argsort(raw["BeginNs"].to_numpy(), kind="stable")
    raw = raw.iloc[order].reset_index(drop=True)
    assert (k["start"].to_numpy() == (raw["BeginNs"] - base).to_numpy()).all()
    assert (k["dur"].to_numpy() == raw["DurationNs"].to_numpy()).all()
    assert (k["name"].astype(str).to_numpy() == [strip_kd(n) for n in raw["KernelName"]]).all()
    assert (k["grid_x"].to_numpy() * k["block_x"].to_numpy() == raw["grd"].to_numpy()).all()
    assert (k["shared_mem"].to_numpy() == raw["lds"].to_numpy()).all()
    assert (k["registers"].to_numpy() == (raw["arch_vgpr"] + raw["accum_vgpr"]).to_numpy()).all()
    assert (k["device"] == 2).all() and (k["pid"] == 2033096).all()


def test_sysinfo_beside_results_names_the_device(rp: Path) -> None:
    trace = load(rp / "gunrock_mi300/results.csv")
    dev = trace.devices.iloc[0]
    assert dev["id"] == 2 and dev["architecture"] == "gfx942" and dev["sm_count"] == 304
    assert dev["memory_bytes"] == 201310208 * 1024
    assert dev["sm_clock_hz"] == 2100e6
    agents = parse_rocminfo((rp / "gunrock_mi300/results.sysinfo.txt").read_text())
    assert [a.fields["Device Type"] for a in agents] == ["CPU"] * 2 + ["GPU"] * 8
    assert "\x1b" not in "".join(v for a in agents for v in a.fields.values())


def test_counters_land_on_kernels(rp: Path) -> None:
    """data_movement.csv: FETCH_SIZE/WRITE_SIZE (KiB) -> metrics (bytes) and the DRAM columns."""
    path = rp / "hpctraining_seismic_pmc/data_movement.csv"
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    trace = load(path)
    k = trace.kernels
    m = trace.metrics
    assert k["serialised"].all()
    assert "serialised" in {w.kind for w in trace.meta.warnings}
    # laid end to end in dispatch (Index) order
    assert (k["name"].astype(str).to_numpy() == [strip_kd(r["KernelName"]) for r in rows]).all()
    assert (k["end"].to_numpy()[:-1] == k["start"].to_numpy()[1:]).all()
    fetch = m[(m["metric"] == "FETCH_SIZE") & (m["section"] == "rocprof")]
    assert len(fetch) == len(rows) == 1024
    expected = np.array([float(r["FETCH_SIZE"]) * 1024 for r in rows])
    assert np.allclose(fetch.sort_values("kernel")["value"].to_numpy(), expected, rtol=0, atol=1e-6)
    assert (fetch["unit"] == "byte").all()
    assert list(fetch.sort_values("kernel")["text"]) == [r["FETCH_SIZE"] for r in rows]
    assert np.allclose(k["dram_read_bytes"].to_numpy(), expected)
    write = np.array([float(r["WRITE_SIZE"]) * 1024 for r in rows])
    assert np.allclose(k["dram_write_bytes"].to_numpy(), write)
    assert np.allclose(k["dram_bytes"].to_numpy(), expected + write)
    assert set(m.loc[m["section"] == "rocprof", "metric"].astype(str)) == {
        "FETCH_SIZE", "WRITE_SIZE", "TCP_TOTAL_CACHE_ACCESSES_sum", "TCP_TCC_READ_REQ_sum", "TCP_TCC_WRITE_REQ_sum",
    }


def test_counters_after_timestamps_and_non_monotonic_dispatch(rp: Path) -> None:
    """SQ_LEVEL_WAVES.csv: counters before DispatchNs..CompleteNs; DispatchNs > BeginNs in it."""
    path = rp / "omniperf2022_mi200/SQ_LEVEL_WAVES.csv"
    raw = pd.read_csv(path)
    trace = load(path)
    m = trace.metrics[trace.metrics["section"] == "rocprof"]
    counters = list(raw.columns[16:25])
    assert sorted(set(m["metric"].astype(str))) == sorted(counters)
    assert len(m) == 9 * 167
    # each counter row sits on the kernel with that dispatch's BeginNs
    k = trace.kernels
    base = raw["BeginNs"].min()
    for _, r in raw.sample(10, random_state=1).iterrows():
        kid = int(np.flatnonzero(k["start"].to_numpy() == r["BeginNs"] - base)[0])
        got = m[(m["kernel"] == kid) & (m["metric"] == "SQ_WAVES")]["value"]
        assert float(got.iloc[0]) == r["SQ_WAVES"]
    assert (k["dur"] >= 0).all() and not k["serialised"].any()


def test_rocprofv3_json_all_dispatches_named(rp: Path) -> None:
    """43,915 dispatches, names through kernel_symbols[kernel_id], checked against stdlib json."""
    path = rp / "rocprofv3_json_tracelens/908_results.json.gz"
    with gzip.open(path) as f:
        tool = json.load(f)["rocprofiler-sdk-tool"][0]
    symbols = {s["kernel_id"]: s["formatted_kernel_name"] for s in tool["kernel_symbols"]}
    count: Counter[str] = Counter()
    total: defaultdict[str, int] = defaultdict(int)
    for r in tool["buffer_records"]["kernel_dispatch"]:
        name = strip_kd(symbols[r["dispatch_info"]["kernel_id"]])
        count[name] += 1
        total[name] += r["end_timestamp"] - r["start_timestamp"]
    trace = load(path)
    k = trace.kernels
    assert len(k) == 43915
    assert (k["name"].astype(str) != "").all()
    g = k.groupby(k["name"].astype(str))["dur"].agg(["count", "sum"])
    assert g["count"].to_dict() == dict(count)
    assert g["sum"].to_dict() == dict(total)
    devices = trace.devices
    assert len(devices) == 8 and set(devices["architecture"]) == {"gfx950"}
    assert set(devices["name"]) == {"AMD Instinct MI350X"} and set(devices["sm_count"]) == {256}
    assert (k["device"] == 0).all()


@pytest.mark.parametrize("rel", sorted(LOADABLE))
def test_cli_info_shows_tool_and_device(rp: Path, rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(rp / rel), "-q"]) == 0
    out = capsys.readouterr().out
    tool = next(line for line in out.splitlines() if line.startswith("tool:"))
    assert "rocprof" in tool
    if LOADABLE[rel][1] or "memory_copy" in rel:
        devices = out.split("devices:", 1)[1].splitlines()
        assert int(devices[0]) >= 1 and devices[1].lstrip().startswith("[")


def test_cli_kernels_columns(rp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(rp / "gunrock_mi300/results.csv"), "--format", "csv", "-q"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split(",")
    assert header[:6] == ["name", "start_ns", "end_ns", "dur_ns", "device", "stream"]
    assert len(pd.read_csv(io.StringIO(out))) == 56


def test_cli_refusal_is_one_line_exit_2(rp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(rp / "hpctraining_finite_difference/results.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "rocprof v1" in err and "results.csv" in err


def test_folder_joins_counters_to_kernels_by_dispatch(rp: Path) -> None:
    folder = rp / "rocprofv3_sdk_docs_2024"
    trace = load(folder)
    k, m = trace.kernels, trace.metrics
    with open(folder / "counter_collection.csv", newline="") as f:
        counters = {int(r["Dispatch_Id"]): (r["Kernel_Name"], float(r["Counter_Value"])) for r in csv.DictReader(f)}
    with open(folder / "kernel_trace.csv", newline="") as f:
        kernels = list(csv.DictReader(f))
    base = trace.meta.extra["time_base_ns"]
    sq = m[(m["metric"] == "SQ_WAVES") & (m["section"] == "rocprof")]
    assert len(sq) == len(counters) == 7
    for r in kernels:
        kid = int(np.flatnonzero(k["start"].to_numpy() == int(r["Start_Timestamp"]) - base)[0])
        name, value = counters[int(r["Dispatch_Id"])]
        assert k["name"].iloc[kid] == strip_kd(name) == strip_kd(r["Kernel_Name"])
        assert sq[sq["kernel"] == kid]["value"].tolist() == [value]
    # kernel_names.csv is another run's counters: not attached, and said so
    assert any(w.kind == "inconsistent" and Path(w.file).name == "kernel_names.csv" for w in trace.meta.warnings)
    assert len(trace.gpu_ops) == 2 and set(trace.gpu_ops["direction"]) == {"HtoD", "DtoH"}
    assert set(trace.cpu_slices["category"]) == {"runtime", "driver", "annotation"}
    assert "hip_api_stats.csv" in trace.meta.extra["not loaded"]


def test_v3_grid_counts_workgroups(rp: Path) -> None:
    trace = load(rp / "rocprofv3_sdk_docs_2024/kernel_trace.csv")
    k = trace.kernels
    # Grid_Size 1024 x 1024 work-items, Workgroup_Size 64 x 1 -> 16 x 1024 workgroups
    assert set(zip(k["grid_x"], k["grid_y"], k["grid_z"], k["block_x"])) == {(16, 1024, 1, 64)}


def test_v3_agent_label_and_stream(rp: Path) -> None:
    trace = load(rp / "rocprofv3_2025/ps_file_kernel_trace.csv")
    assert trace.meta.extra["agents"] == "Agent 2 = device 0"
    # Stream_Id is all 0 in this file (not recorded): the HSA queue is the stream
    assert set(trace.kernels["stream"]) == {2}
    assert set(trace.kernels["registers"]) == {8}  # VGPR_Count 4 + Accum_VGPR_Count 4


def test_inputs_are_not_modified(rp: Path) -> None:
    paths = [rp / "gunrock_mi300/results.db", rp / "gunrock_mi300/results.csv"]
    before = [(p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths]
    for p in paths:
        load(p)
    assert before == [(p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in paths]
    assert not (rp / "gunrock_mi300/results.db-journal").exists()


def test_cancel(rp: Path) -> None:
    token = registry.CancelToken()
    token.cancel()
    for rel in ("gunrock_mi300/results.csv", "rocprofv3_json_tracelens/908_results.json.gz", "rocprofv3_sdk_docs_2024"):
        with pytest.raises(LoadCancelled):
            registry.detect(rp / rel).load(rp / rel, lambda f, m: None, token)


def test_sniffers_refuse_other_formats(samples: Path) -> None:
    others = [p for d in ("ncu", "torch", "nsys") for p in (samples / d).rglob("*") if p.is_file()]
    assert others
    for p in others:
        spec = None
        try:
            spec = registry.detect(p)
        except LoadError:
            pass
        assert spec is None or spec.name not in ROCPROF_LOADERS, p
    head = read_head(samples / "ncu" / "metrics.csv")
    from kviewer.io.rocprof import v1_csv as rocprof_csv, v2_csv as rocprofv2_csv, v3_csv as rocprofv3_csv, v3_json as rocprof_json

    for mod in (rocprof_csv, rocprofv2_csv, rocprofv3_csv, rocprof_json):
        assert not mod.sniff(head, Path("x.csv"))
        assert not mod.sniff(b"a,b,c\n1,2,3\n", Path("x.csv"))
        assert not mod.sniff(b'{"traceEvents": [{"ph": "X", "ts": 1}]}', Path("x.json"))
