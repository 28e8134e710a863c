"""Diagnostics: what a load (or the app, about a trace) wants the user to know, as data.

A loader that salvages a cut file says so with ``Diagnostic(kind="truncated", ...)``; the cache,
the UI and the tests decide on ``kind`` (never on the words of ``message``, which are for people
and may be reworded freely). The message text is what the CLI, the report and the window show.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, get_args

DiagnosticKind = Literal[
    # the input ends early or is cut (a writer that died, a cut download, a damaged stream):
    # everything before the cut was loaded
    "truncated",
    # values or records in the input are damaged (unreadable names, non-numbers where numbers
    # belong); they are shown as unknown
    "damaged",
    # records that are readable but unusable were left out (odd field types, lines that are not
    # CSV records, ranges that never end, a file with a header and no rows)
    "skipped",
    # invalid text encoding was replaced (U+FFFD)
    "encoding",
    # kernels without measured times are laid end to end (ncu replays, counter-only rocprof)
    "serialised",
    # times cannot be placed on a wall clock, or files of one run do not line up in time
    "time_origin",
    # a device the trace does not describe was assumed to be a described one
    "device_assumed",
    # the trace's GPU is not recognised: no speed of light, kernels not coloured by bound
    "unknown_device",
    # ranks of a folder of rank traces were assigned from file names or file order
    "ranks_assumed",
    # parts of the input contradict each other (an end before its begin, counters of another
    # run, a kernel id without a symbol); what could not be joined is left out or clamped
    "inconsistent",
    # a metric every kernel should have is missing for some of them
    "missing_values",
    # parts of the input were not loaded by design (extra processes, non-member files, sidecars)
    "ignored",
    # the input holds no events of a kind the viewer expects (no kernels table, no events)
    "empty",
    # the trace cache was damaged and rebuilt, or is not used (not private)
    "cache",
    # events of categories the loader does not know were kept as plain CPU slices ('other'),
    # counted per category (never dropped silently)
    "unknown_category",
    # collective kernels of several ranks that could not be matched to the same collective on the
    # other ranks (the ranks are not one job, counts or times do not line up): no cross-rank
    # dependency is drawn for them
    "unmatched_collectives",
]
Severity = Literal["info", "warning", "error"]

KINDS: tuple[str, ...] = get_args(DiagnosticKind)

#: kinds that say the load saw only part of the input (a cut file may be a file still being
#: written: such a load is never cached)
PARTIAL_KINDS: frozenset[str] = frozenset({"truncated", "damaged"})


@dataclass(frozen=True)
class Diagnostic:
    """One thing the user should know about a trace.

    Attributes
    ----------
    kind
        What happened, as data (see :data:`DiagnosticKind`): code decides on this.
    severity
        ``info``, ``warning`` or ``error``.
    file
        The file (or folder) it is about ("" when no one file).
    message
        The text shown to people (CLI, report, window); never parsed.
    """

    kind: DiagnosticKind
    severity: Severity
    file: str
    message: str

    def __str__(self) -> str:
        return self.message

    @property
    def partial(self) -> bool:
        """True when the load that reported it saw only part of its input."""
        return self.kind in PARTIAL_KINDS

    @classmethod
    def warning(cls, kind: DiagnosticKind, file: str | os.PathLike[str], message: str) -> Diagnostic:
        return cls(kind, "warning", os.fspath(file), message)

    def about(self, file: str | os.PathLike[str], prefix: str) -> Diagnostic:
        """The same diagnostic about a part of a bigger input (a rank of a folder): ``prefix: message``."""
        return Diagnostic(self.kind, self.severity, os.fspath(file), f"{prefix}: {self.message}")


__all__ = ["KINDS", "PARTIAL_KINDS", "Diagnostic", "DiagnosticKind", "Severity"]
