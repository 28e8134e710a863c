"""Benchmark: the two joins against measured truth (issue 26).

Run: ``python tests/bench/bench_joins.py [--gaps]`` (pytest ignores tests/bench).

**Counters onto a timeline** (``analysis/attach.py``). Truth pair: the same program (2 decoder
blocks, ``sample_traces/h200_round4/gemm_grid.HOW.md``) traced by torch.profiler and by Nsight
Systems, and an ``ncu --set full`` report of every launch of its step_1. The four GEMMs of a block
run one nvjet kernel on one grid, so a key of name + grid + block cannot tell them apart. The truth
for the k-th GEMM of any step is the k-th GEMM row of the report's raw CSV export (its tensor-pipe
counter, read here from the CSV, not through kviewer): every step runs the same program. Figures:
GEMM launches carrying counters, those whose tensor FLOPs differ from the truth (the join's error),
and launches whose counters came from a kernel of another name.

**Compare, per step** (``analysis/compare.py``). Truth: (a) the same program in two files of two
tools (torch, 3 steps, vs nsys, 3 marked steps after 7 warm-ups): the true per-step change is 0;
(b) eager vs torch.compile of 4 blocks: the true change is the unprofiled median step ratio
(``compile_pair_truth.json.gz``). Figure: compare's median-step headline against it, in points.

**Report windows that differ from the timeline** (``--gaps``, ``analysis/merge.py``): real
reports with launches removed or repeated against the whole report's pairing (:func:`gap_figures`).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
ST = REPO / "sample_traces"
TENSOR = "sm__ops_path_tensor_src_bf16_dst_fp32.sum"


def report_gemm_flops() -> tuple[str, list[float]]:
    """The report's GEMM kernel name and the tensor-pipe FLOPs of its launches in launch order,
    from the raw CSV."""
    text = gzip.decompress((ST / "gemm_grid_step1_full.raw.csv.gz").read_bytes()).decode("utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    head = rows[0]
    i_name, i_tensor, i_id = head.index("Kernel Name"), head.index(TENSOR), head.index("ID")
    data = [r for r in rows[2:] if r and r[i_id].strip().isdigit()]  # row 1 holds the units
    data.sort(key=lambda r: int(r[i_id]))
    gemms = [r for r in data if "nvjet" in r[i_name] or "gemm" in r[i_name].lower()]
    assert len({r[i_name] for r in gemms}) == 1, "the truth pair has one GEMM kernel for every shape"
    return gemms[0][i_name], [float(r[i_tensor].replace(",", "")) for r in gemms]


def attach_figures(timeline_file: str, gemm_name: str, truth: list[float]) -> dict[str, object]:
    from kviewer.analysis.attach import attach_counters
    from kviewer.analysis.kinds import kernel_op_rows
    from kviewer.analysis.steps import find_steps, kernel_steps
    from kviewer.io import load

    res = attach_counters(load(ST / timeline_file, use_cache=False), load(ST / "gemm_grid_step1_full.ncu-rep.gz", use_cache=False))
    t = res.trace
    k = t.kernels
    step_of = kernel_steps(t, find_steps(t, detect=False))
    names = k["name"].astype(str).to_numpy()
    tensor = k["flops_tensor"].to_numpy(np.float64)
    # the launches of the report's GEMM kernel (a step may run other GEMMs, e.g. the input's)
    gemm = np.array([gemm_name.startswith(n) or n.startswith(gemm_name) for n in names])
    with_counters = gemm & np.isfinite(tensor)
    ops = kernel_op_rows(t)
    dims = t.cpu_slices["input_dims"].astype(str).to_numpy(dtype=object) if len(t.cpu_slices) else np.zeros(0, dtype=object)
    wrong = 0
    worst = 0.0
    for s in range(int(step_of.max()) + 1):
        idx = np.flatnonzero(gemm & (step_of == s))
        order = idx[np.argsort(k["start"].to_numpy()[idx], kind="stable")]
        if (ops[order] >= 0).all():
            # the trace has the launching ops: the truth is each aten::mm's 2*M*N*K from its shapes
            truths = []
            for i in order:
                (m, kk), (_, n) = json.loads(str(dims[ops[i]]))[:2]
                truths.append(2.0 * m * n * kk)
        else:
            # no ops (nsys): the step's GEMMs in order, the report's order (the same program each step)
            order = order[-len(truth):]  # a launch before the step's own (a warm-up leftover) has no report twin
            truths = truth
        for i, want in zip(order, truths):
            if not np.isfinite(tensor[i]):
                continue
            err = abs(tensor[i] - want) / want
            worst = max(worst, err)
            wrong += int(err > 1e-9)
    return {"timeline": timeline_file, "gemm launches": int(gemm.sum()), "with counters": int(with_counters.sum()),
            "direct": int(res.matched), "inherited": int(res.inherited), "wrong FLOPs": wrong, "worst rel. error": float(worst)}


def compare_figures() -> list[dict[str, object]]:
    from kviewer.analysis.compare import compare
    from kviewer.io import load

    out = []
    r = compare(load(ST / "gemm_grid_block2_eager.pt.trace.json.gz", use_cache=False),
                load(ST / "gemm_grid_block2_nsys.sqlite.gz", use_cache=False))
    out.append({"pair": "same program, torch vs nsys", "truth %": 0.0, "compare %": r.slower_pct, "basis": r.headline_basis,
                "total-time %": r.total_slower_pct})
    truth = json.loads(gzip.decompress((ST / "compile_pair_truth.json.gz").read_bytes()))
    a_ms, b_ms = truth["eager"]["unprofiled"]["median_ms"], truth["compiled"]["unprofiled"]["median_ms"]
    r = compare(load(ST / "block4_eager.pt.trace.json.gz", use_cache=False), load(ST / "block4_compiled.pt.trace.json.gz", use_cache=False))
    out.append({"pair": "eager -> torch.compile, 4 blocks", "truth %": (b_ms - a_ms) / a_ms * 100.0, "compare %": r.slower_pct,
                "basis": r.headline_basis, "total-time %": r.total_slower_pct})
    return out


def _report_without(report, rows: list[int]):  # type: ignore[no-untyped-def]
    import pandas as pd

    from kviewer.core import Trace

    k = report.kernels.drop(index=rows).reset_index(drop=True)
    k["id"] = np.arange(len(k), dtype=np.int64)
    return Trace(meta=report.meta, kernels=k)


def _report_with_copy(report, at: int, row: int):  # type: ignore[no-untyped-def]
    import pandas as pd

    from kviewer.core import Trace

    k = report.kernels
    k = pd.concat([k.iloc[:at], k.iloc[[row]], k.iloc[at:]]).reset_index(drop=True)
    k["id"] = np.arange(len(k), dtype=np.int64)
    return Trace(meta=report.meta, kernels=k)


def gap_figures() -> list[dict[str, object]]:
    """Real reports changed the ways a report differs from the timeline it is put on: every one
    and every two launches removed (failed replays, a window with gaps), and one launch repeated
    somewhere (a launch the timeline lacks). The truth is the whole report's pairing: every kept
    report kernel should stay on the timeline launch it had. Figures: variants where any kept
    kernel moved, and kernels moved or left without a partner in all."""
    import itertools

    from kviewer.analysis.merge import match_kernels
    from kviewer.io import load

    samples = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples"))
    pairs = [(samples / "torch" / "h200_llm_block_eager.pt.trace.json.gz", samples / "ncu" / "h200_llm_block_eager.ncu-rep"),
             (ST / "gemm_grid_block2_eager.pt.trace.json.gz", ST / "gemm_grid_step1_full.ncu-rep.gz"),
             (ST / "gemm_grid_block2_nsys.sqlite.gz", ST / "gemm_grid_step1_full.ncu-rep.gz")]
    out: list[dict[str, object]] = []
    for tl_path, nc_path in pairs:
        tl, nc = load(tl_path, use_cache=False), load(nc_path, use_cache=False)
        whole = match_kernels(tl, nc)
        n = len(nc.kernels)
        by = dict(zip(whole.pairs["ncu_id"].tolist(), whole.pairs["timeline_id"].tolist()))
        row: dict[str, object] = {"timeline": tl_path.name, "report kernels": n, "whole report paired": whole.matched}
        for what, variants in (
            ("removed", [(list(g), None) for r in (1, 2) for g in itertools.combinations(range(n), r)]),
            ("repeated", [([], (at, c)) for at in range(1, n) for c in range(n)]),
        ):
            moved_variants = moved = 0
            for gap, extra in variants:
                part = match_kernels(tl, _report_without(nc, gap) if gap else _report_with_copy(nc, *extra), start=whole.start)
                got = dict(zip(part.pairs["ncu_id"].tolist(), part.pairs["timeline_id"].tolist()))
                kept = [i for i in range(n) if i not in gap]
                ids = list(range(len(kept))) if gap else [j for j in range(n + 1) if j != extra[0]]
                m = sum(got.get(j) != by[i] for j, i in zip(ids, kept))
                moved += m
                moved_variants += m > 0
            row[f"{what}: variants"] = len(variants)
            row[f"{what}: variants with a kernel moved"] = moved_variants
            row[f"{what}: kernels moved"] = moved
        out.append(row)
    return out


def main() -> None:
    if "--gaps" in sys.argv:
        print(f"load average: {os.getloadavg()[0]:.2f}")
        for row in gap_figures():
            print(row)
        return
    gemm_name, truth = report_gemm_flops()
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(f"report GEMM launches (truth): {len(truth)}; GFLOP each: {', '.join(f'{v / 1e9:.1f}' for v in truth)}")
    for f in ("gemm_grid_block2_eager.pt.trace.json.gz", "gemm_grid_block2_nsys.sqlite.gz"):
        print(attach_figures(f, gemm_name, truth))
    for row in compare_figures():
        err = float(row["compare %"]) - float(row["truth %"])  # type: ignore[arg-type]
        print({**row, "error (points)": round(err, 2)})


if __name__ == "__main__":
    main()
