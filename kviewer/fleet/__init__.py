"""``kviewer fleet``: the analyses of a run's ranks, and of many runs, over thousands of files.

Each file is parsed where it lies -- on a Dask worker (:mod:`kviewer.fleet.engine`) -- into a
:class:`~kviewer.fleet.record.FileSummary`: a few small tables (steps, kernel groups, GPU time
split), never the trace. The client combines the summaries (:mod:`kviewer.fleet.analyze`) and
writes tables, a SQLite database and a report (:mod:`kviewer.fleet.write`).

Dask is imported only by :mod:`kviewer.fleet.engine`, and only when a fleet runs.
"""

import lazy_loader

# submodules (and the names in __init__.pyi) are imported on first use
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
