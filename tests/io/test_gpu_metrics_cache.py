"""The new tables (gpu_samples, kernel_stats) and the summary-only flags survive the trace cache."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kviewer.io import load


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)


def test_gpu_samples_round_trip(sample_traces: Path) -> None:
    path = sample_traces / "gpt_train_gpu_metrics.sqlite.gz"
    fresh = load(path, use_cache=False)
    load(path, use_cache=True)  # stores
    cached = load(path, use_cache=True)
    assert len(fresh.gpu_samples) == 15_312
    pd.testing.assert_frame_equal(cached.gpu_samples, fresh.gpu_samples)


def test_summary_only_round_trip(samples: Path) -> None:
    path = samples / "rocprof/hpctraining_finite_difference/results.stats.csv"
    fresh = load(path, use_cache=False)
    load(path, use_cache=True)
    cached = load(path, use_cache=True)
    assert cached.meta.summary_only and cached.meta.timeline_needs == fresh.meta.timeline_needs
    pd.testing.assert_frame_equal(cached.kernel_stats, fresh.kernel_stats)
