"""``kviewer calltree FILE``: python call trees (with_stack=True) as folded stacks or JSON."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_calltree(args: argparse.Namespace) -> int:
    from kviewer.analysis.calltree import CALLTREE_READS, call_tree, folded, tree_json
    from kviewer.cli.common import EXIT_OK, dump_json, load_for
    from kviewer.core.text import display_text

    tree = call_tree(load_for(args, args.file, tables=CALLTREE_READS))
    if not len(tree):
        print("kviewer: no python frames in this trace (PyTorch profiler: with_stack=True)", file=sys.stderr)
    if args.format == "json":
        dump_json(tree_json(tree, args.max_depth))
    else:
        for stack, self_ns in folded(tree, per_thread=not args.merge_threads):
            # one line per stack: a newline in a frame name would break the format
            sys.stdout.write(f"{display_text(stack)} {self_ns}\n")
    return EXIT_OK


def register(sub: Any) -> None:
    text = ("python call tree per thread from python_function events (PyTorch with_stack=True): folded stacks "
            "(flamegraph.pl, speedscope, inferno; values are self time in ns) or JSON (inclusive = the event's duration)")
    from kviewer.cli.common import add_command

    sp = add_command(sub, "calltree", text, cmd_calltree, ("folded", "json"))
    sp.add_argument("--merge-threads", action="store_true", help="folded: one flame graph for all threads (no thread frame)")
    sp.add_argument("--max-depth", type=int, default=None, metavar="N", help="json: frames deeper than N without children")
