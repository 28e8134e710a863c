"""The Qt-free session: the open document and the evented view state (no Qt imported)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kviewer.core import Trace, TraceMeta, make_table
from kviewer.session.document import Document
from kviewer.session.events import Event
from kviewer.session.tracks import TraceTracks
from kviewer.session.viewstate import FILTER, PICK, Selection, ViewState


def small_trace(n: int = 6) -> Trace:
    start = np.arange(n, dtype=np.int64) * 1000
    kernels = make_table("kernels", n, {"name": [f"k{i % 2}" for i in range(n)], "short_name": [f"k{i % 2}" for i in range(n)],
                                        "start": start, "dur": np.full(n, 500), "device": np.zeros(n), "stream": np.full(n, 7)})
    return Trace(meta=TraceMeta(path="small.json", source_format="test"), kernels=kernels)


def record(state: ViewState) -> list[tuple[Any, ...]]:
    """Every event the state emits, in order."""
    seen: list[tuple[Any, ...]] = []
    for name in ("traces_changed", "range_changed", "selection_changed", "reveal_requested", "highlight_changed",
                 "filter_changed", "current_changed", "stack_changed"):
        getattr(state, name).connect(lambda *args, _n=name: seen.append((_n, *args)))
    return seen


def test_event_calls_callbacks_in_order_and_forgets_them() -> None:
    calls: list[str] = []
    ev = Event("x")

    def a(v: int) -> None:
        calls.append(f"a{v}")

    ev.connect(a)
    ev.connect(lambda v: calls.append(f"b{v}"))
    ev.emit(1)
    ev.disconnect(a)
    ev.emit(2)
    assert calls == ["a1", "b1", "b2"]


def test_setters_emit_only_on_change() -> None:
    state = ViewState()
    seen = record(state)
    t = TraceTracks.build(small_trace())
    state.add_trace(t)
    assert seen == [("traces_changed",), ("current_changed", t)]
    seen.clear()
    state.set_range(0, 10)
    state.set_range(0, 10)
    state.set_range(5, 5)  # empty: ignored
    sel = Selection(t.key, "kernels", 2)
    state.set_selection(sel, reveal=True)
    state.set_selection(sel)
    state.set_filter("k1")
    state.set_filter("k1")
    assert seen == [("range_changed", 0.0, 10.0), ("selection_changed", sel), ("reveal_requested", sel), ("filter_changed", "k1")]


def test_highlight_has_one_rule_pick_over_filter() -> None:
    state = ViewState()
    t = TraceTracks.build(small_trace())
    state.add_trace(t)
    filt = {t.key: np.array([True, False] * 3)}
    pick = {t.key: np.array([False, False, True, True, False, False])}
    state.set_highlight(filt, FILTER)
    assert state.highlight is not None and state.highlight[t.key].tolist() == filt[t.key].tolist()
    state.set_highlight(pick)  # a group, roofline points, a fusion candidate, a compare row
    assert state.highlight[t.key].tolist() == pick[t.key].tolist()
    # the table refreshes its filter highlight (traces reloaded): the pick stays on top
    state.set_highlight(filt, FILTER)
    assert state.highlight[t.key].tolist() == pick[t.key].tolist()
    # clearing the pick shows the filter's highlight again, not nothing
    state.clear_highlight(PICK)
    assert state.highlight[t.key].tolist() == filt[t.key].tolist()
    # a new filter text replaces a pick
    state.set_highlight(pick)
    state.set_filter("k0")
    assert state.highlight[t.key].tolist() == filt[t.key].tolist()
    state.clear_highlight()
    assert state.highlight == {}
    with pytest.raises(ValueError, match="unknown highlight layer"):
        state.set_highlight(pick, "roofline")


def test_zoom_filter_stack_push_pop_reset() -> None:
    state = ViewState()
    seen = record(state)
    state.set_range(0, 100)
    state.push((10, 20))
    state.push((12, 14), filter_text="k1")
    assert state.range == (12.0, 14.0) and state.filter_text == "k1" and len(state.stack) == 2
    assert state.pop()
    assert state.range == (10.0, 20.0) and state.filter_text == ""
    state.push(filter_text="dur > 1us")
    state.set_range(1, 2)
    state.reset()
    assert state.range == (0.0, 100.0) and state.filter_text == "" and state.stack == []
    assert not state.pop()
    assert ("stack_changed",) in seen and ("filter_changed", "k1") in seen and ("filter_changed", "") in seen


def test_closing_a_trace_forgets_what_belongs_to_it() -> None:
    state = ViewState()
    doc = state.document
    a, b = TraceTracks.build(small_trace()), TraceTracks.build(small_trace())
    state.add_trace(a)
    state.add_trace(b)
    state.set_selection(Selection(b.key, "kernels", 1))
    state.set_highlight({a.key: np.ones(6, bool), b.key: np.ones(6, bool)})
    from types import SimpleNamespace

    from kviewer.analysis.fusion import FusionResult
    from kviewer.session.analyses import SolInfo
    from kviewer.session.open_trace import FUSION, Ready

    report = small_trace()
    doc.attach(b.key, report, SimpleNamespace(trace=small_trace()), SolInfo(None, no_kernels=True))
    assert doc.report_of(b.key) is report and b.trace is not doc.base_of(b.key)
    doc.settle(b.key, FUSION, Ready(FusionResult(make_table("kernels", 0), 0.0)))
    changed: list[int] = []
    doc.analysis_changed.connect(changed.append)
    order: list[str] = []
    state.selection_changed.connect(lambda s: order.append("selection"))
    state.traces_changed.connect(lambda: order.append("traces"))
    state.remove_trace(b.key)
    assert state.traces == [a] and state.current is a and state.selection is None
    assert order == ["selection", "traces"]  # views reload after the selection is settled
    assert b.key not in state.highlight and a.key in state.highlight
    assert doc.report_of(b.key) is None and doc.fusion(b.key) is None and changed == [b.key]
    assert doc.base_of(a.key) is a.trace and doc.base_of(b.key) is None


def test_set_sol_recolours_and_drops_results_of_the_old_one() -> None:
    from kviewer.analysis.fusion import FusionResult
    from kviewer.analysis.sol import SolResult
    from kviewer.core.schema import SOL
    from kviewer.session.analyses import SolInfo

    doc = Document()
    trace = small_trace()
    t = TraceTracks.build(trace)
    doc.add(t)
    from kviewer.session.open_trace import FUSION, Ready

    doc.settle(t.key, FUSION, Ready(FusionResult(make_table("kernels", 0), 0.0)))
    reloads: list[bool] = []
    doc.traces_changed.connect(lambda: reloads.append(True))
    n = len(trace.kernels)
    table = make_table(SOL, n, {"id": np.arange(n), "dur": np.full(n, 500), "bound": ["memory"] * n, "t_sol_ns": np.full(n, 100.0)})
    doc.set_sol(t.key, SolInfo(SolResult(table)))
    assert doc.sol(t.key) is t.sol_info and t.sol_column("bound").tolist() == ["memory"] * n
    assert doc.fusion(t.key) is None and reloads == [True]
    lane = next(ln for ln in t.lanes if ln.table == "kernels")
    assert lane.inner is not None and np.allclose(lane.inner, 100.0)


def test_zoom_target_is_the_newer_of_the_range_and_the_bar() -> None:
    state = ViewState()
    tracks = TraceTracks.build(small_trace())
    state.add_trace(tracks)
    assert state.zoom_target() is None  # F fits everything
    state.set_time_selection((2500.0, 2000.0))
    assert state.zoom_target() == (2000.0, 2500.0)  # the dragged range, exactly
    state.set_selection(Selection(tracks.key, "kernels", 3))
    s = 3000.0 - tracks.offset_ns
    assert state.zoom_target() == (s - 75.0, s + 575.0)  # the newer bar with 15 % context
    state.set_time_selection((100.0, 200.0))
    assert state.zoom_target() == (100.0, 200.0)
    state.set_time_selection(None)
    assert state.zoom_target() == (s - 75.0, s + 575.0)
