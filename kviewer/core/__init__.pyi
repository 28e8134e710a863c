"""Names of :mod:`kviewer.core`, imported on first use (``lazy_loader.attach_stub``)."""

from . import diagnostics as diagnostics
from . import groups as groups
from . import intervals as intervals
from . import jsonout as jsonout
from . import names as names
from . import schema as schema
from . import text as text
from . import trace as trace
from .diagnostics import Diagnostic as Diagnostic
from .schema import TABLES as TABLES, make_table as make_table, make_table_mapped as make_table_mapped
from .trace import NcuCapture as NcuCapture, Trace as Trace, TraceMeta as TraceMeta
