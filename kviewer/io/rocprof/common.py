"""Pieces shared by the ROCm profiler loaders (rocprof v1, rocprofv2, rocprofv3).

Nothing here opens a trace by itself: the loader modules (:mod:`kviewer.io.rocprof.v1_csv`,
:mod:`kviewer.io.rocprof.v2_csv`, :mod:`kviewer.io.rocprof.v3_csv`, :mod:`kviewer.io.rocprof.v1_db`,
:mod:`kviewer.io.rocprof.v3_json`) call these helpers.

Conventions every ROCm loader follows
-------------------------------------
* ``kernels.name`` is the tool's kernel name with the code-object suffix (`` [clone .kd]``,
  ``.kd``, `` (.kd)``) removed, the same way for every rocprof generation, so that a kernel has
  one name whichever file it came from and rocprof's own ``results.stats.csv`` (whose names keep
  the suffix) can be matched after :func:`kviewer.core.names.strip_kd`.
* ROCm timestamps are boot-clock nanoseconds, not epoch: tables are made relative to the first
  event of the file and ``meta.origin_ns`` stays ``None``; the absolute value that was subtracted
  goes in ``meta.extra["time_base_ns"]`` so two files of one run can still be aligned.
* Hardware counters go to the ``metrics`` table (section ``"rocprof"``); FETCH_SIZE and
  WRITE_SIZE are also copied, converted to bytes, into ``kernels.dram_read_bytes`` /
  ``dram_write_bytes`` (see :data:`KIB_COUNTERS`).
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from kviewer.core import Diagnostic, schema
from kviewer.core.names import short_name, strip_kd
from kviewer.errors import CorruptTrace, LoadError

SECTION = "rocprof"

#: rocprof's FETCH_SIZE and WRITE_SIZE are kilobytes (KiB). rocprofiler's metrics.xml defines them
#: as ``(TCC_EA_RDREQ_32B_sum*32 + (TCC_EA_RDREQ_sum-TCC_EA_RDREQ_32B_sum)*64)/1024`` -- 32 and
#: 64 byte requests counted in bytes, divided by 1024 -- and describes them as "the total
#: kilobytes fetched from / written to the video memory". The data agrees: the values are
#: multiples of 1/32 (32 B / 1024), e.g. 9.125 KiB = 292 requests of 32 B. rocprofv3 keeps the
#: same derived-metric definitions, so the same factor applies to its counter_collection.csv.
KIB_COUNTERS = {"FETCH_SIZE": "dram_read_bytes", "WRITE_SIZE": "dram_write_bytes"}

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def norm(col: str) -> str:
    """Normalise a column name so the header spellings of every rocprof generation compare equal:
    ``"gpu-id"``, ``GPU_ID`` and ``gpuid`` all become ``gpuid``; ``Kernel_Name`` / ``KernelName``
    / ``KERNELNAME`` become ``kernelname``."""
    return re.sub(r"[^a-z0-9]", "", col.strip().strip('"').lower())


def first_line(head: bytes) -> str:
    """The first line of a text head, decoded (BOM removed); '' when it is not text."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    line = head.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def header_fields(head: bytes) -> list[str]:
    """The normalised column names of a CSV head (first line only, parsed with the csv module)."""
    line = first_line(head)
    if not line or "," not in line:
        return []
    try:
        row = next(csv.reader([line]))
    except (csv.Error, StopIteration):
        return []
    return [norm(c) for c in row]


# ---------------------------------------------------------------------------------------------
# CSV reading with honest errors


@dataclass
class CsvTable:
    """A parsed CSV: numeric columns as pandas inferred them (C parser), the columns the loader
    asked to keep as text as str, plus what had to be dropped."""

    frame: pd.DataFrame
    """the file's own header names as columns"""
    columns: dict[str, str]
    """normalised name -> the file's own header name"""
    warnings: list[Diagnostic] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        return all(n in self.columns for n in names)

    def text(self, name: str) -> np.ndarray:
        col = self.frame[self.columns[name]]
        if pd.api.types.is_numeric_dtype(col.dtype):
            return col.astype(str).to_numpy(dtype=object)
        return col.to_numpy(dtype=object)


