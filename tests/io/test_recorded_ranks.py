"""A folder of per-rank traces keeps what each rank recorded: memory events and graph launches."""

from __future__ import annotations

import shutil
from pathlib import Path

from kviewer.io import load

ST = Path(__file__).resolve().parents[2] / "sample_traces"


def test_ranks_keep_memory_and_graphs(tmp_path: Path) -> None:
    shutil.copy(ST / "gpt_train_memory.pt.trace.json.gz", tmp_path / "rank-0.pt.trace.json.gz")
    shutil.copy(ST / "mlp_graph.pt.trace.json.gz", tmp_path / "rank-1.pt.trace.json.gz")
    mem, graph = load(ST / "gpt_train_memory.pt.trace.json.gz"), load(ST / "mlp_graph.pt.trace.json.gz")
    merged = load(tmp_path)
    assert len(merged.memory) == len(mem.memory) and set(merged.memory["rank"]) == {0}
    assert len(merged.graph_launches) == len(graph.graph_launches) and set(merged.graph_launches["rank"]) == {1}
    g = merged.graph_launches
    k = merged.kernels[merged.kernels["graph_launch"] >= 0]
    assert len(k) == int(graph.graph_launches["kernels"].sum())
    # every graph kernel points at its own launch (same correlation, rank 1)
    assert (g["correlation"].to_numpy()[k["graph_launch"].to_numpy()] == k["correlation"].to_numpy()).all()
    assert (k["rank"] == 1).all()
