"""A folder of per-rank PyTorch traces loads as one trace with a rank dimension."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kviewer.analysis.ranks import rank_subtrace
from kviewer.errors import LoadCancelled, NotOneRun, UnsupportedFormat
from kviewer.io import cache, ranks
from kviewer.io.registry import CancelToken, detect, load

EAGER = "h200_llm_block_eager.pt.trace.json.gz"
#: columns a merge rewrites; everything else of a rank's rows must come through unchanged
REWRITTEN = {"id", "rank", "device"}


def eager_doc(sample_traces: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(gzip.decompress((sample_traces / EAGER).read_bytes()))
    return doc


def write_rank(folder: Path, name: str, doc: dict[str, Any], rank: int | None, world: int = 3, base_shift_ns: int = 0) -> Path:
    """The eager trace as one rank's file: distributedInfo first, as Kineto writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    if rank is not None:
        out["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    out.update({k: v for k, v in doc.items() if k != "distributedInfo"})
    if base_shift_ns:
        out["baseTimeNanoseconds"] = doc["baseTimeNanoseconds"] + base_shift_ns
    path = folder / name
    data = json.dumps(out).encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


@pytest.fixture(autouse=True)
def one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load rank files in this process (spawning workers costs a second per load); the test of
    the worker processes asks for them."""
    monkeypatch.setenv(ranks.ENV_WORKERS, "1")


@pytest.fixture
def three_ranks(sample_traces: Path, tmp_path: Path) -> Path:
    """Three rank files whose names say nothing and whose order is not their rank order."""
    doc = eager_doc(sample_traces)
    folder = tmp_path / "run"
    for name, rank in (("a.pt.trace.json", 2), ("b.pt.trace.json.gz", 0), ("c.pt.trace.json", 1)):
        write_rank(folder, name, doc, rank)
    return folder


def test_three_ranks_make_one_trace(three_ranks: Path, sample_traces: Path) -> None:
    single = load(sample_traces / EAGER, use_cache=False)
    merged = load(three_ranks, use_cache=False)
    merged.validate()
    assert detect(three_ranks).name == "ranks"
    assert merged.meta.ranks == [0, 1, 2]
    assert merged.meta.source_format == "torch"
    assert merged.meta.extra["rank_files"] == {"0": "b.pt.trace.json.gz", "1": "c.pt.trace.json", "2": "a.pt.trace.json"}
    assert merged.meta.warnings == []
    for name in ("kernels", "gpu_ops", "cpu_slices", "flows"):
        assert len(merged.table(name)) == 3 * len(single.table(name)), name
    for name in ("kernels", "gpu_ops", "cpu_slices"):
        df = merged.table(name)
        assert np.array_equal(df["id"].to_numpy(), np.arange(len(df)))
        assert (np.diff(df["start"].to_numpy()) >= 0).all()
        assert sorted(df["rank"].unique().tolist()) == [0, 1, 2]
    # each rank's rows are the single file's rows, in order, only ids/rank/device rewritten
    for r in (0, 1, 2):
        sub = rank_subtrace(merged, r)
        for name in ("kernels", "gpu_ops", "cpu_slices"):
            keep = [c for c in single.table(name).columns if c not in REWRITTEN]
            pd.testing.assert_frame_equal(sub.table(name)[keep], single.table(name)[keep], check_exact=True, obj=f"rank {r} {name}")
        pd.testing.assert_frame_equal(sub.flows, single.flows, check_exact=True, obj=f"rank {r} flows")


def test_devices_are_renumbered_per_rank(three_ranks: Path) -> None:
    merged = load(three_ranks, use_cache=False)
    d = merged.devices
    assert sorted(d["id"].tolist()) == [0, 1, 2]
    assert sorted(d["rank"].tolist()) == [0, 1, 2]
    owner = d.set_index("id")["rank"]
    k = merged.kernels
    assert (owner.loc[k["device"].to_numpy()].to_numpy() == k["rank"].to_numpy()).all()


def test_a_ranks_gpu_keeps_its_own_number(three_ranks: Path, sample_traces: Path) -> None:
    """Every rank ran on its GPU 0 (the eager sample's device): the merge gives the three devices
    ids 0, 1, 2, and each keeps its ordinal 0, so the window calls each one GPU 0 under its rank."""
    from kviewer.session.tracks import TraceTracks, device_ordinals

    single = load(sample_traces / EAGER, use_cache=False)
    own = sorted(set(single.kernels["device"].tolist()))
    merged = load(three_ranks, use_cache=False)
    assert device_ordinals(merged.devices) == {i: own[0] for i in (0, 1, 2)}
    labels = []

    def walk(node: Any) -> None:
        labels.append(getattr(node, "label", ""))
        for child in getattr(node, "children", []):
            walk(child)

    walk(TraceTracks.build(merged).root)
    gpu_groups = [lbl for lbl in labels if re.match(r"GPU \d+( · (?!stream)|$)", lbl)]
    assert len(gpu_groups) == 3 and all(lbl.startswith(f"GPU {own[0]}") for lbl in gpu_groups), gpu_groups
    annotations = [lbl for lbl in labels if re.match(r"GPU \d+ · stream", lbl)]
    assert annotations and all(lbl.startswith(f"GPU {own[0]} · ") for lbl in annotations), annotations
    # a single file is not renumbered: no ordinal recorded, its ids are its GPUs' numbers
    assert device_ordinals(single.devices) == {}


def test_flows_link_rows_of_the_same_rank(three_ranks: Path) -> None:
    merged = load(three_ranks, use_cache=False)
    f = merged.flows
    c, k, g = merged.cpu_slices, merged.kernels, merged.gpu_ops
    for tbl, dst in (("kernels", k), ("gpu_ops", g)):
        sel = f[f["dst_table"].astype(str) == tbl]
        assert len(sel)
        src, to = sel["src"].to_numpy(), sel["dst"].to_numpy()
        assert (c["correlation"].to_numpy()[src] == dst["correlation"].to_numpy()[to]).all()
        assert (c["rank"].to_numpy()[src] == dst["rank"].to_numpy()[to]).all()


def test_parallel_processes_equal_one_process(three_ranks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.io.test_cache import assert_same_trace

    monkeypatch.setenv(ranks.ENV_WORKERS, "1")
    one = load(three_ranks, use_cache=False)
    monkeypatch.setenv(ranks.ENV_WORKERS, "2")
    assert ranks.worker_count(3) == 2
    two = load(three_ranks, use_cache=False)
    assert_same_trace(one, two)
    monkeypatch.setenv(ranks.ENV_WORKERS, "3")  # every file in a worker but one
    assert_same_trace(one, load(three_ranks, use_cache=False))


def test_rank_from_file_name(sample_traces: Path, tmp_path: Path) -> None:
    doc = eager_doc(sample_traces)
    for name in ("job_rank_5.pt.trace.json", "job_rank-12.pt.trace.json", "rank7.json"):
        write_rank(tmp_path / "run", name, doc, None)
    merged = load(tmp_path / "run", use_cache=False)
    assert merged.meta.ranks == [5, 7, 12]
    assert merged.meta.extra["rank_files"]["12"] == "job_rank-12.pt.trace.json"


def test_duplicate_distributed_ranks_fall_back_to_names_then_order(sample_traces: Path, tmp_path: Path) -> None:
    doc = eager_doc(sample_traces)
    for name in ("rank-3.json", "rank-4.json"):
        write_rank(tmp_path / "named", name, doc, 0)
    named = load(tmp_path / "named", use_cache=False)
    assert named.meta.ranks == [3, 4]
    assert "ranks_assumed" in {w.kind for w in named.meta.warnings}
    for name in ("x.json", "y.json"):
        write_rank(tmp_path / "plain", name, doc, None)
    plain = load(tmp_path / "plain", use_cache=False)
    assert plain.meta.ranks == [0, 1]
    assert "ranks_assumed" in {w.kind for w in plain.meta.warnings}


def test_ranks_are_aligned_on_a_common_origin(sample_traces: Path, tmp_path: Path) -> None:
    doc = eager_doc(sample_traces)
    write_rank(tmp_path / "run", "rank-0.json", doc, 0)
    write_rank(tmp_path / "run", "rank-1.json", doc, 1, base_shift_ns=2_000_000)  # started 2 ms later
    merged = load(tmp_path / "run", use_cache=False)
    single = load(sample_traces / EAGER, use_cache=False)
    assert merged.meta.origin_ns == single.meta.origin_ns
    k0 = rank_subtrace(merged, 0).kernels["start"].to_numpy()
    k1 = rank_subtrace(merged, 1).kernels["start"].to_numpy()
    assert np.array_equal(k0, single.kernels["start"].to_numpy())
    assert np.array_equal(k1 - k0, np.full(len(k0), 2_000_000))


def test_files_recorded_hours_apart_are_not_one_run(sample_traces: Path, tmp_path: Path) -> None:
    """Issue 27: a folder of unrelated files opened as "2 ranks" 3.5 h apart. Decided on the
    recorded times (data): refused as a rank set, with the reason and the files of each run."""
    doc = eager_doc(sample_traces)
    write_rank(tmp_path / "junk", "rank-0.json", doc, 0)
    write_rank(tmp_path / "junk", "rank-1.json", doc, 1, base_shift_ns=int(3.5 * 3600e9))
    with pytest.raises(NotOneRun) as err:
        load(tmp_path / "junk", use_cache=False)
    assert err.value.reason == "times"
    assert [[Path(p).name for p in g] for g in err.value.groups] == [["rank-0.json"], ["rank-1.json"]]
    assert "12,600 s (3.5 h) apart" in err.value.problem  # the same words reach the CLI and the window's dialog


def test_files_of_different_programs_are_not_one_run(sample_traces: Path, tmp_path: Path) -> None:
    """Files that say which program they profiled (nsys does) must name one."""
    single = load(sample_traces / EAGER, use_cache=False)
    other = load(sample_traces / EAGER, use_cache=False)
    single.meta.program, other.meta.program = "train.py", "bench"
    with pytest.raises(NotOneRun) as err:
        ranks.one_run(tmp_path, [tmp_path / "a", tmp_path / "b"], [single, other])
    assert err.value.reason == "programs"
    other.meta.program = "train.py"
    ranks.one_run(tmp_path, [tmp_path / "a", tmp_path / "b"], [single, other])  # one program, one time: fine


def test_bad_and_foreign_files(three_ranks: Path) -> None:
    (three_ranks / "d.pt.trace.json").write_bytes(b'{"schemaVersion": 1, "traceEvents": [{"ph": "X", "na')
    (three_ranks / "README.txt").write_text("how this run was made\n")
    merged = load(three_ranks, use_cache=False)
    assert merged.meta.ranks == [0, 1, 2]
    assert len(merged.meta.warnings) == 2
    skipped, ignored = merged.meta.warnings
    assert skipped.kind == "truncated" and Path(skipped.file).name == "d.pt.trace.json"
    assert ignored.kind == "ignored" and Path(ignored.file) == three_ranks
    # a run with a cut rank file may still be being written: it is not cached
    assert not cache.load_was_complete(merged)


def test_folder_without_traces(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with pytest.raises(UnsupportedFormat) as err:
        load(tmp_path, use_cache=False)
    assert str(tmp_path) in str(err.value)
    assert not ranks.sniff(b"", tmp_path)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_cancel(three_ranks: Path, monkeypatch: pytest.MonkeyPatch, workers: str) -> None:
    monkeypatch.setenv(ranks.ENV_WORKERS, workers)
    token = CancelToken()
    token.cancel()
    with pytest.raises(LoadCancelled):
        load(three_ranks, cancel=token, use_cache=False)


def test_folder_is_cached_as_a_whole(three_ranks: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.io.test_cache import assert_same_trace

    monkeypatch.delenv("KVIEWER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVIEWER_CACHE_DIR", str(tmp_path / "cache"))
    loaded: list[int] = []
    real = ranks._load_all
    monkeypatch.setattr(ranks, "_load_all", lambda *a, **k: loaded.append(1) or real(*a, **k))
    first = load(three_ranks)
    second = load(three_ranks)
    assert len(loaded) == 1
    assert_same_trace(first, second)
    member = three_ranks / "c.pt.trace.json"
    st = member.stat()
    os.utime(member, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    load(three_ranks)
    assert len(loaded) == 2
    assert len(cache.TraceCache(tmp_path / "cache").entries()) == 1


@pytest.mark.samples
@pytest.mark.parametrize(
    ("name", "rank"),
    [("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz", 34), ("sampled_rank-0.json.gz", 0), ("benchmark_result_493459_1694039959_trace.json.gz", 0)],
)
def test_rank_from_head_of_real_traces(samples: Path, name: str, rank: int) -> None:
    from kviewer.io.source import read_head

    assert ranks.rank_from_head(read_head(samples / "torch" / name, 16 * 1024)) == rank
    assert load(samples / "torch" / name, use_cache=False).meta.ranks == [rank]


def test_rank_from_name_and_head() -> None:
    assert ranks.rank_from_name("rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz") == 34
    assert ranks.rank_from_name("train_rank_3.json") == 3
    assert ranks.rank_from_name("prank-3.json") is None
    assert ranks.rank_from_name("worker0.1623143089861.pt.trace.json.gz") is None
    assert ranks.rank_from_head(b'{"distributedInfo": {"backend": "nccl", "pg_config": [{"ranks": [0, 1]}], "rank": 1}, "x"') == 1
    assert ranks.rank_from_head(b'{"distributedInfo": {"rank": "1"}}') is None
    assert ranks.rank_from_head(b'{"distributedInfo": {"rank": 1') is None  # cut head


def test_nsys_exports_per_rank(sample_traces: Path, tmp_path: Path) -> None:
    """``nsys profile -o report_%q{RANK}``: ranks from the file names, NVTX steps per rank."""
    from kviewer.analysis.ranks import step_times

    single = load(sample_traces / "h200_llm_train_nvtx.sqlite.gz", use_cache=False)
    folder = tmp_path / "nsys"
    folder.mkdir()
    for r in (0, 1):
        (folder / f"report_rank{r}.sqlite.gz").write_bytes((sample_traces / "h200_llm_train_nvtx.sqlite.gz").read_bytes())
    merged = load(folder, use_cache=False)
    assert merged.meta.source_format == "nsys"
    assert merged.meta.ranks == [0, 1]
    assert len(merged.kernels) == 2 * len(single.kernels)
    steps = step_times(merged)
    assert set(steps["rank"]) == {0, 1}
    assert len(steps) == 2 * len(step_times(single))


@pytest.mark.samples
def test_other_output_folders_are_not_ranks(samples: Path) -> None:
    """A rocprof results folder holds a results.csv, its stats and a DB: not per-rank traces."""
    folder = samples / "rocprof" / "hpctraining_finite_difference"
    assert not ranks.sniff(b"", folder)
    assert detect(samples / "rocprof" / "rocprofv3_2025").name != "ranks"


def test_broken_worker_pool_falls_back_to_this_process(three_ranks: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A worker that cannot start (or dies) does not fail the load: this process loads the rest."""
    import concurrent.futures as cf

    from tests.io.test_cache import assert_same_trace

    one = load(three_ranks, use_cache=False)

    def broken_submit(self: cf.ProcessPoolExecutor, fn: Any, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        fut: cf.Future[Any] = cf.Future()
        fut.set_exception(cf.process.BrokenProcessPool("a worker died"))
        return fut

    monkeypatch.setattr(cf.ProcessPoolExecutor, "submit", broken_submit)
    monkeypatch.setenv(ranks.ENV_WORKERS, "3")
    with caplog.at_level("WARNING", logger="kviewer.io.ranks"):
        again = load(three_ranks, use_cache=False)
    assert_same_trace(one, again)
    assert any("worker processes failed" in r.getMessage() for r in caplog.records)
