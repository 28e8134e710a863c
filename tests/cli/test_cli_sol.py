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


def test_sol_never_prints_above_100_and_warns(capsys: pytest.CaptureFixture[str], sample_traces: Path) -> None:
    # the H200 trace against an H100 PCIe: its big GEMMs would beat that GPU's peak
    f = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    code, out, err = run(capsys, "sol", f, "--format", "csv", "-q", "--device", "h100_pcie")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    bad = [r for r in rows if r["sol_status"] == "exceeds_peak"]
    assert bad and all(r["sol_pct"] == "" and r["t_sol_ns"] == "" and r["sol_reason"] for r in bad)
    assert all(float(r["sol_pct"]) <= 100 for r in rows if r["sol_pct"])
    assert "warning:" in err and f"{len(bad)} kernel(s) exceed peak" in err
    code, out, _ = run(capsys, "sol", f, "--format", "json", "-q", "--device", "h100_pcie")
    recs = json.loads(out)
    assert all(r["sol_pct"] is None for r in recs if r["sol_status"] == "exceeds_peak")


def test_unknown_is_empty_null_or_dash(capsys: pytest.CaptureFixture[str], sample_traces: Path) -> None:
    # resnet18: max-pool kernels have no model: FLOPs and bytes unknown, never 0
    f = str(sample_traces / "h200_resnet18.pt.trace.json.gz")
    code, out, _ = run(capsys, "sol", f, "--format", "csv", "-q")
    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["flops_source"] == "unknown"]
    assert rows and all(r["flops"] == "" and r["sol_pct"] == "" for r in rows)
    code, out, _ = run(capsys, "sol", f, "--format", "json", "-q")
    assert all(r["flops"] is None for r in json.loads(out) if r["flops_source"] == "unknown")
    code, out, _ = run(capsys, "sol", f, "-q")
    line = next(x for x in out.splitlines() if "max_pool" in x)
    assert "—" in line and " 0.0 " not in line
    code, out, _ = run(capsys, "fusion", f, "--format", "json", "-q")
    for r in json.loads(out):
        if r["savings_ns"] is None:
            assert r["fused_est_ns"] is None and r["confidence"] == "low"


def test_sol_from_the_analysis_cache(capsys: pytest.CaptureFixture[str], sample_traces: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A second ``kviewer sol`` of the same file reads the speed of light the first stored (the
    window's analysis cache); ``--device`` and ``--no-cache`` compute it."""
    import shutil

    import kviewer.analysis.sol as sol_module

    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "h200_llm_block_eager.pt.trace.json.gz"
    shutil.copy(sample_traces / f.name, f)
    code, first, _ = run(capsys, "sol", str(f), "--format", "csv", "-q")
    assert code == 0
    real = sol_module.sol_result
    calls: list[object] = []
    monkeypatch.setattr(sol_module, "sol_result", lambda *a, **k: calls.append(k) or real(*a, **k))
    code, again, _ = run(capsys, "sol", str(f), "--format", "csv", "-q")
    assert code == 0 and again == first and calls == []
    code, other, _ = run(capsys, "sol", str(f), "--format", "csv", "-q", "--device", "h100_pcie")
    assert code == 0 and other != first and len(calls) == 1
    code, fresh, _ = run(capsys, "sol", str(f), "--format", "csv", "-q", "--no-cache")
    assert code == 0 and fresh == first and len(calls) == 2


@pytest.mark.parametrize("fmt", ("csv", "table", "json"))
def test_sol_of_an_export_seen_before_answers_without_loading_it(capsys: pytest.CaptureFixture[str], samples: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, fmt: str) -> None:
    """An Nsight Systems export's kernels are read in place (not through the trace cache), yet
    its speed of light is stored for the file: a second ``kviewer sol`` answers from it without
    loading the file, byte for byte what ``--no-cache`` prints."""
    import kviewer.cli.sol as cli_sol

    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    f = str(samples / "nsys" / "h200_llm_train_nvtx.sqlite")
    code, fresh, _ = run(capsys, "sol", f, "--format", fmt, "-q", "--no-cache")
    assert code == 0
    code, first, _ = run(capsys, "sol", f, "--format", fmt, "-q")
    assert code == 0 and first == fresh
    loads: list[str] = []
    real = cli_sol.load_for
    monkeypatch.setattr(cli_sol, "load_for", lambda *a, **k: loads.append("load") or real(*a, **k))
    code, again, err = run(capsys, "sol", f, "--format", fmt, "-q")
    assert code == 0 and again == fresh and loads == [] and err == ""
    # its kept load warnings gone: the file is loaded again (it says its own warnings)
    from kviewer import session

    sid = session.analysis_cache.identity(f)
    session.analysis_cache.put_blob(sid, None, "load_warnings", "", b"not json")
    code, again, _ = run(capsys, "sol", f, "--format", fmt, "-q")
    assert code == 0 and again == fresh and loads == ["load"]
    # that load kept its warnings again: the next run needs none
    code, again, _ = run(capsys, "sol", f, "--format", fmt, "-q")
    assert code == 0 and again == fresh and loads == ["load"]


def test_load_warnings_kept_beside_the_sol_are_said_without_the_file(samples: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part of an export read in place has no cached trace to keep its load warnings: they are
    kept beside its speed of light and come back with it."""
    from kviewer import analysis, session
    from kviewer.core import Diagnostic
    from kviewer.io import load
    from kviewer.session.analyses import SolInfo

    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    f = str(samples / "nsys" / "perlmutter-cloverleaf-cuda.sqlite")
    sid = session.analysis_cache.identity(f)
    trace = load(f, tables=analysis.sol.SOL_READS)
    assert trace.meta.source_id is None  # read in place: not in the trace cache
    trace.meta.warnings.append(Diagnostic.warning("ignored", f, "something the loader left out"))
    result = analysis.sol.sol_result(trace)
    assert session.analysis_cache.sol_of_file(sid) is None
    assert session.analysis_cache.put(sid, trace, SolInfo(result))
    assert session.analysis_cache.sol_of_file(sid) is None  # its warnings are not known yet
    assert session.analysis_cache.put_load_warnings(sid, trace)
    got = session.analysis_cache.sol_of_file(sid)
    assert got is not None and got[1] == trace.meta.warnings
    import pandas as pd

    pd.testing.assert_frame_equal(got[0].result.table, result.table, check_exact=True)
