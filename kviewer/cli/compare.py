"""``kviewer compare A B``: matched kernel groups of two reports and their deltas (or, for two counter
reports, every metric side by side)."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli.common import (
    EXIT_OK,
    EXIT_SLOWER,
    RAW_CSV_HELP,
    add_load_options,
    dump_json,
    format_ns,
    human_table,
    load_for,
    say,
    wants_raw_csv,
    write_frame,
)
from kviewer.errors import UserError
from kviewer.session.documents import compare_document, records
from kviewer.session.mfu_view import compare_mfu_text

if TYPE_CHECKING:
    import kviewer.analysis.attach
    import kviewer.analysis.compare
    import kviewer.analysis.matching
    import kviewer.analysis.mfu
    import kviewer.analysis.ncu_baseline
    from kviewer.analysis.compare import CompareResult
    from kviewer.analysis.ncu_baseline import Baseline
    from kviewer.core import Trace

COMPARE_HELP = """\
Compare report B against report A: kernel groups matched across tools and
vendors, their deltas (B - A), totals and per-step times.

Kernels are matched by normalised name, grid and block, and for PyTorch traces
by the op that launched them, so a cuBLAS and a hipBLASLt GEMM under the same
aten::addmm meet. Status of a row:
  changed / unchanged  matched; unchanged when |delta| <= max(2% of A's total,
                       2 standard deviations of the total difference)
  only in A / only in B
  replaced             only in A, and B does its work inside a fused kernel
  replacement          that fused kernel (only in B)
The delta_ns column adds up exactly to B's total kernel time minus A's.

With steps on both sides (ProfilerStep#N, NVTX step_N) the statuses, the per-step columns
and the headline are per step (median step time, kernel time and launches per step), so files
of 3 and 10 steps compare; the totals columns stay per file. A bf16 kernel never pairs with
an fp32 one (precision_a/precision_b); kernels without a launching op pair by kind, precision
and their order within the steps (matched_by kind+precision+order).

Exit status: 0; 1 with --fail-if-slower PCT when B's median step (without steps on both
sides: its total kernel time) exceeds A's by more than PCT percent; 2 on a user error."""

COMPARE_TABLE_COLUMNS = ["name", "status", "count_a", "total_a_ns", "count_b", "total_b_ns", "delta_ns", "delta_pct", "matched_by"]


