"""The ``kviewer`` command line.

``kviewer [FILE ...]`` opens the desktop app; the subcommands below work without a display and
import no Qt. Exit status: 0 on success, 2 on a user error (bad file, bad option) with one line on
stderr, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Sequence

from kviewer.errors import UserError

if TYPE_CHECKING:  # heavy imports stay out of start-up
    import pandas as pd

    from kviewer.core import Trace
    from kviewer.io.registry import Wanted

EXIT_OK = 0
EXIT_USER_ERROR = 2
#: ``kviewer compare --fail-if-slower``: B is slower than allowed (distinct from a user error)
EXIT_SLOWER = 1

#: subcommands that live in a module of their own, ``kviewer/cli/NAME.py``, each a thin shell over
#: the library with ``register(sub)`` adding its parser (``set_defaults(func=...)``). A new
#: subcommand goes here, not into this file.
COMMAND_MODULES: tuple[str, ...] = ()

SUBCOMMANDS = ("info", "summary", "stats", "kernels", "sol", "fusion", "compare", "screenshot", "report", "export", "sql",
               "fleet") + COMMAND_MODULES


#: ``--raw-csv``: CSV cells exactly as in the trace (no spreadsheet-formula guard); set by main()
RAW_CSV = False
RAW_CSV_HELP = ("write text cells exactly as in the trace; by default a cell that begins with = + - @ TAB or CR "
                "gets a leading ' so spreadsheets do not run it as a formula")


def _say(text: object) -> str:
    """Text from a trace (names, paths, warnings) made safe for a terminal (core.text)."""
    from kviewer.core.text import display_text

    return display_text(text)


# ---------------------------------------------------------------------------------------------
# progress on a terminal


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


def load_trace(path: str, quiet: bool = False, tables: "Wanted | None" = None) -> "Trace":
    """Load ``path`` for a command; ``tables``: what the command reads (see kviewer.io.load)."""
    from kviewer.errors import LoadCancelled, LoadError
    from kviewer.io import load
    from kviewer.io.registry import CancelToken

    progress = TerminalProgress(_say(os.path.basename(path))) if not quiet else None
    token = CancelToken()
    try:
        with _ctrl_c_cancels(token):
            trace = load(path, progress=progress, cancel=token, tables=tables)
    except LoadError as exc:
        raise UserError(str(exc)) from exc
    except LoadCancelled:
        raise KeyboardInterrupt from None
    finally:
        if progress is not None:
            progress.close()
    for warning in trace.meta.warnings:
        print(_say(f"kviewer: warning: {path}: {warning.message}"), file=sys.stderr)
    return trace


class _ctrl_c_cancels:
    """During a load, Ctrl+C (SIGINT) cancels the load's token, and the load stops within 2 s.

    Three layers, because a signal's Python handler runs only when the main thread runs Python:

    * the SIGINT handler cancels the token and raises KeyboardInterrupt (raised inside a SQLite
      progress callback, KeyboardInterrupt alone is swallowed by the sqlite3 module; the token
      makes the loader stop for certain, and the CLI exits with 130);
    * a watcher thread reads the signal wakeup fd, which the C-level handler writes at once even
      while the main thread is busy in C code (a pandas parse, a long numpy step): it cancels the
      token right away;
    * if the load has still not stopped :data:`GRACE` seconds after SIGINT, SIGTERM or SIGHUP,
      the watcher removes the temporary files and ends the process (exit 130, or 128 + signal).
    """

    GRACE = 1.5

    def __init__(self, token: Any) -> None:
        self.token = token
        self.previous: Any = None
        self.old_fd: int | None = None
        self.fds: tuple[int, int] | None = None
        self.done: Any = None

    def __enter__(self) -> "_ctrl_c_cancels":
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return self
        self.previous = signal.getsignal(signal.SIGINT)
        if self.previous is signal.default_int_handler:
            signal.signal(signal.SIGINT, self._handler)
        else:
            self.previous = None
        self.done = threading.Event()
        try:
            r, w = os.pipe()
            os.set_blocking(w, False)
            self.old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            self.fds = (r, w)
            threading.Thread(target=self._watch, args=(r,), name="kviewer-signal-watch", daemon=True).start()
        except (OSError, ValueError):  # no pipes or not allowed: the handler alone
            self.fds = None
        return self

    def _handler(self, signum: int, frame: Any) -> None:
        self.token.cancel()
        raise KeyboardInterrupt

    def _watch(self, r: int) -> None:
        import signal

        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data or self.done.is_set():
                return
            for num in data:
                if num == signal.SIGINT:
                    self.token.cancel()
                    self._deadline(130, "interrupted")
                elif num in (signal.SIGTERM, getattr(signal, "SIGHUP", -1)):
                    self.token.cancel()
                    self._deadline(128 + num, "")

    def _deadline(self, code: int, words: str) -> None:
        import threading

        def force() -> None:
            if self.done.wait(self.GRACE):
                return
            from kviewer.tempdir import remove_private_tmpdir

            remove_private_tmpdir()
            if words:
                os.write(2, f"kviewer: {words}\n".encode())
            os._exit(code)

        threading.Thread(target=force, name="kviewer-signal-deadline", daemon=True).start()

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.done is not None:
            self.done.set()
        if self.fds is not None:
            r, w = self.fds
            try:
                signal.set_wakeup_fd(self.old_fd if self.old_fd is not None else -1)
            except (OSError, ValueError):
                pass
            try:
                os.write(w, b"\0")  # wake the watcher so it sees done and ends
            except OSError:
                pass
            os.close(w)
            # the read end closes with the watcher's last read; leave it to the OS at exit
            self.fds = None
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def attach_report(trace: "Trace", args: argparse.Namespace, report: "Trace | None" = None) -> "Trace":
    """``--ncu REPORT``: the report's counters on the trace's kernels; the match report goes to
    stderr (stdout stays machine-readable)."""
    path = getattr(args, "ncu", None)
    if not path:
        if getattr(args, "ncu_step", None) is not None or getattr(args, "ncu_start", None) is not None:
            raise UserError("--ncu-step and --ncu-start choose where --ncu REPORT attaches: give --ncu too")
        return trace
    from kviewer.analysis.attach import attach_counters, describe, is_counter_report, is_timeline

    if report is None:
        report = load_trace(path, args.quiet)
    if not is_counter_report(report):
        raise UserError(f"{path}: --ncu expects a counter report (Nsight Compute .ncu-rep or ncu --csv, rocprof --pmc), "
                        f"got {report.meta.format_label or report.meta.source_format}")
    if not is_timeline(trace):
        raise UserError(f"{trace.meta.path}: --ncu attaches a report to a timeline trace (PyTorch, Nsight Systems, rocprof), "
                        f"got {trace.meta.format_label or trace.meta.source_format}")
    if getattr(args, "ncu_step", None) is not None and getattr(args, "ncu_start", None) is not None:
        raise UserError("give --ncu-step or --ncu-start, not both")
    try:
        result = attach_counters(trace, report, start=getattr(args, "ncu_start", None), step=getattr(args, "ncu_step", None))
    except ValueError as exc:
        raise UserError(f"--ncu-step: {exc}") from None
    for line in describe(result):
        print(f"kviewer: {line.strip() if not line.startswith('  ') else '  ' + line.strip()}", file=sys.stderr)
    return result.trace


def attach_pair(traces: "list[Trace]", args: argparse.Namespace) -> "list[Trace]":
    """``screenshot|report TRACE REPORT``: a timeline and a counter report are one trace with the
    report attached (as the desktop app opens them), not a comparison; ``--ncu`` attaches too."""
    from kviewer.analysis.attach import is_counter_report, is_timeline

    if len(traces) == 2 and not getattr(args, "ncu", None) and is_timeline(traces[0]) and is_counter_report(traces[1]):
        args.ncu = traces[1].meta.path
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


def _json_default(value: Any) -> Any:
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if math.isnan(value) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _has_cr(df: "pd.DataFrame") -> bool:
    """True when a text cell of ``df`` holds a carriage return."""
    import pandas as pd

    for name in df.columns:
        col = df[name]
        if isinstance(col.dtype, pd.CategoricalDtype):
            values = pd.Series(col.cat.categories, dtype=object)
        elif pd.api.types.is_string_dtype(col.dtype):
            values = col
        else:
            continue
        if values.astype(str).str.contains("\r", regex=False).any():
            return True
    return False


def write_frame(df: "pd.DataFrame", fmt: str, out: Any = None, float_digits: int = 1, raw_csv: bool | None = None) -> None:
    """Write a table as csv, json (a list of objects) or an aligned human table.

    Text is made safe per destination (:mod:`kviewer.core.text`): escaped in the human table,
    formula-guarded in CSV (unless ``raw_csv`` / ``--raw-csv``), exact in JSON.
    """
    out = out or sys.stdout
    if fmt == "csv":
        import csv

        from kviewer.core.text import csv_cell, map_text_columns

        raw = RAW_CSV if raw_csv is None else raw_csv
        if not raw:
            df = map_text_columns(df, csv_cell)

        # the csv module quotes a field holding the delimiter, a quote or the line terminator
        # ("\n") but not a lone "\r", which readers take for a line end: a trace name with one
        # would break its row. Quote every text field then (such names are rare).
        quoting = csv.QUOTE_NONNUMERIC if _has_cr(df) else csv.QUOTE_MINIMAL
        df.to_csv(out, index=False, lineterminator="\n", quoting=quoting)
    elif fmt == "json":
        records = df.to_dict(orient="records")
        for rec in records:
            for key, value in rec.items():
                if isinstance(value, float) and math.isnan(value):
                    rec[key] = None
        json.dump(records, out, default=_json_default, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(human_table(df, float_digits) + "\n")


def human_table(df: "pd.DataFrame", float_digits: int = 1, max_name: int = 80, numeric: Sequence[bool] | None = None) -> str:
    """Right-aligned numbers, left-aligned text, long names cut with an ellipsis.

    ``numeric`` says which columns to right-align when the dtypes do not (cells already formatted
    as text)."""
    import pandas as pd

    from kviewer.core.text import display_text

    cols = [display_text(c) for c in df.columns]
    cells: list[list[str]] = []
    if numeric is None:
        numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    for row in df.itertuples(index=False):
        line = []
        for value, is_num in zip(row, numeric):
            if is_num and isinstance(value, float):
                text = "—" if math.isnan(value) else f"{value:,.{float_digits}f}"  # unknown, never 0
            elif is_num and not isinstance(value, str):
                text = f"{value:,}"
            else:
                text = display_text(value)
                if len(text) > max_name:
                    text = text[: max_name - 1] + "…"
            line.append(text)
        cells.append(line)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    def fmt(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()
    lines = [fmt(cols), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# subcommands


def cmd_info(args: argparse.Namespace) -> int:
    files = args.file if isinstance(args.file, list) else [args.file]
    traces = [load_trace(f, args.quiet) for f in files]
    if len(traces) > 1:
        return info_several(traces, args.format)
    return print_info(traces[0], args.format)


def info_several(traces: "list[Trace]", fmt: str) -> int:
    """Each trace's info, then how the kernels of each Nsight Compute report match each timeline."""
    from kviewer.analysis.attach import is_counter_report, is_timeline
    from kviewer.core.merge import describe, match_kernels

    reports = [t for t in traces if is_counter_report(t)]
    timelines = [t for t in traces if is_timeline(t)]
    matches = []
    for tl in timelines:
        for nc in reports:
            rep = match_kernels(tl, nc)
            matches.append((tl, nc, rep))
    if fmt == "json":
        out = {
            "files": [trace_info(t) for t in traces],
            "ncu_matches": [
                {"timeline": tl.meta.path, "ncu": nc.meta.path, "matched": r.matched, "ncu_kernels": r.ncu_total,
                 "window_start": r.start, "notes": r.notes}
                for tl, nc, r in matches
            ],
        }  # fmt: skip
        json.dump(out, sys.stdout, indent=1, default=_json_default, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    for i, trace in enumerate(traces):
        if i:
            print()
        print_info(trace, "table")
    for tl, nc, rep in matches:
        print()
        lines = describe(rep)
        print(_say(f"{lines[0]} ({os.path.basename(nc.meta.path)} onto {os.path.basename(tl.meta.path)})"))
        for line in lines[1:]:
            print(_say(line))
    return EXIT_OK


def print_info(trace: "Trace", fmt: str) -> int:
    info = trace_info(trace)
    if fmt == "json":
        json.dump(info, sys.stdout, indent=1, default=_json_default, ensure_ascii=False)
        sys.stdout.write("\n")
        return EXIT_OK
    m = trace.meta
    print(_say(f"file:     {m.path}"))
    print(_say(f"format:   {m.format_label or m.source_format}"))
    tool = " ".join(x for x in (m.tool, m.tool_version) if x)
    print(_say(f"tool:     {tool or 'unknown'}"))
    if m.origin_ns is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(m.origin_ns / 1e9))
        print(_say(f"origin:   {stamp} UTC ({m.origin_ns} ns since the epoch)"))
    span = trace.span_ns()
    if span:
        print(_say(f"span:     {format_ns(span[1] - span[0])}"))
    if m.ranks:
        print(_say(f"ranks:    {', '.join(str(r) for r in m.ranks)}"))
    for key, value in m.extra.items():
        print(_say(f"{key + ':':<9} {value}"))
    devices = info["devices"]
    print(_say(f"devices:  {len(devices)}"))
    for d in devices:
        parts = [str(d.get("name") or "unknown device")]
        if d.get("architecture"):
            parts.append(str(d["architecture"]))
        if d.get("compute_capability"):
            parts.append(f"CC {d['compute_capability']}")
        if d.get("sm_count", -1) > 0:
            parts.append(f"{d['sm_count']} {'CUs' if d.get('vendor') == 'AMD' else 'SMs'}")
        if d.get("memory_bytes", -1) > 0:
            parts.append(f"{d['memory_bytes'] / 1024**3:.1f} GiB")
        print(_say(f"  [{d['id']}] " + ", ".join(parts)))
    print("tables:")
    for name, n in trace.sizes().items():
        print(_say(f"  {name:<11} {n:>10,}"))
    for w in m.warnings:
        print(_say(f"warning:  {w.message}"))
    return EXIT_OK


