"""Memory is bounded by the data, never by repetition; bombs stop early; the budget is enforced.

Each load runs in its own process under an address-space cap (conftest.CAP_BYTES), so a
regression fails the test with a MemoryError-turned-error instead of taking the machine down.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

import pytest

from tests.hostile.build import nsys_export
from tests.hostile.conftest import leftovers, one_error_line, run_cli

MB = 1024 * 1024


def test_one_big_name_shared_by_many_kernels_is_held_once(tmp_path: Path) -> None:
    """A 2 MB name shared by 2,000 kernels: per-row copies would be 4 GB (over the 2 GiB cap)."""
    name = "k" * (2 * MB)
    p = nsys_export(tmp_path / "shared.sqlite", [name, "short"], [0] * 2000)
    r = run_cli(["summary", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert len(rows) == 1 and rows[0]["name"] == name and rows[0]["count"] == 2000


def test_shared_runtime_names_are_held_once(tmp_path: Path) -> None:
    """The CUDA API table maps names through StringIds too (a 2 MB call name on 2,000 calls)."""
    big = "cudaLaunchKernel" + "x" * (2 * MB)
    extra = (
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, globalTid INTEGER, "
        "correlationId INTEGER, nameId INTEGER);"
        + "".join(f"INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES ({i * 1000}, {i * 1000 + 10}, {(1234 << 24) + 1}, {i}, 1);" for i in range(2000))
    )
    p = nsys_export(tmp_path / "api.sqlite", ["kern", big], [0] * 2000, extra_sql=extra)
    r = run_cli(["info", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["tables"]["cpu_slices"] == 2000


def _gzip_bomb(path: Path, total: int, head: bytes = b'{"schemaVersion": 1, "traceEvents": [') -> Path:
    """``total`` bytes of blanks after ``head``, gzip-compressed (~1000x)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    blank = b" " * MB
    with open(path, "wb") as f:
        f.write(c.compress(head))
        for _ in range(total // MB):
            f.write(c.compress(blank))
        f.write(c.flush())
    return path


def test_gzip_bomb_stops_at_the_ratio_cap(tmp_path: Path) -> None:
    p = _gzip_bomb(tmp_path / "bomb.json.gz", 400 * MB)
    assert p.stat().st_size < 1 * MB
    r = run_cli(["summary", str(p)], tmp_path)
    line = one_error_line(r, p)
    assert "decompression bomb" in line
    assert leftovers(tmp_path) == []


def test_kineto_fallback_path_is_capped_too(tmp_path: Path) -> None:
    """The header the streaming path cannot use (the key first seen inside a string) sends the
    Kineto reader down its whole-document path: the same caps apply there."""
    head = b'{"note": "\\"traceEvents\\": [", "schemaVersion": 1, "traceEvents": ['
    p = _gzip_bomb(tmp_path / "fallback.json.gz", 400 * MB, head)
    one_error_line(run_cli(["summary", str(p)], tmp_path), p)


def test_zstd_stream_between_the_old_and_new_ratio_cap(tmp_path: Path) -> None:
    """~250x: under the old 500x guard (which let it reach 15.9 GB), over the 100x one."""
    zstandard = pytest.importorskip("zstandard")
    rng = __import__("random").Random(1)
    c = zstandard.ZstdCompressor(level=3).compressobj()
    out = bytearray(c.compress(b'{"schemaVersion": 1, "traceEvents": ['))
    produced = 0
    while produced < 200 * MB:
        chunk = b"".join(b" " * 4000 + rng.randbytes(12) for _ in range(256))
        out += c.compress(chunk)
        produced += len(chunk)
    out += c.flush()
    p = tmp_path / "z.json.zst"
    p.write_bytes(bytes(out))
    ratio = produced / len(out)
    assert 100 < ratio < 500, ratio
    line = one_error_line(run_cli(["summary", str(p)], tmp_path), p)
    assert "decompression bomb" in line


def test_compressed_nsys_bomb_leaves_no_temporary_file(tmp_path: Path) -> None:
    """A gzip'd "export" that expands without bound: refused, and its temporary file removed."""
    db = nsys_export(tmp_path / "small.sqlite", ["k"], [0])
    head = db.read_bytes()
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    p = tmp_path / "bomb.sqlite.gz"
    with open(p, "wb") as f:
        f.write(c.compress(head))
        for _ in range(400):
            f.write(c.compress(b"\0" * MB))
        f.write(c.flush())
    one_error_line(run_cli(["summary", str(p)], tmp_path), p)
    assert leftovers(tmp_path) == []


def test_memory_budget_stops_a_load_with_a_typed_error(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0] * 10)
    # smaller than the interpreter itself: any load is over it
    line = one_error_line(run_cli(["summary", str(p)], tmp_path, KVIEWER_MAX_MEMORY="1M"), p)
    assert "KVIEWER_MAX_MEMORY" in line


