"""Names of :mod:`kviewer`, imported on first use (``lazy_loader.attach_stub``)."""

from . import analysis as analysis
from . import cli as cli
from . import core as core
from . import desktop as desktop
from . import errors as errors
from . import fleet as fleet
from . import io as io
from . import report as report
from . import session as session
from . import sqldb as sqldb
from . import tempdir as tempdir
from . import ui as ui

__version__: str
