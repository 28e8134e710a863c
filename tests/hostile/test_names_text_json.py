"""Round 3 (issue #28, items 4, 7 and 9): a huge kernel name, lone surrogate escapes in Kineto
JSON, and invisible characters that make two names look alike."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest

from tests.hostile.build import kineto_json
from tests.hostile.conftest import run_cli

MB = 1024 * 1024


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# item 4: a huge kernel name in an ncu CSV


def _ncu_csv_with_name(sample: Path, out: Path, name: str) -> tuple[Path, int]:
    """The bundled ncu raw CSV with its first kernel renamed ``name``; returns (path, kernels)."""
    text = gzip.decompress(sample.read_bytes()).decode()
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = list(csv.reader(io.StringIO("".join(lines[start:]))))
    header, units, data = rows[0], rows[1], rows[2:]
    col = header.index("Kernel Name")
    data[0][col] = name
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerows([header, units, *data])
    out.write_text("".join(lines[:start]) + buf.getvalue())
    return out, len(data)


def test_a_huge_kernel_name_in_an_ncu_csv_loads_and_is_kept_whole(tmp_path: Path, sample_traces: Path) -> None:
    """A 64 MB kernel name (templates nested 32M deep) in an ncu CSV: the load finishes under the
    2 GiB cap, the name is kept whole and its short name comes from a bounded prefix."""
    body = "void k" + "<(" * (32 * MB // 2)
    p, n = _ncu_csv_with_name(sample_traces / "h200_gemms_full.raw.csv.gz", tmp_path / "huge.csv", body)
    before = sha(p)
    r = run_cli(["kernels", str(p), "--format", "json"], tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    assert len(rows) == n
    assert max(len(row["name"]) for row in rows) == len(body)  # kept whole
    assert max(len(row["short_name"]) for row in rows) <= 64 * 1024
    assert sha(p) == before


@pytest.mark.parametrize("name", ["flat", "nested", "spaced"])
def test_name_helpers_are_bounded_on_a_200MB_name(tmp_path: Path, name: str) -> None:
    """Every name helper on a 200M-character name, in a process capped at 1.5 GiB of address
    space: the old per-character loops built a list of 200M characters (1.6 GB) and took minutes;
    the bounded ones look at the first MAX_NAME_WORK characters only."""
    import subprocess
    import sys

    from tests.hostile.conftest import _cap

    make = {"flat": "'k' * 200_000_000", "nested": "'<' * 200_000_000", "spaced": "'a ' * 100_000_000"}[name]
    code = (
        "from kviewer.core.names import drop_args, drop_templates, short_name, split_top_level\n"
        "MAX_NAME_WORK = 64 * 1024\n"
        f"s = {make}\n"
        "a = short_name(s); b = split_top_level(s); c = drop_templates(s); d = drop_args(s)\n"
        "assert len(a) <= MAX_NAME_WORK and sum(map(len, b)) <= MAX_NAME_WORK and len(c) <= MAX_NAME_WORK\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       preexec_fn=_cap(1536 * MB), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_name_helpers_keep_their_answers() -> None:
    """The regex walkers give the per-character loops' answers (checked against a plain
    re-implementation over every string of a small alphabet up to length 7)."""
    import itertools

    from kviewer.core.names import drop_args, drop_templates, split_top_level

    def ref_split(s: str, sep: str = " ") -> list[str]:
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch in "(<[":
                depth += 1
            elif ch in ")>]" and depth:
                depth -= 1
            if ch == sep and depth == 0:
                if cur:
                    parts.append(cur)
                cur = ""
            else:
                cur += ch
        return parts + ([cur] if cur else [])

    def ref_templates(s: str) -> str:
        out, depth = "", 0
        for ch in s:
            if ch == "<":
                depth += 1
            elif ch == ">" and depth:
                depth -= 1
            elif depth == 0:
                out += ch
        return out

    def ref_args(s: str) -> str:
        if not s.endswith(")"):
            return s
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            if s[i] == ")":
                depth += 1
            elif s[i] == "(":
                depth -= 1
                if depth == 0:
                    return s[:i] if i > 0 and s[i - 1] != " " else s
        return s

    for n in range(8):
        for t in itertools.product("a <>(),", repeat=n):
            s = "".join(t)
            assert split_top_level(s) == ref_split(s), s
            assert split_top_level(s, ",") == ref_split(s, ","), s
            assert drop_templates(s) == ref_templates(s), s
            assert drop_args(s) == ref_args(s), s


# ---------------------------------------------------------------------------------------------
# item 7: a lone surrogate escape in Kineto JSON


def _kineto_with_raw_names(path: Path, raw_names: list[str]) -> Path:
    """A Kineto trace whose names are written as raw JSON string bodies (escapes kept as typed)."""
    events = []
    for i, raw in enumerate(raw_names):
        events.append(
            '{"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %d, "dur": 5, '
            '"args": {"device": 0, "stream": 7, "correlation": %d}}' % (raw, 10 * i, i + 1)
        )
    path.write_text('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]}")
    return path


@pytest.mark.parametrize("compressed", [False, True])
def test_a_lone_surrogate_escape_loads_every_event(tmp_path: Path, compressed: bool) -> None:
    from kviewer.io import load

    raw = ["first", "bad\\ud83d name", "\\udc00low alone", "pair \\ud83d\\ude00 ok", "slash \\\\ud83d kept", "last"]
    p = _kineto_with_raw_names(tmp_path / "s.json", raw)
    if compressed:
        gz = tmp_path / "s.json.gz"
        gz.write_bytes(gzip.compress(p.read_bytes()))
        p = gz
    before = sha(p)
    trace = load(p, use_cache=False)
    names = trace.kernels.sort_values("start")["name"].astype(str).tolist()
    assert names == ["first", "bad\ufffd name", "\ufffdlow alone", "pair \U0001f600 ok", "slash \\ud83d kept", "last"]
    kinds = [d.kind for d in trace.meta.warnings]
    assert "encoding" in kinds and "truncated" not in kinds
    assert sha(p) == before


def test_a_lone_surrogate_through_the_cli(tmp_path: Path) -> None:
    p = _kineto_with_raw_names(tmp_path / "s.json", ["a", "b\\ud83d", "c"])
    r = run_cli(["summary", str(p), "--format", "json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(row["name"] for row in json.loads(r.stdout)) == ["a", "b\ufffd", "c"]
    assert "ends early" not in r.stderr and "U+FFFD" in r.stderr


# ---------------------------------------------------------------------------------------------
# item 9: invisible and confusable characters


LOOKALIKES = {
    "tag characters": "gemm\U000e0041\U000e0042",
    "hangul filler": "gemm\u3164",
    "soft hyphen": "ge\u00admm",
    "mongolian vowel separator": "gemm\u180e",
    "halfwidth hangul filler": "gemm\uffa0",
    "variation selector": "gemm\ufe0f",
}


@pytest.mark.parametrize("what", list(LOOKALIKES), ids=list(LOOKALIKES))
def test_invisible_lookalikes_are_shown_escaped(tmp_path: Path, what: str) -> None:
    """Two kernels named "gemm" and "gemm" + an invisible character: the table and CSV show them
    differently (the invisible one as U+XXXX); JSON keeps the exact text."""
    evil = LOOKALIKES[what]
    p = kineto_json(tmp_path / "t.json", ["gemm", evil])
    table = run_cli(["summary", str(p)], tmp_path)
    assert table.returncode == 0, table.stderr
    shown = [line.split()[0] for line in table.stdout.splitlines()[2:]]
    assert len(set(shown)) == 2 and "gemm" in shown
    other = next(s for s in shown if s != "gemm")
    assert all(ch.isascii() and ch.isprintable() for ch in other), other
    invisible = next(ch for ch in evil if ch not in "gemm")
    assert f"U+{ord(invisible):04X}" in other
    csv_out = run_cli(["summary", str(p), "--format", "csv"], tmp_path)
    assert f"U+{ord(invisible):04X}" in csv_out.stdout
    js = run_cli(["summary", str(p), "--format", "json"], tmp_path)
    assert sorted(row["name"] for row in json.loads(js.stdout)) == sorted(["gemm", evil])
