"""``kviewer export FILE ... -o OUT.sqlite``: the files' unified model as one SQLite database
(see :mod:`kviewer.sqldb`)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

import kviewer
from kviewer import io as kio
from kviewer.cli.common import EXIT_OK, add_load_options, cache_choice, load_for
from kviewer.errors import UserError

if TYPE_CHECKING:
    import kviewer.sqldb


def register(sub: Any) -> None:
    ep = sub.add_parser(
        "export", help="write the files' unified model into a SQLite database (documented schema, one trace_id per file)",
        description="Write kernels, GPU ops, CPU slices, flows, devices, metrics, steps, speed of light and fusion "
        "candidates of every FILE into OUT.sqlite (trace_id 1, 2, ... in the order given), with views "
        "kernel_summary, nvtx_summary, memcpy_summary, kernel_launch_latency, gpu_idle_gaps and step_times.",
    )
    ep.add_argument("file", metavar="FILE", nargs="+")
    ep.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.sqlite (replaced when it exists)")
    ep.add_argument("--no-analysis", action="store_true", help="leave out the speed of light and fusion tables")
    add_load_options(ep)
    ep.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """The unified model of the files as one SQLite database (see kviewer/sqldb.py)."""
    if os.path.abspath(args.output) in {os.path.abspath(f) for f in args.file}:
        raise UserError(f"{args.output}: the output would overwrite an input file")
    analysis = not args.no_analysis
    try:
        # with the cache on, the database is built (or completed) in the cache `kviewer sql` keeps
        # and copied: a second export of the same files loads nothing
        done = (cache_choice(args) is not False and not kio.cache.cache_disabled()
                and kviewer.sqldb.export_files(args.file, args.output, lambda f, tables: load_for(args, f, tables=tables), analysis))
        if not done:
            kviewer.sqldb.export([load_for(args, f) for f in args.file], args.output, analysis=analysis)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write: {exc.strerror or exc}") from exc
    sizes = ", ".join(f"{os.path.basename(f)} as trace_id {i}" for i, f in enumerate(args.file, start=1))
    print(f"wrote {args.output}: {sizes}", file=sys.stderr)
    return EXIT_OK