def read_csv_text(
    data: bytes, path: Path, recognised: str, as_text: Callable[[str], bool] | None = None
) -> CsvTable:
    """Parse CSV bytes with pandas' C parser.

    Columns whose normalised name ``as_text`` accepts are kept as text (names, counter values
    whose printed form is kept); the others get pandas' type inference, so the usual all-integer
    column arrives as int64 without a per-cell Python step. :func:`numbers` checks them.

    A last row that is cut short (fewer fields than the header, or an unterminated quote) is
    dropped with a warning: the file was probably still being written. Any other malformed row
    raises :class:`CorruptTrace` naming the line.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    warnings: list[Diagnostic] = []
    header = _fields(data[: data.find(b"\n") if b"\n" in data else len(data)])
    if not header:
        raise CorruptTrace(path, "has no CSV header", recognised)
    dtype = {h: str for h in header if as_text is None or as_text(norm(h))}
    # pandas pads a short row with empty cells, so count the last line's fields here: fewer than
    # the header means the writer was cut off mid-row (parsing first would turn that row's empty
    # integer cells into NaN and the whole column into float64, losing timestamp precision)
    body = data.rstrip(b"\r\n \t")
    last_nl = body.rfind(b"\n")
    if last_nl > 0:
        n_fields = len(_fields(body[last_nl + 1 :]))
        if n_fields < len(header):
            data = body[: last_nl + 1]
            warnings.append(
                Diagnostic.warning("truncated", path, f"the last row has {n_fields} of {len(header)} fields (the file was cut short?); it was skipped")
            )
        elif not data.rstrip(b" \t").endswith(b"\n"):
            # every rocprof writes a line break after each row: a cut inside the last field
            # leaves all the fields there, with a shortened last value
            warnings.append(
                Diagnostic.warning("truncated", path, "the file does not end with a line break (cut short?): the last row's values may be incomplete")
            )
    try:
        frame = _read(data, dtype)
    except pd.errors.ParserError as exc:
        # a quote left open by a cut-off last line makes the C parser fail at EOF: retry once
        # without the last line, and say so
        body = data.rstrip(b"\r\n")
        cut = body.rfind(b"\n")
        if cut <= 0 or warnings:
            raise CorruptTrace(path, f"malformed CSV ({_first_sentence(exc)})", recognised) from exc
        try:
            frame = _read(body[: cut + 1], dtype)
        except pd.errors.ParserError as exc2:
            raise CorruptTrace(path, f"malformed CSV ({_first_sentence(exc2)})", recognised) from exc2
        warnings.append(Diagnostic.warning("truncated", path, "the last line is incomplete (the file was cut short?); it was skipped"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptTrace(path, f"not readable as CSV text ({_first_sentence(exc)})", recognised) from exc
    frame.columns = [str(c) for c in frame.columns]
    columns: dict[str, str] = {}
    for c in frame.columns:
        columns.setdefault(norm(c), c)
    return CsvTable(frame, columns, warnings)


def _fields(line: bytes) -> list[str]:
    try:
        return next(csv.reader([line.decode("utf-8", errors="replace").rstrip("\r")]))
    except (csv.Error, StopIteration):
        return []


def _read(data: bytes, dtype: Mapping[str, type]) -> pd.DataFrame:
    # text columns stay text ("" for an empty cell); numeric ones are inferred by the C parser
    return pd.read_csv(
        io.BytesIO(data),
        dtype=dtype,
        keep_default_na=False,
        na_values=[""],
        skip_blank_lines=True,
        encoding="utf-8",
        encoding_errors="replace",
        low_memory=False,
    )


def _first_sentence(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def require(table: CsvTable, names: Sequence[str], path: Path, recognised: str, spelled: Mapping[str, str]) -> None:
    """Raise :class:`CorruptTrace` listing the required columns the header lacks."""
    missing = [n for n in names if n not in table.columns]
    if missing:
        shown = ", ".join(spelled.get(n, n) for n in missing)
        raise CorruptTrace(path, f"the header lacks the column(s) {shown}", recognised)


def numbers(table: CsvTable, name: str, path: Path, recognised: str, integer: bool = True) -> np.ndarray:
    """A column as int64 (or float64), raising :class:`CorruptTrace` on the first non-number
    (or, for ``integer``, the first empty cell)."""
    header = table.columns[name]
    col = table.frame[header]
    if pd.api.types.is_integer_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        return col.to_numpy(dtype=np.int64) if integer else col.to_numpy(dtype=np.float64)
    if pd.api.types.is_float_dtype(col.dtype):
        arr = col.to_numpy(dtype=np.float64)
        if integer:
            if np.isnan(arr).any():
                row = int(np.flatnonzero(np.isnan(arr))[0])
                raise CorruptTrace(path, f"row {row + 1} (line {row + 2}): column {header} is empty", recognised)
            _check_int64(arr, col, header, path, recognised)
            return arr.astype(np.int64)
        return arr
    # text (kept as text on purpose, or something in it is not a number)
    try:
        arr = pd.to_numeric(col).to_numpy(dtype=np.float64, na_value=np.nan)  # C fast path
        if not integer:
            return arr
        if not np.isnan(arr).any() and np.abs(arr).max(initial=0) < 2**53:
            return arr.astype(np.int64)
    except (ValueError, TypeError):
        pass
    # the slow way, which finds the offending row
    raw = col.astype(str).str.strip()
    values = pd.to_numeric(raw, errors="coerce")
    bad = values.isna().to_numpy() & (raw != "").to_numpy() & (raw.str.lower() != "nan").to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise CorruptTrace(
            path, f"row {row + 1} (line {row + 2}): column {header} is {col.iloc[row]!r}, not a number", recognised
        )
    arr = values.to_numpy(dtype=np.float64, na_value=np.nan)
    if not integer:
        return arr
    if np.isnan(arr).any():
        row = int(np.flatnonzero(np.isnan(arr))[0])
        raise CorruptTrace(path, f"row {row + 1} (line {row + 2}): column {header} is empty", recognised)
    _check_int64(arr, col, header, path, recognised)
    # int64 timestamps (~1e15) are exact in float64 only up to 2**53; parse the text as int
    if np.abs(arr).max(initial=0) >= 2**53:
        return np.array([int(float(x)) if "." in x or "e" in x.lower() else int(x) for x in raw], dtype=np.int64)
    return arr.astype(np.int64)


def _check_int64(arr: np.ndarray, col: pd.Series, header: str, path: Path, recognised: str) -> None:
    """Raise :class:`CorruptTrace` on the first value an int64 cannot hold (1e400, 10**23):
    a cast would silently wrap it (and numpy warns)."""
    bad = ~np.isfinite(arr) | (np.abs(arr) >= 2.0**63)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise CorruptTrace(
            path, f"row {row + 1} (line {row + 2}): column {header} is {col.iloc[row]!r}, out of the integer range", recognised
        )


# ---------------------------------------------------------------------------------------------
# names, times, devices


def kernel_names(raw: Iterable[Any]) -> tuple[pd.Categorical, pd.Categorical]:
    """``(name, short_name)`` categoricals from raw rocprof kernel names.

    Each distinct raw name is normalised once (quotes some rocprof versions store inside the
    value, surrounding blanks, the ``.kd`` suffixes), so this stays fast on millions of rows.
    """
    codes, uniques = pd.factorize(np.asarray(raw, dtype=object), use_na_sentinel=False)
    cleaned = [display_name(str(u)) for u in uniques]
    codes2, names = pd.factorize(np.asarray(cleaned, dtype=object), use_na_sentinel=False)
    final = codes2[codes] if len(codes) else codes
    name = pd.Categorical.from_codes(final, categories=pd.Index(names, dtype=object))
    shorts = [short_name(n) if n else "" for n in names]
    scodes, suniq = pd.factorize(np.asarray(shorts, dtype=object), use_na_sentinel=False)
    short = pd.Categorical.from_codes(scodes[final] if len(final) else final, categories=pd.Index(suniq, dtype=object))
    return name, short


def display_name(raw: str) -> str:
    """One rocprof kernel name as kviewer shows it (see the module docstring)."""
    s = raw.strip()
    # rocprof v1's results.db stores KernelName with its CSV quotes inside the text
    if len(s) >= 2 and s[0] == '"' and s[-1] == '"':
        s = s[1:-1]
    return strip_kd(s.strip())


def ceil_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """Workgroups from work-items: rocprof's grid sizes count work-items (HSA grid), kviewer's
    grid columns count workgroups (CUDA blocks). A partial last workgroup still counts."""
    num = np.asarray(num, dtype=np.int64)
    den = np.asarray(den, dtype=np.int64)
    out = np.full(num.shape, -1, dtype=np.int64)
    ok = (den > 0) & (num >= 0)
    out[ok] = -(-num[ok] // den[ok])
    return out


def compressed_cut(path: Path) -> Diagnostic:
    """A compressed CSV whose stream ends early (what was before the cut was loaded)."""
    return Diagnostic.warning("truncated", path, "the compressed file ends early; the rows before the cut were loaded")


def clamp_ends(
    start: np.ndarray, end: np.ndarray, warnings: list[Diagnostic], file: Path, what: str = "dispatch(es)"
) -> np.ndarray:
    """``end`` with rows that end before they begin set to their start (duration 0), and a warning
    counting them: rocprof's clocks occasionally run backwards between two reads."""
    bad = end < start
    if bad.any():
        warnings.append(Diagnostic.warning("inconsistent", file, f"{what}: {int(bad.sum())} end before they begin; their duration is set to 0"))
        return np.where(bad, start, end)
    return end


