"""``kviewer graphs FILE``: CUDA / HIP graphs, their launches and kernels (kviewer.analysis.graphs)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli import common
from kviewer.cli.common import EXIT_OK, add_command, dump_json, wants_raw_csv
from kviewer.cli.memory import write_table

if TYPE_CHECKING:
    import kviewer.analysis.graphs


def cmd_graphs(args: argparse.Namespace) -> int:
    result = analysis.graphs.graph_summary(common.load_for(args, args.file, tables=analysis.graphs.GRAPHS_READS))
    if args.format == "json":
        dump_json(result.to_json())
    else:
        write_table(analysis.graphs.graphs_frame(result), args.format, wants_raw_csv(args))
        if args.format == "table" and not result.graphs:
            print("no CUDA/HIP graph launches in this trace", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    text = ("CUDA/HIP graphs: launches, kernels per launch, median GPU time per launch and CPU launch time, "
            "the kernels each graph ran")

    sp = add_command(sub, "graphs", text, cmd_graphs, ("table", "csv", "json"))
