"""The speed of light cached beside the parsed trace (a reopen is complete at once)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.io import load
from kviewer.session import analysis_cache
from kviewer.session.analyses import compute_sol
from kviewer.session.analysis_cache import sol_for_open

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_stored_sol_reads_back_equal_and_is_reused(cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    source = analysis_cache.identity(str(path))
    trace = load(path, use_cache=False)
    assert analysis_cache.get(source, trace) is None  # nothing stored yet
    first = sol_for_open(trace, source)
    assert first is not None and first.ok
    back = analysis_cache.get(source, trace)
    assert back is not None and back.ok and back.device is None
    pd.testing.assert_frame_equal(back.sol, first.sol)
    assert back.spec is not None and first.spec is not None and back.spec.id == first.spec.id == "h200"
    # a reopen takes it from the cache: nothing is computed again
    import kviewer.session.analyses as analyses

    monkeypatch.setattr(analyses, "compute_sol", lambda *a, **k: pytest.fail("computed again"))
    again = sol_for_open(load(path, use_cache=False), analysis_cache.identity(str(path)))
    assert again is not None and again.ok and np.array_equal(again.sol["bound"].to_numpy(), first.sol["bound"].to_numpy())


def test_a_touched_file_misses_and_no_cache_bypasses(cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    source = analysis_cache.identity(str(path))
    trace = load(path, use_cache=False)
    assert analysis_cache.put(source, trace, compute_sol(trace))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert analysis_cache.get(analysis_cache.identity(str(path)), trace) is None
    # the file changed since its load began: nothing is stored for it
    assert not analysis_cache.put(source, trace, compute_sol(trace))
    # a GPU the user chose is not the trace's own: not stored
    assert not analysis_cache.put(analysis_cache.identity(str(path)), trace, compute_sol(trace, "h100_pcie"))
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")
    assert analysis_cache.identity(str(path)) is None


def test_a_damaged_cache_is_a_miss(cache_on: Path, sample_traces: Path) -> None:
    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    source = analysis_cache.identity(str(path))
    trace = load(path, use_cache=False)
    assert analysis_cache.put(source, trace, compute_sol(trace))
    from kviewer.io.cache import DB_NAME  # the one cache database (traces and analyses)

    db = cache_on / "cache" / DB_NAME
    db.write_bytes(b"not a database" * 100)
    assert analysis_cache.get(source, trace) is None  # the damaged database goes
    assert analysis_cache.put(source, trace, compute_sol(trace))  # and a new one takes its place
    assert analysis_cache.get(source, trace) is not None


def test_fusion_candidates_are_cached_too(cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.session import analyses
    from kviewer.session.analysis_cache import fusion_for_open

    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    source = analysis_cache.identity(str(path))
    trace = load(path, use_cache=False)
    info = sol_for_open(trace, source)
    assert info is not None
    first = fusion_for_open(trace, info, source)
    assert len(first.candidates)
    monkeypatch.setattr(analyses, "fusion_for", lambda *a, **k: pytest.fail("computed again"))
    again = fusion_for_open(load(path, use_cache=False), info, analysis_cache.identity(str(path)))
    pd.testing.assert_frame_equal(again.candidates.drop(columns="kernel_ids"), first.candidates.drop(columns="kernel_ids"))
    assert again.candidates["kernel_ids"].tolist() == [[tuple(i) for i in ids] for ids in first.candidates["kernel_ids"]]
    assert again.kernel_ns == first.kernel_ns and again.summary() == first.summary()


def test_the_windows_mfu_is_the_cached_one_kviewer_whatif_reads(cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window's MFU of a trace on its own GPU goes through the analysis cache: a reopen reads
    what the first open (or kviewer whatif) stored instead of computing it again, and a GPU the
    user chose is computed and never stored."""
    import kviewer.analysis.mfu as mfu_mod
    from kviewer.session.mfu_view import compute_mfu

    path = cache_on / EAGER
    shutil.copy(sample_traces / EAGER, path)
    trace = load(path)  # through the trace cache: the load takes the file's identity
    source = trace.meta.source_id
    assert source is not None and analysis_cache.cached_mfu(source) is None
    info = sol_for_open(trace, source)
    assert info is not None and info.ok and info.device is None
    first = compute_mfu(trace, info)
    assert len(first.steps) and not first.totals.get("error")
    stored = analysis_cache.cached_mfu(source)
    assert stored is not None
    pd.testing.assert_frame_equal(stored.steps, first.steps)

    monkeypatch.setattr(mfu_mod, "mfu_or_unknown", lambda *a, **k: pytest.fail("computed again"))
    again = load(path)
    back = compute_mfu(again, sol_for_open(again, again.meta.source_id))
    pd.testing.assert_frame_equal(back.steps, first.steps)
    assert back.totals == first.totals

    monkeypatch.undo()
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(cache_on / "cache"))
    chosen = compute_sol(again, "h100_sxm")
    assert chosen.ok and chosen.device is not None
    analysis_cache.clear()
    other = compute_mfu(again, chosen)
    assert len(other.steps) and analysis_cache.cached_mfu(source) is None  # a chosen GPU is not stored
    assert not np.allclose(other.steps["mfu"].to_numpy(float), first.steps["mfu"].to_numpy(float), equal_nan=True)
