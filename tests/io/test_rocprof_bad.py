"""ROCm loaders on damaged input (real files cut or edited in tmp_path), on record kinds the real
samples lack (small documents written here, marked as such), and the shared helpers."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.errors import CorruptTrace, LoadError, TruncatedTrace, UnsupportedFormat
from kviewer.io import load, registry
from kviewer.core.intervals import nesting_depth

pytestmark = pytest.mark.samples


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


@pytest.fixture(scope="module")
def gunrock(samples: Path) -> bytes:
    return (samples / "rocprof/gunrock_mi300/results.csv").read_bytes()


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_unsorted_rows_and_upper_case_unquoted_header(tmp_path: Path, gunrock: bytes) -> None:
    """Rows in any order and the header in any spelling give the same kernels."""
    reference = load(_write(tmp_path, "results.csv", gunrock)).kernels
    header, *rows = gunrock.rstrip(b"\n").split(b"\n")
    rng = np.random.default_rng(7)
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    upper = header.replace(b'"', b"").upper()
    again = load(_write(tmp_path, "shuffled.csv", b"\n".join([upper, *shuffled]) + b"\n")).kernels
    cols = ["name", "start", "end", "device", "stream", "grid_x", "block_x", "registers"]
    assert (again[cols].astype({"name": str}).to_numpy() == reference[cols].astype({"name": str}).to_numpy()).all()


def test_last_row_cut_in_a_number_loads_the_rest(tmp_path: Path, gunrock: bytes) -> None:
    body = gunrock.rstrip(b"\n")
    cut = body[: body.rfind(b",", 0, len(body) - 30)]  # the last row loses its last fields
    trace = load(_write(tmp_path, "results.csv", cut))
    assert len(trace.kernels) == 55
    assert "truncated" in {w.kind for w in trace.meta.warnings}


def test_last_row_cut_inside_a_quoted_name(tmp_path: Path, gunrock: bytes) -> None:
    last = gunrock.rstrip(b"\n").rfind(b"\n")
    quote = gunrock.index(b'"', last) + 40  # inside the last row's KernelName
    trace = load(_write(tmp_path, "results.csv", gunrock[:quote]))
    assert len(trace.kernels) == 55
    assert "truncated" in {w.kind for w in trace.meta.warnings}, trace.meta.warnings


def test_gzipped_and_cut_gzip(tmp_path: Path, gunrock: bytes) -> None:
    blob = gzip.compress(gunrock)
    assert len(load(_write(tmp_path, "results.csv.gz", blob)).kernels) == 56
    trace = load(_write(tmp_path, "cut.csv.gz", blob[: len(blob) * 2 // 3]))
    assert 0 < len(trace.kernels) < 56 and "truncated" in {w.kind for w in trace.meta.warnings}


def test_garbage_row_names_the_row(tmp_path: Path, gunrock: bytes) -> None:
    lines = gunrock.split(b"\n")
    fields = lines[5].split(b",")
    lines[5] = b",".join(fields[:-3] + [b"garbage"] + fields[-2:])  # EndNs of row 5
    with pytest.raises(CorruptTrace, match=r"row 5 \(line 6\).*EndNs.*not a number") as info:
        load(_write(tmp_path, "results.csv", b"\n".join(lines)))
    assert info.value.recognised == "rocprof v1 results.csv"


def test_row_with_extra_fields(tmp_path: Path, gunrock: bytes) -> None:
    lines = gunrock.split(b"\n")
    lines[3] += b",1,2"
    with pytest.raises(CorruptTrace, match="malformed CSV"):
        load(_write(tmp_path, "results.csv", b"\n".join(lines)))


def test_header_missing_columns(tmp_path: Path, samples: Path) -> None:
    # v1 without EndNs: BeginNs alone is no interval
    raw = pd.read_csv(samples / "rocprof/gunrock_mi300/results.csv").drop(columns=["EndNs"])
    p = tmp_path / "results.csv"
    raw.to_csv(p, index=False)
    with pytest.raises(CorruptTrace, match="BeginNs / EndNs"):
        load(p)
    raw.drop(columns=["grd"]).to_csv(p, index=False)  # no longer a rocprof header at all
    with pytest.raises(UnsupportedFormat):
        load(p)


def test_v2_header_missing_end(tmp_path: Path, samples: Path) -> None:
    text = (samples / "rocprof/rocprofv2_omniperf_mi300x/timestamps.csv").read_text()
    data = text.replace(",End_Timestamp", ",Not_End")
    with pytest.raises(CorruptTrace, match="lacks the column.*End_Timestamp"):
        load(_write(tmp_path, "timestamps.csv", data.encode()))


def test_header_only(tmp_path: Path, gunrock: bytes) -> None:
    with pytest.raises(LoadError, match="no kernel dispatches"):
        load(_write(tmp_path, "results.csv", gunrock.split(b"\n", 1)[0] + b"\n"))


def test_v3_garbage_timestamp(tmp_path: Path, samples: Path) -> None:
    text = (samples / "rocprof/rocprofv3_2025/ps_file_kernel_trace.csv").read_text().splitlines()
    text[2] = text[2].replace("1986623975909003", "12x4")
    with pytest.raises(CorruptTrace, match="row 2.*Start_Timestamp"):
        load(_write(tmp_path, "k_kernel_trace.csv", "\n".join(text).encode()))


def test_agent_info_alone_is_refused(tmp_path: Path) -> None:
    p = _write(tmp_path, "1_agent_info.csv", AGENT_INFO.encode())
    with pytest.raises(LoadError, match="devices only"):
        load(p)


def test_folder_without_rocprof_csvs(tmp_path: Path) -> None:
    _write(tmp_path, "a.csv", b"x,y\n1,2\n")
    with pytest.raises(UnsupportedFormat):
        load(tmp_path)


# ---------------------------------------------------------------------------------------------
# rocprofv3 agent_info.csv (documented header; no real sample has one)

AGENT_INFO = (
    '"Node_Id","Logical_Node_Id","Agent_Type","Cpu_Cores_Count","Simd_Count","Wave_Front_Size",'
    '"Cu_Count","Max_Engine_Clk_Fcompute","Name","Product_Name"\n'
    '0,0,"CPU",64,0,0,64,0,"AMD EPYC","AMD EPYC"\n'
    '1,1,"CPU",64,0,0,64,0,"AMD EPYC","AMD EPYC"\n'
    '2,2,"GPU",0,1216,64,304,2100,"gfx942","AMD Instinct MI300X"\n'
)


def test_folder_with_agent_info_names_devices(tmp_path: Path, samples: Path) -> None:
    src = samples / "rocprof/rocprofv3_2025/ps_file_kernel_trace.csv"
    shutil.copy(src, tmp_path / "ps_file_kernel_trace.csv")
    _write(tmp_path, "ps_file_agent_info.csv", AGENT_INFO.encode())
    trace = load(tmp_path)
    dev = trace.devices.iloc[0]
    assert (dev["id"], dev["name"], dev["architecture"], dev["sm_count"]) == (0, "AMD Instinct MI300X", "gfx942", 304)
    assert (trace.kernels["device"] == 0).all()  # "Agent 2" is node 2, the first GPU


def test_folder_links_launches_by_correlation(tmp_path: Path, samples: Path) -> None:
    """The real 2025 kernel trace plus a HIP/HSA API trace of the same process (written here: no
    sample pairs them) -> one flow per kernel, from the HIP call even when an HSA call shares the id."""
    shutil.copy(samples / "rocprof/rocprofv3_2025/ps_file_kernel_trace.csv", tmp_path)
    t0 = 1986623975868304
    api = ['"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"']
    for corr, start in ((1, t0 - 9000), (2, t0 + 30000), (3, t0 + 55000)):
        api.append(f'"HIP_RUNTIME_API","hipLaunchKernel",281643,281643,{corr},{start},{start + 4000}')
    api.append(f'"HSA_CORE_API","hsa_signal_store_screlease",281643,281643,2,{t0 + 31000},{t0 + 31500}')
    _write(tmp_path, "ps_file_hip_api_trace.csv", ("\n".join(api) + "\n").encode())
    trace = load(tmp_path)
    f, c = trace.flows, trace.cpu_slices
    assert len(f) == 3 and set(f["dst_table"].astype(str)) == {"kernels"}
    assert set(c.loc[f["src"], "name"].astype(str)) == {"hipLaunchKernel"}
    assert sorted(f["correlation"]) == [1, 2, 3] and sorted(f["dst"]) == [0, 1, 2]
    # the HSA call runs inside the second hipLaunchKernel on that thread
    assert c.loc[c["name"] == "hsa_signal_store_screlease", "depth"].tolist() == [1]
    assert set(c["pid"]) == {281643}


# ---------------------------------------------------------------------------------------------
# rocprofv3 JSON: the record kinds the real sample lacks (API calls, copies, markers, counters),
# in a small document with the layout rocprofiler-sdk's own tests read


def _doc() -> dict:
    disp = lambda did, kid, corr, t0, t1: {
        "thread_id": 10, "correlation_id": {"internal": corr, "external": 0},
        "start_timestamp": t0, "end_timestamp": t1, "stream_id": {"handle": 0},
        "dispatch_info": {"agent_id": {"handle": 22}, "queue_id": {"handle": 5}, "kernel_id": kid,
                          "dispatch_id": did, "private_segment_size": 0, "group_segment_size": 1024,
                          "workgroup_size": {"x": 256, "y": 1, "z": 1}, "grid_size": {"x": 4096, "y": 2, "z": 1}},
    }
    return {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 77, "init_time": 900, "command": ["./app"]},
        "agents": [
            {"id": {"handle": 11}, "type": 1, "name": "cpu", "product_name": "cpu", "cu_count": 8, "node_id": 0, "gpu_index": -1},
            {"id": {"handle": 22}, "type": 2, "name": "gfx942", "product_name": "AMD Instinct MI300X",
             "cu_count": 304, "node_id": 1, "gpu_index": 0, "max_engine_clk_fcompute": 2100,
             "mem_banks": [{"size_in_bytes": 1 << 30, "mem_clk_max": 1300, "width": 8192}]},
        ],
        "counters": [{"id": {"handle": 5}, "name": "FETCH_SIZE"}, {"id": {"handle": 6}, "name": "SQ_WAVES"}],
        "strings": {
            "buffer_records": [{"kind": "NONE", "operations": []},
                               {"kind": "HIP_RUNTIME_API", "operations": ["hipMemcpy", "hipLaunchKernel"]},
                               {"kind": "MARKER_CORE_API", "operations": ["roctxRangePush"]},
                               {"kind": "MEMORY_COPY", "operations": ["NONE", "HOST_TO_DEVICE"]}],
            "marker_api": [{"key": 9, "value": "step 1"}],
        },
        "kernel_symbols": [{"kernel_id": 0, "formatted_kernel_name": ""},
                           {"kernel_id": 1, "formatted_kernel_name": "my_kernel(float*)", "kernel_name": "_Z9my_kernelPf.kd",
                            "sgpr_count": 16, "arch_vgpr_count": 12, "accum_vgpr_count": 4}],
        "buffer_records": {
            "kernel_dispatch": [disp(2, 1, 3, 2000, 2600), disp(1, 1, 2, 1000, 1500)],
            "hip_api": [
                {"kind": 1, "operation": 0, "thread_id": 10, "correlation_id": {"internal": 1}, "start_timestamp": 500, "end_timestamp": 990},
                {"kind": 1, "operation": 1, "thread_id": 10, "correlation_id": {"internal": 2}, "start_timestamp": 995, "end_timestamp": 999},
                {"kind": 1, "operation": 1, "thread_id": 10, "correlation_id": {"internal": 3}, "start_timestamp": 1001, "end_timestamp": 1010},
            ],
            "marker_api": [{"kind": 2, "operation": 0, "thread_id": 10, "correlation_id": {"internal": 9}, "start_timestamp": 400, "end_timestamp": 3000}],
            "memory_copy": [{"kind": 3, "operation": 1, "correlation_id": {"internal": 1}, "start_timestamp": 600, "end_timestamp": 900,
                             "src_agent_id": {"handle": 11}, "dst_agent_id": {"handle": 22}, "bytes": 4096}],
        },
        "callback_records": {"counter_collection": [
            {"dispatch_data": {"dispatch_info": {"dispatch_id": 1, "kernel_id": 1, "agent_id": {"handle": 22}}},
             "records": [{"counter_id": {"handle": 5}, "value": 1.5}, {"counter_id": {"handle": 5}, "value": 0.5},
                         {"counter_id": {"handle": 6}, "value": 64.0}]},
        ]},
    }]}


def test_json_records_the_sample_lacks(tmp_path: Path) -> None:
    trace = load(_write(tmp_path, "77_results.json", json.dumps(_doc()).encode()))
    trace.validate()
    k = trace.kernels
    assert list(k["name"].astype(str)) == ["my_kernel(float*)"] * 2
    assert list(k["start"]) == [600, 1600] and list(k["dur"]) == [500, 600]  # base: marker at 400
    assert list(k["grid_x"]) == [16, 16] and list(k["grid_y"]) == [2, 2] and list(k["registers"]) == [16, 16]
    assert list(k["shared_mem"]) == [1024, 1024] and set(k["pid"]) == {77}
    # FETCH_SIZE summed over its two dimension instances, KiB -> bytes, on dispatch 1 only
    assert k["dram_read_bytes"].iloc[0] == 2048.0 and np.isnan(k["dram_read_bytes"].iloc[1])
    m = trace.metrics[trace.metrics["section"] == "rocprof"]
    assert sorted(zip(m["metric"].astype(str), m["value"], m["kernel"])) == [("FETCH_SIZE", 2048.0, 0), ("SQ_WAVES", 64.0, 0)]
    c = trace.cpu_slices
    assert list(c["name"].astype(str)) == ["step 1", "hipMemcpy", "hipLaunchKernel", "hipLaunchKernel"]
    assert list(c["category"].astype(str)) == ["annotation", "runtime", "runtime", "runtime"]
    assert list(c["depth"]) == [0, 1, 1, 1]
    op = trace.gpu_ops.iloc[0]
    assert (op["direction"], op["bytes"], op["device"], op["name"]) == ("HtoD", 4096, 0, "Memcpy HtoD")
    flows = sorted(zip(trace.flows["dst_table"].astype(str), trace.flows["correlation"], trace.flows["src"], trace.flows["dst"]))
    assert flows == [("gpu_ops", 1, 1, 0), ("kernels", 2, 2, 0), ("kernels", 3, 3, 1)]
    dev = trace.devices.iloc[0]
    assert (dev["name"], dev["architecture"], dev["sm_count"], dev["mem_bus_width"]) == ("AMD Instinct MI300X", "gfx942", 304, 8192)


def test_json_counters_without_kernel_trace_are_serialised(tmp_path: Path) -> None:
    doc = _doc()
    doc["rocprofiler-sdk-tool"][0]["buffer_records"] = {}
    trace = load(_write(tmp_path, "r.json", json.dumps(doc).encode()))
    assert len(trace.kernels) == 1 and trace.kernels["serialised"].all()
    assert "serialised" in {w.kind for w in trace.meta.warnings}


def test_json_cut_and_wrong_layout(tmp_path: Path, samples: Path) -> None:
    with gzip.open(samples / "rocprof/rocprofv3_json_tracelens/908_results.json.gz") as f:
        data = f.read(3_000_000)
    with pytest.raises(TruncatedTrace, match="ends early"):
        load(_write(tmp_path, "cut.json", data))
    with pytest.raises(CorruptTrace, match="layout"):
        load(_write(tmp_path, "bad.json", b'{"rocprofiler-sdk-tool": 5}'))
    with pytest.raises(LoadError, match="no kernel dispatches"):
        load(_write(tmp_path, "empty.json", b'{"rocprofiler-sdk-tool": [{}]}'))


def test_v1_fragment_sniffed_not_kineto(tmp_path: Path) -> None:
    p = _write(tmp_path, "results.json", b',{"args":{"name":"COPY"},"ph":"M","pid":1,"name":"process_name"}\n')
    assert registry.detect(p).name == "rocprofv3-json"
    with pytest.raises(CorruptTrace, match="not a complete trace"):
        load(p)


# ---------------------------------------------------------------------------------------------
# helpers


def test_nesting_depth() -> None:
    #           A [0,100)   B [10,50) in A   C [20,30) in B   D [60,70) in A   E [95,120) overlaps A: one level down
    start = np.array([0, 10, 20, 60, 95, 0])
    end = np.array([100, 50, 30, 70, 120, 5])
    tid = np.array([1, 1, 1, 1, 1, 2])
    assert nesting_depth(start, end, tid).tolist() == [0, 1, 2, 1, 1, 0]
