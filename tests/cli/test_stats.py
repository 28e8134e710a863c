"""``kviewer stats --report``: the ``nsys stats`` reports, for every format.

Nsight Systems: every report with an oracle (``nsys stats --format csv`` of nsys 2025.3.1 on
h200_llm_train_nvtx.sqlite, bundled in sample_traces) must print the oracle's columns, rows and
order, integers and text equal and rounded numbers within the printed rounding. The rules the other
shared exports exercise (OS runtime calls by event class, API calls by string id) are checked
against SQL on those exports: their oracles are not ours to bundle.
PyTorch, rocprof and Nsight Compute: the reports are checked against counts computed here from the
raw file (JSON or CSV parsed directly). A report the file cannot give is skipped with a line naming what
it lacks (exit 0 when another was written, 2 when none could be).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import sqlite3
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from kviewer.analysis.stats import REPORTS, run_report
from kviewer.errors import ReportUnavailable
from kviewer.io import load
from tests.conftest import SAMPLE_TRACES

REPO = Path(__file__).resolve().parents[2]
#: the reports whose nsys stats output (nsys 2025.3.1) on h200_llm_train_nvtx.sqlite is bundled in
#: sample_traces as h200_llm_train_nvtx_stats_REPORT.csv (the 3.8 MB cuda_gpu_trace gzipped)
ORACLE_REPORTS = ("cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_gpu_mem_size_sum", "nvtx_sum", "cuda_api_sum", "cuda_gpu_trace")


def _run(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KVIEWER_NO_CACHE="1")
    proc = subprocess.run([sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def _csv(text: str) -> pd.DataFrame:
    return pd.read_csv(io.StringIO(text), keep_default_na=False, dtype=str)


@pytest.fixture(params=["bundled gzip", "shared sqlite"])
def export(request: pytest.FixtureRequest, sample_traces: Path) -> Path:
    if request.param == "bundled gzip":
        return sample_traces / "h200_llm_train_nvtx.sqlite.gz"
    samples: Path = request.getfixturevalue("samples")
    return samples / "nsys" / "h200_llm_train_nvtx.sqlite"


def _compare_to_oracle(ours: pd.DataFrame, oracle: pd.DataFrame, report: str) -> None:
    """Same columns, rows in the same order; integers and text equal, rounded numbers printed with
    nsys's decimals and within its rounding."""
    assert list(ours.columns) == list(oracle.columns) == REPORTS[report].headers, report
    assert len(ours) == len(oracle), report
    for col in oracle.columns:
        decimals = next(c.decimals for c in REPORTS[report].columns if c.header == col)
        if decimals is None:
            assert list(ours[col]) == list(oracle[col]), (report, col)
            continue
        for mine, theirs in zip(ours[col], oracle[col]):
            assert (mine == "") == (theirs == ""), (report, col, mine, theirs)
            if mine:
                assert len(mine.split(".")[1]) == decimals, (report, col, mine)
                assert abs(float(mine) - float(theirs)) <= 0.5 * 10**-decimals + 1e-9, (report, col, mine, theirs)


def _bundled_oracles(sample_traces: Path) -> dict[str, Path]:
    """report -> its bundled oracle CSV (plain or gzipped), every one in sample_traces."""
    found = {}
    for path in sample_traces.glob("h200_llm_train_nvtx_stats_*.csv*"):
        found[path.name.removeprefix("h200_llm_train_nvtx_stats_").split(".")[0]] = path
    return found


def _read_oracle(path: Path) -> pd.DataFrame:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:  # type: ignore[operator]
        return _csv(fh.read())


