"""``kviewer fleet``: find the files, summarise them on Dask, analyse, write (no Qt)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kviewer import fleet
from kviewer.fleet.engine import FleetError, TerminalFleetProgress, choose_here, expand, summarize_here, summarize_on_dask

if TYPE_CHECKING:
    import kviewer.fleet.analyze
    import kviewer.fleet.write

#: ``--fail-if-slower``: a run is slower than the baseline by more than allowed
EXIT_SLOWER = 1


def run_fleet(args: argparse.Namespace) -> int:
    """Raises FleetError for what the user can fix (the CLI prints it, exit 2)."""
    limit = args.fail_if_slower
    if limit is not None and (math.isnan(limit) or math.isinf(limit) or limit < 0):
        raise FleetError(f"--fail-if-slower: expected a percentage >= 0, got {limit}")
    if args.workers is not None and args.workers < 1:
        raise FleetError(f"--workers: expected a number of workers >= 1, got {args.workers}")
    if args.workers is not None and args.scheduler:
        raise FleetError("--workers sizes the local cluster; an existing cluster (--scheduler) has its own workers")
    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise FleetError(f"{out}: -o names the output folder, and this is a file")
    if not out.parent.is_dir():
        raise FleetError(f"{out.parent}: no such folder for the output")
    notes: list[str] = []
    files, runs = expand(args.paths, notes)
    for note in notes:
        print(f"kviewer: warning: skipped {note}", file=sys.stderr)
    baseline = None
    if args.baseline:
        want = args.baseline.rstrip("/")
        matches = [r for r in runs if r.rstrip("/") == want or os.path.basename(r.rstrip("/")) == want]
        if not matches:
            raise FleetError(f"--baseline {args.baseline}: not one of the runs ({', '.join(runs[:5])}{' …' if len(runs) > 5 else ''})")
        baseline = matches[0]
    progress = None if args.quiet else TerminalFleetProgress()
    here = args.scheduler == "none"  # in this process, without Dask (debugging, tests)
    if args.scheduler is None and args.workers is None:
        # small fleets: a local cluster costs more to start than the work (decided on the files)
        here, why = choose_here(files)
        print(f"kviewer: fleet: {why}", file=sys.stderr)  # a decision, said like the warnings (also with -q)
    if here:
        summaries = summarize_here(files, progress)
    else:
        summaries = summarize_on_dask(files, args.scheduler, args.workers, progress)
    for s in summaries:
        if not s.ok:
            print(f"kviewer: warning: skipped {s.path}: {s.error}", file=sys.stderr)
    if not any(s.ok for s in summaries):
        raise FleetError(f"none of the {len(summaries)} files could be read; first: {summaries[0].error}")
    result = fleet.analyze.analyze(summaries, runs, baseline)
    for w in result.warnings:
        print(f"kviewer: warning: {w}", file=sys.stderr)
    try:
        written = fleet.write.write_all(result, out, args.report, pictures=not args.no_pictures)
    except OSError as exc:
        raise FleetError(f"{out}: cannot write the fleet output: {exc.strerror or exc}") from exc
    for p in written:
        print(p)
    for row in result.runs.itertuples():
        if row.straggler is not None and row.straggler is not __import__("pandas").NA:
            reason = str(row.straggler_reason or "no single cause")
            print(f"{row.run!s}: straggler rank {row.straggler!s} ({reason})", file=sys.stderr)
    if limit is not None:
        worst = result.slowest_run()
        if worst is not None and worst[1] > limit:
            print(f"kviewer: run {worst[0]} is {worst[1]:.2f}% slower than the baseline {result.baseline} in kernel time per rank, "
                  f"more than the {limit:g}% allowed", file=sys.stderr)
            return EXIT_SLOWER
    return 0
