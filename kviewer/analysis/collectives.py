"""Which kernels are communication (NCCL / RCCL collectives and point-to-point transfers).

One predicate in one place: ``kviewer fleet`` splits GPU time into communication and compute
with it. The kernel taxonomy (``analysis/kinds.py``) reached main after this branch began; when
the two meet, this body becomes ``kinds.kernel_kind(name) == "communication"`` per distinct name
(its rule also knows MSCCL and the collective words) and callers stay as they are.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

#: NCCL kernels are ``ncclKernel_…`` / ``ncclDevKernel_…``; RCCL keeps the NCCL names, and some
#: builds name them ``rccl…``
_COMM = re.compile(r"nccl|rccl", re.IGNORECASE)


def is_communication(names: pd.Series | np.ndarray) -> np.ndarray:
    """True for each kernel name that is a collective / transfer kernel of NCCL or RCCL."""
    s = pd.Series(names)
    if isinstance(s.dtype, pd.CategoricalDtype):
        cats = s.cat.categories.to_series().astype(str)
        hit = cats.str.contains(_COMM, regex=True).to_numpy()
        codes = s.cat.codes.to_numpy()
        return np.where(codes >= 0, hit[np.clip(codes, 0, None)] if len(hit) else False, False)
    return s.astype(str).str.contains(_COMM, regex=True).to_numpy(dtype=bool)
