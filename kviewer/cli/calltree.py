"""``kviewer calltree FILE``: call trees (python frames of with_stack=True, or nsys CPU samples'
stacks) as folded stacks or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli import common
from kviewer.cli.common import EXIT_OK, add_command, dump_json
from kviewer.core.text import display_text

if TYPE_CHECKING:
    import kviewer.analysis.calltree


def cmd_calltree(args: argparse.Namespace) -> int:
    tree = analysis.calltree.call_tree(common.load_for(args, args.file, tables=analysis.calltree.CALLTREE_READS), source=args.source)
    if not len(tree):
        print("kviewer: no python frames (PyTorch profiler: with_stack=True) and no CPU samples with stacks "
              "(nsys profile --sample=cpu --backtrace=dwarf) in this trace", file=sys.stderr)
    if args.format == "json":
        dump_json(analysis.calltree.tree_json(tree, args.max_depth))
    else:
        for stack, self_ns in analysis.calltree.folded(tree, per_thread=not args.merge_threads):
            # one line per stack: a newline in a frame name would break the format
            sys.stdout.write(f"{display_text(stack)} {self_ns}\n")
    return EXIT_OK


def register(sub: Any) -> None:
    text = ("call tree per thread from python_function events (PyTorch with_stack=True) or from CPU samples' stacks "
            "(nsys --sample=cpu --backtrace=...): folded stacks (flamegraph.pl, speedscope, inferno; values are self "
            "time in ns) or JSON (inclusive = the event's duration; for samples, the samples times the thread's "
            "sampling interval, with the sample count)")

    sp = add_command(sub, "calltree", text, cmd_calltree, ("folded", "json"))
    sp.add_argument("--merge-threads", action="store_true", help="folded: one flame graph for all threads (no thread frame)")
    sp.add_argument("--max-depth", type=int, default=None, metavar="N", help="json: frames deeper than N without children")
    sp.add_argument("--source", choices=("auto", "events", "samples"), default="auto",
                    help="python frames (events), CPU samples' stacks (samples), or the frames when there are any, "
                         "else the samples (auto, the default)")
