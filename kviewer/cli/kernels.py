"""``kviewer kernels FILE``: one row per kernel in the unified schema (optionally with the counters
of an Nsight Compute report attached)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kviewer.cli.common import EXIT_OK, add_command, add_ncu_options, attach_report, load_for, wants_raw_csv, write_frame

if TYPE_CHECKING:
    import pandas as pd

    from kviewer.core import Trace

#: the kernels CSV begins with these, then the rest of the schema
KERNEL_LEAD = {"name": "name", "start": "start_ns", "end": "end_ns", "dur": "dur_ns", "device": "device", "stream": "stream"}


def register(sub: Any) -> None:
    kp = add_command(sub, "kernels", "one row per kernel in the unified schema", cmd_kernels, ("table", "csv", "json"))
    add_ncu_options(kp)


def kernels_frame(trace: "Trace") -> "pd.DataFrame":
    k = trace.kernels
    rest = [c for c in k.columns if c not in KERNEL_LEAD]
    df = k[list(KERNEL_LEAD) + rest].rename(columns=KERNEL_LEAD)
    df["name"] = df["name"].astype(str)
    df["short_name"] = df["short_name"].astype(str)
    return df


def cmd_kernels(args: argparse.Namespace) -> int:
    trace = attach_report(load_for(args, args.file), args)
    df = kernels_frame(trace)
    if args.format == "table":
        cols = ["name", "start_ns", "dur_ns", "device", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        if (df["counters"].astype(str) != "").any():  # a counter report attached (--ncu)
            cols.append("counters")
        write_frame(df[cols], "table")
    else:
        write_frame(df, args.format, raw_csv=wants_raw_csv(args))
    return EXIT_OK
