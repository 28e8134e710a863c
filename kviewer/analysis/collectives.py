"""Which kernels are communication (NCCL / RCCL collectives and point-to-point transfers).

``kviewer fleet`` splits GPU time into communication and compute with this predicate; the rule
itself is the kernel taxonomy's (:func:`kviewer.analysis.kinds.kernel_kind`), evaluated once per
distinct name.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kviewer.analysis.kinds import kernel_kind


def _comm(names: pd.Series) -> np.ndarray:
    return np.array([kernel_kind(str(n)) == "communication" for n in names], dtype=bool)


def is_communication(names: pd.Series | np.ndarray) -> np.ndarray:
    """True for each kernel name that is a collective / transfer kernel of NCCL or RCCL."""
    s = pd.Series(names)
    if isinstance(s.dtype, pd.CategoricalDtype):
        hit = _comm(s.cat.categories.to_series())
        codes = s.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.clip(codes, 0, None)] if len(hit) else False, False)
    uniq, inverse = np.unique(s.astype(str).to_numpy(), return_inverse=True)
    return _comm(pd.Series(uniq))[inverse] if len(uniq) else np.zeros(0, dtype=bool)
