"""The columns of the analysis tables (compare, fusion candidates, fleet ranks, query results), as
:class:`~kviewer.session.table_data.Col` descriptors over the frames the analyses return (no Qt).

Each table is "a frame + a list of columns": the column templates below name a frame column
(``key``), a header and a unit (``kind``, which picks the formatter); :func:`frame_table` fills
them. Tables whose cells depend on other cells of the row (the compare diff colours a delta by
the row's status) are built by a function of the frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kviewer.session.format import UNKNOWN, format_count, format_duration, format_signed_duration
from kviewer.session.table_data import Col, TableData, frame_table

if TYPE_CHECKING:
    import pandas as pd

# ---- compare ---------------------------------------------------------------------------------

#: how a delta reads: slower (B takes longer) red, faster green, within noise grey
SLOWER = "#c0392b"
FASTER = "#1e8449"
NEUTRAL = "#6e767d"
#: status -> colour of the status text
STATUS_COLOURS = {
    "changed": "#282828",
    "unchanged": NEUTRAL,
    "only in A": "#a05a00",
    "only in B": "#0066aa",
    "replaced": "#7d3c98",
    "replacement": "#7d3c98",
}

GROUP_VIEW_COLUMNS = (
    Col("name", "Kernel group", "text", header_tip="what the row's kernels have in common, [launching op]"),
    Col("status", "Status", "text"),
    Col("count_a", "A count", "count"),
    Col("total_a_ns", "A total", "time"),
    Col("count_b", "B count", "count"),
    Col("total_b_ns", "B total", "time"),
    Col("delta_ns", "Δ (B − A)", "delta_time", header_tip="B's total minus A's total"),
    Col("delta_pct", "Δ %", "delta_pct", header_tip="delta as a percentage of A's total"),
    Col("noise_ns", "Noise", "time", header_tip="|Δ| up to this is unchanged: max(2% of A, 2 std of the total difference); "
        "a row whose every launch in B is beyond every launch in A (4 against 4 or more) is changed all the same"),
    Col("matched_by", "Matched by", "text", header_tip="the matching level: name, launch size, op, kernel kind"),
    Col("kind", "Kind", "text"),
    Col("op", "Op", "text", header_tip="the framework op that launched the kernels"),
)

OP_VIEW_COLUMNS = (
    Col("op", "Op", "text", header_tip="the framework op that launched the kernels"),
    Col("status", "Status", "text"),
    Col("count_a", "A kernels", "count"),
    Col("total_a_ns", "A total", "time"),
    Col("count_b", "B kernels", "count"),
    Col("total_b_ns", "B total", "time"),
    Col("delta_ns", "Δ (B − A)", "delta_time"),
    Col("delta_pct", "Δ %", "delta_pct"),
    Col("name_a", "Top kernel in A", "text"),
    Col("name_b", "Top kernel in B", "text"),
)

TOTAL_VIEW_COLUMNS = (
    Col("metric", "Total", "text"),
    Col("a", "A", "number"),
    Col("b", "B", "number"),
    Col("delta", "Δ (B − A)", "number"),
    Col("delta_pct", "Δ %", "delta_pct"),
)

STEP_VIEW_COLUMNS = (
    Col("position", "#", "count"),
    Col("step_a", "Step in A", "text"),
    Col("step_b", "Step in B", "text"),
    Col("gpu_span_a", "A GPU span", "time", header_tip="first kernel start to last kernel end of the kernels launched in the step"),
    Col("gpu_span_b", "B GPU span", "time"),
    Col("delta_ns", "Δ (B − A)", "delta_time"),
    Col("delta_pct", "Δ %", "delta_pct"),
    Col("kernel_ns_a", "A kernel time", "time"),
    Col("kernel_ns_b", "B kernel time", "time"),
)

FUSION_VIEW_COLUMNS = (
    Col("fusion_set", "Set", "count"),
    Col("total_a_ns", "A total (unfused)", "time"),
    Col("total_b_ns", "B total (fused)", "time"),
    Col("delta_ns", "Δ (B − A)", "delta_time"),
    Col("delta_pct", "Δ %", "delta_pct"),
    Col("rows_a", "Rows in A", "text"),
    Col("rows_b", "Rows in B", "text"),
)

_DELTA_KINDS = ("delta_time", "delta_pct")


def compare_table(frame: pd.DataFrame, columns: Sequence[Col]) -> TableData:
    """A compare result's frame (groups, ops, steps, fusion) with its colours and tooltips: the
    status in its colour (replacements in italics), a delta red when B is slower and green when
    faster (grey within noise), the full kernel names of both sides on the name; the noise only
    on matched rows."""
    cols = frame.columns
    status = frame["status"].astype(str).to_numpy() if "status" in cols else None
    matched = np.isin(status, ("changed", "unchanged")) if status is not None else None
    table = frame_table(frame, columns)
    out: list[Col] = []
    for col in table.columns:
        if col.key == "status" and status is not None:
            st = status
            col = replace(col, foreground=lambda i: STATUS_COLOURS.get(st[i]), italic=lambda i: st[i] in ("replaced", "replacement"))
        elif col.kind in _DELTA_KINDS:
            col = replace(col, foreground=_delta_colour(col.values, status))
        elif col.key == "noise_ns" and matched is not None:
            # the noise only means something for a matched row: none elsewhere (sorted last)
            m, values = matched, np.where(matched, col.values.astype(np.float64), np.nan)
            col = replace(col, values=values, display=lambda i: format_duration(float(values[i])) if m[i] else "")
        if col.key in ("name", "op") and "name_a" in cols:
            col = replace(col, tooltip=_names_tip(frame))
        out.append(col)
    return TableData(out, table.trace_key, table.kernel_row)


def _delta_colour(values: np.ndarray, status: np.ndarray | None) -> Any:
    def colour(i: int) -> str:
        if status is not None and status[i] == "unchanged":
            return NEUTRAL
        v = float(values[i])
        if not np.isfinite(v) or v == 0:
            return NEUTRAL
        return SLOWER if v > 0 else FASTER

    return colour


def _names_tip(frame: pd.DataFrame) -> Any:
    cols = frame.columns
    names = {side: frame[f"name_{side}"].astype(str).to_numpy() for side in ("a", "b")}
    links = {label: frame[key].to_numpy(dtype=object) for key, label in (("replaced_by", "replaced by"), ("replaces", "replaces")) if key in cols}

    def tip(i: int) -> str:
        parts = [f"{side.upper()}: {names[side][i]}" for side in ("a", "b") if names[side][i] and names[side][i] != "nan"]
        parts += [f"{label}: {v[i]}" for label, v in links.items() if isinstance(v[i], str) and v[i]]
        return "\n".join(parts)

    return tip


def totals_table(frame: pd.DataFrame) -> TableData:
    """The compare totals: A, B and the delta of each row in that row's unit (``unit`` "ns": a
    time, else a count)."""
    table = compare_table(frame, TOTAL_VIEW_COLUMNS)
    units = frame["unit"].astype(str).to_numpy() if "unit" in frame.columns else np.full(len(frame), "")
    out: list[Col] = []
    for col in table.columns:
        if col.key in ("a", "b", "delta"):
            signed = col.key == "delta"
            col = replace(col, display=_in_row_unit(col.values, units, signed))
            if signed:
                col = replace(col, foreground=_delta_colour(col.values, None))
        out.append(col)
    return TableData(out, table.trace_key, table.kernel_row)


def _in_row_unit(values: np.ndarray, units: np.ndarray, signed: bool) -> Any:
    def text(i: int) -> str:
        return _auto(float(values[i]), str(units[i]), signed)

    return text


def _auto(v: float, unit: str, signed: bool) -> str:
    if unit == "ns":
        return format_signed_duration(v) if signed else format_duration(v)
    text = format_count(v)
    return "+" + text if signed and v > 0 and text != UNKNOWN else text


# ---- fusion candidates -------------------------------------------------------------------------

#: the fusion dock's columns, the saving first so it is on screen at the dock's default width
FUSION_COLUMNS = (
    Col("savings_ns", "saving", "time", header_tip="estimated time saved by fusing every instance (unknown: sizes not known)"),
    Col("gpu_time_pct", "% GPU", "pct", header_tip="the saving as a share of all kernel time"),
    Col("kind", "kind", "text"),
    Col("count", "count", "count", header_tip="instances of the chain"),
    Col("chain", "chain", "text"),
    Col("savings_per_instance_ns", "per instance", "time"),
    Col("measured_ns", "measured", "time", header_tip="measured time of the chain's kernels, all instances"),
    Col("fused_est_ns", "fused est.", "time", header_tip="estimated time of the fused kernels, all instances"),
    Col("remedy", "remedy", "text"),
    Col("confidence", "confidence", "text"),
    Col("rank", "rank", "count", header_tip="the rank in `kviewer fusion` (by saving)"),
)


def fusion_table(frame: pd.DataFrame) -> TableData:
    """Fusion candidates; the chain's tooltip adds the candidate's note."""
    table = frame_table(frame, FUSION_COLUMNS)
    if "note" in frame.columns and "chain" in frame.columns:
        chains = frame["chain"].astype(str).to_numpy()
        notes = frame["note"].fillna("").astype(str).to_numpy()
        table.columns = [replace(c, tooltip=lambda i: f"{chains[i]}\n\n{notes[i]}" if notes[i] else chains[i]) if c.key == "chain" else c
                         for c in table.columns]
    return table


# ---- fleet ranks -------------------------------------------------------------------------------

FLEET_COLUMNS = (
    Col("run", "run", "text"),
    Col("rank", "rank", "int"),
    Col("steps", "steps", "count"),
    Col("mean_step_ns", "mean step", "time"),
    Col("excess_pct", "over median", "delta_pct"),
    Col("reason_kind", "reason", "text"),
    Col("reason", "kernel group / idle", "text"),
    Col("reason_excess_ns", "excess", "time"),
    Col("kernel_ns", "kernel time", "time"),
    Col("comm_ns", "communication", "time"),
    Col("exposed_comm_ns", "exposed comm.", "time"),
    Col("idle_ns", "idle", "time"),
    Col("path", "file", "text"),
)


# ---- query results -----------------------------------------------------------------------------


def query_columns(frame: pd.DataFrame, clock: str = "") -> list[Col]:
    """Columns for any SQL result: numbers by their values (``*_ns`` as times: ``start_ns`` and
    ``end_ns`` points in time on the traces' clock, which ``clock`` names for the header), the rest text."""
    cols = []
    for name in frame.columns:
        kind = "text"
        values = [v for v in frame[name].head(200) if v is not None and not (isinstance(v, float) and np.isnan(v))]
        numeric = values and all(isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in values)
        if numeric:
            integral = all(isinstance(v, (int, np.integer)) for v in values)
            kind = "time" if str(name).endswith("_ns") else "count" if integral else "plain"
            if kind == "time" and str(name).endswith(("start_ns", "end_ns")):
                kind = "instant"
        cols.append(Col(str(name), str(name), kind, header_tip=clock if kind == "instant" else ""))
    return cols


__all__ = [
    "FASTER",
    "FLEET_COLUMNS",
    "FUSION_COLUMNS",
    "FUSION_VIEW_COLUMNS",
    "GROUP_VIEW_COLUMNS",
    "NEUTRAL",
    "OP_VIEW_COLUMNS",
    "SLOWER",
    "STATUS_COLOURS",
    "STEP_VIEW_COLUMNS",
    "TOTAL_VIEW_COLUMNS",
    "compare_table",
    "fusion_table",
    "query_columns",
    "totals_table",
]
