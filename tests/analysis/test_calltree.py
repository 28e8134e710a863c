"""Python call trees (with_stack=True) against the raw python_function events.

Files: sample_traces/gpt_train_memory.pt.trace.json.gz (H200, with_stack) and the shared
tracelens_h100 trace (python_function with "Python id" / "Python parent id" args, which the test
uses as the independent parent link).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from kviewer.analysis.calltree import call_tree, folded, tree_json
from kviewer.io import load

REPO = Path(__file__).resolve().parents[2]
STACK = REPO / "sample_traces" / "gpt_train_memory.pt.trace.json.gz"


def _python(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "python_function"]


def test_every_frame_and_inclusive_equals_duration() -> None:
    raw = _python(STACK)
    tree = call_tree(load(STACK))
    assert len(tree) == len(raw) > 0
    assert sorted(tree.inclusive_ns.tolist()) == sorted(round(e["dur"] * 1000) for e in raw)
    assert Counter(tree.names) == Counter(e["name"] for e in raw)
    assert (tree.self_ns >= 0).all() and (tree.self_ns <= tree.inclusive_ns).all()


def test_parents_match_the_profilers_python_ids(samples: Path) -> None:
    """The time nesting gives each frame the parent the profiler recorded ("Python parent id")."""
    path = samples / "torch" / "tracelens_h100" / "gaunernst_bert-small-uncased__1016001.json.gz"
    raw = _python(path)
    by_id = {e["args"]["Python id"]: e for e in raw}
    tree = call_tree(load(path))
    assert len(tree) == len(raw)
    trace = load(path)
    starts = trace.cpu_slices["start"].to_numpy()
    # frame -> (name, start) of its parent, both ways
    ours = Counter()
    for i in range(len(tree)):
        p = int(tree.parent[i])
        ours[(tree.names[i], round(float(tree.inclusive_ns[i])), tree.names[p] if p >= 0 else None)] += 1
    theirs = Counter()
    for e in raw:
        par = by_id.get(e["args"].get("Python parent id"))
        theirs[(e["name"], round(e["dur"] * 1000), par["name"] if par else None)] += 1
    agree = sum((ours & theirs).values())
    assert agree >= 0.99 * len(raw), (agree, len(raw))
    assert len(starts) == len(trace.cpu_slices)


def test_folded_self_times_add_up_to_the_roots() -> None:
    tree = call_tree(load(STACK))
    lines = folded(tree)
    roots = tree.parent < 0
    # self times sum to the roots' durations, less what children overhang their parents (clipped)
    assert sum(v for _s, v in lines) == int(tree.inclusive_ns[roots].sum()) + _clipped(tree)
    doc = tree_json(tree)
    assert sum(len(t["frames"]) for t in doc["threads"]) == int(roots.sum())


def _clipped(tree) -> int:  # noqa: ANN001
    """Time children spend beyond their parent (clock noise) is not counted twice: the self time
    of such a parent is clipped at 0, which this returns."""
    import numpy as np

    child = np.zeros(len(tree), dtype=np.int64)
    has = tree.parent >= 0
    np.add.at(child, tree.parent[has], tree.inclusive_ns[has])
    return int(np.maximum(child - tree.inclusive_ns, 0).sum())


def test_cli_folded_and_json() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "kviewer", "calltree", str(STACK), "-q"], capture_output=True, text=True,
                       cwd=REPO, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    raw = _python(STACK)
    roots = {e["name"] for e in raw if e["args"].get("Python parent id") is None}
    assert {line.rsplit(" ", 1)[0].split(";")[1] for line in lines} <= roots  # thread frame, then a root frame
    r = subprocess.run([sys.executable, "-m", "kviewer", "calltree", str(STACK), "-q", "--format", "json"], capture_output=True,
                       text=True, cwd=REPO, timeout=300, env=env)
    doc = json.loads(r.stdout)
    n = 0
    stack = [f for t in doc["threads"] for f in t["frames"]]
    while stack:
        f = stack.pop()
        n += 1
        assert f["inclusive_ns"] >= f["self_ns"] >= 0
        stack.extend(f.get("children", []))
    assert n == len(raw)
