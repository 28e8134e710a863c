"""The malformed-input corpus through ``kviewer.io.load``: no crash, hang, memory blow-up or write.

The corpus (:mod:`tests.robustness.corpus`) damages every file under the samples folders (or
``KVIEWER_FUZZ_DIR``) in generic ways and the harness (:mod:`tests.robustness.harness`) loads each
case in a worker process with a per-case time limit and an address-space cap, hashing the case's
folder before and after. The verdict is :func:`tests.robustness.harness.judge`; a summary of cases
per format and outcome is printed with the test output.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHARED_SAMPLES
from tests.robustness import corpus, harness

# the whole corpus: each case has its own (much smaller) limit inside the harness
pytestmark = pytest.mark.timeout(1200)

MIN_CASES = 500


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[corpus.Case], list[dict[str, Any]], str]]:
    roots = corpus.default_roots()
    if not roots:
        pytest.skip("no folder to build the corpus from (samples absent and KVIEWER_FUZZ_DIR unset)")
    out = tmp_path_factory.mktemp("corpus")
    t0 = time.perf_counter()
    cases = corpus.build(roots, out)
    built = time.perf_counter() - t0
    results = harness.run([c.to_json() for c in cases])
    ran = time.perf_counter() - t0 - built
    text = harness.summary(cases, results, ran) + f"\ncorpus of {len(cases)} cases built in {built:.1f} s from {', '.join(map(str, roots))}"
    yield cases, results, text
    shutil.rmtree(out, ignore_errors=True)  # hundreds of MB: do not wait for pytest's tmp cleanup


def test_summary(run: tuple[list[corpus.Case], list[dict[str, Any]], str], capsys: pytest.CaptureFixture[str]) -> None:
    cases, results, text = run
    with capsys.disabled():
        print("\n" + text)
    assert len(results) == len(cases)
    assert len(cases) >= MIN_CASES


def test_every_case_is_a_trace_or_a_typed_error(run: tuple[list[corpus.Case], list[dict[str, Any]], str]) -> None:
    cases, results, _ = run
    findings = harness.judge(cases, results)
    assert not findings, f"{len(findings)} findings:\n" + "\n".join(findings[:60])


def test_inputs_unmodified(run: tuple[list[corpus.Case], list[dict[str, Any]], str]) -> None:
    cases, results, _ = run
    changed = [(c.path, r["modified"]) for c, r in zip(cases, results) if r["modified"]]
    assert not changed


def test_every_loader_is_exercised(run: tuple[list[corpus.Case], list[dict[str, Any]], str]) -> None:
    """With the project's samples, every file format gets a fair share of the damage."""
    if os.environ.get("KVIEWER_FUZZ_DIR"):
        pytest.skip("a custom KVIEWER_FUZZ_DIR holds whatever it holds")
    if not SHARED_SAMPLES.is_dir():
        pytest.skip(f"real samples not found at {SHARED_SAMPLES}: only sample_traces was damaged")
    cases, results, _ = run
    by_id = {r["id"]: r for r in results}
    per_format: dict[str, int] = {}
    for c in cases:
        f = harness.fmt_of(c, by_id)
        per_format[f] = per_format.get(f, 0) + 1
    from kviewer.io.registry import loaders

    wanted = {s.name for s in loaders() if not s.directories}
    from kviewer.io import nsys_rep

    if nsys_rep.nsys_command() is None:
        # a report is read through nsys; without it every case is the same one-line refusal
        wanted.discard(nsys_rep.NAME)
    thin = {f: per_format.get(f, 0) for f in wanted if per_format.get(f, 0) < 20}
    assert not thin, f"formats with fewer than 20 damaged cases: {thin}"


def test_judge_flags_what_it_should(tmp_path: Path) -> None:
    """The verdict itself can fail: each kind of finding, on hand-made results."""
    mk = corpus.Case
    cases = [
        mk(0, str(tmp_path / "a"), "s", "original", ""),
        mk(1, str(tmp_path / "b"), "s", "truncate", "", base=0, cut=True),
        mk(2, str(tmp_path / "c"), "s", "rename", "", base=0),
        mk(3, str(tmp_path / "d"), "s", "flip", "", base=0),
        mk(4, str(tmp_path / "e"), "s", "flip", "", base=0),
    ]
    ok = {"outcome": "trace", "format": "x", "kernels": 10, "n_warnings": 0, "warnings": [], "modified": []}
    results = [
        {"id": 0, **ok},
        {"id": 1, **ok, "kernels": 4},  # cut, fewer kernels, no warning
        {"id": 2, **ok, "format": "y"},  # another loader for the same bytes
        {"id": 3, "outcome": "hang", "modified": []},
        {"id": 4, "outcome": "error", "type": "CorruptTrace", "message": "bad", "names_file": False, "modified": ["created x-wal"]},
    ]
    text = "\n".join(harness.judge(cases, results))
    assert "silent partial" in text and "y/10 kernels" in text and ": hang" in text
    assert "does not name the file" in text and "changed its folder" in text
    results[1]["warnings"], results[1]["n_warnings"] = ["the file is cut"], 1
    assert "silent partial" not in "\n".join(harness.judge(cases, results))
