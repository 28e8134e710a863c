from __future__ import annotations

import numpy as np
import pytest

from kviewer.analysis.summary import SUMMARY_COLUMNS, kernel_summary
from kviewer.core import Trace, TraceMeta, make_table


def _trace(names: list[str], durs: list[int]) -> Trace:
    n = len(names)
    starts = np.cumsum([0] + durs[:-1]).tolist()
    return Trace(
        TraceMeta(path="t", source_format="test"),
        kernels=make_table("kernels", n, {"name": names, "short_name": names, "start": starts, "dur": durs}),
    )


def test_summary_statistics_match_numpy() -> None:
    rng = np.random.default_rng(0)
    names = list(rng.choice(["a", "b", "c"], size=200))
    durs = [int(x) for x in rng.integers(1, 10_000, size=200)]
    s = kernel_summary(_trace(names, durs))
    assert list(s.columns) == SUMMARY_COLUMNS
    assert s["total_ns"].is_monotonic_decreasing
    assert s["count"].sum() == 200
    assert s["time_pct"].sum() == pytest.approx(100.0)
    for row in s.itertuples():
        d = np.array([x for n, x in zip(names, durs) if n == row.name])
        assert row.count == len(d)
        assert row.total_ns == d.sum()
        assert row.avg_ns == pytest.approx(d.mean())
        assert row.med_ns == pytest.approx(np.median(d))
        assert row.min_ns == d.min() and row.max_ns == d.max()
        assert row.std_ns == pytest.approx(d.std(ddof=1))


def test_single_instance_has_zero_std_and_empty_trace_is_empty() -> None:
    s = kernel_summary(_trace(["x"], [5]))
    assert s.loc[0, "std_ns"] == 0.0 and s.loc[0, "time_pct"] == 100.0
    empty = kernel_summary(Trace(TraceMeta(path="t", source_format="test")))
    assert list(empty.columns) == SUMMARY_COLUMNS and len(empty) == 0
