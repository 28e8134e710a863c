"""The table's filter language, parsed (never evaluated as Python) into numpy masks (no Qt).

Examples::

    gemm                      name contains "gemm" (case-insensitive)
    "flash attn"              a quoted substring
    /^triton_.*fused/         a regular expression on the name (also: re:PATTERN)
    -elementwise              name does NOT contain "elementwise" (also: not elementwise)
    dur > 10us                numeric comparison; time units ns us µs ms s
    grid_x >= 128 and regs < 64
    name = ampere_sgemm      exact name; name ~ REGEX, name !~ REGEX
    dram_bytes > 1GB          sizes: B kB MB GB TB KiB MiB GiB; counts: k M G T; percent: 50%
    gemm or dur > 1ms         "or" / "||" binds looser than "and" / "&&" / "," / juxtaposition

A comparison against a column with no value (NaN, -1) is false.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kviewer.errors import KViewerError


class FilterError(KViewerError, ValueError):
    """The filter text is not valid; the message says where and why."""


@dataclass(frozen=True)
class FilterColumn:
    """A column the filter can refer to."""

    values: np.ndarray
    """numbers (float or int), or integer codes into ``categories`` for text"""
    kind: str
    """time | number | text"""
    categories: Sequence[str] | None = None
    missing_int: bool = False
    """True when -1 means unknown (integer schema columns)"""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<regex>/(?:[^/\\]|\\.)*/)
     |(?P<quoted>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
     |(?P<op>>=|<=|!=|==|!~|=~|=|>|<|~)
     |(?P<logic>&&|\|\||,)
     |(?P<word>[^\s<>=!~,"'&|]+)
    )""",
    re.VERBOSE,
)

_TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "sec": 1e9}
_SIZE_UNITS = {
    "b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
    "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3, "tib": 1024.0**4,
}
_COUNT_UNITS = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_NUMBER = re.compile(r"^([+-]?(?:\d+(?:[.,_]\d+)*\.?\d*|\.\d+)(?:e[+-]?\d+)?)\s*([a-zA-Zµμ%]*)$", re.IGNORECASE)

Mask = Callable[[Mapping[str, FilterColumn], int], np.ndarray]


@dataclass(frozen=True)
class Tok:
    kind: str
    text: str
    pos: int