def test_every_oracle_report_equals_nsys_stats(export: Path, sample_traces: Path, tmp_path: Path) -> None:
    oracles = _bundled_oracles(sample_traces)
    assert set(oracles) == set(ORACLE_REPORTS)
    # all in one run, written as nsys stats --output writes them: PREFIX_REPORT.csv
    prefix = tmp_path / "out"
    proc = _run("stats", str(export), "--report", ",".join(ORACLE_REPORTS), "--format", "csv", "--output", str(prefix))
    assert proc.stdout == "" and proc.stderr == ""
    for report, path in oracles.items():
        _compare_to_oracle(_csv(Path(f"{prefix}_{report}.csv").read_text()), _read_oracle(path), report)
    # nsys stats skips osrt_sum here ("does not contain OS Runtime trace data"): kviewer says what is missing
    proc = _run("stats", str(export), "--report", "osrt_sum", "--format", "csv", ok=False)
    assert proc.returncode == 2 and proc.stdout == "" and "osrt_sum" in proc.stderr


ROUND8 = sorted(p.name.removesuffix(".sqlite.gz") for p in SAMPLE_TRACES.glob("h100_r8_*_nsys.sqlite.gz"))


@pytest.mark.parametrize("stem", ROUND8)
def test_round8_exports_byte_for_byte(sample_traces: Path, tmp_path: Path, stem: str) -> None:
    """Exports of programs kviewer was not written against (round 8: a decoding step eager and as a CUDA graph
    traced per node, a training step with a boolean-mask loss; nsys 2025.3.1 on an H100, torch 2.11): every report
    equals the `nsys stats --format csv` file of the same export, byte for byte."""
    prefix = tmp_path / stem
    proc = _run("stats", str(sample_traces / f"{stem}.sqlite.gz"), "--report", ",".join(ORACLE_REPORTS), "--format", "csv",
                "--output", str(prefix))
    assert proc.stderr == ""
    for report in ORACLE_REPORTS:
        oracle = gzip.decompress((sample_traces / f"{stem}_stats_{report}.csv.gz").read_bytes())
        assert Path(f"{prefix}_{report}.csv").read_bytes() == oracle, (stem, report)


def _oracles() -> list[tuple[Path, str, Path]]:
    """(export, report, oracle CSV) for every ``EXPORT_stats_REPORT.csv`` in samples/nsys/oracle
    (as ``nsys stats --format csv --output EXPORT_stats`` names them) whose export is there."""
    from tests.conftest import SHARED_SAMPLES

    found = []
    for csv_path in sorted((SHARED_SAMPLES / "nsys" / "oracle").glob("*_stats_*.csv")):
        stem, report = csv_path.stem.split("_stats_", 1)
        export = SHARED_SAMPLES / "nsys" / f"{stem}.sqlite"
        if report in REPORTS and export.exists():
            found.append((export, report, csv_path))
    return found


