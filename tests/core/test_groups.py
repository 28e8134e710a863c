"""core.groups: rows numbered by their distinct value combinations, a missing value one value."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kviewer.core.groups import distinct_rows, missing_coded, text_in


def _naive(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The numbering spelled out: each row's tuple (every missing value the same), numbered in
    order of first appearance."""
    seen: dict[tuple[object, ...], int] = {}
    first: list[int] = []
    out = []
    for i in range(len(columns[0])):
        key = tuple("<missing>" if pd.isna(c[i]) else c[i] for c in columns)
        if key not in seen:
            seen[key] = len(seen)
            first.append(i)
        out.append(seen[key])
    return np.array(out), np.array(first)


def test_missing_values_are_one_value_coded_last() -> None:
    col = np.array(["b", None, "a", math.nan, "b", pd.NA], dtype=object)
    codes, values = missing_coded(col)
    assert values[:2] == ["b", "a"] and len(values) == 3 and math.isnan(values[2])
    assert codes.tolist() == [0, 2, 1, 2, 0, 2]
    codes, values = missing_coded(np.array([1.5, np.nan, 1.5]))
    assert codes.tolist() == [0, 1, 0] and values[0] == 1.5 and math.isnan(values[1])


def test_distinct_rows_matches_the_spelled_out_numbering() -> None:
    rng = np.random.default_rng(3)
    n = 2000
    words = np.array(["gemm", "norm", None, "", "x"], dtype=object)
    cols = (words[rng.integers(0, 5, n)], rng.integers(0, 3, n), np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 2, n).astype(float)),
            rng.random(n) < 0.5)
    got, first = distinct_rows(*cols)
    want, want_first = _naive(*cols)
    assert got.tolist() == want.tolist() and first.tolist() == want_first.tolist()
    one, one_first = distinct_rows(np.array(["a"] * 5, dtype=object))
    assert one.tolist() == [0] * 5 and one_first.tolist() == [0]


def test_text_in_tests_each_row_by_its_text_categorical_or_not() -> None:
    values = ["cudaDeviceSynchronize", None, "cudaLaunchKernel", math.nan, "cudaDeviceSynchronize", "7", 7, ""]
    wanted = {"cudaDeviceSynchronize", "7", ""}
    expect = [v is not None and not (isinstance(v, float) and math.isnan(v)) and str(v) in wanted for v in values]
    obj = pd.Series(np.array(values, dtype=object))
    cat = obj.astype("category")
    assert cat.cat.codes.min() == -1  # the missing values are code -1
    assert text_in(obj, wanted).tolist() == expect
    assert text_in(cat, wanted).tolist() == expect
    assert text_in(cat, ()).tolist() == [False] * len(values)
    assert text_in(pd.Series([], dtype="category"), wanted).tolist() == []
