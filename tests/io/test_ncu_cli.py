"""``kviewer info|kernels|summary`` on Nsight Compute files, and ``kviewer info TIMELINE NCU``."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from kviewer.cli import main

pytestmark = pytest.mark.samples


@pytest.fixture(autouse=True)
def _no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize(
    "file, tool, device",
    [
        ("h200_llm_block_eager.ncu-rep", "Nsight Compute 2025.3.1.0", "NVIDIA H200, sm_90, CC 9.0, 132 SMs"),
        ("CuVectorAddDrv.ncu-rep", "Nsight Compute 2022.3.0.0", "NVIDIA GeForce RTX 3070, sm_86, CC 8.6, 46 SMs"),
        ("manual_nvtx.ncu-rep", "Nsight Compute 2022.3.0.0", "NVIDIA GeForce RTX 3070, sm_86"),
        ("profile_output.ncu-rep", "Nsight Compute 2023.1.1.0", "NVIDIA A10G, sm_86, CC 8.6, 80 SMs"),
        ("h200_llm_block_eager.raw.csv", "Nsight Compute", "NVIDIA H200, sm_90"),
        ("h200_llm_block_eager.details.csv", "Nsight Compute", "sm_90, CC 9.0, 132 SMs"),
        ("metrics.csv", "Nsight Compute", "sm_86, CC 8.6"),
        ("cublaslt_ncu.log", "Nsight Compute", "sm_100, CC 10.0, 152 SMs"),
    ],
)
def test_info(samples: Path, capsys: pytest.CaptureFixture[str], file: str, tool: str, device: str) -> None:
    out = run(capsys, "info", str(samples / "ncu" / file))
    lines = out.splitlines()
    assert f"tool:     {tool}" in lines
    assert any(line.startswith("  [0] ") and device in line for line in lines), out
    assert "format:   Nsight Compute" in out


def test_kernels_csv(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "kernels", str(samples / "ncu" / "h200_llm_block_eager.ncu-rep"), "--format", "csv")
    df = pd.read_csv(io.StringIO(out))
    assert list(df.columns[:6]) == ["name", "start_ns", "end_ns", "dur_ns", "device", "stream"]
    assert {"flops_fp32", "dram_bytes", "sm_throughput_pct", "serialised"} <= set(df.columns)
    assert len(df) == 30 and df["serialised"].all()
    assert (df["end_ns"] - df["start_ns"] == df["dur_ns"]).all()
    assert df["dur_ns"].iloc[0] == 12800


def test_summary(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for file in ("h200_llm_block_eager.ncu-rep", "h200_llm_block_eager.details.csv", "metrics.csv"):
        out = run(capsys, "summary", str(samples / "ncu" / file), "--format", "csv")
        df = pd.read_csv(io.StringIO(out))
        assert list(df.columns[:3]) == ["name", "count", "total_ns"]
        assert df["count"].sum() == {"metrics.csv": 9}.get(file, 30)
        assert df["time_pct"].sum() == pytest.approx(100, abs=0.01)


def test_info_timeline_and_report(samples: Path, sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    torch_trace = sample_traces / "h200_llm_block_eager.pt.trace.json.gz"
    rep = samples / "ncu" / "h200_llm_block_eager.ncu-rep"
    out = run(capsys, "info", str(torch_trace), str(rep))
    assert "ncu kernels matched: 30 of 30" in out
    assert out.count("file:     ") == 2
    js = json.loads(run(capsys, "info", str(torch_trace), str(rep), "--format", "json"))
    assert [m["matched"] for m in js["ncu_matches"]] == [30]
    assert len(js["files"]) == 2


def test_info_single_file_json_unchanged(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = json.loads(run(capsys, "info", str(samples / "ncu" / "metrics.csv"), "--format", "json"))
    assert js["format"] == "ncu-csv" and js["tool"] == "Nsight Compute" and js["tables"]["kernels"] == 9
