"""The Trace: one profiler output in the unified model."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from kviewer.core import schema
from kviewer.core.diagnostics import Diagnostic


@dataclass(frozen=True)
class NcuCapture:
    """How an Nsight Compute report chose its kernels (from the ncu command line it records)."""

    launch_skip: int | None = None
    """``--launch-skip/-s``: launches skipped before the first profiled one"""
    launch_count: int | None = None
    """``--launch-count/-c``"""
    kernel_filter: str | None = None
    """``--kernel-name/-k``: only launches of matching kernels were profiled (and counted by the skip)"""
    skip_before_match: bool = False
    """``--launch-skip-before-match``: the skip counts every launch, not only the matching ones"""


@dataclass
class TraceMeta:
    """What a trace is and where it came from.

    Attributes
    ----------
    path
        The file or folder it was loaded from.
    source_format
        Short machine name of the format, e.g. ``"torch"``, ``"nsys"``, ``"ncu-rep"``.
    format_label
        Human name of the detected format variant, e.g. "PyTorch profiler (Kineto) JSON, 2021 schema".
    tool, tool_version
        The profiler that wrote it and its version, when the file says.
    origin_ns
        Epoch nanoseconds of time 0 when the source knows it, else None. Every time in the
        tables is relative to it, so two traces can be aligned.
    time_zero
        What time 0 of the tables is, in words: ``"session start"`` for Nsight Systems (its
        tables count from the profiling session's start, as its own GUI does), ``"trace start"``
        for the formats whose times are made relative to their first event. Every surface (the
        timeline, the tables, Details, SQL, the CLI) shows the tables' times as they are, and
        says so with :attr:`clock`.
    ranks
        Distributed ranks the trace covers (empty when not distributed).
    warnings
        Things the user should know about the load (e.g. a truncated file loaded partially), as
        :class:`~kviewer.core.diagnostics.Diagnostic` (decide on ``kind``; ``message`` is for people).
    host, program
        The machine and the profiled program (the executable's name) when the source says
        (Nsight Systems does), else "": a folder's rank files of different programs are not one
        run's ranks.
    extra
        Anything else the source says that is worth showing (schema version, host, command): for
        display only, no code decides on it (typed fields below carry what code reads).
    ncu_capture
        For an Nsight Compute report, how it chose its kernels (None otherwise or when unknown).
    summary_only, timeline_needs
        A per-name summary file without dispatch times (rocprof ``--stats``), and the line saying
        which file of the same run has the timeline.
    """

    path: str
    source_format: str
    format_label: str = ""
    tool: str = ""
    tool_version: str = ""
    origin_ns: int | None = None
    time_zero: str = "trace start"
    ranks: list[int] = field(default_factory=list)
    host: str = ""
    program: str = ""
    warnings: list[Diagnostic] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    ncu_capture: NcuCapture | None = None
    summary_only: bool = False
    """The file is a profiler's own per-name summary (``kernel_stats``) with no dispatch times:
    there is no timeline and no per-kernel table; ``timeline_needs`` says what file would give one."""
    timeline_needs: str = ""
    """For a summary-only trace, the one line the timeline shows instead of lanes."""
    source_id: Any = field(default=None, compare=False, repr=False)
    """The identity of the file as it was loaded (a :class:`kviewer.io.cache.SourceId`: stat and
    content digest, taken once by :func:`kviewer.io.load` with the cache on), for the analysis
    cache; None when the cache was off. Not stored in the cache's metadata."""

    @property
    def clock(self) -> str:
        """How its times are counted, for axis labels and table headers: ``"since session start"``."""
        return f"since {self.time_zero}"

    def warning_texts(self) -> list[str]:
        """The warnings' messages, in order (what the CLI, its JSON and the report print)."""
        return [d.message for d in self.warnings]

@dataclass
class Trace:
    """A loaded trace: metadata and the tables declared in :mod:`kviewer.core.schema`."""

    meta: TraceMeta
    kernels: pd.DataFrame = field(default_factory=lambda: schema.empty("kernels"))
    gpu_ops: pd.DataFrame = field(default_factory=lambda: schema.empty("gpu_ops"))
    cpu_slices: pd.DataFrame = field(default_factory=lambda: schema.empty("cpu_slices"))
    flows: pd.DataFrame = field(default_factory=lambda: schema.empty("flows"))
    devices: pd.DataFrame = field(default_factory=lambda: schema.empty("devices"))
    metrics: pd.DataFrame = field(default_factory=lambda: schema.empty("metrics"))
    graph_launches: pd.DataFrame = field(default_factory=lambda: schema.empty("graph_launches"))
    memory: pd.DataFrame = field(default_factory=lambda: schema.empty("memory"))
    kernel_stats: pd.DataFrame = field(default_factory=lambda: schema.empty("kernel_stats"))
    gpu_samples: pd.DataFrame = field(default_factory=lambda: schema.empty("gpu_samples"))
    cpu_samples: pd.DataFrame = field(default_factory=lambda: schema.empty("cpu_samples"))

    def table(self, name: str) -> pd.DataFrame:
        if name not in schema.TABLES:
            raise KeyError(name)
        df: pd.DataFrame = getattr(self, name)
        return df

    @property
    def stats_only(self) -> bool:
        """The kernels are known only from a per-name summary file (``meta.summary_only``, no
        kernel rows): ``kernel_stats`` holds the file's own numbers, there are no times."""
        return self.meta.summary_only and not len(self.kernels)

    def sizes(self) -> dict[str, int]:
        """Row count of every table."""
        return {name: len(self.table(name)) for name in schema.TABLES}

    def span_ns(self) -> tuple[int, int] | None:
        """First start and last end over kernels, GPU ops and CPU slices; None when all empty."""
        lo: int | None = None
        hi: int | None = None
        for name in ("kernels", "gpu_ops", "cpu_slices"):
            df = self.table(name)
            if len(df):
                s = int(df["start"].min())
                e = int(df["end"].max())
                lo = s if lo is None else min(lo, s)
                hi = e if hi is None else max(hi, e)
        if lo is None or hi is None:
            return None
        return lo, hi

    def validate(self) -> None:
        """Check that every table has exactly the schema's columns (for tests and loaders)."""
        for name, spec in schema.TABLES.items():
            df = self.table(name)
            if list(df.columns) != spec.names:
                missing = set(spec.names) - set(df.columns)
                extra = set(df.columns) - set(spec.names)
                raise AssertionError(f"{name}: missing {sorted(missing)}, extra {sorted(extra)}")
