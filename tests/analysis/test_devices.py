"""devices.toml: every number sourced, figures as the datasheets print them, recognition."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.devices import (
    KNOWN_FIELDS,
    OTHER_NUMBER_FIELDS,
    RATE_FIELDS,
    devices_for_trace,
    find_device,
    load_devices,
    recognise,
)
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.errors import AnalysisError
from tests.analysis.device_table import RAW


REPO = Path(__file__).resolve().parents[2]
DEV = load_devices()


def test_repo_resources_is_the_packaged_file() -> None:
    link = REPO / "resources" / "devices.toml"
    assert link.exists()
    assert link.resolve() == (REPO / "kviewer" / "resources" / "devices.toml").resolve()


def test_required_devices_present() -> None:
    need = {
        "v100_sxm2", "a100_sxm4_40gb", "a100_sxm4_80gb", "a100_pcie_40gb", "a100_pcie_80gb", "a10g", "l4", "l40s",
        "h100_sxm", "h100_pcie", "h200", "b200", "t4", "rtx_4090", "rtx_3070", "mi210", "mi250x", "mi300x", "mi325x",
        "mi355x",
    }
    assert need <= set(DEV)


@pytest.mark.parametrize("key", sorted(RAW))
def test_every_number_has_a_source(key: str) -> None:
    row = RAW[key]
    assert set(row) <= KNOWN_FIELDS
    assert "http" in row["source"] and len(row["source"]) > 40, "source must name the document and its URL"
    numbers = [f for f in (*RATE_FIELDS, *OTHER_NUMBER_FIELDS) if f in row]
    assert "dram_gbs" in numbers and any(f in row for f in RATE_FIELDS)
    for f in row.get("sources", {}):
        assert f in row, f"{key}: a source for a field it does not have ({f})"
        assert len(row["sources"][f]) > 8
    for f in row.get("derived", []):
        assert f in row and f in row.get("sources", {}) or "derived" in row["source"], f"{key}.{f}: derived without the arithmetic"
    for f in row.get("sparse_halved", []):
        assert f in row
        assert "sparsity" in row["source"].lower(), f"{key}: halved figures must quote the sparsity footnote"


# Figures as the vendor documents print them (dense; '*' = with sparsity, halved here).
DATASHEET = [
    # H100 datasheet (2023), H100 SXM: "FP64 34 teraFLOPS", "FP32 67 teraFLOPS", "3.35TB/s";
    # H100 whitepaper Table 3: "Peak BF16 Tensor TFLOPS with FP32 Accumulate 989.4/1978.9",
    # "Peak TF32 Tensor TFLOPS 494.7/989.4", "Peak FP8 Tensor TFLOPS ... 1978.9/3957.8"
    ("h100_sxm", "fp64_tflops", 34), ("h100_sxm", "fp32_tflops", 67), ("h100_sxm", "dram_gbs", 3350),
    ("h100_sxm", "bf16_tflops", 989.4), ("h100_sxm", "tf32_tflops", 494.7), ("h100_sxm", "fp8_tflops", 1978.9),
    ("h100_sxm", "sm_count", 132), ("h100_sxm", "l2_mib", 50),
    # H100 PCIe: "BFLOAT16 Tensor Core 1,513 teraFLOPS*", "2TB/s"
    ("h100_pcie", "bf16_tflops", 1513 / 2), ("h100_pcie", "dram_gbs", 2000), ("h100_pcie", "sm_count", 114),
    # H200 datasheet (2024): "FP8 Tensor Core 3,958 TFLOPS*", "BFLOAT16 1,979 TFLOPS*", "4.8TB/s", "141GB"
    ("h200", "fp8_tflops", 3958 / 2), ("h200", "bf16_tflops", 1979 / 2), ("h200", "dram_gbs", 4800),
    ("h200", "fp32_tflops", 67),
    # A100 datasheet: "FP64 9.7 TFLOPS", "TF32 156 TFLOPS | 312 TFLOPS*", "BFLOAT16 312 | 624*",
    # "A100 80GB SXM 2,039GB/s", "A100 80GB PCIe 1,935GB/s", "A100 40GB 1,555GB/s"
    ("a100_sxm4_80gb", "dram_gbs", 2039), ("a100_pcie_80gb", "dram_gbs", 1935), ("a100_sxm4_40gb", "dram_gbs", 1555),
    ("a100_sxm4_40gb", "tf32_tflops", 156), ("a100_pcie_40gb", "bf16_tflops", 312), ("a100_sxm4_80gb", "fp64_tflops", 9.7),
    # V100 datasheet: "Double-Precision 7.8 TFLOPS, Single-Precision 15.7, Tensor Performance 125", "900 GB/sec"
    ("v100_sxm2", "fp64_tflops", 7.8), ("v100_sxm2", "fp16_tflops", 125), ("v100_sxm2", "dram_gbs", 900),
    # T4 datasheet: "Single-Precision 8.1 TFLOPS", "Mixed-Precision (FP16/FP32) 65 TFLOPS", "320+ GB/s"
    ("t4", "fp32_tflops", 8.1), ("t4", "fp16_tflops", 65), ("t4", "dram_gbs", 320),
    # L4 datasheet: "FP8 Tensor Core 485 teraFLOPs*", "FP32 30.3 teraFLOPs", "300GB/s"
    ("l4", "fp8_tflops", 485 / 2), ("l4", "fp32_tflops", 30.3), ("l4", "dram_gbs", 300),
    # L40S datasheet: "BFLOAT16 Tensor Core 362.05 | 733 teraFLOPS*", "FP32 91.6", "864GB/s"
    ("l40s", "bf16_tflops", 362.05), ("l40s", "fp32_tflops", 91.6), ("l40s", "dram_gbs", 864),
    # Ada whitepaper, RTX 4090: "Peak FP32 TFLOPS 82.6", "Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2/330.4"
    ("rtx_4090", "fp32_tflops", 82.6), ("rtx_4090", "bf16_tflops", 165.2), ("rtx_4090", "dram_gbs", 1008),
    # GA102 whitepaper, RTX 3070: "Peak FP32 TFLOPS 20.3", 448 GB/s, 46 SMs
    ("rtx_3070", "fp32_tflops", 20.3), ("rtx_3070", "sm_count", 46), ("rtx_3070", "dram_gbs", 448),
    # MI300X data sheet: "Peak FP16 1307.4 TFLOPs", "Peak FP64 Vector 81.7", "5.3 TB/s", "304 CUs"
    ("mi300x", "fp16_tflops", 1307.4), ("mi300x", "fp64_tflops", 81.7), ("mi300x", "dram_gbs", 5300), ("mi300x", "sm_count", 304),
    # MI325X data sheet: "6 TB/s", "256 GB HBM3E"
    ("mi325x", "dram_gbs", 6000), ("mi325x", "bf16_tflops", 1307.4),
    # MI200 data sheet, MI250X: "Peak FP64 Vector 47.9 TFLOPs", "Peak FP16 383.0", "220 CUs"
    ("mi250x", "fp64_tflops", 47.9), ("mi250x", "fp16_tflops", 383.0), ("mi250x", "sm_count", 220),
    # MI210 brochure: "Peak FP64 Matrix 45.3 TFLOPs", "104 CUs"
    ("mi210", "fp64_tensor_tflops", 45.3), ("mi210", "sm_count", 104),
    # MI355X data sheet: "Peak FP64 Vector 78.6 TFLOPs", "8 TB/s", "256 CUs", peak engine clock 2400 MHz
    ("mi355x", "fp64_tflops", 78.6), ("mi355x", "dram_gbs", 8000), ("mi355x", "boost_clock_mhz", 2400),
    # HGX B200 (per GPU = 8-GPU total / 8): "FP32 600 TFLOPS" -> 75, "FP8 72 PFLOPS*" -> 4500 dense, "64 TB/s" -> 8000
    ("b200", "fp32_tflops", 75), ("b200", "fp8_tflops", 4500), ("b200", "dram_gbs", 8000),
]


@pytest.mark.parametrize("key,field,expected", DATASHEET)
def test_datasheet_figures(key: str, field: str, expected: float) -> None:
    assert RAW[key][field] == pytest.approx(expected, rel=1e-3)


def test_rates_are_consistent_with_units_and_clocks() -> None:
    """FP32 = SMs x FP32 FLOP/clk x clock (NVIDIA); FP16 matrix = CUs x FLOP/clk x clock (AMD)."""
    checked = 0
    for spec in DEV.values():
        if spec.sm_count <= 0 or math.isnan(spec.boost_clock_mhz):
            continue
        if spec.vendor == "NVIDIA":
            per = spec.rates["fp32_tflops"] * 1e12 / (spec.sm_count * spec.boost_clock_mhz * 1e6)
            assert min(abs(per - 128), abs(per - 256)) / per < 0.02, (spec.id, per)
        elif "fp16_tflops" in spec.rates:
            per = spec.rates["fp16_tflops"] * 1e12 / (spec.sm_count * spec.boost_clock_mhz * 1e6)
            assert min(abs(per - x) for x in (1024, 2048, 4096)) / per < 0.01, (spec.id, per)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize(
    "reported,expected",
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("H100 PCIe", "h100_pcie"),
        ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
        ("A100-PCIE-80GB", "a100_pcie_80gb"),
        ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A10", "a10"),
        ("Tesla V100-SXM2-16GB", "v100_sxm2"),
        ("Tesla V100S-PCIE-32GB", "v100s_pcie"),
        ("Tesla T4", "t4"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA GeForce RTX 4090", "rtx_4090"),
        ("NVIDIA GeForce RTX 3070", "rtx_3070"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA H200 NVL", "h200_nvl"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300X VF", "mi300x"),
        ("AMD Instinct MI325X", "mi325x"),
        ("AMD Instinct MI355X", "mi355x"),
        ("AMD Instinct MI350X", "mi350x"),
        ("AMD Instinct MI210", "mi210"),
    ],
)
def test_recognise_names(reported: str, expected: str) -> None:
    rec = recognise(name=reported)
    assert rec.spec is not None and rec.spec.id == expected, rec.how


def test_compute_capability_alone_is_ambiguous_until_sizes_decide() -> None:
    rec = recognise(compute_capability="9.0")
    assert rec.spec is None and rec.ambiguous
    assert {"h100_sxm", "h100_pcie", "h200"} <= {s.id for s in rec.candidates}
    rec = recognise(compute_capability="9.0", sm_count=132)
    assert rec.spec is None and {"h100_sxm", "h200"} <= {s.id for s in rec.candidates}
    # memory as PyTorch reports it (deviceProperties.totalGlobalMem of the H200 sample)
    assert recognise(compute_capability="9.0", sm_count=132, memory_bytes=81559 * 2**20).spec.id == "h100_sxm"  # type: ignore[union-attr]
    assert recognise(compute_capability="9.0", sm_count=114).spec.id == "h100_pcie"  # type: ignore[union-attr]


def test_amd_by_architecture_and_cu_count() -> None:
    assert recognise(architecture="gfx942", sm_count=228).spec.id == "mi300a"  # type: ignore[union-attr]
    assert recognise(architecture="gfx942", sm_count=304, memory_bytes=192 * 2**30).spec.id == "mi300x"  # type: ignore[union-attr]
    assert recognise(architecture="gfx942", sm_count=304, memory_bytes=256 * 2**30).spec.id == "mi325x"  # type: ignore[union-attr]
    assert recognise(architecture="gfx942", sm_count=304).ambiguous  # same compute, different bandwidth
    assert recognise(architecture="gfx90a", sm_count=110).spec.id == "mi250x_gcd"  # type: ignore[union-attr]
    assert recognise(architecture="gfx90a", sm_count=104).spec.id == "mi210"  # type: ignore[union-attr]
    # rocprofv3 sample (908_results.json.gz): product 'AMD Instinct MI350X', gfx950, 256 CUs, 2200 MHz
    assert recognise(architecture="gfx950", sm_count=256, clock_hz=2200e6).spec.id == "mi350x"  # type: ignore[union-attr]
    assert recognise(architecture="gfx950", sm_count=256, clock_hz=2400e6).spec.id == "mi355x"  # type: ignore[union-attr]
    # ROCm names MI300 agents "AMD Radeon Graphics": the name must not decide anything
    rec = recognise(name="AMD Radeon Graphics", architecture="gfx942:sramecc+:xnack-", sm_count=304, memory_bytes=192 * 2**30)
    assert rec.spec is not None and rec.spec.id == "mi300x"
    # an MI250X name on one GCD is the GCD
    assert recognise(name="AMD Instinct MI250X/MI250", architecture="gfx90a", sm_count=110).spec.id == "mi250x_gcd"  # type: ignore[union-attr]


def _trace_with_device(**dev: object) -> Trace:
    devices = make_table("devices", 1, {k: np.array([v], dtype=object if isinstance(v, str) else None) for k, v in {"id": 0, **dev}.items()})
    kernels = make_table("kernels", 1, {"name": ["k"], "short_name": ["k"], "start": [0], "end": [10], "device": [0]})
    return Trace(meta=TraceMeta(path="x.json", source_format="test"), kernels=kernels, devices=devices)


def test_unknown_device_error_says_how_to_pass_device() -> None:
    trace = _trace_with_device(name="Mystery GPU 9000")
    with pytest.raises(AnalysisError, match="--device"):
        devices_for_trace(trace)
    assert devices_for_trace(trace, override="H100 PCIe")[0].id == "h100_pcie"
    assert devices_for_trace(trace, override="h200")[0].id == "h200"
    with pytest.raises(AnalysisError, match="unknown device"):
        find_device("nonsense")
    empty = Trace(meta=TraceMeta(path="y.json", source_format="test"), kernels=trace.kernels)
    with pytest.raises(AnalysisError, match="does not say which GPU"):
        devices_for_trace(empty)


def test_unknown_device_error_carries_file_problem_and_advice_apart() -> None:
    """The window shows the problem and offers a picker: it takes ``problem``, never cuts the text."""
    trace = _trace_with_device(name="Mystery GPU 9000")
    with pytest.raises(AnalysisError) as info:
        devices_for_trace(trace)
    err = info.value
    assert err.path == "x.json" and err.advice is not None and err.advice.startswith("pass --device with one of: ")
    assert "Mystery GPU 9000" in err.problem and "--device" not in err.problem and "x.json" not in err.problem
    assert str(err) == f"x.json: {err.problem}; {err.advice}"  # the CLI's one line, as before
    with pytest.raises(AnalysisError) as info:
        find_device("nonsense")
    assert (info.value.path, info.value.problem) == (None, "unknown device 'nonsense'")


def test_peak_fallbacks() -> None:
    v100 = DEV["v100_sxm2"]
    peak, used = v100.peak_flops("bf16", "tensor")
    assert used == "fp32_tflops" and peak == pytest.approx(15.7e12)
    h200 = DEV["h200"]
    assert h200.peak_flops("bf16", "tensor") == (pytest.approx(989.5e12), "bf16_tflops")
    assert h200.peak_flops("bf16", "vector")[1] == "fp32_tflops"
    assert DEV["mi300x"].peak_flops("fp32", "tensor")[1] == "fp32_matrix_tflops"
