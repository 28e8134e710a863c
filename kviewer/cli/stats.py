"""``kviewer stats FILE -r REPORTS``: the ``nsys stats`` reports for any trace, with the columns,
units and rounding of ``nsys stats --format csv``."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from kviewer import analysis
from kviewer.cli.common import (
    EXIT_OK,
    add_command,
    human_table,
    load_for,
    output_dir_exists,
    say,
    wants_raw_csv,
    write_frame,
)
from kviewer.core.text import csv_cell, map_text_columns
from kviewer.errors import ReportUnavailable, UserError
from kviewer.session.format import UNKNOWN, UNKNOWN_CSV

if TYPE_CHECKING:
    import pandas as pd

    import kviewer.analysis.stats


def register(sub: Any) -> None:
    st = add_command(
        sub,
        "stats",
        "nsys stats reports for any trace, with the columns, units and rounding of nsys stats --format csv: "
        "cuda_gpu_kern_sum, cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, cuda_api_sum (hip_api_sum for AMD), "
        "nvtx_sum (user annotations for PyTorch and rocprof), cuda_gpu_trace, osrt_sum",
        cmd_stats,
        ("table", "csv", "json"),
        format_flags=("--format", "-f"),  # nsys stats's spellings, so scripts can swap the command
    )
    st.add_argument("--report", "-r", required=True, metavar="R[,R...]", help="the reports, comma separated")
    st.add_argument("--output", "-o", metavar="PREFIX",
                    help="write each report to PREFIX_REPORT.csv (or .json, .txt) as nsys stats --output does, instead of stdout")


def cmd_stats(args: argparse.Namespace) -> int:
    """``nsys stats`` reports for any trace: the same columns, order, units and rounding."""
    names = [n.strip() for n in args.report.split(",") if n.strip()]
    unknown = [n for n in names if n not in analysis.stats.REPORTS]
    if unknown or not names:
        raise UserError(f"unknown report {', '.join(unknown) or repr(args.report)}; the reports are: {', '.join(analysis.stats.REPORTS)}")
    if args.output:
        output_dir_exists(args.output)
    trace = load_for(args, args.file, tables=analysis.stats.report_reads(names))  # only what the reports read
    unavailable = []
    for i, name in enumerate(names):
        try:
            df = analysis.stats.run_report(trace, name)
        except ReportUnavailable as exc:
            unavailable.append(exc)
            continue
        if args.output:
            path = f"{args.output}_{name}.{'json' if args.format == 'json' else 'csv' if args.format == 'csv' else 'txt'}"
            with open(path, "w", encoding="utf-8", newline="") as fh:
                write_report(df, analysis.stats.REPORTS[name], args.format, fh, wants_raw_csv(args))
            continue
        if len(names) > 1:  # as nsys prints several reports
            sys.stdout.write(f"{chr(10) if i else ''} ** {analysis.stats.REPORTS[name].title} ({name}):\n\n")
        write_report(df, analysis.stats.REPORTS[name], args.format, sys.stdout, wants_raw_csv(args))
    if len(unavailable) == len(names) == 1:
        raise UserError(str(unavailable[0]))  # the one report asked for: an error, one line
    for problem in unavailable:
        # as nsys stats: a report the file cannot give is skipped with one line, the others are written
        print(say(f"SKIPPED: {problem}"), file=sys.stderr)
    if len(unavailable) == len(names):
        raise UserError(f"{trace.meta.path}: none of the {len(names)} reports could be made from it")
    return EXIT_OK


def write_report(df: "pd.DataFrame", report: Any, fmt: str, out: Any, raw_csv: bool = False) -> None:
    """A report's rows: each number with the decimals nsys prints (csv, table) or as a number (json);
    unknown values empty in CSV, null in JSON and "—" in the table; ``raw_csv``: text cells
    without the spreadsheet-formula guard."""
    if fmt == "json":
        write_frame(df, "json", out)
        return
    import numpy as np
    import pandas as pd

    cells: dict[str, Any] = {}
    unknown = UNKNOWN_CSV if fmt == "csv" else UNKNOWN
    for col in report.columns:
        series = df[col.header]
        if col.text:  # names repeat: categorical, so the CSV guard maps each distinct name once
            cells[col.header] = pd.Categorical(series.fillna("").astype(str).to_numpy(dtype=object))
            continue
        if col.decimals is None:  # integers, never through float64 (epoch nanoseconds need 63 bits)
            known = series.notna().to_numpy()
            if pd.api.types.is_integer_dtype(series.dtype):  # numpy or nullable integers: no Python object per value
                ints = series.to_numpy(dtype=np.int64, na_value=0)
            else:
                ints = np.zeros(len(series), dtype=np.int64)
                ints[known] = series[known].astype(np.int64).to_numpy()
            if fmt == "csv":  # numbers to_csv writes itself (C), unknown ones empty
                cells[col.header] = pd.arrays.IntegerArray(ints, ~known)
            else:
                cells[col.header] = _texts(pd.arrays.IntegerArray(ints, ~known), lambda v: unknown if v is pd.NA else f"{v:,d}")
            continue
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)  # None -> NaN
        spec = f"{{:{',' if fmt != 'csv' else ''}.{col.decimals}f}}"
        cells[col.header] = _texts(values, lambda v: unknown if v != v else spec.format(v))
    frame = pd.DataFrame(cells, columns=report.headers)
    if fmt == "csv":
        # only the text columns can hold a formula (the numbers are formatted here)
        text = [c.header for c in report.columns if c.text]
        if not raw_csv:
            frame[text] = map_text_columns(frame[text], csv_cell)
        write_frame(frame, "csv", out, raw_csv=True)
    else:
        out.write(human_table(frame, numeric=[not c.text for c in report.columns], max_name=120) + "\n")


def _texts(values: Any, fmt: Any) -> Any:
    """``[fmt(v) for v in values]`` as a categorical, each distinct value formatted once (a GPU
    trace repeats its few sizes and shapes over 700k rows)."""
    import numpy as np
    import pandas as pd

    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    texts, at = pd.factorize(np.asarray([fmt(v) for v in uniques.tolist()], dtype=object))  # two numbers can print alike
    return pd.Categorical.from_codes(texts[codes], categories=pd.Index(at))
