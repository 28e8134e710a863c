"""The Nsight Systems SQLite loader against real exports of three schema versions.

Counts are checked twice: against the figures SOURCES.md gives for each file, and against direct
SQL on the file. The oracle comparison with ``nsys stats`` lives in tests/cli/test_summary_oracle.py.
"""

from __future__ import annotations

import gzip
import hashlib
import lzma
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from kviewer.core import Trace
from kviewer.errors import CorruptTrace, LoadCancelled, LoadError, TruncatedTrace, UnsupportedFormat
from kviewer.io import nsys
from kviewer.io.registry import CancelToken, detect, load
from kviewer.io.source import SQLITE_MAGIC, read_head

# what SOURCES.md says each export holds; memset and NVTX ranges (push/pop + start/end) from the
# same file's description or, where it gives none, the empty tables it names
SAMPLES: dict[str, dict[str, Any]] = {
    "saxpy-mpi-cuda_nsys_perlmutter0.sqlite": {
        "kernels": 5, "memcpy": 15, "memset": 0, "api": 95, "nvtx": 22,
        "schema": "2.9.1", "version": "2022.2.1.31",
    },
    "perlmutter-cloverleaf-cuda.sqlite": {
        "kernels": 1312, "memcpy": 279, "memset": 0, "api": 3048, "nvtx": 0,
        "schema": "3.13.2", "version": "2024.5.1.113",
    },
    "h200_llm_train_nvtx.sqlite": {
        "kernels": 13579, "memcpy": None, "memset": None, "api": None, "nvtx": 62,
        "schema": "3.20.3", "version": "2025.3.2.0",
    },
}  # fmt: skip

BUNDLED = "h200_llm_train_nvtx.sqlite.gz"


@pytest.fixture(autouse=True)
def _no_trace_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    # these tests are about the loader: read the file itself every time, not a cached copy
    monkeypatch.setenv("KVIEWER_NO_CACHE", "1")


def _load(path: Path) -> Trace:
    return nsys.load(path, lambda fraction, message: None, CancelToken())