def trace_info(trace: "Trace") -> dict[str, Any]:
    m = trace.meta
    devices = []
    for rec in trace.devices.to_dict(orient="records"):
        devices.append({k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rec.items()})
    span = trace.span_ns()
    return {
        "file": m.path,
        "format": m.source_format,
        "format_label": m.format_label,
        "tool": m.tool,
        "tool_version": m.tool_version,
        "origin_ns": m.origin_ns,
        "span_ns": None if span is None else span[1] - span[0],
        "ranks": m.ranks,
        "devices": devices,
        "tables": trace.sizes(),
        "warnings": m.warning_texts(),
        "extra": m.extra,
    }


def format_ns(ns: float) -> str:
    from kviewer.core.units import format_duration

    return format_duration(ns)


def cmd_summary(args: argparse.Namespace) -> int:
    from kviewer.analysis.summary import SUMMARY_READS, kernel_summary

    plain = not (args.steps or args.by_rank or args.range is not None)
    # a plain summary reads the kernels' names and durations alone (without the cache, an nsys
    # export is read only that far); a range needs every table (streams, copies, NVTX)
    trace = load_trace(args.file, args.quiet, tables=SUMMARY_READS if plain else None)
    by = "short_name" if args.short else "name"
    if args.range is not None:
        return summary_range(trace, args.range, args.format)
    if args.steps:
        return summary_steps(trace, args.format)
    if args.by_rank:
        from kviewer.analysis.ranks import kernel_summary_by_rank

        df = kernel_summary_by_rank(trace, by=by)
    else:
        df = kernel_summary(trace, by=by)
    write_frame(df, args.format)
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    """``nsys stats`` reports for any trace: the same columns, order, units and rounding."""
    from kviewer.analysis.stats import REPORTS, run_report
    from kviewer.errors import ReportUnavailable

    names = [n.strip() for n in args.report.split(",") if n.strip()]
    unknown = [n for n in names if n not in REPORTS]
    if unknown or not names:
        raise UserError(f"unknown report {', '.join(unknown) or repr(args.report)}; the reports are: {', '.join(REPORTS)}")
    if args.output:
        _output_dir_exists(args.output)
    trace = load_trace(args.file, args.quiet)
    unavailable = []
    for i, name in enumerate(names):
        try:
            df = run_report(trace, name)
        except ReportUnavailable as exc:
            unavailable.append(exc)
            continue
        if args.output:
            path = f"{args.output}_{name}.{'json' if args.format == 'json' else 'csv' if args.format == 'csv' else 'txt'}"
            with open(path, "w", encoding="utf-8", newline="") as fh:
                write_report(df, REPORTS[name], args.format, fh)
            continue
        if len(names) > 1:  # as nsys prints several reports
            sys.stdout.write(f"{chr(10) if i else ''} ** {REPORTS[name].title} ({name}):\n\n")
        write_report(df, REPORTS[name], args.format, sys.stdout)
    for exc in unavailable:
        if exc is not unavailable[-1]:
            print(_say(f"kviewer: error: {exc}"), file=sys.stderr)
    if unavailable:
        raise UserError(str(unavailable[-1]))
    return EXIT_OK


