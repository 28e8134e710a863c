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


def _factorized(col: np.ndarray) -> tuple[np.ndarray, list[object]]:
    """missing_coded spelled with pandas' factorize of the values themselves."""
    codes, uniques = pd.factorize(col)
    codes = np.asarray(codes)
    values = list(uniques.tolist())
    if len(codes) and int(codes.min()) < 0:
        codes = np.where(codes < 0, len(values), codes)
        values.append(math.nan)
    return codes, values


def test_object_columns_coded_by_object_then_value_as_by_value() -> None:
    """Long object columns are factorised through their objects' addresses first: the codes and
    distinct values are those of factorising the values (equal texts in distinct objects, 1 and
    True and 1.0, every kind of missing value, mostly-distinct columns, unhashable cells)."""
    import random

    rng = random.Random(5)
    pool: list[object] = ["a", "b", "fp32", "", "x" * 500, 1, 1.0, 2, True, None, math.nan, pd.NA, np.nan, ("t", 1), b"by", 3.5]
    for _ in range(200):
        n = rng.choice([1025, 3000])
        choices = rng.sample(pool, rng.randint(1, len(pool)))
        cells = []
        for _ in range(n):
            v = rng.choice(choices)
            if isinstance(v, str) and rng.random() < 0.3:
                v = (v + "!")[:-1]  # an equal text in another object
            cells.append(v)
        col = np.empty(n, dtype=object)
        col[:] = cells
        codes, values = missing_coded(col)
        want_codes, want_values = _factorized(col)
        assert np.array_equal(codes, want_codes)
        assert len(values) == len(want_values)
        for got, want in zip(values, want_values):
            assert got is want or (got == want and type(got) is type(want)) or (pd.isna(got) and pd.isna(want))
    distinct = np.array([f"n{i}" for i in range(5000)], dtype=object)  # every object its own text
    assert np.array_equal(missing_coded(distinct)[0], np.arange(5000))
    lists = np.empty(2000, dtype=object)
    lists[:] = [[1]] * 2000
    try:
        missing_coded(lists)
    except TypeError:
        pass
    else:
        raise AssertionError("unhashable cells must raise TypeError")
