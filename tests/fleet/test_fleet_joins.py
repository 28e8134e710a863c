"""Fleet numbers a reviewer can sign (issue 26): a straggler only beyond the run's own noise,
host-side collectives (gloo) counted as communication, idle time measured inside the steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from kviewer.fleet.analyze import beyond_noise
from kviewer.fleet.record import summarize_file


def test_straggler_only_beyond_the_ranks_spread() -> None:
    rng = np.random.default_rng(7)
    noisy = 100.0 + rng.normal(0, 2.0, size=16)  # 16 ranks, 2 % noise, nobody special
    assert not beyond_noise(noisy).any()
    slow = noisy.copy()
    slow[5] = 125.0  # one rank 25 % slower: far outside 3 spreads
    assert beyond_noise(slow).tolist() == [i == 5 for i in range(16)]
    # identical ranks but one 0.5 % slower: inside the 1 % floor
    same = np.full(8, 100.0)
    same[2] = 100.5
    assert not beyond_noise(same).any()
    assert not beyond_noise(np.array([100.0, 200.0])).any()  # two ranks: no spread to judge by


@pytest.mark.samples
def test_gloo_collectives_are_communication(samples: Path) -> None:
    """A CPU-only rank of a gloo job: its gloo:all_reduce time (the union of the ranges, from the
    raw JSON) is its communication time."""
    path = samples / "torch" / "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
    with gzip.open(path, "rt") as fh:
        ev = [e for e in json.load(fh)["traceEvents"] if str(e.get("name", "")).startswith("gloo:") and e.get("ph") == "X"]
    spans = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in ev)
    union, end = 0.0, -np.inf
    for a, b in spans:
        if b > end:
            union += b - max(a, end)
            end = b
    out = summarize_file(str(path))
    assert out.ok and out.kernels == 0
    assert out.times["comm_ns"] == pytest.approx(union * 1000, rel=1e-6)


def test_idle_inside_steps(sample_traces: Path, tmp_path: Path) -> None:
    """gemm_grid's nsys export: 7 warm-up iterations run before the 3 NVTX steps; idle counts
    only the gaps inside the steps (each step's span less its busy time), not the warm-up's."""
    from kviewer.analysis.steps import busy_ns
    from kviewer.io import load

    sq = tmp_path / "gemm_grid_block2_nsys.sqlite"
    sq.write_bytes(gzip.decompress((sample_traces / "gemm_grid_block2_nsys.sqlite.gz").read_bytes()))
    out = summarize_file(str(sq))
    assert len(out.steps) == 3
    t = load(str(sq))
    k = t.kernels
    s, e = np.concatenate([k["start"], t.gpu_ops["start"]]), np.concatenate([k["end"], t.gpu_ops["end"]])
    want = 0.0
    for s0, s1 in zip(out.steps["start"], out.steps["end"]):
        cs, ce = np.clip(s, s0, s1), np.clip(e, s0, s1)
        live = ce > cs
        want += (ce[live].max() - cs[live].min()) - busy_ns(cs[live], ce[live], np.zeros(live.sum(), dtype=np.int64))
    assert out.times["idle_ns"] == pytest.approx(want)
    whole = out.times["span_ns"] - out.times["busy_ns"]
    assert out.times["idle_ns"] < whole  # the warm-up's gaps are not counted
