"""Event categories kviewer does not know are kept and counted in a warning (kind unknown_category),
never dropped silently; the real traces we have carry none."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
ST = REPO / "sample_traces"


@pytest.mark.parametrize("name", ["gpt_train_memory.pt.trace.json.gz", "mlp_graph.pt.trace.json.gz", "h200_llm_block_eager.pt.trace.json.gz"])
def test_real_traces_have_no_unknown_category(name: str) -> None:
    assert not [d for d in load(ST / name).meta.warnings if d.kind == "unknown_category"]


def test_unknown_category_counted(tmp_path: Path) -> None:
    """The python frames of a real trace relabelled with a category no rule knows (as an accelerator
    other than CUDA/ROCm writes its own): all kept, counted in one warning."""
    with gzip.open(ST / "gpt_train_memory.pt.trace.json.gz", "rt") as f:
        doc = json.load(f)
    n = 0
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "python_function":
            e["cat"] = "mtia_ccp_events"
            n += 1
    out = tmp_path / "relabelled.json"
    out.write_text(json.dumps(doc))
    trace = load(out)
    (w,) = [d for d in trace.meta.warnings if d.kind == "unknown_category"]
    assert f"{n:,}" in w.message and "mtia_ccp_events" in w.message
    assert int((trace.cpu_slices["category"].astype(str) == "other").sum()) >= n


def test_device_events_of_another_accelerator_are_not_cpu_only(tmp_path: Path) -> None:
    """A real trace's GPU events relabelled with an unknown device category (as an MTIA trace
    writes its own): the trace is not called "CPU only", and every relabelled event is counted."""
    with gzip.open(ST / "mlp_graph.pt.trace.json.gz", "rt") as f:
        doc = json.load(f)
    n = 0
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            e["cat"] = "mtia_ccp_events"
            n += 1
    out = tmp_path / "accelerator.json"
    out.write_text(json.dumps(doc))
    trace = load(out)
    assert len(trace.kernels) == 0 and n > 0
    assert "CPU only" not in trace.meta.format_label and f"{n:,} events of unknown categories" in trace.meta.format_label