def write_report(df: "pd.DataFrame", report: Any, fmt: str, out: Any) -> None:
    """A report's rows: each number with the decimals nsys prints (csv, table) or as a number (json);
    unknown values empty in CSV, null in JSON and "—" in the table."""
    if fmt == "json":
        write_frame(df, "json", out)
        return
    import numpy as np
    import pandas as pd

    cells: dict[str, Any] = {}
    unknown = "" if fmt == "csv" else "—"
    for col in report.columns:
        series = df[col.header]
        if col.text:  # names repeat: categorical, so the CSV guard maps each distinct name once
            cells[col.header] = pd.Categorical(series.fillna("").astype(str).to_numpy(dtype=object))
            continue
        if col.decimals is None:  # integers, never through float64 (epoch nanoseconds need 63 bits)
            known = series.notna().to_numpy()
            ints = np.zeros(len(series), dtype=np.int64)
            ints[known] = series[known].astype(np.int64).to_numpy()
            if fmt == "csv":  # numbers to_csv writes itself (C), unknown ones empty
                cells[col.header] = pd.arrays.IntegerArray(ints, ~known)
            else:
                cells[col.header] = [f"{v:,d}" if k else unknown for v, k in zip(ints.tolist(), known.tolist())]
            continue
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)  # None -> NaN
        spec = f"{{:{',' if fmt != 'csv' else ''}.{col.decimals}f}}"
        cells[col.header] = [unknown if v != v else spec.format(v) for v in values.tolist()]
    frame = pd.DataFrame(cells, columns=report.headers)
    if fmt == "csv":
        # only the text columns can hold a formula (the numbers are formatted here)
        from kviewer.core.text import csv_cell, map_text_columns

        text = [c.header for c in report.columns if c.text]
        if not RAW_CSV:
            frame[text] = map_text_columns(frame[text], csv_cell)
        write_frame(frame, "csv", out, raw_csv=True)
    else:
        out.write(human_table(frame, numeric=[not c.text for c in report.columns], max_name=120) + "\n")


