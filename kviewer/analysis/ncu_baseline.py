"""Baseline comparison of two counter reports, as Nsight Compute's baseline feature does it.

Kernels are paired by launch order within each (normalised name, grid, block) group: the n-th
launch of a kernel in A with the n-th launch of the same kernel in B. Names go through
:func:`kviewer.analysis.matching.normalise_kernel_name`, so one kernel written by two demanglers (the
.ncu-rep's ``at::native::…<(int)4, …>`` and its CSV export's ``at::…<4, …>``) is one kernel.

For every pair, every metric of either report is put side by side: ``a``, ``b``, ``delta = b - a``
and ``delta_pct`` (of ``a``). Values in base units. ``ncu --csv`` prints rounded values
(``846.944 Gbyte/s``, ``5.17`` waves), so a difference within half a unit of the last digit a
file printed (:func:`printed_precision`, from ``metrics.text``), or below :data:`PRINT_PRECISION`
of the values, is rounding, not a change: such a delta is 0 (``rounded`` says so). Text metrics (names, enums) are
compared as text: ``same`` tells. A metric one report lacks has NaN on that side and an unknown
delta (NaN), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from kviewer.analysis.matching import normalise_kernel_name
from kviewer.analysis.merge import launch_order
from kviewer.core import Trace

#: relative difference below which two printed values are the same number
PRINT_PRECISION = 1e-5

BASELINE_COLUMNS = ["kernel_a", "kernel_b", "name", "metric", "unit", "a", "b", "delta", "delta_pct", "text_a", "text_b", "same", "rounded"]


@dataclass
class Baseline:
    pairs: pd.DataFrame
    """``kernel_a``, ``kernel_b``, ``name`` (A's short name), ``key`` (the normalised name)"""
    rows: pd.DataFrame
    """one row per (pair, metric): :data:`BASELINE_COLUMNS`"""
    unmatched_a: list[int]
    unmatched_b: list[int]
    total_a: int
    total_b: int

    @property
    def matched(self) -> int:
        return len(self.pairs)

    def summary(self) -> dict[str, int]:
        r = self.rows
        both = r["a"].notna() & r["b"].notna() | (r["text_a"] != "") & (r["text_b"] != "")
        return {
            "kernels_a": self.total_a,
            "kernels_b": self.total_b,
            "matched": self.matched,
            "metrics_compared": int(both.sum()),
            "metrics_differing": int((both & ~r["same"]).sum()),
            "metrics_only_one_side": int((~both).sum()),
        }


def _keys(trace: Trace) -> list[tuple]:
    k = trace.kernels
    names = k["name"].astype(str).to_numpy()
    norm = {n: normalise_kernel_name(n) for n in set(names.tolist())}
    dims = k[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].to_numpy(dtype=np.int64)
    return [(norm[n], *map(int, d)) for n, d in zip(names, dims)]


def pair_kernels(a: Trace, b: Trace) -> tuple[pd.DataFrame, list[int], list[int]]:
    """Pairs of kernel ids by launch order within each (normalised name, grid, block) group."""
    ka, kb = _keys(a), _keys(b)
    queue: dict[tuple, list[int]] = {}
    for i in launch_order(b.kernels):
        queue.setdefault(kb[int(i)], []).append(int(i))
    taken: dict[tuple, int] = {}
    rows_a: list[int] = []
    rows_b: list[int] = []
    for i in launch_order(a.kernels):
        key = ka[int(i)]
        j = taken.get(key, 0)
        cand = queue.get(key, [])
        if j < len(cand):
            rows_a.append(int(i))
            rows_b.append(cand[j])
            taken[key] = j + 1
    ids_a = a.kernels["id"].to_numpy()
    ids_b = b.kernels["id"].to_numpy()
    pairs = pd.DataFrame(
        {
            "kernel_a": ids_a[rows_a] if rows_a else np.zeros(0, np.int64),
            "kernel_b": ids_b[rows_b] if rows_b else np.zeros(0, np.int64),
            "name": a.kernels["short_name"].astype(str).to_numpy()[rows_a] if rows_a else np.zeros(0, dtype=object),
            "key": [ka[i][0] for i in rows_a],
        }
    )
    un_a = sorted(set(ids_a.tolist()) - set(pairs["kernel_a"].tolist()))
    un_b = sorted(set(ids_b.tolist()) - set(pairs["kernel_b"].tolist()))
    return pairs, un_a, un_b


def _wide(trace: Trace, kernels: list[int] | None = None) -> pd.DataFrame:
    """Metrics of the trace, first value per (kernel, metric); rules and NVTX rows left out."""
    m = trace.metrics
    if kernels is not None:
        m = m[np.isin(m["kernel"].to_numpy(), kernels)]
    sec = m["section"].astype(str)
    m = m[~(sec.str.startswith("rule:") | (sec == "nvtx")).to_numpy()]
    df = pd.DataFrame(
        {
            "kernel": m["kernel"].to_numpy(np.int64),
            "metric": m["metric"].astype(str).to_numpy(),
            "unit": m["unit"].astype(str).to_numpy(),
            "value": m["value"].to_numpy(np.float64),
            "text": m["text"].astype(str).to_numpy(),
        }
    )
    return df.drop_duplicates(["kernel", "metric"], keep="first")


def printed_precision(values: np.ndarray, texts: np.ndarray) -> np.ndarray:
    """Half a unit of the last digit each value was printed with, in base units (0 when the text
    is not a plain decimal number: the value is then as exact as it is)."""
    out = np.zeros(len(values))
    for i, (v, t) in enumerate(zip(values, texts)):
        t = t.strip().replace(",", "")
        if not t or np.isnan(v) or "e" in t.lower():
            continue
        try:
            p = float(t)
        except ValueError:
            continue
        if p == 0:
            continue
        decimals = len(t.split(".", 1)[1]) if "." in t else 0
        if decimals >= 12:
            continue  # a full-precision float (the .ncu-rep's own value)
        out[i] = 0.5 * 10.0 ** (-decimals) * abs(v / p)
    return out


def baseline(a: Trace, b: Trace, only: tuple[int, int] | None = None) -> Baseline:
    """Every metric of every matched kernel pair side by side (see the module docstring).

    ``only`` = (kernel of A, kernel of B): just that pair's rows (for a view of one kernel).
    """
    if only is None:
        pairs, un_a, un_b = pair_kernels(a, b)
    else:
        pairs = pd.DataFrame({"kernel_a": [only[0]], "kernel_b": [only[1]],
                              "name": [str(a.kernels["short_name"].iloc[only[0]])], "key": [""]})
        un_a, un_b = [], []
    wa, wb = _wide(a, pairs["kernel_a"].tolist() if only else None), _wide(b, pairs["kernel_b"].tolist() if only else None)
    pa = pairs[["kernel_a", "kernel_b", "name"]]
    left = pa.merge(wa.rename(columns={"kernel": "kernel_a"}), on="kernel_a", how="left")
    right = pa[["kernel_a", "kernel_b"]].merge(wb.rename(columns={"kernel": "kernel_b"}), on="kernel_b", how="left")
    rows = left.merge(right, on=["kernel_a", "kernel_b", "metric"], how="outer", suffixes=("_a", "_b"))
    rows = rows[rows["metric"].notna()]
    rows["name"] = rows["kernel_a"].map(dict(zip(pairs["kernel_a"], pairs["name"])))
    rows["unit"] = rows["unit_a"].fillna(rows["unit_b"]).fillna("")
    va = rows["value_a"].to_numpy(np.float64)
    vb = rows["value_b"].to_numpy(np.float64)
    ta = rows["text_a"].fillna("").astype(str).to_numpy()
    tb = rows["text_b"].fillna("").astype(str).to_numpy()
    delta = vb - va
    scale = np.fmax(np.abs(va), np.abs(vb))
    tol = np.fmax(printed_precision(va, ta), printed_precision(vb, tb))
    with np.errstate(invalid="ignore"):
        rounded = (np.abs(delta) <= np.fmax(PRINT_PRECISION * scale, tol)) & (delta != 0)
    delta = np.where(rounded, 0.0, delta)
    with np.errstate(invalid="ignore", divide="ignore"):
        pct = np.where(va != 0, delta / np.abs(va) * 100.0, np.where(delta == 0, 0.0, np.nan))
    numeric = ~np.isnan(va) & ~np.isnan(vb)
    same = np.where(numeric, delta == 0, (ta == tb) & (ta != ""))
    out = pd.DataFrame(
        {
            "kernel_a": rows["kernel_a"].to_numpy(np.int64),
            "kernel_b": rows["kernel_b"].to_numpy(np.int64),
            "name": rows["name"].astype(str).to_numpy(),
            "metric": rows["metric"].astype(str).to_numpy(),
            "unit": rows["unit"].astype(str).to_numpy(),
            "a": va,
            "b": vb,
            "delta": delta,
            "delta_pct": pct,
            "text_a": ta,
            "text_b": tb,
            "same": same.astype(bool),
            "rounded": rounded.astype(bool),
        },
        columns=BASELINE_COLUMNS,
    )
    out = out.sort_values(["kernel_a", "metric"], kind="stable").reset_index(drop=True)
    return Baseline(pairs, out, un_a, un_b, len(a.kernels), len(b.kernels))


__all__ = ["BASELINE_COLUMNS", "PRINT_PRECISION", "printed_precision", "Baseline", "baseline", "pair_kernels"]