def test_memory_budget_error_is_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.errors import MemoryLimitExceeded
    from kviewer.io import load

    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0] * 10)
    monkeypatch.setenv("KVIEWER_MAX_MEMORY", "1M")
    with pytest.raises(MemoryLimitExceeded) as err:
        load(p, use_cache=False)
    assert err.value.path == str(p)


def test_bad_memory_budget_setting_is_a_user_error(tmp_path: Path) -> None:
    p = nsys_export(tmp_path / "t.sqlite", ["k"], [0])
    r = run_cli(["summary", str(p)], tmp_path, KVIEWER_MAX_MEMORY="lots")
    assert r.returncode == 2 and "KVIEWER_MAX_MEMORY" in r.stderr and "Traceback" not in r.stderr


def test_budget_defaults_to_a_share_of_memory_and_respects_ulimit(monkeypatch: pytest.MonkeyPatch) -> None:
    from kviewer.io import memory

    monkeypatch.delenv("KVIEWER_MAX_MEMORY", raising=False)
    phys = memory.physical_memory()
    assert phys is not None
    assert memory.memory_budget() <= int(phys * memory.DEFAULT_SHARE)
    monkeypatch.setenv("KVIEWER_MAX_MEMORY", "50%")
    assert abs(memory.memory_budget() - phys // 2) < phys // 100 or memory.memory_budget() < phys // 2
    monkeypatch.setenv("KVIEWER_MAX_MEMORY", "3G")
    assert memory.memory_budget() <= 3 * 1024**3


def test_gzip_bomb_in_memory_reader_is_bounded(tmp_path: Path) -> None:
    """read_content (the CSV/JSON loaders' path) refuses a bomb after a bounded amount."""
    from kviewer.errors import CorruptTrace
    from kviewer.io.source import read_content

    p = _gzip_bomb(tmp_path / "b.csv.gz", 300 * MB, head=b"a,b\n")
    with pytest.raises(CorruptTrace):
        read_content(p)


def test_real_compression_ratios_pass(tmp_path: Path) -> None:
    """A real trace compressed hard (gzip -9 of repetitive Kineto JSON, ~30x) still loads."""
    events = [{"ph": "X", "cat": "kernel", "name": f"k{i % 50}", "pid": 0, "tid": 7, "ts": i * 10, "dur": 5,
               "args": {"device": 0, "stream": 7, "correlation": i}} for i in range(100_000)]  # fmt: skip
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps({"schemaVersion": 1, "traceEvents": events}).encode(), 9))
    r = run_cli(["info", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["tables"]["kernels"] == 100_000
    assert os.path.getsize(p) > 0


def test_rocprofv3_json_huge_kernel_id_and_shared_name(tmp_path: Path) -> None:
    """A kernel_id of 10**12 (a table indexed by id would be 8 TB) named by a 2 MB name that
    2,000 dispatches share, and a dispatch of an unknown id near 2**62."""
    from tests.io.test_rocprof_bad import _doc

    doc = _doc()
    tool = doc["rocprofiler-sdk-tool"][0]
    big = "k" * (2 * MB)
    tool["kernel_symbols"] = [{"kernel_id": 10**12, "formatted_kernel_name": big}]
    template = tool["buffer_records"]["kernel_dispatch"][0]
    dispatches = []
    for i in range(2000):
        d = json.loads(json.dumps(template))
        d["dispatch_info"]["kernel_id"] = 10**12 if i else 2**62
        d["dispatch_info"]["dispatch_id"] = i + 1
        d["start_timestamp"], d["end_timestamp"] = 2000 + i * 10, 2005 + i * 10
        dispatches.append(d)
    tool["buffer_records"]["kernel_dispatch"] = dispatches
    tool["callback_records"] = {}
    p = tmp_path / "1_results.json"
    p.write_text(json.dumps(doc))
    r = run_cli(["summary", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {row["name"]: row["count"] for row in json.loads(r.stdout)}
    assert rows[big] == 1999 and rows[f"<kernel_id {2**62}>"] == 1
