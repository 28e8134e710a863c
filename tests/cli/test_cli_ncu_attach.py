"""kviewer sol|fusion|kernels|report TRACE --ncu REPORT: counters on the timeline's kernels."""

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


@pytest.fixture
def pair(samples: Path) -> tuple[str, str]:
    return str(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz"), str(samples / "ncu" / "h200_llm_block_eager.ncu-rep")


@pytest.mark.samples
def test_sol_with_ncu_measured_on_the_matched_kernels(capsys: pytest.CaptureFixture[str], pair: tuple[str, str]) -> None:
    trace, report = pair
    code, out, err = run(capsys, "sol", trace, "--ncu", report, "--format", "csv", "-q")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))  # stdout is clean CSV: the match report is on stderr
    assert len(rows) == 144
    assert "ncu kernels matched: 30 of 30" in err and "step_0" in err and "--ncu-step" in err
    measured = [r for r in rows if r["bytes_source"] == "measured"]
    # 30 profiled + their 30 places in each of the 2 other steps (same kernel, same place); the
    # other 54 launches have no measured twin at their place and keep the model
    assert len(measured) == 90
    assert sum(bool(r["ncu_sm_pct"]) for r in rows) == 90


@pytest.mark.samples
def test_kernels_json_marks_measured_and_inherited(capsys: pytest.CaptureFixture[str], pair: tuple[str, str], samples: Path) -> None:
    trace, report = pair
    code, out, _ = run(capsys, "kernels", trace, "--ncu", report, "--ncu-step", "step_2", "--format", "json", "-q")
    assert code == 0
    rows = json.loads(out)
    measured = [r for r in rows if r["counters"] == "measured"]
    assert len(measured) == 30 and sum(r["counters"] == "inherited" for r in rows) == 60
    assert all(r["counters_from"] == r["id"] for r in measured)
    code, _, err = run(capsys, "kernels", trace, "--ncu", report, "--ncu-step", "step_9", "-q")
    assert code == 2 and "step_9" in err


@pytest.mark.samples
def test_ncu_option_errors(capsys: pytest.CaptureFixture[str], pair: tuple[str, str]) -> None:
    trace, report = pair
    code, _, err = run(capsys, "sol", trace, "--ncu", trace, "-q")
    assert code == 2 and "counter report" in err
    code, _, err = run(capsys, "sol", trace, "--ncu-step", "1", "-q")
    assert code == 2 and "--ncu" in err
    code, _, err = run(capsys, "fusion", trace, "--ncu", report, "--format", "csv", "-q")
    assert code == 0 and "30 of 30" in err


@pytest.mark.samples
def test_report_and_screenshot_of_a_trace_and_its_report_attach(capsys: pytest.CaptureFixture[str], pair: tuple[str, str], tmp_path: Path) -> None:
    trace, report = pair
    out_md = tmp_path / "r.md"
    code, out, err = run(capsys, "report", trace, report, "-o", str(out_md), "--no-pictures", "-q")
    assert code == 0 and "30 of 30" in err
    text = out_md.read_text()
    assert "30 of 30 kernels matched" in text and "measured" in text
    pytest.importorskip("PySide6")
    png = tmp_path / "roof.png"
    code, out, err = run(capsys, "screenshot", trace, report, "--view", "roofline", "-o", str(png), "--size", "400x300", "-q")
    assert code == 0 and png.stat().st_size > 1000 and "30 of 30" in err
