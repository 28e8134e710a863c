"""The timeline's row layout without Qt (session/lanes.py): pin, move, hide, collapse, filter,
and the layout saved with the window coming back on a new trace of the same kind. The widget
(tests/ui/test_timeline_rows.py) only sends these commands and paints the rows."""

from __future__ import annotations

import json

import numpy as np

from kviewer.core import Trace, TraceMeta
from kviewer.core.schema import make_table
from kviewer.session.lanes import LaneLayout, SavedLayout
from kviewer.session.tracks import Group, TraceTracks


def three_streams(n: int = 30, path: str = "t.json") -> Trace:
    start = np.arange(n, dtype=np.int64) * 1000
    kernels = make_table("kernels", n, {"name": [f"k{i % 2}" for i in range(n)], "start": start, "dur": np.full(n, 500),
                                        "device": np.zeros(n), "stream": 7 + np.arange(n) % 3})
    cpu = make_table("cpu_slices", 3, {"name": ["outer", "inner", "later"], "start": np.array([0, 10, 50_000]),
                                       "end": np.array([40_000, 20_000, 60_000]), "category": ["cpu_op"] * 3,
                                       "pid": np.full(3, 1), "tid": np.full(3, 2)})
    return Trace(meta=TraceMeta(path=path, source_format="test"), kernels=kernels, cpu_slices=cpu)


def streams(layout: LaneLayout, traces: list[TraceTracks]) -> list[str]:
    return [r.label for r in layout.layout(traces) if r.kind == "lane" and "stream" in r.label]


def test_pin_move_hide_collapse_and_filter() -> None:
    tracks = TraceTracks.build(three_streams())
    layout = LaneLayout()
    assert streams(layout, [tracks]) == ["stream 7", "stream 8", "stream 9"]
    s9 = next(ln for ln in tracks.lanes if ln.label == "stream 9")
    assert layout.pin(tracks, s9) and not layout.pin(tracks, s9)
    rows = layout.layout([tracks])
    assert rows[0].label == "Pinned" and rows[1].lane is s9 and layout.lane_rows[(tracks.key, s9.index)] is rows[1]
    assert streams(layout, [tracks]) == ["stream 9", "stream 7", "stream 8"]
    layout.unpin(s9)
    layout.layout([tracks])
    row9 = layout.lane_rows[(tracks.key, s9.index)]
    assert layout.move(row9, -1) and not layout.move(layout.layout([tracks])[0], -1)  # a trace root does not move
    assert streams(layout, [tracks]) == ["stream 7", "stream 9", "stream 8"]
    layout.hide(s9)
    assert streams(layout, [tracks]) == ["stream 7", "stream 8"] and (tracks.key, s9.index) not in layout.lane_rows
    layout.unhide_all()
    # collapsing a group draws its header for every lane under it
    gpu = next(r for r in layout.layout([tracks]) if r.kind == "header" and r.label.startswith("GPU"))
    layout.toggle(gpu.group)
    rows = layout.layout([tracks])
    assert streams(layout, [tracks]) == [] and layout.lane_rows[(tracks.key, s9.index)].group is gpu.group
    assert layout.expand_to(tracks, s9) and not layout.expand_to(tracks, s9)
    # the filter keeps matching lanes and the groups above them
    layout.set_filter("  stream 8 ")
    assert [r.label for r in layout.layout([tracks]) if r.kind != "header"] == ["stream 8"]
    layout.set_filter("")
    assert len([r for r in layout.layout([tracks]) if r.kind == "lane"]) == len(tracks.lanes)
    # rows are stacked without gaps or overlaps inside a trace
    ys = [(r.y, r.h) for r in layout.rows]
    assert all(y0 + h0 <= y1 for (y0, h0), (y1, _h1) in zip(ys, ys[1:]))


def test_the_saved_layout_comes_back_on_a_new_trace_of_the_same_kind() -> None:
    first = TraceTracks.build(three_streams(path="run1.json"))
    layout = LaneLayout()
    layout.layout([first])
    lanes = {ln.label: ln for ln in first.lanes}
    layout.pin(first, lanes["stream 9"])
    layout.hide(lanes["stream 7"])
    cpu = next(r for r in layout.layout([first]) if r.kind == "header" and r.label.startswith("CPU"))
    layout.toggle(cpu.group)
    layout.set_filter("stream")
    saved = layout.saved([first])
    text = json.dumps(saved.to_json())  # what the window writes into its settings
    assert saved.filter == "stream" and saved.pinned == ["GPU 0 › stream 9"] and saved.hidden == ["GPU 0 › stream 7"]

    second = TraceTracks.build(three_streams(path="run2.json"))  # another run, new objects
    again = LaneLayout()
    again.restore(SavedLayout.from_json(json.loads(text)))
    rows = again.layout([second])
    s9 = next(ln for ln in second.lanes if ln.label == "stream 9")
    s7 = next(ln for ln in second.lanes if ln.label == "stream 7")
    assert rows[0].label == "Pinned" and rows[1].lane is s9
    assert s7 in again.hidden and again.filter == "stream"
    assert next(g for g in second.root.children if isinstance(g, Group) and g.label.startswith("CPU")).collapsed
    # a malformed setting is ignored, never an error
    assert SavedLayout.from_json({"hidden": "x", "order": [1], "filter": 3}) == SavedLayout()
    assert SavedLayout.from_json(None) == SavedLayout()


def test_a_saved_order_of_siblings_comes_back() -> None:
    first = TraceTracks.build(three_streams())
    layout = LaneLayout()
    layout.layout([first])
    s9 = next(ln for ln in first.lanes if ln.label == "stream 9")
    layout.move(layout.lane_rows[(first.key, s9.index)], -2)
    assert streams(layout, [first]) == ["stream 9", "stream 7", "stream 8"]
    saved = SavedLayout.from_json(json.loads(json.dumps(layout.saved([first]).to_json())))
    assert [[x for x in v if x.startswith("stream")] for v in saved.order.values()] == [["stream 9", "stream 7", "stream 8"]]
    second = TraceTracks.build(three_streams())
    again = LaneLayout()
    again.restore(saved)
    assert streams(again, [second]) == ["stream 9", "stream 7", "stream 8"]
