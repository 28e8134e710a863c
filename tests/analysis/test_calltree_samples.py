"""Call trees from Nsight Systems CPU samples (``--sample=cpu --backtrace=dwarf``), checked against
the export's own tables read with sqlite3 alone (h200_cpu_sampling_nsys: sample_traces/h200_round5)."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from kviewer.analysis.calltree import call_tree, folded, sampled_call_tree, tree_json
from kviewer.core.schema import STACK_SEP
from kviewer.io import load

FILE = "h200_cpu_sampling_nsys.sqlite.gz"


@pytest.fixture(scope="module")
def raw(sample_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cpu_sampling") / "cpu_sampling.sqlite"
    with gzip.open(sample_traces / FILE) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


@pytest.fixture(scope="module")
def trace(sample_traces: Path):  # type: ignore[no-untyped-def]
    return load(sample_traces / FILE)


def test_every_sample_with_its_whole_stack(trace, raw: Path) -> None:  # type: ignore[no-untyped-def]
    con = sqlite3.connect(raw)
    n = con.execute("select count(*) from COMPOSITE_EVENTS").fetchone()[0]
    s = trace.cpu_samples
    assert len(s) == n > 1000
    assert (np.diff(s["start"].to_numpy()) >= 0).all()
    # per thread: the same counts as a GROUP BY over globalTid (tid = the low 24 bits)
    per_thread = dict(con.execute("select globalTid & 16777215, count(*) from COMPOSITE_EVENTS group by 1").fetchall())
    assert dict(Counter(s["tid"].tolist())) == per_thread
    # each sample's stack has as many frames as it has SAMPLING_CALLCHAINS rows, outermost first
    depth = dict(con.execute("select id, count(*) from SAMPLING_CALLCHAINS group by id").fetchall())
    got = sorted(len(str(x).split(STACK_SEP)) for x in s["stack"].astype(str) if str(x))
    assert got == sorted(depth.values())
    leaf_of = {}
    for sid, name, unresolved, module in con.execute(
            "select c.id, s.value, c.unresolved, m.value from SAMPLING_CALLCHAINS c join StringIds s on s.id = c.symbol "
            "join StringIds m on m.id = c.module where c.stackDepth = 0"):
        leaf_of[sid] = f"[{module.rsplit('/', 1)[-1]}]" if unresolved else name
    leaves = Counter(str(x).split(STACK_SEP)[-1] for x in s["stack"].astype(str) if str(x))
    assert leaves == Counter(leaf_of.values())
    con.close()


def test_sampled_frames_add_up_to_the_samples(trace) -> None:  # type: ignore[no-untyped-def]
    tree = call_tree(trace)  # no python frames in this export: the samples
    assert tree.sampled and len(tree) and (tree.ids == -1).all()
    s = trace.cpu_samples
    roots = tree.parent < 0
    # every sample is in exactly one root frame of its thread, and a child never spans more samples than its parent
    assert int(tree.samples[roots].sum()) == len(s)
    has = tree.parent >= 0
    assert (tree.samples[has] <= tree.samples[tree.parent[has]]).all()
    assert (tree.depth[has] == tree.depth[tree.parent[has]] + 1).all()
    # a frame lasts from its first sample to one interval after its last, and its children lie inside it
    assert (tree.inclusive_ns > 0).all()
    end = tree.start + tree.inclusive_ns
    assert (tree.start[has] >= tree.start[tree.parent[has]]).all()
    assert (end[has] <= end[tree.parent[has]]).all()
    # the thread's interval: its median gap between samples (nsys samples a running thread at a fixed rate)
    main = s[s["tid"] == s["tid"].value_counts().idxmax()]
    period = int(np.median(np.diff(main["start"].to_numpy())))
    rows = np.flatnonzero((tree.tid == int(main["tid"].iloc[0])) & (tree.samples == 1))
    assert (tree.inclusive_ns[rows] == period).all()


def test_folded_and_json_say_samples(trace) -> None:  # type: ignore[no-untyped-def]
    tree = sampled_call_tree(trace)
    lines = folded(tree)
    assert sum(v for _, v in lines) == int(tree.self_ns.sum())
    j = tree_json(tree, limit_depth=0)
    assert j["source"] == "samples"
    first = j["threads"][0]["frames"][0]
    assert first["id"] == -1 and first["samples"] >= 1
    # events stay the default where the trace has python frames: the samples are asked for by name
    assert call_tree(trace, source="events").samples is None


def test_cli_calltree_reads_the_samples(sample_traces: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kviewer", "calltree", str(sample_traces / FILE), "--format", "json",
                          "--max-depth", "0"], capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    assert j["source"] == "samples" and sum(f["samples"] for t in j["threads"] for f in t["frames"]) > 1000
