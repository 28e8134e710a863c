"""``ncu --csv`` output: the raw page (wide) and the details page (long), also as captured stdout.

Raw page (``--page raw``)
    A header row ``"ID","Process ID",...,"Kernel Name",...`` followed by one column per metric, a
    second row with each column's unit, then one row per kernel.
Details page (``--page details``, the default; also ``--metrics ...`` output)
    One row per kernel and metric: ``"Section Name","Metric Name","Metric Unit","Metric Value"``.
    With rules applied, five more columns hold rule results (``"Rule Name","Rule Type","Rule
    Description","Estimated Speedup Type","Estimated Speedup"``); metric rows then end after 16
    fields and rule rows have 20 (ragged rows), and rule rows name the section by its identifier
    (``SpeedOfLight``) where metric rows use its display name. The details page prints section
    metrics by their label ("Duration"); :data:`kviewer.io.ncu.common.LABEL_TO_METRIC` turns the
    known labels back into metric names, unknown labels stay as printed.

The CSV may come after ``==PROF==`` lines and the application's own output (``ncu --csv ... >
log``): lines before the header and lines after it that are not CSV records are skipped (a CSV
record from ncu always starts with a quote). Values are auto-scaled (``usecond``, ``Mbyte/s``,
``Ghz``) or in base units (``--print-units base``), with thousands separators; they are
normalised to base units (:func:`kviewer.io.ncu.common.parse_unit`). Columns that are neither
identity columns nor metric names (e.g. NVTX columns) are kept as text in the metrics table.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, Trace, TraceMeta
from kviewer.errors import CorruptTrace
from kviewer.io.ncu import common as nc
from kviewer.io.registry import CancelToken, LoaderSpec
from kviewer.io.source import Progress, read_content

LABEL = "Nsight Compute CSV (ncu --csv)"
HEADER_START = '"ID","Process ID"'
#: columns of every ncu CSV that describe the kernel rather than a metric
IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context",
            "Stream", "Block Size", "Grid Size", "Device", "CC")  # fmt: skip
LONG = ("Section Name", "Metric Name", "Metric Unit", "Metric Value")
RULE = ("Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type", "Estimated Speedup")
_METRIC_NAME = re.compile(r"^[A-Za-z_][\w.:@\-]*$")
_PROF_LINE = re.compile(r"^==[A-Z]+==")


def _header_line(text: str) -> int | None:
    """Index of the CSV header line in ``text``'s lines, or None."""
    for i, line in enumerate(text.splitlines()):
        if line.lstrip("\ufeff").startswith(HEADER_START) and '"Kernel Name"' in line:
            return i
    return None


def sniff(head: bytes, path: Path) -> bool:
    text = head.decode("utf-8", errors="replace")
    if _header_line(text) is not None:
        return True
    # a long application output before the CSV: look further, but only in an ncu log
    if "==PROF==" in text and len(head) >= 64 * 1024:
        with open(path, "rb") as f:
            for _ in range(256):
                chunk = f.read(64 * 1024)
                if not chunk:
                    break
                if HEADER_START.encode() in chunk:
                    return True
    return False


