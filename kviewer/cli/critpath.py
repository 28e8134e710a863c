"""``kviewer critpath FILE``: the critical path of every step and what it was spent on
(a thin shell over :func:`kviewer.analysis.critpath.critical_paths`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kviewer.errors import UserError

HELP = ("the critical path of every step (ProfilerStep#N, an NVTX/annotation step range, --step NAME, else the whole "
        "trace) and each nanosecond of it attributed to gpu_kernel, memcpy, launch, cpu, sync, comm or idle")


def register(sub: Any) -> None:
    from kviewer.cli.common import add_command

    p = add_command(sub, "critpath", HELP, cmd_critpath, ("table", "csv", "json"))
    p.add_argument("--step", metavar="NAME", help="use the ranges of this name (a user annotation / NVTX range) as the steps")
    p.add_argument("--top", type=int, default=10, metavar="N", help="operations on the path listed per step (default: %(default)s)")


def cmd_critpath(args: argparse.Namespace) -> int:
    import pandas as pd

    from kviewer.analysis.critpath import CLASSES, critical_paths
    from kviewer.cli.common import EXIT_OK, dump_json, format_ns, load_for, wants_raw_csv, write_frame
    from kviewer.errors import AnalysisError

    if args.top < 0:
        raise UserError(f"--top: expected a number of rows >= 0, got {args.top}")
    trace = load_for(args, args.file)
    try:
        result = critical_paths(trace, step=args.step)
    except AnalysisError as exc:
        raise UserError(str(exc)) from exc
    missing = result.unlinked_launches()
    if missing:
        what = ", ".join(f"{n} {name}" for name, n in sorted(missing.items()))
        print(f"warning: {sum(missing.values())} launch call(s) have no GPU work in the trace ({what}): their GPU time is "
              "missing from the paths (an nsys export made with --cuda-graph-trace=graph records a graph as one range; "
              "use --cuda-graph-trace=node)", file=sys.stderr)
    for note in result.graph.notes:  # collectives of several ranks that could not be matched: no edge drawn
        print(f"warning: {note.message}", file=sys.stderr)
    if args.format == "json":
        doc: dict[str, Any] = result.as_dict()
        for s in doc["steps"]:
            s["top"] = s["top"][: args.top]
        dump_json(doc)
        return EXIT_OK
    rows = [{"step": s.name, "measured_ns": s.measured_ns, "critical_path_ns": s.critical_path_ns, **s.breakdown} for s in result.steps]
    df = pd.DataFrame(rows, columns=["step", "measured_ns", "critical_path_ns", *CLASSES])
    if args.format == "csv":
        write_frame(df, "csv", raw_csv=wants_raw_csv(args))
        return EXIT_OK
    view = df.copy()
    for c in CLASSES:
        view[c] = [f"{v / m * 100:.1f}%" if m > 0 else "—" for v, m in zip(df[c], df["critical_path_ns"])]
    view["measured_ns"] = [format_ns(v) for v in df["measured_ns"]]
    view["critical_path_ns"] = [format_ns(v) for v in df["critical_path_ns"]]
    view = view.rename(columns={"measured_ns": "measured", "critical_path_ns": "critical path"})
    write_frame(view, "table")
    print(f"steps from: {result.step_source}")
    for s in result.steps:
        if s.comm_wait:
            waits = ", ".join(f"rank {r} {format_ns(ns)}" for r, ns in sorted(s.comm_wait.items()))
            print(f"\n{s.name}: waiting in collectives for a later rank (off the path, which crosses to that rank): {waits}")
        if args.top and s.top:
            print(f"\n{s.name}: on the path")
            top = pd.DataFrame(s.top[: args.top])
            top["ns"] = [format_ns(v) for v in top["ns"]]
            top["pct"] = [f"{v:.1f}%" for v in top["pct"]]
            write_frame(top.rename(columns={"ns": "time", "pct": "of step"}), "table")
    return EXIT_OK
