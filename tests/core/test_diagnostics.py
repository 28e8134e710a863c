"""Typed diagnostics (kviewer.core.diagnostics) and the one error base (kviewer.errors)."""

from __future__ import annotations

import inspect

import msgspec

import kviewer.errors
from kviewer.core import Diagnostic, NcuCapture, TraceMeta
from kviewer.core.diagnostics import KINDS, PARTIAL_KINDS


def test_a_diagnostic_is_its_message_for_people_and_its_kind_for_code() -> None:
    d = Diagnostic.warning("truncated", "/tmp/a.json", "the trace is truncated (...)")
    assert (d.kind, d.severity, d.file, str(d)) == ("truncated", "warning", "/tmp/a.json", "the trace is truncated (...)")
    assert d.partial and not Diagnostic.warning("skipped", "a", "x").partial
    part = d.about("/tmp/run/rank-1.json", "rank 1 (rank-1.json)")
    assert (part.kind, part.file, part.message) == ("truncated", "/tmp/run/rank-1.json", "rank 1 (rank-1.json): the trace is truncated (...)")
    assert PARTIAL_KINDS <= set(KINDS)


def test_meta_with_diagnostics_survives_json_as_the_cache_stores_it() -> None:
    meta = TraceMeta(
        path="r.ncu-rep",
        source_format="ncu-rep",
        warnings=[Diagnostic.warning("damaged", "r.ncu-rep", "2 names could not be read"), Diagnostic("cache", "info", "", "rebuilt")],
        ncu_capture=NcuCapture(launch_skip=40, launch_count=30, kernel_filter="regex:gemm", skip_before_match=True),
    )
    back = msgspec.json.decode(msgspec.json.encode(meta), type=TraceMeta)
    assert back == meta and isinstance(back.warnings[0], Diagnostic)
    assert back.warning_texts() == ["2 names could not be read", "rebuilt"]


def test_every_kviewer_error_derives_from_one_base() -> None:
    import kviewer.cli
    import kviewer.io.cache.codec
    import kviewer.io.cache.store
    import kviewer.session.filterexpr

    modules = [kviewer.errors, kviewer.cli, kviewer.io.cache.codec, kviewer.io.cache.store, kviewer.session.filterexpr]
    errors = {
        obj
        for m in modules
        for _, obj in inspect.getmembers(m, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__.startswith("kviewer")
    }
    assert len(errors) >= 10
    assert all(issubclass(e, kviewer.errors.KViewerError) for e in errors), [e for e in errors if not issubclass(e, kviewer.errors.KViewerError)]
