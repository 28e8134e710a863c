"""Rank files for ``kviewer fleet``: one sample trace written once per rank, with per-rank jitter,
a communication kernel per step, and optionally one planted straggler.

The straggler's kernels of one group run ``slow_us`` longer each, and everything after each of
them happens that much later (the host waits for the GPU), so its steps take longer by the
planted time: the fleet must find that rank, and that group as the reason.

    python -m tests.bench.gen_fleet OUT_FOLDER N [--straggler RANK]
"""

from __future__ import annotations

import argparse
import bisect
import copy
import gzip
import json
import random
from pathlib import Path
from typing import Any

SAMPLE = Path(__file__).resolve().parents[2] / "sample_traces" / "h200_block2_eager.pt.trace.json.gz"
#: the kernel group the planted straggler is slow in (the layer norm kernels of the sample)
SLOW_GROUP = "layer_norm"
COMM_NAME = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def read_sample(path: Path = SAMPLE) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def with_comm(doc: dict[str, Any]) -> dict[str, Any]:
    """The sample with an all-reduce kernel on its own stream at the start of each step's GPU work
    (it overlaps the step's first kernels)."""
    doc = copy.deepcopy(doc)
    ev = doc["traceEvents"]
    kernels = sorted((e for e in ev if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    steps = sorted((e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step_")), key=lambda e: e["ts"])
    for i, s in enumerate(steps):
        nxt = steps[i + 1]["ts"] if i + 1 < len(steps) else float("inf")
        first = next((k for k in kernels if s["ts"] <= k["ts"] < nxt), None)
        if first is None:
            continue
        args = dict(first["args"], stream=99, correlation=10_000_000 + i)
        args.pop("External id", None)
        ev.append({"ph": "X", "cat": "kernel", "name": COMM_NAME, "pid": first["pid"], "tid": 99, "ts": first["ts"], "dur": 40.0, "args": args})
    return doc


def rank_doc(base: dict[str, Any], rank: int, world: int, jitter: float, slow_us: float = 0.0, seed: int = 0) -> dict[str, Any]:
    """One rank's trace: times stretched by ``1 + jitter * U(0, 1)``; with ``slow_us``, the
    :data:`SLOW_GROUP` kernels run that much longer and everything after them later."""
    rnd = random.Random(seed * 100_003 + rank)
    scale = 1.0 + jitter * rnd.random()
    ev = base["traceEvents"]
    t0 = min(e["ts"] for e in ev if "ts" in e)
    slow_starts = sorted(e["ts"] for e in ev if slow_us and e.get("cat") == "kernel" and SLOW_GROUP in e.get("name", ""))

    def shift(t: float) -> float:
        # later by the slowed kernels that started before t (a kernel's own end included)
        return slow_us * bisect.bisect_left(slow_starts, t) if slow_starts else 0.0

    out_ev = []
    for e in ev:
        if "ts" in e:
            e = dict(e)
            ts = e["ts"]
            new_ts = t0 + (ts - t0) * scale + shift(ts)
            if "dur" in e and e.get("cat") == "kernel":
                # a kernel starts later, and only the slowed ones run longer
                slowed = slow_us and SLOW_GROUP in e.get("name", "")
                e["dur"] = round(e["dur"] * scale + (slow_us if slowed else 0.0), 3)
            elif "dur" in e:
                # a host range (a step, an op) ends when the work it waits for ends
                end = ts + e["dur"]
                e["dur"] = round(t0 + (end - t0) * scale + shift(end) - new_ts, 3)
            e["ts"] = round(new_ts, 3)
        out_ev.append(e)
    doc = {k: v for k, v in base.items() if k != "traceEvents"}
    out: dict[str, Any] = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world}}
    out.update(doc)
    out["traceEvents"] = out_ev
    return out


def write_ranks(folder: Path, n: int, straggler: int | None = None, slow_us: float = 200.0, jitter: float = 0.01, seed: int = 0,
                base: dict[str, Any] | None = None, gz: bool = True, all_slow: bool = False) -> list[Path]:
    """``n`` rank files in ``folder``; ``straggler`` (or every rank, ``all_slow``: a slower run) slowed by ``slow_us`` per slow kernel."""
    folder.mkdir(parents=True, exist_ok=True)
    base = with_comm(base or read_sample())
    paths = []
    for r in range(n):
        doc = rank_doc(base, r, n, jitter, slow_us if (r == straggler or all_slow) else 0.0, seed)
        p = folder / (f"rank-{r}.pt.trace.json.gz" if gz else f"rank-{r}.pt.trace.json")
        data = json.dumps(doc, separators=(",", ":")).encode()
        p.write_bytes(gzip.compress(data, 1) if gz else data)
        paths.append(p)
    return paths


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--straggler", type=int, default=None)
    a = ap.parse_args()
    print(len(write_ranks(a.out, a.n, a.straggler)))
