"""Sampled GPU metrics (``Trace.gpu_samples``: Nsight Systems ``GPU_METRICS``) over ranges and steps.

What ``nvidia-smi -l 1`` shows once a second, Nsight Systems samples at 10-200 kHz: SMs active,
SM issue, tensor-pipe active, DRAM read/write bandwidth, PCIe/NVLink throughput, each per GPU.
Unlike the kernel-interval utilisation (busy or not), these say how busy: a GPU "busy" at 5 %
SM activity differs from one at 95 %.

Statistics over a window weigh every sample equally (nsys samples at a fixed rate, so that is
the time mean) and use the samples whose time lies in ``[t0, t1)``. ``dram_bw_gbps`` is the
DRAM read + write throughput: nsys reports each as a percentage of the GPU's peak, so the
bandwidth is that share of the peak of ``resources/devices.toml`` (unknown when the GPU is not
recognised; never guessed). Metric names are matched by their role (:data:`ROLES`) on the text
before the unit brackets, case-insensitively, so the spellings of several nsys versions agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kviewer.analysis.devices import recognise_trace
from kviewer.core import Trace

#: role -> patterns (regex on the lower-cased name without its [unit])
ROLES: dict[str, tuple[str, ...]] = {
    "gr_active": (r"^gr active",),
    "sm_active": (r"^sms? active",),
    "sm_issue": (r"^sm issue",),
    "tensor_active": (r"^tensor (pipe )?active",),
    "dram_read": (r"^dram read bandwidth",),
    "dram_write": (r"^dram write bandwidth",),
    "warps_in_flight": (r"^compute warps in flight",),
    "pcie_rx": (r"^pcie rx",),
    "pcie_tx": (r"^pcie tx",),
    "nvlink_rx": (r"^nvlink rx",),
    "nvlink_tx": (r"^nvlink tx",),
    "gpc_clock": (r"^gpc clock",),
}
#: the tracks shown open on the timeline, in this order (what Nsight Systems' GPU Metrics row
#: leads with); every other metric sits in a closed group below them
DEFAULT_ROLES = ("gr_active", "sm_active", "sm_issue", "tensor_active", "dram_read", "dram_write")

STAT_COLUMNS = ["device", "metric", "unit", "samples", "mean", "p50", "p95", "max"]
STEP_METRIC_COLUMNS = ["sm_active_pct", "tensor_active_pct", "dram_bw_gbps"]

_UNIT = re.compile(r"\s*\[([^\]]*)\]\s*$")


def split_name(name: str) -> tuple[str, str]:
    """('SMs Active', 'Throughput %') from 'SMs Active [Throughput %]'."""
    m = _UNIT.search(name)
    return (name[: m.start()].strip(), m.group(1).strip()) if m else (name.strip(), "")


def role_of(name: str) -> str | None:
    base = split_name(name)[0].lower()
    for role, patterns in ROLES.items():
        if any(re.search(p, base) for p in patterns):
            return role
    return None


def is_percent(name: str) -> bool:
    return "%" in split_name(name)[1]


@dataclass(frozen=True)
class Series:
    """One metric of one GPU: sorted sample times and values (views into ``gpu_samples``)."""

    device: int
    metric: str
    t: np.ndarray
    v: np.ndarray

    @property
    def role(self) -> str | None:
        return role_of(self.metric)


def series(trace: Trace) -> list[Series]:
    """Every (device, metric) of the trace's samples, in table order (device, then name).

    The table is sorted by (device, metric, t), so each series is a slice: no copy."""
    s = trace.gpu_samples
    if not len(s):
        return []
    dev = s["device"].to_numpy()
    codes = s["metric"].cat.codes.to_numpy()
    cats = s["metric"].cat.categories
    t = s["t"].to_numpy()
    v = s["value"].to_numpy()
    change = np.flatnonzero((dev[1:] != dev[:-1]) | (codes[1:] != codes[:-1])) + 1
    heads = np.r_[0, change]
    ends = np.r_[change, len(s)]
    return [Series(int(dev[a]), str(cats[codes[a]]), t[a:b], v[a:b]) for a, b in zip(heads.tolist(), ends.tolist())]


def _window(x: Series, t0: int, t1: int) -> np.ndarray:
    a = int(np.searchsorted(x.t, t0, side="left"))
    b = int(np.searchsorted(x.t, t1, side="left"))
    return x.v[a:b]


def window_stats(trace: Trace, t0: int, t1: int) -> pd.DataFrame:
    """Per (device, metric), the samples in ``[t0, t1)`` (trace time): count, mean, p50, p95, max
    (columns :data:`STAT_COLUMNS`); a metric without a sample there has NaN statistics."""
    rows = []
    for x in series(trace):
        w = _window(x, t0, t1)
        name, unit = split_name(x.metric)
        if len(w):
            p50, p95 = np.percentile(w, [50, 95])
            rows.append((x.device, x.metric, unit, len(w), float(w.mean()), float(p50), float(p95), float(w.max())))
        else:
            rows.append((x.device, x.metric, unit, 0, math.nan, math.nan, math.nan, math.nan))
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("metric", "unit") else np.float64) for c in STAT_COLUMNS})
    df = pd.DataFrame(rows, columns=STAT_COLUMNS)
    return df.astype({"device": np.int64, "samples": np.int64})


def dram_peak_gbps(trace: Trace) -> dict[int, float]:
    """Peak DRAM bandwidth (GB/s) of each recognised device of the trace (devices.toml)."""
    out: dict[int, float] = {}
    for dev, rec in recognise_trace(trace).items():
        if rec.spec is not None and rec.spec.dram_gbs > 0:
            out[dev] = float(rec.spec.dram_gbs)
    return out


def role_series(trace: Trace) -> list[tuple[Series, str]]:
    """The trace's series that have a role (:data:`ROLES`), with it: made once for many windows."""
    out = []
    for x in series(trace):
        role = x.role
        if role is not None:
            out.append((x, role))
    return out


