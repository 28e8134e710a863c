"""One Nsight Compute report, three exports: the .ncu-rep, ``--page raw`` and ``--page details``.

The oracle is NVIDIA's ``ncu_report`` module reading the report directly. Every metric that two
of the three loads have must carry the same value in base units: relative 1e-6, or, where ncu
printed fewer digits than that (the details page prints two decimals of an auto-scaled value),
half a unit of the last digit it printed, scaled to base units.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.merge import base_name
from kviewer.io.ncu import csv_export as ncu_csv
from kviewer.io.ncu import report as ncu_rep
from kviewer.io.registry import CancelToken

pytestmark = pytest.mark.samples

NAME = "h200_llm_block_eager"

#: every unit string the sample CSVs print, with its factor to base units, written out by hand
#: (independent of kviewer.io.ncu.common.parse_unit); a new unit in a sample fails the test
UNIT_FACTORS = {
    "": 1.0, "%": 1.0, "inst": 1.0, "inst/cycle": 1.0, "cycle": 1.0, "warp": 1.0, "block": 1.0,
    "byte": 1.0, "byte/block": 1.0, "register/thread": 1.0, "pass": 1.0, "%/register": 1.0,
    "cluster": 1.0, "SM": 1.0, "thread": 1.0, "sector": 1.0, "hz": 1.0, "ns": 1.0, "nsecond": 1.0,
    "us": 1e3, "Ghz": 1e9, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Kbyte/block": 1e3,
    "Kbyte/cycle": 1e3, "Gbyte/s": 1e9, "Tbyte/s": 1e12,
    "%/Kbyte": 1e3,  # ncu scales this ratio's byte prefix like a numerator (see ncu_common)
}  # fmt: skip


def _load(module, path: Path):  # type: ignore[no-untyped-def]
    trace = module.load(path, lambda f, m: None, CancelToken())
    trace.validate()
    return trace


@pytest.fixture(scope="module")
def paths(samples: Path) -> dict[str, Path]:
    d = samples / "ncu"
    return {"rep": d / f"{NAME}.ncu-rep", "raw": d / f"{NAME}.raw.csv", "details": d / f"{NAME}.details.csv"}


@pytest.fixture(scope="module")
def traces(paths: dict[str, Path]) -> dict:  # type: ignore[type-arg]
    return {
        "rep": _load(ncu_rep, paths["rep"]),
        "raw": _load(ncu_csv, paths["raw"]),
        "details": _load(ncu_csv, paths["details"]),
    }


@pytest.fixture(scope="module")
def oracle(paths: dict[str, Path]) -> list[dict[str, tuple[float, str]]]:
    """Per kernel: metric -> (metric-level value, unit) straight from ncu_report."""
    import ncu_report

    ctx = ncu_report.load_report(str(paths["rep"]))
    out = []
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            action = rng.action_by_idx(ai)
            values: dict[str, tuple[float, str]] = {}
            for name in action.metric_names():
                m = action.metric_by_name(name)
                v = m.value()
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    values[name] = (float(v), m.unit())
            out.append(values)
    return out


def _decimals(text: str) -> int:
    s = text.strip().replace(",", "")
    return len(s.split(".", 1)[1]) if "." in s else 0


def _resolution(trace, kernel: int) -> dict[str, tuple[float, float]]:  # type: ignore[no-untyped-def]
    """metric -> (value, printed resolution in base units) for one kernel's numeric rows."""
    m = trace.metrics
    rows = m[(m["kernel"] == kernel) & ~m["section"].astype(str).str.startswith("rule:") & m["value"].notna()]
    out: dict[str, tuple[float, float]] = {}
    for metric, value, text in zip(rows["metric"].astype(str), rows["value"], rows["text"]):
        if metric in out:
            continue
        if trace.meta.source_format == "ncu-rep":
            out[metric] = (float(value), 0.0)
            continue
        number = float(text.replace(",", ""))
        factor = value / number if number else 1.0
        out[metric] = (float(value), 0.5 * 10.0 ** -_decimals(text) * abs(factor))
    return out


def _close(a: float, b: float, tol: float) -> bool:
    return abs(a - b) <= max(1e-6 * max(abs(a), abs(b)), tol * (1 + 1e-9))


def test_same_thirty_kernels(traces: dict) -> None:  # type: ignore[type-arg]
    k = {key: t.kernels for key, t in traces.items()}
    assert [len(x) for x in k.values()] == [30, 30, 30]
    for key in ("raw", "details"):
        assert [base_name(n) for n in k[key]["name"]] == [base_name(n) for n in k["rep"]["name"]]
        for col in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "stream", "device"):
            assert k[key][col].tolist() == k["rep"][col].tolist(), (key, col)
    assert k["rep"]["serialised"].all() and k["details"]["serialised"].all()
    # laid end to end in launch order
    rep = k["rep"]
    assert rep["start"].iloc[0] == 0
    assert (rep["start"].to_numpy()[1:] == rep["end"].to_numpy()[:-1]).all()
    # the details page prints durations in usecond with two decimals: 10 ns resolution
    assert np.abs(k["details"]["dur"].to_numpy() - rep["dur"].to_numpy()).max() <= 5
    assert (k["raw"]["dur"].to_numpy() == rep["dur"].to_numpy()).all()


