"""Rows grouped by the distinct combinations of their values in several columns: work that
depends on text (a kernel name's precision, a note) is done once per combination and spread over
its rows (``results[group]``)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def distinct_rows(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's number among the distinct value combinations of ``columns`` (equally long; any
    values pandas can factorise, a missing value being one value of its own), numbered in order of
    first appearance, and the first row of each combination."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for col in columns:
        codes, uniques = pd.factorize(col, use_na_sentinel=False)
        if len(uniques) > 1:
            # factorised again after each column: the key stays below the row count (no overflow
            # however many columns) and numbers the combinations in order of first appearance
            key = pd.factorize(key * len(uniques) + codes)[0].astype(np.int64)
    return key, np.unique(key, return_index=True)[1]