def role_means(trace: Trace, t0: int, t1: int, peaks: dict[int, float] | None = None,
               roles: list[tuple[Series, str]] | None = None) -> dict[str, float]:
    """Over ``[t0, t1)``, averaged over the GPUs that sampled it: ``sm_active_pct``,
    ``tensor_active_pct`` and ``dram_bw_gbps`` (read + write % of peak x the peak); NaN when unknown.
    ``roles``: :func:`role_series` of the trace when the caller averages many windows."""
    peaks = dram_peak_gbps(trace) if peaks is None else peaks
    by_role: dict[str, list[float]] = {}
    dram: dict[int, float] = {}
    dram_parts: dict[int, int] = {}
    for x, role in (role_series(trace) if roles is None else roles):
        w = _window(x, t0, t1)
        if not len(w):
            continue
        mean = float(w.mean())
        if role in ("dram_read", "dram_write"):
            if is_percent(x.metric) and x.device in peaks:
                dram[x.device] = dram.get(x.device, 0.0) + mean / 100.0 * peaks[x.device]
                dram_parts[x.device] = dram_parts.get(x.device, 0) + 1
            continue
        by_role.setdefault(role, []).append(mean)

    def avg(role: str) -> float:
        vals = by_role.get(role)
        return float(np.mean(vals)) if vals else math.nan

    full = [v for d, v in dram.items() if dram_parts.get(d) == 2]  # read and write both known
    return {
        "sm_active_pct": avg("sm_active"),
        "tensor_active_pct": avg("tensor_active"),
        "dram_bw_gbps": float(np.mean(full)) if full else math.nan,
    }