def summary_range(trace: "Trace", text: str, fmt: str) -> int:
    """What lies inside a range measured from the trace's first event (as the timeline's axis):
    the tables of the window's Range panel (kernels by name, streams busy/idle, copies by
    direction, NVTX ranges). csv prints the kernels table; json and table all four."""
    from kviewer.analysis.timerange import display_origin, range_summary
    from kviewer.core.units import format_duration

    lo, hi = parse_time_range(text)  # the same range syntax as screenshot --range
    origin = display_origin(trace)
    span = trace.span_ns()
    t0 = 0.0 if lo is None else lo
    t1 = float(span[1] - span[0]) if hi is None and span else (hi or 0.0)
    if t1 <= t0:
        raise UserError(f"--range: the range {text!r} holds nothing of {trace.meta.path}")
    summary = range_summary(trace, origin + int(round(t0)), origin + int(round(t1)))
    if fmt == "csv":
        write_frame(summary.kernels, "csv")
    elif fmt == "json":
        doc: dict[str, Any] = {"start_ns": int(round(t0)), "end_ns": int(round(t1)), "duration_ns": summary.duration}
        for name, df in summary.sections().items():
            doc[name] = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]
        json.dump(doc, sys.stdout, indent=1, default=_json_default, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(f"range {format_duration(t0)} – {format_duration(t1)} (duration {format_duration(summary.duration)}) from the trace's first event")
        for name, df in summary.sections().items():
            print(f"\n{name}")
            write_frame(df, "table", float_digits=2)
    return EXIT_OK


def summary_steps(trace: "Trace", fmt: str) -> int:
    """Per step the spread of step time across ranks, then per rank (slowest first)."""
    from kviewer.analysis.ranks import rank_step_stats, step_spread, step_times, straggler

    steps = step_times(trace)
    if not len(steps):
        raise UserError(f"{trace.meta.path}: no steps found (no ProfilerStep#N or step_N ranges)")
    spread, per_rank, slow = step_spread(trace, steps), rank_step_stats(trace, steps), straggler(trace, steps)
    if fmt == "json":
        def nan_free(df: "pd.DataFrame") -> list[dict[str, Any]]:
            return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()} for r in df.to_dict(orient="records")]

        json.dump({"steps": nan_free(spread), "ranks": nan_free(per_rank), "straggler": slow}, sys.stdout, indent=1, default=_json_default)
        sys.stdout.write("\n")
    elif fmt == "csv":
        write_frame(spread, "csv")
    else:
        print("step time across ranks (ns)")
        write_frame(spread, "table", float_digits=1)
        print("\nper rank, slowest first (ns)")
        write_frame(per_rank, "table", float_digits=1)
        if slow is not None:
            row = per_rank.iloc[0]
            contested = int((spread["ranks"] > 1).sum())
            print(f"\nstraggler: rank {slow} (mean step {format_ns(row['mean_ns'])}, {row['excess_pct']:.1f}% over the median rank; "
                  f"slowest in {int(row['times_slowest'])} of {contested} steps)")
    return EXIT_OK


#: the kernels CSV begins with these, then the rest of the schema
KERNEL_LEAD = {"name": "name", "start": "start_ns", "end": "end_ns", "dur": "dur_ns", "device": "device", "stream": "stream"}


def kernels_frame(trace: "Trace") -> "pd.DataFrame":
    k = trace.kernels
    rest = [c for c in k.columns if c not in KERNEL_LEAD]
    df = k[list(KERNEL_LEAD) + rest].rename(columns=KERNEL_LEAD)
    df["name"] = df["name"].astype(str)
    df["short_name"] = df["short_name"].astype(str)
    return df


def cmd_kernels(args: argparse.Namespace) -> int:
    trace = attach_report(load_trace(args.file, args.quiet), args)
    df = kernels_frame(trace)
    if args.format == "table":
        cols = ["name", "start_ns", "dur_ns", "device", "stream", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        if (df["counters"].astype(str) != "").any():  # a counter report attached (--ncu)
            cols.append("counters")
        write_frame(df[cols], "table")
    else:
        write_frame(df, args.format)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# speed of light and fusion


def _sol_trace_and_device(args: argparse.Namespace) -> "Trace":
    trace = attach_report(load_trace(args.file, args.quiet), args)
    if not len(trace.kernels):
        raise UserError(f"{args.file}: the trace has no kernels")
    return trace


def cmd_sol(args: argparse.Namespace) -> int:
    """Per-kernel speed of light: FLOPs, bytes (measured or modelled), T_SOL, SOL%, bound."""
    from kviewer.analysis.sol import sol_result
    from kviewer.errors import AnalysisError
    from kviewer.session import analysis_cache
    from kviewer.session.analyses import SolInfo

    # the window's analysis cache answers for the file as loaded on its own GPU (taken before the load)
    own = args.device is None and not getattr(args, "ncu", None)
    source = analysis_cache.identity(args.file) if own else None
    trace = _sol_trace_and_device(args)
    cached = analysis_cache.get(source, trace)
    if cached is not None and cached.result is not None:
        result = cached.result
    else:
        try:
            result = sol_result(trace, device=args.device)
        except AnalysisError as exc:
            raise UserError(str(exc)) from exc
        analysis_cache.put(source, trace, SolInfo(result))
    _warn_exceeds(result.warnings())
    df = result.table.rename(columns={"start": "start_ns", "dur": "dur_ns"})
    if args.format == "table":
        cols = ["short_name", "dur_ns", "kind", "precision", "flops", "flops_source", "bytes", "bytes_source",
                "t_sol_ns", "sol_pct", "sol_status", "bound", "ncu_sm_pct", "ncu_mem_pct", "note"]
        view = df[cols].copy()
        view["short_name"] = view["short_name"].str.slice(0, 60)
        write_frame(view, "table")
    else:
        write_frame(df, args.format)
    return EXIT_OK


def _warn_exceeds(bad: dict[str, int]) -> None:
    """One stderr line counting the kernels whose SOL% would exceed 100 (a model or counter error),
    from :meth:`kviewer.analysis.sol.SolResult.warnings`."""
    if bad:
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(bad.items()))
        print(f"warning: {sum(bad.values())} kernel(s) exceed peak: model or counter error, SOL% not shown ({why})", file=sys.stderr)


