"""Each nsys stats report reads only what it needs of an Nsight Systems export (Report.reads: no
API calls for the kernel summary or the GPU trace), and its rows are those of the whole load."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from kviewer.analysis.stats import REPORTS, report_reads, run_report
from kviewer.errors import ReportUnavailable
from kviewer.io import load

EXPORTS = ("nsys/h200_llm_train_nvtx.sqlite", "nsys/perlmutter-cloverleaf-cuda.sqlite", "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite")


def _rows(trace: object, name: str) -> pd.DataFrame | str:
    try:
        return run_report(trace, name)  # type: ignore[arg-type]
    except ReportUnavailable as exc:
        return str(exc)


@pytest.mark.parametrize("export", EXPORTS)
def test_partial_reads_give_the_whole_loads_reports(samples: Path, export: str) -> None:
    path = samples / export
    whole = load(path, use_cache=False)
    for name, report in REPORTS.items():
        if report.reads is None:
            continue
        part = load(path, use_cache=False, tables=report_reads([name]))
        assert not len(part.cpu_slices)  # no API calls, NVTX or OS runtime calls read
        got, want = _rows(part, name), _rows(whole, name)
        if isinstance(want, str):
            assert got == want
        else:
            assert isinstance(got, pd.DataFrame)
            pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_reports_read_together() -> None:
    both = report_reads(["cuda_gpu_kern_sum", "cuda_gpu_trace"])
    assert both is not None and set(both) == {"kernels", "gpu_ops", "devices"}
    assert "start" in both["kernels"] and "dur" in both["kernels"]
    assert report_reads(["cuda_gpu_kern_sum", "cuda_api_sum"]) is None  # the API calls: everything