def load(path: Path, progress: Progress, cancel: CancelToken) -> Trace:
    content = read_content(path, progress)
    text = content.data.decode("utf-8", errors="replace")
    lines = text.splitlines()
    start = _header_line(text)
    if start is None:
        raise CorruptTrace(path, "no ncu CSV header (\"ID\",\"Process ID\",...,\"Kernel Name\") found", LABEL)
    preamble = lines[:start]
    captured = any(_PROF_LINE.match(x) for x in preamble)
    body = [lines[start].lstrip("\ufeff")]
    skipped = 0
    for line in lines[start + 1 :]:
        if line.startswith('"'):
            body.append(line)
        elif line.strip():
            skipped += 1
    try:
        df = pd.read_csv(io.StringIO("\n".join(body)), dtype=str, keep_default_na=False, na_filter=False)
    except (pd.errors.ParserError, ValueError) as exc:
        raise CorruptTrace(path, f"the CSV cannot be parsed: {exc}", LABEL) from exc
    missing = [c for c in ("ID", "Kernel Name") if c not in df.columns]
    if missing:
        raise CorruptTrace(path, f"the CSV lacks the column(s) {', '.join(missing)}", LABEL)
    cancel.check()
    progress(0.4, "parsing metrics")
    long = any(c in df.columns for c in LONG)
    if long:
        absent = [c for c in LONG if c not in df.columns]
        if absent:
            raise CorruptTrace(path, f"a details-page CSV without the column(s) {', '.join(absent)}", LABEL)
        c = _collect_long(path, df)
        page = "details page (one row per metric)"
    else:
        c = _collect_raw(path, df)
        page = "raw page (one row per kernel)"
    if not c.launches:
        raise CorruptTrace(path, "the CSV has a header but no kernel rows", LABEL)
    progress(0.8, "building tables")
    wide = c.wide()
    kernels, warnings = nc.kernels_table(path, c, wide)
    devices = nc.devices_table(c, wide)
    if content.truncated:
        warnings.append(Diagnostic.warning("truncated", path, "the compressed file is cut short; the kernels before the cut were loaded"))
    elif not text.rstrip(" \t").endswith("\n"):
        # ncu ends every row with a line break: without one the last row was cut (a raw-page
        # kernel loses metrics, a details page loses the rest of its kernels)
        warnings.append(Diagnostic.warning("truncated", path, "the file does not end with a line break (cut short?): its last row may be incomplete"))
    if skipped:
        warnings.append(Diagnostic.warning("skipped", path, f"{skipped} line(s) after the CSV header that are not CSV records were skipped"))
    extra: dict[str, object] = {"kernels profiled": len(c.launches)}
    procs = sorted({(r["Process Name"], r["Process ID"]) for r in _first_rows(df)} - {("", "")})
    if procs:
        extra["process"] = ", ".join(f"{name} (pid {pid})" if pid else name for name, pid in procs)
    meta = TraceMeta(
        path=str(path),
        source_format="ncu-csv",
        format_label=f"Nsight Compute CSV, {page}" + (", captured ncu output" if captured else ""),
        tool=nc.TOOL,
        warnings=warnings,
        extra=extra,
    )
    return Trace(meta=meta, kernels=kernels, devices=devices, metrics=nc.metrics_table(c))


def _first_rows(df: pd.DataFrame) -> list[dict[str, str]]:
    cols = [x for x in ("Process Name", "Process ID") if x in df.columns]
    if len(cols) < 2:
        return []
    return df[cols].drop_duplicates().to_dict(orient="records")  # type: ignore[return-value]


def _triple(text: str) -> tuple[int, int, int]:
    nums = [int(x) for x in re.findall(r"\d+", text.replace(",", " "))] if text else []
    if len(nums) == 3:
        return nums[0], nums[1], nums[2]
    if len(nums) == 1:
        return nums[0], 1, 1
    return -1, -1, -1


def _int(text: str) -> int:
    v = nc.parse_number(text)
    return -1 if math.isnan(v) else int(v)


def _launch(row: dict[str, str]) -> nc.KernelLaunch:
    return nc.KernelLaunch(
        name=row.get("Kernel Name", ""),
        grid=_triple(row.get("Grid Size", "")),
        block=_triple(row.get("Block Size", "")),
        device=_int(row.get("Device", "")),
        stream=_int(row.get("Stream", "")),
        pid=_int(row.get("Process ID", "")),
        cc=row.get("CC", "").strip(),
    )


def _ids_in_order(ids: pd.Series) -> tuple[list[str], np.ndarray]:
    """Distinct result IDs in launch order (ncu numbers results in launch order) and row -> kernel."""
    uniq = list(dict.fromkeys(ids.tolist()))
    order = sorted(uniq, key=lambda s: (nc.parse_number(s) if not math.isnan(nc.parse_number(s)) else math.inf))
    pos = {v: i for i, v in enumerate(order)}
    return order, ids.map(pos).to_numpy(dtype=np.int64)


