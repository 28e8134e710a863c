"""What every subcommand shares: loading with progress and Ctrl+C, writing tables, common options.

Options reach these helpers as arguments (``quiet``, ``use_cache``, ``raw_csv``), never through a
module global or an environment variable set at run time.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Literal, Sequence

from kviewer import analysis, core, io as kio, session
from kviewer.cli.signals import CtrlCCancels
from kviewer.core.text import csv_cell, display_text, map_text_columns
from kviewer.errors import LoadCancelled, LoadError, UserError
from kviewer.session.format import UNKNOWN, format_duration

if TYPE_CHECKING:  # heavy imports stay out of start-up
    import pandas as pd

    import kviewer.analysis.attach
    import kviewer.core.jsonout
    import kviewer.io
    import kviewer.io.registry
    import kviewer.session.filterexpr
    from kviewer.core import Diagnostic, Trace
    from kviewer.io.registry import Wanted

EXIT_OK = 0
EXIT_USER_ERROR = 2
#: ``kviewer compare --fail-if-slower``: B is slower than allowed (distinct from a user error)
EXIT_SLOWER = 1

RAW_CSV_HELP = ("write text cells exactly as in the trace; by default a cell that begins with = + - @ TAB or CR "
                "gets a leading ' so spreadsheets do not run it as a formula")
NO_CACHE_HELP = "neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)"


def say(text: object) -> str:
    """Text from a trace (names, paths, warnings) made safe for a terminal (core.text)."""
    return display_text(text)


def format_ns(ns: float | None) -> str:
    """A duration for a terminal line (the one formatter, :mod:`kviewer.session.format`)."""
    return format_duration(ns)


# ---------------------------------------------------------------------------------------------
# options


def add_command(
    sub: Any, name: str, help_: str, fn: Callable[[argparse.Namespace], int], formats: Sequence[str], several: bool = False,
    format_flags: Sequence[str] = ("--format",),
) -> argparse.ArgumentParser:
    """A subcommand over FILE (or FILE ...) with --format, -q, --no-cache (and --raw-csv when it writes CSV)."""
    # argparse %-formats help texts: a literal % (as in "SOL%") must be doubled
    sp: argparse.ArgumentParser = sub.add_parser(name, help=help_.replace("%", "%%"), description=help_)
    sp.add_argument("file", metavar="FILE", nargs="+" if several else None)
    sp.add_argument(*format_flags, dest="format", choices=list(formats), default=formats[0], help="output format (default: %(default)s)")
    add_load_options(sp)
    if "csv" in formats:
        sp.add_argument("--raw-csv", action="store_true", help=RAW_CSV_HELP)
    sp.set_defaults(func=fn)
    return sp


def add_load_options(sp: argparse.ArgumentParser, cache: bool = True) -> None:
    """``-q`` (no progress bar) and ``--no-cache``."""
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    if cache:
        sp.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)


def cache_choice(args: argparse.Namespace) -> bool | None:
    """``--no-cache`` as :func:`kviewer.io.load`'s ``use_cache`` (None: the default, which
    ``KVIEWER_NO_CACHE`` can still turn off)."""
    return False if getattr(args, "no_cache", False) else None


def wants_raw_csv(args: argparse.Namespace) -> bool:
    """``--raw-csv``: CSV cells exactly as in the trace."""
    return bool(getattr(args, "raw_csv", False))


# ---------------------------------------------------------------------------------------------
# loading


class TerminalProgress:
    """A one-line progress bar on stderr when it is a terminal and the load is not instant."""

    def __init__(self, label: str, stream: Any = None, delay: float = 0.5) -> None:
        self.stream = stream or sys.stderr
        self.enabled = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.label = label
        self.t0 = time.monotonic()
        self.delay = delay
        self.last = 0.0
        self.shown = False

    def __call__(self, fraction: float, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or (now - self.last < 0.1 and fraction < 1.0):
            return
        self.last = now
        width = 30
        filled = int(max(0.0, min(1.0, fraction)) * width)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {fraction * 100:5.1f}% {message[:30]:<30}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()


def load_trace(path: str, quiet: bool = False, tables: "Wanted | None" = None, use_cache: bool | None = None) -> "Trace":
    """Load ``path`` for a command; ``tables``: what the command reads (see kviewer.io.load);
    ``use_cache=False`` bypasses the trace cache (``--no-cache``)."""
    progress = TerminalProgress(say(os.path.basename(path))) if not quiet else None
    token = kio.registry.CancelToken()
    try:
        with CtrlCCancels(token):
            trace = kio.load(path, progress=progress, cancel=token, tables=tables, use_cache=use_cache)
    except LoadError as exc:
        raise UserError(str(exc)) from exc
    except LoadCancelled:
        raise KeyboardInterrupt from None
    finally:
        if progress is not None:
            progress.close()
    print_warnings(path, trace.meta.warnings)
    return trace


def print_warnings(path: str, warnings: "Sequence[Diagnostic]") -> None:
    """A file's load warnings on stderr, one line each (also when a command answers from the
    cache without loading the file: the warnings are the file's, whoever read it first)."""
    for warning in warnings:
        print(say(f"kviewer: warning: {path}: {warning.message}"), file=sys.stderr)


