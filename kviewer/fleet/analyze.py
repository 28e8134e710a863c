"""Combine per-file summaries into the fleet's tables (on the client; no trace is ever here).

Per run (the files of one folder are one run's ranks):

- ``ranks``: one row per rank: its GPU time split (kernel, busy, communication, compute, their
  overlap, exposed communication, idle, span), its step statistics as
  :func:`kviewer.analysis.ranks.rank_step_stats` computes them, and the reason that sets it apart
  (the kernel group, communication group or idle time by which it exceeds the median rank most);
- ``steps``: per step min / median / max / spread and the slowest rank
  (:func:`kviewer.analysis.ranks.step_spread`, the same as ``kviewer summary FOLDER --steps``);
- ``groups``: per kernel group (short name) its total over the ranks and its spread across them
  (:func:`kviewer.analysis.ranks.across_ranks`); ``rank_groups`` the per-rank totals behind it;
- ``stragglers``: the ranks slowest first, each with its reason and whether it is slower than
  the median rank beyond the run's own noise (:func:`beyond_noise`); the run names a straggler
  only then.

Across runs: ``series`` holds each kernel group's time per rank in every run, compared to the
baseline run with the noise rule of ``kviewer compare``
(:class:`kviewer.analysis.compare.NoiseModel`); ``runs`` one row per run with its kernel time per
rank and how much slower than the baseline it is.
"""

from __future__ import annotations

from typing import Any

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kviewer.analysis.compare import CHANGED, ONLY_A, ONLY_B, UNCHANGED, NoiseModel
from kviewer.analysis.mfu import SUMMARY_COLUMNS as MFU_SUMMARY, job_table, rank_mfu, run_totals, with_mfu_columns
from kviewer.analysis.ranks import SPREAD_COLUMNS, STRAGGLER_COLUMNS, across_ranks, rank_step_stats, step_spread
from kviewer.fleet.record import STEP_FIELDS, TIME_FIELDS, FileSummary
from kviewer.io.ranks import decide_ranks

FILE_COLUMNS = ["run", "rank", "path", "format", "status", "error_kind", "error", "kernels", "seconds"]
#: per step: the spread over the ranks and the job's MFU (as ``kviewer summary FOLDER --steps``)
STEP_TABLE = [*SPREAD_COLUMNS, *MFU_SUMMARY]
RANK_COLUMNS = ["run", "rank", "path", "kernels", *TIME_FIELDS, "steps", "mean_step_ns", "median_step_ns", "max_step_ns", "mfu", "hfu", "sol_step",
                "excess_pct", "times_slowest", "reason_kind", "reason", "reason_excess_ns"]
STRAGGLER_TABLE = ["run", "position", "rank", "basis", "mean_ns", "excess_pct", "times_slowest", "reason_kind", "reason", "reason_excess_ns", "path",
                   "beyond_noise"]
#: a rank is a straggler only when it is slower than the median rank by more than this many times
#: the ranks' spread (1.4826 x the median absolute deviation of the ranks' means: the standard
#: deviation of normal noise, not pulled up by the straggler itself)
STRAGGLER_K = 3.0
#: ... and by more than this share of the median rank (identical ranks have no spread at all)
STRAGGLER_FLOOR = 0.01


def beyond_noise(means: np.ndarray, k: float = STRAGGLER_K, floor: float = STRAGGLER_FLOOR) -> np.ndarray:
    """Which ranks are slower than the median rank by more than the run's own noise:
    ``k`` x 1.4826 x MAD of the ranks' means, and at least ``floor`` x the median."""
    x = np.asarray(means, dtype=np.float64)
    ok = np.isfinite(x)
    out = np.zeros(len(x), dtype=bool)
    if ok.sum() < 3:
        return out  # two ranks have no spread to tell noise from a straggler
    med = float(np.median(x[ok]))
    spread = 1.4826 * float(np.median(np.abs(x[ok] - med)))
    out[ok] = (x[ok] - med) > max(k * spread, floor * abs(med))
    return out


RUN_COLUMNS = ["run", "files", "ranks", "failed", "steps", "mean_step_ns", "kernel_ns_per_rank", "comm_ns_per_rank", "idle_ns_per_rank", "mfu", "hfu",
               "straggler", "straggler_reason", "baseline", "slower_pct"]
SERIES_COLUMNS = ["run", "group", "comm", "ranks", "count_per_rank", "ns_per_rank", "baseline_ns_per_rank", "delta_ns", "delta_pct", "noise_ns", "status"]

