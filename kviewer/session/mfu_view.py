"""MFU per step as the views show it (no Qt): one line for tooltips, Details and headlines, and a
table of formatted cells for the CLI and the report.

The numbers come from :func:`kviewer.analysis.mfu.mfu`; unknown is "—", never 0.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any, Mapping

from kviewer import analysis, session
from kviewer.core.text import display_text
from kviewer.session.format import UNKNOWN, format_count, format_duration, format_ratio, format_util, known, number

if TYPE_CHECKING:
    import kviewer.analysis.gpu_metrics
    import kviewer.analysis.mfu
    import kviewer.analysis.steps
    import kviewer.session.analysis_cache

def _positive(v: Any) -> bool:
    n = number(v)
    return n is not None and n > 0


def _si(value: float, unit: str) -> str:
    text = format_count(value)
    return f"{text}{unit}" if text[-1:].isalpha() else f"{text} {unit}"


def mfu_line(row: Mapping[str, Any] | None) -> str:
    """``MFU 41.2% · HFU 43.0% · step SOL 0.52 · 859 GFLOP in 1.64 ms (GPU span) at bf16 989.5 TFLOP/s``,
    with the kernel time whose FLOPs are unknown when there is any (MFU is then a lower bound)."""
    if not row:
        return "MFU " + UNKNOWN
    mfu = format_util(row.get("mfu"))
    unknown = row.get("unknown_ns")
    if _positive(unknown) and mfu != UNKNOWN:
        mfu = "≥ " + mfu
    hfu = format_util(row.get("hfu"))
    if _positive(unknown) and hfu != UNKNOWN:
        hfu = "≥ " + hfu
    parts = [f"MFU {mfu}", f"HFU {hfu}", f"step SOL {format_ratio(row.get('sol_step'))}"]
    flops = number(row.get("model_flops"))
    if flops is not None:
        what = f"{_si(flops, 'FLOP')} in {format_duration(row.get('step_ns'))}"
        basis = row.get("time_basis")
        if basis and basis != "host range":
            what += f" ({basis})"
        peak = number(row.get("peak_flops"))
        if peak is not None:
            prec = str(row.get("precision") or "").upper()
            ranks = number(row.get("ranks"))
            n = int(ranks) if ranks is not None and ranks > 1 else 1
            what += f" at the {prec} peak {_si(peak / n, 'FLOP/s')}" + (f" × {n} GPUs" if n > 1 else "")
        parts.append(what)
    if _positive(unknown):
        parts.append(f"FLOPs unknown for {format_duration(unknown)} of kernels")
    if row.get("note"):
        parts.append(str(row["note"]))
    return " · ".join(parts)


def split_line(row: Mapping[str, Any] | None) -> str:
    """``compute 1.1 ms · memory 333 µs · no verdict 0 ns · idle 3.9 ms``: where the step's time went."""
    if not row:
        return ""
    return " · ".join(
        f"{label} {format_duration(row.get(col))}"
        for label, col in (("compute-bound", "compute_ns"), ("memory-bound", "memory_ns"),
                           ("no verdict", "unknown_bound_ns"), ("idle/launch", "idle_ns"))
    )


#: the columns of :func:`mfu_cells`: (header, column, formatter)
CELLS = (
    ("rank", "rank", lambda v: str(int(v)) if known(v) else UNKNOWN),
    ("step", "step", lambda v: str(int(v))),
    ("step time", "step_ns", format_duration),
    ("basis", "time_basis", str),
    ("model FLOPs", "model_flops", format_count),
    ("MFU", "mfu", format_util),
    ("HFU", "hfu", format_util),
    ("step SOL", "sol_step", format_ratio),
    ("peak", "peak_field", str),
    ("compute", "compute_ns", format_duration),
    ("memory", "memory_ns", format_duration),
    ("no verdict", "unknown_bound_ns", format_duration),
    ("idle", "idle_ns", format_duration),
    ("FLOPs unknown", "unknown_ns", format_duration),
)


