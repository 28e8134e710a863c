"""Kernel name helpers shared by every loader and analysis (no I/O)."""

from __future__ import annotations

import re

#: nsys stats strips exactly four digits: cudaLaunchKernel_v7000 is cudaLaunchKernel, while
#: cudaGetFuncBySymbol_v11000 and cuGetProcAddress_v2 keep theirs (another entry point of the API)
_RUNTIME_VERSION = re.compile(r"_v\d{4}$")
_AMD_SUFFIXES = (" [clone .kd]", " (.kd)", ".kd")


def strip_api_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel`` (Nsight Systems versioned API names), as
    ``nsys stats`` names them: only a four-digit suffix goes."""
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
    s = drop_templates(drop_args(s)).strip()
    # drop a leading return type: keep the last space-separated token outside parentheses
    tokens = split_top_level(s)
    if len(tokens) > 1 and not tokens[-1].startswith("("):
        s = tokens[-1]
    return s or name


def split_top_level(s: str, sep: str = " ") -> list[str]:
    """Split at ``sep`` outside (), <> and []; empty pieces are dropped."""
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in s:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]" and depth:
            depth -= 1
        if ch == sep and depth == 0:
            if cur:
                parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        parts.append("".join(cur))
    return parts


def drop_args(s: str) -> str:
    """Drop a trailing argument list glued to the name (``name<...>(args)``); a group after a
    space is part of the name (``Memset (Device)``) and stays."""
    if not s.endswith(")"):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        ch = s[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return s[:i] if i > 0 and s[i - 1] != " " else s
    return s


def drop_templates(s: str) -> str:
    """Remove template parameter lists ``<...>`` at any depth."""
    out: list[str] = []
    depth = 0
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)
