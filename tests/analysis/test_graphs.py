"""CUDA graphs: graph launches as a unit, against the raw files.

sample_traces/mlp_graph.pt.trace.json.gz (Kineto) and mlp_graph_nsys_{node,graph}.sqlite.gz (Nsight
Systems with --cuda-graph-trace=node and =graph) were recorded on an H200 by the gpu-data run: 12 x
(Linear + GELU) replayed from a torch.cuda.CUDAGraph (truth_eager_graph.json). Every count here is
computed from the raw JSON / SQL, not through kviewer.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.graphs import graph_summary
from kviewer.analysis.kinds import classify
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
ST = REPO / "sample_traces"
KINETO = ST / "mlp_graph.pt.trace.json.gz"
EAGER = ST / "mlp_eager.pt.trace.json.gz"


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


@pytest.fixture(scope="module")
def dbs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    folder = tmp_path_factory.mktemp("graphs")
    for level in ("node", "graph"):
        dst = folder / f"mlp_graph_nsys_{level}.sqlite"
        with gzip.open(ST / f"mlp_graph_nsys_{level}.sqlite.gz") as src, open(dst, "wb") as f:
            shutil.copyfileobj(src, f)
        out[level] = dst
    return out


def test_kineto_graph_launches_from_raw() -> None:
    ev = _events(KINETO)
    launches = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch"}
    kernels = defaultdict(list)
    for e in ev:
        if e.get("cat") == "kernel" and e["args"].get("correlation") in launches:
            kernels[e["args"]["correlation"]].append(e)
    assert len(launches) == len(kernels) > 0
    trace = load(KINETO)
    g = trace.graph_launches
    assert len(g) == len(launches)
    assert sorted(g["kernels"].tolist()) == sorted(len(v) for v in kernels.values())
    assert int((trace.kernels["graph_launch"] >= 0).sum()) == sum(len(v) for v in kernels.values())
    # every kernel's launch row holds that kernel's correlation, and the launch call is cudaGraphLaunch
    k = trace.kernels[trace.kernels["graph_launch"] >= 0]
    assert (g["correlation"].to_numpy()[k["graph_launch"].to_numpy()] == k["correlation"].to_numpy()).all()
    assert set(trace.cpu_slices["name"].astype(str).to_numpy()[g["launch"].to_numpy()]) == {"cudaGraphLaunch"}
    res = graph_summary(trace)
    (info,) = res.graphs  # one graph replayed
    assert info.launches == len(launches)
    spans = [(max(x["ts"] + x["dur"] for x in v) - min(x["ts"] for x in v)) * 1000 for v in kernels.values()]
    assert info.gpu_ns_per_launch_median == pytest.approx(statistics.median(spans), abs=2)
    assert info.cpu_launch_ns_median == pytest.approx(statistics.median(e["dur"] * 1000 for e in launches.values()), abs=2)
    assert info.kernels_per_launch == statistics.median(len(v) for v in kernels.values())
    names = defaultdict(int)
    for v in kernels.values():
        for x in v:
            names[x["name"]] += 1
    assert {kk.name: kk.count for kk in info.kernels} == dict(names)


def test_eager_trace_has_no_graphs() -> None:
    trace = load(EAGER)
    assert len(trace.graph_launches) == 0 and (trace.kernels["graph_launch"] < 0).all()


def test_nsys_node_level(dbs: dict[str, Path]) -> None:
    con = sqlite3.connect(f"file:{dbs['node']}?mode=ro", uri=True)
    rows = con.execute(
        "select k.correlationId, count(*), min(k.start), max(k.end) from CUPTI_ACTIVITY_KIND_KERNEL k "
        "join CUPTI_ACTIVITY_KIND_RUNTIME r on r.correlationId = k.correlationId join StringIds s on s.id = r.nameId "
        "where s.value like 'cudaGraphLaunch%' group by k.correlationId"
    ).fetchall()
    with_node = con.execute("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL where graphNodeId is not null").fetchone()[0]
    trace = load(dbs["node"])
    g = trace.graph_launches
    assert len(g) == len(rows) > 0
    assert sorted(g["kernels"].tolist()) == sorted(r[1] for r in rows)
    assert int((trace.kernels["graph_launch"] >= 0).sum()) == sum(r[1] for r in rows) == with_node
    assert int((trace.kernels["graph_node"] >= 0).sum()) == with_node
    (info,) = graph_summary(trace).graphs
    assert info.gpu_ns_per_launch_median == statistics.median(r[3] - r[2] for r in rows)
    assert (g["level"].astype(str) == "node").all()
    con.close()


def test_nsys_graph_level(dbs: dict[str, Path]) -> None:
    con = sqlite3.connect(f"file:{dbs['graph']}?mode=ro", uri=True)
    rows = con.execute("select graphId, end - start from CUPTI_ACTIVITY_KIND_GRAPH_TRACE").fetchall()
    trace = load(dbs["graph"])
    g = trace.graph_launches
    assert len(g) == len(rows) > 0
    assert (g["kernels"] == -1).all() and (g["level"].astype(str) == "graph").all()  # kernels unknown, not 0
    assert (g["launch"] >= 0).all()  # each activity found its cudaGraphLaunch call
    res = graph_summary(trace)
    assert [x.graph_id for x in res.graphs] == sorted({r[0] for r in rows})
    (info,) = res.graphs
    assert info.kernels_per_launch is None and info.launches == len(rows)
    assert info.gpu_ns_per_launch_median == statistics.median(r[1] for r in rows)
    con.close()


def test_graph_kernels_are_the_kernels_they_are() -> None:
    """A captured GEMM is still a GEMM: the graph's kernels get the eager twins' kinds."""
    eager, graph = load(EAGER), load(KINETO)
    ke = dict(zip(eager.kernels["name"].astype(str), classify(eager)["kind"]))
    kg = dict(zip(graph.kernels["name"].astype(str), classify(graph)["kind"]))
    shared = set(ke) & set(kg)
    assert shared and all(ke[n] == kg[n] for n in shared)
    assert "gemm" in set(kg.values())


def test_cli_graphs_json() -> None:
    r = subprocess.run([sys.executable, "-m", "kviewer", "graphs", str(KINETO), "-q", "--no-cache", "--format", "json"],
                       capture_output=True, text=True, cwd=REPO, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ev = _events(KINETO)
    n_launch = sum(1 for e in ev if e.get("cat") == "cuda_runtime" and e["name"] == "cudaGraphLaunch")
    (g,) = doc["graphs"]
    assert set(g) >= {"graph_id", "launches", "kernels_per_launch", "gpu_ns_per_launch_median", "cpu_launch_ns_median", "kernels"}
    assert g["launches"] == n_launch
    assert sum(k["count"] for k in g["kernels"]) == doc["kernels_in_graphs"]
    assert np.isclose(sum(k["total_ns"] for k in g["kernels"]), 1000 * sum(
        e["dur"] for e in ev if e.get("cat") == "kernel"), rtol=1e-6)


def test_partial_read_equals_full(dbs: dict[str, Path]) -> None:
    """`kviewer graphs` reads an export's kernels and graph launch calls only: the same launches."""
    import pandas as pd

    from kviewer.analysis.graphs import GRAPHS_READS

    for level in ("node", "graph"):
        full = load(dbs[level])
        part = load(dbs[level], tables=GRAPHS_READS)
        cols = [c for c in full.graph_launches.columns if c != "launch"]  # cpu_slices ids differ: fewer slices
        pd.testing.assert_frame_equal(full.graph_launches[cols], part.graph_launches[cols])
        assert (part.graph_launches["launch"] >= 0).sum() == (full.graph_launches["launch"] >= 0).sum()


def test_compare_pairs_eager_kernels_with_their_graph_twins() -> None:
    """Eager vs the same steps from a CUDA graph: the GEMM and GELU kernels pair up (same name and
    launch size), with the counts the raw files have."""
    from kviewer.analysis.compare import CHANGED, UNCHANGED, compare

    eager, graph = load(EAGER), load(KINETO)
    res = compare(eager, graph)
    g = res.groups
    raw_a = defaultdict(int)
    for e in _events(EAGER):
        if e.get("cat") == "kernel":
            raw_a[e["name"]] += 1
    raw_b = defaultdict(int)
    for e in _events(KINETO):
        if e.get("cat") == "kernel":
            raw_b[e["name"]] += 1
    gemm = [n for n in raw_b if n.startswith("nvjet")]
    assert gemm
    for name in gemm:
        row = g[g["name"].astype(str) == name]
        assert len(row) == 1 and row["status"].iloc[0] in (CHANGED, UNCHANGED)  # paired, not only in A or B
        assert int(row["count_a"].iloc[0]) == raw_a[name] and int(row["count_b"].iloc[0]) == raw_b[name]
