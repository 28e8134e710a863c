"""Decisions are made on data, never on words (a grep test).

Warnings are :class:`~kviewer.core.diagnostics.Diagnostic` with a ``kind``, errors are typed
(:mod:`kviewer.errors`) with their parts as fields: code and tests decide on those. This test fails
on the ways code used to read meaning out of the text instead: ``"truncated" in str(exc)``, a regex
over warnings, ``why.split("; pass --device")``, ``w.startswith("kernels not coloured")``.

A line that must read a *foreign* library's message (msgspec's or SQLite's, which give no typed
alternative) says so with a ``# foreign message`` comment; that is the one place it is read.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALLOW = "# foreign message"

#: what code must not do with the text of a warning or an error
CODE_PATTERNS = {
    "matching words in an exception's text": re.compile(r"""["'][^"']*["']\s+(not\s+)?in\s+str\(\s*\w+\s*\)"""),
    "parsing an exception's text": re.compile(r"\bstr\(\s*(exc|e|err|error|ex)\s*\)\s*\.\s*(lower|upper|startswith|endswith|split|rsplit|partition|find|index)\b"),
    "testing the words of a warning, reason or message": re.compile(
        r"\b\w*(warning|why|reason|message|problem|msg)s?\w*(\[[^\]]*\])?\s*\.\s*(startswith|endswith|find)\("
    ),
    # splitting on a line break to show the first line is display; splitting on words or ": " is parsing
    "cutting a warning, reason or message apart": re.compile(
        r"\b\w*(warning|why|reason|message|problem|msg)s?\w*(\[[^\]]*\])?\s*\.\s*(split|rsplit|partition|rpartition)\(\s*[\"'][^\"'\\]*[A-Za-z:;]"
    ),
    "testing the words of a warning": re.compile(
        r"\bw\.(startswith|endswith|find)\([^#]*\bfor\s+w\s+in\s+[\w.]*warnings|\bfor\s+w\s+in\s+[\w.]*warnings\b[^#]*\bw\.(startswith|endswith|find)\("
    ),
    "a regex over warnings": re.compile(r"\.(search|match|fullmatch|findall)\(\s*w\s*\)[^#]*\bfor\s+w\s+in\s+[\w.]*warnings"),
    "matching words in warnings": re.compile(r"""["'][^"']*["']\s+(not\s+)?in\s+w\b[^#]*\bfor\s+w\s+in\b[^#]*warnings"""),
}

#: what tests must not do with a trace's warnings (decide on ``kind``; CLI output text is the
#: product and may be checked as text)
TEST_PATTERNS = {
    "matching words in meta.warnings": re.compile(r"""["'][^"']*["']\s+(not\s+)?in\s+w\b[^#]*\bfor\s+w\s+in\s+[\w.]*meta\.warnings"""),
    "startswith on meta.warnings": re.compile(r"\bw\.(startswith|endswith)\([^#]*\bfor\s+w\s+in\s+[\w.]*meta\.warnings"),
}


def _offences(folder: Path, patterns: dict[str, re.Pattern[str]]) -> list[str]:
    out = []
    for path in sorted(folder.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ALLOW in line or line.lstrip().startswith("#"):
                continue
            for what, pattern in patterns.items():
                if pattern.search(line):
                    out.append(f"{path.relative_to(ROOT)}:{n}: {what}: {line.strip()}")
    return out


def test_code_decides_on_kinds_and_types_not_words() -> None:
    assert _offences(ROOT / "kviewer", CODE_PATTERNS) == []


def test_tests_decide_on_kinds_not_words() -> None:
    assert _offences(ROOT / "tests", TEST_PATTERNS) == []


@pytest.mark.parametrize(
    "line",
    [
        'if "truncated" in str(exc) or cut:',
        'if "UTF-8" not in str(exc):',
        'text = str(exc).lower()',
        'return why.split(": ", 1)[-1].split("; pass --device")[0]',
        'warnings[:] = [w for w in warnings if not w.startswith(UNCOLOURED_WARNING)]',
        'return not any(_PARTIAL_WORDS.search(w) for w in trace.meta.warnings)',
        'if info.why and not info.why.endswith("has no kernels"):',
        '(skipped if why.startswith(("not a trace", "a ")) else unreadable).append((f.name, why))',
    ],
)
def test_the_patterns_catch_what_they_are_for(line: str) -> None:
    """Each old way of deciding on words (all were in kviewer/ before diagnostics were typed) is caught."""
    assert any(p.search(line) for p in CODE_PATTERNS.values()), line


@pytest.mark.parametrize(
    "line",
    [
        'assert any("truncated" in w for w in trace.meta.warnings)',
        'assert not any(w.startswith("kernels not coloured by bound") for w in tracks.trace.meta.warnings)',
    ],
)
def test_the_test_patterns_catch_what_they_are_for(line: str) -> None:
    assert any(p.search(line) for p in TEST_PATTERNS.values()), line
