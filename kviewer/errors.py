"""Typed errors: every error kviewer raises on purpose derives from :class:`KViewerError`.

Every error a user can cause names the file and the problem in one line, so the CLI can print
``str(err)`` and the GUI can show it in a dialog without a traceback. The parts of that line are
fields too (``path``, ``problem``, ``advice``): a view that shows the file elsewhere, or that offers
its own remedy instead of the command line's, takes the part it needs and never cuts the text.
"""

from __future__ import annotations

import os


class KViewerError(Exception):
    """Base of every error kviewer raises on purpose."""


class LoadError(KViewerError):
    """A file could not be loaded.

    Parameters
    ----------
    path
        The file (or folder) that was being read.
    problem
        What was wrong, in words a user understands.
    recognised
        What the file was recognised as, if anything (e.g. "Nsight Systems SQLite export").
    """

    def __init__(self, path: str | os.PathLike[str], problem: str, recognised: str | None = None):
        self.path = os.fspath(path)
        self.problem = problem
        self.recognised = recognised
        what = f" ({recognised})" if recognised else ""
        super().__init__(f"{self.path}{what}: {problem}")


class UnsupportedFormat(LoadError):
    """No loader recognises the file's content."""


class CorruptTrace(LoadError):
    """The file is of a known format but its content is damaged or inconsistent."""


class TruncatedTrace(CorruptTrace):
    """The file ends before anything usable could be read (a partial load is not an error)."""


class MissingDependency(LoadError):
    """The format is recognised but an optional package needed to read it is not installed."""


class MemoryLimitExceeded(LoadError):
    """A load would need more memory than the budget (``KVIEWER_MAX_MEMORY``) allows; stopped
    before the operating system had to step in."""


class NotOneRun(LoadError):
    """A folder's trace files do not belong together as one run's ranks (decided on data: their
    recorded times lie far apart, or they profiled different programs); they are not merged.

    ``reason`` is what told them apart (``"times"`` or ``"programs"``), for code to decide on;
    ``groups`` the files, grouped by the run each belongs to (open them one by one to see them
    side by side)."""

    def __init__(self, path: str | os.PathLike[str], problem: str, recognised: str | None = None, *,
                 reason: str, groups: list[list[str]]):
        super().__init__(path, problem, recognised)
        self.reason = reason
        self.groups = groups


class LoadCancelled(KViewerError):
    """The user cancelled a load; not an error to report."""


class AnalysisError(KViewerError):
    """An analysis could not run on the given trace (e.g. unknown device).

    Parameters
    ----------
    problem
        What was wrong, in words a user understands (without the file or the advice).
    path
        The trace's file, when the problem is about one.
    advice
        What to do about it on the command line (e.g. "pass --device with one of: ..."); a window
        that offers a device picker shows ``problem`` alone.

    ``str(err)`` is ``"{path}: {problem}; {advice}"`` (the parts that are there).
    """

    def __init__(self, problem: str, *, path: str | os.PathLike[str] | None = None, advice: str | None = None):
        self.problem = problem
        self.path = os.fspath(path) if path is not None else None
        self.advice = advice
        text = f"{self.path}: {problem}" if self.path else problem
        super().__init__(f"{text}; {advice}" if advice else text)


class UserError(KViewerError):
    """A problem the user can fix (bad option, bad file): one line, exit 2 from the CLI.

    ``hint``: what to do instead, when there is more to say than the problem; the CLI prints it on
    a second line of its own (each line made safe for the terminal on its own).
    """

    def __init__(self, message: str = "", hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class CacheProblem(KViewerError):
    """The trace cache could not read, store or trust something. Never fails a load: the cache
    is bypassed and, where the user should know, a ``cache`` diagnostic says so."""


class QueryError(KViewerError):
    """A SQL query over the unified model failed (bad SQL, a write, a timeout); the text is one line."""


class ReportUnavailable(AnalysisError):
    """A report (``kviewer stats --report``) needs what the trace does not hold.

    ``report`` is the report's name and ``lacks`` what the file lacks, in words; ``path`` the file.
    """

    def __init__(self, path: str | os.PathLike[str], report: str, lacks: str):
        self.report = report
        self.lacks = lacks
        super().__init__(f"{report}: the file has {lacks}", path=path)
