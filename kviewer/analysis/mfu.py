"""Model FLOPs Utilisation (MFU), hardware FLOPs utilisation (HFU) and the step's speed of light.

Per step (the steps ``kviewer summary --steps`` finds: :func:`kviewer.analysis.steps.find_steps`
on each rank's rows) and per rank::

    MFU      = model FLOPs of the step / (step time x dense peak FLOP/s of the dominant precision)
    HFU      = hardware FLOPs of the step / (the same)
    sol_step = sum of the step's kernels' T_SOL / step time

*Model FLOPs* are the ops' FLOPs as :mod:`kviewer.analysis.model` models them (the profiler's own
``FLOPs`` arg where it recorded one): every op once -- the shares of an op's kernels add up to
the op, its helper kernels carry none -- with attention causal-masked where the call says so and
its backward without the forward's recomputed scores (:func:`~kviewer.analysis.model.
attention_recompute_share`). Where nothing models an op but counters measured its kernel, the
counters stand in. *Hardware FLOPs* are what the GPU executed: measured counters where present
(Nsight Compute attached), else the model including the recomputation. Kernels whose FLOPs nobody
knows are not zero: their number and the kernel time they cover are reported beside the figures
(``unknown_kernels``, ``unknown_ns``), and MFU is then a lower bound. Collectives, copies, fills
and an op's helper kernels do no model FLOPs (known zero); a step whose only known FLOPs are such
zeros has unknown FLOPs. Physics holds: a utilisation above 100 % is a model or counter error, left
unknown with the reason in ``note``.

The *step time* is the step's range as ``summary --steps`` reports it (``dur``: the host range
``ProfilerStep#N`` / ``step_N`` covers), or the GPU span of the step's kernels when that is longer
(the GPU ran behind the host): ``time_basis`` says which. The step splits into the GPU time of
compute-bound kernels, of memory-bound ones (where no compute-bound kernel runs), of kernels
without a verdict, and idle time (launch gaps, host work): ``compute_ns + memory_ns +
unknown_bound_ns + idle_ns = step_ns`` on one GPU.

The *peak* is the dense (not sparse) rate of ``devices.toml`` for the (precision, pipe) pair that
holds most of the step's model FLOPs. Across ranks, a step of the job takes the slowest rank's
time and the job's MFU is ``sum of FLOPs / (step time x sum of the ranks' peaks)``.

:func:`mfu_for_step_time` turns a projected step time (what-if) into a projected MFU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from kviewer import analysis
from kviewer.analysis.devices import find_device
from kviewer.analysis.kinds import DATA_KINDS, classify
from kviewer.analysis.model import attention_recompute_share, model_kernels
from kviewer.analysis.ranks import RankSteps, rank_steps
from kviewer.analysis.steps import busy_ns, kernel_steps
from kviewer.core import Trace
from kviewer.core.schema import MFU, MFU_JOB, empty
from kviewer.errors import AnalysisError, UserError

if TYPE_CHECKING:
    from kviewer.analysis.sol import SolResult

# kinds, model, ranks, sol and steps are imported by the functions that compute an MFU: reading a
# stored result and putting it beside projected step times (``kviewer whatif`` on a file seen
# before, issue 24) needs none of them

#: the columns of the per-step table (declared in :data:`kviewer.core.schema.MFU`)
MFU_COLUMNS = MFU.names
#: the columns of the job table (:data:`kviewer.core.schema.MFU_JOB`)
MFU_JOB_COLUMNS = MFU_JOB.names
#: kinds that do no model arithmetic besides the data kinds (:data:`kviewer.analysis.kinds.DATA_KINDS`: data
#: movement): collectives
NO_FLOP_EXTRA_KINDS = frozenset({"communication"})


def mfu_for_step_time(model_flops: float, peak_flops: float, step_ns: float) -> float:
    """MFU of ``model_flops`` done in ``step_ns`` on a GPU (or GPUs) of ``peak_flops`` FLOP/s.

    NaN when any input is unknown or not positive. The what-if projections use it: a projected
    step time with the step's model FLOPs and peak (:attr:`MfuResult.steps`) gives the projected
    MFU.
    """
    if not (model_flops == model_flops and peak_flops == peak_flops and step_ns == step_ns):
        return math.nan
    if peak_flops <= 0 or step_ns <= 0 or model_flops < 0:
        return math.nan
    return float(model_flops) / (float(step_ns) * 1e-9 * float(peak_flops))


def _physical(util: float) -> float:
    """A utilisation, or NaN above 1 (more FLOP/s than the peak: a model or counter error)."""
    return math.nan if util > 1.0 else util


@dataclass(frozen=True)
class KernelFlops:
    """Per kernel (kernel id order): model and hardware FLOPs, NaN where unknown."""

    model: np.ndarray
    hardware: np.ndarray
    #: where the model FLOPs came from: modelled | measured | none (known zero) | unknown; the
    #: hardware FLOPs are the counters' where ``trace.kernels`` has them, else the model's
    source: np.ndarray


def kernel_flops(trace: Trace, sol: SolResult) -> KernelFlops:
    """Model and hardware FLOPs of every kernel (see the module doc)."""
    k = trace.kernels
    n = len(k)
    t = sol.table
    hw = t["flops"].to_numpy(np.float64).copy()
    src = t["flops_source"].astype(str).to_numpy()
    kind = t["kind"].astype(str).to_numpy()
    counted = [c for c in ("flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor") if c in k]
    if n and counted and k[counted].notna().to_numpy().any():
        # counters on some kernels: the op model of those kernels is needed beside them (the
        # one the SOL table was made from when the result kept it)
        m = sol.model if sol.model is not None else model_kernels(trace)
        helper = m["helper"].to_numpy(bool)
        mflops = m["model_flops"].to_numpy(np.float64)
        op_id = m["op_id"].to_numpy(np.int64)
    else:
        # no counters: the SOL table's FLOPs are the op model's, kernel for kernel (the model is
        # not run a second time; its op join, or the classification alone, gives the helpers)
        if sol.model is not None:
            helper = sol.model["helper"].to_numpy(bool)
            op_id = sol.model["op_id"].to_numpy(np.int64)
        else:
            cls = classify(trace)
            helper = cls["helper"].to_numpy(bool)
            op_id = cls["op_row"].to_numpy(np.int64)
        mflops = np.where(src == "modelled", hw, np.nan)
    # the share of an attention backward's FLOPs that recomputes the forward (once per op)
    recompute = np.zeros(n)
    c = trace.cpu_slices
    att = np.flatnonzero((kind == "attention") & (op_id >= 0))
    if len(att):
        names = c["name"].astype(str).to_numpy()
        dims = c["input_dims"].astype(str).to_numpy()
        types = c["input_types"].astype(str).to_numpy()
        cache: dict[int, float] = {}
        for i in att:
            o = int(op_id[i])
            if o not in cache:
                cache[o] = attention_recompute_share(names[o], dims[o], types[o])
            recompute[i] = cache[o]
    # model FLOPs: the op's model wherever it has one, also on a kernel with counters (counters
    # include recomputation, and may miss the tensor pipe); else the counters themselves
    model = mflops * (1.0 - recompute)
    source = np.where(np.isnan(model), "unknown", "modelled").astype(object)
    meas = src == "measured"
    use_meas = meas & np.isnan(model)
    model[use_meas] = hw[use_meas] * (1.0 - recompute[use_meas])
    source[use_meas] = "measured"
    # hardware FLOPs: the counters where they measured the kernel's FLOPs, else the model with
    # its recomputation
    hw = np.where(meas, hw, mflops)
    # known to do no model FLOPs: data movement, collectives, an op's helper kernels
    none = np.isnan(model) & (np.isin(kind, list(DATA_KINDS | NO_FLOP_EXTRA_KINDS)) | (helper & (op_id >= 0)))
    model[none] = 0.0
    source[none] = "none"
    hw = np.where(np.isnan(hw) & none, 0.0, hw)
    return KernelFlops(model, hw, source)


@dataclass(frozen=True)
class MfuResult:
    """MFU of a trace's steps.

    Attributes
    ----------
    steps
        One row per (rank, step): columns :data:`MFU_COLUMNS`.
    job
        One row per step over the ranks (columns :data:`MFU_JOB_COLUMNS`); the same figures as
        ``steps`` on a one-rank trace.
    totals
        Over all steps: ``model_flops``, ``hardware_flops``, ``step_ns`` (the job's summed step
        time), ``peak_flops`` (summed over the ranks), ``mfu``, ``hfu``, ``sol_step``,
        ``unknown_ns``, ``ranks``, ``steps``, ``precision``, ``peak_field``, ``gpu``.
    """

    steps: pd.DataFrame
    job: pd.DataFrame
    totals: dict[str, Any] = field(default_factory=dict)

    def step_mfu(self, step: int, rank: int | None = None) -> dict[str, Any] | None:
        """The row of one step (the job's row when ``rank`` is None) as a dict, None when absent."""
        df = self.job if rank is None else self.steps[self.steps["rank"] == rank]
        row = df[df["step"] == step]
        return None if not len(row) else {str(k): _py(v) for k, v in row.iloc[0].to_dict().items()}


    def as_json(self) -> dict[str, Any]:
        """Plain JSON-able data: the tables as lists of records and the totals, unknown as None."""
        def records(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [{str(k): _none(_py(v)) for k, v in r.items()} for r in df.to_dict(orient="records")]

        return {"steps": records(self.steps), "job": records(self.job), "totals": {k: _none(_py(v)) for k, v in self.totals.items()}}


def _none(v: Any) -> Any:
    return None if isinstance(v, float) and v != v else v


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    return v


def mfu(trace: Trace, sol: SolResult | None = None, device: str | None = None, per_rank: list[RankSteps] | None = None) -> MfuResult:
    """MFU, HFU, step SOL and the compute / memory / idle split of every step of every rank
    (``per_rank``: the trace's :func:`kviewer.analysis.ranks.rank_steps`, when the caller has them).

    Raises
    ------
    AnalysisError
        when the GPU cannot be recognised and no ``device`` is given (through
        :func:`kviewer.analysis.sol.sol_result`).
    """
    k = trace.kernels
    rank_col = k["rank"].to_numpy(np.int64)
    by_rank = rank_steps(trace) if per_rank is None else per_rank
    found: list[tuple[int, Any, np.ndarray]] = []
    for r in by_rank:
        rank, sub, st = r.rank, r.trace, r.steps
        sel = np.flatnonzero(rank_col == rank)
        if not len(sel) and len(by_rank) > 1:
            continue
        if not len(st):
            continue
        of = kernel_steps(sub, st)
        full = sel if len(sel) == len(sub.kernels) else np.arange(len(k))
        for i, srow in enumerate(st.itertuples(index=False)):
            found.append((rank, srow, full[of == i]))
    rows: list[dict[str, Any]] = []
    if found:  # the FLOPs and speed of light only for a trace with steps
        sol = sol if sol is not None else analysis.sol.sol_result(trace, device)
        kf = kernel_flops(trace, sol)
        cols = _SolColumns.of(sol.table)
        rows = [_step_row(rank, srow, idx, cols, kf, sol) for rank, srow, idx in found]
    steps = pd.DataFrame(rows, columns=MFU_COLUMNS) if rows else empty(MFU)
    for col in MFU.columns:
        if col.dtype == "float64" and col.name in steps:
            steps[col.name] = steps[col.name].astype(np.float64)
    job = job_table(steps)
    return MfuResult(steps, job, _totals(steps, job))


@dataclass(frozen=True)
class _SolColumns:
    """The SOL table's columns a step row reads, converted once for all the steps."""

    dur: np.ndarray
    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    prec_pipe: np.ndarray
    """code of each kernel's (precision, pipe) in ``pairs``"""
    pairs: list[tuple[str, str]]
    t_sol: np.ndarray
    bound: np.ndarray

    @staticmethod
    def of(t: pd.DataFrame) -> _SolColumns:
        start = t["start"].to_numpy(np.int64)
        prec = t["precision"].astype(str).to_numpy()
        pipe = t["pipe"].astype(str).to_numpy()
        pu, pc = np.unique(prec, return_inverse=True)
        qu, qc = np.unique(pipe, return_inverse=True)
        pairs = [(str(p), str(q)) for p in pu.tolist() for q in qu.tolist()]
        return _SolColumns(t["dur"].to_numpy(np.float64), start, start + t["dur"].to_numpy(np.int64),
                           t["device"].to_numpy(np.int64), (pc * len(qu) + qc).astype(np.int64), pairs,
                           t["t_sol_ns"].to_numpy(np.float64), t["bound"].astype(str).to_numpy())


def _step_row(rank: int, s: Any, idx: np.ndarray, t: _SolColumns, kf: KernelFlops, sol: SolResult) -> dict[str, Any]:
    dur = t.dur[idx]
    start = t.start[idx]
    end = t.end[idx]
    dev = t.device[idx]
    host = int(s.dur)
    span = int(s.gpu_span) if int(s.kernel_count) > 0 else 0
    step_ns, basis = (host, "host range") if host >= span else (span, "GPU span")
    model = kf.model[idx]
    hw = kf.hardware[idx]
    unknown = np.isnan(model)
    # the (precision, pipe) holding most of the model FLOPs sets the peak (a tie: the first seen)
    precision, pp, peak, field_, gpu = "", "", math.nan, "", ""
    pos = model > 0
    pairs, first, inv = np.unique(t.prec_pipe[idx][pos], return_index=True, return_inverse=True)
    weights = np.bincount(inv, weights=model[pos], minlength=len(pairs))
    spec = None
    if len(dev):
        devs, counts = np.unique(dev, return_counts=True)
        spec = sol.specs.get(int(devs[np.argmax(counts)]))
    spec = spec or sol.spec
    if len(pairs) and spec is not None:
        best = np.flatnonzero(weights == weights.max())
        precision, pp = t.pairs[int(pairs[best[np.argmin(first[best])]])]
        try:
            peak, field_ = spec.peak_flops(precision or "fp32", pp or "tensor")
        except ValueError:
            peak, field_ = math.nan, ""
    if spec is not None:
        gpu = spec.id
    # the known part of the step's FLOPs; nothing known but zeros (fills, copies) while other
    # kernels are unknown is no lower bound worth a number: unknown
    model_flops = float(np.nansum(model)) if (~unknown).any() else math.nan
    if unknown.any() and model_flops == 0:
        model_flops = math.nan
    hw_known = ~np.isnan(hw)
    hw_flops = float(np.nansum(hw)) if hw_known.any() else math.nan
    if (~hw_known).any() and hw_flops == 0:
        hw_flops = math.nan
    tsol = t.t_sol[idx]
    sol_known = ~np.isnan(tsol)
    sol_ns = float(tsol[sol_known].sum()) if sol_known.any() else math.nan
    bound = t.bound[idx]
    comp = bound == "compute"
    mem = bound == "memory"
    util = mfu_for_step_time(model_flops, peak, step_ns)
    hutil = mfu_for_step_time(hw_flops, peak, step_ns)
    note = ""
    if util > 1.0 or hutil > 1.0:
        # more FLOP/s than the peak is a model or counter error, never an achievement
        note = (f"{max(util, hutil) * 100:.0f}% of the peak is impossible: the FLOPs over-count "
                "(attention masking not recorded, a profiler FLOPs arg) or the peaks are not this GPU's (--device)")
        util = math.nan if util > 1.0 else util
        hutil = math.nan if hutil > 1.0 else hutil
    c_ns = busy_ns(start[comp], end[comp], dev[comp])
    cm_ns = busy_ns(start[comp | mem], end[comp | mem], dev[comp | mem])
    all_ns = busy_ns(start, end, dev)
    return {
        "rank": int(rank),
        "step": int(s.step),
        "name": str(s.name),
        "start": int(s.start),
        "end": int(s.end),
        "gpu_end": int(s.gpu_end) if int(s.kernel_count) > 0 else -1,
        "step_ns": int(step_ns),
        "time_basis": basis,
        "kernel_count": int(len(idx)),
        "model_flops": model_flops,
        "hardware_flops": hw_flops,
        "unknown_kernels": int(unknown.sum()),
        "unknown_ns": float(dur[unknown].sum()),
        "precision": precision,
        "pipe": pp,
        "peak_flops": peak,
        "peak_field": field_,
        "gpu": gpu,
        "mfu": util,
        "hfu": hutil,
        "sol_ns": sol_ns,
        "sol_step": sol_ns / step_ns if step_ns > 0 and sol_ns == sol_ns else math.nan,
        "sol_unknown_ns": float(dur[~sol_known].sum()),
        "compute_ns": float(c_ns),
        "memory_ns": float(cm_ns - c_ns),
        "unknown_bound_ns": float(all_ns - cm_ns),
        "idle_ns": float(max(step_ns - all_ns, 0)),
        "note": note,
    }


def job_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per step over the ranks (columns :data:`MFU_JOB_COLUMNS`): the slowest rank's time, summed
    FLOPs and peaks. ``steps`` needs the columns rank, step, step_ns, model_flops, hardware_flops,
    unknown_ns, peak_flops and sol_ns of :data:`MFU_COLUMNS` (``kviewer fleet`` gathers them from
    each rank's file). Grouped once, not step by step (120 steps: 72 ms -> a few ms)."""
    if not len(steps):
        return empty(MFU_JOB)
    s = steps.reset_index(drop=True)
    step_ns = s["step_ns"].to_numpy(np.int64)
    cols = {c: s[c].astype(np.float64) for c in ("model_flops", "hardware_flops", "unknown_ns", "peak_flops", "sol_ns")}
    frame = pd.DataFrame({"step": s["step"].to_numpy(), "step_ns": step_ns, **cols})
    g = frame.groupby("step", sort=True)
    longest = g["step_ns"].max()
    # the slowest rank: the first row of the step with its longest time
    slowest = s["rank"].to_numpy(np.int64)[g["step_ns"].idxmax().to_numpy()]
    peak = g["peak_flops"].sum()
    peak[frame["peak_flops"].isna().groupby(frame["step"], sort=True).any()] = math.nan  # any rank's peak unknown
    flops, hw, sol_ns = (g[c].sum(min_count=1) for c in ("model_flops", "hardware_flops", "sol_ns"))
    ranks = g.size()
    df = pd.DataFrame({
        "step": [int(str(v)) for v in longest.index],
        "ranks": ranks.to_numpy(np.int64),
        "step_ns": longest.to_numpy(np.int64),
        "slowest_rank": slowest,
        "model_flops": flops.to_numpy(np.float64),
        "hardware_flops": hw.to_numpy(np.float64),
        "unknown_ns": g["unknown_ns"].sum().to_numpy(np.float64),
        "peak_flops": peak.to_numpy(np.float64),
    })
    df["mfu"] = [_physical(mfu_for_step_time(f, p, t)) for f, p, t in zip(df["model_flops"], df["peak_flops"], df["step_ns"])]
    df["hfu"] = [_physical(mfu_for_step_time(f, p, t)) for f, p, t in zip(df["hardware_flops"], df["peak_flops"], df["step_ns"])]
    # each rank's SOL over its own GPU: the mean over ranks of sum T_SOL / the job's step
    n = df["ranks"].to_numpy(np.int64)
    t = df["step_ns"].to_numpy(np.float64)
    sol = sol_ns.to_numpy(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["sol_step"] = np.where((t > 0) & ~np.isnan(sol), sol / (t * n), math.nan)
    df = df[MFU_JOB_COLUMNS]
    for c in ("model_flops", "hardware_flops", "unknown_ns", "peak_flops", "mfu", "hfu", "sol_step"):
        df[c] = df[c].astype(np.float64)
    return df


#: the per-step MFU fields ``kviewer fleet`` keeps of each rank's file (enough for :func:`job_table`)
FLEET_FIELDS = ["step_ns", "model_flops", "hardware_flops", "unknown_ns", "peak_flops", "sol_ns"]


def rank_mfu(steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank over its steps: ``mfu``, ``hfu`` (summed FLOPs / (summed step time x the rank's
    peak)) and ``sol_step``. ``steps`` as for :func:`job_table`."""
    cols = ["rank", "mfu", "hfu", "sol_step"]
    if not len(steps):
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c == "rank" else np.float64) for c in cols})
    rows = []
    for rank, g in steps.groupby("rank", sort=True):
        t = float(g["step_ns"].astype(np.float64).sum())
        peaks = g["peak_flops"].astype(np.float64).dropna()  # a rank on an unknown GPU: unknown, no warning
        peak = float(peaks.median()) if len(peaks) else math.nan
        sol_ns = float(g["sol_ns"].astype(np.float64).sum(min_count=1))
        rows.append({"rank": int(str(rank)),
                     "mfu": _physical(mfu_for_step_time(float(g["model_flops"].astype(np.float64).sum(min_count=1)), peak, t)),
                     "hfu": _physical(mfu_for_step_time(float(g["hardware_flops"].astype(np.float64).sum(min_count=1)), peak, t)),
                     "sol_step": sol_ns / t if t > 0 and sol_ns == sol_ns else math.nan})
    return pd.DataFrame(rows, columns=cols)


def run_totals(steps: pd.DataFrame) -> dict[str, Any]:
    """Over all steps and ranks of a run: the job's MFU, HFU and step SOL (see :attr:`MfuResult.totals`)."""
    return _totals(steps, job_table(steps))


def _totals(steps: pd.DataFrame, job: pd.DataFrame) -> dict[str, Any]:
    if not len(job):
        return {}
    step_ns = float(job["step_ns"].sum())
    flops = float(job["model_flops"].sum(min_count=1))
    hw = float(job["hardware_flops"].sum(min_count=1))
    peaks = steps.groupby("rank")["peak_flops"].median()
    peak = float(peaks.sum(min_count=len(peaks)))
    sol_ns = float(steps["sol_ns"].sum(min_count=1))
    ranks = int(steps["rank"].nunique())
    have = [c for c in ("precision", "peak_field", "gpu") if c in steps]
    by_prec = steps.groupby(have)["model_flops"].sum() if len(have) == 3 else pd.Series(dtype=np.float64)
    key: Any = by_prec.idxmax() if len(by_prec) and by_prec.notna().any() else ("", "", "")
    precision, field_, gpu = (str(x) for x in key)
    return {
        "steps": int(len(job)),
        "ranks": ranks,
        "model_flops": flops,
        "hardware_flops": hw,
        "step_ns": step_ns,
        "peak_flops": peak,
        "precision": precision,
        "peak_field": field_,
        "gpu": gpu,
        "mfu": _physical(mfu_for_step_time(flops, peak, step_ns)),
        "hfu": _physical(mfu_for_step_time(hw, peak, step_ns)),
        "sol_step": sol_ns / (step_ns * ranks) if step_ns > 0 and sol_ns == sol_ns else math.nan,
        "unknown_ns": float(steps["unknown_ns"].sum()),
    }



def mfu_or_unknown(trace: Trace, device: str | None = None, sol: SolResult | None = None, per_rank: list[RankSteps] | None = None) -> MfuResult:
    """:func:`mfu`, or -- when the GPU cannot be recognised -- the steps' FLOPs with every peak and
    utilisation unknown (NaN) and ``totals["error"]`` saying why. ``summary --steps`` then still
    prints its step times. A ``device`` the caller named that the table does not know is the
    caller's error: it raises UserError (the command line's exit 2)."""
    if device:
        try:
            find_device(device)
        except AnalysisError as exc:
            raise UserError(str(exc)) from exc
    try:
        return mfu(trace, sol, device, per_rank)
    except AnalysisError as exc:
        return unknown_mfu(str(exc))


def unknown_mfu(why: str) -> MfuResult:
    """No MFU: the empty tables (:data:`kviewer.core.schema.MFU`, ``MFU_JOB``) and
    ``totals["error"]`` saying why."""
    return MfuResult(empty(MFU), empty(MFU_JOB), {"error": why})


#: the columns ``summary --steps`` adds to its per-step table
SUMMARY_COLUMNS = ["model_flops", "mfu", "hfu", "sol_step"]


def with_mfu_columns(spread: pd.DataFrame, result: MfuResult | pd.DataFrame) -> pd.DataFrame:
    """``spread`` (one row per step) with the job's :data:`SUMMARY_COLUMNS` beside it (NaN where
    unknown); ``result`` is an :class:`MfuResult` or its job table."""
    job = result.job if isinstance(result, MfuResult) else result
    cols = ["step", *SUMMARY_COLUMNS]
    if not len(job):
        out = spread.copy()
        for c in SUMMARY_COLUMNS:
            out[c] = np.nan
        return out
    right = job[cols].astype({c: np.float64 for c in SUMMARY_COLUMNS})
    return spread.merge(right, on="step", how="left")


def compare_mfu(a: MfuResult, b: MfuResult) -> pd.DataFrame:
    """MFU of two traces step by step (steps in order: the i-th step of A beside the i-th of B).

    Columns: position, step_a, step_b, step_ns_a, step_ns_b, mfu_a, mfu_b, delta_pts (MFU of B
    minus A, percentage points), hfu_a, hfu_b, sol_step_a, sol_step_b. Steps one trace lacks are
    rows with the other side unknown.
    """
    ja, jb = a.job.reset_index(drop=True), b.job.reset_index(drop=True)
    n = max(len(ja), len(jb))
    rows = []
    for i in range(n):
        ra = ja.iloc[i] if i < len(ja) else None
        rb = jb.iloc[i] if i < len(jb) else None

        def get(r: Any, c: str) -> float:
            return float(r[c]) if r is not None and r[c] is not None else math.nan

        ma, mb = get(ra, "mfu"), get(rb, "mfu")
        rows.append({
            "position": i,
            "step_a": int(ra["step"]) if ra is not None else -1,
            "step_b": int(rb["step"]) if rb is not None else -1,
            "step_ns_a": get(ra, "step_ns"), "step_ns_b": get(rb, "step_ns"),
            "mfu_a": ma, "mfu_b": mb, "delta_pts": (mb - ma) * 100.0,
            "hfu_a": get(ra, "hfu"), "hfu_b": get(rb, "hfu"),
            "sol_step_a": get(ra, "sol_step"), "sol_step_b": get(rb, "sol_step"),
        })
    cols = ["position", "step_a", "step_b", "step_ns_a", "step_ns_b", "mfu_a", "mfu_b", "delta_pts", "hfu_a", "hfu_b", "sol_step_a", "sol_step_b"]
    return pd.DataFrame(rows, columns=cols)


def compare_traces_mfu(a: Trace, b: Trace) -> pd.DataFrame:
    """:func:`compare_mfu` of two traces (each one's MFU unknown when its GPU is not recognised)."""
    return compare_mfu(mfu_or_unknown(a), mfu_or_unknown(b))


def steps_in_range(result: MfuResult, t0: int, t1: int, rank: int | None = None) -> dict[str, Any] | None:
    """MFU over the whole steps inside ``[t0, t1]`` (ns, trace time), over the ranks (or one
    ``rank``): summed FLOPs / (summed job step time x summed peaks). A step is whole inside when its
    marker range is and so is its GPU work (``gpu_end``: a GPU-bound step's kernels run past its
    marker). ``step_list`` names the steps, ``first_start`` / ``last_end`` bound them. None when no
    whole step lies inside."""
    st = result.steps
    if not len(st):
        return None
    end = np.maximum(st["end"].to_numpy(np.int64), st["gpu_end"].to_numpy(np.int64))
    inside = (st["start"].to_numpy(np.int64) >= t0) & (end <= t1)
    if rank is not None:
        inside &= st["rank"].to_numpy(np.int64) == rank
    sel = st[inside]
    if not len(sel):
        return None
    out = _totals(sel, job_table(sel))
    out["step_list"] = sorted(int(x) for x in sel["step"].unique())
    out["first_start"], out["last_end"] = int(sel["start"].min()), int(end[inside].max())
    return out


def step_of_marker(result: MfuResult, name: str, rank: int) -> dict[str, Any] | None:
    """The row of the step whose marker is named ``name`` on ``rank`` (a selected ``ProfilerStep#N``
    slice), None when it is no step marker. A rank without a row of its own (-1) takes the job's."""
    st = result.steps
    if not len(st):
        return None
    hit = st[(st["name"].astype(str) == name) & ((st["rank"] == rank) | (rank < 0))]
    if not len(hit):
        return None
    return {str(k): _py(v) for k, v in hit.iloc[0].to_dict().items()}


#: the columns of :func:`projected_mfu`
PROJECTED_COLUMNS = ["name", "step", "model_flops", "peak_flops", "step_ns", "mfu", "projected_ns", "projected_mfu", "delta_pts"]


def projected_mfu(result: MfuResult, projected: Any) -> pd.DataFrame:
    """MFU at projected step times (``kviewer whatif``): ``projected`` pairs a step marker's name
    with its projected time in ns (an iterable of (name, ns), a mapping, or a what-if
    ``Projection`` whose ``steps`` have ``name`` and ``projected_ns``). The step's model
    FLOPs and peak are the measured ones (a projection changes time, not work), so the projected
    MFU is :func:`mfu_for_step_time` at the projected time; ``delta_pts`` is the change in
    percentage points. Steps the MFU result does not know get unknown (NaN) values.

    A ``Projection`` also says each step's measured time by the what-if's own measure (from the
    previous step's completion), which can differ from the MFU's step time (the host range or
    the step's GPU span): the first step of a GPU-bound trace waits for work queued before the
    trace began. Its projected time is then the MFU's step time scaled by projected / measured,
    so that a projection that changes nothing leaves the MFU as it is."""
    scale: dict[str, float] = {}
    if hasattr(projected, "steps"):  # a what-if Projection: its steps' names and projected times
        scale = {str(st.name): st.projected_ns / st.measured_ns for st in projected.steps if st.measured_ns > 0}
        projected = [(st.name, st.projected_ns) for st in projected.steps]
    items = list(projected.items()) if hasattr(projected, "items") else list(projected)
    names = result.steps.drop_duplicates("step")[["step", "name"]] if len(result.steps) else pd.DataFrame({"step": [], "name": []})
    job = result.job.merge(names, on="step", how="left") if len(result.job) else pd.DataFrame(columns=[*MFU_JOB_COLUMNS, "name"])
    by_name = {str(r["name"]): r for r in job.to_dict(orient="records")}
    rows = []
    for name, ns in items:
        r = by_name.get(str(name))
        flops = float(r["model_flops"]) if r is not None else math.nan
        peak = float(r["peak_flops"]) if r is not None else math.nan
        now = float(r["mfu"]) if r is not None else math.nan
        at = float(r["step_ns"]) * scale[str(name)] if r is not None and str(name) in scale else float(ns)
        then = _physical(mfu_for_step_time(flops, peak, at))
        rows.append({"name": str(name), "step": int(r["step"]) if r is not None else -1, "model_flops": flops, "peak_flops": peak,
                     "step_ns": float(r["step_ns"]) if r is not None else math.nan, "mfu": now, "projected_ns": float(ns),
                     "projected_mfu": then, "delta_pts": (then - now) * 100.0})
    return pd.DataFrame(rows, columns=PROJECTED_COLUMNS)
