"""``kviewer critpath FILE``: the critical path of every step and what it was spent on
(a thin shell over :func:`kviewer.analysis.critpath.critical_paths`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis, session
from kviewer.cli import common
from kviewer.cli.common import EXIT_OK, add_command, cache_choice, dump_json, format_ns, human_table, print_warnings, wants_raw_csv, write_frame
from kviewer.errors import AnalysisError, UserError

if TYPE_CHECKING:
    import kviewer.analysis.critpath
    import kviewer.session.analysis_cache
    import kviewer.session.graph_cache

HELP = ("the critical path of every step (ProfilerStep#N, an NVTX/annotation step range, --step NAME, else the whole "
        "trace) and each nanosecond of it attributed to gpu_kernel, memcpy, launch, cpu, sync, comm or idle")


def register(sub: Any) -> None:
    p = add_command(sub, "critpath", HELP, cmd_critpath, ("table", "csv", "json"))
    p.add_argument("--step", metavar="NAME", help="use the ranges of this name (a user annotation / NVTX range) as the steps")
    p.add_argument("--top", type=int, default=10, metavar="N", help="operations on the path listed per step (default: %(default)s)")


def cmd_critpath(args: argparse.Namespace) -> int:
    import pandas as pd

    if args.top < 0:
        raise UserError(f"--top: expected a number of rows >= 0, got {args.top}")
    # a file seen before (by critpath, whatif or the window): its paths from the analysis cache,
    # without loading the trace
    cached = cache_choice(args) is not False
    sid = session.analysis_cache.identity(args.file) if cached else None
    doc = session.graph_cache.get_critpath(sid, args.step) if cached else None
    if doc is not None:  # the file is not loaded: its load warnings from the cached trace
        print_warnings(args.file, session.analysis_cache.cached_warnings(sid) or [])
    else:
        doc = compute(args, cached)
    missing: dict[str, int] = doc.get("unlinked", {})
    if missing:
        what = ", ".join(f"{n} {name}" for name, n in sorted(missing.items()))
        print(f"warning: {sum(missing.values())} launch call(s) have no GPU work in the trace ({what}): their GPU time is "
              "missing from the paths (an nsys export made with --cuda-graph-trace=graph records a graph as one range; "
              "use --cuda-graph-trace=node)", file=sys.stderr)
    for note in doc.get("notes", []):  # collectives of several ranks that could not be matched: no edge drawn
        print(f"warning: {note}", file=sys.stderr)
    steps: list[dict[str, Any]] = doc["steps"]
    if args.format == "json":
        for s in steps:
            s["top"] = s["top"][: args.top]
        dump_json({"steps": steps, "step_source": doc["step_source"]})
        return EXIT_OK
    rows = [{"step": s["name"], "measured_ns": s["measured_ns"], "critical_path_ns": s["critical_path_ns"], **s["breakdown"]} for s in steps]
    df = pd.DataFrame(rows, columns=["step", "measured_ns", "critical_path_ns", *analysis.critpath.CLASSES])
    if args.format == "csv":
        write_frame(df, "csv", raw_csv=wants_raw_csv(args))
        return EXIT_OK
    view = df.copy()
    for c in analysis.critpath.CLASSES:
        view[c] = [f"{v / m * 100:.1f}%" if m > 0 else "—" for v, m in zip(df[c], df["critical_path_ns"])]
    view["measured_ns"] = [format_ns(v) for v in df["measured_ns"]]
    view["critical_path_ns"] = [format_ns(v) for v in df["critical_path_ns"]]
    view = view.rename(columns={"measured_ns": "measured", "critical_path_ns": "critical path"})
    write_frame(view, "table")
    print(f"steps from: {doc['step_source']}")
    # every step's top operations laid out as one table (one pass, the same column widths), printed
    # step by step
    tops = [t for s in steps for t in s["top"][: args.top]]
    lines: list[str] = []
    if tops:
        top = pd.DataFrame(tops)
        top["ns"] = [format_ns(v) for v in top["ns"]]
        top["pct"] = [f"{v:.1f}%" for v in top["pct"]]
        top = top.rename(columns={"ns": "time", "pct": "of step"})
        lines = human_table(top, numeric=[c in ("time", "of step", "rank") for c in top.columns]).split("\n")
    head, body = lines[:2], iter(lines[2:])
    for s in steps:
        if s.get("comm_wait"):
            waits = ", ".join(f"rank {w['rank']} {format_ns(w['ns'])}" for w in s["comm_wait"])
            print(f"\n{s['name']}: waiting in collectives for a later rank (off the path, which crosses to that rank): {waits}")
        if s.get("unlaunched_ns"):
            print(f"\n{s['name']}: {format_ns(s['unlaunched_ns'])} of its path is {analysis.critpath.UNLAUNCHED}")
        n = len(s["top"][: args.top])
        if n:
            print(f"\n{s['name']}: on the path")
            print("\n".join(head + [next(body) for _ in range(n)]))
    return EXIT_OK


def compute(args: argparse.Namespace, cached: bool) -> dict[str, Any]:
    """Load the trace and walk its critical paths (the graph from the analysis cache when it is
    there); the document is stored for the next run."""
    trace = common.load_for(args, args.file)
    try:
        base = session.graph_cache.graph_base(trace, args.step, use_cache=cached)
        result = analysis.critpath.critical_paths(trace, step=args.step, base=(base.graph, base.windows, base.source, base.measured))
    except AnalysisError as exc:
        raise UserError(str(exc)) from exc
    doc: dict[str, Any] = result.as_dict()
    doc["unlinked"] = result.unlinked_launches()
    doc["notes"] = [n.message for n in result.graph.notes]
    if cached:
        session.graph_cache.put_critpath(trace.meta.source_id, trace, args.step, doc)
    return doc
