"""``kviewer fusion FILE``: fusion candidates with estimated savings, ranked by total saving."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli.common import EXIT_OK, add_command, add_ncu_options, format_ns, wants_raw_csv, write_frame
from kviewer.cli.sol import DEVICE_HELP, trace_with_kernels
from kviewer.errors import AnalysisError, UserError

if TYPE_CHECKING:
    import kviewer.analysis.fusion


def register(sub: Any) -> None:
    fus = add_command(sub, "fusion", "fusion candidates with estimated savings", cmd_fusion, ("table", "csv", "json"))
    fus.add_argument("--device", metavar="NAME", help=DEVICE_HELP)
    add_ncu_options(fus)


def cmd_fusion(args: argparse.Namespace) -> int:
    """Fusion candidates with estimated savings, ranked by total saving."""
    trace = trace_with_kernels(args)
    try:
        result = analysis.fusion.fusion(trace, device=args.device)
    except AnalysisError as exc:
        raise UserError(str(exc)) from exc
    df = result.candidates
    # one instance's kernel ids (space separated) stand for the candidate in text formats
    df = df.assign(kernel_ids=[" ".join(str(i) for i in ids[0]) if len(ids) else "" for ids in df["kernel_ids"]])
    if args.format == "table":
        cols = ["rank", "kind", "chain", "count", "savings_ns", "savings_per_instance_ns", "gpu_time_pct", "measured_ns", "fused_est_ns", "remedy", "confidence"]
        write_frame(df[cols], "table")
        total = result.summary()
        if math.isnan(total["savings_ns"]):
            print(f"total estimated saving: — (no candidate with known sizes) of {format_ns(total['kernel_ns'])} kernel time")
        else:
            print(f"total estimated saving: {format_ns(total['savings_ns'])} of {format_ns(total['kernel_ns'])} kernel time ({total['savings_pct']:.1f}%)"
                  + (f"; {total['unknown']} candidate(s) without an estimate" if total["unknown"] else ""))
    else:
        write_frame(df, args.format, raw_csv=wants_raw_csv(args))
    return EXIT_OK