def tokenize(text: str) -> list[Tok]:
    toks: list[Tok] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"cannot read the filter at column {pos + 1}: {text[pos:pos + 10]!r}")
        kind = m.lastgroup or "word"
        toks.append(Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    return toks


def parse_number(text: str, kind: str) -> float:
    """``10us`` -> 10000.0 for time columns, ``1.5GB`` -> 1.5e9, ``64k`` -> 64000, ``50%`` -> 50."""
    m = _NUMBER.match(text.strip())
    if not m:
        raise FilterError(f"{text!r} is not a number")
    number = float(m.group(1).replace(",", "").replace("_", ""))
    unit = m.group(2)
    if not unit or unit == "%":
        return number
    if kind == "time":
        scale = _TIME_UNITS.get(unit) or _TIME_UNITS.get(unit.lower())
        if scale is None:
            raise FilterError(f"unknown time unit {unit!r} (use ns, us, ms or s)")
        return number * scale
    low = unit.lower()
    if low in _SIZE_UNITS:
        return number * _SIZE_UNITS[low]
    if unit in ("K", "M", "G", "T") or low in _COUNT_UNITS:
        return number * _COUNT_UNITS[low]
    raise FilterError(f"unknown unit {unit!r} in {text!r}")


class Parser:
    """Recursive descent over the tokens; builds closures that compute masks."""

    def __init__(self, text: str, columns: Mapping[str, FilterColumn], aliases: Mapping[str, str], name_columns: Sequence[str]):
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.columns = columns
        self.aliases = aliases
        self.name_columns = [c for c in name_columns if c in columns]

    def peek(self) -> Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def parse(self) -> Mask | None:
        if not self.toks:
            return None
        expr = self.parse_or()
        if self.peek() is not None:
            tok = self.peek()
            assert tok is not None
            raise FilterError(f"unexpected {tok.text!r} at column {tok.pos + 1}")
        return expr

    def _is_logic(self, tok: Tok | None, *words: str) -> bool:
        if tok is None:
            return False
        if tok.kind == "logic":
            return tok.text in words
        return tok.kind == "word" and tok.text.lower() in words

    def parse_or(self) -> Mask:
        parts = [self.parse_and()]
        while self._is_logic(self.peek(), "or", "||"):
            self.take()
            parts.append(self.parse_and())
        if len(parts) == 1:
            return parts[0]

        def any_of(cols: Mapping[str, FilterColumn], n: int) -> np.ndarray:
            out = np.zeros(n, dtype=bool)
            for p in parts:
                out |= p(cols, n)
            return out

        return any_of

    def parse_and(self) -> Mask:
        parts = [self.parse_term()]
        while True:
            tok = self.peek()
            if tok is None or self._is_logic(tok, "or", "||"):
                break
            if self._is_logic(tok, "and", "&&", ","):
                self.take()
                if self.peek() is None:
                    raise FilterError(f"the filter ends after {tok.text!r}")
            parts.append(self.parse_term())
        if len(parts) == 1:
            return parts[0]

        def all_of(cols: Mapping[str, FilterColumn], n: int) -> np.ndarray:
            out = np.ones(n, dtype=bool)
            for p in parts:
                out &= p(cols, n)
            return out

        return all_of

    def parse_term(self) -> Mask:
        tok = self.peek()
        if tok is None:
            raise FilterError("the filter ends too early")
        if tok.kind == "word" and tok.text.lower() == "not":
            self.take()
            inner = self.parse_term()
            return lambda cols, n: ~inner(cols, n)
        if tok.kind == "op" or tok.kind == "logic":
            raise FilterError(f"unexpected {tok.text!r} at column {tok.pos + 1}")
        self.take()
        nxt = self.peek()
        if tok.kind == "word" and nxt is not None and nxt.kind == "op":
            self.take()
            value = self.peek()
            if value is None or value.kind not in ("word", "quoted", "regex"):
                raise FilterError(f"{tok.text} {nxt.text} needs a value")
            self.take()
            return self.comparison(tok.text, nxt.text, _unquote(value))
        if tok.kind == "regex":
            return self.name_regex(tok.text[1:-1])
        if tok.kind == "word" and tok.text.lower().startswith("re:") and len(tok.text) > 3:
            return self.name_regex(tok.text[3:])
        if tok.kind == "word" and tok.text.startswith("-") and len(tok.text) > 1 and not _NUMBER.match(tok.text):
            inner = self.substring(tok.text[1:])
            return lambda cols, n: ~inner(cols, n)
        return self.substring(_unquote(tok))

    # leaves ----------------------------------------------------------------------------------
    def _text_mask(self, test: Callable[[str], bool]) -> Mask:
        names = self.name_columns

        def mask(cols: Mapping[str, FilterColumn], n: int) -> np.ndarray:
            out = np.zeros(n, dtype=bool)
            for name in names:
                col = cols[name]
                cats = col.categories or []
                hits = np.array([test(str(c)) for c in cats] + [False], dtype=bool)
                out |= hits[col.values]  # code -1 picks the trailing False
            return out

        return mask

    def substring(self, needle: str) -> Mask:
        low = needle.lower()
        return self._text_mask(lambda s: low in s.lower())

    def name_regex(self, pattern: str) -> Mask:
        try:
            rx = re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise FilterError(f"bad regular expression {pattern!r}: {exc}") from exc
        return self._text_mask(lambda s: rx.search(s) is not None)

    def comparison(self, field: str, op: str, value: str) -> Mask:
        key = self.aliases.get(field.lower(), field.lower())
        if key not in self.columns:
            known = ", ".join(sorted(self.columns))
            raise FilterError(f"unknown column {field!r} (columns: {known})")
        col = self.columns[key]
        if col.kind == "text":
            return self._text_compare(key, op, value)
        if op in ("~", "!~", "=~"):
            raise FilterError(f"{op} compares text; {field} is a number")
        number = parse_number(value, col.kind)

        def mask(cols: Mapping[str, FilterColumn], n: int) -> np.ndarray:
            c = cols[key]
            v = c.values
            with np.errstate(invalid="ignore"):
                if op == ">":
                    out = v > number
                elif op == ">=":
                    out = v >= number
                elif op == "<":
                    out = v < number
                elif op == "<=":
                    out = v <= number
                elif op in ("=", "=="):
                    out = v == number
                else:
                    out = v != number
            if c.missing_int:
                out &= v != -1
            elif v.dtype.kind == "f":
                out &= ~np.isnan(v)
            return np.asarray(out, dtype=bool)

        return mask

    def _text_compare(self, key: str, op: str, value: str) -> Mask:
        if op in ("~", "=~", "!~"):
            try:
                rx = re.compile(value, re.IGNORECASE)
            except re.error as exc:
                raise FilterError(f"bad regular expression {value!r}: {exc}") from exc
            test: Callable[[str], bool] = lambda s: rx.search(s) is not None
        elif op in ("=", "==", "!="):
            low = value.lower()
            test = lambda s: s.lower() == low
        else:
            raise FilterError(f"{op} compares numbers; {key} is text (use =, != or ~)")
        negate = op in ("!=", "!~")

        def mask(cols: Mapping[str, FilterColumn], n: int) -> np.ndarray:
            col = cols[key]
            hits = np.array([test(str(c)) for c in (col.categories or [])] + [False], dtype=bool)
            out = hits[col.values]
            return ~out if negate else out

        return mask


def _unquote(tok: Tok) -> str:
    if tok.kind == "quoted":
        body = tok.text[1:-1]
        return re.sub(r"\\(.)", r"\1", body)
    if tok.kind == "regex":
        return tok.text[1:-1]
    return tok.text


def compile_filter(
    text: str,
    columns: Mapping[str, FilterColumn],
    aliases: Mapping[str, str] | None = None,
    name_columns: Sequence[str] = ("name", "short_name"),
) -> Mask | None:
    """Parse ``text`` against the available columns; None for an empty filter.

    Raises
    ------
    FilterError
        with a message meant for the user (unknown column, bad number or unit, bad regex).
    """
    return Parser(text, columns, aliases or {}, name_columns).parse()


def apply_filter(
    text: str,
    columns: Mapping[str, FilterColumn],
    n: int,
    aliases: Mapping[str, str] | None = None,
    name_columns: Sequence[str] = ("name", "short_name"),
) -> np.ndarray | None:
    """The rows (bool mask of length n) the filter keeps; None when the filter is empty."""
    fn = compile_filter(text, columns, aliases, name_columns)
    return None if fn is None else fn(columns, n)
