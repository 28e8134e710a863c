"""Every Nsight Compute sample loads; sniffers claim ncu content only; bad input is a typed error."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import pytest

from kviewer.analysis.merge import base_name
from kviewer.errors import CorruptTrace, LoadError, TruncatedTrace
from kviewer.io.ncu import csv_export as ncu_csv
from kviewer.io.ncu import report as ncu_rep
from kviewer.io.ncu.common import parse_number, parse_unit, render_rule_message
from kviewer.io.registry import CancelToken, detect


def _load(module, path: Path):  # type: ignore[no-untyped-def]
    trace = module.load(path, lambda f, m: None, CancelToken())
    trace.validate()
    return trace


# ---------------------------------------------------------------------------------------------
# units (pure)


@pytest.mark.parametrize(
    "unit, base, factor",
    [
        ("", "", 1.0), ("%", "%", 1.0), ("nsecond", "ns", 1.0), ("usecond", "ns", 1e3), ("us", "ns", 1e3),
        ("msecond", "ns", 1e6), ("second", "ns", 1e9), ("hz", "Hz", 1.0), ("Ghz", "Hz", 1e9),
        ("Mhz", "Hz", 1e6), ("cycle/nsecond", "Hz", 1e9), ("cycle/usecond", "Hz", 1e6),
        ("byte", "byte", 1.0), ("Kbyte", "byte", 1e3), ("Mbyte", "byte", 1e6), ("Gbyte", "byte", 1e9),
        ("byte/s", "byte/s", 1.0), ("byte/second", "byte/s", 1.0), ("Mbyte/s", "byte/s", 1e6),
        ("Gbyte/second", "byte/s", 1e9), ("Tbyte/s", "byte/s", 1e12), ("Kbyte/block", "byte/block", 1e3),
        ("inst/cycle", "inst/cycle", 1.0), ("Minst", "inst", 1e6), ("register/thread", "register/thread", 1.0),
        ("%/Kbyte", "%/byte", 1e3), ("SM", "SM", 1.0), ("cycle", "cycle", 1.0),
    ],
)  # fmt: skip
def test_parse_unit(unit: str, base: str, factor: float) -> None:
    got_base, got_factor = parse_unit(unit)
    assert got_base == base
    assert got_factor == pytest.approx(factor, rel=1e-15)


def test_parse_number() -> None:
    assert parse_number("1,073,741,824") == 1_073_741_824
    assert parse_number("21,264.38") == 21264.38
    assert parse_number("3995313115.40") == 3995313115.40
    for text in ("n/a", "no data", "", "PolicySpread", "(128, 1, 1)"):
        assert math.isnan(parse_number(text))


def test_rule_links_render_like_the_csv() -> None:
    msg = "See the @url:CUDA Best Practices Guide:https://docs.nvidia.com/x#occ@ and the @section:LaunchStats:Launch Statistics@."
    assert render_rule_message(msg) == "See the CUDA Best Practices Guide (https://docs.nvidia.com/x#occ) and the Launch Statistics."


# ---------------------------------------------------------------------------------------------
# sniffers on bytes


def test_sniffers_on_bytes(tmp_path: Path) -> None:
    p = tmp_path / "x"
    assert ncu_rep.sniff(b"NVR\x00\x02\x00\x00\x00\x08\x07", p)
    assert not ncu_rep.sniff(b"SQLite format 3\x00", p)
    header = b'"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream"\n'
    assert ncu_csv.sniff(header, p)
    assert ncu_csv.sniff(b"==PROF== Connected to process 1 (/bin/app)\nhello from the app\n" + header, p)
    # rocprof and other CSVs are not ncu's
    assert not ncu_csv.sniff(b'"Index","KernelName","gpu-id","queue-id"\n', p)
    assert not ncu_csv.sniff(b"Kind,Agent_Id,Queue_Id,Kernel_Name\n", p)
    assert not ncu_csv.sniff(b'"ID","Name"\n1,"x"\n', p)


@pytest.mark.samples
def test_sniffers_refuse_other_samples(samples: Path) -> None:
    others = [p for p in (samples / "rocprof").rglob("*") if p.is_file()]
    others += [p for p in (samples / "nsys").glob("*.sqlite")]
    assert len(others) > 10
    for p in others:
        with open(p, "rb") as f:
            head = f.read(64 * 1024)
        assert not ncu_csv.sniff(head, p), p
        assert not ncu_rep.sniff(head, p), p


# ---------------------------------------------------------------------------------------------
# every sample loads


@pytest.fixture(scope="module")
def ncu_dir(samples: Path) -> Path:
    return samples / "ncu"


@pytest.mark.samples
@pytest.mark.parametrize(
    "file, fmt, n, device, arch, version",
    [
        ("CuVectorAddDrv.ncu-rep", "ncu-rep", 1, "NVIDIA GeForce RTX 3070", "sm_86", "2022.3.0.0"),
        ("manual_nvtx.ncu-rep", "ncu-rep", 3, "NVIDIA GeForce RTX 3070", "sm_86", "2022.3.0.0"),
        ("profile_output.ncu-rep", "ncu-rep", 4, "NVIDIA A10G", "sm_86", "2023.1.1.0"),
        ("metrics.csv", "ncu-csv", 9, "", "sm_86", ""),
        ("cublaslt_ncu.log", "ncu-csv", 1, "", "sm_100", ""),
    ],
)
def test_samples_load(ncu_dir: Path, file: str, fmt: str, n: int, device: str, arch: str, version: str) -> None:
    path = ncu_dir / file
    spec = detect(path)
    assert spec.name == fmt
    trace = _load(ncu_rep if fmt == "ncu-rep" else ncu_csv, path)
    assert trace.meta.source_format == fmt
    assert (trace.meta.tool, trace.meta.tool_version) == ("Nsight Compute", version)
    assert len(trace.kernels) == n
    k = trace.kernels
    assert k["serialised"].all()
    assert (k["dur"] > 0).all()
    assert (k["start"].to_numpy()[1:] == k["end"].to_numpy()[:-1]).all()
    assert (k["grid_x"] > 0).all() and (k["block_x"] > 0).all()
    d = trace.devices
    assert len(d) == 1 and d["name"].iloc[0] == device and d["architecture"].iloc[0] == arch
    assert d["vendor"].iloc[0] == "NVIDIA"
    assert len(trace.metrics) >= 5 * n


@pytest.mark.samples
def test_cuvectoradd_values(ncu_dir: Path) -> None:
    t = _load(ncu_rep, ncu_dir / "CuVectorAddDrv.ncu-rep")
    k = t.kernels.iloc[0]
    assert k["name"] == "VecAdd_kernel"
    assert (k["dur"], k["grid_x"], k["block_x"], k["registers"], k["stream"]) == (3232, 196, 256, 16, 7)
    d = t.devices.iloc[0]
    assert (d["sm_count"], d["memory_bytes"], d["sm_clock_hz"], d["mem_bus_width"]) == (46, 8_334_737_408, 1.725e9, 256)


@pytest.mark.samples
def test_nvtx_ranges_kept(ncu_dir: Path) -> None:
    t = _load(ncu_rep, ncu_dir / "manual_nvtx.ncu-rep")
    nvtx = t.metrics[t.metrics["section"] == "nvtx"]
    assert nvtx["text"].tolist() == ["run_test/init_data", "run_test/daxpy", "run_test/check_results"]
    assert t.kernels["stream"].tolist() == [14, 7, 7]
    assert [base_name(n) for n in t.kernels["name"]] == ["init_data_kernel", "daxpy_kernel", "check_results_kernel"]


@pytest.mark.samples
def test_sgemm_flops_rep_vs_csv_counts(ncu_dir: Path) -> None:
    """profile_output.ncu-rep (roofline rates x cycles) and metrics.csv (instruction counts) are
    runs of the same SGEMM kernels (1024^3): both give 2 x 1024^3 FP32 FLOPs."""
    rep = _load(ncu_rep, ncu_dir / "profile_output.ncu-rep").kernels
    csv = _load(ncu_csv, ncu_dir / "metrics.csv").kernels
    by_name = dict(zip(csv["name"].astype(str).map(base_name), csv["flops_fp32"]))
    for name, flops in zip(rep["name"].astype(str).map(base_name), rep["flops_fp32"]):
        assert flops == pytest.approx(2 * 1024**3, rel=2e-3), name
        assert flops == pytest.approx(by_name[name], rel=2e-3), name
    # counts: fadd + fmul + 2 x ffma exactly as metrics.csv prints them
    first = csv.iloc[0]
    assert first["flops_fp32"] == 0 + 1_048_576 + 2 * 1_073_741_824
    assert first["dram_bytes"] == 32_746_880 and first["dur"] == 10_776_576
    # the roofline set collects half precision and tensor pipes too: zero for an FP32 SGEMM
    assert (rep["flops_fp16"] == 0).all() and (rep["flops_tensor"] == 0).all()


@pytest.mark.samples
def test_cublaslt_log(ncu_dir: Path) -> None:
    t = _load(ncu_csv, ncu_dir / "cublaslt_ncu.log")
    assert "captured" in t.meta.format_label
    k = t.kernels.iloc[0]
    assert k["name"].startswith("cutlass3x_sm100_tensorop")
    assert (k["dur"], k["grid_x"], k["grid_y"], k["block_x"], k["registers"]) == (406_240, 9, 32, 384, 168)
    assert k["shared_mem"] == 205_696
    assert k["sm_clock_hz"] == pytest.approx(1239496049.13)
    assert (k["sm_throughput_pct"], k["theoretical_occupancy_pct"], k["achieved_occupancy_pct"]) == (23.59, 18.75, 15.53)
    d = t.devices.iloc[0]
    assert (d["compute_capability"], d["architecture"], d["sm_count"]) == ("10.0", "sm_100", 152)
    rules = t.metrics[t.metrics["section"].astype(str).str.startswith("rule:")]
    assert len(rules) == 8
    imbalance = rules[rules["section"] == "rule:WorkloadImbalance"]
    assert imbalance["metric"].astype(str).unique().tolist() == ["estimated_speedup_global"]
    assert sorted(imbalance["value"]) == [5.818, 5.818, 6.24, 14.55]
    # unknown sections keep the printed label as the metric
    assert "Average DRAM Active Cycles" in set(t.metrics["metric"].astype(str))


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.samples
def test_truncated_rep(ncu_dir: Path, tmp_path: Path) -> None:
    data = (ncu_dir / "CuVectorAddDrv.ncu-rep").read_bytes()
    for size in (10, 1000, 30_000, len(data) - 100):
        bad = tmp_path / f"cut_{size}.ncu-rep"
        bad.write_bytes(data[:size])
        assert detect(bad).name == "ncu-rep"
        with pytest.raises(TruncatedTrace) as err:
            _load(ncu_rep, bad)
        assert str(bad) in str(err.value) and "Nsight Compute report" in str(err.value)


@pytest.mark.samples
def test_gzipped_rep_loads(ncu_dir: Path, tmp_path: Path) -> None:
    gz = tmp_path / "report.ncu-rep.gz"
    gz.write_bytes(gzip.compress((ncu_dir / "CuVectorAddDrv.ncu-rep").read_bytes()))
    assert detect(gz).name == "ncu-rep"
    assert _load(ncu_rep, gz).kernels["dur"].tolist() == [3232]


def test_garbage_after_magic(tmp_path: Path) -> None:
    bad = tmp_path / "garbage.ncu-rep"
    bad.write_bytes(b"NVR\x00" + b"\x10\x00\x00\x00" + b"not a protobuf message at all")
    with pytest.raises(LoadError) as err:
        _load(ncu_rep, bad)
    assert str(bad) in str(err.value)


HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC"'


def test_csv_missing_columns(tmp_path: Path) -> None:
    bad = tmp_path / "missing.csv"
    bad.write_text(HEAD + ',"Section Name","Metric Name","Metric Unit"\n'
                   '"0","1","a","h","k(int)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","S","gpu__time_duration.sum","ns"\n')  # fmt: skip
    assert detect(bad).name == "ncu-csv"
    with pytest.raises(CorruptTrace) as err:
        _load(ncu_csv, bad)
    assert str(bad) in str(err.value) and "Metric Value" in str(err.value)

    no_name = tmp_path / "no_kernel_name.csv"
    no_name.write_text('"ID","Process ID","Kernel Name"\n'.replace(',"Kernel Name"', ',"Kernel"') + '"0","1"\n')
    with pytest.raises(CorruptTrace):
        _load(ncu_csv, no_name)


def test_csv_header_without_rows(tmp_path: Path) -> None:
    bad = tmp_path / "empty.csv"
    bad.write_text("==PROF== Connected to process 1\n" + HEAD + ',"gpu__time_duration.sum"\n')
    with pytest.raises(CorruptTrace) as err:
        _load(ncu_csv, bad)
    assert "no kernel rows" in str(err.value)


def test_csv_raw_page_minimal(tmp_path: Path) -> None:
    """A raw page with auto-scaled units, a units row and application output after the CSV."""
    p = tmp_path / "raw.log"
    p.write_text(
        "==PROF== Connected to process 42 (/bin/app)\n"
        + HEAD + ',"thread Domain:Push/Pop_Range","gpu__time_duration.sum","dram__bytes.sum","gpc__cycles_elapsed.avg.per_second"\n'
        + '"","","","","","","","","","","","","usecond","Mbyte","cycle/nsecond"\n'
        + '"0","42","app","h","void k<1>(int)","1","7","(256, 1, 1)","(1024, 2, 1)","0","8.0","<default>:step_0","1,234.5","2.50","1.41"\n'
        + "app says: done\n"
    )  # fmt: skip
    t = _load(ncu_csv, p)
    k = t.kernels.iloc[0]
    assert (k["dur"], k["grid_x"], k["grid_y"], k["block_x"], k["pid"]) == (1_234_500, 1024, 2, 256, 42)
    assert k["dram_bytes"] == 2.5e6 and k["sm_clock_hz"] == pytest.approx(1.41e9)
    assert t.devices["architecture"].iloc[0] == "sm_80"
    assert "skipped" in {w.kind for w in t.meta.warnings}
    # a column that is not a metric (here an NVTX column) is kept as text, not parsed as a number
    nvtx = t.metrics[t.metrics["section"] == "nvtx"]
    assert nvtx["text"].tolist() == ["<default>:step_0"] and nvtx["value"].isna().all()