#: a rank's reason: more time than the median rank in one kernel group, a communication group,
#: or idle GPU time
REASON_GROUP = "kernel group"
REASON_COMM = "communication"
REASON_IDLE = "idle"
IDLE = "(idle GPU time)"


@dataclass
class FleetResult:
    files: pd.DataFrame
    ranks: pd.DataFrame
    steps: pd.DataFrame
    rank_steps: pd.DataFrame
    groups: pd.DataFrame
    rank_groups: pd.DataFrame
    stragglers: pd.DataFrame
    runs: pd.DataFrame
    series: pd.DataFrame
    baseline: str
    warnings: list[str] = field(default_factory=list)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by its name (the CSV / JSON / SQLite table names)."""
        return {"runs": self.runs, "files": self.files, "ranks": self.ranks, "steps": self.steps, "rank_steps": self.rank_steps,
                "groups": self.groups, "rank_groups": self.rank_groups, "stragglers": self.stragglers, "series": self.series}

    def slowest_run(self) -> tuple[str, float] | None:
        """The run most slower than the baseline in kernel time per rank (percent), if any run is."""
        r = self.runs[self.runs["run"] != self.baseline]
        r = r[np.isfinite(r["slower_pct"].to_numpy(dtype=np.float64))]
        if not len(r):
            return None
        i = int(np.argmax(r["slower_pct"].to_numpy(dtype=np.float64)))
        return str(r["run"].iloc[i]), float(r["slower_pct"].iloc[i])


def analyze(summaries: Sequence[FileSummary], runs: Sequence[str] | None = None, baseline: str | None = None,
            noise: NoiseModel | None = None) -> FleetResult:
    """The fleet's tables from per-file summaries. ``runs`` gives the runs' order (default: as the
    summaries first name them); ``baseline`` the run the others are compared to (default: the first)."""
    noise = noise or NoiseModel()
    order = list(runs) if runs is not None else list(dict.fromkeys(s.run for s in summaries))
    by_run: dict[str, list[FileSummary]] = {r: [] for r in order}
    for s in summaries:
        by_run.setdefault(s.run, []).append(s)
    order = list(by_run)
    if baseline is None:
        baseline = next((r for r in order if any(s.ok for s in by_run[r])), order[0] if order else "")
    warnings: list[str] = []
    files: list[pd.DataFrame] = []
    run_rows: list[Any] = []
    ranks: list[pd.DataFrame] = []
    steps: list[pd.DataFrame] = []
    rank_steps: list[pd.DataFrame] = []
    groups: list[pd.DataFrame] = []
    rank_groups: list[pd.DataFrame] = []
    stragglers: list[pd.DataFrame] = []
    for run in order:
        part = _one_run(run, by_run[run], warnings)
        files.append(part["files"])
        run_rows.append(part["run"])
        for store, key in ((ranks, "ranks"), (steps, "steps"), (rank_steps, "rank_steps"), (groups, "groups"),
                           (rank_groups, "rank_groups"), (stragglers, "stragglers")):
            if len(part[key]):
                store.append(part[key])
    runs_df = pd.DataFrame(run_rows, columns=RUN_COLUMNS[:-2])
    series = _series(order, by_run, rank_groups, baseline, noise)
    runs_df = _run_deltas(runs_df, baseline)
    return FleetResult(
        files=_cat(files, FILE_COLUMNS),
        ranks=_cat(ranks, RANK_COLUMNS),
        steps=_cat(steps, ["run", *STEP_TABLE]),
        rank_steps=_cat(rank_steps, ["run", "rank", *STEP_FIELDS]),
        groups=_cat(groups, ["run", "group", "comm", "ranks", "count", "total_ns", "mean_rank_ns", "min_rank_ns", "max_rank_ns", "spread_ns", "slowest_rank"]),
        rank_groups=_cat(rank_groups, ["run", "rank", "group", "comm", "count", "total_ns", "sumsq_ns2"]),
        stragglers=_cat(stragglers, STRAGGLER_TABLE),
        runs=runs_df,
        series=series,
        baseline=baseline,
        warnings=warnings,
    )


def _cat(parts: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    return pd.concat(parts, ignore_index=True)[columns]


def _one_run(run: str, summaries: list[FileSummary], warnings: list[str]) -> dict[str, Any]:
    good = [s for s in summaries if s.ok]
    ranks_of_good, how = decide_ranks([s.rank_in_file for s in good], [s.name for s in good]) if good else ([], [])
    warnings += [f"{run}: {w}" for w in how]
    rank_of = {id(s): r for s, r in zip(good, ranks_of_good)}
    files = pd.DataFrame(
        {
            "run": run,
            "rank": pd.array([rank_of.get(id(s)) for s in summaries], dtype="Int64"),
            "path": [s.path for s in summaries],
            "format": [s.format for s in summaries],
            "status": ["ok" if s.ok else "skipped" if s.error_kind == "UnsupportedFormat" else "failed" for s in summaries],
            "error_kind": [s.error_kind for s in summaries],
            "error": [s.error for s in summaries],
            "kernels": pd.array([s.kernels if s.ok else None for s in summaries], dtype="Int64"),
            "seconds": [s.seconds for s in summaries],
        },
        columns=FILE_COLUMNS,
    )
    good = sorted(good, key=lambda s: rank_of[id(s)])
    rank_list = [rank_of[id(s)] for s in good]
    out: dict[str, object] = {"files": files}

    # steps: every rank's, then the spread per step and the per-rank statistics
    st_parts = [s.steps.assign(rank=np.int64(rank_of[id(s)])) for s in good if len(s.steps)]
    st = pd.concat(st_parts, ignore_index=True) if st_parts else pd.DataFrame(columns=["rank", *STEP_FIELDS])
    if len(st):
        st = st.sort_values(["step", "rank"], kind="stable").reset_index(drop=True)
        spread = with_mfu_columns(step_spread(None, st), job_table(st))
        stats = rank_step_stats(None, st)
        basis = "step time"
    else:
        spread = pd.DataFrame(columns=STEP_TABLE)
        stats = _busy_stats(good, rank_list)
        basis = "GPU busy time"
    out["steps"] = spread.assign(run=run)[["run", *STEP_TABLE]] if len(spread) else spread
    out["rank_steps"] = st.assign(run=run)[["run", "rank", *STEP_FIELDS]] if len(st) else st

    # kernel groups per rank and across ranks
    rg_parts = [s.groups.assign(rank=np.int64(rank_of[id(s)])) for s in good if len(s.groups)]
    rg = pd.concat(rg_parts, ignore_index=True) if rg_parts else pd.DataFrame(columns=["rank", "group", "comm", "count", "total_ns", "sumsq_ns2"])
    out["rank_groups"] = rg.assign(run=run)[["run", "rank", "group", "comm", "count", "total_ns", "sumsq_ns2"]] if len(rg) else rg
    if len(rg):
        across = across_ranks(pd.DataFrame({"name": rg["group"], "rank": rg["rank"], "sum": rg["total_ns"], "size": rg["count"]}))
        comm = rg.groupby("group")["comm"].any()
        across = across.rename(columns={"name": "group"})
        across.insert(1, "comm", comm.reindex(across["group"]).to_numpy(dtype=bool))
        out["groups"] = across.assign(run=run)[["run", *across.columns]]
    else:
        out["groups"] = pd.DataFrame()

    # per rank: times, step statistics, reason
    times = pd.DataFrame([s.times for s in good], columns=TIME_FIELDS, dtype=np.float64)
    reasons = _reasons(rank_list, rg, times["idle_ns"].to_numpy(dtype=np.float64))
    ranks = pd.DataFrame({"run": run, "rank": np.array(rank_list, dtype=np.int64), "path": [s.path for s in good],
                          "kernels": np.array([s.kernels for s in good], dtype=np.int64)})
    ranks = pd.concat([ranks, times], axis=1)
    stat = stats.set_index("rank") if len(st) and len(stats) else None  # step columns only from steps
    idx = pd.Index(rank_list)

    def col(name: str) -> np.ndarray:
        if stat is None or name not in stat:
            return np.full(len(rank_list), np.nan)
        return stat[name].reindex(idx).to_numpy(dtype=np.float64)

    ranks["steps"] = pd.array([int(v) if math.isfinite(v) else None for v in col("steps")], dtype="Int64")
    ranks["mean_step_ns"], ranks["median_step_ns"], ranks["max_step_ns"] = col("mean_ns"), col("median_ns"), col("max_ns")
    ranks["excess_pct"] = col("excess_pct")
    per_rank_mfu = rank_mfu(st).set_index("rank") if len(st) else None
    for c in ("mfu", "hfu", "sol_step"):
        ranks[c] = per_rank_mfu[c].reindex(idx).to_numpy(dtype=np.float64) if per_rank_mfu is not None else np.full(len(rank_list), np.nan)
    ranks["times_slowest"] = pd.array([int(v) if math.isfinite(v) else None for v in col("times_slowest")], dtype="Int64")
    for c in ("reason_kind", "reason", "reason_excess_ns"):
        ranks[c] = pd.Series([reasons[r][c] for r in rank_list], index=ranks.index, dtype=object)
    out["ranks"] = ranks[RANK_COLUMNS] if len(ranks) else pd.DataFrame(columns=RANK_COLUMNS)

    # stragglers: slowest first
    path_of = dict(zip(rank_list, (s.path for s in good)))
    if len(stats):
        sg = pd.DataFrame({"run": run, "position": np.arange(1, len(stats) + 1, dtype=np.int64), "rank": stats["rank"].to_numpy(dtype=np.int64),
                           "basis": basis, "mean_ns": stats["mean_ns"].to_numpy(dtype=np.float64),
                           "excess_pct": stats["excess_pct"].to_numpy(dtype=np.float64), "times_slowest": stats["times_slowest"].to_numpy()})
        for c in ("reason_kind", "reason", "reason_excess_ns"):
            sg[c] = pd.Series([reasons[int(r)][c] for r in sg["rank"]], index=sg.index, dtype=object)
        sg["path"] = [path_of[int(r)] for r in sg["rank"]]
        sg["beyond_noise"] = beyond_noise(sg["mean_ns"].to_numpy(dtype=np.float64))
        out["stragglers"] = sg[STRAGGLER_TABLE]
    else:
        out["stragglers"] = pd.DataFrame(columns=STRAGGLER_TABLE)
    # the slowest rank is a straggler only when it stands out of the ranks' own spread
    straggler = int(stats["rank"].iloc[0]) if len(stats) >= 2 and bool(beyond_noise(stats["mean_ns"].to_numpy(dtype=np.float64))[0]) else None
    nan = float("nan")
    run_mfu = run_totals(st) if len(st) else {}

    def per_rank(name: str) -> float:
        v = times[name].to_numpy(dtype=np.float64)
        v = v[np.isfinite(v)]
        return float(v.mean()) if len(v) else nan

    out["run"] = {
        "run": run,
        "files": len(summaries),
        "ranks": len(good),
        "failed": len(summaries) - len(good),
        "steps": int(spread["step"].nunique()) if len(spread) else 0,
        "mean_step_ns": float(st["dur"].mean()) if len(st) else nan,
        "kernel_ns_per_rank": per_rank("kernel_ns"),
        "comm_ns_per_rank": per_rank("comm_ns"),
        "idle_ns_per_rank": per_rank("idle_ns"),
        "mfu": run_mfu.get("mfu", nan),
        "hfu": run_mfu.get("hfu", nan),
        "straggler": straggler,
        "straggler_reason": reasons[straggler]["reason"] if straggler is not None else "",
    }
    return out


def _busy_stats(good: list[FileSummary], rank_list: list[int]) -> pd.DataFrame:
    """Without steps, ranks are ordered by GPU busy time (a rank with no kernels has none)."""
    busy = np.array([s.times.get("busy_ns", np.nan) for s in good], dtype=np.float64)
    ok = np.isfinite(busy)
    if not ok.any():
        return pd.DataFrame(columns=STRAGGLER_COLUMNS)
    typical = float(np.median(busy[ok]))
    df = pd.DataFrame({"rank": np.array(rank_list, dtype=np.int64)[ok], "steps": 0, "mean_ns": busy[ok], "median_ns": busy[ok], "max_ns": busy[ok],
                       "mean_busy_ns": busy[ok], "excess_pct": (busy[ok] / typical - 1.0) * 100.0 if typical > 0 else np.nan, "times_slowest": 0})
    return df.sort_values(["mean_ns", "rank"], ascending=[False, True], kind="stable").reset_index(drop=True)[STRAGGLER_COLUMNS]


def _reasons(rank_list: list[int], rg: pd.DataFrame, idle: np.ndarray) -> dict[int, dict[str, object]]:
    """For each rank, what it spends most more time on than the median rank: a kernel group (its
    total over the file), a communication group, or idle GPU time."""
    unknown: dict[str, object] = {"reason_kind": "", "reason": "", "reason_excess_ns": float("nan")}
    out: dict[int, dict[str, object]] = {r: dict(unknown) for r in rank_list}
    if len(rank_list) < 2:
        return out
    cols: list[np.ndarray] = []
    names: list[str] = []
    kinds: list[str] = []
    if len(rg):
        pivot = rg.pivot_table(index="rank", columns="group", values="total_ns", aggfunc="sum", fill_value=0).reindex(rank_list, fill_value=0)
        comm = rg.groupby("group")["comm"].any()
        m = pivot.to_numpy(dtype=np.float64)
        cols.append(m - np.median(m, axis=0))
        names += [str(c) for c in pivot.columns]
        kinds += [REASON_COMM if comm[c] else REASON_GROUP for c in pivot.columns]
    if np.isfinite(idle).sum() >= 2:
        med = float(np.median(idle[np.isfinite(idle)]))
        cols.append(np.where(np.isfinite(idle), idle - med, -np.inf)[:, None])
        names.append(IDLE)
        kinds.append(REASON_IDLE)
    if not cols:
        return out
    excess = np.concatenate(cols, axis=1)
    best = np.argmax(excess, axis=1)
    for i, r in enumerate(rank_list):
        e = float(excess[i, best[i]])
        if e > 0 and math.isfinite(e):
            out[r] = {"reason_kind": kinds[best[i]], "reason": names[best[i]], "reason_excess_ns": e}
    return out


def _series(order: list[str], by_run: dict[str, list[FileSummary]], rank_groups: list[pd.DataFrame], baseline: str,
            noise: NoiseModel) -> pd.DataFrame:
    """Each kernel group's time per rank in every run, against the baseline run."""
    if not rank_groups:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SERIES_COLUMNS})
    rg = pd.concat(rank_groups, ignore_index=True)
    n_ranks = {r: sum(s.ok for s in by_run[r]) for r in order}
    g = rg.groupby(["run", "group"], sort=False).agg(comm=("comm", "any"), count=("count", "sum"), total=("total_ns", "sum"), sumsq=("sumsq_ns2", "sum")).reset_index()
    n = g["run"].map(n_ranks).to_numpy(dtype=np.float64)
    g["ranks"] = n.astype(np.int64)
    g["count_per_rank"] = g["count"].to_numpy(dtype=np.float64) / n
    g["ns_per_rank"] = g["total"].to_numpy(dtype=np.float64) / n
    cnt = g["count"].to_numpy(dtype=np.float64)
    mean_k = g["total"].to_numpy(dtype=np.float64) / cnt
    # sample variance of one kernel's duration, pooled over the run's ranks
    g["var"] = np.where(cnt > 1, (g["sumsq"].to_numpy(dtype=np.float64) - cnt * mean_k**2) / np.maximum(cnt - 1, 1), 0.0).clip(min=0)
    base = g[g["run"] == baseline].set_index("group")
    rows = []
    groups_all = list(dict.fromkeys(g["group"]))
    for run in order:
        mine = g[g["run"] == run].set_index("group")
        for grp in groups_all:
            in_a, in_b = grp in base.index, grp in mine.index
            if not in_b and not (in_a and run != baseline):
                continue
            a = base.loc[grp] if in_a else None
            b = mine.loc[grp] if in_b else None
            ta = float(a["ns_per_rank"]) if a is not None else 0.0
            tb = float(b["ns_per_rank"]) if b is not None else 0.0
            if run == baseline:
                status, delta, pct, nz = "baseline", float("nan"), float("nan"), float("nan")
            else:
                delta = tb - ta
                pct = delta / ta * 100.0 if ta > 0 else float("nan")
                if a is None:
                    status, nz = ONLY_B, float("nan")
                elif b is None:
                    status, nz = ONLY_A, float("nan")
                else:
                    nz = float(noise.noise_ns(np.array([ta]), np.array([float(a["count_per_rank"])]), np.array([float(a["var"])]),
                                              np.array([float(b["count_per_rank"])]), np.array([float(b["var"])]))[0])
                    status = UNCHANGED if abs(delta) <= nz else CHANGED
            src = b if b is not None else a
            assert src is not None  # a group is in the baseline, this run, or both
            rows.append({"run": run, "group": grp, "comm": bool(src["comm"]), "ranks": n_ranks[run],
                         "count_per_rank": float(b["count_per_rank"]) if b is not None else 0.0, "ns_per_rank": tb,
                         "baseline_ns_per_rank": ta if a is not None else float("nan"), "delta_ns": delta, "delta_pct": pct, "noise_ns": nz, "status": status})
    return pd.DataFrame(rows, columns=SERIES_COLUMNS)


def _run_deltas(runs: pd.DataFrame, baseline: str) -> pd.DataFrame:
    runs = runs.copy()
    runs["baseline"] = runs["run"] == baseline
    base = runs.loc[runs["baseline"], "kernel_ns_per_rank"]
    a = float(base.iloc[0]) if len(base) else float("nan")
    b = runs["kernel_ns_per_rank"].to_numpy(dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(a > 0, (b - a) / a * 100.0, np.nan)
    runs["slower_pct"] = np.where(runs["baseline"], np.nan, pct)
    runs["straggler"] = pd.array(runs["straggler"].tolist(), dtype="Int64")
    return runs[RUN_COLUMNS]
