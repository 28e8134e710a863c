"""Invariants on every sample we have (../shared/samples and sample_traces): no SOL % above 100 is
ever shown, a kernel that would exceed its peak is marked with its reason as data, no roofline
point sits above its own roof, unknown stays unknown (NaN, never 0), and fusion candidates are
honest (no communication or fill in a chain, no fused time below one kernel, unknown sizes give no
saving)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kviewer.analysis.fusion import fusion_candidates
from kviewer.analysis.sol import SOL_REASONS, speed_of_light
from kviewer.errors import AnalysisError, KViewerError
from kviewer.io.registry import load


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".md", ".py", ".txt", ".json") or p.name.endswith((".json.gz", ".json.xz", "results.json")))


def _sol(path: Path) -> tuple[object, pd.DataFrame] | None:
    try:
        t = load(path)
    except KViewerError:
        return None  # not a trace (stats files, the malformed JSON): the loaders' tests cover them
    if not len(t.kernels):
        return None
    try:
        return t, speed_of_light(t)
    except AnalysisError:
        # the GPU is not recognised: pick one of its vendor's; physics must hold whatever the peaks
        vendor = " ".join(t.devices["name"].astype(str)).lower() if len(t.devices) else ""
        amd = "amd" in vendor or "radeon" in vendor or "instinct" in vendor or str(t.meta.source_format).startswith("rocprof")
        return t, speed_of_light(t, device="mi300x" if amd else "h100_sxm")


def _check_sol(name: str, sol: pd.DataFrame) -> None:
    pct = sol["sol_pct"].to_numpy(np.float64)
    assert not (pct > 100).any(), name
    status = sol["sol_status"].astype(str).to_numpy()
    bad = status == "exceeds_peak"
    assert np.isnan(pct[bad]).all() and np.isnan(sol["t_sol_ns"].to_numpy()[bad]).all(), name
    assert set(sol.loc[bad, "sol_reason"]) <= set(SOL_REASONS), name
    assert (sol.loc[~bad, "sol_reason"] == "").all(), name
    # unknown is NaN, never 0
    assert sol.loc[sol["flops_source"] == "unknown", "flops"].isna().all(), name
    assert sol.loc[sol["bytes_source"] == "unknown", "bytes"].isna().all(), name
    assert np.isnan(pct[status == "unknown"]).all(), name
    # every plotted (ok) point under min(its own peak, bandwidth x intensity)
    ok = sol[(status == "ok") & (sol["flops"] > 0) & (sol["bytes"] > 0)]
    achieved = ok["flops"] / (ok["dur"] * 1e-9)
    roof = np.fmin(ok["peak_flops"], ok["peak_bw"] * ok["flops"] / ok["bytes"])
    assert (achieved <= roof * (1 + 1e-9)).all(), name


def _check_fusion(name: str, t: object, sol: pd.DataFrame) -> None:
    c = fusion_candidates(t, sol=sol)  # type: ignore[arg-type]
    if not len(c):
        return
    kinds = sol.set_index("id")["kind"]
    for ids in c["kernel_ids"]:
        for inst in ids:
            member_kinds = set(kinds.loc[list(inst)])
            assert not member_kinds & {"communication", "fill", "sort", "other"}, (name, member_kinds)
    known = c["fused_est_ns"].notna()
    assert (c.loc[known, "fused_est_ns"] >= 0.02 * c.loc[known, "measured_ns"]).all(), name
    assert (c.loc[known, "fused_est_ns"] <= c.loc[known, "measured_ns"]).all(), name
    assert (c.loc[known, "fused_est_ns"] >= c.loc[known, "fused_sol_ns"]).all(), name
    assert c.loc[~known, "savings_ns"].isna().all() and (c.loc[~known, "confidence"] == "low").all(), name
    assert (c["bytes_saved"].dropna() >= 0).all(), name
    assert c["remedy"].astype(bool).all(), name


def _check_all(paths: list[Path]) -> int:
    """Check every file that has a speed of light; how many did."""
    checked = 0
    for path in paths:
        got = _sol(path)
        if got is None:
            continue
        t, sol = got
        _check_sol(path.name, sol)
        _check_fusion(path.name, t, sol)
        checked += 1
    return checked


@pytest.mark.samples
def test_physics_on_every_shared_sample(samples: Path) -> None:
    assert _check_all(list(_files(samples))) >= 20


def test_physics_on_every_bundled_sample(sample_traces: Path) -> None:
    assert _check_all(sorted(sample_traces.glob("*.gz"))) >= 9