def test_rep_equals_ncu_report(traces: dict, oracle: list) -> None:  # type: ignore[type-arg]
    rep = traces["rep"]
    compared = 0
    for k, values in enumerate(oracle):
        loaded = _resolution(rep, k)
        for name, (value, unit) in values.items():
            assert name in loaded, (k, name)
            assert loaded[name][0] == pytest.approx(value, rel=1e-12, abs=0), (k, name)
            compared += 1
        units = rep.metrics[rep.metrics["kernel"] == k].drop_duplicates("metric").set_index("metric")["unit"]
        for name, (_, unit) in values.items():
            assert str(units[name]).lower() == unit.lower(), name  # report units are base units
    assert compared > 30 * 500


@pytest.mark.parametrize("page", ["raw", "details"])
def test_csv_units_and_values(traces: dict, paths: dict, page: str) -> None:  # type: ignore[type-arg]
    """Every printed unit is one we expect, and value == printed number x that unit's factor."""
    m = traces[page].metrics
    rows = m[~m["section"].astype(str).str.startswith("rule:")]
    import pandas as pd

    if page == "raw":
        df = pd.read_csv(paths["raw"], dtype=str, keep_default_na=False)
        printed_units = dict(zip(df.columns, df.iloc[0]))
    else:
        df = pd.read_csv(paths["details"], dtype=str, keep_default_na=False)
        printed_units = {}
    units_seen = set(printed_units.values()) | set(df.get("Metric Unit", pd.Series(dtype=str)))
    assert units_seen <= set(UNIT_FACTORS), units_seen - set(UNIT_FACTORS)
    checked = 0
    if page == "raw":
        for metric, value, text in zip(rows["metric"].astype(str), rows["value"], rows["text"]):
            if metric not in printed_units or math.isnan(value):
                continue
            expect = float(text.replace(",", "")) * UNIT_FACTORS[printed_units[metric]]
            assert value == pytest.approx(expect, rel=1e-12), metric
            checked += 1
    else:
        # metric rows load in file order (rule rows and the trailing context-id rows aside)
        detail_rows = df[df["Metric Name"] != ""]
        loaded = rows[rows["section"].astype(str) != ""]
        assert len(loaded) == len(detail_rows)
        for (unit, text), value in zip(zip(detail_rows["Metric Unit"], detail_rows["Metric Value"]), loaded["value"]):
            if not re.fullmatch(r"[\d,]*\.?\d+", text):
                assert math.isnan(value), text
                continue
            assert value == pytest.approx(float(text.replace(",", "")) * UNIT_FACTORS[unit], rel=1e-12), text
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("pair", [("rep", "raw"), ("rep", "details"), ("raw", "details")])
def test_shared_metrics_agree(traces: dict, pair: tuple[str, str]) -> None:  # type: ignore[type-arg]
    a, b = (traces[x] for x in pair)
    compared = 0
    for k in range(30):
        va, vb = _resolution(a, k), _resolution(b, k)
        shared = set(va) & set(vb)
        assert len(shared) >= (40 if "details" in pair else 700), (pair, k, len(shared))
        for name in shared:
            (x, tx), (y, ty) = va[name], vb[name]
            assert _close(x, y, tx + ty), (pair, k, name, x, y)
            compared += 1
    assert compared


def test_csv_against_oracle(traces: dict, oracle: list) -> None:  # type: ignore[type-arg]
    for page in ("raw", "details"):
        for k, values in enumerate(oracle):
            loaded = _resolution(traces[page], k)
            hits = 0
            for name, (value, tol) in loaded.items():
                if name in values:
                    assert _close(value, values[name][0], tol), (page, k, name, value, values[name][0])
                    hits += 1
            assert hits >= (40 if page == "details" else 700)


