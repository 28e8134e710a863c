"""What the Details panel lists of a row (no Qt).

A format fills only some of the unified schema's columns: an Nsight Systems kernel has no Nsight
Compute throughput, no modelled FLOPs, no op shapes. Listing them all showed two dozen "—" rows
for one nsys kernel. A column is left out when *this trace* never fills it (every row unknown: NaN,
the -1 of an unknown integer, no text, never true); a column that some rows fill and this row
does not is still shown as unknown ("—"), because there the format could have said and did not.
The decision is made on the data, never on column names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["never_filled"]


def never_filled(df: pd.DataFrame) -> frozenset[str]:
    """The columns of ``df`` whose every row is unknown (all of them when ``df`` is empty)."""
    out = []
    for col in df.columns:
        values = df[col]
        dtype = values.dtype
        kind = getattr(dtype, "kind", "O")
        if kind == "f":
            filled = bool(np.isfinite(values.to_numpy()).any())
        elif kind in "iu":
            filled = bool((values.to_numpy() != -1).any())
        elif kind == "b":
            filled = bool(values.to_numpy().any())
        elif str(dtype) == "category":
            cats = values.cat.categories
            used = np.unique(values.cat.codes.to_numpy())
            used = used[used >= 0]
            filled = any(str(cats[i]) != "" for i in used.tolist())
        else:
            filled = bool(values.map(lambda v: v is not None and str(v) not in ("", "nan", "None")).any())
        if not filled:
            out.append(str(col))
    return frozenset(out)
