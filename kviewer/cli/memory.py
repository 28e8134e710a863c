"""``kviewer memory FILE``: device memory peaks and what was live at them (kviewer.analysis.memory)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli import common
from kviewer.cli.common import EXIT_OK, add_command, dump_json, human_table, wants_raw_csv, write_frame

if TYPE_CHECKING:
    import kviewer.analysis.memory


def write_table(df: Any, fmt: str, raw_csv: bool = False) -> None:
    """``write_frame``, with unknown cells (None) printed "—" in the human table (empty in CSV, null in JSON);
    ``raw_csv``: ``--raw-csv`` (CSV cells exactly as in the trace)."""
    if fmt != "table":
        write_frame(df, fmt, raw_csv=raw_csv)
        return
    import pandas as pd

    numeric = [c != "device_type" and c != "level" and c != "source" and not c.startswith("top_op") for c in df.columns]

    def cell(v: Any) -> Any:
        if v is None or (isinstance(v, float) and v != v):
            return "—"
        if isinstance(v, float):
            return f"{v:,.1f}"
        return f"{v:,}" if isinstance(v, int) else v

    text = pd.DataFrame({c: [cell(v) for v in df[c].astype(object).tolist()] for c in df.columns}, columns=list(df.columns))
    sys.stdout.write(human_table(text, numeric=numeric) + "\n")


def cmd_memory(args: argparse.Namespace) -> int:
    result = analysis.memory.memory_summary(common.load_for(args, args.file, tables=analysis.memory.MEMORY_READS), include_host=args.host)
    if args.format == "json":
        dump_json(result.to_json())
    else:
        write_table(analysis.memory.memory_frame(result), args.format, wants_raw_csv(args))
        if args.format == "table" and not result.devices:
            print("no memory events in this trace (PyTorch: profile_memory=True; Nsight Systems: --cuda-memory-usage=true)",
                  file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    text = ("device memory: peak allocated and reserved per device, when, and the live allocations at the peak by the "
            "op that made them (PyTorch profile_memory=True; Nsight Systems --cuda-memory-usage=true)")

    sp = add_command(sub, "memory", text, cmd_memory, ("table", "csv", "json"))
    sp.add_argument("--host", action="store_true", help="also host (CPU) memory")
