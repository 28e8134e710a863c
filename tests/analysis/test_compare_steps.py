"""Steps: NVTX ranges, record_function annotations, ProfilerStep#N, detected iterations."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.steps import (
    STEP_COLUMNS,
    busy_ns,
    detect_iterations,
    find_steps,
    kernel_steps,
)
from kviewer.core import Trace, TraceMeta, make_table
from kviewer.io import load

NSYS = "h200_llm_train_nvtx.sqlite.gz"
EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"

_cache: dict[Path, Trace] = {}


def _load(path: Path) -> Trace:
    if path not in _cache:
        _cache[path] = load(path)
    return _cache[path]


def test_busy_time_is_the_union_per_device() -> None:
    # device 0: [0,10) and [5,20) overlap -> 20; [30,31) -> 1; device 1: [0,10) -> 10
    assert busy_ns(np.array([0, 5, 30, 0]), np.array([10, 20, 31, 10]), np.array([0, 0, 0, 1])) == 31
    # a kernel nested inside a longer one adds nothing
    assert busy_ns(np.array([0, 2]), np.array([10, 3])) == 10
    assert busy_ns(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0


def test_nvtx_steps_match_nsys_stats(sample_traces: Path, samples: Path) -> None:
    t = _load(sample_traces / NSYS)
    steps = find_steps(t)
    assert list(steps.columns) == STEP_COLUMNS
    assert list(steps["name"]) == [f"step_{i}" for i in range(60)]
    assert (steps["source"] == "nvtx").all()
    # the range durations are what `nsys stats --report nvtx_sum` reports for each step_N
    with open(samples / "nsys" / "oracle" / "h200_llm_train_nvtx_stats_nvtx_sum.csv", newline="") as fh:
        oracle = {row["Range"].lstrip(":"): int(row["Total Time (ns)"]) for row in csv.DictReader(fh)}
    for name, dur in zip(steps["name"], steps["dur"]):
        assert dur == oracle[name], name
    # every step launches the same 214 kernels (h200_workload.py: one training step)
    assert (steps["kernel_count"] == 214).all()
    assert (steps["busy_ns"] <= steps["gpu_span"]).all() and (steps["kernel_ns"] >= steps["busy_ns"]).all()
    # the kernels of a step run after its range opens (the GPU runs behind the host)
    assert (steps["gpu_start"] >= steps["start"]).all()
    rows = kernel_steps(t, steps)
    assert np.array_equal(np.bincount(rows[rows >= 0], minlength=60), steps["kernel_count"].to_numpy())


def test_record_function_steps_match_kinetos_gpu_annotations(sample_traces: Path) -> None:
    t = _load(sample_traces / EAGER)
    steps = find_steps(t)
    assert list(steps["name"]) == ["step_0", "step_1", "step_2"]
    assert (steps["source"] == "annotation").all()
    assert steps["kernel_count"].sum() == len(t.kernels) == 144
    # Kineto's gpu_user_annotation is its own GPU projection of each step: the same span
    c = t.cpu_slices
    gpu = c[c["category"].astype(str) == "gpu_annotation"].sort_values("start")
    assert list(gpu["name"].astype(str)) == list(steps["name"])
    assert np.abs(gpu["dur"].to_numpy() - steps["gpu_span"].to_numpy()).max() <= 10  # µs floats in the file


def test_profiler_step_markers(samples: Path) -> None:
    t = _load(samples / "torch" / "tracelens_h100" / "gaunernst_bert-small-uncased__1016001.json.gz")
    steps = find_steps(t)
    assert list(steps["name"]) == ["ProfilerStep#6"] and list(steps["step"]) == [6]
    assert steps["source"].iloc[0] == "ProfilerStep"
    assert steps["kernel_count"].iloc[0] == len(t.kernels)


def test_detected_iterations_without_markers_match_the_annotated_steps(sample_traces: Path) -> None:
    t = _load(sample_traces / COMPILED)
    marked = find_steps(t)
    bare = Trace(TraceMeta(path="bare", source_format="test"), kernels=t.kernels)
    found = find_steps(bare)
    assert (found["source"] == "detected").all()
    assert len(found) == len(marked) == 3
    assert np.array_equal(found["gpu_start"].to_numpy(), marked["gpu_start"].to_numpy())
    assert np.array_equal(found["gpu_span"].to_numpy(), marked["gpu_span"].to_numpy())
    assert np.array_equal(found["kernel_count"].to_numpy(), marked["kernel_count"].to_numpy())
    assert find_steps(bare, detect=False).empty


def test_detected_iterations_in_a_training_run(sample_traces: Path) -> None:
    t = _load(sample_traces / NSYS)
    found = detect_iterations(t)
    # h200_workload.py runs 3 warm-up steps, then the 60 NVTX steps; a trace cut at a GPU idle
    # gap inside the step makes whole pieces of 214 kernels, the last one possibly incomplete
    assert 62 <= len(found) <= 63
    sizes = (found["stop"] - found["first"]).to_numpy()
    assert (sizes[1:] == 214).all() and sizes[0] >= 214


def test_no_periodic_structure_no_iterations() -> None:
    names = [f"k{i}" for i in range(20)]
    t = Trace(
        TraceMeta(path="t", source_format="test"),
        kernels=make_table("kernels", 20, {"name": names, "short_name": names, "start": np.arange(20) * 10, "dur": np.full(20, 5)}),
    )
    assert detect_iterations(t).empty
    assert find_steps(t).empty


@pytest.mark.parametrize("n", [0, 3])
def test_tiny_traces(n: int) -> None:
    t = Trace(
        TraceMeta(path="t", source_format="test"),
        kernels=make_table("kernels", n, {"name": ["a"] * n, "short_name": ["a"] * n, "start": np.arange(n), "dur": np.ones(n)}),
    )
    assert find_steps(t).empty and len(kernel_steps(t, find_steps(t))) == n
