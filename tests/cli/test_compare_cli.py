"""``kviewer compare A B``: formats, columns, exit codes, --fail-if-slower."""

from __future__ import annotations

import csv
import gzip
import io
import json
from pathlib import Path

import pytest

from kviewer.analysis.compare import DIFF_COLUMNS, OP_COLUMNS
from kviewer.cli import EXIT_OK, EXIT_SLOWER, EXIT_USER_ERROR, main

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"


def _kernel_total_ns(path: Path) -> float:
    """The file's own kernel time (µs floats in the JSON), in ns."""
    with gzip.open(path, "rt") as fh:
        return sum(e["dur"] for e in json.load(fh)["traceEvents"] if e.get("cat") == "kernel") * 1000


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["compare", *argv, "-q"])
    out, err = capsys.readouterr()
    return code, out, err


def test_csv_has_the_diff_columns_and_deltas_add_up(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = sample_traces / EAGER, sample_traces / COMPILED
    code, out, err = _run(capsys, str(a), str(b), "--format", "csv")
    assert code == EXIT_OK and err == ""
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == DIFF_COLUMNS
    assert "delta_ns" in rows[0]
    delta = sum(int(r["delta_ns"]) for r in rows)
    assert delta == sum(int(r["total_b_ns"]) for r in rows) - sum(int(r["total_a_ns"]) for r in rows)
    # and that is the difference of the files' own kernel totals (to rounding of µs floats)
    assert abs(delta - (_kernel_total_ns(b) - _kernel_total_ns(a))) <= 144 + 99
    statuses = {r["status"] for r in rows}
    assert {"replaced", "replacement", "unchanged"} <= statuses


def test_csv_per_op(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(sample_traces / EAGER), str(sample_traces / COMPILED), "--format", "csv", "--by", "op")
    assert code == EXIT_OK
    rows = list(csv.DictReader(io.StringIO(out)))
    assert list(rows[0]) == OP_COLUMNS
    assert {r["op"]: r["status"] for r in rows}["aten::gelu"] == "replaced"


def test_json_holds_everything(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(sample_traces / EAGER), str(sample_traces / COMPILED), "--format", "json")
    assert code == EXIT_OK
    doc = json.loads(out)
    assert {"a", "b", "totals", "steps", "groups", "ops", "fusion", "align_offset_ns", "slower_pct"} <= set(doc)
    assert sum(g["delta_ns"] for g in doc["groups"]) == doc["b"]["kernel_time_ns"] - doc["a"]["kernel_time_ns"] == doc["delta_ns"]
    assert doc["slower_pct"] < 0  # the compiled model is faster
    assert [s["step_a"] for s in doc["steps"]] == ["step_0", "step_1", "step_2"]
    only_b = [g for g in doc["groups"] if g["count_a"] == 0]
    assert all(g["delta_pct"] is None for g in only_b)  # NaN becomes null


def test_table_output(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, str(sample_traces / EAGER), str(sample_traces / COMPILED))
    assert code == EXIT_OK
    assert "kernel time" in out and "GPU busy time" in out and "step_0" in out
    assert "replaced" in out and "fusion sets" in out and "total kernel time" in out


def test_fail_if_slower_both_ways(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eager, compiled = str(sample_traces / EAGER), str(sample_traces / COMPILED)
    # both have steps: the limit applies to the median step (find_steps' GPU span per step, tested on
    # its own in tests/analysis), not to the per-file kernel time
    from kviewer.analysis.steps import find_steps
    from kviewer.io import load

    med = [float(find_steps(load(p))["gpu_span"].median()) for p in (compiled, eager)]
    slower_pct = (med[1] / med[0] - 1) * 100  # ~32
    # compiled -> eager: B (eager) is slower
    code, out, err = _run(capsys, compiled, eager, "--fail-if-slower", f"{slower_pct - 0.5:.2f}", "--format", "csv")
    assert code == EXIT_SLOWER == 1
    assert "slower than A" in err and len(err.strip().splitlines()) == 1
    assert out.startswith("name,")  # the report is still written
    code, _, err = _run(capsys, compiled, eager, "--fail-if-slower", f"{slower_pct + 0.5:.2f}", "--format", "csv")
    assert code == EXIT_OK and err == ""
    # eager -> compiled: B is faster, never fails
    code, _, _ = _run(capsys, eager, compiled, "--fail-if-slower", "0", "--format", "csv")
    assert code == EXIT_OK
    # a trace against itself is not slower at 0%
    code, _, _ = _run(capsys, eager, eager, "--fail-if-slower", "0", "--format", "csv")
    assert code == EXIT_OK


@pytest.mark.parametrize(
    "argv, message",
    [
        (["missing.json"], "no such file"),
        (["--fail-if-slower", "abc"], "invalid float"),
        (["--fail-if-slower", "-1"], ">= 0"),
        (["--fail-if-slower", "nan"], ">= 0"),
        (["--format", "xml"], "invalid choice"),
    ],
)
def test_user_errors_exit_2_with_one_line(argv: list[str], message: str, sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = str(sample_traces / EAGER)
    args = [a, *argv] if argv[0] == "missing.json" else [a, a, *argv]
    code, out, err = _run(capsys, *args)
    assert code == EXIT_USER_ERROR
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err


def test_compare_needs_two_files(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, str(sample_traces / EAGER))
    assert code == EXIT_USER_ERROR and "required" in err


def test_by_op_needs_ops(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nsys = str(sample_traces / "h200_llm_train_nvtx.sqlite.gz")
    code, _, err = _run(capsys, nsys, nsys, "--by", "op", "--format", "csv")
    assert code == EXIT_USER_ERROR and "ops" in err
