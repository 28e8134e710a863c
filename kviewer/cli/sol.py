"""``kviewer sol FILE``: per-kernel speed of light (FLOPs, bytes, T_SOL, SOL%, bound)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis, session
from kviewer.cli.common import EXIT_OK, add_command, add_ncu_options, attach_report, load_for, print_warnings, wants_raw_csv, write_frame
from kviewer.errors import AnalysisError, UserError
from kviewer.session.analyses import SolInfo

if TYPE_CHECKING:
    import kviewer.analysis.sol
    import kviewer.io.cache
    import kviewer.session.analysis_cache
    from kviewer.core import Trace
    from kviewer.io.registry import Wanted

DEVICE_HELP = "the GPU (id, name or reported spelling) when the trace does not say or to override it"


def register(sub: Any) -> None:
    sol = add_command(sub, "sol", "per-kernel speed of light (FLOPs, bytes, T_SOL, SOL%, bound)", cmd_sol, ("table", "csv", "json"))
    sol.add_argument("--device", metavar="NAME", help=DEVICE_HELP)
    add_ncu_options(sol)


def trace_with_kernels(args: argparse.Namespace, tables: "Wanted | None" = None) -> "Trace":
    """FILE loaded (with ``--ncu`` attached; ``tables``: what the command reads, without
    ``--ncu``); a user error when it has no kernels."""
    trace = attach_report(load_for(args, args.file, tables=None if getattr(args, "ncu", None) else tables), args)
    if not len(trace.kernels):
        if trace.stats_only:  # a per-name summary: no launch shapes or ops to model FLOPs/bytes from
            raise UserError(f"{args.file}: a kernel summary without kernels (no shapes, no counters); {trace.meta.timeline_needs}")
        raise UserError(f"{args.file}: the trace has no kernels")
    return trace


def cmd_sol(args: argparse.Namespace) -> int:
    """Per-kernel speed of light: FLOPs, bytes (measured or modelled), T_SOL, SOL%, bound."""
    # the window's analysis cache answers for the file as loaded on its own GPU (its identity, taken
    # by the load before it read the file; None with the cache off)
    own = args.device is None and not getattr(args, "ncu", None) and not args.no_cache
    # the file's identity before anything reads it: a file seen before (by sol, the window or an
    # export) answers from the cache without being loaded, its load warnings said all the same
    sid = session.analysis_cache.identity(args.file) if own else None
    stored = session.analysis_cache.sol_of_file(sid, for_output=True)
    if stored is not None and stored[0].result is not None:
        print_warnings(args.file, stored[1])
        result = stored[0].result
    else:
        result = _computed(args, own, sid)
    warn_exceeds(result.warnings())
    df = result.table.rename(columns={"start": "start_ns", "dur": "dur_ns"})
    if args.format == "table":
        cols = ["short_name", "dur_ns", "kind", "precision", "flops", "flops_source", "bytes", "bytes_source",
                "t_sol_ns", "sol_pct", "sol_status", "bound", "ncu_sm_pct", "ncu_mem_pct", "note"]
        view = df[cols].copy()
        view["short_name"] = view["short_name"].str.slice(0, 60)
        write_frame(view, "table")
    else:
        write_frame(df, args.format, raw_csv=wants_raw_csv(args))
    return EXIT_OK


def _computed(args: argparse.Namespace, own: bool, sid: "kviewer.io.cache.SourceId | None") -> "kviewer.analysis.sol.SolResult":
    """FILE loaded (the part the speed of light reads) and its speed of light, stored for the
    file on its own GPU (``own``). A part read from an export in place is not in the trace cache
    and has no identity of its own: ``sid``, taken before the load, names it, and its load
    warnings are kept beside the result. The part's speed of light is the whole trace's
    (tests/analysis/test_sol_vectorised.py), so the window reopening the file reads it too."""
    trace = trace_with_kernels(args, analysis.sol.SOL_READS)
    source = (trace.meta.source_id or sid) if own else None
    cached = session.analysis_cache.get(source, trace)
    if cached is not None and cached.result is not None:
        result, stored = cached.result, True
    else:
        try:
            result = analysis.sol.sol_result(trace, device=args.device)
        except AnalysisError as exc:
            raise UserError(str(exc)) from exc
        stored = session.analysis_cache.put(source, trace, SolInfo(result))
    if stored and trace.meta.source_id is None:
        # also when the result was stored before without them: the next run needs no load
        session.analysis_cache.put_load_warnings(source, trace)
    return result


def warn_exceeds(bad: dict[str, int]) -> None:
    """One stderr line counting the kernels whose SOL% would exceed 100 (a model or counter error),
    from :meth:`kviewer.analysis.sol.SolResult.warnings`."""
    if bad:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(bad.items()))
        print(f"warning: {sum(bad.values())} kernel(s) exceed peak: model or counter error, SOL% not shown ({why})", file=sys.stderr)
