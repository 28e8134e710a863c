"""kviewer compare on two counter reports: Nsight Compute's baseline, every metric side by side."""

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


@pytest.mark.samples
def test_same_run_two_files_every_kernel_matched_all_deltas_zero(capsys: pytest.CaptureFixture[str], samples: Path) -> None:
    rep = str(samples / "ncu" / "h200_llm_block_eager.ncu-rep")
    raw = str(samples / "ncu" / "h200_llm_block_eager.raw.csv")
    code, out, _ = run(capsys, "compare", rep, raw, "-q")
    assert code == 0
    # the kernel groups: the two demanglers' names meet (at::native::…<(int)8> vs at::…<8>)
    assert "only in" not in out and "30 of 30 kernels of A matched" in out and ", 0 differ" in out
    code, out, _ = run(capsys, "compare", rep, raw, "--by", "metric", "--format", "csv", "-q")
    rows = list(csv.DictReader(io.StringIO(out)))
    both = [r for r in rows if r["a"] and r["b"]]
    assert len({(r["kernel_a"], r["kernel_b"]) for r in rows}) == 30
    assert all(r["kernel_a"] == r["kernel_b"] for r in rows)  # the same run: launch i with launch i
    assert len(both) > 20_000 and all(float(r["delta"]) == 0.0 for r in both)
    # values printed rounded by ncu --csv count as equal, and say so
    assert any(r["rounded"] == "True" for r in both)
    # a metric only one file has: its delta is unknown (empty), never 0
    assert all(r["delta"] == "" for r in rows if not (r["a"] and r["b"]))
    code, out, _ = run(capsys, "compare", rep, raw, "--format", "json", "-q")
    doc = json.loads(out)
    assert doc["baseline"]["matched"] == 30 and doc["baseline"]["metrics_differing"] == 0


@pytest.mark.samples
def test_by_metric_needs_two_counter_reports(capsys: pytest.CaptureFixture[str], samples: Path, sample_traces: Path) -> None:
    rep = str(samples / "ncu" / "h200_llm_block_eager.ncu-rep")
    code, _, err = run(capsys, "compare", str(sample_traces / "h200_block2_eager.pt.trace.json.gz"), rep, "--by", "metric", "-q")
    assert code == 2 and "counter reports" in err
