"""Shared fixtures: where the real samples are, and offscreen Qt."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests exercise the loaders, not the trace cache (tests/io/test_cache.py turns it on in a tmp
# dir): a cached parse must not hide a loader change, and tests never write to ~/.cache.
os.environ["KVIEWER_NO_CACHE"] = "1"
_OWN_CACHE_DIR: str | None = None
if "KVIEWER_CACHE_DIR" not in os.environ:
    import tempfile

    _OWN_CACHE_DIR = os.environ["KVIEWER_CACHE_DIR"] = tempfile.mkdtemp(prefix="kviewer-test-cache-")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Remove the session's throwaway cache folder (worker processes inherit the variable)."""
    if _OWN_CACHE_DIR is not None:
        import shutil

        shutil.rmtree(_OWN_CACHE_DIR, ignore_errors=True)

REPO = Path(__file__).resolve().parent.parent
SAMPLE_TRACES = REPO / "sample_traces"
SHARED_SAMPLES = Path(os.environ.get("KVIEWER_SAMPLES", REPO.parent / "shared" / "samples"))


@pytest.fixture(scope="session")
def samples() -> Path:
    """../shared/samples (the real profiler outputs); skips when the folder is absent."""
    if not SHARED_SAMPLES.is_dir():
        pytest.skip(f"real samples not found at {SHARED_SAMPLES} (set KVIEWER_SAMPLES)")
    return SHARED_SAMPLES


@pytest.fixture(scope="session")
def sample_traces() -> Path:
    """The small traces bundled with the repo."""
    return SAMPLE_TRACES
