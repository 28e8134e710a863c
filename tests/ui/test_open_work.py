"""Opening a file before the window asks for it (``kviewer FILE``): the window's load adopts
the prefetched result, its progress and its cancellation."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kviewer.errors import LoadCancelled
from kviewer.io import CancelToken
from kviewer.ui import open_work

EAGER = "h200_llm_block_eager.pt.trace.json.gz"


def test_the_load_adopts_the_prefetch_once(sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = open_work._load_file

    def counted(path: str, token: Any, progress: Any) -> Any:
        calls.append(threading.current_thread().name)
        return real(path, token, progress)

    monkeypatch.setattr(open_work, "_load_file", counted)
    path = str(sample_traces / EAGER)
    open_work.prefetch(path)
    seen: list[tuple[float, str]] = []
    tracks = open_work.load_file(path, CancelToken(), lambda f, m: seen.append((f, m)))
    assert len(calls) == 1 and calls[0].startswith("kviewer-prefetch")  # loaded once, on its thread
    assert len(tracks.trace.kernels) > 0 and seen and seen[-1][0] == pytest.approx(0.95)
    # a second open of the same file loads it again (the prefetch is used once)
    open_work.load_file(path, CancelToken(), lambda f, m: None)
    assert len(calls) == 2 and not calls[1].startswith("kviewer-prefetch")


def test_cancelling_the_load_cancels_the_prefetch(sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(path: str, token: Any, progress: Any) -> Any:
        started.set()
        assert release.wait(30)
        token.check()
        return "loaded"

    monkeypatch.setattr(open_work, "_load_file", slow)
    path = str(sample_traces / EAGER)
    open_work.prefetch(path)
    assert started.wait(30)
    token = CancelToken()
    token.cancel()
    threading.Timer(0.3, release.set).start()
    with pytest.raises(LoadCancelled):
        open_work.load_file(path, token, lambda f, m: None)
    open_work.forget()
