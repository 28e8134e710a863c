"""The owner of an open trace, without Qt: compare mode's offsets and labels, closing a compared
trace, analyses as pending/failed/ready. The window (tests/ui/test_integration_compare.py) and the
headless screenshot (tests/ui/test_headless_equals_window.py) run these same commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from kviewer.analysis.compare import compare
from kviewer.errors import AnalysisError
from kviewer.io import load
from kviewer.session.analyses import SolInfo, compute_sol
from kviewer.session.compare import compare_open, start_compare, stop_compare
from kviewer.session.document import Document
from kviewer.session.open_trace import FUSION, SOL, Failed, Pending, Ready, run_analysis
from kviewer.session.tracks import TraceTracks

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
COMPILED = "h200_llm_block_compiled.pt.trace.json.gz"


@pytest.fixture(scope="module")
def pair(sample_traces: Path) -> tuple[object, object]:
    return load(sample_traces / EAGER), load(sample_traces / COMPILED)


def _open_two(pair: tuple[object, object]) -> tuple[Document, TraceTracks, TraceTracks, list[str]]:
    doc = Document()
    events: list[str] = []
    doc.traces_changed.connect(lambda: events.append("traces"))
    doc.compare_changed.connect(lambda: events.append("compare"))
    a = TraceTracks.build(pair[0])  # type: ignore[arg-type]
    b = TraceTracks.build(pair[1])  # type: ignore[arg-type]
    doc.add(a)
    doc.add(b)
    events.clear()
    return doc, a, b, events


def test_compare_aligns_b_on_a_and_labels_both_then_puts_them_back(pair: tuple[object, object]) -> None:
    doc, a, b, events = _open_two(pair)
    a_own, b_own, b_span = a.offset_ns, b.offset_ns, b.span
    result = compare_open(doc)
    assert result is not None and doc.compare is not None and (doc.compare.a, doc.compare.b) == (a.key, b.key)
    # the same comparison as computed directly, and B moved by exactly its align offset
    direct = compare(pair[0], pair[1])  # type: ignore[arg-type]
    assert result.align_offset_ns == direct.align_offset_ns
    assert b.offset_ns == a_own - int(direct.align_offset_ns) and a.offset_ns == a_own
    first_step_a = int(direct.steps_a["start"].iloc[0]) - a.offset_ns
    first_step_b = int(direct.steps_b["start"].iloc[0]) - b.offset_ns
    assert first_step_a == first_step_b  # both first steps at the same x
    assert (a.root.label, b.root.label) == (f"A · {EAGER}", f"B · {COMPILED}")
    assert doc.get(b.key).role == "B" and events == ["traces", "compare"]
    stop_compare(doc)
    assert doc.compare is None and b.offset_ns == b_own and b.span == b_span
    assert (a.root.label, b.root.label) == (EAGER, COMPILED)


def test_closing_a_compared_trace_ends_the_comparison(pair: tuple[object, object]) -> None:
    doc, a, b, events = _open_two(pair)
    b_own = b.offset_ns
    start_compare(doc, b.key, a.key, compare(pair[1], pair[0]))  # type: ignore[arg-type]  # B the reference
    assert (a.root.label, b.root.label) == (f"B · {EAGER}", f"A · {COMPILED}")
    assert doc.remove(a.key)
    assert doc.compare is None and doc.get(a.key) is None and doc.trace(a.key) is None
    assert b.offset_ns == b_own and b.root.label == COMPILED
    assert events[-2:] == ["compare", "traces"]
    assert not start_compare(doc, b.key, a.key, compare(pair[1], pair[0]))  # type: ignore[arg-type]  # a is closed


def test_analyses_are_pending_failed_or_ready(pair: tuple[object, object]) -> None:
    doc, a, _b, _events = _open_two(pair)
    seen: list[int] = []
    doc.analysis_changed.connect(seen.append)
    assert doc.analysis(a.key, SOL) is None  # built without a speed of light: not asked for yet
    doc.begin(a.key, SOL)
    assert isinstance(doc.analysis(a.key, SOL), Pending) and doc.get(a.key).pending(SOL)
    info = compute_sol(pair[0])  # type: ignore[arg-type]
    assert info.ok  # the sample names its H200
    doc.set_sol(a.key, info)
    state = doc.analysis(a.key, SOL)
    assert isinstance(state, Ready) and state.result is info and a.sol_info is info
    # an unknown GPU is a failed analysis carrying the typed error, not a string
    unknown = SolInfo(None, "x: the GPU is not known", problem="the GPU is not known")
    doc.set_sol(a.key, unknown)
    failed = doc.analysis(a.key, SOL)
    assert isinstance(failed, Failed) and isinstance(failed.error, AnalysisError) and failed.problem == "the GPU is not known"
    # fusion: computed from the speed of light, dropped with it
    doc.set_sol(a.key, info)
    doc.begin(a.key, FUSION)
    doc.settle(a.key, FUSION, run_analysis(lambda: 42))
    assert doc.get(a.key).ready(FUSION) == 42
    doc.set_sol(a.key, compute_sol(pair[0], "h100_sxm"))  # type: ignore[arg-type]
    assert doc.analysis(a.key, FUSION) is None
    bad = run_analysis(lambda: 1 // 0, path="p.json")
    assert isinstance(bad, Failed) and bad.error.path == "p.json" and "ZeroDivisionError" in bad.problem
    assert seen and set(seen) == {a.key}


def test_mfu_goes_with_the_speed_of_light_and_critical_paths_with_the_trace(pair: tuple[object, object]) -> None:
    """The MFU per step is computed from the speed of light: a new one drops it (as fusion). The
    critical paths are the trace's own: a GPU chosen keeps them, counters merged (another trace)
    drop them; closing the trace forgets both."""
    from kviewer.session.open_trace import CRITPATH, MFU

    doc, a, _b, _events = _open_two(pair)
    info = compute_sol(pair[0])  # type: ignore[arg-type]
    doc.set_sol(a.key, info)
    for name, value in ((MFU, "mfu"), (CRITPATH, "paths")):
        doc.begin(a.key, name)
        doc.settle(a.key, name, Ready(value))
    assert doc.ready(a.key, MFU) == "mfu" and doc.ready(a.key, CRITPATH) == "paths"
    doc.set_sol(a.key, compute_sol(pair[0], "h100_sxm"))  # type: ignore[arg-type]
    assert doc.analysis(a.key, MFU) is None and doc.ready(a.key, CRITPATH) == "paths"
    doc.set_sol(a.key, info, pair[0])  # type: ignore[arg-type]  # as an attached report does
    assert doc.analysis(a.key, CRITPATH) is None
    doc.begin(a.key, MFU)
    doc.settle(a.key, MFU, Failed(AnalysisError("no steps", path="x")))
    assert isinstance(doc.analysis(a.key, MFU), Failed)  # kept: not asked again
    doc.remove(a.key)
    assert doc.ready(a.key, MFU) is None and doc.analysis(a.key, MFU) is None