def _sql(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(Path(path).resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


def _tables(path: Path) -> set[str]:
    return {r[0] for r in _sql(path, "select name from sqlite_master where type='table'")}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module", params=sorted(SAMPLES))
def export(request: pytest.FixtureRequest, samples: Path) -> tuple[Path, Trace, dict[str, Any]]:
    path = samples / "nsys" / request.param
    return path, _load(path), SAMPLES[request.param]


@pytest.fixture(scope="module")
def h200_db(tmp_path_factory: pytest.TempPathFactory, sample_traces: Path) -> Path:
    """The bundled export, decompressed (works without ../shared/samples)."""
    out = tmp_path_factory.mktemp("h200") / "h200_llm_train_nvtx.sqlite"
    out.write_bytes(gzip.decompress((sample_traces / BUNDLED).read_bytes()))
    return out


# ---------------------------------------------------------------------------------------------
# sniffing


def test_sniff_claims_every_sample_by_its_head(samples: Path, sample_traces: Path) -> None:
    paths = [samples / "nsys" / name for name in SAMPLES] + [sample_traces / BUNDLED]
    for p in paths:
        assert nsys.sniff(read_head(p), p), p


def test_sniff_refuses_rocprof_results_db(samples: Path) -> None:
    rocprof = samples / "rocprof" / "gunrock_mi300" / "results.db"  # rocprof v1: one table KERN
    assert not nsys.sniff(read_head(rocprof), rocprof)


def test_sniff_refuses_other_sqlite_and_other_bytes(tmp_path: Path) -> None:
    foreign = tmp_path / "shop.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("create table customers(id integer, name text)")
    con.execute("create table StringIds(id integer primary key, value text)")  # a name nsys also uses
    con.commit()
    con.close()
    assert not nsys.sniff(read_head(foreign), foreign)
    json_file = tmp_path / "trace.json"
    json_file.write_text('{"traceEvents": []}')
    assert not nsys.sniff(read_head(json_file), json_file)
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(SQLITE_MAGIC + bytes(range(256)) * 16)
    assert not nsys.sniff(read_head(garbage), garbage)


def test_sniff_falls_back_to_the_schema_when_the_head_has_no_table_name(h200_db: Path, tmp_path: Path) -> None:
    bare_head = SQLITE_MAGIC + b"\0" * 4096  # a head in which the schema is not visible
    assert nsys.sniff(bare_head, h200_db)
    foreign = tmp_path / "other.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("create table KERN(id integer)")
    con.commit()
    con.close()
    assert not nsys.sniff(bare_head, foreign)


def test_registry_picks_nsys(samples: Path, sample_traces: Path) -> None:
    for p in [samples / "nsys" / name for name in SAMPLES] + [sample_traces / BUNDLED]:
        assert detect(p).name == "nsys"


# ---------------------------------------------------------------------------------------------
# what is read


def test_table_sizes_match_sources_and_sql(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, expect = export
    trace.validate()
    tables = _tables(path)

    def count(table: str, where: str = "") -> int:
        return _sql(path, f"select count(*) from {table} {where}")[0][0] if table in tables else 0

    enum = "select id from ENUM_NSYS_EVENT_CLASS where name = 'TRACE_PROCESS_EVENT_OS_RUNTIME'"
    osrt_class = _sql(path, enum)[0][0] if "ENUM_NSYS_EVENT_CLASS" in tables else 27
    sql = {
        "kernels": count("CUPTI_ACTIVITY_KIND_KERNEL"),
        "memcpy": count("CUPTI_ACTIVITY_KIND_MEMCPY"),
        "memset": count("CUPTI_ACTIVITY_KIND_MEMSET"),
        "api": count("CUPTI_ACTIVITY_KIND_RUNTIME"),
        "nvtx": count("NVTX_EVENTS", "where eventType in (59, 60) and end is not null"),
        # OS runtime calls: the OS runtime event class, not the profiler's start/finish marks
        "osrt": count("OSRT_API", f"where eventClass = {osrt_class}"),
        "osrt marks": count("OSRT_API", f"where eventClass != {osrt_class}"),
    }
    ours = {
        "kernels": len(trace.kernels),
        "memcpy": int((trace.gpu_ops["kind"] == "memcpy").sum()),
        "memset": int((trace.gpu_ops["kind"] == "memset").sum()),
        "api": int(trace.cpu_slices["category"].isin(["runtime", "driver"]).sum()),
        "nvtx": int((trace.cpu_slices["category"] == "nvtx").sum()),
        "osrt": int((trace.cpu_slices["category"] == "osrt").sum()),
        "osrt marks": int(((trace.cpu_slices["category"] == "other") & (trace.cpu_slices["name_id"] >= 0)).sum()),
    }
    assert ours == sql
    for key in ("kernels", "memcpy", "memset", "api", "nvtx"):
        if expect[key] is not None:
            assert ours[key] == expect[key], key


def test_kernels_equal_the_kernel_table(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, _ = export
    rows = _sql(
        path,
        "select s.value, k.start, k.end, k.streamId, k.correlationId, k.gridX, k.gridY, k.gridZ, k.blockX, "
        "k.blockY, k.blockZ, k.registersPerThread, k.staticSharedMemory + k.dynamicSharedMemory, sn.value "
        "from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.demangledName "
        "join StringIds sn on sn.id = k.shortName order by k.start, k.correlationId",
    )
    cols = ["name", "start", "end", "stream", "correlation", "grid_x", "grid_y", "grid_z", "block_x", "block_y",
            "block_z", "registers", "shared_mem", "short_name"]  # fmt: skip
    want = pd.DataFrame(rows, columns=cols)
    got = trace.kernels.sort_values(["start", "correlation"], kind="stable").reset_index(drop=True)
    for c in cols:
        assert list(got[c].astype(str) if c in ("name", "short_name") else got[c]) == list(want[c]), c
    assert (got["dur"] == got["end"] - got["start"]).all()
    assert list(trace.kernels["id"]) == list(range(len(trace.kernels)))
    assert trace.kernels["start"].is_monotonic_increasing


def test_pid_and_tid_come_from_global_ids(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, _ = export
    pids = {r[0] for r in _sql(path, "select distinct (globalPid >> 24) & 16777215 from CUPTI_ACTIVITY_KIND_KERNEL")}
    assert set(trace.kernels["pid"]) == pids
    processes = {r[0] for r in _sql(path, "select pid from PROCESSES")}
    assert pids <= processes  # the decoded pid is a real process of the capture
    api = trace.cpu_slices[trace.cpu_slices["category"].isin(["runtime", "driver"])]
    tids = {r[0] for r in _sql(path, "select distinct globalTid & 16777215 from CUPTI_ACTIVITY_KIND_RUNTIME")}
    assert set(api["tid"]) == tids


def test_runtime_names_lose_their_version_and_driver_calls_are_told_apart(
    export: tuple[Path, Trace, dict[str, Any]],
) -> None:
    path, trace, _ = export
    api = trace.cpu_slices[trace.cpu_slices["category"].isin(["runtime", "driver"])]
    names = set(api["name"].astype(str))
    # as nsys stats: a four-digit version goes (cudaLaunchKernel_v7000), others stay (cuGetProcAddress_v2)
    assert not [n for n in names if re.search(r"_v\d{4}$", n)]
    raw = {r[0] for r in _sql(path, "select distinct s.value from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId")}
    assert {n for n in raw if not re.search(r"_v\d{4}$", n)} <= names
    assert "cudaLaunchKernel" in names
    # the export's own classification (eventClass 1 = CUDA driver) agrees with ours
    driver = _sql(path, "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME where eventClass = 1")[0][0]
    assert int((api["category"] == "driver").sum()) == driver
    launches = _sql(
        path,
        "select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME r join StringIds s on s.id = r.nameId "
        "where s.value like 'cudaLaunchKernel%' and r.eventClass = 0",
    )[0][0]
    assert int(((api["name"] == "cudaLaunchKernel") & (api["category"] == "runtime")).sum()) >= launches


def test_memcpy_and_memset(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, _ = export
    ops = trace.gpu_ops
    memcpy = ops[ops["kind"] == "memcpy"]
    by_kind = dict(_sql(path, "select copyKind, count(*) from CUPTI_ACTIVITY_KIND_MEMCPY group by 1"))
    names = {1: "[CUDA memcpy Host-to-Device]", 2: "[CUDA memcpy Device-to-Host]", 8: "[CUDA memcpy Device-to-Device]"}
    directions = {1: "HtoD", 2: "DtoH", 8: "DtoD"}
    for kind, n in by_kind.items():
        assert int((memcpy["name"] == names[kind]).sum()) == n
        assert int((memcpy["direction"] == directions[kind]).sum()) == n
    assert int(memcpy["bytes"].sum()) == _sql(path, "select sum(bytes) from CUPTI_ACTIVITY_KIND_MEMCPY")[0][0]
    memset = ops[ops["kind"] == "memset"]
    assert (memset["name"] == "[CUDA memset]").all()
    if len(memset):
        assert int(memset["bytes"].sum()) == _sql(path, "select sum(bytes) from CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
        values = dict(_sql(path, "select value, count(*) from CUPTI_ACTIVITY_KIND_MEMSET group by 1"))
        assert memset["value"].value_counts().to_dict() == values
    assert (memcpy["value"] == -1).all()


def test_every_launch_is_linked_and_precedes_its_gpu_work(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    _, trace, _ = export
    flows, cpu = trace.flows, trace.cpu_slices
    for table, df in (("kernels", trace.kernels), ("gpu_ops", trace.gpu_ops)):
        f = flows[flows["dst_table"] == table]
        assert sorted(f["dst"]) == list(range(len(df)))  # each GPU record has exactly one launch
        src = cpu.iloc[f["src"].to_numpy()]
        dst = df.iloc[f["dst"].to_numpy()]
        assert set(src["category"]) <= {"runtime", "driver"}
        assert (src["correlation"].to_numpy() == dst["correlation"].to_numpy()).all()
        assert (f["correlation"].to_numpy() == dst["correlation"].to_numpy()).all()
        assert (src["pid"].to_numpy() == dst["pid"].to_numpy()).all()
        # causality: a call starts before the GPU runs what it launched
        assert (src["start"].to_numpy() <= dst["start"].to_numpy()).all()
    k = flows[flows["dst_table"] == "kernels"]
    assert (trace.kernels["tid"].to_numpy()[k["dst"].to_numpy()] == cpu["tid"].to_numpy()[k["src"].to_numpy()]).all()
    launch_names = set(cpu.iloc[k["src"].to_numpy()]["name"].astype(str))
    assert launch_names <= {"cudaLaunchKernel", "cuLaunchKernelEx", "cuLaunchKernel", "cudaLaunchCooperativeKernel"}


def test_no_two_slices_overlap_on_one_level(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    _, trace, _ = export
    cpu = trace.cpu_slices
    for _, g in cpu.groupby(["pid", "tid", "depth"]):
        g = g.sort_values("start")
        assert (g["start"].to_numpy()[1:] >= g["end"].to_numpy()[:-1]).all()
    # a slice at depth d > 0 lies inside some slice at depth d - 1 on its thread, if they nest
    assert cpu["depth"].min() == 0 if len(cpu) else True


def test_meta(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, expect = export
    m = trace.meta
    assert m.source_format == "nsys"
    assert m.tool == "Nsight Systems"
    assert m.format_label == f"Nsight Systems SQLite export, schema {expect['schema']}"
    assert m.tool_version == expect["version"]
    assert m.origin_ns == _sql(path, "select utcEpochNs from TARGET_INFO_SESSION_START_TIME")[0][0]
    assert m.extra["schema"] == expect["schema"]
    assert m.extra.get("host")
    assert m.extra.get("command")
    assert not m.warnings


def test_devices_follow_the_cuda_numbering(export: tuple[Path, Trace, dict[str, Any]]) -> None:
    path, trace, _ = export
    rows = _sql(
        path,
        "select cuDevice, name, smCount, totalMemory, clockRate, computeMajor, computeMinor "
        "from TARGET_INFO_GPU order by cuDevice",
    )
    dev = trace.devices
    assert list(dev["id"]) == [r[0] for r in rows]
    for r, (_, d) in zip(rows, dev.iterrows()):
        assert (d["name"], d["sm_count"], d["memory_bytes"], d["sm_clock_hz"]) == (r[1], r[2], r[3], float(r[4]))
        assert d["compute_capability"] == f"{r[5]}.{r[6]}"
        assert d["architecture"] == f"sm_{r[5]}{r[6]}"
        assert d["vendor"] == "NVIDIA"
    kernel_devices = {r[0] for r in _sql(path, "select distinct deviceId from CUPTI_ACTIVITY_KIND_KERNEL")}
    assert set(trace.kernels["device"]) == kernel_devices
    assert kernel_devices <= set(dev["id"])


def test_cloverleaf_gpu_ids_differ_from_cuda_ids(samples: Path) -> None:
    path = samples / "nsys" / "perlmutter-cloverleaf-cuda.sqlite"
    ids = dict(_sql(path, "select id, cuDevice from TARGET_INFO_GPU"))
    assert ids[0] == 3  # the case the mapping exists for
    trace = _load(path)
    assert list(trace.devices["id"]) == [0, 1, 2, 3]
    assert set(trace.kernels["device"]) == {0}


def test_per_process_cuda_device_table_is_honoured(samples: Path, tmp_path: Path) -> None:
    """TARGET_INFO_CUDA_DEVICE (newer exports) maps (process, CUDA id) to a GPU explicitly, e.g.
    for a process that saw one GPU as device 0 through CUDA_VISIBLE_DEVICES."""
    copy = tmp_path / "cloverleaf.sqlite"
    shutil.copyfile(samples / "nsys" / "perlmutter-cloverleaf-cuda.sqlite", copy)
    pid = _sql(copy, "select distinct (globalPid >> 24) & 16777215 from CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    con = sqlite3.connect(copy)
    con.execute("create table TARGET_INFO_CUDA_DEVICE (gpuId integer, cudaId integer not null, pid integer not null)")
    con.execute("insert into TARGET_INFO_CUDA_DEVICE values (1, 0, ?)", (pid,))  # GPU id 1 is cuDevice 2
    con.commit()
    con.close()
    trace = _load(copy)
    assert set(trace.kernels["device"]) == {2}
    assert set(trace.gpu_ops["device"]) == {2}


def test_nvtx_ranges_nest_runtime_calls(h200_db: Path) -> None:
    trace = _load(h200_db)
    cpu = trace.cpu_slices
    nvtx = cpu[cpu["category"] == "nvtx"]
    names = nvtx["name"].astype(str)
    assert {f"step_{i}" for i in range(60)} <= set(names)
    # a range in a named domain is called "domain:text", as nsys names it
    assert int((names == "cuBLAS:cublasCreate_v2").sum()) == 2
    step = nvtx[names == "step_5"].iloc[0]
    inside = cpu[
        (cpu["category"] == "runtime") & (cpu["tid"] == step["tid"])
        & (cpu["start"] >= step["start"]) & (cpu["end"] <= step["end"])
    ]  # fmt: skip
    assert len(inside) > 10
    assert (inside["depth"] > step["depth"]).all()


def test_saxpy_nvtx_text_is_inline_or_registered(samples: Path) -> None:
    trace = _load(samples / "nsys" / "saxpy-mpi-cuda_nsys_perlmutter0.sqlite")
    nvtx = trace.cpu_slices[trace.cpu_slices["category"] == "nvtx"]
    counts = nvtx["name"].astype(str).value_counts().to_dict()
    # inline text ("saxpy") and registered strings in the MPI domain (textId -> StringIds)
    assert counts == {"MPI:MPI_Send": 10, "saxpy": 5, "MPI:MPI_Recv": 5, "MPI:MPI_Init": 1, "MPI:MPI_Finalize": 1}


# ---------------------------------------------------------------------------------------------
# compressed exports, inputs untouched


def test_bundled_gzip_export_equals_the_plain_one(sample_traces: Path, h200_db: Path) -> None:
    packed = _load(sample_traces / BUNDLED)
    plain = _load(h200_db)
    for name in ("kernels", "gpu_ops", "cpu_slices", "flows", "devices"):
        pd.testing.assert_frame_equal(packed.table(name), plain.table(name))
    assert packed.meta.path == str(sample_traces / BUNDLED)


def test_xz_export_loads_and_its_temporary_file_is_removed(
    h200_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    xz = tmp_path / "h200.sqlite.xz"
    xz.write_bytes(lzma.compress(h200_db.read_bytes(), preset=0))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    from kviewer.tempdir import private_tmpdir

    private = private_tmpdir()  # where kviewer writes its temporary files (made on first use)
    before = set(private.rglob("*"))
    trace = load(xz)
    assert len(trace.kernels) == 13579

    def left() -> list[Path]:
        # files only: the process's private folder is made under the temporary folder on its
        # first use, which may be this test's, and stays until the process exits
        return [f for f in scratch.rglob("*") if not f.is_dir()] + sorted(set(private.rglob("*")) - before)

    assert left() == []
    with pytest.raises(LoadCancelled):
        cancelled = CancelToken()
        cancelled.cancel()
        nsys.load(xz, lambda fraction, message: None, cancelled)
    assert left() == []


def test_loading_never_changes_the_input(samples: Path, sample_traces: Path) -> None:
    for p in [samples / "nsys" / name for name in SAMPLES] + [sample_traces / BUNDLED]:
        before = (_sha256(p), p.stat().st_mtime_ns, p.stat().st_size)
        load(p)
        assert (_sha256(p), p.stat().st_mtime_ns, p.stat().st_size) == before
        assert not Path(str(p) + "-journal").exists() and not Path(str(p) + "-wal").exists()


# ---------------------------------------------------------------------------------------------
# bad input


def test_export_cut_in_half_is_a_corrupt_trace(h200_db: Path, tmp_path: Path) -> None:
    half = tmp_path / "half.sqlite"
    data = h200_db.read_bytes()
    half.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptTrace) as err:
        load(half)
    assert str(half) in str(err.value) and "Nsight Systems" in str(err.value)


def test_header_with_flipped_bytes(h200_db: Path, tmp_path: Path) -> None:
    data = bytearray(h200_db.read_bytes())
    flipped = tmp_path / "flipped.sqlite"
    broken = bytearray(data)
    for i in range(16, 24):  # page size, format versions, reserved space
        broken[i] ^= 0xFF
    flipped.write_bytes(bytes(broken))
    with pytest.raises(CorruptTrace) as err:
        load(flipped)
    assert str(flipped) in str(err.value)
    magic = tmp_path / "magic.sqlite"
    broken = bytearray(data)
    broken[0:6] = bytes(b ^ 0xFF for b in broken[0:6])
    magic.write_bytes(bytes(broken))
    with pytest.raises(UnsupportedFormat) as err2:
        load(magic)
    assert str(magic) in str(err2.value)


def test_foreign_sqlite_is_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.db"
    con = sqlite3.connect(foreign)
    con.execute("create table notes(id integer, body text)")
    con.commit()
    con.close()
    with pytest.raises(UnsupportedFormat) as err:
        load(foreign)
    assert str(foreign) in str(err.value)


def test_export_without_kernel_table(h200_db: Path, tmp_path: Path) -> None:
    copy = tmp_path / "no_kernels.sqlite"
    shutil.copyfile(h200_db, copy)
    con = sqlite3.connect(copy)
    con.execute("drop table CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    # a lazy export of a run without kernels leaves the table out: the rest still loads
    trace = load(copy)
    assert len(trace.kernels) == 0
    assert len(trace.gpu_ops) > 0 and len(trace.cpu_slices) > 0
    assert "empty" in {w.kind for w in trace.meta.warnings}


def test_cut_gzip_export_is_truncated(sample_traces: Path, tmp_path: Path) -> None:
    blob = (sample_traces / BUNDLED).read_bytes()
    cut = tmp_path / "cut.sqlite.gz"
    cut.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(TruncatedTrace) as err:
        load(cut)
    assert str(cut) in str(err.value) and "cut short" in str(err.value)


def test_empty_tables_of_a_non_lazy_export_give_empty_tables(samples: Path) -> None:
    # saxpy (2022, non-lazy) has an empty MEMSET table; cloverleaf (lazy) has none at all
    for name in ("saxpy-mpi-cuda_nsys_perlmutter0.sqlite", "perlmutter-cloverleaf-cuda.sqlite"):
        trace = _load(samples / "nsys" / name)
        assert int((trace.gpu_ops["kind"] == "memset").sum()) == 0
        assert np.issubdtype(trace.gpu_ops["bytes"].dtype, np.integer)
