"""Big tables written in pieces, each distinct value formatted once: the CSV and the aligned text
table of :func:`kviewer.cli.common.write_frame`.

A SOL table of 600k kernels has ~20 M cells but few distinct ones per column (a kernel name, a
precision, a note repeat thousands of times; an unknown number is one NaN). Each column is
factorised once, its distinct values formatted (guarded, quoted, aligned) once, and the rows are
joined and written a chunk at a time, so neither a Python call per cell nor the whole text is
needed. The text is byte for byte what ``DataFrame.to_csv(index=False, lineterminator="\\n")`` and
the per-cell table writer made (tests/cli/test_stream.py compares them); a frame this module
does not know how to format exactly (an unusual dtype, a text with a carriage return, which the
CSV then quotes differently) returns None or False and the caller takes the general path.
"""

from __future__ import annotations

import csv
import io
import math
import sys
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeAlias

import numpy as np
import pandas as pd

from kviewer.core.groups import missing_coded, narrow_codes
from kviewer.core.text import csv_cell, display_text
from kviewer.session.format import UNKNOWN

#: rows per piece written
CHUNK = 32768


def _distinct(col: pd.Series, exact_na: bool) -> tuple[np.ndarray, list[Any]] | None:
    """(codes, distinct values as Python objects) of a column, a missing value kept as a value
    (NaN); None when the column cannot be factorised (unhashable cells) or, with ``exact_na``,
    when it holds missing objects (None, pd.NA print unlike NaN)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        cats = list(col.cat.categories.to_numpy(dtype=object))
        if (codes < 0).any():
            return np.where(codes < 0, len(cats), codes), cats + [math.nan]
        return codes, cats
    # an extension column (nullable integers, pandas' str) as its Python objects, NA included
    values = col.to_numpy() if isinstance(col.dtype, np.dtype) else col.to_numpy(dtype=object)
    if exact_na and values.dtype == object:
        try:
            nulls = pd.isna(values)
        except TypeError:
            return None
        if nulls.any():  # factorize makes None, NaN and pd.NA one NaN
            return None
    try:
        codes, distinct = missing_coded(values)
    except TypeError:  # unhashable cells (lists)
        return None
    return narrow_codes(codes), distinct


# ---------------------------------------------------------------------------------------------
# CSV


def nul_stand_in(taken: Callable[[str], bool]) -> str:
    """A private-use character for which ``taken`` is False. Python 3.10's csv writer refuses NUL
    (3.11+ writes it as any other character): a NUL is written as this, then put back."""
    return next(c for c in map(chr, range(0xE000, 0xF900)) if not taken(c))


def _csv_quoted(text: str) -> str:
    """``text`` as one field of the csv module's QUOTE_MINIMAL dialect that to_csv uses."""
    sub = ""
    if sys.version_info < (3, 11) and "\0" in text:
        sub = nul_stand_in(lambda c: c in text)
        text = text.replace("\0", sub)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerow([text, "x"])
    field = buf.getvalue()[: -len(",x\n")]
    return field.replace(sub, "\0") if sub else field


def _csv_fields(col: pd.Series, raw: bool) -> _Column | None:
    """The column's fields as to_csv writes them, or None when this writer cannot say (then
    to_csv writes the frame)."""
    dtype = col.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":  # as Python ints print
        return _int_fields(col.to_numpy(), None)
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return col.to_numpy().astype(np.int8), np.array(["False", "True"], dtype=object)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and pd.api.types.is_integer_dtype(dtype):
        # nullable integers (a report's unknown ids, sizes): the missing ones empty
        missing = col.isna().to_numpy()
        return _int_fields(col.to_numpy(dtype=np.int64, na_value=0), missing if missing.any() else None)
    text_like = isinstance(dtype, pd.CategoricalDtype) or dtype == object or pd.api.types.is_string_dtype(dtype)
    floats = isinstance(dtype, np.dtype) and dtype == np.float64
    if not (text_like or floats or pd.api.types.is_integer_dtype(dtype)):
        return None
    got = _distinct(col, exact_na=False)  # every missing value is an empty field
    if got is None:
        return None
    codes, uniques = got
    if floats:  # numpy's text for each distinct float (to_csv's), unknown empty
        u = np.asarray(uniques, dtype=np.float64)
        texts = np.where(np.isnan(u), "", u.astype(str)).astype(object)
    else:
        out: list[str] = []
        for v in uniques:
            if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
                out.append("")
            elif not text_like:  # nullable integers
                out.append(str(v))
            elif not isinstance(v, str) or "\r" in v:  # numbers in a text column, a CR: to_csv's own rules
                return None
            else:
                out.append(_csv_quoted(v if raw else csv_cell(v)))
        texts = np.asarray(out, dtype=object)
    return codes, texts