def cmd_fusion(args: argparse.Namespace) -> int:
    """Fusion candidates with estimated savings, ranked by total saving."""
    from kviewer.analysis.fusion import fusion
    from kviewer.errors import AnalysisError

    trace = _sol_trace_and_device(args)
    try:
        result = fusion(trace, device=args.device)
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
        write_frame(df, args.format)
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# compare (two files)

COMPARE_HELP = """\
Compare report B against report A: kernel groups matched across tools and
vendors, their deltas (B - A), totals and per-step times.

Kernels are matched by normalised name, grid and block, and for PyTorch traces
by the op that launched them, so a cuBLAS and a hipBLASLt GEMM under the same
aten::addmm meet. Status of a row:
  changed / unchanged  matched; unchanged when |delta| <= max(2% of A's total,
                       2 standard deviations of the total difference)
  only in A / only in B
  replaced             only in A, and B does its work inside a fused kernel
  replacement          that fused kernel (only in B)
The delta_ns column adds up exactly to B's total kernel time minus A's.

Exit status: 0; 1 with --fail-if-slower PCT when B's total kernel time exceeds
A's by more than PCT percent; 2 on a user error (bad file or option)."""

COMPARE_TABLE_COLUMNS = ["name", "status", "count_a", "total_a_ns", "count_b", "total_b_ns", "delta_ns", "delta_pct", "matched_by"]


def _nan_free_records(df: "pd.DataFrame") -> list[dict[str, Any]]:
    records = df.to_dict(orient="records")
    for rec in records:
        for key, value in rec.items():
            if isinstance(value, float) and math.isnan(value):
                rec[key] = None
    return records


def compare_json(result: Any, a: "Trace", b: "Trace") -> dict[str, Any]:
    """The whole comparison as plain JSON-able data."""

    def side(t: "Trace", label: str, total: int) -> dict[str, Any]:
        return {"label": label, "path": t.meta.path, "format": t.meta.source_format, "kernels": len(t.kernels), "kernel_time_ns": total}

    slower = result.slower_pct
    return {
        "a": side(a, result.label_a, result.total_a_ns),
        "b": side(b, result.label_b, result.total_b_ns),
        "delta_ns": result.delta_ns,
        "slower_pct": None if math.isinf(slower) else slower,
        "matched_by_ops": result.use_ops,
        "noise": {"rel": result.noise.rel, "k": result.noise.k},
        "align_offset_ns": result.align_offset_ns,
        "align_basis": result.align_basis,
        "totals": _nan_free_records(result.totals),
        "steps": _nan_free_records(result.steps),
        "groups": _nan_free_records(result.groups),
        "fusion": _nan_free_records(result.fusion),
        "ops": None if result.ops is None else _nan_free_records(result.ops),
    }


