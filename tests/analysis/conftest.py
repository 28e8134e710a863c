"""Loading helpers for the analysis tests: each loader is used directly (not through the registry)
so these tests depend only on the loader they read with, and skip with a reason until it exists."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from kviewer.core import Trace


def load_with(module: str, path: Path) -> Trace:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:  # the loader is being written elsewhere
        pytest.skip(f"{module} not available: {exc}")
    from kviewer.io.registry import CancelToken

    trace: Trace = mod.LOADER.load(Path(path), lambda fraction, message: None, CancelToken())
    return trace


@pytest.fixture(scope="session")
def eager(sample_traces: Path) -> Trace:
    return load_with("kviewer.io.torch", sample_traces / "h200_llm_block_eager.pt.trace.json.gz")


@pytest.fixture(scope="session")
def compiled(sample_traces: Path) -> Trace:
    return load_with("kviewer.io.torch", sample_traces / "h200_llm_block_compiled.pt.trace.json.gz")
