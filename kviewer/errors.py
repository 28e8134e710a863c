"""Typed errors.

Every error a user can cause names the file and the problem in one line, so the CLI can print
``str(err)`` and the GUI can show it in a dialog without a traceback.
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


class LoadCancelled(KViewerError):
    """The user cancelled a load; not an error to report."""


class AnalysisError(KViewerError):
    """An analysis could not run on the given trace (e.g. unknown device)."""


class QueryError(KViewerError):
    """A SQL query over the unified model failed (bad SQL, a write, a timeout); the text is one line."""


class ReportUnavailable(AnalysisError):
    """A report (``kviewer stats --report``) needs what the trace does not hold.

    ``report`` is the report's name and ``lacks`` what the file lacks, in words; ``path`` the file.
    """

    def __init__(self, path: str | os.PathLike[str], report: str, lacks: str):
        self.path = os.fspath(path)
        self.report = report
        self.lacks = lacks
        super().__init__(f"{self.path}: {report}: the file has {lacks}")