def register(sub: Any) -> None:
    sp = sub.add_parser("compare", help="matched kernel groups of two reports and their deltas", description=COMPARE_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("a", metavar="A", help="the reference report")
    sp.add_argument("b", metavar="B", help="the report compared with it")
    sp.add_argument("--format", choices=["table", "csv", "json"], default="table",
                    help="table: totals, steps and the diff table; csv: the diff table only (with delta_ns); json: everything (default: %(default)s)")
    sp.add_argument("--by", choices=["kernel", "op", "metric"], default="kernel",
                    help="rows per kernel group, per launching op (PyTorch traces), or per kernel and metric "
                    "(two counter reports: every metric side by side, Nsight Compute's baseline) (default: %(default)s)")
    sp.add_argument("--strip-templates", action="store_true", help="also ignore template arguments when matching names")
    sp.add_argument("--fail-if-slower", type=float, metavar="PCT", default=None,
                    help="exit with status 1 when B's median step (without steps: total kernel time) is more than PCT percent above A's (for CI)")
    add_load_options(sp)
    sp.add_argument("--raw-csv", action="store_true", help=RAW_CSV_HELP)
    sp.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    limit = args.fail_if_slower
    if limit is not None and (math.isnan(limit) or math.isinf(limit) or limit < 0):
        raise UserError(f"--fail-if-slower: expected a percentage >= 0, got {limit}")
    a = load_for(args, args.a)
    b = load_for(args, args.b)
    base = _baseline(a, b, args.by == "metric")
    if base is not None and args.by == "metric":
        return _print_baseline(base, args.format, wants_raw_csv(args))
    result = analysis.compare.compare(a, b, analysis.matching.MatchOptions(strip_templates=args.strip_templates))
    table = result.groups
    if args.by == "op":
        if result.ops is None:
            raise UserError("--by op needs two traces that link kernels to framework ops (PyTorch profiler traces)")
        table = result.ops
    if args.format == "csv":
        write_frame(table, "csv", raw_csv=wants_raw_csv(args))
    elif args.format == "json":
        doc = compare_document(result, a, b)

        doc["mfu"] = records(analysis.mfu.compare_traces_mfu(a, b))
        if base is not None:
            doc["baseline"] = {**base.summary(), "unmatched_a": base.unmatched_a, "unmatched_b": base.unmatched_b}
        dump_json(doc)
    else:
        _print_compare(result, args.by)

        print("\n" + compare_mfu_text(analysis.mfu.compare_traces_mfu(a, b)))
        if base is not None:
            print()
            _baseline_summary(base)
    if limit is not None and result.slower_pct > limit:
        what = (f"per step (median step {format_ns(result.step_median_b_ns)} vs {format_ns(result.step_median_a_ns)})"
                if result.headline_basis == "median step" else
                f"in kernel time ({format_ns(result.total_b_ns)} vs {format_ns(result.total_a_ns)})")
        print(f"kviewer: B is {result.slower_pct:.2f}% slower than A {what}, more than the {limit:g}% allowed", file=sys.stderr)
        return EXIT_SLOWER
    return EXIT_OK


def _baseline(a: "Trace", b: "Trace", required: bool) -> "Baseline | None":
    """The per-metric baseline when both files are counter reports (None otherwise)."""
    if not (analysis.attach.is_counter_report(a) and analysis.attach.is_counter_report(b) and len(a.metrics) and len(b.metrics)):
        if required:
            raise UserError("--by metric compares two counter reports (Nsight Compute, rocprof --pmc), metric by metric")
        return None

    return analysis.ncu_baseline.baseline(a, b)


def _baseline_summary(base: "Baseline") -> None:
    s = base.summary()
    print(f"per-kernel metrics (baseline): {s['matched']} of {s['kernels_a']} kernels of A matched "
          f"({s['kernels_b']} in B); {s['metrics_compared']:,} metric values compared, {s['metrics_differing']:,} differ, "
          f"{s['metrics_only_one_side']:,} in one report only")
    if base.unmatched_a or base.unmatched_b:
        print(f"unmatched kernels: {len(base.unmatched_a)} in A, {len(base.unmatched_b)} in B")


def _print_baseline(base: "Baseline", fmt: str, raw_csv: bool = False) -> int:
    """``compare --by metric``: every metric of every matched kernel pair, side by side."""
    rows = base.rows
    if fmt in ("csv", "json"):
        write_frame(rows, fmt, raw_csv=raw_csv)
        return EXIT_OK
    _baseline_summary(base)
    diff = rows[~rows["same"] & rows["a"].notna() & rows["b"].notna()]
    if len(diff):
        print()
        order = diff["delta_pct"].abs().sort_values(ascending=False, na_position="last").index
        print(human_table(diff.loc[order][["kernel_a", "kernel_b", "name", "metric", "unit", "a", "b", "delta", "delta_pct"]].head(50), float_digits=3))
    else:
        print("every metric of every matched kernel is the same in both (deltas zero)")
    return EXIT_OK


def _print_compare(result: "CompareResult", by: str) -> None:
    print(say(f"A: {result.label_a}"))
    print(say(f"B: {result.label_b}"))
    print(f"matched by: {'name, launch size and launching op' if result.use_ops else 'name and launch size'}")
    print()
    totals = result.totals[["metric", "a", "b", "delta", "delta_pct"]].copy()
    for col in ("a", "b", "delta"):
        # ns and counts: whole numbers read best; unknown (a summary file's span) stays unknown
        totals[col] = ["—" if v != v else f"{int(round(v)):,}" for v in totals[col].to_numpy(dtype=float)]
    totals["delta_pct"] = ["—" if v != v else f"{v:.1f}" for v in totals["delta_pct"].to_numpy(dtype=float)]
    print(human_table(totals, numeric=[False, True, True, True, True]))
    if len(result.steps):
        print()
        print(f"steps (GPU span of the kernels launched in each step; B aligned to A by {result.align_offset_ns} ns at the {result.align_basis}):")
        print(human_table(result.steps[["position", "step_a", "step_b", "gpu_span_a", "gpu_span_b", "delta_ns", "delta_pct"]]))
    print()
    if by == "op" and result.ops is not None:
        print(human_table(result.ops[["op"] + COMPARE_TABLE_COLUMNS[1:-1]]))
    else:
        cols = COMPARE_TABLE_COLUMNS + ["precision_a", "precision_b"]
        if result.per_step:
            # per step first (the status is from it), the totals beside
            cols = ["name", "status", "launches_per_step_a", "launches_per_step_b", "step_a_ns", "step_b_ns", "delta_step_pct",
                    "total_a_ns", "total_b_ns", "delta_pct", "matched_by", "precision_a", "precision_b"]
        print(human_table(result.groups[cols]))
    if len(result.fusion):
        print()
        print("fusion sets (work A does in separate kernels, and the fused kernels B runs for it):")
        print(human_table(result.fusion[["fusion_set", "total_a_ns", "total_b_ns", "delta_ns", "delta_pct", "rows_b"]]))
    print()
    for note in result.notes:
        print(say(note))
    if result.headline_basis == "median step":
        print(f"median step: A {format_ns(result.step_median_a_ns)}, B {format_ns(result.step_median_b_ns)} ({result.slower_pct:+.2f}%)")
    print(f"total kernel time: A {format_ns(result.total_a_ns)}, B {format_ns(result.total_b_ns)}, "
          f"delta {format_ns(result.delta_ns)} ({result.total_slower_pct:+.2f}%)")