def test_speed_of_light_columns(traces: dict, oracle: list) -> None:  # type: ignore[type-arg]
    rep = traces["rep"].kernels
    for k, values in enumerate(oracle):
        v = {n: x for n, (x, _) in values.items()}
        row = rep.iloc[k]
        assert row["sm_throughput_pct"] == pytest.approx(v["sm__throughput.avg.pct_of_peak_sustained_elapsed"])
        assert row["mem_throughput_pct"] == pytest.approx(v["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"])
        assert row["dram_throughput_pct"] == pytest.approx(v["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"])
        assert row["achieved_occupancy_pct"] == pytest.approx(v["sm__warps_active.avg.pct_of_peak_sustained_active"])
        assert row["theoretical_occupancy_pct"] == pytest.approx(v["sm__maximum_warps_per_active_cycle_pct"])
        assert row["tensor_pipe_pct"] == pytest.approx(v["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"])
        assert row["sm_clock_hz"] == pytest.approx(v["gpc__cycles_elapsed.avg.per_second"])
        assert row["dram_clock_hz"] == pytest.approx(v["dram__cycles_elapsed.avg.per_second"])
        assert row["dur"] == round(v["gpu__time_duration.sum"])
        # this report has no dram__bytes.sum: bytes = the measured rate x the duration
        assert row["dram_bytes"] == pytest.approx(v["dram__bytes.sum.per_second"] * v["gpu__time_duration.sum"] * 1e-9)
        assert row["registers"] == v["launch__registers_per_thread"]
        assert row["shared_mem"] == v["launch__shared_mem_per_block_static"] + v["launch__shared_mem_per_block_dynamic"]
        # no half-precision counters in this report's roofline section
        assert math.isnan(row["flops_fp16"]) and math.isnan(row["flops_tensor"])
    # the first kernel adds two bf16 tensors of 4 x 1024 x 2048 (h200_workload.py, the residual
    # add), one FFMA per element: 2 FLOP each
    assert rep["flops_fp32"].iloc[0] == pytest.approx(2 * 4 * 1024 * 2048, rel=1e-3)
    assert rep["flops_fp64"].iloc[0] == 0
    # GEMMs run on the tensor pipe
    gemm = rep["name"].astype(str).str.startswith("nvjet")
    assert (rep.loc[gemm, "tensor_pipe_pct"] > 50).all() and (rep.loc[~gemm, "tensor_pipe_pct"] < 50).all()
    # the raw page gives the same fields
    raw = traces["raw"].kernels
    for col in ("sm_throughput_pct", "dram_bytes", "flops_fp32", "achieved_occupancy_pct", "tensor_pipe_pct", "sm_clock_hz"):
        assert np.allclose(raw[col].to_numpy(), rep[col].to_numpy(), rtol=1e-5, equal_nan=True), col
    det = traces["details"].kernels
    for col in ("sm_throughput_pct", "mem_throughput_pct", "achieved_occupancy_pct", "theoretical_occupancy_pct"):
        assert np.allclose(det[col].to_numpy(), rep[col].to_numpy(), atol=0.005 + 1e-9), col


def test_rule_results_agree(traces: dict) -> None:  # type: ignore[type-arg]
    def rules(trace):  # type: ignore[no-untyped-def]
        m = trace.metrics
        r = m[m["section"].astype(str).str.startswith("rule:")]
        return sorted(zip(r["kernel"], r["section"].astype(str), r["metric"].astype(str), r["text"], r["value"].fillna(-1)))

    rep, det = rules(traces["rep"]), rules(traces["details"])
    assert len(rep) == len(det) > 30
    for a, b in zip(rep, det):
        assert a[:3] == b[:3]
        assert a[3] == b[3]  # same advice text, links rendered as ncu --csv renders them
        # the CSV prints the estimated speedup with 0 to 3 decimals ("50", "18.8", "5.818")
        assert a[4] == pytest.approx(b[4], abs=0.5)
    assert sum(abs(a[4] - b[4]) <= 0.005 for a, b in zip(rep, det)) > 0.8 * len(rep)
    assert any(s == "rule:SOLBottleneck" and t.startswith("OPT: Memory is more heavily utilized") for _, s, _, t, _ in rep)


def test_devices(traces: dict) -> None:  # type: ignore[type-arg]
    for key in ("rep", "raw"):
        d = traces[key].devices.iloc[0]
        assert d["name"] == "NVIDIA H200"
        assert (d["architecture"], d["compute_capability"], d["sm_count"]) == ("sm_90", "9.0", 132)
        assert d["memory_bytes"] == 150_109_880_320
        assert d["sm_clock_hz"] == 1.98e9 and d["mem_bus_width"] == 6016
    d = traces["details"].devices.iloc[0]  # the details page names no device, only CC and # SMs
    assert (d["name"], d["architecture"], d["sm_count"]) == ("", "sm_90", 132)


def test_meta(traces: dict) -> None:  # type: ignore[type-arg]
    rep = traces["rep"].meta
    assert (rep.source_format, rep.tool, rep.tool_version) == ("ncu-rep", "Nsight Compute", "2025.3.1.0")
    assert rep.extra["launch_skip"] == 40 and rep.extra["launch_count"] == 30
    assert rep.ncu_capture is not None and (rep.ncu_capture.launch_skip, rep.ncu_capture.launch_count) == (40, 30)
    assert "--launch-skip 40" in rep.extra["command"]
    assert traces["raw"].meta.source_format == traces["details"].meta.source_format == "ncu-csv"
    assert "raw page" in traces["raw"].meta.format_label
    assert "details page" in traces["details"].meta.format_label
