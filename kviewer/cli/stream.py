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
from typing import Any, Iterator, Sequence

import numpy as np
import pandas as pd

from kviewer.core.text import csv_cell, display_text
from kviewer.session.format import UNKNOWN

#: rows per piece written
CHUNK = 32768


def _distinct(col: pd.Series, exact_na: bool) -> tuple[np.ndarray, list[Any]] | None:
    """(codes, distinct values as Python objects) of a column, a missing value kept as a value
    (NaN); None when the column cannot be factorised (unhashable cells) or, with ``exact_na``,
    when it holds missing objects (None, pd.NA print unlike NaN)."""
    # an extension column (nullable integers, pandas' str) as its Python objects, NA included
    values = col.to_numpy() if isinstance(col.dtype, np.dtype) else col.to_numpy(dtype=object)
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        cats = list(col.cat.categories.to_numpy(dtype=object))
        if (codes < 0).any():
            return np.where(codes < 0, len(cats), codes), cats + [math.nan]
        return codes, cats
    if isinstance(values, np.ndarray) and values.dtype == object:
        try:
            nulls = pd.isna(values)
        except TypeError:
            return None
        if exact_na and nulls.any():  # factorize makes None, NaN and pd.NA one NaN
            return None
    try:
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
    except TypeError:  # unhashable cells (lists)
        return None
    return np.asarray(codes), list(uniques.tolist() if hasattr(uniques, "tolist") else uniques)


# ---------------------------------------------------------------------------------------------
# CSV


def _csv_quoted(text: str) -> str:
    """``text`` as one field of the csv module's QUOTE_MINIMAL dialect that to_csv uses."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerow([text, "x"])
    return buf.getvalue()[: -len(",x\n")]


def _csv_texts(col: pd.Series, raw: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, the field text of each distinct value) as to_csv writes the column, or None when
    this writer cannot say (then to_csv writes the frame)."""
    dtype = col.dtype
    text_like = isinstance(dtype, pd.CategoricalDtype) or dtype == object or pd.api.types.is_string_dtype(dtype)
    numeric = not text_like and (pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
                                 or (isinstance(dtype, np.dtype) and dtype == np.float64))
    if not text_like and not numeric:
        return None
    if numeric and isinstance(dtype, np.dtype) and dtype.kind == "b" and col.isna().any():
        return None
    got = _distinct(col, exact_na=False)  # every missing value is an empty field
    if got is None:
        return None
    codes, uniques = got
    out: list[str] = []
    for v in uniques:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            out.append("")
        elif text_like:
            if not isinstance(v, str) or "\r" in v:  # numbers in a text column, a CR: to_csv's own rules
                return None
            out.append(_csv_quoted(v if raw else csv_cell(v)))
        elif isinstance(v, float):
            out.append(str(np.float64(v).astype(str)))  # numpy's text for a float, as to_csv
        else:
            out.append(str(v))
    return codes, np.asarray(out, dtype=object)


def write_csv(df: pd.DataFrame, out: Any, raw_csv: bool = False) -> bool:
    """Write ``df`` as ``df.to_csv(out, index=False, lineterminator="\\n")`` would (text cells
    formula-guarded unless ``raw_csv``), in pieces. False, having written nothing, when the
    frame needs the general path."""
    if len(df.columns) < 2 or not all(isinstance(c, str) and "\r" not in c for c in df.columns):
        return False  # a lone empty field is quoted; odd headers: to_csv's rules
    cols = []
    for name in df.columns:
        got = _csv_texts(df[name], raw_csv)
        if got is None:
            return False
        cols.append(got)
    csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_MINIMAL).writerow(list(df.columns))
    for lo in range(0, len(df), CHUNK):
        parts = [texts[codes[lo : lo + CHUNK]].tolist() for codes, texts in cols]
        out.write("".join(",".join(row) + "\n" for row in zip(*parts)))
    return True


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
    padded = [(codes, np.asarray([t.rjust(w) if num else t.ljust(w) for t in texts] + [""], dtype=object))
              for (codes, texts), w, num in zip(cols, widths, numeric)]
    n = len(df)
    for lo in range(0, n, CHUNK):
        parts = [texts[codes[lo : lo + CHUNK]].tolist() for codes, texts in padded]
        yield "\n".join("  ".join(row).rstrip() for row in zip(*parts))
