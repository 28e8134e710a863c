from __future__ import annotations

import gzip
import hashlib
import lzma
from pathlib import Path

import pytest

from kviewer.errors import CorruptTrace, LoadError
from kviewer.io.source import compression_of, connect_readonly, read_content, read_head

PAYLOAD = b'{"traceEvents": [' + b",".join(b'{"ph":"X","name":"k%d"}' % i for i in range(5000)) + b"]}"


@pytest.mark.parametrize("comp", ["gzip", "xz", "zstd", None])
def test_transparent_decompression(tmp_path: Path, comp: str | None) -> None:
    p = tmp_path / "t.json"
    if comp == "gzip":
        p.write_bytes(gzip.compress(PAYLOAD))
    elif comp == "xz":
        p.write_bytes(lzma.compress(PAYLOAD))
    elif comp == "zstd":
        import zstandard

        p.write_bytes(zstandard.ZstdCompressor().compress(PAYLOAD))
    else:
        p.write_bytes(PAYLOAD)
    assert compression_of(p.read_bytes()[:8]) == comp
    assert read_head(p, 100) == PAYLOAD[:100]
    content = read_content(p)
    assert content.data == PAYLOAD and not content.truncated


@pytest.mark.parametrize("comp", ["gzip", "xz"])
def test_cut_compressed_stream_gives_prefix_and_flag(tmp_path: Path, comp: str) -> None:
    blob = gzip.compress(PAYLOAD) if comp == "gzip" else lzma.compress(PAYLOAD)
    p = tmp_path / "cut"
    p.write_bytes(blob[: len(blob) // 2])
    content = read_content(p)
    assert content.truncated
    assert PAYLOAD.startswith(content.data)
    assert read_head(p, 50) == PAYLOAD[:50]


def test_decompression_bomb_is_bounded(tmp_path: Path) -> None:
    p = tmp_path / "bomb.gz"
    p.write_bytes(gzip.compress(b"\0" * (20 * 1024 * 1024)))
    with pytest.raises(CorruptTrace, match="decompresses to more than"):
        read_content(p, max_bytes=1024 * 1024)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        read_head(tmp_path / "nope")
    with pytest.raises(LoadError, match="is a directory"):
        read_head(tmp_path)


def test_sqlite_opened_read_only(tmp_path: Path) -> None:
    import sqlite3

    p = tmp_path / "db.sqlite"
    con = sqlite3.connect(p)
    con.execute("create table t(x)")
    con.commit()
    con.close()
    before = hashlib.sha256(p.read_bytes()).hexdigest()
    ro = connect_readonly(p)
    # refused twice over: the authorizer allows no writes, and the file is opened mode=ro
    with pytest.raises(sqlite3.DatabaseError, match="readonly|not authorized"):
        ro.execute("insert into t values (1)")
    ro.close()
    assert hashlib.sha256(p.read_bytes()).hexdigest() == before


def test_not_sqlite_is_corrupt(tmp_path: Path) -> None:
    p = tmp_path / "x.sqlite"
    p.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    with pytest.raises(CorruptTrace) as err:
        connect_readonly(p)
    assert str(p.name) in str(err.value)


def test_cut_zstd_stream_gives_prefix_and_flag(tmp_path: Path) -> None:
    import zstandard

    blob = zstandard.ZstdCompressor().compress(PAYLOAD)
    p = tmp_path / "cut.zst"
    p.write_bytes(blob[: len(blob) // 2])
    content = read_content(p)
    assert content.truncated
    assert PAYLOAD.startswith(content.data)


@pytest.mark.parametrize("comp", ["gzip", "xz", "zstd"])
def test_concatenated_streams_are_read_whole(tmp_path: Path, comp: str) -> None:
    import zstandard

    pack = {"gzip": gzip.compress, "xz": lzma.compress, "zstd": zstandard.ZstdCompressor().compress}[comp]
    p = tmp_path / "two"
    p.write_bytes(pack(PAYLOAD[:1000]) + pack(PAYLOAD[1000:]))
    content = read_content(p)
    assert content.data == PAYLOAD and not content.truncated


def test_one_decompression_path_has_both_caps(tmp_path: Path) -> None:
    from kviewer.io.source import BOMB_FLOOR, DecompressStream

    p = tmp_path / "bomb.gz"
    p.write_bytes(gzip.compress(b" " * (BOMB_FLOOR + 8 * 1024 * 1024), 9))
    with open(p, "rb") as f, pytest.raises(CorruptTrace, match="over 100x"):
        for _ in DecompressStream(p, f, "gzip").chunks():
            pass
    with open(p, "rb") as f, pytest.raises(CorruptTrace, match="decompresses to more than"):
        for _ in DecompressStream(p, f, "gzip", max_bytes=1024 * 1024).chunks():
            pass