def _int_fields(ints: np.ndarray, missing: np.ndarray | None) -> _Column:
    """An integer column's fields (``missing``: empty): few distinct values (a grid, a stream)
    coded, each printed once; many (times, ids) printed a chunk at a time by Python's ``str``,
    faster than numpy's fixed-width text."""
    if len(ints) and len(np.unique(ints[:: max(1, len(ints) // 256)])) < 64:
        codes, values = pd.factorize(ints)
        texts = [str(v) for v in np.asarray(values).tolist()]
        if missing is not None:  # the missing ones: one more, empty, value
            codes = np.where(missing, len(texts), codes)
            texts.append("")
        return narrow_codes(np.asarray(codes)), np.asarray(texts, dtype=object)
    if missing is None:
        return lambda lo, hi: list(map(str, ints[lo:hi].tolist()))

    def fields(lo: int, hi: int) -> list[str]:
        out = list(map(str, ints[lo:hi].tolist()))
        for i in np.flatnonzero(missing[lo:hi]).tolist():
            out[i] = ""
        return out

    return fields


def write_csv(df: pd.DataFrame, out: Any, raw_csv: bool = False) -> bool:
    """Write ``df`` as ``df.to_csv(out, index=False, lineterminator="\\n")`` would (text cells
    formula-guarded unless ``raw_csv``), in pieces. False, having written nothing, when the
    frame needs the general path."""
    if len(df.columns) < 2 or not all(isinstance(c, str) and "\r" not in c for c in df.columns):
        return False  # a lone empty field is quoted; odd headers: to_csv's rules
    fields = (_csv_fields(df[name], raw_csv) for name in df.columns)
    cols = _fuse(fields, ",", len(df))  # one column at a time: only the fused codes stay
    if cols is None:
        return False
    csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerow(list(df.columns))
    for block in _rows(cols, ",", len(df)):
        out.write(block + "\n")
    return True


#: a column's cells: (codes, the text of each code), or rows lo:hi -> their texts
_Column: TypeAlias = "tuple[np.ndarray, np.ndarray] | Callable[[int, int], list[str]]"


def _fuse(cols: Iterable[Any], sep: str, n: int) -> list[Any] | None:
    """Neighbouring coded columns joined into one while their distinct combinations stay few
    (the many constant or few-valued columns of a SOL table become one text per row): the
    rows are then joined from a few parts instead of one per column. None when a column is."""
    limit = max(64, n // 8)
    out: list[Any] = []
    for col in cols:
        if col is None:
            return None
        prev = out[-1] if out else None
        if isinstance(col, tuple) and isinstance(prev, tuple):
            (ca, ta), (cb, tb) = prev, col
            key, combos = pd.factorize(ca.astype(np.int64) * len(tb) + cb)
            if len(combos) <= limit:
                a, b = np.divmod(np.asarray(combos, dtype=np.int64), len(tb))
                out[-1] = (narrow_codes(np.asarray(key)), np.array([x + sep + y for x, y in zip(ta[a].tolist(), tb[b].tolist())], dtype=object))
                continue
        out.append(col)
    return out


def _rows(cols: list[Any], sep: str, n: int, finish: Callable[[str], str] | None = None) -> Iterator[str]:
    """The ``n`` rows joined from their columns' texts, a chunk of lines at a time (no last newline)."""
    for lo in range(0, n, CHUNK):
        parts = [c[1][c[0][lo : lo + CHUNK]].tolist() if isinstance(c, tuple) else c(lo, lo + CHUNK) for c in cols]
        if finish is None:
            yield "\n".join(sep.join(row) for row in zip(*parts))
        else:
            yield "\n".join(finish(sep.join(row)) for row in zip(*parts))


# ---------------------------------------------------------------------------------------------
# the aligned text table


def _table_cell(value: Any, is_num: bool, float_digits: int, max_name: int) -> str:
    """One cell as :func:`kviewer.cli.common.human_table` prints it."""
    if is_num and isinstance(value, float):
        return UNKNOWN if math.isnan(value) else f"{value:,.{float_digits}f}"  # unknown, never 0
    if is_num and not isinstance(value, str):
        return f"{value:,}"
    text = display_text(value)
    return text[: max_name - 1] + "…" if len(text) > max_name else text


def _table_columns(df: pd.DataFrame, float_digits: int, max_name: int, numeric: Sequence[bool]) -> list[tuple[np.ndarray, list[str]]]:
    cols = []
    for name, is_num in zip(df.columns, numeric):
        col = df[name]
        got = _distinct(col, exact_na=True)
        if got is None:  # cell by cell, as the rows give them
            values = list(col)
            cols.append((np.arange(len(values)), [_table_cell(v, is_num, float_digits, max_name) for v in values]))
            continue
        codes, uniques = got
        cols.append((codes, [_table_cell(v, is_num, float_digits, max_name) for v in uniques]))
    return cols


def table_lines(df: pd.DataFrame, float_digits: int = 1, max_name: int = 80, numeric: Sequence[bool] | None = None) -> Iterator[str]:
    """The lines of :func:`kviewer.cli.common.human_table`, a chunk at a time (each a block of
    lines joined by newlines, without the last newline)."""
    if numeric is None:
        numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    heads = [display_text(c) for c in df.columns]
    cols = _table_columns(df, float_digits, max_name, numeric)
    widths = [max([len(h)] + [len(t) for t in texts]) for h, (_, texts) in zip(heads, cols)]

    def fmt(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    yield fmt(heads) + "\n" + fmt(["-" * w for w in widths])

    def padded() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for w, num in zip(widths, numeric):
            codes, texts = cols.pop(0)  # let each column's codes go once fused
            yield codes, np.asarray([t.rjust(w) if num else t.ljust(w) for t in texts] + [""], dtype=object)

    fused = _fuse(padded(), "  ", len(df))
    assert fused is not None
    yield from _rows(fused, "  ", len(df), str.rstrip)
