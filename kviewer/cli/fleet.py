"""``kviewer fleet PATH ... -o OUT``: per-rank and across-run analysis of many traces, on Dask (a thin
shell over :mod:`kviewer.fleet.command`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kviewer import fleet
from kviewer.errors import UserError

if TYPE_CHECKING:
    import kviewer.fleet.command
    import kviewer.fleet.engine

FLEET_HELP = """Step times, kernel groups, communication and idle time per rank and across ranks, the
stragglers and why, and kernel-group time across runs, over folders or globs of rank traces
(any format kviewer reads; local paths or fsspec URLs such as s3://). Files are parsed on Dask
workers and only per-file summaries travel. Writes into the folder OUT: fleet.html (or .md), one
CSV per table, fleet.json and fleet.sqlite.

Exit status: 0; 1 with --fail-if-slower PCT when a run's kernel time per rank exceeds the
baseline's by more than PCT percent; 2 on a user error."""


def register(sub: Any) -> None:
    fp = sub.add_parser("fleet", help="per-rank and across-run analysis of many traces, on Dask", description=FLEET_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fp.add_argument("paths", metavar="PATH", nargs="+", help="rank files, folders of rank files (one run each), folders of runs, or globs")
    fp.add_argument("-o", "--output", metavar="OUT", required=True, help="output folder (created)")
    fp.add_argument("--scheduler", metavar="ADDRESS",
                    help="an existing Dask cluster (tcp://host:8786); default: in this process for a small fleet, else a local "
                         "cluster, decided from the number and size of the files (stderr says which and why); none: in this process, no Dask")
    fp.add_argument("--workers", type=int, metavar="N", help="worker processes of a local cluster, used whatever the fleet's size (default: one per core, when the fleet is big enough)")
    fp.add_argument("--baseline", metavar="RUN", help="the run the others are compared to (its folder or folder name; default: the first)")
    fp.add_argument("--fail-if-slower", type=float, metavar="PCT", default=None,
                    help="exit with status 1 when a run's kernel time per rank is more than PCT percent above the baseline's (for CI)")
    fp.add_argument("--report", choices=["html", "md", "none"], default="html", help="report format (default: %(default)s)")
    fp.add_argument("--no-pictures", action="store_true", help="no pictures in the report")
    fp.add_argument("-q", "--quiet", action="store_true", help="no progress")
    fp.set_defaults(func=cmd_fleet)


def cmd_fleet(args: argparse.Namespace) -> int:
    try:
        return fleet.command.run_fleet(args)
    except fleet.engine.FleetError as exc:
        raise UserError(str(exc)) from exc