def _add_identity_metrics(c: nc.Collected, k: int, row: dict[str, str], present: set[str]) -> None:
    """The context id is not a kernels column: keep it as the metric the report calls it."""
    if "Context" in row and "launch__context_id" not in present:
        c.add(k, "", "launch__context_id", "", nc.parse_number(row["Context"]), row["Context"])


def _collect_raw(path: Path, df: pd.DataFrame) -> nc.Collected:
    units: dict[Any, Any] = {}
    if len(df) and df["ID"].iloc[0] == "":
        units = df.iloc[0].to_dict()
        df = df.iloc[1:]
    df = df[df["ID"] != ""]
    metric_cols = [col for col in df.columns if col not in IDENTITY and _METRIC_NAME.match(col)]
    text_cols = [col for col in df.columns if col not in IDENTITY and col not in metric_cols]
    if not metric_cols:
        raise CorruptTrace(path, "a raw-page CSV without metric columns", LABEL)
    order, kidx = _ids_in_order(df["ID"])
    c = nc.Collected()
    first = _identity_rows(df)
    for rid in order:
        c.launches.append(_launch(first[rid]))
    present = set(metric_cols)
    kernels = kidx.tolist()
    cells = df[metric_cols].to_numpy(dtype=object)
    for j, col in enumerate(metric_cols):
        texts = cells[:, j].tolist()
        values, base = nc.normalise(texts, units.get(col, ""))
        section = nc.METRIC_SECTION.get(col, "")
        c.m_kernel += kernels
        c.m_section += [section] * len(texts)
        c.m_metric += [col] * len(texts)
        c.m_unit += [base] * len(texts)
        c.m_value += values.tolist()
        c.m_text += texts
    for col in text_cols:
        section = "nvtx" if "nvtx" in col.lower() or "domain" in col.lower() else "attribute"
        for k, t in zip(kernels, df[col].tolist()):
            if t:
                c.add(k, section, col, "", math.nan, t)
    for k, rid in enumerate(order):
        _add_identity_metrics(c, k, first[rid], present)
    return c


def _identity_rows(df: pd.DataFrame) -> dict[str, dict[Any, Any]]:
    """Result ID -> its identity columns (from the first row of that ID)."""
    cols = [col for col in IDENTITY if col in df.columns]
    rows = df[cols].drop_duplicates("ID").to_dict(orient="records")
    return {r["ID"]: r for r in rows}


def _collect_long(path: Path, df: pd.DataFrame) -> nc.Collected:
    df = df[df["ID"] != ""]
    order, kidx = _ids_in_order(df["ID"])
    c = nc.Collected()
    first = _identity_rows(df)
    for rid in order:
        c.launches.append(_launch(first[rid]))
    has_rules = all(col in df.columns for col in RULE)
    sections = df["Section Name"].tolist()
    labels = df["Metric Name"].tolist()
    units = df["Metric Unit"].tolist()
    texts = df["Metric Value"].tolist()
    rule_names = df["Rule Name"].tolist() if has_rules else [""] * len(df)
    rule_cols = [df[col].tolist() for col in RULE[1:]] if has_rules else []
    present: set[str] = set()
    for i, k in enumerate(kidx.tolist()):
        if rule_names[i]:
            rtype, desc, sp_type, sp = (col[i] for col in rule_cols)
            c.add(k, *nc.rule_row(rule_names[i], rtype, desc, sp_type.strip(), nc.parse_number(sp)))
            continue
        if not labels[i]:
            continue
        metric = nc.metric_for_label(sections[i], labels[i])
        base, factor = nc.parse_unit(units[i])
        value = nc.parse_number(texts[i]) * factor
        present.add(metric)
        c.add(k, sections[i], metric, base, value, texts[i])
    for k, rid in enumerate(order):
        _add_identity_metrics(c, k, first[rid], present)
    return c


LOADER = LoaderSpec(name="ncu-csv", label=LABEL, priority=55, sniff=sniff, load=load)

__all__ = ["LOADER", "load", "sniff"]
