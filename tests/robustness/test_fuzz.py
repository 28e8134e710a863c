"""Property-based fuzzing (hypothesis) of every sniffer and loader, the filter language and the CSV export.

* Each registered sniffer, on arbitrary bytes (and on bytes that open like each format), returns
  a bool and never raises.
* Each file loader, called directly (not through the registry's safety net), on arbitrary bytes
  and on mutated real content (cut, flipped, spliced, duplicated, deleted), returns a Trace or
  raises a :class:`~kviewer.errors.LoadError` naming the file -- nothing else.
* The table filter (``kviewer.session.filterexpr``) parses any string or raises its
  :class:`FilterError`, and never runs code: an audit hook watches for exec/compile/import/
  process/file events while it parses and applies the filter.
* ``kviewer kernels --format csv`` and ``kviewer summary --format csv`` escape trace text: names
  with commas, quotes, line breaks and any other character read back unchanged with :mod:`csv`.

Example counts are bounded and ``deadline=None`` (a loader may take a while on a shared CI
machine); the whole module runs in well under a minute here.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kviewer.core.diagnostics import KINDS, Diagnostic
from kviewer.errors import LoadError
from kviewer.io import detect, load
from kviewer.io.registry import CancelToken, LoaderSpec, loaders

pytestmark = pytest.mark.timeout(600)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)

FILE_LOADERS = [s for s in loaders() if not s.directories]

#: beginnings of the formats kviewer reads and a few it must refuse, to get sniffers past byte 0
PREFIXES = [
    b"", b"SQLite format 3\x00", b"NVR\x00", b'{"traceEvents": [', b'{"schemaVersion": 1, ', b"\xef\xbb\xbf{",
    b'"ID","Process ID","Process Name","Host Name","Kernel Name"', b"==PROF== Connected\n",
    b'"Index","KernelName","gpu-id","queue-id"', b"Dispatch_ID,GPU_ID,Queue_ID,PID,TID,Kernel_Name,Start_Timestamp",
    b'"Kind","Agent_Id","Queue_Id","Kernel_Name","Start_Timestamp","End_Timestamp"',
    b'"Name","Calls","TotalDurationNs","AverageNs","Percentage"', b'{"rocprofiler-sdk-tool": [', b",{\"ph\":",
    b"\x1f\x8b\x08\x00", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"BZh9",
]  # fmt: skip

heads = st.builds(lambda pre, rest: pre + rest, st.sampled_from(PREFIXES), st.binary(max_size=2048))


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    # hypothesis re-runs a test body many times: a module-level folder, not tmp_path
    with tempfile.TemporaryDirectory(prefix="kviewer-fuzz-") as d:
        yield Path(d)


_counter = iter(range(10**9))


def _write(folder: Path, data: bytes, name: str = "input.bin") -> Path:
    sub = folder / str(next(_counter))
    sub.mkdir()
    p = sub / name
    p.write_bytes(data)
    return p


# ---------------------------------------------------------------------------------------------
# sniffers


@pytest.mark.parametrize("spec", loaders(), ids=lambda s: s.name)
@FAST
@given(head=heads)
def test_sniffer_returns_a_bool(spec: LoaderSpec, head: bytes, workdir: Path) -> None:
    p = _write(workdir, head)
    result = spec.sniff(head, p)
    assert result is True or result is False
    # the file may be gone by the time a sniffer looks at it (a sniffer that opens the path)
    assert spec.sniff(head, p.with_name("deleted.bin")) in (True, False)


# ---------------------------------------------------------------------------------------------
# loaders on arbitrary bytes


def _load_direct(spec: LoaderSpec, p: Path) -> None:
    """Call the loader itself: a Trace or a LoadError naming the file, nothing else."""
    try:
        trace = spec.load(p, lambda f, m: None, CancelToken())
    except LoadError as exc:
        assert str(p) in str(exc) and exc.problem, str(exc)
        return
    trace.validate()
    assert all(isinstance(w, Diagnostic) and w.kind in KINDS and w.message for w in trace.meta.warnings)


@pytest.mark.parametrize("spec", FILE_LOADERS, ids=lambda s: s.name)
@SLOW
@given(head=heads)
def test_loader_on_arbitrary_bytes(spec: LoaderSpec, head: bytes, workdir: Path) -> None:
    _load_direct(spec, _write(workdir, head))


# ---------------------------------------------------------------------------------------------
# loaders on mutated real content


def _small_samples(roots: list[Path]) -> dict[str, list[tuple[str, bytes]]]:
    """For each loader, up to three of the smallest files it claims (content decompressed)."""
    from tests.robustness.corpus import compression, decompress

    found: dict[str, list[tuple[int, str, bytes]]] = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            if not p.is_file() or p.stat().st_size > 4 * 1024**2:
                continue
            try:
                spec = detect(p)
            except LoadError:
                continue
            raw = p.read_bytes()
            data = decompress(raw, compression(raw))
            if len(data) > 4 * 1024**2:
                continue
            found.setdefault(spec.name, []).append((len(data), p.name, data))
    return {k: [(n, d) for _, n, d in sorted(v)[:3]] for k, v in found.items()}


@pytest.fixture(scope="module")
def real(sample_traces: Path) -> dict[str, list[tuple[str, bytes]]]:
    from tests.conftest import SHARED_SAMPLES

    return _small_samples([r for r in (SHARED_SAMPLES, sample_traces) if r.is_dir()])


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with one to four random edits: cut, flip, insert, delete, duplicate a slice."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        n = len(buf)
        op = draw(st.sampled_from(["cut", "flip", "insert", "delete", "duplicate", "set"]))
        i = draw(st.integers(0, max(n - 1, 0)))
        if op == "cut":
            del buf[i:]
        elif op == "flip" and n:
            buf[i] ^= draw(st.integers(1, 255))
        elif op == "insert":
            buf[i:i] = draw(st.binary(min_size=1, max_size=64) | st.sampled_from([b",", b'"', b"\n", b"{", b"]", b"\xff", b"\x00", b"-1", b"1e400"]))
        elif op == "delete":
            del buf[i : i + draw(st.integers(1, 256))]
        elif op == "duplicate":
            j = draw(st.integers(i, min(n, i + 4096)))
            buf[j:j] = buf[i:j]
        elif op == "set" and n:
            buf[i] = draw(st.sampled_from(b'0,"\n{}[]:\\ -.e'))
    return bytes(buf)


@pytest.mark.parametrize("spec", FILE_LOADERS, ids=lambda s: s.name)
@SLOW
@given(choice=st.data())
def test_loader_on_mutated_real_content(spec: LoaderSpec, choice: st.DataObject, real: dict[str, list[tuple[str, bytes]]], workdir: Path) -> None:
    files = real.get(spec.name)
    if not files:
        pytest.skip(f"no {spec.name} sample (under 4 MB) in the sample folders")
    name, data = choice.draw(st.sampled_from(files), label="sample")
    damaged = choice.draw(mutated(data), label="damage")
    if choice.draw(st.booleans(), label="gzip"):
        damaged, name = gzip.compress(damaged, compresslevel=1, mtime=0), name + ".gz"
    _load_direct(spec, _write(workdir, damaged, name))


# ---------------------------------------------------------------------------------------------
# the filter language: parsed, never evaluated


class _NoCode:
    """Audit-hook switch: records events that mean code ran or the outside world was touched."""

    FORBIDDEN = ("exec", "compile", "import", "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn",
                 "os.spawn", "os.fork", "open", "socket.connect", "ctypes.dlopen", "builtins.input", "os.remove")  # fmt: skip
    active: list[str] | None = None
    installed = False
    owner: int | None = None

    @classmethod
    def hook(cls, event: str, args: tuple[object, ...]) -> None:
        if cls.active is not None and threading.get_ident() == cls.owner and event.startswith(cls.FORBIDDEN):
            cls.active.append(event)

    @classmethod
    @contextlib.contextmanager
    def watch(cls) -> Iterator[list[str]]:
        if not cls.installed:
            sys.addaudithook(cls.hook)
            cls.installed = True
        seen: list[str] = []
        cls.owner = threading.get_ident()
        cls.active = seen
        try:
            yield seen
        finally:
            cls.active = None


def _columns():  # type: ignore[no-untyped-def]
    from kviewer.session.filterexpr import FilterColumn

    names = ["gemm_kernel", "void at::native::elementwise<float, 3>(int)", "__import__('os')", "", "ampere_sgemm"]
    return {
        "name": FilterColumn(np.array([0, 1, 2, 3, 4, -1]), "text", names),
        "short_name": FilterColumn(np.array([0, 1, 2, 3, 4, -1]), "text", names),
        "dur": FilterColumn(np.array([10.0, 2e3, 5e6, np.nan, 1.0, 3.0]), "time"),
        "grid_x": FilterColumn(np.array([1, 128, -1, 4, 2, 8]), "number", missing_int=True),
        "dram_bytes": FilterColumn(np.array([1e9, 0.0, np.nan, 5.0, 1e3, 2.0]), "number"),
    }


TOKENS = ["gemm", "name", "dur", "grid_x", "regs", "dram_bytes", ">", ">=", "<", "=", "==", "!=", "~", "!~", "=~",
          "and", "or", "not", "&&", "||", ",", "-", "(", ")", "10us", "1.5GB", "50%", "64k", "1e3", "-1", '"a b"',
          "'x'", "/^g.*m$/", "re:sgemm", "/[/", "__import__('os').system('touch KVFUZZ')", "eval(", "exec(",
          "lambda:0", "${HOME}", "`id`", ";", "\\", "\"", "'", "µs", "nan", "inf"]  # fmt: skip


@FAST
@given(text=st.one_of(st.text(max_size=80), st.lists(st.sampled_from(TOKENS), max_size=8).map(" ".join)))
def test_filter_parses_or_raises_its_error(text: str) -> None:
    from kviewer.session.filterexpr import FilterError, apply_filter

    cols = _columns()
    marker = Path("KVFUZZ")
    with _NoCode.watch() as seen:
        try:
            mask = apply_filter(text, cols, 6, aliases={"regs": "grid_x"})
        except FilterError:
            mask = None
    assert not seen, f"{text!r} made the filter {seen}"
    assert not marker.exists()
    if mask is not None:
        assert mask.dtype == bool and mask.shape == (6,)


def test_filter_language_has_no_evaluator() -> None:
    """The module holds no call that evaluates text as code (eval, exec, compile, pandas query/eval)."""
    import ast

    import kviewer.session.filterexpr as fx

    tree = ast.parse(Path(fx.__file__).read_text())
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
            fname = n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            if fname in ("eval", "exec", "query", "__import__", "system"):
                pytest.fail(f"filterexpr calls {fname} at line {n.lineno}")
            if fname == "compile":  # re.compile is the one compile allowed
                assert isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "re", n.lineno


# ---------------------------------------------------------------------------------------------
# CSV export escapes trace text

names_st = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


def _kineto(names: list[str]) -> bytes:
    events = [
        {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": 10 * i, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": i}}
        for i, n in enumerate(names)
    ]
    return json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()


def _cli(*argv: str) -> str:
    from kviewer.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert code == 0, err.getvalue()
    return out.getvalue()


@SLOW
@given(names=st.lists(names_st | st.sampled_from(['a,b', 'say "hi"', "two\nlines", "cr\rhere", "tab\there", "=cmd|' /C calc'!A0", ""]), min_size=1, max_size=6))
def test_csv_export_round_trips_names(names: list[str], workdir: Path) -> None:
    assume(any(n for n in names))
    p = _write(workdir, _kineto(names), "trace.json")
    os.environ["KVIEWER_NO_CACHE"] = "1"
    expected = [str(x) for x in load(p, use_cache=False).kernels["name"]]
    # --raw-csv: exactly the names (by default a formula-like cell gets a leading ', see core.text)
    rows = list(csv.DictReader(io.StringIO(_cli("kernels", str(p), "--format", "csv", "--no-cache", "--raw-csv"), newline="")))
    assert [r["name"] for r in rows] == expected
    rows = list(csv.DictReader(io.StringIO(_cli("summary", str(p), "--format", "csv", "--no-cache", "--raw-csv"), newline="")))
    assert sorted(r["name"] for r in rows) == sorted(set(expected))
    guarded = list(csv.DictReader(io.StringIO(_cli("kernels", str(p), "--format", "csv", "--no-cache"), newline="")))
    from kviewer.core.text import csv_cell

    assert [r["name"] for r in guarded] == [csv_cell(n) for n in expected]
