"""``kviewer report FILE [FILE] -o OUT.html|md``: a review document (tables, and pictures when Qt is
there) of one trace, or of two compared."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import kviewer
from kviewer.cli.common import EXIT_OK, add_load_options, add_ncu_options, attach_pair, load_for, one_or_two, output_dir_exists
from kviewer.errors import UserError
from kviewer.tempdir import deferred_interrupt

if TYPE_CHECKING:
    import kviewer.report


def register(sub: Any) -> None:
    rp = sub.add_parser(
        "report", help="a review report (HTML or Markdown) with tables and pictures",
        description="A review document: trace facts (tool, versions, GPU), top kernels, speed of light and roofline, "
        "fusion candidates, and the comparison when two files are given. OUT.html is self-contained (pictures "
        "embedded); OUT.md writes its pictures to OUT_files/ beside it.",
    )
    rp.add_argument("file", metavar="FILE", nargs="+", help="one trace, or two (the second compared with the first)")
    rp.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.html or OUT.md")
    rp.add_argument("--top", type=int, default=20, help="rows of each ranked table (default: %(default)s)")
    rp.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say")
    rp.add_argument("--no-pictures", action="store_true", help="tables only (no timeline or roofline pictures, no Qt needed)")
    rp.add_argument("--show-paths", action="store_true",
                    help="show each file's full path; by default a report names a file by its name alone, since a "
                    "shared report would otherwise show your folders and user name")
    add_load_options(rp)
    add_ncu_options(rp)
    rp.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    """A review document: facts, top kernels, SOL and roofline, fusion, comparison."""
    one_or_two(args.file)
    try:
        kviewer.report.report_format(args.output)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    output_dir_exists(args.output)
    if args.top < 1:
        raise UserError(f"--top: expected a positive number of rows, got {args.top}")
    traces = attach_pair([load_for(args, f) for f in args.file], args)
    report = kviewer.report.build_report(traces, device=args.device, top=args.top, pictures=not args.no_pictures, show_paths=args.show_paths)
    images: dict[str, bytes] = {}
    if not args.no_pictures:
        # Ctrl+C must not land inside PySide's import or a Qt callback (a segfault): noted, and acted
        # on between the pictures
        with deferred_interrupt() as stop:
            try:
                from kviewer.ui.report_pictures import render_pictures
            except ImportError as exc:
                print(f"kviewer: warning: no pictures in the report (PySide6 and pyqtgraph are needed): {exc}", file=sys.stderr)
            else:
                images = render_pictures(report, between=stop.check)
            stop.check()
    try:
        written = kviewer.report.write_report(report, args.output, images)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write the report: {exc.strerror or exc}") from exc
    for path in written:
        print(path)
    return EXIT_OK

