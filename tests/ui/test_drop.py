"""Opening real files the way a user does: dropping them on the main window."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt

from kviewer.ui.viewstate import Selection
from tests.ui.conftest import drop_files, wait_idle

#: loader name -> a real file of that format (relative to ../shared/samples, or "bundled:" for
#: sample_traces/, or "ranks:" for a folder made of two bundled torch traces)
DROP_CASES: dict[str, list[str]] = {
    "torch": [
        "bundled:h200_llm_block_eager.pt.trace.json.gz",
        "torch/worker0.1623143089861.pt.trace.json.gz",
        "torch/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    ],
    "nsys": ["nsys/h200_llm_train_nvtx.sqlite", "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"],
    "ncu-rep": ["ncu/h200_llm_block_eager.ncu-rep"],
    "ncu-csv": ["ncu/h200_llm_block_eager.raw.csv"],
    "rocprofv3-json": ["rocprof/rocprofv3_json_tracelens/908_results.json.gz"],
    "rocprof-v1-csv": ["rocprof/hpctraining_finite_difference/results.csv"],
    "rocprof-v1-db": ["rocprof/gunrock_mi300/results.db"],
    "rocprofv2-csv": ["rocprof/rocprofv2_omniperf_mi300x/timestamps.csv"],
    "rocprofv3-csv": ["rocprof/rocprofv3_2025/ps_file_kernel_trace.csv"],
    "ranks": ["ranks:h200_llm_block_eager.pt.trace.json.gz,h200_llm_block_compiled.pt.trace.json.gz"],
    # exported through nsys (a stand-in that copies nsys's own export of this report: see
    # tests/io/test_nsys_rep.py); also a trace with CUDA graph launches
    "nsys-rep": ["bundled:mlp_graph_nsys_graph.nsys-rep"],
}


def _registered() -> set[str]:
    from kviewer.io import loaders

    return {spec.name for spec in loaders()}


def _resolve(case: str, samples_dir: Path | None, sample_traces: Path, tmp_path: Path) -> Path:
    if case.startswith("bundled:"):
        return sample_traces / case.split(":", 1)[1]
    if case.startswith("ranks:"):
        folder = tmp_path / "job"
        folder.mkdir()
        for rank, name in enumerate(case.split(":", 1)[1].split(",")):
            shutil.copy(sample_traces / name, folder / f"rank-{rank}.pt.trace.json.gz")
        return folder
    assert samples_dir is not None
    return samples_dir / case


def test_every_registered_format_has_a_drop_case() -> None:
    missing = _registered() - set(DROP_CASES)
    assert not missing, f"add a drop test file for {sorted(missing)}"


@pytest.mark.parametrize(
    "fmt,case",
    [pytest.param(fmt, case, id=f"{fmt}:{Path(case).name}") for fmt, cases in DROP_CASES.items() for case in cases],
)
def test_drop_opens_file(
    fmt: str, case: str, qtbot: Any, window: Any, errors: Any, request: pytest.FixtureRequest,
    sample_traces: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, qtmodeltester: Any,
) -> None:
    if fmt not in _registered():
        pytest.skip(f"no {fmt} loader registered yet")
    monkeypatch.setenv("KVIEWER_RANK_WORKERS", "1")  # no worker processes inside the Qt test
    samples_dir = None if case.split(":")[0] in ("bundled", "ranks") else request.getfixturevalue("samples")
    path = _resolve(case, samples_dir, sample_traces, tmp_path)

    from kviewer.io import detect

    assert detect(path).name == fmt  # the drop really exercises this format's loader
    if fmt == "nsys-rep":
        from tests.io.test_nsys_rep import EXPORT, _fake_nsys

        export = tmp_path / "export.sqlite"
        export.write_bytes(gzip.decompress(EXPORT.read_bytes()))
        monkeypatch.setenv("KVIEWER_NSYS", str(_fake_nsys(tmp_path, export)))

    assert drop_files(window, [path])
    wait_idle(qtbot, window)
    assert errors.calls == []
    state = window.state
    assert len(state.traces) == 1
    tracks = state.traces[0]
    trace = tracks.trace
    n_kernels = len(trace.kernels)
    assert n_kernels > 0

    # tracks: one lane per stream at least, and every kernel has a bar
    assert window.timeline.lane_count() >= 1
    assert (tracks.lane_of["kernels"] >= 0).all()
    streams = {(int(r), int(d), int(s)) for r, d, s in zip(trace.kernels["rank"], trace.kernels["device"], trace.kernels["stream"])}
    # the stream lanes (kernel lanes that are some kernel's home; a graph group's kernels are copies)
    kernel_lanes = [ln for ln in tracks.lanes if ln.table == "kernels" and (tracks.lane_of["kernels"] == ln.index).any()]
    assert len(kernel_lanes) == len(streams)

    # table rows: one per kernel; the model is a correct Qt model
    model = window.table.model
    assert model.rowCount() == n_kernels
    qtmodeltester.check(model, force_py=True)

    # selecting a table row selects that kernel on the timeline and brings it into view
    row = min(n_kernels - 1, n_kernels // 2)
    window.table.select_row(row)
    key, kernel, _members = model.selection_for_row(row)
    assert state.selection == Selection(key, "kernels", kernel)
    t0, t1 = window.timeline.visible_range()
    start = float(trace.kernels["start"].iat[kernel] - tracks.offset_ns)
    end = float(trace.kernels["end"].iat[kernel] - tracks.offset_ns)
    assert t0 <= start and end <= t1

    # W zooms in, S zooms out
    window.timeline.canvas.setFocus()
    before = window.timeline.visible_range()
    qtbot.keyClick(window.timeline.canvas, Qt.Key.Key_W)
    after_w = window.timeline.visible_range()
    assert after_w[1] - after_w[0] < before[1] - before[0]
    qtbot.keyClick(window.timeline.canvas, Qt.Key.Key_S)
    qtbot.keyClick(window.timeline.canvas, Qt.Key.Key_S)
    after_s = window.timeline.visible_range()
    assert after_s[1] - after_s[0] > after_w[1] - after_w[0]
    assert state.range == pytest.approx(after_s)

    # the status bar names the file and the kernel count
    status = window.status_label.text()
    assert path.name in status and f"{n_kernels:,} kernels" in status


def _open_torch(qtbot: Any, window: Any, sample_traces: Path) -> None:
    assert drop_files(window, [sample_traces / "h200_llm_block_eager.pt.trace.json.gz"])
    wait_idle(qtbot, window)
    assert len(window.state.traces) == 1


@pytest.mark.parametrize("kind", ["random-bytes", "truncated-gzip", "empty", "malformed-json"])
def test_corrupt_drop_reports_error_and_keeps_trace(
    kind: str, qtbot: Any, window: Any, errors: Any, sample_traces: Path, tmp_path: Path
) -> None:
    if "torch" not in _registered():
        pytest.skip("no torch loader registered yet")
    _open_torch(qtbot, window, sample_traces)
    bad = tmp_path / f"bad-{kind}.json.gz"
    if kind == "random-bytes":
        bad.write_bytes(np.random.default_rng(1).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    elif kind == "truncated-gzip":
        data = (sample_traces / "h200_llm_block_eager.pt.trace.json.gz").read_bytes()
        bad.write_bytes(data[:200])
    elif kind == "empty":
        bad.write_bytes(b"")
    else:
        bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "name": "k", "ts": 1,'))
    assert drop_files(window, [bad])
    wait_idle(qtbot, window)
    assert len(errors.calls) == 1
    title, text = errors.calls[0]
    assert bad.name in text
    assert len(window.state.traces) == 1  # the open trace stays
    assert window.table.model.rowCount() == len(window.state.traces[0].trace.kernels)


def test_malformed_rocprof_json_sample(qtbot: Any, window: Any, errors: Any, samples: Path) -> None:
    bad = samples / "rocprof/hpctraining_finite_difference/results.json"
    assert drop_files(window, [bad])
    wait_idle(qtbot, window)
    assert len(errors.calls) == 1 and "results.json" in errors.calls[0][1]
    assert window.state.traces == []


def test_loader_exception_is_reported(qtbot: Any, window: Any, errors: Any, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kviewer.io

    def broken(path: Any, progress: Any = None, cancel: Any = None) -> Any:
        raise RuntimeError("boom in the loader")

    monkeypatch.setattr(kviewer.io, "load", broken)
    assert drop_files(window, [sample_traces / "h200_llm_block_eager.pt.trace.json.gz"])
    wait_idle(qtbot, window)
    assert len(errors.calls) == 1
    assert "boom in the loader" in errors.calls[0][1] and "h200_llm_block_eager" in errors.calls[0][1]
    assert window.state.traces == []


def test_cancel_stops_load_without_error(qtbot: Any, window: Any, errors: Any, sample_traces: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import kviewer.io

    started = threading.Event()

    def slow(path: Any, progress: Any = None, cancel: Any = None) -> Any:
        started.set()
        for i in range(2000):
            progress(i / 2000, "reading")
            cancel.check()
            threading.Event().wait(0.005)
        raise AssertionError("the load was not cancelled")

    monkeypatch.setattr(kviewer.io, "load", slow)
    window.open_files([str(sample_traces / "h200_llm_block_eager.pt.trace.json.gz")])
    qtbot.waitUntil(started.is_set, timeout=10_000)
    assert window.loader.busy
    from PySide6.QtWidgets import QPushButton

    qtbot.waitUntil(lambda: window.loader.dialog is not None and window.loader.dialog.isVisible(), timeout=10_000)
    window.loader.dialog.findChild(QPushButton).click()  # the progress dialog's Cancel button
    wait_idle(qtbot, window, timeout=20_000)
    assert errors.calls == []
    assert window.state.traces == []


def test_two_traces_open_and_close(qtbot: Any, window: Any, errors: Any, sample_traces: Path) -> None:
    if "torch" not in _registered():
        pytest.skip("no torch loader registered yet")
    files = [sample_traces / "h200_llm_block_eager.pt.trace.json.gz", sample_traces / "h200_llm_block_compiled.pt.trace.json.gz"]
    assert drop_files(window, files)
    wait_idle(qtbot, window)
    assert errors.calls == []
    traces = window.state.traces
    assert len(traces) == 2
    total = sum(len(t.trace.kernels) for t in traces)
    assert window.table.model.rowCount() == total
    # two files at once start compare mode (in the background): each trace is its own track
    # group, labelled A and B
    qtbot.waitUntil(lambda: window.compare.active, timeout=20_000)
    roots = [r for r in window.timeline.rows if r.kind == "header" and r.depth == 0]
    assert [r.label for r in roots] == [f"{side} · {f.name}" for side, f in zip("AB", files)]
    # recent files remember both, newest first
    assert window.recent_files()[:2] == [str(files[1].resolve()), str(files[0].resolve())]
    window.close_trace(traces[0].key)
    assert len(window.state.traces) == 1
    assert not window.compare.active  # closing a side ends the comparison
    assert window.state.traces[0].root.label == files[1].name
    assert window.table.model.rowCount() == len(window.state.traces[0].trace.kernels)
    assert all(r.tracks is window.state.traces[0] for r in window.timeline.rows)


def test_drop_ignores_non_file_urls(window: Any) -> None:
    from PySide6.QtCore import QMimeData, QPointF
    from PySide6.QtGui import QDragEnterEvent
    from PySide6.QtWidgets import QApplication

    mime = QMimeData()
    mime.setText("just text")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        ev = QDragEnterEvent(QPointF(10, 10).toPoint(), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, ev)
    assert not ev.isAccepted()
