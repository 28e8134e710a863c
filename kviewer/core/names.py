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


#: the most characters of a name the helpers below look at. A real kernel name (CUTLASS templates
#: included) is a few KB; a hostile one can be hundreds of MB, and every helper here walks its
#: brackets. Past this length only the first MAX_NAME_WORK characters are looked at, so the work
#: (and memory) per name is bounded whatever the file holds; the name itself is kept whole by the
#: loaders.
MAX_NAME_WORK = 64 * 1024

#: the characters the bracket walkers stop at (everything else is skipped at C speed)
_BRACKETS = re.compile(r"[()<>\[\]]")


def bounded(name: str) -> str:
    """``name`` cut to :data:`MAX_NAME_WORK` characters (the part the helpers here look at)."""
    return name if len(name) <= MAX_NAME_WORK else name[:MAX_NAME_WORK]


def short_name(name: str) -> str:
    """A short, readable kernel name: no return type, arguments or template parameters.

    ``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``at::native::vectorized_elementwise_kernel``. Names without brackets are returned unchanged
    (after stripping AMD ``.kd`` suffixes). A name longer than :data:`MAX_NAME_WORK` is shortened
    from its first MAX_NAME_WORK characters.
    """
    name = bounded(name)
    s = strip_kd(name.strip()).replace("<unnamed>", "(anonymous namespace)")
    s = drop_templates(drop_args(s)).strip()
    # drop a leading return type: keep the last space-separated token outside parentheses
    tokens = split_top_level(s)
    if len(tokens) > 1 and not tokens[-1].startswith("("):
        s = tokens[-1]
    return s or name


def split_top_level(s: str, sep: str = " ") -> list[str]:
    """Split at ``sep`` outside (), <> and []; empty pieces are dropped. Looks at the first
    :data:`MAX_NAME_WORK` characters only; the text between brackets and separators is skipped by
    a regular expression, not character by character."""
    s = bounded(s)
    if not _BRACKETS.search(s):
        return [p for p in s.split(sep) if p]
    parts: list[str] = []
    depth = 0
    start = 0
    pattern = re.compile(f"[()<>\\[\\]{re.escape(sep)}]")
    for m in pattern.finditer(s):
        ch = m.group(0)
        if ch == sep and depth == 0:
            if m.start() > start:
                parts.append(s[start : m.start()])
            start = m.end()
        elif ch in "(<[":
            depth += 1
        elif ch in ")>]" and depth:
            depth -= 1
    if start < len(s):
        parts.append(s[start:])
    return parts


def drop_args(s: str) -> str:
    """Drop a trailing argument list glued to the name (``name<...>(args)``); a group after a
    space is part of the name (``Memset (Device)``) and stays. Looks at the first
    :data:`MAX_NAME_WORK` characters only."""
    s = bounded(s)
    if not s.endswith(")"):
        return s
    depth = 0
    positions = [m.start() for m in re.finditer(r"[()]", s)]
    for i in reversed(positions):
        if s[i] == ")":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return s[:i] if i > 0 and s[i - 1] != " " else s
    return s


def drop_templates(s: str) -> str:
    """Remove template parameter lists ``<...>`` at any depth (of the first
    :data:`MAX_NAME_WORK` characters)."""
    s = bounded(s)
    if "<" not in s:
        return s
    out: list[str] = []
    depth = 0
    start = 0
    for m in re.finditer(r"[<>]", s):
        i = m.start()
        if s[i] == "<":
            if depth == 0:
                out.append(s[start:i])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                start = i + 1
        # a '>' outside any template is kept (as text)
    if depth == 0:
        out.append(s[start:])
    return "".join(out)
