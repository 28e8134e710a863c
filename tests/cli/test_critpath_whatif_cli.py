"""kviewer critpath / kviewer whatif: the JSON shapes of issue 24, CSV and table output, and bad
input as one line with exit status 2."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kviewer.cli import main

CLASSES = {"gpu_kernel", "memcpy", "launch", "cpu", "sync", "comm", "idle"}


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main([*args, "-q", "--no-cache"])
    out, err = capsys.readouterr()
    return code, out, err


def test_critpath_json_shape(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "critpath", str(sample_traces / "mlp_sync.pt.trace.json.gz"), "--format", "json", "--top", "3")
    assert code == 0
    doc = json.loads(out)
    assert [s["name"] for s in doc["steps"]] == [f"ProfilerStep#{i}" for i in range(2, 6)]
    for s in doc["steps"]:
        assert {"name", "measured_ns", "critical_path_ns", "breakdown", "top"} <= set(s)
        assert set(s["breakdown"]) == CLASSES and sum(s["breakdown"].values()) == s["critical_path_ns"]
        assert abs(s["critical_path_ns"] - s["measured_ns"]) <= 0.01 * s["measured_ns"]
        assert 0 < len(s["top"]) <= 3 and all(set(t) == {"name", "kind", "ns", "pct"} for t in s["top"])
        assert [t["ns"] for t in s["top"]] == sorted((t["ns"] for t in s["top"]), reverse=True)


def test_critpath_csv_and_table(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    code, out, _ = _run(capsys, "critpath", f, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [r["step"] for r in rows] == ["step_0", "step_1", "step_2"]
    assert all(sum(int(r[c]) for c in CLASSES) == int(r["critical_path_ns"]) for r in rows)
    code, out, _ = _run(capsys, "critpath", f)
    assert code == 0 and "critical path" in out and "steps from: annotation" in out


def test_whatif_json_shape_and_no_change(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = str(sample_traces / "mlp_eager.pt.trace.json.gz")
    code, out, _ = _run(capsys, "whatif", f, "--format", "json")
    doc = json.loads(out)
    assert code == 0 and set(doc) == {"steps", "median_measured_ns", "median_projected_ns", "changes"}
    assert doc["changes"] == [] and all(s["projected_ns"] == s["measured_ns"] for s in doc["steps"])
    code, out, _ = _run(capsys, "whatif", f, "--cuda-graphs", "--kernel", "nvjet=0.5", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [c["change"] for c in doc["changes"]] == ["--kernel nvjet=0.5", "--cuda-graphs"]
    assert doc["median_projected_ns"] < doc["median_measured_ns"]


def test_whatif_channels_last(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kviewer.analysis.whatif import Changes, whatif_model
    from kviewer.io import load

    f = sample_traces / "h100_r7_gn_eager.pt.trace.json.gz"
    code, out, _ = _run(capsys, "whatif", str(f), "--channels-last", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert [c["change"] for c in doc["changes"]] == ["--channels-last"] and doc["changes"][0]["count"] == 96
    want = whatif_model(load(f)).project(Changes(channels_last=True))
    # GroupNorm runs only in NCHW in eager: converted alone, the program is slower (its copies)
    assert doc["median_projected_ns"] == want.median_projected_ns > want.median_measured_ns
    assert "H100" in doc["changes"][0]["what"]


def test_whatif_same_numbers_as_the_library(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kviewer.analysis.whatif import Changes, whatif_model
    from kviewer.io import load

    f = sample_traces / "block4_eager.pt.trace.json.gz"
    code, out, _ = _run(capsys, "whatif", str(f), "--fuse", "all", "--sol", "gemm=90", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    p = whatif_model(load(f)).project(Changes(fuse=(), sol=(("gemm", 90.0),)))
    assert code == 0 and [int(r["projected_ns"]) for r in rows] == [s.projected_ns for s in p.steps]


@pytest.mark.parametrize("args, words", [
    (["critpath", "h200_gemms_full.raw.csv.gz"], "no kernel launch calls"),
    (["whatif", "h200_gemms_full.raw.csv.gz"], "no kernel launch calls"),
    (["whatif", "mlp_sync.pt.trace.json.gz", "--fuse", "0"], "--fuse"),
    (["whatif", "mlp_sync.pt.trace.json.gz", "--fuse", "x"], "--fuse"),
    (["whatif", "mlp_sync.pt.trace.json.gz", "--sol", "gemm"], "NAME=NUMBER"),
    (["whatif", "mlp_sync.pt.trace.json.gz", "--no-sync", "cudaNope"], "no such sync"),
    (["critpath", "mlp_sync.pt.trace.json.gz", "--step", "nothing"], "no range named"),
])
def test_bad_input_is_one_line_exit_2(sample_traces: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    args = [args[0], str(sample_traces / args[1]), *args[2:]]
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == "" and words in err and len(err.strip().splitlines()) == 1


def test_report_what_would_help_most_has_the_cli_numbers(sample_traces: Path) -> None:
    from kviewer.analysis.whatif import Changes, whatif_model
    from kviewer.io import load
    from kviewer.report import Table, build_report, fmt_ns

    t = load(sample_traces / "mlp_eager.pt.trace.json.gz")
    report = build_report([t], pictures=False)
    sec = next(s for s in report.sections if s.title == "What would help most")
    table = next(b for b in sec.blocks if isinstance(b, Table))
    rows = {r[0]: r[1] for r in table.rows}
    p = whatif_model(t).project(Changes(cuda_graphs=True))
    assert rows["--cuda-graphs"] == fmt_ns(p.median_projected_ns)


def test_graph_launches_without_their_kernels_are_named(sample_traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # nsys --cuda-graph-trace=graph keeps one range per graph and no kernel rows: the 5 replays
    # inside the NVTX steps (HOW.md of the graph pair) have no GPU work in the trace
    import sqlite3
    import gzip
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "g.sqlite"
        with gzip.open(sample_traces / "mlp_graph_nsys_graph.sqlite.gz") as src, open(db, "wb") as dst:
            shutil.copyfileobj(src, dst)
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        graph_rows = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchone()[0]
        con.close()
    assert graph_rows == 10  # 5 warm-up + 5 steps
    code, out, err = _run(capsys, "critpath", str(sample_traces / "mlp_graph_nsys_graph.sqlite.gz"), "--top", "0")
    assert code == 0 and "warning: 5 launch call(s) have no GPU work" in err and "cudaGraphLaunch" in err
    code, out, err = _run(capsys, "critpath", str(sample_traces / "mlp_graph.pt.trace.json.gz"), "--top", "0")
    assert code == 0 and "warning" not in err
