"""``kviewer summary FILE``: kernels grouped by name (as ``nsys stats cuda_gpu_kern_sum``), per rank,
step times across ranks, or what a time range holds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli.common import EXIT_OK, add_command, dump_json, format_ns, load_for, parse_time_range, wants_raw_csv, write_frame
from kviewer.errors import AnalysisError, UserError
from kviewer.session.documents import range_document, steps_document
from kviewer.session.mfu_view import mfu_report

if TYPE_CHECKING:
    import kviewer.analysis.gpu_metrics
    import kviewer.analysis.mfu
    import kviewer.analysis.ranks
    import kviewer.analysis.sol
    import kviewer.analysis.steps
    import kviewer.analysis.summary
    import kviewer.analysis.timerange
    from kviewer.core import Trace


def register(sub: Any) -> None:
    s = add_command(sub, "summary", "kernels grouped by name (as nsys stats cuda_gpu_kern_sum)", cmd_summary, ("table", "csv", "json"))
    s.add_argument("--short", action="store_true", help="group by short name (no arguments or templates)")
    s.add_argument("--by-rank", action="store_true", help="one summary per rank (a folder of per-rank traces)")
    s.add_argument("--steps", action="store_true", help="step times per rank: spread across ranks per step, and the straggler; "
                   "MFU, HFU and step speed of light per step")
    s.add_argument("--device", metavar="NAME", help="with --steps: the GPU whose peaks the MFU uses when the trace does not say or to override it")
    s.add_argument("--range", metavar="START:END", help="what lies inside a time range of the trace's own clock (from its time 0: the nsys session start), as the "
                   "window's Range panel shows it: kernels by name, streams busy/idle, copies by direction, NVTX ranges "
                   "(units ns/us/ms/s, e.g. 1.2s:1.25s; intervals across an edge are clipped)")


def cmd_summary(args: argparse.Namespace) -> int:
    plain = not (args.steps or args.by_rank or args.range is not None)
    # a plain summary reads the kernels' names and durations alone (without the cache, an nsys
    # export is read only that far); a range needs every table (streams, copies, NVTX)
    trace = load_for(args, args.file, tables=analysis.summary.SUMMARY_READS if plain else None)
    by = "short_name" if args.short else "name"
    raw = wants_raw_csv(args)
    if args.range is not None:
        return summary_range(trace, args.range, args.format, raw)
    if args.steps:
        return summary_steps(trace, args.format, raw, args.device)
    if args.by_rank:
        df = analysis.ranks.kernel_summary_by_rank(trace, by=by)
    else:
        df = analysis.summary.kernel_summary(trace, by=by)
    write_frame(df, args.format, raw_csv=raw)
    return EXIT_OK


def summary_range(trace: "Trace", text: str, fmt: str, raw_csv: bool = False) -> int:
    """What lies inside a range of the trace's own times (its clock, as the timeline's axis):
    the tables of the window's Range panel (kernels by name, streams busy/idle, copies by
    direction, NVTX ranges). csv prints the kernels table; json and table all four."""
    if trace.meta.summary_only:
        raise UserError(f"{trace.meta.path}: {trace.meta.timeline_needs}")
    lo, hi = parse_time_range(text)  # the same range syntax as screenshot --range
    span = trace.span_ns()
    t0 = float(span[0]) if lo is None and span else (lo or 0.0)
    t1 = float(span[1]) if hi is None and span else (hi or 0.0)
    if t1 <= t0:
        raise UserError(f"--range: the range {text!r} holds nothing of {trace.meta.path}")
    summary = analysis.timerange.range_summary(trace, int(round(t0)), int(round(t1)))
    if fmt == "csv":
        write_frame(summary.kernels, "csv", raw_csv=raw_csv)
    elif fmt == "json":
        dump_json(range_document(summary, int(round(t0)), int(round(t1))))
    else:
        print(f"range {format_ns(t0)} – {format_ns(t1)} (duration {format_ns(summary.duration)}), time {trace.meta.clock}")
        for name, df in summary.sections().items():
            print(f"\n{name}")
            write_frame(df, "table", float_digits=2)
    return EXIT_OK


def summary_steps(trace: "Trace", fmt: str, raw_csv: bool = False, device: str | None = None) -> int:
    """Per step the spread of step time across ranks, then per rank (slowest first)."""
    found = analysis.ranks.rank_steps(trace)  # once, for the step times and the MFU
    steps = analysis.ranks.step_times(trace, found)
    if not len(steps):
        raise UserError(f"{trace.meta.path}: no steps found (no ProfilerStep#N or step_N ranges)")
    spread, per_rank, slow = analysis.ranks.step_spread(trace, steps), analysis.ranks.rank_step_stats(trace, steps), analysis.ranks.straggler(trace, steps)

    sol: analysis.sol.SolResult | None = None
    try:  # once, for the sampled metrics' tensor check and the MFU
        sol = analysis.sol.sol_result(trace, device) if len(trace.kernels) else None
    except AnalysisError:  # the MFU says why (mfu_or_unknown)
        sol = None

    mfu = analysis.mfu.mfu_or_unknown(trace, device, sol, found)
    if len(trace.gpu_samples):  # sampled GPU metrics (nsys --gpu-metrics-devices): their means per step

        # the step's SOL tensor-pipe time and its MFU, each against the sampled Tensor Active
        spread = analysis.gpu_metrics.steps_with_metrics(trace, analysis.steps.find_steps(trace, detect=False), spread, sol.table if sol is not None else None,
                                    mfu=mfu.job)
    spread = analysis.mfu.with_mfu_columns(spread, mfu)
    if fmt == "json":
        doc = steps_document(spread, per_rank, slow)
        doc["mfu"] = mfu.as_json()
        dump_json(doc)
    elif fmt == "csv":
        write_frame(spread, "csv", raw_csv=raw_csv)
    else:
        print("step time across ranks (ns)")
        write_frame(spread.drop(columns=["model_flops", "mfu", "hfu", "sol_step"]), "table", float_digits=1)

        print("\n" + mfu_report(mfu))
        print("\nper rank, slowest first (ns)")
        write_frame(per_rank, "table", float_digits=1)
        if slow is not None:
            row = per_rank.iloc[0]
            contested = int((spread["ranks"] > 1).sum())
            print(f"\nstraggler: rank {slow} (mean step {format_ns(row['mean_ns'])}, {row['excess_pct']:.1f}% over the median rank; "
                  f"slowest in {int(row['times_slowest'])} of {contested} steps)")
    return EXIT_OK