def load_for(args: argparse.Namespace, path: str, tables: "Wanted | None" = None) -> "Trace":
    """:func:`load_trace` with the command's ``-q`` and ``--no-cache``."""
    return load_trace(path, bool(getattr(args, "quiet", False)), tables=tables, use_cache=cache_choice(args))


def attach_report(trace: "Trace", args: argparse.Namespace, report: "Trace | None" = None) -> "Trace":
    """``--ncu REPORT``: the report's counters on the trace's kernels; the match report goes to
    stderr (stdout stays machine-readable)."""
    path = report.meta.path if report is not None else getattr(args, "ncu", None)
    if not path:
        if getattr(args, "ncu_step", None) is not None or getattr(args, "ncu_start", None) is not None:
            raise UserError("--ncu-step and --ncu-start choose where --ncu REPORT attaches: give --ncu too")
        return trace

    if report is None:
        report = load_for(args, path)
    if not analysis.attach.is_counter_report(report):
        raise UserError(f"{path}: --ncu expects a counter report (Nsight Compute .ncu-rep or ncu --csv, rocprof --pmc), "
                        f"got {report.meta.format_label or report.meta.source_format}")
    if not analysis.attach.is_timeline(trace):
        raise UserError(f"{trace.meta.path}: --ncu attaches a report to a timeline trace (PyTorch, Nsight Systems, rocprof), "
                        f"got {trace.meta.format_label or trace.meta.source_format}")
    if getattr(args, "ncu_step", None) is not None and getattr(args, "ncu_start", None) is not None:
        raise UserError("give --ncu-step or --ncu-start, not both")
    try:
        result = analysis.attach.attach_counters(trace, report, start=getattr(args, "ncu_start", None), step=getattr(args, "ncu_step", None))
    except ValueError as exc:
        raise UserError(f"--ncu-step: {exc}") from None
    for line in analysis.attach.describe(result):
        print(f"kviewer: {line.strip() if not line.startswith('  ') else '  ' + line.strip()}", file=sys.stderr)
    return result.trace


def attach_pair(traces: "list[Trace]", args: argparse.Namespace) -> "list[Trace]":
    """``screenshot|report TRACE REPORT``: a timeline and a counter report are one trace with the
    report attached (as the desktop app opens them), not a comparison; ``--ncu`` attaches too."""
    if len(traces) == 2 and not getattr(args, "ncu", None) and analysis.attach.is_timeline(traces[0]) and analysis.attach.is_counter_report(traces[1]):
        return [attach_report(traces[0], args, report=traces[1])]
    return [attach_report(traces[0], args)] + traces[1:]


def add_ncu_options(sp: argparse.ArgumentParser) -> None:
    """``--ncu REPORT`` and the window choice, for subcommands that analyse one timeline."""
    sp.add_argument("--ncu", metavar="REPORT", help="attach the counters of this Nsight Compute report (or rocprof --pmc run) "
                    "to the matched kernels of FILE; the match report goes to stderr")
    sp.add_argument("--ncu-step", metavar="STEP", default=None,
                    help="when the report fits several steps equally well: attach it to this one (a step name or its position 0, 1, ...)")
    sp.add_argument("--ncu-start", metavar="LAUNCH", type=int, default=None,
                    help="attach the report's first kernel to this timeline launch (launch order, from 0)")


# ---------------------------------------------------------------------------------------------
# output


def frame_records(df: "pd.DataFrame") -> list[dict[Any, Any]]:
    """A table as a list of objects (``--format json``): Python values column by column (numpy's
    ``tolist``), unknown values left as NaN/None for :mod:`kviewer.core.jsonout` to write as null."""
    names = list(df.columns)
    columns = [df.iloc[:, i].tolist() for i in range(df.shape[1])]
    return [dict(zip(names, row)) for row in zip(*columns)]


def has_char(df: "pd.DataFrame", ch: str) -> bool:
    """True when a text cell of ``df`` holds the character ``ch``."""
    import pandas as pd

    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            values = pd.Series(col.cat.categories, dtype=object)
        elif pd.api.types.is_string_dtype(col.dtype):
            values = col
        else:
            continue
        if values.astype(str).str.contains(ch, regex=False).any():
            return True
    return False


