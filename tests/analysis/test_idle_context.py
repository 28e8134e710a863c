"""Idle gaps keep their cause when the backward is launched from PyTorch's autograd thread."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from kviewer.analysis.activity import idle_gaps
from kviewer.io import load


def test_gap_before_an_autograd_thread_launch_names_the_step_open_on_the_main_thread(sample_traces: Path) -> None:
    path = sample_traces / "h200_resnet18_train.pt.trace.json.gz"
    trace = load(path, use_cache=False)
    gaps = idle_gaps(trace, 5_000, limit=None)
    # independently, from the raw JSON: the step ranges (main thread) and which thread launched each kernel
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step_")]
    main_tids = {e["tid"] for e in steps}
    launches = {e["args"]["correlation"]: e["tid"] for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    kernel_ts = {e["args"]["correlation"]: float(e["ts"]) for e in events if e.get("cat") == "kernel"}
    assert len(main_tids) == 1
    checked = 0
    for g in gaps.itertuples():
        if g.next_table != "kernels":
            continue
        corr = int(trace.kernels["correlation"].iloc[g.next_id])
        launcher = launches[corr]
        went_idle_us = kernel_ts[corr] - g.gap_ns / 1e3  # the raw clock (µs) when the stream went idle
        open_steps = [s for s in steps if float(s["ts"]) <= went_idle_us <= float(s["ts"]) + float(s["dur"])]
        if launcher not in main_tids and len(open_steps) == 1:
            # launched from another thread while a step was open on the main thread: the step is named, on its thread
            assert g.nvtx == open_steps[0]["name"], (g.nvtx, open_steps[0]["name"])
            assert g.nvtx_tid in main_tids
            checked += 1
    assert checked >= 5  # the backward's gaps: there are many on this trace
    assert (gaps["nvtx_tid"].to_numpy() >= -1).all() and gaps["nvtx_tid"].dtype == np.int64


def test_sync_points_of_real_traces_are_the_rows_named_so(samples: Path, sample_traces: Path) -> None:
    """On real files: the host's sync points are the rows whose name is a sync or blocking-copy
    call or whose category is "sync", tested row by row (the masks are made per category)."""
    from kviewer.analysis.activity import BLOCKING_COPY_CALLS, SYNC_CALLS, sync_points

    hits = 0
    for f in (sample_traces / "h200_resnet18_train.pt.trace.json.gz", samples / "nsys" / "h200_llm_train_nvtx.sqlite",
              samples / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite"):
        t = load(f, use_cache=False)
        c = t.cpu_slices
        want = [str(n) in SYNC_CALLS or str(n) in BLOCKING_COPY_CALLS or str(k) == "sync" for n, k in zip(c["name"], c["category"])]
        got = sync_points(t)["cpu_slices"]
        assert got.tolist() == want, f
        hits += int(got.sum())
    assert hits > 0  # the files hold sync points: the check compared something
