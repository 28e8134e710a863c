"""The dependency graph and critical paths cached beside the parsed trace: ``kviewer whatif``
after ``kviewer critpath`` does not rebuild the graph (nor, the second time, the MFU and the
speed of light it needs), and a second ``critpath`` does not even load the trace (issue 24, the
two-command speed goal)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from kviewer.cli import main
from kviewer.io import load
from kviewer.session import graph_cache

SYNC = "mlp_sync.pt.trace.json.gz"


@pytest.fixture
def cache_on(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def test_the_graph_base_reads_back_equal(sample_traces: Path) -> None:
    trace = load(sample_traces / SYNC, use_cache=False)
    base = graph_cache.graph_base(trace, use_cache=False)
    back = graph_cache.decode_base(graph_cache.encode_base(base))
    for name, value in vars(base.graph).items():
        other = getattr(back.graph, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and np.array_equal(value, other), name
        else:
            assert value == other, name
    assert back.source == base.source and len(back.windows) == len(base.windows)
    for a, b in zip(base.windows, back.windows):
        assert (a.name, a.marker_start, a.marker_end, a.thread) == (b.name, b.marker_start, b.marker_end, b.thread)
        assert np.array_equal(a.gpu, b.gpu)
    for name, value in vars(base.measured).items():
        assert np.array_equal(value, getattr(back.measured, name)), name


def test_whatif_after_critpath_reuses_the_graph_and_critpath_its_paths(cache_on: Path, sample_traces: Path,
                                                                       monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = cache_on / SYNC
    shutil.copy(sample_traces / SYNC, path)
    assert main(["critpath", str(path), "-q", "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["whatif", str(path), "-q", "--format", "json", "--cuda-graphs"]) == 0
    fresh = json.loads(capsys.readouterr().out)

    import kviewer.analysis.depgraph as depgraph
    import kviewer.cli.common as common

    def fail(*_a: object, **_k: object) -> None:
        raise AssertionError("rebuilt")

    import kviewer.analysis.mfu as mfu
    import kviewer.analysis.sol as sol

    monkeypatch.setattr(depgraph, "build_graph", fail)
    monkeypatch.setattr(mfu, "mfu_or_unknown", fail)
    monkeypatch.setattr(sol, "sol_result", fail)
    assert main(["whatif", str(path), "-q", "--format", "json", "--cuda-graphs"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again == fresh  # the same projection from the cached graph, the same MFU from the cache
    assert any(st["mfu"] is not None for st in again["steps"])
    monkeypatch.setattr(common, "load_for", fail)
    assert main(["critpath", str(path), "-q", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == first  # the same paths without loading the trace
    # --no-cache neither reads nor writes: it loads (and fails here)
    with pytest.raises(AssertionError, match="rebuilt"):
        main(["critpath", str(path), "-q", "--no-cache"])


def test_whatif_of_the_graph_alone_does_not_load_the_trace_when_graph_and_mfu_are_cached(
        cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--cuda-graphs`` (or no change) projects from the graph alone: a file seen before is not
    loaded; a change that reads the trace's tables (``--no-sync``) still loads it, and so does
    ``--no-cache``. The outputs are the same either way (issue 24, the speed goal)."""
    path = cache_on / SYNC
    shutil.copy(sample_traces / SYNC, path)
    outs: dict[str, str] = {}
    for fmt in ("json", "csv", "table"):
        assert main(["whatif", str(path), "-q", "--format", fmt, "--cuda-graphs"]) == 0  # builds and stores graph + MFU
        outs[fmt] = capsys.readouterr().out
    assert main(["whatif", str(path), "-q", "--format", "json"]) == 0
    measured = capsys.readouterr().out

    import kviewer.cli.common as common

    loads: list[str] = []
    real = common.load_for

    def counted(*a: object, **k: object) -> object:
        loads.append("load")
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(common, "load_for", counted)
    for fmt in ("json", "csv", "table"):
        assert main(["whatif", str(path), "-q", "--format", fmt, "--cuda-graphs"]) == 0
        assert capsys.readouterr().out == outs[fmt]
    assert main(["whatif", str(path), "-q", "--format", "json"]) == 0
    assert capsys.readouterr().out == measured
    assert loads == []
    assert main(["whatif", str(path), "-q", "--format", "json", "--no-sync"]) == 0
    capsys.readouterr()
    assert loads == ["load"]
    assert main(["whatif", str(path), "-q", "--format", "json", "--cuda-graphs", "--no-cache"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(outs["json"])
    assert loads == ["load", "load"]


def test_answers_from_the_cache_still_say_the_files_warnings(
        cache_on: Path, sample_traces: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A critpath or whatif answered from cached analyses does not load the file, but the file's
    load warnings (here: events of a category kviewer does not know) are said all the same, from
    the cached trace's metadata."""
    import gzip

    import kviewer.cli.common as common

    doc = json.loads(gzip.decompress((sample_traces / SYNC).read_bytes()))
    first = next(e for e in doc["traceEvents"] if e.get("ph") == "X")
    doc["traceEvents"].append({**first, "cat": "mystery_accelerator", "name": "odd"})
    path = cache_on / "odd.pt.trace.json"
    path.write_text(json.dumps(doc))
    assert main(["critpath", str(path), "-q", "--format", "json"]) == 0
    assert main(["whatif", str(path), "-q", "--format", "json", "--cuda-graphs"]) == 0
    said = [ln for ln in capsys.readouterr().err.splitlines() if "mystery_accelerator" in ln]
    assert len(said) == 2  # once per command, as each loaded the file

    def fail(*_a: object, **_k: object) -> None:
        raise AssertionError("loaded")

    monkeypatch.setattr(common, "load_for", fail)
    for cmd in (["critpath"], ["whatif", "--cuda-graphs"]):
        assert main([cmd[0], str(path), "-q", "--format", "json", *cmd[1:]]) == 0
        err = capsys.readouterr().err
        assert [ln for ln in err.splitlines() if "mystery_accelerator" in ln] == said[:1], cmd
