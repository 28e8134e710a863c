"""Details lists what a trace can fill (issue 27): decided on the data, not on column names."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kviewer.core import make_table
from kviewer.session.details import never_filled


def test_columns_no_row_fills_are_found_by_their_values() -> None:
    k = make_table("kernels", 3, {"name": ["a", "b", "c"], "short_name": ["a", "b", "c"], "start": np.arange(3),
                                  "dur": np.ones(3), "device": np.zeros(3), "stream": np.full(3, 7),
                                  "sm_throughput_pct": [np.nan, 40.0, np.nan]})
    nf = never_filled(k)
    assert "sm_throughput_pct" not in nf  # one row has it: the others show "—" (could, did not)
    assert {"mem_throughput_pct", "registers", "flops_fp16"} <= nf  # NaN / -1 everywhere
    assert not {"name", "start", "dur", "device", "stream"} & nf


def test_an_nsys_kernel_lists_no_ncu_columns(samples: Path) -> None:
    from kviewer.io import load

    k = load(samples / "nsys/h200_llm_train_nvtx.sqlite").kernels
    nf = never_filled(k)
    assert {"sm_throughput_pct", "dram_bytes", "achieved_occupancy_pct", "flops_tensor"} <= nf
    assert not {"grid_x", "block_x", "registers", "shared_mem", "correlation"} & nf
    assert len(nf) >= 20
