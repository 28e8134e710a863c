"""The fleet's outputs: CSV and JSON tables, a SQLite database, and a report with pictures
drawn as SVG from the numbers (no Qt, no matplotlib)."""

from __future__ import annotations

import hashlib
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import jsonout
from kviewer.fleet.analyze import FleetResult
from kviewer.report import Facts, Paragraph, Picture, Report, Section, Svg, Table, fmt_pct, html_escape, write_report
from kviewer.session.format import UNKNOWN, format_count_int, format_duration, format_ratio, format_signed_duration, format_util, number
from kviewer.sqldb import write_tables as write_db

#: index columns of the SQLite tables
KEYS = {"runs": ["run"], "files": ["run", "rank"], "ranks": ["run", "rank"], "steps": ["run", "step"], "rank_steps": ["run", "rank", "step"],
        "groups": ["run", "group"], "rank_groups": ["run", "rank"], "stragglers": ["run", "position"], "series": ["run", "group"]}
TABLE_PREFIX = "fleet_"
TOP = 20
#: the heatmap draws at most this many rank columns (bins of ranks beyond)
MAX_COLUMNS = 512


def _plain(df: pd.DataFrame) -> pd.DataFrame:
    """Unknown values as None (NULL in SQL, empty in CSV, null in JSON)."""
    return df.astype(object).where(df.notna(), None)


def write_tables(result: FleetResult, out: Path) -> list[Path]:
    """``<table>.csv`` for each table and ``fleet.json`` with all of them."""
    written = []
    for name, df in result.tables().items():
        p = out / f"{name}.csv"
        df.to_csv(p, index=False, lineterminator="\n")
        written.append(p)
    doc: dict[str, Any] = {"baseline": result.baseline, "warnings": result.warnings}
    for name, df in result.tables().items():
        doc[name] = _plain(df).to_dict(orient="records")  # numpy values, NaN and inf: jsonout writes them
    p = out / "fleet.json"
    p.write_text(jsonout.to_text(doc, indent=1) + "\n", encoding="utf-8")
    written.append(p)
    return written


def write_sqlite(result: FleetResult, path: Path) -> Path:
    write_db({TABLE_PREFIX + n: df for n, df in result.tables().items()}, str(path), kind="fleet",
             keys={TABLE_PREFIX + n: k for n, k in KEYS.items()})
    return path


# ---------------------------------------------------------------------------------------------
# the report


def build_fleet_report(result: FleetResult, pictures: bool = True, max_runs: int = 4) -> Report:
    r = result
    ok = r.files[r.files["status"] == "ok"]
    bad = r.files[r.files["status"] != "ok"]
    facts = [("runs", str(len(r.runs))), ("files", f"{len(r.files):,}"), ("ranks read", f"{len(ok):,}"),
             ("files skipped or failed", f"{len(bad):,}"), ("baseline run", r.baseline)]
    blocks: list[Paragraph | Facts | Table | Picture | Svg] = [Facts(facts), *(Paragraph(w) for w in r.warnings[:20])]
    sections = [Section("Fleet", blocks)]
    if len(r.runs) > 1:
        rows = [[str(x.run), f"{x.ranks:,}", f"{x.failed:,}", _ns(x.mean_step_ns), _ns(x.kernel_ns_per_rank), _ns(x.comm_ns_per_rank),
                 "baseline" if x.baseline else fmt_pct(x.slower_pct, signed=True), UNKNOWN if number(x.straggler) is None else str(x.straggler),
                 format_util(x.mfu)]
                for x in r.runs.itertuples()]
        blocks = [Table(["run", "ranks", "failed", "mean step", "kernel time / rank", "communication / rank", "vs baseline", "straggler", "MFU"],
                        rows, [False, True, True, True, True, True, True, True, True], wide=(0,))]
        if pictures:
            blocks.append(Svg("runs", runs_svg(r.runs), "kernel time per rank in each run (baseline dashed)"))
        changed = r.series[(r.series["status"] != "baseline") & (r.series["status"] != "unchanged")]
        if len(changed):
            changed = changed.assign(_d=changed["delta_ns"].abs().fillna(np.inf)).sort_values("_d", ascending=False).head(TOP)
            blocks.append(Table(["run", "kernel group", "status", "per rank", "baseline", "delta", "delta %", "noise"],
                                [[str(x.run), str(x.group), str(x.status), _ns(x.ns_per_rank), _ns(x.baseline_ns_per_rank), _ns(x.delta_ns, True),
                                  fmt_pct(x.delta_pct, signed=True), _ns(x.noise_ns)] for x in changed.itertuples()],
                                [False, False, False, True, True, True, True, True],
                                caption="kernel groups whose time per rank differs from the baseline by more than the noise of kviewer compare",
                                wide=(1,)))
        sections.append(Section("Runs", blocks))
    runs = list(r.runs["run"])
    shown = runs if len(runs) <= max_runs else [r.baseline, *runs[-(max_runs - 1):]]
    for run in dict.fromkeys(shown):
        sections += _run_sections(r, str(run), pictures)
    if len(bad):
        sections.append(Section("Files not read", [Table(["file", "status", "why"], [[str(x.path), str(x.status), str(x.error)] for x in bad.head(200).itertuples()],
                                                         [False, False, False], wide=(0, 2),
                                                         caption=f"{len(bad)} files" + (" (first 200)" if len(bad) > 200 else ""))]))
    return Report(title="kviewer fleet report", traces=[], sections=sections, generated=time.strftime("generated %Y-%m-%d %H:%M %Z"))


