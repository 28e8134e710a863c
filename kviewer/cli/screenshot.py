"""``kviewer screenshot FILE [FILE] -o OUT.png|svg``: a view rendered offscreen (Qt only inside this
command, offscreen when there is no display)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from kviewer.cli.common import (
    EXIT_OK,
    add_load_options,
    add_ncu_options,
    attach_pair,
    load_for,
    one_or_two,
    output_dir_exists,
    parse_size,
    parse_time_range,
)
from kviewer.errors import UserError
from kviewer.tempdir import deferred_interrupt

SCREENSHOT_VIEWS = ("window", "timeline", "table", "roofline", "compare")
SCREENSHOT_HELP = """\
Render a view offscreen (no display needed) and save it as PNG or SVG, chosen
by the suffix of OUT. Views: window (the whole desktop window), timeline,
table (the kernel table), roofline (one per file), compare (needs two files).

--range START:END sets the timeline's visible range, on the trace's own clock
as the timeline's axis, SQL and `kviewer info` show it (Nsight Systems: since
the session start): numbers are ns, or give a unit (ns, us, µs, ms, s):
1.5ms:3ms, 1000000:2000000, :2ms (from the first event).
Kernels are coloured by what bounds them when the GPU is recognised
(--device names it when the trace does not)."""



def register(sub: Any) -> None:
    sp = sub.add_parser("screenshot", help="a picture (PNG or SVG) of a view, rendered without a display",
                        description=SCREENSHOT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("file", metavar="FILE", nargs="+", help="one trace, or two (the second compared with the first)")
    sp.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.png or OUT.svg")
    sp.add_argument("--view", choices=SCREENSHOT_VIEWS, default="window", help="what to draw (default: %(default)s)")
    sp.add_argument("--size", metavar="WxH", default="1600x1000", help="size in pixels (default: %(default)s)")
    sp.add_argument("--range", metavar="START:END", help="the timeline's visible range, e.g. 1.5ms:3ms (default: everything)")
    sp.add_argument("--scale", type=int, choices=[1, 2], default=1, help="PNG pixels per view pixel (default: %(default)s)")
    sp.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say")
    add_load_options(sp)
    add_ncu_options(sp)
    sp.set_defaults(func=cmd_screenshot)


def cmd_screenshot(args: argparse.Namespace) -> int:
    """Build a view offscreen and save its picture."""
    one_or_two(args.file)
    suffix = os.path.splitext(args.output)[1].lower()
    if suffix not in (".png", ".svg"):
        raise UserError(f"{args.output}: the picture format comes from the suffix: use .png or .svg")
    output_dir_exists(args.output)
    size = parse_size(args.size)
    time_range = parse_time_range(args.range) if args.range else None
    if time_range is not None and args.view not in ("window", "timeline"):
        raise UserError(f"--range applies to --view window or timeline, not {args.view}")
    if args.view == "compare" and len(args.file) != 2:
        raise UserError("--view compare needs two files: the reference A and the report B compared with it")
    traces = attach_pair([load_for(args, f) for f in args.file], args)
    if args.view == "compare" and len(traces) != 2:
        raise UserError("--view compare needs two reports to compare; a timeline and a counter report are one trace (the report attached)")

    with deferred_interrupt() as stop:  # Ctrl+C must not land inside PySide's import or a Qt callback
        try:
            from kviewer.ui import headless
            from kviewer.ui.export import ExportError
        except ImportError as exc:
            raise UserError(f"screenshots need PySide6 and pyqtgraph: {exc}") from exc
        stop.check()
        try:
            out = headless.screenshot(args.view, traces, args.output, size, time_range, float(args.scale), args.device)
        except (headless.ViewError, ExportError) as exc:
            raise UserError(str(exc)) from exc
    print(out)
    return EXIT_OK

