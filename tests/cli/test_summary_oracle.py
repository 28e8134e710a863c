"""``kviewer summary`` against NVIDIA's own ``nsys stats`` on the same export.

The oracle CSVs are ``nsys stats --report cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,nvtx_sum,
cuda_api_sum --format csv`` run on h200_llm_train_nvtx.sqlite (copied into sample_traces/ with
the gzipped export, so these tests run on a plain clone; the uncompressed export in
../shared/samples is checked too when present). nsys prints averages, medians, standard
deviations and percentages with one decimal, so those agree within half a unit of that decimal;
counts, totals, minima and maxima are integers and must be equal.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from kviewer.core import Trace
from kviewer.core.names import strip_api_version
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
ORACLE = str(REPO / "sample_traces" / "h200_llm_train_nvtx_stats_{}.csv")
ROUNDING = 0.05 + 1e-9  # nsys rounds to one decimal

# oracle column -> our column
EXACT = {"Total Time (ns)": "total_ns", "Min (ns)": "min_ns", "Max (ns)": "max_ns"}
ROUNDED = {"Avg (ns)": "avg_ns", "Med (ns)": "med_ns", "StdDev (ns)": "std_ns", "Time (%)": "time_pct"}


def _oracle(report: str) -> pd.DataFrame:
    return pd.read_csv(ORACLE.format(report))


@pytest.fixture(params=["bundled gzip", "shared sqlite"])
def export(request: pytest.FixtureRequest, sample_traces: Path) -> Path:
    if request.param == "bundled gzip":
        return sample_traces / "h200_llm_train_nvtx.sqlite.gz"
    samples: Path = request.getfixturevalue("samples")  # skips when ../shared/samples is absent
    return samples / "nsys" / "h200_llm_train_nvtx.sqlite"


def _run_cli(*args: str) -> str:
    env = dict(os.environ, KVIEWER_NO_CACHE="1")  # compare what the loader reads, not a cached copy
    proc = subprocess.run(
        [sys.executable, "-m", "kviewer", *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout


def _compare(ours: pd.DataFrame, oracle: pd.DataFrame, key: str, exact: dict[str, str], rounded: dict[str, str]) -> None:
    """Row by row on the oracle's key column; ``ours`` is indexed by the same key."""
    assert sorted(ours.index) == sorted(oracle[key]), "different names"
    for _, row in oracle.iterrows():
        mine = ours.loc[row[key]]
        for theirs, col in exact.items():
            assert int(mine[col]) == int(row[theirs]), (row[key], theirs, mine[col], row[theirs])
        for theirs, col in rounded.items():
            assert abs(float(mine[col]) - float(row[theirs])) <= ROUNDING, (row[key], theirs, mine[col], row[theirs])


def _stats(df: pd.DataFrame, by: str) -> pd.DataFrame:
    """count/total/avg/median/min/max/sample std of ``dur`` per ``by``, the way nsys stats reports them."""
    g = df.assign(key=df[by].astype(str)).groupby("key")["dur"]
    out = pd.DataFrame(
        {
            "count": g.size(),
            "total_ns": g.sum(),
            "avg_ns": g.mean(),
            "med_ns": g.median(),
            "min_ns": g.min(),
            "max_ns": g.max(),
            "std_ns": g.std(ddof=1).fillna(0.0),
        }
    )
    out["time_pct"] = out["total_ns"] / out["total_ns"].sum() * 100
    return out


def _trace(path: Path, monkeypatch: pytest.MonkeyPatch) -> Trace:
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    return load(path)


def test_kernel_summary_cli_matches_nsys_stats(export: Path) -> None:
    out = _run_cli("summary", str(export), "--format", "csv")
    ours = pd.read_csv(io.StringIO(out), keep_default_na=False)
    assert list(ours.columns) == ["name", "count", "total_ns", "avg_ns", "med_ns", "min_ns", "max_ns", "std_ns", "time_pct"]
    oracle = _oracle("cuda_gpu_kern_sum")
    assert len(oracle) == 33
    assert len(ours) == len(oracle)
    # same rows in the same order (by total time, descending): the oracle has no ties
    assert oracle["Total Time (ns)"].is_unique
    assert list(ours["name"]) == list(oracle["Name"])
    _compare(ours.set_index("name"), oracle, "Name", {"Instances": "count", **EXACT}, ROUNDED)


def test_memcpy_and_memset_match_nsys_stats(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _trace(export, monkeypatch)
    oracle = _oracle("cuda_gpu_mem_time_sum")
    _compare(_stats(trace.gpu_ops, "name"), oracle, "Operation", {"Count": "count", **EXACT}, ROUNDED)


def test_nvtx_ranges_match_nsys_stats(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _trace(export, monkeypatch)
    nvtx = trace.cpu_slices[trace.cpu_slices["category"] == "nvtx"]
    oracle = _oracle("nvtx_sum")
    assert set(oracle["Style"]) == {"PushPop"}
    # nsys names a range "domain:text"; the default domain has no name, so it prints ":step_0"
    # where kviewer shows plain "step_0"
    oracle["Range"] = oracle["Range"].str.removeprefix(":")
    _compare(_stats(nvtx, "name"), oracle, "Range", {"Instances": "count", **EXACT}, ROUNDED)


def test_cuda_api_calls_match_nsys_stats(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _trace(export, monkeypatch)
    api = trace.cpu_slices[trace.cpu_slices["category"].isin(["runtime", "driver"])]
    oracle = _oracle("cuda_api_sum")
    # nsys strips only four-digit version suffixes (cudaMalloc_v3020 but not cudaGetFuncBySymbol_v11000,
    # cuGetProcAddress_v2); kviewer strips them all, so compare on the stripped name
    oracle["Name"] = oracle["Name"].map(strip_api_version)
    assert oracle["Name"].is_unique
    _compare(_stats(api, "name"), oracle, "Name", {"Num Calls": "count", **EXACT}, ROUNDED)