def test_every_shared_oracle_file(samples: Path, tmp_path: Path) -> None:
    """Any oracle dropped into samples/nsys/oracle is checked, whatever the export or report."""
    oracles = _oracles()
    shared = {"cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "nvtx_sum", "cuda_api_sum"}  # what samples/nsys/oracle holds
    assert {r for e, r, _ in oracles if e.name == "h200_llm_train_nvtx.sqlite"} >= shared
    by_export: dict[Path, list[tuple[str, Path]]] = defaultdict(list)
    for export, report, csv_path in oracles:
        by_export[export].append((report, csv_path))
    for export, wanted in by_export.items():
        prefix = tmp_path / export.stem
        _run("stats", str(export), "--report", ",".join(r for r, _ in wanted), "--format", "csv", "--output", str(prefix))
        for report, csv_path in wanted:
            _compare_to_oracle(_csv(Path(f"{prefix}_{report}.csv").read_text()), _csv(csv_path.read_text()), report)


def test_one_report_to_stdout_is_plain_csv(sample_traces: Path) -> None:
    out = _run("stats", str(sample_traces / "h200_llm_train_nvtx.sqlite.gz"), "-r", "cuda_gpu_mem_time_sum", "--format", "csv").stdout
    assert out == (sample_traces / "h200_llm_train_nvtx_stats_cuda_gpu_mem_time_sum.csv").read_text()


def _sql(path: Path, query: str) -> list[tuple]:  # type: ignore[type-arg]
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _round(x: float, decimals: int) -> float:
    return math.floor(x * 10**decimals + 0.5) / 10**decimals


def test_mem_size_sum_and_gpu_trace_against_the_export(samples: Path) -> None:
    path = samples / "nsys" / "h200_llm_train_nvtx.sqlite"
    trace = load(path)
    sizes = run_report(trace, "cuda_gpu_mem_size_sum").set_index("Operation")
    labels = dict(_sql(path, "select id, label from ENUM_CUDA_MEMCPY_OPER"))
    expected = {f"[CUDA memcpy {labels[k]}]": (n, b) for k, n, b in _sql(path, "select copyKind, count(*), sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY group by 1")}
    expected["[CUDA memset]"] = _sql(path, "select count(*), sum(bytes) from CUPTI_ACTIVITY_KIND_MEMSET")[0]
    assert set(sizes.index) == set(expected)
    for op, (n, b) in expected.items():
        assert sizes.loc[op, "Count"] == n
        assert sizes.loc[op, "Total (MB)"] == pytest.approx(_round(b / 1e6, 3), abs=1e-9)  # MB = 10^6 bytes

    gpu = run_report(trace, "cuda_gpu_trace")
    kernels = _sql(path, "select start, end - start, correlationId, gridX, blockX, registersPerThread, staticSharedMemory, "
                         "dynamicSharedMemory, contextId, streamId from CUPTI_ACTIVITY_KIND_KERNEL order by start")  # fmt: skip
    # nsys's rate in SQLite integers: bytes * (whole divisions of a second), B/s
    copies = _sql(path, "select start, end - start, bytes, srcKind, dstKind, bytes * (1000000000 / (end - start)) "
                        "from CUPTI_ACTIVITY_KIND_MEMCPY order by start")  # fmt: skip
    n_set = _sql(path, "select count(*) from CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
    assert len(gpu) == len(kernels) + len(copies) + n_set
    assert gpu["Start (ns)"].is_monotonic_increasing
    k = gpu[gpu["GrdX"].notna()].reset_index(drop=True)
    assert len(k) == len(kernels)
    for i in (0, len(k) // 2, len(k) - 1):
        start, dur, corr, grid_x, block_x, regs, static, dynamic, ctx, stream = kernels[i]
        row = k.iloc[i]
        assert (row["Start (ns)"], row["Duration (ns)"], row["CorrId"], row["GrdX"], row["BlkX"], row["Reg/Trd"], row["Ctx"], row["Strm"]) == (
            start, dur, corr, grid_x, block_x, regs, ctx, stream)  # fmt: skip
        assert row["StcSMem (MB)"] == pytest.approx(_round(static / 1e6, 3))
        assert row["DymSMem (MB)"] == pytest.approx(_round(dynamic / 1e6, 3))
        assert row["Device"] == "NVIDIA H200 (0)"
    mem_kinds = dict(_sql(path, "select id, label from ENUM_CUDA_MEM_KIND"))
    m = gpu[gpu["Name"].str.startswith("[CUDA memcpy")].reset_index(drop=True)
    assert len(m) == len(copies)
    for i in range(len(m)):
        start, dur, nbytes, src, dst, rate = copies[i]
        row = m.iloc[i]
        assert row["Start (ns)"] == start
        assert row["Bytes (MB)"] == pytest.approx(_round(nbytes / 1e6, 3))
        assert row["Throughput (MB/s)"] == pytest.approx(_round(rate / 1e6, 3), abs=1e-9), i
        assert (row["SrcMemKd"], row["DstMemKd"]) == (mem_kinds[src], mem_kinds[dst])


def _by_string_id(path: Path, table: str, where: str = "") -> list[tuple[str, str, str, str, str]]:
    """(name, calls, total, min, max) as nsys stats counts calls: by the name's string id, totals
    descending (equal ones in id order), the name without a four-digit ``_vNNNN`` suffix."""
    rows = _sql(path, f"select s.value, count(*), sum(o.end - o.start), min(o.end - o.start), max(o.end - o.start) "
                      f"from {table} o join StringIds s on s.id = o.nameId {where} group by o.nameId order by 3 desc, o.nameId")  # fmt: skip
    strip = re.compile(r"_v\d{4}$")
    return [(strip.sub("", name), str(n), str(total), str(lo), str(hi)) for name, n, total, lo, hi in rows]


def _name_and_counts(out: pd.DataFrame) -> list[tuple[str, str, str, str, str]]:
    return list(zip(out["Name"], out["Num Calls"], out["Total Time (ns)"], out["Min (ns)"], out["Max (ns)"]))


def test_osrt_sum_against_the_export(samples: Path) -> None:
    """Only the OS runtime event class counts: OSRT_API also holds the profiler's own zero-length
    'OS runtime libraries profiling started/finished' marks (nsys stats leaves them out)."""
    path = samples / "nsys" / "perlmutter-cloverleaf-cuda.sqlite"
    out = _csv(_run("stats", str(path), "-r", "osrt_sum", "--format", "csv").stdout)
    assert list(out.columns) == REPORTS["osrt_sum"].headers
    osrt = "where o.eventClass = (select id from ENUM_NSYS_EVENT_CLASS where name = 'TRACE_PROCESS_EVENT_OS_RUNTIME')"
    assert _name_and_counts(out) == _by_string_id(path, "OSRT_API", osrt)
    assert _sql(path, f"select count(*) from OSRT_API o {osrt.replace('o.eventClass =', 'o.eventClass !=')}")[0][0] > 0


@pytest.mark.parametrize("name", ["saxpy-mpi-cuda_nsys_perlmutter0.sqlite", "perlmutter-cloverleaf-cuda.sqlite", "h200_llm_train_nvtx.sqlite"])
def test_cuda_api_sum_counts_by_string_id(samples: Path, name: str) -> None:
    """nsys groups API calls by the name's string id: the saxpy export holds cudaMalloc and
    cudaMalloc_v3020 (ids 102 and 668), printed as two cudaMalloc rows, each with its own share."""
    path = samples / "nsys" / name
    out = _csv(_run("stats", str(path), "-r", "cuda_api_sum", "--format", "csv").stdout)
    expected = _by_string_id(path, "CUPTI_ACTIVITY_KIND_RUNTIME")
    assert _name_and_counts(out) == expected
    total = sum(int(t) for _, _, t, _, _ in expected)
    assert [float(p) for p in out["Time (%)"]] == [pytest.approx(int(t) * 100 / total, abs=0.051) for _, _, t, _, _ in expected]
    if name.startswith("saxpy"):
        assert len(out) > len(set(out["Name"]))  # the versioned and plain ids apart


# ---------------------------------------------------------------------------------------------
# other formats: counts computed here from the raw file


def _kineto(path: Path) -> list[dict]:  # type: ignore[type-arg]
    with gzip.open(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]


def _by_name(events: list[dict], cats: set[str]) -> dict[str, tuple[int, int]]:  # type: ignore[type-arg]
    """name -> (count, total ns) of the events of these categories, ns as round(µs * 1000)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("cat") in cats:
            out[e["name"]][0] += 1
            out[e["name"]][1] += round(float(e["dur"]) * 1000)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _check(df: pd.DataFrame, key: str, count: str, expected: dict[str, tuple[int, int]]) -> None:
    got = {r[key]: (int(r[count]), int(r["Total Time (ns)"])) for _, r in df.iterrows()}
    assert got == expected
    assert df["Time (%)"].sum() == pytest.approx(100.0, abs=0.05 * len(df) + 1e-9)


@pytest.mark.parametrize(
    "name, api_report",
    [("h200_llm_block_eager.pt.trace.json.gz", "cuda_api_sum"), ("h200_llm_block_compiled.pt.trace.json.gz", "cuda_api_sum")],
)
def test_torch_reports_count_what_the_json_holds(sample_traces: Path, name: str, api_report: str) -> None:
    path = sample_traces / name
    trace = load(path)
    events = _kineto(path)
    _check(run_report(trace, "cuda_gpu_kern_sum"), "Name", "Instances", _by_name(events, {"kernel"}))
    _check(run_report(trace, "cuda_gpu_mem_time_sum"), "Operation", "Count", _by_name(events, {"gpu_memcpy", "gpu_memset"}))
    _check(run_report(trace, api_report), "Name", "Num Calls", _by_name(events, {"cuda_runtime", "cuda_driver"}))
    nvtx = run_report(trace, "nvtx_sum")  # record_function ranges
    _check(nvtx, "Range", "Instances", _by_name(events, {"user_annotation"}))
    assert set(nvtx["Style"]) == {""}  # Kineto does not say push/pop or start/end
    gpu = run_report(trace, "cuda_gpu_trace")
    assert len(gpu) == sum(1 for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    with pytest.raises(ReportUnavailable) as err:
        run_report(trace, "hip_api_sum")
    assert err.value.report == "hip_api_sum" and err.value.path == str(path)


def test_rocm_torch_trace_gives_hip_api_sum(samples: Path) -> None:
    path = samples / "torch" / "mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    trace = load(path)
    events = _kineto(path)
    _check(run_report(trace, "hip_api_sum"), "Name", "Num Calls", _by_name(events, {"cuda_runtime", "cuda_driver"}))
    _check(run_report(trace, "cuda_gpu_kern_sum"), "Name", "Instances", _by_name(events, {"kernel"}))
    proc = _run("stats", str(path), "-r", "cuda_api_sum", ok=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and str(path) in proc.stderr and "hip_api_sum" in proc.stderr


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _count(rows: list[dict[str, str]], key: str, start: str, end: str) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        out[r[key]][0] += 1
        out[r[key]][1] += int(r[end]) - int(r[start])
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_rocprofv3_reports_count_what_the_csvs_hold(samples: Path) -> None:
    folder = samples / "rocprof" / "rocprofv3_sdk_docs_2024"
    trace = load(folder)
    # the HIP runtime and compiler APIs, as rocprof's hip_api_stats.csv counts them (__hipRegisterFunction, ...)
    hip = [r for f in ("hip_runtime_trace.csv", "hip_compile_trace.csv") for r in _rows(folder / f) if r["Domain"].startswith("HIP")]
    _check(run_report(trace, "hip_api_sum"), "Name", "Num Calls", _count(hip, "Function", "Start_Timestamp", "End_Timestamp"))
    kernels = _count(_rows(folder / "kernel_trace.csv"), "Kernel_Name", "Start_Timestamp", "End_Timestamp")
    got = run_report(trace, "cuda_gpu_kern_sum")
    assert sorted((int(r["Instances"]), int(r["Total Time (ns)"])) for _, r in got.iterrows()) == sorted(kernels.values())
    copies = _rows(folder / "memory_copy_trace.csv")
    mem = run_report(trace, "cuda_gpu_mem_time_sum")
    assert int(mem["Count"].sum()) == len(copies)
    assert int(mem["Total Time (ns)"].sum()) == sum(int(r["End_Timestamp"]) - int(r["Start_Timestamp"]) for r in copies)
    with pytest.raises(ReportUnavailable) as err:
        run_report(trace, "cuda_api_sum")
    assert "hip_api_sum" in err.value.lacks


def test_rocprof_v1_kernels(samples: Path) -> None:
    path = samples / "rocprof" / "gunrock_mi300" / "results.csv"
    rows = _rows(path)
    got = run_report(load(path), "cuda_gpu_kern_sum")
    assert int(got["Instances"].sum()) == len(rows)
    assert int(got["Total Time (ns)"].sum()) == sum(int(r["EndNs"]) - int(r["BeginNs"]) for r in rows)


def test_ncu_kernel_summary_and_what_a_counter_report_lacks(samples: Path) -> None:
    path = samples / "ncu" / "h200_llm_block_eager.ncu-rep"
    raw = _rows(samples / "ncu" / "h200_llm_block_eager.raw.csv")[1:]  # the second row holds units
    durations: dict[str, list[float]] = defaultdict(list)
    unit = _rows(samples / "ncu" / "h200_llm_block_eager.raw.csv")[0]["gpu__time_duration.sum"]
    scale = {"ns": 1, "nsecond": 1, "us": 1000, "usecond": 1000, "ms": 1e6, "msecond": 1e6}[unit]
    for r in raw:
        durations[r["Kernel Name"]].append(float(r["gpu__time_duration.sum"].replace(",", "")) * scale)
    trace = load(path)
    got = run_report(trace, "cuda_gpu_kern_sum")
    assert int(got["Instances"].sum()) == len(raw) == 30
    assert int(got["Total Time (ns)"].sum()) == pytest.approx(sum(sum(v) for v in durations.values()), abs=len(raw))
    for report in ("cuda_api_sum", "cuda_gpu_mem_time_sum", "nvtx_sum", "cuda_gpu_trace", "osrt_sum"):
        with pytest.raises(ReportUnavailable) as err:
            run_report(trace, report)
        assert err.value.report == report and err.value.lacks
    # as nsys stats: a report the file cannot give is skipped (one line on stderr), the others are
    # written, and the exit status is 0; 2 only when none could be written
    proc = _run("stats", str(path), "-r", "cuda_gpu_kern_sum,cuda_gpu_trace", "--format", "csv", ok=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("cuda_gpu_kern_sum") == 1  # what it can give is printed
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"SKIPPED: {path}: cuda_gpu_trace:")
    none = _run("stats", str(path), "-r", "cuda_gpu_trace,nvtx_sum", "--format", "csv", ok=False)
    assert none.returncode == 2 and none.stdout == ""
    lines = none.stderr.splitlines()
    assert [x.split(": ")[0] for x in lines] == ["SKIPPED", "SKIPPED", "kviewer"], none.stderr
    assert "none of the 2 reports" in lines[-1]


def test_unknown_report_is_a_user_error(sample_traces: Path) -> None:
    proc = _run("stats", str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"), "-r", "cuda_gpu_kern_summ", ok=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert "cuda_gpu_kern_summ" in proc.stderr and "cuda_gpu_kern_sum" in proc.stderr
    proc = _run("stats", str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz"), "-r", "cuda_gpu_kern_sum", "-f", "csv",
                "-o", str(sample_traces / "no such folder" / "run"), ok=False)  # fmt: skip
    assert proc.returncode == 2 and "no such folder" in proc.stderr and proc.stderr.count("\n") == 1


def test_json_and_table_show_unknown_values_as_nsys_cannot(sample_traces: Path) -> None:
    path = str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")
    rows = json.loads(_run("stats", path, "-r", "cuda_gpu_trace", "--format", "json").stdout)
    kernel = next(r for r in rows if r["GrdX"] is not None)
    assert kernel["Bytes (MB)"] is None and kernel["Ctx"] is None  # unknown: null, never 0
    table = _run("stats", path, "-r", "cuda_gpu_trace").stdout.splitlines()
    assert table[0].split()[:2] == ["Start", "(ns)"] and "—" in table[2]


def test_sql_summary_views_agree_with_the_reports(sample_traces: Path) -> None:
    """The SQL views of ``kviewer sql`` summarise in SQL what analysis.stats summarises here: they must agree."""
    from kviewer import sqldb

    trace = load(sample_traces / "h200_llm_train_nvtx.sqlite.gz")
    conn = sqldb.in_memory([trace], analysis=False)
    pairs = [("memcpy_summary", run_report(trace, "cuda_gpu_mem_time_sum").rename(columns={"Operation": "name"})),
             ("nvtx_summary", run_report(trace, "nvtx_sum").assign(name=lambda d: d["Range"].str.removeprefix(":")))]  # fmt: skip
    for view, report in pairs:
        got = pd.read_sql_query(f"SELECT * FROM {view}", conn).set_index("name")
        report = report.set_index("name")
        assert sorted(got.index) == sorted(report.index), view
        for ours, theirs in (("count", "Count" if view == "memcpy_summary" else "Instances"), ("total_ns", "Total Time (ns)"),
                             ("min_ns", "Min (ns)"), ("max_ns", "Max (ns)")):  # fmt: skip
            assert got.loc[report.index, ours].astype(int).tolist() == report[theirs].astype(int).tolist(), (view, ours)
        for ours, theirs in (("avg_ns", "Avg (ns)"), ("med_ns", "Med (ns)"), ("std_ns", "StdDev (ns)"), ("time_pct", "Time (%)")):
            diff = (got.loc[report.index, ours].astype(float) - report[theirs].astype(float)).abs()
            assert (diff <= 0.05 + 1e-6).all(), (view, ours)
    conn.close()


def test_csv_guards_formula_names_unless_raw() -> None:
    import numpy as np

    from kviewer.cli.stats import write_report
    from kviewer.core import Trace, TraceMeta, schema

    kernels = schema.make_table("kernels", 2, {"name": ["=HYPERLINK(1)", "gemm"], "start": np.array([0, 10]), "end": np.array([5, 30])})
    trace = Trace(meta=TraceMeta(path="x.json", source_format="torch"), kernels=kernels)
    report = REPORTS["cuda_gpu_kern_sum"]
    buf = io.StringIO()
    write_report(run_report(trace, "cuda_gpu_kern_sum"), report, "csv", buf)
    rows = _csv(buf.getvalue())
    assert list(rows["Name"]) == ["gemm", "'=HYPERLINK(1)"] and list(rows["Total Time (ns)"]) == ["20", "5"]
    buf = io.StringIO()
    write_report(run_report(trace, "cuda_gpu_kern_sum"), report, "csv", buf, raw_csv=True)
    assert list(_csv(buf.getvalue())["Name"]) == ["gemm", "=HYPERLINK(1)"]


def test_gpu_trace_csv_keeps_every_digit_of_epoch_nanoseconds() -> None:
    import numpy as np

    from kviewer.cli.stats import write_report
    from kviewer.core import Trace, TraceMeta, schema

    start = np.array([1_700_000_000_123_456_789, 1_700_000_000_123_456_901])  # beyond float64's 2^53
    kernels = schema.make_table("kernels", 2, {"name": ["a", "b"], "start": start, "end": start + 7})
    trace = Trace(meta=TraceMeta(path="x.json", source_format="torch"), kernels=kernels)
    buf = io.StringIO()
    write_report(run_report(trace, "cuda_gpu_trace"), REPORTS["cuda_gpu_trace"], "csv", buf)
    rows = _csv(buf.getvalue())
    assert list(rows["Start (ns)"]) == [str(s) for s in start] and list(rows["Duration (ns)"]) == ["7", "7"]
    assert list(rows["CorrId"]) == ["", ""]  # unknown: empty, never -1 or 0


def test_rounding_is_of_the_stored_double_with_halves_away_from_zero() -> None:
    """nsys 2025.3 prints 694122.85 (stored as 694122.8499...) as 694122.8 and 4639.95 as 4639.9
    (the perlmutter-cloverleaf oracle), exact halves away from zero (12.25 -> 12.3); Python's own
    formatting rounds the stored double exactly too, so it decides every value that is no exact half."""
    import random
    from fractions import Fraction

    import numpy as np

    from kviewer.analysis.stats import sql_round

    random.seed(7)
    values = [694122.85, 4639.95, 2.675, 1.005, 0.15, -0.15, 1e15 + 0.3]
    values += [random.randrange(10**9) / 10 ** random.randrange(1, 5) for _ in range(2000)]
    for decimals in (1, 3):
        got = sql_round(np.array(values), decimals)
        for x, g in zip(values, got):
            if (Fraction(x) * 10**decimals).denominator != 2:  # no exact half
                assert f"{g:.{decimals}f}" == f"{x:.{decimals}f}", (x, decimals)
    halves = np.array([12.25, -12.25, 0.125, 2.5, -0.5])
    assert list(sql_round(halves, 1)) == [12.3, -12.3, 0.1, 2.5, -0.5]
    assert list(sql_round(halves, 0)) == [12.0, -12.0, 0.0, 3.0, -1.0]
    assert list(sql_round(np.array([0.125, -0.375, np.nan]), 2)[:2]) == [0.13, -0.38]