def cmd_compare(args: argparse.Namespace) -> int:
    from kviewer.analysis.compare import compare
    from kviewer.analysis.matching import MatchOptions

    limit = args.fail_if_slower
    if limit is not None and (math.isnan(limit) or math.isinf(limit) or limit < 0):
        raise UserError(f"--fail-if-slower: expected a percentage >= 0, got {limit}")
    a = load_trace(args.a, args.quiet)
    b = load_trace(args.b, args.quiet)
    base = _baseline(a, b, args.by == "metric")
    if args.by == "metric":
        return _print_baseline(base, args.format)
    result = compare(a, b, MatchOptions(strip_templates=args.strip_templates))
    if args.by == "op" and result.ops is None:
        raise UserError("--by op needs two traces that link kernels to framework ops (PyTorch profiler traces)")
    table = result.ops if args.by == "op" else result.groups
    if args.format == "csv":
        write_frame(table, "csv")
    elif args.format == "json":
        doc = compare_json(result, a, b)
        if base is not None:
            doc["baseline"] = {**base.summary(), "unmatched_a": base.unmatched_a, "unmatched_b": base.unmatched_b}
        json.dump(doc, sys.stdout, default=_json_default, indent=1, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        _print_compare(result, args.by)
        if base is not None:
            print()
            _baseline_summary(base)
    if limit is not None and result.slower_pct > limit:
        print(
            f"kviewer: B is {result.slower_pct:.2f}% slower than A in kernel time "
            f"({format_ns(result.total_b_ns)} vs {format_ns(result.total_a_ns)}), more than the {limit:g}% allowed",
            file=sys.stderr,
        )
        return EXIT_SLOWER
    return EXIT_OK


def _baseline(a: "Trace", b: "Trace", required: bool) -> Any:
    """The per-metric baseline when both files are counter reports (None otherwise)."""
    from kviewer.analysis.attach import is_counter_report

    if not (is_counter_report(a) and is_counter_report(b) and len(a.metrics) and len(b.metrics)):
        if required:
            raise UserError("--by metric compares two counter reports (Nsight Compute, rocprof --pmc), metric by metric")
        return None
    from kviewer.analysis.ncu_baseline import baseline

    return baseline(a, b)


def _baseline_summary(base: Any) -> None:
    s = base.summary()
    print(f"per-kernel metrics (baseline): {s['matched']} of {s['kernels_a']} kernels of A matched "
          f"({s['kernels_b']} in B); {s['metrics_compared']:,} metric values compared, {s['metrics_differing']:,} differ, "
          f"{s['metrics_only_one_side']:,} in one report only")
    if base.unmatched_a or base.unmatched_b:
        print(f"unmatched kernels: {len(base.unmatched_a)} in A, {len(base.unmatched_b)} in B")


def _print_baseline(base: Any, fmt: str) -> int:
    """``compare --by metric``: every metric of every matched kernel pair, side by side."""
    rows = base.rows
    if fmt in ("csv", "json"):
        write_frame(rows, fmt)
        return EXIT_OK
    _baseline_summary(base)
    diff = rows[~rows["same"] & rows["a"].notna() & rows["b"].notna()]
    if len(diff):
        print()
        order = diff["delta_pct"].abs().sort_values(ascending=False, na_position="last").index
        print(human_table(diff.loc[order][["kernel_a", "kernel_b", "name", "metric", "unit", "a", "b", "delta", "delta_pct"]].head(50), float_digits=3))
    else:
        print("every metric of every matched kernel is the same in both (deltas zero)")
    return EXIT_OK


def _print_compare(result: Any, by: str) -> None:
    print(_say(f"A: {result.label_a}"))
    print(_say(f"B: {result.label_b}"))
    print(f"matched by: {'name, launch size and launching op' if result.use_ops else 'name and launch size'}")
    print()
    totals = result.totals[["metric", "a", "b", "delta", "delta_pct"]].copy()
    for col in ("a", "b", "delta"):
        totals[col] = totals[col].round().astype("int64")  # ns and counts: whole numbers read best
    print(human_table(totals))
    if len(result.steps):
        print()
        print(f"steps (GPU span of the kernels launched in each step; B aligned to A by {result.align_offset_ns} ns at the {result.align_basis}):")
        print(human_table(result.steps[["position", "step_a", "step_b", "gpu_span_a", "gpu_span_b", "delta_ns", "delta_pct"]]))
    print()
    if by == "op":
        print(human_table(result.ops[["op"] + COMPARE_TABLE_COLUMNS[1:-1]]))
    else:
        print(human_table(result.groups[COMPARE_TABLE_COLUMNS]))
    if len(result.fusion):
        print()
        print("fusion sets (work A does in separate kernels, and the fused kernels B runs for it):")
        print(human_table(result.fusion[["fusion_set", "total_a_ns", "total_b_ns", "delta_ns", "delta_pct", "rows_b"]]))
    print()
    print(f"total kernel time: A {format_ns(result.total_a_ns)}, B {format_ns(result.total_b_ns)}, "
          f"delta {format_ns(result.delta_ns)} ({result.slower_pct:+.2f}%)")


def _add_compare_parser(sub: Any) -> None:
    sp = sub.add_parser("compare", help="matched kernel groups of two reports and their deltas", description=COMPARE_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("a", metavar="A", help="the reference report")
    sp.add_argument("b", metavar="B", help="the report compared with it")
    sp.add_argument("--format", choices=["table", "csv", "json"], default="table",
                    help="table: totals, steps and the diff table; csv: the diff table only (with delta_ns); json: everything (default: %(default)s)")
    sp.add_argument("--by", choices=["kernel", "op", "metric"], default="kernel",
                    help="rows per kernel group, per launching op (PyTorch traces), or per kernel and metric "
                    "(two counter reports: every metric side by side, Nsight Compute's baseline) (default: %(default)s)")
    sp.add_argument("--strip-templates", action="store_true", help="also ignore template arguments when matching names")
    sp.add_argument("--fail-if-slower", type=float, metavar="PCT", default=None,
                    help="exit with status 1 when B's total kernel time is more than PCT percent above A's (for CI)")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--raw-csv", action="store_true", help=RAW_CSV_HELP)
    sp.set_defaults(func=cmd_compare)


# ---------------------------------------------------------------------------------------------
# pictures and review reports (Qt only inside these commands, offscreen when there is no display)

SCREENSHOT_VIEWS = ("window", "timeline", "table", "roofline", "compare")
SCREENSHOT_HELP = """\
Render a view offscreen (no display needed) and save it as PNG or SVG, chosen
by the suffix of OUT. Views: window (the whole desktop window), timeline,
table (the kernel table), roofline (one per file), compare (needs two files).

--range START:END sets the timeline's visible range, in time from the first
event as the timeline's axis shows it: numbers are ns, or give a unit
(ns, us, µs, ms, s): 1.5ms:3ms, 1000000:2000000, :2ms (from the start).
Kernels are coloured by what bounds them when the GPU is recognised
(--device names it when the trace does not)."""


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
    from kviewer.session.filterexpr import FilterError, parse_number

    parts = text.split(":")
    if len(parts) != 2 or not (parts[0].strip() or parts[1].strip()):
        raise UserError(f"--range: expected START:END (e.g. 1.5ms:3ms or 1000000:2000000), got {text!r}")
    ends: list[float | None] = []
    for part in parts:
        try:
            ends.append(parse_number(part, "time") if part.strip() else None)
        except FilterError as exc:
            raise UserError(f"--range: {exc}") from None
    for end in ends:
        # 1e400 parses as inf; nothing a timeline can show lies beyond ~30 years in ns
        if end is not None and not (math.isfinite(end) and abs(end) <= MAX_RANGE_NS):
            raise UserError(f"--range: {end:g} ns is not a time a trace can hold (at most {MAX_RANGE_NS:.0e} ns), got {text!r}")
    t0, t1 = ends
    if t0 is not None and t1 is not None and not t1 - t0 >= 1:
        raise UserError(f"--range: the end must come at least 1 ns after the start, got {text!r}")
    return t0, t1


def _one_or_two(files: Sequence[str]) -> None:
    if len(files) > 2:
        raise UserError(f"expected one file, or two (the second compared with the first), got {len(files)}")


def _output_dir_exists(path: str) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{path}: the folder {folder} does not exist")


def cmd_screenshot(args: argparse.Namespace) -> int:
    """Build a view offscreen and save its picture."""
    _one_or_two(args.file)
    suffix = os.path.splitext(args.output)[1].lower()
    if suffix not in (".png", ".svg"):
        raise UserError(f"{args.output}: the picture format comes from the suffix: use .png or .svg")
    _output_dir_exists(args.output)
    size = parse_size(args.size)
    time_range = parse_time_range(args.range) if args.range else None
    if time_range is not None and args.view not in ("window", "timeline"):
        raise UserError(f"--range applies to --view window or timeline, not {args.view}")
    if args.view == "compare" and len(args.file) != 2:
        raise UserError("--view compare needs two files: the reference A and the report B compared with it")
    traces = attach_pair([load_trace(f, args.quiet) for f in args.file], args)
    if args.view == "compare" and len(traces) != 2:
        raise UserError("--view compare needs two reports to compare; a timeline and a counter report are one trace (the report attached)")
    try:
        from kviewer.ui import headless
        from kviewer.ui.export import ExportError
    except ImportError as exc:
        raise UserError(f"screenshots need PySide6 and pyqtgraph: {exc}") from exc
    try:
        out = headless.screenshot(args.view, traces, args.output, size, time_range, float(args.scale), args.device)
    except (headless.ViewError, ExportError) as exc:
        raise UserError(str(exc)) from exc
    print(out)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    """A review document: facts, top kernels, SOL and roofline, fusion, comparison."""
    from kviewer.report import build_report, report_format, write_report

    _one_or_two(args.file)
    try:
        report_format(args.output)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _output_dir_exists(args.output)
    if args.top < 1:
        raise UserError(f"--top: expected a positive number of rows, got {args.top}")
    traces = attach_pair([load_trace(f, args.quiet) for f in args.file], args)
    report = build_report(traces, device=args.device, top=args.top, pictures=not args.no_pictures)
    images: dict[str, bytes] = {}
    if not args.no_pictures:
        try:
            from kviewer.ui.report_pictures import render_pictures
        except ImportError as exc:
            print(f"kviewer: warning: no pictures in the report (PySide6 and pyqtgraph are needed): {exc}", file=sys.stderr)
        else:
            images = render_pictures(report)
    try:
        written = write_report(report, args.output, images)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write the report: {exc.strerror or exc}") from exc
    for path in written:
        print(path)
    return EXIT_OK


def _add_export_parsers(sub: Any) -> None:
    sp = sub.add_parser("screenshot", help="a picture (PNG or SVG) of a view, rendered without a display",
                        description=SCREENSHOT_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("file", metavar="FILE", nargs="+", help="one trace, or two (the second compared with the first)")
    sp.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.png or OUT.svg")
    sp.add_argument("--view", choices=SCREENSHOT_VIEWS, default="window", help="what to draw (default: %(default)s)")
    sp.add_argument("--size", metavar="WxH", default="1600x1000", help="size in pixels (default: %(default)s)")
    sp.add_argument("--range", metavar="START:END", help="the timeline's visible range, e.g. 1.5ms:3ms (default: everything)")
    sp.add_argument("--scale", type=int, choices=[1, 2], default=1, help="PNG pixels per view pixel (default: %(default)s)")
    sp.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    sp.add_argument("--no-cache", action="store_true", help="neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)")
    add_ncu_options(sp)
    sp.set_defaults(func=cmd_screenshot)

    rp = sub.add_parser(
        "report", help="a review report (HTML or Markdown) with tables and pictures",
        description="A review document: trace facts (tool, versions, GPU), top kernels, speed of light and roofline, "
        "fusion candidates, and the comparison when two files are given. OUT.html is self-contained (pictures "
        "embedded); OUT.md writes its pictures to OUT_files/ beside it.",
    )
    rp.add_argument("file", metavar="FILE", nargs="+", help="one trace, or two (the second compared with the first)")
    rp.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.html or OUT.md")
    rp.add_argument("--top", type=int, default=20, help="rows of each ranked table (default: %(default)s)")
    rp.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say")
    rp.add_argument("--no-pictures", action="store_true", help="tables only (no timeline or roofline pictures, no Qt needed)")
    rp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    rp.add_argument("--no-cache", action="store_true", help="neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)")
    add_ncu_options(rp)
    rp.set_defaults(func=cmd_report)


# ---------------------------------------------------------------------------------------------
# SQL


def cmd_export(args: argparse.Namespace) -> int:
    """The unified model of the files as one SQLite database (see kviewer/sqldb.py)."""
    from kviewer import sqldb

    if os.path.abspath(args.output) in {os.path.abspath(f) for f in args.file}:
        raise UserError(f"{args.output}: the output would overwrite an input file")
    traces = [load_trace(f, args.quiet) for f in args.file]
    try:
        sqldb.export(traces, args.output, analysis=not args.no_analysis)
    except OSError as exc:
        raise UserError(f"{args.output}: cannot write: {exc.strerror or exc}") from exc
    sizes = ", ".join(f"{os.path.basename(t.meta.path)} as trace_id {i}" for i, t in enumerate(traces, start=1))
    print(f"wrote {args.output}: {sizes}", file=sys.stderr)
    return EXIT_OK


def cmd_sql(args: argparse.Namespace) -> int:
    """Run one SQL statement against the files' unified model (read-only, nothing written)."""
    from kviewer import sqldb

    if len(args.items) < 2:
        raise UserError("sql needs at least one FILE and a QUERY (kviewer sql FILE [FILE ...] \"SELECT ...\")")
    *files, sql = args.items
    conn = sqldb.open_export(files[0]) if len(files) == 1 else None  # a database written by kviewer export
    if conn is None:
        traces = [load_trace(f, args.quiet) for f in files]
        conn = sqldb.in_memory(traces, analysis=not args.no_analysis)
    try:
        df = sqldb.query(conn, sql, timeout_s=args.timeout)
    except sqldb.QueryError as exc:
        raise UserError(str(exc)) from exc
    finally:
        conn.close()
    write_frame(df, args.format)
    return EXIT_OK


def _add_sql_parsers(sub: Any) -> None:
    ep = sub.add_parser(
        "export", help="write the files' unified model into a SQLite database (documented schema, one trace_id per file)",
        description="Write kernels, GPU ops, CPU slices, flows, devices, metrics, steps, speed of light and fusion "
        "candidates of every FILE into OUT.sqlite (trace_id 1, 2, ... in the order given), with views "
        "kernel_summary, nvtx_summary, memcpy_summary, kernel_launch_latency, gpu_idle_gaps and step_times.",
    )
    ep.add_argument("file", metavar="FILE", nargs="+")
    ep.add_argument("-o", "--output", metavar="OUT", required=True, help="OUT.sqlite (replaced when it exists)")
    ep.add_argument("--no-analysis", action="store_true", help="leave out the speed of light and fusion tables")
    ep.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    ep.add_argument("--no-cache", action="store_true", help="neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)")
    ep.set_defaults(func=cmd_export)
    qp = sub.add_parser(
        "sql", help="run a SQL query against the files' unified model (read-only)",
        description="Run one SQL statement (the schema of kviewer export) against FILE(s), loaded into a read-only "
        "in-memory database, or against a database written by kviewer export. Nothing is written.",
    )
    qp.add_argument("items", metavar="FILE [FILE ...] QUERY", nargs="+", help="trace files (or one export), then the query")
    qp.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output format (default: %(default)s)")
    qp.add_argument("--timeout", type=float, default=60.0, metavar="S", help="interrupt the query after S seconds (default: %(default)s)")
    qp.add_argument("--no-analysis", action="store_true", help="leave out the speed of light and fusion tables (faster)")
    qp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    qp.add_argument("--no-cache", action="store_true", help="neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)")
    qp.set_defaults(func=cmd_sql)


# ---------------------------------------------------------------------------------------------
# parsing


FLEET_HELP = """Step times, kernel groups, communication and idle time per rank and across ranks, the
stragglers and why, and kernel-group time across runs, over folders or globs of rank traces
(any format kviewer reads; local paths or fsspec URLs such as s3://). Files are parsed on Dask
workers and only per-file summaries travel. Writes into the folder OUT: fleet.html (or .md), one
CSV per table, fleet.json and fleet.sqlite.

Exit status: 0; 1 with --fail-if-slower PCT when a run's kernel time per rank exceeds the
baseline's by more than PCT percent; 2 on a user error."""


def cmd_fleet(args: argparse.Namespace) -> int:
    from kviewer.fleet.command import run_fleet
    from kviewer.fleet.engine import FleetError

    try:
        return run_fleet(args)
    except FleetError as exc:
        raise UserError(str(exc)) from exc


def _add_fleet_parser(sub: Any) -> None:
    fp = sub.add_parser("fleet", help="per-rank and across-run analysis of many traces, on Dask", description=FLEET_HELP,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    fp.add_argument("paths", metavar="PATH", nargs="+", help="rank files, folders of rank files (one run each), folders of runs, or globs")
    fp.add_argument("-o", "--output", metavar="OUT", required=True, help="output folder (created)")
    fp.add_argument("--scheduler", metavar="ADDRESS",
                    help="an existing Dask cluster (tcp://host:8786); default: a local cluster (none: in this process, no Dask)")
    fp.add_argument("--workers", type=int, metavar="N", help="worker processes of the local cluster (default: one per core)")
    fp.add_argument("--baseline", metavar="RUN", help="the run the others are compared to (its folder or folder name; default: the first)")
    fp.add_argument("--fail-if-slower", type=float, metavar="PCT", default=None,
                    help="exit with status 1 when a run's kernel time per rank is more than PCT percent above the baseline's (for CI)")
    fp.add_argument("--report", choices=["html", "md", "none"], default="html", help="report format (default: %(default)s)")
    fp.add_argument("--no-pictures", action="store_true", help="no pictures in the report")
    fp.add_argument("-q", "--quiet", action="store_true", help="no progress")
    fp.set_defaults(func=cmd_fleet)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    from kviewer import __version__

    p = _Parser(
        prog="kviewer",
        description="One window for GPU profiler traces. Without a subcommand, opens the desktop app.",
    )
    p.add_argument("--version", action="version", version=f"kviewer {__version__}")
    p.add_argument("--install-desktop", action="store_true",
                   help="add kviewer to this user's desktop menu with its icon and file kinds (.ncu-rep, .nsys-rep, "
                        "*.pt.trace.json[.gz], fleet.sqlite) under $XDG_DATA_HOME, then exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(
        name: str, help_: str, fn: Callable[[argparse.Namespace], int], formats: Sequence[str], several: bool = False,
        format_flags: Sequence[str] = ("--format",),
    ) -> argparse.ArgumentParser:
        # argparse %-formats help texts: a literal % (as in "SOL%") must be doubled
        sp = sub.add_parser(name, help=help_.replace("%", "%%"), description=help_)
        sp.add_argument("file", metavar="FILE", nargs="+" if several else None)
        sp.add_argument(*format_flags, dest="format", choices=list(formats), default=formats[0], help="output format (default: %(default)s)")
        sp.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
        sp.add_argument("--no-cache", action="store_true", help="neither read nor write the trace cache (as KVIEWER_NO_CACHE=1)")
        if "csv" in formats:
            sp.add_argument("--raw-csv", action="store_true", help=RAW_CSV_HELP)
        sp.set_defaults(func=fn)
        return sp

    add(
        "info",
        "detected format, tool and version, devices, table sizes; given a timeline trace and an Nsight Compute "
        "report, how many report kernels match timeline kernels",
        cmd_info,
        ("table", "json"),
        several=True,
    )
    s = add("summary", "kernels grouped by name (as nsys stats cuda_gpu_kern_sum)", cmd_summary, ("table", "csv", "json"))
    s.add_argument("--short", action="store_true", help="group by short name (no arguments or templates)")
    s.add_argument("--by-rank", action="store_true", help="one summary per rank (a folder of per-rank traces)")
    s.add_argument("--steps", action="store_true", help="step times per rank: spread across ranks per step, and the straggler")
    s.add_argument("--range", metavar="START:END", help="what lies inside a time range from the trace's first event, as the "
                   "window's Range panel shows it: kernels by name, streams busy/idle, copies by direction, NVTX ranges "
                   "(units ns/us/ms/s, e.g. 1.2s:1.25s; intervals across an edge are clipped)")
    st = add(
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
    kp = add("kernels", "one row per kernel in the unified schema", cmd_kernels, ("table", "csv", "json"))
    add_ncu_options(kp)
    sol = add("sol", "per-kernel speed of light (FLOPs, bytes, T_SOL, SOL%, bound)", cmd_sol, ("table", "csv", "json"))
    sol.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say or to override it")
    fus = add("fusion", "fusion candidates with estimated savings", cmd_fusion, ("table", "csv", "json"))
    fus.add_argument("--device", metavar="NAME", help="the GPU (id, name or reported spelling) when the trace does not say or to override it")
    add_ncu_options(sol)
    add_ncu_options(fus)
    _add_compare_parser(sub)
    _add_export_parsers(sub)
    _add_sql_parsers(sub)
    _add_fleet_parser(sub)
    import importlib

    for name in COMMAND_MODULES:
        importlib.import_module(f"kviewer.cli.{name}").register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        from kviewer.tempdir import install_signal_cleanup

        install_signal_cleanup()  # SIGTERM mid-load must not leave temporary files behind
        if argv == ["--install-desktop"]:
            from kviewer.desktop import main as install_desktop

            return install_desktop()
        if argv and argv[0] in SUBCOMMANDS or any(a in ("-h", "--help", "--version") for a in argv[:1]):
            args = build_parser().parse_args(argv)
            if getattr(args, "no_cache", False):
                os.environ["KVIEWER_NO_CACHE"] = "1"  # also reaches worker processes
            global RAW_CSV
            RAW_CSV = bool(getattr(args, "raw_csv", False))
            from kviewer.io.memory import check_budget_setting

            problem = check_budget_setting()
            if problem:
                raise UserError(problem)
            if not getattr(args, "func", None):
                build_parser().print_help()
                return EXIT_OK
            return int(args.func(args))
        return run_gui(argv)
    except UserError as exc:
        print(_say(f"kviewer: error: {exc}"), file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:
        # output piped into head: not an error
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK
    except KeyboardInterrupt:
        print("kviewer: interrupted", file=sys.stderr)
        return 130


def run_gui(files: Sequence[str]) -> int:
    for f in files:
        if f.startswith("-"):
            raise UserError(f"unknown option {f!r}; see 'kviewer --help'")
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise UserError(f"{missing[0]}: no such file or directory")
    from kviewer.ui.display import display_problem

    problem = display_problem()
    if problem is not None:
        raise UserError(problem)
    try:
        from kviewer.ui.app import run
    except ImportError as exc:
        raise UserError(f"the desktop app is not available: {exc}") from exc
    return int(run(list(files)))
