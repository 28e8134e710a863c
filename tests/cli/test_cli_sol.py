"""kviewer sol / kviewer fusion on the bundled H200 traces."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kviewer.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sol_csv_and_json(capsys: pytest.CaptureFixture[str], sample_traces: Path) -> None:
    f = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    code, out, _ = run(capsys, "sol", f, "--format", "csv", "-q")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 144
    assert {"flops", "flops_source", "bytes", "bytes_source", "t_sol_ns", "sol_pct", "bound", "note"} <= set(rows[0])
    assert {r["flops_source"] for r in rows} == {"modelled"}
    code, out, _ = run(capsys, "sol", f, "--format", "json", "-q", "--device", "H100 PCIe")
    assert code == 0 and all(r["gpu"] == "h100_pcie" for r in json.loads(out))


def test_fusion_csv(capsys: pytest.CaptureFixture[str], sample_traces: Path) -> None:
    f = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    code, out, _ = run(capsys, "fusion", f, "--format", "csv", "-q")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and "savings_ns" in rows[0] and float(rows[0]["savings_ns"]) > 0
    assert all(r["kernel_ids"] for r in rows)
    code, out, _ = run(capsys, "fusion", f, "-q")
    assert code == 0 and "total estimated saving" in out


def test_unknown_device_is_a_user_error(capsys: pytest.CaptureFixture[str], sample_traces: Path) -> None:
    f = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    code, out, err = run(capsys, "sol", f, "--device", "Voodoo2", "-q")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--device" in err