def rebase(arrays: Sequence[np.ndarray]) -> int | None:
    """The smallest valid (>= 0) timestamp over the arrays: the time base the tables subtract."""
    lows = [int(a[a >= 0].min()) for a in arrays if len(a) and (a >= 0).any()]
    return min(lows) if lows else None


def clock_extra(base: int | None) -> dict[str, Any]:
    if base is None:
        return {}
    return {
        "clock": "ROCm boot-clock ns (not epoch); times are relative to the first event",
        "time_base_ns": base,
    }


def dense_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(index, uniques)``: each value's position among the sorted distinct values."""
    uniques, inverse = np.unique(np.asarray(values, dtype=np.int64), return_inverse=True)
    return inverse.astype(np.int32), uniques


def devices_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The devices table from dicts of schema columns (vendor defaults to AMD)."""
    cols: dict[str, list[Any]] = {}
    for name in schema.DEVICES.names:
        col = schema.DEVICES.column(name)
        default: Any = "AMD" if name == "vendor" else (
            -1 if col.dtype in (schema.INT, schema.I32) else (math.nan if col.dtype == schema.FLOAT else "")
        )
        cols[name] = [r.get(name, default) for r in rows]
    return schema.make_table("devices", len(rows), cols)


# ---------------------------------------------------------------------------------------------
# counters -> metrics and kernel columns


def counter_unit(metric: str) -> str:
    """A base unit for a raw rocprof counter, where its name says it; '' (a count) otherwise."""
    m = metric.upper()
    if m in KIB_COUNTERS:
        return "byte"
    if "CYCLES" in m or m in ("GRBM_COUNT", "GRBM_GUI_ACTIVE") or m.endswith("_BUSY") or "_BUSY_" in m:
        return "cycle"
    return ""


def metrics_from_wide(
    kernel_ids: np.ndarray,
    counters: Mapping[str, tuple[np.ndarray, np.ndarray]],
    section: str = SECTION,
    units: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """The metrics table from wide counter columns (one column per counter, one row per kernel).

    ``counters[name] = (values float64, texts object)``; ``kernel_ids[i]`` is the final kernel id
    of row ``i``. Values of :data:`KIB_COUNTERS` are converted to bytes (in the ``rocprof``
    section); ``text`` keeps what the tool printed. Rows come out grouped by kernel, each
    kernel's counters in column order, placed by index arithmetic rather than a sort of
    n x k rows.
    """
    names = list(counters)
    k = len(names)
    n = len(kernel_ids)
    if not k or not n:
        return schema.empty("metrics")
    order = np.argsort(np.asarray(kernel_ids, dtype=np.int64), kind="stable")
    slot = np.empty(n, dtype=np.int64)
    slot[order] = np.arange(n, dtype=np.int64)
    value = np.empty(n * k, dtype=np.float64)
    text = np.empty(n * k, dtype=object)
    for j, name in enumerate(names):
        values, texts = counters[name]
        scale = 1024.0 if section == SECTION and name.upper() in KIB_COUNTERS else 1.0
        value[slot * k + j] = np.asarray(values, dtype=np.float64) * scale
        text[slot * k + j] = np.asarray(texts, dtype=object)
    unit_of = {m: (units or {}).get(m, counter_unit(m) if section == SECTION else "") for m in names}
    unit_names = list(dict.fromkeys(unit_of.values()))
    unit_codes = np.array([unit_names.index(unit_of[m]) for m in names], dtype=np.int64)
    return schema.make_table(
        "metrics",
        n * k,
        {
            "kernel": np.repeat(np.asarray(kernel_ids, dtype=np.int64)[order], k),
            "section": pd.Categorical.from_codes(np.zeros(n * k, dtype=np.int64), categories=pd.Index([section])),
            "metric": pd.Categorical.from_codes(np.tile(np.arange(k), n), categories=pd.Index(names, dtype=object)),
            "unit": pd.Categorical.from_codes(np.tile(unit_codes, n), categories=pd.Index(unit_names, dtype=object)),
            "value": value,
            "text": text,
        },
    )


def launch_metrics(kernel_ids: np.ndarray, launch: Mapping[str, tuple[np.ndarray, np.ndarray, str]]) -> pd.DataFrame:
    """Launch attributes with no kernels column of their own (SGPRs, scratch, wave size, ...) as
    metrics of section ``"launch"``: ``launch[metric] = (values, texts, unit)``."""
    return metrics_from_wide(
        kernel_ids,
        {m: (v, t) for m, (v, t, _u) in launch.items()},
        section="launch",
        units={m: u for m, (_v, _t, u) in launch.items()},
    )


def concat_metrics(*frames: pd.DataFrame) -> pd.DataFrame:
    """Several metrics tables as one, categorical columns kept categorical (categories united)."""
    frames = tuple(f for f in frames if len(f))
    if not frames:
        return schema.empty("metrics")
    if len(frames) == 1:
        return frames[0]
    def as_object(col: pd.Series) -> pd.Categorical:
        # categories built from str arrays and from object arrays differ in dtype; unify them
        cat = col.astype("category").cat
        return pd.Categorical.from_codes(cat.codes, categories=pd.Index(list(cat.categories), dtype=object))

    cats = {
        c: pd.api.types.union_categoricals([as_object(f[c]) for f in frames]) for c in ("section", "metric", "unit")
    }
    out = pd.concat([f.drop(columns=list(cats)) for f in frames], ignore_index=True)
    for c, values in cats.items():
        out[c] = values
    return out[schema.METRICS.names]


def dram_columns(counters: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """kernels.dram_read_bytes / dram_write_bytes / dram_bytes from FETCH_SIZE / WRITE_SIZE (KiB)."""
    out: dict[str, np.ndarray] = {}
    for metric, column in KIB_COUNTERS.items():
        for name, values in counters.items():
            if name.upper() == metric:
                out[column] = np.asarray(values, dtype=np.float64) * 1024.0
    if "dram_read_bytes" in out and "dram_write_bytes" in out:
        out["dram_bytes"] = out["dram_read_bytes"] + out["dram_write_bytes"]
    return {k: v for k, v in out.items() if len(v) == n}


#: rocprof's FLOP counters (the formulas of rocprofiler-compute's roofline): VALU instructions count
#: one per wavefront, 64 lanes each (an FMA is two FLOPs); ``SQ_INSTS_VALU_MFMA_MOPS_<type>``
#: counts matrix-core operations in units of 512 FLOPs
_VALU = {"F16": "flops_fp16", "F32": "flops_fp32", "F64": "flops_fp64"}
_MFMA = {"F16": "fp16", "BF16": "bf16", "F32": "tf32", "F64": "fp64", "I8": "int8", "F8": "fp8"}


def flops_columns(counters: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """kernels.flops_fp16/fp32/fp64 from ``SQ_INSTS_VALU_{ADD,MUL,TRANS,FMA}_F*`` and
    kernels.flops_tensor / tensor_precision from ``SQ_INSTS_VALU_MFMA_MOPS_*`` (only counters that
    were collected; a family needs all its counters)."""
    up = {name.upper(): np.asarray(v, dtype=np.float64) for name, v in counters.items() if len(v) == n}
    out: dict[str, np.ndarray | Any] = {}
    for p, column in _VALU.items():
        parts = [f"SQ_INSTS_VALU_{op}_{p}" for op in ("ADD", "MUL", "TRANS", "FMA")]
        if all(x in up for x in parts[:2] + parts[3:]):
            total = up[parts[0]] + up[parts[1]] + up.get(parts[2], 0.0) + 2.0 * up[parts[3]]
            out[column] = 64.0 * total
    mfma = {prec: up[f"SQ_INSTS_VALU_MFMA_MOPS_{t}"] * 512.0 for t, prec in _MFMA.items() if f"SQ_INSTS_VALU_MFMA_MOPS_{t}" in up}
    if mfma:
        names = sorted(mfma)
        grid = np.vstack([mfma[k] for k in names])
        out["flops_tensor"] = np.nansum(grid, axis=0)
        filled = np.nan_to_num(grid, nan=0.0)
        out["tensor_precision"] = np.where(filled.max(axis=0) > 0, np.asarray(names, dtype=object)[np.argmax(filled, axis=0)], "").astype(object)
    return out


# ---------------------------------------------------------------------------------------------
# rocprof --stats files


@dataclass
class StatsRow:
    name: str
    calls: int
    total_ns: float
    values: dict[str, float] = field(default_factory=dict)
    """every numeric column by its normalised header name (averagens, percentage, minns, maxns, stddev)"""


def parse_stats(data: bytes, path: Path) -> list[StatsRow]:
    """Parse a rocprof statistics CSV (``results.stats.csv``, ``results.hip_stats.csv``,
    rocprofv3 ``*_stats.csv``).

    Old rocprof v1 wrote names unquoted even when they contain commas (Kokkos template names),
    so a row is read from the right: the header says how many numeric fields follow the name
    (4 for v1: Calls, TotalDurationNs, AverageNs, Percentage; 7 for rocprofv3), and every field
    before them is the name, joined back with commas.
    """
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except StopIteration:
        raise LoadError(path, "the file is empty", "rocprof statistics CSV") from None
    except csv.Error as exc:  # a field over the csv module's limit, a NUL byte
        raise CorruptTrace(path, f"malformed CSV header ({exc})", "rocprof statistics CSV") from exc
    numeric = len(header) - 1
    keys = [norm(h) for h in header[1:]]
    rows: list[StatsRow] = []
    lineno = 1
    try:
        for lineno, fields in enumerate(reader, start=2):
            if not fields or all(not f.strip() for f in fields):
                continue
            if len(fields) < numeric + 1:
                raise CorruptTrace(path, f"line {lineno} has {len(fields)} fields, expected {numeric + 1}", "rocprof statistics CSV")
            name = ",".join(fields[: len(fields) - numeric])
            try:
                calls = int(float(fields[-numeric]))
                total = float(fields[-numeric + 1])
            except (ValueError, OverflowError):
                raise CorruptTrace(path, f"line {lineno}: calls/total are not numbers", "rocprof statistics CSV") from None
            if not 0 <= calls < 2**63:
                raise CorruptTrace(path, f"line {lineno}: the call count {fields[-numeric]!r} is out of range", "rocprof statistics CSV")
            if not (math.isfinite(total) and abs(total) < 2.0**63):
                raise CorruptTrace(path, f"line {lineno}: the total {fields[-numeric + 1]!r} is not a duration in ns", "rocprof statistics CSV")
            values: dict[str, float] = {}
            for key, text in zip(keys, fields[len(fields) - numeric :]):
                try:
                    values[key] = float(text)
                except (ValueError, OverflowError):
                    values[key] = math.nan
            rows.append(StatsRow(name, calls, total, values))
    except csv.Error as exc:
        raise CorruptTrace(path, f"malformed CSV after line {lineno} ({exc})", "rocprof statistics CSV") from exc
    return rows


def is_stats_header(fields: Sequence[str]) -> bool:
    return len(fields) >= 5 and list(fields[:5]) == ["name", "calls", "totaldurationns", "averagens", "percentage"]


def refuse_stats(path: Path, data: bytes, siblings: Sequence[str]) -> LoadError:
    """The error for a statistics file: it has no per-dispatch times, so there is no timeline or
    kernel table to build (expanding "Calls" into fake kernels would invent start times)."""
    rows = parse_stats(data, path)
    calls = sum(r.calls for r in rows)
    total = sum(r.total_ns for r in rows)
    beside = [s for s in siblings if (path.parent / s).exists()]
    hint = (
        f"open {beside[0]} beside it instead"
        if beside
        else "open the per-dispatch trace of the same run instead (results.csv or *_kernel_trace.csv)"
    )
    return LoadError(
        path,
        f"a summary of {len(rows)} names ({calls:,} calls, {total / 1e6:,.3f} ms in total) with no "
        f"per-dispatch start times, so there is no timeline or kernel table to show; {hint}",
        "rocprof statistics CSV (--stats)",
    )


# ---------------------------------------------------------------------------------------------
# rocminfo dump (results.sysinfo.txt)


@dataclass
class HsaAgent:
    index: int
    fields: dict[str, str]

    @property
    def is_gpu(self) -> bool:
        return self.fields.get("Device Type", "").upper() == "GPU"


def parse_rocminfo(text: str) -> list[HsaAgent]:
    """The agents of a ``rocminfo`` dump (rocprof v1 writes one as ``results.sysinfo.txt``).

    Only each agent's own top-level ``  Key: value`` lines are kept (pools and ISAs are nested
    deeper), plus the first coarse-grained global pool size as ``Global Pool Size``.
    """
    text = _ANSI.sub("", text)
    agents: list[HsaAgent] = []
    current: dict[str, str] | None = None
    in_pool = False
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        m = re.fullmatch(r"Agent (\d+)", stripped)
        if m and i > 0 and lines[i - 1].strip().startswith("****"):
            current = {}
            agents.append(HsaAgent(int(m.group(1)), current))
            in_pool = False
            continue
        if current is None or ":" not in line:
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, _, value = stripped.partition(":")
        if indent == 2:
            current.setdefault(key.strip(), value.strip())
            in_pool = False
        elif indent == 6 and key.strip() == "Segment":
            in_pool = "GLOBAL" in value and "COARSE" in value and "Global Pool Size" not in current
        elif indent == 6 and key.strip() == "Size" and in_pool:
            kb = re.match(r"\s*(\d+)", value)
            if kb:
                current["Global Pool Size"] = str(int(kb.group(1)) * 1024)
            in_pool = False
    return agents


def rocminfo_device(agent: HsaAgent, device_id: int) -> dict[str, Any]:
    f = agent.fields

    def num(key: str) -> float:
        m = re.match(r"\s*([0-9.]+)", f.get(key, ""))
        return float(m.group(1)) if m else math.nan

    cu = num("Compute Unit")
    clock = num("Max Clock Freq. (MHz)")
    mem = num("Global Pool Size")
    return {
        "id": device_id,
        "name": f.get("Marketing Name") or f.get("Name", ""),
        "vendor": "AMD",
        "architecture": f.get("Name", ""),
        "sm_count": -1 if math.isnan(cu) else int(cu),
        "sm_clock_hz": clock * 1e6,
        "memory_bytes": -1 if math.isnan(mem) else int(mem),
    }


def sysinfo_beside(path: Path) -> tuple[list[HsaAgent], str | None, dict[str, str]]:
    """GPU agents from the rocminfo dump rocprof v1 writes beside its results (``<stem>.sysinfo.txt``)."""
    candidate = path.with_name(path.name.split(".")[0] + ".sysinfo.txt")
    if not candidate.is_file():
        return [], None, {}
    try:
        text = candidate.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], None, {}
    if "HSA Agents" not in text:
        return [], None, {}
    clean = _ANSI.sub("", text)
    info: dict[str, str] = {}
    m = re.search(r"ROCk module version (\S+)", clean)
    if m:
        info["rock_module"] = m.group(1)
    m = re.search(r"^Runtime Version:\s*(\S+)", clean, re.MULTILINE)
    if m:
        info["hsa_runtime"] = m.group(1)
    return [a for a in parse_rocminfo(text) if a.is_gpu], candidate.name, info
