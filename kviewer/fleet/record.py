"""One file's summary: what a worker sends back instead of the trace.

:func:`summarize_file` runs on a worker: it reads one trace (a local path or an fsspec URL),
and reduces it to a :class:`FileSummary` of a few kilobytes -- the steps as
:func:`kviewer.analysis.ranks.step_times` finds them, the kernel groups (short names) with their
count, total, sum of squares, min and max (enough to pool means and variances exactly across
ranks), and the GPU time split into communication, compute, their overlap and idle time.

A file that cannot be read comes back as a summary with ``error`` set (and ``error_kind``, the
error's class name, to decide on): one bad rank never fails a fleet.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kviewer import analysis, io as kio
from kviewer.analysis.collectives import is_communication
from kviewer.analysis.kinds import op_kind
from kviewer.analysis.mfu import FLEET_FIELDS
from kviewer.analysis.ranks import rank_steps, step_times
from kviewer.analysis.steps import busy_ns
from kviewer.errors import KViewerError, LoadError
from kviewer.io.memory import parse_size

if TYPE_CHECKING:
    import kviewer.io.ranks
    import kviewer.io.registry
    import kviewer.io.source

#: the step columns a summary keeps (those of :data:`kviewer.analysis.ranks.STEP_COLUMNS` less rank,
#: then the MFU inputs of :data:`kviewer.analysis.mfu.FLEET_FIELDS`, NaN where unknown)
STEP_FIELDS = ["step", "name", "start", "end", "dur", "kernel_ns", "busy_ns", "kernel_count",
               "step_ns", "model_flops", "hardware_flops", "unknown_ns", "peak_flops", "sol_ns"]
_FLOAT_FIELDS = frozenset(STEP_FIELDS[9:])
GROUP_FIELDS = ["group", "comm", "count", "total_ns", "sumsq_ns2", "min_ns", "max_ns"]
#: GPU time of a file, ns (NaN where unknown: a file without kernels has no GPU time to split)
TIME_FIELDS = ["kernel_ns", "busy_ns", "comm_ns", "compute_ns", "overlap_ns", "exposed_comm_ns", "idle_ns", "span_ns"]


@dataclass
class FileSummary:
    """What one rank file contributes to a fleet (small: a few tables of numbers)."""

    path: str
    run: str
    name: str
    """the file name (rank numbers are read from it)"""
    format: str = ""
    rank_in_file: int | None = None
    """the rank the file itself says (``distributedInfo``), None when it does not"""
    kernels: int = 0
    times: dict[str, float] = field(default_factory=dict)
    """:data:`TIME_FIELDS` -> ns (NaN: unknown)"""
    steps: pd.DataFrame = field(default_factory=lambda: empty_steps())
    groups: pd.DataFrame = field(default_factory=lambda: empty_groups())
    warnings: list[str] = field(default_factory=list)
    error: str = ""
    error_kind: str = ""
    """class name of the error (``UnsupportedFormat``, ``CorruptTrace``, ``WorkerLost`` …)"""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error


def empty_steps() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else "float64" if c in _FLOAT_FIELDS else "int64") for c in STEP_FIELDS})


def empty_groups() -> pd.DataFrame:
    return pd.DataFrame(
        {c: pd.Series(dtype=object if c == "group" else bool if c == "comm" else "float64" if c == "sumsq_ns2" else "int64") for c in GROUP_FIELDS}
    )


def is_url(path: str) -> bool:
    """``s3://…``, ``gs://…``; not a local path (``file://`` counts as local)."""
    return "://" in path and not path.startswith("file://")


def summarize_file(path: str, run: str = "") -> FileSummary:
    """Read one trace and reduce it to its :class:`FileSummary` (runs on a worker)."""
    t0 = time.perf_counter()
    name = path.rstrip("/").rsplit("/", 1)[-1]
    out = FileSummary(path=path, run=run, name=name)
    tmpdir = ""
    try:
        local = path
        if is_url(path):
            tmpdir = tempfile.mkdtemp(prefix="kviewer-fleet-")
            local = _fetch(path, os.path.join(tmpdir, name))
        elif path.startswith("file://"):
            local = path[len("file://"):]
        _summarize(Path(local), out)
    except KViewerError as exc:
        out.error, out.error_kind = str(exc), type(exc).__name__
    except ImportError as exc:  # the fsspec protocol's package is missing on this worker
        out.error, out.error_kind = f"{path}: {exc}", "MissingDependency"
    except OSError as exc:
        out.error, out.error_kind = f"{path}: {exc.strerror or exc}", "OSError"
    except Exception as exc:  # noqa: BLE001 - a loader bug costs this file only
        out.error, out.error_kind = f"{path}: {type(exc).__name__}: {exc}", type(exc).__name__
    finally:
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
    out.seconds = time.perf_counter() - t0
    return out


