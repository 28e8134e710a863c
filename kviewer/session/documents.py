"""Plain, JSON-able documents of a trace and of analysis results (no Qt, no output).

What ``kviewer info``, ``compare``, ``summary --range`` and ``--steps`` print as JSON is shaped
here, once, so that other surfaces (the report, the SQL export, tests) read the same fields.
Unknown numbers are ``None`` (JSON ``null``), never 0 or NaN.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from kviewer.analysis.compare import CompareResult
    from kviewer.analysis.timerange import RangeSummary
    from kviewer.core import Trace

__all__ = ["compare_document", "nan_free", "range_document", "records", "steps_document", "trace_info"]


def nan_free(value: Any) -> Any:
    """A float NaN as None; anything else unchanged."""
    return None if isinstance(value, float) and math.isnan(value) else value


def records(df: "pd.DataFrame") -> list[dict[str, Any]]:
    """A table's rows as dicts, unknown (NaN) cells as None."""
    return [{str(k): nan_free(v) for k, v in rec.items()} for rec in df.to_dict(orient="records")]


def trace_info(trace: "Trace") -> dict[str, Any]:
    """What ``kviewer info`` says about a trace: format, tool, origin, span, devices, table sizes."""
    m = trace.meta
    span = trace.span_ns()
    return {
        "file": m.path,
        "format": m.source_format,
        "format_label": m.format_label,
        "tool": m.tool,
        "tool_version": m.tool_version,
        "origin_ns": m.origin_ns,
        "time_zero": m.time_zero,
        "first_ns": None if span is None else span[0],
        "span_ns": None if span is None else span[1] - span[0],
        "ranks": m.ranks,
        "devices": records(trace.devices),
        "tables": trace.sizes(),
        "warnings": m.warning_texts(),
        "extra": m.extra,
        "summary_only": m.summary_only,
        "timeline_needs": m.timeline_needs or None,
    }


def compare_document(result: "CompareResult", a: "Trace", b: "Trace") -> dict[str, Any]:
    """The whole comparison of B against A as plain JSON-able data."""

    def side(t: "Trace", label: str, total: int) -> dict[str, Any]:
        return {"label": label, "path": t.meta.path, "format": t.meta.source_format, "kernels": len(t.kernels), "kernel_time_ns": total}

    slower = result.slower_pct
    return {
        "a": side(a, result.label_a, result.total_a_ns),
        "b": side(b, result.label_b, result.total_b_ns),
        "delta_ns": result.delta_ns,
        "slower_pct": None if math.isinf(slower) else slower,
        "slower_basis": result.headline_basis,
        "total_slower_pct": None if math.isinf(result.total_slower_pct) else result.total_slower_pct,
        "per_step": result.per_step,
        "step_median_a_ns": None if math.isnan(result.step_median_a_ns) else result.step_median_a_ns,
        "step_median_b_ns": None if math.isnan(result.step_median_b_ns) else result.step_median_b_ns,
        "notes": result.notes,
        "matched_by_ops": result.use_ops,
        "noise": {"rel": result.noise.rel, "k": result.noise.k},
        "align_offset_ns": result.align_offset_ns,
        "align_basis": result.align_basis,
        "totals": records(result.totals),
        "steps": records(result.steps),
        "groups": records(result.groups),
        "fusion": records(result.fusion),
        "ops": None if result.ops is None else records(result.ops),
    }


def range_document(summary: "RangeSummary", start_ns: int, end_ns: int) -> dict[str, Any]:
    """What a time range holds (the Range panel's tables), the range on the trace's own clock."""
    doc: dict[str, Any] = {"start_ns": start_ns, "end_ns": end_ns, "duration_ns": summary.duration}
    for name, df in summary.sections().items():
        doc[name] = records(df)
    return doc


def steps_document(spread: "pd.DataFrame", per_rank: "pd.DataFrame", straggler: int | None) -> dict[str, Any]:
    """Step times across ranks, per rank, and the straggler."""
    return {"steps": records(spread), "ranks": records(per_rank), "straggler": straggler}
