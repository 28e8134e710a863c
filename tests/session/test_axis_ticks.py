"""Time axis labels (issue 27): every level labelled together, so no label appears twice."""

from __future__ import annotations

from kviewer.session.axis_ticks import tick_labels


def _flat(levels: list[tuple[float, list[float]]]) -> list[str]:
    return [s for labels in tick_labels(levels) for s in labels]


def test_minor_ticks_late_in_a_trace_are_offsets_from_the_one_anchor() -> None:
    # pyqtgraph's own levels for 8.2611 s .. 8.2614 s on 1200 px: each level used to be written
    # as offsets from its own first tick, so "+50 µs" (and more) appeared twice
    major = [8_261_100_000.0 + 50_000.0 * i for i in range(7)]
    minor = [8_261_110_000.0, 8_261_120_000.0, 8_261_160_000.0]
    labels = tick_labels([(50_000.0, major), (10_000.0, minor)])
    assert labels[0][:3] == ["8.26110 s", "+50 µs", "+100 µs"]
    assert labels[1] == ["+10 µs", "+20 µs", "+60 µs"]
    flat = _flat([(50_000.0, major), (10_000.0, minor)])
    assert len(set(flat)) == len(flat)


def test_near_zero_every_level_uses_the_major_unit_and_its_own_precision() -> None:
    labels = tick_labels([(200_000.0, [0.0, 200_000.0, 1_000_000.0]), (100_000.0, [100_000.0, 300_000.0]),
                          (20_000.0, [20_000.0, 40_000.0])])
    assert labels == [["0 µs", "200 µs", "1000 µs"], ["100 µs", "300 µs"], ["20 µs", "40 µs"]]
    ms = tick_labels([(1e6, [0.0, 1e6]), (5e5, [5e5, 1.5e6]), (1e5, [1e5, 2e5])])
    assert ms == [["0 ms", "1 ms"], ["0.5 ms", "1.5 ms"], ["0.1 ms", "0.2 ms"]]


def test_precision_grows_with_zoom_and_a_tick_below_zero_reads_zero() -> None:
    assert tick_labels([(2.5e6, [-1e-9, 2.5e6, 5e6])]) == [["0.0 ms", "2.5 ms", "5.0 ms"]]
    # ticks before the anchor (a finer level left of the first major tick) carry a minus sign
    labels = tick_labels([(1e4, [5e9, 5e9 + 1e4]), (2e3, [5e9 - 2e3, 5e9 + 2e3])])
    assert labels == [["5.00000 s", "+10 µs"], ["−2 µs", "+2 µs"]]


def test_no_ticks_no_labels() -> None:
    assert tick_labels([]) == []
    assert tick_labels([(1e6, []), (0.0, [1.0])]) == [[], [""]]


def test_the_anchor_is_a_tick_clear_of_the_left_edge() -> None:
    # a major tick exactly on the view's left edge is not drawn: the next one is written in full
    major = [8_261_100_000.0 + 50_000.0 * i for i in range(4)]
    labels = tick_labels([(50_000.0, major), (10_000.0, [8_261_110_000.0])], visible_from=8_261_100_000.0)
    assert labels == [["−50 µs", "8.26115 s", "+50 µs", "+100 µs"], ["−40 µs"]]