def max_url_bytes() -> int:
    """The most bytes one URL input may bring (``KVIEWER_MAX_URL_BYTES``, e.g. ``2G``; by default
    the cap on one file's decompressed bytes, :func:`kviewer.io.source.max_decompressed`)."""
    value = os.environ.get("KVIEWER_MAX_URL_BYTES", "").strip()
    if value:
        try:
            return parse_size(value)
        except ValueError:
            pass
    return kio.source.max_decompressed()


def _fetch(url: str, dest: str) -> str:
    """Copy a URL's bytes to ``dest``, at most :func:`max_url_bytes` (and never filling the disk):
    a larger file is refused before or while it is read."""
    import fsspec

    cap = max_url_bytes()
    try:
        cap = min(cap, max(shutil.disk_usage(os.path.dirname(dest)).free - 256 * 1024**2, 0))
    except OSError:
        pass
    too_big = f"brings more than {cap:,} bytes (the cap on a URL input: KVIEWER_MAX_URL_BYTES, or the free disk); not fetched"
    with fsspec.open(url, "rb") as src:
        size = getattr(src, "size", None)
        if isinstance(size, int) and size > cap:
            raise LoadError(url, too_big)
        with open(dest, "wb") as dst:
            copied = 0
            while block := src.read(1 << 20):
                copied += len(block)
                if copied > cap:
                    raise LoadError(url, too_big)
                dst.write(block)
    return dest