def step_windows(steps: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The window of each step the metrics are averaged over: the GPU span of its kernels
    (``gpu_start``..``gpu_end``: when the GPU worked on it), else its marker range."""
    has_gpu = steps["gpu_start"].to_numpy() >= 0
    t0 = np.where(has_gpu, steps["gpu_start"].to_numpy(dtype=np.int64), steps["start"].to_numpy(dtype=np.int64))
    t1 = np.where(has_gpu, steps["gpu_end"].to_numpy(dtype=np.int64), steps["end"].to_numpy(dtype=np.int64))
    return t0, t1


def step_metrics(trace: Trace, steps: pd.DataFrame) -> pd.DataFrame:
    """Per step row: ``window_start``, ``window_end`` and :data:`STEP_METRIC_COLUMNS`."""
    t0, t1 = step_windows(steps)
    peaks = dram_peak_gbps(trace)
    roles = role_series(trace)
    rows = [role_means(trace, int(a), int(b), peaks, roles) for a, b in zip(t0.tolist(), t1.tolist())]
    out = pd.DataFrame(rows, columns=STEP_METRIC_COLUMNS) if rows else pd.DataFrame({c: pd.Series(dtype=np.float64) for c in STEP_METRIC_COLUMNS})
    out.insert(0, "window_end", t1)
    out.insert(0, "window_start", t0)
    return out


def steps_with_metrics(trace: Trace, steps: pd.DataFrame, per_step: pd.DataFrame, sol: pd.DataFrame | None = None,
                       mfu: pd.DataFrame | None = None) -> pd.DataFrame:
    """``per_step`` (one row per ``step``) with :data:`STEP_METRIC_COLUMNS` and the window they
    were averaged over joined on; over several ranks, the mean of the ranks' windows' values and
    the earliest start / latest end. With ``sol`` (the SOL table), also the step's
    :class:`TensorCheck`: ``modelled_tensor_pct`` and ``tensor_disagrees`` (empty when unknown).
    With ``mfu`` (the MFU analysis' job table: ``step``, ``mfu`` as a fraction), the same check of
    the step's MFU against the sampled Tensor Active: ``mfu_tensor_disagrees``."""
    m = step_metrics(trace, steps)
    m.insert(0, "step", steps["step"].to_numpy())
    flags = []
    extra = []
    if sol is not None:
        checks = tensor_checks(trace, steps, sol)
        m["modelled_tensor_pct"] = [c.modelled_pct for c in checks]
        m["tensor_disagrees"] = [np.nan if c.disagrees is None else float(c.disagrees) for c in checks]
        extra += ["modelled_tensor_pct", "tensor_disagrees"]
        flags.append("tensor_disagrees")
    if mfu is not None and len(mfu):
        by_step = dict(zip(mfu["step"].tolist(), mfu["mfu"].astype(np.float64).tolist()))
        pct = np.array([by_step.get(s, math.nan) * 100.0 for s in steps["step"].tolist()], dtype=np.float64)
        # a step without an MFU stays unknown (NaN: tensor_check then has no modelled figure, no verdict)
        mfu_checks = tensor_checks(trace, steps, None, pct)
        m["mfu_tensor_disagrees"] = [np.nan if c.disagrees is None else float(c.disagrees) for c in mfu_checks]
        extra.append("mfu_tensor_disagrees")
        flags.append("mfu_tensor_disagrees")
    g = m.groupby("step", sort=True)
    agg = pd.DataFrame({"window_start": g["window_start"].min(), "window_end": g["window_end"].max(),
                        **{c: g[c].mean() for c in STEP_METRIC_COLUMNS + extra}}).reset_index()
    for col in flags:
        # over ranks: disagrees when any rank's window does
        agg[col] = agg[col].map(lambda v: np.nan if v != v else bool(v > 0)).astype(object)
    return per_step.merge(agg, on="step", how="left")


# ---------------------------------------------------------------------------------------------
# SOL / MFU against the sampled tensor-pipe activity

#: relative disagreement above which the window says the two do not agree
DISAGREE = 0.25


@dataclass(frozen=True)
class TensorCheck:
    """A window's modelled tensor-pipe use against what the GPU sampled.

    ``modelled_pct``: the tensor-pipe FLOPs of the kernels in the window at the peak rate, over
    the window (``t_compute_ns`` of :mod:`kviewer.analysis.sol`, pro rata for a kernel across an
    edge), per GPU and averaged over the GPUs that sampled Tensor Active; or the MFU analysis'
    figure where the caller passes one (``source='mfu'``). ``sampled_pct``: the mean Tensor Active
    over the window. ``disagrees`` when they differ by more than :data:`DISAGREE` of the larger;
    None when either is unknown.
    """

    start: int
    end: int
    modelled_pct: float
    sampled_pct: float
    source: str
    """'sol' (this module's estimate) or what the caller passed (e.g. 'mfu')"""

    @property
    def disagrees(self) -> bool | None:
        a, b = self.modelled_pct, self.sampled_pct
        if not (math.isfinite(a) and math.isfinite(b)) or max(a, b) <= 0:
            return None
        return abs(a - b) / max(a, b) > DISAGREE

    def sentence(self) -> str:
        """What the window says (empty unless they disagree)."""
        if not self.disagrees:
            return ""
        what = "MFU" if self.source == "mfu" else "SOL tensor-pipe time"
        return (f"{what} {self.modelled_pct:.0f} % vs sampled Tensor Active {self.sampled_pct:.0f} %: they disagree by more "
                f"than {DISAGREE * 100:.0f} % (a FLOP model or a peak is off, or the kernels' tensor work is not what it seems)")


@dataclass(frozen=True)
class _TensorInputs:
    """What :func:`tensor_check` reads, made once for many windows: the Tensor Active series and
    the SOL table's kernels (start, end, device, on the tensor pipe, ``t_compute_ns``)."""

    active: list[Series]
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    tensor: np.ndarray
    t_compute: np.ndarray


def _tensor_inputs(trace: Trace, sol: pd.DataFrame | None) -> _TensorInputs:
    active = [x for x in series(trace) if x.role == "tensor_active"]
    if sol is None:  # an MFU check: the sampled series alone
        none = np.zeros(0, dtype=np.int64)
        return _TensorInputs(active, none, none, none, np.zeros(0, dtype=bool), np.zeros(0, dtype=np.float64))
    k = trace.kernels
    ids = sol["id"].to_numpy(dtype=np.int64)
    return _TensorInputs(
        active,
        k["start"].to_numpy(dtype=np.int64)[ids],
        k["end"].to_numpy(dtype=np.int64)[ids],
        k["device"].to_numpy()[ids],
        sol["pipe"].astype(str).to_numpy() == "tensor",
        sol["t_compute_ns"].to_numpy(dtype=np.float64),
    )


def tensor_check(trace: Trace, sol: pd.DataFrame | None, t0: int, t1: int, mfu_pct: float | None = None,
                 inputs: _TensorInputs | None = None) -> TensorCheck:
    """:class:`TensorCheck` of ``[t0, t1)`` (trace time); ``sol`` is the SOL table (kernel id order;
    None with ``mfu_pct``, which then stands for the modelled figure). ``inputs``: what
    :func:`tensor_checks` prepared once for all its windows."""
    got = inputs if inputs is not None else _tensor_inputs(trace, sol)
    sampled_by_dev: dict[int, float] = {}
    for x in got.active:
        w = _window(x, t0, t1)
        if len(w):
            sampled_by_dev[x.device] = float(w.mean())
    sampled = float(np.mean(list(sampled_by_dev.values()))) if sampled_by_dev else math.nan
    if mfu_pct is not None and math.isfinite(mfu_pct):
        return TensorCheck(t0, t1, float(mfu_pct), sampled, "mfu")
    span = float(t1 - t0)
    modelled = math.nan
    if sol is not None and len(sol) and span > 0 and sampled_by_dev:
        s, e, dev, tensor, tc = got.start, got.end, got.device, got.tensor, got.t_compute
        inside = tensor & (s < t1) & (e > t0)
        if inside.any() and np.isfinite(tc[inside]).all():
            overlap = (np.minimum(e, t1) - np.maximum(s, t0)).astype(np.float64)
            frac = np.where(e > s, overlap / np.maximum(e - s, 1), 1.0)
            per_dev = [float((tc * frac)[inside & (dev == d)].sum()) / span * 100.0 for d in sampled_by_dev]
            modelled = float(np.mean(per_dev))
        elif not inside.any():
            modelled = 0.0
    return TensorCheck(t0, t1, modelled, sampled, "sol")


def tensor_checks(trace: Trace, steps: pd.DataFrame, sol: pd.DataFrame | None, mfu_pct: np.ndarray | None = None) -> list[TensorCheck]:
    """One :class:`TensorCheck` per step, over its window (:func:`step_windows`). ``mfu_pct``:
    the MFU analysis' per-step figure (the hook for :mod:`kviewer.analysis.mfu`), used instead of
    the SOL estimate where given and finite."""
    t0, t1 = step_windows(steps)
    inputs = _tensor_inputs(trace, sol)
    return [
        tensor_check(trace, sol, int(a), int(b), None if mfu_pct is None else float(mfu_pct[i]), inputs)
        for i, (a, b) in enumerate(zip(t0.tolist(), t1.tolist()))
    ]