def mfu_cells(steps: Any) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted rows of the per-(rank, step) MFU table (:data:`CELLS`)."""
    headers = [h for h, _, _ in CELLS]
    rows = []
    for rec in steps.to_dict(orient="records"):
        row = [f(rec.get(col)) if known(rec.get(col)) or col in ("time_basis", "peak_field") else UNKNOWN for _, col, f in CELLS]
        if _positive(rec.get("unknown_ns")):
            # FLOPs missing for part of the step: the utilisations are lower bounds
            row = [("≥ " + c) if h in ("MFU", "HFU") and c != UNKNOWN else c for (h, _, _), c in zip(CELLS, row)]
        rows.append(row)
    return headers, rows


def mfu_report(result: Any) -> str:
    """The text ``summary --steps`` prints: the MFU table per (rank, step), the job's MFU per step
    when there are several ranks, and the totals line."""
    if result.totals.get("error"):
        return "MFU per step: unknown (" + display_text(str(result.totals["error"]).splitlines()[0]) + ")"
    lines = ["MFU per step (model FLOPs / (step time x dense peak); HFU with recomputation and counters)"]
    headers, rows = mfu_cells(result.steps)
    lines.append(_aligned(headers, rows))
    job = result.job
    if len(job) and int(job["ranks"].max()) > 1:
        lines.append("\njob MFU per step (sum of FLOPs / (slowest rank's step time x sum of peaks))")
        jh = ["step", "ranks", "step time", "slowest rank", "model FLOPs", "MFU", "HFU", "step SOL"]
        jr = [[str(int(r["step"])), str(int(r["ranks"])), format_duration(r["step_ns"]), str(int(r["slowest_rank"])),
               format_count(r["model_flops"]), format_util(r["mfu"]), format_util(r["hfu"]), format_ratio(r["sol_step"])]
              for r in job.to_dict(orient="records")]
        lines.append(_aligned(jh, jr))
    notes = sorted({str(n) for n in result.steps["note"] if n}) if "note" in result.steps else []
    lines += [f"note: {display_text(n)}" for n in notes]
    t = result.totals
    if t:
        lines.append("\nall steps: " + mfu_line(t))
    return "\n".join(lines)


def _aligned(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    text = ["  ".join(h.rjust(w) for h, w in zip(headers, widths)).rstrip(), "  ".join("-" * w for w in widths)]
    text += ["  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(text)


def compare_mfu_text(df: Any) -> str:
    """The MFU section of ``kviewer compare``: per step position, A's and B's MFU and the change
    in percentage points."""
    if not len(df):
        return "MFU per step: no steps in either trace"
    headers = ["position", "step A", "step B", "step time A", "step time B", "MFU A", "MFU B", "delta (points)", "step SOL A", "step SOL B"]
    rows = []
    for r in df.to_dict(orient="records"):
        d = r["delta_pts"]
        rows.append([str(r["position"]), str(r["step_a"]) if r["step_a"] >= 0 else UNKNOWN, str(r["step_b"]) if r["step_b"] >= 0 else UNKNOWN,
                     format_duration(r["step_ns_a"]), format_duration(r["step_ns_b"]), format_util(r["mfu_a"]), format_util(r["mfu_b"]),
                     f"{d:+.1f}" if known(d) else UNKNOWN, format_ratio(r["sol_step_a"]), format_ratio(r["sol_step_b"])])
    return "MFU per step (the i-th step of A beside the i-th of B; delta = B - A in percentage points)\n" + _aligned(headers, rows)


# ---------------------------------------------------------------------------------------------
# the window: one MFU result per open trace and speed of light, computed off the GUI thread and
# kept in the trace's MFU slot (kviewer.session.open_trace.MFU; kviewer.ui.mfu_requests asks)


def compute_mfu(trace: Any, info: Any) -> Any:
    """The :class:`~kviewer.analysis.mfu.MfuResult` of an open trace for its speed of light
    ``info`` (a :class:`~kviewer.session.analyses.SolInfo`, None when not known): pure, for a
    worker thread."""
    sol = info.result if info is not None else None
    device = info.device if info is not None else None
    if info is not None and sol is None and not info.no_kernels:
        # no speed of light (the GPU is not recognised): no peaks, and nothing to compute again
        return analysis.mfu.unknown_mfu(info.why or "the GPU is not known")
    if device is None:
        # the trace's own GPU: the MFU kviewer whatif and a reopen read from the analysis cache
        # (stored by the first of them to compute it; None source, the cache off: computed)
        return session.analysis_cache.mfu_for(trace, lambda: sol, trace.meta.source_id)
    return analysis.mfu.mfu_or_unknown(trace, device, sol)


def marker_tooltip_lines(result: Any, name: str, rank: int) -> list[str]:
    """The timeline tooltip's MFU line of a step marker, when its trace's MFU ``result`` is known
    (computed once the trace's speed of light is: :meth:`kviewer.ui.mfu_requests.MfuRequests.warm`;
    None before)."""
    if result is None or not analysis.steps.is_step_marker_name(name):
        return []
    row = analysis.mfu.step_of_marker(result, name, rank)
    return [mfu_line(row)] if row is not None else []


def marker_mfu_html(result: Any, name: str, rank: int) -> str | None:
    """The Details lines of a selected step marker from its trace's MFU ``result``: its MFU line
    and the split of its time; "" while not computed (``result`` None); None when the slice is no
    step marker."""
    if not analysis.steps.is_step_marker_name(name):
        return None
    if result is None:
        return ""
    if result.totals.get("error"):
        return f"<p style='color:#777'>MFU unknown: {html.escape(str(result.totals['error']).splitlines()[0])}</p>"
    row = analysis.mfu.step_of_marker(result, name, rank)
    if row is None:
        return None
    return (f"<p><b>{html.escape(mfu_line(row))}</b><br>"
            f"<span style='color:#555'>{html.escape(split_line(row))}</span></p>")


def range_mfu_text(result: Any, marker: tuple[str, int] | None, rng: tuple[float, float] | None, offset_ns: int,
                   trace: Any = None) -> str:
    """The Range dock's MFU line: the selected step marker's (``marker`` = its name and rank), else
    the whole steps inside the time range (``rng`` in display ns, ``offset_ns`` from the trace's
    origin). "" when neither holds a step. With ``trace`` (when it has sampled GPU metrics), the
    line also says when that MFU and the sampled Tensor Active disagree (:func:`mfu_tensor_sentence`)."""
    if result.totals.get("error"):
        return "MFU unknown: " + str(result.totals["error"]).splitlines()[0]
    if marker is not None:
        row = analysis.mfu.step_of_marker(result, marker[0], marker[1])
        if row is not None:
            return (f"step {row['step']} ({marker[0]}): {mfu_line(row)} · {split_line(row)}"
                    + mfu_tensor_sentence(trace, row.get("mfu"), row.get("start"), row.get("end")))
    if rng is not None:
        t0, t1 = int(round(rng[0])) + offset_ns, int(round(rng[1])) + offset_ns
        tot = analysis.mfu.steps_in_range(result, t0, t1)
        if tot is not None:
            steps = tot["step_list"]
            which = f"step {steps[0]}" if len(steps) == 1 else f"{len(steps)} whole steps ({steps[0]}–{steps[-1]})"
            return (f"{which} in the range: {mfu_line(tot)}"
                    + mfu_tensor_sentence(trace, tot.get("mfu"), tot["first_start"], tot["last_end"]))
    return ""


def mfu_tensor_sentence(trace: Any, mfu: Any, start: Any, end: Any) -> str:
    """" — " and what :class:`~kviewer.analysis.gpu_metrics.TensorCheck` says when the MFU (a
    fraction) of the steps over ``[start, end]`` (trace time) and the sampled Tensor Active there
    disagree by more than its threshold; "" when they agree, or either is unknown."""
    if trace is None or not len(trace.gpu_samples) or mfu is None or start is None or end is None:
        return ""
    try:
        pct, t0, t1 = float(mfu) * 100.0, int(start), int(end)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(pct) or t1 <= t0:
        return ""

    said = analysis.gpu_metrics.tensor_check(trace, None, t0, t1, mfu_pct=pct).sentence()
    return f" — {said}" if said else ""