def _summarize(path: Path, out: FileSummary) -> None:
    # no trace cache: a fleet reads each rank once, and a cache of thousands of ranks would
    # fill the workers' disks
    trace = kio.registry.load(path, use_cache=False)
    out.format = trace.meta.source_format
    out.rank_in_file = kio.ranks.rank_in_trace(trace, kio.source.read_head(path))
    out.warnings = trace.meta.warning_texts()
    per_rank = rank_steps(trace)  # once, for the step times and the MFU
    st = step_times(trace, per_rank)
    if len(st) and st["rank"].nunique() > 1:
        # one file is one rank of a fleet; a file holding several keeps its first rank's steps
        first = int(st["rank"].min())
        out.warnings.append(f"holds the steps of {st['rank'].nunique()} ranks; rank {first}'s are used")
        st = st[st["rank"] == first]
    if len(st):
        m = analysis.mfu.mfu_or_unknown(trace, per_rank=per_rank).steps
        m = m[m["rank"] == int(st["rank"].iloc[0])][["step", *FLEET_FIELDS]] if len(m) else m
        st = st.merge(m.astype({c: "float64" for c in FLEET_FIELDS}), on="step", how="left") if len(m) else st.assign(**{c: float("nan") for c in FLEET_FIELDS})
    out.steps = st[STEP_FIELDS].reset_index(drop=True) if len(st) else empty_steps()

    k = trace.kernels
    out.kernels = len(k)
    nan = float("nan")
    if not len(k):
        out.times = {f: nan for f in TIME_FIELDS}
        out.times["kernel_ns"] = 0.0
        hs, he = cpu_collectives(trace)
        if len(hs):
            # a CPU-only rank (gloo): its collectives are its communication, none of it hidden
            out.times["comm_ns"] = out.times["exposed_comm_ns"] = float(busy_ns(hs, he, np.zeros(len(hs), dtype=np.int64)))
        return
    group = k["short_name"].astype(str).to_numpy()
    comm = is_communication(k["name"])
    dur = k["dur"].to_numpy(dtype=np.int64)
    df = pd.DataFrame({"group": group, "comm": comm, "dur": dur, "sq": dur.astype(np.float64) ** 2})
    g = df.groupby("group", sort=True)
    out.groups = pd.DataFrame(
        {
            "comm": g["comm"].any(),
            "count": g.size().astype(np.int64),
            "total_ns": g["dur"].sum().astype(np.int64),
            "sumsq_ns2": g["sq"].sum().astype(np.float64),
            "min_ns": g["dur"].min().astype(np.int64),
            "max_ns": g["dur"].max().astype(np.int64),
        }
    ).reset_index()[GROUP_FIELDS]

    ks, ke, kd = k["start"].to_numpy(dtype=np.int64), k["end"].to_numpy(dtype=np.int64), k["device"].to_numpy(dtype=np.int64)
    ops = trace.gpu_ops
    os_, oe, od = ops["start"].to_numpy(dtype=np.int64), ops["end"].to_numpy(dtype=np.int64), ops["device"].to_numpy(dtype=np.int64)
    all_s, all_e, all_d = np.concatenate([ks, os_]), np.concatenate([ke, oe]), np.concatenate([kd, od])
    busy = busy_ns(all_s, all_e, all_d)
    # communication: the collective kernels (NCCL, RCCL), or where a rank has none, the CPU-side
    # collectives (gloo, and any c10d collective on the host): the time the rank spent in them
    cs, ce, cd = ks[comm], ke[comm], kd[comm]
    if not comm.any():
        hs, he = cpu_collectives(trace)
        if len(hs):
            dev = int(kd[0]) if len(kd) else 0  # one rank, one GPU: host collectives against its timeline
            cs, ce, cd = hs, he, np.full(len(hs), dev, dtype=np.int64)
    comm_ns = busy_ns(cs, ce, cd)
    compute_ns = busy_ns(ks[~comm], ke[~comm], kd[~comm])
    overlap = comm_ns + compute_ns - busy_ns(np.concatenate([cs, ks[~comm]]), np.concatenate([ce, ke[~comm]]), np.concatenate([cd, kd[~comm]]))
    # idle: inside the steps when there are steps -- per step and device, the gaps between the
    # step's first and last GPU activity (the time between steps and the warm-up before them is
    # not the GPU waiting within the work); else per device, between its first and last activity
    span = 0
    idle = 0.0
    if len(st):
        # each step clips only the activities that can reach into it: by start order, those from
        # the first whose furthest end so far passes the step's start to the last starting before its end
        by_start = np.argsort(all_s, kind="stable")
        ss, se, sd = all_s[by_start], all_e[by_start], all_d[by_start]
        reach = np.maximum.accumulate(se) if len(se) else se
        for s0, s1 in zip(st["start"].to_numpy(dtype=np.int64), st["end"].to_numpy(dtype=np.int64)):
            lo, hi = int(np.searchsorted(reach, s0, side="right")), int(np.searchsorted(ss, s1, side="left"))
            cut_s, cut_e, cut_d = np.clip(ss[lo:hi], s0, s1), np.clip(se[lo:hi], s0, s1), sd[lo:hi]
            live = cut_e > cut_s
            for d in np.unique(cut_d[live]):
                sel = live & (cut_d == d)
                window = int(cut_e[sel].max() - cut_s[sel].min())
                idle += float(window - busy_ns(cut_s[sel], cut_e[sel], cut_d[sel]))
    for d in np.unique(all_d):
        sel = all_d == d
        span += int(all_e[sel].max() - all_s[sel].min())
    if not len(st):
        idle = float(span - busy)
    out.times = {
        "kernel_ns": float(dur.sum()),
        "busy_ns": float(busy),
        "comm_ns": float(comm_ns),
        "compute_ns": float(compute_ns),
        "overlap_ns": float(overlap),
        "exposed_comm_ns": float(comm_ns - overlap),
        "idle_ns": idle,
        "span_ns": float(span),
    }


def cpu_collectives(trace: object) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the host-side collective ops of a trace (``gloo:all_reduce``,
    ``c10d::allreduce_``, ``record_param_comms``: the taxonomy's communication ops), ns."""
    c = getattr(trace, "cpu_slices")
    if not len(c):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    names = c["name"].astype(str)
    uniq = names.unique()
    is_comm = {n: op_kind(n) == "communication" for n in uniq}
    sel = names.map(is_comm).to_numpy(dtype=bool)
    start = c["start"].to_numpy(dtype=np.int64)[sel]
    end = c["end"].to_numpy(dtype=np.int64)[sel]
    return start, end