def _ns(v: object, signed: bool = False) -> str:
    """A duration in the fleet report; unknown "—" (the one formatting module's rule)."""
    return format_signed_duration(v) if signed else format_duration(v)


def _run_sections(r: FleetResult, run: str, pictures: bool) -> list[Section]:
    ranks = r.ranks[r.ranks["run"] == run]
    steps = r.steps[r.steps["run"] == run]
    sg = r.stragglers[r.stragglers["run"] == run]
    groups = r.groups[r.groups["run"] == run]
    blocks: list = []
    run_row = r.runs[r.runs["run"] == run].iloc[0]
    top = sg.iloc[0] if len(sg) else None
    if not pd.isna(run_row["straggler"]) and top is not None and float(top["excess_pct"]) > 0:
        why = f"{top['reason']} ({top['reason_kind']}, {_ns(top['reason_excess_ns'], True)} over the median rank)" if top["reason"] else "no single kernel group or idle gap stands out"
        blocks.append(Paragraph(f"Straggler: rank {int(top['rank'])}, {fmt_pct(top['excess_pct'], signed=True)} {top['basis']} over the median rank; "
                                f"reason: {why}."))
    if len(sg):
        blocks.append(Table(["#", "rank", "mean " + str(sg["basis"].iloc[0]), "over median", "slowest in steps", "reason", "kind", "excess", "file"],
                            [[str(x.position), str(x.rank), _ns(x.mean_ns), fmt_pct(x.excess_pct, signed=True), _int(x.times_slowest), str(x.reason), str(x.reason_kind),
                              _ns(x.reason_excess_ns, True), os.path.basename(str(x.path))] for x in sg.head(10).itertuples()],
                            [True, True, True, True, True, False, False, True, False], caption="ranks, slowest first", wide=(5, 8)))
    if len(steps):
        if pictures:
            blocks.append(Svg(_key("steps", run), steps_svg(steps), "step time across ranks: min to max (band), median (line)"))
        blocks.append(Table(["step", "ranks", "min", "median", "max", "spread", "spread %", "slowest rank", "MFU", "step SOL"],
                            [[str(x.step), str(x.ranks), _ns(x.min_ns), _ns(x.median_ns), _ns(x.max_ns), _ns(x.spread_ns), fmt_pct(x.spread_pct), str(x.slowest_rank),
                              format_util(x.mfu), format_ratio(x.sol_step)]
                             for x in steps.head(50).itertuples()], [True] * 10, caption="per step, over the ranks" + (" (first 50)" if len(steps) > 50 else "")))
    if len(ranks):
        t = ranks
        sums = {c: float(np.nanmean(t[c].to_numpy(dtype=np.float64))) if np.isfinite(t[c].to_numpy(dtype=np.float64)).any() else float("nan")
                for c in ("kernel_ns", "busy_ns", "comm_ns", "overlap_ns", "exposed_comm_ns", "idle_ns")}
        blocks.append(Facts([("mean per rank: kernel time", _ns(sums["kernel_ns"])), ("GPU busy", _ns(sums["busy_ns"])),
                             ("communication (NCCL/RCCL)", _ns(sums["comm_ns"])), ("communication overlapped with compute", _ns(sums["overlap_ns"])),
                             ("communication not overlapped", _ns(sums["exposed_comm_ns"])), ("idle GPU time", _ns(sums["idle_ns"]))]))
    if len(groups):
        if pictures:
            rg = r.rank_groups[r.rank_groups["run"] == run]
            blocks.append(Svg(_key("heatmap", run), heatmap_svg(rg, list(groups["group"].head(12)), list(ranks["rank"])),
                              "per-rank time of the top kernel groups against the median rank (blue: less, red: more)"))
        blocks.append(Table(["kernel group", "comm", "ranks", "total", "mean per rank", "min rank", "max rank", "spread", "slowest rank"],
                            [[str(x.group), "yes" if x.comm else "", str(x.ranks), _ns(x.total_ns), _ns(x.mean_rank_ns), _ns(x.min_rank_ns), _ns(x.max_rank_ns),
                              _ns(x.spread_ns), str(x.slowest_rank)] for x in groups.head(TOP).itertuples()],
                            [False, False, True, True, True, True, True, True, True], caption="kernel groups (short names) over the ranks", wide=(0,)))
    return [Section(f"Run {run}", blocks)]


