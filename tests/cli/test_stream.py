"""Big tables written a piece at a time, each distinct value formatted once (kviewer/cli/stream.py),
are byte for byte what pandas' ``to_csv`` and the per-cell table writer made before."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import pytest

from kviewer.analysis.sol import speed_of_light
from kviewer.analysis.stats import REPORTS, run_report
from kviewer.cli import stream
from kviewer.cli.common import has_char, human_table, write_frame
from kviewer.core.text import csv_cell, display_text, map_text_columns
from kviewer.errors import ReportUnavailable
from kviewer.io import load
from kviewer.session.format import UNKNOWN


def per_cell_table(df: pd.DataFrame, float_digits: int = 1, max_name: int = 80, numeric: Sequence[bool] | None = None) -> str:
    """human_table as it was (kviewer 36d99ae): one Python step per cell."""
    cols = [display_text(c) for c in df.columns]
    cells: list[list[str]] = []
    if numeric is None:
        numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    for row in df.itertuples(index=False):
        line = []
        for value, is_num in zip(row, numeric):
            if is_num and isinstance(value, float):
                text = UNKNOWN if math.isnan(value) else f"{value:,.{float_digits}f}"
            elif is_num and not isinstance(value, str):
                text = f"{value:,}"
            else:
                text = display_text(value)
                if len(text) > max_name:
                    text = text[: max_name - 1] + "…"
            line.append(text)
        cells.append(line)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]

    def fmt(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    lines = [fmt(cols), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def pandas_csv(df: pd.DataFrame, raw_csv: bool = False) -> str:
    """write_frame's CSV as it was: the guard mapped over the frame, then to_csv."""
    if not raw_csv:
        df = map_text_columns(df, csv_cell)
    out = io.StringIO()
    df.to_csv(out, index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC if has_char(df, "\r") else csv.QUOTE_MINIMAL)
    return out.getvalue()


def both_ways(df: pd.DataFrame) -> None:
    for raw in (False, True):
        out = io.StringIO()
        write_frame(df, "csv", out, raw_csv=raw)
        assert out.getvalue() == pandas_csv(df, raw)
    out = io.StringIO()
    write_frame(df, "table", out)
    assert out.getvalue() == per_cell_table(df) + "\n"
    assert human_table(df, 3, 20) == per_cell_table(df, 3, 20)


def test_edge_cases_small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "CHUNK", 3)
    n = 10
    df = pd.DataFrame({
        "text": ["a", "b,c", 'say "hi"', "line\nbreak", "=1+1", "-x", "", "@home", "\ttab", "é\u202e"],
        "cat": pd.Categorical(["x", None, "y", "x", "=z", "x", "y", None, "x", "x"]),
        "obj_none": np.array(["a", None, "b", None, "c", "a", "b", "c", "a", None], dtype=object),
        "obj_mixed_na": np.array(["a", None, math.nan, "b", "a", "a", "a", "a", "a", "a"], dtype=object),
        "i64": np.arange(n, dtype=np.int64) * 123456789 - 5,
        "u8": np.arange(n, dtype=np.uint8),
        "f64": [0.1, math.nan, 1e20, -0.0, 1 / 3, 123456789.125, math.inf, 2.5, 1e-7, 7.0],
        "boolean": [True, False] * 5,
        "nullable": pd.array([1, None, 3, 4, None, 6, 7, 8, 9, 10], dtype="Int64"),
        "strdtype": pd.Series(["s", None, "t", "s", "s", "t", "u", "s", "s", "s"], dtype="str"),
    })  # fmt: skip
    both_ways(df)
    both_ways(df.iloc[:0])
    both_ways(df[["text"]])  # one column: to_csv's rules for a lone empty field
    both_ways(df.assign(text=["a\rb"] + ["c"] * (n - 1)))  # a CR: every text quoted, to_csv's way
    both_ways(df.assign(f32=np.arange(n, dtype=np.float32) / 3))  # not known here: to_csv


def _sol(path: Path) -> pd.DataFrame:
    return speed_of_light(load(path, use_cache=False)).rename(columns={"start": "start_ns", "dur": "dur_ns"})


@pytest.mark.parametrize("name", ("h200_llm_block_eager.pt.trace.json.gz", "gemm_grid_block2_nsys.sqlite.gz",
                                  "h200_llm_block_eager_full.raw.csv.gz"))
def test_real_tables(sample_traces: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "CHUNK", 50)
    trace = load(sample_traces / name, use_cache=False)
    both_ways(_sol(sample_traces / name))
    both_ways(trace.kernels)
    for report in REPORTS:
        try:
            both_ways(run_report(trace, report))
        except ReportUnavailable:
            pass
