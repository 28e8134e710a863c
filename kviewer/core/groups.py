"""Rows grouped by the distinct combinations of their values in several columns: work that
depends on text (a kernel name's precision, a note) is done once per combination and spread over
its rows (``results[group]``)."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
import pandas as pd


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct value combinations of ``columns`` (equally long; any
    values pandas can factorise, a missing value being one value of its own), numbered in order of
    first appearance, and the first row of each combination."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        codes, values = missing_coded(col)
        if len(values) > 1:
            # factorised again after each column: the key stays below the row count (no overflow
            # however many columns) and numbers the combinations in order of first appearance
            key = pd.factorize(key * len(values) + codes)[0].astype(np.int64)
    return key, np.unique(key, return_index=True)[1]


def missing_coded(column: Any) -> tuple[np.ndarray, list[Any]]:
    """(codes, distinct values) of a column, every missing value (None, NaN, NA) one value of its
    own, NaN, coded after the others. Factorised with pandas' sentinel for missing values and
    recoded: ``use_na_sentinel=False`` first scans an object column for missing values, a third
    of the time of a 600k-row text column. Raises TypeError for unhashable cells.

    Factorised by :func:`factorize`."""
    codes, uniques = factorize(column)
    codes = np.asarray(codes)
    values = list(uniques.tolist() if hasattr(uniques, "tolist") else uniques)
    if len(codes) and int(codes.min()) < 0:
        codes = np.where(codes < 0, len(values), codes)
        values.append(math.nan)
    return codes, values


def factorize(column: Any) -> tuple[np.ndarray, Any]:
    """``pd.factorize(column)`` (codes in order of first appearance, -1 for a missing value, and
    the distinct values); a long object array is factorised by object first, then its few
    distinct objects by value (:func:`_by_object`): the same result, without hashing every
    cell's text."""
    if isinstance(column, np.ndarray) and column.dtype == object and column.ndim == 1 and len(column) > 1024:
        return _by_object(column)
    return pd.factorize(column)


def _by_object(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values)`` of an object array, through the objects' addresses.

    kviewer's text columns hold one object per distinct text (``small[codes]``, a categorical's
    texts), and pandas hashes each cell's text again: 137 ms for a 611k-row column of 33 kernel
    names up to 1,410 characters, where factorising the cells' addresses (the array's own
    pointers, read as integers while the array is held) takes a few ms. The distinct objects
    are then factorised by value: equal texts in different objects get one code, and codes
    follow first appearance, as pandas numbers them (missing values: pandas' sentinel)."""
    a = np.ascontiguousarray(values)
    address = np.ctypeslib.as_array((ctypes.c_ssize_t * len(a)).from_address(a.ctypes.data)).copy()
    by_object = np.asarray(pd.factorize(address)[0])
    # pandas numbers in order of first appearance: code c first appears where the running
    # maximum of the codes reaches c
    first = np.flatnonzero(np.diff(np.maximum.accumulate(by_object), prepend=-1) > 0)
    if len(first) > len(a) // 4:  # mostly distinct objects: nothing to save by value
        return pd.factorize(a)
    objects = a[first]
    by_value, uniques = pd.factorize(objects)
    return np.asarray(by_value)[by_object], uniques


def text_in(column: pd.Series, texts: Any) -> np.ndarray:
    """Bool mask of the rows whose text (``str`` of the value) is one of ``texts``; a missing value
    is never in it. A categorical column is tested once per category, not once per row (the 375k
    host slices' names: 25 ms -> under 1 ms)."""
    wanted = set(texts)
    if isinstance(column.dtype, pd.CategoricalDtype):
        hit = np.fromiter((str(c) in wanted for c in column.cat.categories), dtype=bool, count=len(column.cat.categories))
        codes = np.asarray(column.cat.codes)
        return np.append(hit, False)[np.where(codes >= 0, codes, len(hit))]
    values = column.to_numpy(dtype=object)
    known = ~pd.isna(values)
    out = np.zeros(len(values), dtype=bool)
    out[known] = np.isin(values[known].astype(str), list(wanted))
    return out


def narrow_codes(codes: np.ndarray) -> np.ndarray:
    """Codes (-1 allowed) in the smallest signed integer type that holds them: a long column's
    codes in a fraction of int64's memory (the cache stores them so, the writers index with them)."""
    top = int(codes.max(initial=0))
    for t in (np.int8, np.int16, np.int32):
        if top <= np.iinfo(t).max:
            return codes.astype(t, copy=False)
    return codes.astype(np.int64, copy=False)