def write_frame(df: "pd.DataFrame", fmt: str, out: Any = None, float_digits: int = 1, raw_csv: bool = False) -> None:
    """Write a table as csv, json (a list of objects) or an aligned human table.

    Text is made safe per destination (:mod:`kviewer.core.text`): escaped in the human table,
    formula-guarded in CSV (unless ``raw_csv`` / ``--raw-csv``), exact in JSON.
    """
    out = out or sys.stdout
    if fmt == "csv":
        from kviewer.cli.stream import nul_stand_in, write_csv

        if write_csv(df, out, raw_csv):  # each distinct value formatted once, written in pieces
            return
        if not raw_csv:
            df = map_text_columns(df, csv_cell)

        # the csv module quotes a field holding the delimiter, a quote or the line terminator
        # ("\n") but not a lone "\r", which readers take for a line end: a trace name with one
        # would break its row. Quote every text field then (such names are rare).
        quoting: Literal[0, 1, 2, 3] = csv.QUOTE_NONNUMERIC if has_char(df, "\r") else csv.QUOTE_MINIMAL
        if sys.version_info < (3, 11) and has_char(df, "\0"):
            sub = nul_stand_in(lambda c: has_char(df, c))
            buf = io.StringIO()
            map_text_columns(df, lambda v: v.replace("\0", sub)).to_csv(buf, index=False, lineterminator="\n", quoting=quoting)
            out.write(buf.getvalue().replace(sub, "\0"))
        else:
            df.to_csv(out, index=False, lineterminator="\n", quoting=quoting)
    elif fmt == "json":
        dump_json(frame_records(df), out)
    else:
        from kviewer.cli.stream import table_lines

        for block in table_lines(df, float_digits):  # written in pieces: a 600k-row table is never one string
            out.write(block + "\n")


def human_table(df: "pd.DataFrame", float_digits: int = 1, max_name: int = 80, numeric: Sequence[bool] | None = None) -> str:
    """Right-aligned numbers, left-aligned text, long names cut with an ellipsis.

    ``numeric`` says which columns to right-align when the dtypes do not (cells already formatted
    as text)."""
    from kviewer.cli.stream import table_lines

    return "\n".join(table_lines(df, float_digits, max_name, numeric))



def dump_json(doc: Any, out: Any = None) -> None:
    """One JSON document (numpy numbers as numbers, NaN and infinities as null), then a newline:
    the one encoder, :mod:`kviewer.core.jsonout`."""
    core.jsonout.write(doc, out or sys.stdout, indent=1)


# ---------------------------------------------------------------------------------------------
# checks and parsing of common arguments


def one_or_two(files: Sequence[str]) -> None:
    if len(files) > 2:
        raise UserError(f"expected one file, or two (the second compared with the first), got {len(files)}")


def output_dir_exists(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{path}: the folder {folder} does not exist")


def parse_size(text: str) -> tuple[int, int]:
    """``1600x1000`` -> (1600, 1000)."""
    parts = text.lower().replace("×", "x").split("x")
    try:
        w, h = (int(p) for p in parts)
    except ValueError:
        raise UserError(f"--size: expected WIDTHxHEIGHT in pixels (e.g. 1600x1000), got {text!r}") from None
    if not (16 <= w <= 16384 and 16 <= h <= 16384):
        raise UserError(f"--size: width and height must be between 16 and 16384 pixels, got {text!r}")
    return w, h


#: the largest time --range accepts, in ns (about 31 years)
MAX_RANGE_NS = 1e18


def parse_time_range(text: str) -> tuple[float | None, float | None]:
    """``1.5ms:3ms`` -> (1.5e6, 3e6) ns; an empty side is open (the start or end of the trace)."""
    parts = text.split(":")
    if len(parts) != 2 or not (parts[0].strip() or parts[1].strip()):
        raise UserError(f"--range: expected START:END (e.g. 1.5ms:3ms or 1000000:2000000), got {text!r}")
    ends: list[float | None] = []
    for part in parts:
        try:
            ends.append(session.filterexpr.parse_number(part, "time") if part.strip() else None)
        except session.filterexpr.FilterError as exc:
            raise UserError(f"--range: {exc}") from None
    for end in ends:
        # 1e400 parses as inf; nothing a timeline can show lies beyond ~30 years in ns
        if end is not None and not (math.isfinite(end) and abs(end) <= MAX_RANGE_NS):
            raise UserError(f"--range: {end:g} ns is not a time a trace can hold (at most {MAX_RANGE_NS:.0e} ns), got {text!r}")
    t0, t1 = ends
    if t0 is not None and t1 is not None and not t1 - t0 >= 1:
        raise UserError(f"--range: the end must come at least 1 ns after the start, got {text!r}")
    return t0, t1

