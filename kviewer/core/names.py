"""Kernel name helpers shared by every loader (no I/O)."""

from __future__ import annotations

import re

_RUNTIME_VERSION = re.compile(r"_v\d+$")
_AMD_SUFFIXES = (" [clone .kd]", " (.kd)", ".kd")


def strip_api_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (Nsight Systems versioned API names)."""
    return _RUNTIME_VERSION.sub("", name)


def strip_kd(name: str) -> str:
    """Remove the code-object suffixes rocprof appends to AMD kernel names."""
    for suffix in _AMD_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def short_name(name: str) -> str:
    """A short, readable kernel name: no return type, arguments or template parameters.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``at::native::vectorized_elementwise_kernel``. Names without brackets are returned unchanged
    (after stripping AMD ``.kd`` suffixes).
    """
    s = strip_kd(name.strip()).replace("<unnamed>", "(anonymous namespace)")
    # drop the argument list: a trailing "(...)" glued to the function name
    s = _drop_trailing_group(s, "(", ")")
    # drop template parameters at any depth
    out = []
    depth = 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    s = "".join(out).strip()
    # drop a leading return type: keep the last space-separated token outside parentheses
    tokens = _top_level_split(s)
    if len(tokens) > 1 and not tokens[-1].startswith("("):
        s = tokens[-1]
    return s or name


def _top_level_split(s: str) -> list[str]:
    tokens: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        if ch == " " and depth == 0:
            if cur:
                tokens.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        tokens.append("".join(cur))
    return tokens


def _drop_trailing_group(s: str, open_ch: str, close_ch: str) -> str:
    if not s.endswith(close_ch):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == close_ch:
            depth += 1
        elif ch == open_ch:
            depth -= 1
            if depth == 0:
                # "name(args)" is an argument list; "Memset (Device)" is part of the name
                return s[:i] if i > 0 and s[i - 1] != " " else s
    return s
