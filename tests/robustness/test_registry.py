"""The registry's safety net: a loader bug or a sniffer bug still reaches the user as a LoadError.

The corpus harness tells a loader bug from a deliberate error by the wording the registry uses
(:data:`tests.robustness.harness.BUG_PREFIX`); these tests pin that wording to the registry.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kviewer.core import Trace, TraceMeta
from kviewer.errors import LoadError, UnsupportedFormat
from kviewer.io import registry
from kviewer.io.registry import LoaderSpec
from tests.robustness import harness

MAGIC = b"KVFUZZ-TEST\n"


def _claims(head: bytes, path: Path) -> bool:
    return head.startswith(MAGIC)


def _raises(exc: BaseException):  # type: ignore[no-untyped-def]
    def load(path: Path, progress: object, cancel: object) -> Trace:
        raise exc

    return load


@pytest.fixture
def extra_loader() -> Iterator[list[LoaderSpec]]:
    """Put test loaders in front of the real ones for one test."""
    specs: list[LoaderSpec] = []
    real = registry.loaders()
    registry._loaders = specs  # the registry's cache: loaders() returns a copy of it
    specs.extend(real)
    yield specs
    registry._loaders = real


def _file(tmp_path: Path) -> Path:
    p = tmp_path / "odd, name \"quoted\".trace"
    p.write_bytes(MAGIC + b"payload")
    return p


def test_a_loader_bug_becomes_a_load_error_naming_the_file(tmp_path: Path, extra_loader: list[LoaderSpec]) -> None:
    extra_loader.insert(0, LoaderSpec("buggy", "Buggy format", 1000, _claims, _raises(KeyError("ts"))))
    p = _file(tmp_path)
    with pytest.raises(LoadError) as info:
        registry.load(p, use_cache=False)
    err = info.value
    assert type(err) is LoadError and err.path == str(p) and str(p) in str(err)
    assert err.recognised == "Buggy format"
    assert err.problem.startswith(harness.BUG_PREFIX) and "KeyError" in err.problem
    assert isinstance(err.__cause__, KeyError)  # the traceback is kept for a bug report


def test_memory_error_in_a_loader(tmp_path: Path, extra_loader: list[LoaderSpec]) -> None:
    extra_loader.insert(0, LoaderSpec("hungry", "Hungry format", 1000, _claims, _raises(MemoryError())))
    with pytest.raises(LoadError) as info:
        registry.load(_file(tmp_path), use_cache=False)
    assert info.value.problem == harness.OOM_PROBLEM


def test_typed_errors_pass_through_unchanged(tmp_path: Path, extra_loader: list[LoaderSpec]) -> None:
    p = _file(tmp_path)
    mine = LoadError(p, "the header says version 99", "Test format")
    extra_loader.insert(0, LoaderSpec("typed", "Test format", 1000, _claims, _raises(mine)))
    with pytest.raises(LoadError) as info:
        registry.load(p, use_cache=False)
    assert info.value is mine


def test_a_sniffer_that_raises_is_not_a_claim(tmp_path: Path, extra_loader: list[LoaderSpec]) -> None:
    def bad_sniff(head: bytes, path: Path) -> bool:
        raise IndexError("sniffer bug")

    ok = Trace(meta=TraceMeta(path="", source_format="fine"))
    extra_loader.insert(0, LoaderSpec("badsniff", "Bad sniffer", 2000, bad_sniff, _raises(AssertionError("never called"))))
    extra_loader.insert(1, LoaderSpec("fine", "Fine format", 1000, _claims, lambda path, progress, cancel: ok))
    assert registry.load(_file(tmp_path), use_cache=False) is ok
    q = tmp_path / "other.bin"
    q.write_bytes(b"\x00\x01unknown")
    with pytest.raises(UnsupportedFormat) as info:
        registry.load(q, use_cache=False)
    assert str(q) in str(info.value)
