"""range_summary: intervals across an edge are clipped; copies count pro rata; unknown stays unknown."""

from __future__ import annotations

import numpy as np

from kviewer.analysis.timerange import range_summary, union_ns
from kviewer.core import Trace, TraceMeta, make_table


def _trace() -> Trace:
    kernels = make_table("kernels", 3, dict(
        name=np.array(["a", "a", "b"], dtype=object), short_name=np.array(["a", "a", "b"], dtype=object),
        start=np.array([0, 100, 150]), dur=np.array([100, 100, 100]), device=np.zeros(3), stream=np.array([7, 7, 8])))
    ops = make_table("gpu_ops", 2, dict(
        kind=np.array(["memcpy", "memcpy"], dtype=object), name=np.array(["HtoD", "DtoH"], dtype=object),
        start=np.array([50, 120]), dur=np.array([100, 10]), bytes=np.array([1000, -1]),
        direction=np.array(["HtoD", "DtoH"], dtype=object), device=np.zeros(2), stream=np.array([9, 9])))
    return Trace(TraceMeta("t.json", "synthetic", "synthetic"), kernels=kernels, gpu_ops=ops)


def test_union() -> None:
    assert union_ns(np.array([0, 5, 20]), np.array([10, 8, 30])) == 20
    assert union_ns(np.array([], dtype=np.int64), np.array([], dtype=np.int64)) == 0


def test_clipped_to_the_range() -> None:
    r = range_summary(_trace(), 60, 160)
    k = r.kernels.set_index("name")
    assert k.loc["a", "count"] == 2 and k.loc["a", "total_ns"] == 40 + 60
    assert k.loc["b", "count"] == 1 and k.loc["b", "total_ns"] == 10
    assert np.isclose(k.loc["a", "range_pct"], 100.0)
    s = r.streams.set_index("stream")
    assert s.loc[7, "busy_ns"] == 100 and s.loc[7, "idle_ns"] == 0
    assert s.loc[8, "busy_ns"] == 10 and s.loc[9, "busy_ns"] == 90 + 0  # 60..150 HtoD holds 120..130 DtoH
    c = r.copies.set_index("direction")
    # 90 of the copy's 100 ns are inside: 90 % of its bytes
    assert c.loc["HtoD", "total_ns"] == 90 and np.isclose(c.loc["HtoD", "bytes"], 900.0)
    assert np.isclose(c.loc["HtoD", "bandwidth_gbs"], 10.0)
    # a copy of unknown size: its bytes and bandwidth stay unknown, never 0
    assert np.isnan(c.loc["DtoH", "bytes"]) and np.isnan(c.loc["DtoH", "bandwidth_gbs"])
