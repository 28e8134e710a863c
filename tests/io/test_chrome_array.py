"""Chrome's JSON Array Format (``[{"ph": ...}, ...]``, what other tools write): the events of a
real Kineto trace written as a bare array load as the same timeline as the original object."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from kviewer.io import load

ST = Path(__file__).resolve().parents[2] / "sample_traces"


def test_event_array_loads_like_the_object(tmp_path: Path) -> None:
    src = ST / "mlp_graph.pt.trace.json.gz"
    with gzip.open(src, "rt") as f:
        events = json.load(f)["traceEvents"]
    out = tmp_path / "events.json"
    out.write_text(json.dumps(events))
    arr, obj = load(out), load(src)
    assert len(arr.kernels) == len(obj.kernels) == sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    assert len(arr.cpu_slices) == len(obj.cpu_slices) > 0
    assert list(arr.kernels["name"].astype(str)) == list(obj.kernels["name"].astype(str))
    assert len(arr.graph_launches) == len(obj.graph_launches) > 0  # links by correlation still work
