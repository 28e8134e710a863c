"""Nsight Systems GPU metrics sampling (``nsys profile --gpu-metrics-devices=all``) into ``gpu_samples``.

The export holds the samples in ``GPU_METRICS`` (``timestamp``, ``typeId``, ``metricId``,
``value``; one row per metric per sample) and names the metrics in ``TARGET_INFO_GPU_METRICS``
(``typeId``, ``sourceId``, ``typeName``, ``metricId``, ``metricName``). ``typeId`` is the metric
source (one per GPU sampled; see :func:`devices_of_types` for how it is tied to a GPU) and
``metricId`` the metric within it. Every nsys version that has the
table writes these columns (older ones without ``sourceId``); whatever else a version adds is
not read. ``value`` is an integer in the unit of the name's brackets (``SMs Active [Throughput
%]``), except the ``[MHz]`` clocks, which nsys 2025.3 stores in Hz: those are divided to MHz.

Memory: 10 kHz x 60 s x 20 metrics is 12 million rows a GPU. The rows are read in rowid chunks
(SQLite prints each chunk's columns as text, numpy parses them in C: no Python object per row)
and scattered straight into the final columns, which are sized from one ``GROUP BY`` count per
(typeId, metricId) first: the load never holds more than the final table plus one chunk. The
table comes out sorted by (device, metric, time), so one metric of one GPU is a contiguous
slice (the timeline's counter tracks are views of it, not copies).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kviewer.core import schema

if TYPE_CHECKING:
    import sqlite3

SAMPLES_TABLE = "GPU_METRICS"
NAMES_TABLE = "TARGET_INFO_GPU_METRICS"
#: rows per chunk (rowid range): a few MB of text per column
CHUNK = 131072


@dataclass(frozen=True)
class Group:
    type_id: int
    metric_id: int
    device: int
    name: str
    count: int


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in con.execute(f'pragma table_info("{table}")').fetchall()}


def available(con: sqlite3.Connection, tables: set[str]) -> bool:
    return SAMPLES_TABLE in tables and {"timestamp", "typeId", "metricId", "value"} <= _columns(con, SAMPLES_TABLE)


def _names(con: sqlite3.Connection, tables: set[str]) -> tuple[dict[tuple[int, int], str], dict[int, str]]:
    """Metric names by (typeId, metricId), and by metricId alone (for a typeId the table lacks)."""
    by_pair: dict[tuple[int, int], str] = {}
    by_id: dict[int, str] = {}
    if NAMES_TABLE in tables and {"metricId", "metricName"} <= _columns(con, NAMES_TABLE):
        has_type = "typeId" in _columns(con, NAMES_TABLE)
        sql = f"select {'typeId' if has_type else '-1'}, metricId, metricName from {NAMES_TABLE}"
        for type_id, metric_id, name in con.execute(sql):
            if metric_id is None or name is None:
                continue
            by_pair[(int(type_id if type_id is not None else -1), int(metric_id))] = str(name)
            by_id.setdefault(int(metric_id), str(name))
    return by_pair, by_id


def devices_of_types(type_ids: list[int], gpu_index: Mapping[int, int]) -> dict[int, int]:
    """The trace device each ``typeId`` samples.

    ``typeId`` is a serialised global id (nsys 2025.3 on one H200: ``0x1000100000000``, the
    TARGET_INFO_GPU row's ``vmId`` 1 in bits 48-55, nothing that reads as the GPU's id), and the
    export names no GPU beside it. So: one GPU in the export gets every typeId; several get the
    typeIds in ascending order when there are as many as GPUs (one metric source per GPU); else
    the typeId's low byte read as the GPU's id (how older exports were read by others: unchecked
    on a real multi-GPU file here).
    """
    gpus = sorted(gpu_index)
    uniq = sorted(set(type_ids))
    if len(gpus) == 1:
        return {t: gpu_index[gpus[0]] for t in uniq}
    if gpus and len(uniq) == len(gpus):
        return {t: gpu_index[g] for t, g in zip(uniq, gpus)}
    return {t: gpu_index.get(int(t) & 0xFF, int(t) & 0xFF) for t in uniq}


def read_groups(con: sqlite3.Connection, tables: set[str], gpu_index: Mapping[int, int], counts: Mapping[tuple[int, int], int]) -> list[Group]:
    """Each (typeId, metricId) of ``counts`` (its row count) with its GPU (mapped through
    ``gpu_index``: TARGET_INFO_GPU id -> trace device) and name, sorted by (device, name)."""
    by_pair, by_id = _names(con, tables)
    device_of = devices_of_types([t for t, _ in counts], gpu_index)
    groups = []
    for (t, m), n in counts.items():
        name = by_pair.get((t, m)) or by_pair.get((-1, m)) or by_id.get(m) or f"metric {m}"
        groups.append(Group(t, m, device_of[t], name, int(n)))
    groups.sort(key=lambda g: (g.device, g.name, g.type_id, g.metric_id))
    return groups


def _chunk(con: sqlite3.Connection, lo: int, hi: int, values: bool) -> tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None:
    """The rows in the range and the (timestamp, typeId, metricId, value) of those with rowid in
    ``[lo, hi]`` that could be read (timestamp and value empty unless ``values``), None when the
    range holds no row.

    SQLite prints each column of the chunk as one text (``group_concat``, in C) and numpy parses
    it (in C). A chunk of one typeId (one GPU: the usual case) does not print its 15-digit typeIds.
    A NULL or a fraction anywhere makes the counts disagree: the chunk is then read row by row.
    """
    cols = "group_concat(timestamp), group_concat(metricId), group_concat(value)" if values else "group_concat(metricId)"
    row = con.execute(f"select count(*), min(typeId), max(typeId), count(typeId), {cols} from {SAMPLES_TABLE} "
                      "where rowid between ? and ?", (lo, hi)).fetchone()
    k = int(row[0])
    if not k:
        return None
    parsed: list[np.ndarray | None] = []
    if isinstance(row[1], int) and row[1] == row[2] and row[3] == k:
        ty: np.ndarray | None = np.full(k, int(row[1]), dtype=np.int64)
    else:
        text = con.execute(f"select group_concat(typeId) from {SAMPLES_TABLE} where rowid between ? and ?", (lo, hi)).fetchone()[0]
        ty = _parse(text, k, np.int64)
    if values:
        # values are INTEGER in every export seen: parsed as integers (several times faster than
        # as floats), as floats only when a chunk holds a fraction
        va = _parse(row[6], k, np.int64)
        parsed = [_parse(row[4], k, np.int64), ty, _parse(row[5], k, np.int64), va if va is not None else _parse(row[6], k, np.float64)]
    else:
        parsed = [np.zeros(0, dtype=np.int64), ty, _parse(row[4], k, np.int64), np.zeros(0)]
    if any(p is None for p in parsed):
        return k, _rows(con, lo, hi)
    ts, ty2, mi, va = parsed
    assert ts is not None and ty2 is not None and mi is not None and va is not None
    return k, (ts, ty2, mi, va)


def _parse(text: object, k: int, dtype: type) -> np.ndarray | None:
    """``k`` comma-separated numbers parsed in C, or None (then the chunk is read row by row)."""
    if not isinstance(text, str):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy only warns about text it cannot read
            values: np.ndarray = np.fromstring(text, dtype=dtype, sep=",")
    except (ValueError, DeprecationWarning):
        return None
    return values if len(values) == k else None


def read_samples(
    con: sqlite3.Connection,
    tables: set[str],
    gpu_index: Mapping[int, int],
    check: Callable[[], None] = lambda: None,
) -> pd.DataFrame:
    """The ``gpu_samples`` table of an export (empty when it has no GPU metrics)."""
    return read_samples_counted(con, tables, gpu_index, check)[0]


def read_samples_counted(
    con: sqlite3.Connection,
    tables: set[str],
    gpu_index: Mapping[int, int],
    check: Callable[[], None] = lambda: None,
) -> tuple[pd.DataFrame, int]:
    """:func:`read_samples` and the number of rows the table held as it was read (the rows not
    in the samples could not be read: a NULL, text or out-of-range value)."""
    if not available(con, tables):
        return schema.empty("gpu_samples"), 0
    lo, hi = con.execute(f"select min(rowid), max(rowid) from {SAMPLES_TABLE}").fetchone()
    if lo is None:
        return schema.empty("gpu_samples"), 0
    # pass 1: rows per (typeId, metricId), to size the final columns (a GROUP BY over the whole
    # table sorts it: 23 s for 12M rows, against ~2 s for these chunks)
    counts: dict[tuple[int, int], int] = {}
    rows = 0
    for start in range(int(lo), int(hi) + 1, CHUNK):
        check()
        part = _chunk(con, start, start + CHUNK - 1, values=False)
        if part is None:
            continue
        k, (_, ty, mi, _) = part
        rows += k
        one_type = bool(len(ty)) and bool((ty == ty[0]).all())
        for tid in ([int(ty[0])] if one_type else np.unique(ty).tolist()):
            ids, cnt = np.unique(mi if one_type else mi[ty == tid], return_counts=True)
            for m, c in zip(ids.tolist(), cnt.tolist()):
                counts[(int(tid), int(m))] = counts.get((int(tid), int(m)), 0) + int(c)
    groups = read_groups(con, tables, gpu_index, counts)
    n = sum(g.count for g in groups)
    if not n:
        return schema.empty("gpu_samples"), rows
    names = sorted({g.name for g in groups})
    code_of_name = {name: i for i, name in enumerate(names)}
    t = np.empty(n, dtype=np.int64)
    value = np.empty(n, dtype=np.float64)
    device = np.empty(n, dtype=np.int32)
    codes: np.ndarray = np.empty(n, dtype=np.int32 if len(names) >= 2**15 else np.int16)
    # each group's slice of the final columns, in (device, name) order
    first = np.cumsum([0] + [g.count for g in groups])
    write = first[:-1].copy()
    pair_key = {(g.type_id, g.metric_id): i for i, g in enumerate(groups)}
    for i, g in enumerate(groups):
        device[first[i] : first[i + 1]] = g.device
        codes[first[i] : first[i + 1]] = code_of_name[g.name]
    # key = (position of the typeId among the distinct ones) * 2^24 + metricId -> group, looked up
    # by searchsorted (typeIds are 49-bit numbers: they are ranked first, so the key fits 64 bits)
    types = np.array(sorted({tid for tid, _ in pair_key}), dtype=np.int64)
    keys = np.array([int(np.searchsorted(types, tid)) * (1 << 24) + mid for tid, mid in pair_key], dtype=np.int64)
    key_group = np.array(list(pair_key.values()), dtype=np.int64)
    order = np.argsort(keys)
    keys, key_group = keys[order], key_group[order]

    # pass 2: the rows, each chunk scattered into its groups' slices
    for start in range(int(lo), int(hi) + 1, CHUNK):
        check()
        chunk = _chunk(con, start, start + CHUNK - 1, values=True)
        if chunk is None:
            continue
        ts, ty, mi, va = chunk[1]
        k = len(ts)
        tpos = np.clip(np.searchsorted(types, ty), 0, len(types) - 1)
        key = np.where(types[tpos] == ty, tpos * (1 << 24) + mi, -1)
        pos = np.clip(np.searchsorted(keys, key), 0, len(keys) - 1)
        grp = np.where(keys[pos] == key, key_group[pos], -1)
        srt = np.argsort(grp, kind="stable")
        grp_sorted = grp[srt]
        heads = np.flatnonzero(np.r_[True, grp_sorted[1:] != grp_sorted[:-1]])
        ends = np.r_[heads[1:], k]
        for h, e in zip(heads.tolist(), ends.tolist()):
            gi = int(grp_sorted[h])
            if gi < 0:
                continue  # a NULL typeId/metricId (not counted by the group query)
            w = int(write[gi])
            m = min(e - h, int(first[gi + 1]) - w)  # rows added while reading: never past the group
            sel = srt[h : h + m]
            t[w : w + m] = ts[sel]
            value[w : w + m] = va[sel]
            write[gi] = w + m
    # a group short of rows (rows left out as unreadable) keeps what was read
    filled = write == first[1:]
    if not filled.all():
        keep = np.concatenate([np.arange(first[i], write[i]) for i in range(len(groups))])
        t, value, device, codes = t[keep], value[keep], device[keep], codes[keep]
        first = np.cumsum([0] + [int(write[i] - first[i]) for i in range(len(groups))])
    # samples come in time order in every export seen; sort a group only where they do not
    for i in range(len(groups)):
        a, b = int(first[i]), int(first[i + 1])
        seg = t[a:b]
        if b - a > 1 and not bool(np.all(seg[1:] >= seg[:-1])):
            o = np.argsort(seg, kind="stable")
            t[a:b] = seg[o]
            value[a:b] = value[a:b][o]
    # nsys 2025.3 stores the "[MHz]" clocks in Hz (1,980,020,000 for an H200's 1980 MHz): no GPU
    # clock reaches 100 GHz, so a "[MHz]" metric above 1e5 holds Hz and is shown in its unit
    for i, g in enumerate(groups):
        a, b = int(first[i]), int(first[i + 1])
        if g.name.rstrip().endswith("[MHz]") and b > a and float(np.nanmax(value[a:b])) > 1e5:
            value[a:b] /= 1e6
    metric = pd.Categorical.from_codes(codes, categories=pd.Index(names))
    return schema.make_table("gpu_samples", len(t), {"device": device, "metric": metric, "t": t, "value": value}), rows


def _rows(con: sqlite3.Connection, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One chunk row by row (a NULL or a fraction in a column): unreadable values dropped."""
    out: list[tuple[int, int, int, float]] = []
    for ts, ty, mi, va in con.execute(f"select timestamp, typeId, metricId, value from {SAMPLES_TABLE} where rowid between ? and ?", (lo, hi)):
        try:
            row = (int(ts), int(ty), int(mi), float(va))
        except (TypeError, ValueError, OverflowError):
            continue
        if all(-(2**63) <= x < 2**63 for x in row[:3]):
            out.append(row)
    if not out:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, np.zeros(0)
    a = np.array(out, dtype=object)
    return a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64), a[:, 3].astype(np.float64)


def describe(samples: pd.DataFrame) -> str:
    """One line for ``kviewer info``: how many metrics, GPUs and samples, at what rate."""
    first = samples["metric"].cat.codes.to_numpy()
    dev = samples["device"].to_numpy()
    one = (first == first[0]) & (dev == dev[0])
    t = samples["t"].to_numpy()[one]
    rate = f", {1e9 / float(np.median(np.diff(t))) / 1e3:.3g} kHz" if len(t) > 1 and np.median(np.diff(t)) > 0 else ""
    return (f"{samples['metric'].nunique()} metrics on {len(np.unique(dev))} GPU(s){rate}, "
            f"{len(samples):,} samples (nsys --gpu-metrics-devices)")
