"""Text from input files made safe for each place it is shown (no Qt, no I/O).

Kernel names, host names, command lines and every other string in a trace come from a file that
someone else may have written. Shown as they are, they can act on the destination:

* a terminal obeys ESC/OSC/CSI sequences (set the title, clear the screen, plant OSC 8 links);
* CR, LF and NUL break the rows of tables and reports;
* bidi overrides (U+202E ...) make a name read differently from what it is (HTML, Markdown, Qt);
* XML 1.0 cannot hold most C0 characters at all, so an SVG with one is not well-formed;
* a spreadsheet evaluates a CSV cell that begins with ``= + - @`` (and tab / CR) as a formula.

One rule serves every human-facing destination (:func:`display_text`): control characters
become ``\\xNN`` escapes and invisible format characters (bidi controls, zero-width characters,
line/paragraph separators, BOM, and the invisible look-alikes: tag characters, Hangul fillers,
soft hyphen, Mongolian vowel separator, variation selectors) become ``U+XXXX``, so what is shown
is visible and unambiguous: two names that differ only by an invisible character look different.
The destinations then apply their own syntax on top (``html.escape``, Markdown backslashes).
JSON output stays exact: JSON escapes control characters itself and is read by programs.
CSV stays exact except for the formula guard of :func:`csv_cell` (OWASP's recommendation: a
leading ``'``), which ``--raw-csv`` turns off.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "CSV_FORMULA_START",
    "csv_cell",
    "display_text",
    "xml_text",
]

# C0 controls (TAB, LF and CR included: they break table rows), DEL and the C1 controls
# (U+0080-U+009F: 8-bit CSI/OSC on terminals that honour them)
_CONTROL = "\x00-\x1f\x7f-\x9f"
# invisible format characters: ALM, zero-width space/non-joiner/joiner, LRM/RLM, the line and
# paragraph separators, LRE/RLE/PDF/LRO/RLO, word joiner and invisible operators, LRI/RLI/FSI/PDI
# and the deprecated format characters, BOM / ZWNBSP, interlinear annotation, and lone
# surrogates (undecodable bytes kept by surrogateescape); and the invisible look-alikes of a
# space or of nothing, which make two different names look identical: soft hyphen U+00AD,
# combining grapheme joiner U+034F, the Hangul fillers U+115F/U+1160/U+3164/U+FFA0, Khmer
# inherent vowels U+17B4/U+17B5, the Mongolian variation selectors and vowel separator
# U+180B-U+180F, variation selectors U+FE00-U+FE0F and U+E0100-U+E01EF, the musical format
# characters U+1D173-U+1D17A and the tag characters U+E0000-U+E007F (invisible ASCII)
_FORMAT = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\ud800-\udfff\U0001d173-\U0001d17a\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
_UNSAFE = re.compile(f"[{_CONTROL}{_FORMAT}]")

_CSV_UNSAFE = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_FORMAT}]")

#: first characters a spreadsheet reads as the start of a formula (OWASP CSV injection)
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _escape(m: re.Match[str]) -> str:
    ch = m.group(0)
    code = ord(ch)
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"U+{code:04X}"


def display_text(value: Any) -> str:
    """Text for a human: terminals, HTML, Markdown, SVG, the Qt table.

    Control characters become ``\\x1b``-style escapes and invisible format characters (bidi
    overrides and the like) ``U+202E``-style ones; everything else is kept as it is.
    """
    text = value if isinstance(value, str) else str(value)
    if not _UNSAFE.search(text):  # the common case costs one scan
        return text
    return _UNSAFE.sub(_escape, text)


# characters XML 1.0 does not allow at all (not even as character references)
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(text: str) -> str:
    """``text`` with every character XML 1.0 forbids escaped as by :func:`display_text`.

    For a document built by a library that does not check (Qt's SVG generator), so the document
    stays well-formed whatever reached it.
    """
    if not _XML_INVALID.search(text):
        return text
    return _XML_INVALID.sub(_escape, text)


def csv_cell(value: Any, raw: bool = False) -> Any:
    """A text cell for CSV: prefixed with ``'`` when a spreadsheet would take it for a formula.

    Control and bidi characters are made visible as by :func:`display_text` (ESC would act on a
    terminal the CSV is printed to, NUL cuts rows in many readers), except TAB, CR and LF, which
    CSV quoting carries and a spreadsheet shows. Non-text values (numbers, None) pass through, so
    negative numbers stay numbers. ``raw=True`` keeps every cell as it is (for programs).
    """
    if raw or not isinstance(value, str) or not value:
        return value
    guard = value.startswith(CSV_FORMULA_START)
    if _CSV_UNSAFE.search(value):
        value = _CSV_UNSAFE.sub(_escape, value)
    return "'" + value if guard else value


def map_text_columns(df: Any, fn: Any) -> Any:
    """A copy of DataFrame ``df`` with ``fn`` applied to every text cell (object and category
    columns; a category's categories are mapped once, not once per row). Other columns are kept."""
    import numpy as np
    import pandas as pd

    out = None
    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            cats = [fn(c) if isinstance(c, str) else c for c in col.cat.categories]
            if all(a is b for a, b in zip(cats, col.cat.categories)):
                continue
            codes = col.cat.codes.to_numpy()
            values = np.asarray(cats + [None], dtype=object)[np.where(codes < 0, len(cats), codes)]
        elif col.dtype == object or pd.api.types.is_string_dtype(col.dtype):
            try:
                # each distinct text once (a kernel name repeats thousands of times)
                codes, uniques = pd.factorize(col, use_na_sentinel=True)
            except TypeError:  # unhashable cells (lists): cell by cell
                before = col.tolist()
                mapped = [fn(v) if isinstance(v, str) else v for v in before]
                if all(a is b for a, b in zip(mapped, before)):
                    continue
                values = np.asarray(mapped, dtype=object)
            else:
                distinct = list(uniques)
                mapped = [fn(v) if isinstance(v, str) else v for v in distinct]
                if all(a is b for a, b in zip(mapped, distinct)):
                    continue
                values = col.to_numpy(dtype=object, copy=True)
                known = codes >= 0  # missing cells (None, NaN) keep what they hold
                values[known] = np.asarray(mapped, dtype=object)[codes[known]]
        else:
            continue
        if out is None:
            out = df.copy()
        out[name] = values
    return df if out is None else out
