"""``kviewer info FILE [FILE ...]``: detected format, tool and version, devices, table sizes; with a
timeline and a counter report, how the report's kernels match the timeline's."""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli.common import EXIT_OK, add_command, dump_json, format_ns, load_for, say
from kviewer.session.documents import trace_info
from kviewer.session.format import format_time

if TYPE_CHECKING:
    import kviewer.analysis.attach
    from kviewer.core import Trace


def register(sub: Any) -> None:
    add_command(
        sub,
        "info",
        "detected format, tool and version, devices, table sizes; given a timeline trace and an Nsight Compute "
        "report, how many report kernels match timeline kernels",
        cmd_info,
        ("table", "json"),
        several=True,
    )


def cmd_info(args: argparse.Namespace) -> int:
    files = args.file if isinstance(args.file, list) else [args.file]
    traces = [load_for(args, f) for f in files]
    if len(traces) > 1:
        return info_several(traces, args.format)
    return print_info(traces[0], args.format)


def info_several(traces: "list[Trace]", fmt: str) -> int:
    """Each trace's info, then how the kernels of each Nsight Compute report match each timeline."""
    reports = [t for t in traces if analysis.attach.is_counter_report(t)]
    timelines = [t for t in traces if analysis.attach.is_timeline(t)]
    matches = []
    for tl in timelines:
        for nc in reports:
            res = analysis.attach.attach_counters(tl, nc)
            matches.append((tl, nc, res))
    if fmt == "json":
        out = {
            "files": [trace_info(t) for t in traces],
            "ncu_matches": [
                {"timeline": tl.meta.path, "ncu": nc.meta.path, "matched": r.matched, "ncu_kernels": r.match.ncu_total,
                 "window_start": r.match.start, "notes": r.match.notes, "inherited": r.inherited,
                 "inherited_from": [dataclasses.asdict(x) for x in r.inheritance.by_step],
                 "refused": [dataclasses.asdict(x) for x in r.inheritance.refused]}
                for tl, nc, r in matches
            ],
        }  # fmt: skip
        dump_json(out)
        return EXIT_OK
    for i, trace in enumerate(traces):
        if i:
            print()
        print_info(trace, "table")
    for tl, nc, rep in matches:
        print()
        lines = analysis.attach.describe(rep)
        print(say(f"{lines[0]} ({os.path.basename(nc.meta.path)} onto {os.path.basename(tl.meta.path)})"))
        for line in lines[1:]:
            print(say(line))
    return EXIT_OK


def print_info(trace: "Trace", fmt: str) -> int:
    info = trace_info(trace)
    if fmt == "json":
        dump_json(info)
        return EXIT_OK
    m = trace.meta
    print(say(f"file:     {m.path}"))
    print(say(f"format:   {m.format_label or m.source_format}"))
    tool = " ".join(x for x in (m.tool, m.tool_version) if x)
    print(say(f"tool:     {tool or 'unknown'}"))
    if m.origin_ns is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(m.origin_ns / 1e9))
        print(say(f"origin:   {stamp} UTC ({m.origin_ns} ns since the epoch)"))
    span = trace.span_ns()
    if span:
        # the first and last event on the one clock every surface uses
        print(say(f"span:     {format_ns(span[1] - span[0])}, {format_time(span[0])} to {format_time(span[1])} {m.clock}"))
    if m.ranks:
        print(say(f"ranks:    {', '.join(str(r) for r in m.ranks)}"))
    for key, value in m.extra.items():
        print(say(f"{key + ':':<9} {value}"))
    devices = info["devices"]
    print(say(f"devices:  {len(devices)}"))
    for d in devices:
        parts = [str(d.get("name") or "unknown device")]
        if d.get("architecture"):
            parts.append(str(d["architecture"]))
        if d.get("compute_capability"):
            parts.append(f"CC {d['compute_capability']}")
        if d.get("sm_count", -1) > 0:
            parts.append(f"{d['sm_count']} {'CUs' if d.get('vendor') == 'AMD' else 'SMs'}")
        if d.get("memory_bytes", -1) > 0:
            parts.append(f"{d['memory_bytes'] / 1024**3:.1f} GiB")
        print(say(f"  [{d['id']}] " + ", ".join(parts)))
    if m.timeline_needs:
        print(say(f"timeline: {m.timeline_needs}"))
    print("tables:")
    for name, n in trace.sizes().items():
        print(say(f"  {name:<14} {n:>10,}"))
    for w in m.warnings:
        print(say(f"warning:  {w.message}"))
    return EXIT_OK
