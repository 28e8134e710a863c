"""``kviewer graphs FILE``: CUDA / HIP graphs, their launches and kernels (kviewer.analysis.graphs)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def cmd_graphs(args: argparse.Namespace) -> int:
    from kviewer.analysis.graphs import GRAPHS_READS, graph_summary, graphs_frame
    from kviewer.cli.common import EXIT_OK, dump_json, load_for, wants_raw_csv
    from kviewer.cli.memory import write_table

    result = graph_summary(load_for(args, args.file, tables=GRAPHS_READS))
    if args.format == "json":
        dump_json(result.to_json())
    else:
        write_table(graphs_frame(result), args.format, wants_raw_csv(args))
        if args.format == "table" and not result.graphs:
            print("no CUDA/HIP graph launches in this trace", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    text = ("CUDA/HIP graphs: launches, kernels per launch, median GPU time per launch and CPU launch time, "
            "the kernels each graph ran")
    from kviewer.cli.common import add_command

    sp = add_command(sub, "graphs", text, cmd_graphs, ("table", "csv", "json"))