def _int(v: object) -> str:
    return format_count_int(v)


def _key(prefix: str, run: str) -> str:
    return f"{prefix}_{hashlib.sha1(run.encode()).hexdigest()[:8]}"


# ---------------------------------------------------------------------------------------------
# pictures, as SVG text


def _svg(w: int, h: int, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">'
            f'<rect width="{w}" height="{h}" fill="white"/>' + "".join(body) + "</svg>\n")


def _axis_ms(y0: float, y1: float, top: int, bottom: int, left: int, right: int) -> list[str]:
    out = []
    for i in range(5):
        v = y0 + (y1 - y0) * i / 4
        y = bottom - (bottom - top) * i / 4
        out.append(f'<line x1="{left}" x2="{right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e3e7eb"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{html_escape(format_duration(v))}</text>')
    return out


def steps_svg(steps: pd.DataFrame, w: int = 1000, h: int = 300) -> str:
    left, right, top, bottom = 80, w - 10, 10, h - 30
    n = len(steps)
    lo = steps["min_ns"].to_numpy(dtype=np.float64)
    hi = steps["max_ns"].to_numpy(dtype=np.float64)
    med = steps["median_ns"].to_numpy(dtype=np.float64)
    y1 = float(hi.max()) * 1.05 if n and hi.max() > 0 else 1.0

    def x(i: int) -> float:
        return left + (right - left) * (i + 0.5) / max(n, 1)

    def y(v: float) -> float:
        return bottom - (bottom - top) * v / y1

    body = _axis_ms(0, y1, top, bottom, left, right)
    band = [f"{x(i):.1f},{y(hi[i]):.1f}" for i in range(n)] + [f"{x(i):.1f},{y(lo[i]):.1f}" for i in reversed(range(n))]
    if n:
        body.append(f'<polygon points="{" ".join(band)}" fill="#f4b183" fill-opacity="0.6" stroke="#e07b39"/>')
        body.append(f'<polyline points="{" ".join(f"{x(i):.1f},{y(med[i]):.1f}" for i in range(n))}" fill="none" stroke="#1f4e79" stroke-width="2"/>')
        for i in range(n):
            body.append(f'<circle cx="{x(i):.1f}" cy="{y(med[i]):.1f}" r="2.5" fill="#1f4e79"/>')
    labels = steps["step"].to_numpy()
    every = max(1, n // 20)
    for i in range(0, n, every):
        body.append(f'<text x="{x(i):.1f}" y="{h - 12}" text-anchor="middle">{int(labels[i])}</text>')
    body.append(f'<text x="{(left + right) / 2:.0f}" y="{h - 1}" text-anchor="middle">step</text>')
    return _svg(w, h, body)


def heatmap_svg(rank_groups: pd.DataFrame, groups: list[str], ranks: list[int], w: int = 1000) -> str:
    """Rows: kernel groups; columns: ranks; colour: the rank's time in the group over the median rank."""
    left, top, row_h = 300, 10, 18
    h = top + row_h * len(groups) + 40
    pivot = rank_groups.pivot_table(index="group", columns="rank", values="total_ns", aggfunc="sum", fill_value=0).reindex(index=groups, columns=ranks, fill_value=0)
    m = pivot.to_numpy(dtype=np.float64)
    med = np.median(m, axis=1, keepdims=True) if m.size else m
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(med > 0, m / med - 1.0, 0.0)
    labels = list(ranks)
    if len(ranks) > MAX_COLUMNS:
        # one column per bin of ranks, coloured by its rank furthest from the median (a
        # straggler stays visible), labelled by the bin's first rank
        edges = np.linspace(0, len(ranks), MAX_COLUMNS + 1).astype(int)
        cols = []
        for a, b in zip(edges[:-1], edges[1:]):
            block = rel[:, a:b]
            pick = np.argmax(np.abs(block), axis=1)
            cols.append(block[np.arange(block.shape[0]), pick])
        rel = np.stack(cols, axis=1) if cols else rel
        labels = [ranks[a] for a in edges[:-1]]
    n = len(labels)
    cw = (w - left - 10) / max(n, 1)
    body = []
    for gi, g in enumerate(groups):
        yy = top + gi * row_h
        label = g if len(g) <= 44 else g[:20] + "…" + g[-23:]  # both ends: templates share their starts
        body.append(f'<text x="{left - 6}" y="{yy + 13}" text-anchor="end">{html_escape(label)}</text>')
        for ri in range(n):
            body.append(f'<rect x="{left + ri * cw:.2f}" y="{yy}" width="{max(cw, 0.5):.2f}" height="{row_h - 2}" fill="{_colour(rel[gi, ri])}"/>')
    every = max(1, n // 16)
    for ri in range(0, n, every):
        body.append(f'<text x="{left + (ri + 0.5) * cw:.1f}" y="{h - 18}" text-anchor="middle">{int(labels[ri])}</text>')
    body.append(f'<text x="{left + (w - left) / 2:.0f}" y="{h - 3}" text-anchor="middle">rank (colour: -20% blue … +20% red against the median rank)</text>')
    return _svg(w, h, body)


def _colour(rel: float) -> str:
    t = max(-1.0, min(1.0, rel / 0.2)) if math.isfinite(rel) else 0.0
    if t >= 0:
        r, g, b = 255, int(255 - 190 * t), int(255 - 200 * t)
    else:
        r, g, b = int(255 + 200 * t), int(255 + 120 * t), 255
    return f"#{r:02x}{g:02x}{b:02x}"


def runs_svg(runs: pd.DataFrame, w: int = 1000, h: int = 260) -> str:
    left, right, top, bottom = 80, w - 10, 10, h - 40
    v = runs["kernel_ns_per_rank"].to_numpy(dtype=np.float64)
    n = len(v)
    y1 = float(np.nanmax(v)) * 1.1 if n and np.isfinite(v).any() and np.nanmax(v) > 0 else 1.0

    def x(i: int) -> float:
        return left + (right - left) * (i + 0.5) / max(n, 1)

    def y(val: float) -> float:
        return bottom - (bottom - top) * val / y1

    body = _axis_ms(0, y1, top, bottom, left, right)
    pts = [f"{x(i):.1f},{y(v[i]):.1f}" for i in range(n) if math.isfinite(v[i])]
    if pts:
        body.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#1f4e79" stroke-width="2"/>')
    base = runs.loc[runs["baseline"], "kernel_ns_per_rank"]
    if len(base) and math.isfinite(float(base.iloc[0])):
        yb = y(float(base.iloc[0]))
        body.append(f'<line x1="{left}" x2="{right}" y1="{yb:.1f}" y2="{yb:.1f}" stroke="#888" stroke-dasharray="6 4"/>')
    every = max(1, n // 12)
    for i in range(0, n, every):
        name = os.path.basename(str(runs["run"].iloc[i]).rstrip("/")) or str(runs["run"].iloc[i])
        body.append(f'<text x="{x(i):.1f}" y="{h - 24}" text-anchor="middle">{html_escape(name[:18])}</text>')
    return _svg(w, h, body)


def write_all(result: FleetResult, out: Path, report_format: str = "html", pictures: bool = True) -> list[Path]:
    """Every output into the folder ``out``: tables (CSV, JSON), ``fleet.sqlite`` and the report."""
    out.mkdir(parents=True, exist_ok=True)
    written = write_tables(result, out)
    written.append(write_sqlite(result, out / "fleet.sqlite"))
    if report_format != "none":
        written += write_report(build_fleet_report(result, pictures), out / f"fleet.{report_format}", {})
    return written
